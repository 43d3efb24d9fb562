// Known answers for the PTX instructions of model/cuda_ptx.cuh, run through their host twins
// (tests/cuda_host/ptx.cpp): mma.sync m16n8k16 bf16 on small integers (exact) against a host loop,
// ldmatrix x1/x2/x4 (.trans) on a tile whose values encode (row, column), the attention kernels'
// composition (A by ldmatrix_x4, B by ldmatrix_x2 / x2_trans / x4_trans, then mma) against a host
// GEMM, and cp.async: copies land only at the wait that retires their group (the host runtime
// defers them, so a kernel that reads too early sees the 0xFF bytes of fresh shared memory), group
// accounting, zero-fill, a correct double-buffered loop and the same loop waiting too little.
// `--die <case>` must end with a diagnostic: ldmatrix-misaligned, ldmatrix-global, cp-misaligned,
// cp-overrun, cp-pending, mma-partial, mixed.
#include "model/cuda_common.cuh"
#include "model/cuda_ptx.cuh"
#include "tests/cuda_host/test_check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(CUDA_HOST)
#include <sys/mman.h>
#endif

// --- mma.sync m16n8k16 ---------------------------------------------------------------------------

__device__ static uint32_t pack_pair(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return (uint32_t)__bfloat16_as_ushort(lo) | (uint32_t)__bfloat16_as_ushort(hi) << 16;
}

// One warp: fragments gathered from A (16 x 16), B (16 x 8, K x N) and C (16 x 8), all row-major,
// by the layouts of model/cuda_ptx.cuh; D = C + reps * A B through `reps` mma calls with d = c.
__global__ void mma_kernel(const __nv_bfloat16* A, const __nv_bfloat16* B, const float* C, float* D, int reps) {
    int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    uint32_t a[4], b[2];
    float acc[4];
    for (int i = 0; i < 4; i++) {
        int r = g + 8 * (i & 1), k = 2 * t + 8 * (i >> 1);
        a[i] = pack_pair(A[r * 16 + k], A[r * 16 + k + 1]);
    }
    for (int i = 0; i < 2; i++) {
        int k = 2 * t + 8 * i;
        b[i] = pack_pair(B[k * 8 + g], B[(k + 1) * 8 + g]);
    }
    for (int i = 0; i < 4; i++) acc[i] = C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
    for (int r = 0; r < reps; r++) mma_m16n8k16_bf16(acc, a, b, acc);
    for (int i = 0; i < 4; i++) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];
}

// A, B, C as small integers (exact in bf16 and in the fp32 sums); pattern p.
static float mma_a(int p, int r, int k) {
    if (p == 1) return k == (5 * r + 3) % 16 ? 1.0f : 0.0f;  // a permutation: D picks rows of B
    return (float)((3 * r + 5 * k + p) % 7 - 3);
}
static float mma_b(int p, int k, int n) {
    if (p == 1) return (float)(k * 8 + n - 64);
    return (float)((2 * k + 3 * n + p) % 5 - 2);
}
static float mma_c(int p, int r, int n) { return p == 0 ? 0.0f : (float)((r * 8 + n) % 11 - 5); }

static void test_mma(int p, int reps, const char* name) {
    __nv_bfloat16 ha[256], hb[128];
    float hc[128], hd[128];
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) ha[r * 16 + k] = __float2bfloat16(mma_a(p, r, k));
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) hb[k * 8 + n] = __float2bfloat16(mma_b(p, k, n));
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) hc[r * 8 + n] = mma_c(p, r, n);
    __nv_bfloat16 *da, *db;
    float *dc, *dd;
    CUDA_CHECK(cudaMalloc(&da, sizeof ha));
    CUDA_CHECK(cudaMalloc(&db, sizeof hb));
    CUDA_CHECK(cudaMalloc(&dc, sizeof hc));
    CUDA_CHECK(cudaMalloc(&dd, sizeof hd));
    CUDA_CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dc, hc, sizeof hc, cudaMemcpyHostToDevice));
    LAUNCH(mma_kernel, 1, 32, 0, 0, da, db, dc, dd, reps);
    CUDA_CHECK(cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            float s = 0.0f;
            for (int k = 0; k < 16; k++) s += mma_a(p, r, k) * mma_b(p, k, n);
            if (hd[r * 8 + n] != hc[r * 8 + n] + (float)reps * s) bad++;
        }
    check(bad == 0, "mma m16n8k16 bf16, %s: D = C + %d A B exactly (%d of 128 elements differ)", name, reps, bad);
    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(db));
    CUDA_CHECK(cudaFree(dc));
    CUDA_CHECK(cudaFree(dd));
}

