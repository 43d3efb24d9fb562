// Flash-style partial causal attention on CUDA: forward, row-dot, backward and the LSE merge.
// The device twin of attention/partial_attention.c (same problem, same semantics; see
// partial_attention_cuda.cuh for the interface and attention/cuda_perf_attention.md for costs).
//
// Two sets of forward/backward kernels, one per storage precision:
// - bf16 (the default build): FlashAttention-2-class kernels on mma.sync m16n8k16 with S and P
//   in registers, ldmatrix from conflict-free shared memory and cp.async double buffering
//   (attention/flash_forward.cuh, flash_backward.cuh, included below), the 5-GEMM backward with a deterministic dQ.
// - fp32 (-DGPT_CUDA_FP32, the precision reference build): tensor cores take no fp32 inputs, so
//   simple tiled FMA kernels (attention/fma_attention.cuh, included below): 4 warps and 64 rows of
//   one (sequence, head) per block, per-warp GEMMs on shared-memory tiles, a two-pass backward.
// The row-dot, the merge, the argument checks and the launchers are shared.
//
// Mask. Key j is visible to query i iff kpos(j) <= qpos(i); positions grow with the index, so a
// query sees a prefix of the keys (visible_keys) and a key is seen by a suffix of the queries
// (first_query). Forward passes stop at the keys the tile's last query sees and skip, per warp,
// the 16-key blocks none of its rows sees; backward passes start at the first query tile that
// sees the key tile's first key, and warps whose keys see none of a query tile skip it.
//
// Every kernel is deterministic: each output element has one writer per launch, but for the bf16
// backward's dQ, whose atomic adds take turns in a fixed order (flash_backward.cuh).
#include "attention/partial_attention_cuda.cuh"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace {

// `#pragma unroll` for nvcc; g++ (the host runtime) would warn about an unknown pragma.
#if defined(__CUDACC__)
#define ATTN_UNROLL _Pragma("unroll")
#define ATTN_NO_UNROLL _Pragma("unroll 1")
#else
#define ATTN_UNROLL
#define ATTN_NO_UNROLL
#endif

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

struct AttnArgs {
    int Tq, Tk;
    long long qoff, qstride, koff, kstride;
    const floatX *q, *k, *v, *dout;
    int ldq, ldk, ldv, lddo;
    int B;
    float* o;
    floatX* ox;             // forward output in floatX instead of o (bf16 kernels), or NULL
    int ldo;
    float* lse;             // forward output
    const float *lse_in, *d;  // backward inputs (final lse and rowsum(dout * o))
    float *dq, *dk, *dv;
    int lddq, lddk, lddv;
    float* dq_acc;          // bf16 backward into dqx: the fp32 dQ accumulator (B, Tq, NH*HS), or NULL
    unsigned* dq_sem;       // bf16 backward: the dQ order's semaphores (B, NH, query tiles)
    int bwd_head_group;     // backward block order: heads per group, key tiles outer within it
    int bwd_lagged_release; // backward: a query tile's dQ turn passed on one step later (flash_backward.cuh)
    floatX *dqx, *dkx, *dvx;  // bf16 backward: gradients written in floatX instead of added
    int decode;        // the problem is a decoding step (AttentionProblem.decode): split-KV allowed
    int splits;        // bf16 forward: key splits per query tile (split-KV), 1 = none; grid z = B * splits
    int merge;         // bf16 forward: merge the result into the partial (o, lse) already there (fp32 o)
    float scale;       // 1 / sqrt(HS)
    float scale_log2;  // scale * log2(e): scores in log2 units, softmax by exp2
    int vec;           // every floatX input pointer and row stride allows 16-byte loads
    int vec_stats;     // backward: lse_in and d allow 16-byte loads of 4 rows (Tq % 4 == 0)
};

// Keys visible to local query i: j < visible_keys  <=>  koff + kstride*j <= qpos(i), computed in
// I: long long (visible_keys), or int where the positions fit (positions_fit_32; NARROW in
// visible_keys_as): a 64-bit division is a call, and in a loop the values live across it spill
// (the Hopper forward's persistent grid).
template <typename I> __device__ __forceinline__ int visible_keys_in(const AttnArgs& a, int i) {
    const I rel = (I)a.qoff + (I)a.qstride * i - (I)a.koff;
    if (rel < 0) return 0;
    const I n = rel / (I)a.kstride + 1;
    return n < a.Tk ? (int)n : a.Tk;
}
__device__ __forceinline__ int visible_keys(const AttnArgs& a, int i) { return visible_keys_in<long long>(a, i); }
template <bool NARROW> __device__ __forceinline__ int visible_keys_as(const AttnArgs& a, int i) {
    return NARROW ? visible_keys_in<int>(a, i) : visible_keys(a, i);
}

// First local query that sees local key j: i >= first_query  <=>  qpos(i) >= kpos(j).
__device__ __forceinline__ int first_query(const AttnArgs& a, int j) {
    const long long rel = a.koff + a.kstride * j - a.qoff;
    if (rel <= 0) return 0;
    const long long n = (rel + a.qstride - 1) / a.qstride;
    return n < a.Tq ? (int)n : a.Tq;
}

__device__ __forceinline__ floatX zero_x() { return from_float<floatX>(0.0f); }

// The LSE merge of a partial b (log-sum-exp lb > -inf) into a partial a (la, -inf when empty): the
// merged lse and the weights of o = wa o_a + wb o_b. One formula for the merge kernel and the
// forward's fused merge, so the two give the same bits.
struct MergeWeights {
    float lse, wa, wb;
};
__device__ __forceinline__ MergeWeights merge_weights(float la, float lb) {
    const float mx = fmaxf(la, lb);
    MergeWeights w;
    w.lse = mx + logf(expf(la - mx) + expf(lb - mx));
    w.wa = expf(la - w.lse);   // 0 when a is empty
    w.wb = expf(lb - w.lse);
    return w;
}
// (an explicit FMA: the same rounding wherever it is inlined, on the GPU and the host runtime)
__device__ __forceinline__ float merge_value(float wa, float wb, float oa, float ob) { return fmaf(wa, oa, wb * ob); }

#ifdef GPT_CUDA_FP32
// ==== fp32 build: tiled FMA kernels (mma.sync takes no fp32 inputs) ===============================
#include "attention/fma_attention.cuh"
#else
// ==== bf16 build: FlashAttention-2-class kernels on mma.sync ======================================
#include "attention/flash_forward.cuh"
#include "attention/flash_backward.cuh"
#include "attention/flash_backward_fa2.cuh"
#include "attention/hopper_forward.cuh"
#include "attention/hopper_backward.cuh"
#endif

// ---- row-dot and merge: one warp per (sequence, token, head) -------------------------------------
constexpr int ROW_WARPS = 8;

// The (query, head) row of this warp in the row kernels (one warp per row, rows ordered (b, t, h)
// over B x T x NH) and its lane; valid = 0 past the last row (the whole warp).
struct WarpRow {
    long long bt;   // b * T + t: the token row
    int b, t, h, lane, valid;
};
__device__ __forceinline__ WarpRow warp_row(int B, int T, int NH) {
    WarpRow r;
    const long long row = (long long)blockIdx.x * ROW_WARPS + threadIdx.x / 32;
    r.lane = threadIdx.x % 32;
    r.valid = row < (long long)B * T * NH;
    r.h = (int)(row % NH);
    r.bt = row / NH;
    r.b = (int)(r.bt / T);
    r.t = (int)(r.bt % T);
    return r;
}

