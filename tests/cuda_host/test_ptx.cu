// Known answers for the PTX instructions of model/cuda_ptx.cuh, run through their host twins
// (tests/cuda_host/ptx.cpp): mma.sync m16n8k16 bf16 on small integers (exact) against a host loop,
// ldmatrix x1/x2/x4 (.trans) on a tile whose values encode (row, column), the attention kernels'
// composition (A by ldmatrix_x4, B by ldmatrix_x2 / x2_trans / x4_trans, then mma) against a host
// GEMM, and cp.async: copies land only at the wait that retires their group (the host runtime
// defers them, so a kernel that reads too early sees the 0xFF bytes of fresh shared memory), group
// accounting, zero-fill, a correct double-buffered loop and the same loop waiting too little.
// Then the instructions of a semaphore-ordered reduction: ex2.approx.ftz at integers (exact),
// fractions (within the PTX ISA's 2^-22), underflow (flushed to zero) and inf/NaN; red.global.add
// (.v2 on sm_90) from many threads and blocks (exact sums); and an ordered accumulation: block i
// waits (ld.acquire + nanosleep) for a semaphore to reach i, adds its row, and releases i + 1, so
// the order-dependent fp32 sum is bit-identical to the host's sum in block order every run (under
// the host runtime: under seeds 1..8, whose schedules start blocks in different orders), while the
// same kernel without the wait differs under some seed.
// `--die <case>` must end with a diagnostic: ldmatrix-misaligned, ldmatrix-global, cp-misaligned,
// cp-overrun, cp-pending, mma-partial, mixed, spin-cycle. `--mutant no-wait` runs the ordered
// accumulation without its wait as if it were right: it must fail (tests/suites/cuda-host.list).
// The Hopper (sm_90a) instructions' tests, mutants and --die cases: test_ptx_sm90.cuh.
#include "model/cuda_common.cuh"
#include "model/cuda_ptx.cuh"
#include "tests/cuda_host/test_check.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(CUDA_HOST)
#include <sys/mman.h>
#endif

// --- mma.sync m16n8k16 ---------------------------------------------------------------------------

__device__ static uint32_t pack_pair(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return (uint32_t)__bfloat16_as_ushort(lo) | (uint32_t)__bfloat16_as_ushort(hi) << 16;
}

// One warp: fragments gathered from A (16 x 16), B (16 x 8, K x N) and C (16 x 8), all row-major,
// by the layouts of model/cuda_ptx.cuh; D = C + reps * A B through `reps` mma calls with d = c.
__global__ void mma_kernel(const __nv_bfloat16* A, const __nv_bfloat16* B, const float* C, float* D, int reps) {
    int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    uint32_t a[4], b[2];
    float acc[4];
    for (int i = 0; i < 4; i++) {
        int r = g + 8 * (i & 1), k = 2 * t + 8 * (i >> 1);
        a[i] = pack_pair(A[r * 16 + k], A[r * 16 + k + 1]);
    }
    for (int i = 0; i < 2; i++) {
        int k = 2 * t + 8 * i;
        b[i] = pack_pair(B[k * 8 + g], B[(k + 1) * 8 + g]);
    }
    for (int i = 0; i < 4; i++) acc[i] = C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
    for (int r = 0; r < reps; r++) mma_m16n8k16_bf16(acc, a, b, acc);
    for (int i = 0; i < 4; i++) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];
}

// A, B, C as small integers (exact in bf16 and in the fp32 sums); pattern p.
static float mma_a(int p, int r, int k) {
    if (p == 1) return k == (5 * r + 3) % 16 ? 1.0f : 0.0f;  // a permutation: D picks rows of B
    return (float)((3 * r + 5 * k + p) % 7 - 3);
}
static float mma_b(int p, int k, int n) {
    if (p == 1) return (float)(k * 8 + n - 64);
    return (float)((2 * k + 3 * n + p) % 5 - 2);
}
static float mma_c(int p, int r, int n) { return p == 0 ? 0.0f : (float)((r * 8 + n) % 11 - 5); }

static void test_mma(int p, int reps, const char* name) {
    __nv_bfloat16 ha[256], hb[128];
    float hc[128], hd[128];
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) ha[r * 16 + k] = __float2bfloat16(mma_a(p, r, k));
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) hb[k * 8 + n] = __float2bfloat16(mma_b(p, k, n));
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) hc[r * 8 + n] = mma_c(p, r, n);
    __nv_bfloat16 *da, *db;
    float *dc, *dd;
    CUDA_CHECK(cudaMalloc(&da, sizeof ha));
    CUDA_CHECK(cudaMalloc(&db, sizeof hb));
    CUDA_CHECK(cudaMalloc(&dc, sizeof hc));
    CUDA_CHECK(cudaMalloc(&dd, sizeof hd));
    CUDA_CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dc, hc, sizeof hc, cudaMemcpyHostToDevice));
    LAUNCH(mma_kernel, 1, 32, 0, 0, da, db, dc, dd, reps);
    CUDA_CHECK(cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            float s = 0.0f;
            for (int k = 0; k < 16; k++) s += mma_a(p, r, k) * mma_b(p, k, n);
            if (hd[r * 8 + n] != hc[r * 8 + n] + (float)reps * s) bad++;
        }
    check(bad == 0, "mma m16n8k16 bf16, %s: D = C + %d A B exactly (%d of 128 elements differ)", name, reps, bad);
    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(db));
    CUDA_CHECK(cudaFree(dc));
    CUDA_CHECK(cudaFree(dd));
}

