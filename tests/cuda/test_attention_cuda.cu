// The CUDA partial attention (attention/partial_attention.cu) against its CPU twin
// (attention/partial_attention.c) on random inputs: forward (o, lse), row-dot (d), backward
// (dq, dk, dv accumulated onto random values, with the FINAL lse and d of the queries) and the LSE
// merge, for single-device attention, every ATTENTION2D mesh position (q = r + pq*m,
// k = c + pkv*n, pq and pkv in 1..4, including queries that see no key), Ring chunks (including
// fully masked chunks), head sizes 16 to 128 (80 included) and sequence lengths that are not
// multiples of the 64-row tiles; inputs read from a fused QKV buffer, from tight rows, from rows
// with an aligned gap and from rows whose stride breaks 16-byte alignment (the scalar load path).
// Outputs are poisoned with NaN before each launch, and the gap columns of every output must still
// be NaN afterwards (nothing written outside the heads). Where one call is the whole attention of
// its queries (parts == 1), the single-call forms (floatX output and gradients, written rather than
// accumulated, into poisoned buffers) are checked too. The backward is run twice on the first
// part and must give the same bits (no atomics whose order varies). The merge of the partials over split key
// sets must give the attention over all keys. Sliding-window scenarios (AttentionProblem.window,
// in every call of the scenario, the CPU twin's too) run the same checks on the kernels that serve
// them: the Hopper kernels' LOWER instances where they serve the call, else the sm_80-class split
// forward and key-tile backward.
// Document-masked scenarios (AttentionProblem.docs: bounds from model/documents.c on tokens with a
// boundary token, in host memory for the CPU twin and device memory for the kernels) likewise:
// boundaries inside and at the edges of tiles, one-token documents, a first document continued
// from an earlier sequence, other documents in every sequence, alone and under windows, on single,
// mesh and Ring positions (blocks a query's document does not reach give empty partials).
//
// Both sides see the same floatX-rounded inputs; errors are max|gpu - cpu| / max|cpu| per tensor
// (for dq, dk, dv: relative to the size of the accumulated gradient, max|cpu - initial value|).
// Bounds: tests/cuda/bounds.h, one column for the host runtime and one for a GPU (below); in the
// bf16 build they are set from the measured errors (P and dS are rounded to bf16 before the
// tensor-core products).
//
// `--die bad-head-size` must end with the launcher's diagnostic (HS = 24 is refused), `--die
// decode-docs` with the refusal of a decoding step under a document mask, `--die capture-grow` with
// the refusal of a workspace growing inside a CUDA graph capture.
#include "attention/partial_attention_cuda.cuh"
#include "model/documents.h"
#include "tests/cuda/bounds.h"
#include "tests/cuda_host/test_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

// Bounds (tests/cuda/bounds.h): host runtime and GPU columns.
#ifdef GPT_CUDA_FP32
// Measured on the host: o 8e-7, lse 2e-7, d 3e-7, grads 1.3e-6, merge 1e-7.
static Bound B_O = {"o", 1e-5, 3e-5, "GPU: FMA contraction and exp2f (2 ulp) move each probability by a few ulp", 0};
static Bound B_LSE = {"lse", 1e-5, 3e-5, "GPU: exp2f/log2f approximations in the fp32 statistics", 0};
static Bound B_D = {"d", 1e-5, 3e-5, "GPU: FMA contraction in the row sums of dO * O", 0};
static Bound B_GRAD = {"dq,dk,dv", 1e-5, 5e-5,
                       "GPU: dS = P (dP - D) subtracts close values, amplifying P's few-ulp differences", 0};
static Bound B_MERGE = {"merge-kernel", 1e-6, 1e-5, "GPU: exp2f and FMA in the merge weights", 0};
static const bool FUSED_MERGE = false;   // (the fp32 build keeps forward + merge kernel)
#else
// Measured on the host: o 2.2e-3, lse 2e-7, d 1.3e-7, grads 3.3e-3 (scores of std 0.3; with peaked
// softmaxes, query amplitude 5, see the output), merge 1e-7.
static Bound B_O = {"o", 5e-3, 5e-3, "same: P rounded to bf16 (2^-9) dominates; fp32 differences are ~1000x smaller", 0};
static Bound B_LSE = {"lse", 1e-5, 3e-5, "GPU: exp2f/log2f approximations; scores are fp32 sums of exact bf16 products", 0};
static Bound B_D = {"d", 1e-5, 3e-5, "GPU: FMA contraction in the row sums of dO * O", 0};
static Bound B_GRAD = {"dq,dk,dv", 1e-2, 1e-2, "same: P and dS rounded to bf16 dominate", 0};
static Bound B_MERGE = {"merge-kernel", 1e-6, 1e-5, "GPU: exp2f and FMA in the merge weights (fp32 in both builds)", 0};
static const bool FUSED_MERGE = true;   // attention_partial_forward_merge_cuda
#endif

typedef std::vector<float> Vec;

static unsigned long long rng = 0x2545F4914F6CDD1DULL;
static float uniform(void) {   // in [-1, 1)
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) * 0x1.0p-24 * 2.0 - 1.0);
}
static float round_x(float x) { return to_float(from_float<floatX>(x)); }

// (rows x C) of values in [-amp, amp), rounded to floatX.
static Vec random_rows(long rows, int C, float amp) {
    Vec a((size_t)rows * C);
    for (float& x : a) x = round_x(amp * uniform());
    return a;
}

// Local rows i of each sequence = full rows off + stride*i (B sequences of T rows of C).
static Vec take_rows(const Vec& full, int B, int T, int C, long off, long stride, int n) {
    Vec a((size_t)B * n * C);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++)
            memcpy(&a[((size_t)b * n + i) * C], &full[((size_t)b * T + off + stride * i) * C], sizeof(float) * C);
    return a;
}

// Device copies with row stride ld; the ld - C gap columns hold NaN.
template <typename T> static T* upload(const Vec& h, long rows, int C, int ld) {
    std::vector<T> tmp((size_t)rows * ld, from_float<T>(NAN));
    for (long r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) tmp[(size_t)r * ld + c] = from_float<T>(h[(size_t)r * C + c]);
    T* d;
    CUDA_CHECK(cudaMalloc(&d, sizeof(T) * tmp.size()));
    CUDA_CHECK(cudaMemcpy(d, tmp.data(), sizeof(T) * tmp.size(), cudaMemcpyHostToDevice));
    return d;
}

static Vec download(const float* d, long n) {
    Vec h((size_t)n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, sizeof(float) * n, cudaMemcpyDeviceToHost));
    return h;
}

static Vec download_x(const floatX* d, long n) {
    std::vector<floatX> tmp((size_t)n);
    CUDA_CHECK(cudaMemcpy(tmp.data(), d, sizeof(floatX) * n, cudaMemcpyDeviceToHost));
    Vec h((size_t)n);
    for (long i = 0; i < n; i++) h[(size_t)i] = to_float(tmp[(size_t)i]);
    return h;
}

static floatX* poisoned_x(long n) {
    floatX* d;
    CUDA_CHECK(cudaMalloc(&d, sizeof(floatX) * n));
    CUDA_CHECK(cudaMemset(d, 0xFF, sizeof(floatX) * n));
    return d;
}

static float* poisoned(long n) {
    float* d;
    CUDA_CHECK(cudaMalloc(&d, sizeof(float) * n));
    CUDA_CHECK(cudaMemset(d, 0xFF, sizeof(float) * n));
    return d;
}

// max |got - want| / max |want - base| over (rows x C) (got has row stride ld, want and base are
// tight; base NULL means 0). NaN anywhere counts as infinite error; so does a gap column of got
// that is no longer NaN (the kernel wrote outside its heads).
static double rel_err(const Vec& got, int ld, const Vec& want, const Vec* base, long rows, int C) {
    double md = 0, mr = 0;
    for (long r = 0; r < rows; r++) {
        for (int c = 0; c < C; c++) {
            const double g = got[(size_t)r * ld + c], w = want[(size_t)r * C + c];
            const double d = fabs(g - w);
            if (!(d == d)) return INFINITY;
            md = d > md ? d : md;
            const double ref = fabs(w - (base ? (*base)[(size_t)r * C + c] : 0.0));
            mr = ref > mr ? ref : mr;
        }
        for (int c = C; c < ld; c++)
            if (!isnan(got[(size_t)r * ld + c])) return INFINITY;
    }
    return md / (mr > 0 ? mr : 1);
}

// lse: -inf exactly where the reference has -inf; elsewhere max|got - want| / max|want|.
static double lse_err(const Vec& got, const Vec& want) {
    double md = 0, mr = 0;
    for (size_t i = 0; i < want.size(); i++) {
        if (isinf(want[i]) || isinf(got[i])) {
            if (!(got[i] == want[i])) return INFINITY;
            continue;
        }
        const double d = fabs((double)got[i] - want[i]);
        if (!(d == d)) return INFINITY;
        md = d > md ? d : md;
        mr = fabs(want[i]) > mr ? fabs(want[i]) : mr;
    }
    return md / (mr > 0 ? mr : 1);
}

