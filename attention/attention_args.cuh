// The attention kernels' arguments (AttnArgs) and the mask and merge helpers of every kernel of
// attention/partial_attention.cu, hopper_forward.cu and hopper_backward.cu. AttnArgs is one type at
// file scope, as the launchers of those files pass it to one another; the device helpers are, as
// the kernels, each file's own (an unnamed namespace).
#pragma once
#include "attention/partial_attention_cuda.cuh"

#include <math.h>

// `#pragma unroll` for nvcc; g++ (the host runtime) would warn about an unknown pragma.
#if defined(__CUDACC__)
#define ATTN_UNROLL _Pragma("unroll")
#define ATTN_NO_UNROLL _Pragma("unroll 1")
#else
#define ATTN_UNROLL
#define ATTN_NO_UNROLL
#endif

// What a kernel call computes: the problem, its tensors and the launcher's choices.
struct AttnArgs {
    int Tq, Tk;
    long long qoff, qstride, koff, kstride;
    long long window;  // AttentionProblem.window: 0 (causal) or W, key j visible iff qpos(i) - W < kpos(j) <= qpos(i)
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

namespace {

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;


// Keys visible to local query i: j < visible_keys  <=>  koff + kstride*j <= qpos(i), computed in
// I: long long (visible_keys), or int where the positions fit (hopper_forward.cu's positions_fit_32;
// NARROW in visible_keys_as): a 64-bit division is a call, and in a loop the values live across it
// spill (the Hopper forward's persistent grid). Host code too: the launcher counts a sliding
// window's key tiles with these (forward_key_tiles).
template <typename I> __host__ __device__ __forceinline__ int visible_keys_in(const AttnArgs& a, int i) {
    const I rel = (I)a.qoff + (I)a.qstride * i - (I)a.koff;
    if (rel < 0) return 0;
    const I n = rel / (I)a.kstride + 1;
    return n < a.Tk ? (int)n : a.Tk;
}
__host__ __device__ __forceinline__ int visible_keys(const AttnArgs& a, int i) { return visible_keys_in<long long>(a, i); }
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

// Under a sliding window (a.window > 0), the first local key query i sees (0 without one):
// j >= first_visible_key  <=>  kpos(j) > qpos(i) - window. Query i sees keys
// [first_visible_key(a, i), visible_keys(a, i)).
__host__ __device__ __forceinline__ int first_visible_key(const AttnArgs& a, int i) {
    if (a.window <= 0) return 0;
    const long long rel = a.qoff + a.qstride * i - a.window + 1 - a.koff;
    if (rel <= 0) return 0;
    const long long n = (rel + a.kstride - 1) / a.kstride;
    return n < a.Tk ? (int)n : a.Tk;
}

// Under a sliding window, one past the last local query that sees local key j (a.Tq without
// one): i < query_end  <=>  qpos(i) < kpos(j) + window. Key j is seen by the queries
// [first_query(a, j), query_end(a, j)).
__device__ __forceinline__ int query_end(const AttnArgs& a, int j) {
    if (a.window <= 0) return a.Tq;
    const long long rel = a.koff + a.kstride * j + a.window - a.qoff;   // qstride * i < rel
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

}  // namespace
