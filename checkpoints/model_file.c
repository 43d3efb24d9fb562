#include "checkpoints/model_file.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "comm/atomic_file.h"
#include "comm/bf16.h"
#include "model/gpt.h"

enum { HEADER_INTS = 256 };

static int field_error(char* err, size_t errlen, const char* path, const char* field,
                       const char* expected, long found) {
    snprintf(err, errlen, "%s: %s: expected %s, found %ld", path, field, expected, found);
    return -1;
}

int model_file_read_header(const char* path, GPTConfig* cfg, int* version, char* err,
                           size_t errlen) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open model file: %s", path, strerror(errno));
        return -1;
    }
    int32_t h[HEADER_INTS];
    const size_t got = fread(h, sizeof(int32_t), HEADER_INTS, f);
    struct stat st;
    const int stat_ok = fstat(fileno(f), &st) == 0;
    fclose(f);
    if (got != HEADER_INTS) {
        snprintf(err, errlen, "%s: header: expected 1024 bytes, found a file of %zu bytes",
                 path, got * sizeof(int32_t));
        return -1;
    }
    if (h[0] != MODEL_MAGIC) return field_error(err, errlen, path, "magic", "20240326", h[0]);
    if (h[1] != MODEL_VERSION_FP32 && h[1] != MODEL_VERSION_BF16)
        return field_error(err, errlen, path, "version", "3 (fp32) or 5 (bf16)", h[1]);
    const char* names[] = {"max_seq_len", "vocab_size", "num_layers", "num_heads", "channels",
                           "padded_vocab_size"};
    for (int i = 2; i <= 7; i++) {
        if (h[i] <= 0 || h[i] > (1 << 24))
            return field_error(err, errlen, path, names[i - 2], "a value in 1..16777216", h[i]);
    }
    GPTConfig c = {.max_T = h[2], .V = h[3], .L = h[4], .NH = h[5], .C = h[6], .Vp = h[7],
                   .window = h[8], .window_every = h[9], .kv_heads = h[10],
                   .rope_theta = h[11], .rope_scaling = h[12], .rope_original_T = h[14],
                   .norm = h[15], .mlp = h[16], .ffn_hidden = h[17], .no_linear_bias = h[18],
                   .untied_classifier = h[19], .qkv_bias = h[21], .qk_norm = h[22]};
    memcpy(&c.rope_factor, h + 13, 4);
    memcpy(&c.norm_eps, h + 20, 4);
    if (c.C % c.NH != 0)
        return field_error(err, errlen, path, "channels", "a multiple of num_heads", c.C);
    if (c.Vp < c.V)
        return field_error(err, errlen, path, "padded_vocab_size", ">= vocab_size", c.Vp);
    if (c.kv_heads < 0 || c.kv_heads > c.NH || (c.kv_heads > 0 && c.NH % c.kv_heads != 0))
        return field_error(err, errlen, path, "header[10] (key/value heads)",
                           "0 (one per head) or a divisor of num_heads", c.kv_heads);
    if (c.rope_theta < 0 || c.rope_theta == 1 || (c.rope_theta > 0 && (c.C / c.NH) % 2 != 0))
        return field_error(err, errlen, path, "header[11] (rope theta)",
                           "0 (learned positions) or at least 2 with an even head size",
                           c.rope_theta);
    char why[256];
    if (gpt_rope_scaling_validate(&c, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: header[12..14] (rope scaling, factor, original context): %s",
                 path, why);
        return -1;
    }
    if (c.norm != GPT_NORM_LAYERNORM && c.norm != GPT_NORM_RMSNORM)
        return field_error(err, errlen, path, "header[15] (norm)",
                           "0 (layernorm) or 1 (rmsnorm)", c.norm);
    if (c.mlp != GPT_MLP_GELU && c.mlp != GPT_MLP_SWIGLU)
        return field_error(err, errlen, path, "header[16] (mlp)", "0 (gelu) or 1 (swiglu)", c.mlp);
    if (c.no_linear_bias != 0 && c.no_linear_bias != 1)
        return field_error(err, errlen, path, "header[18] (no linear biases)",
                           "0 (biases) or 1 (none)", c.no_linear_bias);
    if (c.untied_classifier != 0 && c.untied_classifier != 1)
        return field_error(err, errlen, path, "header[19] (untied classifier)",
                           "0 (tied to wte) or 1 (its own matrix)", c.untied_classifier);
    if (gpt_block_extras_validate(c.norm_eps, c.no_linear_bias, c.qkv_bias, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: header[20..21] (norm epsilon, qkv bias): %s", path, why);
        return -1;
    }
    if (c.qk_norm != 0 && c.qk_norm != 1)
        return field_error(err, errlen, path, "header[22] (QK-norm)", "0 (none) or 1", c.qk_norm);
    if (c.ffn_hidden < 0 || c.ffn_hidden > (1 << 24))
        return field_error(err, errlen, path, "header[17] (MLP hidden width)",
                           "0 (4 x channels) to 16777216", c.ffn_hidden);
    if (c.window < 0 || c.window > c.max_T)
        return field_error(err, errlen, path, "header[8] (attention window)",
                           "0 (none) to max_seq_len", c.window);
    if (c.window ? c.window_every < 1 || c.window_every > c.L : c.window_every != 0)
        return field_error(err, errlen, path, "header[9] (window every)",
                           c.window ? "1 to num_layers" : "0 without a window", c.window_every);
    // gpt_num_params sums size_t products that wrap for absurd shapes. No tensor has more than
    // max(L C max(W, FC), Vp C, T C) elements (W <= 3C, FC <= 2 x 2^24); at most 2^44 keeps the
    // 17 tensors' sum below 2^48 and its byte count far from overflow (and still far above any
    // real file).
    const double widest = fmax(3.0 * c.C, (double)gpt_fc_width(&c));
    const double largest = fmax((double)c.L * c.C * widest,
                                fmax((double)c.Vp, (double)c.max_T) * c.C);
    if (largest > 0x1p44) {
        snprintf(err, errlen, "%s: shape: expected at most 2^44 elements per tensor, found L=%d "
                 "C=%d Vp=%d T=%d (a corrupt header?)", path, c.L, c.C, c.Vp, c.max_T);
        return -1;
    }
    const long elem = h[1] == MODEL_VERSION_FP32 ? 4 : 2;
    const long want = HEADER_INTS * 4 + (long)gpt_num_params(&c) * elem;
    if (!stat_ok || st.st_size != want) {
        char exp[64];
        snprintf(exp, sizeof exp, "%ld bytes for this header", want);
        return field_error(err, errlen, path, "file size", exp, stat_ok ? (long)st.st_size : -1);
    }
    *cfg = c;
    *version = h[1];
    return 0;
}