__global__ void __launch_bounds__(32 * ROW_WARPS)
attention_row_dot_kernel(int B, int NH, int HS, int T, const floatX* o, int ldo, const floatX* dout,
                         int lddo, float* d) {
    const WarpRow r = warp_row(B, T, NH);
    if (!r.valid) return;   // the whole warp
    const floatX* oi = o + r.bt * ldo + (long long)r.h * HS;
    const floatX* gi = dout + r.bt * lddo + (long long)r.h * HS;
    float acc = 0.0f;
    for (int c = r.lane; c < HS; c += 32) acc += to_float(oi[c]) * to_float(gi[c]);
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (r.lane == 0) d[((long long)r.b * NH + r.h) * T + r.t] = acc;
}

__global__ void __launch_bounds__(32 * ROW_WARPS)
attention_merge_kernel(int B, int NH, int HS, int T, float* o_a, int lda, float* lse_a,
                       const float* o_b, int ldb, const float* lse_b) {
    const WarpRow r = warp_row(B, T, NH);
    if (!r.valid) return;
    const int h = r.h, lane = r.lane;
    const long long bt = r.bt, li = ((long long)r.b * NH + h) * T + r.t;
    const float la = lse_a[li], lb = lse_b[li];
    if (lb == -INFINITY) return;   // b is empty: a unchanged (the whole warp)
    const MergeWeights w = merge_weights(la, lb);
    float* oa = o_a + bt * lda + (long long)h * HS;
    const float* ob = o_b + bt * ldb + (long long)h * HS;
    for (int c = lane; c < HS; c += 32) oa[c] = merge_value(w.wa, w.wb, oa[c], ob[c]);
    __syncwarp();   // every lane has read lse_a[li]
    if (lane == 0) lse_a[li] = w.lse;
}

#ifndef GPT_CUDA_FP32
// Split-KV's merge of the S partials of flash_forward_kernel<HS, true> (partial (b, s) is sequence
// b * S + s of part_o (B * S, Tq, NH*HS) and part_lse (B * S, NH, Tq)) into row (b, t, h) of o
// (fp32, or floatX into ox when not NULL; row stride ldo) and lse (B, NH, Tq), one warp per row,
// in split order: the same bits on every run. An empty partial (lse -inf, no key of its range
// visible) weighs 0; all empty: o = 0 and lse = -inf, as without splits.
__global__ void __launch_bounds__(32 * ROW_WARPS)
flash_split_merge_kernel(int B, int Tq, int NH, int HS, int S, const float* part_o, const float* part_lse, float* o,
                         floatX* ox, int ldo, float* lse) {
    const WarpRow r = warp_row(B, Tq, NH);
    if (!r.valid) return;
    const int h = r.h, lane = r.lane, b = r.b, t = r.t;
    const long long bt = r.bt, C = (long long)NH * HS, lse_step = (long long)NH * Tq, o_step = (long long)Tq * C;
    const float* pl = part_lse + ((long long)b * S * NH + h) * Tq + t;          // partial s at pl[s * lse_step]
    const float* po = part_o + ((long long)b * S * Tq + t) * C + (long long)h * HS;   // at po[s * o_step]
    float mx = -INFINITY;
    for (int s = 0; s < S; s++) mx = fmaxf(mx, pl[s * lse_step]);
    float sum = 0.0f;
    for (int s = 0; s < S && mx != -INFINITY; s++) sum += expf(pl[s * lse_step] - mx);
    const float l = mx == -INFINITY ? -INFINITY : mx + logf(sum);
    for (int c = lane; c < HS; c += 32) {
        float acc = 0.0f;
        for (int s = 0; s < S; s++) {
            const float ls = pl[s * lse_step];
            if (ls != -INFINITY) acc += expf(ls - l) * po[s * o_step + c];
        }
        if (ox) ox[bt * ldo + (long long)h * HS + c] = from_float<floatX>(acc);
        else o[bt * ldo + (long long)h * HS + c] = acc;
    }
    if (lane == 0) lse[((long long)b * NH + h) * Tq + t] = l;
}
#endif

// ---- launchers ----------------------------------------------------------------------------------
void check_problem(const AttentionProblem* p, const char* who) {
    CHECK(p->B > 0 && p->NH > 0 && p->HS > 0 && p->Tq >= 0 && p->Tk >= 0, "caller bug",
          "%s: attention problem has a non-positive size (B=%d NH=%d HS=%d Tq=%d Tk=%d)", who, p->B,
          p->NH, p->HS, p->Tq, p->Tk);
    CHECK(p->qpos.stride > 0 && p->kpos.stride > 0, "positions must increase with the local index",
          "%s: attention strides must be positive (q stride %ld, k stride %ld)", who, p->qpos.stride,
          p->kpos.stride);
    CHECK(p->B <= 65535 && p->NH <= 65535, "split the batch", "%s: B=%d or NH=%d over the grid limit 65535",
          who, p->B, p->NH);
}

void check_head_size(int HS, const char* who) {
    CHECK(HS % 16 == 0 && HS >= 16 && HS <= 128,
          "the tensor-core tiles are 16 wide: pad the head to a multiple of 16",
          "%s: head size %d is not supported (a multiple of 16 in [16, 128])", who, HS);
}

bool aligned16(const void* ptr, int ld) {
    return ((uintptr_t)ptr & 15) == 0 && ld % X128_ELEMS == 0;
}

AttnArgs make_args(const AttentionProblem* p) {
    AttnArgs a = {};
    a.B = p->B;
    a.Tq = p->Tq;
    a.Tk = p->Tk;
    a.qoff = p->qpos.off;
    a.qstride = p->qpos.stride;
    a.koff = p->kpos.off;
    a.kstride = p->kpos.stride;
    a.scale = 1.0f / sqrtf((float)p->HS);
    a.scale_log2 = a.scale * LOG2E;
    a.decode = p->decode;
    a.splits = 1;
    return a;
}

#ifdef GPT_CUDA_FP32
template <int HS> void launch_forward(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    const size_t smem = Layout<HS>::FWD;
    CUDA_RAISE_DYNAMIC_SMEM(attention_forward_kernel<HS>, smem, "head size", HS);
    const dim3 grid((unsigned)((a.Tq + BQ - 1) / BQ), (unsigned)NH, (unsigned)B);
    LAUNCH(attention_forward_kernel<HS>, grid, NTHREADS, smem, stream, a);
}

