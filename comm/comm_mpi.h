// The MPI transport of comm/comm.h, on host memory. No MPI types leak out of it.
#pragma once
#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

// Starts MPI (a binary run without mpirun is a world of one) and makes failure job-wide: MPI
// errors return to the caller so they are reported with file and line, every fatal message is
// prefixed "rank N", and any fatal error (fail.h) calls MPI_Abort so no rank is left waiting.
void comm_mpi_init(int* argc, char*** argv, int* world_rank, int* world_size);
// Creates the mesh groups (collective over the world: every rank must call it) and counters
// for layers 0..num_layers-1.
Comm* comm_mpi_create(const Mesh* mesh, int num_layers);
// comm_destroy every Comm first.
void comm_mpi_finalize(void);

#ifdef __cplusplus
}
#endif
