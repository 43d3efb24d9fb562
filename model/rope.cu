// Rotary position embeddings on device memory: the twin of rope_forward / rope_backward in
// model/layers.c. A thread per (row, channel pair i) computes the pair's cosine and sine once
// (model/rope_angles.h, in double: a few per row, negligible beside the memory traffic) and rotates
// pair i of every query and key head of its row; consecutive threads take consecutive pairs, so
// each head's half-rows are read and written coalesced. Memory-bound: one read and one write of
// the query and key columns, in place.
#include "model/layers_cuda.cuh"
#include "model/rope_angles.h"

static constexpr int ROPE_THREADS = 256;

__global__ void rope_kernel(floatX* qkv, long N, int T, int heads, int W, int HS, TokenLayout pos,
                            const int* row_pos, RopeSpec rope, float sign) {
    const int half = HS / 2;
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long n = idx / half;
    if (n >= N) return;
    const int i = (int)(idx - n * half);
    const long p = row_pos ? row_pos[n] : token_layout_position(pos, n % T);
    float c, s;
    rope_cos_sin(p, rope_frequency(rope, i, HS), rope_amplitude(rope), &c, &s);
    s *= sign;
    floatX* row = qkv + n * W;
    for (int h = 0; h < heads; h++) {   // query heads, then key heads: adjacent columns
        floatX* x = row + (long)h * HS;
        const float x0 = to_float(x[i]), x1 = to_float(x[i + half]);
        x[i] = from_float<floatX>(x0 * c - x1 * s);
        x[i + half] = from_float<floatX>(x1 * c + x0 * s);
    }
}

void rope_cuda(floatX* qkv, int B, int T, int NH, int NKV, int HS, TokenLayout pos,
               const int* row_pos, RopeSpec rope, int direction, cudaStream_t stream) {
    const long N = (long)B * T;
    if (N <= 0 || HS < 2) return;
    CHECK(HS % 2 == 0 && rope.theta >= 2, "caller bug", "rope_cuda: head size %d, theta %d", HS,
          rope.theta);
    const long threads = N * (HS / 2);
    LAUNCH(rope_kernel, (unsigned)ceil_div_long(threads, ROPE_THREADS), ROPE_THREADS, 0, stream, qkv,
           N, T, NH + NKV, (NH + 2 * NKV) * HS, HS, pos, row_pos, rope, direction > 0 ? 1.0f : -1.0f);
}
