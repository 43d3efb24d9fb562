// Distributed attention equals single-process attention, and moves exactly the closed-form
// volume. Run under mpirun (tests/mpirun.sh): every rank generates the full inputs of its dp
// group, computes the single-process reference on the whole sequence (offset 0, stride 1),
// runs each schedule on its slice (AttentionLayer.positions) for two layers, and compares
// output, LSE, dQ, dK, dV (max |a - b| / max |ref|) and its per-layer comm counters.
//
//   test_dist_attention --dp D --pq Q --pkv K [--algo 2d|2d-keep|ring|striped|all]
//                       [--B 2] [--Tl 3 | --T tokens] [--NH 2] [--HS 4]
//   test_dist_attention ... --fail-rank R --fail-file PATH   (rank R reads a bad input file)
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_cost.h"
#include "comm/comm_mpi.h"
#include "comm/fail.h"

enum { NUM_LAYERS = 2 };
static const double TOLERANCE = 1e-5;
static const uint32_t INPUT_MAGIC = 20250315;

typedef struct {
    int dp, pq, pkv, B, Tl, T, NH, HS;   // T: sequence length, 0 for Tl * P
    const char* algo;
    int fail_rank;
    const char* fail_file;
} Args;

static int parse_int(const char* flag, const char* value) {
    char* end = NULL;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || *end || errno || v < 0 || v > 1 << 20) fail_msg("%s: expected a count, found '%s'", flag, value ? value : "");
    return (int)v;
}

static Args parse_args(int argc, char** argv) {
    Args a = {.dp = 1, .pq = 1, .pkv = 1, .B = 2, .Tl = 3, .NH = 2, .HS = 4, .algo = "all",
              .fail_rank = -1, .fail_file = NULL};
    for (int k = 1; k < argc; k++) {
        const char* f = argv[k];
        const char* v = k + 1 < argc ? argv[k + 1] : NULL;
        if (!strcmp(f, "--algo") && v) a.algo = v;
        else if (!strcmp(f, "--fail-file") && v) a.fail_file = v;
        else if (!strcmp(f, "--dp")) a.dp = parse_int(f, v);
        else if (!strcmp(f, "--pq")) a.pq = parse_int(f, v);
        else if (!strcmp(f, "--pkv")) a.pkv = parse_int(f, v);
        else if (!strcmp(f, "--B")) a.B = parse_int(f, v);
        else if (!strcmp(f, "--Tl")) a.Tl = parse_int(f, v);
        else if (!strcmp(f, "--T")) a.T = parse_int(f, v);
        else if (!strcmp(f, "--NH")) a.NH = parse_int(f, v);
        else if (!strcmp(f, "--HS")) a.HS = parse_int(f, v);
        else if (!strcmp(f, "--fail-rank")) a.fail_rank = parse_int(f, v);
        else fail_msg("unknown or incomplete argument '%s'", f);
        k++;
    }
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
static real uniform(uint64_t seed, uint64_t index) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (real)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// The full problem of one dp group and its single-process reference.
typedef struct {
    int B, T, NH, HS, C;
    real *qkv, *dout;           // (B, T, 3C), (B, T, C)
    real *out, *lse, *dqkv;     // (B, T, C), (B, NH, T), (B, T, 3C)
} Reference;

static Reference make_reference(int dp_index, int B, int T, int NH, int HS) {
    Reference r = {.B = B, .T = T, .NH = NH, .HS = HS, .C = NH * HS};
    const size_t n3 = (size_t)B * T * 3 * r.C, n1 = (size_t)B * T * r.C;
    r.qkv = xmalloc(sizeof(real) * n3, "reference qkv");
    r.dout = xmalloc(sizeof(real) * n1, "reference dout");
    r.out = xmalloc(sizeof(real) * n1, "reference out");
    r.lse = xmalloc(sizeof(real) * B * NH * T, "reference lse");
    r.dqkv = xcalloc(n3, sizeof(real), "reference dqkv");
    real* d = xmalloc(sizeof(real) * B * NH * T, "reference d");
    // Scaled so that softmax rows are far from uniform.
    for (size_t e = 0; e < n3; e++) r.qkv[e] = 2 * uniform(2 * dp_index + 1, e);
    for (size_t e = 0; e < n1; e++) r.dout[e] = uniform(2 * dp_index + 2, e);
    const int C = r.C;
    AttentionProblem p = {.B = B, .NH = NH, .HS = HS, .Tq = T, .Tk = T, .qpos = {0, 1},
                          .kpos = {0, 1}};
    attention_partial_forward(&p, r.qkv, 3 * C, r.qkv + C, 3 * C, r.qkv + 2 * C, 3 * C, r.out, C,
                              r.lse);
    attention_row_dot(&p, r.out, C, r.dout, C, d);
    attention_partial_backward(&p, r.qkv, 3 * C, r.qkv + C, 3 * C, r.qkv + 2 * C, 3 * C, r.dout,
                               C, r.lse, d, r.dqkv, 3 * C, r.dqkv + C, 3 * C, r.dqkv + 2 * C,
                               3 * C);
    free(d);
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
                       TokenPositions pos) {
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < Tl; j++) {
            const real* src = full + ((long)b * T + pos.off + pos.stride * j) * ld + col;
            memcpy(dst + ((long)b * Tl + j) * w, src, sizeof(real) * w);
        }
    }
}

