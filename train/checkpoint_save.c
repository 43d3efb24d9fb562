// Writing a run's checkpoints. At a step, the weights and moments are copied to the host (the
// ZeRO-1 master shards gathered); from those copies rank 0 writes the model file and every rank
// its state file, each atomically; the ranks then agree that all were written (a failed write
// anywhere removes the step and ends the run) and rank 0 marks the step complete (DONE) and
// prunes older ones. With --async-save a periodic checkpoint's files are written by a thread
// while the steps go on: the step loop learns in its per-step agreement when every rank's write
// is done, and completes the checkpoint there.
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checkpoints/checkpoint_dir.h"
#include "checkpoints/model_file.h"
#include "checkpoints/train_state.h"
#include "train/config_check.h"
#include "train/trainer.h"

// One checkpoint's write, from the snapshot to DONE. The files are written from the trainer's
// host copies, which nothing else touches until the checkpoint is complete.
struct CheckpointWrite {
    int in_flight;             // a snapshot taken whose checkpoint is not complete yet
    int threaded;              // its files are written by `thread` (--async-save)
    pthread_t thread;
    atomic_int written;        // this rank's files written (set by the writer, last)
    int rc;                    // their result: 0, or -1 with err
    char err[ERR_LEN];
    int was_complete;          // the step's DONE existed before this write (a resumed step)
    int background;            // written while the steps go on (--async-save)
    double started;            // seconds_now() at the snapshot
    double blocking;           // seconds the step loop spent on it (snapshot, waits, DONE)
    double longest;            // the longest checkpoint of the run so far, snapshot to DONE
    // What the writer writes:
    const char* dir;
    int rank, model_version;   // (model/model_file.h: fp32 or bf16)
    const float *params, *m, *v;
    TrainStateInfo info;
};

static void fill_state_info(const Trainer* t, TrainStateInfo* info) {
    memset(info, 0, sizeof *info);
    info->step = t->step;
    info->world_size = t->mesh.world_size;
    info->rank = t->mesh.world_rank;
    info->dp = t->mesh.dp;
    info->pq = t->mesh.pq;
    info->pkv = t->mesh.pkv;
    info->zero_stage = t->opt.zero;
    info->optimizer = t->muon ? TRAIN_STATE_MUON : TRAIN_STATE_ADAMW;
    info->model = t->cfg;
    info->B = t->B;
    info->T = t->T;
    info->accum_steps = t->accum;   // the last step's (a ramp-up changes it); for messages only
    info->sample_rng = t->sample_rng;
    loader_get_state(t->train_loader, &info->loader);
    info->npositions = loader_positions(t->train_loader, info->positions, LOADER_MAX_POSITIONS);
    info->phase_step = t->phase_step;
    info->train_data_hash = t->opt.train_data ? config_text_hash(t->opt.train_data) : 0;
    // The slice of the parameters whose weights and moments this rank's file holds: the files
    // of a checkpoint partition them, so that it holds each once whatever the number of ranks.
    // Under ZeRO-1 the rank's optimizer shard, of real parameters only (ZeRO-1 pads them to a
    // multiple of the world size; the padding's moments stay zero); else an even share.
    const size_t n = t->model.num_params, r = (size_t)t->rank, world = t->mesh.world_size;
    info->num_params = n;
    if (t->opt.zero) {
        info->shard_begin = t->shard_begin < n ? t->shard_begin : n;
        info->shard_count = t->shard_begin + t->shard_count <= n ? t->shard_count
                                                                  : n - info->shard_begin;
    } else {
        info->shard_begin = n * r / world;
        info->shard_count = n * (r + 1) / world - info->shard_begin;
    }
    snprintf(info->config_json, sizeof info->config_json, "%s", t->config_json);
}

// After each stage of a checkpoint write every rank learns whether any rank's write failed (a
// full disk, a quota). If one did, no rank goes on: each failed rank names its file and the
// reason, rank 0 removes the step's files (a step that was complete before this write keeps
// them: atomic writes left each file whole) so no half-written checkpoint stays in the directory
// and the log never records it, and every rank exits non-zero. The previous complete checkpoint
// is untouched.
static void checkpoint_agree(Trainer* t, const CheckpointWrite* w, int failed, const char* err) {
    if (all_reduce_scalar(t, failed ? 1 : 0) == 0) return;
    char who[32] = "";
    if (t->mesh.world_size > 1) snprintf(who, sizeof who, "rank %d: ", t->rank);
    if (failed) fprintf(stderr, "error: %scheckpoint step %d not written: %s\n", who, w->info.step,
                        err);
    if (t->rank == 0 && !w->was_complete) checkpoint_remove_step(w->dir, w->info.step);
    end_launch();
    exit(1);
}

