// The text report of report_text.h.
#include "explain/report_text.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "explain/blocks.h"
#include "explain/check.h"

enum { MATRIX_MAX_T = 64, LIST_MAX = 12, CELL_LEN = 256 };

long long closed_bytes(const RankRun* r, CommPhase phase) {
    long long b = 0;
    for (int k = 0; k < r->closed[phase].n; k++) b += r->closed[phase].op[k].bytes;
    return b;
}

static char rank_char(int i) { return i == BLOCK_EVERY_RANK ? '*' : i < 0 ? '.' : i < 10 ? (char)('0' + i) : i < 36 ? (char)('a' + i - 10) : '#'; }

// The positions flagged in held (T flags), space separated; long lists abbreviated.
static void format_held(const unsigned char* held, long T, char* buf, size_t len) {
    long n = 0;
    for (long t = 0; t < T; t++) n += held[t];
    size_t used = 0;
    buf[0] = 0;
    long shown = 0;
    for (long t = 0; t < T && used + 16 < len; t++) {
        if (!held[t]) continue;
        shown++;
        if (n > LIST_MAX && shown == LIST_MAX - 2) {
            used += (size_t)snprintf(buf + used, len - used, "... ");
        }
        if (n > LIST_MAX && shown >= LIST_MAX - 2 && shown <= n - 2) continue;
        used += (size_t)snprintf(buf + used, len - used, "%ld ", t);
    }
    if (n > LIST_MAX) snprintf(buf + used, len - used, "(%ld)", n);
    else if (used) buf[used - 1] = 0;
}

static void format_layout(TokenLayout l, int n, long T, char* buf, size_t len) {
    unsigned char* held = xcalloc((size_t)T, 1, "explain token flags");
    for (int j = 0; j < n; j++) held[token_layout_position(l, j)] = 1;
    format_held(held, T, buf, len);
    free(held);
}

// Rows of one cell per rank, printed once all are known (the columns fit the widest cell).
typedef struct {
    int P, n, cap;
    char (*label)[64];
    char (*cell)[CELL_LEN];   // (cap, P)
} Table;

static char* table_row(Table* t, const char* label) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 8;
        t->label = realloc(t->label, (size_t)t->cap * sizeof *t->label);
        t->cell = realloc(t->cell, (size_t)t->cap * t->P * sizeof *t->cell);
        CHECK(t->label && t->cell, "out of memory", "explain: table of %d rows", t->cap);
    }
    snprintf(t->label[t->n], sizeof *t->label, "%s", label);
    return t->cell[(size_t)t->n++ * t->P];
}

static char* table_cell(Table* t, int i) { return t->cell[(size_t)(t->n - 1) * t->P + i]; }

static void table_print(Table* t, FILE* out) {
    int width = 8;
    for (int k = 0; k < t->n * t->P; k++)
        if ((int)strlen(t->cell[k]) + 2 > width) width = (int)strlen(t->cell[k]) + 2;
    for (int k = 0; k < t->n; k++) {
        fprintf(out, "  %-28s", t->label[k]);
        for (int i = 0; i < t->P; i++)
            fprintf(out, "%-*s", i + 1 < t->P ? width : 0, t->cell[(size_t)k * t->P + i]);
        fprintf(out, "\n");
    }
    free(t->label);
    free(t->cell);
}

// Forward passes of rank 0 (every rank of the ring makes as many): the ring ran one step more.
static int ring_forward_passes(const RankRun* r) {
    int n = 0;
    for (int k = 0; k < r->nops; k++)
        n += r->op[k].phase == COMM_FORWARD && r->op[k].kind == COMM_SEND_RECV;
    return n;
}

