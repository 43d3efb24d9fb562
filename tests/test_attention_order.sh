#!/usr/bin/env bash
# The bf16 attention backward adds dQ with atomics that take turns in a fixed order (semaphores,
# attention/flash_backward.cuh). Under the host runtime's seeded block schedules:
# - the real kernel gives the same gradient bits under every seed of SEEDS (one hash per run,
#   `info gradient bits`, over every scenario's dQ, dK, dV), and every run passes;
# - the mutant without the wait (test_attention_cuda_unordered) must be caught: some repeated
#   backward differs from the first ("NOT bit-for-bit deterministic") under at least one seed;
# - the block order's head groups (ATTENTION_BWD_HEAD_GROUP 3 and all heads) and the lagged release
#   of the dQ turns (ATTENTION_BWD_RELEASE=lagged, under the second seed too) change which blocks
#   run together and when a turn passes, not the order of the adds: the same bits again;
# - FlashAttention-2's warp layout (ATTENTION_BWD_LAYOUT=fa2, HS 64 and 128) splits the same MMAs
#   differently among the warps, each product summed in the same order: the same bits again, so
#   an index wrong anywhere in it changes the hash.
# - the Hopper backward's schedules (overlap, regs, early, pingpong, ds2) run the serial form's
#   operations in its order: the same bits again, pingpong and ds2 also with one warp a block
#   lagging (CUDA_HOST_LAG=16), which a missing ordering between its warpgroups would change;
# - the Hopper backward's q128 form (128-query tiles at HS 64) has its own bits: the same under two
#   seeds.
#   tests/test_attention_order.sh [SEEDS...]   (default 1..4; ATTENTION_BWD_KEY_TILE applies)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3 4)
failures=0 first="" caught=()
for seed in "${seeds[@]}"; do
  out=$(CUDA_HOST_SCHEDULE_SEED=$seed timeout 300 $BUILD/tests/cuda/test_attention_cuda --quick 2>&1)
  status=$?
  bits=$(sed -n 's/^info gradient bits //p' <<< "$out")
  if [ $status -ne 0 ] || [ -z "$bits" ]; then
    echo "FAIL: seed $seed: the real backward failed (status $status):"; tail -n 5 <<< "$out"
    failures=$((failures + 1)); continue
  fi
  echo "seed $seed: gradient bits $bits"
  [ -n "$first" ] || first=$bits
  [ "$bits" = "$first" ] || { echo "FAIL: seed $seed gives other gradient bits than seed ${seeds[0]}"; failures=$((failures + 1)); }
  mutant=$(CUDA_HOST_SCHEDULE_SEED=$seed timeout 300 $BUILD/tests/cuda/test_attention_cuda_unordered --quick 2>&1)
  if grep -q 'NOT bit-for-bit deterministic' <<< "$mutant"; then
    caught+=("$seed")
    echo "seed $seed: unordered mutant caught: $(grep -c 'NOT bit-for-bit' <<< "$mutant") scenarios not bit-for-bit"
  else
    echo "seed $seed: unordered mutant not caught"
  fi
done
# The head groups and the lagged release are the sm_80 backward's (the Hopper one has neither):
# under ATTENTION_BWD_KERNEL=sm90 they would only repeat, on the calls it leaves to the sm_80
# kernels, what the sm80 run of this script checks on every call.
runs=() sm80_order=""
[ "${ATTENTION_BWD_KERNEL:-auto}" != sm90 ] && sm80_order=" and head groups 3 and all, lagged release" &&
  runs+=("ATTENTION_BWD_HEAD_GROUP=3 CUDA_HOST_SCHEDULE_SEED=${seeds[0]}"
         "ATTENTION_BWD_HEAD_GROUP=1000000 CUDA_HOST_SCHEDULE_SEED=${seeds[0]}"
         "ATTENTION_BWD_RELEASE=lagged CUDA_HOST_SCHEDULE_SEED=${seeds[0]}"
         "ATTENTION_BWD_RELEASE=lagged CUDA_HOST_SCHEDULE_SEED=${seeds[1]:-${seeds[0]}}")
