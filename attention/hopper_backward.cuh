// The Hopper (sm_90a) backward of the bf16 build: TMA loads, wgmma, one producer warpgroup and two
// consumer warpgroups, dQ reduced through shared memory by TMA in the deterministic order of
// flash_backward.cuh (FlashAttention-3's backward; its overlaps inside a warpgroup with OVERLAP).
//
// A block owns 128 keys of one (sequence, head) (the grid and its order: fa_bwd_block, the last key
// tiles first) and walks the 64-query tiles that see them, as flash_backward.cuh does:
// - warpgroup 0 (setmaxnreg.dec 32): its thread 0, the producer, loads K and V once, then per query
//   tile Q, dO (64 rows, 128-byte-swizzled panels: FaTile) and the rows' lse and D (64 floats) by
//   TMA into two stages, each completing its full mbarrier; it refills a stage once both consumers
//   have released it (empty, 256 arrivals). Its warp 1 is the reducer (below).
// - warpgroups 1 and 2, the consumers (setmaxnreg.inc 232), own 64 keys each and keep their dK, dV
//   in registers: S^T = K Q^T and dP^T = V dO^T by wgmma from shared memory (64 keys x 64
//   queries each), P^T = exp2(S^T scale - lse) and dS^T = P^T (dP^T - D) on the accumulators
//   (keys past Tk and queries that do not see a key masked to 0 by position), then dV += P^T dO
//   and dK += dS^T Q with P^T and dS^T packed to bf16 as wgmma's register A operand (dO and Q
//   MN-major), and dS^T to shared memory (bf16, one swizzled panel).
// - dQ (64 queries x HS) = dS K from shared memory (dS^T and K both MN-major): at HS 128 each
//   consumer computes 64 of the columns over the 128 keys; at HS 64 each its 64 keys' part, the
//   second added to the first in shared memory (a fixed order). The fp32 tile, scaled, is staged
//   in shared memory, and the reducer, warp 1 of the producer warpgroup, in the key tile's turn on
//   the query tile (the semaphores of flash_backward.cuh), adds it into the fp32 accumulator with
//   one cp.reduce.async.bulk.tensor add, waits for it, and passes the turn on, while the consumers
//   go on to the next query tile. Deterministic for every schedule.
// The schedule (HopBwdSched, ATTENTION_BWD_HOPPER): serial, the default, waits for each GEMM before
// the next step. overlap commits S^T and dP^T as two groups and computes P^T while dP^T is in
// flight, and issues the dQ GEMM behind dK, dV (their wait, and the stage's release, after it).
// regs is overlap with, at HS 64, the consumer's K and V rows held in registers (16 + 16 per
// thread, loaded once) as the A operands of S^T and dP^T, which then read only Q and dO from shared
// memory (at HS 80 and 128 there are no registers to spare: overlap). early is regs with the next
// query tile's S^T issued at the end of this one, behind its dQ: it runs while dQ is waited for and
// staged. At HS 64, and at HS 80 with dK, dV over 80 columns (DN 80); at HP 128 dK and dV's 128
// accumulators leave no room for the next S^T beside dQ (ptxas serializes every wgmma, C7512), and
// early is regs there. pingpong is early with, at HS 64, the consumers taking turns at the GEMMs
// (the forward's turns: dP^T in one, dV, dK and dQ in the next), so that one's element-wise work
// runs under the other's GEMMs; there each consumer's dQ reads only its own rows of dS^T, so the
// barriers of both consumers around it become each one's own. ds2 is early with two dS^T buffers
// (FlashAttention-3's two dS stages), tile i's in buffer i % 2: the next tile's dS^T goes to the
// other, so the barrier of both consumers after dQ (which kept the next tile's dS^T from being
// written before every dQ wgmma had read this one) is not needed; the consumers meet once a tile.
// The same operations in the same order on the same values: the same bits as serial.
// q128 (the launcher's, at HS 64 where Tq is a multiple of 128) is overlap on tiles of 128 queries
// (BQ 128): S^T and dP^T one m64n128 GEMM each, dS^T two panels, and each consumer's dQ its own 64
// queries over all 128 keys (DQ_BY_ROWS), with no partial sums: its own bits.
// Registers: setmaxnreg only moves the launch's 168 per thread between the warpgroups, so the
// counts sum to at most 3 x 168 = 504 per lane: 32 + 2 x 232 (FlashAttention-3's 24 + 2 x 240 spilled
// the reducer; 32 + 2 x 240 hung an H200, the consumers' .inc waiting forever); 40 + 2 x 232 with
// 128-query tiles, whose producer and reducer spilled 16 bytes in 32.
// Head sizes 64, 80 and 128: HS 80 in tiles of HP = 128 columns (rank-3 tensor maps, TMA's zeros
// past the head; HopBwd).
// Inputs: 16-byte aligned rows (a.vec), lse and D of 4-row chunks (a.vec_stats) and Tq a multiple
// of 64 (a dQ box never reaches into the next sequence); the launcher runs the sm_80 kernels
// otherwise. Under a sliding window or a document mask the LOWER instance of the serial schedule:
// a block walks only the query tiles that see its keys, each key's queries bounded from above too.
// Under nvcc only the sm_90a pass (CUDA_PTX_HAS_SM90A) has a body.
#pragma once
#include "attention/flash_backward.cuh"
#include "attention/hopper_forward.cuh"

