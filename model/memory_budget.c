// The memory budget per device (model/memory_budget.h): each term by the formula of the code that
// allocates it, so that the host runtime's count of cudaMalloc'ed bytes matches it exactly.
#include "model/memory_budget.h"

#include <stdio.h>
#include <string.h>

static const char* const term_names[MEMORY_NTERMS] = {
    "parameters", "gradients", "fp32 master weights", "AdamW m, v", "ZeRO-1 shard scratch",
    "activations (saved)", "backward scratch", "layer workspace", "attention scratch",
    "attention dQ workspace", "tokens",
    "step scalars", "gradient buckets", "transport scratch", "sampler (rank 0)",
    "cuBLASLt workspace", "host parameter copy"};

const char* memory_term_name(MemoryTerm t) {
    return t >= 0 && t < MEMORY_NTERMS ? term_names[t] : "?";
}

MemoryTerm memory_largest_term(const MemoryBudget* b) {
    int best = 0;
    for (int i = 1; i < MEMORY_NTERMS; i++)
        if (b->bytes[i] > b->bytes[best]) best = i;
    return (MemoryTerm)best;
}

const char* memory_format_bytes(size_t bytes, char* out, size_t len) {
    if (bytes >= (size_t)1 << 30) snprintf(out, len, "%.2f GiB", bytes / 1073741824.0);
    else if (bytes >= (size_t)1 << 20) snprintf(out, len, "%.2f MiB", bytes / 1048576.0);
    else snprintf(out, len, "%zu bytes", bytes);
    return out;
}

int memory_schedule_parse(const char* name, MemorySchedule* out) {
    static const char* const names[] = {"2d", "2d-overlap", "ring", "striped", "zigzag"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (MemorySchedule)i;
            return 0;
        }
    return -1;
}

// Constants of the CUDA backend's allocations (the sources named beside each).
enum {
    CUBLASLT_WORKSPACE = 32 << 20,    // model/matmul.cu matmul_context_init: 0 picks 32 MiB
    DBIAS_MAX_CHUNKS = 128,           // model/matmul_cuda.cuh MATMUL_DBIAS_MAX_CHUNKS
    NORM_PARTIALS = 1024,             // model/optim_cuda.cuh GLOBAL_NORM_MAX_BLOCKS (doubles)
    LN_BWD_ROWS = 4,                  // model/layernorm.cu
    LN_BWD_TARGET_BLOCKS = 512,       // model/layernorm.cu
    NCCL_SCRATCH = 1 << 16,           // comm/comm_nccl.cu NCCL_HOST_SCRATCH_BYTES
    FA_BWD_BQ = 64,                   // attention/flash_backward.cuh: queries per backward tile
    TOKEN_BYTES = 4,                  // int token ids
    SCALARS = 3                       // GPT_NUM_SCALARS doubles
};

