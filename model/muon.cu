// Muon's element-wise steps and its Newton-Schulz GEMMs on the GPU (contract in
// model/optim_cuda.cuh; the step itself is model/muon.c's, the CPU twin's ops are in
// model/backend_cpu.c and follow the same arithmetic in fp32).
#include "model/optim_cuda.cuh"

#include "model/muon.h"
#include "model/stochastic_round.cuh"

enum { MUON_THREADS = 256 };

static unsigned int blocks_for(size_t n) {
    const size_t b = (n + MUON_THREADS - 1) / MUON_THREADS;
    CHECK(b <= 0x7fffffff, "caller bug", "muon: %zu elements is too many", n);
    return (unsigned int)b;
}

__global__ void __launch_bounds__(MUON_THREADS)
    muon_momentum_kernel(float* mom, float* u, const floatX* grads, size_t n, float beta,
                         int nesterov, const double* grad_scale) {
    if (grad_scale && *grad_scale < 0.0) return;   // OPTIMIZER_SKIP: the momentum stays
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float g = to_float(grads[i]) * (grad_scale ? (float)*grad_scale : 1.0f);
    const float m = beta * mom[i] + (1.0f - beta) * g;
    mom[i] = m;
    u[i] = nesterov ? (1.0f - beta) * g + beta * m : m;
}

__global__ void __launch_bounds__(MUON_THREADS)
    muon_normalize_kernel(float* x, const float* u, int rows, int cols, const double* sumsq) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;   // element of U, row-major
    if (i >= (size_t)rows * cols) return;
    const float d = (float)(sqrt(*sumsq) + MUON_NORM_EPS);
    x[muon_x_index(i, rows, cols)] = u[i] / d;
}

// One thread per SR_SPAN elements of the flat parameter vector that share a Philox draw (their
// first at a multiple of SR_SPAN), as AdamW's kernel draws them.
__global__ void __launch_bounds__(MUON_THREADS)
    muon_update_kernel(floatX* params, float* master, const float* x, size_t offset, int rows,
                       int cols, float step, float decay, const double* grad_scale,
                       unsigned long long seed, unsigned long long sr_offset) {
    if (grad_scale && *grad_scale < 0.0) return;   // OPTIMIZER_SKIP: the parameters stay
    const size_t n = (size_t)rows * cols;
    const size_t first = offset / SR_SPAN * SR_SPAN + ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * SR_SPAN;
    SrBits bits = SR_BITS_INIT;
    for (size_t e = first; e < first + SR_SPAN; e++) {   // e: element of the flat vector
        if (e < offset || e >= offset + n) continue;
        float p = master ? master[e] : to_float(params[e]);
        p -= decay * p + step * x[muon_x_index(e - offset, rows, cols)];
        if (master) master[e] = p;
        params[e] = round_stochastic<floatX>(p, sr_bits16(&bits, seed, sr_offset, e));
    }
}

void muon_momentum_cuda(float* mom, float* u, const floatX* grads, size_t n, double beta, int nesterov,
                        const double* grad_scale, cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(muon_momentum_kernel, blocks_for(n), MUON_THREADS, 0, stream, mom, u, grads, n,
           (float)beta, nesterov, grad_scale);
}

void muon_normalize_cuda(float* x, const float* u, int rows, int cols, const double* sumsq,
                         cudaStream_t stream) {
    const size_t n = (size_t)rows * cols;
    if (n == 0) return;
    LAUNCH(muon_normalize_kernel, blocks_for(n), MUON_THREADS, 0, stream, x, u, rows, cols, sumsq);
}

void muon_update_cuda(floatX* params, float* master, const float* x, size_t offset, int rows,
                      int cols, double step, double decay, const double* grad_scale,
                      unsigned long long seed, int t, cudaStream_t stream) {
    const size_t n = (size_t)rows * cols;
    if (n == 0) return;
    const size_t spans = (offset % SR_SPAN + n + SR_SPAN - 1) / SR_SPAN;
    LAUNCH(muon_update_kernel, blocks_for(spans), MUON_THREADS, 0, stream, params, master, x, offset,
           rows, cols, (float)step, (float)decay, grad_scale, seed, 4ull * (unsigned long long)t);
}

void muon_gemm_cuda(cublasHandle_t handle, int prec, int trans_a, int trans_b, int M, int N, int K,
                    double alpha, const float* A, int lda, const float* B, int ldb, double beta,
                    float* C, int ldc) {
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the operands swap.
    const float al = (float)alpha, be = (float)beta;
    // fp32 in and out; the products from fp32, or from the inputs rounded to TF32 or bf16 on the
    // tensor cores (MuonMatmulPrec)
    const cublasComputeType_t compute = prec == MUON_PREC_MEDIUM ? CUBLAS_COMPUTE_32F_FAST_16BF
                                        : prec == MUON_PREC_HIGH ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                 : CUBLAS_COMPUTE_32F;
    CUDA_CHECK(cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                            trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &al, B, CUDA_R_32F, ldb, A,
                            CUDA_R_32F, lda, &be, C, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT));
}
