// The LM head's loss: softmax + cross-entropy + gradient over the vocabulary in one kernel, and
// the sum of the per-token losses on the device (contracts in model/matmul_cuda.cuh; CPU twins
// crossentropy_forward and crossentropy_forward_backward in model/layers.c).
//
// One block per row. Pass 1 reads the row once with 16-byte loads and keeps a running (max, sum
// of exp) per thread, rescaling the sum when the max grows (online softmax, fp32); each warp
// merges its lanes' pairs by a butterfly, and then every warp merges the warps' pairs by the same
// butterfly (5 merges a thread, not one per warp). Pass 2 re-reads the row (from L2: a 50304-wide
// bf16 row is 100 KB) and overwrites it with dloss * (exp(z - lse) g - onehot), g = 1 + 2 c lse
// under the z-loss c lse^2 (g = 1 exactly without it, lse finite). The probabilities are never
// stored, so HBM traffic is one read and one write of the logits.
#include "model/matmul_cuda.cuh"

#include <float.h>
#include <stdint.h>

// 1024 threads, 2 blocks per SM: at most 2 x 132 rows in flight on an H100, 27 MB of bf16 rows
// at Vp = 50304, so pass 2's re-read hits the 50 MB L2 (4 blocks of 512 would need 53 MB).
// A narrower row gets fewer threads: one 16-byte chunk each, in whole warps.
enum { CLS_THREADS = 1024, CLS_WARPS = CLS_THREADS / 32, CLS_MIN_BLOCKS = 2 };

static int classifier_threads(int Vp) {
    const int chunks = Vp / X128_ELEMS, threads = (chunks + 31) / 32 * 32;
    return threads < CLS_THREADS ? threads : CLS_THREADS;
}

// (m, s) <- the pair describing the union of the sets described by (m, s) and (m2, s2), where a
// pair means sum(exp(z - m)) = s. Symmetric, so every lane of a butterfly gets the same result.
__device__ __forceinline__ void maxsum_merge(float& m, float& s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

// Every lane of the warp <- the merge of the warp's 32 pairs (the same tree on every lane).
__device__ __forceinline__ void butterfly_maxsum(float& m, float& s) {
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        maxsum_merge(m, s, m2, s2);
    }
}

__global__ void __launch_bounds__(CLS_THREADS, CLS_MIN_BLOCKS)
    classifier_kernel(floatX* logits, float* losses, const int* targets, float dloss, int V, int Vp,
                      int write_dlogits, float z_coef, float* z_losses) {
    __shared__ float warp_m[CLS_WARPS], warp_s[CLS_WARPS];
    const int threads = blockDim.x, warps = threads / 32;
    floatX* z = logits + (size_t)blockIdx.x * Vp;
    const int target = targets[blockIdx.x];
    const bool target_ok = target >= 0 && target < V;
    // The target's logit, read before the barrier after which pass 2 overwrites the row.
    const float z_target = threadIdx.x == 0 && target_ok ? to_float(z[target]) : 0.0f;

    // Pass 1: per-thread online max and sum of exp over this thread's 16-byte chunks.
    float m = -FLT_MAX, s = 0.0f;
    for (int i = threadIdx.x * X128_ELEMS; i < V; i += threads * X128_ELEMS) {
        const x128 x = load128(z + i);
        float v[X128_ELEMS];
        float chunk_max = -FLT_MAX;
        for (int k = 0; k < X128_ELEMS; k++) {
            v[k] = to_float(x.v[k]);
            if (i + k < V) chunk_max = fmaxf(chunk_max, v[k]);
        }
        if (chunk_max > m) {
            s *= __expf(m - chunk_max);
            m = chunk_max;
        }
        for (int k = 0; k < X128_ELEMS; k++)
            if (i + k < V) s += __expf(v[k] - m);
    }
    butterfly_maxsum(m, s);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        warp_m[warp] = m;
        warp_s[warp] = s;
    }
    __syncthreads();
    // Lane l of every warp takes warp l's pair (an empty pair past the last warp), and every warp
    // runs the same butterfly: every thread gets the same bits, without a second barrier.
    m = lane < warps ? warp_m[lane] : -FLT_MAX;
    s = lane < warps ? warp_s[lane] : 0.0f;
    butterfly_maxsum(m, s);
    const float lse = m + logf(s);
    if (threadIdx.x == 0) losses[blockIdx.x] = target_ok ? lse - z_target : __int_as_float(0x7fc00000);
    if (threadIdx.x == 0 && z_coef > 0.0f) z_losses[blockIdx.x] = z_coef * lse * lse;
    if (!write_dlogits) return;
    // d(c lse^2)/dz = 2 c lse softmax(z): the softmax's factor, exactly 1 without the z-loss
    // (lse finite; an infinite one makes the row NaN either way: the step is not applied).
    const float g = 1.0f + 2.0f * z_coef * lse;

    // Pass 2: dlogits over the row, 0 on the padded columns (whose values are never used).
    for (int i = threadIdx.x * X128_ELEMS; i < Vp; i += threads * X128_ELEMS) {
        x128 x;
        if (i < V) x = load128(z + i);
        x128 out;
        for (int k = 0; k < X128_ELEMS; k++) {
            const int col = i + k;
            float d = 0.0f;
            if (col < V)
                d = dloss * (__expf(to_float(x.v[k]) - lse) * g - (col == target ? 1.0f : 0.0f));
            out.v[k] = from_float<floatX>(d);
        }
        store128(z + i, out);
    }
}

