#!/usr/bin/env bash
# Draws the loss curve (training loss per step, validation loss per evaluation) of a trainer's
# JSONL log as a PNG with gnuplot, with an optional horizontal reference line (e.g. the unigram
# baseline), each validation set's loss where --val-data named several, and, where the run had
# --mc-eval, its acc_norm on the right-hand axis.
#   usage: tools/plot_loss.sh LOG.jsonl OUT.png [TITLE [BASELINE]]
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = "--help" ]; then
  echo "usage: $0 LOG.jsonl OUT.png [TITLE [BASELINE]]" >&2
  exit 2
fi
log=$1 out=$2 title=${3:-loss} baseline=${4:-}
[ -r "$log" ] || { echo "error: $log: cannot read the log" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found (run tools/setup.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One "step value" pair per line; a resumed run's log may repeat steps, the last one wins.
extract() {   # $1 = type, $2 = field
  awk -v type="\"type\":\"$1\"" -v field="\"$2\":" '
    index($0, type) {
      s = $0; i = index(s, "\"step\":"); j = index(s, field)
      if (i && j) {
        step = substr(s, i + 7) + 0; val = substr(s, j + length(field)) + 0
        v[step] = val; if (!(step in seen)) { seen[step] = 1; order[n++] = step }
      }
    }
    END { for (k = 0; k < n; k++) print order[k], v[order[k]] }' "$log" | sort -n
}
extract step loss > "$tmp/train.dat"
extract eval val_loss > "$tmp/val.dat"
extract mc_eval acc_norm > "$tmp/mc.dat"
# Several validation sets: "step loss1 loss2 ..." per evaluation, and each set's pattern, one a line.
awk 'index($0, "\"type\":\"eval\"") && index($0, "\"val_sets\":[") {
       s = $0; step = substr(s, index(s, "\"step\":") + 7) + 0
       l = substr(s, index(s, "\"val_sets\":[") + 12); l = substr(l, 1, index(l, "]") - 1)
       gsub(",", " ", l); v[step] = l; if (!(step in seen)) { seen[step] = 1; order[n++] = step }
     }
     END { for (k = 0; k < n; k++) print order[k], v[order[k]] }' "$log" | sort -n > "$tmp/sets.dat"
nsets=$(awk 'NR == 1 { print NF - 1 }' "$tmp/sets.dat")
[ -n "$nsets" ] && awk 'index($0, "\"type\":\"val_data\"") {
       s = $0
       while ((i = index(s, "\"pattern\":\"")) > 0) {
         s = substr(s, i + 11); print substr(s, 1, index(s, "\"") - 1)
       }
     }' "$log" | tail -n "$nsets" > "$tmp/sets.txt"
[ -s "$tmp/train.dat" ] || { echo "error: $log: no step records" >&2; exit 2; }
plots="'$tmp/train.dat' using 1:2 with lines lw 1 lc rgb '#4477aa' title 'train'"
[ -s "$tmp/val.dat" ] && plots="$plots, '$tmp/val.dat' using 1:2 with linespoints lw 2 pt 7 lc rgb '#cc3311' title 'validation'"
for ((c = 1; c <= ${nsets:-0}; c++)); do
  name=$(sed -n "${c}p" "$tmp/sets.txt" | sed "s|.*/||; s|'||g")
  plots="$plots, '$tmp/sets.dat' using 1:$((c + 1)) with linespoints dt 2 lw 1 pt 6 title 'validation set $c${name:+ ($name)}'"
done
y2=""
if [ -s "$tmp/mc.dat" ]; then
  plots="$plots, '$tmp/mc.dat' using 1:2 axes x1y2 with linespoints lw 2 pt 5 lc rgb '#228833' title 'mc-eval acc_norm (right)'"
  y2="set y2label 'multiple-choice accuracy (acc_norm)'; set y2range [0:1]; set y2tics; set ytics nomirror"
fi
if [ -n "$baseline" ]; then
  case "$baseline" in *[!0-9.]*) echo "error: BASELINE: expected a number, found '$baseline'" >&2; exit 2 ;; esac
  plots="$plots, $baseline with lines dt 2 lw 2 lc rgb '#555555' title 'unigram baseline'"
fi
gnuplot <<GP
set terminal png size 900,540 noenhanced
set output '$out'
set title '$title'
set xlabel 'step'
set ylabel 'cross-entropy (nats/token)'
set grid
set key top right
$y2
plot $plots
GP
echo "wrote $out ($(wc -l < "$tmp/train.dat") steps, $(wc -l < "$tmp/val.dat") validation losses${nsets:+ of $nsets validation sets}, $(wc -l < "$tmp/mc.dat") accuracies)" >&2
