// GELU (tanh approximation) forward and backward, the residual add and the fp32 -> floatX
// conversion: element-wise kernels,
// one thread per 16-byte vector (X128_ELEMS values) with a scalar path for the last partial
// vector, or one thread per value when a pointer is not 16-byte aligned. Twins of gelu_forward,
// gelu_backward and residual_forward in model/layers.c.
#include "model/layers_cuda.cuh"

static constexpr int ELEMWISE_THREADS = 256;

// Thread i handles elements [i*VEC, i*VEC + VEC): one vector, or the scalar tail when the last
// vector is partial.
template <int VEC> __global__ void gelu_forward_kernel(floatX* out, const floatX* inp, long n) {
    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= n) return;
    if (i + VEC <= n) {
        const PackX<VEC> x = load_packx<VEC>(inp + i);
        PackX<VEC> o;
UNROLL
        for (int k = 0; k < VEC; k++) o.v[k] = from_float<floatX>(gelu_value(to_float(x.v[k])));
        store_packx<VEC>(out + i, o);
    } else {
        for (long j = i; j < n; j++) out[j] = from_float<floatX>(gelu_value(to_float(inp[j])));
    }
}

template <int VEC>
__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, long n) {
    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= n) return;
    if (i + VEC <= n) {
        const PackX<VEC> x = load_packx<VEC>(inp + i);
        const PackX<VEC> g = load_packx<VEC>(dout + i);
        PackX<VEC> d = load_packx<VEC>(dinp + i);
UNROLL
        for (int k = 0; k < VEC; k++)
            d.v[k] = from_float<floatX>(to_float(d.v[k]) + gelu_grad_value(to_float(x.v[k])) * to_float(g.v[k]));
        store_packx<VEC>(dinp + i, d);
    } else {
        for (long j = i; j < n; j++)
            dinp[j] = from_float<floatX>(to_float(dinp[j]) + gelu_grad_value(to_float(inp[j])) * to_float(dout[j]));
    }
}

template <int VEC>
__global__ void residual_forward_kernel(floatX* out, const floatX* a, const floatX* b, long n) {
    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= n) return;
    if (i + VEC <= n) {
        const PackX<VEC> x = load_packx<VEC>(a + i);
        const PackX<VEC> y = load_packx<VEC>(b + i);
        PackX<VEC> o;
UNROLL
        for (int k = 0; k < VEC; k++) o.v[k] = from_float<floatX>(to_float(x.v[k]) + to_float(y.v[k]));
        store_packx<VEC>(out + i, o);
    } else {
        for (long j = i; j < n; j++) out[j] = from_float<floatX>(to_float(a[j]) + to_float(b[j]));
    }
}

// fp32 to floatX, rounded to nearest: a grid-stride loop over at most CONVERT_MAX_BLOCKS blocks.
enum { CONVERT_MAX_BLOCKS = 4096 };
__global__ void float_to_floatx_kernel(floatX* out, const float* in, size_t n) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = from_float<floatX>(in[i]);
}

static unsigned elementwise_blocks(long n, int vec) {
    return (unsigned)ceil_div_long(ceil_div_long(n, vec), ELEMWISE_THREADS);
}

void gelu_forward_cuda(floatX* out, const floatX* inp, long n, cudaStream_t stream) {
    if (n <= 0) return;
    if (aligned16(out) && aligned16(inp)) {
        LAUNCH(gelu_forward_kernel<X128_ELEMS>, elementwise_blocks(n, X128_ELEMS), ELEMWISE_THREADS,
               0, stream, out, inp, n);
    } else {
        LAUNCH(gelu_forward_kernel<1>, elementwise_blocks(n, 1), ELEMWISE_THREADS, 0, stream, out, inp, n);
    }
}

void gelu_backward_cuda(floatX* dinp, const floatX* inp, const floatX* dout, long n, cudaStream_t stream) {
    if (n <= 0) return;
    if (aligned16(dinp) && aligned16(inp) && aligned16(dout)) {
        LAUNCH(gelu_backward_kernel<X128_ELEMS>, elementwise_blocks(n, X128_ELEMS), ELEMWISE_THREADS,
               0, stream, dinp, inp, dout, n);
    } else {
        LAUNCH(gelu_backward_kernel<1>, elementwise_blocks(n, 1), ELEMWISE_THREADS, 0, stream, dinp,
               inp, dout, n);
    }
}

void residual_forward_cuda(floatX* out, const floatX* a, const floatX* b, long n, cudaStream_t stream) {
    if (n <= 0) return;
    if (aligned16(out) && aligned16(a) && aligned16(b)) {
        LAUNCH(residual_forward_kernel<X128_ELEMS>, elementwise_blocks(n, X128_ELEMS), ELEMWISE_THREADS,
               0, stream, out, a, b, n);
    } else {
        LAUNCH(residual_forward_kernel<1>, elementwise_blocks(n, 1), ELEMWISE_THREADS, 0, stream, out,
               a, b, n);
    }
}

void float_to_floatx_cuda(floatX* out, const float* in, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    size_t blocks = (n + ELEMWISE_THREADS - 1) / ELEMWISE_THREADS;
    if (blocks > CONVERT_MAX_BLOCKS) blocks = CONVERT_MAX_BLOCKS;
    LAUNCH(float_to_floatx_kernel, (unsigned)blocks, ELEMWISE_THREADS, 0, stream, out, in, n);
}
