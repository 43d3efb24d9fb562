#!/usr/bin/env bash
# The CUDA trainer against the CPU trainer, and bit-exact resume, on a tiny model that learns: the
# checks tests/test_cuda_train.sh runs with the CUDA sources on the host runtime (`make test`) and
# tools/gpu_check.sh runs on a GPU. Needs bash and coreutils only (no Python: GPU boxes may lack it).
#
#   trainer_checks.sh vs-cpu --cpu PROG --test PROG --backend NAME --compare PROG --loss-tol X
#                            --norm-tol Y --data DIR --work DIR [--steps N]
#       Both trainers on the same data and options; the test trainer must say it runs on backend
#       NAME (e.g. cuda-bf16), and every step's loss and gradient norm and every validation loss
#       must agree within the relative bounds (PROG compare: build/tools/compare_logs).
#   trainer_checks.sh resume --test PROG --data DIR --work DIR [--steps N]
#       N steps straight against N/2 steps, --exit-after, --resume and the rest: identical step
#       losses and norms, eval and sample lines, and byte-identical final model files.
#   trainer_checks.sh dist --cpu PROG --test PROG --backend NAME --compare PROG --loss-tol X
#                          --norm-tol Y --data DIR --work DIR --np N --mesh "ARGS"
#                          [--test-args "ARGS"] [--mpirun "CMD"] [--steps N] [--seq-len T]
#       The test trainer on N processes started by CMD N (default: mpirun -np N) with the mesh
#       options ARGS (--pq/--pkv/--attention/--zero/--keep-kv; dp 1) and --test-args (e.g.
#       --comm mpi-staged), against the single-process reference (--cpu, e.g. the CPU trainer):
#       compared as vs-cpu does; the test run must also name its transport, and its summary line
#       (the forward / backward / optimizer split of a step) is printed, and its "ring steps:"
#       line where a window stops the ring early. --mpirun none: the test
#       trainer runs alone, without a launcher (one rank).
#   Every mode: --model "ARGS" adds model and batch options after the defaults below (e.g.
#   "--channels 256 --heads 2 --batch 1"; the context follows --seq-len). The reference run of
#   vs-cpu and dist is reused when WORK holds one made with the same options.
#
# DIR holds t_train_*.bin and t_val_*.bin (tools/stream_shards.py: a noisy counting stream over 64
# of 512 tokens). Runs learn fast (lr 1e-2, no warmup), so a wrong gradient or update shows in the
# losses within a few steps; sampling is on, so the sampler's logits path runs too. Prints one
# "ok"/"FAIL" line per check and exits non-zero if any failed; files stay in WORK.
set -u
mode=${1:-}; shift || true
cpu="" test="" backend="" compare="" loss_tol="" norm_tol="" data="" work="" steps=10
np=1 mesh="" test_args="" mpirun="mpirun -np" seq_len=16 model=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) cpu=$2 ;; --test) test=$2 ;; --backend) backend=$2 ;; --compare) compare=$2 ;;
    --loss-tol) loss_tol=$2 ;; --norm-tol) norm_tol=$2 ;; --data) data=$2 ;; --work) work=$2 ;;
    --steps) steps=$2 ;; --np) np=$2 ;; --mesh) mesh=$2 ;; --test-args) test_args=$2 ;;
    --mpirun) mpirun=$2 ;; --seq-len) seq_len=$2 ;; --model) model=$2 ;;
    *) echo "trainer_checks.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2 || { echo "trainer_checks.sh: $1 needs a value" >&2; exit 2; }
done
usage() { echo "usage: trainer_checks.sh vs-cpu|resume|dist ... (see the header of $0)" >&2; exit 2; }
[ -n "$test" ] && [ -n "$data" ] && [ -n "$work" ] || usage
case "$steps" in ''|*[!0-9]*) echo "trainer_checks.sh: --steps: expected an even number >= 4, found '$steps'" >&2; exit 2 ;; esac
[ "$steps" -ge 4 ] && [ $((steps % 2)) -eq 0 ] ||
  { echo "trainer_checks.sh: --steps: expected an even number >= 4, found $steps" >&2; exit 2; }
ls "$data"/t_train_*.bin > /dev/null 2>&1 ||
  { echo "trainer_checks.sh: --data $data: expected t_train_*.bin and t_val_*.bin (tools/stream_shards.py)" >&2; exit 2; }
mkdir -p "$work"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE
export OMPI_MCA_ess_singleton_isolated=${OMPI_MCA_ess_singleton_isolated:-1}
failures=0
half=$((steps / 2))

ok() { echo "  ok    $*"; }
fail() { echo "  FAIL  $*"; failures=$((failures + 1)); }

context=$((seq_len > 32 ? seq_len : 32))
# shellcheck disable=SC2206
ARGS=(--preset tiny --layers 2 --channels 32 --heads 2 --context "$context" --vocab 512 --batch 2
      --seq-len "$seq_len" --steps "$steps" --eval-every "$half" --eval-batches 4 --lr 1e-2 --warmup 0
      --sample-length 4 --sample-every "$half" --quiet --peak-gflops 1
      --train-data "$data/t_train_*.bin" --val-data "$data/t_val_*.bin" --tokenizer "" $model)

# run NAME PROGRAM ARGS...: output in $work/NAME.out, exit status checked. PROGRAM may be a
# launcher (mpirun, bash) followed by the trainer.
run() {
  local name=$1 prog=$2; shift 2
  if ! command -v "$prog" > /dev/null; then fail "$name: $prog is not an executable"; return 1; fi
  rm -rf "${work:?}/$name"
  timeout 600 "$prog" "$@" > "$work/$name.out" 2>&1 < /dev/null
  local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit status $rc"; tail -n 5 "$work/$name.out" | sed 's/^/        | /'; return 1; fi
}

