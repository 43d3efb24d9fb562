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
#   tests/test_cuda_train.sh resume-bf16-zero  the same on 3 ranks with ZeRO-1 (dp 3, nccl): each
#                                         rank keeps the fp32 master weights of its shard only
#                                         (42880 parameters padded to 3 x 14294), which the
#                                         checkpoint gathers and the resume re-rounds shard by shard
#   tests/test_cuda_train.sh resume-async-bf16-zero  the same with --async-save, each checkpoint
#                                         checking that every rank copied to the host only what its
#                                         files hold (build/tests/train_gpt_cuda_host_slow_save)
#   tests/test_cuda_train.sh async-pinned-fallback  --async-save's pinned host copies; with less
#                                         pinned memory than they need (CUDA_HOST_PINNED_MEMORY),
#                                         one warning and the same losses and model files
#   tests/test_cuda_train.sh sync-free-bf16  the bf16 (fp32) CUDA trainer's steps never make the host
#   tests/test_cuda_train.sh sync-free-fp32  wait for the device: from the host runtime's counters
#                                         in each step's log record, 0 host synchronisations while
#                                         a step is issued, 1 at its end (the read of the loss and
#                                         norm), at most 1 device-to-host copy; with the vs-cpu
#                                         comparison above, and again with 4 micro-batches per step
#                                         (12 token uploads between two synchronisations) against
#                                         the CPU trainer on the same options
#   tests/test_cuda_train.sh graphs-bf16  --cuda-graph 1 against the same run without it
#   tests/test_cuda_train.sh graphs-fp32  (--timeline 0 both): identical step losses, gradient
#                                         norms, validation losses and samples, with 2 micro-batches
#                                         per step (both graphs: the first writes the gradients,
#                                         the second adds), --recompute selective, evaluation and
#                                         sampling between steps, and on 2 ranks (dp 2, nccl, ZeRO-1;
#                                         and with gradient buckets, captured in the last graph);
#                                         the counters: the first step launches its kernels one by
#                                         one, every later step 2 graph launches and no layer
#                                         launch, no host synchronisation inside any step
#   tests/test_cuda_train.sh graphs-sp-bf16  the same on sequence-parallel meshes (the graphs hold
#                                         the attention's NCCL operations): 2d-overlap on 2x2,
#                                         ulysses on 2 ranks with dp 2 and ZeRO-1; ring on 4 ranks
#                                         with packed documents (Ring's early stop off with graphs)
#   tests/test_cuda_train.sh ulysses-launches  the bf16 trainer with --attention ulysses on 2 and 4
#                                         ranks (nccl, 4 heads): the same launches per layer (the
#                                         all-to-alls' blocks are packed and unpacked by one launch
#                                         per tensor, whatever the number of peers)
#   tests/test_cuda_train.sh resume-graphs-bf16  the resume check with --cuda-graph 1 --timeline 0
#                                         (the resumed process runs its first step eagerly, then
#                                         captures again): the same bits as the straight run
#   tests/test_cuda_train.sh resume-graphs-2x2  the same on a 2x2 mesh (2d-overlap, nccl): the
#                                         graphs hold the attention's NCCL operations
#   tests/test_cuda_train.sh resume-async-bf16  the resume check with --async-save
#                                         --checkpoint-every 2 (written in the background from the
#                                         host copies of the device's state): the same bits
#   tests/test_cuda_train.sh graphs-timeline  --cuda-graph 1 with --timeline 1 and --trace against
#                                         the same run without graphs, on one process and on a 2x2
#                                         mesh (2d-overlap, nccl): identical losses and norms; from
#                                         step 2 on, per rank and step, the same compute spans (per
#                                         layer and phase), flights, waits and bytes as without
#                                         graphs, host issue spans only outside the graphs, and
#                                         phase times and fractions in every step record
#   tests/test_cuda_train.sh gqa-bf16     grouped-query attention (--kv-heads 2 of 4 heads of 16)
#   tests/test_cuda_train.sh gqa-fp32     against the CPU trainer, within the bounds of bf16 and
#                                         fp32 above
#   tests/test_cuda_train.sh rope-bf16    rotary positions (--position-embedding rope, with 2 key/
#   tests/test_cuda_train.sh rope-fp32    value heads) against the CPU trainer, the same bounds
#   tests/test_cuda_train.sh z-loss-fp32  --z-loss 1e-2 against the CPU trainer: fp32's bounds on
#                                         the losses and norms, and on every step's z_loss
#   tests/test_cuda_train.sh muon-bf16    --optimizer muon against the CPU trainer, the bounds of
#   tests/test_cuda_train.sh muon-fp32    bf16 and fp32 above
#   tests/test_cuda_train.sh resume-muon-bf16  Muon's momentum and rounding: a bit-exact resume
#   tests/test_cuda_train.sh muon-precisions  --muon-fp32-matmul-prec medium, high and highest
#                                         train apart, within bf16's bound of each other
#   tests/test_cuda_train.sh dist-muon-bf16  --optimizer dist_muon against muon on 3 ranks (dp 3,
#   tests/test_cuda_train.sh dist-muon-fp32  nccl): losses, norms, evaluations, samples and final
#                                         weights bit for bit (the device broadcasts of the
#                                         Newton-Schulz results)
#   tests/test_cuda_train.sh params-norm-bf16  --log-params-norm against the CPU trainer: the last
#   tests/test_cuda_train.sh params-norm-fp32  step's norm is the final model file's, every step's
#                                         within 1e-2 (bf16) or 1e-4 (fp32) of the CPU trainer's
#   tests/test_cuda_train.sh params-norm-bf16-zero  the same on 3 ranks with ZeRO-1 (nccl): each
#                                         rank's master shard, the padding on the last
#   tests/test_cuda_train.sh hopper-masked  the bf16 trainer at head size 64 (T = 128) with every
#                                         layer's attention under a document mask, and a window in
#                                         every second layer: with the default kernels (on the host
#                                         runtime's compute capability 9.0 the Hopper kernels'
#                                         LOWER instances) and with the sm_80 ones, each against the
#                                         CPU trainer within the bf16 bounds; the two CUDA runs'
#                                         losses differ (other kernels ran: before the Hopper
#                                         kernels served masks, every masked call ran sm80 and the
#                                         bits were the same)
# The runs and comparisons are tools/trainer_checks.sh (shared with the GPU check), on the
# learnable token stream of tools/stream_shards.py.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
part=${1:?usage: tests/test_cuda_train.sh fp32|bf16|llama-bf16|llama-fp32|qwen2-fp32|qwen3-fp32|qk-norm-bf16|rope-yarn-fp32|z-loss-fp32|muon-fp32|muon-bf16|resume-muon-bf16|dist-muon-bf16|dist-muon-fp32|muon-precisions|params-norm-bf16|params-norm-fp32|params-norm-bf16-zero|hopper-masked|resume-bf16|resume-bf16-zero|resume-async-bf16-zero|resume-fp32|sync-free-bf16|sync-free-fp32|graphs-bf16|graphs-fp32|graphs-sp-bf16|graphs-timeline|resume-graphs-bf16|resume-graphs-2x2|resume-async-bf16|async-pinned-fallback|ulysses-launches}
CPU=${CPU:-$BUILD/train_gpt}
CUDA_BF16=${CUDA_BF16:-$BUILD/train_gpt_cuda_host}
CUDA_FP32=${CUDA_FP32:-$BUILD/train_gpt_cuda_host_fp32}
COMPARE=${COMPARE:-$BUILD/tools/compare_logs}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE
export OMPI_MCA_ess_singleton_isolated=1
mkdir -p $BUILD/tmp
W=$(mktemp -d "$BUILD/tmp/test_cuda_train.$part.XXXXXX")
"$PY" tools/stream_shards.py "$W/data" || exit 1

