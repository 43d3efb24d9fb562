// NCCL under the host runtime (tests/cuda_host/nccl.cpp, NCCL over MPI), run under mpirun with
// known answers: all-gather, reduce-scatter and all-reduce sums (in place and not; fp32, fp64,
// int32, bf16), bf16 rounding (ties to even, overflow, NaN) and
// bit-identical results on every rank, broadcast, grouped send/receive in a ring with a self-send,
// ncclCommSplit, the shim's refusals (ids, ranks, arguments), and what NCCL 2.28 refuses and the
// shim must refuse too: a non-blocking communicator used before its last operation settled (the
// parent of a split above all), two ranks on one GPU, mismatched split calls, any use after
// abort. Written against NCCL's API
// only, so that it also compiles with nvcc and the real <nccl.h>; the checks of the shim's own
// behaviour are under CUDA_HOST.
// NCCL operations captured in a CUDA graph and launched again, between eager calls.
// Two communicators used from two streams check that results do not depend on the order in
// which the host runtime interleaves the streams (the suite runs it under several seeds).
//   test_nccl [--lazy-mpi]   --lazy-mpi: leave MPI's initialisation and finalization to the shim
//   test_nccl --die recv-never-sent   a receive nobody sends (host runtime, one rank, with
//                                     CUDA_HOST_SCHEDULE_TIMEOUT_S): must end with a report
#include "model/cuda_common.cuh"
#ifdef CUDA_HOST
#include "tests/cuda_host/host_nccl.h"
#else
#include <nccl.h>
#endif
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me, N, mpi_rank;  // NCCL rank (the MPI rank reversed) and size of `world`
static ncclComm_t world;
static cudaStream_t stream;
static int failures, checks;

