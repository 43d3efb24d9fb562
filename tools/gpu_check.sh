#!/usr/bin/env bash
# The GPU check: run inside the GPU bundle (`make gpu-bundle`) on a GPU box, it tells in one command
# whether the CUDA path is right and how fast it is, and writes gpu_report.md and gpu_report.jsonl.
#
#   tools/gpu_check.sh [--quick] [--out DIR]   the check (about 10 minutes on one H100; --quick
#                                              about 2); the report goes to DIR (default
#                                              ./gpu-report-<date>)
#   tools/gpu_check.sh --bench [--out DIR]     the numbers of kernel work only: steps 1 (device), 7
#                                              (kernel times, attention against flash SDPA) and 8
#                                              (throughput beside PyTorch), about a minute
#   tools/gpu_check.sh --dry-run               checks the bundle itself, no GPU needed: files and
#                                              checksums, every program's libraries resolved inside
#                                              the bundle, data, scripts, glibc, size
#   tools/gpu_check.sh --self-test [--out DIR] every step below at toy sizes, with a bundle of
#                                              host-runtime programs (`make gpu-bundle-host`), on
#                                              a machine without a GPU (`make test` runs it)
#   --llmc PATH   (any mode that runs step 8) also times llm.c's `train_gpt2cu` at PATH, GPT-2 124M
#                 (d12) at the small run's B and T = 1024, beside ours
#
# Steps: 1. device facts and the peak-table entry, and the sync-check switch on a faulting kernel;
# 2. the kernel tests of `make test-cuda` (same sources, nvcc) on the GPU, with their host and GPU
# error bounds, and test_ptx (known answers of the mma.sync / ldmatrix / cp.async / ex2 / red /
# acquire-release wrappers);
# 3. compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on the kernel tests and a
# 2-step training run; 4. the CUDA trainer (bf16 and fp32) against the CPU trainer, on the tiny
# model and at long sequences (T = 2048 and 4096, head sizes 64 and 128: many attention tiles),
# several ranks sharing the GPU, and bit-exact resume; 5. the real NCCL transport: one rank on
# `--comm nccl` against the CPU trainer, without and with mpirun, two ranks on one GPU refused,
# and the bundle's mpirun printing nothing of its own; 6. generation: `generate_cuda` with its KV
# cache against `--recompute` on a model trained here for a few hundred steps; 7. every kernel
# timed against its floor, attention against PyTorch's flash SDPA; 8. trainer throughput and MFU
# (gpt3-125m, and the largest GPT-3 preset that fits at T = 8192), with the forward / backward /
# optimizer split and device memory, beside the same shapes in PyTorch (eager with flash SDPA and
# fused AdamW, and torch.compile) and, with --llmc, llm.c; the largest run again with
# `--recompute selective` and `full` (their step time against none's), and checkpoints at the
# small run's shape written synchronously and with `--async-save` (what the steps wait).
# Exit status 0 when every check passed. Works as root or not; needs bash, coreutils, grep, sed,
# awk, od; Python with PyTorch only for the SDPA and PyTorch comparisons (python3 on PATH, or
# $PYTHON).
set -u
GPU_BUNDLE=$(cd "$(dirname "$0")/.." && pwd)
mode=full action=check out="" llmc=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) mode=quick ;;
    --bench) mode=bench ;;
    --dry-run) action=dry-run ;;
    --self-test) action=self-test ;;
    --out) [ $# -ge 2 ] || { echo "error: --out needs a folder" >&2; exit 2; }; out=$2; shift ;;
    --llmc) [ $# -ge 2 ] || { echo "error: --llmc needs the path of llm.c's train_gpt2cu" >&2; exit 2; }
            llmc=$2; shift
            [ -f "$llmc" ] && [ -x "$llmc" ] || { echo "error: --llmc $llmc: not an executable file (expected llm.c's train_gpt2cu)" >&2; exit 2; }
            llmc=$(cd "$(dirname "$llmc")" && pwd)/$(basename "$llmc") ;;
    --help|-h) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -f "$GPU_BUNDLE/MANIFEST" ] || { echo "error: $GPU_BUNDLE/MANIFEST is missing: run this script inside a GPU bundle (make gpu-bundle)" >&2; exit 2; }
manifest() { sed -n "s/^$1 //p" "$GPU_BUNDLE/MANIFEST" | head -n 1; }
flavor=$(manifest flavor)
START=$(date +%s)
elapsed() { local s=$(( $(date +%s) - START )); printf '%d:%02d' $((s / 60)) $((s % 60)); }
say() { echo "[gpu_check $(elapsed)] $*"; }

