#!/usr/bin/env bash
# --mesh auto (train/mesh_auto.c) under mpirun: the trainer runs the mesh and schedule the cost
# model ranks first for its world size (the same answer as build/costmodel for the same question),
# keeps --dp / --attention given explicitly, and refuses with one clear line when nothing fits the
# memory limit or the cluster file is missing. With `recompute`: it sets --recompute to the
# cheapest mode that fits a memory limit, and keeps an explicit one.
#   tests/test_mesh_auto.sh [recompute]
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TRAIN=${TRAIN:-$BUILD/train_gpt}
COSTMODEL=${COSTMODEL:-$BUILD/costmodel}
PY=${PYTHON:-/usr/bin/python3}
CLUSTER=costmodel/clusters/cpu-local.cluster
export OMP_NUM_THREADS=1
mkdir -p $BUILD/tmp
W=$(mktemp -d $BUILD/tmp/test_mesh_auto.XXXXXX)
fails=0
ok() { echo "  ok    $*"; }
bad() { echo "  FAIL  $*"; fails=$((fails + 1)); }

"$PY" - "$W/train_000.bin" <<'EOF'
import random, struct, sys
rng, n = random.Random(3), 20000
toks = [rng.randrange(256) for _ in range(n)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *toks))
EOF
# Documents of 32 tokens, each begun by token 7 (which nothing else is): every window of 256 starts
# at a multiple of 32, so each sequence holds the documents `build/costmodel --document-length 32`
# prices.
"$PY" - "$W/docs_000.bin" <<'EOF'
import random, struct, sys
rng, n = random.Random(4), 20000
toks = [7 if i % 32 == 0 else rng.randrange(8, 256) for i in range(n)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *toks))
EOF
common=(--preset tiny --layers 2 --channels 64 --heads 4 --vocab 256 --context 256 --seq-len 256
        --batch 1 --steps 2 --warmup 1 --train-data "$W/train_*.bin" --val-data "" --tokenizer ""
        --eval-every 0 --sample-length 0 --no-save --cluster "$CLUSTER" --mesh auto)

# run NAME NP ARGS...: the trainer's output in $W/NAME.out; 0 if it succeeded.
run() {
  local name=$1 np=$2
  shift 2
  timeout 120 bash tests/mpirun.sh "$np" "$TRAIN" "${common[@]}" --out-dir "$W/$name" "$@" \
    > "$W/$name.out" 2>&1
}
# chosen NAME: "dp A x pq B x pkv C with --attention X" from the run's choice line.
chosen() { sed -n 's/^mesh auto: running //p' "$W/$1.out"; }
# ran NAME: the same fields from the mesh line the trainer prints once it is set up, its layer
# names turned into --attention values (without sequence parallelism the layer is "local", which
# the cost model lists as 2d).
ran() {
  sed -n 's/^mesh: world [0-9]* = dp \([0-9]*\) x pq \([0-9]*\) x pkv \([0-9]*\); attention \([a-z0-9-]*\);.*/dp \1 x pq \2 x pkv \3 with --attention \4/p' "$W/$1.out" |
    sed 's/attention2d/2d/; s/--attention local$/--attention 2d/'
}

