// The checks of check.h.
#include "explain/check.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "explain/blocks.h"

const char* dist_stage_name(int stage) {
    static const char* const names[] = {"permute", "gather", "reduce", "return", "pass"};
    return stage >= 0 && stage <= DIST_STAGE_PASS ? names[stage] : "?";
}

// Which DistAlong a recorded operation travels: its group, or for the SP group the schedule's
// point-to-point partner (the ring family's neighbour, ATTENTION2D's transposed rank) or, for
// Ulysses, the whole group's all-to-all.
static DistAlong op_along(const Simulation* sim, const RecordedOp* op) {
    if (op->group == MESH_ROW) return DIST_ALONG_ROW;
    if (op->group == MESH_COL) return DIST_ALONG_COLUMN;
    if (sim->s.algo == ALGO_ULYSSES) return DIST_ALONG_SP;
    return explain_algo_is_ring(sim->s.algo) ? DIST_ALONG_RING : DIST_ALONG_TRANSPOSE;
}

int match_stages(const Simulation* sim, int sp, CommPhase phase, int* stage) {
    const RankRun* r = &sim->rank[sp];
    DistCommOps left = r->closed[phase];   // calls still to match
    int unmatched = 0;
    for (int k = 0; k < r->nops; k++) {
        stage[k] = -1;
        const RecordedOp* op = &r->op[k];
        if (op->phase != phase) continue;
        const DistAlong along = op_along(sim, op);
        int found = -1;
        for (int j = 0; j < left.n && found < 0; j++) {
            const DistCommOp* c = &left.op[j];
            if (c->calls > 0 && c->kind == op->kind && c->along == along &&
                c->bytes == op->bytes * c->calls && c->messages == op->messages * c->calls)
                found = j;
        }
        // A closed-form entry of n calls covers n recorded calls of equal size: match it by its
        // per-call bytes, then take one call off it.
        for (int j = 0; j < left.n && found < 0; j++) {
            const DistCommOp* c = &left.op[j];
            if (c->calls > 0 && c->kind == op->kind && c->along == along &&
                c->bytes % c->calls == 0 && c->bytes / c->calls == op->bytes &&
                c->messages / c->calls == op->messages)
                found = j;
        }
        if (found < 0) {
            unmatched++;
            continue;
        }
        DistCommOp* c = &left.op[found];
        stage[k] = c->stage;
        c->bytes -= op->bytes;
        c->messages -= op->messages;
        c->calls--;
    }
    for (int j = 0; j < left.n; j++) unmatched += (int)left.op[j].calls;
    return unmatched;
}

static int same_volume(const CommVolume* a, const CommVolume* b) {
    for (int k = 0; k < COMM_NKINDS; k++)
        if (a->kind[k].bytes != b->kind[k].bytes || a->kind[k].messages != b->kind[k].messages ||
            a->kind[k].calls != b->kind[k].calls)
            return 0;
    return 1;
}

int explain_check(const Simulation* sim, FILE* out, int verbose) {
    int failures = 0;
    for (int i = 0; i < sim->P; i++) {
        const RankRun* r = &sim->rank[i];
        int* stage = xmalloc((size_t)(r->nops + 1) * sizeof(int), "explain stages");
        for (int ph = 0; ph < 2; ph++) {
            const CommVolume closed = dist_comm_volume(&r->closed[ph]);
            if (!same_volume(&r->counted[ph], &closed)) {
                fprintf(out, "check failed: rank %d %s: comm counters differ from dist_comm_volume\n", i,
                        comm_phase_name((CommPhase)ph));
                failures++;
            }
            const int left = match_stages(sim, i, (CommPhase)ph, stage);
            if (left) {
                fprintf(out, "check failed: rank %d %s: %d operations or closed-form calls unmatched\n",
                        i, comm_phase_name((CommPhase)ph), left);
                failures++;
            }
        }
        free(stage);
        const long long pairs = rank_visible_pairs(r), closed = closed_visible_pairs(sim, i);
        if (pairs != closed) {
            fprintf(out, "check failed: rank %d computes %lld unmasked pairs, the closed form %lld\n", i,
                    pairs, closed);
            failures++;
        }
        // What the kernels compute, as the cost model prices it: the CPU kernel's tiles and a
        // CUDA kernel's (the sm_80 forward's 128 x 64)
        const AttentionTile tiles[] = {{ATTENTION_CPU_TILE_ROWS, 1}, {128, 64}};
        for (int t = 0; t < 2; t++) {
            const long long closed_tiles = closed_tile_pairs(sim, i, tiles[t]);
            for (int kind = CALL_FORWARD; kind <= CALL_BACKWARD; kind++) {
                const long long got = rank_tile_pairs(r, (CallKind)kind, tiles[t]);
                if (got == closed_tiles) continue;
                fprintf(out, "check failed: rank %d %s computes %lld scores in %d x %d tiles, the "
                        "closed form %lld\n", i, kind == CALL_FORWARD ? "forward" : "backward", got,
                        tiles[t].rows, tiles[t].keys, closed_tiles);
                failures++;
            }
        }
    }
    // The cell map takes 8 T^2 bytes: checked up to T = 4096.
    for (int ph = 0; ph < 2 && sim->s.T <= 4096; ph++) {
        char err[ERR_LEN];
        BlockMap map;
        if (block_map_build(sim, (CommPhase)ph, &map, err)) {
            fprintf(out, "check failed: %s\n", err);
            failures++;
        }
        block_map_free(&map);
    }
    if (!failures && verbose)
        fprintf(out, "checks: every operation matches dist_cost.c one to one, counters equal the closed "
                     "forms, pairs and tile scores equal the closed forms, every unmasked cell computed once "
                     "(forward and backward)\n");
    return failures;
}
