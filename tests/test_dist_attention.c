// Distributed attention equals single-process attention, and moves exactly the closed-form
// volume. Run under mpirun (tests/mpirun.sh): every rank generates the full inputs of its dp
// group, computes the single-process reference on the whole sequence (offset 0, stride 1) with
// the same backend, runs each schedule on its slice (AttentionLayer.positions) for two layers,
// and compares output, LSE, dQ, dK, dV (max |a - b| / max |ref|) and its per-layer comm counters.
// The overlapped ATTENTION2D is also compared with the non-overlapped one on the same inputs:
// the two differ only in the order of merges and sums, so within a few ulps (one bf16 ulp).
//
// One source, two backends: compiled as C it is the CPU test (host memory, the mpi transport);
// compiled as C++ with GPT_BACKEND_CUDA it runs the same schedules on the CUDA backend (device
// memory, --comm nccl or mpi-staged) against the single-rank CUDA run, with the counters in the
// backend's element sizes (bf16 activations, fp32 partials).
//
//   test_dist_attention --dp D --pq Q --pkv K
//                       [--algo 2d|2d-keep|2d-overlap|ring|striped|zigzag|ulysses|usp|all]
//                       [--B 2] [--Tl 3 | --T tokens] [--NH 2] [--HS 4] [--comm nccl|mpi-staged]
//                       [--NKV N]      (grouped-query attention: N key/value heads, dividing NH;
//                                       default NH)
//                       [--window W]   (sliding-window attention in both layers and the reference)
//                       [--documents N] (document masking, about one boundary in N positions)
//                       [--chunks G]   (ulysses and usp: the heads in G chunks, all-to-alls
//                                       pipelined with the chunks' computation; default 1)
//                       [--graph]  (CUDA build, nccl: each schedule runs once, then both layers'
//                                   forward and backward are captured in a CUDA graph, which must
//                                   count nothing; one launch must give the eager run's bits and
//                                   the closed-form counters, added by comm_replayed)
//   test_dist_attention ... --fail-rank R --fail-file PATH   (rank R reads a bad input file)
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_cost.h"
#include "attention/dist_ops.h"
#include "comm/comm_device.h"
#include "comm/comm_mpi.h"
#include "model/documents.h"
#include "comm/fail.h"
#ifdef GPT_BACKEND_CUDA
#include "model/backend.h"
#endif

enum { NUM_LAYERS = 2 };
// The distributed and the single-rank run differ only in the order of fp32 merges and sums; bf16
// storage rounds both results, which may then differ by an ulp (2^-8 relative).
#if defined(GPT_BACKEND_CUDA) && !defined(GPT_CUDA_FP32)
static const double TOLERANCE = 1e-2;
#else
static const double TOLERANCE = 1e-5;
#endif
// 2d-overlap against 2d, relative to max |ref| as above: one ulp of bf16 storage (2^-7 of the
// largest value), or a few ulps of real_acc (fp32 on the CPU and CUDA fp32 builds).
#if defined(GPT_BACKEND_CUDA) && !defined(GPT_CUDA_FP32)
static const double VS_2D_TOLERANCE = 1.0 / 128;
#else
static const double VS_2D_TOLERANCE =
    8 * (sizeof(real_acc) == sizeof(float) ? FLT_EPSILON : DBL_EPSILON);
#endif
static const uint32_t INPUT_MAGIC = 20250315;

typedef struct {
    int dp, pq, pkv, B, Tl, T, NH, HS;   // T: sequence length, 0 for Tl * P
    int NKV;                             // key/value heads (0 on the command line: NH)
    int window;                          // 0: causal; W: sliding window
    int documents;                       // 0: none; N: document masking, ~1 boundary in N
    int chunks;                          // ulysses and usp: head chunks
    DocumentBounds docs;                 // its bounds on the backend (docs.start NULL: none)
    const char* algo;
    int fail_rank;
    const char* fail_file;
    const char* comm;   // transport of the CUDA build
    int graph;          // 1: the layers run as a CUDA graph, after one eager run
} Args;

static int parse_int(const char* flag, const char* value) {
    char* end = NULL;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || *end || errno || v < 0 || v > 1 << 20) fail_msg("%s: expected a count, found '%s'", flag, value ? value : "");
    return (int)v;
}

