// The trainer program's state and the parts of a run, one file each (train/train.c is the
// outline): run_end.c (ending on an error all ranks agree on), run_setup.c (launch, configuration,
// mesh, transport, data, model, optimizer; teardown),
// train_step.c (one optimizer step and the policies for steps not applied), train_loop.c (the
// loop over steps, evaluation-only runs), checkpoint_save.c (writing checkpoints),
// checkpoint_resume.c (resume),
// evaluate.c (validation loss, multiple-choice accuracy) and run_report.c (configuration, log,
// samples, progress, summary, counters, timeline).
// Internal to train/: nothing below train/ includes it.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "attention/dist_attention.h"
#include "comm/comm.h"
#include "comm/fail.h"
#include "comm/timeline.h"
#include "data/loader.h"
#include "data/mc_eval.h"
#include "data/tokenizer_file.h"
#include "model/backend.h"
#include "model/gpt.h"
#include "model/layers.h"
#include "model/memory_budget.h"
#include "model/optimizer.h"
#include "train/batch_rampup.h"
#include "train/grad_buckets.h"
#include "train/options.h"
#include "train/run_log.h"
#include "train/sampler.h"
#include "train/spike.h"

// --val-data's sets: one pattern, or weights and patterns as --train-data takes them. Each set
// is evaluated on its own (its first --eval-batches micro-batches) and the validation loss is
// their weighted mean: the loss of the mixture they stand for.
typedef struct {
    int n;                 // 0: no evaluation
    DataLoader** loader;   // (n,) a validation pass each
    double* weight;        // (n,) normalised to sum to 1
    double* loss;          // (n,) each set's loss at the last evaluation
} ValSets;

