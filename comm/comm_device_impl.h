// Internal to the device transports (comm_device.cu, comm_nccl.cu, comm_staged.cu).
#pragma once
#include "comm/comm_device.h"
#include "model/cuda_common.cuh"

Comm* comm_nccl_create(const Mesh* mesh, int num_layers, const DeviceCommOptions* o,
                       cudaStream_t compute);
Comm* comm_staged_create(const Mesh* mesh, int num_layers, cudaStream_t compute);