static Args parse_args(int argc, char** argv) {
    Args a;
    memset(&a, 0, sizeof a);
    a.dp = a.pq = a.pkv = 1;
    a.B = 2, a.Tl = 3, a.NH = 2, a.HS = 4;
    a.algo = "all";
    a.chunks = 1;
    a.fail_rank = -1;
    a.comm = "nccl";
    for (int k = 1; k < argc; k++) {
        const char* f = argv[k];
        const char* v = k + 1 < argc ? argv[k + 1] : NULL;
        if (!strcmp(f, "--algo") && v) a.algo = v;
        else if (!strcmp(f, "--fail-file") && v) a.fail_file = v;
        else if (!strcmp(f, "--comm") && v) a.comm = v;
        else if (!strcmp(f, "--graph")) {
            a.graph = 1;
            continue;   // takes no value
        }
        else if (!strcmp(f, "--dp")) a.dp = parse_int(f, v);
        else if (!strcmp(f, "--pq")) a.pq = parse_int(f, v);
        else if (!strcmp(f, "--pkv")) a.pkv = parse_int(f, v);
        else if (!strcmp(f, "--B")) a.B = parse_int(f, v);
        else if (!strcmp(f, "--Tl")) a.Tl = parse_int(f, v);
        else if (!strcmp(f, "--T")) a.T = parse_int(f, v);
        else if (!strcmp(f, "--NH")) a.NH = parse_int(f, v);
        else if (!strcmp(f, "--HS")) a.HS = parse_int(f, v);
        else if (!strcmp(f, "--NKV")) a.NKV = parse_int(f, v);
        else if (!strcmp(f, "--window")) a.window = parse_int(f, v);
        else if (!strcmp(f, "--documents")) a.documents = parse_int(f, v);
        else if (!strcmp(f, "--chunks")) a.chunks = parse_int(f, v);
        else if (!strcmp(f, "--fail-rank")) a.fail_rank = parse_int(f, v);
        else fail_msg("unknown or incomplete argument '%s'", f);
        k++;
    }
    if (a.NKV == 0) a.NKV = a.NH;
    if (a.NH % a.NKV) fail_msg("--NKV %d: expected a divisor of --NH %d", a.NKV, a.NH);
    return a;
}

// The input file of the failure test: a uint32 magic and nothing else that matters here.
static void read_input_file(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open input file: %s", path, strerror(errno));
    uint32_t magic = 0;
    size_t got = fread(&magic, sizeof magic, 1, f);
    fclose(f);
    if (got != 1) fail_msg("%s: header: expected 4 bytes, found a shorter file", path);
    if (magic != INPUT_MAGIC) fail_msg("%s: magic: expected %u, found %u", path, INPUT_MAGIC, magic);
}

// Deterministic values in [-1, 1) from (seed, index): the same on every rank.
static double uniform(uint64_t seed, uint64_t index) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static double value(real x) { return (double)(float)x; }
static double value_acc(real_acc x) { return (double)x; }

// Backend copies of host arrays, and back.
static void* on_backend(const void* host, size_t bytes, const char* what) {
    void* p = dist_alloc(bytes, what);
    dist_to_backend(p, host, bytes);
    return p;
}

// The full problem of one dp group and its single-process reference (host memory), computed by
// this backend's kernels on the whole sequence, as the single-device attention layer does.
typedef struct {
    int B, T, NH, NKV, HS, C, KVC, W;   // W = C + 2 KVC: a qkv row
    real *qkv, *dout;           // (B, T, W), (B, T, C)
    real* out;                  // (B, T, C)
    real_acc* lse;              // (B, NH, T)
    real* dqkv;                 // (B, T, W)
} Reference;

static Reference make_reference(int dp_index, int B, int T, int NH, int NKV, int HS, long window,
                                DocumentBounds docs) {
    Reference r;
    r.B = B, r.T = T, r.NH = NH, r.NKV = NKV, r.HS = HS, r.C = NH * HS, r.KVC = NKV * HS;
    r.W = r.C + 2 * r.KVC;
    const int C = r.C, KVC = r.KVC, W = r.W;
    const size_t n3 = (size_t)B * T * W, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
    r.qkv = (real*)xmalloc(sizeof(real) * n3, "reference qkv");
    r.dout = (real*)xmalloc(sizeof(real) * n1, "reference dout");
    r.out = (real*)xmalloc(sizeof(real) * n1, "reference out");
    r.lse = (real_acc*)xmalloc(sizeof(real_acc) * nl, "reference lse");
    r.dqkv = (real*)xmalloc(sizeof(real) * n3, "reference dqkv");
    // Scaled so that softmax rows are far from uniform.
    for (size_t e = 0; e < n3; e++) r.qkv[e] = (real)(2 * uniform(2 * dp_index + 1, e));
    for (size_t e = 0; e < n1; e++) r.dout[e] = (real)uniform(2 * dp_index + 2, e);
    real* qkv = (real*)on_backend(r.qkv, sizeof(real) * n3, "reference qkv");
    real* dout = (real*)on_backend(r.dout, sizeof(real) * n1, "reference dout");
    real_acc* o = (real_acc*)dist_alloc(sizeof(real_acc) * n1, "reference o");
    real* out = (real*)dist_alloc(sizeof(real) * n1, "reference out");
    real_acc* lse = (real_acc*)dist_alloc(sizeof(real_acc) * nl, "reference lse");
    real_acc* d = (real_acc*)dist_alloc(sizeof(real_acc) * nl, "reference d");
    real_acc* g = (real_acc*)dist_alloc(sizeof(real_acc) * n3, "reference dqkv (accumulator)");
    real* dqkv = (real*)dist_alloc(sizeof(real) * n3, "reference dqkv");
    AttentionProblem p = attention_problem(B, NH, HS, T, T, token_positions(0, 1),
                                           token_positions(0, 1));
    p.NKV = NKV;
    p.window = window;
    p.docs = docs;
    dist_attention_forward(&p, qkv, W, qkv + C, W, qkv + C + KVC, W, o, C, lse);
    dist_acc_to_real(out, C, o, C, (long)B * T, C);
    dist_attention_row_dot(&p, out, C, dout, C, d);
    dist_zero_acc(g, n3);
    dist_attention_backward(&p, qkv, W, qkv + C, W, qkv + C + KVC, W, dout, C, lse, d, g, W,
                            g + C, W, g + C + KVC, W);
    dist_acc_to_real(dqkv, W, g, W, (long)B * T, W);
    dist_to_host(r.out, out, sizeof(real) * n1);
    dist_to_host(r.lse, lse, sizeof(real_acc) * nl);
    dist_to_host(r.dqkv, dqkv, sizeof(real) * n3);
    void* scratch[] = {qkv, dout, o, out, lse, d, g, dqkv};
    for (size_t k = 0; k < sizeof scratch / sizeof *scratch; k++) dist_free(scratch[k]);
    return r;
}

