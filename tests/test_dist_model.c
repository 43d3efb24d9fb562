// Distributed training equals single-process training, for the whole model. Run under mpirun
// (tests/mpirun.sh): every rank builds the GPT with a distributed attention schedule on its
// local tokens (B sequences of T/P tokens, taken with layout_take at the schedule's positions),
// initialises the parameters from the same seed, runs forward + backward on a deterministic
// batch (each dp group its own sequences, several accumulated micro-batches), all-reduces the
// gradients (sum over the world, dloss = 1 / global tokens) and the loss, and compares them with
// a single-process model (attention_local_create) that every rank runs on the full batch: the
// sequences of all dp groups, all T tokens. Errors are max |a - b| / max |b| per tensor.
//
//   test_dist_model --dp D --pq Q --pkv K
//                   [--attention 2d|2d-keep|ring|striped|zigzag|ulysses|usp|local|all]
//                   [--B 2] [--T 32] [--micro 2] [--layers 2] [--channels 32] [--heads 4]
//                   [--kv-heads 0 (= heads; fewer: grouped-query attention)]
//                   [--rope-theta 0 (learned positions; N: rotary positions, base N)]
//                   [--rope-scaling none|linear|yarn|llama3 (x4 from T/2 positions)]
//                   [--llama (RMSNorm, SwiGLU MLP of hidden width 48)] [--no-linear-bias]
//                   [--qwen2 (--no-linear-bias but the qkv projection's, the norms' eps 1e-6)]
//                   [--untied (the classifier's own matrix)]
//                   [--vocab 300] [--context 0 (= 2T)] [--verbose]
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_attention.h"
#include "comm/comm_mpi.h"
#include "comm/fail.h"
#include "data/loader.h"
#include "model/gpt.h"
#include "model/init.h"

static const double TOLERANCE = 1e-5;
static const uint64_t SEED = 20240520;

typedef struct {
    int dp, pq, pkv, B, T, micro, L, C, NH, V, context, verbose;
    int NKV;      // key/value heads (--kv-heads; 0: NH)
    int rope;     // rotary positions' theta (--rope-theta; 0: learned positions)
    int scaling;  // ROPE_SCALING_* (--rope-scaling: factor 4 from T/2 positions)
    int chunks;   // ulysses and usp: head chunks
    int llama;    // Llama's block: RMSNorm and a SwiGLU MLP (--llama)
    int no_bias;  // linear layers without biases (--no-linear-bias)
    int qwen2;    // the qkv projection's bias alone and eps 1e-6 (--qwen2)
    int untied;   // an untied classifier (--untied)
    const char* attention;
} Args;

static int parse_int(const char* flag, const char* value) {
    char* end = NULL;
    errno = 0;
    const long v = value ? strtol(value, &end, 10) : 0;
    if (!value || *end || errno || v < 0 || v > 1 << 20)
        fail_msg("%s: expected a count, found '%s'", flag, value ? value : "");
    return (int)v;
}

