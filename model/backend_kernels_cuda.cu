// The layer kernels of model/layers.h for the CUDA backend (real = floatX, real_stat = float):
// each function forwards to the launchers of model/layers_cuda.cuh, model/matmul_cuda.cuh and the
// fused classifier on the backend's one stream, plus the backend memory operations. The
// module-owned context (stream, cuBLASLt context, scratch) is described in
// model/backend_kernels_cuda.cuh.
//
// Nothing here synchronises the host except the reallocation of a scratch buffer that grows
// (layers_reserve does it before training), scalars_to_host, and a tokens_upload whose staging
// ring is full (more than TOKEN_STAGING_MAX_SLOTS uploads between two host synchronisations). The
// loss sum stays on the device.
#ifndef GPT_BACKEND_CUDA
#define GPT_BACKEND_CUDA  // this file is the CUDA backend: real = floatX in model/layers.h
#endif
#include "model/backend_kernels_cuda.cuh"

#include <stdlib.h>
#include <string.h>

#include "model/layers.h"
#include "model/layers_cuda.cuh"
#include "model/matmul_cuda.cuh"

// --- The context ---------------------------------------------------------------------------------

static CudaBackendContext g_ctx;

CudaBackendContext* cuda_backend_context(void) {
    if (!g_ctx.ready) {
        memset(&g_ctx, 0, sizeof g_ctx);
        int devices = 0;
        const cudaError_t err = cudaGetDeviceCount(&devices);
        if (err != cudaSuccess || devices < 1)
            FAIL("check the driver and CUDA_VISIBLE_DEVICES, or use the CPU trainer (build/train_gpt)",
                 "the CUDA backend found no usable GPU: %s",
                 err != cudaSuccess ? cudaGetErrorString(err) : "no device");
        CUDA_CHECK(cudaStreamCreate(&g_ctx.stream));
        // No bias gradient yet: the scratch grows at the first matmul_backward with a bias.
        matmul_context_init(&g_ctx.matmul, 0, 0);
        g_ctx.ready = 1;
    }
    return &g_ctx;
}

cudaStream_t cuda_backend_stream(void) { return cuda_backend_context()->stream; }

void cuda_backend_sync(void) { CUDA_CHECK(cudaStreamSynchronize(cuda_backend_stream())); }

static void free_token_staging(CudaBackendContext* c) {
    for (int i = 0; i < c->token_slots; i++) {
        CUDA_CHECK(cudaEventSynchronize(c->token_staged[i]));
        CUDA_CHECK(cudaEventDestroy(c->token_staged[i]));
        CUDA_CHECK(cudaFreeHost(c->token_staging[i]));
    }
    c->token_slots = 0;
    c->token_slot = 0;
    c->token_staging_count = 0;
}

void cuda_backend_shutdown(void) {
    if (!g_ctx.ready) return;
    CUDA_CHECK(cudaStreamSynchronize(g_ctx.stream));
    matmul_context_destroy(&g_ctx.matmul);
    CUDA_CHECK(cudaFree(g_ctx.encoder_scratch));
    CUDA_CHECK(cudaFree(g_ctx.layernorm_scratch));
    CUDA_CHECK(cudaFree(g_ctx.qk_norm_scratch));
    CUDA_CHECK(cudaFree(g_ctx.norm_partials));
    if (g_ctx.host_scalars) {
        CUDA_CHECK(cudaFreeHost(g_ctx.host_scalars));
        CUDA_CHECK(cudaEventDestroy(g_ctx.scalars_copied));
    }
    free_token_staging(&g_ctx);
    CUDA_CHECK(cudaStreamDestroy(g_ctx.stream));
    memset(&g_ctx, 0, sizeof g_ctx);
}