struct Worst {
    double o, lse, d, dq, dk, dv, merged_o, merged_lse, merge_kernel, ox, gx;
};
static Worst worst;

// FNV-1a over the bytes of every backward's gradients: equal across CUDA_HOST_SCHEDULE_SEEDs
// (tests/test_attention_order.sh), however the blocks were scheduled.
static unsigned long long grad_bits = 0xcbf29ce484222325ULL;
static void hash_bits(const Vec& v) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(float); i++) grad_bits = (grad_bits ^ p[i]) * 0x100000001b3ULL;
}
static void keep(double* w, double e) { *w = e > *w || !(e == e) ? e : *w; }

// One query set against a split of the keys into `parts` sets, as one rank row of a mesh (or one
// Ring query chunk) sees it: checks every partial forward and backward against the CPU twin and
// the merge of the partials against attention over all keys.
struct Scenario {
    const char* label;
    int B, NH, HS, T;
    long qoff, qstride;
    int nq;
    int parts;
    long koff[4];
    long kstride;
    int nk;
    int ld_extra;   // row stride = C + ld_extra for every tensor (3: no 16-byte alignment)
    bool fused;     // Q, K, V from one (B, T, 3C) buffer (single device: same rows for q and k)
    float qamp;     // queries in [-qamp, qamp): 1 gives scores of std 0.3, 5 a peaked softmax whose
                    // running max moves from tile to tile (the online rescaling matters)
    bool decode = false;   // AttentionProblem.decode: the forward may split the keys (split-KV)
    long window = 0;       // AttentionProblem.window: 0 causal, W a sliding window of W positions
    int docs = 0;          // document pattern (doc_tokens): 0 none
};

// Document patterns of the B x T tokens (boundary token DOC_BOUNDARY begins a document; see
// model/documents.h). DOCS_EDGES: in even sequences a first document continued from an earlier
// sequence (no boundary at 0), one-token documents (3, 4, 5), boundaries beside and at the 64- and
// 128-row tile edges; in odd ones a boundary at 0 and every 37 positions, shifted by 5 per
// sequence pair. DOCS_LONG: documents of 150 (even sequences, from 50 on) or 90 positions (odd,
// shifted by 17 per sequence): whole tiles inside one document. DOCS_SHORT: documents of 1, 2 and 3
// tokens in turn (one-token documents alone would leave dQ and dK exactly 0: P = 1, dP = D).
enum { DOCS_NONE, DOCS_EDGES, DOCS_LONG, DOCS_SHORT };
static const int DOC_BOUNDARY = 7;
static std::vector<int> doc_tokens(int pattern, int B, int T) {
    std::vector<int> tok((size_t)B * T);
    static const int edges[] = {3, 4, 5, 40, 63, 64, 65, 100, 127, 128, 129, 191, 192, 255, 256, 300, 383, 384};
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            bool first = false;
            if (pattern == DOCS_EDGES && b % 2 == 0) {
                for (int e : edges) first = first || e == t;
                first = first || t == T - 1;
            } else if (pattern == DOCS_EDGES) {
                first = t % 37 == (b / 2 * 5) % 37;
            } else if (pattern == DOCS_LONG) {
                first = b % 2 == 0 ? t >= 50 && (t - 50) % 150 == 0 : (t + 17 * (b / 2)) % 90 == 0;
            } else if (pattern == DOCS_SHORT) {
                first = t % 6 == 0 || t % 6 == 1 || t % 6 == 3;
            }
            tok[(size_t)b * T + t] = first ? DOC_BOUNDARY : t % 5;
        }
    return tok;
}

// Forward calls, those that ran the Hopper kernel, and those whose kernel is not the expected one:
// with ATTENTION_FWD_KERNEL=sm90 or auto (the host runtime is a compute capability 9.0 device) every call
// of HS 64, 80 or 128 on 16-byte aligned inputs that is not a decoding step, else none. The same for
// the backward under ATTENTION_BWD_KERNEL: every call of HS 64, 80 or 128 on 16-byte aligned inputs,
// lse and d, Tq a multiple of 64 and a floatX dQ or an fp32 one with 16-byte aligned rows. Sliding
// windows and document masks do not change that (their LOWER instances); their calls are counted
// apart too, so that the test fails if no scenario gives them to the Hopper kernels where those run.
static int fwd_calls = 0, fwd_sm90 = 0, fwd_unexpected = 0;
static int win_fwd_calls = 0, win_bwd_calls = 0, win_fwd_sm90 = 0, win_bwd_sm90 = 0;
static int doc_fwd_calls = 0, doc_bwd_calls = 0, doc_fwd_sm90 = 0, doc_bwd_sm90 = 0;   // (document-masked calls)
// Under ATTENTION_BWD_HOPPER=q128 the Hopper calls of HS 64 with Tq a multiple of 128 take 128-query
// tiles ("sm90-q128"), and no others: not those under a window or a document mask (the default
// schedule's LOWER instance).
static int bwd_calls = 0, bwd_sm90 = 0, bwd_q128 = 0, bwd_unexpected = 0;
// env_name=sm90, or auto (also when unset: the default) on a compute capability 9.0 device (bf16
// build).
static bool hopper_selected(const char* env_name) {
    const char* env = getenv(env_name);
    if (!env || !*env) env = "auto";
    if (!FUSED_MERGE) return false;
    int device = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return !strcmp(env, "sm90") || (!strcmp(env, "auto") && major == 9 && minor == 0);
}
static bool hopper_q128_selected(void) {
    const char* env = getenv("ATTENTION_BWD_HOPPER");
    return env && !strcmp(env, "q128");
}
static void count_forward_kernel(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k, int ldk,
                                 const floatX* v) {
    const bool aligned = ((uintptr_t)q | (uintptr_t)k | (uintptr_t)v) % 16 == 0 && ldq % 8 == 0 && ldk % 8 == 0;
    const bool want = hopper_selected("ATTENTION_FWD_KERNEL") && (p->HS == 64 || p->HS == 80 || p->HS == 128) &&
                      aligned && !p->decode;
    const char* kernel = attention_cuda_forward_kernel(p, q, ldq, k, ldk, v, ldk);
    const bool sm90 = !strcmp(kernel, "sm90");
    if (p->window) {
        win_fwd_calls++;
        win_fwd_sm90 += sm90;
    }
    if (p->docs.start) {
        doc_fwd_calls++;
        doc_fwd_sm90 += sm90;
    }
    fwd_calls++;
    fwd_sm90 += sm90;
    fwd_unexpected += sm90 != want;
}
// dq: the fp32 dQ of a partial backward (rows ld apart), or NULL for a floatX one.
static void count_backward_kernel(const AttentionProblem* p, const floatX* q, int ldq, const floatX* k, int ldk,
                                  const floatX* v, const floatX* g, int ld, const float* lse, const float* d,
                                  const float* dq) {
    const bool aligned = ((uintptr_t)q | (uintptr_t)k | (uintptr_t)v | (uintptr_t)g) % 16 == 0 && ldq % 8 == 0 &&
                         ldk % 8 == 0 && ld % 8 == 0;
    const bool stats = ((uintptr_t)lse | (uintptr_t)d) % 16 == 0 && p->Tq % 64 == 0;
    const bool dq_ok = !dq || ((uintptr_t)dq % 16 == 0 && ld % 4 == 0);
    const bool want = hopper_selected("ATTENTION_BWD_KERNEL") && (p->HS == 64 || p->HS == 80 || p->HS == 128) &&
                      aligned && stats && dq_ok;
    const char* kernel = attention_cuda_backward_kernel(p, q, ldq, k, ldk, v, ldk, g, ld, lse, d, dq, ld);
    const bool sm90 = !strcmp(kernel, "sm90") || !strcmp(kernel, "sm90-q128"), q128 = !strcmp(kernel, "sm90-q128");
    if (p->window) {
        win_bwd_calls++;
        win_bwd_sm90 += sm90;
    }
    if (p->docs.start) {
        doc_bwd_calls++;
        doc_bwd_sm90 += sm90;
    }
    const bool want_q128 = want && hopper_q128_selected() && p->HS == 64 && p->Tq % 128 == 0 && !p->window &&
                           !p->docs.start;
    bwd_calls++;
    bwd_sm90 += sm90;
    bwd_q128 += q128;
    bwd_unexpected += sm90 != want || q128 != want_q128;
}

