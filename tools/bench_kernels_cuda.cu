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
#include "tools/kernel_costs.h"
#include "train/gpu_peaks.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SHAPES = 16, MAX_BUFS = 10, MAX_COPIES = 4, MAX_CASES = 32, MAX_VS = 64, MAX_TOKENS = 1 << 20 };

static const char* const DEFAULT_SHAPES = "gpt3-125m:1024,gpt3-125m:8192,gpt3-2.7b:1024,gpt3-2.7b:8192";
static const size_t MAX_OPTIMIZER_PARAMS = (size_t)1 << 28;

// --- Command line -------------------------------------------------------------------------------

// One benchmark shape: a preset's widths at T tokens per sequence, N tokens per call.
typedef struct {
    char label[64];            // "gpt3-125m T=1024": the "shape" of the JSON objects
    int B, T, N, C, NH, HS, L, V, Vp, max_T;
    double model_params;       // the preset's parameter count (max_T rows of wpe)
    size_t opt_params;         // AdamW / global norm elements: min(model_params, 2^28)
} Shape;

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

// A bad command line: one line on stderr, exit status 2.
static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

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

// --- Device fill kernels ------------------------------------------------------------------------

// splitmix64 of (seed, i): independent 64 random bits per element.
__device__ __forceinline__ unsigned long long mix64(unsigned long long seed, unsigned long long i) {
    unsigned long long z = seed * 0x9E3779B97F4A7C15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Magnitude uniform in [lo, hi) (lo > 0: never zero), sign random when `signed_values`.
__device__ __forceinline__ float random_value(unsigned long long h, float lo, float hi, int signed_values) {
    const float u = (float)(h >> 40) * (1.0f / 16777216.0f);
    const float mag = lo + (hi - lo) * u;
    return signed_values && (h & 1) ? -mag : mag;
}

__global__ void fill_floatx_kernel(floatX* p, size_t n, unsigned long long seed, float lo, float hi,
                                   int signed_values) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = from_float<floatX>(random_value(mix64(seed, i), lo, hi, signed_values));
}

__global__ void fill_float_kernel(float* p, size_t n, unsigned long long seed, float lo, float hi,
                                  int signed_values) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = random_value(mix64(seed, i), lo, hi, signed_values);
}

__global__ void fill_tokens_kernel(int* p, size_t n, unsigned long long seed, int V) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = (int)(mix64(seed, i) % (unsigned long long)V);
}

// Keeps one warp busy for `iters` dependent FMAs (about 2.3 ns each on an H100: 2^21 = ~5 ms), so
// that the timed calls queue up behind it and then run back to back, without the host's launch
// latency between an event and its kernel. The result is stored only in a case that never happens.
__global__ void delay_kernel(float* sink, int iters) {
    float x = (float)threadIdx.x;
    for (int i = 0; i < iters; i++) x = x * 0.999999f + 1e-7f;
    if (x == -1.0f) *sink = x;
}

// Grid of the grid-stride fill kernels: enough blocks to fill a GPU, few threads on the host runtime.
static unsigned int fill_blocks(size_t n) {
    const size_t blocks = (n + 255) / 256;
    return (unsigned int)(blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks);
}

// --- Benchmark cases ----------------------------------------------------------------------------

typedef enum { ELEM_X, ELEM_F32, ELEM_I32, ELEM_F64, ELEM_BYTE } Elem;
// RANDOM: sign random, |x| in [0.25, 1); POSITIVE: [0.5, 1.5) (second moments); TOKENS: [0, V);
// NONE: written by the launcher or by the case's prepare step.
typedef enum { FILL_NONE, FILL_RANDOM, FILL_POSITIVE, FILL_TOKENS } Fill;

typedef struct {
    cudaStream_t stream;
    MatmulContext* mm;          // per shape, max_bias_oc = 4C
    cudaDeviceProp prop;
    const GpuPeak* peak;        // NULL: the device is not in the table
    double tensor_flops, cuda_core_flops, bytes_per_s;   // the floors' rates
    int floors_measured;        // 1: the rates are the measured ceilings
    int reps, warmup;
    float* delay_sink;          // delay_kernel's (never written) output
    FILE* jsonl;
    FILE* md;
} Bench;

