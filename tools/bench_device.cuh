// What the CUDA benchmarks share (tools/bench_kernels_cuda.cu and bench_timing.cu, the kernel
// benchmark; tools/attention_bench.cu, the attention benchmark): random device fills, timing between
// CUDA events, command-line errors. CUDA runtime only, so that the attention benchmark builds with
// nvcc alone.
#pragma once
#include <stddef.h>
#include <stdio.h>

#include "model/cuda_precision.cuh"

// splitmix64 of (seed, i): independent 64 random bits per element.
__device__ __forceinline__ unsigned long long bench_mix64(unsigned long long seed, unsigned long long i) {
    unsigned long long z = seed * 0x9E3779B97F4A7C15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Grid of the grid-stride fill kernels: enough blocks to fill a GPU, few threads on the host runtime.
unsigned int bench_fill_blocks(size_t n);

// n values of magnitude uniform in [lo, hi) (never zero when lo > 0), the sign random when
// signed_values; value i depends on (seed, i) only. Enqueued on `stream`.
void bench_fill_floatx(floatX* p, size_t n, unsigned long long seed, float lo, float hi, int signed_values,
                       cudaStream_t stream);
void bench_fill_float(float* p, size_t n, unsigned long long seed, float lo, float hi, int signed_values,
                      cudaStream_t stream);

typedef struct {
    double median_ms, min_ms;
} Timing;

// Call i of a timed run (warm-up calls first), enqueued on the stream being timed.
typedef void (*BenchCallFn)(const void* ctx, int i);

// `warmup` untimed calls, then `reps` calls each between its own pair of events, queued behind a
// ~5 ms kernel (on a GPU) so that they run back to back without the host's launch latency between
// an event and its kernel; median and min of the reps. sink: one device float, never written.
Timing bench_time_calls(cudaStream_t stream, int warmup, int reps, float* sink, BenchCallFn fn, const void* ctx);

// A bad command line: "error: " and the message on one line of stderr, exit status 2.
void usage_error(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
// The file of an output flag opened with fopen's mode "w" or "a" (NULL for a NULL path), or a usage
// error naming the flag; closed by bench_close_output, which fails on a write error.
FILE* bench_open_output(const char* flag, const char* path, const char* mode);
void bench_close_output(const char* flag, FILE* f, const char* path);
