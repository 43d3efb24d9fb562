// The machine's fp32 peak, measured: an FMA-issue loop on the widest vectors the build
// targets. MFU is reported against this measured rate, which is honest on machines whose
// nominal clock understates (or overstates) the real one.
#include "train/peak_flops.h"

#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Peak fp32 FMA issue rate: every thread runs 12 independent FMA chains of the widest vector
// the build targets (enough to cover the FMA latency on two pipes), so the loop is bound by
// FMA issue alone.
#ifdef __AVX512F__
typedef __m512 vecf;
#define VEC_LANES 16
#define vec_set1 _mm512_set1_ps
#define vec_fma _mm512_fmadd_ps
#define vec_add _mm512_add_ps
#define vec_first(v) _mm512_cvtss_f32(v)
#else
typedef __m256 vecf;
#define VEC_LANES 8
#define vec_set1 _mm256_set1_ps
#define vec_fma _mm256_fmadd_ps
#define vec_add _mm256_add_ps
#define vec_first(v) _mm256_cvtss_f32(v)
#endif

double peak_flops_measure(int threads) {
    if (threads <= 0) threads = omp_get_max_threads();
    // Short runs, the best of as many as fit in about 0.3 s: the peak is what the machine can
    // do, so a run slowed by another process must not lower it.
    const long iters = 2000000;
    double best = 0;
    const double start = now();
    for (int rep = 0; rep < 100 && (rep < 3 || now() - start < 0.3); rep++) {
        const double t0 = now();
        float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        {
            vecf acc[12];
            const vecf a = vec_set1(0.999999f), b = vec_set1(1e-7f);
            for (int k = 0; k < 12; k++) acc[k] = vec_set1((float)k);
            for (long i = 0; i < iters; i++) {
                for (int k = 0; k < 12; k++) acc[k] = vec_fma(acc[k], a, b);
            }
            vecf s = acc[0];
            for (int k = 1; k < 12; k++) s = vec_add(s, acc[k]);
            sink += vec_first(s);
        }
        const double dt = now() - t0;
        const double flops = (double)threads * iters * 12 * VEC_LANES * 2;
        if (flops / dt > best) best = flops / dt;
        if (sink == 12345.0f) printf(" ");   // keep the result alive
    }
    return best;
}

// Nominal clock from /proc/cpuinfo (MHz), 0 if unknown.
double peak_flops_cpu_mhz(void) {
    FILE* f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1) break;
    fclose(f);
    return mhz;
}

int peak_flops_vector_lanes(void) { return VEC_LANES; }
