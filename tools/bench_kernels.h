// Shared by the kernel benchmark's files: bench_kernels_cuda.cu (options, ceilings, tables, the
// attention comparison, main), bench_kernel_cases.cu (every launcher of the step as a case: its
// buffers, its cost and the call that is timed) and bench_timing.cu (buffers and timing, on
// bench_device.cu's fills and event timing).
#pragma once
#include <stddef.h>
#include <stdio.h>

#include "model/cuda_common.cuh"
#include "model/matmul_cuda.cuh"
#include "tools/bench_device.cuh"   // fills, Timing
#include "tools/kernel_costs.h"
#include "train/gpu_peaks.h"

enum { MAX_SHAPES = 16, MAX_BUFS = 10, MAX_COPIES = 4, MAX_CASES = 32, MAX_VS = 64, MAX_TOKENS = 1 << 20 };

// One benchmark shape: a preset's widths at T tokens per sequence, N tokens per call.
typedef struct {
    char label[64];            // "gpt3-125m T=1024": the "shape" of the JSON objects
    int B, T, N, C, NH, HS, L, V, Vp, max_T;
    double model_params;       // the preset's parameter count (max_T rows of wpe)
    size_t opt_params;         // AdamW / global norm elements: min(model_params, 2^28)
} Shape;

typedef enum { ELEM_X, ELEM_F32, ELEM_I32, ELEM_F64, ELEM_BYTE } Elem;
// RANDOM: sign random, |x| in [0.25, 1); POSITIVE: [0.5, 1.5) (second moments); TOKENS: [0, V);
// NONE: written by the launcher or by the case's prepare step.
typedef enum { FILL_NONE, FILL_RANDOM, FILL_POSITIVE, FILL_TOKENS } Fill;

typedef struct {
    cudaStream_t stream;
    MatmulContext* mm;          // per shape, max_bias_oc = 4C
    cudaDeviceProp prop;
    const GpuPeak* peak;        // NULL: the device is not in the table
    double tensor_flops, cuda_core_flops, bytes_per_s;   // the floors' rates
    int floors_measured;        // 1: the rates are the measured ceilings
    int reps, warmup;
    float* delay_sink;          // delay_kernel's (never written) output
    FILE* jsonl;
    FILE* md;
} Bench;

typedef struct Case Case;
// p: the case's buffers (one copy), in the order the case added them; NULL where count was 0.
typedef void (*CaseFn)(const Bench* b, const Shape* s, const Case* c, void* const* p);

struct Case {
    char name[64];              // launcher (and layer): the "kernel" of the tables
    KernelCost cost;
    int nbuf;
    size_t count[MAX_BUFS];     // elements (0: a NULL pointer)
    Elem elem[MAX_BUFS];
    Fill fill[MAX_BUFS];
    CaseFn prepare;             // derived inputs (LayerNorm statistics, lse, d), once per copy; may be NULL
    CaseFn run;                 // the timed call
    int IC, OC, bias, gelu;     // GEMM cases
};

// --- bench_kernel_cases.cu --------------------------------------------------------------------------
size_t elem_bytes(Elem e);
// The cases of one shape, in the order of the tables; returns their number.
int shape_cases(const Shape* s, Case* cases);
// The single-device causal attention forward, and its backward with the row-dot (the comparison
// with SDPA).
Case case_attention_forward(const Shape* s);
Case case_attention_backward_full(const Shape* s);

// --- bench_timing.cu ---------------------------------------------------------------------------------
typedef struct {
    int copies;
    void* p[MAX_COPIES][MAX_BUFS];
} CaseBuffers;

// Something to time: call i of a run (warm-up calls first), on the bench's stream.
typedef void (*TimedFn)(const Bench* b, const void* ctx, int i);

// n elements of p with random values of fill's kind (TOKENS: below s->V; s may be NULL otherwise).
void fill_buffer(const Bench* b, const Shape* s, void* p, Elem e, size_t n, Fill fill,
                 unsigned long long seed);
// A case's buffers, copies to rotate among included, filled (and prepared) on the bench's stream.
CaseBuffers alloc_case(const Bench* b, const Shape* s, const Case* c);
void free_case(CaseBuffers* cb);
// W warm-up calls, then R calls each between its own pair of events; median and min of the R.
Timing time_calls(const Bench* b, TimedFn fn, const void* ctx);
// One case timed on fresh buffers; *copies gets the copies it rotated among.
Timing time_case(const Bench* b, const Shape* s, const Case* c, int* copies);
