// Reading a sweep CSV (costmodel/sweep_csv.h): every cell checked before it becomes a count.
#include "costmodel/sweep_csv.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "model/activations.h"

enum { MAX_COUNT = 1 << 30, MAX_RANKS = 1 << 20 };

// Reads one line into buf (SWEEP_MAX_LINE bytes) without its line end. Returns 1, 0 at the end
// of the file, or -1 with err set when the line does not fit.
static int read_line(FILE* f, char* buf, const ReadWhere* w) {
    if (!fgets(buf, SWEEP_MAX_LINE, f)) return 0;
    const size_t n = strlen(buf);
    if (n == SWEEP_MAX_LINE - 1 && buf[n - 1] != '\n' && !feof(f))
        return set_err(w->err, w->errlen, "%s:%d: expected a line of at most %d characters, "
                       "found a longer one", w->path, w->line, SWEEP_MAX_LINE - 2);
    buf[strcspn(buf, "\r\n")] = 0;
    return 1;
}

// Splits a line (modified in place) at commas into at most SWEEP_MAX_COLS fields; returns the
// field count, or -1 with err set when there are more.
static int split_fields(char* line, char** field, const ReadWhere* w) {
    int n = 0;
    for (char* p = line;;) {
        if (n == SWEEP_MAX_COLS)
            return set_err(w->err, w->errlen, "%s:%d: expected at most %d columns, found more",
                           w->path, w->line, SWEEP_MAX_COLS);
        field[n++] = p;
        char* comma = strchr(p, ',');
        if (!comma) return n;
        *comma = 0;
        p = comma + 1;
    }
}

typedef struct {
    int n;
    char* name[SWEEP_MAX_COLS];
} Header;

static int column(const Header* h, const char* name) {
    for (int k = 0; k < h->n; k++)
        if (!strcmp(h->name[k], name)) return k;
    return -1;
}

// Column k's cell of a row of n fields as a whole number in [lo, hi] (whole), else as a finite
// number from lo; a column the header lacks (k < 0) gives NAN.
static int cell(char** f, int n, int k, const char* name, double lo, double hi, int whole,
                const ReadWhere* w, double* out) {
    *out = NAN;
    if (k < 0) return 0;
    if (k >= n)
        return set_err(w->err, w->errlen, "%s:%d: column '%s': expected a number, found no "
                       "cell (%d of the header's columns)", w->path, w->line, name, n);
    char* end;
    errno = 0;
    const double x = strtod(f[k], &end);
    if (end == f[k] || *end || errno || !(x >= lo && x <= hi) || (whole && x != floor(x))) {
        if (whole)
            return set_err(w->err, w->errlen, "%s:%d: column '%s': expected a whole number in "
                           "[%.0f, %.0f], found '%.40s'", w->path, w->line, name, lo, hi, f[k]);
        return set_err(w->err, w->errlen, "%s:%d: column '%s': expected a finite number >= %g, "
                       "found '%.40s'", w->path, w->line, name, lo, f[k]);
    }
    *out = x;
    return 0;
}