typedef struct Case Case;
// p: the case's buffers (one copy), in the order the case added them; NULL where count was 0.
typedef void (*CaseFn)(const Bench* b, const Shape* s, const Case* c, void* const* p);

struct Case {
    char name[64];              // launcher (and layer): the "kernel" of the tables
    KernelCost cost;
    int nbuf;
    size_t count[MAX_BUFS];     // elements (0: a NULL pointer)
    Elem elem[MAX_BUFS];
    Fill fill[MAX_BUFS];
    CaseFn prepare;             // derived inputs (LayerNorm statistics, lse, d), once per copy; may be NULL
    CaseFn run;                 // the timed call
    int IC, OC, bias, gelu;     // GEMM cases
};

static size_t elem_bytes(Elem e) {
    switch (e) {
    case ELEM_X: return sizeof(floatX);
    case ELEM_F32: case ELEM_I32: return 4;
    case ELEM_F64: return 8;
    default: return 1;
    }
}

static Case new_case(const char* name, KernelCost cost, CaseFn run) {
    Case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.cost = cost;
    c.run = run;
    return c;
}

static void add_buf(Case* c, Elem e, size_t count, Fill fill) {
    CHECK(c->nbuf < MAX_BUFS, "raise MAX_BUFS", "case %s: more than %d buffers", c->name, MAX_BUFS);
    c->count[c->nbuf] = count, c->elem[c->nbuf] = e, c->fill[c->nbuf] = fill;
    c->nbuf++;
}

static size_t NC(const Shape* s) { return (size_t)s->N * s->C; }
static size_t rows_lse(const Shape* s) { return (size_t)s->B * s->NH * s->T; }
static TokenPositions positions(void) {
    TokenPositions p;
    p.off = 0, p.stride = 1;
    return p;
}
// Single-device causal attention: queries and keys at positions 0, 1, 2, ... (attention_local_cuda.cu).
static AttentionProblem causal_problem(const Shape* s) {
    AttentionProblem p;
    memset(&p, 0, sizeof p);
    p.B = s->B, p.NH = s->NH, p.HS = s->HS, p.Tq = s->T, p.Tk = s->T;
    p.qpos = positions(), p.kpos = positions();
    return p;
}

#define X(i) ((floatX*)p[i])
#define F(i) ((float*)p[i])

// Token-local layers. Buffers: outputs first, then inputs (shape comments give the layout).

static void run_encoder_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    encoder_forward_cuda(X(0), (const int*)p[1], X(2), X(3), s->B, s->T, s->C, token_layout(positions()), NULL, b->stream);
}
static Case case_encoder_forward(const Shape* s) {
    Case c = new_case("encoder_forward_cuda", kernel_cost_encoder_forward(s->N, s->T, s->C), run_encoder_forward);
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // out (N, C)
    add_buf(&c, ELEM_I32, s->N, FILL_TOKENS);                     // tokens (N)
    add_buf(&c, ELEM_X, (size_t)s->Vp * s->C, FILL_RANDOM);       // wte (Vp, C)
    add_buf(&c, ELEM_X, (size_t)s->T * s->C, FILL_RANDOM);        // wpe (T, C)
    return c;
}

static void run_encoder_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    encoder_backward_cuda(X(0), X(1), X(2), (const int*)p[3], s->B, s->T, s->C, token_layout(positions()), p[4], b->stream);
}
static Case case_encoder_backward(const Shape* s) {
    Case c = new_case("encoder_backward_cuda", kernel_cost_encoder_backward(s->N, s->T, s->C), run_encoder_backward);
    add_buf(&c, ELEM_X, (size_t)s->Vp * s->C, FILL_RANDOM);       // dwte (Vp, C), +=
    add_buf(&c, ELEM_X, (size_t)s->T * s->C, FILL_RANDOM);        // dwpe (T, C), +=
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // dout (N, C)
    add_buf(&c, ELEM_I32, s->N, FILL_TOKENS);                     // tokens (N)
    add_buf(&c, ELEM_BYTE, encoder_backward_scratch_bytes(s->B, s->T), FILL_NONE);
    return c;
}