// Makes *buf hold at least `bytes` bytes of device memory, zeroed when (re)allocated: the encoder
// and LayerNorm backward scratch ends with tickets that must start at 0 (every call leaves them so).
static void* grow_device(void** buf, size_t* have, size_t bytes) {
    if (*buf && *have >= bytes) return *buf;
    CudaBackendContext* c = cuda_backend_context();
    CUDA_CHECK(cudaStreamSynchronize(c->stream));  // a kernel may still use the old buffer
    CUDA_CHECK(cudaFree(*buf));
    *buf = NULL;
    *have = 0;
    CUDA_CHECK(cudaMalloc(buf, bytes ? bytes : 16));
    CUDA_CHECK(cudaMemsetAsync(*buf, 0, bytes ? bytes : 16, c->stream));
    *have = bytes;
    return *buf;
}

// The matmul context, with bias-gradient scratch for at least OC columns.
static MatmulContext* matmul_ctx(int OC_with_bias) {
    CudaBackendContext* c = cuda_backend_context();
    if (OC_with_bias > c->matmul.max_bias_oc) {
        const int use_bgradb = c->matmul.use_bgradb;
        const int grown = c->matmul.max_bias_oc * 2 > OC_with_bias ? c->matmul.max_bias_oc * 2
                                                                    : OC_with_bias;
        CUDA_CHECK(cudaStreamSynchronize(c->stream));
        matmul_context_destroy(&c->matmul);
        matmul_context_init(&c->matmul, 0, grown);
        // Keep the BGRADB switch as it was (refusals are found again per plan, once).
        if (!use_bgradb) c->matmul.use_bgradb = 0;
    }
    return &c->matmul;
}

void layers_reserve(const GPTConfig* cfg, int B, int T) {
    CudaBackendContext* c = cuda_backend_context();
    const int C = cfg->C;
    grow_device(&c->encoder_scratch, &c->encoder_scratch_bytes, encoder_backward_scratch_bytes(B, T, C));
    // One buffer for both norms: rmsnorm_backward_cuda needs no more than the LayerNorm's bytes.
    grow_device(&c->layernorm_scratch, &c->layernorm_scratch_bytes,
                layernorm_backward_scratch_bytes(B * T, C));
    if (cfg->qk_norm)
        grow_device(&c->qk_norm_scratch, &c->qk_norm_scratch_bytes,
                    qk_norm_backward_scratch_bytes(B * T, C / cfg->NH));
    matmul_ctx(gpt_widest_row(cfg));   // the widest bias gradient: the MLP's first matmul in GPT
}

// --- fp32 -> floatX ------------------------------------------------------------------------------

void cuda_backend_float_to_floatx(floatX* out, const float* in, size_t n) {
    float_to_floatx_cuda(out, in, n, cuda_backend_stream());
}

// --- Layers --------------------------------------------------------------------------------------

void encoder_forward(real* out, const int* tokens, const real* wte, const real* wpe,
                     int B, int T, int C, TokenLayout pos, const int* row_pos) {
    encoder_forward_cuda(out, tokens, wte, wpe, B, T, C, pos, row_pos, cuda_backend_stream());
}

void encoder_backward(real* dwte, real* dwpe, const real* dout, const int* tokens, const int* order,
                      int B, int T, int C, TokenLayout pos, const int* row_pos,
                      const int* row_pos_order, int wpe_rows, GradMode wpe_mode) {
    CudaBackendContext* c = cuda_backend_context();
    void* scratch = grow_device(&c->encoder_scratch, &c->encoder_scratch_bytes,
                                encoder_backward_scratch_bytes(B, T, C));
    encoder_backward_cuda(dwte, dwpe, dout, tokens, order, B, T, C, pos, row_pos, row_pos_order,
                          wpe_rows, wpe_mode == GRAD_ACCUMULATE, scratch, c->stream);
}

void rope_forward(real* qkv, int B, int T, int NH, int NKV, int HS, TokenLayout pos,
                  const int* row_pos, RopeSpec rope) {
    rope_cuda(qkv, B, T, NH, NKV, HS, pos, row_pos, rope, 1, cuda_backend_stream());
}

void rope_backward(real* dqkv, int B, int T, int NH, int NKV, int HS, TokenLayout pos,
                   const int* row_pos, RopeSpec rope) {
    rope_cuda(dqkv, B, T, NH, NKV, HS, pos, row_pos, rope, -1, cuda_backend_stream());
}

