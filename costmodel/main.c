// build/costmodel: the cost model's command line (costmodel/README.md).
//
//   costmodel --preset gpt3-2.7b --seq-len 65536 --gpus 64 --cluster FILE [--batch 1]
//             [--memory-gb 80] [--top 20] [--recompute auto|none|selective|full]
//                                                      ranked table of meshes and schedules
//   costmodel ... --dp D --pq Q --pkv K --attention A  one configuration in detail
//   costmodel --paper [--out-dir costmodel]            the paper comparison (.md, .csv)
//   costmodel --validate CSV --cluster FILE            predicted against measured CPU runs
//   costmodel --calibrate --collectives JSONL --out F  this machine's cluster file
//   costmodel --calibrate-gpu REPORT --base F --out F  a GPU cluster file from a GPU kit report
//   costmodel --validate-gpu REPORT --cluster FILE     predicted against its trainer runs
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/dist_attention.h"
#include "comm/fail.h"
#include "comm/flag_values.h"
#include "costmodel/costmodel.h"
#include "costmodel/cpu_calibrate.h"
#include "costmodel/gpu_calibrate.h"
#include "costmodel/reports.h"
#include "model/muon.h"
#include "model/activations.h"
#include "model/config.h"
#include "train/batch_rampup.h"

typedef enum {
    MODE_RANK, MODE_PREDICT, MODE_PAPER, MODE_VALIDATE, MODE_CALIBRATE, MODE_CALIBRATE_GPU,
    MODE_VALIDATE_GPU
} Mode;

typedef struct {
    Mode mode;
    const char *preset, *cluster, *csv, *out_dir, *a100, *h100, *h100_fa2, *collectives, *out;
    const char *report, *base;
    AttentionSource attention_source;
    int layers, channels, heads, kv_heads, vocab, context, window, window_every;
    int rope;        // --position-embedding rope: 1
    int norm, mlp, ffn_hidden;   // --normalization, --mlp (GPT_NORM_*, GPT_MLP_*), --ffn-hidden
    int no_linear_bias;          // --disable-bias-linear: 1
    int untied_classifier;       // --untie-embeddings-and-output-weights: 1
    int qkv_bias;                // --add-qkv-bias: 1
    int qk_norm;                 // --qk-layernorm: 1
    long T, document_length;
    int batch, accum, gpus, top, overlap, zero, keep_kv, dp, pq, pkv, chunks;
    int muon;        // --optimizer muon: its 5 Newton-Schulz iterations (CostConfig.muon)
    int muon_split;  // --optimizer dist_muon: CostConfig.muon_split
    int muon_whole_qkv;   // --muon-no-split-qkv: CostConfig.muon_whole_qkv
    int muon_prec;        // --muon-fp32-matmul-prec: CostConfig.muon_prec
    int muon_prec_given;
    int z_loss, params_norm;   // --z-loss X > 0, --log-params-norm: CostConfig's
    long train_tokens;         // --train-tokens: the run's length, for its predicted time
    const char* rampup;        // --rampup-batch-tokens: the trainer's ramp, priced with it
    double memory_gb;
    const char *attention, *algorithms;
    int recompute;   // a GptRecompute, or COST_RECOMPUTE_AUTO
    int recompute_layers;   // --recompute-num-layers: the layers a given recompute covers (0: all)
} Args;

