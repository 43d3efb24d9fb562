// The kernel benchmark's buffers and timing (tools/bench_kernels.h): a case's buffers filled with
// random non-zero values by device kernels, rotated among copies that reach past the L2 cache, and
// calls timed between CUDA events behind a kernel that keeps the GPU busy while they are queued.
#include "tools/bench_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- Device fill kernels ------------------------------------------------------------------------

// splitmix64 of (seed, i): independent 64 random bits per element.
__device__ __forceinline__ unsigned long long mix64(unsigned long long seed, unsigned long long i) {
    unsigned long long z = seed * 0x9E3779B97F4A7C15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Magnitude uniform in [lo, hi) (lo > 0: never zero), sign random when `signed_values`.
__device__ __forceinline__ float random_value(unsigned long long h, float lo, float hi, int signed_values) {
    const float u = (float)(h >> 40) * (1.0f / 16777216.0f);
    const float mag = lo + (hi - lo) * u;
    return signed_values && (h & 1) ? -mag : mag;
}

__global__ void fill_floatx_kernel(floatX* p, size_t n, unsigned long long seed, float lo, float hi,
                                   int signed_values) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = from_float<floatX>(random_value(mix64(seed, i), lo, hi, signed_values));
}

__global__ void fill_float_kernel(float* p, size_t n, unsigned long long seed, float lo, float hi,
                                  int signed_values) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = random_value(mix64(seed, i), lo, hi, signed_values);
}

__global__ void fill_tokens_kernel(int* p, size_t n, unsigned long long seed, int V) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = (int)(mix64(seed, i) % (unsigned long long)V);
}

// Keeps one warp busy for `iters` dependent FMAs (about 2.3 ns each on an H100: 2^21 = ~5 ms), so
// that the timed calls queue up behind it and then run back to back, without the host's launch
// latency between an event and its kernel. The result is stored only in a case that never happens.
__global__ void delay_kernel(float* sink, int iters) {
    float x = (float)threadIdx.x;
    for (int i = 0; i < iters; i++) x = x * 0.999999f + 1e-7f;
    if (x == -1.0f) *sink = x;
}

// Grid of the grid-stride fill kernels: enough blocks to fill a GPU, few threads on the host runtime.
static unsigned int fill_blocks(size_t n) {
    const size_t blocks = (n + 255) / 256;
    return (unsigned int)(blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks);
}

static size_t case_alloc_bytes(const Case* c) {
    size_t total = 0;
    for (int i = 0; i < c->nbuf; i++) total += c->count[i] * elem_bytes(c->elem[i]);
    return total;
}

// Copies to rotate among: enough that the calls' bytes over all copies reach twice the L2 size
// (at most MAX_COPIES), and that fit in 80% of the free device memory.
static int case_copies(const Bench* b, const Case* c) {
    const double l2x2 = 2.0 * (double)b->prop.l2CacheSize;
    int copies = 1;
    if (c->cost.bytes < l2x2) copies = (int)ceil(l2x2 / (c->cost.bytes > 1 ? c->cost.bytes : 1));
    if (copies > MAX_COPIES) copies = MAX_COPIES;
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t one = case_alloc_bytes(c);
    while (copies > 1 && (double)one * copies > 0.8 * (double)free_bytes) copies--;
    return copies;
}

void fill_buffer(const Bench* b, const Shape* s, void* p, Elem e, size_t n, Fill fill,
                 unsigned long long seed) {
    const unsigned int grid = fill_blocks(n);
    const float lo = fill == FILL_POSITIVE ? 0.5f : 0.25f, hi = fill == FILL_POSITIVE ? 1.5f : 1.0f;
    const int signed_values = fill == FILL_RANDOM;
    if (fill == FILL_TOKENS)
        LAUNCH(fill_tokens_kernel, grid, 256, 0, b->stream, (int*)p, n, seed, s->V);
    else if (e == ELEM_X)
        LAUNCH(fill_floatx_kernel, grid, 256, 0, b->stream, (floatX*)p, n, seed, lo, hi, signed_values);
    else if (e == ELEM_F32)
        LAUNCH(fill_float_kernel, grid, 256, 0, b->stream, (float*)p, n, seed, lo, hi, signed_values);
    else
        FAIL("caller bug", "fill of element type %d is not implemented", (int)e);
}