static void expect(int ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect(int ok, const char* fmt, ...) {
    checks++;
    if (ok && mpi_rank != 0) return;  // one "ok" line per check, failures from every rank
    va_list ap;
    va_start(ap, fmt);
    printf(ok ? "ok   " : "FAIL rank %d: ", mpi_rank);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (!ok) failures++;
}

// An NCCL call that must succeed; otherwise the job ends (the other ranks would wait forever).
#define NCCL_OK(call)                                                                          \
    do {                                                                                       \
        ncclResult_t r_ = (call);                                                              \
        if (r_ != ncclSuccess) {                                                               \
            fprintf(stderr, "rank %d: %s:%d: %s failed: %s: %s\n", mpi_rank, __FILE__, __LINE__, \
                    #call, ncclGetErrorString(r_), ncclGetLastError(NULL));                    \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)

// --- Typed values in device buffers -------------------------------------------------------------

static size_t type_size(ncclDataType_t t) { return t == ncclFloat64 ? 8 : t == ncclBfloat16 ? 2 : 4; }
static const char* type_name(ncclDataType_t t) {
    return t == ncclFloat32 ? "fp32" : t == ncclFloat64 ? "fp64" : t == ncclInt32 ? "int32" : "bf16";
}

static void put(ncclDataType_t t, void* p, size_t i, double v) {
    switch (t) {
        case ncclFloat32: ((float*)p)[i] = (float)v; break;
        case ncclFloat64: ((double*)p)[i] = v; break;
        case ncclInt32: ((int32_t*)p)[i] = (int32_t)v; break;
        default: ((uint16_t*)p)[i] = __bfloat16_as_ushort(__float2bfloat16((float)v)); break;
    }
}

static double get(ncclDataType_t t, const void* p, size_t i) {
    switch (t) {
        case ncclFloat32: return ((const float*)p)[i];
        case ncclFloat64: return ((const double*)p)[i];
        case ncclInt32: return ((const int32_t*)p)[i];
        default: return __bfloat162float(__ushort_as_bfloat16(((const uint16_t*)p)[i]));
    }
}

static void* dev_alloc(size_t bytes) {
    void* p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
}
static void to_dev(void* d, const void* h, size_t bytes) { CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); }
static void from_dev(void* h, const void* d, size_t bytes) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

// Small integers: every sum, max and min below is exact in bf16, and products in fp32 and int32.
static double value(int rank, size_t i) { return (double)((rank + 1) * (int)(i % 5 + 1) - 3 * (int)(i % 2)); }

// Index of the first element of got (n values) that differs from want, or -1.
static long first_mismatch(ncclDataType_t t, const void* got, const double* want, size_t n, double rtol) {
    for (size_t i = 0; i < n; i++) {
        double g = get(t, got, i);
        if (!(fabs(g - want[i]) <= rtol * fabs(want[i]))) return (long)i;
    }
    return -1;
}

static void expect_values(ncclDataType_t t, const void* got, const double* want, size_t n, double rtol,
                          const char* what) {
    long bad = first_mismatch(t, got, want, n, rtol);
    if (bad < 0)
        expect(1, "%s %s: %zu values", what, type_name(t), n);
    else
        expect(0, "%s %s: element %ld is %g, expected %g", what, type_name(t), bad, get(t, got, (size_t)bad), want[bad]);
}

// --- Collectives with known answers -------------------------------------------------------------

static void test_all_gather(ncclDataType_t t, int in_place) {
    const size_t n = 3, size = type_size(t);
    char* host = (char*)malloc(N * n * size);
    double* want = (double*)malloc(N * n * sizeof(double));
    char* recv = (char*)dev_alloc(N * n * size);
    char* send = in_place ? recv + me * n * size : (char*)dev_alloc(n * size);
    for (size_t i = 0; i < N * n; i++) put(t, host, i, -1.0);  // what must be overwritten
    for (size_t i = 0; i < n; i++) put(t, host + me * n * size, i, value(me, i) - 7);
    for (int r = 0; r < N; r++)
        for (size_t i = 0; i < n; i++) want[r * n + i] = value(r, i) - 7;
    to_dev(recv, host, N * n * size);
    if (!in_place) to_dev(send, host + me * n * size, n * size);
    NCCL_OK(ncclAllGather(send, recv, n, t, world, stream));
    from_dev(host, recv, N * n * size);
    expect_values(t, host, want, N * n, 0.0, in_place ? "all-gather in place" : "all-gather");
    if (!in_place) CUDA_CHECK(cudaFree(send));
    CUDA_CHECK(cudaFree(recv));
    free(want);
    free(host);
}

static void test_reduce_scatter(ncclDataType_t t, int in_place) {
    const size_t n = 3, size = type_size(t);
    char* host = (char*)malloc(N * n * size);
    double want[n];
    char* send = (char*)dev_alloc(N * n * size);
    char* recv = in_place ? send + me * n * size : (char*)dev_alloc(n * size);
    for (size_t j = 0; j < N * n; j++) put(t, host, j, value(me, j));
    for (size_t i = 0; i < n; i++) {
        want[i] = 0;
        for (int r = 0; r < N; r++) want[i] += value(r, me * n + i);
    }
    to_dev(send, host, N * n * size);
    NCCL_OK(ncclReduceScatter(send, recv, n, t, ncclSum, world, stream));
    from_dev(host, recv, n * size);
    expect_values(t, host, want, n, 0.0, in_place ? "reduce-scatter sum in place" : "reduce-scatter sum");
    if (!in_place) CUDA_CHECK(cudaFree(recv));
    CUDA_CHECK(cudaFree(send));
    free(host);
}

static double sum_known(size_t i) {
    double acc = value(0, i);
    for (int r = 1; r < N; r++) acc += value(r, i);
    return acc;
}

static void test_all_reduce(ncclDataType_t t, size_t n, int in_place) {
    const size_t size = type_size(t);
    char* host = (char*)malloc(n * size);
    double* want = (double*)malloc(n * sizeof(double));
    char* recv = (char*)dev_alloc(n * size);
    char* send = in_place ? recv : (char*)dev_alloc(n * size);
    for (size_t i = 0; i < n; i++) {
        put(t, host, i, value(me, i));
        want[i] = sum_known(i);
    }
    to_dev(send, host, n * size);
    NCCL_OK(ncclAllReduce(send, recv, n, t, ncclSum, world, stream));
    from_dev(host, recv, n * size);
    char what[96];
    snprintf(what, sizeof what, "all-reduce sum of %zu%s", n, in_place ? " in place" : "");
    expect_values(t, host, want, n, 0.0, what);
    if (!in_place) CUDA_CHECK(cudaFree(send));
    CUDA_CHECK(cudaFree(recv));
    free(want);
    free(host);
}

// --- 16-bit rounding ----------------------------------------------------------------------------

// Sums where NCCL rank 0 gives a, rank 1 gives b and the others +0, so that any summation order
// rounds once: the answers are known bits.
typedef struct {
    uint16_t a, b, sum;
    const char* what;
} Pair16;

static int is_nan_bf16(uint16_t v) { return (v & 0x7f80) == 0x7f80 && (v & 0x7f); }

static void test_pairs16(ncclDataType_t t, const Pair16* cases, int n, const char* name) {
    uint16_t host[16], *d = (uint16_t*)dev_alloc(sizeof host);
    for (int i = 0; i < n; i++) host[i] = me == 0 ? cases[i].a : me == 1 ? cases[i].b : 0;
    to_dev(d, host, n * sizeof *host);
    NCCL_OK(ncclAllReduce(d, d, n, t, ncclSum, world, stream));
    from_dev(host, d, n * sizeof *host);
    for (int i = 0; i < n; i++) {
        uint16_t want = N == 1 ? cases[i].a : cases[i].sum;
        int ok = is_nan_bf16(want) ? is_nan_bf16(host[i]) : host[i] == want;
        expect(ok, "%s sum %s: 0x%04x (want 0x%04x)", name, N == 1 ? "of one rank" : cases[i].what, host[i], want);
    }
    CUDA_CHECK(cudaFree(d));
}

// Pseudo-random values with full mantissas: summation order matters, yet every rank must get
// the same bits, within the rounding of N-1 additions of the exact sum.
static void test_bf16_identical(int reduce_scatter) {
    enum { n = 64 };
    uint16_t mine[n], sums[n], *all = (uint16_t*)malloc((size_t)N * n * sizeof(uint16_t));
    double exact[n], mag[n];
    for (int i = 0; i < n; i++) exact[i] = mag[i] = 0;
    for (int r = 0; r < N; r++)
        for (int i = 0; i < n; i++) {
            uint32_t h = (uint32_t)(r * 7919 + i * 104729 + 12345) * 2654435761u;
            float v = __bfloat162float(__float2bfloat16((float)((int)(h >> 20) - 2048) / 237.0f));
            if (r == me) mine[i] = __bfloat16_as_ushort(__float2bfloat16(v));
            exact[i] += v;
            mag[i] += fabs(v);
        }
    // reduce-scatter: the rank's block of n/N values (of the first N * (n/N))
    size_t count = reduce_scatter ? n / N : n, off = reduce_scatter ? me * count : 0;
    uint16_t* d = (uint16_t*)dev_alloc(sizeof mine);
    to_dev(d, mine, sizeof mine);
    if (reduce_scatter)
        NCCL_OK(ncclReduceScatter(d, d + off, count, ncclBfloat16, ncclSum, world, stream));
    else
        NCCL_OK(ncclAllReduce(d, d, n, ncclBfloat16, ncclSum, world, stream));
    from_dev(sums, d + off, count * sizeof(uint16_t));
    MPI_Allgather(sums, (int)count, MPI_UINT16_T, all, (int)count, MPI_UINT16_T, MPI_COMM_WORLD);
    int same = 1, close = 1;
    if (!reduce_scatter)
        for (int r = 0; r < N; r++) same &= memcmp(all + r * count, all, count * sizeof(uint16_t)) == 0;
    for (size_t i = 0; i < count; i++) {
        double got = __bfloat162float(__ushort_as_bfloat16(sums[i]));
        close &= fabs(got - exact[off + i]) <= ldexp(mag[off + i], -8) * N;
    }
    const char* what = reduce_scatter ? "bf16 reduce-scatter" : "bf16 all-reduce";
    expect(same, "%s of %d mixed values: the same bits on every rank", what, n);
    expect(close, "%s of %d mixed values: within the rounding of %d additions", what, n, N - 1);
    CUDA_CHECK(cudaFree(d));
    free(all);
}

static void test_rounding(void) {
    static const Pair16 bf16[] = {
        {0x3f80, 0x3b80, 0x3f80, "1 + 2^-8 (a tie, to even: down)"},
        {0x3f81, 0x3b80, 0x3f82, "(1 + 2^-7) + 2^-8 (a tie, to even: up)"},
        {0x3f80, 0x3bc0, 0x3f81, "1 + 1.5 * 2^-8 (to nearest)"},
        {0xbf80, 0x3f80, 0x0000, "-1 + 1 (+0)"},
        {0x7f7f, 0x7f7f, 0x7f80, "max + max (infinity)"},
        {0x7f80, 0x3f80, 0x7f80, "inf + 1"},
        {0x7fc0, 0x3f80, 0x7fc0, "NaN + 1 (NaN)"},
    };
    test_pairs16(ncclBfloat16, bf16, (int)(sizeof bf16 / sizeof *bf16), "bf16");

    // Every rank gives 1 + 2^-7: with 3 ranks the exact 3.0234375 is a tie, rounded to 3.03125.
    static const uint16_t want[] = {0x3f81, 0x4001, 0x4042, 0x4081};
    uint16_t v = 0x3f81, *d = (uint16_t*)dev_alloc(2);
    to_dev(d, &v, 2);
    NCCL_OK(ncclAllReduce(d, d, 1, ncclBfloat16, ncclSum, world, stream));
    from_dev(&v, d, 2);
    if (N <= 4) expect(v == want[N - 1], "bf16 sum of %d x (1 + 2^-7): 0x%04x (want 0x%04x)", N, v, want[N - 1]);
    CUDA_CHECK(cudaFree(d));
    test_bf16_identical(0);
    test_bf16_identical(1);
}

// --- Broadcast, send/receive, split -------------------------------------------------------------

static void test_broadcast(void) {
    const int n = 5, root = N - 1;
    float host[n], want[n];
    float *send = (float*)dev_alloc(sizeof host), *recv = (float*)dev_alloc(sizeof host);
    for (int i = 0; i < n; i++) {
        host[i] = (float)(me * 10 + i);
        want[i] = (float)(root * 10 + i);
    }
    to_dev(send, host, sizeof host);
    NCCL_OK(ncclBroadcast(send, recv, n, ncclFloat32, root, world, stream));
    from_dev(host, recv, sizeof host);
    expect(memcmp(host, want, sizeof host) == 0, "broadcast from rank %d", root);
    NCCL_OK(ncclBroadcast(send, send, n, ncclFloat32, root, world, stream));
    from_dev(host, send, sizeof host);
    expect(memcmp(host, want, sizeof host) == 0, "broadcast in place from rank %d", root);
    int32_t iv[3] = {me, me + 1, me + 2}, iw[3] = {0, 1, 2};
    int32_t* d = (int32_t*)dev_alloc(sizeof iv);
    to_dev(d, iv, sizeof iv);
    NCCL_OK(ncclBcast(d, 3, ncclInt32, 0, world, stream));
    from_dev(iv, d, sizeof iv);
    expect(memcmp(iv, iw, sizeof iv) == 0, "ncclBcast int32 from rank 0");
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(send));
    CUDA_CHECK(cudaFree(recv));
}

// Each rank sends three messages to rank+1 (two of the same shape: they must arrive in order)
// and one to itself, in nested groups; then pairs exchange outside any group.
static void test_send_recv(void) {
    const int next = (me + 1) % N, prev = (me + N - 1) % N;
    float a1[4], a2[4];
    int32_t b[3];
    double s[2];
    for (int i = 0; i < 4; i++) a1[i] = (float)(me * 100 + i), a2[i] = (float)(me * 100 + 50 + i);
    for (int i = 0; i < 3; i++) b[i] = -me - i;
    for (int i = 0; i < 2; i++) s[i] = me + 0.5 + i;
    float *da1 = (float*)dev_alloc(16), *da2 = (float*)dev_alloc(16), *ra1 = (float*)dev_alloc(16),
          *ra2 = (float*)dev_alloc(16);
    int32_t *db = (int32_t*)dev_alloc(12), *rb = (int32_t*)dev_alloc(12);
    double *ds = (double*)dev_alloc(16), *rs = (double*)dev_alloc(16);
    to_dev(da1, a1, 16);
    to_dev(da2, a2, 16);
    to_dev(db, b, 12);
    to_dev(ds, s, 16);
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(da1, 4, ncclFloat32, next, world, stream));
    NCCL_OK(ncclGroupStart());  // nested: only the outermost end posts
    NCCL_OK(ncclRecv(ra1, 4, ncclFloat32, prev, world, stream));
    NCCL_OK(ncclSend(da2, 4, ncclFloat32, next, world, stream));
    NCCL_OK(ncclGroupEnd());
    NCCL_OK(ncclRecv(ra2, 4, ncclFloat32, prev, world, stream));
    NCCL_OK(ncclSend(db, 3, ncclInt32, next, world, stream));
    NCCL_OK(ncclRecv(rb, 3, ncclInt32, prev, world, stream));
    NCCL_OK(ncclSend(ds, 2, ncclFloat64, me, world, stream));
    NCCL_OK(ncclRecv(rs, 2, ncclFloat64, me, world, stream));
    NCCL_OK(ncclGroupEnd());
    from_dev(a1, ra1, 16);
    from_dev(a2, ra2, 16);
    from_dev(b, rb, 12);
    from_dev(s, rs, 16);
    int ok_a = 1, ok_b = 1, ok_s = 1;
    for (int i = 0; i < 4; i++) ok_a &= a1[i] == prev * 100 + i && a2[i] == prev * 100 + 50 + i;
    for (int i = 0; i < 3; i++) ok_b &= b[i] == -prev - i;
    for (int i = 0; i < 2; i++) ok_s &= s[i] == me + 0.5 + i;
    expect(ok_a, "grouped ring: two fp32 messages from rank %d, in the order sent (got %g, %g)", prev, a1[0], a2[0]);
    expect(ok_b, "grouped ring: int32 message from rank %d", prev);
    expect(ok_s, "grouped send to self");

    // Outside a group: even ranks send first, odd ranks receive first.
    const int partner = me ^ 1;
    if (partner < N) {
        int32_t out[5], in[5];
        for (int i = 0; i < 5; i++) out[i] = me * 1000 + i;
        to_dev(db, out, 12);
        if (me % 2 == 0) {
            NCCL_OK(ncclSend(db, 3, ncclInt32, partner, world, stream));
            NCCL_OK(ncclRecv(rb, 3, ncclInt32, partner, world, stream));
        } else {
            NCCL_OK(ncclRecv(rb, 3, ncclInt32, partner, world, stream));
            NCCL_OK(ncclSend(db, 3, ncclInt32, partner, world, stream));
        }
        from_dev(in, rb, 12);
        expect(in[0] == partner * 1000 && in[2] == partner * 1000 + 2, "send/recv outside a group with rank %d", partner);
    }
    void* bufs[] = {da1, da2, ra1, ra2, db, rb, ds, rs};
    for (int i = 0; i < 8; i++) CUDA_CHECK(cudaFree(bufs[i]));
}

// --- Operations captured in a CUDA graph ----------------------------------------------------------

// An in-place all-reduce, a ring exchange (a group of a send and a receive), an all-gather and an
// in-place reduce-scatter, captured on a stream of their own and launched three times with new inputs, with an eager
// all-reduce on the same communicator from another stream before each launch: the capture runs
// nothing and takes no turn on the communicator (the first eager call would wait for it forever),
// and each launch issues its operations in order after the calls made before it.
static void test_graph_capture(void) {
    enum { n = 5, launches = 3 };
    const int next = (me + 1) % N, prev = (me + N - 1) % N;
    float* host = (float*)malloc(sizeof(float) * N * n);   // N * n >= n: every buffer's values
    float *x = (float*)dev_alloc(n * 4), *a = (float*)dev_alloc(n * 4), *r = (float*)dev_alloc(n * 4),
          *g = (float*)dev_alloc(N * n * 4), *y = (float*)dev_alloc(n * 4), *z = (float*)dev_alloc(N * n * 4);
    for (int j = 0; j < n; j++) host[j] = -1.0f;
    to_dev(x, host, n * 4);
    cudaStream_t cs;
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    NCCL_OK(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, world, cs));
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(a, n, ncclFloat32, next, world, cs));
    NCCL_OK(ncclRecv(r, n, ncclFloat32, prev, world, cs));
    NCCL_OK(ncclGroupEnd());
    NCCL_OK(ncclAllGather(r, g, n, ncclFloat32, world, cs));
    NCCL_OK(ncclReduceScatter(z, z + me * n, n, ncclFloat32, ncclSum, world, cs));
    CUDA_CHECK(cudaStreamEndCapture(cs, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    from_dev(host, x, n * 4);
    expect(host[0] == -1.0f && host[n - 1] == -1.0f, "a capture of NCCL operations runs none of them");
    for (int i = 0; i < launches; i++) {
        for (int j = 0; j < n; j++) host[j] = (float)((i + 1) * value(me, (size_t)j));
        to_dev(y, host, n * 4);
        NCCL_OK(ncclAllReduce(y, y, n, ncclFloat32, ncclSum, world, stream));   // before the launch
        to_dev(x, host, n * 4);
        for (int j = 0; j < n; j++) host[j] = (float)(me * 100 + i * 10 + j);
        to_dev(a, host, n * 4);
        for (int j = 0; j < N * n; j++) host[j] = (float)((i + 1) * value(me, (size_t)j));
        to_dev(z, host, N * n * 4);
        CUDA_CHECK(cudaGraphLaunch(exec, cs));
        CUDA_CHECK(cudaStreamSynchronize(cs));
        int ok_x = 1, ok_y = 1, ok_g = 1, ok_z = 1;
        from_dev(host, x, n * 4);
        for (int j = 0; j < n; j++) ok_x &= host[j] == (float)((i + 1) * sum_known((size_t)j));
        from_dev(host, y, n * 4);
        for (int j = 0; j < n; j++) ok_y &= host[j] == (float)((i + 1) * sum_known((size_t)j));
        from_dev(host, g, N * n * 4);
        for (int q = 0; q < N; q++)   // rank q received from q - 1
            for (int j = 0; j < n; j++) ok_g &= host[q * n + j] == (float)(((q + N - 1) % N) * 100 + i * 10 + j);
        from_dev(host, z, N * n * 4);
        for (int j = 0; j < n; j++) {   // this rank's block summed, the others as they were
            double sum = 0;
            for (int q = 0; q < N; q++) sum += value(q, (size_t)(me * n + j));
            ok_z &= host[me * n + j] == (float)((i + 1) * sum);
            for (int q = 0; q < N; q++)
                if (q != me) ok_z &= host[q * n + j] == (float)((i + 1) * value(me, (size_t)(q * n + j)));
        }
        expect(ok_x, "graph launch %d: the captured all-reduce summed this launch's inputs", i + 1);
        expect(ok_z, "graph launch %d: the captured in-place reduce-scatter", i + 1);
        expect(ok_y, "graph launch %d: the eager all-reduce issued before it on the comm", i + 1);
        expect(ok_g, "graph launch %d: the captured ring exchange, then the all-gather of what came from rank %d",
               i + 1, prev);
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(cs));
    free(host);
    void* bufs[] = {x, a, r, g, y, z};
    for (int i = 0; i < 6; i++) CUDA_CHECK(cudaFree(bufs[i]));
}

// --- Two communicators on two streams -------------------------------------------------------------

// The same host order of calls on every rank, on two comms of all ranks, each comm used from both
// of two non-blocking streams: the host runtime starts each comm's operations in that order but
// lets the streams run in any interleaving (CUDA_HOST_SCHEDULE_SEED, different on each rank).
// Results must not depend on it: known answers, an event that makes one stream use the other's
// result, a group whose send and receive are on different streams, and a bf16 sum with the same
// bits as on a single stream.
static void test_two_comms(void) {
    enum { n = 6, rounds = 4, nb = 48 };
    ncclComm_t c1 = NULL, c2 = NULL;
    NCCL_OK(ncclCommSplit(world, 0, me, &c1, NULL));
    NCCL_OK(ncclCommSplit(world, 0, me, &c2, NULL));
    cudaStream_t s1, s2;
    cudaEvent_t reduced;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&reduced, cudaEventDisableTiming));
    float *a = (float*)dev_alloc(n * sizeof(float)), *b = (float*)dev_alloc(n * sizeof(float));
    float *c = (float*)dev_alloc(n * sizeof(float)), *g = (float*)dev_alloc((size_t)N * n * sizeof(float));
    float *x = (float*)dev_alloc(n * sizeof(float)), *y = (float*)dev_alloc(n * sizeof(float));
    uint16_t *h1 = (uint16_t*)dev_alloc(nb * 2), *h2 = (uint16_t*)dev_alloc(nb * 2);
    int ok_sum = 1, ok_gather = 1, ok_ring = 1, ok_bits = 1;
    const int next = (me + 1) % N, prev = (me + N - 1) % N;
    for (int round = 0; round < rounds; round++) {
        float ha[n], hb[n], hc[n], hx[n], hg[N * n], hy[n];
        uint16_t mixed[nb], bits1[nb], bits2[nb];
        for (int i = 0; i < n; i++) {
            ha[i] = (float)value(me, i + round);
            hb[i] = 10.0f * (float)value(me, i);
            hc[i] = 1000.0f * (float)value(me, i + 1);
            hx[i] = (float)(me * 100 + i + round);
        }
        for (int i = 0; i < nb; i++) {
            uint32_t h = (uint32_t)(me * 7919 + i * 104729 + round * 31) * 2654435761u;
            mixed[i] = __bfloat16_as_ushort(__float2bfloat16((float)((int)(h >> 20) - 2048) / 237.0f));
        }
        // The reference bits: the same bf16 sum alone on world.
        to_dev(h1, mixed, sizeof mixed);
        NCCL_OK(ncclAllReduce(h1, h1, nb, ncclBfloat16, ncclSum, world, stream));
        from_dev(bits1, h1, sizeof bits1);

        CUDA_CHECK(cudaMemcpyAsync(a, ha, sizeof ha, cudaMemcpyHostToDevice, s1));  // pageable: taken now
        CUDA_CHECK(cudaMemcpyAsync(x, hx, sizeof hx, cudaMemcpyHostToDevice, s1));
        CUDA_CHECK(cudaMemcpyAsync(b, hb, sizeof hb, cudaMemcpyHostToDevice, s2));
        CUDA_CHECK(cudaMemcpyAsync(c, hc, sizeof hc, cudaMemcpyHostToDevice, s1));
        CUDA_CHECK(cudaMemcpyAsync(h2, mixed, sizeof mixed, cudaMemcpyHostToDevice, s2));
        NCCL_OK(ncclAllReduce(a, a, n, ncclFloat32, ncclSum, c1, s1));
        NCCL_OK(ncclAllReduce(b, b, n, ncclFloat32, ncclSum, c1, s2));   // c1 from the other stream
        NCCL_OK(ncclAllReduce(h2, h2, nb, ncclBfloat16, ncclSum, c2, s2));
        NCCL_OK(ncclAllReduce(c, c, n, ncclFloat32, ncclSum, c2, s1));   // c2 from the other stream
        CUDA_CHECK(cudaEventRecord(reduced, s1));
        CUDA_CHECK(cudaStreamWaitEvent(s2, reduced, 0));
        NCCL_OK(ncclAllGather(a, g, n, ncclFloat32, c2, s2));  // a as reduced on s1
        NCCL_OK(ncclGroupStart());  // one group, its send on s1 and its receive on s2
        NCCL_OK(ncclSend(x, n, ncclFloat32, next, c1, s1));
        NCCL_OK(ncclRecv(y, n, ncclFloat32, prev, c1, s2));
        NCCL_OK(ncclGroupEnd());
        CUDA_CHECK(cudaMemcpyAsync(hg, g, sizeof hg, cudaMemcpyDeviceToHost, s2));  // pageable: done on return
        CUDA_CHECK(cudaMemcpyAsync(hy, y, sizeof hy, cudaMemcpyDeviceToHost, s2));
        CUDA_CHECK(cudaMemcpyAsync(hb, b, sizeof hb, cudaMemcpyDeviceToHost, s2));
        CUDA_CHECK(cudaMemcpyAsync(bits2, h2, sizeof bits2, cudaMemcpyDeviceToHost, s2));
        CUDA_CHECK(cudaMemcpyAsync(ha, a, sizeof ha, cudaMemcpyDeviceToHost, s1));
        CUDA_CHECK(cudaMemcpyAsync(hc, c, sizeof hc, cudaMemcpyDeviceToHost, s1));
        for (int i = 0; i < n; i++) {
            double sa = 0, sb = 0, sc = 0;
            for (int r = 0; r < N; r++)
                sa += value(r, i + round), sb += 10.0 * value(r, i), sc += 1000.0 * value(r, i + 1);
            ok_sum &= ha[i] == (float)sa && hb[i] == (float)sb && hc[i] == (float)sc;
            for (int r = 0; r < N; r++) ok_gather &= hg[r * n + i] == (float)sa;
            ok_ring &= hy[i] == (float)(prev * 100 + i + round);
        }
        ok_bits &= memcmp(bits1, bits2, sizeof bits1) == 0;
    }
    expect(ok_sum, "two comms, each used from two streams: all-reduce sums, %d rounds", rounds);
    expect(ok_gather, "an all-gather on comm 2 after an event: it gathers comm 1's reduced values");
    expect(ok_ring, "a group with its send on stream 1 and its receive on stream 2 (ring from rank %d)", prev);
    expect(ok_bits, "bf16 sums on comm 2 among other traffic: the same bits as alone on one stream");
    void* bufs[] = {a, b, c, g, x, y, h1, h2};
    for (int i = 0; i < 8; i++) CUDA_CHECK(cudaFree(bufs[i]));
    CUDA_CHECK(cudaEventDestroy(reduced));
    CUDA_CHECK(cudaStreamDestroy(s1));
    CUDA_CHECK(cudaStreamDestroy(s2));
    NCCL_OK(ncclCommDestroy(c1));
    NCCL_OK(ncclCommDestroy(c2));
}

