// The GPU peak table (train/gpu_peaks.c) on the names CUDA reports for the parts it knows, and on
// parts it must leave unknown (MFU is then reported as n/a, not guessed).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/test_expect.h"
#include "train/gpu_peaks.h"

static const size_t GB = (size_t)1 << 30;

static void expect_entry(const char* device, size_t memory, const char* want) {
    const GpuPeak* p = gpu_peak_lookup(device, memory);
    if (want)
        EXPECT(p && !strcmp(p->name, want), "'%s' (%zu GiB) -> %s (got %s)", device, memory / GB, want,
               p ? p->name : "unknown");
    else
        EXPECT(!p, "'%s' is unknown to the table (got %s)", device, p ? p->name : "unknown");
}

int main(void) {
    expect_entry("NVIDIA H100 80GB HBM3", 80 * GB, "H100 SXM5 80GB");
    expect_entry("NVIDIA H100 PCIe", 80 * GB, "H100 PCIe 80GB");
    expect_entry("NVIDIA H100 NVL", 94 * GB, "H100 NVL 94GB");
    expect_entry("NVIDIA H200", 141 * GB, "H200 SXM 141GB");
    expect_entry("NVIDIA H200 NVL", 141 * GB, "H200 NVL 141GB");
    expect_entry("NVIDIA A100-SXM4-80GB", 80 * GB, "A100 SXM4 80GB");
    expect_entry("NVIDIA A100-SXM4-40GB", 40 * GB, "A100 SXM4 40GB");
    expect_entry("NVIDIA A100-PCIE-40GB", 40 * GB, "A100 PCIe 40GB");
    expect_entry("NVIDIA A100 80GB PCIe", 80 * GB, "A100 PCIe 80GB");
    expect_entry("NVIDIA B200", 180 * GB, "B200");
    expect_entry("NVIDIA GH200 480GB", 96 * GB, NULL);   // not an H200
    expect_entry("NVIDIA H800", 80 * GB, NULL);
    expect_entry("NVIDIA GeForce RTX 4090", 24 * GB, NULL);
    expect_entry("", 0, NULL);
    expect_entry(NULL, 0, NULL);

    const GpuPeak* h100 = gpu_peak_lookup("NVIDIA H100 80GB HBM3", 80 * GB);
    EXPECT(h100 && fabs(gpu_peak_flops(h100, 0) / 989.4e12 - 1) < 1e-12 &&
               fabs(gpu_peak_flops(h100, 1) / 66.9e12 - 1) < 1e-12 && h100->hbm_gbps == 3350.0,
           "H100 SXM5: bf16 989.4 TFLOP/s (bf16 build), fp32 66.9 (fp32 build), 3350 GB/s");
    EXPECT(gpu_peak_flops(NULL, 0) == 0, "no entry: peak 0 (MFU n/a)");
    int n;
    const GpuPeak* t = gpu_peak_table(&n);
    int sane = n >= 10;
    for (int i = 0; i < n; i++)
        sane = sane && t[i].bf16_tflops > t[i].tf32_tflops && t[i].tf32_tflops > t[i].fp32_tflops &&
               t[i].fp32_tflops > 0 && t[i].hbm_gbps > 1000 && t[i].source && t[i].source[0];
    EXPECT(sane, "%d entries, each with bf16 > tf32 > fp32 > 0, HBM over 1 TB/s and a source", n);
    printf("test_gpu_peaks: %d failure(s)\n", failures);
    return failures != 0;
}
