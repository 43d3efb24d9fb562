#!/usr/bin/env bash
# Draws the validation loss by position in the sequence (the trainer's --eval-positions entries of
# a JSONL log) as a PNG with gnuplot: one line per evaluation, the last few of the run (older ones
# fainter), at each range's middle position; with an optional vertical line at the original context
# of a context extension (--rope-original-context), past which a model that uses the longer
# context keeps its loss down.
#   usage: tools/plot_positions.sh LOG.jsonl OUT.png [TITLE [ORIGINAL_CONTEXT]]
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = "--help" ]; then
  echo "usage: $0 LOG.jsonl OUT.png [TITLE [ORIGINAL_CONTEXT]]" >&2
  exit 2
fi
log=$1 out=$2 title=${3:-validation loss by position} original=${4:-}
[ -r "$log" ] || { echo "error: $log: cannot read the log" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found (run tools/setup.sh)" >&2; exit 2; }
case "$original" in *[!0-9]*) echo "error: ORIGINAL_CONTEXT: expected a position, found '$original'" >&2; exit 2 ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One block per evaluation ("step" header, then "middle loss" lines), the last 6; a resumed run's
# log may repeat a step, the last entry wins.
awk '
  index($0, "\"type\":\"eval_positions\"") {
    s = $0
    step = substr(s, index(s, "\"step\":") + 7) + 0
    r = substr(s, index(s, "\"ranges\":[") + 10); r = substr(r, 1, index(r, "]]"))
    l = substr(s, index(s, "\"val_loss\":[") + 12); l = substr(l, 1, index(l, "]") - 1)
    gsub(/[\[\]]/, "", r)
    nr = split(r, rr, ","); nl = split(l, ll, ",")
    if (nl == 0 || nr != 2 * nl) next
    block = ""
    for (k = 1; k <= nl; k++) block = block ((rr[2 * k - 1] + rr[2 * k] - 1) / 2) " " ll[k] "\n"
    if (!(step in seen)) { seen[step] = 1; order[n++] = step }
    data[step] = block
  }
  END {
    for (k = (n > 6 ? n - 6 : 0); k < n; k++) printf "# step %d\n%s\n\n", order[k], data[order[k]]
  }' "$log" > "$tmp/pos.dat"
blocks=$(grep -c '^# step' "$tmp/pos.dat" || true)
[ "$blocks" -gt 0 ] || { echo "error: $log: no eval_positions records (train with --eval-positions K)" >&2; exit 2; }
plots="" i=0
for step in $(sed -n 's/^# step //p' "$tmp/pos.dat"); do
  shade=$(( (blocks - 1 - i) * 150 / (blocks > 1 ? blocks - 1 : 1) ))   # the last evaluation darkest
  color=$(printf '#%02x%02x%02x' "$shade" "$shade" 255)
  plots="$plots${plots:+, }'$tmp/pos.dat' index $i using 1:2 with linespoints lw 2 pt 7 lc rgb '$color' title 'step $step'"
  i=$((i + 1))
done
marks=""
[ -n "$original" ] && marks="set arrow from $original, graph 0 to $original, graph 1 nohead dt 2 lw 2 lc rgb '#555555'; set label 'original context' at $original, graph 0.95 offset 1,0"
gnuplot <<GP
set terminal png size 900,540 noenhanced
set output '$out'
set title '$title'
set xlabel 'position in the sequence'
set ylabel 'validation cross-entropy (nats/token)'
set grid
set key top right
$marks
plot $plots
GP
echo "wrote $out ($blocks evaluations, $(grep -c '^[0-9]' "$tmp/pos.dat") points)" >&2
