// Resume from the newest complete checkpoint that loads (checkpoint_save.c writes them), on any
// mesh.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/checkpoint_dir.h"
#include "checkpoints/json_read.h"
#include "checkpoints/train_state.h"
#include "train/config_check.h"
#include "train/trainer.h"

// "PATH: the checkpoint's WHAT differ from this run's WHAT (resume with the same FLAGS)", WHAT in
// the words of `text`; returns -2.
static int differs(char* err, size_t errlen, const char* path,
                   void (*text)(const GPTConfig*, char*, size_t), const GPTConfig* was,
                   const GPTConfig* now, const char* flags) {
    char a[GPT_BLOCK_TEXT_LEN], b[GPT_BLOCK_TEXT_LEN];   // room for either text
    text(was, a, sizeof a);
    text(now, b, sizeof b);
    // Bounded so that the longest texts and flags fit one ERR_LEN line.
    snprintf(err, errlen, "%.120s: %.90s differ from this run's %.90s (resume with the same %s)",
             path, a, b, flags);
    return -2;
}

// Whether a checkpoint was written over another --train-data value: by its hash, or in a state
// written before the hash by the configuration it recorded (one that cannot be read counts as
// another).
static int other_train_data(const TrainStateInfo* info, const char* value) {
    if (info->train_data_hash) return info->train_data_hash != config_text_hash(value);
    JsonCursor c;
    json_init(&c, info->config_json);
    if (json_object_begin(&c) != 0) return 1;
    char key[64];
    while (json_object_next(&c, key, sizeof key) == 1) {
        if (strcmp(key, "train-data") != 0) {
            if (json_skip(&c) != 0) return 1;
            continue;
        }
        char* saved = xmalloc(sizeof info->config_json, "the checkpoint's --train-data");
        const int other = json_string(&c, saved, sizeof info->config_json) != 0 ||
                          strcmp(saved, value) != 0;
        free(saved);
        return other;
    }
    return 1;
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
    // The moments mean other things: Muon's momentum of the matrices has no second moment (muon
    // and dist_muon keep one state, so either resumes the other's).
    if (info.optimizer != (t->muon ? TRAIN_STATE_MUON : TRAIN_STATE_ADAMW)) {
        snprintf(err, errlen, "%.300s: the optimizer state is %s's, this run's --optimizer is %s "
                 "(resume with --optimizer %s; or start a new run from its weights with --init-from "
                 "on its model file)", path, info.optimizer == TRAIN_STATE_MUON ? "muon" : "adamw",
                 t->opt.optimizer, info.optimizer == TRAIN_STATE_MUON ? "muon or dist_muon" : "adamw");
        return -2;
    }
    if (gpt_kv_heads(c) != gpt_kv_heads(&t->cfg)) {
        snprintf(err, errlen, "%.300s: %d key/value heads differ from this run's %d (resume with "
                 "the same --kv-heads)", path, gpt_kv_heads(c), gpt_kv_heads(&t->cfg));
        return -2;
    }
    if (!gpt_same_positions(c, &t->cfg))
        return differs(err, errlen, path, gpt_position_text, c, &t->cfg,
                       "--position-embedding, --rope-theta and --rope-scaling");
    if (!gpt_same_block(c, &t->cfg))
        return differs(err, errlen, path, gpt_block_text, c, &t->cfg,
                       "--normalization, --mlp, --ffn-hidden, --disable-bias-linear, --add-qkv-bias, "
                       "--norm-epsilon, --untie-embeddings-and-output-weights and --qk-layernorm");
    if (c->window != t->cfg.window || c->window_every != t->cfg.window_every) {
        snprintf(err, errlen, "%.300s: attention window %d (every %d layers) differs from this "
                 "run's %d (every %d) (resume with the same --attention-window and "
                 "--window-every)", path, c->window, c->window_every, t->cfg.window,
                 t->cfg.window_every);
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
    // Every old rank's file holds the weights and moments of its slice of the parameters (in
    // files before version 4 every weight, and the moments of its slice), the slices in rank
    // order. This rank reads the files whose slices meet its shard: without ZeRO-1 the shard is
    // every parameter, so all of them; under ZeRO-1 the other weights come from the other ranks'
    // shards, gathered once every rank has loaded (resume).
    size_t next = 0;   // (version 4) where the next file's slice must begin
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
        const int sliced = ri.version >= STATE_VERSION_SLICES;
        if (sliced != (info.version >= STATE_VERSION_SLICES) || (sliced && lo != next)) {
            snprintf(err, errlen, "%.300s: holds the parameters from %zu on (a version %d file), "
                     "expected the slice after the previous rank's, from %zu (version %d): the "
                     "checkpoint's files are not one run's", path, lo, ri.version, next,
                     info.version);
            rc = -1;
            break;
        }
        next = hi;
        if (!(lo < want_hi && hi > want_lo)) continue;
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
    if (rc == 0 && info.version >= STATE_VERSION_SLICES && next != info.num_params) {
        snprintf(err, errlen, "%.300s: the slices of the %d files end at parameter %zu, expected "
                 "all %llu: the checkpoint's files are not one run's", path, old_world, next,
                 (unsigned long long)info.num_params);
        rc = -1;
    }
    if (rc != 0) return -1;
    if (t->train_loader) {
        // Other data: a new phase where the run asks for one, else refused with the way out.
        // Asked for, another --train-data value is other data too (files of the same shape).
        const int same = loader_state_same_data(t->train_loader, &info.loader) &&
                         !(t->opt.new_data_phase && other_train_data(&info, t->opt.train_data));
        t->new_phase = !same && t->opt.new_data_phase;
        const LoaderPositionsUse use = !t->new_phase          ? LOADER_POSITIONS_RESUME
                                       : t->opt.continue_sets ? LOADER_POSITIONS_CONTINUE
                                                              : LOADER_POSITIONS_RECORD;
        int rc = t->new_phase ? loader_begin_phase(t->train_loader, &info.loader, err, errlen)
                              : loader_set_state(t->train_loader, &info.loader, err, errlen);
        // (under RESUME: files of the checkpoint's shapes but other names are other data too)
        const int positions_misfit =
            rc == 0 && loader_apply_positions(t->train_loader, info.positions, info.npositions,
                                              use, err, errlen) != 0;
        if (rc != 0 || positions_misfit) {
            if ((!same || positions_misfit) && !t->opt.new_data_phase) {
                const size_t len = strlen(err);
                snprintf(err + len, errlen - len, "; or add --new-data-phase to read this "
                         "--train-data from step %d on", info.step);
            }
            return -2;
        }
        t->phase_step = t->new_phase ? info.step : info.phase_step;
    }
    gpt_params_from_host(&t->model, t->host_params);
    optimizer_moments_from_host(t->optimizer, t->host_m, t->host_v);
    t->step = info.step;
    // The stored parameters as the uninterrupted run has them (CUDA bf16: stochastic rounding);
    // under ZeRO-1 only this rank's shard: resume gathers the others' once every rank loaded.
    gpt_params_restore_rounding(&t->model, t->step);
    t->sample_rng = info.sample_rng;
    return 0;
}

// A data phase begun: its number and step, and under --continue-sets where each set goes on.
static void report_new_phase(const Trainer* t) {
    int64_t start;
    const int phase = loader_phase(t->train_loader, &start);
    if (!t->opt.continue_sets) {
        printf("resume: --train-data is not the checkpoint's: data phase %d begins at step %d, "
               "every set in a fresh order\n", phase, t->step);
        return;
    }
    printf("resume: --train-data is not the checkpoint's: data phase %d begins at step %d, the "
           "sets read before where they stood\n", phase, t->step);
    for (int c = 0; c < loader_num_components(t->train_loader); c++) {
        LoaderComponentInfo ci;
        loader_component_info(t->train_loader, c, &ci);
        const int64_t at = loader_set_offset(t->train_loader, c);
        if (at) printf("resume: set %d (%s) continues after %lld of its windows\n", c,
                       ci.pattern ? ci.pattern : "files", (long long)at);
        else printf("resume: set %d (%s) begins a fresh order\n", c,
                    ci.pattern ? ci.pattern : "files");
    }
}

// Continues from the newest complete checkpoint that loads; a corrupt one is skipped with a
// warning. A checkpoint that does not fit this run's options, or complete checkpoints none of
// which loads, end the run: starting over from step 0 would later overwrite them.
void resume(Trainer* t) {
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
            if (t->opt.zero) {   // the parameters of the others' shards, as after every step
                gather_params(t);
                params_ready(t);
            }
            if (t->rank == 0) printf("resume: continuing from step %d in %s\n", t->step, t->opt.out_dir);
            if (t->rank == 0 && t->new_phase) report_new_phase(t);
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
