#!/usr/bin/env bash
# Context extension, measured on this machine: a small rotary model (4 layers of 128 channels, GPT-2
# BPE) pretrained on the fortunes corpus at a short context, then run at 4x that context with each
# --rope-scaling (none: the frequencies as pretrained; linear; yarn; llama3), once as it is
# (--eval-only) and once after a short continued training at the long context. Every evaluation
# splits the validation loss by position (--eval-positions 8), so the table shows the loss inside
# the pretraining context and past it.
#
#   tools/bench_context_extension.sh [OUT_DIR]   (env: TRAIN, SHORT=64, FACTOR=4, STEPS=300,
#                                                 TUNE=40, DATA_DIR=data/cache, WORK)
# Writes OUT_DIR/context_extension.csv (scaling, phase, range, val_loss), .md (the table), .png
# (loss by position, zero-shot and after continued training) and run_info.txt; the runs (model
# files, logs) go to WORK (default build/bench/context-extension).
# Figures, not a test: the differences between scalings are those of a 2-core toy run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=${1:-$BUILD/bench/context-extension}
work=${WORK:-$BUILD/bench/context-extension}
TRAIN=${TRAIN:-$BUILD/train_gpt}
SHORT=${SHORT:-64}
FACTOR=${FACTOR:-4}
STEPS=${STEPS:-300}
TUNE=${TUNE:-40}
DATA_DIR=${DATA_DIR:-data/cache}
PY=${PYTHON:-/usr/bin/python3}
LONG=$((SHORT * FACTOR))
[ -x "$TRAIN" ] || { echo "error: $TRAIN: not built (make $TRAIN)" >&2; exit 2; }
ls "$DATA_DIR"/fortunes_train_*.bin "$DATA_DIR"/fortunes_val_*.bin > /dev/null 2>&1 ||
  { echo "error: $DATA_DIR: expected fortunes_train_*.bin and fortunes_val_*.bin (make $DATA_DIR/fortunes_val_000000.bin)" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found (run tools/setup.sh)" >&2; exit 2; }
mkdir -p "$out" "$work"
data=(--train-data "$DATA_DIR/fortunes_train_*.bin" --val-data "$DATA_DIR/fortunes_val_*.bin"
      --tokenizer "" --sample-every 0 --sample-length 0 --quiet --eval-batches 32)
run() {   # run NAME ARGS...: the trainer, output in WORK/NAME.out, stopping the script on failure
  local name=$1; shift
  echo "== $name: $TRAIN $*" >&2
  rm -rf "${work:?}/$name"
  "$TRAIN" "$@" "${data[@]}" --out-dir "$work/$name" > "$work/$name.out" 2>&1 ||
    { echo "error: $name failed:" >&2; tail -n 5 "$work/$name.out" >&2; exit 1; }
}
start=$(date +%s)

# Pretraining at the short context (its validation loss by position as the baseline).
run pretrain --preset tiny --layers 4 --channels 128 --heads 4 --position-embedding rope \
  --context "$SHORT" --seq-len "$SHORT" --batch 16 --steps "$STEPS" --lr 3e-3 --warmup 20 \
  --eval-every 0 --eval-positions 8
model=$work/pretrain/model_$(printf '%08d' "$STEPS").bin
from=(--init-from "$model" --preset "" --layers 0 --channels 0 --heads 0 --vocab 0)
for s in none linear yarn llama3; do
  # As pretrained, at the long context; then TUNE steps of continued training there.
  run "zero-$s" "${from[@]}" --eval-only --context "$LONG" --seq-len "$LONG" --batch 4 \
    --rope-scaling "$s" --eval-positions 8
  run "tuned-$s" "${from[@]}" --context "$LONG" --seq-len "$LONG" --batch 4 --steps "$TUNE" \
    --lr 1e-3 --warmup 5 --rope-scaling "$s" --eval-every 0 --eval-positions 8 --no-save
done

"$PY" - "$out" "$work" "$SHORT" "$LONG" "$FACTOR" "$STEPS" "$TUNE" <<'PY'
import json, os, sys
out, work, short, long_, factor, steps, tune = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
def last_positions(name):
    rows = [json.loads(l) for l in open(os.path.join(work, name, "log.jsonl"))]
    pos = [r for r in rows if r["type"] == "eval_positions"]
    val = [r["val_loss"] for r in rows if r["type"] == "eval"]
    return pos[-1]["ranges"], pos[-1]["val_loss"], val[-1]
lines = ["scaling,phase,range_begin,range_end,val_loss"]
table, curves = [], {}
r, l, v = last_positions("pretrain")
lines += ["pretrained,context %d,%d,%d,%.6f" % (short, a, b, x) for (a, b), x in zip(r, l)]
table.append(("pretrained at %d" % short, "-", v, None, None))
for phase, prefix in (("zero-shot", "zero"), ("after %d steps at %d" % (tune, long_), "tuned")):
    for s in ("none", "linear", "yarn", "llama3"):
        r, l, v = last_positions("%s-%s" % (prefix, s))
        lines += ["%s,%s,%d,%d,%.6f" % (s, phase, a, b, x) for (a, b), x in zip(r, l)]
        inside = [x for (a, b), x in zip(r, l) if b <= short]
        past = [x for (a, b), x in zip(r, l) if a >= short]
        table.append((s, phase, v, sum(inside) / len(inside), sum(past) / len(past)))
        curves.setdefault(prefix, []).append((s, r, l))
open(os.path.join(out, "context_extension.csv"), "w").write("\n".join(lines) + "\n")
md = ["Context extension of a rotary model pretrained at %d tokens (%d steps), run at %d "
      "(x%d): validation loss (nats/token) over all positions, inside the pretraining context "
      "(positions < %d) and past it." % (short, steps, long_, factor, short), "",
      "| scaling | phase | all positions | < %d | >= %d |" % (short, short), "|---|---|---|---|---|"]
for s, phase, v, a, b in table:
    md.append("| %s | %s | %.4f | %s | %s |" % (s, phase, v, "-" if a is None else "%.4f" % a,
                                                 "-" if b is None else "%.4f" % b))
open(os.path.join(out, "context_extension.md"), "w").write("\n".join(md) + "\n")
for prefix, cs in curves.items():
    with open(os.path.join(work, prefix + ".dat"), "w") as f:
        for s, r, l in cs:
            f.write("# %s\n" % s + "".join("%g %.6f\n" % ((a + b - 1) / 2, x) for (a, b), x in zip(r, l)) + "\n\n")
print("\n".join(md))
PY

gnuplot <<GP
set terminal png size 1200,480 noenhanced
set output '$out/context_extension.png'
set multiplot layout 1,2 title 'rotary model pretrained at $SHORT tokens, run at $LONG: validation loss by position'
set xlabel 'position in the sequence'
set ylabel 'cross-entropy (nats/token)'
set grid
set key top left
set arrow from $SHORT, graph 0 to $SHORT, graph 1 nohead dt 2 lc rgb '#555555'
set title 'as pretrained (--eval-only)'
plot for [i=0:3] '$work/zero.dat' index i using 1:2 with linespoints lw 2 pt 7 title word('none linear yarn llama3', i + 1)
set title 'after $TUNE steps at $LONG'
plot for [i=0:3] '$work/tuned.dat' index i using 1:2 with linespoints lw 2 pt 7 title word('none linear yarn llama3', i + 1)
unset multiplot
GP
{ echo "command: tools/bench_context_extension.sh $out (SHORT=$SHORT FACTOR=$FACTOR STEPS=$STEPS TUNE=$TUNE)"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - start )) s"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . ':!'"$out" 2>/dev/null || echo ' with uncommitted changes')"
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores"
  grep -m 1 '^summary:' "$work/pretrain.out" | sed 's/^/pretraining /'
} > "$out/run_info.txt"
echo "wrote $out/context_extension.csv, .md, .png, run_info.txt" >&2
