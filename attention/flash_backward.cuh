// The backward of the FlashAttention-2-class kernels (tiles and fragments: flash_attention.cuh).
// One block per (key tile, head, sequence); its warps each own 16 keys of the tile (BK = 128 keys
// and 8 warps, or 64 and 4) and keep dK, dV in registers while the block walks the 64-query tiles
// that see the key tile: S^T = K Q^T and dP^T = V dO^T (recomputed once), dV += P^T dO, dK += dS^T
// Q, and dQ += dS K through dS^T in shared memory: the 5 GEMMs of FlashAttention-2. Every block
// adds its dQ tile into one fp32 accumulator with red.global.add, in a fixed order
// (FlashAttention-3's deterministic mode): a semaphore per (sequence, head, query tile) counts the
// key tiles that have added, and the key tiles take turns from the last to the first. Blocks start
// the last key tiles first, so a block waits only for blocks started before it, and on a causal
// mask the turn of a key tile's first query tile is always its own (the diagonal): in steady state
// no block waits. Deterministic for every schedule and SM count. Under a sliding window (a.window)
// or a document mask (a.doc_start) a key tile is seen by the query tiles qt0 .. qt1 - 1 only
// (query_end: the earlier of the window's end and the document's): the block walks those. The dQ
// order stays correct: qt0 (first_query, causal) and qt1 (query_end: kpos + window and
// doc_end[kpos] both grow with the key, as documents are contiguous runs of positions) are
// nondecreasing in the key tile, so the key tiles that visit a query tile qt (qt0 <= qt < qt1) are
// one contiguous run kt_lo .. last_kt, and last_kt (fa_advance_last_kt: the last with qt0 <= qt)
// belongs to it (its qt1 is at least that of any member). A key tile waits for the later ones of
// the run (last_kt - kt turns), all of which visit qt and pass the turn on; the earlier key tiles
// that stop before qt (a document boundary or the band's edge between them) never take a turn on
// it, and no later one waits for them. A key tile no query sees (qt0 >= qt1) takes no turn.
#pragma once
#include "attention/flash_attention.cuh"
#include "attention/flash_workspace.h"

// Query tiles of 64; key tiles of BK = 64 (4 warps) or 128 (8 warps, the default: half the dQ
// adds and the Q/dO loads per key), a warp per 16 keys.
constexpr int FA_BWD_BQ = FLASH_BWD_QUERY_TILE, FA_BWD_BK_DEFAULT = 128;

template <int HS, int BK> struct FaBwd {
    static_assert(BK == 64 || BK == 128, "key tiles of 64 or 128");
    typedef FaTile<HS, BK> TK;               // K, V
    typedef FaTile<HS, FA_BWD_BQ> TQ;        // Q, dO (a stage)
    typedef FaTile<FA_BWD_BQ, BK> TS;        // dS^T: BK keys x 64 queries, one swizzled panel
    static constexpr int WARPS = BK / 16;
    static constexpr size_t KV = TK::BYTES, QG = TQ::BYTES;
    static constexpr size_t DS = TS::BYTES;
    static constexpr size_t VEC = sizeof(float) * FA_BWD_BQ;
    // K, V; Q and dO in two stages; dS^T; lse and D in two stages.
    static constexpr size_t SMEM = 2 * KV + 4 * QG + DS + 4 * VEC;
};

