#!/usr/bin/env bash
# The matmul test (bf16 or fp32 build, given) with cuBLASLt refusing every epilogue at
# cublasLtMatmul, after its heuristic offered an algorithm (the host runtime's fault injection,
# CUDA_HOST_CUBLASLT_REFUSE): it must pass its bounds, and for each epilogue print the fallback's
# note, the runtime's refusal, and its own check that every such call took the fallback.
#   tests/test_matmul_refuse.sh build/tests/cuda/test_matmul_loss_adamw[_fp32]
set -u
prog=${1:?usage: tests/test_matmul_refuse.sh TEST_PROGRAM}
epilogues="BIAS GELU_AUX GELU_AUX_BIAS BGRADB DGELU"
out=$(CUDA_HOST_CUBLASLT_REFUSE=$(echo $epilogues | tr ' ' ,) "$prog" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: $prog exited $rc"; exit 1; }
for e in $epilogues; do
  printf '%s\n' "$out" | grep -q "^note: cuBLASLt refused the $e epilogue" &&
    printf '%s\n' "$out" | grep -Eq "^ok +$e refused by CUDA_HOST_CUBLASLT_REFUSE: [1-9][0-9]* fallback calls, no fused one" &&
    printf '%s\n' "$out" | grep -q "epilogue $e refused by CUDA_HOST_CUBLASLT_REFUSE" ||
    { echo "FAIL: missing the note or the fallback check for $e"; exit 1; }
done
echo "ok: every epilogue refused by cublasLtMatmul took its fallback within the bounds"
