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
                         p + (2 * matrix + gram) * elem_size, elem_size};
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

// Matrix j of the step's order (muon_matrix_shape): where it starts in the parameters and its
// shape.
typedef struct {
    size_t offset;
    int rows, cols;
} MuonMatrix;

static MuonMatrix muon_matrix(const GPTConfig* cfg, const size_t* sizes, int split_qkv, int j) {
    const MuonMatrixShape s = muon_matrix_shape(cfg, split_qkv, j);
    int rows, cols;   // the whole layer's matrix
    muon_tensor_shape(cfg, s.k, &rows, &cols);
    MuonMatrix x = {0, s.rows, s.cols};
    for (int i = 0; i < s.k; i++) x.offset += sizes[i];
    x.offset += ((size_t)s.l * rows + s.row0) * cols;
    return x;
}

// The compact first moment's slot of the first owned matrix: after the AdamW tensors' moments.
static size_t first_matrix_slot(const GPTConfig* cfg, const size_t* sizes) {
    size_t total = 0;
    for (int k = 0; k < NUM_PARAM_TENSORS; k++) total += sizes[k];
    return muon_v_elements(cfg, total);
}

void muon_v_spans(const GPTConfig* cfg, MuonVSpan span, void* ctx) {
    size_t sizes[NUM_PARAM_TENSORS], at = 0, slot = 0;
    gpt_param_sizes(cfg, sizes);
    for (int k = 0; k < NUM_PARAM_TENSORS; at += sizes[k], k++) {
        int rows, cols;
        if (!sizes[k] || muon_tensor_shape(cfg, k, &rows, &cols)) continue;
        span(ctx, at, sizes[k], slot);
        slot += sizes[k];
    }
}

typedef struct {
    const float* from;
    float* to;
    int expand;   // 1: compact -> full; 0: full -> compact
} VCopy;

static void copy_span(void* ctx, size_t begin, size_t n, size_t slot) {
    VCopy* c = ctx;
    if (c->expand) memcpy(c->to + begin, c->from + slot, n * sizeof(float));
    else memcpy(c->to + slot, c->from + begin, n * sizeof(float));
}

void muon_v_expand(const GPTConfig* cfg, const float* compact, float* full, size_t count) {
    memset(full, 0, count * sizeof(float));
    VCopy c = {compact, full, 1};
    muon_v_spans(cfg, copy_span, &c);
}

void muon_v_compact(const GPTConfig* cfg, const float* full, float* compact) {
    VCopy c = {full, compact, 0};
    muon_v_spans(cfg, copy_span, &c);
}

typedef struct {
    const MuonOps* ops;
    void* ctx;
} AdamWSpans;

static void adamw_span(void* ctx, size_t begin, size_t n, size_t slot) {
    AdamWSpans* a = ctx;
    a->ops->adamw(a->ctx, begin, begin + n, slot);
}

