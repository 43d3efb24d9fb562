// The bf16 CUDA attention backward's workspace (attention/partial_attention.cu), in bytes: the
// fp32 dQ accumulator, only for a call that writes floatX dQ (the single-device form), then one
// semaphore per (sequence, head, query tile) that orders the dQ adds. Plain C: the memory budget
// (model/memory_budget.c) counts by the same functions the launcher allocates by.
#pragma once
#include <stddef.h>

enum { FLASH_BWD_QUERY_TILE = 64 };   // queries per backward tile (attention/flash_backward.cuh)

static inline size_t flash_bwd_accumulator_bytes(size_t B, size_t Tq, size_t C, int floatx_dq) {
    return floatx_dq ? B * Tq * C * sizeof(float) : 0;
}

static inline size_t flash_bwd_semaphore_bytes(size_t B, size_t NH, size_t Tq) {
    return B * NH * ((Tq + FLASH_BWD_QUERY_TILE - 1) / FLASH_BWD_QUERY_TILE) * sizeof(unsigned);
}