// max |local - ref(slice)| over a (B, Tl, w) column block of rows of stride ld (both sides).
static double row_error(const real* local, const real* full, int B, int T, int Tl, long ld,
                        int col, int w, TokenPositions pos) {
    double err = 0;
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < Tl; j++) {
            const real* x = local + ((long)b * Tl + j) * ld + col;
            const real* y = full + ((long)b * T + pos.off + pos.stride * j) * ld + col;
            for (int e = 0; e < w; e++) err = fmax(err, fabs((double)x[e] - y[e]));
        }
    }
    return err;
}

static double max_abs_cols(const real* full, long rows, long ld, int col, int w) {
    double m = 0;
    for (long i = 0; i < rows; i++) {
        for (int e = 0; e < w; e++) m = fmax(m, fabs((double)full[i * ld + col + e]));
    }
    return m;
}

enum { ERR_OUT, ERR_LSE, ERR_DQ, ERR_DK, ERR_DV, NERR };
static const char* ERR_NAMES[NERR] = {"out", "lse", "dq", "dk", "dv"};

// Relative errors of this rank's results against the reference, for one layer.
static void compare(double err[NERR], const Reference* ref, int Tl, TokenPositions pos,
                    const real* out, const real* lse, const real* dqkv) {
    const int B = ref->B, T = ref->T, C = ref->C, NH = ref->NH;
    err[ERR_OUT] = row_error(out, ref->out, B, T, Tl, C, 0, C, pos) /
                   max_abs_cols(ref->out, (long)B * T, C, 0, C);
    // lse (B, NH, T) is (B*NH, T, 1) rows
    err[ERR_LSE] = row_error(lse, ref->lse, B * NH, T, Tl, 1, 0, 1, pos) /
                   max_abs_cols(ref->lse, (long)B * NH * T, 1, 0, 1);
    for (int part = 0; part < 3; part++) {
        err[ERR_DQ + part] = row_error(dqkv, ref->dqkv, B, T, Tl, 3 * C, part * C, C, pos) /
                             max_abs_cols(ref->dqkv, (long)B * T, 3 * C, part * C, C);
    }
}

