#include "train/options.h"

#include "attention/dist_attention.h"
#include "comm/comm.h"
#include "model/backend.h"
#include "model/init.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OPT_INT, OPT_LONG, OPT_DOUBLE, OPT_STRING, OPT_FLAG } OptType;

typedef struct {
    const char* name;
    OptType type;
    size_t offset;
    double min, max;       // inclusive bounds for numbers
    const char* choices;   // '|'-separated allowed strings, or NULL
    const char* help;
} OptSpec;

#define F(field) offsetof(TrainOptions, field)
static const OptSpec specs[] = {
    {"preset", OPT_STRING, F(preset), 0, 0, NULL, "model preset (gpt3-125m ... gpt3-175b, d12..d48, tiny, small)"},
    {"layers", OPT_INT, F(layers), 0, 1024, NULL, "override the preset's layers (0 = preset)"},
    {"channels", OPT_INT, F(channels), 0, 1 << 16, NULL, "override the preset's channels"},
    {"heads", OPT_INT, F(heads), 0, 4096, NULL, "override the preset's heads"},
    {"kv-heads", OPT_INT, F(kv_heads), 0, 4096, NULL, "grouped-query attention: this many key/value heads, a divisor of the heads, each shared by heads / N consecutive query heads (Megatron-LM's --num-query-groups; 1 = multi-query attention): the qkv projection narrows to C + 2 N C / heads, and every sequence-parallel schedule moves N / heads of the K/V bytes (ulysses and usp need N divisible by their all-to-all ranks); 0 = one per head (default; GPT-2 and GPT-3), as the --init-from model's"},
    {"position-embedding", OPT_STRING, F(position_embedding), 0, 0, "learned|rope", "how the model knows positions: learned (GPT-2's and GPT-3's table of --context rows added to the token embeddings; the default, or the --init-from model's) or rope (rotary embeddings, Su et al. 2021, in GPT-NeoX's and Llama's half-split layout, Megatron-LM's --position-embedding-type rope: every query and key head rotated by its token's position after the qkv projection; no position table, so C x --context fewer parameters)"},
    {"rope-theta", OPT_INT, F(rope_theta), 2, 2147483647, NULL, "--position-embedding rope: the rotation base theta (Megatron-LM's --rotary-base; pair i of a head turns by position / theta^(2i/head size)); with --init-from of a rotary model it replaces the file's (a larger base for context extension)"},
    {"rope-scaling", OPT_STRING, F(rope_scaling), 0, 0, "none|linear|yarn|llama3", "context extension of rotary positions, Hugging Face's rope_scaling types: linear (position interpolation, Chen et al. 2023: every frequency divided by the factor), yarn (Peng et al. 2023: the frequencies that turn less than once over the original context divided by the factor, those that turn 32 times or more kept, a ramp between, and queries and keys scaled by 0.1 ln(factor) + 1) or llama3 (Llama 3.1's: wavelengths above the original context interpolated, below a quarter of it kept); none (the default, or the --init-from model's) removes it"},
    {"rope-scaling-factor", OPT_DOUBLE, F(rope_scaling_factor), 0, 65536, NULL, "--rope-scaling's factor, at least 1 (Megatron-LM's --rope-scaling-factor; 0 = --context / --rope-original-context)"},
    {"rope-original-context", OPT_INT, F(rope_original_context), 0, 1 << 22, NULL, "--rope-scaling: the context the model's frequencies were trained at (0 = the --init-from model's context, or its own original context when it is already scaled)"},
    {"normalization", OPT_STRING, F(normalization), 0, 0, "layernorm|rmsnorm", "the block's normalisation (Megatron-LM's --normalization): layernorm (GPT-2's and GPT-3's: mean and variance, weight and bias; the default) or rmsnorm (Llama's, Zhang and Sennrich 2019: x / sqrt(mean(x^2) + eps) * weight, no mean, no bias; eps: --norm-epsilon)"},
    {"mlp", OPT_STRING, F(mlp), 0, 0, "gelu|swiglu", "the block's MLP: gelu (GPT's: C -> hidden, GELU, -> C; the default) or swiglu (Llama's, Shazeer 2020, Megatron-LM's --swiglu: C -> 2 x hidden, silu(gate) * up, -> C)"},
    {"ffn-hidden", OPT_INT, F(ffn_hidden), 0, 1 << 24, NULL, "the MLP's hidden width (Megatron-LM's --ffn-hidden-size; 0 = 4 x channels, or under --mlp swiglu Megatron's 2/3 of it rounded down to a multiple of 64: about the parameters of the GELU MLP)"},
    {"disable-bias-linear", OPT_FLAG, F(disable_bias_linear), 0, 1, NULL, "linear layers without biases (Megatron-LM's --disable-bias-linear; Llama's): no bias in the qkv (unless --add-qkv-bias), output, fc and fcproj projections"},
    {"norm-epsilon", OPT_DOUBLE, F(norm_epsilon), 0, 0.1, NULL, "the norms' epsilon, rstd = 1 / sqrt(variance or mean square + epsilon) (Megatron-LM's --norm-epsilon, transformers' rms_norm_eps; Qwen2's and Llama 1's 1e-6), stored in the model file as fp32"},
    {"add-qkv-bias", OPT_FLAG, F(add_qkv_bias), 0, 1, NULL, "with --disable-bias-linear: the qkv projection keeps its bias (Megatron-LM's --add-qkv-bias; Qwen2's block)"},
    {"qk-layernorm", OPT_FLAG, F(qk_layernorm), 0, 1, NULL, "QK-norm (Megatron-LM's --qk-layernorm; OLMo's, Qwen3's and Gemma 3's, against attention logit growth): every query and key head normalised over its head size after the qkv projection and before the rotary embedding, by the block's --normalization (LayerNorm: a weight and a bias of head size; RMSNorm: a weight), one for the queries and one for the keys per layer, shared by the heads"},
    {"untie-embeddings-and-output-weights", OPT_FLAG, F(untie_embeddings), 0, 1, NULL, "the classifier gets its own vocabulary x channels matrix instead of the token embedding's transpose (Megatron-LM's flag of this name; Llama's and GPT-NeoX's): V x C more parameters; llm.c and GPT-2 tie them"},
    {"attention-window", OPT_INT, F(attention_window), 0, 1 << 22, NULL, "sliding-window (banded) attention, as GPT-3's locally banded layers: a query at position t sees only t-W+1..t in the banded layers (0 = none: every earlier position; default: none, or the --init-from model's)"},
    {"window-every", OPT_INT, F(window_every), 1, 1024, NULL, "which layers are banded under --attention-window: layer l when l % N == 0 (1 = all; 2 = 0, 2, 4, ... alternating with dense layers, as GPT-3)"},
    {"document-mask", OPT_STRING, F(document_mask), 0, 0, NULL, "document masking of packed sequences: a document begins at each occurrence of a boundary token and a query sees only the keys of its own document (Megatron's --reset-attention-mask): none, eot (GPT-2's <|endoftext|>, 50256, which llm.c's shards put before every document) or a token id"},
    {"reset-position-ids", OPT_FLAG, F(reset_position_ids), 0, 1, NULL, "with --document-mask: a token's position embedding is its position within its document, counted from 0 at the boundary token, not within the sequence (Megatron's --reset-position-ids)"},
    {"context", OPT_INT, F(context), 0, 1 << 22, NULL, "context length: the position table's rows, or with rotary positions only the longest sequence (0 = the preset's, or the --init-from model's; a rotary model's may be changed: context extension)"},
    {"vocab", OPT_INT, F(vocab), 0, 1 << 24, NULL, "vocabulary size (0 = GPT-2's 50257)"},
    {"init-from", OPT_STRING, F(init_from), 0, 0, NULL, "start from an llm.c model file, or a Hugging Face GPT-2 or Llama directory (config.json, model.safetensors), instead of a seeded init"},
    {"seed", OPT_LONG, F(seed), 0, 9.2e18, NULL, "seed of the initialisation, data order and sampling"},
    {"init-std", OPT_DOUBLE, F(init_std), 1e-6, 1, NULL, "the seeded initialisation's standard deviation of the weights (Megatron-LM's --init-method-std): embeddings and matrices N(0, X^2), the residual output projections (attention's and the MLP's) N(0, (X / sqrt(2 layers))^2), biases 0, norm weights 1; 0.02 is GPT-2's and GPT-3's small models', Megatron-LM's GPT-3 175B used 0.006; not with --init-from"},
    {"train-data", OPT_STRING, F(train_data), 0, 0, NULL, "training shards: a glob pattern of llm.c .bin files, or a blend of several read in fixed proportions, WEIGHT PATTERN pairs as Megatron-LM's --data-path (e.g. '0.7 web_train_*.bin 0.3 code_train_*.bin': weights normalised, each pattern its own epochs and order)"},
    {"val-data", OPT_STRING, F(val_data), 0, 0, NULL, "validation shards: a glob pattern, or weights and patterns as --train-data takes them ('0.7 A 0.3 B'), each set evaluated on its own --eval-batches and logged, the val loss their weighted mean; empty = no evaluation"},
    {"tokenizer", OPT_STRING, F(tokenizer), 0, 0, NULL, "llm.c tokenizer file, or a tokenizer.json or its directory, for decoding samples (empty = print ids)"},
    {"batch", OPT_INT, F(batch), 1, 1 << 20, NULL, "micro-batch: sequences per data-parallel rank"},
    {"seq-len", OPT_INT, F(seq_len), 1, 1 << 22, NULL, "tokens per sequence"},
    {"total-batch-tokens", OPT_LONG, F(total_batch_tokens), 0, 1e15, NULL, "tokens per optimizer step (0 = batch*seq-len*dp; must be a multiple of it)"},
    {"rampup-batch-tokens", OPT_STRING, F(rampup_batch_tokens), 0, 0, NULL, "batch-size ramp-up, as GPT-3 trained (Megatron-LM's --rampup-batch-size, in tokens): 'START INCREMENT TOKENS' trains steps of START tokens first and INCREMENT more after each n-th of the first TOKENS trained tokens (n = (--total-batch-tokens - START) / INCREMENT), --total-batch-tokens from then on; START and INCREMENT multiples of batch*seq-len*dp; --steps counts the smaller steps too; '' = none"},
    {"steps", OPT_INT, F(steps), 1, 1e9, NULL, "optimizer steps"},
    {"train-tokens", OPT_LONG, F(train_tokens), 0, 1e18, NULL, "the run's length in trained tokens instead of --steps (Megatron-LM's --train-samples, in tokens; GPT-3's 300 billion): the fewest steps that train at least N tokens, the smaller steps of a --rampup-batch-tokens ramp counted as they train; 0 = --steps"},
    {"eval-only", OPT_FLAG, F(eval_only), 0, 1, NULL, "no training: the validation loss of --init-from's model file or of --resume's newest checkpoint in --out-dir on --val-data (--eval-batches micro-batches, any mesh) and its --mc-eval accuracy, printed and logged; --train-data is not read"},
    {"lr", OPT_DOUBLE, F(lr), 0, 10, NULL, "peak learning rate"},
    {"warmup", OPT_INT, F(warmup), -1, 1e9, NULL, "linear warmup steps (-1 = warmup-frac of steps)"},
    {"warmup-frac", OPT_DOUBLE, F(warmup_frac), 0, 1, NULL, "warmup as a fraction of steps when --warmup is -1"},
    {"lr-decay-tokens", OPT_LONG, F(lr_decay_tokens), 0, 1e18, NULL, "the schedule in trained tokens instead of steps (Megatron-LM's --lr-decay-samples, in tokens; GPT-3's 260000000000): --lr-schedule's decay ends after this many trained tokens, --final-lr-frac of --lr from then on; a step's rate is that of the tokens trained once it is done; with --lr-schedule constant it only bounds --lr-warmup-tokens (0 = the schedule counts steps, to --steps)"},
    {"lr-warmup-tokens", OPT_LONG, F(lr_warmup_tokens), 0, 1e18, NULL, "with --lr-decay-tokens: linear warmup over the first N trained tokens (Megatron-LM's --lr-warmup-samples, in tokens; GPT-3's 375000000), instead of --warmup steps"},
    {"lr-schedule", OPT_STRING, F(lr_schedule), 0, 0, "cosine|linear|constant|wsd|inverse-sqrt", "after the warmup: cosine or linear decay to the floor, constant, wsd (warmup-stable-decay: --lr until the last --decay-frac of the steps, then --wsd-decay-style to the floor), or inverse-sqrt (--lr x sqrt(warmup / step), at least the floor); over --steps, or under --lr-decay-tokens over trained tokens (inverse-sqrt: the floor after them)"},
    {"final-lr-frac", OPT_DOUBLE, F(final_lr_frac), 0, 1, NULL, "the decay's floor as a fraction of --lr (not --lr-schedule constant)"},
    {"decay-frac", OPT_DOUBLE, F(decay_frac), 0, 1, NULL, "--lr-schedule wsd: the decay's share of the steps (under --lr-decay-tokens, the tokens) after warmup"},
    {"wsd-decay-style", OPT_STRING, F(wsd_decay_style), 0, 0, "linear|cosine|exponential|minus-sqrt", "--lr-schedule wsd: the decay's form over its share r = 0..1 (Megatron-LM's --lr-wsd-decay-style): linear 1 - r, cosine, exponential 2 x 0.5^r - 1, minus-sqrt 1 - sqrt(r) (Megatron's minus_sqrt), from --lr to the floor"},
    {"weight-decay", OPT_DOUBLE, F(weight_decay), 0, 10, NULL, "decoupled weight decay, lr x this x the weight each step (AdamW's; under --optimizer muon its matrices' too): matrices and embeddings only"},
    {"grad-clip", OPT_DOUBLE, F(grad_clip), 0, 1e6, NULL, "global gradient-norm clip (0 = off)"},
    {"z-loss", OPT_DOUBLE, F(z_loss), 0, 1, NULL, "PaLM's z-loss: the training objective adds this coefficient times each token's squared log-sum-exp of its logits, so that the softmax's normalizer stays near 1 (PaLM's 1e-4); the logged loss stays the cross-entropy, the z-loss is logged beside it (0 = off)"},
    {"optimizer", OPT_STRING, F(optimizer), 0, 0, "adamw|muon|dist_muon", "adamw (GPT-3's: every tensor), or muon (Megatron-LM's --optimizer muon; Jordan et al. 2024, Moonlight): the hidden layers' matrices (qkv, attention output, fc, fc projection) by momentum orthogonalized with Newton-Schulz iterations, the embeddings, classifier, norms and biases by AdamW, one --lr and --weight-decay; keeps its whole state on every rank (the matrices' momentum alone, AdamW's two moments of the rest), so not with --zero 1 (as Megatron-LM's); dist_muon (Megatron-LM's name): muon with the Newton-Schulz iterations split over the ranks, each orthogonalizing a share of the matrices, keeping only their momenta and broadcasting the results, the same results and checkpoints bit for bit"},
    {"muon-momentum", OPT_DOUBLE, F(muon_momentum), 0, 0.999999, NULL, "--optimizer muon or dist_muon: the momentum's beta, an average of the gradients (Megatron-LM's --muon-momentum)"},
    {"muon-use-nesterov", OPT_FLAG, F(muon_nesterov), 0, 1, NULL, "--optimizer muon or dist_muon: Nesterov's momentum, (1 - beta) g + beta m orthogonalized instead of m (Megatron-LM's --muon-use-nesterov; Keller Jordan's default)"},
    {"muon-no-split-qkv", OPT_FLAG, F(muon_no_split_qkv), 0, 1, NULL, "--optimizer muon or dist_muon: orthogonalize each layer's qkv matrix whole (Megatron-LM's --muon-no-split-qkv); by default its Q, K and V rows apart, each scaled by its own shape (Megatron-LM's default --muon-split-qkv)"},
    {"muon-num-ns-steps", OPT_INT, F(muon_ns_steps), 1, 100, NULL, "--optimizer muon or dist_muon: Newton-Schulz iterations, each three GEMMs of the matrix's size (Megatron-LM's --muon-num-ns-steps)"},
    {"muon-scale-mode", OPT_STRING, F(muon_scale_mode), 0, 0, "spectral|shape_scaling|unit_rms_norm", "--optimizer muon or dist_muon: the orthogonalized update's scale for a rows x cols matrix (Megatron-LM's --muon-scale-mode): spectral sqrt(max(rows, cols)), shape_scaling sqrt(max(1, rows / cols)) (Keller Jordan's), unit_rms_norm sqrt(rows / cols)"},
    {"muon-fp32-matmul-prec", OPT_STRING, F(muon_matmul_prec), 0, 0, "highest|high|medium", "--optimizer muon or dist_muon: the Newton-Schulz GEMMs' precision on their fp32 buffers (Megatron-LM's --muon-fp32-matmul-prec, PyTorch's float32 matmul precision): highest fp32 products, high the inputs rounded to TF32, medium to bf16 (Megatron-LM's default and the original Muon's), summed in fp32; on a GPU cuBLAS's fp32 cores, TF32 or bf16 tensor cores, on the CPU the same rounding before fp32 GEMMs (the GPU's numerics, not its speed)"},
    {"muon-extra-scale-factor", OPT_DOUBLE, F(muon_extra_scale), 1e-6, 1000, NULL, "--optimizer muon or dist_muon: multiplies --muon-scale-mode's factor (Megatron-LM's --muon-extra-scale-factor; Moonlight's 0.2 with spectral gives updates of AdamW's RMS, so AdamW's --lr and --weight-decay carry over)"},
    {"beta1", OPT_DOUBLE, F(beta1), 0, 0.999999, NULL, "AdamW beta1"},
    {"beta2", OPT_DOUBLE, F(beta2), 0, 0.999999, NULL, "AdamW beta2"},
    {"eps", OPT_DOUBLE, F(eps), 1e-30, 1, NULL, "AdamW epsilon"},
    {"eval-every", OPT_INT, F(eval_every), 0, 1e9, NULL, "validation loss and --mc-eval accuracy every k steps (0 = only at the end)"},
    {"eval-positions", OPT_INT, F(eval_positions), 0, 256, NULL, "the validation loss also in this many equal ranges of positions in the sequence (0 = off), printed and logged with each evaluation: whether the model uses its context, e.g. past the original context after --rope-scaling (tools/plot_positions.sh draws it)"},
    {"eval-batches", OPT_INT, F(eval_batches), 1, 1e9, NULL, "validation micro-batches per evaluation, in all: the first N of the validation set (all of it if shorter), the same on every mesh; the dp ranks split them, the first N mod dp ranks taking one more"},
    {"mc-eval", OPT_STRING, F(mc_eval), 0, 0, NULL, "multiple-choice eval file in llm.c's format (llm.c's hellaswag_val.bin, or build/tokenize_mc's): accuracy with every validation loss, '' = none"},
    {"mc-eval-examples", OPT_INT, F(mc_eval_examples), 0, 1 << 30, NULL, "the first N examples of --mc-eval (0 = all); each costs one forward row of --seq-len tokens per completion"},
    {"sample-every", OPT_INT, F(sample_every), 0, 1e9, NULL, "generate a sample every k steps (0 = only at the end)"},
    {"sample-length", OPT_INT, F(sample_length), 0, 1 << 20, NULL, "tokens per sample (0 = no sampling)"},
    {"sample-prompt", OPT_STRING, F(sample_prompt), 0, 0, NULL, "sample prompt as comma-separated token ids (empty = end-of-text)"},
    {"temperature", OPT_DOUBLE, F(temperature), 1e-6, 100, NULL, "sampling temperature"},
    {"top-k", OPT_INT, F(top_k), 0, 1 << 24, NULL, "sample from the k most likely tokens (0 = all)"},
    {"out-dir", OPT_STRING, F(out_dir), 0, 0, NULL, "directory for checkpoints and the log"},
    {"checkpoint-every", OPT_INT, F(checkpoint_every), 0, 1e9, NULL, "write a checkpoint every k steps (0 = only at the end)"},
    {"keep-last", OPT_INT, F(keep_last), 1, 1e6, NULL, "keep the newest K checkpoints"},
    {"keep-every", OPT_INT, F(keep_every), 0, 1e9, NULL, "also keep every checkpoint whose step is a multiple of M (0 = none)"},
    {"exit-after", OPT_INT, F(exit_after), 0, 1e9, NULL, "stop with a checkpoint after N steps of this run (0 = never)"},
    {"exit-after-minutes", OPT_DOUBLE, F(exit_after_minutes), 0, 1e9, NULL, "stop with a checkpoint before this many minutes since the start pass, for a job's time limit: after the first step from whose end one more step as long, the evaluation, sample and checkpoints due around it and the checkpoint after it would end past them, each as long as the longest of its kind so far in this run (Megatron-LM's --exit-duration-in-mins, which stops after the first step past them; a kind not yet run counts nothing: without --checkpoint-every leave the one checkpoint's time as a margin; 0 = never)"},
    {"resume", OPT_FLAG, F(resume), 0, 1, NULL, "continue from the newest complete checkpoint in --out-dir"},
    {"new-data-phase", OPT_FLAG, F(new_data_phase), 0, 1, NULL, "with --resume from a checkpoint written over other --train-data (other files, weights or sets): read the new data from the resumed step on, every set in a fresh order (e.g. a decay phase on another mixture); a checkpoint written over this --train-data resumes as usual, so the flag may stay in a restart script"},
    {"continue-sets", OPT_FLAG, F(continue_sets), 0, 1, NULL, "with --new-data-phase: each set of the new --train-data that the run has read before (the same files, by name and windows, wherever they lie) goes on in its order from where it stood, so a phase does not read again what earlier ones read; sets new to the run start fresh (checkpoints written before set positions were saved know no earlier sets)"},
    {"log", OPT_STRING, F(log_file), 0, 0, NULL, "JSONL log (default OUT-DIR/log.jsonl)"},
    {"save-bf16", OPT_FLAG, F(save_bf16), 0, 1, NULL, "write model files as bf16 (llm.c version 5) instead of fp32"},
    {"async-save", OPT_FLAG, F(async_save), 0, 1, NULL, "write the files of each --checkpoint-every checkpoint in a thread while the steps go on (Megatron-LM's --async-save): the step waits only for the copy of the weights and moments to host memory the files are written from; the checkpoint is complete (DONE) at the first step end at which every rank has written its files, a run stop (its end, a signal, --exit-after, a divergence) first completing the one in flight; a write failure still ends the run, some steps later; one write at a time"},
    {"no-save", OPT_FLAG, F(no_save), 0, 1, NULL, "write no checkpoint or model file, not even at the end (benchmarks)"},
    {"dp", OPT_INT, F(dp), 1, 1 << 20, NULL, "data-parallel groups"},
    {"pq", OPT_INT, F(pq), 1, 1 << 16, NULL, "ATTENTION2D mesh rows (query split)"},
    {"pkv", OPT_INT, F(pkv), 1, 1 << 16, NULL, "ATTENTION2D mesh columns (key/value split)"},
    {"attention", OPT_STRING, F(attention), 0, 0, "2d|2d-overlap|ring|striped|zigzag|ulysses|usp", "sequence-parallel attention schedule (2d-overlap: ATTENTION2D ring-pipelined over the row and column, computing on each arriving block; zigzag: the ring with Megatron's load-balanced layout, chunks r and 2P-1-r of 2P; ulysses: all-to-alls trading the sequence for heads, NH / P heads per rank; usp: Ulysses over the pq ranks of a mesh column, NH / pq heads per rank, inside a Striped ring over the pkv ranks of a row)"},
    {"mesh", OPT_STRING, F(mesh), 0, 0, "manual|auto", "auto: choose --dp/--pq/--pkv and --attention for the world size with the cost model (costmodel/), printing the top candidates and why; options given explicitly are kept (an explicit --attention: sequence-parallel meshes only)"},
    {"cluster", OPT_STRING, F(cluster), 0, 0, NULL, "cluster description the cost model of --mesh auto predicts on (default costmodel/clusters/cpu-local.cluster on the CPU, h100-8pernode.cluster on GPUs: calibrated from an H100 report of the GPU kit)"},
    {"memory-gb", OPT_DOUBLE, F(memory_gb), 0, 1e6, NULL, "--mesh auto: memory per device in GiB a configuration may use (0 = the cluster's)"},
    {"zero", OPT_INT, F(zero), 0, 1, NULL, "ZeRO stage: 1 shards the optimizer state over all ranks"},
    {"grad-bucket-mb", OPT_DOUBLE, F(grad_bucket_mb), 0, 1e6, NULL, "gradient all-reduce in buckets of this many MiB, started as backward completes them (0 = one all-reduce after backward; ZeRO-1 reduce-scatters after backward)"},
    {"overlap", OPT_INT, F(overlap), 0, 1, NULL, "1: communication travels while compute goes on; 0: every transfer is waited for as it starts, and gradients are reduced after backward (the plain schedules, for comparison; same results)"},
    {"timeline", OPT_INT, F(timeline), 0, 1, NULL, "record per-step spans of compute, communication and waits (CUDA events on the GPU, the clock on the CPU) for the time fractions in the log and --trace (0 = off)"},
    {"trace", OPT_STRING, F(trace), 0, 0, NULL, "write a Chrome trace-event JSON of every rank's compute, communication and wait spans (open in Perfetto); also adds time fractions to the log"},
    {"recompute", OPT_STRING, F(recompute), 0, 0, "none|selective|full", "activations backward recomputes instead of keeping (same results; bitwise on the CPU): selective keeps each layer's attention output, LSE and residual stream (3 C per token instead of 16) and recomputes the LayerNorms, the QKV and FC projections and GELU, about a third of the layer's forward matmuls again; full keeps only the attention output, LSE and the layer's output (2 C) and also recomputes the output projection; the attention itself is never recomputed"},
    {"recompute-num-layers", OPT_INT, F(recompute_num_layers), 0, 1 << 20, NULL, "with --recompute selective or full: only the first N layers recompute, the others keep all their activations (Megatron-LM's --recompute-method block --recompute-num-layers): memory and time between no recomputation and the mode's on every layer; 0 = every layer; --mesh auto without --recompute: the fewest layers with which the configuration fits"},
    {"cuda-graph", OPT_INT, F(cuda_graph), 0, 1, NULL, "CUDA trainer: 1 captures each micro-batch's forward and backward as a CUDA graph in the second step and launches it from then on, one launch instead of one per kernel (same results); turns the timeline off unless --timeline 1 or --trace is given (then its marks are event record nodes of the graphs, pointed at each step's events before every launch; host issue spans are left out); with --document-mask Ring and Zigzag run all their steps (no early stop after the longest document; a window still stops them); on sequence-parallel meshes needs --comm nccl (the attention's NCCL operations are captured too); gradient buckets are captured over nccl, else the gradients are reduced after the graph"},
    {"a2a-chunks", OPT_INT, F(a2a_chunks), 1, ULYSSES_MAX_CHUNKS, NULL, "ulysses and usp: run each rank's heads in this many chunks, the all-to-alls of one chunk travelling while another computes (dividing the heads per rank; same results; 1: all heads at once; --mesh auto without it: the cost model's fastest)"},
    {"keep-kv", OPT_FLAG, F(keep_kv), 0, 1, NULL, "ATTENTION2D: keep gathered K/V for backward instead of gathering again"},
    {"comm", OPT_STRING, F(comm), 0, 0, "auto|mpi|nccl|mpi-staged", "transport: mpi moves host memory (CPU trainer); nccl and mpi-staged (through pinned host buffers, lets ranks share a GPU) move device memory (CUDA trainer); auto picks mpi on the CPU, nccl on GPUs (mpi-staged for one rank)"},
    {"rendezvous", OPT_STRING, F(rendezvous), 0, 0, NULL, "how rank 0's NCCL id reaches the others: mpi, file:PATH (a shared file system) or tcp:HOST:PORT (rank 0 listens); with file or tcp no MPI is started and rank, size and local rank come from the launcher's environment (Slurm, Open MPI, MPICH, torchrun) or --rank/--world-size/--local-rank"},
    {"rendezvous-id", OPT_STRING, F(rendezvous_id), 0, 0, NULL, "a string every rank of this run shares and no earlier run used, so a stale rendezvous file is never read (default: the launcher's job id, e.g. SLURM_JOB_ID.SLURM_STEP_ID)"},
    {"rendezvous-timeout", OPT_DOUBLE, F(rendezvous_timeout), 0.1, 86400, NULL, "seconds a rank waits for the file or tcp rendezvous before giving up with an error"},
    {"comm-timeout", OPT_DOUBLE, F(comm_timeout), 0, 1e6, NULL, "hang watchdog: a collective or send/recv that does not complete within this many seconds aborts the job, naming rank, operation, group and layer (0 = no limit)"},
    {"rank", OPT_INT, F(launch_rank), -1, 1 << 20, NULL, "this process's world rank, without MPI (-1 = from the launcher's environment)"},
    {"world-size", OPT_INT, F(launch_world), -1, 1 << 20, NULL, "ranks in the job, without MPI (-1 = from the launcher's environment)"},
    {"local-rank", OPT_INT, F(launch_local_rank), -1, 1 << 20, NULL, "rank on this node (picks the GPU; -1 = from MPI or the launcher's environment)"},
    {"peak-gflops", OPT_DOUBLE, F(peak_gflops), 0, 1e9, NULL, "peak GFLOP/s per rank for MFU (0: the CPU's measured FMA peak, or the GPU's datasheet entry)"},
    {"quiet", OPT_FLAG, F(quiet), 0, 1, NULL, "no per-step progress lines"},
    {"log-interval", OPT_INT, F(log_interval), 1, 1e9, NULL, "a progress line every N steps (Megatron-LM's --log-interval) and at the run's first and last step: the mean loss of the steps applied since the previous line, their mean time, tokens/s and MFU, this step's lr and norms; the log keeps a step record per step (1 = a line per step)"},
    {"log-params-norm", OPT_FLAG, F(log_params_norm), 0, 1, NULL, "the L2 norm of the parameters after each step's update (the fp32 master weights where the backend keeps them), in the progress line and the step record (Megatron-LM's --log-params-norm): one more sum over the parameters a step, and under ZeRO-1 one all-reduce of 8 bytes"},
    {"on-nan", OPT_STRING, F(on_nan), 0, 0, "stop|skip", "a step whose loss or gradient norm is not finite (checked on every rank) never updates the weights; stop: exit non-zero naming the step and the first tensor with a non-finite gradient, writing nothing; skip: drop the step, count it and go on"},
    {"max-skips", OPT_INT, F(max_skips), 1, 1e9, NULL, "stop (as --on-nan stop) after this many skipped steps in a row (non-finite ones under --on-nan skip, and spikes)"},
    {"spike-zscore", OPT_DOUBLE, F(spike_zscore), 0, 1e6, NULL, "loss-spike detector: skip (as --on-nan skip, logged with reason \"spike\" and the z-scores) a step whose loss or gradient norm is more than this many standard deviations above the mean of the last --spike-window applied steps (0 = off)"},
    {"spike-window", OPT_INT, F(spike_window), 2, 1e6, NULL, "the loss-spike detector's window: applied steps it compares with; it acts once the window is full (again after --resume)"},
};
#undef F
enum { NSPECS = sizeof specs / sizeof specs[0] };

