// AdamW (decoupled weight decay, as torch.optim.AdamW), global gradient-norm clipping and the
// learning-rate schedule (linear warmup, then cosine decay to a floor).
#pragma once
#include <math.h>
#include <stddef.h>

#include "model/config.h"
#include "model/real.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double lr;            // peak learning rate
    int warmup_steps;     // linear warmup: lr * (step + 1) / warmup
    int total_steps;      // cosine decay from lr to lr * final_frac over [warmup, total)
    double final_frac;
} LRSchedule;

typedef struct {
    double beta1, beta2, eps, weight_decay;
} AdamWConfig;

double lr_at_step(const LRSchedule* s, int step);

// Sum of squares of n gradient elements (accumulated in double).
double grad_sum_squares(const real* g, size_t n);
// torch.nn.utils.clip_grad_norm_'s factor: min(1, max_norm / (norm + 1e-6)); 1 if max_norm <= 0.
double clip_factor(double norm, double max_norm);
// Bounds on a step's loss sum and gradient sum of squares above which a finite step is dropped
// like a non-finite one (the trainer's loss-spike detector, train/spike.h); INFINITY: no bound.
typedef struct {
    double loss_sum, sumsq;
} StepLimits;
#define STEP_NO_LIMITS ((StepLimits){INFINITY, INFINITY})

// The grad_scale a step's update uses: OPTIMIZER_SKIP when the step's loss sum or the gradients'
// sum of squares is not finite, or above its bound in limits (the update is dropped: adamw_update
// and the CUDA AdamW leave parameters and moments as they are, so a non-finite value never
// reaches the weights), else clip_factor(sqrt(sumsq), max_norm). The CUDA twin is clip_scale_cuda
// (model/optim_cuda.cuh).
#define OPTIMIZER_SKIP (-1.0)
double step_grad_scale(double loss_sum, double sumsq, double max_norm, StepLimits limits);

// One AdamW step (t = 1, 2, ...) on elements [begin, end) of the flat parameter vector.
// m, v hold the moments of exactly that range (m[0] belongs to element begin). Gradients are
// multiplied by grad_scale first (clipping); grad_scale < 0 (OPTIMIZER_SKIP) changes nothing.
// Weight decay applies to the tensors that
// gpt_param_decays() names.
void adamw_update(const GPTConfig* cfg, real* params, const real* grads, real* m, real* v,
                  size_t begin, size_t end, int t, double lr, const AdamWConfig* opt,
                  double grad_scale);

#ifdef __cplusplus
}
#endif
