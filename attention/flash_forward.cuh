// The forward of the FlashAttention-2-class kernels (tiles and fragments: flash_attention.cuh), in
// FlashAttention-2's tiling: a block has 4 warps and 128 query rows, 32 per warp as two 16-row MMA
// tiles, so each K fragment (S = Q K^T) and each V fragment (O += P V) that ldmatrix loads feeds
// two MMAs. K/V tiles of 64 keys, double-buffered by cp.async.
//
// Per block, the key tiles split in two runs of one step function (flash_forward_tile): first the
// tiles every row of the block sees whole (no mask code), then the last ones, near the diagonal,
// where some row sees only part of the tile (masked per row; per warp, the 16-key blocks none of
// its rows sees are skipped). Under a sliding window (a.window) the tiles start at the one holding
// the first key the block's first query sees, and the tiles the band's lower edge cuts are masked
// too, each row from below as well (LOWER; per warp, the 16-key blocks before its first row's
// first key are skipped), in one loop with the others (the SPLIT instance); a document mask
// (a.doc_start) bounds the rows from below the same way, by the later of the two first keys. The softmax keeps the
// row max in scaled log2 units: p = ex2.approx.ftz(s * scale_log2 - m), one FFMA and one ex2 per
// score. O is normalised, converted and staged through shared memory (the Q/K/V buffers, free by
// then), then written in 16-byte rows when the output allows (else one element per store, from the
// same staging).
#pragma once
#include "attention/flash_attention.cuh"

template <int HS> struct FaFwd {
    static constexpr int BQ = 128, BK = 64, WARPS = 4, THREADS = 32 * WARPS;
    typedef FaTile<HS, BQ> TQ;   // the Q tile (and the staged bf16 O)
    typedef FaTile<HS, BK> TK;   // a K or V tile
    static constexpr int RT = BQ / (16 * WARPS);   // 16-row MMA tiles per warp
    // Keys per softmax update: the whole tile, but at HS = 128 (128 O accumulators per lane) two
    // halves of 32, whose 32 fewer score registers keep ptxas from spilling.
    static constexpr int KS = HS <= 96 ? BK : BK / 2;
    // Up to HS = 64 a warp's Q fragments (HS/2 registers) stay in registers for the whole block;
    // beyond, they are re-read from shared memory for every key tile (registers: ptxas table in
    // attention/cuda_perf_attention.md).
    static constexpr bool Q_IN_REGS = HS <= 64;
    static constexpr int QF = Q_IN_REGS ? HS / 16 : 1;
    // fp32 O staging: rows of HS floats padded by 8 (32 bytes), so the float2 fragment writes of
    // a half-warp (4 rows x 32 bytes) hit 4 different 32-byte bank groups.
    static constexpr int OLD = HS + 8;
    static constexpr size_t Q = TQ::BYTES, KV = TK::BYTES;
    static constexpr size_t SMEM = Q + 4 * KV;   // Q; K and V in two stages
    static_assert(RT == 2, "the forward's warps hold 32 rows each");
    static_assert(BQ * OLD * sizeof(float) + BQ * sizeof(float2) <= SMEM && Q <= SMEM,
                  "O staging and the merge weights fit in the Q/K/V buffers");
};

// One warp's running state: O accumulators, row max (scaled log2 units) and this lane's part of
// the row sums, for rows g and g + 8 (index [rt][0] and [rt][1]) of its two row tiles rt.
template <int HS> struct FaFwdWarp {
    float acc[2][HS / 8][4];
    float m[2][2], l[2][2];
    uint32_t qf[2][FaFwd<HS>::QF][4];   // Q fragments, when Q_IN_REGS
};

// Element c of row r of the staged O: floatX in the tile layout (conflict-free both ways), fp32
// in rows padded to FaFwd::OLD.
template <int HS> __device__ __forceinline__ int fa_o_at(const floatX*, int r, int c) {
    return FaFwd<HS>::TQ::chunk(r, c / 8) + c % 8;
}
template <int HS> __device__ __forceinline__ int fa_o_at(const float*, int r, int c) { return r * FaFwd<HS>::OLD + c; }
__device__ __forceinline__ void fa_put_pair(floatX* p, float x, float y) {
    *reinterpret_cast<uint32_t*>(p) = pack_bf16x2(x, y);
}
__device__ __forceinline__ void fa_put_pair(float* p, float x, float y) { *reinterpret_cast<float2*>(p) = make_float2(x, y); }