static void set_defaults(TrainOptions* o) {
    memset(o, 0, sizeof *o);
    o->preset = "tiny";
    o->seed = 1337;
    o->init_std = GPT_INIT_STD;
    o->train_data = "data/cache/fortunes_train_*.bin";
    o->val_data = "data/cache/fortunes_val_*.bin";
    o->tokenizer = "data/cache/gpt2_tokenizer.bin";
    o->batch = 4;
    o->seq_len = 64;
    o->steps = 100;
    o->rampup_batch_tokens = "";
    o->lr = 6e-4;
    o->warmup = -1;
    o->warmup_frac = 0.05;
    o->lr_schedule = "cosine";
    o->final_lr_frac = 0.1;
    o->decay_frac = 0.2;
    o->wsd_decay_style = "linear";
    o->weight_decay = 0.1;
    o->grad_clip = 1.0;
    o->optimizer = "adamw";
    o->muon_momentum = 0.95;
    o->muon_ns_steps = 5;
    o->muon_scale_mode = "spectral";
    o->muon_matmul_prec = "medium";
    o->muon_extra_scale = 1.0;
    o->beta1 = 0.9;
    o->beta2 = 0.95;
    o->eps = 1e-8;
    o->eval_every = 50;
    o->eval_batches = 8;
    o->mc_eval = "";
    o->mc_eval_examples = 0;
    o->sample_every = 0;
    o->sample_length = 64;
    o->sample_prompt = "";
    o->temperature = 1.0;
    o->top_k = 40;
    o->out_dir = "runs/default";
    o->checkpoint_every = 0;
    o->keep_last = 2;
    o->keep_every = 0;
    o->log_file = "";
    o->dp = 1;
    o->pq = 1;
    o->pkv = 1;
    o->attention = "2d";
    o->recompute = "none";
    o->window_every = 1;
    o->document_mask = "none";
    o->position_embedding = "learned";
    o->rope_theta = 10000;
    o->rope_scaling = "none";
    o->normalization = "layernorm";
    o->norm_epsilon = GPT_NORM_EPS_DEFAULT;
    o->mlp = "gelu";
    o->mesh = "manual";
    o->cluster = "";
    o->grad_bucket_mb = 25;
    o->trace = "";
    o->timeline = 1;
    o->overlap = 1;
    o->a2a_chunks = 1;
    o->comm = "auto";
    o->rendezvous = "mpi";
    o->rendezvous_id = "";
    o->rendezvous_timeout = 120;
    o->comm_timeout = COMM_DEFAULT_TIMEOUT_S;
    o->launch_rank = -1;
    o->launch_world = -1;
    o->launch_local_rank = -1;
    o->on_nan = "stop";
    o->max_skips = 10;
    o->spike_zscore = 0;
    o->spike_window = 50;
    o->log_interval = 1;
}

