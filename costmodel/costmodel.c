// The cost model (costmodel.h; formulas and assumptions in costmodel/README.md).
#include "costmodel/costmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_bounds.h"
#include "attention/dist_cost.h"
#include "comm/fail.h"
#include "comm/mesh.h"
#include "model/activations.h"
#include "model/muon.h"
#include "model/config.h"
#include "model/documents.h"
#include "model/param_staging.h"
#include "model/memory_budget.h"
#include "tools/kernel_costs.h"

static const char* const ALG_NAMES[COST_NALGS] = {"2d",      "2d-overlap", "ring",
                                                  "striped", "zigzag",     "ulysses", "usp"};

const char* cost_algorithm_name(CostAlgorithm a) {
    return a >= 0 && a < COST_NALGS ? ALG_NAMES[a] : "?";
}

int cost_algorithm_parse(const char* name) {
    for (int a = 0; a < COST_NALGS; a++)
        if (!strcmp(name, ALG_NAMES[a])) return a;
    return -1;
}

int cost_algorithm_is_ring(CostAlgorithm a) { return a >= COST_RING && a <= COST_ZIGZAG; }

int cost_algorithm_ignores_mesh(CostAlgorithm a) {
    return cost_algorithm_is_ring(a) || a == COST_ULYSSES;
}
static double dmax(double a, double b) { return a > b ? a : b; }

GPTConfig costmodel_gpt_config(const CostShape* s) {
    return (GPTConfig){.max_T = s->max_T, .V = s->V, .Vp = gpt_padded_vocab(s->V), .L = s->L,
                       .NH = s->NH, .C = s->C, .window = s->window,
                       .window_every = s->window_every, .kv_heads = s->kv_heads,
                       .rope_theta = s->rope_theta, .norm = s->norm, .mlp = s->mlp,
                       .ffn_hidden = s->ffn_hidden, .no_linear_bias = s->no_linear_bias,
                       .untied_classifier = s->untied_classifier, .qkv_bias = s->qkv_bias,
                       .qk_norm = s->qk_norm};
}

// Key/value heads (NH without grouped-query attention) and the qkv projection's width
// (C + 2 NKV HS: 3C without it), as model/config.h counts them.
static int kv_heads(const CostShape* s) { return s->kv_heads > 0 ? s->kv_heads : s->NH; }
static double qkv_width(const CostShape* s) {
    const GPTConfig cfg = costmodel_gpt_config(s);
    return gpt_qkv_width(&cfg);
}

double costmodel_num_params(const CostShape* s) {
    const GPTConfig cfg = costmodel_gpt_config(s);   // no position table under rotary positions
    const double classifier = s->untied_classifier ? (double)gpt_padded_vocab(s->V) * s->C : 0;
    // QK-norm: a weight (and a LayerNorm's bias) of HS for the queries and for the keys per layer
    const double qk_norm = 2.0 * s->L * (gpt_qk_norm_weight(&cfg) + gpt_qk_norm_bias(&cfg));
    return kernel_gpt_num_params_block(s->L, s->C, qkv_width(s), gpt_ffn_hidden(&cfg),
                                       gpt_fc_width(&cfg), gpt_norm_bias(&cfg),
                                       gpt_qkv_bias(&cfg), gpt_linear_bias(&cfg),
                                       gpt_padded_vocab(s->V),
                                       gpt_position_rows(&cfg)) + classifier + qk_norm;
}

double costmodel_flops_per_token(const CostShape* s, long T) {
    const GPTConfig cfg = costmodel_gpt_config(s);
    return gpt_flops_per_token(&cfg, costmodel_num_params(s), T);
}

// --- Kernel times --------------------------------------------------------------------------------

// Seconds of one kernel: Calculon's efficiency by the op's size on each unit, then the floor of
// kernel_costs (compute or memory, whichever is slower); a kernel the cluster has a measured
// curve for (kernel.NAME.efficiency) moves its bytes at that efficiency of the memory bandwidth
// (the curve came from its measured time: whatever bound it). byte_scale converts kernel_costs'
// bf16 storage bytes to this cluster's element size (1 for costs already in the cluster's units).
static double kernel_seconds(const Cluster* c, ClusterKernel id, KernelCost k, double byte_scale) {
    k.bytes *= byte_scale;
    const double gflop = k.flops / 1e9, mb = k.bytes / 1e6;
    if (id >= 0 && c->kernel_eff[id].n > 0)
        return k.bytes / (c->memory_bw * curve_efficiency(&c->kernel_eff[id], mb));
    const double tensor = c->matmul_flops * curve_efficiency(&c->matmul_eff, gflop);
    const double vector = c->vector_flops * curve_efficiency(&c->vector_eff, gflop);
    const double bw = c->memory_bw * curve_efficiency(&c->memory_eff, mb);
    return kernel_floor_seconds(k, tensor, vector, bw, NULL);
}

// kernel_costs' bytes are the bf16 build's (KERNEL_COST_X per stored element).
static double storage_scale(const Cluster* c) { return c->act_bytes / KERNEL_COST_X; }

static double ks(const Cluster* c, ClusterKernel id, KernelCost k) {
    return kernel_seconds(c, id, k, storage_scale(c));
}

typedef struct {
    double forward, backward;
} PhaseSeconds;

// Seconds of kernels summed by unit: GEMMs (tensor cores) and the rest.
typedef struct {
    double gemm, other;
} Tally;

static void add(Tally* t, const Cluster* c, ClusterKernel id, KernelCost k, double times) {
    const double s = times * ks(c, id, k);
    if (k.tensor) t->gemm += s;
    else t->other += s;
}

// Both GEMMs of a matmul backward, each at the efficiency of its own size.
static void add_gemm_backward(Tally* t, const Cluster* c, double N, double IC, double OC, int bias,
                              double times) {
    add(t, c, CK_GEMM, kernel_cost_matmul_backward_dinp(N, IC, OC), times);
    add(t, c, CK_GEMM, kernel_cost_matmul_backward_dweight(N, IC, OC, bias), times);
}

// Rotary positions' pass over the query and key heads of N rows, `times` times (none with learned
// positions), priced as the elementwise residual add is: memory-bound, in place.
static void add_rope(Tally* t, const Cluster* c, const CostShape* s, double N, double times) {
    if (!s->rope_theta) return;
    add(t, c, CK_RESIDUAL_FORWARD, kernel_cost_rope(N, s->NH, kv_heads(s), (double)s->C / s->NH),
        times);
}

// QK-norm's pass over the query and key heads of N tokens (model/qk_norm.cu), priced as a
// LayerNorm over rows of their (NH + NKV) HS channels (the same bytes; its raw copy is the
// backward's read): forward, or backward.
static void add_qk_norm(Tally* t, const Cluster* c, const CostShape* s, double N, int backward,
                        double times) {
    if (!s->qk_norm) return;
    const double width = (double)(s->NH + kv_heads(s)) * (s->C / s->NH);
    if (backward) add(t, c, CK_LAYERNORM_BACKWARD, kernel_cost_layernorm_backward(N, width), times);
    else add(t, c, CK_LAYERNORM_FORWARD, kernel_cost_layernorm_forward(N, width), times);
}

// The MLP's first layer and its activation, forward, for N tokens: the fc GEMM with GELU in its
// epilogue, or the fc GEMM then SwiGLU's pass (model/gpt.c mlp_up_forward).
static void add_mlp_up(Tally* t, const Cluster* c, const CostShape* s, double N, double times) {
    const GPTConfig cfg = costmodel_gpt_config(s);
    const int swiglu = s->mlp == GPT_MLP_SWIGLU, lb = gpt_linear_bias(&cfg);
    add(t, c, CK_GEMM, kernel_cost_matmul_forward(N, s->C, gpt_fc_width(&cfg), lb, !swiglu), times);
    if (swiglu)
        add(t, c, CK_GELU_BACKWARD, kernel_cost_swiglu_forward(N, gpt_ffn_hidden(&cfg)), times);
}

// Every token-local kernel of one micro-batch of N = B*Tl local tokens (model/gpt.c's sequence:
// fused residual + LayerNorm, GELU fused into the fc GEMM forward, gelu_backward beside fcproj's
// dinp GEMM; the classifier's one fused pass counted in forward). RMSNorm is priced as the
// LayerNorm (the same bytes), SwiGLU's passes at the GELU backward's rate (both elementwise).
static void token_local_tally(const Cluster* c, const CostShape* s, double N, double Tl,
                              Tally* fwd, Tally* bwd) {
    const double C = s->C, W = qkv_width(s), Vp = gpt_padded_vocab(s->V), V = s->V, L = s->L;
    const GPTConfig cfg = costmodel_gpt_config(s);
    const double F = gpt_ffn_hidden(&cfg), FC = gpt_fc_width(&cfg);
    const int lb = gpt_linear_bias(&cfg);   // the linear layers' biases (0: none)
    const int qb = gpt_qkv_bias(&cfg);      // the qkv projection's
    *fwd = *bwd = (Tally){0, 0};
    add(fwd, c, CK_ENCODER_FORWARD, kernel_cost_encoder_forward(N, Tl, C), 1);
    add(fwd, c, CK_LAYERNORM_FORWARD, kernel_cost_layernorm_forward(N, C), 1);
    add(fwd, c, CK_GEMM, kernel_cost_matmul_forward(N, C, W, qb, 0), L);
    add_qk_norm(fwd, c, s, N, 0, L);
    add_rope(fwd, c, s, N, L);
    add(fwd, c, CK_GEMM, kernel_cost_matmul_forward(N, C, C, lb, 0), L);
    add(fwd, c, CK_FUSED_RESIDUAL_LAYERNORM_FORWARD,
        kernel_cost_fused_residual_layernorm_forward(N, C), 2 * L);
    add_mlp_up(fwd, c, s, N, L);
    add(fwd, c, CK_GEMM, kernel_cost_matmul_forward(N, F, C, lb, 0), L);
    add(fwd, c, CK_GEMM, kernel_cost_matmul_forward(N, C, Vp, 0, 0), 1);
    add(fwd, c, CK_CLASSIFIER, kernel_cost_classifier(N, V, Vp), 1);
    add_gemm_backward(bwd, c, N, C, Vp, 0, 1);
    add(bwd, c, CK_LAYERNORM_BACKWARD, kernel_cost_layernorm_backward(N, C), 1 + 2 * L);
    add_gemm_backward(bwd, c, N, F, C, lb, L);
    add(bwd, c, CK_GELU_BACKWARD, s->mlp == GPT_MLP_SWIGLU ? kernel_cost_swiglu_backward(N, F)
                                                           : kernel_cost_gelu_backward(N * F), L);
    add_gemm_backward(bwd, c, N, C, FC, lb, L);
    add_gemm_backward(bwd, c, N, C, C, lb, L);
    add_rope(bwd, c, s, N, L);
    add_qk_norm(bwd, c, s, N, 1, L);
    add_gemm_backward(bwd, c, N, C, W, qb, L);
    add(bwd, c, CK_ENCODER_BACKWARD, kernel_cost_encoder_backward(N, Tl, C), 1);
}

