// The cost model: predicted step time of one training configuration (model shape, T, B, mesh
// dp x pq x pkv, attention schedule, overlap) on a cluster description (costmodel/cluster.h).
//
// What it counts, per rank and step (costmodel/README.md has the formulas):
//   compute   the kernels of a micro-batch with the FLOPs and bytes of tools/kernel_costs.c
//             (GEMMs at the matrix peak times Calculon's size-dependent efficiency, the rest at
//             max(FLOPs / vector rate, bytes / memory bandwidth)); attention from the visible
//             (query, key) pairs the causal mask leaves the slowest rank
//             (attention2d_visible_pairs / ring_visible_pairs), 4*HS FLOPs per pair forward and
//             10*HS backward, banded layers (--attention-window) apart from causal ones, a
//             document mask (--document-mask) in every layer; AdamW and the gradient norm per
//             step.
//   comm      the operations of attention/dist_cost.c per layer and phase (attention2d_ops,
//             ring_ops: the list the counters' volumes are the sums of), each on its mesh group and the
//             network tier that group crosses for the rank placement of comm/mesh.h; plus the
//             gradient all-reduce over all ranks (ZeRO-1: reduce-scatter + parameter all-gather).
//   overlap   plain schedules add compute and communication; the pipelined ones take
//             max(compute, transfer) per ring step plus the parts that cannot overlap.
//   recompute the forward kernels backward runs again per layer and micro-batch under --recompute
//             selective or full (model/gpt.c's recompute_layer), timed as the forward's.
//   memory    parameters, gradients, optimizer state (sharded by ZeRO-1), the saved activations
//             of the local tokens (fewer under recompute) and the attention schedule's scratch.
#pragma once
#include "costmodel/cluster.h"
#include "model/config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    COST_2D,           // ATTENTION2D, collectives (trainer --attention 2d)
    COST_2D_OVERLAP,   // ATTENTION2D, ring-pipelined over rows and columns (2d-overlap)
    COST_RING,         // Ring Attention, contiguous chunks
    COST_STRIPED,      // the ring schedule, cyclic tokens
    COST_ZIGZAG,       // the ring schedule, chunks r and 2P-1-r
    COST_ULYSSES,      // all-to-alls trading the sequence for heads (NKV a multiple of P)
    COST_USP,          // Ulysses over the mesh column inside a Striped ring over the row (pq | NKV)
    COST_NALGS
} CostAlgorithm;

// The trainer's --attention name, and back (-1 if unknown).
const char* cost_algorithm_name(CostAlgorithm a);
int cost_algorithm_parse(const char* name);
// 1 for ring, striped and zigzag: the ring schedule, which uses P = pq * pkv and not the mesh shape.
int cost_algorithm_is_ring(CostAlgorithm a);
// 1 for the schedules that use P = pq * pkv and not the mesh shape: the ring family and Ulysses.
int cost_algorithm_ignores_mesh(CostAlgorithm a);

typedef struct {
    int L, C, NH;   // layers, channels, heads
    int V;          // vocabulary (padded to a multiple of 128 as the trainer does)
    int max_T;      // rows of the position embedding (trainer --context)
    int window;         // trainer --attention-window: the banded layers' window (0: none)
    int window_every;   // trainer --window-every: layers l % window_every == 0 are banded
    int kv_heads;       // trainer --kv-heads: grouped-query attention's K/V heads (0: NH)
    int rope_theta;     // trainer --position-embedding rope: its theta (0: learned positions)
    int norm, mlp;      // trainer --normalization, --mlp: GPT_NORM_*, GPT_MLP_* (0: GPT's)
    int ffn_hidden;     // trainer --ffn-hidden: the MLP's hidden width (0: 4C)
    int no_linear_bias; // trainer --disable-bias-linear: 1
    int untied_classifier;  // trainer --untie-embeddings-and-output-weights: 1
    int qkv_bias;       // trainer --add-qkv-bias: 1 (the qkv projection's bias under no_linear_bias)
    int qk_norm;        // trainer --qk-layernorm: 1
} CostShape;

