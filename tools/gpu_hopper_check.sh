#!/usr/bin/env bash
# The Hopper kernels on an H100 / H200 in one short call: the PTX wrappers' known answers against the
# hardware, the attention tests with each Hopper kernel alone and both, the attention benchmark beside
# flash and cuDNN SDPA, and Nsight Compute on the Hopper kernels. Every step runs under its own time
# limit (a kernel that hangs costs that step only) and the whole run under a deadline (steps that
# would pass it are skipped and said so).
#
# usage: tools/gpu_hopper_check.sh --bundle DIR --out DIR [--deadline SECONDS] [--steps LIST]
#   --bundle DIR     a GPU bundle (make gpu-bundle)
#   --out DIR        summary.txt (one line per step, then the attention table) and logs.tgz (each
#                    step's log, the benchmark's CSV/JSONL, the Nsight Compute reports)
#   --deadline S     seconds for the whole run (default 540: a device call's 600 less the unpacking;
#                    the steps take about 330 s when everything passes, kit-bench, last, about 140)
#   --steps LIST     comma-separated, from info,ptx,tests,sanitize,bench,window,train,ncu,kit
#                    (default all; sanitize runs only when a Hopper test failed; window: the
#                    benchmark's current kernels (the Hopper ones) and the sm_80 ones under a
#                    sliding window of 1024 tokens, and under documents of 1024 tokens (rows
#                    "documents" and "docs-sm80"), and the current kernels with 8 key/value heads
#                    (grouped-query attention, rows "gqa-8"), into attention_table_window.txt; train: the trainer's
#                    tokens/s with the sm_80 kernels, with ATTENTION_*_KERNEL=auto, and with the
#                    Hopper kernels' next forms (sm90-next) where tests ran and passed them,
#                    gpt3-125m at T = 1024 with and without --cuda-graph 1 (and with it and
#                    --timeline 1), and
#                    gpt3-2.7b at T = 8192 with --attention-window 1024 in every second layer; kit:
#                    gpu_check.sh --bench, the trainer beside PyTorch eager and torch.compile,
#                    its report copied to --out as kit_bench_report.md and .jsonl)
#   --hs LIST, --T LIST, --tokens N, --variants LIST   the benchmark's shapes and variants
#                    (attention_bench.sh's; default 64,80,128; 1024,2048,4096,8192,16384; 16384;
#                    current,sm80,sm90-next)
#   --forms LIST     variants timed in a step and table of their own (attention_table_forms.txt), after
#                    the benchmark where sm90-next passed its tests, else last: by default sm90 and each
#                    of sm90-next's forms alone (sm90-n128, sm90-rows192, sm90-persistent, sm90-hs80,
#                    sm90-pingpong, and pingpong's parts sm90-regs and sm90-early), the backward's two
#                    dS^T buffers (sm90-ds2) and 128-query tiles at HS 64 (sm90-q128), each where its
#                    tests passed, so that one call says which form helps; a form that hangs costs
#                    that step only ('' = none)
#   --test-limit S   seconds for each attention test step (default 60: 1.5 s on an H200 when they
#                    pass, and a hang costs this much)
# The same steps run on a bundle of host-runtime programs (make gpu-bundle-host) at toy sizes:
# tests/test_gpu_kit.sh hopper-check.
# Exit status 0 when every step that ran passed.
set -u
bundle="" out="" deadline=540 steps=info,ptx,tests,sanitize,bench,window,train,ncu,kit
hs=64,80,128 Ts=1024,2048,4096,8192,16384 tokens=16384 variants=current,sm80,sm90-next
forms=sm90,sm90-n128,sm90-rows192,sm90-persistent,sm90-hs80,sm90-regs,sm90-early,sm90-pingpong,sm90-ds2,sm90-q128 test_limit=60
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "error: $1: expected a value, found the end of the command line" >&2; exit 2; }
  case "$1" in
    --bundle) bundle=$2 ;; --out) out=$2 ;; --deadline) deadline=$2 ;; --steps) steps=$2 ;;
    --hs) hs=$2 ;; --T) Ts=$2 ;; --tokens) tokens=$2 ;; --variants) variants=$2 ;; --forms) forms=$2 ;;
    --test-limit) test_limit=$2 ;;
    *) echo "error: unknown option '$1' (expected --bundle --out --deadline --steps --hs --T --tokens --variants --forms --test-limit)" >&2; exit 2 ;;
  esac
  shift 2