void layernorm_forward(real* out, real_stat* mean, real_stat* rstd, const real* inp,
                       const real* weight, const real* bias, int N, int C, double eps) {
    layernorm_forward_cuda(out, mean, rstd, inp, weight, bias, N, C, (float)eps,
                           cuda_backend_stream());
}

void layernorm_backward(real* dinp, real* dweight, real* dbias, const real* dout,
                        const real* inp, const real* weight, const real_stat* mean,
                        const real_stat* rstd, int N, int C, GradMode mode) {
    CudaBackendContext* c = cuda_backend_context();
    void* scratch = grow_device(&c->layernorm_scratch, &c->layernorm_scratch_bytes,
                                layernorm_backward_scratch_bytes(N, C));
    layernorm_backward_cuda(dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C,
                            mode == GRAD_ACCUMULATE, c->stream);
}

void fused_residual_layernorm_forward(real* residual_out, real* ln_out, real_stat* mean,
                                      real_stat* rstd, const real* a, const real* b,
                                      const real* weight, const real* bias, int N, int C,
                                      double eps) {
    fused_residual_layernorm_forward_cuda(residual_out, ln_out, mean, rstd, a, b, weight, bias, N, C,
                                          (float)eps, cuda_backend_stream());
}

void rmsnorm_forward(real* out, real_stat* rstd, const real* inp, const real* weight, int N, int C,
                     double eps) {
    rmsnorm_forward_cuda(out, rstd, inp, weight, N, C, (float)eps, cuda_backend_stream());
}

void fused_residual_rmsnorm_forward(real* residual_out, real* out, real_stat* rstd, const real* a,
                                    const real* b, const real* weight, int N, int C, double eps) {
    fused_residual_rmsnorm_forward_cuda(residual_out, out, rstd, a, b, weight, N, C, (float)eps,
                                        cuda_backend_stream());
}

// The LayerNorm's scratch (model/layers_cuda.cuh: its bytes cover RMSNorm's partials and tickets).
void rmsnorm_backward(real* dinp, real* dweight, const real* dout, const real* inp,
                      const real* weight, const real_stat* rstd, int N, int C, GradMode mode) {
    CudaBackendContext* c = cuda_backend_context();
    void* scratch = grow_device(&c->layernorm_scratch, &c->layernorm_scratch_bytes,
                                layernorm_backward_scratch_bytes(N, C));
    rmsnorm_backward_cuda(dinp, dweight, scratch, dout, inp, weight, rstd, N, C, mode == GRAD_ACCUMULATE,
                          c->stream);
}

void qk_norm_forward(real* qkv, real* raw, real_stat* mean, real_stat* rstd, const real* qw,
                     const real* qb, const real* kw, const real* kb, int N, int NH, int NKV,
                     int HS, double eps) {
    qk_norm_forward_cuda(qkv, raw, mean, rstd, qw, qb, kw, kb, N, NH, NKV, HS, (float)eps,
                         cuda_backend_stream());
}

void qk_norm_backward(real* dqkv, real* dqw, real* dqb, real* dkw, real* dkb, const real* raw,
                      const real* qw, const real* kw, const real_stat* mean, const real_stat* rstd,
                      int N, int NH, int NKV, int HS, GradMode mode) {
    CudaBackendContext* c = cuda_backend_context();
    void* scratch = grow_device(&c->qk_norm_scratch, &c->qk_norm_scratch_bytes,
                                qk_norm_backward_scratch_bytes(N, HS));
    qk_norm_backward_cuda(dqkv, dqw, dqb, dkw, dkb, scratch, raw, qw, kw, mean, rstd, N, NH, NKV,
                          HS, mode == GRAD_ACCUMULATE, c->stream);
}

void matmul_forward(real* out, const real* inp, const real* weight, const real* bias,
                    int N, int IC, int OC) {
    matmul_forward_cuda(matmul_ctx(0), out, NULL, inp, weight, bias, N, IC, OC,
                        cuda_backend_stream());
}