// --- ldmatrix ------------------------------------------------------------------------------------

// Lane l's row: tile row (5 l + 3) % 32, columns 8 ((l / 8) % 2) .. +7, of a 32 x 16 tile of
// 16-bit values row * 256 + column. Lanes past 8 nmat point elsewhere: their address is not used.
// Right after the ldmatrix each lane overwrites its row: the instruction reads for the whole warp
// before any lane goes on, so no lane sees another's overwrite.
__device__ __host__ static int ld_row(int l) { return (l * 5 + 3) % 32; }
__device__ __host__ static int ld_col(int l) { return 8 * ((l >> 3) & 1); }

template <int NMAT, int TRANS> __global__ void ldmatrix_kernel(uint32_t* out) {
    __shared__ __align__(16) uint16_t tile[32 * 16];
    int l = threadIdx.x;
    for (int i = l; i < 32 * 16; i += blockDim.x) tile[i] = (uint16_t)((i / 16) * 256 + i % 16);
    __syncthreads();
    const uint16_t* row = l < 8 * NMAT ? &tile[ld_row(l) * 16 + ld_col(l)] : &tile[8];
    uint32_t r[4] = {0, 0, 0, 0};
    if (NMAT == 1) TRANS ? ldmatrix_x1_trans(r, row) : ldmatrix_x1(r, row);
    if (NMAT == 2) TRANS ? ldmatrix_x2_trans(r, row) : ldmatrix_x2(r, row);
    if (NMAT == 4) TRANS ? ldmatrix_x4_trans(r, row) : ldmatrix_x4(r, row);
    if (l < 8 * NMAT)
        for (int c = 0; c < 8; c++) tile[ld_row(l) * 16 + ld_col(l) + c] = 0xffff;
    for (int i = 0; i < 4; i++) out[l * 4 + i] = r[i];
}

// Element (r, c) of matrix i: row r of matrix i is lane 8 i + r's row.
static uint32_t ld_val(int i, int r, int c) { return (uint32_t)(ld_row(8 * i + r) * 256 + ld_col(8 * i + r) + c); }

template <int NMAT, int TRANS> static void test_ldmatrix(void) {
    uint32_t* d;
    uint32_t h[128];
    CUDA_CHECK(cudaMalloc(&d, sizeof h));
    LAUNCH((ldmatrix_kernel<NMAT, TRANS>), 1, 32, 0, 0, d);
    CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < NMAT; i++) {
            int g = l / 4, t = l % 4;
            uint32_t lo = TRANS ? ld_val(i, 2 * t, g) : ld_val(i, g, 2 * t);
            uint32_t hi = TRANS ? ld_val(i, 2 * t + 1, g) : ld_val(i, g, 2 * t + 1);
            if (h[l * 4 + i] != (lo | hi << 16)) bad++;
        }
    check(bad == 0, "ldmatrix.x%d%s: every lane's registers hold the documented elements (%d of %d differ; "
          "rows from permuted lane addresses, unused lanes' addresses ignored, each row overwritten by its lane right "
          "after)", NMAT, TRANS ? ".trans" : "",
          bad, 32 * NMAT);
    CUDA_CHECK(cudaFree(d));
}

// --- ldmatrix + mma, as the attention kernels use them -----------------------------------------

// Two warps; warp w computes rows 16 w .. 16 w + 15 of D = A B (A 32 x 16, B 16 x 16), as two
// 8-column tiles, with B loaded three ways: v0 ldmatrix_x2 from Bt (N x K row-major: "col" B), v1
// ldmatrix_x2_trans from B (K x N row-major), v2 ldmatrix_x4_trans from B (both column tiles).
// Shared tiles in dynamic shared memory with rows of LD elements (padded, 48 bytes).
constexpr int LD = 24;

__global__ void compose_kernel(const __nv_bfloat16* A, const __nv_bfloat16* B, float* D) {
    DYNAMIC_SHARED(__nv_bfloat16, As);
    __nv_bfloat16* Bts = As + 32 * LD;
    __nv_bfloat16* Bs = Bts + 16 * LD;
    for (int i = threadIdx.x; i < 32 * 16; i += blockDim.x) As[(i / 16) * LD + i % 16] = A[i];
    for (int i = threadIdx.x; i < 16 * 16; i += blockDim.x) {
        int k = i / 16, n = i % 16;
        Bs[k * LD + n] = B[i];
        Bts[n * LD + k] = B[i];
    }
    __syncthreads();
    int w = threadIdx.x / 32, l = threadIdx.x % 32, g = l >> 2, t = l & 3;
    uint32_t a[4];
    ldmatrix_x4(a, &As[(16 * w + l % 16) * LD + (l / 16) * 8]);
    for (int v = 0; v < 3; v++)
        for (int nt = 0; nt < 2; nt++) {
            uint32_t b[2] = {0, 0}, b4[4];
            if (v == 0) ldmatrix_x2(b, &Bts[(8 * nt + l % 8) * LD + ((l / 8) % 2) * 8]);
            if (v == 1) ldmatrix_x2_trans(b, &Bs[(l % 16) * LD + 8 * nt]);
            if (v == 2) {
                ldmatrix_x4_trans(b4, &Bs[(l % 16) * LD + (l / 16) * 8]);
                b[0] = b4[2 * nt];
                b[1] = b4[2 * nt + 1];
            }
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            mma_m16n8k16_bf16(acc, a, b, acc);
            for (int i = 0; i < 4; i++)
                D[v * 512 + (16 * w + g + 8 * (i >> 1)) * 16 + 8 * nt + 2 * t + (i & 1)] = acc[i];
        }
}

