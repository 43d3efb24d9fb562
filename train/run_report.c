// What a run reports: the effective configuration, the log's first records and the peak MFU is
// counted against, evaluation and samples, the end of run summary (throughput, phases, memory),
// skipped steps, the host runtime's counters, the timeline's fractions and the Chrome trace.
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_cost.h"
#include "data/bpe.h"
#include "model/blas_kernels.h"
#include "train/peak_flops.h"
#include "train/trainer.h"

static void print_line(const char* line) { printf("%s\n", line); }

void recompute_text(const Trainer* t, char* out, size_t len) {
    const int n = t->opt.recompute_num_layers;
    if (n > 0 && n < t->cfg.L && strcmp(t->opt.recompute, "none") != 0)
        snprintf(out, len, "%s on the first %d of %d layers", t->opt.recompute, n, t->cfg.L);
    else snprintf(out, len, "%s", t->opt.recompute);
}

// Rank 0's predicted memory per device, term by term (model/memory_budget.h).
static void print_memory_budget(const Trainer* t) {
    char text[32], mode[64];
    recompute_text(t, mode, sizeof mode);
    printf("memory per device (predicted, rank 0; --recompute %s):\n", mode);
    for (int i = 0; i <= MEMORY_NTERMS; i++) {
        const size_t b = i < MEMORY_NTERMS ? t->memory.bytes[i] : t->memory.total;
        printf("  %-22s %14zu bytes  %s\n", i < MEMORY_NTERMS ? memory_term_name((MemoryTerm)i)
               : "total", b, b >= (1 << 20) ? memory_format_bytes(b, text, sizeof text) : "");
    }
}

// The ring family's steps in the banded layers, where their window stops the ring early
// (ring_steps; documents stop it batch by batch, after the longest one).
static void print_ring_steps(const Trainer* t) {
    RingLayout layout;
    if (t->mesh.P == 1 || !t->cfg.window || ring_layout_parse(t->opt.attention, &layout) != 0)
        return;
    const int P = t->mesh.P, steps = ring_steps(layout, P, t->Tl, t->cfg.window, 0);
    if (steps >= P) return;
    char tour[128];
    ring_tour_text(layout, P, steps, tour, sizeof tour);
    printf("ring steps: %d of %d in the banded layers (window %d: rank i holds %s), %d in the "
           "others; K|V passes per banded layer %d instead of %d\n", steps, P, t->cfg.window,
           tour, ring_steps(layout, P, t->Tl, 0, 0), steps - 1, P - 1);
}

// A component's pattern as a JSON string's contents (malloc'd).
static char* escaped_pattern(const LoaderComponentInfo* info) {
    const char* pattern = info->pattern ? info->pattern : "";
    const size_t escaped_len = 6 * strlen(pattern) + 16;   // json_escape's worst case
    char* escaped = xmalloc(escaped_len, "escaped pattern");
    json_escape((const unsigned char*)pattern, strlen(pattern), escaped, escaped_len);
    return escaped;
}