static int comm_rank(ncclComm_t c) {
    int r = -1;
    NCCL_OK(ncclCommUserRank(c, &r));
    return r;
}
static int comm_count(ncclComm_t c) {
    int n = -1;
    NCCL_OK(ncclCommCount(c, &n));
    return n;
}

static void test_split(void) {
    // Even and odd ranks, each ordered from the highest rank down (key N - me).
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclComm_t half = NULL;
    NCCL_OK(ncclCommSplit(world, me % 2, N - me, &half, &config));
    int members = 0, above = 0, sum = 0;
    for (int r = me % 2; r < N; r += 2) members++, above += r > me, sum += r + 1;
    expect(half && comm_count(half) == members && comm_rank(half) == above,
           "split by parity, reversed key: rank %d of %d", above, members);
    float v = (float)(me + 1), *d = (float*)dev_alloc(4 * sizeof(float));
    to_dev(d, &v, sizeof v);
    NCCL_OK(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, half, stream));
    from_dev(&v, d, sizeof v);
    expect(v == (float)sum, "all-reduce on the split: %g (want %d)", v, sum);
    int32_t *ranks = (int32_t*)malloc(N * sizeof(int32_t)), *dr = (int32_t*)dev_alloc((N + 1) * sizeof(int32_t));
    int32_t mine = me;
    to_dev(dr, &mine, sizeof mine);
    NCCL_OK(ncclAllGather(dr, dr + 1, 1, ncclInt32, half, stream));  // send and receive apart
    from_dev(ranks, dr + 1, members * sizeof(int32_t));
    int ordered = 1;
    for (int i = 0; i < members; i++) ordered &= ranks[i] == (me % 2) + 2 * (members - 1 - i);
    expect(ordered, "all-gather on the split lists its ranks from the highest down");

    ncclComm_t rest = NULL;
    NCCL_OK(ncclCommSplit(world, me == 0 ? NCCL_SPLIT_NOCOLOR : 7, me, &rest, NULL));
    expect(me == 0 ? rest == NULL : rest != NULL && comm_count(rest) == N - 1 && comm_rank(rest) == me - 1,
           "NCCL_SPLIT_NOCOLOR leaves rank 0 out (NULL) and the others in a comm of %d", N - 1);
    if (rest) {
        v = 1.0f;
        to_dev(d, &v, sizeof v);
        NCCL_OK(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, rest, stream));
        from_dev(&v, d, sizeof v);
        expect(v == (float)(N - 1), "all-reduce on the comm without rank 0: %g", v);
        NCCL_OK(ncclCommDestroy(rest));
    }
    NCCL_OK(ncclCommAbort(half));
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(dr));
    free(ranks);
}