// BQ_: queries per tile, 64, or 128 at HS 64 (the q128 form, ATTENTION_BWD_HOPPER=q128). DS_: dS^T
// buffers, 1, or 2 in the ds2 schedule (tile i's in buffer i % 2).
template <int HS_, int BQ_ = FA_BWD_BQ, int DS_ = 1> struct HopBwd {
    static constexpr int HS = HS_;
    static_assert(HS == 64 || HS == 80 || HS == 128, "the Hopper backward serves HS 64, 80 and 128");
    static_assert(BQ_ == FA_BWD_BQ || (BQ_ == 128 && HS == 64), "128-query tiles at HS 64 only (registers)");
    static_assert(DS_ == 1 || (DS_ == 2 && BQ_ == FA_BWD_BQ), "two dS^T buffers with 64-query tiles only (shared memory)");
    static constexpr int BK = 128, BQ = BQ_, CONSUMERS = 2, THREADS = 128 * (1 + CONSUMERS), STAGES = 2, DS_STAGES = DS_;
    // Tiles of HP columns, whole 64-column panels: HS 80 is padded to 128 (TMA fills the columns
    // past the head with zeros and skips them when it adds dQ); S^T and dP^T sum over the HS real
    // columns only, dK, dV and dQ span HP (their padding columns are 0 and never stored).
    static constexpr int HP = HS <= 64 ? 64 : 128;
    static constexpr int PRODUCER_REGS = BQ == 128 ? 40 : 32;   // (setmaxnreg: see Registers above)
    // dQ: at HP 128 consumer c computes columns 64 c .. over all keys; at HP 64 all columns over
    // its own 64 keys (SPLIT_KEYS), the partial sums added in shared memory; with 128-query tiles
    // all columns of its own 64 queries over all keys (DQ_BY_ROWS: no partial sums).
    static constexpr bool DQ_BY_ROWS = BQ == 128;
    static constexpr bool SPLIT_KEYS = HP == 64 && !DQ_BY_ROWS;
    typedef FaTile<HP, BK> TK;          // K, V
    typedef FaTile<HP, BQ> TQ;          // Q, dO (a stage)
    typedef FaTile<BQ, BK> TS;          // dS^T: 128 keys x BQ queries, BQ / 64 panels
    static constexpr size_t KV = TK::BYTES, QG = TQ::BYTES, VEC = BQ * sizeof(float);
    static constexpr size_t OFF_V = KV, OFF_Q = 2 * KV, OFF_G = OFF_Q + STAGES * QG, OFF_DS = OFF_G + STAGES * QG;
    // Two fp32 dQ tiles (BQ x HP): query tile i is staged in buffer i % 2 while the reducer adds
    // tile i - 1 from the other.
    static constexpr size_t DQ_TILE = (size_t)BQ * HP * sizeof(float);
    static constexpr size_t OFF_DQ = OFF_DS + DS_STAGES * TS::BYTES;
    static constexpr size_t OFF_LSE = OFF_DQ + 2 * DQ_TILE;   // lse, D per stage
    static constexpr size_t OFF_BAR = OFF_LSE + 2 * STAGES * VEC;
    static constexpr int NBAR = 1 + 2 * STAGES;   // kv_full, then per stage full, empty
    static constexpr size_t SMEM = OFF_BAR + NBAR * 8 + 1024;   // + the 1024-byte alignment
    static constexpr unsigned STAGE_TX = (unsigned)(2 * QG + 2 * VEC);
    static __device__ __forceinline__ uint64_t* full(uint64_t* bar, int st) { return bar + 1 + st; }
    static __device__ __forceinline__ uint64_t* empty(uint64_t* bar, int st) { return bar + 1 + STAGES + st; }
    static_assert(TS::SWIZZLE && TQ::SWIZZLE && TK::SWIZZLE, "64-column panels");
    static_assert(SMEM <= 227 * 1024, "one block per SM within the opt-in shared memory of sm_90");
};