static void run_layernorm_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    layernorm_forward_cuda(X(0), F(1), F(2), X(3), X(4), X(5), s->N, s->C, b->stream);
}
static Case case_layernorm_forward(const Shape* s) {
    Case c = new_case("layernorm_forward_cuda", kernel_cost_layernorm_forward(s->N, s->C), run_layernorm_forward);
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // out (N, C)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // mean (N)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // rstd (N)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // inp (N, C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // weight (C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // bias (C)
    return c;
}

static void run_fused_residual_layernorm(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    fused_residual_layernorm_forward_cuda(X(0), X(1), F(2), F(3), X(4), X(5), X(6), X(7), s->N, s->C, b->stream);
}
static Case case_fused_residual_layernorm(const Shape* s) {
    Case c = new_case("fused_residual_layernorm_forward_cuda",
                      kernel_cost_fused_residual_layernorm_forward(s->N, s->C), run_fused_residual_layernorm);
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // residual_out (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // out (N, C)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // mean (N)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // rstd (N)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // a (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // b (N, C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // weight (C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // bias (C)
    return c;
}

// The statistics a real backward gets: a forward over its inp (output into dinp, which then
// accumulates from there; bias = dbias's random values).
static void prepare_layernorm_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    layernorm_forward_cuda(X(0), F(7), F(8), X(5), X(6), X(2), s->N, s->C, b->stream);
}
static void run_layernorm_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    layernorm_backward_cuda(X(0), X(1), X(2), p[3], X(4), X(5), X(6), F(7), F(8), s->N, s->C, b->stream);
}
static Case case_layernorm_backward(const Shape* s) {
    Case c = new_case("layernorm_backward_cuda", kernel_cost_layernorm_backward(s->N, s->C), run_layernorm_backward);
    c.prepare = prepare_layernorm_backward;
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // dinp (N, C), +=
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // dweight (C), +=
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // dbias (C), +=
    add_buf(&c, ELEM_BYTE, layernorm_backward_scratch_bytes(s->N, s->C), FILL_NONE);
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // dout (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // inp (N, C)
    add_buf(&c, ELEM_X, s->C, FILL_RANDOM);                       // weight (C)
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // mean (N), from prepare
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // rstd (N), from prepare
    return c;
}

static void run_gelu_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    gelu_forward_cuda(X(0), X(1), (long)(4 * NC(s)), b->stream);
}
static Case case_gelu_forward(const Shape* s) {
    Case c = new_case("gelu_forward_cuda", kernel_cost_gelu_forward(4.0 * NC(s)), run_gelu_forward);
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_NONE);                    // out (N, 4C)
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_RANDOM);                  // inp (N, 4C)
    return c;
}

static void run_gelu_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    gelu_backward_cuda(X(0), X(1), X(2), (long)(4 * NC(s)), b->stream);
}
static Case case_gelu_backward(const Shape* s) {
    Case c = new_case("gelu_backward_cuda", kernel_cost_gelu_backward(4.0 * NC(s)), run_gelu_backward);
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_RANDOM);                  // dinp (N, 4C), +=
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_RANDOM);                  // inp (N, 4C)
    add_buf(&c, ELEM_X, 4 * NC(s), FILL_RANDOM);                  // dout (N, 4C)
    return c;
}

static void run_residual_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    residual_forward_cuda(X(0), X(1), X(2), (long)NC(s), b->stream);
}
static Case case_residual_forward(const Shape* s) {
    Case c = new_case("residual_forward_cuda", kernel_cost_residual_forward((double)NC(s)), run_residual_forward);
    add_buf(&c, ELEM_X, NC(s), FILL_NONE);                        // out (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // a (N, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // b (N, C)
    return c;
}

