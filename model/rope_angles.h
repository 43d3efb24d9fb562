// The angles of rotary position embeddings (model/layers.h rope_forward), shared by the CPU layer
// and the CUDA kernel so that both rotate by the same fp32 cosines and sines: the angle p * f_i of
// channel pair i at position p, f_i = theta^(-2i/HS) or its context-extension scaling (below),
// computed in double (at p = 131072 an fp32 angle would be off by up to 0.004 rad) and rounded
// once.
#pragma once
#include <math.h>

#if defined(__CUDACC__)
#define ROPE_HD __host__ __device__
#else
#define ROPE_HD
#endif

// How the frequencies are scaled for context extension (Hugging Face's rope_scaling types of the
// same names; model files keep the number, so the values are fixed).
enum {
    ROPE_SCALING_NONE = 0,     // f_i = theta^(-2i/HS)
    ROPE_SCALING_LINEAR = 1,   // position interpolation (Chen et al. 2023): f_i / factor
    ROPE_SCALING_YARN = 2,     // YaRN (Peng et al. 2023): f_i / factor in the pairs that turn
                               // less than once over the original context, f_i in those that
                               // turn 32 times or more, a linear ramp between; both q and k
                               // scaled by 0.1 ln(factor) + 1 (the logits by its square)
    ROPE_SCALING_LLAMA3 = 3,   // Llama 3.1's: f_i / factor for wavelengths above the original
                               // context, f_i below a quarter of it, smoothly between
};

// A rotary model's rotation: the base and, for context extension, the scaling.
typedef struct {
    int theta;        // base, >= 2
    int scaling;      // ROPE_SCALING_*
    float factor;     // with scaling: the extension factor, >= 1 (0 without)
    int original_T;   // with scaling: the context the frequencies were trained at (0 without)
} RopeSpec;

#define ROPE_TWO_PI 6.283185307179586

// YaRN's pair index (fractional) whose wavelength turns `rotations` times over original_T
// positions: HS ln(original_T / (2 pi rotations)) / (2 ln theta).
static inline ROPE_HD double rope_yarn_pair(RopeSpec r, int HS, double rotations) {
    return HS * log(r.original_T / (ROPE_TWO_PI * rotations)) / (2.0 * log((double)r.theta));
}

// The frequency f_i of pair i (radians per position): the same for every position, so a caller
// that rotates many rows computes it once per pair.
static inline ROPE_HD double rope_frequency(RopeSpec r, int i, int HS) {
    const double f = pow((double)r.theta, -2.0 * i / HS);
    const double s = r.factor;
    switch (r.scaling) {
    case ROPE_SCALING_LINEAR:
        return f / s;
    case ROPE_SCALING_YARN: {
        // Pairs below `lo` (32 turns or more) keep f, above `hi` (one turn or less) take f / s;
        // the bounds rounded outwards and clipped to [0, HS - 1] as YaRN's reference does.
        const double lo = fmax(floor(rope_yarn_pair(r, HS, 32.0)), 0.0);
        double hi = fmin(ceil(rope_yarn_pair(r, HS, 1.0)), HS - 1.0);
        if (hi == lo) hi += 0.001;
        const double ramp = fmin(fmax((i - lo) / (hi - lo), 0.0), 1.0);
        return f / s * ramp + f * (1.0 - ramp);
    }
    case ROPE_SCALING_LLAMA3: {
        // Llama 3.1's low and high frequency factors 1 and 4: wavelengths past original_T are
        // interpolated, those under original_T / 4 kept, a smooth blend between.
        const double wavelength = ROPE_TWO_PI / f;
        if (wavelength < r.original_T / 4.0) return f;
        if (wavelength > r.original_T / 1.0) return f / s;
        const double smooth = (r.original_T / wavelength - 1.0) / (4.0 - 1.0);
        return (1.0 - smooth) * f / s + smooth * f;
    }
    default:
        return f;
    }
}

// The factor both the query and the key are multiplied by with their rotation (YaRN's attention
// temperature; 1 otherwise).
static inline ROPE_HD double rope_amplitude(RopeSpec r) {
    return r.scaling == ROPE_SCALING_YARN && r.factor > 1 ? 0.1 * log((double)r.factor) + 1.0 : 1.0;
}

// cos and sin of the angle p f at position p of a pair of frequency f (rope_frequency), times
// the amplitude a (rope_amplitude), rounded to fp32 once.
static inline ROPE_HD void rope_cos_sin(long p, double f, double a, float* c, float* s) {
    const double angle = (double)p * f;
    *c = (float)(a * cos(angle));
    *s = (float)(a * sin(angle));
}
