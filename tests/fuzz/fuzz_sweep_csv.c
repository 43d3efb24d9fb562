// Sweep CSVs (costmodel/sweep_csv.c): what `costmodel --validate` reads (tools/bench_sweep.sh's
// sweep.csv). Input: one sweep.csv. An accepted sweep has 1 to MAX_RUNS runs (a longer one is
// refused), each with counts that are whole numbers from 1 within the reader's bounds, ranks
// their product, a known schedule, overlap 0 or 1, a positive finite time, the optional
// measurements finite and not negative or NAN (column absent), a window of every layer or none,
// and a named preset.
#include <math.h>
#include <string.h>

#include "comm/fail.h"
#include "costmodel/sweep_csv.h"
#include "model/activations.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

enum { MAX_RUNS = 4 };   // few, so that the "at most" refusal is reached too

static int optional_ok(double x) { return isnan(x) || (isfinite(x) && x >= 0); }

static void check_run(const SweepRun* r) {
    const CostConfig* g = &r->config;
    const CostShape* s = &g->shape;
    const int counts_ok = s->L >= 1 && s->C >= 1 && s->NH >= 1 && s->V >= 2 && s->max_T >= 1 &&
                          g->T >= 1 && g->B >= 1 && g->dp >= 1 && g->pq >= 1 && g->pkv >= 1 &&
                          s->L <= 1 << 30 && s->C <= 1 << 30 && s->NH <= 1 << 30 &&
                          s->V <= 1 << 30 && s->max_T <= 1 << 30 && g->T <= 1 << 30 &&
                          g->B <= 1 << 30;
    // a window in every layer, or none
    const int window_ok = s->window >= 0 && s->window <= 1 << 30 &&
                          s->window_every == (s->window ? 1 : 0);
    fuzz_expect(counts_ok && window_ok && g->accum == 1 && !g->docs,
                "sweep_read accepted a run with a count out of its bounds");
    fuzz_expect((long long)g->dp * g->pq * g->pkv == r->ranks && r->ranks <= 1 << 20,
                "sweep_read's ranks are not dp x pq x pkv within 2^20");
    fuzz_expect(g->alg >= 0 && g->alg < COST_NALGS && (g->overlap == 0 || g->overlap == 1) &&
                g->recompute == GPT_RECOMPUTE_NONE && !g->zero && !g->keep_kv,
                "sweep_read accepted an unknown schedule or overlap");
    fuzz_expect(isfinite(r->ms) && r->ms > 0 && optional_ok(r->compute_ms) &&
                optional_ok(r->exposed_ms) && optional_ok(r->bytes) &&
                optional_ok(r->peak_gflops), "sweep_read accepted a time that is not finite");
    fuzz_expect(r->preset[0] && memchr(r->preset, 0, sizeof r->preset),
                "sweep_read accepted a run without a preset name");
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* path = fuzz_file("sweep.csv", data, size);
    SweepRun rows[MAX_RUNS];
    char err[ERR_LEN] = "";
    const int n = sweep_read(path, rows, MAX_RUNS, err, sizeof err);
    if (n < 0) {
        fuzz_expect_error_line(err);
        return 0;
    }
    fuzz_expect(n >= 1 && n <= MAX_RUNS, "sweep_read returned a run count out of [1, max]");
    for (int k = 0; k < n; k++) check_run(&rows[k]);
    return 0;
}
