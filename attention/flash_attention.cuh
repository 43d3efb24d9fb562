// FlashAttention-2-class kernels for the bf16 build of attention/partial_attention.cu (included
// there, inside its anonymous namespace, after AttnArgs, visible_keys and first_query).
//
// Everything runs on mma.sync m16n8k16 (bf16 in, fp32 accumulate) through model/cuda_ptx.cuh:
// - S and P live in registers. The softmax works on the accumulator fragments (a lane holds rows
//   g and g+8 of its warp's 16 rows, columns 2t, 2t+1 of each 8-column tile; row statistics are
//   reduced over the 4 lanes of a group), and P is packed to bf16 in registers and used directly
//   as the A operand of P V: the C fragments of two adjacent 8-column tiles are exactly the A
//   fragment of one 16-wide k-step.
// - Operand tiles are loaded by ldmatrix from shared memory in a layout without bank conflicts:
//   for HS a multiple of 64 the 16-byte chunks of a row are XOR-swizzled by (row % 8); other head
//   sizes pad each row by 16 bytes (an odd number of chunks per row). Either way the 8 rows one
//   ldmatrix phase reads hit 8 different 16-byte bank groups.
// - K/V (forward) and Q/dO/lse/D (backward) tiles are double-buffered with cp.async: the next
//   tile is in flight while the current one is computed.
//
// Forward: a block has 8 warps and 128 query rows (16 per warp); K/V tiles of 64 keys.
// Backward: one block per split s of the key tiles (key tiles s, s + nsplit, ...); for a 64-key
// tile, 4 warps each own 16 keys and keep dK, dV in registers while the block walks the 64-query
// tiles that see the key tile: S^T = K Q^T and dP^T = V dO^T (recomputed once), dV += P^T dO,
// dK += dS^T Q, and dQ += dS K through dS^T in shared memory: the 5 GEMMs of FlashAttention-2.
// dQ without atomics: split s owns its own fp32 dQ slice (scratch) and is its only writer, or,
// with one split, the caller's dq; a second kernel adds the slices in split order. Deterministic.
#pragma once
#include "model/cuda_ptx.cuh"

constexpr int FA_FWD_BQ = 128, FA_FWD_BK = 64, FA_FWD_WARPS = 8;
constexpr int FA_BWD_BK = 64, FA_BWD_BQ = 64, FA_BWD_WARPS = 4;

// A tile of rows x HS bf16 in shared memory; element (r, 8c .. 8c+7) is chunk c of row r.
template <int HS> struct FaTile {
    static_assert(HS % 16 == 0 && HS >= 16 && HS <= 128, "HS must be a multiple of 16 in [16, 128]");
    static constexpr int CPR = HS / 8;                 // 16-byte chunks per row
    static constexpr bool SWIZZLE = CPR % 8 == 0;
    static constexpr int LD = SWIZZLE ? HS : HS + 8;   // elements per row
    static constexpr size_t bytes(int rows) { return (size_t)rows * LD * sizeof(floatX); }
    __device__ static int chunk(int r, int c) { return r * LD + (SWIZZLE ? (c ^ (r & 7)) : c) * 8; }
};

// The same for the backward's 64 x 64 dS^T tile (8 chunks per row: swizzled).
struct FaSquare {
    static constexpr int LD = FA_BWD_BQ;
    __device__ static int chunk(int r, int c) { return r * LD + (c ^ (r & 7)) * 8; }
};

// The block copies rows [0, nrows) of a rows x HS tile (source rows lds elements apart) into
// shared memory; rows >= nrows become zeros (never garbage: 0 * NaN would poison the products).
// With vec (16-byte aligned source) the copies are cp.async and land at the caller's wait.
template <int HS, int ROWS>
__device__ __forceinline__ void fa_load_tile(floatX* tile, const floatX* src, long long lds, int nrows, int vec) {
    typedef FaTile<HS> T;
    for (int idx = threadIdx.x; idx < ROWS * T::CPR; idx += blockDim.x) {
        const int r = idx / T::CPR, c = idx % T::CPR;
        floatX* dst = tile + T::chunk(r, c);
        const floatX* s = src + (long long)r * lds + c * 8;
        if (vec) {
            cp_async_16(dst, r < nrows ? s : src, r < nrows ? 16 : 0);
        } else {
            for (int e = 0; e < 8; e++) dst[e] = r < nrows ? s[e] : zero_x();
        }
    }
}