# The checks themselves are tools/trainer_checks.sh, which the GPU check runs on a GPU too.
checks() {
  if bash tools/trainer_checks.sh "$@" --data "$W/data" --work "$W/run"; then rm -rf "$W"; exit 0; fi
  echo "files kept in $W"; exit 1
}

# vs_cpu_then fp32|bf16 MODEL-OPTIONS <<'EOF' ... EOF: the CUDA trainer of that precision (or
# TEST_PROG, a launcher of it) against the CPU trainer with MODEL-OPTIONS (the precision's bounds,
# as the fp32 and bf16 cases), then the Python check on stdin (json and sys imported) with the CPU
# run's and the CUDA run's directories as argv 1 and 2 (each holds log.jsonl and the final model
# file).
vs_cpu_then() {
  local check; check="import json, sys
$(cat)"
  local prog=$CUDA_FP32 tols=(--loss-tol 1e-4 --norm-tol 1e-4)
  [ "$1" = bf16 ] && prog=$CUDA_BF16 tols=(--loss-tol 2e-2 --norm-tol 1e-1)
  prog=${TEST_PROG:-$prog}
  bash tools/trainer_checks.sh vs-cpu --cpu "$CPU" --test "$prog" --backend "cuda-$1" \
    --compare "$COMPARE" "${tols[@]}" --data "$W/data" --work "$W/run" --model "$2" &&
    "$PY" -c "$check" "$W/run/cpu" "$W/run/test" && { rm -rf "$W"; exit 0; }
  echo "files kept in $W"; exit 1
}

