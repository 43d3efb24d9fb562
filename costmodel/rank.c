// Choosing a mesh: every configuration of dp x pq x pkv and schedule a world allows is predicted
// (costmodel.c), those that fit in memory are ranked by throughput, each with the reason for its
// place (what bounds its step, which groups cross nodes).
#include <stdio.h>
#include <stdlib.h>

#include "comm/fail.h"
#include "costmodel/costmodel.h"

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

// One line: what bounds the step and which groups cross nodes.
static void describe(CostCandidate* k) {
    const CostPrediction* p = &k->pred;
    const CostConfig* g = &k->config;
    const double comm_frac = p->exposed_comm_s / p->step_s;
    char where[96];
    if (g->pq * g->pkv == 1) snprintf(where, sizeof where, "no sequence parallelism");
    else if (cost_algorithm_is_ring(g->alg))
        snprintf(where, sizeof where, "ring hops %s", tier_name(p->ring_tier));
    else
        snprintf(where, sizeof where, "rows %s, columns %s",
                 g->pkv > 1 ? tier_name(p->row_tier) : "of one rank",
                 g->pq > 1 ? tier_name(p->col_tier) : "of one rank");
    snprintf(k->reason, sizeof k->reason, "%s (exposed comm %.0f%% of the step); %s; gradients %s",
             comm_frac > 0.5 ? "communication-bound" : "compute-bound", 100 * comm_frac, where,
             tier_name(p->world_tier));
}

static int wanted(const CostQuery* q, CostAlgorithm a) {
    return q->algorithms == 0 || (q->algorithms >> a & 1u);
}

// Appends the candidate if it is valid and fits in memory.
static void consider(const CostQuery* q, const Cluster* c, CostConfig g, CostCandidate** list,
                     int* n, int* cap) {
    CostPrediction p;
    char err[ERR_LEN];
    if (costmodel_predict(&g, c, &p, err, sizeof err) != 0) return;
    const double limit = q->memory_limit > 0 ? q->memory_limit : c->memory_bytes;
    const int world = g.dp * g.pq * g.pkv;
    const int on_node = world < c->gpus_per_node ? world : c->gpus_per_node;
    // shared cores share the node's memory too
    if (p.memory_bytes * (c->shared_cores > 0 ? on_node : 1) > limit) return;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        CostCandidate* grown = realloc(*list, sizeof **list * (size_t)*cap);
        CHECK(grown, "out of memory", "%d candidates", *cap);
        *list = grown;
    }
    CostCandidate* k = &(*list)[(*n)++];
    k->config = g;
    k->pred = p;
    describe(k);
}

int costmodel_rank(const CostQuery* q, const Cluster* c, CostCandidate* out, int max_out,
                   char* err, size_t errlen) {
    if (q->world < 1 || q->T < 1 || q->B < 1 || q->accum < 1)
        return set_err(err, errlen, "query: expected positive world, T, batch and accum, found "
                       "%d, %ld, %d, %d", q->world, q->T, q->B, q->accum);
    CostCandidate* list = NULL;
    int n = 0, cap = 0;
    for (int dp = 1; dp <= q->world; dp++) {
        if (q->world % dp) continue;
        const int P = q->world / dp;
        CostConfig g = {q->shape, q->T, q->B, q->accum, dp, 1, P, COST_2D, q->overlap, q->zero, 0};
        if (P == 1) {
            consider(q, c, g, &list, &n, &cap);
            continue;
        }
        for (int a = COST_2D; a < COST_NALGS; a++) {
            if (!wanted(q, (CostAlgorithm)a)) continue;
            g.alg = (CostAlgorithm)a;
            if (cost_algorithm_is_ring(g.alg)) {
                g.pq = 1, g.pkv = P;
                consider(q, c, g, &list, &n, &cap);
                continue;
            }
            for (int pq = 1; pq <= P; pq++) {
                if (P % pq) continue;
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
