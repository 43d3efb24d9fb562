// The GPU calibration (gpu_calibrate.h): measured rows -> efficiency curves -> a cluster file.
//
// A curve is built from (size, efficiency, time) points: points whose sizes lie within a factor
// POOL of the smallest in their group pool into one (total work over total time, so the pooled
// point takes the measured time of its members), and for GEMMs and the generic memory curve the
// pooled points are then made non-decreasing in size (pool-adjacent-violators, time-weighted):
// a larger GEMM is not slower per FLOP, and an odd shape should not give one size a cliff.
// Attention and per-kernel curves keep their measured shape. The smallest point's efficiency
// extends down to size 0.
#include "costmodel/gpu_calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "costmodel/cluster.h"
#include "costmodel/gpu_report.h"
#include "costmodel/reports.h"
#include "model/config.h"

#define POOL 1.5

enum { MAX_POINTS = 512, SOURCE_LEN = 512 };

typedef struct {
    int n;
    double size[MAX_POINTS], work[MAX_POINTS], seconds[MAX_POINTS];   // work: GFLOP or MB
} Points;

static void add_point(Points* p, double size, double work, double seconds) {
    CHECK(p->n < MAX_POINTS, "too many rows", "more than %d calibration points", MAX_POINTS);
    CHECK(size > 0 && work > 0 && seconds > 0, "bad report row",
          "size %g, work %g, seconds %g: expected positive values", size, work, seconds);
    p->size[p->n] = size, p->work[p->n] = work, p->seconds[p->n++] = seconds;
}

static void swap_points(Points* p, int i, int j) {
    double t;
    t = p->size[i], p->size[i] = p->size[j], p->size[j] = t;
    t = p->work[i], p->work[i] = p->work[j], p->work[j] = t;
    t = p->seconds[i], p->seconds[i] = p->seconds[j], p->seconds[j] = t;
}

// Sorted by size, then sizes within POOL of a group's smallest pooled into one point.
static Points pooled(const Points* in) {
    Points p = *in, out = {0};
    for (int i = 1; i < p.n; i++)   // insertion sort: a few dozen points
        for (int j = i; j > 0 && p.size[j] < p.size[j - 1]; j--) swap_points(&p, j, j - 1);
    for (int i = 0; i < p.n; i++) {
        if (out.n && p.size[i] < POOL * out.size[out.n - 1]) {
            out.work[out.n - 1] += p.work[i], out.seconds[out.n - 1] += p.seconds[i];
        } else {
            out.size[out.n] = p.size[i], out.work[out.n] = p.work[i];
            out.seconds[out.n++] = p.seconds[i];
        }
    }
    return out;
}

// Pool-adjacent-violators: merge neighbours until work/seconds rises with size.
static Points rising(Points p) {
    for (int i = 0; i + 1 < p.n;) {
        if (p.work[i + 1] / p.seconds[i + 1] >= p.work[i] / p.seconds[i]) {
            i++;
            continue;
        }
        p.work[i] += p.work[i + 1], p.seconds[i] += p.seconds[i + 1];
        for (int k = i + 1; k + 1 < p.n; k++)
            p.size[k] = p.size[k + 1], p.work[k] = p.work[k + 1], p.seconds[k] = p.seconds[k + 1];
        p.n--;
        if (i > 0) i--;
    }
    return p;
}

// The cluster curve: largest size first, efficiency = rate / peak (capped at 1), the smallest at 0.
static EfficiencyCurve to_curve(const Points* p, double peak_per_s, const char* what) {
    CHECK(p->n > 0, "GPU report lacks rows", "no %s rows to calibrate from", what);
    CHECK(p->n <= CLUSTER_MAX_CURVE, "GPU report has too many sizes",
          "%s: %d sizes after pooling, a curve holds %d", what, p->n, CLUSTER_MAX_CURVE);
    EfficiencyCurve c = {0};
    for (int k = p->n - 1; k >= 0; k--) {
        const double eff = p->work[k] / p->seconds[k] / peak_per_s;
        c.threshold[c.n] = k == 0 ? 0 : p->size[k];
        c.efficiency[c.n++] = eff > 1 ? 1 : eff < 1e-4 ? 1e-4 : eff;
    }
    return c;
}

// --- What the report's rows mean ---------------------------------------------------------------

typedef struct {
    const char* kit;   // the kit's kernel name
    ClusterKernel id;
} KitKernel;

