// The attention layer as the model sees it: one interface, several schedules (single device,
// ATTENTION2D, Ring, Striped). The model hands over its local tokens only; a distributed
// schedule does its own communication and returns results for exactly those local tokens.
#pragma once
#include "attention/partial_attention.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AttentionLayer AttentionLayer;

struct AttentionLayer {
    // window: 0 (causal: every earlier position) or W >= 1, the layer's sliding window: a query
    //       at position t sees the keys at t - W + 1 .. t (AttentionProblem.window).
    // qkv:  (B, Tl, C + 2 KVC) local tokens, C = NH*HS, KVC = NKV*HS (attention_qkv_width); q,
    //       k, v are the column blocks [0,C), [C,C+KVC), [C+KVC,C+2KVC), head h the slice
    //       [h*HS, (h+1)*HS) of each. NKV = NH: llm.c's (B, Tl, 3C); NKV < NH: grouped-query
    //       attention, query head h reading K/V head h / (NH/NKV) (attention_kv_head).
    // out:  (B, Tl, C) attention output of the local queries (before the output projection).
    // lse:  (B, NH, Tl) per-query log-sum-exp over all visible keys, saved for backward.
    void (*forward)(AttentionLayer* self, int layer, long window, int B, int Tl, int NH, int NKV,
                    int HS, const real* qkv, real* out, real_stat* lse);
    // dout: (B, Tl, C) gradient of out; dqkv: (B, Tl, C + 2 KVC) gradient of qkv, OVERWRITTEN.
    void (*backward)(AttentionLayer* self, int layer, long window, int B, int Tl, int NH, int NKV,
                     int HS, const real* qkv, const real* out, const real_stat* lse,
                     const real* dout, real* dqkv);
    // Absolute sequence positions of this rank's local tokens (used by the position embedding
    // and by the loader's token layout): cyclic (off = sp rank, stride = P) for ATTENTION2D and
    // Striped, contiguous (off = rank * T/P, stride 1) for Ring, two interleaved chunks for
    // Zigzag, (0, 1) on a single device.
    TokenLayout positions;
    // NULL, or (B*Tl) backend memory: the position of every local row for the position
    // embedding, where rows do not follow one layout (sequences decoded together, each at its
    // own position). Forward only.
    const int* row_positions;
    // The document mask of the coming passes (docs.start NULL: none, the default): (B, T) bounds
    // by absolute position in backend memory (AttentionProblem.docs), set by the model before a
    // forward and kept for its backward; every layer of the model shares them.
    DocumentBounds docs;
    const char* name;
    void (*destroy)(AttentionLayer* self);
};

// Columns of a qkv row: NH query heads, NKV key and NKV value heads of HS channels.
static inline int attention_qkv_width(int NH, int NKV, int HS) { return (NH + 2 * NKV) * HS; }

// Single-device attention: all T tokens local, one partial-attention call per pass.
// B, T, NH, NKV, HS bound every call and the scratch it allocates once, here.
AttentionLayer* attention_local_create(int B, int T, int NH, int NKV, int HS);
// Calls the layer's destroy (NULL is allowed).
void attention_layer_free(AttentionLayer* layer);

#ifdef __cplusplus
}
#endif