template <int HS> void launch_backward(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    const size_t smem = Layout<HS>::BWD;
    CUDA_RAISE_DYNAMIC_SMEM(attention_backward_dkdv_kernel<HS>, smem, "head size", HS);
    CUDA_RAISE_DYNAMIC_SMEM(attention_backward_dq_kernel<HS>, smem, "head size", HS);
    if (a.Tk > 0) {
        const dim3 grid((unsigned)((a.Tk + BK - 1) / BK), (unsigned)NH, (unsigned)B);
        LAUNCH(attention_backward_dkdv_kernel<HS>, grid, NTHREADS, smem, stream, a);
    }
    if (a.Tq > 0) {
        const dim3 grid((unsigned)((a.Tq + BQ - 1) / BQ), (unsigned)NH, (unsigned)B);
        LAUNCH(attention_backward_dq_kernel<HS>, grid, NTHREADS, smem, stream, a);
    }
}

template <int HS> size_t smem_forward() { return Layout<HS>::FWD; }
template <int HS> size_t smem_backward() { return Layout<HS>::BWD; }
#else
unsigned char* attention_workspace(size_t bytes, cudaStream_t stream);

// A positive integer from the environment variable `name`, or fallback where it is unset or empty.
static long env_positive(const char* name, long fallback) {
    const char* env = getenv(name);
    if (!env || !*env) return fallback;
    char* end = NULL;
    errno = 0;
    const long v = strtol(env, &end, 10);
    CHECK(errno == 0 && *end == '\0' && v >= 1, "set it to a positive integer, or unset it",
          "%s: expected an integer >= 1, found '%s'", name, env);
    return v;
}

// Split-KV, the forward's key tiles cut over several blocks per query tile: for a decoding step
// (a.decode) whose grid of `blocks` is under two waves of the kernel's 2 blocks per SM
// (__launch_bounds__), enough splits for two waves, at most FWD_MAX_SPLITS and one per key tile
// the problem has. ATTENTION_FWD_SPLITS=N forces N (capped the same way) on every forward call,
// training included (tests and timing: its scratch is then outside the memory budget); 1 never
// splits.
constexpr int FWD_MAX_SPLITS = 16;
static int forward_splits(const AttnArgs& a, long long blocks, int key_tiles) {
    long want = env_positive("ATTENTION_FWD_SPLITS", 0);   // (0: unset)
    if (want == 0 && a.decode) {
        int device = 0, sms = 0;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        const long long two_waves = 2LL * 2 * sms;
        if (blocks < two_waves) want = (long)((two_waves + blocks - 1) / blocks);
    }
    if (want == 0) want = 1;
    if (want > FWD_MAX_SPLITS) want = FWD_MAX_SPLITS;
    if (want > key_tiles) want = key_tiles;
    if (want > 65535 / a.B) want = 65535 / a.B;   // grid z = B * splits
    return want > 1 ? (int)want : 1;
}

template <int HS> int forward_split_count(const AttnArgs& a, int NH) {
    typedef FaFwd<HS> F;
    const long long qtiles = (a.Tq + F::BQ - 1) / F::BQ;
    return forward_splits(a, qtiles * NH * a.B, (a.Tk + F::BK - 1) / F::BK);
}

// The Hopper kernels run where the build has sm_90a code and the device is compute capability 9.0.
static bool hopper_kernels_run(void) {
#if defined(CUDA_HOST) || defined(ATTENTION_SM90A)
    int device = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major == 9 && minor == 0;
#else
    return false;
#endif
}

// A two-way setting in the environment (a launcher choice to time on a GPU): 0 when unset, empty or
// off, 1 when on, an error naming the variable otherwise.
static int env_switch(const char* name, const char* off, const char* on) {
    const char* env = getenv(name);
    if (!env || !*env || !strcmp(env, off)) return 0;
    char hint[96];
    snprintf(hint, sizeof hint, "set it to %s or %s, or unset it", off, on);
    CHECK(!strcmp(env, on), hint, "%s: expected %s or %s, found '%s'", name, off, on, env);
    return 1;
}

// The kernel a pass asks for in env (ATTENTION_FWD_KERNEL or ATTENTION_BWD_KERNEL): auto (the
// default: sm90 where it can run), sm80 (the FlashAttention-2-class kernels everywhere) or sm90
// (the Hopper kernel of hopper_forward.cuh / hopper_backward.cuh for HS 64, 80 and 128: an error where
// it cannot run, i.e. a build without sm_90a code or a device that is not compute capability 9.0).
// 1 where the Hopper kernel is to run, for the calls it serves (the caller checks those); other
// calls run the sm80 kernel whatever the setting. auto became the default once an H200 had run
// both Hopper kernels through the kernel tests and beaten the sm80 ones at every benchmarked shape
// (results/gpu/h200-2026-11-27T1222-517964c).
static bool hopper_kernel_wanted(const char* env_name, const char* pass) {
    const char* env = getenv(env_name);
    if (env && !strcmp(env, "sm80")) return false;
    if (!env || !*env) env = "auto";
    const bool forced = !strcmp(env, "sm90");
    CHECK(forced || !strcmp(env, "auto"), "set it to sm80, sm90 or auto, or unset it",
          "%s: expected sm80, sm90 or auto, found '%s'", env_name, env);
    const bool runs = hopper_kernels_run();
    CHECK(runs || !forced, "build with sm_90a code (NVCC_ARCH_FLAGS_SM90A) and run on an H100 or H200, or use auto",
          "%s=sm90: the Hopper %s needs sm_90a code and a compute capability 9.0 device", env_name, pass);
    return runs;
}

// The head sizes the Hopper kernels serve (80 padded to 128).
static bool hopper_head_size(int HS) { return HS == 64 || HS == 80 || HS == 128; }

// The Hopper forward takes 16-byte aligned inputs and no decoding step (those keep split-KV).
static bool use_hopper_forward(const AttnArgs& a, int HS) {
    return hopper_kernel_wanted("ATTENTION_FWD_KERNEL", "forward") && hopper_head_size(HS) && a.vec && !a.decode;
}

// The Hopper backward takes 16-byte aligned inputs, lse and D in 4-row chunks, Tq a multiple of
// its 64-query tiles, and a dQ destination whose rows TMA can address (the fp32 accumulator of a
// floatX dQ always is).
static bool use_hopper_backward(const AttnArgs& a, int HS, bool floatx_dq) {
    const bool dq_ok = floatx_dq || (a.lddq % 4 == 0 && (uintptr_t)a.dq % 16 == 0);
    return hopper_kernel_wanted("ATTENTION_BWD_KERNEL", "backward") && hopper_head_size(HS) && a.vec &&
           a.vec_stats && a.Tq % FA_BWD_BQ == 0 && dq_ok;
}