static PhaseSeconds token_local_seconds(const Cluster* c, const CostShape* s, double N, double Tl) {
    Tally f, b;
    token_local_tally(c, s, N, Tl, &f, &b);
    return (PhaseSeconds){f.gemm + f.other, b.gemm + b.other};
}

void costmodel_token_local_split(const Cluster* c, const CostShape* s, double N, double Tl,
                                 double* gemm_s, double* other_s) {
    Tally f, b;
    token_local_tally(c, s, N, Tl, &f, &b);
    *gemm_s = f.gemm + b.gemm;
    *other_s = f.other + b.other;
}

// The forward kernels backward runs again for one layer of N local tokens (model/gpt.c's
// recompute_layer): the LayerNorms, the QKV projection and the FC projection with its GELU;
// full also the attention output projection, whose residual add rides on ln2 (the fused
// residual + LayerNorm instead of the plain one). The attention is never recomputed.
static double recompute_layer_seconds(const Cluster* c, const CostShape* s, double N,
                                      GptRecompute r) {
    if (r != GPT_RECOMPUTE_SELECTIVE && r != GPT_RECOMPUTE_FULL) return 0;
    const double C = s->C;
    const GPTConfig cfg = costmodel_gpt_config(s);
    const int lb = gpt_linear_bias(&cfg);
    Tally t = {0, 0};
    add(&t, c, CK_LAYERNORM_FORWARD, kernel_cost_layernorm_forward(N, C), 1);
    add(&t, c, CK_GEMM, kernel_cost_matmul_forward(N, C, qkv_width(s), gpt_qkv_bias(&cfg), 0), 1);
    add_qk_norm(&t, c, s, N, 0, 1);
    add_rope(&t, c, s, N, 1);
    if (r == GPT_RECOMPUTE_FULL) {
        add(&t, c, CK_GEMM, kernel_cost_matmul_forward(N, C, C, lb, 0), 1);
        add(&t, c, CK_FUSED_RESIDUAL_LAYERNORM_FORWARD,
            kernel_cost_fused_residual_layernorm_forward(N, C), 1);
    } else {
        add(&t, c, CK_LAYERNORM_FORWARD, kernel_cost_layernorm_forward(N, C), 1);
    }
    add_mlp_up(&t, c, s, N, 1);
    return t.gemm + t.other;
}

// Token-local model FLOPs of one micro-batch (GEMMs; what MFU counts besides attention): per
// layer the qkv projection C W, the output projection C^2, the MLP C FC + F C (12 C^2 in all
// for GPT's W = 3C and FC = F = 4C), forward and backward.
static double token_local_flops(const CostShape* s, double N) {
    const GPTConfig cfg = costmodel_gpt_config(s);
    const double C = s->C, Vp = gpt_padded_vocab(s->V), W = qkv_width(s);
    const double per_layer = C * W + C * C + C * gpt_fc_width(&cfg) + gpt_ffn_hidden(&cfg) * C;
    return 3 * (s->L * 2 * N * per_layer + 2 * N * C * Vp);
}

// --- Attention compute -----------------------------------------------------------------------------

static RingLayout ring_layout_of(CostAlgorithm a) {
    return a == COST_RING ? RING_CONTIGUOUS : a == COST_STRIPED ? RING_CYCLIC : RING_ZIGZAG;
}

// Adds the visible pairs per sequence and head of every SP rank i (ATTENTION2D: (i % pq, i / pq))
// in a layer with the given window (0: causal) and document starts (NULL: none) to per_rank; or,
// given a kernel's `tile`, the scores its calls compute (attention2d_tile_pairs, ring_tile_pairs
// over the ring family's `steps`).
static void add_rank_pairs(const CostConfig* g, long window, int steps, const int* doc_start,
                           const AttentionTile* tile, double* per_rank) {
    const int pq = g->pq, pkv = g->pkv, P = pq * pkv;
    if (g->alg == COST_ULYSSES) {   // every rank: all T queries of NH / P heads
        const double all =
            tile ? (double)attention2d_tile_pairs(1, 1, 0, 0, g->T, window, doc_start, 0, *tile)
                 : (double)attention2d_visible_pairs(1, 1, 0, 0, g->T, window, doc_start);
        for (int i = 0; i < P; i++) per_rank[i] += all / P;
        return;
    }
    if (g->alg == COST_USP) {   // rank (r, c): Striped's rank c of pkv, on NH / pq heads
        for (int c = 0; c < pkv; c++) {
            const double pairs =
                tile ? (double)ring_tile_pairs(RING_CYCLIC, pkv, c, pkv, g->T, window, doc_start,
                                               *tile)
                     : (double)ring_visible_pairs(RING_CYCLIC, pkv, c, g->T, window, doc_start);
            for (int r = 0; r < pq; r++) per_rank[r + pq * c] += pairs / pq;
        }
        return;
    }
    if (cost_algorithm_is_ring(g->alg)) {
        for (int i = 0; i < P; i++)
            per_rank[i] += tile ? (double)ring_tile_pairs(ring_layout_of(g->alg), P, i, steps, g->T,
                                                          window, doc_start, *tile)
                                : (double)ring_visible_pairs(ring_layout_of(g->alg), P, i, g->T,
                                                             window, doc_start);
        return;
    }
    if (tile) {   // ATTENTION2D: one call per rank, or 2d-overlap's P
        for (int i = 0; i < P; i++)
            per_rank[i] += (double)attention2d_tile_pairs(pq, pkv, i % pq, i / pq, g->T, window,
                                                          doc_start, g->alg == COST_2D_OVERLAP,
                                                          *tile);
        return;
    }
    long long* column = xcalloc((size_t)pkv, sizeof *column, "column pair counts");
    for (int r = 0; r < pq; r++) {   // a row's columns at once: the pairs of both ATTENTION2Ds
        attention2d_row_visible_pairs(pq, pkv, r, g->T, window, doc_start, column);
        for (int c = 0; c < pkv; c++) per_rank[r + pq * c] += (double)column[c];
    }
    free(column);
}

void costmodel_fixed_documents(long T, long length, int* start) {
    for (long t = 0; t < T; t++) start[t] = (int)(t / length * length);
}

// Queries per sequence and head of each of the schedule's partial-attention calls: ATTENTION2D's
// row (T / pq), a Tl block (2d-overlap, Ring, Striped), Zigzag's runs of Tl / 2, Ulysses' whole
// sequence, USP's row ring's blocks of T / pkv.
static long call_queries(const CostConfig* g) {
    const long P = (long)g->pq * g->pkv;
    switch (g->alg) {
    case COST_2D: return g->T / g->pq;
    case COST_ZIGZAG: return g->T / P / 2;
    case COST_ULYSSES: return g->T;
    case COST_USP: return g->T / g->pkv;
    default: return g->T / P;
    }
}

// costmodel.h: what an attention call is priced as (its visible pairs, its computed scores).
double costmodel_priced_pairs(double visible, double computed, long n, AttentionTile tile,
                              double masked) {
    const double w = (double)attention_causal_tile_pairs(n, tile) / ((double)n * (n + 1) / 2);
    return (visible + masked * (computed - visible)) / (1 + masked * (w - 1));
}

// What the slowest rank's attention (and *mean, the average one's) is priced as in one pass:
// costmodel_priced_pairs of each rank's visible pairs and the scores its kernels compute under
// the cluster's tile, a masked score costing `masked` of a visible pair (1 on a GPU: its tiles
// compute every score alike). A causal call alone is priced at its visible pairs; a ring step's
// fully visible block a little under them (no masked scores); a call that computes its band's
// edges in whole tiles above, by as much as the tiles waste (a sliding window over Striped's
// cyclic tokens leaves each query W / P keys of each step's block, in tiles of ROWS queries and
// the keys between them). pairs: each rank's visible pairs (slowest_rank_pairs' per_rank).
static double slowest_rank_priced(const CostConfig* g, long window, int steps, AttentionTile tile,
                                  double masked, const double* pairs, double* mean) {
    const int P = g->pq * g->pkv;
    const long n = call_queries(g);
    double* tiles = xcalloc((size_t)P, sizeof *tiles, "rank tile counts");
    const int rows = g->docs ? g->docs->rows : 1;
    for (int r = 0; r < rows; r++)
        add_rank_pairs(g, window, steps, g->docs ? g->docs->start + (long)r * g->T : NULL, &tile,
                       tiles);
    double most = 0, total = 0;
    for (int i = 0; i < P; i++) {
        const double priced = costmodel_priced_pairs(pairs[i], tiles[i] / rows, n, tile, masked);
        most = priced > most ? priced : most;
        total += priced;
    }
    free(tiles);
    *mean = total / P;
    return most;
}

