#include "model/optimizer.h"

#include <math.h>
#include <string.h>

#include "model/gpt.h"

static int name_index(const char* name, const char* const* names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

int lr_schedule_kind(const char* name) {
    static const char* const names[] = {"cosine", "linear", "constant", "wsd", "inverse-sqrt"};
    return name_index(name, names, 5);
}

int wsd_decay_style(const char* name) {
    static const char* const names[] = {"linear", "cosine", "exponential", "minus-sqrt"};
    return name_index(name, names, 4);
}

// The rate at `ratio` (0..1, clamped) of the decay from lr to lr_min.
static double decayed(const LRSchedule* s, double ratio) {
    const double min_lr = s->lr * s->final_frac;
    if (ratio > 1) ratio = 1;
    const int style = s->kind == LR_WSD ? (int)s->wsd_style
                      : s->kind == LR_COSINE ? WSD_COSINE : WSD_LINEAR;
    double c = 1 - ratio;   // linear
    if (style == WSD_COSINE) c = 0.5 * (1 + cos(M_PI * ratio));
    else if (style == WSD_EXPONENTIAL) c = 2 * pow(0.5, ratio) - 1;
    else if (style == WSD_MINUS_SQRT) c = 1 - sqrt(ratio);
    return min_lr + c * (s->lr - min_lr);
}

// inverse-sqrt after its warmup: lr sqrt(max(warmup, 1) / max(count, 1)), at least lr_min.
static double inverse_sqrt(const LRSchedule* s, double warmup, double count) {
    const double lr = s->lr * sqrt((warmup > 1 ? warmup : 1) / (count > 1 ? count : 1));
    const double min_lr = s->lr * s->final_frac;
    return lr > min_lr ? lr : min_lr;
}

double lr_at_step(const LRSchedule* s, int step) {
    if (step < s->warmup_steps) return s->lr * (step + 1) / s->warmup_steps;
    if (s->kind == LR_CONSTANT) return s->lr;
    if (s->kind == LR_INVERSE_SQRT) return inverse_sqrt(s, s->warmup_steps, step);
    // The decay's first step and length: all steps after warmup, or wsd's last share of them.
    int begin = s->warmup_steps, steps = s->total_steps - s->warmup_steps;
    if (s->kind == LR_WSD) {
        const int decay = (int)ceil(s->decay_frac * steps - 1e-9);
        begin = s->total_steps - decay;
        steps = decay;
        if (step < begin) return s->lr;
    }
    return decayed(s, steps > 0 ? (double)(step - begin) / steps : 0);
}

double lr_at_tokens(const LRSchedule* s, double tokens) {
    if (s->warmup_tokens > 0 && tokens <= s->warmup_tokens) return s->lr * tokens / s->warmup_tokens;
    if (s->kind == LR_CONSTANT) return s->lr;
    if (s->kind == LR_INVERSE_SQRT)
        return tokens > s->decay_tokens ? s->lr * s->final_frac
                                        : inverse_sqrt(s, s->warmup_tokens, tokens);
    double begin = s->warmup_tokens, length = s->decay_tokens - s->warmup_tokens;
    if (s->kind == LR_WSD) {
        begin = s->decay_tokens - s->decay_frac * length;
        length = s->decay_frac * length;
        if (tokens <= begin) return s->lr;
    }
    return decayed(s, length > 0 ? (tokens - begin) / length : 1);
}

double grad_sum_squares(const real* g, size_t n) {
    double acc = 0;
#pragma omp parallel for reduction(+ : acc)
    for (size_t i = 0; i < n; i++) acc += (double)g[i] * g[i];
    return acc;
}

double clip_factor(double norm, double max_norm) {
    if (max_norm <= 0) return 1;
    const double f = max_norm / (norm + 1e-6);
    return f < 1 ? f : 1;
}

double step_grad_scale(double loss_sum, double sumsq, double max_norm, StepLimits limits) {
    if (!isfinite(loss_sum) || !isfinite(sumsq)) return OPTIMIZER_SKIP;
    if (loss_sum > limits.loss_sum || sumsq > limits.sumsq) return OPTIMIZER_SKIP;
    return clip_factor(sqrt(sumsq), max_norm);
}

void adamw_update(const GPTConfig* cfg, real* params, const real* grads, real* m, real* v,
                  size_t begin, size_t end, int t, double lr, const AdamWConfig* opt,
                  double grad_scale) {
    if (grad_scale < 0) return;   // OPTIMIZER_SKIP: a non-finite step is dropped
    size_t sizes[NUM_PARAM_TENSORS];
    gpt_param_sizes(cfg, sizes);
    const real b1 = (real)opt->beta1, b2 = (real)opt->beta2, eps = (real)opt->eps;
    const real c1 = (real)(1 - pow(opt->beta1, t)), c2 = (real)(1 - pow(opt->beta2, t));
    const real step = (real)lr, scale = (real)grad_scale;
    size_t lo = 0;
    for (int k = 0; k < NUM_PARAM_TENSORS; lo += sizes[k], k++) {
        const size_t a = lo > begin ? lo : begin, b = lo + sizes[k] < end ? lo + sizes[k] : end;
        if (a >= b) continue;
        const real decay = gpt_param_decays(k) ? (real)(lr * opt->weight_decay) : 0;
#pragma omp parallel for simd
        for (size_t i = a; i < b; i++) {
            const size_t j = i - begin;
            const real g = grads[i] * scale;
            m[j] = b1 * m[j] + (1 - b1) * g;
            v[j] = b2 * v[j] + (1 - b2) * g * g;
            const real mhat = m[j] / c1, vhat = v[j] / c2;
            params[i] -= decay * params[i] + step * mhat / (rsqrt(vhat) + eps);
        }
    }
}
