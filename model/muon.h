// Muon (Jordan et al. 2024; Moonlight, Liu et al. 2025; Megatron-LM's --optimizer muon): the
// hidden layers' weight matrices are updated by their momentum orthogonalized with a few
// Newton-Schulz iterations, every other tensor by AdamW (the embeddings, the classifier, the
// norms, the biases), with one learning rate and weight decay.
//
// For a matrix W (rows x cols; each layer's qkv projection as its Q, K and V rows unless
// split_qkv is 0: muon_matrix_shape) with gradient G (already multiplied by the clip factor):
//   M  = beta M + (1 - beta) G                       (momentum, an EMA as Megatron-LM's)
//   U  = nesterov ? (1 - beta) G + beta M : M
//   X  = U / (|U|_F + 1e-7), transposed when rows > cols (X is r x c, r = min, c = max)
//   5x X = a X + (b A + c A A) X with A = X X^T, (a, b, c) = (3.4445, -4.7750, 2.0315)
//   W -= lr wd W + lr s X (X transposed back), s = muon_scale_factor(rows, cols)
// The algorithm is written once (muon_step below); each backend supplies the element-wise steps
// and a row-major GEMM on its own buffers (MuonOps).
#pragma once
#include <stddef.h>
#include <string.h>

#include "model/config.h"

