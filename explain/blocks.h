// The T x T attention matrix as the simulated ranks computed it: which rank computes each
// unmasked (query, key) cell, and for the ring family at which ring step (the key's block
// travelled (i - origin) mod P hops to reach rank i), read from the recorded partial-attention
// calls and the layers' token layouts.
#pragma once
#include "explain/simulate.h"

enum { BLOCK_EVERY_RANK = -2 };

typedef struct {
    long T;
    int* owner;        // (T, T): row q, column k; SP rank computing the cell, -1 when masked,
                       // BLOCK_EVERY_RANK where each rank computes it for its own heads (Ulysses)
    int* step;         // (T, T): ring step (0 for ATTENTION2D), -1 when masked
    int* token_rank;   // (T): SP rank whose layout holds token t at the start
} BlockMap;

// Fills map from the calls of `phase`. Returns 0, or -1 with a message when a cell is computed
// twice, a visible cell by no rank, or a token is held by no rank or by two. Cells count heads:
// every visible cell must be computed for all NH heads once, by one rank (the schedules that split
// the matrix) or by each rank for its own heads (Ulysses).
int block_map_build(const Simulation* sim, CommPhase phase, BlockMap* map, char* err);
void block_map_free(BlockMap* map);

// Marks the positions of n tokens of p in `held` (T flags).
void mark_positions(TokenPositions p, long n, unsigned char* held);
