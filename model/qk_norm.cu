// QK-norm forward and backward (GPTConfig.qk_norm): twins of qk_norm_forward / qk_norm_backward
// in model/layers.c. Every query and key head of the qkv activations, HS channels at a stride of
// W = (NH + 2 NKV) HS per token, is one row of a LayerNorm (or RMSNorm: the template flag RMS, no
// mean, no bias) whose weight (and bias) is the queries' or the keys' of the layer. Row r = n H +
// j (H = NH + NKV) is head j of token n: qkv + n W + j HS, and raw + r HS for its saved copy.
//
// Forward: one warp per row, in place (a lane holds its channels c = lane + 32 i in registers:
// HS <= 32 QK_LANE_VALUES), the raw row copied out for backward; the statistics as the LayerNorm
// kernels take them (mean, then the two-pass variance; RMSNorm: the mean square).
// Backward: one block per QK_BWD_TOKENS tokens (all their heads: model/layer_scratch.h); warp w
// takes the block's rows w, w + QK_BWD_WARPS, ..., overwrites each row's gradient in place (the
// row sums are warp reductions) and keeps its share of the four parameter gradients per lane;
// the warps' shares are added in warp order into the block's partial row, and a second launch
// adds the blocks' partials in block order into dqw, dqb, dkw, dkb. Everything fixed-order:
// bitwise reproducible, on any GPU.
#include "model/layers_cuda.cuh"

static constexpr int QK_LANE_VALUES = 8;   // channels per lane: HS <= 256
static constexpr int QK_MAX_HS = 32 * QK_LANE_VALUES;
static constexpr int QK_FWD_WARPS = 8;
static constexpr int QK_BWD_WARPS = 8;
static constexpr int QK_SUM_THREADS = 256;

template <bool RMS>
__global__ void qk_norm_forward_kernel(floatX* qkv, floatX* raw, float* mean, float* rstd,
                                       const floatX* qw, const floatX* qb, const floatX* kw,
                                       const floatX* kb, long rows, int NH, int H, long W, int HS,
                                       float eps) {
    const int lane = threadIdx.x % 32;
    const long r = (long)blockIdx.x * QK_FWD_WARPS + threadIdx.x / 32;
    if (r >= rows) return;  // the whole warp
    const int j = (int)(r % H);
    floatX* x = qkv + (r / H) * W + (long)j * HS;
    floatX* saved = raw + r * HS;
    const floatX* w = j < NH ? qw : kw;
    const floatX* b = j < NH ? qb : kb;
    float v[QK_LANE_VALUES];
    float sum = 0.0f;  // of x (LayerNorm) or x^2 (RMSNorm)
    UNROLL
    for (int i = 0; i < QK_LANE_VALUES; i++) {
        const int c = lane + 32 * i;
        v[i] = 0.0f;
        if (c >= HS) continue;
        saved[c] = x[c];
        v[i] = to_float(x[c]);
        sum += RMS ? v[i] * v[i] : v[i];
    }
    float m = 0.0f, s;
    if (RMS) {
        s = rsqrtf(warp_sum(sum) / HS + eps);
    } else {
        m = warp_sum(sum) / HS;
        float var = 0.0f;
        UNROLL
        for (int i = 0; i < QK_LANE_VALUES; i++)
            if (lane + 32 * i < HS) var += (v[i] - m) * (v[i] - m);
        s = rsqrtf(warp_sum(var) / HS + eps);
    }
    UNROLL
    for (int i = 0; i < QK_LANE_VALUES; i++) {
        const int c = lane + 32 * i;
        if (c >= HS) continue;
        const float o = (v[i] - m) * s * to_float(w[c]) + (RMS ? 0.0f : to_float(b[c]));
        x[c] = from_float<floatX>(o);
    }
    if (lane == 0) {
        if (!RMS) mean[r] = m;
        rstd[r] = s;
    }
}