// --- The shim's refusals ------------------------------------------------------------------------

#ifdef CUDA_HOST
// An NCCL call that must fail with `want` and leave a message naming `text`.
static void expect_error(ncclResult_t got, ncclResult_t want, const char* text, const char* what) {
    const char* msg = ncclGetLastError(NULL);
    expect(got == want && strstr(msg, text) != NULL, "%s: result %d (want %d), \"%s\"", what, (int)got, (int)want, msg);
}

static void test_init_errors(const ncclUniqueId* id) {
    ncclComm_t c = NULL;
    expect_error(ncclCommInitRank(&c, N + 1, *id, me), ncclInvalidUsage, "MPI_COMM_WORLD",
                 "nranks other than the world size");
    expect(c == NULL, "no comm after a failed init");
    ncclUniqueId zero;
    memset(&zero, 0, sizeof zero);
    expect_error(ncclCommInitRank(&c, N, zero, me), ncclInvalidArgument, "did not make", "an id not from ncclGetUniqueId");
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0;
    expect_error(ncclCommInitRankConfig(&c, N, *id, me, &bad), ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER",
                 "a config not from NCCL_CONFIG_INITIALIZER");
    if (N > 1) {
        ncclUniqueId other = *id;
        if (mpi_rank == 0) NCCL_OK(ncclGetUniqueId(&other));
        expect(mpi_rank != 0 || memcmp(&other, id, sizeof other) != 0, "two ids of one process differ");
        expect_error(ncclCommInitRank(&c, N, other, me), ncclInvalidUsage, "different ncclUniqueIds",
                     "ranks passing different ids");
        expect_error(ncclCommInitRank(&c, N, *id, 0), ncclInvalidUsage, "both passed rank 0", "two ranks 0");
    }
    expect(c == NULL, "still no comm");
}

