#!/usr/bin/env bash
# expect_fail.sh PATTERN COMMAND...: passes when COMMAND exits non-zero and its output (stdout and
# stderr) matches the extended regular expression PATTERN; shows the output either way.
set -u
pattern=$1; shift
out=$("$@" 2>&1); status=$?
printf '%s\n' "$out"
if [ "$status" -eq 0 ]; then echo "expect_fail: '$*' exited 0, expected a failure"; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "expect_fail: output of '$*' does not match /$pattern/"; exit 1
fi
echo "ok   '$*' failed (status $status) with a message matching /$pattern/"
