// The fp32 partial-attention kernel against a naive double-precision reference, for every
// (offset, stride) combination that ATTENTION2D meshes (pq, pkv in 1..4) and Ring chunks
// produce, including queries that see no key; and the LSE merge: merging the partials of a
// split key set equals attention over the whole set, forward and backward.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/partial_attention.h"
#include "model/documents.h"
#include "model/gpt.h"

enum { B = 2, NH = 2, HS = 16, C = NH * HS };
static const double TOL = 1e-5;

static int failures, checks;
static double worst_out, worst_grad;

static unsigned long long rng = 1234567;
static float uniform(void) {   // in [-1, 1)
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) * 0x1.0p-24 * 2.0 - 1.0);
}

static float* random_rows(int T) {
    float* a = malloc(sizeof(float) * B * T * C);
    for (long i = 0; i < (long)B * T * C; i++) a[i] = uniform();
    return a;
}

static float* poisoned(long n) {   // NaN everywhere, so an unwritten element fails
    float* a = malloc(sizeof(float) * n);
    for (long i = 0; i < n; i++) a[i] = NAN;
    return a;
}

// max |a - ref| / max |ref| over n elements; NaN anywhere counts as infinite error.
static double rel_error(const float* a, const double* ref, long n) {
    double md = 0, mr = 0;
    for (long i = 0; i < n; i++) {
        const double d = fabs(a[i] - ref[i]);
        if (!(d == d)) return INFINITY;
        md = d > md ? d : md;
        mr = fabs(ref[i]) > mr ? fabs(ref[i]) : mr;
    }
    return md / (mr > 0 ? mr : 1);
}

static void expect(const char* what, const char* label, double err, double* worst) {
    checks++;
    if (err > *worst) *worst = err;
    if (!(err <= TOL)) {
        failures++;
        printf("FAIL %-10s %-28s rel err %.2e\n", what, label, err);
    }
}

// Naive reference on the full positions of a problem, in double. With lse_in/d_in NULL it is
// the forward (o, lse); otherwise the backward with the given final lse and d.
static void naive(const AttentionProblem* p, const float* q, const float* k, const float* v,
                  double* o, double* lse, const float* dout, const double* lse_in,
                  const double* d_in, double* dq, double* dk, double* dv) {
    const double scale = 1 / sqrt((double)HS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < p->Tq; i++) {
                const long qp = p->qpos.off + p->qpos.stride * i;
                const float* qi = q + ((long)b * p->Tq + i) * C + h * HS;
                double* s = malloc(sizeof(double) * (p->Tk ? p->Tk : 1));
                double m = -INFINITY;
                for (int j = 0; j < p->Tk; j++) {
                    const long kp = p->kpos.off + p->kpos.stride * j;
                    const float* kj = k + ((long)b * p->Tk + j) * C + h * HS;
                    double acc = 0;
                    for (int c = 0; c < HS; c++) acc += (double)qi[c] * kj[c];
                    const int seen = kp <= qp && (p->window == 0 || kp > qp - p->window) &&
                                     (!p->docs.start || kp >= p->docs.start[(long)b * p->docs.T + qp]);
                    s[j] = seen ? acc * scale : -INFINITY;
                    m = s[j] > m ? s[j] : m;
                }
                const long li = ((long)b * NH + h) * p->Tq + i;
                double l;
                if (lse_in) {
                    l = lse_in[li];
                } else {
                    double sum = 0;
                    for (int j = 0; j < p->Tk; j++) sum += m == -INFINITY ? 0 : exp(s[j] - m);
                    l = sum > 0 ? m + log(sum) : -INFINITY;
                    lse[li] = l;
                }
                const long orow = ((long)b * p->Tq + i) * C + h * HS;
                if (!lse_in) {
                    for (int c = 0; c < HS; c++) o[orow + c] = 0;
                    for (int j = 0; j < p->Tk; j++) {
                        if (s[j] == -INFINITY) continue;
                        const double pj = exp(s[j] - l);
                        const float* vj = v + ((long)b * p->Tk + j) * C + h * HS;
                        for (int c = 0; c < HS; c++) o[orow + c] += pj * vj[c];
                    }
                } else {
                    for (int j = 0; j < p->Tk; j++) {
                        if (s[j] == -INFINITY) continue;
                        const double pj = exp(s[j] - l);
                        const long krow = ((long)b * p->Tk + j) * C + h * HS;
                        double dp = 0;
                        for (int c = 0; c < HS; c++) dp += (double)dout[orow + c] * v[krow + c];
                        const double ds = pj * (dp - d_in[li]);
                        for (int c = 0; c < HS; c++) {
                            dv[krow + c] += pj * dout[orow + c];
                            dq[orow + c] += ds * k[krow + c] * scale;
                            dk[krow + c] += ds * q[orow + c] * scale;
                        }
                    }
                }
                free(s);
            }
}

