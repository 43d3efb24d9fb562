// LayerNorm and RMSNorm forward (optionally fused with the residual add before it) and backward:
// twins of layernorm_forward / layernorm_backward, rmsnorm_forward / rmsnorm_backward (+
// residual_forward) in model/layers.c. RMSNorm is the same kernels with the template flag RMS:
// no mean computed or subtracted (xhat = x * rstd), no bias, and a backward without the mean(dout
// * w) term or dbias, so the two norms share one tested code path instead of two copies.
//
// Forward: one warp per row. The row (a + b when fused) goes once from global memory into the
// warp's slice of shared memory; the mean, the two-pass variance and the output read it from
// there (RMSNorm: the sum of squares is taken as the row is staged, the output alone reads it
// back). Each lane only ever reads back the vectors it stored itself, so no barrier is needed.
//
// Backward: one block per group of consecutive rows; thread t owns the channel chunks
// t, t + blockDim, ... (CPT chunks of VEC channels) for every row of the group, so its shares of
// dweight and dbias stay in registers. LN_BWD_ROWS / CPT rows are processed per step: their two row
// sums (of dout*w and dout*w*xhat; RMSNorm: only the second) are block reductions (warp shuffles,
// then the per-warp values added in warp order), after which each thread updates dinp for its
// channels. The block's dweight/dbias partials go to scratch; the last blocks to finish add the
// partials in block order and accumulate into dweight and dbias. Everything is fixed-order:
// bitwise reproducible.
#include "model/layers_cuda.cuh"

static constexpr int LN_FWD_WARPS = 4;            // rows per block (at most; fewer when a row is large)
static constexpr int LN_SMEM_DEFAULT = 48 * 1024; // dynamic shared memory available without opting in
static constexpr int LN_BWD_MAX_THREADS = 512;
// LN_BWD_ROWS, LN_BWD_TARGET_BLOCKS, LN_BWD_GROUP and the scratch layout: model/layer_scratch.h.

// --- Forward ----------------------------------------------------------------------------------------

