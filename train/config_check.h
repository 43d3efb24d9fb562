// The cross-rank configuration check: at start every rank lists what must be the same on every
// rank as (name, value) items, in this order: each effective option as the configuration prints
// it (but --rank and --local-rank, which differ by design), the model shape (after --init-from;
// --resume refuses a checkpoint of another shape) and the size of the --init-from file, the data
// files its --train-data and --val-data patterns resolved to (names and sizes) and the size of the
// --tokenizer file. The ranks compare a 64-bit hash of the list over the world group, and on a
// mismatch the first item in which the lowest differing rank departs from rank 0, with both
// values, so that every rank stops with the same one-line reason instead of training on
// inconsistent data or hanging in a collective. (The check runs once the transport is up: options
// that make ranks create it differently, e.g. --comm nccl on one and mpi-staged on another, can
// fail or hang before it.)
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "data/loader.h"
#include "model/config.h"
#include "train/options.h"

typedef struct {
    int n, cap;
    char **names, **values;
} ConfigItems;

void config_items_add(ConfigItems* items, const char* name, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
void config_items_free(ConfigItems* items);

// This rank's items: options, data files (train may be NULL: not read; nval validation sets,
// maybe none), the model shape.
void config_items_of_run(ConfigItems* items, const TrainOptions* o, const GPTConfig* cfg,
                         const DataLoader* train, const DataLoader* const* val, int nval);

// Collective over MESH_WORLD, through host all-reduces (every transport). Returns 0 when every
// rank's items equal rank 0's; else 1 with msg set, the same on every rank:
// "--seq-len is 64 on rank 0 but 128 on rank 1".
int config_items_compare(Comm* comm, const Mesh* mesh, const ConfigItems* items, char* msg,
                         size_t msglen);

// A 64-bit hash of an option's text, never 0 (which marks a checkpoint field written before it).
uint64_t config_text_hash(const char* s);
