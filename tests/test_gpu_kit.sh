#!/usr/bin/env bash
# The GPU run kit without a GPU (tests/suites/gpu-kit.list):
#   compare-logs   build/tools/compare_logs: equal logs pass; a loss, a norm or a validation loss
#                  over its bound, a missing step, NaN and bad arguments fail
#   bundle-env     tools/bundle_env.sh: finds the CUDA libraries in CUDA_HOME, in the toolkit of an
#                  nvcc on PATH, in pip's nvidia-* packages; a clear error when they are missing, when
#                  glibc is too old, when the MANIFEST is missing
#   dry-run        `gpu_check.sh --dry-run` passes on the host-runtime bundle and fails on damaged
#                  copies: a changed file, a library removed (it then resolves outside the bundle),
#                  a program missing
#   isolated       the bundle's CPU trainer, one process and two under the bundle's mpirun, with
#                  Debian's Open MPI, PMIx and OpenBLAS folders hidden (a mount namespace): nothing
#                  is read from them; and with another build's PMIx components and Open MPI
#                  parameters in those folders: no "(ignored)" line, no PMIx banner
#   self-test      `gpu_check.sh --self-test`: every step at toy sizes on the host-runtime bundle,
#                  with compute-sanitizer and llm.c stand-ins and Debian's PyTorch on the CPU; the
#                  report has every section (long sequences, NCCL, generation, PyTorch and llm.c
#                  rows among them), every check passed and a PASS verdict, the JSONL parses; then
#                  --bench, which runs steps 1, 7 and 8 only
#   nvcc-bundle    `make gpu-bundle` with nvcc (the nvcc-built programs link; the --dry-run passes);
#                  SKIPPED without nvcc
#   hopper-check   tools/gpu_hopper_check.sh on the host-runtime bundle at toy sizes: the test_ptx
#                  groups, the kernel tests with the four kernel choices and the benchmark pass and
#                  come back in summary.txt and logs.tgz; a past deadline skips every step; a bad
#                  --deadline is one line and exit 2
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
part=${1:?usage: tests/test_gpu_kit.sh compare-logs|bundle-env|dry-run|isolated|self-test|nvcc-bundle|hopper-check}
HB=${HB:-$BUILD/gpu-bundle-host}
PY=${PYTHON:-/usr/bin/python3}
mkdir -p $BUILD/tmp
W=$(mktemp -d "$(pwd)/$BUILD/tmp/test_gpu_kit.$part.XXXXXX")
test_name=$part
. tests/checks.sh
need_bundle() { [ -f "$HB/MANIFEST" ] || { echo "no host bundle in $HB (make gpu-bundle-host)"; exit 1; }; }

# ---- compare_logs --------------------------------------------------------------------------------------
t_compare_logs() {
  local C=$BUILD/tools/compare_logs
  log() {   # FILE LOSS2 NORM2 VAL: a three-step log with an eval
    printf '%s\n' '{"type":"config","step":0}' \
      '{"type":"step","step":1,"loss":5.5,"lr":0.01,"grad_norm":2.0,"ms":3}' \
      "{\"type\":\"step\",\"step\":2,\"loss\":$2,\"lr\":0.01,\"grad_norm\":$3,\"ms\":3}" \
      "{\"type\":\"eval\",\"step\":2,\"val_loss\":$4}" \
      '{"type":"step","step":3,"loss":5.0,"lr":0.01,"grad_norm":1.5,"ms":3}' > "$1"
  }
  log "$W/ref" 5.25 1.75 5.3
  log "$W/same" 5.25 1.75 5.3
  log "$W/loss" 5.26 1.75 5.3
  log "$W/norm" 5.25 1.80 5.3
  log "$W/val" 5.25 1.75 5.4
  log "$W/nan" nan 1.75 5.3
  head -n 3 "$W/ref" > "$W/short"
  check "equal logs: exit 0" "$C" "$W/ref" "$W/same" --loss-tol 1e-6 --norm-tol 1e-6
  check "a loss 0.2% off with bound 1e-3: exit 1 and a BAD line naming step 2" \
    eval '! "$C" "$W/ref" "$W/loss" --loss-tol 1e-3 --norm-tol 1 > "$W/o1" && grep -q "^BAD loss at step 2: 5.25 vs 5.26" "$W/o1"'
  check "the same loss with bound 1e-2: exit 0, and the largest difference is reported" \
    eval '"$C" "$W/ref" "$W/loss" --loss-tol 1e-2 --norm-tol 1 > "$W/o2" && grep -q "^max relative difference of loss 0.0019" "$W/o2"'
  check "a gradient norm over its bound fails" eval '! "$C" "$W/ref" "$W/norm" --loss-tol 1 --norm-tol 1e-3 > /dev/null'
  check "a validation loss over the loss bound fails" eval '! "$C" "$W/ref" "$W/val" --loss-tol 1e-3 --norm-tol 1 > /dev/null'
  check "a log with fewer steps fails" eval '! "$C" "$W/ref" "$W/short" --loss-tol 1 --norm-tol 1 > /dev/null'
  check "--min-entries above the entries fails" eval '! "$C" "$W/ref" "$W/same" --loss-tol 1 --norm-tol 1 --min-entries 99 > /dev/null'
  "$C" "$W/ref" "$W/nan" --loss-tol 1 --norm-tol 1 > "$W/o3" 2>&1; local rc=$?
  check "a non-number in the log is an error (exit 2) naming the file and line" \
    eval '[ $rc = 2 ] && grep -q "$W/nan:3: expected finite numbers" "$W/o3"'
  # A step that no int holds (converting it would be undefined) or that is not whole.
  sed 's/"step":3,/"step":1e300,/' "$W/ref" > "$W/huge-step"
  "$C" "$W/ref" "$W/huge-step" --loss-tol 1 --norm-tol 1 > "$W/o4" 2>&1; rc=$?
  check "a step of 1e300 is an error (exit 2) naming the file and line" \
    eval '[ $rc = 2 ] && grep -q "$W/huge-step:5: expected finite numbers for step (a whole number in \[0, 2147483647\])" "$W/o4"'
  sed 's/"step":2,"loss"/"step":2.5,"loss"/' "$W/ref" > "$W/half-step"
  "$C" "$W/ref" "$W/half-step" --loss-tol 1 --norm-tol 1 > "$W/o5" 2>&1; rc=$?
  check "a step of 2.5 is an error (exit 2) naming the file and line" \
    eval '[ $rc = 2 ] && grep -q "$W/half-step:3: expected finite numbers for step" "$W/o5"'
  check "--min-entries 1e300: the logs fall short, exit 1" \
    eval '"$C" "$W/ref" "$W/same" --loss-tol 1 --norm-tol 1 --min-entries 1e300 > /dev/null; [ $? = 1 ]'
  check "missing bounds: usage, exit 2" eval '"$C" "$W/ref" "$W/same" > /dev/null 2>&1; [ $? = 2 ]'
  check "a bad bound: one-line error, exit 2" \
    eval '"$C" "$W/ref" "$W/same" --loss-tol x --norm-tol 1 2>&1 | grep -q "^compare_logs: --loss-tol: expected a non-negative number, found .x.$"'
}