static void test_compose(void) {
    __nv_bfloat16 ha[512], hb[256];
    float hd[3 * 512];
    for (int i = 0; i < 512; i++) ha[i] = __float2bfloat16((float)((i * 7 + 3) % 9 - 4));
    for (int i = 0; i < 256; i++) hb[i] = __float2bfloat16((float)((i * 5 + 1) % 9 - 4));
    __nv_bfloat16 *da, *db;
    float* dd;
    CUDA_CHECK(cudaMalloc(&da, sizeof ha));
    CUDA_CHECK(cudaMalloc(&db, sizeof hb));
    CUDA_CHECK(cudaMalloc(&dd, sizeof hd));
    CUDA_CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    LAUNCH(compose_kernel, 1, 64, (32 + 16 + 16) * LD * sizeof(__nv_bfloat16), 0, da, db, dd);
    CUDA_CHECK(cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost));
    static const char* const how[3] = {"ldmatrix_x2 from N x K", "ldmatrix_x2_trans from K x N",
                                       "ldmatrix_x4_trans from K x N"};
    for (int v = 0; v < 3; v++) {
        int bad = 0;
        for (int r = 0; r < 32; r++)
            for (int n = 0; n < 16; n++) {
                float s = 0.0f;
                for (int k = 0; k < 16; k++) s += __bfloat162float(ha[r * 16 + k]) * __bfloat162float(hb[k * 16 + n]);
                if (hd[v * 512 + r * 16 + n] != s) bad++;
            }
        check(bad == 0, "A by ldmatrix_x4, B by %s, mma: 32 x 16 x 16 product of two warps equals the host "
              "GEMM (%d of 512 differ)", how[v], bad);
    }
    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(db));
    CUDA_CHECK(cudaFree(dd));
}

// --- cp.async --------------------------------------------------------------------------------------

static int same4(uint4 a, uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; }
static const uint4 ones4 = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
static const uint4 zero4 = {0, 0, 0, 0};

// Each thread copies src[t] to shared s[t]: what it sees before its wait, after it, and (after a
// barrier) the next thread's copy.
__global__ void visible_kernel(const uint4* src, uint4* out) {
    DYNAMIC_SHARED(uint4, s);
    int t = threadIdx.x, n = blockDim.x;
    cp_async_16(&s[t], &src[t], 16);
    cp_async_commit();
    out[3 * t] = s[t];  // a race on a GPU; under the host runtime, the old bytes
    cp_async_wait<0>();
    out[3 * t + 1] = s[t];
    __syncthreads();
    out[3 * t + 2] = s[(t + 1) % n];
}

// Groups: 0 and 1 committed, a third copy left in the open group.
__global__ void groups_kernel(const uint4* src, uint4* out) {
    DYNAMIC_SHARED(uint4, s);
    int t = threadIdx.x;
    cp_async_16(&s[3 * t], &src[3 * t], 16);
    cp_async_commit();
    cp_async_16(&s[3 * t + 1], &src[3 * t + 1], 16);
    cp_async_commit();
    cp_async_16(&s[3 * t + 2], &src[3 * t + 2], 16);
    cp_async_wait<1>();
    out[5 * t] = s[3 * t];          // group 0: landed
    out[5 * t + 1] = s[3 * t + 1];  // group 1: pending (host: old bytes)
    cp_async_wait<0>();
    out[5 * t + 2] = s[3 * t + 1];  // group 1: landed
    out[5 * t + 3] = s[3 * t + 2];  // never committed: pending (host: old bytes)
    cp_async_commit();
    cp_async_wait<0>();
    out[5 * t + 4] = s[3 * t + 2];
}

// src_bytes 4 (12 zeros follow) and 0 (16 zeros; `nowhere` is not read).
__global__ void zfill_kernel(const uint4* src, const uint4* nowhere, uint4* out) {
    DYNAMIC_SHARED(uint4, s);
    int t = threadIdx.x;
    cp_async_16(&s[2 * t], &src[t], 4);
    cp_async_16(&s[2 * t + 1], nowhere, 0);
    cp_async_commit();
    cp_async_wait<0>();
    out[2 * t] = s[2 * t];
    out[2 * t + 1] = s[2 * t + 1];
}

// A two-stage pipeline over ntiles tiles of blockDim.x uint4: tile i + 1 is requested while tile i
// is consumed; each thread hashes another thread's element of every tile. WAIT = 1 waits for the
// tile it consumes; WAIT = 2 does not (the bug the host runtime exposes).
template <int WAIT> __global__ void pipeline_kernel(const uint4* src, int ntiles, unsigned* sums) {
    DYNAMIC_SHARED(uint4, s);
    int t = threadIdx.x, n = blockDim.x;
    unsigned sum = 0;
    cp_async_16(&s[t], &src[t], 16);
    cp_async_commit();
    for (int i = 0; i < ntiles; i++) {
        if (i + 1 < ntiles) cp_async_16(&s[((i + 1) & 1) * n + t], &src[(size_t)(i + 1) * n + t], 16);
        cp_async_commit();
        cp_async_wait<WAIT>();
        __syncthreads();
        uint4 v = s[(i & 1) * n + (t * 7 + 3) % n];
        sum = sum * 31u + v.x + 3u * v.y + 5u * v.z + 7u * v.w;
        __syncthreads();  // the stage is refilled by the next iteration
    }
    cp_async_wait<0>();
    sums[t] = sum;
}

