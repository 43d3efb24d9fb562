// --mesh auto: the trainer's dp x pq x pkv and attention schedule chosen by the cost model
// (costmodel/costmodel.h) for the world size, the model, T, the batch and a memory limit per
// device, on a cluster description, and the --recompute each needs to fit. Options given
// explicitly (--dp, --pq, --pkv, --attention, --recompute) are kept: only candidates that agree
// with them are considered.
#pragma once
#include <stddef.h>

#include "model/config.h"
#include "train/options.h"

// The cluster file --mesh auto predicts on: --cluster, else the backend's default.
const char* mesh_auto_cluster_path(const TrainOptions* o);

// Sets o->dp, o->pq, o->pkv, o->attention and o->recompute (the cheapest mode with which the
// candidate fits, unless given) to the fastest feasible candidate (most tokens/s)
// for `world` ranks. Under a document mask (doc_boundary >= 0: the token that begins a
// document) the candidates are priced with the documents of the first MESH_AUTO_SAMPLE sequences
// training will read (--train-data, --seed). Every rank computes the same answer from the same
// inputs (the cluster file, the options and those sequences; nothing timed), so no rank has to
// tell the others. report != 0 prints the top candidates with the reason for each, and the
// choice. *pair_share (when not NULL) gets the share of the attention pairs the sampled
// documents leave (1 without documents), for the run's summary to set beside the measured one.
// Returns 0, or -1 with a one-line message in err (cluster file or training data unreadable, no
// candidate fits).
enum { MESH_AUTO_SAMPLE = 16 };
int mesh_auto_choose(TrainOptions* o, const GPTConfig* cfg, int doc_boundary, int world,
                     int report, double* pair_share, char* err, size_t errlen);