# ---- bundle_env.sh --------------------------------------------------------------------------------------
t_bundle_env() {
  # A fake bundle: a MANIFEST asking for two CUDA libraries, and fake library locations.
  local B=$W/bundle
  mkdir -p "$B/tools" "$B/bin" "$W/cudahome/lib64" "$W/site/nvidia/cu13/lib" "$W/fakebin" "$W/toolkit/bin" "$W/toolkit/lib64"
  cp tools/bundle_env.sh "$B/tools/"
  printf 'flavor nvcc\nglibc_required 2.17\nglibcxx_required none\ncuda_libraries libfakecudart.so.13 libfakecublas.so.13\n' > "$B/MANIFEST"
  touch "$W/cudahome/lib64/libfakecudart.so.13" "$W/cudahome/lib64/libfakecublas.so.13"
  touch "$W/site/nvidia/cu13/lib/libfakecudart.so.13" "$W/site/nvidia/cu13/lib/libfakecublas.so.13"
  touch "$W/toolkit/lib64/libfakecudart.so.13" "$W/toolkit/lib64/libfakecublas.so.13"
  # A python3 whose site-packages hold pip's nvidia-* layout, and an nvcc whose dry run names a toolkit.
  printf '#!/bin/sh\necho %s\n' "$W/site" > "$W/fakebin/python3"
  printf '#!/bin/sh\necho "#\\$ TOP=%s"\n' "$W/toolkit" > "$W/toolkit/bin/nvcc"
  chmod +x "$W/fakebin/python3" "$W/toolkit/bin/nvcc"
  run_env() {   # ENV...: sources bundle_env.sh in a clean environment; prints LD_LIBRARY_PATH or the error
    env -i HOME="$HOME" SCRIPT="$B/tools/bundle_env.sh" "$@" sh -c '. "$SCRIPT" && echo "LD=$LD_LIBRARY_PATH OMPI=$OMPI_MCA_mca_base_component_path"' 2>&1
  }
  local out
  out=$(run_env GPU_BUNDLE="$B" PATH=/usr/bin:/bin CUDA_HOME="$W/cudahome")
  check "CUDA_HOME: both libraries found in CUDA_HOME/lib64" eval 'printf "%s" "$out" | grep -q "^LD=$W/cudahome/lib64 OMPI=$B/lib/openmpi3$"'
  out=$(run_env GPU_BUNDLE="$B" PATH="$W/toolkit/bin:/usr/bin:/bin")
  check "an nvcc on PATH: its toolkit's lib64 (from nvcc's dry run)" eval 'printf "%s" "$out" | grep -q "^LD=$W/toolkit/lib64 "'
  out=$(run_env GPU_BUNDLE="$B" PATH="$W/fakebin:/usr/bin:/bin")
  check "pip's nvidia packages (site-packages/nvidia/cu13/lib) through python3" \
    eval 'printf "%s" "$out" | grep -q "^LD=$W/site/nvidia/cu13/lib "'
  out=$(run_env GPU_BUNDLE="$B" PATH=/usr/bin:/bin LD_LIBRARY_PATH="$W/cudahome/lib64:/opt/other")
  check "a folder already on LD_LIBRARY_PATH is used and kept once" \
    eval 'printf "%s" "$out" | grep -q "^LD=$W/cudahome/lib64:/opt/other "'
  out=$(run_env GPU_BUNDLE="$B" PATH=/usr/bin:/bin)
  check "nothing found: a one-line error naming the library and where it looked" \
    eval 'printf "%s" "$out" | grep -q "^error: GPU bundle $B: libfakecudart.so.13 not found: install the CUDA 13 toolkit.*(searched LD_LIBRARY_PATH, CUDA_HOME"'
  sed -i 's/^glibc_required .*/glibc_required 9.99/' "$B/MANIFEST"
  out=$(run_env GPU_BUNDLE="$B" PATH=/usr/bin:/bin CUDA_HOME="$W/cudahome")
  check "glibc too old: a one-line error with both versions" \
    eval 'printf "%s" "$out" | grep -q "^error: GPU bundle $B: the programs need glibc >= 9.99, this machine has 2\."'
  out=$(run_env GPU_BUNDLE="$W/nowhere" PATH=/usr/bin:/bin)
  check "no MANIFEST: refused" eval 'printf "%s" "$out" | grep -q "^error: bundle_env.sh: GPU_BUNDLE must name the bundle folder"'
}