# ====================================================================================================
# --dry-run: the bundle, without running anything on a GPU.
# ====================================================================================================
dry_run() {
  local pass=0 fail=0
  ok() { echo "  ok    $*"; pass=$((pass + 1)); }
  bad() { echo "  FAIL  $*"; fail=$((fail + 1)); }
  echo "dry-run of $GPU_BUNDLE ($flavor build, commit $(manifest commit), $(manifest built))"

  # Files and checksums.
  local n=0 badfiles=0 size sum path
  while read -r size sum path; do
    n=$((n + 1))
    if [ ! -f "$GPU_BUNDLE/$path" ]; then bad "missing: $path"; badfiles=$((badfiles + 1)); continue; fi
    [ "$(stat -c %s "$GPU_BUNDLE/$path")" = "$size" ] && [ "$(sha256sum "$GPU_BUNDLE/$path" | cut -c1-64)" = "$sum" ] ||
      { bad "changed since the bundle was made: $path"; badfiles=$((badfiles + 1)); }
  done < <(sed -n 's/^file //p' "$GPU_BUNDLE/MANIFEST")
  [ "$badfiles" -eq 0 ] && [ "$n" -gt 0 ] && ok "all $n files present with the sizes and SHA-256 of the MANIFEST"

  # Programs and wrappers.
  local p missing=""
  for p in $(manifest programs); do
    [ -x "$GPU_BUNDLE/libexec/$p" ] && [ -x "$GPU_BUNDLE/bin/$p" ] || missing="$missing $p"
  done
  local want="train_gpt train_gpt_cuda train_gpt_cuda_fp32 generate_cuda bench_collectives_cuda test_attention_cuda test_attention_cuda_fp32 test_layers_cuda test_layers_cuda_fp32 test_matmul_loss_adamw test_matmul_loss_adamw_fp32 test_ptx test_graphs test_cublas gpu_info bench_kernels_cuda attention_bench compare_logs"
  for p in $want; do case " $(manifest programs) " in *" $p "*) ;; *) missing="$missing $p" ;; esac; done
  [ -z "$missing" ] && ok "all $(echo $want | wc -w) programs, each with its bin/ wrapper: $want" || bad "programs missing:$missing"

  # Libraries: ldd with nothing on the library path. glibc's, libstdc++ and libgcc_s come from the
  # system; CUDA's are the box's (found at run time); everything else must resolve inside the bundle.
  local elfs=() f so target cuda_seen="" outside=0 checked=0
  for f in "$GPU_BUNDLE"/libexec/* "$GPU_BUNDLE"/lib/*.so* "$GPU_BUNDLE"/lib/openmpi3/*.so "$GPU_BUNDLE"/lib/pmix/*.so; do
    [ -f "$f" ] && elfs+=("$f")
  done
  for f in "${elfs[@]}"; do
    checked=$((checked + 1))
    while read -r so target; do
      case "$so" in
        linux-vdso.so.*|ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*) continue ;;
        libstdc++.so.*|libgcc_s.so.*) continue ;;
        libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libcurand.so.*|libnccl.so.*)
          case " $(manifest cuda_libraries) " in *" $so "*) ;; *) bad "${f#$GPU_BUNDLE/} needs $so, not in the MANIFEST's CUDA libraries"; outside=$((outside + 1)) ;; esac
          case " $cuda_seen " in *" $so "*) ;; *) cuda_seen="$cuda_seen $so" ;; esac
          continue ;;
      esac
      case "$target" in
        "$GPU_BUNDLE"/*) ;;
        *) bad "${f#$GPU_BUNDLE/} needs $so, which resolves to '${target}' outside the bundle"; outside=$((outside + 1)) ;;
      esac
    done < <(env -i PATH=/usr/bin:/bin ldd "$f" 2> /dev/null | awk '$2 == "=>" {t = $3; if (t == "not") t = "not found"; print $1, t; next}
                                                                      $1 ~ /\// && $1 !~ /ld-linux/ {n = split($1, p, "/"); print p[n], $1}')
  done
  [ "$outside" -eq 0 ] && ok "$checked ELF files (programs, libraries, Open MPI and PMIx components): every non-CUDA library resolves inside the bundle (ldd, empty library path)"
  local so_list
  for so_list in $(manifest cuda_libraries); do
    [ "$so_list" = none ] && continue
    local where
    where=$( (. "$GPU_BUNDLE/tools/bundle_env.sh" > /dev/null 2>&1; bundle_find_lib "$so_list") 2> /dev/null || true)
    echo "  info  CUDA library $so_list: ${where:-not on this machine (bundle_env.sh finds it on the GPU box)}"
  done
  # Data.
  local bad_data=0
  for f in "$GPU_BUNDLE"/data/fortunes/*_train_*.bin "$GPU_BUNDLE"/data/fortunes/*_val_*.bin "$GPU_BUNDLE"/data/stream/*.bin \
           "$GPU_BUNDLE"/data/stream-long/*.bin; do
    [ "$(od -An -tu4 -N4 "$f" 2> /dev/null | tr -d ' ')" = 20240520 ] || { bad "data: $f is not an llm.c token shard"; bad_data=1; }
  done
  [ "$(od -An -tu4 -N4 "$GPU_BUNDLE/data/fortunes/gpt2_tokenizer.bin" 2> /dev/null | tr -d ' ')" = 20240328 ] ||
    { bad "data: gpt2_tokenizer.bin is not an llm.c tokenizer file"; bad_data=1; }
  [ "$bad_data" -eq 0 ] && ok "data: $(ls "$GPU_BUNDLE"/data/*/*.bin | wc -l) token shards and the tokenizer file have llm.c's magic numbers"
  # Scripts.
  local bad_script=0
  for f in gpu_check.sh trainer_checks.sh attention_bench.sh; do bash -n "$GPU_BUNDLE/tools/$f" || { bad "tools/$f: syntax"; bad_script=1; }; done
  sh -n "$GPU_BUNDLE/tools/bundle_env.sh" || { bad "tools/bundle_env.sh: syntax"; bad_script=1; }
  for f in "$GPU_BUNDLE"/bin/*; do sh -n "$f" || { bad "${f#$GPU_BUNDLE/}: syntax"; bad_script=1; }; done
  for f in sdpa_bench.py torch_gpt_bench.py attention_bench_sdpa.py; do [ -f "$GPU_BUNDLE/tools/$f" ] || { bad "tools/$f missing"; bad_script=1; }; done
  [ "$bad_script" -eq 0 ] && ok "scripts: gpu_check.sh, trainer_checks.sh, attention_bench.sh, bundle_env.sh and the bin/ wrappers parse"
  # glibc and size.
  local need have
  need=$(manifest glibc_required); have=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{print $2}')
  echo "  info  the programs need glibc >= $need and libstdc++ with GLIBCXX_$(manifest glibcxx_required); this machine has glibc ${have:-unknown}"
  # What travels is the gzipped tar (tools/gpu_bundle.sh holds it under the same limit).
  local kib packed; kib=$(du -sk "$GPU_BUNDLE" | cut -f1)
  packed=$(( $(tar czf - -C "$GPU_BUNDLE" . | wc -c) / 1024 ))
  [ "$packed" -le $((60 * 1024)) ] && ok "size: $((packed / 1024)) MiB packed, $((kib / 1024)) MiB unpacked (limit 60 MiB packed)" \
    || bad "size: $((packed / 1024)) MiB packed ($((kib / 1024)) MiB unpacked), over 60 MiB"
  local skipped; skipped=$(grep -c '^skipped_component ' "$GPU_BUNDLE/MANIFEST")
  echo "  info  Open MPI / PMIx components left out (they need libraries the bundle does not carry): $skipped"
  echo "dry-run: $pass checks passed, $fail failed"
  [ "$fail" -eq 0 ]
}

if [ "$action" = dry-run ]; then dry_run; exit $?; fi

# ====================================================================================================
# The check (and the self-test, which runs it at toy sizes on a host-runtime bundle).
# ====================================================================================================
if [ "$action" = self-test ]; then
  [ "$flavor" = host ] || { echo "error: --self-test needs a bundle of host-runtime programs (make gpu-bundle-host); this one is '$flavor'" >&2; exit 2; }
else
  [ "$flavor" = nvcc ] || { echo "error: this bundle holds host-runtime programs ($flavor): run it with --self-test, or build the GPU bundle (make gpu-bundle)" >&2; exit 2; }
fi
env_log=$(BUNDLE_ENV_VERBOSE=1; . "$GPU_BUNDLE/tools/bundle_env.sh" 2>&1) || { echo "$env_log" >&2; exit 1; }
BUNDLE_ENV_VERBOSE=0
. "$GPU_BUNDLE/tools/bundle_env.sh" || exit 1
X=$GPU_BUNDLE/libexec
DATA=$GPU_BUNDLE/data
[ -n "$out" ] || out=$PWD/gpu-report-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/logs" || { echo "error: --out $out: cannot create it" >&2; exit 2; }
out=$(cd "$out" && pwd)
LOGS=$out/logs
REPORT=$out/gpu_report.md
JSONL=$out/gpu_report.jsonl
: > "$JSONL"
SECTIONS=$out/logs/sections
mkdir -p "$SECTIONS"
rm -f "$SECTIONS"/*.md
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}

# Sizes. --quick keeps every step but runs less of each: memcheck only, on the kernel tests; the
# bf16 resume only; two benchmark shapes; gpt3-2.7b alone at T = 8192. The self-test runs every
# step at toy sizes on the host runtime.
SAN_TOOLS="memcheck racecheck synccheck initcheck"; SAN_PROGS="test_attention_cuda test_layers_cuda test_matmul_loss_adamw train2"
# The cost model's calibration (costmodel/gpu_validation.md): kernels timed at the shape of every
# trainer run of step 8 (8192 tokens per call, as each of those runs has), and those runs.
CALIB_SHAPES=gpt3-125m:1024,gpt3-125m:8192,gpt3-1.3b:2048,gpt3-2.7b:8192
CALIB_RUNS="gpt3-125m:1:8192 gpt3-1.3b:4:2048"   # PRESET:B:T, beside the small and the largest run
COLL_ARGS=(--max-bytes 268435456 --target-s 0.02)   # step 5's collectives: up to 256 MiB
RESUME_PRECS="fp32 bf16"; TEST_ARGS=(); TRAIN_STEPS=20; BENCH_ARGS=(--shapes "$CALIB_SHAPES,gpt3-2.7b:1024"); SDPA_ARGS=()
THROUGHPUT_SMALL=(--preset gpt3-125m --batch 8 --seq-len 1024); THROUGHPUT_STEPS=30
LARGE_T=8192; LARGE_PRESETS="gpt3-13b gpt3-6.7b gpt3-2.7b gpt3-1.3b gpt3-760m gpt3-350m gpt3-125m"; LARGE_STEPS=6
SAN_TIMEOUT=300; SAN_BUDGET=330   # seconds per sanitizer run, and for the whole step
# Long sequences (step 4): T and head size (2 heads, B = 1), steps of each run; generation (step 6):
# the model trained (L 2, C, 2 heads, context = T), its steps, and the tokens decoded per prompt.
LONG_TS="2048 4096"; LONG_HS="64 128"; LONG_STEPS=6
GEN_C=128; GEN_T=256; GEN_BATCH=8; GEN_TRAIN_STEPS=300; GEN_NEW=32
# PyTorch (step 8): timed steps after warm-up ones, eager and compile; torch.compile on the small
# run only (it compiles for a minute or more at the large one).
TORCH_STEPS=10; TORCH_WARMUP=3; TORCH_MODES="eager compile"; TORCH_CPU=()
if [ "$action" = self-test ]; then
  TEST_ARGS=(--quick); TRAIN_STEPS=10; BENCH_ARGS=(--tiny); SDPA_ARGS=(--tiny)
  THROUGHPUT_SMALL=(--preset small --batch 2 --seq-len 32); THROUGHPUT_STEPS=3; CALIB_RUNS="tiny:1:64"
  COLL_ARGS=(--max-bytes 4096 --target-s 0.001)
  LARGE_T=64; LARGE_PRESETS="small tiny"; LARGE_STEPS=2
  LONG_TS="64 128"; LONG_HS="16 32"; LONG_STEPS=4
  GEN_C=32; GEN_T=64; GEN_BATCH=4; GEN_TRAIN_STEPS=150; GEN_NEW=12
  TORCH_STEPS=2; TORCH_WARMUP=1; TORCH_CPU=(--allow-cpu)
elif [ "$mode" = quick ]; then
  SAN_TOOLS="memcheck"; SAN_PROGS="test_attention_cuda test_layers_cuda test_matmul_loss_adamw"; RESUME_PRECS="bf16"
  TEST_ARGS=(--quick); TRAIN_STEPS=10; BENCH_ARGS=(--shapes "$CALIB_SHAPES" --reps 5 --warmup 2)
  SDPA_ARGS=(--quick); THROUGHPUT_STEPS=8; LARGE_PRESETS="gpt3-2.7b"; LARGE_STEPS=3; SAN_TIMEOUT=90; SAN_BUDGET=100
  LONG_TS="4096"; LONG_STEPS=4; GEN_TRAIN_STEPS=200; TORCH_MODES="eager"
elif [ "$mode" = bench ]; then
  BENCH_ARGS=(--shapes "$CALIB_SHAPES" --reps 5 --warmup 2); SDPA_ARGS=(--quick)
  THROUGHPUT_STEPS=8; LARGE_PRESETS="gpt3-2.7b"; LARGE_STEPS=3
fi
# The steps a mode runs: --bench the numbers only (device facts, kernel times, throughput).
runs_step() { [ "$mode" != bench ] || case "$1" in 1|7|8) return 0 ;; *) return 1 ;; esac; }
# The bounds a GPU run uses where they differ from the host runtime's (the kernel tests carry their
# own, tests/cuda/bounds.h).
if [ "$action" = self-test ]; then COLUMN=host; else COLUMN=gpu; fi

# --- bookkeeping ---------------------------------------------------------------------------------------
PASSES=0; FAILS=(); NOTES=(); INCOMPLETE=0   # INCOMPLETE: runs cut by their time budget
check_result() {   # SECTION NAME ok|FAIL DETAIL: one check of the verdict
  if [ "$3" = ok ]; then PASSES=$((PASSES + 1)); else FAILS+=("$1: $2${4:+ ($4)}"); fi
  printf '{"type":"check","section":"%s","name":"%s","result":"%s","detail":"%s"}\n' "$1" "$2" "$3" \
    "$(printf '%s' "${4:-}" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\n' | cut -c1-400)" >> "$JSONL"
}
note() { NOTES+=("$*"); say "note: $*"; }
section() { echo "$*" >> "$SECTIONS/$CUR.md"; }
# run_logged NAME TIMEOUT CMD...: output in $LOGS/NAME.log; sets RC and SECONDS_TAKEN.
run_logged() {
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1 < /dev/null
  RC=$?
  SECONDS_TAKEN=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
}
tail_log() { tail -n "${2:-6}" "$LOGS/$1.log" | sed 's/^/        | /'; }
# compared NAME SECTION LABEL ARGS...: tools/trainer_checks.sh ARGS, output in logs/NAME.log; sets R
# (ok, or FAIL when it failed or its output lacks $REQUIRE) and DIFFS (the largest relative
# differences it printed), says LABEL's result and records it as a check of SECTION.
compared() {
  local name=$1 sect=$2 label=$3; shift 3
  run_logged "$name" 900 bash "$GPU_BUNDLE/tools/trainer_checks.sh" "$@"
  DIFFS=$(sed -n 's/^ *max relative difference of \([a-z]*\) *\([^ ]*\) .*/\1 \2/p' "$LOGS/$name.log" | tr '\n' ';' | sed 's/;$//; s/;/; /g')
  if [ "$RC" -eq 0 ] && grep -q -- "${REQUIRE:-}" "$LOGS/$name.log"; then R=ok; else R=FAIL; fi
  say "  $label: $R ($DIFFS)"
  [ "$R" = ok ] || tail_log "$name" 8
  check_result "$sect" "$label" "$R" "$DIFFS"
}
json_field() {   # FIELD LINE: a number field of a JSON line
  printf '%s' "$2" | sed -n "s/.*\"$1\":\\([-0-9.e+]*\\).*/\\1/p"
}