typedef struct {
    TrainOptions opt;
    Mesh mesh;
    Comm* comm;
    const char* transport;     // the resolved --comm
    int use_mpi;               // MPI runs (every --rendezvous but file: and tcp:)
    int local_rank, local_size;   // on this node (local_size -1: unknown)
    int device;                // the GPU this rank drives (-1: CPU)
    int rank;                  // world rank; rank 0 logs, samples and writes model files
    GPTConfig cfg;
    GPTConfig init_cfg;        // --init-from: the file's shape (cfg, but for a rotary model's
                               // context, theta and scaling, which --context, --rope-theta and
                               // --rope-scaling may change)
    int B, T, Tl, accum;       // micro-batch, global and local sequence length, accumulation
                               // (of the step under way: --rampup-batch-tokens changes it)
    int max_accum;             // accumulation of --total-batch-tokens: the most a step takes
                               // (at most MAX_ACCUMULATION)
    BatchRampup rampup;        // --rampup-batch-tokens (train/batch_rampup.h)
    int doc_boundary;          // --document-mask: the token that begins a document (-1: none)
    double doc_pairs[2];       // attention pairs of this rank's training batches, summed over the
                               // layers: under the document mask, and causal (the MFU's count)
    double doc_share_priced;   // --mesh auto: the pair share of the documents it sampled (0: none)
    long tokens_per_step;      // global tokens of the step under way (set by step_batch)
    int64_t trained_after_step;   // tokens trained once the step under way is done (step_batch)
    AttentionLayer* attention;
    GPT model;
    Optimizer* optimizer;      // AdamW on this rank's shard, in backend memory
    real* shard_scratch;       // (shard_count) ZeRO-1 gradient / parameter shard, backend memory
    GradBuckets* buckets;      // gradient all-reduce during backward (NULL: after it)
    GptGraph* graphs[4];       // --cuda-graph 1: a micro-batch's forward and backward, adding
                               // to the gradients [0] or writing them [1], and reducing them in
                               // buckets too [2], [3]; captured at first use
    CommCapture* graph_comm[4];  // the communication each graph holds
    TimelineCapture* graph_marks[4];   // the timeline's marks and spans each graph holds
    int graph_forward_end[4];  // the captured slot of each graph's end of forward (phase times)
    long graph_tokens;         // the tokens per step the graphs scale the loss by (1 / tokens is
                               // an argument of their kernels): a ramp-up's next batch recaptures
    int steps_issued;          // steps this process has issued (graphs are captured after one)
    CommRequest* param_gather; // ZeRO-1: the parameter all-gather in flight (params_ready waits)
    Timeline* timeline;        // per-step spans (NULL: --timeline 0)
    TimelineHostClock* host_clock;   // its clock on the CPU
    long long step_comm_bytes; // bytes the comm counted inside steps (what the trace shows)
    float* host_params;        // (num_params) host copy for init, model files and checkpoints
                               // (a checkpoint refreshes rank 0's whole, the others' slice only)
    float *host_m, *host_v;    // (shard_count) host copies of the moments for checkpoints
    int host_pinned;           // the three are the backend's pinned memory (--async-save)
    size_t shard_begin, shard_count;
    DataLoader* train_loader;
    int new_phase;             // the resume began a data phase (--new-data-phase over other data)
    int phase_step;            // the step where the training data's phase began (0: the first)
    ValSets val;               // --val-data's sets (val.n 0: no evaluation)
    McEvalSet mc;              // --mc-eval's examples (none: mc.examples 0)
    int32_t* mc_full_mask;     // (B, T) which positions' losses count, as filled
    int32_t* mc_mask;          // (B, Tl) this rank's part
    float* mc_losses;          // (B, Tl) per-token losses of a batch, on the host
    double* position_loss;     // (--eval-positions) the validation loss per range of positions
    double* set_position_loss; // (--eval-positions) one validation set's, before weighting
    double* mc_row_loss;       // (mc.rows) each row's summed loss over its mask
    AttentionLayer* mc_attention;   // single-device attention for rows as long as the longest,
                                    // where it fits the local tokens (NULL: rows on the mesh)
    int32_t *full_inputs, *full_targets;   // (B, T) windows as read
    int32_t *inputs, *targets;             // (B, Tl) this rank's tokens
    long* positions;                       // (Tl) their positions in the sequence
    LRSchedule sched;
    AdamWConfig adam;
    int muon;                  // --optimizer muon: muon_cfg for the hidden matrices
    MuonConfig muon_cfg;
    int step;                  // optimizer steps completed
    uint64_t sample_rng;
    RunLog log;
    TokenTable tokens;
    int has_tokens;
    Sampler sampler;           // rank 0, when sampling: a forward-only model sharing the weights
    int *sample_prompt, *sample_out, sample_prompt_len;
    double peak_flops;         // per rank
    char peak_source[224];     // where peak_flops comes from
    BackendDevice device_info;
    MemoryBudget memory;       // this rank's device memory, predicted (model/memory_budget.h)
    char config_json[4096];
    SpikeDetector spike;       // --spike-zscore: bounds for the coming step from the last steps
    int skipped_spike, skipped_nonfinite;   // steps of this run not applied
    int* phase_slot;           // (2 max_accum + 2) timeline slots of a step's phase boundaries
    double* phase_host;        // (2 max_accum + 2) their host-clock times (no timeline)
    double started_at;         // seconds_now() as the run began (--exit-after-minutes counts from it)
    struct CheckpointWrite* checkpoint;   // the last checkpoint's write (checkpoint_save.c; NULL
                                          // before the first)
} Trainer;

// Micro-batches per step at most (--total-batch-tokens / (batch x seq-len x dp)).
#define MAX_ACCUMULATION (1 << 20)

static inline double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Seconds a step spent in each phase, from marks at the phase boundaries (phase_mark): on the
// timeline's compute track when there is a timeline (on CUDA an event on the compute stream, so
// a phase is the time the DEVICE took from one boundary to the next, idle gaps included; on the
// CPU the host clock), else the host clock where the backend is synchronous (CPU). A device
// backend without a timeline has no phases: its host clock would time only the issue of the
// work. forward: from the step's start (or the previous micro-batch's backward) to the end of
// the forward, data loading included; backward: to the end of the backward (the classifier's
// one pass included); optimizer: gradient reduction, norm, clip factor, AdamW and the ZeRO-1
// all-gather's start. They add up to the step's work on the compute stream, which ends before
// the step's read returns (the step's "ms", host wall time, includes that read).
typedef struct {
    int measured;
    double forward, backward, optimizer;
} StepPhases;