static void test_argument_errors(void) {
    const int n = 2 * N + 8;  // room for an all-gather below
    float* d = (float*)dev_alloc(n * sizeof(float));
    float host[8] = {0};
    expect_error(ncclAllReduce(d, d, 4, (ncclDataType_t)42, ncclSum, world, stream), ncclInvalidArgument,
                 "ncclAllReduce: datatype 42 is unknown", "an unknown datatype");
    expect_error(ncclAllReduce(d, d, 4, ncclFloat16, ncclSum, world, stream), ncclInvalidArgument,
                 "datatype 6 is unknown or not supported", "fp16, which the project does not use");
    expect_error(ncclAllReduce(d, d, 4, ncclFloat32, ncclMax, world, stream), ncclInvalidArgument,
                 "reduction op 2 is not supported", "a reduction other than the sum");
    expect_error(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, NULL, stream), ncclInvalidArgument,
                 "comm argument is NULL", "a NULL comm");
    expect_error(ncclAllReduce(host, host, 4, ncclFloat32, ncclSum, world, stream), ncclInvalidArgument,
                 "is not device memory", "host memory");
    expect_error(ncclAllReduce(d, d, n + 1, ncclFloat32, ncclSum, world, stream), ncclInvalidArgument,
                 "run past the end", "a buffer too small for the count");
    // Half an element past this rank's block: overlapping, yet not NCCL's in-place form.
    expect_error(ncclAllGather((char*)(d + me) + 2, d, 1, ncclFloat32, world, stream), ncclInvalidArgument,
                 "overlaps", "all-gather with an overlapping send buffer not in place");
    expect_error(ncclBroadcast(d, d, 4, ncclFloat32, N, world, stream), ncclInvalidArgument, "root", "root out of range");
    expect_error(ncclSend(d, 4, ncclFloat32, N, world, stream), ncclInvalidArgument, "ncclSend: peer", "peer out of range");
    cudaStream_t dead;
    CUDA_CHECK(cudaStreamCreate(&dead));
    CUDA_CHECK(cudaStreamDestroy(dead));
    expect_error(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, world, dead), ncclUnhandledCudaError, "invalid stream",
                 "a destroyed stream");
    expect_error(ncclGroupEnd(), ncclInvalidUsage, "no ncclGroupStart", "ncclGroupEnd without ncclGroupStart");

    // A failed call in a group: local to each rank, nothing waits on another rank.
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(d, 4, ncclFloat32, me, world, stream));
    expect_error(ncclRecv(d, 4, ncclFloat32, -1, world, stream), ncclInvalidArgument, "peer -1", "a bad peer in a group");
    expect_error(ncclGroupEnd(), ncclInvalidArgument, "nothing was posted", "a group with a failed call");
    CUDA_CHECK(cudaFree(d));
}

