#!/usr/bin/env bash
# Plain against overlapped communication, measured by the trainer's own timeline: for P = 4 and
# 16 ranks (the CPU trainer under mpirun on this machine by default), each schedule is run with
# --overlap 0 (every transfer waited for as it starts, gradients reduced after backward) and with
# --overlap 1 (transfers in flight during compute, gradient buckets during backward), plus
# ATTENTION2D's ring-pipelined variant 2d-overlap. Per run: mean step time over the steps after
# the first, and the timeline's compute / exposed-communication / wait fractions (rank 0).
#
#   tools/bench_overlap.sh [OUT_DIR]       (env: TRAIN, RANKS="4 16", STEPS, SEQ, EXTRA)
# Writes OUT_DIR/overlap.csv, OUT_DIR/overlap.jsonl, OUT_DIR/overlap.png (step time and exposed
# communication per schedule, plain vs overlapped) and one Chrome trace per P of 2d-overlap.
# On the GPU kit: TRAIN=build/train_gpt_cuda EXTRA="--comm mpi-staged" (ranks share one GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=${1:-$BUILD/bench/overlap}
TRAIN=${TRAIN:-$BUILD/train_gpt}
RANKS=${RANKS:-4 16}
STEPS=${STEPS:-6}
SEQ=${SEQ:-512}
read -r -a extra <<< "${EXTRA:-}"
PY=${PYTHON:-python3}
mkdir -p "$out"
[ -x "$TRAIN" ] || { echo "error: $TRAIN: not built (make $TRAIN)" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found (run tools/setup.sh)" >&2; exit 2; }

# A Markov-chain shard, enough tokens for every run.
"$PY" - "$out/train_000.bin" <<'PY'
import random, struct, sys
rng, n, toks, prev = random.Random(7), 200000, [], 0
for _ in range(n):
    prev = (prev * 7 + 3) % 500 if rng.random() < 0.7 else rng.randrange(500)
    toks.append(prev)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *toks))
PY

mesh_of() { case $1 in 4) echo "--pq 2 --pkv 2" ;; 16) echo "--pq 4 --pkv 4" ;; *) echo "--pkv $1" ;; esac; }
echo "ranks,algorithm,overlap,ms_per_step,compute_frac,exposed_comm_frac,wait_frac" > "$out/overlap.csv"
: > "$out/overlap.jsonl"
for p in $RANKS; do
  read -r -a mesh <<< "$(mesh_of "$p")"
  for run in 2d:0 2d:1 2d-overlap:0 2d-overlap:1 ring:0 ring:1 striped:0 striped:1; do
    algo=${run%:*} ov=${run#*:} dir="$out/p$p-$algo-$ov"
    trace=()
    [ "$algo:$ov" = "2d-overlap:1" ] && trace=(--trace "$out/trace-p$p-2d-overlap.json")
    OMP_NUM_THREADS=1 bash tests/mpirun.sh "$p" "$TRAIN" --preset tiny --layers 4 --channels 128 \
      --heads 4 --context "$SEQ" --vocab 512 --train-data "$out/train_*.bin" --val-data "" \
      --tokenizer "" --batch 2 --seq-len "$SEQ" --steps "$STEPS" --warmup 1 --eval-every 0 \
      --sample-length 0 --no-save --quiet --out-dir "$dir" --attention "$algo" --overlap "$ov" \
      --grad-bucket-mb 0.25 "${mesh[@]}" "${trace[@]}" "${extra[@]}" > "$dir.out" 2>&1 ||
      { echo "error: P=$p $algo overlap $ov failed:" >&2; tail -n 5 "$dir.out" >&2; exit 1; }
    "$PY" - "$dir/log.jsonl" "$p" "$algo" "$ov" "$out/overlap.csv" "$out/overlap.jsonl" <<'PY'
import json, sys
log, p, algo, ov, csv, jl = sys.argv[1:]
recs = [json.loads(l) for l in open(log)]
steps = {r["step"]: r for r in recs if r.get("type") == "step"}   # the last record of a step
timed = [steps[s] for s in sorted(steps)][1:]
mean = lambda k: sum(r[k] for r in timed) / len(timed)
row = dict(ranks=int(p), algorithm=algo, overlap=int(ov), ms_per_step=mean("ms"),
           compute_frac=mean("compute_frac"), exposed_comm_frac=mean("exposed_comm_frac"),
           wait_frac=mean("wait_frac"))
open(csv, "a").write("%d,%s,%d,%.3f,%.4f,%.4f,%.4f\n" % tuple(row[k] for k in
    ("ranks", "algorithm", "overlap", "ms_per_step", "compute_frac", "exposed_comm_frac", "wait_frac")))
open(jl, "a").write(json.dumps(row) + "\n")
print("P=%-3d %-11s overlap %d: %8.1f ms/step, compute %5.1f%%, exposed comm %5.1f%%, wait %5.1f%%" %
      (row["ranks"], algo, row["overlap"], row["ms_per_step"], 100 * row["compute_frac"],
       100 * row["exposed_comm_frac"], 100 * row["wait_frac"]))
PY
  done
done

# Two panels: step time and exposed communication, one cluster per (P, schedule), plain and
# overlapped side by side.
awk -F, 'NR > 1 { key = "P" $1 " " $2; if (!(key in seen)) { seen[key] = 1; order[n++] = key }
               v[key, $3] = $4; e[key, $3] = $6 }
         END { for (i = 0; i < n; i++) { k = order[i]
                 printf "\"%s\" %s %s %s %s\n", k, v[k, 0], v[k, 1], 100 * e[k, 0], 100 * e[k, 1] } }' \
  "$out/overlap.csv" > "$out/overlap.dat"
gnuplot <<GP
set terminal png size 1100,700 noenhanced
set output '$out/overlap.png'
set multiplot layout 2,1 title 'plain (--overlap 0) vs overlapped communication, $(basename "$TRAIN"), T=$SEQ'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set yrange [0:*]
set xtics rotate by -30 font ',9'
set ylabel 'ms per step'
plot '$out/overlap.dat' using 2:xtic(1) title 'plain' lc rgb '#bbbbbb', '' using 3 title 'overlapped' lc rgb '#4477aa'
set ylabel 'exposed communication (%)'
plot '$out/overlap.dat' using 4:xtic(1) title 'plain' lc rgb '#bbbbbb', '' using 5 title 'overlapped' lc rgb '#cc3311'
unset multiplot
GP
echo "wrote $out/overlap.csv, $out/overlap.jsonl, $out/overlap.png"
