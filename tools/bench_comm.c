// Communication volume of ATTENTION2D, the ring family, Ulysses and USP on one SP group of P ranks
// (run under mpirun with P = pq * pkv ranks): bytes and messages each rank receives in one
// layer's forward and backward, measured by the comm counters (and checked against the closed
// form), the measured ring/2d ratio, and the causal load balance (unmasked scores per rank,
// max over mean) at a long sequence. Prints markdown table rows.
//
//   bench_comm --pq Q --pkv K [--B 1] [--Tl 2] [--NH 2] [--HS 64] [--T-balance 4096] [--no-header]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_cost.h"
#include "comm/comm_mpi.h"
#include "comm/fail.h"

typedef struct {
    int pq, pkv, B, Tl, NH, HS, header;
    long T_balance;
} Args;

static Args parse_args(int argc, char** argv) {
    Args a = {.pq = 1, .pkv = 1, .B = 1, .Tl = 2, .NH = 2, .HS = 64, .header = 1,
              .T_balance = 4096};
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--no-header")) {
            a.header = 0;
            continue;
        }
        if (k + 1 >= argc) fail_msg("%s: missing value", argv[k]);
        const long v = atol(argv[++k]);
        if (v < 1) fail_msg("%s %s: expected a positive number", argv[k - 1], argv[k]);
        if (!strcmp(argv[k - 1], "--pq")) a.pq = (int)v;
        else if (!strcmp(argv[k - 1], "--pkv")) a.pkv = (int)v;
        else if (!strcmp(argv[k - 1], "--B")) a.B = (int)v;
        else if (!strcmp(argv[k - 1], "--Tl")) a.Tl = (int)v;
        else if (!strcmp(argv[k - 1], "--NH")) a.NH = (int)v;
        else if (!strcmp(argv[k - 1], "--HS")) a.HS = (int)v;
        else if (!strcmp(argv[k - 1], "--T-balance")) a.T_balance = v;
        else fail_msg("unknown argument '%s'", argv[k - 1]);
    }
    return a;
}

enum { SCHED_2D, SCHED_RING, SCHED_STRIPED, SCHED_ZIGZAG, SCHED_ULYSSES, SCHED_USP, NSCHED };
static const char* NAMES[NSCHED] = {"attention2d", "ring", "striped", "zigzag", "ulysses", "usp"};
// The token layout of each ring schedule (unused for SCHED_2D and SCHED_ULYSSES; USP's row ring).
static const RingLayout RING_LAYOUT[NSCHED] = {RING_CONTIGUOUS, RING_CONTIGUOUS, RING_CYCLIC,
                                               RING_ZIGZAG, RING_CYCLIC, RING_CYCLIC};

typedef struct {
    double fwd_bytes_max, fwd_bytes_mean, fwd_msgs_max, bwd_bytes_max, bwd_bytes_mean,
        bwd_msgs_max, balance;
    int formula_ok;
} Row;

static void max_mean(Comm* comm, double x, double* max, double* mean) {
    const int n = comm_size(comm, MESH_WORLD);
    double* all = xmalloc(sizeof(double) * n, "bench values");
    comm_all_gather(comm, MESH_WORLD, &x, all, 1, COMM_F64);
    *max = 0;
    *mean = 0;
    for (int k = 0; k < n; k++) {
        *max = all[k] > *max ? all[k] : *max;
        *mean += all[k] / n;
    }
    free(all);
}

static int same_volume(const Comm* comm, CommPhase phase, const CommVolume* v) {
    for (int k = 0; k < COMM_NKINDS; k++) {
        const CommCount c = comm_count(comm, 0, phase, k);
        if (c.bytes != v->kind[k].bytes || c.messages != v->kind[k].messages) return 0;
    }
    return 1;
}

