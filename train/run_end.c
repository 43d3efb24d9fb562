// How a run ends early on a verdict every rank reaches alike (a configuration error), and the end
// of MPI on every exit path.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm/comm_mpi.h"
#include "train/trainer.h"

// Ends MPI where it runs (every exit path of the trainer).
void end_launch(void) {
    if (comm_mpi_active()) comm_mpi_finalize();
}

// Every rank computes the same verdict from the same options; rank 0 says it, all exit.
void config_error(const Trainer* t, const char* fmt, ...) {
    if (t->rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "error: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    end_launch();
    exit(2);
}