CaseBuffers alloc_case(const Bench* b, const Shape* s, const Case* c) {
    CaseBuffers cb;
    memset(&cb, 0, sizeof cb);
    cb.copies = case_copies(b, c);
    for (int k = 0; k < cb.copies; k++) {
        for (int i = 0; i < c->nbuf; i++) {
            if (!c->count[i]) continue;
            CUDA_CHECK(cudaMalloc(&cb.p[k][i], c->count[i] * elem_bytes(c->elem[i])));
            if (c->fill[i] != FILL_NONE)
                fill_buffer(b, s, cb.p[k][i], c->elem[i], c->count[i], c->fill[i],
                            (unsigned long long)(k * MAX_BUFS + i + 1));
            else  // zeroed: backward scratch holds tickets that must start at 0
                CUDA_CHECK(cudaMemsetAsync(cb.p[k][i], 0, c->count[i] * elem_bytes(c->elem[i]), b->stream));
        }
        if (c->prepare) c->prepare(b, s, c, cb.p[k]);
    }
    CUDA_CHECK(cudaStreamSynchronize(b->stream));
    return cb;
}

void free_case(CaseBuffers* cb) {
    for (int k = 0; k < cb->copies; k++)
        for (int i = 0; i < MAX_BUFS; i++)
            if (cb->p[k][i]) CUDA_CHECK(cudaFree(cb->p[k][i]));
    memset(cb, 0, sizeof *cb);
}

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

// W warm-up calls, then R calls each between its own pair of events; median and min of the R.
Timing time_calls(const Bench* b, TimedFn fn, const void* ctx) {
    const int R = b->reps;
    cudaEvent_t* ev = (cudaEvent_t*)xcalloc(2 * (size_t)R, sizeof(cudaEvent_t), "timing events");
    double* ms = (double*)xcalloc((size_t)R, sizeof(double), "timings");
    for (int i = 0; i < 2 * R; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < b->warmup; i++) fn(b, ctx, i);
#if !defined(CUDA_HOST)  // the host runtime's streams are synchronous: nothing queues up there
    LAUNCH(delay_kernel, 1, 32, 0, b->stream, b->delay_sink, 1 << 21);
#endif
    for (int r = 0; r < R; r++) {
        CUDA_CHECK(cudaEventRecord(ev[2 * r], b->stream));
        fn(b, ctx, b->warmup + r);
        CUDA_CHECK(cudaEventRecord(ev[2 * r + 1], b->stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(b->stream));
    for (int r = 0; r < R; r++) {
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, ev[2 * r], ev[2 * r + 1]));
        ms[r] = t;
    }
    for (int i = 0; i < 2 * R; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
    qsort(ms, (size_t)R, sizeof(double), cmp_double);
    Timing t;
    t.median_ms = R % 2 ? ms[R / 2] : 0.5 * (ms[R / 2 - 1] + ms[R / 2]);
    t.min_ms = ms[0];
    free(ev);
    free(ms);
    return t;
}

typedef struct {
    const Shape* s;
    const Case* c;
    const CaseBuffers* cb;
} CaseCall;

static void call_case(const Bench* b, const void* ctx, int i) {
    const CaseCall* cc = (const CaseCall*)ctx;
    cc->c->run(b, cc->s, cc->c, cc->cb->p[i % cc->cb->copies]);
}

Timing time_case(const Bench* b, const Shape* s, const Case* c, int* copies) {
    CaseBuffers cb = alloc_case(b, s, c);
    CaseCall cc = {s, c, &cb};
    const Timing t = time_calls(b, call_case, &cc);
    *copies = cb.copies;
    free_case(&cb);
    return t;
}
