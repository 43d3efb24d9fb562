#!/usr/bin/env bash
# Checks that a command fails as a whole job, in a controlled way: it exits with a status in
# 1..123 (124 is `timeout`: some rank hung; 125..127 a command that could not run; above 128 a
# signal), and its output matches PATTERN (grep -E).
#   tests/expect_job_failure.sh PATTERN COMMAND...
set -u
pattern=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 0 ]; then echo "expect_job_failure: the job exited 0"; exit 1; fi
if [ "$rc" -eq 124 ]; then echo "expect_job_failure: the job hung until its timeout"; exit 1; fi
if [ "$rc" -gt 124 ]; then echo "expect_job_failure: exit $rc (not run, or killed by a signal)"; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "expect_job_failure: exit $rc, but no output matches: $pattern"; exit 1
fi
echo "expect_job_failure: exit $rc with the expected message"