static uint4* upload4(const uint4* h, int n) {
    uint4* d;
    CUDA_CHECK(cudaMalloc(&d, (size_t)n * sizeof(uint4)));
    CUDA_CHECK(cudaMemcpy(d, h, (size_t)n * sizeof(uint4), cudaMemcpyHostToDevice));
    return d;
}

static uint4 pattern4(int i) {
    uint4 v = {(unsigned)(4 * i + 1), (unsigned)(4 * i + 2), (unsigned)(4 * i + 3), (unsigned)(4 * i + 4)};
    return v;
}

static void test_cp_async(void) {
    const int n = 32;
    uint4 hsrc[3 * n], hout[5 * n];
    for (int i = 0; i < 3 * n; i++) hsrc[i] = pattern4(i);
    uint4* src = upload4(hsrc, 3 * n);
    uint4* out;
    CUDA_CHECK(cudaMalloc(&out, sizeof hout));

    LAUNCH(visible_kernel, 1, n, n * sizeof(uint4), 0, src, out);
    CUDA_CHECK(cudaMemcpy(hout, out, 3 * n * sizeof(uint4), cudaMemcpyDeviceToHost));
    int before = 0, after = 0, other = 0;
    for (int t = 0; t < n; t++) {
        before += same4(hout[3 * t], ones4);
        after += same4(hout[3 * t + 1], hsrc[t]);
        other += same4(hout[3 * t + 2], hsrc[(t + 1) % n]);
    }
#if defined(CUDA_HOST)
    check(before == n, "cp.async: the copy is not in shared memory before the wait (%d of %d threads read the "
          "old 0xFF bytes)", before, n);
#endif
    check(after == n && other == n, "cp.async: after cp_async_wait<0> the thread reads its copy (%d of %d), and "
          "after __syncthreads another thread's (%d of %d)", after, n, other, n);

    LAUNCH(groups_kernel, 1, n, 3 * n * sizeof(uint4), 0, src, out);
    CUDA_CHECK(cudaMemcpy(hout, out, 5 * n * sizeof(uint4), cudaMemcpyDeviceToHost));
    int landed = 0, pending = 0;
    for (int t = 0; t < n; t++) {
        landed += same4(hout[5 * t], hsrc[3 * t]) + same4(hout[5 * t + 2], hsrc[3 * t + 1]) +
                  same4(hout[5 * t + 4], hsrc[3 * t + 2]);
        pending += same4(hout[5 * t + 1], ones4) + same4(hout[5 * t + 3], ones4);
    }
    check(landed == 3 * n, "cp.async groups: wait<1> retires the older group, wait<0> the newer, and a copy "
          "lands after its late commit and a wait<0> (%d of %d)", landed, 3 * n);
#if defined(CUDA_HOST)
    check(pending == 2 * n, "cp.async groups: wait<1> leaves the latest committed group pending, and wait<0> "
          "an uncommitted copy (%d of %d reads saw the old bytes)", pending, 2 * n);
#endif

    // Host: `nowhere` is an inaccessible page, so reading it would crash.
#if defined(CUDA_HOST)
    void* page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED, "", "mmap failed");
    const uint4* nowhere = (const uint4*)page;
#else
    const uint4* nowhere = src;
#endif
    LAUNCH(zfill_kernel, 1, n, 2 * n * sizeof(uint4), 0, src, nowhere, out);
    CUDA_CHECK(cudaMemcpy(hout, out, 2 * n * sizeof(uint4), cudaMemcpyDeviceToHost));
    int partial = 0, zero = 0;
    for (int t = 0; t < n; t++) {
        uint4 want = {hsrc[t].x, 0, 0, 0};
        partial += same4(hout[2 * t], want);
        zero += same4(hout[2 * t + 1], zero4);
    }
    check(partial == n && zero == n, "cp.async zero-fill: src_bytes 4 copies 4 bytes and zeros 12 (%d of %d), "
          "src_bytes 0 zeros 16 without reading src (%d of %d)", partial, n, zero, n);
#if defined(CUDA_HOST)
    munmap(page, 4096);
#endif
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaFree(out));
}