// Staged O to the output, 16 bytes (fa_out16) or one element (fa_out1) at a time: copied, or for
// fp32 with merge weights wt (a.merge) merged into what the output holds (wt->x < 0: this
// partial's row is empty and the output's row stays).
__device__ __forceinline__ void fa_out16(floatX* dst, const floatX* src, const float2*) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}
__device__ __forceinline__ void fa_out16(float* dst, const float* src, const float2* wt) {
    const float4 n = *reinterpret_cast<const float4*>(src);
    if (!wt) {
        *reinterpret_cast<float4*>(dst) = n;
    } else if (wt->x >= 0.0f) {
        float4 o = *reinterpret_cast<const float4*>(dst);
        o.x = merge_value(wt->x, wt->y, o.x, n.x);
        o.y = merge_value(wt->x, wt->y, o.y, n.y);
        o.z = merge_value(wt->x, wt->y, o.z, n.z);
        o.w = merge_value(wt->x, wt->y, o.w, n.w);
        *reinterpret_cast<float4*>(dst) = o;
    }
}
__device__ __forceinline__ void fa_out1(floatX* dst, floatX v, const float2*) { *dst = v; }
__device__ __forceinline__ void fa_out1(float* dst, float v, const float2* wt) {
    if (!wt) *dst = v;
    else if (wt->x >= 0.0f) *dst = merge_value(wt->x, wt->y, *dst, v);
}

// Staged O rows [0, nq) to og (row stride ldo), by nthreads threads of which this is thread tid:
// 16-byte rows where og and ldo allow, else one element per store; with merge weights wts (per
// row, fp32 only) merged into og instead.
template <int HS, typename T>
__device__ __forceinline__ void fa_copy_o(const T* Os, T* og, long long ldo, int nq, const float2* wts, int tid,
                                          int nthreads) {
    constexpr int V = 16 / sizeof(T);   // elements per 16 bytes
    if (((uintptr_t)og & 15) == 0 && ldo % V == 0) {   // (h * HS elements: 16-byte multiples)
        for (int idx = tid; idx < nq * (HS / V); idx += nthreads) {
            const int r = idx / (HS / V), c = V * (idx % (HS / V));
            fa_out16(og + r * ldo + c, Os + fa_o_at<HS>(Os, r, c), wts ? wts + r : nullptr);
        }
    } else {
        for (int idx = tid; idx < nq * HS; idx += nthreads) {
            const int r = idx / HS, c = idx % HS;
            fa_out1(og + r * ldo + c, Os[fa_o_at<HS>(Os, r, c)], wts ? wts + r : nullptr);
        }
    }
}

// The block's O rows [0, nq) (normalised by inv) staged in shared memory Os, then written to og
// (fa_copy_o).
template <int HS, typename T>
__device__ __forceinline__ void fa_write_o(T* Os, T* og, long long ldo, int nq, const FaFwdWarp<HS>& w,
                                           const float inv[2][2], int r0, const float2* wts) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
ATTN_UNROLL
    for (int rt = 0; rt < 2; rt++)
ATTN_UNROLL
        for (int n = 0; n < HS / 8; n++)
ATTN_UNROLL
            for (int hi = 0; hi < 2; hi++) {
                const int r = r0 + 16 * rt + 8 * hi + g;
                fa_put_pair(Os + fa_o_at<HS>(Os, r, 8 * n + 2 * t), w.acc[rt][n][2 * hi] * inv[rt][hi],
                            w.acc[rt][n][2 * hi + 1] * inv[rt][hi]);
            }
    __syncthreads();
    fa_copy_o<HS>(Os, og, ldo, nq, wts, threadIdx.x, FaFwd<HS>::THREADS);
}

