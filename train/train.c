// The trainer: one training loop for one process or many (mpirun). World = dp x pq x pkv
// ranks; each data-parallel group reads its own sequences, each sequence-parallel group of
// P = pq x pkv ranks holds T/P tokens of every sequence in its attention schedule's layout.
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attention/dist_attention.h"
#include "attention/dist_ops.h"
#include "checkpoints/checkpoint_dir.h"
#include "checkpoints/model_file.h"
#include "checkpoints/train_state.h"
#include "comm/comm_device.h"
#include "comm/comm_mpi.h"
#include "comm/fail.h"
#include "comm/launch.h"
#include "comm/rendezvous.h"
#include "comm/transport.h"
#include "data/bpe.h"
#include "data/loader.h"
#include "data/tokenizer_file.h"
#include "model/blas_kernels.h"
#include "model/backend.h"
#include "model/gpt.h"
#include "model/layers.h"
#include "model/init.h"
#include "model/optimizer.h"
#include "train/config_check.h"
#include "train/grad_buckets.h"
#include "train/options.h"
#include "train/mesh_auto.h"
#include "train/peak_flops.h"
#include "train/run_log.h"
#include "train/sampler.h"
#include "train/spike.h"

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
    int B, T, Tl, accum;       // micro-batch, global and local sequence length, accumulation
    long tokens_per_step;      // global tokens per optimizer step
    AttentionLayer* attention;
    GPT model;
    Optimizer* optimizer;      // AdamW on this rank's shard, in backend memory
    real* shard_scratch;       // (shard_count) ZeRO-1 gradient / parameter shard, backend memory
    GradBuckets* buckets;      // gradient all-reduce during backward (NULL: after it)
    CommRequest* param_gather; // ZeRO-1: the parameter all-gather in flight (params_ready waits)
    Timeline* timeline;        // per-step spans (NULL: --timeline 0)
    TimelineHostClock* host_clock;   // its clock on the CPU
    long long step_comm_bytes; // bytes the comm counted inside steps (what the trace shows)
    float* host_params;        // (num_params) host copy for init, model files and checkpoints
    float *host_m, *host_v;    // (shard_count) host copies of the moments for checkpoints
    size_t shard_begin, shard_count;
    DataLoader* train_loader;
    DataLoader* val_loader;    // NULL: no evaluation
    int32_t *full_inputs, *full_targets;   // (B, T) windows as read
    int32_t *inputs, *targets;             // (B, Tl) this rank's tokens
    long* positions;                       // (Tl) their positions in the sequence
    LRSchedule sched;
    AdamWConfig adam;
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
    char config_json[4096];
    SpikeDetector spike;       // --spike-zscore: bounds for the coming step from the last steps
    int skipped_spike, skipped_nonfinite;   // steps of this run not applied
    int* phase_slot;           // (2 accum + 2) timeline slots of a step's phase boundaries
    double* phase_host;        // (2 accum + 2) their host-clock times (no timeline)
} Trainer;

static volatile sig_atomic_t stop_requested;
static void on_stop_signal(int sig) { stop_requested = sig; }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void print_line(const char* line) { printf("%s\n", line); }

// Ends MPI where it runs (every exit path of the trainer).
static void end_launch(void) {
    if (comm_mpi_active()) comm_mpi_finalize();
}

// Element i of a backend tensor: this file is C, where `real` is float, while the CUDA backend
// stores bf16, so offsets are computed in bytes of the backend's storage type.
static real* element(real* base, size_t i) {
    return (real*)((char*)base + i * comm_type_size(dist_real_comm_type()));
}

