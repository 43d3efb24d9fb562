// The device-memory transports of comm/comm.h, for the CUDA trainer:
//   "nccl"        NCCL collectives and grouped send/recv on the GPU, one communicator per mesh
//                 group (split from the world's); the NCCL library is loaded at run time, so a
//                 program that uses only "mpi-staged" runs where NCCL is not installed.
//   "mpi-staged"  device buffers copied through pinned host buffers and moved by the MPI
//                 transport (comm_mpi.c): for clusters without NCCL, and for several processes
//                 sharing one GPU, which NCCL refuses.
// Both order their operations after the work enqueued so far on the CUDA backend's stream
// (model/backend_kernels_cuda.cuh) and deliver results in stream order on it. The CPU build links
// comm_device_none.c, which refuses them.
#pragma once
#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char* transport;    // "nccl" or "mpi-staged"
    // How the NCCL unique id reaches every rank: "mpi" (MPI_Bcast; MPI must be running), or
    // "file:PATH" / "tcp:HOST:PORT" without MPI (comm/rendezvous.h).
    const char* rendezvous;
    const char* run_key;      // tells this run's rendezvous from an earlier one's (file, tcp)
    double timeout_s;         // bound on every rendezvous wait
    double comm_timeout_s;    // the watchdog's (comm_set_timeout), and NCCL's initialisation's
} DeviceCommOptions;

// Creates the transport's groups (collective over the world). Fails with a one-line message on
// an unknown transport, a missing NCCL library, or a rendezvous that does not complete.
Comm* comm_device_create(const Mesh* mesh, int num_layers, const DeviceCommOptions* o);

#ifdef __cplusplus
}
#endif