# recompute: on one rank, a --memory-gb between the configuration's memory with selective and
# without recompute: --mesh auto runs it with --recompute selective; an explicit one is kept.
# PRED ARGS...: the cost model's bytes for this model on one rank.
pred_bytes() {
  "$COSTMODEL" --cluster "$CLUSTER" --preset tiny --layers 2 --channels 64 --heads 4 --vocab 256 \
    --context 256 --seq-len 256 --batch 1 --dp 1 --pq 1 --pkv 1 --attention 2d "$@" |
    sed -n 's/^memory .*(\([0-9]*\) bytes;.*/\1/p'
}
if [ "${1:-}" = recompute ]; then
  none=$(pred_bytes --recompute none); sel=$(pred_bytes --recompute selective)
  gb=$("$PY" -c "import sys; n, s = map(float, sys.argv[1:]); assert s < n; print('%.9g' % ((n + s) / 2 / 2**30))" "$none" "$sel") ||
    { bad "memory with selective ($sel bytes) below none's ($none)"; gb=1; }
  if run rsel 1 --memory-gb "$gb" && grep -q '^mesh auto: --recompute selective (the cheapest' "$W/rsel.out" &&
     grep -q '^  1\. dp 1 x pq 1 x pkv 1, 2d *recompute selective' "$W/rsel.out"; then
    ok "--memory-gb $gb (none $none bytes, selective $sel): ran with --recompute selective"
  else bad "--memory-gb $gb: expected --recompute selective"; tail -n 5 "$W/rsel.out"; fi
  if run rfull 1 --memory-gb "$gb" --recompute full &&
     grep -q '^mesh auto: --recompute full (given)' "$W/rfull.out"; then
    ok "--recompute full given: kept"
  else bad "--recompute full with --mesh auto: not kept"; tail -n 5 "$W/rfull.out"; fi
  want='^error: --mesh auto: no configuration of 1 ranks fits'
  if ! run rnone 1 --memory-gb "$gb" --recompute none && grep -qE "$want" "$W/rnone.out"; then
    ok "--recompute none given: kept, and nothing fits"
  else bad "--recompute none with --memory-gb $gb: expected '$want'"; tail -n 5 "$W/rnone.out"; fi
  if run rauto 1 && grep -q '^mesh auto: --recompute none (nothing to recompute' "$W/rauto.out"; then
    ok "no limit: --recompute none"
  else bad "no limit: expected --recompute none"; tail -n 5 "$W/rauto.out"; fi
  # On 4 layers, a limit between selective's memory on the first 2 and on the first 3: a mode over
  # the fewest layers with which it fits (one layer fewer does not), and the trainer runs it.
  four=(--layers 4)
  s2=$(pred_bytes "${four[@]}" --recompute selective --recompute-num-layers 2)
  s3=$(pred_bytes "${four[@]}" --recompute selective --recompute-num-layers 3)
  gb=$("$PY" -c "print('%.9f' % (($s2 + $s3) / 2 / 2**30))")
  if run rlayers 1 "${four[@]}" --memory-gb "$gb"; then
    line=$(grep '^mesh auto: --recompute ' "$W/rlayers.out")
    mode=$(sed -n 's/^mesh auto: --recompute \([a-z]*\) --recompute-num-layers \([0-9]*\) (the cheapest with which it fits: the fewest layers)$/\1/p' <<< "$line")
    n=$(sed -n 's/^mesh auto: --recompute [a-z]* --recompute-num-layers \([0-9]*\) .*/\1/p' <<< "$line")
    limit=$("$PY" -c "print(int($gb * 2**30))")
    if [ -n "$mode" ] && [ "$n" -ge 2 ] && [ "$n" -lt 4 ] &&
       [ "$(pred_bytes "${four[@]}" --recompute "$mode" --recompute-num-layers "$n")" -le "$limit" ] &&
       [ "$(pred_bytes "${four[@]}" --recompute "$mode" --recompute-num-layers $((n - 1)))" -gt "$limit" ] &&
       grep -q "^memory per device (predicted, rank 0; --recompute $mode on the first $n of 4 layers):" "$W/rlayers.out"; then
      ok "4 layers, --memory-gb $gb (selective on 2 layers $s2 bytes, on 3 $s3): ran --recompute $mode on the first $n, the fewest that fit"
    else bad "4 layers, --memory-gb $gb: expected the fewest layers that fit, found '$line'"; tail -n 5 "$W/rlayers.out"; fi
  else bad "4 layers, --memory-gb $gb: the run failed"; tail -n 5 "$W/rlayers.out"; fi
  if [ "$fails" -eq 0 ]; then rm -rf "$W"; echo "test_mesh_auto recompute: passed"; exit 0; fi
  echo "test_mesh_auto recompute: $fails failure(s); files kept in $W"
  exit 1
fi

# 1. The choice is printed with its candidates, run, and equals the cost model's own first row.
if run auto4 4; then
  c=$(chosen auto4)
  if [ -n "$c" ] && [ "$c" = "$(ran auto4)" ] && grep -q '^  1\. dp ' "$W/auto4.out"; then
    ok "4 ranks: chose and ran $c"
  else
    bad "4 ranks: choice '$c', ran '$(ran auto4)'"
  fi
  first=$("$COSTMODEL" --cluster "$CLUSTER" --preset tiny --layers 2 --channels 64 --heads 4 \
            --vocab 256 --context 256 --seq-len 256 --batch 1 --gpus 4 --top 1 2>&1 |
          awk '$1 == "1" { split($3, m, "x"); printf "dp %s x pq %s x pkv %s with --attention %s\n", $2, m[1], m[2], $4 }')
  if [ "$first" = "$c" ]; then ok "$BUILD/costmodel ranks the same configuration first"
  else bad "$BUILD/costmodel's first row '$first' differs from the trainer's choice '$c'"; fi
else
  bad "4 ranks: the run failed"; tail -n 5 "$W/auto4.out"
fi

# 2. Explicit options win.
if run dp2 4 --dp 2 && chosen dp2 | grep -q '^dp 2 x ' && [ "$(chosen dp2)" = "$(ran dp2)" ]; then
  ok "--dp 2 kept: $(chosen dp2)"