// Every rank computes the same verdict from the same options; rank 0 says it, all exit.
static void config_error(const Trainer* t, const char* fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
static void config_error(const Trainer* t, const char* fmt, ...) {
    if (t->rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "error: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    end_launch();
    exit(2);
}

static int parse_prompt(const Trainer* t, int* prompt, int max, char* err, size_t errlen);

static void setup_model_config(Trainer* t) {
    const TrainOptions* o = &t->opt;
    char err[ERR_LEN];
    if (o->init_from && o->init_from[0]) {
        int version;
        if (model_file_read_header(o->init_from, &t->cfg, &version, err, sizeof err) != 0)
            config_error(t, "--init-from %s", err);
        if (o->layers || o->channels || o->heads || o->vocab)
            config_error(t, "--init-from fixes the model shape: drop --layers/--channels/--heads/--vocab");
        if (o->context && o->context != t->cfg.max_T)
            config_error(t, "--context %d: the model file %s has context %d", o->context,
                         o->init_from, t->cfg.max_T);
    } else {
        if (gpt_config_preset(o->preset, o->context, o->vocab, &t->cfg) != 0)
            config_error(t, "--preset: expected one of %s, found '%s'", gpt_config_preset_names(),
                         o->preset);
        if (o->layers) t->cfg.L = o->layers;
        if (o->channels) t->cfg.C = o->channels;
        if (o->heads) t->cfg.NH = o->heads;
        if (gpt_config_validate(&t->cfg, err, sizeof err) != 0)
            config_error(t, "--preset/--layers/--channels/--heads: %s", err);
    }
    if (o->eval_only && !(o->val_data && o->val_data[0]))
        config_error(t, "--eval-only: expected --val-data shards to evaluate on, found none");
    if (o->seq_len > t->cfg.max_T)
        config_error(t, "--seq-len %d: expected at most the model's context %d (raise --context)",
                     o->seq_len, t->cfg.max_T);
    // Checked now, not when the first sample is drawn hours later.
    int* prompt = xmalloc(sizeof(int) * t->cfg.max_T, "prompt");
    const int np = parse_prompt(t, prompt, t->cfg.max_T, err, sizeof err);
    free(prompt);
    if (np < 0) config_error(t, "%s", err);
}

static void setup_mesh(Trainer* t, int world_rank, int world_size) {
    const TrainOptions* o = &t->opt;
    char err[ERR_LEN];
    if (mesh_init(&t->mesh, o->dp, o->pq, o->pkv, world_rank, world_size, err) != 0)
        config_error(t, "%s", err);
    if (mesh_check_seq_len(&t->mesh, o->seq_len, err) != 0) config_error(t, "%s", err);
    if (strcmp(o->attention, "zigzag") == 0 && t->mesh.P > 1 && o->seq_len % (2 * t->mesh.P) != 0)
        config_error(t, "--seq-len %d: --attention zigzag splits the sequence into 2P = %d chunks; "
                     "expected a multiple of %d", o->seq_len, 2 * t->mesh.P, 2 * t->mesh.P);
    t->B = o->batch;
    t->T = o->seq_len;
    t->Tl = o->seq_len / t->mesh.P;
    const long micro = (long)t->B * t->T * t->mesh.dp;
    const long total = o->total_batch_tokens ? o->total_batch_tokens : micro;
    if (total % micro != 0)
        config_error(t, "--total-batch-tokens %ld: expected a multiple of batch x seq-len x dp = "
                     "%d x %d x %d = %ld", total, t->B, t->T, t->mesh.dp, micro);
    t->accum = (int)(total / micro);
    t->tokens_per_step = total;
    t->phase_slot = xcalloc((size_t)2 * t->accum + 2, sizeof(int), "phase marks");
    t->phase_host = xcalloc((size_t)2 * t->accum + 2, sizeof(double), "phase times");
}

static TransportOptions transport_options(const Trainer* t) {
    const TrainOptions* o = &t->opt;
    return (TransportOptions){o->comm, o->rendezvous, o->rendezvous_id, o->rendezvous_timeout,
                              o->comm_timeout};
}

// The transport (--comm) for this backend and launch, and this rank's GPU. Before any other
// backend call: the device is chosen first.
static void setup_transport(Trainer* t) {
    const TrainOptions* o = &t->opt;
    const TransportOptions to = transport_options(t);
    char err[ERR_LEN];
    const char* c = transport_resolve(&to, gpt_backend_host_memory(), gpt_backend_name(),
                                      t->mesh.world_size, err);
    if (!c) config_error(t, "%s", err);
    if (o->keep_kv && strcmp(o->attention, "2d") != 0)
        config_error(t, "--keep-kv: only --attention 2d keeps gathered K/V, found --attention %s",
                     o->attention);
    t->transport = c;
    if (gpt_backend_select_device(t->local_rank, t->local_size, strcmp(c, "mpi-staged") == 0,
                                  &t->device, err) != 0)
        fail_msg("%s", err);
}

// The transport, with the hang watchdog's limit (--comm-timeout).
static Comm* create_comm(Trainer* t) {
    const TransportOptions to = transport_options(t);
    return transport_create(&t->mesh, t->cfg.L, t->transport, &to);
}

static void setup_attention(Trainer* t) {
    const int NH = t->cfg.NH, HS = t->cfg.C / NH;
    if (t->mesh.P == 1) {
        t->attention = attention_local_create(t->B, t->T, NH, HS);
    } else if (strcmp(t->opt.attention, "2d") == 0) {
        t->attention = attention2d_create(t->comm, t->B, t->Tl, NH, HS,
                                          t->opt.keep_kv ? t->cfg.L : 0);
    } else if (strcmp(t->opt.attention, "2d-overlap") == 0) {
        t->attention = attention2d_overlap_create(t->comm, t->B, t->Tl, NH, HS);
    } else {
        const char* name = t->opt.attention;
        const RingLayout layout = strcmp(name, "ring") == 0      ? RING_CONTIGUOUS
                                  : strcmp(name, "zigzag") == 0 ? RING_ZIGZAG
                                                                : RING_CYCLIC;
        t->attention = attention_ring_create(t->comm, layout, t->B, t->Tl, NH, HS);
    }
}

static void setup_model_and_optimizer(Trainer* t) {
    const int world = t->mesh.world_size;
    const int zero = t->opt.zero;
    gpt_create(&t->model, &t->cfg, t->B, t->Tl, t->attention, zero ? world : 1);
    // Every backend buffer first (the optimizer's included): a model that does not fit the device
    // fails here, in seconds, not after the parameters have been initialised on the host.
    t->shard_count = zero ? t->model.padded_params / world : t->model.num_params;
    t->shard_begin = zero ? t->shard_count * t->mesh.world_rank : 0;
    t->optimizer = optimizer_create(&t->model, t->shard_begin, t->shard_count);
    char err[ERR_LEN];
    t->host_params = xmalloc(sizeof(float) * t->model.num_params, "host parameters");
    if (t->opt.init_from && t->opt.init_from[0]) {
        if (model_file_load(t->opt.init_from, &t->cfg, t->host_params, err, sizeof err))
            fail_msg("--init-from %s", err);
    } else {
        gpt_init_params(&t->cfg, (uint64_t)t->opt.seed, t->host_params);
    }
    gpt_params_from_host(&t->model, t->host_params);
    t->host_m = xcalloc(t->shard_count, sizeof(float), "host AdamW first moments");
    t->host_v = xcalloc(t->shard_count, sizeof(float), "host AdamW second moments");
    if (zero) t->shard_scratch = tensor_alloc(t->shard_count, "ZeRO-1 shard");
    if (!zero && world > 1 && t->opt.grad_bucket_mb > 0 && t->opt.overlap)
        t->buckets = grad_buckets_create(&t->cfg, (size_t)(t->opt.grad_bucket_mb * (1 << 20)),
                                         comm_type_size(dist_real_comm_type()));
    const TrainOptions* o = &t->opt;
    t->sched = (LRSchedule){.lr = o->lr,
                            .warmup_steps = o->warmup >= 0 ? o->warmup
                                                           : (int)(o->warmup_frac * o->steps),
                            .total_steps = o->steps,
                            .final_frac = o->final_lr_frac};
    t->adam = (AdamWConfig){o->beta1, o->beta2, o->eps, o->weight_decay};
    t->sample_rng = (uint64_t)o->seed ^ 0x5a5a5a5a5a5a5a5aULL;
    spike_init(&t->spike, o->spike_zscore, o->spike_window);
}

// The timeline: the backend's device clock (CUDA events) or the host clock; the comm layer
// records communication and waits into it, the model its layers' compute.
static void setup_timeline(Trainer* t) {
    if (!t->opt.timeline) {
        if (t->opt.trace[0]) config_error(t, "--trace %s needs --timeline 1", t->opt.trace);
        return;
    }
    BackendClock bc;
    if (!gpt_backend_clock(&bc)) {
        t->host_clock = timeline_host_clock_create();
        bc.clock = &timeline_host_clock;
        bc.ctx = t->host_clock;
        bc.compute_track = bc.host_track = NULL;
    }
    t->timeline = timeline_create(bc.clock, bc.ctx, t->mesh.world_rank, t->mesh.world_size);
    // Room for the marks of a step: a few per layer and collective; it grows if a step needs more.
    timeline_reserve_marks(t->timeline, 64 * (t->cfg.L + 2) * (t->mesh.P + 1) + 1024);
    comm_set_timeline(t->comm, t->timeline, bc.compute_track, bc.host_track);   // "compute" first
    t->model.timeline = t->timeline;
    t->model.timeline_track = TIMELINE_COMPUTE_TRACK;
}

// --trace: every rank writes its part, rank 0 merges them into one Chrome trace file.
static void write_trace(Trainer* t) {
    if (!t->timeline || !t->opt.trace[0]) return;
    char err[ERR_LEN];
    if (timeline_write_part(t->timeline, t->opt.trace, err, sizeof err) != 0)
        fail_msg("--trace %s", err);
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    comm_barrier(t->comm, MESH_WORLD);
    if (t->rank != 0) return;
    if (timeline_merge_parts(t->opt.trace, t->mesh.world_size, err, sizeof err) != 0)
        fail_msg("--trace %s", err);
    printf("trace: %s (%d ranks; open in https://ui.perfetto.dev)\n", t->opt.trace,
           t->mesh.world_size);
}

// The end of run's time fractions (rank 0 prints and logs them; every rank's counted step bytes go
// to the log, for checking the trace against the counters).
static void report_timeline(Trainer* t) {
    if (!t->timeline) return;
    const int world = t->mesh.world_size;
    double* bytes = xcalloc((size_t)world, sizeof(double), "bytes per rank");
    bytes[t->mesh.world_rank] = (double)t->step_comm_bytes;
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    comm_all_reduce_host(t->comm, MESH_WORLD, bytes, (size_t)world, COMM_F64);
    const TimelineStep s = timeline_totals(t->timeline);
    if (t->rank == 0 && s.steps > 0) {
        printf("timeline: %d steps, %.1f ms each: compute %.1f%%, exposed communication %.1f%%, "
               "waiting %.1f%% (rank 0)\n", s.steps, s.step_s / s.steps * 1e3,
               100 * s.compute_frac, 100 * s.exposed_comm_frac, 100 * s.wait_frac);
        char list[8192];
        size_t len = 0;
        for (int r = 0; r < world && len + 32 < sizeof list; r++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%.0f", r ? "," : "", bytes[r]);
        run_log_json(&t->log, "{\"type\":\"timeline\",\"step\":%d,\"steps\":%d,"
                     "\"compute_frac\":%.5f,\"exposed_comm_frac\":%.5f,\"wait_frac\":%.5f,"
                     "\"step_comm_bytes_per_rank\":[%s]}", t->step, s.steps, s.compute_frac,
                     s.exposed_comm_frac, s.wait_frac, list);
    }
    free(bytes);
}

// The training and validation loaders (and rank 0's tokenizer): before the model, so that the
// cross-rank check compares the files every rank resolved before anything large is allocated.
static void open_data(Trainer* t) {
    char err[ERR_LEN];
    LoaderConfig lc = {.B = t->B, .T = t->T, .dp_rank = t->mesh.dp_index, .dp_size = t->mesh.dp,
                       .shuffle = 1, .seed = (uint64_t)t->opt.seed, .vocab_size = t->cfg.V,
                       .mode = LOADER_TRAIN};
    if (!t->opt.eval_only) {   // evaluation alone reads no training data
        t->train_loader = loader_open(t->opt.train_data, &lc, err, sizeof err);
        if (!t->train_loader) fail_msg("--train-data %s", err);
    }
    if (t->opt.val_data && t->opt.val_data[0]) {
        lc.mode = LOADER_VAL;
        lc.shuffle = 0;
        t->val_loader = loader_open(t->opt.val_data, &lc, err, sizeof err);
        if (!t->val_loader) fail_msg("--val-data %s", err);
        if (loader_batches_per_epoch(t->val_loader) < 1)
            fail_msg("--val-data %s: expected at least one batch of %d x %d tokens per dp rank, "
                     "found %lld windows", t->opt.val_data, t->B, t->T + 1,
                     (long long)loader_windows_per_epoch(t->val_loader));
    }
    if (t->rank == 0 && t->opt.tokenizer && t->opt.tokenizer[0]) {
        if (tokenizer_file_read(t->opt.tokenizer, &t->tokens, err, sizeof err) == 0)
            t->has_tokens = 1;
        else
            fprintf(stderr, "warning: --tokenizer %s; samples are printed as token ids\n", err);
    }
}

// Every rank must run the same configuration (config_check.h); on a mismatch all stop, rank 0
// naming the first differing item.
static void check_config_across_ranks(Trainer* t) {
    ConfigItems items = {0};
    config_items_of_run(&items, &t->opt, &t->cfg, t->train_loader, t->val_loader);
    char msg[2 * ERR_LEN];
    const int differs = config_items_compare(t->comm, &t->mesh, &items, msg, sizeof msg);
    config_items_free(&items);
    if (differs) config_error(t, "configuration differs across ranks: %s", msg);
}

// The token buffers of a micro-batch and this rank's positions in the attention layout.
static void setup_batches(Trainer* t) {
    const size_t full = (size_t)t->B * t->T, local = (size_t)t->B * t->Tl;
    t->full_inputs = xmalloc(sizeof(int32_t) * full, "input tokens");
    t->full_targets = xmalloc(sizeof(int32_t) * full, "target tokens");
    t->inputs = xmalloc(sizeof(int32_t) * local, "local input tokens");
    t->targets = xmalloc(sizeof(int32_t) * local, "local target tokens");
    t->positions = xmalloc(sizeof(long) * t->Tl, "local token positions");
    token_layout_positions(t->attention->positions, t->Tl, t->positions);
}

// Reads this rank's next micro-batch: the full windows, then its share of the tokens.
static void next_batch(Trainer* t, DataLoader* loader) {
    char err[ERR_LEN];
    const int rc = loader_next(loader, t->full_inputs, t->full_targets, err, sizeof err);
    if (rc != 0)
        fail_msg("%s %s", loader == t->train_loader ? "--train-data" : "--val-data",
                 rc < 0 ? err : "validation data ran out");
    layout_take(t->full_inputs, t->B, t->T, t->positions, t->Tl, t->inputs);
    layout_take(t->full_targets, t->B, t->T, t->positions, t->Tl, t->targets);
}

static double all_reduce_scalar(Trainer* t, double x) {
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    comm_all_reduce_host(t->comm, MESH_WORLD, &x, 1, COMM_F64);
    return x;
}

// Prints and logs a validation loss (the same on every rank). One that is not finite (weights
// that diverged within the range of finite numbers) stops the run before it reaches the log or
// a checkpoint.
static void report_eval(Trainer* t, double val) {
    if (!isfinite(val))
        config_error(t, "step %d: validation loss %g is not finite; stopping without writing a "
                     "checkpoint", t->step, val);
    if (t->rank != 0) return;
    printf("eval: step %d val loss %.4f\n", t->step, val);
    run_log_json(&t->log, "{\"type\":\"eval\",\"step\":%d,\"val_loss\":%.6f}", t->step, val);
}

// The first parameter tensor whose gradient holds a non-finite value on any rank (-1: none), for
// the message of a non-finite step (the run ends after it): each tensor's sum of squares on the
// backend, which is not finite exactly when an element is not (fp32 squares cannot overflow a
// double sum).
static int first_nonfinite_grad(Trainer* t) {
    GPT* m = &t->model;
    double bad[NUM_PARAM_TENSORS];
    size_t lo = 0;
    for (int k = 0; k < NUM_PARAM_TENSORS; lo += m->param_sizes[k], k++) {
        double sc[GPT_NUM_SCALARS];
        gpt_grad_sum_squares(m, lo, m->param_sizes[k], m->scalars + GPT_GRAD_SUMSQ);
        gpt_scalars_fetch(m);
        gpt_scalars_wait(sc);
        bad[k] = !isfinite(sc[GPT_GRAD_SUMSQ]);
    }
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    comm_all_reduce_host(t->comm, MESH_WORLD, bad, NUM_PARAM_TENSORS, COMM_F64);
    for (int k = 0; k < NUM_PARAM_TENSORS; k++)
        if (bad[k] > 0) return k;
    return -1;
}

// A step whose loss or gradient norm is not finite: its update was dropped on the device
// (step_grad_scale). Every rank sees the same all-reduced values and decides alike. Returns 1
// when the run goes on (--on-nan skip, under the limit); else rank 0 names the step and the
// first non-finite gradient and every rank exits non-zero, writing nothing.
static int nonfinite_step(Trainer* t, int step, double loss, double norm, int in_a_row) {
    const int skip = strcmp(t->opt.on_nan, "skip") == 0;
    if (skip && in_a_row <= t->opt.max_skips) {
        if (t->rank == 0) {
            printf("step %5d/%d | loss %g | norm %g | not finite: update skipped (%d in a row, "
                   "limit %d)\n", step, t->opt.steps, loss, norm, in_a_row, t->opt.max_skips);
            run_log_json(&t->log, "{\"type\":\"skip\",\"step\":%d,\"reason\":\"%s\","
                         "\"in_a_row\":%d}", step, isfinite(loss) ? "non-finite gradient norm"
                                                                  : "non-finite loss", in_a_row);
        }
        t->skipped_nonfinite++;
        return 1;
    }
    const int k = first_nonfinite_grad(t);
    char where[96] = "no gradient holds one (the loss alone)";
    if (k >= 0) snprintf(where, sizeof where, "first non-finite gradient: %s", gpt_param_name(k));
    if (skip)
        config_error(t, "step %d: loss %g, gradient norm %g: not finite, %d skipped steps in a "
                     "row (--max-skips %d); %s; stopping without writing a checkpoint", step, loss,
                     norm, in_a_row, t->opt.max_skips, where);
    config_error(t, "step %d: loss %g, gradient norm %g: not finite; %s; stopping without writing "
                 "a checkpoint (--on-nan stop; --on-nan skip drops such steps)", step, loss, norm,
                 where);
}

// A finite step the loss-spike detector dropped (its loss or norm above the bounds of
// spike_limits): not applied, like a skipped non-finite step, and the same on every rank. Logs a
// skip record with both z-scores; more than --max-skips skipped steps in a row stop the run.
static void spike_step(Trainer* t, int step, double loss, double norm, int in_a_row) {
    double lz, nz;
    spike_zscores(&t->spike, loss, norm, &lz, &nz);
    if (in_a_row > t->opt.max_skips)
        config_error(t, "step %d: loss %.6f (z-score %.2f), gradient norm %.4f (z-score %.2f): a "
                     "spike (--spike-zscore %g), %d skipped steps in a row (--max-skips %d); "
                     "stopping without writing a checkpoint", step, loss, lz, norm, nz,
                     t->opt.spike_zscore, in_a_row, t->opt.max_skips);
    t->skipped_spike++;
    if (t->rank != 0) return;
    printf("step %5d/%d | loss %.6f | norm %.4f | spike (z-scores: loss %.2f, norm %.2f; limit "
           "%g): update skipped (%d in a row, limit %d)\n", step, t->opt.steps, loss, norm, lz, nz,
           t->opt.spike_zscore, in_a_row, t->opt.max_skips);
    run_log_json(&t->log, "{\"type\":\"skip\",\"step\":%d,\"reason\":\"spike\",\"loss\":%.9g,"
                 "\"grad_norm\":%.9g,\"loss_z\":%.4f,\"norm_z\":%.4f,\"zscore\":%g,\"window\":%d,"
                 "\"in_a_row\":%d}", step, loss, norm, lz, nz, t->opt.spike_zscore,
                 t->opt.spike_window, in_a_row);
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

// Phase boundary i of the step: 0 its start, 2a + 1 and 2a + 2 the ends of micro-batch a's
// forward and backward, 2 accum + 1 the end of the optimizer.
static void phase_mark(Trainer* t, int i) {
    if (t->timeline)
        t->phase_slot[i] = i == 0 ? TIMELINE_ORIGIN_SLOT
                                  : timeline_mark(t->timeline, TIMELINE_COMPUTE_TRACK);
    else
        t->phase_host[i] = now();
}

// The phases of the step that ended last (after timeline_step_end).
static StepPhases step_phases(const Trainer* t) {
    StepPhases ph = {0, 0, 0, 0};
    const int n = 2 * t->accum + 2;
    if (!t->timeline && !gpt_backend_host_memory()) return ph;
    double prev = 0;
    for (int i = 1; i < n; i++) {
        const double at = t->timeline ? timeline_mark_seconds(t->timeline, t->phase_slot[i])
                                      : t->phase_host[i] - t->phase_host[0];
        if (at < 0) return (StepPhases){0, 0, 0, 0};   // a mark the timeline had no room for
        double* phase = i == n - 1 ? &ph.optimizer : i % 2 ? &ph.forward : &ph.backward;
        *phase += at - prev;
        prev = at;
    }
    ph.measured = 1;
    return ph;
}

// ZeRO-1 leaves the parameter all-gather of the last update in flight, to overlap the end of the
// step and the next batch's loading; anything that reads the parameters waits for it here first.
static void params_ready(Trainer* t) {
    comm_wait(t->comm, t->param_gather);
    t->param_gather = NULL;
}

// The gradients summed over every rank: in buckets during the last micro-batch's backward
// (t->buckets), or here in one all-reduce; ZeRO-1 reduce-scatters to this rank's shard. Then the
// step's scalars on the backend: the sum of squares of the (shard's) gradient, and the loss sum
// and (ZeRO-1: each rank holds a shard) the sum of squares summed over all ranks in one
// all-reduce of backend memory. Nothing waits for the device.
static void reduce_gradients(Trainer* t) {
    GPT* m = &t->model;
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    // Gradients travel in the backend's storage type (bf16 on the CUDA bf16 build).
    const CommType gt = dist_real_comm_type();
    double* sumsq = m->scalars + GPT_GRAD_SUMSQ;
    if (t->opt.zero) {
        comm_reduce_scatter_sum(t->comm, MESH_WORLD, m->grads_memory, t->shard_scratch,
                                t->shard_count, gt);
        tensor_copy(element(m->grads_memory, t->shard_begin), t->shard_scratch, t->shard_count);
        gpt_grad_sum_squares(m, t->shard_begin, t->shard_count, sumsq);
    } else {
        if (t->buckets) {
            grad_buckets_finish(t->buckets);
        } else if (t->mesh.world_size > 1) {
            comm_all_reduce_sum(t->comm, MESH_WORLD, m->grads_memory, m->num_params, gt);
        }
        gpt_grad_sum_squares(m, 0, m->num_params, sumsq);
    }
    // GPT_LOSS_SUM and GPT_GRAD_SUMSQ are adjacent: one all-reduce of one or both, in fp64.
    if (t->mesh.world_size > 1)
        comm_all_reduce_sum(t->comm, MESH_WORLD, m->scalars + GPT_LOSS_SUM, t->opt.zero ? 2 : 1,
                            COMM_F64);
}

// One optimizer step, issued without the host waiting for the device: accumulation over
// micro-batches, gradient reduction, norm and clip factor (or the skip mark: not finite, or
// above limits), AdamW, and the copy of the step's
// scalars to the host (gpt_scalars_fetch), which the caller waits for (finish_step).
static void train_step(Trainer* t, StepLimits limits) {
    GPT* m = &t->model;
    const double dloss = 1.0 / t->tokens_per_step;
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    phase_mark(t, 0);
    for (int a = 0; a < t->accum; a++) {
        next_batch(t, t->train_loader);
        if (a == 0) {
            params_ready(t);
            gpt_zero_grad(m);
            gpt_loss_zero(m);
        }
        gpt_forward(m, t->inputs, t->targets);
        phase_mark(t, 2 * a + 1);
        // The last micro-batch's backward completes the gradients: reduce them as it goes.
        const int bucketed = t->buckets && a == t->accum - 1;
        if (bucketed) {
            grad_buckets_begin(t->buckets, t->comm, MESH_WORLD, m->grads_memory,
                               dist_real_comm_type());
            m->grads_ready = grad_buckets_ready;
            m->grads_ready_ctx = t->buckets;
        }
        gpt_backward(m, dloss);   // the classifier's one pass adds this micro-batch's losses
        m->grads_ready = NULL;
        phase_mark(t, 2 * a + 2);
    }
    reduce_gradients(t);
    gpt_clip_scale(m, t->opt.grad_clip, limits);
    const int begin = timeline_mark(t->timeline, TIMELINE_COMPUTE_TRACK);
    optimizer_step(t->optimizer, m, t->step + 1, lr_at_step(&t->sched, t->step), &t->adam,
                   m->scalars + GPT_CLIP_SCALE);
    const TimelineLabel label = {"optimizer", NULL, NULL, 0, -1, "other"};
    timeline_span(t->timeline, TL_COMPUTE, TIMELINE_COMPUTE_TRACK, begin,
                  timeline_mark(t->timeline, TIMELINE_COMPUTE_TRACK), &label);
    if (t->opt.zero) {
        comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
        tensor_copy(t->shard_scratch, element(m->params_memory, t->shard_begin), t->shard_count);
        t->param_gather = comm_all_gather_start(t->comm, MESH_WORLD, t->shard_scratch,
                                                m->params_memory, t->shard_count,
                                                dist_real_comm_type());
    }
    phase_mark(t, 2 * t->accum + 1);
    gpt_scalars_fetch(m);
}

// The end of a step: the one wait for the device. Returns the mean loss over the global batch;
// *grad_norm gets the norm before clipping, *applied whether AdamW applied the update (the clip
// factor the device computed is no skip mark).
static double finish_step(Trainer* t, double* grad_norm, int* applied) {
    double sc[GPT_NUM_SCALARS];
    comm_wait_compute(t->comm);   // the host's wait for the step, under the comm watchdog
    gpt_scalars_wait(sc);
    *grad_norm = sqrt(sc[GPT_GRAD_SUMSQ]);
    *applied = sc[GPT_CLIP_SCALE] != OPTIMIZER_SKIP;
    return sc[GPT_LOSS_SUM] / t->tokens_per_step;
}

// The losses of every batch summed on the backend (without dlogits), read once at the end.
static double evaluate(Trainer* t) {
    params_ready(t);
    const long n = loader_batches_per_epoch(t->val_loader);
    const int batches = t->opt.eval_batches < n ? t->opt.eval_batches : (int)n;
    loader_reset(t->val_loader);
    gpt_loss_zero(&t->model);
    for (int i = 0; i < batches; i++) {
        next_batch(t, t->val_loader);
        gpt_forward(&t->model, t->inputs, t->targets);
        gpt_loss(&t->model);
    }
    comm_wait_compute(t->comm);
    const double sum = gpt_loss_read(&t->model);
    return all_reduce_scalar(t, sum) / ((double)batches * t->B * t->T * t->mesh.dp);
}

// Parses "--sample-prompt" token ids; the default prompt is the end-of-text token. Returns the
// number of ids, or -1 with err set.
static int parse_prompt(const Trainer* t, int* prompt, int max, char* err, size_t errlen) {
    const char* s = t->opt.sample_prompt;
    int n = 0;
    while (s && *s && n < max) {
        char* end;
        errno = 0;
        const long id = strtol(s, &end, 10);
        if (end == s || errno || id < 0 || id >= t->cfg.V || (*end && *end != ',')) {
            snprintf(err, errlen, "--sample-prompt: expected comma-separated token ids below %d, "
                     "found '%s'", t->cfg.V, t->opt.sample_prompt);
            return -1;
        }
        prompt[n++] = (int)id;
        s = *end == ',' ? end + 1 : end;
    }
    if (n == 0) prompt[n++] = t->cfg.V > GPT2_EOT ? GPT2_EOT : 0;
    return n;
}

// The sampler, the prompt and the output buffer are made once, before training (rank 0).
static void setup_sampler(Trainer* t) {
    if (t->rank != 0 || t->opt.sample_length <= 0) return;
    const int max_len = t->cfg.max_T;
    sampler_create(&t->sampler, &t->model, max_len);
    t->sample_prompt = xmalloc(sizeof(int) * max_len, "prompt");
    t->sample_out = xmalloc(sizeof(int) * (t->opt.sample_length + 1), "sample");
    char err[ERR_LEN];
    t->sample_prompt_len = parse_prompt(t, t->sample_prompt, max_len - 1, err, sizeof err);
    if (t->sample_prompt_len < 0) fail_msg("%s", err);   // checked at start: cannot happen
}

static void sample(Trainer* t) {
    params_ready(t);
    if (t->rank != 0 || t->opt.sample_length <= 0) return;
    const int* out = t->sample_out;
    const int n = sampler_generate(&t->sampler, t->sample_prompt, t->sample_prompt_len,
                                   t->opt.sample_length, t->opt.temperature, t->opt.top_k,
                                   &t->sample_rng, t->sample_out);
    // Text (or ids) for the terminal, and escaped into the log.
    size_t cap = 16 + (size_t)n * 12;
    char* text = xmalloc(cap, "sample text");
    size_t len = 0;
    text[0] = 0;
    if (t->has_tokens) {
        uint8_t* bytes = NULL;
        size_t nbytes = 0;
        char err[ERR_LEN];
        uint32_t* ids = xmalloc(sizeof(uint32_t) * (n ? n : 1), "sample ids");
        for (int i = 0; i < n; i++) ids[i] = (uint32_t)out[i];
        if (bpe_decode(&t->tokens, ids, (size_t)n, &bytes, &nbytes, err, sizeof err) == 0) {
            free(text);
            text = (char*)bytes;
            len = nbytes;
        }
        free(ids);
    }
    if (len == 0 && n > 0) {
        for (int i = 0; i < n; i++) len += (size_t)snprintf(text + len, cap - len, "%s%d", i ? "," : "", out[i]);
    }
    printf("sample (step %d): %.*s\n", t->step, (int)len, text);
    char* escaped = xmalloc(len * 6 + 16, "escaped sample");
    json_escape((const unsigned char*)text, len, escaped, len * 6 + 16);
    run_log_json(&t->log, "{\"type\":\"sample\",\"step\":%d,\"text\":\"%s\"}", t->step, escaped);
    free(escaped);
    free(text);
}

static void fill_state_info(const Trainer* t, TrainStateInfo* info) {
    memset(info, 0, sizeof *info);
    info->step = t->step;
    info->world_size = t->mesh.world_size;
    info->rank = t->mesh.world_rank;
    info->dp = t->mesh.dp;
    info->pq = t->mesh.pq;
    info->pkv = t->mesh.pkv;
    info->zero_stage = t->opt.zero;
    info->model = t->cfg;
    info->B = t->B;
    info->T = t->T;
    info->accum_steps = t->accum;
    info->sample_rng = t->sample_rng;
    loader_get_state(t->train_loader, &info->loader);
    // ZeRO-1 pads the parameters to a multiple of the world size: the file holds the moments of
    // real parameters only (the padding's stay zero), or it could not be read back.
    const size_t n = t->model.num_params;
    info->num_params = n;
    info->shard_begin = t->shard_begin < n ? t->shard_begin : n;
    info->shard_count = t->shard_begin + t->shard_count <= n ? t->shard_count
                                                              : n - info->shard_begin;
    snprintf(info->config_json, sizeof info->config_json, "%s", t->config_json);
}

// After each stage of a checkpoint write every rank learns whether any rank's write failed (a
// full disk, a quota). If one did, no rank goes on: each failed rank names its file and the
// reason, rank 0 removes the step's files (a step that was complete before this write keeps
// them: atomic writes left each file whole) so no half-written checkpoint stays in the directory
// and the log never records it, and every rank exits non-zero. The previous complete checkpoint
// is untouched.
static void checkpoint_agree(Trainer* t, int failed, const char* err, int was_complete) {
    if (all_reduce_scalar(t, failed ? 1 : 0) == 0) return;
    char who[32] = "";
    if (t->mesh.world_size > 1) snprintf(who, sizeof who, "rank %d: ", t->rank);
    if (failed) fprintf(stderr, "error: %scheckpoint step %d not written: %s\n", who, t->step, err);
    if (t->rank == 0 && !was_complete) checkpoint_remove_step(t->opt.out_dir, t->step);
    end_launch();
    exit(1);
}

static void save_checkpoint(Trainer* t) {
    params_ready(t);
    if (t->opt.no_save) return;
    char err[ERR_LEN] = "", path[4096];
    const char* dir = t->opt.out_dir;
    const double t0 = now();
    // ZeRO-1 with fp32 master weights (CUDA bf16): each rank updated only its shard of them;
    // gather the others' (in place) so that every rank's copy, and the files, are current.
    if (t->opt.zero && t->model.master_params) {
        comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
        comm_all_gather(t->comm, MESH_WORLD, t->model.master_params + t->shard_begin,
                        t->model.master_params, t->shard_count, COMM_F32);
    }
    gpt_params_to_host(&t->model, t->host_params);
    optimizer_moments_to_host(t->optimizer, t->host_m, t->host_v);
    // A step resumed and written again (its DONE already there) is complete before this write.
    checkpoint_done_path(dir, t->step, path, sizeof path);
    const int was_complete = access(path, F_OK) == 0;
    int rc = 0;
    if (t->rank == 0) {
        checkpoint_model_path(dir, t->step, path, sizeof path);
        rc = model_file_save(path, &t->cfg, t->host_params,
                             t->opt.save_bf16 ? MODEL_VERSION_BF16 : MODEL_VERSION_FP32, err,
                             sizeof err);
    }
    if (rc == 0) {
        TrainStateInfo info;
        fill_state_info(t, &info);
        checkpoint_state_path(dir, t->step, t->rank, path, sizeof path);
        rc = train_state_save(path, &info, t->host_params, t->host_m, t->host_v, err, sizeof err);
    }
    checkpoint_agree(t, rc != 0, err, was_complete);   // every rank's state is on disk before DONE
    if (t->rank == 0) rc = checkpoint_mark_done(dir, t->step, err, sizeof err);
    checkpoint_agree(t, rc != 0, err, was_complete);
    if (t->rank == 0) {
        checkpoint_prune(dir, t->opt.keep_last, t->opt.keep_every);
        printf("checkpoint: step %d written to %s (%.2f s)\n", t->step, dir, now() - t0);
        run_log_json(&t->log, "{\"type\":\"checkpoint\",\"step\":%d}", t->step);
    }
}

// Loads checkpoint `step` into this rank; any mesh works: the optimizer moments of this rank's
// shard are gathered from whichever old ranks' files hold them. Returns 0; -1 with err set when
// a file is unreadable or corrupt; -2 with err set when the checkpoint is sound but does not fit
// this run (model shape, batch geometry, data files).
static int load_checkpoint(Trainer* t, int step, char* err, size_t errlen) {
    char path[4096];
    TrainStateInfo info;
    checkpoint_state_path(t->opt.out_dir, step, 0, path, sizeof path);
    if (train_state_read_info(path, &info, err, errlen) != 0) return -1;
    const GPTConfig* c = &info.model;
    if (c->max_T != t->cfg.max_T || c->V != t->cfg.V || c->Vp != t->cfg.Vp || c->L != t->cfg.L ||
        c->NH != t->cfg.NH || c->C != t->cfg.C) {
        snprintf(err, errlen, "%.300s: model shape L=%d C=%d NH=%d V=%d T=%d differs from this run's "
                 "L=%d C=%d NH=%d V=%d T=%d (resume with the same model options)", path, c->L,
                 c->C, c->NH, c->V, c->max_T, t->cfg.L, t->cfg.C, t->cfg.NH, t->cfg.V,
                 t->cfg.max_T);
        return -2;
    }
    // The same windows: a sequence of another length would cut the data into other samples than
    // the loader's saved position counts. (The sequences per step may change: B, accumulation and
    // dp are re-split, and loader_set_state refuses a position the new dp cannot continue.)
    if (info.T != t->T) {
        snprintf(err, errlen, "%.300s: seq-len: saved with T=%d (B=%d x accumulation %d x dp %d), "
                 "this run has T=%d; resume with the same --seq-len", path, info.T, info.B,
                 info.accum_steps, info.dp, t->T);
        return -2;
    }
    if (info.num_params != t->model.num_params) {   // params would not fit this run's buffer
        snprintf(err, errlen, "%.400s: num_params: expected %zu for this model shape, found %llu",
                 path, t->model.num_params, (unsigned long long)info.num_params);
        return -1;
    }
    const int old_world = info.world_size;
    const size_t want_lo = t->shard_begin, want_hi = t->shard_begin + t->shard_count;
    float *tm = NULL, *tv = NULL;
    int rc = 0;
    // Every old rank file holds the full parameters and the moments of its shard.
    for (int r = 0; r < old_world && rc == 0; r++) {
        TrainStateInfo ri;
        checkpoint_state_path(t->opt.out_dir, step, r, path, sizeof path);
        if (train_state_read_info(path, &ri, err, errlen) != 0) { rc = -1; break; }
        if (ri.step != step || ri.rank != r || ri.world_size != old_world ||
            ri.num_params != info.num_params) {
            snprintf(err, errlen, "%.300s: holds step %d of rank %d of %d (%llu parameters), expected "
                     "step %d of rank %d of %d (%llu)", path, ri.step, ri.rank, ri.world_size,
                     (unsigned long long)ri.num_params, step, r, old_world,
                     (unsigned long long)info.num_params);
            rc = -1;
            break;
        }
        const size_t lo = ri.shard_begin, hi = ri.shard_begin + ri.shard_count;
        const int needed = r == 0 || (lo < want_hi && hi > want_lo);
        if (!needed) continue;
        tm = realloc(tm, sizeof(float) * (ri.shard_count ? ri.shard_count : 1));
        tv = realloc(tv, sizeof(float) * (ri.shard_count ? ri.shard_count : 1));
        CHECK(tm && tv, "", "out of memory reading %s", path);
        if (train_state_load(path, &ri, t->host_params, tm, tv, err, errlen) != 0) {
            rc = -1;
            break;
        }
        const size_t a = lo > want_lo ? lo : want_lo, b = hi < want_hi ? hi : want_hi;
        for (size_t i = a; i < b; i++) {
            t->host_m[i - want_lo] = tm[i - lo];
            t->host_v[i - want_lo] = tv[i - lo];
        }
    }
    free(tm);
    free(tv);
    if (rc != 0) return -1;
    if (t->train_loader && loader_set_state(t->train_loader, &info.loader, err, errlen) != 0)
        return -2;
    gpt_params_from_host(&t->model, t->host_params);
    optimizer_moments_from_host(t->optimizer, t->host_m, t->host_v);
    t->step = info.step;
    // The stored parameters as the uninterrupted run has them (CUDA bf16: stochastic rounding).
    gpt_params_restore_rounding(&t->model, t->step);
    t->sample_rng = info.sample_rng;
    return 0;
}

// Continues from the newest complete checkpoint that loads; a corrupt one is skipped with a
// warning. A checkpoint that does not fit this run's options, or complete checkpoints none of
// which loads, end the run: starting over from step 0 would later overwrite them.
static void resume(Trainer* t) {
    enum { MAX = 4096 };
    int* steps = xmalloc(sizeof(int) * MAX, "checkpoint list");
    const int n = checkpoint_complete_steps(t->opt.out_dir, steps, MAX);
    int resumed = 0;
    for (int i = 0; i < n && !resumed; i++) {
        char err[ERR_LEN] = "";
        const int rc = load_checkpoint(t, steps[i], err, sizeof err);
        // Every rank must agree, or none resumes from this one.
        const double bad = all_reduce_scalar(t, rc == -1 ? 1 : 0);
        const double misfit = all_reduce_scalar(t, rc == -2 ? 1 : 0);
        if (misfit > 0) {
            if (rc == -2) fprintf(stderr, "error: rank %d: --resume: checkpoint step %d: %s\n",
                                  t->rank, steps[i], err);
            end_launch();
            exit(2);
        }
        if (bad == 0) {
            resumed = 1;
            if (t->rank == 0) printf("resume: continuing from step %d in %s\n", t->step, t->opt.out_dir);
        } else {
            if (rc != 0) fprintf(stderr, "warning: rank %d: checkpoint step %d unusable: %s\n",
                                 t->rank, steps[i], err);
            if (t->rank == 0 && i + 1 < n) fprintf(stderr, "warning: trying an older checkpoint\n");
        }
    }
    free(steps);
    if (n > 0 && !resumed)
        config_error(t, "--resume: none of the %d complete checkpoints in %s loads (see the "
                     "warnings above); move them away to start from step 0", n, t->opt.out_dir);
    if (!resumed && t->rank == 0)
        printf("resume: no complete checkpoint in %s, starting from step 0\n", t->opt.out_dir);
}

static void print_config(Trainer* t) {
    if (t->rank != 0) return;
    printf("effective configuration:\n");
    train_options_print(&t->opt, print_line);
    printf("model: L=%d C=%d NH=%d HS=%d context=%d V=%d (padded %d), %zu parameters; "
           "backend %s\n", t->cfg.L, t->cfg.C, t->cfg.NH, t->cfg.C / t->cfg.NH, t->cfg.max_T,
           t->cfg.V, t->cfg.Vp, t->model.num_params, gpt_backend_name());
    printf("mesh: world %d = dp %d x pq %d x pkv %d; attention %s; %d local tokens per sequence "
           "per rank; transport %s (launch: %s)\n", t->mesh.world_size, t->mesh.dp, t->mesh.pq,
           t->mesh.pkv, t->attention->name, t->Tl, t->comm->name,
           t->use_mpi ? "MPI" : t->opt.rendezvous);
    printf("batch: %d x %d tokens per micro-batch, %d accumulation steps, %ld tokens per step; "
           "warmup %d steps; ZeRO stage %d\n", t->B, t->T, t->accum, t->tokens_per_step,
           t->sched.warmup_steps, t->opt.zero);
    if (t->buckets)
        printf("gradients: all-reduce in %d buckets of >= %.3g MiB during backward\n",
               grad_buckets_count(t->buckets), t->opt.grad_bucket_mb);
    if (t->device >= 0)
        printf("device: %s (GPU %d of rank 0, local rank %d of %d on its node)\n",
               t->device_info.name, t->device, t->local_rank, t->local_size);
    else
        printf("device: %s\n", t->device_info.name);
    if (t->peak_flops > 0)
        printf("peak: %.1f GFLOP/s per rank (%s)\n", t->peak_flops * 1e-9, t->peak_source);
    else
        printf("peak: unknown for this device (give --peak-gflops to report MFU)\n");
    fflush(stdout);
}

// Model FLOPs utilisation at `tokens_per_s` (global), against every rank's peak; 0 when the peak
// is unknown. *text gets it in percent, or "n/a".
static double mfu_of(const Trainer* t, double tokens_per_s, double flops_per_token, char* text,
                     size_t len) {
    const double mfu = t->peak_flops > 0
                           ? tokens_per_s * flops_per_token / (t->peak_flops * t->mesh.world_size)
                           : 0;
    if (t->peak_flops > 0) snprintf(text, len, "%.1f%%", mfu * 100);
    else snprintf(text, len, "n/a");
    return mfu;
}

// Throughput over the steps this run timed, the first excluded (it pays for one-time work: cuBLASLt
// plans, scratch that grows, caches); memory in use after the first step and at the end.
typedef struct {
    int steps;
    double seconds;
    int phases;       // steps whose phases were measured (all or none)
    StepPhases sum;
    size_t memory_used, memory_total;
} RunTotals;

static void note_memory(RunTotals* r) {
    BackendDevice d;
    gpt_backend_device(&d);
    if (d.memory_used > r->memory_used) r->memory_used = d.memory_used;
    r->memory_total = d.memory_total;
}

static void print_summary(Trainer* t, const RunTotals* r, double flops_per_token) {
    if (t->rank != 0 || r->steps == 0) return;
    const double per = r->seconds / r->steps, tps = t->tokens_per_step / per;
    char mfu_text[32];
    const double mfu = mfu_of(t, tps, flops_per_token, mfu_text, sizeof mfu_text);
    const double gib = 1.0 / (1 << 30);
    char memory_text[96];
    if (r->memory_total)
        snprintf(memory_text, sizeof memory_text, "device memory %.2f GiB in use of %.2f GiB",
                 r->memory_used * gib, r->memory_total * gib);
    else
        snprintf(memory_text, sizeof memory_text, "peak host memory %.2f GiB", r->memory_used * gib);
    // Phases where every timed step measured them (see StepPhases: not on a device backend with
    // --timeline 0, nor in a step whose marks the timeline had no room for).
    const int timed = r->phases == r->steps;
    char split[128] = " (phases not timed)";
    char split_json[128] = "";
    if (timed) {
        snprintf(split, sizeof split, " = forward %.1f + backward %.1f + optimizer %.1f",
                 r->sum.forward / r->steps * 1e3, r->sum.backward / r->steps * 1e3,
                 r->sum.optimizer / r->steps * 1e3);
        snprintf(split_json, sizeof split_json, ",\"forward_ms\":%.3f,\"backward_ms\":%.3f,"
                 "\"optimizer_ms\":%.3f", r->sum.forward / r->steps * 1e3,
                 r->sum.backward / r->steps * 1e3, r->sum.optimizer / r->steps * 1e3);
    }
    printf("summary: %d timed step%s (the run's first excluded): %.1f ms per step%s; %.0f tokens/s; "
           "MFU %s; %s\n", r->steps, r->steps == 1 ? "" : "s", per * 1e3, split, tps, mfu_text,
           memory_text);
    run_log_json(&t->log, "{\"type\":\"summary\",\"step\":%d,\"timed_steps\":%d,\"ms_per_step\":%.3f"
                 "%s,\"tokens_per_s\":%.1f,\"mfu\":%.5f,\"peak_flops\":%.6g,\"memory_used_bytes\":%zu,"
                 "\"memory_total_bytes\":%zu}", t->step, r->steps, per * 1e3, split_json, tps, mfu,
                 t->peak_flops, r->memory_used, r->memory_total);
}

// Steps of this run that were not applied, when there were any.
static void print_skipped(Trainer* t) {
    const int n = t->skipped_spike + t->skipped_nonfinite;
    if (t->rank != 0 || n == 0) return;
    printf("skipped: %d step%s not applied (%d spike%s, %d non-finite)\n", n, n == 1 ? "" : "s",
           t->skipped_spike, t->skipped_spike == 1 ? "" : "s", t->skipped_nonfinite);
    run_log_json(&t->log, "{\"type\":\"skipped\",\"step\":%d,\"spike\":%d,\"non_finite\":%d}",
                 t->step, t->skipped_spike, t->skipped_nonfinite);
}

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
typedef struct {
    int counted;
    BackendCounters c0, c1;
    long long layer0;
    long long launches, d2h, syncs_in_step, syncs_end;
    double launches_per_layer;
} StepCounters;

// Over the run's steps: the first (one-time allocations and plans) apart from the others.
typedef struct {
    int steps;                     // counted steps after the first
    StepCounters first;
    long long launches, d2h;       // sums over the steps after the first
    double launches_per_layer;
    long long max_syncs_in_step, max_syncs_end, max_d2h;
    int have_first;
} CounterTotals;

static void counters_begin(const Trainer* t, StepCounters* sc) {
    memset(sc, 0, sizeof *sc);
    sc->counted = gpt_backend_counters(&sc->c0);
    sc->layer0 = t->model.layer_launches;
}

static void counters_mark(StepCounters* sc) {
    if (sc->counted) gpt_backend_counters(&sc->c1);
}

static void counters_end(const Trainer* t, StepCounters* sc, CounterTotals* tot, int first) {
    if (!sc->counted) return;
    BackendCounters c2;
    gpt_backend_counters(&c2);
    sc->launches = c2.launches - sc->c0.launches;
    sc->d2h = c2.d2h - sc->c0.d2h;
    sc->syncs_in_step = sc->c1.syncs - sc->c0.syncs;
    sc->syncs_end = c2.syncs - sc->c1.syncs;
    sc->launches_per_layer = (double)(t->model.layer_launches - sc->layer0) / t->cfg.L;
    if (first) {
        tot->first = *sc;
        tot->have_first = 1;
        return;
    }
    tot->steps++;
    tot->launches += sc->launches;
    tot->d2h += sc->d2h;
    tot->launches_per_layer += sc->launches_per_layer;
    if (sc->syncs_in_step > tot->max_syncs_in_step) tot->max_syncs_in_step = sc->syncs_in_step;
    if (sc->syncs_end > tot->max_syncs_end) tot->max_syncs_end = sc->syncs_end;
    if (sc->d2h > tot->max_d2h) tot->max_d2h = sc->d2h;
}

static void print_counters(Trainer* t, const CounterTotals* c) {
    if (t->rank != 0 || !c->have_first) return;
    const StepCounters* f = &c->first;
    const int n = c->steps;
    printf("counters: first step %lld launches (%.1f per layer), %lld D2H copies, %lld syncs in "
           "the step + %lld at its end", f->launches, f->launches_per_layer, f->d2h,
           f->syncs_in_step, f->syncs_end);
    if (n > 0)
        printf("; later %d step%s: %.1f launches (%.1f per layer), %.1f D2H copies per step, at "
               "most %lld syncs in a step + %lld at its end", n, n == 1 ? "" : "s",
               (double)c->launches / n, c->launches_per_layer / n, (double)c->d2h / n,
               c->max_syncs_in_step, c->max_syncs_end);
    printf(" (rank 0)\n");
    run_log_json(&t->log, "{\"type\":\"counters\",\"step\":%d,\"first_launches\":%lld,"
                 "\"first_launches_per_layer\":%.2f,\"first_d2h\":%lld,\"first_syncs_in_step\":%lld,"
                 "\"first_syncs_end\":%lld,\"steps\":%d,\"launches\":%.2f,\"launches_per_layer\":%.2f,"
                 "\"d2h\":%.2f,\"max_d2h\":%lld,\"max_syncs_in_step\":%lld,\"max_syncs_end\":%lld}",
                 t->step, f->launches, f->launches_per_layer, f->d2h, f->syncs_in_step, f->syncs_end,
                 n, n ? (double)c->launches / n : 0, n ? c->launches_per_layer / n : 0,
                 n ? (double)c->d2h / n : 0, c->max_d2h, c->max_syncs_in_step, c->max_syncs_end);
}

// The --rendezvous value, read before anything starts: file: and tcp: mean no MPI at all.
static const char* rendezvous_arg(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rendezvous") == 0 && i + 1 < argc) return argv[i + 1];
        if (strncmp(argv[i], "--rendezvous=", 13) == 0) return argv[i] + 13;
    }
    return "mpi";
}

// Where this process sits in the job: from MPI, or (file or tcp rendezvous) from the launcher's
// environment and the --rank/--world-size/--local-rank flags. Parses the options.
static int launch(Trainer* t, int* argc, char*** argv, int* world_rank, int* world_size) {
    t->use_mpi = strcmp(rendezvous_arg(*argc, *argv), "mpi") == 0;
    LaunchInfo li;
    char err[ERR_LEN];
    if (t->use_mpi) {
        comm_mpi_init(argc, argv, world_rank, world_size);
    } else {
        if (launch_info_from_env(&li, err) != 0) fail_msg("%s", err);
        *world_rank = li.rank;
        *world_size = li.world_size;
    }
    t->rank = *world_rank;
    const int parsed = train_options_parse(&t->opt, *argc, *argv, *world_rank == 0);
    if (parsed != 0) return parsed;
    const TrainOptions* o = &t->opt;
    if (t->use_mpi) {
        if (o->launch_rank >= 0)
            config_error(t, "--rank: expected no value under MPI (the rank is MPI's), found %d; "
                         "--rank is for --rendezvous file:PATH or tcp:HOST:PORT", o->launch_rank);
        if (o->launch_world >= 0)
            config_error(t, "--world-size: expected no value under MPI (the size is MPI's), found "
                         "%d; --world-size is for --rendezvous file:PATH or tcp:HOST:PORT",
                         o->launch_world);
        comm_mpi_node_rank(&t->local_rank, &t->local_size);
        if (o->launch_local_rank >= 0) t->local_rank = o->launch_local_rank;
    } else {
        if (launch_info_override(&li, o->launch_rank, o->launch_world, o->launch_local_rank, err))
            fail_msg("%s", err);
        *world_rank = t->rank = li.rank;
        *world_size = li.world_size;
        t->local_rank = li.local_rank;
        t->local_size = li.local_size;
        char prefix[32];
        snprintf(prefix, sizeof prefix, "rank %d", li.rank);
        fail_set_prefix(prefix);
    }
    return 0;
}

int main(int argc, char** argv) {
    blas_ensure_vector_kernels(argv);
    int world_rank, world_size;
    Trainer t;
    memset(&t, 0, sizeof t);
    const int parsed = launch(&t, &argc, &argv, &world_rank, &world_size);
    if (parsed != 0) {
        end_launch();
        return parsed > 0 ? 0 : 2;
    }
    setup_model_config(&t);
    if (strcmp(t.opt.mesh, "auto") == 0) {
        char err[ERR_LEN];
        if (mesh_auto_choose(&t.opt, &t.cfg, world_size, t.rank == 0, err, sizeof err) != 0)
            config_error(&t, "%s", err);
    }
    setup_mesh(&t, world_rank, world_size);
    setup_transport(&t);
    t.comm = create_comm(&t);
    comm_set_overlap(t.comm, t.opt.overlap);
    open_data(&t);
    check_config_across_ranks(&t);
    setup_attention(&t);
    setup_model_and_optimizer(&t);
    setup_timeline(&t);
    setup_batches(&t);
    setup_sampler(&t);
    train_options_json(&t.opt, t.config_json, sizeof t.config_json);
    char err[ERR_LEN];
    if (t.rank == 0 && checkpoint_make_dir(t.opt.out_dir, err, sizeof err) != 0)
        fail_msg("--out-dir %s", err);
    comm_barrier(t.comm, MESH_WORLD);
    if (t.opt.resume) resume(&t);
    if (t.rank == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s", t.opt.log_file[0] ? t.opt.log_file : "");
        if (!path[0]) snprintf(path, sizeof path, "%s/log.jsonl", t.opt.out_dir);
        if (run_log_open(&t.log, path, err, sizeof err) != 0) fail_msg("--log %s", err);
        // MFU against --peak-gflops if given; else the CPU's measured FMA peak, or the GPU's entry
        // in the peak table (train/gpu_peaks.c); a GPU the table does not know gets no MFU.
        gpt_backend_device(&t.device_info);
        if (t.opt.peak_gflops > 0) {
            t.peak_flops = t.opt.peak_gflops * 1e9;
            snprintf(t.peak_source, sizeof t.peak_source, "--peak-gflops");
        } else if (gpt_backend_host_memory()) {
            t.peak_flops = peak_flops_measure(0);
            snprintf(t.peak_source, sizeof t.peak_source, "measured FMA peak; BLAS kernels: OpenBLAS %s",
                     blas_kernel_name());
        } else {
            t.peak_flops = t.device_info.peak_flops;
            snprintf(t.peak_source, sizeof t.peak_source, "%s", t.device_info.peak_entry);
        }
        run_log_json(&t.log, "{\"type\":\"config\",\"step\":%d,\"world\":%d,\"params\":%zu,"
                     "\"options\":%s}", t.step, world_size, t.model.num_params, t.config_json);
        // Records of later steps above this line came from the interrupted run; the steps are
        // logged again below, and readers take the last record of a step.
        if (t.step > 0)
            run_log_json(&t.log, "{\"type\":\"resume\",\"step\":%d,\"note\":\"records of "
                         "steps after %d above this line are the interrupted run's; the last "
                         "record of a step counts\"}", t.step, t.step);
    }
    print_config(&t);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;   // a signal must not fail a read or write in progress
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    const double flops_per_token = 6.0 * t.model.num_params + 6.0 * t.cfg.L * t.cfg.C * t.T;
    if (t.opt.eval_only) {
        // The model is what --init-from or --resume loaded; a fresh initialisation is no model.
        if (t.step == 0 && !(t.opt.init_from && t.opt.init_from[0]))
            config_error(&t, "--eval-only: no model to evaluate: give --init-from FILE, or "
                         "--resume with a complete checkpoint in --out-dir %s", t.opt.out_dir);
        report_eval(&t, evaluate(&t));
        goto shut_down;
    }
    const int start = t.step;
    double elapsed = 0;
    int stop = 0;
    int skips_in_a_row = 0;   // steps in a row not applied (not finite, or spikes)
    RunTotals totals;
    memset(&totals, 0, sizeof totals);
    CounterTotals counter_totals;
    memset(&counter_totals, 0, sizeof counter_totals);
    while (t.step < t.opt.steps && !stop) {
        // Evaluation and sampling at step k happen before step k+1 whether or not the run was
        // resumed at k, so a stopped and resumed run logs (and samples) what a straight one does.
        if (t.val_loader && t.opt.eval_every > 0 && t.step % t.opt.eval_every == 0 &&
            t.step > 0) {
            report_eval(&t, evaluate(&t));
        }
        if (t.opt.sample_every > 0 && t.step % t.opt.sample_every == 0 && t.step > 0) sample(&t);
        const double t0 = now();
        double norm;
        const long long bytes0 = comm_count_bytes(t.comm);
        StepCounters sc;
        counters_begin(&t, &sc);
        timeline_step_begin(t.timeline, t.step + 1);
        train_step(&t, spike_limits(&t.spike, t.tokens_per_step));
        counters_mark(&sc);
        int applied;
        const double loss = finish_step(&t, &norm, &applied);
        // Not applied (the device dropped the update): not finite, go on (skip) or stop; else a
        // spike. Applied steps feed the spike detector's window.
        const int finite = isfinite(loss) && isfinite(norm);
        skips_in_a_row = applied ? 0 : skips_in_a_row + 1;
        if (!finite) nonfinite_step(&t, t.step + 1, loss, norm, skips_in_a_row);
        else if (!applied) spike_step(&t, t.step + 1, loss, norm, skips_in_a_row);
        else spike_accept(&t.spike, loss, norm);
        comm_close_spans(t.comm);
        const TimelineStep ts = timeline_step_end(t.timeline);
        counters_end(&t, &sc, &counter_totals, t.step - start == 0);
        const StepPhases ph = step_phases(&t);
        t.step_comm_bytes += comm_count_bytes(t.comm) - bytes0;
        const double dt = now() - t0;
        const double lr = lr_at_step(&t.sched, t.step);
        t.step++;
        elapsed += dt;
        if (t.step - start == 1) {
            note_memory(&totals);
        } else {
            totals.steps++;
            totals.seconds += dt;
            totals.phases += ph.measured;
            totals.sum.forward += ph.forward;
            totals.sum.backward += ph.backward;
            totals.sum.optimizer += ph.optimizer;
        }
        const double tps = t.tokens_per_step / dt;
        char mfu_text[32];
        const double mfu = mfu_of(&t, tps, flops_per_token, mfu_text, sizeof mfu_text);
        if (t.rank == 0 && applied) {
            const double eta = elapsed / (t.step - start) * (t.opt.steps - t.step);
            if (!t.opt.quiet)
                printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %.0f ms | %.0f tok/s | "
                       "MFU %s | ETA %.0f s\n", t.step, t.opt.steps, loss, lr, norm, dt * 1e3,
                       tps, mfu_text, eta);
            char fractions[160] = "";
            if (t.timeline)
                snprintf(fractions, sizeof fractions, ",\"compute_frac\":%.5f,"
                         "\"exposed_comm_frac\":%.5f,\"wait_frac\":%.5f", ts.compute_frac,
                         ts.exposed_comm_frac, ts.wait_frac);
            char phases[128] = "";
            if (ph.measured)
                snprintf(phases, sizeof phases, ",\"forward_ms\":%.3f,\"backward_ms\":%.3f,"
                         "\"optimizer_ms\":%.3f", ph.forward * 1e3, ph.backward * 1e3,
                         ph.optimizer * 1e3);
            char counted[192] = "";
            if (sc.counted)
                snprintf(counted, sizeof counted, ",\"launches\":%lld,\"launches_per_layer\":%.2f,"
                         "\"d2h\":%lld,\"syncs_in_step\":%lld,\"syncs_end\":%lld", sc.launches,
                         sc.launches_per_layer, sc.d2h, sc.syncs_in_step, sc.syncs_end);
            run_log_json(&t.log, "{\"type\":\"step\",\"step\":%d,\"loss\":%.9g,\"lr\":%.9g,"
                         "\"grad_norm\":%.9g,\"ms\":%.3f,\"tokens_per_s\":%.3f,\"mfu\":%.5f%s%s%s}",
                         t.step, loss, lr, norm, dt * 1e3, tps, mfu, phases, fractions, counted);
            fflush(stdout);
        }
        // Every rank stops at the same step: agree on any rank's signal.
        const int local_stop = stop_requested != 0 ||
                               (t.opt.exit_after > 0 && t.step - start >= t.opt.exit_after);
        stop = all_reduce_scalar(&t, local_stop) > 0;
        const int ck_due = t.opt.checkpoint_every > 0 && t.step % t.opt.checkpoint_every == 0;
        if ((ck_due || stop) && t.step < t.opt.steps) save_checkpoint(&t);
    }
    note_memory(&totals);
    print_summary(&t, &totals, flops_per_token);
    print_skipped(&t);
    print_counters(&t, &counter_totals);
    report_timeline(&t);
    write_trace(&t);
    // A stop request during the last step is no early stop: the run ends as usual.
    const int early = stop && t.step < t.opt.steps;
    if (early && t.rank == 0)
        printf("stopping early at step %d (%s)\n", t.step,
               t.opt.no_save ? "no checkpoint: --no-save" : "checkpoint written");
    if (!early) {
        if (t.val_loader) {
            report_eval(&t, evaluate(&t));
        }
        sample(&t);
        save_checkpoint(&t);
    }
shut_down:
    params_ready(&t);
    run_log_close(&t.log);
    loader_close(t.train_loader);
    loader_close(t.val_loader);
    if (t.sample_out) sampler_free(&t.sampler);
    free(t.sample_prompt);
    free(t.sample_out);
    gpt_free(&t.model);
    attention_layer_free(t.attention);
    comm_destroy(t.comm);   // its trace first: it points into the timeline
    timeline_destroy(t.timeline);
    timeline_host_clock_destroy(t.host_clock);
    if (t.has_tokens) token_table_free(&t.tokens);
    optimizer_free(t.optimizer);
    spike_free(&t.spike);
    tensor_free(t.shard_scratch);
    grad_buckets_free(t.buckets);
    free(t.host_params); free(t.host_m); free(t.host_v);
    free(t.full_inputs); free(t.full_targets); free(t.inputs); free(t.targets); free(t.positions);
    free(t.phase_slot); free(t.phase_host);
    end_launch();
    return 0;
}