// Visible pairs per sequence and head of the slowest SP rank and (*mean) of the average one:
// every rank's pairs (per_rank, P zeroed entries: filled), averaged over the documents' rows,
// and the most of them. Causal counts
// alone are monotone in the coordinates (the slowest is ATTENTION2D's (pq-1, 0), Ring's and
// Striped's P-1, any of Zigzag's); a window shorter than T, or documents, break that (Ring's last
// rank sees no more than its middle ones), so every rank is counted, in O(T + P) per row.
// tests/test_costmodel.c checks the result against brute force on every rank.
static double slowest_rank_pairs(const CostConfig* g, long window, double* per_rank,
                                 double* mean) {
    const int P = g->pq * g->pkv;
    const long T = g->T;
    const int rows = g->docs ? g->docs->rows : 1;
    for (int r = 0; r < rows; r++)
        add_rank_pairs(g, window, 0, g->docs ? g->docs->start + (long)r * T : NULL, NULL,
                       per_rank);
    double most = 0, total = 0;
    for (int i = 0; i < P; i++) {
        per_rank[i] /= rows;
        most = per_rank[i] > most ? per_rank[i] : most;
        total += per_rank[i];
    }
    *mean = total / P;
    return most;
}

// Layers of the shape that are banded: l % window_every == 0 (model/config.h's
// gpt_layer_window), none without a window.
static int banded_layers(const CostShape* s) {
    const GPTConfig cfg = costmodel_gpt_config(s);
    int n = 0;
    for (int l = 0; l < s->L; l++) n += gpt_layer_window(&cfg, l) > 0;
    return n;
}

// One partial-attention call of Tq queries and Tk keys with `pairs` visible pairs per sequence
// and head, on NH query heads reading NKV key/value heads: kernel_costs' attention formulas with
// Tq and Tk apart (they equal kernel_cost_attention_forward / _backward when Tq = Tk = T, NKV =
// NH and pairs = T (T+1) / 2). The FLOPs count every query head's pairs whatever NKV is.
static KernelCost attention_call_cost(const Cluster* c, int backward, double B, double NH,
                                      double NKV, double HS, double Tq, double Tk, double pairs) {
    const double per_pair = backward ? kernel_cost_attention_backward(1, 1, HS, 1).flops
                                     : kernel_cost_attention_forward(1, 1, HS, 1).flops;
    const double q = B * Tq * NH * HS, k = B * Tk * NKV * HS, rows = B * NH * Tq;
    KernelCost cost = {per_pair * B * NH * pairs, 0, 1};
    // forward: Q, K, V read, O (fp32) and LSE written; backward: Q, dO, K, V, LSE, D read, dQ,
    // dK, dV (fp32) read and written.
    cost.bytes = backward ? c->act_bytes * (2 * q + 2 * k) + 2 * 4 * rows + 8 * (q + 2 * k)
                          : c->act_bytes * (q + 2 * k) + 4 * q + 4 * rows;
    return cost;
}

// A cluster without shared cores runs the CUDA kernels (attention/partial_attention.cu), whose
// grouped-query calls widen K and V to NH heads first and run the multi-head kernels on them.
static int cuda_kernels(const Cluster* c) { return c->shared_cores == 0; }

// Seconds of the CUDA kernels' grouped-query passes around one call over B*Tk key rows: K and V
// widened; backward also the widened fp32 dK, dV zeroed and summed over each group into the
// call's accumulators. None with NKV = NH, or on the CPU, whose kernels read a group's head in
// place.
static double gqa_pass_seconds(const Cluster* c, int backward, double B, double NH, double NKV,
                               double HS, double Tk) {
    if (NKV >= NH || !cuda_kernels(c)) return 0;
    const double rows = B * Tk;
    double s = 2 * kernel_seconds(c, CK_RESIDUAL_FORWARD, kernel_cost_gqa_widen(rows, NH, NKV, HS),
                                  c->act_bytes / KERNEL_COST_X);
    if (backward) {   // the sums and the memset run on fp32 words: no storage scale
        const KernelCost zero = {0, 2 * 4 * rows * NH * HS, 0};
        s += kernel_seconds(c, CK_RESIDUAL_FORWARD, zero, 1);
        s += 2 * kernel_seconds(c, CK_RESIDUAL_FORWARD,
                                kernel_cost_gqa_group_sum(rows, NH, NKV, HS, 1), 1);
    }
    return s;
}

// The seconds of `calls` equal attention calls on NH query heads and NKV key/value heads, by the
// curve or memory, and their grouped-query passes (the CUDA kernels then read widened K and V).
static double attention_seconds(const Cluster* c, int backward, double B, double NH, double NKV,
                                double HS, double Tq, double Tk, double pairs, int calls) {
    const double read = NKV < NH && cuda_kernels(c) ? NH : NKV;
    const KernelCost one = attention_call_cost(c, backward, B, NH, read, HS, Tq, Tk, pairs / calls);
    const EfficiencyCurve *fwd_curve, *bwd_curve;
    cluster_attention_curves(c, (int)HS, &fwd_curve, &bwd_curve);
    const EfficiencyCurve* curve = backward ? bwd_curve : fwd_curve;
    const double rate = c->matmul_flops * curve_efficiency(curve, one.flops / 1e9);
    const double bw = c->memory_bw * curve_efficiency(&c->memory_eff, one.bytes / 1e6);
    return calls * (kernel_floor_seconds(one, rate, 0, bw, NULL) +
                    gqa_pass_seconds(c, backward, B, NH, NKV, HS, Tk));
}

// costmodel.h: the seconds of equal attention calls (one key/value head per query head).
double costmodel_attention_seconds(const Cluster* c, int backward, double B, double NH,
                                   double HS, double Tq, double Tk, double pairs, int calls) {
    return attention_seconds(c, backward, B, NH, NH, HS, Tq, Tk, pairs, calls);
}

typedef struct {
    double fwd_flops, bwd_flops;   // one layer, one micro-batch
    double fwd_s, bwd_s;           // its kernels: attention calls, LSE merges, row dot, sums
} AttentionWork;

// Ulysses: one call of all T queries on NH / P heads (`pairs` per sequence and head of NH, i.e.
// P pairs per head of its own; `priced` likewise) and their NKV / P key/value heads, no merges;
// the row dot over as many rows as the others; and the copies that pack the all-to-alls' blocks
// and lay them out (attention/ulysses.c: 7 S + 4 Skv values moved in the forward, 9 S + 10 Skv
// in the backward, S = B Tl C, Skv = S NKV / NH the values of K or V: 11 S and 19 S without
// grouped-query attention; each read and written once).
static AttentionWork ulysses_work(const Cluster* c, const CostConfig* g, double pairs,
                                  const double* priced) {
    const int P = g->pq * g->pkv, NH = g->shape.NH, NKV = kv_heads(&g->shape), HS = g->shape.C / NH;
    const double B = g->B, T = (double)g->T, H = (double)NH / P, Hk = (double)NKV / P,
                 S = B * (T / P) * NH * HS, Skv = B * (T / P) * NKV * HS;
    AttentionWork w;
    // FLOPs as the other schedules count them (per pair and head of NH); time and bytes of the
    // call as it runs
    w.fwd_flops = attention_call_cost(c, 0, B, NH, NH, HS, T, T, pairs).flops;
    w.bwd_flops = attention_call_cost(c, 1, B, NH, NH, HS, T, T, pairs).flops;
    w.fwd_s = attention_seconds(c, 0, B, H, Hk, HS, T, T, priced[0] * P, 1);
    w.bwd_s = attention_seconds(c, 1, B, H, Hk, HS, T, T, priced[1] * P, 1);
    w.bwd_s += ks(c, CK_ATTENTION_ROW_DOT, kernel_cost_attention_row_dot(B, NH, HS, T / P));
    // a copy reads and writes each value: 2 of the residual kernel's 3 accesses
    const double scale = c->act_bytes / KERNEL_COST_X;
    const double fwd = 7 * S + 4 * Skv, bwd = 9 * S + 10 * Skv;   // (exact: integers below 2^53)
    w.fwd_s += kernel_seconds(c, CK_RESIDUAL_FORWARD, kernel_cost_residual_forward(fwd * 2 / 3),
                              scale);
    w.bwd_s += kernel_seconds(c, CK_RESIDUAL_FORWARD, kernel_cost_residual_forward(bwd * 2 / 3),
                              scale);
    return w;
}

// A GPU cluster with bf16 storage runs the bf16 CUDA build's attention kernels: their backward
// keeps a dQ workspace, and their forward merges a ring / 2d-overlap step's partial into the
// running one in its epilogue (attention/dist_ops.h: dist_attention_merges_in_forward).
static int flash_kernels(const Cluster* c) { return c->shared_cores == 0 && c->param_bytes < 4; }