static void print_mesh(const Simulation* sim, FILE* out) {
    const ExplainShape* s = &sim->s;
    if (s->algo == ALGO_ULYSSES) {
        fprintf(out, "ulysses: the %d heads split over the %d ranks, H = %d each (rank i: heads i H .. "
                "(i+1) H - 1); all-to-alls among the ranks, the mesh shape plays no part\n", s->NH,
                sim->P, s->NH / sim->P);
        return;
    }
    if (s->algo == ALGO_USP)
        fprintf(out, "usp: the %d heads split over the %d ranks of each column, H = %d each "
                "(rank (r,c): heads r H .. (r+1) H - 1, tokens t = c + %d r mod %d); all-to-alls "
                "within a column, then Striped's ring along each row of %d ranks (same heads)\n",
                s->NH, s->pq, s->NH / s->pq, s->pkv, sim->P, s->pkv);
    const int steps = explain_algo_is_ring(s->algo) ? ring_forward_passes(&sim->rank[0]) + 1 : 0;
    if (s->algo == ALGO_ZIGZAG && steps < sim->P) {
        char tour[128];
        ring_tour_text(RING_ZIGZAG, sim->P, steps, tour, sizeof tour);
        fprintf(out, "zigzag's two-way tour: rank i holds %s (mod %d), each passed on by the rank "
                "that held it the step before (at the turn, %d ranks back); the mesh shape plays "
                "no part\n", tour, sim->P, (steps - 1) / 2 + 1);
        return;
    }
    if (steps) {
        fprintf(out, "ring: rank i sends to i+1 and receives from i-1 (mod %d), the mesh shape plays no part\n", sim->P);
        return;
    }
    fprintf(out, "mesh %d x %d: rank (r,c) has SP index i = r + %d*c; a row holds %d ranks, a column %d\n", s->pq,
            s->pkv, s->pq, s->pkv, s->pq);
    fprintf(out, "       ");
    for (int c = 0; c < s->pkv; c++) fprintf(out, "  c=%-3d", c);
    fprintf(out, "\n");
    for (int r = 0; r < s->pq; r++) {
        fprintf(out, "  r=%-3d", r);
        for (int c = 0; c < s->pkv; c++) fprintf(out, "  %-5d", mesh_sp_index(&sim->rank[0].mesh, r, c));
        fprintf(out, "\n");
    }
}

// Positions of the forward calls' queries (want_q) or keys on rank i, into held.
static void kernel_positions(const RankRun* r, int want_q, long T, unsigned char* held) {
    memset(held, 0, (size_t)T);
    for (int c = 0; c < r->ncalls; c++) {
        const ComputeCall* call = &r->call[c];
        if (call->kind != CALL_FORWARD) continue;
        if (want_q) mark_positions(call->p.qpos, call->p.Tq, held);
        else mark_positions(call->p.kpos, call->p.Tk, held);
    }
}

// Ring family: the SP rank whose K|V block rank i holds at each forward step, followed through the
// recorded receives (the block arriving at step s+1 is the one the sender held at step s); -1 for
// the steps the ring did not run (Ring stops once no query reaches back further).
static int* ring_holdings(const Simulation* sim) {
    const int P = sim->P, steps = ring_forward_passes(&sim->rank[0]) + 1;
    int* hold = xmalloc((size_t)P * P * sizeof(int), "explain ring holdings");   // (P ranks, P steps)
    for (int i = 0; i < P * P; i++) hold[i] = -1;
    for (int i = 0; i < P; i++) hold[i * P] = i;
    for (int s = 0; s + 1 < steps; s++)
        for (int i = 0; i < P; i++) {
            const RankRun* r = &sim->rank[i];
            int seen = 0, from = -1;
            for (int k = 0; k < r->nops && from < 0; k++) {
                const RecordedOp* op = &r->op[k];
                if (op->phase != COMM_FORWARD || op->kind != COMM_SEND_RECV) continue;
                if (seen++ == s) from = record_sp_index(&r->mesh, op->group, op->recv_peer[0]);
            }
            CHECK(from >= 0, "caller bug", "rank %d: no forward receive at step %d", i, s);
            hold[i * P + s + 1] = hold[from * P + s];
        }
    return hold;
}

// Whether a forward call of rank i reads keys of rank o's block.
// Whether rank i's forward calls rank o's keys: 0 not at all (the schedule skipped them), 1 with
// visible pairs, 2 only in calls that see none (blocks of other documents).
static int computes_with(const Simulation* sim, int i, int o) {
    const RankRun* r = &sim->rank[i];
    long* pos = xmalloc((size_t)sim->Tl * sizeof(long), "explain positions");
    token_layout_positions(sim->rank[o].layout, sim->Tl, pos);
    int called = 0, pairs = 0;
    for (int c = 0; c < r->ncalls; c++) {
        if (r->call[c].kind != CALL_FORWARD) continue;
        int found = 0;
        for (int j = 0; j < sim->Tl; j++) found |= pos[j] == r->call[c].p.kpos.off;
        called |= found;
        pairs |= found && attention_visible_pairs(&r->call[c].p) > 0;
    }
    free(pos);
    return pairs ? 1 : called ? 2 : 0;
}