enum HopBwdSched { HOP_BWD_SERIAL, HOP_BWD_OVERLAP, HOP_BWD_KV_REGS, HOP_BWD_EARLY, HOP_BWD_PINGPONG, HOP_BWD_DS2 };
// The shape of a schedule's kernel: ds2's two dS^T buffers.
template <int HS, int SCHED, int BQ = FA_BWD_BQ> using HopBwdOf = HopBwd<HS, BQ, SCHED == HOP_BWD_DS2 ? 2 : 1>;

// Named barriers (3 is the forward's epilogue, 4 and 5 its turns): of the consumers (256 threads),
// and per dQ staging buffer between them and the reducer warp (288: DQ_FULL + b, buffer b holds a
// staged tile; DQ_EMPTY + b, its reduction has read it). One pair per buffer, so that each
// barrier's rounds alternate strictly between the parties (a party never arrives twice on a
// barrier before the other has taken the round).
enum { HOP_BWD_DS = 6, HOP_BWD_DQ_PART = 7, HOP_BWD_DQ = 8, HOP_BWD_DQ_FULL = 9, HOP_BWD_DQ_EMPTY = 11 };
// The pingpong schedule's (HS 64): each consumer's own barrier (128 threads: 1 + c) in place of DS
// and DQ, and the turns of the forward (HOP_TURN + c: 4, 5). DQ_PART stays: consumer 0 arrives on
// it for tile i + 1 only in its turn after consumer 1's first turn of tile i + 1, which comes after
// consumer 1 has taken tile i's round.
enum { HOP_BWD_OWN = 1 };
constexpr int HOP_BWD_DQ_THREADS = 256 + 32;

// The reducer (warp 1 of the producer warpgroup): per query tile qt0 .. qend - 1, once the
// consumers have staged its dQ tile, lane 0 waits for the key tile's turn on the query tile (the
// semaphores of flash_backward.cuh), adds the tile into the fp32 accumulator with one
// cp.reduce.async.bulk.tensor, waits for it, and passes the turn on; then the staging is free.
template <typename F>
__device__ __forceinline__ void hop_bwd_reduce_dq(const AttnArgs& a, const FaBwdBlock& k, int qend, const CUtensorMap* dqmap,
                                                  const float* dQs) {
    constexpr int BQ = F::BQ, BK = F::BK;
    int last_kt = k.kt;   // the last key tile that sees the current query tile (it adds first)
    for (int qt = k.qt0; qt < qend; qt++) {
        fa_advance_last_kt<BK, BQ>(a, k, qt, last_kt);
        const int buf = (qt - k.qt0) % 2;
        named_barrier_sync(HOP_BWD_DQ_FULL + buf, HOP_BWD_DQ_THREADS);
        if (threadIdx.x % 32 == 0) {
            fa_dq_spin(k.sem + qt, (unsigned)(last_kt - k.kt));
            tma_reduce_add_3d(dqmap, dQs + buf * BQ * F::HP, 0, k.h, k.b * a.Tq + qt * BQ);
            bulk_commit();
            bulk_wait<0>();
            fa_dq_release(k.sem + qt);
        }
        __syncwarp();
        if (qt + 2 < qend) named_barrier_arrive(HOP_BWD_DQ_EMPTY + buf, HOP_BWD_DQ_THREADS);   // tile qt + 2's
    }
}

// Once a consumer's dV += P^T dO and dK += dS^T Q have landed (waited for): its accumulators are
// read again, and this thread is done with the stage's Q, dO, lse and D.
template <int DC>
__device__ __forceinline__ void hop_bwd_dkdv_landed(float* dk, float* dv, uint64_t* empty) {
ATTN_UNROLL
    for (int j = 0; j < DC / 2; j++) {
        wgmma_fence_operand(dk[j]);
        wgmma_fence_operand(dv[j]);
    }
    mbarrier_arrive(empty);
}

// A consumer's S^T = K_c Q^T or dP^T = V_c dO^T (64 keys x BQ queries) into acc: per 16 of the HS
// columns (the padding's zeros skipped) one wgmma, M_c (K_c or V_c) from shared memory at Mc, or
// with KV_REGS from this thread's fragments mr; Y (Q or dO) from the stage at Yt. Issued, not
// committed.
template <typename F, bool KV_REGS>
__device__ __forceinline__ void hop_bwd_issue_t(float* acc, const uint32_t (*mr)[4], const floatX* Mc, const floatX* Yt) {
ATTN_UNROLL
    for (int kk = 0; kk < F::HS / 16; kk++) {
        const uint64_t dy = hop_desc(Yt + (kk / 4) * F::TQ::PANEL + (kk % 4) * 16);
        if constexpr (KV_REGS) wgmma_m64n64k16_bf16_rs<0>(acc, mr[kk], dy, kk > 0);
        else wgmma_m64k16_bf16<F::BQ, 0, 0>(acc, hop_desc(Mc + (kk / 4) * F::TK::PANEL + (kk % 4) * 16), dy, kk > 0);
    }
}