# The reference run NAME of the CPU trainer, unless WORK holds one with the same options.
reference() {
  local name=$1
  [ -f "$work/$name/log.jsonl" ] && [ "$(cat "$work/$name.args" 2> /dev/null)" = "${ARGS[*]}" ] && return 0
  rm -f "$work/$name.args"
  run "$name" "$cpu" "${ARGS[@]}" --out-dir "$work/$name" || return
  printf '%s' "${ARGS[*]}" > "$work/$name.args"
}

vs_cpu() {
  [ -n "$cpu" ] && [ -n "$backend" ] && [ -n "$compare" ] && [ -n "$loss_tol" ] && [ -n "$norm_tol" ] || usage
  reference cpu || return
  run test "$test" "${ARGS[@]}" --out-dir "$work/test" || return
  grep -q "backend $backend\$" "$work/test.out" && ok "the run says: backend $backend" ||
    fail "the run does not print its backend ($backend)"
  local report rc
  report=$("$compare" "$work/cpu/log.jsonl" "$work/test/log.jsonl" --loss-tol "$loss_tol" \
           --norm-tol "$norm_tol" --min-entries $((2 * steps + 2)))
  rc=$?
  printf '%s\n' "$report" | sed 's/^/        /'
  [ "$rc" -eq 0 ] && ok "$backend: $steps steps' losses, gradient norms and validation losses against the CPU trainer" ||
    fail "$backend: losses or gradient norms differ from the CPU trainer's beyond the bounds"
}

# The same comparison with both trainers on np processes (word splitting of the option strings
# is intended: they hold several options).
dist() {
  [ -n "$cpu" ] && [ -n "$backend" ] && [ -n "$compare" ] && [ -n "$loss_tol" ] && [ -n "$norm_tol" ] || usage
  reference ref || return
  # shellcheck disable=SC2086
  if [ "$mpirun" = none ]; then
    run test "$test" "${ARGS[@]}" $mesh $test_args --out-dir "$work/test" || return
  else
    run test $mpirun "$np" "$test" "${ARGS[@]}" $mesh $test_args --out-dir "$work/test" || return
  fi
  grep -q "backend $backend\$" "$work/test.out" && ok "the run says: backend $backend" ||
    fail "the run does not print its backend ($backend)"
  local transport
  transport=$(grep -m1 -o 'transport [a-z-]*' "$work/test.out")
  [ -n "$transport" ] && ok "the run says: $transport" || fail "the run does not name its transport"
  local report rc
  report=$("$compare" "$work/ref/log.jsonl" "$work/test/log.jsonl" --loss-tol "$loss_tol" \
           --norm-tol "$norm_tol" --min-entries $((2 * steps + 2)))
  rc=$?
  printf '%s\n' "$report" | sed 's/^/        /'
  grep -m1 '^summary:' "$work/test.out" | sed 's/^/        /'
  grep -m1 '^ring steps:' "$work/test.out" | sed 's/^/        /'   # a window's early stop
  [ "$rc" -eq 0 ] && ok "$backend, $np ranks ($mesh $test_args): $steps steps against the reference" ||
    fail "$backend, $np ranks ($mesh $test_args): losses or gradient norms differ beyond the bounds"
}

resume() {
  run straight "$test" "${ARGS[@]}" --out-dir "$work/straight" || return
  run first "$test" "${ARGS[@]}" --out-dir "$work/split" --exit-after "$half" || return
  grep -q "^stopping early at step $half " "$work/first.out" && ok "first: stopped early at step $half" ||
    fail "first: no early stop at step $half"
  # run removes the output directory of its name: the second half writes into split/ by hand.
  timeout 600 "$test" "${ARGS[@]}" --out-dir "$work/split" --resume > "$work/second.out" 2>&1 < /dev/null ||
    { fail "second: exit status $?"; tail -n 5 "$work/second.out" | sed 's/^/        | /'; return; }
  grep -q "^resume: continuing from step $half in " "$work/second.out" && ok "second: resumed from step $half" ||
    fail "second: did not resume from step $half"
  # Everything but the timings, as the log wrote it.
  local a b final
  a=$(grep -E '"type":"step"' "$work/straight/log.jsonl" | sed -E 's/,"ms".*//')
  b=$(grep -E '"type":"step"' "$work/split/log.jsonl" | sed -E 's/,"ms".*//')
  [ "$(printf '%s\n' "$a" | wc -l)" -eq "$steps" ] && [ "$a" = "$b" ] &&
    ok "$steps step losses and norms identical (straight vs stop + resume)" ||
    { fail "step losses differ (straight vs stop + resume)"; diff <(echo "$a") <(echo "$b") | head -n 12; }
  # (without the evaluation's time, which differs from run to run)
  a=$(grep -E '"type":"(eval|sample)"' "$work/straight/log.jsonl" | sed -E 's/,"seconds":[0-9.]+//')
  b=$(grep -E '"type":"(eval|sample)"' "$work/split/log.jsonl" | sed -E 's/,"seconds":[0-9.]+//')
  [ -n "$a" ] && [ "$a" = "$b" ] && ok "eval and sample lines identical" || fail "eval or sample lines differ"
  final=$(printf 'model_%08d.bin' "$steps")
  cmp -s "$work/straight/$final" "$work/split/$final" &&
    ok "final model files byte-identical" || fail "final model files differ"
}

case "$mode" in
  vs-cpu) vs_cpu ;;
  dist) dist ;;
  resume) resume ;;
  *) usage ;;
esac
[ "$failures" -eq 0 ] && { echo "trainer_checks $mode: passed"; exit 0; }
echo "trainer_checks $mode: $failures failure(s); files kept in $work"
exit 1
