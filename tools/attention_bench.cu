// attention_bench: times variants of the causal attention, forward and backward, at several shapes
// in one call, with CUDA events, and checks each variant against the current kernels. The numbers
// beside PyTorch's flash and cuDNN SDPA: tools/attention_bench.sh (with tools/attention_bench_sdpa.py).
// Variants, their predictions and their results: attention/cuda_perf_attention.md, "Variants".
//
//   attention_bench [--variants LIST] [--hs LIST] [--T LIST] [--tokens N] [--heads N] [--kv-heads G]
//                   [--reps R] [--warmup W] [--window W] [--documents L] [--csv FILE] [--jsonl FILE]
//                   [--no-check] [--list] [--help]
//
// Built by nvcc alone, from the repository root (or `make attention-bench`: build/attention_bench):
//   nvcc -std=c++17 -O3 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
//        -gencode arch=compute_90,code=compute_90 -I. tools/attention_bench.cu tools/bench_device.cu
//        attention/partial_attention.cu attention/hopper_forward.cu attention/hopper_backward.cu
//        tools/kernel_costs.c model/documents.c comm/fail.c -o build/attention_bench
// (-DGPT_CUDA_FP32 for the fp32 kernels.) It links the CUDA runtime and nothing else.
//
// A shape is (HS, T): B = N / T sequences of T tokens (N = --tokens, default 16384, the GPU kit's),
// NH heads (--heads; default 2048 / HS rounded, but 32 at HS 80: gpt3-2.7b). Q, K, V are read from
// a fused (B*T, W) activation and dQ, dK, dV written into one, as the trainer does (C = NH*HS, W =
// C + 2 KVC: 3C, or with --kv-heads G grouped-query attention's K and V of KVC = G*HS channels,
// which the launchers widen to the query heads around the kernels: its cost is in every row).
// Forward: the variant's forward alone. Backward: the variant's backward, its preprocessing
// (rowsum(dO * O)) included, as SDPA's backward includes its own. TFLOP/s on model FLOPs
// (tools/kernel_costs.c, as the kit): 4*HS (forward) and 10*HS (backward) per visible pair,
// B*NH*T*(T+1)/2 pairs (fewer under --window or --documents: those the mask leaves).
//
// Timing: W warm-up calls, then the median (and min) of R calls, each between its own pair of events,
// queued behind a delay kernel so that they run back to back; inputs rotate among up to 4 copies
// while one call's buffers are under twice the L2 size, so calls read DRAM, not the cache.
// Spot check (unless --no-check): on each shape, every variant runs on the first copy with its outputs
// poisoned (NaN) first, and is compared with the current kernels: max |ours - current| / max |current|
// over O and LSE (fwd) and over each of dQ, dK, dV (bwd); over 2e-2 (bf16; 1e-4 fp32) fails it, and so
// does a NaN or an output left unwritten. A second run must give the same bits (deterministic).
// Exit status 1 when a check failed (after every row is printed), 2 on a bad command line.
#include "attention/partial_attention_cuda.cuh"
#include "model/cuda_precision.cuh"
#include "model/documents.h"
#include "tools/bench_device.cuh"
#include "tools/kernel_costs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_LIST = 24, MAX_COPIES = 4, DIFF_THREADS = 256, DIFF_BLOCKS = 256 };
// The spot check's bound on the relative difference: a few roundings of the storage precision.
static const double TOLERANCE = sizeof(floatX) == 2 ? 2e-2 : 1e-4;

// --- Variants --------------------------------------------------------------------------------------

// One call's buffers (one copy). The forward reads qkv and writes out and lse; the backward reads
// qkv, dout, out and lse, may use d as scratch, and writes every element of dqkv.
typedef struct {
    AttentionProblem p;   // causal: queries and keys at positions 0, 1, 2, ...
    int C, KVC, W;        // NH * HS; NKV * HS (the K and V channels); C + 2 KVC (a qkv row)
    floatX* qkv;          // (B*T, W): Q | K | V per row
    floatX* dout;         // (B*T, C)
    floatX* out;          // (B*T, C)
    float* lse;           // (B, NH, T)
    float* d;             // (B, NH, T)
    floatX* dqkv;         // (B*T, W): dQ | dK | dV per row
} AttnCall;

typedef void (*AttnFn)(const AttnCall* a, cudaStream_t stream);

typedef struct {
    const char* name;
    const char* what;     // --list's line; predictions are in attention/cuda_perf_attention.md
    AttnFn forward, backward;
    int listed;           // 0: test only, run when named
} Variant;

// The trainer's calls (attention/attention_local_cuda.cu).
static void current_forward(const AttnCall* a, cudaStream_t s) {
    const int C = a->C, K = a->KVC, W = a->W;
    attention_forward_cuda(&a->p, a->qkv, W, a->qkv + C, W, a->qkv + C + K, W, a->out, C, a->lse, s);
}
static void current_backward(const AttnCall* a, cudaStream_t s) {
    const int C = a->C, K = a->KVC, W = a->W;
    attention_row_dot_cuda(&a->p, a->out, C, a->dout, C, a->d, s);
    attention_backward_cuda(&a->p, a->qkv, W, a->qkv + C, W, a->qkv + C + K, W, a->dout, C, a->lse, a->d, a->dqkv,
                            W, a->dqkv + C, W, a->dqkv + C + K, W, s);
}

