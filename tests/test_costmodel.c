// The cost model (costmodel/): its bytes equal attention/dist_cost.c's volumes plus the gradient
// reduction, its attention FLOPs equal 4*HS + 10*HS per visible pair of the slowest rank (causal
// and banded layers, under document masks too, the pair counts against brute force on every
// rank), a
// collective's alpha-beta time on a known answer, the cluster parser's one-line errors, the
// ranked table, the committed cluster files, and --recompute: the recomputed kernels' time and
// nothing else, the ranking's choice of the cheapest mode that fits, an explicit one kept; and
// grouped-query attention: the parameters and GEMMs of the narrower qkv projection, K/V bytes,
// the CUDA kernels' widening passes, Ulysses' and USP's split of the key/value heads.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_cost.h"
#include "comm/fail.h"
#include "comm/mesh.h"
#include "costmodel/costmodel.h"
#include "model/activations.h"
#include "model/config.h"
#include "model/documents.h"
#include "tests/test_expect.h"
#include "tools/kernel_costs.h"

// A cluster whose compute is free (huge peaks), so a step is its communication: one GPU per
// node, every transfer inter-node at 10 GB/s, 5 us per call and 1 us per message.
static const char* FREE_COMPUTE =
    "name = test\n"
    "node.gpus = 1  # s\nnode.shared_cores = 0  # s\nnode.shared_efficiency = 0:1  # s\n"
    "node.async_comm = 1  # s\n"
    "device.memory_gib = 80  # s\nmatmul.peak_tflops = 1e9  # s\nmatmul.efficiency = 0:1  # s\n"
    "attention.forward_efficiency = 0:1  # s\nattention.backward_efficiency = 0:1  # s\nvector.peak_tflops = 1e9  # s\nvector.efficiency = 0:1  # s\n"
    "memory.bandwidth_gbs = 1e9  # s\nmemory.efficiency = 0:1  # s\nbytes.activation = 2  # s\n"
    "bytes.accumulator = 4  # s\nbytes.param = 2  # s\nbytes.optimizer_state = 12  # s\n"
    "inter.nics_per_node = 1  # s\nintra.bandwidth_gbs = 100  # s\nintra.p2p_bandwidth_gbs = 100  # s\n"
    "intra.efficiency = 1  # s\nintra.call_latency_us = 5  # s\nintra.hop_latency_us = 1  # s\n"
    "inter.bandwidth_gbs = 10  # s\ninter.efficiency = 1  # s\ninter.call_latency_us = 5  # s\n"
    "inter.hop_latency_us = 1  # s\n";

static Cluster parse_or_die(const char* name, const char* text) {
    Cluster c;
    char err[ERR_LEN];
    if (cluster_parse(name, text, &c, err, sizeof err) != 0) setup_fail("%s", err);
    return c;
}