// dV_c += P^T dO and dK_c += dS^T Q (A: the packed P^T, dS^T; B: dO and Q, MN-major): one wgmma per
// 64-column panel, or at DN 80 one m64n80k16 over both (the second panel at the descriptor's LBO;
// no MMA on HS 80's padding).
template <typename F, int DN>
__device__ __forceinline__ void hop_bwd_issue_dkdv(float* dk, float* dv, const uint32_t (*pa)[4],
                                                   const uint32_t (*da)[4], const floatX* Gt, const floatX* Qt) {
ATTN_UNROLL
    for (int kb = 0; kb < F::BQ / 16; kb++) {
        if constexpr (DN == 80) {
            const unsigned lbo = F::TQ::PANEL * sizeof(floatX);
            wgmma_m64n80k16_bf16_rs<1>(dv, pa[kb], smem_desc(Gt + kb * 16 * 64, lbo, 1024, 128), 1);
            wgmma_m64n80k16_bf16_rs<1>(dk, da[kb], smem_desc(Qt + kb * 16 * 64, lbo, 1024, 128), 1);
        } else {
ATTN_UNROLL
            for (int nh = 0; nh < F::HP / 64; nh++) {
                const int off = nh * F::TQ::PANEL + kb * 16 * 64;
                wgmma_m64n64k16_bf16_rs<1>(dv + 32 * nh, pa[kb], hop_desc(Gt + off), 1);
                wgmma_m64n64k16_bf16_rs<1>(dk + 32 * nh, da[kb], hop_desc(Qt + off), 1);
            }
        }
    }
}