// Compares the counters of every layer and phase with the closed form; prints mismatches.
static int check_volume(const Comm* comm, const char* name, const CommVolume expected[2]) {
    int bad = 0;
    for (int layer = 0; layer < NUM_LAYERS; layer++) {
        for (int phase = 0; phase < 2; phase++) {
            for (int kind = 0; kind < COMM_NKINDS; kind++) {
                const CommCount want = expected[phase].kind[kind];
                const CommCount got = comm_count(comm, layer, phase, kind);
                if (got.bytes == want.bytes && got.messages == want.messages &&
                    got.calls == want.calls) {
                    continue;
                }
                fprintf(stderr,
                        "rank %d: %s layer %d %s %s: expected %lld bytes %lld messages %lld "
                        "calls, counted %lld %lld %lld\n",
                        comm->mesh.world_rank, name, layer, comm_phase_name(phase),
                        comm_kind_name(kind), want.bytes, want.messages, want.calls, got.bytes,
                        got.messages, got.calls);
                bad = 1;
            }
        }
    }
    return bad;
}

// Largest value of x over the world (every rank gets it).
static double world_max(Comm* comm, double x) {
    const int n = comm_size(comm, MESH_WORLD);
    double* all = xmalloc(sizeof(double) * n, "world values");
    comm_all_gather(comm, MESH_WORLD, &x, all, 1, COMM_F64);
    double m = all[0];
    for (int k = 1; k < n; k++) m = fmax(m, all[k]);
    free(all);
    return m;
}

typedef enum { SCHED_2D, SCHED_2D_KEEP, SCHED_RING, SCHED_STRIPED, NSCHED } Schedule;
static const char* SCHED_NAMES[NSCHED] = {"2d", "2d-keep", "ring", "striped"};

static AttentionLayer* create_schedule(Schedule s, Comm* comm, const Args* a) {
    // Bounds above the call's B and HS, so a stride taken from the bounds would show.
    const int B = a->B + 1, HS = a->HS + 1;
    switch (s) {
    case SCHED_2D: return attention2d_create(comm, B, a->Tl, a->NH, HS, 0);
    case SCHED_2D_KEEP: return attention2d_create(comm, B, a->Tl, a->NH, HS, NUM_LAYERS);
    case SCHED_RING: return attention_ring_create(comm, RING_CONTIGUOUS, B, a->Tl, a->NH, HS);
    default: return attention_ring_create(comm, RING_CYCLIC, B, a->Tl, a->NH, HS);
    }
}

static TokenPositions expected_positions(Schedule s, const Mesh* m, int Tl) {
    if (s == SCHED_RING) return (TokenPositions){(long)m->sp_index * Tl, 1};
    return (TokenPositions){m->sp_index, m->P};
}

static CommVolume expected_volume(Schedule s, const Mesh* m, CommPhase phase, const Args* a) {
    if (s == SCHED_RING || s == SCHED_STRIPED) {
        return ring_volume(m, phase, a->B, a->Tl, a->NH, a->HS, sizeof(real));
    }
    return attention2d_volume(m, phase, a->B, a->Tl, a->NH, a->HS, s == SCHED_2D_KEEP,
                              sizeof(real));
}

