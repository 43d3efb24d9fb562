// Known answers for the Hopper (sm_90a) instructions of model/cuda_ptx_sm90.cuh, part of test_ptx
// (included by test_ptx.cu): under the host runtime against the twins of tests/cuda_host/
// ptx_sm90.cpp, in the GPU kit against an H100 (skipped where the build has no sm_90a code).
//
// - mbarrier phases: 128 threads arrive and wait four phases; each reads every thread's value.
// - mbarrier transaction bytes: a phase needs its arrivals and its expected bytes (arrive.expect_tx,
//   expect_tx, complete_tx).
// - named barriers: a subset barrier (one warpgroup), and producer warps that bar.arrive for
//   consumer warps that bar.sync (the consumers run first here, so a missing barrier shows).
// - setmaxnreg dec/inc per warpgroup: a no-op for the results; .inc waits for registers the block's
//   .dec calls gave back, and a split over the launch's registers fails (--die setmaxnreg-pool).
// - TMA stores and reduce-adds (bulk groups): fp32 boxes, clipped at the edges, swizzle none and
//   128B, reductions from 4 blocks exact.
// - wgmma: descriptor fields; m64n64k16 bf16 with K-major and MN-major operands under each swizzle,
//   two chained in one group (scale-d 0 and 1), exact on small integers; the same with A from
//   registers (mma.m16n8k16's A fragments) and B K-major or MN-major, 128B swizzle.
// - TMA: cuTensorMapEncodeTiled + cp.async.bulk.tensor.2d boxes, in bounds and past every edge
//   (zero fill), with swizzle none/32/64/128 B: the shared-memory bytes bit-exact against layouts
//   computed here from the PTX ISA's swizzle definition; the encoder's refusals; and boxes of 64
//   columns under 128B swizzle land exactly in the attention kernels' tile layout (FaTile).
// --mutant tma-no-wait (reads the tile before the mbarrier wait), --mutant tma-wrong-swizzle and
// --mutant wgmma-no-wait (stores the accumulators before the wait) must fail; --die cases:
// mbar-never(-tx), mbar-uninit, tma-never-waited, setmaxnreg-mixed, setmaxnreg-pool, named-count, wgmma-no-fence,
// wgmma-pending, wgmma-rs-changed, bulk-pending.
#include "model/cuda_ptx_sm90.cuh"
#include "attention/flash_tile.cuh"

// 1 where the kernels were compiled for sm_90a (and under the host runtime).
__global__ void sm90a_probe_kernel(int* out) { *out = CUDA_PTX_HAS_SM90A; }

static int sm90a_available(void) {
    int *d, h = 0;
    CUDA_CHECK(cudaMalloc(&d, sizeof(int)));
    LAUNCH(sm90a_probe_kernel, 1, 1, 0, 0, d);
    CUDA_CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d));
    return h == 1;
}

// --- mbarrier --------------------------------------------------------------------------------------

enum { MB_PHASES = 4, MB_THREADS = 128 };

__global__ void mbar_phase_kernel(unsigned* out) {
    __shared__ __align__(8) uint64_t bar;
    __shared__ unsigned slot[MB_PHASES][MB_THREADS];
    int t = threadIdx.x;
    if (t == 0) {
        mbarrier_init(&bar, MB_THREADS);
        fence_mbarrier_init();
    }
    __syncthreads();
    for (int ph = 0; ph < MB_PHASES; ph++) {
        slot[ph][t] = (unsigned)(ph * 1000 + t);
        mbarrier_arrive(&bar);
        while (!mbarrier_try_wait_parity(&bar, ph & 1)) {}
        unsigned s = 0;
        for (int i = 0; i < MB_THREADS; i++) s += slot[ph][i];
        out[ph * MB_THREADS + t] = s;
    }
}

// Count 33: thread 0 (expecting the bytes) and threads 32..63, which each write 4 bytes, complete
// 4 transaction bytes and arrive. Phase 0: arrive.expect_tx 128 (all 32 complete); phase 1:
// expect_tx 64 then a plain arrive (threads 32..47 complete).
__global__ void mbar_tx_kernel(unsigned* out) {
    __shared__ __align__(8) uint64_t bar;
    __shared__ unsigned data[2][32];
    int t = threadIdx.x;
    if (t == 0) {
        mbarrier_init(&bar, 33);
        fence_mbarrier_init();
    }
    __syncthreads();
    if (t == 0) mbarrier_arrive_expect_tx(&bar, 128);
    if (t >= 32) {
        data[0][t - 32] = (unsigned)t * 7u;
        mbarrier_complete_tx(&bar, 4);
        mbarrier_arrive(&bar);
    }
    if (t == 0 || t >= 32) while (!mbarrier_try_wait_parity(&bar, 0)) {}
    if (t >= 32) out[t - 32] = data[0][(t + 5) % 32];
    if (t == 0) {
        mbarrier_expect_tx(&bar, 64);
        mbarrier_arrive(&bar);
    }
    if (t >= 32) {
        data[1][t - 32] = (unsigned)t * 11u;
        if (t < 48) mbarrier_complete_tx(&bar, 4);
        mbarrier_arrive(&bar);
    }
    if (t == 0 || t >= 32) while (!mbarrier_try_wait_parity(&bar, 1)) {}
    if (t >= 32) out[32 + t - 32] = data[1][(t + 9) % 32];
}

static void test_mbarrier(void) {
    unsigned *d, h[MB_PHASES * MB_THREADS];
    CUDA_CHECK(cudaMalloc(&d, sizeof h));
    LAUNCH(mbar_phase_kernel, 1, MB_THREADS, 0, 0, d);
    CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int ph = 0; ph < MB_PHASES; ph++)
        for (int t = 0; t < MB_THREADS; t++)
            bad += h[ph * MB_THREADS + t] != (unsigned)(ph * 1000 * MB_THREADS + MB_THREADS * (MB_THREADS - 1) / 2);
    check(bad == 0, "mbarrier: 128 threads arrive and wait 4 phases, each sees all 128 values (%d of %d sums wrong)",
          bad, MB_PHASES * MB_THREADS);
    LAUNCH(mbar_tx_kernel, 1, 64, 0, 0, d);
    CUDA_CHECK(cudaMemcpy(h, d, 64 * sizeof(unsigned), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < 32; i++) {
        bad += h[i] != (unsigned)(32 + (i + 32 + 5) % 32) * 7u;
        bad += h[32 + i] != (unsigned)(32 + (i + 32 + 9) % 32) * 11u;
    }
    check(bad == 0, "mbarrier transaction bytes: arrive.expect_tx / expect_tx / complete_tx over two phases (%d of 64 "
          "values wrong)", bad);
    CUDA_CHECK(cudaFree(d));
}

// --- Named barriers, setmaxnreg --------------------------------------------------------------------

// 256 threads. Warpgroup 1: a subset barrier of its own (id 2, 128 threads) between writing and
// reading its neighbours' slots. Warpgroup 0 (consumers, run first here) bar.sync 1, 256 and reads
// what warpgroup 1 (producers) wrote before bar.arrive 1, 256.
__global__ void __launch_bounds__(256, 1) named_barrier_kernel(unsigned* out) {
    __shared__ unsigned slot[128], shared_data[128];
    int t = threadIdx.x;
    if (t < 128) {
        setmaxnreg_dec<24>();
        named_barrier_sync(1, 256);
        out[t] = shared_data[(t + 1) % 128];
    } else {
        setmaxnreg_inc<232>();
        int u = t - 128;
        slot[u] = (unsigned)u * 3u + 1u;
        named_barrier_sync(2, 128);
        shared_data[u] = slot[(u + 1) % 128] + 1000u;
        named_barrier_arrive(1, 256);
        out[t] = slot[(u + 127) % 128];
    }
}