static Args parse_args(int argc, char** argv) {
    Args a = {.dp = 1, .pq = 1, .pkv = 1, .B = 2, .T = 32, .micro = 2, .L = 2, .C = 32,
              .NH = 4, .V = 300, .context = 0, .verbose = 0, .chunks = 1, .attention = "all"};
    for (int k = 1; k < argc; k++) {
        const char* f = argv[k];
        const char* v = k + 1 < argc ? argv[k + 1] : NULL;
        if (!strcmp(f, "--verbose")) { a.verbose = 1; continue; }
        if (!strcmp(f, "--llama")) { a.llama = 1; continue; }
        if (!strcmp(f, "--no-linear-bias")) { a.no_bias = 1; continue; }
        if (!strcmp(f, "--qwen2")) { a.no_bias = a.qwen2 = 1; continue; }
        if (!strcmp(f, "--untied")) { a.untied = 1; continue; }
        if (!strcmp(f, "--attention") && v) a.attention = v;
        else if (!strcmp(f, "--dp")) a.dp = parse_int(f, v);
        else if (!strcmp(f, "--pq")) a.pq = parse_int(f, v);
        else if (!strcmp(f, "--pkv")) a.pkv = parse_int(f, v);
        else if (!strcmp(f, "--B")) a.B = parse_int(f, v);
        else if (!strcmp(f, "--T")) a.T = parse_int(f, v);
        else if (!strcmp(f, "--micro")) a.micro = parse_int(f, v);
        else if (!strcmp(f, "--layers")) a.L = parse_int(f, v);
        else if (!strcmp(f, "--channels")) a.C = parse_int(f, v);
        else if (!strcmp(f, "--heads")) a.NH = parse_int(f, v);
        else if (!strcmp(f, "--kv-heads")) a.NKV = parse_int(f, v);
        else if (!strcmp(f, "--rope-theta")) a.rope = parse_int(f, v);
        else if (!strcmp(f, "--rope-scaling") && v && rope_scaling_parse(v) >= 0)
            a.scaling = rope_scaling_parse(v);
        else if (!strcmp(f, "--vocab")) a.V = parse_int(f, v);
        else if (!strcmp(f, "--context")) a.context = parse_int(f, v);
        else if (!strcmp(f, "--chunks")) a.chunks = parse_int(f, v);
        else fail_msg("unknown or incomplete argument '%s'", f);
        k++;
    }
    if (a.B < 1 || a.micro < 1 || a.L < 1 || a.NH < 1 || a.C < a.NH || a.V < 2)
        fail_msg("expected positive --B, --micro, --layers, --heads, --channels >= heads, --vocab >= 2");
    if (a.context == 0) a.context = 2 * a.T;   // position rows past T must stay untouched
    if (a.context < a.T) fail_msg("--context %d: expected at least --T %d", a.context, a.T);
    return a;
}

// Token of window row b, position t (0..T) of micro-batch `micro` of dp group d: a fixed hash,
// the same on every rank. Repeats inside a row make some tokens' wte gradients sum several rows.
static int32_t token_at(const Args* a, int micro, int d, int b, int t) {
    uint64_t z = SEED + 0x9E3779B97F4A7C15ull * (uint64_t)(((micro * 64 + d) * 64 + b) * 4096 + t);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (int32_t)(z % (uint64_t)(t % 5 == 4 ? 7 : a->V));   // every 5th token from a small set
}

// The windows of one micro-batch: rows [row0, row0 + nrows) of inputs and targets, (nrows, T),
// for dp groups d0.. (B rows each).
static void fill_windows(const Args* a, int micro, int d0, int ngroups, int32_t* in, int32_t* tg) {
    for (int g = 0; g < ngroups; g++) {
        for (int b = 0; b < a->B; b++) {
            const size_t row = (size_t)(g * a->B + b) * a->T;
            for (int t = 0; t < a->T; t++) {
                in[row + t] = token_at(a, micro, d0 + g, b, t);
                tg[row + t] = token_at(a, micro, d0 + g, b, t + 1);
            }
        }
    }
}

// GPT-2's initialisation, then the Q/K/V weights and the token embedding scaled up, so that
// attention is far from uniform and the logits far from flat (at the plain init every softmax
// row is nearly flat, the loss is nearly log V, and a wrong mask or merge barely shows).
static void init_params(const GPTConfig* cfg, GPT* m) {
    gpt_init_params(cfg, SEED, GPT_INIT_STD, m->params_memory);
    for (size_t e = 0; e < m->param_sizes[4]; e++) m->params.qkvw[e] *= 10;
    for (size_t e = 0; e < m->param_sizes[0]; e++) m->params.wte[e] *= 10;
}

static double world_max(Comm* comm, double x) {
    comm_set_scope(comm, COMM_NO_LAYER, COMM_OTHER);
    const int n = comm_size(comm, MESH_WORLD);
    double* all = xmalloc(sizeof(double) * n, "world values");
    comm_all_gather(comm, MESH_WORLD, &x, all, 1, COMM_F64);
    double m = all[0];
    for (int k = 1; k < n; k++) m = fmax(m, isnan(all[k]) ? INFINITY : all[k]);
    free(all);
    return isnan(m) ? INFINITY : m;
}