# The fa2 layout has key tiles of 128: its bits are those of the default layout's 128-key tiles.
# It is a layout of the sm_80 backward at HS 64 and 128, which the Hopper backward (sm90, auto)
# takes over: only ATTENTION_BWD_KERNEL=sm80 runs it.
# The Hopper backward's other schedules, and at HS 80 dV, dK by m64n80k16 (no padding columns):
# the serial form's operations on the real columns in the same order.
overlap=""
[ "${ATTENTION_BWD_KERNEL:-auto}" != sm80 ] &&
  overlap=", the Hopper backward's overlap, regs, early, pingpong and ds2 schedules (all but overlap with ATTENTION_HOPPER_HS80=exact; pingpong and ds2 with a lagging warp too)" &&
  runs+=("ATTENTION_BWD_HOPPER=overlap CUDA_HOST_SCHEDULE_SEED=${seeds[1]:-${seeds[0]}}"
         "ATTENTION_BWD_HOPPER=regs ATTENTION_HOPPER_HS80=exact CUDA_HOST_SCHEDULE_SEED=${seeds[2]:-${seeds[0]}}"
         "ATTENTION_BWD_HOPPER=early ATTENTION_HOPPER_HS80=exact CUDA_HOST_SCHEDULE_SEED=${seeds[3]:-${seeds[0]}}"
         "ATTENTION_BWD_HOPPER=pingpong ATTENTION_HOPPER_HS80=exact CUDA_HOST_SCHEDULE_SEED=${seeds[0]}"
         "ATTENTION_BWD_HOPPER=pingpong ATTENTION_HOPPER_HS80=exact CUDA_HOST_LAG=16 CUDA_HOST_SCHEDULE_SEED=${seeds[1]:-${seeds[0]}}"
         "ATTENTION_BWD_HOPPER=ds2 ATTENTION_HOPPER_HS80=exact CUDA_HOST_SCHEDULE_SEED=${seeds[2]:-${seeds[0]}}"
         "ATTENTION_BWD_HOPPER=ds2 CUDA_HOST_LAG=16 CUDA_HOST_SCHEDULE_SEED=${seeds[3]:-${seeds[0]}}")
fa2=""
[ "${ATTENTION_BWD_KEY_TILE:-128}" = 128 ] && [ "${ATTENTION_BWD_KERNEL:-auto}" = sm80 ] && fa2=", the fa2 layout" &&
  runs+=("ATTENTION_BWD_LAYOUT=fa2 CUDA_HOST_SCHEDULE_SEED=${seeds[0]}"
         "ATTENTION_BWD_LAYOUT=fa2 ATTENTION_BWD_RELEASE=lagged CUDA_HOST_SCHEDULE_SEED=${seeds[1]:-${seeds[0]}}")
for run in ${runs[@]+"${runs[@]}"}; do
  out=$(env $run timeout 300 $BUILD/tests/cuda/test_attention_cuda --quick 2>&1)
  status=$?
  bits=$(sed -n 's/^info gradient bits //p' <<< "$out")
  if [ $status -ne 0 ] || [ "$bits" != "$first" ]; then
    echo "FAIL: $run: status $status, gradient bits '$bits' (seed ${seeds[0]}: '$first')"; tail -n 5 <<< "$out"
    failures=$((failures + 1))
  else
    echo "$run: the same gradient bits"
  fi
done
# The Hopper backward's q128 form sums dQ over all 128 keys in one GEMM: its own bits (and its own
# 128-query scenario), the same under two seeds.
q128=""
if [ "${ATTENTION_BWD_KERNEL:-auto}" != sm80 ]; then
  qbits=()
  for seed in "${seeds[0]}" "${seeds[1]:-${seeds[0]}}"; do
    out=$(ATTENTION_BWD_HOPPER=q128 CUDA_HOST_SCHEDULE_SEED=$seed timeout 300 $BUILD/tests/cuda/test_attention_cuda --quick 2>&1)
    status=$?
    bits=$(sed -n 's/^info gradient bits //p' <<< "$out")
    if [ $status -ne 0 ] || [ -z "$bits" ]; then
      echo "FAIL: ATTENTION_BWD_HOPPER=q128 seed $seed: status $status"; tail -n 5 <<< "$out"
      failures=$((failures + 1))
    else
      echo "ATTENTION_BWD_HOPPER=q128 seed $seed: gradient bits $bits"
      qbits+=("$bits")
    fi
  done
  # Its dQ adds take the turns of 128-query tiles: without the wait, its own scenario changes bits.
  mutant=$(ATTENTION_BWD_HOPPER=q128 CUDA_HOST_SCHEDULE_SEED=${seeds[0]} timeout 300 $BUILD/tests/cuda/test_attention_cuda_unordered --quick 2>&1)
  if ! grep -q '^FAIL single T384 HS64 .*NOT bit-for-bit' <<< "$mutant"; then
    echo "FAIL: ATTENTION_BWD_HOPPER=q128: the unordered mutant not caught on the 128-query tiles under seed ${seeds[0]}"
    failures=$((failures + 1))
  fi
  if [ ${#qbits[@]} = 2 ] && [ "${qbits[0]}" = "${qbits[1]}" ]; then
    q128=", the q128 form's own bits under seeds ${seeds[0]} and ${seeds[1]:-${seeds[0]}} (its unordered mutant caught)"
  else
    echo "FAIL: ATTENTION_BWD_HOPPER=q128: other gradient bits under seeds ${seeds[0]} and ${seeds[1]:-${seeds[0]}}"
    failures=$((failures + 1))
  fi
fi
[ ${#caught[@]} -gt 0 ] || { echo "FAIL: no seed of ${seeds[*]} exposed the unordered dQ adds"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] && echo "test_attention_order: ok (the same bits under seeds ${seeds[*]}$sm80_order$overlap$fa2$q128; the unordered mutant caught under ${caught[*]})"
exit $((failures > 0))