// The training data: files, windows and the epochs this run's steps read of each component of
// a blend (in a phase begun by --new-data-phase, the steps from its start), printed and logged
// (a "data" record).
static void print_data(Trainer* t) {
    const DataLoader* L = t->train_loader;
    if (!L) return;
    const int n = loader_num_components(L);
    // Where the loader stands (a resumed run: where the checkpoint left it, whatever the batch
    // then) and the windows of the steps left.
    int64_t start;
    const int phase = loader_phase(L, &start);
    const int first_step = phase ? t->phase_step : 0;
    const int64_t steps_left = t->opt.steps > t->step ? t->opt.steps - t->step : 0;
    const int64_t windows = loader_windows_read(L) - start + batch_rampup_tokens_of_steps(
        &t->rampup, trained_tokens(t), steps_left) / t->T;
    int64_t* reads = xmalloc(sizeof *reads * (size_t)n, "component reads");
    loader_component_reads(L, start + windows, reads);
    char steps[96];
    if (phase)
        snprintf(steps, sizeof steps, "phase %d from step %d: its %d steps read", phase,
                 first_step, t->opt.steps - first_step);
    else
        snprintf(steps, sizeof steps, "%d steps read", t->opt.steps);
    if (n == 1)
        printf("data: %d file%s, %lld windows of %d tokens per epoch; %s %lld windows, %.3g "
               "epochs\n", loader_num_files(L), loader_num_files(L) == 1 ? "" : "s",
               (long long)loader_windows_per_epoch(L), t->T + 1, steps, (long long)windows,
               (double)windows / (double)loader_windows_per_epoch(L));
    else
        printf("data: a blend of %d components; %s %lld windows of %d tokens:\n", n, steps,
               (long long)windows, t->T + 1);
    size_t cap = 64, len = 0;
    for (int c = 0; c < n; c++) {
        LoaderComponentInfo info;
        loader_component_info(L, c, &info);
        cap += 216 + (info.pattern ? 6 * strlen(info.pattern) : 0);
    }
    char* json = xmalloc(cap, "data record");
    json[0] = 0;
    for (int c = 0; c < n; c++) {
        LoaderComponentInfo info;
        loader_component_info(L, c, &info);
        char* escaped = escaped_pattern(&info);
        const double epochs = (double)reads[c] / (double)info.windows;
        if (n > 1)
            printf("  %6.3f%% (weight %g) %s: %d file%s, %lld windows per epoch; %lld read, %.3g "
                   "epochs\n", 100 * info.share, info.weight, info.pattern ? info.pattern : "",
                   info.nfiles, info.nfiles == 1 ? "" : "s", (long long)info.windows,
                   (long long)reads[c], epochs);
        len += (size_t)snprintf(json + len, cap - len, "%s{\"pattern\":\"%s\",\"weight\":%.9g,"
                                "\"share\":%.5f,\"files\":%d,\"windows_per_epoch\":%lld,"
                                "\"windows_read\":%lld,\"epochs\":%.6g}", c ? "," : "", escaped,
                                info.weight, info.share, info.nfiles, (long long)info.windows,
                                (long long)reads[c], epochs);
        free(escaped);
    }
    run_log_json(&t->log, "{\"type\":\"data\",\"step\":%d,\"steps\":%d,\"window_tokens\":%d,"
                 "\"phase\":%d,\"phase_step\":%d,\"components\":[%s]}", t->step, t->opt.steps,
                 t->T + 1, phase, first_step, json);
    free(json);
    free(reads);
}

// Several validation sets: each one's weight, files and the micro-batches an evaluation reads
// of it, printed and logged (a "val_data" record). One set is not reported: as before blends.
static void print_val_data(Trainer* t) {
    const ValSets* v = &t->val;
    if (v->n < 2) return;
    printf("val data: %d sets, each evaluated on its own; the val loss is their weighted mean:\n",
           v->n);
    size_t cap = 64, len = 0;
    for (int c = 0; c < v->n; c++) {
        LoaderComponentInfo info;
        loader_component_info(v->loader[c], 0, &info);
        cap += 160 + (info.pattern ? 6 * strlen(info.pattern) : 0);
    }
    char* json = xmalloc(cap, "val_data record");
    json[0] = 0;
    for (int c = 0; c < v->n; c++) {
        LoaderComponentInfo info;
        loader_component_info(v->loader[c], 0, &info);
        const int64_t batches = loader_global_batches(v->loader[c]);
        const int64_t evaluated = t->opt.eval_batches < batches ? t->opt.eval_batches : batches;
        printf("  %d: weight %.6g %s: %d file%s, %lld windows; %lld of its %lld micro-batches "
               "evaluated\n", c + 1, v->weight[c], info.pattern ? info.pattern : "", info.nfiles,
               info.nfiles == 1 ? "" : "s", (long long)info.windows, (long long)evaluated,
               (long long)batches);
        char* escaped = escaped_pattern(&info);
        len += (size_t)snprintf(json + len, cap - len, "%s{\"pattern\":\"%s\",\"weight\":%.9g,"
                                "\"files\":%d,\"windows\":%lld,\"batches\":%lld}", c ? "," : "",
                                escaped, v->weight[c], info.nfiles, (long long)info.windows,
                                (long long)evaluated);
        free(escaped);
    }
    run_log_json(&t->log, "{\"type\":\"val_data\",\"step\":%d,\"sets\":[%s]}", t->step,
                 json);
    free(json);
}

