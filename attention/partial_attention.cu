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
// The row-dot, the merge, the argument checks and the launchers are shared. On a compute capability 9.0
// device the bf16 build hands the calls they serve to the Hopper kernels (wgmma, TMA, warp
// specialised; attention/hopper_launch.h), whose launchers are files of their own.
//
// Mask. Key j is visible to query i iff kpos(j) <= qpos(i); positions grow with the index, so a
// query sees a prefix of the keys (visible_keys) and a key is seen by a suffix of the queries
// (first_query). Forward passes stop at the keys the tile's last query sees and skip, per warp,
// the 16-key blocks none of its rows sees; backward passes start at the first query tile that
// sees the key tile's first key, and warps whose keys see none of a query tile skip it. A sliding
// window and a document mask bound each query's keys from below as well (first_visible_key) and
// each key's queries from above (query_end); both bounds grow with the position, so tiles keep
// contiguous ranges. Such calls (masked_below) run the split forward and the key-tile backward of
// the sm_80 class, or the Hopper kernels' LOWER instances; never the FA2-layout backward. The
// document bounds live in device memory: kernels read them, the host (launcher, planning) never does.
//
// Every kernel is deterministic: each output element has one writer per launch, but for the bf16
// backward's dQ, whose atomic adds take turns in a fixed order (flash_backward.cuh).
#include "attention/attention_args.cuh"
#include "attention/attention_env.h"
#include "attention/flash_workspace.h"
#include "attention/hopper_launch.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace {

#ifdef GPT_CUDA_FP32
// ==== fp32 build: tiled FMA kernels (mma.sync takes no fp32 inputs) ===============================
#include "attention/fma_attention.cuh"
#else
// ==== bf16 build: FlashAttention-2-class kernels on mma.sync ======================================
#include "attention/flash_forward.cuh"
#include "attention/flash_backward.cuh"
#include "attention/flash_backward_fa2.cuh"
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

// ---- grouped-query attention: widened K/V, gradients summed over each group ---------------------
// y (rows, NH*HS) <- x (rows, NKV*HS, row stride ldx): every query head gets its K/V head
// (attention_kv_head), so the kernels below run one K/V head per query head.
__global__ void __launch_bounds__(256)
gqa_widen_kernel(const floatX* x, int ldx, floatX* y, int NH, int NKV, int HS, long long rows) {
    const long long C = (long long)NH * HS;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;   // (row, h, c)
    if (idx >= rows * C) return;
    const long long row = idx / C;
    const int h = (int)(idx % C) / HS, c = (int)(idx % C) % HS;
    y[idx] = x[row * ldx + (long long)attention_kv_head(NH, NKV, h) * HS + c];
}

// For each (row, K/V head, channel) the sum of x (rows, NH*HS) over the group's query heads, in
// head order: added to acc (fp32, row stride ld) or, where acc is NULL, written to out (floatX).
// NKV = NH converts (a group of one).
__global__ void __launch_bounds__(256)
gqa_group_sum_kernel(const float* x, int NH, int NKV, int HS, long long rows, float* acc, floatX* out, int ld) {
    const int KVC = NKV * HS, G = NH / NKV;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;   // (row, kv head, c)
    if (idx >= rows * KVC) return;
    const long long row = idx / KVC;
    const int j = (int)(idx % KVC), kvh = j / HS, c = j % HS;
    const float* xr = x + row * NH * HS + (long long)kvh * G * HS + c;
    float sum = 0.0f;
    for (int g = 0; g < G; g++) sum += xr[(long long)g * HS];
    if (acc) acc[row * ld + j] += sum;
    else out[row * ld + j] = from_float<floatX>(sum);
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

// The backward's floatX dQ (the sm80 kernels' or the Hopper one's): dqx = the fp32 accumulator
// a.dq_acc (B, Tq, C), row by row into dqx's stride.
__global__ void __launch_bounds__(256) flash_dq_convert_kernel(const AttnArgs a, int C) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;   // (b, i, c)
    if (idx >= (long long)a.B * a.Tq * C) return;
    a.dqx[idx / C * a.lddq + idx % C] = from_float<floatX>(a.dq_acc[idx]);
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
    CHECK(p->NKV > 0 && p->NH % p->NKV == 0, "caller bug",
          "%s: %d key/value heads do not divide %d query heads", who, p->NKV, p->NH);
    if (p->docs.start) {
        // Host-side arithmetic only: the bounds themselves are device memory.
        CHECK(p->docs.end && p->docs.T > 0, "caller bug",
              "%s: document bounds without their end positions or length (T=%d)", who, p->docs.T);
        const long qlast = p->qpos.off + p->qpos.stride * (p->Tq - 1);
        const long klast = p->kpos.off + p->kpos.stride * (p->Tk - 1);
        CHECK((p->Tq == 0 || (p->qpos.off >= 0 && qlast < p->docs.T)) &&
                  (p->Tk == 0 || (p->kpos.off >= 0 && klast < p->docs.T)), "caller bug",
              "%s: positions (queries %ld..%ld, keys %ld..%ld) outside the document bounds' 0..%d", who,
              p->qpos.off, qlast, p->kpos.off, klast, p->docs.T - 1);
        // Split-KV plans on the host, which cannot read the bounds; the trainer never decodes with them.
        CHECK(!p->decode, "caller bug", "%s: a decoding step with a document mask (decoding takes none)", who);
    }
}