// GEMMs: one layer of the model, inp (N, IC) -> out (N, OC).

static void run_matmul_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    matmul_forward_cuda(b->mm, X(0), X(4), X(1), X(2), X(3), s->N, c->IC, c->OC, b->stream);
}
static Case case_matmul_forward(const Shape* s, const char* layer, int IC, int OC, int bias, int gelu) {
    char name[64];
    snprintf(name, sizeof name, "matmul_forward_cuda %s", layer);
    Case c = new_case(name, kernel_cost_matmul_forward(s->N, IC, OC, bias, gelu), run_matmul_forward);
    c.IC = IC, c.OC = OC, c.bias = bias, c.gelu = gelu;
    add_buf(&c, ELEM_X, (size_t)s->N * OC, FILL_NONE);                   // out (N, OC)
    add_buf(&c, ELEM_X, (size_t)s->N * IC, FILL_RANDOM);                 // inp (N, IC)
    add_buf(&c, ELEM_X, (size_t)OC * IC, FILL_RANDOM);                   // weight (OC, IC)
    add_buf(&c, ELEM_X, bias ? (size_t)OC : 0, FILL_RANDOM);             // bias (OC) or NULL
    add_buf(&c, ELEM_X, gelu ? (size_t)s->N * OC : 0, FILL_NONE);        // pre_gelu (N, OC) or NULL
    return c;
}

static void run_matmul_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    matmul_backward_cuda(b->mm, X(0), X(1), X(2), X(3), X(4), X(5), NULL, s->N, c->IC, c->OC, 1, b->stream);
}
static Case case_matmul_backward(const Shape* s, const char* layer, int IC, int OC, int bias) {
    char name[64];
    snprintf(name, sizeof name, "matmul_backward_cuda %s", layer);
    Case c = new_case(name, kernel_cost_matmul_backward(s->N, IC, OC, bias), run_matmul_backward);
    c.IC = IC, c.OC = OC, c.bias = bias;
    add_buf(&c, ELEM_X, (size_t)s->N * IC, FILL_RANDOM);                 // dinp (N, IC), +=
    add_buf(&c, ELEM_X, (size_t)OC * IC, FILL_RANDOM);                   // dweight (OC, IC), +=
    add_buf(&c, ELEM_X, bias ? (size_t)OC : 0, FILL_RANDOM);             // dbias (OC), += or NULL
    add_buf(&c, ELEM_X, (size_t)s->N * OC, FILL_RANDOM);                 // dout (N, OC)
    add_buf(&c, ELEM_X, (size_t)s->N * IC, FILL_RANDOM);                 // inp (N, IC)
    add_buf(&c, ELEM_X, (size_t)OC * IC, FILL_RANDOM);                   // weight (OC, IC)
    return c;
}

// Attention, as attention_local_cuda.cu calls it: Q, K, V read from the fused (B*T, 3C) QKV
// activation (row stride 3C), o and dout rows of stride C, dq, dk, dv into an fp32 (B*T, 3C).

static void run_attention_forward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    const AttentionProblem pr = causal_problem(s);
    const int C = s->C;
    attention_partial_forward_cuda(&pr, X(0), 3 * C, X(0) + C, 3 * C, X(0) + 2 * C, 3 * C, F(1), C, F(2), b->stream);
}
static Case case_attention_forward(const Shape* s) {
    Case c = new_case("attention_partial_forward_cuda",
                      kernel_cost_attention_forward(s->B, s->NH, s->HS, s->T), run_attention_forward);
    add_buf(&c, ELEM_X, 3 * NC(s), FILL_RANDOM);                  // qkv (B*T, 3C)
    add_buf(&c, ELEM_F32, NC(s), FILL_NONE);                      // o (B*T, C) fp32
    add_buf(&c, ELEM_F32, rows_lse(s), FILL_NONE);                // lse (B, NH, T)
    return c;
}

