// Streams under the host runtime's scheduler (tests/cuda_host/stream_sched.cpp): work of
// concurrent streams runs interleaved in a seeded random order, so that a missing dependency
// changes results. Each case runs under the schedules of seeds 1..20 (cuda_host_schedule_seed):
//   (a) a producer kernel on stream A, a consumer on stream B after cudaEventRecord +
//       cudaStreamWaitEvent: right under every seed;
//   (b) the same without the wait: wrong under at least one seed (the missing dependency is
//       detected; the seeds that expose it are printed);
//   (c) cudaStreamWaitEvent waits for the record issued last before it (an event recorded again
//       later does not move it), and an event never recorded is nothing to wait for;
//   (d) the legacy default stream is ordered with blocking streams both ways, not with
//       cudaStreamNonBlocking ones;
//   (e) a copy to pageable memory is complete when cudaMemcpyAsync returns, a pageable source is
//       taken when the call is made, pinned copies complete at the next synchronisation;
//   (f) cudaStreamQuery / cudaEventQuery answer cudaErrorNotReady, then cudaSuccess; a loop of
//       queries gets more work done per query, as a GPU works on while the host polls (64
//       launches end within 8 queries: a host that sleeps between polls is not starved);
//   (g) the blocks of two concurrent kernels interleave;
//   (h) under CUDA_HOST_SCHEDULE=inorder (the suite runs this program both ways), each operation
//       runs when issued: nothing is exposed, queries succeed at once, nothing interleaves.
//   (i) the counters (cuda_host_counters): launches (kernels and GEMMs), copies out of device
//       memory, and calls that block the host; queries and asynchronous copies into pinned
//       memory do not count as synchronisations.
// Plus: kernel arguments and cuBLAS scalars are taken when the call is made, and a stream
// destroyed with work queued still runs it. Under nvcc the file compiles (make
// cuda-compile-check); the checks of what the host runtime's schedules expose are CUDA_HOST only.
#include "model/cuda_common.cuh"
#include "tests/cuda_host/test_check.h"
#include "tests/cuda_host/test_stream_util.cuh"

#include <stdlib.h>
#include <string.h>

enum { N = 4096, THREADS = 64, BLOCKS = N / THREADS };

// Appends the kernel's id to a log shared by concurrent kernels, one entry per block.
__global__ void log_kernel(int* counter, int* log, int id) {
    log[atomicAdd(counter, 1)] = id;
}

static int inorder;  // CUDA_HOST_SCHEDULE=inorder

// Elements of out (N ints of device memory) that differ from 2 * (value + i).
static int wrong_consumed(const int* out, int value) {
    static int h[N];
    CUDA_CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < N; i++) bad += h[i] != 2 * (value + i);
    return bad;
}

// (a) and (b): producer on A, consumer on B, with and without the event dependency.
static void test_producer_consumer(void) {
    cudaStream_t a, b;
    cudaEvent_t produced;
    CUDA_CHECK(cudaStreamCreate(&a));
    CUDA_CHECK(cudaStreamCreate(&b));
    CUDA_CHECK(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
    int *buf = dev_ints(N), *out = dev_ints(N);
    unsigned wrong_with = 0, wrong_without = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        for (int wait = 1; wait >= 0; wait--) {
            use_seed(seed);
            CUDA_CHECK(cudaMemset(buf, 0xff, N * sizeof(int)));  // -1: not produced yet
            LAUNCH(produce_kernel, BLOCKS, THREADS, 0, a, buf, seed);
            CUDA_CHECK(cudaEventRecord(produced, a));
            if (wait) CUDA_CHECK(cudaStreamWaitEvent(b, produced, 0));
            LAUNCH(consume_kernel, BLOCKS, THREADS, 0, b, buf, out);
            CUDA_CHECK(cudaDeviceSynchronize());
            if (wrong_consumed(out, seed)) (wait ? wrong_with : wrong_without) |= 1u << (seed - 1);
        }
    }
    check(wrong_with == 0, "(a) producer on A, event, wait on B, consumer on B: right under seeds 1..%d", SEEDS);
    print_seeds("(b) seeds whose schedule exposes the missing cudaStreamWaitEvent", wrong_without);
#ifdef CUDA_HOST  // the host runtime's schedules; a GPU may or may not expose it
    if (inorder)
        check(wrong_without == 0, "(h) inorder: without the wait the consumer still runs after the producer");
    else
        check(wrong_without != 0, "(b) without the wait the consumer reads unproduced data under some seed of 1..%d",
              SEEDS);
#endif
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaEventDestroy(produced));
    CUDA_CHECK(cudaStreamDestroy(a));
    CUDA_CHECK(cudaStreamDestroy(b));
}

