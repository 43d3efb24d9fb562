// Muon (Jordan et al. 2024; Moonlight, Liu et al. 2025; Megatron-LM's --optimizer muon): the
// hidden layers' weight matrices are updated by their momentum orthogonalized with a few
// Newton-Schulz iterations, every other tensor by AdamW (the embeddings, the classifier, the
// norms, the biases), with one learning rate and weight decay.
//
// For a matrix W (rows x cols) with gradient G (already multiplied by the clip factor):
//   M  = beta M + (1 - beta) G                       (momentum, an EMA as Megatron-LM's)
//   U  = nesterov ? (1 - beta) G + beta M : M
//   X  = U / (|U|_F + 1e-7), transposed when rows > cols (X is r x c, r = min, c = max)
//   5x X = a X + (b A + c A A) X with A = X X^T, (a, b, c) = (3.4445, -4.7750, 2.0315)
//   W -= lr wd W + lr s X (X transposed back), s = muon_scale_factor(rows, cols)
// The algorithm is written once (muon_step below); each backend supplies the element-wise steps
// and a row-major GEMM on its own buffers (MuonOps).
#pragma once
#include <stddef.h>

#include "model/config.h"

#ifdef __cplusplus
extern "C" {
#endif

// The update's scale s for a rows x cols matrix (Megatron-LM's --muon-scale-mode, times its
// --muon-extra-scale-factor): spectral sqrt(max(rows, cols)) (Moonlight's with factor 0.2: the
// update's RMS then matches AdamW's), shape_scaling sqrt(max(1, rows / cols)) (Keller Jordan's),
// unit_rms_norm sqrt(rows / cols) (Bernstein's).
typedef enum { MUON_SCALE_SPECTRAL = 0, MUON_SCALE_SHAPE, MUON_SCALE_UNIT_RMS } MuonScaleMode;

typedef struct {
    double momentum;      // beta
    int nesterov;         // 1: Nesterov's form of the momentum
    int ns_steps;         // Newton-Schulz iterations
    MuonScaleMode scale_mode;
    double extra_scale;   // multiplies the scale mode's factor
} MuonConfig;

// "spectral", "shape_scaling", "unit_rms_norm" -> the mode; -1 for another name.
int muon_scale_mode(const char* name);
double muon_scale_factor(const MuonConfig* c, int rows, int cols);

// The quintic Newton-Schulz coefficients (Keller Jordan's; Megatron-LM's "quintic").
#define MUON_NS_A 3.4445
#define MUON_NS_B (-4.7750)
#define MUON_NS_C 2.0315
#define MUON_NORM_EPS 1e-7

// 1 for the parameter tensors Muon updates: the hidden layers' matrices qkvw, attprojw, fcw and
// fcprojw (each layer's slice one matrix; the qkv projection's Q, K and V rows together, as
// Megatron-LM's default). The embeddings and the untied classifier stay with AdamW.
int gpt_param_muon(int tensor);

// One matrix of the flat parameter vector: elements [offset, offset + rows x cols), row-major.
typedef struct {
    size_t offset;
    int rows, cols;
} MuonMatrix;
// The model's Muon matrices in parameter order into out (NULL: only counted); returns how many
// (4 per layer).
int muon_matrices(const GPTConfig* cfg, MuonMatrix* out);
// The largest matrix's elements and the largest r x r Gram matrix's (r = min(rows, cols)) of
// one layer's four (inline: the memory budget and the cost model use it without the model).
static inline void muon_scratch_sizes(const GPTConfig* cfg, size_t* matrix, size_t* gram) {
    const size_t C = (size_t)cfg->C;
    const size_t other[4] = {(size_t)gpt_qkv_width(cfg), C, (size_t)gpt_fc_width(cfg),
                             (size_t)gpt_ffn_hidden(cfg)};   // each matrix's dimension besides C
    *matrix = *gram = 0;
    for (int i = 0; i < 4; i++) {
        const size_t r = other[i] < C ? other[i] : C;
        if (other[i] * C > *matrix) *matrix = other[i] * C;
        if (r * r > *gram) *gram = r * r;
    }
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
} MuonScratch;
// The four buffers in one block of muon_scratch_elements elements of elem_size bytes at base.
MuonScratch muon_scratch_split(const GPTConfig* cfg, void* base, size_t elem_size);

// A backend's steps of muon_step. Matrices are row-major; the backend's grad_scale (the step's
// clip factor, or OPTIMIZER_SKIP) is read by momentum and update themselves, so that a skipped
// step changes neither the momentum nor the parameters.
typedef struct {
    // Momentum of elements [offset, offset + n) from the gradients; U into scratch->u.
    void (*momentum)(void* ctx, size_t offset, size_t n, const MuonConfig* c);
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
} MuonOps;

// One Muon step of every matrix of the model (the AdamW part is the backend's).
void muon_step(const MuonOps* ops, void* ctx, const MuonScratch* scratch, const GPTConfig* cfg,
               const MuonConfig* c, double lr, double weight_decay);

#ifdef __cplusplus
}
#endif