// A TMA map of a tensor of rank 2 or 3 (bf16 or fp32, esize bytes): dims[0] elements per row
// (innermost), byte strides of the outer dimensions, boxes of box[] elements.
static CUtensorMap tma_map(const void* base, CUtensorMapDataType type, unsigned rank, const cuuint64_t* dims,
                           const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle,
                           const char* what) {
    static TmaEncodeTiledFn encode = NULL;   // the driver's entry point, found once
    if (!encode) encode = tma_encode_tiled_fn();
    CHECK(encode != NULL, "update the NVIDIA driver (CUDA 12.0 or newer)",
          "cuTensorMapEncodeTiled not found through cudaGetDriverEntryPointByVersion");
    CUtensorMap map;
    const cuuint32_t estrides[3] = {1, 1, 1};
    const CUresult r = encode(&map, type, rank, (void*)base, dims, strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    CHECK(r == CUDA_SUCCESS, "a caller bug: the launchers check 16-byte alignment first",
          "cuTensorMapEncodeTiled for the Hopper kernels' %s (rank %u, %llu x %llu elements, strides %llu bytes) "
          "failed: error %d", what, rank, (unsigned long long)dims[0], (unsigned long long)dims[1],
          (unsigned long long)strides[0], (int)r);
    return map;
}

// A matrix of `rows` rows of `cols` elements, rows `ld` elements apart, boxes of box_cols x box_rows.
static CUtensorMap tma_map_2d(const void* base, CUtensorMapDataType type, size_t esize, long long cols, long long rows,
                              long long ld, int box_cols, int box_rows, CUtensorMapSwizzle swizzle, const char* what) {
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)ld * esize};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    return tma_map(base, type, 2, dims, strides, box, swizzle, what);
}

// Rows of NH heads of HS elements, rows ld elements apart, as a rank-3 tensor (HS, NH, rows), boxes
// of box_cols x 1 head x box_rows: a box never reaches into the next head (its columns past HS
// read as zeros, and are not written by a store or reduction).
static CUtensorMap tma_map_heads(const void* base, CUtensorMapDataType type, size_t esize, int HS, int NH,
                                 long long rows, long long ld, int box_cols, int box_rows,
                                 CUtensorMapSwizzle swizzle, const char* what) {
    const cuuint64_t dims[3] = {(cuuint64_t)HS, (cuuint64_t)NH, (cuuint64_t)rows};
    const cuuint64_t strides[2] = {(cuuint64_t)HS * esize, (cuuint64_t)ld * esize};
    const cuuint32_t box[3] = {(cuuint32_t)box_cols, 1, (cuuint32_t)box_rows};
    return tma_map(base, type, 3, dims, strides, box, swizzle, what);
}

// Q, K, V or dO of the Hopper kernels: bf16 heads in 128-byte-swizzled boxes of 64 columns (one
// FaTile panel) x box_rows rows.
static CUtensorMap hopper_tensor_map(const floatX* base, int HS, int NH, long long rows, int ld, int box_rows,
                                     const char* what) {
    return tma_map_heads(base, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(floatX), HS, NH, rows, ld, 64, box_rows,
                         CU_TENSOR_MAP_SWIZZLE_128B, what);
}

// The Hopper forward's S GEMM: a wgmma per 64 keys (n64, the default) or one per 128 (n128,
// hopper_forward.cuh's hop_issue_s): ATTENTION_FWD_HOPPER=n64|n128, to time both on an H100 or H200.
static bool hopper_forward_wide_s(void) { return env_switch("ATTENTION_FWD_HOPPER", "n64", "n128"); }

// Its query rows per block at HS 64: 128 (two consumer warpgroups, the default) or 192 (three;
// HopFwd): ATTENTION_FWD_HOPPER_ROWS=128|192. HS 80 and 128 always take 128.
static bool hopper_forward_three_consumers(void) { return env_switch("ATTENTION_FWD_HOPPER_ROWS", "128", "192"); }

// The Hopper kernels' GEMMs over a head's columns at HS 80 (the forward's P V, the backward's dV and
// dK): one wgmma per 64-column panel, the second padded (padded, the default), or one m64n80k16 over
// the 80 columns (exact): ATTENTION_HOPPER_HS80=padded|exact. Other head sizes are whole panels.
static bool hopper_hs80_exact(void) { return env_switch("ATTENTION_HOPPER_HS80", "padded", "exact"); }

// Its grid: a block per query tile (tiles, the default), or one block per SM that takes tile after
// tile (persistent; hopper_forward.cuh's hopper_forward_kernel): ATTENTION_FWD_HOPPER_GRID=
// tiles|persistent. fp32 O at HS 128 stays on the grid of tiles (HopFwd::PERSISTENT_FP32), as do
// positions past 2^29 (positions_fit_32). ATTENTION_FWD_HOPPER_BLOCKS=N caps the persistent grid
// at N blocks (tests: on their small shapes a block then takes several tiles, on a GPU too).
static bool hopper_forward_persistent(void) { return env_switch("ATTENTION_FWD_HOPPER_GRID", "tiles", "persistent"); }

// Whether visible_keys_as<true> is exact for every query of a: each term of qoff + qstride i -
// koff under 2^29 in size, so the sum stays inside an int.
static bool positions_fit_32(const AttnArgs& a) {
    const long long lim = 1LL << 29;
    return a.qoff > -lim && a.qoff < lim && a.koff > -lim && a.koff < lim && a.qstride > 0 && a.kstride > 0 &&
           a.qstride * a.Tq < lim && a.kstride < lim;
}

template <int HS, int NS, int NC, int PV>
void launch_hopper_forward_form(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    typedef HopFwd<HS, NC> F;
    const CUtensorMap qm = hopper_tensor_map(a.q, HS, NH, (long long)B * a.Tq, a.ldq, F::BQ, "Q");
    const CUtensorMap km = hopper_tensor_map(a.k, HS, NH, (long long)B * a.Tk, a.ldk, F::BK, "K");
    const CUtensorMap vm = hopper_tensor_map(a.v, HS, NH, (long long)B * a.Tk, a.ldv, F::BK, "V");
    const unsigned qtiles = (unsigned)((a.Tq + F::BQ - 1) / F::BQ);
    if (hopper_forward_persistent() && (a.ox || F::PERSISTENT_FP32) && positions_fit_32(a)) {
        // One block per SM (a block fills one: __launch_bounds__(THREADS, 1), and its registers).
        const size_t smem = a.ox ? F::SMEM_PERSISTENT_BF16 : F::SMEM_PERSISTENT_FP32;
        // Raised once to what either output takes (a later, smaller raise would lower the limit).
        CUDA_RAISE_DYNAMIC_SMEM((hopper_forward_kernel<HS, NS, NC, PV, true>), F::SMEM_PERSISTENT, "head size", HS);
        int device = 0, sms = 0;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        const long long tiles = (long long)qtiles * NH * B;
        CHECK(tiles < (1LL << 31) - sms, "use ATTENTION_FWD_HOPPER_GRID=tiles for this call",
              "Hopper forward, persistent grid: %lld query tiles, expected fewer than 2^31 (its tile indices are 32-bit)",
              tiles);
        const long cap = env_positive("ATTENTION_FWD_HOPPER_BLOCKS", sms);
        const unsigned blocks = (unsigned)(tiles < cap ? tiles : cap);
        LAUNCH((hopper_forward_kernel<HS, NS, NC, PV, true>), blocks, F::THREADS, smem, stream, qm, km, vm, a, NH);
        return;
    }
    CUDA_RAISE_DYNAMIC_SMEM((hopper_forward_kernel<HS, NS, NC, PV, false>), F::SMEM, "head size", HS);
    LAUNCH((hopper_forward_kernel<HS, NS, NC, PV, false>), dim3(qtiles, (unsigned)NH, (unsigned)B), F::THREADS,
           F::SMEM, stream, qm, km, vm, a, NH);
}

