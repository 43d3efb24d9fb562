#!/usr/bin/env bash
# `make fuzz`: runs each libFuzzer target ($BUILD/fuzz/fuzz_TARGET) for SECONDS from its seed
# corpus and regressions, then writes and prints $BUILD/fuzz/summary.csv (target, executions,
# coverage, findings). Exit status non-zero when any target found a crash, leak, timeout or
# out-of-memory input; those inputs are left in $BUILD/fuzz/artifacts/TARGET/.
#   run_fuzz.sh BUILD SECONDS TARGET...
set -uo pipefail
# The targets write every input to a scratch file (and some save it again, with fsync): on
# tmpfs when there is one.
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm
cd "$(dirname "$0")/../.."
build=$1
seconds=$2
shift 2
out=$build/fuzz
summary=$out/summary.csv
echo "target,seconds,executions,execs_per_second,coverage,features,corpus_files,peak_rss_mb,findings,status" > "$summary"
failed=()
for t in "$@"; do
  corpus=$out/corpus/$t          # the seeds plus what this machine's runs added
  artifacts=$out/artifacts/$t
  log=$out/$t.log
  mkdir -p "$corpus" "$artifacts"
  rm -f "$artifacts"/*
  for seeds in "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t"; do
    [ -d "$seeds" ] && cp -p "$seeds"/* "$corpus"/ 2>/dev/null
  done
  # Limits: an input of a few KB that makes a reader allocate more than 64 MB (a size taken on
  # trust from a header) or run 10 s is a finding; -close_fd_mask=3: the readers' own output
  # (help text, error lines) is not the fuzzer's (libFuzzer keeps its reports).
  echo "fuzz: $t for ${seconds}s ($log)"
  "$out/fuzz_$t" "$corpus" -max_total_time="$seconds" -print_final_stats=1 \
    -rss_limit_mb=1024 -malloc_limit_mb=64 -timeout=10 -max_len=16384 -close_fd_mask=3 \
    -artifact_prefix="$artifacts/" > "$log" 2>&1
  rc=$?
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
  execs=$(stat number_of_executed_units)
  rate=$(stat average_exec_per_sec)
  rss=$(stat peak_rss_mb)
  # The last status line, e.g. "#123456 DONE cov: 412 ft: 1290 corp: 57/9Kb ...".
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
  files=$(find "$corpus" -type f | wc -l)
  findings=$(find "$artifacts" -type f | wc -l)
  status=ok
  if [ "$rc" -ne 0 ] || [ "$findings" -gt 0 ]; then
    status=FAILED
    failed+=("$t")
  fi
  echo "$t,$seconds,${execs:-0},${rate:-0},${cov:-0},${ft:-0},$files,${rss:-0},$findings,$status" >> "$summary"
  if [ "$status" = FAILED ]; then
    grep -E 'ERROR|SUMMARY|runtime error|fuzz: |Test unit written' "$log" | head -n 20 | sed 's/^/    | /'
  fi
done
column -s, -t < "$summary"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}: fix the reader, then add the input from $out/artifacts/TARGET/ to tests/fuzz/regressions/TARGET/" >&2
  exit 1
fi
