// Partial (local) causal attention over a set of queries and a set of keys with absolute token
// positions, returning the output and the per-row log-sum-exp. One kernel serves single-device
// attention (offsets 0, strides 1), every ATTENTION2D mesh shape, Ring and Striped.
//
// Layout: rows are tokens, heads are contiguous slices of a row. For sequence b and local query
// i, head h starts at q + (b*Tq + i)*ldq + h*HS (the same for k, v, o with their own strides), so
// the kernel reads Q, K, V straight out of a fused (B, T, 3C) QKV activation.
#pragma once
#include "model/real.h"

#ifdef __cplusplus
extern "C" {
#endif

// Absolute position of local token i: off + stride * i.
typedef struct {
    long off, stride;
} TokenPositions;

// The absolute positions of a layer's local tokens: local token i is at
// off[i % chunks] + stride * (i / chunks). chunks = 1: one arithmetic progression (single device,
// Ring's contiguous chunk, the cyclic layout of ATTENTION2D and Striped). chunks = 2: two runs
// interleaved (Zigzag's chunks r and 2P-1-r, local tokens alternating between them), so each run
// is a strided view of the local rows, (off[g], stride) with twice the row stride, and a schedule
// hands it to the kernels as it is.
typedef struct {
    long off[2];
    long stride;
    int chunks;
} TokenLayout;

#if defined(__CUDACC__)
#define TOKEN_LAYOUT_HD __host__ __device__
#else
#define TOKEN_LAYOUT_HD
#endif

static inline TOKEN_LAYOUT_HD long token_layout_position(TokenLayout l, long i) {
    return l.chunks == 2 ? l.off[i & 1] + l.stride * (i >> 1) : l.off[0] + l.stride * i;
}

// Document masking (packed sequences): several documents share a sequence, and a query sees only
// the keys of its own document. start, end: (B, T) arrays in the memory the kernels run on,
// indexed by absolute position: the first position of the token's document and one past its last.
// Indexed by position, the same two arrays serve every schedule, layout and mesh position.
// start == NULL: no document mask.
typedef struct {
    const int* start;
    const int* end;
    int T;      // positions per sequence (the row length of start and end)
    int span;   // the most keys any query's document gives it, max over (b, t) of
                // t - start[b, t] + 1, computed on the host (document_span): a schedule may skip
                // the blocks no query reaches back to; 0: unknown (nothing skipped)
} DocumentBounds;

typedef struct {
    int B, NH, HS;           // sequences, query heads, channels per head
    int Tq, Tk;              // local queries and keys per sequence
    TokenPositions qpos;     // positions of the queries
    TokenPositions kpos;     // positions of the keys; key j is visible to query i iff kpos(j) <= qpos(i)
    long window;             // 0: every earlier key (causal); W >= 1: sliding-window (banded)
                             // attention, key j visible iff qpos(i) - W < kpos(j) <= qpos(i)
    DocumentBounds docs;     // and, where docs.start is set, iff kpos(j) >= docs.start[b, qpos(i)]
                             // (for such pairs the same as qpos(i) < docs.end[b, kpos(j)])
    int decode;              // a decoding step (attention/decode_attention.c: a few queries, a long
                             // cache): the CUDA forward may split the keys over blocks and merge
                             // the partials (split-KV) when its grid is under two waves; 0 elsewhere
    int NKV;                 // key/value heads (grouped-query attention): query head h reads K/V
                             // head h / (NH / NKV) (attention_kv_head); NKV = NH (the default):
                             // one K/V head per query head. k, v and dk, dv rows hold NKV heads.
} AttentionProblem;

// Constructors that C and the C++ builds of the same sources (CUDA) both accept.
static inline TokenPositions token_positions(long off, long stride) {
    TokenPositions t;
    t.off = off;
    t.stride = stride;
    return t;
}
// One arithmetic progression, as a layer's layout.
static inline TokenLayout token_layout(TokenPositions p) {
    TokenLayout l;
    l.off[0] = l.off[1] = p.off;
    l.stride = p.stride;
    l.chunks = 1;
    return l;
}
// pos[i] = position of local token i, for i < n.
static inline void token_layout_positions(TokenLayout l, long n, long* pos) {
    for (long i = 0; i < n; i++) pos[i] = token_layout_position(l, i);
}
// Run g of a layout (g < chunks) as the positions of its tokens.
static inline TokenPositions token_layout_run(TokenLayout l, int g) {
    return token_positions(l.off[g], l.stride);
}
static inline AttentionProblem attention_problem(int B, int NH, int HS, int Tq, int Tk,
                                                 TokenPositions qpos, TokenPositions kpos) {
    AttentionProblem p;
    p.B = B, p.NH = NH, p.HS = HS, p.Tq = Tq, p.Tk = Tk, p.qpos = qpos, p.kpos = kpos;
    p.NKV = NH;
    p.window = 0;
    p.docs.start = p.docs.end = NULL;
    p.docs.T = 0;
    p.decode = 0;
    return p;
}

// The K/V head query head h reads: the NH / NKV query heads of a group share one, in order
// (heads 0 .. NH/NKV - 1 read K/V head 0), as Megatron-LM's and Hugging Face's GQA do.
static inline TOKEN_LAYOUT_HD int attention_kv_head(int NH, int NKV, int h) { return h / (NH / NKV); }

// Local keys visible to a query at absolute position qp: j < attention_key_end  <=>
// kpos.off + kpos.stride * j <= qp, i.e. j <= floor((qp - off) / stride), clipped to [0, Tk].
static inline int attention_key_end(const AttentionProblem* p, long qp) {
    const long rel = qp - p->kpos.off;
    if (rel < 0) return 0;
    const long n = rel / p->kpos.stride + 1;
    return n < p->Tk ? (int)n : p->Tk;
}
// The first local key at or after position lowest: kpos.off + kpos.stride * j >= lowest, i.e.
// j >= ceil((lowest - off) / stride), clipped to [0, Tk].
static inline int attention_key_at(const AttentionProblem* p, long lowest) {
    const long rel = lowest - p->kpos.off;
    if (rel <= 0) return 0;
    const long n = (rel + p->kpos.stride - 1) / p->kpos.stride;
    return n < p->Tk ? (int)n : p->Tk;
}
// Under a sliding window, the first local key a query at qp sees by the window alone (0 without
// one): keys with kpos > qp - window. Reads nothing but *p: the schedules, on either backend.
static inline int attention_window_key_begin(const AttentionProblem* p, long qp) {
    return p->window > 0 ? attention_key_at(p, qp - p->window + 1) : 0;
}
// The first local key a query at qp of sequence b sees: the later of its window's lower edge and
// its document's first position. The query sees the keys [attention_key_begin, attention_key_end).
// Reads p->docs: kernel code, on the memory that kernel runs on (the CPU kernel).
static inline int attention_key_begin(const AttentionProblem* p, int b, long qp) {
    const int w = attention_window_key_begin(p, qp);
    if (!p->docs.start) return w;
    const int d = attention_key_at(p, p->docs.start[(long)b * p->docs.T + qp]);
    return d > w ? d : w;
}
// Whether any query sees any key: the schedules skip the blocks where none does (causal: the
// first key against the last query; under a window, each query's range). Document masks are not
// consulted (their bounds live in backend memory): a block they empty is still computed, by
// kernels that skip its masked tiles, and returns empty partials.
static inline int attention_any_visible(const AttentionProblem* p) {
    if (p->Tq <= 0 || p->Tk <= 0) return 0;
    if (p->window <= 0) return p->kpos.off <= p->qpos.off + p->qpos.stride * (p->Tq - 1);
    for (int i = 0; i < p->Tq; i++) {
        const long qp = p->qpos.off + p->qpos.stride * i;
        if (attention_window_key_begin(p, qp) < attention_key_end(p, qp)) return 1;
    }
    return 0;
}

// The CPU kernel's query tile: it computes the scores of ATTENTION_CPU_TILE_ROWS queries at once,
// against every key of attention_tile_keys (the cost model prices the masked scores it computes).
enum { ATTENTION_CPU_TILE_ROWS = 64 };

// The keys [*begin, *end) a tile of queries i0 .. i0 + nq - 1 of sequence b is computed against:
// from the first key its first (earliest) query sees to the last its last query sees. Both edges
// grow with the position, so no query of the tile sees a key outside; the scores of the keys a
// query does not see inside are computed and masked. Reads p->docs (kernel memory).
static inline void attention_tile_keys(const AttentionProblem* p, int b, int i0, int nq, int* begin,
                                       int* end) {
    *begin = attention_key_begin(p, b, p->qpos.off + p->qpos.stride * i0);
    *end = attention_key_end(p, p->qpos.off + p->qpos.stride * (i0 + nq - 1));
}

// o:   (B, Tq, NH*HS) rows of stride ldo: softmax over the visible local keys, applied to V.
// lse: (B, NH, Tq) log-sum-exp of the scaled scores of the visible keys; -INFINITY (and o = 0)
//      for a query that sees no local key, which merges as an empty partial.
void attention_partial_forward(const AttentionProblem* p,
                               const real* q, int ldq, const real* k, int ldk,
                               const real* v, int ldv, real* o, int ldo, real* lse);

// d: (B, NH, Tq) = rowsum(dout * o) per head, the FlashAttention-2 backward preprocessing.
void attention_row_dot(const AttentionProblem* p, const real* o, int ldo,
                       const real* dout, int lddo, real* d);

// Backward of the partial attention given the final (merged) lse and d of each query:
// recomputes P = exp(scale*QK^T - lse) on the visible keys and ACCUMULATES (+=) into dq, dk, dv.
// Under grouped-query attention dk, dv (NKV heads) sum their group's query heads in head order.
void attention_partial_backward(const AttentionProblem* p,
                                const real* q, int ldq, const real* k, int ldk,
                                const real* v, int ldv, const real* dout, int lddo,
                                const real* lse, const real* d,
                                real* dq, int lddq, real* dk, int lddk, real* dv, int lddv);

// Merges partial b into partial a in place, per query row and head:
//   lse = logaddexp(lse_a, lse_b); o_a = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b.
// o_*: (B, T, NH*HS) with row strides lda, ldb; lse_*: (B, NH, T). Empty partials (-inf) merge.
void attention_merge(int B, int NH, int HS, int T, real* o_a, int lda, real* lse_a,
                     const real* o_b, int ldb, const real* lse_b);

#ifdef __cplusplus
}
#endif
