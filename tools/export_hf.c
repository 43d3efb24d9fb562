// export_hf: a model file of this trainer (llm.c's format), or a checkpoint directory's newest
// complete step, as a Hugging Face GPT-2 model directory (checkpoints/hf_export.h) that
// transformers loads with GPT2LMHeadModel.from_pretrained(DIR) and GPT2TokenizerFast or
// GPT2Tokenizer.from_pretrained(DIR); a model with rotary positions as a GPT-NeoX directory
// (GPTNeoXForCausalLM), and one with Llama's block (RMSNorm, SwiGLU, rotary positions, grouped
// key/value heads or not) as a Llama directory (LlamaForCausalLM).
//
//   export_hf --model FILE|CHECKPOINT_DIR --out DIR [--dtype auto|fp32|bf16]
//             [--vocab-dir DIR | --no-tokenizer]
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoints/checkpoint_dir.h"
#include "checkpoints/hf_export.h"
#include "checkpoints/model_file.h"
#include "comm/fail.h"
#include "data/bpe_vocab.h"
#include "model/gpt.h"

typedef struct {
    const char* model;
    const char* out;
    const char* dtype;        // auto, fp32 or bf16
    const char* vocab_dir;
    int vocab_dir_given;      // --vocab-dir on the command line: its size must be the model's
    int no_tokenizer;
} Options;

static void usage(FILE* f) {
    fprintf(f,
        "usage: export_hf --model FILE|CHECKPOINT_DIR --out DIR [options]\n"
        "\n"
        "Writes a Hugging Face GPT-2 model directory (config.json, model.safetensors and the\n"
        "tokenizer's vocab.json, merges.txt, tokenizer_config.json) from a model file of this\n"
        "trainer or llm.c (model_00001000.bin, gpt2_124M.bin), or from a checkpoint directory's\n"
        "newest complete step. transformers loads it with GPT2LMHeadModel.from_pretrained(DIR);\n"
        "a model with rotary positions (--position-embedding rope) is written as GPT-NeoX\n"
        "(GPTNeoXForCausalLM.from_pretrained(DIR)), one with Llama's block as well\n"
        "(--normalization rmsnorm --mlp swiglu) as Llama (LlamaForCausalLM.from_pretrained(DIR)):\n"
        "as Mistral with --attention-window in every layer and no linear biases, as Qwen2 with\n"
        "the qkv projection's bias alone (--disable-bias-linear --add-qkv-bias), as Qwen3 with\n"
        "QK-norm and no linear biases (--disable-bias-linear --qk-layernorm).\n"
        "\n"
        "  --model PATH        a model file, or a trainer's --out-dir (its newest complete step)\n"
        "  --out DIR           the directory to write (created if missing; files replaced\n"
        "                      atomically)\n"
        "  --dtype auto|fp32|bf16   what model.safetensors stores (default auto: the model\n"
        "                      file's, fp32 for version 3, bf16 for version 5)\n"
        "  --vocab-dir DIR     encoder.json and vocab.bpe (default " BPE_DEFAULT_VOCAB_DIR ");\n"
        "                      by default the tokenizer is written when the model has its 50257\n"
        "                      tokens, and skipped with a note otherwise\n"
        "  --no-tokenizer      the model files only\n"
        "  --help              this text\n");
}

static Options parse_options(int argc, char** argv) {
    Options o = {.dtype = "auto", .vocab_dir = BPE_DEFAULT_VOCAB_DIR};
    enum { MODEL = 1000, OUT, DTYPE, VOCAB_DIR, NO_TOKENIZER, HELP };
    static const struct option longopts[] = {
        {"model", required_argument, 0, MODEL},
        {"out", required_argument, 0, OUT},
        {"dtype", required_argument, 0, DTYPE},
        {"vocab-dir", required_argument, 0, VOCAB_DIR},
        {"no-tokenizer", no_argument, 0, NO_TOKENIZER},
        {"help", no_argument, 0, HELP},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case MODEL: o.model = optarg; break;
        case OUT: o.out = optarg; break;
        case DTYPE: o.dtype = optarg; break;
        case VOCAB_DIR: o.vocab_dir = optarg, o.vocab_dir_given = 1; break;
        case NO_TOKENIZER: o.no_tokenizer = 1; break;
        case HELP: usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind < argc) fail_msg("%s: unexpected argument (options are --model, --out, ...)", argv[optind]);
    if (!o.model || !o.model[0]) fail_msg("--model: expected a model file or checkpoint directory, found none");
    if (!o.out || !o.out[0]) fail_msg("--out: expected a directory, found none");
    if (strcmp(o.dtype, "auto") && strcmp(o.dtype, "fp32") && strcmp(o.dtype, "bf16"))
        fail_msg("--dtype: expected auto, fp32 or bf16, found '%s'", o.dtype);
    if (o.no_tokenizer && o.vocab_dir_given) fail_msg("--vocab-dir: not used with --no-tokenizer");
    return o;
}