// The attention work of one layer and micro-batch on a rank that sees `pairs` pairs per sequence
// and head (its FLOPs), priced as priced[0] and priced[1] pairs in the forward and the backward
// (slowest_rank_priced: its time). Calls: ATTENTION2D one (Tq = T/pq, Tk = T/pkv); 2d-overlap P
// (a Tl x Tl block pair each); the ring family `steps` steps of Tl x Tl (ring_steps: P, or fewer
// for Ring and Zigzag under a window or documents). Merges: the row's pkv-way merge (2d,
// 2d-overlap) and one per step after a query block's first (ring: steps-1; 2d-overlap: pq-1 for
// each of pkv blocks).
static AttentionWork attention_work(const Cluster* c, const CostConfig* g, double pairs,
                                    const double* priced, int steps) {
    const int P = g->pq * g->pkv, NH = g->shape.NH, NKV = kv_heads(&g->shape), HS = g->shape.C / NH;
    const double B = g->B, T = (double)g->T, Tl = T / P;
    if (g->alg == COST_ULYSSES) return ulysses_work(c, g, pairs, priced);
    // USP's row ring: `steps` = pkv steps of T / pkv tokens on NH / pq heads, as much per call as
    // the ring family's Tl tokens on NH heads
    const int twod = !cost_algorithm_is_ring(g->alg) && g->alg != COST_USP;
    const int calls = g->alg == COST_2D ? 1 : twod ? P : steps;
    const double Tq = g->alg == COST_2D ? T / g->pq : Tl, Tk = g->alg == COST_2D ? T / g->pkv : Tl;
    AttentionWork w;
    w.fwd_flops = attention_call_cost(c, 0, B, NH, NH, HS, Tq, Tk, pairs).flops;
    w.bwd_flops = attention_call_cost(c, 1, B, NH, NH, HS, Tq, Tk, pairs).flops;
    w.fwd_s = attention_seconds(c, 0, B, NH, NKV, HS, Tq, Tk, priced[0], calls);
    w.bwd_s = attention_seconds(c, 1, B, NH, NKV, HS, Tq, Tk, priced[1], calls);
    const int row_merges = twod ? g->pkv - 1 : 0;
    const int step_merges = g->alg == COST_2D ? 0 : twod ? P - g->pkv : steps - 1;
    // merges and sums run on fp32 partials: kernel_costs already counts them in 4-byte words.
    // A merge in the forward's epilogue reads O and LSE once more: a third of the kernel's bytes.
    const KernelCost merge = kernel_cost_attention_merge(B, NH, HS, Tl);
    const KernelCost in_forward = {0, merge.bytes / 3, 0};
    w.fwd_s += row_merges * kernel_seconds(c, CK_ATTENTION_MERGE, merge, 1);
    w.fwd_s += step_merges * kernel_seconds(c, CK_ATTENTION_MERGE,
                                            flash_kernels(c) ? in_forward : merge, 1);
    w.bwd_s += ks(c, CK_ATTENTION_ROW_DOT, kernel_cost_attention_row_dot(B, NH, HS, Tl));
    if (!twod)   // the travelling dK|dV accumulator (NKV heads) gets this step's part added,
                 // steps-1 times
        w.bwd_s += (steps - 1) * kernel_seconds(c, CK_RESIDUAL_FORWARD,
                                            kernel_cost_residual_forward(2 * B * Tl * NKV * HS),
                                            4.0 / KERNEL_COST_X);
    if (g->alg == COST_USP) {   // the copies around the column's all-to-alls (attention/ulysses.c:
        // 4 S + 4 Skv values moved forward, 11 S + 10 Skv backward with the split for the ring;
        // S = B Tl C, Skv = S NKV / NH: 8 S and 21 S without grouped-query attention)
        const double S = B * Tl * NH * HS, Skv = B * Tl * NKV * HS;
        const double scale = c->act_bytes / KERNEL_COST_X;
        const double moved_f = 4 * S + 4 * Skv, moved_b = 11 * S + 10 * Skv;
        const KernelCost fwd = kernel_cost_residual_forward(moved_f * 2 / 3),
                         bwd = kernel_cost_residual_forward(moved_b * 2 / 3);
        w.fwd_s += kernel_seconds(c, CK_RESIDUAL_FORWARD, fwd, scale);
        w.bwd_s += kernel_seconds(c, CK_RESIDUAL_FORWARD, bwd, scale);
    }
    return w;
}

// The attention of the layers of one kind (causal or banded) on the slowest and the average rank.
typedef struct {
    double layers;             // how many layers of this kind
    double pairs, mean_pairs;  // visible pairs per sequence and head of the slowest rank, the mean
    double priced[2], mean_priced[2];   // the same priced in the kernels' tiles, forward, backward
    int steps;                 // the ring family's steps (ring_steps; P elsewhere)
    AttentionWork w, w_mean;   // one layer's work on the slowest rank and on the average one
} LayerKind;

static LayerKind layer_kind(const Cluster* c, const CostConfig* g, int layers, long window) {
    const int P = g->pq * g->pkv;
    LayerKind k = {.layers = layers, .steps = P};
    if (cost_algorithm_is_ring(g->alg)) {   // the longest document of the rows decides
        const int span = g->docs ? document_span(g->docs->start, g->docs->rows, (int)g->T) : 0;
        k.steps = ring_steps(ring_layout_of(g->alg), P, (int)(g->T / P), window, span);
    }
    if (g->alg == COST_USP) k.steps = g->pkv;   // the row's Striped ring
    double* pairs = xcalloc((size_t)P, sizeof *pairs, "rank pair counts");
    k.pairs = slowest_rank_pairs(g, window, pairs, &k.mean_pairs);
    for (int pass = 0; pass < 2; pass++) {
        const AttentionTile t = c->attention_tile[pass];
        if (t.rows == 1 && t.keys == 1) {   // the visible pairs themselves
            k.priced[pass] = k.pairs, k.mean_priced[pass] = k.mean_pairs;
            continue;
        }
        k.priced[pass] = slowest_rank_priced(g, window, k.steps, t, c->attention_masked_cost[pass],
                                             pairs, &k.mean_priced[pass]);
    }
    free(pairs);
    k.w = attention_work(c, g, k.pairs, k.priced, k.steps);
    k.w_mean = attention_work(c, g, k.mean_pairs, k.mean_priced, k.steps);
    return k;
}

// --- Topology: which tier each group's traffic crosses ---------------------------------------------

typedef enum {
    PATH_ROW, PATH_COL, PATH_WORLD, PATH_SP,                // collectives over a mesh group
    PATH_ROW_HOP, PATH_COL_HOP, PATH_RING_HOP, PATH_PERM,   // point-to-point transfers
    NPATHS
} Path;

typedef struct {
    Tier tier;          // the slowest tier a transfer on the path crosses
    int per_node;       // fewest group members on one node (collectives across nodes)
    int size;           // ranks in the group (2 for point-to-point)
} PathLink;

typedef struct {
    PathLink path[NPATHS];
    int ranks_per_node;   // ranks active on the busiest node
} Topology;

static int node_of(const Cluster* c, int world_rank) { return world_rank / c->gpus_per_node; }

// A group's tier and its fewest members on one node, from its members' world ranks.
static void note_group(const Cluster* c, const Mesh* m, MeshGroup g, PathLink* out) {
    const int n = mesh_group_size(m, g);
    int first = node_of(c, mesh_group_world_rank(m, g, 0)), last = first, fewest = n;
    for (int k = 1; k < n; k++) {
        const int node = node_of(c, mesh_group_world_rank(m, g, k));
        first = node < first ? node : first;
        last = node > last ? node : last;
    }
    if (last > first) {   // members per node, over the nodes the group touches
        for (int node = first; node <= last; node++) {
            int count = 0;
            for (int k = 0; k < n; k++) count += node_of(c, mesh_group_world_rank(m, g, k)) == node;
            if (count && count < fewest) fewest = count;
        }
        out->tier = TIER_INTER;
        out->per_node = out->per_node < fewest ? out->per_node : fewest;
    }
    out->size = n;
}

static void note_hop(const Cluster* c, const Mesh* m, int peer_world_rank, PathLink* out) {
    if (node_of(c, peer_world_rank) != node_of(c, m->world_rank)) out->tier = TIER_INTER;
    out->size = 2;
}

// The worst case over every rank and group of the world for each path (the slowest transfer
// paces a synchronous step). Placement: comm/mesh.h's world rank order, gpus_per_node
// consecutive ranks per node.
static Topology topology(const Cluster* c, const CostConfig* g) {
    Topology t;
    for (int p = 0; p < NPATHS; p++) t.path[p] = (PathLink){TIER_INTRA, 1 << 30, 1};
    const int W = g->dp * g->pq * g->pkv, P = g->pq * g->pkv;
    t.ranks_per_node = W < c->gpus_per_node ? W : c->gpus_per_node;
    for (int rank = 0; rank < W; rank++) {
        Mesh m;
        char err[ERR_LEN];
        CHECK(mesh_init(&m, g->dp, g->pq, g->pkv, rank, W, err) == 0, "caller bug", "%s", err);
        // Groups are the same for all their members: look at each once, from its first member.
        if (m.c == 0) note_group(c, &m, MESH_ROW, &t.path[PATH_ROW]);
        if (m.r == 0) note_group(c, &m, MESH_COL, &t.path[PATH_COL]);
        if (rank == 0) note_group(c, &m, MESH_WORLD, &t.path[PATH_WORLD]);
        if (m.sp_index == 0) note_group(c, &m, MESH_SP, &t.path[PATH_SP]);
        const int base = m.dp_index * P;
        if (g->pkv > 1)
            note_hop(c, &m, base + mesh_sp_index(&m, m.r, (m.c + 1) % g->pkv), &t.path[PATH_ROW_HOP]);
        if (g->pq > 1)
            note_hop(c, &m, base + mesh_sp_index(&m, (m.r + 1) % g->pq, m.c), &t.path[PATH_COL_HOP]);
        if (P > 1) note_hop(c, &m, base + (m.sp_index + 1) % P, &t.path[PATH_RING_HOP]);
        // The K/V permutation sends shard i to the rank whose row-major index is i.
        const int i = m.sp_index, to = (i % g->pkv) * g->pq + i / g->pkv;
        if (to != i) note_hop(c, &m, base + to, &t.path[PATH_PERM]);
    }
    for (int p = 0; p < NPATHS; p++)
        if (t.path[p].per_node > t.path[p].size) t.path[p].per_node = t.path[p].size;
    return t;
}

// --- Communication: dist_cost.c's operations on paths ---------------------------------------------

typedef struct {
    CommKind kind;
    Path path;
    DistStage stage;              // what it does in the schedule: the schedules overlap by stage
    double bytes;                 // received per rank
    long long messages, calls;
} CommOp;

typedef struct {
    int n;
    CommOp op[DIST_MAX_OPS];
} OpList;

// Element sizes of what travels, as dist_cost.c takes them.
typedef struct {
    double act, acc;
} Sizes;

// The path an operation of dist_cost.c takes: a collective over its row or column, or a
// point-to-point hop to a row or column neighbour (2d-overlap's passes), the transposed position
// or the next ring rank.
static Path path_of(const DistCommOp* op) {
    const int hop = op->kind == COMM_SEND_RECV;
    switch (op->along) {
    case DIST_ALONG_ROW: return hop ? PATH_ROW_HOP : PATH_ROW;
    case DIST_ALONG_COLUMN: return hop ? PATH_COL_HOP : PATH_COL;
    case DIST_ALONG_TRANSPOSE: return PATH_PERM;
    case DIST_ALONG_SP: return PATH_SP;
    default: return PATH_RING_HOP;
    }
}

