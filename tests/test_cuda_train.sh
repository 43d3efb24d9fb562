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
#   tests/test_cuda_train.sh refuse       a world of 2 ranks and --zero 1 are refused on the CUDA
#                                         backend with the reason (no NCCL transport yet)
# The run learns (lr 1e-2, no warmup, a learnable token stream), so a wrong gradient or update
# shows in the losses within a few steps rather than hiding under a flat loss curve. Sampling is
# on (4 tokens every 5 steps) so the sampler's logits path runs on the CUDA backend too.
set -u
cd "$(dirname "$0")/.."
part=${1:?usage: tests/test_cuda_train.sh fp32|bf16|resume-bf16|resume-fp32|refuse}
CPU=${CPU:-build/train_gpt}
CUDA_BF16=${CUDA_BF16:-build/train_gpt_cuda_host}
CUDA_FP32=${CUDA_FP32:-build/train_gpt_cuda_host_fp32}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE
export OMPI_MCA_ess_singleton_isolated=1
mkdir -p build/tmp
W=$(mktemp -d "build/tmp/test_cuda_train.$part.XXXXXX")
failures=0

ok() { echo "  ok    $*"; }
fail() { echo "  FAIL  $*"; failures=$((failures + 1)); }
finish() {
  if [ "$failures" -eq 0 ]; then rm -rf "$W"; echo "$part: passed"; exit 0; fi
  echo "$part: $failures failure(s); files kept in $W"; exit 1
}

# A noisy counting stream over 64 of the 512 tokens (llm.c shards, uint16, version 1).
"$PY" - "$W" <<'EOF'
import struct, sys
def shard(path, n, x):
    toks, t = [], 0
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7fffffff
        r = x >> 8
        t = (t + 1) % 64 if r % 8 else (r >> 3) % 512
        toks.append(t)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *toks))
shard(sys.argv[1] + "/t_train_000001.bin", 12000, 7)
shard(sys.argv[1] + "/t_val_000000.bin", 1000, 9)
EOF

ARGS=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
      --seq-len 16 --steps 10 --eval-every 5 --eval-batches 4 --lr 1e-2 --warmup 0
      --sample-length 4 --sample-every 5 --quiet --peak-gflops 1
      --train-data "$W/t_train_*.bin" --val-data "$W/t_val_*.bin" --tokenizer "")

# run NAME PROGRAM ARGS...: output in $W/NAME.out, exit status checked.
run() {
  local name=$1 prog=$2; shift 2
  if [ ! -x "$prog" ]; then fail "$name: $prog is not built"; return 1; fi
  timeout 300 "$prog" "$@" > "$W/$name.out" 2>&1 < /dev/null
  local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit status $rc"; tail -n 5 "$W/$name.out" | sed 's/^/        | /'; return 1; fi
}

# "kind step value" lines of a JSONL log: loss and grad_norm of every step, val_loss of evals.
series() {
  "$PY" - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o.get("type") == "step":
        print("loss", o["step"], repr(o["loss"]))
        print("norm", o["step"], repr(o["grad_norm"]))
    elif o.get("type") == "eval":
        print("val", o["step"], repr(o["val_loss"]))
EOF
}

# compare LABEL LOG_REF LOG_TEST LOSS_TOL NORM_TOL: relative differences per step.
compare() {
  local label=$1
  series "$2" > "$W/ref.txt"; series "$3" > "$W/test.txt"
  local report
  report=$("$PY" - "$W/ref.txt" "$W/test.txt" "$4" "$5" <<'EOF'
import sys
ref = [l.split() for l in open(sys.argv[1])]
tst = [l.split() for l in open(sys.argv[2])]
tol = {"loss": float(sys.argv[3]), "val": float(sys.argv[3]), "norm": float(sys.argv[4])}
if [r[:2] for r in ref] != [t[:2] for t in tst] or len(ref) < 20:
    print("BAD the logs hold different steps: %d vs %d entries" % (len(ref), len(tst)))
    sys.exit()
worst = {}
for r, t in zip(ref, tst):
    a, b = float(r[2]), float(t[2])
    rel = abs(b - a) / max(abs(a), 1e-30)
    if rel > worst.get(r[0], (-1,))[0]:
        worst[r[0]] = (rel, r[1], a, b)
    if not rel <= tol[r[0]]:
        print("BAD %s at step %s: %.9g vs %.9g, relative difference %.3g > %g" % (r[0], r[1], a, b, rel, tol[r[0]]))
for k in ("loss", "val", "norm"):
    if k in worst:
        rel, step, a, b = worst[k]
        print("max relative difference of %-4s %.3g (step %s: cpu %.9g, cuda %.9g; bound %g)" % (k, rel, step, a, b, tol[k]))
EOF
)
  printf '%s\n' "$report" | sed 's/^/        /'
  if printf '%s\n' "$report" | grep -q '^BAD'; then fail "$label"; else ok "$label"; fi
}