static void free_reference(Reference* r) {
    free(r->qkv);
    free(r->dout);
    free(r->out);
    free(r->lse);
    free(r->dqkv);
}

// Rows of the full (B, T, w) tensor at the local positions -> (B, Tl, w).
static void slice_rows(real* dst, const real* full, int B, int T, int Tl, long ld, int col, int w,
                       TokenLayout pos) {
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < Tl; j++) {
            const real* src = full + ((long)b * T + token_layout_position(pos, j)) * ld + col;
            memcpy(dst + ((long)b * Tl + j) * w, src, sizeof(real) * w);
        }
    }
}

// max |local - ref(slice)| over a (B, Tl, w) column block of rows of stride ld (both sides).
static double row_error(const real* local, const real* full, int B, int T, int Tl, long ld,
                        int col, int w, TokenLayout pos) {
    double err = 0;
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < Tl; j++) {
            const real* x = local + ((long)b * Tl + j) * ld + col;
            const real* y = full + ((long)b * T + token_layout_position(pos, j)) * ld + col;
            for (int e = 0; e < w; e++) err = fmax(err, fabs(value(x[e]) - value(y[e])));
        }
    }
    return err;
}

// The same for the (B*NH, T) LSE rows.
static double lse_error(const real_acc* local, const real_acc* full, int rows, int T, int Tl,
                        TokenLayout pos) {
    double err = 0;
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < Tl; j++) {
            const double x = value_acc(local[(long)r * Tl + j]);
            const double y = value_acc(full[(long)r * T + token_layout_position(pos, j)]);
            err = fmax(err, fabs(x - y));
        }
    }
    return err;
}

static double max_abs_cols(const real* full, long rows, long ld, int col, int w) {
    double m = 0;
    for (long i = 0; i < rows; i++) {
        for (int e = 0; e < w; e++) m = fmax(m, fabs(value(full[i * ld + col + e])));
    }
    return m;
}

static double max_abs_acc(const real_acc* x, long n) {
    double m = 0;
    for (long i = 0; i < n; i++) m = fmax(m, fabs(value_acc(x[i])));
    return m;
}

enum { ERR_OUT, ERR_LSE, ERR_DQ, ERR_DK, ERR_DV, NERR };
static const char* ERR_NAMES[NERR] = {"out", "lse", "dq", "dk", "dv"};

// Relative errors of this rank's results for one layer against `other` (the reference, or another
// schedule's results as a Reference of T = Tl at pos (0, 1)), scaled by max |ref|; the gradients'
// by the largest of all three, since one may vanish (a window of 1 makes dQ and dK exactly 0, and
// what remains is rounding, in an order that depends on the BLAS kernels).
static void compare(double err[NERR], const Reference* ref, const Reference* other, int Tl,
                    TokenLayout pos, const real* out, const real_acc* lse, const real* dqkv) {
    const int B = ref->B, T = ref->T, C = ref->C, NH = ref->NH, To = other->T, W = ref->W;
    err[ERR_OUT] = row_error(out, other->out, B, To, Tl, C, 0, C, pos) /
                   max_abs_cols(ref->out, (long)B * T, C, 0, C);
    err[ERR_LSE] = lse_error(lse, other->lse, B * NH, To, Tl, pos) /
                   max_abs_acc(ref->lse, (long)B * NH * T);
    const double grad_scale = max_abs_cols(ref->dqkv, (long)B * T, W, 0, W);
    for (int part = 0; part < 3; part++) {   // dQ (C columns), dK, dV (KVC each)
        const int col = part == 0 ? 0 : C + (part - 1) * ref->KVC, w = part == 0 ? C : ref->KVC;
        err[ERR_DQ + part] = row_error(dqkv, other->dqkv, B, To, Tl, W, col, w, pos) / grad_scale;
    }
}