# ====================================================================================================
# The report (written at the end, or after step 1 when there is no usable GPU)
# ====================================================================================================
write_report() {
  local host; host=$(uname -n)
  {
    echo "# GPU report"
    echo
    echo "Bundle: $flavor build of commit $(manifest commit) ($(manifest built)); machine $host; check started $(date -u -d "@$START" +%Y-%m-%dT%H:%M:%SZ), $action $mode, $(elapsed) in all."
    echo
    if [ ${#FAILS[@]} -eq 0 ]; then
      echo "**Verdict: PASS** — all $PASSES checks passed$([ "$INCOMPLETE" -gt 0 ] && echo "; $INCOMPLETE sanitizer runs did not finish in their time budget (notes)")."
    else
      echo "**Verdict: FAIL** — $PASSES checks passed, ${#FAILS[@]} failed:"
      echo
      local f; for f in "${FAILS[@]}"; do echo "- $f"; done
    fi
    if [ ${#NOTES[@]} -gt 0 ]; then
      echo
      echo "Notes:"
      echo
      local n; for n in "${NOTES[@]}"; do echo "- $n"; done
    fi
    [ "$mode" = bench ] && { echo; echo "Mode --bench: steps 1, 7 and 8 only (no correctness checks beyond the runs themselves)."; }
    local i; for i in 1 2 3 4 5 6 7 8; do [ -f "$SECTIONS/$i.md" ] && { echo; cat "$SECTIONS/$i.md"; }; done
    echo
    echo "## Files"
    echo
    echo "Every command's output is in \`logs/\`; machine-readable results in \`gpu_report.jsonl\` (device, check, bound, kernel, attention_vs_sdpa, throughput, torch_throughput, llmc_throughput and verdict records)."
  } > "$REPORT"
  printf '{"type":"verdict","passed":%d,"failed":%d,"incomplete":%d,"seconds":%d,"mode":"%s %s"}\n' "$PASSES" \
    "${#FAILS[@]}" "$INCOMPLETE" $(( $(date +%s) - START )) "$action" "$mode" >> "$JSONL"
  say "done: $PASSES checks passed, ${#FAILS[@]} failed; $REPORT"
  local f; for f in "${FAILS[@]}"; do say "  FAILED: $f"; done
}

say "bundle $GPU_BUNDLE: $flavor build, commit $(manifest commit), $(manifest built)"
say "mode: $action $mode; report in $out"
printf '%s\n' "$env_log" | sed 's/^bundle_env: /[gpu_check] environment: /'

# ====================================================================================================
# 1. Device
# ====================================================================================================
CUR=1
say "[1/8] device"
section "## 1. Device"
section ""
run_logged gpu_info 120 "$X/gpu_info" --jsonl "$JSONL" --md "$SECTIONS/1.md"
if [ "$RC" -eq 0 ]; then
  check_result device gpu_info ok
  sed 's/^/  /' "$LOGS/gpu_info.log"
else
  check_result device gpu_info FAIL "exit $RC"
  tail_log gpu_info
  section "gpu_info failed (exit $RC): \`$(grep -m1 '^error' "$LOGS/gpu_info.log" | cut -c1-300)\`"
  section ""
  section "No usable CUDA device (driver, CUDA_VISIBLE_DEVICES, or a GPU older than sm_80): the other steps were not run."
  FAILS+=("device: no usable CUDA device, nothing else was run")
  write_report
  exit 1
fi
section ""
if command -v nvidia-smi > /dev/null 2>&1; then
  q=name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu,ecc.mode.current,mig.mode.current
  if nvidia-smi --query-gpu=$q --format=csv > "$LOGS/nvidia-smi.log" 2>&1; then
    section "nvidia-smi, at the start of the check:"
    section ""
    head -n 1 "$LOGS/nvidia-smi.log" | sed 's/, /|/g; s/^/|/; s/$/|/' >> "$SECTIONS/1.md"
    head -n 1 "$LOGS/nvidia-smi.log" | sed 's/[^,]*/---/g; s/, /|/g; s/^/|/; s/$/|/' >> "$SECTIONS/1.md"
    tail -n +2 "$LOGS/nvidia-smi.log" | sed 's/, /|/g; s/^/|/; s/$/|/' >> "$SECTIONS/1.md"
  else
    section "nvidia-smi failed: $(tail -n 1 "$LOGS/nvidia-smi.log")"
  fi
else
  section "nvidia-smi: not found"
fi
section ""
cuda_found=$(printf '%s\n' "$env_log" | sed -n 's/^bundle_env: \(libcu[a-zA-Z]*\.so\.[0-9]*\|libnccl\.so\.[0-9]*\): /\1 in /p' | tr '\n' ';' | sed 's/;$//; s/;/; /g')
section "CUDA libraries: ${cuda_found:-none (host-runtime programs)}; $(printf '%s\n' "$env_log" | sed -n 's/^bundle_env: libstdc++: /libstdc++ /p')"
section ""
# The sync-check switch on a kernel that faults: named at its own launch with GPT_CUDA_SYNC_CHECK=1,
# at the next synchronisation without. The host runtime cannot fault asynchronously.
if [ "$action" = self-test ]; then
  note "the GPT_CUDA_SYNC_CHECK fault test needs a GPU (skipped in the self-test)"
elif [ "$mode" = bench ]; then
  :
else
  run_logged fault_plain 60 "$X/gpu_info" --fault-test
  plain_rc=$RC
  run_logged fault_sync 60 env GPT_CUDA_SYNC_CHECK=1 "$X/gpu_info" --fault-test
  if [ "$RC" -ne 0 ] && grep -q "GPT_CUDA_SYNC_CHECK: synchronising after kernel fault_kernel failed" "$LOGS/fault_sync.log" &&
     [ "$plain_rc" -ne 0 ] && grep -q "cudaDeviceSynchronize" "$LOGS/fault_plain.log"; then
    check_result device "GPT_CUDA_SYNC_CHECK names a faulting kernel at its launch" ok
    section "GPT_CUDA_SYNC_CHECK=1: a kernel writing to an invalid address is named at its launch: \`$(grep -m1 'fault_kernel failed' "$LOGS/fault_sync.log" | cut -c1-200)\` (without it the fault surfaces at the next cudaDeviceSynchronize)."
  else
    check_result device "GPT_CUDA_SYNC_CHECK names a faulting kernel at its launch" FAIL "see logs/fault_sync.log"
    section "GPT_CUDA_SYNC_CHECK fault test FAILED: see logs/fault_plain.log and logs/fault_sync.log"
  fi
fi

# ====================================================================================================
# 2. Kernel tests
# ====================================================================================================
CUR=2
if runs_step 2; then
say "[2/8] kernel tests (the sources of make test-cuda, built with nvcc) against the CPU twins"
section "## 2. Kernel tests against their CPU twins"
section ""
if [ "$flavor" = nvcc ]; then built="compiled by nvcc, run on the GPU"; else built="built for the host runtime (self-test)"; fi
section "The test programs of \`make test-cuda\`, $built${TEST_ARGS[0]:+, with ${TEST_ARGS[*]}}: every kernel against its CPU twin on random inputs, outputs poisoned before each launch; on an H100/H200 \`test_attention_cuda\` runs the Hopper forward and backward by default (attention/hopper_forward.cuh, attention/hopper_backward.cuh: TMA, mbarriers, \`wgmma\`, the backward's dQ by \`cp.reduce.async.bulk\` in the semaphores' order) for HS 64, 80 and 128 and checks where they ran, then a second time with \`ATTENTION_FWD_KERNEL=sm80 ATTENTION_BWD_KERNEL=sm80\`, the A100 kernels everywhere. Then \`test_ptx\` (tests/cuda_host/test_ptx.cu): known answers of the PTX wrappers of model/cuda_ptx.cuh (\`mma.sync\` m16n8k16, \`ldmatrix\`, \`cp.async\`, \`ex2.approx.ftz\`, \`red.global.add\` (.v2 on sm_90), a semaphore-ordered accumulation with \`ld.acquire\`/\`red.release\`/\`__nanosleep\` bit-identical to the block-order sum) and, on an H100/H200 (sm_90a code), of model/cuda_ptx_sm90.cuh (mbarrier phases and transaction bytes, named barriers, \`setmaxnreg\`, TMA boxes bit-exact under each swizzle with zero fill, \`wgmma\` descriptors and m64n64k16 in K- and MN-major layouts, and with A from registers); on a GPU it checks the host runtime's twins of those instructions, and their fragment layouts, against the hardware. Then \`test_graphs\` (tests/cuda_host/test_graphs.cu): stream capture and CUDA graphs as the trainer's \`--cuda-graph 1\` uses them (replays with the captured arguments, forks and joins, launches on other streams one after another, the capture errors CUDA returns), which the host runtime's twin models. Last \`test_cublas --only fast-inputs\`: cuBLAS's \`CUBLAS_COMPUTE_32F_FAST_16BF\` and \`_FAST_TF32\` on fp32 inputs (Muon's \`--muon-fp32-matmul-prec\` medium and high), sums whose known answer tells inputs rounded to nearest even (what the host runtime and the CPU trainer do) from truncated and from fp32 ones."
section ""
section "| program | checks | failed | seconds | result |"
section "|---|---|---|---|---|"
: > "$LOGS/bounds.txt"
# test_ptx by groups, each in its own process (test_ptx --only): a wrapper that faults on the GPU
# (a sticky error ends the process) leaves the other groups' known answers checked.
# test_attention_cuda@sm80: again with ATTENTION_FWD_KERNEL=sm80 and ATTENTION_BWD_KERNEL=sm80 (the
# default, auto, runs the Hopper kernels on an H100/H200; this pass checks the A100 kernels there).
for entry in test_attention_cuda test_attention_cuda@sm80 test_attention_cuda_fp32 test_layers_cuda \
             test_layers_cuda_fp32 test_matmul_loss_adamw test_matmul_loss_adamw_fp32 test_ptx:base \
             test_ptx:mbarrier,named test_ptx:tma test_ptx:store test_ptx:wgmma test_graphs \
             test_cublas:fast-inputs; do
  prog=${entry%%[:@]*} args=("${TEST_ARGS[@]}") t=${entry%%[:@]*} envs=()
  if [ "${entry#*:}" != "$entry" ]; then args=(--only "${entry#*:}"); t="$prog --only ${entry#*:}"; fi
  if [ "${entry#*@}" != "$entry" ]; then
    envs=("ATTENTION_FWD_KERNEL=${entry#*@}" "ATTENTION_BWD_KERNEL=${entry#*@}")
    t="$prog ${envs[*]}"
  fi
  log=${t// /_}; log=${log//,/_}; log=${log//=/_}
  run_logged "$log" 600 env "${envs[@]}" "$X/$prog" "${args[@]}"
  checks=$(grep -cE '^(ok  |FAIL) ' "$LOGS/$log.log")
  failed=$(grep -cE '^FAIL ' "$LOGS/$log.log")
  if [ "$RC" -eq 0 ] && [ "$failed" -eq 0 ] && grep -q 'checks passed$' "$LOGS/$log.log"; then r=ok; else r=FAIL; fi
  say "  $t: $checks checks, $failed failed, exit $RC, ${SECONDS_TAKEN} s: $r"
  [ "$r" = ok ] || { grep -E '^FAIL ' "$LOGS/$log.log" | head -n 5 | sed 's/^/        | /'; tail_log "$log" 3; }
  check_result kernel-tests "$t" "$r" "$checks checks, $failed failed, exit $RC"
  section "| $t | $checks | $failed | $SECONDS_TAKEN | $r |"
  grep '^bound ' "$LOGS/$log.log" >> "$LOGS/bounds.txt"
done
section ""
section "Error bounds, as \`max|gpu - cpu| / max|cpu|\` (tests/cuda/bounds.h): the host runtime's, the GPU's, and the worst error measured here. nvcc contracts multiply-adds into FMAs and the GPU's exp2f/__expf/rsqrtf/tanhf are approximations, so a bound tuned on the host may not hold; the GPU column says why it differs."
section ""
section "| test | quantity | host bound | GPU bound | worst here | within | why the GPU bound differs |"
section "|---|---|---|---|---|---|---|"
while read -r _ test name _ host _ gpu _ applied _ worst verdict rest; do
  section "| $test | $name | $host | $gpu | $worst | $verdict | ${rest#| } |"
  printf '{"type":"bound","test":"%s","quantity":"%s","host":%s,"gpu":%s,"applied":%s,"worst":"%s","ok":%s}\n' \
    "$test" "$name" "$host" "$gpu" "$applied" "$worst" "$([ "$verdict" = ok ] && echo true || echo false)" >> "$JSONL"
done < "$LOGS/bounds.txt"

fi

# ====================================================================================================
# 3. compute-sanitizer
# ====================================================================================================
CUR=3
if runs_step 3; then
say "[3/8] compute-sanitizer"
section "## 3. compute-sanitizer"
section ""
SAN=$(command -v compute-sanitizer 2> /dev/null || true)
for d in ${GPU_BUNDLE_CUDA_DIRS:-}; do
  [ -n "$SAN" ] && break
  for c in "$d/../bin/compute-sanitizer" "$d/../../bin/compute-sanitizer" "$d/../../../bin/compute-sanitizer"; do
    [ -x "$c" ] && { SAN=$(cd "$(dirname "$c")" && pwd)/compute-sanitizer; break; }
  done
done
[ -n "$SAN" ] || { [ -x /usr/local/cuda/bin/compute-sanitizer ] && SAN=/usr/local/cuda/bin/compute-sanitizer; }
if [ -z "$SAN" ]; then
  note "compute-sanitizer not found (PATH, the CUDA library folders' toolkit, /usr/local/cuda/bin): step 3 skipped"
  check_result sanitizer "compute-sanitizer found" FAIL "not found"
  section "compute-sanitizer not found: skipped."
else
  section "$SAN ($("$SAN" --version 2> /dev/null | grep -i version | head -n 1)); the kernel tests with --quick and a 2-step bf16 training run. Expected: 0 errors everywhere."
  section ""
  header="| program |"; rule="|---|"
  for tool in $SAN_TOOLS; do header="$header $tool |"; rule="$rule---|"; done
  san_start=$(date +%s)
  section "$header"
  section "$rule"
  san_train=("$X/train_gpt_cuda" --preset tiny --layers 2 --channels 64 --heads 4 --context 64 --batch 2
             --seq-len 64 --steps 2 --train-data "$DATA/fortunes/fortunes_train_*.bin" --val-data ""
             --tokenizer "" --sample-length 0 --no-save --quiet --out-dir "$LOGS/san_train")
  for prog in $SAN_PROGS; do
    row="| $prog |"
    for tool in $SAN_TOOLS; do
      if [ "$prog" = train2 ]; then cmd=("${san_train[@]}"); else cmd=("$X/$prog" --quick); fi
      name=san_${tool}_$prog
      left=$(( SAN_BUDGET - ($(date +%s) - san_start) ))
      if [ "$left" -lt 10 ]; then   # the step's time is spent: the rest is reported, not run
        cell="not run (time budget)"; note "compute-sanitizer $tool on $prog not run: the step's $SAN_BUDGET s were spent"
        INCOMPLETE=$((INCOMPLETE + 1))
        say "  $tool $prog: $cell"; row="$row $cell |"; continue
      fi
      limit=$(( left < SAN_TIMEOUT ? left : SAN_TIMEOUT ))
      run_logged "$name" "$limit" "$SAN" --tool "$tool" --print-limit 20 "${cmd[@]}"
      errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9][0-9]*\) error.*/\1/p' "$LOGS/$name.log" | tail -n 1)
      if [ "$RC" -eq 124 ]; then
        cell="timed out (${limit} s)"; note "compute-sanitizer $tool on $prog timed out after $limit s"
        INCOMPLETE=$((INCOMPLETE + 1))
      elif [ -z "$errors" ]; then
        cell="did not run (exit $RC)"; check_result sanitizer "$tool $prog" FAIL "no ERROR SUMMARY; exit $RC"
        tail_log "$name" 4
      elif [ "$errors" -eq 0 ] && [ "$RC" -eq 0 ]; then
        cell="0 errors (${SECONDS_TAKEN} s)"; check_result sanitizer "$tool $prog" ok
      elif [ "$errors" -eq 0 ]; then
        cell="0 errors, but the program failed: exit $RC (${SECONDS_TAKEN} s)"
        check_result sanitizer "$tool $prog" FAIL "0 errors, program exit $RC"
        tail_log "$name" 4
      else
        cell="**$errors errors**, exit $RC (${SECONDS_TAKEN} s)"; check_result sanitizer "$tool $prog" FAIL "$errors errors, exit $RC"
        grep -m3 '=========     \|========= Invalid\|========= Race\|========= Barrier\|========= Uninitialized' "$LOGS/$name.log" | sed 's/^/        | /'
      fi
      say "  $tool $prog: $cell"
      row="$row $cell |"
    done
    section "$row"
  done
fi

fi

# ====================================================================================================
# 4. The CUDA trainer against the CPU trainer
# ====================================================================================================
CUR=4
if runs_step 4; then
say "[4/8] the CUDA trainer against the CPU trainer: tiny model, long sequences, shared GPU; bit-exact resume"
section "## 4. The CUDA trainer against the CPU trainer"
section ""
section "A tiny model on a learnable token stream (tools/trainer_checks.sh), $TRAIN_STEPS steps, the same options and data for \`train_gpt\` (CPU, fp32) and \`train_gpt_cuda\`: every step's loss and gradient norm and every validation loss, as relative differences; then $TRAIN_STEPS steps straight against $((TRAIN_STEPS / 2)), stop, \`--resume\`, $((TRAIN_STEPS / 2)) more."
section ""
section "| check | bounds (host; GPU) | result | largest differences |"
section "|---|---|---|---|"
# fp32: the host runtime's 1e-4; on a GPU, FMA contraction, approximate exp/tanh/rsqrt and cuBLASLt's
# summation order change every step's values by about 1e-6, which training then carries along.
# bf16: the same on both (bf16 rounding and stochastic rounding dominate).
for prec in fp32 bf16; do
  if [ "$prec" = fp32 ]; then
    prog=train_gpt_cuda_fp32; tl_host=1e-4; tn_host=1e-4; tl_gpu=1e-3; tn_gpu=1e-3
  else
    prog=train_gpt_cuda; tl_host=2e-2; tn_host=1e-1; tl_gpu=2e-2; tn_gpu=1e-1
  fi
  if [ "$COLUMN" = host ]; then tl=$tl_host; tn=$tn_host; else tl=$tl_gpu; tn=$tn_gpu; fi
  compared "vs_cpu_$prec" trainer "$prec vs CPU" vs-cpu --cpu "$X/train_gpt" --test "$X/$prog" \
    --backend "cuda-$prec" --compare "$X/compare_logs" --loss-tol "$tl" --norm-tol "$tn" --data "$DATA/stream" \
    --work "$LOGS/vs_cpu_$prec" --steps "$TRAIN_STEPS"
  section "| $prec against CPU, $TRAIN_STEPS steps | loss $tl_host, norm $tn_host; loss $tl_gpu, norm $tn_gpu | $R | $DIFFS |"
  case " $RESUME_PRECS " in *" $prec "*) ;; *) continue ;; esac
  run_logged "resume_$prec" 900 bash "$GPU_BUNDLE/tools/trainer_checks.sh" resume --test "$X/$prog" --data "$DATA/stream" \
    --work "$LOGS/resume_$prec" --steps "$TRAIN_STEPS"
  [ "$RC" -eq 0 ] && r=ok || r=FAIL
  say "  $prec resume: $r"
  [ "$r" = ok ] || tail_log "resume_$prec" 8
  check_result trainer "$prec resume" "$r"
  section "| $prec stop and resume | bit-exact | $r | $(grep -c '^  ok ' "$LOGS/resume_$prec.log") of 5 checks identical |"
done
# The z-loss through the bf16 classifier kernel (its factor 1 + 2 c lse on the softmax), against the
# CPU trainer with the same --z-loss: losses and norms, then every step's z_loss within the loss
# bound (2e-2).
compared "vs_cpu_z_loss" trainer "bf16 --z-loss vs CPU" vs-cpu --cpu "$X/train_gpt" --test "$X/train_gpt_cuda" \
  --backend cuda-bf16 --compare "$X/compare_logs" --loss-tol 2e-2 --norm-tol 1e-1 --data "$DATA/stream" \
  --work "$LOGS/vs_cpu_z_loss" --steps "$TRAIN_STEPS" --model "--z-loss 1e-2"
z_losses() { grep '"type":"step"' "$1" 2> /dev/null | sed -n 's/.*"z_loss":\([-0-9.e+]*\).*/\1/p'; }
z_worst=$(paste <(z_losses "$LOGS/vs_cpu_z_loss/cpu/log.jsonl") <(z_losses "$LOGS/vs_cpu_z_loss/test/log.jsonl") |
  awk 'NF == 2 && $1 > 0 {d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > w) w = d; n++}
       END {if (n == '"$TRAIN_STEPS"') printf "%.2g", w; else print "missing"}')
z_result=FAIL
awk -v w="$z_worst" 'BEGIN {exit !(w != "missing" && w + 0 <= 2e-2)}' && z_result=ok
check_result trainer "bf16 --z-loss: each step's z_loss vs CPU" "$z_result" "z_loss $z_worst"
[ "$z_result" = ok ] || R=FAIL
section "| bf16 with --z-loss 1e-2 against CPU, $TRAIN_STEPS steps | loss 2e-2, norm 1e-1, z_loss 2e-2; the same | $R | $DIFFS; z_loss $z_worst |"
# QK-norm through the bf16 kernels (model/qk_norm.cu) in Qwen3's block (RMSNorm on every query and
# key head before the rotation, SwiGLU, no linear biases), against the CPU trainer.
compared "vs_cpu_qk_norm" trainer "bf16 --qk-layernorm vs CPU" vs-cpu --cpu "$X/train_gpt" --test "$X/train_gpt_cuda" \
  --backend cuda-bf16 --compare "$X/compare_logs" --loss-tol 2e-2 --norm-tol 1e-1 --data "$DATA/stream" \
  --work "$LOGS/vs_cpu_qk_norm" --steps "$TRAIN_STEPS" \
  --model "--normalization rmsnorm --mlp swiglu --disable-bias-linear --position-embedding rope --qk-layernorm"
section "| bf16 Qwen3 block (--qk-layernorm) against CPU, $TRAIN_STEPS steps | loss 2e-2, norm 1e-1; the same | $R | $DIFFS |"
# Muon (model/muon.cu: the momentum, normalisation and update kernels, the Newton-Schulz GEMMs by
# cuBLAS from bf16 inputs on the tensor cores, --muon-fp32-matmul-prec medium, the default, whose
# rounding the CPU trainer applies too) against the CPU trainer.
compared "vs_cpu_muon" trainer "bf16 --optimizer muon vs CPU" vs-cpu --cpu "$X/train_gpt" --test "$X/train_gpt_cuda" \
  --backend cuda-bf16 --compare "$X/compare_logs" --loss-tol 2e-2 --norm-tol 1e-1 --data "$DATA/stream" \
  --work "$LOGS/vs_cpu_muon" --steps "$TRAIN_STEPS" \
  --model "--optimizer muon --muon-use-nesterov --muon-extra-scale-factor 0.2 --lr 1e-2"
section "| bf16 with --optimizer muon (bf16-input Newton-Schulz) against CPU, $TRAIN_STEPS steps | loss 2e-2, norm 1e-1; the same | $R | $DIFFS |"

# Long sequences: T = 2048 and 4096 (the tiny model's T = 16 never reaches a second attention tile),
# head sizes 64 and 128 (2 heads, B = 1), fp32 and bf16 against one CPU run per shape, on a larger
# counting stream. The bounds are the tiny model's.
section ""
section "Long sequences: L = 2, 2 heads, B = 1, $LONG_STEPS steps on the counting stream, against the CPU trainer (one CPU run per shape, both precisions compared with it; bounds as above):"
section ""
section "| T | head size | precision | result | largest differences | seconds |"
section "|---|---|---|---|---|---|"
for T in $LONG_TS; do
  for HS in $LONG_HS; do
    for prec in fp32 bf16; do
      if [ "$prec" = fp32 ]; then prog=train_gpt_cuda_fp32; tl=1e-3; tn=1e-3; [ "$COLUMN" = host ] && tl=1e-4 tn=1e-4
      else prog=train_gpt_cuda; tl=2e-2; tn=1e-1; fi
      compared "long_${T}_${HS}_$prec" trainer "T=$T HS=$HS $prec vs CPU" vs-cpu --cpu "$X/train_gpt" --test "$X/$prog" \
        --backend "cuda-$prec" --compare "$X/compare_logs" --loss-tol "$tl" --norm-tol "$tn" --data "$DATA/stream-long" \
        --work "$LOGS/long_${T}_$HS" --steps "$LONG_STEPS" --seq-len "$T" --model "--channels $((2 * HS)) --heads 2 --batch 1"
      section "| $T | $HS | $prec | $R | $DIFFS | $SECONDS_TAKEN |"
    done
  done
done

# Several processes on the one GPU (mpi-staged shares it; NCCL refuses two ranks on one device):
# every schedule on 2 ranks (1x2) and 4 ranks (2x2) against the single-process CPU run, bf16.
# Ulysses splits the heads over the ranks: on 4 ranks the model has 4 heads of 16 (its own CPU run);
# USP over the column's ranks (1x2: Striped's layout, 2x2: a permuted one) keeps the 2 heads.
# In chunks of heads (--a2a-chunks 2, each rank's 2 heads one per chunk): Ulysses on 2 ranks with
# 4 heads, USP on 2x2 with 4.
section ""
section "Several ranks sharing the GPU (\`--comm mpi-staged\`), bf16, $TRAIN_STEPS steps against the single-process CPU run; the step split of the multi-rank run:"
section ""
section "| ranks | schedule | result | largest differences | step split (summary line) |"
section "|---|---|---|---|---|"
MPIRUN_SHARED="$GPU_BUNDLE/bin/mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS -np"
for np_mesh in "2:--pkv 2" "4:--pq 2 --pkv 2"; do
  nranks=${np_mesh%%:*}; mesh=${np_mesh#*:}
  chunked=ulysses-chunks; [ "$nranks" -gt 2 ] && chunked=usp-chunks
  for algo in 2d 2d-keep ring striped zigzag ulysses usp $chunked; do
    heads=""; [ "$algo" = ulysses ] && [ "$nranks" -gt 2 ] && heads="--channels $((16 * nranks)) --heads $nranks"
    case "$algo" in
      2d-keep) margs="$mesh --attention 2d --keep-kv" ;;
      *-chunks) margs="$mesh --attention ${algo%-chunks} --a2a-chunks 2"; heads="--channels 64 --heads 4" ;;
      *) margs="$mesh --attention $algo" ;;
    esac
    name="shared_${nranks}_$algo"
    compared "$name" trainer "$nranks ranks $algo mpi-staged" dist --cpu "$X/train_gpt" --test "$X/train_gpt_cuda" \
      --backend cuda-bf16 --compare "$X/compare_logs" --loss-tol 2e-2 --norm-tol 1e-1 --data "$DATA/stream" \
      --work "$LOGS/shared" --steps "$TRAIN_STEPS" --np "$nranks" --mesh "$margs" --test-args "--comm mpi-staged" \
      --mpirun "$MPIRUN_SHARED" --model "$heads"
    split=$(sed -n 's/^ *summary: [0-9]* timed steps* ([^)]*): \([^;]*\);.*/\1/p' "$LOGS/$name.log" | head -n 1)
    section "| $nranks | $algo | $R | $DIFFS | $split |"
  done
