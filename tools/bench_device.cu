// Random device fills and CUDA-event timing of the benchmarks (tools/bench_device.cuh).
#include "tools/bench_device.cuh"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// Magnitude uniform in [lo, hi) (lo > 0: never zero), sign random when `signed_values`.
__device__ __forceinline__ float random_value(unsigned long long h, float lo, float hi, int signed_values) {
    const float u = (float)(h >> 40) * (1.0f / 16777216.0f);
    const float mag = lo + (hi - lo) * u;
    return signed_values && (h & 1) ? -mag : mag;
}

__global__ void fill_floatx_kernel(floatX* p, size_t n, unsigned long long seed, float lo, float hi,
                                   int signed_values) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = from_float<floatX>(random_value(bench_mix64(seed, i), lo, hi, signed_values));
}

__global__ void fill_float_kernel(float* p, size_t n, unsigned long long seed, float lo, float hi,
                                  int signed_values) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = random_value(bench_mix64(seed, i), lo, hi, signed_values);
}

// Keeps one warp busy for `iters` dependent FMAs (about 2.3 ns each on an H100: 2^21 = ~5 ms), so
// that the timed calls queue up behind it. The result is stored only in a case that never happens.
__global__ void delay_kernel(float* sink, int iters) {
    float x = (float)threadIdx.x;
    for (int i = 0; i < iters; i++) x = x * 0.999999f + 1e-7f;
    if (x == -1.0f) *sink = x;
}

unsigned int bench_fill_blocks(size_t n) {
    const size_t blocks = (n + 255) / 256;
    return (unsigned int)(blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks);
}

void bench_fill_floatx(floatX* p, size_t n, unsigned long long seed, float lo, float hi, int signed_values,
                       cudaStream_t stream) {
    LAUNCH(fill_floatx_kernel, bench_fill_blocks(n), 256, 0, stream, p, n, seed, lo, hi, signed_values);
}

void bench_fill_float(float* p, size_t n, unsigned long long seed, float lo, float hi, int signed_values,
                      cudaStream_t stream) {
    LAUNCH(fill_float_kernel, bench_fill_blocks(n), 256, 0, stream, p, n, seed, lo, hi, signed_values);
}

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

Timing bench_time_calls(cudaStream_t stream, int warmup, int reps, float* sink, BenchCallFn fn, const void* ctx) {
    const int R = reps;
    cudaEvent_t* ev = (cudaEvent_t*)xcalloc(2 * (size_t)R, sizeof(cudaEvent_t), "timing events");
    double* ms = (double*)xcalloc((size_t)R, sizeof(double), "timings");
    for (int i = 0; i < 2 * R; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < warmup; i++) fn(ctx, i);
#if !defined(CUDA_HOST)  // the host runtime's streams are synchronous: nothing queues up there
    LAUNCH(delay_kernel, 1, 32, 0, stream, sink, 1 << 21);
#else
    (void)sink;
#endif
    for (int r = 0; r < R; r++) {
        CUDA_CHECK(cudaEventRecord(ev[2 * r], stream));
        fn(ctx, warmup + r);
        CUDA_CHECK(cudaEventRecord(ev[2 * r + 1], stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int r = 0; r < R; r++) {
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, ev[2 * r], ev[2 * r + 1]));
        ms[r] = t;
    }
    for (int i = 0; i < 2 * R; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
    qsort(ms, (size_t)R, sizeof(double), cmp_double);
    Timing t;
    t.median_ms = R % 2 ? ms[R / 2] : 0.5 * (ms[R / 2 - 1] + ms[R / 2]);
    t.min_ms = ms[0];
    free(ev);
    free(ms);
    return t;
}

void usage_error(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

FILE* bench_open_output(const char* flag, const char* path, const char* mode) {
    if (!path) return NULL;
    FILE* f = fopen(path, mode);
    if (!f)
        usage_error("%s: expected a file that can be opened for %s, found '%s' (%s)", flag,
                          mode[0] == 'a' ? "appending" : "writing", path, strerror(errno));
    return f;
}

void bench_close_output(const char* flag, FILE* f, const char* path) {
    if (f && fclose(f) != 0) FAIL("check the disk", "%s %s: write failed", flag, path);
}
