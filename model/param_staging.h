// The CUDA backend's parameter staging: one device buffer through which it moves the parameters
// that its fp32 master copy does not hold or that need scratch beside it (model/backend_cuda.cu):
// uploading a chunk outside a ZeRO-1 shard, gathering the shards for a checkpoint, and the two
// zeroed moment chunks of the re-rounding on resume. Allocated with the master copy and kept, so
// that the memory budget (model/memory_budget.c) counts it as resident, by this formula.
#pragma once
#include <stddef.h>

// Elements per chunk: 2^22 (16 MiB of fp32) on a GPU; 2^12 on the host runtime, so that the tests'
// tiny models cross chunk boundaries (the backend says which: gpt_backend_param_chunk).
enum { PARAM_STAGING_CHUNK = 1 << 22, PARAM_STAGING_CHUNK_HOST_RUNTIME = 1 << 12 };

// fp32 elements of the buffer: two chunks (the re-rounding's moments), or two copies of the
// parameters where they are fewer than a chunk.
static inline size_t param_staging_floats(size_t padded_params, size_t chunk) {
    return 2 * (padded_params < chunk ? padded_params : chunk);
}