template <int HS, int NC, int PV> void launch_hopper_forward_nc(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    if (hopper_forward_wide_s()) launch_hopper_forward_form<HS, 128, NC, PV>(a, B, NH, stream);
    else launch_hopper_forward_form<HS, 64, NC, PV>(a, B, NH, stream);
}

// The form the environment asks for (each knob read at every HS, so a bad value is always refused).
template <int HS> void launch_hopper_forward(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    const bool three = hopper_forward_three_consumers(), exact = hopper_hs80_exact();
    if constexpr (HS == 64) {
        if (three) launch_hopper_forward_nc<HS, 3, 64>(a, B, NH, stream);
        else launch_hopper_forward_nc<HS, 2, 64>(a, B, NH, stream);
    } else if constexpr (HS == 80) {
        if (exact) launch_hopper_forward_nc<HS, 2, 80>(a, B, NH, stream);
        else launch_hopper_forward_nc<HS, 2, 64>(a, B, NH, stream);
    } else if constexpr (HS == 128) {
        launch_hopper_forward_nc<HS, 2, 64>(a, B, NH, stream);
    }
}

template <int HS> void launch_forward(AttnArgs a, int B, int NH, cudaStream_t stream) {
    typedef FaFwd<HS> F;
    if (use_hopper_forward(a, HS)) {
        a.splits = 1;
        launch_hopper_forward<HS>(a, B, NH, stream);
        return;
    }
    const size_t smem = F::SMEM;
    CUDA_RAISE_DYNAMIC_SMEM((flash_forward_kernel<HS, false>), smem, "head size", HS);
    CUDA_RAISE_DYNAMIC_SMEM((flash_forward_kernel<HS, true>), smem, "head size", HS);
    const unsigned qtiles = (unsigned)((a.Tq + F::BQ - 1) / F::BQ);
    a.splits = a.merge ? 1 : forward_split_count<HS>(a, NH);   // (the merging forward never splits)
    if (a.splits == 1) {
        LAUNCH((flash_forward_kernel<HS, false>), dim3(qtiles, (unsigned)NH, (unsigned)B), F::THREADS, smem, stream, a);
        return;
    }
    // Split-KV: the partials into the stream's workspace (shared with the backward's dQ), then merged.
    AttnArgs part = a;
    const size_t prows = (size_t)a.splits * B * a.Tq;
    part.o = (float*)attention_workspace(prows * NH * (HS + 1) * sizeof(float), stream);
    part.lse = part.o + prows * NH * HS;
    part.ox = nullptr;
    part.ldo = NH * HS;
    LAUNCH((flash_forward_kernel<HS, true>), dim3(qtiles, (unsigned)NH, (unsigned)(B * a.splits)), F::THREADS, smem,
           stream, part);
    const long long rows = (long long)B * a.Tq * NH;
    LAUNCH(flash_split_merge_kernel, (unsigned)((rows + ROW_WARPS - 1) / ROW_WARPS), 32 * ROW_WARPS, 0, stream, B,
           a.Tq, NH, HS, a.splits, part.o, part.lse, a.o, a.ox, a.ldo, a.lse);
}

// The kernels' workspace: the backward's (the fp32 dQ accumulator, then the semaphores, zeroed by
// each call) and split-KV's partials (decoding only), one buffer per (device, stream), kept
// between calls and grown in stream order when a call needs more: after the first step nothing is
// allocated. Calls on one stream run in order, so they can share it; the module holds at most 16
// streams.
unsigned char* attention_workspace(size_t bytes, cudaStream_t stream) {
    struct Workspace {
        int device;
        cudaStream_t stream;
        unsigned char* ptr;
        size_t bytes;
    };
    static Workspace ws[16];
    static int n = 0;
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    Workspace* w = NULL;
    for (int i = 0; i < n && !w; i++)
        if (ws[i].device == dev && ws[i].stream == stream) w = &ws[i];
    if (!w) {
        CHECK(n < 16, "issue the attention kernels on fewer streams",
              "attention: workspaces for more than 16 (device, stream) pairs");
        w = &ws[n++];
        w->device = dev, w->stream = stream, w->ptr = NULL, w->bytes = 0;
    }
    if (w->bytes < bytes) {   // stream-ordered: no host synchronisation
        if (w->ptr) CUDA_CHECK(cudaFreeAsync(w->ptr, stream));
        CUDA_CHECK(cudaMallocAsync((void**)&w->ptr, bytes, stream));
        w->bytes = bytes;
    }
    return w->ptr;
}

// Heads per group of the backward's block order (flash_backward.cuh): 1 by default, so that the
// blocks resident at once share one or a few heads' Q, dO and dQ accumulator in L2;
// ATTENTION_BWD_HEAD_GROUP=N (N >= 1, capped at the heads) to time others (N >= every head: all
// heads' blocks of one key tile together, the order before).
static int backward_head_group(int heads) {
    const long g = env_positive("ATTENTION_BWD_HEAD_GROUP", 1);
    return g < heads ? (int)g : heads;
}

// When the backward passes a query tile's dQ turn to the next key tile: right after its adds
// (eager, the default) or at the next query tile, before its own wait (lagged: the fence then
// finds the adds done); ATTENTION_BWD_RELEASE=eager|lagged to time both. The same bits either way.
static int backward_lagged_release(void) { return env_switch("ATTENTION_BWD_RELEASE", "eager", "lagged"); }

// The backward's warp layout: each warp 16 keys of the tile (the default), or FlashAttention-2's
// (flash_backward_fa2.cuh, HS 64 and 128; elsewhere the default): ATTENTION_BWD_LAYOUT=keys|fa2, to
// time both on a GPU. Each gives its own bits (another order of the products), each deterministic.
static int backward_layout_fa2(int hs) {
    return env_switch("ATTENTION_BWD_LAYOUT", "keys", "fa2") && (hs == 64 || hs == 128);
}

// The Hopper backward's schedule (hopper_backward.cuh's HopBwdSched): serial (the default, each
// GEMM waited for before the next step), overlap, regs (overlap with K and V in registers at HS
// 64), early (regs, and the next query tile's S^T issued behind this one's dQ), pingpong (early,
// and at HS 64 the consumers taking turns at the GEMMs) or ds2 (early with two dS^T buffers, no
// barrier of both consumers after dQ), all with the same bits; or q128 (the launcher's own value:
// overlap with 128-query tiles at HS 64 where Tq is a multiple of 128, its own bits as dQ sums all
// 128 keys in one GEMM; overlap elsewhere):
// ATTENTION_BWD_HOPPER=serial|overlap|regs|early|pingpong|ds2|q128, to time them on an H100 or H200.
enum { HOP_BWD_Q128 = HOP_BWD_DS2 + 1 };
static int hopper_backward_schedule(void) {
    const char* env = getenv("ATTENTION_BWD_HOPPER");
    if (!env || !*env || !strcmp(env, "serial")) return HOP_BWD_SERIAL;
    if (!strcmp(env, "overlap")) return HOP_BWD_OVERLAP;
    if (!strcmp(env, "early")) return HOP_BWD_EARLY;
    if (!strcmp(env, "pingpong")) return HOP_BWD_PINGPONG;
    if (!strcmp(env, "ds2")) return HOP_BWD_DS2;
    if (!strcmp(env, "q128")) return HOP_BWD_Q128;
    CHECK(!strcmp(env, "regs"), "set it to serial, overlap, regs, early, pingpong, ds2 or q128, or unset it",
          "ATTENTION_BWD_HOPPER: expected serial, overlap, regs, early, pingpong, ds2 or q128, found '%s'", env);
    return HOP_BWD_KV_REGS;
}
// Whether a Hopper backward in schedule sched of head size HS over Tq queries takes 128-query tiles.
static bool hopper_backward_q128(int sched, int HS, int Tq) {
    return sched == HOP_BWD_Q128 && HS == 64 && Tq % 128 == 0;
}

