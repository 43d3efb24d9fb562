// The GPT model on the CPU backend: parameters in llm.c's 16-tensor order (and an untied
// classifier after them) in one flat buffer,
// activations for the local tokens of B sequences, hand-written forward and backward.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "attention/attention_layer.h"
#include "comm/timeline.h"
#include "model/activations.h"
#include "model/config.h"
#include "model/real.h"

#ifdef __cplusplus
extern "C" {
#endif

// Pointers into one flat buffer, in llm.c's file order, then the untied classifier (0 elements
// when tied, so that a tied model's file is llm.c's) and QK-norm's four (0 elements without it).
// Each per-layer tensor holds all L layers.
typedef struct {
    real* wte;       // (Vp, C)
    real* wpe;       // (max_T, C); (0, C) under rotary positions
    real* ln1w;      // (L, C)
    real* ln1b;      // (L, C); (L, 0) under RMSNorm, as ln2b and lnfb
    real* qkvw;      // (L, 3C, C); (L, W, C) under GQA, W = gpt_qkv_width
    real* qkvb;      // (L, 3C)
    real* attprojw;  // (L, C, C)
    real* attprojb;  // (L, C)
    real* ln2w;      // (L, C)
    real* ln2b;      // (L, C)
    real* fcw;       // (L, 4C, C); (L, FC, C) with FC = gpt_fc_width: F, or 2F under SwiGLU
    real* fcb;       // (L, 4C); (L, FC)
    real* fcprojw;   // (L, C, 4C); (L, C, F), F = gpt_ffn_hidden
    real* fcprojb;   // (L, C)
    real* lnfw;      // (C)
    real* lnfb;      // (C)
    real* classifier;  // (Vp, C) under GPTConfig.untied_classifier; (0, C): the logits use wte
    real* qnormw;    // (L, HS) under GPTConfig.qk_norm: the query heads' norm weight; else (L, 0)
    real* qnormb;    // (L, HS) under qk_norm with LayerNorm: its bias; else (L, 0)
    real* knormw;    // (L, HS), as qnormw, for the key heads
    real* knormb;    // (L, HS), as qnormb
} ParameterTensors;

// Points the 21 tensors into a flat buffer of gpt_num_params elements.
void gpt_point_params(const GPTConfig* cfg, real* flat, ParameterTensors* t);

// The scalars of a training step, doubles in backend memory (GPT.scalars), so that the step's
// loss, gradient norm and clipping are computed and used on the backend without the host waiting
// for the device (the trainer reads them once, at the end of the step: model/backend.h).
// The three sums a step reduces over ranks are adjacent (z-loss, loss, gradient), so that one
// all-reduce takes the ones in use.
enum {
    GPT_Z_LOSS_SUM = 0,   // sum of per-token z-losses (GPT.z_loss > 0): gpt_backward adds to it
    GPT_LOSS_SUM = 1,     // sum of per-token losses: gpt_loss and gpt_backward add to it
    GPT_GRAD_SUMSQ = 2,   // sum of squares of the gradient (gpt_grad_sum_squares)
    GPT_CLIP_SCALE = 3,   // the factor AdamW multiplies the gradients by (gpt_clip_scale)
    GPT_PARAM_SUMSQ = 4,  // sum of squares of the parameters (gpt_param_sum_squares)
    GPT_NUM_SCALARS = 5
};

// Parameter groups whose gradients complete together in backward, in the order they complete:
// the final layernorm (and an untied classifier), layers L-1 .. 0 (a layer index), then the
// embeddings (a tied wte is also the classifier, so its gradient is complete only after the
// encoder's backward).
enum { GPT_GRADS_LNF = -1, GPT_GRADS_EMBEDDINGS = -2 };
// Called by gpt_backward (in stream order on CUDA: the gradients are complete for work enqueued
// after the call) once the group's gradients of this micro-batch are accumulated.
typedef void (*GptGradsReady)(void* ctx, int group);

typedef struct {
    GPTConfig cfg;
    size_t param_sizes[NUM_PARAM_TENSORS];
    size_t num_params;
    size_t padded_params;      // allocation: num_params rounded up (for even optimizer shards)
    int owns_params;           // 0 for a model that shares another's parameters (no gradients)
    real* params_memory;
    real* grads_memory;
    float* master_params;      // fp32 master weights where the parameters are stored in lower
                               // precision (CUDA bf16; model/backend.h); NULL elsewhere. They
    size_t master_begin;       // hold elements [master_begin, master_begin + master_count):
    size_t master_count;       // all padded_params, or under ZeRO-1 the optimizer's shard
    float* param_staging;      // with the master copy: the backend's parameter staging
                               // (model/param_staging.h); NULL elsewhere
    ParameterTensors params, grads;

    int B, T;                  // sequences and LOCAL tokens per sequence of the next pass; T
                               // may be lowered below max_T between passes (sampling)
    int max_T;                 // local tokens the activation buffers hold
    GptRecompute recompute;    // which layer activations backward recomputes (model/activations.h)
    int recompute_layers;      // over the first this many layers (0: all)
    float z_loss;              // 0, or the z-loss coefficient c: gpt_backward's objective adds
                               // c lse^2 per token (model/layers.h ZLoss); the losses stay the
                               // cross-entropy's, the z-losses' sum goes to GPT_Z_LOSS_SUM
    real* acts_memory;
    real_stat* stats_memory;   // the real_stat activations (statistics)
    ActivationTensors acts;
    int* inputs;               // (B, T) token ids of the last forward, in backend memory
    int* targets;              // (B, T)
    int* input_order;          // (B*T) the inputs' rows sorted by token (model/token_order.h), in
                               // backend memory: uploaded by gpt_backward for the encoder backward
    int* doc_bounds;           // (2, B, T_full) document starts, then ends, for gpt_set_documents
    int* doc_host;             // host: the same, as computed (allocated by the first call)
    int doc_T;                 // T_full of those buffers (0: none yet)
    int* doc_positions;        // (2, B, T) each local row's position in its document, then the
                               // rows sorted by it (model/token_order.h), for the encoder, in
                               // backend memory; NULL until gpt_set_documents resets positions
    int* doc_positions_host;   // host (3, B, T): the same and the sort's scratch
    int reset_positions;       // 1: the encoder uses doc_positions (gpt_set_documents)
    int* host_tokens;          // host: the last forward's inputs, then the order and its sort
                               // scratch, (B*T) each; NULL in a forward-only model
    int has_targets;           // 1 when the last forward was given targets
    double* scalars;           // (GPT_NUM_SCALARS) in backend memory
    real* dresidual;           // (B, T, C) backward scratch: gradient of the residual stream
    real* dbuf_c;              // (B, T, C)
    real* dbuf_wide_a;         // (B, T, gpt_widest_row): dqkv, SwiGLU's dact
    real* dbuf_wide_b;         // (B, T, gpt_widest_row): dfch

    AttentionLayer* attention; // owned by the caller; decides the token positions
    GptGradsReady grads_ready; // NULL, or called as gradient groups complete (e.g. to start
    void* grads_ready_ctx;     // their reduction while backward goes on)
    int grads_write;           // 1: the next gpt_backward WRITES the parameter gradients (a
                               // step's first micro-batch: no gpt_zero_grad needed); 0 (the
                               // default): it adds to them
    Timeline* timeline;        // NULL, or compute spans of every layer go there, on
    int timeline_track;        // this track
    long long layer_launches;  // kernel launches issued by the layer loops of forward and
                               // backward so far (attention included), where the backend counts
                               // launches (gpt_backend_counters, model/backend.h); 0 elsewhere
} GPT;

// Allocates parameters, gradients, activations and scratch once (no allocation in the step
// loop). Parameters are left uninitialised: use gpt_init_params or a model file. The parameter
// and gradient buffers are zero-padded to a multiple of pad_multiple elements (e.g. the number
// of ranks sharing the optimizer state), so they split into equal shards.
void gpt_create(GPT* m, const GPTConfig* cfg, int B, int T, AttentionLayer* attention,
                int pad_multiple);
// The same, saving only the activations that recompute mode r keeps in the first `layers` layers
// (0: all; the others keep everything): backward recomputes the rest layer by layer (same
// results: bitwise on the CPU).
void gpt_create_recompute(GPT* m, const GPTConfig* cfg, int B, int T, AttentionLayer* attention,
                          int pad_multiple, GptRecompute r, int layers);
// A forward-only model (e.g. for sampling) that uses owner's parameters; no gradients, and one
// layer's activation buffers for all layers (GPT_FORWARD_ONLY).
void gpt_create_shared(GPT* m, const GPT* owner, int B, int T, AttentionLayer* attention);
void gpt_free(GPT* m);

// Document masking for the next forward and its backward: the bounds of the documents of the
// full sequences (model/documents.h: a document begins at each `boundary` token) handed to the
// attention layer (AttentionLayer.docs), read by position, so the same for every schedule.
// full_tokens: host (B, T_full), every position of the model's B sequences (each rank holds
// them). full_tokens NULL: no document mask from now on. reset_positions (Megatron's
// --reset-position-ids): the position embedding of a token is its position within its document,
// not within the sequence (the attention masks keep the sequence positions).
void gpt_set_documents(GPT* m, const int* full_tokens, int T_full, int boundary, int reset_positions);

// Forward on local tokens (B, T), given as host arrays, up to the logits. targets (NULL: none) are
// uploaded for gpt_loss or gpt_backward; no loss is computed here. Nothing waits for the device.
void gpt_forward(GPT* m, const int* inputs, const int* targets);
// gpt_forward in two parts: the batch's upload (host work: the tokens go through the backend's
// staging), then the forward on the uploaded batch (device work only: a CUDA graph can capture
// it, train/train_step.c).
void gpt_load_batch(GPT* m, const int* inputs, const int* targets);
void gpt_forward_loaded(GPT* m);
// The loss of the last forward (which must have had targets) without a backward (evaluation):
// the per-token losses, their sum ADDED to m->scalars[GPT_LOSS_SUM]. The logits are kept.
void gpt_loss(GPT* m);
// Backward of the last forward (which must have had targets); ACCUMULATES parameter gradients, or
// writes all of them (the padding past num_params untouched) when m->grads_write is set.
// It starts with the classifier, run once per micro-batch as in llm.c: the per-token losses
// (their sum ADDED to m->scalars[GPT_LOSS_SUM]) and the logits' gradient in one pass.
// dloss is d(total loss) / d(each token's loss), e.g. 1 / (tokens in the whole optimizer step
// across all ranks).
// With m->grads_ready set, reports each parameter group as its gradients complete.
void gpt_backward(GPT* m, double dloss);
// Zeroes m->scalars[GPT_LOSS_SUM] and [GPT_Z_LOSS_SUM] (in stream order), and reads the first:
// the host waits for the device (evaluation and tests; a training step reads both with
// gpt_scalars_fetch, model/backend.h).
void gpt_loss_zero(GPT* m);
double gpt_loss_read(const GPT* m);
// The ranges of the flat parameter buffer (element offset, count) that group `group` (a layer, or
// GPT_GRADS_LNF / GPT_GRADS_EMBEDDINGS) occupies; returns how many (at most NUM_PARAM_TENSORS).
int gpt_param_group_ranges(const GPTConfig* cfg, int group, size_t offset[], size_t count[]);
void gpt_zero_grad(GPT* m);

#ifdef __cplusplus
}
#endif