static void usage(void) {
    printf(
        "usage: costmodel --preset NAME --seq-len T --gpus N --cluster FILE [options]\n"
        "       costmodel --paper [--out-dir DIR] [--a100 FILE] [--h100 FILE]\n"
        "       costmodel --validate CSV --cluster FILE [--out-dir DIR]\n"
        "       costmodel --calibrate --collectives JSONL --out FILE\n"
        "       costmodel --calibrate-gpu REPORT --base FILE [--attention-source ours|sdpa]\n"
        "                 [--collectives JSONL] --out FILE\n"
        "       costmodel --validate-gpu REPORT --cluster FILE [--out-dir DIR]\n"
        "Predicts training step times of the trainer (build/train_gpt) on a cluster description.\n"
        "  --preset NAME        model shape (%s)\n"
        "  --layers/--channels/--heads/--vocab N   override the preset (vocab: GPT-2's 50257)\n"
        "  --kv-heads N         grouped-query attention: N key/value heads, a divisor of the\n"
        "                       heads (default 0: one per head)\n"
        "  --position-embedding learned|rope   the trainer's: a learned table of --context rows\n"
        "                       (default), or rotary positions (no table; a rotation pass over the\n"
        "                       queries and keys in forward and backward)\n"
        "  --normalization layernorm|rmsnorm, --mlp gelu|swiglu, --ffn-hidden N,\n"
        "  --disable-bias-linear  the trainer's block (default GPT's: layernorm, gelu, 4C, biases;\n"
        "                       under swiglu the trainer's default width, 2/3 of 4C in multiples\n"
        "                       of 64)\n"
        "  --untie-embeddings-and-output-weights   the trainer's: the classifier's own V x C\n"
        "                       matrix (its parameters, gradients and optimizer state)\n"
        "  --add-qkv-bias       with --disable-bias-linear: the qkv projection keeps its bias\n"
        "  --qk-layernorm       QK-norm: every query and key head normalised (by --normalization)\n"
        "                       (the trainer's; Qwen2's block)\n"
        "  --context N          position embedding rows (default: --seq-len)\n"
        "  --attention-window W the trainer's sliding window of the banded layers (default 0:\n"
        "                       causal attention in every layer)\n"
        "  --window-every N     banded layers: l %% N == 0 (default 1: all; needs a window)\n"
        "  --document-length D  the trainer's --document-mask over documents of D tokens each,\n"
        "                       packed from position 0 (default 0: no document mask)\n"
        "  --seq-len T          tokens per sequence\n"
        "  --batch B            sequences per micro-batch and data-parallel rank (default 1)\n"
        "  --accum A            micro-batches per optimizer step (default 1)\n"
        "  --gpus N             ranks (devices) to place dp x pq x pkv on\n"
        "  --cluster FILE       cluster description (costmodel/clusters/*.cluster)\n"
        "  --memory-gb X        memory limit per device in GiB (default: the cluster's)\n"
        "  --top N              rows of the ranked table (default 20)\n"
        "  --overlap 0|1        trainer --overlap (default 1)\n"
        "  --zero 0|1           ZeRO-1 optimizer sharding (default 0)\n"
        "  --optimizer NAME     the trainer's --optimizer: adamw (default), muon (its Newton-Schulz\n"
        "                       GEMMs and scratch on every rank; not with --zero 1) or dist_muon\n"
        "                       (the GEMMs split over the ranks, their results broadcast)\n"
        "  --muon-no-split-qkv  the trainer's: qkv orthogonalized whole (default: Q, K, V apart)\n"
        "  --muon-fp32-matmul-prec P  the trainer's: the Newton-Schulz GEMMs on a GPU from bf16\n"
        "                       (medium, the default), TF32 (high) or fp32 (highest) inputs\n"
        "  --z-loss X           the trainer's: X > 0 adds the z-loss to the step's scalar\n"
        "                       all-reduce (8 bytes)\n"
        "  --log-params-norm    the trainer's: under --zero 1 one more all-reduce of 8 bytes\n"
        "  --train-tokens N     with one configuration: the run's steps (the fewest that train N\n"
        "                       tokens, as the trainer's --train-tokens), its hours at the\n"
        "                       predicted step times and its device-hours\n"
        "  --rampup-batch-tokens 'START INCREMENT TOKENS'   with --train-tokens: the trainer's\n"
        "                       batch-size ramp-up, its smaller steps priced at their\n"
        "                       micro-batches (the full step: batch x seq-len x dp x accum)\n"
        "  --algorithms LIST    comma-separated subset of 2d,2d-overlap,ring,striped,zigzag,\n"
        "                       ulysses,usp (ulysses: where P divides the key/value heads;\n"
        "                       usp: where pq does)\n"
        "  --recompute MODE     the trainer's --recompute: none, selective, full, or auto (default:\n"
        "                       each configuration the cheapest that fits the memory limit, as\n"
        "                       --mesh auto chooses; a single configuration that fits with none\n"
        "                       of them is predicted with full); auto covers the fewest layers\n"
        "                       with which selective or full fits, the faster of the two\n"
        "  --recompute-num-layers N   with --recompute selective or full: the trainer's, the\n"
        "                       first N layers recompute, the others keep everything (0: all)\n"
        "  --dp/--pq/--pkv N --attention A [--keep-kv]   predict this one configuration\n"
        "  --a2a-chunks N|auto  trainer --a2a-chunks: ulysses and usp run their heads in N\n"
        "                       chunks, all-to-alls pipelined with the chunks' computation\n"
        "                       (ranking: only ulysses and usp, where N divides their heads);\n"
        "                       auto: each its fastest count (default: auto when ranking, as\n"
        "                       --mesh auto; 1 for one configuration)\n"
        "  --paper              write DIR/paper_comparison.md and .csv (A100 and H100 clusters)\n"
        "  --a100 FILE, --h100 FILE   clusters of --paper (default costmodel/clusters/...)\n"
        "  --h100-fa2 FILE      --paper's H100 with FlashAttention-2's attention (its second\n"
        "                       compute column; default costmodel/clusters/h100-1pernode-ndr-fa2.cluster)\n"
        "  --validate CSV       predict each measured run of a tools/bench_sweep.sh CSV; write\n"
        "                       DIR/cpu_validation.md, .csv, .png and DIR/bytes_per_rank.png\n"
        "  --out-dir DIR        where --paper and --validate write (default costmodel)\n"
        "  --calibrate          time this machine's kernels (one thread) and write a cluster file\n"
        "  --collectives JSONL  tools/bench_collectives fits: --calibrate's (required), or\n"
        "                       --calibrate-gpu's (optional: e.g. bench_collectives_cuda --comm nccl)\n"
        "  --out FILE           the cluster file --calibrate or --calibrate-gpu writes\n"
        "  --calibrate-gpu REPORT   a GPU kit report (gpu_report.jsonl, or its results/gpu/\n"
        "                       folder): the compute side of a cluster file from its measured\n"
        "                       kernels, the rest from --base FILE\n"
        "  --attention-source ours|sdpa   --calibrate-gpu's attention: our kernels (default) or\n"
        "                       PyTorch's flash SDPA (FlashAttention-2) measured beside them\n"
        "  --validate-gpu REPORT    predict each trainer run of the report on --cluster; write\n"
        "                       DIR/gpu_validation.md and .csv\n",
        gpt_config_preset_names());
}

// --recompute's value: auto, or a mode of model/activations.h.
static int parse_recompute(const char* value) {
    GptRecompute r;
    if (strcmp(value, "auto") == 0) return COST_RECOMPUTE_AUTO;
    if (gpt_recompute_parse(value, &r) != 0)
        fail_msg("--recompute: expected auto, none, selective or full, found '%s'", value);
    return (int)r;
}

