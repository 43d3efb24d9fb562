// The Hopper (sm_90a) PTX twins of model/cuda_ptx_sm90.cuh (host_ptx_sm90.h): mbarrier, TMA
// (cuTensorMapEncodeTiled + cp.async.bulk.tensor.2d), setmaxnreg and the async-proxy fences.
// Named barriers are in block_exec.cpp (they suspend fibers).
//
// State is per running block, on the OS thread that runs it (one block at a time per OS thread):
// the block's mbarriers by address, the TMA copies not yet landed, and the setmaxnreg calls of
// each thread. cuda_host_ptx_block_begin clears it; cuda_host_ptx_block_end checks what is left.
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <cstdlib>
#include <vector>

// --- Per-block state -------------------------------------------------------------------------------

typedef struct {
    const uint64_t* addr;
    unsigned expected;   // the arrival count of every phase (mbarrier.init)
    unsigned pending;    // arrivals the current phase still needs
    long long tx;        // transaction bytes expected and not completed (may go below 0 transiently)
    unsigned long long phase;  // completed phases; the current phase's parity is phase & 1
} MBar;

typedef struct {
    const uint64_t* bar;
    unsigned char* dst;
    CUtensorMap map;  // a copy: the kernel's parameter may be gone when the copy lands
    int c[3];         // the box's start (c[2] = 0 for a rank-2 map)
    unsigned bytes;
} TmaCopy;

static thread_local std::vector<MBar> tl_mbar;
static thread_local std::vector<TmaCopy> tl_tma;
static thread_local unsigned long long tl_mbar_progress;  // arrivals and completions in the block
// try_wait: per thread, how many times in a row it found its phase incomplete with no progress.
static thread_local std::vector<long> tl_wait_spins;
static thread_local std::vector<unsigned long long> tl_wait_seen;
// setmaxnreg: per thread, its calls so far; per warpgroup, the calls (+n inc, -n dec) in order.
static thread_local std::vector<int> tl_reg_calls;
static thread_local std::vector<std::vector<int>> tl_reg_wg;
// The block's register pool: each thread's count (setmaxnreg moves it), and how often a count has
// changed (the waits of setmaxnreg.inc see progress by it).
static thread_local std::vector<int> tl_reg_now;
static thread_local unsigned long long tl_reg_moves;

static void wg_block_begin(void);
static void wg_block_end(void);
static void bulk_block_begin(void);
static void bulk_block_end(void);

void cuda_host_ptx_block_begin(void) {
    tl_mbar.clear();
    tl_tma.clear();
    tl_mbar_progress = 0;
    tl_wait_spins.clear();
    tl_wait_seen.clear();
    tl_reg_calls.clear();
    tl_reg_wg.clear();
    tl_reg_now.clear();
    tl_reg_moves = 0;
    wg_block_begin();
    bulk_block_begin();
}

