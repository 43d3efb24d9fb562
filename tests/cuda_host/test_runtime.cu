// Kernel execution under the host runtime, with known answers: thread indices, shared-memory
// reduction and transpose, warp shuffles, votes and scans, a race that only the barrier fixes,
// atomics, dynamic shared memory, and launches CUDA rejects. `--die NAME` runs one case that
// must end the program with a diagnostic (checked by tests/cuda_host/expect_fail.sh).
#include "model/cuda_common.cuh"
#include "model/cuda_ptx.cuh"
#include "tests/cuda_host/test_check.h"

#include <omp.h>
#include <thread>

#include <stdlib.h>
#include <string.h>

static int* device_ints(const int* host, int n) {
    int* d;
    CUDA_CHECK(cudaMalloc(&d, (size_t)n * sizeof(int)));
    if (host) CUDA_CHECK(cudaMemcpy(d, host, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
    return d;
}

static void to_host(void* dst, const void* src, size_t bytes) {
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

// --- Indices -------------------------------------------------------------------------------------

__global__ void index_kernel(int* out) {
    int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int threads = blockDim.x * blockDim.y * blockDim.z;
    out[block * threads + thread] += 1 + block * 1000 + thread;  // += : each slot written once
}

static void test_indices(void) {
    dim3 grid(3, 2, 2), block(4, 3, 2);
    int n = 12 * 24;
    int* d = device_ints(NULL, n);
    CUDA_CHECK(cudaMemset(d, 0, (size_t)n * sizeof(int)));
    LAUNCH(index_kernel, grid, block, 0, 0, d);
    CUDA_CHECK(cudaGetLastError());
    int* h = (int*)malloc((size_t)n * sizeof(int));
    to_host(h, d, (size_t)n * sizeof(int));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += h[i] != 1 + (i / 24) * 1000 + i % 24;
    check(bad == 0, "3-D grid (3,2,2) x block (4,3,2): every thread sees its own indices once (%d wrong)", bad);
    free(h);
    CUDA_CHECK(cudaFree(d));
}

// --- Block reduction in shared memory ------------------------------------------------------------

__global__ void block_sum_kernel(const int* in, int* out, int n) {
    __shared__ int partial[256];
    int sum = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) sum += in[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

static void test_block_reduction(void) {
    const int n = 100000, blocks = 7;
    int* h = (int*)malloc(n * sizeof(int));
    long long want = 0;
    for (int i = 0; i < n; i++) h[i] = (i * 7919) % 1000 - 300, want += h[i];
    int* d_in = device_ints(h, n);
    int* d_out = device_ints(NULL, blocks);
    LAUNCH(block_sum_kernel, blocks, 256, 0, 0, d_in, d_out, n);
    CUDA_CHECK(cudaGetLastError());
    int part[blocks];
    to_host(part, d_out, sizeof part);
    long long got = 0;
    for (int b = 0; b < blocks; b++) got += part[b];
    check(got == want, "shared-memory tree reduction, 7 blocks x 256 threads: sum %lld (want %lld)", got, want);
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    free(h);
}

// --- Warp shuffles: reduction and scan ------------------------------------------------------------

__device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

__device__ float warp_allsum(float v) {
    for (int mask = 16; mask > 0; mask /= 2) v += __shfl_xor_sync(0xffffffffu, v, mask);
    return v;
}

// out[2b] = block sum by shfl_down (lane 0 result), out[2b+1] = by shfl_xor (every lane agrees)
__global__ void warp_reduce_kernel(const float* in, float* out) {
    __shared__ float warp_sums[32];
    __shared__ int disagree;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    if (threadIdx.x == 0) disagree = 0;
    float down = warp_sum(v);
    float all = warp_allsum(v);
    if (lane == 0) warp_sums[warp] = down;
    __syncthreads();
    if (__shfl_sync(0xffffffffu, all, 0) != all) atomicAdd(&disagree, 1);
    if (warp == 0) {
        float s = lane < warps ? warp_sums[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) out[2 * blockIdx.x] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) out[2 * blockIdx.x + 1] = disagree ? -1.0f : all;
}

// Inclusive prefix sum over each block: per-warp scans with __shfl_up_sync, then warp totals.
__global__ void block_scan_kernel(const int* in, int* out) {
    __shared__ int totals[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    for (int d = 1; d < 32; d *= 2) {
        int up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += up;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int t = lane < (int)blockDim.x / 32 ? totals[lane] : 0;
        for (int d = 1; d < 32; d *= 2) {
            int up = __shfl_up_sync(0xffffffffu, t, d);
            if (lane >= d) t += up;
        }
        totals[lane] = t;
    }
    __syncthreads();
    if (warp > 0) v += totals[warp - 1];
    out[i] = v;
}

static void test_warp_reduce_and_scan(void) {
    const int blocks = 5, threads = 256, n = blocks * threads;
    float* hf = (float*)malloc(n * sizeof(float));
    int* hi = (int*)malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) hf[i] = (float)((i * 37) % 11 - 5), hi[i] = (i * 13) % 17 - 8;
    float *d_in, *d_out;
    CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, 2 * blocks * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_in, hf, n * sizeof(float), cudaMemcpyHostToDevice));
    LAUNCH(warp_reduce_kernel, blocks, threads, 0, 0, d_in, d_out);
    CUDA_CHECK(cudaGetLastError());
    float out[2 * blocks];
    to_host(out, d_out, sizeof out);
    int bad = 0;
    for (int b = 0; b < blocks; b++) {
        float block_sum = 0, warp0 = 0;
        for (int t = 0; t < threads; t++) block_sum += hf[b * threads + t];
        for (int t = 0; t < 32; t++) warp0 += hf[b * threads + t];
        bad += out[2 * b] != block_sum;
        bad += out[2 * b + 1] != warp0;
    }
    check(bad == 0, "warp reductions: __shfl_down_sync block sums and __shfl_xor_sync all-lane sums exact (%d wrong)", bad);

    int* d_iin = device_ints(hi, n);
    int* d_iout = device_ints(NULL, n);
    LAUNCH(block_scan_kernel, blocks, threads, 0, 0, d_iin, d_iout);
    CUDA_CHECK(cudaGetLastError());
    int* scan = (int*)malloc(n * sizeof(int));
    to_host(scan, d_iout, n * sizeof(int));
    bad = 0;
    for (int b = 0; b < blocks; b++) {
        int run = 0;
        for (int t = 0; t < threads; t++) run += hi[b * threads + t], bad += scan[b * threads + t] != run;
    }
    check(bad == 0, "inclusive block scan from __shfl_up_sync warp scans (5 x 256): %d of %d wrong", bad, n);
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_iin));
    CUDA_CHECK(cudaFree(d_iout));
    free(hf);
    free(hi);
    free(scan);
}