static int parse_args(TrainOptions* o, int argc, char** argv, int report, FILE* errs);

static void usage(const char* prog) {
    printf("usage: %s [options]\nTrains a GPT-3-like model on llm.c token shards (%s backend; "
           "%s).\nA long option may be shortened to any prefix that begins it alone "
           "(--sample-l for --sample-length).\n\n", prog, gpt_backend_name(),
           gpt_backend_host_memory() ? "run under mpirun for data and sequence parallelism"
                                     : "one GPU per process; run under mpirun, or srun with "
                                       "--rendezvous, for data and sequence parallelism");
    for (int i = 0; i < NSPECS; i++) {
        const OptSpec* s = &specs[i];
        const char* arg = s->type == OPT_FLAG ? "" : s->choices ? s->choices
                        : s->type == OPT_STRING ? "STR" : s->type == OPT_DOUBLE ? "X" : "N";
        char left[64];
        snprintf(left, sizeof left, "--%s %s", s->name, arg);
        printf("  %-30s %s\n", left, s->help);
    }
    printf("  %-30s %s\n", "--help", "this text");
    if (!gpt_backend_host_memory())
        printf("\nenvironment:\n  %-30s %s\n", "GPT_CUDA_SYNC_CHECK=1",
               "synchronise and check after every kernel launch, so a faulting kernel is named at "
               "its own launch (slow; for debugging)");
}

