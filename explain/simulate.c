// The simulation of simulate.h.
#include "explain/simulate.h"

#include <stdlib.h>
#include <string.h>

#include "attention/dist_bounds.h"
#include "attention/dist_ops.h"
#include "comm/fail.h"

static const char* const names[ALGO_COUNT] = {"2d",     "2d-overlap", "ring", "striped",
                                              "zigzag", "ulysses",    "usp"};
static const char* const titles[ALGO_COUNT] = {"ATTENTION2D", "ATTENTION2D (overlapped)", "Ring",
                                               "Striped",     "Zigzag",                   "Ulysses",
                                               "USP"};

const char* explain_algo_name(ExplainAlgo a) { return names[a]; }
const char* explain_algo_title(ExplainAlgo a) { return titles[a]; }
int explain_algo_is_ring(ExplainAlgo a) { return a >= ALGO_RING && a <= ALGO_ZIGZAG; }
int explain_algo_ignores_mesh(ExplainAlgo a) { return explain_algo_is_ring(a) || a == ALGO_ULYSSES; }

int explain_algo_parse(const char* name, ExplainAlgo* a) {
    for (int k = 0; k < ALGO_COUNT; k++)
        if (!strcmp(name, names[k])) {
            *a = (ExplainAlgo)k;
            return 0;
        }
    return -1;
}

int explain_check_shape(const ExplainShape* s, char* err) {
    Mesh m;
    if (mesh_init(&m, s->dp, s->pq, s->pkv, 0, s->dp * s->pq * s->pkv, err)) return -1;
    if (mesh_check_seq_len(&m, s->T, err)) return -1;
    if (s->algo == ALGO_ZIGZAG && s->T % (2L * m.P))
        return set_err(err, ERR_LEN,
                       "--seq-len %ld: zigzag splits the sequence into 2P = %d chunks: expected a "
                       "multiple of %d",
                       s->T, 2 * m.P, 2 * m.P);
    if (s->algo == ALGO_ULYSSES && s->NH % m.P)
        return set_err(err, ERR_LEN,
                       "--heads %d: ulysses splits the heads over the P = %d ranks: expected a "
                       "multiple of %d", s->NH, m.P, m.P);
    if (s->algo == ALGO_USP && s->NH % m.pq)
        return set_err(err, ERR_LEN,
                       "--heads %d: usp splits the heads over the --pq %d ranks of a column: "
                       "expected a multiple of %d", s->NH, m.pq, m.pq);
    const int split = s->algo == ALGO_ULYSSES ? m.P : m.pq;
    if (dist_chunks_check(s->chunks, s->algo == ALGO_ULYSSES || s->algo == ALGO_USP,
                          s->NH / split, explain_algo_name(s->algo), err, ERR_LEN))
        return -1;
    if (s->doc_len > s->T)
        return set_err(err, ERR_LEN, "--document-length %ld: expected at most --seq-len %ld (a "
                       "document within a sequence)", s->doc_len, s->T);
    return 0;
}

AttentionLayer* explain_layer_create(Comm* comm, const ExplainShape* s) {
    const int Tl = (int)(s->T / comm->mesh.P);
    switch (s->algo) {
    case ALGO_2D: return attention2d_create(comm, s->B, Tl, s->NH, s->NH, s->HS, 0);
    case ALGO_2D_OVERLAP: return attention2d_overlap_create(comm, s->B, Tl, s->NH, s->NH, s->HS);
    case ALGO_RING: return attention_ring_create(comm, RING_CONTIGUOUS, s->B, Tl, s->NH, s->NH, s->HS);
    case ALGO_STRIPED: return attention_ring_create(comm, RING_CYCLIC, s->B, Tl, s->NH, s->NH, s->HS);
    case ALGO_ZIGZAG: return attention_ring_create(comm, RING_ZIGZAG, s->B, Tl, s->NH, s->NH, s->HS);
    case ALGO_ULYSSES: return attention_ulysses_create(comm, s->B, Tl, s->NH, s->NH, s->HS, s->chunks);
    case ALGO_USP: return attention_usp_create(comm, s->B, Tl, s->NH, s->NH, s->HS, s->chunks);
    default: FAIL("caller bug", "unknown algorithm %d", (int)s->algo);
    }
}

// The ring layout of a ring-family algorithm.
static const RingLayout RING_LAYOUT[ALGO_COUNT] = {0, 0, RING_CONTIGUOUS, RING_CYCLIC, RING_ZIGZAG};

// The longest document of s's bounds (DocumentBounds.span): doc_len, cut at T; 0 without them.
static int document_span_of(const ExplainShape* s) {
    return s->doc_len > 0 ? (int)(s->doc_len < s->T ? s->doc_len : s->T) : 0;
}