static void print_tokens(const Simulation* sim, FILE* out) {
    const int P = sim->P;
    const long T = sim->s.T;
    unsigned char* held = xcalloc((size_t)T, 1, "explain token flags");
    Table t = {P, 0, 0, NULL, NULL};
    table_row(&t, "");
    for (int i = 0; i < P; i++) snprintf(table_cell(&t, i), CELL_LEN, "rank %d", i);
    table_row(&t, "start: Q, K, V");
    for (int i = 0; i < P; i++) format_layout(sim->rank[i].layout, sim->Tl, T, table_cell(&t, i), CELL_LEN);
    if (sim->s.algo == ALGO_ULYSSES || sim->s.algo == ALGO_USP) {
        // Ulysses: rank i's heads over every token; USP: rank (r,c)'s heads over column c's
        const int usp = sim->s.algo == ALGO_USP, H = sim->s.NH / (usp ? sim->s.pq : P);
        table_row(&t, "Q, K, V after all-to-all");
        for (int i = 0; i < P; i++) {
            kernel_positions(&sim->rank[i], 1, T, held);
            char tokens[CELL_LEN - 32];
            format_held(held, T, tokens, sizeof tokens);
            const int first = (usp ? sim->rank[i].mesh.r : i) * H;
            snprintf(table_cell(&t, i), CELL_LEN, "%s, heads %d..%d", tokens, first, first + H - 1);
        }
    } else if (!explain_algo_is_ring(sim->s.algo)) {
        table_row(&t, "K, V after the permutation");
        for (int i = 0; i < P; i++) {
            const RankRun* r = &sim->rank[i];
            int from = i;
            for (int k = 0; k < r->nops; k++)
                if (r->op[k].phase == COMM_FORWARD && r->op[k].group == MESH_SP)
                    from = record_sp_index(&r->mesh, MESH_SP, r->op[k].recv_peer[0]);
            format_layout(sim->rank[from].layout, sim->Tl, T, table_cell(&t, i), CELL_LEN);
        }
        table_row(&t, "Q after the row gather");
        for (int i = 0; i < P; i++) {
            kernel_positions(&sim->rank[i], 1, T, held);
            format_held(held, T, table_cell(&t, i), CELL_LEN);
        }
        table_row(&t, "K, V after the col gather");
        for (int i = 0; i < P; i++) {
            kernel_positions(&sim->rank[i], 0, T, held);
            format_held(held, T, table_cell(&t, i), CELL_LEN);
        }
    } else {
        int* hold = ring_holdings(sim);
        for (int s = 0; s < P; s++) {
            char label[64];
            snprintf(label, sizeof label, "step %d: K, V in hand", s);
            table_row(&t, label);
            for (int i = 0; i < P; i++) {
                const int o = hold[i * P + s], with = o < 0 ? 0 : computes_with(sim, i, o);
                if (o < 0)
                    snprintf(table_cell(&t, i), CELL_LEN, "(not run)");
                else if (with == 1)
                    format_layout(sim->rank[o].layout, sim->Tl, T, table_cell(&t, i), CELL_LEN);
                else
                    snprintf(table_cell(&t, i), CELL_LEN, with ? "(no pairs)" : "(masked)");
            }
        }
        free(hold);
    }
    const int heads_split = sim->s.algo == ALGO_ULYSSES || sim->s.algo == ALGO_USP;
    table_row(&t, heads_split ? "O, LSE back to the owners" : "O, LSE after the merge");
    for (int i = 0; i < P; i++) format_layout(sim->rank[i].layout, sim->Tl, T, table_cell(&t, i), CELL_LEN);
    fprintf(out, "\ntokens per rank (positions in the sequence), forward\n");
    table_print(&t, out);
    free(held);
}

