// Latency and bandwidth of the collectives the trainer uses, on the transport in use, against
// message size, fitted to the alpha-beta model t = alpha + bus_bytes * beta (run under mpirun;
// every rank of the world takes part). The cost model calibrates "this machine" from it, and a
// GPU cluster file takes its fits (`costmodel --calibrate-gpu ... --collectives JSONL`).
//
//   bench_collectives [--comm auto|mpi|nccl|mpi-staged] [--min-bytes 64] [--max-bytes 16777216]
//                     [--target-s 0.02] [--jsonl FILE] [--csv FILE]
//   bench_collectives --self-test     (the fit on known answers)
//
// Built with the CPU backend (build/tools/bench_collectives: host buffers, --comm mpi) and with
// the CUDA backend (build/tools/bench_collectives_cuda, and _cuda_host on the host runtime: device
// buffers, --comm nccl or mpi-staged, one GPU per rank as the trainer picks it). On a device
// transport the calls are asynchronous: a timing ends when the compute stream has done them.
//
// Sizes are powers of two from min to max bytes of fp32, as nccl-tests counts them: all-gather
// and reduce-scatter: the full (gathered / reduced) buffer; all-reduce: the buffer; send/recv: what
// each rank sends to its successor in a ring (and receives from its predecessor), one grouped
// batch. Bus bytes (what one rank moves on the critical path of a ring algorithm, nccl-tests'
// "busbw" factor): all-gather and reduce-scatter (P-1)/P x size, all-reduce 2(P-1)/P x size,
// send/recv 1 x size. Time per call: each rank times `reps` back-to-back calls after a barrier;
// the slowest rank's mean is reported (reps chosen so a point takes about --target-s).
// The fit minimises the relative error (weights 1/t^2); its worst relative error is printed.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/dist_ops.h"
#include "comm/comm_mpi.h"
#include "comm/fail.h"
#include "comm/transport.h"
#include "model/backend.h"
#include "model/backend_transport.h"

typedef struct {
    long min_bytes, max_bytes;
    double target_s;
    const char *jsonl, *csv, *comm;
} Args;

static long parse_long(const char* flag, const char* v, long lo) {
    char* end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo)
        fail_msg("%s: expected an integer >= %ld, found '%s'", flag, lo, v);
    return x;
}

static Args parse_args(int argc, char** argv) {
    Args a = {.min_bytes = 64, .max_bytes = 16L << 20, .target_s = 0.02, .jsonl = NULL, .csv = NULL,
              .comm = "auto"};
    for (int k = 1; k < argc; k++) {
        const char* f = argv[k];
        if (!strcmp(f, "--help")) {
            printf("usage: bench_collectives [--comm auto|mpi|nccl|mpi-staged] [--min-bytes 64] "
                   "[--max-bytes 16777216] [--target-s 0.02] [--jsonl FILE] [--csv FILE]\n"
                   "(%s backend: buffers in %s memory)\n", gpt_backend_name(),
                   gpt_backend_host_memory() ? "host" : "device");
            exit(0);
        }
        if (k + 1 >= argc) fail_msg("%s: missing value (see --help)", f);
        const char* v = argv[++k];
        if (!strcmp(f, "--min-bytes")) a.min_bytes = parse_long(f, v, 4);
        else if (!strcmp(f, "--max-bytes")) a.max_bytes = parse_long(f, v, 4);
        else if (!strcmp(f, "--target-s")) {
            char* end;
            a.target_s = strtod(v, &end);
            if (end == v || *end || !(a.target_s > 0 && a.target_s <= 10))
                fail_msg("--target-s: expected seconds in (0, 10], found '%s'", v);
        } else if (!strcmp(f, "--jsonl")) a.jsonl = v;
        else if (!strcmp(f, "--comm")) a.comm = v;
        else if (!strcmp(f, "--csv")) a.csv = v;
        else fail_msg("unknown option '%s' (see --help)", f);
    }
    if (a.min_bytes > a.max_bytes)
        fail_msg("--min-bytes %ld must not exceed --max-bytes %ld", a.min_bytes, a.max_bytes);
    return a;
}

enum { OP_ALL_GATHER, OP_REDUCE_SCATTER, OP_ALL_REDUCE, OP_SEND_RECV, NOPS };
static const char* const OP_NAMES[NOPS] = {"all_gather", "reduce_scatter", "all_reduce", "send_recv"};

