// The runtime API under the host runtime, with known answers: device properties, memory (copies,
// memsets, checks of directions and bounds), streams and events in order, __constant__ symbols,
// and bf16 conversions.
#include "model/cuda_common.cuh"
#include "tests/cuda_host/test_check.h"

#include <stdlib.h>
#include <string.h>

static void test_device(void) {
    int count = 0, dev = -1, sms = 0, optin = 0;
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    check(count >= 1 && dev == 0, "a device is present and selected (count %d, device %d)", count, dev);
    printf("info device: %s, sm_%d%d, %d SMs, %zu MiB\n", p.name, p.major, p.minor, p.multiProcessorCount,
           p.totalGlobalMem >> 20);
    check(p.warpSize == 32 && p.maxThreadsPerBlock == 1024 && sms == p.multiProcessorCount,
          "properties: warp 32, 1024 threads per block, SM count %d", sms);
#ifdef CUDA_HOST
    check(p.major == 9 && p.minor == 0 && p.multiProcessorCount == 132 && optin == 227 * 1024,
          "the host runtime reports an H100 (sm_90, 132 SMs, 227 KiB opt-in shared memory)");
    cudaError_t err = cudaSetDevice(1);
    check(err == cudaErrorInvalidDevice, "cudaSetDevice(1) fails with %s", cudaGetErrorName(err));
    check(cudaGetLastError() == cudaErrorInvalidDevice && cudaGetLastError() == cudaSuccess,
          "a failed API call is also the last error, once");
#endif
}

