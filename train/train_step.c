// One optimizer step: the micro-batches of this rank (the data read, forward, backward), the
// gradient reduction over every rank, the norm, clip factor and AdamW, issued without waiting for
// the device; the one wait at its end; the time each phase took; and the policies for a step that
// is not applied (not finite, or a loss spike).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attention/dist_ops.h"
#include "model/documents.h"
#include "train/trainer.h"

// Element i of a backend tensor: this file is C, where `real` is float, while the CUDA backend
// stores bf16, so offsets are computed in bytes of the backend's storage type.
static real* element(real* base, size_t i) {
    return (real*)((char*)base + i * comm_type_size(dist_real_comm_type()));
}

// Reads this rank's next micro-batch: the full windows, then its share of the tokens.
void next_batch(Trainer* t, DataLoader* loader) {
    char err[ERR_LEN];
    const int rc = loader_next(loader, t->full_inputs, t->full_targets, err, sizeof err);
    if (rc != 0)
        fail_msg("%s %s", loader == t->train_loader ? "--train-data" : "--val-data",
                 rc < 0 ? err : "validation data ran out");
    layout_take(t->full_inputs, t->B, t->T, t->positions, t->Tl, t->inputs);
    layout_take(t->full_targets, t->B, t->T, t->positions, t->Tl, t->targets);
    if (t->doc_boundary >= 0) {
        gpt_set_documents(&t->model, t->full_inputs, t->T, t->doc_boundary, t->opt.reset_position_ids);
        // The bounds live in device memory a graph reads; but Ring's and Zigzag's early stop (after
        // the longest document's span) would change their launches batch by batch: with graphs
        // they run every step.
        if (t->opt.cuda_graph) t->model.attention->docs.span = 0;
    }
}

// The attention pairs of the micro-batch just read, with its document mask and without, for the
// summary (the MFU counts causal pairs): the host's copy of the bounds (GPT.doc_host).
static void count_document_pairs(Trainer* t) {
    const GPTConfig* c = &t->cfg;
    for (int l = 0; l < c->L; l++) {
        const long w = gpt_layer_window(c, l);
        t->doc_pairs[0] += document_pairs(t->model.doc_host, t->B, t->T, w);
        t->doc_pairs[1] += document_pairs(NULL, t->B, t->T, w);
    }
}

void all_reduce_sums(Trainer* t, double* x, int n) {
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    comm_all_reduce_host(t->comm, MESH_WORLD, x, n, COMM_F64);
}

double all_reduce_scalar(Trainer* t, double x) {
    all_reduce_sums(t, &x, 1);
    return x;
}

// ZeRO-1 leaves the parameter all-gather of the last update in flight, to overlap the end of the
// step and the next batch's loading; anything that reads the parameters waits for it here first.
void params_ready(Trainer* t) {
    comm_wait(t->comm, t->param_gather);
    t->param_gather = NULL;
}