void print_config(Trainer* t) {
    if (t->rank != 0) return;
    printf("effective configuration:\n");
    train_options_print(&t->opt, print_line);
    char window[96], kv[64] = "", positions[64], block[GPT_BLOCK_TEXT_LEN];
    gpt_window_text(&t->cfg, window, sizeof window);
    gpt_position_text(&t->cfg, positions, sizeof positions);
    gpt_block_text(&t->cfg, block, sizeof block);
    if (gpt_kv_heads(&t->cfg) != t->cfg.NH)
        snprintf(kv, sizeof kv, " (grouped-query: %d key/value heads)", gpt_kv_heads(&t->cfg));
    printf("model: L=%d C=%d NH=%d%s HS=%d context=%d V=%d (padded %d), %s, %s, %s%s%zu "
           "parameters; backend %s\n", t->cfg.L, t->cfg.C, t->cfg.NH, kv, t->cfg.C / t->cfg.NH,
           t->cfg.max_T, t->cfg.V, t->cfg.Vp, positions, block, t->cfg.window ? window : "",
           t->cfg.window ? ", " : "", t->model.num_params, gpt_backend_name());
    char chunks[64] = "";
    if (t->opt.a2a_chunks > 1 && t->mesh.P > 1)
        snprintf(chunks, sizeof chunks, " heads in %d chunks, all-to-alls pipelined;",
                 t->opt.a2a_chunks);
    printf("mesh: world %d = dp %d x pq %d x pkv %d; attention %s;%s %d local tokens per sequence "
           "per rank; transport %s (launch: %s)\n", t->mesh.world_size, t->mesh.dp, t->mesh.pq,
           t->mesh.pkv, t->attention->name, chunks, t->Tl, t->comm->name,
           t->use_mpi ? "MPI" : t->opt.rendezvous);
    print_ring_steps(t);
    char ramp[256] = "";
    if (batch_rampup_on(&t->rampup))
        snprintf(ramp, sizeof ramp, " (ramped up: %lld tokens per step at first, %lld more after "
                 "each 1/%lld of the first %lld trained tokens: steps 1-%lld smaller)",
                 (long long)t->rampup.start, (long long)t->rampup.increment,
                 (long long)t->rampup.increments, (long long)t->rampup.tokens,
                 (long long)batch_rampup_steps(&t->rampup));
    // The schedule's name, wsd's with the form of its decay.
    char kind[64];
    snprintf(kind, sizeof kind, "%s", t->opt.lr_schedule);
    if (t->sched.kind == LR_WSD)
        snprintf(kind, sizeof kind, "wsd (%s decay over the last %g)", t->opt.wsd_decay_style,
                 t->opt.decay_frac);
    char schedule[256];
    if (t->sched.decay_tokens > 0)
        snprintf(schedule, sizeof schedule, "warmup %ld tokens, then %s to %ld trained tokens "
                 "(a schedule in tokens; --steps %d train %lld)", t->opt.lr_warmup_tokens, kind,
                 t->opt.lr_decay_tokens, t->opt.steps,
                 (long long)batch_rampup_tokens_of_steps(&t->rampup, 0, t->opt.steps));
    else
        snprintf(schedule, sizeof schedule, "warmup %d steps, then %s", t->sched.warmup_steps,
                 kind);
    char z_loss[64] = "";
    if (t->opt.z_loss > 0)
        snprintf(z_loss, sizeof z_loss, "; z-loss %g x lse^2 per token in the objective",
                 t->opt.z_loss);
    char length[128] = "";
    if (t->opt.train_tokens > 0)
        snprintf(length, sizeof length, "; --train-tokens %ld: %d steps, which train %lld",
                 t->opt.train_tokens, t->opt.steps,
                 (long long)batch_rampup_tokens_of_steps(&t->rampup, 0, t->opt.steps));
    printf("batch: %d x %d tokens per micro-batch, %d accumulation steps, %ld tokens per step%s; "
           "%s; ZeRO stage %d%s%s\n", t->B, t->T, t->max_accum, (long)t->rampup.total, ramp,
           schedule, t->opt.zero, z_loss, length);
    print_data(t);
    print_val_data(t);
    if (t->doc_boundary >= 0)
        printf("documents: a document begins at each token %d; attention masked to a query's own "
               "document%s (training and validation batches; not the mc-eval rows or samples, one "
               "document each)\n", t->doc_boundary,
               t->opt.reset_position_ids ? ", positions counted from its start" : "");
    if (t->mc.examples)
        printf("mc-eval: %d examples, %ld rows of at most %d tokens: %s\n", t->mc.examples,
               t->mc.rows, t->mc.longest_row, t->mc_attention
               ? "each rank evaluates its own rows, at that length, on one device"
               : "longer than a rank's local tokens, on the mesh, padded to --seq-len");
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
    print_memory_budget(t);
    fflush(stdout);
}