// Selects rows of a (B, T, C) tensor: local row i of the result = full row off + stride * i.
static float* take_rows(const float* full, int T, long off, long stride, int n) {
    float* a = malloc(sizeof(float) * B * n * C);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++)
            memcpy(a + ((long)b * n + i) * C, full + ((long)b * T + off + stride * i) * C,
                   sizeof(float) * C);
    return a;
}

static double* take_rows_d(const double* full, int T, long off, long stride, int n, int width) {
    double* a = malloc(sizeof(double) * B * n * width);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++)
            memcpy(a + ((long)b * n + i) * width, full + ((long)b * T + off + stride * i) * width,
                   sizeof(double) * width);
    return a;
}

// lse/d have layout (B, NH, T): select positions per (b, h).
static double* take_stats(const double* full, int T, long off, long stride, int n) {
    double* a = malloc(sizeof(double) * B * NH * n);
    for (int bh = 0; bh < B * NH; bh++)
        for (int i = 0; i < n; i++) a[(long)bh * n + i] = full[(long)bh * T + off + stride * i];
    return a;
}

static float* to_float(const double* a, long n) {
    float* f = malloc(sizeof(float) * n);
    for (long i = 0; i < n; i++) f[i] = (float)a[i];
    return f;
}

// The document mask of the next check_split calls (docs.start NULL: none).
static DocumentBounds test_docs;

