// What the CUDA backend's graphs (model/backend_cuda.cu) ask of its timeline clock
// (model/timeline_clock_cuda.cu): which captured mark an event record node records, and pointing
// a launch's nodes at the events of the step slots the timeline gave it (comm/timeline.h, "CUDA
// GRAPHS").
#pragma once
#include "model/cuda_common.cuh"

// The captured mark (0, 1, ...) whose event `event` is; -1 when it is none of the clock's.
int cuda_clock_captured_index(cudaEvent_t event);
// Points each of the n event record nodes of exec (nodes[i], recording captured mark index[i]) at
// the event of slot first + index[i] for the launches issued from now on; first < 0: back at the
// captured marks' own events, which nothing reads.
void cuda_clock_bind(cudaGraphExec_t exec, const cudaGraphNode_t* nodes, const int* index, int n,
                     int first);
