// The mesh groups and every comm primitive, with their counters, under mpirun:
//   test_comm --dp D --pq Q --pkv K [--die-capture]
// Each primitive runs on each mesh group (counted under scope layer = group) with values that
// name the sending world rank, so a wrong group, order or block shows.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm_mpi.h"
#include "model/real.h"
#include "comm/fail.h"

static int failures;

#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "test_comm: %s:%d: ", __FILE__, __LINE__);     \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
            failures++;                                                    \
        }                                                                  \
    } while (0)

// Members of a group agree on the coordinates the group is defined by.
static void check_group_members(const Mesh* m, MeshGroup g) {
    for (int j = 0; j < mesh_group_size(m, g); j++) {
        Mesh other;
        char err[ERR_LEN];
        const int w = mesh_group_world_rank(m, g, j);
        if (mesh_init(&other, m->dp, m->pq, m->pkv, w, m->world_size, err) != 0) fail_msg("%s", err);
        EXPECT(mesh_group_rank(&other, g) == j, "%s member %d has rank %d", mesh_group_name(g), j,
               mesh_group_rank(&other, g));
        EXPECT(mesh_group_color(&other, g) == mesh_group_color(m, g), "%s member %d color",
               mesh_group_name(g), j);
        if (g == MESH_DP) EXPECT(other.sp_index == m->sp_index, "dp member %d sp index", j);
        if (g == MESH_SP) EXPECT(other.dp_index == m->dp_index, "sp member %d dp index", j);
        if (g == MESH_ROW) EXPECT(other.r == m->r && other.dp_index == m->dp_index, "row member %d", j);
        if (g == MESH_COL) EXPECT(other.c == m->c && other.dp_index == m->dp_index, "col member %d", j);
    }
}

static void expect_count(const Comm* comm, MeshGroup g, CommKind kind, long long bytes,
                         long long messages, long long calls) {
    const CommCount c = comm_count(comm, g, COMM_FORWARD, kind);
    EXPECT(c.bytes == bytes && c.messages == messages && c.calls == calls,
           "%s %s: counted %lld bytes %lld messages %lld calls, expected %lld %lld %lld",
           mesh_group_name(g), comm_kind_name(kind), c.bytes, c.messages, c.calls, bytes, messages,
           calls);
}