// worst[k] = max(worst[k], e[k]), a NaN counting as infinite.
static void fold_max(double worst[NERR], const double e[NERR]) {
    for (int k = 0; k < NERR; k++) worst[k] = fmax(worst[k], isnan(e[k]) ? INFINITY : e[k]);
}

// Host copies of one schedule's local results, per layer, to compare another schedule with.
typedef struct {
    int have;
    real* out[NUM_LAYERS];
    real_acc* lse[NUM_LAYERS];
    real* dqkv[NUM_LAYERS];
} Results;

static void free_results(Results* r) {
    for (int l = 0; l < NUM_LAYERS; l++) {
        free(r->out[l]);
        free(r->lse[l]);
        free(r->dqkv[l]);
    }
}

// Layer l of r as a Reference of the local tokens only (T = Tl, compared at positions (0, 1)).
static Reference results_view(const Reference* ref, const Results* r, int Tl, int l) {
    Reference v = *ref;
    v.T = Tl;
    v.qkv = v.dout = NULL;
    v.out = r->out[l];
    v.lse = r->lse[l];
    v.dqkv = r->dqkv[l];
    return v;
}

// Compares the counters of every layer and phase with the closed form; prints mismatches.
static int check_volume(const Comm* comm, const char* name, const CommVolume expected[2]) {
    int bad = 0;
    for (int layer = 0; layer < NUM_LAYERS; layer++) {
        for (int phase = 0; phase < 2; phase++) {
            for (int kind = 0; kind < COMM_NKINDS; kind++) {
                const CommCount want = expected[phase].kind[kind];
                const CommCount got = comm_count(comm, layer, (CommPhase)phase, (CommKind)kind);
                if (got.bytes == want.bytes && got.messages == want.messages &&
                    got.calls == want.calls) {
                    continue;
                }
                fprintf(stderr,
                        "rank %d: %s layer %d %s %s: expected %lld bytes %lld messages %lld "
                        "calls, counted %lld %lld %lld\n",
                        comm->mesh.world_rank, name, layer, comm_phase_name((CommPhase)phase),
                        comm_kind_name((CommKind)kind), want.bytes, want.messages, want.calls, got.bytes,
                        got.messages, got.calls);
                bad = 1;
            }
        }
    }
    return bad;
}

// Largest value of x over the world (every rank gets it): a sum of host vectors, each rank's
// value in its own slot, which every transport can do on host memory.
static double world_max(Comm* comm, double x) {
    const int n = comm_size(comm, MESH_WORLD);
    double* all = (double*)xcalloc(n, sizeof(double), "world values");
    all[comm_rank(comm, MESH_WORLD)] = x;
    comm_all_reduce_host(comm, MESH_WORLD, all, n, COMM_F64);
    double m = all[0];
    for (int k = 1; k < n; k++) m = fmax(m, all[k]);
    free(all);
    return m;
}

typedef enum {
    SCHED_2D, SCHED_2D_KEEP, SCHED_2D_OVERLAP, SCHED_RING, SCHED_STRIPED, SCHED_ZIGZAG,
    SCHED_ULYSSES, SCHED_USP, NSCHED
} Schedule;
static const char* SCHED_NAMES[NSCHED] = {"2d",      "2d-keep", "2d-overlap", "ring",
                                          "striped", "zigzag",  "ulysses",    "usp"};

static AttentionLayer* create_schedule(Schedule s, Comm* comm, const Args* a) {
    // Bounds above the call's B and HS, so a stride taken from the bounds would show.
    const int B = a->B + 1, HS = a->HS + 1;
    const int NH = a->NH, NKV = a->NKV;
    switch (s) {
    case SCHED_2D: return attention2d_create(comm, B, a->Tl, NH, NKV, HS, 0);
    case SCHED_2D_KEEP: return attention2d_create(comm, B, a->Tl, NH, NKV, HS, NUM_LAYERS);
    case SCHED_2D_OVERLAP: return attention2d_overlap_create(comm, B, a->Tl, NH, NKV, HS);
    case SCHED_RING: return attention_ring_create(comm, RING_CONTIGUOUS, B, a->Tl, NH, NKV, HS);
    case SCHED_ZIGZAG: return attention_ring_create(comm, RING_ZIGZAG, B, a->Tl, NH, NKV, HS);
    case SCHED_ULYSSES: return attention_ulysses_create(comm, B, a->Tl, NH, NKV, HS, a->chunks);
    case SCHED_USP: return attention_usp_create(comm, B, a->Tl, NH, NKV, HS, a->chunks);
    default: return attention_ring_create(comm, RING_CYCLIC, B, a->Tl, NH, NKV, HS);
    }
}