// --- ldmatrix ------------------------------------------------------------------------------------

// Lane l's row: tile row (5 l + 3) % 32, columns 8 ((l / 8) % 2) .. +7, of a 32 x 16 tile of
// 16-bit values row * 256 + column. Lanes past 8 nmat point elsewhere: their address is not used.
__device__ __host__ static int ld_row(int l) { return (l * 5 + 3) % 32; }
__device__ __host__ static int ld_col(int l) { return 8 * ((l >> 3) & 1); }

template <int NMAT, int TRANS> __global__ void ldmatrix_kernel(uint32_t* out) {
    __shared__ __align__(16) uint16_t tile[32 * 16];
    int l = threadIdx.x;
    for (int i = l; i < 32 * 16; i += blockDim.x) tile[i] = (uint16_t)((i / 16) * 256 + i % 16);
    __syncthreads();
    const uint16_t* row = l < 8 * NMAT ? &tile[ld_row(l) * 16 + ld_col(l)] : &tile[8];
    uint32_t r[4] = {0, 0, 0, 0};
    if (NMAT == 1) TRANS ? ldmatrix_x1_trans(r, row) : ldmatrix_x1(r, row);
    if (NMAT == 2) TRANS ? ldmatrix_x2_trans(r, row) : ldmatrix_x2(r, row);
    if (NMAT == 4) TRANS ? ldmatrix_x4_trans(r, row) : ldmatrix_x4(r, row);
    for (int i = 0; i < 4; i++) out[l * 4 + i] = r[i];
}

// Element (r, c) of matrix i: row r of matrix i is lane 8 i + r's row.
static uint32_t ld_val(int i, int r, int c) { return (uint32_t)(ld_row(8 * i + r) * 256 + ld_col(8 * i + r) + c); }

template <int NMAT, int TRANS> static void test_ldmatrix(void) {
    uint32_t* d;
    uint32_t h[128];
    CUDA_CHECK(cudaMalloc(&d, sizeof h));
    LAUNCH((ldmatrix_kernel<NMAT, TRANS>), 1, 32, 0, 0, d);
    CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < NMAT; i++) {
            int g = l / 4, t = l % 4;
            uint32_t lo = TRANS ? ld_val(i, 2 * t, g) : ld_val(i, g, 2 * t);
            uint32_t hi = TRANS ? ld_val(i, 2 * t + 1, g) : ld_val(i, g, 2 * t + 1);
            if (h[l * 4 + i] != (lo | hi << 16)) bad++;
        }
    check(bad == 0, "ldmatrix.x%d%s: every lane's registers hold the documented elements (%d of %d differ; "
          "rows from permuted lane addresses, unused lanes' addresses ignored)", NMAT, TRANS ? ".trans" : "",
          bad, 32 * NMAT);
    CUDA_CHECK(cudaFree(d));
}

// --- ldmatrix + mma, as the attention kernels use them -----------------------------------------

// Two warps; warp w computes rows 16 w .. 16 w + 15 of D = A B (A 32 x 16, B 16 x 16), as two
// 8-column tiles, with B loaded three ways: v0 ldmatrix_x2 from Bt (N x K row-major: "col" B), v1
// ldmatrix_x2_trans from B (K x N row-major), v2 ldmatrix_x4_trans from B (both column tiles).
// Shared tiles in dynamic shared memory with rows of LD elements (padded, 48 bytes).
constexpr int LD = 24;