// Whether text is one of the '|'-separated choices, whole (not "ring|striped", not "rin").
static int is_choice(const char* text, const char* choices) {
    const size_t n = strlen(text);
    for (const char* c = choices;; c++) {
        const size_t k = strcspn(c, "|");
        if (n > 0 && k == n && strncmp(c, text, n) == 0) return 1;
        c += k;
        if (!*c) return 0;
    }
}

static int parse_value(const OptSpec* s, const char* text, TrainOptions* o, FILE* errs) {
    char* base = (char*)o + s->offset;
    char* end = NULL;
    errno = 0;
    switch (s->type) {
    case OPT_STRING:
        if (s->choices) {
            if (!is_choice(text, s->choices)) {
                fprintf(errs, "error: --%s: expected one of %s, found '%s'\n", s->name,
                        s->choices, text);
                return -1;
            }
        }
        *(const char**)base = text;
        return 0;
    case OPT_FLAG:
        *(int*)base = 1;
        return 0;
    case OPT_INT:
    case OPT_LONG: {
        const long long v = strtoll(text, &end, 10);
        if (!text[0] || *end || errno == ERANGE) {
            fprintf(errs, "error: --%s: expected an integer, found '%s'\n", s->name, text);
            return -1;
        }
        // In integers: a double's 53 bits would let 1e18 + 1 pass a bound of 1e18.
        if (v < (long long)s->min || v > (long long)s->max) {
            fprintf(errs, "error: --%s: expected an integer in %.0f..%.0f, found %lld\n",
                    s->name, s->min, s->max, v);
            return -1;
        }
        if (s->type == OPT_INT) *(int*)base = (int)v;
        else *(long*)base = (long)v;
        return 0;
    }
    case OPT_DOUBLE: {
        const double v = strtod(text, &end);
        if (!text[0] || *end || errno == ERANGE || !isfinite(v)) {
            fprintf(errs, "error: --%s: expected a number, found '%s'\n", s->name, text);
            return -1;
        }
        if (v < s->min || v > s->max) {
            fprintf(errs, "error: --%s: expected a number in [%g, %g], found %g\n", s->name,
                    s->min, s->max, v);
            return -1;
        }
        *(double*)base = v;
        return 0;
    }
    }
    return -1;
}

