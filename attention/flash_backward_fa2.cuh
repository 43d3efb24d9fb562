// The backward in FlashAttention-2's warp layout (ATTENTION_BWD_LAYOUT=fa2, HS 64 and 128): the
// block, its order, the ordered dQ adds and the epilogue are flash_backward.cuh's; the work of a
// 64-query step is split differently among its 8 warps, so that each operand fragment a warp loads
// from shared memory feeds more MMAs (attention/cuda_perf_attention.md, "The backward on an H100"):
//   S = Q K^T, dP = dO V^T   warps 2 (queries) x 4 (keys) of 32 x 32: P and dS (bf16) to shared
//                            memory, query-major
//   dV += P^T dO, dK += dS^T Q   warps 4 (keys) x 2 (channels) of 32 keys x HS/2, in registers
//   dQ = dS K                warps 2 (queries) x 4 (channels) of 32 queries x HS/4, then added
//                            into the fp32 accumulator on the key tile's turn
// 6144 HS + 32 KiB of ldmatrix bytes per step become 3584 HS + 128 KiB (and 32 KiB of P, dS stores).
// Causal calls only (masked_below false: no window, no document mask): the launcher sends the
// others to flash_backward.cuh, whose layout holds the rows' lower bounds without spilling (this
// one, with the window's, spilled 20 bytes at HS 128 on sm_90).
#pragma once
#include "attention/flash_backward.cuh"

template <int HS> struct FaBwd2 {
    static_assert(HS == 64 || HS == 128, "the FA2-layout backward serves HS 64 and 128");
    static constexpr int BK = 128, THREADS = 256;
    typedef FaTile<HS, BK> TK;             // K, V
    typedef FaTile<HS, FA_BWD_BQ> TQ;      // Q, dO (a stage)
    typedef FaTile<BK, FA_BWD_BQ> TP;      // P and dS: 64 queries x 128 keys, two swizzled panels
    static constexpr size_t KV = TK::BYTES, QG = TQ::BYTES;
    static constexpr size_t PS = TP::BYTES;
    static_assert(TQ::LD == TP::LD, "dS rows are addressed from the Q tile's lane offsets");
    static constexpr size_t VEC = sizeof(float) * FA_BWD_BQ;
    // K, V; Q and dO in two stages; P and dS; lse and D in two stages.
    static constexpr size_t SMEM = 2 * KV + 4 * QG + 2 * PS + 4 * VEC;
};