// The lse of row r of the block (l: the row's sum, m: its max in scaled log2 units) into lse[r];
// with merge weights wts (a.merge) merged with the lse there instead, and the row's weights left in
// wts[r] (-1: this row is empty, the old one stays).
__device__ __forceinline__ void fa_row_lse(float* lse, float2* wts, int r, float l, float m) {
    const float lb = l > 0.0f ? (m + log2f(l)) * LN2 : -INFINITY;
    if (!wts) {
        lse[r] = lb;
    } else if (lb == -INFINITY) {
        wts[r] = make_float2(-1.0f, 0.0f);
    } else {
        const MergeWeights mw = merge_weights(lse[r], lb);
        wts[r] = make_float2(mw.wa, mw.wb);
        lse[r] = mw.lse;
    }
}

// The online softmax's row max m (scaled log2 units; scale_log2 > 0) updated with mx, the max of
// this lane's raw scores of the row (reduced over its group here); ref, what the scores subtract
// (m, or 0 for a masked row that has seen no key yet: its max stays -inf and its scores are -inf;
// without the mask every row has a finite max), and corr, the old sums' factor (0 for the first
// keys a row sees).
template <bool MASK>
__device__ __forceinline__ void fa_row_max(float& m, float mx, float scale_log2, float& ref, float& corr) {
    const float mo = m;
    m = fmaxf(mo, group_max(mx) * scale_log2);
    ref = MASK && m == -INFINITY ? 0.0f : m;
    corr = ex2_approx_ftz(mo - ref);
}

// The masked tiles' per-row key ranges: this lane's rows 16 rt + 8 hi + g of the warp see the keys
// [lo[16 rt + 8 hi + g], vis[rt][hi]), the warp's rows together [lo[0], wvis) (its first row's
// first key, its last row's end), all counted from key kshift. lo: the sliding window's first keys
// of the warp's rows, in shared memory (SPLIT), or NULL (no lower bounds: LOWER false).
struct FaFwdBounds {
    int vis[2][2];
    int wvis;
    const int* lo;
};

