// The transport and the device of a program under MPI (model/backend_transport.h).
#include "model/backend_transport.h"

#include <string.h>

#include "comm/comm_mpi.h"
#include "comm/fail.h"
#include "model/backend.h"

const char* gpt_backend_transport(const TransportOptions* o, int world_size, int* device) {
    char err[ERR_LEN];
    const char* transport = transport_resolve(o, gpt_backend_host_memory(), gpt_backend_name(),
                                              world_size, err);
    if (!transport) fail_msg("%s", err);
    int local_rank, local_size;
    comm_mpi_node_rank(&local_rank, &local_size);
    if (gpt_backend_select_device(local_rank, local_size, strcmp(transport, "mpi-staged") == 0,
                                  device, err) != 0)
        fail_msg("%s", err);
    return transport;
}
