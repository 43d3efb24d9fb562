#!/usr/bin/env bash
# The CUDA trainer, its CUDA sources executed on the host runtime (tests/cuda_host), against the
# CPU trainer on the same tiny model and data.
#   tests/test_cuda_train.sh fp32         build/train_gpt_cuda_host_fp32 vs build/train_gpt: every
#                                         step's loss and gradient norm and both validation losses
#                                         within 1e-4 relative
#   tests/test_cuda_train.sh bf16         build/train_gpt_cuda_host (bf16 storage, fp32 master
#                                         weights) vs build/train_gpt: losses within 2e-2 relative,
#                                         gradient norms within 1e-1
#   tests/test_cuda_train.sh resume-bf16  10 steps straight == 5, --exit-after, --resume, 5 more:
#   tests/test_cuda_train.sh resume-fp32  identical step losses, eval and sample lines, and final
#                                         model file (bf16 also checks that the stochastic rounding
#                                         of the parameters is restored on resume)
# The runs and comparisons are tools/trainer_checks.sh (shared with the GPU check), on the
# learnable token stream of tools/stream_shards.py.
set -u
cd "$(dirname "$0")/.."
part=${1:?usage: tests/test_cuda_train.sh fp32|bf16|resume-bf16|resume-fp32}
CPU=${CPU:-build/train_gpt}
CUDA_BF16=${CUDA_BF16:-build/train_gpt_cuda_host}
CUDA_FP32=${CUDA_FP32:-build/train_gpt_cuda_host_fp32}
COMPARE=${COMPARE:-build/tools/compare_logs}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE
export OMPI_MCA_ess_singleton_isolated=1
mkdir -p build/tmp
W=$(mktemp -d "build/tmp/test_cuda_train.$part.XXXXXX")
"$PY" tools/stream_shards.py "$W/data" || exit 1

# The checks themselves are tools/trainer_checks.sh, which the GPU check runs on a GPU too.
checks() {
  if bash tools/trainer_checks.sh "$@" --data "$W/data" --work "$W/run"; then rm -rf "$W"; exit 0; fi
  echo "files kept in $W"; exit 1
}

case "$part" in
  fp32) checks vs-cpu --cpu "$CPU" --test "$CUDA_FP32" --backend cuda-fp32 --compare "$COMPARE" \
          --loss-tol 1e-4 --norm-tol 1e-4 ;;
  bf16) checks vs-cpu --cpu "$CPU" --test "$CUDA_BF16" --backend cuda-bf16 --compare "$COMPARE" \
          --loss-tol 2e-2 --norm-tol 1e-1 ;;
  resume-bf16) checks resume --test "$CUDA_BF16" ;;
  resume-fp32) checks resume --test "$CUDA_FP32" ;;
  *) echo "usage: $0 fp32|bf16|resume-bf16|resume-fp32" >&2; exit 2 ;;
esac
