// The loop over optimizer steps: evaluation and samples at their intervals, the step, what is
// done with a step not applied, progress, checkpoints, a stop agreed on by every rank; then the
// end of the run. And a run that only evaluates a model.
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "train/trainer.h"

static volatile sig_atomic_t stop_requested;
static void on_stop_signal(int sig) { stop_requested = sig; }

// SIGINT and SIGTERM finish the step, write a checkpoint and end the run.
void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;   // a signal must not fail a read or write in progress
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

// --eval-only: the model is what --init-from or --resume loaded; a fresh initialisation is no
// model.
void eval_only(Trainer* t) {
    if (t->step == 0 && !(t->opt.init_from && t->opt.init_from[0]))
        config_error(t, "--eval-only: no model to evaluate: give --init-from FILE, or "
                     "--resume with a complete checkpoint in --out-dir %s", t->opt.out_dir);
    run_evals(t);
}

// The longest evaluation, sample and checkpoint of this run so far (0 before the first of
// each; a checkpoint from its snapshot to its completion, also when written in the background):
// what --exit-after-minutes keeps room for.
typedef struct {
    double eval, sample, checkpoint;
} LongestWork;

// Runs one of the loop's occasional tasks, noting its duration in *longest when it is the longest.
static void timed(void (*task)(Trainer*), Trainer* t, double* longest) {
    const double t0 = seconds_now();
    task(t);
    const double s = seconds_now() - t0;
    if (s > *longest) *longest = s;
}

// Seconds the run would still need, besides one more step, if it did not stop after the step
// just done (t->step steps): the periodic checkpoint now (ck_due), the evaluation and sample due
// before the next step, the end's too when the next step is the last, and the checkpoint after
// it; each as long as the longest so far.
static double work_around_next_step(const Trainer* t, const LongestWork* w, int ck_due) {
    const TrainOptions* o = &t->opt;
    const int last = t->step + 1 >= o->steps;
    const int evals = (o->eval_every > 0 && t->step % o->eval_every == 0) + last;
    const int samples = (o->sample_every > 0 && t->step % o->sample_every == 0) + last;
    return (ck_due ? w->checkpoint : 0) + evals * w->eval + samples * w->sample + w->checkpoint;
}

// Why this rank asks the run to stop after the step just done (steps_done of this run, the last
// taking dt seconds, `around` seconds of other work due before the next stop point: see
// work_around_next_step): a signal, --exit-after's steps, or --exit-after-minutes when one more
// step as long and that work would end past them. Returns the reason's name for the log, its
// words in why; NULL: none.
static const char* stop_reason(const Trainer* t, int steps_done, double dt, double around,
                               char* why, size_t len) {
    const TrainOptions* o = &t->opt;
    if (stop_requested) {
        snprintf(why, len, "%s", stop_requested == SIGINT ? "SIGINT" : "SIGTERM");
        return "signal";
    }
    if (o->exit_after > 0 && steps_done >= o->exit_after) {
        snprintf(why, len, "--exit-after %d (steps of this run)", o->exit_after);
        return "exit-after";
    }
    const double ran = seconds_now() - t->started_at;
    if (o->exit_after_minutes > 0 && ran + dt + around > 60 * o->exit_after_minutes) {
        snprintf(why, len, "--exit-after-minutes %g: %.3f minutes since the start, and one more "
                 "step of %.3f s with %.3f s of evaluation, sample and checkpoint around it would "
                 "end past them", o->exit_after_minutes, ran / 60, dt, around);
        return "exit-after-minutes";
    }
    return NULL;
}

// The steps since the last progress line (--log-interval), all of them and the applied ones.
typedef struct {
    int steps, applied;
    double seconds, tokens, loss;   // the loss: summed over the applied steps
} ProgressInterval;

// The progress line that closes interval *iv (and empties it): the applied steps' mean loss,
// every step's mean time, the tokens per second and MFU over them.
static ProgressLine progress_line(const Trainer* t, ProgressInterval* iv, double flops_per_token) {
    ProgressLine l = {1, iv->applied, iv->loss / iv->applied, iv->seconds / iv->steps,
                      iv->tokens / iv->seconds, ""};
    mfu_of(t, l.tokens_per_s, flops_per_token, l.mfu_text, sizeof l.mfu_text);
    memset(iv, 0, sizeof *iv);
    return l;
}