// --- Shuffle widths, votes, partial warps -----------------------------------------------------

// Per thread: [0] broadcast of lane 0 of its 8-lane segment, [1] shfl_down by 3 within 8,
// [2] shfl_up by 2 within 8, [3] xor 5 within 8, [4] ballot(lane odd), [5] any(lane == 40),
// [6] all(value < 1000), [7] __activemask().
__global__ void shuffle_semantics_kernel(int* out) {
    int t = threadIdx.x, lane = t % 32;
    int v = 100 + t;
    int* o = out + 8 * t;
    o[7] = (int)__activemask();  // first: before any lane of the warp returns
    o[0] = __shfl_sync(0xffffffffu, v, 0, 8);
    o[1] = __shfl_down_sync(0xffffffffu, v, 3, 8);
    o[2] = __shfl_up_sync(0xffffffffu, v, 2, 8);
    o[3] = __shfl_xor_sync(0xffffffffu, v, 5, 8);
    o[4] = (int)__ballot_sync(0xffffffffu, lane & 1);
    o[5] = __any_sync(0xffffffffu, t == 40);
    o[6] = __all_sync(0xffffffffu, v < 1000);
}

static void test_shuffle_semantics(void) {
    const int threads = 48;  // the second warp has 16 lanes
    int* d = device_ints(NULL, 8 * threads);
    LAUNCH(shuffle_semantics_kernel, 1, threads, 0, 0, d);
    CUDA_CHECK(cudaGetLastError());
    int h[8 * threads];
    to_host(h, d, sizeof h);
    int bad_idx = 0, bad_down = 0, bad_up = 0, bad_xor = 0, bad_vote = 0;
    for (int t = 0; t < threads; t++) {
        int lane = t % 32, seg = lane / 8 * 8, base = t - lane;
        int* o = h + 8 * t;
        bad_idx += o[0] != 100 + base + seg;
        bad_down += o[1] != 100 + (lane % 8 + 3 < 8 ? t + 3 : t);
        bad_up += o[2] != 100 + (lane % 8 >= 2 ? t - 2 : t);
        bad_xor += o[3] != 100 + base + (lane ^ 5);
        unsigned present = t < 32 ? 0xffffffffu : 0xffffu;
        bad_vote += (unsigned)o[4] != (0xaaaaaaaau & present);
        bad_vote += o[5] != (t >= 32);
        bad_vote += o[6] != 1;
        bad_vote += (unsigned)o[7] != present;
    }
    check(bad_idx == 0, "__shfl_sync with width 8 reads lane 0 of each 8-lane segment (%d wrong)", bad_idx);
    check(bad_down == 0, "__shfl_down_sync(3, width 8) keeps its own value past the segment end (%d wrong)", bad_down);
    check(bad_up == 0, "__shfl_up_sync(2, width 8) keeps its own value before the segment start (%d wrong)", bad_up);
    check(bad_xor == 0, "__shfl_xor_sync(5, width 8) swaps within segments (%d wrong)", bad_xor);
    check(bad_vote == 0, "__ballot_sync/__any_sync/__all_sync/__activemask, full and 16-lane warps (%d wrong)", bad_vote);
    CUDA_CHECK(cudaFree(d));
}

