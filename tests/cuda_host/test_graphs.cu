// Stream capture and CUDA graphs (the host runtime's twin: tests/cuda_host/stream_sched.cpp).
// Each replay case runs under the schedules of seeds 1..20:
//   (a) a capture records and runs nothing; each launch runs the recorded work again: kernels
//       with the arguments of the capture, a memset, a device copy and a GEMM, reading the inputs
//       as they are at the launch;
//   (b) a capture forked into a second stream by an event and joined back is right under every
//       seed; a graph whose fork leaves out a dependency (the consumer before the wait for the
//       producer) is wrong under some seed: a graph keeps the capture's concurrency;
//   (c) a graph launched on another stream than it was captured on, and launches of one graph on
//       two streams, run one after another (a graph that adds 1 through a scratch buffer, reversing
//       twice, counts exactly);
//   (d) the errors CUDA gives: a join missing at the end (cudaErrorStreamCaptureUnjoined), a wait
//       for an event recorded outside the capture (cudaErrorStreamCaptureIsolation, then
//       cudaErrorStreamCaptureInvalidated at the end), a copy of pageable memory, ending on the
//       wrong stream, cudaStreamIsCapturing, cudaGraphGetNodes, a query of a captured event;
//   (e) the counters: captured kernels are no launches; each graph launch counts itself and the
//       kernels and GEMMs it runs;
//   (f) external event records (cudaEventRecordWithFlags, cudaEventRecordExternal) are nodes,
//       also on a forked stream; cudaGraphExecEventRecordNodeSetEvent gives each launch its own
//       events, which time it: each launch's in order, each launch after the one before, events
//       set for a launch not yet issued left unrecorded.
// `test_graphs --die sync|malloc|legacy` does what CUDA refuses while a capture is open (the
// suite expects the host runtime to end the job naming it). Under nvcc the file compiles (make
// cuda-compile-check) and (a)-(c) hold on a GPU; the seeds and counters are CUDA_HOST only.
#include "model/cuda_common.cuh"
#include "tests/cuda_host/test_check.h"
#include "tests/cuda_host/test_stream_util.cuh"

#include <stdlib.h>
#include <string.h>

enum { N = 1024, THREADS = 64, BLOCKS = N / THREADS, G = 8 };

// out[i] = in[i] + add: reads what the launch finds in `in`.
__global__ void add_kernel(const int* in, int* out, int add) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i] + add;
}

// out = reverse(in): a block reads what other blocks of the kernel before it wrote.
__global__ void reverse_kernel(const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[N - 1 - i];
}

static void to_host(int* h, const int* d, int n) {
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, d, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost));
}

// got == want, clearing the error the call left for cudaGetLastError (LAUNCH checks it next).
static int failed_with(cudaError_t got, cudaError_t want) {
    (void)cudaGetLastError();
    return got == want;
}

static cudaGraphExec_t instantiate(cudaGraph_t g) {
    cudaGraphExec_t x;
    CUDA_CHECK(cudaGraphInstantiate(&x, g, 0));
    CUDA_CHECK(cudaGraphDestroy(g));   // the executable graph keeps what it needs
    return x;
}

// (a) What a capture records, and what each launch does with it.
static void test_record_and_replay(void) {
    cudaStream_t s;
    cublasHandle_t blas;
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(cublasCreate(&blas));
    CUDA_CHECK(cublasSetStream(blas, s));
    int *in = dev_ints(N), *mid = dev_ints(N), *out = dev_ints(N), *copy = dev_ints(N);
    float *A, *B, *C;
    CUDA_CHECK(cudaMalloc(&A, G * G * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&B, G * G * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&C, G * G * sizeof(float)));
    float hA[G * G], hB[G * G], hC[G * G];
    CUDA_CHECK(cudaMemset(out, 0, N * sizeof(int)));
    CUDA_CHECK(cudaDeviceSynchronize());

    int add = 5;
    const float one = 1.0f, zero = 0.0f;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaMemsetAsync(mid, 0, N * sizeof(int), s));
    LAUNCH(add_kernel, BLOCKS, THREADS, 0, s, in, mid, add);   // the argument 5 is recorded
    LAUNCH(consume_kernel, BLOCKS, THREADS, 0, s, mid, out);
    CUDA_CHECK(cudaMemcpyAsync(copy, out, N * sizeof(int), cudaMemcpyDeviceToDevice, s));
    CUDA_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, G, G, G, &one, A, G, B, G, &zero, C, G));
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    size_t nodes = 0;
    CUDA_CHECK(cudaGraphGetNodes(g, NULL, &nodes));
