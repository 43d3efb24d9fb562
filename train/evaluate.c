// Evaluation during and after training, and --eval-only: the validation loss (--val-data) and the
// multiple-choice accuracy (--mc-eval, data/mc_eval.h), on any mesh.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe.h"
#include "train/trainer.h"

// Range k of K over the T positions of a sequence: [k T / K, (k + 1) T / K), rounded down.
static long position_range_begin(int k, int K, int T) { return (long)k * T / K; }

// --eval-positions: adds this batch's per-token losses (read back, which waits for them) to the
// sums of their positions' ranges; the rank's tokens sit at t->positions in the sequence.
static void add_position_losses(Trainer* t, double* sums) {
    const int K = t->opt.eval_positions;
    gpt_losses_to_host(&t->model, t->mc_losses);
    for (int b = 0; b < t->B; b++)
        for (int j = 0; j < t->Tl; j++)
            sums[t->positions[j] * K / t->T] += t->mc_losses[(size_t)b * t->Tl + j];
}

// One validation set's loss over the first --eval-batches micro-batches of its pass (all of it if
// shorter), the same batches on every mesh: dp rank d evaluates global batches d, d + dp, ... of
// them (the loader's order), every rank sums the losses of its tokens on the backend (without
// dlogits), read once at the end, and the sum over all ranks is divided by the tokens evaluated.
// Under --eval-positions each rank also sums its tokens' losses per range of positions on the host
// (a read-back per batch), summed over all ranks into t->set_position_loss and divided likewise.
static double evaluate_set(Trainer* t, DataLoader* loader) {
    const long n = loader_global_batches(loader);
    const long total = t->opt.eval_batches < n ? t->opt.eval_batches : n;
    const int dp = t->mesh.dp, d = t->mesh.dp_index, K = t->opt.eval_positions;
    const long batches = total / dp + (d < total % dp);
    if (K) memset(t->set_position_loss, 0, sizeof(double) * K);
    loader_reset(loader);
    gpt_loss_zero(&t->model);
    for (long i = 0; i < batches; i++) {
        next_batch(t, loader);
        gpt_forward(&t->model, t->inputs, t->targets);
        gpt_loss(&t->model);
        if (K) add_position_losses(t, t->set_position_loss);
    }
    comm_wait_compute(t->comm);
    const double sum = gpt_loss_read(&t->model);
    if (K) {
        comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
        comm_all_reduce_host(t->comm, MESH_WORLD, t->set_position_loss, K, COMM_F64);
        for (int k = 0; k < K; k++)
            t->set_position_loss[k] /= (double)total * t->B *
                (position_range_begin(k + 1, K, t->T) - position_range_begin(k, K, t->T));
    }
    return all_reduce_scalar(t, sum) / ((double)total * t->B * t->T);
}

// The validation loss: every set's (kept in t->val.loss) and their weighted mean, returned (of
// one set, its loss exactly: its weight is 1). Under --eval-positions t->position_loss is the
// sets' losses per range, weighted alike.
double evaluate(Trainer* t) {
    params_ready(t);
    const int K = t->opt.eval_positions;
    if (K) memset(t->position_loss, 0, sizeof(double) * K);
    double val = 0;
    for (int c = 0; c < t->val.n; c++) {
        const double w = t->val.weight[c];
        t->val.loss[c] = evaluate_set(t, t->val.loader[c]);
        val += w * t->val.loss[c];
        for (int k = 0; k < K; k++) t->position_loss[k] += w * t->set_position_loss[k];
    }
    return val;
}

// The --eval-positions line and log entry: the loss per range of positions.
static void report_positions(Trainer* t) {
    const int K = t->opt.eval_positions;
    printf("eval: step %d val loss by position:", t->step);
    // At most 40 bytes an entry: "[%ld,%ld]," with positions under 2^22, "%.9g," of a loss.
    const size_t cap = (size_t)K * 40 + 1;
    char* ranges = xmalloc(cap, "position ranges");
    char* losses = xmalloc(cap, "position losses");
    size_t r = 0, l = 0;
    for (int k = 0; k < K; k++) {
        const long a = position_range_begin(k, K, t->T), b = position_range_begin(k + 1, K, t->T);
        printf(" %ld-%ld %.4f", a, b - 1, t->position_loss[k]);
        r += (size_t)snprintf(ranges + r, cap - r, "%s[%ld,%ld]", k ? "," : "", a, b);
        l += (size_t)snprintf(losses + l, cap - l, "%s%.9g", k ? "," : "", t->position_loss[k]);
    }
    printf("\n");
    run_log_json(&t->log, "{\"type\":\"eval_positions\",\"step\":%d,\"ranges\":[%s],"
                 "\"val_loss\":[%s]}", t->step, ranges, losses);
    free(ranges);
    free(losses);
}

