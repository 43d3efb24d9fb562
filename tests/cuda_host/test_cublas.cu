// cuBLAS and cuBLASLt under the host runtime against naive double-precision references: every
// transpose combination, padded leading dimensions, bf16 and fp32 storage, strided batches,
// beta = 0 over NaN-filled outputs, the cuBLASLt epilogues (bias, GELU, GELU with aux, DGELU,
// bias gradients), C aliasing D, the errors for what is invalid or unsupported, and known answers
// of the model of what cuBLASLt refuses (host_cublas.h): alignment promises, leading dimensions,
// pointers less aligned than the algorithm, and the CUDA_HOST_CUBLASLT_REFUSE knob.
//
// `--die refuse-name` runs one cublasLtMatmul under the caller's CUDA_HOST_CUBLASLT_REFUSE, which
// must name an unknown epilogue: the program must end with the knob's one-line error.
// `--only fast-inputs` runs the known answers of fp32 inputs under the FAST compute types alone
// (the GPU kit's check of what the hardware does with them).
#include "model/cuda_common.cuh"
#include "tests/cuda_host/test_check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// --- Host and device buffers in fp32 or bf16 ------------------------------------------------------

static size_t type_bytes(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }

// Deterministic values in [-2, 2), rounded to what type t can hold so references see the stored value.
static float* make_values(size_t n, int seed, cudaDataType_t t) {
    float* h = (float*)malloc((n ? n : 1) * sizeof(float));
    unsigned s = 2463534242u + 977u * (unsigned)seed;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        float v = (float)(s % 4096) / 1024.0f - 2.0f;
        h[i] = t == CUDA_R_16BF ? __bfloat162float(__float2bfloat16(v)) : v;
    }
    return h;
}