static double rel_error(const real* x, const real* ref, size_t n) {
    double err = 0, scale = 0;
    for (size_t e = 0; e < n; e++) {
        const double d = fabs((double)x[e] - ref[e]);
        err = isnan(d) || d > err ? d : err;
        scale = fmax(scale, fabs((double)ref[e]));
    }
    if (isnan(err)) return INFINITY;
    return scale > 0 ? err / scale : err;
}

// The single-process result on the full batch (all dp groups, all T tokens).
typedef struct {
    double loss;          // mean over all tokens of all micro-batches
    real* grads;          // num_params
    real* losses;         // (micro, dp * B, T) per-token losses
} Reference;

static Reference run_reference(const Args* a, const GPTConfig* cfg) {
    const int rows = a->dp * a->B, T = a->T;
    AttentionLayer* local = attention_local_create(rows, T, a->NH, gpt_kv_heads(cfg), a->C / a->NH);
    GPT m;
    gpt_create(&m, cfg, rows, T, local, 1);
    init_params(cfg, &m);
    int32_t* in = xmalloc(sizeof(int32_t) * rows * T, "reference inputs");
    int32_t* tg = xmalloc(sizeof(int32_t) * rows * T, "reference targets");
    Reference r = {0};
    r.losses = xmalloc(sizeof(real) * a->micro * rows * T, "reference losses");
    const real dloss = (real)(1.0 / ((double)a->micro * rows * T));
    gpt_zero_grad(&m);
    gpt_loss_zero(&m);
    for (int k = 0; k < a->micro; k++) {
        fill_windows(a, k, 0, a->dp, in, tg);
        gpt_forward(&m, in, tg);
        gpt_backward(&m, dloss);   // the per-token losses come from the backward's classifier
        memcpy(r.losses + (size_t)k * rows * T, m.acts.losses, sizeof(real) * rows * T);
    }
    r.loss = gpt_loss_read(&m) / ((double)a->micro * rows * T);
    r.grads = xmalloc(sizeof(real) * m.num_params, "reference gradients");
    memcpy(r.grads, m.grads_memory, sizeof(real) * m.num_params);
    free(in);
    free(tg);
    gpt_free(&m);
    attention_layer_free(local);
    return r;
}

typedef enum {
    SCHED_LOCAL, SCHED_2D, SCHED_2D_KEEP, SCHED_RING, SCHED_STRIPED, SCHED_ZIGZAG, SCHED_ULYSSES,
    SCHED_USP, NSCHED
} Schedule;
static const char* SCHED_NAMES[NSCHED] = {"local", "2d", "2d-keep", "ring", "striped", "zigzag",
                                          "ulysses", "usp"};

static AttentionLayer* create_schedule(Schedule s, Comm* comm, const Args* a, int Tl) {
    const int HS = a->C / a->NH, NKV = a->NKV ? a->NKV : a->NH;
    switch (s) {
    case SCHED_LOCAL: return attention_local_create(a->B, Tl, a->NH, NKV, HS);
    case SCHED_2D: return attention2d_create(comm, a->B, Tl, a->NH, NKV, HS, 0);
    case SCHED_2D_KEEP: return attention2d_create(comm, a->B, Tl, a->NH, NKV, HS, a->L);
    case SCHED_RING: return attention_ring_create(comm, RING_CONTIGUOUS, a->B, Tl, a->NH, NKV, HS);
    case SCHED_ZIGZAG: return attention_ring_create(comm, RING_ZIGZAG, a->B, Tl, a->NH, NKV, HS);
    case SCHED_ULYSSES: return attention_ulysses_create(comm, a->B, Tl, a->NH, NKV, HS, a->chunks);
    case SCHED_USP: return attention_usp_create(comm, a->B, Tl, a->NH, NKV, HS, a->chunks);
    default: return attention_ring_create(comm, RING_CYCLIC, a->B, Tl, a->NH, NKV, HS);
    }
}

