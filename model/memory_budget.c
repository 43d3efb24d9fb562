// The memory budget per device (model/memory_budget.h): each term by the formula of the code that
// allocates it, so that the host runtime's count of cudaMalloc'ed bytes matches it exactly.
#include "model/memory_budget.h"

#include "attention/flash_workspace.h"

#include <stdio.h>
#include <string.h>

#include "attention/dist_scratch.h"
#include "model/layer_scratch.h"
#include "model/muon.h"
#include "model/param_staging.h"

static const char* const term_names[MEMORY_NTERMS] = {
    "parameters", "gradients", "fp32 master weights", "AdamW m, v", "Muon scratch",
    "ZeRO-1 shard scratch", "parameter staging",
    "activations (saved)", "backward scratch", "layer workspace", "attention scratch",
    "attention dQ workspace", "attention GQA workspace", "tokens",
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
    static const char* const names[] = {"2d", "2d-overlap", "ring", "striped", "zigzag", "ulysses",
                                        "usp"};
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
    NCCL_SCRATCH = 1 << 16,           // comm/comm_nccl.cu NCCL_HOST_SCRATCH_BYTES
    TOKEN_BYTES = 4,                  // int token ids
    SCALARS = 5                       // GPT_NUM_SCALARS doubles
};

// model/gpt.c gpt_num_params in closed form: wte, wpe (none under RoPE), per layer the qkv
// projection (W = 3C without grouped-query attention) C W + W, the output projection C^2 + C,
// the MLP C FC + FC + F C + C (FC = F, or 2F under SwiGLU; F = 4C in GPT: 8 C^2 + 5C; the
// biases W, C, FC and C only where the linear layers have them, W alone under qkv_bias) and two
// norms of C weights and NB biases (C; none under RMSNorm), and QK-norm's two of HS weights and
// biases (none without it; no biases under RMSNorm); lnf; an untied classifier's Vp C.
static size_t num_params(const GPTConfig* g) {
    const size_t C = g->C, L = g->L, W = gpt_qkv_width(g), F = gpt_ffn_hidden(g);
    const size_t FC = gpt_fc_width(g), NB = gpt_norm_bias(g), LB = gpt_linear_bias(g);
    const size_t QB = gpt_qkv_bias(g);   // LB, or 1 under qkv_bias
    const size_t QK = (size_t)gpt_qk_norm_weight(g) + (size_t)gpt_qk_norm_bias(g);
    return (size_t)g->Vp * C * (1 + (size_t)g->untied_classifier) +
           (size_t)gpt_position_rows(g) * C +
           L * (C * W + C * C + C * FC + F * C + QB * W + LB * (C + FC + C) + 2 * (C + NB) +
                2 * QK) + C + NB;
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// model/backend_kernels_cuda.cu layers_reserve: the encoder backward's scratch and the LayerNorm
// backward partials (model/layer_scratch.h), QK-norm's backward partials (under it), the bias-gradient scratch of the widest bias
// (gpt_widest_row, 4C in GPT: one floatX row and DBIAS_MAX_CHUNKS fp32 rows); the gradient norm's
// partials (first step).
static size_t layer_workspace(const MemoryConfig* c) {
    if (!c->cuda) return 0;   // the CPU layers allocate nothing
    const size_t wide = (size_t)gpt_widest_row(&c->cfg);
    const size_t qk = c->cfg.qk_norm
                          ? qk_norm_backward_scratch_bytes(c->B * c->T, c->cfg.C / c->cfg.NH) : 0;
    return encoder_backward_scratch_bytes(c->B, c->T, c->cfg.C) +
           layernorm_backward_scratch_bytes(c->B * c->T, c->cfg.C) + qk + wide * c->real_bytes +
           DBIAS_MAX_CHUNKS * wide * 4 + NORM_PARTIALS * 8;
}

// The attention layer's scratch for B sequences of T local tokens: the schedules' create functions
// (attention/attention2d.c, attention2d_overlap.c, ring.c, ulysses.c) by attention/dist_scratch.h.
static size_t attention_scratch(const MemoryConfig* c, int B, int T, int P) {
    const size_t S = (size_t)B * T * c->cfg.C, L = (size_t)B * c->cfg.NH * T;
    const size_t Skv = S / c->cfg.NH * gpt_kv_heads(&c->cfg);
    const size_t r = c->real_bytes, a = c->stat_bytes, pq = c->pq, pkv = c->pkv;
    if (P == 1) return L * a;   // local: the backward's rowsum(dO * O)
    switch (c->schedule) {
    case MEMORY_ATTN_2D: {
        Attention2DScratch z;   // the 2d create keeps every layer's K/V, or one column's
        attention2d_scratch(&z, S, Skv, L, r, a, pq, pkv, c->keep_kv ? (size_t)c->cfg.L : 0);
        return attention2d_scratch_total(&z);
    }
    case MEMORY_ATTN_2D_OVERLAP: {
        Attention2DOverlapScratch z;
        attention2d_overlap_scratch(&z, S, Skv, L, r, a, pq, pkv, c->flash_kernels);
        return attention2d_overlap_scratch_total(&z);
    }
    case MEMORY_ATTN_ULYSSES:
    case MEMORY_ATTN_USP: {   // USP: no sums of its own, the row's Striped ring on as much
        const int usp = c->schedule == MEMORY_ATTN_USP;
        UlyssesScratch z;
        RingScratch ring;
        ulysses_scratch(&z, S, Skv, L, r, a, usp);
        ring_scratch(&ring, S, Skv, L, r, a, 1, c->flash_kernels);
        return ulysses_scratch_total(&z) + (usp ? ring_scratch_total(&ring) : 0);
    }
    default: {
        RingScratch z;   // zigzag: two runs of positions per rank
        ring_scratch(&z, S, Skv, L, r, a, c->schedule == MEMORY_ATTN_ZIGZAG ? 2 : 1,
                     c->flash_kernels);
        return ring_scratch_total(&z);
    }
    }
}

// attention/flash_workspace.h: a backward call of Tq queries (local: the single-device call,
// which writes floatX dQ through an fp32 accumulator). The workspace grows to the largest call's
// and stays.
// The largest attention call of the schedule (heads, queries, keys): local T x T; 2d one row of
// pkv Tl queries against a column of pq Tl keys; 2d-overlap Tl x Tl pairs; the ring Tl x Tl blocks
// (zigzag: halves); Ulysses all T = P Tl positions of NH / P heads (unchunked); USP the ring's
// pq Tl positions of NH / pq heads.
typedef struct {
    size_t NH, Tq, Tk;
} LargestCall;
static LargestCall largest_call(const MemoryConfig* c, int T, int P) {
    LargestCall k = {(size_t)c->cfg.NH, (size_t)T, (size_t)T};
    if (P == 1) return k;
    if (c->schedule == MEMORY_ATTN_2D) k.Tq = (size_t)c->pkv * T, k.Tk = (size_t)c->pq * T;
    else if (c->schedule == MEMORY_ATTN_ZIGZAG) k.Tq = k.Tk = (size_t)T / 2;
    else if (c->schedule == MEMORY_ATTN_ULYSSES) k.NH /= P, k.Tq = k.Tk = (size_t)P * T;
    else if (c->schedule == MEMORY_ATTN_USP) k.NH /= c->pq, k.Tq = k.Tk = (size_t)c->pq * T;
    return k;
}

// The bf16 backward's dQ workspace for that call: its semaphores, and the fp32 dQ accumulator of
// the single-device form, which writes floatX dQ (not under grouped-query attention: the widened
// call's partial form, whose fp32 dQ is the GQA workspace's, attention_gqa).
static size_t attention_dq(const MemoryConfig* c, int B, int T, int P) {
    if (!c->flash_kernels) return 0;
    const LargestCall k = largest_call(c, T, P);
    const int local = P == 1 && gpt_kv_heads(&c->cfg) == c->cfg.NH;
    const size_t HS = c->cfg.C / c->cfg.NH;
    return flash_bwd_accumulator_bytes(B, k.Tq, k.NH * HS, local) +
           flash_bwd_semaphore_bytes(B, k.NH, k.Tq);
}

// Grouped-query attention on CUDA (attention/flash_workspace.h): the largest call's K|V widened
// to its query heads and, for the backward, its widened fp32 gradients (with dQ in the
// single-device bf16 form). One workspace per stream, so the sampler's forward (1 x context, all
// heads) shares it: the larger of the two.
static size_t attention_gqa(const MemoryConfig* c, int B, int T, int P) {
    const GPTConfig* g = &c->cfg;
    if (!c->cuda || gpt_kv_heads(g) == g->NH) return 0;
    const size_t HS = g->C / g->NH, r = c->real_bytes;
    const LargestCall k = largest_call(c, T, P);
    const int floatx_dq = P == 1 && c->flash_kernels;
    const size_t train = gqa_kv_bytes(B, k.Tk, k.NH, HS, r) +
                         gqa_grad_bytes(B, k.Tq, k.Tk, k.NH, HS, floatx_dq);
    const size_t sampler = c->sampler ? gqa_kv_bytes(1, g->max_T, g->NH, HS, r) : 0;
    return train > sampler ? train : sampler;
}

// Saved activations of B x T tokens, real and statistics, as model/activations.c lays them out.
static size_t activation_bytes(const MemoryConfig* c, int B, int T, GptRecompute r, int layers) {
    size_t nreal, nstat;
    ActivationTensors unused;
    gpt_activation_layout(&c->cfg, B, T, r, layers, NULL, NULL, &unused, &nreal, &nstat);
    return nreal * c->real_bytes + nstat * c->stat_bytes;
}

// train/sampler.c: gpt_create_shared on 1 x context tokens (forward only, no gradients), its
// tokens and scalars, and a local attention layer of that length.
static size_t sampler_bytes(const MemoryConfig* c) {
    if (!c->sampler) return 0;
    const int T = c->cfg.max_T;
    return activation_bytes(c, 1, T, GPT_FORWARD_ONLY, 0) + 2 * (size_t)T * TOKEN_BYTES +
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
    b[MEMORY_PARAM_STAGING] = c->master_bytes ? param_staging_floats(padded, c->param_chunk) * sizeof(float) : 0;
    // m and v of every parameter; under Muon both of the tensors AdamW keeps, and m of the
    // matrices: under dist_muon of muon_rank's, or of the rank that owns the most
    b[MEMORY_ADAMW] = 2 * shard * 4;
    if (c->muon) {
        const int split = !c->muon_whole_qkv, count = muon_matrix_count(&c->cfg, split);
        const int ranks = c->muon_ranks > 1 ? c->muon_ranks : 1;
        size_t owned = c->muon_rank >= 0
                           ? muon_owned_elements(&c->cfg, split, c->muon_rank % ranks, ranks) : 0;
        for (int r = 0; c->muon_rank < 0 && r < ranks && r < count; r++) {
            const size_t e = muon_owned_elements(&c->cfg, split, r, ranks);
            owned = e > owned ? e : owned;
        }
        b[MEMORY_ADAMW] = (2 * muon_v_elements(&c->cfg, n) + owned) * 4;
    }
    // CUDA: fp32, an even count, then U's sum of squares (a double); CPU: real, at least one.
    if (c->muon) {
        const size_t ns = muon_scratch_elements(&c->cfg);
        b[MEMORY_MUON] = c->cuda ? ((ns + 1) / 2 * 2 + 2) * 4 : (ns ? ns : 1) * c->real_bytes;
        size_t matrix, gram;   // the CPU's rounded inputs: a Gram matrix and a matrix
        muon_scratch_sizes(&c->cfg, &matrix, &gram);
        if (!c->cuda && c->muon_prec != MUON_PREC_HIGHEST)
            b[MEMORY_MUON] += (gram + matrix) * c->real_bytes;
    }
    b[MEMORY_ZERO_SHARD] = c->zero ? shard * c->real_bytes : 0;
}

void memory_budget(const MemoryConfig* c, MemoryBudget* out) {
    memset(out, 0, sizeof *out);
    size_t* b = out->bytes;
    const size_t BT = (size_t)c->B * c->T, BTC = BT * c->cfg.C;
    optimizer_terms(c, b);
    b[MEMORY_ACTIVATIONS] = activation_bytes(c, c->B, c->T, c->recompute, c->recompute_layers);
    // dresidual, dbuf_c (C each), dbuf_wide_a, dbuf_wide_b (gpt_widest_row each)
    b[MEMORY_BACKWARD] = (2 * BTC + 2 * BT * gpt_widest_row(&c->cfg)) * c->real_bytes;
    b[MEMORY_LAYER_WORKSPACE] = layer_workspace(c);
    b[MEMORY_ATTENTION] = attention_scratch(c, c->B, c->T, c->pq * c->pkv);
    b[MEMORY_ATTENTION_DQ] = attention_dq(c, c->B, c->T, c->pq * c->pkv);
    b[MEMORY_ATTENTION_GQA] = attention_gqa(c, c->B, c->T, c->pq * c->pkv);
    // inputs, targets, the inputs' rows by token (model/gpt.c); on the CPU also the host copy of
    // the inputs, the order and its sort scratch, which live in the same memory. A document mask
    // adds the bounds of the full sequences (starts and ends) and their host copy; positions
    // within documents, each local row's and the rows sorted by them, and a host copy with the
    // sort's scratch (gpt_set_documents).
    const size_t BT_full = BT * (size_t)c->pq * c->pkv;
    b[MEMORY_TOKENS] = ((c->cuda ? 3 : 6) * BT + (c->documents ? (c->cuda ? 2 : 4) * BT_full : 0) +
                        (c->reset_positions ? (c->cuda ? 2 : 5) * BT : 0)) * TOKEN_BYTES;
    b[MEMORY_SCALARS] = SCALARS * 8;
    b[MEMORY_GRAD_BUCKETS] = 0;
    b[MEMORY_COMM] = c->nccl ? NCCL_SCRATCH : 0;
    b[MEMORY_SAMPLER] = sampler_bytes(c);
    b[MEMORY_WORKSPACE] = c->cuda ? CUBLASLT_WORKSPACE : 0;
    b[MEMORY_HOST_PARAMS] = c->cuda ? 0 : num_params(&c->cfg) * sizeof(float);
    for (int i = 0; i < MEMORY_NTERMS; i++) out->total += b[i];
}

// The total with recompute covering the first `layers` layers of c (0: all).
static double total_with_layers(MemoryConfig c, int layers) {
    MemoryBudget b;
    c.recompute_layers = layers;
    memory_budget(&c, &b);
    return (double)b.total;
}

int memory_fewest_recompute_layers(const MemoryConfig* c, double limit) {
    const int L = c->cfg.L;
    if (total_with_layers(*c, 0) > limit) return -1;
    if (gpt_recompute_count(c->recompute, 0, L) <= 1) return 0;   // none, or a single layer
    int lo = 1, hi = L;   // hi fits
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (total_with_layers(*c, mid) <= limit) hi = mid;
        else lo = mid + 1;
    }
    return hi < L ? hi : 0;
}