static void* upload(const float* h, size_t n, cudaDataType_t t) {
    void* d;
    CUDA_CHECK(cudaMalloc(&d, (n ? n : 1) * type_bytes(t)));
    if (t == CUDA_R_32F) {
        CUDA_CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    } else {
        __nv_bfloat16* tmp = (__nv_bfloat16*)malloc((n ? n : 1) * sizeof(__nv_bfloat16));
        for (size_t i = 0; i < n; i++) tmp[i] = __float2bfloat16(h[i]);
        CUDA_CHECK(cudaMemcpy(d, tmp, n * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
        free(tmp);
    }
    return d;
}

static float* download(const void* d, size_t n, cudaDataType_t t) {
    float* h = (float*)malloc((n ? n : 1) * sizeof(float));
    if (t == CUDA_R_32F) {
        CUDA_CHECK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    } else {
        __nv_bfloat16* tmp = (__nv_bfloat16*)malloc((n ? n : 1) * sizeof(__nv_bfloat16));
        CUDA_CHECK(cudaMemcpy(tmp, d, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) h[i] = __bfloat162float(tmp[i]);
        free(tmp);
    }
    return h;
}

// Element (i, j) of op(X) for a column-major X with leading dimension ld.
static double op_at(const float* x, int trans, int ld, int i, int j) {
    return trans ? x[(size_t)i * ld + j] : x[(size_t)j * ld + i];
}

// Tolerances: fp32 storage vs bf16 storage (one rounding to 8 significant bits).
static double rtol_of(cudaDataType_t t) { return t == CUDA_R_16BF ? 1.0 / 128 : 1e-4; }

static const char* type_name(cudaDataType_t t) { return t == CUDA_R_16BF ? "bf16" : "fp32"; }

// --- cuBLAS -----------------------------------------------------------------------------------

typedef struct {
    int ta, tb, m, n, k, batch;
    cudaDataType_t ab, c;
    float alpha, beta;
    int strided_ex;  // 1: cublasGemmStridedBatchedEx, 0: cublasGemmEx / cublasSgemm
} GemmCase;

static void run_gemm(cublasHandle_t h, GemmCase g) {
    int ar = g.ta ? g.k : g.m, ac = g.ta ? g.m : g.k, br = g.tb ? g.n : g.k, bc = g.tb ? g.k : g.n;
    int lda = ar + 3, ldb = br + 1, ldc = g.m + 2;  // padding the GEMM must not touch
    long long sa = (long long)lda * ac + 5, sb = (long long)ldb * bc, sc = (long long)ldc * g.n + 7;
    size_t na = (size_t)sa * g.batch, nb = (size_t)sb * g.batch, nc = (size_t)sc * g.batch;
    float *A = make_values(na, 1, g.ab), *B = make_values(nb, 2, g.ab), *C = make_values(nc, 3, g.c);
    void *dA = upload(A, na, g.ab), *dB = upload(B, nb, g.ab), *dC = upload(C, nc, g.c);
    if (g.beta == 0.0f) CUDA_CHECK(cudaMemset(dC, 0xff, nc * type_bytes(g.c)));  // NaN: must be ignored
    cublasOperation_t ta = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const char* api;
    if (g.strided_ex) {
        api = "cublasGemmStridedBatchedEx";
        CUDA_CHECK(cublasGemmStridedBatchedEx(h, ta, tb, g.m, g.n, g.k, &g.alpha, dA, g.ab, lda, sa, dB, g.ab,
                                              ldb, sb, &g.beta, dC, g.c, ldc, sc, g.batch, CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT));
    } else if (g.ab == CUDA_R_32F && g.c == CUDA_R_32F) {
        api = "cublasSgemm";
        CUDA_CHECK(cublasSgemm(h, ta, tb, g.m, g.n, g.k, &g.alpha, (const float*)dA, lda, (const float*)dB, ldb,
                               &g.beta, (float*)dC, ldc));
    } else {
        api = "cublasGemmEx";
        CUDA_CHECK(cublasGemmEx(h, ta, tb, g.m, g.n, g.k, &g.alpha, dA, g.ab, lda, dB, g.ab, ldb, &g.beta, dC,
                                g.c, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
    }
    float* got = download(dC, nc, g.c);
    double worst = 0.0;
    int pad_bad = 0;
    for (int b = 0; b < g.batch; b++)
        for (int j = 0; j < g.n; j++)
            for (int i = 0; i < ldc; i++) {
                size_t at = (size_t)b * sc + (size_t)j * ldc + i;
                if (i >= g.m) {
                    pad_bad += memcmp(&got[at], &C[at], sizeof(float)) != 0 && g.beta != 0.0f;
                    continue;
                }
                double want = g.beta != 0.0f ? (double)g.beta * C[at] : 0.0, sum = 0.0;
                for (int q = 0; q < g.k; q++)
                    sum += op_at(A + (size_t)b * sa, g.ta, lda, i, q) * op_at(B + (size_t)b * sb, g.tb, ldb, q, j);
                want += g.alpha * sum;
                double r = fabs(got[at] - want) / (1e-4 + rtol_of(g.c) * fabs(want));
                if (!(r <= worst)) worst = r;
            }
    check(worst <= 1.0 && pad_bad == 0, "%s %s%s %dx%dx%d x%d, %s in, %s out, alpha %g beta %g: error ratio %.3g%s",
          api, g.ta ? "T" : "N", g.tb ? "T" : "N", g.m, g.n, g.k, g.batch, type_name(g.ab), type_name(g.c),
          g.alpha, g.beta, worst, pad_bad ? ", padding changed" : "");
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    free(A);
    free(B);
    free(C);
    free(got);
}

// fp32 inputs under CUBLAS_COMPUTE_32F_FAST_16BF and _FAST_TF32 (Muon's Newton-Schulz at
// --muon-fp32-matmul-prec medium and high): C = A B with B all ones and each column k of A one
// value 1 + f u (u the ulp of 1 at bf16's 7 or TF32's 10 mantissa bits), some negated, so each
// C element is the sum of the values as the tensor cores read them, exact in fp32. Rounded to
// nearest even the answer is known (0.25 u and the tie 0.5 u round down, 0.75 u up, the ties
// 1.5 u and 2.5 u to 2 u); truncating inputs, or fp32 inputs, give other sums, so a GPU run
// reads here which of them the hardware does.
static void test_fast_inputs(cublasHandle_t h) {
    static const struct { cublasComputeType_t compute; int bits; const char* name; } types[] = {
        {CUBLAS_COMPUTE_32F_FAST_16BF, 7, "FAST_16BF"}, {CUBLAS_COMPUTE_32F_FAST_TF32, 10, "FAST_TF32"}};
    // value k % 8 of column k: sign s times 1 + f u, read as 1 + g u
    static const double f[] = {0.25, 0.5, 0.75, 1.5, 2.5, 0.75, 1.5, 0.25};
    static const double g[] = {0, 0, 1, 2, 2, 1, 2, 0};   // f rounded to nearest even
    static const double s[] = {1, 1, 1, 1, -1, 1, 1, 1};
    enum { M = 64, N = 64, K = 64 };
    float *A = (float*)malloc(M * K * sizeof(float)), *B = (float*)malloc(K * N * sizeof(float));
    for (int t = 0; t < 2; t++) {
        const double u = ldexp(1.0, -types[t].bits);
        double want = 0, truncated = 0, exact = 0;   // every row of A alike
        for (int k = 0; k < K; k++) {
            want += s[k % 8] * (1 + g[k % 8] * u);
            truncated += s[k % 8] * (1 + floor(f[k % 8]) * u);
            exact += s[k % 8] * (1 + f[k % 8] * u);
            for (int i = 0; i < M; i++) A[k * M + i] = (float)(s[k % 8] * (1 + f[k % 8] * u));
        }
        check(want != truncated && want != exact, "%s: the known answer %.9g tells rounding from "
              "truncation (%.9g) and from fp32 inputs (%.9g)", types[t].name, want, truncated, exact);
        for (int i = 0; i < K * N; i++) B[i] = 1.0f;
        float *dA = (float*)upload(A, M * K, CUDA_R_32F), *dB = (float*)upload(B, K * N, CUDA_R_32F), *dC;
        CUDA_CHECK(cudaMalloc(&dC, M * N * sizeof(float)));
        const float one = 1.0f, zero = 0.0f;
        CUDA_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, dA, CUDA_R_32F, M, dB,
                                CUDA_R_32F, K, &zero, dC, CUDA_R_32F, M, types[t].compute,
                                CUBLAS_GEMM_DEFAULT));
        float* C = download(dC, M * N, CUDA_R_32F);
        int bad = 0;
        for (int i = 0; i < M * N; i++) bad += C[i] != (float)want;
        check(bad == 0, "%s on fp32 inputs: each input rounded to nearest even at %d mantissa bits "
              "(sum %.9g; got %.9g, %d of %d elements differ; truncated inputs give %.9g, fp32 "
              "inputs %.9g)", types[t].name, types[t].bits, want, C[0], bad, M * N, truncated, exact);
        free(C);
        CUDA_CHECK(cudaFree(dA));
        CUDA_CHECK(cudaFree(dB));
        CUDA_CHECK(cudaFree(dC));
    }
    free(A);
    free(B);
}

static void test_cublas(void) {
    cublasHandle_t h;
    cudaStream_t s;
    CUDA_CHECK(cublasCreate(&h));
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(cublasSetStream(h, s));
    CUDA_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    for (int t = 0; t < 4; t++) run_gemm(h, GemmCase{t & 1, t >> 1, 37, 29, 23, 1, CUDA_R_32F, CUDA_R_32F, 1.5f, 0.5f, 0});
    run_gemm(h, GemmCase{0, 1, 16, 40, 31, 1, CUDA_R_32F, CUDA_R_32F, 1.0f, 0.0f, 0});
    run_gemm(h, GemmCase{1, 0, 24, 33, 40, 1, CUDA_R_16BF, CUDA_R_16BF, 1.0f, 0.0f, 0});
    run_gemm(h, GemmCase{0, 1, 24, 33, 40, 1, CUDA_R_16BF, CUDA_R_32F, 0.75f, 1.0f, 0});
    run_gemm(h, GemmCase{1, 1, 19, 21, 17, 3, CUDA_R_16BF, CUDA_R_16BF, 1.0f, 0.25f, 1});
    run_gemm(h, GemmCase{0, 0, 19, 21, 17, 3, CUDA_R_32F, CUDA_R_32F, 2.0f, 0.0f, 1});
    test_fast_inputs(h);

    float one = 1.0f, zero = 0.0f;
    float* d;
    CUDA_CHECK(cudaMalloc(&d, 64 * 64 * sizeof(float)));
    cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, d, 4, d, 8, &zero, d, 8);
    check(st == CUBLAS_STATUS_INVALID_VALUE, "lda smaller than m is refused: %s", cublasGetStatusName(st));
    st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, d, CUDA_R_16F, 8, d, CUDA_R_16F, 8, &zero, d,
                      CUDA_R_16F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
#ifdef CUDA_HOST
    check(st == CUBLAS_STATUS_NOT_SUPPORTED, "fp16 operands are refused as unsupported: %s", cublasGetStatusName(st));
    float host[64];
    st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, host, 8, d, 8, &zero, d, 8);
    check(st == CUBLAS_STATUS_INVALID_VALUE, "a host pointer as A is refused: %s (%s)", cublasGetStatusName(st),
          cuda_host_error_detail());
    st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 65, 8, &one, d, 64, d, 8, &zero, d, 64);
    check(st == CUBLAS_STATUS_INVALID_VALUE, "a C range past its allocation is refused: %s", cublasGetStatusName(st));
#else
    (void)st;
#endif
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cublasDestroy(h));
    CUDA_CHECK(cudaStreamDestroy(s));
}

