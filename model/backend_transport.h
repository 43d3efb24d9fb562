// What a program that moves backend buffers between MPI ranks sets up first (build/generate,
// tools/bench_collectives): the transport (--comm) for this backend and world, and this rank's
// device, chosen before any other backend call (the trainer does the same in train/run_setup.c,
// with its own launchers and messages).
#pragma once
#include "comm/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

// The resolved transport's name; *device gets this rank's GPU (-1 on the CPU). Under MPI (the
// node-local rank picks the GPU). Ends the job with a one-line message when the transport cannot
// run on this backend or the node has fewer GPUs than ranks (and the transport cannot share one).
const char* gpt_backend_transport(const TransportOptions* o, int world_size, int* device);

#ifdef __cplusplus
}
#endif