// The trainer's sm_80 backward with one of its launcher settings changed: the launcher reads
// ATTENTION_BWD_KEY_TILE, ATTENTION_BWD_HEAD_GROUP, ATTENTION_BWD_RELEASE and ATTENTION_BWD_LAYOUT
// at each call (attention/partial_attention.cu); ATTENTION_BWD_KERNEL=sm80 keeps the Hopper
// backward (the default where it runs) out of these variants. Each variable gets back the value
// it had (the caller's setting stays in force for `current`).
typedef struct {
    const char* name;
    char old[64];
    int had;
} EnvSave;
static void env_set(EnvSave* e, const char* name, const char* value) {
    const char* v = getenv(name);
    e->name = name;
    e->had = v != NULL;
    snprintf(e->old, sizeof e->old, "%s", v ? v : "");
    CHECK(setenv(name, value, 1) == 0, "check the environment", "setenv %s failed", name);
}
static void env_restore(const EnvSave* e) {
    CHECK((e->had ? setenv(e->name, e->old, 1) : unsetenv(e->name)) == 0, "check the environment",
          "restoring %s failed", e->name);
}
static void backward_with_env(const AttnCall* a, cudaStream_t s, const char* name, const char* value) {
    EnvSave kernel, knob;
    env_set(&kernel, "ATTENTION_BWD_KERNEL", "sm80");
    env_set(&knob, name, value);   // (ATTENTION_BWD_KERNEL itself for the sm80 and sm90 variants)
    current_backward(a, s);
    env_restore(&knob);
    env_restore(&kernel);
}
static void forward_with_env(const AttnCall* a, cudaStream_t s, const char* name, const char* value) {
    EnvSave knob;
    env_set(&knob, name, value);
    current_forward(a, s);
    env_restore(&knob);
}
// The sm_80 kernels everywhere (an A100's; on an H100 or H200 what ran before the Hopper kernels).
static void sm80_forward(const AttnCall* a, cudaStream_t s) { forward_with_env(a, s, "ATTENTION_FWD_KERNEL", "sm80"); }
static void sm80_backward(const AttnCall* a, cudaStream_t s) { backward_with_env(a, s, "ATTENTION_BWD_KERNEL", "sm80"); }
// Key tiles of 64 (4 warps per block) instead of the default 128.
static void bk64_backward(const AttnCall* a, cudaStream_t s) { backward_with_env(a, s, "ATTENTION_BWD_KEY_TILE", "64"); }
// Blocks of 4 heads at a time instead of 1.
static void group4_backward(const AttnCall* a, cudaStream_t s) {
    backward_with_env(a, s, "ATTENTION_BWD_HEAD_GROUP", "4");
}
// A query tile's dQ turn passed on at the next query tile (the fence then finds the adds done).
static void lagged_backward(const AttnCall* a, cudaStream_t s) {
    backward_with_env(a, s, "ATTENTION_BWD_RELEASE", "lagged");
}
// FlashAttention-2's warp layout in the backward (HS 64 and 128; the default layout elsewhere).
static void fa2_backward(const AttnCall* a, cudaStream_t s) { backward_with_env(a, s, "ATTENTION_BWD_LAYOUT", "fa2"); }
// Every head's block of one key tile together (the order before the head groups).
static void heads_inner_backward(const AttnCall* a, cudaStream_t s) {
    backward_with_env(a, s, "ATTENTION_BWD_HEAD_GROUP", "1000000");
}

// The Hopper kernels where they run (attention/hopper_forward.cuh, hopper_backward.cuh): auto.
static void hopper_backward(const AttnCall* a, cudaStream_t s) { backward_with_env(a, s, "ATTENTION_BWD_KERNEL", "auto"); }
static void hopper_forward(const AttnCall* a, cudaStream_t s) { forward_with_env(a, s, "ATTENTION_FWD_KERNEL", "auto"); }
// The Hopper kernels with one of their launcher settings (hopper_forward.cuh, hopper_backward.cuh)
// changed, for one pass; each gets back the value it had.
static void hopper_forward_with(const AttnCall* a, cudaStream_t s, const char* name, const char* value) {
    EnvSave knob;
    env_set(&knob, name, value);
    hopper_forward(a, s);
    env_restore(&knob);
}
static void hopper_backward_with(const AttnCall* a, cudaStream_t s, const char* name, const char* value) {
    EnvSave knob;
    env_set(&knob, name, value);
    hopper_backward(a, s);
    env_restore(&knob);
}
// One form each: the forward's S by one m64n128k16 per 128 keys (ATTENTION_FWD_HOPPER=n128); at HS
// 64 192-row tiles of three consumer warpgroups (ATTENTION_FWD_HOPPER_ROWS=192); the backward's
// GEMMs overlapped and at HS 64 K, V in registers (ATTENTION_BWD_HOPPER=regs: the same bits as its
// default).
static void hopper_n128_forward(const AttnCall* a, cudaStream_t s) {
    hopper_forward_with(a, s, "ATTENTION_FWD_HOPPER", "n128");
}
static void hopper_rows192_forward(const AttnCall* a, cudaStream_t s) {
    hopper_forward_with(a, s, "ATTENTION_FWD_HOPPER_ROWS", "192");
}
// The forward's persistent grid: a block per SM taking tile after tile (ATTENTION_FWD_HOPPER_GRID).
static void hopper_persistent_forward(const AttnCall* a, cudaStream_t s) {
    hopper_forward_with(a, s, "ATTENTION_FWD_HOPPER_GRID", "persistent");
}
static void hopper_regs_backward(const AttnCall* a, cudaStream_t s) {
    hopper_backward_with(a, s, "ATTENTION_BWD_HOPPER", "regs");
}
// regs, and the next query tile's S^T issued behind this one's dQ (ATTENTION_BWD_HOPPER=early).
static void hopper_early_backward(const AttnCall* a, cudaStream_t s) {
    hopper_backward_with(a, s, "ATTENTION_BWD_HOPPER", "early");
}
// early, and at HS 64 the consumers taking turns at the GEMMs (ATTENTION_BWD_HOPPER=pingpong).
static void hopper_pingpong_backward(const AttnCall* a, cudaStream_t s) {
    hopper_backward_with(a, s, "ATTENTION_BWD_HOPPER", "pingpong");
}
// early with two dS^T buffers: no barrier of both consumers after dQ (ATTENTION_BWD_HOPPER=ds2).
static void hopper_ds2_backward(const AttnCall* a, cudaStream_t s) {
    hopper_backward_with(a, s, "ATTENTION_BWD_HOPPER", "ds2");
}
// Overlap with 128-query tiles at HS 64 (ATTENTION_BWD_HOPPER=q128; overlap elsewhere).
static void hopper_q128_backward(const AttnCall* a, cudaStream_t s) {
    hopper_backward_with(a, s, "ATTENTION_BWD_HOPPER", "q128");
}
// At HS 80 the GEMMs over the head's columns (P V; dV, dK) by one m64n80k16 (ATTENTION_HOPPER_HS80=exact).
static void hopper_hs80_forward(const AttnCall* a, cudaStream_t s) {
    hopper_forward_with(a, s, "ATTENTION_HOPPER_HS80", "exact");
}
static void hopper_hs80_backward(const AttnCall* a, cudaStream_t s) {
    hopper_backward_with(a, s, "ATTENTION_HOPPER_HS80", "exact");
}
// All of them together: the Hopper kernels' next forms.
static void hopper_next_forward(const AttnCall* a, cudaStream_t s) {
    EnvSave rows, hs80, grid;
    env_set(&rows, "ATTENTION_FWD_HOPPER_ROWS", "192");
    env_set(&hs80, "ATTENTION_HOPPER_HS80", "exact");
    env_set(&grid, "ATTENTION_FWD_HOPPER_GRID", "persistent");
    hopper_n128_forward(a, s);
    env_restore(&grid);
    env_restore(&hs80);
    env_restore(&rows);
}
static void hopper_next_backward(const AttnCall* a, cudaStream_t s) {
    EnvSave hs80;
    env_set(&hs80, "ATTENTION_HOPPER_HS80", "exact");
    hopper_pingpong_backward(a, s);
    env_restore(&hs80);
}