#ifdef CUDA_HOST
    check(nodes == 5, "(a) the graph has 5 nodes (memset, 2 kernels, copy, GEMM): %zu", nodes);
#else  // cuBLAS may add nodes of its own to a GEMM
    check(nodes >= 5, "(a) the graph has at least 5 nodes (memset, 2 kernels, copy, GEMM): %zu", nodes);
#endif
    cudaGraphExec_t x = instantiate(g);
    int h[N], hc[N];
    to_host(h, out, N);
    int untouched = 1;
    for (int i = 0; i < N; i++) untouched &= h[i] == 0;
    check(untouched, "(a) a capture runs nothing: the output is as before it");

    unsigned wrong = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        use_seed(seed);
        int hin[N];
        for (int i = 0; i < N; i++) hin[i] = seed * 1000 + i;
        for (int i = 0; i < G * G; i++) hA[i] = (float)(i % 7 - 3 + seed), hB[i] = (float)(i % 5 - 2);
        CUDA_CHECK(cudaMemcpy(in, hin, sizeof hin, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(A, hA, sizeof hA, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(B, hB, sizeof hB, cudaMemcpyHostToDevice));
        add = 1000;   // changes nothing: the launch has the captured argument
        CUDA_CHECK(cudaGraphLaunch(x, s));
        to_host(h, out, N);
        to_host(hc, copy, N);
        CUDA_CHECK(cudaMemcpy(hC, C, sizeof hC, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int i = 0; i < N; i++) bad += h[i] != 2 * (hin[i] + 5) || hc[i] != h[i];
        for (int i = 0; i < G; i++)
            for (int j = 0; j < G; j++) {
                float want = 0;
                for (int k = 0; k < G; k++) want += hA[i + k * G] * hB[k + j * G];
                bad += hC[i + j * G] != want;
            }
        if (bad) wrong |= 1u << (seed - 1);
    }
    check(wrong == 0, "(a) each launch recomputes from the inputs of its time with the captured "
          "arguments (kernels, memset, copy, GEMM) under seeds 1..%d", SEEDS);
    CUDA_CHECK(cudaGraphExecDestroy(x));
    CUDA_CHECK(cublasDestroy(blas));
    CUDA_CHECK(cudaFree(in));
    CUDA_CHECK(cudaFree(mid));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaFree(copy));
    CUDA_CHECK(cudaFree(A));
    CUDA_CHECK(cudaFree(B));
    CUDA_CHECK(cudaFree(C));
    CUDA_CHECK(cudaStreamDestroy(s));
}

// (b) A fork into stream b and a join back; `ordered` 0 puts the consumer before its wait.
static cudaGraphExec_t capture_fork(cudaStream_t a, cudaStream_t b, cudaEvent_t fork, cudaEvent_t join,
                                    int* buf, int* out, int ordered) {
    CUDA_CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaMemsetAsync(buf, 0xff, N * sizeof(int), a));
    CUDA_CHECK(cudaEventRecord(fork, a));
    CUDA_CHECK(cudaStreamWaitEvent(b, fork, 0));   // b joins the capture
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, b, buf, 7);
    CUDA_CHECK(cudaEventRecord(join, b));
    if (ordered) CUDA_CHECK(cudaStreamWaitEvent(a, join, 0));
    LAUNCH(consume_kernel, BLOCKS, THREADS, 0, a, buf, out);
    if (!ordered) CUDA_CHECK(cudaStreamWaitEvent(a, join, 0));   // joined, but too late
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamEndCapture(a, &g));
    return instantiate(g);
}