static void test_pipeline(void) {
    const int n = 64, ntiles = 8;
    uint4* hsrc = (uint4*)malloc((size_t)n * ntiles * sizeof(uint4));
    for (int i = 0; i < n * ntiles; i++) hsrc[i] = pattern4(i);
    unsigned want[64], got[64];
    for (int t = 0; t < n; t++) {
        unsigned sum = 0;
        for (int i = 0; i < ntiles; i++) {
            uint4 v = hsrc[i * n + (t * 7 + 3) % n];
            sum = sum * 31u + v.x + 3u * v.y + 5u * v.z + 7u * v.w;
        }
        want[t] = sum;
    }
    uint4* src = upload4(hsrc, n * ntiles);
    unsigned* sums;
    CUDA_CHECK(cudaMalloc(&sums, sizeof got));
    LAUNCH((pipeline_kernel<1>), 3, n, 2 * n * sizeof(uint4), 0, src, ntiles, sums);
    CUDA_CHECK(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int t = 0; t < n; t++) bad += got[t] != want[t];
    check(bad == 0, "cp.async double buffer (2 stages, %d tiles, wait<1>): every thread's hash is right "
          "(%d of %d differ)", ntiles, bad, n);
#if defined(CUDA_HOST)
    LAUNCH((pipeline_kernel<2>), 3, n, 2 * n * sizeof(uint4), 0, src, ntiles, sums);
    CUDA_CHECK(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int t = 0; t < n; t++) bad += got[t] != want[t];
    check(bad == n, "cp.async double buffer waiting with wait<2> (one group too few) reads stale bytes "
          "under the host runtime (%d of %d hashes wrong)", bad, n);
#endif
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaFree(sums));
    free(hsrc);
}

// --- ex2.approx.ftz --------------------------------------------------------------------------------

__global__ void ex2_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = ex2_approx_ftz(x[i]);
}