// --- cuBLASLt ---------------------------------------------------------------------------------

typedef struct {
    const char* name;
    int ta, tb, m, n, k, batch;
    cudaDataType_t ab, cd;
    cublasLtEpilogue_t epi;
    float alpha, beta;
    int c_is_d;  // C and D are the same buffer (accumulate in place)
} LtCase;

static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

static double gelu_grad_ref(double x) {
    double h = 1e-4;  // central difference: independent of the closed form in the runtime
    return (gelu_ref(x + h) - gelu_ref(x - h)) / (2 * h);
}

static void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t a, const void* v, size_t n) {
    CUDA_CHECK(cublasLtMatmulDescSetAttribute(desc, a, v, n));
}

static cublasLtMatrixLayout_t layout(cudaDataType_t t, int rows, int cols, int ld, int batch, long long stride) {
    cublasLtMatrixLayout_t l;
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
    if (batch > 1) {
        int64_t s = stride;
        CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s));
    }
    return l;
}

static void run_lt(cublasLtHandle_t lt, LtCase c) {
    int ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k, br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
    // ldb padded by 8 elements: padding the GEMM must not touch, and 16-byte multiples as the
    // epilogues need (host_cublas.h)
    int lda = ar, ldb = br + 8, ldd = c.m, ldaux = (c.m + 7) / 8 * 8 + 8;
    long long sa = (long long)lda * ac, sb = (long long)ldb * bc, sd = (long long)ldd * c.n;
    long long saux = (long long)ldaux * c.n;
    int bias_len = c.epi == CUBLASLT_EPILOGUE_BGRADB ? c.n : c.m;
    int dgelu = c.epi == CUBLASLT_EPILOGUE_DGELU || c.epi == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    int aux_out = c.epi == CUBLASLT_EPILOGUE_GELU_AUX || c.epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    int bias_in = c.epi == CUBLASLT_EPILOGUE_BIAS || c.epi == CUBLASLT_EPILOGUE_GELU_BIAS ||
                  c.epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || c.epi == CUBLASLT_EPILOGUE_RELU_BIAS;
    int bias_out = c.epi == CUBLASLT_EPILOGUE_BGRADA || c.epi == CUBLASLT_EPILOGUE_BGRADB ||
                   c.epi == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    int gelu = c.epi == CUBLASLT_EPILOGUE_GELU || c.epi == CUBLASLT_EPILOGUE_GELU_BIAS || aux_out;
    int relu = c.epi == CUBLASLT_EPILOGUE_RELU || c.epi == CUBLASLT_EPILOGUE_RELU_BIAS;
    size_t na = (size_t)sa * c.batch, nb = (size_t)sb * c.batch, nd = (size_t)sd * c.batch;
    size_t naux = (size_t)saux * c.batch, nbias = (size_t)bias_len * c.batch;
    float *A = make_values(na, 11, c.ab), *B = make_values(nb, 12, c.ab), *C = make_values(nd, 13, c.cd);
    float *bias = make_values(nbias, 14, c.cd), *aux = make_values(naux, 15, c.cd);
    void *dA = upload(A, na, c.ab), *dB = upload(B, nb, c.ab), *dC = upload(C, nd, c.cd);
    void *dD = c.c_is_d ? dC : upload(C, nd, c.cd), *dbias = upload(bias, nbias, c.cd), *daux = upload(aux, naux, c.cd);
    if (!c.c_is_d) CUDA_CHECK(cudaMemset(dD, 0xff, nd * type_bytes(c.cd)));

    cublasLtMatmulDesc_t desc;
    CUDA_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c.epi, sizeof c.epi);
    if (bias_in || bias_out) {
        int64_t bstride = bias_len;
        set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias);
        if (c.batch > 1) set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bstride, sizeof bstride);
    }
    if (aux_out || dgelu) {
        int64_t ld = ldaux, stride = saux;
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &daux, sizeof daux);
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
        if (c.batch > 1) set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride, sizeof stride);
    }
    cublasLtMatrixLayout_t la = layout(c.ab, ar, ac, lda, c.batch, sa), lb = layout(c.ab, br, bc, ldb, c.batch, sb);
    cublasLtMatrixLayout_t lc = layout(c.cd, c.m, c.n, ldd, c.batch, sd), ld = layout(c.cd, c.m, c.n, ldd, c.batch, sd);
    cublasLtMatmulPreference_t pref;
    size_t ws_bytes = 1 << 20;
    void* ws;
    CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
    CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                    sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CUDA_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 1, &heur, &found));
    CUDA_CHECK(found == 1 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED);
    CUDA_CHECK(cublasLtMatmul(lt, desc, &c.alpha, dA, la, dB, lb, &c.beta, dC, lc, dD, ld, &heur.algo, ws, ws_bytes, 0));

    float* got = download(dD, nd, c.cd);
    float* got_aux = download(daux, naux, c.cd);
    float* got_bias = download(dbias, nbias, c.cd);
    double worst = 0.0, worst_aux = 0.0, worst_bias = 0.0, rt = rtol_of(c.cd);
    double* dref = (double*)malloc(nd * sizeof(double));
    for (int b = 0; b < c.batch; b++) {
        const float *Ab = A + (size_t)b * sa, *Bb = B + (size_t)b * sb;
        for (int j = 0; j < c.n; j++)
            for (int i = 0; i < c.m; i++) {
                size_t at = (size_t)b * sd + (size_t)j * ldd + i, xat = (size_t)b * saux + (size_t)j * ldaux + i;
                double x = 0.0;
                for (int q = 0; q < c.k; q++) x += op_at(Ab, c.ta, lda, i, q) * op_at(Bb, c.tb, ldb, q, j);
                x = c.alpha * x + (c.beta != 0.0f ? c.beta * C[at] : 0.0);
                if (bias_in) x += bias[(size_t)b * bias_len + i];
                if (dgelu) x *= gelu_grad_ref(aux[xat]);
                if (aux_out) {
                    double r = fabs(got_aux[xat] - x) / (1e-3 + rt * fabs(x));
                    if (!(r <= worst_aux)) worst_aux = r;
                }
                if (gelu) x = gelu_ref(x);
                if (relu) x = x > 0 ? x : 0;
                dref[at] = x;
                double r = fabs(got[at] - x) / (1e-3 + rt * fabs(x));
                if (!(r <= worst)) worst = r;
            }
        for (int v = 0; v < bias_len && bias_out; v++) {
            double s = 0.0;
            if (c.epi == CUBLASLT_EPILOGUE_BGRADA) for (int q = 0; q < c.k; q++) s += op_at(Ab, c.ta, lda, v, q);
            if (c.epi == CUBLASLT_EPILOGUE_BGRADB) for (int q = 0; q < c.k; q++) s += op_at(Bb, c.tb, ldb, q, v);
            if (c.epi == CUBLASLT_EPILOGUE_DGELU_BGRAD)
                for (int j = 0; j < c.n; j++) s += dref[(size_t)b * sd + (size_t)j * ldd + v];
            double r = fabs(got_bias[(size_t)b * bias_len + v] - s) / (2e-3 + rt * fabs(s) + 1e-4 * c.n);
            if (!(r <= worst_bias)) worst_bias = r;
        }
    }
    check(worst <= 1.0 && worst_aux <= 1.0 && worst_bias <= 1.0,
          "cublasLtMatmul %s: %s%s %dx%dx%d x%d %s%s: error ratios D %.3g, aux %.3g, bias %.3g", c.name,
          c.ta ? "T" : "N", c.tb ? "T" : "N", c.m, c.n, c.k, c.batch, type_name(c.ab),
          c.cd != c.ab ? " -> fp32" : "", worst, worst_aux, worst_bias);

    CUDA_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(la));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(lb));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(lc));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(ld));
    CUDA_CHECK(cublasLtMatmulDescDestroy(desc));
    void* bufs[] = {dA, dB, dC, dbias, daux, ws};
    for (void* p : bufs) CUDA_CHECK(cudaFree(p));
    if (!c.c_is_d) CUDA_CHECK(cudaFree(dD));
    free(A), free(B), free(C), free(bias), free(aux), free(got), free(got_aux), free(got_bias), free(dref);
}