static void test_fork_join(void) {
    cudaStream_t a, b;
    cudaEvent_t fork, join;
    CUDA_CHECK(cudaStreamCreate(&a));
    CUDA_CHECK(cudaStreamCreate(&b));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    int *buf = dev_ints(N), *out = dev_ints(N);
    unsigned wrong[2] = {0, 0};
    for (int ordered = 1; ordered >= 0; ordered--) {
        cudaGraphExec_t x = capture_fork(a, b, fork, join, buf, out, ordered);
        for (int seed = 1; seed <= SEEDS; seed++) {
            use_seed(seed);
            CUDA_CHECK(cudaMemsetAsync(out, 0, N * sizeof(int), a));
            CUDA_CHECK(cudaGraphLaunch(x, a));
            int h[N];
            to_host(h, out, N);
            int bad = 0;
            for (int i = 0; i < N; i++) bad += h[i] != 2 * (7 + i);
            if (bad) wrong[ordered] |= 1u << (seed - 1);
        }
        CUDA_CHECK(cudaGraphExecDestroy(x));
    }
    check(wrong[1] == 0, "(b) fork into a second stream, join back: right under seeds 1..%d", SEEDS);
    print_seeds("(b) seeds whose schedule exposes the graph's missing dependency", wrong[0]);
#ifdef CUDA_HOST
    const char* mode = getenv("CUDA_HOST_SCHEDULE");
    if (!(mode && !strcmp(mode, "inorder")))
        check(wrong[0] != 0, "(b) a graph keeps the capture's concurrency: the consumer issued before "
              "its wait reads unproduced data under some seed of 1..%d", SEEDS);
#endif
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaEventDestroy(join));
    CUDA_CHECK(cudaStreamDestroy(a));
    CUDA_CHECK(cudaStreamDestroy(b));
}

// (c) Launches on other streams, one after another.
static void test_launch_streams(void) {
    cudaStream_t s, t, u;
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(cudaStreamCreate(&t));
    CUDA_CHECK(cudaStreamCreate(&u));
    int *buf = dev_ints(N), *tmp = dev_ints(N);
    // buf = reverse(buf + 1): two launches give buf + 2, unless one's first kernel overwrites tmp
    // before the other's second kernel has read it.
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    LAUNCH(add_kernel, BLOCKS, THREADS, 0, s, buf, tmp, 1);
    LAUNCH(reverse_kernel, BLOCKS, THREADS, 0, s, tmp, buf);
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t x = instantiate(g);
    unsigned wrong = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        use_seed(seed);
        int h[N];
        for (int i = 0; i < N; i++) h[i] = i;
        CUDA_CHECK(cudaMemcpy(buf, h, sizeof h, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
        for (int k = 0; k < 6; k++) CUDA_CHECK(cudaGraphLaunch(x, k % 2 ? t : u));
        to_host(h, buf, N);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += h[i] != i + 6;
        if (bad) wrong |= 1u << (seed - 1);
    }
    check(wrong == 0, "(c) six launches alternating over two streams other than the capture's run one "
          "after another (each element counted 6) under seeds 1..%d", SEEDS);
    CUDA_CHECK(cudaGraphExecDestroy(x));
    CUDA_CHECK(cudaFree(tmp));
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaStreamDestroy(s));
    CUDA_CHECK(cudaStreamDestroy(t));
    CUDA_CHECK(cudaStreamDestroy(u));
}