static const KitKernel KIT_KERNELS[] = {
    {"encoder_forward_cuda", CK_ENCODER_FORWARD},
    {"layernorm_forward_cuda", CK_LAYERNORM_FORWARD},
    {"fused_residual_layernorm_forward_cuda", CK_FUSED_RESIDUAL_LAYERNORM_FORWARD},
    {"residual_forward_cuda", CK_RESIDUAL_FORWARD},
    {"classifier_forward_backward_cuda", CK_CLASSIFIER},
    {"gelu_backward_cuda", CK_GELU_BACKWARD},
    {"layernorm_backward_cuda", CK_LAYERNORM_BACKWARD},
    {"encoder_backward_cuda", CK_ENCODER_BACKWARD},
    {"attention_merge_cuda", CK_ATTENTION_MERGE},
    {"attention_row_dot_cuda", CK_ATTENTION_ROW_DOT},
    {"global_norm_squared_cuda", CK_GLOBAL_NORM},
    {"adamw_update_cuda", CK_ADAMW},
};
enum { NKIT = sizeof KIT_KERNELS / sizeof KIT_KERNELS[0] };

static int starts(const char* s, const char* prefix) { return !strncmp(s, prefix, strlen(prefix)); }

// Head size of a kernel row's shape ("gpt3-2.7b T=8192": the preset's C / NH).
static int head_size_of(const GpuKernelRow* k) {
    char preset[64];
    long T;
    GPTConfig cfg;
    if (gpu_report_parse_shape(k->shape, preset, sizeof preset, NULL, &T) != 0 ||
        gpt_config_preset(preset, (int)T, 50257, &cfg) != 0)
        fail_msg("GPU report: kernel row %s: shape '%s': expected 'PRESET T=N' with a preset of "
                 "build/costmodel --help", k->kernel, k->shape);
    return cfg.C / cfg.NH;
}

typedef struct {
    Points gemm, memory, kernel[CK_COUNT];
    int n_hs, hs[CLUSTER_MAX_HEAD_SIZES];
    Points fwd[CLUSTER_MAX_HEAD_SIZES], bwd[CLUSTER_MAX_HEAD_SIZES], all_fwd, all_bwd;
    char shapes[SOURCE_LEN];   // the kernel rows' shapes, for the sources
} Measured;

static int head_size_slot(Measured* m, int hs) {
    for (int k = 0; k < m->n_hs; k++)
        if (m->hs[k] == hs) return k;
    CHECK(m->n_hs < CLUSTER_MAX_HEAD_SIZES, "GPU report has too many head sizes",
          "more than %d", CLUSTER_MAX_HEAD_SIZES);
    m->hs[m->n_hs] = hs;
    return m->n_hs++;
}

static void add_attention(Measured* m, int hs, int backward, double gflop, double seconds) {
    const int k = head_size_slot(m, hs);
    add_point(backward ? &m->bwd[k] : &m->fwd[k], gflop, gflop, seconds);
    add_point(backward ? &m->all_bwd : &m->all_fwd, gflop, gflop, seconds);
}

static void note_shape(Measured* m, const char* shape) {
    if (strstr(m->shapes, shape)) return;
    const size_t used = strlen(m->shapes);
    snprintf(m->shapes + used, sizeof m->shapes - used, "%s%s", used ? ", " : "", shape);
}

static void measure(const GpuReport* r, AttentionSource src, Measured* m) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < r->nkernels; i++) {
        const GpuKernelRow* k = &r->kernels[i];
        const double s = k->ms * 1e-3;
        note_shape(m, k->shape);
        if (starts(k->kernel, "matmul_backward")) {   // dinp and dweight: two GEMMs of half each
            add_point(&m->gemm, k->gflop / 2, k->gflop / 2, s / 2);
            add_point(&m->gemm, k->gflop / 2, k->gflop / 2, s / 2);
        } else if (starts(k->kernel, "matmul_forward")) {
            add_point(&m->gemm, k->gflop, k->gflop, s);
        } else if (starts(k->kernel, "attention_partial_")) {
            if (src == ATTENTION_OURS)
                add_attention(m, head_size_of(k), starts(k->kernel, "attention_partial_backward"),
                              k->gflop, s);
        } else {
            add_point(&m->memory, k->mbytes, k->mbytes, s);
            for (int j = 0; j < NKIT; j++)
                if (!strcmp(k->kernel, KIT_KERNELS[j].kit))
                    add_point(&m->kernel[KIT_KERNELS[j].id], k->mbytes, k->mbytes, s);
        }
    }
    for (int i = 0; i < r->nattention; i++) {
        const GpuAttentionRow* a = &r->attention[i];
        // GFLOP of the call: TFLOP/s x ms; the SDPA time of the same call
        const double fwd = a->ours_fwd_tflops * a->ours_fwd_ms, bwd = a->ours_bwd_tflops * a->ours_bwd_ms;
        add_attention(m, a->hs, 0, fwd, 1e-3 * (src == ATTENTION_SDPA ? a->sdpa_fwd_ms : a->ours_fwd_ms));
        add_attention(m, a->hs, 1, bwd, 1e-3 * (src == ATTENTION_SDPA ? a->sdpa_bwd_ms : a->ours_bwd_ms));
    }
}