__device__ __forceinline__ void fa_mma(float d[4], const uint32_t a[4], const uint32_t* b) {
    mma_m16n8k16_bf16(d, a, b, d);
}

// d[0] += A B0, d[1] += A B1 for the two 8-column tiles of one ldmatrix.x4 of B (b[0..1], b[2..3]).
__device__ __forceinline__ void fa_mma_pair(float (*d)[4], const uint32_t a[4], const uint32_t b[4]) {
    fa_mma(d[0], a, b);
    fa_mma(d[1], a, b + 2);
}

// The A fragment (16 x 16, bf16) of two adjacent 16 x 8 fp32 accumulator tiles lo (columns
// 0..7) and hi (8..15): the same lanes hold the same rows, so it is a conversion in registers.
__device__ __forceinline__ void pack_a_fragment(uint32_t a[4], const float lo[4], const float hi[4]) {
    a[0] = pack_bf16x2(lo[0], lo[1]);
    a[1] = pack_bf16x2(lo[2], lo[3]);
    a[2] = pack_bf16x2(hi[0], hi[1]);
    a[3] = pack_bf16x2(hi[2], hi[3]);
}

// A lane's elements of a 16 x 8 accumulator tile to memory: s_lo * (v[0], v[1]) at row row_lo,
// columns c and c + 1, and s_hi * (v[2], v[3]) at row row_lo + 8, for the rows that exist. floatX
// outputs are written; fp32 ones are written or, with add, added to.
__device__ __forceinline__ void fa_put(float* p, float v, bool add) { *p = add ? *p + v : v; }
__device__ __forceinline__ void fa_put(floatX* p, float v, bool) { *p = from_float<floatX>(v); }
template <typename T>
__device__ __forceinline__ void fa_store_tile(T* out, long long ld, long long row_lo, int c, const float v[4],
                                              float s_lo, float s_hi, bool ok_lo, bool ok_hi, bool add) {
    if (ok_lo) {
        T* p = out + row_lo * ld + c;
        fa_put(p, s_lo * v[0], add);
        fa_put(p + 1, s_lo * v[1], add);
    }
    if (ok_hi) {
        T* p = out + (row_lo + 8) * ld + c;
        fa_put(p, s_hi * v[2], add);
        fa_put(p + 1, s_hi * v[3], add);
    }
}

// Max and sum over the 4 lanes of a group (the lanes that hold one row's columns).
__device__ __forceinline__ float group_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float group_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// ---- forward ------------------------------------------------------------------------------------
template <int HS> struct FaFwd {
    typedef FaTile<HS> T;
    static constexpr size_t Q = T::bytes(FA_FWD_BQ), KV = T::bytes(FA_FWD_BK);
    static constexpr size_t SMEM = Q + 4 * KV;   // Q; K and V in two stages
};