static float bf16_value(uint16_t b) {
    const uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static uint16_t bf16_bits(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bits += 0x7fffu + ((bits >> 16) & 1);
    return (uint16_t)(bits >> 16);
}
static float bf16_round(float f) { return bf16_value(bf16_bits(f)); }

static void test_group(Comm* comm, MeshGroup g) {
    const Mesh* m = &comm->mesh;
    const int n = comm_size(comm, g), me = comm_rank(comm, g), w = m->world_rank;
    const long long e = sizeof(real);
    enum { K = 3 };
    real* send = xcalloc((size_t)n * K, sizeof(real), "send");
    real* recv = xcalloc((size_t)n * K, sizeof(real), "recv");
    comm_set_scope(comm, g, COMM_FORWARD);

    for (int k = 0; k < K; k++) send[k] = 1000 * w + k;
    comm_all_gather(comm, g, send, recv, K, COMM_REAL);
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < K; k++) {
            EXPECT(recv[j * K + k] == 1000 * mesh_group_world_rank(m, g, j) + k,
                   "%s all-gather block %d", mesh_group_name(g), j);
        }
    }
    expect_count(comm, g, COMM_ALL_GATHER, (n - 1) * K * e, n - 1, 1);

    long member_sum = 0;
    for (int j = 0; j < n; j++) member_sum += mesh_group_world_rank(m, g, j);
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < K; k++) send[j * K + k] = w + 100 * j + k;
    }
    comm_reduce_scatter_sum(comm, g, send, recv, K, COMM_REAL);
    for (int k = 0; k < K; k++) {
        EXPECT(recv[k] == member_sum + (real)n * (100 * me + k), "%s reduce-scatter element %d",
               mesh_group_name(g), k);
    }
    expect_count(comm, g, COMM_REDUCE_SCATTER, (n - 1) * K * e, n - 1, 1);

    for (int k = 0; k < K; k++) recv[k] = w + k;
    comm_all_reduce_sum(comm, g, recv, K, COMM_REAL);
    for (int k = 0; k < K; k++) {
        EXPECT(recv[k] == member_sum + (real)n * k, "%s all-reduce element %d", mesh_group_name(g), k);
    }
    expect_count(comm, g, COMM_ALL_REDUCE, 2 * (n - 1) * K * e / n, 2 * (n - 1), 1);

    for (int j = 0; j < n; j++) {
        for (int k = 0; k < K; k++) send[j * K + k] = 1000 * w + 10 * j + k;
    }
    comm_all_to_all(comm, g, send, recv, K, COMM_REAL);
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < K; k++) {
            EXPECT(recv[j * K + k] == 1000 * mesh_group_world_rank(m, g, j) + 10 * me + k,
                   "%s all-to-all block %d", mesh_group_name(g), j);
        }
    }
    expect_count(comm, g, COMM_ALL_TO_ALL, (n - 1) * K * e, n - 1, 1);

    // Ring shift with two transfers to the same peer (they match in posting order) and one
    // to itself (not counted).
    int first[2] = {w, 1}, second[2] = {w, 2}, self[2] = {w, 3}, got[3][2];
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    CommTransfer sends[3] = {{next, first, 2}, {next, second, 2}, {me, self, 2}};
    CommTransfer recvs[3] = {{prev, got[0], 2}, {prev, got[1], 2}, {me, got[2], 2}};
    comm_wait(comm, comm_start(comm, g, COMM_I32, sends, 3, recvs, 3));
    const int from = mesh_group_world_rank(m, g, prev);
    EXPECT(got[0][0] == from && got[0][1] == 1 && got[1][0] == from && got[1][1] == 2 &&
               got[2][0] == w && got[2][1] == 3,
           "%s send/recv: got (%d %d) (%d %d) (%d %d)", mesh_group_name(g), got[0][0], got[0][1],
           got[1][0], got[1][1], got[2][0], got[2][1]);
    const int remote = n > 1 ? 2 : 0;
    expect_count(comm, g, COMM_SEND_RECV, remote * 2 * 4, remote, 1);

    unsigned char bytes[5];
    const int root = n - 1;
    for (int k = 0; k < 5; k++) bytes[k] = (unsigned char)(me == root ? 7 * k + 1 : 0);
    comm_broadcast(comm, g, bytes, 5, COMM_U8, root);
    for (int k = 0; k < 5; k++) EXPECT(bytes[k] == 7 * k + 1, "%s broadcast byte %d", mesh_group_name(g), k);
    expect_count(comm, g, COMM_BROADCAST, me == root ? 0 : 5, me == root ? 0 : 1, 1);

    comm_barrier(comm, g);
    expect_count(comm, g, COMM_BARRIER, 0, 0, 1);

    // bf16 (the CUDA bf16 build's gradients and activations): 2-byte elements, summed in fp32
    // and rounded to nearest even once per addition. 1 + 2^-8 per member: the exact sum n +
    // n*2^-8 is representable up to n = 2 (8 mantissa bits), and beyond that rounding shows
    // the same way on every rank; compare with the rounding done here, in member order.
    uint16_t h[2] = {0x3f80, 0x3f81}, sum_bits = 0;   // 1.0 and 1 + 2^-7
    float acc = 0;
    for (int j = 0; j < n; j++) {
        acc = bf16_round(acc + bf16_value(h[1]));
        sum_bits = bf16_bits(acc);
    }
    comm_all_reduce_sum(comm, g, h, 2, COMM_BF16);
    EXPECT(bf16_value(h[0]) == (float)n, "%s bf16 all-reduce of 1.0: %g", mesh_group_name(g),
           bf16_value(h[0]));
    EXPECT(n > 2 || h[1] == sum_bits, "%s bf16 all-reduce: bits %04x, expected %04x",
           mesh_group_name(g), h[1], sum_bits);
    // Counted per call (integer division each time), on top of the fp32 all-reduce above.
    const long long fp32_bytes = 2 * (n - 1) * K * e / n;
    expect_count(comm, g, COMM_ALL_REDUCE, fp32_bytes + 2 * (n - 1) * 2 * 2 / n, 4 * (n - 1), 2);

    // The asynchronous form with a host wait, and the host-memory all-reduce.
    double x = w;
    comm_wait_host(comm, comm_all_reduce_sum_start(comm, g, &x, 1, COMM_F64));
    EXPECT(x == member_sum, "%s async all-reduce: %g", mesh_group_name(g), x);
    x = 1;
    comm_all_reduce_host(comm, g, &x, 1, COMM_F64);
    EXPECT(x == n, "%s host all-reduce: %g", mesh_group_name(g), x);
    expect_count(comm, g, COMM_ALL_REDUCE,
                 fp32_bytes + 2 * (n - 1) * 2 * 2 / n + 2 * (2 * (n - 1) * 8 / n), 8 * (n - 1), 4);
    free(send);
    free(recv);
}

// The watchdog's polling loop (comm_poll): done after some calls returns 0 without a deadline;
// never done, it asks expired once per period and gives up when told, without burning a core
// (after the 0.2 s spin it sleeps between polls).
typedef struct {
    int calls, done_after, expired_calls, periods;
} PollProbe;

