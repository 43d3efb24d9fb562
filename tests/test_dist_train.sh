#!/usr/bin/env bash
# The trainer under mpirun equals the single-process trainer, step by step.
#   tests/test_dist_train.sh curves    20 steps on several meshes, schedules and ZeRO-1 (one
#                                      world whose size does not divide the parameter count):
#                                      the JSONL loss of every step, the validation losses and
#                                      the final sample equal the single-process run's
#   tests/test_dist_train.sh banded    sliding-window attention (--attention-window 2 in layer 0,
#                                      layer 1 dense) on one process, 2x2, 2d-overlap, dp 2, Ring,
#                                      Striped and Zigzag: losses, validation losses and sample equal the
#                                      single-process run's; the window changes the model (a dense
#                                      run's losses differ); its checkpoint resumed without the
#                                      window is refused naming both
#   tests/test_dist_train.sh documents document masking (--document-mask 511, data with a boundary
#                                      at one token in eight) on one process, 2x2, 2d-overlap, dp 2
#                                      + ZeRO-1, Ring, Striped and Zigzag:
#                                      losses, validation losses and sample equal the single-process
#                                      run's; with a window too, on 2x2; the mask changes the model
#                                      (unmasked losses differ); with --reset-position-ids on 2x2
#                                      and Zigzag against one process (another model again);
#                                      bad --document-mask values refused, and --reset-position-ids
#                                      without a mask
#   tests/test_dist_train.sh resume    a checkpoint of dp 2 x (2x2) with ZeRO-1 continued on one
#                                      process, and one of one process continued on dp 2 x (2x2),
#                                      give the straight run's losses
#   tests/test_dist_train.sh blend     a blend of two training sets (--train-data '0.6 A 0.4 B') on
#                                      dp 2, dp 4 + ZeRO-1, dp 2 x Zigzag 1x2, and stopped on one
#                                      process and resumed on dp 2: the single-process run's
#                                      losses; the data record and configuration name 96 and 64
#                                      windows read; the first set alone trains otherwise; its
#                                      checkpoint resumed under other weights or one pattern is
#                                      refused
#   tests/test_dist_train.sh refuse    a loader position the new dp size cannot continue, or a
#                                      checkpoint of another sequence length, is
#                                      refused with the reason, non-zero, checkpoint kept
#   tests/test_dist_train.sh qk-norm   QK-norm (Qwen3's block) on one process and every schedule,
#                                      GPT's block with it on 2x2: the single-process run's losses
#   tests/test_dist_train.sh kill      SIGKILL of one rank ends every rank within 30 s
#   tests/test_dist_train.sh stop      SIGTERM to one rank of four: every rank stops after the same
#                                      step with a checkpoint, exit 0, rank 0 naming another
#                                      rank's stop; the job resumes from it
#   tests/test_dist_train.sh stall     SIGSTOP of one rank: with --comm-timeout 3 the others end
#                                      the job within 30 s, naming rank, operation, group and
#                                      layer (nccl: and aborting their communicators)
#   tests/test_dist_train.sh eval-mesh --eval-only of one model file on dp 1, 2, 3, 4, 2x2 and
#                                      dp 2 x (2x2): the same validation loss within 1e-6, for
#                                      --eval-batches dividing dp or not and beyond the pass
#   tests/test_dist_train.sh straggle  a rank stopped for 2 s under --comm-timeout 20: the job
#                                      completes with the undisturbed run's losses, bit for bit
#   tests/test_dist_train.sh mesh      a mesh that does not fit the world, or a sequence length
#                                      that does not split over it: a clear error from rank 0,
#                                      every rank exits non-zero, promptly
#   tests/test_dist_train.sh consistency
#                                      ranks started with a different option, shard set (another
#                                      --train-data, or the same pattern matching other files) or
#                                      --init-from model file (shape, size) are refused at start
#                                      naming the item and both values; identical ones train
#   tests/test_dist_train.sh schedules MESH
#                                      ATTENTION2D (one gradient all-reduce after backward),
#                                      ATTENTION2D with kept K/V, Ring, Striped and Zigzag on MESH
#                                      2x3, dp2-2x2), ZeRO-1 on two; the overlapped variants:
#                                      2d-overlap with gradients reduced in per-layer buckets
#                                      during backward (equal to the plain 2d run too), and with
#                                      ZeRO-1 (parameter all-gather overlapping the next step);
#                                      the 2d-overlap run's --trace is valid, has one process per
#                                      rank, and its communication bytes equal the counters
#                                      (PLAIN=1: also 2d-overlap and Striped with --overlap 0,
#                                      each equal to its overlapped run)
#   tests/test_dist_train.sh recompute MESH
#                                      --recompute selective and full against none on MESH for
#                                      every schedule (ZeRO-1, kept K/V, buckets, two micro-batches
#                                      per step): the same bits (every logged loss, gradient norm
#                                      and validation loss, the model files, and each rank's
#                                      optimizer state but its informational configuration text)
#   tests/test_dist_train.sh chunks    --a2a-chunks 2 against 1 for Ulysses (1x2, --overlap 0, dp 2
#                                      with ZeRO-1) and USP (2x2): the same bits (losses, norms,
#                                      validation losses, model file)
#   tests/test_dist_train.sh seeds MESH   the 2d-overlap trainer under CUDA_HOST_SCHEDULE_SEED
#                                      1, 2, 3 (the host runtime's random stream interleavings):
#                                      identical losses and norms, and equal to the reference
# The single-process run accumulates dp micro-batches (--total-batch-tokens = B*T*dp), so it
# sees exactly the tokens of one dp step. Tiny model and shards; needs build/train_gpt.
#
# The same parts test the CUDA trainers (tests/suites/cuda-dist-train.list): TRAIN is the trainer
# under test, REF_TRAIN the one that runs the single-process reference (default TRAIN; the CPU
# trainer for the CUDA ones), TEST_ARGS go to every run of TRAIN (e.g. --comm mpi-staged), TOL and
# NORM_TOL bound the relative differences (the norms over the first NORM_STEPS steps, default all),
# EVAL_TOL the validation losses of eval-mesh,
# WORK names the work directory.
# SCHEDULES (banded, documents, rope) names the runs of every_schedule to make, from
# "1 2x2 2x2-overlap dp2-1x2 ring-1x4 striped-4x1 zigzag-2x2 ulysses-1x2 usp-2x2" (the default: all);
# a part's other runs on one of those meshes (documents' dw-2x2 and p-2x2, its and rope's Zigzag
# runs with positions that restart, banded's check of a schedule's start-up line) go with it, so
# that two lines with complementary lists run each check once (make test and make test-sweep).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
part=${1:?usage: tests/test_dist_train.sh curves|resume|refuse|kill|stall|eval-mesh|straggle|mesh|schedules MESH}
TRAIN=${TRAIN:-$BUILD/train_gpt}
REF_TRAIN=${REF_TRAIN:-$TRAIN}
read -r -a test_args <<< "${TEST_ARGS:-}"
PY=${PYTHON:-python3}
TOL=${TOL:-1e-5}
# The gradient norm matches to ~1e-7 at step 1, but AdamW turns the fp32 rounding differences of
# near-zero gradient elements into parameter differences of up to ~lr, and the norm (unlike the
# mean loss) shows them: up to 1.2e-5 measured. A wrong reduction or shard is off by O(1).
NORM_TOL=${NORM_TOL:-1e-4}
EVAL_TOL=${EVAL_TOL:-1e-6}
NORM_STEPS=${NORM_STEPS:-1000000}
all_schedules=(1 2x2 2x2-overlap dp2-1x2 ring-1x4 striped-4x1 zigzag-2x2 ulysses-1x2 usp-2x2)
read -r -a schedules <<< "${SCHEDULES:-${all_schedules[*]}}"
for sched in "${schedules[@]}"; do
  case " ${all_schedules[*]} " in *" $sched "*) ;; *)
    echo "test_dist_train: SCHEDULES: expected names among '${all_schedules[*]}', found '$sched'" >&2; exit 2 ;;
  esac