// The attention schedule's operations on SP rank i for one layer and phase: dist_cost.c's list
// (what the comm counters are tested against), each on its path.
static OpList attention_ops(const CostConfig* g, int i, CommPhase phase, Sizes z, int steps) {
    Mesh m;
    char err[ERR_LEN];
    CHECK(mesh_init(&m, 1, g->pq, g->pkv, i, g->pq * g->pkv, err) == 0, "caller bug", "%s", err);
    const int Tl = (int)(g->T / m.P), NH = g->shape.NH, HS = g->shape.C / NH;
    const int NKV = g->shape.kv_heads > 0 ? g->shape.kv_heads : NH;
    const size_t act = (size_t)z.act, acc = (size_t)z.acc;
    const int G = cost_chunks(g);
    const DistCommOps d = g->alg == COST_ULYSSES
                              ? ulysses_ops(&m, phase, g->B, Tl, NH, NKV, HS, G, act, acc)
                          : g->alg == COST_USP ? usp_ops(&m, phase, g->B, Tl, NH, NKV, HS, G, act, acc)
                          : cost_algorithm_is_ring(g->alg)
                              ? ring_ops(&m, phase, g->B, Tl, NH, NKV, HS, steps, act, acc)
                              : attention2d_ops(&m, phase, g->B, Tl, NH, NKV, HS,
                                                g->alg == COST_2D && g->keep_kv, act, acc,
                                                g->alg == COST_2D_OVERLAP);
    OpList l = {0};
    for (int k = 0; k < d.n; k++) {
        const DistCommOp* op = &d.op[k];
        l.op[l.n++] = (CommOp){op->kind, path_of(op), op->stage, (double)op->bytes, op->messages,
                               op->calls};
    }
    return l;
}

static double list_bytes(const OpList* l) {
    double b = 0;
    for (int k = 0; k < l->n; k++) b += l->op[k].bytes;
    return b;
}

static double list_calls(const OpList* l) {
    double n = 0;
    for (int k = 0; k < l->n; k++) n += (double)l->op[k].calls;
    return n;
}

// --- Transfer times ------------------------------------------------------------------------------

static FitOp fit_op_of(CommKind kind) {
    switch (kind) {
    case COMM_ALL_GATHER: return FIT_ALL_GATHER;
    case COMM_REDUCE_SCATTER: return FIT_REDUCE_SCATTER;
    case COMM_ALL_REDUCE: return FIT_ALL_REDUCE;
    case COMM_SEND_RECV: return FIT_SEND_RECV;
    default: return FIT_ALL_GATHER;   // all-to-all, broadcast: the all-gather's fit (by bytes
                                      // received per rank)
    }
}

// Bytes/s one transfer gets on its path: within a node the NVLink (p2p: one peer's links);
// across nodes the NICs, a ring collective using one NIC per member on a node (NCCL runs a ring
// per NIC), capped by the node's links.
static double path_bandwidth(const Cluster* c, const PathLink* p, CommKind kind) {
    const Link* intra = &c->link[TIER_INTRA];
    const Link* inter = &c->link[TIER_INTER];
    const double nvlink = intra->bandwidth * intra->efficiency;
    const double nic_share = c->nics_per_node < c->gpus_per_node
                                 ? (double)c->nics_per_node / c->gpus_per_node : 1.0;
    const double nic = inter->bandwidth * inter->efficiency * nic_share;
    if (kind == COMM_SEND_RECV)
        return p->tier == TIER_INTRA ? intra->p2p_bandwidth * intra->efficiency : nic;
    if (p->tier == TIER_INTRA) return nvlink;
    const int nics = p->per_node < c->nics_per_node ? p->per_node : c->nics_per_node;
    return dmax(nic, fmin(nvlink, nics * inter->bandwidth * inter->efficiency));
}

// Seconds of one operation. With measured fits (this machine): the fit of its kind over the
// ranks active on the node (they all share the cores), alpha per call + beta per byte. Else the
// datasheet link: latency per call and per message + bytes / bandwidth; an all-to-all across
// nodes sends (n - m) of its n - 1 blocks over the NIC (m members per node).
static double op_seconds(const Cluster* c, const Topology* t, const CommOp* op) {
    if (op->calls == 0) return 0;
    const CollectiveFit* fit = cluster_fit(c, fit_op_of(op->kind), t->ranks_per_node);
    if (fit) return op->calls * fit->alpha + op->bytes * fit->beta;
    const PathLink* p = &t->path[op->path];
    const Link* link = &c->link[p->tier];
    const double latency = op->calls * link->call_latency + op->messages * link->hop_latency;
    double bytes = op->bytes;
    if (op->kind == COMM_ALL_TO_ALL && p->tier == TIER_INTER && p->size > 1) {
        const double across = (double)(p->size - p->per_node) / (p->size - 1);
        const PathLink within = {TIER_INTRA, p->per_node, p->per_node};
        const double intra_s = bytes * (1 - across) / path_bandwidth(c, &within, op->kind);
        const PathLink nic = {TIER_INTER, 1, p->size};
        return latency + dmax(bytes * across / path_bandwidth(c, &nic, op->kind), intra_s);
    }
    return latency + bytes / path_bandwidth(c, p, op->kind);
}

static double list_seconds(const Cluster* c, const Topology* t, const OpList* l) {
    double s = 0;
    for (int k = 0; k < l->n; k++) s += op_seconds(c, t, &l->op[k]);
    return s;
}

// The seconds of the busiest tier (each tier one resource) under the transfers of n lists.
static double busiest_tier_seconds(const Cluster* c, const Topology* t, const OpList* const* lists,
                                   int n) {
    double load[TIER_COUNT] = {0};
    for (int j = 0; j < n; j++)
        for (int k = 0; k < lists[j]->n; k++)
            load[t->path[lists[j]->op[k].path].tier] += op_seconds(c, t, &lists[j]->op[k]);
    return dmax(load[TIER_INTRA], load[TIER_INTER]);
}

// Two chains of transfers in flight together: each tier is one resource they share, so the
// time is the longer chain or the busiest tier, whichever is more.
static double concurrent_seconds(const Cluster* c, const Topology* t, const OpList* a,
                                 const OpList* b) {
    const OpList* both[2] = {a, b};
    return dmax(dmax(list_seconds(c, t, a), list_seconds(c, t, b)),
                busiest_tier_seconds(c, t, both, 2));
}

// The operations of `l` with a stage in `stages` and a path in `paths` (bit masks).
static OpList select_ops(const OpList* l, unsigned stages, unsigned paths) {
    OpList out = {0};
    for (int k = 0; k < l->n; k++)
        if ((stages >> l->op[k].stage & 1u) && (paths >> l->op[k].path & 1u)) out.op[out.n++] = l->op[k];
    return out;
}

#define BIT(x) (1u << (x))
static const unsigned ANY = ~0u;

// --- Schedules: one layer's attention (compute + its transfers) ------------------------------------

typedef struct {
    double forward, backward;   // seconds on the critical path
    double comm;                // transfer seconds of both phases, as if serial
} LayerSeconds;

// Compute and transfers one after the other (--overlap 0, or transfers that need the CPU).
static LayerSeconds serial(const Cluster* c, const Topology* t, const OpList* f, const OpList* b,
                           const AttentionWork* w) {
    const double cf = list_seconds(c, t, f), cb = list_seconds(c, t, b);
    return (LayerSeconds){w->fwd_s + cf, w->bwd_s + cb, cf + cb};
}

// ATTENTION2D (collectives), attention2d.c's concurrency: forward [Q row gather | permutation,
// K/V column gather], then the O|LSE all-to-all; backward [Q|dO, LSE|D row gathers |
// permutation, K/V column gather], then [dQ row reduce | dK|dV column reduce, return]. The
// attention call needs all gathered blocks, so compute never overlaps them.
static LayerSeconds schedule_2d(const Cluster* c, const Topology* t, const OpList* f,
                                const OpList* b, const AttentionWork* w, int overlapped) {
    LayerSeconds s = serial(c, t, f, b, w);
    if (!overlapped) return s;
    const unsigned row = BIT(PATH_ROW), col = BIT(PATH_COL) | BIT(PATH_PERM);
    const unsigned in = BIT(DIST_STAGE_PERMUTE) | BIT(DIST_STAGE_GATHER), out = BIT(DIST_STAGE_REDUCE) | BIT(DIST_STAGE_RETURN);
    const OpList fq = select_ops(f, BIT(DIST_STAGE_GATHER), row), fkv = select_ops(f, in, col);
    const OpList fo = select_ops(f, BIT(DIST_STAGE_REDUCE), ANY);
    s.forward = w->fwd_s + concurrent_seconds(c, t, &fq, &fkv) + list_seconds(c, t, &fo);
    const OpList gr = select_ops(b, BIT(DIST_STAGE_GATHER), row), gc = select_ops(b, in, col);
    const OpList rr = select_ops(b, BIT(DIST_STAGE_REDUCE), row), rc = select_ops(b, out, col);
    s.backward = w->bwd_s + concurrent_seconds(c, t, &gr, &gc) + concurrent_seconds(c, t, &rr, &rc);
    return s;
}

// Pairs of (Q block a < pkv, K|V block b < pq) with max(a, b) = s: the work of round s.
static int round_pairs(int s, int pq, int pkv) {
    const int now = (s + 1 < pkv ? s + 1 : pkv) * (s + 1 < pq ? s + 1 : pq);
    const int before = (s < pkv ? s : pkv) * (s < pq ? s : pq);
    return now - before;
}

// 1 / n of an operation: its bytes, messages and calls.
static CommOp op_part(const CommOp* op, long long n) {
    return (CommOp){op->kind, op->path, op->stage, op->bytes / n, op->messages / n,
                    op->calls / n};
}

