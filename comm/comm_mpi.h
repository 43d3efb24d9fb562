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

// For transports built on this one (comm_staged.cu moves device memory through host buffers with
// these ops): the ops, and a context with the mesh groups (collective over the world).
extern const CommOps comm_mpi_ops;
void* comm_mpi_context(const Mesh* mesh);
// 1 between comm_mpi_init and comm_mpi_finalize.
int comm_mpi_active(void);
// MPI_Bcast of bytes over the world (the NCCL unique id).
void comm_mpi_broadcast_bytes(void* buf, size_t bytes, int root);
// This rank's index and the number of ranks on its node (a shared-memory split of the world).
void comm_mpi_node_rank(int* local_rank, int* local_size);
// Ends the job: MPI_Abort in a world of more than one, else exit (the fail hook comm_mpi_init
// installs).
void comm_mpi_abort_job(int exit_code);

#ifdef __cplusplus
}
#endif
