// The wrappers of record_compute.h. __real_X is the backend's X (dist_ops_cpu.c); the schedules'
// references to X resolve to __wrap_X because the program is linked with --wrap=X.
#include "explain/record_compute.h"

#include <stdlib.h>

#include "attention/dist_ops.h"
#include "comm/fail.h"

// The recorder calls go to; owned by whoever called compute_record_into.
static ComputeRecorder* target;

void compute_record_into(ComputeRecorder* r) { target = r; }

void compute_recorder_free(ComputeRecorder* r) {
    free(r->call);
    r->call = NULL;
    r->n = r->cap = 0;
}

// Records a call; returns whether the kernel should run.
static int record(CallKind kind, const AttentionProblem* p) {
    if (!target) return 1;
    if (target->n == target->cap) {
        target->cap = target->cap ? 2 * target->cap : 64;
        target->call = realloc(target->call, (size_t)target->cap * sizeof *target->call);
        CHECK(target->call, "out of memory", "record_compute: %d calls", target->cap);
    }
    ComputeCall* c = &target->call[target->n++];
    c->kind = kind;
    c->phase = target->phase;
    c->p = *p;
    return target->run_kernels;
}

void __real_dist_attention_forward(const AttentionProblem* p, const real* q, int ldq,
                                   const real* k, int ldk, const real* v, int ldv, real_acc* o,
                                   int ldo, real_acc* lse);
void __real_dist_attention_backward(const AttentionProblem* p, const real* q, int ldq,
                                    const real* k, int ldk, const real* v, int ldv,
                                    const real* dout, int lddo, const real_acc* lse,
                                    const real_acc* d, real_acc* dq, int lddq, real_acc* dk,
                                    int lddk, real_acc* dv, int lddv);
void __real_dist_attention_merge(int B, int NH, int HS, int T, real_acc* o_a, int lda,
                                 real_acc* lse_a, const real_acc* o_b, int ldb,
                                 const real_acc* lse_b);
void __real_dist_attention_forward_merge(const AttentionProblem* p, const real* q, int ldq,
                                         const real* k, int ldk, const real* v, int ldv,
                                         real_acc* o, int ldo, real_acc* lse, real_acc* step_o,
                                         real_acc* step_lse);

// A merge of T query rows, recorded as a problem with no keys.
static int record_merge(int B, int NH, int HS, int T) {
    const AttentionProblem rows = attention_problem(B, NH, HS, T, 0, token_positions(0, 1),
                                                    token_positions(0, 1));
    return record(CALL_MERGE, &rows);
}
void __wrap_dist_attention_forward(const AttentionProblem* p, const real* q, int ldq,
                                   const real* k, int ldk, const real* v, int ldv, real_acc* o,
                                   int ldo, real_acc* lse) {
    if (record(CALL_FORWARD, p)) __real_dist_attention_forward(p, q, ldq, k, ldk, v, ldv, o, ldo, lse);
}

void __wrap_dist_attention_backward(const AttentionProblem* p, const real* q, int ldq,
                                    const real* k, int ldk, const real* v, int ldv,
                                    const real* dout, int lddo, const real_acc* lse,
                                    const real_acc* d, real_acc* dq, int lddq, real_acc* dk,
                                    int lddk, real_acc* dv, int lddv) {
    if (record(CALL_BACKWARD, p))
        __real_dist_attention_backward(p, q, ldq, k, ldk, v, ldv, dout, lddo, lse, d, dq, lddq,
                                       dk, lddk, dv, lddv);
}

void __wrap_dist_attention_merge(int B, int NH, int HS, int T, real_acc* o_a, int lda,
                                 real_acc* lse_a, const real_acc* o_b, int ldb,
                                 const real_acc* lse_b) {
    if (record_merge(B, NH, HS, T))
        __real_dist_attention_merge(B, NH, HS, T, o_a, lda, lse_a, o_b, ldb, lse_b);
}

// Recorded as what it computes: a forward, then the merge of its rows.
void __wrap_dist_attention_forward_merge(const AttentionProblem* p, const real* q, int ldq,
                                         const real* k, int ldk, const real* v, int ldv,
                                         real_acc* o, int ldo, real_acc* lse, real_acc* step_o,
                                         real_acc* step_lse) {
    const int run = record(CALL_FORWARD, p);
    if (record_merge(p->B, p->NH, p->HS, p->Tq) && run)
        __real_dist_attention_forward_merge(p, q, ldq, k, ldk, v, ldv, o, ldo, lse, step_o,
                                            step_lse);
}
