// The paper comparison and the CPU validation reports of build/costmodel (reports.h).
#include "costmodel/reports.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/fail.h"
#include "costmodel/costmodel.h"
#include "costmodel/sweep_csv.h"
#include "model/activations.h"
#include "model/config.h"

FILE* report_file_open(AtomicFile* af, const char* path) {
    char err[ERR_LEN];
    if (atomic_open(af, path, err, sizeof err) != 0) fail_msg("%s", err);
    return af->f;
}

void report_file_commit(AtomicFile* af) {
    char err[ERR_LEN];
    if (ferror(af->f)) {
        const char* path = af->path;
        atomic_abort(af);
        fail_msg("%s: write failed", path);
    }
    if (atomic_commit(af, err, sizeof err) != 0) fail_msg("%s", err);
}

// OUT_DIR/NAME, opened for an atomic write.
static FILE* open_out(AtomicFile* af, const char* dir, const char* name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return report_file_open(af, path);
}

static CostPrediction predict_or_die(const CostConfig* g, const Cluster* c) {
    CostPrediction p;
    char err[ERR_LEN];
    if (costmodel_predict(g, c, &p, err, sizeof err) != 0) fail_msg("%s", err);
    return p;
}

static double pct_error(double predicted, double measured) {
    return 100 * (predicted - measured) / measured;
}

// ================================ the paper comparison ==========================================

enum { NMODELS = 3, NLENS = 5, NCASES = 3 };
static const char* const MODELS[NMODELS] = {"gpt3-760m", "gpt3-2.7b", "gpt3-13b"};
static const char* const MODEL_LABEL[NMODELS] = {"760M", "2.7B", "13B"};

// attention2d.md, "The paper's published results": training speed-up over Ring Attention read
// off the paper's A100 figure (+-0.05): [16 or 64 GPUs][model][T = 2^13 .. 2^17][NO, O].
static const double PUBLISHED[2][NMODELS][NLENS][2] = {
    {{{2.89, 3.05}, {3.16, 2.49}, {2.62, 3.35}, {2.44, 3.28}, {2.67, 2.92}},
     {{2.98, 2.70}, {2.89, 2.58}, {2.94, 2.40}, {3.03, 2.62}, {2.56, 2.61}},
     {{2.40, 2.40}, {2.83, 3.08}, {3.25, 2.31}, {2.83, 2.31}, {2.76, 2.76}}},
    {{{4.86, 2.90}, {4.50, 2.87}, {4.86, 2.64}, {4.22, 3.22}, {3.86, 2.97}},
     {{4.32, 2.90}, {4.11, 3.47}, {4.36, 2.87}, {4.50, 2.97}, {4.25, 2.68}},
     {{4.01, 2.87}, {3.89, 2.97}, {5.00, 3.04}, {4.86, 2.80}, {4.40, 2.54}}}};
// The published step times (ms) of one model: Ring and ATTENTION2D at 16 / 64 A100.
static const struct {
    int log2T;
    double ring16, ring64, a2d16, a2d64;
} PUBLISHED_TIMES[] = {{13, 350, 400, 120, 100}, {15, 1420, 1540, 480, 360},
                       {17, 5700, 6550, 2220, 1540}};

// The goal of the comparison: every cell within 25%.
static const double CELL_GOAL_PCT = 25;

typedef struct {
    const char* gpu;
    const Cluster* cluster;
    int gpus;
    int published;       // index into PUBLISHED, or -1 (no per-cell figure)
    const Cluster* fa2;  // the same GPUs with FlashAttention-2's attention, or NULL
} PaperCase;

// One cell: the three schedules the paper compares on a square pq = pkv = sqrt(P) mesh, dp = 1,
// one sequence per step, ZeRO-1 (13B's optimizer state does not fit 80 GB otherwise). Ring:
// contiguous chunks with the step's compute and transfers one after the other (the trainer's
// ring with --overlap 0; why: README.md); NO: ATTENTION2D's collectives without overlap
// (--attention 2d --overlap 0); O: its ring-pipelined variant (2d-overlap --overlap 1); for
// reference the pipelined ring and 2d-overlap with nothing overlapped (o_serial).
typedef struct {
    CostPrediction ring, ring_pipelined, no, o, o_serial;
    CostPrediction fa2_ring, fa2_no, fa2_o;   // on the case's fa2 cluster (when it has one)
    int side;
    int recompute;        // the cheapest --recompute with which Ring, NO and O all fit
    int recompute_layers; // --recompute-num-layers: the layers it covers (0: every layer)
    int L;                // the model's layers
    int fits;             // 0: not even with full (then full)
    double none_gib;      // the largest of the three's memory per GPU without recompute
} PaperCell;

static int square_side(int P) {
    int s = (int)llround(sqrt((double)P));
    CHECK(s * s == P, "caller bug", "%d GPUs is not a square mesh", P);
    return s;
}

// Ring, NO and O of one cell: Ring over all the GPUs, NO and O on the square mesh.
static void three_configs(CostConfig g, int side, CostConfig out[3]) {
    out[0] = out[1] = out[2] = g;
    out[0].alg = COST_RING, out[0].pq = 1, out[0].pkv = side * side, out[0].overlap = 0;
    out[1].alg = COST_2D, out[1].pq = out[1].pkv = side, out[1].overlap = 0;
    out[2].alg = COST_2D_OVERLAP, out[2].pq = out[2].pkv = side, out[2].overlap = 1;
}

// ... their predictions on a cluster.
static void three_schedules(CostConfig g, int side, const Cluster* c, CostPrediction* ring,
                            CostPrediction* no, CostPrediction* o) {
    CostConfig each[3];
    three_configs(g, side, each);
    *ring = predict_or_die(&each[0], c);
    *no = predict_or_die(&each[1], c);
    *o = predict_or_die(&each[2], c);
}

static double largest_memory(const CostPrediction* a, const CostPrediction* b,
                             const CostPrediction* c) {
    return fmax(a->memory_bytes, fmax(b->memory_bytes, c->memory_bytes));
}