DocumentBounds explain_documents(const ExplainShape* s) {
    DocumentBounds d = {NULL, NULL, (int)s->T, 0};
    if (s->doc_len <= 0) return d;
    const size_t n = (size_t)s->B * s->T;
    int* start = xmalloc(n * sizeof(int), "explain document starts");   // (B, T)
    int* end = xmalloc(n * sizeof(int), "explain document ends");       // (B, T)
    for (size_t i = 0; i < n; i++) {
        const long t = (long)(i % (size_t)s->T), first = t / s->doc_len * s->doc_len;
        start[i] = (int)first;
        end[i] = (int)(first + s->doc_len < s->T ? first + s->doc_len : s->T);
    }
    d.start = start, d.end = end;
    d.span = document_span_of(s);
    return d;
}

void explain_documents_free(DocumentBounds* d) {
    free((int*)d->start);
    free((int*)d->end);
    d->start = d->end = NULL;
}

void explain_run_layer(AttentionLayer* layer, Comm* comm, const ExplainShape* s,
                       DocumentBounds docs, const real* qkv, const real* dout,
                       ComputeRecorder* rec) {
    const int Tl = (int)(s->T / comm->mesh.P), C = s->NH * s->HS;
    const size_t rows = (size_t)s->B * Tl;
    real* out = xmalloc(rows * C * sizeof(real), "explain output");           // (B, Tl, C)
    real_stat* lse = xmalloc((size_t)s->B * s->NH * Tl * sizeof(real_stat), "explain LSE");
    real* dqkv = xmalloc(rows * 3 * C * sizeof(real), "explain dQKV");        // (B, Tl, 3C)
    layer->docs = docs;
    compute_record_into(rec);
    if (rec) rec->phase = COMM_FORWARD;
    layer->forward(layer, 0, s->window, s->B, Tl, s->NH, s->NH, s->HS, qkv, out, lse);
    if (rec) rec->phase = COMM_BACKWARD;
    layer->backward(layer, 0, s->window, s->B, Tl, s->NH, s->NH, s->HS, qkv, out, lse, dout, dqkv);
    compute_record_into(NULL);
    free(out);
    free(lse);
    free(dqkv);
}

static int explain_ring_steps(const ExplainShape* s, int P) {
    return ring_steps(RING_LAYOUT[s->algo], P, (int)(s->T / P), s->window, document_span_of(s));
}

int* explain_ring_step_table(const Simulation* sim) {
    const int P = sim->P, steps = explain_ring_steps(&sim->s, P);
    int* step = xmalloc((size_t)P * P * sizeof(int), "explain ring step table");   // (P, P)
    for (int x = 0; x < P * P; x++) step[x] = -1;
    for (int i = 0; i < P; i++)
        for (int s = 0; s < steps; s++)
            step[i * P + ring_step_origin(RING_LAYOUT[sim->s.algo], P, steps, i, s)] = s;
    return step;
}

DistCommOps explain_closed_ops(const Mesh* m, const ExplainShape* s, CommPhase phase) {
    const int Tl = (int)(s->T / m->P);
    const size_t sr = sizeof(real), sa = sizeof(real_acc);
    if (s->algo == ALGO_ULYSSES) return ulysses_ops(m, phase, s->B, Tl, s->NH, s->NH, s->HS, s->chunks, sr, sa);
    if (s->algo == ALGO_USP) return usp_ops(m, phase, s->B, Tl, s->NH, s->NH, s->HS, s->chunks, sr, sa);
    if (explain_algo_is_ring(s->algo)) {
        return ring_ops(m, phase, s->B, Tl, s->NH, s->NH, s->HS, explain_ring_steps(s, m->P), sr, sa);
    }
    return attention2d_ops(m, phase, s->B, Tl, s->NH, s->NH, s->HS, 0, sr, sa,
                           s->algo == ALGO_2D_OVERLAP);
}

static void simulate_rank(const ExplainShape* s, DocumentBounds docs, int sp, RankRun* out) {
    char err[ERR_LEN];
    const int P = s->pq * s->pkv;
    CHECK(mesh_init(&out->mesh, s->dp, s->pq, s->pkv, sp, s->dp * P, err) == 0, "check the mesh", "%s", err);
    const int Tl = (int)(s->T / P), C = s->NH * s->HS;
    CommRecorder* cr;
    Comm* comm = record_comm_create(&out->mesh, 1, &cr);
    ComputeRecorder rec = {0};
    cr->calls = &rec.n;
    AttentionLayer* layer = explain_layer_create(comm, s);
    out->layout = layer->positions;
    real* qkv = xcalloc((size_t)s->B * Tl * 3 * C, sizeof(real), "explain QKV");
    real* dout = xcalloc((size_t)s->B * Tl * C, sizeof(real), "explain dout");
    explain_run_layer(layer, comm, s, docs, qkv, dout, &rec);
    for (int ph = 0; ph < 2; ph++) {
        for (int k = 0; k < COMM_NKINDS; k++)
            out->counted[ph].kind[k] = comm_count(comm, 0, (CommPhase)ph, (CommKind)k);
        out->closed[ph] = explain_closed_ops(&out->mesh, s, (CommPhase)ph);
    }
    out->nops = cr->n;
    out->op = xmalloc((size_t)(cr->n + 1) * sizeof *out->op, "explain operations");
    if (cr->n) memcpy(out->op, cr->op, (size_t)cr->n * sizeof *out->op);
    out->call = rec.call;
    out->ncalls = rec.n;
    free(qkv);
    free(dout);
    attention_layer_free(layer);
    comm_destroy(comm);
}