// The positions the README and attention2d.md promise, written out here independently.
static TokenLayout expected_positions(Schedule s, const Mesh* m, int Tl) {
    if (s == SCHED_RING) return token_layout(token_positions((long)m->sp_index * Tl, 1));
    // USP: cyclic, rank (r, c) at c + pkv r, so that the column's tokens are c (mod pkv)
    if (s == SCHED_USP) return token_layout(token_positions(m->c + m->pkv * m->r, m->P));
    if (s != SCHED_ZIGZAG) return token_layout(token_positions(m->sp_index, m->P));
    // chunks i and 2P-1-i of Tl/2 tokens, local tokens alternating between them
    TokenLayout z = {{(long)m->sp_index * (Tl / 2), (long)(2 * m->P - 1 - m->sp_index) * (Tl / 2)},
                     1, 2};
    return z;
}

static int same_layout(TokenLayout x, TokenLayout y, int Tl) {
    for (int j = 0; j < Tl; j++)
        if (token_layout_position(x, j) != token_layout_position(y, j)) return 0;
    return 1;
}

static CommVolume expected_volume(Schedule s, const Mesh* m, CommPhase phase, const Args* a) {
    if (s == SCHED_RING || s == SCHED_STRIPED || s == SCHED_ZIGZAG) {
        const RingLayout layout = s == SCHED_RING      ? RING_CONTIGUOUS
                                  : s == SCHED_STRIPED ? RING_CYCLIC
                                                       : RING_ZIGZAG;
        const int steps = ring_steps(layout, m->P, a->Tl, a->window,
                                     a->docs.start ? a->docs.span : 0);
        return ring_volume(m, phase, a->B, a->Tl, a->NH, a->NKV, a->HS, steps, sizeof(real),
                           sizeof(real_acc));
    }
    if (s == SCHED_ULYSSES)
        return ulysses_volume(m, phase, a->B, a->Tl, a->NH, a->NKV, a->HS, a->chunks, sizeof(real),
                              sizeof(real_acc));
    if (s == SCHED_USP)
        return usp_volume(m, phase, a->B, a->Tl, a->NH, a->NKV, a->HS, a->chunks, sizeof(real),
                          sizeof(real_acc));
    if (s == SCHED_2D_OVERLAP) {
        return attention2d_overlap_volume(m, phase, a->B, a->Tl, a->NH, a->NKV, a->HS, sizeof(real),
                                          sizeof(real_acc));
    }
    return attention2d_volume(m, phase, a->B, a->Tl, a->NH, a->NKV, a->HS, s == SCHED_2D_KEEP,
                              sizeof(real), sizeof(real_acc));
}

// Runs one schedule for NUM_LAYERS layers and checks it, against `vs` too when it has results;
// keeps its results in `keep` when not NULL. Returns 1 on failure (on every rank).
// Both layers' forwards, then both backwards, as in training: kept K/V must not mix layers.
static void run_layers(AttentionLayer* layer, const Args* a, const real* qkv, const real* dout,
                       real* out[NUM_LAYERS], real_acc* lse[NUM_LAYERS], real* dqkv[NUM_LAYERS]) {
    const int B = a->B, Tl = a->Tl, NH = a->NH, NKV = a->NKV, HS = a->HS;
    for (int l = 0; l < NUM_LAYERS; l++)
        layer->forward(layer, l, a->window, B, Tl, NH, NKV, HS, qkv, out[l], lse[l]);
    for (int l = NUM_LAYERS - 1; l >= 0; l--)
        layer->backward(layer, l, a->window, B, Tl, NH, NKV, HS, qkv, out[l], lse[l], dout,
                        dqkv[l]);
}