#ifdef __cplusplus
extern "C" {
#endif

// The update's scale s for a rows x cols matrix (Megatron-LM's --muon-scale-mode, times its
// --muon-extra-scale-factor): spectral sqrt(max(rows, cols)) (Moonlight's with factor 0.2: the
// update's RMS then matches AdamW's), shape_scaling sqrt(max(1, rows / cols)) (Keller Jordan's),
// unit_rms_norm sqrt(rows / cols) (Bernstein's).
typedef enum { MUON_SCALE_SPECTRAL = 0, MUON_SCALE_SHAPE, MUON_SCALE_UNIT_RMS } MuonScaleMode;

// The Newton-Schulz GEMMs' precision on fp32 buffers (Megatron-LM's --muon-fp32-matmul-prec,
// PyTorch's float32 matmul precision): highest fp32 products; high the inputs rounded to TF32 (10
// mantissa bits), medium to bf16 (7: Megatron-LM's default and the original Muon's), the products
// summed in fp32 either way. On a GPU cuBLAS's fp32 cores, TF32 or bf16 tensor cores (an H100's
// dense peaks: 67, 495 and 989 TFLOP/s); on the CPU the inputs rounded to nearest even before
// OpenBLAS's fp32 GEMM: a twin of those numerics, not faster.
typedef enum { MUON_PREC_HIGHEST = 0, MUON_PREC_HIGH, MUON_PREC_MEDIUM } MuonMatmulPrec;

// Newton-Schulz split over ranks that hold the same parameters and gradients (Megatron-LM's
// --optimizer dist_muon, its layer-wise distributed optimizer): the matrices go in rounds of
// `ranks`, rank i orthogonalizing the round's i-th, and each result reaches every rank by a
// broadcast from its owner; every rank then applies every update as before. A matrix's momentum
// lives on its owner alone (muon_m_elements; Megatron-LM's dist_muon shards its state too), and
// the owner advances it exactly as the replicated step would, so the results and the checkpoints
// (muon_m_to_host gathers every momentum) are those of the replicated step bit for bit. Every
// sharing rank runs the same steps (a skipped step too: the broadcasts pair up). ranks <= 1:
// every rank orthogonalizes every matrix itself.
typedef void (*MuonBroadcast)(void* ctx, void* buf, size_t bytes, int root);
typedef struct {
    int rank, ranks;           // this rank among those sharing the work
    MuonBroadcast broadcast;   // bytes of the backend's memory from rank `root` to all
    void* ctx;
} MuonShare;

typedef struct {
    double momentum;      // beta
    int nesterov;         // 1: Nesterov's form of the momentum
    int ns_steps;         // Newton-Schulz iterations
    MuonScaleMode scale_mode;
    double extra_scale;   // multiplies the scale mode's factor
    int split_qkv;        // 1: Q, K and V orthogonalized apart (muon_matrix_shape)
    MuonMatmulPrec matmul_prec;
    MuonShare share;      // zero: no sharing
} MuonConfig;

// "spectral", "shape_scaling", "unit_rms_norm" -> the mode; -1 for another name.
int muon_scale_mode(const char* name);
// "highest", "high", "medium" -> the precision; -1 for another name. Inline: the cost model's.
static inline int muon_matmul_prec(const char* name) {
    if (!strcmp(name, "highest")) return MUON_PREC_HIGHEST;
    if (!strcmp(name, "high")) return MUON_PREC_HIGH;
    if (!strcmp(name, "medium")) return MUON_PREC_MEDIUM;
    return -1;
}
// The mantissa bits a precision keeps of a GEMM's fp32 inputs (23: all).
static inline int muon_prec_mantissa_bits(MuonMatmulPrec p) {
    return p == MUON_PREC_MEDIUM ? 7 : p == MUON_PREC_HIGH ? 10 : 23;
}
double muon_scale_factor(const MuonConfig* c, int rows, int cols);

// The quintic Newton-Schulz coefficients (Keller Jordan's; Megatron-LM's "quintic").
#define MUON_NS_A 3.4445
#define MUON_NS_B (-4.7750)
#define MUON_NS_C 2.0315
#define MUON_NORM_EPS 1e-7

// One layer's matrix (rows x cols) of parameter tensor k where Muon updates it, returning 1: the
// hidden layers' qkvw, attprojw, fcw and fcprojw (each layer's slice, whole: muon_matrix_shape
// splits the qkv projection's); 0 (and 0 x 0) for the tensors
// AdamW keeps: the embeddings, the untied classifier, the norms, the biases. Inline: the memory
// budget and the cost model use it without the model.
static inline int muon_tensor_shape(const GPTConfig* cfg, int k, int* rows, int* cols) {
    const int C = cfg->C;
    *rows = *cols = 0;
    if (k == 4) *rows = gpt_qkv_width(cfg), *cols = C;        // qkvw (W, C)
    if (k == 6) *rows = C, *cols = C;                         // attprojw (C, C)
    if (k == 10) *rows = gpt_fc_width(cfg), *cols = C;        // fcw (FC, C)
    if (k == 12) *rows = C, *cols = gpt_ffn_hidden(cfg);      // fcprojw (C, F)
    return *rows > 0;
}
// The parameter tensors muon_tensor_shape can name (the four above).
#define MUON_TENSOR_IDS {4, 6, 10, 12}

// The largest matrix's elements and the largest r x r Gram matrix's (r = min(rows, cols)).
static inline void muon_scratch_sizes(const GPTConfig* cfg, size_t* matrix, size_t* gram) {
    const int ids[] = MUON_TENSOR_IDS;
    *matrix = *gram = 0;
    for (int i = 0; i < 4; i++) {
        int rows, cols;
        muon_tensor_shape(cfg, ids[i], &rows, &cols);
        const size_t r = (size_t)(rows < cols ? rows : cols), e = (size_t)rows * cols;
        if (e > *matrix) *matrix = e;
        if (r * r > *gram) *gram = r * r;
    }
}
// The matrices Muon orthogonalizes, in the step's order: tensor by tensor (MUON_TENSOR_IDS), each
// tensor's L layers; with split_qkv (Megatron-LM's default, --muon-split-qkv) each layer's qkv
// matrix as three, its Q, K and V rows (C, then the key/value heads' twice), each orthogonalized
// and scaled by its own shape. (Megatron-LM's interleaved qkv rows give the same result: the
// iteration commutes with a permutation of the rows.)
static inline int muon_matrix_count(const GPTConfig* cfg, int split_qkv) {
    return (split_qkv ? 6 : 4) * cfg->L;
}
typedef struct {
    int k, l;         // parameter tensor and layer
    int row0;         // first row within the layer's matrix
    int rows, cols;
} MuonMatrixShape;
static inline MuonMatrixShape muon_matrix_shape(const GPTConfig* cfg, int split_qkv, int j) {
    const int ids[] = MUON_TENSOR_IDS, parts = split_qkv ? 3 : 1, L = cfg->L;
    MuonMatrixShape s = {ids[0], j / parts, 0, 0, 0};
    if (j < parts * L) {   // the qkv projection's
        muon_tensor_shape(cfg, s.k, &s.rows, &s.cols);
        if (parts == 3) {
            const int part = j % 3, kv = (s.rows - cfg->C) / 2;
            s.row0 = part == 0 ? 0 : part == 1 ? cfg->C : cfg->C + kv;
            s.rows = part == 0 ? cfg->C : kv;
        }
        return s;
    }
    j -= parts * L;
    s.k = ids[1 + j / L], s.l = j % L;
    muon_tensor_shape(cfg, s.k, &s.rows, &s.cols);
    return s;
}

// Elements of the matrices Muon updates (the four tensors' L layers each).
static inline size_t muon_matrix_elements(const GPTConfig* cfg) {
    const int ids[] = MUON_TENSOR_IDS;
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        int rows, cols;
        muon_tensor_shape(cfg, ids[i], &rows, &cols);
        n += (size_t)rows * cols * cfg->L;
    }
    return n;
}
// Under Muon a second moment exists only for the tensors AdamW keeps (the matrices have their
// momentum alone): one compact buffer of muon_v_elements, the tensors in parameter order.
// span(ctx, begin, n, slot) for each: its parameters [begin, begin + n) and their first slot in
// that buffer.
static inline size_t muon_v_elements(const GPTConfig* cfg, size_t num_params) {
    return num_params - muon_matrix_elements(cfg);
}
// The AdamW tensors' first moments take the same slots of the compact first moment (below).
typedef void (*MuonVSpan)(void* ctx, size_t begin, size_t n, size_t slot);
void muon_v_spans(const GPTConfig* cfg, MuonVSpan span, void* ctx);
// The compact second moment to the checkpoint's full one (count parameters, 0 for the matrices),
// and back.
void muon_v_expand(const GPTConfig* cfg, const float* compact, float* full, size_t count);
void muon_v_compact(const GPTConfig* cfg, const float* full, float* compact);