// (c) Which record a wait waits for.
static void test_wait_generations(void) {
    cudaStream_t a, b;
    cudaEvent_t e, f, never;
    CUDA_CHECK(cudaStreamCreate(&a));
    CUDA_CHECK(cudaStreamCreate(&b));
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&never, cudaEventDisableTiming));
    int *x = dev_ints(N), *y = dev_ints(N), *out = dev_ints(N), *z = dev_ints(N);
    int late = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        use_seed(seed);
        CUDA_CHECK(cudaMemset(y, 0xff, N * sizeof(int)));
        CUDA_CHECK(cudaMemset(z, 0xff, N * sizeof(int)));
        // Recorded twice before the wait: the wait is for the second record, after y is written.
        LAUNCH(produce_kernel, BLOCKS, THREADS, 0, a, x, 1);
        CUDA_CHECK(cudaEventRecord(e, a));
        LAUNCH(produce_kernel, BLOCKS, THREADS, 0, a, y, seed);
        CUDA_CHECK(cudaEventRecord(e, a));
        CUDA_CHECK(cudaStreamWaitEvent(b, e, 0));
        LAUNCH(consume_kernel, BLOCKS, THREADS, 0, b, y, out);
        // Recorded again after the wait, behind work that itself waits for b: the wait keeps the
        // record it captured (waiting for this one would be a cycle, reported as a deadlock).
        LAUNCH(produce_kernel, BLOCKS, THREADS, 0, b, z, seed);
        CUDA_CHECK(cudaEventRecord(f, b));
        CUDA_CHECK(cudaStreamWaitEvent(a, f, 0));
        CUDA_CHECK(cudaEventRecord(e, a));
        CUDA_CHECK(cudaDeviceSynchronize());
        late += wrong_consumed(out, seed) != 0;
    }
    check(late == 0, "(c) an event recorded twice: the wait is for the record issued last before it (%d of %d "
          "seeds wrong), and a record issued after the wait does not move it", late, SEEDS);
    // Never recorded: nothing to wait for, and it counts as complete.
    CUDA_CHECK(cudaStreamWaitEvent(b, never, 0));
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, b, x, 7);
    CUDA_CHECK(cudaStreamSynchronize(b));
    check(cudaEventQuery(never) == cudaSuccess, "(c) waiting on an event never recorded is a no-op; it queries as complete");
    CUDA_CHECK(cudaEventSynchronize(never));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
    CUDA_CHECK(cudaFree(z));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaEventDestroy(e));
    CUDA_CHECK(cudaEventDestroy(f));
    CUDA_CHECK(cudaEventDestroy(never));
    CUDA_CHECK(cudaStreamDestroy(a));
    CUDA_CHECK(cudaStreamDestroy(b));
}