int train_options_parse(TrainOptions* o, int argc, char** argv, int report) {
    set_defaults(o);
    FILE* errs = report ? stderr : fopen("/dev/null", "w");
    const int rc = parse_args(o, argc, argv, report, errs ? errs : stderr);
    if (errs && errs != stderr) fclose(errs);
    return rc;
}

// An option word that begins two or more options' names ("--sa"): getopt_long refuses it as it
// refuses an unknown one; this says which options it could mean. Returns 1 when it was that.
static int report_ambiguous(const char* word, const struct option* longopts, FILE* errs) {
    if (strncmp(word, "--", 2) != 0) return 0;
    const char* name = word + 2;
    const size_t n = strcspn(name, "=");
    char list[1024] = "";
    size_t len = 0;
    int matches = 0;
    for (const struct option* p = longopts; p->name; p++) {
        if (n == 0 || strncmp(p->name, name, n) != 0) continue;
        matches++;
        if (len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s--%s", matches > 1 ? ", " : "",
                                    p->name);
    }
    if (matches < 2) return 0;
    fprintf(errs, "error: --%.*s: ambiguous: it begins %d options: %s (see --help)\n", (int)n, name,
            matches, list);
    return 1;
}

static int parse_args(TrainOptions* o, int argc, char** argv, int report, FILE* errs) {
    struct option longopts[NSPECS + 2];
    for (int i = 0; i < NSPECS; i++) {
        longopts[i] = (struct option){specs[i].name,
                                      specs[i].type == OPT_FLAG ? no_argument : required_argument,
                                      NULL, 1000 + i};
    }
    longopts[NSPECS] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[NSPECS + 1] = (struct option){0, 0, 0, 0};
    opterr = 0;
    optind = 0;   // not 1: glibc then also drops a half-read "-xy" left by an earlier parse
    for (int c; (c = getopt_long(argc, argv, ":", longopts, NULL)) != -1;) {
        if (c == 'h') {
            if (report) usage(argv[0]);
            return 1;
        }
        if (c == '?' || c == ':') {
            // A short option ("-x", also inside "-xy") is named by getopt's optopt: optind
            // has not moved past its word yet.
            char short_opt[3] = {'-', (char)optopt, 0};
            const char* bad = c == '?' && optopt > 0 && optopt < 256 ? short_opt
                                                                     : argv[optind - 1];
            if (c == '?' && optopt == 0 && report_ambiguous(bad, longopts, errs)) return -1;
            fprintf(errs, "error: %s: %s (see --help)\n", bad,
                    c == ':' ? "expected a value"
                    : optopt >= 1000 ? "expected no value (a flag)" : "unknown option");
            return -1;
        }
        const OptSpec* s = &specs[c - 1000];
        if (parse_value(s, optarg ? optarg : "", o, errs) != 0) return -1;
        // What --mesh auto must keep.
        if (s->offset == offsetof(TrainOptions, dp)) o->given |= OPT_GIVEN_DP;
        if (s->offset == offsetof(TrainOptions, pq)) o->given |= OPT_GIVEN_PQ;
        if (s->offset == offsetof(TrainOptions, pkv)) o->given |= OPT_GIVEN_PKV;
        if (s->offset == offsetof(TrainOptions, attention)) o->given |= OPT_GIVEN_ATTENTION;
        if (s->offset == offsetof(TrainOptions, recompute)) o->given |= OPT_GIVEN_RECOMPUTE;
        // What overrides a model file's attention window.
        if (s->offset == offsetof(TrainOptions, attention_window)) o->given |= OPT_GIVEN_WINDOW;
        if (s->offset == offsetof(TrainOptions, window_every)) o->given |= OPT_GIVEN_WINDOW_EVERY;
        if (s->offset == offsetof(TrainOptions, timeline)) o->given |= OPT_GIVEN_TIMELINE;
        if (s->offset == offsetof(TrainOptions, a2a_chunks)) o->given |= OPT_GIVEN_A2A_CHUNKS;
        if (s->offset == offsetof(TrainOptions, position_embedding)) o->given |= OPT_GIVEN_POSITIONS;
        if (s->offset == offsetof(TrainOptions, rope_theta)) o->given |= OPT_GIVEN_ROPE_THETA;
        if (s->offset == offsetof(TrainOptions, init_std)) o->given |= OPT_GIVEN_INIT_STD;
        if (s->offset == offsetof(TrainOptions, steps)) o->given |= OPT_GIVEN_STEPS;
        if (s->offset == offsetof(TrainOptions, rope_scaling)) o->given |= OPT_GIVEN_ROPE_SCALING;
        if (s->offset == offsetof(TrainOptions, normalization) ||
            s->offset == offsetof(TrainOptions, mlp) || s->offset == offsetof(TrainOptions, ffn_hidden) ||
            s->offset == offsetof(TrainOptions, disable_bias_linear) ||
            s->offset == offsetof(TrainOptions, untie_embeddings) ||
            s->offset == offsetof(TrainOptions, norm_epsilon) ||
            s->offset == offsetof(TrainOptions, add_qkv_bias) ||
            s->offset == offsetof(TrainOptions, qk_layernorm))
            o->given |= OPT_GIVEN_BLOCK;
        // What a schedule that does not use them must refuse.
        if (s->offset == offsetof(TrainOptions, final_lr_frac)) o->given |= OPT_GIVEN_FINAL_LR_FRAC;
        if (s->offset == offsetof(TrainOptions, decay_frac)) o->given |= OPT_GIVEN_DECAY_FRAC;
        if (s->offset == offsetof(TrainOptions, wsd_decay_style)) o->given |= OPT_GIVEN_WSD_DECAY_STYLE;
        if (s->offset == offsetof(TrainOptions, warmup)) o->given |= OPT_GIVEN_WARMUP;
        if (s->offset == offsetof(TrainOptions, warmup_frac)) o->given |= OPT_GIVEN_WARMUP_FRAC;
        if (!strncmp(s->name, "muon-", 5)) o->given |= OPT_GIVEN_MUON;
    }
    if (optind < argc) {
        fprintf(errs, "error: unexpected argument '%s' (options are --name value; see --help)\n",
                argv[optind]);
        return -1;
    }
    return 0;
}