Simulation* simulate(const ExplainShape* s) {
    Simulation* sim = xcalloc(1, sizeof *sim, "simulation");
    sim->s = *s;
    sim->P = s->pq * s->pkv;
    sim->Tl = (int)(s->T / sim->P);
    sim->rank = xcalloc((size_t)sim->P, sizeof *sim->rank, "simulated ranks");
    sim->docs = explain_documents(s);
    for (int i = 0; i < sim->P; i++) simulate_rank(s, sim->docs, i, &sim->rank[i]);
    return sim;
}

void simulation_free(Simulation* sim) {
    if (!sim) return;
    for (int i = 0; i < sim->P; i++) {
        free(sim->rank[i].op);
        free(sim->rank[i].call);
    }
    free(sim->rank);
    explain_documents_free(&sim->docs);
    free(sim);
}

long long rank_visible_pairs(const RankRun* r) {
    long long pairs = 0;
    for (int k = 0; k < r->ncalls; k++)
        if (r->call[k].kind == CALL_FORWARD) pairs += attention_visible_pairs(&r->call[k].p);
    return pairs;
}

long long closed_visible_pairs(const Simulation* sim, int sp) {
    const Mesh* m = &sim->rank[sp].mesh;
    // Ulysses and USP: once per chunk of the rank's heads (the calls count pairs per head)
    if (sim->s.algo == ALGO_ULYSSES)   // all of them, for each of the rank's heads
        return sim->s.chunks *
               attention2d_visible_pairs(1, 1, 0, 0, sim->s.T, sim->s.window, sim->docs.start);
    if (sim->s.algo == ALGO_USP)   // Striped's rank c of the row, for each of the rank's heads
        return sim->s.chunks * ring_visible_pairs(RING_CYCLIC, m->pkv, m->c, sim->s.T,
                                                  sim->s.window, sim->docs.start);
    if (explain_algo_is_ring(sim->s.algo))
        return ring_visible_pairs(RING_LAYOUT[sim->s.algo], sim->P, sp, sim->s.T, sim->s.window,
                                  sim->docs.start);
    return attention2d_visible_pairs(m->pq, m->pkv, m->r, m->c, sim->s.T, sim->s.window,
                                     sim->docs.start);
}

long long rank_tile_pairs(const RankRun* r, CallKind kind, AttentionTile tile) {
    long long pairs = 0;
    for (int k = 0; k < r->ncalls; k++)
        if (r->call[k].kind == kind && attention_any_visible(&r->call[k].p))
            pairs += attention_tile_pairs(&r->call[k].p, tile);
    return pairs;
}

long long closed_tile_pairs(const Simulation* sim, int sp, AttentionTile tile) {
    const Mesh* m = &sim->rank[sp].mesh;
    const ExplainShape* s = &sim->s;
    if (s->algo == ALGO_ULYSSES)   // one call of the whole sequence per chunk of heads
        return s->chunks * attention2d_tile_pairs(1, 1, 0, 0, s->T, s->window, sim->docs.start,
                                                  0, tile);
    if (s->algo == ALGO_USP)   // Striped's ring of the mesh row, per chunk
        return s->chunks * ring_tile_pairs(RING_CYCLIC, m->pkv, m->c, m->pkv, s->T, s->window,
                                           sim->docs.start, tile);
    if (explain_algo_is_ring(s->algo))
        return ring_tile_pairs(RING_LAYOUT[s->algo], sim->P, sp, explain_ring_steps(s, sim->P),
                               s->T, s->window, sim->docs.start, tile);
    return attention2d_tile_pairs(m->pq, m->pkv, m->r, m->c, s->T, s->window, sim->docs.start,
                                  s->algo == ALGO_2D_OVERLAP, tile);
}

long long rank_bytes(const RankRun* r, CommPhase phase) {
    long long bytes = 0;
    for (int k = 0; k < r->nops; k++)
        if (r->op[k].phase == phase) bytes += r->op[k].bytes;
    return bytes;
}
