// Choosing a mesh: every configuration of dp x pq x pkv and schedule a world allows is predicted
// (costmodel.c), those that fit in memory (with the cheapest recompute that fits, unless one is
// given) are ranked by throughput, each with the reason for its place (what bounds its step,
// which groups cross nodes, the recompute it needs).
#include <stdio.h>
#include <stdlib.h>

#include "attention/dist_attention.h"
#include "comm/fail.h"
#include "costmodel/costmodel.h"
#include "model/activations.h"

// Throughput first: a larger dp also processes more tokens per step, so step times of different
// meshes are not comparable, tokens per second are.
static int by_throughput(const void* pa, const void* pb) {
    const CostCandidate *a = pa, *b = pb;
    if (a->pred.tokens_per_s != b->pred.tokens_per_s)
        return a->pred.tokens_per_s > b->pred.tokens_per_s ? -1 : 1;
    if (a->pred.bytes_per_rank != b->pred.bytes_per_rank)
        return a->pred.bytes_per_rank < b->pred.bytes_per_rank ? -1 : 1;
    return b->config.dp - a->config.dp;
}

static const char* tier_name(Tier t) { return t == TIER_INTER ? "inter-node" : "intra-node"; }

// One line: what bounds the step, which groups cross nodes, and the recompute it needs.
static void describe(CostCandidate* k, int chosen) {
    const CostPrediction* p = &k->pred;
    const CostConfig* g = &k->config;
    const double comm_frac = p->exposed_comm_s / p->step_s;
    char where[96], recompute[96] = "", in_chunks[32] = "";
    if (cost_chunks(g) > 1) snprintf(in_chunks, sizeof in_chunks, " in %d chunks", g->chunks);
    if (g->pq * g->pkv == 1) snprintf(where, sizeof where, "no sequence parallelism");
    else if (cost_algorithm_is_ring(g->alg))
        snprintf(where, sizeof where, "ring hops %s", tier_name(p->ring_tier));
    else if (g->alg == COST_ULYSSES)
        snprintf(where, sizeof where, "all-to-alls %s%s", tier_name(p->sp_tier), in_chunks);
    else if (g->alg == COST_USP)
        snprintf(where, sizeof where, "all-to-alls %s%s, ring hops %s", tier_name(p->col_tier),
                 in_chunks, tier_name(p->row_tier));
    else
        snprintf(where, sizeof where, "rows %s, columns %s",
                 g->pkv > 1 ? tier_name(p->row_tier) : "of one rank",
                 g->pq > 1 ? tier_name(p->col_tier) : "of one rank");
    char layers[48] = "";
    if (g->recompute_layers > 0)
        snprintf(layers, sizeof layers, " of the first %d layers", g->recompute_layers);
    if (g->recompute != GPT_RECOMPUTE_NONE)
        snprintf(recompute, sizeof recompute, "; recompute %s%s (%s; %.0f%% of the step)",
                 gpt_recompute_name((GptRecompute)g->recompute), layers,
                 !chosen ? "given" : "none does not fit",
                 100 * p->recompute_s / p->step_s);
    snprintf(k->reason, sizeof k->reason, "%s (exposed comm %.0f%% of the step); %s; gradients %s%s",
             comm_frac > 0.5 ? "communication-bound" : "compute-bound", 100 * comm_frac, where,
             tier_name(p->world_tier), recompute);
}

static int wanted(const CostQuery* q, CostAlgorithm a) {
    return q->algorithms == 0 || (q->algorithms >> a & 1u);
}

int costmodel_fits(const CostConfig* g, const CostPrediction* p, const Cluster* c, double limit) {
    if (limit <= 0) limit = c->memory_bytes;
    return p->memory_bytes * costmodel_memory_sharers(g, c) <= limit;
}

// g under recompute mode r over its first `layers` layers (0: all): 1 if it fits, 0 if not, -1
// with err.
static int predict_with(CostConfig* g, int r, int layers, const Cluster* c, double limit,
                        CostPrediction* p, char* err, size_t errlen) {
    g->recompute = r;
    g->recompute_layers = layers;
    if (costmodel_predict(g, c, p, err, errlen) != 0) return -1;
    return costmodel_fits(g, p, c, limit);
}

// g predicted under recompute mode r over the fewest layers with which it fits (1..L; L as 0,
// all), in *g and *p: 1, or 0 when even all of them do not fit (*p with all), -1 with err.
static int fewest_layers(CostConfig* g, int r, const Cluster* c, double limit, CostPrediction* p,
                         char* err, size_t errlen) {
    const int fits = predict_with(g, r, 0, c, limit, p, err, errlen);   // (checks g)
    if (fits <= 0) return fits;
    const int n = costmodel_fewest_recompute_layers(g, c, limit > 0 ? limit : c->memory_bytes);
    const int f = n > 0 ? predict_with(g, r, n, c, limit, p, err, errlen) : 1;
    // (the bisection divides the limit by the ranks sharing it; costmodel_fits multiplies)
    return f == 0 ? predict_with(g, r, 0, c, limit, p, err, errlen) : f;
}

