// Choosing and creating a program's transport (--comm) for its backend and launch, shared by the
// trainer and build/generate: "auto" resolves to mpi (host-memory backends), nccl (device memory,
// several ranks or no MPI) or mpi-staged (device memory, one rank under MPI).
#pragma once
#include "comm/comm.h"
#include "comm/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char* comm;             // --comm: auto | mpi | nccl | mpi-staged
    const char* rendezvous;       // "mpi", or file:PATH / tcp:HOST:PORT (no MPI: nccl only)
    const char* rendezvous_id;    // --rendezvous-id (file and tcp), may be NULL
    double rendezvous_timeout;    // seconds
    double comm_timeout;          // the hang watchdog's limit (0: none)
} TransportOptions;

// The transport for a backend whose buffers are host memory (host_memory = 1) or device memory,
// named backend_name in messages, over world_size ranks. Returns the name, or NULL with a one-line
// message in err (ERR_LEN bytes) naming --comm when the combination cannot run.
const char* transport_resolve(const TransportOptions* o, int host_memory, const char* backend_name,
                              int world_size, char* err);
// Creates the resolved transport's comm (collective over the world), with the watchdog's limit.
// Fails with a one-line message when the device transport cannot start.
Comm* transport_create(const Mesh* mesh, int num_layers, const char* transport,
                       const TransportOptions* o);

#ifdef __cplusplus
}
#endif