# The check of the params-norm cases (for vs_cpu_then; PREC names the precision): the last step's
# params_norm of either run is its final model file's norm, every step's within the precision's
# loss bound of the CPU trainer's.
params_norm_check() {
  cat <<'EOF'
import glob, math, os, struct
def steps(d): return [r for r in map(json.loads, open(d + "/log.jsonl")) if r["type"] == "step"]
def file_norm(d):
    path = sorted(glob.glob(d + "/model_*.bin"))[-1]
    body = open(path, "rb").read()[1024:]
    return math.sqrt(sum(x * x for x in struct.unpack("<%df" % (len(body) // 4), body)))
cpu, test = steps(sys.argv[1]), steps(sys.argv[2])
tol = {"bf16": 1e-2, "fp32": 1e-4}[os.environ["PREC"]]   # the precisions' loss bounds
for name, d, s in (("CPU", sys.argv[1], cpu), ("CUDA", sys.argv[2], test)):
    want = file_norm(d)
    rel = abs(s[-1]["params_norm"] - want) / want
    assert rel <= 1e-7, (name, rel, s[-1]["params_norm"], want)   # the log holds 9 digits
    print("  ok    %s: the last step's params_norm %.7g is the final model file's norm (rel %.1e, bound 1e-7)" % (name, want, rel))
worst = max(abs(a["params_norm"] - b["params_norm"]) / a["params_norm"] for a, b in zip(cpu, test))
print("  %s    every step's params_norm within %.1e of the CPU trainer's (bound %.0e)" % ("ok" if worst <= tol else "FAIL", worst, tol))
assert len(cpu) == len(test) > 0 and worst <= tol, worst
EOF
}

# counters_ok LOG STEPS: every one of the STEPS step records of LOG (the CUDA trainer on the host
# runtime) has counters, no host synchronisation while the step was issued, exactly one at its
# end (gpt_scalars_wait: the timeline resolves its marks with queries) and at most one
# device-to-host copy (the step's scalars: loss sum, gradient sum of squares, clip factor, z-loss
# sum, parameters' sum of squares, in one copy); the end-of-run counters record agrees.
counters_ok() {
  "$PY" - "$1" "$2" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
steps = [r for r in recs if r["type"] == "step"]
assert len(steps) == int(sys.argv[2]), "%d step records, expected %s" % (len(steps), sys.argv[2])
bad = []
for r in steps:
    if "syncs_in_step" not in r:
        bad.append("step %d: no counters in the record" % r["step"])
    elif r["syncs_in_step"] != 0 or r["syncs_end"] != 1 or r["d2h"] > 1 or r["launches"] <= 0:
        bad.append("step %(step)d: %(syncs_in_step)d syncs in the step, %(syncs_end)d at its end, "
                   "%(d2h)d D2H copies, %(launches)d launches" % r)
summary = [r for r in recs if r["type"] == "counters"]
if len(summary) != 1 or summary[0]["first_syncs_in_step"] != 0 or summary[0]["max_syncs_in_step"] != 0:
    bad.append("counters record: %s" % summary)
for b in bad: print("        " + b)
if bad: sys.exit(1)
r = steps[-1]
print("        %d steps: 0 syncs in each step, 1 at its end, <= 1 D2H copy; step %d: %d launches "
      "(%.1f per layer), %d D2H" % (len(steps), r["step"], r["launches"], r["launches_per_layer"], r["d2h"]))
EOF
}

# sync_free PROG BACKEND LOSS_TOL NORM_TOL
sync_free() {
  local failures=0
  bash tools/trainer_checks.sh vs-cpu --cpu "$CPU" --test "$1" --backend "$2" --compare "$COMPARE" \
    --loss-tol "$3" --norm-tol "$4" --data "$W/data" --work "$W/run" || failures=$((failures + 1))
  if counters_ok "$W/run/test/log.jsonl" 10; then echo "  ok    no host synchronisation inside the steps (1 micro-batch)"
  else echo "  FAIL  host synchronisation inside a step, or a missing counter (1 micro-batch)"; failures=$((failures + 1)); fi
  # 4 micro-batches per step: 12 token uploads between two host synchronisations (the staging
  # ring grows instead of waiting), the loss summed over them on the device; with the z-loss and
  # the parameters' norm, whose sums stay on the device too.
  local args=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
              --seq-len 16 --total-batch-tokens 128 --steps 6 --lr 1e-2 --warmup 0 --sample-length 0
              --eval-every 0 --quiet --no-save --train-data "$W/data/t_train_*.bin"
              --val-data "$W/data/t_val_*.bin" --tokenizer "" --z-loss 1e-4 --log-params-norm)
  if timeout 600 "$CPU" "${args[@]}" --out-dir "$W/accum/cpu" > "$W/accum_cpu.out" 2>&1 &&
     timeout 600 "$1" "${args[@]}" --out-dir "$W/accum/test" > "$W/accum_test.out" 2>&1 &&
     "$COMPARE" "$W/accum/cpu/log.jsonl" "$W/accum/test/log.jsonl" --loss-tol "$3" --norm-tol "$4" \
       --min-entries 7 | sed 's/^/        /' && counters_ok "$W/accum/test/log.jsonl" 6; then
    echo "  ok    4 micro-batches per step: losses against the CPU trainer, no host synchronisation inside the steps"
  else
    echo "  FAIL  4 micro-batches per step (logs in $W/accum)"; failures=$((failures + 1))
  fi
  [ "$failures" -eq 0 ] && { rm -rf "$W"; exit 0; }
  echo "files kept in $W"; exit 1
}

# pinned_fallback: --async-save pins the host copies the checkpoints are written from; where the
# system will not pin that much (CUDA_HOST_PINNED_MEMORY=256K: the 171 KB of weights fit, the
# moments no longer) the run says so in one warning and writes, from ordinary memory, the same
# checkpoints and the same losses as the pinned run.
pinned_fallback() {
  local args=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
              --seq-len 16 --steps 6 --lr 1e-2 --warmup 0 --sample-length 0 --eval-every 0 --quiet
              --checkpoint-every 2 --keep-last 10 --async-save --train-data "$W/data/t_train_*.bin"
              --val-data "" --tokenizer "") failures=0
  timeout 600 "$CUDA_BF16" "${args[@]}" --out-dir "$W/pinned" > "$W/pinned.out" 2> "$W/pinned.err"
  local rc_pinned=$?
  CUDA_HOST_PINNED_MEMORY=256K timeout 600 "$CUDA_BF16" "${args[@]}" --out-dir "$W/ordinary" \
    > "$W/ordinary.out" 2> "$W/ordinary.err"
  local rc_ordinary=$? warn='^warning: rank 0: --async-save: 0\.515 MB of pinned host memory .* ordinary memory instead'
  if [ $rc_pinned = 0 ] && [ $rc_ordinary = 0 ] && ! grep -q "warning" "$W/pinned.err" &&
     [ "$(grep -c "$warn" "$W/ordinary.err")" = 1 ] && [ "$(grep -c . "$W/ordinary.err")" = 1 ]; then
    echo "  ok    pinned: no warning; CUDA_HOST_PINNED_MEMORY=256K: one, $(cat "$W/ordinary.err")"
  else
    echo "  FAIL  exit statuses $rc_pinned, $rc_ordinary; pinned run's stderr, then the other's:"
    sed 's/^/        | /' "$W/pinned.err" "$W/ordinary.err" | tail -n 8; failures=1
  fi
  if grep '"type":"step"' "$W/pinned/log.jsonl" | sed 's/,"ms".*//' > "$W/pinned.steps" &&
     grep '"type":"step"' "$W/ordinary/log.jsonl" | sed 's/,"ms".*//' > "$W/ordinary.steps" &&
     [ "$(grep -c . "$W/pinned.steps")" = 6 ] && cmp -s "$W/pinned.steps" "$W/ordinary.steps" &&
     (for k in 2 4 6; do cmp "$W/pinned/model_0000000$k.bin" "$W/ordinary/model_0000000$k.bin" || exit 1; done) &&
     [ "$(grep -c '"background":true' "$W/ordinary/log.jsonl")" = 2 ]; then
    echo "  ok    the same 6 step losses, and model files of steps 2, 4 and 6 (2 and 4 written in the background)"
  else
    echo "  FAIL  the runs differ (logs and checkpoints in $W)"; failures=1
  fi
  [ "$failures" -eq 0 ] && { rm -rf "$W"; exit 0; }
  echo "files kept in $W"; exit 1
}

# dist_muon PROG: --optimizer dist_muon against --optimizer muon on 3 ranks (dp 3, nccl; 2 layers:
# 12 matrices, qkv as Q, K and V, in rounds of 3, each result broadcast from its owner's device;
# the 45-wide MLP makes fc and fc projection 45 x 32 and 32 x 45): the losses,
# norms, evaluations and samples identical, and the final model files byte-identical; a state
# file's second moment 0 at every matrix element (the device keeps none there), AdamW's elsewhere;
# every rank's state file holds muon's moments of its slice (each rank keeps its own matrices'
# momenta, and gathers the others' from their owners to write it); dist_muon continuing its checkpoint (each
# rank taking its own momenta back) to step 8 writes muon's model file.
dist_muon() {
  local args=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
              --seq-len 16 --steps 6 --total-batch-tokens 96 --lr 1e-2 --warmup 0 --eval-every 2
              --sample-every 2 --sample-length 4 --train-data "$W/data/t_train_*.bin"
              --val-data "$W/data/t_val_*.bin" --tokenizer "" --ffn-hidden 45 --muon-use-nesterov
              --dp 3 --comm nccl)
  local o r
  for o in muon dist_muon; do
    if ! CUDA_HOST_DEVICES=3 timeout 600 bash tests/mpirun.sh 3 "$1" "${args[@]}" --optimizer "$o" \
           --out-dir "$W/$o" > "$W/$o.out" 2>&1; then
      echo "  FAIL  --optimizer $o exited non-zero:"; tail -3 "$W/$o.out" | sed 's/^/        /'
      echo "files kept in $W"; exit 1
    fi
  done
  for r in 0 1 2; do
    "$PY" tests/check_muon_state.py "$W/dist_muon/state_00000006_0000$r.bin" \
      "$W/muon/state_00000006_0000$r.bin" || { echo "  FAIL  rank $r's state (files kept in $W)"; exit 1; }
  done
  for o in muon dist_muon; do
    if ! CUDA_HOST_DEVICES=3 timeout 600 bash tests/mpirun.sh 3 "$1" "${args[@]}" --optimizer "$o" \
           --steps 8 --resume --out-dir "$W/$o" > "$W/$o-resumed.out" 2>&1; then
      echo "  FAIL  --optimizer $o --resume exited non-zero:"; tail -3 "$W/$o-resumed.out" | sed 's/^/        /'
      echo "files kept in $W"; exit 1
    fi
  done
  if "$COMPARE" "$W/muon/log.jsonl" "$W/dist_muon/log.jsonl" --loss-tol 0 --norm-tol 0 \
       --min-entries 9 | sed 's/^/        /' &&
     diff <(grep '^sample' "$W/muon.out") <(grep '^sample' "$W/dist_muon.out") > /dev/null &&
     [ "$(grep -c '^sample' "$W/dist_muon.out")" -ge 3 ] &&
     cmp "$W/muon/model_00000006.bin" "$W/dist_muon/model_00000006.bin" &&
     grep -q "^resume: continuing from step 6 in " "$W/dist_muon-resumed.out" &&
     cmp "$W/muon/model_00000008.bin" "$W/dist_muon/model_00000008.bin" &&
     "$PY" tests/check_muon_state.py "$W/dist_muon/state_00000006_00001.bin"; then
    echo "  ok    dp 3 (nccl): identical losses, norms, validation losses, samples, final weights and, resumed, step 8's"
    rm -rf "$W"; exit 0
  fi
  echo "  FAIL  --optimizer dist_muon differs from muon (files kept in $W)"; exit 1
}

# muon_precisions: the bf16 trainer under --muon-fp32-matmul-prec medium, high and highest (cuBLAS's
# FAST_16BF, FAST_TF32 and 32F compute types, whose fp32 inputs the host runtime rounds as tensor
# cores read them): step 1 alike, steps 2-6 differ pairwise (the precision reaches the GEMMs),
# within bf16's bound (2e-2) of each other.
muon_precisions() {
  local args=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
              --seq-len 16 --steps 6 --lr 1e-2 --warmup 0 --eval-every 0 --sample-length 0
              --no-save --train-data "$W/data/t_train_*.bin" --val-data "" --tokenizer ""
              --optimizer muon)
  local p
  for p in medium high highest; do
    if ! timeout 600 "$CUDA_BF16" "${args[@]}" --muon-fp32-matmul-prec "$p" --out-dir "$W/$p" \
           > "$W/$p.out" 2>&1; then
      echo "  FAIL  --muon-fp32-matmul-prec $p exited non-zero:"; tail -3 "$W/$p.out" | sed 's/^/        /'
      echo "files kept in $W"; exit 1
    fi
  done
  local out
  out=$("$PY" tests/check_muon_precisions.py 2e-2 "$W/medium/log.jsonl" "$W/high/log.jsonl" \
          "$W/highest/log.jsonl" 2>&1)
  local rc=$?
  echo "$out" | sed 's/^/        /'
  if [ $rc = 0 ]; then
    echo "  ok    medium, high and highest train apart from step 2 on, within 2e-2 of each other"
    rm -rf "$W"; exit 0
  fi
  echo "  FAIL  the precisions (files kept in $W)"; exit 1
}