// One GEMM with the GELU_AUX_BIAS epilogue: pre_gelu is the aux output.
void matmul_forward_gelu(real* out_gelu, real* pre_gelu, const real* inp, const real* weight,
                         const real* bias, int N, int IC, int OC) {
    matmul_forward_cuda(matmul_ctx(0), out_gelu, pre_gelu, inp, weight, bias, N, IC, OC,
                        cuda_backend_stream());
}

void matmul_backward(real* dinp, real* dweight, real* dbias, const real* dout,
                     const real* inp, const real* weight, int N, int IC, int OC, GradMode mode) {
    MatmulContext* mm = matmul_ctx(dbias ? OC : 0);
    matmul_backward_cuda(mm, dinp, dweight, dbias, dout, inp, weight, NULL, N, IC, OC, 1,
                         mode == GRAD_ACCUMULATE, cuda_backend_stream());
}

void matmul_backward_overwrite(real* dinp, real* dweight, real* dbias, const real* dout,
                               const real* inp, const real* weight, int N, int IC, int OC,
                               GradMode mode) {
    MatmulContext* mm = matmul_ctx(dbias ? OC : 0);
    matmul_backward_cuda(mm, dinp, dweight, dbias, dout, inp, weight, NULL, N, IC, OC, 0,
                         mode == GRAD_ACCUMULATE, cuda_backend_stream());
}

// The GELU gradient in the DGELU epilogue of the dinp GEMM, reading the forward's pre-GELU aux.
void matmul_backward_gelu(real* dpre, real* dweight, real* dbias, const real* dout,
                          const real* inp, const real* pre_gelu, const real* weight, int N, int IC,
                          int OC, GradMode mode) {
    MatmulContext* mm = matmul_ctx(dbias ? OC : 0);
    matmul_backward_cuda(mm, dpre, dweight, dbias, dout, inp, weight, pre_gelu, N, IC, OC, 0,
                         mode == GRAD_ACCUMULATE, cuda_backend_stream());
}

void gelu_forward(real* out, const real* inp, long n) {
    gelu_forward_cuda(out, inp, n, cuda_backend_stream());
}

void gelu_backward(real* dinp, const real* inp, const real* dout, long n) {
    gelu_backward_cuda(dinp, inp, dout, n, cuda_backend_stream());
}

void swiglu_forward(real* out, const real* inp, int N, int F) {
    swiglu_forward_cuda(out, inp, N, F, cuda_backend_stream());
}

void swiglu_backward(real* dinp, const real* inp, const real* dout, int N, int F) {
    swiglu_backward_cuda(dinp, inp, dout, N, F, cuda_backend_stream());
}

void residual_forward(real* out, const real* a, const real* b, long n) {
    residual_forward_cuda(out, a, b, n, cuda_backend_stream());
}

// --- Loss ----------------------------------------------------------------------------------------

// The fused classifier (model/classifier.cu), then the losses' sum into the step's scalar: both on
// the stream, nothing comes back to the host.
void crossentropy_forward(real_stat* losses, const real* logits, const int* targets, int N, int V,
                          int Vp, double* loss_sum) {
    cudaStream_t s = cuda_backend_stream();
    // write_dlogits = 0: the logits are only read.
    classifier_forward_backward_cuda(const_cast<floatX*>(logits), losses, targets, 0.0f, N, V, Vp, 0,
                                     0.0f, NULL, s);
    loss_sum_cuda(loss_sum, losses, N, s);
}

void crossentropy_forward_backward(real* logits, real_stat* losses, const int* targets,
                                   real_stat dloss, int N, int V, int Vp, double* loss_sum, ZLoss z) {
    cudaStream_t s = cuda_backend_stream();
    classifier_forward_backward_cuda(logits, losses, targets, to_float(dloss), N, V, Vp, 1, z.coef,
                                     z.losses, s);
    loss_sum_cuda(loss_sum, losses, N, s);
    if (z.coef > 0) loss_sum_cuda(z.sum, z.losses, N, s);
}

// --- Memory --------------------------------------------------------------------------------------