// (d) The errors of a capture.
static void test_errors(void) {
    cudaStream_t a, b;
    cudaEvent_t e, outside;
    CUDA_CHECK(cudaStreamCreate(&a));
    CUDA_CHECK(cudaStreamCreate(&b));
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&outside, cudaEventDisableTiming));
    int* buf = dev_ints(N);
    cudaGraph_t g;
    cudaStreamCaptureStatus st;

    CUDA_CHECK(cudaStreamIsCapturing(a, &st));
    check(st == cudaStreamCaptureStatusNone, "(d) a stream is not capturing before the capture");
    CUDA_CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaStreamIsCapturing(a, &st));
    check(st == cudaStreamCaptureStatusActive, "(d) cudaStreamIsCapturing: active");
    CUDA_CHECK(cudaEventRecord(e, a));
    CUDA_CHECK(cudaStreamWaitEvent(b, e, 0));
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, b, buf, 1);
    CUDA_CHECK(cudaStreamIsCapturing(b, &st));
    check(st == cudaStreamCaptureStatusActive, "(d) a stream that waited for a captured event joined");
    check(failed_with(cudaEventQuery(e), cudaErrorCapturedEvent), "(d) querying an event recorded in an open "
          "capture: cudaErrorCapturedEvent");
    check(failed_with(cudaStreamEndCapture(b, &g), cudaErrorStreamCaptureUnmatched),
          "(d) ending the capture on a stream that joined it: cudaErrorStreamCaptureUnmatched");
    check(failed_with(cudaStreamEndCapture(a, &g), cudaErrorStreamCaptureInvalidated) && g == NULL,
          "(d) then ending it on its origin: cudaErrorStreamCaptureInvalidated, no graph");
    CUDA_CHECK(cudaStreamIsCapturing(b, &st));
    check(st == cudaStreamCaptureStatusNone, "(d) the capture's end releases the joined stream");

    CUDA_CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaEventRecord(e, a));
    CUDA_CHECK(cudaStreamWaitEvent(b, e, 0));
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, b, buf, 1);
    check(failed_with(cudaStreamEndCapture(a, &g), cudaErrorStreamCaptureUnjoined) && g == NULL,
          "(d) b's kernel never joined back: cudaErrorStreamCaptureUnjoined");

    // An event record is not a node: b joined back after its kernel, then recorded once more.
    CUDA_CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaEventRecord(e, a));
    CUDA_CHECK(cudaStreamWaitEvent(b, e, 0));
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, b, buf, 1);
    CUDA_CHECK(cudaEventRecord(e, b));
    CUDA_CHECK(cudaStreamWaitEvent(a, e, 0));
    CUDA_CHECK(cudaEventRecord(e, b));
    check(cudaStreamEndCapture(a, &g) == cudaSuccess && g != NULL,
          "(d) a joined stream that ends on an event record (not a node) is joined");
    if (g) CUDA_CHECK(cudaGraphDestroy(g));

    CUDA_CHECK(cudaEventRecord(outside, b));
    CUDA_CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    check(failed_with(cudaStreamWaitEvent(a, outside, 0), cudaErrorStreamCaptureIsolation),
          "(d) waiting for an event recorded outside the capture: cudaErrorStreamCaptureIsolation");
    CUDA_CHECK(cudaStreamIsCapturing(a, &st));
    check(st == cudaStreamCaptureStatusInvalidated, "(d) cudaStreamIsCapturing: invalidated");
    check(failed_with(cudaStreamEndCapture(a, &g), cudaErrorStreamCaptureInvalidated) && g == NULL,
          "(d) its end: cudaErrorStreamCaptureInvalidated");

    static int pageable[N];
    CUDA_CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    check(failed_with(cudaMemcpyAsync(buf, pageable, sizeof pageable, cudaMemcpyHostToDevice, a),
                      cudaErrorStreamCaptureUnsupported), "(d) a copy of pageable memory in a capture: "
          "cudaErrorStreamCaptureUnsupported");
    check(failed_with(cudaStreamEndCapture(a, &g), cudaErrorStreamCaptureInvalidated),
          "(d) its end: cudaErrorStreamCaptureInvalidated");

    CUDA_CHECK(cudaDeviceSynchronize());   // allowed again
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaEventDestroy(e));
    CUDA_CHECK(cudaEventDestroy(outside));
    CUDA_CHECK(cudaStreamDestroy(a));
    CUDA_CHECK(cudaStreamDestroy(b));
}