else bad "--dp 2 with --mesh auto: '$(chosen dp2)'"; tail -n 5 "$W/dp2.out"; fi
if run zz 4 --attention zigzag && chosen zz | grep -q 'attention zigzag$' &&
   [ "$(chosen zz)" = "$(ran zz)" ]; then
  ok "--attention zigzag kept: $(chosen zz)"
else bad "--attention zigzag with --mesh auto: '$(chosen zz)'"; tail -n 5 "$W/zz.out"; fi
# Ulysses splits the 4 heads over the P ranks: on 8 ranks the mesh has P = 1, 2 or 4 (never 8).
if run uly 8 --attention ulysses && chosen uly | grep -q 'attention ulysses$' &&
   [ "$(chosen uly)" = "$(ran uly)" ] &&
   chosen uly | awk '{ exit !(4 % ($5 * $8) == 0 && $5 * $8 > 1) }'; then
  ok "--attention ulysses kept, P dividing the 4 heads: $(chosen uly)"
else bad "--attention ulysses with --mesh auto on 8 ranks: '$(chosen uly)'"; tail -n 5 "$W/uly.out"; fi
# Without --a2a-chunks the cost model chose the chunks too: a count dividing the heads per rank,
# printed, and the trainer ran it (named on the mesh line when more than one).
g=$(sed -n 's/^mesh auto: --a2a-chunks \([0-9]*\) (the fastest count dividing the heads per rank)$/\1/p' "$W/uly.out")
if [ -n "$g" ] && chosen uly | awk -v g="$g" '{ exit !((4 / ($5 * $8)) % g == 0) }' &&
   { [ "$g" = 1 ] || grep -q "^mesh: .*; attention ulysses; heads in $g chunks, all-to-alls pipelined;" "$W/uly.out"; }; then
  ok "--attention ulysses without --a2a-chunks: the cost model's count ($g), run"
else bad "--attention ulysses without --a2a-chunks: chunks '$g'"; grep '^mesh' "$W/uly.out"; fi
# USP splits them over the pq ranks of a column, inside a ring over the row: on 8 ranks pq is 2
# or 4 and pkv > 1 (its ends pq = 1 and pkv = 1 are Striped and Ulysses).
if run usp 8 --attention usp && chosen usp | grep -q 'attention usp$' &&
   [ "$(chosen usp)" = "$(ran usp)" ] &&
   chosen usp | awk '{ exit !(4 % $5 == 0 && $5 > 1 && $8 > 1) }'; then
  ok "--attention usp kept, pq dividing the 4 heads: $(chosen usp)"
else bad "--attention usp with --mesh auto on 8 ranks: '$(chosen usp)'"; tail -n 5 "$W/usp.out"; fi
# --a2a-chunks 2 alone: only Ulysses and USP with their heads per rank (4 / P, 4 / pq) in 2 chunks,
# never a mesh without sequence parallelism; the trainer runs what was chosen.
if run chunks 4 --a2a-chunks 2 && chosen chunks | grep -q 'attention \(ulysses\|usp\)$' &&
   [ "$(chosen chunks)" = "$(ran chunks)" ] &&
   chosen chunks | awk '{ s = $NF == "usp" ? $5 : $5 * $8; exit !($5 * $8 > 1 && (4 / s) % 2 == 0) }'; then
  grep -q '^mesh auto: --a2a-chunks 2 (given)$' "$W/chunks.out" ||
    bad "--a2a-chunks 2 with --mesh auto: not printed as given"
  ok "--a2a-chunks 2: an all-to-all schedule whose heads per rank split in 2: $(chosen chunks)"
else bad "--a2a-chunks 2 with --mesh auto on 4 ranks: '$(chosen chunks)'"; tail -n 5 "$W/chunks.out"; fi
# A sliding window: the cost model prices the banded layers (their attention computes less), so
# the choice is build/costmodel's first row for the same window, and the fastest candidate is
# predicted faster than the fastest without one.
# first_tps NAME: tokens/s of the first candidate the run printed.
first_tps() { sed -n 's/^  1\. dp .* \([0-9][0-9]*\) tokens\/s .*/\1/p' "$W/$1.out"; }
if run win 4 --attention-window 32 && [ "$(chosen win)" = "$(ran win)" ]; then
  first=$("$COSTMODEL" --cluster "$CLUSTER" --preset tiny --layers 2 --channels 64 --heads 4 \
            --vocab 256 --context 256 --seq-len 256 --batch 1 --gpus 4 --top 1 --attention-window 32 2>&1 |
          awk '$1 == "1" { split($3, m, "x"); printf "dp %s x pq %s x pkv %s with --attention %s\n", $2, m[1], m[2], $4 }')
  tw=$(first_tps win); tc=$(first_tps auto4)
  if [ "$first" = "$(chosen win)" ] && [ -n "$tw" ] && [ -n "$tc" ] && [ "$tw" -gt "$tc" ] &&
     ! grep -q 'note: the cost model prices causal attention in every layer' "$W/win.out"; then
    ok "--attention-window 32: $(chosen win), $BUILD/costmodel's first row; fastest $tw tokens/s (causal $tc)"
  else bad "--attention-window 32 with --mesh auto: chose '$(chosen win)', $BUILD/costmodel '$first'; fastest $tw tokens/s, causal $tc"; fi