static void run_attention_row_dot(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    const AttentionProblem pr = causal_problem(s);
    attention_row_dot_cuda(&pr, X(0), s->C, X(1), s->C, F(2), b->stream);
}
static Case case_attention_row_dot(const Shape* s) {
    Case c = new_case("attention_row_dot_cuda",
                      kernel_cost_attention_row_dot(s->B, s->NH, s->HS, s->T), run_attention_row_dot);
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // out (B*T, C)
    add_buf(&c, ELEM_X, NC(s), FILL_RANDOM);                      // dout (B*T, C)
    add_buf(&c, ELEM_F32, rows_lse(s), FILL_NONE);                // d (B, NH, T)
    return c;
}

// Backward buffers: 0 qkv, 1 dout, 2 lse, 3 d, 4 dqkv (fp32, +=), 5 o (fp32), 6 out (floatX).
// prepare: the forward's lse and o, o rounded to floatX as the layer stores it, d = rowsum(out * dout).
static void prepare_attention_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    void* const forward[3] = {p[0], p[5], p[2]};     // qkv -> o, lse
    void* const row_dot[3] = {p[6], p[1], p[3]};     // out, dout -> d
    run_attention_forward(b, s, c, forward);
    float_to_floatx_cuda(X(6), (const float*)F(5), NC(s), b->stream);   // the layer's rounding of o
    run_attention_row_dot(b, s, c, row_dot);
}
static void run_attention_backward(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    const AttentionProblem pr = causal_problem(s);
    const int C = s->C;
    float* g = F(4);
    attention_partial_backward_cuda(&pr, X(0), 3 * C, X(0) + C, 3 * C, X(0) + 2 * C, 3 * C, X(1), C, F(2), F(3),
                                    g, 3 * C, g + C, 3 * C, g + 2 * C, 3 * C, b->stream);
}
static void add_attention_backward_bufs(Case* c, const Shape* s) {
    c->prepare = prepare_attention_backward;
    add_buf(c, ELEM_X, 3 * NC(s), FILL_RANDOM);                   // qkv (B*T, 3C)
    add_buf(c, ELEM_X, NC(s), FILL_RANDOM);                       // dout (B*T, C)
    add_buf(c, ELEM_F32, rows_lse(s), FILL_NONE);                 // lse (B, NH, T), from prepare
    add_buf(c, ELEM_F32, rows_lse(s), FILL_NONE);                 // d (B, NH, T), from prepare
    add_buf(c, ELEM_F32, 3 * NC(s), FILL_RANDOM);                 // dqkv (B*T, 3C) fp32, +=
    add_buf(c, ELEM_F32, NC(s), FILL_NONE);                       // o (B*T, C) fp32, prepare only
    add_buf(c, ELEM_X, NC(s), FILL_NONE);                         // out (B*T, C), prepare only
}
static Case case_attention_backward(const Shape* s) {
    Case c = new_case("attention_partial_backward_cuda",
                      kernel_cost_attention_backward(s->B, s->NH, s->HS, s->T), run_attention_backward);
    add_attention_backward_bufs(&c, s);
    return c;
}

// The whole backward of the comparison with SDPA: row-dot, then the two backward kernels.
static void run_attention_backward_full(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    void* const row_dot[3] = {p[6], p[1], p[3]};     // out, dout -> d
    run_attention_row_dot(b, s, c, row_dot);
    run_attention_backward(b, s, c, p);
}
static Case case_attention_backward_full(const Shape* s) {
    Case c = new_case("attention_row_dot_cuda + attention_partial_backward_cuda",
                      kernel_cost_attention_backward(s->B, s->NH, s->HS, s->T), run_attention_backward_full);
    add_attention_backward_bufs(&c, s);
    return c;
}

