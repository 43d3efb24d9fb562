// The floating-point types of a model build.
//   real       storage of parameters, gradients and activations: fp32 in the CPU backend; the
//              finite-difference tests compile the same sources with -DGPT_REAL_DOUBLE so that
//              gradients are checked in double; the CUDA backend (GPT_BACKEND_CUDA) uses floatX
//              (bf16, or fp32 with -DGPT_CUDA_FP32).
//   real_stat  per-row statistics (LayerNorm mean and 1/std, log-sum-exps, per-token losses),
//              which stay fp32 (fp64 in the double build) whatever the storage type.
#pragma once
#include <math.h>

#if defined(GPT_BACKEND_CUDA)
#include "model/cuda_precision.cuh"
typedef floatX real;
typedef float real_stat;
#define REAL_NAME FLOATX_NAME
#elif defined(GPT_REAL_DOUBLE)
#include <cblas.h>
typedef double real;
typedef double real_stat;
#define cblas_rgemm cblas_dgemm
#define REAL_NAME "fp64"
#define rexp exp
#define rlog log
#define rsqrt sqrt
#define rtanh tanh
#define rcosh cosh
#else
#include <cblas.h>
typedef float real;
typedef float real_stat;
#define cblas_rgemm cblas_sgemm
#define REAL_NAME "fp32"
#define rexp expf
#define rlog logf
#define rsqrt sqrtf
#define rtanh tanhf
#define rcosh coshf
#endif