// (d) The legacy default stream against a blocking and a non-blocking stream.
static void test_legacy_stream(void) {
    cudaStream_t blocking, nonblocking;
    CUDA_CHECK(cudaStreamCreate(&blocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    int *buf = dev_ints(N), *out = dev_ints(N), *buf2 = dev_ints(N), *out2 = dev_ints(N);
    unsigned wrong_after = 0, wrong_before = 0, wrong_nonblocking = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        use_seed(seed);
        CUDA_CHECK(cudaMemsetAsync(buf, 0xff, N * sizeof(int), nonblocking));
        CUDA_CHECK(cudaMemsetAsync(buf2, 0xff, N * sizeof(int), nonblocking));
        CUDA_CHECK(cudaStreamSynchronize(nonblocking));
        // Blocking stream, then the legacy stream: the legacy kernel waits for the producer.
        LAUNCH(produce_kernel, BLOCKS, THREADS, 0, blocking, buf, seed);
        LAUNCH(consume_kernel, BLOCKS, THREADS, 0, 0, buf, out);
        // Legacy, then the blocking stream: the blocking stream's kernel waits for the legacy one.
        LAUNCH(produce_kernel, BLOCKS, THREADS, 0, cudaStreamLegacy, buf2, seed);
        LAUNCH(consume_kernel, BLOCKS, THREADS, 0, blocking, buf2, out2);
        CUDA_CHECK(cudaDeviceSynchronize());
        if (wrong_consumed(out, seed)) wrong_after |= 1u << (seed - 1);
        if (wrong_consumed(out2, seed)) wrong_before |= 1u << (seed - 1);
        // A non-blocking stream is not ordered with the legacy stream.
        CUDA_CHECK(cudaMemset(buf, 0xff, N * sizeof(int)));
        CUDA_CHECK(cudaDeviceSynchronize());
        LAUNCH(produce_kernel, BLOCKS, THREADS, 0, nonblocking, buf, seed);
        LAUNCH(consume_kernel, BLOCKS, THREADS, 0, 0, buf, out);
        CUDA_CHECK(cudaDeviceSynchronize());
        if (wrong_consumed(out, seed)) wrong_nonblocking |= 1u << (seed - 1);
    }
    check(!wrong_after && !wrong_before, "(d) the legacy stream waits for a blocking stream's earlier work, and the "
          "blocking stream for the legacy stream's (seeds 1..%d)", SEEDS);
    print_seeds("(d) seeds whose schedule runs the legacy stream's kernel before a non-blocking stream's",
                wrong_nonblocking);
#ifdef CUDA_HOST
    if (!inorder)
        check(wrong_nonblocking != 0, "(d) a cudaStreamNonBlocking stream is not ordered with the legacy stream");
#endif
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaFree(buf2));
    CUDA_CHECK(cudaFree(out2));
    CUDA_CHECK(cudaStreamDestroy(blocking));
    CUDA_CHECK(cudaStreamDestroy(nonblocking));
}