// A broken variant for the tests: the current kernels with the first row of the output
// overwritten (0x60 bytes: about 6.5e19), which the spot check must catch.
static void mutant_forward(const AttnCall* a, cudaStream_t s) {
    current_forward(a, s);
    CUDA_CHECK(cudaMemsetAsync(a->out, 0x60, (size_t)a->C * sizeof(floatX), s));
}
static void mutant_backward(const AttnCall* a, cudaStream_t s) {
    current_backward(a, s);
    CUDA_CHECK(cudaMemsetAsync(a->dqkv, 0x60, 3 * (size_t)a->C * sizeof(floatX), s));
}

// A new variant is one line: its name, a description, its forward and backward launchers.
// The first is the reference of the spot check.
static const Variant VARIANTS[] = {
    {"current", "the trainer's kernels: attention_forward_cuda; attention_row_dot_cuda + attention_backward_cuda "
     "(on an H100 or H200 the Hopper kernels for HS 64, 80 and 128, else the sm_80 ones)", current_forward,
     current_backward, 1},
    {"sm80", "the sm_80 kernels everywhere (ATTENTION_FWD_KERNEL=sm80, ATTENTION_BWD_KERNEL=sm80; the variants "
     "below change the sm_80 backward)", sm80_forward, sm80_backward, 1},
    {"bk64", "sm80 with the backward's key tiles of 64 (4 warps) instead of 128 (8 warps)", sm80_forward,
     bk64_backward, 1},
    {"group4", "sm80 with the backward's blocks in groups of 4 heads (key tiles outer within a group) instead of 1",
     sm80_forward, group4_backward, 1},
    {"fa2", "sm80 with the backward in FlashAttention-2's warp layout (2 x 4 warps of 32 x 32 for S and dP, P "
     "and dS through shared memory; HS 64 and 128)", sm80_forward, fa2_backward, 1},
    {"lagged", "sm80 with each query tile's dQ turn passed on one query tile later (on causal diagonals)",
     sm80_forward, lagged_backward, 1},
    {"heads-inner", "sm80 with every head's block of one key tile together (one group of all heads)",
     sm80_forward, heads_inner_backward, 1},
    {"sm90", "the Hopper kernels (TMA, wgmma, a producer and two consumer warpgroups; HS 64, 80 (padded to 128) and 128) where they run "
     "(compute capability 9.0, sm_90a build), named: ATTENTION_*_KERNEL=auto, the default, so current's kernels",
     hopper_forward,
     hopper_backward, 1},
    {"sm90-next", "sm90 in the forms to time next: the forward's S by one m64n128k16 per 128 keys "
     "(ATTENTION_FWD_HOPPER=n128) and at HS 64 192-row tiles of three consumer warpgroups "
     "(ATTENTION_FWD_HOPPER_ROWS=192) on the persistent grid (ATTENTION_FWD_HOPPER_GRID=persistent), "
     "at HS 80 P V, dV and dK by one m64n80k16 (ATTENTION_HOPPER_HS80=exact), the backward's GEMMs overlapped inside each consumer warpgroup (P^T computed while "
     "dP^T is in flight, dQ issued behind dK and dV), at HS 64 K and V as register operands, "
     "the next query tile's S^T issued behind dQ and at HS 64 the consumers taking turns at the GEMMs "
     "(ATTENTION_BWD_HOPPER=pingpong)", hopper_next_forward,
     hopper_next_backward, 1},
    {"sm90-n128", "sm90 with sm90-next's first form alone: the forward's S by one m64n128k16 per 128 keys",
     hopper_n128_forward, hopper_backward, 1},
    {"sm90-rows192", "sm90 with sm90-next's second form alone: the forward's HS 64 tiles of 192 rows, three consumers",
     hopper_rows192_forward, hopper_backward, 1},
    {"sm90-persistent", "sm90 with sm90-next's persistent grid alone: a forward block per SM, the next tile's loads "
     "under this one's epilogue", hopper_persistent_forward, hopper_backward, 1},
    {"sm90-hs80", "sm90 with sm90-next's third form alone: at HS 80 P V, dV and dK by one m64n80k16",
     hopper_hs80_forward, hopper_hs80_backward, 1},
    {"sm90-regs", "sm90 with the backward's regs schedule (early without the next S^T issued early)",
     hopper_forward, hopper_regs_backward, 1},
    {"sm90-early", "sm90 with the backward's early schedule (sm90-next's pingpong without the turns at HS 64)",
     hopper_forward, hopper_early_backward, 1},
    {"sm90-pingpong", "sm90 with sm90-next's fourth form alone: the backward's pingpong schedule", hopper_forward,
     hopper_pingpong_backward, 1},
    {"sm90-ds2", "sm90 with the backward's ds2 schedule: early with two dS^T buffers, the consumers meeting once "
     "a query tile instead of twice (FlashAttention-3's two dS stages)", hopper_forward, hopper_ds2_backward, 1},
    {"sm90-q128", "sm90 with the backward's q128 form: overlap, at HS 64 in tiles of 128 queries (each consumer's "
     "dQ its own 64 queries over all 128 keys, no partial sums)", hopper_forward, hopper_q128_backward, 1},
    {"mutant", "test only: current with the first row of O and of dQKV overwritten (the spot check must fail it)",
     mutant_forward, mutant_backward, 0},
};
static const int NVARIANTS = (int)(sizeof VARIANTS / sizeof VARIANTS[0]);
static_assert(sizeof VARIANTS / sizeof VARIANTS[0] <= MAX_LIST, "the default list (every listed variant) fits");

