// Datasheet peaks of the GPUs the CUDA path is written for: the one table behind the trainer's MFU
// (CUDA builds), the kernel benchmark's floor times and the GPU report. Dense rates (no 2:4
// sparsity); sources are in gpu_peaks.c next to each entry.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char* name;         // e.g. "H100 SXM5 80GB"
    double bf16_tflops;       // dense bf16/fp16 tensor-core rate
    double tf32_tflops;       // dense tf32 tensor-core rate
    double fp32_tflops;       // fp32 on the CUDA cores (0: not published)
    double hbm_gbps;          // memory bandwidth, GB/s
    const char* source;
} GpuPeak;

// The entry for a device, from the name CUDA reports (cudaDeviceProp.name) and its memory in bytes
// (which tells the A100 40 GB from the 80 GB). NULL for a device the table does not know: callers
// then report MFU as unknown rather than guess.
const GpuPeak* gpu_peak_lookup(const char* device_name, size_t memory_bytes);

// The peak FLOP/s (not TFLOP/s) a build's arithmetic runs at on that entry: bf16 tensor cores for
// the bf16 build, the CUDA cores' fp32 rate for the fp32 build (its GEMMs use
// CUBLAS_COMPUTE_32F, no TF32). 0 when the entry has no such figure.
double gpu_peak_flops(const GpuPeak* p, int fp32_build);

// Every entry, for listings and tests; *n gets the count.
const GpuPeak* gpu_peak_table(int* n);

#ifdef __cplusplus
}
#endif