static void test_lt_unsupported(cublasLtHandle_t lt) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t l;
    cublasLtMatmulPreference_t pref;
    CUDA_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 16, 16, 16));
    CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_RELU_AUX;
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulHeuristicResult_t heur;
    int found = -1;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, l, l, l, l, pref, 1, &heur, &found);
#ifdef CUDA_HOST
    check(st == CUBLAS_STATUS_NOT_SUPPORTED && found == 0,
          "an unsupported epilogue (RELU_AUX) gets no algorithm and NOT_SUPPORTED: %s, %d found",
          cublasGetStatusName(st), found);
    int32_t order = CUBLASLT_ORDER_ROW;
    st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED, "row-major layouts are refused: %s", cublasGetStatusName(st));
#else
    (void)st;
#endif
    CUDA_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(l));
    CUDA_CHECK(cublasLtMatmulDescDestroy(desc));
}

// --- What cuBLASLt refuses ------------------------------------------------------------------------

// A forward-style GEMM D (m x n) = A^T (A: k x m) * B (B: k x n), every leading dimension given,
// with alignment promises for A..D (0: leave cuBLASLt's default of 256).
typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulPreference_t pref;
    int m, n, k;
} LtProblem;

static LtProblem lt_problem(cudaDataType_t t, int m, int n, int k, int ldab, cublasLtEpilogue_t epi,
                            const void* bias, const void* aux, int64_t aux_ld, uint32_t promise) {
    LtProblem p;
    p.m = m, p.n = n, p.k = k;
    CUDA_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int32_t ta = CUBLAS_OP_T;
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (bias) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (aux) {
        set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
    }
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.a, t, k, m, ldab));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.b, t, k, n, ldab));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.d, t, m, n, m));
    CUDA_CHECK(cublasLtMatmulPreferenceCreate(&p.pref));
    if (promise)
        for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
            CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(p.pref, (cublasLtMatmulPreferenceAttributes_t)a,
                                                            &promise, sizeof promise));
    return p;
}