// Formats one option's value.
static void format_value(const OptSpec* s, const TrainOptions* o, char* out, size_t n, int json) {
    const char* base = (const char*)o + s->offset;
    switch (s->type) {
    case OPT_STRING: {
        const char* v = *(const char* const*)base;
        if (!json) {
            snprintf(out, n, "%s", v ? v : "");
            return;
        }
        size_t k = 0;   // JSON string with escapes
        out[k++] = '"';
        for (const char* p = v ? v : ""; *p && k + 8 < n; p++) {
            if (*p == '"' || *p == '\\') k += snprintf(out + k, n - k, "\\%c", *p);
            else if ((unsigned char)*p < 0x20) k += snprintf(out + k, n - k, "\\u%04x", *p);
            else out[k++] = *p;
        }
        out[k++] = '"';
        out[k] = 0;
        return;
    }
    case OPT_FLAG:
        snprintf(out, n, json ? "%s" : "%s", *(const int*)base ? "true" : "false");
        return;
    case OPT_INT: snprintf(out, n, "%d", *(const int*)base); return;
    case OPT_LONG: snprintf(out, n, "%ld", *(const long*)base); return;
    case OPT_DOUBLE: snprintf(out, n, "%.9g", *(const double*)base); return;
    }
}

void train_options_each(const TrainOptions* o, void (*visit)(void* ctx, const char* name,
                                                             const char* value), void* ctx) {
    for (int i = 0; i < NSPECS; i++) {
        char value[512];
        format_value(&specs[i], o, value, sizeof value, 0);
        visit(ctx, specs[i].name, value);
    }
}