// The host's part of a step: ms per step minus its three phases, averaged over the runs.
static double fixed_ms(const GpuReport* r, char* source, size_t len) {
    double sum = 0;
    size_t used = 0;
    for (int i = 0; i < r->nthroughput; i++) {
        const GpuThroughputRow* t = &r->throughput[i];
        const double gap = t->ms_per_step - t->forward_ms - t->backward_ms - t->optimizer_ms;
        sum += gap > 0 ? gap : 0;
        used += (size_t)snprintf(source + used, used < len ? len - used : 0, "%s%s %.3f",
                                 i ? ", " : "", t->run, gap > 0 ? gap : 0);
    }
    return r->nthroughput ? sum / r->nthroughput : 0;
}

// --- The file ------------------------------------------------------------------------------------

// The keys the calibration writes; the base file's lines for them are dropped.
static const char* const REPLACED[] = {"name", "matmul.peak_tflops", "matmul.efficiency",
                                       "attention.forward_efficiency",
                                       "attention.backward_efficiency", "memory.bandwidth_gbs",
                                       "memory.efficiency", "step.fixed_ms"};

static int replaced(const char* line) {
    const char* key = line + strspn(line, " \t");
    if (starts(key, "kernel.") || starts(key, "attention.hs")) return 1;
    for (size_t k = 0; k < sizeof REPLACED / sizeof *REPLACED; k++) {
        const size_t n = strlen(REPLACED[k]);
        if (!strncmp(key, REPLACED[k], n) && (key[n] == ' ' || key[n] == '=' || key[n] == '\t'))
            return 1;
    }
    return 0;
}

static void copy_base(FILE* out, const char* base) {
    FILE* f = fopen(base, "r");
    if (!f) fail_msg("--base %s: cannot open", base);
    char line[2048];
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && !replaced(line) && line[strspn(line, " \t\r\n")]) fputs(line, out);
    CHECK(!ferror(f), "read failed", "--base %s", base);
    fclose(f);
}

static void name_of(const char* out, char* name, size_t len) {
    const char* base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    snprintf(name, len, "%s", base);
    char* dot = strstr(name, ".cluster");
    if (dot) *dot = 0;
}

// Whether the report holds a usable fit of (op, P) before row `before` (or at all: before = nfits).
static int fit_seen(const GpuReport* r, int before, int op, int P) {
    for (int k = 0; k < before; k++)
        if (fit_op_parse(r->fits[k].op) == op && r->fits[k].P == P && r->fits[k].beta_s_per_byte > 0)
            return 1;
    return 0;
}

static int report_has_fit(const GpuReport* r, int op, int P) { return fit_seen(r, r->nfits, op, P); }

// "key = curve   # source" for the points (made to rise with size when `rise`).
static void write_curve(FILE* f, const char* key, const Points* points, int rise, double peak,
                        const char* source) {
    const Points p = rise ? rising(pooled(points)) : pooled(points);
    const EfficiencyCurve c = to_curve(&p, peak, key);
    char text[1024];
    cluster_format_curve(&c, text, sizeof text);
    fprintf(f, "%s = %s   # %s\n", key, text, source);
}