static void lt_problem_destroy(LtProblem* p) {
    CUDA_CHECK(cublasLtMatmulPreferenceDestroy(p->pref));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(p->a));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(p->b));
    CUDA_CHECK(cublasLtMatrixLayoutDestroy(p->d));
    CUDA_CHECK(cublasLtMatmulDescDestroy(p->desc));
}

// The number of algorithms the heuristic offers (its status in *st), the first in *algo.
static int lt_found(cublasLtHandle_t lt, const LtProblem* p, cublasLtMatmulAlgo_t* algo, cublasStatus_t* st) {
    cublasLtMatmulHeuristicResult_t heur;
    memset(&heur, 0, sizeof heur);
    int found = -1;
    *st = cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->a, p->b, p->d, p->d, p->pref, 1, &heur, &found);
    if (algo) *algo = heur.algo;
    return found;
}

static cublasStatus_t lt_run(cublasLtHandle_t lt, const LtProblem* p, const cublasLtMatmulAlgo_t* algo,
                             const void* A, const void* B, void* D) {
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(lt, p->desc, &one, A, p->a, B, p->b, &zero, D, p->d, D, p->d, algo, NULL, 0, 0);
}

// max |D - A^T B| / (1e-3 + rtol |ref|) over D (m x n) for A, B (k x m, k x n, leading dim ld).
static double lt_error(const float* A, const float* B, const void* dD, int m, int n, int k, int ld, cudaDataType_t t) {
    float* got = download(dD, (size_t)m * n, t);
    double worst = 0.0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double x = 0.0;
            for (int q = 0; q < k; q++) x += (double)A[(size_t)i * ld + q] * B[(size_t)j * ld + q];
            const double r = fabs(got[(size_t)j * m + i] - x) / (1e-3 + rtol_of(t) * fabs(x));
            if (!(r <= worst)) worst = r;
        }
    free(got);
    return worst;
}