// The fewest layers recompute mode r must cover for all three schedules to fit the cluster's
// memory per GPU (the most any of them needs; 0: every layer), -1 if one does not fit even so.
static int three_fewest_layers(CostConfig g, int side, const Cluster* c, int r) {
    CostConfig each[3];
    g.recompute = r, g.recompute_layers = 0;
    three_configs(g, side, each);
    int most = 0;
    for (int k = 0; k < 3; k++) {
        const int n = costmodel_fewest_recompute_layers(&each[k], c, c->memory_bytes);
        if (n < 0) return -1;
        most = n == 0 ? g.shape.L : n > most ? n : most;
        if (most == g.shape.L) break;
    }
    return most == g.shape.L ? 0 : most;
}

// The cheapest recomputation with which the cell's three schedules fit the cluster's memory per
// GPU, as --mesh auto chooses one (costmodel_predict_fitting), but one setting for all three so
// that the speed-ups compare like with like: none, else selective or full, each over the fewest
// layers with which all three fit, whichever gives the three the smaller sum of step times;
// *fits = 0 and full on every layer if neither fits. A cell's memory does not depend on the
// cluster's speeds: the FA2 cluster agrees.
static void cell_recompute(CostConfig g, int side, const Cluster* c, int* mode, int* layers,
                           int* fits) {
    CostPrediction ring, no, o;
    g.recompute = GPT_RECOMPUTE_NONE, g.recompute_layers = 0;
    three_schedules(g, side, c, &ring, &no, &o);
    *mode = GPT_RECOMPUTE_NONE, *layers = 0;
    *fits = largest_memory(&ring, &no, &o) <= c->memory_bytes;
    if (*fits) return;
    *mode = GPT_RECOMPUTE_FULL;
    double best = INFINITY;
    for (int r = GPT_RECOMPUTE_SELECTIVE; r <= GPT_RECOMPUTE_FULL; r++) {
        const int n = three_fewest_layers(g, side, c, r);
        if (n < 0) continue;
        g.recompute = r, g.recompute_layers = n;
        three_schedules(g, side, c, &ring, &no, &o);
        CHECK(largest_memory(&ring, &no, &o) <= c->memory_bytes, "caller bug",
              "%s over %d layers: %.0f bytes per GPU, over the %.0f the bisection fitted",
              gpt_recompute_name((GptRecompute)r), n, largest_memory(&ring, &no, &o),
              c->memory_bytes);
        const double sum = ring.step_s + no.step_s + o.step_s;
        if (sum < best) best = sum, *mode = r, *layers = n, *fits = 1;
    }
}

