#!/usr/bin/env bash
# Latency and bandwidth of all-gather, reduce-scatter, all-reduce and grouped send/recv against
# message size on this machine's transport (tools/bench_collectives.c under mpirun), for each
# number of ranks in RANKS, with the alpha-beta fit of each.
#
#   tools/bench_collectives.sh [OUT_DIR]     (env: RANKS="2 4 8", MAX_BYTES, TARGET_S, PROG)
# Writes OUT_DIR/collectives.csv, OUT_DIR/collectives.jsonl (points and fits) and
# OUT_DIR/collectives.png (time against bytes, measured points and fitted lines, one panel per P).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=${1:-$BUILD/bench/collectives}
PROG=${PROG:-$BUILD/tools/bench_collectives}
RANKS=${RANKS:-2 4 8}
MAX_BYTES=${MAX_BYTES:-16777216}
TARGET_S=${TARGET_S:-0.02}
[ -x "$PROG" ] || { echo "error: $PROG: not built (make $PROG)" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found (run tools/setup.sh)" >&2; exit 2; }
mkdir -p "$out"
: > "$out/collectives.jsonl"
echo "op,P,bytes,seconds,reps,algbw_gbs,busbw_gbs" > "$out/collectives.csv"
for p in $RANKS; do
  bash tests/mpirun.sh "$p" "$PROG" --max-bytes "$MAX_BYTES" --target-s "$TARGET_S" \
    --jsonl "$out/p$p.jsonl" --csv "$out/p$p.csv"
  cat "$out/p$p.jsonl" >> "$out/collectives.jsonl"
  tail -n +2 "$out/p$p.csv" >> "$out/collectives.csv"
done

# One data file per (P, op) for gnuplot: bytes, microseconds, fitted microseconds.
python3 - "$out" $RANKS <<'PY'
import json, sys
out, ranks = sys.argv[1], sys.argv[2:]
rows = [json.loads(l) for l in open(out + "/collectives.jsonl")]
fits = {(r["P"], r["op"]): r for r in rows if r["type"] == "fit"}
for r in rows:
    if r["type"] != "collective":
        continue
    f = fits[(r["P"], r["op"])]
    fit_us = 1e6 * (f["alpha_s"] + f["beta_s_per_byte"] * r["bus_bytes"])
    with open("%s/p%d_%s.dat" % (out, r["P"], r["op"]), "a") as d:
        d.write("%.0f %.6g %.6g\n" % (r["bytes"], 1e6 * r["seconds"], fit_us))
PY
n=$(echo $RANKS | wc -w)
{
  echo "set terminal pngcairo size $((520 * n)),440 font ',10' noenhanced"
  echo "set output '$out/collectives.png'"
  echo "set multiplot layout 1,$n title 'collectives on this machine: measured (points) and alpha-beta fits (lines)'"
  echo "set logscale xy; set xlabel 'bytes (nccl-tests convention)'; set ylabel 'time per call (us)'; set key top left"
  for p in $RANKS; do
    echo "set title 'P = $p'"
    plot="plot"
    c=1
    for op in all_gather reduce_scatter all_reduce send_recv; do
      plot="$plot '$out/p${p}_$op.dat' using 1:2 with points pt 7 lc $c title '$op', '' using 1:3 with lines lc $c notitle,"
      c=$((c + 1))
    done
    echo "${plot%,}"
  done
  echo "unset multiplot"
} | gnuplot
rm -f "$out"/p*_*.dat
echo "bench_collectives: $out/collectives.csv, $out/collectives.jsonl, $out/collectives.png"