static CostShape tiny_shape(long T) { return (CostShape){2, 64, 4, 512, (int)T, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; }
// The same with grouped-query attention: kv of its 4 heads' key/value heads.
static CostShape tiny_gqa(long T, int kv) {
    CostShape s = tiny_shape(T);
    s.kv_heads = kv;
    return s;
}

static CostPrediction predict(const CostConfig* g, const Cluster* c) {
    CostPrediction p;
    char err[ERR_LEN];
    if (costmodel_predict(g, c, &p, err, sizeof err) != 0) setup_fail("%s", err);
    return p;
}

// dist_cost.c's bytes of one layer (forward + backward) for the busiest SP rank.
// steps: the ring family's (ring_steps; P for the whole ring).
static double reference_attention_bytes(const CostConfig* g, size_t act, size_t acc, int steps) {
    const int P = g->pq * g->pkv, Tl = (int)(g->T / P), NH = g->shape.NH, HS = g->shape.C / NH;
    const int NKV = g->shape.kv_heads ? g->shape.kv_heads : NH;
    double most = 0;
    for (int i = 0; i < P; i++) {
        Mesh m;
        char err[ERR_LEN];
        if (mesh_init(&m, 1, g->pq, g->pkv, i, P, err) != 0) setup_fail("%s", err);
        double bytes = 0;
        for (int ph = COMM_FORWARD; ph <= COMM_BACKWARD; ph++) {
            CommVolume v;
            if (g->alg == COST_2D) v = attention2d_volume(&m, ph, g->B, Tl, NH, NKV, HS, g->keep_kv, act, acc);
            else if (g->alg == COST_2D_OVERLAP) v = attention2d_overlap_volume(&m, ph, g->B, Tl, NH, NKV, HS, act, acc);
            else if (g->alg == COST_ULYSSES) v = ulysses_volume(&m, ph, g->B, Tl, NH, NKV, HS, cost_chunks(g), act, acc);
            else if (g->alg == COST_USP) v = usp_volume(&m, ph, g->B, Tl, NH, NKV, HS, cost_chunks(g), act, acc);
            else v = ring_volume(&m, ph, g->B, Tl, NH, NKV, HS, steps, act, acc);
            for (int k = 0; k < COMM_NKINDS; k++) bytes += (double)v.kind[k].bytes;
        }
        most = bytes > most ? bytes : most;
    }
    return most;
}

// The gradient reduction as train.c does it and comm.h counts it: an all-reduce of the
// parameters (or ZeRO-1's reduce-scatter + all-gather of padded shards) and the loss scalars.
// n: the model's parameters.
static double reference_grad_bytes_of(const CostConfig* g, double e, long long n) {
    const long long W = (long long)g->dp * g->pq * g->pkv;
    if (W == 1) return 0;
    // the loss, ZeRO-1's gradient norm and the z-loss in one fp64 all-reduce
    const long long scalars = 2 * (W - 1) * (1 + g->zero + g->z_loss) * 8 / W;
    if (g->zero) {
        const long long shard = (n + W - 1) / W;
        const long long params_norm = g->params_norm ? 2 * (W - 1) * 8 / W : 0;
        return (double)(2 * (W - 1) * shard * (long long)e + scalars + params_norm);
    }
    return (double)(2 * (W - 1) * n * (long long)e / W + scalars);
}

static double reference_grad_bytes(const CostConfig* g, double e) {
    return reference_grad_bytes_of(g, e, (long long)costmodel_num_params(&g->shape));
}

static void test_bytes_equal_dist_cost(const Cluster* c) {
    const CostConfig cases[] = {
        {tiny_shape(256), 256, 2, 1, 1, 2, 2, COST_2D, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(384), 384, 1, 2, 2, 2, 3, COST_2D, 0, 0, 1, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(512), 512, 1, 1, 1, 4, 2, COST_2D_OVERLAP, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(256), 256, 1, 3, 1, 1, 4, COST_RING, 1, 1, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(256), 256, 2, 1, 2, 1, 4, COST_STRIPED, 0, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(512), 512, 1, 1, 1, 1, 8, COST_ZIGZAG, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(256), 256, 1, 1, 4, 1, 1, COST_2D, 1, 1, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(512), 512, 2, 1, 2, 2, 2, COST_ULYSSES, 1, 1, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(512), 512, 1, 2, 1, 2, 4, COST_USP, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(512), 512, 2, 1, 2, 1, 2, COST_ULYSSES, 1, 1, 0, GPT_RECOMPUTE_NONE, NULL, 2, 0, 0, 0, 0, 0, 0, 0},
        {tiny_shape(512), 512, 1, 2, 1, 2, 2, COST_USP, 0, 0, 0, GPT_RECOMPUTE_NONE, NULL, 2, 0, 0, 0, 0, 0, 0, 0},
        // --z-loss (one more scalar in the loss all-reduce), --log-params-norm (ZeRO-1: an
        // all-reduce of its own; without ZeRO-1 nothing)
        {tiny_shape(256), 256, 2, 1, 1, 2, 2, COST_2D, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 1, 1, 0},
        {tiny_shape(256), 256, 1, 3, 1, 1, 4, COST_RING, 1, 1, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 1, 0, 0},
        {tiny_shape(384), 384, 1, 2, 2, 2, 3, COST_2D, 0, 1, 1, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 1, 1, 0},
        {tiny_shape(256), 256, 2, 1, 2, 1, 4, COST_STRIPED, 0, 1, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 1, 0},
        // grouped-query attention: K, V and their gradients move kv / 4 of the bytes
        {tiny_gqa(256, 2), 256, 2, 1, 1, 2, 2, COST_2D, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_gqa(384, 1), 384, 1, 2, 2, 2, 3, COST_2D, 0, 0, 1, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_gqa(512, 2), 512, 1, 1, 1, 4, 2, COST_2D_OVERLAP, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL,
         1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_gqa(256, 1), 256, 1, 3, 1, 1, 4, COST_RING, 1, 1, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_gqa(512, 2), 512, 1, 1, 1, 1, 8, COST_ZIGZAG, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_gqa(512, 2), 512, 2, 1, 2, 1, 2, COST_ULYSSES, 1, 1, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
        {tiny_gqa(512, 2), 512, 1, 2, 1, 2, 4, COST_USP, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const CostConfig* g = &cases[k];
        const CostPrediction p = predict(g, c);
        const double att = g->accum * g->shape.L *
                           reference_attention_bytes(g, (size_t)c->act_bytes, (size_t)c->acc_bytes,
                                                     g->pq * g->pkv);
        const double grad = reference_grad_bytes(g, c->param_bytes);
        EXPECT(p.attention_bytes == att && p.grad_bytes == grad && p.bytes_per_rank == att + grad,
               "bytes %s dp %d x %dx%d (accum %d, zero %d, keep_kv %d, key/value heads %d, z-loss "
               "%d, params norm %d): model %.0f + %.0f, dist_cost %.0f + gradients %.0f",
               cost_algorithm_name(g->alg), g->dp, g->pq, g->pkv, g->accum, g->zero, g->keep_kv,
               g->shape.kv_heads, g->z_loss, g->params_norm, p.attention_bytes, p.grad_bytes, att,
               grad);
    }
}

// Visible pairs of one rank by brute force over absolute positions: the rank's queries are the
// positions `mine(t)` picks, its keys all T positions (its own and the ones that travel to it);
// key s is visible to query t if s <= t, under a window W t - s < W, and under documents
// (start: (T), each position's document's first position) s >= start[t]. Returns the pairs a
// rank computes: for ATTENTION2D, keys of column c only.
typedef struct { CostAlgorithm a; int pq, pkv, i; long T; } RankOf;

static int owns_query(const RankOf* r, long t) {
    const int P = r->pq * r->pkv;
    const long Tl = r->T / P;
    switch (r->a) {
    case COST_2D:
    case COST_2D_OVERLAP: return t % r->pq == r->i % r->pq;
    case COST_RING: return t / Tl == r->i;
    case COST_STRIPED: return t % P == r->i;
    case COST_ULYSSES: return 1;   // every query, of NH / P heads
    case COST_USP: return t % r->pkv == r->i / r->pq;   // the column's tokens, of NH / pq heads
    default: {   // zigzag: chunks i and 2P-1-i of T/2P tokens
        const long chunk = t / (Tl / 2);
        return chunk == r->i || chunk == 2 * P - 1 - r->i;
    }
    }
}

// Ulysses: all pairs of NH / P heads, as pairs per head of NH: 1 / P of them; USP likewise 1 / pq
// of its column's queries' pairs.
static double brute_pairs(const RankOf* r, long window, const int* start) {
    long long n = 0;
    const int twod = r->a == COST_2D || r->a == COST_2D_OVERLAP;
    for (long t = 0; t < r->T; t++) {
        if (!owns_query(r, t)) continue;
        for (long k = 0; k <= t; k++)
            n += (!window || t - k < window) && (!start || k >= start[t]) &&
                 (!twod || k % r->pkv == r->i / r->pq);
    }
    return r->a == COST_ULYSSES ? (double)n / (r->pq * r->pkv)
           : r->a == COST_USP   ? (double)n / r->pq
                                : (double)n;
}

// The most pairs of any rank, brute force over every rank and position.
static double max_pairs_brute_force(CostAlgorithm a, int pq, int pkv, long T, long window) {
    double most = 0;
    for (int i = 0; i < pq * pkv; i++) {
        const RankOf r = {a, pq, pkv, i, T};
        const double n = brute_pairs(&r, window, NULL);
        most = n > most ? n : most;
    }
    return most;
}

// The closed counts against brute force on every rank, with and without windows: dist_cost.c's
// attention2d_visible_pairs / ring_visible_pairs, each rank's count summing to the whole
// sequence's window_visible_pairs, and its known answers.
static void test_window_pairs(void) {
    EXPECT(window_visible_pairs(16, 0) == 136 && window_visible_pairs(16, 16) == 136 &&
           window_visible_pairs(16, 40) == 136 && window_visible_pairs(16, 4) == 10 + 12 * 4 &&
           window_visible_pairs(16, 1) == 16,
           "window_visible_pairs(16, 0 / 16 / 40 / 4 / 1) = %lld %lld %lld %lld %lld, expected "
           "136 136 136 58 16", window_visible_pairs(16, 0), window_visible_pairs(16, 16),
           window_visible_pairs(16, 40), window_visible_pairs(16, 4), window_visible_pairs(16, 1));
    const struct { CostAlgorithm a; int pq, pkv; long T; } cases[] = {
        {COST_2D, 2, 2, 48}, {COST_2D, 2, 3, 72}, {COST_2D, 3, 1, 36}, {COST_RING, 1, 4, 48},
        {COST_STRIPED, 1, 3, 48}, {COST_ZIGZAG, 1, 4, 64}, {COST_ZIGZAG, 1, 3, 48},
    };
    const long windows[] = {0, 1, 5, 12, 17, 1000};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            const int P = cases[k].pq * cases[k].pkv;
            const long T = cases[k].T, W = windows[w];
            long long sum = 0;
            for (int i = 0; i < P; i++) {
                const RankOf r = {cases[k].a, cases[k].pq, cases[k].pkv, i, T};
                const int twod = cases[k].a == COST_2D;
                const RingLayout layout = cases[k].a == COST_RING      ? RING_CONTIGUOUS
                                          : cases[k].a == COST_STRIPED ? RING_CYCLIC
                                                                       : RING_ZIGZAG;
                const long long closed =
                    twod ? attention2d_visible_pairs(cases[k].pq, cases[k].pkv, i % cases[k].pq,
                                                     i / cases[k].pq, T, W, NULL)
                         : ring_visible_pairs(layout, P, i, T, W, NULL);
                const long long brute = brute_pairs(&r, W, NULL);
                sum += closed;
                EXPECT(closed == brute, "visible pairs %s %dx%d rank %d T=%ld window %ld: closed "
                       "%lld, brute force %lld", cost_algorithm_name(cases[k].a), cases[k].pq,
                       cases[k].pkv, i, T, W, closed, brute);
            }
            EXPECT(sum == window_visible_pairs(T, W), "visible pairs %s %dx%d T=%ld window %ld: "
                   "ranks sum to %lld, the sequence has %lld", cost_algorithm_name(cases[k].a),
                   cases[k].pq, cases[k].pkv, T, W, sum, window_visible_pairs(T, W));
        }
}

// What the kernels compute (attention_tile_pairs): known answers of the tile rule, the closed
// per-rank sums equal to the visible pairs under the 1 x 1 tile (every schedule, window and
// rank), at least the visible pairs under any tile; and the price: a causal call alone is priced
// at its pairs, a sliding window over Striped's cyclic tokens (W / P keys of each query in each
// step's block) several times its pairs, and the cluster's tiles change nothing else.
static void test_tile_pairs(const Cluster* a100) {
    const AttentionProblem causal8 = attention_problem(1, 1, 1, 8, 8, token_positions(0, 1),
                                                       token_positions(0, 1));
    AttentionProblem window16 = attention_problem(1, 1, 1, 16, 16, token_positions(0, 1),
                                                  token_positions(0, 1));
    window16.window = 4;
    // causal 8, 4-row tiles: rows 0-3 keys [0, 4), rows 4-7 [0, 8) = 48; keys in tiles of 3:
    // [0, 6) and [0, 9) clipped to 8 = 56. Window 4 over 16: [0, 4), [1, 8), [5, 12), [9, 16):
    // 16 + 3 x 28 = 100 (58 visible).
    const long long got[] = {
        attention_tile_pairs(&causal8, (AttentionTile){1, 1}),
        attention_tile_pairs(&causal8, (AttentionTile){4, 1}),
        attention_tile_pairs(&causal8, (AttentionTile){4, 4}),
        attention_tile_pairs(&causal8, (AttentionTile){4, 3}),
        attention_tile_pairs(&window16, (AttentionTile){4, 1}),
        attention_tile_pairs(&window16, (AttentionTile){1, 1}),
        attention_causal_tile_pairs(8, (AttentionTile){4, 3}),
    };
    const long long want[] = {36, 48, 48, 56, 100, 58, 56};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        EXPECT(got[k] == want[k], "attention_tile_pairs known answer %zu: %lld, expected %lld", k,
               got[k], want[k]);
    const AttentionTile tiles[] = {{1, 1}, {4, 1}, {8, 4}, {3, 5}};
    const long windows[] = {0, 1, 5, 12, 1000};
    for (int pq = 1; pq <= 3; pq++)
        for (int pkv = 1; pkv <= 3; pkv++)
            for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++)
                for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
                    const int P = pq * pkv;
                    const long T = 12L * P * 2, W = windows[w];
                    for (int i = 0; i < P; i++) {
                        const long long vis2d = attention2d_visible_pairs(pq, pkv, i % pq, i / pq,
                                                                          T, W, NULL);
                        for (int layout = 0; layout < 3; layout++) {
                            const long long vis = ring_visible_pairs((RingLayout)layout, P, i, T,
                                                                     W, NULL),
                                tile = ring_tile_pairs((RingLayout)layout, P, i, P, T, W, NULL,
                                                       tiles[t]);
                            EXPECT(t ? tile >= vis : tile == vis, "ring_tile_pairs layout %d P=%d "
                                   "rank %d T=%ld window %ld tile %dx%d: %lld, visible %lld",
                                   layout, P, i, T, W, tiles[t].rows, tiles[t].keys, tile, vis);
                        }
                        for (int overlap = 0; overlap < 2; overlap++) {
                            const long long tile = attention2d_tile_pairs(
                                pq, pkv, i % pq, i / pq, T, W, NULL, overlap, tiles[t]);
                            EXPECT(t ? tile >= vis2d : tile == vis2d, "attention2d_tile_pairs "
                                   "%dx%d rank %d overlap %d T=%ld window %ld tile %dx%d: %lld, "
                                   "visible %lld", pq, pkv, i, overlap, T, W, tiles[t].rows,
                                   tiles[t].keys, tile, vis2d);
                        }
                    }
                }
    // The same cluster without its tiles prices the visible pairs.
    Cluster pairs_only = *a100;
    pairs_only.attention_tile[0] = pairs_only.attention_tile[1] = (AttentionTile){1, 1};
    CostShape s = tiny_shape(4096);
    const CostConfig one = {s, 4096, 1, 1, 1, 1, 1, COST_2D, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    const CostPrediction a = predict(&one, a100), b = predict(&one, &pairs_only);
    EXPECT(a.step_s == b.step_s && a.max_priced == a.max_pairs,
           "one device, causal: step %.9f s with tiles, %.9f s without; priced %.0f of %.0f pairs",
           a.step_s, b.step_s, a.max_priced, a.max_pairs);
    s.window = 64, s.window_every = 1;
    const CostConfig striped = {s, 4096, 1, 1, 1, 1, 8, COST_STRIPED, 1, 0, 0, GPT_RECOMPUTE_NONE,
                                NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    const CostPrediction c = predict(&striped, a100), d = predict(&striped, &pairs_only);
    // Each rank: every step's block of 512 x 512 (stride 8), 8 keys per query at most; the
    // forward's 128-row tiles span 16 + 8 keys of the block, widened to 64-key tiles.
    double most = 0;
    for (int i = 0; i < 8; i++) {
        const double tile = (double)ring_tile_pairs(RING_CYCLIC, 8, i, 8, 4096, 64, NULL,
                                                    a100->attention_tile[0]);
        most = tile > most ? tile : most;
    }
    const double causal = (double)attention_causal_tile_pairs(512, a100->attention_tile[0]) /
                          (512.0 * 513 / 2);
    EXPECT(fabs(c.banded_priced - most / causal) < 1e-6 * c.banded_priced &&
           c.banded_priced > 4 * c.banded_pairs && c.compute_s > d.compute_s &&
           c.banded_pairs == d.banded_pairs && d.banded_priced == d.banded_pairs &&
           c.attention_flops == d.attention_flops,
           "striped 1x8 window 64: priced %.0f (closed %.0f) of %.0f pairs, compute %.6f s with "
           "tiles, %.6f s without, FLOPs %.6g and %.6g", c.banded_priced, most / causal,
           c.banded_pairs, c.compute_s, d.compute_s, c.attention_flops, d.attention_flops);
    // A masked score at half a visible pair's cost (the CPU kernel exponentiates only visible
    // ones): V + (C - V) / 2 over 1 + (w - 1) / 2 on the rank where that is most; at no cost,
    // the visible pairs.
    Cluster half = *a100, free_mask = *a100;
    half.attention_masked_cost[0] = half.attention_masked_cost[1] = 0.5;
    free_mask.attention_masked_cost[0] = free_mask.attention_masked_cost[1] = 0;
    double most_half = 0;
    for (int i = 0; i < 8; i++) {
        const double tile = (double)ring_tile_pairs(RING_CYCLIC, 8, i, 8, 4096, 64, NULL,
                                                    a100->attention_tile[0]),
                     vis = (double)ring_visible_pairs(RING_CYCLIC, 8, i, 4096, 64, NULL);
        most_half = fmax(most_half, (vis + 0.5 * (tile - vis)) / (1 + 0.5 * (causal - 1)));
    }
    const CostPrediction e = predict(&striped, &half), f = predict(&striped, &free_mask);
    EXPECT(fabs(e.banded_priced - most_half) < 1e-6 * most_half &&
           f.banded_priced == f.banded_pairs && f.compute_s == d.compute_s && d.compute_s < e.compute_s && e.compute_s < c.compute_s,
           "striped 1x8 window 64, masked scores at 0.5: priced %.0f (closed %.0f); at 0: %.0f of "
           "%.0f pairs; compute %.6f < %.6f < %.6f s (0, 0.5, 1)", e.banded_priced, most_half,
           f.banded_priced, f.banded_pairs, f.compute_s, e.compute_s, c.compute_s);
}

// Ring and Zigzag stop early where no query reaches back (ring_steps): their known answers and
// Zigzag's two-way tour, and the predicted bytes of banded layers and short documents equal
// dist_cost.c's over those steps (per layer kind).
static void test_ring_steps(const Cluster* c) {
    const struct { RingLayout layout; int P; long window; int span, want; } known[] = {
        {RING_CONTIGUOUS, 4, 0, 0, 4},  {RING_CONTIGUOUS, 4, 16, 0, 2}, {RING_CONTIGUOUS, 4, 17, 0, 2},
        {RING_CONTIGUOUS, 4, 18, 0, 3}, {RING_CONTIGUOUS, 4, 1, 0, 1},  {RING_CONTIGUOUS, 4, 0, 33, 3},
        {RING_CONTIGUOUS, 4, 10, 5, 2}, {RING_CONTIGUOUS, 4, 0, 64, 4}, {RING_CYCLIC, 4, 1, 1, 4},
        // Zigzag's chunks of Tl / 2 = 8: 1 + 2 ceil(look / 8) steps where that is under P
        {RING_ZIGZAG, 4, 2, 2, 3},      {RING_ZIGZAG, 4, 0, 0, 4},      {RING_ZIGZAG, 4, 10, 0, 4},
        {RING_ZIGZAG, 4, 1, 0, 1},      {RING_ZIGZAG, 8, 9, 0, 3},      {RING_ZIGZAG, 8, 17, 0, 5},
        {RING_ZIGZAG, 8, 0, 25, 7},     {RING_ZIGZAG, 8, 26, 0, 8},     {RING_ZIGZAG, 3, 5, 0, 3},
        {RING_CYCLIC, 8, 2, 0, 8},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        const int got = ring_steps(known[k].layout, known[k].P, 16, known[k].window, known[k].span);
        EXPECT(got == known[k].want, "ring_steps(layout %d, P %d, Tl 16, window %ld, span %d) = "
               "%d, expected %d", (int)known[k].layout, known[k].P, known[k].window,
               known[k].span, got, known[k].want);
    }
    // the tours: Zigzag's two-way one under P steps, the one-way ring otherwise
    const struct { RingLayout layout; int P, steps, offset[8]; } tours[] = {
        {RING_ZIGZAG, 8, 5, {0, -1, -2, 1, 2}}, {RING_ZIGZAG, 8, 3, {0, -1, 1}},
        {RING_ZIGZAG, 4, 4, {0, -1, -2, -3}},   {RING_CONTIGUOUS, 8, 3, {0, -1, -2}},
        {RING_ZIGZAG, 8, 1, {0}},
    };
    for (size_t k = 0; k < sizeof tours / sizeof tours[0]; k++)
        for (int s = 0; s < tours[k].steps; s++) {
            const int P = tours[k].P, want = tours[k].offset[s];
            const int got = ring_step_offset(tours[k].layout, P, tours[k].steps, s);
            EXPECT(got == want, "ring_step_offset(layout %d, P %d, %d steps, step %d) = %d, "
                   "expected %d", (int)tours[k].layout, P, tours[k].steps, s, got, want);
        }
    // the origins, mod P: rank 0 holds rank 7's block at step 1 and rank 7 rank 0's at step 2;
    // the turn of 5 steps brings rank 3 the block of rank 4 at step 3
    EXPECT(ring_step_origin(RING_ZIGZAG, 8, 3, 0, 1) == 7 &&
               ring_step_origin(RING_ZIGZAG, 8, 3, 7, 2) == 0 &&
               ring_step_origin(RING_ZIGZAG, 8, 5, 3, 3) == 4 &&
               ring_step_origin(RING_CONTIGUOUS, 8, 3, 1, 2) == 7,
           "ring_step_origin: a tour's origins (mod P) are not the known ones");
    const struct { CostAlgorithm a; int window, every, doc_len, steps[2]; } cases[] = {
        {COST_RING, 64, 1, 0, {2, 2}},  {COST_RING, 64, 2, 0, {2, 4}},  {COST_RING, 0, 0, 32, {2, 2}},
        {COST_RING, 200, 2, 32, {2, 2}}, {COST_ZIGZAG, 64, 1, 32, {3, 3}}, {COST_RING, 0, 0, 0, {4, 4}},
        {COST_ZIGZAG, 64, 2, 0, {3, 4}}, {COST_ZIGZAG, 100, 1, 0, {4, 4}},
    };
    int start[512];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        CostShape s = tiny_shape(512);
        s.window = cases[k].window, s.window_every = cases[k].every;
        costmodel_fixed_documents(512, cases[k].doc_len ? cases[k].doc_len : 512, start);
        const CostDocuments docs = {start, 1, 512};
        const CostConfig g = {s, 512, 2, 3, 1, 1, 4, cases[k].a, 1, 0, 0, GPT_RECOMPUTE_NONE,
                              cases[k].doc_len ? &docs : NULL, 1, 0, 0, 0, 0, 0, 0, 0};
        const CostPrediction p = predict(&g, c);
        // tiny_shape's 2 layers: layer 0 banded with every 1 or 2, layer 1 with every 1
        const double want = g.accum *
            (reference_attention_bytes(&g, (size_t)c->act_bytes, (size_t)c->acc_bytes,
                                       cases[k].steps[0]) +
             reference_attention_bytes(&g, (size_t)c->act_bytes, (size_t)c->acc_bytes,
                                       cases[k].steps[1]));
        EXPECT(p.attention_bytes == want, "%s 1x4 T=512, window %d every %d, documents of %d: "
               "%.0f attention bytes, expected %.0f (steps %d and %d)",
               cost_algorithm_name(cases[k].a), cases[k].window, cases[k].every, cases[k].doc_len,
               p.attention_bytes, want, cases[k].steps[0], cases[k].steps[1]);
    }
}

// Random documents over `rows` sequences of T: each position after the first begins one with
// probability 1/mean (a fixed generator, so the same layouts every run). start: (rows, T).
static void random_documents(int rows, long T, int mean, unsigned seed, int* start) {
    int* tokens = xmalloc(sizeof(int) * (size_t)(rows * T), "document tokens");
    int* end = xmalloc(sizeof(int) * (size_t)(rows * T), "document ends");
    for (long i = 0; i < rows * T; i++) {
        seed = seed * 1664525u + 1013904223u;
        tokens[i] = (seed >> 8) % (unsigned)mean == 0;
    }
    document_bounds(tokens, rows, (int)T, 1, start, end);
    free(tokens);
    free(end);
}

static RingLayout layout_of(CostAlgorithm a) {
    return a == COST_RING ? RING_CONTIGUOUS : a == COST_STRIPED ? RING_CYCLIC : RING_ZIGZAG;
}

// Document masks: each rank's count against brute force under random documents, documents of a
// fixed length and one document (causal), with and without a window; the ranks sum to the
// sequence's document_pairs; costmodel_fixed_documents' known answer.
static void test_document_pairs(void) {
    int fixed[10];
    costmodel_fixed_documents(10, 4, fixed);
    const int want_fixed[10] = {0, 0, 0, 0, 4, 4, 4, 4, 8, 8};
    EXPECT(!memcmp(fixed, want_fixed, sizeof fixed), "costmodel_fixed_documents(10, 4): %d %d %d "
           "%d %d %d %d %d %d %d, expected 0 0 0 0 4 4 4 4 8 8", fixed[0], fixed[1], fixed[2],
           fixed[3], fixed[4], fixed[5], fixed[6], fixed[7], fixed[8], fixed[9]);
    const struct { CostAlgorithm a; int pq, pkv; long T; } cases[] = {
        {COST_2D, 2, 2, 48}, {COST_2D, 2, 3, 72}, {COST_2D, 3, 1, 36}, {COST_RING, 1, 4, 48},
        {COST_STRIPED, 1, 3, 48}, {COST_ZIGZAG, 1, 4, 64}, {COST_ZIGZAG, 1, 3, 48},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const long T = cases[k].T;
        const int P = cases[k].pq * cases[k].pkv;
        int start[5][72], drawn[3 * 72];
        random_documents(3, T, 9, 11u + (unsigned)k, drawn);
        for (int r = 0; r < 3; r++) memcpy(start[r], drawn + r * T, sizeof(int) * (size_t)T);
        costmodel_fixed_documents(T, 7, start[3]);
        costmodel_fixed_documents(T, T, start[4]);
        for (int d = 0; d < 5; d++)
            for (long W = 0; W <= 5; W += 5) {
                long long sum = 0;
                for (int i = 0; i < P; i++) {
                    const RankOf r = {cases[k].a, cases[k].pq, cases[k].pkv, i, T};
                    const long long closed =
                        cases[k].a == COST_2D
                            ? attention2d_visible_pairs(cases[k].pq, cases[k].pkv, i % cases[k].pq,
                                                        i / cases[k].pq, T, W, start[d])
                            : ring_visible_pairs(layout_of(cases[k].a), P, i, T, W, start[d]);
                    const long long brute = brute_pairs(&r, W, start[d]);
                    long long row[3] = {closed};   // 2d: the count of its whole mesh row
                    const int col = cases[k].a == COST_2D ? i / cases[k].pq : 0;
                    if (cases[k].a == COST_2D)
                        attention2d_row_visible_pairs(cases[k].pq, cases[k].pkv, i % cases[k].pq,
                                                      T, W, start[d], row);
                    sum += closed;
                    EXPECT(closed == brute && row[col] == brute,
                           "document pairs %s %dx%d rank %d T=%ld window %ld, layout %d: counted "
                           "%lld (2d: with its mesh row %lld), brute force %lld",
                           cost_algorithm_name(cases[k].a), cases[k].pq, cases[k].pkv, i, T, W,
                           d, closed, row[col], brute);
                }
                const double whole = d == 4 ? (double)window_visible_pairs(T, W)
                                            : document_pairs(start[d], 1, (int)T, W);
                EXPECT(sum == whole, "document pairs %s %dx%d T=%ld window %ld, layout %d: ranks "
                       "sum to %lld, the sequence has %.0f", cost_algorithm_name(cases[k].a),
                       cases[k].pq, cases[k].pkv, T, W, d, sum, whole);
            }
    }
}

// Predictions under documents: the slowest rank's pairs are the most of any rank averaged over
// the rows (brute force), the attention FLOPs 14*HS per such pair, the pair share that of the
// rows; one document per sequence prices as causal attention, shorter ones faster; documents
// that are not document starts are refused in one line.
static void test_document_flops(const Cluster* c) {
    const struct { CostAlgorithm a; int pq, pkv; long T; int window; } cases[] = {
        {COST_2D, 2, 2, 512, 0}, {COST_2D_OVERLAP, 3, 2, 768, 0}, {COST_RING, 1, 4, 512, 0},
        {COST_STRIPED, 1, 6, 768, 0}, {COST_ZIGZAG, 1, 4, 512, 0}, {COST_ZIGZAG, 1, 4, 512, 70},
        {COST_2D, 4, 2, 1024, 100}, {COST_ULYSSES, 1, 4, 512, 0}, {COST_ULYSSES, 2, 1, 768, 70},
        {COST_USP, 2, 2, 512, 0}, {COST_USP, 2, 3, 768, 70},
    };
    enum { ROWS = 2 };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const long T = cases[k].T;
        int* start = xmalloc(sizeof(int) * ROWS * (size_t)T, "document starts");
        random_documents(ROWS, T, 100, 5u + (unsigned)k, start);
        const CostDocuments docs = {start, ROWS, T};
        CostShape s = tiny_shape(T);
        s.window = cases[k].window, s.window_every = cases[k].window ? 1 : 0;
        const CostConfig g = {s, T, 2, 3, 1, cases[k].pq, cases[k].pkv, cases[k].a, 1, 0, 0,
                              GPT_RECOMPUTE_NONE, &docs, 1, 0, 0, 0, 0, 0, 0, 0};
        const CostPrediction p = predict(&g, c);
        double most = 0;
        for (int i = 0; i < cases[k].pq * cases[k].pkv; i++) {
            const RankOf r = {cases[k].a, cases[k].pq, cases[k].pkv, i, T};
            double n = 0;
            for (int row = 0; row < ROWS; row++)
                n += brute_pairs(&r, cases[k].window, start + row * T);
            most = n / ROWS > most ? n / ROWS : most;
        }
        const double HS = s.C / s.NH;
        const double want = (double)g.accum * g.B * s.NH * (4 * HS + 10 * HS) * s.L * most;
        const double share = document_pairs(start, ROWS, (int)T, cases[k].window) /
                             (ROWS * (double)window_visible_pairs(T, cases[k].window));
        const double pairs = cases[k].window ? p.banded_pairs : p.max_pairs;
        EXPECT(pairs == most && p.attention_flops == want && fabs(p.pair_share - share) < 1e-12,
               "documents %s %dx%d T=%ld window %d: slowest rank %.1f pairs (brute force %.1f), "
               "%.0f FLOPs (want %.0f), pair share %.6f (want %.6f)",
               cost_algorithm_name(cases[k].a), cases[k].pq, cases[k].pkv, T, cases[k].window,
               pairs, most, p.attention_flops, want, p.pair_share, share);
        free(start);
    }
    int one[4096], short_docs[4096];
    costmodel_fixed_documents(4096, 4096, one);
    costmodel_fixed_documents(4096, 256, short_docs);
    const CostDocuments whole = {one, 1, 4096}, short_ones = {short_docs, 1, 4096};
    const CostConfig causal = {tiny_shape(4096), 4096, 1, 1, 1, 1, 4, COST_ZIGZAG, 1, 0, 0,
                               GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    CostConfig g = causal;
    g.docs = &whole;
    const CostPrediction pc = predict(&causal, c), pw = predict(&g, c);
    g.docs = &short_ones;
    const CostPrediction ps = predict(&g, c);
    EXPECT(pw.step_s == pc.step_s && pw.max_pairs == pc.max_pairs && pw.pair_share == 1 &&
           ps.step_s < pc.step_s && ps.pair_share < 0.07,
           "zigzag 1x4 T=4096: one document %.9f s (causal %.9f s), %.0f pairs (%.0f), share %g; "
           "256-token documents %.9f s, share %g", pw.step_s, pc.step_s, pw.max_pairs,
           pc.max_pairs, pw.pair_share, ps.step_s, ps.pair_share);
    short_docs[300] = 299;   // not a document start, nor the start of 299's document
    char err[ERR_LEN] = "";
    CostPrediction p;
    EXPECT(costmodel_predict(&g, c, &p, err, sizeof err) == -1 &&
           strstr(err, "documents: row 0 position 300: expected its document's first position "
                       "(300 or the previous one's), found 299"),
           "a start that begins no document: expected a one-line refusal, found '%s'", err);
    const CostDocuments wrong_T = {one, 1, 2048};
    g.docs = &wrong_T;
    err[0] = 0;
    EXPECT(costmodel_predict(&g, c, &p, err, sizeof err) == -1 &&
           strstr(err, "documents: expected at least one row of T = 4096 starts, found 1 rows of 2048"),
           "documents of another T: expected a one-line refusal, found '%s'", err);
}

// Attention FLOPs: 14*HS per visible pair of the slowest rank (brute force over every rank),
// causal layers and banded ones apart (tiny_shape's 2 layers: the window in layer 0 only with
// window_every 2, in both with 1).
static void test_attention_flops(const Cluster* c) {
    const struct { CostAlgorithm a; int pq, pkv; long T; int window, every; } cases[] = {
        {COST_2D, 2, 2, 512, 0, 0}, {COST_2D, 2, 3, 768, 0, 0}, {COST_2D, 4, 2, 1024, 0, 0},
        {COST_2D_OVERLAP, 3, 2, 768, 0, 0}, {COST_RING, 1, 4, 512, 0, 0},
        {COST_STRIPED, 1, 6, 768, 0, 0}, {COST_ZIGZAG, 1, 4, 512, 0, 0},
        {COST_ZIGZAG, 1, 3, 768, 0, 0}, {COST_2D, 2, 2, 512, 64, 2}, {COST_2D, 4, 2, 1024, 100, 1},
        {COST_2D_OVERLAP, 3, 2, 768, 200, 2}, {COST_RING, 1, 4, 512, 96, 1},
        {COST_STRIPED, 1, 6, 768, 33, 2}, {COST_ZIGZAG, 1, 4, 512, 70, 1},
        {COST_ULYSSES, 1, 4, 512, 0, 0}, {COST_ULYSSES, 2, 1, 768, 33, 2},
        {COST_ULYSSES, 2, 2, 1024, 100, 1}, {COST_USP, 2, 2, 512, 0, 0},
        {COST_USP, 4, 2, 1024, 100, 1}, {COST_USP, 2, 3, 768, 33, 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        CostShape s = tiny_shape(cases[k].T);
        s.window = cases[k].window, s.window_every = cases[k].every;
        const CostConfig g = {s, cases[k].T, 2, 3, 1, cases[k].pq, cases[k].pkv, cases[k].a, 1, 0, 0,
                              GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
        const CostPrediction p = predict(&g, c);
        const double pairs = max_pairs_brute_force(cases[k].a, cases[k].pq, cases[k].pkv,
                                                      cases[k].T, 0);
        const double banded = cases[k].window ? max_pairs_brute_force(cases[k].a, cases[k].pq,
                                                                          cases[k].pkv, cases[k].T,
                                                                          cases[k].window)
                                                 : 0;
        const int banded_layers = cases[k].window ? (cases[k].every == 1 ? 2 : 1) : 0;
        const double HS = s.C / s.NH;
        const double want = (double)g.accum * g.B * s.NH * (4 * HS + 10 * HS) *
                            ((s.L - banded_layers) * (double)pairs + banded_layers * (double)banded);
        EXPECT(p.max_pairs == pairs && p.banded_pairs == banded && p.attention_flops == want,
               "attention FLOPs %s %dx%d T=%ld window %d every %d: slowest rank %.0f causal, %.0f "
               "banded pairs (all ranks: %.1f, %.1f), %.0f FLOPs (want 14*HS per pair: %.0f)",
               cost_algorithm_name(cases[k].a), cases[k].pq, cases[k].pkv, cases[k].T,
               cases[k].window, cases[k].every, p.max_pairs, p.banded_pairs, pairs, banded,
               p.attention_flops, want);
    }
    // Banded layers cost less, the MFU counts their FLOPs as the trainer does, and a window
    // longer than the context, or a bad window_every, is refused in one line.
    CostShape s = tiny_shape(4096);
    const CostConfig dense = {s, 4096, 1, 1, 1, 2, 2, COST_2D, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    s.window = 256, s.window_every = 1;
    CostConfig banded = dense;
    banded.shape = s;
    const CostPrediction pd = predict(&dense, c), pb = predict(&banded, c);
    const GPTConfig cfg = {.max_T = 4096, .V = 512, .Vp = 512, .L = 2, .NH = 4, .C = 64,
                           .window = 256, .window_every = 1};
    const double fpt = gpt_flops_per_token(&cfg, costmodel_num_params(&s), 4096);
    EXPECT(pb.step_s < pd.step_s && pb.attention_flops < pd.attention_flops / 4 &&
           fabs(pb.mfu - pb.tokens_per_s * fpt / (4 * c->matmul_flops)) < 1e-12,
           "window 256 of T=4096: step %.6f s (causal %.6f s), attention %.3g FLOPs (causal "
           "%.3g), MFU %.6f (tokens/s x gpt_flops_per_token: %.6f)", pb.step_s, pd.step_s,
           pb.attention_flops, pd.attention_flops, pb.mfu,
           pb.tokens_per_s * fpt / (4 * c->matmul_flops));
    CostPrediction p;
    char err[ERR_LEN] = "";
    banded.shape.window = 5000;
    EXPECT(costmodel_predict(&banded, c, &p, err, sizeof err) == -1 &&
           strstr(err, "attention window") && strstr(err, "5000"),
           "a window of 5000 in a context of 4096: expected a one-line refusal, found '%s'", err);
    banded.shape.window = 256, banded.shape.window_every = 3;
    err[0] = 0;
    EXPECT(costmodel_predict(&banded, c, &p, err, sizeof err) == -1 && strstr(err, "window every"),
           "window_every 3 of 2 layers: expected a one-line refusal, found '%s'", err);
    CostConfig uly = dense;   // the tiny shape's 4 heads over 8 ranks
    uly.alg = COST_ULYSSES, uly.pq = 1, uly.pkv = 8;
    err[0] = 0;
    EXPECT(costmodel_predict(&uly, c, &p, err, sizeof err) == -1 &&
           strstr(err, "mesh: ulysses splits the 4 heads over P = 8 ranks; expected P to divide them"),
           "ulysses with 4 heads on 8 ranks: expected a one-line refusal, found '%s'", err);
    CostConfig usp = uly;   // the 4 heads over a column of 8
    usp.alg = COST_USP, usp.pq = 8, usp.pkv = 1;
    err[0] = 0;
    EXPECT(costmodel_predict(&usp, c, &p, err, sizeof err) == -1 &&
           strstr(err, "mesh: usp splits the 4 heads over the pq = 8 ranks of a column"),
           "usp with 4 heads on a column of 8: expected a one-line refusal, found '%s'", err);
}

// 2d on a 1x2 mesh, one GPU per node, nothing overlapped: forward moves a Q all-gather
// (S act bytes) and an O|LSE all-to-all ((S+L) acc), backward the Q|dO and LSE|D gathers, the
// K/V... none (pq = 1), the dQ reduce-scatter (S acc); gradients one all-reduce of n*2*2/2 bytes
// and the loss scalar (8 bytes): each 5 us + 1 us per message + bytes / 10 GB/s.
static void test_alpha_beta_known_answer(const Cluster* c) {
    const CostShape s = tiny_shape(256);
    const CostConfig g = {s, 256, 1, 1, 1, 1, 2, COST_2D, 0, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    const CostPrediction p = predict(&g, c);
    const double S = 128.0 * 64, L = 128.0 * 4, bw = 10e9, call = 5e-6, hop = 1e-6;
    const double layer = (call + hop + S * 2 / bw) + (call + hop + (S + L) * 4 / bw) +
                         (call + hop + 2 * S * 2 / bw) + (call + hop + 2 * L * 4 / bw) +
                         (call + hop + S * 4 / bw);
    const double n = costmodel_num_params(&s);
    const double grads = (call + 2 * hop + floor(n * 2 * 2 / 2) / bw) + (call + 2 * hop + 8 / bw);
    const double want = s.L * layer + grads;
    EXPECT(fabs(p.exposed_comm_s - want) < 1e-6 * want && fabs(p.comm_s - want) < 1e-6 * want,
           "alpha-beta known answer: exposed %.9f s, all transfers %.9f s, expected %.9f s",
           p.exposed_comm_s, p.comm_s, want);
    // The same with a measured fit for the all-gather (alpha per call, beta per byte) replacing
    // the link for that op, and for the all-to-all (which has no fit of its own).
    char text[4096];
    snprintf(text, sizeof text, "%sfit.all_gather.p2 = 1e-4 1e-9  # a fit\n", FREE_COMPUTE);
    const Cluster fitted = parse_or_die("fitted", text);
    const CostPrediction q = predict(&g, &fitted);
    const double gathers = (call + hop + S * 2 / bw) + (call + hop + 2 * S * 2 / bw) +
                           (call + hop + 2 * L * 4 / bw) + (call + hop + (S + L) * 4 / bw);
    const double fit_gathers = (1e-4 + 1e-9 * S * 2) + (1e-4 + 1e-9 * 2 * S * 2) +
                               (1e-4 + 1e-9 * 2 * L * 4) + (1e-4 + 1e-9 * (S + L) * 4);
    const double want_fit = want + s.L * (fit_gathers - gathers);
    EXPECT(fabs(q.exposed_comm_s - want_fit) < 1e-6 * want_fit,
           "alpha-beta with a fit: exposed %.9f s, expected %.9f s", q.exposed_comm_s, want_fit);
}

// The parser's errors: one line naming the file, the line, the key, what was expected and found.
// Each case edits FREE_COMPUTE: the first `find` becomes `replace`, then `append` is added.
typedef struct {
    const char *what, *find, *replace, *append;
    const char* parts[5];   // substrings the message must hold (NULL-terminated)
} BadCluster;

#define PAIR(size) size ".00000000000000000000:1 "
#define LONG_CURVE PAIR("20") PAIR("19") PAIR("18") PAIR("17") PAIR("16") PAIR("15") PAIR("14") \
    PAIR("13") PAIR("12") PAIR("11") PAIR("10") PAIR("9") PAIR("8") PAIR("7") PAIR("6") PAIR("5") \
    PAIR("4") PAIR("3") PAIR("2") PAIR("1") "0:1"

static void test_parser_errors(void) {
    static const BadCluster cases[] = {
        {"missing key", "inter.hop_latency_us = 1  # s\n", "", "",
         {"bad.cluster", "inter.hop_latency_us", "expected a line", "found none", NULL}},
        {"bad number", "node.gpus = 1", "node.gpus = x", "",
         {"bad.cluster:2:", "node.gpus", "expected an integer", "found 'x'", NULL}},
        {"unknown key", "", "", "node.colour = 3  # s\n",
         {"bad.cluster:29:", "node.colour", "expected a known key", "found", NULL}},
        {"number without a source", "inter.efficiency = 1  # s", "inter.efficiency = 1", "",
         {"inter.efficiency", "expected a '# source' comment", "found '1'", NULL}},
        {"curve not ending at 0", "matmul.efficiency = 0:1", "matmul.efficiency = 1:1", "",
         {"matmul.efficiency", "expected 'SIZE:EFFICIENCY' pairs", "found '1:1'", NULL}},
        {"duplicate key", "", "", "node.gpus = 2  # again\n", {"node.gpus", "expected the key once", NULL}},
        {"bad tiles", "", "", "attention.tiles = 128x64 64  # kernels\n",
         {"bad.cluster:29:", "attention.tiles", "expected 'ROWSxKEYS ROWSxKEYS'", "found '128x64 64'", NULL}},
        {"zero tile", "", "", "attention.tiles = 128x0 64x128  # kernels\n",
         {"attention.tiles", "from 1 to 4096", "found '128x0 64x128'", NULL}},
        {"tiles twice", "", "", "attention.tiles = 1x1 1x1  # a\nattention.tiles = 1x1 1x1  # b\n",
         {"bad.cluster:30:", "attention.tiles", "expected the key once", NULL}},
        {"masked cost out of range", "", "", "attention.masked_cost = 0.5 1.5  # measured\n",
         {"bad.cluster:29:", "attention.masked_cost", "each in [0, 1]", "found '0.5 1.5'", NULL}},
        {"infinite curve size", "matmul.efficiency = 0:1", "matmul.efficiency = inf:0.5 0:1", "",
         {"bad.cluster:8:", "matmul.efficiency", "finite sizes", "found 'inf:0.5 0:1'", NULL}},
        // 21 pairs in 514 characters: the parser's 512-byte buffer would have cut it to a shorter,
        // still valid, curve
        {"long curve", "matmul.efficiency = 0:1", "matmul.efficiency = " LONG_CURVE, "",
         {"bad.cluster:8:", "matmul.efficiency", "expected a curve of at most 511 characters", NULL}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const BadCluster* b = &cases[k];
        char text[4096];
        const char* at = *b->find ? strstr(FREE_COMPUTE, b->find) : FREE_COMPUTE + strlen(FREE_COMPUTE);
        if (!at) setup_fail("case '%s': '%s' not in the test cluster", b->what, b->find);
        snprintf(text, sizeof text, "%.*s%s%s%s", (int)(at - FREE_COMPUTE), FREE_COMPUTE, b->replace,
                 at + strlen(b->find), b->append);
        Cluster c;
        char err[ERR_LEN] = "";
        int ok = cluster_parse("bad.cluster", text, &c, err, sizeof err) == -1 && !strchr(err, '\n');
        for (int j = 0; b->parts[j]; j++) ok = ok && strstr(err, b->parts[j]);
        EXPECT(ok, "cluster parser, %s: \"%s\"", b->what, err);
    }
}

// A small question: tiny model, T = 1024, 8 ranks on A100-like nodes of 4.
static void test_ranked_table(const Cluster* a100) {
    const CostQuery q = {tiny_shape(1024), 1024, 1, 1, 8, 0, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    CostCandidate out[256];
    char err[ERR_LEN];
    const int n = costmodel_rank(&q, a100, out, 256, err, sizeof err);
    // dp 1: P = 8: 2d/2d-overlap 4 meshes each + 3 rings (the 4 heads do not split over 8 for
    // Ulysses) + USP 2x4 and 4x2; dp 2: P = 4: 3 + 3 + 3 rings + Ulysses + USP 2x2; dp 4: P = 2:
    // 2 + 2 + 3 + 1 (USP's 1x2 and 2x1 are Striped and Ulysses, not repeated); dp 8: 1
    // -> 13 + 11 + 8 + 1
    int sorted = 1, fits = 1;
    for (int k = 0; k < n; k++) {
        const CostConfig* g = &out[k].config;
        fits = fits && g->dp * g->pq * g->pkv == 8 && 1024 % (g->pq * g->pkv) == 0 &&
               out[k].pred.memory_bytes <= a100->memory_bytes && out[k].reason[0];
        if (k) sorted = sorted && out[k - 1].pred.tokens_per_s >= out[k].pred.tokens_per_s;
    }
    EXPECT(n == 33 && sorted && fits,
           "ranked table for 8 ranks: %d candidates (33 expected), sorted %d, all fit %d", n, sorted, fits);
    // A memory limit between the smallest and the largest footprint removes some, keeps the rest.
    double lo = INFINITY, hi = 0;
    for (int k = 0; k < n; k++) {
        lo = fmin(lo, out[k].pred.memory_bytes);
        hi = fmax(hi, out[k].pred.memory_bytes);
    }
    CostQuery tight = q;
    tight.memory_limit = 0.5 * (lo + hi);
    CostCandidate small[256];
    const int m = costmodel_rank(&tight, a100, small, 256, err, sizeof err);
    int under = 1;
    for (int k = 0; k < m; k++) under = under && small[k].pred.memory_bytes <= tight.memory_limit;
    EXPECT(m > 0 && m < n && under, "memory limit %.3g bytes keeps %d of %d candidates, all under it",
           tight.memory_limit, m, n);
    CostQuery bad = q;
    bad.world = 0;
    EXPECT(costmodel_rank(&bad, a100, out, 256, err, sizeof err) == -1 && strstr(err, "world"),
           "an invalid query is refused: %s", err);
}

// FREE_COMPUTE with finite flat rates (100 TFLOP/s GEMMs, 10 TFLOP/s vector, 1 TB/s, every
// efficiency 1): a kernel's time is kernel_costs' floor, which the test computes itself.
static Cluster flat_cluster(void) {
    const char* edits[][2] = {{"matmul.peak_tflops = 1e9", "matmul.peak_tflops = 100"},
                              {"vector.peak_tflops = 1e9", "vector.peak_tflops = 10"},
                              {"memory.bandwidth_gbs = 1e9", "memory.bandwidth_gbs = 1000"}};
    char text[4096], next[4096];
    snprintf(text, sizeof text, "%s", FREE_COMPUTE);
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        const char* at = strstr(text, edits[k][0]);
        if (!at) setup_fail("'%s' not in the test cluster", edits[k][0]);
        snprintf(next, sizeof next, "%.*s%s%s", (int)(at - text), text, edits[k][1],
                 at + strlen(edits[k][0]));
        memcpy(text, next, sizeof text);
    }
    return parse_or_die("flat", text);
}

static double floor_s(KernelCost k) { return kernel_floor_seconds(k, 100e12, 10e12, 1e12, NULL); }

// model/gpt.c's recompute_layer for one layer of N tokens, kernel by kernel.
static double recomputed_layer_s(GptRecompute r, double N, double C) {
    double s = floor_s(kernel_cost_layernorm_forward(N, C)) +
               floor_s(kernel_cost_matmul_forward(N, C, 3 * C, 1, 0)) +
               floor_s(kernel_cost_matmul_forward(N, C, 4 * C, 1, 1));
    if (r == GPT_RECOMPUTE_FULL)
        s += floor_s(kernel_cost_matmul_forward(N, C, C, 1, 0)) +
             floor_s(kernel_cost_fused_residual_layernorm_forward(N, C));
    else if (r == GPT_RECOMPUTE_SELECTIVE)
        s += floor_s(kernel_cost_layernorm_forward(N, C));
    return r == GPT_RECOMPUTE_NONE ? 0 : s;
}

// Recompute adds the recomputed kernels' time to backward and nothing else; it saves memory.
static void test_recompute_time_and_memory(void) {
    const Cluster flat = flat_cluster();
    const CostShape s = {4, 256, 4, 512, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CostConfig g = {s, 1024, 2, 3, 1, 1, 2, COST_2D, 0, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    CostPrediction p[3];
    for (int r = GPT_RECOMPUTE_NONE; r <= GPT_RECOMPUTE_FULL; r++) {
        g.recompute = r;
        p[r] = predict(&g, &flat);
        const double want = g.accum * s.L * recomputed_layer_s((GptRecompute)r, 2 * 512.0, s.C);
        const double added = p[r].step_s - p[0].step_s, bwd = p[r].backward_s - p[0].backward_s;
        EXPECT(fabs(p[r].recompute_s - want) <= 1e-9 * want && fabs(added - want) <= 1e-9 * p[0].step_s &&
               fabs(bwd - want) <= 1e-9 * p[0].step_s && p[r].forward_s == p[0].forward_s &&
               p[r].comm_s == p[0].comm_s && p[r].flops_per_rank == p[0].flops_per_rank,
               "recompute %s: %.9g s recomputed (%.9g expected), step +%.9g s, backward +%.9g s, "
               "forward %.9g vs %.9g s", gpt_recompute_name((GptRecompute)r), p[r].recompute_s,
               want, added, bwd, p[r].forward_s, p[0].forward_s);
    }
    EXPECT(p[0].step_s < p[1].step_s && p[1].step_s < p[2].step_s &&
           p[2].memory_bytes < p[1].memory_bytes && p[1].memory_bytes < p[0].memory_bytes,
           "time none < selective < full (%.6g, %.6g, %.6g s), memory full < selective < none "
           "(%.0f, %.0f, %.0f bytes)", p[0].step_s, p[1].step_s, p[2].step_s, p[2].memory_bytes,
           p[1].memory_bytes, p[0].memory_bytes);
}

// The LSE merges of one layer's forward: the bf16 CUDA build (a GPU cluster with 2-byte parameters)
// merges the ring's P-1 steps and 2d-overlap's pq-1 pairs of each of its pkv query blocks in the
// forward's epilogue, one more read of O and LSE; elsewhere (4-byte parameters: the fp32 build) and
// for the row merges each is the merge kernel. The forward's difference between the two is that
// alone (parameter bytes move the gradient reduction and AdamW, which are not in forward_s).
static void test_merges_in_forward(void) {
    const Cluster flat = flat_cluster();
    Cluster fp32 = flat;
    fp32.param_bytes = 4;
    const CostShape s = {3, 256, 4, 512, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const int B = 2, T = 1024;
    const struct { CostAlgorithm alg; int pq, pkv, step_merges; } cases[] = {
        {COST_RING, 1, 4, 3}, {COST_ZIGZAG, 2, 2, 3}, {COST_2D_OVERLAP, 2, 2, 2},
        {COST_2D_OVERLAP, 4, 2, 6}, {COST_2D, 2, 2, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const CostConfig g = {s, T, B, 1, 1, cases[k].pq, cases[k].pkv, cases[k].alg, 0, 0, 0,
                              GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
        const double Tl = (double)T / (cases[k].pq * cases[k].pkv);
        const KernelCost merge = kernel_cost_attention_merge(B, s.NH, s.C / s.NH, Tl);
        const KernelCost in_forward = {0, merge.bytes / 3, 0};
        const double want = s.L * cases[k].step_merges * (floor_s(merge) - floor_s(in_forward));
        const double got = predict(&g, &fp32).forward_s - predict(&g, &flat).forward_s;
        EXPECT(fabs(got - want) <= 1e-9 * predict(&g, &flat).forward_s,
               "%s %dx%d: forward with merge kernels - with merges in the forward = %.9g s, "
               "expected %d step merges x %d layers: %.9g s", cost_algorithm_name(cases[k].alg),
               cases[k].pq, cases[k].pkv, got, cases[k].step_merges, s.L, want);
    }
}

// --- Grouped-query attention -------------------------------------------------------------------

// model/gpt.c's 21 tensors (gpt_param_sizes) counted one by one, the qkv projection W = C + 2 NKV
// HS wide (NKV = NH without grouped-query attention), QK-norm's four of L HS (its biases only
// under LayerNorm).
static double params_by_hand(const CostShape* s) {
    const double C = s->C, L = s->L, NKV = s->kv_heads ? s->kv_heads : s->NH;
    const double W = C + 2 * NKV * (C / s->NH), Vp = gpt_padded_vocab(s->V);
    const double rows = s->rope_theta ? 0 : s->max_T;   // no position table under RoPE
    const double F = s->ffn_hidden ? s->ffn_hidden : 4 * C;    // the MLP's hidden width
    const double FC = s->mlp == GPT_MLP_SWIGLU ? 2 * F : F;    // SwiGLU: gate and up
    const double NB = s->norm == GPT_NORM_RMSNORM ? 0 : C;     // RMSNorm: no bias
    const double LB = s->no_linear_bias ? 0 : 1;                // no linear biases
    const double QB = LB || s->qkv_bias ? 1 : 0;                // the qkv projection's
    const double UC = s->untied_classifier ? 1 : 0;             // the classifier's own matrix
    const double QK = s->qk_norm ? C / s->NH : 0;               // a QK-norm weight per layer
    const double QKB = s->norm == GPT_NORM_RMSNORM ? 0 : QK;    // and a LayerNorm's bias
    const double sizes[21] = {Vp * C,    rows * C,     L * C,         L * NB,
                              L * W * C, L * W * QB,   L * C * C,     L * C * LB,
                              L * C,     L * NB,       L * FC * C,    L * FC * LB,
                              L * C * F, L * C * LB,   C,             NB,
                              UC * Vp * C, L * QK,     L * QKB,       L * QK,
                              L * QKB};
    double n = 0;
    for (int k = 0; k < 21; k++) n += sizes[k];
    return n;
}

// The parameter count takes the narrower qkv projection (C + 2 NKV HS columns, 3C without
// grouped-query attention), and so do the trainer's MFU FLOPs per token.
static void test_gqa_params(void) {
    const CostShape shapes[] = {
        {3, 256, 8, 1000, 512, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0},
        {3, 256, 8, 1000, 512, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        {3, 256, 8, 1000, 512, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {3, 256, 8, 1000, 512, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0},
        {32, 2560, 32, 50257, 131072, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0},
        // Llama's block (RMSNorm, SwiGLU of 6912), and each part alone
        {32, 2560, 32, 50257, 131072, 0, 0, 8, 500000, 1, 1, 6912, 0, 0, 0, 0},
        {32, 2560, 32, 50257, 131072, 0, 0, 8, 500000, 1, 1, 6912, 1, 0, 0, 0},
        {3, 256, 8, 1000, 512, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
        {3, 256, 8, 1000, 512, 0, 0, 0, 0, 0, 1, 640, 0, 0, 0, 0},
        {3, 256, 8, 1000, 512, 0, 0, 0, 0, 0, 0, 640, 0, 0, 0, 0},
        // an untied classifier, alone and with Llama's block
        {3, 256, 8, 1000, 512, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},
        {32, 2560, 32, 50257, 131072, 0, 0, 8, 500000, 1, 1, 6912, 1, 1, 0, 0},
        // Qwen2's block: Llama's with the qkv projection's bias (2 key/value heads: W = C + 4 HS)
        {24, 896, 14, 151936, 32768, 0, 0, 2, 1000000, 1, 1, 4864, 1, 0, 1, 0},
        // QK-norm: Qwen3's block (RMSNorm: weights alone), and GPT's (LayerNorm: and biases)
        {28, 2048, 16, 151936, 32768, 0, 0, 8, 1000000, 1, 1, 6144, 1, 0, 0, 1},
        {3, 256, 8, 1000, 512, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const CostShape* s = &shapes[k];
        const GPTConfig cfg = costmodel_gpt_config(s);
        const double got = costmodel_num_params(s), want = params_by_hand(s);
        EXPECT(got == want && costmodel_flops_per_token(s, 512) ==
                                  gpt_flops_per_token(&cfg, want, 512),
               "parameters of L=%d C=%d NH=%d with %d key/value heads, norm %d, mlp %d, F %d, no "
               "bias %d, untied %d, qkv bias %d, QK-norm %d: %.0f (the 21 tensors: %.0f)", s->L,
               s->C, s->NH, s->kv_heads, s->norm, s->mlp, s->ffn_hidden, s->no_linear_bias,
               s->untied_classifier, s->qkv_bias, s->qk_norm, got, want);
    }
    const CostShape mha = shapes[2];
    EXPECT(costmodel_num_params(&mha) == kernel_gpt_num_params(3, 256, 1024, 512) &&
               costmodel_num_params(&shapes[3]) == costmodel_num_params(&mha),
           "without grouped-query attention (0 or NH key/value heads): kernel_gpt_num_params");
}

// The GEMMs of a micro-batch by hand: L layers of the four (input, output) widths' forward and
// backward GEMMs with bias (no epilogue), and the classifier's three.
static double gemms_by_hand(double N, double C, double Vp, double L, const double widths[4][2]) {
    double layer = 0;
    for (int k = 0; k < 4; k++) {
        const double ic = widths[k][0], oc = widths[k][1];
        layer += floor_s(kernel_cost_matmul_forward(N, ic, oc, 1, 0)) +
                 floor_s(kernel_cost_matmul_backward_dinp(N, ic, oc)) +
                 floor_s(kernel_cost_matmul_backward_dweight(N, ic, oc, 1));
    }
    return L * layer + floor_s(kernel_cost_matmul_forward(N, C, Vp, 0, 0)) +
           floor_s(kernel_cost_matmul_backward_dinp(N, C, Vp)) +
           floor_s(kernel_cost_matmul_backward_dweight(N, C, Vp, 0));
}

// The GEMMs of a micro-batch: the qkv projection's forward and both backward GEMMs N x C x W,
// every other kernel as without grouped-query attention (flat rates: each its kernel_costs floor).
static void test_gqa_gemms(void) {
    const Cluster flat = flat_cluster();
    const CostShape gqa = {3, 256, 8, 1000, 512, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0};
    const CostShape mha = {3, 256, 8, 1000, 512, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const double N = 2048, Tl = 1024, C = 256, W = 256 + 2 * 2 * 32, Vp = 1024, L = 3;
    double gemm, other, gemm_mha, other_mha;
    costmodel_token_local_split(&flat, &gqa, N, Tl, &gemm, &other);
    costmodel_token_local_split(&flat, &mha, N, Tl, &gemm_mha, &other_mha);
    const double widths[4][2] = {{C, W}, {C, C}, {C, 4 * C}, {4 * C, C}};
    const double gelu = floor_s(kernel_cost_matmul_forward(N, C, 4 * C, 1, 1)) -
                        floor_s(kernel_cost_matmul_forward(N, C, 4 * C, 1, 0));   // the fused GELU
    const double want = gemms_by_hand(N, C, Vp, L, widths) + L * gelu;
    EXPECT(fabs(gemm - want) <= 1e-12 * want && gemm < gemm_mha && other == other_mha,
           "GEMMs of 2 of 8 key/value heads (qkv %.0f columns): %.9g s (by hand %.9g s; 3C: "
           "%.9g s), the rest %.9g s (3C: %.9g s)", W, gemm, want, gemm_mha, other, other_mha);
}

// SwiGLU of hidden width F = 640: the fc GEMMs N x C x 2F with no GELU epilogue, fcproj's N x F
// x C, and SwiGLU's forward and backward passes instead of the GELU backward (GELU with the same F
// for the rest); RMSNorm is priced as the LayerNorm. Flat rates: each its kernel_costs floor.
static void test_swiglu_costs(void) {
    const Cluster flat = flat_cluster();
    const CostShape gelu = {3, 256, 8, 1000, 512, 0, 0, 0, 0, 0, 0, 640, 0, 0, 0, 0};
    CostShape swiglu = gelu, rms = gelu;
    swiglu.mlp = GPT_MLP_SWIGLU;
    rms.norm = GPT_NORM_RMSNORM;
    const double N = 2048, Tl = 1024, C = 256, F = 640, Vp = 1024, L = 3;
    double gemm, other, gemm_g, other_g, gemm_r, other_r;
    costmodel_token_local_split(&flat, &swiglu, N, Tl, &gemm, &other);
    costmodel_token_local_split(&flat, &gelu, N, Tl, &gemm_g, &other_g);
    costmodel_token_local_split(&flat, &rms, N, Tl, &gemm_r, &other_r);
    const double widths[4][2] = {{C, 3 * C}, {C, C}, {C, 2 * F}, {F, C}};
    const double want = gemms_by_hand(N, C, Vp, L, widths);
    const double rest = L * (floor_s(kernel_cost_swiglu_forward(N, F)) +
                             floor_s(kernel_cost_swiglu_backward(N, F)) -
                             floor_s(kernel_cost_gelu_backward(N * F)));
    EXPECT(fabs(gemm - want) <= 1e-12 * want && fabs(other - other_g - rest) <= 1e-9 * other,
           "SwiGLU of 2 x 640: GEMMs %.9g s (by hand %.9g s), the rest %.9g s (GELU's %.9g s + "
           "%.9g s of SwiGLU's passes for the GELU backward)", gemm, want, other, other_g, rest);
    EXPECT(gemm_r == gemm_g && other_r == other_g,
           "RMSNorm priced as the LayerNorm: %.9g + %.9g s (LayerNorm %.9g + %.9g s)", gemm_r,
           other_r, gemm_g, other_g);
}

// Rotary positions: no position table (max_T C fewer parameters, whatever the head grouping), a
// rotation pass over the query and key heads in every layer's forward and backward (and in the
// recomputed forward), nothing else; a long context's memory falls by the table's parameters,
// gradients and optimizer state.
static void test_rope(const Cluster* c) {
    const Cluster flat = flat_cluster();
    const CostShape learned = {3, 256, 8, 1000, 512, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0};
    CostShape rope = learned;
    rope.rope_theta = 10000;
    EXPECT(costmodel_num_params(&rope) == params_by_hand(&rope) &&
               costmodel_num_params(&learned) - costmodel_num_params(&rope) == 512.0 * 256,
           "parameters with rotary positions: %.0f, learned %.0f (by hand: the table's 512 x 256 "
           "fewer)", costmodel_num_params(&rope), costmodel_num_params(&learned));
    const double N = 2048, Tl = 1024, L = 3;
    double gemm, other, gemm_l, other_l;
    costmodel_token_local_split(&flat, &rope, N, Tl, &gemm, &other);
    costmodel_token_local_split(&flat, &learned, N, Tl, &gemm_l, &other_l);
    const double pass = floor_s(kernel_cost_rope(N, 8, 2, 32));
    EXPECT(gemm == gemm_l && fabs(other - other_l - 2 * L * pass) <= 1e-12 * other,
           "token-local seconds with rotary positions: other kernels %.9g s = learned %.9g s + 2 L "
           "rotation passes of %.9g s; GEMMs unchanged (%.9g s, %.9g s)", other, other_l, pass,
           gemm, gemm_l);
    const KernelCost k = kernel_cost_rope(10, 4, 2, 8);
    EXPECT(k.bytes == 2 * KERNEL_COST_X * 10 * 6 * 8 && k.flops == 3 * 10 * 6 * 8,
           "a rotation pass over 10 rows of 4 + 2 heads of 8: %.0f bytes (read and written in "
           "place), %.0f FLOPs", k.bytes, k.flops);
    CostConfig g = {{32, 2560, 32, 50257, 131072, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0}, 131072, 1, 1, 1, 1, 16, COST_ZIGZAG,
                    1, 1, 0, GPT_RECOMPUTE_SELECTIVE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    const CostPrediction pl = predict(&g, c);
    g.shape.rope_theta = 10000;
    const CostPrediction pr = predict(&g, c);
    EXPECT(pr.memory_bytes < pl.memory_bytes && pr.step_s > pl.step_s * 0.99,
           "gpt3-2.7b, T 131072, zigzag 1x16, ZeRO-1: %.2f GiB per device with rotary positions, "
           "%.2f learned; step %.1f ms, %.1f ms", pr.memory_bytes / 1073741824.0,
           pl.memory_bytes / 1073741824.0, 1e3 * pr.step_s, 1e3 * pl.step_s);
}

// Communication: a ring moves only K|V blocks and their gradients, all kv / NH as many bytes; 2d
// also gathers Q, which keeps its size. The gradients' all-reduce is of the smaller model; the
// FLOPs lose the qkv GEMMs' 6 N C (3C - W) per layer; the step is shorter.
static void test_gqa_comm(const Cluster* c) {
    const struct { CostAlgorithm a; int pq, pkv; } cases[] = {
        {COST_RING, 1, 4}, {COST_ZIGZAG, 1, 4}, {COST_2D, 2, 2}, {COST_2D_OVERLAP, 2, 2}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const CostConfig mha = {tiny_shape(1024), 1024, 2, 2, 2, cases[k].pq, cases[k].pkv,
                                cases[k].a, 0, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
        CostConfig gqa = mha;
        gqa.shape.kv_heads = 1;
        const CostPrediction pm = predict(&mha, c), pg = predict(&gqa, c);
        const int ring = cost_algorithm_is_ring(cases[k].a);
        const double C = 64, W = 64 + 2 * 16, N = 2.0 * 1024 / 4;
        const double fewer = 2 * 3 * 2 * N * C * (3 * C - W) * 2;   // accum x L x 3 passes x 2 N C
        const double grad = reference_grad_bytes_of(&gqa, c->param_bytes,
                                                    (long long)params_by_hand(&gqa.shape));
        EXPECT((ring ? pg.attention_bytes * 4 == pm.attention_bytes
                     : pg.attention_bytes < pm.attention_bytes &&
                           pg.attention_bytes > pm.attention_bytes / 4) &&
                   pg.grad_bytes == grad && pg.grad_bytes < pm.grad_bytes &&
                   pg.exposed_comm_s < pm.exposed_comm_s && pg.step_s < pm.step_s &&
                   fabs(pm.flops_per_rank - pg.flops_per_rank - fewer) <= 1e-12 * fewer &&
                   pg.attention_flops == pm.attention_flops,
               "%s %dx%d with 1 of 4 key/value heads: attention %.0f bytes (%s of %.0f), "
               "gradients %.0f (the smaller model's: %.0f), exposed comm %.6g s (%.6g s), step "
               "%.6g s (%.6g s), %.0f fewer FLOPs (%.0f expected)", cost_algorithm_name(cases[k].a),
               cases[k].pq, cases[k].pkv, pg.attention_bytes, ring ? "1/4" : "between 1/4 and 1",
               pm.attention_bytes, pg.grad_bytes, grad, pg.exposed_comm_s, pm.exposed_comm_s,
               pg.step_s, pm.step_s, pm.flops_per_rank - pg.flops_per_rank, fewer);
    }
}

// The attention call of one device (2d on 1x1). The CUDA kernels (a cluster of its own cores)
// widen K and V to the NH heads before each call and, in the backward, zero the widened fp32 dK,
// dV and sum each group's heads into the call's accumulators; the CPU's read the group's head in
// place: its call reads NKV / NH of the K, V bytes (memory-bound at 10 GB/s). Each pass is the
// difference of the forward or backward beside the qkv GEMMs'.
static void test_gqa_attention_passes(void) {
    const Cluster gpu = flat_cluster();
    Cluster cpu = gpu;
    cpu.shared_cores = 1, cpu.memory_bw = 1e10;
    const CostConfig mha = {tiny_shape(1024), 1024, 2, 1, 1, 1, 1, COST_2D, 0, 0, 0,
                            GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    CostConfig gqa = mha;
    gqa.shape.kv_heads = 1;
    const double B = 2, T = 1024, N = B * T, C = 64, W = 64 + 2 * 16, NH = 4, HS = 16, L = 2;
    // GEMMs at the flat cluster's rates, or the CPU's 10 GB/s
    const double bws[2] = {1e12, 1e10};
    double fwd_gemm[2], bwd_gemm[2];
    for (int k = 0; k < 2; k++) {
#define FL(x) kernel_floor_seconds(x, 100e12, 10e12, bws[k], NULL)
        fwd_gemm[k] = FL(kernel_cost_matmul_forward(N, C, W, 1, 0)) -
                      FL(kernel_cost_matmul_forward(N, C, 3 * C, 1, 0));
        bwd_gemm[k] = FL(kernel_cost_matmul_backward_dinp(N, C, W)) +
                      FL(kernel_cost_matmul_backward_dweight(N, C, W, 1)) -
                      FL(kernel_cost_matmul_backward_dinp(N, C, 3 * C)) -
                      FL(kernel_cost_matmul_backward_dweight(N, C, 3 * C, 1));
#undef FL
    }
    const double widen = floor_s(kernel_cost_gqa_widen(N, NH, 1, HS));
    const KernelCost zero = {0, 2 * 4 * N * NH * HS, 0};
    const double sums = floor_s(zero) + 2 * floor_s(kernel_cost_gqa_group_sum(N, NH, 1, HS, 1));
    const CostPrediction gm = predict(&mha, &gpu), gg = predict(&gqa, &gpu);
    const double want_f = L * (fwd_gemm[0] + 2 * widen);
    const double want_b = L * (bwd_gemm[0] + 2 * widen + sums);
    const double got_f = gg.forward_s - gm.forward_s, got_b = gg.backward_s - gm.backward_s;
    EXPECT(fabs(got_f - want_f) <= 1e-9 * gm.forward_s &&
               fabs(got_b - want_b) <= 1e-9 * gm.backward_s,
           "CUDA kernels, 1 of 4 key/value heads: forward %+.9g s (qkv GEMM and 2 widenings: "
           "%+.9g s), backward %+.9g s (GEMMs, widenings, zeroed and summed gradients: %+.9g s)",
           got_f, want_f, got_b, want_b);
    // the CPU's call: K and V read (act bytes, forward) and, backward, read with their fp32
    // gradients read and written: the same with NKV heads for NH
    const double k_mha = B * T * NH * HS, k_gqa = B * T * 1 * HS, act = cpu.act_bytes;
    const double call_f = act * 2 * (k_gqa - k_mha) / 1e10,
                 call_b = (act * 2 * (k_gqa - k_mha) + 8 * 2 * (k_gqa - k_mha)) / 1e10;
    const CostPrediction cm = predict(&mha, &cpu), cg = predict(&gqa, &cpu);
    const double cf = cg.forward_s - cm.forward_s, cb = cg.backward_s - cm.backward_s;
    EXPECT(fabs(cf - L * (fwd_gemm[1] + call_f)) <= 1e-9 * cm.forward_s &&
               fabs(cb - L * (bwd_gemm[1] + call_b)) <= 1e-9 * cm.backward_s,
           "CPU kernels, 1 of 4 key/value heads: forward %+.9g s (qkv GEMM and the call's K, V "
           "bytes: %+.9g s), backward %+.9g s (%+.9g s)", cf, L * (fwd_gemm[1] + call_f), cb,
           L * (bwd_gemm[1] + call_b));
}

// Ulysses and USP split the key/value heads over their all-to-all ranks: with 2 of the tiny
// shape's 4, P = 4 (or a column of 4) is refused in one line naming them, P = 2 runs in one
// chunk only; the ranking leaves those out (and, choosing chunks, keeps Ulysses on 2).
static void test_gqa_ulysses(const Cluster* a100) {
    const CostShape s = tiny_gqa(1024, 2);
    CostConfig g = {s, 1024, 1, 1, 1, 1, 4, COST_ULYSSES, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    CostPrediction p;
    char err[ERR_LEN] = "";
    EXPECT(costmodel_predict(&g, a100, &p, err, sizeof err) == -1 &&
               !strcmp(err, "mesh: ulysses splits the 2 key/value heads over P = 4 ranks; "
                            "expected P to divide them"),
           "ulysses, 2 key/value heads on 4 ranks: '%s'", err);
    g.alg = COST_USP, g.pq = 4, g.pkv = 2;
    err[0] = 0;
    EXPECT(costmodel_predict(&g, a100, &p, err, sizeof err) == -1 &&
               !strcmp(err, "mesh: usp splits the 2 key/value heads over the pq = 4 ranks of a "
                            "column; expected pq to divide them"),
           "usp, 2 key/value heads on a column of 4: '%s'", err);
    g.alg = COST_ULYSSES, g.pq = 1, g.pkv = 2, g.chunks = 2;
    err[0] = 0;
    EXPECT(costmodel_predict(&g, a100, &p, err, sizeof err) == -1 &&
               !strcmp(err, "--a2a-chunks 2: expected a divisor of the 1 key/value heads per "
                            "rank of ulysses"),
           "ulysses on 2 ranks in 2 chunks of its 1 key/value head per rank: '%s'", err);
    g.chunks = 1;
    err[0] = 0;
    EXPECT(costmodel_predict(&g, a100, &p, err, sizeof err) == 0, "ulysses on 2 ranks%s", err);
    // test_ranked_table's 33 less Ulysses on 4 and USP 4x2
    const CostQuery q = {s, 1024, 1, 1, 8, 0, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, COST_CHUNKS_AUTO, 0, 0, 0, 0, 0, 0, 0};
    CostCandidate out[256];
    const int n = costmodel_rank(&q, a100, out, 256, err, sizeof err);
    int split = 1, ulysses2 = 0;
    for (int k = 0; k < n; k++) {
        const CostConfig* h = &out[k].config;
        if (h->alg == COST_ULYSSES) split = split && 2 % (h->pq * h->pkv) == 0;
        if (h->alg == COST_USP) split = split && 2 % h->pq == 0;
        ulysses2 += h->alg == COST_ULYSSES && h->pq * h->pkv == 2 && cost_chunks(h) == 1;
    }
    EXPECT(n == 31 && split && ulysses2 == 1,
           "ranked table for 8 ranks with 2 key/value heads: %d candidates (31 expected), all "
           "all-to-alls dividing them %d, Ulysses on 2 ranks %d", n, split, ulysses2);
}

// The smallest memory of any candidate of q ranked with a fixed recompute r (no limit).
static double least_memory(CostQuery q, const Cluster* c, int r) {
    CostCandidate out[64];
    char err[ERR_LEN];
    q.recompute = r, q.memory_limit = 1e30;
    const int n = costmodel_rank(&q, c, out, 64, err, sizeof err);
    if (n <= 0 || n > 64) setup_fail("ranking with recompute %d: %d candidates %s", r, n, err);
    double least = INFINITY;
    for (int k = 0; k < n; k++) least = fmin(least, out[k].pred.memory_bytes);
    return least;
}

// Whether candidate k would fit the limit with recompute r (its own config otherwise).
static int fits_with(const CostCandidate* k, const Cluster* c, double limit, int r) {
    CostConfig g = k->config;
    g.recompute = r;
    const CostPrediction p = predict(&g, c);
    return costmodel_fits(&g, &p, c, limit);
}

// A limit below every candidate's memory without recompute and above the smallest with
// selective: the ranking picks selective where it is enough, full only where it is not, and
// shows the price; an explicit recompute is kept.
static void test_rank_recompute(const Cluster* a100) {
    CostQuery q = {tiny_shape(1024), 1024, 1, 1, 4, 0, 1, 0, 0, COST_RECOMPUTE_AUTO, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    const double none = least_memory(q, a100, GPT_RECOMPUTE_NONE);
    const double selective = least_memory(q, a100, GPT_RECOMPUTE_SELECTIVE);
    q.memory_limit = 0.5 * (none + selective);
    CostCandidate out[64];
    char err[ERR_LEN];
    const int n = costmodel_rank(&q, a100, out, 64, err, sizeof err);
    int chosen = 1, picked_selective = 0, priced = 1, said = 1;
    for (int k = 0; k < n && k < 64; k++) {
        const int r = out[k].config.recompute;
        picked_selective += r == GPT_RECOMPUTE_SELECTIVE;
        chosen = chosen && r != GPT_RECOMPUTE_NONE && !fits_with(&out[k], a100, q.memory_limit, r - 1) &&
                 out[k].pred.memory_bytes <= q.memory_limit;
        CostConfig g = out[k].config;
        g.recompute = GPT_RECOMPUTE_NONE;
        priced = priced && predict(&g, a100).step_s < out[k].pred.step_s && out[k].pred.recompute_s > 0;
        said = said && strstr(out[k].reason, gpt_recompute_name((GptRecompute)r));
    }
    EXPECT(none > selective && n > 0 && picked_selective > 0 && chosen && priced && said,
           "limit %.0f bytes (least %.0f without recompute, %.0f with selective): %d candidates, "
           "%d selective, each the cheapest mode that fits %d, slower than without %d, named in the "
           "reason %d (first: %s)", q.memory_limit, none, selective, n, picked_selective, chosen,
           priced, said, n > 0 ? out[0].reason : "-");
    q.recompute = GPT_RECOMPUTE_NONE;
    EXPECT(costmodel_rank(&q, a100, out, 64, err, sizeof err) == 0,
           "recompute none given: nothing fits the limit, nothing else is tried");
    q.recompute = GPT_RECOMPUTE_FULL;
    const int m = costmodel_rank(&q, a100, out, 64, err, sizeof err);
    int kept = m > 0;
    for (int k = 0; k < m && k < 64; k++) kept = kept && out[k].config.recompute == GPT_RECOMPUTE_FULL;
    EXPECT(kept, "recompute full given: %d candidates, all with full %d", m, kept);
}

static void test_committed_clusters(void) {
    const char* files[] = {"costmodel/clusters/a100-4pernode-hdr.cluster",
                           "costmodel/clusters/h100-1pernode-ndr.cluster",
                           "costmodel/clusters/h100-1pernode-ndr-fa2.cluster",
                           "costmodel/clusters/h100-1pernode-ndr-datasheet.cluster",
                           "costmodel/clusters/h100-8pernode.cluster",
                           "costmodel/clusters/h100-8pernode-datasheet.cluster",
                           "costmodel/clusters/cpu-local.cluster"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        Cluster c;
        char err[ERR_LEN] = "";
        EXPECT(cluster_load(files[k], &c, err, sizeof err) == 0, "%s parses %s", files[k], err);
    }
}

// Ring on 16 A100 (4 per node): its hops cross nodes; a 4x4 ATTENTION2D mesh has its columns
// inside a node and its rows across nodes, and moves fewer bytes than the ring.
static void test_topology(const Cluster* a100) {
    const CostShape s = {24, 1536, 16, 50257, 8192, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const CostConfig ring = {s, 8192, 1, 1, 1, 1, 16, COST_RING, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    const CostConfig twod = {s, 8192, 1, 1, 1, 4, 4, COST_2D, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    const CostPrediction r = predict(&ring, a100), t = predict(&twod, a100);
    EXPECT(r.ring_tier == TIER_INTER && t.col_tier == TIER_INTRA && t.row_tier == TIER_INTER &&
           t.attention_bytes < r.attention_bytes && t.step_s < r.step_s,
           "16 A100: ring hop %d, 2d rows %d columns %d (1 = inter-node); bytes %.3g < %.3g; step %.3g < %.3g s",
           r.ring_tier, t.row_tier, t.col_tier, t.attention_bytes, r.attention_bytes, t.step_s, r.step_s);
}

// Ulysses in G chunks of heads (--a2a-chunks) on 1x2, one GPU per node (the inter link: 5 us per
// call, 1 us per message, 10 GB/s). Free compute: nothing to hide under, so G chunks add only the
// G - 1 extra calls of each of the layer's 6 all-to-alls (Q|K|V; O, LSE; Q|K|V|O|dO, LSE;
// dQ|dK|dV), one message each. With compute (flat cluster, T long enough that each chunk's
// attention outlasts its transfers), every transfer but the first chunk's inputs and the last
// chunk's outputs hides: per layer the forward saves (G-1)/G of its bytes' time, bytes in and out.
// Without overlap chunks only cost. USP takes the same path (its ring per chunk inside).
static void test_chunk_pipeline(void) {
    const Cluster free_c = parse_or_die("free-compute", FREE_COMPUTE), flat = flat_cluster();
    const CostShape s = tiny_shape(256);
    CostConfig g = {s, 256, 1, 1, 1, 1, 2, COST_ULYSSES, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    const double call = 5e-6, hop = 1e-6;
    // Ulysses 1x2 (2 heads per rank): 6 all-to-alls per layer; USP 2x2 (2 heads per column
    // rank): the same 6 over the column and the row ring's passes once per chunk (forward 1,
    // backward 1 K|V + 2 dK|dV hops).
    const struct { CostAlgorithm a; int pq, pkv, calls; } cases[] = {
        {COST_ULYSSES, 1, 2, 6}, {COST_USP, 2, 2, 6 + 1 + 3}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int G = 2;
        g.alg = cases[k].a, g.pq = cases[k].pq, g.pkv = cases[k].pkv;
        g.chunks = 1;
        const CostPrediction one = predict(&g, &free_c);
        g.chunks = G;
        const CostPrediction many = predict(&g, &free_c);
        const double want = s.L * (G - 1) * cases[k].calls * (call + hop);
        EXPECT(fabs(many.comm_s - one.comm_s - want) < 1e-9 &&
                   fabs(many.exposed_comm_s - one.exposed_comm_s - want) < 1e-9 &&
                   many.attention_bytes == one.attention_bytes &&
                   many.calls_per_step - one.calls_per_step == s.L * (G - 1) * cases[k].calls,
               "%s %d chunks, free compute: comm +%.9f s, exposed +%.9f s (expected +%.9f), "
               "bytes %.0f / %.0f, calls %.0f / %.0f", cost_algorithm_name(g.alg), G,
               many.comm_s - one.comm_s, many.exposed_comm_s - one.exposed_comm_s, want,
               many.attention_bytes, one.attention_bytes, many.calls_per_step,
               one.calls_per_step);
    }
    // Chunks refused where they do not apply: another schedule, a count not dividing the heads.
    const struct { CostAlgorithm a; int chunks; const char* msg; } bad[] = {
        {COST_RING, 2, "--a2a-chunks 2: only ulysses and usp run their heads in chunks, found ring"},
        {COST_ULYSSES, 4, "--a2a-chunks 4: expected a divisor of the 2 heads per rank of ulysses"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CostConfig x = g;
        x.alg = bad[k].a, x.pq = 1, x.pkv = 2, x.chunks = bad[k].chunks;
        CostPrediction p;
        char e[ERR_LEN] = "";
        const int rc = costmodel_predict(&x, &free_c, &p, e, sizeof e);
        EXPECT(rc != 0 && strcmp(e, bad[k].msg) == 0, "chunks refused: rc %d, '%s'", rc, e);
    }
    // COST_CHUNKS_AUTO: every Ulysses or USP candidate of the ranking takes the fastest of the
    // counts dividing its heads per rank (none faster among them), the others none.
    {
        const CostShape wide = {2, 256, 16, 512, 16384, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        const CostQuery q = {wide, 16384, 1, 1, 4, 0, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL,
                             COST_CHUNKS_AUTO, 0, 0, 0, 0, 0, 0, 0};
        CostCandidate out[64];
        char e[ERR_LEN];
        const int n = costmodel_rank(&q, &flat, out, 64, e, sizeof e);
        int a2a = 0, bad = n < 1;
        for (int k = 0; k < n && k < 64; k++) {
            CostConfig x = out[k].config;
            const int is_a2a = x.alg == COST_ULYSSES || x.alg == COST_USP;
            if (!is_a2a) { bad |= x.chunks > 1; continue; }
            a2a++;
            const int heads = 16 / (x.alg == COST_ULYSSES ? x.pq * x.pkv : x.pq);
            bad |= heads % cost_chunks(&x) != 0;
            for (int G = 1; G <= 8; G++) {
                if (heads % G) continue;
                x.chunks = G;
                bad |= predict(&x, &flat).step_s < out[k].pred.step_s;
            }
        }
        EXPECT(!bad && a2a > 0, "chunks auto: %d candidates, %d Ulysses or USP, each with its "
               "fastest count dividing its heads per rank", n, a2a);
    }
    const CostShape big = {2, 256, 4, 512, 16384, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CostConfig h = {big, 16384, 1, 1, 1, 1, 2, COST_ULYSSES, 1, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    const CostPrediction one = predict(&h, &flat);
    h.chunks = 2;
    const CostPrediction two = predict(&h, &flat);
    h.overlap = 0;
    const CostPrediction plain2 = predict(&h, &flat);
    h.chunks = 1;
    const CostPrediction plain1 = predict(&h, &flat);
    Mesh m;
    char err[ERR_LEN];
    if (mesh_init(&m, 1, 1, 2, 0, 2, err) != 0) setup_fail("%s", err);
    double bytes[2] = {0, 0};
    for (int ph = 0; ph < 2; ph++) {
        const CommVolume v = ulysses_volume(&m, (CommPhase)ph, 1, 8192, 4, 4, 64, 1, 2, 4);
        for (int k = 0; k < COMM_NKINDS; k++) bytes[ph] += (double)v.kind[k].bytes;
    }
    const double bw = 10e9, saved_f = big.L * bytes[0] / 2 / bw, saved_b = big.L * bytes[1] / 2 / bw;
    EXPECT(fabs(one.forward_s - two.forward_s - saved_f) < 1e-9 &&
               fabs(one.backward_s - two.backward_s - saved_b) < 1e-9,
           "ulysses 2 chunks, compute-bound: forward %.9f -> %.9f s (expected %.9f less), "
           "backward %.9f -> %.9f s (expected %.9f less)", one.forward_s, two.forward_s, saved_f,
           one.backward_s, two.backward_s, saved_b);
    const double extra = big.L * 6 * (call + hop);
    EXPECT(fabs(plain2.step_s - plain1.step_s - extra) < 1e-9,
           "ulysses 2 chunks, --overlap 0: step %.9f -> %.9f s (expected %.9f more: the calls)",
           plain1.step_s, plain2.step_s, extra);
}

int main(void) {
    test_chunk_pipeline();
    const Cluster free_compute = parse_or_die("free-compute", FREE_COMPUTE);
    Cluster a100;
    char err[ERR_LEN];
    if (cluster_load("costmodel/clusters/a100-4pernode-hdr.cluster", &a100, err, sizeof err) != 0)
        setup_fail("%s", err);
    test_bytes_equal_dist_cost(&a100);
    test_window_pairs();
    test_attention_flops(&a100);
    test_document_pairs();
    test_document_flops(&a100);
    test_ring_steps(&a100);
    test_tile_pairs(&a100);
    test_alpha_beta_known_answer(&free_compute);
    test_parser_errors();
    test_ranked_table(&a100);
    test_committed_clusters();
    test_topology(&a100);
    test_recompute_time_and_memory();
    test_merges_in_forward();
    test_rank_recompute(&a100);
    test_gqa_params();
    test_gqa_gemms();
    test_swiglu_costs();
    test_gqa_comm(&free_compute);
    test_rope(&a100);
    test_gqa_attention_passes();
    test_gqa_ulysses(&a100);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
