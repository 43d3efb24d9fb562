#!/usr/bin/env bash
# Runs an MPI program on NP local processes for the tests and benchmarks: oversubscribed (the
# tests use more ranks than cores), unbound, one OpenMP thread per rank, and allowed as root.
#   tests/mpirun.sh NP PROGRAM [ARGS...]
set -eu
np=$1
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
exec mpirun --oversubscribe --bind-to none -np "$np" "$@"
