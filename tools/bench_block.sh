#!/usr/bin/env bash
# GPT's block against Llama's, measured on this machine: the same small model (4 layers of 128
# channels, GPT-2 BPE, the fortunes corpus) trained from the same seed with each block, one change
# at a time: GPT-3's (learned positions, LayerNorm, GELU MLP of 4C, biases), rotary positions,
# then RMSNorm, then the SwiGLU MLP (Megatron's default width, 2/3 of 4C in multiples of 64), then
# no linear biases (Llama's whole block), then 2 key/value heads of 4 (Llama 3's grouped-query
# attention), then an untied classifier (Llama 3 8B's). Each run logs its validation loss every
# EVAL steps.
#
#   tools/bench_block.sh [OUT_DIR]   (env: TRAIN, STEPS=300, EVAL=50, SEQ=128, DATA_DIR=data/cache,
#                                     WORK)
# Writes OUT_DIR/block.csv (variant, parameters, step, val_loss), block.md (the table: parameters,
# final validation loss, tokens/s), block.png (validation loss by step) and run_info.txt; the runs
# go to WORK (default build/bench/block).
# Figures, not a test: a 2-core toy run on a small corpus, one seed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=${1:-$BUILD/bench/block}
work=${WORK:-$BUILD/bench/block}
TRAIN=${TRAIN:-$BUILD/train_gpt}
STEPS=${STEPS:-300}
EVAL=${EVAL:-50}
SEQ=${SEQ:-128}
DATA_DIR=${DATA_DIR:-data/cache}
PY=${PYTHON:-/usr/bin/python3}
[ -x "$TRAIN" ] || { echo "error: $TRAIN: not built (make $TRAIN)" >&2; exit 2; }
ls "$DATA_DIR"/fortunes_train_*.bin "$DATA_DIR"/fortunes_val_*.bin > /dev/null 2>&1 ||
  { echo "error: $DATA_DIR: expected fortunes_train_*.bin and fortunes_val_*.bin (make $DATA_DIR/fortunes_val_000000.bin)" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found (run tools/setup.sh)" >&2; exit 2; }
mkdir -p "$out" "$work"
common=(--preset tiny --layers 4 --channels 128 --heads 4 --context "$SEQ" --seq-len "$SEQ"
        --batch 8 --steps "$STEPS" --lr 3e-3 --warmup 20 --eval-every "$EVAL" --eval-batches 32
        --train-data "$DATA_DIR/fortunes_train_*.bin" --val-data "$DATA_DIR/fortunes_val_*.bin"
        --tokenizer "" --sample-every 0 --sample-length 0 --quiet --no-save --seed 1)
# NAME|OPTIONS: each adds one change to the one before it.
variants=(
  "gpt3|"
  "rope|--position-embedding rope"
  "rmsnorm|--position-embedding rope --normalization rmsnorm"
  "swiglu|--position-embedding rope --normalization rmsnorm --mlp swiglu"
  "llama|--position-embedding rope --normalization rmsnorm --mlp swiglu --disable-bias-linear"
  "llama-gqa|--position-embedding rope --normalization rmsnorm --mlp swiglu --disable-bias-linear --kv-heads 2"
  "llama-untied|--position-embedding rope --normalization rmsnorm --mlp swiglu --disable-bias-linear --kv-heads 2 --untie-embeddings-and-output-weights"
)
start=$(date +%s)
names=()
for v in "${variants[@]}"; do
  name=${v%%|*} opts=${v#*|}
  names+=("$name")
  echo "== $name: $TRAIN ${common[*]} $opts" >&2
  rm -rf "${work:?}/$name"
  # shellcheck disable=SC2086  # (opts: words of trainer options)
  "$TRAIN" "${common[@]}" $opts --out-dir "$work/$name" > "$work/$name.out" 2>&1 ||
    { echo "error: $name failed:" >&2; tail -n 5 "$work/$name.out" >&2; exit 1; }
done

"$PY" - "$out" "$work" "$STEPS" "$SEQ" "${variants[@]}" <<'PY'
import json, os, re, sys
out, work, steps, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
variants = [v.split("|", 1) for v in sys.argv[5:]]
lines, md = ["variant,parameters,step,val_loss"], []
md += ["GPT's block against Llama's, one change at a time (4 layers of 128 channels, 4 heads, "
       "T = %d, batch 8, %d steps at lr 3e-3, the fortunes corpus, seed 1): parameters, the "
       "validation loss (nats/token, 32 batches) and the CPU trainer's tokens/s on this machine."
       % (seq, steps), "",
       "| variant | options added | parameters | val loss | tokens/s |", "|---|---|---|---|---|"]
for name, opts in variants:
    text = open(os.path.join(work, name + ".out")).read()
    params = int(re.search(r"([0-9]+) parameters", text).group(1))
    rows = [json.loads(l) for l in open(os.path.join(work, name, "log.jsonl"))]
    evals = [(r["step"], r["val_loss"]) for r in rows if r["type"] == "eval"]
    summary = [r for r in rows if r["type"] == "summary"][-1]
    lines += ["%s,%d,%d,%.6f" % (name, params, s, v) for s, v in evals]
    with open(os.path.join(work, name + ".dat"), "w") as f:
        f.write("".join("%d %.6f\n" % e for e in evals))
    md.append("| %s | %s | %d | %.4f | %.0f |" % (name, opts or "(GPT-3's block)", params,
                                                 evals[-1][1], summary["tokens_per_s"]))
open(os.path.join(out, "block.csv"), "w").write("\n".join(lines) + "\n")
open(os.path.join(out, "block.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY

plots=""
for n in "${names[@]}"; do plots+="'$work/$n.dat' using 1:2 with linespoints lw 2 pt 7 title '$n', "; done
gnuplot <<GP
set terminal png size 900,560 noenhanced
set output '$out/block.png'
set title "GPT's block against Llama's: validation loss (4 x 128, fortunes, T = $SEQ)"
set xlabel 'step'
set ylabel 'cross-entropy (nats/token)'
set grid
set key top right
plot ${plots%, }
GP
{ echo "command: tools/bench_block.sh $out (STEPS=$STEPS EVAL=$EVAL SEQ=$SEQ)"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - start )) s"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . ':!'"$out" 2>/dev/null || echo ' with uncommitted changes')"
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores"
} > "$out/run_info.txt"
echo "wrote $out/block.csv, .md, .png, run_info.txt" >&2
