// Checks for the host runtime's tests: each prints "ok" or "FAIL" with what it checked, and
// test_finish() gives the exit status. Host code only; compiles under nvcc as well.
#pragma once
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static int test_failures;
static int test_checks;

static void check(int ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    test_checks++;
    if (!ok) test_failures++;
}

// Largest |got - want| / (atol + rtol * |want|) over n values; <= 1 means within tolerance.
static inline double tolerance_ratio(const float* got, const double* want, long n, double atol, double rtol) {
    double worst = 0.0;
    for (long i = 0; i < n; i++) {
        double r = fabs((double)got[i] - want[i]) / (atol + rtol * fabs(want[i]));
        if (!(r <= worst)) worst = r;  // NaN counts as the worst
    }
    return worst;
}

static inline int test_finish(const char* name) {
    if (test_failures) {
        printf("%s: %d of %d checks FAILED\n", name, test_failures, test_checks);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, test_checks);
    return 0;
}