// Throughput over the steps this run timed, the first excluded (it pays for one-time work: cuBLASLt
// plans, scratch that grows, caches); memory in use after the first step and at the end.
typedef struct {
    int steps;
    double seconds;
    double tokens;    // trained by those steps (all alike but under --rampup-batch-tokens)
    int phases;       // steps whose phases were measured (all or none)
    StepPhases sum;
    size_t memory_used, memory_total;
    size_t memory_first;   // in use after the first step (what the prediction is compared with)
} RunTotals;

// What a step asked of the device, where the backend counts it (gpt_backend_counters: the CUDA
// backend on the host runtime). Snapshots at the step's start, when train_step returns (all of
// the step's work issued, its results not yet read) and after the end-of-step read (the loss and
// norm reach the host, the timeline resolves its marks).
//   launches            kernels and GEMMs issued by the step
//   launches_per_layer  the launches of the layer loops of forward and backward (attention
//                       included: GPT.layer_launches), divided by the number of layers: all of the
//                       step's launches minus the embedding, head, loss, gradient-reduction, norm
//                       and optimizer ones, per layer (summed over the micro-batches)
//   d2h                 device-to-host copies of the whole step, its end included
//   syncs_in_step       host synchronisations while the step's work is issued (the target: 0)
//   syncs_end           host synchronisations of the end-of-step read
//   graph_launches      CUDA graph launches of the step (--cuda-graph 1: one per micro-batch)
//   graph_kernels       the kernels and GEMMs those launches ran (not in launches)
typedef struct {
    int counted;
    BackendCounters c0, c1;
    long long layer0;
    long long launches, d2h, syncs_in_step, syncs_end;
    long long graph_launches, graph_kernels;   // --cuda-graph 1: launches and the kernels they ran
    double launches_per_layer;
} StepCounters;

// Over the run's steps: the first (one-time allocations and plans) apart from the others.
typedef struct {
    int steps;                     // counted steps after the first
    StepCounters first;
    long long launches, d2h;       // sums over the steps after the first
    long long graph_launches, graph_kernels;
    double launches_per_layer;
    long long max_syncs_in_step, max_syncs_end, max_d2h;
    int have_first;
} CounterTotals;

// What a step computed, read at its end (finish_step).
typedef struct {
    double loss;          // the mean loss over the global batch
    double grad_norm;     // before clipping
    double z_loss;        // the mean z-loss (0 without --z-loss)
    double params_norm;   // after the update (0 without --log-params-norm)
    int applied;          // whether AdamW applied the update (the device's clip factor no skip mark)
} StepResult;

// The progress line of a step (print 0: none): the interval's mean loss and pace.
typedef struct {
    int print, applied;   // applied: the steps whose losses the mean holds
    double loss, seconds, tokens_per_s;
    char mfu_text[32];
} ProgressLine;

// What report_step prints and logs of a step that was applied.
typedef struct {
    StepResult result;
    double lr, seconds, tokens_per_s, mfu, eta_s;
    const char* mfu_text;
    TimelineStep timeline;
    StepPhases phases;
    const StepCounters* counters;
    ProgressLine line;
} StepRecord;

