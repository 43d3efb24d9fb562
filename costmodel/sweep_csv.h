// A sweep CSV (tools/bench_sweep.sh's sweep.csv): the trainer runs `costmodel --validate`
// predicts and compares. Columns are found by header name; extra columns are ignored.
#pragma once
#include <stddef.h>

#include "costmodel/costmodel.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SWEEP_MAX_COLS = 64,     // columns of the header and of a row
    SWEEP_MAX_ROWS = 512,    // runs of one sweep
    SWEEP_MAX_LINE = 4096,   // bytes of a line, its newline included
};

typedef struct {
    CostConfig config;   // the run's shape, T, batch, mesh, schedule and overlap (accum 1)
    int ranks;           // dp * pq * pkv
    double ms;           // measured ms per step
    double compute_ms, exposed_ms, bytes;   // measured (NAN where the CSV lacks the column)
    double peak_gflops;                     // the trainer's one-thread FMA peak (NAN: no column)
    char preset[32];
} SweepRun;

// Reads every run of the sweep at `path` into rows (at most max). A run needs the columns
// preset, layers, channels, heads, vocab, seq_len, batch, dp, pq, pkv, algorithm, overlap and
// ms_per_step; context, window (the --attention-window of every layer), compute_ms,
// exposed_comm_ms, comm_bytes_per_rank and peak_gflops are read where the header has them.
// Counts are whole numbers from 1 (vocab from 2) up to 2^30 (window from 0), dp x pq x pkv at
// most 2^20 ranks, overlap 0 or 1, times, bytes and peaks finite and not negative (ms_per_step
// positive). Blank lines are skipped. Returns how many runs (at least
// one), or -1 with one line in err naming the file, the line and the column, and what was
// expected and found.
int sweep_read(const char* path, SweepRun* rows, int max, char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