// One query set (off_q, sq, nq) against a split of the keys into `parts` sets
// (koff[c], sk, nk): checks each partial forward and backward against the naive reference,
// and that merging the partials (and summing the backward pieces) gives full attention.
static void check_split(int T, long window, long qoff, long sq, int nq, int parts,
                        const long* koff, long sk, int nk, const char* label) {
    float *q = random_rows(T), *k = random_rows(T), *v = random_rows(T), *g = random_rows(T);
    // Full single-device reference.
    AttentionProblem full = {.B = B, .NH = NH, .NKV = NH, .HS = HS, .Tq = T, .Tk = T, .qpos = {0, 1},
                             .kpos = {0, 1}, .window = window, .docs = test_docs};
    double* o_full = calloc((size_t)B * T * C, sizeof(double));
    double* lse_full = calloc((size_t)B * NH * T, sizeof(double));
    naive(&full, q, k, v, o_full, lse_full, NULL, NULL, NULL, NULL, NULL, NULL);
    double* d_full = calloc((size_t)B * NH * T, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double acc = 0;
                for (int c = 0; c < HS; c++)
                    acc += o_full[((long)b * T + t) * C + h * HS + c] *
                           g[((long)b * T + t) * C + h * HS + c];
                d_full[((long)b * NH + h) * T + t] = acc;
            }
    double* dq_full = calloc((size_t)B * T * C, sizeof(double));
    double* dk_full = calloc((size_t)B * T * C, sizeof(double));
    double* dv_full = calloc((size_t)B * T * C, sizeof(double));
    naive(&full, q, k, v, NULL, NULL, g, lse_full, d_full, dq_full, dk_full, dv_full);

    float *ql = take_rows(q, T, qoff, sq, nq), *gl = take_rows(g, T, qoff, sq, nq);
    double* lse_l = take_stats(lse_full, T, qoff, sq, nq);
    double* d_l = take_stats(d_full, T, qoff, sq, nq);
    float *lse_lf = to_float(lse_l, (long)B * NH * nq), *d_lf = to_float(d_l, (long)B * NH * nq);
    float *merged_o = NULL, *merged_lse = NULL;
    float* dq_sum = calloc((size_t)B * nq * C, sizeof(float));
    for (int part = 0; part < parts; part++) {
        AttentionProblem p = {.B = B, .NH = NH, .NKV = NH, .HS = HS, .Tq = nq, .Tk = nk,
                              .qpos = {qoff, sq}, .kpos = {koff[part], sk}, .window = window,
                              .docs = test_docs};
        float *kl = take_rows(k, T, koff[part], sk, nk), *vl = take_rows(v, T, koff[part], sk, nk);
        float *o = poisoned((long)B * nq * C), *lse = poisoned((long)B * NH * nq);
        attention_partial_forward(&p, ql, C, kl, C, vl, C, o, C, lse);
        double* o_ref = calloc((size_t)B * nq * C, sizeof(double));
        double* lse_ref = calloc((size_t)B * NH * nq, sizeof(double));
        naive(&p, ql, kl, vl, o_ref, lse_ref, NULL, NULL, NULL, NULL, NULL, NULL);
        expect("partial o", label, rel_error(o, o_ref, (long)B * nq * C), &worst_out);
        // lse: equal including the -inf of empty rows.
        long bad = 0;
        for (long i = 0; i < (long)B * NH * nq; i++) {
            if (isinf(lse_ref[i]) ? !(isinf(lse[i]) && lse[i] < 0)
                                  : !(fabs(lse[i] - lse_ref[i]) <= TOL * (1 + fabs(lse_ref[i]))))
                bad++;
        }
        expect("partial lse", label, bad ? INFINITY : 0, &worst_out);
        // Backward of this partial with the FINAL lse and d, against the naive one.
        float* dq = calloc((size_t)B * nq * C, sizeof(float));
        float* dk = calloc((size_t)B * nk * C, sizeof(float));
        float* dv = calloc((size_t)B * nk * C, sizeof(float));
        attention_partial_backward(&p, ql, C, kl, C, vl, C, gl, C, lse_lf, d_lf, dq, C, dk, C,
                                   dv, C);
        double* dk_ref = take_rows_d(dk_full, T, koff[part], sk, nk, C);
        double* dv_ref = take_rows_d(dv_full, T, koff[part], sk, nk, C);
        if (sq == 1 && nq == T) {   // this query set is every query: dk, dv are complete
            expect("dk", label, rel_error(dk, dk_ref, (long)B * nk * C), &worst_grad);
            expect("dv", label, rel_error(dv, dv_ref, (long)B * nk * C), &worst_grad);
        }
        for (long i = 0; i < (long)B * nq * C; i++) dq_sum[i] += dq[i];
        if (!merged_o) {
            merged_o = o;
            merged_lse = lse;
        } else {
            attention_merge(B, NH, HS, nq, merged_o, C, merged_lse, o, C, lse);
            free(o);
            free(lse);
        }
        free(kl); free(vl); free(o_ref); free(lse_ref); free(dq); free(dk); free(dv);
        free(dk_ref); free(dv_ref);
    }
    double* o_want = take_rows_d(o_full, T, qoff, sq, nq, C);
    expect("merged o", label, rel_error(merged_o, o_want, (long)B * nq * C), &worst_out);
    expect("merged lse", label, rel_error(merged_lse, lse_l, (long)B * NH * nq), &worst_out);
    double* dq_want = take_rows_d(dq_full, T, qoff, sq, nq, C);
    expect("summed dq", label, rel_error(dq_sum, dq_want, (long)B * nq * C), &worst_grad);
    free(o_want); free(dq_want); free(merged_o); free(merged_lse); free(dq_sum);
    free(ql); free(gl); free(lse_l); free(d_l); free(lse_lf); free(d_lf);
    free(q); free(k); free(v); free(g); free(o_full); free(lse_full); free(d_full);
    free(dq_full); free(dk_full); free(dv_full);
}

