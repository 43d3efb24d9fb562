// bench_kernels_cuda: times every CUDA launcher of the training step with CUDA events and sets each
// time against its floor, max(FLOPs / peak, bytes / HBM bandwidth), with the FLOPs and bytes of
// the cost notes (tools/kernel_costs.c) and the peaks of the device's entry in the peak table
// (train/gpu_peaks.c). The GPU run kit runs it once; a script parses its tables.
//
//   bench_kernels_cuda [--shapes LIST] [--tokens N] [--reps R] [--warmup W] [--tiny]
//                      [--attention-vs FILE] [--jsonl FILE] [--md FILE]
//
//   --shapes      comma-separated PRESET:T (default gpt3-125m:1024,gpt3-125m:8192,gpt3-2.7b:1024,
//                 gpt3-2.7b:8192); B = N / T sequences of T tokens per call
//   --tokens      N = B*T tokens per call (default 8192)
//   --reps        timed repetitions per launcher, each between its own pair of events (default 20)
//   --warmup      untimed calls first (default 3)
//   --tiny        for the host runtime's tests: one shape C=64, NH=4, T=64, N=256, Vp=512 (V=500),
//                 AdamW on 100000 parameters, R=2, W=1, small ceilings
//   --attention-vs FILE   instead of the kernel tables: our attention forward and backward against
//                 PyTorch's flash SDPA on the shapes of FILE (the lines of tools/sdpa_bench.py; if it
//                 holds only "sdpa-skipped: REASON", ours alone on the shapes sdpa_bench.py times,
//                 --tiny's with --tiny); --shapes and --tokens are checked but not used
//   --jsonl FILE  appends one JSON object per line: "ceiling", "kernel", "attention_vs_sdpa"
//   --md FILE     appends markdown tables
//
// Every launcher runs on random non-zero inputs (a device fill kernel). Calls whose bytes are under
// twice the L2 size rotate among up to 4 copies of their buffers, so that repetitions read DRAM
// rather than the cache. Backward launchers accumulate (+=) across repetitions, as they may.
// Bad options end with one line "error: --flag: expected ..., found ..." and exit status 2.
#include "attention/partial_attention_cuda.cuh"
#include "model/config.h"
#include "model/cuda_common.cuh"
#include "model/layers_cuda.cuh"
#include "model/matmul_cuda.cuh"
#include "model/optim_cuda.cuh"
#include "tools/bench_kernels.h"
#include "tools/kernel_costs.h"
#include "train/gpu_peaks.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char* const DEFAULT_SHAPES = "gpt3-125m:1024,gpt3-125m:8192,gpt3-2.7b:1024,gpt3-2.7b:8192";
static const size_t MAX_OPTIMIZER_PARAMS = (size_t)1 << 28;

// --- Command line -------------------------------------------------------------------------------

typedef struct {
    const char* shapes;        // --shapes as given (NULL: default)
    int tokens, reps, warmup, tiny;
    int tokens_set, reps_set, warmup_set;
    const char* attention_vs;
    const char* jsonl;
    const char* md;
} Options;

static const char* const USAGE =
    "usage: bench_kernels_cuda [--shapes PRESET:T,...] [--tokens N] [--reps R] [--warmup W] [--tiny]\n"
    "                          [--attention-vs FILE] [--jsonl FILE] [--md FILE]\n";

// A positive integer up to max, or a usage error naming the flag.
static int parse_positive(const char* flag, const char* s, long max) {
    char* end = NULL;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > max)
        usage_error("%s: expected a positive integer up to %ld, found '%s'", flag, max, s);
    return (int)v;
}

static Options parse_options(int argc, char** argv) {
    Options o;
    memset(&o, 0, sizeof o);
    o.tokens = 8192, o.reps = 20, o.warmup = 3;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (!strcmp(a, "--tiny")) {
            o.tiny = 1;
            continue;
        }
        const int takes_value = !strcmp(a, "--shapes") || !strcmp(a, "--tokens") || !strcmp(a, "--reps") ||
                                !strcmp(a, "--warmup") || !strcmp(a, "--attention-vs") ||
                                !strcmp(a, "--jsonl") || !strcmp(a, "--md");
        if (!takes_value) usage_error("unknown option '%s' (expected one of --shapes --tokens --reps --warmup "
                                      "--tiny --attention-vs --jsonl --md --help)", a);
        if (i + 1 >= argc) usage_error("%s: expected a value, found the end of the command line", a);
        const char* v = argv[++i];
        if (!strcmp(a, "--shapes")) o.shapes = v;
        else if (!strcmp(a, "--tokens")) o.tokens = parse_positive(a, v, MAX_TOKENS), o.tokens_set = 1;
        else if (!strcmp(a, "--reps")) o.reps = parse_positive(a, v, 100000), o.reps_set = 1;
        else if (!strcmp(a, "--warmup")) o.warmup = parse_positive(a, v, 100000), o.warmup_set = 1;
        else if (!strcmp(a, "--attention-vs")) o.attention_vs = v;
        else if (!strcmp(a, "--jsonl")) o.jsonl = v;
        else o.md = v;
        if (!v[0]) usage_error("%s: expected a value, found an empty string", a);
    }
    if (o.tiny) {
        if (o.shapes)
            usage_error("--shapes: expected no --shapes with --tiny (which runs its own shape), found '%s'", o.shapes);
        if (!o.tokens_set) o.tokens = 256;
        if (!o.reps_set) o.reps = 2;
        if (!o.warmup_set) o.warmup = 1;
    }
    return o;
}

