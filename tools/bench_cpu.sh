#!/usr/bin/env bash
# make bench-cpu: this project's CPU backend and PyTorch eager on the same shape, one after the
# other in one run, and their ratio. Both get the same environment: OpenBLAS's vector kernels,
# passive OpenMP waiting, and glibc malloc thresholds raised so large buffers are reused.
# usage: tools/bench_cpu.sh BENCH_BINARY [PRESET B T STEPS]
set -euo pipefail
bin=$1 preset=${2:-gpt3-125m} B=${3:-4} T=${4:-1024} steps=${5:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} OMP_WAIT_POLICY=PASSIVE MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296
case "$preset" in
  gpt3-125m|d12) shape="--layers 12 --channels 768 --heads 12" ;;
  small) shape="--layers 4 --channels 128 --heads 4" ;;
  *) echo "bench_cpu.sh: no PyTorch shape for preset $preset" >&2; exit 2 ;;
esac
out=$("$bin" --preset "$preset" --batch "$B" --seq "$T" --steps "$steps")
printf '%s\n' "$out"
ours=$(grep '^{' <<< "$out")
# PyTorch gets the OpenBLAS kernels ours ran with (see model/blas_kernels.h).
core=$(sed -n 's/.*OpenBLAS \([A-Za-z0-9]*\) kernels.*/\1/p' <<< "$out" | head -n 1)
[ -n "$core" ] && export OPENBLAS_CORETYPE="$core"
out=$("$PYTHON" tools/bench_torch.py $shape --batch "$B" --seq "$T" --steps "$steps")
printf '%s\n' "$out"
theirs=$(grep '^{' <<< "$out")
awk -v a="$ours" -v b="$theirs" 'BEGIN {
  match(a, /"tokens_per_s":[0-9.]+/); x = substr(a, RSTART + 15, RLENGTH - 15)
  match(b, /"tokens_per_s":[0-9.]+/); y = substr(b, RSTART + 15, RLENGTH - 15)
  printf "bench-cpu: this project %.1f tokens/s, PyTorch eager %.1f tokens/s: %.2fx\n", x, y, x / y }'
