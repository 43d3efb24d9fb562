// The modes of build/explain besides the text report, one file each.
#pragma once
#include <stdio.h>

#include "explain/simulate.h"

// explain/check_mpi.c: this rank of an MPI job runs the schedule over MPI (real kernels, real
// transfers) and compares its comm counters and partial-attention calls with its simulation.
// Returns the exit code.
int explain_check_mpi(const ExplainShape* s, int* argc, char*** argv);
// explain/lse_example.c: two partial attentions of one query merged by their LSE, against the
// attention over all keys. Returns the exit code.
int explain_lse_example(FILE* out);
// explain/crossover.c: bytes per rank against P for ATTENTION2D's best mesh and Ring. Returns the
// exit code.
int explain_crossover(const ExplainShape* s, FILE* out);
// explain/pictures.c: the PNGs of a simulation into dir (gnuplot).
void explain_pictures(const Simulation* sim, const char* dir);