// Runs one schedule for NUM_LAYERS layers and checks it. Returns 1 on failure (on every rank).
static int run_schedule(Schedule s, Comm* comm, const Args* a, const Reference* ref) {
    const Mesh* m = &comm->mesh;
    const int B = a->B, Tl = a->Tl, NH = a->NH, HS = a->HS, C = NH * HS;
    AttentionLayer* layer = create_schedule(s, comm, a);
    const TokenPositions pos = layer->positions, want = expected_positions(s, m, Tl);
    int bad = pos.off != want.off || pos.stride != want.stride;
    if (bad) {
        fprintf(stderr, "rank %d: %s positions (%ld, %ld), expected (%ld, %ld)\n", m->world_rank,
                layer->name, pos.off, pos.stride, want.off, want.stride);
    }

    real* qkv = xmalloc(sizeof(real) * B * Tl * 3 * C, "local qkv");
    real* dout = xmalloc(sizeof(real) * B * Tl * C, "local dout");
    real* out[NUM_LAYERS];
    real* lse[NUM_LAYERS];
    real* dqkv[NUM_LAYERS];
    slice_rows(qkv, ref->qkv, B, ref->T, Tl, 3 * C, 0, 3 * C, pos);
    slice_rows(dout, ref->dout, B, ref->T, Tl, C, 0, C, pos);
    comm_reset_counts(comm);
    // Both forwards before both backwards, as in training: kept K/V must not mix layers.
    for (int l = 0; l < NUM_LAYERS; l++) {
        out[l] = xmalloc(sizeof(real) * B * Tl * C, "local out");
        lse[l] = xmalloc(sizeof(real) * B * NH * Tl, "local lse");
        dqkv[l] = xmalloc(sizeof(real) * B * Tl * 3 * C, "local dqkv");
        for (long e = 0; e < (long)B * Tl * 3 * C; e++) dqkv[l][e] = NAN;   // unwritten shows
        layer->forward(layer, l, B, Tl, NH, HS, qkv, out[l], lse[l]);
    }
    for (int l = NUM_LAYERS - 1; l >= 0; l--) {
        layer->backward(layer, l, B, Tl, NH, HS, qkv, out[l], lse[l], dout, dqkv[l]);
    }
    double err[NERR] = {0};
    for (int l = 0; l < NUM_LAYERS; l++) {
        double e[NERR];
        compare(e, ref, Tl, pos, out[l], lse[l], dqkv[l]);
        for (int k = 0; k < NERR; k++) err[k] = fmax(err[k], isnan(e[k]) ? INFINITY : e[k]);
        free(out[l]);
        free(lse[l]);
        free(dqkv[l]);
    }
    const CommVolume expected[2] = {expected_volume(s, m, COMM_FORWARD, a),
                                    expected_volume(s, m, COMM_BACKWARD, a)};
    const int volume_bad = world_max(comm, check_volume(comm, layer->name, expected)) > 0;
    const CommCount fwd = comm_count_total(comm, 0, COMM_FORWARD);
    const CommCount bwd = comm_count_total(comm, 0, COMM_BACKWARD);

    // Everything below is outside the layer scopes.
    double worst = 0;
    for (int k = 0; k < NERR; k++) {
        err[k] = world_max(comm, err[k]);
        worst = fmax(worst, err[k]);
    }
    bad = world_max(comm, bad) > 0 || volume_bad || !(worst <= TOLERANCE);
    const double fwd_max = world_max(comm, (double)fwd.bytes);
    const double bwd_max = world_max(comm, (double)bwd.bytes);
    if (m->world_rank == 0) {
        printf("%-4s %-8s dp %d mesh %dx%d T %d:", bad ? "FAIL" : "ok", SCHED_NAMES[s], m->dp,
               m->pq, m->pkv, Tl * m->P);
        for (int k = 0; k < NERR; k++) printf(" %s %.1e", ERR_NAMES[k], err[k]);
        printf(" | max bytes/rank/layer fwd %.0f bwd %.0f, %s\n", fwd_max, bwd_max,
               volume_bad ? "COUNTERS DIFFER FROM THE CLOSED FORM" : "counters = closed form");
    }
    free(qkv);
    free(dout);
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
    Comm* comm = comm_mpi_create(&mesh, NUM_LAYERS);
    if (rank == a.fail_rank) read_input_file(a.fail_file ? a.fail_file : "");

    Reference ref = make_reference(mesh.dp_index, a.B, a.Tl * mesh.P, a.NH, a.HS);
    int failed = 0, ran = 0;
    for (int s = 0; s < NSCHED; s++) {
        const int pick = !strcmp(a.algo, "all") || !strcmp(a.algo, SCHED_NAMES[s]);
        if (!pick) continue;
        failed |= run_schedule(s, comm, &a, &ref);
        ran++;
    }
    if (!ran) fail_msg("--algo %s: expected 2d, 2d-keep, ring, striped or all", a.algo);
    free_reference(&ref);
    comm_destroy(comm);
    comm_mpi_finalize();
    return failed;
}