static double bus_factor(int op, int P) {
    switch (op) {
    case OP_ALL_GATHER:
    case OP_REDUCE_SCATTER: return (double)(P - 1) / P;
    case OP_ALL_REDUCE: return 2.0 * (P - 1) / P;
    default: return 1.0;
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// One call of op on n fp32 elements (n a multiple of P). a, b: 2n floats each.
static void run_op(Comm* comm, int op, float* a, float* b, size_t n) {
    const int P = comm_size(comm, MESH_WORLD), r = comm_rank(comm, MESH_WORLD);
    switch (op) {
    case OP_ALL_GATHER: comm_all_gather(comm, MESH_WORLD, a, b, n / P, COMM_F32); break;
    case OP_REDUCE_SCATTER: comm_reduce_scatter_sum(comm, MESH_WORLD, a, b, n / P, COMM_F32); break;
    case OP_ALL_REDUCE: comm_all_reduce_sum(comm, MESH_WORLD, a, n, COMM_F32); break;
    default: {
        if (P == 1) break;
        CommTransfer send = {(r + 1) % P, a, n}, recv = {(r + P - 1) % P, b, n};
        comm_wait_host(comm, comm_start(comm, MESH_WORLD, COMM_F32, &send, 1, &recv, 1));
        break;
    }
    }
}

// The largest value of x over the ranks: each rank's value in its own slot of a host sum (host
// memory on every transport).
static double max_over_ranks(Comm* comm, double x) {
    const int P = comm_size(comm, MESH_WORLD);
    double* all = xcalloc((size_t)P, sizeof(double), "per-rank values");
    all[comm_rank(comm, MESH_WORLD)] = x;
    comm_all_reduce_host(comm, MESH_WORLD, all, (size_t)P, COMM_F64);
    double m = all[0];
    for (int k = 1; k < P; k++) m = all[k] > m ? all[k] : m;
    free(all);
    return m;
}

// Seconds per call: the slowest rank's mean over reps calls, reps sized from one timed call.
static double time_op(Comm* comm, int op, float* a, float* b, size_t n, double target_s, int* reps_out) {
    run_op(comm, op, a, b, n);   // warm-up (first-touch, connection setup)
    comm_wait_compute(comm);
    comm_barrier(comm, MESH_WORLD);
    double t0 = now_s();
    run_op(comm, op, a, b, n);
    comm_wait_compute(comm);   // device transports: the call is done when the stream is
    const double once = max_over_ranks(comm, now_s() - t0);
    long reps = once > 0 ? (long)(target_s / once) : 1000;
    reps = reps < 3 ? 3 : reps > 1000 ? 1000 : reps;
    comm_barrier(comm, MESH_WORLD);
    t0 = now_s();
    for (long i = 0; i < reps; i++) run_op(comm, op, a, b, n);
    comm_wait_compute(comm);
    const double t = max_over_ranks(comm, (now_s() - t0) / reps);
    *reps_out = (int)reps;
    return t;
}

typedef struct {
    double alpha, beta, max_rel_err;
} Fit;

// t = alpha + x beta minimising sum ((t_i - fit_i) / t_i)^2.
static Fit fit_alpha_beta(const double* x, const double* t, int n) {
    double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
    for (int i = 0; i < n; i++) {
        const double w = 1.0 / (t[i] * t[i]);
        s00 += w, s01 += w * x[i], s11 += w * x[i] * x[i];
        r0 += w * t[i], r1 += w * x[i] * t[i];
    }
    Fit f = {0, 0, 0};
    const double det = s00 * s11 - s01 * s01;
    if (n < 2 || det == 0) return f;
    f.alpha = (r0 * s11 - r1 * s01) / det;
    f.beta = (s00 * r1 - s01 * r0) / det;
    for (int i = 0; i < n; i++) {
        const double e = fabs(f.alpha + f.beta * x[i] - t[i]) / t[i];
        f.max_rel_err = e > f.max_rel_err ? e : f.max_rel_err;
    }
    return f;
}

static FILE* open_out(const char* path) {
    if (!path) return NULL;
    FILE* f = fopen(path, "w");
    if (!f) fail_msg("%s: cannot open for writing: %s", path, strerror(errno));
    return f;
}

static void close_out(FILE* f, const char* path) {
    if (f && (ferror(f) | fclose(f))) fail_msg("%s: write failed: %s", path, strerror(errno));
}

// --self-test: the fit recovers alpha and beta from exact points, and from points with +-10% noise
// within 10% of the noisy points (no MPI needed).
static int self_test(void) {
    double x[12], t[12];
    for (int i = 0; i < 12; i++) x[i] = 64.0 * (1 << i), t[i] = 5e-6 + x[i] * 1e-9;
    Fit f = fit_alpha_beta(x, t, 12);
    int ok = fabs(f.alpha - 5e-6) < 1e-12 && fabs(f.beta - 1e-9) < 1e-15 && f.max_rel_err < 1e-9;
    printf("%s exact points: alpha %.4g s (5e-06), beta %.4g s/B (1e-09), worst error %.2g\n", ok ? "ok  " : "FAIL",
           f.alpha, f.beta, f.max_rel_err);
    for (int i = 0; i < 12; i++) t[i] *= i % 2 ? 1.1 : 0.9;
    f = fit_alpha_beta(x, t, 12);
    const int ok2 = f.max_rel_err < 0.15 && f.alpha > 0 && f.beta > 0;
    printf("%s +-10%% points: worst relative error %.3f\n", ok2 ? "ok  " : "FAIL", f.max_rel_err);
    return ok && ok2 ? 0 : 1;
}

int main(int argc, char** argv) {
    if (argc == 2 && !strcmp(argv[1], "--self-test")) return self_test();
    int rank = 0, size = 1;
    comm_mpi_init(&argc, &argv, &rank, &size);
    const Args a = parse_args(argc, argv);
    Mesh mesh;
    char err[ERR_LEN];
    if (mesh_init(&mesh, size, 1, 1, rank, size, err) != 0) fail_msg("%s", err);
    // The transport and this rank's device (before any other backend call), as the trainer does.
    const TransportOptions to = {a.comm, "mpi", NULL, 60, 0};
    int device;
    const char* transport = gpt_backend_transport(&to, size, &device);
    Comm* comm = transport_create(&mesh, 1, transport, &to);
    const int P = size;
    const size_t max_n = ((size_t)(a.max_bytes / 4) + P - 1) / P * P;
    const size_t buf_bytes = (2 * max_n + P) * sizeof(float);
    // In the backend's memory (the device's on CUDA), zero-filled: the values do not matter.
    float* zeros = xcalloc(2 * max_n + P, sizeof(float), "zeros");
    float* x = dist_alloc(buf_bytes, "send buffer");
    float* y = dist_alloc(buf_bytes, "receive buffer");
    dist_to_backend(x, zeros, buf_bytes);
    dist_to_backend(y, zeros, buf_bytes);
    free(zeros);
    FILE* jl = rank == 0 ? open_out(a.jsonl) : NULL;
    FILE* csv = rank == 0 ? open_out(a.csv) : NULL;
    if (csv) fprintf(csv, "op,P,bytes,seconds,reps,algbw_gbs,busbw_gbs\n");
    if (rank == 0)
        printf("collectives on %d ranks, transport %s, fp32; bytes as nccl-tests count them\n"
               "%-15s %12s %12s %6s %12s %12s\n",
               P, comm->name, "op", "bytes", "time us", "reps", "algbw GB/s", "busbw GB/s");
    enum { MAX_POINTS = 64 };
    for (int op = 0; op < NOPS; op++) {
        double xs[MAX_POINTS], ts[MAX_POINTS];
        int n_points = 0;
        for (long bytes = a.min_bytes; bytes <= a.max_bytes && n_points < MAX_POINTS; bytes *= 2) {
            const size_t n = ((size_t)(bytes / 4) + P - 1) / P * P;   // elements: a multiple of P
            const double real_bytes = 4.0 * n;
            int reps = 0;
            const double t = time_op(comm, op, x, y, n, a.target_s, &reps);
            const double bus = real_bytes * bus_factor(op, P);
            xs[n_points] = bus, ts[n_points] = t, n_points++;
            if (rank != 0) continue;
            printf("%-15s %12.0f %12.2f %6d %12.3f %12.3f\n", OP_NAMES[op], real_bytes, 1e6 * t, reps,
                   real_bytes / t / 1e9, bus / t / 1e9);
            if (jl)
                fprintf(jl, "{\"type\":\"collective\",\"op\":\"%s\",\"P\":%d,\"transport\":\"%s\",\"bytes\":%.0f,"
                        "\"bus_bytes\":%.0f,\"seconds\":%.9g,\"reps\":%d,\"algbw_gbs\":%.6g,\"busbw_gbs\":%.6g}\n",
                        OP_NAMES[op], P, comm->name, real_bytes, bus, t, reps, real_bytes / t / 1e9, bus / t / 1e9);
            if (csv)
                fprintf(csv, "%s,%d,%.0f,%.9g,%d,%.6g,%.6g\n", OP_NAMES[op], P, real_bytes, t, reps,
                        real_bytes / t / 1e9, bus / t / 1e9);
        }
        if (rank != 0) continue;
        // One rank moves nothing in a send/recv to itself or a reduction over one rank: no fit.
        const int fittable = P > 1;
        const Fit f = fittable ? fit_alpha_beta(xs, ts, n_points) : (Fit){0, 0, 0};
        const double gbs = f.beta > 0 ? 1e-9 / f.beta : 0;
        printf("fit %-11s alpha %.2f us, bus bandwidth %.3f GB/s (1/beta), worst relative error %.1f%%%s\n",
               OP_NAMES[op], 1e6 * f.alpha, gbs, 100 * f.max_rel_err, fittable ? "" : " (P = 1: not fitted)");
        if (jl)
            fprintf(jl, "{\"type\":\"fit\",\"op\":\"%s\",\"P\":%d,\"transport\":\"%s\",\"alpha_s\":%.9g,"
                    "\"beta_s_per_byte\":%.9g,\"bus_gbs\":%.6g,\"max_rel_err\":%.6g,\"points\":%d}\n",
                    OP_NAMES[op], P, comm->name, f.alpha, f.beta, gbs, f.max_rel_err, n_points);
    }
    close_out(jl, a.jsonl);
    close_out(csv, a.csv);
    dist_free(x);
    dist_free(y);
    comm_destroy(comm);
    comm_mpi_finalize();
    return 0;
}