// heads_per_rank: Ulysses (every cell on every rank, for a share of the heads).
static void print_matrix(const BlockMap* map, int by_step, int heads_per_rank, FILE* out) {
    const long T = map->T;
    fprintf(out, "\nattention matrix: row = query, column = key; %s, '.' = masked\n",
            by_step          ? "digit = the ring step computing the cell"
            : heads_per_rank ? "'*' = computed by every rank, each for its own heads"
                             : "digit = the rank computing the cell");
    fprintf(out, "           ");
    for (long k = 0; k < T; k++) fputc(k % 10 == 0 ? (char)('0' + (k / 10) % 10) : ' ', out);
    fprintf(out, "\n           ");
    for (long k = 0; k < T; k++) fputc((char)('0' + k % 10), out);
    fprintf(out, "\n");
    for (long q = 0; q < T; q++) {
        fprintf(out, "  query %2ld ", q);
        for (long k = 0; k < T; k++) {
            const size_t x = (size_t)q * T + k;
            fputc(rank_char(by_step ? map->step[x] : map->owner[x]), out);
        }
        fprintf(out, "\n");
    }
}

// What the pairs of one sequence and head add up to under the simulation's mask.
static const char* pairs_formula(const Simulation* sim) {
    return sim->docs.start                                 ? "the pairs within documents"
           : sim->s.window > 0 && sim->s.window < sim->s.T ? "W(W+1)/2 + (T-W)W"
                                                           : "T(T+1)/2";
}

static void print_work(const Simulation* sim, FILE* out) {
    // Ulysses and USP compute each pair once per chunk of their heads (--a2a-chunks)
    const int chunks = sim->s.algo == ALGO_ULYSSES || sim->s.algo == ALGO_USP ? sim->s.chunks : 1;
    char in_chunks[64] = "";
    if (chunks > 1) snprintf(in_chunks, sizeof in_chunks, ", in %d chunks of heads", chunks);
    if (sim->s.algo == ALGO_ULYSSES) {   // the whole matrix on every rank, a share of the heads
        fprintf(out, "\nwork: unmasked (query, key) pairs per rank and head: every rank all %lld "
                "pairs (%s) for each of its heads (%d of %d%s): max/mean 1.000\n",
                rank_visible_pairs(&sim->rank[0]) / chunks, pairs_formula(sim),
                sim->s.NH / sim->P, sim->s.NH, in_chunks);
        return;
    }
    long long max = 0, sum = 0;
    fprintf(out, "\nwork: unmasked (query, key) pairs per rank, one sequence and head%s\n ",
            in_chunks);
    for (int i = 0; i < sim->P; i++) {
        const long long w = rank_visible_pairs(&sim->rank[i]) / chunks;
        fprintf(out, " rank %d: %lld", i, w);
        sum += w;
        max = w > max ? w : max;
    }
    const double mean = (double)sum / sim->P;
    fprintf(out, "\n  total %lld = %s, max %lld, mean %.2f, max/mean %.3f\n", sum,
            pairs_formula(sim), max, mean, max / mean);
}

static int step_key_equal(const Step* s, const RecordedOp* op, int stage) {
    return s->kind == op->kind && s->group == op->group && s->count == op->count && s->stage == stage;
}

// Aligns the ranks' operation lists of one phase into steps: each rank's operations in order,
// matched to the first later step with the same key that rank has not filled.
Step* align_steps(const Simulation* sim, CommPhase phase, int* nsteps) {
    const int P = sim->P;
    int cap = 8, n = 0;
    Step* steps = xmalloc((size_t)cap * sizeof *steps, "explain steps");
    for (int i = 0; i < P; i++) {
        const RankRun* r = &sim->rank[i];
        int* stage = xmalloc((size_t)(r->nops + 1) * sizeof(int), "explain stages");
        match_stages(sim, i, phase, stage);
        int last = -1;
        for (int k = 0; k < r->nops; k++) {
            const RecordedOp* op = &r->op[k];
            if (op->phase != phase) continue;
            int j = last + 1;
            while (j < n && !(step_key_equal(&steps[j], op, stage[k]) && steps[j].op[i] < 0)) j++;
            if (j == n) {   // a new step right after the last one this rank took part in
                if (n == cap) {
                    cap *= 2;
                    steps = realloc(steps, (size_t)cap * sizeof *steps);
                    CHECK(steps, "out of memory", "explain: %d steps", cap);
                }
                j = last + 1;
                memmove(&steps[j + 1], &steps[j], (size_t)(n - j) * sizeof *steps);
                n++;
                steps[j] = (Step){op->kind, op->group, op->count, stage[k],
                                  xmalloc((size_t)P * sizeof(int), "explain step ranks")};
                for (int x = 0; x < P; x++) steps[j].op[x] = -1;
            }
            steps[j].op[i] = k;
            last = j;
        }
        free(stage);
    }
    *nsteps = n;
    return steps;
}

