// Error bounds of the CUDA kernel tests, with a column for each place the tests run.
//
// The same test sources run on the host runtime (g++, -DCUDA_HOST) and on a GPU (nvcc). The two
// compute the kernels' fp32 arithmetic differently: nvcc contracts a * b + c into one FMA (one
// rounding instead of two), the GPU's exp2f / __expf / rsqrtf / tanhf are approximations of a few
// ulp while the host runtime calls libm, and the tensor cores and cuBLASLt add products in their
// own order. A bound measured and tuned on the host may therefore be too tight on a GPU. Each bound
// states both values and why they differ; a program applies the column of the build it is and
// prints, at the end, one line per bound with the worst error it saw:
//
//   bound <test> <name> host <h> gpu <g> applied <a> worst <w> ok|FAIL | <why>
//
// (tools/gpu_check.sh collects these lines into the GPU report's tolerance table). Errors are
// relative: max|got - want| / max|want| unless the test says otherwise.
#pragma once
#include <stdio.h>

typedef struct {
    const char* name;
    double host;      // bound on the host runtime
    double gpu;       // bound on a GPU
    const char* why;  // why the GPU bound differs (or why it does not)
    double worst;     // worst error seen so far (NaN counts as infinite)
} Bound;

// The bound that applies to this build.
static inline double bound_limit(const Bound* b) {
#if defined(CUDA_HOST)
    return b->host;
#else
    return b->gpu;
#endif
}

static inline const char* bound_column(void) {
#if defined(CUDA_HOST)
    return "host";
#else
    return "gpu";
#endif
}

// Records an error against the bound; returns 1 if it is within it.
static inline int bound_seen(Bound* b, double err) {
    if (!(err <= b->worst)) b->worst = err;  // NaN is the worst
    return err <= bound_limit(b);
}

static inline void bounds_report(const char* test, const Bound* list, int n) {
    for (int i = 0; i < n; i++) {
        const Bound* b = &list[i];
        printf("bound %s %s host %.1e gpu %.1e applied %.1e worst %.2e %s | %s\n", test, b->name,
               b->host, b->gpu, bound_limit(b), b->worst, b->worst <= bound_limit(b) ? "ok" : "FAIL",
               b->why);
    }
}