// The backward kernel of a layout: its shared memory, threads, and launch. BWD_KEYS: each warp 16
// keys of the tile (flash_backward.cuh); BWD_FA2: FlashAttention-2's (flash_backward_fa2.cuh);
// BWD_HOPPER: the sm_90a kernel (hopper_backward.cuh) in the schedule ATTENTION_BWD_HOPPER names
// (the same bits in each). Each deterministic, each its own bits.
enum { BWD_KEYS, BWD_FA2, BWD_HOPPER };
template <int HS, int BK, int LAYOUT> struct BackwardKernel {
    static constexpr size_t smem() { return FaBwd<HS, BK>::SMEM; }
    static void launch(unsigned blocks, cudaStream_t stream, const AttnArgs& a, int NH) {
        CUDA_RAISE_DYNAMIC_SMEM((flash_backward_kernel<HS, BK>), smem(), "head size", HS);
        LAUNCH((flash_backward_kernel<HS, BK>), blocks, BK * 2, smem(), stream, a, NH);
    }
};
template <int HS> struct BackwardKernel<HS, 128, BWD_FA2> {
    static constexpr size_t smem() { return FaBwd2<HS>::SMEM; }
    static void launch(unsigned blocks, cudaStream_t stream, const AttnArgs& a, int NH) {
        CUDA_RAISE_DYNAMIC_SMEM((flash_backward_fa2_kernel<HS>), smem(), "head size", HS);
        LAUNCH((flash_backward_fa2_kernel<HS>), blocks, FaBwd2<HS>::THREADS, smem(), stream, a, NH);
    }
};
template <int HS, int SCHED, int DN, int BQ = FA_BWD_BQ> struct HopperBackwardSchedule {
    static void launch(unsigned blocks, cudaStream_t stream, const AttnArgs& a, int NH) {
        typedef HopBwdOf<HS, SCHED, BQ> F;
        CUDA_RAISE_DYNAMIC_SMEM((hopper_backward_kernel<HS, SCHED, DN, BQ>), F::SMEM, "head size", HS);
        const int C = NH * HS;
        const long long kr = (long long)a.B * a.Tk, qr = (long long)a.B * a.Tq, heads = (long long)a.B * NH;
        const CUtensorMap km = hopper_tensor_map(a.k, HS, NH, kr, a.ldk, F::BK, "K");
        const CUtensorMap vm = hopper_tensor_map(a.v, HS, NH, kr, a.ldv, F::BK, "V");
        const CUtensorMap qm = hopper_tensor_map(a.q, HS, NH, qr, a.ldq, F::BQ, "Q");
        const CUtensorMap gm = hopper_tensor_map(a.dout, HS, NH, qr, a.lddo, F::BQ, "dO");
        const CUtensorMap lm = tma_map_2d(a.lse_in, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sizeof(float), a.Tq, heads, a.Tq,
                                          F::BQ, 1, CU_TENSOR_MAP_SWIZZLE_NONE, "lse");
        const CUtensorMap dm = tma_map_2d(a.d, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sizeof(float), a.Tq, heads, a.Tq, F::BQ,
                                          1, CU_TENSOR_MAP_SWIZZLE_NONE, "D");
        float* dq = a.dq_acc ? a.dq_acc : a.dq;
        const CUtensorMap dqm = tma_map_heads(dq, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sizeof(float), HS, NH, qr,
                                              a.dq_acc ? C : a.lddq, F::HP, F::BQ, CU_TENSOR_MAP_SWIZZLE_NONE, "dQ");
        LAUNCH((hopper_backward_kernel<HS, SCHED, DN, BQ>), blocks, F::THREADS, F::SMEM, stream, km, vm, qm, gm, lm, dm,
               dqm, a, NH);
    }
};
template <int HS, int DN> void launch_hopper_backward_dn(unsigned blocks, cudaStream_t stream, const AttnArgs& a, int NH) {
    int sched = hopper_backward_schedule();
    // (pingpong's turns are HS 64's: elsewhere it is early, one instance fewer to compile; q128's
    // tiles too: elsewhere, and where Tq is not a multiple of 128, it is overlap)
    if constexpr (HS == 64) {
        if (hopper_backward_q128(sched, HS, a.Tq)) {
            HopperBackwardSchedule<HS, HOP_BWD_OVERLAP, DN, 128>::launch(blocks, stream, a, NH);
            return;
        }
        if (sched == HOP_BWD_PINGPONG) {
            HopperBackwardSchedule<HS, HOP_BWD_PINGPONG, DN>::launch(blocks, stream, a, NH);
            return;
        }
    }
    if (sched == HOP_BWD_Q128) sched = HOP_BWD_OVERLAP;
    if (sched == HOP_BWD_DS2) HopperBackwardSchedule<HS, HOP_BWD_DS2, DN>::launch(blocks, stream, a, NH);
    else if (sched >= HOP_BWD_EARLY) HopperBackwardSchedule<HS, HOP_BWD_EARLY, DN>::launch(blocks, stream, a, NH);
    else if (sched == HOP_BWD_KV_REGS) HopperBackwardSchedule<HS, HOP_BWD_KV_REGS, DN>::launch(blocks, stream, a, NH);
    else if (sched == HOP_BWD_OVERLAP) HopperBackwardSchedule<HS, HOP_BWD_OVERLAP, DN>::launch(blocks, stream, a, NH);
    else HopperBackwardSchedule<HS, HOP_BWD_SERIAL, DN>::launch(blocks, stream, a, NH);
}
template <int HS> struct BackwardKernel<HS, 128, BWD_HOPPER> {
    static void launch(unsigned blocks, cudaStream_t stream, const AttnArgs& a, int NH) {
        const bool exact = hopper_hs80_exact();   // (read at every HS, so a bad value is always refused)
        if constexpr (HS == 80) {
            if (exact) launch_hopper_backward_dn<HS, 80>(blocks, stream, a, NH);
            else launch_hopper_backward_dn<HS, 64>(blocks, stream, a, NH);
        } else {
            launch_hopper_backward_dn<HS, 64>(blocks, stream, a, NH);
        }
    }
};