# ---- --dry-run ------------------------------------------------------------------------------------------
t_dry_run() {
  need_bundle
  check "--dry-run passes on the host-runtime bundle" bash "$HB/tools/gpu_check.sh" --dry-run
  bash "$HB/tools/gpu_check.sh" --dry-run > "$W/dry.out" 2>&1
  check "--dry-run checks files, libraries, data, scripts, size" \
    eval 'grep -q "files present with the sizes and SHA-256" "$W/dry.out" && grep -q "every non-CUDA library resolves inside the bundle" "$W/dry.out" && grep -q "^  ok    data:" "$W/dry.out" && grep -q "^  ok    size:" "$W/dry.out"'
  damaged() {   # NAME: a fresh copy of the bundle in $W/NAME
    rm -rf "$W/$1"; cp -a "$HB" "$W/$1"; echo "$W/$1"
  }
  local d
  d=$(damaged changed); echo x >> "$d/data/fortunes/gpt2_tokenizer.bin"
  check "a changed file fails the dry run, named" \
    eval '! bash "$d/tools/gpu_check.sh" --dry-run > "$W/o1" && grep -q "changed since the bundle was made: data/fortunes/gpt2_tokenizer.bin" "$W/o1"'
  d=$(damaged nolib); rm "$d/lib/libpcre2-8.so.0"
  check "a library removed from the bundle (it then resolves outside it) fails the dry run" \
    eval '! bash "$d/tools/gpu_check.sh" --dry-run > "$W/o2" && grep -q "needs libpcre2-8.so.0, which resolves to .* outside the bundle\|needs libpcre2-8.so.0, which resolves to .not found" "$W/o2"'
  d=$(damaged noprog); rm "$d/libexec/gpu_info" "$d/bin/gpu_info"
  check "a program missing fails the dry run, named" \
    eval '! bash "$d/tools/gpu_check.sh" --dry-run > "$W/o3" && grep -q "programs missing: gpu_info" "$W/o3"'
}

# ---- the bundle in isolation ----------------------------------------------------------------------------
t_isolated() {
  need_bundle
  local hb; hb=$(cd "$HB" && pwd)
  if ! unshare -m true 2> /dev/null; then
    echo "SKIPPED: this machine does not allow a mount namespace (unshare -m); the --dry-run's ldd check covers the libraries"
    finish
  fi
  mkdir -p "$W/empty"
  cat > "$W/hide.sh" <<EOF
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/share/openmpi /etc/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/x86_64-linux-gnu/openblas-pthread; do
  [ -d "\$d" ] && mount --bind "$W/empty" "\$d"
done
ls /usr/lib/x86_64-linux-gnu/openmpi | wc -l > "$W/hidden_count"
exec "\$@"
EOF
  local args=(--preset tiny --vocab 512 --batch 2 --seq-len 16 --steps 2 --train-data "$hb/data/stream/t_train_*.bin"
              --val-data "" --tokenizer "$hb/data/fortunes/gpt2_tokenizer.bin" --sample-length 4 --no-save --quiet)
  OMP_NUM_THREADS=1 timeout 120 unshare -m sh "$W/hide.sh" "$hb/bin/train_gpt" "${args[@]}" --out-dir "$W/one" > "$W/one.out" 2>&1
  local rc=$?
  check "Debian's Open MPI folder is hidden in the namespace" eval '[ "$(cat "$W/hidden_count")" = 0 ]'
  check "one process: the bundle's train_gpt trains 2 steps (exit $rc)" eval '[ $rc = 0 ] && grep -q "^summary: 1 timed step" "$W/one.out"'
  [ $rc = 0 ] || tail -n 5 "$W/one.out" | sed 's/^/        | /'
  OMP_NUM_THREADS=1 timeout 120 unshare -m sh "$W/hide.sh" "$hb/bin/mpirun" --oversubscribe -np 2 "$hb/bin/train_gpt" "${args[@]}" \
    --dp 2 --out-dir "$W/two" > "$W/two.out" 2>&1
  rc=$?
  check "two processes under the bundle's mpirun: data parallel, 2 steps (exit $rc)" \
    eval '[ $rc = 0 ] && grep -q "^mesh: world 2 = dp 2" "$W/two.out" && grep -q "^summary: 1 timed step" "$W/two.out"'
  [ $rc = 0 ] || tail -n 8 "$W/two.out" | sed 's/^/        | /'
  # A box whose PMIx and Open MPI folders hold another build's (the first H100 box: its own PMIx
  # under the same Debian-style folder): components there that do not load, a parameter file that
  # would break MPI. The bundle's mpirun must read none of it: no "(ignored)" lines, no PMIx banner.
  mkdir -p "$W/other/pmix" "$W/other/etc"
  cp "$(ldconfig -p | awk '$1 == "libz.so.1" && /x86-64/ {print $NF; exit}')" "$W/other/pmix/pmix_mca_pcompress_zlib.so"
  echo "not a library" > "$W/other/pmix/pmix_mca_prm_default.so"
  echo "btl = no_such_component" > "$W/other/etc/openmpi-mca-params.conf"
  printf '%s\n' "mount --bind '$W/other/pmix' /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix && mount --bind '$W/other/etc' /etc/openmpi || exit 99" \
    'exec "$@"' > "$W/other.sh"
  OMP_NUM_THREADS=1 timeout 120 unshare -m sh "$W/other.sh" "$hb/bin/mpirun" --oversubscribe -np 2 "$hb/bin/train_gpt" "${args[@]}" \
    --dp 2 --out-dir "$W/other-run" > "$W/other.out" 2>&1
  rc=$?
  check "another build's PMIx components and Open MPI parameters on the box: the bundle's mpirun reads none (exit $rc, no '(ignored)' line, no PMIx banner)" \
    eval '[ $rc = 0 ] && grep -q "^summary: 1 timed step" "$W/other.out" && ! grep -qE "\(ignored\)|PMIx was unable|no_such_component" "$W/other.out"'
  [ $rc = 0 ] && ! grep -qE "\(ignored\)|PMIx was unable" "$W/other.out" || head -n 12 "$W/other.out" | sed 's/^/        | /'
}