done
[ ${#schedules[@]} -gt 0 ] || { echo "test_dist_train: SCHEDULES: expected at least one name, found none" >&2; exit 2; }
# scheduled NAME: NAME is among the SCHEDULES to run.
scheduled() { case " ${schedules[*]} " in *" $1 "*) return 0 ;; esac; return 1; }
work=$BUILD/tests/dist_train/${WORK:-$part}
rm -rf "$work"
mkdir -p "$work"
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Two training shards and one validation shard (llm.c, uint16, version 1) of a noisy Markov
# chain over 500 tokens: learnable, so the loss moves and a wrong update shows.
# make_shards [docs]: docs puts token 511 (the documents' boundary) at one position in eight.
make_shards() {
  "$PY" - "$work" "${1:-}" <<'EOF'
import random, struct, sys
rng = random.Random(1234)
docs = sys.argv[2] == "docs"
def shard(path, n):
    toks, prev = [], 0
    for _ in range(n):
        prev = (prev * 7 + 3) % 500 if rng.random() < 0.7 else rng.randrange(500)
        toks.append(511 if docs and rng.random() < 0.125 else prev)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *toks))
shard(sys.argv[1] + "/train_000.bin", 2000)
shard(sys.argv[1] + "/train_001.bin", 1500)
shard(sys.argv[1] + "/val_000.bin", 600)
EOF
}

# B=2, T=32, 2 heads of 16 (the CUDA kernels take head sizes of multiples of 16); each part sets --total-batch-tokens (B*T*dp*accumulation).
common=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512
        --train-data "$work/train_*.bin" --val-data "" --tokenizer "" --batch 2 --seq-len 32
        --steps 20 --lr 1e-2 --warmup 2 --eval-every 0 --sample-length 0 --quiet
        --peak-gflops 1)

# train NAME NP [ARGS...]: runs the trainer on NP ranks into $work/NAME (its log.jsonl); the
# run named ref is the reference trainer's, and so is every 1-rank run when single_is_ref=1
# (resume: a checkpoint of one trainer continued by the other).
single_is_ref=0
train() {
  local name=$1 np=$2
  shift 2
  local start=$EPOCHREALTIME prog=$TRAIN extra=("${test_args[@]}")
  if [ "$name" = ref ] || { [ "$single_is_ref" = 1 ] && [ "$np" = 1 ]; }; then
    prog=$REF_TRAIN; extra=()
  fi
  if ! timeout 300 bash tests/mpirun.sh "$np" "$prog" "${common[@]}" --out-dir "$work/$name" \
      "${extra[@]}" "$@" > "$work/$name.out" 2>&1; then
    fail "$name: the trainer failed (np $np $*):"
    tail -n 20 "$work/$name.out"
    return 1
  fi
  awk -v a="$start" -v b="$EPOCHREALTIME" -v n="$name" 'BEGIN { printf "  ran %-14s %.1f s\n", n, b - a }'
}

# every_schedule PREFIX ARGS...: runs ARGS on one process, 2x2, 2d-overlap, dp 2 + ZeRO-1, Ring
# 1x4, Striped 4x1, Zigzag 2x2, Ulysses 1x2 (the model's 2 heads over 2 ranks) and USP 2x2 (over
# the column's 2 ranks, a ring of 2) (PREFIX-1 ... PREFIX-usp-2x2; those of SCHEDULES), each
# compared with ref.
every_schedule() {
  local p=$1 n
  shift
  scheduled 1 && train "$p-1" 1 "$@"
  scheduled 2x2 && train "$p-2x2" 4 "$@" --pq 2 --pkv 2
  scheduled 2x2-overlap && train "$p-2x2-overlap" 4 "$@" --pq 2 --pkv 2 --attention 2d-overlap
  scheduled dp2-1x2 && train "$p-dp2-1x2" 4 "$@" --dp 2 --pkv 2 --zero 1
  scheduled ring-1x4 && train "$p-ring-1x4" 4 "$@" --pkv 4 --attention ring
  scheduled striped-4x1 && train "$p-striped-4x1" 4 "$@" --pq 4 --attention striped
  scheduled zigzag-2x2 && train "$p-zigzag-2x2" 4 "$@" --pq 2 --pkv 2 --attention zigzag
  scheduled ulysses-1x2 && train "$p-ulysses-1x2" 2 "$@" --pkv 2 --attention ulysses
  scheduled usp-2x2 && train "$p-usp-2x2" 4 "$@" --pq 2 --pkv 2 --attention usp
  for n in "${schedules[@]}"; do
    [ -f "$work/$p-$n/log.jsonl" ] && compare "$p-$n" ref
  done
  return 0
}

# compare NAME REF: the log of NAME has exactly steps 1..STEPS (default 20) once each, every step's loss equals
# REF's within TOL (relative), its gradient norm within NORM_TOL, its validation losses (same
# steps) within TOL; its samples are the same tokens.
compare() {
  "$PY" - "$work/$1/log.jsonl" "$work/$2/log.jsonl" "$TOL" "$1" "$NORM_TOL" "$NORM_STEPS" "${STEPS:-20}" <<'EOF'
import json, sys
def steps(path):
    return [r for r in map(json.loads, open(path)) if r.get("type") == "step"]
got, ref, tol, name = steps(sys.argv[1]), steps(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
norm_tol = float(sys.argv[5])
ref_loss = {r["step"]: r["loss"] for r in ref}
ref_norm = {r["step"]: r["grad_norm"] for r in ref}
order = [r["step"] for r in got]
n = int(sys.argv[7])
if order != list(range(1, n + 1)) or sorted(ref_loss) != list(range(1, n + 1)):
    print("FAIL %s: logged steps %s, expected 1..%d once each" % (name, order, n)); sys.exit(1)
errs = [abs(r["loss"] - ref_loss[r["step"]]) / abs(ref_loss[r["step"]]) for r in got]
worst = max(errs)
norm_steps = int(sys.argv[6])
norm_err = max(abs(r["grad_norm"] - ref_norm[r["step"]]) / abs(ref_norm[r["step"]])
               for r in got if r["step"] <= norm_steps)
ok = worst <= tol and norm_err <= norm_tol
def events(path, kind):
    return [r for r in map(json.loads, open(path)) if r.get("type") == kind]
evals, ref_evals = events(sys.argv[1], "eval"), events(sys.argv[2], "eval")
extra = ""
if evals or ref_evals:
    same = [r["step"] for r in evals] == [r["step"] for r in ref_evals]
    eval_err = max(abs(a["val_loss"] - b["val_loss"]) / abs(b["val_loss"])
                   for a, b in zip(evals, ref_evals)) if same else float("inf")
    ok = ok and same and eval_err <= tol
    extra += ", %d val losses (%s) error %.1e" % (len(evals), ",".join(
        "%.6f" % r["val_loss"] for r in evals), eval_err)
samples, ref_samples = events(sys.argv[1], "sample"), events(sys.argv[2], "sample")
if samples or ref_samples:
    same = [(r["step"], r["text"]) for r in samples] == [(r["step"], r["text"]) for r in ref_samples]
    ok = ok and same
    extra += ", samples %s" % ("equal" if same else "DIFFER: %s vs %s" % (samples, ref_samples))
print("%s %-14s losses %.6f -> %.6f, worst relative error %.1e (step %d), grad norms %.1e%s" %
      ("ok  " if ok else "FAIL", name, got[0]["loss"], got[-1]["loss"], worst,
       got[errs.index(worst)]["step"], norm_err, extra))
sys.exit(0 if ok else 1)
EOF
  [ $? -eq 0 ] || failures=$((failures + 1))
}

# parse_mesh MESH (e.g. 2x3, dp2-2x2): sets dp, pq, pkv, np and mesh_args, and a sequence of 48
# tokens (it splits over every mesh of the suites: P = 2, 3, 4, 6, 8), 96 per dp rank per step.
parse_mesh() {
  local grid=$1
  dp=1
  case "$1" in dp*-*) dp=${1%%-*}; dp=${dp#dp}; grid=${1#*-} ;; esac
  pq=${grid%x*} pkv=${grid#*x}
  np=$((dp * pq * pkv))
  mesh_args=(--dp "$dp" --pq "$pq" --pkv "$pkv")
  common+=(--seq-len 48 --context 48 --total-batch-tokens $((96 * dp)))
}

# check_trace NAME NP: the run's --trace ($work/NAME.json) is valid Chrome trace JSON with one
# process per rank, and each rank's communication bytes equal what its comm layer counted inside
# the steps (the log's timeline record).
check_trace() {
  local name=$1 np=$2 out
  [ -f "$work/$name/log.jsonl" ] || return
  "$PY" - "$work/$name/log.jsonl" "$work/$name.bytes.json" <<'EOF' || { fail "$name: no timeline record in the log"; return; }
import json, sys
rec = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "timeline"]
if not rec: sys.exit(1)
json.dump({str(i): b for i, b in enumerate(rec[-1]["step_comm_bytes_per_rank"])}, open(sys.argv[2], "w"))
EOF
  if out=$("$PY" tools/check_trace.py "$work/$name.json" --ranks "$np" --bytes "$work/$name.bytes.json"); then
    echo "ok   $name trace: $out"
  else
    fail "$name trace: $out"
  fi
}

# start_job NAME ARGS...: 4 ranks (2x2) of TRAIN into $work/NAME in the background until it has
# logged 3 steps; job: mpirun's pid (tests/mpirun.sh execs it), ranks: its children, victim:
# world rank 2's pid. Returns 1 (a failure counted) when rank 2 is not found.
start_job() {
  local name=$1
  shift
  bash tests/mpirun.sh 4 "$TRAIN" "${common[@]}" "${test_args[@]}" --pq 2 --pkv 2 \
    --total-batch-tokens 64 --out-dir "$work/$name" "$@" > "$work/$name.out" 2>&1 &
  job=$!
  for _ in $(seq 300); do
    [ "$(steps_logged "$name")" -ge 3 ] && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  victim=
  ranks=$(pgrep -P "$job" || true)
  for p in $ranks; do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=2'; then victim=$p; fi
  done
  [ -n "$victim" ] && return 0
  fail "$name: did not find rank 2 among the children of mpirun ($ranks)"
  tail -n 20 "$work/$name.out"
  kill -KILL "$job" $ranks 2>/dev/null
  return 1
}

steps_logged() {
  local n
  n=$(grep -c '"type":"step"' "$work/$1/log.jsonl" 2>/dev/null)
  echo "${n:-0}"
}

# await_job WHAT: waits up to 30 s for the job; rc: its exit status, secs: the seconds it took.
await_job() {
  local start=$EPOCHREALTIME
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if kill -0 "$job" 2>/dev/null; then
    fail "$1: mpirun still running after 30 s"
    kill -KILL "$job" $ranks 2>/dev/null
  fi
  wait "$job"
  rc=$?
  echo "  mpirun exited $rc after ${secs} s"
}

# rank_alive PID: the process exists and is not a zombie.
rank_alive() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# check_ranks_gone WHAT: no rank process of the job is left (zombies aside). A killed process can
# take a moment to go on a loaded machine: each gets up to 5 s; one left behind stays for good.
check_ranks_gone() {
  for p in $ranks; do
    for _ in $(seq 50); do rank_alive "$p" || break; sleep 0.1; done
    if rank_alive "$p"; then
      fail "$1: rank process $p still alive"
      kill -KILL "$p" 2>/dev/null
    fi
  done
}

case "$part" in
curves)
  make_shards
  # 384 tokens per step: 6 micro-batches on one process, 3 per rank on dp 2, 2 on dp 3. The
  # validation pass reads the same 6 global micro-batches everywhere (--eval-batches counts them
  # all, the dp ranks split them; the shard has 9), at steps 10 and 20; a sample of 8 tokens at the
  # end.
  common+=(--total-batch-tokens 384 --val-data "$work/val_*.bin" --eval-every 10
           --sample-length 8)
  dp1=(--eval-batches 6)
  dp2=(--eval-batches 6)
  train ref 1 "${dp1[@]}" || exit 1
  train m1x2 2 "${dp1[@]}" --pkv 2
  train m2x2-zero 4 "${dp1[@]}" --pq 2 --pkv 2 --zero 1
  train dp2-1x2 4 "${dp2[@]}" --dp 2 --pkv 2
  train dp2-2x2-zero 8 "${dp2[@]}" --dp 2 --pq 2 --pkv 2 --zero 1 --keep-kv
  train m2x4 8 "${dp1[@]}" --pq 2 --pkv 4
  train ring-1x4 4 "${dp1[@]}" --pkv 4 --attention ring
  train striped-4x1 4 "${dp1[@]}" --pq 4 --attention striped --zero 1
  train zigzag-2x2 4 "${dp1[@]}" --pq 2 --pkv 2 --attention zigzag
  # 6 ranks: 42880 parameters pad to 42882 for 6 ZeRO-1 shards.
  train dp3-1x2-zero 6 --eval-batches 6 --dp 3 --pkv 2 --zero 1
  for n in m1x2 m2x2-zero dp2-1x2 dp2-2x2-zero m2x4 ring-1x4 striped-4x1 zigzag-2x2 dp3-1x2-zero; do
    [ -f "$work/$n/log.jsonl" ] && compare "$n" ref
  done
  ;;