template <int HS, int BK, int LAYOUT = BWD_KEYS>
void launch_backward_tiles(const AttnArgs& args, int B, int NH, cudaStream_t stream) {
    AttnArgs a = args;
    const int nkt = (a.Tk + BK - 1) / BK;
    // floatX dQ is summed over the key tiles in an fp32 accumulator, converted at the end.
    const size_t acc = flash_bwd_accumulator_bytes(B, a.Tq, (size_t)NH * HS, a.dqx != NULL);
    const size_t sems = flash_bwd_semaphore_bytes(B, NH, a.Tq);
    if (acc + sems > 0) {
        unsigned char* ws = attention_workspace(acc + sems, stream);
        CUDA_CHECK(cudaMemsetAsync(ws, 0, acc + sems, stream));
        a.dq_acc = acc ? reinterpret_cast<float*>(ws) : NULL;
        a.dq_sem = reinterpret_cast<unsigned*>(ws + acc);
    }
    a.bwd_head_group = backward_head_group(B * NH);
    a.bwd_lagged_release = backward_lagged_release();
    const long long blocks = (long long)nkt * B * NH;   // one per (key tile, head, sequence)
    CHECK(blocks <= 0x7fffffffLL, "shorten the sequence or split the batch",
          "attention backward: %lld key tiles x heads x sequences over the grid limit 2^31 - 1", blocks);
    if (blocks > 0) BackwardKernel<HS, BK, LAYOUT>::launch((unsigned)blocks, stream, a, NH);
    if (acc) {
        const long long n = (long long)B * a.Tq * NH * HS;
        LAUNCH(flash_dq_convert_kernel, (unsigned)((n + 255) / 256), 256, 0, stream, a, NH * HS);
    }
}

// Keys per backward block: FA_BWD_BK_DEFAULT where its shared memory fits the device (else 64:
// GPUs with 99 KiB per block), or ATTENTION_BWD_KEY_TILE=64|128 (to time both on a GPU, in the
// trainer or the benchmarks, and to test both).
template <int HS> int backward_key_tile(void) {
    const char* env = getenv("ATTENTION_BWD_KEY_TILE");
    if (!env || !*env) return FaBwd<HS, FA_BWD_BK_DEFAULT>::SMEM <= (size_t)cuda_max_dynamic_smem_optin() ? FA_BWD_BK_DEFAULT : 64;
    CHECK(!strcmp(env, "64") || !strcmp(env, "128"), "set it to 64 or 128, or unset it",
          "ATTENTION_BWD_KEY_TILE: expected 64 or 128, found '%s'", env);
    return atoi(env);
}

template <int HS> void launch_backward(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    if constexpr (HS == 64 || HS == 80 || HS == 128) {
        if (use_hopper_backward(a, HS, a.dqx != NULL)) {
            launch_backward_tiles<HS, 128, BWD_HOPPER>(a, B, NH, stream);
            return;
        }
    }
    if constexpr (HS == 64 || HS == 128) {
        if (backward_layout_fa2(HS)) {
            launch_backward_tiles<HS, 128, BWD_FA2>(a, B, NH, stream);
            return;
        }
    }
    if (backward_key_tile<HS>() == 64) launch_backward_tiles<HS, 64>(a, B, NH, stream);
    else launch_backward_tiles<HS, 128>(a, B, NH, stream);
}

template <int HS> size_t smem_forward() { return FaFwd<HS>::SMEM; }
template <int HS> size_t smem_backward() {
    if constexpr (HS == 64 || HS == 128) {
        if (backward_layout_fa2(HS)) return FaBwd2<HS>::SMEM;
    }
    return backward_key_tile<HS>() == 64 ? FaBwd<HS, 64>::SMEM : FaBwd<HS, 128>::SMEM;
}
#endif

// Calls F<HS>(args...) for the supported head sizes.
#define ATTENTION_HS_SWITCH(HSV, F, ...)            \
    switch (HSV) {                                  \
    case 16: F<16>(__VA_ARGS__); break;             \
    case 32: F<32>(__VA_ARGS__); break;             \
    case 48: F<48>(__VA_ARGS__); break;             \
    case 64: F<64>(__VA_ARGS__); break;             \
    case 80: F<80>(__VA_ARGS__); break;             \
    case 96: F<96>(__VA_ARGS__); break;             \
    case 128: F<128>(__VA_ARGS__); break;           \
    default: check_head_size(HSV, __func__); break; \
    }

}  // namespace

// The arguments of a forward call (outputs set by the caller).
static AttnArgs forward_args(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k, int ldk,
                             const floatX* v, int ldv, int ldo, float* lse) {
    AttnArgs a = make_args(p);
    a.q = q;
    a.k = k;
    a.v = v;
    a.ldq = ldq;
    a.ldk = ldk;
    a.ldv = ldv;
    a.ldo = ldo;
    a.lse = lse;
    a.vec = aligned16(q, ldq) && aligned16(k, ldk) && aligned16(v, ldv);
    return a;
}

// A forward into fp32 o and lse: written, or with merge merged into what they hold (who: the
// public function, for messages).
static void partial_forward(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k, int ldk,
                            const floatX* v, int ldv, float* o, int ldo, float* lse, int merge, cudaStream_t stream,
                            const char* who) {
    check_problem(p, who);
    check_head_size(p->HS, who);
    if (p->Tq == 0) return;
    AttnArgs a = forward_args(p, q, ldq, k, ldk, v, ldv, ldo, lse);
    a.o = o;
    a.merge = merge;
    ATTENTION_HS_SWITCH(p->HS, launch_forward, a, p->B, p->NH, stream);
}

void attention_partial_forward_cuda(const AttentionProblem* p,
                                    const floatX* q, int ldq, const floatX* k, int ldk,
                                    const floatX* v, int ldv, float* o, int ldo, float* lse,
                                    cudaStream_t stream) {
    partial_forward(p, q, ldq, k, ldk, v, ldv, o, ldo, lse, 0, stream, __func__);
}

#ifndef GPT_CUDA_FP32
void attention_partial_forward_merge_cuda(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k,
                                          int ldk, const floatX* v, int ldv, float* o, int ldo, float* lse,
                                          cudaStream_t stream) {
    partial_forward(p, q, ldq, k, ldk, v, ldv, o, ldo, lse, 1, stream, __func__);
}
#endif

void attention_forward_cuda(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k, int ldk,
                            const floatX* v, int ldv, floatX* o, int ldo, float* lse, cudaStream_t stream) {
    check_problem(p, __func__);
    check_head_size(p->HS, __func__);
    if (p->Tq == 0) return;
    AttnArgs a = forward_args(p, q, ldq, k, ldk, v, ldv, ldo, lse);
#ifdef GPT_CUDA_FP32
    a.o = o;   // floatX is float
#else
    a.ox = o;
#endif
    ATTENTION_HS_SWITCH(p->HS, launch_forward, a, p->B, p->NH, stream);
}

void attention_row_dot_cuda(const AttentionProblem* p, const floatX* o, int ldo,
                            const floatX* dout, int lddo, float* d, cudaStream_t stream) {
    check_problem(p, __func__);
    const long long rows = (long long)p->B * p->Tq * p->NH;
    if (rows == 0) return;
    LAUNCH(attention_row_dot_kernel, (unsigned)((rows + ROW_WARPS - 1) / ROW_WARPS), 32 * ROW_WARPS, 0,
           stream, p->B, p->NH, p->HS, p->Tq, o, ldo, dout, lddo, d);
}