// One chunk of Ulysses' heads: 1 / n of each operation of `l` (those of at least n calls).
static OpList op_share(const OpList* l, long long n) {
    OpList out = {0};
    for (int k = 0; k < l->n; k++)
        if (l->op[k].calls >= n) out.op[out.n++] = op_part(&l->op[k], n);
    return out;
}

// One ring pass of each exchange of `l` (a round of 2d-overlap): each operation's one call.
static OpList one_pass(const OpList* l) {
    OpList out = {0};
    for (int k = 0; k < l->n; k++)
        if (l->op[k].calls) out.op[out.n++] = op_part(&l->op[k], l->op[k].calls);
    return out;
}

// 2d-overlap, one phase: the permutation, then rounds s = 0..R-1 (R = max(pq, pkv)), each taking
// max(its pairs' compute, the gather passes that bring the next blocks: a row and a column pass
// in flight together); the reduce rings (pkv-1 and pq-1 passes of partial sums) run under the
// last round's compute, when the blocks they send complete; then the inverse permutation.
// Compute per round is proportional to its pairs (each Tl x Tl pair about equally masked).
static double overlap_phase_seconds(const Cluster* c, const Topology* t, const CostConfig* g,
                                    const OpList* l, double compute) {
    const int pq = g->pq, pkv = g->pkv, P = pq * pkv, R = pq > pkv ? pq : pkv;
    const OpList none = {0};
    const OpList gr = select_ops(l, BIT(DIST_STAGE_GATHER), BIT(PATH_ROW_HOP));
    const OpList gc = select_ops(l, BIT(DIST_STAGE_GATHER), BIT(PATH_COL_HOP));
    const OpList pr = one_pass(&gr), pc = one_pass(&gc);
    const OpList rr = select_ops(l, BIT(DIST_STAGE_REDUCE), BIT(PATH_ROW_HOP));
    const OpList rc = select_ops(l, BIT(DIST_STAGE_REDUCE), BIT(PATH_COL_HOP));
    const OpList in = select_ops(l, BIT(DIST_STAGE_PERMUTE), ANY), out = select_ops(l, BIT(DIST_STAGE_RETURN), ANY);
    double total = list_seconds(c, t, &in) + list_seconds(c, t, &out);
    for (int s = 0; s < R; s++) {
        const double work = compute * round_pairs(s, pq, pkv) / P;
        const double transfers = s == R - 1 ? concurrent_seconds(c, t, &rr, &rc)
                                            : concurrent_seconds(c, t, s < pkv - 1 ? &pr : &none,
                                                                 s < pq - 1 ? &pc : &none);
        total += dmax(work, transfers);
    }
    return total;
}

static LayerSeconds schedule_2d_overlap(const Cluster* c, const Topology* t, const CostConfig* g,
                                        const OpList* f, const OpList* b, const AttentionWork* w,
                                        int overlapped) {
    LayerSeconds s = serial(c, t, f, b, w);
    if (!overlapped) return s;
    s.forward = overlap_phase_seconds(c, t, g, f, w->fwd_s);
    s.backward = overlap_phase_seconds(c, t, g, b, w->bwd_s);
    return s;
}

// The ring family: n steps (P, or ring_steps' fewer); the K|V pass of step s travels during step
// s's compute. Backward also passes the dK|dV accumulator finished the step before, and sends it
// home at the end. The transfers that skip ranks (the home transfer when n < P, Zigzag's turn
// of its two-way tour) are timed as hops of the ring.
static LayerSeconds schedule_ring(const Cluster* c, const Topology* t, const OpList* f,
                                  const OpList* b, const AttentionWork* w, int overlapped, int n) {
    LayerSeconds s = serial(c, t, f, b, w);
    if (!overlapped || n == 1) return s;
    const double kv = op_seconds(c, t, &f->op[0]) / (n - 1);
    const double dkv = op_seconds(c, t, &b->op[1]) / n;
    const double cf = w->fwd_s / n, cb = w->bwd_s / n;
    s.forward = (n - 1) * dmax(cf, kv) + cf;
    s.backward = dmax(cb, kv) + (n - 2) * dmax(cb, kv + dkv) + dmax(cb, dkv) + dkv;
    return s;
}

// One phase of Ulysses or USP in G chunks of heads (ulysses.c): every chunk's all-to-all in
// (`in` seconds each) is issued at once on the group's links, chunk g computes when its own has
// arrived, and its all-to-all out (`out`) follows on the same links behind what they still carry.
// G = 1 is in + compute + out. (USP's caller also bounds it by the busiest tier: the row ring's
// passes inside `compute` share a tier with the all-to-alls where both cross it.)
static double chunk_pipeline(int G, double in, double compute, double out) {
    double links = G * in, done = 0;   // when the links and the compute are next free
    for (int g = 0; g < G; g++) {
        done = dmax(done, (g + 1) * in) + compute;
        links = dmax(links, done) + out;
    }
    return links;
}

// Ulysses and USP: each all-to-all waits for or feeds the heads' computation (Ulysses: one local
// call; USP: the row's Striped ring, whose passes overlap its steps as the ring family's do:
// schedule_ring on the passes alone), chunk by chunk (--a2a-chunks): the chunks' all-to-alls
// travel while other chunks compute, when the transfers overlap at all.
static LayerSeconds schedule_all_to_all(const Cluster* c, const Topology* t, const OpList* f,
                                        const OpList* b, const AttentionWork* w, int overlapped,
                                        int n, int G) {
    const unsigned passes = BIT(DIST_STAGE_PASS);
    const unsigned in = BIT(DIST_STAGE_GATHER), out = BIT(DIST_STAGE_REDUCE);
    const OpList all_fr = select_ops(f, passes, ANY), all_br = select_ops(b, passes, ANY);
    const OpList fr = op_share(&all_fr, G), br = op_share(&all_br, G);
    const OpList fi = select_ops(f, in, ANY), fo = select_ops(f, out, ANY);
    const OpList bi = select_ops(b, in, ANY), bo = select_ops(b, out, ANY);
    const OpList fic = op_share(&fi, G), foc = op_share(&fo, G);
    const OpList bic = op_share(&bi, G), boc = op_share(&bo, G);
    const AttentionWork wc = {.fwd_s = w->fwd_s / G, .bwd_s = w->bwd_s / G};
    const LayerSeconds inner = schedule_ring(c, t, &fr, &br, &wc, overlapped, fr.n ? n : 1);
    const double fin = list_seconds(c, t, &fic), fout = list_seconds(c, t, &foc);
    const double bin = list_seconds(c, t, &bic), bout = list_seconds(c, t, &boc);
    LayerSeconds s;
    s.comm = G * (fin + fout + bin + bout + inner.comm);
    if (overlapped) {
        const OpList* fall[1] = {f};
        const OpList* ball[1] = {b};
        s.forward = dmax(chunk_pipeline(G, fin, inner.forward, fout),
                         busiest_tier_seconds(c, t, fall, 1));
        s.backward = dmax(chunk_pipeline(G, bin, inner.backward, bout),
                          busiest_tier_seconds(c, t, ball, 1));
    } else {
        s.forward = G * (fin + inner.forward + fout);
        s.backward = G * (bin + inner.backward + bout);
    }
    return s;
}

// --- Gradient reduction and optimizer ----------------------------------------------------------

typedef struct {
    double bytes;       // counted per rank per step
    double seconds;     // all of it, serial
    double exposed;     // what the step waits for
} GradComm;

// All-reduce of the gradients over every rank (bucketed during the last backward when
// overlapping), or ZeRO-1's reduce-scatter and parameter all-gather (the latter in flight during
// the next forward); plus the loss (and ZeRO: gradient norm; --z-loss: the z-loss) scalars in one
// fp64 all-reduce, and under ZeRO-1 with --log-params-norm the parameters' norm in another.
static GradComm grad_comm(const Cluster* c, const Topology* t, const CostConfig* g, int overlapped,
                          double last_backward_s, double first_forward_s) {
    GradComm r = {0, 0, 0};
    const long long W = (long long)g->dp * g->pq * g->pkv;
    if (W == 1) return r;
    const double n = costmodel_num_params(&g->shape), e = c->param_bytes;
    const long long scalars = 2 * (W - 1) * (1 + (g->zero != 0) + (g->z_loss != 0)) * 8 / W;
    const CommOp loss = {COMM_ALL_REDUCE, PATH_WORLD, DIST_STAGE_REDUCE, (double)scalars, 2 * (W - 1), 1};
    if (g->zero) {
        // --log-params-norm: the shards' sums of squares after the update, never hidden
        const CommOp norm = {COMM_ALL_REDUCE, PATH_WORLD, DIST_STAGE_REDUCE,
                             (double)(2 * (W - 1) * 8 / W), 2 * (W - 1), 1};
        const int norms = g->params_norm != 0;
        const double shard = ceil(n / W);
        const CommOp rs = {COMM_REDUCE_SCATTER, PATH_WORLD, DIST_STAGE_REDUCE, (W - 1) * shard * e, W - 1, 1};
        const CommOp ag = {COMM_ALL_GATHER, PATH_WORLD, DIST_STAGE_GATHER, (W - 1) * shard * e, W - 1, 1};
        const double ag_s = op_seconds(c, t, &ag);
        r.bytes = rs.bytes + ag.bytes + loss.bytes + norms * norm.bytes;
        r.seconds = op_seconds(c, t, &rs) + ag_s + op_seconds(c, t, &loss) +
                    norms * op_seconds(c, t, &norm);
        r.exposed = r.seconds - (overlapped ? fmin(ag_s, first_forward_s) : 0);
        return r;
    }
    // counted as comm.h does: 2 (n-1) * count * e / n, integer division
    const double bytes = (double)(2 * (W - 1) * (long long)(n * e) / W);
    const CommOp ar = {COMM_ALL_REDUCE, PATH_WORLD, DIST_STAGE_REDUCE, bytes, 2 * (W - 1), 1};
    const double ar_s = op_seconds(c, t, &ar);
    r.bytes = ar.bytes + loss.bytes;
    r.seconds = ar_s + op_seconds(c, t, &loss);
    // Buckets: the last one (the embeddings, wte + wpe) completes at the end of backward.
    const double embed = (gpt_padded_vocab(g->shape.V) + (double)g->shape.max_T) * g->shape.C;
    const CommOp last = {COMM_ALL_REDUCE, PATH_WORLD, DIST_STAGE_REDUCE, bytes * embed / n, 2 * (W - 1), 1};
    const double tail = overlapped ? dmax(ar_s - last_backward_s, op_seconds(c, t, &last)) : ar_s;
    r.exposed = fmin(ar_s, tail) + op_seconds(c, t, &loss);
    return r;
}