banded)
  make_shards
  common+=(--total-batch-tokens 384 --val-data "$work/val_*.bin" --eval-every 10 --eval-batches 6)
  # The final sample too, where the trainers agree within fp32 rounding (bf16 trajectories wander
  # within TOL, and a sampled token may flip).
  awk -v t="$TOL" 'BEGIN { exit !(t <= 1e-4) }' && common+=(--sample-length 8)
  banded=(--attention-window 2 --window-every 2)
  train ref 1 "${banded[@]}" --checkpoint-every 10 || exit 1
  grep -q 'attention window 2 in layers l % 2 = 0,' "$work/ref.out" ||
    fail "banded: the configuration does not name the window"
  every_schedule b "${banded[@]}"
  # The start-up line names the steps a 2-token window leaves (T 32 on 4 ranks): Ring 2 of 4,
  # Zigzag's two-way tour 3 of 4; Striped, whose tokens are cyclic, none.
  ! scheduled ring-1x4 ||
    grep -q '^ring steps: 2 of 4 in the banded layers (window 2: rank i holds its own block, then those of rank i-1), 4 in the others; K|V passes per banded layer 1 instead of 3$' "$work/b-ring-1x4.out" ||
    fail "banded: Ring's start-up line does not give its 2 of 4 steps"
  ! scheduled zigzag-2x2 ||
    grep -q '^ring steps: 3 of 4 in the banded layers (window 2: rank i holds its own block, then those of rank i-1, then of rank i+1), 4 in the others; K|V passes per banded layer 2 instead of 3$' "$work/b-zigzag-2x2.out" ||
    fail "banded: Zigzag's start-up line does not give its two-way tour of 3 steps"
  ! scheduled striped-4x1 || ! grep -q '^ring steps:' "$work/b-striped-4x1.out" ||
    fail "banded: Striped names steps it runs all of"
  # The same run without the window is another model: its losses must differ from step 2 on
  # (both runs on the reference trainer).
  single_is_ref=1
  train dense 1 || exit 1
  single_is_ref=0
  "$PY" - "$work/dense/log.jsonl" "$work/ref/log.jsonl" <<'PYEOF2' || fail "banded: the window did not change the losses"
import json, sys
loss = lambda p: [r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "step"]
a, b = loss(sys.argv[1]), loss(sys.argv[2])
d = [abs(x - y) / abs(y) for x, y in zip(a[1:], b[1:])]
print("dense vs banded: relative loss differences from step 2 on: smallest %.1e, largest %.1e"
      % (min(d), max(d)))
sys.exit(0 if min(d) > 1e-5 and max(d) > 1e-3 else 1)   # (the meshes agree within 1e-6)
PYEOF2
  bash tests/expect_job_failure.sh 'attention window 2 \(every 2 layers\) differs from this run.s 0 \(every 0\)' \
    timeout 60 bash tests/mpirun.sh 1 "$TRAIN" "${common[@]}" "${test_args[@]}" --out-dir "$work/ref" \
    --resume || fail "banded: a checkpoint resumed without its window was not refused"
  ;;
qk-norm)
  # QK-norm on every schedule (Qwen3's block: RMSNorm on every query and key head before the
  # rotation, 4 heads over 2 key/value heads; Ulysses and USP split the heads after it), and GPT's
  # LayerNorm block with it on 2x2, against the reference trainer on one process.
  make_shards
  common+=(--total-batch-tokens 384 --val-data "$work/val_*.bin" --eval-every 10 --eval-batches 6
           --lr 3e-3)
  qwen3=(--position-embedding rope --channels 64 --heads 4 --kv-heads 2 --normalization rmsnorm
         --mlp swiglu --disable-bias-linear --qk-layernorm)
  train ref 1 "${qwen3[@]}" || exit 1
  grep -q 'QK-norm' "$work/ref.out" || fail "qk-norm: the configuration does not name QK-norm"
  every_schedule q "${qwen3[@]}"
  single_is_ref=1
  train ref-ln 1 --qk-layernorm || exit 1
  single_is_ref=0
  ! scheduled 2x2 || { train ln-2x2 4 --qk-layernorm --pq 2 --pkv 2 && compare ln-2x2 ref-ln; }
  ;;