static void run_attention_merge(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    attention_merge_cuda(s->B, s->NH, s->HS, s->T, F(0), s->C, F(1), F(2), s->C, F(3), b->stream);
}
static Case case_attention_merge(const Shape* s) {
    Case c = new_case("attention_merge_cuda", kernel_cost_attention_merge(s->B, s->NH, s->HS, s->T),
                      run_attention_merge);
    add_buf(&c, ELEM_F32, NC(s), FILL_RANDOM);                    // o_a (B*T, C), merged in place
    add_buf(&c, ELEM_F32, rows_lse(s), FILL_RANDOM);              // lse_a (B, NH, T)
    add_buf(&c, ELEM_F32, NC(s), FILL_RANDOM);                    // o_b (B*T, C)
    add_buf(&c, ELEM_F32, rows_lse(s), FILL_RANDOM);              // lse_b (B, NH, T)
    return c;
}

// LM head loss and optimizer.

static void run_classifier(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    classifier_forward_backward_cuda(X(0), F(1), (const int*)p[2], 1.0f / (float)s->N, s->N, s->V, s->Vp, 1,
                                     b->stream);
}
static Case case_classifier(const Shape* s) {
    Case c = new_case("classifier_forward_backward_cuda", kernel_cost_classifier(s->N, s->V, s->Vp), run_classifier);
    add_buf(&c, ELEM_X, (size_t)s->N * s->Vp, FILL_RANDOM);       // logits (N, Vp), become dlogits
    add_buf(&c, ELEM_F32, s->N, FILL_NONE);                       // losses (N)
    add_buf(&c, ELEM_I32, s->N, FILL_TOKENS);                     // targets (N)
    return c;
}

static void run_adamw(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    const size_t n = s->opt_params;
    const int decays = 1;
    const AdamWTensorTable table = adamw_tensor_table(&n, &decays, 1);
    adamw_update_cuda(X(0), F(1), X(2), F(3), F(4), 0, n, &table, 1, 1e-4, 0.9, 0.95, 1e-8, 0.1, NULL, 1234,
                      b->stream);
}
static Case case_adamw(const Shape* s) {
    const size_t n = s->opt_params;
    Case c = new_case("adamw_update_cuda", kernel_cost_adamw((double)n), run_adamw);
    add_buf(&c, ELEM_X, n, FILL_RANDOM);                          // params (n)
    add_buf(&c, ELEM_F32, n, FILL_RANDOM);                        // master (n) fp32
    add_buf(&c, ELEM_X, n, FILL_RANDOM);                          // grads (n)
    add_buf(&c, ELEM_F32, n, FILL_RANDOM);                        // m (n)
    add_buf(&c, ELEM_F32, n, FILL_POSITIVE);                      // v (n), >= 0
    return c;
}

static void run_global_norm(const Bench* b, const Shape* s, const Case* c, void* const* p) {
    global_norm_squared_cuda((double*)p[0], X(1), s->opt_params, (double*)p[2], 0, b->stream);
}
static Case case_global_norm(const Shape* s) {
    Case c = new_case("global_norm_squared_cuda", kernel_cost_global_norm((double)s->opt_params), run_global_norm);
    add_buf(&c, ELEM_F64, 1, FILL_NONE);                          // out_sumsq
    add_buf(&c, ELEM_X, s->opt_params, FILL_RANDOM);              // grads (n)
    add_buf(&c, ELEM_F64, GLOBAL_NORM_MAX_BLOCKS, FILL_NONE);     // partials
    return c;
}

#undef X
#undef F

