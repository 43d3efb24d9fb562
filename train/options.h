// The trainer's command line: one table drives parsing, validation, --help and the printed
// (and JSON) effective configuration, so the three can never disagree.
#pragma once
#include <stddef.h>
#include <string.h>

typedef struct {
    // model
    const char* preset;
    int layers, channels, heads, context, vocab;   // 0: from the preset / data
    int kv_heads;              // grouped-query attention's key/value heads (0: one per head)
    const char* position_embedding;   // learned | rope
    int rope_theta;            // rope: the rotation base
    const char* rope_scaling;  // none | linear | yarn | llama3: context extension's frequencies
    double rope_scaling_factor;   // 0: --context / the original context
    int rope_original_context;    // 0: the --init-from model's (before this run's --context)
    const char* normalization; // layernorm | rmsnorm
    const char* mlp;           // gelu | swiglu
    int ffn_hidden;            // the MLP's hidden width (0: 4C, or Megatron's 8C/3 under swiglu)
    int disable_bias_linear;   // 1: linear layers without biases
    int untie_embeddings;      // 1: an untied classifier (--untie-embeddings-and-output-weights)
    double norm_epsilon;       // the norms' epsilon (1e-5: GPT's and Llama's)
    int add_qkv_bias;          // 1: the qkv projection keeps its bias under --disable-bias-linear
    int qk_layernorm;          // 1: QK-norm (GPTConfig.qk_norm)
    int attention_window;      // sliding window of the banded layers (0: none); given, it
                               // overrides an --init-from model's
    int window_every;          // banded layers: l % window_every == 0
    const char* document_mask; // none | eot | a token id: documents begin at that token
    int reset_position_ids;    // 1: position embeddings count from each document's start
    const char* init_from;                         // llm.c model file, or NULL: from seed
    long seed;
    double init_std;           // the seeded initialisation's std of the weights (model/init.h)
    // data
    const char* train_data;
    const char* val_data;
    const char* tokenizer;
    // batch
    int batch;                 // micro-batch sequences per data-parallel rank
    int seq_len;
    long total_batch_tokens;   // 0: batch * seq_len * dp (no accumulation)
    const char* rampup_batch_tokens;   // 'START INCREMENT TOKENS' (train/batch_rampup.h); "": none
    int steps;
    long train_tokens;         // > 0: the run's length in tokens; steps then follow from it
    int eval_only;             // the validation loss of a model file or checkpoint, then exit
    // optimizer
    double lr, warmup_frac, final_lr_frac, weight_decay, grad_clip, z_loss, beta1, beta2, eps;
    const char* lr_schedule;   // cosine | linear | constant | wsd | inverse-sqrt (model/optimizer.h)
    double decay_frac;         // wsd: the decay's share of the steps after warmup
    const char* wsd_decay_style;   // wsd: linear | cosine | exponential | minus-sqrt
    int warmup;                // warmup steps; -1: from warmup_frac
    long lr_warmup_tokens, lr_decay_tokens;   // a schedule in trained tokens (0: in steps)
    const char* optimizer;     // adamw | muon | dist_muon (model/muon.h; options_muon)
    double muon_momentum, muon_extra_scale;
    int muon_nesterov, muon_ns_steps;
    int muon_no_split_qkv;     // 1: the qkv matrix orthogonalized whole (muon_matrix_shape)
    const char* muon_scale_mode;   // spectral | shape_scaling | unit_rms_norm
    const char* muon_matmul_prec;  // highest | high | medium (MuonMatmulPrec)
    // evaluation and sampling
    int eval_every, eval_batches;
    int eval_positions;        // the validation loss also per this many ranges of positions (0: no)
    const char* mc_eval;       // llm.c multiple-choice eval file ("" = none), data/mc_eval.h
    int mc_eval_examples;      // its first N examples (0 = all)
    int sample_every, sample_length, top_k;
    double temperature;
    const char* sample_prompt;
    // checkpoints and logs
    const char* out_dir;
    int checkpoint_every, keep_last, keep_every;
    int resume;
    int new_data_phase;        // --resume over other --train-data: a new data phase
    int continue_sets;         // ... in which the sets read before go on where they stood
    int exit_after;            // stop with a checkpoint after this many steps of this run
    double exit_after_minutes; // ... or before this many minutes since the start pass (0: never)
    const char* log_file;
    int save_bf16;             // also model file version: 0 fp32 (3), 1 bf16 (5)
    int no_save;               // no checkpoints at all (benchmark runs)
    int async_save;            // periodic checkpoints' files written while the steps go on
    // distribution
    int dp, pq, pkv;
    const char* attention;     // 2d | 2d-overlap | ring | striped | zigzag | ulysses | usp
    const char* mesh;          // manual | auto (the cost model picks dp, pq, pkv, attention)
    const char* cluster;       // cluster description for --mesh auto ("" = the backend's default)
    double memory_gb;          // --mesh auto: GiB per device (0 = the cluster's)
    unsigned given;            // OPT_GIVEN_* bits: mesh options given on the command line
    int zero;
    double grad_bucket_mb;     // 0: one gradient all-reduce after backward
    const char* trace;         // Chrome trace file, "" = none
    int timeline;              // 0: no timeline (no fractions, no trace)
    int overlap;               // 0: the plain schedules (comm_set_overlap)
    int keep_kv;
    int a2a_chunks;            // ulysses, usp: chunks of heads whose all-to-alls pipeline
    int cuda_graph;            // 1: each micro-batch's forward and backward as a CUDA graph
    const char* recompute;     // none | selective | full (model/activations.h)
    int recompute_num_layers;  // --recompute covers the first N layers (0: all)
    const char* comm;          // auto | mpi | nccl | mpi-staged
    const char* rendezvous;    // mpi | file:PATH | tcp:HOST:PORT (how the NCCL id travels)
    const char* rendezvous_id; // run key of the file/tcp rendezvous ("" = from the launcher)
    double rendezvous_timeout; // seconds
    double comm_timeout;       // seconds a host wait for communication may last (0: no limit)
    int launch_rank, launch_world, launch_local_rank;   // -1: from the launcher's environment
    double peak_gflops;        // for MFU; 0: measure at start
    int quiet;
    int log_interval;          // a progress line every N steps, their means
    int log_params_norm;       // the parameters' norm after each step, logged
    const char* on_nan;        // stop | skip: a step whose loss or gradient norm is not finite
    int max_skips;             // stop after this many skipped steps in a row
    double spike_zscore;       // loss-spike detector: skip a step this many deviations up (0 = off)
    int spike_window;          // its window of accepted steps
} TrainOptions;