static void run_scenario(const Scenario& s) {
    const int B = s.B, NH = s.NH, HS = s.HS, T = s.T, C = NH * HS, nq = s.nq, nk = s.nk;
    const int ld = C + s.ld_extra;
    const Vec q = random_rows((long)B * T, C, s.qamp), k = random_rows((long)B * T, C, 1.0f);
    const Vec v = random_rows((long)B * T, C, 1.0f), g = random_rows((long)B * T, C, 1.0f);
    const Vec ql = take_rows(q, B, T, C, s.qoff, s.qstride, nq);
    const Vec gl = take_rows(g, B, T, C, s.qoff, s.qstride, nq);

    // Document bounds (s.docs): host memory for the CPU twin, device memory for the kernels.
    DocumentBounds docs_h = {NULL, NULL, 0, 0}, docs_d = {NULL, NULL, 0, 0};
    std::vector<int> doc_start((size_t)B * T), doc_end((size_t)B * T);
    int *doc_start_d = NULL, *doc_end_d = NULL;
    if (s.docs) {
        document_bounds(doc_tokens(s.docs, B, T).data(), B, T, DOC_BOUNDARY, doc_start.data(), doc_end.data());
        CUDA_CHECK(cudaMalloc(&doc_start_d, sizeof(int) * B * T));
        CUDA_CHECK(cudaMalloc(&doc_end_d, sizeof(int) * B * T));
        CUDA_CHECK(cudaMemcpy(doc_start_d, doc_start.data(), sizeof(int) * B * T, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(doc_end_d, doc_end.data(), sizeof(int) * B * T, cudaMemcpyHostToDevice));
        const int span = document_span(doc_start.data(), B, T);
        docs_h = {doc_start.data(), doc_end.data(), T, span};
        docs_d = {doc_start_d, doc_end_d, T, span};
    }

    // The queries' final output and statistics: attention over every key of the sequence.
    AttentionProblem all = {B, NH, HS, nq, T, {s.qoff, s.qstride}, {0, 1}, s.window, docs_h, s.decode, NH};
    Vec o_fin((size_t)B * nq * C), lse_fin((size_t)B * NH * nq), d_fin((size_t)B * NH * nq);
    attention_partial_forward(&all, ql.data(), C, k.data(), C, v.data(), C, o_fin.data(), C, lse_fin.data());
    Vec o_fin_x(o_fin);
    for (float& x : o_fin_x) x = round_x(x);   // the saved output is floatX
    attention_row_dot(&all, o_fin_x.data(), C, gl.data(), C, d_fin.data());

    bool nondeterministic = false;
    double e_o = 0, e_lse = 0, e_d = 0, e_dk = 0, e_dv = 0, e_mo, e_ml, e_mk = 0, e_dq;
    double e_ox = 0, e_gx = 0;   // the single-call forms (floatX outputs), when parts == 1
    AttentionProblem p0 = {B, NH, HS, nq, nk, {s.qoff, s.qstride}, {s.koff[0], s.kstride}, s.window, docs_d, s.decode, NH};
    {   // row-dot on the device
        floatX* o_d = upload<floatX>(o_fin_x, (long)B * nq, C, ld);
        floatX* g_d = upload<floatX>(gl, (long)B * nq, C, ld);
        float* d_d = poisoned((long)B * NH * nq);
        attention_row_dot_cuda(&p0, o_d, ld, g_d, ld, d_d, 0);
        e_d = rel_err(download(d_d, (long)B * NH * nq), NH * nq, d_fin, NULL, B, NH * nq);
        CUDA_CHECK(cudaFree(o_d));
        CUDA_CHECK(cudaFree(g_d));
        CUDA_CHECK(cudaFree(d_d));
    }

    floatX *q_d, *g_d = upload<floatX>(gl, (long)B * nq, C, ld), *qkv_d = NULL;
    int ldq = ld;
    if (s.fused) {   // one (B, T, 3C) buffer: the kernel reads heads out of the fused rows
        Vec qkv((size_t)B * T * 3 * C);
        for (long r = 0; r < (long)B * T; r++) {
            memcpy(&qkv[(size_t)r * 3 * C], &q[(size_t)r * C], sizeof(float) * C);
            memcpy(&qkv[(size_t)r * 3 * C + C], &k[(size_t)r * C], sizeof(float) * C);
            memcpy(&qkv[(size_t)r * 3 * C + 2 * C], &v[(size_t)r * C], sizeof(float) * C);
        }
        qkv_d = upload<floatX>(qkv, (long)B * T, 3 * C, 3 * C);
        q_d = qkv_d;
        ldq = 3 * C;
    } else {
        q_d = upload<floatX>(ql, (long)B * nq, C, ld);
    }
    float* lse_fin_d = upload<float>(lse_fin, 1, B * NH * nq, B * NH * nq);
    float* d_fin_d = upload<float>(d_fin, 1, B * NH * nq, B * NH * nq);
    // dq accumulates over the parts, on both sides, from the same random start.
    const Vec dq0 = random_rows((long)B * nq, C, 0.5f);
    Vec dq_ref(dq0);
    float* dq_d = upload<float>(dq0, (long)B * nq, C, ld);
    float *merged_o = poisoned((long)B * nq * ld), *merged_lse = poisoned((long)B * NH * nq);
    // bf16 build: the same merges by the forward with its merge fused (attention_partial_forward_merge_cuda);
    // the same bits as forward + merge kernel unless a forward split its keys (then within B_O).
    float *fused_o = poisoned((long)B * nq * ld), *fused_lse = poisoned((long)B * NH * nq);
    bool fused_differs = false, any_split = false;
    double e_fm = 0;

    for (int part = 0; part < s.parts; part++) {
        // p: the CPU twin's (host bounds); pd: the kernels' (device bounds).
        const AttentionProblem p = {B,      NH,       HS,     nq, nk, {s.qoff, s.qstride}, {s.koff[part], s.kstride},
                                    s.window, docs_h, s.decode, NH};
        AttentionProblem pd = p;
        pd.docs = docs_d;
        const Vec kl = take_rows(k, B, T, C, s.koff[part], s.kstride, nk);
        const Vec vl = take_rows(v, B, T, C, s.koff[part], s.kstride, nk);
        const floatX *k_d, *v_d;
        floatX *k_own = NULL, *v_own = NULL;
        int ldk = ld;
        if (s.fused) {
            k_d = qkv_d + C;
            v_d = qkv_d + 2 * C;
            ldk = 3 * C;
        } else {
            k_d = k_own = upload<floatX>(kl, (long)B * nk, C, ld);
            v_d = v_own = upload<floatX>(vl, (long)B * nk, C, ld);
        }

        // Forward.
        Vec o_ref((size_t)B * nq * C), lse_ref((size_t)B * NH * nq);
        attention_partial_forward(&p, ql.data(), C, kl.data(), C, vl.data(), C, o_ref.data(), C, lse_ref.data());
        float *o_d = poisoned((long)B * nq * ld), *lse_d = poisoned((long)B * NH * nq);
        attention_partial_forward_cuda(&pd, q_d, ldq, k_d, ldk, v_d, ldk, o_d, ld, lse_d, 0);
        count_forward_kernel(&pd, q_d, ldq, k_d, ldk, v_d);
        const Vec o = download(o_d, (long)B * nq * ld), lse = download(lse_d, (long)B * NH * nq);
        keep(&e_o, rel_err(o, ld, o_ref, NULL, (long)B * nq, C));
        keep(&e_lse, lse_err(lse, lse_ref));

        // Merge on the device, and the same merge on the host from the device partials.
        if (part == 0) {
            CUDA_CHECK(cudaMemcpy(merged_o, o_d, sizeof(float) * B * nq * ld, cudaMemcpyDeviceToDevice));
            CUDA_CHECK(cudaMemcpy(merged_lse, lse_d, sizeof(float) * B * NH * nq, cudaMemcpyDeviceToDevice));
            CUDA_CHECK(cudaMemcpy(fused_o, o_d, sizeof(float) * B * nq * ld, cudaMemcpyDeviceToDevice));
            CUDA_CHECK(cudaMemcpy(fused_lse, lse_d, sizeof(float) * B * NH * nq, cudaMemcpyDeviceToDevice));
        } else {
            Vec mo = download(merged_o, (long)B * nq * ld), ml = download(merged_lse, (long)B * NH * nq);
            attention_merge(B, NH, HS, nq, mo.data(), ld, ml.data(), o.data(), ld, lse.data());
            attention_merge_cuda(B, NH, HS, nq, merged_o, ld, merged_lse, o_d, ld, lse_d, 0);
            Vec mo_tight((size_t)B * nq * C);
            for (long r = 0; r < (long)B * nq; r++)
                memcpy(&mo_tight[(size_t)r * C], &mo[(size_t)r * ld], sizeof(float) * C);
            keep(&e_mk, rel_err(download(merged_o, (long)B * nq * ld), ld, mo_tight, NULL, (long)B * nq, C));
            keep(&e_mk, lse_err(download(merged_lse, (long)B * NH * nq), ml));
#ifndef GPT_CUDA_FP32
            attention_partial_forward_merge_cuda(&pd, q_d, ldq, k_d, ldk, v_d, ldk, fused_o, ld, fused_lse, 0);
            any_split = any_split || attention_cuda_forward_splits(&pd) > 1;
            const Vec fo = download(fused_o, (long)B * nq * ld), fl = download(fused_lse, (long)B * NH * nq);
            const Vec so = download(merged_o, (long)B * nq * ld), sl = download(merged_lse, (long)B * NH * nq);
            if (!any_split) {   // bytes: the padding columns hold the same poison
                fused_differs = fused_differs || memcmp(fo.data(), so.data(), sizeof(float) * fo.size()) ||
                                memcmp(fl.data(), sl.data(), sizeof(float) * fl.size());
            } else {
                Vec so_tight((size_t)B * nq * C);
                for (long r = 0; r < (long)B * nq; r++)
                    memcpy(&so_tight[(size_t)r * C], &so[(size_t)r * ld], sizeof(float) * C);
                keep(&e_fm, rel_err(fo, ld, so_tight, NULL, (long)B * nq, C));
                keep(&e_fm, lse_err(fl, sl));
            }
#endif
        }

        // Backward with the final lse and d, accumulating onto random values.
        const Vec dk0 = random_rows((long)B * nk, C, 0.5f), dv0 = random_rows((long)B * nk, C, 0.5f);
        Vec dk_ref(dk0), dv_ref(dv0);
        attention_partial_backward(&p, ql.data(), C, kl.data(), C, vl.data(), C, gl.data(), C, lse_fin.data(),
                                   d_fin.data(), dq_ref.data(), C, dk_ref.data(), C, dv_ref.data(), C);
        float *dk_d = upload<float>(dk0, (long)B * nk, C, ld), *dv_d = upload<float>(dv0, (long)B * nk, C, ld);
        count_backward_kernel(&pd, q_d, ldq, k_d, ldk, v_d, g_d, ld, lse_fin_d, d_fin_d, dq_d);
        attention_partial_backward_cuda(&pd, q_d, ldq, k_d, ldk, v_d, ldk, g_d, ld, lse_fin_d, d_fin_d, dq_d, ld,
                                        dk_d, ld, dv_d, ld, 0);
        const Vec dk = download(dk_d, (long)B * nk * ld), dv = download(dv_d, (long)B * nk * ld);
        keep(&e_dk, rel_err(dk, ld, dk_ref, &dk0, (long)B * nk, C));
        keep(&e_dv, rel_err(dv, ld, dv_ref, &dv0, (long)B * nk, C));
        if (part == 0) {   // deterministic: the same call again gives the same bits (ordered dQ adds)
            float* dk2_d = upload<float>(dk0, (long)B * nk, C, ld);
            float* dv2_d = upload<float>(dv0, (long)B * nk, C, ld);
            float* dq2_d = upload<float>(dq0, (long)B * nq, C, ld);
            attention_partial_backward_cuda(&pd, q_d, ldq, k_d, ldk, v_d, ldk, g_d, ld, lse_fin_d, d_fin_d, dq2_d,
                                            ld, dk2_d, ld, dv2_d, ld, 0);
            const Vec dq_first = download(dq_d, (long)B * nq * ld), dq_again = download(dq2_d, (long)B * nq * ld);
            const Vec dk_again = download(dk2_d, (long)B * nk * ld), dv_again = download(dv2_d, (long)B * nk * ld);
            hash_bits(dq_first), hash_bits(dk), hash_bits(dv);
            // NaN gaps compare unequal as floats: compare the bytes.
            if (memcmp(dk.data(), dk_again.data(), sizeof(float) * dk.size()) ||
                memcmp(dv.data(), dv_again.data(), sizeof(float) * dv.size()) ||
                memcmp(dq_first.data(), dq_again.data(), sizeof(float) * dq_first.size()))
                nondeterministic = true;
            for (float* ptr : {dk2_d, dv2_d, dq2_d}) CUDA_CHECK(cudaFree(ptr));
        }

        if (s.parts == 1) {   // the single-call forms: floatX outputs and gradients, written
            floatX* ox_d = poisoned_x((long)B * nq * ld);
            float* lse2_d = poisoned((long)B * NH * nq);
            attention_forward_cuda(&pd, q_d, ldq, k_d, ldk, v_d, ldk, ox_d, ld, lse2_d, 0);
            keep(&e_ox, rel_err(download_x(ox_d, (long)B * nq * ld), ld, o_ref, NULL, (long)B * nq, C));
            keep(&e_lse, lse_err(download(lse2_d, (long)B * NH * nq), lse_ref));
            floatX *dqx_d = poisoned_x((long)B * nq * ld), *dkx_d = poisoned_x((long)B * nk * ld);
            floatX* dvx_d = poisoned_x((long)B * nk * ld);
            count_backward_kernel(&pd, q_d, ldq, k_d, ldk, v_d, g_d, ld, lse_fin_d, d_fin_d, NULL);
            attention_backward_cuda(&pd, q_d, ldq, k_d, ldk, v_d, ldk, g_d, ld, lse_fin_d, d_fin_d, dqx_d, ld, dkx_d,
                                    ld, dvx_d, ld, 0);
            // The gradient of this one call: ref - initial, against the written values.
            Vec gq(dq_ref), gk(dk_ref), gv(dv_ref);
            for (size_t i = 0; i < gq.size(); i++) gq[i] -= dq0[i];
            for (size_t i = 0; i < gk.size(); i++) gk[i] -= dk0[i], gv[i] -= dv0[i];
            const Vec dqx = download_x(dqx_d, (long)B * nq * ld);
            hash_bits(dqx);
            keep(&e_gx, rel_err(dqx, ld, gq, NULL, (long)B * nq, C));
            keep(&e_gx, rel_err(download_x(dkx_d, (long)B * nk * ld), ld, gk, NULL, (long)B * nk, C));
            keep(&e_gx, rel_err(download_x(dvx_d, (long)B * nk * ld), ld, gv, NULL, (long)B * nk, C));
            for (void* ptr : {(void*)ox_d, (void*)lse2_d, (void*)dqx_d, (void*)dkx_d, (void*)dvx_d})
                CUDA_CHECK(cudaFree(ptr));
        }

        for (void* ptr : {(void*)k_own, (void*)v_own, (void*)o_d, (void*)lse_d, (void*)dk_d, (void*)dv_d})
            if (ptr) CUDA_CHECK(cudaFree(ptr));
    }
    e_dq = rel_err(download(dq_d, (long)B * nq * ld), ld, dq_ref, &dq0, (long)B * nq, C);
    e_mo = rel_err(download(merged_o, (long)B * nq * ld), ld, o_fin, NULL, (long)B * nq, C);
    e_ml = lse_err(download(merged_lse, (long)B * NH * nq), lse_fin);

    // Every error is recorded against its bound (no short-circuit: the worst values are reported).
    bool ok = bound_seen(&B_O, e_o);
    ok = bound_seen(&B_O, e_mo) && ok;
    ok = bound_seen(&B_LSE, e_lse) && ok;
    ok = bound_seen(&B_LSE, e_ml) && ok;
    ok = bound_seen(&B_D, e_d) && ok;
    ok = bound_seen(&B_GRAD, e_dq) && ok;
    ok = bound_seen(&B_GRAD, e_dk) && ok;
    ok = bound_seen(&B_GRAD, e_dv) && ok;
    ok = bound_seen(&B_MERGE, e_mk) && ok;
    ok = bound_seen(&B_O, e_ox) && ok;
    ok = bound_seen(&B_GRAD, e_gx) && ok;
    ok = bound_seen(&B_O, e_fm) && ok;
    ok = ok && !nondeterministic && !fused_differs;
    char fused_what[48] = "";   // (bf16 build, several parts)
    if (s.parts > 1 && FUSED_MERGE) {
        if (any_split) snprintf(fused_what, sizeof fused_what, " fused merge %.1e", e_fm);
        else snprintf(fused_what, sizeof fused_what, " fused merge %s", fused_differs ? "NOT the same bits" : "same bits");
    }
    check(ok, "%-28s o %.1e lse %.1e d %.1e dq %.1e dk %.1e dv %.1e merged o %.1e lse %.1e (kernel %.1e) "
          "floatX o %.1e grads %.1e%s%s",
          s.label, e_o, e_lse, e_d, e_dq, e_dk, e_dv, e_mo, e_ml, e_mk, e_ox, e_gx, fused_what,
          nondeterministic ? " NOT bit-for-bit deterministic" : "");
    keep(&worst.o, e_o);
    keep(&worst.lse, e_lse);
    keep(&worst.d, e_d);
    keep(&worst.dq, e_dq);
    keep(&worst.dk, e_dk);
    keep(&worst.dv, e_dv);
    keep(&worst.merged_o, e_mo);
    keep(&worst.merged_lse, e_ml);
    keep(&worst.merge_kernel, e_mk);
    keep(&worst.ox, e_ox);
    keep(&worst.gx, e_gx);

    for (void* ptr : {(void*)q_d, (void*)g_d, (void*)lse_fin_d, (void*)d_fin_d, (void*)dq_d, (void*)merged_o,
                      (void*)merged_lse, (void*)fused_o, (void*)fused_lse, (void*)doc_start_d, (void*)doc_end_d})
        if (ptr) CUDA_CHECK(cudaFree(ptr));
}

static Scenario single(const char* label, int B, int NH, int HS, int T, int ld_extra, bool fused, float qamp) {
    Scenario s = {label, B, NH, HS, T, 0, 1, T, 1, {0, 0, 0, 0}, 1, T, ld_extra, fused, qamp};
    return s;
}

// A decoding step: the last nq queries of a sequence of T tokens over all its keys.
static Scenario decode(const char* label, int B, int NH, int HS, int T, int nq) {
    Scenario s = {label, B, NH, HS, T, T - nq, 1, nq, 1, {0, 0, 0, 0}, 1, T, 0, false, 5.0f, true};
    return s;
}

// s under a sliding window of W positions.
static Scenario windowed(Scenario s, long W) {
    s.window = W;
    return s;
}

// s under a document mask of pattern `pattern` (doc_tokens).
static Scenario with_docs(Scenario s, int pattern) {
    s.docs = pattern;
    return s;
}

// Grouped-query attention (p->NKV < p->NH: the kernels run on K and V widened to the query heads,
// the backward sums dK and dV over each group) against the CPU twin, which tests/test_attention.c
// checks against a naive reference: the partial forward, the fused forward+merge (bf16), the
// single-call floatX forward, the accumulating backward (onto random values) and the single-call
// floatX backward, for a query set at (qoff, qstride) against keys 0, 1, 2, ... (window W).
static void run_gqa(const char* label, int B, int NH, int NKV, int HS, int T, long qoff, long qstride, int nq,
                    long window) {
    const int C = NH * HS, CK = NKV * HS;
    const Vec ql = random_rows((long)B * nq, C, 1.0f), gl = random_rows((long)B * nq, C, 1.0f);
    const Vec k = random_rows((long)B * T, CK, 1.0f), v = random_rows((long)B * T, CK, 1.0f);
    AttentionProblem p = attention_problem(B, NH, HS, nq, T, token_positions(qoff, qstride), token_positions(0, 1));
    p.NKV = NKV;
    p.window = window;
    Vec o_ref((size_t)B * nq * C), lse_ref((size_t)B * NH * nq), d_ref((size_t)B * NH * nq);
    attention_partial_forward(&p, ql.data(), C, k.data(), CK, v.data(), CK, o_ref.data(), C, lse_ref.data());
    Vec o_x(o_ref);
    for (float& x : o_x) x = round_x(x);
    attention_row_dot(&p, o_x.data(), C, gl.data(), C, d_ref.data());
    const Vec dq0 = random_rows((long)B * nq, C, 0.5f), dk0 = random_rows((long)B * T, CK, 0.5f);
    const Vec dv0 = random_rows((long)B * T, CK, 0.5f);
    Vec dq_ref(dq0), dk_ref(dk0), dv_ref(dv0);
    attention_partial_backward(&p, ql.data(), C, k.data(), CK, v.data(), CK, gl.data(), C, lse_ref.data(),
                               d_ref.data(), dq_ref.data(), C, dk_ref.data(), CK, dv_ref.data(), CK);
    Vec zq((size_t)B * nq * C, 0.0f), zk((size_t)B * T * CK, 0.0f);   // the single-call gradients
    Vec dq1(zq), dk1(zk), dv1(zk);
    attention_partial_backward(&p, ql.data(), C, k.data(), CK, v.data(), CK, gl.data(), C, lse_ref.data(),
                               d_ref.data(), dq1.data(), C, dk1.data(), CK, dv1.data(), CK);

    floatX *q_d = upload<floatX>(ql, (long)B * nq, C, C), *g_d = upload<floatX>(gl, (long)B * nq, C, C);
    floatX *k_d = upload<floatX>(k, (long)B * T, CK, CK), *v_d = upload<floatX>(v, (long)B * T, CK, CK);
    float *o_d = poisoned((long)B * nq * C), *lse_d = poisoned((long)B * NH * nq);
    attention_partial_forward_cuda(&p, q_d, C, k_d, CK, v_d, CK, o_d, C, lse_d, 0);
    const double e_o = rel_err(download(o_d, (long)B * nq * C), C, o_ref, NULL, (long)B * nq, C);
    const double e_lse = lse_err(download(lse_d, (long)B * NH * nq), lse_ref);
    double e_fm = 0;
#ifndef GPT_CUDA_FP32
    {   // merged into an empty partial: the partial itself
        float* fo = poisoned((long)B * nq * C);
        CUDA_CHECK(cudaMemset(fo, 0, sizeof(float) * B * nq * C));
        Vec empty((size_t)B * NH * nq, -INFINITY);
        float* fl = upload<float>(empty, 1, B * NH * nq, B * NH * nq);
        attention_partial_forward_merge_cuda(&p, q_d, C, k_d, CK, v_d, CK, fo, C, fl, 0);
        e_fm = rel_err(download(fo, (long)B * nq * C), C, o_ref, NULL, (long)B * nq, C);
        CUDA_CHECK(cudaFree(fo));
        CUDA_CHECK(cudaFree(fl));
    }
#endif
    floatX* ox_d = poisoned_x((long)B * nq * C);
    attention_forward_cuda(&p, q_d, C, k_d, CK, v_d, CK, ox_d, C, lse_d, 0);
    const double e_ox = rel_err(download_x(ox_d, (long)B * nq * C), C, o_ref, NULL, (long)B * nq, C);
    float* lse_fin_d = upload<float>(lse_ref, 1, B * NH * nq, B * NH * nq);
    float* d_fin_d = upload<float>(d_ref, 1, B * NH * nq, B * NH * nq);
    float *dq_d = upload<float>(dq0, (long)B * nq, C, C), *dk_d = upload<float>(dk0, (long)B * T, CK, CK);
    float* dv_d = upload<float>(dv0, (long)B * T, CK, CK);
    attention_partial_backward_cuda(&p, q_d, C, k_d, CK, v_d, CK, g_d, C, lse_fin_d, d_fin_d, dq_d, C, dk_d, CK,
                                    dv_d, CK, 0);
    const double e_dq = rel_err(download(dq_d, (long)B * nq * C), C, dq_ref, &dq0, (long)B * nq, C);
    const double e_dk = rel_err(download(dk_d, (long)B * T * CK), CK, dk_ref, &dk0, (long)B * T, CK);
    const double e_dv = rel_err(download(dv_d, (long)B * T * CK), CK, dv_ref, &dv0, (long)B * T, CK);
    floatX *dqx = poisoned_x((long)B * nq * C), *dkx = poisoned_x((long)B * T * CK);
    floatX* dvx = poisoned_x((long)B * T * CK);
    attention_backward_cuda(&p, q_d, C, k_d, CK, v_d, CK, g_d, C, lse_fin_d, d_fin_d, dqx, C, dkx, CK, dvx, CK, 0);
    double e_gx = rel_err(download_x(dqx, (long)B * nq * C), C, dq1, NULL, (long)B * nq, C);
    keep(&e_gx, rel_err(download_x(dkx, (long)B * T * CK), CK, dk1, NULL, (long)B * T, CK));
    keep(&e_gx, rel_err(download_x(dvx, (long)B * T * CK), CK, dv1, NULL, (long)B * T, CK));
    printf("%-34s o %.1e lse %.1e fused %.1e ox %.1e dq %.1e dk %.1e dv %.1e gx %.1e\n", label, e_o, e_lse, e_fm,
           e_ox, e_dq, e_dk, e_dv, e_gx);
    check(bound_seen(&B_O, e_o) && bound_seen(&B_O, e_fm) && bound_seen(&B_O, e_ox), "%s: GQA output within %.0e",
          label, bound_limit(&B_O));
    check(bound_seen(&B_LSE, e_lse), "%s: GQA lse within %.0e", label, bound_limit(&B_LSE));
    check(bound_seen(&B_GRAD, e_dq) && bound_seen(&B_GRAD, e_dk) && bound_seen(&B_GRAD, e_dv) && bound_seen(&B_GRAD, e_gx),
          "%s: GQA gradients within %.0e", label, bound_limit(&B_GRAD));
    void* bufs[] = {q_d, g_d, k_d, v_d, o_d, lse_d, ox_d, lse_fin_d, d_fin_d, dq_d, dk_d, dv_d, dqx, dkx, dvx};
    for (void* b : bufs) CUDA_CHECK(cudaFree(b));
}

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--die") && !strcmp(argv[2], "bad-head-size")) {
        AttentionProblem p = attention_problem(1, 1, 24, 8, 8, token_positions(0, 1), token_positions(0, 1));
        attention_partial_forward_cuda(&p, NULL, 24, NULL, 24, NULL, 24, NULL, 24, NULL, 0);
        printf("--die bad-head-size: the program was expected to end with a diagnostic\n");
        return 1;
    }
    if (argc == 3 && !strcmp(argv[1], "--die") && !strcmp(argv[2], "decode-docs")) {
        // A decoding step with a document mask is refused before any bound is read.
        static const int bounds[8] = {0};
        AttentionProblem p = attention_problem(1, 1, 64, 1, 8, token_positions(7, 1), token_positions(0, 1));
        p.decode = 1;
        p.docs.start = p.docs.end = bounds;
        p.docs.T = 8;
        attention_partial_forward_cuda(&p, NULL, 64, NULL, 64, NULL, 64, NULL, 64, NULL, 0);
        printf("--die decode-docs: the program was expected to end with a diagnostic\n");
        return 1;
    }
    if (argc == 3 && !strcmp(argv[1], "--die") && !strcmp(argv[2], "capture-grow")) {
        // A grouped-query call whose workspace would first grow inside a CUDA graph capture (the
        // graph would keep a buffer the next growth frees) is refused before any launch.
        cudaStream_t s;
        CUDA_CHECK(cudaStreamCreate(&s));
        AttentionProblem p = attention_problem(1, 2, 16, 8, 8, token_positions(0, 1), token_positions(0, 1));
        p.NKV = 1;
        float *o, *lse;
        floatX* x;
        CUDA_CHECK(cudaMalloc(&x, sizeof(floatX) * 8 * 32));
        CUDA_CHECK(cudaMalloc(&o, sizeof(float) * 8 * 32));
        CUDA_CHECK(cudaMalloc(&lse, sizeof(float) * 16));
        CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        attention_partial_forward_cuda(&p, x, 32, x, 32, x, 32, o, 32, lse, s);
        printf("--die capture-grow: the program was expected to end with a diagnostic\n");
        return 1;
    }
    // --quick: a subset that still reaches every kernel, head sizes 64, 80 and 128, a mesh and a
    // ring (for compute-sanitizer, which slows every launch by orders of magnitude).
    const bool quick = argc == 2 && !strcmp(argv[1], "--quick");
    // --long-heads: only shapes long enough for the forward's unmasked key-tile loop at HS 80, 96
    // and 128 (several seconds each; make test-sweep).
    const bool long_heads = argc == 2 && !strcmp(argv[1], "--long-heads");
    if (argc > 1 && !quick && !long_heads) {
        printf("usage: %s [--quick | --long-heads | --die bad-head-size | --die decode-docs | --die capture-grow]\n",
               argv[0]);
        return 2;
    }
    printf("precision: %s inputs, fp32 o/lse/d/dq/dk/dv; %s bounds o %.0e lse %.0e d %.0e grads %.0e merge %.0e\n",
           FLOATX_NAME, bound_column(), bound_limit(&B_O), bound_limit(&B_LSE), bound_limit(&B_D),
           bound_limit(&B_GRAD), bound_limit(&B_MERGE));
    printf("info dynamic shared memory per block (bytes), forward / backward:");
    for (int hs = 16; hs <= 128; hs += 16) {
        if (hs == 112) continue;
        printf(" HS%d %zu/%zu", hs, attention_cuda_forward_smem(hs), attention_cuda_backward_smem(hs));
    }
    printf("\n");
    check(attention_cuda_forward_smem(24) == 0 && attention_cuda_forward_smem(128) <= 227 * 1024 &&
              attention_cuda_backward_smem(128) <= 227 * 1024,
          "every supported head size fits in 227 KiB of shared memory; HS 24 is unsupported");
    static char labels[64][48];
    int nl = 0;
    if (long_heads) {
        run_scenario(single("single T200 HS96", 1, 2, 96, 200, 0, false, 1.0f));
        run_scenario(single("single T260 HS80 q*5", 1, 2, 80, 260, 0, false, 5.0f));
        run_scenario(single("single T300 HS128", 1, 2, 128, 300, 0, false, 1.0f));
        run_scenario(single("single T259 HS128 ld+3", 1, 1, 128, 259, 3, false, 1.0f));
        run_scenario(single("single T384 HS128 q*5", 1, 2, 128, 384, 0, false, 5.0f));   // 6 x 64 queries
        // A sliding window wide enough for unmasked key tiles between the band's two masked edges.
        run_scenario(windowed(single("single T384 HS96 w200", 1, 2, 96, 384, 0, false, 1.0f), 200));
        run_scenario(windowed(single("single T390 HS80 w260 q*5", 1, 2, 80, 390, 0, false, 5.0f), 260));
        // Documents long enough for unmasked key tiles between a query tile's masked edges.
        run_scenario(with_docs(single("single T384 HS96 B2 docs long", 2, 2, 96, 384, 0, false, 1.0f), DOCS_LONG));
        run_scenario(with_docs(single("single T390 HS128 B2 docs long q*5", 2, 1, 128, 390, 0, false, 5.0f), DOCS_LONG));
        return test_finish("test_attention_cuda --long-heads (" FLOATX_NAME ")");
    }

    // Single device: a ragged last tile (131 = 64 + 64 + 3) read from a fused QKV buffer; 160.
    run_scenario(single("single T131 HS64 fused qkv", 2, 2, 64, 131, 0, true, 1.0f));
    if (!quick) run_scenario(single("single T131 HS64 fused q*5", 2, 2, 64, 131, 0, true, 5.0f));
    if (!quick) run_scenario(single("single T160 HS32 q*5", 1, 4, 32, 160, 0, false, 5.0f));
    // Head sizes 80 (gpt3-2.7b: five k-steps of 16), 128 and 48; a misaligned row stride.
    run_scenario(single("single T70 HS80", 1, 2, 80, 70, 0, false, 1.0f));
    // Many heads: 792 blocks of three key tiles each, 264 semaphores.
    if (!quick) run_scenario(single("single T130 HS16 B4 NH66", 4, 66, 16, 130, 0, false, 1.0f));
    run_scenario(single("single T40 HS128 ld+8 q*5", 1, 1, 128, 40, 8, false, 5.0f));
    // Three key tiles of 128 (the Hopper forward's: its two stages refilled) and query tiles that
    // see one and two of them whole.
    if (!quick) run_scenario(single("single T300 HS128 B2", 2, 1, 128, 300, 0, false, 1.0f));
    if (!quick) run_scenario(single("single T77 HS48 ld+3", 2, 1, 48, 77, 3, false, 1.0f));
    // Query counts in whole 64-query tiles (the Hopper backward's): 3 tiles against a full and a
    // ragged 64-key tile, three sequences; 4 tiles against 2 key tiles at HS 128.
    run_scenario(single("single T192 HS64 B3", 3, 2, 64, 192, 0, false, 1.0f));
    // 3 tiles of 128 queries (the Hopper backward's q128 form) against 3 key tiles, two sequences
    // (in the quick checks too under ATTENTION_BWD_HOPPER=q128).
    if (!quick || hopper_q128_selected()) run_scenario(single("single T384 HS64 B2 q*5", 2, 2, 64, 384, 0, false, 5.0f));
    // HS 80 (gpt3-2.7b's) on the Hopper kernels, padded to 128: 3 query tiles of 64 in each of 2
    // sequences, both passes.
    run_scenario(single("single T192 HS80 B2 q*5", 2, 2, 80, 192, 0, false, 5.0f));
    if (!quick) run_scenario(single("single T256 HS128 B2 q*5", 2, 2, 128, 256, 0, false, 5.0f));
    // Decoding steps (AttentionProblem.decode): 2 or 4 blocks on the runtime's 132 SMs, so the bf16
    // forward splits the keys 11 and 16 ways (one per key tile, at most 16) and merges the partials.
    run_scenario(decode("decode T700 HS64 1 query", 1, 2, 64, 700, 1));
    if (!quick) run_scenario(decode("decode T1100 HS128 B2 3 queries", 2, 2, 128, 1100, 3));
    if (!getenv("ATTENTION_FWD_SPLITS")) {   // the splits those two used; none without decode
        AttentionProblem d1 = attention_problem(1, 2, 64, 1, 700, token_positions(699, 1), token_positions(0, 1));
        AttentionProblem d3 = attention_problem(2, 2, 128, 3, 1100, token_positions(1097, 1), token_positions(0, 1));
        const int plain = attention_cuda_forward_splits(&d1);
        d1.decode = d3.decode = 1;
        const int s1 = attention_cuda_forward_splits(&d1), s3 = attention_cuda_forward_splits(&d3);
#ifdef GPT_CUDA_FP32
        check(plain == 1 && s1 == 1 && s3 == 1, "fp32 build: no split-KV (splits %d, %d, %d)", plain, s1, s3);
#else
        check(plain == 1 && s1 == 11 && s3 == 16,
              "split-KV on decoding steps only: 1 query of 700 keys in 11 splits, 3 of 1100 in 16 (the most); "
              "none without decode (got %d, %d, %d)", s1, s3, plain);
#endif
    }

    // ATTENTION2D: rank (r, c) of a pq x pkv mesh holds queries r + pq*m and keys c + pkv*n; the
    // pkv partials of row r merge to the row's full attention. T = 96: 96 queries are a full and
    // a half tile. Row strides cycle through tight, aligned gap and misaligned.
    const int T = 96;
    for (int pq = 1; pq <= 4; pq++)
        for (int pkv = 1; pkv <= 4; pkv++)
            for (int r = 0; r < pq; r++) {
                if (quick && !(pq == 2 && pkv == 2)) continue;
                char* label = labels[nl++ % 64];
                const int ld_extra = (pq + pkv + r) % 3 == 0 ? 0 : (pq + pkv + r) % 3 == 1 ? 8 : 3;
                const float qamp = (pq + pkv + r) % 2 ? 5.0f : 1.0f;
                snprintf(label, 48, "mesh %dx%d row %d T%d ld+%d q*%g", pq, pkv, r, T, ld_extra, qamp);
                Scenario s = {label, 2, 2, 32, T, r, pq, T / pq, pkv, {0, 1, 2, 3}, pkv, T / pkv, ld_extra, false, qamp};
                run_scenario(s);
            }
    // A rectangular mesh with HS = 80 and a ragged tile count (T = 132, 2 x 3).
    for (int r = 0; r < (quick ? 0 : 2); r++) {
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "mesh 2x3 row %d T132 HS80", r);
        Scenario s = {label, 1, 2, 80, 132, r, 2, 66, 3, {0, 1, 2, 0}, 3, 44, 0, false, 2.0f};
        run_scenario(s);
    }
    // A 2x2 mesh at HS 64 with two tiles of strided queries and keys.
    for (int r = 0; r < (quick ? 0 : 2); r++) {
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "mesh 2x2 row %d T512 HS64", r);
        Scenario s = {label, 1, 2, 64, 512, r, 2, 256, 2, {0, 1, 0, 0}, 2, 256, 0, false, 1.0f};
        run_scenario(s);
    }
    // Ring: contiguous chunks; query chunk i against every key chunk (later chunks are fully
    // masked, earlier ones fully visible, the diagonal causal).
    for (int P = quick ? 3 : 2; P <= (quick ? 3 : 4); P++) {
        const int TR = 120, n = TR / P;
        for (int i = 0; i < P; i++) {
            char* label = labels[nl++ % 64];
            const float qamp = i % 2 ? 5.0f : 1.0f;
            snprintf(label, 48, "ring P%d chunk %d T%d HS16 q*%g", P, i, TR, qamp);
            Scenario s = {label, 2, 2, 16, TR, (long)i * n, 1, n, P, {0, n, 2L * n, 3L * n}, 1, n, 0, false, qamp};
            run_scenario(s);
        }
    }
    // Ring chunks of 160 tokens (3 key tiles: under ATTENTION_FWD_SPLITS the merged partials are
    // split, and the fused merge is compared within B_O instead of bit for bit).
    for (int i = 0; i < (quick ? 0 : 2); i++) {
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "ring P2 chunk %d T320 HS64 q*5", i);
        Scenario s = {label, 1, 2, 64, 320, (long)i * 160, 1, 160, 2, {0, 160, 0, 0}, 1, 160, 0, false, 5.0f};
        run_scenario(s);
    }

    // Sliding windows (AttentionProblem.window): key j visible to query i iff qpos(i) - W < kpos(j) <=
    // qpos(i). Single device: a band narrower than a 16-key block (5, ragged T, fused QKV), one that
    // crosses the tile edges (70: several key tiles add into a query tile's dQ, and query tiles are
    // skipped at both ends of a key tile's), one of two keys (2), one of at least T (causal),
    // and bands wide enough for unmasked key tiles between the two masked edges (200, 250).
    run_scenario(windowed(single("single T131 HS64 fused w5", 2, 2, 64, 131, 0, true, 1.0f), 5));
    run_scenario(windowed(single("single T320 HS64 B2 w70 q*5", 2, 2, 64, 320, 0, false, 5.0f), 70));
    if (!quick) {
        run_scenario(windowed(single("single T131 HS80 w200 (causal)", 1, 2, 80, 131, 0, false, 1.0f), 200));
        run_scenario(windowed(single("single T300 HS128 B2 w200", 2, 1, 128, 300, 0, false, 1.0f), 200));
        run_scenario(windowed(single("single T448 HS64 w250 q*5", 1, 2, 64, 448, 0, false, 5.0f), 250));
        run_scenario(windowed(single("single T192 HS80 B2 w33 q*5", 2, 2, 80, 192, 0, false, 5.0f), 33));
        run_scenario(windowed(single("single T256 HS128 ld+8 w2", 1, 2, 128, 256, 8, false, 1.0f), 2));
        run_scenario(windowed(single("single T160 HS32 w37 q*5", 1, 4, 32, 160, 0, false, 5.0f), 37));
        run_scenario(windowed(single("single T130 HS16 B2 NH3 w5", 2, 3, 16, 130, 0, false, 1.0f), 5));
        run_scenario(windowed(single("single T77 HS48 ld+3 w20", 2, 1, 48, 77, 3, false, 1.0f), 20));
    }
    // Mesh positions (strided queries and keys with offsets): 2x2 at T 96 (w9: a few keys per
    // partial), 3x2 (w4: queries with no key in a partial) and the two-tile 2x2 at T 512, HS 64.
    for (int r = 0; r < 2; r++) {
        if (quick && r == 0) continue;
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "mesh 2x2 row %d T96 ld+3 w9", r);
        Scenario s = {label, 2, 2, 32, 96, r, 2, 48, 2, {0, 1, 0, 0}, 2, 48, 3, false, 5.0f};
        run_scenario(windowed(s, 9));
    }
    for (int r = 0; r < (quick ? 0 : 3); r++) {
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "mesh 3x2 row %d T96 HS64 w4", r);
        Scenario s = {label, 1, 2, 64, 96, r, 3, 32, 2, {0, 1, 0, 0}, 2, 48, 0, false, 1.0f};
        run_scenario(windowed(s, 4));
    }
    for (int r = 0; r < (quick ? 0 : 2); r++) {
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "mesh 2x2 row %d T512 HS64 w100", r);
        Scenario s = {label, 1, 2, 64, 512, r, 2, 256, 2, {0, 1, 0, 0}, 2, 256, 0, false, 1.0f};
        run_scenario(windowed(s, 100));
    }
    if (!quick) {   // HS 80 on a rectangular mesh; ring chunks (whole partials outside the band)
        Scenario m = {"mesh 2x3 row 1 T132 HS80 w25", 1, 2, 80, 132, 1, 2, 66, 3, {0, 1, 2, 0}, 3, 44, 0, false, 2.0f};
        run_scenario(windowed(m, 25));
        for (int i = 0; i < 3; i++) {
            char* label = labels[nl++ % 64];
            snprintf(label, 48, "ring P3 chunk %d T120 HS16 w50", i);
            Scenario s = {label, 2, 2, 16, 120, (long)i * 40, 1, 40, 3, {0, 40, 80, 0}, 1, 40, 0, false, 5.0f};
            run_scenario(windowed(s, 50));
        }
    }
    // Decoding steps under a window: split-KV cuts only the key tiles the band covers.
    run_scenario(windowed(decode("decode T700 HS64 1 query w100", 1, 2, 64, 700, 1), 100));
    if (!quick) run_scenario(windowed(decode("decode T1100 HS128 B2 3 queries w300", 2, 2, 128, 1100, 3), 300));
    if (!getenv("ATTENTION_FWD_SPLITS")) {
        AttentionProblem d1 = attention_problem(1, 2, 64, 1, 700, token_positions(699, 1), token_positions(0, 1));
        AttentionProblem d3 = attention_problem(2, 2, 128, 3, 1100, token_positions(1097, 1), token_positions(0, 1));
        d1.decode = d3.decode = 1;
        d1.window = 100, d3.window = 300;
        const int s1 = attention_cuda_forward_splits(&d1), s3 = attention_cuda_forward_splits(&d3);
#ifdef GPT_CUDA_FP32
        check(s1 == 1 && s3 == 1, "fp32 build: no split-KV under a window (splits %d, %d)", s1, s3);
#else
        check(s1 == 2 && s3 == 6,
              "split-KV under a window: the key tiles of 64 the band covers, keys 600..699 in 2 splits, "
              "798..1099 in 6 (got %d, %d)", s1, s3);
#endif
    }

    // Document masks (AttentionProblem.docs): key j visible to query i of sequence b iff also
    // kpos(j) >= docs.start[b, qpos(i)]. Single device: boundaries at and beside the tile edges and
    // one-token documents on a ragged T from fused QKV; long documents (several key tiles add into
    // a query tile's dQ, and key tiles stop short of the last query tiles); three sequences of
    // other boundaries on the Hopper kernels' shapes (HS 64, 80, 128; Tq a multiple of 64), which
    // must not take them; documents of 1 to 3 tokens; a misaligned row stride; HS 16 and 48; documents
    // under windows.
    run_scenario(with_docs(single("single T131 HS64 fused docs", 2, 2, 64, 131, 0, true, 1.0f), DOCS_EDGES));
    run_scenario(with_docs(single("single T320 HS64 B2 docs long q*5", 2, 2, 64, 320, 0, false, 5.0f), DOCS_LONG));
    run_scenario(with_docs(single("single T192 HS80 B3 docs q*5", 3, 2, 80, 192, 0, false, 5.0f), DOCS_EDGES));
    if (!quick) {
        run_scenario(with_docs(single("single T256 HS128 B2 docs", 2, 1, 128, 256, 0, false, 1.0f), DOCS_EDGES));
        run_scenario(with_docs(single("single T384 HS64 B2 docs long", 2, 2, 64, 384, 0, false, 1.0f), DOCS_LONG));
        run_scenario(with_docs(single("single T160 HS32 docs short", 1, 4, 32, 160, 0, false, 5.0f), DOCS_SHORT));
        // (the same on the Hopper kernels: documents of 1 to 3 tokens in 128-row tiles, every key
        // tile but the diagonal's masked or empty for most rows)
        run_scenario(with_docs(single("single T256 HS128 B2 docs short q*5", 2, 1, 128, 256, 0, false, 5.0f), DOCS_SHORT));
        run_scenario(with_docs(single("single T77 HS48 ld+3 docs", 2, 1, 48, 77, 3, false, 1.0f), DOCS_EDGES));
        run_scenario(with_docs(single("single T130 HS16 B4 NH3 docs", 4, 3, 16, 130, 0, false, 1.0f), DOCS_EDGES));
        run_scenario(with_docs(single("single T131 HS96 ld+8 docs", 1, 2, 96, 131, 8, false, 5.0f), DOCS_EDGES));
        run_scenario(windowed(with_docs(single("single T300 HS128 B2 docs w40", 2, 1, 128, 300, 0, false, 1.0f),
                                        DOCS_EDGES), 40));
        run_scenario(windowed(with_docs(single("single T448 HS64 B2 docs long w200 q*5", 2, 2, 64, 448, 0, false, 5.0f),
                                        DOCS_LONG), 200));
    }
    run_scenario(windowed(with_docs(single("single T192 HS64 B2 docs w5", 2, 2, 64, 192, 0, false, 1.0f), DOCS_EDGES), 5));
    // Mesh positions (strided queries and keys) and Ring chunks: the key blocks of earlier
    // documents give empty partials (lse -inf) that merge as nothing.
    for (int r = 0; r < 2; r++) {
        if (quick && r == 0) continue;
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "mesh 2x2 row %d T96 ld+3 docs", r);
        Scenario s = {label, 2, 2, 32, 96, r, 2, 48, 2, {0, 1, 0, 0}, 2, 48, 3, false, 5.0f};
        run_scenario(with_docs(s, DOCS_EDGES));
    }
    for (int r = 0; r < (quick ? 0 : 3); r++) {
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "mesh 3x2 row %d T96 HS64 docs w9", r);
        Scenario s = {label, 3, 2, 64, 96, r, 3, 32, 2, {0, 1, 0, 0}, 2, 48, 0, false, 1.0f};
        run_scenario(windowed(with_docs(s, DOCS_EDGES), 9));
    }
    for (int r = 0; r < (quick ? 0 : 2); r++) {
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "mesh 2x2 row %d T512 HS64 B2 docs long", r);
        Scenario s = {label, 2, 2, 64, 512, r, 2, 256, 2, {0, 1, 0, 0}, 2, 256, 0, false, 1.0f};
        run_scenario(with_docs(s, DOCS_LONG));
    }
    if (!quick) {
        Scenario m = {"mesh 2x3 row 1 T132 HS80 docs", 2, 2, 80, 132, 1, 2, 66, 3, {0, 1, 2, 0}, 3, 44, 0, false, 2.0f};
        run_scenario(with_docs(m, DOCS_EDGES));
    }
    for (int i = 0; i < 3; i++) {
        if (quick && i != 2) continue;
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "ring P3 chunk %d T120 HS16 B4 docs", i);
        Scenario s = {label, 4, 2, 16, 120, (long)i * 40, 1, 40, 3, {0, 40, 80, 0}, 1, 40, 0, false, 5.0f};
        run_scenario(with_docs(s, DOCS_EDGES));
    }
    for (int i = 0; i < (quick ? 0 : 2); i++) {
        char* label = labels[nl++ % 64];
        snprintf(label, 48, "ring P2 chunk %d T320 HS64 B2 docs long w100", i);
        Scenario s = {label, 2, 2, 64, 320, (long)i * 160, 1, 160, 2, {0, 160, 0, 0}, 1, 160, 0, false, 5.0f};
        run_scenario(windowed(with_docs(s, DOCS_LONG), 100));
    }

    printf("worst rel err: o %.2e lse %.2e d %.2e dq %.2e dk %.2e dv %.2e merged o %.2e merged lse %.2e "
           "merge kernel %.2e floatX o %.2e floatX grads %.2e\n",
           worst.o, worst.lse, worst.d, worst.dq, worst.dk, worst.dv, worst.merged_o, worst.merged_lse,
           worst.merge_kernel, worst.ox, worst.gx);
    // Grouped-query attention: a group of 2 (HS 64: the Hopper kernels where they serve), multi-query
    // attention at HS 32 under a window, a mesh row's strided queries at HS 80.
    run_gqa("gqa 4/2 single T131 HS64", 2, 4, 2, 64, 131, 0, 1, 131, 0);
    if (!quick) run_gqa("gqa 4/1 single T100 HS32 w17", 1, 4, 1, 32, 100, 0, 1, 100, 17);
    if (!quick) run_gqa("gqa 6/3 row 1 of 3 T96 HS80", 2, 6, 3, 80, 96, 1, 3, 32, 0);
    printf("info gradient bits %016llx\n", grad_bits);
    const char* fwd_kernel = getenv("ATTENTION_FWD_KERNEL");
    check(fwd_unexpected == 0 && (fwd_sm90 > 0) == hopper_selected("ATTENTION_FWD_KERNEL"),
          "forward kernel (ATTENTION_FWD_KERNEL=%s): the Hopper kernel ran %d of %d forward calls, exactly where "
          "expected (%d elsewhere)", fwd_kernel ? fwd_kernel : "", fwd_sm90, fwd_calls, fwd_unexpected);
    const char* bwd_kernel = getenv("ATTENTION_BWD_KERNEL");
    check(bwd_unexpected == 0 && (bwd_sm90 > 0) == hopper_selected("ATTENTION_BWD_KERNEL") &&
              (bwd_q128 > 0) == (hopper_selected("ATTENTION_BWD_KERNEL") && hopper_q128_selected()),
          "backward kernel (ATTENTION_BWD_KERNEL=%s): the Hopper kernel ran %d of %d backward calls (%d with "
          "128-query tiles), exactly where expected (%d elsewhere)",
          bwd_kernel ? bwd_kernel : "", bwd_sm90, bwd_calls, bwd_q128, bwd_unexpected);
    // (exactly where expected: the two checks above; here, that the masked scenarios reached them)
    const bool fwd90 = hopper_selected("ATTENTION_FWD_KERNEL"), bwd90 = hopper_selected("ATTENTION_BWD_KERNEL");
    check(win_fwd_calls > 0 && win_bwd_calls > 0 && (win_fwd_sm90 > 0) == fwd90 && (win_bwd_sm90 > 0) == bwd90,
          "sliding window: the Hopper kernels ran %d of %d windowed forward calls and %d of %d backward calls "
          "(expected some of each where they are selected, else none)",
          win_fwd_sm90, win_fwd_calls, win_bwd_sm90, win_bwd_calls);
    check(doc_fwd_calls > 0 && doc_bwd_calls > 0 && (doc_fwd_sm90 > 0) == fwd90 && (doc_bwd_sm90 > 0) == bwd90,
          "document masks: the Hopper kernels ran %d of %d document-masked forward calls and %d of %d backward "
          "calls (expected some of each where they are selected, else none)",
          doc_fwd_sm90, doc_fwd_calls, doc_bwd_sm90, doc_bwd_calls);
    const Bound bounds[] = {B_O, B_LSE, B_D, B_GRAD, B_MERGE};
    bounds_report("attention-" FLOATX_NAME, bounds, 5);
    return test_finish("test_attention_cuda (" FLOATX_NAME ")");
}
