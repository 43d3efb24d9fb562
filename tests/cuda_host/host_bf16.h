// bfloat16 for the host runtime: storage type, conversions with round-to-nearest-even, and the
// operators CUDA defines for sm_80+. Arithmetic is done in float and rounded once, which is
// exact rounding for +, -, * of two bf16 values (the float result is exact or far below half a
// bf16 ulp from it).
#pragma once
#include <string.h>
#include "tests/cuda_host/host_types.h"

static inline unsigned short cuda_host_float_to_bf16_bits(float f) {
    unsigned int u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN: the canonical quiet NaN, as CUDA
    u += 0x7fffu + ((u >> 16) & 1u);                     // round to nearest, ties to even
    return (unsigned short)(u >> 16);
}

static inline float cuda_host_bf16_bits_to_float(unsigned short h) {
    unsigned int u = (unsigned int)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

struct __attribute__((aligned(2))) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;  // trivial, so __shared__ arrays of it need no constructor
    __nv_bfloat16(float f) : __x(cuda_host_float_to_bf16_bits(f)) {}
    __nv_bfloat16(double f) : __x(cuda_host_float_to_bf16_bits((float)f)) {}
    __nv_bfloat16(int v) : __x(cuda_host_float_to_bf16_bits((float)v)) {}
    __nv_bfloat16(unsigned int v) : __x(cuda_host_float_to_bf16_bits((float)v)) {}
    __nv_bfloat16(long long v) : __x(cuda_host_float_to_bf16_bits((float)v)) {}
    __nv_bfloat16(unsigned long long v) : __x(cuda_host_float_to_bf16_bits((float)v)) {}
    operator float() const { return cuda_host_bf16_bits_to_float(__x); }
};
typedef __nv_bfloat16 nv_bfloat16;

struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
};
typedef __nv_bfloat162 nv_bfloat162;

static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {
    __nv_bfloat16 h;
    h.__x = bits;
    return h;
}
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }

static inline __nv_bfloat16 __float2bfloat16(float f) {
    return __ushort_as_bfloat16(cuda_host_float_to_bf16_bits(f));
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rz(float f) {
    unsigned int u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __ushort_as_bfloat16(0x7fff);
    return __ushort_as_bfloat16((unsigned short)(u >> 16));
}
static inline float __bfloat162float(__nv_bfloat16 h) { return cuda_host_bf16_bits_to_float(h.__x); }

static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162(__float2bfloat16(a), __float2bfloat16(b));
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 v) { return __floats2bfloat162_rn(v.x, v.y); }
static inline float2 __bfloat1622float2(__nv_bfloat162 v) {
    return make_float2(__bfloat162float(v.x), __bfloat162float(v.y));
}
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) {
    return __nv_bfloat162(a, b);
}
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
static inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 v) { return v.x; }
static inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 v) { return v.y; }
static inline float __low2float(__nv_bfloat162 v) { return __bfloat162float(v.x); }
static inline float __high2float(__nv_bfloat162 v) { return __bfloat162float(v.y); }

static inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16((float)a + (float)b); }
static inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16((float)a - (float)b); }
static inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16((float)a * (float)b); }
static inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y));
}
static inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y));
}

// Operators on two bf16 values give bf16, as CUDA's; mixed bf16/float expressions are ambiguous
// in both (cast one side).
static inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
static inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
static inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
static inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16((float)a / (float)b); }
static inline __nv_bfloat16 operator-(__nv_bfloat16 a) { return __ushort_as_bfloat16((unsigned short)(a.__x ^ 0x8000u)); }
static inline __nv_bfloat16& operator+=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a + b; }
static inline __nv_bfloat16& operator-=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a - b; }
static inline __nv_bfloat16& operator*=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a * b; }
static inline __nv_bfloat16& operator/=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a / b; }
static inline bool operator==(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a == (float)b; }
static inline bool operator!=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a != (float)b; }
static inline bool operator<(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a < (float)b; }
static inline bool operator>(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a > (float)b; }
static inline bool operator<=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a <= (float)b; }
static inline bool operator>=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a >= (float)b; }