// Keys js .. js + KS - 1 (K rows at Kt, V rows at Vt in shared memory) for this warp's 32 rows:
// S = Q K^T, the online softmax, O += P V. MASK: scores of key j >= vis[rt][hi] (and with LOWER,
// the sliding window's, of key j < lo[16 rt + 8 hi + g]) are -inf, and only the 16-key blocks from
// the one holding lo[0] (LOWER; else the first) to the one holding wvis - 1 are computed; without
// MASK every row sees every key.
template <int HS, bool MASK, bool LOWER>
__device__ __forceinline__ void flash_forward_keys(FaFwdWarp<HS>& w, const AttnArgs& a, int js, const floatX* Qs,
                                                   const floatX* Kt, const floatX* Vt, int qo, int ko, int vo,
                                                   const FaFwdBounds& bd) {
    typedef FaFwd<HS> F;
    constexpr int KS = F::KS, NT = HS / 8;
    const int t = threadIdx.x % 4;
    const int nkb = MASK ? (min(KS, bd.wvis - js) + 15) / 16 : KS / 16;   // 16-key blocks to compute
    const int kb0 = LOWER ? max(0, bd.lo[0] - js) / 16 : 0;              // ... from this one on
    if (MASK && kb0 >= nkb) return;   // warp-uniform
    float s[2][KS / 8][4];
ATTN_UNROLL
    for (int rt = 0; rt < 2; rt++)
ATTN_UNROLL
        for (int n = 0; n < KS / 8; n++) s[rt][n][0] = s[rt][n][1] = s[rt][n][2] = s[rt][n][3] = 0.0f;
    // S (32 x KS) = Q_w K^T: each K fragment feeds both row tiles.
ATTN_UNROLL
    for (int kk = 0; kk < HS / 16; kk++) {
        uint32_t qa[2][4];
ATTN_UNROLL
        for (int rt = 0; rt < 2; rt++) {
            if (F::Q_IN_REGS) {
ATTN_UNROLL
                for (int e = 0; e < 4; e++) qa[rt][e] = w.qf[rt][kk % F::QF][e];
            } else {
                ldmatrix_x4(qa[rt], Qs + fa_chunk_at<typename F::TQ>(qo, 16 * rt, 2 * kk));
            }
        }
ATTN_UNROLL
        for (int nb = 0; nb < KS / 16; nb++) {
            if (MASK && nb >= nkb) break;   // warp-uniform
            if (LOWER && nb < kb0) continue;   // (its scores stay 0, masked below)
            uint32_t kb[4];
            ldmatrix_x4(kb, Kt + fa_chunk_at<typename F::TK>(ko, 16 * nb, 2 * kk));
            fa_mma_pair(s[0] + 2 * nb, qa[0], kb);
            fa_mma_pair(s[1] + 2 * nb, qa[1], kb);
        }
    }
    // Online softmax on the fragments, m in scaled log2 units: p = 2^(s * scale_log2 - m), one FFMA
    // and one ex2 per score; P packed to bf16 A fragments (the operands of P V) row tile by row tile.
    uint32_t pa[2][KS / 16][4];
ATTN_UNROLL
    for (int rt = 0; rt < 2; rt++) {
ATTN_UNROLL
        for (int hi = 0; hi < 2; hi++) {
            const int lo = LOWER ? bd.lo[16 * rt + 8 * hi + (threadIdx.x % 32) / 4] : 0;
            float mx = -INFINITY;
ATTN_UNROLL
            for (int n = 0; n < KS / 8; n++) {
ATTN_UNROLL
                for (int e = 0; e < 2; e++) {
                    const int j = js + 8 * n + 2 * t + e;
                    if (MASK && (j >= bd.vis[rt][hi] || (LOWER && j < lo))) s[rt][n][2 * hi + e] = -INFINITY;
                    mx = fmaxf(mx, s[rt][n][2 * hi + e]);
                }
            }
            float ref, corr;
            fa_row_max<MASK>(w.m[rt][hi], mx, a.scale_log2, ref, corr);
            float sum = 0.0f;
ATTN_UNROLL
            for (int n = 0; n < KS / 8; n++) {
ATTN_UNROLL
                for (int e = 0; e < 2; e++) {
                    float& x = s[rt][n][2 * hi + e];
                    x = ex2_approx_ftz(fmaf(x, a.scale_log2, -ref));
                    sum += x;
                }
            }
            w.l[rt][hi] = w.l[rt][hi] * corr + sum;   // this lane's columns; the group's sum at the end
ATTN_UNROLL
            for (int n = 0; n < NT; n++) {
                w.acc[rt][n][2 * hi] *= corr;
                w.acc[rt][n][2 * hi + 1] *= corr;
            }
        }
ATTN_UNROLL
        for (int kb = 0; kb < KS / 16; kb++) pack_a_fragment(pa[rt][kb], s[rt][2 * kb], s[rt][2 * kb + 1]);
    }
    // O += P V, P straight from the registers; each V fragment feeds both row tiles.
ATTN_UNROLL
    for (int kb = 0; kb < KS / 16; kb++) {
        if (MASK && kb >= nkb) break;
        if (LOWER && kb < kb0) continue;   // (P = 0 there)
ATTN_UNROLL
        for (int np = 0; np < NT / 2; np++) {
            uint32_t vb[4];
            ldmatrix_x4_trans(vb, Vt + fa_chunk_at<typename F::TK>(vo, 16 * kb, 2 * np));
            fa_mma_pair(w.acc[0] + 2 * np, pa[0][kb], vb);
            fa_mma_pair(w.acc[1] + 2 * np, pa[1][kb], vb);
        }
    }
}