// The log (rank 0) and its first records, and the peak MFU is counted against: --peak-gflops if
// given; else the CPU's measured FMA peak, or the GPU's entry in the peak table
// (train/gpu_peaks.c); a GPU the table does not know gets no MFU.
void open_log(Trainer* t) {
    if (t->rank != 0) return;
    char path[4096], err[ERR_LEN];
    snprintf(path, sizeof path, "%s", t->opt.log_file[0] ? t->opt.log_file : "");
    if (!path[0]) snprintf(path, sizeof path, "%s/log.jsonl", t->opt.out_dir);
    if (run_log_open(&t->log, path, err, sizeof err) != 0) fail_msg("--log %s", err);
    gpt_backend_device(&t->device_info);
    if (t->opt.peak_gflops > 0) {
        t->peak_flops = t->opt.peak_gflops * 1e9;
        snprintf(t->peak_source, sizeof t->peak_source, "--peak-gflops");
    } else if (gpt_backend_host_memory()) {
        t->peak_flops = peak_flops_measure(0);
        snprintf(t->peak_source, sizeof t->peak_source, "measured FMA peak; BLAS kernels: OpenBLAS %s",
                 blas_kernel_name());
    } else {
        t->peak_flops = t->device_info.peak_flops;
        snprintf(t->peak_source, sizeof t->peak_source, "%s", t->device_info.peak_entry);
    }
    run_log_json(&t->log, "{\"type\":\"config\",\"step\":%d,\"world\":%d,\"params\":%zu,"
                 "\"options\":%s}", t->step, t->mesh.world_size, t->model.num_params, t->config_json);
    // Records of later steps above this line came from the interrupted run; the steps are
    // logged again below, and readers take the last record of a step.
    if (t->step > 0)
        run_log_json(&t->log, "{\"type\":\"resume\",\"step\":%d,\"note\":\"records of "
                     "steps after %d above this line are the interrupted run's; the last "
                     "record of a step counts\"}", t->step, t->step);
}

