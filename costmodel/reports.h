// The cost model's reports: the paper comparison and the CPU validation (costmodel/README.md).
#pragma once
#include <stdio.h>

#include "comm/atomic_file.h"
#include "costmodel/cluster.h"

// Every file the program writes (reports, the calibrated cluster) goes through these: written
// atomically, so a failed run leaves the previous complete file. report_file_open ends the job
// with a message naming path when it cannot start; report_file_commit when the write failed.
FILE* report_file_open(AtomicFile* af, const char* path);
void report_file_commit(AtomicFile* af);

// Writes OUT_DIR/paper_comparison.md and .csv: the predicted speed-up of ATTENTION2D over Ring
// next to each published cell (attention2d.md). Returns the exit status.
// h100_fa2: the same H100 cluster with FlashAttention-2's attention (the second compute column).
int report_paper(const Cluster* a100, const Cluster* h100, const Cluster* h100_fa2,
                 const char* a100_path, const char* h100_path, const char* h100_fa2_path,
                 const char* out_dir);
// Predicts every run of a sweep CSV (tools/bench_sweep.sh) and writes OUT_DIR/cpu_validation.md,
// .csv, .png and OUT_DIR/bytes_per_rank.png. Returns the exit status.
int report_validation(const char* csv, const Cluster* c, const char* cluster_path,
                      const char* out_dir);
// Predicts every trainer run of a GPU kit report (a .jsonl or its results/gpu/ folder) on the
// cluster and writes OUT_DIR/gpu_validation.md and .csv (gpu_validation.c). Returns the exit status.
int report_gpu_validation(const char* report, const Cluster* c, const char* cluster_path,
                          const char* out_dir);
