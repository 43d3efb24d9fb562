// The memory a training run holds per device, term by term: what the trainer prints at start
// and refuses on (train/run_setup.c, train/run_report.c), and what the cost model counts
// (costmodel/costmodel.c). Pure C, no backend: element sizes are inputs (CPU: real 4 bytes;
// CUDA bf16: real 2 with fp32 master weights; statistics and attention accumulators 4).
//
// Each term is what the code allocates, by the same formulas: model/gpt.c (parameters,
// gradients, activations laid out by gpt_activation_layout, backward scratch, tokens, scalars),
// train/run_setup.c (AdamW state and ZeRO-1 shard), model/backend_cuda.cu (master weights, parameter staging: model/param_staging.h),
// model/backend_kernels_cuda.cu and model/matmul.cu (layer workspace, cuBLASLt workspace; the
// encoder and LayerNorm backward scratch by model/layer_scratch.h), the attention schedules
// (attention/*.c by attention/dist_scratch.h, attention_local_cuda.cu), comm/comm_nccl.cu and the
// sampler (train/sampler.c). On the CUDA host runtime the total is exactly the bytes cudaMalloc'ed
// after the first step (tests/test_memory_budget.sh checks it).
#pragma once
#include <stddef.h>

#include "model/activations.h"
#include "model/config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MEMORY_PARAMS,            // parameters (padded to the ZeRO-1 shard multiple)
    MEMORY_GRADS,             // their gradients
    MEMORY_MASTER,            // fp32 master weights (bf16 storage only), ZeRO-1: this rank's shard
    MEMORY_ADAMW,             // AdamW m and v, fp32, ZeRO-1: this rank's shard; under Muon m and
                              // v of the tensors AdamW keeps and the momenta of the matrices (of
                              // this rank's under dist_muon; model/muon.h)
    MEMORY_MUON,              // --optimizer muon: the Newton-Schulz scratch (model/muon.h); on the
                              // CPU below highest precision also its rounded GEMM inputs
    MEMORY_ZERO_SHARD,        // ZeRO-1 gradient/parameter shard scratch
    MEMORY_PARAM_STAGING,     // with master weights: the parameter staging (model/param_staging.h)
    MEMORY_ACTIVATIONS,       // saved for backward under the recompute mode, statistics included
    MEMORY_BACKWARD,          // backward scratch: dresidual, dbuf_c, dbuf_wide_a, dbuf_wide_b
    MEMORY_LAYER_WORKSPACE,   // what the backend reserves for the layers (CUDA: encoder and
                              // LayerNorm backward scratch, bias-gradient scratch, norm partials)
    MEMORY_ATTENTION,         // the attention schedule's scratch
    MEMORY_ATTENTION_DQ,      // the bf16 CUDA attention backward's dQ workspace: the fp32 dQ
                              // accumulator and the query tiles' semaphores (partial_attention.cu)
    MEMORY_ATTENTION_GQA,     // grouped-query attention on CUDA: the kernels' K|V widened to the
                              // query heads and the widened fp32 gradients (partial_attention.cu)
    MEMORY_TOKENS,            // input and target token ids, the inputs' rows by token
    MEMORY_SCALARS,           // the step's loss / norm / clip doubles
    MEMORY_GRAD_BUCKETS,      // gradient buckets: reduced in place, nothing of their own
    MEMORY_COMM,              // the transport's device scratch (nccl)
    MEMORY_SAMPLER,           // rank 0's forward-only sampling model (1 x context tokens)
    MEMORY_WORKSPACE,         // cuBLASLt workspace (CUDA)
    MEMORY_HOST_PARAMS,       // the trainer's fp32 host copy of the parameters (train/run_setup.c),
                              // where the backend's memory is the host's (CPU): the same memory
    MEMORY_NTERMS
} MemoryTerm;

// The attention layer a run creates: a mesh of one sequence-parallel rank is always local.
typedef enum {
    MEMORY_ATTN_2D,
    MEMORY_ATTN_2D_OVERLAP,
    MEMORY_ATTN_RING,
    MEMORY_ATTN_STRIPED,
    MEMORY_ATTN_ZIGZAG,
    MEMORY_ATTN_ULYSSES,
    MEMORY_ATTN_USP
} MemorySchedule;

typedef struct {
    GPTConfig cfg;
    int B, T;                 // micro-batch and LOCAL tokens per sequence (seq-len / (pq pkv))
    GptRecompute recompute;
    int recompute_layers;     // recompute covers the first this many layers (0: all)
    int dp, pq, pkv;
    MemorySchedule schedule;  // when pq * pkv > 1
    int keep_kv;              // 2d: gathered K/V of every layer kept for backward
    int zero;                 // ZeRO-1: AdamW state sharded over all dp * pq * pkv ranks
    int muon;                 // --optimizer muon: its Newton-Schulz scratch, no v for the matrices
    int muon_ranks;           // --optimizer dist_muon: the world, over which the matrices' momenta
                              // are spread; 0, 1: every rank keeps them all
    int muon_rank;            // dist_muon: the rank whose momenta count; -1: the rank that keeps
                              // the most
    int muon_whole_qkv;       // --muon-no-split-qkv: which matrices there are to spread
    int muon_prec;            // --muon-fp32-matmul-prec (a MuonMatmulPrec): on the CPU, below
                              // highest, the rounded GEMM inputs' buffers
    int cuda;                 // the CUDA backend (layer workspace, cuBLASLt workspace); else the
                              // backend's memory is the host's, which the trainer's host copy of
                              // the parameters shares (its AdamW moment copies stay untouched
                              // until a checkpoint is written or read)
    int nccl;                 // the nccl transport (its device scratch)
    int sampler;              // this rank samples (rank 0 with --sample-length > 0)
    int documents;            // a document mask (--document-mask): the bounds of the sequences
    int reset_positions;      // positions within documents (--reset-position-ids)
    int flash_kernels;        // the bf16 CUDA attention kernels (0: the CPU and the CUDA fp32
                              // build): the backward's dQ workspace, and the forward merges the
                              // distributed schedules' partials itself (no step scratch)
    size_t real_bytes;        // parameters, gradients, activations (bf16: 2, fp32: 4)
    size_t stat_bytes;        // statistics and attention accumulators (4)
    size_t master_bytes;      // master weights per parameter: 4 where real is narrower, else 0
    size_t param_chunk;       // with master weights: the staging chunk (gpt_backend_param_chunk)
} MemoryConfig;

typedef struct {
    size_t bytes[MEMORY_NTERMS];
    size_t total;
} MemoryBudget;

// Bytes per device of every term, and their sum.
void memory_budget(const MemoryConfig* c, MemoryBudget* out);
// The fewest layers (1..L) that c->recompute must cover for the total to be at most `limit`
// bytes, c->recompute_layers aside: 0 when it takes every layer (or the mode is none and fits),
// -1 when every layer is not enough. The memory falls as layers are added: a bisection.
int memory_fewest_recompute_layers(const MemoryConfig* c, double limit);
// "parameters", "AdamW m, v", ... for reports.
const char* memory_term_name(MemoryTerm t);
// The term with the most bytes.
MemoryTerm memory_largest_term(const MemoryBudget* b);
// "12.34 GiB", "5.67 MiB" or "890 bytes" into out (len bytes); returns out.
const char* memory_format_bytes(size_t bytes, char* out, size_t len);
// Parses a trainer --attention name ("2d", "2d-overlap", "ring", "striped", "zigzag",
// "ulysses", "usp"); 0 or -1.
int memory_schedule_parse(const char* name, MemorySchedule* out);

#ifdef __cplusplus
}
#endif