vs_cpu() {   # PROGRAM LOSS_TOL NORM_TOL
  run cpu "$CPU" "${ARGS[@]}" --out-dir "$W/cpu" || return
  run cuda "$1" "${ARGS[@]}" --out-dir "$W/cuda" || return
  grep -q "backend cuda-$part" "$W/cuda.out" && ok "the run says: backend cuda-$part" ||
    fail "the run does not print its backend (cuda-$part)"
  compare "$part: per-step losses, gradient norms and validation losses against the CPU trainer" \
    "$W/cpu/log.jsonl" "$W/cuda/log.jsonl" "$2" "$3"
}

resume() {   # PROGRAM
  run straight "$1" "${ARGS[@]}" --out-dir "$W/straight" || return
  run first "$1" "${ARGS[@]}" --out-dir "$W/split" --exit-after 5 || return
  grep -q "^stopping early at step 5 " "$W/first.out" && ok "first: stopped early at step 5" ||
    fail "first: no early stop at step 5"
  run second "$1" "${ARGS[@]}" --out-dir "$W/split" --resume || return
  grep -q "^resume: continuing from step 5 in " "$W/second.out" && ok "second: resumed from step 5" ||
    fail "second: did not resume from step 5"
  # Everything but the timings, as the log wrote it.
  local a b
  a=$(grep -E '"type":"step"' "$W/straight/log.jsonl" | sed -E 's/,"ms".*//')
  b=$(grep -E '"type":"step"' "$W/split/log.jsonl" | sed -E 's/,"ms".*//')
  [ "$(printf '%s\n' "$a" | wc -l)" -eq 10 ] && [ "$a" = "$b" ] &&
    ok "10 step losses and norms identical (straight vs stop + resume)" ||
    { fail "step losses differ (straight vs stop + resume)"; diff <(echo "$a") <(echo "$b") | head -n 12; }
  a=$(grep -E '"type":"(eval|sample)"' "$W/straight/log.jsonl")
  b=$(grep -E '"type":"(eval|sample)"' "$W/split/log.jsonl")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok "eval and sample lines identical" ||
    fail "eval or sample lines differ"
  cmp -s "$W/straight/model_00000010.bin" "$W/split/model_00000010.bin" &&
    ok "final model files byte-identical" || fail "final model files differ"
}

refuse() {
  local out rc
  out=$(timeout 120 bash tests/mpirun.sh 2 "$CUDA_BF16" "${ARGS[@]}" --dp 2 --out-dir "$W/world2" 2>&1)
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] && printf '%s\n' "$out" | grep -q "needs the NCCL transport"; then
    ok "a world of 2 ranks is refused (exit $rc): $(printf '%s\n' "$out" | grep -m1 '^error')"
  else
    fail "a world of 2 ranks: exit $rc, expected a refusal naming the NCCL transport"
    printf '%s\n' "$out" | tail -n 5 | sed 's/^/        | /'
  fi
  timeout 60 "$CUDA_BF16" "${ARGS[@]}" --out-dir "$W/zero" --zero 1 > "$W/zero.out" 2>&1
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q "^error: --zero 1 on the cuda-bf16 backend" "$W/zero.out"; then
    ok "--zero 1 is refused (exit 2)"
  else
    fail "--zero 1: exit $rc, expected 2 and the reason"; tail -n 3 "$W/zero.out" | sed 's/^/        | /'
  fi
}

case "$part" in
  fp32) vs_cpu "$CUDA_FP32" 1e-4 1e-4 ;;
  bf16) vs_cpu "$CUDA_BF16" 2e-2 1e-1 ;;
  resume-bf16) resume "$CUDA_BF16" ;;
  resume-fp32) resume "$CUDA_FP32" ;;
  refuse) refuse ;;
  *) echo "usage: $0 fp32|bf16|resume-bf16|resume-fp32|refuse" >&2; exit 2 ;;
esac
finish
