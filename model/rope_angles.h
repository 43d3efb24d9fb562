// The angles of rotary position embeddings (model/layers.h rope_forward), shared by the CPU layer
// and the CUDA kernel so that both rotate by the same fp32 cosines and sines: the angle
// p / theta^(2i/HS) of channel pair i at position p, computed in double (at p = 131072 an fp32
// angle would be off by up to 0.004 rad) and rounded once.
#pragma once
#include <math.h>

#if defined(__CUDACC__)
#define ROPE_HD __host__ __device__
#else
#define ROPE_HD
#endif

static inline ROPE_HD void rope_cos_sin(long p, int i, int HS, int theta, float* c, float* s) {
    const double angle = (double)p * pow((double)theta, -2.0 * i / HS);
    *c = (float)cos(angle);
    *s = (float)sin(angle);
}