// The rank that orthogonalizes matrix j (muon_matrix_shape's order) and keeps its momentum: the
// round's i-th matrix is rank i's (muon_step).
static inline int muon_matrix_owner(const MuonShare* s, int j) {
    return s->ranks > 1 ? j % s->ranks : 0;
}
// Elements of the matrices rank `rank` of `ranks` owns (all of them for ranks <= 1).
static inline size_t muon_owned_elements(const GPTConfig* cfg, int split_qkv, int rank, int ranks) {
    const int count = muon_matrix_count(cfg, split_qkv), step = ranks > 1 ? ranks : 1;
    size_t n = 0;
    for (int j = ranks > 1 ? rank : 0; j < count; j += step) {
        const MuonMatrixShape s = muon_matrix_shape(cfg, split_qkv, j);
        n += (size_t)s.rows * s.cols;
    }
    return n;
}
// The compact first moment of a rank: the AdamW tensors' (muon_v_spans' slots), then the momenta
// of the matrices the rank owns, in muon_matrix_shape's order; every matrix's without sharing.
static inline size_t muon_m_elements(const GPTConfig* cfg, const MuonConfig* c,
                                     size_t num_params) {
    return muon_v_elements(cfg, num_params) +
           muon_owned_elements(cfg, c->split_qkv, c->share.rank, c->share.ranks);
}

