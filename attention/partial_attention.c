// Tiled ("flash-style") partial causal attention on the CPU. Scores live only as one
// TILE_Q x TILE_K block per thread; the tile products go through CBLAS on strided pointers
// straight into the caller's Q, K, V, O rows, so nothing is copied or transposed.
#include "attention/partial_attention.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "comm/fail.h"

enum { TILE_Q = ATTENTION_CPU_TILE_ROWS, TILE_K = 64 };

static long query_position(const AttentionProblem* p, int i) { return p->qpos.off + p->qpos.stride * i; }

static void check_problem(const AttentionProblem* p) {
    CHECK(p->B > 0 && p->NH > 0 && p->HS > 0 && p->Tq >= 0 && p->Tk >= 0, "caller bug",
          "attention problem has a non-positive size (B=%d NH=%d HS=%d Tq=%d Tk=%d)",
          p->B, p->NH, p->HS, p->Tq, p->Tk);
    CHECK(p->NKV > 0 && p->NH % p->NKV == 0, "caller bug",
          "attention problem: %d key/value heads do not divide %d query heads", p->NKV, p->NH);
    CHECK(p->qpos.stride > 0 && p->kpos.stride > 0, "positions must increase with the local index",
          "attention strides must be positive (q stride %ld, k stride %ld)",
          p->qpos.stride, p->kpos.stride);
    CHECK(p->window >= 0, "caller bug", "attention window %ld is negative", p->window);
    CHECK(!p->docs.start || (p->docs.end && p->docs.T > 0), "caller bug",
          "document bounds without their end positions or length (T=%d)", p->docs.T);
}

void attention_partial_forward(const AttentionProblem* p,
                               const real* q, int ldq, const real* k, int ldk,
                               const real* v, int ldv, real* o, int ldo, real* lse) {
    check_problem(p);
    const int HS = p->HS, Tq = p->Tq;
    const real scale = (real)1 / rsqrt((real)HS);
    const int qtiles = (Tq + TILE_Q - 1) / TILE_Q;
    const long tasks = (long)p->B * p->NH * qtiles;

#pragma omp parallel for schedule(dynamic, 1)
    for (long task = 0; task < tasks; task++) {
        const int qt = (int)(task % qtiles);
        const int h = (int)(task / qtiles % p->NH);
        const int b = (int)(task / qtiles / p->NH);
        const int i0 = qt * TILE_Q;
        const int nq = Tq - i0 < TILE_Q ? Tq - i0 : TILE_Q;
        const real* qb = q + ((long)b * Tq + i0) * ldq + (long)h * HS;      // (nq, HS) ld ldq
        const long kvoff = (long)attention_kv_head(p->NH, p->NKV, h) * HS;
        const real* kb = k + (long)b * p->Tk * ldk + kvoff;                 // (Tk, HS) ld ldk
        const real* vb = v + (long)b * p->Tk * ldv + kvoff;                 // (Tk, HS) ld ldv
        real* ob = o + ((long)b * Tq + i0) * ldo + (long)h * HS;            // (nq, HS) ld ldo
        real* lseb = lse + ((long)b * p->NH + h) * Tq + i0;                 // (nq)

        real s[TILE_Q * TILE_K];   // scores, then probabilities, of one tile
        real row_max[TILE_Q], row_sum[TILE_Q];
        int nvis[TILE_Q], nlo[TILE_Q];   // row i sees the keys [nlo[i], nvis[i])
        for (int i = 0; i < nq; i++) {
            row_max[i] = -INFINITY;
            row_sum[i] = 0;
            nvis[i] = attention_key_end(p, query_position(p, i0 + i));
            nlo[i] = attention_key_begin(p, b, query_position(p, i0 + i));
            memset(ob + (long)i * ldo, 0, sizeof(real) * HS);
        }
        // Keys beyond what the last (latest) query sees, and under a window or a document mask
        // those before what the first (earliest) sees, are masked for the whole tile: skip. (Both
        // lower edges grow with the position, so the first query's is the tile's lowest.)
        int kbegin, kend;
        attention_tile_keys(p, b, i0, nq, &kbegin, &kend);
        for (int j0 = kbegin; j0 < kend; j0 += TILE_K) {
            const int nk = kend - j0 < TILE_K ? kend - j0 : TILE_K;
            // s = scale * Q K^T: (nq, nk)
            cblas_rgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, HS, scale,
                        qb, ldq, kb + (long)j0 * ldk, ldk, 0, s, TILE_K);
            for (int i = 0; i < nq; i++) {
                real* si = s + i * TILE_K;
                int nv = nvis[i] - j0;                 // visible keys of this row in the tile:
                if (nv > nk) nv = nk;                  // columns [lo, nv)
                const int lo = nlo[i] > j0 ? nlo[i] - j0 : 0;
                if (nv <= lo) {
                    for (int j = 0; j < nk; j++) si[j] = 0;
                    continue;
                }
                real m = row_max[i];
                for (int j = lo; j < nv; j++) m = si[j] > m ? si[j] : m;
                const real correction = rexp(row_max[i] - m);   // 0 when the row was empty
                real sum = 0;
                for (int j = lo; j < nv; j++) {
                    si[j] = rexp(si[j] - m);
                    sum += si[j];
                }
                for (int j = 0; j < lo; j++) si[j] = 0;
                for (int j = nv; j < nk; j++) si[j] = 0;
                row_sum[i] = row_sum[i] * correction + sum;
                row_max[i] = m;
                if (correction != 1) {
                    real* oi = ob + (long)i * ldo;
                    for (int c = 0; c < HS; c++) oi[c] *= correction;
                }
            }
            // o += P V: (nq, HS)
            cblas_rgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HS, nk, 1,
                        s, TILE_K, vb + (long)j0 * ldv, ldv, 1, ob, ldo);
        }
        for (int i = 0; i < nq; i++) {
            if (row_sum[i] == 0) {   // no visible key: the empty partial (o stays 0)
                lseb[i] = -INFINITY;
                continue;
            }
            const real inv = 1 / row_sum[i];
            real* oi = ob + (long)i * ldo;
            for (int c = 0; c < HS; c++) oi[c] *= inv;
            lseb[i] = row_max[i] + rlog(row_sum[i]);
        }
    }
}