void steps_free(Step* steps, int n) {
    for (int j = 0; j < n; j++) free(steps[j].op);
    free(steps);
}

// Who exchanges with whom in a step: "a->b" per send, or the groups as {members}.
static void format_peers(const Simulation* sim, const Step* st, char* buf, size_t len) {
    size_t used = 0;
    int shown = 0, total = 0, absent = 0;
    char missing[CELL_LEN] = "";
    size_t mused = 0;
    for (int i = 0; i < sim->P; i++) {
        if (st->op[i] < 0) {
            absent++;
            mused += (size_t)snprintf(missing + mused, sizeof missing - mused, "%s%d", mused ? "," : "", i);
            if (mused >= sizeof missing) mused = sizeof missing - 1;
            continue;
        }
        const RankRun* r = &sim->rank[i];
        const RecordedOp* op = &r->op[st->op[i]];
        if (op->kind == COMM_SEND_RECV) {
            for (int t = 0; t < op->nsend; t++) {
                const int to = record_sp_index(&r->mesh, op->group, op->send_peer[t]);
                if (to == i) continue;
                total++;
                if (shown < 8 && used + 16 < len) {
                    used += (size_t)snprintf(buf + used, len - used, "%d->%d ", i, to);
                    shown++;
                }
            }
        } else if (op->group_rank == 0) {   // one entry per group, written by its first member
            total++;
            if (shown < 6 && used + 40 < len) {
                used += (size_t)snprintf(buf + used, len - used, "{");
                for (int m = 0; m < op->group_size; m++)
                    used += (size_t)snprintf(buf + used, len - used, "%s%d", m ? "," : "",
                                             record_sp_index(&r->mesh, op->group, m));
                used += (size_t)snprintf(buf + used, len - used, "} ");
                shown++;
            }
        }
    }
    if (total > shown) used += (size_t)snprintf(buf + used, len - used, "... (%d) ", total);
    if (absent && used + 40 < len) snprintf(buf + used, len - used, "(rank %s: none)", missing);
    else if (used) buf[used - 1] = 0;
}

// The compute calls rank r made in this phase before it issued op k (its calls_before, less the
// forward's calls for a backward operation).
static long long calls_before(const RankRun* r, int k) {
    const RecordedOp* op = &r->op[k];
    long long before = op->calls_before;
    if (op->phase == COMM_BACKWARD)
        for (int c = 0; c < r->ncalls; c++) before -= r->call[c].phase == COMM_FORWARD;
    return before;
}

