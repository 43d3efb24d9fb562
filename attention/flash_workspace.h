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

// Grouped-query attention's workspace (partial_attention.cu, gqa_*), for a call of B sequences,
// Tq queries and Tk keys of NH query heads of HS channels: K and V widened to NH heads in the
// storage type (kv_elem bytes), rounded up to 256 bytes; then, for a backward, the fp32 dK and dV
// of the widened call, and before them its fp32 dQ when the call writes floatX dQ (the
// single-device form of the bf16 build).
enum { GQA_WORKSPACE_ALIGN = 256 };
static inline size_t gqa_kv_bytes(size_t B, size_t Tk, size_t NH, size_t HS, size_t kv_elem) {
    const size_t bytes = 2 * B * Tk * NH * HS * kv_elem;
    return (bytes + GQA_WORKSPACE_ALIGN - 1) / GQA_WORKSPACE_ALIGN * GQA_WORKSPACE_ALIGN;
}
static inline size_t gqa_grad_bytes(size_t B, size_t Tq, size_t Tk, size_t NH, size_t HS,
                                    int floatx_dq) {
    return ((floatx_dq ? B * Tq : 0) + 2 * B * Tk) * NH * HS * sizeof(float);
}