static unsigned bits_of(float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float* upload_f(const float* h, int n) {
    float* d;
    CUDA_CHECK(cudaMalloc(&d, (size_t)n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

// y = ex2_approx_ftz(x) for n inputs, through the kernel.
static void run_ex2(const float* x, float* y, int n) {
    float* dx = upload_f(x, n);
    float* dy;
    CUDA_CHECK(cudaMalloc(&dy, (size_t)n * sizeof(float)));
    LAUNCH(ex2_kernel, (n + 127) / 128, 128, 0, 0, dx, dy, n);
    CUDA_CHECK(cudaMemcpy(y, dy, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
}

static void test_ex2(void) {
    enum { NINT = 254, NFLUSH = 27, NFRAC = 1024 };
    float x[NFRAC], y[NFRAC];
    // Integers -126..127: exactly 2^k.
    for (int k = -126; k <= 127; k++) x[k + 126] = (float)k;
    run_ex2(x, y, NINT);
    int bad = 0;
    for (int k = -126; k <= 127; k++) bad += bits_of(y[k + 126]) != bits_of(ldexpf(1.0f, k));
    check(bad == 0, "ex2.approx.ftz: 2^k exactly at the integers k = -126..127 (%d of %d differ)", bad, NINT);

    // Results below 2^-126 (subnormal or smaller) are flushed to +0.
    for (int i = 0; i < 23; i++) x[i] = (float)(-127 - i);  // -127 .. -149
    x[23] = -150.0f, x[24] = -126.5f, x[25] = -1000.0f, x[26] = -FLT_MAX;
    run_ex2(x, y, NFLUSH);
    bad = 0;
    for (int i = 0; i < NFLUSH; i++) bad += bits_of(y[i]) != 0u;
    check(bad == 0, "ex2.approx.ftz: results under 2^-126 (x = -126.5, -127 .. -150, -1000, -FLT_MAX) are "
          "+0 (%d of %d are not)", bad, NFLUSH);

    // Special inputs.
    float sx[9] = {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, FLT_TRUE_MIN, -(FLT_MIN - FLT_TRUE_MIN), 128.0f, 1000.0f};
    float sy[9];
    run_ex2(sx, sy, 9);
    check(bits_of(sy[0]) == 0u && bits_of(sy[1]) == 0x7f800000u && isnan(sy[2]),
          "ex2.approx.ftz: -inf -> +0, +inf -> +inf, NaN -> NaN (got %a, %a, %a)", sy[0], sy[1], sy[2]);
    check(sy[3] == 1.0f && sy[4] == 1.0f && sy[5] == 1.0f && sy[6] == 1.0f,
          "ex2.approx.ftz: 2^0 = 2^-0 = 1, and subnormal inputs count as zero (got %a, %a, %a, %a)", sy[3],
          sy[4], sy[5], sy[6]);
    check(bits_of(sy[7]) == 0x7f800000u && bits_of(sy[8]) == 0x7f800000u,
          "ex2.approx.ftz: overflow (x = 128, 1000) gives +inf (got %a, %a)", sy[7], sy[8]);

    // Fractions over [-125.9, 127.9]: within 2^-22 relative of 2^x (the PTX ISA's bound).
    for (int i = 0; i < NFRAC; i++) x[i] = -125.9f + 253.8f * (float)i / (NFRAC - 1) + 1e-3f * (float)(i % 7);
    x[0] = 0.5f, x[1] = -0.5f, x[2] = 1.0f / 3.0f, x[3] = -1e-6f, x[4] = 0.999f, x[5] = 127.9f;
    run_ex2(x, y, NFRAC);
    double worst = 0.0;
    for (int i = 0; i < NFRAC; i++) {
        double want = exp2((double)x[i]), r = fabs((double)y[i] - want) / want;
        if (!(r <= worst)) worst = r;
    }
    check(worst <= ldexp(1.0, -22), "ex2.approx.ftz: %d fractions in [-125.9, 127.9] within 2^-22 relative "
          "(worst %.3g = %.3f x 2^-22)", NFRAC, worst, worst / ldexp(1.0, -22));
}

// --- red.global.add ------------------------------------------------------------------------------

// Multiples of 1/4 up to 2.25: every partial sum of 1024 of them is exact in fp32, in any order.
__device__ __host__ static float red_value(int g, int j) { return (float)((g * 3 + j * 7) % 9 + 1) * 0.25f; }

// Every thread adds red_value(g, j) to acc[j], j < nacc (even); V2 adds pairs with the vector form where
// the architecture has it (flag[0] = 1) and two scalar adds elsewhere (flag[0] = 0).
template <int V2> __global__ void red_kernel(float* acc, int nacc, int* flag) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    for (int j = 0; j < nacc; j += 2) {
        if (!V2) {
            red_add_f32(&acc[j], red_value(g, j));
            red_add_f32(&acc[j + 1], red_value(g, j + 1));
            continue;
        }
#if CUDA_PTX_HAS_RED_V2
        red_add_v2_f32(&acc[j], red_value(g, j), red_value(g, j + 1));
#else
        red_add_f32(&acc[j], red_value(g, j));
        red_add_f32(&acc[j + 1], red_value(g, j + 1));
#endif
    }
    if (V2 && g == 0) flag[0] = CUDA_PTX_HAS_RED_V2;
}

template <int V2> static void test_red(void) {
    enum { BLOCKS = 8, THREADS = 128, NACC = 6 };
    float* acc;
    int* flag;
    float h[NACC];
    int hflag = -1;
    CUDA_CHECK(cudaMalloc(&acc, sizeof h));
    CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
    CUDA_CHECK(cudaMemset(acc, 0, sizeof h));
    CUDA_CHECK(cudaMemset(flag, 0xff, sizeof(int)));
    LAUNCH(red_kernel<V2>, BLOCKS, THREADS, 0, 0, acc, NACC, flag);
    CUDA_CHECK(cudaMemcpy(h, acc, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&hflag, flag, sizeof(int), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int j = 0; j < NACC; j++) {
        double want = 0.0;
        for (int g = 0; g < BLOCKS * THREADS; g++) want += red_value(g, j);
        bad += (double)h[j] != want;
    }
    if (!V2)
        check(bad == 0, "red.global.add.f32: %d threads in %d blocks add into %d addresses; every sum exact "
              "(%d of %d differ)", BLOCKS * THREADS, BLOCKS, NACC, bad, NACC);
    else
        check(bad == 0 && (hflag == 0 || hflag == 1), "red_add_v2_f32 (%s): %d threads add pairs into %d "
              "addresses; every sum exact (%d of %d differ)", hflag == 1 ? "red.global.add.v2.f32" :
              hflag == 0 ? "sm_80: two red.global.add.f32" : "flag not written", BLOCKS * THREADS, NACC, bad, NACC);
    CUDA_CHECK(cudaFree(acc));
    CUDA_CHECK(cudaFree(flag));
}

// --- Semaphore-ordered accumulation ------------------------------------------------------------------

// Block i adds row i of contrib (m values) into acc in turn: thread 0 waits until *sem == i, the
// block adds (a plain read-modify-write, or red_add_f32 when RED), then one thread releases i + 1.
// WAIT = 0 is the mutant: the same adds in whatever order the blocks run.
template <int WAIT, int RED> __global__ void ordered_kernel(const float* contrib, float* acc, unsigned* sem, int m) {
    unsigned i = blockIdx.x;
    if (WAIT && threadIdx.x == 0)
        while (ld_acquire_gpu_u32(sem) != i) nanosleep_ns(64);
    __syncthreads();
    for (int c = threadIdx.x; c < m; c += blockDim.x) {
        float v = contrib[(size_t)i * m + c];
        if (RED) red_add_f32(&acc[c], v);
        else acc[c] += v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        red_release_gpu_add_u32(sem, 1u);
    }
}

enum { ORD_BLOCKS = 20, ORD_M = 64 };  // 20 blocks: two windows of 8 and a partial one (block_exec.cpp)

// Values from 2^-12 to 2^12 of both signs: their fp32 sum depends on the order of the additions.
static void ordered_contrib(float* c) {
    unsigned s = 12345u;
    for (int i = 0; i < ORD_BLOCKS * ORD_M; i++) {
        s = s * 1664525u + 1013904223u;
        int mant = 1024 + (int)(s >> 22), e = (int)((s >> 8) % 25) - 22;
        c[i] = ldexpf((float)((s >> 20) & 1 ? -mant : mant), e);
    }
}

typedef struct {
    float* contrib;
    float* acc;
    unsigned* sem;
    float want[ORD_M];  // the sum in block order, on the host
} Ordered;

static void ordered_init(Ordered* o) {
    float h[ORD_BLOCKS * ORD_M];
    ordered_contrib(h);
    for (int c = 0; c < ORD_M; c++) {
        float s = 0.0f;
        for (int i = 0; i < ORD_BLOCKS; i++) s += h[i * ORD_M + c];
        o->want[c] = s;
    }
    o->contrib = upload_f(h, ORD_BLOCKS * ORD_M);
    CUDA_CHECK(cudaMalloc(&o->acc, ORD_M * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&o->sem, sizeof(unsigned)));
}

static void ordered_free(Ordered* o) {
    CUDA_CHECK(cudaFree(o->contrib));
    CUDA_CHECK(cudaFree(o->acc));
    CUDA_CHECK(cudaFree(o->sem));
}

// Runs one variant; returns how many of the m sums differ in bits from the block-order sum.
static int ordered_run(Ordered* o, int wait, int red) {
    float got[ORD_M];
    CUDA_CHECK(cudaMemset(o->acc, 0, ORD_M * sizeof(float)));
    CUDA_CHECK(cudaMemset(o->sem, 0, sizeof(unsigned)));
    if (wait && red) LAUNCH((ordered_kernel<1, 1>), ORD_BLOCKS, 32, 0, 0, o->contrib, o->acc, o->sem, ORD_M);
    else if (wait) LAUNCH((ordered_kernel<1, 0>), ORD_BLOCKS, 32, 0, 0, o->contrib, o->acc, o->sem, ORD_M);
    else LAUNCH((ordered_kernel<0, 1>), ORD_BLOCKS, 32, 0, 0, o->contrib, o->acc, o->sem, ORD_M);
    CUDA_CHECK(cudaMemcpy(got, o->acc, sizeof got, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int c = 0; c < ORD_M; c++) bad += bits_of(got[c]) != bits_of(o->want[c]);
    return bad;
}

#if defined(CUDA_HOST)
enum { ORD_SEEDS = 8 };
static void ordered_seed(int seed) { cuda_host_schedule_seed((unsigned long long)seed); }
#else
enum { ORD_SEEDS = 3 };  // a GPU has no seeds: runs 1..3
static void ordered_seed(int seed) { (void)seed; }
#endif

static void test_ordered(void) {
    Ordered o;
    ordered_init(&o);
    float sorted_sum = 0.0f, h[ORD_BLOCKS * ORD_M];
    ordered_contrib(h);
    for (int i = ORD_BLOCKS - 1; i >= 0; i--) sorted_sum += h[i * ORD_M];
    check(bits_of(sorted_sum) != bits_of(o.want[0]), "ordered accumulation: the inputs' fp32 sum depends on the "
          "order (column 0 in reverse block order: %a, in block order: %a)", sorted_sum, o.want[0]);
    for (int red = 0; red < 2; red++) {
        int bad = 0, runs = 0;
        for (int seed = 1; seed <= ORD_SEEDS; seed++) {
            ordered_seed(seed);
            bad += ordered_run(&o, 1, red) != 0;
            runs++;
        }
        check(bad == 0, "ordered accumulation (%d blocks, ld.acquire + nanosleep wait, %s adds, red.release): "
              "bit-identical to the block-order sum in %d of %d runs%s", ORD_BLOCKS, red ? "red.global" : "plain",
              runs - bad, runs, ORD_SEEDS == 8 ? " (seeds 1..8)" : "");
    }
#if defined(CUDA_HOST)
    unsigned caught = 0;
    for (int seed = 1; seed <= ORD_SEEDS; seed++) {
        ordered_seed(seed);
        if (ordered_run(&o, 0, 1)) caught |= 1u << (seed - 1);
    }
    printf("info ordered accumulation without the wait: seeds whose block order changes the sum:");
    for (int seed = 1; seed <= ORD_SEEDS; seed++)
        if (caught >> (seed - 1) & 1u) printf(" %d", seed);
    printf("\n");
    check(caught != 0, "ordered accumulation without the wait (the mutant): the host runtime's block orders "
          "change its sum under some seed of 1..%d", ORD_SEEDS);
    ordered_seed(1);
#endif
    ordered_free(&o);
}

// The Hopper instructions (model/cuda_ptx_sm90.cuh): their tests, mutants and --die cases.
#include "tests/cuda_host/test_ptx_sm90.cuh"

// --mutant no-wait: the mutant checked as if it were right, under seeds 1..8; must fail.
static int mutant(const char* what) {
    if (!strcmp(what, "tma-no-wait") || !strcmp(what, "tma-wrong-swizzle") || !strcmp(what, "wgmma-no-wait"))
        return mutant_sm90(what);
    if (strcmp(what, "no-wait")) {
        printf("--mutant %s: unknown case\n", what);
        return 2;
    }
    Ordered o;
    ordered_init(&o);
    for (int seed = 1; seed <= ORD_SEEDS; seed++) {
        ordered_seed(seed);
        int bad = ordered_run(&o, 0, 1);
        check(bad == 0, "ordered accumulation without the wait: bit-identical to the block-order sum under "
              "seed %d (%d of %d sums differ)", seed, bad, ORD_M);
    }
    ordered_free(&o);
    return test_finish("test_ptx --mutant no-wait");
}

// --- --die cases ---------------------------------------------------------------------------------

__global__ void die_ldmatrix_misaligned_kernel(uint32_t* out) {
    __shared__ __align__(16) uint16_t tile[32 * 8 + 8];
    int l = threadIdx.x;
    uint32_t r[4];
    ldmatrix_x4(r, &tile[l * 8 + (l == 5 ? 4 : 0)]);  // lane 5: 8 bytes off
    out[l] = r[0];
}

__global__ void die_ldmatrix_global_kernel(const uint16_t* g, uint32_t* out) {
    int l = threadIdx.x;
    uint32_t r[1];
    ldmatrix_x1(r, g + 8 * (l % 8));  // global memory, not shared
    out[l] = r[0];
}

__global__ void die_cp_misaligned_kernel(const uint4* src) {
    DYNAMIC_SHARED(unsigned char, s);
    int t = threadIdx.x;
    cp_async_16(s + 16 * t + (t == 3 ? 8 : 0), &src[t], 16);
    cp_async_commit();
    cp_async_wait<0>();
}

__global__ void die_cp_overrun_kernel(const unsigned char* src) {
    DYNAMIC_SHARED(unsigned char, s);
    cp_async_16(s, src + 32, 16);  // a 40-byte allocation: bytes 32..47
    cp_async_commit();
    cp_async_wait<0>();
}

__global__ void die_cp_pending_kernel(const uint4* src) {
    DYNAMIC_SHARED(uint4, s);
    if (threadIdx.x == 0) {
        cp_async_16(s, src, 16);
        cp_async_commit();  // no wait
    }
}

__global__ void die_mma_partial_kernel(float* out) {
    int l = threadIdx.x;
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (l < 16) mma_m16n8k16_bf16(acc, a, b, acc);  // half a warp
    out[l] = acc[0];
}

__global__ void die_mixed_kernel(float* out) {
    __shared__ __align__(16) uint16_t tile[64];
    int l = threadIdx.x;
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = l; i < 64; i += 32) tile[i] = 0;
    __syncthreads();
    if (l < 16) mma_m16n8k16_bf16(acc, a, b, acc);
    else ldmatrix_x1(a, &tile[8 * (l % 8)]);
    out[l] = acc[0] + (float)a[0];
}

// Each block waits for the other's release: a cycle no schedule can run.
__global__ void die_spin_cycle_kernel(unsigned* sem) {
    unsigned b = blockIdx.x;
    if (threadIdx.x == 0) {
        while (ld_acquire_gpu_u32(&sem[1 - b]) == 0u) nanosleep_ns(100);
        red_release_gpu_add_u32(&sem[b], 1u);
    }
}

static int die(const char* what) {
    int r = die_sm90(what);
    if (r > 0) return r;
    void* d;
    CUDA_CHECK(cudaMalloc(&d, 4096));
    if (r == 0) {}
    else if (!strcmp(what, "ldmatrix-misaligned")) LAUNCH(die_ldmatrix_misaligned_kernel, 1, 32, 0, 0, (uint32_t*)d);
    else if (!strcmp(what, "ldmatrix-global"))
        LAUNCH(die_ldmatrix_global_kernel, 1, 32, 0, 0, (const uint16_t*)d, (uint32_t*)d + 512);
    else if (!strcmp(what, "cp-misaligned")) LAUNCH(die_cp_misaligned_kernel, 1, 32, 1024, 0, (const uint4*)d);
    else if (!strcmp(what, "cp-overrun")) {
        void* small;
        CUDA_CHECK(cudaMalloc(&small, 40));
        LAUNCH(die_cp_overrun_kernel, 1, 32, 1024, 0, (const unsigned char*)small);
    } else if (!strcmp(what, "cp-pending")) LAUNCH(die_cp_pending_kernel, 1, 32, 1024, 0, (const uint4*)d);
    else if (!strcmp(what, "mma-partial")) LAUNCH(die_mma_partial_kernel, 1, 32, 0, 0, (float*)d);
    else if (!strcmp(what, "mixed")) LAUNCH(die_mixed_kernel, 1, 32, 0, 0, (float*)d);
    else if (!strcmp(what, "spin-cycle")) {
        CUDA_CHECK(cudaMemset(d, 0, 2 * sizeof(unsigned)));
        LAUNCH(die_spin_cycle_kernel, 2, 32, 0, 0, (unsigned*)d);
    }
    else {
        printf("--die %s: unknown case\n", what);
        return 2;
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    printf("--die %s: the program was expected to end with a diagnostic\n", what);
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--die")) return die(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--mutant")) return mutant(argv[2]);
    if (argc == 7 && !strcmp(argv[1], "--tma-case"))
        return tma_one_case(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    if (argc == 6 && !strcmp(argv[1], "--store-case"))
        return tma_one_store_case(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    // --only LIST: the groups to run, from base (the sm_80 wrappers) and the sm_90a groups of
    // test_sm90: a fault ends the process, so the GPU kit runs each group in its own.
    const char* only = argc == 3 && !strcmp(argv[1], "--only") ? argv[2] : NULL;
    if (argc > 1 && !only) {
        fprintf(stderr, "usage: test_ptx [--only base,mbarrier,named,tma,store,wgmma | --tma-case SW B0 B1 C0 C1 | "
                        "--store-case SW C0 C1 REDUCE | --die WHAT | --mutant WHAT]\n");
        return 2;
    }
    if (listed(only, "base")) {
        test_mma(0, 1, "integer A, B, C = 0");
        test_mma(1, 1, "A a permutation, B distinct values, C integers");
        test_mma(2, 3, "integer A, B, C, three mma calls with d = c");
        test_ldmatrix<1, 0>();
        test_ldmatrix<1, 1>();
        test_ldmatrix<2, 0>();
        test_ldmatrix<2, 1>();
        test_ldmatrix<4, 0>();
        test_ldmatrix<4, 1>();
        test_compose();
        test_cp_async();
        test_pipeline();
        test_ex2();
        test_red<0>();
        test_red<1>();
        test_ordered();
    }
    test_sm90(only);
    return test_finish("test_ptx");
}