// --- Command line ----------------------------------------------------------------------------------

typedef struct {
    int variant[MAX_LIST], nvariant;
    int hs[MAX_LIST], nhs;
    int T[MAX_LIST], nT;
    int tokens, heads, reps, warmup, check;
    int kv_heads;   // 0: one key/value head per head; G: grouped-query attention (dividing the heads)
    int window;   // 0: causal; W: sliding-window attention (AttentionProblem.window)
    int documents;   // 0: none; L: document masking, documents of L tokens (AttentionProblem.docs)
    const char* csv;
    const char* jsonl;
} Options;

static const char* const USAGE =
    "usage: attention_bench [--variants LIST] [--hs LIST] [--T LIST] [--tokens N] [--heads N] [--kv-heads G]\n"
    "                       [--reps R] [--warmup W] [--window W] [--documents L] [--csv FILE] [--jsonl FILE]\n"
    "                       [--no-check] [--list] [--help]\n"
    "Times causal attention variants (forward; backward with its row-dot) at every (HS, T), B = N / T.\n"
    "  --variants LIST  comma-separated names (default: every listed variant; --list shows them)\n"
    "  --hs LIST        head sizes, each a multiple of 16 in [16, 128] but 112 (default 64,80,128)\n"
    "  --T LIST         sequence lengths, each dividing N (default 1024,2048,4096,8192,16384)\n"
    "  --tokens N       B*T tokens per call (default 16384)\n"
    "  --heads N        heads per sequence (default 2048/HS rounded; 32 at HS 80, gpt3-2.7b)\n"
    "  --kv-heads G     grouped-query attention: G key/value heads, dividing every shape's heads (default 0:\n"
    "                   one per head); the launchers widen K and V around the kernels, timed with them\n"
    "  --reps R         timed calls, median and min reported (default 20)\n"
    "  --warmup W       untimed calls first (default 3)\n"
    "  --window W       sliding-window attention, a query at t seeing t-W+1 .. t (default 0: causal); the\n"
    "                   variants that serve it only (not fa2, and of the Hopper ones sm90 and sm90-hs80: the\n"
    "                   other forms are causal only), TFLOP/s on its pairs\n"
    "  --documents L    document masking, every sequence packed with documents of L tokens (a query sees its\n"
    "                   own document's keys only; default 0: none); the variants --window allows, TFLOP/s on\n"
    "                   the pairs left\n"
    "  --csv FILE       one row per (variant, shape), the columns of tools/attention_bench_sdpa.py\n"
    "  --jsonl FILE     the same as JSON objects, one per line\n"
    "  --no-check       no spot check against the current kernels\n"
    "  --list           the variants, then exit\n";

static int parse_int(const char* flag, const char* s, long lo, long hi) {
    char* end = NULL;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        usage_error("%s: expected an integer in [%ld, %ld], found '%s'", flag, lo, hi, s);
    return (int)v;
}

// Comma-separated integers in [lo, hi]; returns how many.
static int parse_int_list(const char* flag, const char* text, int* out, long lo, long hi) {
    char buf[512];
    if (strlen(text) >= sizeof buf)
        usage_error("%s: expected at most %zu characters, found '%s'", flag, sizeof buf - 1, text);
    strcpy(buf, text);
    int n = 0;
    for (char* item = strtok(buf, ","); item; item = strtok(NULL, ",")) {
        if (n == MAX_LIST) usage_error("%s: expected at most %d items, found '%s'", flag, MAX_LIST, text);
        out[n++] = parse_int(flag, item, lo, hi);
    }
    if (!n) usage_error("%s: expected comma-separated integers, found '%s'", flag, text);
    return n;
}

static int find_variant(const char* name) {
    for (int i = 0; i < NVARIANTS; i++)
        if (!strcmp(VARIANTS[i].name, name)) return i;
    return -1;
}

