#include "model/optimizer.h"

#include <math.h>

#include "model/gpt.h"

double lr_at_step(const LRSchedule* s, int step) {
    if (step < s->warmup_steps) return s->lr * (step + 1) / s->warmup_steps;
    const double min_lr = s->lr * s->final_frac;
    const int decay_steps = s->total_steps - s->warmup_steps;
    double ratio = decay_steps > 0 ? (double)(step - s->warmup_steps) / decay_steps : 0;
    if (ratio > 1) ratio = 1;
    return min_lr + 0.5 * (1 + cos(M_PI * ratio)) * (s->lr - min_lr);
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
