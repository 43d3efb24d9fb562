// The block map of blocks.h.
#include "explain/blocks.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

void mark_positions(TokenPositions p, long n, unsigned char* held) {
    for (long j = 0; j < n; j++) held[p.off + p.stride * j] = 1;
}

void block_map_free(BlockMap* map) {
    free(map->owner);
    free(map->step);
    free(map->token_rank);
    memset(map, 0, sizeof *map);
}

// Whether query q sees key k: causal, within the window when there is one, and in q's document
// when there are documents.
static int visible(const Simulation* sim, long q, long k) {
    return k <= q && (sim->s.window <= 0 || q - k < sim->s.window) &&
           (!sim->docs.start || k >= sim->docs.start[q]);
}

int block_map_build(const Simulation* sim, CommPhase phase, BlockMap* map, char* err) {
    const long T = sim->s.T;
    const int P = sim->P;
    map->T = T;
    map->owner = xmalloc((size_t)T * T * sizeof(int), "explain block map");
    map->step = xmalloc((size_t)T * T * sizeof(int), "explain ring steps");
    map->token_rank = xmalloc((size_t)T * sizeof(int), "explain token ranks");
    for (size_t x = 0; x < (size_t)T * T; x++) map->owner[x] = map->step[x] = -1;
    for (long t = 0; t < T; t++) map->token_rank[t] = -1;
    long* pos = xmalloc((size_t)sim->Tl * sizeof(long), "explain positions");
    for (int i = 0; i < P; i++) {
        token_layout_positions(sim->rank[i].layout, sim->Tl, pos);
        for (int j = 0; j < sim->Tl; j++) {
            if (pos[j] < 0 || pos[j] >= T || map->token_rank[pos[j]] >= 0) {
                const long bad = pos[j];
                free(pos);
                return set_err(err, ERR_LEN, "rank %d's layout: token %ld outside 0..%ld or held twice",
                               i, bad, T - 1);
            }
            map->token_rank[pos[j]] = i;
        }
    }
    free(pos);
    const CallKind want = phase == COMM_FORWARD ? CALL_FORWARD : CALL_BACKWARD;
    int* heads = xcalloc((size_t)T * T, sizeof(int), "explain head counts");   // (T, T)
    // the ring family: the step at which rank i holds rank o's keys, at [i P + o]
    int* ring_step = explain_algo_is_ring(sim->s.algo) ? explain_ring_step_table(sim) : NULL;
    for (int i = 0; i < P; i++) {
        const RankRun* r = &sim->rank[i];
        for (int c = 0; c < r->ncalls; c++) {
            const ComputeCall* call = &r->call[c];
            if (call->kind != want) continue;
            const AttentionProblem* p = &call->p;
            for (int a = 0; a < p->Tq; a++) {
                const long q = p->qpos.off + p->qpos.stride * a;
                for (int b = 0; b < p->Tk; b++) {
                    const long k = p->kpos.off + p->kpos.stride * b;
                    if (!visible(sim, q, k)) continue;   // the causal mask and the window
                    const size_t x = (size_t)q * T + k;
                    if (heads[x] + p->NH > sim->s.NH) {
                        free(heads);
                        free(ring_step);
                        return set_err(err, ERR_LEN, "%s cell (query %ld, key %ld) computed by ranks %d and %d "
                                       "for more than the %d heads", comm_phase_name(phase), q, k,
                                       map->owner[x], i, sim->s.NH);
                    }
                    heads[x] += p->NH;
                    map->owner[x] = p->NH == sim->s.NH ? i : BLOCK_EVERY_RANK;
                    map->step[x] = ring_step ? ring_step[i * P + map->token_rank[k]] : 0;
                }
            }
        }
    }
    for (long q = 0; q < T; q++)
        for (long k = 0; k <= q; k++) {
            const int n = heads[(size_t)q * T + k];
            if (visible(sim, q, k) && n < sim->s.NH) {
                free(heads);
                free(ring_step);
                return set_err(err, ERR_LEN, "%s cell (query %ld, key %ld) computed for %d of the "
                               "%d heads", comm_phase_name(phase), q, k, n, sim->s.NH);
            }
        }
    free(heads);
    free(ring_step);
    return 0;
}