template <int HS>
__global__ void __launch_bounds__(256, 1) flash_backward_fa2_kernel(const AttnArgs a, int NH) {
    typedef FaBwd2<HS> L;
    typedef typename L::TK TK;
    typedef typename L::TQ TQ;
    typedef typename L::TP TP;
    constexpr int BQ = FA_BWD_BQ, BK = L::BK, HN = HS / 16;   // HN: 8-channel tiles of a warp's HS/2
    DYNAMIC_SHARED(unsigned char, smem);
    floatX* Ks = reinterpret_cast<floatX*>(smem);
    floatX* Vs = reinterpret_cast<floatX*>(smem + L::KV);
    floatX* Qs = reinterpret_cast<floatX*>(smem + 2 * L::KV);                 // stage st at + st * TQ::ELEMS
    floatX* Gs = reinterpret_cast<floatX*>(smem + 2 * L::KV + 2 * L::QG);
    floatX* Ps = reinterpret_cast<floatX*>(smem + 2 * L::KV + 4 * L::QG);     // P: 64 queries x 128 keys
    floatX* Ss = reinterpret_cast<floatX*>(smem + 2 * L::KV + 4 * L::QG + L::PS);   // dS, likewise
    float* lse = reinterpret_cast<float*>(smem + 2 * L::KV + 4 * L::QG + 2 * L::PS);
    float* Dv = lse + 2 * BQ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    FaBwdBlock k = fa_bwd_block<HS, BK>(a, NH);
    k.qt1 = k.nqt;   // causal calls only: every query tile from qt0 on (no window or document bounds)
    const int nqt = k.nqt, b = k.b, h = k.h, kt = k.kt, j0 = k.j0, qt0 = k.qt0;
    int last_kt = kt;   // the last key tile that sees the current query tile (it adds first)
    if (qt0 >= nqt && !a.dkx) return;   // no query sees the key tile, and dK, dV are added
    fa_bwd_load_first<HS, BK>(a, k, NH, Ks, Vs, Qs, Gs, lse, Dv);

    // S, dP: this warp's 32 queries (qm ..) and 32 keys (kn ..) of the step; a lane's key columns
    // are kn + 8n + 2t + e.
    const int qm = 32 * (warp / 4), kn = 32 * (warp % 4);
    // dV, dK: this warp's 32 keys (kd ..) and HS/2 channels (cd ..); dQ: 32 queries (qq ..) and HS/4
    // channels (cq ..).
    const int kd = 32 * (warp % 4), cd = (HS / 2) * (warp / 4);
    const int qq = 32 * (warp / 4), cq = (HS / 4) * (warp % 4);
    // This lane's ldmatrix rows and the P, dS fragment stores, as base offsets (fa_chunk_at):
    // Q, dO (and dS for dQ: the same offsets) row tiles; K, V fragments; P^T, dS^T and dO, Q
    // (transposed) for dV, dK; K (transposed) for dQ.
    const int qa_at = TQ::chunk(qm + (lane & 15), lane >> 4);
    const int kb_at = TK::chunk(kn + ((lane >> 4) << 3) + (lane & 7), (lane >> 3) & 1);
    const int ps_at = TP::chunk(qm + g, kn / 8) + 2 * t;
    const int pt_at = TP::chunk(((lane >> 4) << 3) + (lane & 7), kd / 8 + ((lane >> 3) & 1));
    const int gt_at = TQ::chunk(lane & 15, cd / 8 + (lane >> 4));
    const int kt_at = TK::chunk(lane & 15, cq / 8 + (lane >> 4));
    float dk[2][HN][4], dv[2][HN][4];
ATTN_UNROLL
    for (int r = 0; r < 2; r++)
ATTN_UNROLL
        for (int n = 0; n < HN; n++)
ATTN_UNROLL
            for (int e = 0; e < 4; e++) dk[r][n][e] = dv[r][n][e] = 0.0f;

    for (int qt = qt0; qt < nqt; qt++) {
        const int i0 = qt * BQ;
        const FaBwdStage sg = fa_bwd_step_begin<HS, BK>(a, k, NH, qt, Qs, Gs, lse, Dv, last_kt);
        const floatX *Qt = sg.q, *Gt = sg.dout;
        const float *Lt = sg.lse, *Dt = sg.d;

        // S = Q K^T and dP = dO V^T, 32 x 32; then P and dS = P (dP - D) to shared memory.
        float s[2][4][4], dp[2][4][4];
ATTN_UNROLL
        for (int r = 0; r < 2; r++)
ATTN_UNROLL
            for (int n = 0; n < 4; n++)
ATTN_UNROLL
                for (int e = 0; e < 4; e++) s[r][n][e] = dp[r][n][e] = 0.0f;
        // Whether a query of the warp sees its first key, and whether all its queries see all its
        // keys (recomputed per step rather than kept: registers).
        const int fq_first = j0 + kn < a.Tk ? first_query(a, j0 + kn) : a.Tq;
        const int last_key = min(j0 + kn + 31, a.Tk - 1);
        const int fq_all = last_key >= j0 + kn ? first_query(a, last_key) : a.Tq;
        const bool any = i0 + qm + 31 >= fq_first && i0 + qm < a.Tq;
        if (any) {
ATTN_UNROLL
            for (int kk = 0; kk < HS / 16; kk++) {
                uint32_t qa[2][4], ga[2][4];
ATTN_UNROLL
                for (int r = 0; r < 2; r++) {
                    ldmatrix_x4(qa[r], Qt + fa_chunk_at<TQ>(qa_at, 16 * r, 2 * kk));
                    ldmatrix_x4(ga[r], Gt + fa_chunk_at<TQ>(qa_at, 16 * r, 2 * kk));
                }
ATTN_UNROLL
                for (int j = 0; j < 2; j++) {   // each K, V fragment feeds both 16-query row tiles
                    uint32_t kb[4], vb[4];
                    ldmatrix_x4(kb, Ks + fa_chunk_at<TK>(kb_at, 16 * j, 2 * kk));
                    ldmatrix_x4(vb, Vs + fa_chunk_at<TK>(kb_at, 16 * j, 2 * kk));
ATTN_UNROLL
                    for (int r = 0; r < 2; r++) {
                        fa_mma_pair(s[r] + 2 * j, qa[r], kb);
                        fa_mma_pair(dp[r] + 2 * j, ga[r], vb);
                    }
                }
            }
        }
        // Every (query, key) pair of the warp visible, every query and key a real one: no mask.
        const bool mask = i0 + qm < fq_all || i0 + qm + 32 > a.Tq || j0 + kn + 32 > a.Tk;
ATTN_UNROLL
        for (int r = 0; r < 2; r++)
ATTN_UNROLL
            for (int hi = 0; hi < 2; hi++) {
                const int qi = qm + 16 * r + 8 * hi + g, q = i0 + qi;
                const float l2 = Lt[qi] * LOG2E, dd = Dt[qi];   // lse in log2 units
                // The row's keys kn + col with col < vis are visible (and real: vis <= Tk - j0 - kn).
                const int vis = !any || q >= a.Tq ? 0 : !mask ? 32 : min(visible_keys(a, q), a.Tk) - j0 - kn;
ATTN_UNROLL
                for (int n = 0; n < 4; n++) {
                    float p[2], ds[2];
ATTN_UNROLL
                    for (int e = 0; e < 2; e++) {
                        p[e] = ex2_approx_ftz(fmaf(s[r][n][2 * hi + e], a.scale_log2, -l2));
                        // A query that sees no key (lse = -inf, P = inf here) is always masked.
                        if (8 * n + 2 * t + e >= vis) p[e] = 0.0f;
                        ds[e] = p[e] * (dp[r][n][2 * hi + e] - dd);
                    }
                    const int off = fa_chunk_at<TP>(ps_at, 16 * r + 8 * hi, n);
                    *reinterpret_cast<uint32_t*>(Ps + off) = pack_bf16x2(p[0], p[1]);
                    *reinterpret_cast<uint32_t*>(Ss + off) = pack_bf16x2(ds[0], ds[1]);
                }
            }
        __syncthreads();   // P and dS of the step are complete

        // dV += P^T dO and dK += dS^T Q: A = P^T, dS^T (32 keys x 16 queries, by ldmatrix.trans of
        // the query-major tiles), B = dO, Q (16 queries x 16 channels, by ldmatrix.trans).
ATTN_UNROLL
        for (int kq = 0; kq < BQ / 16; kq++) {
            uint32_t pa[2][4], sa[2][4];
ATTN_UNROLL
            for (int r = 0; r < 2; r++) {
                const int off = fa_chunk_at<TP>(pt_at, 16 * kq, 2 * r);
                ldmatrix_x4_trans(pa[r], Ps + off);
                ldmatrix_x4_trans(sa[r], Ss + off);
            }
ATTN_UNROLL
            for (int np = 0; np < HN / 2; np++) {
                uint32_t gb[4], qb[4];
                ldmatrix_x4_trans(gb, Gt + fa_chunk_at<TQ>(gt_at, 16 * kq, 2 * np));
                ldmatrix_x4_trans(qb, Qt + fa_chunk_at<TQ>(gt_at, 16 * kq, 2 * np));
ATTN_UNROLL
                for (int r = 0; r < 2; r++) {
                    fa_mma_pair(dv[r] + 2 * np, pa[r], gb);
                    fa_mma_pair(dk[r] + 2 * np, sa[r], qb);
                }
            }
        }

        // dQ (32 queries x HS/4) = dS K: A = dS (ldmatrix of the query-major tile), B = K (.trans).
        float dq[2][HS / 32][4];
ATTN_UNROLL
        for (int r = 0; r < 2; r++)
ATTN_UNROLL
            for (int n = 0; n < HS / 32; n++)
ATTN_UNROLL
                for (int e = 0; e < 4; e++) dq[r][n][e] = 0.0f;
ATTN_UNROLL
        for (int kb = 0; kb < BK / 16; kb++) {
            uint32_t da[2][4];
ATTN_UNROLL
            for (int r = 0; r < 2; r++) ldmatrix_x4(da[r], Ss + fa_chunk_at<TP>(qa_at, 16 * r, 2 * kb));   // (qq == qm)
ATTN_UNROLL
            for (int np = 0; np < HS / 64; np++) {
                uint32_t kb4[4];
                ldmatrix_x4_trans(kb4, Ks + fa_chunk_at<TK>(kt_at, 16 * kb, 2 * np));
ATTN_UNROLL
                for (int r = 0; r < 2; r++) fa_mma_pair(dq[r] + 2 * np, da[r], kb4);
            }
        }
        if (k.lagged && qt > qt0 && threadIdx.x == 0) fa_dq_release(k.sem + qt - 1);
        fa_dq_wait(k.sem + qt, (unsigned)(last_kt - kt));   // this key tile's turn: the later ones have added
        __syncthreads();
ATTN_UNROLL
        for (int r = 0; r < 2; r++) {
            const int q_lo = i0 + qq + 16 * r + g;
            const long long row_lo = (long long)b * a.Tq + q_lo;
ATTN_UNROLL
            for (int n = 0; n < HS / 32; n++) {
                float* p = k.dq_out + row_lo * k.lddq + h * HS + cq + 8 * n + 2 * t;
                if (q_lo < a.Tq) fa_red_pair(p, a.scale * dq[r][n][0], a.scale * dq[r][n][1], k.red_v2);
                if (q_lo + 8 < a.Tq) fa_red_pair(p + 8 * k.lddq, a.scale * dq[r][n][2], a.scale * dq[r][n][3], k.red_v2);
            }
        }
        __syncthreads();   // P, dS and stage st are free again; every dQ add of the block issued
        if (!k.lagged && threadIdx.x == 0) fa_dq_release(k.sem + qt);
    }
    if (k.lagged && qt0 < nqt && threadIdx.x == 0) fa_dq_release(k.sem + nqt - 1);
    cp_async_wait<0>();

    // dK, dV of the warp's keys and channels: added once, or written in floatX.
ATTN_UNROLL
    for (int r = 0; r < 2; r++) {
        const int key = j0 + kd + 16 * r + g;
        const long long key_lo = (long long)b * a.Tk + key;
        const bool ok_lo = key < a.Tk, ok_hi = key + 8 < a.Tk;
ATTN_UNROLL
        for (int n = 0; n < HN; n++)
            fa_store_dkdv(a, key_lo, h * HS + cd + 8 * n + 2 * t, dk[r][n], dv[r][n], ok_lo, ok_hi);
    }
}
