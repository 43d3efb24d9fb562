// The CUDA backend's module-owned context (model/backend_kernels_cuda.cu), shared by the three
// CUDA backend sources: the layer kernels of model/layers.h (backend_kernels_cuda.cu), the
// single-device attention layer (attention/attention_local_cuda.cu) and the trainer's backend
// functions of model/backend.h (backend_cuda.cu).
//
// One process drives one GPU through ONE stream: every kernel, memset and device-to-device copy
// of the backend is enqueued on it, in program order, so no event is ever needed. Host code
// that reads device results (the loss sum, a logits row, the gradient norm, parameters and
// moments for checkpoints) synchronises that stream first.
//
// The context is created on first use (the first backend call of the process: gpt_create's
// allocations) and lives until cuda_backend_shutdown (or the end of the process). It holds:
//   - the stream;
//   - the cuBLASLt MatmulContext (handle, 32 MiB workspace, plan cache, bias-gradient scratch);
//   - device scratch for encoder_backward_cuda and layernorm_backward_cuda, and an fp32 per-token
//     loss buffer for the fused classifier's backward (whose losses the layer interface drops);
//   - a host buffer the per-token losses are copied into to be summed.
// Scratch sizes depend on the problem (B, T, C), which the layer interface passes call by call,
// so every buffer GROWS on demand: it is reallocated (after synchronising the stream) only when a
// call needs more than it holds. A training run therefore allocates during its first step and
// never again; a later sampler (forward only, smaller) allocates nothing. The MatmulContext's
// bias-gradient scratch grows the same way (the context is re-created with the larger max_bias_oc,
// which drops the plan cache once).
#pragma once
#include <stddef.h>

#include "model/cuda_precision.cuh"
#include "model/matmul_cuda.cuh"

typedef struct {
    int ready;
    cudaStream_t stream;
    MatmulContext matmul;        // max_bias_oc grows on demand
    void* encoder_scratch;       // encoder_backward_cuda
    size_t encoder_scratch_bytes;
    void* layernorm_scratch;     // layernorm_backward_cuda
    size_t layernorm_scratch_bytes;
    float* losses;               // (N) per-token losses written by the classifier's backward
    size_t losses_bytes;
    float* host_losses;          // (N) host copy of the per-token losses of a forward
    size_t host_losses_count;
    // tokens_upload's pinned staging ring: the host array is copied into a slot and the slot's
    // event is recorded after its copy, so an upload waits only for the copy that last used its
    // slot (TOKEN_STAGING_SLOTS uploads earlier), not for the whole stream.
#define TOKEN_STAGING_SLOTS 4
    int* token_staging[TOKEN_STAGING_SLOTS];        // (token_staging_count) pinned host ints
    cudaEvent_t token_staged[TOKEN_STAGING_SLOTS];  // recorded after each slot's copy
    size_t token_staging_count;
    int token_slot;                                 // the next slot to use
} CudaBackendContext;

// The context, created on first use.
CudaBackendContext* cuda_backend_context(void);
// Its stream (creates the context on first use).
cudaStream_t cuda_backend_stream(void);
// Waits for everything enqueued on the stream.
void cuda_backend_sync(void);
// Releases the context (synchronising first); a later call creates a fresh one.
void cuda_backend_shutdown(void);

// Converts n fp32 values to floatX (round to nearest) on the backend stream: out may not alias in.
void cuda_backend_float_to_floatx(floatX* out, const float* in, size_t n);
