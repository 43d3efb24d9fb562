#include "comm/transport.h"

#include <stdio.h>
#include <string.h>

#include "comm/comm_device.h"
#include "comm/comm_mpi.h"
#include "comm/fail.h"
#include "comm/rendezvous.h"

static int uses_mpi(const TransportOptions* o) {
    return !o->rendezvous || strcmp(o->rendezvous, "mpi") == 0;
}

const char* transport_resolve(const TransportOptions* o, int host_memory, const char* backend_name,
                              int world_size, char* err) {
    const int mpi = uses_mpi(o);
    const char* c = o->comm ? o->comm : "auto";
    if (strcmp(c, "auto") == 0)
        c = host_memory ? "mpi" : (!mpi || world_size > 1) ? "nccl" : "mpi-staged";
    if (host_memory && strcmp(c, "mpi") != 0) {
        snprintf(err, ERR_LEN, "--comm %s: the %s backend's buffers are host memory, moved by "
                 "--comm mpi (nccl and mpi-staged move device memory: the CUDA builds)", c,
                 backend_name);
        return NULL;
    }
    if (!host_memory && strcmp(c, "mpi") == 0) {
        snprintf(err, ERR_LEN, "--comm mpi: the %s backend's buffers are device memory; use --comm "
                 "nccl, or mpi-staged (through pinned host buffers)", backend_name);
        return NULL;
    }
    if (!mpi && strcmp(c, "nccl") != 0) {
        snprintf(err, ERR_LEN, "--comm %s with --rendezvous %s: without MPI only the nccl transport "
                 "runs", c, o->rendezvous);
        return NULL;
    }
    return c;
}

static Comm* create_device_comm(const Mesh* mesh, int num_layers, const char* transport,
                                const TransportOptions* o) {
    DeviceCommOptions d = {transport, uses_mpi(o) ? "mpi" : o->rendezvous, "",
                           o->rendezvous_timeout, o->comm_timeout};
    char key[256], err[ERR_LEN];
    if (!uses_mpi(o)) {
        if (rendezvous_run_key(key, sizeof key, o->rendezvous_id, err) != 0)
            fail_msg("--rendezvous-id: %s", err);
        d.run_key = key;
    }
    return comm_device_create(mesh, num_layers, &d);
}

Comm* transport_create(const Mesh* mesh, int num_layers, const char* transport,
                       const TransportOptions* o) {
    Comm* comm = strcmp(transport, "mpi") == 0 ? comm_mpi_create(mesh, num_layers)
                                               : create_device_comm(mesh, num_layers, transport, o);
    comm_set_timeout(comm, o->comm_timeout);
    return comm;
}
