// CPU layer kernels: OpenMP over token rows, CBLAS for the matrix products.
#include "model/layers.h"

#include "model/fast_math.h"
#include "model/rope_angles.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"


void encoder_forward(real* out, const int* tokens, const real* wte, const real* wpe,
                     int B, int T, int C, TokenLayout pos, const int* row_pos) {
#pragma omp parallel for
    for (long n = 0; n < (long)B * T; n++) {
        const long p = row_pos ? row_pos[n] : token_layout_position(pos, n % T);
        const real* we = wte + (long)tokens[n] * C;
        real* o = out + n * C;
        if (!wpe) {
            for (int c = 0; c < C; c++) o[c] = we[c];
            continue;
        }
        const real* pe = wpe + p * C;
        for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
    }
}

void encoder_backward(real* dwte, real* dwpe, const real* dout, const int* tokens, const int* order,
                      int B, int T, int C, TokenLayout pos, const int* row_pos,
                      const int* row_pos_order, int wpe_rows, GradMode wpe_mode) {
    (void)order, (void)row_pos_order;   // rows in row order: the order those list per token or position
    // GRAD_WRITE: a small table (max_T rows), zeroed, then summed into as GRAD_ACCUMULATE does.
    if (dwpe && wpe_mode == GRAD_WRITE) memset(dwpe, 0, sizeof(real) * (size_t)wpe_rows * C);
    // Serial over rows: two rows may share a token (or a position across sequences), and a
    // fixed order keeps the sums deterministic. Channels vectorise.
    for (long n = 0; n < (long)B * T; n++) {
        const long t = n % T;
        const real* g = dout + n * C;
        real* we = dwte + (long)tokens[n] * C;
        if (!dwpe) {
            for (int c = 0; c < C; c++) we[c] += g[c];
            continue;
        }
        real* pe = dwpe + (row_pos ? row_pos[n] : token_layout_position(pos, t)) * C;
        for (int c = 0; c < C; c++) {
            we[c] += g[c];
            pe[c] += g[c];
        }
    }
}

// The rotation of rope_forward (sign +1) or its transpose (sign -1) on one row's query and key
// heads: cos and sin of each pair's angle once (freq: the pairs' frequencies, amp: the
// amplitude), then every head.
static void rope_row(real* row, int heads, int HS, long p, const double* freq, double amp,
                     int sign) {
    const int half = HS / 2;
    for (int i = 0; i < half; i++) {
        float c, s;
        rope_cos_sin(p, freq[i], amp, &c, &s);
        const real sn = (real)(sign * s), cs = (real)c;
        for (int h = 0; h < heads; h++) {
            real* x = row + (long)h * HS;
            const real x0 = x[i], x1 = x[i + half];
            x[i] = x0 * cs - x1 * sn;
            x[i + half] = x1 * cs + x0 * sn;
        }
    }
}

static void rope_apply(real* qkv, int B, int T, int NH, int NKV, int HS, TokenLayout pos,
                       const int* row_pos, RopeSpec rope, int sign) {
    const long W = (long)(NH + 2 * NKV) * HS;
    // The frequencies once per call, not per row (on the stack up to head size 1024).
    double stack[512];
    double* freq = HS / 2 <= 512 ? stack : xmalloc(sizeof(double) * (HS / 2), "rope frequencies");
    for (int i = 0; i < HS / 2; i++) freq[i] = rope_frequency(rope, i, HS);
    const double amp = rope_amplitude(rope);
#pragma omp parallel for
    for (long n = 0; n < (long)B * T; n++) {
        const long p = row_pos ? row_pos[n] : token_layout_position(pos, n % T);
        rope_row(qkv + n * W, NH + NKV, HS, p, freq, amp, sign);   // query, key heads: adjacent
    }
    if (freq != stack) free(freq);
}

void rope_forward(real* qkv, int B, int T, int NH, int NKV, int HS, TokenLayout pos,
                  const int* row_pos, RopeSpec rope) {
    rope_apply(qkv, B, T, NH, NKV, HS, pos, row_pos, rope, 1);
}

void rope_backward(real* dqkv, int B, int T, int NH, int NKV, int HS, TokenLayout pos,
                   const int* row_pos, RopeSpec rope) {
    rope_apply(dqkv, B, T, NH, NKV, HS, pos, row_pos, rope, -1);
}