static void test_memory(void) {
    const int n = 1000;
    float *d, *d2, *pinned;
    CUDA_CHECK(cudaMalloc(&d, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d2, n * sizeof(float)));
    CUDA_CHECK(cudaMallocHost(&pinned, n * sizeof(float)));
    check(((size_t)d & 255) == 0 && ((size_t)d2 & 255) == 0, "cudaMalloc returns 256-byte aligned blocks");
    float h[n];
#ifdef CUDA_HOST
    CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    check(h[0] != h[0] && h[n - 1] != h[n - 1], "new device memory reads as NaN (0xFF bytes)");
#endif
    for (int i = 0; i < n; i++) pinned[i] = (float)i;
    CUDA_CHECK(cudaMemcpy(d, pinned, n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d2, d, n * sizeof(float), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemset(d2, 0, 10 * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(h, d2, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += h[i] != (i < 10 ? 0.0f : (float)i);
    check(bad == 0, "H2D from pinned memory, D2D, memset and D2H round trip (%d wrong)", bad);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    check(free_b > 0 && free_b <= total_b, "cudaMemGetInfo: %zu of %zu MiB free", free_b >> 20, total_b >> 20);
#ifdef CUDA_HOST
    cudaError_t err = cudaMemcpy(d, h, sizeof h, cudaMemcpyDeviceToHost);  // kind reversed
    check(err == cudaErrorInvalidValue, "a copy whose kind contradicts its pointers is refused: %s (%s)",
          cudaGetErrorName(err), cuda_host_error_detail());
    err = cudaMemcpy(d, h, (n + 1) * sizeof(float), cudaMemcpyHostToDevice);
    check(err == cudaErrorInvalidValue, "a copy past the end of an allocation is refused: %s (%s)",
          cudaGetErrorName(err), cuda_host_error_detail());
    err = cudaMemset(h, 0, sizeof h);
    check(err == cudaErrorInvalidValue, "cudaMemset of host memory is refused: %s (%s)", cudaGetErrorName(err),
          cuda_host_error_detail());
    err = cudaFree(d + 1);
    check(err == cudaErrorInvalidValue, "cudaFree of an inner pointer is refused: %s (%s)", cudaGetErrorName(err),
          cuda_host_error_detail());
    (void)cudaGetLastError();
#endif
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(d2));
    CUDA_CHECK(cudaFreeHost(pinned));
    CUDA_CHECK(cudaFree(NULL));

    // Blocks of 2 MiB and more (the host runtime aligns them to 2 MiB, for huge pages where it can):
    // the same filling, bounds, alignment and release; a length that is no multiple of a page.
    const size_t big = ((size_t)3 << 20) + 100 * sizeof(float);
    float *b, *bh;
    CUDA_CHECK(cudaMalloc(&b, big));
    CUDA_CHECK(cudaMallocHost(&bh, big));
    check(((size_t)b & 255) == 0 && ((size_t)bh & 255) == 0, "large blocks are 256-byte aligned too");
    const size_t nb = big / sizeof(float);
    for (size_t i = 0; i < nb; i++) bh[i] = (float)(i % 1000);
#ifdef CUDA_HOST
    float edge[2];
    CUDA_CHECK(cudaMemcpy(&edge[0], b, sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&edge[1], b + nb - 1, sizeof(float), cudaMemcpyDeviceToHost));
    check(edge[0] != edge[0] && edge[1] != edge[1], "a new 3 MiB block reads as NaN at both ends");
    err = cudaMemcpy(b + 1, bh, big, cudaMemcpyHostToDevice);
    check(err == cudaErrorInvalidValue, "a copy past the end of a 3 MiB block is refused: %s (%s)",
          cudaGetErrorName(err), cuda_host_error_detail());
    err = cudaFree(b + 1);
    check(err == cudaErrorInvalidValue, "cudaFree of an inner pointer of a 3 MiB block is refused: %s (%s)",
          cudaGetErrorName(err), cuda_host_error_detail());
    (void)cudaGetLastError();
#endif
    CUDA_CHECK(cudaMemcpy(b, bh, big, cudaMemcpyHostToDevice));
    memset(bh, 0, big);
    CUDA_CHECK(cudaMemcpy(bh, b, big, cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (size_t i = 0; i < nb; i++) wrong += bh[i] != (float)(i % 1000);
    check(wrong == 0, "a 3 MiB round trip through pinned memory (%zu wrong)", wrong);
    CUDA_CHECK(cudaFree(b));
    CUDA_CHECK(cudaFreeHost(bh));
}

// --- Streams and events ------------------------------------------------------------------------

__global__ void fill_kernel(float* x, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v + i;
}

__global__ void scale_kernel(float* y, const float* x, int n, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}

static void test_streams_events(void) {
    const int n = 5000;
    cudaStream_t s1, s2;
    cudaEvent_t written, start, stop, untimed;
    float *x, *y, *h;
    CUDA_CHECK(cudaStreamCreate(&s1));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&written));
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    CUDA_CHECK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc(&x, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&y, n * sizeof(float)));
    CUDA_CHECK(cudaMallocHost(&h, n * sizeof(float)));

    CUDA_CHECK(cudaEventRecord(start, s1));
    LAUNCH(fill_kernel, (n + 255) / 256, 256, 0, s1, x, n, 1.0f);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(written, s1));
    CUDA_CHECK(cudaStreamWaitEvent(s2, written, 0));  // s2's kernel must see s1's fill
    LAUNCH(scale_kernel, (n + 255) / 256, 256, 0, s2, y, x, n, 2.0f);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(h, y, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
    CUDA_CHECK(cudaEventRecord(stop, s2));
    CUDA_CHECK(cudaStreamSynchronize(s2));
    CUDA_CHECK(cudaEventSynchronize(stop));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += h[i] != 2.0f * (1.0f + i);
    check(bad == 0, "kernel on s1, event, wait on s2, kernel and async copy on s2: results in order (%d wrong)", bad);
    float ms = -1.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    check(ms >= 0.0f, "cudaEventElapsedTime(start, stop) = %.3f ms", ms);
    CUDA_CHECK(cudaEventRecord(untimed, s1));
    cudaError_t err = cudaEventElapsedTime(&ms, start, untimed);
    check(err == cudaErrorInvalidResourceHandle, "elapsed time with a cudaEventDisableTiming event fails: %s",
          cudaGetErrorName(err));
    (void)cudaGetLastError();
    CUDA_CHECK(cudaStreamQuery(s1));
    CUDA_CHECK(cudaEventQuery(stop));
    CUDA_CHECK(cudaMemsetAsync(y, 0, n * sizeof(float), s1));
    float* tmp;
    CUDA_CHECK(cudaMallocAsync(&tmp, n * sizeof(float), s1));
    CUDA_CHECK(cudaMemcpyAsync(tmp, x, n * sizeof(float), cudaMemcpyDeviceToDevice, s1));
    CUDA_CHECK(cudaMemcpyAsync(h, tmp, 2 * sizeof(float), cudaMemcpyDeviceToHost, s1));
    CUDA_CHECK(cudaFreeAsync(tmp, s1));
    CUDA_CHECK(cudaStreamSynchronize(s1));
    check(h[0] == 1.0f && h[1] == 2.0f, "cudaMallocAsync / cudaFreeAsync and an async D2D copy on s1");
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventDestroy(written));
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    CUDA_CHECK(cudaEventDestroy(untimed));
    CUDA_CHECK(cudaStreamDestroy(s1));
    CUDA_CHECK(cudaStreamDestroy(s2));
#ifdef CUDA_HOST
    err = cudaStreamSynchronize(s1);
    check(err == cudaErrorInvalidResourceHandle, "a destroyed stream is refused: %s", cudaGetErrorName(err));
    (void)cudaGetLastError();
#endif
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
    CUDA_CHECK(cudaFreeHost(h));
}

// --- __constant__ memory --------------------------------------------------------------------

__constant__ float coeffs[4];

__global__ void poly_kernel(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = coeffs[0] + i * (coeffs[1] + i * (coeffs[2] + i * coeffs[3]));
}

static void test_constant(void) {
    const float c[4] = {1.0f, -2.0f, 0.5f, 0.25f};
    const int n = 40;
    float* d;
    float h[n];
    CUDA_CHECK(cudaMemcpyToSymbol(coeffs, c, sizeof c));
    CUDA_CHECK(cudaMalloc(&d, n * sizeof(float)));
    LAUNCH(poly_kernel, 1, 64, 0, 0, d, n);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += h[i] != c[0] + i * (c[1] + i * (c[2] + i * c[3]));
    check(bad == 0, "__constant__ coefficients set with cudaMemcpyToSymbol (%d wrong)", bad);
    float back[4];
    CUDA_CHECK(cudaMemcpyFromSymbol(back, coeffs, sizeof back));
    check(!memcmp(back, c, sizeof c), "cudaMemcpyFromSymbol reads them back");
    CUDA_CHECK(cudaFree(d));
}

// --- bf16 ----------------------------------------------------------------------------------

static unsigned short bits_of(float f) { return __bfloat16_as_ushort(__float2bfloat16(f)); }

__global__ void bf16_kernel(const float* in, __nv_bfloat16* out, float* back, int n) {
    int i = threadIdx.x;
    if (i < n) {
        out[i] = __float2bfloat16_rn(in[i]);
        back[i] = __bfloat162float(out[i]);
    }
}

static void test_bf16(void) {
    check(bits_of(1.0f) == 0x3f80 && bits_of(-2.0f) == 0xc000, "exact values: 1 -> 0x3f80, -2 -> 0xc000");
    check(bits_of(1.0f + 1.0f / 256) == 0x3f80, "a tie rounds to even, down: 1 + 2^-8 -> 0x3f80 (got 0x%04x)",
          bits_of(1.0f + 1.0f / 256));
    check(bits_of(1.0f + 3.0f / 256) == 0x3f82, "a tie rounds to even, up: 1 + 3*2^-8 -> 0x3f82 (got 0x%04x)",
          bits_of(1.0f + 3.0f / 256));
    check(bits_of(1.0f + 1.0f / 256 + 1.0f / 65536) == 0x3f81, "above a tie rounds up: 0x3f81 (got 0x%04x)",
          bits_of(1.0f + 1.0f / 256 + 1.0f / 65536));
    check(bits_of(INFINITY) == 0x7f80 && bits_of(-INFINITY) == 0xff80, "infinities are kept");
    check(bits_of(3.4e38f) == 0x7f80, "values above the largest bf16 round to infinity (0x%04x)", bits_of(3.4e38f));
    check(bits_of(NAN) == 0x7fff, "NaN becomes the canonical 0x7fff (got 0x%04x)", bits_of(NAN));
    check(bits_of(-0.0f) == 0x8000 && bits_of(1e-40f) == 0x0001, "-0 and denormals (1e-40 -> 0x0001, got 0x%04x)",
          bits_of(1e-40f));
    __nv_bfloat162 two = __floats2bfloat162_rn(1.5f, -0.1f);
    float2 f2 = __bfloat1622float2(two);
    check(f2.x == 1.5f && f2.y == __bfloat162float(__float2bfloat16(-0.1f)), "__nv_bfloat162 pack and unpack");

    const int n = 6;
    float h[n] = {0.1f, -3.14159f, 65504.0f, 1e-3f, 7.0f, -0.0f};
    float *d_in, *d_back, back[n];
    __nv_bfloat16* d_out;
    CUDA_CHECK(cudaMalloc(&d_in, sizeof h));
    CUDA_CHECK(cudaMalloc(&d_back, sizeof back));
    CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMemcpy(d_in, h, sizeof h, cudaMemcpyHostToDevice));
    LAUNCH(bf16_kernel, 1, 32, 0, 0, d_in, d_out, d_back, n);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(back, d_back, sizeof back, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += back[i] != __bfloat162float(__float2bfloat16(h[i]));
    check(bad == 0, "bf16 conversions in a kernel match the host conversions (%d wrong)", bad);
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_back));
    CUDA_CHECK(cudaFree(d_out));
}

int main(void) {
    test_device();
    test_memory();
    test_streams_events();
    test_constant();
    test_bf16();
    return test_finish("test_api");
}
