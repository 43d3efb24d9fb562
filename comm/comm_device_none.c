// The CPU build's side of comm/comm_device.h: its buffers are host memory, which only the "mpi"
// transport moves.
#include "comm/comm_device.h"

#include "comm/fail.h"

Comm* comm_device_create(const Mesh* mesh, int num_layers, const DeviceCommOptions* o) {
    (void)mesh, (void)num_layers;
    fail_msg("--comm %s: the CPU trainer's buffers are host memory, moved by --comm mpi; the "
             "device transports (nccl, mpi-staged) belong to the CUDA trainer (build/train_gpt_cuda)",
             o->transport);
}