static void test_comm_lifetime(void) {
    ncclComm_t c = NULL;
    NCCL_OK(ncclCommSplit(world, 0, me, &c, NULL));
    NCCL_OK(ncclCommFinalize(c));
    int n = 0;
    expect(ncclCommCount(c, &n) == ncclSuccess && n == N, "a finalized comm still answers ncclCommCount");
    expect_error(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, c, stream), ncclInvalidUsage, "finalized",
                 "a collective on a finalized comm");
    NCCL_OK(ncclCommDestroy(c));
    expect_error(ncclCommDestroy(c), ncclInvalidArgument, "corrupted comm object detected", "destroying twice");
}

// --- What NCCL 2.28 refuses (the host NCCL must be as strict as the real one) -------------------

// Polls c until it leaves ncclInProgress: the final state, and how many polls said ncclInProgress.
static ncclResult_t settle(ncclComm_t c, int* polls) {
    ncclResult_t state = ncclInProgress;
    for (*polls = 0;; ++*polls) {
        NCCL_OK(ncclCommGetAsyncError(c, &state));
        if (state != ncclInProgress) return state;
    }
}

static void expect_settles(ncclComm_t c, const char* what) {
    int polls = 0;
    const ncclResult_t state = settle(c, &polls);
    expect(state == ncclSuccess && polls >= 1, "%s: in progress for %d poll%s, then %s", what, polls,
           polls == 1 ? "" : "s", ncclGetErrorString(state));
}

