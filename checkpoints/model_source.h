// What a program may start from: an llm.c model file (checkpoints/model_file.h) or a Hugging Face
// GPT-2 or Llama directory (checkpoints/hf_import.h), told apart by whether the path is a
// directory.
#pragma once
#include <stddef.h>

#include "model/config.h"

// The model's shape, and (kind, when not NULL) what the path holds: "fp32 model file", "bf16
// model file" or "Hugging Face directory". Returns 0, or -1 with one line naming the file in err.
int model_source_config(const char* path, GPTConfig* cfg, const char** kind, char* err,
                        size_t errlen);
// Its parameters (gpt_num_params(expect) floats, llm.c's layout and order), which must have the
// shape `expect`. Returns 0, or -1 with err set.
int model_source_load(const char* path, const GPTConfig* expect, float* params, char* err,
                      size_t errlen);
