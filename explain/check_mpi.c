// --check-mpi: the simulation against a real run. Every rank of the MPI job runs the schedule over
// the MPI transport with real kernels on random inputs, then simulates its own SP rank, and
// compares: the comm counters of the MPI run per phase and kind with the sums of the simulated
// operations, the partial-attention calls one by one (kind, phase, sizes, positions), the token
// layout, and the unmasked pairs of the real calls with the closed form.
#include <stdlib.h>
#include <string.h>

#include "comm/comm_mpi.h"
#include "comm/fail.h"
#include "explain/explain_modes.h"

static int same_problem(const AttentionProblem* a, const AttentionProblem* b) {
    return a->B == b->B && a->NH == b->NH && a->HS == b->HS && a->Tq == b->Tq && a->Tk == b->Tk &&
           a->qpos.off == b->qpos.off && a->qpos.stride == b->qpos.stride &&
           a->kpos.off == b->kpos.off && a->kpos.stride == b->kpos.stride;
}

// Failures of this rank, each reported on one line.
static int compare(const Mesh* m, Comm* comm, const ComputeRecorder* real_calls,
                   const TokenLayout* layout, const Simulation* sim) {
    const RankRun* r = &sim->rank[m->sp_index];
    int failures = 0;
    for (int ph = 0; ph < 2; ph++)
        for (int k = 0; k < COMM_NKINDS; k++) {
            CommCount sim_count = {0, 0, 0};
            for (int j = 0; j < r->nops; j++) {
                if (r->op[j].phase != (CommPhase)ph || r->op[j].kind != (CommKind)k) continue;
                sim_count.bytes += r->op[j].bytes;
                sim_count.messages += r->op[j].messages;
                sim_count.calls++;
            }
            const CommCount mpi = comm_count(comm, 0, (CommPhase)ph, (CommKind)k);
            if (mpi.bytes != sim_count.bytes || mpi.messages != sim_count.messages ||
                mpi.calls != sim_count.calls) {
                printf("rank %d %s %s: MPI run %lld bytes %lld messages %lld calls, simulated %lld %lld %lld\n",
                       m->world_rank, comm_phase_name((CommPhase)ph), comm_kind_name((CommKind)k),
                       mpi.bytes, mpi.messages, mpi.calls, sim_count.bytes, sim_count.messages,
                       sim_count.calls);
                failures++;
            }
        }
    if (real_calls->n != r->ncalls) {
        printf("rank %d: MPI run made %d partial-attention calls, simulated %d\n", m->world_rank,
               real_calls->n, r->ncalls);
        failures++;
    }
    for (int j = 0; j < real_calls->n && j < r->ncalls; j++) {
        const ComputeCall *a = &real_calls->call[j], *b = &r->call[j];
        if (a->kind != b->kind || a->phase != b->phase || !same_problem(&a->p, &b->p)) {
            printf("rank %d: partial-attention call %d differs from the simulation\n", m->world_rank, j);
            failures++;
        }
    }
    if (memcmp(layout, &r->layout, sizeof *layout)) {
        printf("rank %d: token layout differs from the simulation\n", m->world_rank);
        failures++;
    }
    long long pairs = 0;
    for (int j = 0; j < real_calls->n; j++)
        if (real_calls->call[j].kind == CALL_FORWARD) pairs += attention_visible_pairs(&real_calls->call[j].p);
    if (pairs != closed_visible_pairs(sim, m->sp_index)) {
        printf("rank %d: the MPI run's calls cover %lld unmasked pairs, the closed form %lld\n",
               m->world_rank, pairs, closed_visible_pairs(sim, m->sp_index));
        failures++;
    }
    return failures;
}

int explain_check_mpi(const ExplainShape* s, int* argc, char*** argv) {
    int world_rank, world_size;
    comm_mpi_init(argc, argv, &world_rank, &world_size);
    char err[ERR_LEN];
    Mesh m;
    if (mesh_init(&m, s->dp, s->pq, s->pkv, world_rank, world_size, err))
        fail_msg("explain --check-mpi: %s (run it under mpirun with dp*pq*pkv ranks)", err);
    Comm* comm = comm_mpi_create(&m, 1);
    AttentionLayer* layer = explain_layer_create(comm, s);
    const int Tl = (int)(s->T / m.P), C = s->NH * s->HS;
    const size_t nqkv = (size_t)s->B * Tl * 3 * C, nout = (size_t)s->B * Tl * C;
    real* qkv = xmalloc(nqkv * sizeof(real), "explain QKV");
    real* dout = xmalloc(nout * sizeof(real), "explain dout");
    unsigned state = 12345u + 7919u * (unsigned)world_rank;   // values in [-1, 1)
    for (size_t i = 0; i < nqkv; i++) qkv[i] = (real)((state = state * 1664525u + 1013904223u) >> 8) / (1 << 23) - 1;
    for (size_t i = 0; i < nout; i++) dout[i] = (real)((state = state * 1664525u + 1013904223u) >> 8) / (1 << 23) - 1;
    ComputeRecorder calls = {0};
    calls.run_kernels = 1;
    DocumentBounds docs = explain_documents(s);
    explain_run_layer(layer, comm, s, docs, qkv, dout, &calls);

    Simulation* sim = simulate(s);
    int failures = compare(&m, comm, &calls, &layer->positions, sim);
    if (!failures)
        printf("rank %d (SP %d): %d operations, %d partial-attention calls, %lld + %lld bytes: MPI run = simulation\n",
               world_rank, m.sp_index, sim->rank[m.sp_index].nops, calls.n,
               rank_bytes(&sim->rank[m.sp_index], COMM_FORWARD), rank_bytes(&sim->rank[m.sp_index], COMM_BACKWARD));
    fflush(stdout);
    double total = failures;
    comm_all_reduce_host(comm, MESH_WORLD, &total, 1, COMM_F64);
    simulation_free(sim);
    compute_recorder_free(&calls);
    explain_documents_free(&docs);
    free(qkv);
    free(dout);
    attention_layer_free(layer);
    comm_destroy(comm);
    comm_mpi_finalize();
    return total > 0 ? 1 : 0;
}