// Grid B * NH * nkt (fa_bwd_block's order), HopBwd<HS, BQ>::THREADS threads. Tensor maps of rank 3,
// (HS columns, NH heads, rows): K and V over B Tk rows with boxes of 64 columns x 1 head x 128 rows,
// Q and dO over B Tq rows with 64 x 1 x BQ boxes (128-byte swizzle), the fp32 dQ destination
// (a.dq_acc, or a.dq) over B Tq rows with HP x 1 x BQ boxes (no swizzle); lse and D over (B NH
// rows, Tq columns) with BQ x 1 boxes. dK, dV as flash_backward_kernel. DN: the columns per wgmma of
// dV += P^T dO and dK += dS^T Q (hop_head_cols: 64, or 80 at HS 80). BQ: queries per tile, 64, or
// 128 at HS 64 in the overlap schedule (Tq a multiple of 128). LOWER: the instance for calls under
// a sliding window or a document mask (masked_below): the block walks only the query tiles that
// see its keys (FaBwdBlock's qt0 .. qt1 - 1, as flash_backward.cuh; the dQ order is the same), and
// a key's queries are bounded from above too (query_end).
template <int HS, int SCHED, int DN, int BQ, bool LOWER = false>
__global__ void __launch_bounds__(HopBwdOf<HS, SCHED, BQ>::THREADS, 1)
    hopper_backward_kernel(const __grid_constant__ CUtensorMap kmap, const __grid_constant__ CUtensorMap vmap,
                           const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap gmap,
                           const __grid_constant__ CUtensorMap lmap, const __grid_constant__ CUtensorMap dmap,
                           const __grid_constant__ CUtensorMap dqmap, const AttnArgs a, int NH) {
#if CUDA_PTX_HAS_SM90A
    typedef HopBwdOf<HS, SCHED, BQ> F;
    static_assert(BQ == FA_BWD_BQ || SCHED == HOP_BWD_OVERLAP, "128-query tiles in the overlap schedule only");
    // EARLY where dK, dV leave room for the next S^T beside dQ (at HS 128: C7512, every wgmma
    // serialized for registers): HS 64, and HS 80 with dK, dV over 80 columns.
    // TURNS (pingpong at HS 64, where each consumer's dQ needs only its own dS^T rows): the
    // consumers take turns issuing, as the forward's, with no barrier of both in between.
    constexpr bool OVERLAP = SCHED != HOP_BWD_SERIAL;
    constexpr bool EARLY = SCHED >= HOP_BWD_EARLY && (F::HP == 64 || DN == 80);
    constexpr bool KV_REGS = SCHED >= HOP_BWD_KV_REGS && F::HP == 64;
    constexpr bool TURNS = SCHED == HOP_BWD_PINGPONG && F::SPLIT_KEYS;
    DYNAMIC_SHARED(unsigned char, raw);
    unsigned char* smem = raw + ((1024 - smem_desc_address(raw) % 1024) % 1024);
    floatX* Ks = reinterpret_cast<floatX*>(smem);
    floatX* Vs = reinterpret_cast<floatX*>(smem + F::OFF_V);
    floatX* Qs = reinterpret_cast<floatX*>(smem + F::OFF_Q);    // stage st at + st * TQ::ELEMS
    floatX* Gs = reinterpret_cast<floatX*>(smem + F::OFF_G);
    floatX* dSTs = reinterpret_cast<floatX*>(smem + F::OFF_DS);   // buffer d at + d * TS::ELEMS
    float* dQs = reinterpret_cast<float*>(smem + F::OFF_DQ);      // buffer b at + b * BQ * HP
    float* Ls = reinterpret_cast<float*>(smem + F::OFF_LSE);      // lse of stage st at + st * BQ
    float* Ds = Ls + F::STAGES * BQ;                               // D likewise
    uint64_t* bar = reinterpret_cast<uint64_t*>(smem + F::OFF_BAR);
    uint64_t* kv_full = bar;
    const FaBwdBlock k = fa_bwd_block<HS, F::BK, BQ>(a, NH);
    // nqt: one past the last query tile the block walks (every one past qt0 without LOWER).
    const int nqt = LOWER ? k.qt1 : k.nqt, b = k.b, h = k.h, j0 = k.j0, qt0 = k.qt0;
    const int wg = threadIdx.x / 128;
    if (qt0 >= nqt && !a.dkx) return;   // no query sees the key tile, and dK, dV are added: done

    if (threadIdx.x == 0) {
        mbarrier_init(kv_full, 1);
        for (int st = 0; st < F::STAGES; st++) {
            mbarrier_init(F::full(bar, st), 1);
            mbarrier_init(F::empty(bar, st), 128 * F::CONSUMERS);
        }
        fence_mbarrier_init();
    }
    __syncthreads();

    if (wg == 0) {   // the producer (thread 0) and the reducer (warp 1)
        setmaxnreg_dec<F::PRODUCER_REGS>();
        if (threadIdx.x / 32 == 1) hop_bwd_reduce_dq<F>(a, k, nqt, &dqmap, dQs);
        if (threadIdx.x != 0 || qt0 >= nqt) return;
        mbarrier_arrive_expect_tx(kv_full, (unsigned)(2 * F::KV));
        for (int p = 0; p < F::HP / 64; p++) {
            tma_load_3d(Ks + p * F::TK::PANEL, &kmap, 64 * p, h, b * a.Tk + j0, kv_full);
            tma_load_3d(Vs + p * F::TK::PANEL, &vmap, 64 * p, h, b * a.Tk + j0, kv_full);
        }
        for (int qt = qt0; qt < nqt; qt++) {
            const int i = qt - qt0, st = i % F::STAGES, row = b * a.Tq + qt * BQ;
            if (i >= F::STAGES) hop_wait(F::empty(bar, st), (unsigned)(i / F::STAGES - 1) & 1u);
            uint64_t* full = F::full(bar, st);
            mbarrier_arrive_expect_tx(full, F::STAGE_TX);
            for (int p = 0; p < F::HP / 64; p++) {
                tma_load_3d(Qs + st * F::TQ::ELEMS + p * F::TQ::PANEL, &qmap, 64 * p, h, row, full);
                tma_load_3d(Gs + st * F::TQ::ELEMS + p * F::TQ::PANEL, &gmap, 64 * p, h, row, full);
            }
            tma_load_2d(Ls + st * BQ, &lmap, qt * BQ, b * NH + h, full);
            tma_load_2d(Ds + st * BQ, &dmap, qt * BQ, b * NH + h, full);
        }
        return;
    }

    // A consumer: keys 64 c .. 64 c + 63 of the tile; this lane's keys kr and kr + 8.
    setmaxnreg_inc<232>();
    const int c = wg - 1, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int kr = 64 * c + 16 * ((threadIdx.x / 32) % 4) + g;
    const int fq_lo = j0 + kr < a.Tk ? first_query(a, j0 + kr) : a.Tq;   // the first query each key sees
    const int fq_hi = j0 + kr + 8 < a.Tk ? first_query(a, j0 + kr + 8) : a.Tq;
    // One past the last query each key sees: a.Tq, or with LOWER the window's or document's end.
    const int qe_lo = LOWER && j0 + kr < a.Tk ? query_end(a, b, j0 + kr) : a.Tq;
    const int qe_hi = LOWER && j0 + kr + 8 < a.Tk ? query_end(a, b, j0 + kr + 8) : a.Tq;
    const floatX* Kc = Ks + 64 * c * 64;   // the warpgroup's 64 keys of every panel
    const floatX* Vc = Vs + 64 * c * 64;
    constexpr int DC = hop_head_cols<HS, DN>();   // dK's and dV's columns in registers
    float dk[DC / 2], dv[DC / 2];
ATTN_UNROLL
    for (int i = 0; i < DC / 2; i++) dk[i] = dv[i] = 0.0f;
    if (qt0 < nqt) hop_wait(kv_full, 0);
    // KV_REGS: this thread's part of K_c and V_c as wgmma's register A operand (mma.m16n8k16's A
    // fragments: rows kr and kr + 8, columns 16 kk + 2 t and 16 kk + 8 + 2 t, two bf16 a register).
    uint32_t ka[KV_REGS ? HS / 16 : 1][4], va[KV_REGS ? HS / 16 : 1][4];
    if (KV_REGS && qt0 < nqt) {
ATTN_UNROLL
        for (int kk = 0; kk < HS / 16; kk++)
ATTN_UNROLL
            for (int e = 0; e < 4; e++) {
                const int at = F::TK::chunk(kr + 8 * (e & 1), 2 * kk + (e >> 1)) + 2 * t;
                ka[kk][e] = *reinterpret_cast<const uint32_t*>(Ks + at);
                va[kk][e] = *reinterpret_cast<const uint32_t*>(Vs + at);
            }
    }

    // S^T = K_c Q^T and dP^T = V_c dO^T (64 keys x 64 queries): per 16 of the HS columns (the
    // padding's zeros skipped) one wgmma each. s[4 j + e]: query 8 j + 2 t + (e & 1), key kr + 8 (e >> 1).
    // OVERLAP: S^T and dP^T in two groups, P^T computed while dP^T is in flight. EARLY: S^T of
    // tile i + 1 issued at the end of tile i, behind its dQ, in flight while dQ is staged, and
    // waited for before the loop's back edge (accumulators in flight across it make ptxas
    // serialize every wgmma: C7515), so tile i + 1 starts with dP^T.
    float s[BQ / 2], dp[BQ / 2];
    if (EARLY && qt0 < nqt) {
ATTN_UNROLL
        for (int j = 0; j < BQ / 2; j++) s[j] = 0.0f;   // (scale-d 0 ignores them)
        hop_wait(F::full(bar, 0), 0);
        wgmma_fence();
        hop_bwd_issue_t<F, KV_REGS>(s, ka, Kc, Qs);
        wgmma_commit();
        wgmma_wait<0>();
ATTN_UNROLL
        for (int j = 0; j < BQ / 2; j++) wgmma_fence_operand(s[j]);
    }
    // TURNS: two a tile (dP^T; dV, dK and dQ; the next S^T is issued once dK, dV have landed,
    // after the turn: issued in it, behind them, ptxas serialized the wgmmas, C7514); consumer 1
    // opens the first and skips its last pass, so that every round of both turn barriers completes.
    if (TURNS && c == 1 && qt0 < nqt) hop_turn_pass<2>(c);
    for (int qt = qt0; qt < nqt; qt++) {
        const int i0 = qt * BQ, i = qt - qt0, st = i % F::STAGES;
        const floatX* Qt = Qs + st * F::TQ::ELEMS;
        const floatX* Gt = Gs + st * F::TQ::ELEMS;
        const float* Lt = Ls + st * BQ;
        const float* Dt = Ds + st * BQ;
        floatX* dST = dSTs + (i % F::DS_STAGES) * F::TS::ELEMS;

ATTN_UNROLL
        for (int j = 0; j < BQ / 2; j++) {   // (scale-d 0 ignores them)
            if (!EARLY) s[j] = 0.0f;
            dp[j] = 0.0f;
        }
        if (!EARLY) hop_wait(F::full(bar, st), (unsigned)(i / F::STAGES) & 1u);
        if (TURNS) hop_turn_wait(c);
        wgmma_fence();
        if (!EARLY) hop_bwd_issue_t<F, KV_REGS>(s, ka, Kc, Qt);
        if (OVERLAP && !EARLY) wgmma_commit();
        hop_bwd_issue_t<F, KV_REGS>(dp, va, Vc, Gt);
        wgmma_commit();
        if (TURNS) hop_turn_pass<2>(c);
        if (!EARLY) wgmma_wait<OVERLAP ? 1 : 0>();   // S^T has landed (OVERLAP: dP^T may still be in flight)
ATTN_UNROLL
        for (int j = 0; j < BQ / 2; j++) wgmma_fence_operand(s[j]);

        // P^T, then dS^T = P^T (dP^T - D); masked pairs are 0 (dS^T too: P^T is). A query that sees
        // no key (lse = -inf) sees none of these keys: always masked.
ATTN_UNROLL
        for (int n = 0; n < BQ / 8; n++) {
ATTN_UNROLL
            for (int e = 0; e < 2; e++) {
                const int qi = 8 * n + 2 * t + e, q = i0 + qi;
                const float l2 = Lt[qi] * LOG2E;   // lse in log2 units
                float p_lo = ex2_approx_ftz(fmaf(s[4 * n + e], a.scale_log2, -l2));
                float p_hi = ex2_approx_ftz(fmaf(s[4 * n + 2 + e], a.scale_log2, -l2));
                if (q < fq_lo || q >= qe_lo) p_lo = 0.0f;
                if (q < fq_hi || q >= qe_hi) p_hi = 0.0f;
                s[4 * n + e] = p_lo;
                s[4 * n + 2 + e] = p_hi;
            }
        }
        if (OVERLAP) wgmma_wait<0>();   // dP^T
ATTN_UNROLL
        for (int j = 0; j < BQ / 2; j++) wgmma_fence_operand(dp[j]);
ATTN_UNROLL
        for (int n = 0; n < BQ / 8; n++) {
ATTN_UNROLL
            for (int e = 0; e < 2; e++) {
                const float dd = Dt[8 * n + 2 * t + e];
                dp[4 * n + e] = s[4 * n + e] * (dp[4 * n + e] - dd);
                dp[4 * n + 2 + e] = s[4 * n + 2 + e] * (dp[4 * n + 2 + e] - dd);
            }
        }
        uint32_t pa[BQ / 16][4], da[BQ / 16][4];
        hop_pack_a<BQ>(pa, s);
        hop_pack_a<BQ>(da, dp);

        // dV_c += P^T dO, dK_c += dS^T Q (dO and Q MN-major; the scale is applied once, at the end).
        // TURNS: in the turn with dQ, after dS^T is stored.
        if (!TURNS) {
            wgmma_fence();   // P^T, dS^T and the accumulators written since the last wait
            hop_bwd_issue_dkdv<F, DN>(dk, dv, pa, da, Gt, Qt);
            wgmma_commit();
        }
        // dS^T (bf16) to shared memory while they run: the packed registers are exactly its pairs
        // (rows kr and kr + 8, queries 16 kb + 2 t and 16 kb + 8 + 2 t).
ATTN_UNROLL
        for (int kb = 0; kb < BQ / 16; kb++) {
            *reinterpret_cast<uint32_t*>(dST + F::TS::chunk(kr, 2 * kb) + 2 * t) = da[kb][0];
            *reinterpret_cast<uint32_t*>(dST + F::TS::chunk(kr + 8, 2 * kb) + 2 * t) = da[kb][1];
            *reinterpret_cast<uint32_t*>(dST + F::TS::chunk(kr, 2 * kb + 1) + 2 * t) = da[kb][2];
            *reinterpret_cast<uint32_t*>(dST + F::TS::chunk(kr + 8, 2 * kb + 1) + 2 * t) = da[kb][3];
        }
        if (!OVERLAP) {
            wgmma_wait<0>();
            hop_bwd_dkdv_landed<DC>(dk, dv, F::empty(bar, st));
        }
        fence_proxy_async();   // dS^T, written by this thread, for the wgmmas below
        if (TURNS) named_barrier_sync(HOP_BWD_OWN + c, 128);   // (the consumer's own rows only)
        else named_barrier_sync(HOP_BWD_DS, 256);

        // dQ (64 queries x 64 columns) = dS K over a range of keys: A = dS from dS^T, B = K, both
        // MN-major. dq[4 j + e]: column 8 j + 2 t + (e & 1) of the panel, query 16 w + g + 8 (e >> 1)
        // (+ 64 c with DQ_BY_ROWS: the queries of dS^T's panel c, over all keys).
        constexpr int DQ_KEYS = F::SPLIT_KEYS ? 64 : F::BK;
        const int key0 = F::SPLIT_KEYS ? 64 * c : 0, panel = F::SPLIT_KEYS || F::DQ_BY_ROWS ? 0 : c;
        const int qpanel = F::DQ_BY_ROWS ? c : 0;
        float dq[32];
ATTN_UNROLL
        for (int j = 0; j < 32; j++) dq[j] = 0.0f;
        const bool next = EARLY && qt + 1 < nqt;   // S^T of the next tile (the other stage) early
        const int sn = (i + 1) % F::STAGES;
        if (TURNS) hop_turn_wait(c);
        wgmma_fence();
        if (TURNS) {
            hop_bwd_issue_dkdv<F, DN>(dk, dv, pa, da, Gt, Qt);
            wgmma_commit();
        }
ATTN_UNROLL
        for (int kb = 0; kb < DQ_KEYS / 16; kb++) {
            const int kr0 = key0 + 16 * kb;
            wgmma_m64k16_bf16<64, 1, 1>(dq, hop_desc(dST + qpanel * F::TS::PANEL + kr0 * 64),
                                        hop_desc(Ks + panel * F::TK::PANEL + kr0 * 64), kb > 0);
        }
        wgmma_commit();
        if (TURNS && (c == 0 || qt + 1 < nqt)) hop_turn_pass<2>(c);
        if (OVERLAP) {   // dQ issued behind dK, dV, which may still have been in flight
            wgmma_wait<1>();
            hop_bwd_dkdv_landed<DC>(dk, dv, F::empty(bar, st));
        }
        if (next) {
ATTN_UNROLL
            for (int j = 0; j < BQ / 2; j++) s[j] = 0.0f;
            hop_wait(F::full(bar, sn), (unsigned)((i + 1) / F::STAGES) & 1u);
            wgmma_fence();
            hop_bwd_issue_t<F, KV_REGS>(s, ka, Kc, Qs + sn * F::TQ::ELEMS);
            wgmma_commit();
            wgmma_wait<1>();   // dQ has landed; the next S^T may still be in flight
        } else {
            wgmma_wait<0>();
        }
ATTN_UNROLL
        for (int j = 0; j < 32; j++) wgmma_fence_operand(dq[j]);
        // Every dQ wgmma has read dS^T (the next tile's is written after this barrier), and the
        // reduction of tile i - 2 has read buffer i % 2: then the scaled tile, staged there. With
        // two dS^T buffers the next tile writes the other one, and tile i + 2 writes this one only
        // after tile i + 1's DS barrier, which each consumer reaches after its dQ wait above: that
        // barrier orders every read of dS^T before its next write, and this one is not needed.
        if (TURNS) named_barrier_sync(HOP_BWD_OWN + c, 128);
        else if (F::DS_STAGES == 1) named_barrier_sync(HOP_BWD_DQ, 256);
        if (i >= 2) named_barrier_sync(HOP_BWD_DQ_EMPTY + i % 2, HOP_BWD_DQ_THREADS);
        const int qr = 64 * qpanel + 16 * ((threadIdx.x / 32) % 4) + g;
        float* row_lo = dQs + (i % 2) * BQ * F::HP + qr * F::HP + 64 * panel + 2 * t;
        float* row_hi = row_lo + 8 * F::HP;
        if (F::SPLIT_KEYS && c == 1) named_barrier_sync(HOP_BWD_DQ_PART, 256);   // after consumer 0's part
ATTN_UNROLL
        for (int j = 0; j < 8; j++) {
            float2 lo = make_float2(a.scale * dq[4 * j], a.scale * dq[4 * j + 1]);
            float2 hi = make_float2(a.scale * dq[4 * j + 2], a.scale * dq[4 * j + 3]);
            float2* plo = reinterpret_cast<float2*>(row_lo + 8 * j);
            float2* phi = reinterpret_cast<float2*>(row_hi + 8 * j);
            if (F::SPLIT_KEYS && c == 1) {
                lo.x += plo->x, lo.y += plo->y, hi.x += phi->x, hi.y += phi->y;
            }
            *plo = lo;
            *phi = hi;
        }
        if (F::SPLIT_KEYS && c == 0) named_barrier_arrive(HOP_BWD_DQ_PART, 256);
        fence_proxy_async();   // the staged tile, for the TMA reduction
        named_barrier_arrive(HOP_BWD_DQ_FULL + i % 2, HOP_BWD_DQ_THREADS);
        if (EARLY) {
            wgmma_wait<0>();   // the next tile's S^T has landed (after the last tile: nothing in flight)
ATTN_UNROLL
            for (int j = 0; j < BQ / 2; j++) wgmma_fence_operand(s[j]);
        }
    }

    // dK, dV of the warpgroup's keys (rows kr, kr + 8 of the accumulators): added once, or written
    // in floatX (zeros for a key tile no query sees).
    const long long key_lo = (long long)b * a.Tk + j0 + kr;
    const bool ok_lo = j0 + kr < a.Tk, ok_hi = j0 + kr + 8 < a.Tk;
ATTN_UNROLL
    for (int n = 0; n < HS / 8; n++) fa_store_dkdv(a, key_lo, h * HS + 8 * n + 2 * t, dk + 4 * n, dv + 4 * n, ok_lo, ok_hi);
#else
    __trap();   // not sm_90a: the launcher never takes this kernel there
#endif
}