void attention_row_dot(const AttentionProblem* p, const real* o, int ldo,
                       const real* dout, int lddo, real* d) {
    const int HS = p->HS, Tq = p->Tq;
#pragma omp parallel for collapse(2)
    for (int b = 0; b < p->B; b++) {
        for (int h = 0; h < p->NH; h++) {
            for (int i = 0; i < Tq; i++) {
                const real* oi = o + ((long)b * Tq + i) * ldo + (long)h * HS;
                const real* gi = dout + ((long)b * Tq + i) * lddo + (long)h * HS;
                real acc = 0;
                for (int c = 0; c < HS; c++) acc += oi[c] * gi[c];
                d[((long)b * p->NH + h) * Tq + i] = acc;
            }
        }
    }
}

// One (sequence, head) of the backward: loops over key tiles, and for each over the query tiles
// that see any of its keys. Everything accumulates into the caller's dq, dk, dv rows.
static void backward_one_head(const AttentionProblem* p, int b, int h,
                              const real* q, int ldq, const real* k, int ldk,
                              const real* v, int ldv, const real* dout, int lddo,
                              const real* lse, const real* d,
                              real* dq, int lddq, real* dk, int lddk, real* dv, int lddv) {
    const int HS = p->HS, Tq = p->Tq, Tk = p->Tk;
    const real scale = (real)1 / rsqrt((real)HS);
    const long qrow = (long)b * Tq, krow = (long)b * Tk, hoff = (long)h * HS;
    const long kvoff = (long)attention_kv_head(p->NH, p->NKV, h) * HS;
    const real* lseh = lse + ((long)b * p->NH + h) * Tq;
    const real* dh = d + ((long)b * p->NH + h) * Tq;
    real pt[TILE_Q * TILE_K];   // probabilities P of one tile (nq, nk)
    real dst[TILE_Q * TILE_K];  // dP, then dS (nq, nk)

    for (int i0 = 0; i0 < Tq; i0 += TILE_Q) {
        const int nq = Tq - i0 < TILE_Q ? Tq - i0 : TILE_Q;
        int kbegin, kend;
        attention_tile_keys(p, b, i0, nq, &kbegin, &kend);
        const real* qi = q + (qrow + i0) * ldq + hoff;
        const real* gi = dout + (qrow + i0) * lddo + hoff;
        real* dqi = dq + (qrow + i0) * lddq + hoff;
        for (int j0 = kbegin; j0 < kend; j0 += TILE_K) {
            const int nk = kend - j0 < TILE_K ? kend - j0 : TILE_K;
            const real* kj = k + (krow + j0) * ldk + kvoff;
            const real* vj = v + (krow + j0) * ldv + kvoff;
            // P = exp(scale * Q K^T - lse), zero where masked
            cblas_rgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, HS, scale,
                        qi, ldq, kj, ldk, 0, pt, TILE_K);
            for (int i = 0; i < nq; i++) {
                int nv = attention_key_end(p, query_position(p, i0 + i)) - j0;   // columns [lo, nv)
                if (nv > nk) nv = nk;
                const int lo0 = attention_key_begin(p, b, query_position(p, i0 + i)) - j0;
                const int lo = lo0 > 0 ? lo0 : 0;
                const real l = lseh[i0 + i];
                real* pi = pt + i * TILE_K;
                int j = 0;
                for (; j < lo && j < nk; j++) pi[j] = 0;
                if (l != -INFINITY) for (; j < nv; j++) pi[j] = rexp(pi[j] - l);
                for (; j < nk; j++) pi[j] = 0;
            }
            // dV += P^T dO: (nk, HS)
            cblas_rgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HS, nq, 1,
                        pt, TILE_K, gi, lddo, 1, dv + (krow + j0) * lddv + kvoff, lddv);
            // dP = dO V^T: (nq, nk); dS = P * (dP - D)
            cblas_rgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, HS, 1,
                        gi, lddo, vj, ldv, 0, dst, TILE_K);
            for (int i = 0; i < nq; i++) {
                const real di = dh[i0 + i];
                for (int j = 0; j < nk; j++) {
                    dst[i * TILE_K + j] = pt[i * TILE_K + j] * (dst[i * TILE_K + j] - di);
                }
            }
            // dQ += scale dS K: (nq, HS); dK += scale dS^T Q: (nk, HS)
            cblas_rgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HS, nk, scale,
                        dst, TILE_K, kj, ldk, 1, dqi, lddq);
            cblas_rgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HS, nq, scale,
                        dst, TILE_K, qi, ldq, 1, dk + (krow + j0) * lddk + kvoff, lddk);
        }
    }
}