// partial: per block 4 HS floats, the block's dqw, dqb, dkw, dkb (the biases' rows unused under
// RMS).
template <bool RMS>
__global__ void qk_norm_backward_kernel(floatX* dqkv, float* partial, const floatX* raw,
                                        const floatX* qw, const floatX* kw, const float* mean,
                                        const float* rstd, long rows, int NH, int H, long W, int HS) {
    __shared__ float shares[QK_BWD_WARPS][4][QK_MAX_HS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float dw[2][QK_LANE_VALUES], db[2][QK_LANE_VALUES];
    UNROLL
    for (int i = 0; i < QK_LANE_VALUES; i++) dw[0][i] = dw[1][i] = db[0][i] = db[1][i] = 0.0f;
    const long r0 = (long)blockIdx.x * QK_BWD_TOKENS * H;
    const long r1 = min(rows, r0 + (long)QK_BWD_TOKENS * H);
    const float inv_hs = 1.0f / HS;
    for (long r = r0 + warp; r < r1; r += QK_BWD_WARPS) {
        const int j = (int)(r % H), k = j < NH ? 0 : 1;
        floatX* g = dqkv + (r / H) * W + (long)j * HS;
        const floatX* x = raw + r * HS;
        const floatX* w = k ? kw : qw;
        const float m = RMS ? 0.0f : mean[r], s = rstd[r];
        float gv[QK_LANE_VALUES], xh[QK_LANE_VALUES], wv[QK_LANE_VALUES];
        float p1 = 0.0f, p2 = 0.0f;  // sums of dn = g w and of dn xhat
        UNROLL
        for (int i = 0; i < QK_LANE_VALUES; i++) {
            const int c = lane + 32 * i;
            gv[i] = xh[i] = wv[i] = 0.0f;
            if (c >= HS) continue;
            gv[i] = to_float(g[c]);
            wv[i] = to_float(w[c]);
            xh[i] = (to_float(x[c]) - m) * s;
            const float dn = gv[i] * wv[i];
            p1 += dn;
            p2 += dn * xh[i];
            dw[k][i] += gv[i] * xh[i];
            db[k][i] += gv[i];
        }
        const float mean_dn = RMS ? 0.0f : warp_sum(p1) * inv_hs;
        const float mean_dnx = warp_sum(p2) * inv_hs;
        UNROLL
        for (int i = 0; i < QK_LANE_VALUES; i++) {
            const int c = lane + 32 * i;
            if (c < HS) g[c] = from_float<floatX>((gv[i] * wv[i] - mean_dn - xh[i] * mean_dnx) * s);
        }
    }
    UNROLL
    for (int i = 0; i < QK_LANE_VALUES; i++) {
        const int c = lane + 32 * i;
        if (c >= HS) continue;
        shares[warp][0][c] = dw[0][i];
        shares[warp][1][c] = db[0][i];
        shares[warp][2][c] = dw[1][i];
        shares[warp][3][c] = db[1][i];
    }
    __syncthreads();
    for (int t = threadIdx.x; t < 4 * HS; t += blockDim.x) {
        float sum = 0.0f;
        for (int wi = 0; wi < QK_BWD_WARPS; wi++) sum += shares[wi][t / HS][t % HS];
        partial[(long)blockIdx.x * 4 * HS + t] = sum;
    }
}

// Column t of the partials (t / HS: dqw, dqb, dkw, dkb) summed over the blocks in block order,
// written or added into its gradient (NULL: none, the biases under RMSNorm).
__global__ void qk_norm_sum_kernel(floatX* dqw, floatX* dqb, floatX* dkw, floatX* dkb,
                                   const float* partial, int blocks, int HS, int accumulate) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= 4 * HS) return;
    floatX* dst[4] = {dqw, dqb, dkw, dkb};
    floatX* d = dst[t / HS];
    if (!d) return;
    float sum = 0.0f;
    for (int b = 0; b < blocks; b++) sum += partial[(long)b * 4 * HS + t];
    const int c = t % HS;
    d[c] = from_float<floatX>(accumulate ? to_float(d[c]) + sum : sum);
}

static void check_head_size(const char* name, int HS) {
    if (HS < 1 || HS > QK_MAX_HS)
        FAIL("QK-norm's kernels hold a head in one warp's registers", "%s: head size %d, expected "
             "1 to %d", name, HS, QK_MAX_HS);
}

void qk_norm_forward_cuda(floatX* qkv, floatX* raw, float* mean, float* rstd, const floatX* qw,
                          const floatX* qb, const floatX* kw, const floatX* kb, int N, int NH,
                          int NKV, int HS, float eps, cudaStream_t stream) {
    check_head_size("qk_norm_forward_cuda", HS);
    const long rows = (long)N * (NH + NKV), W = (long)(NH + 2 * NKV) * HS;
    if (rows <= 0) return;
    const unsigned grid = (unsigned)ceil_div_long(rows, QK_FWD_WARPS);
    if (mean)
        LAUNCH((qk_norm_forward_kernel<false>), grid, QK_FWD_WARPS * 32, 0, stream, qkv, raw, mean,
               rstd, qw, qb, kw, kb, rows, NH, NH + NKV, W, HS, eps);
    else
        LAUNCH((qk_norm_forward_kernel<true>), grid, QK_FWD_WARPS * 32, 0, stream, qkv, raw, mean,
               rstd, qw, qb, kw, kb, rows, NH, NH + NKV, W, HS, eps);
}

void qk_norm_backward_cuda(floatX* dqkv, floatX* dqw, floatX* dqb, floatX* dkw, floatX* dkb,
                           void* scratch, const floatX* raw, const floatX* qw, const floatX* kw,
                           const float* mean, const float* rstd, int N, int NH, int NKV, int HS,
                           int accumulate, cudaStream_t stream) {
    check_head_size("qk_norm_backward_cuda", HS);
    const long rows = (long)N * (NH + NKV), W = (long)(NH + 2 * NKV) * HS;
    if (rows <= 0) return;
    const int blocks = (int)ceil_div_long(N, QK_BWD_TOKENS);
    float* partial = (float*)scratch;
    if (mean)
        LAUNCH((qk_norm_backward_kernel<false>), blocks, QK_BWD_WARPS * 32, 0, stream, dqkv, partial,
               raw, qw, kw, mean, rstd, rows, NH, NH + NKV, W, HS);
    else
        LAUNCH((qk_norm_backward_kernel<true>), blocks, QK_BWD_WARPS * 32, 0, stream, dqkv, partial,
               raw, qw, kw, mean, rstd, rows, NH, NH + NKV, W, HS);
    LAUNCH(qk_norm_sum_kernel, (unsigned)ceil_div_long(4 * HS, QK_SUM_THREADS), QK_SUM_THREADS, 0,
           stream, dqw, mean ? dqb : nullptr, dkw, mean ? dkb : nullptr, partial, blocks, HS,
           accumulate);
}