#ifdef GPT_BACKEND_CUDA
// --graph, after the eager run (which made the schedule's one-time allocations): the layers are
// captured, which must count nothing, the outputs poisoned, and the graph launched once with
// comm_replayed, so that the checks that follow see its results and counters. Returns 1 if the
// capture counted, or the launch's bits differ from the eager run's.
static int run_graph(Comm* comm, AttentionLayer* layer, const Args* a, const real* qkv, const real* dout,
                     real* out[NUM_LAYERS], real_acc* lse[NUM_LAYERS], real* dqkv[NUM_LAYERS],
                     real* poison) {
    static const char* names[3] = {"output", "LSE", "dQKV"};
    const size_t n1 = (size_t)a->B * a->Tl * a->NH * a->HS;
    const size_t n3 = (size_t)a->B * a->Tl * (a->NH + 2 * a->NKV) * a->HS;
    const size_t nl = (size_t)a->B * a->NH * a->Tl;
    const size_t bytes[3] = {sizeof(real) * n1, sizeof(real_acc) * nl, sizeof(real) * n3};
    void* eager[3][NUM_LAYERS];
    for (int l = 0; l < NUM_LAYERS; l++) {
        void* dev[3] = {out[l], lse[l], dqkv[l]};
        for (int k = 0; k < 3; k++) {
            eager[k][l] = xmalloc(bytes[k], "eager results");
            dist_to_host(eager[k][l], dev[k], bytes[k]);
        }
    }
    const long long counted = comm_count_bytes(comm);
    comm_reset_counts(comm);
    comm_capture_begin(comm);
    gpt_graph_begin();
    run_layers(layer, a, qkv, dout, out, lse, dqkv);
    GptGraph* graph = gpt_graph_end("the attention layers' forward and backward");
    CommCapture* capture = comm_capture_end(comm);
    int bad = comm_count_bytes(comm) != 0 || (counted > 0) != (comm_capture_ops(capture) > 0);
    if (bad)
        fprintf(stderr, "rank %d: %s: the capture counted %lld bytes (must be 0) and started %d "
                "operations (the eager run counted %lld bytes)\n", comm->mesh.world_rank,
                layer->name, comm_count_bytes(comm), comm_capture_ops(capture), counted);
    for (int l = 0; l < NUM_LAYERS; l++) {   // what the launch must write
        for (size_t e = 0; e < n3; e++) poison[e] = (real)NAN;
        dist_to_backend(out[l], poison, bytes[0]);
        dist_to_backend(lse[l], poison, bytes[1] <= bytes[2] ? bytes[1] : bytes[2]);
        dist_to_backend(dqkv[l], poison, bytes[2]);
    }
    gpt_graph_launch(graph, -1);
    comm_replayed(comm, capture);
    void* host = xmalloc(bytes[2] > bytes[1] ? bytes[2] : bytes[1], "graph results");
    for (int l = 0; l < NUM_LAYERS; l++) {
        const void* dev[3] = {out[l], lse[l], dqkv[l]};
        for (int k = 0; k < 3; k++) {
            dist_to_host(host, dev[k], bytes[k]);
            if (memcmp(host, eager[k][l], bytes[k]) != 0) {
                fprintf(stderr, "rank %d: %s: the graph's %s of layer %d differs from the eager "
                        "run's\n", comm->mesh.world_rank, layer->name, names[k], l);
                bad = 1;
            }
            free(eager[k][l]);
        }
    }
    free(host);
    gpt_graph_free(graph);
    comm_capture_free(capture);
    return bad;
}
#endif