static void test_lt_refusals(cublasLtHandle_t lt) {
    const cudaDataType_t H = CUDA_R_16BF;
    const int m = 32, n = 16, k = 32;
    // Buffers with room for an offset of up to 8 elements; cudaMalloc aligns them to 256 bytes.
    float* hA = make_values((size_t)k * m + 8, 21, H);
    float* hB = make_values((size_t)k * n + 8, 22, H);
    float* hbias = make_values(m + 8, 23, H);
    __nv_bfloat16 *A = (__nv_bfloat16*)upload(hA, (size_t)k * m + 8, H), *B = (__nv_bfloat16*)upload(hB, (size_t)k * n + 8, H);
    __nv_bfloat16 *bias = (__nv_bfloat16*)upload(hbias, m + 8, H), *D;
    CUDA_CHECK(cudaMalloc(&D, ((size_t)m * n + 8) * sizeof(__nv_bfloat16)));
    cublasLtMatmulAlgo_t algo;
    cublasStatus_t st;

    // 16-byte aligned operands, leading dimensions of 64 bytes, a 256-byte aligned bias: BIAS runs.
    LtProblem aligned = lt_problem(H, m, n, k, k, CUBLASLT_EPILOGUE_BIAS, bias, NULL, 0, 16);
    int found = lt_found(lt, &aligned, &algo, &st);
    check(st == CUBLAS_STATUS_SUCCESS && found == 1, "heuristic: BIAS, bf16, 16-byte alignment promised, ld 64 "
          "bytes, aligned bias: %d algorithm(s), %s", found, cublasGetStatusName(st));
    st = lt_run(lt, &aligned, &algo, A, B, D);
    check(st == CUBLAS_STATUS_SUCCESS, "cublasLtMatmul BIAS with the pointers the algorithm was chosen for: %s",
          cublasGetStatusName(st));
    // DEFAULT at 2-byte alignment, ld 7 (14 bytes), A and D 2-byte aligned: runs and is right.
    LtProblem ld7 = lt_problem(H, 16, 8, 7, 7, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 0, 2);
    found = lt_found(lt, &ld7, &algo, &st);
    check(st == CUBLAS_STATUS_SUCCESS && found == 1, "heuristic: DEFAULT, bf16, ld 7, 2-byte alignment promised: "
          "%d algorithm(s), %s", found, cublasGetStatusName(st));
    st = lt_run(lt, &ld7, &algo, A + 1, B, D + 1);
    double err = st == CUBLAS_STATUS_SUCCESS ? lt_error(hA + 1, hB, D + 1, 16, 8, 7, 7, H) : INFINITY;
    check(st == CUBLAS_STATUS_SUCCESS && err <= 1.0, "cublasLtMatmul DEFAULT on 2-byte aligned A and D: %s, "
          "error ratio %.3g", cublasGetStatusName(st), err);
#ifdef CUDA_HOST
    // The model's refusals (a GPU may well run some of these; see host_cublas.h).
    st = lt_run(lt, &aligned, &algo, A, B, D);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul BIAS with a DEFAULT algorithm is refused: %s",
          cublasGetStatusName(st));
    lt_found(lt, &aligned, &algo, &st);
    check(algo.data[2] == 16 && algo.data[5] == 16 && algo.data[6] == 256,
          "the algorithm records the alignments it was chosen for: A %llu, D %llu, bias %llu bytes",
          (unsigned long long)algo.data[2], (unsigned long long)algo.data[5], (unsigned long long)algo.data[6]);
    st = lt_run(lt, &aligned, &algo, A + 8, B, D + 8);
    check(st == CUBLAS_STATUS_SUCCESS, "cublasLtMatmul BIAS with 16-byte aligned A and D (16 promised): %s",
          cublasGetStatusName(st));
    st = lt_run(lt, &aligned, &algo, A + 1, B, D);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul BIAS with A 2-byte aligned (16 promised): %s",
          cublasGetStatusName(st));
    const void* bias8 = bias + 8;
    set_desc(aligned.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias8, sizeof bias8);
    st = lt_run(lt, &aligned, &algo, A, B, D);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul BIAS with a 16-byte aligned bias, the algorithm chosen "
          "for a 256-byte aligned one: %s", cublasGetStatusName(st));
    st = lt_run(lt, &aligned, NULL, A, B, D);
    check(st == CUBLAS_STATUS_SUCCESS, "cublasLtMatmul BIAS, algo NULL, 16-byte aligned bias: %s", cublasGetStatusName(st));
    st = lt_run(lt, &aligned, NULL, A + 1, B, D);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul BIAS, algo NULL, A 2-byte aligned: %s",
          cublasGetStatusName(st));

    const void* bias1 = bias + 1;
    LtProblem bias_2b = lt_problem(H, m, n, k, k, CUBLASLT_EPILOGUE_BIAS, bias1, NULL, 0, 16);
    found = lt_found(lt, &bias_2b, NULL, &st);
    check(st == CUBLAS_STATUS_SUCCESS && found == 0, "heuristic: BIAS with a 2-byte aligned bias: %d algorithm(s), %s",
          found, cublasGetStatusName(st));
    LtProblem bias_ld7 = lt_problem(H, 16, 8, 7, 7, CUBLASLT_EPILOGUE_BIAS, bias, NULL, 0, 16);
    found = lt_found(lt, &bias_ld7, NULL, &st);
    check(st == CUBLAS_STATUS_SUCCESS && found == 0, "heuristic: BIAS with ld 7 bf16 (14 bytes): %d algorithm(s), %s",
          found, cublasGetStatusName(st));
    LtProblem bias_promise8 = lt_problem(H, m, n, k, k, CUBLASLT_EPILOGUE_BIAS, bias, NULL, 0, 8);
    found = lt_found(lt, &bias_promise8, NULL, &st);
    check(st == CUBLAS_STATUS_SUCCESS && found == 0, "heuristic: BIAS with 8-byte alignment promised: %d "
          "algorithm(s), %s", found, cublasGetStatusName(st));
    LtProblem aux_ld12 = lt_problem(H, m, n, k, k, CUBLASLT_EPILOGUE_GELU_AUX, NULL, D, 36, 16);
    found = lt_found(lt, &aux_ld12, NULL, &st);
    check(st == CUBLAS_STATUS_INVALID_VALUE && found == 0, "heuristic: GELU_AUX with EPILOGUE_AUX_LD 36 (not "
          "divisible by 8) is invalid: %s", cublasGetStatusName(st));
    LtProblem default_256 = lt_problem(H, m, n, k, k, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 0, 0);
    found = lt_found(lt, &default_256, &algo, &st);
    st = lt_run(lt, &default_256, &algo, A + 8, B, D);
    check(found == 1 && st == CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul DEFAULT, no alignment promised (256 by "
          "default), A 16-byte aligned: %s", cublasGetStatusName(st));
    st = lt_run(lt, &ld7, NULL, (const char*)A + 1, B, D);
    check(st == CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul with a bf16 A at an odd address is invalid: %s",
          cublasGetStatusName(st));

    // CUDA_HOST_CUBLASLT_REFUSE=RELU,RELU_AUX (set by main): the heuristic offers RELU, the matmul
    // refuses it; DEFAULT and BIAS still run.
    LtProblem relu = lt_problem(H, m, n, k, k, CUBLASLT_EPILOGUE_RELU, NULL, NULL, 0, 16);
    found = lt_found(lt, &relu, &algo, &st);
    check(st == CUBLAS_STATUS_SUCCESS && found == 1, "knob: the heuristic still offers RELU: %d algorithm(s)", found);
    st = lt_run(lt, &relu, &algo, A, B, D);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED, "knob: cublasLtMatmul refuses RELU: %s", cublasGetStatusName(st));
    lt_problem_destroy(&relu);
    relu = lt_problem(H, m, n, k, k, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 0, 16);
    lt_found(lt, &relu, &algo, &st);
    st = lt_run(lt, &relu, &algo, A, B, D);
    check(st == CUBLAS_STATUS_SUCCESS, "knob: the same GEMM with DEFAULT runs: %s", cublasGetStatusName(st));
    lt_problem_destroy(&relu);
    lt_problem_destroy(&bias_2b);
    lt_problem_destroy(&bias_ld7);
    lt_problem_destroy(&bias_promise8);
    lt_problem_destroy(&aux_ld12);
    lt_problem_destroy(&default_256);
