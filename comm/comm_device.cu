// comm_device_create: picks the device transport and orders it on the backend's stream.
#include "comm/comm_device_impl.h"

#include <string.h>

#include "model/backend_kernels_cuda.cuh"

Comm* comm_device_create(const Mesh* mesh, int num_layers, const DeviceCommOptions* o) {
    cudaStream_t compute = cuda_backend_stream();
    if (strcmp(o->transport, "nccl") == 0) return comm_nccl_create(mesh, num_layers, o, compute);
    if (strcmp(o->transport, "mpi-staged") == 0) return comm_staged_create(mesh, num_layers, compute);
    fail_msg("--comm %s: expected mpi, nccl or mpi-staged", o->transport);
}
