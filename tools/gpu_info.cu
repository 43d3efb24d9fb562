// gpu_info: the facts of the CUDA device a GPU report starts with, and the entry of the peak table
// (train/gpu_peaks.c) that the trainer's MFU and the kernel benchmark's floors use.
//
//   gpu_info [--device N] [--jsonl FILE] [--md FILE]
//       Prints the facts; appends one JSON object ("type":"device") to FILE and a markdown table to
//       the --md FILE.
//   gpu_info --fault-test
//       Launches a kernel that writes to an invalid address, then synchronises on a later line. A
//       fault is reported where CUDA notices it: at that synchronisation, unless
//       GPT_CUDA_SYNC_CHECK=1 makes the launch itself synchronise, which names fault_kernel (the
//       GPU check runs it both ways). Exits non-zero either way.
#include "model/cuda_common.cuh"
#include "train/gpu_peaks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__global__ void fault_kernel(int* p) { p[threadIdx.x + (1 << 28)] = 1; }

static int fault_test(void) {
    int* small;
    CUDA_CHECK(cudaMalloc(&small, 64));
    LAUNCH(fault_kernel, 1, 32, 0, 0, small);
    printf("fault_kernel launched; synchronising\n");
    fflush(stdout);
    CUDA_CHECK(cudaDeviceSynchronize());   // without GPT_CUDA_SYNC_CHECK, the fault surfaces here
    printf("fault-test: the invalid write was not reported\n");
    return 1;
}

static int attr(cudaDeviceAttr a, int device) {
    int v = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&v, a, device));
    return v;
}