__global__ void compose_kernel(const __nv_bfloat16* A, const __nv_bfloat16* B, float* D) {
    DYNAMIC_SHARED(__nv_bfloat16, As);
    __nv_bfloat16* Bts = As + 32 * LD;
    __nv_bfloat16* Bs = Bts + 16 * LD;
    for (int i = threadIdx.x; i < 32 * 16; i += blockDim.x) As[(i / 16) * LD + i % 16] = A[i];
    for (int i = threadIdx.x; i < 16 * 16; i += blockDim.x) {
        int k = i / 16, n = i % 16;
        Bs[k * LD + n] = B[i];
        Bts[n * LD + k] = B[i];
    }
    __syncthreads();
    int w = threadIdx.x / 32, l = threadIdx.x % 32, g = l >> 2, t = l & 3;
    uint32_t a[4];
    ldmatrix_x4(a, &As[(16 * w + l % 16) * LD + (l / 16) * 8]);
    for (int v = 0; v < 3; v++)
        for (int nt = 0; nt < 2; nt++) {
            uint32_t b[2] = {0, 0}, b4[4];
            if (v == 0) ldmatrix_x2(b, &Bts[(8 * nt + l % 8) * LD + ((l / 8) % 2) * 8]);
            if (v == 1) ldmatrix_x2_trans(b, &Bs[(l % 16) * LD + 8 * nt]);
            if (v == 2) {
                ldmatrix_x4_trans(b4, &Bs[(l % 16) * LD + (l / 16) * 8]);
                b[0] = b4[2 * nt];
                b[1] = b4[2 * nt + 1];
            }
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            mma_m16n8k16_bf16(acc, a, b, acc);
            for (int i = 0; i < 4; i++)
                D[v * 512 + (16 * w + g + 8 * (i >> 1)) * 16 + 8 * nt + 2 * t + (i & 1)] = acc[i];
        }
}

static void test_compose(void) {
    __nv_bfloat16 ha[512], hb[256];
    float hd[3 * 512];
    for (int i = 0; i < 512; i++) ha[i] = __float2bfloat16((float)((i * 7 + 3) % 9 - 4));
    for (int i = 0; i < 256; i++) hb[i] = __float2bfloat16((float)((i * 5 + 1) % 9 - 4));
    __nv_bfloat16 *da, *db;
    float* dd;
    CUDA_CHECK(cudaMalloc(&da, sizeof ha));
    CUDA_CHECK(cudaMalloc(&db, sizeof hb));
    CUDA_CHECK(cudaMalloc(&dd, sizeof hd));
    CUDA_CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    LAUNCH(compose_kernel, 1, 64, (32 + 16 + 16) * LD * sizeof(__nv_bfloat16), 0, da, db, dd);
    CUDA_CHECK(cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost));
    static const char* const how[3] = {"ldmatrix_x2 from N x K", "ldmatrix_x2_trans from K x N",
                                       "ldmatrix_x4_trans from K x N"};
    for (int v = 0; v < 3; v++) {
        int bad = 0;
        for (int r = 0; r < 32; r++)
            for (int n = 0; n < 16; n++) {
                float s = 0.0f;
                for (int k = 0; k < 16; k++) s += __bfloat162float(ha[r * 16 + k]) * __bfloat162float(hb[k * 16 + n]);
                if (hd[v * 512 + r * 16 + n] != s) bad++;
            }
        check(bad == 0, "A by ldmatrix_x4, B by %s, mma: 32 x 16 x 16 product of two warps equals the host "
              "GEMM (%d of 512 differ)", how[v], bad);
    }
    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(db));
    CUDA_CHECK(cudaFree(dd));
}

// --- cp.async --------------------------------------------------------------------------------------

static int same4(uint4 a, uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; }
static const uint4 ones4 = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
static const uint4 zero4 = {0, 0, 0, 0};

// Each thread copies src[t] to shared s[t]: what it sees before its wait, after it, and (after a
// barrier) the next thread's copy.
__global__ void visible_kernel(const uint4* src, uint4* out) {
    DYNAMIC_SHARED(uint4, s);
    int t = threadIdx.x, n = blockDim.x;
    cp_async_16(&s[t], &src[t], 16);
    cp_async_commit();
    out[3 * t] = s[t];  // a race on a GPU; under the host runtime, the old bytes
    cp_async_wait<0>();
    out[3 * t + 1] = s[t];
    __syncthreads();
    out[3 * t + 2] = s[(t + 1) % n];
}

