// Sum of squares of the gradients for the global-norm clip (contract in model/optim_cuda.cuh;
// CPU twin grad_sum_squares in model/optimizer.c). Two passes, no atomics: pass 1 gives one
// partial per block, pass 2 (one block) adds the partials in a fixed order.
#include "model/optim_cuda.cuh"

#include <stdint.h>

// Sum of x over the block, the same value in every thread, added in a fixed order: a butterfly
// inside each warp (addition is commutative, so all lanes agree), then the warps' sums in order.
__device__ __forceinline__ double block_sum(double x, double* warp_sums) {
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = x;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < (int)(blockDim.x / 32); w++) total += warp_sums[w];
    return total;
}

// 16 bytes of T, read with one load.
template <typename T> struct __align__(16) Pack16 {
    T v[16 / sizeof(T)];
};

// partial[block] = sum of squares of the elements this block's threads visit (grid-stride).
// vec: grads is 16-byte aligned, so groups of 16 bytes are read with one load. T: the gradients'
// floatX, or fp32 (the master weights' norm).
template <typename T>
__global__ void __launch_bounds__(GLOBAL_NORM_THREADS)
    global_norm_partial_kernel(double* partial, const T* grads, size_t n, int vec) {
    __shared__ double warp_sums[GLOBAL_NORM_THREADS / 32];
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    constexpr int ELEMS = 16 / sizeof(T);
    double acc = 0.0;
    size_t tail = 0;
    if (vec) {
        const size_t groups = n / ELEMS;
        for (size_t q = tid; q < groups; q += stride) {
            const Pack16<T> x = *reinterpret_cast<const Pack16<T>*>(grads + q * ELEMS);
            float s = 0.0f;  // 8 squares of bf16 (each exact in fp32) or 4 of fp32
            for (int k = 0; k < ELEMS; k++) {
                const float f = to_float(x.v[k]);
                s += f * f;
            }
            acc += s;
        }
        tail = groups * ELEMS;
    }
    for (size_t i = tail + tid; i < n; i += stride) {
        const double f = to_float(grads[i]);
        acc += f * f;
    }
    const double total = block_sum(acc, warp_sums);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void __launch_bounds__(GLOBAL_NORM_THREADS)
    global_norm_finish_kernel(double* out, const double* partial, int parts, int accumulate) {
    __shared__ double warp_sums[GLOBAL_NORM_THREADS / 32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) acc += partial[i];
    const double total = block_sum(acc, warp_sums);
    if (threadIdx.x == 0) *out = accumulate ? *out + total : total;
}

template <typename T>
static void global_norm_squared(double* out_sumsq, const T* x, size_t n, double* scratch,
                                int accumulate, cudaStream_t stream) {
    // Enough blocks to fill an H100 with 4 16-byte loads per thread at least; a function of n only.
    const size_t per_block = (size_t)GLOBAL_NORM_THREADS * (16 / sizeof(T)) * 4;
    size_t blocks = (n + per_block - 1) / per_block;
    if (blocks < 1) blocks = 1;
    if (blocks > GLOBAL_NORM_MAX_BLOCKS) blocks = GLOBAL_NORM_MAX_BLOCKS;
    const int vec = (uintptr_t)x % 16 == 0;
    LAUNCH((global_norm_partial_kernel<T>), (unsigned int)blocks, GLOBAL_NORM_THREADS, 0, stream,
           scratch, x, n, vec);
    LAUNCH(global_norm_finish_kernel, 1, GLOBAL_NORM_THREADS, 0, stream, out_sumsq,
           (const double*)scratch, (int)blocks, accumulate);
}

void global_norm_squared_cuda(double* out_sumsq, const floatX* grads, size_t n, double* scratch,
                              int accumulate, cudaStream_t stream) {
    global_norm_squared(out_sumsq, grads, n, scratch, accumulate, stream);
}

void global_norm_squared_f32_cuda(double* out_sumsq, const float* x, size_t n, double* scratch,
                                  int accumulate, cudaStream_t stream) {
    global_norm_squared(out_sumsq, x, n, scratch, accumulate, stream);
}

// One thread: the clip factor of model/optimizer.c's clip_factor, in double as there (sqrt and
// division are correctly rounded on the GPU too), so the host and the device agree bit for bit.
__global__ void clip_scale_kernel(double* scale, const double* loss_sum, const double* sumsq,
                                  double max_norm, double loss_sum_limit, double sumsq_limit) {
    if ((loss_sum && !isfinite(*loss_sum)) || !isfinite(*sumsq) ||
        (loss_sum && *loss_sum > loss_sum_limit) || *sumsq > sumsq_limit) {
        *scale = -1.0;   // OPTIMIZER_SKIP: the update is dropped
        return;
    }
    if (max_norm <= 0) {
        *scale = 1.0;
        return;
    }
    const double f = max_norm / (sqrt(*sumsq) + 1e-6);
    *scale = f < 1.0 ? f : 1.0;
}

void clip_scale_cuda(double* scale, const double* loss_sum, const double* sumsq, double max_norm,
                     double loss_sum_limit, double sumsq_limit, cudaStream_t stream) {
    LAUNCH(clip_scale_kernel, 1, 1, 0, stream, scale, loss_sum, sumsq, max_norm, loss_sum_limit,
           sumsq_limit);
}
