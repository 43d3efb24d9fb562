// exp and tanh for the fp32 hot loops (softmax over the vocabulary, GELU), written so that the
// compiler vectorises them: libm's expf/tanhf are scalar calls. exp: range reduction to
// r = x - n ln2 (|r| <= ln2/2), a degree-6 Taylor polynomial (error ~ |r|^7/7! < 1.3e-7
// relative), and 2^n by exponent arithmetic. Inputs are clamped to [-87, 88]: exp(-inf) gives
// ~1e-38, not 0, so callers that need an exact empty result keep using libm. In the fp64 build
// (finite-difference tests) these are libm's exp and tanh.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model/real.h"

#ifdef GPT_REAL_DOUBLE
static inline real fast_exp(real x) { return exp(x); }
static inline real fast_tanh(real x) { return tanh(x); }
#else
#pragma omp declare simd notinbranch
static inline float fast_exp(float x) {
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    const float shifter = 12582912.0f;   // 1.5 * 2^23: adding it rounds to an integer
    const float t = x * 1.44269504088896341f + shifter;
    const float n = t - shifter;
    const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;   // ln2 in 2 parts
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits;
    memcpy(&bits, &p, 4);
    // multiply by 2^n: add n to the exponent field. n is in [-126, 127] after the clamp, so the
    // product fits; a left shift of a negative n would be undefined behaviour.
    bits += (int32_t)n * (1 << 23);
    memcpy(&p, &bits, 4);
    return p;
}

#pragma omp declare simd notinbranch
static inline float fast_tanh(float x) {
    // tanh(x) = 1 - 2 / (exp(2x) + 1): absolute error ~1e-7, enough inside GELU.
    return 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f);
}
#endif