// Groups: 0 and 1 committed, a third copy left in the open group.
__global__ void groups_kernel(const uint4* src, uint4* out) {
    DYNAMIC_SHARED(uint4, s);
    int t = threadIdx.x;
    cp_async_16(&s[3 * t], &src[3 * t], 16);
    cp_async_commit();
    cp_async_16(&s[3 * t + 1], &src[3 * t + 1], 16);
    cp_async_commit();
    cp_async_16(&s[3 * t + 2], &src[3 * t + 2], 16);
    cp_async_wait<1>();
    out[5 * t] = s[3 * t];          // group 0: landed
    out[5 * t + 1] = s[3 * t + 1];  // group 1: pending (host: old bytes)
    cp_async_wait<0>();
    out[5 * t + 2] = s[3 * t + 1];  // group 1: landed
    out[5 * t + 3] = s[3 * t + 2];  // never committed: pending (host: old bytes)
    cp_async_commit();
    cp_async_wait<0>();
    out[5 * t + 4] = s[3 * t + 2];
}

// src_bytes 4 (12 zeros follow) and 0 (16 zeros; `nowhere` is not read).
__global__ void zfill_kernel(const uint4* src, const uint4* nowhere, uint4* out) {
    DYNAMIC_SHARED(uint4, s);
    int t = threadIdx.x;
    cp_async_16(&s[2 * t], &src[t], 4);
    cp_async_16(&s[2 * t + 1], nowhere, 0);
    cp_async_commit();
    cp_async_wait<0>();
    out[2 * t] = s[2 * t];
    out[2 * t + 1] = s[2 * t + 1];
}

// A two-stage pipeline over ntiles tiles of blockDim.x uint4: tile i + 1 is requested while tile i
// is consumed; each thread hashes another thread's element of every tile. WAIT = 1 waits for the
// tile it consumes; WAIT = 2 does not (the bug the host runtime exposes).
template <int WAIT> __global__ void pipeline_kernel(const uint4* src, int ntiles, unsigned* sums) {
    DYNAMIC_SHARED(uint4, s);
    int t = threadIdx.x, n = blockDim.x;
    unsigned sum = 0;
    cp_async_16(&s[t], &src[t], 16);
    cp_async_commit();
    for (int i = 0; i < ntiles; i++) {
        if (i + 1 < ntiles) cp_async_16(&s[((i + 1) & 1) * n + t], &src[(size_t)(i + 1) * n + t], 16);
        cp_async_commit();
        cp_async_wait<WAIT>();
        __syncthreads();
        uint4 v = s[(i & 1) * n + (t * 7 + 3) % n];
        sum = sum * 31u + v.x + 3u * v.y + 5u * v.z + 7u * v.w;
        __syncthreads();  // the stage is refilled by the next iteration
    }
    cp_async_wait<0>();
    sums[t] = sum;
}

static uint4* upload4(const uint4* h, int n) {
    uint4* d;
    CUDA_CHECK(cudaMalloc(&d, (size_t)n * sizeof(uint4)));
    CUDA_CHECK(cudaMemcpy(d, h, (size_t)n * sizeof(uint4), cudaMemcpyHostToDevice));
    return d;
}

static uint4 pattern4(int i) {
    uint4 v = {(unsigned)(4 * i + 1), (unsigned)(4 * i + 2), (unsigned)(4 * i + 3), (unsigned)(4 * i + 4)};
    return v;
}