done
# Zigzag's two-way tour under GPT-3's pattern: a 3-token window in every second layer, chunks of
# 2 tokens on 4 ranks, so the banded layers run 3 of the 4 ring steps (the ranks on both sides,
# the turn 2 ranks back) and the dense ones all 4.
REQUIRE="ring steps: 3 of 4 in the banded layers" compared shared_4_zigzag_window trainer \
  "4 ranks zigzag, window 3 every 2 layers, mpi-staged" dist --cpu "$X/train_gpt" --test "$X/train_gpt_cuda" \
  --backend cuda-bf16 --compare "$X/compare_logs" --loss-tol 2e-2 --norm-tol 1e-1 --data "$DATA/stream" \
  --work "$LOGS/shared-window" --steps "$TRAIN_STEPS" --np 4 --mesh "--pq 2 --pkv 2 --attention zigzag" \
  --test-args "--comm mpi-staged" --mpirun "$MPIRUN_SHARED" --model "--attention-window 3 --window-every 2"
split=$(sed -n 's/^ *summary: [0-9]* timed steps* ([^)]*): \([^;]*\);.*/\1/p' "$LOGS/shared_4_zigzag_window.log" | head -n 1)
section "| 4 | zigzag, window 3 every 2 layers (3 of 4 ring steps in the banded ones) | $R | $DIFFS | $split |"

