// llm.c's model file: 256 x int32 header (magic 20240326; version 3 = fp32, 5 = bf16; max T, V, L,
// NH, C, Vp) followed by the 16 parameter tensors in order (a 17th: below). Files we write load in
// llm.c and llm.c's files (e.g. gpt2_124M.bin) load here. Two header fields llm.c leaves 0 hold a
// sliding-window model's attention window and its layer pattern (header[8] window, header[9]
// window_every: GPTConfig); llm.c reads such a file as the dense model it is not, so
// build/export_hf refuses it and the README says so. A third, header[10], holds a grouped-query
// attention model's key/value heads (GPTConfig.kv_heads; 0 for one per head, as llm.c writes); such
// a file's qkv tensors are C + 2 kv_heads HS wide, which llm.c cannot read either. A fourth,
// header[11], holds a rotary-position model's theta (GPTConfig.rope_theta; 0 for learned
// positions): such a file has no wpe tensor (0 rows), which llm.c cannot read either; and
// header[12..14] its context-extension scaling (GPTConfig.rope_scaling, rope_factor as fp32 bits,
// rope_original_T; all 0 without). header[15..17] hold the block's form (GPTConfig.norm, mlp,
// ffn_hidden; all 0 for GPT's LayerNorm, GELU and 4C): an RMSNorm file has no ln1b, ln2b, lnfb (0
// elements), a SwiGLU file's fcw and fcb are 2F wide, and both are beyond llm.c; header[18] is 1
// for a model without linear biases (GPTConfig.no_linear_bias: no qkvb, attprojb, fcb, fcprojb);
// header[19] is 1 for an untied classifier (GPTConfig.untied_classifier): a 17th tensor of (Vp, C)
// after lnfb, which llm.c does not read either. header[20] holds the norms' epsilon as fp32 bits
// (GPTConfig.norm_eps; 0 for llm.c's 1e-5) and header[21] is 1 when the qkv projection keeps its
// bias in a model without the others (GPTConfig.qkv_bias: qkvb present, Qwen2's block).
// header[22] is 1 under QK-norm (GPTConfig.qk_norm): four tensors of (L, HS) after the
// classifier's place (qnormw, qnormb, knormw, knormb; no biases under RMSNorm), beyond llm.c.
#pragma once
#include <stddef.h>

#include "model/config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5

// Reads and validates the header (magic, version, value ranges, file size). Returns 0, or -1
// with "PATH: FIELD: expected ..., found ..." in err.
int model_file_read_header(const char* path, GPTConfig* cfg, int* version, char* err,
                           size_t errlen);
// Loads all parameters into params (gpt_num_params(cfg) floats); bf16 files are widened.
// expect, when non-NULL, must match the file's shape.
int model_file_load(const char* path, const GPTConfig* expect, float* params, char* err,
                    size_t errlen);
// Writes atomically; version MODEL_VERSION_FP32 or MODEL_VERSION_BF16 (round to nearest even).
int model_file_save(const char* path, const GPTConfig* cfg, const float* params, int version,
                    char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