static void test_cp_async(void) {
    const int n = 32;
    uint4 hsrc[3 * n], hout[5 * n];
    for (int i = 0; i < 3 * n; i++) hsrc[i] = pattern4(i);
    uint4* src = upload4(hsrc, 3 * n);
    uint4* out;
    CUDA_CHECK(cudaMalloc(&out, sizeof hout));

    LAUNCH(visible_kernel, 1, n, n * sizeof(uint4), 0, src, out);
    CUDA_CHECK(cudaMemcpy(hout, out, 3 * n * sizeof(uint4), cudaMemcpyDeviceToHost));
    int before = 0, after = 0, other = 0;
    for (int t = 0; t < n; t++) {
        before += same4(hout[3 * t], ones4);
        after += same4(hout[3 * t + 1], hsrc[t]);
        other += same4(hout[3 * t + 2], hsrc[(t + 1) % n]);
    }
#if defined(CUDA_HOST)
    check(before == n, "cp.async: the copy is not in shared memory before the wait (%d of %d threads read the "
          "old 0xFF bytes)", before, n);
#endif
    check(after == n && other == n, "cp.async: after cp_async_wait<0> the thread reads its copy (%d of %d), and "
          "after __syncthreads another thread's (%d of %d)", after, n, other, n);

    LAUNCH(groups_kernel, 1, n, 3 * n * sizeof(uint4), 0, src, out);
    CUDA_CHECK(cudaMemcpy(hout, out, 5 * n * sizeof(uint4), cudaMemcpyDeviceToHost));
    int landed = 0, pending = 0;
    for (int t = 0; t < n; t++) {
        landed += same4(hout[5 * t], hsrc[3 * t]) + same4(hout[5 * t + 2], hsrc[3 * t + 1]) +
                  same4(hout[5 * t + 4], hsrc[3 * t + 2]);
        pending += same4(hout[5 * t + 1], ones4) + same4(hout[5 * t + 3], ones4);
    }
    check(landed == 3 * n, "cp.async groups: wait<1> retires the older group, wait<0> the newer, and a copy "
          "lands after its late commit and a wait<0> (%d of %d)", landed, 3 * n);
#if defined(CUDA_HOST)
    check(pending == 2 * n, "cp.async groups: wait<1> leaves the latest committed group pending, and wait<0> "
          "an uncommitted copy (%d of %d reads saw the old bytes)", pending, 2 * n);
#endif

    // Host: `nowhere` is an inaccessible page, so reading it would crash.
#if defined(CUDA_HOST)
    void* page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED, "", "mmap failed");
    const uint4* nowhere = (const uint4*)page;
#else
    const uint4* nowhere = src;
#endif
    LAUNCH(zfill_kernel, 1, n, 2 * n * sizeof(uint4), 0, src, nowhere, out);
    CUDA_CHECK(cudaMemcpy(hout, out, 2 * n * sizeof(uint4), cudaMemcpyDeviceToHost));
    int partial = 0, zero = 0;
    for (int t = 0; t < n; t++) {
        uint4 want = {hsrc[t].x, 0, 0, 0};
        partial += same4(hout[2 * t], want);
        zero += same4(hout[2 * t + 1], zero4);
    }
    check(partial == n && zero == n, "cp.async zero-fill: src_bytes 4 copies 4 bytes and zeros 12 (%d of %d), "
          "src_bytes 0 zeros 16 without reading src (%d of %d)", partial, n, zero, n);
#if defined(CUDA_HOST)
    munmap(page, 4096);
#endif
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaFree(out));
}

static void test_pipeline(void) {
    const int n = 64, ntiles = 8;
    uint4* hsrc = (uint4*)malloc((size_t)n * ntiles * sizeof(uint4));
    for (int i = 0; i < n * ntiles; i++) hsrc[i] = pattern4(i);
    unsigned want[64], got[64];
    for (int t = 0; t < n; t++) {
        unsigned sum = 0;
        for (int i = 0; i < ntiles; i++) {
            uint4 v = hsrc[i * n + (t * 7 + 3) % n];
            sum = sum * 31u + v.x + 3u * v.y + 5u * v.z + 7u * v.w;
        }
        want[t] = sum;
    }
    uint4* src = upload4(hsrc, n * ntiles);
    unsigned* sums;
    CUDA_CHECK(cudaMalloc(&sums, sizeof got));
    LAUNCH((pipeline_kernel<1>), 3, n, 2 * n * sizeof(uint4), 0, src, ntiles, sums);
    CUDA_CHECK(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int t = 0; t < n; t++) bad += got[t] != want[t];
    check(bad == 0, "cp.async double buffer (2 stages, %d tiles, wait<1>): every thread's hash is right "
          "(%d of %d differ)", ntiles, bad, n);
#if defined(CUDA_HOST)
    LAUNCH((pipeline_kernel<2>), 3, n, 2 * n * sizeof(uint4), 0, src, ntiles, sums);
    CUDA_CHECK(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int t = 0; t < n; t++) bad += got[t] != want[t];
    check(bad == n, "cp.async double buffer waiting with wait<2> (one group too few) reads stale bytes "
          "under the host runtime (%d of %d hashes wrong)", bad, n);
#endif
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaFree(sums));
    free(hsrc);
}

// --- --die cases ---------------------------------------------------------------------------------