typedef struct {
    void (*emit)(const char* line);
} PrintTo;

static void print_option(void* ctx, const char* name, const char* value) {
    char line[640];
    snprintf(line, sizeof line, "  %-20s %s", name, value);
    ((PrintTo*)ctx)->emit(line);
}

void train_options_print(const TrainOptions* o, void (*emit)(const char* line)) {
    PrintTo to = {emit};
    train_options_each(o, print_option, &to);
}

void train_options_json(const TrainOptions* o, char* out, size_t outlen) {
    // Always a valid object: an entry that would not fit (with the closing brace) is left out,
    // and string values longer than the entry buffer are cut inside their quotes. A buffer
    // too small for "{}" gets the empty string.
    if (outlen < 3) {
        if (outlen > 0) out[0] = 0;
        return;
    }
    size_t k = 0;
    out[k++] = '{';
    for (int i = 0; i < NSPECS; i++) {
        char value[512], entry[640];
        format_value(&specs[i], o, value, sizeof value, 1);
        const int n = snprintf(entry, sizeof entry, "%s\"%s\":%s", k > 1 ? "," : "",
                               specs[i].name, value);
        if (n < 0 || (size_t)n >= sizeof entry || k + (size_t)n + 2 > outlen) continue;
        memcpy(out + k, entry, (size_t)n);
        k += (size_t)n;
    }
    out[k++] = '}';
    out[k] = 0;
}
