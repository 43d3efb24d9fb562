#!/usr/bin/env bash
# Our attention variants beside PyTorch's flash and cuDNN SDPA, in one table: runs attention_bench
# (tools/attention_bench.cu) and tools/attention_bench_sdpa.py on the same shapes, then joins their
# CSV rows on (HS, T, B, NH). After the rows, the fastest variant per shape in each direction
# (among the rows whose spot check passed) against the run's first variant, flash and cuDNN: the
# form a GPU run says to make the default.
#
# usage: tools/attention_bench.sh [--out DIR] [OPTION...]
#   OPTION: attention_bench's (--hs, --T, --tokens, --heads, --reps, --warmup go to both programs;
#   --variants and --no-check to ours only). --out DIR (default attention_bench_out) receives
#   ours.csv, ours.jsonl, sdpa.csv, sdpa.jsonl and table.txt.
# The program: $ATTENTION_BENCH, else bin/attention_bench of the GPU bundle this script is in, else
# build/attention_bench (make attention-bench). Python: $PYTHON, else python3 (one with a CUDA torch
# for the SDPA columns; without one they read n/a).
# Exit status: attention_bench's (1: a variant failed its spot check), else the SDPA script's.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=attention_bench_out
both=() ours_only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "error: --out: expected a folder, found the end of the command line" >&2; exit 2; }
           out=$2; shift 2 ;;
    --variants) [ $# -ge 2 ] || { echo "error: --variants: expected a value, found the end of the command line" >&2; exit 2; }
                ours_only+=("$1" "$2"); shift 2 ;;
    --no-check) ours_only+=("$1"); shift ;;
    --hs|--T|--tokens|--heads|--reps|--warmup)
      [ $# -ge 2 ] || { echo "error: $1: expected a value, found the end of the command line" >&2; exit 2; }
      both+=("$1" "$2"); shift 2 ;;
    --window) echo "error: --window: PyTorch's SDPA has no sliding window to set beside ours; time windows with attention_bench --window alone" >&2; exit 2 ;;
    --documents) echo "error: --documents: this comparison runs PyTorch's SDPA on causal masks only; time document masks with attention_bench --documents alone" >&2; exit 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "error: unknown option '$1' (expected one of --out --variants --no-check --hs --T --tokens --heads --reps --warmup --help)" >&2; exit 2 ;;
  esac
done

bench=${ATTENTION_BENCH:-}
if [ -z "$bench" ]; then
  for c in "$here/../bin/attention_bench" "$here/../build/attention_bench"; do
    [ -x "$c" ] && { bench=$c; break; }
  done
fi
[ -n "$bench" ] && [ -x "$bench" ] ||
  { echo "error: attention_bench: expected a program (\$ATTENTION_BENCH, bin/attention_bench or build/attention_bench: make attention-bench), found '${bench:-none}'" >&2; exit 2; }
py=${PYTHON:-python3}
mkdir -p "$out" || exit 2

"$bench" "${both[@]}" "${ours_only[@]}" --csv "$out/ours.csv" --jsonl "$out/ours.jsonl"
rc_ours=$?
[ $rc_ours -eq 2 ] && exit 2   # a bad command line: its one-line error is above
"$py" "$here/attention_bench_sdpa.py" "${both[@]}" --csv "$out/sdpa.csv" --jsonl "$out/sdpa.jsonl"
rc_sdpa=$?
[ -s "$out/sdpa.csv" ] || echo "source,variant" > "$out/sdpa.csv"

# ratio = our TFLOP/s / SDPA's (> 1: faster than SDPA); n/a where a side has no time.
awk -F, '
  function cell(v) { return v == "" ? "n/a" : v + 0 >= 10 ? sprintf("%.1f", v) : sprintf("%.3g", v) }
  function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "n/a" : sprintf("%.2f", a / b) }
  FNR == 1 { next }
  FILENAME ~ /sdpa\.csv$/ { k = $4 "," $5 "," $6 "," $7; f[$2, k] = $12; g[$2, k] = $13; next }
  { rows[++n] = $0 }
  END {
    print "== attention, causal, TFLOP/s (4*HS fwd, 10*HS bwd per visible pair); x flash = ours / flash SDPA =="
    printf "%-10s %4s %6s %9s | %7s %7s %7s %7s %7s | %7s %7s %7s %7s %7s | %s\n", "variant", "HS", "T", "B x NH",
           "fwd", "flash", "cudnn", "x flash", "x cudnn", "bwd", "flash", "cudnn", "x flash", "x cudnn", "check"
    for (i = 1; i <= n; i++) {
      split(rows[i], r, ",")
      k = r[4] "," r[5] "," r[6] "," r[7]
      printf "%-10s %4s %6s %9s | %7s %7s %7s %7s %7s | %7s %7s %7s %7s %7s | %s\n", r[2], r[4], r[5], r[6] " x " r[7],
             cell(r[12]), cell(f["flash", k]), cell(f["cudnn", k]), ratio(r[12], f["flash", k]), ratio(r[12], f["cudnn", k]),
             cell(r[13]), cell(g["flash", k]), cell(g["cudnn", k]), ratio(r[13], g["flash", k]), ratio(r[13], g["cudnn", k]),
             r[17]
      # Per shape: the first variant (base), and the fastest in each direction among the rows
      # whose spot check passed.
      if (!(k in base_f)) { keys[++nk] = k; base_f[k] = r[12]; base_b[k] = r[13] }
      if (r[17] != "ok") continue
      if (r[12] != "" && (!(k in best_f) || r[12] + 0 > best_f[k] + 0)) { best_f[k] = r[12]; name_f[k] = r[2] }
      if (r[13] != "" && (!(k in best_b) || r[13] + 0 > best_b[k] + 0)) { best_b[k] = r[13]; name_b[k] = r[2] }
    }
    # The form a GPU run says to make the default, against the base, flash and cuDNN.
    print ""
    print "== fastest variant per shape (rows whose check is ok); x base = its TF/s / the first variant'"'"'s =="
    printf "%4s %6s | %-15s %7s %6s %7s %7s | %-15s %7s %6s %7s %7s\n", "HS", "T", "fwd fastest", "TF/s", "x base",
           "x flash", "x cudnn", "bwd fastest", "TF/s", "x base", "x flash", "x cudnn"
    for (j = 1; j <= nk; j++) {
      k = keys[j]
      split(k, shape, ",")
      printf "%4s %6s | %-15s %7s %6s %7s %7s | %-15s %7s %6s %7s %7s\n", shape[1], shape[2],
             (k in name_f) ? name_f[k] : "none", cell(best_f[k]), ratio(best_f[k], base_f[k]),
             ratio(best_f[k], f["flash", k]), ratio(best_f[k], f["cudnn", k]),
             (k in name_b) ? name_b[k] : "none", cell(best_b[k]), ratio(best_b[k], base_b[k]),
             ratio(best_b[k], g["flash", k]), ratio(best_b[k], g["cudnn", k])
    }
  }' "$out/sdpa.csv" "$out/ours.csv" | tee "$out/table.txt"
echo "attention_bench.sh: $out/ (ours.csv, sdpa.csv, their .jsonl, table.txt)"
[ $rc_ours -ne 0 ] && exit $rc_ours
exit $rc_sdpa