// The query tile at i0 of stage st: Q, dO, and the rows' lse and D (by cp.async where aligned,
// else plain loads; either way visible after the caller's wait and __syncthreads). Rows past Tq
// read 0. A query that sees no key has lse = -inf: its P is masked to 0 by position.
template <int HS>
__device__ __forceinline__ void fa_load_query_tile(const AttnArgs& a, int b, int h, int NH, int i0, floatX* Qs,
                                                   floatX* Gs, float* lse, float* D) {
    const int nq = min(FA_BWD_BQ, a.Tq - i0);
    fa_load_tile<HS, FA_BWD_BQ>(Qs, a.q + ((long long)b * a.Tq + i0) * a.ldq + (long long)h * HS, a.ldq, nq, a.vec);
    fa_load_tile<HS, FA_BWD_BQ>(Gs, a.dout + ((long long)b * a.Tq + i0) * a.lddo + (long long)h * HS, a.lddo, nq,
                                a.vec);
    const long long li = ((long long)b * NH + h) * a.Tq + i0;
    if (a.vec_stats) {   // 16 chunks of 4 rows each for lse and D; a partial chunk is zero-filled
        for (int idx = threadIdx.x; idx < FA_BWD_BQ / 2; idx += blockDim.x) {
            const int c = idx % (FA_BWD_BQ / 4), r = 4 * c, bytes = max(0, min(4, nq - r)) * 4;
            const float* src = idx < FA_BWD_BQ / 4 ? a.lse_in + li + r : a.d + li + r;
            cp_async_16((idx < FA_BWD_BQ / 4 ? lse : D) + r, bytes ? src : a.lse_in, bytes);
        }
    } else {
        for (int r = threadIdx.x; r < FA_BWD_BQ; r += blockDim.x) {
            lse[r] = r < nq ? a.lse_in[li + r] : 0.0f;
            D[r] = r < nq ? a.d[li + r] : 0.0f;
        }
    }
}

// Two adjacent dQ elements of a lane's fragment row, added to the accumulator: one 8-byte red
// where the address allows it (sm_90), else two.
__device__ __forceinline__ void fa_red_pair(float* p, float x, float y, bool v2) {
#if CUDA_PTX_HAS_RED_V2
    if (v2) {
        red_add_v2_f32(p, x, y);
        return;
    }
#endif
    red_add_f32(p, x);
    red_add_f32(p + 1, y);
}

// A lane's 16 x 8 tiles of dK (scaled here) and dV at rows row_lo, row_lo + 8 (of B Tk) and
// columns c, c + 1: written in floatX (a.dkx, a.dvx), or added into the fp32 a.dk, a.dv.
__device__ __forceinline__ void fa_store_dkdv(const AttnArgs& a, long long row_lo, int c, const float dk[4],
                                              const float dv[4], bool ok_lo, bool ok_hi) {
    if (a.dkx) {
        fa_store_tile(a.dkx, a.lddk, row_lo, c, dk, a.scale, a.scale, ok_lo, ok_hi, false);
        fa_store_tile(a.dvx, a.lddv, row_lo, c, dv, 1.0f, 1.0f, ok_lo, ok_hi, false);
    } else {
        fa_store_tile(a.dk, a.lddk, row_lo, c, dk, a.scale, a.scale, ok_lo, ok_hi, true);
        fa_store_tile(a.dv, a.lddv, row_lo, c, dv, 1.0f, 1.0f, ok_lo, ok_hi, true);
    }
}