static int run_schedule(Schedule s, Comm* comm, const Args* a, const Reference* ref,
                        const Results* vs, Results* keep) {
    const Mesh* m = &comm->mesh;
    const int B = a->B, Tl = a->Tl, NH = a->NH, HS = a->HS, C = NH * HS, W = ref->W;
    AttentionLayer* layer = create_schedule(s, comm, a);
    layer->docs = a->docs;
    const TokenLayout pos = layer->positions, want = expected_positions(s, m, Tl);
    int bad = !same_layout(pos, want, Tl);
    if (bad) {
        fprintf(stderr, "rank %d: %s positions (%ld|%ld, %ld, %d chunks), expected (%ld|%ld, %ld, %d)\n",
                m->world_rank, layer->name, pos.off[0], pos.off[1], pos.stride, pos.chunks,
                want.off[0], want.off[1], want.stride, want.chunks);
    }

    const size_t n3 = (size_t)B * Tl * W, n1 = (size_t)B * Tl * C, nl = (size_t)B * NH * Tl;
    real* host_qkv = (real*)xmalloc(sizeof(real) * n3, "local qkv");
    real* host_dout = (real*)xmalloc(sizeof(real) * n1, "local dout");
    real* host_out = (real*)xmalloc(sizeof(real) * n1, "local out");
    real_acc* host_lse = (real_acc*)xmalloc(sizeof(real_acc) * nl, "local lse");
    real* host_dqkv = (real*)xmalloc(sizeof(real) * n3, "local dqkv");
    slice_rows(host_qkv, ref->qkv, B, ref->T, Tl, W, 0, W, pos);
    slice_rows(host_dout, ref->dout, B, ref->T, Tl, C, 0, C, pos);
    for (size_t e = 0; e < n3; e++) host_dqkv[e] = (real)NAN;   // unwritten shows
    real* qkv = (real*)on_backend(host_qkv, sizeof(real) * n3, "local qkv");
    real* dout = (real*)on_backend(host_dout, sizeof(real) * n1, "local dout");
    real* out[NUM_LAYERS];
    real_acc* lse[NUM_LAYERS];
    real* dqkv[NUM_LAYERS];
    for (int l = 0; l < NUM_LAYERS; l++) {
        out[l] = (real*)dist_alloc(sizeof(real) * n1, "local out");
        lse[l] = (real_acc*)dist_alloc(sizeof(real_acc) * nl, "local lse");
        dqkv[l] = (real*)on_backend(host_dqkv, sizeof(real) * n3, "local dqkv");
    }
    comm_reset_counts(comm);
    run_layers(layer, a, qkv, dout, out, lse, dqkv);
#ifdef GPT_BACKEND_CUDA
    if (a->graph) bad |= run_graph(comm, layer, a, qkv, dout, out, lse, dqkv, host_dqkv);
#endif
    double err[NERR] = {0}, err_vs[NERR] = {0};
    for (int l = 0; l < NUM_LAYERS; l++) {
        dist_to_host(host_out, out[l], sizeof(real) * n1);
        dist_to_host(host_lse, lse[l], sizeof(real_acc) * nl);
        dist_to_host(host_dqkv, dqkv[l], sizeof(real) * n3);
        double e[NERR];
        compare(e, ref, ref, Tl, pos, host_out, host_lse, host_dqkv);
        fold_max(err, e);
        if (vs && vs->have) {
            const Reference other = results_view(ref, vs, Tl, l);
            compare(e, ref, &other, Tl, token_layout(token_positions(0, 1)), host_out, host_lse,
                    host_dqkv);
            fold_max(err_vs, e);
        }
        if (keep) {
            keep->out[l] = (real*)xmalloc(sizeof(real) * n1, "kept out");
            keep->lse[l] = (real_acc*)xmalloc(sizeof(real_acc) * nl, "kept lse");
            keep->dqkv[l] = (real*)xmalloc(sizeof(real) * n3, "kept dqkv");
            memcpy(keep->out[l], host_out, sizeof(real) * n1);
            memcpy(keep->lse[l], host_lse, sizeof(real_acc) * nl);
            memcpy(keep->dqkv[l], host_dqkv, sizeof(real) * n3);
        }
        dist_free(out[l]);
        dist_free(lse[l]);
        dist_free(dqkv[l]);
    }
    const CommVolume expected[2] = {expected_volume(s, m, COMM_FORWARD, a),
                                    expected_volume(s, m, COMM_BACKWARD, a)};
    const int volume_bad = world_max(comm, check_volume(comm, layer->name, expected)) > 0;
    const CommCount fwd = comm_count_total(comm, 0, COMM_FORWARD);
    const CommCount bwd = comm_count_total(comm, 0, COMM_BACKWARD);

    // Everything below is outside the layer scopes.
    double worst = 0, worst_vs = 0;
    for (int k = 0; k < NERR; k++) {
        err[k] = world_max(comm, err[k]);
        worst = fmax(worst, err[k]);
        err_vs[k] = world_max(comm, err_vs[k]);
        worst_vs = fmax(worst_vs, err_vs[k]);
    }
    const int vs_bad = !(worst_vs <= VS_2D_TOLERANCE);
    bad = world_max(comm, bad) > 0 || volume_bad || !(worst <= TOLERANCE) || vs_bad;
    if (keep) keep->have = 1;
    const double fwd_max = world_max(comm, (double)fwd.bytes);
    const double bwd_max = world_max(comm, (double)bwd.bytes);
    if (m->world_rank == 0) {
        printf("%-4s %-10s %s %s dp %d mesh %dx%d T %d", bad ? "FAIL" : "ok", SCHED_NAMES[s],
               comm->name, REAL_NAME, m->dp, m->pq, m->pkv, Tl * m->P);
        if (a->NKV != a->NH) printf(" heads %d kv %d", a->NH, a->NKV);
        printf(":");
        for (int k = 0; k < NERR; k++) printf(" %s %.1e", ERR_NAMES[k], err[k]);
        printf(" | max bytes/rank/layer fwd %.0f bwd %.0f, %s", fwd_max, bwd_max,
               volume_bad ? "COUNTERS DIFFER FROM THE CLOSED FORM" : "counters = closed form");
        if (a->graph) printf(" | as a CUDA graph");
        if (vs && vs->have) {
            printf(" | vs 2d:");
            for (int k = 0; k < NERR; k++) printf(" %s %.1e", ERR_NAMES[k], err_vs[k]);
            if (vs_bad) printf(" ABOVE %.1e", VS_2D_TOLERANCE);
        }
        printf("\n");
        fflush(stdout);   // before any later failure ends the job (the mutation test reads it)
    }
    dist_free(qkv);
    dist_free(dout);
    free(host_qkv);
    free(host_dout);
    free(host_out);
    free(host_lse);
    free(host_dqkv);
    attention_layer_free(layer);
    return bad;
}