// One key tile kt of nkt: request tile kt + 1, wait for tile kt, compute it in sub-tiles of KS keys
// (flash_forward_keys), and wait for every warp before its stage is refilled. tk: the keys at kg on.
template <int HS, bool MASK, bool LOWER>
__device__ __forceinline__ void flash_forward_tile(FaFwdWarp<HS>& w, const AttnArgs& a, int tk, int kt, int nkt,
                                                   const floatX* Qs, floatX* Ks, floatX* Vs, const floatX* kg,
                                                   const floatX* vg, int qo, int ko, int vo, const FaFwdBounds& bd) {
    typedef FaFwd<HS> F;
    typedef typename F::TK T;
    constexpr int BK = F::BK, KS = F::KS;
    const int j0 = kt * BK, st = kt & 1;
    if (kt + 1 < nkt) {   // the next tile flies while this one is computed
        const int nk = min(BK, tk - j0 - BK);
        fa_load_tile<HS, BK>(Ks + (st ^ 1) * T::ELEMS, kg + (long long)(j0 + BK) * a.ldk, a.ldk, nk, a.vec);
        fa_load_tile<HS, BK>(Vs + (st ^ 1) * T::ELEMS, vg + (long long)(j0 + BK) * a.ldv, a.ldv, nk, a.vec);
    }
    cp_async_commit();
    cp_async_wait<1>();   // everything but the tile just requested has landed
    __syncthreads();
ATTN_NO_UNROLL
    for (int sub = 0; sub < BK / KS; sub++) {
        const int off = st * T::ELEMS + sub * KS * T::LD;   // (rows of the stage's panels)
        flash_forward_keys<HS, MASK, LOWER>(w, a, j0 + sub * KS, Qs, Ks + off, Vs + off, qo, ko, vo, bd);
    }
    __syncthreads();   // every warp is done with stage st before the next request refills it
}

// This lane's masked-tile bounds (FaFwdBounds) for the block's nq rows at i0, keys counted from
// kshift; lo: the warp's rows' first keys (shared memory), or NULL.
__device__ __forceinline__ FaFwdBounds fa_fwd_bounds(const AttnArgs& a, int i0, int nq, int r0, int kshift,
                                                     const int* lo) {
    FaFwdBounds bd;
    const int g = (threadIdx.x % 32) / 4;
    const int wlast = min(r0 + 31, nq - 1);
    bd.wvis = (wlast >= r0 ? visible_keys(a, i0 + wlast) : 0) - kshift;
    bd.lo = lo;
ATTN_UNROLL
    for (int rt = 0; rt < 2; rt++)
ATTN_UNROLL
        for (int hi = 0; hi < 2; hi++) {
            const int r = r0 + 16 * rt + 8 * hi + g;
            bd.vis[rt][hi] = (r < nq ? visible_keys(a, i0 + r) : 0) - kshift;
        }
    return bd;
}