// A backward block's place in the grid: heads in groups of G = a.bwd_head_group (the last may be
// smaller), within a group the last key tile first, heads inner; its dQ destination (the fp32
// accumulator, or the caller's dq), the semaphores of its (sequence, head), and whether it passes
// its dQ turns on lagged.
struct FaBwdBlock {
    int nkt, nqt, b, h, kt, j0, qt0, qt1;
    float* dq_out;
    long long lddq;
    bool red_v2;   // 8-byte reds: an even row stride (a lane's columns are even) and 8-byte base
    unsigned* sem;
    bool lagged;
};
// BQ: queries per tile (the Hopper backward's q128 form: 128; its semaphores then count 128-query
// tiles, fewer than the workspace holds).
template <int HS, int BK, int BQ = FA_BWD_BQ>
__device__ __forceinline__ FaBwdBlock fa_bwd_block(const AttnArgs& a, int NH) {
    FaBwdBlock k;
    k.nkt = (a.Tk + BK - 1) / BK;
    k.nqt = (a.Tq + BQ - 1) / BQ;
    const int heads = a.B * NH, G = a.bwd_head_group;
    const long long span = (long long)G * k.nkt, group = blockIdx.x / span;
    const int in_group = (int)(blockIdx.x - group * span), gsize = min(G, heads - (int)group * G);
    const int bh = (int)group * G + in_group % gsize;
    k.h = bh % NH;
    k.b = bh / NH;
    k.kt = k.nkt - 1 - in_group / gsize;
    k.j0 = k.kt * BK;
    k.qt0 = first_query(a, k.j0) / BQ;   // the first query tile that sees the key tile
    // One past the last query tile that sees it (nqt without a window or documents): its last
    // key's query_end (the latest of the tile's).
    k.qt1 = (query_end(a, k.b, min(k.j0 + BK, a.Tk) - 1) + BQ - 1) / BQ;
    k.dq_out = a.dq_acc ? a.dq_acc : a.dq;
    k.lddq = a.dq_acc ? (long long)NH * HS : a.lddq;
    k.red_v2 = k.lddq % 2 == 0 && ((uintptr_t)k.dq_out & 7) == 0;
    k.sem = a.dq_sem + (long long)bh * k.nqt;
    // Lagged release only where the next key tile (the next to add) starts at least two query tiles
    // earlier (a causal diagonal): it then reaches each of our tiles two steps after us, so passing
    // the turn one step late costs it nothing; elsewhere (a key block every query sees) it would.
    k.lagged = a.bwd_lagged_release && k.kt > 0 && first_query(a, (k.kt - 1) * BK) / BQ <= k.qt0 - 2;
    return k;
}

// A block's first loads: its K and V tiles and the first query tile's Q, dO, lse and D (stage 0).
template <int HS, int BK>
__device__ __forceinline__ void fa_bwd_load_first(const AttnArgs& a, const FaBwdBlock& k, int NH, floatX* Ks, floatX* Vs,
                                                  floatX* Qs, floatX* Gs, float* lse, float* Dv) {
    if (k.qt0 < k.qt1) {
        const int nk = min(BK, a.Tk - k.j0);
        fa_load_tile<HS, BK>(Ks, a.k + ((long long)k.b * a.Tk + k.j0) * a.ldk + (long long)k.h * HS, a.ldk, nk, a.vec);
        fa_load_tile<HS, BK>(Vs, a.v + ((long long)k.b * a.Tk + k.j0) * a.ldv + (long long)k.h * HS, a.ldv, nk, a.vec);
        fa_load_query_tile<HS>(a, k.b, k.h, NH, k.qt0 * FA_BWD_BQ, Qs, Gs, lse, Dv);
    }
    cp_async_commit();
}

// last_kt, the last key tile that sees the previous query tile, moved on to the last that sees
// query tile qt: key tiles kt .. last_kt add into its dQ, in descending order (first_query grows
// with the key, so they are a contiguous range).
template <int BK, int BQ = FA_BWD_BQ>
__device__ __forceinline__ void fa_advance_last_kt(const AttnArgs& a, const FaBwdBlock& k, int qt, int& last_kt) {
    while (last_kt + 1 < k.nkt && first_query(a, (last_kt + 1) * BK) / BQ <= qt) last_kt++;
}

// The start of query tile qt's step: the next tile's Q, dO, lse and D into the other stage, the
// last key tile that sees this one (key tiles kt .. last_kt add into its dQ, in descending order:
// first_query grows with the key, so they are a contiguous range), then this stage's data landed
// and visible to the block: its stage's tiles are returned.
struct FaBwdStage {
    const floatX *q, *dout;
    const float *lse, *d;
};
template <int HS, int BK>
__device__ __forceinline__ FaBwdStage fa_bwd_step_begin(const AttnArgs& a, const FaBwdBlock& k, int NH, int qt,
                                                        floatX* Qs, floatX* Gs, float* lse, float* Dv, int& last_kt) {
    typedef FaTile<HS, FA_BWD_BQ> T;
    constexpr int BQ = FA_BWD_BQ;
    const int st = (qt - k.qt0) & 1, sn = st ^ 1;
    if (qt + 1 < k.qt1)
        fa_load_query_tile<HS>(a, k.b, k.h, NH, (qt + 1) * BQ, Qs + sn * T::ELEMS, Gs + sn * T::ELEMS,
                               lse + sn * BQ, Dv + sn * BQ);
    cp_async_commit();
    fa_advance_last_kt<BK>(a, k, qt, last_kt);
    cp_async_wait<1>();
    __syncthreads();
    return FaBwdStage{Qs + st * T::ELEMS, Gs + st * T::ELEMS, lse + st * BQ, Dv + st * BQ};
}