static void parse_variants(const char* text, Options* o) {
    char buf[512], names[256] = "";
    for (int i = 0; i < NVARIANTS; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", VARIANTS[i].name);
    if (strlen(text) >= sizeof buf) usage_error("--variants: expected names from %s, found '%s'", names, text);
    strcpy(buf, text);
    o->nvariant = 0;
    for (char* item = strtok(buf, ","); item; item = strtok(NULL, ",")) {
        const int v = find_variant(item);
        if (v < 0) usage_error("--variants: expected names from %s, found '%s'", names, item);
        if (o->nvariant == MAX_LIST) usage_error("--variants: expected at most %d names, found '%s'", MAX_LIST, text);
        o->variant[o->nvariant++] = v;
    }
    if (!o->nvariant) usage_error("--variants: expected names from %s, found '%s'", names, text);
}

static void list_variants(void) {
    for (int i = 0; i < NVARIANTS; i++) printf("%-10s %s\n", VARIANTS[i].name, VARIANTS[i].what);
    exit(0);
}

// Whether a variant's kernels serve sliding windows: the FA2-layout backward is causal only
// (partial_attention.cu sends windowed calls to the sm_80 key-tile kernels), and the Hopper kernels
// serve them in their default form only (ATTENTION_HOPPER_HS80 honoured: sm90 and sm90-hs80), so
// under --window the other variants would time other kernels than their names say. The same for
// document masks.
static int variant_takes_window(const Variant* v) {
    if (!strncmp(v->name, "sm90", 4)) return !strcmp(v->name, "sm90") || !strcmp(v->name, "sm90-hs80");
    return strcmp(v->name, "fa2") != 0;
}

// The head sizes of the kernels (attention/partial_attention_cuda.cuh): 16, 32, ..., 96, 128.
static int head_size_supported(int HS) { return HS % 16 == 0 && HS >= 16 && HS <= 128 && HS != 112; }

static Options parse_options(int argc, char** argv) {
    Options o;
    memset(&o, 0, sizeof o);
    o.tokens = 16384, o.reps = 20, o.warmup = 3, o.check = 1;
    const char* variants = NULL;
    const char* hs = "64,80,128";
    const char* T = "1024,2048,4096,8192,16384";
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (!strcmp(a, "--list")) list_variants();
        if (!strcmp(a, "--no-check")) {
            o.check = 0;
            continue;
        }
        const char* const valued[] = {"--variants", "--hs", "--T",      "--tokens",    "--heads", "--kv-heads",
                                      "--reps",     "--warmup", "--window", "--documents", "--csv",   "--jsonl"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(a, valued[k]);
        if (!known)
            usage_error("unknown option '%s' (expected one of --variants --hs --T --tokens --heads --kv-heads --reps "
                        "--warmup --window --documents --csv --jsonl --no-check --list --help)", a);
        if (i + 1 >= argc) usage_error("%s: expected a value, found the end of the command line", a);
        const char* v = argv[++i];
        if (!v[0]) usage_error("%s: expected a value, found an empty string", a);
        if (!strcmp(a, "--variants")) variants = v;
        else if (!strcmp(a, "--hs")) hs = v;
        else if (!strcmp(a, "--T")) T = v;
        else if (!strcmp(a, "--tokens")) o.tokens = parse_int(a, v, 1, 1 << 22);
        else if (!strcmp(a, "--heads")) o.heads = parse_int(a, v, 1, 65535);
        else if (!strcmp(a, "--kv-heads")) o.kv_heads = parse_int(a, v, 0, 65535);
        else if (!strcmp(a, "--reps")) o.reps = parse_int(a, v, 1, 100000);
        else if (!strcmp(a, "--warmup")) o.warmup = parse_int(a, v, 0, 100000);
        else if (!strcmp(a, "--window")) o.window = parse_int(a, v, 0, 1 << 22);
        else if (!strcmp(a, "--documents")) o.documents = parse_int(a, v, 0, 1 << 22);
        else if (!strcmp(a, "--csv")) o.csv = v;
        else o.jsonl = v;
    }
    if (variants) {
        parse_variants(variants, &o);
        for (int i = 0; (o.window || o.documents) && i < o.nvariant; i++)
            if (!variant_takes_window(&VARIANTS[o.variant[i]]))
                usage_error("--variants %s: its kernels serve causal calls only (a window or a document mask runs "
                            "current, sm80 and its backward variants but fa2, sm90 and sm90-hs80), found it with "
                            "--%s %d", VARIANTS[o.variant[i]].name, o.window ? "window" : "documents",
                            o.window ? o.window : o.documents);
    } else {
        const int lower_bound = o.window || o.documents;
        for (int i = 0; i < NVARIANTS; i++)
            if (VARIANTS[i].listed && (!lower_bound || variant_takes_window(&VARIANTS[i]))) o.variant[o.nvariant++] = i;
    }
    o.nhs = parse_int_list("--hs", hs, o.hs, 1, 1 << 20);
    for (int i = 0; i < o.nhs; i++)
        if (!head_size_supported(o.hs[i]))
            usage_error("--hs: expected head sizes from 16, 32, 48, 64, 80, 96, 128, found '%d'", o.hs[i]);
    o.nT = parse_int_list("--T", T, o.T, 1, 1 << 22);
    for (int i = 0; i < o.nT; i++)
        if (o.tokens % o.T[i])
            usage_error("--T: expected lengths dividing --tokens N = %d (B = N / T), found '%d'", o.tokens, o.T[i]);
    return o;
}

// --- Output ----------------------------------------------------------------------------------------

// The columns of the CSV (and the keys of the JSON lines), shared with tools/attention_bench_sdpa.py.
static const char* const CSV_HEADER = "source,variant,dtype,HS,T,B,NH,fwd_ms,fwd_min_ms,bwd_ms,bwd_min_ms,"
                                      "fwd_tflops,bwd_tflops,fwd_err,bwd_err,deterministic,status";

typedef struct {
    const char* variant;
    int HS, T, B, NH;
    int window, documents;     // (JSON lines only: the CSV keeps the SDPA script's columns)
    Timing fwd, bwd;
    double fwd_tflops, bwd_tflops;
    double fwd_err, bwd_err;   // NAN: not checked
    int deterministic;         // -1: not checked
    const char* status;
} Row;

// A number as CSV ("" when unknown) or JSON (null when unknown).
static void put_num(FILE* f, const char* key, double v, const char* fmt) {
    if (key) fprintf(f, ",\"%s\":", key);
    else fputc(',', f);
    if (isfinite(v)) fprintf(f, fmt, v);
    else if (key) fputs("null", f);
}

static void write_row(FILE* csv, FILE* jsonl, const Row* r) {
    for (int j = 0; j < 2; j++) {
        FILE* f = j ? jsonl : csv;
        if (!f) continue;
        const char* k[10] = {NULL};
        if (j) {
            const char* keys[10] = {"fwd_ms", "fwd_min_ms", "bwd_ms", "bwd_min_ms", "fwd_tflops", "bwd_tflops",
                                    "fwd_err", "bwd_err"};
            memcpy(k, keys, sizeof keys);
            fprintf(f, "{\"type\":\"attention_bench\",\"source\":\"ours\",\"variant\":\"%s\",\"dtype\":\"%s\","
                       "\"HS\":%d,\"T\":%d,\"B\":%d,\"NH\":%d,\"window\":%d,\"documents\":%d", r->variant, FLOATX_NAME,
                    r->HS, r->T, r->B, r->NH, r->window, r->documents);
        } else {
            fprintf(f, "ours,%s,%s,%d,%d,%d,%d", r->variant, FLOATX_NAME, r->HS, r->T, r->B, r->NH);
        }
        put_num(f, k[0], r->fwd.median_ms, "%.5f");
        put_num(f, k[1], r->fwd.min_ms, "%.5f");
        put_num(f, k[2], r->bwd.median_ms, "%.5f");
        put_num(f, k[3], r->bwd.min_ms, "%.5f");
        put_num(f, k[4], r->fwd_tflops, "%.4g");
        put_num(f, k[5], r->bwd_tflops, "%.4g");
        put_num(f, k[6], r->fwd_err, "%.3g");
        put_num(f, k[7], r->bwd_err, "%.3g");
        if (j) {
            fprintf(f, ",\"deterministic\":%s,\"status\":\"%s\"}\n",
                    r->deterministic < 0 ? "null" : r->deterministic ? "true" : "false", r->status);
        } else {
            fprintf(f, ",%s,%s\n", r->deterministic < 0 ? "" : r->deterministic ? "yes" : "no", r->status);
        }
        fflush(f);
    }
}

static const char* err_text(char* buf, size_t n, double v) {
    if (isnan(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.2g", v);
    return buf;
}

static void print_row(const Row* r) {
    char bxnh[32], fe[16], be[16];
    snprintf(bxnh, sizeof bxnh, "%d x %d", r->B, r->NH);
    printf("%-10s %4d %6d %9s %9.4g %8.1f %9.4g %8.1f %8s %8s %4s  %s\n", r->variant, r->HS, r->T, bxnh,
           r->fwd.median_ms, r->fwd_tflops, r->bwd.median_ms, r->bwd_tflops, err_text(fe, sizeof fe, r->fwd_err),
           err_text(be, sizeof be, r->bwd_err), r->deterministic < 0 ? "-" : r->deterministic ? "yes" : "NO",
           r->status);
    fflush(stdout);
}

// --- Buffers, check and timing ----------------------------------------------------------------------

typedef struct {
    cudaStream_t stream;
    cudaDeviceProp prop;
    float* sink;          // the delay kernel's
    float* partial;       // the difference kernel's per-block maxima (2 * DIFF_BLOCKS)
} Bench;

static int default_heads(int HS) {
    return HS == 80 ? 32 : (2048 + HS / 2) / HS;
}

static size_t call_bytes(const AttnCall* a) {
    const size_t tokens = (size_t)a->p.B * a->p.Tq, rows = (size_t)a->p.B * a->p.NH * a->p.Tq;
    return tokens * (2 * a->W + 2 * a->C) * sizeof(floatX) + 2 * rows * sizeof(float);
}

static void* device_alloc(size_t bytes) {
    void* p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
}

// The problem and row widths of a shape (NKV key/value heads).
static AttnCall call_shape(int B, int NH, int NKV, int HS, int T, int window, DocumentBounds docs) {
    AttnCall a;
    memset(&a, 0, sizeof a);
    a.p = attention_problem(B, NH, HS, T, T, token_positions(0, 1), token_positions(0, 1));
    a.p.NKV = NKV;
    a.p.window = window;
    a.p.docs = docs;
    a.C = NH * HS, a.KVC = NKV * HS, a.W = a.C + 2 * a.KVC;
    return a;
}

static AttnCall alloc_call(const Bench* b, int B, int NH, int NKV, int HS, int T, int window, DocumentBounds docs,
                           unsigned long long seed) {
    AttnCall a = call_shape(B, NH, NKV, HS, T, window, docs);
    const size_t tokens = (size_t)B * T, n = tokens * a.C, rows = (size_t)B * NH * T;
    a.qkv = (floatX*)device_alloc(tokens * a.W * sizeof(floatX));
    a.dout = (floatX*)device_alloc(n * sizeof(floatX));
    a.out = (floatX*)device_alloc(n * sizeof(floatX));
    a.dqkv = (floatX*)device_alloc(tokens * a.W * sizeof(floatX));
    a.lse = (float*)device_alloc(rows * sizeof(float));
    a.d = (float*)device_alloc(rows * sizeof(float));
    // As the kit's fills: |x| in [0.25, 1), random signs.
    bench_fill_floatx(a.qkv, tokens * a.W, seed, 0.25f, 1.0f, 1, b->stream);
    bench_fill_floatx(a.dout, n, seed + 1, 0.25f, 1.0f, 1, b->stream);
    return a;
}

static void free_call(AttnCall* a) {
    void* p[6] = {a->qkv, a->dout, a->out, a->dqkv, a->lse, a->d};
    for (int i = 0; i < 6; i++) CUDA_CHECK(cudaFree(p[i]));
    memset(a, 0, sizeof *a);
}

// Copies to rotate among: their bytes reach twice the L2 size (at most MAX_COPIES), within 80% of
// the free memory with `extra` more copies (the check's).
static int call_copies(const Bench* b, size_t bytes, int extra) {
    const double l2x2 = 2.0 * (double)b->prop.l2CacheSize;
    int copies = (double)bytes < l2x2 ? (int)ceil(l2x2 / (double)(bytes > 0 ? bytes : 1)) : 1;
    if (copies > MAX_COPIES) copies = MAX_COPIES;
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    while (copies > 1 && (double)bytes * (copies + extra) > 0.8 * (double)free_bytes) copies--;
    return copies;
}

// Per block: max |a - b| (NaN counts as infinite) and max |b| over rows x cols elements of rows
// ld apart.
template <typename T>
__global__ void __launch_bounds__(DIFF_THREADS)
diff_kernel(const T* a, const T* b, long long rows, int cols, long long ld, float* partial) {
    __shared__ float sd[DIFF_THREADS], sb[DIFF_THREADS];
    float md = 0.0f, mb = 0.0f;
    const long long n = rows * cols;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const long long i = (e / cols) * ld + e % cols;
        const float x = to_float(a[i]), y = to_float(b[i]);
        float d = fabsf(x - y);
        if (!(d <= INFINITY)) d = INFINITY;
        md = fmaxf(md, d);
        mb = fmaxf(mb, fabsf(y));
    }
    sd[threadIdx.x] = md, sb[threadIdx.x] = mb;
    __syncthreads();
    for (int s = DIFF_THREADS / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s) {
            sd[threadIdx.x] = fmaxf(sd[threadIdx.x], sd[threadIdx.x + s]);
            sb[threadIdx.x] = fmaxf(sb[threadIdx.x], sb[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[2 * blockIdx.x] = sd[0], partial[2 * blockIdx.x + 1] = sb[0];
}

// max |a - b| / max |b|: 0 for identical values, infinite for a NaN or a nonzero a against b = 0.
template <typename T>
static double max_rel_diff(const Bench* b, const T* x, const T* ref, long long rows, int cols, long long ld) {
    // At most one block per DIFF_THREADS elements: no block without work (small shapes).
    const long long n = rows * cols;
    const long long need = (n + DIFF_THREADS - 1) / DIFF_THREADS;
    const int blocks = need < 1 ? 1 : need < DIFF_BLOCKS ? (int)need : DIFF_BLOCKS;
    LAUNCH(diff_kernel<T>, blocks, DIFF_THREADS, 0, b->stream, x, ref, rows, cols, ld, b->partial);
    float h[2 * DIFF_BLOCKS];
    CUDA_CHECK(cudaMemcpyAsync(h, b->partial, sizeof(float) * 2 * blocks, cudaMemcpyDeviceToHost, b->stream));
    CUDA_CHECK(cudaStreamSynchronize(b->stream));
    double md = 0, mb = 0;
    for (int i = 0; i < blocks; i++) md = fmax(md, h[2 * i]), mb = fmax(mb, h[2 * i + 1]);
    if (md == 0) return 0;
    return mb > 0 ? md / mb : INFINITY;
}

// Forward (O, LSE) and backward (worst of dQ, dK, dV) differences of x's outputs from ref's.
static void call_diff(const Bench* b, const AttnCall* x, const AttnCall* ref, double* fwd, double* bwd) {
    const long long rows = (long long)x->p.B * x->p.Tq, lse_rows = rows * x->p.NH;
    const int C = x->C, K = x->KVC, W = x->W;
    *fwd = fmax(max_rel_diff(b, x->out, ref->out, rows, C, C), max_rel_diff(b, x->lse, ref->lse, lse_rows, 1, 1));
    *bwd = 0;
    for (int part = 0; part < 3; part++) {   // dQ (C columns), dK and dV (KVC each)
        const int col = part == 0 ? 0 : C + (part - 1) * K, w = part == 0 ? C : K;
        *bwd = fmax(*bwd, max_rel_diff(b, x->dqkv + col, ref->dqkv + col, rows, w, W));
    }
}

// Every output of a call set to NaN (0xFF bytes), so that an output a variant leaves unwritten fails.
static void poison(const Bench* b, const AttnCall* a) {
    const size_t tokens = (size_t)a->p.B * a->p.Tq, rows = (size_t)a->p.B * a->p.NH * a->p.Tq;
    CUDA_CHECK(cudaMemsetAsync(a->out, 0xFF, tokens * a->C * sizeof(floatX), b->stream));
    CUDA_CHECK(cudaMemsetAsync(a->dqkv, 0xFF, tokens * a->W * sizeof(floatX), b->stream));
    CUDA_CHECK(cudaMemsetAsync(a->lse, 0xFF, rows * sizeof(float), b->stream));
    CUDA_CHECK(cudaMemsetAsync(a->d, 0xFF, rows * sizeof(float), b->stream));
}

// The outputs of one call (out, lse, dqkv) copied into another's.
static void copy_outputs(const Bench* b, const AttnCall* dst, const AttnCall* src) {
    const size_t tokens = (size_t)src->p.B * src->p.Tq, rows = (size_t)src->p.B * src->p.NH * src->p.Tq;
    CUDA_CHECK(cudaMemcpyAsync(dst->out, src->out, tokens * src->C * sizeof(floatX), cudaMemcpyDeviceToDevice,
                               b->stream));
    CUDA_CHECK(cudaMemcpyAsync(dst->dqkv, src->dqkv, tokens * src->W * sizeof(floatX), cudaMemcpyDeviceToDevice,
                               b->stream));
    CUDA_CHECK(cudaMemcpyAsync(dst->lse, src->lse, rows * sizeof(float), cudaMemcpyDeviceToDevice, b->stream));
}

static void run_both(const Bench* b, const Variant* v, const AttnCall* a) {
    poison(b, a);
    v->forward(a, b->stream);
    v->backward(a, b->stream);
}

typedef struct {
    const Bench* b;
    const Variant* v;
    const AttnCall* calls;
    int copies, backward;
} TimedCall;

static void timed_call(const void* ctx, int i) {
    const TimedCall* t = (const TimedCall*)ctx;
    const AttnCall* a = &t->calls[i % t->copies];
    (t->backward ? t->v->backward : t->v->forward)(a, t->b->stream);
}

// Document masking with documents of L tokens: the bounds (model/documents.h) of B sequences of T
// tokens, on the device; docs.start NULL when L is 0. *pairs: the (query, key) pairs one sequence
// leaves under those documents and a window W (0: none).
static DocumentBounds documents_of(int B, int T, int L, int W, double* pairs) {
    DocumentBounds docs;
    memset(&docs, 0, sizeof docs);
    *pairs = document_pairs(NULL, 1, T, W);
    if (!L) return docs;
    const size_t n = (size_t)B * T;
    int* tokens = (int*)malloc(n * sizeof(int));
    int* bounds = (int*)malloc(2 * n * sizeof(int));
    if (!tokens || !bounds) fail_msg("out of host memory for %zu document bounds", n);
    for (size_t i = 0; i < n; i++) tokens[i] = (int)(i % (size_t)T) % L == 0;
    document_bounds(tokens, B, T, 1, bounds, bounds + n);
    *pairs = document_pairs(bounds, 1, T, W);   // the B rows are alike
    int* dev = (int*)device_alloc(2 * n * sizeof(int));
    CUDA_CHECK(cudaMemcpy(dev, bounds, 2 * n * sizeof(int), cudaMemcpyHostToDevice));
    free(tokens);
    free(bounds);
    docs.start = dev, docs.end = dev + n, docs.T = T;
    return docs;
}

// One shape: the reference outputs, then every variant checked and timed. Returns the failed checks.
static int run_shape(const Bench* b, const Options* o, int HS, int T, FILE* csv, FILE* jsonl) {
    const int B = o->tokens / T, NH = o->heads ? o->heads : default_heads(HS);
    const int NKV = o->kv_heads ? o->kv_heads : NH;
    if (NH % NKV) usage_error("--kv-heads %d: expected a divisor of the %d heads at HS %d", NKV, NH, HS);
    AttnCall calls[MAX_COPIES], ref, run1;
    DocumentBounds none;
    memset(&none, 0, sizeof none);
    const AttnCall probe = call_shape(B, NH, NKV, HS, T, 0, none);
    const int copies = call_copies(b, call_bytes(&probe), o->check ? 2 : 0);
    double pairs;
    const DocumentBounds docs = documents_of(B, T, o->documents, o->window, &pairs);
    for (int k = 0; k < copies; k++)
        calls[k] = alloc_call(b, B, NH, NKV, HS, T, o->window, docs, 1000ull * (k + 1));
    // Model FLOPs per visible pair: a window's or document mask's share of the causal pairs.
    const double share = pairs / (T * (T + 1.0) / 2);
    const double fwd_flops = kernel_cost_attention_forward(B, NH, HS, T).flops * share;
    const double bwd_flops = kernel_cost_attention_backward(B, NH, HS, T).flops * share;
    if (o->check) {   // the current kernels' outputs on copy 0, and room for a second run's
        ref = alloc_call(b, B, NH, NKV, HS, T, o->window, docs, 7ull);
        run1 = alloc_call(b, B, NH, NKV, HS, T, o->window, docs, 8ull);
        run_both(b, &VARIANTS[0], &calls[0]);
        copy_outputs(b, &ref, &calls[0]);
    }
    int failed = 0;
    for (int vi = 0; vi < o->nvariant; vi++) {
        const Variant* v = &VARIANTS[o->variant[vi]];
        Row r;
        memset(&r, 0, sizeof r);
        r.variant = v->name, r.HS = HS, r.T = T, r.B = B, r.NH = NH, r.window = o->window, r.documents = o->documents;
        r.fwd_err = r.bwd_err = NAN, r.deterministic = -1, r.status = "ok";
        if (o->check) {
            run_both(b, v, &calls[0]);
            call_diff(b, &calls[0], &ref, &r.fwd_err, &r.bwd_err);
            copy_outputs(b, &run1, &calls[0]);
            run_both(b, v, &calls[0]);
            double fwd_same = 0, bwd_same = 0;
            call_diff(b, &calls[0], &run1, &fwd_same, &bwd_same);
            r.deterministic = fwd_same == 0 && bwd_same == 0;
            const int ok = r.fwd_err <= TOLERANCE && r.bwd_err <= TOLERANCE && r.deterministic;
            if (!ok) r.status = "FAIL", failed++;
        }
        TimedCall t = {b, v, calls, copies, 0};
        r.fwd = bench_time_calls(b->stream, o->warmup, o->reps, b->sink, timed_call, &t);
        for (int k = 0; k < copies; k++) v->forward(&calls[k], b->stream);   // the backward's O and LSE
        t.backward = 1;
        r.bwd = bench_time_calls(b->stream, o->warmup, o->reps, b->sink, timed_call, &t);
        r.fwd_tflops = fwd_flops / (r.fwd.median_ms * 1e-3) / 1e12;
        r.bwd_tflops = bwd_flops / (r.bwd.median_ms * 1e-3) / 1e12;
        print_row(&r);
        write_row(csv, jsonl, &r);
    }
    for (int k = 0; k < copies; k++) free_call(&calls[k]);
    if (o->check) free_call(&ref), free_call(&run1);
    if (docs.start) CUDA_CHECK(cudaFree((void*)docs.start));
    return failed;
}

// --- Main ----------------------------------------------------------------------------------------------

int main(int argc, char** argv) {
    const Options o = parse_options(argc, argv);
    FILE* csv = bench_open_output("--csv", o.csv, "w");
    FILE* jsonl = bench_open_output("--jsonl", o.jsonl, "w");
    if (csv) fprintf(csv, "%s\n", CSV_HEADER);

    Bench b;
    memset(&b, 0, sizeof b);
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaGetDeviceProperties(&b.prop, 0));
    CUDA_CHECK(cudaStreamCreate(&b.stream));
    b.sink = (float*)device_alloc(sizeof(float));
    b.partial = (float*)device_alloc(2 * DIFF_BLOCKS * sizeof(float));
    char mask[160] = "causal";
    if (o.window && o.documents)
        snprintf(mask, sizeof mask, "sliding window %d, documents of %d tokens", o.window, o.documents);
    else if (o.window)
        snprintf(mask, sizeof mask, "sliding window %d", o.window);
    else if (o.documents)
        snprintf(mask, sizeof mask, "documents of %d tokens", o.documents);
    if (o.kv_heads) {
        const size_t used = strlen(mask);
        snprintf(mask + used, sizeof mask - used, ", %d key/value heads (grouped-query)", o.kv_heads);
    }
    printf("attention_bench: %s, sm_%d%d, %d SMs, L2 %d MiB; %s, %s, N = B*T = %d tokens\n", b.prop.name,
           b.prop.major, b.prop.minor, b.prop.multiProcessorCount, b.prop.l2CacheSize >> 20, FLOATX_NAME, mask,
           o.tokens);
    printf("timing: median of %d calls after %d warm-up calls, each between its own pair of CUDA events; "
           "inputs rotate among up to %d copies past twice the L2. TFLOP/s: 4*HS (fwd), 10*HS (bwd, with its "
           "row-dot) FLOPs per visible pair. err: max |variant - current| / max |current| (fwd: O, LSE; bwd: "
           "dQ, dK, dV); det: a second run gives the same bits\n",
           o.reps, o.warmup, MAX_COPIES);
    printf("%-10s %4s %6s %9s %9s %8s %9s %8s %8s %8s %4s  %s\n", "variant", "HS", "T", "B x NH", "fwd ms",
           "fwd TF/s", "bwd ms", "bwd TF/s", "fwd err", "bwd err", "det", "check");
    fflush(stdout);

    int failed = 0, rows = 0;
    for (int i = 0; i < o.nhs; i++)
        for (int j = 0; j < o.nT; j++) {
            failed += run_shape(&b, &o, o.hs[i], o.T[j], csv, jsonl);
            rows += o.nvariant;
        }

    CUDA_CHECK(cudaFree(b.sink));
    CUDA_CHECK(cudaFree(b.partial));
    CUDA_CHECK(cudaStreamDestroy(b.stream));
    bench_close_output("--csv", csv, o.csv);
    bench_close_output("--jsonl", jsonl, o.jsonl);
    if (!o.check) printf("spot check: not run (--no-check)\n");
    else if (failed) printf("spot check: FAILED %d of %d rows (tolerance %.0e)\n", failed, rows, TOLERANCE);
    else printf("spot check: all %d rows within %.0e of the current kernels, deterministic\n", rows, TOLERANCE);
    return failed ? 1 : 0;
}