rope)
  # Rotary positions on every schedule, each rank turning its own tokens' queries and keys at their
  # positions in the sequence (4 heads of 16 over 2 key/value heads: Ulysses splits the 2 over its 2
  # ranks), against the reference trainer on one process; and with positions that restart at each
  # document (--reset-position-ids: the rotation by the position within the document) on 2x2.
  make_shards docs
  common+=(--total-batch-tokens 384 --val-data "$work/val_*.bin" --eval-every 10 --eval-batches 6
           --lr 3e-3)
  awk -v t="$TOL" 'BEGIN { exit !(t <= 1e-4) }' && common+=(--sample-length 8)
  rope=(--position-embedding rope --channels 64 --heads 4 --kv-heads 2)
  train ref 1 "${rope[@]}" || exit 1
  grep -q 'rotary positions (theta 10000)' "$work/ref.out" ||
    fail "rope: the configuration does not name the rotary positions"
  every_schedule r "${rope[@]}"
  docs=(--document-mask 511 --reset-position-ids)
  single_is_ref=1
  train ref-docs 1 "${rope[@]}" "${docs[@]}" || exit 1
  single_is_ref=0
  ! scheduled zigzag-2x2 ||
    { train docs-zigzag-2x2 4 "${rope[@]}" "${docs[@]}" --pq 2 --pkv 2 --attention zigzag &&
      compare docs-zigzag-2x2 ref-docs; }
  ;;
documents)
  make_shards docs
  # (--lr 3e-3: at 1e-2 the frequent boundary token's embedding makes this data's trajectory
  # chaotic, masked or not: unmasked 2x2 and one process part by 1.3e-4 within 20 steps.)
  common+=(--total-batch-tokens 384 --val-data "$work/val_*.bin" --eval-every 10 --eval-batches 6
           --lr 3e-3)
  awk -v t="$TOL" 'BEGIN { exit !(t <= 1e-4) }' && common+=(--sample-length 8)
  docs=(--document-mask 511)
  train ref 1 "${docs[@]}" || exit 1
  grep -q 'documents: a document begins at each token 511;' "$work/ref.out" ||
    fail "documents: the configuration does not name the boundary token"
  # The summary's share of the causal pairs the mask left, and the MFU on those (one in eight
  # tokens a boundary: documents of ~8 tokens in 32, about a quarter of the pairs).
  "$PY" - "$work/ref/log.jsonl" <<'PYEOF2' || fail "documents: no pair share in the summary's log"
import json, sys
r = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "documents"]
s = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "summary"]
print("documents: the mask left %.3f of the pairs; MFU %.4g on them against %.4g" %
      (r[-1]["pair_share"], r[-1]["mfu_pairs"], s[-1]["mfu"]))
sys.exit(0 if len(r) == 1 and 0.1 < r[0]["pair_share"] < 0.5 and r[0]["mfu_pairs"] < s[-1]["mfu"] else 1)
PYEOF2
  every_schedule d "${docs[@]}"
  # Both lower edges at once: documents and a window of 3 in layer 0, on one process and 2x2.
  single_is_ref=1
  train ref-w 1 "${docs[@]}" --attention-window 3 --window-every 2 || exit 1
  single_is_ref=0
  ! scheduled 2x2 ||
    { train dw-2x2 4 "${docs[@]}" --attention-window 3 --window-every 2 --pq 2 --pkv 2 &&
      compare dw-2x2 ref-w; }
  # Without the mask the same data trains another model: its losses differ from step 1 on (the
  # first forward already sees across documents), as do the window's.
  single_is_ref=1
  train none 1 || exit 1
  single_is_ref=0
  "$PY" - "$work/none/log.jsonl" "$work/ref/log.jsonl" "$work/ref-w/log.jsonl" <<'PYEOF2' || fail "documents: the mask did not change the losses"
import json, sys
loss = lambda p: [r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "step"]
a, b, c = loss(sys.argv[1]), loss(sys.argv[2]), loss(sys.argv[3])
d = [abs(x - y) / abs(y) for x, y in zip(a, b)]
e = [abs(x - y) / abs(y) for x, y in zip(c, b)]
print("unmasked vs masked: relative loss differences: smallest %.1e, largest %.1e; masked with a "
      "window vs without: largest %.1e" % (min(d), max(d), max(e)))
sys.exit(0 if min(d) > 1e-6 and max(d) > 1e-3 and max(e) > 1e-4 else 1)
PYEOF2
  # Positions counted from each document's start (--reset-position-ids): one process, then two
  # schedules whose local tokens sit at other positions (cyclic 2x2, Zigzag's two runs) against
  # it; another model than the masked one with sequence positions.
  pos=(--reset-position-ids)
  single_is_ref=1
  train ref-p 1 "${docs[@]}" "${pos[@]}" || exit 1
  single_is_ref=0
  grep -q 'document, positions counted from its start' "$work/ref-p.out" ||
    fail "documents: the configuration does not say the positions restart"
  for run in "2x2 p-2x2 4 --pq 2 --pkv 2" "zigzag-2x2 p-zigzag-2x2 4 --pq 2 --pkv 2 --attention zigzag"; do
    set -- $run
    scheduled "$1" || continue
    train "$2" "$3" "${docs[@]}" "${pos[@]}" "${@:4}" && compare "$2" ref-p
  done
  "$PY" - "$work/ref/log.jsonl" "$work/ref-p/log.jsonl" <<'PYEOF2' || fail "documents: resetting the positions did not change the losses"
import json, sys
loss = lambda p: [r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "step"]
a, b = loss(sys.argv[1]), loss(sys.argv[2])
d = [abs(x - y) / abs(y) for x, y in zip(a, b)]
print("positions within documents vs within sequences: relative loss differences: smallest %.1e, "
      "largest %.1e" % (min(d), max(d)))
sys.exit(0 if min(d) > 1e-6 and max(d) > 1e-3 else 1)
PYEOF2
  bash tests/expect_job_failure.sh "--reset-position-ids: expected --document-mask eot or a token id \(the documents whose positions restart\), found --document-mask none" \
    timeout 60 bash tests/mpirun.sh 1 "$TRAIN" "${common[@]}" "${test_args[@]}" --out-dir "$work/bad" \
    --reset-position-ids || fail "documents: --reset-position-ids without a document mask was not refused"
  # Refusals, one line each, before any training.
  for bad in "eot|--document-mask eot: expected a vocabulary holding GPT-2's end-of-text token 50256, found V=512" \
             "512|--document-mask: expected none, eot or a token id in \\[0, 512\\), found '512'" \
             "x1|--document-mask: expected none, eot or a token id in \\[0, 512\\), found 'x1'"; do
    bash tests/expect_job_failure.sh "${bad#*|}" \
      timeout 60 bash tests/mpirun.sh 1 "$TRAIN" "${common[@]}" "${test_args[@]}" \
      --out-dir "$work/bad" --document-mask "${bad%%|*}" ||
      fail "documents: --document-mask ${bad%%|*} was not refused as expected"
  done
  ;;
resume)
  make_shards
  single_is_ref=1
  common+=(--total-batch-tokens 128)
  train ref 1 || exit 1
  # dp 2 x (2x2) with ZeRO-1 stops after 10 steps (checkpoint), one process continues.
  train dist-to-1 8 --dp 2 --pq 2 --pkv 2 --zero 1 --exit-after 10 &&
    train dist-to-1 1 --resume &&
    compare dist-to-1 ref
  grep -q "resume: continuing from step 10" "$work/dist-to-1.out" ||
    fail "dist-to-1: the 1-process run did not say it continues from step 10"
  # One process stops after 10 steps, dp 2 x (2x2) with ZeRO-1 continues.
  train one-to-dist 1 --exit-after 10 &&
    train one-to-dist 8 --dp 2 --pq 2 --pkv 2 --zero 1 --resume &&
    compare one-to-dist ref
  grep -q "resume: continuing from step 10" "$work/one-to-dist.out" ||
    fail "one-to-dist: the 8-rank run did not say it continues from step 10"
  ;;