// One row: out = (x - mean) * rstd * weight + bias (LayerNorm), or with mean NULL out = x * rstd
// * weight (RMSNorm: no mean, no bias); returns the statistics through mean, rstd.
static void norm_row(real* o, real_stat* mean, real_stat* rstd, const real* x, const real* weight,
                     const real* bias, int C, real eps) {
    real m = 0;
    if (mean) {
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        *mean = m;
    }
    real var = 0;
    for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
    var /= C;
    const real s = 1 / rsqrt(var + eps);
    if (mean)
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
    else
        for (int c = 0; c < C; c++) o[c] = x[c] * s * weight[c];
    *rstd = s;
}

// Both norms, alone (a NULL) or after the residual add (residual_out = a + b, normalised row by
// row while it is still in cache); mean NULL: RMSNorm.
static void norm_forward_rows(real* residual_out, real* out, real_stat* mean, real_stat* rstd,
                              const real* a, const real* b, const real* weight, const real* bias,
                              int N, int C, double eps) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const real* x = a + (long)n * C;
        if (b) {
            real* r = residual_out + (long)n * C;
            const real* y = b + (long)n * C;
            for (int c = 0; c < C; c++) r[c] = x[c] + y[c];
            x = r;
        }
        norm_row(out + (long)n * C, mean ? &mean[n] : NULL, &rstd[n], x, weight, bias, C,
                 (real)eps);
    }
}

void layernorm_forward(real* out, real_stat* mean, real_stat* rstd, const real* inp,
                       const real* weight, const real* bias, int N, int C, double eps) {
    norm_forward_rows(NULL, out, mean, rstd, inp, NULL, weight, bias, N, C, eps);
}

void fused_residual_layernorm_forward(real* residual_out, real* ln_out, real_stat* mean,
                                      real_stat* rstd, const real* a, const real* b,
                                      const real* weight, const real* bias, int N, int C,
                                      double eps) {
    norm_forward_rows(residual_out, ln_out, mean, rstd, a, b, weight, bias, N, C, eps);
}

void rmsnorm_forward(real* out, real_stat* rstd, const real* inp, const real* weight, int N, int C,
                     double eps) {
    norm_forward_rows(NULL, out, NULL, rstd, inp, NULL, weight, NULL, N, C, eps);
}

void fused_residual_rmsnorm_forward(real* residual_out, real* out, real_stat* rstd, const real* a,
                                    const real* b, const real* weight, int N, int C, double eps) {
    norm_forward_rows(residual_out, out, NULL, rstd, a, b, weight, NULL, N, C, eps);
}

// One row's input gradient: dx = (g w - mean(g w) - xhat mean(g w xhat)) rstd with xhat = (x - m)
// rstd, added to dx (add) or written; has_mean 0: RMSNorm (m = 0, no mean(g w) term). dx may be g
// when written (each element is read before it is written).
static void norm_row_backward(real* dx, const real* g, const real* x, const real* weight, real m,
                              real s, int has_mean, int C, int add) {
    real sum_g = 0, sum_gx = 0;   // sums of dnorm and dnorm * xhat
    for (int c = 0; c < C; c++) {
        const real dn = g[c] * weight[c];
        sum_g += dn;
        sum_gx += dn * (x[c] - m) * s;
    }
    sum_g = has_mean ? sum_g / C : 0;
    sum_gx /= C;
    for (int c = 0; c < C; c++) {
        const real xhat = (x[c] - m) * s;
        const real d = (g[c] * weight[c] - sum_g - xhat * sum_gx) * s;
        dx[c] = add ? dx[c] + d : d;
    }
}