// Where element i (row-major) of a rows x cols matrix lies in its iterate X (r x c, row-major:
// the matrix itself, or its transpose when rows > cols).
#if defined(__CUDACC__)
__host__ __device__
#endif
static inline size_t muon_x_index(size_t i, int rows, int cols) {
    return rows <= cols ? i : (i % (size_t)cols) * (size_t)rows + i / (size_t)cols;
}
// Scratch one Newton-Schulz needs, in elements: two buffers of the largest matrix (U, then the
// iterate's two copies) and two of the largest Gram matrix.
static inline size_t muon_scratch_elements(const GPTConfig* cfg) {
    size_t matrix, gram;
    muon_scratch_sizes(cfg, &matrix, &gram);
    return 2 * matrix + 2 * gram;
}

// The scratch buffers, in the backend's memory and element type: u and x hold a matrix each
// (muon_scratch_elements' two largest-matrix buffers), a and b a Gram matrix each.
typedef struct {
    void *u, *x, *a, *b;
    size_t elem_size;   // bytes per element
} MuonScratch;
// The four buffers in one block of muon_scratch_elements elements of elem_size bytes at base.
MuonScratch muon_scratch_split(const GPTConfig* cfg, void* base, size_t elem_size);

// A backend's steps of muon_step. Matrices are row-major; the backend's grad_scale (the step's
// clip factor, or OPTIMIZER_SKIP) is read by momentum and update themselves, so that a skipped
// step changes neither the momentum nor the parameters.
typedef struct {
    // The momentum of the matrix at parameters [offset, offset + n), at slot m_slot of the compact
    // first moment, from its gradients; U into u.
    void (*momentum)(void* ctx, size_t offset, size_t n, size_t m_slot, const MuonConfig* c,
                     void* u);
    // scratch->x = scratch->u (rows x cols), transposed when rows > cols, over (|U|_F + 1e-7).
    void (*normalize)(void* ctx, int rows, int cols);
    // C = alpha op(A) op(B) + beta C; op(A) M x K, op(B) K x N, C M x N; leading dimensions are
    // those of the stored (untransposed) row-major matrices.
    void (*gemm)(void* ctx, int trans_a, int trans_b, int M, int N, int K, double alpha,
                 const void* A, int lda, const void* B, int ldb, double beta, void* C, int ldc);
    void (*copy)(void* ctx, void* dst, const void* src, size_t n);
    // W (rows x cols at offset) -= decay W + step X, X (r x c) transposed back when rows > cols.
    void (*update)(void* ctx, size_t offset, int rows, int cols, const void* x, double step,
                   double decay);
    // The backend's AdamW step on parameter elements [begin, end) (a tensor Muon leaves), its
    // moments from slot `slot` of the compact buffers (muon_v_spans).
    void (*adamw)(void* ctx, size_t begin, size_t end, size_t slot);
} MuonOps;

// One optimizer step under Muon: AdamW for the tensors Muon leaves, then Muon for every matrix in
// muon_matrix_shape's order, shared as c->share says.
void muon_step(const MuonOps* ops, void* ctx, const MuonScratch* scratch, const GPTConfig* cfg,
               const MuonConfig* c, double lr, double weight_decay);

// A backend's copies between its memory (its element type) and host floats, n elements.
typedef struct {
    void (*to_host)(void* ctx, float* dst, const void* src, size_t n);
    void (*from_host)(void* ctx, void* dst, const float* src, size_t n);
} MuonHostOps;
// The compact first moment m (muon_m_elements of the scratch's element type, backend memory) to
// the checkpoint's full layout (count floats, every parameter's place), and back. To the host, a
// shared step's matrices travel from their owners by c->share's broadcast, received in
// scratch->u: every sharing rank calls it. From the host each rank takes its own.
void muon_m_to_host(const MuonHostOps* ops, void* ctx, const MuonScratch* scratch,
                    const GPTConfig* cfg, const MuonConfig* c, const void* m, float* full,
                    size_t count);
void muon_m_from_host(const MuonHostOps* ops, void* ctx, const MuonScratch* scratch,
                      const GPTConfig* cfg, const MuonConfig* c, void* m, const float* full);

#ifdef __cplusplus
}
#endif