static void failf(const char* what, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(const char* what, const char* fmt, ...) {
    char msg[768], where[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cuda_host_where(where, sizeof where, what);
    fail_msg("%s: %s (%s)", what, msg, where);
}

// --- mbarrier ----------------------------------------------------------------------------------------

enum { MBAR_MAX_COUNT = (1 << 20) - 1, MBAR_MAX_TX = (1 << 20) - 1 };

static MBar* mbar_find(const uint64_t* bar, const char* what) {
    for (size_t i = 0; i < tl_mbar.size(); i++)
        if (tl_mbar[i].addr == bar) return &tl_mbar[i];
    failf(what, "%p is not an mbarrier of this block (mbarrier.init it first, in shared memory)", (const void*)bar);
    return NULL;
}

static void mbar_check_complete(MBar* m) {
    if (m->pending == 0 && m->tx == 0) {  // the phase completes: the next one starts
        m->phase++;
        m->pending = m->expected;
    }
    tl_mbar_progress++;
}

void cuda_host_mbarrier_init(uint64_t* bar, unsigned count) {
    const char* what = "mbarrier.init";
    if ((uintptr_t)bar % 8 || !cuda_host_in_shared(bar, 8))
        failf(what, "%p is not 8 aligned bytes of the block's shared memory", (void*)bar);
    if (count < 1 || count > MBAR_MAX_COUNT) failf(what, "count %u is not in [1, 2^20 - 1]", count);
    for (size_t i = 0; i < tl_tma.size(); i++)
        if (tl_tma[i].bar == bar) failf(what, "mbarrier %p still has a TMA copy in flight", (void*)bar);
    MBar m = {bar, count, count, 0, 0};
    for (size_t i = 0; i < tl_mbar.size(); i++)
        if (tl_mbar[i].addr == bar) {
            tl_mbar[i] = m;
            return;
        }
    tl_mbar.push_back(m);
}

static void mbar_add_tx(MBar* m, long long tx, const char* what) {
    m->tx += tx;
    if (m->tx > MBAR_MAX_TX || m->tx < -MBAR_MAX_TX)
        failf(what, "mbarrier %p's transaction count %lld is outside [-(2^20 - 1), 2^20 - 1]",
              (const void*)m->addr, m->tx);
}

uint64_t cuda_host_mbarrier_arrive(uint64_t* bar, unsigned tx) {
    const char* what = tx ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive";
    MBar* m = mbar_find(bar, what);
    uint64_t token = m->phase;
    if (tx) mbar_add_tx(m, tx, what);
    if (m->pending == 0)  // only possible while the phase waits for transaction bytes
        failf(what, "mbarrier %p (count %u) has all arrivals of phase %llu and waits for %lld transaction "
              "bytes; an arrival more is undefined", (void*)bar, m->expected, m->phase, m->tx);
    m->pending--;
    mbar_check_complete(m);
    return token;
}

void cuda_host_mbarrier_expect_tx(uint64_t* bar, unsigned tx) {
    MBar* m = mbar_find(bar, "mbarrier.expect_tx");
    mbar_add_tx(m, tx, "mbarrier.expect_tx");
}

void cuda_host_mbarrier_complete_tx(uint64_t* bar, unsigned tx) {
    MBar* m = mbar_find(bar, "mbarrier.complete_tx");
    mbar_add_tx(m, -(long long)tx, "mbarrier.complete_tx");
    mbar_check_complete(m);
}

static void tma_land(const TmaCopy* c);

// Lands the TMA copies pending on bar, in issue order: the data appears, then the bytes complete.
static void mbar_land(const uint64_t* bar) {
    size_t kept = 0;
    for (size_t i = 0; i < tl_tma.size(); i++) {
        if (tl_tma[i].bar != bar) {
            tl_tma[kept++] = tl_tma[i];
            continue;
        }
        TmaCopy c = tl_tma[i];
        tma_land(&c);
        MBar* m = mbar_find(bar, "cp.async.bulk.tensor");
        mbar_add_tx(m, -(long long)c.bytes, "cp.async.bulk.tensor");
        mbar_check_complete(m);
    }
    tl_tma.resize(kept);
}

enum { MBAR_STALL_YIELDS = 1 << 16 };

int cuda_host_mbarrier_try_wait_parity(uint64_t* bar, unsigned parity) {
    const char* what = "mbarrier.try_wait.parity";
    if (parity > 1) failf(what, "parity %u is not 0 or 1", parity);
    mbar_find(bar, what);
    // Copies pending on bar land only after the block's other threads have run to their next
    // wait or barrier: a thread that reads the tile without waiting itself reads the poison.
    for (size_t i = 0; i < tl_tma.size(); i++)
        if (tl_tma[i].bar == bar) {
            cuda_host_yield(what);
            break;
        }
    mbar_land(bar);
    MBar* m = mbar_find(bar, what);
    // The phase with this parity has completed when the current phase's parity differs.
    if ((m->phase & 1) != parity) return 1;
    int t = cuda_host_current_thread(what);
    if ((size_t)t >= tl_wait_spins.size()) {
        tl_wait_spins.resize((size_t)t + 1, 0);
        tl_wait_seen.resize((size_t)t + 1, 0);
    }
    if (tl_wait_seen[t] != tl_mbar_progress) {
        tl_wait_seen[t] = tl_mbar_progress;
        tl_wait_spins[t] = 0;
    }
    if (++tl_wait_spins[t] > MBAR_STALL_YIELDS)
        failf(what, "mbarrier wait that never ends: mbarrier %p is in phase %llu (parity %u) with %u of "
              "its %u arrivals and %lld transaction bytes outstanding, and no thread of the block has "
              "arrived or completed bytes on any mbarrier during %d waits", (void*)bar, m->phase,
              (unsigned)(m->phase & 1), m->pending, m->expected, m->tx, MBAR_STALL_YIELDS);
    cuda_host_yield(what);  // the threads that arrive run now
    m = mbar_find(bar, what);
    return (m->phase & 1) != parity;
}

// --- Named barriers are in block_exec.cpp; setmaxnreg and fences ------------------------------------

// The registers per thread a block of `threads` threads starts with: what ptxas allocates for the
// kernels that use setmaxnreg (__launch_bounds__(threads, 1): all 65536, in multiples of 8, at most
// 248, the largest multiple of 8 a thread can hold). A kernel that uses fewer starts with fewer, so
// a split that fits this pool is necessary, and one that overflows it waits forever on any GPU.
static int reg_launch_count(unsigned threads) {
    int r = (int)(65536 / threads) / 8 * 8;
    return r > 248 ? 248 : r;
}

void cuda_host_setmaxnreg(int inc, unsigned n) {
    const char* what = inc ? "setmaxnreg.inc" : "setmaxnreg.dec";
    if (n < 24 || n > 256 || n % 8) failf(what, "%u registers is not a multiple of 8 in [24, 256]", n);
    const CudaHostLaunch* l = cuda_host_current_launch(what);
    unsigned threads = l->block.x * l->block.y * l->block.z;
    if (threads % 128) failf(what, "the block's %u threads are not whole warpgroups of 128", threads);
    int t = cuda_host_current_thread(what), wg = t / 128;
    if (tl_reg_calls.size() < threads) tl_reg_calls.resize(threads, 0);
    if (tl_reg_wg.size() < threads / 128) tl_reg_wg.resize(threads / 128);
    int k = tl_reg_calls[t]++, v = inc ? (int)n : -(int)n;
    std::vector<int>& calls = tl_reg_wg[wg];
    if ((size_t)k == calls.size()) calls.push_back(v);
    else if (calls[k] != v)  // .sync.aligned: the whole warpgroup executes the same instruction
        failf(what, "call %d of this thread is setmaxnreg.%s %u, but another thread of warpgroup %d made "
              "setmaxnreg.%s %d its call %d; the 128 threads of a warpgroup must agree", k + 1,
              inc ? "inc" : "dec", n, wg, calls[k] > 0 ? "inc" : "dec", calls[k] > 0 ? calls[k] : -calls[k], k + 1);
    // The pool: .dec gives registers back to the block, .inc takes them from what the other warps
    // gave back, waiting until enough are there.
    const int start = reg_launch_count(threads);
    if (tl_reg_now.size() < threads) tl_reg_now.resize(threads, start);
    const int now = tl_reg_now[t];
    if (inc) {
        long spins = 0;
        unsigned long long seen = tl_reg_moves;
        for (;;) {
            long long held = 0;
            for (unsigned i = 0; i < threads; i++) held += tl_reg_now[i];
            if (held - now + (long long)n <= (long long)threads * start) break;
            if (tl_reg_moves != seen) seen = tl_reg_moves, spins = 0;
            if (++spins > MBAR_STALL_YIELDS) {
                long long want = 0;
                for (size_t w = 0; w < tl_reg_wg.size(); w++) want += 128LL * (tl_reg_wg[w].empty() ? start : std::abs(tl_reg_wg[w].back()));
                failf(what, "%u registers never become free: the block started with %d per thread (%lld in all) "
                      "and its warpgroups ask for %lld (their last setmaxnreg counts); a GPU waits here forever "
                      "(hint: the counts of the warpgroups must sum to at most %d per lane)", n, start,
                      (long long)threads * start, want, start * (int)(threads / 128));
            }
            cuda_host_yield(what);
        }
    }
    tl_reg_now[t] = (int)n;
    tl_reg_moves++;
}

void cuda_host_fence_proxy_async(void) { cuda_host_current_launch("fence.proxy.async"); }

void cuda_host_ptx_block_end(void) {
    wg_block_end();
    bulk_block_end();
    if (!tl_tma.empty()) {
        const TmaCopy* c = &tl_tma[0];
        const CudaHostLaunch* l = cuda_host_current_launch("cp.async.bulk.tensor");
        fail_msg("cp.async.bulk.tensor: block (%u,%u,%u) of kernel %s (launched at %s:%d) ended with %zu TMA "
                 "cop%s never waited for (the first: %u bytes to %p, mbarrier %p); on a GPU they would land "
                 "in shared memory that may belong to another block (hint: mbarrier_try_wait_parity on its "
                 "mbarrier before using the tile)", blockIdx.x, blockIdx.y, blockIdx.z, l->name, l->file,
                 l->line, tl_tma.size(), tl_tma.size() == 1 ? "y" : "ies", c->bytes, (void*)c->dst,
                 (const void*)c->bar);
    }
    for (size_t w = 0; w < tl_reg_wg.size(); w++)
        for (size_t t = 128 * w; t < 128 * w + 128 && t < tl_reg_calls.size(); t++)
            if ((size_t)tl_reg_calls[t] != tl_reg_wg[w].size()) {
                const CudaHostLaunch* l = cuda_host_current_launch("setmaxnreg");
                fail_msg("setmaxnreg: in block (%u,%u,%u) of kernel %s (launched at %s:%d), thread %zu made %d "
                         "setmaxnreg calls and warpgroup %zu %zu; all 128 threads of a warpgroup must execute "
                         "each one (.sync.aligned)", blockIdx.x, blockIdx.y, blockIdx.z, l->name, l->file,
                         l->line, t, tl_reg_calls[t], w, tl_reg_wg[w].size());
            }
}

// --- Tensor maps -------------------------------------------------------------------------------------

// The opaque words: magic, address, dims[5], byte strides of dims 1..4, box (12 bits each),
// and the packed enums.
static const uint64_t TMAP_MAGIC = 0x544d4150686f7374ull;  // "TMAPhost"
typedef struct {
    uint64_t magic;
    uint64_t addr;
    uint64_t dim[5];
    uint64_t stride[4];
    uint64_t box;     // box[i] in bits 12 i ..
    uint64_t esize;   // bytes per element
    uint64_t rank, swizzle, dtype;
} TmapFields;
static_assert(sizeof(TmapFields) <= sizeof(CUtensorMap), "tensor map fields fit the opaque words");

static CUresult tmap_refuse(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static CUresult tmap_refuse(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda host runtime: cuTensorMapEncodeTiled: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return CUDA_ERROR_INVALID_VALUE;
}

static unsigned dtype_size(CUtensorMapDataType t) {
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: case CU_TENSOR_MAP_DATA_TYPE_INT32: case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ: case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: case CU_TENSOR_MAP_DATA_TYPE_INT64: case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    }
    return 0;
}

CUresult cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType,
                                cuuint32_t tensorRank, void* globalAddress, const cuuint64_t* globalDim,
                                const cuuint64_t* globalStrides, const cuuint32_t* boxDim,
                                const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                CUtensorMapFloatOOBfill oobFill) {
    // The driver's documented requirements (CUDA driver API, cuTensorMapEncodeTiled).
    if (!tensorMap || (uintptr_t)tensorMap % 64) return tmap_refuse("tensorMap %p must be 64-byte aligned", (void*)tensorMap);
    unsigned es = dtype_size(tensorDataType);
    if (!es) return tmap_refuse("data type %d is not supported", (int)tensorDataType);
    if (tensorRank < 1 || tensorRank > 5) return tmap_refuse("rank %u is not in [1, 5]", tensorRank);
    if (!globalAddress || (uintptr_t)globalAddress % 16)
        return tmap_refuse("globalAddress %p must be 16-byte aligned", globalAddress);
    if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
        return tmap_refuse("interleave %d: only CU_TENSOR_MAP_INTERLEAVE_NONE is supported by the host runtime", (int)interleave);
    if ((unsigned)swizzle > CU_TENSOR_MAP_SWIZZLE_128B) return tmap_refuse("swizzle %d is not supported", (int)swizzle);
    if ((unsigned)l2Promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B) return tmap_refuse("l2Promotion %d is invalid", (int)l2Promotion);
    if (oobFill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        return tmap_refuse("oobFill %d: only CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE (zeros) is supported by the host runtime", (int)oobFill);
    TmapFields f;
    memset(&f, 0, sizeof f);
    for (unsigned i = 0; i < tensorRank; i++) {
        if (globalDim[i] < 1 || globalDim[i] > (1ull << 32))
            return tmap_refuse("globalDim[%u] = %llu is not in [1, 2^32]", i, (unsigned long long)globalDim[i]);
        if (boxDim[i] < 1 || boxDim[i] > 256) return tmap_refuse("boxDim[%u] = %u is not in [1, 256]", i, boxDim[i]);
        if (elementStrides[i] != 1)
            return tmap_refuse("elementStrides[%u] = %u: only 1 is supported by the host runtime", i, elementStrides[i]);
        f.dim[i] = globalDim[i];
        f.box |= (uint64_t)boxDim[i] << 12 * i;
    }
    for (unsigned i = 0; i + 1 < tensorRank; i++) {
        if (globalStrides[i] % 16 || globalStrides[i] >= (1ull << 40))
            return tmap_refuse("globalStrides[%u] = %llu is not a multiple of 16 below 2^40", i,
                               (unsigned long long)globalStrides[i]);
        f.stride[i] = globalStrides[i];
    }
    unsigned inner = boxDim[0] * es;
    if (inner % 16) return tmap_refuse("boxDim[0] * element size = %u bytes is not a multiple of 16", inner);
    unsigned span = swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                  : swizzle == CU_TENSOR_MAP_SWIZZLE_128B ? 128 : 0;
    if (span && inner > span)
        return tmap_refuse("the box's inner dimension is %u bytes, more than the swizzle's span of %u bytes", inner, span);
    f.magic = TMAP_MAGIC;
    f.addr = (uintptr_t)globalAddress;
    f.esize = es;
    f.rank = tensorRank;
    f.swizzle = (uint64_t)swizzle;
    f.dtype = (uint64_t)tensorDataType;
    memset(tensorMap, 0, sizeof *tensorMap);
    memcpy(tensorMap, &f, sizeof f);
    return CUDA_SUCCESS;
}

// --- cp.async.bulk.tensor.2d ---------------------------------------------------------------------

static unsigned box_dim(const TmapFields* f, int i) { return (unsigned)(f->box >> 12 * i & 0xfff); }

// The swizzled shared-memory address (PTX ISA, "Tensor-map swizzling modes"; CUTLASS Swizzle<B,4,3>):
// the 16-byte chunk index, address bits [4, 4 + B), is XORed with address bits [7, 7 + B);
// B = 1, 2, 3 for 32, 64, 128 bytes.
static uintptr_t swizzle_address(uintptr_t a, unsigned swizzle) {
    unsigned bits = swizzle;  // CU_TENSOR_MAP_SWIZZLE_32B = 1, 64B = 2, 128B = 3
    uintptr_t mask = ((uintptr_t)1 << bits) - 1;
    return a ^ ((a >> 7 & mask) << 4);
}

// The box's extent in dimension i (1 past the map's rank: a rank-2 map is one plane).
static unsigned box_extent(const TmapFields* f, int i) { return (uint64_t)i < f->rank ? box_dim(f, i) : 1; }

// Element (x, y, z) of the box at c: its global address in *g, and whether it lies inside the
// tensor (out-of-bounds elements are zero-filled by loads and skipped by stores).
static bool box_element(const TmapFields* f, const int c[3], unsigned x, unsigned y, unsigned z, unsigned char** g) {
    const long long gx = (long long)c[0] + x, gy = (long long)c[1] + y, gz = (long long)c[2] + z;
    const long long dz = f->rank > 2 ? (long long)f->dim[2] : 1;
    *g = (unsigned char*)(uintptr_t)f->addr + (size_t)gz * (f->rank > 2 ? f->stride[1] : 0) + (size_t)gy * f->stride[0] +
         (size_t)gx * f->esize;
    return gx >= 0 && gx < (long long)f->dim[0] && gy >= 0 && gy < (long long)f->dim[1] && gz >= 0 && gz < dz;
}

// Box element (x, y, z) sits at byte ((z b1 + y) b0 + x) * esize of the tile, swizzled.
static unsigned char* box_smem(const TmapFields* f, const unsigned char* tile, unsigned x, unsigned y, unsigned z) {
    const size_t i = ((size_t)z * box_extent(f, 1) + y) * box_extent(f, 0) + x;
    return (unsigned char*)swizzle_address((uintptr_t)tile + i * f->esize, (unsigned)f->swizzle);
}

static void tma_land(const TmaCopy* c) {
    TmapFields f;
    memcpy(&f, &c->map, sizeof f);
    const unsigned es = (unsigned)f.esize;
    for (unsigned z = 0; z < box_extent(&f, 2); z++)
        for (unsigned y = 0; y < box_extent(&f, 1); y++)
            for (unsigned x = 0; x < box_extent(&f, 0); x++) {
                unsigned char* g;
                unsigned char* a = box_smem(&f, c->dst, x, y, z);
                if (box_element(&f, c->c, x, y, z, &g)) memcpy(a, g, es);
                else memset(a, 0, es);  // out of bounds: zeros (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
            }
}

// The box's first element must start a 16-byte unit of its row: c0 times the element size a
// multiple of 16 (negative c0 too). An H100 faults with an illegal instruction otherwise, for every
// swizzle and for loads and stores alike (measured: results/gpu/h100-2026-11-26T1835-999d6bc, tma_probe.md).
static void check_inner_start(const char* what, const TmapFields* f, int c0) {
    const long long at = (long long)c0 * (long long)f->esize;
    if (at % 16 != 0)
        failf(what, "the innermost start coordinate c0 = %d is %lld bytes into the row, not a multiple of 16 "
              "(a GPU faults: illegal instruction)", c0, at);
}

// The map of a rank-`rank` instruction, checked.
static TmapFields tmap_of(const char* what, const CUtensorMap* map, unsigned rank) {
    TmapFields f;
    memcpy(&f, map, sizeof f);
    if (f.magic != TMAP_MAGIC) failf(what, "the tensor map %p was not made by cuTensorMapEncodeTiled", (const void*)map);
    if (f.rank != rank) failf(what, "the tensor map has rank %llu, not %u", (unsigned long long)f.rank, rank);
    return f;
}

static void tma_load(const char* what, void* dst_shared, const CUtensorMap* map, unsigned rank, const int c[3],
                     uint64_t* bar) {
    TmapFields f = tmap_of(what, map, rank);
    check_inner_start(what, &f, c[0]);
    const unsigned b0 = box_extent(&f, 0), b1 = box_extent(&f, 1), b2 = box_extent(&f, 2);
    const unsigned bytes = b0 * b1 * b2 * (unsigned)f.esize;
    if ((uintptr_t)dst_shared % 128 || !cuda_host_in_shared(dst_shared, bytes))
        failf(what, "dst %p must be 128-byte aligned with the box's %u bytes in the block's shared memory",
              dst_shared, bytes);
    mbar_find(bar, what);
    // The part of each box row inside the tensor must lie in one cudaMalloc allocation (a GPU
    // faults otherwise).
    const long long x0 = c[0] < 0 ? 0 : c[0], x1 = std::min((long long)c[0] + b0, (long long)f.dim[0]);
    for (unsigned z = 0; z < b2 && x1 > x0; z++)
        for (unsigned y = 0; y < b1; y++) {
            unsigned char* g;
            if (!box_element(&f, c, (unsigned)(x0 - c[0]), y, z, &g)) continue;
            if (cuda_host_mem_kind(g, (size_t)(x1 - x0) * f.esize) != CUDA_HOST_MEM_DEVICE)
                failf(what, "box (%d, %d, %d) row (%u, %u) reads %p, which is not inside one cudaMalloc allocation",
                      c[0], c[1], c[2], y, z, (void*)g);
        }
    // Poison until the copy lands at a wait on bar: reading the tile without waiting fails.
    memset(dst_shared, 0xff, bytes);
    TmaCopy cp;
    cp.bar = bar;
    cp.dst = (unsigned char*)dst_shared;
    cp.map = *map;
    memcpy(cp.c, c, sizeof cp.c);
    cp.bytes = bytes;
    tl_tma.push_back(cp);
}

void cuda_host_tma_load_2d(void* dst_shared, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
    const int c[3] = {c0, c1, 0};
    tma_load("cp.async.bulk.tensor.2d", dst_shared, map, 2, c, bar);
}
void cuda_host_tma_load_3d(void* dst_shared, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
    const int c[3] = {c0, c1, c2};
    tma_load("cp.async.bulk.tensor.3d", dst_shared, map, 3, c, bar);
}

// --- wgmma: descriptors and the asynchronous warpgroup MMA -----------------------------------------

uint32_t cuda_host_smem_desc_addr(const void* p) {
    const CudaHostLaunch* l = cuda_host_current_launch("wgmma descriptor");
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)cuda_host_dynamic_smem();
    if (a < base || a - base >= l->shmem)
        failf("wgmma descriptor", "%p is not in the block's dynamic shared memory (the host runtime describes "
              "only that)", p);
    return (uint32_t)(a - base);
}

CudaHostSmemDesc cuda_host_smem_desc_decode(uint64_t desc) {
    static const unsigned swizzles[4] = {0, 128, 64, 32};
    CudaHostSmemDesc d;
    d.addr = (uint32_t)(desc & 0x3fff) << 4;
    d.lbo = (uint32_t)(desc >> 16 & 0x3fff) << 4;
    d.sbo = (uint32_t)(desc >> 32 & 0x3fff) << 4;
    d.base_offset = (unsigned)(desc >> 49 & 7);
    d.swizzle = swizzles[desc >> 62];
    return d;
}

// CUTLASS's canonical GMMA layouts (cute/atom/mma_traits_sm90_gmma.hpp), in bytes, W the swizzle
// width: K-major none: 8 rows of 16 bytes, next 16 bytes of k at LBO, next 8 rows at SBO; K-major
// swizzled: rows W bytes apart, next 8 rows at SBO (LBO unused); MN-major none: 16 bytes of mn,
// 8 k rows 16 bytes apart, next 16 bytes of mn at SBO, next 8 k at LBO; MN-major swizzled: W bytes
// of mn, k rows W bytes apart, next W bytes of mn at LBO, next 8 k at SBO. Then the swizzle XORs
// address bits [4, 4 + B) with [7, 7 + B), B = log2(W / 16).
// (Shifts and masks, not / and %: W is 32, 64 or 128 bytes, and the wgmma twin reads every operand
// row of every wgmma through this.) The offset before the swizzle; k's part is a sum of its own.
static uint32_t swizzle_bits(uint32_t w) { return w == 128 ? 3 : w == 64 ? 2 : w == 32 ? 1 : 0; }

static uint32_t smem_desc_offset(const CudaHostSmemDesc* d, int mn_major, int mn, int k, int elem_bytes) {
    const uint32_t w = d->swizzle, bits = swizzle_bits(w);
    const uint32_t m = (uint32_t)mn, kk = (uint32_t)k;
    uint32_t a = d->addr;
    if (!mn_major) {
        uint32_t kb = kk * (uint32_t)elem_bytes;
        if (!w) a += (m & 7) * 16 + (m >> 3) * d->sbo + (kb & 15) + (kb >> 4) * d->lbo;
        else a += (m & 7) * w + (m >> 3) * d->sbo + kb;
    } else {
        uint32_t mb = m * (uint32_t)elem_bytes;
        if (!w) a += (mb & 15) + (mb >> 4) * d->sbo + (kk & 7) * 16 + (kk >> 3) * d->lbo;
        else a += (mb & (w - 1)) + (mb >> (bits + 4)) * d->lbo + (kk & 7) * w + (kk >> 3) * d->sbo;
    }
    return a;
}

// A consumer of the overlapped Hopper forward has the S wgmmas of one tile and the P V wgmmas of
// the previous one in flight (32 at HS 128).
enum { WG_MAX_PENDING = 64 };

typedef struct {
    float* d;
    int n, scale_d, tnsp_a, tnsp_b, chained;
    int rs, wg, idx;  // A from registers: the warpgroup's issue idx holds them (tl_wg_aregs)
    const uint32_t* areg;  // this thread's A registers, which must keep their values until the wait
    uint64_t desc_a, desc_b;
    unsigned group;
    float c[128];  // the accumulator at issue (unless chained to an earlier pending op on d)
} WgOp;

typedef struct {
    int head, n;  // the pending operations are op[head, head + n), oldest first
    unsigned open;
    int fenced;
    std::vector<WgOp> op;  // grown as needed up to WG_MAX_PENDING, kept from block to block
} WgQueue;

static thread_local std::vector<WgQueue> tl_wg;
// Per warpgroup, each issue's operands (all 128 threads must give the same).
typedef struct {
    uint64_t desc_a, desc_b;
    int n, flags;
} WgIssue;
static thread_local std::vector<std::vector<WgIssue>> tl_wg_issues;
static thread_local std::vector<int> tl_wg_count;
// Per warpgroup and issue with A from registers: the 128 threads' 4 registers (thread-major).
static thread_local std::vector<std::vector<std::vector<uint32_t>>> tl_wg_aregs;

enum { WG_RS_STALL_YIELDS = 1 << 16 };

static float bf16_bits(uint32_t v) {
    uint32_t u = (v & 0xffffu) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static WgQueue* wg_queue(const char* what) {
    const CudaHostLaunch* l = cuda_host_current_launch(what);
    unsigned threads = l->block.x * l->block.y * l->block.z;
    if (threads % 128) failf(what, "the block's %u threads are not whole warpgroups of 128", threads);
    if (tl_wg.size() < threads) tl_wg.resize(threads);  // new queues are empty (value-initialized)
    return &tl_wg[(size_t)cuda_host_current_thread(what)];
}

void cuda_host_wgmma_fence(void) { wg_queue("wgmma.fence")->fenced = 1; }
void cuda_host_wgmma_commit(void) { wg_queue("wgmma.commit_group")->open++; }

// The bf16 at byte addr of the block's dynamic shared memory smem.
static float smem_bf16(const unsigned char* smem, uint32_t addr) {
    uint16_t v;
    memcpy(&v, smem + addr, 2);
    return bf16_bits(v);
}

// Operand row mn's 16 k values of a wgmma's shared-memory operand. K-major: k 0-7 and k 8-15 each
// fill one 16-byte chunk, which the swizzle moves whole, so two look-ups give all 16 addresses.
// MN-major: k adds a fixed stride (W, or 16 bytes unswizzled) within each 8 and SBO (LBO
// unswizzled) between the two 8s; each address is swizzled on its own.
static void smem_operand_row(const unsigned char* smem, const CudaHostSmemDesc* d, int mn_major, int mn, float v[16]) {
    const uint32_t w = d->swizzle, mask = (1u << swizzle_bits(w)) - 1;
    if (!mn_major) {
        for (int h = 0; h < 2; h++) {
            uint32_t a = smem_desc_offset(d, 0, mn, 8 * h, 2);
            a ^= (a >> 7 & mask) << 4;
            for (int k = 0; k < 8; k++) v[8 * h + k] = smem_bf16(smem, a + 2 * (uint32_t)k);
        }
        return;
    }
    const uint32_t base = smem_desc_offset(d, 1, mn, 0, 2), step = w ? w : 16, step8 = w ? d->sbo : d->lbo;
    for (int k = 0; k < 16; k++) {
        uint32_t a = base + (uint32_t)(k & 7) * step + (uint32_t)(k >> 3) * step8;
        v[k] = smem_bf16(smem, a ^ (a >> 7 & mask) << 4);
    }
}

// D = A B^T + C for this thread's fragment: warp w of the warpgroup has rows 16 w .. 16 w + 15,
// lane (g, t) = (lane / 4, lane % 4) has, for each 8 columns j, rows g, g + 8 and columns 2t, 2t + 1
// (mma.m16n8's C layout): d[4 j + i] = (16 w + g + 8 (i / 2), 8 j + 2 t + i % 2).
// With A from registers, row r = 16 w + g' + 8 hi and column k of A are in register 2 (k / 8) + hi
// of lane 4 g' + (k % 8) / 2 of warp w, in its low (k even) or high half; the wait yields until
// every thread of the warpgroup has issued the operation.
static void wg_compute(const WgOp* op, int thread) {
    int lane = thread % 32, w = thread % 128 / 32, g = lane / 4, t = lane % 4;
    CudaHostSmemDesc da = cuda_host_smem_desc_decode(op->desc_a), db = cuda_host_smem_desc_decode(op->desc_b);
    const uint32_t* regs = NULL;
    if (op->rs) {
        for (int spins = 0;; spins++) {
            int missing = -1;
            for (int i = 0; i < 128 && missing < 0; i++)
                if (tl_wg_count[(size_t)(128 * op->wg + i)] <= op->idx) missing = i;
            if (missing < 0) break;
            if (spins == WG_RS_STALL_YIELDS)
                failf("wgmma.wait_group", "thread %d of warpgroup %d never issued wgmma %d (A from registers), "
                      "which its other threads have: the 128 threads issue every wgmma together (.sync.aligned)",
                      missing, op->wg, op->idx + 1);
            cuda_host_yield("wgmma.wait_group");
        }
        regs = tl_wg_aregs[(size_t)op->wg][(size_t)op->idx].data();
        // The hardware reads A from the registers while the operation is in flight: a kernel that
        // reuses them before the wait multiplies whatever they hold by then.
        const uint32_t* mine = regs + 4 * (thread % 128);
        for (int i = 0; i < 4; i++)
            if (op->areg[i] != mine[i])
                failf("wgmma.wait_group", "A register %d of wgmma %d (A from registers) changed from 0x%08x to "
                      "0x%08x before its wgmma.wait_group; the hardware reads the registers while the operation "
                      "is in flight (hint: write them only after the wait)", i, op->idx + 1, mine[i], op->areg[i]);
    }
    const float* c = op->chained ? op->d : op->c;
    const unsigned char* smem = (const unsigned char*)cuda_host_dynamic_smem();
    // Each operand element this thread needs is read once: its two rows of A (g and g + 8 of the
    // warp's 16), then per 8 columns its two columns of B; every output sums over k in order.
    float a[2][16];
    for (int h = 0; h < 2; h++) {
        if (!regs) smem_operand_row(smem, &da, op->tnsp_a, 16 * w + g + 8 * h, a[h]);
        else
            for (int k = 0; k < 16; k++) {
                uint32_t r = regs[4 * (32 * w + 4 * g + k % 8 / 2) + 2 * (k / 8) + h];
                a[h][k] = bf16_bits(k % 2 ? r >> 16 : r);
            }
    }
    float out[128];
    for (int j = 0; j < op->n / 8; j++) {
        float b[2][16];
        for (int e = 0; e < 2; e++) smem_operand_row(smem, &db, op->tnsp_b, 8 * j + 2 * t + e, b[e]);
        // Output i is row g + 8 (i / 2), column 2 t + i % 2: four independent sums over k.
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        if (op->scale_d) s0 = c[4 * j], s1 = c[4 * j + 1], s2 = c[4 * j + 2], s3 = c[4 * j + 3];
        for (int k = 0; k < 16; k++) {
            s0 += a[0][k] * b[0][k];
            s1 += a[0][k] * b[1][k];
            s2 += a[1][k] * b[0][k];
            s3 += a[1][k] * b[1][k];
        }
        out[4 * j] = s0, out[4 * j + 1] = s1, out[4 * j + 2] = s2, out[4 * j + 3] = s3;
    }
    memcpy(op->d, out, (size_t)op->n / 2 * sizeof(float));
}

void cuda_host_wgmma_wait(int n) {
    const char* what = "wgmma.wait_group";
    if (n < 0 || n > 7) failf(what, "%d is not in [0, 7]", n);
    WgQueue* q = wg_queue(what);
    int thread = cuda_host_current_thread(what), done = 0;
    // The results land now: the operands are read from shared memory at the wait, so a kernel that
    // overwrites them earlier, or reads the accumulators before the wait, gets wrong values.
    WgOp* pending = q->op.data() + q->head;
    while (done < q->n && (unsigned long long)pending[done].group + (unsigned)n < q->open) wg_compute(&pending[done++], thread);
    q->head = done < q->n ? q->head + done : 0;
    q->n -= done;
    q->fenced = 0;
}

// One wgmma issued by this thread: A from shared memory (desc_a) or, with a, from registers.
static void wg_issue(float* d, int n, uint64_t desc_a, const uint32_t* a, uint64_t desc_b, int scale_d, int tnsp_a,
                     int tnsp_b) {
    const char* what = "wgmma.mma_async.m64nNk16.f32.bf16.bf16";
    if (n < 8 || n > 256 || n % 8) failf(what, "N = %d is not a multiple of 8 in [8, 256]", n);
    WgQueue* q = wg_queue(what);
    if (!q->fenced)
        failf(what, "no wgmma.fence since this thread's last wgmma.wait_group (or the kernel's start); the "
              "accumulator registers may not be ready for the async proxy");
    if (q->n == WG_MAX_PENDING) failf(what, "%d operations pending, the host runtime's limit", WG_MAX_PENDING);
    if ((size_t)(q->head + q->n) == q->op.size()) {  // no room after the pending operations
        if (q->head) {
            memmove(q->op.data(), q->op.data() + q->head, (size_t)q->n * sizeof q->op[0]);
            q->head = 0;
        } else {
            q->op.resize(q->op.empty() ? 8 : 2 * q->op.size());
        }
    }
    CudaHostSmemDesc descs[2] = {cuda_host_smem_desc_decode(desc_a), cuda_host_smem_desc_decode(desc_b)};
    for (int i = 0; i < 2; i++)
        if (descs[i].base_offset)
            failf(what, "descriptor %c has base offset %u; the host runtime supports 0 (1024-byte aligned "
                  "swizzle atoms)", "ab"[i], descs[i].base_offset);
    // Warpgroup-uniform operands (.sync.aligned).
    int thread = cuda_host_current_thread(what), wg = thread / 128;
    const CudaHostLaunch* l = cuda_host_current_launch(what);
    unsigned threads = l->block.x * l->block.y * l->block.z;
    if (tl_wg_count.size() < threads) tl_wg_count.resize(threads, 0);
    if (tl_wg_issues.size() < threads / 128) tl_wg_issues.resize(threads / 128);
    if (tl_wg_aregs.size() < threads / 128) tl_wg_aregs.resize(threads / 128);
    int idx = tl_wg_count[thread]++, flags = scale_d | tnsp_a << 1 | tnsp_b << 2 | (a != NULL) << 3;
    WgIssue mine = {desc_a, desc_b, n, flags};
    std::vector<WgIssue>& issues = tl_wg_issues[wg];
    if ((size_t)idx == issues.size()) issues.push_back(mine);
    else if (memcmp(&issues[idx], &mine, sizeof mine))
        failf(what, "issue %d: descriptors 0x%016llx, 0x%016llx, N %d, flags %d differ from another thread of "
              "warpgroup %d (0x%016llx, 0x%016llx, N %d, flags %d); the 128 threads must agree", idx + 1,
              (unsigned long long)desc_a, (unsigned long long)desc_b, n, flags, wg,
              (unsigned long long)issues[idx].desc_a, (unsigned long long)issues[idx].desc_b, issues[idx].n,
              issues[idx].flags);
    if (a) {   // this thread's A registers, in the warpgroup's table of this issue
        std::vector<std::vector<uint32_t>>& regs = tl_wg_aregs[(size_t)wg];
        if (regs.size() <= (size_t)idx) regs.resize((size_t)idx + 1);
        if (regs[(size_t)idx].empty()) regs[(size_t)idx].assign(4 * 128, 0);
        memcpy(&regs[(size_t)idx][(size_t)(4 * (thread % 128))], a, 4 * sizeof(uint32_t));
    }
    WgOp* pending = q->op.data() + q->head;
    WgOp* op = &pending[q->n++];
    op->d = d;
    op->n = n;
    op->rs = a != NULL;
    op->areg = a;
    op->wg = wg;
    op->idx = idx;
    op->scale_d = scale_d != 0;
    op->tnsp_a = tnsp_a != 0;
    op->tnsp_b = tnsp_b != 0;
    op->desc_a = desc_a;
    op->desc_b = desc_b;
    op->group = q->open;
    op->chained = 0;
    for (int i = 0; i < q->n - 1; i++)
        if (pending[i].d == d) op->chained = 1;  // accumulates onto an op in flight: C is its result
    if (!op->chained) memcpy(op->c, d, (size_t)n / 2 * sizeof(float));
    for (int i = 0; i < n / 2; i++) d[i] = __builtin_nanf("");  // in flight until the wait
}

void cuda_host_wgmma_bf16(float* d, int n, uint64_t desc_a, uint64_t desc_b, int scale_d, int tnsp_a, int tnsp_b) {
    wg_issue(d, n, desc_a, NULL, desc_b, scale_d, tnsp_a, tnsp_b);
}

void cuda_host_wgmma_bf16_rs(float* d, int n, const uint32_t* a, uint64_t desc_b, int scale_d, int tnsp_b) {
    wg_issue(d, n, 0, a, desc_b, scale_d, 0, tnsp_b);
}

static void wg_block_begin(void) {
    for (size_t i = 0; i < tl_wg.size(); i++) tl_wg[i].head = 0, tl_wg[i].n = 0, tl_wg[i].open = 0, tl_wg[i].fenced = 0;
    tl_wg_issues.clear();
    tl_wg_count.clear();
    tl_wg_aregs.clear();
}

static void wg_block_end(void) {
    for (size_t i = 0; i < tl_wg.size(); i++)
        if (tl_wg[i].n) {
            const CudaHostLaunch* l = cuda_host_current_launch("wgmma");
            fail_msg("wgmma: thread %zu of block (%u,%u,%u) of kernel %s (launched at %s:%d) returned with %d "
                     "wgmma operation%s not waited for (hint: wgmma_wait<0>() before using or storing the "
                     "accumulators)", i, blockIdx.x, blockIdx.y, blockIdx.z, l->name, l->file, l->line,
                     tl_wg[i].n, tl_wg[i].n == 1 ? "" : "s");
        }
}

// --- TMA stores and reductions (bulk groups) --------------------------------------------------------

typedef struct {
    CUtensorMap map;
    const unsigned char* src;
    int c[3], reduce;
    unsigned group;
} BulkOp;

typedef struct {
    std::vector<BulkOp> ops;  // oldest first
    unsigned open;
} BulkQueue;

static thread_local std::vector<BulkQueue> tl_bulk;

static BulkQueue* bulk_queue(const char* what) {
    const CudaHostLaunch* l = cuda_host_current_launch(what);
    size_t threads = (size_t)l->block.x * l->block.y * l->block.z;
    if (tl_bulk.size() < threads) tl_bulk.resize(threads);
    return &tl_bulk[(size_t)cuda_host_current_thread(what)];
}

static const char* bulk_name(int reduce, unsigned rank) {
    if (rank == 3) return reduce ? "cp.reduce.async.bulk.tensor.3d.add" : "cp.async.bulk.tensor.3d.global";
    return reduce ? "cp.reduce.async.bulk.tensor.2d.add" : "cp.async.bulk.tensor.2d.global";
}

static void tma_store(const CUtensorMap* map, unsigned rank, const void* src_shared, const int c[3], int reduce) {
    const char* what = bulk_name(reduce, rank);
    TmapFields f = tmap_of(what, map, rank);
    if (reduce && f.dtype != CU_TENSOR_MAP_DATA_TYPE_FLOAT32)
        failf(what, "the host runtime reduces fp32 tensor maps only (data type %llu)", (unsigned long long)f.dtype);
    check_inner_start(what, &f, c[0]);
    // A store's box may run past the tensor's upper ends (those elements are not written) but not
    // start before its lower ends: an H200 faulted (illegal instruction) on every store and
    // reduce-add at c0 = -4 or c1 = -2, swizzled or not, and ran those starting at 0 or above
    // (results/gpu/h200-2026-11-27T1222-517964c, checks.txt). Loads take negative starts.
    if (c[0] < 0 || c[1] < 0 || c[2] < 0) {
        if (rank == 2)
            failf(what, "the box starts at (%d, %d), before the tensor's first element: a store or reduce-add "
                  "must start at coordinates >= 0 (a GPU faults: illegal instruction)", c[0], c[1]);
        failf(what, "the box starts at (%d, %d, %d), before the tensor's first element: a store or reduce-add "
              "must start at coordinates >= 0 (a GPU faults: illegal instruction)", c[0], c[1], c[2]);
    }
    const unsigned bytes = box_extent(&f, 0) * box_extent(&f, 1) * box_extent(&f, 2) * (unsigned)f.esize;
    if ((uintptr_t)src_shared % 128 || !cuda_host_in_shared(src_shared, bytes))
        failf(what, "src %p must be 128-byte aligned with the box's %u bytes in the block's shared memory",
              src_shared, bytes);
    BulkQueue* q = bulk_queue(what);
    BulkOp op;
    op.map = *map;
    op.src = (const unsigned char*)src_shared;
    memcpy(op.c, c, sizeof op.c);
    op.reduce = reduce;
    op.group = q->open;
    q->ops.push_back(op);
}

void cuda_host_tma_store_2d(const CUtensorMap* map, const void* src_shared, int c0, int c1, int reduce) {
    const int c[3] = {c0, c1, 0};
    tma_store(map, 2, src_shared, c, reduce);
}
void cuda_host_tma_store_3d(const CUtensorMap* map, const void* src_shared, int c0, int c1, int c2, int reduce) {
    const int c[3] = {c0, c1, c2};
    tma_store(map, 3, src_shared, c, reduce);
}

void cuda_host_bulk_commit(void) { bulk_queue("cp.async.bulk.commit_group")->open++; }

static void bulk_apply(const BulkOp* op) {
    TmapFields f;
    memcpy(&f, &op->map, sizeof f);
    const char* what = bulk_name(op->reduce, (unsigned)f.rank);
    const unsigned es = (unsigned)f.esize;
    for (unsigned z = 0; z < box_extent(&f, 2); z++)
        for (unsigned y = 0; y < box_extent(&f, 1); y++)
            for (unsigned x = 0; x < box_extent(&f, 0); x++) {
                unsigned char* g;
                if (!box_element(&f, op->c, x, y, z, &g)) continue;  // out of bounds: not written
                const unsigned char* s = box_smem(&f, op->src, x, y, z);
                if (cuda_host_mem_kind(g, es) != CUDA_HOST_MEM_DEVICE)
                    failf(what, "box (%d, %d, %d) element (%u, %u, %u) at %p is not in a cudaMalloc allocation",
                          op->c[0], op->c[1], op->c[2], x, y, z, (void*)g);
                if (op->reduce) {
                    float v, old, next;
                    memcpy(&v, s, 4);
                    __atomic_load((float*)g, &old, __ATOMIC_RELAXED);
                    do {
                        next = old + v;
                    } while (!__atomic_compare_exchange((float*)g, &old, &next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
                } else {
                    memcpy(g, s, es);
                }
            }
}

void cuda_host_bulk_wait(int n) {
    if (n < 0 || n > 63) failf("cp.async.bulk.wait_group", "%d is not in [0, 63]", n);
    BulkQueue* q = bulk_queue("cp.async.bulk.wait_group");
    size_t done = 0;
    // The shared source is read now: a kernel that overwrites it before the wait stores the new bytes.
    while (done < q->ops.size() && (unsigned long long)q->ops[done].group + (unsigned)n < q->open) bulk_apply(&q->ops[done++]);
    q->ops.erase(q->ops.begin(), q->ops.begin() + (long)done);
}

static void bulk_block_begin(void) {
    for (size_t i = 0; i < tl_bulk.size(); i++) tl_bulk[i].ops.clear(), tl_bulk[i].open = 0;
}

static void bulk_block_end(void) {
    for (size_t i = 0; i < tl_bulk.size(); i++)
        if (!tl_bulk[i].ops.empty()) {
            const CudaHostLaunch* l = cuda_host_current_launch("cp.async.bulk");
            fail_msg("cp.async.bulk: thread %zu of block (%u,%u,%u) of kernel %s (launched at %s:%d) returned with %zu "
                     "TMA store%s or reduction%s not waited for (hint: bulk_commit() and bulk_wait<0>() before the "
                     "thread returns)", i, blockIdx.x, blockIdx.y, blockIdx.z, l->name, l->file, l->line,
                     tl_bulk[i].ops.size(), tl_bulk[i].ops.size() == 1 ? "" : "s", tl_bulk[i].ops.size() == 1 ? "" : "s");
        }
}