// Both norms' backward; mean NULL: RMSNorm (the mean's term and dbias dropped).
static void norm_backward_rows(real* dinp, real* dweight, real* dbias, const real* dout,
                               const real* inp, const real* weight, const real_stat* mean,
                               const real_stat* rstd, int N, int C, GradMode mode) {
    // Input gradients row-parallel; weight and bias gradients reduced over rows in a second,
    // channel-parallel pass so no two threads write the same element.
#pragma omp parallel for
    for (int n = 0; n < N; n++)
        norm_row_backward(dinp + (long)n * C, dout + (long)n * C, inp + (long)n * C, weight,
                          mean ? mean[n] : 0, rstd[n], mean != NULL, C, 1);
    enum { CHUNK = 64 };
#pragma omp parallel for
    for (int c0 = 0; c0 < C; c0 += CHUNK) {
        const int c1 = c0 + CHUNK < C ? c0 + CHUNK : C;
        real dw[CHUNK] = {0}, db[CHUNK] = {0};
        for (int n = 0; n < N; n++) {
            const real* x = inp + (long)n * C;
            const real* g = dout + (long)n * C;
            const real m = mean ? mean[n] : 0, s = rstd[n];
            for (int c = c0; c < c1; c++) {
                dw[c - c0] += g[c] * (x[c] - m) * s;
                db[c - c0] += g[c];
            }
        }
        for (int c = c0; c < c1; c++) {
            dweight[c] = mode == GRAD_WRITE ? dw[c - c0] : dweight[c] + dw[c - c0];
            if (dbias) dbias[c] = mode == GRAD_WRITE ? db[c - c0] : dbias[c] + db[c - c0];
        }
    }
}

void layernorm_backward(real* dinp, real* dweight, real* dbias, const real* dout,
                        const real* inp, const real* weight, const real_stat* mean,
                        const real_stat* rstd, int N, int C, GradMode mode) {
    norm_backward_rows(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, mode);
}

void rmsnorm_backward(real* dinp, real* dweight, const real* dout, const real* inp,
                      const real* weight, const real_stat* rstd, int N, int C, GradMode mode) {
    norm_backward_rows(dinp, dweight, NULL, dout, inp, weight, NULL, rstd, N, C, mode);
}

// QK-norm's rows: row r of the N (NH + NKV) query and key heads is head j = r % (NH + NKV) of token
// n = r / (NH + NKV), at qkv + n W + j HS (W = (NH + 2 NKV) HS) and raw + r HS.
void qk_norm_forward(real* qkv, real* raw, real_stat* mean, real_stat* rstd, const real* qw,
                     const real* qb, const real* kw, const real* kb, int N, int NH, int NKV,
                     int HS, double eps) {
    const int H = NH + NKV;
    const long W = (long)(NH + 2 * NKV) * HS;
#pragma omp parallel for
    for (long r = 0; r < (long)N * H; r++) {
        const int j = (int)(r % H);
        real* x = qkv + (r / H) * W + (long)j * HS;
        real* saved = raw + r * HS;
        memcpy(saved, x, sizeof(real) * HS);
        norm_row(x, mean ? &mean[r] : NULL, &rstd[r], saved, j < NH ? qw : kw,
                 j < NH ? qb : kb, HS, (real)eps);
    }
}

void qk_norm_backward(real* dqkv, real* dqw, real* dqb, real* dkw, real* dkb, const real* raw,
                      const real* qw, const real* kw, const real_stat* mean, const real_stat* rstd,
                      int N, int NH, int NKV, int HS, GradMode mode) {
    const int H = NH + NKV;
    const long W = (long)(NH + 2 * NKV) * HS;
    // The parameter gradients first, from the gradient of the normalised heads (which the input
    // gradient then overwrites): queries (k = 0) and keys (k = 1), each channel's sum over its
    // heads' rows in row order.
#pragma omp parallel for collapse(2)
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < HS; c++) {
            real dw = 0, db = 0;
            for (long n = 0; n < N; n++)
                for (int j = k ? NH : 0; j < (k ? H : NH); j++) {
                    const long r = n * H + j;
                    const real g = dqkv[n * W + (long)j * HS + c];
                    const real m = mean ? mean[r] : 0;
                    dw += g * (raw[r * HS + c] - m) * rstd[r];
                    db += g;
                }
            real* w = k == 0 ? dqw : dkw;
            real* b = k == 0 ? dqb : dkb;
            w[c] = mode == GRAD_WRITE ? dw : w[c] + dw;
            if (b) b[c] = mode == GRAD_WRITE ? db : b[c] + db;
        }
    // The input gradient, row by row in place (written over the normalised heads' gradient).
#pragma omp parallel for
    for (long r = 0; r < (long)N * H; r++) {
        const int j = (int)(r % H);
        real* g = dqkv + (r / H) * W + (long)j * HS;
        norm_row_backward(g, g, raw + r * HS, j < NH ? qw : kw, mean ? mean[r] : 0, rstd[r],
                          mean != NULL, HS, 0);
    }
}