fi

# ====================================================================================================
# 5. The real NCCL transport
# ====================================================================================================
CUR=5
if runs_step 5; then
say "[5/8] the real NCCL transport; the bundle's mpirun"
section "## 5. The real NCCL transport"
section ""
# Where the trainer's dlopen finds NCCL: bundle_env.sh's search, as for cuBLAS (PyTorch's
# nvidia-nccl package among the places), or the host runtime's NCCL over MPI in the self-test.
nccl_found=$(printf '%s\n' "$env_log" | sed -n 's/^bundle_env: libnccl\.so\.2: //p' | head -n 1)
if [ "$action" = self-test ]; then nccl_where="the host runtime's NCCL over MPI (tests/cuda_host/nccl.cpp), linked in"
elif [ -n "$nccl_found" ]; then nccl_where="libnccl.so.2 in $nccl_found"
else nccl_where="libnccl.so.2 not found by tools/bundle_env.sh (LD_LIBRARY_PATH, CUDA_HOME, nvcc's toolkit, /usr/local/cuda*, ldconfig, python3's nvidia-* packages)"; fi
section "NCCL: $nccl_where. One rank on \`--comm nccl\` runs the whole transport (non-blocking init, the four communicator splits, the step's collectives, finalize and destroy), bf16, $TRAIN_STEPS steps against the CPU trainer; then two ranks on one GPU, which NCCL refuses."
section ""
section "| check | result | detail |"
section "|---|---|---|"
MPIRUN_ONE="$GPU_BUNDLE/bin/mpirun --bind-to none -x OMP_NUM_THREADS -np"
for launch in mpirun alone; do
  if [ "$launch" = mpirun ]; then launcher=$MPIRUN_ONE; else launcher=none; fi
  [ "$launch" = mpirun ] && what="1 rank on nccl under mpirun" || what="1 rank on nccl without a launcher"
  REQUIRE="the run says: transport nccl" compared "nccl_1rank_$launch" nccl "$what" dist --cpu "$X/train_gpt" \
    --test "$X/train_gpt_cuda" --backend cuda-bf16 --compare "$X/compare_logs" --loss-tol 2e-2 --norm-tol 1e-1 \
    --data "$DATA/stream" --work "$LOGS/nccl" --steps "$TRAIN_STEPS" --np 1 --mesh "" --test-args "--comm nccl" --mpirun "$launcher"
  section "| $what, against the CPU trainer | $R | $DIFFS |"
done
# The collectives the trainer uses, on nccl over every visible GPU (one rank each): their times
# by size and alpha-beta fits (one rank: times, no fit) go into the report, where the cost model's
# GPU calibration (make costmodel-gpu) takes the fits for its interconnect.
gpus=$(sed -n 's/.*"type":"device".*"count":\([0-9]*\).*/\1/p' "$JSONL" | head -n 1); gpus=${gpus:-1}
run_logged collectives 300 $GPU_BUNDLE/bin/mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS -np "$gpus" \
  "$X/bench_collectives_cuda" --comm nccl "${COLL_ARGS[@]}" \
  --jsonl "$LOGS/collectives.jsonl"
fits=$(sed -n 's/.*"type":"fit","op":"\([a-z_]*\)","P":\([0-9]*\),.*"alpha_s":\([^,]*\),.*"bus_gbs":\([^,]*\),.*/\1 \2 \3 \4/p' \
  "$LOGS/collectives.jsonl" 2> /dev/null | awk '$2 >= 2 { printf "%s%s %.1f us + %.1f GB/s", sep, $1, 1e6 * $3, $4; sep = "; " }')
if [ "$RC" -eq 0 ] && grep -q '"type":"fit"' "$LOGS/collectives.jsonl" 2> /dev/null; then
  r=ok; cat "$LOGS/collectives.jsonl" >> "$JSONL"
