// --mesh auto (train/mesh_auto.h): one call of the cost model's ranking, filtered by the options
// the user fixed, printed, and the best candidate written back into the options.
#include "train/mesh_auto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "costmodel/costmodel.h"
#include "data/loader.h"
#include "model/activations.h"
#include "model/backend.h"
#include "model/documents.h"
#include "model/muon.h"

enum { SHOWN = 5 };   // candidates printed
static const double GIB = 1073741824.0;

const char* mesh_auto_cluster_path(const TrainOptions* o) {
    if (o->cluster && o->cluster[0]) return o->cluster;
    return gpt_backend_host_memory() ? "costmodel/clusters/cpu-local.cluster"
                                     : "costmodel/clusters/h100-8pernode.cluster";
}

// Whether a candidate agrees with the mesh options given on the command line. Ring-family
// schedules and Ulysses only use P = pq * pkv, so for them an explicit pq and pkv fix P only. An explicit
// --attention asks for sequence parallelism with that schedule: P = 1 (no schedule at all) is
// left out.
static int agrees(const CostConfig* g, const TrainOptions* o) {
    const int ring = cost_algorithm_ignores_mesh(g->alg);
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

// The documents of the first sequences training reads (one data-parallel rank reading one
// sequence at a time walks the same global order as every mesh): their starts, (rows, T) in
// *start (caller frees). Returns 0, or -1 with err naming --train-data.
static int sample_documents(const TrainOptions* o, const GPTConfig* cfg, int boundary,
                            CostDocuments* docs, int** start, char* err, size_t errlen) {
    const int T = o->seq_len;
    const LoaderConfig lc = {.B = 1, .T = T, .dp_rank = 0, .dp_size = 1, .shuffle = 1,
                             .seed = (uint64_t)o->seed, .vocab_size = cfg->V,
                             .mode = LOADER_TRAIN};
    char why[ERR_LEN];
    DataLoader* loader = loader_open(o->train_data, &lc, why, sizeof why);
    if (!loader) {
        snprintf(err, errlen, "--train-data %s", why);
        return -1;
    }
    const int64_t windows = loader_windows_per_epoch(loader);
    const int rows = windows < MESH_AUTO_SAMPLE ? (int)windows : MESH_AUTO_SAMPLE;
    int32_t* tokens = xmalloc(sizeof(int32_t) * 2 * (size_t)T, "sampled sequence");
    int* end = xmalloc(sizeof(int) * (size_t)T, "sampled document ends");
    *start = xmalloc(sizeof(int) * (size_t)rows * T, "sampled document starts");
    int rc = 0;
    for (int r = 0; r < rows && rc == 0; r++) {
        rc = loader_next(loader, tokens, tokens + T, why, sizeof why);
        if (rc == 0) document_bounds(tokens, 1, T, boundary, *start + (long)r * T, end);
    }
    loader_close(loader);
    free(tokens);
    free(end);
    if (rc != 0) {
        snprintf(err, errlen, "--train-data %s", why);
        free(*start);
        *start = NULL;
        return -1;
    }
    *docs = (CostDocuments){.start = *start, .rows = rows, .T = T};
    return 0;
}

// The sampled documents' mean length: tokens over documents (a sequence's first tokens, which
// continue an earlier document, count as one).
static double mean_document_length(const CostDocuments* d) {
    long documents = 0;
    for (long i = 0; i < d->rows * d->T; i++) documents += d->start[i] == i % d->T;
    return (double)d->rows * d->T / documents;
}

int mesh_auto_choose(TrainOptions* o, const GPTConfig* cfg, int doc_boundary, int world,
                     int report, double* pair_share, char* err, size_t errlen) {
    const char* path = mesh_auto_cluster_path(o);
    Cluster cluster;
    if (cluster_load(path, &cluster, err, errlen) != 0) return -1;
    CostDocuments docs;
    int* doc_start = NULL;
    if (doc_boundary >= 0 && !o->eval_only &&
        sample_documents(o, cfg, doc_boundary, &docs, &doc_start, err, errlen) != 0)
        return -1;
    CostQuery q;
    memset(&q, 0, sizeof q);
    // kv_heads: the cost model prices grouped-query attention's narrower qkv projection and K/V
    // traffic, and leaves out Ulysses and USP where the all-to-all ranks do not divide them;
    // rope_theta: rotary positions' missing position table and their rotation kernel; norm, mlp,
    // ffn_hidden: the block's parameters and MLP widths
    q.shape = (CostShape){cfg->L, cfg->C, cfg->NH, cfg->V, cfg->max_T, cfg->window,
                          cfg->window_every, cfg->kv_heads, cfg->rope_theta, cfg->norm, cfg->mlp,
                          cfg->ffn_hidden, cfg->no_linear_bias, cfg->untied_classifier,
                          cfg->qkv_bias, cfg->qk_norm};
    q.T = o->seq_len;
    q.B = o->batch;
    q.accum = 1;   // ranked by tokens/s, which accumulation leaves (nearly) unchanged
    q.world = world;
    q.memory_limit = o->memory_gb * GIB;
    q.overlap = o->overlap;
    q.zero = o->zero;
    q.muon = options_muon(o) ? o->muon_ns_steps : 0;
    q.muon_split = strcmp(o->optimizer, "dist_muon") == 0;
    q.muon_whole_qkv = o->muon_no_split_qkv;
    q.muon_prec = muon_matmul_prec(o->muon_matmul_prec);
    q.z_loss = o->z_loss > 0;
    q.params_norm = o->log_params_norm;
    q.chunks = (o->given & OPT_GIVEN_A2A_CHUNKS) ? o->a2a_chunks : COST_CHUNKS_AUTO;
    if (o->given & OPT_GIVEN_ATTENTION) {
        const int a = cost_algorithm_parse(o->attention);
        if (a < 0) {
            snprintf(err, errlen, "--attention %s: the cost model has no such schedule",
                     o->attention);
            return -1;
        }
        q.algorithms = 1u << a;
    } else if (q.chunks > 1) {   // chunks of heads asked for: the all-to-all schedules alone
        q.algorithms = 1u << COST_ULYSSES | 1u << COST_USP;
    }
    q.docs = doc_start ? &docs : NULL;
    q.recompute = query_recompute(o, err, errlen);
    q.recompute_layers = o->recompute_num_layers;
    // Every candidate: the first call counts them.
    const int n = q.recompute == -2 ? -1 : costmodel_rank(&q, &cluster, NULL, 0, err, errlen);
    if (n < 0) {
        free(doc_start);
        return -1;
    }
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
        free(doc_start);
        return -1;
    }
    const CostConfig best = all[0].config;
    if (pair_share) *pair_share = all[0].pred.pair_share;
    if (report) {
        printf("mesh auto: %d feasible configurations of %d ranks on %s (%s); predicted, "
               "fastest first:\n", kept, world, cluster.name, path);
        for (int k = 0; k < kept && k < SHOWN; k++) print_candidate(k + 1, &all[k]);
        printf("mesh auto: running dp %d x pq %d x pkv %d with --attention %s\n", best.dp,
               best.pq, best.pkv, cost_algorithm_name(best.alg));
        char layers[48] = "";
        if (best.recompute_layers > 0)
            snprintf(layers, sizeof layers, " --recompute-num-layers %d", best.recompute_layers);
        printf("mesh auto: --recompute %s%s (%s)\n",
               gpt_recompute_name((GptRecompute)best.recompute), layers,
               (o->given & OPT_GIVEN_RECOMPUTE) ? "given"
               : best.recompute == GPT_RECOMPUTE_NONE ? "nothing to recompute: it fits"
               : best.recompute_layers > 0 ? "the cheapest with which it fits: the fewest layers"
                                           : "the cheapest with which it fits");
        const int a2a = best.alg == COST_ULYSSES || best.alg == COST_USP;
        const int gqa = cfg->kv_heads > 0 && cfg->kv_heads < cfg->NH;
        printf("mesh auto: --a2a-chunks %d (%s)\n", cost_chunks(&best),
               (o->given & OPT_GIVEN_A2A_CHUNKS) ? "given"
               : a2a && best.pq * best.pkv > 1
                   ? gqa ? "the fastest count dividing the key/value heads per rank"
                         : "the fastest count dividing the heads per rank"
                   : "not an all-to-all schedule");
        if (q.docs)
            printf("mesh auto: priced under --document-mask %s with the documents of the first "
                   "%d sequences of --train-data: %.1f tokens per document, %.2f%% of the "
                   "attention pairs without the mask\n", o->document_mask, docs.rows,
                   mean_document_length(&docs), 100 * all[0].pred.pair_share);
    }
    if (!(o->given & OPT_GIVEN_RECOMPUTE)) {
        o->recompute = gpt_recompute_name((GptRecompute)best.recompute);
        o->recompute_num_layers = best.recompute_layers;
    }
    if (!(o->given & OPT_GIVEN_A2A_CHUNKS)) o->a2a_chunks = cost_chunks(&best);
    o->dp = best.dp;
    if (!(o->given & OPT_GIVEN_PQ) || !(o->given & OPT_GIVEN_PKV) ||
        !cost_algorithm_ignores_mesh(best.alg))
        o->pq = best.pq, o->pkv = best.pkv;
    if (!(o->given & OPT_GIVEN_ATTENTION)) o->attention = cost_algorithm_name(best.alg);
    free(all);
    free(doc_start);
    return 0;
}