// FUSED: x = a + b is rounded to floatX, written to residual_out and normalised. Otherwise x = a
// (b and residual_out unused). RMS: out = x * rstd * weight with rstd = 1 / sqrt(mean(x^2) + eps),
// from the sum of squares of the first pass alone (no second pass); mean and bias unused (may be
// NULL).
template <int VEC, bool FUSED, bool RMS>
__global__ void layernorm_forward_kernel(floatX* residual_out, floatX* out, float* mean, float* rstd,
                                         const floatX* a, const floatX* b, const floatX* weight,
                                         const floatX* bias, int N, int C, float eps) {
    DYNAMIC_SHARED(floatX, smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + warp;
    if (row >= N) return;  // the whole warp
    floatX* xs = smem + (size_t)warp * C;
    const long base = (long)row * C;

    float sum = 0.0f;  // of x (LayerNorm) or x^2 (RMSNorm)
    for (int c = lane * VEC; c < C; c += 32 * VEC) {
        PackX<VEC> x = load_packx<VEC>(a + base + c);
        if (FUSED) {
            const PackX<VEC> y = load_packx<VEC>(b + base + c);
            UNROLL
            for (int k = 0; k < VEC; k++) x.v[k] = from_float<floatX>(to_float(x.v[k]) + to_float(y.v[k]));
            store_packx<VEC>(residual_out + base + c, x);
        }
        store_packx<VEC>(xs + c, x);
        UNROLL
        for (int k = 0; k < VEC; k++) {
            const float v = to_float(x.v[k]);
            sum += RMS ? v * v : v;
        }
    }

    float m = 0.0f, s;
    if (RMS) {
        s = rsqrtf(warp_sum(sum) / C + eps);
    } else {
        m = warp_sum(sum) / C;
        float var = 0.0f;
        for (int c = lane * VEC; c < C; c += 32 * VEC) {
            const PackX<VEC> x = load_packx<VEC>(xs + c);
            UNROLL
            for (int k = 0; k < VEC; k++) {
                const float d = to_float(x.v[k]) - m;
                var += d * d;
            }
        }
        s = rsqrtf(warp_sum(var) / C + eps);
    }

    for (int c = lane * VEC; c < C; c += 32 * VEC) {
        const PackX<VEC> x = load_packx<VEC>(xs + c);
        const PackX<VEC> w = load_packx<VEC>(weight + c);
        PackX<VEC> o;
        if (RMS) {
            UNROLL
            for (int k = 0; k < VEC; k++) o.v[k] = from_float<floatX>(to_float(x.v[k]) * s * to_float(w.v[k]));
        } else {
            const PackX<VEC> bb = load_packx<VEC>(bias + c);
            UNROLL
            for (int k = 0; k < VEC; k++)
                o.v[k] = from_float<floatX>((to_float(x.v[k]) - m) * s * to_float(w.v[k]) + to_float(bb.v[k]));
        }
        store_packx<VEC>(out + base + c, o);
    }
    if (lane == 0) {
        if (!RMS) mean[row] = m;
        rstd[row] = s;
    }
}

template <int VEC, bool FUSED, bool RMS>
static void launch_layernorm_forward(floatX* residual_out, floatX* out, float* mean, float* rstd,
                                     const floatX* a, const floatX* b, const floatX* weight,
                                     const floatX* bias, int N, int C, float eps,
                                     cudaStream_t stream) {
    const size_t row_bytes = (size_t)C * sizeof(floatX);
    int rows = LN_FWD_WARPS;
    while (rows > 1 && rows * row_bytes > LN_SMEM_DEFAULT) rows--;
    const size_t smem = rows * row_bytes;
    if (smem > LN_SMEM_DEFAULT)  // one row over 48 KiB (C > 24576 in bf16): opt in, up to 227 KiB
        CUDA_RAISE_DYNAMIC_SMEM((layernorm_forward_kernel<VEC, FUSED, RMS>), smem, "channels", C);
    const unsigned grid = (unsigned)ceil_div_long(N, rows);
    LAUNCH((layernorm_forward_kernel<VEC, FUSED, RMS>), grid, rows * 32, smem, stream, residual_out, out,
           mean, rstd, a, b, weight, bias, N, C, eps);
}

// The x128 path where C is a multiple of the vector and every pointer given is 16-byte aligned
// (NULL counts as aligned: RMSNorm has no bias; the unfused forms no b, residual_out).
template <bool FUSED, bool RMS>
static void norm_forward(floatX* residual_out, floatX* out, float* mean, float* rstd, const floatX* a,
                         const floatX* b, const floatX* weight, const floatX* bias, int N, int C,
                         float eps, cudaStream_t stream) {
    if (N <= 0) return;
    if (C % X128_ELEMS == 0 && aligned16(residual_out) && aligned16(out) && aligned16(a) && aligned16(b) &&
        aligned16(weight) && aligned16(bias))
        launch_layernorm_forward<X128_ELEMS, FUSED, RMS>(residual_out, out, mean, rstd, a, b, weight, bias,
                                                         N, C, eps, stream);
    else
        launch_layernorm_forward<1, FUSED, RMS>(residual_out, out, mean, rstd, a, b, weight, bias, N, C,
                                                eps, stream);
}

void layernorm_forward_cuda(floatX* out, float* mean, float* rstd, const floatX* inp,
                            const floatX* weight, const floatX* bias, int N, int C, float eps,
                            cudaStream_t stream) {
    norm_forward<false, false>(nullptr, out, mean, rstd, inp, nullptr, weight, bias, N, C, eps, stream);
}

void fused_residual_layernorm_forward_cuda(floatX* residual_out, floatX* out, float* mean,
                                           float* rstd, const floatX* a, const floatX* b,
                                           const floatX* weight, const floatX* bias, int N, int C,
                                           float eps, cudaStream_t stream) {
    norm_forward<true, false>(residual_out, out, mean, rstd, a, b, weight, bias, N, C, eps, stream);
}

void rmsnorm_forward_cuda(floatX* out, float* rstd, const floatX* inp, const floatX* weight, int N, int C,
                          float eps, cudaStream_t stream) {
    norm_forward<false, true>(nullptr, out, nullptr, rstd, inp, nullptr, weight, nullptr, N, C, eps,
                              stream);
}

void fused_residual_rmsnorm_forward_cuda(floatX* residual_out, floatX* out, float* rstd, const floatX* a,
                                         const floatX* b, const floatX* weight, int N, int C,
                                         float eps, cudaStream_t stream) {
    norm_forward<true, true>(residual_out, out, nullptr, rstd, a, b, weight, nullptr, N, C, eps, stream);
}

// --- Backward ---------------------------------------------------------------------------------------

template <int VEC> __device__ __forceinline__ PackX<VEC> zero_packx() {
    PackX<VEC> z;
    UNROLL
    for (int k = 0; k < VEC; k++) z.v[k] = from_float<floatX>(0.0f);
    return z;
}

// Rows [first, first + count * row_step) step row_step of the (., width) fp32 partials summed in
// row order, 4 columns per thread where C % 4 == 0 (16-byte loads; rows are then 16-byte aligned).
// width: 2C (LayerNorm: dweight's C columns, then dbias's) or C (RMSNorm: dweight's alone). To
// partial row `first` (a group's sum), or rounded into dweight (columns < C) and dbias, written or
// added. __ldcg: the rows were written by other blocks, read past L1.
__device__ void ln_sum_partials(float* partial, int first, int count, int row_step, int C, int width,
                                bool final, floatX* dweight, floatX* dbias, bool accumulate) {
    const int step = C % 4 == 0 ? 4 : 1;
    for (long col = (long)threadIdx.x * step; col < width; col += (long)blockDim.x * step) {
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int g = 0; g < count; g++) {
            const float* row = partial + (long)(first + g * row_step) * width + col;
            if (step == 4) {
                const float4 x = __ldcg(reinterpret_cast<const float4*>(row));
                s[0] += x.x, s[1] += x.y, s[2] += x.z, s[3] += x.w;
            } else {
                s[0] += __ldcg(row);
            }
        }
        for (int k = 0; k < step; k++) {
            if (!final) {
                partial[(long)first * width + col + k] = s[k];
                continue;
            }
            floatX* dst = col + k < C ? dweight + col + k : dbias + (col + k - C);
            *dst = from_float<floatX>(accumulate ? to_float(*dst) + s[k] : s[k]);
        }
    }
}