// The attention kernels' head sizes (partial_attention_cuda.cuh).
static int head_size_supported(int HS) { return HS >= 16 && HS <= 128 && HS % 16 == 0; }

static void finish_shape(Shape* s) {
    s->HS = s->C / s->NH;
    s->B = s->N / s->T;
    const double cap = (double)MAX_OPTIMIZER_PARAMS;
    s->opt_params = s->model_params < cap ? (size_t)s->model_params : MAX_OPTIMIZER_PARAMS;
}

// --tiny's shape: the "tiny" preset's widths (C = 64, NH = 4) at T = 64, V = 500.
static Shape tiny_shape(int N) {
    Shape s;
    memset(&s, 0, sizeof s);
    s.T = 64, s.N = N, s.C = 64, s.NH = 4, s.L = 2, s.V = 500, s.Vp = 512, s.max_T = 256;
    s.model_params = 100000;
    snprintf(s.label, sizeof s.label, "tiny T=%d", s.T);
    if (N % s.T) usage_error("--tokens: expected a multiple of --tiny's T = %d, found %d", s.T, N);
    finish_shape(&s);
    return s;
}

// One PRESET:T item of --shapes.
static Shape parse_shape(const char* item, int N) {
    char name[32];
    const char* colon = strchr(item, ':');
    const size_t len = colon ? (size_t)(colon - item) : 0;
    if (!colon || len == 0 || len >= sizeof name)
        usage_error("--shapes: expected PRESET:T (e.g. gpt3-125m:1024), found '%s'", item);
    memcpy(name, item, len);
    name[len] = 0;
    GPTConfig cfg;
    if (gpt_config_preset(name, 0, 0, &cfg) != 0)
        usage_error("--shapes: expected a preset (%s) before ':', found '%s'", gpt_config_preset_names(), item);
    char* end = NULL;
    errno = 0;
    const long T = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || T < 1 || T > MAX_TOKENS)
        usage_error("--shapes: expected a positive integer T after ':', found '%s'", item);
    if (N % T) usage_error("--shapes: expected T dividing --tokens N = %d (B = N/T), found '%s'", N, item);
    if (cfg.C % cfg.NH || !head_size_supported(cfg.C / cfg.NH))
        usage_error("--shapes: expected a preset whose head size is a multiple of 16 in [16, 128] (the "
                    "attention kernels'), found '%s' (C %d, %d heads)", item, cfg.C, cfg.NH);
    Shape s;
    memset(&s, 0, sizeof s);
    s.T = (int)T, s.N = N, s.C = cfg.C, s.NH = cfg.NH, s.L = cfg.L, s.V = cfg.V, s.Vp = cfg.Vp;
    s.max_T = cfg.max_T;
    s.model_params = kernel_gpt_num_params(cfg.L, cfg.C, cfg.Vp, cfg.max_T);
    snprintf(s.label, sizeof s.label, "%s T=%ld", name, T);
    finish_shape(&s);
    return s;
}