// The vocabulary checked (bpe_vocab_load) before anything is written, and that it holds the
// model's V tokens; returns its end-of-text id.
static long check_vocab(const char* vocab_dir, const GPTConfig* cfg) {
    BpeVocab vocab;
    char why[ERR_LEN];
    if (bpe_vocab_load(vocab_dir, &vocab, why, sizeof why) != 0) fail_msg("--vocab-dir %s: %s", vocab_dir, why);
    const long V = vocab.table.vocab_size, eot = vocab.table.eot_id;
    bpe_vocab_free(&vocab);
    if (V != cfg->V)
        fail_msg("--vocab-dir %s: expected a vocabulary of the model's %d tokens, found %ld "
                 "(--no-tokenizer exports the model alone)", vocab_dir, cfg->V, V);
    return eot;
}

// A checkpoint directory's newest complete step's model file; a file as it is.
static void resolve_model(const char* model, char* path, size_t n) {
    struct stat st;
    if (stat(model, &st) != 0) fail_msg("--model %s: cannot open: %s", model, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        snprintf(path, n, "%s", model);
        return;
    }
    int step;
    if (checkpoint_complete_steps(model, &step, 1) < 1)
        fail_msg("--model %s: expected a model file or a checkpoint directory with a complete step "
                 "(a DONE_ file), found a directory without one", model);
    checkpoint_model_path(model, step, path, n);
}