void classifier_forward_backward_cuda(floatX* logits, float* losses, const int* targets,
                                      float dloss, int N, int V, int Vp, int write_dlogits,
                                      float z_coef, float* z_losses, cudaStream_t stream) {
    CHECK(N >= 0 && V > 0 && V <= Vp && Vp % X128_ELEMS == 0, "pad the vocabulary to a multiple of 128",
          "classifier_forward_backward_cuda: bad shape N=%d V=%d Vp=%d (need 0 < V <= Vp, Vp %% %d == 0)",
          N, V, Vp, (int)X128_ELEMS);
    CHECK((uintptr_t)logits % 16 == 0, "caller bug",
          "classifier_forward_backward_cuda: logits must be 16-byte aligned");
    CHECK(z_coef >= 0.0f && (z_coef == 0.0f || z_losses), "caller bug",
          "classifier_forward_backward_cuda: z-loss coefficient %g (need >= 0, with z_losses)",
          (double)z_coef);
    if (N == 0) return;
    LAUNCH(classifier_kernel, N, classifier_threads(Vp), 0, stream, logits, losses, targets, dloss, V, Vp,
           write_dlogits, z_coef, z_losses);
}

// --- The losses' sum -----------------------------------------------------------------------------

enum { LOSS_SUM_THREADS = 256 };

// *sum += sum of losses[0, N), in a fixed order: thread i adds elements i, i + 256, ... in double,
// a butterfly inside each warp (every lane gets the same value), then the warps' sums in order.
// One block: a micro-batch has thousands of tokens, not millions.
__global__ void __launch_bounds__(LOSS_SUM_THREADS)
    loss_sum_kernel(double* sum, const float* losses, int N) {
    __shared__ double warp_sums[LOSS_SUM_THREADS / 32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < N; i += LOSS_SUM_THREADS) acc += losses[i];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x != 0) return;
    double total = 0.0;
    for (int w = 0; w < LOSS_SUM_THREADS / 32; w++) total += warp_sums[w];
    *sum += total;
}

void loss_sum_cuda(double* sum, const float* losses, int N, cudaStream_t stream) {
    CHECK(N >= 0, "caller bug", "loss_sum_cuda: %d losses", N);
    if (N == 0) return;
    LAUNCH(loss_sum_kernel, 1, LOSS_SUM_THREADS, 0, stream, sum, losses, N);
}
