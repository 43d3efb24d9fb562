// The training state of one rank: everything beyond the model file that resuming needs, in a
// versioned, self-describing, checksummed file (state_SSSSSSSS_RRRRR.bin).
//
// Layout (little-endian): a 1024-byte header of int32 fields (the TS_* indices below), then the
// run configuration as JSON text (config_bytes, NUL-padded to a multiple of 8), then (version 3
// on) the loader's set positions (npositions x {u64 id, u64 seed, i64 read}), then the fp32
// master weights of this file's slice of the parameters (shard_count of them, from parameter
// shard_begin; every parameter, num_params, in versions 1 to 3), then the moments m and v of the
// same slice (shard_count each). A checkpoint's files partition the parameters, so that it holds
// each once whatever the number of ranks. The checksum covers every byte after the header plus
// the header with its checksum field zeroed.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/loader.h"
#include "model/config.h"

#define STATE_MAGIC 20261120
#define STATE_VERSION 1
// Written by a run in a data phase (loader.phase > 0), so that a program that does not know phases
// refuses the file rather than reading the phase's data in the order of the first; read are both.
#define STATE_VERSION_PHASES 2
// Written with the loader's set positions (as earlier builds wrote every state), so that a later
// data phase can continue the sets; versions 1 and 2 are read as holding none.
#define STATE_VERSION_POSITIONS 3
// Written with set positions and only the slice of the weights whose moments the file holds
// (every state the trainer writes now; versions 1 to 3 hold every weight in every rank's file).
#define STATE_VERSION_SLICES 4

enum { TRAIN_STATE_ADAMW = 0, TRAIN_STATE_MUON = 1 };

typedef struct {
    int32_t step;              // optimizer steps completed
    int32_t world_size, rank;  // the mesh this file was written on
    int32_t dp, pq, pkv;
    int32_t zero_stage;        // 0: every rank holds all moments; 1: sharded
    int32_t optimizer;         // TRAIN_STATE_ADAMW, or TRAIN_STATE_MUON: m of the hidden matrices
                               // is Muon's momentum (their v is 0)
    GPTConfig model;
    int32_t B, T;              // micro-batch geometry (global T)
    int32_t accum_steps;
    uint64_t sample_rng;       // state of the sampling generator
    LoaderState loader;
    int32_t phase_step;        // the step where the loader's data phase began (0 in the first)
    uint64_t train_data_hash;  // hash of the --train-data value (0 in states written before it)
    int32_t npositions;        // the loader's set positions (loader_positions; 0 in states
                               // written before them)
    LoaderSetPosition positions[LOADER_MAX_POSITIONS];
    uint64_t num_params;
    uint64_t shard_begin, shard_count;   // the slice of the parameters whose moments (and in
                                         // version 4 weights) the file holds
    int32_t version;           // as read (train_state_save writes STATE_VERSION_SLICES, or
                               // without positions an older version)
    char config_json[4096];    // effective run configuration (informational, NUL-terminated)
} TrainStateInfo;

// Writes atomically. params: num_params floats, of which the slice is written (every one without
// set positions: the older versions); m, v: shard_count floats each.
int train_state_save(const char* path, const TrainStateInfo* info, const float* params,
                     const float* m, const float* v, char* err, size_t errlen);

// Reads and verifies the header, sizes and checksum into *info without loading the tensors
// into caller memory (the file is streamed once to verify). Returns 0, or -1 with err set.
int train_state_read_info(const char* path, TrainStateInfo* info, char* err, size_t errlen);

// Loads into params (num_params floats) the weights the file holds (its slice, or in versions 1
// to 3 all of them), m and v (shard_count each), after verifying the checksum. The caller checks
// *info against its own run (shape, mesh) first.
int train_state_load(const char* path, TrainStateInfo* info, float* params, float* m, float* v,
                     char* err, size_t errlen);