// This key tile's turn on a query tile: the calling thread waits until `turn` later key tiles have
// added (fa_dq_wait: thread 0 of the block).
__device__ __forceinline__ void fa_dq_spin(const unsigned* sem, unsigned turn) {
#ifndef FLASH_BWD_UNORDERED   // the mutant of the ordering test adds in any order
    while (ld_acquire_gpu_u32(sem) != turn) nanosleep_ns(32);
#endif
}
__device__ __forceinline__ void fa_dq_wait(const unsigned* sem, unsigned turn) {
    if (threadIdx.x == 0) fa_dq_spin(sem, turn);
}

// The next key tile's turn on a query tile, after this block's adds to it (issued before a
// __syncthreads; the fence makes them visible first: cumulativity).
__device__ __forceinline__ void fa_dq_release(unsigned* sem) {
    __threadfence();
    red_release_gpu_add_u32(sem, 1u);
}

// Grid B * NH * nkt, one block of BK / 16 warps per (key tile, head, sequence): heads in groups of
// G = a.bwd_head_group, and within a group the last key tile first (block x of a full group: key
// tile nkt - 1 - x / G); see the top of the file. dQ goes into a.dq_acc
// (B, Tq, NH*HS; fp32, zeroed by the launcher, then converted into a.dqx) or, without it, is added
// into a.dq. a.dq_sem: (B, NH, nqt) zeroed semaphores.
// Two blocks of 4 warps or one of 8 per SM (the registers allow no more).
template <int HS, int BK>
__global__ void __launch_bounds__(BK * 2, BK == 64 ? 2 : 1) flash_backward_kernel(const AttnArgs a, int NH) {
    typedef FaBwd<HS, BK> L;
    typedef typename L::TK TK;
    typedef typename L::TQ TQ;
    typedef typename L::TS TS;
    constexpr int BQ = FA_BWD_BQ, QH = 32, NT = HS / 8;
    DYNAMIC_SHARED(unsigned char, smem);
    floatX* Ks = reinterpret_cast<floatX*>(smem);
    floatX* Vs = reinterpret_cast<floatX*>(smem + L::KV);
    floatX* Qs = reinterpret_cast<floatX*>(smem + 2 * L::KV);            // stage st at + st * TQ::ELEMS
    floatX* Gs = reinterpret_cast<floatX*>(smem + 2 * L::KV + 2 * L::QG);
    floatX* dST = reinterpret_cast<floatX*>(smem + 2 * L::KV + 4 * L::QG);   // dS^T: BK keys x 64 queries
    float* lse = reinterpret_cast<float*>(smem + 2 * L::KV + 4 * L::QG + L::DS);   // stage st at + st * BQ
    float* Dv = lse + 2 * BQ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const FaBwdBlock k = fa_bwd_block<HS, BK>(a, NH);
    const int b = k.b, h = k.h, kt = k.kt, j0 = k.j0, qt0 = k.qt0, qt1 = k.qt1;
    float* const dq_out = k.dq_out;
    const long long lddq = k.lddq;
    const bool red_v2 = k.red_v2, lagged = k.lagged;
    unsigned* const sem = k.sem;
    int last_kt = kt;   // the last key tile that sees the current query tile (it adds first)
    // No query sees the key tile: done, unless dK, dV are written as zeros.
    if (qt0 >= qt1 && !a.dkx) return;
    fa_bwd_load_first<HS, BK>(a, k, NH, Ks, Vs, Qs, Gs, lse, Dv);

    // This warp's keys kw .. kw+15; this lane's keys kw+g (lo) and kw+g+8 (hi).
    const int kw = j0 + 16 * warp;
    const int fq_w = kw < a.Tk ? first_query(a, kw) : a.Tq;   // the first query the warp's keys see
    const int fq_lo = kw + g < a.Tk ? first_query(a, kw + g) : a.Tq;
    const int fq_hi = kw + g + 8 < a.Tk ? first_query(a, kw + g + 8) : a.Tq;
    const int fq_last = kw + 15 < a.Tk ? first_query(a, kw + 15) : a.Tq;   // ... all of them see
    // One past the last query a key sees (a.Tq without a window or documents): the warp's last key
    // (of any), its first (of all), and this lane's keys. Queries past Tq are past these too.
    const int qe_w = kw < a.Tk ? query_end(a, b, min(kw + 15, a.Tk - 1)) : a.Tq;
    const int qe_first = kw < a.Tk ? query_end(a, b, kw) : a.Tq;
    const int qe_lo = kw + g < a.Tk ? query_end(a, b, kw + g) : a.Tq;
    const int qe_hi = kw + g + 8 < a.Tk ? query_end(a, b, kw + g + 8) : a.Tq;
    float dk[NT][4], dv[NT][4];
ATTN_UNROLL
    for (int n = 0; n < NT; n++)
ATTN_UNROLL
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

    for (int qt = qt0; qt < qt1; qt++) {
        const int i0 = qt * BQ;
        const FaBwdStage sg = fa_bwd_step_begin<HS, BK>(a, k, NH, qt, Qs, Gs, lse, Dv, last_kt);
        const floatX *Qt = sg.q, *Gt = sg.dout;
        const float *Lt = sg.lse, *Dt = sg.d;
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
            if (q0 + QH > fq_w && q0 < qe_w) {
                // S^T = K_w Q^T, dP^T = V_w dO^T (16 keys x 32 queries)
ATTN_UNROLL
                for (int kk = 0; kk < HS / 16; kk++) {
                    uint32_t ka[4], va[4];
                    ldmatrix_x4(ka, Ks + TK::chunk(16 * warp + (lane & 15), 2 * kk + (lane >> 4)));
                    ldmatrix_x4(va, Vs + TK::chunk(16 * warp + (lane & 15), 2 * kk + (lane >> 4)));
ATTN_UNROLL
                    for (int nb = 0; nb < QH / 16; nb++) {
                        uint32_t qb[4], gb[4];
                        const int row = qh * QH + 16 * nb + ((lane >> 4) << 3) + (lane & 7);
                        const int c = 2 * kk + ((lane >> 3) & 1);
                        ldmatrix_x4(qb, Qt + TQ::chunk(row, c));
                        ldmatrix_x4(gb, Gt + TQ::chunk(row, c));
                        fa_mma_pair(s + 2 * nb, ka, qb);
                        fa_mma_pair(dp + 2 * nb, va, gb);
                    }
                }
                // P^T, and dS^T = P^T (dP^T - D) in place; hidden pairs are 0. A query that sees no
                // key (lse = -inf, P = inf here) sees none of the warp's keys: always masked.
                const bool mask = q0 < fq_last || q0 + QH > qe_first;   // (qe_first <= Tq)
ATTN_UNROLL
                for (int n = 0; n < QH / 8; n++) {
ATTN_UNROLL
                    for (int e = 0; e < 2; e++) {
                        const int qi = qh * QH + 8 * n + 2 * t + e, q = i0 + qi;
                        const float l2 = Lt[qi] * LOG2E, dd = Dt[qi];   // lse in log2 units
                        float p_lo = ex2_approx_ftz(fmaf(s[n][e], a.scale_log2, -l2));
                        float p_hi = ex2_approx_ftz(fmaf(s[n][2 + e], a.scale_log2, -l2));
                        if (mask) {
                            if (q < fq_lo || q >= qe_lo) p_lo = 0.0f;
                            if (q < fq_hi || q >= qe_hi) p_hi = 0.0f;
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
                        ldmatrix_x4_trans(gb, Gt + TQ::chunk(row, c));
                        ldmatrix_x4_trans(qb, Qt + TQ::chunk(row, c));
                        fa_mma_pair(dv + 2 * np, pa, gb);
                        fa_mma_pair(dk + 2 * np, da, qb);
                    }
                }
            }
            // dS^T (bf16) to shared memory for dQ.
ATTN_UNROLL
            for (int n = 0; n < QH / 8; n++) {
                const int kr = 16 * warp + g, c = qh * QH / 8 + n;
                *reinterpret_cast<uint32_t*>(dST + TS::chunk(kr, c) + 2 * t) = pack_bf16x2(dp[n][0], dp[n][1]);
                *reinterpret_cast<uint32_t*>(dST + TS::chunk(kr + 8, c) + 2 * t) =
                    pack_bf16x2(dp[n][2], dp[n][3]);
            }
        }
        // Lagged release: the previous query tile's turn passes on only now, its adds long done,
        // so the fence rarely waits (the next key tile reaches that tile two steps after us).
        if (lagged && qt > qt0 && threadIdx.x == 0) fa_dq_release(sem + qt - 1);
        fa_dq_wait(sem + qt, (unsigned)(last_kt - kt));   // this key tile's turn: the later ones have added
        __syncthreads();
        // dQ (rows 16 (w % 4) .. +15 of the tile) += scale dS K: A = dS from dS^T (transposed
        // ldmatrix), B = K (transposed ldmatrix), 16 channels at a time; with 8 warps, warps w and
        // w + 4 take alternate 16-channel pairs.
        const int qr0 = 16 * (warp % 4), part = warp / 4;
        if (i0 + qr0 < a.Tq) {
            uint32_t sa[BK / 16][4];
ATTN_UNROLL
            for (int kb = 0; kb < BK / 16; kb++)
                ldmatrix_x4_trans(sa[kb], dST + TS::chunk(16 * kb + ((lane >> 4) << 3) + (lane & 7),
                                                        qr0 / 8 + ((lane >> 3) & 1)));
            const long long row_lo = (long long)b * a.Tq + i0 + qr0 + g;
            const bool ok_lo = i0 + qr0 + g < a.Tq, ok_hi = i0 + qr0 + g + 8 < a.Tq;
            for (int np = part; np < NT / 2; np += L::WARPS / 4) {
                float dq[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
ATTN_UNROLL
                for (int kb = 0; kb < BK / 16; kb++) {
                    uint32_t kb4[4];
                    ldmatrix_x4_trans(kb4, Ks + TK::chunk(16 * kb + (lane & 15), 2 * np + (lane >> 4)));
                    fa_mma_pair(dq, sa[kb], kb4);
                }
ATTN_UNROLL
                for (int half = 0; half < 2; half++) {
                    float* p = dq_out + row_lo * lddq + h * HS + 16 * np + 8 * half + 2 * t;
                    const float* v = dq[half];
                    if (ok_lo) fa_red_pair(p, a.scale * v[0], a.scale * v[1], red_v2);
                    if (ok_hi) fa_red_pair(p + 8 * lddq, a.scale * v[2], a.scale * v[3], red_v2);
                }
            }
        }
        __syncthreads();   // dS^T and stage st are free again; every dQ add of the block issued
        if (!lagged && threadIdx.x == 0) fa_dq_release(sem + qt);
    }
    if (lagged && qt0 < qt1 && threadIdx.x == 0) fa_dq_release(sem + qt1 - 1);
    cp_async_wait<0>();

    // dK, dV of the warp's keys: added once, or written in floatX.
    const long long key_lo = (long long)b * a.Tk + kw + g;
    const bool ok_lo = kw + g < a.Tk, ok_hi = kw + g + 8 < a.Tk;
ATTN_UNROLL
    for (int n = 0; n < NT; n++) fa_store_dkdv(a, key_lo, h * HS + 8 * n + 2 * t, dk[n], dv[n], ok_lo, ok_hi);
}
