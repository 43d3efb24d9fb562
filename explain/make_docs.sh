#!/usr/bin/env bash
# Regenerates the distributed attention walkthrough (`make docs`):
#   explain/make_docs.sh BUILD OUTDIR [--text-only]
# OUTDIR/README.md from explain/README.template.md, where a line "@explain ARGS" becomes a code
# block holding the command and the output of BUILD/explain ARGS (deterministic: shapes and
# counters only). Without --text-only also the pictures in OUTDIR/figures/: the explain tool's
# (--png) and the timeline of a real 4-rank 2x2 run of the trainer (its --trace, checked by
# tools/check_trace.py and drawn by tools/bench_timeline_strip.py). The test of the suite explain
# runs it with --text-only into a temporary directory and compares with attention/README.md.
set -euo pipefail
build=${1:?usage: explain/make_docs.sh BUILD OUTDIR [--text-only]}
out=${2:?usage: explain/make_docs.sh BUILD OUTDIR [--text-only]}
text_only=${3:-}
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
explain=$build/explain
[ -x "$explain" ] || { echo "error: $explain: not built (make $explain)" >&2; exit 2; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

while IFS= read -r line || [ -n "$line" ]; do
  if [[ $line == "@explain "* ]]; then
    args=${line#@explain }
    printf '```\n$ build/explain %s\n' "$args"
    # shellcheck disable=SC2086  # the template's arguments are words
    "$explain" $args || { echo "error: explain/README.template.md: build/explain $args failed" >&2; exit 1; }
    printf '```\n'
  else
    printf '%s\n' "$line"
  fi
done < explain/README.template.md > "$tmp/README.md"
mv "$tmp/README.md" "$out/README.md"
[ "$text_only" = --text-only ] && exit 0

figures=$out/figures
mkdir -p "$figures"
rm -f "$figures"/*.png
for args in "--attention 2d --pq 2 --pkv 2" "--attention 2d --pq 4 --pkv 4" "--attention ring --pq 2 --pkv 2" \
            "--attention striped --pq 2 --pkv 2" "--attention zigzag --pq 2 --pkv 2"; do
  mesh=$(echo "$args" | awk '{print $4 "x" $6}')
  mkdir -p "$tmp/$mesh"
  # shellcheck disable=SC2086
  "$explain" --seq-len 64 $args --heads 16 --head-size 64 --png "$tmp/$mesh" > /dev/null
done
# Bytes against P is the same picture for every algorithm: kept once.
mv "$tmp/2x2/2d-bytes-vs-p.png" "$figures/bytes-vs-p.png"
rm -f "$tmp"/*/*bytes-vs-p.png
for f in "$tmp"/2x2/*.png; do cp "$f" "$figures/$(basename "$f")"; done
for f in "$tmp"/4x4/*.png; do cp "$f" "$figures/4x4-$(basename "$f")"; done
# Zigzag under a window on 8 ranks: its two-way tour, the step computing each cell and the passes.
mkdir -p "$tmp/window"
"$explain" --seq-len 64 --attention zigzag --pq 2 --pkv 4 --attention-window 6 --heads 16 \
  --head-size 64 --png "$tmp/window" > /dev/null
for f in matrix-step transfers-forward; do cp "$tmp/window/zigzag-$f.png" "$figures/window-zigzag-$f.png"; done

# A real run: 4 ranks on a 2x2 mesh, tiny model, 3 steps of ATTENTION2D (overlapped), traced.
run=$tmp/run
mkdir -p "$run"
"$PY" - "$run" <<'PYEOF'
import random, struct, sys
rng = random.Random(1234)
toks = [rng.randrange(500) for _ in range(4000)]
with open(sys.argv[1] + "/train_000.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
    f.write(struct.pack("<%dH" % len(toks), *toks))
PYEOF
bash tests/mpirun.sh 4 "$build/train_gpt" --preset tiny --layers 2 --channels 32 --heads 2 --context 32 \
  --vocab 512 --train-data "$run/train_*.bin" --val-data "" --tokenizer "" --batch 2 --seq-len 32 \
  --steps 3 --lr 1e-2 --warmup 1 --eval-every 0 --sample-length 0 --quiet --peak-gflops 1 \
  --pq 2 --pkv 2 --attention 2d-overlap --trace "$run/trace.json" --out-dir "$run/out" > "$run/train.out" 2>&1 ||
  { tail -n 20 "$run/train.out" >&2; echo "error: the traced 2x2 run of the trainer failed" >&2; exit 1; }
"$PY" tools/check_trace.py "$run/trace.json" --ranks 4 > /dev/null
"$PY" tools/bench_timeline_strip.py "$run/trace.json" "$figures/trace-2x2-2d-overlap.png" \
  --title "train_gpt, 4 ranks, 2x2 mesh, 2d-overlap: the last step"
echo "wrote $out/README.md and $(ls "$figures" | wc -l) pictures in $figures"
