#!/usr/bin/env bash
# `make train` picks its trainer (tools/train_backend.sh): the CUDA trainer, bf16, where a GPU is
# visible and nvcc can build for it; the CPU trainer elsewhere. No GPU here: a stand-in nvidia-smi
# (listing an H100, listing none, or failing) and a stand-in nvcc on PATH, and `make train
# TRAIN_DRY_RUN=1`, which says what it would run and builds nothing.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
mkdir -p "$BUILD/tmp"
W=$(mktemp -d "$BUILD/tmp/test_train_backend.XXXXXX")
W=$(cd "$W" && pwd)
fails=0
ok() { echo "  ok    $*"; }
bad() { echo "  FAIL  $*"; fails=$((fails + 1)); }

mkdir -p "$W/gpu" "$W/nogpu" "$W/broken" "$W/cuda/bin"
printf '#!/bin/sh\n[ "$1" = -L ] || exit 2\necho "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)"\n' > "$W/gpu/nvidia-smi"
printf '#!/bin/sh\nexit 0\n' > "$W/nogpu/nvidia-smi"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' > "$W/broken/nvidia-smi"
printf '#!/bin/sh\necho "nvcc stand-in"\n' > "$W/cuda/bin/nvcc"
chmod +x "$W"/*/nvidia-smi "$W/cuda/bin/nvcc"
BASE_PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v cuda | paste -sd:)   # no real nvidia-smi or nvcc

# expect NAME WANT PATTERN ENV...: tools/train_backend.sh under ENV prints WANT, with PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3 out
  shift 3
  out=$(env "$@" bash tools/train_backend.sh "${NVCC_ARG:-}" 2>&1)
  if [ "${out%% *}" = "$want" ] && printf '%s' "$out" | grep -q -- "$pattern"; then ok "$name: $out"
  else bad "$name: '$out', expected '$want' and '$pattern'"; fi
}
NVCC_ARG=$W/cuda/bin/nvcc expect "a GPU and nvcc" cuda "1 GPU(s), NVIDIA H100 80GB HBM3 first, and nvcc at $W/cuda/bin/nvcc" PATH="$W/gpu:$BASE_PATH"
NVCC_ARG="" expect "a GPU, no nvcc" cpu "NVIDIA H100 80GB HBM3 is here, but nvcc was not found" PATH="$W/gpu:$BASE_PATH"
NVCC_ARG=$W/cuda/bin/nvcc expect "no nvidia-smi" cpu "no GPU: nvidia-smi not found" PATH="$BASE_PATH"
NVCC_ARG=$W/cuda/bin/nvcc expect "nvidia-smi lists none" cpu "nvidia-smi -L lists none" PATH="$W/nogpu:$BASE_PATH"
NVCC_ARG=$W/cuda/bin/nvcc expect "nvidia-smi fails (no driver)" cpu "nvidia-smi -L lists none" PATH="$W/broken:$BASE_PATH"
NVCC_ARG=$W/cuda/bin/nvcc expect "CUDA_VISIBLE_DEVICES empty" cpu "CUDA_VISIBLE_DEVICES='' hides the 1 GPU" PATH="$W/gpu:$BASE_PATH" CUDA_VISIBLE_DEVICES=
NVCC_ARG=$W/cuda/bin/nvcc expect "CUDA_VISIBLE_DEVICES=-1" cpu "hides" PATH="$W/gpu:$BASE_PATH" CUDA_VISIBLE_DEVICES=-1
NVCC_ARG=$W/cuda/bin/nvcc expect "CUDA_VISIBLE_DEVICES=0" cuda "NVIDIA H100" PATH="$W/gpu:$BASE_PATH" CUDA_VISIBLE_DEVICES=0
NVCC_ARG=$W/cuda/bin/nvcc expect "TRAIN_BACKEND=cpu with a GPU" cpu "TRAIN_BACKEND=cpu" PATH="$W/gpu:$BASE_PATH" TRAIN_BACKEND=cpu
NVCC_ARG="" expect "TRAIN_BACKEND=cuda without nvcc" cpu "nvcc was not found" PATH="$BASE_PATH" TRAIN_BACKEND=cuda

# make train itself: the trainer and arguments it would run.
run_make() {   # ENV...: make train TRAIN_DRY_RUN=1 under ENV
  env "$@" make --no-print-directory train TRAIN_DRY_RUN=1 BUILD="$BUILD" 2>&1
}
out=$(run_make PATH="$W/gpu:$BASE_PATH" NVCC="$W/cuda/bin/nvcc")
if printf '%s\n' "$out" | grep -q "^make train: the cuda trainer, $BUILD/train_gpt_cuda: 1 GPU(s), NVIDIA H100" &&
   printf '%s\n' "$out" | grep -q "^make train: $BUILD/train_gpt_cuda --preset gpt3-125m .*--train-data '.*fortunes_train_\*.bin'"; then
  ok "make train with a GPU and nvcc: the bf16 CUDA trainer on GPT-3 Small, saying why"
else bad "make train with a GPU and nvcc:"; printf '%s\n' "$out" | tail -n 4 | sed 's/^/        | /'; fi
out=$(run_make PATH="$BASE_PATH" NVCC=no-such-nvcc)
if printf '%s\n' "$out" | grep -q "^make train: the cpu trainer, $BUILD/train_gpt: no GPU: nvidia-smi not found" &&
   printf '%s\n' "$out" | grep -q "^make train: $BUILD/train_gpt --preset small "; then
  ok "make train without a GPU: the CPU trainer, as before"
else bad "make train without a GPU:"; printf '%s\n' "$out" | tail -n 4 | sed 's/^/        | /'; fi

if [ "$fails" -eq 0 ]; then rm -rf "$W"; echo "test_train_backend: passed"; exit 0; fi
echo "test_train_backend: $fails failure(s); files kept in $W"
exit 1