static int probe_done(void* arg) {
    PollProbe* p = arg;
    return ++p->calls >= p->done_after;
}

static int probe_expired(void* arg) {
    PollProbe* p = arg;
    return ++p->expired_calls < p->periods;
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_poll(void) {
    PollProbe quick = {0, 1000, 0, 1};
    EXPECT(comm_poll(probe_done, probe_expired, &quick, 10) == 0 && quick.calls == 1000 &&
               quick.expired_calls == 0,
           "comm_poll: done after %d calls, %d expiries (expected 1000, 0)", quick.calls,
           quick.expired_calls);
    PollProbe never = {0, 1 << 30, 0, 3};
    const double wall0 = wall_seconds(), cpu0 = cpu_seconds();
    const int r = comm_poll(probe_done, probe_expired, &never, 0.4);
    const double wall = wall_seconds() - wall0, cpu = cpu_seconds() - cpu0;
    EXPECT(r == -1 && never.expired_calls == 3, "comm_poll: returned %d after %d expiries "
           "(expected -1 after 3)", r, never.expired_calls);
    EXPECT(wall >= 1.2 && wall < 2.5, "comm_poll: 3 periods of 0.4 s took %.2f s", wall);
    EXPECT(cpu < 0.6, "comm_poll: %.2f s of CPU in a %.2f s wait (spin 0.2 s, then sleeps)", cpu, wall);
}

// A capture (CUDA graphs) on the mpi transport, which cannot be captured: one that started no
// operation is empty and adds nothing when replayed.
static void test_empty_capture(Comm* comm) {
    EXPECT(!comm_capturable(comm), "the %s transport says its operations can be captured", comm->name);
    const long long before = comm_count_bytes(comm);
    comm_capture_begin(comm);
    CommCapture* c = comm_capture_end(comm);
    EXPECT(comm_capture_ops(c) == 0, "an empty capture holds %d operations", comm_capture_ops(c));
    comm_replayed(comm, c);
    comm_replayed(comm, c);
    EXPECT(comm_count_bytes(comm) == before, "replaying an empty capture counted %lld bytes",
           comm_count_bytes(comm) - before);
    comm_capture_free(c);
}

// --die-capture: an all-reduce started in a capture on the mpi transport; its end must refuse it.
static void die_capture(Comm* comm) {
    int x = 1;
    comm_capture_begin(comm);
    comm_all_reduce_sum(comm, MESH_WORLD, &x, 1, COMM_I32);
    comm_capture_end(comm);
    fail_msg("comm_capture_end accepted an operation of the mpi transport");
}

int main(int argc, char** argv) {
    int rank = 0, size = 1, dims[3] = {1, 1, 1};
    comm_mpi_init(&argc, &argv, &rank, &size);
    const char* flags[3] = {"--dp", "--pq", "--pkv"};
    int die = 0;
    if (argc > 1 && !strcmp(argv[argc - 1], "--die-capture")) die = 1, argc--;
    for (int k = 1; k + 1 < argc; k += 2) {
        int f = 0;
        while (f < 3 && strcmp(argv[k], flags[f])) f++;
        if (f == 3) fail_msg("unknown argument '%s' (expected --dp, --pq, --pkv)", argv[k]);
        dims[f] = atoi(argv[k + 1]);
    }
    Mesh mesh;
    char err[ERR_LEN];
    if (mesh_init(&mesh, dims[0], dims[1], dims[2], rank, size, err) != 0) fail_msg("%s", err);
    Comm* comm = comm_mpi_create(&mesh, MESH_NGROUPS);
    if (die) die_capture(comm);
    test_poll();
    test_empty_capture(comm);
    for (int g = 0; g < MESH_NGROUPS; g++) {
        check_group_members(&mesh, g);
        test_group(comm, g);
    }
    // Counting stays inside its scope: nothing landed outside the group scopes.
    const CommCount stray = comm_count_total(comm, COMM_NO_LAYER, COMM_OTHER);
    EXPECT(stray.calls == 0, "%lld calls counted outside any scope", stray.calls);

    comm_set_scope(comm, COMM_NO_LAYER, COMM_OTHER);
    int total = failures;
    comm_all_reduce_sum(comm, MESH_WORLD, &total, 1, COMM_I32);
    if (rank == 0) {
        printf("%s comm primitives on dp %d mesh %dx%d (%d ranks): %d failures\n",
               total ? "FAIL" : "ok", mesh.dp, mesh.pq, mesh.pkv, size, total);
    }
    comm_destroy(comm);
    comm_mpi_finalize();
    return total != 0;
}
