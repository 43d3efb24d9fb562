// The device scratch of the LayerNorm and encoder backward kernels, in bytes: the one formula the
// kernels lay their scratch out by (model/layernorm.cu, model/encoder.cu), the backend reserves
// (model/backend_kernels_cuda.cu, through model/layers_cuda.cuh) and the memory budget counts
// (model/memory_budget.c, linked without any CUDA object). Plain C, static inline: it compiles
// as C and as CUDA C++ (nvcc and the host runtime).
#pragma once
#include <stddef.h>

// LayerNorm backward: rows per step of the backward (one block reduction per step); row groups
// (about LN_BWD_TARGET_BLOCKS blocks: more blocks = more partials to add up, fewer = less
// parallelism); blocks per first-level reduction (the last block then reads ceil(G / 16) rows,
// not G).
static const int LN_BWD_ROWS = 4;
static const int LN_BWD_TARGET_BLOCKS = 512;
static const int LN_BWD_GROUP = 16;
// Encoder backward: rows per segment of a token's run of sorted rows (one row per lane).
static const int ENC_SEG = 32;
// QK-norm backward: tokens per block (every query and key head of them).
static const int QK_BWD_TOKENS = 16;

static inline long layer_scratch_ceil_div(long a, long b) { return (a + b - 1) / b; }

// Rows per block of the LayerNorm backward: a multiple of LN_BWD_ROWS giving about
// LN_BWD_TARGET_BLOCKS blocks. Depends on N only, so the summation order (and the result) does
// not depend on the GPU.
static inline int ln_bwd_rows_per_block(int N) {
    const long blocks_rows = layer_scratch_ceil_div(N, LN_BWD_TARGET_BLOCKS);
    const long rows = layer_scratch_ceil_div(blocks_rows, LN_BWD_ROWS) * LN_BWD_ROWS;
    return (int)(rows > LN_BWD_ROWS ? rows : LN_BWD_ROWS);
}

// The fp32 (dweight, dbias) partials of every block of rows: the scratch's first part.
static inline size_t ln_bwd_partial_bytes(int N, int C) {
    const long blocks = layer_scratch_ceil_div(N, ln_bwd_rows_per_block(N));
    return (size_t)blocks * 2 * (size_t)C * sizeof(float);
}

// Bytes of device scratch layernorm_backward_cuda needs for an (N, C) problem: the partials, then
// the tickets (one per group and the final one), padded to 16 bytes.
static inline size_t layernorm_backward_scratch_bytes(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    const long blocks = layer_scratch_ceil_div(N, ln_bwd_rows_per_block(N));
    const long groups = layer_scratch_ceil_div(blocks, LN_BWD_GROUP);
    return ln_bwd_partial_bytes(N, C) + (size_t)layer_scratch_ceil_div(groups + 1, 4) * 16;
}

// Bytes of device scratch qk_norm_backward_cuda needs for N tokens of head size HS: each block's
// fp32 partials of the four parameter gradients (dqw, dqb, dkw, dkb), HS each.
static inline size_t qk_norm_backward_scratch_bytes(int N, int HS) {
    if (N <= 0 || HS <= 0) return 0;
    return (size_t)layer_scratch_ceil_div(N, QK_BWD_TOKENS) * 4 * (size_t)HS * sizeof(float);
}

// Encoder backward scratch: the segment sums (2 rows of C floats per ENC_SEG slots) and the
// tickets (per ENC_SEG slots and 32 channels, the most channel blocks). The rows' order by token
// is not scratch: the caller uploads it (model/token_order.h).
static inline size_t enc_partial_bytes(long N, int C) {
    return (size_t)layer_scratch_ceil_div(N, ENC_SEG) * 2 * (size_t)C * sizeof(float);
}

// Bytes of device scratch encoder_backward_cuda needs for B*T rows of C channels.
static inline size_t encoder_backward_scratch_bytes(int B, int T, int C) {
    const long N = (long)B * T;
    if (N <= 0 || C <= 0) return 0;
    const size_t tickets = (size_t)layer_scratch_ceil_div(N, ENC_SEG) *
                           (size_t)layer_scratch_ceil_div(C, 32) * sizeof(unsigned);
    return enc_partial_bytes(N, C) +
           (size_t)layer_scratch_ceil_div((long)tickets, 16) * 16;
}
