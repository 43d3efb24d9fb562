// This machine as a cluster description: the CPU kernels timed on one thread (as the tests and
// benchmarks run each MPI rank) and the collectives' alpha-beta fits of tools/bench_collectives.
#pragma once

// Writes the cluster file `out`; argv for blas_ensure_vector_kernels. Returns the exit status.
int cpu_calibrate(char** argv, const char* collectives_jsonl, const char* out);