// "lo" or "lo..hi" of a value over the ranks that take part in a step.
static void step_range(const Simulation* sim, const Step* st, long long (*value)(const RankRun*, int),
                       char* buf, size_t len) {
    long long lo = -1, hi = -1;
    for (int i = 0; i < sim->P; i++) {
        if (st->op[i] < 0) continue;
        const long long v = value(&sim->rank[i], st->op[i]);
        lo = lo < 0 || v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    if (lo == hi) snprintf(buf, len, "%lld", lo);
    else snprintf(buf, len, "%lld..%lld", lo, hi);
}

static long long op_bytes(const RankRun* r, int k) { return r->op[k].bytes; }

static void print_comm(const Simulation* sim, CommPhase phase, FILE* out) {
    int n;
    Step* steps = align_steps(sim, phase, &n);
    fprintf(out, "\n%s communication, in the order the schedule issues it (bytes: received per rank;"
            " after: the phase's compute calls issued before it, so it travels beside the later "
            "ones)\n", comm_phase_name(phase));
    fprintf(out, "  %2s  %-8s %-15s %-5s %9s %11s %5s  %s\n", "#", "stage", "kind", "group",
            "elements", "bytes/rank", "after", "ranks (group members, or sender->receiver)");
    for (int j = 0; j < n; j++) {
        const Step* st = &steps[j];
        char bytes[48], after[48], peers[CELL_LEN * 2];
        step_range(sim, st, op_bytes, bytes, sizeof bytes);
        step_range(sim, st, calls_before, after, sizeof after);
        format_peers(sim, st, peers, sizeof peers);
        fprintf(out, "  %2d  %-8s %-15s %-5s %9zu %11s %5s  %s\n", j + 1,
                dist_stage_name(st->stage), comm_kind_name(st->kind), mesh_group_name(st->group),
                st->count, bytes, after, peers);
    }
    if (!n) fprintf(out, "  (none: one rank)\n");
    steps_free(steps, n);
}

static void print_totals(const Simulation* sim, FILE* out) {
    fprintf(out, "\nbytes received per rank, one layer: recorded (closed form of attention/dist_cost.c)\n");
    for (int i = 0; i < sim->P; i++) {
        const RankRun* r = &sim->rank[i];
        const long long f = rank_bytes(r, COMM_FORWARD), b = rank_bytes(r, COMM_BACKWARD);
        const long long cf = closed_bytes(r, COMM_FORWARD), cb = closed_bytes(r, COMM_BACKWARD);
        fprintf(out, "  rank %d: forward %lld (%lld), backward %lld (%lld)%s\n", i, f, cf, b, cb,
                f == cf && b == cb ? "" : "  MISMATCH");
    }
}

static void print_header(const Simulation* sim, FILE* out) {
    const ExplainShape* s = &sim->s;
    fprintf(out, "%s, P = %d ranks, T = %ld tokens (%d per rank), B = %d, NH = %d, HS = %d, %zu-byte elements\n",
            explain_algo_title(s->algo), sim->P, s->T, sim->Tl, s->B, s->NH, s->HS, sizeof(real));
    const int steps = explain_algo_is_ring(s->algo) ? ring_forward_passes(&sim->rank[0]) + 1 : 0;
    if (s->window > 0)
        fprintf(out, "sliding window W = %ld: a query at t sees the keys t-W+1..t; the schedules skip "
                "the blocks no query's window reaches\n", s->window);
    if (s->doc_len > 0)
        fprintf(out, "documents of %ld tokens: a query sees only the keys of its own document; a "
                "block of other documents returns an empty partial\n", s->doc_len);
    if (steps && steps < sim->P && s->algo == ALGO_ZIGZAG)
        fprintf(out, "Zigzag runs %d of %d steps: a query's chunk reaches back only into the "
                "chunks of the ranks next to it, before and after (chunks i and 2P-1-i), so the "
                "other blocks are neither computed nor sent\n", steps, sim->P);
    else if (steps && steps < sim->P)
        fprintf(out, "Ring stops after %d of %d steps: no query reaches back further than the "
                "blocks they bring, so the later blocks are neither computed nor sent\n", steps,
                sim->P);
    else if (s->window > 0 || s->doc_len > 0)
        fprintf(out, "the same bytes move as without the mask\n");
    if (s->dp > 1)
        fprintf(out, "dp = %d: each of the %d SP groups does the same on its own sequences; shown: group 0\n",
                s->dp, s->dp);
}

void report_summary(const Simulation* sim, FILE* out) {
    print_header(sim, out);
    print_work(sim, out);
    print_totals(sim, out);
}

void report_text(const Simulation* sim, FILE* out) {
    const ExplainShape* s = &sim->s;
    print_header(sim, out);
    print_mesh(sim, out);
    print_tokens(sim, out);
    if (s->T <= MATRIX_MAX_T) {
        char err[ERR_LEN];
        BlockMap map;
        CHECK(block_map_build(sim, COMM_FORWARD, &map, err) == 0, "a schedule bug", "%s", err);
        if (s->algo == ALGO_USP)   // checked by the map: each cell once for all heads
            fprintf(out, "\nattention matrix: every unmasked cell computed once for all %d heads: "
                    "query t by the %d ranks of column t mod %d, each for its own %d heads\n",
                    s->NH, s->pq, s->pkv, s->NH / s->pq);
        else
            print_matrix(&map, 0, s->algo == ALGO_ULYSSES, out);
        if (explain_algo_is_ring(s->algo)) print_matrix(&map, 1, 0, out);
        block_map_free(&map);
    } else {
        fprintf(out, "\n(the matrix is drawn for T <= %d; use --png DIR)\n", MATRIX_MAX_T);
    }
    print_work(sim, out);
    print_comm(sim, COMM_FORWARD, out);
    print_comm(sim, COMM_BACKWARD, out);
    print_totals(sim, out);
}