// Packed documents (the trainer's --document-mask): every layer's attention sees only a query's
// own document. The cost model prices each rank's visible pairs averaged over these rows (the
// trainer's: sequences sampled from its training data; build/costmodel's: one sequence of
// documents of a fixed length); the slowest rank is the most of any rank.
typedef struct {
    const int* start;   // (rows, T): each position's document's first position (document_bounds)
    int rows;
    long T;
} CostDocuments;

// Documents of `length` tokens packed from position 0 (the last one cut at T): start (T).
void costmodel_fixed_documents(long T, long length, int* start);

typedef struct {
    CostShape shape;
    long T;           // tokens per sequence
    int B;            // sequences per micro-batch and DP rank
    int accum;        // micro-batches per optimizer step
    int dp, pq, pkv;  // mesh; ring, striped and zigzag use P = pq * pkv and ignore the shape
    CostAlgorithm alg;
    int overlap;      // trainer --overlap: 1 transfers in flight during compute
    int zero;         // ZeRO-1 (optimizer state sharded over all ranks)
    int keep_kv;      // 2d: gathered K/V kept for backward (all layers)
    int recompute;    // trainer --recompute: a GptRecompute (model/activations.h), 0 = none
    const CostDocuments* docs;   // document mask of every layer (NULL: none)
    int chunks;       // ulysses, usp: trainer --a2a-chunks, the heads' chunks (0 or 1: one)
    int muon;         // trainer --optimizer muon: its Newton-Schulz iterations (its GEMMs and
                      // scratch); 0: AdamW
    int muon_split;   // trainer --optimizer dist_muon: the iterations split over the ranks in
                      // rounds, each matrix's result broadcast by its owner (model/muon.h)
    int muon_whole_qkv;   // trainer --muon-no-split-qkv: qkv orthogonalized whole, not as Q, K, V
    int muon_prec;    // trainer --muon-fp32-matmul-prec: a MuonMatmulPrec (0: highest)
    int z_loss;       // trainer --z-loss > 0: its sum one more fp64 scalar in the step's all-reduce
    int params_norm;  // trainer --log-params-norm: under ZeRO-1 one more all-reduce of 8 bytes
    int recompute_layers;   // trainer --recompute-num-layers: recompute covers the first this many
                            // layers, the others keep everything (0: all)
} CostConfig;

// The chunks of heads Ulysses and USP run in (CostConfig.chunks, 1 when unset).
static inline int cost_chunks(const CostConfig* g) { return g->chunks > 1 ? g->chunks : 1; }

typedef struct {
    double step_s;            // one optimizer step = forward + backward + optimizer + grad wait
                              // + fixed
    double forward_s, backward_s;   // of which the micro-batches' passes (their transfers included)
    double optimizer_s;       // gradient norm and AdamW (or Muon, with dist_muon's broadcasts)
    double grad_wait_s;       // the gradient reduction the step waits for
    double fixed_s;           // the host's part of a step (the cluster's step.fixed_ms)
    double recompute_s;       // of backward_s, the forward kernels recomputed (0 under none)
    double compute_s;         // compute on the critical path (shared cores included)
    double exposed_comm_s;    // step_s - compute_s
    double comm_s;            // every transfer's time, as if none overlapped
    double attention_comm_s;  // of which the attention schedule's
    double grad_comm_s;       // of which the gradient reduction's
    double muon_comm_s;       // of which dist_muon's broadcasts (in optimizer_s, exposed)
    double tokens_per_s;      // B * T * dp * accum / step_s
    double mfu;               // tokens/s * (6N + 6LCT) / (world * matrix peak), as train.c
    double bytes_per_rank;    // counted bytes received per step, the most of any rank
    double calls_per_step;    // communication calls of that rank per step (attention's)
    double attention_bytes;   // of which attention (dist_cost.c)
    double grad_bytes;        // of which the gradient reduction and the loss scalars
    double muon_bytes;        // of which dist_muon's Newton-Schulz results
    double flops_per_rank;    // model FLOPs of the slowest rank per step
    double attention_flops;   // of which attention (4*HS + 10*HS per visible pair)
    double memory_bytes;      // per device (shared_cores: per rank)
    double max_pairs;         // visible pairs per sequence and head of the slowest rank in a
                              // causal layer (under documents: the mean over their rows)
    double banded_pairs;      // the same in a banded layer (0 without a window)
    double max_priced;        // what the slowest rank's forward is priced as, in the pairs of
    double banded_priced;     // causal calls (costmodel.c: slowest_rank_priced), in a causal
                              // and in a banded layer (the pairs where the cluster has no tile)
    double pair_share;        // visible pairs of every rank under the documents over those of
                              // the same layers without them (1 without documents)
    Tier row_tier, col_tier, ring_tier, world_tier;   // the tier each group's traffic crosses
    Tier sp_tier;             // the whole SP group's (Ulysses' all-to-alls)
} CostPrediction;