// (e) Copies to and from pageable and pinned host memory.
static void test_host_copies(void) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int* d = dev_ints(N);
    int* pageable = (int*)malloc(N * sizeof(int));
    int* pinned;
    CUDA_CHECK(cudaMallocHost(&pinned, N * sizeof(int)));
    int bad_pageable = 0, bad_snapshot = 0, pinned_early = 0, bad_pinned = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        use_seed(seed);
        for (int i = 0; i < N; i++) pageable[i] = pinned[i] = -5;
        LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, d, seed);
        CUDA_CHECK(cudaMemcpyAsync(pageable, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
        for (int i = 0; i < N; i++) bad_pageable += pageable[i] != seed + i;  // no synchronisation
        LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, d, seed + 1);
        CUDA_CHECK(cudaMemcpyAsync(pinned, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
        pinned_early += pinned[0] != -5;
        CUDA_CHECK(cudaStreamSynchronize(s));
        for (int i = 0; i < N; i++) bad_pinned += pinned[i] != seed + 1 + i;
        // The source of a pageable H2D copy is taken when the call returns.
        for (int i = 0; i < N; i++) pageable[i] = 3 * i;
        LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, d, 0);
        CUDA_CHECK(cudaMemcpyAsync(d, pageable, N * sizeof(int), cudaMemcpyHostToDevice, s));
        for (int i = 0; i < N; i++) pageable[i] = -1;
        CUDA_CHECK(cudaMemcpyAsync(pinned, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        for (int i = 0; i < N; i++) bad_snapshot += pinned[i] != 3 * i;
    }
    check(bad_pageable == 0, "(e) a D2H copy into pageable memory is complete when cudaMemcpyAsync returns (%d wrong)",
          bad_pageable);
    check(bad_snapshot == 0, "(e) a pageable H2D source may be overwritten once cudaMemcpyAsync returns (%d wrong)",
          bad_snapshot);
    check(bad_pinned == 0, "(e) a D2H copy into pinned memory is complete after cudaStreamSynchronize (%d wrong)",
          bad_pinned);
#ifdef CUDA_HOST
    if (inorder)
        check(pinned_early == SEEDS, "(h) inorder: the pinned copy is done when cudaMemcpyAsync returns");
    else
        check(pinned_early == 0, "(e) the pinned copy is still queued when cudaMemcpyAsync returns (%d of %d seeds)",
              SEEDS - pinned_early, SEEDS);
#endif
    free(pageable);
    CUDA_CHECK(cudaFreeHost(pinned));
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaStreamDestroy(s));
}

// (f) Queries: not ready while work is queued, then ready.
static void test_queries(void) {
    cudaStream_t s;
    cudaEvent_t e;
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(cudaEventCreate(&e));
    int* d = dev_ints(N);
    int stream_not_ready = 0, event_not_ready = 0, polls = 0;
    use_seed(1);
    for (int k = 0; k < 4; k++) LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, d, k);
    cudaError_t err;
    while ((err = cudaStreamQuery(s)) == cudaErrorNotReady) stream_not_ready++, polls++;
    check(err == cudaSuccess, "(f) cudaStreamQuery ends with cudaSuccess: %s", cudaGetErrorName(err));
    for (int k = 0; k < 4; k++) LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, d, k);
    CUDA_CHECK(cudaEventRecord(e, s));
    while ((err = cudaEventQuery(e)) == cudaErrorNotReady) event_not_ready++, polls++;
    check(err == cudaSuccess, "(f) cudaEventQuery ends with cudaSuccess: %s", cudaGetErrorName(err));
    check(cudaGetLastError() == cudaSuccess, "(f) cudaErrorNotReady is not recorded as the last error");
    enum { MANY = 64 };
    for (int k = 0; k < MANY; k++) LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, d, k);
    CUDA_CHECK(cudaEventRecord(e, s));
    int many_polls = 0;
    while ((err = cudaEventQuery(e)) == cudaErrorNotReady) many_polls++, polls++;
    check(err == cudaSuccess, "(f) cudaEventQuery after %d launches: %s", MANY, cudaGetErrorName(err));
#ifdef CUDA_HOST
    if (inorder) {
        check(polls == 0, "(h) inorder: queries succeed at once");
    } else {
        check(stream_not_ready > 0 && event_not_ready > 0, "(f) queries answered cudaErrorNotReady while work was "
              "queued (stream %d times, event %d times)", stream_not_ready, event_not_ready);
        check(many_polls > 0 && many_polls <= 8, "(f) %d launches took %d not-ready queries (expected 1 to 8: each "
              "query may run twice the work of the one before)", MANY, many_polls);
    }
#endif
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaEventDestroy(e));
    CUDA_CHECK(cudaStreamDestroy(s));
}

// (g) Blocks of two kernels on two streams, logged in the order they ran.
static void test_block_interleaving(void) {
    enum { B = 32 };
    cudaStream_t a, b;
    CUDA_CHECK(cudaStreamCreate(&a));
    CUDA_CHECK(cudaStreamCreate(&b));
    int *counter = dev_ints(1), *log = dev_ints(2 * B);
    unsigned interleaved = 0;
    int bad_log = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        use_seed(seed);
        CUDA_CHECK(cudaMemset(counter, 0, sizeof(int)));
        LAUNCH(log_kernel, B, 1, 0, a, counter, log, 1);
        LAUNCH(log_kernel, B, 1, 0, b, counter, log, 2);
        int h[2 * B];
        CUDA_CHECK(cudaMemcpy(h, log, sizeof h, cudaMemcpyDeviceToHost));
        int switches = 0, ones = 0;
        for (int i = 0; i < 2 * B; i++) {
            ones += h[i] == 1;
            switches += i > 0 && h[i] != h[i - 1];
        }
        bad_log += ones != B;
        if (switches > 1) interleaved |= 1u << (seed - 1);
    }
    check(bad_log == 0, "(g) every block of both kernels ran once");
    print_seeds("(g) seeds whose schedule interleaves the blocks of two concurrent kernels", interleaved);