static void test_named_barrier(void) {
    unsigned *d, h[256];
    CUDA_CHECK(cudaMalloc(&d, sizeof h));
    LAUNCH(named_barrier_kernel, 1, 256, 0, 0, d);
    CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int t = 0; t < 128; t++) {
        bad += h[t] != ((unsigned)(t + 2) % 128) * 3u + 1u + 1000u;
        bad += h[128 + t] != ((unsigned)(t + 127) % 128) * 3u + 1u;
    }
    check(bad == 0, "named barriers: bar.sync 2, 128 in one warpgroup; bar.arrive 1, 256 (producers) / bar.sync 1, 256 "
          "(consumers); setmaxnreg.dec 24 / .inc 232 per warpgroup (%d of 256 values wrong)", bad);
    CUDA_CHECK(cudaFree(d));
}

// --- TMA ---------------------------------------------------------------------------------------------

// The global tensor: TMA_H rows of TMA_W bf16-sized values, rows TMA_PITCH elements apart (the
// padding columns hold 0xbeef: the box must not read them). Value (y, x) = 1 + y * TMA_PITCH + x.
enum { TMA_W = 100, TMA_PITCH = 104, TMA_H = 150, TMA_MAX_BOX = 64 * 32 * 2 };

static uint16_t tma_value(int y, int x) { return (uint16_t)(1 + y * TMA_PITCH + x); }

__device__ static unsigned char* align_1024(unsigned char* p) {
#if defined(__CUDACC__)
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
#else
    unsigned a = (unsigned)(uintptr_t)p;
#endif
    return p + ((1024u - (a & 1023u)) & 1023u);
}

// Thread 0 expects the box's bytes and issues the copy; all wait (read_early: the mutant reads the
// tile first), then copy the tile's raw shared-memory bytes out.
__global__ void tma_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1, unsigned bytes, int read_early,
                           unsigned char* out) {
    __shared__ __align__(8) uint64_t bar;
    DYNAMIC_SHARED(unsigned char, smem);
    unsigned char* tile = align_1024(smem);
    int t = threadIdx.x;
    if (t == 0) {
        mbarrier_init(&bar, 1);
        fence_mbarrier_init();
    }
    __syncthreads();
    if (t == 0) {
        mbarrier_arrive_expect_tx(&bar, bytes);
        tma_load_2d(tile, &map, c0, c1, &bar);
    }
    if (read_early)
        for (unsigned i = (unsigned)t; i < bytes; i += blockDim.x) out[i] = tile[i];
    while (!mbarrier_try_wait_parity(&bar, 0)) {}
    if (!read_early)
        for (unsigned i = (unsigned)t; i < bytes; i += blockDim.x) out[i] = tile[i];
}

// The expected shared-memory bytes, from the PTX ISA's definition: the box is laid out row-major
// (c0 fastest, out-of-bounds elements 0); then, within each 128-byte line of the 1024-byte
// aligned tile, the 16-byte chunk j is stored at chunk j XOR i, with i the line's index modulo
// span / 16 (swizzle span 32, 64 or 128 bytes; none: no move).
static void tma_expected(unsigned char* want, int span, int b0, int b1, int c0, int c1) {
    unsigned bytes = (unsigned)(b0 * b1 * 2);
    for (int r = 0; r < b1; r++)
        for (int x = 0; x < b0; x++) {
            int gy = c1 + r, gx = c0 + x;
            uint16_t v = gy >= 0 && gy < TMA_H && gx >= 0 && gx < TMA_W ? tma_value(gy, gx) : 0;
            unsigned q = (unsigned)(r * b0 + x) * 2, o = q;
            if (span) {
                unsigned line = q / 128, chunk = q % 128 / 16, i = line % (unsigned)(span / 16);
                o = line * 128 + (chunk ^ i) * 16 + q % 16;
            }
            if (o + 2 <= bytes) memcpy(want + o, &v, 2);
        }
}