done
[ -n "$bundle" ] && [ -f "$bundle/MANIFEST" ] || { echo "error: --bundle: expected a GPU bundle folder with a MANIFEST, found '${bundle}'" >&2; exit 2; }
[ -n "$out" ] || { echo "error: --out: expected a folder" >&2; exit 2; }
case "$deadline" in ''|*[!0-9]*) echo "error: --deadline: expected whole seconds, found '$deadline'" >&2; exit 2 ;; esac
case "$test_limit" in ''|*[!0-9]*|0) echo "error: --test-limit: expected whole seconds above 0, found '$test_limit'" >&2; exit 2 ;; esac
GPU_BUNDLE=$(cd "$bundle" && pwd)
export GPU_BUNDLE
. "$GPU_BUNDLE/tools/bundle_env.sh" || exit 1
X=$GPU_BUNDLE/libexec
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
LOGS=$(mktemp -d /tmp/hopper-check.XXXXXX)
SUMMARY=$out/summary.txt
: > "$SUMMARY"
START=$(date +%s)
failures=0
wants() { case ",$steps," in *",$1,"*) return 0 ;; esac; return 1; }
# without LIST NAME...: the comma-separated LIST less the NAMEs.
without() {
  local list=",$1,"; shift
  for n in "$@"; do list=${list//,$n,/,}; done
  list=${list#,}; printf '%s' "${list%,}"
}
say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$SUMMARY"; }

# step NAME LIMIT COMMAND...: runs COMMAND with its output in logs/NAME.log under LIMIT seconds (less
# when the deadline is nearer; skipped under 10 s). Sets RC (124/137: killed at its limit).
step() {
  local name=$1 limit=$2; shift 2
  local left=$(( deadline - ($(date +%s) - START) ))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 10 ]; then RC=skipped; say "$name: skipped (deadline)"; return; fi
  local t0; t0=$(date +%s.%N)
  timeout -s KILL "$limit" "$@" > "$LOGS/$name.log" 2>&1 < /dev/null
  RC=$?
  local took; took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  local what="exit $RC"
  [ "$RC" = 137 ] && what="killed at its limit of $limit s (a hang?)"
  say "$name: $what, $took s; $(grep -cE '^ok  ' "$LOGS/$name.log") ok, $(grep -cE '^FAIL' "$LOGS/$name.log") FAIL"
  if [ "$RC" != 0 ]; then
    failures=$((failures + 1))
    { grep -E '^FAIL|error' "$LOGS/$name.log" | head -n 8; tail -n 4 "$LOGS/$name.log"; } | sed 's/^/    | /' | tee -a "$SUMMARY"
  fi
}

if wants info; then
  step nvidia-smi 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
  sed 's/^/    /' "$LOGS/nvidia-smi.log" | tee -a "$SUMMARY"
  step gpu_info 30 "$X/gpu_info"
fi

if wants ptx; then
  # One process per group: a faulting wrapper (a sticky error) leaves the other groups checked.
  RC_STORE=0
  for g in base mbarrier,named tma store wgmma; do step "test_ptx-${g/,/-}" 60 "$X/test_ptx" --only "$g"; [ "$g" = store ] && RC_STORE=$RC; done
  # Stream capture and graphs on the hardware, which the trainer's --cuda-graph 1 relies on.
  step test_graphs 60 "$X/test_graphs"
  # A failed store group: one store per process (SWIZZLE C0 C1 REDUCE), to find the rule it breaks.
  if [ "$RC_STORE" != 0 ] && [ "$RC_STORE" != skipped ]; then
    for c in "0 20 15 0" "3 0 3 0" "3 4 3 0" "3 -4 3 0" "0 -4 3 0" "3 4 6 1" "3 -4 3 1" "0 28 -2 1" "0 -4 3 1" "3 0 -2 0"; do
      step "store-case-${c// /_}" 20 "$X/test_ptx" --store-case $c
    done
  fi
fi

hopper_failed="" next_ok=""
if wants tests; then
  # The default kernels (auto: both Hopper kernels where they run), the sm_80 kernels everywhere,
  # then each Hopper kernel alone: a failure names its kernel.
  step tests-default "$test_limit" "$X/test_attention_cuda"
  step tests-sm80 "$test_limit" env ATTENTION_FWD_KERNEL=sm80 ATTENTION_BWD_KERNEL=sm80 "$X/test_attention_cuda"
  step tests-fwd-sm90 "$test_limit" env ATTENTION_FWD_KERNEL=sm90 ATTENTION_BWD_KERNEL=sm80 "$X/test_attention_cuda"
  [ "$RC" = 0 ] || hopper_failed="$hopper_failed fwd"
  step tests-bwd-sm90 "$test_limit" env ATTENTION_FWD_KERNEL=sm80 ATTENTION_BWD_KERNEL=sm90 "$X/test_attention_cuda"
  [ "$RC" = 0 ] || hopper_failed="$hopper_failed bwd"
  # The Hopper kernels' candidate forms (the benchmark's sm90-next, not the default): the forward's
  # S by m64n128k16, at HS 64 192-row tiles (three consumers), on the persistent grid (capped at 5
  # blocks in the tests, so a block runs several tiles on their small shapes), at HS 80 P V, dV and dK by
  # m64n80k16, the backward's GEMMs overlapped, K, V in registers at HS 64, the next query tile's
  # S^T issued behind dQ and at HS 64 the consumers taking turns (pingpong). Their failure drops
  # them only.
  next_env=(ATTENTION_FWD_KERNEL=sm90 ATTENTION_BWD_KERNEL=sm90 ATTENTION_FWD_HOPPER=n128 ATTENTION_FWD_HOPPER_ROWS=192
            ATTENTION_FWD_HOPPER_GRID=persistent ATTENTION_HOPPER_HS80=exact ATTENTION_BWD_HOPPER=pingpong)
  step tests-sm90-next "$test_limit" env "${next_env[@]}" ATTENTION_FWD_HOPPER_BLOCKS=5 "$X/test_attention_cuda"
  next_ok=1
  if [ "$RC" != 0 ]; then
    next_ok=""
    variants=$(without "$variants" sm90-next)
    say "the Hopper kernels' next forms failed their tests: left out of the benchmark (variants $variants)"
    SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -n 1)
    wants sanitize && [ -n "$SAN" ] && step memcheck-sm90-next 120 env "${next_env[@]}" ATTENTION_FWD_HOPPER_BLOCKS=5 "$SAN" --tool memcheck \
      --print-limit 20 "$X/test_attention_cuda" --quick
  fi
  # The backward's forms outside sm90-next, each alone: ds2 (early with two dS^T buffers) and q128
  # (overlap with 128-query tiles at HS 64). A failure drops the form from the forms.
  for form in ds2 q128; do
    step "tests-bwd-$form" "$test_limit" env ATTENTION_FWD_KERNEL=sm80 ATTENTION_BWD_KERNEL=sm90 ATTENTION_BWD_HOPPER=$form \
      "$X/test_attention_cuda"
    if [ "$RC" != 0 ] && [[ ",$forms," == *,sm90-$form,* ]]; then
      forms=$(without "$forms" "sm90-$form")
      say "the backward's $form form failed its tests: left out of the forms (${forms:-none})"
    fi
  done
  grep -hE 'kernel|ran' "$LOGS/tests-fwd-sm90.log" "$LOGS/tests-bwd-sm90.log" 2> /dev/null | grep -iE 'hopper|sm90' | head -n 4 | sed 's/^/    /' | tee -a "$SUMMARY"