blend)
  make_shards
  # A blend of two components, 0.6 of train_000 (62 windows of 33 tokens) and 0.4 of train_001
  # (46), each with its own epochs and order: 256 tokens per step, 4 micro-batches on one process,
  # 2 per rank on dp 2, 1 on dp 4; 20 steps read 160 windows, 96 and 64 (1.5 and 1.4 epochs).
  mix=(--train-data "0.6 $work/train_000.bin 0.4 $work/train_001.bin" --total-batch-tokens 256)
  train ref 1 "${mix[@]}" || exit 1
  train blend-dp2 2 "${mix[@]}" --dp 2
  train blend-dp4-zero 4 "${mix[@]}" --dp 4 --zero 1
  train blend-dp2-zigzag-1x2 4 "${mix[@]}" --dp 2 --pkv 2 --attention zigzag
  # One process stops after 7 steps, dp 2 continues.
  train blend-resume 1 "${mix[@]}" --exit-after 7 &&
    train blend-resume 2 "${mix[@]}" --dp 2 --resume
  for n in blend-dp2 blend-dp4-zero blend-dp2-zigzag-1x2 blend-resume; do
    [ -f "$work/$n/log.jsonl" ] && compare "$n" ref
  done
  record=$(grep '"type":"data"' "$work/ref/log.jsonl")
  echo "$record" | grep -q '"weight":0.6,"share":0.60000,"files":1,"windows_per_epoch":62,"windows_read":96,' &&
    echo "$record" | grep -q '"weight":0.4,"share":0.40000,"files":1,"windows_per_epoch":46,"windows_read":64,' ||
    fail "blend: the data record does not say 96 and 64 windows read: $record"
  grep -q '^  60.000% (weight 0.6) .*train_000.bin: 1 file, 62 windows per epoch; 96 read, 1.55 epochs' "$work/ref.out" ||
    fail "blend: the configuration does not name the first component: $(grep -A2 '^data:' "$work/ref.out")"
  # The second component is read: the first one alone trains on other data.
  train first-only 1 --train-data "$work/train_000.bin" --total-batch-tokens 256
  "$PY" - "$work/first-only/log.jsonl" "$work/ref/log.jsonl" <<'PYEND' || fail "blend: the first component alone gives the blend's losses"
import json, sys
a, b = ([r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "step"] for p in sys.argv[1:])
diff = max(abs(x - y) for x, y in zip(a, b))
print("  the first component alone: losses differ by up to %.3g" % diff)
sys.exit(not (len(a) == len(b) == 20 and diff > 1e-3))
PYEND
  # A checkpoint of the blend resumed under other weights, or under one pattern, is refused.
  bash tests/expect_job_failure.sh 'blend: expected the one the checkpoint was written with \(2 components' \
    timeout 60 bash tests/mpirun.sh 1 "$TRAIN" "${common[@]}" "${test_args[@]}" \
    --out-dir "$work/blend-resume" --total-batch-tokens 256 --steps 30 --resume \
    --train-data "0.5 $work/train_000.bin 0.5 $work/train_001.bin" ||
    fail "blend: a checkpoint resumed under other weights was not refused"
  bash tests/expect_job_failure.sh 'blend: expected the one the checkpoint was written with \(2 components.*found 1 ' \
    timeout 60 bash tests/mpirun.sh 1 "$TRAIN" "${common[@]}" "${test_args[@]}" \
    --out-dir "$work/blend-resume" --total-batch-tokens 256 --steps 30 --resume ||
    fail "blend: a checkpoint resumed under one pattern was not refused"
  ;;
refuse)
  make_shards
  # A position the new dp size cannot continue: 3 micro-batches read (64 tokens per step, no
  # accumulation), and dp 2 can only continue from an even one. --resume must refuse with the
  # reason, exit non-zero on every rank, and leave the checkpoint as it was (not start over
  # from step 0, whose checkpoints would prune it).
  train odd 1 --total-batch-tokens 64 --exit-after 3 || exit 1
  bash tests/expect_job_failure.sh 'next_batch: expected a multiple of dp_size 2, found 3' \
    timeout 60 bash tests/mpirun.sh 2 "$TRAIN" "${common[@]}" "${test_args[@]}" --out-dir "$work/odd" --dp 2 \
    --total-batch-tokens 128 \
    --checkpoint-every 5 --resume || fail "refuse: the incompatible checkpoint was not refused with an error"
  # Another sequence length: the saved T (state header) must match, said with both values.
  bash tests/expect_job_failure.sh 'seq-len: saved with T=32 .*, this run has T=16; resume with the same --seq-len' \
    timeout 60 bash tests/mpirun.sh 1 "$TRAIN" "${common[@]}" "${test_args[@]}" --out-dir "$work/odd" \
    --seq-len 16 --total-batch-tokens 32 --resume || fail "refuse: a checkpoint of another T was not refused"
  steps=$(grep -c '"type":"step"' "$work/odd/log.jsonl")
  [ "$steps" -eq 3 ] ||
    fail "refuse: $steps steps logged, expected the first run's 3 (the dp 2 run trained)"
  [ -f "$work/odd/DONE_00000003" ] && [ -f "$work/odd/state_00000003_00000.bin" ] ||
    fail "refuse: the step 3 checkpoint is gone"
  ;;
kill)
  make_shards
  start_job long --steps 1000000 || exit 1
  echo "  training ($(steps_logged long) steps logged); SIGKILL to rank 2 (pid $victim)"
  kill -KILL "$victim"
  await_job kill
  [ "$rc" -ne 0 ] || fail "kill: the job exited 0 although rank 2 was killed"
  check_ranks_gone kill
  ;;
stop)
  # SIGTERM to rank 2 alone: every rank finishes the same step, a complete checkpoint is written,
  # the job exits 0 with rank 0 naming the other rank's stop (the step's agreement), and a resumed
  # job continues from that step.
  make_shards
  start_job stop --steps 1000000 --checkpoint-every 0 || exit 1
  echo "  training ($(steps_logged stop) steps logged); SIGTERM to rank 2 (pid $victim)"
  kill -TERM "$victim"
  await_job stop
  [ "$rc" -eq 0 ] || { fail "stop: the job exited $rc after SIGTERM to rank 2"; tail -n 20 "$work/stop.out"; }
  check_ranks_gone stop
  last=$(steps_logged stop)
  grep -q '^stop: another rank.s (its signal or its clock)$' "$work/stop.out" ||
    fail "stop: rank 0 does not name the other rank's stop"
  grep -q "^stopping early at step $last (checkpoint written)$" "$work/stop.out" ||
    fail "stop: no 'stopping early at step $last' after $last logged steps"
  grep -q "{\"type\":\"stop\",\"step\":$last,\"reason\":\"other-rank\"," "$work/stop/log.jsonl" ||
    fail "stop: the log has no stop record at step $last naming another rank"
  [ -f "$work/stop/DONE_$(printf %08d "$last")" ] || fail "stop: no complete checkpoint at step $last"
  if timeout 120 bash tests/mpirun.sh 4 "$TRAIN" "${common[@]}" "${test_args[@]}" --pq 2 --pkv 2 \
      --total-batch-tokens 64 --out-dir "$work/stop" --steps $((last + 2)) --resume > "$work/stop2.out" 2>&1; then
    grep -q "^resume: continuing from step $last in " "$work/stop2.out" ||
      fail "stop: the resumed job does not continue from step $last"
    [ "$(steps_logged stop)" = $((last + 2)) ] || fail "stop: the resumed job did not log 2 more steps"
  else
    fail "stop: the resumed job failed"; tail -n 20 "$work/stop2.out"
  fi
  echo "  stopped at step $last on every rank, resumed to $((last + 2))"
  ;;
stall)
  # The hang watchdog: rank 2 stopped (SIGSTOP) for good; the others give up after
  # --comm-timeout 3 s naming the operation, its group and layer, and take the job down.
  make_shards
  start_job stall --steps 1000000 --comm-timeout 3 || exit 1
  echo "  training ($(steps_logged stall) steps logged); SIGSTOP to rank 2 (pid $victim)"
  kill -STOP "$victim"
  await_job stall
  kill -CONT "$victim" 2>/dev/null
  [ "$rc" -ne 0 ] || fail "stall: the job exited 0 although rank 2 was stopped"
  # The watchdog's limit counts from the last operation that completed, which may precede the stop
  # by up to a step: the job may end a little less than 3 s after the SIGSTOP (about 1 run in 15
  # did). What it promises is the silence it reports, which must be at least the limit.
  hang='error: rank [013]: (all-gather|reduce-scatter|all-reduce|all-to-all|send-recv|broadcast|barrier) on group (world|dp|sp|row|col) \(world ranks [0-9,]+\) (in layer [01] (forward|backward)|outside any layer \(setup/gradient reduction\)) did not complete within 3 s \(--comm-timeout\); another rank is stalled or dead \(no operation completed for ([0-9.]+) s\)'
  if grep -Eq "$hang" "$work/stall.out"; then
    line=$(grep -Eo "$hang" "$work/stall.out" | head -n 1)
    echo "  $line"
    silent=$(sed -E 's/.*no operation completed for ([0-9.]+) s.*/\1/' <<< "$line")
    awk -v s="$silent" 'BEGIN { exit !(s >= 3) }' || fail "stall: reported after $silent s without progress, under the 3 s limit"
  else
    fail "stall: no watchdog message naming rank, operation, group, layer and the silence:"; tail -n 20 "$work/stall.out"
  fi
  if [[ " ${test_args[*]} " == *" nccl "* ]]; then
    abort='rank [013]: aborted 5 NCCL communicators \(ncclCommAbort\)'
    grep -Eq "$abort" "$work/stall.out" && echo "  $(grep -Eo "$abort" "$work/stall.out" | head -n 1)" ||
      fail "stall: no rank reports its NCCL communicators aborted"
  fi
  check_ranks_gone stall
  ;;