int main(int argc, char** argv) {
    const Options o = parse_options(argc, argv);
    char path[4096], err[1024];
    resolve_model(o.model, path, sizeof path);
    GPTConfig cfg;
    int version;
    if (model_file_read_header(path, &cfg, &version, err, sizeof err) != 0) fail_msg("--model: %s", err);
    // GPT-2 and GPT-NeoX blocks are LayerNorm and GELU of 4C; Llama's RMSNorm and SwiGLU of any
    // width, with rotary positions. Any other mixture has no transformers architecture.
    const int llama = cfg.norm == GPT_NORM_RMSNORM && cfg.mlp == GPT_MLP_SWIGLU;
    char block[GPT_BLOCK_TEXT_LEN];
    gpt_block_text(&cfg, block, sizeof block);
    if (!llama && (cfg.norm != GPT_NORM_LAYERNORM || cfg.mlp != GPT_MLP_GELU ||
                   gpt_ffn_hidden(&cfg) != 4 * cfg.C || !gpt_linear_bias(&cfg)))
        fail_msg("--model %s: the block (%s) has no GPT-2, GPT-NeoX or Llama equivalent in Hugging "
                 "Face transformers; expected LayerNorm and a GELU MLP of 4C with linear biases "
                 "(--normalization layernorm --mlp gelu --ffn-hidden 0), or RMSNorm and a SwiGLU "
                 "MLP (--normalization rmsnorm --mlp swiglu)", path, block);
    // LlamaForCausalLM rotates: it has no position table.
    if (llama && !cfg.rope_theta)
        fail_msg("--model %s: the block (%s) with learned positions has no Llama equivalent in "
                 "Hugging Face transformers (LlamaForCausalLM has rotary positions only); expected "
                 "--position-embedding rope", path, block);
    const char* format = llama ? "Llama" : cfg.rope_theta ? "GPT-NeoX" : "GPT-2";
    // transformers' GPT-2, GPT-NeoX and Llama attend every earlier position: a banded model would
    // load and run wrong. Mistral is Llama's block with a window in every layer and no biases.
    const int mistral = llama && cfg.window;
    const int qwen2 = llama && !gpt_linear_bias(&cfg) && gpt_qkv_bias(&cfg);
    // QK-norm is Qwen3's (Qwen3ForCausalLM: Llama's names with q_norm and k_norm, RMSNorm before
    // the rotation); its MLP has no biases and attention_bias covers o_proj too, so no linear
    // biases at all; no window. GPT-2 and GPT-NeoX have none.
    if (cfg.qk_norm && !(llama && !gpt_linear_bias(&cfg) && !gpt_qkv_bias(&cfg) && !cfg.window))
        fail_msg("--model %s: QK-norm with this block (%s%s) has no %s equivalent in Hugging Face "
                 "transformers; expected Qwen3's: RMSNorm, a SwiGLU MLP, rotary positions, no "
                 "linear biases and no window (--normalization rmsnorm --mlp swiglu "
                 "--position-embedding rope --disable-bias-linear --qk-layernorm, no "
                 "--add-qkv-bias or --attention-window)", path, block,
                 cfg.window ? ", a sliding window" : "", llama ? "Qwen3" : format);
    const int qwen3 = llama && cfg.qk_norm;
    if (cfg.window && !(llama && cfg.window_every == 1 && !gpt_qkv_bias(&cfg)))
        fail_msg("--model %s: sliding-window attention (window %d in layers l %% %d = 0) has no "
                 "%s equivalent in Hugging Face transformers; expected a model without "
                 "--attention-window, or Mistral's: Llama's block with the window in every layer "
                 "(--window-every 1) and no linear biases (--disable-bias-linear, no --add-qkv-bias)",
                 path, cfg.window, cfg.window_every, llama && gpt_qkv_bias(&cfg) ? "Mistral" : format);
    // GPT-2's c_attn is 3C wide: grouped-query attention has no GPT2LMHeadModel form either (nor
    // GPT-NeoX's query_key_value); Llama's k_proj and v_proj have num_key_value_heads.
    if (!llama && gpt_kv_heads(&cfg) != cfg.NH)
        fail_msg("--model %s: grouped-query attention (%d key/value heads for %d heads) has no "
                 "%s equivalent in Hugging Face transformers; expected a model without "
                 "--kv-heads, or Llama's block (--normalization rmsnorm --mlp swiglu "
                 "--position-embedding rope)", path, gpt_kv_heads(&cfg), cfg.NH, format);
    const SafetensorsDtype dtype =
        !strcmp(o.dtype, "bf16") || (!strcmp(o.dtype, "auto") && version == MODEL_VERSION_BF16)
            ? SAFETENSORS_BF16 : SAFETENSORS_F32;
    // The default vocabulary is GPT-2's: another model size skips the tokenizer, with a note.
    const int tokenizer = !o.no_tokenizer && (o.vocab_dir_given || cfg.V == GPT2_VOCAB);
    printf("export_hf configuration:\n");
    printf("  model        %s (%s, L=%d C=%d NH=%d V=%d max_T=%d)\n", path,
           version == MODEL_VERSION_BF16 ? "bf16" : "fp32", cfg.L, cfg.C, cfg.NH, cfg.V, cfg.max_T);
    // Rotary positions: GPT-NeoX is transformers' GPT-2 block with rotary positions instead of
    // a table; Llama's block is Llama's (checkpoints/hf_layout.h).
    if (mistral)
        printf("  format       Mistral (MistralForCausalLM: %s, %d key/value heads, sliding window "
               "%d)\n", block, gpt_kv_heads(&cfg), cfg.window);
    else if (llama)
        printf("  format       %s (%s: %s, %d key/value heads)\n",
               qwen2 ? "Qwen2" : qwen3 ? "Qwen3" : "Llama",
               qwen2 ? "Qwen2ForCausalLM" : qwen3 ? "Qwen3ForCausalLM" : "LlamaForCausalLM", block,
               gpt_kv_heads(&cfg));
    else
        printf("  format       %s\n", cfg.rope_theta ? "GPT-NeoX (GPTNeoXForCausalLM: rotary positions)"
                                                      : "GPT-2 (GPT2LMHeadModel)");
    char positions[96];
    gpt_position_text(&cfg, positions, sizeof positions);
    printf("  positions    %s\n", positions);
    printf("  out          %s\n", o.out);
    printf("  dtype        %s\n", safetensors_dtype_name(dtype));
    if (tokenizer) printf("  tokenizer    from %s\n", o.vocab_dir);
    else if (o.no_tokenizer) printf("  tokenizer    none (--no-tokenizer)\n");
    else printf("  tokenizer    none: the model has %d tokens, not GPT-2's %d (--vocab-dir DIR "
                "gives one of its size)\n", cfg.V, GPT2_VOCAB);
    fflush(stdout);

    const long eot_id = tokenizer ? check_vocab(o.vocab_dir, &cfg) : -1;
    const size_t n = gpt_num_params(&cfg);
    float* params = xmalloc(n * sizeof *params, "parameters");
    if (model_file_load(path, &cfg, params, err, sizeof err) != 0) fail_msg("--model: %s", err);
    const HfExportOptions e = {dtype, tokenizer ? o.vocab_dir : NULL, eot_id};
    size_t values = 0;
    if (hf_export(o.out, &cfg, params, &e, &values, err, sizeof err) != 0) fail_msg("%s", err);
    // The padding rows of wte (and of an untied classifier) are not written; a tied GPT-NeoX's
    // embed_out is a second copy of wte's V rows.
    printf("export_hf: wrote %s/model.safetensors (%zu values of the model's %zu parameters, %s) "
           "and config.json%s\n", o.out, values, n, safetensors_dtype_name(dtype),
           tokenizer ? ", vocab.json, merges.txt, tokenizer_config.json" : "");
    free(params);
    return 0;
}