// Every launcher of the training step at one shape, in step order.
static int shape_cases(const Shape* s, Case* cases) {
    const int C = s->C;
    int n = 0;
    cases[n++] = case_encoder_forward(s);
    cases[n++] = case_layernorm_forward(s);
    cases[n++] = case_matmul_forward(s, "qkv", C, 3 * C, 1, 0);
    cases[n++] = case_attention_forward(s);
    cases[n++] = case_attention_merge(s);
    cases[n++] = case_matmul_forward(s, "attproj", C, C, 1, 0);
    cases[n++] = case_residual_forward(s);
    cases[n++] = case_fused_residual_layernorm(s);
    cases[n++] = case_matmul_forward(s, "fc+gelu", C, 4 * C, 1, 1);
    cases[n++] = case_gelu_forward(s);
    cases[n++] = case_matmul_forward(s, "fcproj", 4 * C, C, 1, 0);
    cases[n++] = case_matmul_forward(s, "lm_head", C, s->Vp, 0, 0);
    cases[n++] = case_classifier(s);
    cases[n++] = case_matmul_backward(s, "lm_head", C, s->Vp, 0);
    cases[n++] = case_matmul_backward(s, "fcproj", 4 * C, C, 1);
    cases[n++] = case_gelu_backward(s);
    cases[n++] = case_matmul_backward(s, "fc", C, 4 * C, 1);
    cases[n++] = case_layernorm_backward(s);
    cases[n++] = case_matmul_backward(s, "attproj", C, C, 1);
    cases[n++] = case_attention_row_dot(s);
    cases[n++] = case_attention_backward(s);
    cases[n++] = case_matmul_backward(s, "qkv", C, 3 * C, 1);
    cases[n++] = case_encoder_backward(s);
    cases[n++] = case_global_norm(s);
    cases[n++] = case_adamw(s);
    return n;
}

// --- Buffers and timing -------------------------------------------------------------------------

typedef struct {
    int copies;
    void* p[MAX_COPIES][MAX_BUFS];
} CaseBuffers;

static size_t case_alloc_bytes(const Case* c) {
    size_t total = 0;
    for (int i = 0; i < c->nbuf; i++) total += c->count[i] * elem_bytes(c->elem[i]);
    return total;
}

// Copies to rotate among: enough that the calls' bytes over all copies reach twice the L2 size
// (at most MAX_COPIES), and that fit in 80% of the free device memory.
static int case_copies(const Bench* b, const Case* c) {
    const double l2x2 = 2.0 * (double)b->prop.l2CacheSize;
    int copies = 1;
    if (c->cost.bytes < l2x2) copies = (int)ceil(l2x2 / (c->cost.bytes > 1 ? c->cost.bytes : 1));
    if (copies > MAX_COPIES) copies = MAX_COPIES;
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t one = case_alloc_bytes(c);
    while (copies > 1 && (double)one * copies > 0.8 * (double)free_bytes) copies--;
    return copies;
}

static void fill_buffer(const Bench* b, const Shape* s, void* p, Elem e, size_t n, Fill fill,
                        unsigned long long seed) {
    const unsigned int grid = fill_blocks(n);
    const float lo = fill == FILL_POSITIVE ? 0.5f : 0.25f, hi = fill == FILL_POSITIVE ? 1.5f : 1.0f;
    const int signed_values = fill == FILL_RANDOM;
    if (fill == FILL_TOKENS)
        LAUNCH(fill_tokens_kernel, grid, 256, 0, b->stream, (int*)p, n, seed, s->V);
    else if (e == ELEM_X)
        LAUNCH(fill_floatx_kernel, grid, 256, 0, b->stream, (floatX*)p, n, seed, lo, hi, signed_values);
    else if (e == ELEM_F32)
        LAUNCH(fill_float_kernel, grid, 256, 0, b->stream, (float*)p, n, seed, lo, hi, signed_values);
    else
        FAIL("caller bug", "fill of element type %d is not implemented", (int)e);
}

static CaseBuffers alloc_case(const Bench* b, const Shape* s, const Case* c) {
    CaseBuffers cb;
    memset(&cb, 0, sizeof cb);
    cb.copies = case_copies(b, c);
    for (int k = 0; k < cb.copies; k++) {
        for (int i = 0; i < c->nbuf; i++) {
            if (!c->count[i]) continue;
            CUDA_CHECK(cudaMalloc(&cb.p[k][i], c->count[i] * elem_bytes(c->elem[i])));
            if (c->fill[i] != FILL_NONE)
                fill_buffer(b, s, cb.p[k][i], c->elem[i], c->count[i], c->fill[i],
                            (unsigned long long)(k * MAX_BUFS + i + 1));
        }
        if (c->prepare) c->prepare(b, s, c, cb.p[k]);
    }
    CUDA_CHECK(cudaStreamSynchronize(b->stream));
    return cb;
}

