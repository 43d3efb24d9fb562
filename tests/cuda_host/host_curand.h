// cuRAND's device API for the Philox4x32-10 generator, written from the algorithm (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11) with cuRAND's state conventions: a
// 128-bit counter (x lowest), a 64-bit key from the seed, `subsequence` advancing the upper 64
// counter bits and `offset` skipping single outputs. curand()/curand4()/curand_uniform() give the
// same bits as cuRAND; normals use the accurate sinf/cosf/logf and so may differ from the GPU's
// fast intrinsics in the last bits. Other generators (XORWOW, MRG32k3a, ...) are not provided.
#pragma once
#include <math.h>
#include "tests/cuda_host/host_types.h"

struct curandStatePhilox4_32_10 {
    uint4 ctr;
    uint4 output;  // the block of 4 outputs for ctr; output[STATE] is the next curand() value
    uint2 key;
    unsigned int STATE;
    int boxmuller_flag;
    int boxmuller_flag_double;
    float boxmuller_extra;
    double boxmuller_extra_double;
};
typedef struct curandStatePhilox4_32_10 curandStatePhilox4_32_10_t;

static inline uint4 cuda_host_philox_round(uint4 c, uint2 k) {
    unsigned long long p0 = 0xD2511F53ull * c.x;
    unsigned long long p1 = 0xCD9E8D57ull * c.z;
    uint4 r;
    r.x = (unsigned int)(p1 >> 32) ^ c.y ^ k.x;
    r.y = (unsigned int)p1;
    r.z = (unsigned int)(p0 >> 32) ^ c.w ^ k.y;
    r.w = (unsigned int)p0;
    return r;
}

// The Philox4x32-10 bijection: 10 rounds, the key bumped by the Weyl constants between rounds.
static inline uint4 curand_Philox4x32_10(uint4 c, uint2 k) {
    for (int i = 0; i < 9; i++) {
        c = cuda_host_philox_round(c, k);
        k.x += 0x9E3779B9u;
        k.y += 0xBB67AE85u;
    }
    return cuda_host_philox_round(c, k);
}

// Adds n to the 128-bit counter (high_half 0) or to its upper 64 bits (high_half 1: z, w), as
// skipahead and skipahead_sequence advance it.
static inline void cuda_host_philox_add(uint4* ctr, unsigned long long n, int high_half) {
    if (!high_half) {
        unsigned long long lo = ((unsigned long long)ctr->y << 32 | ctr->x);
        unsigned long long sum = lo + n;
        ctr->x = (unsigned int)sum;
        ctr->y = (unsigned int)(sum >> 32);
        if (sum >= lo) return;
        n = 1;  // carry into the upper half
    }
    unsigned long long hi = ((unsigned long long)ctr->w << 32 | ctr->z) + n;
    ctr->z = (unsigned int)hi;
    ctr->w = (unsigned int)(hi >> 32);
}

static inline void skipahead_sequence(unsigned long long n, curandStatePhilox4_32_10_t* s) {
    cuda_host_philox_add(&s->ctr, n, 1);
    s->output = curand_Philox4x32_10(s->ctr, s->key);
}

static inline void skipahead(unsigned long long n, curandStatePhilox4_32_10_t* s) {
    unsigned long long blocks = n / 4;
    s->STATE += (unsigned int)(n & 3);
    if (s->STATE > 3) {
        s->STATE -= 4;
        blocks++;
    }
    cuda_host_philox_add(&s->ctr, blocks, 0);
    s->output = curand_Philox4x32_10(s->ctr, s->key);
}

static inline void curand_init(unsigned long long seed, unsigned long long subsequence,
                               unsigned long long offset, curandStatePhilox4_32_10_t* s) {
    s->ctr = make_uint4(0, 0, 0, 0);
    s->key = make_uint2((unsigned int)seed, (unsigned int)(seed >> 32));
    s->STATE = 0;
    s->boxmuller_flag = 0;
    s->boxmuller_flag_double = 0;
    s->boxmuller_extra = 0.0f;
    s->boxmuller_extra_double = 0.0;
    skipahead_sequence(subsequence, s);
    skipahead(offset, s);
}

static inline unsigned int curand(curandStatePhilox4_32_10_t* s) {
    unsigned int w[4] = {s->output.x, s->output.y, s->output.z, s->output.w};
    unsigned int r = w[s->STATE];
    if (++s->STATE == 4) {
        s->STATE = 0;
        cuda_host_philox_add(&s->ctr, 1, 0);
        s->output = curand_Philox4x32_10(s->ctr, s->key);
    }
    return r;
}

// The next four outputs, the counter advanced by one block.
static inline uint4 curand4(curandStatePhilox4_32_10_t* s) {
    unsigned int w[8] = {s->output.x, s->output.y, s->output.z, s->output.w};
    cuda_host_philox_add(&s->ctr, 1, 0);
    s->output = curand_Philox4x32_10(s->ctr, s->key);
    w[4] = s->output.x, w[5] = s->output.y, w[6] = s->output.z, w[7] = s->output.w;
    unsigned int k = s->STATE;
    return make_uint4(w[k], w[k + 1], w[k + 2], w[k + 3]);
}

// (0, 1]: x * 2^-32 + 2^-33, fused as nvcc fuses it on the GPU.
static inline float cuda_host_uniform(unsigned int x) {
    return fmaf((float)x, 2.3283064e-10f, 2.3283064e-10f / 2.0f);
}
static inline float curand_uniform(curandStatePhilox4_32_10_t* s) { return cuda_host_uniform(curand(s)); }
static inline float4 curand_uniform4(curandStatePhilox4_32_10_t* s) {
    uint4 v = curand4(s);
    return make_float4(cuda_host_uniform(v.x), cuda_host_uniform(v.y), cuda_host_uniform(v.z),
                       cuda_host_uniform(v.w));
}

static inline float2 cuda_host_box_muller(unsigned int x, unsigned int y) {
    const float two_pi_2pow32_inv = 2.3283064e-10f * 6.2831855f;
    float u = cuda_host_uniform(x);
    float v = fmaf((float)y, two_pi_2pow32_inv, two_pi_2pow32_inv / 2.0f);
    float s = sqrtf(-2.0f * logf(u));
    return make_float2(sinf(v) * s, cosf(v) * s);
}

static inline float2 curand_normal2(curandStatePhilox4_32_10_t* s) {
    unsigned int x = curand(s);
    unsigned int y = curand(s);
    return cuda_host_box_muller(x, y);
}
static inline float4 curand_normal4(curandStatePhilox4_32_10_t* s) {
    uint4 v = curand4(s);
    float2 a = cuda_host_box_muller(v.x, v.y), b = cuda_host_box_muller(v.z, v.w);
    return make_float4(a.x, a.y, b.x, b.y);
}
// One normal per call: Box-Muller makes two, the second is kept for the next call.
static inline float curand_normal(curandStatePhilox4_32_10_t* s) {
    if (s->boxmuller_flag) {
        s->boxmuller_flag = 0;
        return s->boxmuller_extra;
    }
    float2 v = curand_normal2(s);
    s->boxmuller_extra = v.y;
    s->boxmuller_flag = 1;
    return v.x;
}