// Grid (query tiles, NH, B), latest query tiles (the most keys) first. Writes o (fp32, or floatX
// into a.ox when set) and lse.
// Two blocks (16 warps) per SM up to HS = 96 (<= 128 registers); at HS = 128 that budget spills,
// so one block of 8 warps (168 registers on sm_90).
template <int HS>
__global__ void __launch_bounds__(FA_FWD_WARPS * 32, HS <= 96 ? 2 : 1) flash_forward_kernel(const AttnArgs a) {
    typedef FaTile<HS> T;
    constexpr int BQ = FA_FWD_BQ, BK = FA_FWD_BK, NT = HS / 8;   // NT: 8-column tiles of O
    DYNAMIC_SHARED(unsigned char, smem);
    floatX* Qs = reinterpret_cast<floatX*>(smem);
    floatX* Ks = reinterpret_cast<floatX*>(smem + FaFwd<HS>::Q);   // stage st at Ks + st * BK * LD
    floatX* Vs = reinterpret_cast<floatX*>(smem + FaFwd<HS>::Q + 2 * FaFwd<HS>::KV);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int NH = gridDim.y, h = blockIdx.y, b = blockIdx.z;
    const int i0 = (gridDim.x - 1 - blockIdx.x) * BQ;
    const int nq = min(BQ, a.Tq - i0);
    const int kend = visible_keys(a, i0 + nq - 1);   // keys the block's last query sees
    const int nkt = (kend + BK - 1) / BK;
    const floatX* kg = a.k + (long long)b * a.Tk * a.ldk + (long long)h * HS;
    const floatX* vg = a.v + (long long)b * a.Tk * a.ldv + (long long)h * HS;

    fa_load_tile<HS, BQ>(Qs, a.q + ((long long)b * a.Tq + i0) * a.ldq + (long long)h * HS, a.ldq, nq, a.vec);
    cp_async_commit();
    if (nkt > 0) {
        const int nk = min(BK, a.Tk);
        fa_load_tile<HS, BK>(Ks, kg, a.ldk, nk, a.vec);
        fa_load_tile<HS, BK>(Vs, vg, a.ldv, nk, a.vec);
    }
    cp_async_commit();

    // This warp's rows r0 .. r0+15 of the block; this lane's rows r0+g (lo) and r0+g+8 (hi).
    const int r0 = warp * 16;
    const int wlast = min(r0 + 15, nq - 1);
    const int wvis = wlast >= r0 ? visible_keys(a, i0 + wlast) : 0;   // keys the warp sees
    const int wvis0 = wlast >= r0 ? visible_keys(a, i0 + r0) : 0;     // ... all of its rows see
    const int vis_lo = r0 + g < nq ? visible_keys(a, i0 + r0 + g) : 0;
    const int vis_hi = r0 + g + 8 < nq ? visible_keys(a, i0 + r0 + g + 8) : 0;

    // Up to HS = 64 the warp's Q fragments stay in registers (HS/4 of them) instead of being
    // re-read from shared memory for every key tile; beyond, the register budget needs them.
    constexpr bool Q_IN_REGS = HS <= 64;
    constexpr int QF = Q_IN_REGS ? HS / 16 : 1;
    uint32_t qf[QF][4];
    float acc[NT][4];
ATTN_UNROLL
    for (int n = 0; n < NT; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;   // log2 units

    for (int kt = 0; kt < nkt; kt++) {
        const int j0 = kt * BK, st = kt & 1;
        if (kt + 1 < nkt) {   // the next tile flies while this one is computed
            const int nk = min(BK, a.Tk - j0 - BK);
            fa_load_tile<HS, BK>(Ks + (st ^ 1) * BK * T::LD, kg + (long long)(j0 + BK) * a.ldk, a.ldk, nk, a.vec);
            fa_load_tile<HS, BK>(Vs + (st ^ 1) * BK * T::LD, vg + (long long)(j0 + BK) * a.ldv, a.ldv, nk, a.vec);
        }
        cp_async_commit();
        cp_async_wait<1>();   // everything but the tile just requested has landed
        __syncthreads();
        if (Q_IN_REGS && kt == 0) {   // Q landed with the first tile: its fragments, once
ATTN_UNROLL
            for (int kk = 0; kk < HS / 16; kk++)
                ldmatrix_x4(qf[kk % QF], Qs + T::chunk(r0 + (lane & 15), 2 * kk + (lane >> 4)));
        }
        const int wn = min(BK, wvis - j0);   // keys of this tile that some row of the warp sees
        if (wn > 0) {
            const floatX* Kt = Ks + st * BK * T::LD;
            const floatX* Vt = Vs + st * BK * T::LD;
            const int nkb = (wn + 15) / 16;   // 16-key blocks to compute
            float s[BK / 8][4];
ATTN_UNROLL
            for (int n = 0; n < BK / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            // S (16 x 64) = Q_w K^T
ATTN_UNROLL
            for (int kk = 0; kk < HS / 16; kk++) {
                uint32_t qa[4];
                if (Q_IN_REGS) {
                    for (int e = 0; e < 4; e++) qa[e] = qf[kk % QF][e];
                } else {
                    ldmatrix_x4(qa, Qs + T::chunk(r0 + (lane & 15), 2 * kk + (lane >> 4)));
                }
ATTN_UNROLL
                for (int nb = 0; nb < BK / 16; nb++) {
                    if (nb >= nkb) break;   // warp-uniform
                    uint32_t kb[4];
                    ldmatrix_x4(kb, Kt + T::chunk(16 * nb + ((lane >> 4) << 3) + (lane & 7), 2 * kk + ((lane >> 3) & 1)));
                    fa_mma_pair(s + 2 * nb, qa, kb);
                }
            }
            // Online softmax on the fragments, in log2 units; masked scores are -inf.
            const bool mask = j0 + 16 * nkb > wvis0;   // some key computed here is hidden from some row
            float mx_lo = -INFINITY, mx_hi = -INFINITY;
ATTN_UNROLL
            for (int n = 0; n < BK / 8; n++) {
ATTN_UNROLL
                for (int e = 0; e < 2; e++) {
                    const int j = j0 + 8 * n + 2 * t + e;
                    float x_lo = s[n][e] * a.scale_log2, x_hi = s[n][2 + e] * a.scale_log2;
                    if (mask || n >= 2 * nkb) {
                        if (j >= vis_lo || n >= 2 * nkb) x_lo = -INFINITY;
                        if (j >= vis_hi || n >= 2 * nkb) x_hi = -INFINITY;
                    }
                    s[n][e] = x_lo;
                    s[n][2 + e] = x_hi;
                    mx_lo = fmaxf(mx_lo, x_lo);
                    mx_hi = fmaxf(mx_hi, x_hi);
                }
            }
            const float mn_lo = fmaxf(m_lo, group_max(mx_lo)), mn_hi = fmaxf(m_hi, group_max(mx_hi));
            // A row that has seen no key yet keeps max -inf: subtract 0 instead (its scores are -inf).
            const float ref_lo = mn_lo == -INFINITY ? 0.0f : mn_lo, ref_hi = mn_hi == -INFINITY ? 0.0f : mn_hi;
            const float corr_lo = exp2f(m_lo - ref_lo), corr_hi = exp2f(m_hi - ref_hi);
            m_lo = mn_lo;
            m_hi = mn_hi;
            float sum_lo = 0.0f, sum_hi = 0.0f;
ATTN_UNROLL
            for (int n = 0; n < BK / 8; n++) {
                s[n][0] = exp2f(s[n][0] - ref_lo);
                s[n][1] = exp2f(s[n][1] - ref_lo);
                s[n][2] = exp2f(s[n][2] - ref_hi);
                s[n][3] = exp2f(s[n][3] - ref_hi);
                sum_lo += s[n][0] + s[n][1];
                sum_hi += s[n][2] + s[n][3];
            }
            l_lo = l_lo * corr_lo + sum_lo;   // this lane's columns; summed over the group at the end
            l_hi = l_hi * corr_hi + sum_hi;
ATTN_UNROLL
            for (int n = 0; n < NT; n++) {
                acc[n][0] *= corr_lo;
                acc[n][1] *= corr_lo;
                acc[n][2] *= corr_hi;
                acc[n][3] *= corr_hi;
            }
            // O += P V, P straight from the registers.
ATTN_UNROLL
            for (int kb = 0; kb < BK / 16; kb++) {
                if (kb >= nkb) break;
                uint32_t pa[4];
                pack_a_fragment(pa, s[2 * kb], s[2 * kb + 1]);
ATTN_UNROLL
                for (int np = 0; np < NT / 2; np++) {
                    uint32_t vb[4];
                    ldmatrix_x4_trans(vb, Vt + T::chunk(16 * kb + (lane & 15), 2 * np + (lane >> 4)));
                    fa_mma_pair(acc + 2 * np, pa, vb);
                }
            }
        }
        __syncthreads();   // every warp is done with stage st before the next request refills it
    }
    cp_async_wait<0>();   // nothing may still be in flight when the block ends

    l_lo = group_sum(l_lo);
    l_hi = group_sum(l_hi);
    const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f, inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
    const long long row_lo = (long long)b * a.Tq + i0 + r0 + g;
    const bool ok_lo = r0 + g < nq, ok_hi = r0 + g + 8 < nq;
ATTN_UNROLL
    for (int n = 0; n < NT; n++) {
        const int c = h * HS + 8 * n + 2 * t;
        if (a.ox) fa_store_tile(a.ox, a.ldo, row_lo, c, acc[n], inv_lo, inv_hi, ok_lo, ok_hi, false);
        else fa_store_tile(a.o, a.ldo, row_lo, c, acc[n], inv_lo, inv_hi, ok_lo, ok_hi, false);
    }
    if (t == 0) {
        float* lse = a.lse + ((long long)b * NH + h) * a.Tq + i0 + r0 + g;
        if (ok_lo) lse[0] = l_lo > 0.0f ? (m_lo + log2f(l_lo)) * LN2 : -INFINITY;
        if (ok_hi) lse[8] = l_hi > 0.0f ? (m_hi + log2f(l_hi)) * LN2 : -INFINITY;
    }
}

// ---- backward -----------------------------------------------------------------------------------
template <int HS> struct FaBwd {
    typedef FaTile<HS> T;
    static constexpr size_t KV = T::bytes(FA_BWD_BK), QG = T::bytes(FA_BWD_BQ);
    static constexpr size_t DS = (size_t)FA_BWD_BK * FaSquare::LD * sizeof(floatX);
    static constexpr size_t VEC = sizeof(float) * FA_BWD_BQ;
    // K, V; Q and dO in two stages; dS^T; lse (log2 units) and D in two stages.
    static constexpr size_t SMEM = 2 * KV + 4 * QG + DS + 4 * VEC;
};

// The query tile at i0 of stage st: Q, dO (cp.async) and lse2, D (plain loads, visible after the
// caller's __syncthreads). lse2 = lse * log2(e), +inf for a query that sees no key (P = 0).
template <int HS>
__device__ __forceinline__ void fa_load_query_tile(const AttnArgs& a, int b, int h, int NH, int i0, floatX* Qs,
                                                   floatX* Gs, float* lse2, float* D) {
    const int nq = min(FA_BWD_BQ, a.Tq - i0);
    fa_load_tile<HS, FA_BWD_BQ>(Qs, a.q + ((long long)b * a.Tq + i0) * a.ldq + (long long)h * HS, a.ldq, nq, a.vec);
    fa_load_tile<HS, FA_BWD_BQ>(Gs, a.dout + ((long long)b * a.Tq + i0) * a.lddo + (long long)h * HS, a.lddo, nq,
                                a.vec);
    const long long li = ((long long)b * NH + h) * a.Tq + i0;
    for (int r = threadIdx.x; r < FA_BWD_BQ; r += blockDim.x) {
        const float l = r < nq ? a.lse_in[li + r] : -INFINITY;
        lse2[r] = l == -INFINITY ? INFINITY : l * LOG2E;
        D[r] = r < nq ? a.d[li + r] : 0.0f;
    }
}

// Grid (nsplit, NH, B). See the top of the file. a.dq_part: (nsplit, B, Tq, NH*HS) fp32 slices,
// or NULL with nsplit = 1 (dQ added straight into a.dq).
template <int HS>
__global__ void __launch_bounds__(FA_BWD_WARPS * 32, 2) flash_backward_kernel(const AttnArgs a) {
    typedef FaTile<HS> T;
    typedef FaBwd<HS> L;
    constexpr int BK = FA_BWD_BK, BQ = FA_BWD_BQ, QH = 32, NT = HS / 8;
    DYNAMIC_SHARED(unsigned char, smem);
    floatX* Ks = reinterpret_cast<floatX*>(smem);
    floatX* Vs = reinterpret_cast<floatX*>(smem + L::KV);
    floatX* Qs = reinterpret_cast<floatX*>(smem + 2 * L::KV);            // stage st at + st * BQ * LD
    floatX* Gs = reinterpret_cast<floatX*>(smem + 2 * L::KV + 2 * L::QG);
    floatX* dST = reinterpret_cast<floatX*>(smem + 2 * L::KV + 4 * L::QG);   // dS^T: 64 keys x 64 queries
    float* lse2 = reinterpret_cast<float*>(smem + 2 * L::KV + 4 * L::QG + L::DS);   // stage st at + st * BQ
    float* Dv = lse2 + 2 * BQ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int split = blockIdx.x, nsplit = gridDim.x, NH = gridDim.y, h = blockIdx.y, b = blockIdx.z;
    const int nkt = (a.Tk + BK - 1) / BK, nqt = (a.Tq + BQ - 1) / BQ;
    const int ldp = NH * HS;   // row stride of a dQ slice
    float* dq_out = a.dq_part ? a.dq_part + (long long)split * a.B * a.Tq * ldp : a.dq;
    const long long lddq = a.dq_part ? ldp : a.lddq;

    for (int kt = split; kt < nkt; kt += nsplit) {
        const int j0 = kt * BK;
        const int qt0 = first_query(a, j0) / BQ;   // the first query tile that sees the key tile
        // Later key tiles are seen by no query either: done, unless dK, dV are written as zeros.
        if (qt0 >= nqt && !a.dkx) break;
        const bool first_visit = kt == split;      // the slice rows are written, not added to
        if (qt0 < nqt) {
            const int nk = min(BK, a.Tk - j0);
            fa_load_tile<HS, BK>(Ks, a.k + ((long long)b * a.Tk + j0) * a.ldk + (long long)h * HS, a.ldk, nk, a.vec);
            fa_load_tile<HS, BK>(Vs, a.v + ((long long)b * a.Tk + j0) * a.ldv + (long long)h * HS, a.ldv, nk, a.vec);
            fa_load_query_tile<HS>(a, b, h, NH, qt0 * BQ, Qs, Gs, lse2, Dv);
        }
        cp_async_commit();

        // This warp's keys kw .. kw+15; this lane's keys kw+g (lo) and kw+g+8 (hi).
        const int kw = j0 + 16 * warp;
        const int fq_w = kw < a.Tk ? first_query(a, kw) : a.Tq;   // the first query the warp's keys see
        const int fq_lo = kw + g < a.Tk ? first_query(a, kw + g) : a.Tq;
        const int fq_hi = kw + g + 8 < a.Tk ? first_query(a, kw + g + 8) : a.Tq;
        const int fq_last = kw + 15 < a.Tk ? first_query(a, kw + 15) : a.Tq;   // ... all of them see
        float dk[NT][4], dv[NT][4];
ATTN_UNROLL
        for (int n = 0; n < NT; n++)
ATTN_UNROLL
            for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

        for (int qt = qt0; qt < nqt; qt++) {
            const int i0 = qt * BQ, st = (qt - qt0) & 1;
            if (qt + 1 < nqt) {
                const int sn = st ^ 1;
                fa_load_query_tile<HS>(a, b, h, NH, i0 + BQ, Qs + sn * BQ * T::LD, Gs + sn * BQ * T::LD,
                                       lse2 + sn * BQ, Dv + sn * BQ);
            }
            cp_async_commit();
            cp_async_wait<1>();
            __syncthreads();
            const floatX* Qt = Qs + st * BQ * T::LD;
            const floatX* Gt = Gs + st * BQ * T::LD;
            const float* L2 = lse2 + st * BQ;
            const float* Dt = Dv + st * BQ;
            // Two halves of 32 queries: S^T and dP^T of a half fit the register budget at HS = 128.
ATTN_NO_UNROLL
            for (int qh = 0; qh < BQ / QH; qh++) {
                const int q0 = i0 + qh * QH;   // the half's first query
                float s[QH / 8][4], dp[QH / 8][4];
ATTN_UNROLL
                for (int n = 0; n < QH / 8; n++)
ATTN_UNROLL
                    for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
                // Skipped when no key of the warp sees a query of the half (dS^T is then 0).
                if (q0 + QH > fq_w && q0 < a.Tq) {
                    // S^T = K_w Q^T, dP^T = V_w dO^T (16 keys x 32 queries)
ATTN_UNROLL
                    for (int kk = 0; kk < HS / 16; kk++) {
                        uint32_t ka[4], va[4];
                        ldmatrix_x4(ka, Ks + T::chunk(16 * warp + (lane & 15), 2 * kk + (lane >> 4)));
                        ldmatrix_x4(va, Vs + T::chunk(16 * warp + (lane & 15), 2 * kk + (lane >> 4)));
ATTN_UNROLL
                        for (int nb = 0; nb < QH / 16; nb++) {
                            uint32_t qb[4], gb[4];
                            const int row = qh * QH + 16 * nb + ((lane >> 4) << 3) + (lane & 7);
                            const int c = 2 * kk + ((lane >> 3) & 1);
                            ldmatrix_x4(qb, Qt + T::chunk(row, c));
                            ldmatrix_x4(gb, Gt + T::chunk(row, c));
                            fa_mma_pair(s + 2 * nb, ka, qb);
                            fa_mma_pair(dp + 2 * nb, va, gb);
                        }
                    }
                    // P^T, and dS^T = P^T (dP^T - D) in place; hidden pairs are 0.
                    const bool mask = q0 < fq_last || q0 + QH > a.Tq;
ATTN_UNROLL
                    for (int n = 0; n < QH / 8; n++) {
ATTN_UNROLL
                        for (int e = 0; e < 2; e++) {
                            const int qi = qh * QH + 8 * n + 2 * t + e, q = i0 + qi;
                            const float l2 = L2[qi], dd = Dt[qi];
                            float p_lo = exp2f(s[n][e] * a.scale_log2 - l2);
                            float p_hi = exp2f(s[n][2 + e] * a.scale_log2 - l2);
                            if (mask) {
                                if (q < fq_lo || q >= a.Tq) p_lo = 0.0f;
                                if (q < fq_hi || q >= a.Tq) p_hi = 0.0f;
                            }
                            s[n][e] = p_lo;
                            s[n][2 + e] = p_hi;
                            dp[n][e] = p_lo * (dp[n][e] - dd);
                            dp[n][2 + e] = p_hi * (dp[n][2 + e] - dd);
                        }
                    }
                    // dV_w += P^T dO, dK_w += dS^T Q (the scale is applied once, at the end).
ATTN_UNROLL
                    for (int kb = 0; kb < QH / 16; kb++) {
                        uint32_t pa[4], da[4];
                        pack_a_fragment(pa, s[2 * kb], s[2 * kb + 1]);
                        pack_a_fragment(da, dp[2 * kb], dp[2 * kb + 1]);
ATTN_UNROLL
                        for (int np = 0; np < NT / 2; np++) {
                            uint32_t gb[4], qb[4];
                            const int row = qh * QH + 16 * kb + (lane & 15), c = 2 * np + (lane >> 4);
                            ldmatrix_x4_trans(gb, Gt + T::chunk(row, c));
                            ldmatrix_x4_trans(qb, Qt + T::chunk(row, c));
                            fa_mma_pair(dv + 2 * np, pa, gb);
                            fa_mma_pair(dk + 2 * np, da, qb);
                        }
                    }
                }
                // dS^T (bf16) to shared memory for dQ.
ATTN_UNROLL
                for (int n = 0; n < QH / 8; n++) {
                    const int kr = 16 * warp + g, c = qh * QH / 8 + n;
                    *reinterpret_cast<uint32_t*>(dST + FaSquare::chunk(kr, c) + 2 * t) = pack_bf16x2(dp[n][0], dp[n][1]);
                    *reinterpret_cast<uint32_t*>(dST + FaSquare::chunk(kr + 8, c) + 2 * t) =
                        pack_bf16x2(dp[n][2], dp[n][3]);
                }
            }
            __syncthreads();
            // dQ (rows 16w .. 16w+15 of the tile) += scale dS K: A = dS from dS^T (transposed
            // ldmatrix), B = K (transposed ldmatrix), 8 channels at a time.
            const int qr0 = 16 * warp;
            if (i0 + qr0 < a.Tq) {
                uint32_t sa[BK / 16][4];
ATTN_UNROLL
                for (int kb = 0; kb < BK / 16; kb++)
                    ldmatrix_x4_trans(sa[kb], dST + FaSquare::chunk(16 * kb + ((lane >> 4) << 3) + (lane & 7),
                                                                  qr0 / 8 + ((lane >> 3) & 1)));
                const long long row_lo = (long long)b * a.Tq + i0 + qr0 + g;
                const bool ok_lo = i0 + qr0 + g < a.Tq, ok_hi = i0 + qr0 + g + 8 < a.Tq;
ATTN_UNROLL
                for (int np = 0; np < NT / 2; np++) {
                    float dq[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
ATTN_UNROLL
                    for (int kb = 0; kb < BK / 16; kb++) {
                        uint32_t kb4[4];
                        ldmatrix_x4_trans(kb4, Ks + T::chunk(16 * kb + (lane & 15), 2 * np + (lane >> 4)));
                        fa_mma_pair(dq, sa[kb], kb4);
                    }
                    // The slice is this block's alone: plain read-modify-write, no atomics; the
                    // split's first key tile writes it.
                    const bool add = !(a.dq_part && first_visit);
                    fa_store_tile(dq_out, lddq, row_lo, h * HS + 16 * np + 2 * t, dq[0], a.scale, a.scale, ok_lo,
                                  ok_hi, add);
                    fa_store_tile(dq_out, lddq, row_lo, h * HS + 16 * np + 8 + 2 * t, dq[1], a.scale, a.scale,
                                  ok_lo, ok_hi, add);
                }
            }
            __syncthreads();   // dS^T and stage st are free again
        }
        cp_async_wait<0>();

        // dK, dV of the warp's keys: added once, or written in floatX.
        const long long key_lo = (long long)b * a.Tk + kw + g;
        const bool ok_lo = kw + g < a.Tk, ok_hi = kw + g + 8 < a.Tk;
ATTN_UNROLL
        for (int n = 0; n < NT; n++) {
            const int c = h * HS + 8 * n + 2 * t;
            if (a.dkx) {
                fa_store_tile(a.dkx, a.lddk, key_lo, c, dk[n], a.scale, a.scale, ok_lo, ok_hi, false);
                fa_store_tile(a.dvx, a.lddv, key_lo, c, dv[n], 1.0f, 1.0f, ok_lo, ok_hi, false);
            } else {
                fa_store_tile(a.dk, a.lddk, key_lo, c, dk[n], a.scale, a.scale, ok_lo, ok_hi, true);
                fa_store_tile(a.dv, a.lddv, key_lo, c, dv[n], 1.0f, 1.0f, ok_lo, ok_hi, true);
            }
        }
        __syncthreads();   // K, V are free for the next key tile
    }
}

// dq (+=, or = in floatX into a.dqx) the dQ slices of the splits, in split order. Split s wrote the rows from the first query
// tile that sees its first key tile (s) on; the rows before it were never written.
template <int HS>
__global__ void __launch_bounds__(256) flash_dq_reduce_kernel(const AttnArgs a, int nsplit, int NH) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;   // (b, i, h, c)
    const int ldp = NH * HS;
    const long long n = (long long)a.B * a.Tq * ldp;
    if (idx >= n) return;
    const long long row = idx / ldp;   // b * Tq + i
    const int col = (int)(idx % ldp);
    const int i = (int)(row % a.Tq);
    float sum = 0.0f;
    for (int s = 0; s < nsplit && s * FA_BWD_BK < a.Tk; s++) {
        const int first = (first_query(a, s * FA_BWD_BK) / FA_BWD_BQ) * FA_BWD_BQ;
        if (i >= first) sum += a.dq_part[(long long)s * n + idx];
    }
    if (a.dqx) a.dqx[row * a.lddq + col] = from_float<floatX>(sum);
    else a.dq[row * a.lddq + col] += sum;
}