int gpu_calibrate(const char* report_path, const char* base_path, AttentionSource src,
                  const char* collectives, const char* out_path) {
    static GpuReport r;
    static Cluster base;
    static Measured m;
    char err[ERR_LEN];
    if (gpu_report_read(report_path, &r, err, sizeof err) != 0) fail_msg("--calibrate-gpu %s", err);
    if (cluster_load(base_path, &base, err, sizeof err) != 0) fail_msg("--base %s", err);
    static Cluster fits;   // the collectives' fits, when given
    if (collectives && cluster_read_fits(collectives, &fits, err, sizeof err) != 0)
        fail_msg("--collectives %s", err);
    measure(&r, src, &m);
    // rates per second of the datasheet peaks, in the points' units (GFLOP, MB)
    const double flops = r.bf16_tflops * 1e3, bw = r.hbm_gbps * 1e3;
    const char* att = src == ATTENTION_SDPA ? "PyTorch flash SDPA (FlashAttention-2)" : "ours";
    char name[CLUSTER_NAME_LEN], text[SOURCE_LEN], key[96];
    name_of(out_path, name, sizeof name);
    AtomicFile af;
    FILE* f = report_file_open(&af, out_path);
    fprintf(f, "# Generated by `build/costmodel --calibrate-gpu %s --base %s%s --out %s`\n"
               "# (make costmodel-gpu); do not edit. Compute measured on %s by the GPU kit's\n"
               "# report (kernel rows at %s; attention: %s); the other lines are the base's.\n",
            report_path, base_path, src == ATTENTION_SDPA ? " --attention sdpa" : "", out_path,
            r.gpu, m.shapes, att);
    fprintf(f, "name = %s\n", name);
    copy_base(f, base_path);
    fprintf(f, "matmul.peak_tflops = %.6g   # the report's device record: %s datasheet BF16 "
            "dense peak\n", r.bf16_tflops, r.gpu);
    snprintf(text, sizeof text, "measured: %s, %d GEMMs of its kernel rows (a backward row is "
             "two of half its GFLOP), TFLOP/s over the peak by GFLOP per GEMM, pooled within "
             "%.1fx, rising with size", report_path, m.gemm.n, POOL);
    write_curve(f, "matmul.efficiency", &m.gemm, 1, flops, text);
    fprintf(f, "memory.bandwidth_gbs = %.6g   # the report's device record: %s datasheet memory "
            "bandwidth\n", r.hbm_gbps, r.gpu);
    snprintf(text, sizeof text, "measured: %s, %d memory-bound kernel rows, GB/s over the "
             "bandwidth by MB, pooled within %.1fx, rising with size", report_path, m.memory.n, POOL);
    write_curve(f, "memory.efficiency", &m.memory, 1, bw, text);
    for (int k = 0; k < CK_COUNT; k++) {
        if (!m.kernel[k].n) continue;
        snprintf(key, sizeof key, "kernel.%s.efficiency", cluster_kernel_name((ClusterKernel)k));
        snprintf(text, sizeof text, "measured: %s, its %d rows, GB/s over the bandwidth by MB",
                 report_path, m.kernel[k].n);
        write_curve(f, key, &m.kernel[k], 0, bw, text);
    }
    snprintf(text, sizeof text, "measured: %s, %s attention at every head size, TFLOP/s over "
             "the peak by GFLOP per call (model FLOPs: 4 HS per visible pair forward, 10 HS "
             "backward)", report_path, att);
    write_curve(f, "attention.forward_efficiency", &m.all_fwd, 0, flops, text);
    write_curve(f, "attention.backward_efficiency", &m.all_bwd, 0, flops, text);
    for (int k = 0; k < m.n_hs; k++) {
        snprintf(text, sizeof text, "measured: %s, %s attention at head size %d (%d rows), "
                 "TFLOP/s over the peak by GFLOP per call", report_path, att, m.hs[k], m.fwd[k].n);
        snprintf(key, sizeof key, "attention.hs%d.forward_efficiency", m.hs[k]);
        write_curve(f, key, &m.fwd[k], 0, flops, text);
        snprintf(key, sizeof key, "attention.hs%d.backward_efficiency", m.hs[k]);
        write_curve(f, key, &m.bwd[k], 0, flops, text);
    }
    char runs[SOURCE_LEN];
    const double fixed = fixed_ms(&r, runs, sizeof runs);
    fprintf(f, "step.fixed_ms = %.4f   # measured: %s, ms per step minus forward, backward and "
            "optimizer, averaged over its throughput runs (%s)\n", fixed, report_path,
            r.nthroughput ? runs : "none: 0");
    // The collectives' fits: the report's own (the kit's step 5 on every visible GPU), then
    // --collectives'; the first of an op and P wins. Each replaces the link model for its op.
    int nfits = 0;
    for (int k = 0; k < r.nfits; k++) {
        const GpuFitRow* g = &r.fits[k];
        const int op = fit_op_parse(g->op);
        if (op < 0 || g->P < 2 || !(g->beta_s_per_byte > 0) || fit_seen(&r, k, op, g->P)) continue;
        fprintf(f, "fit.%s.p%d = %.6g %.6g   # measured: %s, tools/bench_collectives on %s, alpha "
                "(s per call), beta (s per bus byte)\n", g->op, g->P,
                g->alpha_s > 0 ? g->alpha_s : 0, g->beta_s_per_byte, report_path, g->transport);
        nfits++;
    }
    for (int k = 0; k < fits.nfits; k++) {
        const CollectiveFit* g = &fits.fit[k];
        if (report_has_fit(&r, g->op, g->P)) continue;
        fprintf(f, "fit.%s.p%d = %.6g %.6g   # measured: %s (tools/bench_collectives), alpha (s per "
                "call), beta (s per bus byte)\n", fit_op_name(g->op), g->P, g->alpha, g->beta,
                collectives);
        nfits++;
    }
    report_file_commit(&af);
    static Cluster check;
    if (cluster_load(out_path, &check, err, sizeof err) != 0)
        fail_msg("--calibrate-gpu wrote a cluster file that does not load: %s", err);
    printf("calibrate-gpu: wrote %s from %s (%d kernel rows, %d attention rows, %d throughput "
           "runs; attention: %s; %d collective fits)\n", out_path, report_path, r.nkernels,
           r.nattention, r.nthroughput, att, nfits);
    gpu_report_free(&r);
    return 0;
}