# ---- --self-test ----------------------------------------------------------------------------------------
t_self_test() {
  need_bundle
  # A stand-in for compute-sanitizer (NVIDIA's needs a GPU): runs the program and reports what a
  # clean run reports, so that step 3's parsing and table are exercised.
  mkdir -p "$W/bin"
  cat > "$W/bin/compute-sanitizer" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && { echo "Version 0.0 (self-test stand-in)"; exit 0; }
tool=memcheck
while [ $# -gt 0 ]; do case "$1" in --tool) tool=$2; shift 2 ;; --print-limit) shift 2 ;; --*) shift ;; *) break ;; esac; done
echo "========= COMPUTE-SANITIZER ($tool, stand-in)"
"$@"; rc=$?
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
EOF
  # A stand-in for llm.c's train_gpt2cu: checks the options the check gives it and prints its step
  # lines (llm.c's format) at 25.5 ms per step.
  cat > "$W/bin/train_gpt2cu" <<'EOF'
#!/bin/sh
B=4 T=1024 steps=-1 model=""
while [ $# -gt 0 ]; do
  case "$1" in -b) B=$2 ;; -t) T=$2 ;; -x) steps=$2 ;; -e) model=$2 ;; -i|-j) ls $2 > /dev/null || exit 4 ;; esac
  shift 2
