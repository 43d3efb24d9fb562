// The token-local CUDA kernels (model/layers_cuda.cuh: encoder, rotary positions, LayerNorm,
// RMSNorm, QK-norm, GELU, SwiGLU, residual) against their CPU twins (model/layers.c)
// on random inputs, at shapes that are and are not multiples of the vector and block sizes. Built
// twice: with -DGPT_CUDA_FP32 and in bf16, each with a bound per kind of output that has a column
// for the host runtime and one for a GPU (below; tests/cuda/bounds.h). `--quick` runs a subset
// that still reaches every kernel and path (for compute-sanitizer). Inputs are rounded to floatX
// on both sides, so the comparison measures the kernel, not the input rounding; the CPU reference
// then runs in fp32. Every pure output is poisoned with NaN
// (0xFF bytes) before each launch, so an element a kernel fails to write fails the check; the
// accumulated outputs (+=) start from random values, so a missed element is off by its update.
// The error reported is max|gpu - cpu| / max|cpu| per output.
#include "model/layers_cuda.cuh"
#include "model/layers.h"  // the CPU twins (C linkage)
#include "model/token_order.h"
#include "tests/cuda/bounds.h"
#include "tests/cuda_host/test_check.h"

#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <stdlib.h>
#include <string.h>

#include <vector>

typedef std::vector<float> Vec;

// --- Bounds ----------------------------------------------------------------------------------------

// Bounds per kind of output (tests/cuda/bounds.h): host runtime and GPU columns. The LayerNorm
// bounds also serve RMSNorm (the same kernels with fewer terms), and "elementwise" SwiGLU.
#ifdef GPT_CUDA_FP32
// Measured on the host: at most 4.4e-6 (LayerNorm statistics of the fused kernel).
static Bound BOUND_ROUND1 = {"elementwise", 1e-5, 3e-5,
                             "GPU: tanhf and expf (2 ulp) and FMA contraction in GELU and SwiGLU; sums "
                             "are exact otherwise", 0};
static Bound BOUND_LN = {"layernorm-out", 1e-5, 3e-5, "GPU: rsqrtf (2 ulp) and FMA contraction", 0};
static Bound BOUND_LN_BWD = {"layernorm-bwd", 1e-5, 5e-5,
                             "GPU: rsqrtf and FMA in every term of sums over up to 4133 rows", 0};
#else
// bf16 keeps 8 significant bits: storing an fp32 result rounds it by at most half an ulp, 2^-8 =
// 3.9e-3 of its magnitude, hence of max|cpu|. The bounds leave room for that one rounding plus
// the fp32 differences of the kernel (summation order, rsqrtf, tanhf, expf).
static Bound BOUND_ROUND1 = {"elementwise", 6e-3, 6e-3,
                             "same: one bf16 rounding (3.9e-3) dominates; the GPU's fp32 differences can "
                             "only flip a rounding, which stays within it", 0};
static Bound BOUND_LN = {"layernorm-out", 1e-2, 1e-2, "same: one bf16 rounding of values up to a few units", 0};
static Bound BOUND_LN_BWD = {"layernorm-bwd", 1e-2, 1e-2, "same: fp32 sums, one bf16 rounding", 0};
#endif
// fp32 outputs (mean, rstd) in both builds. Measured on the host: at most 6.8e-6, RMSNorm's rstd at
// C = 24608 in bf16, nearly all of it the CPU twin's (its sequential fp32 sum of 24608 squares is
// 6.0e-6 off a double reference there, the kernel's per-lane sums and butterfly 7.6e-7).
static Bound BOUND_STATS = {"layernorm-stats", 1e-5, 3e-5, "GPU: rsqrtf (2 ulp) and FMA in the fp32 statistics", 0};

// Worst error per kernel output over all shapes, for the summary at the end.
struct Worst {
    char name[64];
    double bound, err;
};
enum { MAX_WORST = 64 };
static Worst worst[MAX_WORST];
static int n_worst;

static void record(const char* name, double bound, double err) {
    for (int i = 0; i < n_worst; i++)
        if (!strcmp(worst[i].name, name)) {
            if (!(err <= worst[i].err)) worst[i].err = err;
            return;
        }
    if (n_worst == MAX_WORST) {
        printf("FAIL record %s: more kernel outputs than the %d the summary holds\n", name, MAX_WORST);
        exit(1);
    }
    Worst& w = worst[n_worst++];
    snprintf(w.name, sizeof w.name, "%s", name);
    w.bound = bound;
    w.err = err;
}

// --- Helpers ---------------------------------------------------------------------------------------

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) {  // uniform in [-1, 1)
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static int irand(int n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (int)((rng_state >> 33) % (uint64_t)n);
}

static float round_x(float x) { return to_float(from_float<floatX>(x)); }
static void round_all(Vec& v) {
    for (float& x : v) x = round_x(x);
}

// n random values offset + scale * U(-1, 1), rounded to floatX.
static Vec rand_vec(size_t n, float scale, float offset = 0.0f) {
    Vec v(n);
    for (float& x : v) x = round_x(offset + scale * frand());
    return v;
}

template <typename T> static T* dalloc(size_t n) {
    T* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, (n ? n : 1) * sizeof(T)));
    return p;
}
static void poison(void* d, size_t bytes) { CUDA_CHECK(cudaMemset(d, 0xFF, bytes)); }

static void upload(floatX* d, const Vec& h) {
    std::vector<floatX> x(h.size());
    for (size_t i = 0; i < h.size(); i++) x[i] = from_float<floatX>(h[i]);
    CUDA_CHECK(cudaMemcpy(d, x.data(), x.size() * sizeof(floatX), cudaMemcpyHostToDevice));
}
static floatX* to_dev(const Vec& h) {
    floatX* d = dalloc<floatX>(h.size());
    upload(d, h);
    return d;
}
static Vec fetch(const floatX* d, size_t n) {
    std::vector<floatX> x(n);
    CUDA_CHECK(cudaMemcpy(x.data(), d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    Vec h(n);
    for (size_t i = 0; i < n; i++) h[i] = to_float(x[i]);
    return h;
}
static Vec fetch_f(const float* d, size_t n) {
    Vec h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}
static bool bitwise_equal(const Vec& a, const Vec& b) {
    return a.size() == b.size() && !memcmp(a.data(), b.data(), a.size() * sizeof(float));
}

// max|got - want| / max|want|; a NaN anywhere gives infinity.
static double rel_err(const Vec& got, const Vec& want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); i++) {
        const double d = fabs((double)got[i] - (double)want[i]);
        if (d != d) return INFINITY;
        if (d > num) num = d;
        if (fabs((double)want[i]) > den) den = fabs((double)want[i]);
    }
    return den > 0 ? num / den : num;
}

static void expect(const char* kernel, const char* shape, const char* output, const Vec& got,
                   const Vec& want, Bound& bound) {
    const double err = rel_err(got, want);
    char name[64];
    snprintf(name, sizeof name, "%s %s", kernel, output);
    record(name, bound_limit(&bound), err);
    check(bound_seen(&bound, err), "%-26s %-22s %-8s rel err %.2e (bound %.0e)", kernel, shape, output, err,
          bound_limit(&bound));
}

static cudaStream_t stream;

static void sync(void) { CUDA_CHECK(cudaStreamSynchronize(stream)); }

// The shapes of the token-row kernels: C = 768 and 72 (vector paths), 45 (scalar path) times
// N = 1, 37, 256 (B = 4 sequences of T = 64).
static const int SHAPE_C[] = {768, 72, 45};
static const int SHAPE_BT[][2] = {{1, 1}, {1, 37}, {4, 64}};

// --- Encoder ---------------------------------------------------------------------------------------