void matmul_forward(real* out, const real* inp, const real* weight, const real* bias,
                    int N, int IC, int OC) {
    real beta = 0;
    if (bias) {
#pragma omp parallel for
        for (int n = 0; n < N; n++) memcpy(out + (long)n * OC, bias, sizeof(real) * OC);
        beta = 1;
    }
    cblas_rgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1, inp, IC, weight, IC,
                beta, out, OC);
}

// dinp (N, IC) = dout (N, OC) @ weight (OC, IC) + beta_inp * dinp; dweight and dbias per mode
// (beta 0 gives the bits of beta 1 on zeros: the GEMM adds its product to the scaled output).
static void matmul_backward_beta(real* dinp, real beta_inp, real* dweight, real* dbias,
                                 const real* dout, const real* inp, const real* weight, int N,
                                 int IC, int OC, GradMode mode) {
    cblas_rgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1, dout, OC, weight, IC,
                beta_inp, dinp, IC);
    // dweight (OC, IC) = / += dout^T (OC, N) @ inp (N, IC)
    cblas_rgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1, dout, OC, inp, IC,
                mode == GRAD_WRITE ? 0 : 1, dweight, IC);
    if (dbias) {
        enum { CHUNK = 64 };
#pragma omp parallel for
        for (int o0 = 0; o0 < OC; o0 += CHUNK) {
            const int o1 = o0 + CHUNK < OC ? o0 + CHUNK : OC;
            real acc[CHUNK] = {0};
            for (int n = 0; n < N; n++) {
                const real* g = dout + (long)n * OC;
                for (int o = o0; o < o1; o++) acc[o - o0] += g[o];
            }
            for (int o = o0; o < o1; o++)
                dbias[o] = mode == GRAD_WRITE ? acc[o - o0] : dbias[o] + acc[o - o0];
        }
    }
}

void matmul_backward(real* dinp, real* dweight, real* dbias, const real* dout,
                     const real* inp, const real* weight, int N, int IC, int OC, GradMode mode) {
    matmul_backward_beta(dinp, 1, dweight, dbias, dout, inp, weight, N, IC, OC, mode);
}

void matmul_backward_overwrite(real* dinp, real* dweight, real* dbias, const real* dout,
                               const real* inp, const real* weight, int N, int IC, int OC,
                               GradMode mode) {
    matmul_backward_beta(dinp, 0, dweight, dbias, dout, inp, weight, N, IC, OC, mode);
}

#define GELU_SCALE 0.7978845608028654   // sqrt(2 / pi)

void gelu_forward(real* out, const real* inp, long n) {
#pragma omp parallel for simd
    for (long i = 0; i < n; i++) {
        const real x = inp[i];
        const real u = (real)GELU_SCALE * (x + (real)0.044715 * x * x * x);
        out[i] = (real)0.5 * x * (1 + fast_tanh(u));
    }
}

// d gelu(x) / dx of the tanh approximation.
static inline real gelu_grad(real x) {
    const real u = (real)GELU_SCALE * (x + (real)0.044715 * x * x * x);
    const real th = fast_tanh(u);
    const real du = (real)GELU_SCALE * (1 + (real)3 * (real)0.044715 * x * x);
    return (real)0.5 * (1 + th) + (real)0.5 * x * (1 - th * th) * du;
}

void gelu_backward(real* dinp, const real* inp, const real* dout, long n) {
#pragma omp parallel for simd
    for (long i = 0; i < n; i++) dinp[i] += gelu_grad(inp[i]) * dout[i];
}

void matmul_forward_gelu(real* out_gelu, real* pre_gelu, const real* inp, const real* weight,
                         const real* bias, int N, int IC, int OC) {
    matmul_forward(pre_gelu, inp, weight, bias, N, IC, OC);
    gelu_forward(out_gelu, pre_gelu, (long)N * OC);
}

void matmul_backward_gelu(real* dpre, real* dweight, real* dbias, const real* dout,
                          const real* inp, const real* pre_gelu, const real* weight, int N, int IC,
                          int OC, GradMode mode) {
    matmul_backward_beta(dpre, 0, dweight, dbias, dout, inp, weight, N, IC, OC, mode);
    const long n = (long)N * IC;
#pragma omp parallel for simd
    for (long i = 0; i < n; i++) dpre[i] *= gelu_grad(pre_gelu[i]);
}

