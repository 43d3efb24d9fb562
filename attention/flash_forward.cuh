// The forward of the FlashAttention-2-class kernels (tiles and fragments: flash_attention.cuh): a
// block has 8 warps and 128 query rows (16 per warp); K/V tiles of 64 keys, double-buffered.
#pragma once
#include "attention/flash_attention.cuh"

constexpr int FA_FWD_BQ = 128, FA_FWD_BK = 64, FA_FWD_WARPS = 8;

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