// --optimizer muon or dist_muon: one update and one state, dist_muon's Newton-Schulz split over
// the ranks (MuonShare).
static inline int options_muon(const TrainOptions* o) {
    return !strcmp(o->optimizer, "muon") || !strcmp(o->optimizer, "dist_muon");
}

// Bits of TrainOptions.given: which of the options --mesh auto chooses were given explicitly
// (an explicit value always wins), and the schedule options a schedule may not use.
enum { OPT_GIVEN_DP = 1, OPT_GIVEN_PQ = 2, OPT_GIVEN_PKV = 4, OPT_GIVEN_ATTENTION = 8,
       OPT_GIVEN_RECOMPUTE = 16, OPT_GIVEN_FINAL_LR_FRAC = 32, OPT_GIVEN_DECAY_FRAC = 64,
       OPT_GIVEN_WINDOW = 128, OPT_GIVEN_WINDOW_EVERY = 256, OPT_GIVEN_TIMELINE = 512,
       OPT_GIVEN_A2A_CHUNKS = 1024, OPT_GIVEN_POSITIONS = 2048, OPT_GIVEN_ROPE_THETA = 4096,
       OPT_GIVEN_ROPE_SCALING = 8192, OPT_GIVEN_BLOCK = 16384, OPT_GIVEN_WARMUP = 32768,
       OPT_GIVEN_WARMUP_FRAC = 65536, OPT_GIVEN_WSD_DECAY_STYLE = 131072,
       OPT_GIVEN_INIT_STD = 262144, OPT_GIVEN_STEPS = 524288, OPT_GIVEN_MUON = 1048576 };

// Parses argv into *o (defaults first). On --help prints the usage and returns 1; on a bad
// flag or value prints one line naming the flag, what was expected and what was found, and
// returns -1; returns 0 otherwise. report = 0 keeps quiet (ranks other than 0).
int train_options_parse(TrainOptions* o, int argc, char** argv, int report);
// Writes "name = value" lines (print) or a JSON object (json) of every option; the object
// leaves out entries that would not fit in outlen bytes ("" when not even "{}" fits).
void train_options_print(const TrainOptions* o, void (*emit)(const char* line));
void train_options_json(const TrainOptions* o, char* out, size_t outlen);
// Calls visit(ctx, name, value) for every option, value as train_options_print shows it.
void train_options_each(const TrainOptions* o, void (*visit)(void* ctx, const char* name,
                                                             const char* value), void* ctx);