static CUresult tma_encode(TmaEncodeTiledFn enc, CUtensorMap* map, void* base, unsigned long long pitch_bytes,
                           int b0, int b1, CUtensorMapSwizzle sw) {
    cuuint64_t dim[2] = {TMA_W, TMA_H}, stride[1] = {pitch_bytes};
    cuuint32_t box[2] = {(cuuint32_t)b0, (cuuint32_t)b1}, estride[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dim, stride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
               sw, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

typedef struct {
    TmaEncodeTiledFn enc;
    uint16_t* global;
    unsigned char* out;
} Tma;

static int tma_init(Tma* s) {
    s->enc = tma_encode_tiled_fn();
    if (!s->enc) return 0;
    uint16_t* h = (uint16_t*)malloc(TMA_H * TMA_PITCH * 2);
    for (int y = 0; y < TMA_H; y++)
        for (int x = 0; x < TMA_PITCH; x++) h[y * TMA_PITCH + x] = x < TMA_W ? tma_value(y, x) : 0xbeef;
    CUDA_CHECK(cudaMalloc(&s->global, TMA_H * TMA_PITCH * 2));
    CUDA_CHECK(cudaMemcpy(s->global, h, TMA_H * TMA_PITCH * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&s->out, TMA_MAX_BOX));
    free(h);
    return 1;
}

static void tma_free(Tma* s) {
    CUDA_CHECK(cudaFree(s->global));
    CUDA_CHECK(cudaFree(s->out));
}

static const int tma_spans[4] = {0, 32, 64, 128};

// One box: encoded with swizzle sw, checked against the layout of swizzle want_sw (the same but
// for the wrong-swizzle mutant); returns the number of wrong bytes.
static int tma_case(const Tma* s, int sw, int want_sw, int b0, int b1, int c0, int c1, int read_early) {
    __align__(64) CUtensorMap map;
    CUresult r = tma_encode(s->enc, &map, s->global, TMA_PITCH * 2, b0, b1, (CUtensorMapSwizzle)sw);
    if (r != CUDA_SUCCESS) return -1;
    unsigned bytes = (unsigned)(b0 * b1 * 2);
    static unsigned char got[TMA_MAX_BOX], want[TMA_MAX_BOX];
    CUDA_CHECK(cudaMemset(s->out, 0x5a, TMA_MAX_BOX));
    CUDA_CHECK(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, TMA_MAX_BOX + 1024));
    LAUNCH(tma_kernel, 1, 128, TMA_MAX_BOX + 1024, 0, map, c0, c1, bytes, read_early, s->out);
    CUDA_CHECK(cudaMemcpy(got, s->out, bytes, cudaMemcpyDeviceToHost));
    memset(want, 0, sizeof want);
    tma_expected(want, tma_spans[want_sw], b0, b1, c0, c1);
    int bad = 0;
    for (unsigned i = 0; i < bytes; i++) bad += got[i] != want[i];
    return bad;
}

typedef struct {
    int sw, b0, b1, c0, c1;
    const char* where;
} TmaBox;
static const TmaBox tma_boxes[] = {
    {0, 64, 16, 8, 4, "in bounds"},
    {0, 64, 16, 72, 140, "past the right and bottom edges"},
    {1, 16, 16, 8, 5, "in bounds"},
    {1, 16, 16, -8, -3, "before the left and top edges"},
    {2, 32, 24, 40, 17, "in bounds"},
    {2, 32, 24, 88, -10, "past the right, before the top edge"},
    {3, 64, 32, 24, 100, "in bounds"},
    {3, 64, 32, -32, 130, "before the left, past the bottom edge"},
};

static void test_tma_panels(void);
static void test_tma_3d(void);

static void test_tma(void) {
    Tma s;
    if (!tma_init(&s)) {
        check(0, "TMA: cuTensorMapEncodeTiled not found through cudaGetDriverEntryPointByVersion");
        return;
    }
    for (size_t i = 0; i < sizeof tma_boxes / sizeof tma_boxes[0]; i++) {
        const TmaBox* b = &tma_boxes[i];
        int bad = tma_case(&s, b->sw, b->sw, b->b0, b->b1, b->c0, b->c1, 0);
        check(bad == 0, "TMA 2D box %dx%d bf16 at (%d, %d), %s, swizzle %s: shared-memory bytes bit-exact (%d of %d "
              "wrong%s)", b->b0, b->b1, b->c0, b->c1, b->where, b->sw ? (b->sw == 1 ? "32B" : b->sw == 2 ? "64B" : "128B")
              : "none", bad, b->b0 * b->b1 * 2, bad < 0 ? ": the encode failed" : "");
    }
    // The driver's refusals: a row pitch that is not a multiple of 16 bytes; a box row wider than
    // the swizzle span.
    __align__(64) CUtensorMap map;
    CUresult r1 = tma_encode(s.enc, &map, s.global, 200, 64, 16, CU_TENSOR_MAP_SWIZZLE_NONE);
    CUresult r2 = tma_encode(s.enc, &map, s.global, TMA_PITCH * 2, 64, 16, CU_TENSOR_MAP_SWIZZLE_64B);
    check(r1 != CUDA_SUCCESS && r2 != CUDA_SUCCESS, "cuTensorMapEncodeTiled refuses a 200-byte row pitch (%d) and a "
          "128-byte box row with 64-byte swizzle (%d)", (int)r1, (int)r2);
    tma_free(&s);
    test_tma_panels();
    test_tma_3d();
}

// The attention kernels' swizzled tiles (attention/flash_tile.cuh, FaTile<HS, ROWS>) are what TMA
// writes with 128-byte swizzle, one 64-column box per panel at the tile's 1024-byte aligned base +
// panel * PANEL elements: the Hopper kernels can load them with TMA and read them with wgmma. A
// ROWS x HS tensor of distinct values, loaded panel by panel; every element must sit where
// FaTile::chunk puts it. Returns the number of misplaced elements, or -1 if the encode failed.
template <int HS, int ROWS> static int tma_panel_case(TmaEncodeTiledFn enc) {
    typedef FaTile<HS, ROWS> T;
    enum { PANEL_BYTES = 64 * ROWS * 2 };
    static_assert(T::SWIZZLE && T::PANEL * 2 == PANEL_BYTES && PANEL_BYTES % 1024 == 0, "whole 1024-byte panels");
    static uint16_t h[ROWS * HS], got[ROWS * HS];
    for (int i = 0; i < ROWS * HS; i++) h[i] = (uint16_t)(1 + i);
    uint16_t* g;
    unsigned char* out;
    CUDA_CHECK(cudaMalloc(&g, sizeof h));
    CUDA_CHECK(cudaMalloc(&out, sizeof got));
    CUDA_CHECK(cudaMemcpy(g, h, sizeof h, cudaMemcpyHostToDevice));
    __align__(64) CUtensorMap map;
    cuuint64_t dim[2] = {HS, ROWS}, stride[1] = {HS * 2};
    cuuint32_t box[2] = {64, ROWS}, estride[2] = {1, 1};
    int bad = -1;
    if (enc(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, g, dim, stride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS) {
        CUDA_CHECK(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, PANEL_BYTES + 1024));
        for (int p = 0; p < HS / 64; p++)
            LAUNCH(tma_kernel, 1, 128, PANEL_BYTES + 1024, 0, map, 64 * p, 0, (unsigned)PANEL_BYTES, 0,
                   out + (size_t)p * PANEL_BYTES);
        CUDA_CHECK(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost));
        bad = 0;
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < HS; c++) bad += got[T::chunk(r, c / 8) + c % 8] != h[r * HS + c];
    }
    CUDA_CHECK(cudaFree(g));
    CUDA_CHECK(cudaFree(out));
    return bad;
}

static void test_tma_panels(void) {
    TmaEncodeTiledFn enc = tma_encode_tiled_fn();
    if (!enc) return;   // (test_tma reports it)
    const int bad[4] = {tma_panel_case<64, 64>(enc), tma_panel_case<128, 64>(enc), tma_panel_case<128, 128>(enc),
                        tma_panel_case<64, 128>(enc)};
    const char* what[4] = {"64 x 64", "64 x 128", "128 x 128", "128 x 64"};
    for (int i = 0; i < 4; i++)
        check(bad[i] == 0, "TMA 128B swizzle writes the attention kernels' %s (rows x HS) tile layout: one box per 64-column "
              "panel (%d elements misplaced%s)", what[i], bad[i], bad[i] < 0 ? ": the encode failed" : "");
}

// --- TMA stores and reductions -----------------------------------------------------------------------

// An fp32 tensor of ST_H rows of ST_W values (the row pitch ST_W * 4 = 160 bytes); boxes of 32 x 8.
enum { ST_W = 40, ST_H = 20, ST_B0 = 32, ST_B1 = 8 };

// The shared-memory offset of box element byte q under a swizzle span (PTX ISA definition, as in
// tma_expected).
__device__ __host__ static unsigned st_swizzle(unsigned q, int span) {
    if (!span) return q;
    unsigned line = q / 128, chunk = q % 128 / 16, i = line % (unsigned)(span / 16);
    return line * 128 + (chunk ^ i) * 16 + q % 16;
}
__device__ __host__ static float st_value(int block, int r, int x) { return (float)(block + 1 + (r * ST_B0 + x) % 5); }

// Each block writes its box (value st_value(block, r, x) at element (r, x)) into a 1024-byte aligned
// tile in the swizzled layout; thread 0 stores or reduce-adds it, commits and waits.
__global__ void tma_store_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1, int span, int reduce) {
    DYNAMIC_SHARED(unsigned char, smem);
    unsigned char* tile = align_1024(smem);
    for (int i = threadIdx.x; i < ST_B0 * ST_B1; i += blockDim.x) {
        float v = st_value((int)blockIdx.x, i / ST_B0, i % ST_B0);
        memcpy(tile + st_swizzle((unsigned)i * 4, span), &v, 4);
    }
    fence_proxy_async();  // the threads' writes, visible to the TMA unit
    __syncthreads();
    if (threadIdx.x == 0) {
        if (reduce) tma_reduce_add_2d(&map, tile, c0, c1);
        else tma_store_2d(&map, tile, c0, c1);
        bulk_commit();
        bulk_wait<0>();
    }
}