// Whether this block is the last of `expected` to arrive at *counter (then reset to 0 for the
// next call). The fences order the arrivals' partial stores before the ticket, and the last
// block's reads after it. Called by every thread of the block.
__device__ bool ln_last_arrival(unsigned* counter, unsigned expected) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(counter, 1u) == expected - 1;
        if (last) *counter = 0;  // every other block of this launch has counted already
    }
    __syncthreads();
    if (last) __threadfence();
    return last;
}

// Block b handles rows [b * rows_per_block, min(N, (b + 1) * rows_per_block)) and writes its
// dweight partial to partial[b * W + c] and (LayerNorm) its dbias partial to partial[b * W + C + c],
// W = 2C (LayerNorm) or C (RMSNorm); then the group and final reductions above (counters: one per
// group, then the final one). RMS: xhat = x * rstd (mean unused, may be NULL), dinp += (dout * w -
// xhat * mean(dout * w * xhat)) * rstd, one block reduction per row instead of two, no dbias.
// Registers: per step a thread holds R rows x CPT chunks of dout and inp (R * CPT = 4 chunks, or
// CPT when CPT > 4), its weights (packed floatX) and 2 * CPT * VEC fp32 accumulators (CPT * VEC
// under RMS); dinp is loaded after the block reduction.
template <int VEC, int CPT, bool RMS>
__global__ void __launch_bounds__(LN_BWD_MAX_THREADS)
    layernorm_backward_kernel(floatX* dinp, floatX* dweight, floatX* dbias, float* partial,
                              unsigned* counters, const floatX* dout, const floatX* inp,
                              const floatX* weight, const float* mean, const float* rstd, int N, int C,
                              int rows_per_block, int accumulate) {
    constexpr int R = LN_BWD_ROWS / CPT > 1 ? LN_BWD_ROWS / CPT : 1;  // rows per step
    static_assert(LN_BWD_ROWS % R == 0, "rows_per_block (a multiple of LN_BWD_ROWS) must be a multiple of R");
    // Row sums per row: mean(dn) and mean(dn * xhat) (LayerNorm), or the second alone (RMSNorm);
    // the last slot of a row's NS is always dn * xhat's.
    constexpr int NS = RMS ? 1 : 2;
    __shared__ float red[2][LN_BWD_MAX_THREADS / 32][NS * R];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;

    int c0[CPT];
    bool own[CPT];
    PackX<VEC> w[CPT];
    float dw[CPT][VEC], db[CPT][VEC];
    UNROLL
    for (int k = 0; k < CPT; k++) {
        c0[k] = (threadIdx.x + k * blockDim.x) * VEC;
        own[k] = c0[k] < C;
        w[k] = own[k] ? load_packx<VEC>(weight + c0[k]) : zero_packx<VEC>();
        UNROLL
        for (int v = 0; v < VEC; v++) {
            dw[k][v] = 0.0f;
            db[k][v] = 0.0f;
        }
    }
    const float inv_c = 1.0f / C;
    const int r_begin = blockIdx.x * rows_per_block;
    const int r_end = min(N, r_begin + rows_per_block);

    int buf = 0;
    for (int r = r_begin; r < r_end; r += R) {  // the same trip count for every thread
        PackX<VEC> g[R][CPT], x[R][CPT];
        float m[R], s[R];
        UNROLL
        for (int j = 0; j < R; j++) {
            const bool valid = r + j < r_end;
            const long base = (long)(r + j) * C;
            m[j] = valid && !RMS ? mean[r + j] : 0.0f;
            s[j] = valid ? rstd[r + j] : 0.0f;
            UNROLL
            for (int k = 0; k < CPT; k++) {
                const bool ld = valid && own[k];
                g[j][k] = ld ? load_packx<VEC>(dout + base + c0[k]) : zero_packx<VEC>();
                x[j][k] = ld ? load_packx<VEC>(inp + base + c0[k]) : zero_packx<VEC>();
            }
        }
        // Row sums of dnorm = dout * w and dnorm * xhat over this thread's channels, then the block.
        float part[NS * R];
        UNROLL
        for (int j = 0; j < R; j++) {
            float p1 = 0.0f, p2 = 0.0f;
            UNROLL
            for (int k = 0; k < CPT; k++) {
                UNROLL
                for (int v = 0; v < VEC; v++) {
                    const float xv = to_float(x[j][k].v[v]);
                    const float dn = to_float(g[j][k].v[v]) * to_float(w[k].v[v]);
                    p1 += dn;
                    p2 += dn * (RMS ? xv * s[j] : (xv - m[j]) * s[j]);
                }
            }
            if (!RMS) part[NS * j] = p1;
            part[NS * j + NS - 1] = p2;
        }
        UNROLL
        for (int i = 0; i < NS * R; i++) part[i] = warp_sum(part[i]);
        if (lane == 0) {
            UNROLL
            for (int i = 0; i < NS * R; i++) red[buf][warp][i] = part[i];
        }
        __syncthreads();
        // red[buf] is rewritten two steps later, after every thread has passed the next barrier
        // and so has finished reading it here.
        float tot[NS * R];
        UNROLL
        for (int i = 0; i < NS * R; i++) tot[i] = 0.0f;
        for (int wi = 0; wi < nwarps; wi++) {
            UNROLL
            for (int i = 0; i < NS * R; i++) tot[i] += red[buf][wi][i];
        }
        buf ^= 1;

        UNROLL
        for (int j = 0; j < R; j++) {
            const bool valid = r + j < r_end;
            const float mean_dn = RMS ? 0.0f : tot[NS * j] * inv_c, mean_dnx = tot[NS * j + NS - 1] * inv_c;
            const long base = (long)(r + j) * C;
            UNROLL
            for (int k = 0; k < CPT; k++) {
                if (!(valid && own[k])) continue;
                PackX<VEC> d = load_packx<VEC>(dinp + base + c0[k]);
                UNROLL
                for (int v = 0; v < VEC; v++) {
                    const float gv = to_float(g[j][k].v[v]);
                    const float xv = to_float(x[j][k].v[v]);
                    const float dn = gv * to_float(w[k].v[v]);
                    if (RMS) {
                        const float xhat = xv * s[j];
                        d.v[v] = from_float<floatX>(to_float(d.v[v]) + (dn - xhat * mean_dnx) * s[j]);
                        dw[k][v] += gv * xhat;
                    } else {
                        const float xhat = (xv - m[j]) * s[j];
                        d.v[v] = from_float<floatX>(to_float(d.v[v]) + (dn - mean_dn - xhat * mean_dnx) * s[j]);
                        dw[k][v] += gv * xhat;
                        db[k][v] += gv;
                    }
                }
                store_packx<VEC>(dinp + base + c0[k], d);
            }
        }
    }

    const int width = RMS ? C : 2 * C;  // partial row: dweight (and dbias)
    float* pw = partial + (long)blockIdx.x * width;
    float* pb = pw + C;
    UNROLL
    for (int k = 0; k < CPT; k++) {
        if (!own[k]) continue;
        if (VEC % 4 == 0) {  // c0 and C are multiples of 4: 16-byte stores
            UNROLL
            for (int v = 0; v < VEC; v += 4) {
                *reinterpret_cast<float4*>(pw + c0[k] + v) = make_float4(dw[k][v], dw[k][v + 1], dw[k][v + 2], dw[k][v + 3]);
                if (!RMS)
                    *reinterpret_cast<float4*>(pb + c0[k] + v) = make_float4(db[k][v], db[k][v + 1], db[k][v + 2], db[k][v + 3]);
            }
        } else {
            UNROLL
            for (int v = 0; v < VEC; v++) {
                pw[c0[k] + v] = dw[k][v];
                if (!RMS) pb[c0[k] + v] = db[k][v];
            }
        }
    }

    const int G = gridDim.x, group = blockIdx.x / LN_BWD_GROUP, ngroups = (G + LN_BWD_GROUP - 1) / LN_BWD_GROUP;
    const int first = group * LN_BWD_GROUP, members = min(LN_BWD_GROUP, G - first);
    if (!ln_last_arrival(counters + group, members)) return;
    ln_sum_partials(partial, first, members, 1, C, width, ngroups == 1, dweight, dbias, accumulate);
    if (ngroups == 1 || !ln_last_arrival(counters + ngroups, ngroups)) return;
    ln_sum_partials(partial, 0, ngroups, LN_BWD_GROUP, C, width, true, dweight, dbias, accumulate);
}