static int parse_shapes(const Options* o, Shape* shapes) {
    if (o->tiny) {
        shapes[0] = tiny_shape(o->tokens);
        return 1;
    }
    const char* list = o->shapes ? o->shapes : DEFAULT_SHAPES;
    int n = 0;
    const char* p = list;
    for (;;) {
        const char* comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[128];
        if (len == 0 || len >= sizeof item)
            usage_error("--shapes: expected comma-separated PRESET:T items, found '%s'", list);
        if (n == MAX_SHAPES) usage_error("--shapes: expected at most %d shapes, found more in '%s'", MAX_SHAPES, list);
        memcpy(item, p, len);
        item[len] = 0;
        shapes[n++] = parse_shape(item, o->tokens);
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

// --- The comparison file of tools/sdpa_bench.py ----------------------------------------------------

// One shape of the attention comparison and SDPA's times on it (NaN where it has none).
typedef struct {
    int HS, T, B, NH;
    double sdpa_fwd_ms, sdpa_bwd_ms;
    char backend[32];
} VsShape;

typedef struct {
    VsShape shapes[MAX_VS];
    int n;
    char skipped[256];         // the reason of a "sdpa-skipped:" line, "" if none
} VsFile;

static void check_vs_shape(const char* path, int line, const VsShape* v) {
    if (!head_size_supported(v->HS))
        usage_error("--attention-vs: %s:%d: expected HS a multiple of 16 in [16, 128], found %d", path, line, v->HS);
    if (v->T < 1 || v->B < 1 || v->NH < 1 || (long)v->B * v->T > MAX_TOKENS || (long)v->NH * v->HS > 16384)
        usage_error("--attention-vs: %s:%d: expected positive T, B, NH with B*T <= %d and NH*HS <= 16384, "
                    "found T=%d B=%d NH=%d", path, line, MAX_TOKENS, v->T, v->B, v->NH);
}

// Lines "sdpa HS T B NH fwd_ms bwd_ms backend", or one "sdpa-skipped: REASON". Every other line
// ('#' comments, and whatever torch printed on stderr into the same log) is ignored.
static VsFile read_vs_file(const char* path) {
    VsFile f;
    memset(&f, 0, sizeof f);
    FILE* in = fopen(path, "r");
    if (!in) usage_error("--attention-vs: expected a readable file, found '%s' (%s)", path, strerror(errno));
    char buf[512];
    int line = 0;
    while (fgets(buf, sizeof buf, in)) {
        line++;
        buf[strcspn(buf, "\r\n")] = 0;
        const char* s = buf + strspn(buf, " \t");
        if (!strncmp(s, "sdpa-skipped:", 13)) {
            snprintf(f.skipped, sizeof f.skipped, "%s", s + 13 + strspn(s + 13, " "));
            continue;
        }
        if (strncmp(s, "sdpa ", 5) != 0) continue;
        VsShape v;
        memset(&v, 0, sizeof v);
        int used = 0;
        if (sscanf(s, "sdpa %d %d %d %d %lf %lf %31s %n", &v.HS, &v.T, &v.B, &v.NH, &v.sdpa_fwd_ms,
                   &v.sdpa_bwd_ms, v.backend, &used) != 7 || s[used])
            usage_error("--attention-vs: %s:%d: expected 'sdpa HS T B NH fwd_ms bwd_ms backend', found '%s'",
                        path, line, s);
        check_vs_shape(path, line, &v);
        if (f.n == MAX_VS) usage_error("--attention-vs: %s: expected at most %d sdpa lines, found more", path, MAX_VS);
        f.shapes[f.n++] = v;
    }
    fclose(in);
    if (f.n == 0 && !f.skipped[0])
        usage_error("--attention-vs: %s: expected lines 'sdpa HS T B NH fwd_ms bwd_ms backend' or "
                    "'sdpa-skipped: REASON', found none", path);
    return f;
}

// The shapes tools/sdpa_bench.py times (HS 64, 128; T 1024 .. 16384; 16384 tokens; NH*HS = 2048),
// or --tiny's (HS 16, 32; T 64, 128; 512 tokens; NH*HS = 64): ours alone when SDPA was skipped.
static void default_vs_shapes(VsFile* f, int tiny) {
    static const int HS_FULL[] = {64, 128}, T_FULL[] = {1024, 2048, 4096, 8192, 16384};
    static const int HS_TINY[] = {16, 32}, T_TINY[] = {64, 128};
    const int* hs = tiny ? HS_TINY : HS_FULL;
    const int* ts = tiny ? T_TINY : T_FULL;
    const int nhs = 2, nts = tiny ? 2 : 5, tokens = tiny ? 512 : 16384, width = tiny ? 64 : 2048;
    f->n = 0;
    for (int i = 0; i < nhs; i++)
        for (int j = 0; j < nts; j++) {
            VsShape* v = &f->shapes[f->n++];
            memset(v, 0, sizeof *v);
            v->HS = hs[i], v->T = ts[j], v->B = tokens / ts[j], v->NH = width / hs[i];
            v->sdpa_fwd_ms = v->sdpa_bwd_ms = NAN;
            snprintf(v->backend, sizeof v->backend, "none");
        }
}

// --- Output -------------------------------------------------------------------------------------

// A JSON number, or null when it is not finite.
static void json_num(FILE* f, const char* key, double v, const char* sep) {
    if (isfinite(v)) fprintf(f, "\"%s\":%.6g%s", key, v, sep);
    else fprintf(f, "\"%s\":null%s", key, sep);
}

// JSON string contents (device names are plain ASCII; quote what needs it).
static void json_text(FILE* f, const char* s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

// A table cell: the number, or "n/a" when it is not finite.
static const char* cell(char* buf, size_t len, const char* fmt, double v) {
    if (isfinite(v)) snprintf(buf, len, fmt, v);
    else snprintf(buf, len, "n/a");
    return buf;
}

typedef struct {
    double ms, min_ms, gflop, mbytes, tflops, gbps, floor_ms, pct_floor;
    int compute_bound;
} Row;

static Row make_row(const Bench* b, KernelCost cost, Timing t) {
    Row r;
    r.ms = t.median_ms, r.min_ms = t.min_ms;
    r.gflop = cost.flops / 1e9, r.mbytes = cost.bytes / 1e6;
    r.tflops = t.median_ms > 0 ? cost.flops / (t.median_ms * 1e-3) / 1e12 : NAN;
    r.gbps = t.median_ms > 0 ? cost.bytes / (t.median_ms * 1e-3) / 1e9 : NAN;
    r.floor_ms = 1e3 * kernel_floor_seconds(cost, b->tensor_flops, b->cuda_core_flops, b->bytes_per_s,
                                            &r.compute_bound);
    r.pct_floor = t.median_ms > 0 ? 100.0 * r.floor_ms / t.median_ms : NAN;
    return r;
}

static void print_table_header(void) {
    printf("  %-56s %10s %10s %9s %9s %10s %8s  %-7s %s\n", "kernel", "median ms", "min ms", "TFLOP/s", "GB/s",
           "floor ms", "% floor", "bound", "copies");
}

static void report_kernel(const Bench* b, const Shape* s, const char* name, const Row* r, int copies) {
    char c1[32], c2[32], c3[32], c4[32], c5[32], c6[32];
    const char* bound = r->compute_bound ? "compute" : "memory";
    printf("  %-56s %10s %10s %9s %9s %10s %8s  %-7s %d\n", name, cell(c1, 32, "%.4g", r->ms),
           cell(c2, 32, "%.4g", r->min_ms), cell(c3, 32, "%.2f", r->tflops), cell(c4, 32, "%.1f", r->gbps),
           cell(c5, 32, "%.4g", r->floor_ms), cell(c6, 32, "%.1f", r->pct_floor), bound, copies);
    fflush(stdout);
    if (b->md) {
        fprintf(b->md, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, cell(c1, 32, "%.4g", r->ms),
                cell(c2, 32, "%.4g", r->min_ms), cell(c3, 32, "%.2f", r->tflops), cell(c4, 32, "%.1f", r->gbps),
                cell(c5, 32, "%.4g", r->floor_ms), cell(c6, 32, "%.1f", r->pct_floor), bound);
        fflush(b->md);
    }
    if (b->jsonl) {
        FILE* f = b->jsonl;
        fprintf(f, "{\"type\":\"kernel\",\"shape\":\"%s\",\"kernel\":\"%s\",", s->label, name);
        json_num(f, "ms", r->ms, ",");
        json_num(f, "min_ms", r->min_ms, ",");
        json_num(f, "gflop", r->gflop, ",");
        json_num(f, "mbytes", r->mbytes, ",");
        json_num(f, "tflops", r->tflops, ",");
        json_num(f, "gbps", r->gbps, ",");
        json_num(f, "floor_ms", r->floor_ms, ",");
        json_num(f, "pct_floor", r->pct_floor, ",");
        fprintf(f, "\"bound\":\"%s\"}\n", bound);
        fflush(f);
    }
}

static const char* floors_text(const Bench* b, char* buf, size_t len) {
    if (b->floors_measured)
        snprintf(buf, len, "floors from the measured ceilings (device not in the peak table): %.1f TFLOP/s "
                 "tensor, %.0f GB/s; the CUDA-core compute term is left out", b->tensor_flops / 1e12,
                 b->bytes_per_s / 1e9);
    else
        snprintf(buf, len, "floors from the peak table: %s, %s %.1f TFLOP/s for tensor-core work, fp32 %.1f "
                 "TFLOP/s for the rest, HBM %.0f GB/s", b->peak->name, FLOATX_NAME, b->tensor_flops / 1e12,
                 b->cuda_core_flops / 1e12, b->bytes_per_s / 1e9);
    return buf;
}

// --- Ceilings -----------------------------------------------------------------------------------

typedef struct {
    void* dst;
    const void* src;
    size_t bytes;
} CopyCall;

static void call_copy(const Bench* b, const void* ctx, int i) {
    const CopyCall* c = (const CopyCall*)ctx;
    CUDA_CHECK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, b->stream));
}

typedef struct {
    floatX *out, *inp, *weight;
    int n;
} GemmCall;

static void call_gemm(const Bench* b, const void* ctx, int i) {
    const GemmCall* g = (const GemmCall*)ctx;
    matmul_forward_cuda(b->mm, g->out, NULL, g->inp, g->weight, NULL, g->n, g->n, g->n, b->stream);
}

// Device-to-device copy bandwidth (bytes read + written per second).
static double measure_copy(const Bench* b, size_t bytes) {
    CopyCall c;
    void* dst = NULL;
    void* src = NULL;
    CUDA_CHECK(cudaMalloc(&dst, bytes));
    CUDA_CHECK(cudaMalloc(&src, bytes));
    fill_buffer(b, NULL, src, ELEM_F32, bytes / 4, FILL_RANDOM, 99ull);
    c.dst = dst, c.src = src, c.bytes = bytes;
    const Timing t = time_calls(b, call_copy, &c);
    CUDA_CHECK(cudaFree(dst));
    CUDA_CHECK(cudaFree(src));
    return 2.0 * (double)bytes / (t.median_ms * 1e-3);
}

// FLOP/s of an n^3 GEMM through matmul_forward_cuda (no bias).
static double measure_gemm(const Bench* b, int n) {
    GemmCall g;
    const size_t elems = (size_t)n * n;
    CUDA_CHECK(cudaMalloc(&g.out, elems * sizeof(floatX)));
    CUDA_CHECK(cudaMalloc(&g.inp, elems * sizeof(floatX)));
    CUDA_CHECK(cudaMalloc(&g.weight, elems * sizeof(floatX)));
    fill_buffer(b, NULL, g.inp, ELEM_X, elems, FILL_RANDOM, 7ull);
    fill_buffer(b, NULL, g.weight, ELEM_X, elems, FILL_RANDOM, 8ull);
    g.n = n;
    const Timing t = time_calls(b, call_gemm, &g);
    CUDA_CHECK(cudaFree(g.out));
    CUDA_CHECK(cudaFree(g.inp));
    CUDA_CHECK(cudaFree(g.weight));
    return 2.0 * (double)n * n * n / (t.median_ms * 1e-3);
}

static double pct(double measured, double datasheet) {
    return datasheet > 0 ? 100.0 * measured / datasheet : NAN;
}

// Measures both ceilings, reports them beside the datasheet, and sets the floors' rates.
static void run_ceilings(Bench* b, int tiny) {
    const size_t copy_bytes = tiny ? (size_t)8 << 20 : (size_t)1 << 30;
    const int gemm_n = tiny ? 256 : 8192;
    MatmulContext mm;
    matmul_context_init(&mm, 0, 0);
    b->mm = &mm;
    const double copy_bps = measure_copy(b, copy_bytes);
    const double gemm_fps = measure_gemm(b, gemm_n);
    b->mm = NULL;
    matmul_context_destroy(&mm);

    const double sheet_gbps = b->peak ? b->peak->hbm_gbps : NAN;
    const double sheet_tflops = b->peak ? gpu_peak_flops(b->peak, sizeof(floatX) == 4) / 1e12 : NAN;
    char copy_what[64], gemm_what[64], c1[32], c2[32], c3[32], c4[32];
    snprintf(copy_what, sizeof copy_what, "D2D cudaMemcpy %zu MiB (read + write)", copy_bytes >> 20);
    snprintf(gemm_what, sizeof gemm_what, "%s GEMM %d^3 (matmul_forward_cuda)", FLOATX_NAME, gemm_n);
    printf("ceiling: %s: %.1f GB/s (datasheet %s GB/s, %s%%)\n", copy_what, copy_bps / 1e9,
           cell(c1, 32, "%.0f", sheet_gbps), cell(c2, 32, "%.1f", pct(copy_bps / 1e9, sheet_gbps)));
    printf("ceiling: %s: %.1f TFLOP/s (datasheet %s TFLOP/s, %s%%)\n", gemm_what, gemm_fps / 1e12,
           cell(c3, 32, "%.1f", sheet_tflops), cell(c4, 32, "%.1f", pct(gemm_fps / 1e12, sheet_tflops)));

    if (b->peak) {
        b->tensor_flops = gpu_peak_flops(b->peak, sizeof(floatX) == 4);
        b->cuda_core_flops = b->peak->fp32_tflops * 1e12;
        b->bytes_per_s = b->peak->hbm_gbps * 1e9;
        b->floors_measured = 0;
    } else {
        b->tensor_flops = gemm_fps, b->cuda_core_flops = 0, b->bytes_per_s = copy_bps;
        b->floors_measured = 1;
    }
    char floors[256];
    printf("%s\n", floors_text(b, floors, sizeof floors));

    if (b->jsonl) {
        FILE* f = b->jsonl;
        const char* from = b->floors_measured ? "measured" : "table";
        fprintf(f, "{\"type\":\"ceiling\",\"what\":\"memcpy_d2d\",\"bytes\":%zu,", copy_bytes);
        json_num(f, "gbps", copy_bps / 1e9, ",");
        json_num(f, "datasheet_gbps", sheet_gbps, ",");
        json_num(f, "pct_datasheet", pct(copy_bps / 1e9, sheet_gbps), ",");
        fprintf(f, "\"floors_from\":\"%s\"}\n", from);
        fprintf(f, "{\"type\":\"ceiling\",\"what\":\"gemm_%s\",\"m\":%d,\"n\":%d,\"k\":%d,", FLOATX_NAME, gemm_n,
                gemm_n, gemm_n);
        json_num(f, "tflops", gemm_fps / 1e12, ",");
        json_num(f, "datasheet_tflops", sheet_tflops, ",");
        json_num(f, "pct_datasheet", pct(gemm_fps / 1e12, sheet_tflops), ",");
        fprintf(f, "\"floors_from\":\"%s\"}\n", from);
        fflush(f);
    }
    if (b->md) {
        FILE* f = b->md;
        fprintf(f, "\n### Ceilings (%s)\n\n| ceiling | measured | datasheet | %% of datasheet |\n|---|---|---|---|\n",
                b->prop.name);
        fprintf(f, "| %s | %.1f GB/s | %s GB/s | %s |\n", copy_what, copy_bps / 1e9, cell(c1, 32, "%.0f", sheet_gbps),
                cell(c2, 32, "%.1f", pct(copy_bps / 1e9, sheet_gbps)));
        fprintf(f, "| %s | %.1f TFLOP/s | %s TFLOP/s | %s |\n", gemm_what, gemm_fps / 1e12,
                cell(c3, 32, "%.1f", sheet_tflops), cell(c4, 32, "%.1f", pct(gemm_fps / 1e12, sheet_tflops)));
        fprintf(f, "\n%s.\n", floors);
        fflush(f);
    }
}

// --- The kernel tables --------------------------------------------------------------------------

static void describe_shape(const Shape* s, char* buf, size_t len) {
    char params[96];
    if ((double)s->opt_params < s->model_params)
        snprintf(params, sizeof params, "n = 2^28 = %zu of the %.1f M parameters", s->opt_params,
                 s->model_params / 1e6);
    else
        snprintf(params, sizeof params, "n = %zu (all parameters)", s->opt_params);
    snprintf(buf, len, "B=%d T=%d C=%d NH=%d HS=%d N=%d V=%d Vp=%d; AdamW and global norm on %s", s->B, s->T,
             s->C, s->NH, s->HS, s->N, s->V, s->Vp, params);
}

// A GEMM case whose cuBLASLt epilogue was refused ran matmul.cu's fallback kernels, whose extra
// traffic the cost (fused epilogue) does not count: say which. 1 if there is something to say.
static int fallback_note(const MatmulContext* mm, const long* before, const char* name, char* buf, size_t len) {
    int used = snprintf(buf, len, "%s: cuBLASLt refused the", name), any = 0;
    for (int k = 0; k < MATMUL_EPILOGUE_KINDS && used > 0 && (size_t)used < len; k++)
        if (mm->fallback_calls[k] != before[k]) {
            used += snprintf(buf + used, len - (size_t)used, "%s %s", any ? "," : "", matmul_epilogue_kind_name(k));
            any = 1;
        }
    if (any && used > 0 && (size_t)used < len)
        snprintf(buf + used, len - (size_t)used, " epilogue: its fallback kernels ran (traffic not in the cost)");
    return any;
}

static void run_shape(Bench* b, const Shape* s) {
    char desc[256];
    describe_shape(s, desc, sizeof desc);
    printf("\n== %s: %s ==\n", s->label, desc);
    print_table_header();
    if (b->md) {
        fprintf(b->md, "\n### %s\n\n%s. %%-of-floor = floor / median time. encoder_backward_cuda's bytes are an "
                "upper bound (every token distinct); matmul_backward_cuda = dinp + dweight (+ dbias) GEMMs.\n\n"
                "| kernel | time ms (median) | min ms | TFLOP/s | GB/s | floor ms | %% of floor | bound |\n"
                "|---|---|---|---|---|---|---|---|\n", s->label, desc);
        fflush(b->md);
    }
    MatmulContext mm;
    matmul_context_init(&mm, 0, 4 * s->C);
    b->mm = &mm;
    Case cases[MAX_CASES];
    const int n = shape_cases(s, cases);
    char notes[MAX_CASES][160];
    int nnotes = 0;
    for (int i = 0; i < n; i++) {
        long before[MATMUL_EPILOGUE_KINDS];
        memcpy(before, mm.fallback_calls, sizeof before);
        int copies = 1;
        const Timing t = time_case(b, s, &cases[i], &copies);
        const Row r = make_row(b, cases[i].cost, t);
        report_kernel(b, s, cases[i].name, &r, copies);
        if (fallback_note(&mm, before, cases[i].name, notes[nnotes], sizeof notes[0])) {
            printf("  note: %s\n", notes[nnotes]);
            nnotes++;
        }
    }
    if (b->md)
        for (int i = 0; i < nnotes; i++) fprintf(b->md, "%sNote: %s.\n", i ? "" : "\n", notes[i]);
    b->mm = NULL;
    matmul_context_destroy(&mm);
}

// --- Attention against SDPA ---------------------------------------------------------------------

static Shape vs_shape(const VsShape* v) {
    Shape s;
    memset(&s, 0, sizeof s);
    s.B = v->B, s.T = v->T, s.N = v->B * v->T, s.NH = v->NH, s.HS = v->HS, s.C = v->NH * v->HS;
    snprintf(s.label, sizeof s.label, "attention HS=%d T=%d", v->HS, v->T);
    return s;
}

static double ratio(double theirs, double ours) { return ours > 0 ? theirs / ours : NAN; }

static void run_attention_vs(Bench* b, VsFile* f, int tiny) {
    const int skipped = f->n == 0;
    if (skipped) {
        printf("SDPA: skipped (%s): our times alone, on the shapes sdpa_bench.py would time\n", f->skipped);
        default_vs_shapes(f, tiny);
    }
    printf("\n== attention vs PyTorch SDPA (flash), causal, bf16 ==\n"
           "ratio = SDPA time / our time (1.0 = as fast as flash SDPA; the goal is >= 0.8). Our forward is\n"
           "attention_partial_forward_cuda and writes fp32 o (for the LSE merge) where SDPA writes bf16; our\n"
           "backward is attention_row_dot_cuda + attention_partial_backward_cuda (fp32 dq, dk, dv). TFLOP/s on\n"
           "model FLOPs (4*HS fwd, 10*HS bwd per visible pair).\n");
    printf("  %4s %6s %8s %12s %12s %9s %12s %12s %9s %12s %12s  %s\n", "HS", "T", "B x NH", "ours fwd ms",
           "SDPA fwd ms", "ratio fwd", "ours bwd ms", "SDPA bwd ms", "ratio bwd", "fwd TFLOP/s", "bwd TFLOP/s",
           "SDPA backend");
    if (b->md)
        fprintf(b->md, "\n### Attention vs PyTorch SDPA (flash)\n\nratio = SDPA time / our time (1.0 = as fast; "
                "goal >= 0.8). Our forward writes fp32 o (for the LSE merge) where SDPA writes bf16; our backward "
                "= attention_row_dot_cuda + attention_partial_backward_cuda.%s%s\n\n"
                "| HS | T | B x NH | ours fwd ms | SDPA fwd ms | ratio fwd | ours bwd ms | SDPA bwd ms | ratio bwd "
                "| ours fwd TFLOP/s | ours bwd TFLOP/s |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
                skipped ? " SDPA was skipped, so its columns are n/a: " : "", skipped ? f->skipped : "");
    for (int i = 0; i < f->n; i++) {
        const VsShape* v = &f->shapes[i];
        const Shape s = vs_shape(v);
        const Case fwd = case_attention_forward(&s), bwd = case_attention_backward_full(&s);
        int copies = 1;
        const Timing tf = time_case(b, &s, &fwd, &copies);
        const Timing tb = time_case(b, &s, &bwd, &copies);
        const double rf = ratio(v->sdpa_fwd_ms, tf.median_ms), rb = ratio(v->sdpa_bwd_ms, tb.median_ms);
        const double ff = fwd.cost.flops / (tf.median_ms * 1e-3) / 1e12;
        const double fb = bwd.cost.flops / (tb.median_ms * 1e-3) / 1e12;
        char bxnh[32], c[8][32];
        snprintf(bxnh, sizeof bxnh, "%d x %d", v->B, v->NH);
        printf("  %4d %6d %8s %12s %12s %9s %12s %12s %9s %12s %12s  %s\n", v->HS, v->T, bxnh,
               cell(c[0], 32, "%.4g", tf.median_ms), cell(c[1], 32, "%.4g", v->sdpa_fwd_ms), cell(c[2], 32, "%.3f", rf),
               cell(c[3], 32, "%.4g", tb.median_ms), cell(c[4], 32, "%.4g", v->sdpa_bwd_ms), cell(c[5], 32, "%.3f", rb),
               cell(c[6], 32, "%.1f", ff), cell(c[7], 32, "%.1f", fb), v->backend);
        fflush(stdout);
        if (b->md) {
            fprintf(b->md, "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", v->HS, v->T, bxnh, c[0], c[1],
                    c[2], c[3], c[4], c[5], c[6], c[7]);
            fflush(b->md);
        }
        if (b->jsonl) {
            FILE* j = b->jsonl;
            fprintf(j, "{\"type\":\"attention_vs_sdpa\",\"hs\":%d,\"T\":%d,\"B\":%d,\"NH\":%d,", v->HS, v->T,
                    v->B, v->NH);
            json_num(j, "ours_fwd_ms", tf.median_ms, ",");
            json_num(j, "sdpa_fwd_ms", v->sdpa_fwd_ms, ",");
            json_num(j, "ratio_fwd", rf, ",");
            json_num(j, "ours_bwd_ms", tb.median_ms, ",");
            json_num(j, "sdpa_bwd_ms", v->sdpa_bwd_ms, ",");
            json_num(j, "ratio_bwd", rb, ",");
            json_num(j, "ours_fwd_tflops", ff, ",");
            json_num(j, "ours_bwd_tflops", fb, ",");
            fprintf(j, "\"sdpa_backend\":\"");
            json_text(j, v->backend);
            fprintf(j, "\"}\n");
            fflush(j);
        }
    }
}

// --- Main ---------------------------------------------------------------------------------------

int main(int argc, char** argv) {
    const Options o = parse_options(argc, argv);
    static Shape shapes[MAX_SHAPES];
    static VsFile vs;
    // --shapes is checked in both modes (the GPU check passes the same options to both).
    const int nshapes = parse_shapes(&o, shapes);
    if (o.attention_vs) vs = read_vs_file(o.attention_vs);

    Bench b;
    memset(&b, 0, sizeof b);
    b.reps = o.reps, b.warmup = o.warmup;
    b.jsonl = bench_open_output("--jsonl", o.jsonl, "a");
    b.md = bench_open_output("--md", o.md, "a");

    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaGetDeviceProperties(&b.prop, 0));
    b.peak = gpu_peak_lookup(b.prop.name, b.prop.totalGlobalMem);
    printf("device: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB; %s storage\n", b.prop.name, b.prop.major, b.prop.minor,
           b.prop.multiProcessorCount, (double)b.prop.totalGlobalMem / (1 << 30), b.prop.l2CacheSize >> 20,
           FLOATX_NAME);
    if (b.peak)
        printf("peak table: %s: bf16 %.1f TFLOP/s, tf32 %.1f, fp32 %.1f, HBM %.0f GB/s (%s)\n", b.peak->name,
               b.peak->bf16_tflops, b.peak->tf32_tflops, b.peak->fp32_tflops, b.peak->hbm_gbps, b.peak->source);
    else
        printf("peak table: unknown device '%s': floors use the ceilings measured below\n", b.prop.name);
    printf("timing: %d warm-up calls, then the median and min of %d calls, each between its own pair of CUDA "
           "events, queued behind a ~5 ms delay kernel so that they run back to back; inputs rotate among up "
           "to %d copies while a call moves less than twice the L2\n", o.warmup, o.reps, MAX_COPIES);
    fflush(stdout);
    CUDA_CHECK(cudaStreamCreate(&b.stream));
    CUDA_CHECK(cudaMalloc(&b.delay_sink, sizeof(float)));

    if (o.attention_vs) {
        run_attention_vs(&b, &vs, o.tiny);
    } else {
        run_ceilings(&b, o.tiny);
        for (int i = 0; i < nshapes; i++) run_shape(&b, &shapes[i]);
    }

    CUDA_CHECK(cudaStreamSynchronize(b.stream));
    CUDA_CHECK(cudaStreamDestroy(b.stream));
    CUDA_CHECK(cudaFree(b.delay_sink));
    bench_close_output("--jsonl", b.jsonl, o.jsonl);
    bench_close_output("--md", b.md, o.md);
    printf("done\n");
    return 0;
}
