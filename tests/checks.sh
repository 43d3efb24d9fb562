# The checks of the shell tests, sourced after W (the test's scratch directory) and test_name are
# set: one "ok"/"FAIL" line per check, a count of failures, and finish, which ends the test and
# keeps W when something failed.
fails=0
ok() { echo "  ok    $*"; }
bad() { echo "  FAIL  $*"; fails=$((fails + 1)); }
# check DESCRIPTION COMMAND...: ok if the command succeeds.
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
finish() {
  if [ "$fails" -eq 0 ]; then rm -rf "$W"; echo "$test_name: passed"; exit 0; fi
  echo "$test_name: $fails failure(s); files kept in $W"; exit 1
}