// wpe rows the T local tokens of a layout use.
static long wpe_rows(TokenLayout pos, int T) {
    long rows = 0;
    for (int t = 0; t < T; t++) rows = std::max(rows, token_layout_position(pos, t) + 1);
    return rows;
}

static void test_encoder_forward(int B, int T, int C, TokenLayout pos) {
    const int N = B * T, V = 50;
    const long P = wpe_rows(pos, T);
    std::vector<int> tok(N);
    for (int& t : tok) t = irand(V);
    const Vec wte = rand_vec((size_t)V * C, 1.0f), wpe = rand_vec((size_t)P * C, 0.5f);
    Vec want((size_t)N * C);
    encoder_forward(want.data(), tok.data(), wte.data(), wpe.data(), B, T, C, pos, NULL);

    int* d_tok = dalloc<int>(N);
    CUDA_CHECK(cudaMemcpy(d_tok, tok.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    floatX *d_wte = to_dev(wte), *d_wpe = to_dev(wpe), *d_out = dalloc<floatX>((size_t)N * C);
    poison(d_out, (size_t)N * C * sizeof(floatX));
    encoder_forward_cuda(d_out, d_tok, d_wte, d_wpe, B, T, C, pos, NULL, stream);
    sync();
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d pos=%ld|%ld+%ld*t/%d", B, T, C, pos.off[0], pos.off[1],
             pos.stride, pos.chunks);
    expect("encoder_forward", shape, "out", fetch(d_out, (size_t)N * C), want, BOUND_ROUND1);
    CUDA_CHECK(cudaFree(d_tok));
    CUDA_CHECK(cudaFree(d_wte));
    CUDA_CHECK(cudaFree(d_wpe));
    CUDA_CHECK(cudaFree(d_out));
}

// A model with rotary positions has no wpe: the encoder is the token embedding alone, and the
// backward sums dwte only (nothing else is written: a poisoned wpe-sized buffer stays poisoned).
static void test_encoder_no_wpe(int B, int T, int C) {
    const int N = B * T, V = 50;
    std::vector<int> tok(N), order(N), scratch(N);
    for (int& t : tok) t = irand(V);
    token_order(order.data(), scratch.data(), tok.data(), (size_t)N);
    const Vec wte = rand_vec((size_t)V * C, 1.0f), dout = rand_vec((size_t)N * C, 1.0f);
    Vec want((size_t)N * C), dwte_want((size_t)V * C, 0.0f);
    const TokenLayout pos = token_layout(token_positions(0, 1));
    encoder_forward(want.data(), tok.data(), wte.data(), NULL, B, T, C, pos, NULL);
    encoder_backward(dwte_want.data(), NULL, dout.data(), tok.data(), NULL, B, T, C, pos, NULL, NULL, 0,
                     GRAD_WRITE);
    int *d_tok = dalloc<int>(N), *d_order = dalloc<int>(N);
    CUDA_CHECK(cudaMemcpy(d_tok, tok.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_order, order.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    floatX *d_wte = to_dev(wte), *d_out = dalloc<floatX>((size_t)N * C), *d_dout = to_dev(dout);
    floatX* d_dwte = to_dev(Vec((size_t)V * C, 0.0f));
    const size_t sbytes = encoder_backward_scratch_bytes(B, T, C);
    void* d_scratch = dalloc<char>(sbytes);
    CUDA_CHECK(cudaMemset(d_scratch, 0, sbytes));
    poison(d_out, (size_t)N * C * sizeof(floatX));
    encoder_forward_cuda(d_out, d_tok, d_wte, NULL, B, T, C, pos, NULL, stream);
    encoder_backward_cuda(d_dwte, NULL, d_dout, d_tok, d_order, B, T, C, pos, NULL, NULL, 0, 0, d_scratch,
                          stream);
    sync();
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d no wpe", B, T, C);
    expect("encoder_forward", shape, "out", fetch(d_out, (size_t)N * C), want, BOUND_ROUND1);
    expect("encoder_backward", shape, "dwte", fetch(d_dwte, (size_t)V * C), dwte_want, BOUND_ROUND1);
    for (void* d : {(void*)d_tok, (void*)d_order, (void*)d_wte, (void*)d_out, (void*)d_dout, (void*)d_dwte,
                    d_scratch})
        CUDA_CHECK(cudaFree(d));
}

// --- Rotary position embeddings ---------------------------------------------------------------------

// rope_cuda against rope_forward / rope_backward on the same floatX inputs: the query and key
// heads within one rounding, the value heads bit for bit untouched. row_pos: per-row positions
// (restarting every 5 rows) instead of the layout's.
static void test_rope(int B, int T, int NH, int NKV, int HS, TokenLayout pos, bool rows, RopeSpec rope) {
    const int N = B * T, W = (NH + 2 * NKV) * HS;
    const Vec x = rand_vec((size_t)N * W, 1.0f);
    std::vector<int> row_pos(N);
    for (int n = 0; n < N; n++) row_pos[n] = (n % T) % 5 + 3 * (n / T);
    const int* rp = rows ? row_pos.data() : NULL;
    int* d_rp = dalloc<int>(N);
    CUDA_CHECK(cudaMemcpy(d_rp, row_pos.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    char shape[80];
    const char* scaling[] = {"", " linear", " yarn", " llama3"};
    snprintf(shape, sizeof shape, "N=%d H=%d+%d HS=%d %s th=%d%s", N, NH, NKV, HS,
             rows ? "rows" : pos.chunks == 2 ? "zigzag" : "layout", rope.theta, scaling[rope.scaling]);
    for (int direction : {1, -1}) {
        Vec want = x;
        (direction > 0 ? rope_forward : rope_backward)(want.data(), B, T, NH, NKV, HS, pos, rp, rope);
        floatX* d_x = to_dev(x);
        rope_cuda(d_x, B, T, NH, NKV, HS, pos, rows ? d_rp : NULL, rope, direction, stream);
        sync();
        const Vec got = fetch(d_x, (size_t)N * W);
        expect(direction > 0 ? "rope_forward" : "rope_backward", shape, "qkv", got, want, BOUND_ROUND1);
        bool values_same = true;
        for (int n = 0; n < N; n++)
            for (int c = (NH + NKV) * HS; c < W; c++) values_same &= got[(size_t)n * W + c] == x[(size_t)n * W + c];
        check(values_same, "%-26s %-22s value heads untouched", direction > 0 ? "rope_forward" : "rope_backward",
              shape);
        CUDA_CHECK(cudaFree(d_x));
    }
    CUDA_CHECK(cudaFree(d_rp));
}

// The runs of a test: the first twice with the same schedule, then under other schedules of the
// host runtime (CUDA_HOST_SCHEDULE_SEED): every one must give the first's bits.
static const int SCHEDULE_RUNS = 4;
static void reseed(int run) {
#if !defined(__CUDACC__)
    if (run >= 2) cuda_host_schedule_seed(1000 + run);
#else
    (void)run;
#endif
}

// V distinct tokens at random (V = 1: every row has the same token; repeat > 1: runs of `repeat`
// rows with one token, so sorted runs span several 32-row segments). write: dwpe written
// (GRAD_WRITE over a table of extra_rows more rows than the tokens use, which must come out 0),
// else added to. dwte is always added to. doc_len > 0: per-row positions that restart at
// documents of doc_len rows on average (random starts; 1: every row at position 0, one run of all
// B*T rows), summed by their order as dwte is.
static void test_encoder_backward(int B, int T, int C, TokenLayout pos, int V, bool write = false,
                                  int repeat = 1, int extra_rows = 0, int doc_len = 0) {
    const int N = B * T;
    const long P = wpe_rows(pos, T) + extra_rows;
    std::vector<int> tok(N), row_pos(N);
    for (int n = 0; n < N; n++) tok[n] = n % repeat ? tok[n - 1] : irand(V);
    for (int n = 0; doc_len && n < N; n++)   // t - its document's start, < T <= P
        row_pos[n] = n % T == 0 || doc_len == 1 || irand(doc_len) == 0 ? 0 : row_pos[n - 1] + 1;
    const int* rp = doc_len ? row_pos.data() : NULL;
    const Vec dout = rand_vec((size_t)N * C, 1.0f);
    const Vec dwte0 = rand_vec((size_t)V * C, 1.0f), dwpe0 = rand_vec((size_t)P * C, 1.0f);
    Vec dwte = dwte0, dwpe = dwpe0;
    if (write) std::fill(dwpe.begin(), dwpe.end(), NAN);
    encoder_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), NULL, B, T, C, pos, rp, NULL, (int)P,
                     write ? GRAD_WRITE : GRAD_ACCUMULATE);

    std::vector<int> order(N), order_scratch(N), pos_order(N);   // as model/gpt.c uploads them
    token_order(order.data(), order_scratch.data(), tok.data(), (size_t)N);
    token_order(pos_order.data(), order_scratch.data(), row_pos.data(), (size_t)N);
    int* d_tok = dalloc<int>(N);
    int* d_order = dalloc<int>(N);
    int* d_row_pos = dalloc<int>(N);
    int* d_pos_order = dalloc<int>(N);
    CUDA_CHECK(cudaMemcpy(d_tok, tok.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_order, order.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_row_pos, row_pos.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_pos_order, pos_order.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    floatX *d_dout = to_dev(dout), *d_dwte = to_dev(dwte0), *d_dwpe = to_dev(dwpe0);
    const size_t scratch_bytes = encoder_backward_scratch_bytes(B, T, C);
    void* scratch = dalloc<char>(scratch_bytes);
    CUDA_CHECK(cudaMemset(scratch, 0, scratch_bytes));  // once: the calls leave the tickets at 0
    Vec got_wte, got_wpe;
    for (int run = 0; run < SCHEDULE_RUNS; run++) {  // later runs: bitwise the same
        reseed(run);
        upload(d_dwte, dwte0);
        if (write) poison(d_dwpe, P * C * sizeof(floatX));
        else upload(d_dwpe, dwpe0);
        encoder_backward_cuda(d_dwte, d_dwpe, d_dout, d_tok, d_order, B, T, C, pos, doc_len ? d_row_pos : NULL,
                              doc_len ? d_pos_order : NULL, (int)P, !write, scratch, stream);
        sync();
        const Vec w = fetch(d_dwte, (size_t)V * C), p = fetch(d_dwpe, (size_t)P * C);
        if (run == 0) {
            got_wte = w;
            got_wpe = p;
        } else {
            check(bitwise_equal(w, got_wte) && bitwise_equal(p, got_wpe),
                  "encoder_backward B=%d T=%d C=%d V=%d repeat=%d%s: run %d (schedule %d) gives bitwise the same "
                  "dwte, dwpe", B, T, C, V, repeat, write ? " write" : "", run, run >= 2 ? 1000 + run : 1);
        }
    }
    char shape[96];
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d V=%d%s%s%s", B, T, C, V, repeat > 1 ? " runs" : "",
             write ? " write" : "", doc_len ? " document positions" : "");
    expect("encoder_backward", shape, "dwte", got_wte, dwte, BOUND_ROUND1);
    expect("encoder_backward", shape, "dwpe", got_wpe, dwpe, BOUND_ROUND1);
    for (void* q : {(void*)d_tok, (void*)d_order, (void*)d_row_pos, (void*)d_pos_order, (void*)d_dout,
                    (void*)d_dwte, (void*)d_dwpe, scratch})
        CUDA_CHECK(cudaFree(q));
}

// --- LayerNorm -------------------------------------------------------------------------------------

// eps: the norm's epsilon; scale: the inputs' (at 0.001 the rows' variance is ~1.3e-6, so an
// epsilon of 1e-6 and the default 1e-5 give rstd a factor ~2 apart).
static void test_layernorm_forward(int N, int C, float eps = 1e-5f, float scale = 1.0f) {
    const Vec x = rand_vec((size_t)N * C, 2.0f * scale, 0.5f * scale), w = rand_vec(C, 0.2f, 1.0f),
              b = rand_vec(C, 0.2f);
    Vec out((size_t)N * C), mean(N), rstd(N);
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, eps);

    floatX *d_x = to_dev(x), *d_w = to_dev(w), *d_b = to_dev(b), *d_out = dalloc<floatX>((size_t)N * C);
    float *d_mean = dalloc<float>(N), *d_rstd = dalloc<float>(N);
    poison(d_out, (size_t)N * C * sizeof(floatX));
    poison(d_mean, N * sizeof(float));
    poison(d_rstd, N * sizeof(float));
    layernorm_forward_cuda(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C, eps, stream);
    sync();
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d C=%d eps=%g", N, C, eps);
    expect("layernorm_forward", shape, "out", fetch(d_out, (size_t)N * C), out, BOUND_LN);
    expect("layernorm_forward", shape, "mean", fetch_f(d_mean, N), mean, BOUND_STATS);
    expect("layernorm_forward", shape, "rstd", fetch_f(d_rstd, N), rstd, BOUND_STATS);
    for (void* p : {(void*)d_x, (void*)d_w, (void*)d_b, (void*)d_out, (void*)d_mean, (void*)d_rstd})
        CUDA_CHECK(cudaFree(p));
}

// in_place: residual_out is the buffer of a (the residual stream updated in place).
static void test_fused_residual_layernorm(int N, int C, bool in_place) {
    const Vec a = rand_vec((size_t)N * C, 2.0f, 0.5f), bb = rand_vec((size_t)N * C, 1.0f);
    const Vec w = rand_vec(C, 0.2f, 1.0f), b = rand_vec(C, 0.2f);
    Vec res((size_t)N * C), out((size_t)N * C), mean(N), rstd(N);
    residual_forward(res.data(), a.data(), bb.data(), (long)N * C);
    round_all(res);  // the kernel stores the sum as floatX and normalises what it stored
    layernorm_forward(out.data(), mean.data(), rstd.data(), res.data(), w.data(), b.data(), N, C, 1e-5);

    floatX *d_a = to_dev(a), *d_bb = to_dev(bb), *d_w = to_dev(w), *d_b = to_dev(b);
    floatX *d_res = in_place ? d_a : dalloc<floatX>((size_t)N * C), *d_out = dalloc<floatX>((size_t)N * C);
    float *d_mean = dalloc<float>(N), *d_rstd = dalloc<float>(N);
    if (!in_place) poison(d_res, (size_t)N * C * sizeof(floatX));
    poison(d_out, (size_t)N * C * sizeof(floatX));
    poison(d_mean, N * sizeof(float));
    poison(d_rstd, N * sizeof(float));
    fused_residual_layernorm_forward_cuda(d_res, d_out, d_mean, d_rstd, d_a, d_bb, d_w, d_b, N, C, 1e-5f,
                                          stream);
    sync();
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d C=%d%s", N, C, in_place ? " in-place" : "");
    expect("fused_residual_layernorm", shape, "residual", fetch(d_res, (size_t)N * C), res, BOUND_ROUND1);
    expect("fused_residual_layernorm", shape, "out", fetch(d_out, (size_t)N * C), out, BOUND_LN);
    expect("fused_residual_layernorm", shape, "mean", fetch_f(d_mean, N), mean, BOUND_STATS);
    expect("fused_residual_layernorm", shape, "rstd", fetch_f(d_rstd, N), rstd, BOUND_STATS);
    for (void* p : {(void*)d_a, (void*)d_bb, (void*)d_w, (void*)d_b, (void*)d_out, (void*)d_mean,
                    (void*)d_rstd})
        CUDA_CHECK(cudaFree(p));
    if (!in_place) CUDA_CHECK(cudaFree(d_res));
}

// write: dweight and dbias written (GRAD_WRITE, NaN beforehand on both sides), else added to.
static void test_layernorm_backward(int N, int C, bool write = false) {
    const Vec x = rand_vec((size_t)N * C, 2.0f, 0.5f), w = rand_vec(C, 0.2f, 1.0f), b = rand_vec(C, 0.2f);
    const Vec dout = rand_vec((size_t)N * C, 1.0f);
    const Vec dinp0 = rand_vec((size_t)N * C, 1.0f), dw0 = rand_vec(C, 1.0f), db0 = rand_vec(C, 1.0f);
    Vec out((size_t)N * C), mean(N), rstd(N);
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5);
    Vec dinp = dinp0, dw = dw0, db = db0;
    if (write) std::fill(dw.begin(), dw.end(), NAN), std::fill(db.begin(), db.end(), NAN);
    layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), N, C, write ? GRAD_WRITE : GRAD_ACCUMULATE);

    floatX *d_x = to_dev(x), *d_w = to_dev(w), *d_dout = to_dev(dout);
    floatX *d_dinp = to_dev(dinp0), *d_dw = to_dev(dw0), *d_db = to_dev(db0);
    float *d_mean = dalloc<float>(N), *d_rstd = dalloc<float>(N);
    CUDA_CHECK(cudaMemcpy(d_mean, mean.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_rstd, rstd.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    const size_t scratch_bytes = layernorm_backward_scratch_bytes(N, C);
    void* scratch = dalloc<char>(scratch_bytes);
    CUDA_CHECK(cudaMemset(scratch, 0, scratch_bytes));  // once: the calls leave the tickets at 0
    Vec got_dinp, got_dw, got_db;
    for (int run = 0; run < SCHEDULE_RUNS; run++) {  // later runs, other schedules: the same bits
        reseed(run);
        upload(d_dinp, dinp0);
        if (write) {
            poison(d_dw, C * sizeof(floatX));
            poison(d_db, C * sizeof(floatX));
        } else {
            upload(d_dw, dw0);
            upload(d_db, db0);
        }
        layernorm_backward_cuda(d_dinp, d_dw, d_db, scratch, d_dout, d_x, d_w, d_mean, d_rstd, N, C, !write,
                                stream);
        sync();
        const Vec a = fetch(d_dinp, (size_t)N * C), bw = fetch(d_dw, C), bb = fetch(d_db, C);
        if (run == 0) {
            got_dinp = a;
            got_dw = bw;
            got_db = bb;
        } else {
            check(bitwise_equal(a, got_dinp) && bitwise_equal(bw, got_dw) && bitwise_equal(bb, got_db),
                  "layernorm_backward N=%d C=%d%s: run %d gives bitwise the same dinp, dweight, dbias", N, C,
                  write ? " write" : "", run);
        }
    }
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d C=%d%s", N, C, write ? " write" : "");
    expect("layernorm_backward", shape, "dinp", got_dinp, dinp, BOUND_LN_BWD);
    expect("layernorm_backward", shape, "dweight", got_dw, dw, BOUND_LN_BWD);
    expect("layernorm_backward", shape, "dbias", got_db, db, BOUND_LN_BWD);
    for (void* p : {(void*)d_x, (void*)d_w, (void*)d_dout, (void*)d_dinp, (void*)d_dw, (void*)d_db,
                    (void*)d_mean, (void*)d_rstd, scratch})
        CUDA_CHECK(cudaFree(p));
}

// --- RMSNorm ---------------------------------------------------------------------------------------

// The LayerNorm kernels with their RMS flag: the same inputs as the LayerNorm tests (rows of mean
// 0.5, so that a mean subtracted by mistake shows), no bias, no mean.
// eps, scale: as test_layernorm_forward's (at 0.001 the rows' mean square is ~1.6e-6).
static void test_rmsnorm_forward(int N, int C, float eps = 1e-5f, float scale = 1.0f) {
    const Vec x = rand_vec((size_t)N * C, 2.0f * scale, 0.5f * scale), w = rand_vec(C, 0.2f, 1.0f);
    Vec out((size_t)N * C), rstd(N);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);

    floatX *d_x = to_dev(x), *d_w = to_dev(w), *d_out = dalloc<floatX>((size_t)N * C);
    float* d_rstd = dalloc<float>(N);
    poison(d_out, (size_t)N * C * sizeof(floatX));
    poison(d_rstd, N * sizeof(float));
    rmsnorm_forward_cuda(d_out, d_rstd, d_x, d_w, N, C, eps, stream);
    sync();
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d C=%d eps=%g", N, C, eps);
    expect("rmsnorm_forward", shape, "out", fetch(d_out, (size_t)N * C), out, BOUND_LN);
    expect("rmsnorm_forward", shape, "rstd", fetch_f(d_rstd, N), rstd, BOUND_STATS);
    for (void* p : {(void*)d_x, (void*)d_w, (void*)d_out, (void*)d_rstd}) CUDA_CHECK(cudaFree(p));
}

// in_place: residual_out is the buffer of a (the residual stream updated in place).
static void test_fused_residual_rmsnorm(int N, int C, bool in_place) {
    const Vec a = rand_vec((size_t)N * C, 2.0f, 0.5f), bb = rand_vec((size_t)N * C, 1.0f);
    const Vec w = rand_vec(C, 0.2f, 1.0f);
    Vec res((size_t)N * C), out((size_t)N * C), rstd(N);
    residual_forward(res.data(), a.data(), bb.data(), (long)N * C);
    round_all(res);  // the kernel stores the sum as floatX and normalises what it stored
    rmsnorm_forward(out.data(), rstd.data(), res.data(), w.data(), N, C, 1e-6);

    floatX *d_a = to_dev(a), *d_bb = to_dev(bb), *d_w = to_dev(w);
    floatX *d_res = in_place ? d_a : dalloc<floatX>((size_t)N * C), *d_out = dalloc<floatX>((size_t)N * C);
    float* d_rstd = dalloc<float>(N);
    if (!in_place) poison(d_res, (size_t)N * C * sizeof(floatX));
    poison(d_out, (size_t)N * C * sizeof(floatX));
    poison(d_rstd, N * sizeof(float));
    fused_residual_rmsnorm_forward_cuda(d_res, d_out, d_rstd, d_a, d_bb, d_w, N, C, 1e-6f, stream);
    sync();
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d C=%d%s", N, C, in_place ? " in-place" : "");
    expect("fused_residual_rmsnorm", shape, "residual", fetch(d_res, (size_t)N * C), res, BOUND_ROUND1);
    expect("fused_residual_rmsnorm", shape, "out", fetch(d_out, (size_t)N * C), out, BOUND_LN);
    expect("fused_residual_rmsnorm", shape, "rstd", fetch_f(d_rstd, N), rstd, BOUND_STATS);
    for (void* p : {(void*)d_a, (void*)d_bb, (void*)d_w, (void*)d_out, (void*)d_rstd})
        CUDA_CHECK(cudaFree(p));
    if (!in_place) CUDA_CHECK(cudaFree(d_res));
}

// write: dweight written (GRAD_WRITE, NaN beforehand on both sides), else added to. The scratch is
// layernorm_backward_scratch_bytes(N, C), as the backend reserves for both norms, and run 1 follows
// a LayerNorm backward on the same scratch (as in a model mixing them on the backend's one buffer):
// the tickets it leaves must not change RMSNorm's bits.
static void test_rmsnorm_backward(int N, int C, bool write = false) {
    const Vec x = rand_vec((size_t)N * C, 2.0f, 0.5f), w = rand_vec(C, 0.2f, 1.0f);
    const Vec dout = rand_vec((size_t)N * C, 1.0f);
    const Vec dinp0 = rand_vec((size_t)N * C, 1.0f), dw0 = rand_vec(C, 1.0f);
    Vec out((size_t)N * C), rstd(N);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
    Vec dinp = dinp0, dw = dw0;
    if (write) std::fill(dw.begin(), dw.end(), NAN);
    rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C,
                     write ? GRAD_WRITE : GRAD_ACCUMULATE);

    floatX *d_x = to_dev(x), *d_w = to_dev(w), *d_dout = to_dev(dout);
    floatX *d_dinp = to_dev(dinp0), *d_dw = to_dev(dw0);
    float* d_rstd = dalloc<float>(N);
    CUDA_CHECK(cudaMemcpy(d_rstd, rstd.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    // The LayerNorm backward of run 1, into buffers of its own (its mean: the rows' true means).
    Vec mean(N, 0.0f);
    for (int n = 0; n < N; n++) {
        for (int c = 0; c < C; c++) mean[n] += x[(size_t)n * C + c];
        mean[n] /= C;
    }
    float* d_mean = dalloc<float>(N);
    CUDA_CHECK(cudaMemcpy(d_mean, mean.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    floatX *d_ln_dinp = to_dev(dinp0), *d_ln_dw = to_dev(dw0), *d_ln_db = to_dev(dw0);
    const size_t scratch_bytes = layernorm_backward_scratch_bytes(N, C);
    void* scratch = dalloc<char>(scratch_bytes);
    CUDA_CHECK(cudaMemset(scratch, 0, scratch_bytes));  // once: the calls leave the tickets at 0
    Vec got_dinp, got_dw;
    for (int run = 0; run < SCHEDULE_RUNS; run++) {  // later runs, other schedules: the same bits
        reseed(run);
        upload(d_dinp, dinp0);
        if (write) poison(d_dw, C * sizeof(floatX));
        else upload(d_dw, dw0);
        if (run == 1)
            layernorm_backward_cuda(d_ln_dinp, d_ln_dw, d_ln_db, scratch, d_dout, d_x, d_w, d_mean, d_rstd,
                                    N, C, 1, stream);
        rmsnorm_backward_cuda(d_dinp, d_dw, scratch, d_dout, d_x, d_w, d_rstd, N, C, !write, stream);
        sync();
        const Vec a = fetch(d_dinp, (size_t)N * C), bw = fetch(d_dw, C);
        if (run == 0) {
            got_dinp = a;
            got_dw = bw;
        } else {
            check(bitwise_equal(a, got_dinp) && bitwise_equal(bw, got_dw),
                  "rmsnorm_backward N=%d C=%d%s: run %d%s gives bitwise the same dinp, dweight", N, C,
                  write ? " write" : "", run, run == 1 ? " (after a LayerNorm backward)" : "");
        }
    }
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d C=%d%s", N, C, write ? " write" : "");
    expect("rmsnorm_backward", shape, "dinp", got_dinp, dinp, BOUND_LN_BWD);
    expect("rmsnorm_backward", shape, "dweight", got_dw, dw, BOUND_LN_BWD);
    for (void* p : {(void*)d_x, (void*)d_w, (void*)d_dout, (void*)d_dinp, (void*)d_dw, (void*)d_rstd,
                    (void*)d_mean, (void*)d_ln_dinp, (void*)d_ln_dw, (void*)d_ln_db, scratch})
        CUDA_CHECK(cudaFree(p));
}

// --- QK-norm ---------------------------------------------------------------------------------------

// QK-norm on N tokens of NH query and NKV key heads of HS (qkv rows of (NH + 2 NKV) HS), LayerNorm
// or RMSNorm (rms), forward and backward against the CPU twins. The forward's outputs are poisoned
// (raw, mean, rstd) or random (qkv, normalised in place: its value columns must come back as they
// were); the backward runs on the CPU forward's raw rows and statistics, its dqkv in place
// (overwritten in the query and key columns, the value columns unchanged), the four parameter
// gradients added to random values or written over NaN (write), under SCHEDULE_RUNS schedules of
// the host runtime: the same bits every run.
static void test_qk_norm(int N, int NH, int NKV, int HS, bool rms, bool write = false) {
    const int H = NH + NKV, W = (NH + 2 * NKV) * HS;
    const size_t nq = (size_t)N * W, nr = (size_t)N * H * HS, ns = (size_t)N * H;
    const Vec qkv0 = rand_vec(nq, 2.0f, 0.5f), dqkv0 = rand_vec(nq, 1.0f);
    const Vec qw = rand_vec(HS, 0.2f, 1.0f), kw = rand_vec(HS, 0.2f, 1.0f);
    const Vec qb = rand_vec(HS, 0.2f), kb = rand_vec(HS, 0.2f);
    Vec qkv = qkv0, raw(nr), mean(ns), rstd(ns);
    qk_norm_forward(qkv.data(), raw.data(), rms ? NULL : mean.data(), rstd.data(), qw.data(),
                    rms ? NULL : qb.data(), kw.data(), rms ? NULL : kb.data(), N, NH, NKV, HS,
                    1e-5);
    const Vec g0[4] = {rand_vec(HS, 1.0f), rand_vec(HS, 1.0f), rand_vec(HS, 1.0f), rand_vec(HS, 1.0f)};
    Vec g[4], dqkv = dqkv0;
    for (int i = 0; i < 4; i++) {
        g[i] = g0[i];
        if (write) std::fill(g[i].begin(), g[i].end(), NAN);
    }
    qk_norm_backward(dqkv.data(), g[0].data(), rms ? NULL : g[1].data(), g[2].data(),
                     rms ? NULL : g[3].data(), raw.data(), qw.data(), kw.data(),
                     rms ? NULL : mean.data(), rstd.data(), N, NH, NKV, HS,
                     write ? GRAD_WRITE : GRAD_ACCUMULATE);

    char shape[64];
    snprintf(shape, sizeof shape, "N=%d %d+%d heads of %d %s%s", N, NH, NKV, HS,
             rms ? "rms" : "ln", write ? " write" : "");
    floatX *d_qkv = to_dev(qkv0), *d_raw = dalloc<floatX>(nr);
    floatX *d_qw = to_dev(qw), *d_kw = to_dev(kw), *d_qb = to_dev(qb), *d_kb = to_dev(kb);
    float *d_mean = dalloc<float>(ns), *d_rstd = dalloc<float>(ns);
    poison(d_raw, nr * sizeof(floatX));
    poison(d_mean, ns * sizeof(float));
    poison(d_rstd, ns * sizeof(float));
    qk_norm_forward_cuda(d_qkv, d_raw, rms ? nullptr : d_mean, d_rstd, d_qw, rms ? nullptr : d_qb,
                         d_kw, rms ? nullptr : d_kb, N, NH, NKV, HS, 1e-5f, stream);
    sync();
    expect("qk_norm_forward", shape, "qkv", fetch(d_qkv, nq), qkv, BOUND_LN);
    check(bitwise_equal(fetch(d_raw, nr), raw), "qk_norm_forward %s: the raw heads, bit for bit", shape);
    if (!rms) expect("qk_norm_forward", shape, "mean", fetch_f(d_mean, ns), mean, BOUND_STATS);
    expect("qk_norm_forward", shape, "rstd", fetch_f(d_rstd, ns), rstd, BOUND_STATS);
    Vec vcols_gpu = fetch(d_qkv, nq), vcols_cpu = qkv0;   // the value columns: untouched
    bool values_kept = true;
    for (int n = 0; n < N; n++)
        for (int c = H * HS; c < W; c++)
            values_kept &= vcols_gpu[(size_t)n * W + c] == round_x(vcols_cpu[(size_t)n * W + c]);
    check(values_kept, "qk_norm_forward %s: the value columns unchanged", shape);

    // The backward on the CPU's raw rows and statistics.
    upload(d_raw, raw);
    CUDA_CHECK(cudaMemcpy(d_mean, mean.data(), ns * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_rstd, rstd.data(), ns * sizeof(float), cudaMemcpyHostToDevice));
    floatX* d_dqkv = to_dev(dqkv0);
    floatX* d_g[4];
    for (int i = 0; i < 4; i++) d_g[i] = to_dev(g0[i]);
    const size_t scratch_bytes = qk_norm_backward_scratch_bytes(N, HS);
    void* scratch = dalloc<char>(scratch_bytes);
    Vec got_dqkv, got_g[4];
    for (int run = 0; run < SCHEDULE_RUNS; run++) {
        reseed(run);
        upload(d_dqkv, dqkv0);
        for (int i = 0; i < 4; i++) {
            if (write) poison(d_g[i], HS * sizeof(floatX));
            else upload(d_g[i], g0[i]);
        }
        poison(scratch, scratch_bytes);   // every partial is written before it is read
        qk_norm_backward_cuda(d_dqkv, d_g[0], rms ? nullptr : d_g[1], d_g[2], rms ? nullptr : d_g[3],
                              scratch, d_raw, d_qw, d_kw, rms ? nullptr : d_mean, d_rstd, N, NH, NKV,
                              HS, !write, stream);
        sync();
        const Vec a = fetch(d_dqkv, nq);
        Vec gg[4];
        for (int i = 0; i < 4; i++) gg[i] = fetch(d_g[i], HS);
        if (run == 0) {
            got_dqkv = a;
            for (int i = 0; i < 4; i++) got_g[i] = gg[i];
            continue;
        }
        bool same = bitwise_equal(a, got_dqkv);
        for (int i = 0; i < 4; i++) same &= bitwise_equal(gg[i], got_g[i]);
        check(same, "qk_norm_backward %s: run %d gives bitwise the same dqkv and parameter gradients",
              shape, run);
    }
    expect("qk_norm_backward", shape, "dqkv", got_dqkv, dqkv, BOUND_LN_BWD);
    static const char* const names[4] = {"dqw", "dqb", "dkw", "dkb"};
    for (int i = 0; i < 4; i++) {
        if (rms && (i == 1 || i == 3)) {   // no biases: left as they were
            check(write ? std::all_of(got_g[i].begin(), got_g[i].end(), [](float v) { return isnan(v); })
                        : bitwise_equal(got_g[i], fetch(d_g[i], HS)),
                  "qk_norm_backward %s: %s untouched under RMSNorm", shape, names[i]);
            continue;
        }
        expect("qk_norm_backward", shape, names[i], got_g[i], g[i], BOUND_LN_BWD);
    }
    for (void* p : {(void*)d_qkv, (void*)d_raw, (void*)d_qw, (void*)d_kw, (void*)d_qb, (void*)d_kb,
                    (void*)d_mean, (void*)d_rstd, (void*)d_dqkv, scratch})
        CUDA_CHECK(cudaFree(p));
    for (int i = 0; i < 4; i++) CUDA_CHECK(cudaFree(d_g[i]));
}

// --- SwiGLU ----------------------------------------------------------------------------------------

// inp (N, 2F): gates of scale 6 (silu's curved part and both tails), ups of scale 1. off: the
// element offset of every pointer (1 makes them misaligned: the scalar path, whatever F).
// in_place: the backward writes dinp over inp (allowed: each element is read before written).
static void test_swiglu(int N, int F, int off, bool in_place = false) {
    const long n = (long)N * F;
    Vec inp(2 * n);
    for (int r = 0; r < N; r++)
        for (int f = 0; f < 2 * F; f++) inp[(size_t)r * 2 * F + f] = round_x((f < F ? 6.0f : 1.0f) * frand());
    const Vec dout = rand_vec(n, 1.0f);
    Vec out(n), dinp(2 * n);
    swiglu_forward(out.data(), inp.data(), N, F);
    swiglu_backward(dinp.data(), inp.data(), dout.data(), N, F);

    floatX *bi = dalloc<floatX>(2 * n + off), *bo = dalloc<floatX>(n + off), *bg = dalloc<floatX>(n + off);
    floatX *bd = in_place ? bi : dalloc<floatX>(2 * n + off);
    floatX *d_inp = bi + off, *d_out = bo + off, *d_dout = bg + off, *d_dinp = bd + off;
    upload(d_inp, inp);
    upload(d_dout, dout);
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d F=%d%s%s", N, F, off ? " misaligned" : "",
             in_place ? " in-place" : "");

    poison(bo, (n + off) * sizeof(floatX));
    swiglu_forward_cuda(d_out, d_inp, N, F, stream);
    sync();
    expect("swiglu_forward", shape, "out", fetch(d_out, n), out, BOUND_ROUND1);

    if (!in_place) poison(bd, (2 * n + off) * sizeof(floatX));  // overwritten, never read
    swiglu_backward_cuda(d_dinp, d_inp, d_dout, N, F, stream);
    sync();
    expect("swiglu_backward", shape, "dinp", fetch(d_dinp, 2 * n), dinp, BOUND_ROUND1);
    for (void* p : {(void*)bi, (void*)bo, (void*)bg}) CUDA_CHECK(cudaFree(p));
    if (!in_place) CUDA_CHECK(cudaFree(bd));
}

// --- GELU and residual -----------------------------------------------------------------------------

// off: the element offset of every pointer (1 makes them misaligned: the scalar path).
static void test_elementwise(long n, int off) {
    const Vec x = rand_vec(n, 4.0f), y = rand_vec(n, 1.0f), dinp0 = rand_vec(n, 1.0f);
    Vec gelu(n), dinp = dinp0, res(n);
    gelu_forward(gelu.data(), x.data(), n);
    gelu_backward(dinp.data(), x.data(), y.data(), n);
    residual_forward(res.data(), x.data(), y.data(), n);

    floatX *bx = dalloc<floatX>(n + off), *by = dalloc<floatX>(n + off), *bd = dalloc<floatX>(n + off);
    floatX *bo = dalloc<floatX>(n + off);
    floatX *d_x = bx + off, *d_y = by + off, *d_dinp = bd + off, *d_out = bo + off;
    upload(d_x, x);
    upload(d_y, y);
    upload(d_dinp, dinp0);
    char shape[64];
    snprintf(shape, sizeof shape, "n=%ld%s", n, off ? " misaligned" : "");

    poison(bo, (n + off) * sizeof(floatX));
    gelu_forward_cuda(d_out, d_x, n, stream);
    sync();
    expect("gelu_forward", shape, "out", fetch(d_out, n), gelu, BOUND_ROUND1);

    gelu_backward_cuda(d_dinp, d_x, d_y, n, stream);
    sync();
    expect("gelu_backward", shape, "dinp", fetch(d_dinp, n), dinp, BOUND_ROUND1);

    poison(bo, (n + off) * sizeof(floatX));
    residual_forward_cuda(d_out, d_x, d_y, n, stream);
    sync();
    expect("residual_forward", shape, "out", fetch(d_out, n), res, BOUND_ROUND1);

    // fp32 -> floatX: exactly the host's rounding of every element (fp32 values, not floatX ones).
    std::vector<float> f(n);
    for (long i = 0; i < n; i++) f[i] = 3.0f * frand();
    float* d_f = dalloc<float>(n);
    CUDA_CHECK(cudaMemcpy(d_f, f.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    poison(bo, (n + off) * sizeof(floatX));
    float_to_floatx_cuda(d_out, d_f, (size_t)n, stream);
    sync();
    const Vec got = fetch(d_out, n);
    long wrong = 0;
    for (long i = 0; i < n; i++) wrong += !(got[i] == round_x(f[i]));
    check(wrong == 0, "%-26s %-22s every element rounded as on the host (%ld differ)", "float_to_floatx", shape, wrong);
    CUDA_CHECK(cudaFree(d_f));
    for (void* p : {(void*)bx, (void*)by, (void*)bd, (void*)bo}) CUDA_CHECK(cudaFree(p));
}

// The shapes beyond the grid of SHAPE_C x SHAPE_BT.
static void test_special_shapes(void) {
    // Encoder backward: one token for every row; thousands of rows; token ids past 2^16 (a third
    // byte in token_order's radix sort) in a table of 70000 rows.
    test_encoder_backward(4, 64, 72, token_layout(token_positions(0, 1)), 1);
    test_encoder_backward(2, 2100, 16, token_layout(token_positions(1, 2)), 300);
    test_encoder_backward(2, 700, 16, token_layout(token_positions(0, 1)), 70000, false, 3);
    // More sequences than warps per block (each warp sums several rows of a position).
    test_encoder_backward(9, 5, 72, token_layout(token_positions(2, 3)), 50);
    test_encoder_backward(11, 3, 45, token_layout(token_positions(0, 1)), 50);
    // Repeated tokens: runs of 40 and 7 rows (several 32-row segments per sorted run, and runs
    // that start inside a segment window); all rows one token, 70 segments.
    test_encoder_backward(4, 160, 72, token_layout(token_positions(0, 1)), 5, false, 40);
    test_encoder_backward(3, 300, 16, token_layout(token_positions(0, 1)), 50, false, 7);
    test_encoder_backward(1, 2240, 24, token_layout(token_positions(0, 1)), 1);
    // dwpe written (the first micro-batch): the positions of the distributed layouts (cyclic rank
    // 1 of 4, Zigzag's two runs, Ring's chunk 2 of 4) in a table longer than they use, the rest
    // written 0; the scalar path (C = 45) too.
    {
        TokenLayout zig = token_layout(token_positions(0, 1));
        zig.off[0] = 8, zig.off[1] = 48, zig.chunks = 2, zig.stride = 1;
        test_encoder_backward(3, 64, 72, token_layout(token_positions(1, 4)), 50, true, 3, 5);
        test_encoder_backward(2, 16, 72, zig, 20, true, 40, 7);
        test_encoder_backward(5, 32, 45, token_layout(token_positions(64, 1)), 50, true, 1, 3);
        test_encoder_backward(2, 2100, 16, token_layout(token_positions(1, 2)), 1, true, 1, 1);
    }
    // Positions that restart at each document (--reset-position-ids), summed by their own order in
    // a second launch: documents of ~7 and ~50 rows, added and written (a Ring chunk's layout,
    // extra rows 0, the scalar path); every row at position 0 (one run of 900 rows, 29 segments).
    test_encoder_backward(4, 160, 72, token_layout(token_positions(0, 1)), 50, false, 1, 0, 7);
    test_encoder_backward(3, 64, 72, token_layout(token_positions(1, 4)), 50, true, 3, 5, 50);
    test_encoder_backward(5, 32, 45, token_layout(token_positions(64, 1)), 50, true, 1, 3, 7);
    test_encoder_backward(3, 300, 16, token_layout(token_positions(0, 1)), 50, true, 1, 2, 1);
    // Fused LayerNorm writing the residual stream in place.
    test_fused_residual_layernorm(37, 72, true);
    // A row over 48 KiB: the forward opts in to more dynamic shared memory.
    test_layernorm_forward(3, 24608);
    test_fused_residual_layernorm(3, 24608, false);
    // LayerNorm backward: several row steps per block and a partial last step (N = 4133).
    // Chunks per thread (CPT) x threads, as layernorm_backward_cuda picks them. x128 path: C = 2560
    // (bf16 2 x 160, fp32 2 x 320), 4104 (bf16 2 x 288, fp32 4 x 288), and the largest CPT:
    // bf16 C = 8200 (4 x 288). Scalar path: C = 301 (2), 601 (4), 1999 (8 x 256), 4001 (8 x 512),
    // 4105 (16).
    test_layernorm_backward(4133, 72);
    test_layernorm_backward(37, 2560);
    test_layernorm_backward(37, 4104);
#ifndef GPT_CUDA_FP32
    test_layernorm_backward(3, 8200);
#endif
    for (int C : {301, 601, 1999, 4001, 4105}) test_layernorm_backward(5, C);
    // Written gradients (GRAD_WRITE), and more than one group of 16 blocks (N = 4133: 345
    // blocks, 22 groups; N = 37: one group, which writes the result itself).
    test_layernorm_backward(4133, 72, true);
    test_layernorm_backward(37, 2560, true);
    test_layernorm_backward(5, 601, true);
    // Element-wise kernels: tails after the last full vector, and misaligned pointers.
    for (long n : {1L, 37L, 45L * 37, 256L * 768 + 5}) test_elementwise(n, 0);
    test_elementwise(1001, 1);
    // RMSNorm (the LayerNorm kernels' RMS flag): C = 36 and 100 (multiples of 4, not 8: the x128
    // path in fp32, the scalar one in bf16) at ragged N; in place; a row over 48 KiB; and the
    // backward at the LayerNorm backward's configurations (several steps and 22 groups at N =
    // 4133, CPT x threads on both paths), its dweight added and written.
    for (int C : {36, 100})
        for (int N : {1, 37, 1000}) {
            test_rmsnorm_forward(N, C);
            test_fused_residual_rmsnorm(N, C, false);
            test_rmsnorm_backward(N, C, N == 37);
        }
    test_fused_residual_rmsnorm(37, 72, true);
    test_fused_residual_rmsnorm(37, 100, true);
    test_rmsnorm_forward(3, 24608);
    // Rows small enough for the epsilon to matter: Qwen2's 1e-6 and the default.
    for (float eps : {1e-6f, 1e-5f}) {
        test_rmsnorm_forward(37, 100, eps, 0.001f);
        test_layernorm_forward(37, 100, eps, 0.001f);
    }
    test_fused_residual_rmsnorm(3, 24608, false);
    test_rmsnorm_backward(4133, 72);
    test_rmsnorm_backward(4133, 100, true);
    test_rmsnorm_backward(37, 2560);
    test_rmsnorm_backward(37, 4104, true);
#ifndef GPT_CUDA_FP32
    test_rmsnorm_backward(3, 8200);
#endif
    for (int C : {301, 601, 1999, 4001, 4105}) test_rmsnorm_backward(5, C, C == 601);
    // SwiGLU: F a multiple of the x128 vector (768, 72; 36 and 100 in fp32 only) or not (45, 1, 7),
    // N = 1, 37, 256; misaligned pointers (the scalar path at F = 768); the backward in place.
    for (int F : {768, 72, 36, 100, 45, 1, 7})
        for (int N : {1, 37, 256}) test_swiglu(N, F, 0);
    test_swiglu(37, 768, 1);
    test_swiglu(37, 100, 1);
    test_swiglu(37, 72, 0, true);
    test_swiglu(5, 45, 1, true);
    // QK-norm: head sizes under a warp (16, 24), of one to eight values per lane (64, 80, 128,
    // 256), multi-head, grouped and multi-query key heads, token counts that fill no block of 16
    // (37, 1000: 63 blocks), both norms, the gradients added and written.
    for (bool rms : {false, true}) {
        test_qk_norm(37, 3, 3, 16, rms);
        test_qk_norm(1000, 4, 2, 64, rms, true);
        test_qk_norm(37, 6, 2, 80, rms);
        test_qk_norm(5, 2, 1, 128, rms, true);
        test_qk_norm(3, 2, 2, 256, rms);
        test_qk_norm(17, 3, 1, 24, rms, true);
    }
}

// --quick: every kernel and path once (vector and scalar rows, thousands of sorted rows, a row over
// 48 KiB, two LayerNorm and two RMSNorm backward variants, misaligned element-wise pointers; the
// RMSNorm forwards at N = 256 come from the grid in main).
static void test_quick_shapes(void) {
    test_encoder_backward(2, 2100, 16, token_layout(token_positions(1, 2)), 300);
    test_layernorm_forward(3, 24608);
    test_layernorm_backward(37, 2560);
    test_layernorm_backward(5, 601, true);
    test_encoder_backward(4, 160, 72, token_layout(token_positions(0, 1)), 5, true, 40, 3);
    test_elementwise(45L * 37, 0);
    test_elementwise(1001, 1);
    test_fused_residual_rmsnorm(37, 100, true);
    test_rmsnorm_backward(37, 2560, true);
    test_rmsnorm_backward(1000, 100);
    test_swiglu(37, 768, 0);
    test_swiglu(37, 100, 1, true);
    test_swiglu(37, 45, 0);
    test_qk_norm(37, 4, 2, 64, false, true);
    test_qk_norm(17, 3, 1, 24, true);
}

// --die ORDER: the encoder backward given a broken order of its rows ("swapped": two adjacent
// slots exchanged; "duplicate": one row twice, another missing; "range": a row past N) must stop
// with its diagnostic (tests/suites/cuda-layers.list), not race two warps on one dwte row.
static int die_encoder_order(const char* how) {
    const int B = 2, T = 32, C = 16, N = B * T;
    std::vector<int> tok(N), order(N), order_scratch(N);
    for (int n = 0; n < N; n++) tok[n] = (n * 7) % 40;   // some tokens repeat
    token_order(order.data(), order_scratch.data(), tok.data(), (size_t)N);
    if (!strcmp(how, "swapped")) std::swap(order[10], order[11]);
    else if (!strcmp(how, "duplicate")) order[20] = order[21];
    else if (!strcmp(how, "range")) order[5] = N;
    else {
        printf("--die takes swapped, duplicate or range, not '%s'\n", how);
        return 2;
    }
    int* d_tok = dalloc<int>(N);
    int* d_order = dalloc<int>(N);
    CUDA_CHECK(cudaMemcpy(d_tok, tok.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_order, order.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    floatX *d_dout = to_dev(rand_vec((size_t)N * C, 1.0f)), *d_dwte = to_dev(rand_vec((size_t)40 * C, 1.0f));
    floatX* d_dwpe = to_dev(rand_vec((size_t)T * C, 1.0f));
    const size_t scratch_bytes = encoder_backward_scratch_bytes(B, T, C);
    void* scratch = dalloc<char>(scratch_bytes);
    CUDA_CHECK(cudaMemset(scratch, 0, scratch_bytes));
    encoder_backward_cuda(d_dwte, d_dwpe, d_dout, d_tok, d_order, B, T, C, token_layout(token_positions(0, 1)),
                          NULL, NULL, T, 1, scratch, stream);
    sync();
    printf("encoder_backward_cuda accepted a broken order (%s)\n", how);
    return 0;
}

int main(int argc, char** argv) {
    const bool quick = argc == 2 && !strcmp(argv[1], "--quick");
    const bool die = argc == 3 && !strcmp(argv[1], "--die");
    if (argc > 1 && !quick && !die) {
        printf("usage: %s [--quick | --die swapped|duplicate|range]\n", argv[0]);
        return 2;
    }
    CUDA_CHECK(cudaStreamCreate(&stream));
    if (die) return die_encoder_order(argv[2]);
    printf("info floatX = %s, x128 = %d elements\n", FLOATX_NAME, (int)X128_ELEMS);
    int shape = 0;
    for (int C : SHAPE_C)
        for (const auto& bt : SHAPE_BT) {
            const int B = bt[0], T = bt[1], N = B * T;
            if (quick && N != 256) continue;
            // Positions cycle through the contiguous layout, a cyclic one (rank 3 of 4) and a
            // zigzag one (two interleaved chunks starting at 5 and 80).
            const int kind = shape++ % 3;
            TokenLayout pos = token_layout(kind == 1 ? token_positions(3, 4) : token_positions(0, 1));
            if (kind == 2) pos.off[0] = 5, pos.off[1] = 80, pos.chunks = 2;
            test_encoder_forward(B, T, C, pos);
            test_encoder_backward(B, T, C, pos, 50);
            test_layernorm_forward(N, C);
            test_fused_residual_layernorm(N, C, false);
            test_layernorm_backward(N, C);
            test_rmsnorm_forward(N, C);
            test_fused_residual_rmsnorm(N, C, false);
            test_rmsnorm_backward(N, C, shape % 2 == 0);
        }
    if (quick) test_quick_shapes();
    else test_special_shapes();
    // Rotary positions: head sizes 64, 128, 80 and a small ragged 6; layouts contiguous, zigzag
    // far into a long sequence (positions near 2^17, where an fp32 angle would be off) and per
    // row; grouped and multi-query key heads; theta 10000 and Llama 3's 500000; and the three
    // context-extension scalings (YaRN's amplitude 0.1 ln 8 + 1 on top).
    TokenLayout far = token_layout(token_positions(0, 1));
    far.off[0] = 5, far.off[1] = 131000, far.chunks = 2;
    test_rope(2, 37, 4, 4, 64, token_layout(token_positions(0, 1)), false, {10000, ROPE_SCALING_NONE, 0, 0});
    test_rope(1, 64, 4, 2, 128, far, false, {500000, ROPE_SCALING_NONE, 0, 0});
    test_rope(2, 16, 2, 1, 80, token_layout(token_positions(3, 4)), true, {10000, ROPE_SCALING_NONE, 0, 0});
    if (!quick) test_rope(3, 7, 3, 3, 6, far, false, {2, ROPE_SCALING_NONE, 0, 0});
    test_rope(1, 64, 4, 2, 128, far, false, {500000, ROPE_SCALING_YARN, 8.0f, 16384});
    test_rope(2, 16, 2, 1, 64, token_layout(token_positions(3, 4)), true,
              {500000, ROPE_SCALING_LLAMA3, 8.0f, 8192});
    if (!quick) test_rope(2, 37, 4, 4, 64, far, false, {10000, ROPE_SCALING_LINEAR, 4.0f, 2048});
    test_encoder_no_wpe(2, 37, 72);

    printf("\nworst error per kernel output (%s build):\n", FLOATX_NAME);
    for (int i = 0; i < n_worst; i++)
        printf("info %-40s %.2e  (bound %.0e)\n", worst[i].name, worst[i].err, worst[i].bound);
    CUDA_CHECK(cudaStreamDestroy(stream));
    const Bound bounds[] = {BOUND_ROUND1, BOUND_LN, BOUND_LN_BWD, BOUND_STATS};
    bounds_report("layers-" FLOATX_NAME, bounds, 4);
    return test_finish("test_layers_cuda (" FLOATX_NAME ")");
}