__global__ void die_ldmatrix_misaligned_kernel(uint32_t* out) {
    __shared__ __align__(16) uint16_t tile[32 * 8 + 8];
    int l = threadIdx.x;
    uint32_t r[4];
    ldmatrix_x4(r, &tile[l * 8 + (l == 5 ? 4 : 0)]);  // lane 5: 8 bytes off
    out[l] = r[0];
}

__global__ void die_ldmatrix_global_kernel(const uint16_t* g, uint32_t* out) {
    int l = threadIdx.x;
    uint32_t r[1];
    ldmatrix_x1(r, g + 8 * (l % 8));  // global memory, not shared
    out[l] = r[0];
}

__global__ void die_cp_misaligned_kernel(const uint4* src) {
    DYNAMIC_SHARED(unsigned char, s);
    int t = threadIdx.x;
    cp_async_16(s + 16 * t + (t == 3 ? 8 : 0), &src[t], 16);
    cp_async_commit();
    cp_async_wait<0>();
}

__global__ void die_cp_overrun_kernel(const unsigned char* src) {
    DYNAMIC_SHARED(unsigned char, s);
    cp_async_16(s, src + 32, 16);  // a 40-byte allocation: bytes 32..47
    cp_async_commit();
    cp_async_wait<0>();
}

__global__ void die_cp_pending_kernel(const uint4* src) {
    DYNAMIC_SHARED(uint4, s);
    if (threadIdx.x == 0) {
        cp_async_16(s, src, 16);
        cp_async_commit();  // no wait
    }
}

__global__ void die_mma_partial_kernel(float* out) {
    int l = threadIdx.x;
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (l < 16) mma_m16n8k16_bf16(acc, a, b, acc);  // half a warp
    out[l] = acc[0];
}

__global__ void die_mixed_kernel(float* out) {
    __shared__ __align__(16) uint16_t tile[64];
    int l = threadIdx.x;
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = l; i < 64; i += 32) tile[i] = 0;
    __syncthreads();
    if (l < 16) mma_m16n8k16_bf16(acc, a, b, acc);
    else ldmatrix_x1(a, &tile[8 * (l % 8)]);
    out[l] = acc[0] + (float)a[0];
}

static int die(const char* what) {
    void* d;
    CUDA_CHECK(cudaMalloc(&d, 4096));
    if (!strcmp(what, "ldmatrix-misaligned")) LAUNCH(die_ldmatrix_misaligned_kernel, 1, 32, 0, 0, (uint32_t*)d);
    else if (!strcmp(what, "ldmatrix-global"))
        LAUNCH(die_ldmatrix_global_kernel, 1, 32, 0, 0, (const uint16_t*)d, (uint32_t*)d + 512);
    else if (!strcmp(what, "cp-misaligned")) LAUNCH(die_cp_misaligned_kernel, 1, 32, 1024, 0, (const uint4*)d);
    else if (!strcmp(what, "cp-overrun")) {
        void* small;
        CUDA_CHECK(cudaMalloc(&small, 40));
        LAUNCH(die_cp_overrun_kernel, 1, 32, 1024, 0, (const unsigned char*)small);
    } else if (!strcmp(what, "cp-pending")) LAUNCH(die_cp_pending_kernel, 1, 32, 1024, 0, (const uint4*)d);
    else if (!strcmp(what, "mma-partial")) LAUNCH(die_mma_partial_kernel, 1, 32, 0, 0, (float*)d);
    else if (!strcmp(what, "mixed")) LAUNCH(die_mixed_kernel, 1, 32, 0, 0, (float*)d);
    else {
        printf("--die %s: unknown case\n", what);
        return 2;
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    printf("--die %s: the program was expected to end with a diagnostic\n", what);
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--die")) return die(argv[2]);
    test_mma(0, 1, "integer A, B, C = 0");
    test_mma(1, 1, "A a permutation, B distinct values, C integers");
    test_mma(2, 3, "integer A, B, C, three mma calls with d = c");
    test_ldmatrix<1, 0>();
    test_ldmatrix<1, 1>();
    test_ldmatrix<2, 0>();
    test_ldmatrix<2, 1>();
    test_ldmatrix<4, 0>();
    test_ldmatrix<4, 1>();
    test_compose();
    test_cp_async();
    test_pipeline();
    return test_finish("test_ptx");
}