// One run from a row's fields: the counts, the schedule, the measured times.
static int read_run(char** f, int n, const Header* h, const int* col, const ReadWhere* w,
                    SweepRun* run) {
    static const char* const COUNTS[] = {"layers", "channels", "heads", "vocab", "seq_len",
                                         "batch", "dp", "pq", "pkv"};
    double v[9];
    for (int k = 0; k < 9; k++)
        if (cell(f, n, col[k], COUNTS[k], k == 3 ? 2 : 1, MAX_COUNT, 1, w, &v[k]) != 0) return -1;
    double overlap, ms, context, window;
    if (cell(f, n, col[9], "overlap", 0, 1, 1, w, &overlap) != 0 ||
        cell(f, n, col[10], "ms_per_step", 0, DBL_MAX, 0, w, &ms) != 0 ||
        cell(f, n, column(h, "context"), "context", 1, MAX_COUNT, 1, w, &context) != 0 ||
        cell(f, n, column(h, "window"), "window", 0, MAX_COUNT, 1, w, &window) != 0 ||
        cell(f, n, column(h, "compute_ms"), "compute_ms", 0, DBL_MAX, 0, w, &run->compute_ms) != 0 ||
        cell(f, n, column(h, "exposed_comm_ms"), "exposed_comm_ms", 0, DBL_MAX, 0, w,
             &run->exposed_ms) != 0 ||
        cell(f, n, column(h, "comm_bytes_per_rank"), "comm_bytes_per_rank", 0, DBL_MAX, 0, w,
             &run->bytes) != 0 ||
        cell(f, n, column(h, "peak_gflops"), "peak_gflops", 0, DBL_MAX, 0, w,
             &run->peak_gflops) != 0)
        return -1;
    if (ms == 0)
        return set_err(w->err, w->errlen, "%s:%d: column 'ms_per_step': expected a positive "
                       "time, found 0", w->path, w->line);
    if (v[6] * v[7] * v[8] > MAX_RANKS)
        return set_err(w->err, w->errlen, "%s:%d: columns 'dp', 'pq', 'pkv': expected at most %d "
                       "ranks, found %.0f x %.0f x %.0f", w->path, w->line, MAX_RANKS, v[6],
                       v[7], v[8]);
    const int ka = col[11], kp = col[12];
    const int alg = ka < n ? cost_algorithm_parse(f[ka]) : -1;
    if (alg < 0)
        return set_err(w->err, w->errlen, "%s:%d: column 'algorithm': expected 2d, 2d-overlap, "
                       "ring, striped, zigzag, ulysses or usp, found '%.40s'", w->path, w->line,
                       ka < n ? f[ka] : "(no cell)");
    if (kp >= n || !f[kp][0] || strlen(f[kp]) >= sizeof run->preset)
        return set_err(w->err, w->errlen, "%s:%d: column 'preset': expected a name of 1 to %zu "
                       "characters, found '%.40s'", w->path, w->line, sizeof run->preset - 1,
                       kp < n ? f[kp] : "(no cell)");
    snprintf(run->preset, sizeof run->preset, "%s", f[kp]);
    // window: the trainer's --attention-window in every layer (0 or no column: causal)
    const int W = isnan(window) ? 0 : (int)window;
    const CostShape shape = {(int)v[0], (int)v[1], (int)v[2], (int)v[3],
                             (int)(isnan(context) ? v[4] : context), W, W ? 1 : 0,
                             0, 0, 0, 0, 0, 0, 0, 0, 0};
    run->config = (CostConfig){shape, (long)v[4], (int)v[5], 1, (int)v[6], (int)v[7], (int)v[8],
                               (CostAlgorithm)alg, (int)overlap, 0, 0, GPT_RECOMPUTE_NONE, NULL, 1, 0, 0, 0, 0, 0, 0, 0};
    run->ranks = (int)(v[6] * v[7] * v[8]);
    run->ms = ms;
    return 0;
}

int sweep_read(const char* path, SweepRun* rows, int max, char* err, size_t errlen) {
    ReadWhere w = {path, 1, err, errlen};
    FILE* f = fopen(path, "r");
    if (!f) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    char header_line[SWEEP_MAX_LINE], line[SWEEP_MAX_LINE];
    Header h;
    int got = read_line(f, header_line, &w);
    if (got == 0) set_err(err, errlen, "%s: expected a header line, found none", path);
    if (got <= 0 || (h.n = split_fields(header_line, h.name, &w)) < 0) {
        fclose(f);
        return -1;
    }
    // required columns: the counts, overlap, ms_per_step, algorithm, preset (read_run's order)
    static const char* const NEEDED[] = {"layers", "channels", "heads", "vocab", "seq_len",
                                         "batch", "dp", "pq", "pkv", "overlap", "ms_per_step",
                                         "algorithm", "preset"};
    int col[13];
    for (int k = 0; k < 13; k++)
        if ((col[k] = column(&h, NEEDED[k])) < 0) {
            fclose(f);
            return set_err(err, errlen, "%s:1: expected a column '%s' in the header, found none",
                           path, NEEDED[k]);
        }
    int n = 0;
    for (w.line = 2; (got = read_line(f, line, &w)) == 1; w.line++) {
        char* fld[SWEEP_MAX_COLS];
        const int nf = split_fields(line, fld, &w);
        if (nf < 0) break;
        if (nf == 1 && !fld[0][0]) continue;   // a blank line
        if (n == max) {
            got = set_err(err, errlen, "%s:%d: expected at most %d runs, found more", path,
                          w.line, max);
            break;
        }
        if (read_run(fld, nf, &h, col, &w, &rows[n]) != 0) break;
        n++;
    }
    fclose(f);
    if (got != 0) return -1;
    if (!n) return set_err(err, errlen, "%s: expected at least one run, found none", path);
    return n;
}