static PaperCell paper_cell(const PaperCase* pc, int model, int len) {
    GPTConfig cfg;
    CHECK(gpt_config_preset(MODELS[model], 0, 0, &cfg) == 0, "caller bug", "preset %s", MODELS[model]);
    const long T = 1L << (13 + len);
    const CostShape s = {cfg.L, cfg.C, cfg.NH, cfg.V, (int)T, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    PaperCell cell;
    memset(&cell, 0, sizeof cell);
    cell.side = square_side(pc->gpus);
    cell.L = cfg.L;
    CostConfig g = {s, T, 1, 1, 1, 1, pc->gpus, COST_RING, 0, 1, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0,
                    0};
    CostPrediction ring_none, o_none;
    three_schedules(g, cell.side, pc->cluster, &ring_none, &cell.no, &o_none);
    cell.none_gib = largest_memory(&ring_none, &cell.no, &o_none) / 1073741824.0;
    cell_recompute(g, cell.side, pc->cluster, &cell.recompute, &cell.recompute_layers, &cell.fits);
    g.recompute = cell.recompute, g.recompute_layers = cell.recompute_layers;
    if (pc->fa2) three_schedules(g, cell.side, pc->fa2, &cell.fa2_ring, &cell.fa2_no, &cell.fa2_o);
    cell.ring = predict_or_die(&g, pc->cluster);
    g.overlap = 1;
    cell.ring_pipelined = predict_or_die(&g, pc->cluster);
    g.pq = g.pkv = cell.side;
    g.alg = COST_2D, g.overlap = 0;
    cell.no = predict_or_die(&g, pc->cluster);
    g.alg = COST_2D_OVERLAP;
    cell.o_serial = predict_or_die(&g, pc->cluster);
    g.overlap = 1;
    cell.o = predict_or_die(&g, pc->cluster);
    return cell;
}

// Errors of one variant (NO or O) over the published cells of one GPU count.
typedef struct {
    int cells, within;        // published cells, and those within the goal
    double sum_abs, worst;    // |error| in percent
    double max_speedup;       // the largest predicted speed-up (published or not)
} ErrorTally;

static void tally(ErrorTally* t, double speedup, const double* published) {
    t->max_speedup = speedup > t->max_speedup ? speedup : t->max_speedup;
    if (!published) return;
    const double err = fabs(pct_error(speedup, *published));
    t->cells++;
    t->within += err <= CELL_GOAL_PCT;
    t->sum_abs += err;
    t->worst = err > t->worst ? err : t->worst;
}

typedef struct {
    ErrorTally no, o;
    double fa2_no_max, fa2_o_max;   // the largest speed-ups with FlashAttention-2's attention
    int o_bracketed;   // published O between the model's serial and pipelined 2d-overlap
    char no_misses[512];   // "64 GPUs 13B 2^13 (-34%), ..."
} CaseTally;

static void write_csv_header(FILE* f) {
    fprintf(f, "gpu,gpus,gpus_per_node,model,seq_len,mesh,ring_ms,ring_pipelined_ms,no_ms,o_ms,"
               "pred_speedup_no,published_no,error_no_pct,pred_speedup_o,published_o,error_o_pct,"
               "o_serial_ms,pred_speedup_o_serial,ring_compute_ms,ring_exposed_comm_ms,"
               "no_compute_ms,no_exposed_comm_ms,fixed_ms,ring_attention_bytes_per_rank,"
               "no_attention_bytes_per_rank,no_memory_gib,fa2_ring_ms,fa2_no_ms,fa2_o_ms,"
               "fa2_speedup_no,fa2_speedup_o,recompute,recompute_layers,fits_memory,max_memory_gib,"
               "max_memory_none_gib\n");
}

// "" or the number: the CSV's empty cells where the paper gives none.
static void fmt_optional(char* buf, size_t n, const char* fmt, double v, int present) {
    buf[0] = 0;
    if (present) snprintf(buf, n, fmt, v);
}

static const char* miss(double err) { return fabs(err) > CELL_GOAL_PCT ? " **miss**" : ""; }

// The layers the cell's recomputation covers (0 under none).
static int layers_recomputed(const PaperCell* c) {
    if (c->recompute == GPT_RECOMPUTE_NONE) return 0;
    return c->recompute_layers ? c->recompute_layers : c->L;
}

// The markdown's recompute and memory cells: "selective, 12 of 40 layers | 78 (none: 90)" ("full
// | 79 (none: 121)" over every layer); a cell that does not fit even with full says so.
static void memory_cells(char* buf, size_t n, const PaperCell* c) {
    const double gib = largest_memory(&c->ring, &c->no, &c->o) / 1073741824.0;
    const char* name = gpt_recompute_name((GptRecompute)c->recompute);
    char layers[48] = "";
    if (c->recompute_layers)
        snprintf(layers, sizeof layers, ", %d of %d layers", c->recompute_layers, c->L);
    if (c->recompute == GPT_RECOMPUTE_NONE) snprintf(buf, n, "%s | %.0f", name, gib);
    else snprintf(buf, n, "%s%s%s | %.0f (none: %.0f)", name, layers,
                  c->fits ? "" : ", **does not fit**", gib, c->none_gib);
}

// One CSV row and one markdown row (with the published figures and the errors when there are).
static void paper_row(FILE* csv, FILE* md, const PaperCase* pc, int model, int len,
                      const PaperCell* c, CaseTally* t) {
    const double no = c->ring.step_s / c->no.step_s, o = c->ring.step_s / c->o.step_s;
    const double o_serial = c->ring.step_s / c->o_serial.step_s;
    const double* pub = pc->published >= 0 ? PUBLISHED[pc->published][model][len] : NULL;
    const double err_no = pub ? pct_error(no, pub[0]) : 0, err_o = pub ? pct_error(o, pub[1]) : 0;
    char pno[16], po[16], eno[16], eo[16];
    fmt_optional(pno, sizeof pno, "%.2f", pub ? pub[0] : 0, pub != NULL);
    fmt_optional(po, sizeof po, "%.2f", pub ? pub[1] : 0, pub != NULL);
    fmt_optional(eno, sizeof eno, "%.1f", err_no, pub != NULL);
    fmt_optional(eo, sizeof eo, "%.1f", err_o, pub != NULL);
    // fixed: what every schedule pays per step whatever the attention (AdamW, gradient wait)
    const double fixed = c->no.optimizer_s + c->no.grad_wait_s;
    const double fa2_no = pc->fa2 ? c->fa2_ring.step_s / c->fa2_no.step_s : 0;
    const double fa2_o = pc->fa2 ? c->fa2_ring.step_s / c->fa2_o.step_s : 0;
    char fa2[96] = ",,,,";
    if (pc->fa2)
        snprintf(fa2, sizeof fa2, "%.3f,%.3f,%.3f,%.3f,%.3f", 1e3 * c->fa2_ring.step_s,
                 1e3 * c->fa2_no.step_s, 1e3 * c->fa2_o.step_s, fa2_no, fa2_o);
    fprintf(csv, "%s,%d,%d,%s,%ld,%dx%d,%.3f,%.3f,%.3f,%.3f,%.3f,%s,%s,%.3f,%s,%s,%.3f,%.3f,%.3f,%.3f,"
                 "%.3f,%.3f,%.3f,%.0f,%.0f,%.2f,%s,%s,%d,%d,%.2f,%.2f\n",
            pc->gpu, pc->gpus, pc->cluster->gpus_per_node, MODEL_LABEL[model], 1L << (13 + len),
            c->side, c->side, 1e3 * c->ring.step_s, 1e3 * c->ring_pipelined.step_s,
            1e3 * c->no.step_s, 1e3 * c->o.step_s, no, pno, eno, o, po, eo, 1e3 * c->o_serial.step_s,
            o_serial, 1e3 * c->ring.compute_s, 1e3 * c->ring.exposed_comm_s, 1e3 * c->no.compute_s,
            1e3 * c->no.exposed_comm_s, 1e3 * fixed, c->ring.attention_bytes,
            c->no.attention_bytes, c->no.memory_bytes / 1073741824.0, fa2,
            gpt_recompute_name((GptRecompute)c->recompute), layers_recomputed(c), c->fits,
            largest_memory(&c->ring, &c->no, &c->o) / 1073741824.0, c->none_gib);
    char mem[128];
    memory_cells(mem, sizeof mem, c);
    if (pc->fa2) {
        t->fa2_no_max = fmax(t->fa2_no_max, fa2_no);
        t->fa2_o_max = fmax(t->fa2_o_max, fa2_o);
    }
    tally(&t->no, no, pub ? &pub[0] : NULL);
    tally(&t->o, o, pub ? &pub[1] : NULL);
    if (pub) t->o_bracketed += pub[1] >= o_serial && pub[1] <= o;
    if (pub && fabs(err_no) > CELL_GOAL_PCT) {
        const size_t used = strlen(t->no_misses);
        snprintf(t->no_misses + used, sizeof t->no_misses - used, "%s%d GPUs %s 2^%d (%+.0f%%)",
                 used ? ", " : "", pc->gpus, MODEL_LABEL[model], 13 + len, err_no);
    }
    if (pub)
        fprintf(md, "| %d | %s | 2^%d | %.0f | %.0f | %.0f | %.2f / %.2f | %+.0f%%%s | %.2f / %.2f | "
                    "%+.0f%%%s | %.2f | %.0f | %s |\n",
                pc->gpus, MODEL_LABEL[model], 13 + len, 1e3 * c->ring.step_s, 1e3 * c->no.step_s,
                1e3 * c->o.step_s, no, pub[0], err_no, miss(err_no), o, pub[1], err_o, miss(err_o),
                o_serial, 1e3 * fixed, mem);
    else
        fprintf(md, "| %d | %s | 2^%d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.0f%% / %.0f%% | "
                    "%.1f | %.0f | %.0f | %.0f | %.2f | %.2f | %s |\n",
                pc->gpus, MODEL_LABEL[model], 13 + len, 1e3 * c->ring.step_s, 1e3 * c->no.step_s,
                1e3 * c->o.step_s, no, o, c->ring_pipelined.step_s / c->no.step_s,
                100 * c->ring.exposed_comm_s / c->ring.step_s,
                100 * c->no.exposed_comm_s / c->no.step_s, c->ring.attention_bytes / c->no.attention_bytes,
                1e3 * c->fa2_ring.step_s, 1e3 * c->fa2_no.step_s, 1e3 * c->fa2_o.step_s, fa2_no,
                fa2_o, mem);
}

// Published step times over the model's, 760M on 64 A100 (the one model with published times).
typedef struct {
    double lo_2d, hi_2d, lo_ring, hi_ring;
} TimeRatios;

static TimeRatios published_over_model(PaperCell cells[NCASES][NMODELS][NLENS]) {
    TimeRatios r = {INFINITY, 0, INFINITY, 0};
    for (size_t k = 0; k < sizeof PUBLISHED_TIMES / sizeof PUBLISHED_TIMES[0]; k++) {
        const PaperCell* c = &cells[1][0][PUBLISHED_TIMES[k].log2T - 13];
        const double a = PUBLISHED_TIMES[k].a2d64 / (1e3 * c->no.step_s);
        const double g = PUBLISHED_TIMES[k].ring64 / (1e3 * c->ring.step_s);
        r.lo_2d = fmin(r.lo_2d, a), r.hi_2d = fmax(r.hi_2d, a);
        r.lo_ring = fmin(r.lo_ring, g), r.hi_ring = fmax(r.hi_ring, g);
    }
    return r;
}

static const char* tier_text(Tier t) { return t == TIER_INTER ? "inter-node" : "intra-node"; }

// The explanations, in the model's terms, with the model's own numbers.
static void paper_explain(FILE* md, PaperCell cells[NCASES][NMODELS][NLENS], const CaseTally* t) {
    const PaperCell *s16 = &cells[0][0][4], *s64 = &cells[1][0][4];
    const PaperCell *l16 = &cells[0][0][0], *l64 = &cells[1][0][0];
    const PaperCell* h = &cells[2][2][4];
    const int cells_per_case = NMODELS * NLENS;
    const TimeRatios r = published_over_model(cells);
    fprintf(md, "\n## Summary\n\n| GPUs | variant | cells | within %.0f%% | mean abs error | worst |\n"
                "|---|---|---|---|---|---|\n", CELL_GOAL_PCT);
    for (int k = 0; k < 2; k++) {
        const ErrorTally* v[2] = {&t[k].no, &t[k].o};
        for (int j = 0; j < 2; j++)
            fprintf(md, "| %d A100 | %s | %d | %d | %.1f%% | %.1f%% |\n", k ? 64 : 16, j ? "O" : "NO",
                    v[j]->cells, v[j]->within, v[j]->sum_abs / v[j]->cells, v[j]->worst);
    }
    fprintf(md,
            "\n**Which cells miss, and why.** NO misses: %s%s%s. At 13B every step pays ~%.0f ms "
            "(64 GPUs, T = 2^13) that does not "
            "depend on the attention schedule (ZeRO-1's reduce-scatter and all-gather of 2 x 13 "
            "GB of bf16 gradients and parameters over HDR, and AdamW), charged to Ring and "
            "ATTENTION2D alike, which compresses the ratio at T = 2^13; a setup that amortised "
            "it (several micro-batches per step, or timing the attention alone) would show the "
            "paper's larger ratios. The 760M misses on 64 GPUs are the model's ATTENTION2D "
            "being relatively faster than the paper's (published 8x8 step times are %.1f-%.1fx "
            "the model's, published Ring's %.1f-%.1fx). We do not know the paper's setup (batch, accumulation, "
            "what was timed). O: the model's 2d-overlap (this trainer's, pipelined: each round's "
            "compute hides the next blocks' transfers) comes out faster than NO almost "
            "everywhere, while the published O is below NO at 64 GPUs and about equal at 16: "
            "the paper's overlapped variant hid much less. The same schedule with nothing "
            "overlapped (o_serial in the tables) is a lower bound; the published O lies between "
            "the two in %d of %d cells on 16 GPUs and %d of %d on 64. No parameter was changed "
            "to close these gaps.\n\n",
            t[0].no_misses, t[0].no_misses[0] && t[1].no_misses[0] ? ", " : "", t[1].no_misses,
            1e3 * (cells[1][2][0].no.optimizer_s + cells[1][2][0].no.grad_wait_s), r.lo_2d, r.hi_2d,
            r.lo_ring, r.hi_ring,
            t[0].o_bracketed, cells_per_case, t[1].o_bracketed, cells_per_case);
    fprintf(md,
            "## The headlines in the model's terms\n\n"
            "**A100, up to 5x (model: up to %.2fx NO on 64 A100).** Ring moves 2 x T x C bf16 "
            "elements of K|V forward, the same again backward plus the fp32 dK|dV accumulator, "
            "per layer whatever P is, in 3P - 2 serial steps; with 4 GPUs per node one hop in "
            "four crosses nodes, and every step waits for that %s hop on one HDR NIC "
            "(25 GB/s x 0.9). At 760M and T = 2^17 on 64 A100 the Ring step is %.0f ms, of which "
            "%.0f ms are transfers (%.1f GB per rank of attention traffic). ATTENTION2D on 8x8 "
            "moves %.1f GB per rank: its rows are %s (one GPU of each node, one NIC each) but "
            "carry (pkv - 1) / P of the sequence, and its columns (two nodes of 4) let NCCL use "
            "the 4 NICs of a node at once; %.0f ms of transfers against %.0f ms of compute. "
            "The speed-up is the ratio of the two transfer times, capped by ATTENTION2D's "
            "compute: it grows with sqrt(P) (volume) and with the NICs the collectives can use.\n\n",
            t[1].no.max_speedup, tier_text(s64->ring.ring_tier), 1e3 * s64->ring.step_s,
            1e3 * s64->ring.exposed_comm_s, s64->ring.attention_bytes / 1e9,
            s64->no.attention_bytes / 1e9, tier_text(s64->no.row_tier), 1e3 * s64->no.exposed_comm_s,
            1e3 * s64->no.compute_s);
    fprintf(md,
            "**H100, up to 9.4x (model: up to %.2fx NO and %.2fx O on 64 H100, one per node, "
            "with this trainer's kernels as measured; %.2fx and %.2fx with FlashAttention-2's "
            "attention).** With one GPU per node every ring hop and every row and column "
            "transfer crosses nodes on one NDR NIC (50 GB/s x 0.9), so no collective gets more "
            "than one NIC. The faster the attention computes, the more communication-bound both "
            "schedules are and the closer the speed-up gets to the ratio of their attention bytes "
            "per rank, %.1fx at 13B, T = 2^17 (Ring %.1f GB, ATTENTION2D 8x8 %.1f GB). There "
            "ATTENTION2D's step (NO) is %.0f ms of compute and %.0f ms of exposed transfers with "
            "this trainer's kernels, %.0f and %.0f ms with FlashAttention-2's attention; Ring's "
            "is %.0f and %.0f ms, then %.0f and %.0f ms. Neither reaches 9.4x: that needs Ring to "
            "be about twice slower than its bytes over NDR explain (e.g. point-to-point transfers "
            "at half the NIC bandwidth); the model has no such term and no parameter was set to "
            "produce one.\n\n",
            t[2].no.max_speedup, t[2].o.max_speedup, t[2].fa2_no_max, t[2].fa2_o_max,
            h->ring.attention_bytes / h->no.attention_bytes, h->ring.attention_bytes / 1e9,
            h->no.attention_bytes / 1e9, 1e3 * h->no.compute_s, 1e3 * h->no.exposed_comm_s,
            1e3 * h->fa2_no.compute_s, 1e3 * h->fa2_no.exposed_comm_s, 1e3 * h->ring.compute_s,
            1e3 * h->ring.exposed_comm_s, 1e3 * h->fa2_ring.compute_s,
            1e3 * h->fa2_ring.exposed_comm_s);
    fprintf(md, "**Ring got slower from 16 to 64 GPUs, ATTENTION2D faster.** Model, 760M, 16 -> 64 A100 "
                "(published, the one model the paper gives step times for, in brackets):");
    for (size_t k = 0; k < sizeof PUBLISHED_TIMES / sizeof PUBLISHED_TIMES[0]; k++) {
        const PaperCell *a = &cells[0][0][PUBLISHED_TIMES[k].log2T - 13],
                        *b = &cells[1][0][PUBLISHED_TIMES[k].log2T - 13];
        fprintf(md, "%s T = 2^%d Ring %.0f -> %.0f ms (%.0f -> %.0f), ATTENTION2D NO %.0f -> %.0f ms "
                    "(%.0f -> %.0f)", k ? ";" : "", PUBLISHED_TIMES[k].log2T, 1e3 * a->ring.step_s,
                1e3 * b->ring.step_s, PUBLISHED_TIMES[k].ring16, PUBLISHED_TIMES[k].ring64,
                1e3 * a->no.step_s, 1e3 * b->no.step_s, PUBLISHED_TIMES[k].a2d16,
                PUBLISHED_TIMES[k].a2d64);
    }
    fprintf(md,
            ". In the model Ring's attention bytes per rank do not fall with P (%.2f -> %.2f GB "
            "at 2^13), the fraction of its hops that cross nodes stays 1/4 (4 GPUs per node), so "
            "every step is paced by the NIC at both sizes, and 4x more GPUs means 4x more, 4x "
            "smaller steps, each paying the call and hop latency (20 + 2 us): its communication "
            "time rises with P. Where communication dominates (short sequences) Ring gets "
            "slower, as published; at 2^17 the serial ring's compute, which P = 64 quarters, is "
            "large enough that the model's Ring gets faster, unlike the paper's (the pipelined "
            "ring, ring_pipelined_ms, stays about flat: %.0f -> %.0f ms). ATTENTION2D's "
            "attention bytes per rank fall as 1/sqrt(P) (%.2f -> %.2f GB at 2^13) and its "
            "compute as 1/P, so it gets faster at every length.\n",
            l16->ring.attention_bytes / 1e9, l64->ring.attention_bytes / 1e9,
            1e3 * s16->ring_pipelined.step_s, 1e3 * s64->ring_pipelined.step_s,
            l16->no.attention_bytes / 1e9, l64->no.attention_bytes / 1e9);
}

static void paper_intro(FILE* md, const char* a100_path, const char* h100_path,
                        const char* h100_fa2_path) {
    fprintf(md,
            "# ATTENTION2D vs Ring: the cost model against the paper's published speed-ups\n\n"
            "Generated by `make costmodel-gpu` (`build/costmodel --paper --out-dir costmodel`) "
            "from `%s`, `%s` and `%s`; do not edit. Published cells: "
            "`../shared/docs/attention2d.md` (read off the paper's A100 figure, +-0.05). Model: "
            "`costmodel/README.md`. One set of parameters, the clusters' documented ones; no "
            "per-cell tuning and no global efficiency factor. Compute: on the A100, the "
            "datasheet and FlashAttention-2's published efficiencies (FA2-class attention, the "
            "paper's own; no A100 has run this trainer); on the H100, measured on one H100 by "
            "the GPU kit (`results/gpu/`): this trainer's kernels, and beside them PyTorch's "
            "flash SDPA (FlashAttention-2) for the attention.\n\n"
            "Every cell: dp = 1 (all GPUs in one sequence-parallel group), one sequence per "
            "step, GPT-2 vocabulary, a position embedding of T rows, bf16 activations and "
            "gradients, fp32 partial sums, ZeRO-1 over all GPUs (13B's optimizer state does not "
            "fit in 80 GB otherwise). Mesh for ATTENTION2D: square (4x4 on 16 GPUs, 8x8 on 64), "
            "comm/mesh.h's column-major placement (a column is consecutive ranks: on 4 GPUs per "
            "node a 4x4 column is one node). Ring: contiguous chunks, each step's compute and "
            "transfers one after the other (`--attention ring --overlap 0`): the published "
            "Ring step times (350 ms at 2^13 to 5700 ms at 2^17 on 16 A100) match this serial "
            "ring (below) better than the pipelined one, which is in the CSV "
            "(ring_pipelined_ms). NO = `--attention 2d --overlap 0`; O = `--attention "
            "2d-overlap --overlap 1` (o_serial: the same with `--overlap 0`). Speed-up = Ring "
            "step time / ATTENTION2D step time. Goal: every cell within %.0f%%. Columns: step "
            "times (ms) of Ring, NO and O; speed-ups model / paper and the error; the O schedule "
            "without overlap; the per-step cost no schedule changes (AdamW, gradient wait); "
            "the recompute setting the cell needs, chosen as `--mesh auto` chooses one for a "
            "schedule: none where Ring, NO and O all fit the GPU's memory (80 GiB), else "
            "`--recompute` selective or full over the fewest layers with which all three fit "
            "(`--recompute-num-layers`), whichever gives the three the smaller sum of step "
            "times, applied to all three, so every step time above includes its recomputed "
            "forward kernels; and the memory per GPU of the largest of the three with it (in "
            "brackets without recomputation). Memory is the trainer's own budget "
            "(model/memory_budget.c: what it prints at start and refuses on). A cell that does "
            "not fit even with full on every layer would say so; none does. The tightest, 13B "
            "at 2^17 on 16 GPUs, needs full on 39 of its 40 layers (79.7 GiB; 121 GiB without): "
            "it holds its bf16 parameters and gradients whole (25 "
            "GiB each: ZeRO-1 shards the AdamW state and the fp32 master weights only) and 8 GiB "
            "of ATTENTION2D scratch; the attention backward adds dQ into the schedule's own fp32 "
            "buffer, in an order kept by 80 KiB of semaphores.\n\n",
            a100_path, h100_path, h100_fa2_path, CELL_GOAL_PCT);
}

int report_paper(const Cluster* a100, const Cluster* h100, const Cluster* h100_fa2,
                 const char* a100_path, const char* h100_path, const char* h100_fa2_path,
                 const char* out_dir) {
    const PaperCase cases[NCASES] = {{"A100", a100, 16, 0, NULL}, {"A100", a100, 64, 1, NULL},
                                     {"H100", h100, 64, -1, h100_fa2}};
    static PaperCell cells[NCASES][NMODELS][NLENS];
    AtomicFile csv_file, md_file;
    FILE* csv = open_out(&csv_file, out_dir, "paper_comparison.csv");
    FILE* md = open_out(&md_file, out_dir, "paper_comparison.md");
    write_csv_header(csv);
    paper_intro(md, a100_path, h100_path, h100_fa2_path);
    CaseTally t[NCASES];
    memset(t, 0, sizeof t);
    for (int k = 0; k < NCASES; k++) {
        const PaperCase* pc = &cases[k];
        if (pc->published >= 0)
            fprintf(md, "## %d %s, %d per node\n\n| GPUs | model | T | Ring ms | NO ms | O ms | "
                        "NO speed-up model / paper | error | O speed-up model / paper | error | "
                        "O serial | fixed ms | recompute | GiB per GPU |\n"
                        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                    pc->gpus, pc->gpu, pc->cluster->gpus_per_node);
        else
            fprintf(md, "## %d %s, %d per node (the paper gives only the headline: up to 9.4x)\n\n"
                        "Two compute columns: this trainer's kernels as measured on one H100 "
                        "(`%s`), then FlashAttention-2's attention measured beside them (`%s`: the "
                        "attention this trainer is being rebuilt towards).\n\n"
                        "| GPUs | model | T | Ring ms | NO ms | O ms | NO speed-up | O speed-up | "
                        "NO over pipelined Ring | exposed comm Ring / NO | attention bytes Ring / NO "
                        "| FA2: Ring ms | FA2: NO ms | FA2: O ms | FA2: NO speed-up | FA2: O speed-up "
                        "| recompute | GiB per GPU |\n"
                        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                    pc->gpus, pc->gpu, pc->cluster->gpus_per_node, h100_path, h100_fa2_path);
        for (int m = 0; m < NMODELS; m++)
            for (int l = 0; l < NLENS; l++) {
                cells[k][m][l] = paper_cell(pc, m, l);
                paper_row(csv, md, pc, m, l, &cells[k][m][l], &t[k]);
            }
        fprintf(md, "\n");
    }
    paper_explain(md, cells, t);
    report_file_commit(&csv_file);
    report_file_commit(&md_file);
    printf("paper: NO %d + %d of 30 A100 cells within %.0f%%, O %d + %d; wrote %s and %s\n",
           t[0].no.within, t[1].no.within, CELL_GOAL_PCT, t[0].o.within, t[1].o.within,
           md_file.path, csv_file.path);
    return 0;
}

// ================================ the CPU validation ============================================

// The goal of the CPU validation: every point within 20%.
static const double POINT_GOAL_PCT = 20;
// A sweep whose measured one-thread peak differs from the cluster file's by more than this ran on
// another machine (or under other load) than the one the file was calibrated on.
static const double PEAK_MISMATCH = 0.25;

// The first comment line of a cluster file (where and when it was calibrated), without "# " and a
// trailing colon; "" when the file has none.
static void cluster_origin(const char* path, char* out, size_t size) {
    out[0] = 0;
    FILE* f = fopen(path, "r");
    if (!f) return;
    char line[512];
    if (fgets(line, sizeof line, f) && line[0] == '#') {
        line[strcspn(line, "\r\n")] = 0;
        size_t n = strlen(line);
        if (n && line[n - 1] == ':') line[--n] = 0;
        snprintf(out, size, "%s", line + strspn(line, "# "));
    }
    fclose(f);
}

// The median of the sweep's measured peaks in GFLOP/s; NAN when the CSV has none.
static double sweep_peak_gflops(const SweepRun* rows, int n) {
    static double v[SWEEP_MAX_ROWS];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(rows[i].peak_gflops)) v[k++] = rows[i].peak_gflops;
    for (int i = 1; i < k; i++)   // insertion sort: at most SWEEP_MAX_ROWS values
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            const double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return k ? (k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2])) : NAN;
}

