// The kernel benchmark's buffers and timing (tools/bench_kernels.h): a case's buffers filled with
// random non-zero values by device kernels, rotated among copies that reach past the L2 cache, and
// calls timed between CUDA events behind a kernel that keeps the GPU busy while they are queued.
#include "tools/bench_kernels.h"

#include <math.h>
#include <string.h>

// --- Device fill kernels (the float ones are tools/bench_device.cu's) ----------------------------

__global__ void fill_tokens_kernel(int* p, size_t n, unsigned long long seed, int V) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = (int)(bench_mix64(seed, i) % (unsigned long long)V);
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
    const float lo = fill == FILL_POSITIVE ? 0.5f : 0.25f, hi = fill == FILL_POSITIVE ? 1.5f : 1.0f;
    const int signed_values = fill == FILL_RANDOM;
    if (fill == FILL_TOKENS)
        LAUNCH(fill_tokens_kernel, bench_fill_blocks(n), 256, 0, b->stream, (int*)p, n, seed, s->V);
    else if (e == ELEM_X)
        bench_fill_floatx((floatX*)p, n, seed, lo, hi, signed_values, b->stream);
    else if (e == ELEM_F32)
        bench_fill_float((float*)p, n, seed, lo, hi, signed_values, b->stream);
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

typedef struct {
    const Bench* b;
    TimedFn fn;
    const void* ctx;
} BenchCall;

static void call_bench(const void* ctx, int i) {
    const BenchCall* c = (const BenchCall*)ctx;
    c->fn(c->b, c->ctx, i);
}

Timing time_calls(const Bench* b, TimedFn fn, const void* ctx) {
    const BenchCall c = {b, fn, ctx};
    return bench_time_calls(b->stream, b->warmup, b->reps, b->delay_sink, call_bench, &c);
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