static ncclUniqueId shared_id(void) {
    ncclUniqueId id;
    if (mpi_rank == 0) NCCL_OK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    return id;
}

static const char* const NOT_READY = "Attempt to use communicator before the previous operation returned ncclSuccess";

// Non-blocking communicators: every call that does work leaves the comm in progress until
// ncclCommGetAsyncError no longer says so, and any other use before that is refused.
static void test_nonblocking(void) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t nb = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&nb, N, shared_id(), me, &config);
    expect(r == ncclInProgress && nb != NULL, "non-blocking init: %s, with the comm written", ncclGetErrorString(r));
    float* d = (float*)dev_alloc(2 * N * sizeof(float));
    float v[2] = {(float)(me + 1), 0};
    to_dev(d, v, sizeof(float));
    expect_error(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, nb, stream), ncclInvalidArgument, NOT_READY,
                 "a collective on a comm whose init is in progress");
    int count = 0;
    expect_error(ncclCommCount(nb, &count), ncclInvalidArgument, NOT_READY, "ncclCommCount during init");
    expect_settles(nb, "non-blocking init");

    r = ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, nb, stream);
    expect(r == ncclInProgress, "a collective on a non-blocking comm: %s", ncclGetErrorString(r));
    expect_error(ncclAllGather(d, d + N, 1, ncclFloat32, nb, stream), ncclInvalidArgument, NOT_READY,
                 "the next collective before the last one settled");
    expect_settles(nb, "a collective");
    from_dev(v, d, sizeof(float));
    expect(v[0] == (float)(N * (N + 1) / 2), "the collective's sum after it settled: %g", v[0]);

    const int next = (me + 1) % N, prev = (me + N - 1) % N;
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(d, 1, ncclFloat32, next, nb, stream));
    NCCL_OK(ncclRecv(d + 1, 1, ncclFloat32, prev, nb, stream));
    r = ncclGroupEnd();
    expect(r == ncclInProgress, "a group on a non-blocking comm: ncclGroupEnd says %s", ncclGetErrorString(r));
    expect_error(ncclCommUserRank(nb, &count), ncclInvalidArgument, NOT_READY, "ncclCommUserRank before the group settled");
    expect_settles(nb, "a group");

    // The first real GPU run's failure: the split returns ncclSuccess with the parent still in
    // progress and the new comm not yet written; the next split on the parent is refused.
    ncclComm_t child = (ncclComm_t)&config, other = NULL;
    r = ncclCommSplit(nb, 0, me, &child, &config);
    expect(r == ncclSuccess && child == NULL, "split of a non-blocking comm: %s, the new comm not written yet (%s)",
           ncclGetErrorString(r), child ? "written" : "NULL");
    expect_error(ncclCommSplit(nb, 1, me, &other, &config), ncclInvalidArgument, NOT_READY,
                 "a second split before the parent settled");
    expect_error(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, nb, stream), ncclInvalidArgument, NOT_READY,
                 "a collective on the parent before it settled");
    expect_settles(nb, "the split's parent");
    expect(child != NULL && other == NULL, "the new comm is written once the parent settled");
    if (child) {
        count = -1;
        NCCL_OK(ncclCommCount(child, &count));
        expect(count == N, "the split's comm: %d ranks", count);
        r = ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, child, stream);
        expect(r == ncclInProgress, "a collective on the split's comm: %s", ncclGetErrorString(r));
        expect_settles(child, "a collective on the split's comm");
        r = ncclCommFinalize(child);
        expect(r == ncclInProgress, "finalize of a non-blocking comm: %s", ncclGetErrorString(r));
        expect_error(ncclCommDestroy(child), ncclInvalidArgument, NOT_READY, "destroy before finalize settled");
        expect_settles(child, "finalize");
        NCCL_OK(ncclCommDestroy(child));
    }
    // NCCL_SPLIT_NOCOLOR on a non-blocking parent: it settles with no comm written.
    child = (ncclComm_t)&config;
    NCCL_OK(ncclCommSplit(nb, me == 0 ? NCCL_SPLIT_NOCOLOR : 3, me, &child, &config));
    expect_settles(nb, "a split with NCCL_SPLIT_NOCOLOR");
    expect(me == 0 ? child == NULL : child != NULL, "NCCL_SPLIT_NOCOLOR: rank 0 gets no comm");
    if (child) NCCL_OK(ncclCommAbort(child));

    // Abort is allowed in any state, here with a collective in progress; after it, nothing.
    r = ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, nb, stream);
    NCCL_OK(ncclCommAbort(nb));
    ncclResult_t state;
    expect_error(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, nb, stream), ncclInvalidArgument,
                 "corrupted comm object detected", "a collective after abort");
    expect_error(ncclCommGetAsyncError(nb, &state), ncclInvalidArgument, "corrupted comm object detected",
                 "polling after abort");
    expect_error(ncclCommDestroy(nb), ncclInvalidArgument, "corrupted comm object detected", "destroy after abort");
    expect_error(ncclCommAbort(nb), ncclInvalidArgument, "corrupted comm object detected", "abort twice");
    CUDA_CHECK(cudaStreamSynchronize(stream));  // the aborted collective is dropped, not waited for
    CUDA_CHECK(cudaFree(d));
}

// Two ranks of one communicator on one GPU: a blocking init fails with NCCL's message, a
// non-blocking one fails when polled and can only be aborted.
static void test_duplicate_gpu(void) {
    if (N < 2) return;
    int device = -1;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaSetDevice(0));
    ncclComm_t c = NULL;
    expect_error(ncclCommInitRank(&c, N, shared_id(), me), ncclInvalidUsage, "Duplicate GPU detected",
                 "every rank on device 0, blocking init");
    expect(c == NULL, "no comm after the refused init");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c, N, shared_id(), me, &config), state = ncclSuccess;
    int polls = 0;
    if (c) state = settle(c, &polls);
    expect(r == ncclInProgress && c && state == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "Duplicate GPU detected"),
           "every rank on device 0, non-blocking init: %s, then %s when polled", ncclGetErrorString(r),
           ncclGetErrorString(state));
    if (c) {
        float* d = (float*)dev_alloc(sizeof(float));
        expect_error(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, c, stream), ncclInvalidUsage, "error state",
                     "a collective on the failed comm");
        expect_error(ncclCommDestroy(c), ncclInvalidUsage, "error state", "destroying the failed comm");
        NCCL_OK(ncclCommAbort(c));
        CUDA_CHECK(cudaFree(d));
    }
    CUDA_CHECK(cudaSetDevice(device));
}