fi

if wants sanitize && [ -n "$hopper_failed" ]; then
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -n 1)
  for k in $hopper_failed; do
    if [ "$k" = fwd ]; then envs=(ATTENTION_FWD_KERNEL=sm90 ATTENTION_BWD_KERNEL=sm80); else envs=(ATTENTION_FWD_KERNEL=sm80 ATTENTION_BWD_KERNEL=sm90); fi
    [ -n "$SAN" ] && step "memcheck-$k" 120 env "${envs[@]}" "$SAN" --tool memcheck --print-limit 20 "$X/test_attention_cuda" --quick
  done
fi

# A Hopper kernel that failed its tests is left out of what follows (it may hang).
if [ -n "$hopper_failed" ]; then
  variants=$(without "$variants" sm90 sm90-next)
  say "the Hopper kernels failed (${hopper_failed# }): the sm_80 kernels from here on (ATTENTION_*_KERNEL=sm80), benchmark variants $variants"
  export ATTENTION_FWD_KERNEL=sm80 ATTENTION_BWD_KERNEL=sm80
fi

# bench_table NAME VARIANTS LIMIT FILE: the benchmark's step NAME, its table copied to FILE in --out
bench_table() {
  step "$1" "$3" env ATTENTION_BENCH="$X/attention_bench" bash "$GPU_BUNDLE/tools/attention_bench.sh" \
    --out "$LOGS/$1" --variants "$2" --hs "$hs" --T "$Ts" --tokens "$tokens" --reps 10 --warmup 2
  [ -f "$LOGS/$1/table.txt" ] && cp "$LOGS/$1/table.txt" "$out/$4"
}
# The forms alone: not after a failed Hopper kernel; last when their combination failed its tests.
forms_when=""
if wants bench && [ -n "$forms" ] && [ -z "$hopper_failed" ]; then
  forms_when=last
  { ! wants tests || [ -n "$next_ok" ]; } && forms_when=next
