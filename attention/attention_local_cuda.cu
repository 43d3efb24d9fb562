// Single-device attention for the CUDA backend: the same layer as attention/attention_local.c
// (which CUDA builds do not link), with the same names, on the backend's stream
// (model/backend_kernels_cuda.cuh). Every token is local, so one partial-attention call is the
// whole layer (query and key positions both 0, 1, 2, ...).
//
// Nothing is merged or accumulated across calls here, so the single-device forms of the kernels
// (attention/partial_attention_cuda.cuh) write the model's floatX tensors directly:
//   forward:  o into `out` (floatX) and lse straight into the model's fp32 real_stat lse;
//   backward: d = rowsum(out * dout) (fp32 scratch, (B, NH, T)), then dq, dk, dv written into
//             dqkv (row stride C + 2 KVC): no fp32 copy, no zeroing, no conversion pass (but
//             under grouped-query attention, whose dK, dV sum a group's heads in a workspace).
// The scratch d is allocated once, at create, for the bounds given there.
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
    int max_B, max_T, max_NH, max_NKV, max_HS;
    float* d;      // (max_B, max_NH, max_T) rowsum(dout * out)
} LocalAttentionCuda;

static AttentionProblem local_problem(const AttentionLayer* self, int B, int T, int NH, int NKV, int HS,
                                      long window) {
    AttentionProblem p = attention_problem(B, NH, HS, T, T, token_positions(0, 1), token_positions(0, 1));
    p.NKV = NKV;
    p.window = window;
    p.docs = self->docs;
    return p;
}

static void check_bounds(const LocalAttentionCuda* a, int B, int T, int NH, int NKV, int HS) {
    CHECK(B <= a->max_B && T <= a->max_T && NH <= a->max_NH && NKV <= a->max_NKV &&
              NH * HS <= a->max_NH * a->max_HS,
          "caller bug", "attention called with B=%d T=%d NH=%d NKV=%d HS=%d beyond its bounds %d %d %d %d %d",
          B, T, NH, NKV, HS, a->max_B, a->max_T, a->max_NH, a->max_NKV, a->max_HS);
}

static float* device_floats(size_t n, const char* what) {
    float* p = NULL;
    const cudaError_t err = cudaMalloc((void**)&p, n * sizeof(float));
    if (err != cudaSuccess)
        FAIL(cuda_error_hint(err), "cudaMalloc of %zu bytes for %s failed: %s", n * sizeof(float),
             what, cudaGetErrorName(err));
    return p;
}

static void local_forward(AttentionLayer* self, int layer, long window, int B, int T, int NH, int NKV, int HS,
                          const real* qkv, real* out, real_stat* lse) {
    LocalAttentionCuda* a = (LocalAttentionCuda*)self;
    check_bounds(a, B, T, NH, NKV, HS);
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    const AttentionProblem p = local_problem(self, B, T, NH, NKV, HS, window);
    attention_forward_cuda(&p, qkv, W, qkv + C, W, qkv + C + KVC, W, out, C, lse, cuda_backend_stream());
}

static void local_backward(AttentionLayer* self, int layer, long window, int B, int T, int NH, int NKV, int HS,
                           const real* qkv, const real* out, const real_stat* lse, const real* dout,
                           real* dqkv) {
    LocalAttentionCuda* a = (LocalAttentionCuda*)self;
    check_bounds(a, B, T, NH, NKV, HS);
    const int C = NH * HS, KVC = NKV * HS, W = attention_qkv_width(NH, NKV, HS);
    const AttentionProblem p = local_problem(self, B, T, NH, NKV, HS, window);
    cudaStream_t s = cuda_backend_stream();
    attention_row_dot_cuda(&p, out, C, dout, C, a->d, s);
    attention_backward_cuda(&p, qkv, W, qkv + C, W, qkv + C + KVC, W, dout, C, lse, a->d, dqkv, W, dqkv + C, W,
                            dqkv + C + KVC, W, s);
}

static void local_destroy(AttentionLayer* self) {
    LocalAttentionCuda* a = (LocalAttentionCuda*)self;
    CUDA_CHECK(cudaStreamSynchronize(cuda_backend_stream()));
    CUDA_CHECK(cudaFree(a->d));
    free(a);
}

AttentionLayer* attention_local_create(int B, int T, int NH, int NKV, int HS) {
    CHECK(B >= 1 && T >= 1 && NH >= 1 && NKV >= 1 && NH % NKV == 0 && HS >= 1, "caller bug",
          "attention_local_create: B=%d T=%d NH=%d NKV=%d HS=%d", B, T, NH, NKV, HS);
    cuda_backend_context();  // the first CUDA call of a run: fails clearly without a GPU
    LocalAttentionCuda* a = (LocalAttentionCuda*)xcalloc(1, sizeof *a, "local attention layer");
    a->base.forward = local_forward;
    a->base.backward = local_backward;
    a->base.destroy = local_destroy;
    a->base.positions = token_layout(token_positions(0, 1));
    a->base.name = "local";
    a->max_B = B;
    a->max_T = T;
    a->max_NH = NH;
    a->max_NKV = NKV;
    a->max_HS = HS;
    a->d = device_floats((size_t)B * NH * T, "the attention backward delta");
    return &a->base;
}

void attention_layer_free(AttentionLayer* layer) {
    if (layer) layer->destroy(layer);
}
