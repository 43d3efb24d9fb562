// --mesh auto (train/mesh_auto.h): one call of the cost model's ranking, filtered by the options
// the user fixed, printed, and the best candidate written back into the options.
#include "train/mesh_auto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "costmodel/costmodel.h"
#include "model/activations.h"
#include "model/backend.h"

enum { SHOWN = 5 };   // candidates printed
static const double GIB = 1073741824.0;

const char* mesh_auto_cluster_path(const TrainOptions* o) {
    if (o->cluster && o->cluster[0]) return o->cluster;
    return gpt_backend_host_memory() ? "costmodel/clusters/cpu-local.cluster"
                                     : "costmodel/clusters/h100-8pernode.cluster";
}

// Whether a candidate agrees with the mesh options given on the command line. Ring-family
// schedules only use P = pq * pkv, so for them an explicit pq and pkv fix P only. An explicit
// --attention asks for sequence parallelism with that schedule: P = 1 (no schedule at all) is
// left out.
static int agrees(const CostConfig* g, const TrainOptions* o) {
    const int ring = cost_algorithm_is_ring(g->alg);
    const int P = g->pq * g->pkv;
    if ((o->given & OPT_GIVEN_DP) && g->dp != o->dp) return 0;
    if ((o->given & OPT_GIVEN_ATTENTION) && P == 1) return 0;
    if (ring) {
        if ((o->given & OPT_GIVEN_PQ) && (o->given & OPT_GIVEN_PKV)) return P == o->pq * o->pkv;
        if ((o->given & OPT_GIVEN_PQ) && P % o->pq) return 0;
        if ((o->given & OPT_GIVEN_PKV) && P % o->pkv) return 0;
        return 1;
    }
    if ((o->given & OPT_GIVEN_PQ) && g->pq != o->pq) return 0;
    if ((o->given & OPT_GIVEN_PKV) && g->pkv != o->pkv) return 0;
    return 1;
}

static void print_candidate(int rank, const CostCandidate* k) {
    const CostConfig* g = &k->config;
    const CostPrediction* p = &k->pred;
    printf("  %d. dp %d x pq %d x pkv %d, %-10s recompute %-9s %10.1f ms/step %12.0f tokens/s "
           "%8.2f GiB/device  %s\n", rank, g->dp, g->pq, g->pkv, cost_algorithm_name(g->alg),
           gpt_recompute_name((GptRecompute)g->recompute), p->step_s * 1e3, p->tokens_per_s,
           p->memory_bytes / GIB, k->reason);
}

// The query's recompute: the one given with --recompute, else the cheapest that fits.
static int query_recompute(const TrainOptions* o, char* err, size_t errlen) {
    if (!(o->given & OPT_GIVEN_RECOMPUTE)) return COST_RECOMPUTE_AUTO;
    GptRecompute r;
    if (gpt_recompute_parse(o->recompute, &r) != 0) {
        snprintf(err, errlen, "--recompute: expected none, selective or full, found '%s'",
                 o->recompute);
        return -2;
    }
    return (int)r;
}

int mesh_auto_choose(TrainOptions* o, const GPTConfig* cfg, int world, int report, char* err,
                     size_t errlen) {
    const char* path = mesh_auto_cluster_path(o);
    Cluster cluster;
    if (cluster_load(path, &cluster, err, errlen) != 0) return -1;
    CostQuery q;
    memset(&q, 0, sizeof q);
    q.shape = (CostShape){cfg->L, cfg->C, cfg->NH, cfg->V, cfg->max_T, cfg->window,
                          cfg->window_every};
    q.T = o->seq_len;
    q.B = o->batch;
    q.accum = 1;   // ranked by tokens/s, which accumulation leaves (nearly) unchanged
    q.world = world;
    q.memory_limit = o->memory_gb * GIB;
    q.overlap = o->overlap;
    q.zero = o->zero;
    if (o->given & OPT_GIVEN_ATTENTION) {
        const int a = cost_algorithm_parse(o->attention);
        if (a < 0) {
            snprintf(err, errlen, "--attention %s: the cost model has no such schedule",
                     o->attention);
            return -1;
        }
        q.algorithms = 1u << a;
    }
    q.recompute = query_recompute(o, err, errlen);
    if (q.recompute == -2) return -1;
    // Every candidate: the first call counts them.
    const int n = costmodel_rank(&q, &cluster, NULL, 0, err, errlen);
    if (n < 0) return -1;
    CostCandidate* all = xcalloc((size_t)(n > 0 ? n : 1), sizeof *all, "mesh candidates");
    costmodel_rank(&q, &cluster, all, n, err, errlen);
    int kept = 0;
    for (int k = 0; k < n; k++)
        if (agrees(&all[k].config, o)) all[kept++] = all[k];
    if (kept == 0) {
        snprintf(err, errlen, "--mesh auto: no configuration of %d ranks fits (T = %d, batch %d, "
                 "memory %.3g GiB per device on %s, with the --dp/--pq/--pkv/--attention/--recompute "
                 "given); %d without --dp/--pq/--pkv/--attention", world, o->seq_len, o->batch,
                 (q.memory_limit > 0 ? q.memory_limit : cluster.memory_bytes) / GIB,
                 path, n);
        free(all);
        return -1;
    }
    const CostConfig best = all[0].config;
    if (report) {
        printf("mesh auto: %d feasible configurations of %d ranks on %s (%s); predicted, "
               "fastest first:\n", kept, world, cluster.name, path);
        for (int k = 0; k < kept && k < SHOWN; k++) print_candidate(k + 1, &all[k]);
        printf("mesh auto: running dp %d x pq %d x pkv %d with --attention %s\n", best.dp,
               best.pq, best.pkv, cost_algorithm_name(best.alg));
        printf("mesh auto: --recompute %s (%s)\n", gpt_recompute_name((GptRecompute)best.recompute),
               (o->given & OPT_GIVEN_RECOMPUTE) ? "given"
               : best.recompute == GPT_RECOMPUTE_NONE ? "nothing to recompute: it fits"
                                                      : "the cheapest with which it fits");
        if (strcmp(o->document_mask, "none") != 0)
            printf("mesh auto: note: the cost model prices causal attention over the whole "
                   "sequence; under --document-mask %s a query attends within its document only, "
                   "and computes less than these times say\n", o->document_mask);
    }
    if (!(o->given & OPT_GIVEN_RECOMPUTE))
        o->recompute = gpt_recompute_name((GptRecompute)best.recompute);
    o->dp = best.dp;
    if (!(o->given & OPT_GIVEN_PQ) || !(o->given & OPT_GIVEN_PKV) || !cost_algorithm_is_ring(best.alg))
        o->pq = best.pq, o->pkv = best.pkv;
    if (!(o->given & OPT_GIVEN_ATTENTION)) o->attention = cost_algorithm_name(best.alg);
    free(all);
    return 0;
}