#endif
    lt_problem_destroy(&aligned);
    lt_problem_destroy(&ld7);
    void* bufs[] = {A, B, bias, D};
    for (void* p : bufs) CUDA_CHECK(cudaFree(p));
    free(hA), free(hB), free(hbias);
}

// DGELU on known answers: D = (A^T B) * gelu'(aux) with the derivative of the tanh approximation at
// points where it is exact (0: 0.5; +-10: 1 and 0 in fp32) or given here to 16 digits (from the
// closed form in double), so the epilogue is checked against numbers, not against the runtime's
// own formula. B's second column is negative: the sign must come through.
static void test_lt_dgelu_known(cublasLtHandle_t lt) {
    const cudaDataType_t F = CUDA_R_32F;
    const int m = 8, n = 2, k = 1, ld = 4;  // ld 4: 16-byte rows, as the epilogue kernels need
    const float a[8] = {1, 2, -1, 0.5f, 3, 1, -2, 4}, b[2] = {1, -2};
    const float aux[16] = {0, 1, -1, 10, -10, 2, -0.5f, 0, 1, 0, 10, -10, 2, -1, 0, -0.5f};
    struct { float x; double g; } known[] = {{0, 0.5}, {1, 1.0829640838457826}, {-1, -0.08296408384578255},
                                             {10, 1.0}, {-10, 0.0}, {2, 1.0860992566236183},
                                             {-0.5f, 0.13263009646535764}};
    float hA[8 * 4] = {0}, hB[2 * 4] = {0};
    for (int i = 0; i < m; i++) hA[i * ld] = a[i];
    for (int j = 0; j < n; j++) hB[j * ld] = b[j];
    void *dA = upload(hA, 8 * 4, F), *dB = upload(hB, 2 * 4, F), *daux = upload(aux, 16, F);
    float* dD;
    CUDA_CHECK(cudaMalloc(&dD, (size_t)m * n * sizeof(float)));
    CUDA_CHECK(cudaMemset(dD, 0xff, (size_t)m * n * sizeof(float)));
    LtProblem p = lt_problem(F, m, n, k, ld, CUBLASLT_EPILOGUE_DGELU, NULL, daux, m, 0);
    cublasLtMatmulAlgo_t algo;
    cublasStatus_t st;
    const int found = lt_found(lt, &p, &algo, &st);
    check(st == CUBLAS_STATUS_SUCCESS && found == 1, "DGELU known answers: the heuristic offers an algorithm");
    CUDA_CHECK(lt_run(lt, &p, &algo, dA, dB, dD));
    float* got = download(dD, (size_t)m * n, F);
    double worst = 0.0;
    int unknown = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            const float x = aux[j * m + i];
            double g = NAN;
            for (size_t q = 0; q < sizeof known / sizeof known[0]; q++)
                if (known[q].x == x) g = known[q].g;
            unknown += g != g;
            const double want = (double)a[i] * b[j] * g, err = fabs(got[j * m + i] - want) / (1e-30 + fabs(want) + 1.0);
            if (!(err <= worst)) worst = err;
        }
    check(unknown == 0 && worst < 1e-6, "cublasLtMatmul DGELU: D = (A^T B) * gelu'(aux) on known derivatives "
          "(0 -> 0.5, 1 -> 1.0829641, -10 -> 0, ...): max error %.2e", worst);
    lt_problem_destroy(&p);
    free(got);
    void* bufs[] = {dA, dB, daux, dD};
    for (void* q : bufs) CUDA_CHECK(cudaFree(q));
}

