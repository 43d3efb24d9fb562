// import_hf: a Hugging Face GPT-2 directory (transformers' save_pretrained of GPT2LMHeadModel or
// GPT2Model, or build/export_hf's) as an llm.c model file, for --init-from, build/generate or
// llm.c; a Llama directory (LlamaForCausalLM or LlamaModel) as a model file of Llama's block
// (checkpoints/hf_import.h).
//
//   import_hf --hf DIR --out FILE [--dtype fp32|bf16]
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/hf_import.h"
#include "checkpoints/model_file.h"
#include "comm/fail.h"
#include "model/gpt.h"

static void usage(FILE* f) {
    fprintf(f,
        "usage: import_hf --hf DIR --out FILE [--dtype fp32|bf16]\n"
        "\n"
        "Reads a Hugging Face GPT-2 or Llama directory (config.json and model.safetensors, F32,\n"
        "BF16 or F16) and writes a model file that --init-from and build/generate load (llm.c\n"
        "too, for GPT-2; a Llama model has RMSNorm, SwiGLU and rotary positions).\n"
        "\n"
        "  --hf DIR            the directory\n"
        "  --out FILE          the model file (written atomically)\n"
        "  --dtype fp32|bf16   the model file's precision (default fp32, version 3; bf16 is\n"
        "                      version 5, rounded to nearest even)\n"
        "  --help              this text\n");
}

int main(int argc, char** argv) {
    const char *dir = NULL, *out = NULL, *dtype = "fp32";
    enum { HF = 1000, OUT, DTYPE, HELP };
    static const struct option longopts[] = {
        {"hf", required_argument, 0, HF},
        {"out", required_argument, 0, OUT},
        {"dtype", required_argument, 0, DTYPE},
        {"help", no_argument, 0, HELP},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case HF: dir = optarg; break;
        case OUT: out = optarg; break;
        case DTYPE: dtype = optarg; break;
        case HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) fail_msg("%s: unexpected argument (options are --hf, --out, --dtype)", argv[optind]);
    if (!dir || !dir[0]) fail_msg("--hf: expected a Hugging Face model directory, found none");
    if (!out || !out[0]) fail_msg("--out: expected a model file to write, found none");
    if (strcmp(dtype, "fp32") && strcmp(dtype, "bf16"))
        fail_msg("--dtype: expected fp32 or bf16, found '%s'", dtype);
    printf("import_hf configuration:\n  hf           %s\n  out          %s\n  dtype        %s\n",
           dir, out, dtype);
    fflush(stdout);
    GPTConfig cfg;
    float* params;
    char err[1024];
    if (hf_import(dir, &cfg, &params, err, sizeof err) != 0) fail_msg("--hf: %s", err);
    const int version = strcmp(dtype, "bf16") ? MODEL_VERSION_FP32 : MODEL_VERSION_BF16;
    if (model_file_save(out, &cfg, params, version, err, sizeof err) != 0) fail_msg("--out: %s", err);
    printf("import_hf: wrote %s (L=%d C=%d NH=%d V=%d, padded to %d, max_T=%d; %zu parameters, %s)\n",
           out, cfg.L, cfg.C, cfg.NH, cfg.V, cfg.Vp, cfg.max_T, gpt_num_params(&cfg), dtype);
    free(params);
    return 0;
}