// JSON string contents: the device name is plain ASCII, but quote what needs it.
static void json_text(FILE* f, const char* s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

int main(int argc, char** argv) {
    int device = 0;
    const char *jsonl = NULL, *md = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fault-test")) return fault_test();
        if (!strcmp(argv[i], "--device") && i + 1 < argc) device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--jsonl") && i + 1 < argc) jsonl = argv[++i];
        else if (!strcmp(argv[i], "--md") && i + 1 < argc) md = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--device N] [--jsonl FILE] [--md FILE] | --fault-test\n", argv[0]);
            return 2;
        }
    }
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device < 0 || device >= count) {
        fprintf(stderr, "error: --device %d: this machine has %d CUDA device(s)\n", device, count);
        return 2;
    }
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    int driver = 0, runtime = 0;
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    const double sm_ghz = attr(cudaDevAttrClockRate, device) * 1e-6;
    const double mem_ghz = attr(cudaDevAttrMemoryClockRate, device) * 1e-6;
    const int bus_bits = attr(cudaDevAttrGlobalMemoryBusWidth, device);
    // Double data rate: two transfers per memory clock.
    const double mem_gbps = 2.0 * mem_ghz * 1e9 * bus_bits / 8 * 1e-9;
    const int smem_optin = attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    const double gib = (double)p.totalGlobalMem / (1 << 30);
    if (p.major < 8) {
        fprintf(stderr, "error: device %d (%s) is sm_%d%d: the programs carry machine code for sm_80 and "
                "sm_90 and PTX for compute_90, none of which runs on a GPU older than sm_80\n", device,
                p.name, p.major, p.minor);
        return 1;
    }
    const GpuPeak* peak = gpu_peak_lookup(p.name, p.totalGlobalMem);
    // Which code the device runs for our kernels: the sm_80 / sm_90 machine code of the programs,
    // or (on a newer GPU) the compute_90 PTX compiled by the driver when it loads them.
    cudaFuncAttributes fa;
    CUDA_CHECK(cudaFuncGetAttributes(&fa, fault_kernel));
    const char* image = fa.binaryVersion == 80 || fa.binaryVersion == 90 ? "machine code from the programs"
                                                                          : "the driver's JIT of compute_90 PTX";

    printf("device %d of %d: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, shared memory per block up to %d "
           "bytes\n", device, count, p.name, p.major, p.minor, p.multiProcessorCount, gib,
           p.l2CacheSize >> 20, smem_optin);
    printf("clocks: SM up to %.2f GHz, memory %.2f GHz x %d bits = %.0f GB/s; driver CUDA %d.%d, runtime "
           "%d.%d\n", sm_ghz, mem_ghz, bus_bits, mem_gbps, driver / 1000, driver % 1000 / 10,
           runtime / 1000, runtime % 1000 / 10);
    if (peak)
        printf("peak table: %s: bf16 %.1f TFLOP/s, tf32 %.1f, fp32 %.1f, HBM %.0f GB/s (%s)\n", peak->name,
               peak->bf16_tflops, peak->tf32_tflops, peak->fp32_tflops, peak->hbm_gbps, peak->source);
    else
        printf("peak table: unknown device '%s': the trainer reports MFU as n/a unless given "
               "--peak-gflops\n", p.name);
    printf("kernel image: sm_%d binary, PTX %d.%d (%s)\n", fa.binaryVersion, fa.ptxVersion / 10,
           fa.ptxVersion % 10, image);

    if (jsonl) {
        FILE* f = fopen(jsonl, "a");
        if (!f) FAIL("check the path", "--jsonl %s: cannot open for appending", jsonl);
        fprintf(f, "{\"type\":\"device\",\"index\":%d,\"count\":%d,\"name\":\"", device, count);
        json_text(f, p.name);
        fprintf(f, "\",\"cc\":\"%d.%d\",\"sms\":%d,\"memory_bytes\":%zu,\"l2_bytes\":%d,\"sm_ghz\":%.3f,"
                "\"mem_ghz\":%.3f,\"bus_bits\":%d,\"mem_gbps_theoretical\":%.1f,\"smem_optin\":%d,"
                "\"driver\":%d,\"runtime\":%d,\"kernel_binary\":%d,\"kernel_ptx\":%d,\"peak\":", p.major, p.minor,
                p.multiProcessorCount, p.totalGlobalMem, p.l2CacheSize, sm_ghz, mem_ghz, bus_bits, mem_gbps,
                smem_optin, driver, runtime, fa.binaryVersion, fa.ptxVersion);
        if (peak)
            fprintf(f, "{\"name\":\"%s\",\"bf16_tflops\":%.1f,\"tf32_tflops\":%.1f,\"fp32_tflops\":%.1f,"
                    "\"hbm_gbps\":%.0f,\"source\":\"%s\"}}\n", peak->name, peak->bf16_tflops,
                    peak->tf32_tflops, peak->fp32_tflops, peak->hbm_gbps, peak->source);
        else
            fprintf(f, "null}\n");
        if (fclose(f) != 0) FAIL("check the disk", "--jsonl %s: write failed", jsonl);
    }
    if (md) {
        FILE* f = fopen(md, "a");
        if (!f) FAIL("check the path", "--md %s: cannot open for appending", md);
        fprintf(f, "| | |\n|---|---|\n");
        fprintf(f, "| device | %s (%d of %d) |\n", p.name, device, count);
        fprintf(f, "| compute capability | %d.%d |\n", p.major, p.minor);
        fprintf(f, "| SMs | %d |\n", p.multiProcessorCount);
        fprintf(f, "| memory | %.1f GiB |\n", gib);
        fprintf(f, "| L2 | %d MiB |\n", p.l2CacheSize >> 20);
        fprintf(f, "| shared memory per block (opt-in) | %d bytes |\n", smem_optin);
        fprintf(f, "| SM clock (max) | %.2f GHz |\n", sm_ghz);
        fprintf(f, "| memory | %.2f GHz x %d bits = %.0f GB/s theoretical |\n", mem_ghz, bus_bits, mem_gbps);
        fprintf(f, "| driver / runtime | CUDA %d.%d / %d.%d |\n", driver / 1000, driver % 1000 / 10,
                runtime / 1000, runtime % 1000 / 10);
        fprintf(f, "| kernel image loaded | sm_%d binary, PTX %d.%d: %s |\n", fa.binaryVersion, fa.ptxVersion / 10,
                fa.ptxVersion % 10, image);
        if (peak)
            fprintf(f, "| peak table entry (MFU, floors) | %s: bf16 %.1f TFLOP/s, tf32 %.1f, fp32 %.1f, HBM "
                    "%.0f GB/s (%s) |\n", peak->name, peak->bf16_tflops, peak->tf32_tflops, peak->fp32_tflops,
                    peak->hbm_gbps, peak->source);
        else
            fprintf(f, "| peak table entry (MFU, floors) | unknown: MFU reported as n/a |\n");
        if (fclose(f) != 0) FAIL("check the disk", "--md %s: write failed", md);
    }
    return 0;
}