# The options of the --cuda-graph comparisons.
graph_args=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512
  --batch 2 --seq-len 16 --steps 6 --lr 1e-2 --warmup 0 --eval-every 2
  --sample-every 2 --sample-length 4 --no-save --train-data "$W/data/t_train_*.bin"
  --val-data "$W/data/t_val_*.bin" --tokenizer "" --timeline 0 --recompute selective)

# graph_pair NAME TOTAL_BATCH_TOKENS LAUNCHER...: the run without and with graphs, compared
# (GRAPH_MICRO micro-batches per step, default 2: TOTAL = GRAPH_MICRO x batch x seq-len x dp).
graph_pair() {
    local name=$1 total=$2 micro=${GRAPH_MICRO:-2}; shift 2
    for g in 0 1; do
      if ! timeout 600 "$@" "${graph_args[@]}" --total-batch-tokens "$total" --cuda-graph $g --out-dir "$W/$name$g" > "$W/$name$g.out" 2>&1; then
        echo "  FAIL  $name --cuda-graph $g exited non-zero:"; tail -3 "$W/$name$g.out" | sed 's/^/        /'; return 1
      fi
    done
    "$COMPARE" "$W/${name}0/log.jsonl" "$W/${name}1/log.jsonl" --loss-tol 0 --norm-tol 0 --min-entries 9 \
      | sed 's/^/        /' || return 1
    if ! diff <(grep '^sample' "$W/${name}0.out") <(grep '^sample' "$W/${name}1.out") > /dev/null ||
       [ "$(grep -c '^sample' "$W/${name}1.out")" -lt 3 ]; then
      echo "        the samples differ, or fewer than 3"; return 1
    fi
    "$PY" - "$W/${name}1/log.jsonl" "$micro" "$((total / micro))" <<'EOF'
import json, sys
micro, micro_tokens = int(sys.argv[2]), int(sys.argv[3])
steps = [r for r in map(json.loads, open(sys.argv[1], encoding="utf-8")) if r["type"] == "step"]
assert len(steps) == 6, "%d step records" % len(steps)
first, later = steps[0], steps[1:]
assert first["graph_launches"] == 0 and first["launches_per_layer"] > 0, "step 1: %s" % first
for r in later:
    # Under --rampup-batch-tokens a step launches one graph per micro-batch of its own batch.
    want = r["batch_tokens"] // micro_tokens if "batch_tokens" in r else micro
    assert r["graph_launches"] == want and r["graph_kernels"] > 0 and r["launches_per_layer"] == 0 \
        and r["syncs_in_step"] == 0, "step %(step)d: %(graph_launches)d graph launches, " \
        "%(graph_kernels)d kernels in them, %(launches_per_layer).1f layer launches per layer, " \
        "%(syncs_in_step)d syncs" % r
print("        step 1: %d launches one by one (%.1f per layer); steps 2-6: %d launches, %d graph "
      "launches running %d kernels, 0 per layer" % (first["launches"], first["launches_per_layer"],
                                                      later[-1]["launches"], micro, later[-1]["graph_kernels"]))
EOF
}

# launcher NAME RANKS OPTIONS...: $W/NAME.sh starts PROG ($prog) on RANKS ranks with OPTIONS.
launcher() {
  local name=$1 ranks=$2; shift 2
  printf '#!/usr/bin/env bash\nCUDA_HOST_DEVICES=%d exec bash tests/mpirun.sh %d %q "$@"%s\n' "$ranks" "$ranks" \
    "$prog" "$(printf ' %q' "$@")" > "$W/$name.sh" && chmod +x "$W/$name.sh" || exit 1
}