void check_head_size(int HS, const char* who) {
    CHECK(attention_cuda_head_size_ok(HS),
          "the tensor-core tiles are 16 wide: pad the head to a multiple of 16",
          "%s: head size %d is not supported (" ATTENTION_CUDA_HEAD_SIZES ")", who, HS);
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
    a.window = p->window;
    a.doc_start = p->docs.start;
    a.doc_end = p->docs.end;
    a.doc_T = p->docs.T;
    a.scale = 1.0f / sqrtf((float)p->HS);
    a.scale_log2 = a.scale * LOG2E;
    a.decode = p->decode;
    a.splits = 1;
    return a;
}

// The kernels' workspaces, one buffer per (device, stream, slot), kept between calls and grown in
// stream order when a call needs more: after the first step nothing is allocated. Calls on one
// stream run in order, so they can share a slot; the module holds at most 16 buffers. A CUDA graph
// captures the buffer's address: growing inside a capture is refused, and a buffer a capture has
// used is kept when a later (uncaptured, larger) call grows the slot, since the graph still reads it
// (say, the sampler's forward over a context longer than the training calls, under --kv-heads).
enum WorkspaceSlot {
    WS_KERNELS,   // the backward's (the fp32 dQ accumulator, then the semaphores, zeroed by each
                  // call) and split-KV's partials (decoding only)
    WS_GQA,       // grouped-query attention's widened K|V and dQ|dK|dV (gqa_* below), which hold
                  // a call's inputs while its kernels use WS_KERNELS
};
unsigned char* attention_workspace(WorkspaceSlot slot, size_t bytes, cudaStream_t stream) {
    struct Workspace {
        int device, slot;
        cudaStream_t stream;
        unsigned char* ptr;
        size_t bytes;
        int captured;   // a graph capture took ptr
    };
    static Workspace ws[16];
    static int n = 0;
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    Workspace* w = NULL;
    for (int i = 0; i < n && !w; i++)
        if (ws[i].device == dev && ws[i].stream == stream && ws[i].slot == slot) w = &ws[i];
    if (!w) {
        CHECK(n < 16, "issue the attention kernels on fewer streams",
              "attention: workspaces for more than 16 (device, stream, slot) triples");
        w = &ws[n++];
        w->device = dev, w->slot = slot, w->stream = stream, w->ptr = NULL, w->bytes = 0;
        w->captured = 0;
    }
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (w->bytes < bytes) {   // stream-ordered: no host synchronisation
        CHECK(capture == cudaStreamCaptureStatusNone, "run the calls once before capturing them",
              "attention: workspace %d would grow from %zu to %zu bytes inside a CUDA graph capture",
              (int)slot, w->bytes, bytes);
        if (w->ptr && !w->captured) CUDA_CHECK(cudaFreeAsync(w->ptr, stream));
        CUDA_CHECK(cudaMallocAsync((void**)&w->ptr, bytes, stream));
        w->bytes = bytes;
        w->captured = 0;
    }
    if (capture != cudaStreamCaptureStatusNone) w->captured = 1;
    return w->ptr;
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

// Split-KV, the forward's key tiles cut over several blocks per query tile: for a decoding step
// (a.decode) whose grid of `blocks` is under two waves of the kernel's 2 blocks per SM
// (__launch_bounds__), enough splits for two waves, at most FWD_MAX_SPLITS and one per key tile
// a query tile sees (key_tiles: forward_key_tiles). ATTENTION_FWD_SPLITS=N forces N (capped the
// same way) on every forward call, training included (tests and timing: its scratch is then
// outside the memory budget); 1 never splits.
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

// The most key tiles of BK one query tile of BQ sees (what split-KV may cut): every key tile of the
// problem (as before the window), or under a sliding window the widest band's, from the tile
// holding the tile's first query's first key to the one holding its last query's last. Host code:
// a document mask's bounds are device memory, never read here; with one, the count is the
// window's (or the causal one), an upper bound: a split whose range holds no visible key writes
// an empty partial, which the merge weighs 0. (Decoding, split-KV's own case, takes no documents.)
static int forward_key_tiles(const AttnArgs& a, int BQ, int BK) {
    if (!a.window) return (a.Tk + BK - 1) / BK;
    int most = 0;
    for (int i0 = 0; i0 < a.Tq; i0 += BQ) {
        const int last = (a.Tq - i0 < BQ ? a.Tq : i0 + BQ) - 1;
        const int n = (visible_keys(a, last) + BK - 1) / BK - window_first_key(a, i0) / BK;
        most = n > most ? n : most;
    }
    return most;
}

template <int HS> int forward_split_count(const AttnArgs& a, int NH) {
    typedef FaFwd<HS> F;
    const long long qtiles = (a.Tq + F::BQ - 1) / F::BQ;
    return forward_splits(a, qtiles * NH * a.B, forward_key_tiles(a, F::BQ, F::BK));
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

// The Hopper forward takes 16-byte aligned inputs and no decoding step (those keep split-KV);
// under a sliding window or a document mask (masked_below) its LOWER instance.
static bool use_hopper_forward(const AttnArgs& a, int HS) {
    return hopper_kernel_wanted("ATTENTION_FWD_KERNEL", "forward") && hopper_head_size(HS) && a.vec && !a.decode;
}

// The Hopper backward takes 16-byte aligned inputs, lse and D in 4-row chunks, Tq a multiple of
// its 64-query tiles, and a dQ destination whose rows TMA can address (the fp32 accumulator of a
// floatX dQ always is); under a sliding window or a document mask (masked_below) its LOWER
// instance.
static bool use_hopper_backward(const AttnArgs& a, int HS, bool floatx_dq) {
    const bool dq_ok = floatx_dq || (a.lddq % 4 == 0 && (uintptr_t)a.dq % 16 == 0);
    return hopper_kernel_wanted("ATTENTION_BWD_KERNEL", "backward") && hopper_head_size(HS) && a.vec &&
           a.vec_stats && a.Tq % FA_BWD_BQ == 0 && dq_ok;
}

template <int HS> void launch_forward(AttnArgs a, int B, int NH, cudaStream_t stream) {
    typedef FaFwd<HS> F;
    if (use_hopper_forward(a, HS)) {
        a.splits = 1;
        hopper_forward_launch(a, HS, B, NH, stream);
        return;
    }
    const size_t smem = F::SMEM;
    CUDA_RAISE_DYNAMIC_SMEM((flash_forward_kernel<HS, false>), smem, "head size", HS);
    CUDA_RAISE_DYNAMIC_SMEM((flash_forward_kernel<HS, true>), smem, "head size", HS);
    const unsigned qtiles = (unsigned)((a.Tq + F::BQ - 1) / F::BQ);
    a.splits = a.merge ? 1 : forward_split_count<HS>(a, NH);   // (the merging forward never splits)
    if (a.splits == 1) {
        // A sliding window's or a document's key tiles start past 0: the SPLIT instance, one range
        // per query tile.
        if (masked_below(a)) LAUNCH((flash_forward_kernel<HS, true>), dim3(qtiles, (unsigned)NH, (unsigned)B), F::THREADS, smem, stream, a);
        else LAUNCH((flash_forward_kernel<HS, false>), dim3(qtiles, (unsigned)NH, (unsigned)B), F::THREADS, smem, stream, a);
        return;
    }
    // Split-KV: the partials into the stream's workspace (shared with the backward's dQ), then merged.
    AttnArgs part = a;
    const size_t prows = (size_t)a.splits * B * a.Tq;
    part.o = (float*)attention_workspace(WS_KERNELS, prows * NH * (HS + 1) * sizeof(float), stream);
    part.lse = part.o + prows * NH * HS;
    part.ox = nullptr;
    part.ldo = NH * HS;
    LAUNCH((flash_forward_kernel<HS, true>), dim3(qtiles, (unsigned)NH, (unsigned)(B * a.splits)), F::THREADS, smem,
           stream, part);
    const long long rows = (long long)B * a.Tq * NH;
    LAUNCH(flash_split_merge_kernel, (unsigned)((rows + ROW_WARPS - 1) / ROW_WARPS), 32 * ROW_WARPS, 0, stream, B,
           a.Tq, NH, HS, a.splits, part.o, part.lse, a.o, a.ox, a.ldo, a.lse);
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
// (flash_backward_fa2.cuh, HS 64 and 128, causal calls without documents; elsewhere the default):
// ATTENTION_BWD_LAYOUT=keys|fa2, to time both on a GPU. Each gives its own bits (another order of
// the products), each deterministic. (attention_cuda_backward_smem reports the causal calls'.)
static int backward_layout_fa2(int hs) {
    return env_switch("ATTENTION_BWD_LAYOUT", "keys", "fa2") && (hs == 64 || hs == 128);
}

// The backward kernel of a layout: its shared memory, threads, and launch. BWD_KEYS: each warp 16
// keys of the tile (flash_backward.cuh); BWD_FA2: FlashAttention-2's (flash_backward_fa2.cuh);
// BWD_HOPPER: the sm_90a kernel (hopper_backward.cuh, launched by hopper_backward.cu) in the schedule
// ATTENTION_BWD_HOPPER names (the same bits in each). Each deterministic, each its own bits.
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
template <int HS> struct BackwardKernel<HS, 128, BWD_HOPPER> {
    static void launch(unsigned blocks, cudaStream_t stream, const AttnArgs& a, int NH) {
        hopper_backward_launch(a, HS, NH, blocks, stream);
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
        unsigned char* ws = attention_workspace(WS_KERNELS, acc + sems, stream);
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
        if (backward_layout_fa2(HS) && !masked_below(a)) {   // (causal only: flash_backward_fa2.cuh)
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

int attention_cuda_head_size_ok(int HS) { return HS % 16 == 0 && HS >= 16 && HS <= 128; }

// ---- grouped-query attention ---------------------------------------------------------------------
// A call with NKV < NH runs the kernels on K and V widened to NH heads in the WS_GQA workspace
// (each K/V head repeated for its group), and its backward sums the widened dK and dV over each
// group, in head order (so the bits repeat). That costs passes over B*Tk*NH*HS elements, small
// beside a call's Tq*Tk scores at training lengths; kernels that read a group's K/V head in place
// (FlashAttention-2's way) would save them and are not written yet.
struct GqaCall {
    AttentionProblem p;     // the call with NKV = NH
    const floatX *k, *v;    // (B, Tk, NH*HS) rows of stride ld
    int ld;
    unsigned char* rest;    // `extra` bytes after them, for the backward's gradients
};

static long long gqa_blocks(long long n) { return (n + 255) / 256; }

static GqaCall gqa_widen(const AttentionProblem* p, const floatX* k, int ldk, const floatX* v, int ldv, size_t extra,
                         cudaStream_t stream) {
    const long long rows = (long long)p->B * p->Tk, C = (long long)p->NH * p->HS;
    const size_t kv_bytes = gqa_kv_bytes(p->B, p->Tk, p->NH, p->HS, sizeof(floatX));
    unsigned char* ws = attention_workspace(WS_GQA, kv_bytes + extra, stream);
    GqaCall g;
    g.p = *p;
    g.p.NKV = p->NH;
    floatX* kw = (floatX*)ws;
    floatX* vw = kw + rows * C;
    if (rows > 0) {
        LAUNCH(gqa_widen_kernel, (unsigned)gqa_blocks(rows * C), 256, 0, stream, k, ldk, kw, p->NH, p->NKV, p->HS,
               rows);
        LAUNCH(gqa_widen_kernel, (unsigned)gqa_blocks(rows * C), 256, 0, stream, v, ldv, vw, p->NH, p->NKV, p->HS,
               rows);
    }
    g.k = kw, g.v = vw, g.ld = (int)C, g.rest = ws + kv_bytes;
    return g;
}

// x (rows, NH*HS) summed over the groups of NH / NKV heads into acc (+=) or out (written).
static void gqa_group_sum(const float* x, int NH, int NKV, int HS, long long rows, float* acc, floatX* out, int ld,
                          cudaStream_t stream) {
    const long long n = rows * NKV * HS;
    if (n > 0) LAUNCH(gqa_group_sum_kernel, (unsigned)gqa_blocks(n), 256, 0, stream, x, NH, NKV, HS, rows, acc, out, ld);
}

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
    if (p->NKV != p->NH) {
        const GqaCall g = gqa_widen(p, k, ldk, v, ldv, 0, stream);
        partial_forward(&g.p, q, ldq, g.k, g.ld, g.v, g.ld, o, ldo, lse, merge, stream, who);
        return;
    }
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
    if (p->NKV != p->NH) {
        const GqaCall g = gqa_widen(p, k, ldk, v, ldv, 0, stream);
        attention_forward_cuda(&g.p, q, ldq, g.k, g.ld, g.v, g.ld, o, ldo, lse, stream);
        return;
    }
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
    if (p->NKV != p->NH) {
        const long long rows = (long long)p->B * p->Tk, C = (long long)p->NH * p->HS;
        const size_t grads = gqa_grad_bytes(p->B, p->Tq, p->Tk, p->NH, p->HS, 0);
        const GqaCall g = gqa_widen(p, k, ldk, v, ldv, grads, stream);
        float* dkw = (float*)g.rest;   // (B, Tk, C) each
        float* dvw = dkw + rows * C;
        CUDA_CHECK(cudaMemsetAsync(dkw, 0, grads, stream));
        attention_partial_backward_cuda(&g.p, q, ldq, g.k, g.ld, g.v, g.ld, dout, lddo, lse, d, dq, lddq, dkw,
                                        (int)C, dvw, (int)C, stream);
        gqa_group_sum(dkw, p->NH, p->NKV, p->HS, rows, dk, NULL, lddk, stream);
        gqa_group_sum(dvw, p->NH, p->NKV, p->HS, rows, dv, NULL, lddv, stream);
        return;
    }
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
    zero_heads(dk, lddk, (long long)p->B * p->Tk, p->NKV * p->HS, stream);
    zero_heads(dv, lddv, (long long)p->B * p->Tk, p->NKV * p->HS, stream);
    attention_partial_backward_cuda(p, q, ldq, k, ldk, v, ldv, dout, lddo, lse, d, dq, lddq, dk, lddk, dv, lddv,
                                    stream);
#else
    if (p->Tq == 0 && p->Tk == 0) return;
    if (p->NKV != p->NH) {
        // The fp32 gradients of the widened call, summed (dK, dV) and rounded once into floatX.
        const long long qrows = (long long)p->B * p->Tq, rows = (long long)p->B * p->Tk, C = (long long)p->NH * p->HS;
        const size_t grads = gqa_grad_bytes(p->B, p->Tq, p->Tk, p->NH, p->HS, 1);
        const GqaCall g = gqa_widen(p, k, ldk, v, ldv, grads, stream);
        float* dqw = (float*)g.rest;   // (B, Tq, C), then (B, Tk, C) twice
        float* dkw = dqw + qrows * C;
        float* dvw = dkw + rows * C;
        CUDA_CHECK(cudaMemsetAsync(dqw, 0, grads, stream));
        attention_partial_backward_cuda(&g.p, q, ldq, g.k, g.ld, g.v, g.ld, dout, lddo, lse, d, dqw, (int)C, dkw,
                                        (int)C, dvw, (int)C, stream);
        gqa_group_sum(dqw, p->NH, p->NH, p->HS, qrows, NULL, dq, lddq, stream);
        gqa_group_sum(dkw, p->NH, p->NKV, p->HS, rows, NULL, dk, lddk, stream);
        gqa_group_sum(dvw, p->NH, p->NKV, p->HS, rows, NULL, dv, lddv, stream);
        return;
    }
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
    return !masked_below(a) && hopper_backward_takes_q128(p->HS, a.Tq) ? "sm90-q128" : "sm90";
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
