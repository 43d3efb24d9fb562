// AdamW (decoupled weight decay, as torch.optim.AdamW), global gradient-norm clipping and the
// learning-rate schedules (linear warmup, then cosine, linear, constant or warmup-stable-decay).
#pragma once
#include <math.h>
#include <stddef.h>

#include "model/config.h"
#include "model/real.h"

#ifdef __cplusplus
extern "C" {
#endif

// After the warmup, over the steps [warmup, total) with r = (step - warmup) / (total - warmup):
//   cosine       lr_min + (lr - lr_min) (1 + cos(pi r)) / 2    (llm.c's, the default)
//   linear       lr_min + (lr - lr_min) (1 - r)
//   constant     lr
//   wsd          warmup-stable-decay: lr until the last decay_frac of the steps after warmup
//                (D = ceil(decay_frac (total - warmup)) steps), then lr_min + (lr - lr_min) c(r)
//                over them, r counted over the D steps, c the wsd_style's coefficient (below)
//   inverse-sqrt lr sqrt(max(warmup, 1) / max(step, 1)), at least lr_min (fairseq's and
//                Megatron-LM's inverse-square-root; the step index counts the updates before it)
// with lr_min = lr * final_frac. cosine, linear, constant and the linear wsd are
// torch.optim.lr_scheduler's of the same name (LinearLR, CosineAnnealingLR, ConstantLR chained by
// SequentialLR); the other forms Megatron-LM's formulas; tests/lr_schedule_ref.py.
typedef enum { LR_COSINE = 0, LR_LINEAR, LR_CONSTANT, LR_WSD, LR_INVERSE_SQRT } LRScheduleKind;
// The coefficient c(r) of wsd's decay, from 1 at r = 0 to 0 at r = 1 (Megatron-LM's
// --lr-wsd-decay-style): linear 1 - r; cosine (1 + cos(pi r)) / 2; exponential 2 (1/2)^r - 1
// (Megatron's own form); minus-sqrt 1 - sqrt(r) (Haegele et al. 2024's "1-sqrt" cooldown).
typedef enum { WSD_LINEAR = 0, WSD_COSINE, WSD_EXPONENTIAL, WSD_MINUS_SQRT } WsdDecayStyle;

typedef struct {
    double lr;            // peak learning rate
    int warmup_steps;     // linear warmup: lr * (step + 1) / warmup
    int total_steps;      // the schedule's end
    double final_frac;    // lr_min = lr * final_frac (not constant)
    LRScheduleKind kind;
    double decay_frac;    // wsd: the decay's share of the steps after warmup
    WsdDecayStyle wsd_style;   // wsd: the decay's form
    // A schedule in trained tokens instead of steps (Megatron-LM's sample-based one): 0 for
    // steps; else the decay ends after decay_tokens trained tokens (then lr_min on) and the warmup
    // takes the first warmup_tokens (lr_at_tokens).
    double warmup_tokens, decay_tokens;
} LRSchedule;

// "cosine", "linear", "constant", "wsd", "inverse-sqrt" -> the kind; -1 for another name.
int lr_schedule_kind(const char* name);
// "linear", "cosine", "exponential", "minus-sqrt" -> the wsd decay style; -1 for another name.
int wsd_decay_style(const char* name);

typedef struct {
    double beta1, beta2, eps, weight_decay;
} AdamWConfig;

double lr_at_step(const LRSchedule* s, int step);
// The rate of a step after which `tokens` tokens are trained (its own included), for a schedule
// in tokens: lr tokens / warmup_tokens while tokens <= warmup_tokens, then the decay over
// (warmup_tokens, decay_tokens] (wsd: its last decay_frac; inverse-sqrt:
// lr sqrt(max(warmup_tokens, 1) / tokens), at least lr_min), lr_min beyond. Megatron-LM's get_lr
// with samples counted as tokens, at the count after the step: the rate Megatron logs for a step
// (it applies the one before its increment, one step behind), as lr_at_step's (step + 1) /
// warmup counts the step itself.
double lr_at_tokens(const LRSchedule* s, double tokens);

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