// One panel per sequence length: bytes per rank against P, per algorithm, measured (points) and
// the formula (lines). Data blocks in (length, algorithm) order, each sorted by P.
static void plot_bytes(FILE* g, const char* dir, const SweepRun* rows, const CostPrediction* pred,
                       int n) {
    enum { MAX_LENS = 4 };
    long lens[MAX_LENS];
    int nlens = 0;
    for (int k = 0; k < n; k++) {
        int seen = 0;
        for (int j = 0; j < nlens; j++) seen |= lens[j] == rows[k].config.T;
        if (!seen && nlens < MAX_LENS) lens[nlens++] = rows[k].config.T;
    }
    int count[MAX_LENS][COST_NALGS] = {{0}};
    // gnuplot numbers the blocks between double blank lines, and an empty block is no block: only
    // (length, schedule) pairs with points get one, numbered as written.
    int index[MAX_LENS][COST_NALGS] = {{0}}, blocks = 0;
    fprintf(g, "$b << EOD\n");
    for (int j = 0; j < nlens; j++)
        for (int a = 0; a < COST_NALGS; a++) {
            for (int P = 1; P <= 1 << 20; P *= 2)   // sorted by P (powers of two and the rest)
                for (int k = 0; k < n; k++) {
                    const CostConfig* c = &rows[k].config;
                    const int ranks = c->pq * c->pkv;
                    if (c->T != lens[j] || (int)c->alg != a || ranks < P || ranks >= 2 * P) continue;
                    fprintf(g, "%d %g %g\n", ranks, rows[k].bytes / 1e6, pred[k].bytes_per_rank / 1e6);
                    count[j][a]++;
                }
            if (!count[j][a]) continue;
            index[j][a] = blocks++;
            fprintf(g, "\n\n");
        }
    fprintf(g, "EOD\nset output '%s/bytes_per_rank.png'\nset terminal pngcairo size %d,500 font ',10' "
               "noenhanced\nunset logscale; set logscale x 2; set key bottom right\n"
               "set multiplot layout 1,%d title 'bytes per rank per step: measured (points), "
               "attention/dist_cost.c + gradient formula (lines)'\n"
               "set xlabel 'P (sequence-parallel ranks)'; set ylabel 'MB per rank per step'\n",
            dir, 520 * nlens, nlens);
    for (int j = 0; j < nlens; j++) {
        fprintf(g, "set title 'T = %ld'\nplot 1/0 notitle", lens[j]);
        for (int a = 0; a < COST_NALGS; a++) {
            if (!count[j][a]) continue;
            fprintf(g, ", $b index %d using 1:2 with points pt %d ps 1.4 lc %d title '%s measured', "
                       "$b index %d using 1:3 with lines lc %d title '%s formula'",
                    index[j][a], 5 + 2 * (a % 3), a + 1, cost_algorithm_name((CostAlgorithm)a),
                    index[j][a], a + 1, cost_algorithm_name((CostAlgorithm)a));
        }
        fprintf(g, "\n");
    }
    fprintf(g, "unset multiplot\n");
}