// Splits whose calls do not match across ranks, and colors NCCL does not take.
static void test_split_errors(void) {
    ncclComm_t c = NULL, x = NULL;
    expect_error(ncclCommSplit(world, -2, me, &x, NULL), ncclInvalidArgument, "not NCCL_SPLIT_NOCOLOR",
                 "a negative color other than NCCL_SPLIT_NOCOLOR");
    // The lone collective below waits for its peers where the schedule runs each operation when
    // issued (CUDA_HOST_SCHEDULE=inorder); the other schedules queue it.
    const char* schedule = getenv("CUDA_HOST_SCHEDULE");
    if (N < 2 || (schedule && !strcmp(schedule, "inorder"))) return;
    NCCL_OK(ncclCommSplit(world, 0, me, &c, NULL));
    float* d = (float*)dev_alloc(sizeof(float));
    if (me == 0) NCCL_OK(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, c, stream));  // rank 0 alone
    expect_error(ncclCommSplit(c, 0, me, &x, NULL), ncclInvalidUsage, "mismatched calls",
                 "a split that one rank makes after a collective the others did not make");
    expect(x == NULL, "no comm from the mismatched split");
    NCCL_OK(ncclCommAbort(c));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaFree(d));
}
#endif

static void test_basics(void) {
    int version = 0, device = -1;
    ncclResult_t async = ncclInternalError;
    NCCL_OK(ncclGetVersion(&version));
    expect(version == NCCL_VERSION_CODE, "ncclGetVersion: %d", version);
    expect(comm_count(world) == N && comm_rank(world) == N - 1 - mpi_rank,
           "world comm: %d ranks, NCCL rank %d on MPI rank %d", N, comm_rank(world), mpi_rank);
    NCCL_OK(ncclCommCuDevice(world, &device));
    NCCL_OK(ncclCommGetAsyncError(world, &async));
    expect(device == mpi_rank && async == ncclSuccess, "device %d (one per rank), no asynchronous error", device);
    expect(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0 &&
               strstr(ncclGetErrorString(ncclInvalidUsage), "invalid usage") != NULL,
           "ncclGetErrorString");
}

#ifdef CUDA_HOST
// --die recv-never-sent (one rank, CUDA_HOST_SCHEDULE_TIMEOUT_S set): a receive that no rank
// sends; the stream synchronisation must end the job with a deadlock report, not hang.
static int die_recv_never_sent(void) {
    float* d = (float*)dev_alloc(4 * sizeof(float));
    NCCL_OK(ncclRecv(d, 4, ncclFloat32, me, world, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    printf("--die recv-never-sent: the program was expected to end with a diagnostic\n");
    return 0;
}
#endif

int main(int argc, char** argv) {
    int lazy = argc > 1 && strcmp(argv[1], "--lazy-mpi") == 0;
    const char* die = argc > 2 && strcmp(argv[1], "--die") == 0 ? argv[2] : NULL;
    int initialized = 0;
#ifdef CUDA_HOST
    if (lazy) {  // the shim initialises MPI in its first ncclCommInitRank, even one that fails
        ncclComm_t c = NULL;
        ncclUniqueId id;
        NCCL_OK(ncclGetUniqueId(&id));
        ncclResult_t r = ncclCommInitRank(&c, -1, id, 0);
        MPI_Initialized(&initialized);
        if (r != ncclInvalidUsage || !initialized) {
            fprintf(stderr, "FAIL: ncclCommInitRank did not initialise MPI (%s)\n", ncclGetErrorString(r));
            return 1;
        }
    }
#endif
    if (!initialized) {
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    }
    int world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    N = world_size;
    me = N - 1 - mpi_rank;  // NCCL ranks in the reverse order of MPI's
    int devices = 0;
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    if (devices < N) {  // NCCL refuses two ranks of a communicator on one GPU
        fprintf(stderr, "test_nccl: %d ranks need %d GPUs, found %d (host runtime: CUDA_HOST_DEVICES)\n", N, N, devices);
        return 2;
    }
    CUDA_CHECK(cudaSetDevice(mpi_rank));
    CUDA_CHECK(cudaStreamCreate(&stream));

    ncclUniqueId id;
    if (mpi_rank == 0) NCCL_OK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
#ifdef CUDA_HOST
    test_init_errors(&id);
#endif
    NCCL_OK(ncclCommInitRank(&world, N, id, me));
#ifdef CUDA_HOST
    if (die && !strcmp(die, "recv-never-sent")) return die_recv_never_sent();
#endif
    if (die) {
        printf("unknown --die case %s\n", die);
        return 2;
    }
    if (mpi_rank == 0) printf("info %d ranks%s\n", N, lazy ? ", MPI initialised by the shim" : "");
    test_basics();

    const ncclDataType_t types[] = {ncclFloat32, ncclFloat64, ncclInt32, ncclBfloat16};
    for (int k = 0; k < 4; k++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            test_all_gather(types[k], in_place);
            test_reduce_scatter(types[k], in_place);
            test_all_reduce(types[k], 7, in_place);  // blocks of unequal size
            test_all_reduce(types[k], 2, in_place);  // fewer elements than ranks (N > 2)
        }
    }
    test_rounding();
    test_broadcast();
    test_send_recv();
    test_two_comms();
    test_graph_capture();
    test_split();
#ifdef CUDA_HOST
    test_argument_errors();
    test_comm_lifetime();
    test_nonblocking();
    test_duplicate_gpu();
    test_split_errors();
#endif
    NCCL_OK(ncclCommFinalize(world));
    NCCL_OK(ncclCommDestroy(world));
    CUDA_CHECK(cudaStreamDestroy(stream));

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (mpi_rank == 0) {
        if (total) printf("test_nccl: %d failed checks over %d ranks\n", total, N);
        else printf("test_nccl: all %d checks passed on %d ranks\n", checks, N);
    }
    if (!lazy) MPI_Finalize();  // with --lazy-mpi the shim finalizes at exit
    return total ? 1 : 0;
}