static void test_cublaslt(void) {
    cublasLtHandle_t lt;
    CUDA_CHECK(cublasLtCreate(&lt));
    const cudaDataType_t F = CUDA_R_32F, H = CUDA_R_16BF;
    // ta = T, tb = N with A as (k x m): llm.c's forward matmul, out = inp @ W^T (+ bias).
    run_lt(lt, LtCase{"DEFAULT", 1, 0, 40, 24, 32, 1, F, F, CUBLASLT_EPILOGUE_DEFAULT, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"DEFAULT NN", 0, 0, 33, 17, 20, 1, F, F, CUBLASLT_EPILOGUE_DEFAULT, 0.5f, 0.0f, 0});
    run_lt(lt, LtCase{"BIAS", 1, 0, 40, 24, 32, 1, F, F, CUBLASLT_EPILOGUE_BIAS, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"BIAS", 1, 0, 40, 24, 32, 1, H, H, CUBLASLT_EPILOGUE_BIAS, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"RELU_BIAS", 1, 0, 40, 24, 32, 1, F, F, CUBLASLT_EPILOGUE_RELU_BIAS, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"GELU", 0, 1, 32, 24, 16, 1, H, H, CUBLASLT_EPILOGUE_GELU, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"GELU_BIAS", 1, 0, 48, 16, 24, 1, F, F, CUBLASLT_EPILOGUE_GELU_BIAS, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"GELU_AUX_BIAS", 1, 0, 48, 16, 24, 1, H, H, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"GELU_AUX", 1, 0, 48, 16, 24, 1, F, F, CUBLASLT_EPILOGUE_GELU_AUX, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"DGELU", 0, 0, 48, 16, 24, 1, H, H, CUBLASLT_EPILOGUE_DGELU, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"DGELU_BGRAD", 0, 0, 48, 16, 24, 1, F, F, CUBLASLT_EPILOGUE_DGELU_BGRAD, 1.0f, 0.0f, 0});
    // llm.c's weight gradient: dW (C x OC) = inp (C x BT) * dout^T, with dbias from BGRADB.
    run_lt(lt, LtCase{"BGRADB", 0, 1, 24, 40, 64, 1, F, F, CUBLASLT_EPILOGUE_BGRADB, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"BGRADB", 0, 1, 24, 40, 64, 1, H, H, CUBLASLT_EPILOGUE_BGRADB, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"BGRADA", 1, 0, 24, 40, 64, 1, F, F, CUBLASLT_EPILOGUE_BGRADA, 1.0f, 0.0f, 0});
    run_lt(lt, LtCase{"accumulate into D (C = D, beta 1)", 0, 1, 24, 40, 64, 1, F, F, CUBLASLT_EPILOGUE_DEFAULT,
                      1.0f, 1.0f, 1});
    run_lt(lt, LtCase{"bf16 in, fp32 out, beta 0.5", 1, 1, 20, 28, 36, 1, H, F, CUBLASLT_EPILOGUE_DEFAULT, 1.0f,
                      0.5f, 0});
    run_lt(lt, LtCase{"strided batch, GELU_AUX_BIAS", 1, 0, 16, 12, 8, 3, H, H, CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
                      1.0f, 0.0f, 0});
    test_lt_dgelu_known(lt);
    test_lt_unsupported(lt);
    test_lt_refusals(lt);
    CUDA_CHECK(cublasLtDestroy(lt));
}

// --die refuse-name: a valid DEFAULT GEMM, so that only the knob can end the program.
static void die_refuse_name(void) {
    cublasLtHandle_t lt;
    CUDA_CHECK(cublasLtCreate(&lt));
    float* d;
    CUDA_CHECK(cudaMalloc(&d, 16 * 16 * sizeof(float)));
    CUDA_CHECK(cudaMemset(d, 0, 16 * 16 * sizeof(float)));
    LtProblem p = lt_problem(CUDA_R_32F, 16, 16, 16, 16, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 0, 0);
    CUDA_CHECK(lt_run(lt, &p, NULL, d, d, d));
    printf("--die refuse-name: expected CUDA_HOST_CUBLASLT_REFUSE with an unknown name to end the program\n");
}

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--die") && !strcmp(argv[2], "refuse-name")) {
        die_refuse_name();
        return 1;
    }
    if (argc == 3 && !strcmp(argv[1], "--only") && !strcmp(argv[2], "fast-inputs")) {
        cublasHandle_t h;
        CUDA_CHECK(cublasCreate(&h));
        test_fast_inputs(h);
        CUDA_CHECK(cublasDestroy(h));
        return test_finish("test_cublas --only fast-inputs");
    }
    if (argc > 1) {
        printf("usage: %s [--die refuse-name | --only fast-inputs]\n", argv[0]);
        return 2;
    }
#ifdef CUDA_HOST
    // Read once, at the first cublasLtMatmul: RELU and RELU_AUX are refused, no other test uses them.
    setenv("CUDA_HOST_CUBLASLT_REFUSE", "RELU,RELU_AUX", 1);
#endif
    test_cublas();
    test_cublaslt();
    return test_finish("test_cublas");
}