// gnuplot reads the data inline; returns its exit status.
static int plot_validation(const char* dir, const SweepRun* rows, const CostPrediction* pred, int n) {
    FILE* g = popen("gnuplot", "w");
    if (!g) fail_msg("gnuplot: cannot start: %s (run tools/setup.sh)", strerror(errno));
    fprintf(g, "set terminal pngcairo size 900,700 font ',10' noenhanced\n"
               "set output '%s/cpu_validation.png'\n"
               "set title 'cost model vs measured CPU step time (cpu_validation.md)'\n"
               "set xlabel 'measured ms per step'; set ylabel 'predicted ms per step'\n"
               "set logscale xy; set key top left; set grid\n$d << EOD\n", dir);
    for (int k = 0; k < n; k++)
        fprintf(g, "%d %g %g\n", (int)rows[k].config.alg, rows[k].ms, 1e3 * pred[k].step_s);
    fprintf(g, "EOD\nplot x title 'exact' lc rgb 'black', 1.2*x title '+20%%' dt 2 lc rgb 'gray', "
               "0.8*x title '-20%%' dt 2 lc rgb 'gray'");
    for (int a = 0; a < COST_NALGS; a++) {
        int rows_of = 0;   // a schedule the sweep did not run has no points to draw
        for (int k = 0; k < n; k++) rows_of += (int)rows[k].config.alg == a;
        if (rows_of)
            fprintf(g, ", $d using ($1 == %d ? $2 : 1/0):3 with points pt 7 ps 1.3 title '%s'", a,
                    cost_algorithm_name((CostAlgorithm)a));
    }
    fprintf(g, "\n");
    // a sweep without comm_bytes_per_rank (NAN in every row) has no measured bytes to draw
    if (!isnan(rows[0].bytes)) plot_bytes(g, dir, rows, pred, n);
    fprintf(g, "\n");
    return pclose(g);
}

