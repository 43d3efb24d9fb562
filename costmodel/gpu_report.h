// A GPU kit report (tools/gpu_check.sh's gpu_report.jsonl, and any other *.jsonl beside it in a
// results/gpu/ folder) read into the rows the cost model calibrates and validates against:
//   device             the GPU and its datasheet peaks
//   kernel             one kernel of the step at one shape, timed (tools/bench_kernels_cuda.cu):
//                      shape "PRESET T=N", kernel "NAME_cuda[ ROLE]", ms, GFLOP, MB
//   attention_vs_sdpa  causal attention at head size hs, T, B, NH: ours and PyTorch's flash SDPA
//   throughput         a trainer run "PRESET B=N T=N, ..." on one GPU: ms per step and its phases
//   fit                an alpha-beta fit of a collective over P ranks (tools/bench_collectives)
// Other record types are skipped. Every number read must be present and finite, and the counts
// (hs, T, B, NH, P) whole numbers in [1, INT_MAX].
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GPU_REPORT_TEXT = 128 };

typedef struct {
    char shape[GPU_REPORT_TEXT];    // "gpt3-125m T=1024"
    char kernel[GPU_REPORT_TEXT];   // "matmul_backward_cuda qkv"
    double ms, gflop, mbytes;
} GpuKernelRow;

typedef struct {
    int hs, T, B, NH;
    double ours_fwd_ms, ours_bwd_ms, sdpa_fwd_ms, sdpa_bwd_ms;
    double ours_fwd_tflops, ours_bwd_tflops;
} GpuAttentionRow;

typedef struct {
    char run[GPU_REPORT_TEXT];      // "gpt3-125m B=8 T=1024, 8 steps"
    char preset[32];
    int B;
    long T;
    double ms_per_step, forward_ms, backward_ms, optimizer_ms;
    char file[GPU_REPORT_TEXT];     // the .jsonl it came from (base name)
} GpuThroughputRow;

typedef struct {
    char op[32], transport[32];     // "all_gather", "nccl"
    int P;
    double alpha_s, beta_s_per_byte;
} GpuFitRow;

typedef struct {
    char gpu[GPU_REPORT_TEXT];      // the device record's name
    double bf16_tflops, hbm_gbps;   // its datasheet peaks (the record's "peak")
    int nkernels, nattention, nthroughput, nfits;
    GpuKernelRow* kernels;
    GpuAttentionRow* attention;
    GpuThroughputRow* throughput;
    GpuFitRow* fits;
} GpuReport;

// Reads PATH: one .jsonl file, or a folder whose *.jsonl files are read in name order. Returns 0,
// or -1 with a one-line message naming the file and line (no device record, a bad number, ...).
// A throughput run that two files both hold is kept once, from the first file read.
int gpu_report_read(const char* path, GpuReport* r, char* err, size_t errlen);
void gpu_report_free(GpuReport* r);

// "gpt3-125m T=1024" -> preset and T; "gpt3-125m B=8 T=1024, ..." likewise with B (1 when
// absent). Returns 0, or -1 when T is missing or either is not a whole number in range.
int gpu_report_parse_shape(const char* text, char* preset, size_t len, int* B, long* T);

#ifdef __cplusplus
}
#endif