done
[ "$model" = d12 ] && [ "$steps" -gt 1 ] || { echo "stand-in: expected -e d12 and -x N" >&2; exit 3; }
awk -v n="$steps" -v b="$B" -v t="$T" 'BEGIN { for (i = 1; i <= n; i++) printf "step %4d/%d | loss 7.000000 (+0.00z)| norm 1.0000 (+0.00z)| lr 3.00e-04 | %.2f ms | 20.0%% bf16 MFU | %.0f tok/s\n", i, n, 25.5, b * t * 1000 / 25.5 }'
EOF
  chmod +x "$W/bin/compute-sanitizer" "$W/bin/train_gpt2cu"
  OMP_NUM_THREADS=2 PATH="$W/bin:$PATH" PYTHON="$PY" timeout 1200 bash "$HB/tools/gpu_check.sh" --self-test --llmc "$W/bin/train_gpt2cu" \
    --out "$W/report" > "$W/check.out" 2>&1
  local rc=$?
  sed 's/^/        /' "$W/check.out" | tail -n 12
  check "--self-test exits 0" test $rc = 0
  local r=$W/report/gpu_report.md
  check "the report's verdict is PASS" grep -q '^\*\*Verdict: PASS\*\*' "$r"
  check "the report has the eight sections" \
    eval 'for s in "## 1. Device" "## 2. Kernel tests" "## 3. compute-sanitizer" "## 4. The CUDA trainer" "## 5. The real NCCL transport" "## 6. Generation" "## 7. Kernel times" "## 8. Trainer throughput"; do grep -q "^$s" "$r" || exit 1; done'
  check "the kernel-test table has all six kernel tests passed, test_attention_cuda again with the sm_80 kernels, test_ptx's five groups (the PTX wrappers' known answers, one process each), test_graphs and test_cublas's fast inputs" \
    eval '[ "$(grep -cE "^\| test_(attention_cuda|layers_cuda|matmul_loss_adamw)(_fp32)? \| [0-9]+ \| 0 \| .* \| ok \|$" "$r")" = 6 ] && [ "$(grep -cE "^\| test_attention_cuda ATTENTION_FWD_KERNEL=sm80 ATTENTION_BWD_KERNEL=sm80 \| [0-9]+ \| 0 \| .* \| ok \|$" "$r")" = 1 ] && [ "$(grep -cE "^\| test_ptx --only (base|mbarrier,named|tma|store|wgmma) \| [1-9][0-9]* \| 0 \| .* \| ok \|$" "$r")" = 5 ] && [ "$(grep -cE "^\| test_graphs \| [1-9][0-9]* \| 0 \| .* \| ok \|$" "$r")" = 1 ] && [ "$(grep -cE "^\| test_cublas --only fast-inputs \| [1-9][0-9]* \| 0 \| .* \| ok \|$" "$r")" = 1 ]'
  check "the tolerance table lists every kernel test's bounds with a host and a GPU column" \
    eval '[ "$(grep -c "^| attention-\|^| layers-\|^| matmul-" "$r")" -ge 14 ]'
  check "the bf16 trainer with --z-loss 1e-2 against the CPU trainer, ok" \
    grep -qE "^\| bf16 with --z-loss 1e-2 against CPU, [0-9]+ steps \| .* \| ok \| loss [0-9.e+-]+; norm .*; z_loss [0-9.e+-]+ \|$" "$r"
  check "the bf16 trainer in Qwen3's block (--qk-layernorm) against the CPU trainer, ok" \
    grep -qE "^\| bf16 Qwen3 block \(--qk-layernorm\) against CPU, [0-9]+ steps \| .* \| ok \| loss [0-9.e+-]+; norm " "$r"
  check "the bf16 trainer with --optimizer muon against the CPU trainer, ok" \
    grep -qE "^\| bf16 with --optimizer muon \(bf16-input Newton-Schulz\) against CPU, [0-9]+ steps \| .* \| ok \| loss [0-9.e+-]+; norm " "$r"
  check "long sequences: 2 lengths x 2 head sizes x 2 precisions against the CPU trainer, all ok" \
    eval '[ "$(grep -cE "^\| (64|128) \| (16|32) \| (fp32|bf16) \| ok \| loss [0-9.e+-]+; norm" "$r")" = 8 ]'
  check "several ranks on one GPU: the seven schedules on 2 and 4 ranks (mpi-staged), Ulysses on 2 and USP on 4 in chunks of heads, against the CPU trainer, all ok" \
    eval '[ "$(grep -cE "^\| (2|4) \| (2d|2d-keep|ring|striped|zigzag|ulysses|usp) \| ok \| loss [0-9.e+-]+; norm" "$r")" = 14 ] && grep -qE "^\| 2 \| ulysses-chunks \| ok \| loss" "$r" && grep -qE "^\| 4 \| usp-chunks \| ok \| loss" "$r"'
  check "several ranks on one GPU: Zigzag's two-way tour under a window in every second layer, 4 ranks, against the CPU trainer, ok" \
    grep -qE "^\| 4 \| zigzag, window 3 every 2 layers \(3 of 4 ring steps in the banded ones\) \| ok \| loss [0-9.e+-]+; norm" "$r"
  check "NCCL: one rank under mpirun and alone against the CPU trainer, two ranks on one GPU refused, mpirun quiet" \
    eval 'grep -q "^| 1 rank on nccl under mpirun, against the CPU trainer | ok |" "$r" && grep -q "^| 1 rank on nccl without a launcher, against the CPU trainer | ok |" "$r" && grep -qE "^\| 2 ranks on one GPU, .--comm nccl. \| ok \| .*2 ranks on this node but 1 GPU visible" "$r" && grep -q "^| the bundle.s .mpirun., 2 CPU ranks: .* | ok |" "$r"'
  check "generation: the KV cache gives the recomputation's tokens and logits within 1/64, on varied continuations, and its decode rate" \
    eval 'grep -qE "^\| tokens, cache against recomputation \| ok \| 4 continuations, at least ([2-9]|[1-9][0-9]) distinct" "$r" && grep -qE "^\| logits, max difference / largest logit \(bound 1/64\) \| ok \|" "$r" && grep -qE "^\| decode rate with the cache \| \| [0-9.]+ tokens/s \|$" "$r"'
  check "the kernel times table, our throughput rows, PyTorch eager beside them, torch.compile said skipped, llm.c's row" \
    eval 'grep -q "^| kernel |" "$r" && [ "$(grep -c "^| small B=2 T=32, 3 steps | this trainer (bf16) |" "$r")" = 1 ] && grep -q "^| small B=1 T=64, 2 steps | this trainer (bf16) |" "$r" && grep -qE "^\| small B=2 T=32 \| PyTorch 1\.13[^|]* eager \(written out, default AdamW\) \| [0-9]+ \|" "$r" && grep -qE "^\| small B=2 T=32 \| PyTorch compile \| not run: torch.compile needs torch >= 2.0" "$r" && grep -qE "^\| small B=2 T=32 \| llm.c train_gpt2cu \(d12\) \| 2510 \| .* \| 25.500 \|" "$r"'
  check "recomputation at the largest run: none, selective and full rows, each with its ratio to none (none's 1.000)" \
    eval 'grep -qE "^### Recomputation, small B=1 T=64, 2 steps$" "$r" && grep -qE "^\| none \| [0-9.]+ \| 1\.000 \| [0-9.]+ \| [0-9.]+ GiB \| [0-9]+ \|$" "$r" &&
          grep -qE "^\| selective \| [0-9.]+ \| [0-9.]+ \| " "$r" && grep -qE "^\| full \| [0-9.]+ \| [0-9.]+ \| " "$r"'
  check "checkpoints at the small run, synchronous and --async-save: 3 each, their seconds and what the steps waited, the files removed after" \
    eval 'grep -qE "^\| synchronous \| 3 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$" "$r" &&
          grep -qE "^\| async-save \| 3 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$" "$r" &&
          ! ls "$W"/report/logs/ck_*/state_* > /dev/null 2>&1 && ls "$W"/report/logs/ck_async-save/log.jsonl > /dev/null'
  check "gpu_report.jsonl: every line is JSON, with device, check, bound, kernel, throughput, torch_throughput, llmc_throughput and verdict records" \
    "$PY" -c 'import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
