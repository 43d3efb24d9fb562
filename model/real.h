// The floating-point type of the CPU backend. fp32 in every program; the finite-difference
// tests compile the same sources with -DGPT_REAL_DOUBLE so that gradients are checked in double.
#pragma once
#include <cblas.h>
#include <math.h>

#ifdef GPT_REAL_DOUBLE
typedef double real;
#define cblas_rgemm cblas_dgemm
#define REAL_NAME "fp64"
#define rexp exp
#define rlog log
#define rsqrt sqrt
#define rtanh tanh
#define rcosh cosh
#else
typedef float real;
#define cblas_rgemm cblas_sgemm
#define REAL_NAME "fp32"
#define rexp expf
#define rlog logf
#define rsqrt sqrtf
#define rtanh tanhf
#define rcosh coshf
#endif