// ZeRO-1: every rank's shard of the parameters to every rank, left in flight (params_ready).
void gather_params(Trainer* t) {
    GPT* m = &t->model;
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    tensor_copy(t->shard_scratch, element(m->params_memory, t->shard_begin), t->shard_count);
    t->param_gather = comm_all_gather_start(t->comm, MESH_WORLD, t->shard_scratch,
                                            m->params_memory, t->shard_count,
                                            dist_real_comm_type());
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
int nonfinite_step(Trainer* t, int step, double loss, double norm, int in_a_row) {
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
void spike_step(Trainer* t, int step, double loss, double norm, int in_a_row) {
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

// Phase boundary i of the step: 0 its start, 2a + 1 and 2a + 2 the ends of micro-batch a's
// forward and backward, 2 accum + 1 the end of the optimizer.
static void phase_mark(Trainer* t, int i) {
    if (t->timeline)
        t->phase_slot[i] = i == 0 ? TIMELINE_ORIGIN_SLOT
                                  : timeline_mark(t->timeline, TIMELINE_COMPUTE_TRACK);
    else
        t->phase_host[i] = seconds_now();
}

// The phases of the step that ended last (after timeline_step_end).
StepPhases step_phases(const Trainer* t) {
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

// The gradients summed over every rank: in buckets during the last micro-batch's backward
// (t->buckets), or here in one all-reduce; ZeRO-1 reduce-scatters to this rank's shard. Then the
// step's scalars on the backend: the sum of squares of the (shard's) gradient, and the loss sum
// and (ZeRO-1: each rank holds a shard) the sum of squares summed over all ranks in one
// all-reduce of backend memory. Nothing waits for the device.
static void reduce_gradients(Trainer* t, int graphed) {
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
            if (!graphed) grad_buckets_finish(t->buckets);   // else the graph waited for them
        } else if (t->mesh.world_size > 1) {
            comm_all_reduce_sum(t->comm, MESH_WORLD, m->grads_memory, m->num_params, gt);
        }
        gpt_grad_sum_squares(m, 0, m->num_params, sumsq);
    }
    // GPT_Z_LOSS_SUM, GPT_LOSS_SUM and GPT_GRAD_SUMSQ are adjacent: one all-reduce, in fp64, of
    // the loss and those of the other two in use.
    const int z = m->z_loss > 0;
    if (t->mesh.world_size > 1)
        comm_all_reduce_sum(t->comm, MESH_WORLD, m->scalars + GPT_LOSS_SUM - z,
                            (size_t)(z + 1 + (t->opt.zero ? 1 : 0)), COMM_F64);
}

// The gradient buckets start their all-reduces as the coming backward completes each group.
static void arm_buckets(Trainer* t) {
    GPT* m = &t->model;
    grad_buckets_begin(t->buckets, t->comm, MESH_WORLD, m->grads_memory, dist_real_comm_type());
    m->grads_ready = grad_buckets_ready;
    m->grads_ready_ctx = t->buckets;
}

// --cuda-graph 1, after the first step (which made every one-time allocation and choice): the
// micro-batch's tokens are uploaded, then its forward and backward run as one graph launch. The
// graph of this gradient mode (write or add) is captured at its first use: everything between the
// upload and the gradient reduction is device work on the backend's stream, with the same
// arguments every step (run_setup.c refuses what would change them; next_batch keeps Ring's
// steps fixed under document masks). On a sequence-parallel mesh that includes the attention's
// NCCL operations, and in the bucketed micro-batch the gradient buckets' all-reduces and their
// waits (so the reduction overlaps the backward inside the graph); every rank captures and
// launches the same graphs in the same order, as NCCL requires. With a timeline, its marks and
// spans are captured too (event record nodes) and each launch replays them into the step's
// slots; returns the slot of the micro-batch's end of forward (-1: none).
static int graphed_micro_batch(Trainer* t, double dloss, int bucketed) {
    GPT* m = &t->model;
    gpt_load_batch(m, t->inputs, t->targets);
    const int v = m->grads_write + 2 * bucketed;
    if (!t->graphs[v]) {
        comm_capture_begin(t->comm);
        gpt_graph_begin();
        timeline_capture_begin(t->timeline);
        gpt_forward_loaded(m);
        t->graph_forward_end[v] = timeline_mark(t->timeline, TIMELINE_COMPUTE_TRACK);
        if (bucketed) arm_buckets(t);
        gpt_backward(m, dloss);
        m->grads_ready = NULL;
        if (bucketed) grad_buckets_finish(t->buckets);   // the reductions join the graph
        t->graph_marks[v] = timeline_capture_end(t->timeline);
        t->graphs[v] = gpt_graph_end(m->grads_write ? "the first micro-batch's forward and backward"
                                                    : "a later micro-batch's forward and backward");
        t->graph_comm[v] = comm_capture_end(t->comm);
        if (t->rank == 0)
            printf("cuda graph: captured the forward and backward of a micro-batch that %s the "
                   "gradients%s: %zu nodes (%d timeline marks), %d communication operations\n",
                   m->grads_write ? "writes" : "adds to", bucketed ? " and reduces them" : "",
                   gpt_graph_nodes(t->graphs[v]), gpt_graph_marks(t->graphs[v]),
                   comm_capture_ops(t->graph_comm[v]));
    }
    const int first = timeline_replay(t->timeline, t->graph_marks[v]);
    gpt_graph_launch(t->graphs[v], first);
    comm_replayed(t->comm, t->graph_comm[v]);
    return timeline_replayed_slot(first, t->graph_forward_end[v]);
}

int64_t trained_tokens(const Trainer* t) { return loader_windows_read(t->train_loader) * t->T; }

void step_batch(Trainer* t) {
    const int64_t trained = trained_tokens(t);
    t->tokens_per_step = (long)batch_rampup_step_tokens(&t->rampup, trained);
    t->accum = (int)(t->tokens_per_step / ((long)t->B * t->T * t->mesh.dp));
    t->trained_after_step = trained + t->tokens_per_step;
}

double step_lr(const Trainer* t) {
    return t->sched.decay_tokens > 0 ? lr_at_tokens(&t->sched, (double)t->trained_after_step)
                                     : lr_at_step(&t->sched, t->step);
}

void free_graphs(Trainer* t) {
    for (int v = 0; v < 4; v++) {
        gpt_graph_free(t->graphs[v]);
        comm_capture_free(t->graph_comm[v]);
        timeline_capture_free(t->graph_marks[v]);
        t->graphs[v] = NULL;
        t->graph_comm[v] = NULL;
        t->graph_marks[v] = NULL;
    }
}

// One optimizer step, issued without the host waiting for the device: accumulation over
// micro-batches, gradient reduction, norm and clip factor (or the skip mark: not finite, or
// above limits), AdamW, under --log-params-norm the parameters' sum of squares (all-reduced
// under ZeRO-1), and the copy of the step's scalars to the host (gpt_scalars_fetch), which the
// caller waits for (finish_step).
void train_step(Trainer* t, StepLimits limits) {
    GPT* m = &t->model;
    const double dloss = 1.0 / t->tokens_per_step;
    const int graphed = t->opt.cuda_graph && t->steps_issued > 0;   // the first step runs eagerly
    if (graphed && t->graph_tokens != t->tokens_per_step) {   // graphs of another loss scale
        free_graphs(t);
        t->graph_tokens = t->tokens_per_step;
    }
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    phase_mark(t, 0);
    for (int a = 0; a < t->accum; a++) {
        next_batch(t, t->train_loader);
        if (a == 0) {
            params_ready(t);
            gpt_loss_zero(m);
        }
        // The first micro-batch writes the parameter gradients (no zeroing pass), later ones add.
        m->grads_write = a == 0;
        // The last micro-batch's backward completes the gradients: reduce them as it goes.
        const int bucketed = t->buckets && a == t->accum - 1;
        if (graphed) {
            const int forward_end = graphed_micro_batch(t, dloss, bucketed);
            if (t->doc_boundary >= 0) count_document_pairs(t);
            if (t->timeline) t->phase_slot[2 * a + 1] = forward_end;
            else phase_mark(t, 2 * a + 1);
            phase_mark(t, 2 * a + 2);
            continue;
        }
        gpt_forward(m, t->inputs, t->targets);
        if (t->doc_boundary >= 0) count_document_pairs(t);
        phase_mark(t, 2 * a + 1);
        if (bucketed) arm_buckets(t);
        gpt_backward(m, dloss);   // the classifier's one pass adds this micro-batch's losses
        m->grads_ready = NULL;
        phase_mark(t, 2 * a + 2);
    }
    reduce_gradients(t, graphed);
    gpt_clip_scale(m, t->opt.grad_clip, limits);
    const int begin = timeline_mark(t->timeline, TIMELINE_COMPUTE_TRACK);
    optimizer_step(t->optimizer, m, t->step + 1, step_lr(t), &t->adam,
                   m->scalars + GPT_CLIP_SCALE);
    const TimelineLabel label = {"optimizer", NULL, NULL, 0, -1, "other"};
    timeline_span(t->timeline, TL_COMPUTE, TIMELINE_COMPUTE_TRACK, begin,
                  timeline_mark(t->timeline, TIMELINE_COMPUTE_TRACK), &label);
    if (t->opt.log_params_norm) {   // this rank's shard (all of them without ZeRO-1), updated
        gpt_param_sum_squares(m, t->shard_begin, t->shard_count, m->scalars + GPT_PARAM_SUMSQ);
        if (t->opt.zero && t->mesh.world_size > 1)
            comm_all_reduce_sum(t->comm, MESH_WORLD, m->scalars + GPT_PARAM_SUMSQ, 1, COMM_F64);
    }
    if (t->opt.zero) gather_params(t);
    phase_mark(t, 2 * t->accum + 1);
    gpt_scalars_fetch(m);
    t->steps_issued++;
}

// The end of a step: the one wait for the device.
StepResult finish_step(Trainer* t) {
    double sc[GPT_NUM_SCALARS];
    comm_wait_compute(t->comm);   // the host's wait for the step, under the comm watchdog
    gpt_scalars_wait(sc);
    StepResult r = {sc[GPT_LOSS_SUM] / t->tokens_per_step, sqrt(sc[GPT_GRAD_SUMSQ]),
                    sc[GPT_Z_LOSS_SUM] / t->tokens_per_step, 0, sc[GPT_CLIP_SCALE] != OPTIMIZER_SKIP};
    if (t->opt.log_params_norm) r.params_norm = sqrt(sc[GPT_PARAM_SUMSQ]);
    return r;
}
