// The terminal explanation of a simulation: mesh, tokens per rank after each step, the T x T
// matrix by rank (and ring step), work per rank, every communication step forward and backward,
// totals per rank against the closed form.
#pragma once
#include <stdio.h>

#include "explain/simulate.h"

void report_text(const Simulation* sim, FILE* out);
// The header, the work per rank and the bytes per rank only.
void report_summary(const Simulation* sim, FILE* out);
// The bytes one rank receives in a phase by dist_cost.c's closed form.
long long closed_bytes(const RankRun* r, CommPhase phase);

// One step of the schedule: the same operation (kind, group, elements, stage) on every rank that
// takes part, op[i] its index in rank i's list (-1: rank i has none).
typedef struct {
    CommKind kind;
    MeshGroup group;
    size_t count;
    int stage;
    int* op;
} Step;
// The ranks' operations of one phase aligned into steps (*nsteps of them), in issue order.
Step* align_steps(const Simulation* sim, CommPhase phase, int* nsteps);
void steps_free(Step* steps, int n);
