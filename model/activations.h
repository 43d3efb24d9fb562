// Where the activations that forward saves for backward lie, under each recompute mode: one
// layout, used by the model (model/gpt.c) to point its buffers and by the memory budget
// (model/memory_budget.h) and the cost model to count them.
//
//   none       every layer keeps all 16 C per token (ln1, qkv, atty, residual2, ln2, fch,
//              fch_gelu, residual3; less under grouped-query attention, whose qkv is narrower;
//              fch and fch_gelu are F and F wide, or 2F and F under SwiGLU, F = 4C in GPT)
//              and its LayerNorm statistics and LSE (RMSNorm leaves the means unused); under
//              QK-norm also the query and key heads before it and their statistics
//   selective  every layer keeps its attention output and LSE and the residual stream
//              (residual2, residual3): 3 C per token; the LayerNorms, the QKV projection (and its
//              QK-norm), the FC layer and GELU are recomputed in backward into one layer's scratch
//   full       every layer keeps its attention output and LSE and its output (residual3, the
//              next layer's input): 2 C per token; backward recomputes the whole local forward
//              of the layer (never the attention, whose distributed schedule communicates)
//
// A mode may cover only the first `layers` layers (Megatron-LM's --recompute-method block
// --recompute-num-layers): those share one layer's scratch for what the mode does not keep, the
// others keep everything, as under none. layers 0 (or L and more): every layer.
#pragma once
#include <stddef.h>

#include "model/config.h"
#include "model/real.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    GPT_RECOMPUTE_NONE = 0,
    GPT_RECOMPUTE_SELECTIVE = 1,
    GPT_RECOMPUTE_FULL = 2,
    // Not a --recompute choice: a model that never runs backward (sampling, prefill) keeps nothing
    // per layer, every layer's tensors in one layer's buffers (forward reads a layer's input
    // before it overwrites the same buffer with the layer's output).
    GPT_FORWARD_ONLY = 3
} GptRecompute;

// "none", "selective", "full" ("forward-only" for GPT_FORWARD_ONLY).
const char* gpt_recompute_name(GptRecompute r);
// Parses one of the --recompute names; returns 0, or -1 for anything else.
int gpt_recompute_parse(const char* name, GptRecompute* out);

// One layer's view of the per-layer activations.
typedef struct {
    real *ln1, *qkv, *atty, *residual2, *ln2, *fch, *fch_gelu, *residual3;
    real* qk_raw;   // QK-norm: the query and key heads before it (B, T, NH + NKV, HS); else none
    real_stat *ln1_mean, *ln1_rstd, *att_lse, *ln2_mean, *ln2_rstd;
    real_stat *qk_mean, *qk_rstd;   // QK-norm: (B, T, NH + NKV) per head; else none
} LayerActs;

// Activations saved by forward for backward, for B sequences of T local tokens each. The
// per-layer tensors hold L layers where the recompute mode keeps them, one layer's scratch where
// backward recomputes them (gpt_layer_acts gives the view of one layer either way).
typedef struct {
    real* encoded;    // (B, T, C)
    LayerActs layers; // layer 0 of the per-layer tensors, each L or 1 deep by the mode: ln1,
                      // atty, residual2, ln2, residual3 (B, T, C), qkv (B, T, gpt_qkv_width: 3C
                      // without grouped-query attention), fch (B, T, gpt_fc_width), fch_gelu
                      // (B, T, gpt_ffn_hidden): 4C each in GPT; the LayerNorm statistics (B,
                      // T), att_lse (B, NH, T)
    real* lnf;        // (B, T, C)
    real_stat* lnf_mean;   // (B, T)
    real_stat* lnf_rstd;   // (B, T)
    real* logits;     // (B, T, Vp); backward overwrites it with dlogits
    real_stat* losses;     // (B, T) per-token loss (gpt_loss, gpt_backward)
    real_stat* z_losses;   // (B, T) per-token z-loss (gpt_backward under GPT.z_loss > 0)
} ActivationTensors;


// Element counts of the two activation buffers (real, real_stat) for B x T local tokens under
// r over the first `layers` layers (0: all); with non-NULL bases, also points the tensors of *a
// into them.
void gpt_activation_layout(const GPTConfig* cfg, int B, int T, GptRecompute r, int layers,
                           real* base, real_stat* stat_base, ActivationTensors* a, size_t* nreal,
                           size_t* nstat);
// Layer l's view (B x T local tokens, as laid out by gpt_activation_layout with the same mode and
// layers).
LayerActs gpt_layer_acts(const ActivationTensors* a, const GPTConfig* cfg, int B, int T,
                         GptRecompute r, int layers, int l);
// The layers whose activations backward recomputes under r over the first `layers` (0: all) of L:
// 0 under none.
int gpt_recompute_count(GptRecompute r, int layers, int L);

#ifdef __cplusplus
}
#endif