// (f) Event record nodes, each launch recording its own events.
static void test_event_nodes(void) {
    enum { LAUNCHES = 3, MARKS = 3 };
    cudaStream_t a, b;
    cudaEvent_t fork, join, captured[MARKS], mine[LAUNCHES + 1][MARKS];
    CUDA_CHECK(cudaStreamCreate(&a));
    CUDA_CHECK(cudaStreamCreate(&b));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    for (int j = 0; j < MARKS; j++) CUDA_CHECK(cudaEventCreate(&captured[j]));
    for (int k = 0; k <= LAUNCHES; k++)
        for (int j = 0; j < MARKS; j++) CUDA_CHECK(cudaEventCreate(&mine[k][j]));
    int *buf = dev_ints(N), *out = dev_ints(N);

    // a: mark 0, kernel, fork; b: kernel, mark 1, join; a: mark 2.
    CUDA_CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaEventRecordWithFlags(captured[0], a, cudaEventRecordExternal));
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, a, buf, 7);
    CUDA_CHECK(cudaEventRecord(fork, a));
    CUDA_CHECK(cudaStreamWaitEvent(b, fork, 0));
    LAUNCH(consume_kernel, BLOCKS, THREADS, 0, b, buf, out);
    CUDA_CHECK(cudaEventRecordWithFlags(captured[1], b, cudaEventRecordExternal));
    CUDA_CHECK(cudaEventRecord(join, b));
    CUDA_CHECK(cudaStreamWaitEvent(a, join, 0));
    CUDA_CHECK(cudaEventRecordWithFlags(captured[2], a, cudaEventRecordExternal));
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamEndCapture(a, &g));
    size_t n = 0;
    CUDA_CHECK(cudaGraphGetNodes(g, NULL, &n));
    check(n == 2 + MARKS, "(f) 2 kernels and %d event record nodes: %zu nodes", MARKS, n);
    cudaGraphNode_t nodes[8], node_of[MARKS] = {NULL, NULL, NULL};
    size_t got = 8;
    CUDA_CHECK(cudaGraphGetNodes(g, nodes, &got));
    int records = 0;
    for (size_t i = 0; i < got; i++) {
        cudaGraphNodeType type;
        CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &type));
        if (type != cudaGraphNodeTypeEventRecord) continue;
        cudaEvent_t ev;
        CUDA_CHECK(cudaGraphEventRecordNodeGetEvent(nodes[i], &ev));
        for (int j = 0; j < MARKS; j++)
            if (ev == captured[j]) node_of[j] = nodes[i], records++;
    }
    check(got == n && records == MARKS, "(f) cudaGraphGetNodes returns %zu handles, %d of them "
          "event record nodes of the captured events", got, records);
    cudaGraphExec_t x;
    CUDA_CHECK(cudaGraphInstantiate(&x, g, 0));   // g stays: the node handles belong to it
#ifdef CUDA_HOST
    cudaGraphNode_t kernel = NULL;
    for (size_t i = 0; i < got; i++) {
        cudaGraphNodeType type;
        CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &type));
        if (type == cudaGraphNodeTypeKernel) kernel = nodes[i];
    }
    cudaEvent_t ev;
    check(kernel && failed_with(cudaGraphEventRecordNodeGetEvent(kernel, &ev), cudaErrorInvalidValue) &&
          failed_with(cudaGraphExecEventRecordNodeSetEvent(x, kernel, mine[0][0]), cudaErrorInvalidValue),
          "(f) a kernel node has no event to get or set: cudaErrorInvalidValue");
#endif
    if (records == MARKS) {
        for (int k = 0; k < LAUNCHES; k++) {
            for (int j = 0; j < MARKS; j++)
                CUDA_CHECK(cudaGraphExecEventRecordNodeSetEvent(x, node_of[j], mine[k][j]));
            CUDA_CHECK(cudaGraphLaunch(x, a));
        }
        // Set for a launch that is never issued: those events stay unrecorded.
        for (int j = 0; j < MARKS; j++)
            CUDA_CHECK(cudaGraphExecEventRecordNodeSetEvent(x, node_of[j], mine[LAUNCHES][j]));
        CUDA_CHECK(cudaStreamSynchronize(a));
        int ordered = 1;
        float ms;
        for (int k = 0; k < LAUNCHES; k++) {
            for (int j = 1; j < MARKS; j++) {
                CUDA_CHECK(cudaEventElapsedTime(&ms, mine[k][0], mine[k][j]));
                ordered &= ms >= 0;
            }
            if (k > 0) {
                CUDA_CHECK(cudaEventElapsedTime(&ms, mine[k - 1][2], mine[k][0]));
                ordered &= ms >= 0;
            }
        }
        check(ordered, "(f) each of %d launches recorded its own events: marks 1 and 2 after its "
              "mark 0, its mark 0 after the previous launch's mark 2", LAUNCHES);
        check(failed_with(cudaEventElapsedTime(&ms, mine[LAUNCHES][0], mine[LAUNCHES][2]),
                          cudaErrorInvalidResourceHandle),
              "(f) events set after the last launch were never recorded");
        int h[N];
        to_host(h, out, N);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += h[i] != 2 * (7 + i);
        check(bad == 0, "(f) the graph's kernels ran as captured (%d wrong)", bad);
    }
    CUDA_CHECK(cudaGraphExecDestroy(x));
    CUDA_CHECK(cudaGraphDestroy(g));