# graphs PROG: --cuda-graph 1 against the same run without it, on one process and dp 2.
graphs() {
  local failures=0 prog=$1
  if graph_pair one 64 "$1"; then echo "  ok    one process: identical losses, norms, validation losses and samples; graph launches counted"
  else echo "  FAIL  one process"; failures=$((failures + 1)); fi
  launcher dp2 2 --dp 2 --zero 1 --comm nccl
  if graph_pair dp 128 "$W/dp2.sh"; then echo "  ok    2 ranks (dp 2, nccl, ZeRO-1): identical losses, norms, validation losses and samples"
  else echo "  FAIL  2 ranks (dp 2, nccl, ZeRO-1)"; failures=$((failures + 1)); fi
  # Without ZeRO-1 the gradients are reduced in buckets during the last micro-batch's backward:
  # its graph holds the buckets' all-reduces and their waits. 3 micro-batches: the middle one adds
  # without reducing, the last adds and reduces (a graph of its own).
  launcher buckets 2 --dp 2 --comm nccl --grad-bucket-mb 0.01
  if GRAPH_MICRO=3 graph_pair buckets 192 "$W/buckets.sh" && grep -q "and reduces them: .* [1-9][0-9]* communication operations" "$W/buckets1.out"
  then echo "  ok    2 ranks (dp 2, nccl, gradient buckets in the graph): identical losses, norms, validation losses and samples"
  else echo "  FAIL  2 ranks (dp 2, nccl, gradient buckets in the graph)"; failures=$((failures + 1)); fi
  # A batch ramp-up (64, 128, then 192 tokens per step): each new batch scales the loss by another
  # 1 / tokens, an argument of the captured kernels, so its graphs are captured again, the one
  # holding the gradient buckets' all-reduces among them, and their timeline marks.
  local before=("${graph_args[@]}")
  graph_args+=(--timeline 1)
  launcher ramp 2 --dp 2 --comm nccl --grad-bucket-mb 0.01 --rampup-batch-tokens '64 64 128'
  if GRAPH_MICRO=3 graph_pair ramp 192 "$W/ramp.sh" &&
     [ "$(grep -c "^cuda graph: captured .*([1-9][0-9]* timeline marks" "$W/ramp1.out")" = 5 ] &&
     grep -q '"step":6,.*"forward_ms"' "$W/ramp1/log.jsonl"
  then echo "  ok    2 ranks, a batch ramp-up (64, 128, 192 tokens; 2 then 3 graphs captured, timeline on): identical losses, norms, validation losses and samples; phase times"
  else echo "  FAIL  2 ranks with a batch ramp-up under CUDA graphs"; failures=$((failures + 1)); fi
  graph_args=("${before[@]}")
  # Grouped-query attention: the graphs hold the attention's GQA workspace, which the sampler's
  # forward over 200 tokens (after the capture) outgrows; the captured buffer must stay alive.
  local saved=("${graph_args[@]}")
  graph_args+=(--channels 64 --heads 4 --kv-heads 2 --context 256 --sample-length 200)
  if graph_pair gqa 64 "$prog"; then echo "  ok    grouped-query attention, the sampler outgrowing the captured workspace: identical losses, norms, validation losses and samples"
  else echo "  FAIL  grouped-query attention with a captured workspace"; failures=$((failures + 1)); fi
  graph_args=("${saved[@]}")
  # Rotary positions: the graphs hold the rope kernels (forward and the backward's transpose).
  graph_args+=(--channels 64 --heads 4 --position-embedding rope)
  if graph_pair rope 64 "$prog"; then echo "  ok    rotary positions: identical losses, norms, validation losses and samples"
  else echo "  FAIL  rotary positions under CUDA graphs"; failures=$((failures + 1)); fi
  graph_args=("${saved[@]}")
  # Llama's whole architecture: the RMSNorm and SwiGLU kernels, and the untied classifier, whose
  # first micro-batch's graph zeroes wte's gradient before the encoder adds to it.
  graph_args+=(--channels 64 --heads 4 --position-embedding rope --normalization rmsnorm --mlp swiglu
               --disable-bias-linear --untie-embeddings-and-output-weights)
  if graph_pair llama 64 "$prog"; then echo "  ok    Llama's block with an untied classifier: identical losses, norms, validation losses and samples"
  else echo "  FAIL  Llama's block with an untied classifier under CUDA graphs"; failures=$((failures + 1)); fi
  graph_args=("${saved[@]}")
  [ "$failures" -eq 0 ] && { rm -rf "$W"; exit 0; }
  echo "files kept in $W"; exit 1
}

# graphs_sp PROG: the same comparison on sequence-parallel meshes, whose graphs hold the attention's
# NCCL operations: ATTENTION2D overlapped on 2x2, Ulysses on 2 ranks with dp 2 and ZeRO-1.
graphs_sp() {
  local failures=0 prog=$1
  launcher mesh2x2 4 --pq 2 --pkv 2 --attention 2d-overlap --comm nccl
  if graph_pair mesh2x2 64 "$W/mesh2x2.sh"; then echo "  ok    2d-overlap on a 2x2 mesh (nccl): identical losses, norms, validation losses and samples"
  else echo "  FAIL  2d-overlap on a 2x2 mesh"; failures=$((failures + 1)); fi
  launcher ulysses 4 --dp 2 --pkv 2 --attention ulysses --zero 1 --comm nccl
  if graph_pair ulysses 128 "$W/ulysses.sh"; then echo "  ok    ulysses on 2 ranks, dp 2, ZeRO-1 (nccl): identical losses, norms, validation losses and samples"
  else echo "  FAIL  ulysses on 2 ranks, dp 2, ZeRO-1"; failures=$((failures + 1)); fi
  # Packed documents (token 26 begins one, about every 64 tokens): the bounds are device memory the
  # graph reads each launch. Ring's early stop, which depends on each batch's longest document, is
  # off with graphs: on 4 ranks of 64 tokens the run without graphs stops early (fewer launches
  # per layer) and the graph runs every ring step, with the same bits.
  launcher documents 4 --pkv 4 --attention ring --comm nccl --document-mask 26 --reset-position-ids
  local saved=("${graph_args[@]}")
  graph_args+=(--context 256 --seq-len 256 --batch 1)
  if graph_pair documents 512 "$W/documents.sh" && "$PY" - "$W/documents0/log.jsonl" "$W/documents1/log.jsonl" <<'EOF'
import json, sys
eager, graphed = ([r for r in map(json.loads, open(p, encoding="utf-8")) if r["type"] == "step"] for p in sys.argv[1:])
stopped, whole = eager[-1]["launches_per_layer"], graphed[0]["launches_per_layer"]
assert stopped < whole, "without graphs %.1f launches per layer, the graph run's first step %.1f" % (stopped, whole)
print("        launches per layer: %.1f without graphs (Ring stops early), %.1f in the graph run's eager first step (every ring step)" % (stopped, whole))
EOF
  then echo "  ok    ring on 4 ranks with documents and --reset-position-ids: identical losses, norms, validation losses and samples"
  else echo "  FAIL  ring on 4 ranks with documents"; failures=$((failures + 1)); fi
  graph_args=("${saved[@]}")
  [ "$failures" -eq 0 ] && { rm -rf "$W"; exit 0; }
  echo "files kept in $W"; exit 1
}

# graphs_timeline PROG: the timeline inside graphs (event record nodes pointed at each step's
# events), against the same timeline without graphs.
graphs_timeline() {
  local failures=0 prog=$1 name run total ranks ok
  local args=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
              --seq-len 16 --steps 4 --lr 1e-2 --warmup 0 --eval-every 0 --sample-length 0 --no-save
              --train-data "$W/data/t_train_*.bin" --val-data "" --tokenizer "" --timeline 1)
  printf '#!/usr/bin/env bash\nexec %q "$@"\n' "$prog" > "$W/one.sh" && chmod +x "$W/one.sh" || exit 1
  launcher mesh2x2 4 --pq 2 --pkv 2 --attention 2d-overlap --comm nccl
  for name in one:64:1 mesh2x2:64:4; do
    IFS=: read -r run total ranks <<< "$name"
    ok=1
    for g in 0 1; do
      if ! timeout 600 "$W/$run.sh" "${args[@]}" --total-batch-tokens "$total" --cuda-graph $g \
           --trace "$W/$run$g.json" --out-dir "$W/$run$g" > "$W/$run$g.out" 2>&1; then
        echo "  FAIL  $run --cuda-graph $g exited non-zero:"; tail -3 "$W/$run$g.out" | sed 's/^/        /'; ok=0
      fi
    done
    [ $ok = 1 ] && { "$COMPARE" "$W/${run}0/log.jsonl" "$W/${run}1/log.jsonl" --loss-tol 0 --norm-tol 0 \
      --min-entries 4 | sed 's/^/        /'; [ "${PIPESTATUS[0]}" = 0 ]; } || ok=0
    [ $ok = 1 ] && grep -q "timeline marks" "$W/${run}1.out" &&
      "$PY" tools/check_trace.py "$W/${run}1.json" --ranks "$ranks" > "$W/${run}1.check" &&
      "$PY" - "$W/$run" "$ranks" <<'EOF' || ok=0
import collections, json, sys
base, ranks = sys.argv[1], int(sys.argv[2])
steps = [r for r in map(json.loads, open(base + "1/log.jsonl", encoding="utf-8")) if r["type"] == "step"]
for r in steps[1:]:
    assert r["graph_launches"] == 2, "step %(step)d: %(graph_launches)d graph launches" % r
    for k in ("forward_ms", "backward_ms", "optimizer_ms", "compute_frac"):
        assert r.get(k, 0) > 0, "step %d: %s %s" % (r["step"], k, r.get(k))
def spans(path):
    c, b = collections.Counter(), collections.Counter()
    for e in json.load(open(path, encoding="utf-8"))["traceEvents"]:
        if e.get("ph") != "X": continue
        a = e["args"]
        c[(e["pid"], a["step"], e["cat"], a.get("layer"), a.get("phase"), a.get("comm"), a.get("group"))] += 1
        if e["cat"] == "comm-flight": b[(e["pid"], a["step"])] += a.get("bytes", 0)
    return c, b
(c0, b0), (c1, b1) = spans(base + "0.json"), spans(base + "1.json")
issue = lambda c, r, s: sum(v for k, v in c.items() if k[:3] == (r, s, "comm-issue"))
for rank in range(ranks):
    for s in range(2, len(steps) + 1):
        for kind in ("compute", "comm-flight", "wait"):
            want = {k: v for k, v in c0.items() if k[:3] == (rank, s, kind)}
            got = {k: v for k, v in c1.items() if k[:3] == (rank, s, kind)}
            assert want == got, "rank %d step %d %s spans: %s without graphs, %s with" % (rank, s, kind, want, got)
        assert b0[(rank, s)] == b1[(rank, s)], "rank %d step %d: %d bytes without graphs, %d with" % (rank, s, b0[(rank, s)], b1[(rank, s)])
        assert issue(c1, rank, s) < issue(c0, rank, s) or issue(c0, rank, s) == 0, \
            "rank %d step %d: %d issue spans with graphs, %d without" % (rank, s, issue(c1, rank, s), issue(c0, rank, s))
n = sum(v for k, v in c1.items() if k[:2] == (0, 2))
print("        step 2, rank 0: %d spans with graphs (host issue spans: %d without graphs, %d with); the same compute spans, flights, waits and %d bytes"
      % (n, issue(c0, 0, 2), issue(c1, 0, 2), b1[(0, 2)]))
EOF
    if [ $ok = 1 ]; then echo "  ok    $run: identical losses and norms; the graphs' spans and bytes those of the run without graphs; phase times and fractions"
    else echo "  FAIL  $run (files in $W)"; failures=$((failures + 1)); fi
  done
  [ "$failures" -eq 0 ] && { rm -rf "$W"; exit 0; }
  echo "files kept in $W"; exit 1
}

