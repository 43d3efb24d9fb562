// The CUDA backend's module-owned context (model/backend_kernels_cuda.cu), shared by the three
// CUDA backend sources: the layer kernels of model/layers.h (backend_kernels_cuda.cu), the
// single-device attention layer (attention/attention_local_cuda.cu) and the trainer's backend
// functions of model/backend.h (backend_cuda.cu).
//
// One process drives one GPU through ONE stream: every kernel, memset and device-to-device copy
// of the backend is enqueued on it, in program order. A training step never makes the host wait:
// its loss and gradient norm stay on the device until the step's one read (gpt_scalars_fetch /
// gpt_scalars_wait: a copy into pinned memory and an event). Host code that reads other device
// results (a logits row, parameters and moments for checkpoints) synchronises the stream.
//
// The context is created on first use (the first backend call of the process: gpt_create's
// allocations) and lives until cuda_backend_shutdown (or the end of the process). It holds:
//   - the stream;
//   - the cuBLASLt MatmulContext (handle, 32 MiB workspace, plan cache, bias-gradient scratch);
//   - device scratch for encoder_backward_cuda and layernorm_backward_cuda, and the first pass's
//     partials of the gradient norm;
//   - the pinned host copy of a model's step scalars and the event that says it has arrived;
//   - the pinned staging ring of tokens_upload.
// Scratch sizes depend on the problem (B, T, C), which the layer interface passes call by call,
// so every buffer GROWS on demand: it is reallocated (after synchronising the stream) only when a
// call needs more than it holds. gpt_create sizes them for its passes (layers_reserve), so a
// training run allocates before its first step and never again; a later sampler (forward only,
// smaller) allocates nothing. The MatmulContext's bias-gradient scratch grows the same way (the
// context is re-created with the larger max_bias_oc, which drops the plan cache once).
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
    void* qk_norm_scratch;       // qk_norm_backward_cuda
    size_t qk_norm_scratch_bytes;
    double* norm_partials;       // (GLOBAL_NORM_MAX_BLOCKS) gpt_grad_sum_squares's first pass
    // gpt_scalars_fetch / gpt_scalars_wait: the pinned copy and its event.
    double* host_scalars;        // (GPT_NUM_SCALARS) pinned
    cudaEvent_t scalars_copied;  // recorded after the copy
    int scalars_pending;         // a fetch not yet waited for
    // tokens_upload's pinned staging ring: the host array is copied into a slot and the slot's
    // event is recorded after its copy. A slot whose copy has not run yet is never waited for: a
    // new slot is put in the ring before it, so the ring grows to the number of uploads between
    // two host synchronisations (3 per micro-batch in training) and no upload makes the host
    // wait, up to TOKEN_STAGING_MAX_SLOTS slots (past them an upload waits for its slot).
#define TOKEN_STAGING_MAX_SLOTS 64
    int* token_staging[TOKEN_STAGING_MAX_SLOTS];        // (token_staging_count) pinned host ints
    cudaEvent_t token_staged[TOKEN_STAGING_MAX_SLOTS];  // recorded after each slot's copy
    int token_slots;                                    // slots in the ring
    size_t token_staging_count;                         // ints per slot
    int token_slot;                                     // the next slot to use
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