types = {o["type"] for o in objs}
assert {"device", "check", "bound", "kernel", "throughput", "torch_throughput", "llmc_throughput", "recompute", "checkpoint_timing", "verdict"} <= types, types
ck = {o["writing"]: o for o in objs if o["type"] == "checkpoint_timing"}
assert set(ck) == {"synchronous", "async-save"} and all(o["checkpoints"] == 3 for o in ck.values()), ck
assert ck["synchronous"]["blocking_mean"] == ck["synchronous"]["seconds_mean"], ck
v = [o for o in objs if o["type"] == "verdict"][0]
assert v["failed"] == 0 and v["passed"] > 40, v' "$W/report/gpu_report.jsonl"
  check "the collectives benchmark on nccl over the visible GPUs, its records in the JSONL" \
    eval 'grep -qE "^\| collectives on nccl, [0-9]+ rank\(s\) .* \| ok \|" "$r" && grep -q "\"type\":\"fit\",\"op\":\"all_reduce\"" "$W/report/gpu_report.jsonl"'
  check "Muon's optimizer step from bf16 and from TF32 inputs beside AdamW's, and their JSONL records" \
    eval 'grep -qE "^\| adamw \(the run above\) \| \| [0-9.]+ \|" "$r" && grep -qE "^\| muon \| medium \(bf16\) \| [0-9.]+ \| [0-9.]+ \|" "$r" && grep -qE "^\| muon \| high \(TF32\) \| [0-9.]+ \| [0-9.]+ \|" "$r" && [ "$(grep -c "\"type\":\"muon_optimizer\"" "$W/report/gpu_report.jsonl")" = 2 ]'
  check "the cost model's validation run (tiny B=1 T=64) in the throughput table" \
    grep -q "^| tiny B=1 T=64, 3 steps | this trainer (bf16) |" "$r"
  check "the report calibrates a cost-model cluster and validates against its trainer runs" \
    eval '"$BUILD/costmodel" --calibrate-gpu "$W/report" --base costmodel/clusters/h100-8pernode-datasheet.cluster --out "$W/kit.cluster" > "$W/cal.out" 2>&1 &&
          "$BUILD/costmodel" --validate-gpu "$W/report" --cluster "$W/kit.cluster" --out-dir "$W" >> "$W/cal.out" 2>&1 &&
          grep -q "^kernel.adamw.efficiency = " "$W/kit.cluster" && grep -q "^| tiny B=1 T=64 |" "$W/gpu_validation.md"'
  # --bench: device, kernel times and throughput only.
  OMP_NUM_THREADS=2 PATH="$W/bin:$PATH" PYTHON="$PY" timeout 600 bash "$HB/tools/gpu_check.sh" --self-test --bench --out "$W/bench" > "$W/bench.out" 2>&1
  rc=$?
  check "--self-test --bench exits 0 with steps 1, 7 and 8 only" \
    eval '[ $rc = 0 ] && grep -q "^## 1. Device" "$W/bench/gpu_report.md" && grep -q "^## 7. Kernel times" "$W/bench/gpu_report.md" && grep -q "^## 8. Trainer throughput" "$W/bench/gpu_report.md" && ! grep -qE "^## [2-6]\. " "$W/bench/gpu_report.md"'
  [ $rc = 0 ] || tail -n 8 "$W/bench.out" | sed 's/^/        | /'
  check "--llmc with a path that is not a program: a one-line error, exit 2" \
    eval 'bash "$HB/tools/gpu_check.sh" --bench --llmc "$W/no-such-file" > "$W/llmc.out" 2>&1; [ $? = 2 ] && grep -q "^error: --llmc .*no-such-file: not an executable file" "$W/llmc.out"'
}

