// SwiGLU forward and backward (Shazeer 2020, Llama's MLP activation): element-wise kernels, twins
// of swiglu_forward / swiglu_backward in model/layers.c. Each row of the input (N, 2F) is F gate
// columns then F up columns; the output (N, F) is silu(gate) * up.
//
// Thread i handles VEC consecutive output columns of one row: output elements [i*VEC, i*VEC + VEC)
// of the flattened (N, F), its gate at the same column of the row's first half and its up in the
// second. VEC = X128_ELEMS (one 16-byte vector of each) when F is a multiple of it, so that a
// vector never straddles two rows and the up half starts 16-byte aligned, and the pointers are
// 16-byte aligned; VEC = 1 otherwise. Math in fp32, each floatX result rounded once when stored.
#include "model/layers_cuda.cuh"

static constexpr int SWIGLU_THREADS = 256;

// s = sigmoid(x) = 1 / (1 + exp(-x)); expf (not __expf): within a few ulp of the CPU twin's exp.
// x < -88 gives exp(-x) = inf and s = 0, the limit (the CPU clamps there: s ~ 1e-38).
__device__ __forceinline__ float swiglu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// out (N, F) = silu(gate) * up; inp (N, 2F).
template <int VEC> __global__ void swiglu_forward_kernel(floatX* out, const floatX* inp, long n, int F) {
    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;  // flat index into out
    if (i >= n) return;
    const long row = i / F, col = i - row * F;  // VEC divides F: the vector stays in the row
    const floatX* gate = inp + row * 2 * F + col;
    const PackX<VEC> g = load_packx<VEC>(gate);
    const PackX<VEC> u = load_packx<VEC>(gate + F);
    PackX<VEC> o;
    UNROLL
    for (int k = 0; k < VEC; k++) {
        const float x = to_float(g.v[k]);
        o.v[k] = from_float<floatX>(x * swiglu_sigmoid(x) * to_float(u.v[k]));
    }
    store_packx<VEC>(out + i, o);
}

// dinp (N, 2F) = [dgate | dup], overwritten; inp (N, 2F), dout (N, F).
template <int VEC>
__global__ void swiglu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, long n, int F) {
    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;  // flat index into dout
    if (i >= n) return;
    const long row = i / F, col = i - row * F;
    const long at = row * 2 * F + col;  // the gate's column in inp and dinp; up's is at + F
    const PackX<VEC> g = load_packx<VEC>(inp + at);
    const PackX<VEC> u = load_packx<VEC>(inp + at + F);
    const PackX<VEC> d = load_packx<VEC>(dout + i);
    PackX<VEC> dg, du;
    UNROLL
    for (int k = 0; k < VEC; k++) {
        const float x = to_float(g.v[k]), up = to_float(u.v[k]), gd = to_float(d.v[k]);
        const float s = swiglu_sigmoid(x);
        dg.v[k] = from_float<floatX>(gd * up * s * (1.0f + x * (1.0f - s)));  // silu'(x) = s (1 + x (1 - s))
        du.v[k] = from_float<floatX>(gd * x * s);
    }
    store_packx<VEC>(dinp + at, dg);  // after every load: dinp may alias inp
    store_packx<VEC>(dinp + at + F, du);
}

// Blocks of SWIGLU_THREADS threads covering n elements VEC at a time (as model/gelu.cu's grid).
static unsigned swiglu_blocks(long n, int vec) {
    return (unsigned)ceil_div_long(ceil_div_long(n, vec), SWIGLU_THREADS);
}

void swiglu_forward_cuda(floatX* out, const floatX* inp, int N, int F, cudaStream_t stream) {
    const long n = (long)N * F;
    if (n <= 0) return;
    if (F % X128_ELEMS == 0 && aligned16(out) && aligned16(inp)) {
        LAUNCH(swiglu_forward_kernel<X128_ELEMS>, swiglu_blocks(n, X128_ELEMS), SWIGLU_THREADS, 0, stream,
               out, inp, n, F);
    } else {
        LAUNCH(swiglu_forward_kernel<1>, swiglu_blocks(n, 1), SWIGLU_THREADS, 0, stream, out, inp, n, F);
    }
}

void swiglu_backward_cuda(floatX* dinp, const floatX* inp, const floatX* dout, int N, int F,
                          cudaStream_t stream) {
    const long n = (long)N * F;
    if (n <= 0) return;
    if (F % X128_ELEMS == 0 && aligned16(dinp) && aligned16(inp) && aligned16(dout)) {
        LAUNCH(swiglu_backward_kernel<X128_ELEMS>, swiglu_blocks(n, X128_ELEMS), SWIGLU_THREADS, 0, stream,
               dinp, inp, dout, n, F);
    } else {
        LAUNCH(swiglu_backward_kernel<1>, swiglu_blocks(n, 1), SWIGLU_THREADS, 0, stream, dinp, inp, dout,
               n, F);
    }
}