// What an attention call of `visible` pairs whose kernel computes `computed` scores (the tile's:
// attention_tile_pairs) is priced as, in the visible pairs of the causal calls the attention
// curves are measured on: visible + masked (computed - visible) over the same for a causal call
// of as many queries, n (masked: the cluster's attention_masked_cost, what a computed but masked
// score costs against a visible pair). Equals `visible` for a causal call of n queries.
double costmodel_priced_pairs(double visible, double computed, long n, AttentionTile tile,
                              double masked);
// Seconds of `calls` equal attention calls (B sequences, NH heads of HS, Tq queries and Tk keys
// each) that together are priced as `pairs` (costmodel_priced_pairs): the cluster's attention
// curve by the GFLOP of one call, or memory, whichever is slower.
double costmodel_attention_seconds(const Cluster* c, int backward, double B, double NH,
                                   double HS, double Tq, double Tk, double pairs, int calls);

// Predicts one configuration. Returns 0, or -1 with a one-line reason in err (the mesh does not
// divide T, zigzag needs T % 2P == 0, a shape is not positive, ...).
int costmodel_predict(const CostConfig* cfg, const Cluster* cluster, CostPrediction* out,
                      char* err, size_t errlen);

// The question `--mesh auto` and `build/costmodel` answer: which mesh and schedule for `world`
// ranks, this model and T, under a memory limit per device.
typedef struct {
    CostShape shape;
    long T;
    int B, accum;
    int world;             // ranks = dp * pq * pkv
    double memory_limit;   // bytes per device; <= 0: the cluster's device memory
    int overlap, zero;
    unsigned algorithms;   // bit (1 << CostAlgorithm) per schedule to consider; 0: all
    int recompute;         // a GptRecompute given explicitly, or COST_RECOMPUTE_AUTO
    const CostDocuments* docs;   // document mask of every layer (NULL: none)
    int chunks;            // --a2a-chunks: > 1 ranks only Ulysses and USP candidates (those
                           // whose heads per rank it does not divide are left out); 0 or 1: one;
                           // COST_CHUNKS_AUTO: each Ulysses or USP candidate its fastest
    int muon;              // trainer --optimizer muon: CostConfig.muon
    int muon_split;        // trainer --optimizer dist_muon: CostConfig.muon_split
    int muon_whole_qkv;    // trainer --muon-no-split-qkv: CostConfig.muon_whole_qkv
    int muon_prec;         // trainer --muon-fp32-matmul-prec: CostConfig.muon_prec
    int z_loss, params_norm;   // trainer --z-loss > 0, --log-params-norm: CostConfig's
    int recompute_layers;  // with a given recompute: the layers it covers (0: all)
} CostQuery;