// --- Shared-memory transpose (32 x 33 tile) -------------------------------------------------------

#define TILE 32
#define TILE_ROWS 8

__global__ void transpose_kernel(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];  // +1: no bank conflicts on the transposed read
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += TILE_ROWS)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += TILE_ROWS)
        if (x < rows && y + j < cols) out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

static void test_transpose(void) {
    const int rows = 100, cols = 70, n = rows * cols;
    float* h = (float*)malloc(n * sizeof(float));
    float* t = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) h[i] = (float)i;
    float *d_in, *d_out;
    CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_in, h, n * sizeof(float), cudaMemcpyHostToDevice));
    dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE), block(TILE, TILE_ROWS);
    LAUNCH(transpose_kernel, grid, block, 0, 0, d_out, d_in, rows, cols);
    CUDA_CHECK(cudaGetLastError());
    to_host(t, d_out, n * sizeof(float));
    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) bad += t[c * rows + r] != h[r * cols + c];
    check(bad == 0, "32x33-tile shared-memory transpose of 100 x 70 (%d of %d wrong)", bad, n);
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    free(h);
    free(t);
}

// --- A race that only __syncthreads fixes ----------------------------------------------------

// Each thread publishes a value, then reads its right neighbour's.
template <bool SYNC> __global__ void neighbour_kernel(int* out, int salt) {
    __shared__ int vals[128];
    int t = threadIdx.x, n = blockDim.x;
    vals[t] = salt + 1000 * blockIdx.x + t;
    if (SYNC) __syncthreads();
    out[blockIdx.x * n + t] = vals[(t + 1) % n];
}

static int neighbour_errors(bool sync, int salt) {
    const int blocks = 3, n = 128;
    int* d = device_ints(NULL, blocks * n);
    if (sync) LAUNCH(neighbour_kernel<true>, blocks, n, 0, 0, d, salt);
    else LAUNCH(neighbour_kernel<false>, blocks, n, 0, 0, d, salt);
    CUDA_CHECK(cudaGetLastError());
    int h[blocks * n];
    to_host(h, d, sizeof h);
    CUDA_CHECK(cudaFree(d));
    int bad = 0;
    for (int b = 0; b < blocks; b++)
        for (int t = 0; t < n; t++) bad += h[b * n + t] != salt + 1000 * b + (t + 1) % n;
    return bad;
}

static void test_race(void) {
    int without = neighbour_errors(false, 7);
    int again = neighbour_errors(false, 9);
    int with = neighbour_errors(true, 11);
#ifdef CUDA_HOST
    check(without > 0 && again > 0, "without __syncthreads the neighbour exchange is wrong (%d and %d of 384 wrong)",
          without, again);
#else
    printf("info without __syncthreads %d and %d of 384 wrong (a GPU may hide the race)\n", without, again);
#endif
    check(with == 0, "with __syncthreads the neighbour exchange is right (%d of 384 wrong)", with);
}