fi

if wants bench; then
  bench_table attention-bench "$variants" 240 attention_table.txt
  [ "$forms_when" = next ] && bench_table attention-bench-forms "$forms" 180 attention_table_forms.txt
fi

if wants window; then
  # Sliding-window attention (the trainer's --attention-window): the current kernels (on an H100 or
  # H200 the Hopper kernels' LOWER instances) beside the sm_80 key-tile kernels that served windowed
  # calls before them, TFLOP/s on the window's pairs; beside the causal rows of the benchmark above.
  step attention-bench-window 120 "$X/attention_bench" --window 1024 --variants current,sm80 --hs "$hs" --T "$Ts" \
    --tokens "$tokens" --reps 10 --warmup 2 --jsonl "$LOGS/attention-bench-window.jsonl"
  grep -E '^(variant|current|sm80) ' "$LOGS/attention-bench-window.log" > "$out/attention_table_window.txt"
  # Document masking (the trainer's --document-mask), packed documents of 1024 tokens: the same
  # kernels, TFLOP/s on the pairs left (rows "documents" and "docs-sm80").
  step attention-bench-documents 120 "$X/attention_bench" --documents 1024 --variants current,sm80 --hs "$hs" --T "$Ts" \
    --tokens "$tokens" --reps 10 --warmup 2 --jsonl "$LOGS/attention-bench-documents.jsonl"
  grep -E '^(current|sm80) ' "$LOGS/attention-bench-documents.log" | sed 's/^current  /documents/; s/^sm80     /docs-sm80/' \
    >> "$out/attention_table_window.txt"
  # Grouped-query attention (the trainer's --kv-heads), 8 key/value heads: the current kernels with
  # the launchers' widening of K and V and summing of dK and dV around them (rows "gqa-8"), to set
  # beside the causal rows of the same shapes: what the widening costs.
  step attention-bench-gqa 120 "$X/attention_bench" --kv-heads 8 --variants current --hs "$hs" --T "$Ts" \
    --tokens "$tokens" --reps 10 --warmup 2 --jsonl "$LOGS/attention-bench-gqa.jsonl"
  grep -E '^current ' "$LOGS/attention-bench-gqa.log" | sed 's/^current  /gqa-8    /' >> "$out/attention_table_window.txt"
fi