int main(int argc, char** argv) {
    int rank = 0, size = 1;
    comm_mpi_init(&argc, &argv, &rank, &size);
    Args a = parse_args(argc, argv);
    Mesh mesh;
    char err[ERR_LEN];
    if (mesh_init(&mesh, a.dp, a.pq, a.pkv, rank, size, err) != 0) fail_msg("%s", err);
    if (a.T == 0) a.T = a.Tl * mesh.P;
    if (mesh_check_seq_len(&mesh, a.T, err) != 0) fail_msg("%s", err);
    a.Tl = a.T / mesh.P;
#ifndef GPT_BACKEND_CUDA
    if (a.graph) fail_msg("--graph: expected the CUDA build of this test (CUDA graphs)");
#endif
    Comm* comm;
    if (dist_host_memory()) {
        comm = comm_mpi_create(&mesh, NUM_LAYERS);
    } else {
#ifdef GPT_BACKEND_CUDA
        // One GPU per rank, as the trainer picks it (NCCL refuses two ranks on one device).
        int local_rank = 0, local_size = 1, device = 0;
        comm_mpi_node_rank(&local_rank, &local_size);
        if (gpt_backend_select_device(local_rank, local_size, !strcmp(a.comm, "mpi-staged"), &device,
                                      err) != 0)
            fail_msg("%s", err);
#endif
        DeviceCommOptions d = {a.comm, "mpi", "", 60, 60};
        comm = comm_device_create(&mesh, NUM_LAYERS, &d);
    }
    if (rank == a.fail_rank) read_input_file(a.fail_file ? a.fail_file : "");

    // Document masking: a boundary (which begins a document) at about one position in N, the
    // same on every rank; the bounds by position, on the backend, for the reference and layers.
    int* doc_bounds = NULL;
    if (a.documents) {
        const int T = a.Tl * mesh.P;
        const size_t n = (size_t)a.B * T;
        int* tokens = (int*)xmalloc(sizeof(int) * n, "document tokens");
        int* bounds = (int*)xmalloc(2 * sizeof(int) * n, "document bounds");
        for (size_t i = 0; i < n; i++) tokens[i] = uniform(99, i) < -1 + 2.0 / a.documents;
        document_bounds(tokens, a.B, T, 1, bounds, bounds + n);
        doc_bounds = (int*)on_backend(bounds, 2 * sizeof(int) * n, "document bounds");
        a.docs.start = doc_bounds, a.docs.end = doc_bounds + n, a.docs.T = T;
        a.docs.span = document_span(bounds, a.B, T);   // Ring stops once no document reaches
        free(tokens);
        free(bounds);
    }
    Reference ref = make_reference(mesh.dp_index, a.B, a.Tl * mesh.P, a.NH, a.NKV, a.HS, a.window,
                                   a.docs);
    int failed = 0, ran = 0;
    // 2d-overlap is compared with 2d, which runs first (also when only 2d-overlap is asked for).
    Results results_2d;
    memset(&results_2d, 0, sizeof results_2d);
    const int overlap_only = !strcmp(a.algo, SCHED_NAMES[SCHED_2D_OVERLAP]);
    for (int s = 0; s < NSCHED; s++) {
        const int pick = !strcmp(a.algo, "all") || !strcmp(a.algo, SCHED_NAMES[s]) ||
                         (s == SCHED_2D && overlap_only);
        if (!pick) continue;
        if (s == SCHED_ZIGZAG && a.Tl % 2 != 0) {   // two chunks per rank need an even Tl
            if (strcmp(a.algo, "all") != 0)
                fail_msg("--algo zigzag: expected an even number of local tokens, found Tl = %d",
                         a.Tl);
            if (rank == 0) printf("skip zigzag: Tl = %d is odd\n", a.Tl);
            continue;
        }
        // Ulysses splits the heads over the SP ranks, USP over the mesh column.
        const int split = s == SCHED_ULYSSES ? mesh.P : s == SCHED_USP ? mesh.pq : 1;
        const char* over = s == SCHED_ULYSSES ? "P" : "pq";
        // (the key/value heads: the query heads' groups split with them)
        const int gqa = a.NKV != a.NH;
        const char* kv = gqa ? "key/value " : "";
        const char* nkv = gqa ? "NKV" : "NH";
        if (a.NKV % split != 0) {
            if (strcmp(a.algo, "all") != 0)
                fail_msg("--algo %s: expected a %shead count divisible by %s = %d, found %s = %d",
                         SCHED_NAMES[s], kv, over, split, nkv, a.NKV);
            if (rank == 0)
                printf("skip %s: %s = %d is not a multiple of %s = %d\n", SCHED_NAMES[s], nkv,
                       a.NKV, over, split);
            continue;
        }
        if ((s == SCHED_ULYSSES || s == SCHED_USP) && (a.NKV / split) % a.chunks != 0) {
            if (strcmp(a.algo, "all") != 0)
                fail_msg("--chunks %d: expected a divisor of the %d %sheads per rank of %s",
                         a.chunks, a.NKV / split, kv, SCHED_NAMES[s]);
            if (rank == 0)
                printf("skip %s: %d %sheads per rank in %d chunks\n", SCHED_NAMES[s],
                       a.NKV / split, kv, a.chunks);
            continue;
        }
        failed |= run_schedule((Schedule)s, comm, &a, &ref,
                               s == SCHED_2D_OVERLAP ? &results_2d : NULL,
                               s == SCHED_2D ? &results_2d : NULL);
        ran++;
    }
    if (!ran) fail_msg("--algo %s: expected 2d, 2d-keep, 2d-overlap, ring, striped, zigzag, ulysses, "
                       "usp or all",
                       a.algo);
    free_results(&results_2d);
    free_reference(&ref);
    if (doc_bounds) dist_free(doc_bounds);
    comm_destroy(comm);
    comm_mpi_finalize();
    return failed;
}