// --- A race that thread order hides: CUDA_HOST_LAG -------------------------------------------

// Warp 0 reads a shared value right after the barrier; warp 1 overwrites it one step later (after a
// __syncwarp), with nothing ordering the write after the read. On a GPU warp 0 may be slow to get
// there. The host runtime runs each step in thread order, so warp 0 always reads first; under
// CUDA_HOST_LAG=K one warp a block runs one pass in K, the others up to K - 1 steps ahead, and from
// K = 3 (two steps: the __syncwarp, the write) the blocks whose warp 0 lags read the new value.
__global__ void lagged_reader_kernel(int* out) {
    __shared__ int value;
    if (threadIdx.x == 0) value = 1;
    __syncthreads();
    if (threadIdx.x < 32) {
        out[blockIdx.x * 32 + threadIdx.x] = value;
    } else {
        __syncwarp();
        if (threadIdx.x == 32) value = 2;
    }
}

static void test_lagged_reader(void) {
    const int blocks = 4;
    int* d = device_ints(NULL, blocks * 32);
    LAUNCH(lagged_reader_kernel, blocks, 64, 0, 0, d);
    int h[blocks * 32];
    to_host(h, d, sizeof h);
    CUDA_CHECK(cudaFree(d));
    int late = 0;
    for (int i = 0; i < blocks * 32; i++) late += h[i] == 2;
#ifdef CUDA_HOST
    const char* lag = getenv("CUDA_HOST_LAG");
    if (lag && atoi(lag) >= 3)
        check(late > 0, "CUDA_HOST_LAG=%s: warp 0 lags in some block and reads the value warp 1 wrote after it "
              "(%d of %d reads late)", lag, late, blocks * 32);
    else
        check(late == 0, "in thread order warp 0 reads before warp 1 writes (%d of %d reads late)", late, blocks * 32);
#else
    printf("info the unordered read: %d of %d late (a GPU may hide the race)\n", late, blocks * 32);
#endif
}

// --- Atomics -----------------------------------------------------------------------------------

__global__ void atomics_kernel(float* fsum, int* hist, int* imax, unsigned* cas_max, int* exch,
                               __nv_bfloat16* bsum) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(fsum, 0.5f);
    atomicAdd(&hist[i % 10], 1);
    atomicMax(imax, (i * 7919) % 10007);
    unsigned want = (unsigned)((i * 104729u) % 99991u), old = 0, seen;
    while (old < want && (seen = atomicCAS(cas_max, old, want)) != old) old = seen;
    atomicExch(exch, 1);
    atomicAdd(bsum, __float2bfloat16(1.0f));
}

