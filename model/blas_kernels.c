#include "model/blas_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char* openblas_get_corename(void);

const char* blas_kernel_name(void) { return openblas_get_corename(); }

const char* blas_preferred_coretype(void) {
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    const char* core = openblas_get_corename();
    // OpenBLAS's fallbacks for an unknown x86-64 CPU.
    if (strcmp(core, "Prescott") != 0 && strcmp(core, "Core2") != 0 &&
        strcmp(core, "Nehalem") != 0)
        return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

void blas_ensure_vector_kernels(char** argv) {
    const char* want = blas_preferred_coretype();
    if (!want) return;
    const char* core = openblas_get_corename();
    setenv("OPENBLAS_CORETYPE", want, 1);
    fprintf(stderr, "note: OpenBLAS chose its %s kernels for this CPU; restarting with "
            "OPENBLAS_CORETYPE=%s (set OPENBLAS_CORETYPE yourself to override)\n", core, want);
    fflush(stderr);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "warning: could not restart with OPENBLAS_CORETYPE=%s; continuing with %s\n",
            want, core);
}