// Unmasked scores per rank over all P ranks of the mesh: max / mean.
static double balance(int sched, const Mesh* m, long T) {
    if (sched == SCHED_ULYSSES) return 1;   // every rank: all pairs of NH / P heads
    // USP: the ranks of a column share their heads' work as Striped over the pkv ranks of a row
    const int n = sched == SCHED_USP ? m->pkv : m->P;
    double max = 0, sum = 0;
    for (int i = 0; i < n; i++) {
        const long long pairs =
            sched == SCHED_2D ? attention2d_visible_pairs(m->pq, m->pkv, i % m->pq, i / m->pq, T, 0, NULL)
                              : ring_visible_pairs(RING_LAYOUT[sched], n, i, T, 0, NULL);
        max = pairs > max ? pairs : max;
        sum += pairs;
    }
    return max / (sum / n);
}

static Row measure(int sched, Comm* comm, const Args* a) {
    const int B = a->B, Tl = a->Tl, NH = a->NH, HS = a->HS, C = NH * HS;
    const Mesh* m = &comm->mesh;
    AttentionLayer* layer = sched == SCHED_2D ? attention2d_create(comm, B, Tl, NH, NH, HS, 0)
                            : sched == SCHED_ULYSSES ? attention_ulysses_create(comm, B, Tl, NH, NH, HS, 1)
                            : sched == SCHED_USP
                                ? attention_usp_create(comm, B, Tl, NH, NH, HS, 1)
                                : attention_ring_create(comm, RING_LAYOUT[sched], B, Tl, NH, NH, HS);
    real* qkv = xmalloc(sizeof(real) * B * Tl * 3 * C, "bench qkv");
    real* dout = xmalloc(sizeof(real) * B * Tl * C, "bench dout");
    real* out = xmalloc(sizeof(real) * B * Tl * C, "bench out");
    real* lse = xmalloc(sizeof(real) * B * NH * Tl, "bench lse");
    real* dqkv = xmalloc(sizeof(real) * B * Tl * 3 * C, "bench dqkv");
    for (long e = 0; e < (long)B * Tl * 3 * C; e++) qkv[e] = (real)((e * 7919 % 201) - 100) / 100;
    for (long e = 0; e < (long)B * Tl * C; e++) dout[e] = (real)((e * 104729 % 201) - 100) / 100;

    comm_reset_counts(comm);
    layer->forward(layer, 0, 0, B, Tl, NH, NH, HS, qkv, out, lse);
    layer->backward(layer, 0, 0, B, Tl, NH, NH, HS, qkv, out, lse, dout, dqkv);
    const CommCount fwd = comm_count_total(comm, 0, COMM_FORWARD);
    const CommCount bwd = comm_count_total(comm, 0, COMM_BACKWARD);
    CommVolume vf, vb;
    if (sched == SCHED_2D) {
        vf = attention2d_volume(m, COMM_FORWARD, B, Tl, NH, NH, HS, 0, sizeof(real), sizeof(real));
        vb = attention2d_volume(m, COMM_BACKWARD, B, Tl, NH, NH, HS, 0, sizeof(real), sizeof(real));
    } else if (sched == SCHED_ULYSSES) {
        vf = ulysses_volume(m, COMM_FORWARD, B, Tl, NH, NH, HS, 1, sizeof(real), sizeof(real));
        vb = ulysses_volume(m, COMM_BACKWARD, B, Tl, NH, NH, HS, 1, sizeof(real), sizeof(real));
    } else if (sched == SCHED_USP) {
        vf = usp_volume(m, COMM_FORWARD, B, Tl, NH, NH, HS, 1, sizeof(real), sizeof(real));
        vb = usp_volume(m, COMM_BACKWARD, B, Tl, NH, NH, HS, 1, sizeof(real), sizeof(real));
    } else {
        vf = ring_volume(m, COMM_FORWARD, B, Tl, NH, NH, HS, m->P, sizeof(real), sizeof(real));
        vb = ring_volume(m, COMM_BACKWARD, B, Tl, NH, NH, HS, m->P, sizeof(real), sizeof(real));
    }
    const int ok = same_volume(comm, COMM_FORWARD, &vf) && same_volume(comm, COMM_BACKWARD, &vb);

    Row row;
    double unused, bad;
    max_mean(comm, (double)fwd.bytes, &row.fwd_bytes_max, &row.fwd_bytes_mean);
    max_mean(comm, (double)bwd.bytes, &row.bwd_bytes_max, &row.bwd_bytes_mean);
    max_mean(comm, (double)fwd.messages, &row.fwd_msgs_max, &unused);
    max_mean(comm, (double)bwd.messages, &row.bwd_msgs_max, &unused);
    max_mean(comm, ok ? 0 : 1, &bad, &unused);
    row.formula_ok = bad == 0;
    row.balance = balance(sched, m, a->T_balance);
    free(qkv);
    free(dout);
    free(out);
    free(lse);
    free(dqkv);
    attention_layer_free(layer);
    return row;
}