eval-mesh)
  # --eval-batches N counts micro-batches of the whole validation pass: one model file evaluated
  # (--eval-only) on dp 1, 2, 3, 4, 2x2 and dp 2 x (2x2) gives one validation loss within fp32
  # summation order (EVAL_TOL, default 1e-6; the reference is REF_TRAIN in one process), for N
  # dividing dp or not (5 of the shard's 9) and beyond the pass (40: all 9); in-training evaluation
  # is the same function (the curves part compares its records).
  within() { awk -v a="$1" -v b="$2" -v t="$EVAL_TOL" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; }
  make_shards
  train model 1 --total-batch-tokens 64 --steps 4 --val-data "$work/val_*.bin" --eval-every 4 \
    --eval-batches 5 || exit 1
  in_training=$(sed -n 's/.*"type":"eval","step":4,"val_loss":\([0-9.e+-]*\).*/\1/p' "$work/model/log.jsonl")
  args=(--init-from "$work/model/model_00000004.bin" --val-data "$work/val_*.bin" --tokenizer ""
        --batch 2 --seq-len 32 --eval-only --quiet)
  for n in 5 40; do
    ref=""
    for mesh in "1:" "1:" "2:--dp 2" "3:--dp 3" "4:--dp 4" "4:--pq 2 --pkv 2" "8:--dp 2 --pq 2 --pkv 2"; do
      np=${mesh%%:*}; read -r -a margs <<< "${mesh#*:}"; label=${mesh#*:}; label=${label:-one process}
      name="eval-$n-$np${margs[*]// /}-${ref:+test}"; name=${name//--/_}
      # The reference: REF_TRAIN in one process; then TRAIN (with TEST_ARGS) on every mesh.
      prog=$TRAIN; extra=("${test_args[@]}"); [ -z "$ref" ] && prog=$REF_TRAIN extra=()
      if ! timeout 300 bash tests/mpirun.sh "$np" "$prog" "${args[@]}" "${extra[@]}" "${margs[@]}" \
          --eval-batches "$n" --out-dir "$work/$name" > "$work/$name.out" 2>&1; then
        fail "$name: --eval-only failed:"; tail -n 5 "$work/$name.out"; continue
      fi
      val=$(sed -n 's/.*"type":"eval".*"val_loss":\([0-9.e+-]*\).*/\1/p' "$work/$name/log.jsonl")
      if [ -z "$ref" ]; then
        ref=$val; echo "  --eval-batches $n, one process: val loss $val"
        # Evaluation during training is the same function on the same batches.
        if [ "$n" = 5 ]; then
          [ -n "$in_training" ] && within "$in_training" "$val" &&
            echo "ok   the same model evaluated in training (step 4, --eval-batches 5): $in_training" ||
            fail "in-training evaluation at step 4 gave '$in_training', --eval-only $val"
        fi
        continue
      fi
      if within "$val" "$ref"; then
        echo "ok   --eval-batches $n on $label: val loss $val (reference: $ref)"
      else
        fail "--eval-batches $n on $label (np $np): val loss $val, reference $ref"
      fi
    done
  done
  ;;
straggle)
  # A rank stopped for 2 s (below --comm-timeout 20) only slows the job: same losses as an
  # undisturbed run, bit for bit.
  make_shards
  train calm 4 --pq 2 --pkv 2 --total-batch-tokens 64 --steps 100 || exit 1
  start_job slow --comm-timeout 20 --steps 100 || exit 1
  echo "  training ($(steps_logged slow) steps logged); SIGSTOP to rank 2 (pid $victim) for 2 s"
  kill -STOP "$victim"
  sleep 2
  kill -0 "$job" 2>/dev/null || fail "straggle: the job ended while rank 2 was stopped"
  kill -CONT "$victim"
  await_job straggle
  [ "$rc" -eq 0 ] || { fail "straggle: the job failed (exit $rc):"; tail -n 20 "$work/slow.out"; }
  TOL=0 NORM_TOL=0 STEPS=100 compare slow calm || fail "straggle: losses differ from the undisturbed run's"
  check_ranks_gone straggle
  ;;
mesh)
  make_shards
  # expect_once PATTERN NP ARGS...: the job fails with PATTERN (expect_job_failure.sh: exit
  # 1..123 within 30 s), said once (by rank 0, not by every rank), and writes no checkpoint.
  expect_once() {
    local pattern=$1 np=$2 out
    shift 2
    rm -rf "$work/m"
    out=$(bash tests/expect_job_failure.sh "$pattern" timeout 30 bash tests/mpirun.sh "$np" \
          "$TRAIN" "${common[@]}" "${test_args[@]}" --out-dir "$work/m" "$@")
    local rc=$?
    printf '%s\n' "$out"
    [ "$rc" -eq 0 ] || { fail "mesh: $*"; return; }
    local n
    n=$(printf '%s\n' "$out" | grep -cE -- "$pattern")
    [ "$n" -eq 1 ] || fail "mesh: $*: the error was printed $n times, expected once (rank 0)"
    if ls "$work/m"/DONE_* > /dev/null 2>&1; then fail "mesh: $*: wrote a checkpoint"; fi
  }
  # 4 ranks for a 2x3 mesh; dp 3 on 4 ranks; then a sequence that does not split over 2x2.
  expect_once '^error: mesh: --dp 1 x --pq 2 x --pkv 3 = 6 ranks expected, found 4 MPI ranks' \
    4 --pq 2 --pkv 3
  expect_once '^error: mesh: --dp 3 x --pq 1 x --pkv 1 = 3 ranks expected, found 4 MPI ranks' \
    4 --dp 3
  expect_once '^error: mesh: --seq-len 30 must be a positive multiple of --pq 2 x --pkv 2' \
    4 --seq-len 30 --pq 2 --pkv 2
  expect_once '^error: --seq-len 36: --attention zigzag splits the sequence into 2P = 8 chunks; expected a multiple of 8' \
    4 --seq-len 36 --context 36 --pq 2 --pkv 2 --attention zigzag
  expect_once '^error: --attention ulysses: the 2 heads split over the P = 4 sequence-parallel ranks \(--pq x --pkv\); expected P to divide the head count' \
    4 --pq 2 --pkv 2 --attention ulysses
  expect_once '^error: --attention usp: the 2 heads split over the --pq 4 ranks of a mesh column; expected --pq to divide the head count' \
    4 --pq 4 --attention usp
  expect_once '^error: --a2a-chunks 2: expected a divisor of the 1 heads per rank of --attention ulysses$' \
    2 --pkv 2 --attention ulysses --a2a-chunks 2
  expect_once '^error: --a2a-chunks 2: only ulysses and usp run their heads in chunks, found --attention ring$' \
    2 --pkv 2 --attention ring --a2a-chunks 2
  ;;
