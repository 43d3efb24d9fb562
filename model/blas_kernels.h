// Makes sure OpenBLAS runs its vector kernels on this CPU.
#pragma once

// OpenBLAS 0.3.21 (Debian 12) does not recognise CPUs newer than itself (e.g. Intel family 6
// model 207) and falls back to its generic SSE3 "Prescott" kernels there, about 7x slower. When
// that happens on a CPU with AVX-512 (or AVX2 + FMA), this re-executes the program with
// OPENBLAS_CORETYPE=SkylakeX (or Haswell), which OpenBLAS reads only when it loads. A
// user-set OPENBLAS_CORETYPE is always respected. Call first thing in main, before MPI_Init.
void blas_ensure_vector_kernels(char** argv);
// The OPENBLAS_CORETYPE that would restart the program with, or NULL where it keeps OpenBLAS's
// choice (OPENBLAS_CORETYPE set, a CPU OpenBLAS recognises, neither AVX-512 nor AVX2 + FMA).
const char* blas_preferred_coretype(void);
// The kernel family OpenBLAS uses ("SkylakeX", "Haswell", "Prescott", ...).
const char* blas_kernel_name(void);