#ifdef CUDA_HOST
    if (inorder) check(interleaved == 0, "(h) inorder: one kernel's blocks, then the other's");
    else check(interleaved != 0, "(g) the blocks of kernels on two streams interleave under some seed");
#endif
    CUDA_CHECK(cudaFree(counter));
    CUDA_CHECK(cudaFree(log));
    CUDA_CHECK(cudaStreamDestroy(a));
    CUDA_CHECK(cudaStreamDestroy(b));
}

// What is taken when the call is made: kernel arguments, cuBLAS alpha and beta (host pointer
// mode), cuBLASLt descriptors. And a stream destroyed with work queued.
static void test_captured_at_issue(void) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    int* d = dev_ints(N);
    int value = 11;
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, d, value);
    value = 99;
    int* out = dev_ints(N);
    LAUNCH(consume_kernel, BLOCKS, THREADS, 0, s, d, out);
    CUDA_CHECK(cudaStreamSynchronize(s));
    check(wrong_consumed(out, 11) == 0 && value == 99, "kernel arguments are copied at the launch");

    // C = alpha * A * B with 1x1 matrices; alpha changed right after the call.
    cublasHandle_t h;
    CUDA_CHECK(cublasCreate(&h));
    CUDA_CHECK(cublasSetStream(h, s));
    float *m;
    CUDA_CHECK(cudaMalloc(&m, 3 * sizeof(float)));
    const float ab[2] = {2.0f, 3.0f};
    CUDA_CHECK(cudaMemcpy(m, ab, sizeof ab, cudaMemcpyHostToDevice));
    float alpha = 1.0f, beta = 0.0f;
    CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &alpha, m, 1, m + 1, 1, &beta, m + 2, 1));
    alpha = 100.0f;
    float c = 0.0f;
    CUDA_CHECK(cudaMemcpyAsync(&c, m + 2, sizeof c, cudaMemcpyDeviceToHost, s));
    check(c == 6.0f, "cublasSgemm reads alpha when called (C = %g, want 6)", c);

    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t one;
    CUDA_CHECK(cublasLtCreate(&lt));
    CUDA_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&one, CUDA_R_32F, 1, 1, 1));
    alpha = 1.0f;
    CUDA_CHECK(cublasLtMatmul(lt, desc, &alpha, m, one, m + 1, one, &beta, m + 2, one, m + 2, one, NULL, NULL, 0, s));
    alpha = 100.0f;
    const int relu = CUBLASLT_EPILOGUE_RELU;  // would not change 6, but the descriptor is copied anyway
    CUDA_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof relu));
    CUDA_CHECK(cublasLtMatmulDescDestroy(desc));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(one));
    c = 0.0f;
    CUDA_CHECK(cudaMemcpyAsync(&c, m + 2, sizeof c, cudaMemcpyDeviceToHost, s));
    check(c == 6.0f, "cublasLtMatmul reads alpha and its descriptors when called (D = %g, want 6)", c);
    CUDA_CHECK(cublasLtDestroy(lt));
    CUDA_CHECK(cublasDestroy(h));

    // Destroyed with a kernel queued: the kernel still runs.
    cudaStream_t t;
    CUDA_CHECK(cudaStreamCreate(&t));
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, t, d, 5);
    LAUNCH(consume_kernel, BLOCKS, THREADS, 0, t, d, out);
    CUDA_CHECK(cudaStreamDestroy(t));
    CUDA_CHECK(cudaDeviceSynchronize());
    check(wrong_consumed(out, 5) == 0, "a stream destroyed with work queued still runs it");
    CUDA_CHECK(cudaFree(m));
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaStreamDestroy(s));
}

// (i) What each call adds to the counters.
#ifdef CUDA_HOST
static CudaHostCounters counted_since(const CudaHostCounters* a) {
    CudaHostCounters b;
    cuda_host_counters(&b);
    return {b.launches - a->launches, b.d2h - a->d2h, b.syncs - a->syncs,
            b.graph_launches - a->graph_launches, b.graph_kernels - a->graph_kernels};
}

