#!/usr/bin/env bash
# Runs the named test suites ($SUITES_DIR/NAME.list, default tests/suites) and ends with "N passed,
# N failed".
# A suite file has one test per line, "name: shell command" (run from the repository root);
# blank lines and lines starting with # are ignored. Exit status is non-zero on any failure.
# SUITE:PATTERN,... runs only the tests of SUITE whose name matches one of the shell patterns
# (e.g. dist-model:mesh-*,train-curves); a pattern starting with ! leaves out the tests it matches
# (train:!flags,!rope*: every test of train but those; with patterns of both kinds, those the
# others select, less these). A pattern that matches no test is a failure.
# TEST_JOBS suites run at a time (default 1; make test gives one per core). A suite's tests always
# run one after another in the file's order, so a test may read what an earlier one of its suite
# wrote; suites share nothing but the programs. Each test prints its line when it ends; the five
# slowest tests and the last 30 lines of each failed test's log come at the end.
set -u
cd "$(dirname "$0")/.."
# BUILD: the build directory whose programs the suites run (make test-sanitize: build-sanitize).
export BUILD=${BUILD:-build}
suites_dir=${SUITES_DIR:-tests/suites}
logdir=$BUILD/test-logs
mkdir -p "$logdir" "$BUILD/tmp"
jobs=${TEST_JOBS:-1}
case "$jobs" in ''|*[!0-9]*|0)
  echo "run_suites: TEST_JOBS: expected a whole number of suites at a time above 0, found '$jobs'" >&2; exit 2 ;;
esac
# Suites side by side share the cores: OpenMP threads that spin while they wait would take the
# time of the other suites' processes.
[ "$jobs" -gt 1 ] && export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# Where OpenBLAS does not recognise the CPU, the programs restart themselves with the kernels they
# want and say so in a "note:" line first (model/blas_kernels.h): the suites run with those kernels
# set, so that no test meets the note where it checks a program's first line; train/blas-restart
# checks the restart itself.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x "$BUILD/tests/blas_coretype" ]; then
  coretype=$("$BUILD/tests/blas_coretype")
  if [ -n "$coretype" ]; then
    export OPENBLAS_CORETYPE=$coretype
    echo "run_suites: OpenBLAS does not recognise this CPU: OPENBLAS_CORETYPE=$coretype, the kernels the programs restart into"
  fi
fi
results=$(mktemp -d "$BUILD/tmp/run_suites.XXXXXX") || exit 2
# Each suite runs with a TMPDIR of its own. Open MPI keeps a process's session directory there, and
# every singleton (a program started without mpirun) uses the same path in it and removes it as
# it ends: a singleton of one suite starting while another suite's ends could lose its directory
# (MPI_Init_thread failing "on a NULL communicator", seen once in a CI run). Short and under /tmp:
# the directory holds Unix sockets, whose paths have a length limit; and under 16 characters with
# the suite's number (/tmp/sXXXXXX/N): on one build machine (kernel 6.18, host name "vm") a TMPDIR
# of 16 or more made LeakSanitizer's tracer crash at exit in the 16-rank jobs of make
# test-sanitize, whatever the program (15 or fewer: never, in a dozen runs).
tmp_base=$(mktemp -d /tmp/sXXXXXX) || exit 2
trap 'rm -rf "$results" "$tmp_base"' EXIT
trap 'kill $(jobs -p) 2>/dev/null; exit 130' INT TERM

# run_suite ARG OUT: runs ARG's tests (SUITE or SUITE:PATTERN,...), one line per outcome in OUT:
# "PASS SECONDS suite/name", "FAIL SECONDS suite/name", or "FAIL - <what> (why)" for a missing
# suite or an unmatched pattern.
run_suite() {
  local arg=$1 out=$2 suite=${1%%:*} patterns=() matched=() line name cmd log start secs status p selected
  [ "$suite" = "$arg" ] || IFS=, read -r -a patterns <<< "${arg#*:}"
  local list="$suites_dir/$suite.list"
  if [ ! -f "$list" ]; then
    echo "run_suites: no suite file $list" >&2; echo "FAIL - $suite (missing)" >> "$out"; return
  fi
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in ''|'#'*) continue ;; esac
    name="${line%%:*}"; cmd="${line#*:}"
    if [ ${#patterns[@]} -gt 0 ]; then
      # Selected by any pattern without !, or by none when there is none; then left out by any !.
      selected=1
      for p in "${patterns[@]}"; do [ "${p#!}" = "$p" ] && selected=0 && break; done
      for p in "${patterns[@]}"; do
        [ "${p#!}" = "$p" ] || continue
        case "$name" in $p) selected=1; matched+=("$p") ;; esac
      done
      for p in "${patterns[@]}"; do
        [ "${p#!}" != "$p" ] || continue
        case "$name" in ${p#!}) selected=0; matched+=("$p") ;; esac
      done
      [ $selected = 1 ] || continue
    fi
    log="$logdir/$suite.$name.log"
    start=$EPOCHREALTIME
    if bash -c "$cmd" > "$log" 2>&1 < /dev/null; then status=PASS; else status=FAIL; fi
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
    printf '%-4s %-12s %-40s %6.1fs\n' "$status" "$suite" "$name" "$secs"
    echo "$status $secs $suite/$name" >> "$out"
  done < "$list"
  for p in "${patterns[@]}"; do
    case " ${matched[*]} " in *" $p "*) ;; *)
      echo "run_suites: $list: no test matches '$p'" >&2; echo "FAIL - $suite:$p (no such test)" >> "$out" ;;
    esac
  done
}

i=0
for arg in "$@"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  : > "$results/$i"
  mkdir -p "$tmp_base/$i" || exit 2
  (export TMPDIR="$tmp_base/$i"; run_suite "$arg" "$results/$i") &
  i=$((i + 1))
done
wait

# The outcomes in the order of the arguments, whatever order the suites ended in.
passed=0; failed=0; failures=()
for ((k = 0; k < i; k++)); do
  while read -r status secs what; do
    if [ "$status" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$what"); fi
  done < "$results/$k"
done
# The slowest tests (what to shorten when the suites grow past their time).
slowest=$(cat "$results"/* | awk '$2 != "-" { print $2, $3 }' | sort -rn | head -n 5 |
          awk '{ printf "%s%s %.1fs", (NR > 1 ? ", " : ""), $2, $1 }')
[ -n "$slowest" ] && echo "slowest: $slowest"
for what in "${failures[@]}"; do
  case "$what" in *' ('*) continue ;; esac   # a missing suite or unmatched pattern: no log
  log="$logdir/${what%%/*}.${what#*/}.log"
  echo "FAIL $what: the last 30 lines of $log"
  tail -n 30 "$log" | sed 's/^/    | /'
done
[ ${#failures[@]} -gt 0 ] && printf 'failed: %s\n' "${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
