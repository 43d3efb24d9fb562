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
    // AttentionProblem.docs, in device memory (kernels only: the host never reads them): (B, doc_T)
    // per position, the first position of its document and one past its last; doc_start NULL: no
    // document mask. Key j visible iff also kpos(j) >= doc_start[b, qpos(i)].
    const int* doc_start;
    const int* doc_end;
    int doc_T;
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

// Whether rows are bounded from below too (a sliding window or a document mask): such calls take
// the SPLIT forward and the key-tile backward, never the Hopper kernels nor the FA2 layout. Reads
// no bounds: host code too.
__host__ __device__ __forceinline__ bool masked_below(const AttnArgs& a) { return a.window > 0 || a.doc_start; }

// The first local key at or after position lowest: j >= key_at  <=>  kpos(j) >= lowest.
__host__ __device__ __forceinline__ int key_at(const AttnArgs& a, long long lowest) {
    const long long rel = lowest - a.koff;
    if (rel <= 0) return 0;
    const long long n = (rel + a.kstride - 1) / a.kstride;
    return n < a.Tk ? (int)n : a.Tk;
}

// The first local query at or after position lowest: i >= query_at  <=>  qpos(i) >= lowest.
__device__ __forceinline__ int query_at(const AttnArgs& a, long long lowest) {
    const long long rel = lowest - a.qoff;
    if (rel <= 0) return 0;
    const long long n = (rel + a.qstride - 1) / a.qstride;
    return n < a.Tq ? (int)n : a.Tq;
}

// Under a sliding window (a.window > 0), the first local key query i sees by the window alone (0
// without one): j >= window_first_key  <=>  kpos(j) > qpos(i) - window. Reads no document bounds:
// the launcher's planning (forward_key_tiles) uses it on the host.
__host__ __device__ __forceinline__ int window_first_key(const AttnArgs& a, int i) {
    return a.window > 0 ? key_at(a, a.qoff + a.qstride * i - a.window + 1) : 0;
}

// The first local key query i of sequence b sees: the later of its window's lower edge and its
// document's first position (kpos(j) >= doc_start[b, qpos(i)]). Query i sees keys
// [first_visible_key(a, b, i), visible_keys(a, i)). Both bounds grow with i. A query past Tq (a
// tile's padding row, which sees nothing) reads no bounds.
__device__ __forceinline__ int first_visible_key(const AttnArgs& a, int b, int i) {
    const int w = window_first_key(a, i);
    if (!a.doc_start || i >= a.Tq) return w;
    const int d = key_at(a, a.doc_start[(long long)b * a.doc_T + a.qoff + a.qstride * i]);
    return d > w ? d : w;
}

// One past the last local query of sequence b that sees local key j (a.Tq without a window or
// documents): the earlier of the window's (qpos(i) < kpos(j) + window) and the document's end
// (qpos(i) < doc_end[b, kpos(j)], the same as the start bound for the causal pairs). Key j is seen
// by the queries [first_query(a, j), query_end(a, b, j)). Nondecreasing in j. A key past Tk reads
// no bounds.
__device__ __forceinline__ int query_end(const AttnArgs& a, int b, int j) {
    const long long kp = a.koff + a.kstride * j;
    const int w = a.window > 0 ? query_at(a, kp + a.window) : a.Tq;
    if (!a.doc_start || j >= a.Tk) return w;
    const int d = query_at(a, a.doc_end[(long long)b * a.doc_T + kp]);
    return d < w ? d : w;
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