int report_validation(const char* csv, const Cluster* c, const char* cluster_path,
                      const char* out_dir) {
    static SweepRun rows[SWEEP_MAX_ROWS];
    static CostPrediction pred[SWEEP_MAX_ROWS];
    char err[ERR_LEN];
    const int n = sweep_read(csv, rows, SWEEP_MAX_ROWS, err, sizeof err);
    if (n < 0) fail_msg("%s", err);
    AtomicFile csv_file, md_file;
    FILE* out = open_out(&csv_file, out_dir, "cpu_validation.csv");
    FILE* md = open_out(&md_file, out_dir, "cpu_validation.md");
    fprintf(out, "preset,layers,channels,heads,vocab,seq_len,batch,dp,pq,pkv,ranks,algorithm,overlap,"
                 "measured_ms,predicted_ms,error_pct,measured_compute_ms,predicted_compute_ms,"
                 "measured_exposed_comm_ms,predicted_exposed_comm_ms,measured_bytes_per_rank,"
                 "formula_bytes_per_rank,window\n");
    char origin[512];
    cluster_origin(cluster_path, origin, sizeof origin);
    fprintf(md, "# The cost model against measured CPU runs on this machine\n\n"
                "Generated by `build/costmodel --validate %s --cluster %s` (`make bench-costmodel`, "
                "or `make bench-quick` for its smoke sweep, each calibrating the cluster file on the "
                "machine of the sweep first); do not edit. Cluster: `%s`%s%s%s. Measured: the trainer "
                "on P MPI ranks sharing %d cores (tools/bench_sweep.sh; the run_info.txt beside the "
                "CSV names the points file, the machine and its load), mean step time of the timed "
                "steps (the sweep leaves out the first ones). Goal: every point within %.0f%%.\n\n",
            csv, cluster_path, cluster_path, origin[0] ? " (\"" : "", origin, origin[0] ? "\")" : "",
            c->shared_cores, POINT_GOAL_PCT);
    // Predictions for another machine say nothing about this one: say so before the table.
    const double sweep_peak = sweep_peak_gflops(rows, n), cluster_peak = 1e-9 * c->matmul_flops;
    if (isfinite(sweep_peak) && fabs(sweep_peak / cluster_peak - 1) > PEAK_MISMATCH) {
        char warning[512];
        snprintf(warning, sizeof warning,
                 "the sweep's trainer measured a one-thread FMA peak of %.1f GFLOP/s, the cluster "
                 "file says %.1f: it was calibrated on another machine or under other load, so its "
                 "predictions are not this machine's (rerun `make costmodel-calibrate`)",
                 sweep_peak, cluster_peak);
        fprintf(md, "**Warning:** %s.\n\n", warning);
        fprintf(stderr, "validate: warning: %s\n", warning);
    }
    fprintf(md, "| preset | L | C | T | B | dp x pq x pkv | algorithm | measured ms | predicted ms | "
                "error | compute ms meas. / pred. | exposed comm ms meas. / pred. | bytes/rank meas. / formula | "
                "attention comm calls / step |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int within = 0, short_misses = 0, bytes_equal = 0, bytes_known = 0;
    char misses[2048] = "";
    double sum_abs = 0, worst = 0;
    for (int k = 0; k < n; k++) {
        const SweepRun* m = &rows[k];
        const CostConfig* g = &m->config;
        pred[k] = predict_or_die(g, c);
        const double p_ms = 1e3 * pred[k].step_s, err = pct_error(p_ms, m->ms);
        within += fabs(err) <= POINT_GOAL_PCT;
        short_misses += err < -POINT_GOAL_PCT;
        sum_abs += fabs(err);
        worst = fabs(err) > worst ? fabs(err) : worst;
        if (!isnan(m->bytes)) bytes_known++, bytes_equal += fabs(m->bytes - pred[k].bytes_per_rank) < 0.5;
        fprintf(out, "%s,%d,%d,%d,%d,%ld,%d,%d,%d,%d,%d,%s,%d,%.3f,%.3f,%.1f,%.3f,%.3f,%.3f,%.3f,%.0f,%.0f,%d\n",
                m->preset, g->shape.L, g->shape.C, g->shape.NH, g->shape.V, g->T, g->B, g->dp, g->pq,
                g->pkv, m->ranks, cost_algorithm_name(g->alg), g->overlap, m->ms, p_ms, err,
                m->compute_ms, 1e3 * pred[k].compute_s, m->exposed_ms, 1e3 * pred[k].exposed_comm_s,
                m->bytes, pred[k].bytes_per_rank, g->shape.window);
        char algo[48];   // the schedule, and the window of every layer
        snprintf(algo, sizeof algo, g->shape.window ? "%s, window %d" : "%s",
                 cost_algorithm_name(g->alg), g->shape.window);
        fprintf(md, "| %s | %d | %d | %ld | %d | %dx%dx%d | %s | %.1f | %.1f | %+.1f%%%s | %.1f / %.1f | "
                    "%.1f / %.1f | %.0f / %.0f | %.0f |\n",
                m->preset, g->shape.L, g->shape.C, g->T, g->B, g->dp, g->pq, g->pkv, algo,
                m->ms, p_ms, err,
                fabs(err) > POINT_GOAL_PCT ? " **miss**" : "", m->compute_ms,
                1e3 * pred[k].compute_s, m->exposed_ms, 1e3 * pred[k].exposed_comm_s, m->bytes,
                pred[k].bytes_per_rank, pred[k].calls_per_step);
        if (fabs(err) > POINT_GOAL_PCT) {
            const size_t used = strlen(misses);
            snprintf(misses + used, sizeof misses - used, "%s%s %dx%d T=%ld (%+.1f%%, %.0f calls)",
                     used ? ", " : "", algo, g->pq, g->pkv, g->T, err, pred[k].calls_per_step);
        }
    }
    // Which way the misses go, in words: short ones have a known cause, long ones do not.
    char direction[640] = "";
    if (misses[0])
        snprintf(direction, sizeof direction,
                 ". %d of the %d misses predict too short%s", short_misses, n - within,
                 short_misses ? " (everything the model leaves out adds time: a collective on "
                                "time-shared cores waits until all its ranks are scheduled, which "
                                "the fits, measured with every rank inside MPI, do not see; the "
                                "trainer's own per-step work; other processes on the machine, see "
                                "the load averages in the sweep's run_info.txt)." : ".");
    fprintf(md, "\n**%d of %d points within %.0f%%**; mean |error| %.1f%%, worst %.1f%%.%s%s%s Bytes per "
                "rank per step: %d of %d runs equal to the formula (attention/dist_cost.c summed over "
                "layers and phases, plus the gradient all-reduce and the loss scalars).\n\n"
                "Measured compute / exposed communication are rank 0's timeline fractions times the "
                "step time (on shared cores a rank's \"exposed communication\" includes the time "
                "other ranks hold the cores); the predicted ones are the model's critical path.\n\n"
                "![predicted vs measured](cpu_validation.png)\n%s",
            within, n, POINT_GOAL_PCT, sum_abs / n, worst, misses[0] ? " Misses: " : "", misses,
            direction, bytes_equal, bytes_known,
            isnan(rows[0].bytes) ? "" : "\n![bytes per rank](bytes_per_rank.png)\n");
    report_file_commit(&csv_file);
    report_file_commit(&md_file);
    if (plot_validation(out_dir, rows, pred, n) != 0) fail_msg("gnuplot failed writing %s/*.png", out_dir);
    printf("validate: %d of %d points within %.0f%% (mean |error| %.1f%%, worst %.1f%%); bytes equal "
           "in %d of %d; wrote %s, %s and PNGs\n", within, n, POINT_GOAL_PCT, sum_abs / n, worst,
           bytes_equal, bytes_known, md_file.path, csv_file.path);
    return 0;
}
