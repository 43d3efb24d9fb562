// The loss-spike detector (--spike-zscore Z, --spike-window N): a step whose loss or gradient
// norm lies more than Z standard deviations ABOVE the mean of the last N accepted steps is not
// applied, through the same device-side mark as a non-finite step (model/optimizer.h:
// StepLimits). It acts once N accepted steps are in its window; skipped steps never enter it.
// Every rank feeds it the same all-reduced loss and norm in the same order, so every rank
// computes the same bounds and drops the same steps. The window is not saved in checkpoints:
// after --resume it refills from the resumed run's steps.
#pragma once
#include "model/optimizer.h"

typedef struct {
    double zscore;        // Z; 0: off
    int window;           // N
    int count, next;      // accepted steps held (at most N); where the next one goes
    double *loss, *norm;  // (N) ring buffers of the mean loss and gradient norm
} SpikeDetector;

// window >= 2 when zscore > 0.
void spike_init(SpikeDetector* d, double zscore, int window);
void spike_free(SpikeDetector* d);
// The bounds of the coming step in the backend's step scalars (loss sum over tokens_per_step
// tokens, gradient sum of squares): STEP_NO_LIMITS while off or the window is not full.
StepLimits spike_limits(const SpikeDetector* d, long tokens_per_step);
// A step's z-scores against the window (finite; 0 while the window is not full).
void spike_zscores(const SpikeDetector* d, double loss, double norm, double* loss_z,
                   double* norm_z);
// An applied step joins the window (its oldest step leaves).
void spike_accept(SpikeDetector* d, double loss, double norm);