int main(int argc, char** argv) {
    int rank = 0, size = 1;
    comm_mpi_init(&argc, &argv, &rank, &size);
    const Args a = parse_args(argc, argv);
    Mesh mesh;
    char err[ERR_LEN];
    if (mesh_init(&mesh, 1, a.pq, a.pkv, rank, size, err) != 0) fail_msg("%s", err);
    if (mesh_check_seq_len(&mesh, a.T_balance, err) != 0) fail_msg("--T-balance: %s", err);
    if (a.T_balance % (2 * mesh.P) != 0)
        fail_msg("--T-balance %ld: expected a multiple of 2P = %d (zigzag's chunks)", a.T_balance,
                 2 * mesh.P);
    Comm* comm = comm_mpi_create(&mesh, 1);
    Row rows[NSCHED];
    // Ulysses splits the heads over the P ranks, USP over the pq of a column: where they do not
    // divide NH, the schedule is left out.
    int run[NSCHED];
    for (int s = 0; s < NSCHED; s++)
        run[s] = s == SCHED_ULYSSES ? a.NH % mesh.P == 0 : s == SCHED_USP ? a.NH % mesh.pq == 0 : 1;
    for (int s = 0; s < NSCHED; s++)
        if (run[s]) rows[s] = measure(s, comm, &a);

    if (rank == 0) {
        const double shard = (double)a.B * a.Tl * a.NH * a.HS * sizeof(real);
        if (a.header) {
            printf("Per rank, one layer; B=%d, T/P=%d, NH=%d, HS=%d (%s): one shard B*T/P*C = "
                   "%.0f bytes. Bytes received: max over ranks (mean in shards); ring/2d: "
                   "measured max-bytes ratio; balance: unmasked scores per rank, max/mean, at "
                   "T=%ld.\n\n",
                   a.B, a.Tl, a.NH, a.HS, REAL_NAME, shard, a.T_balance);
            printf("| P | mesh | schedule | fwd bytes | fwd shards | fwd msgs | bwd bytes | "
                   "bwd shards | bwd msgs | ring/2d fwd | ring/2d bwd | = closed form | "
                   "balance |\n");
            printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        }
        for (int s = 0; s < NSCHED; s++) {
            if (!run[s]) continue;
            const Row* r = &rows[s];
            printf("| %d | %dx%d | %s | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f | %.2f | %.2f | "
                   "%s | %.3f |\n",
                   mesh.P, mesh.pq, mesh.pkv, NAMES[s], r->fwd_bytes_max,
                   r->fwd_bytes_mean / shard, r->fwd_msgs_max, r->bwd_bytes_max,
                   r->bwd_bytes_mean / shard, r->bwd_msgs_max,
                   rows[SCHED_2D].fwd_bytes_max > 0 ? r->fwd_bytes_max / rows[SCHED_2D].fwd_bytes_max : 0,
                   rows[SCHED_2D].bwd_bytes_max > 0 ? r->bwd_bytes_max / rows[SCHED_2D].bwd_bytes_max : 0,
                   r->formula_ok ? "yes" : "NO", r->balance);
        }
    }
    int failed = 0;
    for (int s = 0; s < NSCHED; s++) failed |= run[s] && !rows[s].formula_ok;
    comm_destroy(comm);
    comm_mpi_finalize();
    return failed;
}
