// What the explain tool asserts about a simulation before it shows anything: the recorded
// operations of every rank match dist_cost.c's closed-form operations one to one (kind, group,
// bytes per call), the comm counters equal dist_comm_volume of those, every rank's unmasked
// (query, key) pairs equal attention2d_visible_pairs / ring_visible_pairs, the scores its calls
// compute in a kernel's tiles equal attention2d_tile_pairs / ring_tile_pairs, and the forward and
// backward calls together cover every unmasked cell of the T x T matrix exactly once.
#pragma once
#include <stdio.h>

#include "explain/simulate.h"

// The closed-form stage of each recorded operation of SP rank sp in `phase` (stage[k] for op k,
// -1 for operations of the other phase). Returns the number of operations and closed-form calls
// left unmatched (0: a one-to-one match).
int match_stages(const Simulation* sim, int sp, CommPhase phase, int* stage);
const char* dist_stage_name(int stage);

// Runs every check; prints one line per failure to out (and a summary line when all pass and
// verbose). Returns the number of failures.
int explain_check(const Simulation* sim, FILE* out, int verbose);