// Grid (query tiles, NH, B * a.splits), latest query tiles (the most keys) first; FaFwd<HS>::THREADS
// threads. Writes o (fp32, or floatX into a.ox when set) and lse, or with a.merge (fp32 o, no
// splits) merges its result into the o and lse already there; with a.splits > 1 (split-KV) the
// key tiles a query tile sees are cut into a.splits contiguous ranges, block z taking range
// z % splits of sequence z / splits and writing its partial as sequence z of o and lse (the
// launcher's partial buffers, merged by flash_split_merge_kernel). Two blocks (8 warps) per SM: up
// to 255 registers per thread. SPLIT: the instance whose key tiles start anywhere: split-KV's
// ranges, and every call under a sliding window or a document mask (masked_below; split or not),
// whose tiles start at the one holding the first key the block's first query sees and whose
// masked tiles bound each row from below too. Without it the key tiles start at 0, which the register allocation needs
// at HS 128 on sm_80 (a variable start spills 24 bytes).
template <int HS, bool SPLIT>
__global__ void __launch_bounds__(FaFwd<HS>::THREADS, 2) flash_forward_kernel(const AttnArgs a) {
    typedef FaFwd<HS> F;
    constexpr int BQ = F::BQ, BK = F::BK, NT = HS / 8;   // NT: 8-column tiles of O
    DYNAMIC_SHARED(unsigned char, smem);
    floatX* Qs = reinterpret_cast<floatX*>(smem);
    floatX* Ks = reinterpret_cast<floatX*>(smem + F::Q);   // stage st at Ks + st * TK::ELEMS
    floatX* Vs = reinterpret_cast<floatX*>(smem + F::Q + 2 * F::KV);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int NH = gridDim.y, h = blockIdx.y, b = SPLIT ? blockIdx.z / a.splits : blockIdx.z;
    const int i0 = (gridDim.x - 1 - blockIdx.x) * BQ;
    const int nq = min(BQ, a.Tq - i0);
    const int nseen = (visible_keys(a, i0 + nq - 1) + BK - 1) / BK;   // up to what the last query sees
    // ... and under a window or documents from the tile holding what the first query sees first
    // (SPLIT; both lower bounds grow with the position, so the first query's is the block's lowest).
    const int kfirst = SPLIT ? first_visible_key(a, b, i0) / BK : 0;
    // The block's key tiles: kfirst .. nseen - 1, or with splits its range of them; key indices
    // below (tiles, visible counts, the keys left) count from the range's first key, kshift.
    const int kt0 = SPLIT ? kfirst + (blockIdx.z % a.splits) * (nseen - kfirst) / a.splits : 0;
    const int kshift = kt0 * BK;
    const int nkt = (SPLIT ? kfirst + (blockIdx.z % a.splits + 1) * (nseen - kfirst) / a.splits : nseen) - kt0;
    // Keys from the range's first on: a.Tk, or with SPLIT kept in shared memory and read per tile
    // (a register through the loop spills at HS 128).
    __shared__ int split_keys_left;
    if (SPLIT && threadIdx.x == 0) split_keys_left = a.Tk - kshift;
    // SPLIT: the masked tiles bound each row from below too, by its first key under a window or
    // documents (0 without either; counted from kshift) in shared memory, visible after the
    // barrier below Q's load. The tiles before nlow, up to the one holding the last query's first
    // key, are cut by the rows' lower edges (none without a window or documents).
    const int nlow = SPLIT ? min(nkt, max(0, first_visible_key(a, b, i0 + nq - 1) - kshift + BK - 1) / BK) : 0;
    __shared__ int row_lo[SPLIT ? BQ : 1];
    if (SPLIT)
        for (int r = threadIdx.x; r < BQ; r += F::THREADS) row_lo[r] = (r < nq ? first_visible_key(a, b, i0 + r) : 0) - kshift;
    // Tiles the first query, hence every row, sees whole (the unmasked loop), within the range.
    const int nfull = SPLIT ? max(0, min(visible_keys(a, i0) - kshift, nkt * BK) / BK) : visible_keys(a, i0) / BK;
    const floatX* kg = a.k + ((long long)b * a.Tk + kshift) * a.ldk + (long long)h * HS;
    const floatX* vg = a.v + ((long long)b * a.Tk + kshift) * a.ldv + (long long)h * HS;

    fa_load_tile<HS, BQ>(Qs, a.q + ((long long)b * a.Tq + i0) * a.ldq + (long long)h * HS, a.ldq, nq, a.vec);
    cp_async_commit();
    if (nkt > 0) {
        const int nk = min(BK, a.Tk - kshift);
        fa_load_tile<HS, BK>(Ks, kg, a.ldk, nk, a.vec);
        fa_load_tile<HS, BK>(Vs, vg, a.ldv, nk, a.vec);
    }
    cp_async_commit();

    const int r0 = warp * 32;   // this warp's rows r0 .. r0 + 31 of the block

    // This lane's ldmatrix rows: Q (A operand, per row tile), K (B operand of S), V (B of P V, .trans).
    const int qo = F::TQ::chunk(r0 + (lane & 15), lane >> 4);
    const int ko = F::TK::chunk(((lane >> 4) << 3) + (lane & 7), (lane >> 3) & 1);
    const int vo = F::TK::chunk(lane & 15, lane >> 4);

    FaFwdWarp<HS> w;
ATTN_UNROLL
    for (int rt = 0; rt < 2; rt++) {
ATTN_UNROLL
        for (int n = 0; n < NT; n++) w.acc[rt][n][0] = w.acc[rt][n][1] = w.acc[rt][n][2] = w.acc[rt][n][3] = 0.0f;
        w.m[rt][0] = w.m[rt][1] = -INFINITY;
        w.l[rt][0] = w.l[rt][1] = 0.0f;
    }
    cp_async_wait<1>();   // Q has landed (the first K/V tile may still fly)
    __syncthreads();
    if (F::Q_IN_REGS) {
ATTN_UNROLL
        for (int rt = 0; rt < 2; rt++)
ATTN_UNROLL
            for (int kk = 0; kk < F::QF; kk++)
                ldmatrix_x4(w.qf[rt][kk], Qs + fa_chunk_at<typename F::TQ>(qo, 16 * rt, 2 * kk));
    }

    const FaFwdBounds none = {};   // (no mask)
    if (SPLIT) {
        // One loop: the tiles every row sees whole ([nlow, nfull)) unmasked, the others masked from
        // both sides (one inlined copy of each step: a second masked copy spills at HS 128).
        const FaFwdBounds bd = fa_fwd_bounds(a, i0, nq, r0, kshift, row_lo + r0);
        for (int kt = 0; kt < nkt; kt++) {
            if (kt >= nlow && kt < nfull) flash_forward_tile<HS, false, false>(w, a, split_keys_left, kt, nkt, Qs, Ks, Vs, kg, vg, qo, ko, vo, none);
            else flash_forward_tile<HS, true, true>(w, a, split_keys_left, kt, nkt, Qs, Ks, Vs, kg, vg, qo, ko, vo, bd);
        }
    } else {
        int kt = 0;
        for (; kt < nfull; kt++) flash_forward_tile<HS, false, false>(w, a, a.Tk, kt, nkt, Qs, Ks, Vs, kg, vg, qo, ko, vo, none);
        if (kt < nkt) {
            // The masked tiles: the keys the warp sees, and those this lane's rows r0 + 16 rt + 8 hi + g see.
            const FaFwdBounds bd = fa_fwd_bounds(a, i0, nq, r0, kshift, nullptr);
            for (; kt < nkt; kt++) flash_forward_tile<HS, true, false>(w, a, a.Tk, kt, nkt, Qs, Ks, Vs, kg, vg, qo, ko, vo, bd);
        }
    }
    cp_async_wait<0>();   // nothing may still be in flight when the buffers are reused
    __syncthreads();      // (no tiles: no tile step has synchronised the block since Q was read)

    // Normalise, stage O in shared memory, then write it in 16-byte rows.
    float inv[2][2];
ATTN_UNROLL
    for (int rt = 0; rt < 2; rt++)
ATTN_UNROLL
        for (int hi = 0; hi < 2; hi++) {
            w.l[rt][hi] = group_sum(w.l[rt][hi]);
            inv[rt][hi] = w.l[rt][hi] > 0.0f ? 1.0f / w.l[rt][hi] : 0.0f;
        }
    // The rows' lse; with a.merge (fp32 o, no splits) the merge with the partial already in (o,
    // lse): the merged lse, and the rows' weights (after the O staging) for fa_write_o, visible
    // after its __syncthreads.
    float2* wts = a.merge ? reinterpret_cast<float2*>(smem + BQ * F::OLD * sizeof(float)) : nullptr;
    if (t == 0) {
        float* lse = a.lse + ((long long)blockIdx.z * NH + h) * a.Tq + i0;
ATTN_UNROLL
        for (int rt = 0; rt < 2; rt++)
ATTN_UNROLL
            for (int hi = 0; hi < 2; hi++) {
                const int r = r0 + 16 * rt + 8 * hi + g;
                if (r < nq) fa_row_lse(lse, wts, r, w.l[rt][hi], w.m[rt][hi]);
            }
    }
    // Outputs of sequence blockIdx.z: b itself, or with splits the partial (b, split) of the
    // launcher's (B * splits, Tq) partial outputs.
    const long long ooff = ((long long)blockIdx.z * a.Tq + i0) * a.ldo + (long long)h * HS;   // the block's first row
    if (a.ox) fa_write_o<HS>(reinterpret_cast<floatX*>(smem), a.ox + ooff, a.ldo, nq, w, inv, r0, nullptr);
    else fa_write_o<HS>(reinterpret_cast<float*>(smem), a.o + ooff, a.ldo, nq, w, inv, r0, wts);
}