// Parses "--sample-prompt" token ids; the default prompt is the end-of-text token. Returns the
// number of ids, or -1 with err set.
int parse_prompt(const Trainer* t, int* prompt, int max, char* err, size_t errlen) {
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
void setup_sampler(Trainer* t) {
    if (t->rank != 0 || t->opt.sample_length <= 0) return;
    const int max_len = t->cfg.max_T;
    sampler_create(&t->sampler, &t->model, max_len);
    t->sample_prompt = xmalloc(sizeof(int) * max_len, "prompt");
    t->sample_out = xmalloc(sizeof(int) * (t->opt.sample_length + 1), "sample");
    char err[ERR_LEN];
    t->sample_prompt_len = parse_prompt(t, t->sample_prompt, max_len - 1, err, sizeof err);
    if (t->sample_prompt_len < 0) fail_msg("%s", err);   // checked at start: cannot happen
}

void sample(Trainer* t) {
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

// Model FLOPs utilisation at `tokens_per_s` (global), against every rank's peak; 0 when the peak
// is unknown. *text gets it in percent, or "n/a".
double mfu_of(const Trainer* t, double tokens_per_s, double flops_per_token, char* text,
                     size_t len) {
    const double mfu = t->peak_flops > 0
                           ? tokens_per_s * flops_per_token / (t->peak_flops * t->mesh.world_size)
                           : 0;
    if (t->peak_flops > 0) snprintf(text, len, "%.1f%%", mfu * 100);
    else snprintf(text, len, "n/a");
    return mfu;
}

void note_memory(RunTotals* r) {
    BackendDevice d;
    gpt_backend_device(&d);
    if (d.memory_used > r->memory_used) r->memory_used = d.memory_used;
    r->memory_total = d.memory_total;
}

// The prediction against what the first step left in use (rank 0): device memory where there
// is a device (on the CUDA host runtime exactly the bytes cudaMalloc'ed), else the process's peak
// resident set, which also holds the program, its libraries and the host copies of the weights.
void report_memory(Trainer* t, const RunTotals* r) {
    if (t->rank != 0) return;
    char predicted[32], measured[32];
    printf("memory per device: predicted %s, measured %s after the first step (%s): "
           "measured / predicted = %.4f\n", memory_format_bytes(t->memory.total, predicted,
           sizeof predicted), memory_format_bytes(r->memory_first, measured, sizeof measured),
           r->memory_total ? "device memory in use" : "peak resident set of the process",
           t->memory.total ? (double)r->memory_first / t->memory.total : 0.0);
    fflush(stdout);
}

void print_summary(Trainer* t, const RunTotals* r, double flops_per_token) {
    if (t->rank != 0 || r->steps == 0) return;
    const double per = r->seconds / r->steps, tps = r->tokens / r->seconds;
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
    if (t->doc_pairs[1] > 0) {   // the MFU above counts causal attention: what the mask left
        const double share = t->doc_pairs[0] / t->doc_pairs[1];
        const double attention = flops_per_token - 6.0 * (double)t->model.num_params;
        char doc_mfu[32];
        const double mfu_pairs = mfu_of(t, tps, flops_per_token - attention * (1 - share), doc_mfu,
                                        sizeof doc_mfu);
        char priced[96] = "";
        if (t->doc_share_priced > 0)
            snprintf(priced, sizeof priced, " (--mesh auto priced %.2f%% from the sequences it "
                     "sampled)", 100 * t->doc_share_priced);
        printf("documents: the mask left %.2f%% of the attention pairs the MFU counts (rank 0's "
               "training batches)%s; MFU on the pairs computed %s\n", share * 100, priced,
               doc_mfu);
        run_log_json(&t->log, "{\"type\":\"documents\",\"step\":%d,\"pair_share\":%.6f,"
                     "\"mfu_pairs\":%.5f}", t->step, share, mfu_pairs);
    }
    run_log_json(&t->log, "{\"type\":\"summary\",\"step\":%d,\"timed_steps\":%d,\"ms_per_step\":%.3f"
                 "%s,\"tokens_per_s\":%.1f,\"mfu\":%.5f,\"peak_flops\":%.6g,\"memory_used_bytes\":%zu,"
                 "\"memory_total_bytes\":%zu,\"memory_predicted_bytes\":%zu,"
                 "\"memory_measured_bytes\":%zu}", t->step, r->steps, per * 1e3, split_json, tps,
                 mfu, t->peak_flops, r->memory_used, r->memory_total, t->memory.total,
                 r->memory_first);
}

// Steps of this run that were not applied, when there were any.
void print_skipped(Trainer* t) {
    const int n = t->skipped_spike + t->skipped_nonfinite;
    if (t->rank != 0 || n == 0) return;
    printf("skipped: %d step%s not applied (%d spike%s, %d non-finite)\n", n, n == 1 ? "" : "s",
           t->skipped_spike, t->skipped_spike == 1 ? "" : "s", t->skipped_nonfinite);
    run_log_json(&t->log, "{\"type\":\"skipped\",\"step\":%d,\"spike\":%d,\"non_finite\":%d}",
                 t->step, t->skipped_spike, t->skipped_nonfinite);
}

void counters_begin(const Trainer* t, StepCounters* sc) {
    memset(sc, 0, sizeof *sc);
    sc->counted = gpt_backend_counters(&sc->c0);
    sc->layer0 = t->model.layer_launches;
}

void counters_mark(StepCounters* sc) {
    if (sc->counted) gpt_backend_counters(&sc->c1);
}

void counters_end(const Trainer* t, StepCounters* sc, CounterTotals* tot, int first) {
    if (!sc->counted) return;
    BackendCounters c2;
    gpt_backend_counters(&c2);
    sc->launches = c2.launches - sc->c0.launches;
    sc->d2h = c2.d2h - sc->c0.d2h;
    sc->graph_launches = c2.graph_launches - sc->c0.graph_launches;
    sc->graph_kernels = c2.graph_kernels - sc->c0.graph_kernels;
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
    tot->graph_launches += sc->graph_launches;
    tot->graph_kernels += sc->graph_kernels;
    tot->launches_per_layer += sc->launches_per_layer;
    if (sc->syncs_in_step > tot->max_syncs_in_step) tot->max_syncs_in_step = sc->syncs_in_step;
    if (sc->syncs_end > tot->max_syncs_end) tot->max_syncs_end = sc->syncs_end;
    if (sc->d2h > tot->max_d2h) tot->max_d2h = sc->d2h;
}

void print_counters(Trainer* t, const CounterTotals* c) {
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
    if (c->graph_launches > 0)
        printf("; %.1f CUDA graph launches per step, running %.1f kernels", (double)c->graph_launches / n,
               (double)c->graph_kernels / n);
    printf(" (rank 0)\n");
    run_log_json(&t->log, "{\"type\":\"counters\",\"step\":%d,\"first_launches\":%lld,"
                 "\"first_launches_per_layer\":%.2f,\"first_d2h\":%lld,\"first_syncs_in_step\":%lld,"
                 "\"first_syncs_end\":%lld,\"steps\":%d,\"launches\":%.2f,\"launches_per_layer\":%.2f,"
                 "\"d2h\":%.2f,\"max_d2h\":%lld,\"max_syncs_in_step\":%lld,\"max_syncs_end\":%lld,"
                 "\"graph_launches\":%.2f,\"graph_kernels\":%.2f}",
                 t->step, f->launches, f->launches_per_layer, f->d2h, f->syncs_in_step, f->syncs_end,
                 n, n ? (double)c->launches / n : 0, n ? c->launches_per_layer / n : 0,
                 n ? (double)c->d2h / n : 0, c->max_d2h, c->max_syncs_in_step, c->max_syncs_end,
                 n ? (double)c->graph_launches / n : 0, n ? (double)c->graph_kernels / n : 0);
}

// The timeline: the backend's device clock (CUDA events) or the host clock; the comm layer
// records communication and waits into it, the model its layers' compute.
void setup_timeline(Trainer* t) {
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
void write_trace(Trainer* t) {
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
void report_timeline(Trainer* t) {
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

// The progress line of a step and its record in the log (rank 0).
void report_step(Trainer* t, const StepRecord* r) {
    if (t->rank != 0) return;
    const StepResult* s = &r->result;
    // Under --rampup-batch-tokens every step says its batch.
    const int ramp = batch_rampup_on(&t->rampup);
    char batch[48] = "", batch_json[48] = "";
    if (ramp) {
        snprintf(batch, sizeof batch, " | batch %ld tok", t->tokens_per_step);
        snprintf(batch_json, sizeof batch_json, ",\"batch_tokens\":%ld", t->tokens_per_step);
    }
    // Under --z-loss the step's mean z-loss, beside the cross-entropy.
    char z[48] = "", z_json[48] = "";
    if (t->opt.z_loss > 0) {
        snprintf(z, sizeof z, " | z-loss %.3e", s->z_loss);
        snprintf(z_json, sizeof z_json, ",\"z_loss\":%.9g", s->z_loss);
    }
    // Under --log-params-norm the parameters' norm after the update, beside the gradient's.
    char params[48] = "", params_json[48] = "";
    if (t->opt.log_params_norm) {
        snprintf(params, sizeof params, " | params %.4f", s->params_norm);
        snprintf(params_json, sizeof params_json, ",\"params_norm\":%.9g", s->params_norm);
    }
    const ProgressLine* l = &r->line;
    if (l->print && !t->opt.quiet) {
        char mean[40] = "";   // a line over several steps (--log-interval) says how many
        if (l->applied > 1) snprintf(mean, sizeof mean, " (mean of %d steps)", l->applied);
        printf("step %5d/%d | loss %.6f%s%s | lr %.3e | norm %.4f%s%s | %.0f ms | %.0f tok/s | "
               "MFU %s | ETA %.0f s\n", t->step, t->opt.steps, l->loss, mean, z, r->lr,
               s->grad_norm, params, batch, l->seconds * 1e3, l->tokens_per_s, l->mfu_text,
               r->eta_s);
    }
    char fractions[160] = "";
    if (t->timeline)
        snprintf(fractions, sizeof fractions, ",\"compute_frac\":%.5f,"
                 "\"exposed_comm_frac\":%.5f,\"wait_frac\":%.5f", r->timeline.compute_frac,
                 r->timeline.exposed_comm_frac, r->timeline.wait_frac);
    char phases[128] = "";
    if (r->phases.measured)
        snprintf(phases, sizeof phases, ",\"forward_ms\":%.3f,\"backward_ms\":%.3f,"
                 "\"optimizer_ms\":%.3f", r->phases.forward * 1e3, r->phases.backward * 1e3,
                 r->phases.optimizer * 1e3);
    char counted[320] = "";
    const StepCounters* sc = r->counters;
    if (sc->counted)
        snprintf(counted, sizeof counted, ",\"launches\":%lld,\"launches_per_layer\":%.2f,"
                 "\"d2h\":%lld,\"syncs_in_step\":%lld,\"syncs_end\":%lld,\"graph_launches\":%lld,"
                 "\"graph_kernels\":%lld", sc->launches, sc->launches_per_layer, sc->d2h,
                 sc->syncs_in_step, sc->syncs_end, sc->graph_launches, sc->graph_kernels);
    run_log_json(&t->log, "{\"type\":\"step\",\"step\":%d,\"loss\":%.9g%s,\"lr\":%.9g,"
                 "\"grad_norm\":%.9g%s%s,\"ms\":%.3f,\"tokens_per_s\":%.3f,\"mfu\":%.5f%s%s%s}",
                 t->step, s->loss, z_json, r->lr, s->grad_norm, params_json, batch_json,
                 r->seconds * 1e3, r->tokens_per_s, r->mfu, phases, fractions, counted);
    fflush(stdout);
}