// model/gpt.c gpt_num_params in closed form: wte, wpe, 12 C^2 + 13 C per layer, lnf.
static size_t num_params(const GPTConfig* g) {
    const size_t C = g->C, L = g->L;
    return (size_t)g->Vp * C + (size_t)g->max_T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// model/layernorm.cu layernorm_backward_scratch_bytes: fp32 partials of (dweight, dbias) per
// block of rows, then the tickets (one per 16 blocks and one more; 16-byte padded).
static size_t layernorm_scratch(size_t N, size_t C) {
    size_t rows = ceil_div(ceil_div(N, LN_BWD_TARGET_BLOCKS), LN_BWD_ROWS) * LN_BWD_ROWS;
    if (rows < LN_BWD_ROWS) rows = LN_BWD_ROWS;
    return ceil_div(N, rows) * 2 * C * 4 + ceil_div(ceil_div(ceil_div(N, rows), 16) + 1, 4) * 16;
}

// model/encoder.cu encoder_backward_scratch_bytes: two u64 sort keys per row, two fp32 segment
// sums per 32 rows, a ticket per 32 rows and 32 channels (16-byte padded).
static size_t encoder_scratch(size_t N, size_t C) {
    return N * 2 * 8 + ceil_div(N, 32) * 2 * C * 4 + ceil_div(ceil_div(N, 32) * ceil_div(C, 32) * 4, 16) * 16;
}

// model/backend_kernels_cuda.cu layers_reserve: the encoder backward's scratch, the LayerNorm
// backward partials, the bias-gradient scratch of the widest bias (4C: one floatX row and
// DBIAS_MAX_CHUNKS fp32 rows); the gradient norm's partials (first step).
static size_t layer_workspace(const MemoryConfig* c) {
    if (!c->cuda) return 0;   // the CPU layers allocate nothing
    const size_t N = (size_t)c->B * c->T, C4 = 4 * (size_t)c->cfg.C;
    return encoder_scratch(N, c->cfg.C) + layernorm_scratch(N, c->cfg.C) + C4 * c->real_bytes +
           DBIAS_MAX_CHUNKS * C4 * 4 + NORM_PARTIALS * 8;
}

static size_t max2(size_t a, size_t b) { return a > b ? a : b; }

// attention/attention2d.c attention2d_create: S = B Tl C values, L = B NH Tl rows of statistics.
static size_t attention2d_scratch(const MemoryConfig* c, size_t S, size_t L) {
    const size_t pq = c->pq, pkv = c->pkv, r = c->real_bytes, a = c->stat_bytes;
    const size_t send = max2(max2(S * r, pkv * (S + L) * a), max2(2 * S * r, pkv * S * a));
    const size_t recv = max2(max2(pkv * S * r, pkv * (S + L) * a), max2(2 * pkv * S * r, S * a));
    const size_t kv_layers = c->keep_kv ? (size_t)c->cfg.L : 1;   // kept K/V, or one column
    return send + recv + a * 2 * L + a * 2 * pkv * L + r * 2 * pq * S + a * 2 * pq * S +
           a * 2 * S + 2 * r * 2 * S + r * kv_layers * 2 * pq * S + 2 * r * pkv * S +
           a * pkv * S + a * S + 2 * a * pkv * L + a * L + a * pkv * S + a * 2 * pq * S +
           a * 2 * S;
}

// attention/attention2d_overlap.c attention2d_overlap_create.
static size_t overlap_scratch(const MemoryConfig* c, size_t S, size_t L) {
    const size_t pq = c->pq, pkv = c->pkv, r = c->real_bytes, a = c->stat_bytes;
    return r * 2 * S + r * pkv * 2 * S + a * pkv * 2 * L + r * pq * 2 * S + a * pkv * (S + L) +
           a * pq * 2 * S + 2 * a * (S + L) + 2 * a * 2 * S;
}

// attention/ring.c attention_ring_create: two K|V blocks, three dK|dV, O, O step, dQ, and LSE
// rows (step, D; zigzag's two runs one more).
static size_t ring_scratch(const MemoryConfig* c, size_t S, size_t L) {
    const size_t r = c->real_bytes, a = c->stat_bytes;
    const size_t lse_rows = c->schedule == MEMORY_ATTN_ZIGZAG ? 3 : 2;
    return 2 * r * 2 * S + 3 * a * 2 * S + 3 * a * S + lse_rows * a * L;
}

// The attention layer's scratch for B sequences of T local tokens.
static size_t attention_scratch(const MemoryConfig* c, int B, int T, int P) {
    const size_t S = (size_t)B * T * c->cfg.C, L = (size_t)B * c->cfg.NH * T;
    if (P == 1) return L * c->stat_bytes;   // local: the backward's rowsum(dO * O)
    switch (c->schedule) {
    case MEMORY_ATTN_2D: return attention2d_scratch(c, S, L);
    case MEMORY_ATTN_2D_OVERLAP: return overlap_scratch(c, S, L);
    default: return ring_scratch(c, S, L);
    }
}

// attention/partial_attention.cu (bf16): a backward call of Tq queries adds dQ into one fp32
// accumulator (only where it writes floatX dQ: the single-device call) in an order set by one
// semaphore per (sequence, head, query tile). The workspace grows to the largest call's and stays.
static size_t dq_workspace(const MemoryConfig* c, int B, size_t Tq, int local) {
    const size_t acc = local ? (size_t)B * Tq * c->cfg.C * 4 : 0;
    return acc + (size_t)B * c->cfg.NH * ceil_div(Tq, FA_BWD_BQ) * 4;
}

// The largest backward call of the schedule: local T x T; 2d one row of pkv Tl queries against
// a column of pq Tl keys; 2d-overlap Tl x Tl pairs; the ring Tl x Tl blocks (zigzag: halves).
static size_t attention_dq(const MemoryConfig* c, int B, int T, int P) {
    if (!c->flash_bwd) return 0;
    if (P == 1) return dq_workspace(c, B, T, 1);
    switch (c->schedule) {
    case MEMORY_ATTN_2D: return dq_workspace(c, B, (size_t)c->pkv * T, 0);
    case MEMORY_ATTN_ZIGZAG: return dq_workspace(c, B, T / 2, 0);
    default: return dq_workspace(c, B, T, 0);
    }
}

// Saved activations of B x T tokens, real and statistics, as model/activations.c lays them out.
static size_t activation_bytes(const MemoryConfig* c, int B, int T, GptRecompute r) {
    size_t nreal, nstat;
    ActivationTensors unused;
    gpt_activation_layout(&c->cfg, B, T, r, NULL, NULL, &unused, &nreal, &nstat);
    return nreal * c->real_bytes + nstat * c->stat_bytes;
}

// train/sampler.c: gpt_create_shared on 1 x context tokens (forward only, no gradients), its
// tokens and scalars, and a local attention layer of that length.
static size_t sampler_bytes(const MemoryConfig* c) {
    if (!c->sampler) return 0;
    const int T = c->cfg.max_T;
    return activation_bytes(c, 1, T, GPT_FORWARD_ONLY) + 2 * (size_t)T * TOKEN_BYTES +
           SCALARS * 8 + (size_t)c->cfg.NH * T * c->stat_bytes;
}

// Parameters, gradients, master weights and the optimizer: train/run_setup.c pads the flat
// buffers to a multiple of the world under ZeRO-1 and gives each rank one shard, whose master
// weights alone the CUDA backend keeps (optimizer_create).
static void optimizer_terms(const MemoryConfig* c, size_t* b) {
    const size_t world = (size_t)c->dp * c->pq * c->pkv, n = num_params(&c->cfg);
    const size_t pad = c->zero ? world : 1, padded = ceil_div(n, pad) * pad;
    const size_t shard = c->zero ? padded / world : n;
    b[MEMORY_PARAMS] = padded * c->real_bytes;
    b[MEMORY_GRADS] = padded * c->real_bytes;
    b[MEMORY_MASTER] = shard * c->master_bytes;   // ZeRO-1: the optimizer's shard only
    b[MEMORY_ADAMW] = 2 * shard * 4;
    b[MEMORY_ZERO_SHARD] = c->zero ? shard * c->real_bytes : 0;
}

void memory_budget(const MemoryConfig* c, MemoryBudget* out) {
    memset(out, 0, sizeof *out);
    size_t* b = out->bytes;
    const size_t BT = (size_t)c->B * c->T, BTC = BT * c->cfg.C;
    optimizer_terms(c, b);
    b[MEMORY_ACTIVATIONS] = activation_bytes(c, c->B, c->T, c->recompute);
    b[MEMORY_BACKWARD] = (1 + 1 + 4 + 4) * BTC * c->real_bytes;
    b[MEMORY_LAYER_WORKSPACE] = layer_workspace(c);
    b[MEMORY_ATTENTION] = attention_scratch(c, c->B, c->T, c->pq * c->pkv);
    b[MEMORY_ATTENTION_DQ] = attention_dq(c, c->B, c->T, c->pq * c->pkv);
    b[MEMORY_TOKENS] = 2 * BT * TOKEN_BYTES;
    b[MEMORY_SCALARS] = SCALARS * 8;
    b[MEMORY_GRAD_BUCKETS] = 0;
    b[MEMORY_COMM] = c->nccl ? NCCL_SCRATCH : 0;
    b[MEMORY_SAMPLER] = sampler_bytes(c);
    b[MEMORY_WORKSPACE] = c->cuda ? CUBLASLT_WORKSPACE : 0;
    b[MEMORY_HOST_PARAMS] = c->cuda ? 0 : num_params(&c->cfg) * sizeof(float);
    for (int i = 0; i < MEMORY_NTERMS; i++) out->total += b[i];
}