// --- run_end.c -----------------------------------------------------------------------------------
void end_launch(void);
// Every rank computes the same verdict from the same options; rank 0 says it, all exit 2.
void config_error(const Trainer* t, const char* fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

// --- run_setup.c ---------------------------------------------------------------------------------
// Where this process sits in the job, and the options: 0 to go on, > 0 for --help, < 0 for bad
// options (already reported).
int launch_run(Trainer* t, int* argc, char*** argv, int* world_rank, int* world_size);
void setup_run(Trainer* t, int world_rank, int world_size);
void shut_down(Trainer* t);

// --- train_step.c --------------------------------------------------------------------------------
void next_batch(Trainer* t, DataLoader* loader);
double all_reduce_scalar(Trainer* t, double x);
void all_reduce_sums(Trainer* t, double* x, int n);   // (n) summed over every rank, in place
void params_ready(Trainer* t);
void gather_params(Trainer* t);
// Tokens trained so far in the whole run (resumed runs included): the training loader's position.
int64_t trained_tokens(const Trainer* t);
// The coming step's tokens and accumulation (t->tokens_per_step, t->accum): --total-batch-tokens,
// or under --rampup-batch-tokens the batch of the tokens trained so far.
void step_batch(Trainer* t);
// The learning rate of the step under way: by its number, or under --lr-decay-tokens by the tokens
// trained once it is done.
double step_lr(const Trainer* t);
void train_step(Trainer* t, StepLimits limits);
void free_graphs(Trainer* t);   // the captured graphs, to be captured again at their next use
StepResult finish_step(Trainer* t);
StepPhases step_phases(const Trainer* t);
int nonfinite_step(Trainer* t, int step, double loss, double norm, int in_a_row);
void spike_step(Trainer* t, int step, double loss, double norm, int in_a_row);

// --- checkpoint_save.c ---------------------------------------------------------------------------
typedef struct CheckpointWrite CheckpointWrite;
// The checkpoint of the step just done, after completing the one in flight: written now
// (background 0), or with --async-save by a thread while the steps go on (background 1; the
// step loop completes it with finish_checkpoint once checkpoint_writing is 0 on every rank).
// Every rank calls it at the same step.
void save_checkpoint(Trainer* t, int background);
// 1 while this rank's files of the checkpoint in flight are still being written.
int checkpoint_writing(const Trainer* t);
// Completes the checkpoint in flight, if any (waiting for this rank's files): agreed written on
// every rank, marked DONE, older ones pruned, printed and logged. Every rank calls it at the same
// point.
void finish_checkpoint(Trainer* t);
// The longest checkpoint of this run so far, snapshot to DONE, in seconds (0 before the first).
double checkpoint_longest_seconds(const Trainer* t);
void free_checkpoint_write(Trainer* t);   // completes the one in flight first

// --- checkpoint_resume.c -------------------------------------------------------------------------
void resume(Trainer* t);

// --- train_loop.c --------------------------------------------------------------------------------
void catch_stop_signals(void);
void eval_only(Trainer* t);
void train_loop(Trainer* t);

// --- evaluate.c ----------------------------------------------------------------------------------
double evaluate(Trainer* t);   // also fills position_loss under --eval-positions
void report_eval(Trainer* t, double val, double seconds);
McEvalScore mc_evaluate(Trainer* t);
void report_mc_eval(Trainer* t, McEvalScore r);
void run_evals(Trainer* t);   // what the run evaluates: --val-data, then --mc-eval

// --- run_report.c --------------------------------------------------------------------------------
void print_config(Trainer* t);
// --recompute's mode and the layers it covers, e.g. "selective on the first 4 of 24 layers".
void recompute_text(const Trainer* t, char* out, size_t len);
void open_log(Trainer* t);
int parse_prompt(const Trainer* t, int* prompt, int max, char* err, size_t errlen);
void setup_sampler(Trainer* t);
void sample(Trainer* t);
double mfu_of(const Trainer* t, double tokens_per_s, double flops_per_token, char* text, size_t len);
void report_step(Trainer* t, const StepRecord* r);
void note_memory(RunTotals* r);
void report_memory(Trainer* t, const RunTotals* r);
void print_summary(Trainer* t, const RunTotals* r, double flops_per_token);
void print_skipped(Trainer* t);
void counters_begin(const Trainer* t, StepCounters* sc);
void counters_mark(StepCounters* sc);
void counters_end(const Trainer* t, StepCounters* sc, CounterTotals* tot, int first);
void print_counters(Trainer* t, const CounterTotals* c);
void setup_timeline(Trainer* t);
void write_trace(Trainer* t);
void report_timeline(Trainer* t);