// Runs one schedule and compares it with the reference. Returns 1 on failure (on every rank).
static int run_schedule(Schedule s, Comm* comm, const Args* a, const GPTConfig* cfg,
                        const Reference* ref) {
    const Mesh* mesh = &comm->mesh;
    const int B = a->B, T = a->T, P = mesh->P, Tl = T / P, rows = a->dp * B;
    AttentionLayer* layer = create_schedule(s, comm, a, Tl);
    long* pos = xmalloc(sizeof(long) * Tl, "local positions");
    token_layout_positions(layer->positions, Tl, pos);
    GPT m;
    gpt_create(&m, cfg, B, Tl, layer, 1);
    init_params(cfg, &m);

    int32_t* full_in = xmalloc(sizeof(int32_t) * B * T, "window inputs");
    int32_t* full_tg = xmalloc(sizeof(int32_t) * B * T, "window targets");
    int32_t* in = xmalloc(sizeof(int32_t) * B * Tl, "local inputs");
    int32_t* tg = xmalloc(sizeof(int32_t) * B * Tl, "local targets");
    const real dloss = (real)(1.0 / ((double)a->micro * rows * T));
    double sum = 0, token_err = 0;
    gpt_zero_grad(&m);
    gpt_loss_zero(&m);
    for (int k = 0; k < a->micro; k++) {
        fill_windows(a, k, mesh->dp_index, 1, full_in, full_tg);
        layout_take(full_in, B, T, pos, Tl, in);
        layout_take(full_tg, B, T, pos, Tl, tg);
        gpt_forward(&m, in, tg);
        gpt_backward(&m, dloss);
        // Per-token losses of the local tokens against the reference's rows of this dp group.
        for (int b = 0; b < B; b++) {
            const real* rl = ref->losses + ((size_t)k * rows + (size_t)mesh->dp_index * B + b) * T;
            for (int j = 0; j < Tl; j++) {
                const double d = fabs((double)m.acts.losses[b * Tl + j] -
                                      rl[pos[j]]);
                token_err = isnan(d) ? INFINITY : fmax(token_err, d / fabs(ref->loss));
            }
        }
    }
    sum = gpt_loss_read(&m);
    comm_set_scope(comm, COMM_NO_LAYER, COMM_OTHER);
    comm_all_reduce_sum(comm, MESH_WORLD, &sum, 1, COMM_F64);
    comm_all_reduce_sum(comm, MESH_WORLD, m.grads_memory, m.num_params, COMM_REAL);
    const double loss = sum / ((double)a->micro * rows * T);

    double err[NUM_PARAM_TENSORS], worst = 0;
    int worst_tensor = 0;
    size_t offset = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        err[i] = world_max(comm, rel_error(m.grads_memory + offset, ref->grads + offset,
                                           m.param_sizes[i]));
        offset += m.param_sizes[i];
        if (!(err[i] <= worst)) {
            worst = err[i];
            worst_tensor = i;
        }
    }
    const double loss_err = world_max(comm, isnan(loss) ? INFINITY : fabs(loss - ref->loss) / fabs(ref->loss));
    token_err = world_max(comm, token_err);
    const int bad = !(loss_err <= TOLERANCE) || !(token_err <= TOLERANCE) || !(worst <= TOLERANCE);
    if (mesh->world_rank == 0) {
        printf("%-4s %-7s dp %d mesh %dx%d B %d T %d micro %d: loss %.6f (ref %.6f) err %.1e, "
               "token losses %.1e, gradients %.1e (worst %s)\n",
               bad ? "FAIL" : "ok", SCHED_NAMES[s], mesh->dp, mesh->pq, mesh->pkv, B, T,
               a->micro, loss, ref->loss, loss_err, token_err, worst,
               gpt_param_name(worst_tensor));
        if (a->verbose || bad) {
            printf("    ");
            for (int i = 0; i < NUM_PARAM_TENSORS; i++)
                printf(" %s %.1e", gpt_param_name(i), err[i]);
            printf("\n");
        }
        fflush(stdout);
    }
    free(full_in);
    free(full_tg);
    free(in);
    free(tg);
    free(pos);
    gpt_free(&m);
    attention_layer_free(layer);
    return bad;
}