if wants train; then
  # The step with the sm_80 attention kernels, then with the Hopper ones (the default where they
  # run), then with their next forms (sm90-next) where tests ran and passed them.
  fort=(--train-data "$GPU_BUNDLE/data/fortunes/fortunes_train_*.bin" --val-data "" --tokenizer "" --sample-length 0
        --no-save --quiet --warmup 0)
  kernels=sm80; [ -z "$hopper_failed" ] && kernels="sm80 auto"
  [ -z "$hopper_failed" ] && [ -n "$next_ok" ] && kernels="$kernels next"
  for run in gpt3-125m:8:1024:20 gpt3-2.7b:1:8192:6; do
    IFS=: read -r preset b t n <<< "$run"
    for k in $kernels; do
      name=train-$preset-$t-$k
      envs=(ATTENTION_FWD_KERNEL=$k ATTENTION_BWD_KERNEL=$k)
      [ "$k" = next ] && envs=("${next_env[@]}")
      step "$name" 120 env "${envs[@]}" "$X/train_gpt_cuda" --preset "$preset" \
        --context "$t" --batch "$b" --seq-len "$t" --steps "$n" "${fort[@]}" --out-dir "$LOGS/$name"
      s=$(grep '"type":"summary"' "$LOGS/$name/log.jsonl" 2> /dev/null | tail -n 1)
      say "    $preset B=$b T=$t kernels $k: $(printf '%s' "$s" | grep -oE '"(tokens_per_s|ms_per_step|forward_ms|backward_ms|mfu)":[-0-9.e+]*' | tr '\n' ' ')"
    done
  done
  # CUDA graphs (--cuda-graph 1) beside the same run without, both without the timeline, the
  # default kernels: where the host's launch rate sets the pace, gpt3-125m at T = 1024, graphs
  # should show. Then graphs with the timeline inside them (event record nodes pointed at each
  # step's events before every launch): what timing the graphs costs.
  for gt in 0:0 1:0 1:1; do
    IFS=: read -r g tl <<< "$gt"
    name=train-gpt3-125m-1024-graph$g-timeline$tl
    step "$name" 120 "$X/train_gpt_cuda" --preset gpt3-125m --context 1024 --batch 8 --seq-len 1024 --steps 20 \
      --timeline "$tl" --cuda-graph $g "${fort[@]}" --out-dir "$LOGS/$name"
    s=$(grep '"type":"summary"' "$LOGS/$name/log.jsonl" 2> /dev/null | tail -n 1)
    say "    gpt3-125m B=8 T=1024 --timeline $tl --cuda-graph $g: $(printf '%s' "$s" | grep -oE '"(tokens_per_s|ms_per_step|forward_ms|backward_ms|mfu)":[-0-9.e+]*' | tr '\n' ' ')"
  done
  # Banded layers, as GPT-3's: a window of 1024 in every second layer, beside the dense run above
  # (MFU on the pairs the mask leaves).
  name=train-gpt3-2.7b-8192-window1024
  step "$name" 120 "$X/train_gpt_cuda" --preset gpt3-2.7b --context 8192 --batch 1 --seq-len 8192 --steps 6 \
    --attention-window 1024 --window-every 2 "${fort[@]}" --out-dir "$LOGS/$name"
  s=$(grep '"type":"summary"' "$LOGS/$name/log.jsonl" 2> /dev/null | tail -n 1)
  say "    gpt3-2.7b B=1 T=8192 window 1024 every 2nd layer: $(printf '%s' "$s" | grep -oE '"(tokens_per_s|ms_per_step|forward_ms|backward_ms|mfu)":[-0-9.e+]*' | tr '\n' ' ')"
fi

if wants ncu && [ -z "$hopper_failed" ]; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -n 1)
  if [ -z "$NCU" ]; then say "ncu: not found"; else
    # The default forms at each head size, then the next forms (where they passed their tests) at
    # HS 64 and 128, whose gaps to cuDNN they aim at.
    ncu_runs="sm90:128 sm90:80 sm90:64"
    [ -n "$next_ok" ] && ncu_runs="$ncu_runs sm90-next:64 sm90-next:128"
    for k in hopper_forward_kernel hopper_backward_kernel; do
      for r in $ncu_runs; do
        v=${r%:*} h=${r#*:} name=ncu-$k-$h
        [ "$v" = sm90 ] || name=ncu-$k-$h-next
        step "$name" 60 "$NCU" --clock-control none --kernel-name "regex:$k" --launch-count 1 \
          --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
          "$X/attention_bench" --variants "$v" --hs "$h" --T 8192 --reps 1 --warmup 1 --no-check
        grep -E 'Duration|Compute \(SM\) Throughput|DRAM Throughput|Registers Per|Achieved Occupancy' "$LOGS/$name.log" |
          head -n 5 | sed "s/^/    $k $v HS $h: /" | tee -a "$SUMMARY"
      done
    done
  fi
fi

[ "$forms_when" = last ] && bench_table attention-bench-forms "$forms" 180 attention_table_forms.txt

if wants kit; then
  step kit-bench 300 bash "$GPU_BUNDLE/tools/gpu_check.sh" --bench --out "$LOGS/kit"
  for f in md jsonl; do [ -f "$LOGS/kit/gpu_report.$f" ] && cp "$LOGS/kit/gpu_report.$f" "$out/kit_bench_report.$f"; done
  grep -E 'tokens/s|x flash|PASS|FAIL' "$LOGS/kit-bench.log" | tail -n 20 | sed 's/^/    /' | tee -a "$SUMMARY"
fi

say "done: $failures step(s) failed"
tar czf "$out/logs.tgz" -C "$LOGS" . 2> /dev/null
[ -f "$out/attention_table.txt" ] && cat "$out/attention_table.txt"
[ -f "$out/attention_table_forms.txt" ] && cat "$out/attention_table_forms.txt"
[ -s "$out/attention_table_window.txt" ] && cat "$out/attention_table_window.txt"
[ "$failures" -eq 0 ]
