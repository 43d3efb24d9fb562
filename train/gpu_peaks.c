// The GPU peak table (gpu_peaks.h). Dense rates: NVIDIA's datasheets give tensor-core rates "with
// sparsity", twice the dense rate; the dense figure is what a GEMM can reach.
#include "train/gpu_peaks.h"

#include <ctype.h>
#include <string.h>

static const GpuPeak TABLE[] = {
    // NVIDIA A100 datasheet (2021): BF16 312 dense (624 sparse), TF32 156 dense, FP32 19.5;
    // HBM2e 2039 GB/s (SXM4 80GB), 1935 GB/s (PCIe 80GB), HBM2 1555 GB/s (40GB, both forms).
    {"A100 SXM4 80GB", 312.0, 156.0, 19.5, 2039.0, "NVIDIA A100 datasheet"},
    {"A100 SXM4 40GB", 312.0, 156.0, 19.5, 1555.0, "NVIDIA A100 datasheet"},
    {"A100 PCIe 80GB", 312.0, 156.0, 19.5, 1935.0, "NVIDIA A100 datasheet"},
    {"A100 PCIe 40GB", 312.0, 156.0, 19.5, 1555.0, "NVIDIA A100 datasheet"},
    // NVIDIA H100 datasheet: SXM5 BF16 1979 sparse = 989.4 dense, TF32 494.7, FP32 66.9, HBM3
    // 3.35 TB/s; PCIe BF16 1513 sparse = 756 dense, TF32 378, FP32 51.2, 2.0 TB/s; NVL (94 GB)
    // BF16 1671 sparse = 835.5 dense, TF32 417.5, FP32 60, 3.9 TB/s.
    {"H100 SXM5 80GB", 989.4, 494.7, 66.9, 3350.0, "NVIDIA H100 datasheet"},
    {"H100 PCIe 80GB", 756.0, 378.0, 51.2, 2000.0, "NVIDIA H100 datasheet"},
    {"H100 NVL 94GB", 835.5, 417.5, 60.0, 3900.0, "NVIDIA H100 NVL datasheet"},
    // NVIDIA H200 datasheet: SXM the H100 SXM's rates with HBM3e 4.8 TB/s (141 GB); NVL BF16 1671
    // sparse = 835.5 dense, TF32 417.5, FP32 60, 4.8 TB/s.
    {"H200 SXM 141GB", 989.4, 494.7, 66.9, 4800.0, "NVIDIA H200 datasheet"},
    {"H200 NVL 141GB", 835.5, 417.5, 60.0, 4800.0, "NVIDIA H200 datasheet"},
    // NVIDIA HGX B200 datasheet, 8-GPU figures / 8: BF16 36 PF sparse = 2250 dense per GPU, TF32
    // 18 PF sparse = 1125 dense, FP32 600 TF = 75, HBM3e 64 TB/s = 8 TB/s.
    {"B200", 2250.0, 1125.0, 75.0, 8000.0, "NVIDIA HGX B200 datasheet (per GPU)"},
};
enum { TABLE_N = sizeof TABLE / sizeof TABLE[0] };

// Case-insensitive substring test.
static int contains(const char* hay, const char* needle) {
    const size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return 1;
    }
    return 0;
}

static const GpuPeak* entry(const char* name) {
    for (int i = 0; i < TABLE_N; i++)
        if (!strcmp(TABLE[i].name, name)) return &TABLE[i];
    return NULL;
}

// CUDA's names: "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe",
// "NVIDIA H100 80GB HBM3" (SXM5), "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200",
// "NVIDIA H200 NVL", "NVIDIA B200". Other parts (GH200, H800, H20, A800, ...) have other rates and
// are left unknown (GH200 must not match "H200").
const GpuPeak* gpu_peak_lookup(const char* name, size_t memory_bytes) {
    if (!name) return NULL;
    const int big = memory_bytes > ((size_t)48 << 30);   // 80 GB parts report ~79-80 GiB
    if (contains(name, "GH200")) return NULL;
    if (contains(name, "H200")) return entry(contains(name, "NVL") ? "H200 NVL 141GB" : "H200 SXM 141GB");
    if (contains(name, "H100")) {
        if (contains(name, "NVL")) return entry("H100 NVL 94GB");
        if (contains(name, "PCIe")) return entry("H100 PCIe 80GB");
        if (contains(name, "HBM3") || contains(name, "SXM")) return entry("H100 SXM5 80GB");
        return NULL;
    }
    if (contains(name, "A100")) {
        if (contains(name, "PCIE")) return entry(big ? "A100 PCIe 80GB" : "A100 PCIe 40GB");
        return entry(big ? "A100 SXM4 80GB" : "A100 SXM4 40GB");
    }
    if (contains(name, "B200")) return entry("B200");
    return NULL;
}

double gpu_peak_flops(const GpuPeak* p, int fp32_build) {
    if (!p) return 0;
    return (fp32_build ? p->fp32_tflops : p->bf16_tflops) * 1e12;
}

const GpuPeak* gpu_peak_table(int* n) {
    *n = TABLE_N;
    return TABLE;
}