static void test_atomics(void) {
    const int blocks = 40, threads = 100, n = blocks * threads;
    float* fsum;
    int *hist, *imax, *exch;
    unsigned* cas_max;
    __nv_bfloat16* bsum;
    CUDA_CHECK(cudaMalloc(&fsum, sizeof(float)));
    CUDA_CHECK(cudaMalloc(&hist, 10 * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&imax, sizeof(int)));
    CUDA_CHECK(cudaMalloc(&cas_max, sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&exch, sizeof(int)));
    CUDA_CHECK(cudaMalloc(&bsum, sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMemset(fsum, 0, sizeof(float)));
    CUDA_CHECK(cudaMemset(hist, 0, 10 * sizeof(int)));
    CUDA_CHECK(cudaMemset(imax, 0, sizeof(int)));
    CUDA_CHECK(cudaMemset(cas_max, 0, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(exch, 0, sizeof(int)));
    CUDA_CHECK(cudaMemset(bsum, 0, sizeof(__nv_bfloat16)));
    LAUNCH(atomics_kernel, blocks, threads, 0, 0, fsum, hist, imax, cas_max, exch, bsum);
    CUDA_CHECK(cudaGetLastError());
    float f;
    int h[10], m, e;
    unsigned c;
    __nv_bfloat16 b;
    to_host(&f, fsum, sizeof f);
    to_host(h, hist, sizeof h);
    to_host(&m, imax, sizeof m);
    to_host(&c, cas_max, sizeof c);
    to_host(&e, exch, sizeof e);
    to_host(&b, bsum, sizeof b);
    int want_max = 0;
    unsigned want_cas = 0;
    for (int i = 0; i < n; i++) {
        if ((i * 7919) % 10007 > want_max) want_max = (i * 7919) % 10007;
        if ((unsigned)((i * 104729u) % 99991u) > want_cas) want_cas = (unsigned)((i * 104729u) % 99991u);
    }
    int hist_ok = 1;
    for (int k = 0; k < 10; k++) hist_ok &= h[k] == n / 10;
    check(f == 0.5f * n, "atomicAdd(float) from 4000 threads: %g (want %g)", f, 0.5 * n);
    check(hist_ok, "atomicAdd(int) histogram: every bin %d", n / 10);
    check(m == want_max, "atomicMax(int): %d (want %d)", m, want_max);
    check(c == want_cas, "atomicCAS loop computing a maximum: %u (want %u)", c, want_cas);
    check(e == 1, "atomicExch(int): %d", e);
    // bf16 has 8 significant bits: adding 1 stops at 256 (256 + 1 rounds back to 256).
    check(__bfloat162float(b) == 256.0f, "atomicAdd(__nv_bfloat16) of 4000 ones saturates at 256: %g",
          __bfloat162float(b));
    CUDA_CHECK(cudaFree(fsum));
    CUDA_CHECK(cudaFree(hist));
    CUDA_CHECK(cudaFree(imax));
    CUDA_CHECK(cudaFree(cas_max));
    CUDA_CHECK(cudaFree(exch));
    CUDA_CHECK(cudaFree(bsum));
}

// --- Dynamic shared memory ------------------------------------------------------------------------

// Reverses each block's slice of n floats through dynamic shared memory; first_word gets what the
// buffer held before the block wrote it.
__global__ void reverse_kernel(float* data, int n, unsigned* first_word) {
    DYNAMIC_SHARED(float, buf);
    if (threadIdx.x == 0 && blockIdx.x == 0) memcpy(first_word, buf, sizeof(unsigned));
    __syncthreads();
    float* slice = data + (size_t)blockIdx.x * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = slice[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) slice[i] = buf[n - 1 - i];
}

static void test_dynamic_shared(void) {
    const int n = 16384, blocks = 2;  // 64 KiB per block: over the 48 KiB default
    size_t bytes = n * sizeof(float);
    float* h = (float*)malloc(blocks * bytes);
    for (int i = 0; i < blocks * n; i++) h[i] = (float)i;
    float* d;
    unsigned* first;
    CUDA_CHECK(cudaMalloc(&d, blocks * bytes));
    CUDA_CHECK(cudaMalloc(&first, sizeof(unsigned)));
    CUDA_CHECK(cudaMemcpy(d, h, blocks * bytes, cudaMemcpyHostToDevice));

    LAUNCH_UNCHECKED(reverse_kernel, blocks, 256, bytes, 0, d, n, first);
    cudaError_t err = cudaGetLastError();
    check(err == cudaErrorInvalidValue, "64 KiB of dynamic shared memory without the attribute is refused: %s",
          cudaGetErrorName(err));
    check(cudaFuncSetAttribute(reverse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) ==
              cudaErrorInvalidValue, "cudaFuncSetAttribute refuses 228 KiB (the sm_90 limit is 227 KiB)");
    (void)cudaGetLastError();
    CUDA_CHECK(cudaFuncSetAttribute(reverse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    LAUNCH(reverse_kernel, blocks, 256, bytes, 0, d, n, first);
    CUDA_CHECK(cudaGetLastError());
    float* r = (float*)malloc(blocks * bytes);
    to_host(r, d, blocks * bytes);
    int bad = 0;
    for (int b = 0; b < blocks; b++)
        for (int i = 0; i < n; i++) bad += r[b * n + i] != h[b * n + n - 1 - i];
    check(bad == 0, "with cudaFuncSetAttribute, 64 KiB DYNAMIC_SHARED reversal is right (%d wrong)", bad);
#ifdef CUDA_HOST
    unsigned w;
    to_host(&w, first, sizeof w);
    check(w == 0xffffffffu, "dynamic shared memory starts filled with 0xFF bytes (0x%08x)", w);
#endif
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(first));
    free(h);
    free(r);
}

// 128 bytes of static shared memory beside a dynamic buffer of 48 KiB: together over the 48 KiB a
// block gets without cudaFuncSetAttribute (the split-KV forward's launch failed so on an H200).
__global__ void static_and_dynamic_kernel(int* out, int n) {
    __shared__ int flags[32];
    DYNAMIC_SHARED(int, buf);
    if (threadIdx.x < 32) flags[threadIdx.x] = (int)threadIdx.x;
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = i;
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = flags[31] + buf[n - 1];
}

static void test_static_and_dynamic_shared(void) {
    const int n = 12288;   // 48 KiB
#ifdef CUDA_HOST
    CUDA_CHECK(cuda_host_declare_static_smem(static_and_dynamic_kernel, 32 * sizeof(int)));
#endif
    cudaFuncAttributes attr;
    CUDA_CHECK(cudaFuncGetAttributes(&attr, static_and_dynamic_kernel));
    check(attr.sharedSizeBytes >= 128, "cudaFuncGetAttributes reports the kernel's static shared memory (%zu bytes)",
          attr.sharedSizeBytes);
    int* d;
    CUDA_CHECK(cudaMalloc(&d, sizeof(int)));
    LAUNCH_UNCHECKED(static_and_dynamic_kernel, 1, 256, n * sizeof(int), 0, d, n);
    cudaError_t err = cudaGetLastError();
    check(err == cudaErrorInvalidValue, "48 KiB of dynamic beside 128 bytes of static shared memory, without the "
          "attribute, is refused: %s", cudaGetErrorName(err));
    // The launchers' helper raises the attribute because of the static part.
    CUDA_RAISE_DYNAMIC_SMEM(static_and_dynamic_kernel, n * sizeof(int), "test", 0);
    LAUNCH(static_and_dynamic_kernel, 1, 256, n * sizeof(int), 0, d, n);
    int got = 0;
    to_host(&got, d, sizeof got);
    check(got == 31 + n - 1, "CUDA_RAISE_DYNAMIC_SMEM counts static shared memory: the launch runs (%d)", got);
    CUDA_CHECK(cudaFree(d));
}

// Writes 1 where the block's dynamic shared memory starts on a 128-byte boundary.
__global__ void smem_alignment_kernel(int* aligned) {
    DYNAMIC_SHARED(unsigned char, buf);
    if (threadIdx.x == 0) aligned[blockIdx.x] = ((size_t)buf & 127) == 0;
}

__global__ void big_smem_kernel(int* out) {
    DYNAMIC_SHARED(int, buf);
    buf[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = buf[31 - threadIdx.x];
}

// DYNAMIC_SHARED is 128-byte aligned; CUDA_RAISE_DYNAMIC_SMEM raises a kernel's limit once the
// device allows it (over the device's opt-in limit it ends the job: --die smem-optin); the sync
// check switch is read from the environment.
static void test_launch_helpers(void) {
    int* d = device_ints(NULL, 4);
    LAUNCH(smem_alignment_kernel, 4, 32, 1000, 0, d);
    int h[4];
    to_host(h, d, sizeof h);
    check(h[0] && h[1] && h[2] && h[3], "DYNAMIC_SHARED starts on a 128-byte boundary in every block");
    const int optin = cuda_max_dynamic_smem_optin();
    check(optin >= 48 * 1024 && optin <= 227 * 1024, "cudaDevAttrMaxSharedMemoryPerBlockOptin = %d bytes", optin);
    int* out = device_ints(NULL, 32);
    CUDA_RAISE_DYNAMIC_SMEM(big_smem_kernel, 96 * 1024, "test size", 96);
    LAUNCH(big_smem_kernel, 1, 32, 96 * 1024, 0, out);
    int o[32];
    to_host(o, out, sizeof o);
    check(o[0] == 31 && o[31] == 0, "CUDA_RAISE_DYNAMIC_SMEM lets a kernel launch with 96 KiB");
    const char* env = getenv("GPT_CUDA_SYNC_CHECK");
    const int want = env && env[0] && strcmp(env, "0") != 0;
    check(cuda_sync_check_enabled() == want, "GPT_CUDA_SYNC_CHECK=%s: synchronise after every launch: %s",
          env ? env : "(unset)", want ? "yes" : "no");
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(out));
}

// --- Launches CUDA rejects --------------------------------------------------------------------

__global__ void set_kernel(int* out, int value) { out[threadIdx.x] = value; }

__global__ void no_args_kernel() {}

template <int A, int B> __global__ void sum_template_kernel(int* out) { out[threadIdx.x] = A + B; }

static void test_invalid_launches(void) {
    int* d = device_ints(NULL, 1024);
    CUDA_CHECK(cudaMemset(d, 0, 1024 * sizeof(int)));
    LAUNCH_UNCHECKED(set_kernel, 1, 1025, 0, 0, d, 5);
    cudaError_t peek = cudaPeekAtLastError();
    cudaError_t err = cudaGetLastError();
    cudaError_t after = cudaGetLastError();
    int first;
    to_host(&first, d, sizeof first);
    check(peek == cudaErrorInvalidConfiguration && err == cudaErrorInvalidConfiguration,
          "1025 threads per block: cudaPeekAtLastError and cudaGetLastError report %s (%s)",
          cudaGetErrorName(err), cudaGetErrorString(err));
    check(after == cudaSuccess, "cudaGetLastError reset the error: %s", cudaGetErrorName(after));
    check(first == 0, "the refused kernel did not run");
    LAUNCH_UNCHECKED(set_kernel, 0, 32, 0, 0, d, 5);
    err = cudaGetLastError();
    check(err == cudaErrorInvalidConfiguration, "a zero-sized grid is refused: %s", cudaGetErrorName(err));
    LAUNCH_UNCHECKED(set_kernel, 1, dim3(1, 1, 65), 0, 0, d, 5);
    err = cudaGetLastError();
    check(err == cudaErrorInvalidConfiguration, "blockDim.z = 65 is refused: %s", cudaGetErrorName(err));
    LAUNCH(set_kernel, 1, dim3(32, 32), 0, 0, d, 5);
    CUDA_CHECK(cudaGetLastError());
    to_host(&first, d, sizeof first);
    check(first == 5, "1024 threads as (32, 32) run");
    LAUNCH(no_args_kernel, 1, 1, 0, 0);
    LAUNCH((sum_template_kernel<2, 3>), 1, 4, 0, 0, d);
    CUDA_CHECK(cudaGetLastError());
    to_host(&first, d, sizeof first);
    check(first == 5, "a kernel without arguments and a parenthesized two-parameter template kernel launch");
    CUDA_CHECK(cudaFree(d));
}

// --- Cases that must end the program with a diagnostic ------------------------------------------

__global__ void divergent_barrier_kernel(int* out) {
    if (threadIdx.x == 0) __syncthreads();
    else out[threadIdx.x] = __shfl_sync(0xffffffffu, (int)threadIdx.x, 0);
}

__global__ void exited_lane_kernel(int* out) {
    if (threadIdx.x >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);
}

// 256 KiB of locals: more than a fiber's default 64 KiB stack (a GPU thread may have 512 KiB).
__global__ void big_stack_kernel(int* out) {
    volatile int big[65536];
    for (int i = 0; i < 65536; i += 1024) big[i] = i;
    out[threadIdx.x] = big[1024];
}

static int die(const char* name) {
    int* d = device_ints(NULL, 64);
    if (!strcmp(name, "deadlock")) {
        LAUNCH(divergent_barrier_kernel, 1, 64, 0, 0, d);
    } else if (!strcmp(name, "exited-lane")) {
        LAUNCH(exited_lane_kernel, 1, 32, 0, 0, d);
    } else if (!strcmp(name, "stack-overflow")) {
        LAUNCH(big_stack_kernel, 1, 32, 0, 0, d);
    } else if (!strcmp(name, "launch-check")) {   // LAUNCH checks the launch itself
        LAUNCH(set_kernel, 1, 2048, 0, 0, d, 1);
    } else if (!strcmp(name, "smem-optin")) {   // run with CUDA_HOST_SMEM_OPTIN=101376
        CUDA_RAISE_DYNAMIC_SMEM(big_smem_kernel, 160 * 1024, "test size", 160);
    } else if (!strcmp(name, "api-check")) {
        CUDA_CHECK(cudaSetDevice(3));
    } else {
        printf("unknown --die case %s\n", name);
        return 2;
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    printf("--die %s: the program was expected to end with a diagnostic\n", name);
    return 0;
}

#ifdef CUDA_HOST
// Memory mappings of this process (the fibers' guard pages are one each).
static long count_mappings(void) {
    FILE* f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    long n = 0;
    for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n;
}

// Block i waits until the blocks above it have passed (*turn counts them), then passes: every block
// but the last stalls, and each stalled block starts a helper thread for the others.
__global__ void reverse_chain_kernel(unsigned* turn, int* out) {
    const unsigned mine = gridDim.x - 1 - blockIdx.x;
    if (threadIdx.x == 0)
        while (ld_acquire_gpu_u32(turn) != mine) nanosleep_ns(100);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = (int)mine;
    __syncthreads();
    if (threadIdx.x == 0) red_release_gpu_add_u32(turn, 1u);
}

// The engines (fiber stacks, two mappings each) of threads that exit go to a pool of at most
// CUDA_HOST_POOLED_FIBERS stacks; the rest must be released, or a long run with thread churn
// (OpenMP, OpenBLAS, helper threads) reaches vm.max_map_count (65530) and mprotect fails.
// - 48 short-lived threads one after another, each running a 1024-thread kernel (a fresh thread
//   takes the pooled engine of the last);
// - a chain of 16 512-thread blocks, each waiting for the one above: the first window of 8 blocks
//   (block_exec.cpp) all stall whatever their seeded order, so at least 8 helper threads are alive
//   at once (8000 mappings and more), of which the pool may keep 2 * CUDA_HOST_POOLED_FIBERS.
// One OpenMP thread, so that only this thread (its engine made first) and the helpers run blocks.
static void test_thread_churn(void) {
    const int chain = 16, width = 512, omp_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int* d = device_ints(NULL, 1024);
    unsigned* turn;
    CUDA_CHECK(cudaMalloc(&turn, sizeof *turn));
    LAUNCH(set_kernel, 1, 1024, 0, 0, d, 7);   // this thread's engine, at 1024
    CUDA_CHECK(cudaDeviceSynchronize());
    const long bound = 2L * CUDA_HOST_POOLED_FIBERS + 200;
    const long before = count_mappings();
    for (int i = 0; i < 48; i++) {
        std::thread t([d] {  // the synchronising thread runs queued work: this one runs the kernel
            LAUNCH(set_kernel, 1, 1024, 0, 0, d, 7);
            CUDA_CHECK(cudaStreamSynchronize(0));
        });
        t.join();
    }
    const long after = count_mappings();
    check(before > 0 && after - before < bound, "48 threads that ran 1024-thread blocks and exited: mappings %ld -> %ld "
          "(their fiber stacks were released or pooled: at most %ld more)", before, after, bound);
    CUDA_CHECK(cudaMemset(turn, 0, sizeof *turn));
    int* order = device_ints(NULL, chain * width);
    LAUNCH(reverse_chain_kernel, chain, width, 0, 0, turn, order);
    CUDA_CHECK(cudaDeviceSynchronize());
    int* h = (int*)malloc(chain * width * sizeof(int));
    CUDA_CHECK(cudaMemcpy(h, order, chain * width * sizeof(int), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < chain * width; i++) wrong += h[i] != chain - 1 - i / width;
    const long chained = count_mappings();
    check(wrong == 0 && chained - before < bound, "a chain of %d %d-thread blocks waiting in reverse order ran "
          "(%d wrong); mappings %ld -> %ld when its helper threads ended (at most %ld more)", chain, width, wrong,
          before, chained, bound);
    free(h);
    CUDA_CHECK(cudaFree(order));
    CUDA_CHECK(cudaFree(turn));
    CUDA_CHECK(cudaFree(d));
    omp_set_num_threads(omp_threads);
}
#endif

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--die")) return die(argv[2]);
    test_indices();
    test_block_reduction();
    test_warp_reduce_and_scan();
    test_shuffle_semantics();
    test_transpose();
    test_race();
    test_lagged_reader();
    test_atomics();
    test_dynamic_shared();
    test_static_and_dynamic_shared();
    test_invalid_launches();
    test_launch_helpers();
#ifdef CUDA_HOST
    test_thread_churn();
#endif
    return test_finish("test_runtime");
}