#ifdef CUDA_HOST
    // A stream whose last node is an external record must still join.
    CUDA_CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaEventRecord(fork, a));
    CUDA_CHECK(cudaStreamWaitEvent(b, fork, 0));
    CUDA_CHECK(cudaEventRecordWithFlags(captured[1], b, cudaEventRecordExternal));
    check(failed_with(cudaStreamEndCapture(a, &g), cudaErrorStreamCaptureUnjoined),
          "(f) an external record is a node: a stream ending on one must join back");
#endif
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaFree(out));
    for (int j = 0; j < MARKS; j++) CUDA_CHECK(cudaEventDestroy(captured[j]));
    for (int k = 0; k <= LAUNCHES; k++)
        for (int j = 0; j < MARKS; j++) CUDA_CHECK(cudaEventDestroy(mine[k][j]));
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaEventDestroy(join));
    CUDA_CHECK(cudaStreamDestroy(a));
    CUDA_CHECK(cudaStreamDestroy(b));
}

#ifdef CUDA_HOST
// (e) What the counters count.
static void test_counters(void) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    int *buf = dev_ints(N), *out = dev_ints(N);
    CudaHostCounters c0, c1, c2;
    cuda_host_counters(&c0);
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, buf, 3);
    LAUNCH(consume_kernel, BLOCKS, THREADS, 0, s, buf, out);
    CUDA_CHECK(cudaMemsetAsync(buf, 0, N * sizeof(int), s));
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t x = instantiate(g);
    cuda_host_counters(&c1);
    for (int k = 0; k < 3; k++) CUDA_CHECK(cudaGraphLaunch(x, s));
    cuda_host_counters(&c2);
    check(c1.launches == c0.launches && c1.graph_kernels == c0.graph_kernels,
          "(e) captured kernels are not launches (%llu, %llu)", c1.launches - c0.launches,
          c1.graph_kernels - c0.graph_kernels);
    check(c2.launches == c1.launches && c2.graph_launches - c1.graph_launches == 3 &&
          c2.graph_kernels - c1.graph_kernels == 6 && c2.syncs == c1.syncs,
          "(e) three graph launches: 3 graph launches, 6 kernels, no launch and no synchronisation "
          "counted (%llu, %llu, %llu, %llu)", c2.graph_launches - c1.graph_launches,
          c2.graph_kernels - c1.graph_kernels, c2.launches - c1.launches, c2.syncs - c1.syncs);
    CUDA_CHECK(cudaGraphExecDestroy(x));
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaStreamDestroy(s));
}
#endif

// --die: a call CUDA refuses while a capture is open.
static void die(const char* what) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    int* buf = dev_ints(N);
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    LAUNCH(produce_kernel, BLOCKS, THREADS, 0, s, buf, 1);
    if (!strcmp(what, "sync")) CUDA_CHECK(cudaStreamSynchronize(s));
    if (!strcmp(what, "malloc")) dev_ints(N);
    if (!strcmp(what, "legacy")) LAUNCH(produce_kernel, BLOCKS, THREADS, 0, 0, buf, 2);
    printf("--die %s: nothing refused\n", what);
    exit(1);
}

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--die")) die(argv[2]);
    test_record_and_replay();
    test_fork_join();
    test_launch_streams();
    test_errors();
    test_event_nodes();
#ifdef CUDA_HOST
    test_counters();
#endif
    return test_finish("test_graphs");
}