else r=FAIL; tail_log collectives 6; fi
say "  collectives on nccl, $gpus rank(s): $r"
check_result nccl "collectives benchmark on nccl" "$r" "exit $RC"
section "| collectives on nccl, $gpus rank(s) (\`bench_collectives_cuda\`; times and fits in gpu_report.jsonl) | $r | ${fits:-one rank: times only, no fit} |"
# Two ranks on one GPU: the trainer refuses them on nccl with the reason (one GPU made visible).
name=nccl_2ranks_1gpu
one_gpu=${CUDA_VISIBLE_DEVICES:-0}; one_gpu=${one_gpu%%,*}   # the first GPU this check may use
run_logged "$name" 120 env CUDA_VISIBLE_DEVICES="$one_gpu" CUDA_HOST_DEVICES=1 $GPU_BUNDLE/bin/mpirun --oversubscribe --bind-to none \
  -x CUDA_VISIBLE_DEVICES -x CUDA_HOST_DEVICES -np 2 "$X/train_gpt_cuda" --preset tiny --layers 2 --channels 32 --heads 2 \
  --context 32 --vocab 512 --batch 2 --seq-len 16 --steps 2 --pkv 2 --comm nccl --train-data "$DATA/stream/t_train_*.bin" \
  --val-data "" --tokenizer "" --no-save --quiet --out-dir "$LOGS/nccl_2ranks"
refusal=$(grep -m1 -o "error: rank [01]: 2 ranks on this node but 1 GPU visible[^(]*" "$LOGS/$name.log")
if [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] && [ -n "$refusal" ]; then r=ok; else r=FAIL; fi
say "  2 ranks on one GPU refused: $r (exit $RC)"
[ "$r" = ok ] || tail_log "$name" 6
check_result nccl "2 ranks on one GPU refused" "$r" "exit $RC"
section "| 2 ranks on one GPU, \`--comm nccl\` | $r | exit $RC in ${SECONDS_TAKEN} s: \`$(printf '%s' "$refusal" | cut -c1-160)\` |"
# The bundle's mpirun prints nothing but the program's output: no PMIx or Open MPI component
# lines ("(ignored)"), no banners (the first H100 box's own PMIx under Debian's folder did).
name=mpirun_quiet
run_logged "$name" 120 $GPU_BUNDLE/bin/mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS -np 2 "$X/train_gpt" \
  --preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2 --seq-len 16 --steps 2 --dp 2 \
  --train-data "$DATA/stream/t_train_*.bin" --val-data "" --tokenizer "" --no-save --quiet --out-dir "$LOGS/mpirun_quiet"
noise=$(grep -cE '\(ignored\)|PMIx was unable|^-----------|WARNING|mca_base_component|pmix_mca' "$LOGS/$name.log")
if [ "$RC" -eq 0 ] && [ "$noise" -eq 0 ]; then r=ok; else r=FAIL; fi
say "  the bundle's mpirun, 2 ranks: $r ($noise lines of its own)"
[ "$r" = ok ] || tail_log "$name" 10
check_result nccl "the bundle's mpirun prints nothing of its own" "$r" "exit $RC, $noise lines"
section "| the bundle's \`mpirun\`, 2 CPU ranks: no PMIx or Open MPI lines of its own | $r | exit $RC, $noise such lines |"
fi

# ====================================================================================================
# 6. Generation with the KV cache
# ====================================================================================================
CUR=6
if runs_step 6; then
say "[6/8] generation: the KV cache against recomputation, on a trained model"
section "## 6. Generation: \`generate_cuda\` with its KV cache against \`--recompute\`"
section ""
# A model that learned the counting stream (greedy continuations that vary, so that a wrong token
# shows), then four prompts of different lengths decoded greedily with the cache and without it:
# the same tokens, and logits within 8 bf16 unit roundoffs of the largest (the bound of the
# host-runtime tests, tests/test_generate.sh cuda-bf16).
gen_model=$LOGS/gen_train/model_$(printf '%08d' "$GEN_TRAIN_STEPS").bin
run_logged gen_train 900 "$X/train_gpt_cuda" --preset tiny --layers 2 --channels "$GEN_C" --heads 2 --context "$GEN_T" \
  --vocab 512 --batch "$GEN_BATCH" --seq-len "$GEN_T" --steps "$GEN_TRAIN_STEPS" --lr 1e-2 --warmup 0 --eval-every 0 --sample-every 0 \
  --quiet --peak-gflops 1 --train-data "$DATA/stream-long/t_train_*.bin" --val-data "" --tokenizer "" --out-dir "$LOGS/gen_train"
train_rc=$RC; train_s=$SECONDS_TAKEN
first_loss=$(grep -m1 '"type":"step"' "$LOGS/gen_train/log.jsonl" 2> /dev/null | sed -n 's/.*"loss":\([0-9.e+-]*\).*/\1/p')
last_loss=$(grep '"type":"step"' "$LOGS/gen_train/log.jsonl" 2> /dev/null | tail -n 1 | sed -n 's/.*"loss":\([0-9.e+-]*\).*/\1/p')
ids() { awk -v n="$1" -v x="$2" 'BEGIN { for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", (i ? "," : ""), int(x / 256) % 512 } }'; }
prompts=(--prompt-ids "$(ids 5 1)" --prompt-ids 7 --prompt-ids "$(ids 11 2)" --prompt-ids "$(ids 30 3)")
if [ "$train_rc" -ne 0 ] || [ ! -f "$gen_model" ]; then
  check_result generation "training the model" FAIL "exit $train_rc"; tail_log gen_train
  section "Training the model failed (exit $train_rc): logs/gen_train.log"
