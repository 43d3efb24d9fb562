#!/usr/bin/env bash
# The host runtime's random stream interleaving catches a missing event dependency: the ring
# schedule with one wait removed (tests/cuda_dist.mk: the forward computes with the arriving K|V
# block without waiting for it) must give wrong results under at least one of SEEDS, while the
# real schedule is right under every one of them (same mesh, same inputs, the nccl transport).
#   tests/test_mutant_wait.sh [SEEDS...]   (default 1..8)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3 4 5 6 7 8)
args=(--pq 1 --pkv 4 --HS 16 --algo ring --comm nccl)
caught=() failures=0
for seed in "${seeds[@]}"; do
  real=$(CUDA_HOST_DEVICES=4 CUDA_HOST_SCHEDULE_SEED=$seed timeout 120 bash tests/mpirun.sh 4 $BUILD/tests/test_dist_attention_cuda_fp32 "${args[@]}" 2>&1)
  if ! grep -q '^ok   ring' <<< "$real"; then
    echo "FAIL: seed $seed: the real ring schedule is wrong:"; tail -n 5 <<< "$real"; failures=$((failures + 1))
  fi
  mutant=$(CUDA_HOST_DEVICES=4 CUDA_HOST_SCHEDULE_SEED=$seed timeout 120 bash tests/mpirun.sh 4 $BUILD/tests/test_dist_attention_cuda_mutant "${args[@]}" 2>&1)
  # A wrong result shows in the schedule's FAIL line (the leaked requests end the job afterwards).
  if grep -q '^FAIL ring' <<< "$mutant"; then
    caught+=("$seed")
    echo "seed $seed: mutant caught: $(grep '^FAIL ring' <<< "$mutant" | cut -c1-150)"
  else
    echo "seed $seed: mutant not caught ($(grep -m1 -E '^(ok|FAIL)' <<< "$mutant" | cut -c1-100))"
  fi
done
[ ${#caught[@]} -gt 0 ] || { echo "FAIL: no seed of ${seeds[*]} exposed the missing wait"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] && echo "test_mutant_wait: ok (the missing wait shows under seeds ${caught[*]}; the real schedule is right under all ${#seeds[@]})"
exit $((failures > 0))
