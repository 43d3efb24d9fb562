#!/usr/bin/env bash
# make bench-llmc LLMC=/path/to/llm.c: llm.c's plain-C CPU trainer (train_gpt2.c from your own
# checkout of karpathy/llm.c; nothing of it is part of this project) and this project's CPU backend
# on the same GPT-2 124M shape, machine and thread count, one after the other; plus an interop
# check: a model file written here is loaded by llm.c, and both programs report the same step-0
# validation loss on the same tokens (llm.c's first 5 unshuffled validation batches are windows
# 0 .. 5B-1 of the shard, as they are for our validation loader).
#
# usage: tools/bench_llmc.sh LLMC_DIR [B [T ...]]    (defaults: B = 4, T = 64 256)
# env:   STEPS (timed steps per T, default 3; one more untimed step comes first), BUILD, DATA_DIR
# Prints one JSON line per T and a table; exits 1 if the two validation losses differ by more
# than 1e-5 relative. llm.c at T = 1024 takes about 3 minutes per step on 2 cores.
set -euo pipefail
usage="usage: tools/bench_llmc.sh LLMC_DIR [B [T ...]]"
llmc=${1:?$usage}
shift
B=${1:-4}
[ $# -gt 0 ] && shift
Ts=("$@")
[ ${#Ts[@]} -gt 0 ] || Ts=(64 256)
STEPS=${STEPS:-3} BUILD=${BUILD:-build} DATA_DIR=${DATA_DIR:-data/cache}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} OMP_WAIT_POLICY=PASSIVE

die() { echo "bench_llmc.sh: $*" >&2; exit 2; }
[ -f "$llmc/train_gpt2.c" ] || die "$llmc/train_gpt2.c: not found (expected a checkout of karpathy/llm.c)"
# The default dataset's first train and val shards (llm.c numbers val 000000, train 000001 on).
train_shard=$(ls "$DATA_DIR"/fortunes_train_*.bin 2> /dev/null | head -n 1 || true)
val_shard=$DATA_DIR/fortunes_val_000000.bin
for f in "$BUILD/train_gpt" "$BUILD/bench_cpu" "${train_shard:-$DATA_DIR/fortunes_train_*.bin}" "$val_shard"; do
  [ -e "$f" ] || die "$f: not found (run it through make bench-llmc, which builds it)"
done
[[ "$B" =~ ^[1-9][0-9]*$ ]] || die "B: expected a positive integer, found '$B'"
for T in "${Ts[@]}"; do
  [[ "$T" =~ ^[1-9][0-9]*$ ]] && [ "$T" -le 1024 ] || die "T: expected 1..1024 (GPT-2's context), found '$T'"
done

work=$BUILD/tmp/bench-llmc
rm -rf "$work"
mkdir -p "$work/src" "$work/run/dev/data/tinyshakespeare"
cp "$llmc/train_gpt2.c" "$work/src/"
[ -d "$llmc/llmc" ] && cp -r "$llmc/llmc" "$work/src/"

# The model: d12 is GPT-2 124M (context 1024, vocabulary 50257 padded to 50304). llm.c's main
# reads fixed paths, so the run directory links our files under its names.
"$BUILD/train_gpt" --preset d12 --seed 1337 --train-data "$DATA_DIR/fortunes_train_*.bin" \
  --val-data '' --batch 4 --seq-len 64 --steps 1 --sample-length 0 --peak-gflops 1 --quiet \
  --out-dir "$work/init" > "$work/init.log"
model=$(realpath "$work/init/model_00000001.bin")
ln -s "$model" "$work/run/gpt2_124M.bin"
ln -s "$(realpath "$train_shard")" \
  "$work/run/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
ln -s "$(realpath "$val_shard")" \
  "$work/run/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
[ -f "$DATA_DIR/gpt2_tokenizer.bin" ] && ln -s "$(realpath "$DATA_DIR/gpt2_tokenizer.bin")" "$work/run/gpt2_tokenizer.bin"

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# llm.c's main with T and the step count changed, the validation pass at step 0 only and no
# generation: the only edits, each checked to have matched.
build_llmc() {  # T -> $work/src/train_gpt2_T$T
  local T=$1 src=$work/src/train_gpt2_T$1.c
  sed -e "s/int T = 64;/int T = $T;/" -e "s/step <= 40;/step <= $STEPS;/" \
      -e "s/if (step % 10 == 0) {/if (step == 0) {/" \
      -e "s/if (step > 0 \&\& step % 20 == 0) {/if (0) {/" "$work/src/train_gpt2.c" > "$src"
  grep -q "int T = $T;" "$src" && grep -q "step <= $STEPS;" "$src" && grep -q "if (step == 0) {" "$src" \
    && grep -q "if (0) {" "$src" \
    || die "$llmc/train_gpt2.c: its main differs from the one this script edits (int T = 64; step <= 40; ...)"
  # llm.c's Makefile flags. Older llmc/utils.h versions declare plain C99 'inline' helpers that
  # need gnu89 inline semantics to link; try the plain flags first.
  local flags=(-Ofast -Wno-unused-result -Wno-ignored-pragmas -Wno-unknown-attributes -march=native -fopenmp -DOMP)
  (cd "$work/src" && { gcc "${flags[@]}" "train_gpt2_T$T.c" -lm -lgomp -o "train_gpt2_T$T" 2> "build_T$T.err" \
    || gcc "${flags[@]}" -fgnu89-inline "train_gpt2_T$T.c" -lm -lgomp -o "train_gpt2_T$T" 2>> "build_T$T.err"; }) \
    || { cat "$work/src/build_T$T.err" >&2; die "could not build llm.c's train_gpt2.c"; }
}

rows=()
status=0
for T in "${Ts[@]}"; do
  build_llmc "$T"
  echo "bench-llmc: T=$T: llm.c ($((STEPS + 1)) steps) ..." >&2
  (cd "$work/run" && "../src/train_gpt2_T$T") > "$work/llmc_T$T.log"
  llmc_ms=$(sed -n 's/^step \([0-9]*\): train loss .* (took \([0-9.]*\) ms)$/\1 \2/p' "$work/llmc_T$T.log" \
            | awk '$1 > 0 { print $2 }' | median) || die "no step times in $work/llmc_T$T.log"
  llmc_val=$(sed -n 's/^val loss \([0-9.]*\)$/\1/p' "$work/llmc_T$T.log" | head -n 1)
  [ -n "$llmc_val" ] || die "no val loss in $work/llmc_T$T.log"

  echo "bench-llmc: T=$T: this project ..." >&2
  "$BUILD/bench_cpu" --preset d12 --batch "$B" --seq "$T" --steps "$STEPS" > "$work/ours_T$T.log"
  ours_ms=$(sed -n 's/^step \([0-9]*\): .* total \([0-9.]*\) ms$/\1 \2/p' "$work/ours_T$T.log" \
            | awk '$1 > 0 { print $2 }' | median) || die "no step times in $work/ours_T$T.log"
  # Our validation loss over the same 5 batches from the same model file: the trainer evaluates
  # after a step, so that step runs with --lr 0, which leaves every weight as loaded.
  "$BUILD/train_gpt" --init-from "$model" --train-data "$DATA_DIR/fortunes_train_*.bin" \
    --val-data "$val_shard" --batch "$B" --seq-len "$T" --steps 1 --lr 0 --eval-every 1 \
    --eval-batches 5 --sample-length 0 --peak-gflops 1 --quiet --out-dir "$work/eval_T$T" > /dev/null
  ours_val=$(sed -n 's/.*"type":"eval","step":1,"val_loss":\([0-9.]*\).*/\1/p' "$work/eval_T$T/log.jsonl")
  [ -n "$ours_val" ] || die "no eval in $work/eval_T$T/log.jsonl"

  row=$(awk -v B="$B" -v T="$T" -v lm="$llmc_ms" -v om="$ours_ms" -v lv="$llmc_val" -v ov="$ours_val" 'BEGIN {
    lt = B * T * 1000 / lm; ot = B * T * 1000 / om; d = (ov - lv) / lv; if (d < 0) d = -d
    printf "{\"bench\":\"llmc\",\"B\":%d,\"T\":%d,\"llmc_step_ms\":%.1f,\"llmc_tokens_per_s\":%.2f,", B, T, lm, lt
    printf "\"ours_step_ms\":%.1f,\"ours_tokens_per_s\":%.2f,\"speedup\":%.2f,", om, ot, ot / lt
    printf "\"llmc_val_loss\":%s,\"ours_val_loss\":%s,\"val_loss_rel_diff\":%.2g}\n", lv, ov, d }')
  echo "$row"
  rows+=("$row")
  awk -v lv="$llmc_val" -v ov="$ours_val" 'BEGIN { d = (ov - lv) / lv; exit !(d > 1e-5 || d < -1e-5) }' \
    && { echo "bench-llmc: T=$T: MISMATCH: validation loss llm.c $llmc_val, ours $ours_val" >&2; status=1; }
done

echo
echo "GPT-2 124M, B=$B, $OMP_NUM_THREADS threads, median of $STEPS steps after the first (fwd + bwd + AdamW)"
printf '%6s %14s %14s %9s %14s %14s\n' T "llm.c tok/s" "ours tok/s" speedup "llm.c val" "ours val"
for row in "${rows[@]}"; do
  awk -v r="$row" 'function f(k,  m) { match(r, "\"" k "\":[^,}]*"); return substr(r, RSTART + length(k) + 3, RLENGTH - length(k) - 3) }
    BEGIN { printf "%6s %14s %14s %8sx %14s %14s\n", f("T"), f("llmc_tokens_per_s"), f("ours_tokens_per_s"), f("speedup"), f("llmc_val_loss"), f("ours_val_loss") }'
done
exit $status