else
  gen_args=(--model "$gen_model" "${prompts[@]}" --greedy --max-new-tokens "$GEN_NEW" --print ids)
  run_logged gen_cache 300 "$X/generate_cuda" "${gen_args[@]}" --logits-out "$LOGS/gen_cache.logits"
  cache_rc=$RC; cp "$LOGS/gen_cache.log" "$LOGS/gen_cache.err"
  run_logged gen_recompute 300 "$X/generate_cuda" "${gen_args[@]}" --recompute --logits-out "$LOGS/gen_recompute.logits"
  recompute_rc=$RC
  # --print ids lines "b: ids" on stdout (the logs hold stderr too: the id lines are the ones that start "N:").
  grep -E '^[0-9]+:' "$LOGS/gen_cache.log" > "$LOGS/gen_cache.ids"
  grep -E '^[0-9]+:' "$LOGS/gen_recompute.log" > "$LOGS/gen_recompute.ids"
  distinct=$(awk '{ delete seen; n = 0; for (i = 2; i <= NF; i++) if (!seen[$i]++) n++; if (NR == 1 || n < m) m = n } END { print m + 0 }' "$LOGS/gen_cache.ids")
  # max |cache - recompute| / max |recompute| over every step's logits (float32 files, read by od)
  rel=$(paste <(od -An -v -tf4 -w4 "$LOGS/gen_cache.logits" 2> /dev/null) <(od -An -v -tf4 -w4 "$LOGS/gen_recompute.logits" 2> /dev/null) |
        awk 'NF == 2 { d = $1 - $2; if (d < 0) d = -d; b = $2 < 0 ? -$2 : $2; if (d > md) md = d; if (b > mb) mb = b; n++ }
             NF != 2 { bad = 1 } END { if (bad || n == 0 || mb == 0) print "nan"; else printf "%.2e %d", md / mb, n }')
  nlogits=${rel#* }; rel=${rel%% *}
  tokens_same=0; [ -s "$LOGS/gen_cache.ids" ] && cmp -s "$LOGS/gen_cache.ids" "$LOGS/gen_recompute.ids" && tokens_same=1
  within=0; [ "$rel" != nan ] && awk -v r="$rel" 'BEGIN { exit !(r <= 0.015625) }' && within=1
  if [ "$cache_rc" -eq 0 ] && [ "$recompute_rc" -eq 0 ] && [ "$tokens_same" -eq 1 ] && [ "$within" -eq 1 ] && [ "${distinct:-0}" -ge 2 ]; then r=ok; else r=FAIL; fi
  say "  KV cache against recomputation: $r (tokens $([ $tokens_same = 1 ] && echo identical || echo DIFFERENT), logits $rel of the largest, at least $distinct distinct tokens per continuation)"
  [ "$r" = ok ] || { tail_log gen_cache 4; tail_log gen_recompute 4; }
  check_result generation "KV cache against --recompute" "$r" "tokens identical: $tokens_same; logits $rel of the largest (bound 1/64); $distinct distinct tokens"
  # generate's stderr: "decode: N tokens in S s, R tokens/s, F forwards"
  rate=$(sed -n 's/^decode: .*, \([0-9.]*\) tokens\/s,.*/\1 tokens\/s/p' "$LOGS/gen_cache.err" | head -n 1)
  section "Model: L = 2, C = $GEN_C, 2 heads, context $GEN_T, V = 512, trained by \`train_gpt_cuda\` (bf16) for $GEN_TRAIN_STEPS steps of $GEN_BATCH x $GEN_T tokens in $train_s s (loss ${first_loss:-?} to ${last_loss:-?}). Four prompts (5, 1, 11, 30 tokens), greedy, $GEN_NEW new tokens each."
  section ""
  section "| check | result | detail |"
  section "|---|---|---|"
  section "| tokens, cache against recomputation | $([ $tokens_same = 1 ] && [ "${distinct:-0}" -ge 2 ] && echo ok || echo FAIL) | $(wc -l < "$LOGS/gen_cache.ids") continuations, at least ${distinct:-0} distinct tokens each (2 needed: a continuation of one repeated token compares nothing) |"
  section "| logits, max difference / largest logit (bound 1/64) | $([ $within = 1 ] && echo ok || echo FAIL) | $rel over ${nlogits:-0} values |"
  section "| decode rate with the cache | | ${rate:-not printed} |"
fi
fi

# ====================================================================================================
# 7. Kernel times
# ====================================================================================================
CUR=7
say "[7/8] kernel times against their floors; attention against flash SDPA"
section "## 7. Kernel times"
section ""
run_logged bench 1200 "$X/bench_kernels_cuda" "${BENCH_ARGS[@]}" --jsonl "$JSONL" --md "$SECTIONS/7.md"
if [ "$RC" -eq 0 ]; then check_result bench "kernel benchmark" ok; else
  check_result bench "kernel benchmark" FAIL "exit $RC"; tail_log bench; section "bench_kernels_cuda failed (exit $RC): logs/bench.log"; fi
section ""
section "### Attention against PyTorch's flash SDPA"
section ""
PY=${PYTHON:-$(command -v python3 || true)}
if [ -z "$PY" ]; then
  note "no python3: the SDPA comparison is skipped"
  section "No python3 on this machine: skipped."
else
  run_logged sdpa 900 "$PY" "$GPU_BUNDLE/tools/sdpa_bench.py" "${SDPA_ARGS[@]}"
  if [ "$RC" -ne 0 ]; then
    check_result bench "SDPA timing" FAIL "exit $RC"; tail_log sdpa; section "tools/sdpa_bench.py failed (exit $RC): logs/sdpa.log"
  elif grep -q '^sdpa-skipped:' "$LOGS/sdpa.log"; then
    reason=$(grep -m1 '^sdpa-skipped:' "$LOGS/sdpa.log" | cut -d: -f2- | sed 's/^ //')
    note "SDPA comparison skipped: $reason"
    section "Skipped: $reason"
  else
    run_logged attention_vs 1200 "$X/bench_kernels_cuda" "${BENCH_ARGS[@]}" --attention-vs "$LOGS/sdpa.log" --jsonl "$JSONL" --md "$SECTIONS/7.md"
    if [ "$RC" -eq 0 ]; then check_result bench "attention against SDPA" ok; else
      check_result bench "attention against SDPA" FAIL "exit $RC"; tail_log attention_vs; fi
  fi
fi

# ====================================================================================================
# 8. Trainer throughput
# ====================================================================================================
CUR=8
say "[8/8] trainer throughput, beside PyTorch and llm.c"
section "## 8. Trainer throughput, one GPU"
section ""
section "\`train_gpt_cuda\` (bf16) on the fortunes shards, no evaluation, sampling or checkpoints; the first step of each run is excluded from the means. MFU = 6 x parameters + 6 x L x C x T FLOPs per token against the peak-table entry. Memory: \`cudaMemGetInfo\` after the first step and at the end (the trainer allocates nothing in its step loop). Beside it, where python3 has PyTorch, the same shapes in PyTorch (\`tools/torch_gpt_bench.py\`: fp32 weights under bf16 autocast, flash SDPA, fused AdamW, gradient clipping; eager, and \`torch.compile\` on the first shape; random tokens; $TORCH_STEPS timed steps after $TORCH_WARMUP), MFU counted the same way, memory its peak reserved; and with \`--llmc\`, llm.c's \`train_gpt2cu\` (GPT-2 124M, its own defaults) at the first shape."
section ""
section "| run | trainer | tokens/s | MFU | ms/step | forward | backward | optimizer | device memory | parameters | tokens/s / ours |"
section "|---|---|---|---|---|---|---|---|---|---|---|"
FORT=(--train-data "$DATA/fortunes/fortunes_train_*.bin" --val-data "" --tokenizer "" --sample-length 0 --no-save --quiet --warmup 0)
OURS_TPS=0; OURS_PEAK=0
throughput_row() {   # LABEL RUNDIR LOG: a table row from the run's summary; OURS_TPS, OURS_PEAK
  local s params
  s=$(grep '"type":"summary"' "$2/log.jsonl" 2> /dev/null | tail -n 1)
  params=$(sed -n 's/.* \([0-9]*\) parameters; backend .*/\1/p' "$3" | head -n 1)
  OURS_TPS=0
  if [ -z "$s" ]; then section "| $1 | this trainer | no summary: see logs | | | | | | | | |"; return 1; fi
  OURS_TPS=$(json_field tokens_per_s "$s"); OURS_PEAK=$(json_field peak_flops "$s")
  local mfu; mfu=$(awk -v m="$(json_field mfu "$s")" -v p="$OURS_PEAK" 'BEGIN { if (p > 0) printf "%.1f%%", 100 * m; else printf "n/a" }')
  section "$(awk -v l="$1" -v t="$OURS_TPS" -v mfu="$mfu" -v ms="$(json_field ms_per_step "$s")" \
    -v f="$(json_field forward_ms "$s")" -v b="$(json_field backward_ms "$s")" -v o="$(json_field optimizer_ms "$s")" \
    -v mu="$(json_field memory_used_bytes "$s")" -v mt="$(json_field memory_total_bytes "$s")" -v p="$params" \
    'BEGIN { printf "| %s | this trainer (bf16) | %.0f | %s | %.1f | %.1f | %.1f | %.1f | %.1f of %.1f GiB | %.3g | 1.00 |", l, t, mfu, ms, f, b, o, mu / 2^30, mt / 2^30, p }')"
  printf '{"type":"throughput","run":"%s","summary":%s}\n' "$1" "$(printf '%s' "$s" | sed 's/^{"type":"summary",/{/')" >> "$JSONL"
  say "  $1: $(awk -v t="$OURS_TPS" 'BEGIN {printf "%.0f tokens/s", t}'), MFU $mfu"
}
ratio_to_ours() { awk -v t="$1" -v o="$OURS_TPS" 'BEGIN { if (o > 0) printf "%.2f", t / o; else printf "n/a" }'; }
# torch_row LABEL MODE PRESET B T [CONTEXT]: PyTorch's row for the shape just run by ours.
torch_row() {
  local label=$1 mode=$2 name="torch_${2}_$3"
  if [ -z "$PY" ]; then return; fi
  run_logged "$name" 900 "$PY" "$GPU_BUNDLE/tools/torch_gpt_bench.py" --preset "$3" --batch "$4" --seq-len "$5" \
    ${6:+--context "$6"} --mode "$mode" --steps "$TORCH_STEPS" --warmup "$TORCH_WARMUP" --peak-flops "$OURS_PEAK" "${TORCH_CPU[@]}"
  local line; line=$(grep -m1 '^{"type": *"torch_throughput"' "$LOGS/$name.log")
  if [ "$RC" -ne 0 ]; then
    check_result throughput "PyTorch $mode $3" FAIL "exit $RC"; tail_log "$name" 4
    section "| $label | PyTorch $mode | failed (exit $RC): logs/$name.log | | | | | | | | |"
  elif [ -z "$line" ]; then
    local why; why=$(sed -n 's/^torch-skipped [a-z]*: //p' "$LOGS/$name.log" | head -n 1)
    note "PyTorch $mode at $label not run: ${why:-no result line}"
    section "| $label | PyTorch $mode | not run: ${why:-see logs/$name.log} | | | | | | | | |"
  else
    printf '%s\n' "$line" | sed 's/": /":/g; s/, "/,"/g' >> "$JSONL"
    local compact; compact=$(printf '%s\n' "$line" | sed 's/": /":/g; s/, "/,"/g')
    local tps; tps=$(json_field tokens_per_s "$compact")
    local torch_v; torch_v=$(printf '%s' "$compact" | sed -n 's/.*"torch":"\([^"]*\)".*/\1/p')
    local attn; attn=$(printf '%s' "$compact" | sed -n 's/.*"attention":"\([^"(]*\).*/\1/p' | sed 's/ $//')
    local adam; adam=$(printf '%s' "$compact" | sed -n 's/.*"adamw":"\([^"]*\)".*/\1/p')
    section "$(awk -v l="$label" -v who="PyTorch $torch_v $mode ($attn, $adam AdamW)" -v t="$tps" \
      -v m="$(json_field mfu "$compact")" -v ms="$(json_field ms_per_step "$compact")" -v mem="$(json_field memory_bytes "$compact")" \
      -v p="$(json_field params "$compact")" -v r="$(ratio_to_ours "$tps")" \
      'BEGIN { printf "| %s | %s | %.0f | %s | %.1f | | | | %s | %.3g | %s |", l, who, t, (m == "" ? "n/a" : sprintf("%.1f%%", 100 * m)), ms, (mem == "" ? "n/a" : sprintf("%.1f GiB reserved", mem / 2^30)), p, r }')"
    check_result throughput "PyTorch $mode $3" ok
    say "  $label, PyTorch $mode: $(awk -v t="$tps" 'BEGIN {printf "%.0f tokens/s", t}') ($(ratio_to_ours "$tps") x ours)"
  fi
}
# llmc_row LABEL B T: llm.c's train_gpt2cu (--llmc) on GPT-2 124M (d12, random init), 12 steps, its
# own defaults otherwise; tokens/s from the mean step time of its step lines after the first.
llmc_row() {
  local label=$1 B=$2 T=$3 work=$LOGS/llmc
  mkdir -p "$work"
  cp "$DATA/fortunes/gpt2_tokenizer.bin" "$work/" 2> /dev/null
  (cd "$work" && run_logged llmc 900 "$llmc" -e d12 -b "$B" -t "$T" -x 12 -i "$DATA/fortunes/fortunes_train_*.bin" \
     -j "$DATA/fortunes/fortunes_val_*.bin" -v 1000 -m 1 -s 0 -h 0)
  local ms; ms=$(sed -n 's/^step *\([0-9]*\)\/[0-9]* |.*| \([0-9.]*\) ms |.*/\1 \2/p' "$LOGS/llmc.log" |
                 awk '$1 > 1 { s += $2; n++ } END { if (n) printf "%.3f", s / n }')
  if [ "$RC" -ne 0 ] || [ -z "$ms" ]; then
    check_result throughput "llm.c train_gpt2cu" FAIL "exit $RC, no step lines"; tail_log llmc 6
    section "| $label | llm.c train_gpt2cu | failed (exit $RC): logs/llmc.log | | | | | | | | |"
    return
  fi
  # GPT-2 124M (d12): V 50304 (padded), context 1024, L 12, C 768: 124,475,904 parameters.
  local tps; tps=$(awk -v ms="$ms" -v b="$B" -v t="$T" 'BEGIN { printf "%.1f", b * t * 1000 / ms }')
  local mfu; mfu=$(awk -v tps="$tps" -v t="$T" -v p="$OURS_PEAK" 'BEGIN { if (p > 0) printf "%.1f%%", 100 * tps * (6 * 124475904 + 6 * 12 * 768 * t) / p; else printf "n/a" }')
  printf '{"type":"llmc_throughput","run":"%s","batch":%d,"seq_len":%d,"ms_per_step":%s,"tokens_per_s":%s,"params":124475904,"program":"%s"}\n' \
    "$label" "$B" "$T" "$ms" "$tps" "$llmc" >> "$JSONL"
  section "| $label | llm.c train_gpt2cu (d12) | $(printf '%.0f' "$tps") | $mfu | $ms | | | | | 1.24e+08 | $(ratio_to_ours "$tps") |"
  check_result throughput "llm.c train_gpt2cu" ok
  say "  $label, llm.c: $(printf '%.0f' "$tps") tokens/s ($(ratio_to_ours "$tps") x ours)"
}
PY=${PYTHON:-$(command -v python3 || true)}
[ -n "$PY" ] || note "no python3: the PyTorch rows of the throughput table are skipped"
small_label="${THROUGHPUT_SMALL[1]} B=${THROUGHPUT_SMALL[3]} T=${THROUGHPUT_SMALL[5]}"
run_logged tp_small 900 "$X/train_gpt_cuda" "${THROUGHPUT_SMALL[@]}" --steps "$THROUGHPUT_STEPS" "${FORT[@]}" --out-dir "$LOGS/tp_small"
if [ "$RC" -eq 0 ] && throughput_row "$small_label, $THROUGHPUT_STEPS steps" "$LOGS/tp_small" "$LOGS/tp_small.log"; then
  check_result throughput "$small_label" ok
else
  check_result throughput "$small_label" FAIL "exit $RC"; tail_log tp_small
fi
for m in $TORCH_MODES; do
  torch_row "$small_label" "$m" "${THROUGHPUT_SMALL[1]}" "${THROUGHPUT_SMALL[3]}" "${THROUGHPUT_SMALL[5]}"
done
[ -n "$llmc" ] && llmc_row "$small_label" "${THROUGHPUT_SMALL[3]}" "${THROUGHPUT_SMALL[5]}"
# The cost model's other validation runs (its kernels were timed at their shapes in step 7).
for run in $CALIB_RUNS; do
  IFS=: read -r preset b t <<< "$run"
  label="$preset B=$b T=$t"
  run_logged "tp_calib_${preset}_$t" 900 "$X/train_gpt_cuda" --preset "$preset" --context "$t" --batch "$b" --seq-len "$t" \
    --steps "$THROUGHPUT_STEPS" "${FORT[@]}" --out-dir "$LOGS/tp_calib_${preset}_$t"
  if [ "$RC" -eq 0 ] && throughput_row "$label, $THROUGHPUT_STEPS steps" "$LOGS/tp_calib_${preset}_$t" "$LOGS/tp_calib_${preset}_$t.log"; then
    check_result throughput "$label" ok
  else
    check_result throughput "$label" FAIL "exit $RC"; tail_log "tp_calib_${preset}_$t"
  fi
done
# The largest GPT-3 preset that fits at T = LARGE_T, one sequence per step: larger presets fail at
# allocation (the trainer allocates every device buffer before initialising the weights).
tried=""
large_ok=0
for preset in $LARGE_PRESETS; do
  run_logged "tp_$preset" 900 "$X/train_gpt_cuda" --preset "$preset" --context "$LARGE_T" --batch 1 --seq-len "$LARGE_T" \
    --steps "$LARGE_STEPS" "${FORT[@]}" --out-dir "$LOGS/tp_$preset"
  if [ "$RC" -eq 0 ]; then
    throughput_row "$preset B=1 T=$LARGE_T, $LARGE_STEPS steps" "$LOGS/tp_$preset" "$LOGS/tp_$preset.log" && large_ok=1
    torch_row "$preset B=1 T=$LARGE_T" eager "$preset" 1 "$LARGE_T" "$LARGE_T"
    break
  fi
  if grep -qiE 'out of memory|cudaErrorMemoryAllocation' "$LOGS/tp_$preset.log"; then
    say "  $preset at T=$LARGE_T does not fit (${SECONDS_TAKEN} s to find out)"
    tried="$tried $preset"
  else
    say "  $preset at T=$LARGE_T failed (exit $RC), not for memory:"; tail_log "tp_$preset"
    tried="$tried $preset(failed)"
    break
  fi
done
[ "$large_ok" -eq 1 ] && check_result throughput "largest preset at T=$LARGE_T" ok ||
  check_result throughput "largest preset at T=$LARGE_T" FAIL "tried:$tried"
[ -n "$tried" ] && section "" && section "Did not fit in device memory at T = $LARGE_T:$tried."

# Recomputation at the largest run that fit: --recompute selective and full beside none (the run
# above), the same steps. The goal (the long-sequence issue): selective within 1.1x of none's step
# time at gpt3-2.7b T = 8192 on an H100.
if [ "$large_ok" -eq 1 ]; then
  large_label="$preset B=1 T=$LARGE_T"
  section ""
  section "### Recomputation, $large_label, $LARGE_STEPS steps"
  section ""
  section "| --recompute | ms/step | x none | backward ms | device memory | tokens/s |"
  section "|---|---|---|---|---|---|"
  none_ms=""
  for r in none selective full; do
    rlog=tp_$preset RC=0   # none: the run above
    if [ "$r" != none ]; then
      rlog=tp_recompute_$r
      run_logged "$rlog" 900 "$X/train_gpt_cuda" --preset "$preset" --context "$LARGE_T" --batch 1 \
        --seq-len "$LARGE_T" --steps "$LARGE_STEPS" "${FORT[@]}" --recompute "$r" --out-dir "$LOGS/$rlog"
    fi
    s=$(grep '"type":"summary"' "$LOGS/$rlog/log.jsonl" 2> /dev/null | tail -n 1)
    if [ "$RC" -ne 0 ] || [ -z "$s" ]; then
      section "| $r | failed (exit $RC): logs/$rlog.log | | | | |"
      check_result throughput "--recompute $r, $large_label" FAIL "exit $RC"; tail_log "$rlog"
      continue
    fi
    ms=$(json_field ms_per_step "$s"); [ "$r" = none ] && none_ms=$ms
    x=$(awk -v a="$ms" -v b="$none_ms" 'BEGIN { if (b > 0) printf "%.3f", a / b; else printf "n/a" }')
    section "$(awk -v r="$r" -v ms="$ms" -v x="$x" -v b="$(json_field backward_ms "$s")" \
      -v mu="$(json_field memory_used_bytes "$s")" -v t="$(json_field tokens_per_s "$s")" \
      'BEGIN { printf "| %s | %.1f | %s | %.1f | %.1f GiB | %.0f |", r, ms, x, b, mu / 2^30, t }')"
    printf '{"type":"recompute","run":"%s","recompute":"%s","x_none":"%s","summary":%s}\n' "$large_label" "$r" "$x" \
      "$(printf '%s' "$s" | sed 's/^{"type":"summary",/{/')" >> "$JSONL"
    [ "$r" = none ] || { say "  --recompute $r: $x x none's step time"; check_result throughput "--recompute $r, $large_label" ok; }
  done
fi

# Checkpoints at the small run's shape, written synchronously and with --async-save: each
# checkpoint's time from its copy to DONE, and what the steps waited of it (blocking_s; all of it
# when synchronous). --keep-last 1 keeps one on disk.
ck_every=$(( THROUGHPUT_STEPS / 3 > 0 ? THROUGHPUT_STEPS / 3 : 1 ))
FORT_SAVE=(); for a in "${FORT[@]}"; do [ "$a" = --no-save ] || FORT_SAVE+=("$a"); done
section ""
section "### Checkpoints, $small_label: every $ck_every steps of $THROUGHPUT_STEPS"
section ""
section "| writing | checkpoints | seconds each (mean) | the steps waited (mean) | ms/step | run wall s |"
section "|---|---|---|---|---|---|"
for w in synchronous async-save; do
  extra=(); [ "$w" = async-save ] && extra=(--async-save)
  run_logged "ck_$w" 900 "$X/train_gpt_cuda" "${THROUGHPUT_SMALL[@]}" --steps "$THROUGHPUT_STEPS" "${FORT_SAVE[@]}" \
    --checkpoint-every "$ck_every" --keep-last 1 "${extra[@]}" --out-dir "$LOGS/ck_$w"
  s=$(grep '"type":"summary"' "$LOGS/ck_$w/log.jsonl" 2> /dev/null | tail -n 1)
  # every checkpoint record: seconds, and blocking_s where written in the background
  cks=$(grep '"type":"checkpoint"' "$LOGS/ck_$w/log.jsonl" 2> /dev/null |
        sed -n 's/.*"seconds":\([0-9.e+-]*\),.*/\1 &/p' |
        awk '{ b = $1; if (match($0, /"blocking_s":[0-9.e+-]+/)) b = substr($0, RSTART + 13, RLENGTH - 13);
               n++; s += $1; w += b } END { if (n) printf "%d %.3f %.3f", n, s / n, w / n }')
  rm -rf "$LOGS/ck_$w"/model_* "$LOGS/ck_$w"/state_*   # (the report keeps the logs, not gigabytes)
  if [ "$RC" -ne 0 ] || [ -z "$s" ] || [ -z "$cks" ]; then
    section "| $w | failed (exit $RC): logs/ck_$w.log | | | | |"
    check_result throughput "checkpoints, $w" FAIL "exit $RC"; tail_log "ck_$w"
    continue
  fi
  read -r n secs waited <<< "$cks"
  section "| $w | $n | $secs | $waited | $(json_field ms_per_step "$s") | $SECONDS_TAKEN |"
  printf '{"type":"checkpoint_timing","run":"%s","writing":"%s","checkpoints":%d,"seconds_mean":%s,"blocking_mean":%s,"wall_s":%s}\n' \
    "$small_label" "$w" "$n" "$secs" "$waited" "$SECONDS_TAKEN" >> "$JSONL"
  say "  checkpoints, $w: $n of $secs s each, the steps waited $waited s"
  check_result throughput "checkpoints, $w" ok
done

# Muon's step at the small shape from bf16 and from TF32 inputs (--muon-fp32-matmul-prec medium,
# the default, and high: cuBLAS's FAST_16BF and FAST_TF32), beside AdamW's run above: what the
# precision buys on this GPU (the cost model prices medium at the bf16 GEMM rate, high at half).
section ""
section "### Muon's optimizer step, $small_label"
section ""
section "| --optimizer | Newton-Schulz GEMM inputs | optimizer ms/step | ms/step | tokens/s |"
section "|---|---|---|---|---|"
s=$(grep '"type":"summary"' "$LOGS/tp_small/log.jsonl" 2> /dev/null | tail -n 1)
[ -n "$s" ] && section "| adamw (the run above) | | $(json_field optimizer_ms "$s") | $(json_field ms_per_step "$s") | $(json_field tokens_per_s "$s") |"
for prec in medium:bf16 high:TF32; do
  p=${prec%%:*}
  run_logged "tp_muon_$p" 900 "$X/train_gpt_cuda" "${THROUGHPUT_SMALL[@]}" --steps "$THROUGHPUT_STEPS" "${FORT[@]}" \
    --optimizer muon --muon-fp32-matmul-prec "$p" --out-dir "$LOGS/tp_muon_$p"
  s=$(grep '"type":"summary"' "$LOGS/tp_muon_$p/log.jsonl" 2> /dev/null | tail -n 1)
  if [ "$RC" -eq 0 ] && [ -n "$s" ]; then
    section "| muon | $p (${prec#*:}) | $(json_field optimizer_ms "$s") | $(json_field ms_per_step "$s") | $(json_field tokens_per_s "$s") |"
    printf '{"type":"muon_optimizer","run":"%s","precision":"%s","summary":%s}\n' "$small_label" "$p" \
      "$(printf '%s' "$s" | sed 's/^{"type":"summary",/{/')" >> "$JSONL"
    say "  muon, $p: optimizer $(json_field optimizer_ms "$s") ms a step"
    check_result throughput "muon $p" ok
  else
    section "| muon | $p (${prec#*:}) | failed (exit $RC): logs/tp_muon_$p.log | | |"
    check_result throughput "muon $p" FAIL "exit $RC"; tail_log "tp_muon_$p"
  fi
done

# ====================================================================================================
# The report
# ====================================================================================================
write_report
[ ${#FAILS[@]} -eq 0 ]
