#!/usr/bin/env bash
# make bench-generate: build/generate on a random model (4 layers, C = 128) with a long prompt,
# 1 vs P ranks, Tree vs Ring decoding: prefill and decode tokens/s and the attention bytes per
# decoded token on rank 0, as OUT/generate.txt and OUT/generate.png.
#   tools/bench_generate.sh OUT [PROMPT_TOKENS [NEW_TOKENS]]
set -eu
BUILD=${BUILD:-build}
out=$1
n=${2:-2048}
new=${3:-32}
mkdir -p "$out"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_ess_singleton_isolated=1
model=$out/bench_model.bin
$BUILD/tests/test_generate --write-model "$model" --vocab 512 --context $((n + new + 8)) \
  --layers 4 --channels 128 --heads 4
prompt=$(awk -v n="$n" 'BEGIN { x = 3; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", (i ? "," : ""), int(x / 256) % 512 } }')
table=$out/generate.txt
printf '%-6s %-6s %-6s %14s %14s %16s\n' ranks mesh decode prefill_tok/s decode_tok/s bytes/token > "$table"
row=0
for cfg in "1 1 1 tree" "2 1 2 tree" "2 1 2 ring" "4 2 2 tree" "4 2 2 ring"; do
  set -- $cfg
  np=$1 pq=$2 pkv=$3 algo=$4
  args=(--model "$model" --prompt-ids "$prompt" --greedy --max-new-tokens "$new" --decode "$algo")
  if [ "$np" -eq 1 ]; then $BUILD/generate "${args[@]}" >/dev/null 2>"$out/err"
  else bash tests/mpirun.sh "$np" $BUILD/generate --pq "$pq" --pkv "$pkv" "${args[@]}" >/dev/null 2>"$out/err"; fi
  pre=$(sed -n 's/^prefill: .* s, \([0-9.]*\) tokens\/s.*/\1/p' "$out/err")
  dec=$(sed -n 's/^decode: .* s, \([0-9.]*\) tokens\/s.*/\1/p' "$out/err")
  bytes=$(sed -n 's/.*last \([0-9]*\);.*/\1/p' "$out/err")
  for v in "$pre" "$dec" "$bytes"; do   # a changed report line must not pass as a number
    [[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "error: bench_generate: cannot read the report of $np ranks ($algo): '$v'" >&2; cat "$out/err" >&2; exit 1; }
  done
  printf '%-6s %-6s %-6s %14s %14s %16s\n' "$np" "${pq}x${pkv}" "$algo" "$pre" "$dec" "$bytes" >> "$table"
  row=$((row + 1))
done
rm -f "$out/err" "$model"
cat "$table"
gnuplot <<GP
set terminal pngcairo size 1000,420
set output "$out/generate.png"
set multiplot layout 1,2 title "build/generate: $n-token prompt, $new new tokens, 4 layers C=128 (CPU, 1 thread per rank)"
set style data histograms
set style fill solid 0.8
set xtics rotate by -20
set ylabel "tokens/s"
set key top right
plot "$table" every ::1 using 4:xtic(sprintf("%s %s",stringcolumn(2),stringcolumn(3))) title "prefill", \
     "" every ::1 using 5 title "decode"
set ylabel "bytes per decoded token (rank 0)"
set logscale y
plot "$table" every ::1 using (\$6 > 0 ? \$6 : 1):xtic(sprintf("%s %s",stringcolumn(2),stringcolumn(3))) title "attention bytes"
unset multiplot
GP
echo "wrote $table and $out/generate.png"
