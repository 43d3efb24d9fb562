// AdamW with fp32 master weights and moments, floatX gradients and parameters, stochastic
// rounding to bf16 (contract in model/optim_cuda.cuh; CPU twin adamw_update in
// model/optimizer.c, whose arithmetic this follows step for step in fp32).
//
// Each thread updates one group of X128_ELEMS consecutive elements (8 bf16 or 4 fp32): 16-byte
// loads and stores of the gradient and parameter, 16-byte loads and stores of master, m and v,
// when the range starts on a group boundary and the buffers are 16-byte aligned; element by
// element otherwise (and on the last, partial group). The stochastic rounding of 8 elements takes
// one Philox4x32-10 output (4 x 32 random bits = 8 x 16 bits).
#include "model/optim_cuda.cuh"

#include "model/stochastic_round.cuh"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { ADAMW_THREADS = 256, ADAMW_GROUP = X128_ELEMS };

typedef struct {
    float lr, b1, b2, eps, decay_lr, c1, c2;
    const double* scale;   // device memory; NULL: 1
    unsigned long long seed, offset;
} AdamWArgs;

// 1 if element i lies in a decayed tensor; *k is a cursor (tensors are visited in order).
__device__ __forceinline__ bool decayed_at(const AdamWTensorTable& table, unsigned long long i, int* k) {
    while (*k < table.count && i >= table.end[*k]) ++*k;
    return *k < table.count && table.decays[*k] != 0;
}

__global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_kernel(floatX* params, float* master, const floatX* grads, float* mom, float* vel,
                 unsigned long long begin, unsigned long long end, AdamWTensorTable table,
                 AdamWArgs a, int vec) {
    if (a.scale && *a.scale < 0.0) return;   // OPTIMIZER_SKIP: a non-finite step is dropped
    const unsigned long long g = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long i0 = begin + g * ADAMW_GROUP;
    if (i0 >= end) return;
    const int n = end - i0 < (unsigned long long)ADAMW_GROUP ? (int)(end - i0) : (int)ADAMW_GROUP;
    const bool full = vec && n == ADAMW_GROUP;
    const size_t j0 = (size_t)(i0 - begin);  // index into master, m, v
    float gr[ADAMW_GROUP], p[ADAMW_GROUP], m[ADAMW_GROUP], v[ADAMW_GROUP];
    if (full) {
        const x128 gx = load128(grads + i0);
        for (int k = 0; k < ADAMW_GROUP; k++) gr[k] = to_float(gx.v[k]);
        for (int q = 0; q < ADAMW_GROUP / 4; q++) {
            const float4 mq = reinterpret_cast<const float4*>(mom + j0)[q];
            const float4 vq = reinterpret_cast<const float4*>(vel + j0)[q];
            m[4 * q] = mq.x, m[4 * q + 1] = mq.y, m[4 * q + 2] = mq.z, m[4 * q + 3] = mq.w;
            v[4 * q] = vq.x, v[4 * q + 1] = vq.y, v[4 * q + 2] = vq.z, v[4 * q + 3] = vq.w;
        }
        if (master) {
            for (int q = 0; q < ADAMW_GROUP / 4; q++) {
                const float4 pq = reinterpret_cast<const float4*>(master + j0)[q];
                p[4 * q] = pq.x, p[4 * q + 1] = pq.y, p[4 * q + 2] = pq.z, p[4 * q + 3] = pq.w;
            }
        } else {
            const x128 px = load128(params + i0);
            for (int k = 0; k < ADAMW_GROUP; k++) p[k] = to_float(px.v[k]);
        }
    } else {
        for (int k = 0; k < n; k++) {
            gr[k] = to_float(grads[i0 + k]);
            m[k] = mom[j0 + k];
            v[k] = vel[j0 + k];
            p[k] = master ? master[j0 + k] : to_float(params[i0 + k]);
        }
    }

    int tensor = 0;
    const float scale = a.scale ? (float)*a.scale : 1.0f;   // the clip factor, from the device
    for (int k = 0; k < n; k++) {
        const float decay = decayed_at(table, i0 + k, &tensor) ? a.decay_lr : 0.0f;
        const float gk = gr[k] * scale;
        m[k] = a.b1 * m[k] + (1.0f - a.b1) * gk;
        v[k] = a.b2 * v[k] + (1.0f - a.b2) * gk * gk;
        const float mhat = m[k] / a.c1, vhat = v[k] / a.c2;
        p[k] -= decay * p[k] + a.lr * mhat / (sqrtf(vhat) + a.eps);
    }

    floatX out[ADAMW_GROUP];
    SrBits bits = SR_BITS_INIT;
    for (int k = 0; k < n; k++) out[k] = round_stochastic<floatX>(p[k], sr_bits16(&bits, a.seed, a.offset, i0 + k));

    if (full) {
        x128 px;
        for (int k = 0; k < ADAMW_GROUP; k++) px.v[k] = out[k];
        store128(params + i0, px);
        for (int q = 0; q < ADAMW_GROUP / 4; q++) {
            reinterpret_cast<float4*>(mom + j0)[q] = make_float4(m[4 * q], m[4 * q + 1], m[4 * q + 2], m[4 * q + 3]);
            reinterpret_cast<float4*>(vel + j0)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
            if (master)
                reinterpret_cast<float4*>(master + j0)[q] =
                    make_float4(p[4 * q], p[4 * q + 1], p[4 * q + 2], p[4 * q + 3]);
        }
    } else {
        for (int k = 0; k < n; k++) {
            params[i0 + k] = out[k];
            mom[j0 + k] = m[k];
            vel[j0 + k] = v[k];
            if (master) master[j0 + k] = p[k];
        }
    }
}