else bad "--attention-window 32 with --mesh auto: '$(chosen win)'"; tail -n 5 "$W/win.out"; fi
# A document mask: the candidates are priced with the documents of the sequences training reads
# first, here 32 tokens each, so the choice and its predicted tokens/s are build/costmodel's first
# row with --document-length 32, faster than causal, and the summary sets the share it priced beside
# the one training measured (here both exact); training data that cannot be read is named.
first_row() {   # ARGS...: build/costmodel's first row as "CONFIG|TOKENS/S"
  "$COSTMODEL" --cluster "$CLUSTER" --preset tiny --layers 2 --channels 64 --heads 4 \
    --vocab 256 --context 256 --seq-len 256 --batch 1 --gpus 4 --top 1 "$@" 2>&1 |
    awk '$1 == "1" { split($3, m, "x"); printf "dp %s x pq %s x pkv %s with --attention %s|%s\n", $2, m[1], m[2], $4, $6 }'
}
if run docs 4 --document-mask 7 --train-data "$W/docs_*.bin" && [ "$(chosen docs)" = "$(ran docs)" ]; then
  want=$(first_row --document-length 32); td=$(first_tps docs); tc=$(first_tps auto4)
  share=$("$COSTMODEL" --cluster "$CLUSTER" --preset tiny --layers 2 --channels 64 --heads 4 \
            --vocab 256 --context 256 --seq-len 256 --batch 1 --dp 4 --attention 2d \
            --document-length 32 | sed -n 's/^documents *\([0-9.]*%\) of the pairs.*/\1/p')
  if [ "$want" = "$(chosen docs)|$td" ] && [ -n "$tc" ] && [ "$td" -gt "$tc" ] && [ "$share" = 12.84% ] &&
     grep -q "^documents: the mask left 12.84% of the attention pairs the MFU counts (rank 0's training batches) (--mesh auto priced 12.84% from the sequences it sampled);" "$W/docs.out" &&
     grep -q "^mesh auto: priced under --document-mask 7 with the documents of the first 16 sequences of --train-data: 32.0 tokens per document, $share of the attention pairs" "$W/docs.out"; then
    ok "--document-mask 7, 32-token documents: $(chosen docs) at $td tokens/s (causal $tc), $BUILD/costmodel's first row; $share of the pairs"
  else bad "--document-mask 7 with --mesh auto: chose '$(chosen docs)' at $td tokens/s, $BUILD/costmodel --document-length 32 '$want', causal $tc, share '$share'"; grep '^mesh auto' "$W/docs.out"; fi
else bad "--document-mask 7 with --mesh auto: '$(chosen docs)'"; tail -n 5 "$W/docs.out"; fi
want="^error: --train-data .*$W/nodata_\*.bin"
if ! run nodata 2 --document-mask 7 --train-data "$W/nodata_*.bin" && grep -qE "$want" "$W/nodata.out"; then
  ok "--document-mask with unreadable training data: the pattern named before any mesh is chosen"
else bad "--document-mask, --train-data missing: expected '$want'"; tail -n 5 "$W/nodata.out"; fi

# 3. Nothing fits, or no cluster file: one line from rank 0, non-zero, nothing run.
want='^error: --mesh auto: no configuration of 4 ranks fits'
if ! run tiny_mem 4 --memory-gb 0.000001 && [ "$(grep -cE "$want" "$W/tiny_mem.out")" = 1 ]; then
  ok "memory limit below every candidate: one clear error"
else bad "--memory-gb 0.000001: expected one line matching '$want'"; tail -n 5 "$W/tiny_mem.out"; fi
want="^error: .*$W/none.cluster"
if ! run nofile 2 --cluster "$W/none.cluster" && grep -qE "$want" "$W/nofile.out"; then
  ok "missing cluster file named in the error"
else bad "--cluster missing: expected '$want'"; tail -n 5 "$W/nofile.out"; fi

if [ "$fails" -eq 0 ]; then rm -rf "$W"; echo "test_mesh_auto: passed"; exit 0; fi
echo "test_mesh_auto: $fails failure(s); files kept in $W"
exit 1
