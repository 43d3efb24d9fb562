// The run's setup and teardown: where this process sits in the job (MPI or a rendezvous), the
// configuration checked on every rank, the mesh and transport, the data, the attention layer, the
// model and optimizer, the timeline and the token buffers; and what frees them at the end.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_bounds.h"
#include "attention/dist_ops.h"
#include "checkpoints/checkpoint_dir.h"
#include "checkpoints/model_source.h"
#include "comm/comm_mpi.h"
#include "comm/launch.h"
#include "comm/transport.h"
#include "data/bpe.h"
#include "data/tokenizer_file.h"
#include "model/init.h"
#include "train/config_check.h"
#include "train/mesh_auto.h"
#include "train/trainer.h"

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
int launch_run(Trainer* t, int* argc, char*** argv, int* world_rank, int* world_size) {
    t->started_at = seconds_now();
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

// --document-mask: none (-1), eot (GPT-2's end-of-text token) or a token id of the vocabulary.
static int parse_document_mask(Trainer* t, const char* s) {
    if (strcmp(s, "none") == 0) return -1;
    if (strcmp(s, "eot") == 0) {
        if (t->cfg.V <= GPT2_EOT)
            config_error(t, "--document-mask eot: expected a vocabulary holding GPT-2's end-of-text "
                         "token %d, found V=%d (give the boundary token's id instead)", GPT2_EOT,
                         t->cfg.V);
        return GPT2_EOT;
    }
    char* end;
    errno = 0;
    const long id = strtol(s, &end, 10);
    if (end == s || *end || errno || id < 0 || id >= t->cfg.V)
        config_error(t, "--document-mask: expected none, eot or a token id in [0, %d), found '%s'",
                     t->cfg.V, s);
    return (int)id;
}

// --rope-scaling and its factor and original context on t->cfg; file: the --init-from model's
// shape, or NULL. Not given, the file's scaling stays (a preset has none).
static void setup_rope_scaling(Trainer* t, const GPTConfig* file) {
    const TrainOptions* o = &t->opt;
    char err[ERR_LEN];
    if (gpt_rope_scaling_apply(&t->cfg, file, o->given & OPT_GIVEN_ROPE_SCALING ? o->rope_scaling
                               : NULL, o->rope_scaling_factor, o->rope_original_context, err,
                               sizeof err) != 0)
        config_error(t, "%s", err);
}

static void setup_model_config(Trainer* t) {
    const TrainOptions* o = &t->opt;
    char err[ERR_LEN];
    if (o->init_from && o->init_from[0]) {
        if (model_source_config(o->init_from, &t->cfg, NULL, err, sizeof err) != 0)
            config_error(t, "--init-from %s", err);
        t->init_cfg = t->cfg;
        if (o->layers || o->channels || o->heads || o->kv_heads || o->vocab ||
            (o->given & (OPT_GIVEN_POSITIONS | OPT_GIVEN_BLOCK)))
            config_error(t, "--init-from fixes the model shape: drop --layers/--channels/--heads/"
                         "--kv-heads/--vocab/--position-embedding/--normalization/--mlp/"
                         "--ffn-hidden/--disable-bias-linear/--add-qkv-bias/--norm-epsilon/"
                         "--untie-embeddings-and-output-weights/--qk-layernorm");
        // A rotary model has no parameter that depends on the context or theta, so it may go on
        // at another context (context extension: pretrain short, then train long) and another
        // theta (the larger base of extended Llama and Code Llama models). A learned table has
        // as many rows as the context.
        char model[ERR_LEN];
        snprintf(model, sizeof model, "the model file %s", o->init_from);
        if (gpt_context_apply(&t->cfg, o->context, model, err, sizeof err) != 0)
            config_error(t, "%s", err);
        if (o->given & OPT_GIVEN_INIT_STD)
            config_error(t, "--init-std %g: the weights come from --init-from's file %s, not a "
                         "seeded initialisation (drop --init-std)", o->init_std, o->init_from);
        if ((o->given & OPT_GIVEN_ROPE_THETA) && !t->cfg.rope_theta)
            config_error(t, "--rope-theta %d: the model file %s has learned positions",
                         o->rope_theta, o->init_from);
        if (o->given & OPT_GIVEN_ROPE_THETA) t->cfg.rope_theta = o->rope_theta;
        setup_rope_scaling(t, &t->init_cfg);
    } else {
        if (gpt_config_preset(o->preset, o->context, o->vocab, &t->cfg) != 0)
            config_error(t, "--preset: expected one of %s, found '%s'", gpt_config_preset_names(),
                         o->preset);
        if (o->layers) t->cfg.L = o->layers;
        if (o->channels) t->cfg.C = o->channels;
        if (o->heads) t->cfg.NH = o->heads;
        t->cfg.kv_heads = o->kv_heads == t->cfg.NH ? 0 : o->kv_heads;   // N = heads: plain MHA
        const int rope = strcmp(o->position_embedding, "rope") == 0;
        if ((o->given & OPT_GIVEN_ROPE_THETA) && !rope)
            config_error(t, "--rope-theta %d: expected --position-embedding rope with it, found %s",
                         o->rope_theta, o->position_embedding);
        t->cfg.rope_theta = rope ? o->rope_theta : 0;
        setup_rope_scaling(t, NULL);
        // The option table checked the names.
        gpt_block_apply(&t->cfg, gpt_norm_parse(o->normalization), gpt_mlp_parse(o->mlp),
                        o->ffn_hidden, o->disable_bias_linear);
        t->cfg.untied_classifier = o->untie_embeddings;
        if (o->add_qkv_bias && !o->disable_bias_linear)
            config_error(t, "--add-qkv-bias: expected --disable-bias-linear with it (without it "
                         "every linear layer has its bias already)");
        t->cfg.qkv_bias = o->add_qkv_bias;
        t->cfg.qk_norm = o->qk_layernorm;
        if (gpt_norm_eps_apply(&t->cfg, o->norm_epsilon, "--norm-epsilon", err, sizeof err) != 0)
            config_error(t, "%s", err);
        if (gpt_config_validate(&t->cfg, err, sizeof err) != 0)
            config_error(t, "--preset/--layers/--channels/--heads/--kv-heads/--position-embedding/"
                         "--ffn-hidden: %s", err);
    }
    // The window: the model file's (a preset has none), unless the options give one.
    if (o->given & (OPT_GIVEN_WINDOW | OPT_GIVEN_WINDOW_EVERY)) {
        const int w = o->given & OPT_GIVEN_WINDOW ? o->attention_window : t->cfg.window;
        if (w == 0 && (o->given & OPT_GIVEN_WINDOW_EVERY))
            config_error(t, "--window-every %d: expected --attention-window W >= 1 with it, found "
                         "no window", o->window_every);
        t->cfg.window = w;
        t->cfg.window_every = !w ? 0 : o->given & OPT_GIVEN_WINDOW_EVERY ? o->window_every
                                     : t->cfg.window_every ? t->cfg.window_every : 1;
    }
    if (gpt_config_validate(&t->cfg, err, sizeof err) != 0)
        config_error(t, "--attention-window/--window-every: %s", err);
    if (gpt_backend_head_size(t->cfg.C / t->cfg.NH, err, sizeof err) != 0) {
        if (o->init_from && o->init_from[0]) config_error(t, "--init-from %s: %s", o->init_from, err);
        config_error(t, "--channels %d --heads %d: %s", t->cfg.C, t->cfg.NH, err);
    }
    t->doc_boundary = parse_document_mask(t, o->document_mask);
    if (o->reset_position_ids && t->doc_boundary < 0)
        config_error(t, "--reset-position-ids: expected --document-mask eot or a token id (the "
                     "documents whose positions restart), found --document-mask none");
    if (o->eval_only && !(o->val_data && o->val_data[0]) && !(o->mc_eval && o->mc_eval[0]))
        config_error(t, "--eval-only: expected --val-data shards or an --mc-eval file to evaluate "
                     "on, found neither");
    if (o->seq_len > t->cfg.max_T)
        config_error(t, "--seq-len %d: expected at most the model's context %d (raise --context)",
                     o->seq_len, t->cfg.max_T);
    if (o->recompute_num_layers > t->cfg.L)
        config_error(t, "--recompute-num-layers %d: expected at most the model's %d layers (0: "
                     "every layer)", o->recompute_num_layers, t->cfg.L);
    // (--mesh auto without --recompute chooses both)
    if (o->recompute_num_layers > 0 &&
        (strcmp(o->recompute, "none") == 0 || !(o->given & OPT_GIVEN_RECOMPUTE)))
        config_error(t, "--recompute-num-layers %d: expected --recompute selective or full, whose "
                     "layers it counts, found %s", o->recompute_num_layers,
                     o->given & OPT_GIVEN_RECOMPUTE ? "--recompute none" : "no --recompute");
    if (o->eval_positions > o->seq_len)
        config_error(t, "--eval-positions %d: expected at most --seq-len %d ranges of positions",
                     o->eval_positions, o->seq_len);
    if (o->new_data_phase && !o->resume)
        config_error(t, "--new-data-phase: expected --resume (a new phase of the data begins where "
                     "a checkpoint left off), found none");
    if (o->continue_sets && !o->new_data_phase)
        config_error(t, "--continue-sets: expected --new-data-phase (sets continue in a new data "
                     "phase), found none");
    if (o->eval_positions && !(o->val_data && o->val_data[0]))
        config_error(t, "--eval-positions %d: expected --val-data shards to evaluate on, found none",
                     o->eval_positions);
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
    // Ulysses and USP split the key/value heads with their query heads (the heads under MHA).
    const int nkv = gpt_kv_heads(&t->cfg);
    const int gqa = nkv != t->cfg.NH;
    const char* heads = gqa ? "key/value heads (--kv-heads)" : "heads";
    const char* count = gqa ? "key/value head count" : "head count";
    if (strcmp(o->attention, "ulysses") == 0 && t->mesh.P > 1 && nkv % t->mesh.P != 0)
        config_error(t, "--attention ulysses: the %d %s split over the P = %d sequence-parallel "
                     "ranks (--pq x --pkv); expected P to divide the %s", nkv, heads, t->mesh.P,
                     count);
    if (strcmp(o->attention, "usp") == 0 && t->mesh.P > 1 && nkv % t->mesh.pq != 0)
        config_error(t, "--attention usp: the %d %s split over the --pq %d ranks of a mesh "
                     "column; expected --pq to divide the %s", nkv, heads, t->mesh.pq, count);
    const int usp = strcmp(o->attention, "usp") == 0;
    const int a2a = usp || strcmp(o->attention, "ulysses") == 0;
    char what[64];
    snprintf(what, sizeof what, "--attention %s", o->attention);
    if (dist_chunks_check(o->a2a_chunks, a2a, nkv / (usp ? t->mesh.pq : t->mesh.P), what, err,
                          sizeof err))
        config_error(t, "%s", err);
    t->B = o->batch;
    t->T = o->seq_len;
    t->Tl = o->seq_len / t->mesh.P;
    const long micro = (long)t->B * t->T * t->mesh.dp;
    const long total = o->total_batch_tokens ? o->total_batch_tokens : micro;
    if (total % micro != 0)
        config_error(t, "--total-batch-tokens %ld: expected a multiple of batch x seq-len x dp = "
                     "%d x %d x %d = %ld", total, t->B, t->T, t->mesh.dp, micro);
    // The step's phase marks hold two per micro-batch: bound the accumulation.
    if (total / micro > MAX_ACCUMULATION)
        config_error(t, "--total-batch-tokens %ld: expected at most %d micro-batches of batch x "
                     "seq-len x dp = %ld tokens per step, found %ld", total, MAX_ACCUMULATION,
                     micro, total / micro);
    if (batch_rampup_parse(o->rampup_batch_tokens, micro, total, o->total_batch_tokens != 0,
                           &t->rampup, err, sizeof err) != 0)
        config_error(t, "%s", err);
    if (o->train_tokens > 0) {
        if (o->given & OPT_GIVEN_STEPS)
            config_error(t, "--train-tokens %ld: the run's length is given in steps too (--steps %d); "
                         "drop one", o->train_tokens, o->steps);
        const int64_t steps = batch_rampup_steps_for_tokens(&t->rampup, o->train_tokens);
        if (steps > 1000000000)
            config_error(t, "--train-tokens %ld: expected at most 1e9 steps of %ld tokens, found "
                         "%lld steps", o->train_tokens, total, (long long)steps);
        t->opt.steps = (int)steps;
    }
    t->max_accum = (int)(total / micro);
    t->accum = t->max_accum;   // step_batch sets each step's
    t->tokens_per_step = total;
    t->phase_slot = xcalloc((size_t)2 * t->max_accum + 2, sizeof(int), "phase marks");
    t->phase_host = xcalloc((size_t)2 * t->max_accum + 2, sizeof(double), "phase times");
}

static TransportOptions transport_options(const Trainer* t) {
    const TrainOptions* o = &t->opt;
    return (TransportOptions){o->comm, o->rendezvous, o->rendezvous_id, o->rendezvous_timeout,
                              o->comm_timeout};
}

// --cuda-graph 1: a graph replays the device work it captured, so a micro-batch's forward and
// backward must be device work only, the same in every step.
static void check_cuda_graph(Trainer* t) {
    const TrainOptions* o = &t->opt;
    if (!o->cuda_graph) return;
    if (!gpt_backend_graphs())
        config_error(t, "--cuda-graph 1: the %s trainer has no CUDA graphs; expected 0 (the CUDA "
                     "trainers capture them)", gpt_backend_name());
    // The timeline is on by default, but inside a graph each mark is a node more: off unless asked.
    if (o->timeline && !(o->given & OPT_GIVEN_TIMELINE) && !o->trace[0]) {
        t->opt.timeline = 0;
        if (t->rank == 0)
            printf("--cuda-graph 1: the timeline is off (--timeline 1 or --trace times the work "
                   "inside the graphs through event record nodes)\n");
    }
    if (t->mesh.P > 1 && strcmp(o->comm, "nccl") != 0 && strcmp(o->comm, "auto") != 0)
        config_error(t, "--cuda-graph 1 on a sequence-parallel mesh (--pq %d --pkv %d): expected "
                     "--comm nccl, found '%s' (the attention's communication runs inside the "
                     "graph, and only NCCL's operations can be captured)", t->mesh.pq, t->mesh.pkv,
                     o->comm);
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

// --val-data's sets, a validation loader each, their weights normalised (by the largest first,
// so that weights near DBL_MAX do not sum to infinity).
static void open_val_sets(Trainer* t, const LoaderConfig* lc) {
    char err[ERR_LEN];
    BlendSpec spec;
    if (loader_parse_value(t->opt.val_data, &spec, err, sizeof err) != 0)
        fail_msg("--val-data %s", err);
    ValSets* v = &t->val;
    v->n = spec.n;
    v->loader = xmalloc(sizeof *v->loader * (size_t)spec.n, "validation loaders");
    v->weight = xmalloc(sizeof *v->weight * (size_t)spec.n, "validation weights");
    v->loss = xmalloc(sizeof *v->loss * (size_t)spec.n, "validation losses");
    double largest = 0, sum = 0;
    for (int c = 0; c < spec.n; c++) largest = spec.weight[c] > largest ? spec.weight[c] : largest;
    for (int c = 0; c < spec.n; c++) sum += spec.weight[c] / largest;
    for (int c = 0; c < spec.n; c++) {
        v->weight[c] = spec.weight[c] / largest / sum;
        v->loss[c] = NAN;
        v->loader[c] = loader_open(spec.pattern[c], lc, err, sizeof err);
        if (!v->loader[c]) {
            if (spec.n > 1) fail_msg("--val-data set %d of %d: %s", c + 1, spec.n, err);
            fail_msg("--val-data %s", err);
        }
        if (loader_global_batches(v->loader[c]) < 1)
            fail_msg("--val-data %s: expected at least one micro-batch of %d x %d tokens, found "
                     "%lld windows", spec.pattern[c], t->B, t->T + 1,
                     (long long)loader_windows_per_epoch(v->loader[c]));
    }
    blend_spec_free(&spec);
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
        open_val_sets(t, &lc);
    }
    if (t->opt.mc_eval && t->opt.mc_eval[0]) {   // small (HellaSwag's: 3.6 MB): every rank reads it
        if (mc_eval_read(t->opt.mc_eval, t->opt.mc_eval_examples, t->cfg.V, &t->mc, err,
                         sizeof err) != 0)
            fail_msg("--mc-eval %s", err);
        if (t->mc.longest_row > t->T)
            fail_msg("--mc-eval %s: example %d has a row of %d tokens (its context and a "
                     "completion), above --seq-len %d; raise --seq-len", t->opt.mc_eval,
                     t->mc.longest_example, t->mc.longest_row, t->T);
    }
    if (t->rank == 0 && t->opt.tokenizer && t->opt.tokenizer[0]) {
        if (bpe_token_table_load(t->opt.tokenizer, &t->tokens, err, sizeof err) == 0)
            t->has_tokens = 1;
        else
            fprintf(stderr, "warning: --tokenizer %s; samples are printed as token ids\n", err);
    }
}

// Every rank must run the same configuration (config_check.h); on a mismatch all stop, rank 0
// naming the first differing item.
static void check_config_across_ranks(Trainer* t) {
    ConfigItems items = {0};
    config_items_of_run(&items, &t->opt, &t->cfg, t->train_loader,
                        (const DataLoader* const*)t->val.loader, t->val.n);
    char msg[2 * ERR_LEN];
    const int differs = config_items_compare(t->comm, &t->mesh, &items, msg, sizeof msg);
    config_items_free(&items);
    if (differs) config_error(t, "configuration differs across ranks: %s", msg);
}

static void setup_attention(Trainer* t) {
    const int NH = t->cfg.NH, NKV = gpt_kv_heads(&t->cfg), HS = t->cfg.C / NH;
    if (t->mesh.P == 1) {
        t->attention = attention_local_create(t->B, t->T, NH, NKV, HS);
    } else if (strcmp(t->opt.attention, "2d") == 0) {
        t->attention = attention2d_create(t->comm, t->B, t->Tl, NH, NKV, HS,
                                          t->opt.keep_kv ? t->cfg.L : 0);
    } else if (strcmp(t->opt.attention, "2d-overlap") == 0) {
        t->attention = attention2d_overlap_create(t->comm, t->B, t->Tl, NH, NKV, HS);
    } else if (strcmp(t->opt.attention, "ulysses") == 0) {
        t->attention =
            attention_ulysses_create(t->comm, t->B, t->Tl, NH, NKV, HS, t->opt.a2a_chunks);
    } else if (strcmp(t->opt.attention, "usp") == 0) {
        t->attention = attention_usp_create(t->comm, t->B, t->Tl, NH, NKV, HS, t->opt.a2a_chunks);
    } else {
        RingLayout layout = RING_CYCLIC;
        CHECK(ring_layout_parse(t->opt.attention, &layout) == 0, "caller bug",
              "--attention %s: not a schedule", t->opt.attention);
        t->attention = attention_ring_create(t->comm, layout, t->B, t->Tl, NH, NKV, HS);
    }
}

static GptRecompute recompute_of(const Trainer* t) {
    GptRecompute r = GPT_RECOMPUTE_NONE;
    if (gpt_recompute_parse(t->opt.recompute, &r) != 0)   // the option's choices are the names
        config_error(t, "--recompute: expected none, selective or full, found '%s'", t->opt.recompute);
    return r;
}

// The memory budget of this run under recompute mode r over the first `layers` layers (0: all),
// with or without rank 0's sampler, and under dist_muon with rank muon_rank's share of the
// matrices' momenta (-1: the largest share): the element sizes are the backend's (what the
// distributed schedules move: bf16 or fp32 storage, fp32 accumulators), the fp32 master copy where
// the storage is narrower (model/backend.h).
static MemoryConfig run_memory_config(const Trainer* t, GptRecompute r, int layers, int sampler,
                                      int muon_rank) {
    const TrainOptions* o = &t->opt;
    MemorySchedule schedule = MEMORY_ATTN_2D;
    if (t->mesh.P > 1 && memory_schedule_parse(o->attention, &schedule) != 0)
        config_error(t, "--attention %s: no memory budget for this schedule", o->attention);
    const size_t real_bytes = comm_type_size(dist_real_comm_type());
    const MemoryConfig c = {
        .cfg = t->cfg, .B = t->B, .T = t->Tl, .recompute = r, .recompute_layers = layers,
        .dp = t->mesh.dp,
        .pq = t->mesh.pq, .pkv = t->mesh.pkv, .schedule = schedule, .keep_kv = o->keep_kv,
        .zero = o->zero, .muon = options_muon(o),
        .muon_ranks = strcmp(o->optimizer, "dist_muon") == 0 ? t->mesh.world_size : 1,
        .muon_whole_qkv = o->muon_no_split_qkv, .muon_rank = muon_rank,
        .muon_prec = muon_matmul_prec(o->muon_matmul_prec), .cuda = !gpt_backend_host_memory(),
        .nccl = strcmp(t->transport, "nccl") == 0, .sampler = sampler,
        .documents = t->doc_boundary >= 0, .reset_positions = o->reset_position_ids,
        .flash_kernels = !gpt_backend_host_memory() && real_bytes < sizeof(float),
        .real_bytes = real_bytes, .stat_bytes = comm_type_size(dist_acc_comm_type()),
        .master_bytes = real_bytes < sizeof(float) ? sizeof(float) : 0,
        .param_chunk = gpt_backend_param_chunk()};
    return c;
}
static void run_memory_budget(const Trainer* t, GptRecompute r, int layers, int sampler,
                              int muon_rank, MemoryBudget* b) {
    const MemoryConfig c = run_memory_config(t, r, layers, sampler, muon_rank);
    memory_budget(&c, b);
}

// The smallest device memory of any rank (every rank reads its own device).
static double smallest_device(Trainer* t, double mine) {
    const int world = t->mesh.world_size;
    double* all = xcalloc((size_t)world, sizeof(double), "device memory per rank");
    all[t->mesh.world_rank] = mine;
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    comm_all_reduce_host(t->comm, MESH_WORLD, all, (size_t)world, COMM_F64);
    double least = all[0];
    for (int r = 1; r < world; r++) least = all[r] < least ? all[r] : least;
    free(all);
    return least;
}

// What would fit `limit` bytes instead: another --recompute mode over the fewest layers (the
// least recomputation first), the same without the sampler, or else a larger mesh. One clause
// into out.
static void what_fits(const Trainer* t, GptRecompute now, int now_layers, int sampler,
                      double limit, char* out, size_t len) {
    char text[32], layers[48];
    MemoryBudget b;
    for (int drop = 0; drop <= sampler; drop++)
        for (int r = GPT_RECOMPUTE_NONE; r <= GPT_RECOMPUTE_FULL; r++) {
            MemoryConfig c = run_memory_config(t, (GptRecompute)r, 0, sampler && !drop, -1);
            const int n = memory_fewest_recompute_layers(&c, limit);
            if (n < 0 || (!drop && r == (int)now && (r == GPT_RECOMPUTE_NONE || n == now_layers)))
                continue;
            c.recompute_layers = n;
            memory_budget(&c, &b);
            layers[0] = 0;
            if (r != GPT_RECOMPUTE_NONE && n > 0)
                snprintf(layers, sizeof layers, " --recompute-num-layers %d", n);
            snprintf(out, len, "--recompute %s%s%s would fit (%s)",
                     gpt_recompute_name((GptRecompute)r), layers,
                     drop ? " with --sample-length 0 (no sampler on rank 0)" : "",
                     memory_format_bytes(b.total, text, sizeof text));
            return;
        }
    run_memory_budget(t, GPT_RECOMPUTE_FULL, 0, 0, -1, &b);
    snprintf(out, len, "no --recompute mode fits (full, without the sampler: %s): a larger mesh is "
             "needed (more ranks: --pq/--pkv split the sequence, --zero 1 the optimizer state)",
             memory_format_bytes(b.total, text, sizeof text));
}

// This rank's predicted device memory (t->memory); a run that does not fit the smallest device
// of the job is refused on every rank before anything large is allocated. The verdict is rank
// 0's budget (the sampler's rank: the largest) against that device, the same on every rank.
static void check_memory(Trainer* t) {
    const GptRecompute r = recompute_of(t);
    const int layers = t->opt.recompute_num_layers;
    const int sampler = t->opt.sample_length > 0;
    BackendDevice d;
    gpt_backend_device(&d);
    run_memory_budget(t, r, layers, sampler && t->rank == 0, t->rank, &t->memory);
    if (gpt_backend_host_memory()) return;   // the CPU: no device to refuse on
    const double limit = smallest_device(t, (double)d.memory_total);
    MemoryBudget worst;
    run_memory_budget(t, r, layers, sampler, -1, &worst);
    if (worst.total <= limit) return;
    const MemoryTerm big = memory_largest_term(&worst);
    char need[32], has[32], term[32], fits[ERR_LEN], mode[64];
    what_fits(t, r, layers, sampler, limit, fits, sizeof fits);
    recompute_text(t, mode, sizeof mode);
    config_error(t, "memory per device: this run needs %s (predicted, --recompute %s; largest "
                 "term: %s, %s) and the device has %s; %s",
                 memory_format_bytes(worst.total, need, sizeof need), mode,
                 memory_term_name(big), memory_format_bytes(worst.bytes[big], term, sizeof term),
                 memory_format_bytes((size_t)limit, has, sizeof has), fits);
}

// --optimizer dist_muon: a Newton-Schulz result of the backend's scratch from its owner to every
// rank (MuonShare).
static void muon_broadcast(void* ctx, void* buf, size_t bytes, int root) {
    Trainer* t = ctx;
    comm_set_scope(t->comm, COMM_NO_LAYER, COMM_OTHER);
    comm_broadcast(t->comm, MESH_WORLD, buf, bytes, COMM_U8, root);
}

// The host copies of the weights (num_params) and of the rank's moments (shard_count), zeroed:
// the model files' and checkpoints' source and destination. Under --async-save the steps wait for
// the copy into them, so they are pinned where the backend can (CUDA: a copy from the device at
// full speed); all three alike, so that one flag says how to free them.
static void alloc_host_copies(Trainer* t) {
    const size_t pb = sizeof(float) * t->model.num_params, mb = sizeof(float) * t->shard_count;
    if (t->opt.async_save && !t->opt.no_save) {
        t->host_params = gpt_host_pinned_alloc(pb);
        t->host_m = t->host_params ? gpt_host_pinned_alloc(mb) : NULL;
        t->host_v = t->host_m ? gpt_host_pinned_alloc(mb) : NULL;
        t->host_pinned = t->host_v != NULL;
        if (t->host_pinned) return;
        gpt_host_pinned_free(t->host_m);
        gpt_host_pinned_free(t->host_params);
        const double bytes = (double)pb + 2.0 * mb;
        if (!gpt_backend_host_memory())
            fprintf(stderr, "warning: rank %d: --async-save: %.3g %s of pinned host memory for "
                    "the checkpoint copies is more than the system would lock; ordinary memory "
                    "instead (a slower copy)\n", t->rank, bytes / (bytes < 1e9 ? 1e6 : 1e9),
                    bytes < 1e9 ? "MB" : "GB");
    }
    t->host_params = xcalloc(t->model.num_params, sizeof(float), "host parameters");
    t->host_m = xcalloc(t->shard_count, sizeof(float), "host AdamW first moments");
    t->host_v = xcalloc(t->shard_count, sizeof(float), "host AdamW second moments");
}

static void free_host_copies(Trainer* t) {
    if (t->host_pinned) {
        gpt_host_pinned_free(t->host_params);
        gpt_host_pinned_free(t->host_m);
        gpt_host_pinned_free(t->host_v);
    } else {
        free(t->host_params);
        free(t->host_m);
        free(t->host_v);
    }
    t->host_params = t->host_m = t->host_v = NULL;
}

static void setup_model_and_optimizer(Trainer* t) {
    const int world = t->mesh.world_size;
    const int zero = t->opt.zero;
    const GptRecompute recompute = recompute_of(t);
    gpt_create_recompute(&t->model, &t->cfg, t->B, t->Tl, t->attention, zero ? world : 1,
                         recompute, t->opt.recompute_num_layers);
    t->model.z_loss = (float)t->opt.z_loss;
    // Every backend buffer first (the optimizer's included): a model that does not fit the device
    // fails here, in seconds, not after the parameters have been initialised on the host.
    t->shard_count = zero ? t->model.padded_params / world : t->model.num_params;
    t->shard_begin = zero ? t->shard_count * t->mesh.world_rank : 0;
    t->muon = options_muon(&t->opt);
    t->muon_cfg = (MuonConfig){.momentum = t->opt.muon_momentum, .nesterov = t->opt.muon_nesterov,
                               .ns_steps = t->opt.muon_ns_steps,
                               .scale_mode = (MuonScaleMode)muon_scale_mode(t->opt.muon_scale_mode),
                               .extra_scale = t->opt.muon_extra_scale,
                               .split_qkv = !t->opt.muon_no_split_qkv,
                               .matmul_prec = (MuonMatmulPrec)muon_matmul_prec(t->opt.muon_matmul_prec)};
    if (!strcmp(t->opt.optimizer, "dist_muon"))   // every rank holds the same parameters
        t->muon_cfg.share = (MuonShare){t->mesh.world_rank, world, muon_broadcast, t};
    t->optimizer = optimizer_create(&t->model, t->shard_begin, t->shard_count,
                                    t->muon ? &t->muon_cfg : NULL);
    char err[ERR_LEN];
    alloc_host_copies(t);
    if (t->opt.init_from && t->opt.init_from[0]) {
        if (model_source_load(t->opt.init_from, &t->init_cfg, t->host_params, err, sizeof err))
            fail_msg("--init-from %s", err);
    } else {
        gpt_init_params(&t->cfg, (uint64_t)t->opt.seed, t->opt.init_std, t->host_params);
    }
    gpt_params_from_host(&t->model, t->host_params);
    if (zero) t->shard_scratch = tensor_alloc(t->shard_count, "ZeRO-1 shard");
    // Buckets inside a CUDA graph need a transport whose operations can be captured.
    if (!zero && world > 1 && t->opt.grad_bucket_mb > 0 && t->opt.overlap &&
        (!t->opt.cuda_graph || comm_capturable(t->comm)))
        t->buckets = grad_buckets_create(&t->cfg, (size_t)(t->opt.grad_bucket_mb * (1 << 20)),
                                         comm_type_size(dist_real_comm_type()));
    const TrainOptions* o = &t->opt;
    t->sched = (LRSchedule){.lr = o->lr,
                            .warmup_steps = o->warmup >= 0 ? o->warmup
                                                           : (int)(o->warmup_frac * o->steps),
                            .total_steps = o->steps,
                            .final_frac = o->final_lr_frac,
                            .kind = (LRScheduleKind)lr_schedule_kind(o->lr_schedule),
                            .decay_frac = o->decay_frac,
                            .wsd_style = (WsdDecayStyle)wsd_decay_style(o->wsd_decay_style),
                            .warmup_tokens = (double)o->lr_warmup_tokens,
                            .decay_tokens = (double)o->lr_decay_tokens};
    if (o->lr_decay_tokens) t->sched.warmup_steps = 0;   // the warmup is in tokens
    t->adam = (AdamWConfig){o->beta1, o->beta2, o->eps, o->weight_decay};
    t->sample_rng = (uint64_t)o->seed ^ 0x5a5a5a5a5a5a5a5aULL;
    spike_init(&t->spike, o->spike_zscore, o->spike_window);
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
    if (t->mc.examples || t->opt.eval_positions)
        t->mc_losses = xmalloc(sizeof(float) * local, "eval losses");
    if (t->opt.eval_positions) {
        t->position_loss = xmalloc(sizeof(double) * t->opt.eval_positions, "position losses");
        t->set_position_loss = xmalloc(sizeof(double) * t->opt.eval_positions,
                                       "one set's position losses");
    }
    if (t->mc.examples) {
        // Rows that fit the local tokens skip the mesh (train/evaluate.c).
        if (t->mc.longest_row <= t->Tl)
            t->mc_attention = attention_local_create(t->B, t->mc.longest_row, t->cfg.NH,
                                                     gpt_kv_heads(&t->cfg), t->cfg.C / t->cfg.NH);
        t->mc_full_mask = xmalloc(sizeof(int32_t) * full, "eval mask");
        t->mc_mask = xmalloc(sizeof(int32_t) * local, "local eval mask");
        t->mc_row_loss = xmalloc(sizeof(double) * t->mc.rows, "eval row losses");
    }
}

void setup_run(Trainer* t, int world_rank, int world_size) {
    setup_model_config(t);
    // Options that would do nothing in this configuration are refused, not ignored.
    if ((t->opt.given & OPT_GIVEN_DECAY_FRAC) && strcmp(t->opt.lr_schedule, "wsd") != 0)
        config_error(t, "--decay-frac %g: only --lr-schedule wsd has a decay phase of its own; add "
                     "--lr-schedule wsd, or drop --decay-frac", t->opt.decay_frac);
    if ((t->opt.given & OPT_GIVEN_WSD_DECAY_STYLE) && strcmp(t->opt.lr_schedule, "wsd") != 0)
        config_error(t, "--wsd-decay-style %s: only --lr-schedule wsd has a decay phase of its own; "
                     "add --lr-schedule wsd, or drop --wsd-decay-style", t->opt.wsd_decay_style);
    if ((t->opt.given & OPT_GIVEN_MUON) && !options_muon(&t->opt))
        config_error(t, "--muon-* options: they set Muon's update, and --optimizer is %s; add "
                     "--optimizer muon (or dist_muon), or drop them", t->opt.optimizer);
    // Muon orthogonalizes whole matrices: a ZeRO-1 shard cuts through them (Megatron-LM refuses
    // its distributed optimizer with Muon too).
    if (options_muon(&t->opt) && t->opt.zero)
        config_error(t, "--optimizer %s with --zero %d: Muon updates whole matrices, which a ZeRO-1 "
                     "shard of the optimizer state cuts through; drop --zero (every rank then keeps "
                     "the whole state), or use --optimizer adamw", t->opt.optimizer, t->opt.zero);
    if ((t->opt.given & OPT_GIVEN_FINAL_LR_FRAC) && strcmp(t->opt.lr_schedule, "constant") == 0)
        config_error(t, "--final-lr-frac %g: --lr-schedule constant never decays; drop "
                     "--final-lr-frac, or choose another --lr-schedule", t->opt.final_lr_frac);
    // inverse-sqrt divides by the warmup's length: in tokens, without one, step 1's rate would be
    // --lr / sqrt(its tokens) (lr / 724 at 524288 tokens a step), the floor from the start.
    if (t->opt.lr_decay_tokens && !t->opt.lr_warmup_tokens &&
        strcmp(t->opt.lr_schedule, "inverse-sqrt") == 0)
        config_error(t, "--lr-schedule inverse-sqrt --lr-decay-tokens %ld: expected "
                     "--lr-warmup-tokens N (the rate is --lr x sqrt(N / trained tokens) after it), "
                     "found none", t->opt.lr_decay_tokens);
    if (t->opt.lr_warmup_tokens && !t->opt.lr_decay_tokens)
        config_error(t, "--lr-warmup-tokens %ld: a warmup in tokens belongs to a schedule in "
                     "tokens; add --lr-decay-tokens, or give --warmup in steps",
                     t->opt.lr_warmup_tokens);
    if (t->opt.lr_decay_tokens && (t->opt.given & (OPT_GIVEN_WARMUP | OPT_GIVEN_WARMUP_FRAC))) {
        char found[64];
        if (t->opt.given & OPT_GIVEN_WARMUP) snprintf(found, sizeof found, "--warmup %d", t->opt.warmup);
        else snprintf(found, sizeof found, "--warmup-frac %g", t->opt.warmup_frac);
        config_error(t, "--lr-decay-tokens %ld: expected no warmup in steps (the schedule counts "
                     "tokens: its warmup is --lr-warmup-tokens), found %s", t->opt.lr_decay_tokens,
                     found);
    }
    if (t->opt.lr_decay_tokens && t->opt.lr_warmup_tokens >= t->opt.lr_decay_tokens)
        config_error(t, "--lr-warmup-tokens %ld: expected fewer tokens than --lr-decay-tokens %ld",
                     t->opt.lr_warmup_tokens, t->opt.lr_decay_tokens);
    if (strcmp(t->opt.mesh, "auto") != 0) {
        if (t->opt.cluster && t->opt.cluster[0])
            config_error(t, "--cluster %s: only --mesh auto reads a cluster description; add "
                         "--mesh auto, or drop --cluster", t->opt.cluster);
        if (t->opt.memory_gb > 0)
            config_error(t, "--memory-gb %g: only --mesh auto limits the memory of the "
                         "configurations it considers; add --mesh auto, or drop --memory-gb",
                         t->opt.memory_gb);
    }
    if (strcmp(t->opt.mesh, "auto") == 0) {
        char err[ERR_LEN];
        if (mesh_auto_choose(&t->opt, &t->cfg, t->doc_boundary, world_size, t->rank == 0,
                             &t->doc_share_priced, err, sizeof err) != 0)
            config_error(t, "%s", err);
    }
    setup_mesh(t, world_rank, world_size);
    check_cuda_graph(t);
    setup_transport(t);
    t->comm = create_comm(t);
    comm_set_overlap(t->comm, t->opt.overlap);
    open_data(t);
    check_config_across_ranks(t);
    check_memory(t);
    setup_attention(t);
    setup_model_and_optimizer(t);
    setup_timeline(t);
    setup_batches(t);
    setup_sampler(t);
    train_options_json(&t->opt, t->config_json, sizeof t->config_json);
    char err[ERR_LEN];
    if (t->rank == 0 && checkpoint_make_dir(t->opt.out_dir, err, sizeof err) != 0)
        fail_msg("--out-dir %s", err);
    comm_barrier(t->comm, MESH_WORLD);
}

void shut_down(Trainer* t) {
    params_ready(t);
    free_checkpoint_write(t);
    run_log_close(&t->log);
    loader_close(t->train_loader);
    for (int c = 0; c < t->val.n; c++) loader_close(t->val.loader[c]);
    free(t->val.loader);
    free(t->val.weight);
    free(t->val.loss);
    if (t->sample_out) sampler_free(&t->sampler);
    free(t->sample_prompt);
    free(t->sample_out);
    gpt_free(&t->model);
    attention_layer_free(t->attention);
    comm_destroy(t->comm);   // its trace first: it points into the timeline
    timeline_destroy(t->timeline);
    timeline_host_clock_destroy(t->host_clock);
    if (t->has_tokens) token_table_free(&t->tokens);
    optimizer_free(t->optimizer);
    spike_free(&t->spike);
    tensor_free(t->shard_scratch);
    grad_buckets_free(t->buckets);
    free_graphs(t);
    free_host_copies(t);
    free(t->full_inputs); free(t->full_targets); free(t->inputs); free(t->targets); free(t->positions);
    free(t->phase_slot); free(t->phase_host);
    mc_eval_free(&t->mc);
    attention_layer_free(t->mc_attention);
    free(t->mc_full_mask); free(t->mc_mask); free(t->mc_losses); free(t->mc_row_loss);
    free(t->position_loss);
    free(t->set_position_loss);
}
