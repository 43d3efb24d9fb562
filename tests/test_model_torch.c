// The C half of the whole-model comparison with PyTorch (tests/torch_gpt_ref.py): writes the
// initial weights as an llm.c model file and a batch file, then runs the CPU model on them
// and writes its results: logits, loss, all 17 gradients at the initial weights, and the
// losses and final weights of `steps` AdamW steps with clipping and the LR schedule. With
// --z-loss C the objective adds C * lse^2 per token (the reference's --z-loss C); the losses
// written stay the cross-entropy's.
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attention/attention_layer.h"
#include "comm/atomic_file.h"
#include "checkpoints/model_file.h"
#include "comm/fail.h"
#include "model/backend.h"
#include "model/gpt.h"
#include "model/init.h"
#include "model/optimizer.h"

enum { BATCH_MAGIC = 20261101, RESULTS_MAGIC = 20261102 };

typedef struct {
    const char* name;
    GPTConfig cfg;
    int B, T;
    int boundary;          // document masking: the token that begins a document (0: none)
    int reset_positions;   // 1: positions restart at each document (--reset-position-ids)
} Shape;

// A tiny model with the real GPT-2 vocabulary, one whose T and C are not multiples of any tile
// size (and whose head size is odd), and that one with sliding-window attention of 7 positions in
// layers 0 and 2 (GPT-3's alternating banded and dense layers), and the ragged one with document
// masking (token 5 begins a document; one input in six is a 5), also with the positions counted
// from each document's start; grouped-query attention, 6 heads of 8 over 2 key/value heads, and
// multi-query attention (one key/value head) under a window of 5 in layer 0; rotary positions
// (theta 10000, no wpe) over the ragged shape's positions 0..36 (head size 16: the odd 15 of the
// ragged shape has no pairs), with grouped-query attention, and with positions that restart at
// each document (rotated by the position within the document).
static const Shape shapes[] = {
    {"gpt2vocab", {.max_T = 64, .V = 50257, .Vp = 50304, .L = 2, .NH = 4, .C = 64}, 2, 32, 0, 0},
    {"ragged", {.max_T = 48, .V = 333, .Vp = 384, .L = 3, .NH = 3, .C = 45}, 3, 37, 0, 0},
    {"banded", {.max_T = 48, .V = 333, .Vp = 384, .L = 3, .NH = 3, .C = 45, .window = 7,
                .window_every = 2}, 3, 37, 0, 0},
    {"documents", {.max_T = 48, .V = 333, .Vp = 384, .L = 3, .NH = 3, .C = 45}, 3, 37, 5, 0},
    {"document-positions", {.max_T = 48, .V = 333, .Vp = 384, .L = 3, .NH = 3, .C = 45}, 3, 37, 5, 1},
    {"gqa", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 6, .C = 48, .kv_heads = 2}, 3, 37, 0, 0},
    {"mqa-banded", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 4, .C = 40, .window = 5,
                    .window_every = 2, .kv_heads = 1}, 2, 29, 0, 0},
    {"rope", {.max_T = 48, .V = 333, .Vp = 384, .L = 3, .NH = 3, .C = 48, .rope_theta = 10000},
     3, 37, 0, 0},
    {"rope-gqa", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 6, .C = 48, .kv_heads = 2,
                  .rope_theta = 500000}, 3, 37, 0, 0},
    {"rope-document-positions", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 48,
                                 .rope_theta = 10000}, 3, 37, 5, 1},
    // Context extension from 12 positions x4; theta 50 puts YaRN's ramp mid-head (pair 1 half
    // interpolated) and Llama 3.1's blend on pairs 0-1.
    {"rope-yarn", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 48, .rope_theta = 50,
                   .rope_scaling = ROPE_SCALING_YARN, .rope_factor = 4, .rope_original_T = 12},
     3, 37, 0, 0},
    {"rope-llama3", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 48, .rope_theta = 50,
                     .rope_scaling = ROPE_SCALING_LLAMA3, .rope_factor = 4, .rope_original_T = 12},
     3, 37, 0, 0},
    {"rope-linear-gqa", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 6, .C = 48, .kv_heads = 2,
                         .rope_theta = 10000, .rope_scaling = ROPE_SCALING_LINEAR,
                         .rope_factor = 2.5f, .rope_original_T = 16}, 3, 37, 0, 0},
    // Llama's block options: RMSNorm (no norm biases) with learned positions and GELU; SwiGLU with
    // a hidden width of 40 (fc 80 wide: 40 gate, 40 up columns) under LayerNorm; both with rotary
    // positions and grouped-query attention (6 heads over 2), SwiGLU 128 wide; and GELU with a
    // hidden width of 72, not 4C.
    {"rmsnorm", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 48,
                 .norm = GPT_NORM_RMSNORM}, 3, 37, 0, 0},
    {"swiglu", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 48,
                .mlp = GPT_MLP_SWIGLU, .ffn_hidden = 40}, 3, 37, 0, 0},
    {"llama", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 6, .C = 48, .kv_heads = 2,
               .rope_theta = 10000, .norm = GPT_NORM_RMSNORM, .mlp = GPT_MLP_SWIGLU,
               .ffn_hidden = 128}, 3, 37, 0, 0},
    {"gelu-ffn", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 48, .ffn_hidden = 72},
     3, 37, 0, 0},
    // Linear layers without biases (--disable-bias-linear): Llama's whole block, and GPT's.
    {"llama-nobias", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 6, .C = 48, .kv_heads = 2,
                      .rope_theta = 10000, .norm = GPT_NORM_RMSNORM, .mlp = GPT_MLP_SWIGLU,
                      .ffn_hidden = 128, .no_linear_bias = 1}, 3, 37, 0, 0},
    {"gelu-nobias", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 48,
                     .no_linear_bias = 1}, 3, 37, 0, 0},
    // An untied classifier (--untie-embeddings-and-output-weights): GPT's block, and Llama's
    // whole (Llama 2's and 3's form).
    {"untied", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 48,
                .untied_classifier = 1}, 3, 37, 0, 0},
    {"llama-untied", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 6, .C = 48, .kv_heads = 2,
                      .rope_theta = 10000, .norm = GPT_NORM_RMSNORM, .mlp = GPT_MLP_SWIGLU,
                      .ffn_hidden = 128, .no_linear_bias = 1, .untied_classifier = 1},
     3, 37, 0, 0},
    // Qwen2's block: Llama's without linear biases but the qkv projection's (--add-qkv-bias), the
    // norms' epsilon 1e-6 (--norm-epsilon; the residual stream's mean square is ~1e-3 at
    // initialisation, so 1e-5 instead moves every rstd by ~1%), theta 1000000, a tied classifier;
    // and GPT's LayerNorm with an epsilon of 1e-3.
    {"qwen2", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 6, .C = 48, .kv_heads = 2,
               .rope_theta = 1000000, .norm = GPT_NORM_RMSNORM, .mlp = GPT_MLP_SWIGLU,
               .ffn_hidden = 128, .no_linear_bias = 1, .norm_eps = 1e-6f, .qkv_bias = 1},
     3, 37, 0, 0},
    {"layernorm-eps", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 45,
                       .norm_eps = 1e-3f}, 3, 37, 0, 0},
    // QK-norm (--qk-layernorm): GPT's LayerNorm block with rotary positions (each head's norm
    // weight and bias before the rotation), and Qwen3's block: Qwen2's without the qkv bias, with
    // RMSNorm on every query and key head.
    {"qk-norm", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 3, .C = 48, .rope_theta = 10000,
                 .qk_norm = 1}, 3, 37, 0, 0},
    {"qwen3", {.max_T = 48, .V = 333, .Vp = 384, .L = 2, .NH = 6, .C = 48, .kv_heads = 2,
               .rope_theta = 1000000, .norm = GPT_NORM_RMSNORM, .mlp = GPT_MLP_SWIGLU,
               .ffn_hidden = 128, .no_linear_bias = 1, .norm_eps = 1e-6f, .qk_norm = 1},
     3, 37, 0, 0},
};