chunks)
  # --a2a-chunks: 4 heads of 16, Ulysses on 1x2 (2 heads per rank) and USP on 2x2 (2 per rank of
  # a column, a ring of 2 over the row), two micro-batches per step, validation at steps 4 and 8.
  # 2 chunks give 1 chunk's bits: every logged loss, gradient norm and validation loss, and the
  # model file; Ulysses also with --overlap 0 and on dp 2 with ZeRO-1.
  make_shards
  common+=(--heads 4 --channels 64 --steps 8 --val-data "$work/val_*.bin" --eval-every 4
           --eval-batches 2)
  runs=("ulysses-1x2|2|--pkv 2 --attention ulysses --total-batch-tokens 128"
        "ulysses-plain-1x2|2|--pkv 2 --attention ulysses --overlap 0 --total-batch-tokens 128"
        "ulysses-dp2-1x2|4|--dp 2 --pkv 2 --attention ulysses --zero 1 --total-batch-tokens 256"
        "usp-2x2|4|--pq 2 --pkv 2 --attention usp --total-batch-tokens 128")
  for r in "${runs[@]}"; do
    name=${r%%|*} rest=${r#*|}
    n=${rest%%|*}
    read -r -a extra <<< "${rest#*|}"
    for g in 1 2; do train "$name-$g" "$n" "${extra[@]}" --a2a-chunks "$g" || continue; done
    a=$work/$name-1 b=$work/$name-2
    [ -f "$a/log.jsonl" ] && [ -f "$b/log.jsonl" ] || continue
    steps=$(grep -c '"type":"step"' "$b/log.jsonl")
    [ "$steps" = 8 ] || { fail "$name: $steps steps logged, expected 8"; continue; }
    if ! diff <(grep -o '"step":[0-9]*,"loss":[^,]*\|"grad_norm":[^,]*\|"val_loss":[^,]*' "$a/log.jsonl") \
              <(grep -o '"step":[0-9]*,"loss":[^,]*\|"grad_norm":[^,]*\|"val_loss":[^,]*' "$b/log.jsonl") > /dev/null; then
      fail "$name --a2a-chunks 2: the logged losses or norms differ from 1 chunk's"; continue
    fi
    cmp -s "$a/model_00000008.bin" "$b/model_00000008.bin" ||
      { fail "$name --a2a-chunks 2: the model file differs from 1 chunk's"; continue; }
    grep -q '"a2a-chunks":2' "$b/log.jsonl" ||
      { fail "$name: the log's configuration does not record --a2a-chunks 2"; continue; }
    grep -q '^mesh: .*; attention [a-z]*; heads in 2 chunks, all-to-alls pipelined;' "$b.out" ||
      { fail "$name: the mesh line does not name the chunks"; continue; }
    echo "ok   $name --a2a-chunks 2: the same losses, norms, validation losses and model as 1 chunk"
  done
  ;;
consistency)
  # Two ranks launched as two app contexts (MPMD: mpirun -np 1 PROG ARGS : -np 1 PROG ARGS2),
  # each in a working directory of its own, so that the same relative --train-data or --init-from
  # resolves to different files. A difference in an option, in the shard set, in the model file:
  # the job fails with one line naming the item and both values; identical ones train.
  make_shards
  abs=$(realpath "$work")
  prog=$(realpath "$TRAIN")
  mkdir -p "$abs/a" "$abs/b" "$abs/c"
  for d in a b c; do cp "$work"/train_00[01].bin "$abs/$d/"; done
  rm "$abs/b/train_001.bin"                                        # b: one shard fewer
  head -c $(($(stat -c %s "$abs/c/train_001.bin") - 64)) "$abs/c/train_001.bin" > "$abs/c/t.bin"
  mv "$abs/c/t.bin" "$abs/c/train_001.bin"                         # c: a shorter shard
  "$PY" -c 'import struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); struct.pack_into("<i", b, 8, (len(b) - 1024) // 2)
open(p, "wb").write(b)' "$abs/c/train_001.bin"
  # Model files: 2 layers (fp32 and bf16, the same shape) and 1 layer.
  timeout 120 "$REF_TRAIN" "${common[@]}" --steps 1 --train-data "$abs/a/train_*.bin" --out-dir "$abs/m2" > "$abs/m2.out" 2>&1
  timeout 120 "$REF_TRAIN" "${common[@]}" --steps 1 --train-data "$abs/a/train_*.bin" --out-dir "$abs/m2h" --save-bf16 > "$abs/m2h.out" 2>&1
  timeout 120 "$REF_TRAIN" "${common[@]}" --steps 1 --train-data "$abs/a/train_*.bin" --out-dir "$abs/m1" --layers 1 > "$abs/m1.out" 2>&1
  cp "$abs/m2/model_00000001.bin" "$abs/a/model.bin"
  cp "$abs/m2h/model_00000001.bin" "$abs/b/model.bin"
  cp "$abs/m1/model_00000001.bin" "$abs/c/model.bin"
  base=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512 --val-data ""
        --tokenizer "" --batch 2 --seq-len 32 --steps 3 --lr 1e-2 --warmup 2 --eval-every 0
        --sample-length 0 --quiet --peak-gflops 1 --pkv 2 "${test_args[@]}")
  from=(--preset tiny --context 32 --val-data "" --tokenizer "" --batch 2 --seq-len 32 --steps 3
        --eval-every 0 --sample-length 0 --quiet --peak-gflops 1 --pkv 2 --init-from model.bin
        --train-data "train_*.bin" "${test_args[@]}")
  # mpmd NAME DIR0 DIR1 ARGS0 -- ARGS1: rank 0 in DIR0 with ARGS0, rank 1 in DIR1 with ARGS1.
  mpmd() {
    local name=$1 d0=$2 d1=$3 a0=() a1=()
    shift 3
    while [ "$1" != -- ]; do a0+=("$1"); shift; done
    shift
    a1=("$@")
    timeout 60 bash tests/mpirun.sh 1 --wdir "$abs/$d0" "$prog" "${a0[@]}" --out-dir "$abs/o_$name" : \
      -np 1 --wdir "$abs/$d1" "$prog" "${a1[@]}" --out-dir "$abs/o_$name" > "$abs/$name.out" 2>&1
  }
  # refused NAME PATTERN DIR0 DIR1 ARGS0 -- ARGS1: the job fails (exit 1..123) with PATTERN said
  # once, no step trained.
  refused() {
    local name=$1 pattern=$2
    shift 2
    mpmd "$name" "$@"
    local rc=$? n
    n=$(grep -cE -- "$pattern" "$abs/$name.out")
    if [ "$rc" -ge 1 ] && [ "$rc" -le 123 ] && [ "$n" = 1 ] && ! grep -q '"type":"step"' "$abs/o_$name/log.jsonl" 2> /dev/null; then
      echo "ok   $name: exit $rc: $(grep -E -- "$pattern" "$abs/$name.out" | sed "s|$abs/||g")"
    else
      fail "$name: exit $rc, '$pattern' printed $n times, expected once:"; tail -n 8 "$abs/$name.out"
    fi
  }
  E='^error: configuration differs across ranks: '
  refused option "$E--seq-len is 32 on rank 0 but 16 on rank 1\$" a a \
    "${base[@]}" --train-data "$abs/a/train_*.bin" -- "${base[@]}" --train-data "$abs/a/train_*.bin" --seq-len 16
  refused option-last "${E}--spike-window is 50 on rank 0 but 40 on rank 1\$" a a \
    "${base[@]}" --train-data "$abs/a/train_*.bin" -- "${base[@]}" --train-data "$abs/a/train_*.bin" --spike-window 40
  refused globs "$E--train-data is $abs/a/train_\\*\\.bin on rank 0 but $abs/a/train_000\\.bin on rank 1\$" a a \
    "${base[@]}" --train-data "$abs/a/train_*.bin" -- "${base[@]}" --train-data "$abs/a/train_000.bin"
  refused shard-count "$E--train-data \\(number of files\\) is 2 on rank 0 but 1 on rank 1\$" a b \
    "${base[@]}" --train-data "train_*.bin" -- "${base[@]}" --train-data "train_*.bin"
  refused shard-size "$E--train-data \\(file 2\\) is train_001\\.bin \\($(stat -c %s "$abs/a/train_001.bin") bytes\\) on rank 0 but train_001\\.bin \\($(stat -c %s "$abs/c/train_001.bin") bytes\\) on rank 1\$" a c \
    "${base[@]}" --train-data "train_*.bin" -- "${base[@]}" --train-data "train_*.bin"
  refused model-shape "${E}the model shape is L=2 C=32 NH=2 V=512 \\(padded 512\\) context=32 on rank 0 but L=1 C=32 NH=2 V=512 \\(padded 512\\) context=32 on rank 1\$" a c \
    "${from[@]}" -- "${from[@]}"
  refused model-file "$E--init-from \\(file\\) is model\\.bin \\([0-9]+ bytes\\) on rank 0 but model\\.bin \\([0-9]+ bytes\\) on rank 1\$" a b \
    "${from[@]}" -- "${from[@]}"
  # The same configuration on both (--rank/--local-rank may differ: they are not compared).
  mpmd same a a "${base[@]}" --train-data "$abs/a/train_*.bin" --local-rank 0 -- \
    "${base[@]}" --train-data "$abs/a/train_*.bin" --local-rank 1
  rc=$?
  if [ "$rc" = 0 ] && [ "$(grep -c '"type":"step"' "$abs/o_same/log.jsonl")" = 3 ]; then
    echo "ok   same: identical configurations (but --local-rank) train 3 steps"
  else
    fail "same: exit $rc"; tail -n 8 "$abs/same.out"
  fi
  mpmd same-files a a "${from[@]}" -- "${from[@]}"
  rc=$?
  if [ "$rc" = 0 ] && [ "$(grep -c '"type":"step"' "$abs/o_same-files/log.jsonl")" = 3 ]; then
    echo "ok   same-files: the same relative model file and shards in one directory train 3 steps"
  else
    fail "same-files: exit $rc"; tail -n 8 "$abs/same-files.out"
  fi
  ;;