int main(int argc, char** argv) {
    int rank = 0, size = 1;
    comm_mpi_init(&argc, &argv, &rank, &size);
    const Args a = parse_args(argc, argv);
    Mesh mesh;
    char err[ERR_LEN];
    if (mesh_init(&mesh, a.dp, a.pq, a.pkv, rank, size, err) != 0) fail_msg("%s", err);
    if (mesh_check_seq_len(&mesh, a.T, err) != 0) fail_msg("%s", err);
    GPTConfig cfg = {.max_T = a.context, .V = a.V, .Vp = gpt_padded_vocab(a.V), .L = a.L,
                     .NH = a.NH, .C = a.C, .kv_heads = a.NKV,
                     .rope_theta = a.rope, .rope_scaling = a.scaling,
                     .rope_factor = a.scaling ? 4.0f : 0, .rope_original_T = a.scaling ? a.T / 2 : 0,
                     .norm = a.llama ? GPT_NORM_RMSNORM : GPT_NORM_LAYERNORM,
                     .mlp = a.llama ? GPT_MLP_SWIGLU : GPT_MLP_GELU, .ffn_hidden = a.llama ? 48 : 0,
                     .no_linear_bias = a.no_bias, .untied_classifier = a.untied,
                     .norm_eps = a.qwen2 ? 1e-6f : 0, .qkv_bias = a.qwen2};
    if (gpt_config_validate(&cfg, err, sizeof err) != 0) fail_msg("%s", err);
    Comm* comm = comm_mpi_create(&mesh, a.L);

    const Reference ref = run_reference(&a, &cfg);
    int failed = 0, ran = 0;
    for (int s = 0; s < NSCHED; s++) {
        const int all = !strcmp(a.attention, "all");
        const int pick = all ? (s != SCHED_LOCAL || mesh.P == 1)
                             : !strcmp(a.attention, SCHED_NAMES[s]);
        if (!pick) continue;
        if (s == SCHED_LOCAL && mesh.P != 1)
            fail_msg("--attention local: needs --pq 1 --pkv 1 (found %dx%d)", mesh.pq, mesh.pkv);
        if (s == SCHED_ZIGZAG && (a.T / mesh.P) % 2 != 0) {   // two chunks per rank
            if (!all)
                fail_msg("--attention zigzag: --T %d is not a multiple of 2P = %d", a.T, 2 * mesh.P);
            if (rank == 0) printf("skip zigzag: T/P = %d is odd\n", a.T / mesh.P);
            continue;
        }
        // Ulysses: NKV / P key/value heads per rank; USP: NKV / pq.
        const int split = s == SCHED_ULYSSES ? mesh.P : s == SCHED_USP ? mesh.pq : 1;
        const char* over = s == SCHED_ULYSSES ? "P" : "pq";
        const int nkv = gpt_kv_heads(&cfg);
        if (nkv % split != 0 || ((s == SCHED_ULYSSES || s == SCHED_USP) && nkv / split % a.chunks)) {
            if (!all)
                fail_msg("--attention %s: expected %s = %d times --chunks %d to divide the "
                         "key/value heads, found %d", SCHED_NAMES[s], over, split, a.chunks, nkv);
            if (rank == 0)
                printf("skip %s: %d key/value heads are not a multiple of %s = %d times %d "
                       "chunks\n", SCHED_NAMES[s], nkv, over, split, a.chunks);
            continue;
        }
        failed |= run_schedule(s, comm, &a, &cfg, &ref);
        ran++;
    }
    if (!ran)
        fail_msg("--attention %s: expected 2d, 2d-keep, ring, striped, zigzag, ulysses, usp, "
                 "local or all", a.attention);
    free(ref.grads);
    free(ref.losses);
    comm_destroy(comm);
    comm_mpi_finalize();
    return failed;
}
