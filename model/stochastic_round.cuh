// CUDA backend: the optimizers' stochastic rounding of fp32 master weights into floatX
// parameters (AdamW and Muon write the same bits for an element at a step, so that a resumed run
// re-rounds them as the uninterrupted one did: gpt_params_restore_rounding).
#pragma once

#include "model/cuda_precision.cuh"

// cuRAND's device API (Philox) here only: curand_kernel.h defines ~400 KB of device tables for the
// other generators, which every translation unit that includes it would carry in its fatbin.
#if defined(__CUDACC__)
#include <curand_kernel.h>
#endif

// fp32 -> floatX given 16 random bits. fp32: exact. bf16: adds the random bits below the bf16
// ulp and truncates, so x rounds up (in magnitude) with probability equal to its fraction of an
// ulp: unbiased. Inf and NaN round to nearest.
template <typename T> __device__ __forceinline__ T round_stochastic(float x, unsigned int r16);
template <> __device__ __forceinline__ float round_stochastic<float>(float x, unsigned int r16) {
    (void)r16;
    return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 round_stochastic<__nv_bfloat16>(float x, unsigned int r16) {
    const unsigned int bits = __float_as_uint(x);
    if ((bits & 0x7f800000u) == 0x7f800000u) return __float2bfloat16_rn(x);
    return __ushort_as_bfloat16((unsigned short)((bits + (r16 & 0xffffu)) >> 16));
}

// 16 random bits per element i of the flat parameter vector: half (i % 2) of word (i % 8) / 2 of
// the Philox output for subsequence i / 8 at the step's offset (4 t), seed adamw_seed(t). One
// Philox output serves 8 consecutive elements: SrBits caches the last one a thread drew.
enum { SR_SPAN = 8 };
typedef struct {
    unsigned long long span;
    uint4 r;
} SrBits;
#define SR_BITS_INIT {~0ull, {0, 0, 0, 0}}

__device__ __forceinline__ unsigned int sr_bits16(SrBits* c, unsigned long long seed,
                                                  unsigned long long offset, unsigned long long i) {
    if (sizeof(floatX) >= sizeof(float)) return 0;   // only bf16 storage rounds
    if (i / SR_SPAN != c->span) {
        c->span = i / SR_SPAN;
        curandStatePhilox4_32_10_t state;
        curand_init(seed, c->span, offset, &state);
        c->r = curand4(&state);
    }
    const unsigned int lane = (unsigned int)(i % SR_SPAN);
    const unsigned int word = lane / 2 == 0 ? c->r.x : lane / 2 == 1 ? c->r.y : lane / 2 == 2 ? c->r.z : c->r.w;
    return lane % 2 ? word >> 16 : word & 0xffffu;
}