# ulysses_launches: launches per layer of Ulysses on P = 2 and 4, from the step records.
ulysses_launches() {
  local args=(--preset tiny --layers 2 --channels 64 --heads 4 --context 64 --vocab 512 --batch 2
              --seq-len 64 --steps 2 --lr 1e-2 --warmup 0 --sample-length 0 --eval-every 0 --no-save
              --train-data "$W/data/t_train_*.bin" --val-data "" --tokenizer "" --timeline 0 --quiet --comm nccl)
  local per=() p
  for p in 2 4; do
    CUDA_HOST_DEVICES=4 timeout 600 bash tests/mpirun.sh $p "$CUDA_BF16" "${args[@]}" --attention ulysses \
      --pkv $p --out-dir "$W/ul$p" > "$W/ul$p.out" 2>&1 || { echo "  FAIL  ulysses on $p ranks:"; tail -3 "$W/ul$p.out"; exit 1; }
    per+=("$("$PY" -c 'import json,sys; print([r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "step"][-1]["launches_per_layer"])' "$W/ul$p/log.jsonl")")
  done
  echo "        launches per layer: ${per[0]} on 2 ranks, ${per[1]} on 4"
  if [ "${per[0]}" = "${per[1]}" ]; then echo "  ok    Ulysses' launches per layer do not grow with P"; rm -rf "$W"; exit 0; fi
  echo "  FAIL  Ulysses' launches per layer grow with P (files in $W)"; exit 1
}

# The bf16 trainer with every attention call bounded from below (documents; a window too in every
# second layer) at head size 64, where the Hopper kernels serve them, against the CPU trainer: with
# the default kernels and with ATTENTION_*_KERNEL=sm80, and the two CUDA runs not the same bits.
# (lr 2e-3: at 1e-2 the bf16 gradient norms of this wider model part from the CPU's by 15-30%
# within 10 steps whatever the kernels, the causal ones too.)
hopper_masked() {
  local model="--channels 128 --heads 2 --document-mask 26 --attention-window 40 --window-every 2 --lr 2e-3"
  local failures=0 k
  for k in auto sm80; do
    ATTENTION_FWD_KERNEL=$k ATTENTION_BWD_KERNEL=$k bash tools/trainer_checks.sh vs-cpu --cpu "$CPU" \
      --test "$CUDA_BF16" --backend cuda-bf16 --compare "$COMPARE" --loss-tol 2e-2 --norm-tol 1e-1 \
      --data "$W/data" --work "$W/$k" --seq-len 128 --model "$model" || failures=$((failures + 1))
  done
  if "$PY" - "$W/auto/test/log.jsonl" "$W/sm80/test/log.jsonl" <<'EOF'
import json, sys
loss = lambda p: [r["loss"] for r in map(json.loads, open(p, encoding="utf-8")) if r["type"] == "step"]
a, b = loss(sys.argv[1]), loss(sys.argv[2])
print("        default kernels against sm80: %d of %d step losses differ" % (sum(x != y for x, y in zip(a, b)), len(a)))
sys.exit(0 if len(a) == len(b) == 10 and a != b else 1)
EOF
  then echo "  ok    the default kernels are not the sm_80 ones on these masked calls"
  else echo "  FAIL  the default kernels gave the sm_80 kernels' bits: the Hopper kernels did not run"; failures=$((failures + 1)); fi
  [ "$failures" -eq 0 ] && { rm -rf "$W"; exit 0; }
  echo "files kept in $W"; exit 1
}

