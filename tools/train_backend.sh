#!/usr/bin/env bash
# Which trainer `make train` runs: the CUDA trainer (bf16) where this machine has a visible GPU and
# nvcc to build for it, else the CPU trainer. Prints one line, "cuda REASON" or "cpu REASON", and
# exits 0; the Makefile runs the trainer it names and prints the reason.
#
#   tools/train_backend.sh [NVCC]   NVCC: the nvcc the Makefile found (empty: none)
#
# A visible GPU: `nvidia-smi -L` lists at least one, and CUDA_VISIBLE_DEVICES does not hide them
# all (empty, or -1 / NoDevFiles, as CUDA treats them). TRAIN_BACKEND=cpu|cuda overrides the
# choice (cuda still needs nvcc).
set -u
nvcc=${1:-}
case "${TRAIN_BACKEND:-}" in
  "") ;;
  cpu) echo "cpu TRAIN_BACKEND=cpu"; exit 0 ;;
  cuda)
    [ -n "$nvcc" ] && { echo "cuda TRAIN_BACKEND=cuda, nvcc at $nvcc"; exit 0; }
    echo "cpu TRAIN_BACKEND=cuda, but nvcc was not found (install the CUDA toolkit or set NVCC=/path/to/nvcc)"; exit 0 ;;
  *) echo "cpu TRAIN_BACKEND='$TRAIN_BACKEND' is neither cpu nor cuda; the CPU trainer runs"; exit 0 ;;
esac
if ! command -v nvidia-smi > /dev/null 2>&1; then
  echo "cpu no GPU: nvidia-smi not found"; exit 0
fi
gpus=$(timeout 20 nvidia-smi -L 2> /dev/null | grep -c '^GPU [0-9]')
if [ "${gpus:-0}" -eq 0 ]; then
  echo "cpu no GPU: nvidia-smi -L lists none (no driver, or no device)"; exit 0
fi
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ]; then
  case "$CUDA_VISIBLE_DEVICES" in
    ""|-1|NoDevFiles) echo "cpu no GPU visible: CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides the $gpus GPU(s)"; exit 0 ;;
  esac
fi
name=$(timeout 20 nvidia-smi -L 2> /dev/null | sed -n '1s/^GPU 0: \(.*\) (UUID.*/\1/p')
if [ -z "$nvcc" ]; then
  echo "cpu ${name:-a GPU} is here, but nvcc was not found to build for it (install the CUDA toolkit or set NVCC=/path/to/nvcc)"
  exit 0
fi
echo "cuda $gpus GPU(s), ${name:-GPU 0} first, and nvcc at $nvcc"
