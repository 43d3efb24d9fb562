// Prints the OPENBLAS_CORETYPE the programs restart into on this CPU (model/blas_kernels.h), or
// nothing where they keep OpenBLAS's own choice: tests/run_suites.sh sets it for every test, so
// that no test sees the restart's note.
#include <stdio.h>

#include "model/blas_kernels.h"

int main(void) {
    const char* coretype = blas_preferred_coretype();
    if (coretype) puts(coretype);
    return 0;
}
