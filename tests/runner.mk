# The test runner (tests/run_suites.sh) on suites of its own: order within a suite, suites side
# by side under TEST_JOBS, counts, failure tails, exit status (tests/test_run_suites.sh).
SUITES_model += runner