// Prints and logs a validation loss (the same on every rank). One that is not finite (weights
// that diverged within the range of finite numbers) stops the run before it reaches the log or
// a checkpoint. seconds: the evaluation's.
void report_eval(Trainer* t, double val, double seconds) {
    if (!isfinite(val)) {
        finish_checkpoint(t);   // an earlier step's, still being written (--async-save)
        config_error(t, "step %d: validation loss %g is not finite; stopping without writing a "
                     "checkpoint", t->step, val);
    }
    if (t->rank != 0) return;
    printf("eval: step %d val loss %.4f", t->step, val);
    // Several sets: each one's loss too, in --val-data's order. Each is finite (their weighted
    // mean is) and a mean of float losses, under 2^128: at most 50 bytes in "%.8f,".
    const int n = t->val.n > 1 ? t->val.n : 0;
    const size_t cap = (size_t)n * 64 + 16;
    char* sets = xmalloc(cap, "validation set losses");
    size_t len = (size_t)snprintf(sets, cap, "%s", n ? ",\"val_sets\":[" : "");
    for (int c = 0; c < n; c++) {
        printf("%s%.4f", c ? " " : " (by set: ", t->val.loss[c]);
        len += (size_t)snprintf(sets + len, cap - len, "%s%.8f", c ? "," : "", t->val.loss[c]);
    }
    if (n) {
        printf(")");
        snprintf(sets + len, cap - len, "]");
    }
    printf("\n");
    run_log_json(&t->log, "{\"type\":\"eval\",\"step\":%d,\"val_loss\":%.8f%s,\"seconds\":%.4f}",
                 t->step, val, sets, seconds);
    free(sets);
    if (t->opt.eval_positions) report_positions(t);
}

// Adds row r0 + b's losses over its mask to its sum, for the batch's rows in the set (mask and
// losses: (B, T) as evaluated).
static void add_row_losses(Trainer* t, long r0, int T, const int32_t* mask, const float* losses) {
    for (int b = 0; b < t->B && r0 + b < t->mc.rows; b++) {
        double sum = 0;
        for (int j = 0; j < T; j++)
            if (mask[(size_t)b * T + j]) sum += losses[(size_t)b * T + j];
        t->mc_row_loss[r0 + b] += sum;
    }
}

// The losses of one batch of T-token rows through the model as it is set up now.
static void eval_batch(Trainer* t, const int32_t* inputs, const int32_t* targets) {
    gpt_forward(&t->model, inputs, targets);
    gpt_loss(&t->model);
    comm_wait_compute(t->comm);
    gpt_losses_to_host(&t->model, t->mc_losses);
}

// Multiple-choice accuracy: the eval set's rows (one per completion) in micro-batches of B, and
// one all-reduce of the rows' summed losses over all ranks at the end, so every rank scores the
// same sums. Rows that fit a rank's local tokens (the usual case: HellaSwag's are under 200
// tokens) are evaluated by each rank alone, as long as the longest row and on a single-device
// attention layer, the batches split over all ranks; longer rows go through the run's mesh,
// padded to --seq-len, rank d of the dp ranks taking batches d, d + dp, ... and each
// sequence-parallel rank adding the losses of its own tokens of a row.
McEvalScore mc_evaluate(Trainer* t) {
    params_ready(t);
    const McEvalSet* s = &t->mc;
    const int B = t->B;
    const long batches = (s->rows + B - 1) / B;
    const int pad = t->cfg.V > GPT2_EOT ? GPT2_EOT : 0;   // past a row's end: unseen by its mask
    memset(t->mc_row_loss, 0, sizeof(double) * s->rows);
    GPT* m = &t->model;
    // A row is one example, padded past its end: no document mask (the next batch sets it again).
    gpt_set_documents(m, NULL, 0, 0, 0);
    if (t->mc_attention) {
        AttentionLayer* run_attention = m->attention;
        const int T = s->longest_row, run_T = m->T;
        m->attention = t->mc_attention;
        m->T = T;
        for (long i = t->rank; i < batches; i += t->mesh.world_size) {
            mc_eval_fill(s, i * B, B, T, pad, t->full_inputs, t->full_targets, t->mc_full_mask);
            eval_batch(t, t->full_inputs, t->full_targets);
            add_row_losses(t, i * B, T, t->mc_full_mask, t->mc_losses);
        }
        m->attention = run_attention;
        m->T = run_T;
    } else {
        for (long i = t->mesh.dp_index; i < batches; i += t->mesh.dp) {
            mc_eval_fill(s, i * B, B, t->T, pad, t->full_inputs, t->full_targets, t->mc_full_mask);
            layout_take(t->full_inputs, B, t->T, t->positions, t->Tl, t->inputs);
            layout_take(t->full_targets, B, t->T, t->positions, t->Tl, t->targets);
            layout_take(t->mc_full_mask, B, t->T, t->positions, t->Tl, t->mc_mask);
            eval_batch(t, t->inputs, t->targets);
            add_row_losses(t, i * B, t->Tl, t->mc_mask, t->mc_losses);
        }
    }
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    comm_all_reduce_host(t->comm, MESH_WORLD, t->mc_row_loss, s->rows, COMM_F64);
    return mc_eval_score(s, t->mc_row_loss);
}

void report_mc_eval(Trainer* t, McEvalScore r) {
    if (t->rank != 0) return;
    printf("eval: step %d mc-eval acc_norm %.4f acc %.4f (%d of %d, %d of %d)\n", t->step,
           r.acc_norm, r.acc, r.correct_norm, r.examples, r.correct, r.examples);
    run_log_json(&t->log, "{\"type\":\"mc_eval\",\"step\":%d,\"examples\":%d,\"correct\":%d,"
                 "\"correct_norm\":%d,\"acc\":%.6f,\"acc_norm\":%.6f}", t->step, r.examples,
                 r.correct, r.correct_norm, r.acc, r.acc_norm);
}

// Every evaluation the run has: the validation loss, then the multiple-choice accuracy.
void run_evals(Trainer* t) {
    if (t->val.n) {
        const double t0 = seconds_now();
        const double val = evaluate(t);
        report_eval(t, val, seconds_now() - t0);
    }
    if (t->mc.examples) report_mc_eval(t, mc_evaluate(t));
}
