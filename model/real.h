// The floating-point type of the CPU backend. fp32 in every program; the finite-difference
// tests compile the same sources with -DGPT_REAL_DOUBLE so that gradients are checked in double.
#pragma once
#include <cblas.h>

#ifdef GPT_REAL_DOUBLE
typedef double real;
#define cblas_rgemm cblas_dgemm
#define REAL_NAME "fp64"
#else
typedef float real;
#define cblas_rgemm cblas_sgemm
#define REAL_NAME "fp32"
#endif