static void free_case(CaseBuffers* cb) {
    for (int k = 0; k < cb->copies; k++)
        for (int i = 0; i < MAX_BUFS; i++)
            if (cb->p[k][i]) CUDA_CHECK(cudaFree(cb->p[k][i]));
    memset(cb, 0, sizeof *cb);
}

typedef struct {
    double median_ms, min_ms;
} Timing;

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

// Something to time: call i of a run (warm-up calls first), on the bench's stream.
typedef void (*TimedFn)(const Bench* b, const void* ctx, int i);

// W warm-up calls, then R calls each between its own pair of events; median and min of the R.
static Timing time_calls(const Bench* b, TimedFn fn, const void* ctx) {
    const int R = b->reps;
    cudaEvent_t* ev = (cudaEvent_t*)xcalloc(2 * (size_t)R, sizeof(cudaEvent_t), "timing events");
    double* ms = (double*)xcalloc((size_t)R, sizeof(double), "timings");
    for (int i = 0; i < 2 * R; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < b->warmup; i++) fn(b, ctx, i);
#if !defined(CUDA_HOST)  // the host runtime's streams are synchronous: nothing queues up there
    LAUNCH(delay_kernel, 1, 32, 0, b->stream, b->delay_sink, 1 << 21);
#endif
    for (int r = 0; r < R; r++) {
        CUDA_CHECK(cudaEventRecord(ev[2 * r], b->stream));
        fn(b, ctx, b->warmup + r);
        CUDA_CHECK(cudaEventRecord(ev[2 * r + 1], b->stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(b->stream));
    for (int r = 0; r < R; r++) {
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, ev[2 * r], ev[2 * r + 1]));
        ms[r] = t;
    }
    for (int i = 0; i < 2 * R; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
    qsort(ms, (size_t)R, sizeof(double), cmp_double);
    Timing t;
    t.median_ms = R % 2 ? ms[R / 2] : 0.5 * (ms[R / 2 - 1] + ms[R / 2]);
    t.min_ms = ms[0];
    free(ev);
    free(ms);
    return t;
}

typedef struct {
    const Shape* s;
    const Case* c;
    const CaseBuffers* cb;
} CaseCall;

static void call_case(const Bench* b, const void* ctx, int i) {
    const CaseCall* cc = (const CaseCall*)ctx;
    cc->c->run(b, cc->s, cc->c, cc->cb->p[i % cc->cb->copies]);
}

static Timing time_case(const Bench* b, const Shape* s, const Case* c, int* copies) {
    CaseBuffers cb = alloc_case(b, s, c);
    CaseCall cc = {s, c, &cb};
    const Timing t = time_calls(b, call_case, &cc);
    *copies = cb.copies;
    free_case(&cb);
    return t;
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
    LAUNCH(fill_float_kernel, fill_blocks(bytes / 4), 256, 0, b->stream, (float*)src, bytes / 4, 99ull, 0.25f,
           1.0f, 1);
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
    LAUNCH(fill_floatx_kernel, fill_blocks(elems), 256, 0, b->stream, g.inp, elems, 7ull, 0.25f, 1.0f, 1);
    LAUNCH(fill_floatx_kernel, fill_blocks(elems), 256, 0, b->stream, g.weight, elems, 8ull, 0.25f, 1.0f, 1);
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

static FILE* open_append(const char* flag, const char* path) {
    if (!path) return NULL;
    FILE* f = fopen(path, "a");
    if (!f) usage_error("%s: expected a file that can be opened for appending, found '%s' (%s)", flag, path,
                        strerror(errno));
    return f;
}

static void close_output(const char* flag, FILE* f, const char* path) {
    if (f && fclose(f) != 0) FAIL("check the disk", "%s %s: write failed", flag, path);
}

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
    b.jsonl = open_append("--jsonl", o.jsonl);
    b.md = open_append("--md", o.md);

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
    close_output("--jsonl", b.jsonl, o.jsonl);
    close_output("--md", b.md, o.md);
    printf("done\n");
    return 0;
}