schedules)
  parse_mesh "${2:?usage: tests/test_dist_train.sh schedules MESH (e.g. 2x3, dp2-2x2)}"
  make_shards
  train ref 1 || exit 1
  # 0.01 MiB buckets: about one per layer of the tiny model, so several reductions overlap.
  train 2d "$np" "${mesh_args[@]}" --attention 2d --grad-bucket-mb 0
  train 2d-keep-zero "$np" "${mesh_args[@]}" --attention 2d --keep-kv --zero 1
  train ring-zero "$np" "${mesh_args[@]}" --attention ring --zero 1
  train striped "$np" "${mesh_args[@]}" --attention striped --grad-bucket-mb 0.01
  train zigzag "$np" "${mesh_args[@]}" --attention zigzag --zero 1
  train 2d-overlap "$np" "${mesh_args[@]}" --attention 2d-overlap --grad-bucket-mb 0.01 \
    --trace "$work/2d-overlap.json"
  train 2d-overlap-zero "$np" "${mesh_args[@]}" --attention 2d-overlap --zero 1
  # Ulysses where the model's 2 heads split over the pq x pkv ranks.
  [ $((2 % (pq * pkv))) = 0 ] && train ulysses-zero "$np" "${mesh_args[@]}" --attention ulysses --zero 1
  # USP where they split over the pq ranks of a column.
  [ $((2 % pq)) = 0 ] && train usp "$np" "${mesh_args[@]}" --attention usp --grad-bucket-mb 0.01
  for n in 2d 2d-keep-zero ring-zero striped zigzag 2d-overlap 2d-overlap-zero ulysses-zero usp; do
    [ -f "$work/$n/log.jsonl" ] && compare "$n" ref
  done
  # The overlapped schedule against the plain one (same mesh, same transport).
  echo "  2d-overlap against 2d:"
  [ -f "$work/2d-overlap/log.jsonl" ] && [ -f "$work/2d/log.jsonl" ] && compare 2d-overlap 2d
  check_trace 2d-overlap "$np"
  # PLAIN=1: every schedule against its plain version (--overlap 0: each transfer waited for as
  # it starts, gradients reduced after backward).
  if [ "${PLAIN:-0}" = 1 ]; then
    for a in 2d-overlap striped; do
      train "$a-plain" "$np" "${mesh_args[@]}" --attention "$a" --overlap 0
    done
    echo "  overlapped against plain:"
    [ -f "$work/2d-overlap-plain/log.jsonl" ] && compare 2d-overlap 2d-overlap-plain
    [ -f "$work/striped-plain/log.jsonl" ] && compare striped striped-plain
  fi
  ;;
recompute)
  parse_mesh "${2:?usage: tests/test_dist_train.sh recompute MESH (e.g. 1x1, 2x2, dp2-1x2)}"
  make_shards
  # Two micro-batches per step; a validation pass at steps 4 and 8; checkpoints at the end.
  common+=(--steps 8 --total-batch-tokens $((192 * dp)) --val-data "$work/val_*.bin"
           --eval-every 4 --eval-batches 2)
  runs=("2d|--attention 2d --grad-bucket-mb 0.01" "2d-keep-zero|--attention 2d --keep-kv --zero 1"
        "ring-zero|--attention ring --zero 1" "zigzag|--attention zigzag"
        "2d-overlap|--attention 2d-overlap --grad-bucket-mb 0.01"
        "zigzag-rope|--attention zigzag --position-embedding rope")
  # (rope: the recomputed qkv is rotated again at its positions)
  [ "$np" = 1 ] && runs=("one|" "one-zero|--zero 1" "one-rope|--position-embedding rope")
  # The first run also on 3 layers with layer 0 alone recomputed (--recompute-num-layers 1: layers
  # 1 and 2 keep everything, each its own; a mode/1 is compared with none/1, none on 3 layers).
  for r in "${runs[@]}"; do
    name=${r%%|*}
    read -r -a extra <<< "${r#*|}"
    modes=(selective full)
    [ "$r" = "${runs[0]}" ] && modes+=(selective/1 full/1)
    for mode in none "${modes[@]}" $([ "$r" = "${runs[0]}" ] && echo none/1); do
      layers=()
      [ "$mode" != "${mode%/*}" ] && layers=(--layers 3 --recompute-num-layers "${mode#*/}")
      [ "$mode" = none/1 ] && layers=(--layers 3)
      train "$name-${mode/\//-}" "$np" "${mesh_args[@]}" "${extra[@]}" --recompute "${mode%/*}" \
        "${layers[@]}" || continue
    done
    for mode in "${modes[@]}"; do
      a=$work/$name-none b=$work/$name-${mode/\//-}
      [ "$mode" != "${mode%/*}" ] && a=$work/$name-none-1
      [ -f "$a/log.jsonl" ] && [ -f "$b/log.jsonl" ] || continue
      if ! diff <(grep -o '"step":[0-9]*,"loss":[^,]*\|"grad_norm":[^,]*\|"val_loss":[^,]*' "$a/log.jsonl") \
                <(grep -o '"step":[0-9]*,"loss":[^,]*\|"grad_norm":[^,]*\|"val_loss":[^,]*' "$b/log.jsonl") > /dev/null; then
        fail "$name --recompute $mode: the logged losses or norms differ from none's"; continue
      fi
      n=$(grep -c '"type":"step"' "$b/log.jsonl")
      [ "$n" = 8 ] || { fail "$name --recompute $mode: $n steps logged, expected 8"; continue; }
      cmp -s "$a/model_00000008.bin" "$b/model_00000008.bin" ||
        { fail "$name --recompute $mode: the model file differs from none's"; continue; }
      "$PY" - "$a" "$b" <<'EOF' || { fail "$name --recompute $mode: the optimizer state differs from none's"; continue; }
import glob, os, struct, sys
# A state file: 1024-byte header of int32 fields (the configuration's byte count at index 46),
# the configuration's JSON text (which names --recompute), then the data loader's set positions,
# weights and AdamW moments.
def parts(path):
    data = open(path, "rb").read()
    header = struct.unpack("<256i", data[:1024])
    return header[:46], data[1024 + header[46]:]
names = sorted(os.path.basename(p) for p in glob.glob(sys.argv[1] + "/state_*.bin"))
if not names: sys.exit(1)
for n in names:
    if parts(sys.argv[1] + "/" + n) != parts(sys.argv[2] + "/" + n): sys.exit(1)
EOF
      echo "ok   $name --recompute $mode: the same losses, norms, validation losses, model and state as none"
    done
  done
  ;;
seeds)
  parse_mesh "${2:?usage: tests/test_dist_train.sh seeds MESH}"
  make_shards
  train ref 1 || exit 1
  for seed in 1 2 3; do
    CUDA_HOST_SCHEDULE_SEED=$seed train "seed$seed" "$np" "${mesh_args[@]}" \
      --attention 2d-overlap --grad-bucket-mb 0.01
    [ -f "$work/seed$seed/log.jsonl" ] && compare "seed$seed" ref
  done
  # Results must not depend on the interleaving: the logged losses and norms are identical.
  for seed in 2 3; do
    if [ -f "$work/seed$seed/log.jsonl" ] && [ -f "$work/seed1/log.jsonl" ]; then
      if diff <(grep -o '"loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$work/seed1/log.jsonl") \
              <(grep -o '"loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$work/seed$seed/log.jsonl") > /dev/null; then
        echo "ok   seed $seed: losses and norms identical to seed 1's"
      else
        fail "seed $seed: losses or norms differ from seed 1's"
      fi
    fi
  done
  ;;
*)
  echo "usage: tests/test_dist_train.sh curves|banded|documents|rope|qk-norm|resume|refuse|kill|stop|mesh|consistency|chunks|schedules MESH|seeds MESH" >&2
  exit 2
  ;;
esac
if [ "$failures" -ne 0 ]; then echo "test_dist_train $part: $failures failure(s)"; exit 1; fi
echo "test_dist_train $part: ok"