case "$part" in
  hopper-masked) hopper_masked ;;
  # Grouped-query attention (4 heads of 16 over 2 key/value heads; the kernels' widened K|V and the
  # summed dK, dV) against the CPU trainer, which tests/torch_gpt_ref.py checks.
  # lr 3e-3 as rope's below: at 1e-2 this model's gradient norm spikes at steps 3 and 6 (4.2 and
  # 3.9 against 1.6-2.3), where bf16's differences from fp32 grow from 0.3% (step 1) to 23% at step
  # 6 on a Zen 4 build machine whose OpenBLAS kernels round the reference otherwise (under 10%
  # on the earlier ones); at 3e-3 they stay under 0.7% (norms) and 0.03% (losses).
  gqa-bf16) checks vs-cpu --cpu "$CPU" --test "$CUDA_BF16" --backend cuda-bf16 --compare "$COMPARE" \
              --loss-tol 2e-2 --norm-tol 1e-1 --model "--channels 64 --heads 4 --kv-heads 2 --lr 3e-3" ;;
  gqa-fp32) checks vs-cpu --cpu "$CPU" --test "$CUDA_FP32" --backend cuda-fp32 --compare "$COMPARE" \
              --loss-tol 1e-4 --norm-tol 1e-4 --model "--channels 64 --heads 4 --kv-heads 2 --lr 3e-3" ;;
  # Rotary positions (no wpe; queries and keys turned by the rope kernel, the backward's transpose
  # on dqkv) with grouped-query attention against the CPU trainer, which tests/torch_gpt_ref.py checks.
  # At the other cases' lr 1e-2 this model spikes at step 3 (gradient norm 7.6), and bf16's
  # differences, as small as learned positions' in steps 1-4 (norms within 5e-4), grow to 26% by
  # step 9: lr 3e-3 keeps the 10 steps a comparison of the kernels, not of a chaotic trajectory.
  rope-bf16) checks vs-cpu --cpu "$CPU" --test "$CUDA_BF16" --backend cuda-bf16 --compare "$COMPARE" \
               --loss-tol 2e-2 --norm-tol 1e-1 --model "--channels 64 --heads 4 --kv-heads 2 --position-embedding rope --lr 3e-3" ;;
  rope-fp32) checks vs-cpu --cpu "$CPU" --test "$CUDA_FP32" --backend cuda-fp32 --compare "$COMPARE" \
               --loss-tol 1e-4 --norm-tol 1e-4 --model "--channels 64 --heads 4 --kv-heads 2 --position-embedding rope --lr 3e-3" ;;
  llama-bf16) checks vs-cpu --cpu "$CPU" --test "$CUDA_BF16" --backend cuda-bf16 --compare "$COMPARE" \
               --loss-tol 2e-2 --norm-tol 1e-1 --model "--channels 64 --heads 4 --kv-heads 2 --position-embedding rope --normalization rmsnorm --mlp swiglu --ffn-hidden 96 --lr 3e-3" ;;
  llama-fp32) checks vs-cpu --cpu "$CPU" --test "$CUDA_FP32" --backend cuda-fp32 --compare "$COMPARE" \
               --loss-tol 1e-4 --norm-tol 1e-4 --model "--channels 64 --heads 4 --kv-heads 2 --position-embedding rope --normalization rmsnorm --mlp swiglu --ffn-hidden 96 --disable-bias-linear --untie-embeddings-and-output-weights --lr 3e-3" ;;
  qwen2-fp32) checks vs-cpu --cpu "$CPU" --test "$CUDA_FP32" --backend cuda-fp32 --compare "$COMPARE" \
               --loss-tol 1e-4 --norm-tol 1e-4 --model "--channels 64 --heads 4 --kv-heads 2 --position-embedding rope --rope-theta 1000000 --normalization rmsnorm --mlp swiglu --ffn-hidden 96 --disable-bias-linear --add-qkv-bias --norm-epsilon 1e-6 --lr 3e-3" ;;
  # QK-norm: Qwen3's block (Qwen2's without the qkv bias, RMSNorm on every query and key head)
  # in fp32, and GPT's LayerNorm block with it (weights and biases per head norm) in bf16.
  qwen3-fp32) checks vs-cpu --cpu "$CPU" --test "$CUDA_FP32" --backend cuda-fp32 --compare "$COMPARE" \
               --loss-tol 1e-4 --norm-tol 1e-4 --model "--channels 64 --heads 4 --kv-heads 2 --position-embedding rope --rope-theta 1000000 --normalization rmsnorm --mlp swiglu --ffn-hidden 96 --disable-bias-linear --norm-epsilon 1e-6 --qk-layernorm --lr 3e-3" ;;
  qk-norm-bf16) checks vs-cpu --cpu "$CPU" --test "$CUDA_BF16" --backend cuda-bf16 --compare "$COMPARE" \
               --loss-tol 2e-2 --norm-tol 1e-1 --model "--channels 64 --heads 4 --qk-layernorm --lr 3e-3" ;;
  # YaRN-scaled rotary positions (x2 from 8 of the 16 positions) with --eval-positions 4: the
  # kernel's scaled frequencies and amplitude through training, and the per-range validation
  # losses of both evaluations within the fp32 bound of the CPU trainer's.
  rope-yarn-fp32) vs_cpu_then fp32 "--channels 64 --heads 4 --kv-heads 2 --position-embedding rope --rope-scaling yarn --rope-original-context 8 --lr 3e-3 --eval-positions 4" <<'EOF' ;;
pos = lambda d: [r for r in map(json.loads, open(d + "/log.jsonl")) if r["type"] == "eval_positions"]
a, b = pos(sys.argv[1]), pos(sys.argv[2])
assert len(a) == len(b) == 2 and all(len(x["val_loss"]) == 4 for x in a + b), (a, b)
worst = max(abs(x - y) / y for ra, rb in zip(a, b) for x, y in zip(rb["val_loss"], ra["val_loss"]))
assert worst <= 1e-4, worst
print("  ok    --eval-positions 4: 2 evaluations x 4 ranges within %.1e of the CPU trainer's (bound 1e-4)" % worst)
EOF
  # --z-loss 1e-2 (the softmax's gradient grows by ~12% at lse ~ ln 512): the classifier kernel's
  # z-losses and gradient through training, every step's z_loss within the fp32 bound too.
  z-loss-fp32) vs_cpu_then fp32 "--z-loss 1e-2" <<'EOF' ;;