// The backend's all-gather of master weight shards (model/backend.h): every rank's shard.
static void gather_master(void* ctx, const float* send, float* recv, size_t count) {
    Trainer* t = ctx;
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    comm_all_gather(t->comm, MESH_WORLD, send, recv, count, COMM_F32);
}

#ifdef CHECKPOINT_TEST_COPY_CHECK
// Tests only (build/tests/train_gpt_slow_save, train_gpt_cuda_host_slow_save): the host copies are poisoned (all bits set: a
// NaN no weight or moment holds) before each snapshot, and the snapshot must have copied exactly
// what the rank's files hold, no more (the steps wait for the copy) and no less: rank 0 every
// weight, the others their state file's slice; the moments of that slice.
static void poison_host_copies(Trainer* t) {
    memset(t->host_params, 0xff, sizeof(float) * t->model.num_params);
    memset(t->host_m, 0xff, sizeof(float) * t->shard_count);
    memset(t->host_v, 0xff, sizeof(float) * t->shard_count);
}

static void check_copied(const Trainer* t, const char* what, const float* x, size_t n, size_t lo,
                         size_t count) {
    static const uint32_t poison = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        const int copied = memcmp(&x[i], &poison, sizeof poison) != 0;
        if (copied != (i >= lo && i < lo + count))
            fail_msg("test: %s element %zu of %zu %s copied to the host for checkpoint "
                     "%d, whose files hold [%zu, +%zu) of them", what, i, n,
                     copied ? "was" : "was not", t->step, lo, count);
    }
}
#endif

// This rank's files of the checkpoint: rank 0's model file, then its state file. Runs on the
// calling thread or as the writer thread (it touches nothing but *w and the files).
static void* write_files(void* arg) {
    CheckpointWrite* w = arg;
    char path[4096];
    w->rc = 0;
#ifdef CHECKPOINT_TEST_WRITE_DELAY_MS
    // Tests only (build/tests/train_gpt_slow_save, train/train_tests.mk): a disk this slow
    // makes the steps that go on during a background write certain.
    nanosleep(&(struct timespec){CHECKPOINT_TEST_WRITE_DELAY_MS / 1000,
                                 CHECKPOINT_TEST_WRITE_DELAY_MS % 1000 * 1000000L}, NULL);
#endif
    if (w->rank == 0) {
        checkpoint_model_path(w->dir, w->info.step, path, sizeof path);
        w->rc = model_file_save(path, &w->info.model, w->params, w->model_version, w->err,
                                sizeof w->err);
    }
    if (w->rc == 0) {
        checkpoint_state_path(w->dir, w->info.step, w->rank, path, sizeof path);
        w->rc = train_state_save(path, &w->info, w->params, w->m, w->v, w->err, sizeof w->err);
    }
    atomic_store_explicit(&w->written, 1, memory_order_release);
    return NULL;
}

