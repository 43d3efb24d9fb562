#!/usr/bin/env bash
# The cost model's bytes per rank against the trainer's, to the byte: each configuration trains
# 3 steps under mpirun, and the comm layer's count inside the steps (the log's timeline record)
# of the rank that moves the most, per step, must be what build/costmodel predicts for its
# busiest rank with the same model, mesh and options. Options that add scalars to the step's
# reductions are included: --z-loss (one more fp64 in the loss all-reduce) and --log-params-norm
# (under --zero 1 an all-reduce of its own).
#   tests/test_costmodel_bytes.sh
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
COSTMODEL=${COSTMODEL:-$BUILD/costmodel}
PY=${PYTHON:-/usr/bin/python3}
mkdir -p $BUILD/tmp
W=$(mktemp -d $BUILD/tmp/test_costmodel_bytes.XXXXXX)
test_name="costmodel bytes"
. tests/checks.sh

# 8000 tokens below 256, any will do: only the bytes are looked at.
"$PY" -c 'import struct, sys
n = 8000
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)) +
                              struct.pack("<%dH" % n, *(i * 7 % 256 for i in range(n))))' \
  "$W/train_000.bin"

SHAPE=(--layers 1 --channels 32 --heads 2 --vocab 256 --seq-len 32 --context 32 --batch 2)
STEPS=3
# case NAME NP MESH_AND_OPTIONS...: the trainer's bytes per rank per step against the model's.
case_bytes() {
  local name=$1 np=$2
  shift 2
  timeout 120 bash tests/mpirun.sh "$np" "$BUILD/train_gpt" --preset tiny "${SHAPE[@]}" \
    --train-data "$W/train_000.bin" --val-data "" --tokenizer "" --steps $STEPS --lr 1e-3 \
    --no-save --quiet --sample-length 0 --timeline 1 --out-dir "$W/$name" "$@" > "$W/$name.out" 2>&1
  local got want
  got=$("$PY" -c 'import json, sys
rec = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "timeline"][-1]
print(max(rec["step_comm_bytes_per_rank"]) // int(sys.argv[2]))' "$W/$name/log.jsonl" $STEPS 2> "$W/$name.py.err")
  want=$("$COSTMODEL" --preset tiny "${SHAPE[@]}" --gpus "$np" \
         --cluster costmodel/clusters/cpu-local.cluster "$@" \
         2> "$W/$name.cm.err" | sed -n 's/^bytes per rank *\([0-9]*\) .*/\1/p')
  if [ -n "$got" ] && [ "$got" = "$want" ]; then
    ok "$name: $got bytes per rank per step, as the cost model predicts"
  else
    bad "$name: the trainer moved '$got' bytes per rank per step, the cost model predicts '$want'"
    tail -n 3 "$W/$name.out" "$W/$name.py.err" "$W/$name.cm.err" | sed 's/^/        | /'
  fi
}

DP2=(--dp 2 --pq 1 --pkv 1 --attention 2d)
case_bytes dp2 2 "${DP2[@]}"
case_bytes dp2-z-loss 2 "${DP2[@]}" --z-loss 1e-4
case_bytes dp2-params-norm 2 "${DP2[@]}" --log-params-norm
case_bytes dp2-zero 2 "${DP2[@]}" --zero 1
case_bytes dp2-zero-z-loss-params-norm 2 "${DP2[@]}" --zero 1 --z-loss 1e-4 --log-params-norm
case_bytes dp2-ring2-z-loss 4 --dp 2 --pq 1 --pkv 2 --attention ring --z-loss 1e-4
case_bytes mesh2x2-zero-z-loss-params-norm 4 --dp 1 --pq 2 --pkv 2 --attention 2d --zero 1 \
  --z-loss 1e-4 --log-params-norm

finish