int model_file_load(const char* path, const GPTConfig* expect, float* params, char* err,
                    size_t errlen) {
    GPTConfig c;
    int version;
    if (model_file_read_header(path, &c, &version, err, errlen) != 0) return -1;
    if (expect && (expect->max_T != c.max_T || expect->V != c.V || expect->Vp != c.Vp ||
                   expect->L != c.L || expect->NH != c.NH || expect->C != c.C ||
                   gpt_kv_heads(expect) != gpt_kv_heads(&c) || !gpt_same_positions(expect, &c) ||
                   !gpt_same_block(expect, &c))) {
        char want_pos[96], found_pos[96];
        char want_block[GPT_BLOCK_TEXT_LEN], found_block[GPT_BLOCK_TEXT_LEN];
        gpt_position_text(expect, want_pos, sizeof want_pos);
        gpt_position_text(&c, found_pos, sizeof found_pos);
        gpt_block_text(expect, want_block, sizeof want_block);
        gpt_block_text(&c, found_block, sizeof found_block);
        snprintf(err, errlen, "%s: shape: expected T=%d V=%d Vp=%d L=%d NH=%d KV=%d C=%d, %s, %s, "
                 "found T=%d V=%d Vp=%d L=%d NH=%d KV=%d C=%d, %s, %s", path, expect->max_T,
                 expect->V, expect->Vp, expect->L, expect->NH, gpt_kv_heads(expect), expect->C,
                 want_pos, want_block, c.max_T, c.V, c.Vp, c.L, c.NH, gpt_kv_heads(&c), c.C,
                 found_pos, found_block);
        return -1;
    }
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open model file: %s", path, strerror(errno));
        return -1;
    }
    const size_t n = gpt_num_params(&c);
    int ok = fseek(f, HEADER_INTS * 4, SEEK_SET) == 0;
    if (ok && version == MODEL_VERSION_FP32) {
        ok = fread(params, sizeof(float), n, f) == n;
    } else if (ok) {
        // Widen bf16 in chunks so a large model needs no second full-size buffer.
        enum { CHUNK = 1 << 16 };
        uint16_t buf[CHUNK];
        for (size_t i = 0; ok && i < n; i += CHUNK) {
            const size_t k = n - i < CHUNK ? n - i : CHUNK;
            ok = fread(buf, sizeof(uint16_t), k, f) == k;
            for (size_t j = 0; ok && j < k; j++) params[i + j] = bf16_to_float(buf[j]);
        }
    }
    fclose(f);
    if (!ok) {
        snprintf(err, errlen, "%s: parameters: read failed (file changed while reading?)", path);
        return -1;
    }
    // The format has no checksum; a non-finite weight at least is certain corruption.
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(params[i])) {
            snprintf(err, errlen, "%s: parameters: expected finite values, found %g at parameter "
                     "%zu of %zu (file corrupted?)", path, params[i], i, n);
            return -1;
        }
    }
    return 0;
}

