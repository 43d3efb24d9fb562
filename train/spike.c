#include "train/spike.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

void spike_init(SpikeDetector* d, double zscore, int window) {
    memset(d, 0, sizeof *d);
    d->zscore = zscore;
    d->window = window;
    if (zscore <= 0) return;
    d->loss = xcalloc((size_t)window, sizeof(double), "spike window (losses)");
    d->norm = xcalloc((size_t)window, sizeof(double), "spike window (gradient norms)");
}

void spike_free(SpikeDetector* d) {
    free(d->loss);
    free(d->norm);
    d->loss = d->norm = NULL;
}

static int acting(const SpikeDetector* d) { return d->zscore > 0 && d->count == d->window; }

// Mean and standard deviation (population) of a full window, summed in index order (the same on
// every rank). A deviation below 1e-6 of the mean counts as that much: a flat window must not
// turn rounding noise into spikes.
static void window_stats(const double* x, int n, double* mean, double* sd) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    const double m = sum / n;
    double sq = 0;
    for (int i = 0; i < n; i++) sq += (x[i] - m) * (x[i] - m);
    const double floor = 1e-6 * fabs(m);
    double s = sqrt(sq / n);
    if (s < floor) s = floor;
    *mean = m;
    *sd = s > 0 ? s : 1e-300;
}

StepLimits spike_limits(const SpikeDetector* d, long tokens_per_step) {
    if (!acting(d)) return STEP_NO_LIMITS;
    double m, s;
    StepLimits lim;
    window_stats(d->loss, d->window, &m, &s);
    lim.loss_sum = (m + d->zscore * s) * (double)tokens_per_step;
    window_stats(d->norm, d->window, &m, &s);
    const double norm = m + d->zscore * s;
    lim.sumsq = norm * norm;
    return lim;
}

static double zscore_of(const double* x, int n, double v) {
    double m, s;
    window_stats(x, n, &m, &s);
    const double z = (v - m) / s;
    return isfinite(z) ? z : z > 0 ? 1e300 : -1e300;   // logs hold finite numbers only
}

void spike_zscores(const SpikeDetector* d, double loss, double norm, double* loss_z,
                   double* norm_z) {
    *loss_z = acting(d) ? zscore_of(d->loss, d->window, loss) : 0;
    *norm_z = acting(d) ? zscore_of(d->norm, d->window, norm) : 0;
}

void spike_accept(SpikeDetector* d, double loss, double norm) {
    if (d->zscore <= 0) return;
    d->loss[d->next] = loss;
    d->norm[d->next] = norm;
    d->next = (d->next + 1) % d->window;
    if (d->count < d->window) d->count++;
}
