// attention/dist_ops.h on the CPU backend: host memory, plain loops, the CPU partial-attention
// kernels. real_acc is real here (real_stat == real on the CPU), so converting an accumulator is a
// row copy and both comm types are COMM_REAL.
#include "attention/dist_ops.h"

#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

CommType dist_real_comm_type(void) { return COMM_REAL; }
CommType dist_acc_comm_type(void) { return COMM_REAL; }
int dist_host_memory(void) { return 1; }

void* dist_alloc(size_t bytes, const char* what) { return xmalloc(bytes, what); }
void dist_free(void* p) { free(p); }

// memcpy of 0 bytes still wants valid pointers: callers may pass NULL for empty buffers.
void dist_to_backend(void* dst, const void* host, size_t bytes) {
    if (bytes) memcpy(dst, host, bytes);
}
void dist_to_host(void* host, const void* src, size_t bytes) {
    if (bytes) memcpy(host, src, bytes);
}

void dist_copy_rows(void* dst, long ldd, const void* src, long lds, long rows, int w, size_t esize) {
    if (rows <= 0 || w <= 0) return;
    char* d = dst;
    const char* s = src;
    for (long i = 0; i < rows; i++)
        memcpy(d + (size_t)(i * ldd) * esize, s + (size_t)(i * lds) * esize, esize * (size_t)w);
}

void dist_copy_rows_batch(void* dst, long ldd, long dstep, const void* src, long lds, long sstep,
                          int n, long rows, int w, size_t esize) {
    for (int i = 0; i < n; i++)
        dist_copy_rows((char*)dst + (size_t)(i * dstep) * esize, ldd,
                       (const char*)src + (size_t)(i * sstep) * esize, lds, rows, w, esize);
}

// Sequence b of block g holds the rows g, g + G, g + 2G, ... of sequence b of the rows side: one
// strided row copy per (g, b), the rows side at stride G * ld, the block side tight (stride w).
// Byte offsets of the first of those rows on each side:
static size_t rows_offset(int g, int b, int G, int Tl, long ld, size_t esize) {
    return (size_t)(((long)b * G * Tl + g) * ld) * esize;
}
static size_t block_offset(int g, int b, int Tl, int w, long bstride, size_t esize) {
    return (size_t)(g * bstride + (long)b * Tl * w) * esize;
}

void dist_blocks_to_rows(void* rows, long ld, const void* blocks, long bstride, int G, int B,
                         int Tl, int w, size_t esize) {
    for (int g = 0; g < G; g++)
        for (int b = 0; b < B; b++)
            dist_copy_rows((char*)rows + rows_offset(g, b, G, Tl, ld, esize), G * ld,
                           (const char*)blocks + block_offset(g, b, Tl, w, bstride, esize), w, Tl, w,
                           esize);
}

void dist_rows_to_blocks(void* blocks, long bstride, const void* rows, long ld, int G, int B,
                         int Tl, int w, size_t esize) {
    for (int g = 0; g < G; g++)
        for (int b = 0; b < B; b++)
            dist_copy_rows((char*)blocks + block_offset(g, b, Tl, w, bstride, esize), w,
                           (const char*)rows + rows_offset(g, b, G, Tl, ld, esize), G * ld, Tl, w,
                           esize);
}

void dist_acc_to_real(real* dst, long ldd, const real_acc* src, long lds, long rows, int w) {
    dist_copy_rows(dst, ldd, src, lds, rows, w, sizeof(real));
}

void dist_zero_acc(real_acc* x, size_t n) {
    if (n) memset(x, 0, n * sizeof(real_acc));   // all-zero bits are +0.0 in IEEE float and double
}

void dist_add_acc(real_acc* y, const real_acc* x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void dist_attention_forward(const AttentionProblem* p, const real* q, int ldq, const real* k,
                            int ldk, const real* v, int ldv, real_acc* o, int ldo, real_acc* lse) {
    attention_partial_forward(p, q, ldq, k, ldk, v, ldv, o, ldo, lse);
}

void dist_attention_forward_merge(const AttentionProblem* p, const real* q, int ldq, const real* k,
                                  int ldk, const real* v, int ldv, real_acc* o, int ldo,
                                  real_acc* lse, real_acc* step_o, real_acc* step_lse) {
    attention_partial_forward(p, q, ldq, k, ldk, v, ldv, step_o, ldo, step_lse);
    attention_merge(p->B, p->NH, p->HS, p->Tq, o, ldo, lse, step_o, ldo, step_lse);
}

int dist_attention_merges_in_forward(void) { return 0; }

void dist_attention_row_dot(const AttentionProblem* p, const real* o, int ldo, const real* dout,
                            int lddo, real_acc* d) {
    attention_row_dot(p, o, ldo, dout, lddo, d);
}

void dist_attention_backward(const AttentionProblem* p, const real* q, int ldq, const real* k,
                             int ldk, const real* v, int ldv, const real* dout, int lddo,
                             const real_acc* lse, const real_acc* d, real_acc* dq, int lddq,
                             real_acc* dk, int lddk, real_acc* dv, int lddv) {
    attention_partial_backward(p, q, ldq, k, ldk, v, ldv, dout, lddo, lse, d, dq, lddq, dk, lddk,
                               dv, lddv);
}

void dist_attention_merge(int B, int NH, int HS, int T, real_acc* o_a, int lda, real_acc* lse_a,
                          const real_acc* o_b, int ldb, const real_acc* lse_b) {
    attention_merge(B, NH, HS, T, o_a, lda, lse_a, o_b, ldb, lse_b);
}
