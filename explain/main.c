// build/explain: what a distributed attention schedule does, computed by running it.
//
//   explain [--seq-len 16] [--pq 2] [--pkv 2] [--dp 1] [--attention 2d] [--heads 1]
//           [--head-size 1] [--batch 1] [--attention-window W] [--document-length D] [--png DIR]
//           [--a2a-chunks G]
//           [--check-mpi] [--lse-example]
//           [--crossover] [--summary] [--help]
//
// Each rank of one sequence-parallel group runs the real layer in this process over a recording
// transport (explain/simulate.h); the tool checks what it recorded against attention/dist_cost.c
// (explain/check.h) and prints the explanation. --check-mpi (under mpirun) compares the
// simulation of each rank with the same schedule run over MPI.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_attention.h"
#include "comm/fail.h"
#include "explain/check.h"
#include "explain/explain_modes.h"
#include "explain/report_text.h"

static const char* const usage =
    "usage: explain [options]\n"
    "  --seq-len T      tokens per sequence (default 16); a multiple of P = pq*pkv (2P for zigzag)\n"
    "  --pq N           mesh rows: query groups of ATTENTION2D (default 2)\n"
    "  --pkv N          mesh columns: key/value groups (default 2); the ring family uses P = pq*pkv\n"
    "  --dp N           data-parallel copies of the mesh (default 1)\n"
    "  --attention A    2d, 2d-overlap, ring, striped, zigzag, ulysses or usp (default 2d)\n"
    "  --heads N        heads, for the byte counts (default 1; ulysses: a multiple of P; usp: of\n"
    "                   pq)\n"
    "  --head-size N    channels per head (default 1)\n"
    "  --batch N        sequences per rank (default 1)\n"
    "  --attention-window W   a sliding window: a query at t sees t-W+1..t (default: none, causal)\n"
    "  --document-length D    documents of D tokens packed from position 0: a query sees only\n"
    "                   its own document (the trainer's --document-mask; default: none)\n"
    "  --a2a-chunks G   ulysses and usp: each rank's heads in G chunks, whose all-to-alls travel\n"
    "                   while another chunk computes (the trainer's --a2a-chunks; default 1)\n"
    "  --png DIR        also draw the pictures into DIR with gnuplot (matrix, mesh, transfers,\n"
    "                   bytes per rank against P)\n"
"  --summary        only the work and the bytes per rank\n"
    "  --check-mpi      under mpirun with dp*pq*pkv ranks: run the schedule over MPI and compare\n"
    "                   its counters and partial-attention calls with the simulated rank\n"
    "  --lse-example    print the tiny numeric example of the LSE merge and exit\n"
    "  --crossover      the smallest P at which ATTENTION2D's best mesh moves fewer bytes per rank\n"
    "                   than Ring (forward, and forward + backward) for these heads and head size\n"
    "  --help           this text\n";

static int parse_count(const char* flag, const char* value, long max) {
    char* end = NULL;
    errno = 0;
    const long v = value ? strtol(value, &end, 10) : 0;
    if (!value || !*value || *end || errno || v < 1 || v > max)
        fail_msg("explain: %s: expected an integer in 1..%ld, found '%s'", flag, max, value ? value : "(nothing)");
    return (int)v;
}

int main(int argc, char** argv) {
    ExplainShape s = {ALGO_2D, 1, 2, 2, 16, 1, 1, 1, 0, 0, 1};
    const char* png = NULL;
    int check_mpi = 0, lse_example = 0, crossover = 0, summary = 0;
    for (int k = 1; k < argc; k++) {
        const char* f = argv[k];
        const char* v = k + 1 < argc ? argv[k + 1] : NULL;
        int takes = 1;
        if (!strcmp(f, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(f, "--seq-len")) s.T = parse_count(f, v, 1 << 20);
        else if (!strcmp(f, "--pq")) s.pq = parse_count(f, v, 1024);
        else if (!strcmp(f, "--pkv")) s.pkv = parse_count(f, v, 1024);
        else if (!strcmp(f, "--dp")) s.dp = parse_count(f, v, 1024);
        else if (!strcmp(f, "--heads")) s.NH = parse_count(f, v, 4096);
        else if (!strcmp(f, "--head-size")) s.HS = parse_count(f, v, 4096);
        else if (!strcmp(f, "--batch")) s.B = parse_count(f, v, 4096);
        else if (!strcmp(f, "--attention-window")) s.window = parse_count(f, v, 1 << 20);
        else if (!strcmp(f, "--document-length")) s.doc_len = parse_count(f, v, 1 << 20);
        else if (!strcmp(f, "--a2a-chunks")) s.chunks = parse_count(f, v, ULYSSES_MAX_CHUNKS);
        else if (!strcmp(f, "--attention")) {
            if (!v || explain_algo_parse(v, &s.algo))
                fail_msg("explain: --attention: expected 2d, 2d-overlap, ring, striped, zigzag, ulysses or usp, found '%s'",
                         v ? v : "(nothing)");
        } else if (!strcmp(f, "--png")) {
            if (!v || !*v) fail_msg("explain: --png: expected a directory, found nothing");
            png = v;
        } else {
            takes = 0;
            if (!strcmp(f, "--check-mpi")) check_mpi = 1;
            else if (!strcmp(f, "--lse-example")) lse_example = 1;
            else if (!strcmp(f, "--crossover")) crossover = 1;
            else if (!strcmp(f, "--summary")) summary = 1;
            else fail_msg("explain: unknown option '%s' (see --help)", f);
        }
        k += takes;
    }
    if (lse_example) return explain_lse_example(stdout);
    if (crossover) return explain_crossover(&s, stdout);
    char err[ERR_LEN];
    if (explain_check_shape(&s, err)) fail_msg("explain: %s", err);
    if (check_mpi) return explain_check_mpi(&s, &argc, &argv);
    Simulation* sim = simulate(&s);
    if (explain_check(sim, stderr, 0)) fail_msg("explain: the schedule differs from attention/dist_cost.c (above)");
    if (summary) report_summary(sim, stdout);
    else report_text(sim, stdout);
    if (png) explain_pictures(sim, png);
    simulation_free(sim);
    return 0;
}