// CostQuery.recompute: each candidate takes the cheapest recomputation that fits (none, else the
// faster of selective and full over the fewest layers that fit: costmodel_predict_fitting); a
// candidate that fits with none of them is left out.
enum { COST_RECOMPUTE_AUTO = -1 };
// CostQuery.chunks (and costmodel_predict_chunks): the fastest chunk count of each Ulysses or USP
// configuration, among those dividing its heads per rank up to ULYSSES_MAX_CHUNKS.
enum { COST_CHUNKS_AUTO = -1 };

typedef struct {
    CostConfig config;
    CostPrediction pred;
    char reason[256];   // why it ranks where it does, in one line
} CostCandidate;

// Every feasible (dp, pq, pkv, schedule) for the query: dp * pq * pkv = world, T % P == 0 (and
// T % 2P == 0 for zigzag), memory within the limit (with the query's recompute, or the cheapest
// that fits: the candidate's config carries it). Ring-family schedules appear once per P
// (pq = 1, pkv = P). P = 1 appears once, as "2d" (no sequence parallelism). Sorted by predicted
// tokens/s, highest first (a larger dp processes more tokens per step, so step times do not
// compare; ties: fewer bytes, then larger dp). Writes the first max_out to out and returns how
// many are feasible (0: none; -1 with err if the query itself is invalid).
int costmodel_rank(const CostQuery* q, const Cluster* cluster, CostCandidate* out, int max_out,
                   char* err, size_t errlen);

// Whether a prediction fits `limit` bytes per device (<= 0: the cluster's memory); ranks that
// share cores share the node's memory too.
int costmodel_fits(const CostConfig* g, const CostPrediction* p, const Cluster* cluster,
                   double limit);
// The ranks of g whose memory one device's limit holds: its ranks on a node where they share
// cores (a CPU cluster), else 1.
int costmodel_memory_sharers(const CostConfig* g, const Cluster* cluster);
// The fewest layers g->recompute must cover for g (a valid configuration) to fit `limit` bytes
// (> 0) as costmodel_fits counts them: memory_fewest_recompute_layers (0: every layer; -1: not
// even every layer).
int costmodel_fewest_recompute_layers(const CostConfig* g, const Cluster* cluster, double limit);

// Predicts g (costmodel_predict) with `recompute` (a GptRecompute, over g->recompute_layers), or
// with COST_RECOMPUTE_AUTO the cheapest recomputation that fits `limit`: none, else the faster of
// selective and full, each over the fewest layers with which it fits (recompute_layers 0 when
// all); sets g->recompute and g->recompute_layers to it. Returns 1 if it fits, 0 if not (out:
// the prediction with the given mode, or with full on every layer), -1 with err if g is invalid.
int costmodel_predict_fitting(CostConfig* g, const Cluster* cluster, double limit, int recompute,
                              CostPrediction* out, char* err, size_t errlen);
// costmodel_predict_fitting with `chunks` for Ulysses and USP: a count (> 1 on another schedule
// is refused), or COST_CHUNKS_AUTO for the fastest count (ties: the fewest chunks; other
// schedules: none), set in g->chunks. The
// chunks leave memory unchanged, so whether it fits does not depend on them.
int costmodel_predict_chunks(CostConfig* g, const Cluster* cluster, double limit, int recompute,
                             int chunks, CostPrediction* out, char* err, size_t errlen);

// Seconds of the token-local kernels (everything but attention, AdamW and communication) of one
// micro-batch of N local tokens, Tl per sequence: GEMMs and the rest. For the calibration, which
// fits the rest's rate to a measured layer.
void costmodel_token_local_split(const Cluster* c, const CostShape* s, double N, double Tl,
                                 double* gemm_s, double* other_s);

// FLOPs per token the trainer's MFU uses (gpt_flops_per_token): 6 * params + 6 * L * C * T
// with causal layers, fewer with banded ones.
double costmodel_flops_per_token(const CostShape* s, long T);
// The trainer's configuration of the shape (what model/config.h's functions read and check).
GPTConfig costmodel_gpt_config(const CostShape* s);
// Parameters of the shape (tools/kernel_costs.c's count).
double costmodel_num_params(const CostShape* s);

#ifdef __cplusplus
}
#endif