steps = lambda d: [r for r in map(json.loads, open(d + "/log.jsonl")) if r["type"] == "step"]
a, b = steps(sys.argv[1]), steps(sys.argv[2])
assert len(a) == len(b) > 0 and all(r["z_loss"] > 0 for r in a + b), (a, b)
worst = max(abs(x["z_loss"] - y["z_loss"]) / y["z_loss"] for x, y in zip(b, a))
assert worst <= 1e-4, worst
print("  ok    --z-loss: %d steps' z_loss within %.1e of the CPU trainer's (bound 1e-4)" % (len(a), worst))
EOF
  # --optimizer muon (Nesterov, 3 Newton-Schulz iterations, Moonlight's 0.2 x spectral scale)
  # against the CPU trainer: the momentum, normalisation, GEMMs and update kernels (fp32: exact fp32
  # products; bf16: the master weights' stochastic rounding) through training, in each precision's
  # bounds, and in fp32 the final weights; both runs' logs name the optimizer. An MLP 45 wide makes fc 45 x 32 (a tall matrix,
  # orthogonalized through its transpose) and puts fcprojw off the 8-element spans of the update
  # kernel's threads (the partial first and last spans).
  # fp32: the products from fp32 inputs on both (medium's bf16 inputs would turn the two programs'
  # last-bit differences into bf16-sized ones); bf16: the default medium on both.
  muon-fp32|muon-bf16) PREC=${part#muon-} vs_cpu_then "${part#muon-}" "--optimizer muon --muon-use-nesterov --muon-num-ns-steps 3 --muon-extra-scale-factor 0.2 --ffn-hidden 45 --lr 1e-2$([ "$part" = muon-fp32 ] && echo ' --muon-fp32-matmul-prec highest')" <<'EOF' ;;
import glob, os, struct
opts = lambda d: [r for r in map(json.loads, open(d + "/log.jsonl")) if r["type"] == "config"][0]["options"]
assert all(opts(d)["optimizer"] == "muon" for d in sys.argv[1:3]), [opts(d) for d in sys.argv[1:3]]
print("  ok    both runs trained with --optimizer muon")
if os.environ["PREC"] == "fp32":   # (bf16's forward moves the weights apart by more)
    def weights(d):
        body = open(sorted(glob.glob(d + "/model_*.bin"))[-1], "rb").read()[1024:]
        return struct.unpack("<%df" % (len(body) // 4), body)
    a, b = weights(sys.argv[1]), weights(sys.argv[2])
    worst = max(abs(x - y) for x, y in zip(a, b))
    assert len(a) == len(b) and worst <= 2e-4, (len(a), len(b), worst)
    print("  ok    final weights within %.1e of the CPU trainer's (bound 2e-4; a weight Muon left "
          "alone would be about 1e-2 off)" % worst)
EOF
  # --log-params-norm: the last step's params_norm is the norm of the final model file each run
  # wrote (the fp32 master weights of the bf16 run, summed by the f32 norm kernel; fp32: the
  # parameters themselves), and every step's within bf16's and fp32's bounds of the CPU trainer's.
  params-norm-bf16|params-norm-fp32)
    PREC=${part#params-norm-} vs_cpu_then "${part#params-norm-}" "--log-params-norm" < <(params_norm_check) ;;
  # The same on 3 ranks with ZeRO-1 (dp 3, nccl): each rank sums its master shard, which starts
  # past element 0 and, on the last rank, holds the padding (30176 parameters in 3 x 10059), and one
  # all-reduce adds them; against the CPU trainer on the same global batch (3 micro-batches a step).
  params-norm-bf16-zero)
    printf '#!/usr/bin/env bash\nCUDA_HOST_DEVICES=3 exec bash tests/mpirun.sh 3 %q "$@" --dp 3 --zero 1 --comm nccl\n' \
      "$CUDA_BF16" > "$W/zero3.sh" && chmod +x "$W/zero3.sh" || exit 1
    PREC=bf16 TEST_PROG="$W/zero3.sh" vs_cpu_then bf16 "--log-params-norm --total-batch-tokens 96" \
      < <(params_norm_check) ;;
  ulysses-launches) ulysses_launches ;;
  graphs-bf16) graphs "$CUDA_BF16" ;;
  graphs-fp32) graphs "$CUDA_FP32" ;;
  graphs-sp-bf16) graphs_sp "$CUDA_BF16" ;;
  graphs-timeline) graphs_timeline "$CUDA_BF16" ;;
  sync-free-bf16) sync_free "$CUDA_BF16" cuda-bf16 2e-2 1e-1 ;;
  sync-free-fp32) sync_free "$CUDA_FP32" cuda-fp32 1e-4 1e-4 ;;
  fp32) checks vs-cpu --cpu "$CPU" --test "$CUDA_FP32" --backend cuda-fp32 --compare "$COMPARE" \
          --loss-tol 1e-4 --norm-tol 1e-4 ;;
  bf16) checks vs-cpu --cpu "$CPU" --test "$CUDA_BF16" --backend cuda-bf16 --compare "$COMPARE" \
          --loss-tol 2e-2 --norm-tol 1e-1 ;;
  resume-bf16) checks resume --test "$CUDA_BF16" ;;
  resume-fp32) checks resume --test "$CUDA_FP32" ;;
  # Muon's state (its momentum in m, the master weights' rounding by its update kernel) resumed
  # bit for bit; an MLP 45 wide puts fcprojw's matrices off the 8-element spans of the rounding's
  # random draws (the update kernel's partial first and last spans).
  resume-muon-bf16)
    printf '#!/usr/bin/env bash\nexec %q "$@" --optimizer muon --ffn-hidden 45 --lr 1e-2\n' "$CUDA_BF16" > "$W/muon.sh" &&
      chmod +x "$W/muon.sh" || exit 1
    checks resume --test "$W/muon.sh" ;;
  dist-muon-bf16) dist_muon "$CUDA_BF16" ;;
  muon-precisions) muon_precisions ;;
  dist-muon-fp32) dist_muon "$CUDA_FP32" ;;
  # --async-save: checkpoints 2 and 4 (and the straight run's 6 and 8) written in the background
  # from the host copies of the device's weights and moments, then the stop at 5 and the resume.
  resume-async-bf16)
    printf '#!/usr/bin/env bash\nexec %q "$@" --async-save --checkpoint-every 2\n' "$CUDA_BF16" > "$W/async.sh" &&
      chmod +x "$W/async.sh" || exit 1
    checks resume --test "$W/async.sh" ;;
  async-pinned-fallback) pinned_fallback ;;
  resume-graphs-bf16)
    printf '#!/usr/bin/env bash\nexec %q "$@" --cuda-graph 1 --timeline 0\n' "$CUDA_BF16" > "$W/graphs.sh" &&
      chmod +x "$W/graphs.sh" || exit 1
    checks resume --test "$W/graphs.sh" ;;
  resume-graphs-2x2)
    # Graphs holding the attention's NCCL operations, captured again by the resumed processes.
    printf '#!/usr/bin/env bash\nCUDA_HOST_DEVICES=4 exec bash tests/mpirun.sh 4 %q "$@" --pq 2 --pkv 2 --attention 2d-overlap --comm nccl --cuda-graph 1 --timeline 0\n' \
      "$CUDA_BF16" > "$W/graphs2x2.sh" && chmod +x "$W/graphs2x2.sh" || exit 1
    checks resume --test "$W/graphs2x2.sh" ;;
  resume-bf16-zero)
    # trainer_checks.sh runs one program: this one starts the 3 ranks.
    printf '#!/usr/bin/env bash\nCUDA_HOST_DEVICES=16 exec bash tests/mpirun.sh 3 %q "$@" --dp 3 --zero 1 --comm nccl\n' \
      "$CUDA_BF16" > "$W/zero3.sh" && chmod +x "$W/zero3.sh" || exit 1
    checks resume --test "$W/zero3.sh" ;;
  resume-async-bf16-zero)
    # The same with --async-save, on the build whose every checkpoint checks that each rank copied
    # to the host only what its files hold (rank 0 every weight, gathered from the three fp32
    # master shards; ranks 1 and 2 their slice).
    printf '#!/usr/bin/env bash\nCUDA_HOST_DEVICES=16 exec bash tests/mpirun.sh 3 %q "$@" --dp 3 --zero 1 --comm nccl --async-save --checkpoint-every 2\n' \
      "${SLOW_SAVE:-$BUILD/tests/train_gpt_cuda_host_slow_save}" > "$W/zero3async.sh" && chmod +x "$W/zero3async.sh" || exit 1
    checks resume --test "$W/zero3async.sh" ;;
  *) echo "usage: $0 fp32|bf16|gqa-bf16|gqa-fp32|rope-bf16|rope-fp32|llama-bf16|llama-fp32|qwen2-fp32|qwen3-fp32|qk-norm-bf16|muon-fp32|muon-bf16|resume-muon-bf16|dist-muon-bf16|dist-muon-fp32|resume-bf16|resume-bf16-zero|resume-async-bf16-zero|resume-fp32|sync-free-bf16|sync-free-fp32|graphs-bf16|graphs-fp32|graphs-sp-bf16|graphs-timeline|resume-graphs-bf16|resume-graphs-2x2|resume-async-bf16|async-pinned-fallback|ulysses-launches" >&2; exit 2 ;;
esac
