#!/usr/bin/env bash
# tests/run_suites.sh on suites of its own: two suites side by side (TEST_JOBS=2) keep each one's
# order (a test reads what the one before it wrote), every outcome is counted once, a failure's
# log tail and the five slowest tests come at the end, a failure sets the exit status, a missing
# suite or unmatched pattern fails, a ! pattern leaves tests out, and a bad TEST_JOBS is refused in
# one line.
set -u
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
mkdir -p "$BUILD/tmp"
W=$(mktemp -d "$BUILD/tmp/run-suites.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
# Suite a: four tests in order, each needing the file of the one before, slowed so that suite b
# runs beside it. Suite b: one test fails with a marker in its log, one passes.
{ echo "# suite a"
  echo "one: sleep 0.5 && echo 1 > $W/a1"
  echo "two: test -f $W/a1 && sleep 0.5 && echo 2 > $W/a2"
  echo "three: test -f $W/a2 && sleep 0.5 && echo 3 > $W/a3"
  echo "four: test -f $W/a3"; } > "$W/sa.list"
{ echo "broken: echo the-marker-line; exit 3"
  echo "fine: true"; } > "$W/sb.list"
run() { SUITES_DIR=$W BUILD=$W bash tests/run_suites.sh "$@"; }
line_of() { echo "$out" | grep -n "$1" | head -n 1 | cut -d: -f1; }
start=$EPOCHREALTIME
out=$(TEST_JOBS=2 run sa sb 2>&1); rc=$?
secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
echo "$out" | sed 's/^/    | /'
[ $rc != 0 ] && ok "a failed test sets the exit status ($rc)" || bad "exit status 0 with a failed test"
echo "$out" | grep -q '^5 passed, 1 failed$' && ok "5 passed, 1 failed: suite a in order, b beside it" \
  || bad "expected '5 passed, 1 failed'"
echo "$out" | grep -q '^failed: sb/broken$' && ok "the failure named" || bad "no 'failed: sb/broken' line"
echo "$out" | grep -A2 '^FAIL sb/broken: the last 30 lines' | grep -q '| the-marker-line' \
  && ok "its log's tail at the end" || bad "no log tail for sb/broken"
[ "$(line_of 'FAIL sb/broken: the last')" -gt "$(line_of '^PASS sa .* four')" ] \
  && ok "the tail after every test's line" || bad "the tail came before the end"
s3='sa/(one|two|three) [0-9.]+s'
echo "$out" | grep -Eq "^slowest: $s3, $s3, $s3, s[ab]/[a-z]+ [0-9.]+s, s[ab]/[a-z]+ [0-9.]+s$" \
  && ok "the five slowest named, the three sleeping ones first" || bad "no or a wrong 'slowest:' line"
[ "$(line_of '^PASS sb .* fine')" -lt "$(line_of '^PASS sa .* two')" ] \
  && ok "side by side: suite b ended while suite a ran" || bad "suite b waited for suite a under TEST_JOBS=2"
out=$(TEST_JOBS=1 run sa sb 2>&1)
[ "$(line_of '^FAIL sb .* broken')" -gt "$(line_of '^PASS sa .* four')" ] && echo "$out" | grep -q '^5 passed, 1 failed$' \
  && ok "TEST_JOBS=1: one suite after the other" || bad "TEST_JOBS=1: suite b did not wait for suite a"
out=$(TEST_JOBS=2 run 'sa:t*' nosuch 'sb:nope' 2>&1); rc=$?
echo "$out" | grep -q '^2 passed, 2 failed$' && echo "$out" | grep -q '^failed: nosuch (missing) sb:nope (no such test)$' &&
  ! echo "$out" | grep -q 'the last 30 lines' && [ $rc != 0 ] && ok "patterns: sa:t* ran two; a missing suite and an unmatched pattern fail" \
  || bad "patterns: expected '2 passed, 2 failed', 'failed: nosuch (missing) sb:nope (no such test)', no log tail and a non-zero exit, found: $(echo "$out" | tail -n 2 | tr '\n' ' ')(exit $rc)"
out=$(TEST_JOBS=1 run 'sa:!t*' 'sb:!broken' 'sa:t*,!three' 'sb:!nope' 2>&1); rc=$?
ran=$(echo "$out" | awk '/^(PASS|FAIL) +[a-z]+ +[a-z]+ +[0-9.]+s$/ { printf "%s%s/%s", (n++ ? " " : ""), $2, $3 }')
[ "$ran" = "sa/one sa/four sb/fine sa/two sb/broken sb/fine" ] && echo "$out" | grep -q '^failed: sb/broken sb:!nope (no such test)$' \
  && ok "exclusions: sa:!t* ran one and four, sb:!broken fine, sa:t*,!three two alone; an unmatched one fails" \
  || bad "exclusions: expected 'sa/one sa/four sb/fine sa/two sb/broken sb/fine' and 'failed: sb/broken sb:!nope (no such test)', found '$ran', $(echo "$out" | grep '^failed:')"
out=$(TEST_JOBS=0 run sa 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "TEST_JOBS: expected a whole number of suites at a time above 0, found '0'" \
  && ok "TEST_JOBS=0 refused: $out" || bad "TEST_JOBS=0: exit $rc, $out"
[ "$fails" = 0 ] && echo "all run_suites checks passed (${secs}s for the two suites)"
[ "$fails" = 0 ]