static Args parse_args(int argc, char** argv) {
    Args a = {.mode = MODE_RANK, .batch = 1, .accum = 1, .top = 20, .overlap = 1,
              .out_dir = "costmodel", .a100 = "costmodel/clusters/a100-4pernode-hdr.cluster",
              .h100 = "costmodel/clusters/h100-1pernode-ndr.cluster",
              .h100_fa2 = "costmodel/clusters/h100-1pernode-ndr-fa2.cluster",
              .recompute = COST_RECOMPUTE_AUTO, .muon_prec = MUON_PREC_MEDIUM};
    enum { O_PRESET = 256, O_LAYERS, O_CHANNELS, O_HEADS, O_VOCAB, O_CONTEXT, O_SEQ, O_BATCH,
           O_ACCUM, O_GPUS, O_CLUSTER, O_MEMORY, O_TOP, O_OVERLAP, O_ZERO, O_ALGS, O_DP, O_PQ,
           O_PKV, O_ATTENTION, O_KEEP_KV, O_OPTIMIZER, O_PAPER, O_A100, O_H100, O_VALIDATE, O_OUT_DIR,
           O_CALIBRATE, O_COLLECTIVES, O_OUT, O_CALIBRATE_GPU, O_BASE, O_ATTENTION_SOURCE,
           O_VALIDATE_GPU, O_H100_FA2, O_RECOMPUTE, O_WINDOW, O_WINDOW_EVERY, O_DOCUMENT_LENGTH,
           O_CHUNKS, O_KV_HEADS, O_POSITIONS, O_NORM, O_MLP, O_FFN_HIDDEN, O_NO_BIAS, O_UNTIED,
           O_QKV_BIAS, O_QK_NORM, O_MUON_WHOLE_QKV, O_MUON_PREC, O_Z_LOSS, O_PARAMS_NORM,
           O_TRAIN_TOKENS, O_RAMPUP, O_RECOMPUTE_LAYERS,
           O_HELP };
    static const struct option opts[] = {
        {"preset", 1, 0, O_PRESET},       {"layers", 1, 0, O_LAYERS},
        {"channels", 1, 0, O_CHANNELS},   {"heads", 1, 0, O_HEADS},
        {"vocab", 1, 0, O_VOCAB},         {"context", 1, 0, O_CONTEXT},
        {"seq-len", 1, 0, O_SEQ},         {"batch", 1, 0, O_BATCH},
        {"accum", 1, 0, O_ACCUM},         {"gpus", 1, 0, O_GPUS},
        {"cluster", 1, 0, O_CLUSTER},     {"memory-gb", 1, 0, O_MEMORY},
        {"top", 1, 0, O_TOP},             {"overlap", 1, 0, O_OVERLAP},
        {"zero", 1, 0, O_ZERO},           {"algorithms", 1, 0, O_ALGS},
        {"dp", 1, 0, O_DP},               {"pq", 1, 0, O_PQ},
        {"pkv", 1, 0, O_PKV},             {"attention", 1, 0, O_ATTENTION},
        {"keep-kv", 0, 0, O_KEEP_KV},     {"paper", 0, 0, O_PAPER},
        {"optimizer", 1, 0, O_OPTIMIZER}, {"muon-no-split-qkv", 0, 0, O_MUON_WHOLE_QKV},
        {"muon-fp32-matmul-prec", 1, 0, O_MUON_PREC},
        {"z-loss", 1, 0, O_Z_LOSS},       {"log-params-norm", 0, 0, O_PARAMS_NORM},
        {"train-tokens", 1, 0, O_TRAIN_TOKENS}, {"rampup-batch-tokens", 1, 0, O_RAMPUP},
        {"a100", 1, 0, O_A100},           {"h100", 1, 0, O_H100},
        {"validate", 1, 0, O_VALIDATE},   {"out-dir", 1, 0, O_OUT_DIR},
        {"calibrate", 0, 0, O_CALIBRATE}, {"collectives", 1, 0, O_COLLECTIVES},
        {"out", 1, 0, O_OUT},             {"help", 0, 0, O_HELP},
        {"calibrate-gpu", 1, 0, O_CALIBRATE_GPU}, {"base", 1, 0, O_BASE},
        {"attention-source", 1, 0, O_ATTENTION_SOURCE}, {"validate-gpu", 1, 0, O_VALIDATE_GPU},
        {"h100-fa2", 1, 0, O_H100_FA2},   {"recompute", 1, 0, O_RECOMPUTE},
        {"recompute-num-layers", 1, 0, O_RECOMPUTE_LAYERS},
        {"attention-window", 1, 0, O_WINDOW}, {"window-every", 1, 0, O_WINDOW_EVERY},
        {"document-length", 1, 0, O_DOCUMENT_LENGTH}, {"a2a-chunks", 1, 0, O_CHUNKS},
        {"kv-heads", 1, 0, O_KV_HEADS},   {"position-embedding", 1, 0, O_POSITIONS},
        {"normalization", 1, 0, O_NORM},  {"mlp", 1, 0, O_MLP},
        {"ffn-hidden", 1, 0, O_FFN_HIDDEN}, {"disable-bias-linear", 0, 0, O_NO_BIAS},
        {"untie-embeddings-and-output-weights", 0, 0, O_UNTIED},
        {"add-qkv-bias", 0, 0, O_QKV_BIAS}, {"qk-layernorm", 0, 0, O_QK_NORM},
        {0, 0, 0, 0}};
    opterr = 0;
    int which = 0;
    for (int c; (c = getopt_long(argc, argv, ":", opts, &which)) != -1;) {
        const char* flag = opts[which].name;
        switch (c) {
        case O_PRESET: a.preset = optarg; break;
        case O_LAYERS: a.layers = (int)flag_long(flag, optarg, 1, 4096); break;
        case O_CHANNELS: a.channels = (int)flag_long(flag, optarg, 1, 1 << 20); break;
        case O_HEADS: a.heads = (int)flag_long(flag, optarg, 1, 1 << 16); break;
        case O_KV_HEADS: a.kv_heads = (int)flag_long(flag, optarg, 0, 1 << 16); break;
        case O_POSITIONS:
            if (strcmp(optarg, "learned") && strcmp(optarg, "rope"))
                fail_msg("--position-embedding: expected learned or rope, found '%s'", optarg);
            a.rope = !strcmp(optarg, "rope");
            break;
        case O_NORM:
            if ((a.norm = gpt_norm_parse(optarg)) < 0)
                fail_msg("--normalization: expected layernorm or rmsnorm, found '%s'", optarg);
            break;
        case O_MLP:
            if ((a.mlp = gpt_mlp_parse(optarg)) < 0)
                fail_msg("--mlp: expected gelu or swiglu, found '%s'", optarg);
            break;
        case O_FFN_HIDDEN: a.ffn_hidden = (int)flag_long(flag, optarg, 0, 1 << 24); break;
        case O_NO_BIAS: a.no_linear_bias = 1; break;
        case O_UNTIED: a.untied_classifier = 1; break;
        case O_QKV_BIAS: a.qkv_bias = 1; break;
        case O_QK_NORM: a.qk_norm = 1; break;
        case O_VOCAB: a.vocab = (int)flag_long(flag, optarg, 2, 1 << 24); break;
        case O_CONTEXT: a.context = (int)flag_long(flag, optarg, 1, 1 << 30); break;
        case O_SEQ: a.T = flag_long(flag, optarg, 1, 1L << 30); break;
        case O_BATCH: a.batch = (int)flag_long(flag, optarg, 1, 1 << 20); break;
        case O_ACCUM: a.accum = (int)flag_long(flag, optarg, 1, 1 << 20); break;
        case O_GPUS: a.gpus = (int)flag_long(flag, optarg, 1, 1 << 20); break;
        case O_CLUSTER: a.cluster = optarg; break;
        case O_MEMORY: a.memory_gb = flag_double(flag, optarg, 1e-6, 1e9); break;
        case O_TOP: a.top = (int)flag_long(flag, optarg, 1, 1 << 20); break;
        case O_OVERLAP: a.overlap = (int)flag_long(flag, optarg, 0, 1); break;
        case O_ZERO: a.zero = (int)flag_long(flag, optarg, 0, 1); break;
        case O_ALGS: a.algorithms = optarg; break;
        case O_DP: a.dp = (int)flag_long(flag, optarg, 1, 1 << 20); break;
        case O_PQ: a.pq = (int)flag_long(flag, optarg, 1, 1 << 20); break;
        case O_PKV: a.pkv = (int)flag_long(flag, optarg, 1, 1 << 20); break;
        case O_ATTENTION: a.attention = optarg; break;
        case O_KEEP_KV: a.keep_kv = 1; break;
        case O_OPTIMIZER:
            if (strcmp(optarg, "adamw") && strcmp(optarg, "muon") && strcmp(optarg, "dist_muon"))
                fail_msg("--optimizer: expected adamw, muon or dist_muon, found '%s'", optarg);
            a.muon = strcmp(optarg, "adamw") != 0 ? 5 : 0;
            a.muon_split = strcmp(optarg, "dist_muon") == 0;
            break;
        case O_MUON_WHOLE_QKV: a.muon_whole_qkv = 1; break;
        case O_Z_LOSS: a.z_loss = flag_double(flag, optarg, 0, 1e9) > 0; break;
        case O_PARAMS_NORM: a.params_norm = 1; break;
        case O_TRAIN_TOKENS: a.train_tokens = flag_long(flag, optarg, 1, 1000000000000000000L); break;
        case O_RAMPUP: a.rampup = optarg; break;
        case O_MUON_PREC:
            if ((a.muon_prec = muon_matmul_prec(optarg)) < 0)
                fail_msg("--muon-fp32-matmul-prec: expected highest, high or medium, found '%s'",
                         optarg);
            a.muon_prec_given = 1;
            break;
        case O_PAPER: a.mode = MODE_PAPER; break;
        case O_A100: a.a100 = optarg; break;
        case O_H100: a.h100 = optarg; break;
        case O_VALIDATE: a.mode = MODE_VALIDATE, a.csv = optarg; break;
        case O_OUT_DIR: a.out_dir = optarg; break;
        case O_CALIBRATE: a.mode = MODE_CALIBRATE; break;
        case O_COLLECTIVES: a.collectives = optarg; break;
        case O_OUT: a.out = optarg; break;
        case O_CALIBRATE_GPU: a.mode = MODE_CALIBRATE_GPU, a.report = optarg; break;
        case O_BASE: a.base = optarg; break;
        case O_ATTENTION_SOURCE:
            if (strcmp(optarg, "ours") && strcmp(optarg, "sdpa"))
                fail_msg("--attention-source: expected ours or sdpa, found '%s'", optarg);
            a.attention_source = strcmp(optarg, "sdpa") ? ATTENTION_OURS : ATTENTION_SDPA;
            break;
        case O_VALIDATE_GPU: a.mode = MODE_VALIDATE_GPU, a.report = optarg; break;
        case O_H100_FA2: a.h100_fa2 = optarg; break;
        case O_RECOMPUTE: a.recompute = parse_recompute(optarg); break;
        case O_RECOMPUTE_LAYERS: a.recompute_layers = (int)flag_long(flag, optarg, 0, 4096); break;
        case O_WINDOW: a.window = (int)flag_long(flag, optarg, 0, 1 << 30); break;
        case O_WINDOW_EVERY: a.window_every = (int)flag_long(flag, optarg, 1, 4096); break;
        case O_DOCUMENT_LENGTH: a.document_length = flag_long(flag, optarg, 1, 1L << 30); break;
        case O_CHUNKS:
            a.chunks = strcmp(optarg, "auto") == 0
                           ? COST_CHUNKS_AUTO
                           : (int)flag_long(flag, optarg, 1, ULYSSES_MAX_CHUNKS);
            break;
        case O_HELP: usage(); exit(0);
        case ':': fail_msg("%s: missing value (see --help)", argv[optind - 1]);
        default: fail_msg("unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) fail_msg("unexpected argument '%s' (see --help)", argv[optind]);
    if ((a.muon_prec_given || a.muon_whole_qkv) && !a.muon)
        fail_msg("%s: it sets Muon's Newton-Schulz, and --optimizer is adamw; add --optimizer muon "
                 "(or dist_muon), or drop it", a.muon_prec_given ? "--muon-fp32-matmul-prec"
                                                                 : "--muon-no-split-qkv");
    if (a.muon && a.zero)
        fail_msg("--optimizer %s with --zero 1: the trainer refuses it (Muon updates whole "
                 "matrices, which a ZeRO-1 shard cuts through); drop one",
                 a.muon_split ? "dist_muon" : "muon");
    if (a.mode == MODE_RANK && (a.dp || a.pq || a.pkv || a.attention)) a.mode = MODE_PREDICT;
    if (a.train_tokens && a.mode != MODE_PREDICT)
        fail_msg("--train-tokens: expected one configuration to time (--dp, --pq, --pkv, "
                 "--attention), found none");
    if (a.recompute_layers > 0 && a.recompute != GPT_RECOMPUTE_SELECTIVE &&
        a.recompute != GPT_RECOMPUTE_FULL)
        fail_msg("--recompute-num-layers %d: expected --recompute selective or full, whose layers "
                 "it counts, found --recompute %s", a.recompute_layers,
                 a.recompute == COST_RECOMPUTE_AUTO ? "auto" : "none");
    if (a.rampup && !a.train_tokens)
        fail_msg("--rampup-batch-tokens: expected --train-tokens N, the run whose steps it prices, "
                 "found none");
    return a;
}

static Cluster load_cluster(const char* path) {
    if (!path) fail_msg("--cluster: expected a cluster file (costmodel/clusters/*.cluster)");
    Cluster c;
    char err[ERR_LEN];
    if (cluster_load(path, &c, err, sizeof err) != 0) fail_msg("%s", err);
    return c;
}

static CostShape shape_of(const Args* a) {
    if (!a->preset) fail_msg("--preset: expected a model preset (%s)", gpt_config_preset_names());
    GPTConfig cfg;
    if (gpt_config_preset(a->preset, 0, a->vocab, &cfg) != 0)
        fail_msg("--preset: expected one of %s, found '%s'", gpt_config_preset_names(), a->preset);
    CostShape s = {cfg.L, cfg.C, cfg.NH, cfg.V, a->context ? a->context : (int)a->T,
                   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    if (a->layers) s.L = a->layers;
    if (a->channels) s.C = a->channels;
    if (a->heads) s.NH = a->heads;
    if (s.C % s.NH) fail_msg("--channels %d: expected a multiple of --heads %d", s.C, s.NH);
    if (a->kv_heads && s.NH % a->kv_heads)
        fail_msg("--kv-heads: expected a divisor of the %d heads (0: one key/value head per "
                 "head), found %d", s.NH, a->kv_heads);
    s.kv_heads = a->kv_heads < s.NH ? a->kv_heads : 0;   // as many as the heads: no grouping
    s.rope_theta = a->rope ? 10000 : 0;   // theta changes no cost: the trainer's default
    GPTConfig block = {.C = s.C};   // the trainer's defaults (swiglu's width)
    gpt_block_apply(&block, a->norm, a->mlp, a->ffn_hidden, a->no_linear_bias);
    s.norm = block.norm, s.mlp = block.mlp, s.ffn_hidden = block.ffn_hidden;
    s.no_linear_bias = block.no_linear_bias;
    s.untied_classifier = a->untied_classifier;
    if (a->qkv_bias && !a->no_linear_bias)
        fail_msg("--add-qkv-bias: expected --disable-bias-linear with it (without it every linear "
                 "layer has its bias already)");
    s.qkv_bias = a->qkv_bias;
    s.qk_norm = a->qk_norm;
    if (a->window_every && !a->window)
        fail_msg("--window-every %d: expected --attention-window W >= 1 with it, found no window",
                 a->window_every);
    s.window = a->window;
    s.window_every = a->window ? (a->window_every ? a->window_every : 1) : 0;
    const GPTConfig cfg_window = costmodel_gpt_config(&s);
    char err[ERR_LEN];
    if (gpt_config_validate(&cfg_window, err, sizeof err) != 0)
        fail_msg("--attention-window/--window-every: %s", err);
    if (a->recompute_layers > s.L)
        fail_msg("--recompute-num-layers %d: expected at most the model's %d layers (0: every "
                 "layer)", a->recompute_layers, s.L);
    return s;
}

static unsigned parse_algorithms(const char* list) {
    if (!list) return 0;
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const int alg = cost_algorithm_parse(t);
        if (alg < 0)
            fail_msg("--algorithms: expected names from 2d,2d-overlap,ring,striped,zigzag,ulysses,"
                     "usp, found '%s'", t);
        mask |= 1u << alg;
    }
    return mask;
}

// model/config.h's words for the banded layers.
// The window, ", rotary positions" after it under --position-embedding rope, and the block where
// it is not GPT's (", RMSNorm, SwiGLU MLP of 2 x 6784"; GPT's outputs unchanged).
static void window_text(const CostShape* s, char* buf, size_t n) {
    const GPTConfig cfg = costmodel_gpt_config(s);
    gpt_window_text(&cfg, buf, n);
    if (s->rope_theta) strncat(buf, ", rotary positions", n - strlen(buf) - 1);
    if (s->norm || s->mlp || s->ffn_hidden || s->untied_classifier || s->qk_norm) {   // not GPT's
        char block[GPT_BLOCK_TEXT_LEN];
        gpt_block_text(&cfg, block, sizeof block);
        strncat(buf, ", ", n - strlen(buf) - 1);
        strncat(buf, block, n - strlen(buf) - 1);
    }
}

// --document-length D: one sequence of D-token documents (NULL and no starts without it).
static const CostDocuments* documents_of(const Args* a, CostDocuments* docs, int** start) {
    *start = NULL;
    if (!a->document_length) return NULL;
    if (a->document_length > a->T)
        fail_msg("--document-length %ld: expected at most --seq-len %ld (a document within a "
                 "sequence)", a->document_length, a->T);
    *start = xmalloc(sizeof(int) * (size_t)a->T, "document starts");
    costmodel_fixed_documents(a->T, a->document_length, *start);
    *docs = (CostDocuments){.start = *start, .rows = 1, .T = a->T};
    return docs;
}

// The header's words for the documents: "" without them.
static void documents_text(const Args* a, char* buf, size_t n) {
    if (!a->document_length) buf[0] = 0;
    else snprintf(buf, n, ", documents of %ld tokens", a->document_length);
}

// The headers' words for grouped-query attention: `with` around the key/value heads, "" without
// it (outputs of multi-head models unchanged).
static void kv_heads_text(const CostShape* s, const char* before, const char* after, char* buf,
                          size_t n) {
    if (s->kv_heads > 0 && s->kv_heads < s->NH)
        snprintf(buf, n, "%s%d%s", before, s->kv_heads, after);
    else
        buf[0] = 0;
}

static const char* tier_word(Tier t) { return t == TIER_INTER ? "inter" : "intra"; }

static const char* recompute_word(int r) {
    return r == COST_RECOMPUTE_AUTO ? "auto" : gpt_recompute_name((GptRecompute)r);
}

static int mode_rank(const Args* a) {
    if (!a->T || !a->gpus) fail_msg("--seq-len and --gpus: expected both (see --help)");
    const Cluster c = load_cluster(a->cluster);
    CostDocuments docs;
    int* doc_start;
    const CostQuery q = {shape_of(a), a->T, a->batch, a->accum, a->gpus,
                         a->memory_gb * 1073741824.0, a->overlap, a->zero,
                         a->chunks > 1 && !a->algorithms
                             ? 1u << COST_ULYSSES | 1u << COST_USP
                             : parse_algorithms(a->algorithms),
                         a->recompute, documents_of(a, &docs, &doc_start),
                         a->chunks ? a->chunks : COST_CHUNKS_AUTO, a->muon, a->muon_split,
                         a->muon_whole_qkv, a->muon_prec, a->z_loss, a->params_norm,
                         a->recompute_layers};
    CostCandidate* out = xcalloc((size_t)a->top, sizeof *out, "ranked candidates");
    char err[ERR_LEN];
    const int n = costmodel_rank(&q, &c, out, a->top, err, sizeof err);
    if (n < 0) fail_msg("%s", err);
    char window[160], documents[64], kv[48];
    window_text(&q.shape, window, sizeof window);
    documents_text(a, documents, sizeof documents);
    kv_heads_text(&q.shape, " (", " key/value)", kv, sizeof kv);

    printf("%s: L=%d C=%d NH=%d%s V=%d, %s%s, T=%ld, batch %d x accum %d per dp rank, %d ranks on "
           "%s (%d per node); memory limit %.1f GiB; overlap %d, zero %d; recompute %s\n",
           a->preset, q.shape.L, q.shape.C, q.shape.NH, kv, q.shape.V, window, documents, q.T, q.B,
           q.accum,
           q.world, c.name, c.gpus_per_node,
           (q.memory_limit > 0 ? q.memory_limit : c.memory_bytes) / 1073741824.0, q.overlap, q.zero,
           recompute_word(q.recompute));
    if (n == 0) {
        printf("no feasible mesh: every candidate exceeds the memory limit (with recompute %s) "
               "or does not divide T\n", recompute_word(q.recompute));
        free(out);
        free(doc_start);
        return 1;
    }
    printf("%4s %4s %9s %-10s %11s %12s %6s %8s %11s %11s %-9s  %s\n", "rank", "dp", "pq x pkv",
           "attention", "step ms", "tokens/s", "MFU", "mem GiB", "exp.comm ms", "MB/rank",
           "recompute", "why");
    for (int k = 0; k < n && k < a->top; k++) {
        const CostConfig* g = &out[k].config;
        const CostPrediction* p = &out[k].pred;
        char mesh[24];
        snprintf(mesh, sizeof mesh, "%dx%d", g->pq, g->pkv);
        printf("%4d %4d %9s %-10s %11.2f %12.0f %5.1f%% %8.2f %11.2f %11.1f %-9s  %s\n", k + 1,
               g->dp, mesh, cost_algorithm_name(g->alg), 1e3 * p->step_s, p->tokens_per_s,
               100 * p->mfu, p->memory_bytes / 1073741824.0, 1e3 * p->exposed_comm_s,
               p->bytes_per_rank / 1e6, gpt_recompute_name((GptRecompute)g->recompute),
               out[k].reason);
    }
    if (n > a->top) printf("(%d more feasible; --top %d shows them)\n", n - a->top, n);
    free(out);
    free(doc_start);
    return 0;
}

// --rampup-batch-tokens for configuration g (none when not given).
static BatchRampup parse_rampup(const Args* a, const CostConfig* g) {
    const int64_t micro = (int64_t)g->B * g->T * g->dp;
    BatchRampup r;
    char err[ERR_LEN];
    if (batch_rampup_parse(a->rampup, micro, micro * g->accum, 1, &r, err, sizeof err) != 0)
        fail_msg("%s; here a step is batch x seq-len x dp x accum = %lld tokens", err,
                 (long long)(micro * g->accum));
    return r;
}

// The run of --train-tokens on configuration g, whose full step p predicts: the trainer's steps
// (the fewest that train the tokens, a --rampup-batch-tokens ramp's smaller steps counted as they
// train), its hours and device-hours. A step's predicted time is affine in its micro-batches (they
// run one after another; the optimizer, the gradients' exposed wait and the fixed cost come once
// a step), so the run's time is its steps' fixed part plus its micro-batches at the slope between
// the full step and one micro-batch more.
static void print_run(const Args* a, const CostConfig* g, const Cluster* c, double limit,
                      const BatchRampup* r, const CostPrediction* p) {
    const int64_t micro = (int64_t)g->B * g->T * g->dp, total = micro * g->accum;
    char err[ERR_LEN];
    const int64_t steps = batch_rampup_steps_for_tokens(r, a->train_tokens);
    const int64_t trained = batch_rampup_tokens_of_steps(r, 0, steps);
    double run_s = steps * p->step_s;
    if (batch_rampup_on(r)) {
        CostConfig more = *g;
        more.accum = g->accum + 1;
        CostPrediction q;
        if (costmodel_predict_chunks(&more, c, limit, g->recompute, cost_chunks(g), &q, err,
                                     sizeof err) < 0)
            fail_msg("%s", err);
        const double per_micro = q.step_s - p->step_s;
        run_s += per_micro * (double)(trained / micro - steps * (int64_t)g->accum);
        const int64_t ramp_steps = batch_rampup_steps(r);
        const int64_t ramp_tokens = batch_rampup_tokens_of_steps(r, 0, ramp_steps);
        printf("ramp-up         %lld steps of %lld to %lld tokens, %lld tokens in all (%lld "
               "steps of %lld tokens)\n", (long long)ramp_steps, (long long)r->start,
               (long long)(total - r->increment), (long long)ramp_tokens,
               (long long)((ramp_tokens + total - 1) / total), (long long)total);
    }
    const int ranks = g->dp * g->pq * g->pkv;
    const double hours = run_s / 3600;
    printf("run             %ld tokens in %lld steps of %s%lld tokens: %.2f hours on %d "
           "device%s, %.1f device-hours (%.0f tokens/s)\n", a->train_tokens, (long long)steps,
           batch_rampup_on(r) ? "up to " : "", (long long)total, hours, ranks,
           ranks == 1 ? "" : "s", hours * ranks, trained / run_s);
}

static int mode_predict(const Args* a) {
    const Cluster c = load_cluster(a->cluster);
    const int alg = cost_algorithm_parse(a->attention ? a->attention : "2d");
    if (alg < 0)
        fail_msg("--attention: expected 2d, 2d-overlap, ring, striped, zigzag, ulysses or usp, "
                 "found '%s'", a->attention);
    if (!a->T) fail_msg("--seq-len: expected a sequence length");
    CostDocuments docs;
    int* doc_start;
    CostConfig g = {shape_of(a), a->T, a->batch, a->accum, a->dp ? a->dp : 1,
                    a->pq ? a->pq : 1, a->pkv ? a->pkv : 1, (CostAlgorithm)alg,
                    a->overlap, a->zero, a->keep_kv, GPT_RECOMPUTE_NONE,
                    documents_of(a, &docs, &doc_start), 0, a->muon, a->muon_split,
                    a->muon_whole_qkv, a->muon_prec, a->z_loss, a->params_norm,
                    a->recompute_layers};
    const BatchRampup ramp = parse_rampup(a, &g);   // refused before anything is printed
    CostPrediction p;
    char err[ERR_LEN];
    const double limit = a->memory_gb * 1073741824.0;
    const int fits = costmodel_predict_chunks(&g, &c, limit, a->recompute, a->chunks ? a->chunks : 1,
                                              &p, err, sizeof err);
    if (fits < 0) fail_msg("%s", err);
    char window[160], documents[64], kv[64];
    window_text(&g.shape, window, sizeof window);
    documents_text(a, documents, sizeof documents);
    char heads_of[32];
    snprintf(heads_of, sizeof heads_of, " key/value heads of %d", g.shape.NH);
    kv_heads_text(&g.shape, ", ", heads_of, kv, sizeof kv);

    char chunks[48] = "";
    if (cost_chunks(&g) > 1) snprintf(chunks, sizeof chunks, " in %d chunks of heads", g.chunks);
    char layers[48] = "";
    if (g.recompute_layers > 0)
        snprintf(layers, sizeof layers, " on the first %d of %d layers", g.recompute_layers,
                 g.shape.L);
    printf("%s dp %d x pq %d x pkv %d, %s%s, overlap %d, recompute %s%s, %s%s%s on %s\n",
           a->preset, g.dp, g.pq, g.pkv, cost_algorithm_name(g.alg), chunks, g.overlap,
           gpt_recompute_name((GptRecompute)g.recompute), layers, window, documents, kv, c.name);
    printf("step            %10.3f ms   (%.0f tokens/s, MFU %.1f%%)\n", 1e3 * p.step_s,
           p.tokens_per_s, 100 * p.mfu);
    printf("  forward %.3f ms, backward %.3f ms, optimizer %.3f ms, gradient wait %.3f ms\n",
           1e3 * p.forward_s, 1e3 * p.backward_s, 1e3 * p.optimizer_s, 1e3 * p.grad_wait_s);
    printf("compute         %10.3f ms   (attention %.3g GFLOP of %.3g GFLOP per rank)\n",
           1e3 * p.compute_s, p.attention_flops / 1e9, p.flops_per_rank / 1e9);
    char muon_comm[64] = "", muon_bytes[64] = "";
    if (p.muon_bytes > 0) {
        snprintf(muon_comm, sizeof muon_comm, ", dist_muon results %.3f", 1e3 * p.muon_comm_s);
        snprintf(muon_bytes, sizeof muon_bytes, ", dist_muon results %.0f", p.muon_bytes);
    }
    printf("exposed comm    %10.3f ms   (all transfers %.3f ms: attention %.3f, gradients %.3f%s)\n",
           1e3 * p.exposed_comm_s, 1e3 * p.comm_s, 1e3 * p.attention_comm_s, 1e3 * p.grad_comm_s,
           muon_comm);
    printf("bytes per rank  %10.0f      (attention %.0f, gradients and scalars %.0f%s)\n",
           p.bytes_per_rank, p.attention_bytes, p.grad_bytes, muon_bytes);
    printf("  of which backward's recomputed forward kernels %.3f ms (recompute %s%s%s)\n",
           1e3 * p.recompute_s, gpt_recompute_name((GptRecompute)g.recompute), layers,
           a->recompute == COST_RECOMPUTE_AUTO ? ", the cheapest that fits" : "");
    printf("memory          %10.3f GiB per device (%.0f bytes; limit %.4g GiB: %s)\n",
           p.memory_bytes / 1073741824.0, p.memory_bytes,
           (limit > 0 ? limit : c.memory_bytes) / 1073741824.0, fits ? "fits" : "does not fit");
    printf("tiers           row %s, column %s, ring hop %s, gradients %s; slowest rank %.0f pairs\n",
           tier_word(p.row_tier), tier_word(p.col_tier), tier_word(p.ring_tier),
           tier_word(p.world_tier), p.max_pairs);
    const AttentionTile tile = c.attention_tile[0], back = c.attention_tile[1];
    const int tiled = tile.rows * tile.keys > 1 || back.rows * back.keys > 1;
    if (tiled)   // what the forward kernel's tiles compute, priced
        printf("kernel tiles    forward %d x %d, backward %d x %d: the slowest rank's forward "
               "priced as %.0f causal pairs (%.3fx its pairs)\n", tile.rows, tile.keys,
               back.rows, back.keys, p.max_priced, p.max_priced / p.max_pairs);
    if (p.banded_pairs)
        printf("banded layers   slowest rank %.0f pairs (window %d)%s", p.banded_pairs,
               g.shape.window, tiled ? "" : "\n");
    if (p.banded_pairs && tiled)
        printf(", priced as %.0f (%.3fx)\n", p.banded_priced, p.banded_priced / p.banded_pairs);
    if (g.docs)
        printf("documents       %.2f%% of the pairs without the document mask (%ld-token "
               "documents)\n", 100 * p.pair_share, a->document_length);
    if (a->train_tokens) print_run(a, &g, &c, limit, &ramp, &p);
    free(doc_start);
    return 0;
}

int main(int argc, char** argv) {
    const Args a = parse_args(argc, argv);
    switch (a.mode) {
    case MODE_PREDICT: return mode_predict(&a);
    case MODE_PAPER: {
        const Cluster a100 = load_cluster(a.a100), h100 = load_cluster(a.h100),
                      h100_fa2 = load_cluster(a.h100_fa2);
        return report_paper(&a100, &h100, &h100_fa2, a.a100, a.h100, a.h100_fa2, a.out_dir);
    }
    case MODE_VALIDATE: {
        const Cluster c = load_cluster(a.cluster);
        return report_validation(a.csv, &c, a.cluster, a.out_dir);
    }
    case MODE_CALIBRATE_GPU:
        if (!a.base || !a.out)
            fail_msg("--calibrate-gpu: expected --base FILE (the datasheet cluster whose "
                     "interconnect it keeps) and --out FILE");
        return gpu_calibrate(a.report, a.base, a.attention_source, a.collectives, a.out);
    case MODE_VALIDATE_GPU: {
        const Cluster c = load_cluster(a.cluster);
        return report_gpu_validation(a.report, &c, a.cluster, a.out_dir);
    }
    case MODE_CALIBRATE:
        if (!a.collectives || !a.out)
            fail_msg("--calibrate: expected --collectives JSONL and --out FILE");
        return cpu_calibrate(argv, a.collectives, a.out);
    default: return mode_rank(&a);
    }
}