// The writer thread, started with SIGINT and SIGTERM blocked so that they keep reaching the
// step loop's thread (train_loop.c), which finishes the step and stops.
static void start_writer(CheckpointWrite* w) {
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    const int rc = pthread_create(&w->thread, NULL, write_files, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        fail_msg("--async-save: starting the checkpoint writer thread failed: %s (run without "
                 "--async-save)", strerror(rc));
    w->threaded = 1;
}

int checkpoint_writing(const Trainer* t) {
    const CheckpointWrite* w = t->checkpoint;
    return w && w->in_flight && !atomic_load_explicit(&w->written, memory_order_acquire);
}

double checkpoint_longest_seconds(const Trainer* t) {
    return t->checkpoint ? t->checkpoint->longest : 0;
}

void finish_checkpoint(Trainer* t) {
    CheckpointWrite* w = t->checkpoint;
    if (!w || !w->in_flight) return;
    const double t0 = seconds_now();
    if (w->threaded) {
        const int rc = pthread_join(w->thread, NULL);
        if (rc != 0) fail_msg("--async-save: waiting for the checkpoint writer thread failed: %s",
                              strerror(rc));
        w->threaded = 0;
    }
    checkpoint_agree(t, w, w->rc != 0, w->err);   // every rank's state is on disk before DONE
    int rc = 0;
    char err[ERR_LEN] = "";
    if (t->rank == 0) rc = checkpoint_mark_done(w->dir, w->info.step, err, sizeof err);
    checkpoint_agree(t, w, rc != 0, err);
    w->in_flight = 0;
    const double now = seconds_now(), seconds = now - w->started;
    w->blocking += now - t0;
    if (seconds > w->longest) w->longest = seconds;
    if (t->rank != 0) return;
    checkpoint_prune(w->dir, t->opt.keep_last, t->opt.keep_every);
    if (!w->background) {
        printf("checkpoint: step %d written to %s (%.2f s)\n", w->info.step, w->dir, seconds);
        run_log_json(&t->log, "{\"type\":\"checkpoint\",\"step\":%d,\"seconds\":%.4f,"
                     "\"minutes\":%.6f}", w->info.step, seconds, (now - t->started_at) / 60);
        return;
    }
    printf("checkpoint: step %d written to %s (%.2f s, in the background until step %d; the steps "
           "waited %.2f s of it)\n", w->info.step, w->dir, seconds, t->step, w->blocking);
    run_log_json(&t->log, "{\"type\":\"checkpoint\",\"step\":%d,\"seconds\":%.4f,"
                 "\"minutes\":%.6f,\"background\":true,\"completed_at_step\":%d,"
                 "\"blocking_s\":%.4f}", w->info.step, seconds, (now - t->started_at) / 60,
                 t->step, w->blocking);
}

void save_checkpoint(Trainer* t, int background) {
    finish_checkpoint(t);   // the one in flight first: one write at a time, from one snapshot
    params_ready(t);
    if (t->opt.no_save) return;
    if (!t->checkpoint) t->checkpoint = xcalloc(1, sizeof *t->checkpoint, "checkpoint write");
    CheckpointWrite* w = t->checkpoint;
    w->started = seconds_now();
    w->dir = t->opt.out_dir;
    w->rank = t->rank;
    w->model_version = t->opt.save_bf16 ? MODEL_VERSION_BF16 : MODEL_VERSION_FP32;
    fill_state_info(t, &w->info);
    // Only what this rank's files hold is copied to the host (the steps wait for the copy): rank
    // 0 every weight, for the model file; the others the weights of their state file's slice.
    // ZeRO-1 with fp32 master weights (CUDA bf16): each rank holds only its shard of them; the
    // backend gathers the others' in chunks (every rank takes part) for rank 0.
    const size_t n = t->model.num_params;
    const size_t lo = t->rank == 0 ? 0 : w->info.shard_begin;
    const size_t count = t->rank == 0 ? n : w->info.shard_count;
    // The moments of the slice among the rank's (ZeRO-1's padding may put an empty slice past
    // its shard).
    const size_t at = w->info.shard_count ? w->info.shard_begin - t->shard_begin : 0;
#ifdef CHECKPOINT_TEST_COPY_CHECK
    poison_host_copies(t);
#endif
    gpt_params_to_host(&t->model, t->host_params, lo, count, gather_master, t);
    optimizer_moments_to_host(t->optimizer, t->host_m, t->host_v, at, w->info.shard_count);
#ifdef CHECKPOINT_TEST_COPY_CHECK
    if (t->rank == 0) check_copied(t, "weight", t->host_params, n, 0, n);
    else check_copied(t, "weight", t->host_params, n, w->info.shard_begin, w->info.shard_count);
    if (!t->muon) {   // Muon's momentum comes whole (gathered from its owners)
        check_copied(t, "first moment", t->host_m, t->shard_count, at, w->info.shard_count);
        check_copied(t, "second moment", t->host_v, t->shard_count, at, w->info.shard_count);
    }
#endif
    w->params = t->host_params;
    w->m = t->host_m + at;
    w->v = t->host_v + at;
    // A step resumed and written again (its DONE already there) is complete before this write.
    char path[4096];
    checkpoint_done_path(w->dir, t->step, path, sizeof path);
    w->was_complete = access(path, F_OK) == 0;
    atomic_store_explicit(&w->written, 0, memory_order_relaxed);
    w->in_flight = 1;
    w->background = background;
    if (!background) {
        write_files(w);
        w->blocking = seconds_now() - w->started;
        finish_checkpoint(t);
        return;
    }
    start_writer(w);
    w->blocking = seconds_now() - w->started;
}

void free_checkpoint_write(Trainer* t) {
    finish_checkpoint(t);
    free(t->checkpoint);
    t->checkpoint = NULL;
}