// The arguments of a backward call (gradients set by the caller).
static AttnArgs backward_args(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k, int ldk,
                              const floatX* v, int ldv, const floatX* dout, int lddo, const float* lse,
                              const float* d, int lddq, int lddk, int lddv) {
    AttnArgs a = make_args(p);
    a.q = q;
    a.k = k;
    a.v = v;
    a.dout = dout;
    a.ldq = ldq;
    a.ldk = ldk;
    a.ldv = ldv;
    a.lddo = lddo;
    a.lse_in = lse;
    a.d = d;
    a.lddq = lddq;
    a.lddk = lddk;
    a.lddv = lddv;
    a.vec = aligned16(q, ldq) && aligned16(k, ldk) && aligned16(v, ldv) && aligned16(dout, lddo);
    a.vec_stats = ((uintptr_t)lse & 15) == 0 && ((uintptr_t)d & 15) == 0 && p->Tq % 4 == 0;
    return a;
}

void attention_partial_backward_cuda(const AttentionProblem* p,
                                     const floatX* q, int ldq, const floatX* k, int ldk,
                                     const floatX* v, int ldv, const floatX* dout, int lddo,
                                     const float* lse, const float* d,
                                     float* dq, int lddq, float* dk, int lddk, float* dv, int lddv,
                                     cudaStream_t stream) {
    check_problem(p, __func__);
    check_head_size(p->HS, __func__);
    if (p->Tq == 0 || p->Tk == 0) return;   // nothing is visible: every gradient += 0
    AttnArgs a = backward_args(p, q, ldq, k, ldk, v, ldv, dout, lddo, lse, d, lddq, lddk, lddv);
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    ATTENTION_HS_SWITCH(p->HS, launch_backward, a, p->B, p->NH, stream);
}

void attention_backward_cuda(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k, int ldk,
                             const floatX* v, int ldv, const floatX* dout, int lddo, const float* lse,
                             const float* d, floatX* dq, int lddq, floatX* dk, int lddk, floatX* dv, int lddv,
                             cudaStream_t stream) {
    check_problem(p, __func__);
    check_head_size(p->HS, __func__);
#ifdef GPT_CUDA_FP32
    // floatX is float: zero, then the accumulating kernels.
    zero_heads(dq, lddq, (long long)p->B * p->Tq, p->NH * p->HS, stream);
    zero_heads(dk, lddk, (long long)p->B * p->Tk, p->NH * p->HS, stream);
    zero_heads(dv, lddv, (long long)p->B * p->Tk, p->NH * p->HS, stream);
    attention_partial_backward_cuda(p, q, ldq, k, ldk, v, ldv, dout, lddo, lse, d, dq, lddq, dk, lddk, dv, lddv,
                                    stream);
#else
    if (p->Tq == 0 && p->Tk == 0) return;
    AttnArgs a = backward_args(p, q, ldq, k, ldk, v, ldv, dout, lddo, lse, d, lddq, lddk, lddv);
    a.dqx = dq;
    a.dkx = dk;
    a.dvx = dv;
    ATTENTION_HS_SWITCH(p->HS, launch_backward, a, p->B, p->NH, stream);
#endif
}

void attention_merge_cuda(int B, int NH, int HS, int T, float* o_a, int lda, float* lse_a,
                          const float* o_b, int ldb, const float* lse_b, cudaStream_t stream) {
    CHECK(B > 0 && NH > 0 && HS > 0 && T >= 0, "caller bug",
          "attention_merge_cuda: non-positive size (B=%d NH=%d HS=%d T=%d)", B, NH, HS, T);
    const long long rows = (long long)B * T * NH;
    if (rows == 0) return;
    LAUNCH(attention_merge_kernel, (unsigned)((rows + ROW_WARPS - 1) / ROW_WARPS), 32 * ROW_WARPS, 0,
           stream, B, NH, HS, T, o_a, lda, lse_a, o_b, ldb, lse_b);
}

int attention_cuda_forward_splits(const AttentionProblem* p) {
    check_problem(p, __func__);
    check_head_size(p->HS, __func__);
#ifdef GPT_CUDA_FP32
    return 1;
#else
    const AttnArgs a = make_args(p);
    switch (p->HS) {
    case 16: return forward_split_count<16>(a, p->NH);
    case 32: return forward_split_count<32>(a, p->NH);
    case 48: return forward_split_count<48>(a, p->NH);
    case 64: return forward_split_count<64>(a, p->NH);
    case 80: return forward_split_count<80>(a, p->NH);
    case 96: return forward_split_count<96>(a, p->NH);
    default: return forward_split_count<128>(a, p->NH);
    }
#endif
}

const char* attention_cuda_forward_kernel(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k,
                                          int ldk, const floatX* v, int ldv) {
    check_problem(p, __func__);
    check_head_size(p->HS, __func__);
#ifdef GPT_CUDA_FP32
    (void)q, (void)ldq, (void)k, (void)ldk, (void)v, (void)ldv;
    return "fma";
#else
    return use_hopper_forward(forward_args(p, q, ldq, k, ldk, v, ldv, 0, NULL), p->HS) ? "sm90" : "sm80";
#endif
}

const char* attention_cuda_backward_kernel(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k,
                                           int ldk, const floatX* v, int ldv, const floatX* dout, int lddo,
                                           const float* lse, const float* d, const float* dq, int lddq) {
    check_problem(p, __func__);
    check_head_size(p->HS, __func__);
#ifdef GPT_CUDA_FP32
    (void)q, (void)ldq, (void)k, (void)ldk, (void)v, (void)ldv, (void)dout, (void)lddo, (void)lse, (void)d, (void)dq,
        (void)lddq;
    return "fma";
#else
    AttnArgs a = backward_args(p, q, ldq, k, ldk, v, ldv, dout, lddo, lse, d, lddq, 0, 0);
    a.dq = const_cast<float*>(dq);
    if (!use_hopper_backward(a, p->HS, dq == NULL)) return "sm80";
    return hopper_backward_q128(hopper_backward_schedule(), p->HS, a.Tq) ? "sm90-q128" : "sm90";
#endif
}

size_t attention_cuda_forward_smem(int HS) {
    size_t bytes = 0;
    switch (HS) {
    case 16: bytes = smem_forward<16>(); break;
    case 32: bytes = smem_forward<32>(); break;
    case 48: bytes = smem_forward<48>(); break;
    case 64: bytes = smem_forward<64>(); break;
    case 80: bytes = smem_forward<80>(); break;
    case 96: bytes = smem_forward<96>(); break;
    case 128: bytes = smem_forward<128>(); break;
    default: break;
    }
    return bytes;
}

size_t attention_cuda_backward_smem(int HS) {
    size_t bytes = 0;
    switch (HS) {
    case 16: bytes = smem_backward<16>(); break;
    case 32: bytes = smem_backward<32>(); break;
    case 48: bytes = smem_backward<48>(); break;
    case 64: bytes = smem_backward<64>(); break;
    case 80: bytes = smem_backward<80>(); break;
    case 96: bytes = smem_backward<96>(); break;
    case 128: bytes = smem_backward<128>(); break;
    default: break;
    }
    return bytes;
}
