// The cost model's reports: the paper comparison and the CPU validation (costmodel/README.md).
#pragma once
#include "costmodel/cluster.h"

// Writes OUT_DIR/paper_comparison.md and .csv: the predicted speed-up of ATTENTION2D over Ring
// next to each published cell (attention2d.md). Returns the exit status.
int report_paper(const Cluster* a100, const Cluster* h100, const char* a100_path,
                 const char* h100_path, const char* out_dir);
// Predicts every run of a sweep CSV (tools/bench_sweep.sh) and writes OUT_DIR/cpu_validation.md,
// .csv, .png and OUT_DIR/bytes_per_rank.png. Returns the exit status.
int report_validation(const char* csv, const Cluster* c, const char* cluster_path,
                      const char* out_dir);