int costmodel_predict_fitting(CostConfig* g, const Cluster* c, double limit, int recompute,
                              CostPrediction* p, char* err, size_t errlen) {
    if (recompute != COST_RECOMPUTE_AUTO)   // given: with g's layers
        return predict_with(g, recompute, g->recompute_layers, c, limit, p, err, errlen);
    const int none = predict_with(g, GPT_RECOMPUTE_NONE, 0, c, limit, p, err, errlen);
    if (none != 0) return none;
    // Selective and full, each over the fewest layers with which it fits: the faster.
    CostConfig full = *g;
    CostPrediction pf;
    const int s = fewest_layers(g, GPT_RECOMPUTE_SELECTIVE, c, limit, p, err, errlen);
    if (s < 0) return -1;
    const int f = fewest_layers(&full, GPT_RECOMPUTE_FULL, c, limit, &pf, err, errlen);
    if (f < 0) return -1;
    if (!s || (f && pf.step_s < p->step_s)) *g = full, *p = pf;   // neither fits: full's
    return s || f;
}

int costmodel_predict_chunks(CostConfig* g, const Cluster* c, double limit, int recompute,
                             int chunks, CostPrediction* out, char* err, size_t errlen) {
    const int a2a = g->alg == COST_ULYSSES || g->alg == COST_USP;
    if (!a2a || chunks != COST_CHUNKS_AUTO) {   // a count > 1 on another schedule: refused
        g->chunks = chunks > 1 ? chunks : 0;
        return costmodel_predict_fitting(g, c, limit, recompute, out, err, errlen);
    }
    // chunks divide the key/value heads per rank (the heads without grouped-query attention)
    const int split = g->alg == COST_ULYSSES ? g->pq * g->pkv : g->pq;
    const int NKV = g->shape.kv_heads > 0 ? g->shape.kv_heads : g->shape.NH;
    const int heads = NKV % split ? 1 : NKV / split;   // else the check refuses
    int fits = -1;
    CostConfig best = *g;
    for (int G = 1; G <= ULYSSES_MAX_CHUNKS && G <= heads; G++) {
        if (heads % G) continue;
        CostConfig tried = *g;
        CostPrediction p;
        tried.chunks = G;
        const int r = costmodel_predict_fitting(&tried, c, limit, recompute, &p, err, errlen);
        if (r < 0) return -1;
        if (fits < 0 || p.step_s < out->step_s) best = tried, *out = p, fits = r;
    }
    *g = best;
    return fits;
}

// Appends the candidate if it is valid and fits in memory.
static void consider(const CostQuery* q, const Cluster* c, CostConfig g, CostCandidate** list,
                     int* n, int* cap) {
    CostPrediction p;
    char err[ERR_LEN];
    if (costmodel_predict_chunks(&g, c, q->memory_limit, q->recompute, q->chunks, &p, err,
                                 sizeof err) != 1)
        return;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        CostCandidate* grown = realloc(*list, sizeof **list * (size_t)*cap);
        CHECK(grown, "out of memory", "%d candidates", *cap);
        *list = grown;
    }
    CostCandidate* k = &(*list)[(*n)++];
    k->config = g;
    k->pred = p;
    describe(k, q->recompute == COST_RECOMPUTE_AUTO);
}

int costmodel_rank(const CostQuery* q, const Cluster* c, CostCandidate* out, int max_out,
                   char* err, size_t errlen) {
    if (q->world < 1 || q->T < 1 || q->B < 1 || q->accum < 1)
        return set_err(err, errlen, "query: expected positive world, T, batch and accum, found "
                       "%d, %ld, %d, %d", q->world, q->T, q->B, q->accum);
    if (q->recompute != COST_RECOMPUTE_AUTO &&
        (q->recompute < GPT_RECOMPUTE_NONE || q->recompute > GPT_RECOMPUTE_FULL))
        return set_err(err, errlen, "query: recompute: expected 0 (none), 1 (selective), 2 (full) "
                       "or %d (auto), found %d", COST_RECOMPUTE_AUTO, q->recompute);
    CostCandidate* list = NULL;
    int n = 0, cap = 0;
    for (int dp = 1; dp <= q->world; dp++) {
        if (q->world % dp) continue;
        const int P = q->world / dp;
        CostConfig g = {q->shape, q->T, q->B, q->accum, dp, 1, P, COST_2D, q->overlap, q->zero,
                        0, GPT_RECOMPUTE_NONE, q->docs, 1, q->muon, q->muon_split,
                        q->muon_whole_qkv, q->muon_prec, q->z_loss, q->params_norm,
                        q->recompute == COST_RECOMPUTE_AUTO ? 0 : q->recompute_layers};
        if (P == 1) {   // no sequence parallelism (unless chunks of heads ask for Ulysses or USP)
            if (q->chunks <= 1) consider(q, c, g, &list, &n, &cap);   // AUTO included
            continue;
        }
        for (int a = COST_2D; a < COST_NALGS; a++) {
            if (!wanted(q, (CostAlgorithm)a)) continue;
            g.alg = (CostAlgorithm)a;
            if (cost_algorithm_ignores_mesh(g.alg)) {   // P alone matters (Ulysses: P | NKV)
                g.pq = 1, g.pkv = P;
                consider(q, c, g, &list, &n, &cap);
                continue;
            }
            for (int pq = 1; pq <= P; pq++) {
                // USP's ends, pq = 1 and pkv = 1, are Striped and Ulysses, ranked as themselves
                if (P % pq || (g.alg == COST_USP && (pq == 1 || pq == P))) continue;
                g.pq = pq, g.pkv = P / pq;
                consider(q, c, g, &list, &n, &cap);
            }
        }
    }
    if (n) qsort(list, (size_t)n, sizeof *list, by_throughput);
    for (int k = 0; k < n && k < max_out; k++) out[k] = list[k];
    free(list);
    return n;
}