# ---- make gpu-bundle (nvcc) -----------------------------------------------------------------------------
t_nvcc_bundle() {
  if ! command -v nvcc > /dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then echo "SKIPPED: nvcc not found"; finish; fi
  make --no-print-directory -j"$(nproc)" BUILD="$BUILD" gpu-bundle > "$W/make.out" 2>&1
  local rc=$?
  tail -n 14 "$W/make.out" | sed 's/^/        /'
  check "make gpu-bundle (nvcc programs built and linked, then --dry-run) exits 0" test $rc = 0
  check "the bundle holds the nvcc-built kernel tests, test_ptx, trainers, gpu_info, the two benchmarks and the two kernel libraries" \
    eval 'for p in test_attention_cuda test_layers_cuda_fp32 test_matmul_loss_adamw test_ptx train_gpt_cuda train_gpt_cuda_fp32 gpu_info bench_kernels_cuda attention_bench; do [ -x $BUILD/gpu-bundle/libexec/$p ] || exit 1; done && [ -f $BUILD/gpu-bundle/lib/libgpt_kernels.so ] && [ -f $BUILD/gpu-bundle/lib/libgpt_kernels_fp32.so ]'
  # The fat binaries' entry headers (the toolkit here has no cuobjdump): kind 2 = machine code,
  # 1 = PTX, and the SM version at byte 28 of each entry header.
  check "every fat binary of the kernel libraries and the nvcc programs holds sm_80 and sm_90 machine code and compute_90 PTX" \
    "$PY" - $BUILD/gpu-bundle/lib/libgpt_kernels.so $BUILD/gpu-bundle/lib/libgpt_kernels_fp32.so \
      $BUILD/gpu-bundle/libexec/train_gpt_cuda $BUILD/gpu-bundle/libexec/train_gpt_cuda_fp32 \
      $BUILD/gpu-bundle/libexec/test_attention_cuda $BUILD/gpu-bundle/libexec/test_ptx \
      $BUILD/gpu-bundle/libexec/bench_kernels_cuda $BUILD/gpu-bundle/libexec/attention_bench <<'EOF'
import struct, sys
MAGIC = struct.pack("<I", 0xBA55ED50)
for path in sys.argv[1:]:
    data, pos, fatbins = open(path, "rb").read(), 0, 0
    while (i := data.find(MAGIC, pos)) >= 0:
        _, hsize, fsize = struct.unpack_from("<HHQ", data, i + 4)
        p, end, images = i + hsize, i + hsize + fsize, set()
        while p < end:
            kind, _, ehsize, psize = struct.unpack_from("<HHIQ", data, p)
            images.add(("elf" if kind == 2 else "ptx" if kind == 1 else "?", struct.unpack_from("<I", data, p + 28)[0]))
            if not ehsize:
                break
            p += ehsize + psize
        assert images == {("elf", 80), ("elf", 90), ("ptx", 90)}, (path, images)
        fatbins, pos = fatbins + 1, i + 4
    assert fatbins > 0, path
    print("%s: %d fat binaries, each sm_80 + sm_90 + compute_90 PTX" % (path, fatbins))
EOF
  check "the MANIFEST names the CUDA libraries the box must provide" \
    eval 'grep -q "^cuda_libraries .*libcudart.so.13.*" $BUILD/gpu-bundle/MANIFEST || grep -q "^cuda_libraries .*libcublas" $BUILD/gpu-bundle/MANIFEST'
}