static void* device_alloc_zero(size_t bytes, const char* what) {
    if (bytes == 0) return NULL;
    void* p = NULL;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess)
        FAIL(cuda_error_hint(err), "cudaMalloc of %zu bytes (%.1f MiB) for %s failed: %s (%s)", bytes,
             bytes / 1048576.0, what, cudaGetErrorName(err), cudaGetErrorString(err));
    CudaBackendContext* c = cuda_backend_context();
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return p;
}

real* tensor_alloc(size_t n, const char* what) {
    return (real*)device_alloc_zero(n * sizeof(real), what);
}

real_stat* stat_alloc(size_t n, const char* what) {
    return (real_stat*)device_alloc_zero(n * sizeof(real_stat), what);
}

int* tokens_alloc(size_t n, const char* what) { return (int*)device_alloc_zero(n * sizeof(int), what); }

void tensor_free(void* p) {
    if (!p) return;
    // cudaFree waits for the device; the stream is drained first so no kernel still uses p.
    CUDA_CHECK(cudaStreamSynchronize(cuda_backend_stream()));
    CUDA_CHECK(cudaFree(p));
}

void tensor_zero(real* p, size_t n) {
    if (n == 0) return;
    CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(real), cuda_backend_stream()));
}

void tensor_copy(real* dst, const real* src, size_t n) {
    if (n == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(real), cudaMemcpyDeviceToDevice,
                               cuda_backend_stream()));
}

double* scalars_alloc(size_t n, const char* what) {
    return (double*)device_alloc_zero(n * sizeof(double), what);
}

void scalars_zero(double* p, size_t n) {
    if (n == 0) return;
    CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(double), cuda_backend_stream()));
}

void scalars_to_host(double* host, const double* p, size_t n) {
    if (n == 0) return;
    cudaStream_t s = cuda_backend_stream();
    CUDA_CHECK(cudaMemcpyAsync(host, p, n * sizeof(double), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

// 1 while the copy that last used slot i is still queued or running. A query never blocks.
static int token_slot_busy(const CudaBackendContext* c, int i) {
    const cudaError_t e = cudaEventQuery(c->token_staged[i]);
    if (e == cudaErrorNotReady) return 1;
    CUDA_CHECK(e);
    return 0;
}

// A fresh slot at position i of the ring (the slots from i on move up one).
static void insert_token_slot(CudaBackendContext* c, int i) {
    for (int k = c->token_slots; k > i; k--) {
        c->token_staging[k] = c->token_staging[k - 1];
        c->token_staged[k] = c->token_staged[k - 1];
    }
    CUDA_CHECK(cudaMallocHost((void**)&c->token_staging[i], c->token_staging_count * sizeof(int)));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->token_staged[i], cudaEventDisableTiming));
    c->token_slots++;
}

// Ordered on the stream after the kernels that still read the previous tokens. Goes through the
// pinned staging ring (backend_kernels_cuda.cuh): the host array is free again on return, and
// the host waits for nothing unless the ring is full. Slots are visited in the order they were
// last used, so a slot found busy is the oldest upload still in flight: the new slot goes before
// it. The ring is reallocated only for an upload larger than any before (setup, a sampler).
void tokens_upload(int* dst, const int* host_src, size_t n) {
    if (n == 0) return;
    CudaBackendContext* c = cuda_backend_context();
    if (n > c->token_staging_count) {
        free_token_staging(c);
        c->token_staging_count = n;
    }
    const int slot = c->token_slot;
    if (slot == c->token_slots || token_slot_busy(c, slot)) {
        if (c->token_slots < TOKEN_STAGING_MAX_SLOTS)
            insert_token_slot(c, slot);
        else
            CUDA_CHECK(cudaEventSynchronize(c->token_staged[slot]));   // its copy has run
    }
    c->token_slot = (slot + 1) % c->token_slots;
    memcpy(c->token_staging[slot], host_src, n * sizeof(int));
    CUDA_CHECK(cudaMemcpyAsync(dst, c->token_staging[slot], n * sizeof(int), cudaMemcpyHostToDevice,
                               c->stream));
    CUDA_CHECK(cudaEventRecord(c->token_staged[slot], c->stream));
}