static void write_or_die(AtomicFile* af, const void* p, size_t n) {
    char err[ERR_LEN];
    if (atomic_write(af, p, n, err, sizeof err) != 0) fail_msg("%s", err);
}

int main(int argc, char** argv) {
    const char* shape_name = "gpt2vocab";
    const char* dir = "build/tmp/torch";
    int steps = 10;
    double z_loss = 0;
    int muon = 0, muon_whole_qkv = 0, muon_prec = MUON_PREC_HIGHEST, muon_ns_steps = 5;
    static const struct option opts[] = {{"shape", required_argument, 0, 's'},
                                         {"z-loss", required_argument, 0, 'z'},
                                         {"muon", no_argument, 0, 'm'},
                                         {"muon-no-split-qkv", no_argument, 0, 'w'},
                                         {"muon-fp32-matmul-prec", required_argument, 0, 'p'},
                                         {"muon-ns-steps", required_argument, 0, 'k'},
                                         {"out-dir", required_argument, 0, 'o'},
                                         {"steps", required_argument, 0, 'n'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 's') shape_name = optarg;
        else if (c == 'o') dir = optarg;
        else if (c == 'n') steps = atoi(optarg);
        else if (c == 'z') z_loss = atof(optarg);
        else if (c == 'm') muon = 1;
        else if (c == 'w') muon_whole_qkv = 1;
        else if (c == 'p' && (muon_prec = muon_matmul_prec(optarg)) >= 0) continue;
        else if (c == 'k' && (muon_ns_steps = atoi(optarg)) > 0) continue;
        else {
            printf("usage: %s [--shape gpt2vocab|ragged|banded|documents|gqa|rope|llama|...] [--out-dir DIR] [--steps N] [--z-loss C] [--muon [--muon-no-split-qkv] [--muon-fp32-matmul-prec highest|high|medium] [--muon-ns-steps N]]\n", argv[0]);
            return c == 'h' ? 0 : 2;
        }
    }
    const Shape* sh = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (strcmp(shapes[i].name, shape_name) == 0) sh = &shapes[i];
    if (!sh) {
        char names[1024] = "";
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     shapes[i].name);
        fail_msg("--shape: expected one of %s, found '%s'", names, shape_name);
    }
    if (!(z_loss >= 0 && z_loss <= 1)) fail_msg("--z-loss: expected a number in [0, 1], found %g", z_loss);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) fail_msg("%s: cannot create: %s", dir, strerror(errno));

    const GPTConfig cfg = sh->cfg;
    const int B = sh->B, T = sh->T, BT = B * T;
    AttentionLayer* attn = attention_local_create(B, T, cfg.NH, gpt_kv_heads(&cfg), cfg.C / cfg.NH);
    GPT m;
    gpt_create(&m, &cfg, B, T, attn, 1);
    m.z_loss = (float)z_loss;
    gpt_init_params(&cfg, 1337, GPT_INIT_STD, m.params_memory);
    // GPT-2's init leaves biases at 0 and LayerNorm weights at 1, which would hide a bias or
    // LayerNorm-parameter bug: perturb every parameter slightly (deterministically).
    for (size_t i = 0; i < m.num_params; i++)
        m.params_memory[i] += (float)(0.02 * counter_normal(99, 0, i));
    for (size_t i = (size_t)cfg.V * cfg.C; i < m.param_sizes[0]; i++) m.params_memory[i] = 0;
    for (size_t i = (size_t)cfg.V * cfg.C; i < m.param_sizes[16]; i++) m.params.classifier[i] = 0;

    char path[4096], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    if (model_file_save(path, &cfg, m.params_memory, MODEL_VERSION_FP32, err, sizeof err) != 0)
        fail_msg("%s", err);

    int32_t* inputs = xmalloc(sizeof(int32_t) * BT, "inputs");
    int32_t* targets = xmalloc(sizeof(int32_t) * BT, "targets");
    for (int i = 0; i < BT; i++) {
        inputs[i] = (int32_t)(counter_bits(5, 0, i) % (uint64_t)cfg.V);
        targets[i] = (int32_t)(counter_bits(5, 1, i) % (uint64_t)cfg.V);
        if (sh->boundary && counter_bits(5, 2, i) % 6 == 0) inputs[i] = sh->boundary;
    }
    int32_t header[256] = {0};
    header[0] = BATCH_MAGIC;
    header[1] = 1;
    header[2] = B;
    header[3] = T;
    header[4] = sh->boundary;          // (0: no document mask)
    header[5] = sh->reset_positions;   // (1: positions within documents)
    AtomicFile af;
    snprintf(path, sizeof path, "%s/batch.bin", dir);
    if (atomic_open(&af, path, err, sizeof err) != 0) fail_msg("%s", err);
    write_or_die(&af, header, sizeof header);
    write_or_die(&af, inputs, sizeof(int32_t) * BT);
    write_or_die(&af, targets, sizeof(int32_t) * BT);
    if (atomic_commit(&af, err, sizeof err) != 0) fail_msg("%s", err);

    // Results: header, logits, loss, gradients, step losses, final weights.
    snprintf(path, sizeof path, "%s/results.bin", dir);
    if (atomic_open(&af, path, err, sizeof err) != 0) fail_msg("%s", err);
    memset(header, 0, sizeof header);
    const int32_t fields[] = {RESULTS_MAGIC, 1, B, T, cfg.V, cfg.Vp, cfg.L, cfg.NH, cfg.C,
                              cfg.max_T, steps};
    memcpy(header, fields, sizeof fields);
    write_or_die(&af, header, sizeof header);

    const LRSchedule sched = {.lr = 1e-3, .warmup_steps = 3, .total_steps = steps,
                              .final_frac = 0.1};
    const AdamWConfig opt = {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    float* mom = xcalloc(m.num_params, sizeof(float), "adam m");
    float* vel = xcalloc(m.num_params, sizeof(float), "adam v");
    // --muon: the backend's optimizer with Muon for the hidden matrices (Nesterov, Moonlight's
    // 0.2 x spectral scale, Q, K and V apart unless --muon-no-split-qkv, fp32 GEMMs unless
    // --muon-fp32-matmul-prec), as torch_gpt_ref.py --muon computes it.
    const MuonConfig muon_cfg = {.momentum = 0.95, .nesterov = 1, .ns_steps = muon_ns_steps,
                                 .scale_mode = MUON_SCALE_SPECTRAL, .extra_scale = 0.2,
                                 .split_qkv = !muon_whole_qkv,
                                 .matmul_prec = (MuonMatmulPrec)muon_prec};
    Optimizer* optimizer = muon ? optimizer_create(&m, 0, m.num_params, &muon_cfg) : NULL;
    float* losses = xmalloc(sizeof(float) * (steps ? steps : 1), "losses");
    for (int s = 0; s < steps || s == 0; s++) {
        gpt_zero_grad(&m);
        gpt_loss_zero(&m);
        if (sh->boundary) gpt_set_documents(&m, inputs, T, sh->boundary, sh->reset_positions);
        gpt_forward(&m, inputs, targets);
        // The logits before the backward overwrites them with their gradient.
        if (s == 0) write_or_die(&af, m.acts.logits, sizeof(float) * BT * cfg.Vp);
        gpt_backward(&m, 1.0 / BT);   // the classifier's one pass computes the loss too
        const float loss = (float)(gpt_loss_read(&m) / BT);
        if (s < steps) losses[s] = loss;
        if (s == 0) {
            write_or_die(&af, &loss, sizeof loss);
            write_or_die(&af, m.grads_memory, sizeof(float) * m.num_params);
        }
        if (s >= steps) break;
        const double norm = sqrt(grad_sum_squares(m.grads_memory, m.num_params));
        const double scale = clip_factor(norm, 1.0);
        if (optimizer) optimizer_step(optimizer, &m, s + 1, lr_at_step(&sched, s), &opt, &scale);
        else adamw_update(&cfg, m.params_memory, m.grads_memory, mom, vel, 0, m.num_params, s + 1,
                          lr_at_step(&sched, s), &opt, scale);
        printf("step %2d loss %.6f grad norm %.4f lr %.3e\n", s, loss, norm,
               lr_at_step(&sched, s));
    }
    write_or_die(&af, losses, sizeof(float) * steps);
    write_or_die(&af, m.params_memory, sizeof(float) * m.num_params);
    if (atomic_commit(&af, err, sizeof err) != 0) fail_msg("%s", err);
    printf("wrote %s/{model,batch,results}.bin (shape %s: B=%d T=%d V=%d L=%d NH=%d C=%d)\n",
           dir, sh->name, B, T, cfg.V, cfg.L, cfg.NH, cfg.C);
    optimizer_free(optimizer);
    free(mom); free(vel); free(losses); free(inputs); free(targets);
    gpt_free(&m);
    attention_layer_free(attn);
    return 0;
}
