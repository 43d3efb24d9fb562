// Muon's step, written once for every backend (model/muon.h).
#include "model/muon.h"

#include <math.h>
#include <string.h>

#include "model/gpt.h"

int muon_scale_mode(const char* name) {
    if (!strcmp(name, "spectral")) return MUON_SCALE_SPECTRAL;
    if (!strcmp(name, "shape_scaling")) return MUON_SCALE_SHAPE;
    if (!strcmp(name, "unit_rms_norm")) return MUON_SCALE_UNIT_RMS;
    return -1;
}

double muon_scale_factor(const MuonConfig* c, int rows, int cols) {
    const double r = rows, k = cols;
    double s = 1;
    switch (c->scale_mode) {
    case MUON_SCALE_SPECTRAL: s = sqrt(r > k ? r : k); break;
    case MUON_SCALE_SHAPE: s = sqrt(r > k ? r / k : 1); break;
    case MUON_SCALE_UNIT_RMS: s = sqrt(r / k); break;
    }
    return c->extra_scale * s;
}

MuonScratch muon_scratch_split(const GPTConfig* cfg, void* base, size_t elem_size) {
    size_t matrix, gram;
    muon_scratch_sizes(cfg, &matrix, &gram);
    char* p = base;
    return (MuonScratch){p, p + matrix * elem_size, p + 2 * matrix * elem_size,
                         p + (2 * matrix + gram) * elem_size};
}

// X (r x c, r <= c) through `steps` quintic iterations; returns the buffer holding the result
// (x or xn: they swap each iteration).
static void* newton_schulz(const MuonOps* ops, void* ctx, void* x, void* xn, void* a, void* b,
                           int r, int c, int steps) {
    for (int s = 0; s < steps; s++) {
        ops->gemm(ctx, 0, 1, r, r, c, 1, x, c, x, c, 0, a, r);                    // A = X X^T
        ops->copy(ctx, b, a, (size_t)r * r);
        ops->gemm(ctx, 0, 0, r, r, r, MUON_NS_C, a, r, a, r, MUON_NS_B, b, r);     // B = b A + c A A
        ops->copy(ctx, xn, x, (size_t)r * c);
        ops->gemm(ctx, 0, 0, r, c, r, 1, b, r, x, c, MUON_NS_A, xn, c);           // X' = a X + B X
        void* t = x;
        x = xn;
        xn = t;
    }
    return x;
}

void muon_step(const MuonOps* ops, void* ctx, const MuonScratch* scratch, const GPTConfig* cfg,
               const MuonConfig* c, double lr, double weight_decay) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt_param_sizes(cfg, sizes);
    size_t at = 0;
    for (int k = 0; k < NUM_PARAM_TENSORS; at += sizes[k], k++) {
        int rows, cols;
        if (!sizes[k]) continue;
        if (!muon_tensor_shape(cfg, k, &rows, &cols)) {
            ops->adamw(ctx, at, at + sizes[k]);
            continue;
        }
        const int r = rows < cols ? rows : cols, wide = rows < cols ? cols : rows;
        const double step = lr * muon_scale_factor(c, rows, cols);
        for (int l = 0; l < cfg->L; l++) {
            const size_t w = at + (size_t)l * rows * cols;
            ops->momentum(ctx, w, (size_t)rows * cols, c);
            ops->normalize(ctx, rows, cols);
            // U is spent once X holds it: its buffer is the iterate's second copy.
            const void* x = newton_schulz(ops, ctx, scratch->x, scratch->u, scratch->a,
                                          scratch->b, r, wide, c->ns_steps);
            ops->update(ctx, w, rows, cols, x, step, lr * weight_decay);
        }
    }
}