int model_file_save(const char* path, const GPTConfig* cfg, const float* params, int version,
                    char* err, size_t errlen) {
    if (version != MODEL_VERSION_FP32 && version != MODEL_VERSION_BF16) {
        snprintf(err, errlen, "%s: version: expected 3 or 5, found %d", path, version);
        return -1;
    }
    int32_t h[HEADER_INTS] = {0};
    h[0] = MODEL_MAGIC;
    h[1] = version;
    h[2] = cfg->max_T;
    h[3] = cfg->V;
    h[4] = cfg->L;
    h[5] = cfg->NH;
    h[6] = cfg->C;
    h[7] = cfg->Vp;
    h[8] = cfg->window;
    h[9] = cfg->window_every;
    h[10] = gpt_kv_heads(cfg) == cfg->NH ? 0 : cfg->kv_heads;   // 0: llm.c's own files
    h[11] = cfg->rope_theta;                                     // 0: learned positions
    h[12] = cfg->rope_scaling;                                   // 0: none
    memcpy(h + 13, &cfg->rope_factor, 4);                        // fp32 bits (0 without scaling)
    h[14] = cfg->rope_original_T;
    h[15] = cfg->norm;                                           // 0: LayerNorm
    h[16] = cfg->mlp;                                            // 0: GELU
    h[17] = cfg->ffn_hidden;                                     // 0: 4C
    h[18] = cfg->no_linear_bias;                                 // 0: biases
    h[19] = cfg->untied_classifier;                              // 0: tied to wte
    memcpy(h + 20, &cfg->norm_eps, 4);                           // fp32 bits (0: 1e-5)
    h[21] = cfg->qkv_bias;                                       // 0: as header[18] says
    h[22] = cfg->qk_norm;                                        // 0: none
    AtomicFile af;
    if (atomic_open(&af, path, err, errlen) != 0) return -1;
    if (atomic_write(&af, h, sizeof h, err, errlen) != 0) return -1;
    const size_t n = gpt_num_params(cfg);
    if (version == MODEL_VERSION_FP32) {
        if (atomic_write(&af, params, n * sizeof(float), err, errlen) != 0) return -1;
    } else {
        enum { CHUNK = 1 << 16 };
        uint16_t buf[CHUNK];
        for (size_t i = 0; i < n; i += CHUNK) {
            const size_t k = n - i < CHUNK ? n - i : CHUNK;
            for (size_t j = 0; j < k; j++) buf[j] = bf16_from_float(params[i + j]);
            if (atomic_write(&af, buf, k * sizeof(uint16_t), err, errlen) != 0) return -1;
        }
    }
    return atomic_commit(&af, err, errlen);
}