# ---- tools/gpu_hopper_check.sh on the host bundle ---------------------------------------------------
t_hopper_check() {
  need_bundle
  local o=$W/hopper
  OMP_NUM_THREADS=2 PYTHON=/usr/bin/python3 timeout 900 bash tools/gpu_hopper_check.sh --bundle "$HB" --out "$o" \
    --steps ptx,tests,bench,window --hs 64 --T 128 --tokens 256 --variants current,sm80,sm90-next --forms sm90,sm90-persistent \
    --test-limit 300 --deadline 800 > "$W/hopper.out" 2>&1
  local rc=$?
  check "gpu_hopper_check.sh on the host bundle: every step passes (exit $rc), summary.txt and logs.tgz back" \
    eval '[ $rc = 0 ] && grep -q "done: 0 step(s) failed" "$o/summary.txt" && tar tzf "$o/logs.tgz" | grep -q tests-bwd-sm90.log'
  check "each test_ptx group, test_graphs and the seven kernel choices ran and passed" \
    eval '[ "$(grep -cE "^\[[0-9]+s\] (test_ptx-(base|mbarrier-named|tma|store|wgmma)|test_graphs|tests-(default|sm80|fwd-sm90|bwd-sm90|sm90-next|bwd-ds2|bwd-q128)): exit 0" "$o/summary.txt")" = 13 ]'
  check "the benchmark's table: current, sm80 and sm90-next at HS 64, T 128" \
    eval '[ "$(grep -cE "^(current|sm80|sm90-next) +64 +128 " "$o/attention_table.txt")" = 3 ]'
  check "the sliding-window table: current and sm80 at HS 64, T 128, window 1024 named" \
    eval '[ "$(grep -cE "^(current|sm80) +64 +128 " "$o/attention_table_window.txt")" = 2 ] &&
      grep -q "attention-bench-window: exit 0" "$o/summary.txt" &&
      tar xzf "$o/logs.tgz" -O ./attention-bench-window.log | grep -q "sliding window 1024"'
  check "the document-masked rows in the same table: documents and docs-sm80 at HS 64, T 128, documents of 1024 named" \
    eval '[ "$(grep -cE "^(documents|docs-sm80) +64 +128 " "$o/attention_table_window.txt")" = 2 ] &&
      grep -q "attention-bench-documents: exit 0" "$o/summary.txt" &&
      tar xzf "$o/logs.tgz" -O ./attention-bench-documents.log | grep -q "documents of 1024 tokens"'
  check "the grouped-query rows in the same table: gqa-8 at HS 64, T 128, 8 key/value heads named" \
    eval '[ "$(grep -cE "^gqa-8 +64 +128 " "$o/attention_table_window.txt")" = 1 ] &&
      grep -q "attention-bench-gqa: exit 0" "$o/summary.txt" &&
      tar xzf "$o/logs.tgz" -O ./attention-bench-gqa.log | grep -q "8 key/value heads (grouped-query)"'
  check "the forms' own table, after the benchmark (sm90-next passed): sm90 and sm90-persistent" \
    eval '[ "$(grep -cE "^(sm90|sm90-persistent) +64 +128 " "$o/attention_table_forms.txt")" = 2 ] &&
      grep -A1 "attention-bench:" "$o/summary.txt" | grep -q "attention-bench-forms: exit 0"'
  [ $rc = 0 ] || tail -n 20 "$W/hopper.out" | sed 's/^/        | /'
  # The next forms failing their tests (a planted test program in a copy of the bundle that fails
  # only with ATTENTION_FWD_HOPPER_GRID=persistent or ATTENTION_BWD_HOPPER=q128): sm90-next left out
  # of the benchmark, sm90-q128 out of the forms, the forms timed last (after Nsight Compute's step,
  # which says it finds no ncu here).
  local fb=$W/bundle-next-fails
  cp -as "$(cd "$HB" && pwd)" "$fb" && rm "$fb/libexec/test_attention_cuda" &&
    printf '%s\n' '#!/bin/sh' '[ "${ATTENTION_FWD_HOPPER_GRID:-}" = persistent ] && { echo "FAIL  planted"; exit 1; }' \
      '[ "${ATTENTION_BWD_HOPPER:-}" = q128 ] && { echo "FAIL  planted"; exit 1; }' \
      'echo "ok    planted"' > "$fb/libexec/test_attention_cuda" && chmod +x "$fb/libexec/test_attention_cuda"
  PYTHON=/usr/bin/python3 timeout 600 bash tools/gpu_hopper_check.sh --bundle "$fb" --out "$W/hopper-next" \
    --steps tests,bench,ncu --hs 64 --T 128 --tokens 256 --variants current,sm90-next --forms sm90,sm90-q128 \
    --test-limit 60 --deadline 500 > "$W/hopper-next.out" 2>&1
  rc=$?
  local sn=$W/hopper-next/summary.txt
  check "next forms failing their tests: exit 1, sm90-next left out, sm90-q128 too, the forms' table last" \
    eval '[ $rc = 1 ] && grep -q "tests-sm90-next: exit 1" "$sn" && grep -q "left out of the benchmark (variants current)" "$sn" &&
      grep -q "tests-bwd-q128: exit 1" "$sn" && grep -q "q128 form failed its tests: left out of the forms (sm90)" "$sn" &&
      [ "$(grep -cE "^sm90 +64 +128 " "$W/hopper-next/attention_table_forms.txt")" = 1 ] &&
      [ "$(grep -cE "^sm90-q128 " "$W/hopper-next/attention_table_forms.txt")" = 0 ] &&
      [ "$(grep -cE "^sm90-next " "$W/hopper-next/attention_table.txt")" = 0 ] &&
      grep -A1 "ncu: not found" "$sn" | grep -q "attention-bench-forms: exit 0"'
  [ $rc = 1 ] || tail -n 20 "$W/hopper-next.out" | sed 's/^/        | /'
  timeout 120 bash tools/gpu_hopper_check.sh --bundle "$HB" --out "$W/hopper-late" --steps ptx --deadline 5 > "$W/hopper-late.out" 2>&1
  check "a deadline already past: every step (test_ptx's five groups, test_graphs) skipped and said so" \
    eval '[ "$(grep -c "skipped (deadline)" "$W/hopper-late/summary.txt")" = 6 ]'
  bash tools/gpu_hopper_check.sh --bundle "$HB" --out "$W/x" --deadline soon > "$W/hopper-bad.out" 2>&1
  rc=$?
  check "a bad --deadline: exit 2 and one line naming it" \
    eval '[ $rc = 2 ] && grep -qx "error: --deadline: expected whole seconds, found .soon." "$W/hopper-bad.out"'
  bash tools/gpu_hopper_check.sh --bundle "$HB" --out "$W/x" --test-limit 0 > "$W/hopper-bad.out" 2>&1
  rc=$?
  check "a bad --test-limit: exit 2 and one line naming it" \
    eval '[ $rc = 2 ] && grep -qx "error: --test-limit: expected whole seconds above 0, found .0." "$W/hopper-bad.out"'
}

case "$part" in
  hopper-check) t_hopper_check ;;
  compare-logs) t_compare_logs ;;
  bundle-env) t_bundle_env ;;
  dry-run) t_dry_run ;;
  isolated) t_isolated ;;
  self-test) t_self_test ;;
  nvcc-bundle) t_nvcc_bundle ;;
  *) echo "usage: $0 compare-logs|bundle-env|dry-run|isolated|self-test|nvcc-bundle|hopper-check" >&2; exit 2 ;;
esac
finish