// One Newton-Schulz GEMM (M x K by K x N) at the precision's rate on a GPU (muon_prec): bf16
// tensor cores at the GEMMs' curve (medium), TF32 at half that rate (high: A100 156 of 312, H100
// 495 of 989 TFLOP/s dense), the fp32 cores at the vector peak (highest); the CPU's fp32 GEMM at
// its own whatever the precision (it rounds the inputs, element-wise, then multiplies in fp32).
static double muon_gemm_seconds(const Cluster* c, const CostConfig* g, double M, double N,
                                double K) {
    const int gpu = c->shared_cores == 0;
    KernelCost k = kernel_cost_matmul_forward(M, K, N, 0, 0);
    if (gpu && g->muon_prec == MUON_PREC_HIGHEST) k.tensor = 0;
    return (gpu && g->muon_prec == MUON_PREC_HIGH ? 2 : 1) * kernel_seconds(c, CK_GEMM, k, 1);
}

// Muon's Newton-Schulz GEMMs: per matrix X (r x c, r = min(rows, cols)) and each of the
// iterations, X X^T, A A and B X (muon_gemm_seconds). Each of muon_matrix_shape's matrices (qkv as Q, K and V unless
// muon_whole_qkv). --optimizer muon: every rank all of them; dist_muon
// (muon_split): model/muon.c's rounds of W matrices, one per rank, each round as long as its
// slowest (muon_broadcast_op prices the results' broadcasts). The element-wise passes (momentum,
// normalisation, update) are left in the AdamW kernel's count over every parameter, which they
// replace for the matrices at about the same bytes.
static double muon_seconds(const Cluster* c, const CostConfig* g, int W) {
    const GPTConfig cfg = costmodel_gpt_config(&g->shape);
    const int split = !g->muon_whole_qkv, count = muon_matrix_count(&cfg, split);
    const int ranks = g->muon_split ? W : 1;
    double seconds = 0, slowest = 0;
    for (int j = 0; j < count; j++) {
        const MuonMatrixShape s = muon_matrix_shape(&cfg, split, j);
        const double r = s.rows < s.cols ? s.rows : s.cols, k = s.rows < s.cols ? s.cols : s.rows;
        const double ns = g->muon * (muon_gemm_seconds(c, g, r, r, k) +   // X X^T
                                     muon_gemm_seconds(c, g, r, r, r) +   // A A
                                     muon_gemm_seconds(c, g, r, k, r));   // B X
        slowest = dmax(slowest, ns);
        if ((j + 1) % ranks == 0 || j + 1 == count) {   // a round ends
            seconds += slowest;
            slowest = 0;
        }
    }
    return seconds;
}

// dist_muon's broadcasts over the world: every matrix's fp32 result from its owner, a rank
// receiving all but its own (on average (W - 1) / W of them); priced by the all-gather's cost per
// byte received, a pipelined ring's. Blocking, between the updates: exposed.
static CommOp muon_broadcast_op(const CostConfig* g, int W) {
    const GPTConfig cfg = costmodel_gpt_config(&g->shape);
    const double bytes = 4.0 * (double)muon_matrix_elements(&cfg);
    const long long calls = g->muon_split && W > 1 ? muon_matrix_count(&cfg, !g->muon_whole_qkv) : 0;
    return (CommOp){COMM_BROADCAST, PATH_WORLD, DIST_STAGE_REDUCE, calls ? bytes * (W - 1) / W : 0,
                    calls * (W - 1), calls};
}

// --- Memory --------------------------------------------------------------------------------------

// Bytes per device: the trainer's own budget (model/memory_budget.h) in the cluster's element
// sizes. Each rank owns its device where no cores are shared (a GPU: the CUDA backend and its
// workspace; nccl between ranks); the optimizer state beyond AdamW's fp32 m and v is the master
// copy, which ZeRO-1 shards with them (as the CUDA trainer keeps it). The sampler (rank 0,
// --sample-length) is not counted: the cost model predicts a training step, and the trainer's
// refusal names the sampler when it is what does not fit.
static MemoryConfig memory_config(const Cluster* c, const CostConfig* g) {
    const CostShape* s = &g->shape;
    const int P = g->pq * g->pkv;
    MemorySchedule schedule;
    CHECK(memory_schedule_parse(cost_algorithm_name(g->alg), &schedule) == 0, "caller bug",
          "memory_bytes: no schedule named %s", cost_algorithm_name(g->alg));
    const int gpu = c->shared_cores == 0;
    const MemoryConfig m = {
        .cfg = costmodel_gpt_config(s),
        .B = g->B, .T = (int)(g->T / P), .recompute = (GptRecompute)g->recompute,
        .recompute_layers = g->recompute_layers,
        .dp = g->dp, .pq = g->pq, .pkv = g->pkv, .schedule = schedule, .keep_kv = g->keep_kv,
        .zero = g->zero, .muon = g->muon, .muon_ranks = g->muon_split ? g->dp * P : 1,
        .muon_whole_qkv = g->muon_whole_qkv, .muon_rank = -1, .muon_prec = g->muon_prec,
        .cuda = gpu, .nccl = gpu && g->dp * P > 1, .sampler = 0,
        .flash_kernels = flash_kernels(c),
        .real_bytes = (size_t)c->param_bytes, .stat_bytes = (size_t)c->acc_bytes,
        .master_bytes = c->state_bytes > 8 ? (size_t)(c->state_bytes - 8) : 0,
        .param_chunk = PARAM_STAGING_CHUNK};
    return m;
}
static double memory_bytes(const Cluster* c, const CostConfig* g) {
    const MemoryConfig m = memory_config(c, g);
    MemoryBudget b;
    memory_budget(&m, &b);
    return (double)b.total;
}

int costmodel_memory_sharers(const CostConfig* g, const Cluster* c) {
    const int world = g->dp * g->pq * g->pkv;
    const int on_node = world < c->gpus_per_node ? world : c->gpus_per_node;
    return c->shared_cores > 0 ? on_node : 1;
}

int costmodel_fewest_recompute_layers(const CostConfig* g, const Cluster* c, double limit) {
    const MemoryConfig m = memory_config(c, g);
    return memory_fewest_recompute_layers(&m, limit / costmodel_memory_sharers(g, c));
}

// --- The prediction ----------------------------------------------------------------------------

// Documents hold rows of T starts, each at or before its position and, within a document, the
// same: start[t] is t (a document begins) or start[t-1].
static int check_documents(const CostDocuments* d, long T, char* err, size_t errlen) {
    if (!d) return 0;
    if (d->rows < 1 || d->T != T || !d->start)
        return set_err(err, errlen, "documents: expected at least one row of T = %ld starts, "
                       "found %d rows of %ld", T, d->rows, d->T);
    for (int r = 0; r < d->rows; r++)
        for (long t = 0; t < T; t++) {
            const int s = d->start[(long)r * T + t];
            if (s != t && (t == 0 || s != d->start[(long)r * T + t - 1]))
                return set_err(err, errlen, "documents: row %d position %ld: expected its "
                               "document's first position (%ld or the previous one's), found %d",
                               r, t, t, s);
        }
    return 0;
}

static int check_config(const CostConfig* g, char* err, size_t errlen) {
    const CostShape* s = &g->shape;
    if (s->L < 1 || s->C < 1 || s->NH < 1 || s->V < 2 || s->max_T < 1 || s->C % s->NH)
        return set_err(err, errlen, "model shape: expected positive L, C, NH, V, context and C "
                       "a multiple of NH, found L=%d C=%d NH=%d V=%d context=%d",
                       s->L, s->C, s->NH, s->V, s->max_T);
    const GPTConfig cfg = costmodel_gpt_config(s);
    if (gpt_config_validate(&cfg, err, errlen) != 0) return -1;   // the window
    if (g->B < 1 || g->accum < 1 || g->dp < 1 || g->pq < 1 || g->pkv < 1 || g->T < 1)
        return set_err(err, errlen, "config: expected positive batch, accum, dp, pq, pkv, T, "
                       "found %d, %d, %d, %d, %d, %ld", g->B, g->accum, g->dp, g->pq, g->pkv, g->T);
    if (g->alg < 0 || g->alg >= COST_NALGS)
        return set_err(err, errlen, "config: unknown algorithm %d", (int)g->alg);
    if (g->recompute < GPT_RECOMPUTE_NONE || g->recompute > GPT_RECOMPUTE_FULL)
        return set_err(err, errlen, "config: recompute: expected 0 (none), 1 (selective) or 2 "
                       "(full), found %d", g->recompute);
    if (g->recompute_layers < 0 || g->recompute_layers > g->shape.L)
        return set_err(err, errlen, "config: recompute_layers: expected 0 (all) to the %d layers, "
                       "found %d", g->shape.L, g->recompute_layers);
    const long P = (long)g->pq * g->pkv;
    const long step = g->alg == COST_ZIGZAG ? 2 * P : P;
    if (g->T % step)
        return set_err(err, errlen, "mesh: --seq-len %ld must be a multiple of %ld (%s over P = "
                       "%ld ranks)", g->T, step, cost_algorithm_name(g->alg), P);
    // The all-to-alls split the key/value heads too (attention/ulysses.c): under grouped-query
    // attention those, fewer than the heads, decide which P and chunks fit.
    const int NKV = kv_heads(s), gqa = NKV < s->NH;
    const char* heads = gqa ? "key/value heads" : "heads";
    if (g->alg == COST_ULYSSES && NKV % P)
        return set_err(err, errlen, "mesh: ulysses splits the %d %s over P = %ld ranks; "
                       "expected P to divide them", NKV, heads, P);
    if (g->alg == COST_USP && NKV % g->pq)
        return set_err(err, errlen, "mesh: usp splits the %d %s over the pq = %d ranks of a "
                       "column; expected pq to divide them", NKV, heads, g->pq);
    const int a2a = g->alg == COST_ULYSSES || g->alg == COST_USP;
    const int split = g->alg == COST_ULYSSES ? (int)P : g->pq;
    if (gqa && a2a && g->chunks > 1 && (NKV / split) % g->chunks)
        return set_err(err, errlen, "--a2a-chunks %d: expected a divisor of the %d key/value "
                       "heads per rank of %s", g->chunks, NKV / split, cost_algorithm_name(g->alg));
    if (dist_chunks_check(g->chunks, a2a, NKV / split, cost_algorithm_name(g->alg), err, errlen))
        return -1;
    return check_documents(g->docs, g->T, err, errlen);
}