AdamWTensorTable adamw_tensor_table(const size_t* sizes, const int* decays, int count) {
    CHECK(count >= 0 && count <= ADAMW_MAX_TENSORS, "raise ADAMW_MAX_TENSORS",
          "adamw_tensor_table: %d tensors (at most %d)", count, (int)ADAMW_MAX_TENSORS);
    AdamWTensorTable t;
    memset(&t, 0, sizeof t);
    t.count = count;
    unsigned long long end = 0;
    for (int k = 0; k < count; k++) {
        end += sizes[k];
        t.end[k] = end;
        t.decays[k] = decays[k] != 0;
    }
    return t;
}

static int aligned16(const void* p) { return (uintptr_t)p % 16 == 0; }

void adamw_update_cuda(floatX* params, float* master, const floatX* grads, float* m, float* v,
                       size_t begin, size_t end, const AdamWTensorTable* table, int t, double lr,
                       double beta1, double beta2, double eps, double weight_decay,
                       const double* grad_scale, unsigned long long seed, cudaStream_t stream) {
    CHECK(begin <= end && t >= 1, "caller bug", "adamw_update_cuda: range [%zu, %zu), step %d", begin,
          end, t);
    if (begin == end) return;
    AdamWArgs a;
    a.lr = (float)lr;
    a.b1 = (float)beta1;
    a.b2 = (float)beta2;
    a.eps = (float)eps;
    a.decay_lr = (float)(lr * weight_decay);
    a.c1 = (float)(1 - pow(beta1, t));
    a.c2 = (float)(1 - pow(beta2, t));
    a.scale = grad_scale;
    a.seed = seed;
    a.offset = 4ull * (unsigned long long)t;  // a fresh Philox block per step
    const int vec = begin % ADAMW_GROUP == 0 && aligned16(params) && aligned16(grads) && aligned16(m) &&
                    aligned16(v) && (!master || aligned16(master));
    const size_t groups = (end - begin + ADAMW_GROUP - 1) / ADAMW_GROUP;
    const size_t blocks = (groups + ADAMW_THREADS - 1) / ADAMW_THREADS;
    CHECK(blocks <= 0x7fffffff, "caller bug", "adamw_update_cuda: %zu elements is too many", end - begin);
    LAUNCH(adamw_kernel, (unsigned int)blocks, ADAMW_THREADS, 0, stream, params, master, grads, m, v,
           (unsigned long long)begin, (unsigned long long)end, *table, a, vec);
}