static void expect_counts(const CudaHostCounters* from, unsigned long long launches,
                          unsigned long long d2h, unsigned long long syncs, const char* what) {
    const CudaHostCounters d = counted_since(from);
    check(d.launches == launches && d.d2h == d2h && d.syncs == syncs,
          "(i) %s: %llu launches, %llu D2H, %llu syncs (want %llu, %llu, %llu)", what, d.launches, d.d2h,
          d.syncs, launches, d2h, syncs);
}

static void test_counters(void) {
    cudaStream_t s;
    cudaEvent_t e;
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    int *d = dev_ints(N), *pinned;
    CUDA_CHECK(cudaMallocHost(&pinned, N * sizeof(int)));
    static int pageable[N];
    CudaHostCounters c;
    cuda_host_counters(&c);
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, d, 1);
    CUDA_CHECK(cudaMemcpyAsync(pinned, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaEventRecord(e, s));
    CUDA_CHECK(cudaMemcpyAsync(d, pinned, N * sizeof(int), cudaMemcpyHostToDevice, s));
    cudaError_t q = cudaEventQuery(e);
    check(q == cudaSuccess || q == cudaErrorNotReady, "(i) cudaEventQuery: %s", cudaGetErrorName(q));
    q = cudaStreamQuery(s);
    check(q == cudaSuccess || q == cudaErrorNotReady, "(i) cudaStreamQuery: %s", cudaGetErrorName(q));
    expect_counts(&c, 1, 1, 0, "a kernel, copies to and from pinned memory, an event, queries");
    cuda_host_counters(&c);
    CUDA_CHECK(cudaEventSynchronize(e));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaStreamSynchronize(s));   // nothing left to wait for: still a synchronisation
    CUDA_CHECK(cudaDeviceSynchronize());
    expect_counts(&c, 0, 0, 4, "cudaEventSynchronize, cudaStreamSynchronize twice, cudaDeviceSynchronize");
    cuda_host_counters(&c);
    CUDA_CHECK(cudaMemcpyAsync(pageable, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaMemcpy(pinned, d, N * sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(d, pageable, N * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d, d + N / 2, N / 2 * sizeof(int), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemsetAsync(d, 0, N * sizeof(int), s));
    expect_counts(&c, 0, 2, 3, "cudaMemcpyAsync into pageable memory, cudaMemcpy both ways, device to "
                  "device, a memset");
    cublasHandle_t h;
    CUDA_CHECK(cublasCreate(&h));
    CUDA_CHECK(cublasSetStream(h, s));
    float* m;
    CUDA_CHECK(cudaMalloc(&m, 3 * sizeof(float)));
    CUDA_CHECK(cudaMemsetAsync(m, 0, 3 * sizeof(float), s));
    const float alpha = 1.0f, beta = 0.0f;
    cuda_host_counters(&c);
    CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &alpha, m, 1, m + 1, 1, &beta, m + 2, 1));
    expect_counts(&c, 1, 0, 0, "a GEMM");
    cuda_host_counters(&c);
    CUDA_CHECK(cublasDestroy(h));
    CUDA_CHECK(cudaFree(m));
    expect_counts(&c, 0, 0, 2, "cublasDestroy, cudaFree");
    CUDA_CHECK(cudaFreeHost(pinned));
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaEventDestroy(e));
    CUDA_CHECK(cudaStreamDestroy(s));
}
#endif

int main(void) {
    const char* mode = getenv("CUDA_HOST_SCHEDULE");
    inorder = mode && !strcmp(mode, "inorder");
    printf("info schedule: %s\n", inorder ? "inorder (each operation runs when issued)" : "random interleaving");
    test_producer_consumer();
    test_wait_generations();
    test_legacy_stream();
    test_host_copies();
    test_queries();
    test_block_interleaving();
    test_captured_at_issue();
#ifdef CUDA_HOST
    test_counters();
#endif
    return test_finish("test_streams");
}