void train_loop(Trainer* t) {
    const double flops_per_token = gpt_flops_per_token(&t->cfg, t->model.num_params, t->T);
    const int start = t->step;
    double elapsed = 0, elapsed_tokens = 0;
    int stop = 0;
    int skips_in_a_row = 0;   // steps in a row not applied (not finite, or spikes)
    RunTotals totals;
    memset(&totals, 0, sizeof totals);
    LongestWork longest = {0, 0, 0};
    CounterTotals counter_totals;
    memset(&counter_totals, 0, sizeof counter_totals);
    ProgressInterval interval;   // the steps since the last progress line
    memset(&interval, 0, sizeof interval);
    while (t->step < t->opt.steps && !stop) {
        // Evaluation and sampling at step k happen before step k+1 whether or not the run was
        // resumed at k, so a stopped and resumed run logs (and samples) what a straight one does.
        if (t->opt.eval_every > 0 && t->step % t->opt.eval_every == 0 && t->step > 0)
            timed(run_evals, t, &longest.eval);
        if (t->opt.sample_every > 0 && t->step % t->opt.sample_every == 0 && t->step > 0)
            timed(sample, t, &longest.sample);
        const double t0 = seconds_now();
        const long long bytes0 = comm_count_bytes(t->comm);
        StepCounters sc;
        counters_begin(t, &sc);
        timeline_step_begin(t->timeline, t->step + 1);
        step_batch(t);
        train_step(t, spike_limits(&t->spike, t->tokens_per_step));
        counters_mark(&sc);
        const StepResult result = finish_step(t);
        const double loss = result.loss, norm = result.grad_norm;
        const int applied = result.applied;
        // Not applied (the device dropped the update): not finite, go on (skip) or stop; else a
        // spike. Applied steps feed the spike detector's window.
        const int finite = isfinite(loss) && isfinite(norm);
        skips_in_a_row = applied ? 0 : skips_in_a_row + 1;
        // A step not applied may end the run: an earlier step's checkpoint still being written
        // (--async-save) is completed first, so that the run does not lose it.
        if (!applied) finish_checkpoint(t);
        if (!finite) nonfinite_step(t, t->step + 1, loss, norm, skips_in_a_row);
        else if (!applied) spike_step(t, t->step + 1, loss, norm, skips_in_a_row);
        else spike_accept(&t->spike, loss, norm);
        comm_close_spans(t->comm);
        const TimelineStep ts = timeline_step_end(t->timeline);
        counters_end(t, &sc, &counter_totals, t->step - start == 0);
        const StepPhases ph = step_phases(t);
        t->step_comm_bytes += comm_count_bytes(t->comm) - bytes0;
        const double dt = seconds_now() - t0;
        const double lr = step_lr(t);
        t->step++;
        elapsed += dt;
        elapsed_tokens += t->tokens_per_step;
        if (t->step - start == 1) {
            note_memory(&totals);
            totals.memory_first = totals.memory_used;
            report_memory(t, &totals);
        } else {
            totals.steps++;
            totals.seconds += dt;
            totals.tokens += t->tokens_per_step;
            totals.phases += ph.measured;
            totals.sum.forward += ph.forward;
            totals.sum.backward += ph.backward;
            totals.sum.optimizer += ph.optimizer;
        }
        interval.steps++;
        interval.seconds += dt;
        interval.tokens += t->tokens_per_step;
        if (applied) interval.applied++, interval.loss += loss;
        // Every rank stops at the same step: agree on any rank's reason (its clock, its signal).
        char why[224];
        const int ck_due = t->opt.checkpoint_every > 0 && t->step % t->opt.checkpoint_every == 0;
        longest.checkpoint = checkpoint_longest_seconds(t);
        const double around = work_around_next_step(t, &longest, ck_due);
        const char* reason = stop_reason(t, t->step - start, dt, around, why, sizeof why);
        // The same sum tells whether every rank has written its files of a checkpoint in flight.
        double agree[2] = {reason != NULL, checkpoint_writing(t)};
        all_reduce_sums(t, agree, 2);
        stop = agree[0] > 0;
        if (stop && !reason) {
            reason = "other-rank";
            // (its signal, or its clock under --exit-after-minutes: each rank reads its own)
            snprintf(why, sizeof why, "another rank's (its signal or its clock)");
        }
        const double tps = t->tokens_per_step / dt;
        char mfu_text[32];
        const double mfu = mfu_of(t, tps, flops_per_token, mfu_text, sizeof mfu_text);
        if (applied) {
            // The steps left at this run's pace per token (steps differ under a ramp-up).
            const double tokens_left = (double)batch_rampup_tokens_of_steps(
                &t->rampup, t->trained_after_step, t->opt.steps - t->step);
            // A line at the run's first step, its last, a stop, and once --log-interval's next
            // multiple is reached (at the first applied step from it on).
            const int n = t->opt.log_interval, line_due =
                t->step - start == 1 || t->step == t->opt.steps || stop ||
                t->step / n > (t->step - interval.steps) / n;
            StepRecord record = {result, lr, dt, tps, mfu, elapsed / elapsed_tokens * tokens_left,
                                 mfu_text, ts, ph, &sc, {0, 0, 0, 0, 0, ""}};
            if (line_due) record.line = progress_line(t, &interval, flops_per_token);
            report_step(t, &record);
        }
        if (stop && t->step < t->opt.steps) {   // (a stop after the last step is no early stop)
            if (t->rank == 0) printf("stop: %s\n", why);
            run_log_json(&t->log, "{\"type\":\"stop\",\"step\":%d,\"reason\":\"%s\",\"minutes\":%.6f,"
                         "\"around_s\":%.4f,\"longest_eval_s\":%.4f,\"longest_sample_s\":%.4f,"
                         "\"longest_checkpoint_s\":%.4f}", t->step, reason,
                         (seconds_now() - t->started_at) / 60, around, longest.eval,
                         longest.sample, longest.checkpoint);
        }
        if (agree[1] == 0) finish_checkpoint(t);   // (none in flight: nothing to do)
        // A stop's checkpoint is written before the run ends, an --async-save one in the background.
        if ((ck_due || stop) && t->step < t->opt.steps)
            save_checkpoint(t, t->opt.async_save && !stop);
    }
    note_memory(&totals);
    print_summary(t, &totals, flops_per_token);
    print_skipped(t);
    print_counters(t, &counter_totals);
    report_timeline(t);
    write_trace(t);
    // A stop request during the last step is no early stop: the run ends as usual.
    const int early = stop && t->step < t->opt.steps;
    if (early && t->rank == 0)
        printf("stopping early at step %d (%s)\n", t->step,
               t->opt.no_save ? "no checkpoint: --no-save" : "checkpoint written");
    if (!early) {
        run_evals(t);
        sample(t);
        save_checkpoint(t, 0);
    }
}