// Grouped-query attention: NQ query heads over NKV key/value heads (query head h reads K/V head
// h / (NQ / NKV)), against a naive double reference written from that definition alone: the
// forward, and the backward whose dK, dV sum the group's query heads. Queries at qoff + sq i (a
// mesh row's or Ring chunk's), keys at 0, 1, 2, ...; dq, dk, dv start at 1 (the kernel adds).
static void check_gqa(int NQ, int NKV, int T, long window, long qoff, long sq, int nq) {
    char label[64];
    snprintf(label, sizeof label, "gqa %d/%d T%d window %ld q %ld+%ld", NQ, NKV, T, window, qoff, sq);
    const int G = NQ / NKV, CQ = NQ * HS, CK = NKV * HS;
    const long nqr = (long)B * nq * CQ, nkr = (long)B * T * CK, nl = (long)B * NQ * nq;
    float *q = malloc(sizeof(float) * nqr), *g = malloc(sizeof(float) * nqr);
    float *k = malloc(sizeof(float) * nkr), *v = malloc(sizeof(float) * nkr);
    for (long i = 0; i < nqr; i++) q[i] = uniform(), g[i] = uniform();
    for (long i = 0; i < nkr; i++) k[i] = uniform(), v[i] = uniform();
    AttentionProblem p = attention_problem(B, NQ, HS, nq, T, token_positions(qoff, sq),
                                           token_positions(0, 1));
    p.NKV = NKV;
    p.window = window;
    float *o = poisoned(nqr), *lse = poisoned(nl), *d = poisoned(nl);
    attention_partial_forward(&p, q, CQ, k, CK, v, CK, o, CQ, lse);
    attention_row_dot(&p, o, CQ, g, CQ, d);
    float *dq = malloc(sizeof(float) * nqr), *dk = malloc(sizeof(float) * nkr);
    float* dv = malloc(sizeof(float) * nkr);
    for (long i = 0; i < nqr; i++) dq[i] = 1;
    for (long i = 0; i < nkr; i++) dk[i] = dv[i] = 1;
    attention_partial_backward(&p, q, CQ, k, CK, v, CK, g, CQ, lse, d, dq, CQ, dk, CK, dv, CK);

    double *o_ref = calloc(nqr, sizeof(double)), *lse_ref = calloc(nl, sizeof(double));
    double *dq_ref = calloc(nqr, sizeof(double)), *dk_ref = calloc(nkr, sizeof(double));
    double* dv_ref = calloc(nkr, sizeof(double));
    for (long i = 0; i < nqr; i++) dq_ref[i] = 1;
    for (long i = 0; i < nkr; i++) dk_ref[i] = dv_ref[i] = 1;
    double* w = malloc(sizeof(double) * T);   // one row's probabilities
    const double scale = 1 / sqrt((double)HS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NQ; h++)
            for (int i = 0; i < nq; i++) {
                const long qp = qoff + sq * i, qr = ((long)b * nq + i) * CQ + h * HS;
                double m = -INFINITY, sum = 0, dsum = 0;
                for (int j = 0; j < T; j++) {
                    const long kr = ((long)b * T + j) * CK + (h / G) * HS;
                    double acc = 0;
                    for (int c = 0; c < HS; c++) acc += (double)q[qr + c] * k[kr + c];
                    w[j] = j <= qp && (window == 0 || j > qp - window) ? acc * scale : -INFINITY;
                    m = w[j] > m ? w[j] : m;
                }
                for (int j = 0; j < T; j++) sum += w[j] == -INFINITY ? 0 : exp(w[j] - m);
                lse_ref[((long)b * NQ + h) * nq + i] = m + log(sum);
                for (int j = 0; j < T; j++) {
                    w[j] = w[j] == -INFINITY ? 0 : exp(w[j] - m) / sum;
                    const long kr = ((long)b * T + j) * CK + (h / G) * HS;
                    for (int c = 0; c < HS; c++) o_ref[qr + c] += w[j] * v[kr + c];
                }
                for (int c = 0; c < HS; c++) dsum += o_ref[qr + c] * g[qr + c];
                for (int j = 0; j < T; j++) {
                    if (w[j] == 0) continue;
                    const long kr = ((long)b * T + j) * CK + (h / G) * HS;
                    double dp = 0;
                    for (int c = 0; c < HS; c++) dp += (double)g[qr + c] * v[kr + c];
                    const double ds = w[j] * (dp - dsum) * scale;
                    for (int c = 0; c < HS; c++) {
                        dq_ref[qr + c] += ds * k[kr + c];
                        dk_ref[kr + c] += ds * q[qr + c];
                        dv_ref[kr + c] += w[j] * g[qr + c];
                    }
                }
            }
    expect("gqa o", label, rel_error(o, o_ref, nqr), &worst_out);
    expect("gqa lse", label, rel_error(lse, lse_ref, nl), &worst_out);
    expect("gqa dq", label, rel_error(dq, dq_ref, nqr), &worst_grad);
    expect("gqa dk", label, rel_error(dk, dk_ref, nkr), &worst_grad);
    expect("gqa dv", label, rel_error(dv, dv_ref, nkr), &worst_grad);
    void* all[] = {q, g, k, v, o, lse, d, dq, dk, dv, o_ref, lse_ref, dq_ref, dk_ref, dv_ref, w};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

int main(void) {
    char label[64];
    // ATTENTION2D: rank (r, c) of a pq x pkv mesh holds queries r + pq*m and keys c + pkv*n.
    // For each row r, the partials over c = 0..pkv-1 merge to the row's full attention.
    const int Ts[] = {24, 156};   // one tile, and several tiles with a ragged last one
    for (int ti = 0; ti < 2; ti++) {
        const int T = Ts[ti] / 12 * 12;
        for (int pq = 1; pq <= 4; pq++)
            for (int pkv = 1; pkv <= 4; pkv++)
                for (int r = 0; r < pq; r++) {
                    if (T % pq || T % pkv) continue;
                    long koff[4];
                    for (int c = 0; c < pkv; c++) koff[c] = c;
                    snprintf(label, sizeof label, "T%d mesh %dx%d row %d", T, pq, pkv, r);
                    check_split(T, 0, r, pq, T / pq, pkv, koff, pkv, T / pkv, label);
                }
    }
    // Ring: contiguous chunks; query chunk i against every key chunk (later ones are empty).
    for (int P = 1; P <= 4; P++) {
        const int T = 120, n = T / P;
        for (int i = 0; i < P; i++) {
            long koff[4];
            for (int j = 0; j < P; j++) koff[j] = (long)j * n;
            snprintf(label, sizeof label, "ring P%d chunk %d", P, i);
            check_split(T, 0, (long)i * n, 1, n, P, koff, 1, n, label);
        }
    }
    // Single device with every query (checks dk, dv too), T not a multiple of the tile.
    const long zero = 0;
    check_split(131, 0, 0, 1, 131, 1, &zero, 1, 131, "single T131");
    // Single device with a split of the keys into strided sets (dk, dv checked per part).
    const long koffs[3] = {0, 1, 2};
    check_split(99, 0, 0, 1, 99, 3, koffs, 3, 33, "all queries, keys mod 3");
    // Sliding windows (a query at t sees t - W + 1 .. t): narrower than a tile, across tile edges,
    // one token, and wider than the sequence (= causal); on meshes, Ring chunks (whole chunks
    // outside the window: empty partials) and strided key sets.
    const long windows[] = {1, 5, 70, 200};
    for (int w = 0; w < 4; w++) {
        snprintf(label, sizeof label, "single T131 window %ld", windows[w]);
        check_split(131, windows[w], 0, 1, 131, 1, &zero, 1, 131, label);
        snprintf(label, sizeof label, "keys mod 3 window %ld", windows[w]);
        check_split(99, windows[w], 0, 1, 99, 3, koffs, 3, 33, label);
        for (int r = 0; r < 3; r++) {
            const long kmesh[2] = {0, 1};
            snprintf(label, sizeof label, "T156 mesh 3x2 row %d window %ld", r, windows[w]);
            check_split(156, windows[w], r, 3, 52, 2, kmesh, 2, 78, label);
        }
        for (int i = 0; i < 4; i++) {
            const long kring[4] = {0, 30, 60, 90};
            snprintf(label, sizeof label, "ring P4 chunk %d window %ld", i, windows[w]);
            check_split(120, windows[w], (long)i * 30, 1, 30, 4, kring, 1, 30, label);
        }
    }
    // Document masks (packed sequences): documents of one token, boundaries at and beside tile
    // edges, a first document continued from an earlier sequence, other boundaries in the second
    // sequence; alone and under windows, on one device, meshes, Ring chunks (chunks a query's
    // document does not reach: empty partials) and strided key sets.
    enum { DOC_T = 156, BOUNDARY = 7 };
    int* doc_tokens = malloc(sizeof(int) * B * DOC_T);
    for (int t = 0; t < B * DOC_T; t++) doc_tokens[t] = t % 5;
    const int starts0[] = {3, 4, 5, 40, 63, 64, 65, 100, 128, 155};
    for (int i = 0; i < 10; i++) doc_tokens[starts0[i]] = BOUNDARY;
    for (int t = 0; t < DOC_T; t += 37) doc_tokens[DOC_T + t] = BOUNDARY;
    int* doc_start = malloc(sizeof(int) * B * DOC_T);
    int* doc_end = malloc(sizeof(int) * B * DOC_T);
    document_bounds(doc_tokens, B, DOC_T, BOUNDARY, doc_start, doc_end);
    // Known answers: sequence 0's first document (0..2, no boundary), its one-token documents,
    // its last; sequence 1 begins with a boundary.
    const int want[][3] = {{0, 0, 3}, {2, 0, 3}, {3, 3, 4}, {4, 4, 5}, {5, 5, 40}, {64, 64, 65},
                           {99, 65, 100}, {155, 155, 156}, {DOC_T, 0, 37},
                           {DOC_T + 74, 74, 111}, {2 * DOC_T - 1, 148, 156}};
    for (int i = 0; i < 11; i++) {
        checks++;
        if (doc_start[want[i][0]] != want[i][1] || doc_end[want[i][0]] != want[i][2]) {
            failures++;
            printf("FAIL document bounds of token %d: [%d, %d), expected [%d, %d)\n", want[i][0],
                   doc_start[want[i][0]], doc_end[want[i][0]], want[i][1], want[i][2]);
        }
    }
    test_docs = (DocumentBounds){.start = doc_start, .end = doc_end, .T = DOC_T};
    const long doc_windows[] = {0, 5, 70};
    for (int w = 0; w < 3; w++) {
        const long W = doc_windows[w];
        snprintf(label, sizeof label, "single T%d docs window %ld", DOC_T, W);
        check_split(DOC_T, W, 0, 1, DOC_T, 1, &zero, 1, DOC_T, label);
        const long kmod[4] = {0, 1, 2, 3};
        snprintf(label, sizeof label, "keys mod 4 docs window %ld", W);
        check_split(DOC_T, W, 0, 1, DOC_T, 4, kmod, 4, DOC_T / 4, label);
        for (int r = 0; r < 3; r++) {
            const long kmesh[2] = {0, 1};
            snprintf(label, sizeof label, "mesh 3x2 row %d docs window %ld", r, W);
            check_split(DOC_T, W, r, 3, DOC_T / 3, 2, kmesh, 2, DOC_T / 2, label);
        }
        for (int i = 0; i < 4; i++) {
            const long kring[4] = {0, 39, 78, 117};
            snprintf(label, sizeof label, "ring P4 chunk %d docs window %ld", i, W);
            check_split(DOC_T, W, (long)i * 39, 1, 39, 4, kring, 1, 39, label);
        }
    }
    test_docs = (DocumentBounds){0};
    free(doc_tokens); free(doc_start); free(doc_end);
    // Grouped-query attention: groups of 2 and 4 query heads and multi-query (one K/V head), on
    // one device (causal, and a window across tiles), a mesh row's strided queries, a Ring chunk.
    check_gqa(4, 2, 131, 0, 0, 1, 131);
    check_gqa(4, 1, 131, 70, 0, 1, 131);
    check_gqa(8, 2, 96, 0, 1, 3, 32);
    check_gqa(4, 2, 120, 5, 60, 1, 30);
    // The pairs the trainer's summary counts (document_pairs): documents [0, 3), [3, 5), [5, 6).
    const int six[6] = {0, 0, 0, 3, 3, 5};
    const double pairs[4] = {document_pairs(six, 1, 6, 0), document_pairs(six, 1, 6, 2),
                             document_pairs(NULL, 1, 6, 0), document_pairs(NULL, 1, 6, 2)};
    checks++;
    if (pairs[0] != 10 || pairs[1] != 9 || pairs[2] != 21 || pairs[3] != 11) {
        failures++;
        printf("FAIL document pairs %g %g %g %g, expected 10 9 21 11\n", pairs[0], pairs[1], pairs[2],
               pairs[3]);
    }

    // The FLOPs the MFU counts (model/gpt.h): llm.c's 6 N + 6 L C T for causal layers; a banded
    // layer's pairs per query W - W^2 / (2T): L = 2, C = 8, T = 16, window 4 in layer 0 only:
    // 12 C (3.5 + 8) = 1104 beside the dense 6 L C T = 1536.
    GPTConfig fc = {.max_T = 16, .V = 10, .Vp = 128, .L = 2, .NH = 2, .C = 8};
    const double dense = gpt_flops_per_token(&fc, 100, 16);
    fc.window = 4, fc.window_every = 2;
    const double banded = gpt_flops_per_token(&fc, 100, 16);
    checks++;
    if (dense != 600 + 1536 || banded != 600 + 1104) {
        printf("FAIL flops per token: dense %g (expected 2136), banded %g (expected 1704)\n", dense,
               banded);
        failures++;
    }
    printf("%d checks, %d failed; worst rel err: outputs %.2e, gradients %.2e (tol %.0e)\n",
           checks, failures, worst_out, worst_grad, TOL);
    printf("%s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