void muon_step(const MuonOps* ops, void* ctx, const MuonScratch* scratch, const GPTConfig* cfg,
               const MuonConfig* c, double lr, double weight_decay) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt_param_sizes(cfg, sizes);
    AdamWSpans spans = {ops, ctx};
    muon_v_spans(cfg, adamw_span, &spans);
    const MuonShare* share = &c->share;
    const int ranks = share->ranks > 1 ? share->ranks : 1, me = ranks > 1 ? share->rank : 0;
    const int count = muon_matrix_count(cfg, c->split_qkv);
    size_t m_slot = first_matrix_slot(cfg, sizes);
    // Rounds of `ranks` matrices, rank i orthogonalizing the round's i-th (muon_matrix_owner):
    // consecutive matrices are mostly of one shape, so a round's ranks finish together. At most
    // one result lives on a rank at a time, in one of the iterate's buffers; the other receives
    // the owners' results.
    for (int first = 0; first < count; first += ranks) {
        const int last = first + ranks < count ? first + ranks : count, mine = first + me;
        void* result = scratch->x;
        if (mine < last) {
            const MuonMatrix w = muon_matrix(cfg, sizes, c->split_qkv, mine);
            const int r = w.rows < w.cols ? w.rows : w.cols;
            const int wide = w.rows < w.cols ? w.cols : w.rows;
            ops->momentum(ctx, w.offset, (size_t)w.rows * w.cols, m_slot, c, scratch->u);
            m_slot += (size_t)w.rows * w.cols;
            ops->normalize(ctx, w.rows, w.cols);
            // U is spent once X holds it: its buffer is the iterate's second copy.
            result = newton_schulz(ops, ctx, scratch->x, scratch->u, scratch->a, scratch->b, r,
                                   wide, c->ns_steps);
        }
        void* received = result == scratch->x ? scratch->u : scratch->x;
        for (int j = first; j < last; j++) {
            const MuonMatrix w = muon_matrix(cfg, sizes, c->split_qkv, j);
            void* x = j == mine ? result : received;
            if (ranks > 1)
                share->broadcast(share->ctx, x, (size_t)w.rows * w.cols * scratch->elem_size,
                                 muon_matrix_owner(share, j));
            const double step = lr * muon_scale_factor(c, w.rows, w.cols);
            ops->update(ctx, w.offset, w.rows, w.cols, x, step, lr * weight_decay);
        }
    }
}

// The AdamW tensors' first moments between their compact slots and their places.
typedef struct {
    const MuonHostOps* ops;
    void* ctx;
    char* m;
    float* full;
    size_t elem_size;
    int to_host;
} MomentSpans;

static void moment_span(void* ctx, size_t begin, size_t n, size_t slot) {
    MomentSpans* s = ctx;
    if (s->to_host) s->ops->to_host(s->ctx, s->full + begin, s->m + slot * s->elem_size, n);
    else s->ops->from_host(s->ctx, s->m + slot * s->elem_size, s->full + begin, n);
}

// Both directions: the AdamW tensors' spans, then every matrix in muon_step's order, the owned
// ones from their slots.
static void muon_m_copy(const MuonHostOps* ops, void* ctx, const MuonScratch* scratch,
                        const GPTConfig* cfg, const MuonConfig* c, char* m, float* full,
                        int to_host) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt_param_sizes(cfg, sizes);
    MomentSpans spans = {ops, ctx, m, full, scratch->elem_size, to_host};
    muon_v_spans(cfg, moment_span, &spans);
    const MuonShare* share = &c->share;
    const int me = share->ranks > 1 ? share->rank : 0, count = muon_matrix_count(cfg, c->split_qkv);
    size_t slot = first_matrix_slot(cfg, sizes);
    for (int j = 0; j < count; j++) {
        const MuonMatrix w = muon_matrix(cfg, sizes, c->split_qkv, j);
        const size_t n = (size_t)w.rows * w.cols;
        const int owner = muon_matrix_owner(share, j);
        void* mine = owner == me ? m + slot * scratch->elem_size : NULL;
        if (mine) slot += n;
        if (!to_host) {
            if (mine) ops->from_host(ctx, mine, full + w.offset, n);
            continue;
        }
        void* buf = mine ? mine : scratch->u;
        if (share->ranks > 1) share->broadcast(share->ctx, buf, n * scratch->elem_size, owner);
        ops->to_host(ctx, full + w.offset, buf, n);
    }
}

void muon_m_to_host(const MuonHostOps* ops, void* ctx, const MuonScratch* scratch,
                    const GPTConfig* cfg, const MuonConfig* c, const void* m, float* full,
                    size_t count) {
    memset(full, 0, count * sizeof(float));   // the padding past the parameters, if any
    muon_m_copy(ops, ctx, scratch, cfg, c, (char*)m, full, 1);
}

void muon_m_from_host(const MuonHostOps* ops, void* ctx, const MuonScratch* scratch,
                      const GPTConfig* cfg, const MuonConfig* c, void* m, const float* full) {
    muon_m_copy(ops, ctx, scratch, cfg, c, m, (float*)full, 0);
}
