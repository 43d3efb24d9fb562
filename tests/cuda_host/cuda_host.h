// Host runtime: the subset of CUDA, cuBLAS/cuBLASLt and cuRAND that the project's .cu sources
// use, so that they compile with the host C++ compiler (-x c++ -DCUDA_HOST) and run on the CPU.
// Include it through model/cuda_common.cuh, never directly. README.md in this folder lists what
// is supported and what is refused.
//
// How a launch runs (block_exec.cpp):
// - It is queued on its stream; the stream scheduler (stream_sched.cpp) runs its blocks at a host
//   synchronisation point, interleaved with other streams' work in a seeded random order
//   (CUDA_HOST_SCHEDULE_SEED; CUDA_HOST_SCHEDULE=inorder runs each operation when issued).
// - Blocks are spread over OpenMP threads (OMP_NUM_THREADS=1 runs them one after another), in
//   windows of 8 started in a seeded order; one OS thread runs one block at a time, to
//   completion. A block stalled in a spin-wait (nanosleep_ns) starts a helper thread for the
//   launch's other blocks.
// - The threads of a block are cooperative fibers on that OS thread, each with its own stack
//   (64 KiB by default, CUDA_HOST_STACK_KB to change, a guard page below it), reused across
//   blocks. A fiber runs until it reaches a barrier (__syncthreads, a warp collective, a PTX twin
//   call) or returns; then the next fiber runs. So code between barriers runs one thread after
//   another in thread order, and a missing barrier gives wrong results reproducibly.
// - Static __shared__ variables are thread_local: one copy per OS thread, which is one copy per
//   running block, shared by its fibers. They are not cleared between blocks (neither are they on
//   a GPU). Dynamic shared memory (DYNAMIC_SHARED) is a per-OS-thread buffer filled with 0xFF
//   bytes before each block.
// - Warp collectives are rounds in which the lanes of the mask each deposit a value and wait for
//   the others; lanes that do not exist (a partial last warp) read as 0xFF.. bytes.
#pragma once
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "tests/cuda_host/host_types.h"
#include "tests/cuda_host/host_bf16.h"
#include "tests/cuda_host/host_runtime.h"
#include "tests/cuda_host/host_device.h"
#include "tests/cuda_host/host_ptx.h"
#include "tests/cuda_host/host_ptx_sm90.h"
#include "tests/cuda_host/host_cublas.h"
#include "tests/cuda_host/host_curand.h"
