// Single-device attention for the CUDA backend: the same layer as attention/attention_local.c
// (which CUDA builds do not link), with the same names, on the backend's stream
// (model/backend_kernels_cuda.cuh). Every token is local, so one partial-attention call is the
// whole layer (query and key positions both 0, 1, 2, ...).
//
// The CUDA partial-attention kernels (attention/partial_attention_cuda.cuh) write their output and
// gradients in fp32 (they are built to be merged and accumulated across calls); the model stores
// floatX. So:
//   forward:  o (fp32 scratch, (B, T, C)) and lse (straight into the model's fp32 real_stat lse),
//             then o is rounded to floatX into `out`;
//   backward: d = rowsum(out * dout) (fp32 scratch, (B, NH, T)), an fp32 (B, T, 3C) scratch is
//             zeroed and receives dq, dk, dv (row stride 3C), then it is rounded into dqkv.
// The scratch is allocated once for the bounds given at create: d at create; o and the gradient
// scratch, whose size needs the channel count C that attention_local_create is not given, at the
// first forward and backward (for max_B x max_T rows of that C; never again unless a later call
// brings a larger C).
#ifndef GPT_BACKEND_CUDA
#define GPT_BACKEND_CUDA  // this file is the CUDA backend: real = floatX in the layer interface
#endif
#include <stdlib.h>
#include <string.h>

#include "attention/attention_layer.h"
#include "attention/partial_attention_cuda.cuh"
#include "model/backend_kernels_cuda.cuh"

typedef struct {
    AttentionLayer base;
    int max_B, max_T, max_NH;
    float* o;      // (max_B, max_T, C) fp32 forward output
    float* d;      // (max_B, max_NH, max_T) rowsum(dout * out)
    float* dqkv;   // (max_B, max_T, 3C) fp32 gradients of q, k, v
    size_t o_count, dqkv_count;
} LocalAttentionCuda;

static AttentionProblem local_problem(int B, int T, int NH, int HS) {
    AttentionProblem p;
    memset(&p, 0, sizeof p);
    p.B = B, p.NH = NH, p.HS = HS, p.Tq = T, p.Tk = T;
    p.qpos.off = 0, p.qpos.stride = 1;
    p.kpos.off = 0, p.kpos.stride = 1;
    return p;
}

static void check_bounds(const LocalAttentionCuda* a, int B, int T, int NH) {
    CHECK(B <= a->max_B && T <= a->max_T && NH <= a->max_NH, "caller bug",
          "attention called with B=%d T=%d NH=%d beyond its bounds %d %d %d", B, T, NH, a->max_B,
          a->max_T, a->max_NH);
}

// fp32 scratch of at least n floats: allocated at the first call that knows C, then only checked.
static float* scratch(float** buf, size_t* have, size_t n, const char* what) {
    if (*buf && *have >= n) return *buf;
    CUDA_CHECK(cudaStreamSynchronize(cuda_backend_stream()));
    CUDA_CHECK(cudaFree(*buf));
    *buf = NULL;
    const cudaError_t err = cudaMalloc((void**)buf, (n ? n : 1) * sizeof(float));
    if (err != cudaSuccess)
        FAIL(cuda_error_hint(err), "cudaMalloc of %zu bytes for %s failed: %s", n * sizeof(float),
             what, cudaGetErrorName(err));
    *have = n;
    return *buf;
}

static void local_forward(AttentionLayer* self, int layer, int B, int T, int NH, int HS,
                          const real* qkv, real* out, real_stat* lse) {
    LocalAttentionCuda* a = (LocalAttentionCuda*)self;
    check_bounds(a, B, T, NH);
    const int C = NH * HS;
    const size_t n = (size_t)B * T * C;
    float* o = scratch(&a->o, &a->o_count, (size_t)a->max_B * a->max_T * C, "attention output (fp32)");
    const AttentionProblem p = local_problem(B, T, NH, HS);
    cudaStream_t s = cuda_backend_stream();
    attention_partial_forward_cuda(&p, qkv, 3 * C, qkv + C, 3 * C, qkv + 2 * C, 3 * C, o, C, lse, s);
    cuda_backend_float_to_floatx(out, o, n);
}

static void local_backward(AttentionLayer* self, int layer, int B, int T, int NH, int HS,
                           const real* qkv, const real* out, const real_stat* lse, const real* dout,
                           real* dqkv) {
    LocalAttentionCuda* a = (LocalAttentionCuda*)self;
    check_bounds(a, B, T, NH);
    const int C = NH * HS;
    const size_t n = (size_t)B * T * 3 * C;
    float* g = scratch(&a->dqkv, &a->dqkv_count, (size_t)a->max_B * a->max_T * 3 * C,
                       "attention qkv gradient (fp32)");
    const AttentionProblem p = local_problem(B, T, NH, HS);
    cudaStream_t s = cuda_backend_stream();
    attention_row_dot_cuda(&p, out, C, dout, C, a->d, s);
    CUDA_CHECK(cudaMemsetAsync(g, 0, n * sizeof(float), s));  // the kernels accumulate
    attention_partial_backward_cuda(&p, qkv, 3 * C, qkv + C, 3 * C, qkv + 2 * C, 3 * C, dout, C, lse,
                                    a->d, g, 3 * C, g + C, 3 * C, g + 2 * C, 3 * C, s);
    cuda_backend_float_to_floatx(dqkv, g, n);
}

static void local_destroy(AttentionLayer* self) {
    LocalAttentionCuda* a = (LocalAttentionCuda*)self;
    CUDA_CHECK(cudaStreamSynchronize(cuda_backend_stream()));
    CUDA_CHECK(cudaFree(a->o));
    CUDA_CHECK(cudaFree(a->d));
    CUDA_CHECK(cudaFree(a->dqkv));
    free(a);
}

AttentionLayer* attention_local_create(int B, int T, int NH) {
    CHECK(B >= 1 && T >= 1 && NH >= 1, "caller bug", "attention_local_create: B=%d T=%d NH=%d", B, T, NH);
    cuda_backend_context();  // the first CUDA call of a run: fails clearly without a GPU
    LocalAttentionCuda* a = (LocalAttentionCuda*)xcalloc(1, sizeof *a, "local attention layer");
    a->base.forward = local_forward;
    a->base.backward = local_backward;
    a->base.destroy = local_destroy;
    a->base.positions.off = 0;
    a->base.positions.stride = 1;
    a->base.name = "local";
    a->max_B = B;
    a->max_T = T;
    a->max_NH = NH;
    const size_t nd = (size_t)B * NH * T * sizeof(float);
    const cudaError_t err = cudaMalloc((void**)&a->d, nd);
    if (err != cudaSuccess)
        FAIL(cuda_error_hint(err), "cudaMalloc of %zu bytes for the attention backward delta failed: %s",
             nd, cudaGetErrorName(err));
    return &a->base;
}

void attention_layer_free(AttentionLayer* layer) {
    if (layer) layer->destroy(layer);
}