void attention_partial_backward(const AttentionProblem* p,
                                const real* q, int ldq, const real* k, int ldk,
                                const real* v, int ldv, const real* dout, int lddo,
                                const real* lse, const real* d,
                                real* dq, int lddq, real* dk, int lddk, real* dv, int lddv) {
    check_problem(p);
    // One task per (sequence, K/V head): its dq, dk, dv slices are disjoint from every other
    // task's. The query heads of a group add into their dk, dv one after another, in head order.
    const int group = p->NH / p->NKV;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < p->B; b++) {
        for (int kvh = 0; kvh < p->NKV; kvh++) {
            for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                backward_one_head(p, b, h, q, ldq, k, ldk, v, ldv, dout, lddo, lse, d,
                                  dq, lddq, dk, lddk, dv, lddv);
            }
        }
    }
}

void attention_merge(int B, int NH, int HS, int T, real* o_a, int lda, real* lse_a,
                     const real* o_b, int ldb, const real* lse_b) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const long li = ((long)b * NH + h) * T + t;
                const real la = lse_a[li], lb = lse_b[li];
                if (lb == -INFINITY) continue;            // b is empty: a unchanged
                real* oa = o_a + ((long)b * T + t) * lda + (long)h * HS;
                const real* ob = o_b + ((long)b * T + t) * ldb + (long)h * HS;
                const real m = la > lb ? la : lb;
                const real l = m + rlog(rexp(la - m) + rexp(lb - m));
                const real wa = rexp(la - l), wb = rexp(lb - l);   // wa = 0 when a is empty
                for (int c = 0; c < HS; c++) oa[c] = wa * oa[c] + wb * ob[c];
                lse_a[li] = l;
            }
        }
    }
}