// The SP rank that receives the most bytes in one layer (forward + backward).
static int busiest_sp_rank(const CostConfig* g, Sizes z, int steps) {
    int best = 0;
    double most = -1;
    const int P = g->pq * g->pkv, ranks = cost_algorithm_ignores_mesh(g->alg) ? 1 : P;
    for (int i = 0; i < ranks; i++) {
        const OpList f = attention_ops(g, i, COMM_FORWARD, z, steps),
                     b = attention_ops(g, i, COMM_BACKWARD, z, steps);
        const double bytes = list_bytes(&f) + list_bytes(&b);
        if (bytes > most) most = bytes, best = i;
    }
    return best;
}

int costmodel_predict(const CostConfig* g, const Cluster* c, CostPrediction* out, char* err,
                      size_t errlen) {
    if (check_config(g, err, errlen) != 0) return -1;
    memset(out, 0, sizeof *out);
    const int P = g->pq * g->pkv, W = g->dp * P;
    const Sizes z = {c->act_bytes, c->acc_bytes};
    const Topology topo = topology(c, g);
    const double Tl = (double)g->T / P, N = g->B * Tl;

    // compute: the slowest rank, and the average one (ranks sharing cores pool their work), in
    // the causal layers and in the banded ones
    const int banded = banded_layers(&g->shape);
    LayerKind kind[2] = {layer_kind(c, g, g->shape.L - banded, 0),
                         banded ? layer_kind(c, g, banded, g->shape.window)
                                : (LayerKind){.layers = 0}};
    PhaseSeconds local = token_local_seconds(c, &g->shape, N, Tl);
    // recomputation is token-local backward work: it pools, overlaps and shares cores as the rest
    const double recompute =
        gpt_recompute_count((GptRecompute)g->recompute, g->recompute_layers, g->shape.L) *
        recompute_layer_seconds(c, &g->shape, N, (GptRecompute)g->recompute);
    local.backward += recompute;
    const double n = costmodel_num_params(&g->shape);
    const double shard = g->zero ? ceil(n / W) : n;
    // AdamW's 28 bytes per parameter hold for both builds (bf16 + fp32 master, or fp32 alone)
    double optimizer =
        kernel_seconds(c, CK_GLOBAL_NORM, kernel_cost_global_norm(shard),
                       c->param_bytes / KERNEL_COST_X) +
        kernel_seconds(c, CK_ADAMW, kernel_cost_adamw(shard), 1);
    // An untied model's wte gradient, which only the encoder adds to, is zeroed once a step
    // (model/gpt.c): one write of Vp C gradients.
    if (g->shape.untied_classifier) {
        const double n_wte = (double)gpt_padded_vocab(g->shape.V) * g->shape.C;
        const KernelCost zero = {0, KERNEL_COST_X * n_wte, 0};
        optimizer += kernel_seconds(c, CK_RESIDUAL_FORWARD, zero, c->param_bytes / KERNEL_COST_X);
    }
    if (g->muon) optimizer += muon_seconds(c, g, W);
    const CommOp muon_bcast = muon_broadcast_op(g, W);
    const double muon_comm = op_seconds(c, &topo, &muon_bcast);
    const double A = g->accum;
    double micro = local.forward + local.backward, micro_mean = micro;
    for (int k = 0; k < 2; k++) {
        micro += kind[k].layers * (kind[k].w.fwd_s + kind[k].w.bwd_s);
        micro_mean += kind[k].layers * (kind[k].w_mean.fwd_s + kind[k].w_mean.bwd_s);
    }
    // Cores shared by the node's ranks: its work over its cores (the ranks' work pools: a rank
    // that waits yields its core), or the slowest rank, whichever is longer, at the measured
    // aggregate throughput of that many ranks.
    double share = 1, opt_share = 1;
    if (c->shared_cores > 0) {
        const int W_node = topo.ranks_per_node, busy = W_node < c->shared_cores ? W_node : c->shared_cores;
        const double eff = curve_efficiency(&c->shared_eff, W_node);
        share = dmax(1, W_node * micro_mean / (busy * micro)) / eff;
        opt_share = (double)W_node / busy / eff;
    }

    const int overlapped = g->overlap && c->async_comm;
    // The layers' attention: each kind's schedule, on the busiest rank's operations (dist_cost.c's:
    // the same for both kinds but where Ring stops early), times its layers.
    LayerSeconds layers = {0, 0, 0};
    double attention_flops = 0, attention_bytes = 0, attention_calls = 0;
    for (int k = 0; k < 2; k++) {
        if (kind[k].layers == 0) continue;
        const int i = busiest_sp_rank(g, z, kind[k].steps);
        const OpList f = attention_ops(g, i, COMM_FORWARD, z, kind[k].steps),
                     b = attention_ops(g, i, COMM_BACKWARD, z, kind[k].steps);
        AttentionWork ws = kind[k].w;   // the critical rank's work, on shared cores stretched
        ws.fwd_s *= share, ws.bwd_s *= share;
        const LayerSeconds one =
            g->alg == COST_2D ? schedule_2d(c, &topo, &f, &b, &ws, overlapped)
            : g->alg == COST_2D_OVERLAP
                ? schedule_2d_overlap(c, &topo, g, &f, &b, &ws, overlapped)
            : g->alg == COST_ULYSSES || g->alg == COST_USP
                ? schedule_all_to_all(c, &topo, &f, &b, &ws, overlapped, kind[k].steps,
                                      cost_chunks(g))
                : schedule_ring(c, &topo, &f, &b, &ws, overlapped, kind[k].steps);
        layers.forward += kind[k].layers * one.forward;
        layers.backward += kind[k].layers * one.backward;
        layers.comm += kind[k].layers * one.comm;
        attention_flops += kind[k].layers * (kind[k].w.fwd_flops + kind[k].w.bwd_flops);
        attention_bytes += kind[k].layers * (list_bytes(&f) + list_bytes(&b));
        attention_calls += kind[k].layers * (list_calls(&f) + list_calls(&b));
    }
    const double last_backward = local.backward * share + layers.backward;
    const GradComm grads = grad_comm(c, &topo, g, overlapped, last_backward,
                                     local.forward * share + layers.forward);

    out->forward_s = A * (local.forward * share + layers.forward);
    out->backward_s = A * (local.backward * share + layers.backward);
    out->optimizer_s = optimizer * opt_share + muon_comm;
    out->grad_wait_s = grads.exposed;
    out->compute_s = A * micro * share + out->optimizer_s - muon_comm;
    out->fixed_s = c->step_fixed_s;
    out->recompute_s = A * recompute * share;
    out->step_s = out->forward_s + out->backward_s + out->optimizer_s + out->grad_wait_s +
                  out->fixed_s;
    out->exposed_comm_s = out->step_s - out->compute_s - out->fixed_s;
    out->attention_comm_s = A * layers.comm;
    out->grad_comm_s = grads.seconds;
    out->muon_comm_s = muon_comm;
    out->comm_s = out->attention_comm_s + out->grad_comm_s + out->muon_comm_s;
    out->attention_bytes = A * attention_bytes;
    out->calls_per_step = A * attention_calls;
    out->grad_bytes = grads.bytes;
    out->muon_bytes = muon_bcast.bytes;
    out->bytes_per_rank = out->attention_bytes + out->grad_bytes + out->muon_bytes;
    out->attention_flops = A * attention_flops;
    out->flops_per_rank = out->attention_flops + A * token_local_flops(&g->shape, N);
    out->tokens_per_s = (double)g->B * g->T * g->dp * g->accum / out->step_s;
    out->mfu = out->tokens_per_s * costmodel_flops_per_token(&g->shape, g->T) /
               ((double)W * c->matmul_flops);
    out->memory_bytes = memory_bytes(c, g);
    out->max_pairs = kind[0].pairs;
    out->banded_pairs = kind[1].pairs;
    out->max_priced = kind[0].priced[0];
    out->banded_priced = kind[1].priced[0];
    out->pair_share = 1;
    if (g->docs) {   // every rank's pairs against the same layers' without documents
        double with = 0, without = 0;
        for (int k = 0; k < 2; k++) {
            const long window = k ? g->shape.window : 0;
            with += kind[k].layers * kind[k].mean_pairs * P;
            without += kind[k].layers * (double)window_visible_pairs(g->T, window);
        }
        out->pair_share = with / without;
    }
    out->row_tier = topo.path[g->pkv > 1 ? PATH_ROW : PATH_ROW_HOP].tier;
    out->col_tier = topo.path[g->pq > 1 ? PATH_COL : PATH_COL_HOP].tier;
    out->ring_tier = topo.path[PATH_RING_HOP].tier;
    out->world_tier = topo.path[PATH_WORLD].tier;
    out->sp_tier = topo.path[PATH_SP].tier;
    return 0;
}