// h[i] = 0.5 + i for n floats, and a device copy of them (the stores' and reductions' target).
static float* fp32_ramp(float* h, int n) {
    for (int i = 0; i < n; i++) h[i] = 0.5f + (float)i;
    float* d;
    CUDA_CHECK(cudaMalloc(&d, (size_t)n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

// Stores (1 block) or reduce-adds (4 blocks) a box at (c0, c1) into a tensor of 0.5 + index; every
// element checked (out-of-bounds parts of the box not written, nothing outside the box touched).
static int tma_store_case(TmaEncodeTiledFn enc, int sw, int c0, int c1, int reduce) {
    static float h[ST_H * ST_W], got[ST_H * ST_W];
    float* d = fp32_ramp(h, ST_H * ST_W);
    __align__(64) CUtensorMap map;
    cuuint64_t dim[2] = {ST_W, ST_H}, stride[1] = {ST_W * 4};
    cuuint32_t box[2] = {ST_B0, ST_B1}, estride[2] = {1, 1};
    if (enc(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d, dim, stride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
            (CUtensorMapSwizzle)sw, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return -1;
    int blocks = reduce ? 4 : 1;
    LAUNCH(tma_store_kernel, blocks, 64, 2048, 0, map, c0, c1, tma_spans[sw], reduce);
    CUDA_CHECK(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d));
    int bad = 0;
    for (int y = 0; y < ST_H; y++)
        for (int x = 0; x < ST_W; x++) {
            float want = h[y * ST_W + x];
            int r = y - c1, bx = x - c0;
            if (r >= 0 && r < ST_B1 && bx >= 0 && bx < ST_B0) {
                if (!reduce) want = st_value(0, r, bx);
                else
                    for (int b = 0; b < blocks; b++) want += st_value(b, r, bx);
            }
            bad += got[y * ST_W + x] != want;
        }
    return bad;
}

// --- Rank-3 maps: heads as a dimension -----------------------------------------------------------

// Q, K or V of head size 80 as the Hopper kernels map them: dims {80 columns, 3 heads, 24 rows},
// rows T3_PITCH elements apart (the heads' 240 columns and 16 more), heads 80 apart. A box {64, 1,
// 16} at column 64 reads columns 64..79 of its head and zeros for 80..127, never the next head's
// columns (the padding of head size 80 to the kernels' 128); at column 0 a whole panel.
enum { T3_HS = 80, T3_NH = 3, T3_ROWS = 24, T3_PITCH = 256, T3_B0 = 64, T3_B2 = 16 };
static uint16_t t3_value(int row, int col) { return (uint16_t)(1 + row * T3_PITCH + col); }

__global__ void tma3_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1, int c2, unsigned char* out) {
    DYNAMIC_SHARED(unsigned char, smem);
    unsigned char* tile = align_1024(smem);
    __shared__ uint64_t bar;
    const unsigned bytes = T3_B0 * T3_B2 * 2;
    if (threadIdx.x == 0) {
        mbarrier_init(&bar, 1);
        fence_mbarrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(&bar, bytes);
        tma_load_3d(tile, &map, c0, c1, c2, &bar);
    }
    while (!mbarrier_try_wait_parity(&bar, 0)) {}
    for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = tile[i];
}

// One box {64, 1, 16} of the 128-byte swizzle at (c0, head c1, row c2): bytes wrong against the
// PTX ISA's layout (tma_expected's, z the row), or -1 where the encode fails.
static int tma3_case(TmaEncodeTiledFn enc, const uint16_t* d, unsigned char* out, int c0, int c1, int c2) {
    __align__(64) CUtensorMap map;
    cuuint64_t dim[3] = {T3_HS, T3_NH, T3_ROWS}, stride[2] = {T3_HS * 2, T3_PITCH * 2};
    cuuint32_t box[3] = {T3_B0, 1, T3_B2}, estride[3] = {1, 1, 1};
    if (enc(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void*)d, dim, stride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return -1;
    const unsigned bytes = T3_B0 * T3_B2 * 2;
    static unsigned char got[T3_B0 * T3_B2 * 2], want[T3_B0 * T3_B2 * 2];
    CUDA_CHECK(cudaMemset(out, 0x5a, bytes));
    CUDA_CHECK(cudaFuncSetAttribute(tma3_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes + 1024));
    LAUNCH(tma3_kernel, 1, 128, bytes + 1024, 0, map, c0, c1, c2, out);
    CUDA_CHECK(cudaMemcpy(got, out, bytes, cudaMemcpyDeviceToHost));
    for (int z = 0; z < T3_B2; z++)
        for (int x = 0; x < T3_B0; x++) {
            const int row = c2 + z, col = c0 + x;
            const uint16_t v = row < T3_ROWS && col < T3_HS ? t3_value(row, c1 * T3_HS + col) : 0;
            const unsigned q = (unsigned)(z * T3_B0 + x) * 2, line = q / 128, chunk = q % 128 / 16;
            memcpy(want + line * 128 + (chunk ^ line % 8) * 16 + q % 16, &v, 2);
        }
    int bad = 0;
    for (unsigned i = 0; i < bytes; i++) bad += got[i] != want[i];
    return bad;
}

static void test_tma_3d(void) {
    TmaEncodeTiledFn enc = tma_encode_tiled_fn();
    if (!enc) return;   // (test_tma reports it)
    static uint16_t h[T3_ROWS * T3_PITCH];
    for (int r = 0; r < T3_ROWS; r++)
        for (int x = 0; x < T3_PITCH; x++) h[r * T3_PITCH + x] = t3_value(r, x);
    uint16_t* d;
    unsigned char* out;
    CUDA_CHECK(cudaMalloc(&d, sizeof h));
    CUDA_CHECK(cudaMalloc(&out, T3_B0 * T3_B2 * 2));
    CUDA_CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    static const struct {
        int c0, c1, c2;
        const char* where;
    } cases[] = {{0, 1, 3, "columns 0..63 of head 1"},
                 {64, 1, 5, "columns 64..127 of head 1: 16 of the head's, then zeros (not head 2's)"},
                 {64, 2, 16, "columns 64..127 of the last head, rows 16..31 of 24: zeros past both"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int bad = tma3_case(enc, d, out, cases[i].c0, cases[i].c1, cases[i].c2);
        check(bad == 0, "TMA 3D box 64x1x16 bf16 at (%d, %d, %d), %s, swizzle 128B: shared-memory bytes bit-exact "
              "(%d of %d wrong%s)", cases[i].c0, cases[i].c1, cases[i].c2, cases[i].where, bad, T3_B0 * T3_B2 * 2,
              bad < 0 ? ": the encode failed" : "");
    }
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(out));
}

// The Hopper backward's dQ reduction for head size 80: an fp32 tile of 128 columns x 8 rows added by
// 4 blocks into head 1 of dims {80 columns, 2 heads, 20 rows} (rows 176 floats apart) at row 4:
// columns 80..127 of the box are skipped, so head 0, the row padding and rows outside stay.
enum { R3_HS = 80, R3_NH = 2, R3_ROWS = 20, R3_PITCH = 176, R3_B0 = 128, R3_B2 = 8 };
__global__ void tma3_reduce_kernel(const __grid_constant__ CUtensorMap map, int c1, int c2) {
    DYNAMIC_SHARED(unsigned char, smem);
    float* tile = reinterpret_cast<float*>(align_1024(smem));
    for (int i = threadIdx.x; i < R3_B0 * R3_B2; i += blockDim.x) tile[i] = st_value((int)blockIdx.x, i / R3_B0, i % R3_B0);
    fence_proxy_async();
    __syncthreads();
    if (threadIdx.x == 0) {
        tma_reduce_add_3d(&map, tile, 0, c1, c2);
        bulk_commit();
        bulk_wait<0>();
    }
}

static int tma3_reduce_case(TmaEncodeTiledFn enc, int c1, int c2) {
    static float h[R3_ROWS * R3_PITCH], got[R3_ROWS * R3_PITCH];
    float* d = fp32_ramp(h, R3_ROWS * R3_PITCH);
    __align__(64) CUtensorMap map;
    cuuint64_t dim[3] = {R3_HS, R3_NH, R3_ROWS}, stride[2] = {R3_HS * 4, R3_PITCH * 4};
    cuuint32_t box[3] = {R3_B0, 1, R3_B2}, estride[3] = {1, 1, 1};
    if (enc(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, d, dim, stride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return -1;
    const int blocks = 4, bytes = R3_B0 * R3_B2 * 4;
    CUDA_CHECK(cudaFuncSetAttribute(tma3_reduce_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes + 1024));
    LAUNCH(tma3_reduce_kernel, blocks, 128, bytes + 1024, 0, map, c1, c2);
    CUDA_CHECK(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d));
    int bad = 0;
    for (int r = 0; r < R3_ROWS; r++)
        for (int x = 0; x < R3_PITCH; x++) {
            float want = h[r * R3_PITCH + x];
            const int z = r - c2, col = x - c1 * R3_HS;
            if (z >= 0 && z < R3_B2 && col >= 0 && col < R3_HS)
                for (int b = 0; b < blocks; b++) want += st_value(b, z, col);
            bad += got[r * R3_PITCH + x] != want;
        }
    return bad;
}

static void test_tma_store_3d(void) {
    TmaEncodeTiledFn enc = tma_encode_tiled_fn();
    if (!enc) return;
    const int bad = tma3_reduce_case(enc, 1, 4);
    check(bad == 0, "TMA 3D reduce-add of a 128x1x8 fp32 box from 4 blocks into head 1 of (80 columns, 2 heads, 20 "
          "rows) at row 4: columns 80..127 skipped, every element exact (%d of %d wrong)", bad, R3_ROWS * R3_PITCH);
}

static void test_tma_store(void) {
    TmaEncodeTiledFn enc = tma_encode_tiled_fn();
    if (!enc) return;
    static const struct {
        int sw, c0, c1, reduce;
    } cases[] = {{0, 20, 15, 0}, {3, 0, 3, 0}, {3, 4, 6, 1}, {0, 28, 14, 1}};   // (starts >= 0: GPU rule)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int bad = tma_store_case(enc, cases[i].sw, cases[i].c0, cases[i].c1, cases[i].reduce);
        check(bad == 0, "TMA %s of a 32x8 fp32 box at (%d, %d), swizzle %s, 40x20 tensor: every element exact "
              "(%d of 800 wrong)", cases[i].reduce ? "reduce-add from 4 blocks" : "store", cases[i].c0, cases[i].c1,
              cases[i].sw ? "128B" : "none", bad);
    }
    test_tma_store_3d();
}

// --- wgmma -------------------------------------------------------------------------------------------

// An operand tile's layout: swizzle bytes (0, 32, 64, 128), leading and stride byte offsets. The
// byte offset of element (mn, k), computed here from CUTLASS's canonical GMMA layouts (the
// layouts the PTX ISA draws for each swizzle mode): K-major none: 8 rows of 16 bytes, the next 8 k
// at LBO, the next 8 rows at SBO; K-major swizzled: rows of W bytes, the next 8 rows at SBO;
// MN-major none: 8 mn in 16 bytes, k rows 16 bytes apart, the next 8 mn at SBO, the next 8 k at
// LBO; MN-major swizzled: W bytes of mn per k row, the next 8 k at SBO, the next W bytes of mn at
// LBO. Then the 16-byte chunk index (bits 4..) XOR the 128-byte line index (bits 7..), on
// log2(W / 16) bits.
typedef struct {
    int swz, lbo, sbo;
} WgLayout;

__device__ __host__ static unsigned wg_offset(WgLayout l, int mn_major, int mn, int k) {
    unsigned o;
    if (!mn_major) o = l.swz ? (unsigned)((mn % 8) * l.swz + (mn / 8) * l.sbo + 2 * k)
                             : (unsigned)((mn % 8) * 16 + (mn / 8) * l.sbo + (2 * k) % 16 + (k / 8) * l.lbo);
    else o = l.swz ? (unsigned)((2 * mn) % l.swz + (2 * mn / l.swz) * l.lbo + (k % 8) * l.swz + (k / 8) * l.sbo)
                   : (unsigned)((2 * mn) % 16 + (mn / 8) * l.sbo + (k % 8) * 16 + (k / 8) * l.lbo);
    unsigned lines = l.swz ? (unsigned)l.swz / 16u : 1u;
    return o ^ ((o >> 7) % lines) << 4;
}

__device__ __host__ static float wg_a(int r, int k) { return (float)((3 * r + 5 * k) % 7 - 3); }
__device__ __host__ static float wg_b(int n, int k) { return (float)((2 * k + 3 * n) % 5 - 2); }
__device__ __host__ static float wg_c(int r, int n) { return (float)((r * 8 + n) % 11 - 5); }

// WG_N: the N of the register-A cases and of most shared-memory ones (the attention's tiles);
// WG_N_MAX: the forward's S = Q K^T over 128 keys (m64n128k16). A tile holds 128 rows of 128 bytes.
enum { WG_N = 64, WG_N_MAX = 128, WG_TILE = 16384 };

// 128 threads: A (64 x 16) and B (N x 16, n x k) written into 1024-byte aligned tiles of dynamic
// shared memory in the given layouts; D = (use_c ? C : 0) + A B^T + A B^T by two wgmma in one
// group (the second accumulates onto the first in flight). early: the mutant stores d before
// the wait.
template <int TA, int TB, int N>
__global__ void __launch_bounds__(128) wgmma_kernel(WgLayout la, WgLayout lb, int use_c, int early, float* out,
                                                   unsigned long long* desc_out) {
    DYNAMIC_SHARED(unsigned char, smem);
    unsigned char* ta = align_1024(smem);
    unsigned char* tb = ta + WG_TILE;
    int t = threadIdx.x;
    for (int i = t; i < N * 16; i += 128) {
        int mn = i / 16, k = i % 16;
        __nv_bfloat16 a = __float2bfloat16(wg_a(mn, k)), b = __float2bfloat16(wg_b(mn, k));
        if (mn < 64) memcpy(ta + wg_offset(la, TA, mn, k), &a, 2);
        memcpy(tb + wg_offset(lb, TB, mn, k), &b, 2);
    }
    fence_proxy_async();  // the generic-proxy writes, visible to wgmma (the async proxy)
    __syncthreads();
    uint64_t da = smem_desc(ta, (unsigned)la.lbo, (unsigned)la.sbo, la.swz);
    uint64_t db = smem_desc(tb, (unsigned)lb.lbo, (unsigned)lb.sbo, lb.swz);
    if (t == 0) {
        desc_out[0] = da;
        desc_out[1] = smem_desc_address(ta);
    }
    int w = t / 32, g = t % 32 / 4, q = t % 4;
    float d[N / 2];
    for (int j = 0; j < N / 8; j++)
        for (int i = 0; i < 4; i++) d[4 * j + i] = wg_c(16 * w + g + 8 * (i / 2), 8 * j + 2 * q + i % 2);
    wgmma_fence();
    wgmma_m64k16_bf16<N, TA, TB>(d, da, db, use_c);
    wgmma_m64k16_bf16<N, TA, TB>(d, da, db, 1);
    wgmma_commit();
    if (early)
        for (int i = 0; i < N / 2; i++) out[t * (N / 2) + i] = d[i];
    wgmma_wait<0>();
    for (int i = 0; i < N / 2; i++) wgmma_fence_operand(d[i]);
    if (!early)
        for (int i = 0; i < N / 2; i++) out[t * (N / 2) + i] = d[i];
}

// The same with A from registers (wgmma_m64n64k16_bf16_rs, or m64n80k16 for N = 80): each thread
// packs its part of mma.m16n8k16's A fragment of its warp's rows (lane (g, q): rows g, g + 8,
// columns 2q, 2q + 1, 8 + 2q, 9 + 2q), B (N x 16) K-major with 128-byte swizzle or MN-major (TB) in
// shared memory.
template <int TB, int N>
__global__ void __launch_bounds__(128) wgmma_rs_kernel(WgLayout lb, int use_c, float* out) {
    DYNAMIC_SHARED(unsigned char, smem);
    unsigned char* tb = align_1024(smem);
    int t = threadIdx.x;
    for (int i = t; i < N * 16; i += 128) {
        int mn = i / 16, k = i % 16;
        __nv_bfloat16 b = __float2bfloat16(wg_b(mn, k));
        memcpy(tb + wg_offset(lb, TB, mn, k), &b, 2);
    }
    fence_proxy_async();
    __syncthreads();
    int w = t / 32, g = t % 32 / 4, q = t % 4, r = 16 * w + g;
    uint32_t a[4] = {pack_bf16x2(wg_a(r, 2 * q), wg_a(r, 2 * q + 1)), pack_bf16x2(wg_a(r + 8, 2 * q), wg_a(r + 8, 2 * q + 1)),
                     pack_bf16x2(wg_a(r, 8 + 2 * q), wg_a(r, 9 + 2 * q)),
                     pack_bf16x2(wg_a(r + 8, 8 + 2 * q), wg_a(r + 8, 9 + 2 * q))};
    float d[N / 2];
    for (int j = 0; j < N / 8; j++)
        for (int i = 0; i < 4; i++) d[4 * j + i] = wg_c(16 * w + g + 8 * (i / 2), 8 * j + 2 * q + i % 2);
    uint64_t db = smem_desc(tb, (unsigned)lb.lbo, (unsigned)lb.sbo, lb.swz);
    wgmma_fence();
    if constexpr (N == 80) {
        wgmma_m64n80k16_bf16_rs<TB>(d, a, db, use_c);
        wgmma_m64n80k16_bf16_rs<TB>(d, a, db, 1);
    } else {
        wgmma_m64n64k16_bf16_rs<TB>(d, a, db, use_c);
        wgmma_m64n64k16_bf16_rs<TB>(d, a, db, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    for (int i = 0; i < N / 2; i++) wgmma_fence_operand(d[i]);
    for (int i = 0; i < N / 2; i++) out[t * (N / 2) + i] = d[i];
}

typedef struct {
    int ta, tb, n;
    WgLayout la, lb;
    const char* name;
} WgCase;
static const WgCase wg_cases[] = {
    {0, 0, 64, {0, 128, 256}, {0, 128, 256}, "A, B K-major, no swizzle"},
    {0, 0, 64, {32, 16, 256}, {32, 16, 256}, "A, B K-major, 32B swizzle"},
    {0, 0, 64, {64, 16, 512}, {64, 16, 512}, "A, B K-major, 64B swizzle"},
    {0, 0, 64, {128, 16, 1024}, {128, 16, 1024}, "A, B K-major, 128B swizzle"},
    {1, 1, 64, {128, 8192, 1024}, {128, 8192, 1024}, "A, B MN-major, 128B swizzle"},
    {0, 1, 64, {128, 16, 1024}, {0, 1024, 128}, "A K-major 128B swizzle, B MN-major no swizzle"},
    {1, 0, 64, {64, 1024, 512}, {64, 16, 512}, "A MN-major 64B swizzle (two 32-row blocks at LBO), B K-major 64B"},
    {0, 0, 128, {128, 16, 1024}, {128, 16, 1024}, "A, B K-major, 128B swizzle, 128 rows of B (S over 128 keys)"},
};

// The accumulators of the 128 threads (C layout, N / 2 each) that differ from (use_c ? C : 0) + 2 A B^T.
static int wgmma_wrong(const float* got, int use_c, int N) {
    int bad = 0;
    for (int t = 0; t < 128; t++) {
        int w = t / 32, g = t % 32 / 4, q = t % 4;
        for (int j = 0; j < N / 8; j++)
            for (int i = 0; i < 4; i++) {
                int r = 16 * w + g + 8 * (i / 2), n = 8 * j + 2 * q + i % 2;
                float s = 0.0f;
                for (int k = 0; k < 16; k++) s += wg_a(r, k) * wg_b(n, k);
                float want = (use_c ? wg_c(r, n) : 0.0f) + 2.0f * s;
                bad += got[t * (N / 2) + 4 * j + i] != want;
            }
    }
    return bad;
}

// Runs one case; returns the number of wrong accumulators (-1: not run).
static int wgmma_case(const WgCase* c, int use_c, int early) {
    float* dout;
    unsigned long long* ddesc;
    static float got[128 * WG_N_MAX / 2];
    CUDA_CHECK(cudaMalloc(&dout, sizeof got));
    CUDA_CHECK(cudaMalloc(&ddesc, 2 * sizeof(unsigned long long)));
    size_t shmem = 2 * WG_TILE + 1024;
#define WG_LAUNCH(TA, TB, N)                                                                                           \
    do {                                                                                                               \
        CUDA_CHECK(cudaFuncSetAttribute((wgmma_kernel<TA, TB, N>), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shmem)); \
        LAUNCH((wgmma_kernel<TA, TB, N>), 1, 128, shmem, 0, c->la, c->lb, use_c, early, dout, ddesc);                \
    } while (0)
    if (c->n == 128) WG_LAUNCH(0, 0, 128);
    else if (!c->ta && !c->tb) WG_LAUNCH(0, 0, 64);
    else if (c->ta && c->tb) WG_LAUNCH(1, 1, 64);
    else if (!c->ta) WG_LAUNCH(0, 1, 64);
    else WG_LAUNCH(1, 0, 64);
#undef WG_LAUNCH
    CUDA_CHECK(cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(dout));
    CUDA_CHECK(cudaFree(ddesc));
    return wgmma_wrong(got, use_c, c->n);
}

// Runs the register-A kernel with N columns of B (64, or 80 MN-major) in layout lb (tb: MN-major);
// the wrong accumulators.
static int wgmma_rs_case(WgLayout lb, int tb, int n, int use_c) {
    float* dout;
    static float got[128 * 80 / 2];
    CUDA_CHECK(cudaMalloc(&dout, sizeof got));
    size_t shmem = WG_TILE + 1024;
#define WG_RS_LAUNCH(TB, N)                                                                                            \
    do {                                                                                                               \
        CUDA_CHECK(cudaFuncSetAttribute((wgmma_rs_kernel<TB, N>), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shmem)); \
        LAUNCH((wgmma_rs_kernel<TB, N>), 1, 128, shmem, 0, lb, use_c, dout);                                          \
    } while (0)
    if (n == 80) WG_RS_LAUNCH(1, 80);
    else if (tb) WG_RS_LAUNCH(1, 64);
    else WG_RS_LAUNCH(0, 64);
#undef WG_RS_LAUNCH
    CUDA_CHECK(cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(dout));
    return wgmma_wrong(got, use_c, n);
}

// The descriptor's fields (PTX ISA "Matrix Descriptor Format"), made in a kernel.
__global__ void smem_desc_kernel(unsigned long long* out) {
    DYNAMIC_SHARED(unsigned char, smem);
    unsigned char* tile = align_1024(smem);
    out[0] = smem_desc(tile + 256, 128, 1024, 128);
    out[1] = smem_desc(tile, 4096, 16, 32);
    out[2] = smem_desc_address(tile);
}

static void test_wgmma(void) {
    unsigned long long *d, h[3];
    CUDA_CHECK(cudaMalloc(&d, sizeof h));
    LAUNCH(smem_desc_kernel, 1, 32, 2048, 0, d);
    CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d));
    unsigned long long a = h[2];
    int ok = (h[0] & 0x3fff) == ((a + 256) & 0x3ffff) >> 4 && (h[0] >> 16 & 0x3fff) == 8 && (h[0] >> 32 & 0x3fff) == 64 &&
             (h[0] >> 49 & 7) == 0 && h[0] >> 62 == 1 && (h[1] & 0x3fff) == (a & 0x3ffff) >> 4 &&
             (h[1] >> 16 & 0x3fff) == 256 && (h[1] >> 32 & 0x3fff) == 1 && h[1] >> 62 == 3;
    check(ok, "wgmma descriptors: start address >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, swizzle "
          "128B = 1 and 32B = 3 in bits 62-63 (0x%016llx, 0x%016llx)", h[0], h[1]);
#if defined(CUDA_HOST)
    CudaHostSmemDesc x = cuda_host_smem_desc_decode(0x4000004000080010ull | 5ull << 49);
    CudaHostSmemDesc y = cuda_host_smem_desc_decode(0x8000000100200000ull | 0x3fffull);
    check(x.addr == 256 && x.lbo == 128 && x.sbo == 1024 && x.base_offset == 5 && x.swizzle == 128 &&
          y.addr == 0x3fff0 && y.lbo == 512 && y.sbo == 16 && y.base_offset == 0 && y.swizzle == 64,
          "host decoder: address, LBO, SBO, base offset and swizzle of two descriptors");
#endif
    for (size_t i = 0; i < sizeof wg_cases / sizeof wg_cases[0]; i++)
        for (int use_c = 0; use_c < 2; use_c++) {
            int bad = wgmma_case(&wg_cases[i], use_c, 0);
            check(bad == 0, "wgmma m64n%dk16 bf16, %s, %s: two chained in one group, exact (%d of %d wrong)",
                  wg_cases[i].n, wg_cases[i].name, use_c ? "D = C + 2 A B^T" : "D = 2 A B^T (scale-d 0 first)", bad,
                  64 * wg_cases[i].n);
        }
    // A from registers (the attention's P V): B K-major with 128-byte swizzle, and MN-major (V).
    for (int tb = 0; tb < 2; tb++)
        for (int use_c = 0; use_c < 2; use_c++) {
            const WgLayout lb = tb ? WgLayout{128, 8192, 1024} : WgLayout{128, 16, 1024};
            int bad = wgmma_rs_case(lb, tb, 64, use_c);
            check(bad == 0, "wgmma m64n64k16 bf16, A from registers (mma.m16n8k16's A fragments), B %s 128B "
                  "swizzle, %s: two chained in one group, exact (%d of 4096 wrong)", tb ? "MN-major" : "K-major",
                  use_c ? "D = C + 2 A B^T" : "D = 2 A B^T", bad);
        }
    // The forward's P V at HS 80: 80 columns of V MN-major, the second swizzle atom (columns 64..79)
    // at LBO 4096 bytes (the kernel's next 64-column panel).
    for (int use_c = 0; use_c < 2; use_c++) {
        int bad = wgmma_rs_case(WgLayout{128, 4096, 1024}, 1, 80, use_c);
        check(bad == 0, "wgmma m64n80k16 bf16, A from registers, B MN-major 128B swizzle over two atoms (LBO 4096), "
              "%s: two chained in one group, exact (%d of 5120 wrong)", use_c ? "D = C + 2 A B^T" : "D = 2 A B^T", bad);
    }
}

// Whether `name` is in the comma-separated `only` (every name when only is NULL).
static int listed(const char* only, const char* name) {
    if (!only) return 1;
    char list[128], key[32];
    snprintf(list, sizeof list, ",%s,", only);
    snprintf(key, sizeof key, ",%s,", name);
    return strstr(list, key) != NULL;
}

// The sm_90a groups, each run where `only` lists it (test_ptx --only).
static void test_sm90(const char* only) {
    static const struct {
        const char* name;
        void (*run)(void);
    } groups[] = {{"mbarrier", test_mbarrier}, {"named", test_named_barrier}, {"tma", test_tma},
                  {"store", test_tma_store}, {"wgmma", test_wgmma}};
    int any = 0;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) any |= listed(only, groups[i].name);
    if (!any) return;
    if (!sm90a_available()) {
        printf("skip sm_90a tests: this build has no sm_90a code for this GPU\n");
        return;
    }
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        if (listed(only, groups[i].name)) groups[i].run();
}

// One TMA load box (--tma-case SW B0 B1 C0 C1): swizzle 0-3 (none, 32, 64, 128 B), box B0 x B1 at
// (C0, C1); the check line as test_tma's.
static int tma_one_case(int sw, int b0, int b1, int c0, int c1) {
    if (!sm90a_available()) return 2;
    Tma s;
    if (!tma_init(&s)) return 2;
    int bad = tma_case(&s, sw, sw, b0, b1, c0, c1, 0);
    check(bad == 0, "TMA 2D box %dx%d bf16 at (%d, %d), swizzle %d: shared-memory bytes bit-exact (%d of %d wrong%s)",
          b0, b1, c0, c1, sw, bad, b0 * b1 * 2, bad < 0 ? ": the encode failed" : "");
    tma_free(&s);
    return test_finish("test_ptx --tma-case");
}

// One TMA store (REDUCE 0) or reduce-add from 4 blocks (1) of the 32 x 8 fp32 box at (C0, C1)
// (--store-case SW C0 C1 REDUCE); the check line as test_tma_store's.
static int tma_one_store_case(int sw, int c0, int c1, int reduce) {
    if (!sm90a_available()) return 2;
    TmaEncodeTiledFn enc = tma_encode_tiled_fn();
    if (!enc) return 2;
    int bad = tma_store_case(enc, sw, c0, c1, reduce);
    check(bad == 0, "TMA %s of a 32x8 fp32 box at (%d, %d), swizzle %d: every element exact (%d of 800 wrong)",
          reduce ? "reduce-add from 4 blocks" : "store", c0, c1, sw, bad);
    return test_finish("test_ptx --store-case");
}

// --mutant tma-no-wait: the tile read before the mbarrier wait; --mutant tma-wrong-swizzle: a
// 128-byte box row loaded without swizzle, checked as 128-byte swizzle. Both must fail.
static int mutant_sm90(const char* what) {
    if (!strcmp(what, "wgmma-no-wait")) {  // the accumulators stored before the wgmma wait
        int bad = wgmma_case(&wg_cases[3], 1, 1);
        check(bad == 0, "wgmma accumulators read before the wait: exact (%d of 8192 wrong)", bad);
        return test_finish("test_ptx --mutant wgmma-no-wait");
    }
    Tma s;
    if (!tma_init(&s)) return 2;
    int early = !strcmp(what, "tma-no-wait");
    int bad = tma_case(&s, early ? 3 : 0, 3, 64, 32, 24, 100, early);
    check(bad == 0, "TMA box read %s: bit-exact (%d of 4096 bytes wrong)",
          early ? "without waiting on its mbarrier" : "with swizzle none, expected as 128B", bad);
    tma_free(&s);
    return test_finish(early ? "test_ptx --mutant tma-no-wait" : "test_ptx --mutant tma-wrong-swizzle");
}

// --- --die cases -------------------------------------------------------------------------------------

__global__ void die_mbar_never_kernel(int tx) {  // waits for 2 arrivals (or 64 more bytes); 1 comes
    __shared__ __align__(8) uint64_t bar;
    if (threadIdx.x == 0) mbarrier_init(&bar, tx ? 1 : 2);
    __syncthreads();
    if (threadIdx.x == 0) tx ? mbarrier_arrive_expect_tx(&bar, 64) : mbarrier_arrive(&bar);
    while (!mbarrier_try_wait_parity(&bar, 0)) {}
}

__global__ void die_mbar_uninit_kernel(void) {
    __shared__ __align__(8) uint64_t bar;
    mbarrier_arrive(&bar);
}

__global__ void die_tma_never_waited_kernel(const __grid_constant__ CUtensorMap map) {
    __shared__ __align__(8) uint64_t bar;
    DYNAMIC_SHARED(unsigned char, smem);
    if (threadIdx.x == 0) {
        mbarrier_init(&bar, 1);
        mbarrier_arrive_expect_tx(&bar, 2048);
        tma_load_2d(align_1024(smem), &map, 0, 0, &bar);
    }
}

// FlashAttention-3's split over-asked: 32 + 2 x 240 registers per lane where the block holds 168
// (65536 / 384): the consumers' .inc waits forever (a GPU hangs; the host runtime names it).
__global__ void die_setmaxnreg_pool_kernel(void) {
    if (threadIdx.x < 128) setmaxnreg_dec<32>();
    else setmaxnreg_inc<240>();
}
__global__ void die_setmaxnreg_mixed_kernel(void) {
    if (threadIdx.x == 77) setmaxnreg_dec<40>();
    else setmaxnreg_inc<240>();
}

__global__ void die_wgmma_no_fence_kernel(void) {
    DYNAMIC_SHARED(unsigned char, smem);
    float d[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    uint64_t desc = smem_desc(align_1024(smem), 16, 1024, 128);
    wgmma_m64k16_bf16<16, 0, 0>(d, desc, desc, 0);
}

__global__ void die_wgmma_pending_kernel(void) {
    DYNAMIC_SHARED(unsigned char, smem);
    float d[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    uint64_t desc = smem_desc(align_1024(smem), 16, 1024, 128);
    wgmma_fence();
    wgmma_m64k16_bf16<16, 0, 0>(d, desc, desc, 0);
    wgmma_commit();
}

// The A registers of a wgmma in flight overwritten before its wait (the overlapped forward must
// pack the next tile's P only after the P V wgmmas of this one have completed).
__global__ void die_wgmma_rs_changed_kernel(void) {
    DYNAMIC_SHARED(unsigned char, smem);
    float d[32];
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    uint32_t a[4] = {0, 0, 0, 0};
    uint64_t desc = smem_desc(align_1024(smem), 16, 1024, 128);
    wgmma_fence();
    wgmma_m64n64k16_bf16_rs<0>(d, a, desc, 0);
    wgmma_commit();
    a[threadIdx.x % 4] = 0x3f803f80u;
    wgmma_wait<0>();
}

__global__ void die_bulk_pending_kernel(const __grid_constant__ CUtensorMap map) {
    DYNAMIC_SHARED(unsigned char, smem);
    if (threadIdx.x == 0) {
        tma_reduce_add_2d(&map, align_1024(smem), 0, 0);
        bulk_commit();
    }
}

__global__ void die_named_count_kernel(void) {
    if (threadIdx.x < 64) named_barrier_sync(3, 128);
    else named_barrier_sync(3, 64);
}

static int die_sm90(const char* what) {
    if (!strcmp(what, "mbar-never")) LAUNCH(die_mbar_never_kernel, 1, 32, 0, 0, 0);
    else if (!strcmp(what, "mbar-never-tx")) LAUNCH(die_mbar_never_kernel, 1, 32, 0, 0, 1);
    else if (!strcmp(what, "mbar-uninit")) LAUNCH(die_mbar_uninit_kernel, 1, 32, 0, 0);
    else if (!strcmp(what, "tma-never-waited")) {
        Tma s;
        __align__(64) CUtensorMap map;
        if (!tma_init(&s) || tma_encode(s.enc, &map, s.global, TMA_PITCH * 2, 64, 16, CU_TENSOR_MAP_SWIZZLE_128B))
            return 2;
        LAUNCH(die_tma_never_waited_kernel, 1, 32, 4096, 0, map);
    } else if (!strcmp(what, "tma-inner-start")) {   // c0 = 3: 6 bytes into the row (a GPU faults)
        Tma s;
        if (!tma_init(&s)) return 2;
        tma_case(&s, 1, 1, 16, 16, 3, 5, 0);
        return 1;
    } else if (!strcmp(what, "tma-store-negative")) {   // c0 = -4: a store before the tensor (a GPU faults)
        TmaEncodeTiledFn enc = tma_encode_tiled_fn();
        if (!enc) return 2;
        tma_store_case(enc, 3, -4, 3, 0);
        return 1;
    } else if (!strcmp(what, "setmaxnreg-mixed")) LAUNCH(die_setmaxnreg_mixed_kernel, 1, 128, 0, 0);
    else if (!strcmp(what, "setmaxnreg-pool")) LAUNCH(die_setmaxnreg_pool_kernel, 1, 384, 0, 0);
    else if (!strcmp(what, "named-count")) LAUNCH(die_named_count_kernel, 1, 128, 0, 0);
    else if (!strcmp(what, "bulk-pending")) {
        float* d;
        CUDA_CHECK(cudaMalloc(&d, ST_W * ST_H * 4));
        __align__(64) CUtensorMap map;
        cuuint64_t dim[2] = {ST_W, ST_H}, stride[1] = {ST_W * 4};
        cuuint32_t box[2] = {ST_B0, ST_B1}, estride[2] = {1, 1};
        if (tma_encode_tiled_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d, dim, stride, box, estride,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return 2;
        LAUNCH(die_bulk_pending_kernel, 1, 32, 2048, 0, map);
    } else if (!strcmp(what, "wgmma-no-fence")) LAUNCH(die_wgmma_no_fence_kernel, 1, 128, 3072, 0);
    else if (!strcmp(what, "wgmma-pending")) LAUNCH(die_wgmma_pending_kernel, 1, 128, 3072, 0);
    else if (!strcmp(what, "wgmma-rs-changed")) LAUNCH(die_wgmma_rs_changed_kernel, 1, 128, 9216, 0);
    else return -1;
    return 0;
}