static inline real sigmoid(real x) { return 1 / (1 + fast_exp(-x)); }

void swiglu_forward(real* out, const real* inp, int N, int F) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const real* gate = inp + (long)n * 2 * F;
        const real* up = gate + F;
        real* o = out + (long)n * F;
#pragma omp simd
        for (int f = 0; f < F; f++) o[f] = gate[f] * sigmoid(gate[f]) * up[f];
    }
}

void swiglu_backward(real* dinp, const real* inp, const real* dout, int N, int F) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const real* gate = inp + (long)n * 2 * F;
        const real* up = gate + F;
        const real* g = dout + (long)n * F;
        real* dgate = dinp + (long)n * 2 * F;
        real* dup = dgate + F;
#pragma omp simd
        for (int f = 0; f < F; f++) {
            const real x = gate[f], sg = sigmoid(x);
            dgate[f] = g[f] * up[f] * sg * (1 + x * (1 - sg));
            dup[f] = g[f] * x * sg;
        }
    }
}

void residual_forward(real* out, const real* a, const real* b, long n) {
#pragma omp parallel for simd
    for (long i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// Row n's log-sum-exp over the first V logits.
static real row_lse(const real* z, int V) {
    real m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int v = 0; v < V; v++) m = z[v] > m ? z[v] : m;
    real sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) sum += fast_exp(z[v] - m);
    return m + rlog(sum);
}

// The losses' sum in row order, whatever the thread count.
static void add_losses(double* loss_sum, const real_stat* losses, int N) {
    double total = 0;
    for (int n = 0; n < N; n++) total += losses[n];
    *loss_sum += total;
}

void crossentropy_forward(real_stat* losses, const real* logits, const int* targets, int N, int V,
                          int Vp, double* loss_sum) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const real* z = logits + (long)n * Vp;
        losses[n] = row_lse(z, V) - z[targets[n]];
    }
    add_losses(loss_sum, losses, N);
}

void crossentropy_forward_backward(real* logits, real_stat* losses, const int* targets,
                                   real_stat dloss, int N, int V, int Vp, double* loss_sum, ZLoss z) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        real* zn = logits + (long)n * Vp;
        const real l = row_lse(zn, V);
        losses[n] = l - zn[targets[n]];
        if (z.coef > 0) z.losses[n] = z.coef * l * l;
        // d(coef lse^2)/dz = 2 coef lse softmax(z): dloss exactly without the z-loss (for a finite
        // lse; an infinite one makes the row NaN either way, a step that is never applied).
        const real scale = dloss * (1 + 2 * z.coef * l);
#pragma omp simd
        for (int v = 0; v < V; v++) zn[v] = scale * fast_exp(zn[v] - l);
        zn[targets[n]] -= dloss;
        for (int v = V; v < Vp; v++) zn[v] = 0;
    }
    add_losses(loss_sum, losses, N);
    if (z.coef > 0) add_losses(z.sum, z.losses, N);
}

real* tensor_alloc(size_t n, const char* what) { return xcalloc(n, sizeof(real), what); }
real_stat* stat_alloc(size_t n, const char* what) { return xcalloc(n, sizeof(real_stat), what); }
int* tokens_alloc(size_t n, const char* what) { return xcalloc(n, sizeof(int), what); }
void tensor_free(void* p) { free(p); }
void tensor_zero(real* p, size_t n) { memset(p, 0, sizeof(real) * n); }
void tensor_copy(real* dst, const real* src, size_t n) { memcpy(dst, src, sizeof(real) * n); }
void tokens_upload(int* dst, const int* host_src, size_t n) { memcpy(dst, host_src, sizeof(int) * n); }
double* scalars_alloc(size_t n, const char* what) { return xcalloc(n, sizeof(double), what); }
void scalars_zero(double* p, size_t n) { memset(p, 0, sizeof(double) * n); }
void scalars_to_host(double* host, const double* p, size_t n) { memcpy(host, p, sizeof(double) * n); }
void layers_reserve(const GPTConfig* cfg, int B, int T) {   // nothing grows
    (void)cfg, (void)B, (void)T;
}