template <int VEC, int CPT, bool RMS>
static void launch_layernorm_backward(int threads, int blocks, int rpb, floatX* dinp, floatX* dweight,
                                      floatX* dbias, float* partial, unsigned* counters,
                                      const floatX* dout, const floatX* inp, const floatX* weight,
                                      const float* mean, const float* rstd, int N, int C, int accumulate,
                                      cudaStream_t stream) {
    LAUNCH((layernorm_backward_kernel<VEC, CPT, RMS>), blocks, threads, 0, stream, dinp, dweight, dbias,
           partial, counters, dout, inp, weight, mean, rstd, N, C, rpb, accumulate);
}

// The one launcher of both norms' backward (name: the public function, for its errors). RMSNorm's
// partials are C wide instead of 2C, at the same offset, and its tickets where LayerNorm's are:
// layernorm_backward_scratch_bytes(N, C) covers both.
template <bool RMS>
static void norm_backward(const char* name, floatX* dinp, floatX* dweight, floatX* dbias, void* scratch,
                          const floatX* dout, const floatX* inp, const floatX* weight, const float* mean,
                          const float* rstd, int N, int C, int accumulate, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    if (!aligned16(scratch))
        FAIL("pass memory from cudaMalloc", "%s: scratch %p is not 16-byte aligned", name, scratch);
    const bool vec = C % X128_ELEMS == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) &&
                     aligned16(weight);
    const int chunks = vec ? C / X128_ELEMS : C;
    // Chunks per thread (CPT) and threads per block: the first configuration that covers the row.
    // Small blocks pack better on an SM at these register counts; x128 CPT = 4 spills, so it
    // comes last (C > 8192 in bf16). The fp32 and scalar variants use fewer registers per chunk.
    struct Config {
        int cpt, max_threads;
    };
    static const Config vec_configs[] = {{1, 256}, {2, 256}, {2, 512}, {4, 512}};
    static const Config scalar_configs[] = {{1, 256}, {2, 256}, {4, 256}, {8, 256}, {8, 512}, {16, 512}};
    const Config* configs = vec ? vec_configs : scalar_configs;
    const int n_configs = vec ? 4 : 6;
    int cpt = 0, threads = 0;
    for (int i = 0; i < n_configs && !cpt; i++) {
        const int t = (int)ceil_div_long(ceil_div_long(chunks, configs[i].cpt), 32) * 32;
        if (t <= configs[i].max_threads) cpt = configs[i].cpt, threads = t;
    }
    if (!cpt)
        FAIL("the LayerNorm and RMSNorm backward cover C <= 16384 (bf16) / 8192 (fp32, or the scalar path)",
             "%s: C = %d is too large", name, C);
    const int rpb = ln_bwd_rows_per_block(N);
    const int blocks = (int)ceil_div_long(N, rpb);
    float* partial = (float*)scratch;
    unsigned* counters = (unsigned*)((char*)scratch + ln_bwd_partial_bytes(N, C));
    if (vec) {
        switch (cpt) {
        case 1: launch_layernorm_backward<X128_ELEMS, 1, RMS>(threads, blocks, rpb, dinp, dweight, dbias, partial, counters, dout, inp, weight, mean, rstd, N, C, accumulate, stream); break;
        case 2: launch_layernorm_backward<X128_ELEMS, 2, RMS>(threads, blocks, rpb, dinp, dweight, dbias, partial, counters, dout, inp, weight, mean, rstd, N, C, accumulate, stream); break;
        default: launch_layernorm_backward<X128_ELEMS, 4, RMS>(threads, blocks, rpb, dinp, dweight, dbias, partial, counters, dout, inp, weight, mean, rstd, N, C, accumulate, stream); break;
        }
    } else {
        switch (cpt) {
        case 1: launch_layernorm_backward<1, 1, RMS>(threads, blocks, rpb, dinp, dweight, dbias, partial, counters, dout, inp, weight, mean, rstd, N, C, accumulate, stream); break;
        case 2: launch_layernorm_backward<1, 2, RMS>(threads, blocks, rpb, dinp, dweight, dbias, partial, counters, dout, inp, weight, mean, rstd, N, C, accumulate, stream); break;
        case 4: launch_layernorm_backward<1, 4, RMS>(threads, blocks, rpb, dinp, dweight, dbias, partial, counters, dout, inp, weight, mean, rstd, N, C, accumulate, stream); break;
        case 8: launch_layernorm_backward<1, 8, RMS>(threads, blocks, rpb, dinp, dweight, dbias, partial, counters, dout, inp, weight, mean, rstd, N, C, accumulate, stream); break;
        default: launch_layernorm_backward<1, 16, RMS>(threads, blocks, rpb, dinp, dweight, dbias, partial, counters, dout, inp, weight, mean, rstd, N, C, accumulate, stream); break;
        }
    }
}

void layernorm_backward_cuda(floatX* dinp, floatX* dweight, floatX* dbias, void* scratch,
                             const floatX* dout, const floatX* inp, const floatX* weight,
                             const float* mean, const float* rstd, int N, int C, int accumulate,
                             cudaStream_t stream) {
    norm_backward<false>("layernorm_backward_cuda", dinp, dweight, dbias, scratch, dout, inp, weight, mean,
                         rstd, N, C, accumulate, stream);
}

void rmsnorm_backward_cuda(floatX* dinp, floatX* dweight, void* scratch, const floatX* dout,
                           const floatX* inp, const floatX* weight, const float* rstd, int N, int C,
                           int accumulate, cudaStream_t stream) {
    norm_backward<true>("rmsnorm_backward_cuda", dinp, dweight, nullptr, scratch, dout, inp, weight, nullptr,
                        rstd, N, C, accumulate, stream);
}
