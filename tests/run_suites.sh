#!/usr/bin/env bash
# Runs the named test suites (tests/suites/NAME.list) and ends with "N passed, N failed".
# A suite file has one test per line, "name: shell command" (run from the repository root);
# blank lines and lines starting with # are ignored. Exit status is non-zero on any failure.
# SUITE:PATTERN,... runs only the tests of SUITE whose name matches one of the shell patterns
# (e.g. dist-model:mesh-*,train-curves); a pattern that matches no test is a failure.
set -u
cd "$(dirname "$0")/.."
# BUILD: the build directory whose programs the suites run (make test-sanitize: build-sanitize).
export BUILD=${BUILD:-build}
logdir=$BUILD/test-logs
mkdir -p "$logdir"
passed=0; failed=0; failures=()
for arg in "$@"; do
  suite=${arg%%:*}
  patterns=()
  [ "$suite" = "$arg" ] || IFS=, read -r -a patterns <<< "${arg#*:}"
  matched=()
  list="tests/suites/$suite.list"
  if [ ! -f "$list" ]; then
    echo "run_suites: no suite file $list" >&2; failed=$((failed + 1)); failures+=("$suite (missing)"); continue
  fi
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in ''|'#'*) continue ;; esac
    name="${line%%:*}"; cmd="${line#*:}"
    if [ ${#patterns[@]} -gt 0 ]; then
      selected=0
      for p in "${patterns[@]}"; do
        case "$name" in $p) selected=1; matched+=("$p") ;; esac
      done
      [ $selected = 1 ] || continue
    fi
    log="$logdir/$suite.$name.log"
    start=$EPOCHREALTIME
    if bash -c "$cmd" > "$log" 2>&1 < /dev/null; then
      status=PASS; passed=$((passed + 1))
    else
      status=FAIL; failed=$((failed + 1)); failures+=("$suite/$name")
    fi
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
    printf '%-4s %-12s %-40s %6.1fs\n' "$status" "$suite" "$name" "$secs"
    if [ "$status" = FAIL ]; then sed 's/^/    | /' "$log" | tail -n 30; fi
  done < "$list"
  for p in "${patterns[@]}"; do
    case " ${matched[*]} " in *" $p "*) ;; *)
      echo "run_suites: $list: no test matches '$p'" >&2; failed=$((failed + 1)); failures+=("$suite:$p (no such test)") ;;
    esac
  done
done
[ ${#failures[@]} -gt 0 ] && printf 'failed: %s\n' "${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
