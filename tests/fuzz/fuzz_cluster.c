// Cluster descriptions for the cost model (costmodel/cluster.c): cluster_load and
// cluster_read_fits, the two readers behind `--cluster FILE` (--mesh auto, build/costmodel) and
// `costmodel --calibrate --collectives JSONL`. Input: the cluster file, a NUL byte, then a
// collectives JSONL (optional). An accepted cluster holds only values in the ranges cluster.h
// documents (finite, positive where a rate, curves with thresholds strictly decreasing to 0 and
// efficiencies in (0, 1]), so the model's lookups return efficiencies in (0, 1]; a fits file adds
// at least one fit, each over P >= 2 ranks with a finite alpha >= 0 and beta > 0.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/fail.h"
#include "costmodel/cluster.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int valid_curve(const EfficiencyCurve* c) {
    if (c->n < 1 || c->n > CLUSTER_MAX_CURVE || c->threshold[c->n - 1] != 0) return 0;
    for (int k = 0; k < c->n; k++) {
        if (!isfinite(c->threshold[k]) || !(c->efficiency[k] > 0 && c->efficiency[k] <= 1)) return 0;
        if (k && !(c->threshold[k] < c->threshold[k - 1])) return 0;
    }
    // what the cost model reads from it
    const double sizes[] = {0, 0.5, 1, 1e3, 1e30, INFINITY};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const double e = curve_efficiency(c, sizes[i]);
        if (!(e > 0 && e <= 1)) return 0;
    }
    return 1;
}

static int positive(double x) { return isfinite(x) && x > 0; }

static int valid_fit(const CollectiveFit* f) {
    return f->op >= 0 && f->op < FIT_OPS && f->P >= 2 && isfinite(f->alpha) && f->alpha >= 0 &&
           positive(f->beta);
}

static void check_cluster(const Cluster* c) {
    fuzz_expect(c->name[0] && memchr(c->name, 0, CLUSTER_NAME_LEN) != NULL,
                "cluster_load accepted an empty or unterminated name");
    fuzz_expect(c->gpus_per_node >= 1 && c->shared_cores >= 0 && (c->async_comm == 0 ||
                c->async_comm == 1) && c->nics_per_node >= 1,
                "cluster_load accepted a node count out of its range");
    const double rates[] = {c->memory_bytes, c->matmul_flops, c->vector_flops, c->memory_bw,
                            c->act_bytes, c->acc_bytes, c->param_bytes};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        fuzz_expect(positive(rates[i]), "cluster_load accepted a rate or size that is not positive");
    fuzz_expect(isfinite(c->state_bytes) && c->state_bytes >= 0 && isfinite(c->step_fixed_s) &&
                c->step_fixed_s >= 0, "cluster_load accepted a negative or infinite size or time");
    for (int t = 0; t < TIER_COUNT; t++) {
        const Link* l = &c->link[t];
        fuzz_expect(positive(l->bandwidth) && (t != TIER_INTRA || positive(l->p2p_bandwidth)) &&
                    l->efficiency > 0 &&
                    l->efficiency <= 1 && isfinite(l->call_latency) && l->call_latency >= 0 &&
                    isfinite(l->hop_latency) && l->hop_latency >= 0,
                    "cluster_load accepted a link figure out of its range");
    }
    const EfficiencyCurve* required[] = {&c->shared_eff, &c->matmul_eff, &c->attention_fwd_eff,
                                         &c->attention_bwd_eff, &c->vector_eff, &c->memory_eff};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        fuzz_expect(valid_curve(required[i]), "cluster_load accepted a malformed curve");
    for (int k = 0; k < CK_COUNT; k++)
        fuzz_expect(c->kernel_eff[k].n == 0 || valid_curve(&c->kernel_eff[k]),
                    "cluster_load accepted a malformed kernel curve");
    fuzz_expect(c->n_head_sizes >= 0 && c->n_head_sizes <= CLUSTER_MAX_HEAD_SIZES,
                "cluster_load accepted too many head sizes");
    for (int k = 0; k < c->n_head_sizes; k++)
        fuzz_expect(c->head_size[k].head_size >= 1 && c->head_size[k].head_size <= 1024 &&
                    valid_curve(&c->head_size[k].forward) && valid_curve(&c->head_size[k].backward),
                    "cluster_load accepted a malformed head-size curve");
    for (int hs = 16; hs <= 256; hs *= 2) {
        const EfficiencyCurve *f, *b;
        cluster_attention_curves(c, hs, &f, &b);
        fuzz_expect(valid_curve(f) && valid_curve(b), "the attention curves of a head size are malformed");
    }
}

// Every fit valid, and cluster_fit returning the op asked for.
static void check_fits(const Cluster* c) {
    fuzz_expect(c->nfits >= 0 && c->nfits <= CLUSTER_MAX_FITS, "more fits than the table holds");
    for (int k = 0; k < c->nfits; k++) fuzz_expect(valid_fit(&c->fit[k]), "a fit out of its range");
    for (int op = 0; op < FIT_OPS; op++)
        for (int P = 1; P <= 64; P *= 2) {
            const CollectiveFit* f = cluster_fit(c, (FitOp)op, P);
            fuzz_expect(!f || f->op == (FitOp)op, "cluster_fit returned another op's fit");
        }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const uint8_t* part[2];
    size_t len[2];
    const size_t parts = fuzz_split(data, size, 2, part, len);
    char err[ERR_LEN] = "";
    Cluster c;
    if (cluster_load(fuzz_file("test.cluster", part[0], len[0]), &c, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        memset(&c, 0, sizeof c);   // the fits reader on its own
    } else {
        check_cluster(&c);
        check_fits(&c);
    }
    if (parts < 2) return 0;
    const int before = c.nfits;
    err[0] = 0;
    if (cluster_read_fits(fuzz_file("collectives.jsonl", part[1], len[1]), &c, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        return 0;
    }
    fuzz_expect(c.nfits > before, "cluster_read_fits succeeded without adding a fit");
    check_fits(&c);
    return 0;
}
