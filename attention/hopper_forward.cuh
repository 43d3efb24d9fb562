// The Hopper (sm_90a) forward of the bf16 build: TMA loads, wgmma, one producer warpgroup and two
// consumer warpgroups that overlap softmax with the GEMMs (FlashAttention-3's structure).
//
// A block computes 128 query rows of one (sequence, head) with 3 warpgroups (384 threads), head
// sizes 64, 80 and 128 (80 in tiles of 128 columns: HopFwd::HP); at HS 64 optionally 192 rows with
// 4 warpgroups (three consumers, HopFwd's NC):
// - warpgroup 0, the producer, gives its registers away (setmaxnreg.dec 24); one of its threads
//   loads the Q tile and then the K and V tiles of 128 keys by TMA (cp.async.bulk.tensor, 128-byte
//   swizzle, one box per 64-column panel: the FaTile layout of flash_tile.cuh) into two stages,
//   each tile completing its own mbarrier (full); it refills a stage's K once both consumers have
//   released it (k_empty, 256 arrivals) and its V likewise (v_empty).
// - warpgroups 1 and 2 (and 3), the consumers (setmaxnreg.inc 240, or 160 for three), hold 64
//   rows each: S (64 x 128) = Q K^T by wgmma m64n64k16 from shared memory (Q and K K-major), the
//   online softmax on the accumulators (mma.sync's C layout per warp, as in flash_forward.cuh: a lane holds rows g and
//   g + 8 of its warp's 16, so the row statistics reduce over the 4 lanes of a group), P packed
//   to bf16 in registers as wgmma's register A operand, and O (64 x HS) += P V by wgmma with V
//   MN-major (transposed), O in registers.
// Two overlaps hide the softmax: inside a warpgroup, S of tile j is issued with P V of tile j - 1
// and tile j's softmax runs while P V is in flight (O is rescaled after it lands); between the two
// consumers, named barriers make them take turns issuing (hop_turn_wait), so one's softmax runs
// under the other's GEMMs.
// Key tiles every row sees whole skip the mask code (as flash_forward.cuh). Under a sliding window
// or a document mask (the LOWER instance, grid of tiles) a tile's key tiles start at the one holding
// its first row's first visible key, and the masked ones cut each row from below too. The epilogue is the
// sm_80 kernel's: O normalised and staged through shared memory, written in 16-byte rows, the LSE
// per row, and with a.merge merged into the (o, lse) already there.
//
// Under nvcc only the sm_90a pass (CUDA_PTX_HAS_SM90A) has a body; the launcher takes this kernel
// only where the build has sm_90a code and the device is compute capability 9.0. The host runtime
// runs it on the twins of model/cuda_ptx_sm90.cuh.
#pragma once
#include "attention/flash_forward.cuh"
#include "model/cuda_ptx_sm90.cuh"

// NC consumer warpgroups of 64 rows each: 2 (128-row tiles), or 3 at HS 64 (192-row tiles,
// ATTENTION_FWD_HOPPER_ROWS=192; FlashAttention-3's tile for head size 64, where a 64 x 128 S costs
// as much softmax as at HS 128 for half the MMA work, so a third warpgroup's GEMMs hide more of it).
template <int HS, int NC = 2> struct HopFwd {
    static_assert(HS == 64 || HS == 80 || HS == 128, "the Hopper forward serves HS 64, 80 and 128");
    static_assert(NC == 2 || (NC == 3 && HS == 64), "three consumers at HS 64 only (160 registers each)");
    static constexpr int BQ = 64 * NC, BK = 128, CONSUMERS = NC, THREADS = 128 * (1 + CONSUMERS), STAGES = 2;
    // setmaxnreg moves registers between the warpgroups of the launch's 65536 / THREADS per thread
    // (in multiples of 8: 168 with 2 consumers, 128 with 3): 24 + 2 x 240 = 3 x 168, 24 + 3 x 160 <= 4 x 128.
    static constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = NC == 2 ? 240 : 160;
    static_assert(PRODUCER_REGS + NC * CONSUMER_REGS <= 65536 / THREADS / 8 * 8 * (1 + NC),
                  "the register split fits the launch");
    // Tiles of HP columns, whole 64-column panels: HS 80 is padded to 128 (TMA fills the columns
    // past the head with zeros); S sums over the HS real columns only, P V and O span HP.
    static constexpr int HP = HS <= 64 ? 64 : 128;
    typedef FaTile<HP, BQ> TQ;   // Q
    typedef FaTile<HP, BK> TK;   // a K or V tile
    static constexpr size_t Q = TQ::BYTES, KV = TK::BYTES;
    static constexpr size_t OFF_K = Q, OFF_V = OFF_K + STAGES * KV;
    // The mbarriers: q_full, then per stage k_full, v_full, k_empty, v_empty, then q_empty (the
    // persistent grid's: the consumers are done with the Q tile).
    static constexpr int NBAR = 2 + 4 * STAGES;
    static constexpr size_t OFF_BAR = OFF_V + STAGES * KV;
    // + 1024: the base is aligned up to 1024 bytes (the 128-byte swizzle's period).
    static constexpr size_t SMEM = OFF_BAR + NBAR * 8 + 1024;
    // The persistent grid (hopper_forward_kernel) stages O beside the pipeline, which meanwhile
    // loads the next tile: bf16 O in FaFwd<HS>'s tile layout (rows past its 128 as below), fp32 O
    // in rows of OLD floats and the merge weights. fp32 fits the 227 KiB a block may take only at
    // HS 64 and 80; at HS 128 the launcher keeps fp32 O on the grid of tiles.
    static constexpr size_t OFF_O = (OFF_BAR + NBAR * 8 + 15) / 16 * 16;
    static constexpr size_t O_BF16 = (size_t)BQ * (FaFwd<HS>::TQ::ELEMS / FaFwd<HS>::BQ) * 2;
    static constexpr size_t O_FP32 = (size_t)BQ * FaFwd<HS>::OLD * sizeof(float) + BQ * sizeof(float2);
    static constexpr size_t SMEM_PERSISTENT_BF16 = OFF_O + O_BF16 + 1024;
    static constexpr size_t SMEM_PERSISTENT_FP32 = OFF_O + O_FP32 + 1024;
    static constexpr bool PERSISTENT_FP32 = SMEM_PERSISTENT_FP32 <= 227 * 1024;
    static constexpr size_t SMEM_PERSISTENT = PERSISTENT_FP32 ? SMEM_PERSISTENT_FP32 : SMEM_PERSISTENT_BF16;
    static_assert(SMEM_PERSISTENT_BF16 <= 227 * 1024, "the persistent grid's bf16 staging fits");
    static __device__ __forceinline__ uint64_t* k_full(uint64_t* bar, int st) { return bar + 1 + st; }
    static __device__ __forceinline__ uint64_t* v_full(uint64_t* bar, int st) { return bar + 1 + STAGES + st; }
    static __device__ __forceinline__ uint64_t* k_empty(uint64_t* bar, int st) { return bar + 1 + 2 * STAGES + st; }
    static __device__ __forceinline__ uint64_t* v_empty(uint64_t* bar, int st) { return bar + 1 + 3 * STAGES + st; }
    static __device__ __forceinline__ uint64_t* q_empty(uint64_t* bar) { return bar + 1 + 4 * STAGES; }
    // The O staging is FaFwd<HS>'s (HS columns): its rows past FaFwd's 128 only where the bf16
    // staging tile is one panel (row r at 64 r).
    static_assert(BQ == FaFwd<HS>::BQ || (FaFwd<HS>::TQ::PANEL == FaFwd<HS>::BQ * 64 && HS == 64),
                  "the O staging is FaFwd<HS>'s");
    static_assert(BQ * FaFwd<HS>::OLD * sizeof(float) + BQ * sizeof(float2) <= OFF_BAR,
                  "O staging and the merge weights fit in the tiles");
    static_assert(TQ::SWIZZLE && TK::SWIZZLE, "64-column panels");
};

// The wgmma descriptor of a FaTile panel (128-byte rows, 128-byte swizzle, 8-row groups 1024 bytes
// apart) from p on: Q and K as K-major operands (rows are m / n, the 64 columns k), and V as the
// MN-major (transposed) B operand of P V (rows are the keys, k; the 64 columns n). One panel
// covers the 64 columns, so the leading byte offset is unused.
__device__ __forceinline__ uint64_t hop_desc(const floatX* p) { return smem_desc(p, 16, 1024, 128); }

__device__ __forceinline__ void hop_wait(uint64_t* bar, unsigned parity) {
    while (!mbarrier_try_wait_parity(bar, parity)) {
    }
}

// A consumer's S (64 x BK) = Q K^T for key tile Kt: per 16 of the HS columns (the padding's zeros
// skipped), one wgmma per NS keys: NS 64 (the default) or 128 (ATTENTION_FWD_HOPPER=n128: one
// m64n128k16 reads the Q operand once for the 128 keys, 6 KiB of shared memory per 64 x 128 x 16
// instead of 8; the accumulators' layout is the same).
// s[32 nh + 4 j + e]: key 64 nh + 8 j + 2 t + (e & 1), row g + 8 (e >> 1). Issued, not waited for;
// s was zeroed before the wgmma.fence (the first wgmma ignores it, scale-d 0, but a register
// written after the fence makes ptxas insert another one: C7519).
template <int HS, int NC, int NS>
__device__ __forceinline__ void hop_issue_s(float* s, const floatX* Qc, const floatX* Kt) {
    typedef HopFwd<HS, NC> F;
    static_assert(NS == 64 || NS == 128, "S by wgmma of 64 or 128 keys");
ATTN_UNROLL
    for (int kk = 0; kk < HS / 16; kk++) {
        const int pk = (kk / 4) * F::TQ::PANEL + (kk % 4) * 16;   // panel, then 16 columns in it
        const uint64_t da = hop_desc(Qc + pk);
ATTN_UNROLL
        for (int nh = 0; nh < F::BK / NS; nh++)
            wgmma_m64k16_bf16<NS, 0, 0>(s + NS / 2 * nh, da,
                                         hop_desc(Kt + (kk / 4) * F::TK::PANEL + nh * NS * 64 + (kk % 4) * 16), kk > 0);
    }
    wgmma_commit();
}

// The columns of an accumulator over a head's columns (the forward's O, the backward's dK and dV)
// when its GEMM issues wgmmas of N columns: HP (N 64: one per 64-column panel, HS 80's second
// padded), or the head's 80 (N 80: one m64n80k16 over both panels, ATTENTION_HOPPER_HS80=exact).
template <int HS, int N> __host__ __device__ constexpr int hop_head_cols(void) {
    static_assert(N == 64 || (N == 80 && HS == 80), "wgmma of 64 columns, or of 80 at HS 80");
    return N == 80 ? 80 : HopFwd<HS>::HP;
}

// O (64 x hop_head_cols) += P V for value tile Vt, P (bf16, wgmma's register A operand) in pa: per 16
// keys, one wgmma per 64-column panel of V (PV 64: MN-major; a padded panel's columns past HS stay
// 0 in O), or at HS 80 one m64n80k16 over both panels (PV 80: the second 64 columns at the
// descriptor's LBO, the next panel; no MMA on the padding). Issued, not waited for: pa must keep
// its values until the wait.
template <int HS, int PV>
__device__ __forceinline__ void hop_issue_pv(float* o, const uint32_t (*pa)[4], const floatX* Vt) {
    typedef HopFwd<HS> F;
ATTN_UNROLL
    for (int kb = 0; kb < F::BK / 16; kb++) {
        if constexpr (PV == 80) {
            const uint64_t dv = smem_desc(Vt + kb * 16 * 64, F::TK::PANEL * sizeof(floatX), 1024, 128);
            wgmma_m64n80k16_bf16_rs<1>(o, pa[kb], dv, 1);
        } else {
ATTN_UNROLL
            for (int nh = 0; nh < F::HP / 64; nh++)
                wgmma_m64n64k16_bf16_rs<1>(o + 32 * nh, pa[kb], hop_desc(Vt + nh * F::TK::PANEL + kb * 16 * 64), 1);
        }
    }
    wgmma_commit();
}

// The online softmax of key tile kt's scores s (m in scaled log2 units, as flash_forward.cuh): s
// becomes P, m and l move on, and corr[hi] is the factor O's row must take before P V. MASK: key
// j is -inf for rows whose visible count vis[hi] <= j, and with LOWER (a sliding window or a
// document mask) for rows whose first visible key lo[hi] > j.
template <int HS, bool MASK, bool LOWER>
__device__ __forceinline__ void hop_softmax(float* s, float (&m)[2], float (&l)[2], float (&corr)[2], const AttnArgs& a,
                                            int kt, const int (&vis)[2], const int (&lo)[2]) {
    constexpr int BK = HopFwd<HS>::BK;
    const int t = threadIdx.x % 4;
ATTN_UNROLL
    for (int hi = 0; hi < 2; hi++) {
        float mx = -INFINITY;
ATTN_UNROLL
        for (int n = 0; n < BK / 8; n++) {
ATTN_UNROLL
            for (int e = 0; e < 2; e++) {
                float& x = s[4 * n + 2 * hi + e];
                const int j = kt * BK + 8 * n + 2 * t + e;
                if (MASK && (j >= vis[hi] || (LOWER && j < lo[hi]))) x = -INFINITY;
                mx = fmaxf(mx, x);
            }
        }
        float ref;
        fa_row_max<MASK>(m[hi], mx, a.scale_log2, ref, corr[hi]);
        float sum = 0.0f;
ATTN_UNROLL
        for (int n = 0; n < BK / 8; n++) {
            float& x0 = s[4 * n + 2 * hi];
            float& x1 = s[4 * n + 2 * hi + 1];
            x0 = ex2_approx_ftz(fmaf(x0, a.scale_log2, -ref));
            x1 = ex2_approx_ftz(fmaf(x1, a.scale_log2, -ref));
            sum += x0 + x1;
        }
        l[hi] = l[hi] * corr[hi] + sum;
    }
}

// A 64 x N accumulator (P, or the backward's P^T and dS^T) to bf16 in registers: the accumulators
// of two adjacent 8-column blocks are exactly the A fragment of one 16-wide k-step (as mma.sync's,
// flash_attention.cuh), wgmma's register A operand.
template <int N> __device__ __forceinline__ void hop_pack_a(uint32_t (*pa)[4], const float* s) {
ATTN_UNROLL
    for (int kb = 0; kb < N / 16; kb++) pack_a_fragment(pa[kb], s + 8 * kb, s + 8 * kb + 4);
}

// The consumers take turns issuing their wgmmas (FlashAttention-3's ping-pong): consumer c issues
// after bar.sync on barrier HOP_TURN + c and then lets the next one go (bar.arrive on its barrier;
// consumer NC - 1 lets consumer 0 go), so one warpgroup's softmax runs under the others' GEMMs.
// Each barrier's round is the 128 threads that wait plus the 128 that let them go.
enum { HOP_TURN = 4 };
__device__ __forceinline__ void hop_turn_wait(int c) { named_barrier_sync(HOP_TURN + c, 256); }
template <int NC> __device__ __forceinline__ void hop_turn_pass(int c) {
    named_barrier_arrive(HOP_TURN + (c + 1) % NC, 256);
}

// Key tile kt (past the tile's first) of a consumer's 64 rows, overlapped: in its turn it issues S
// of tile kt and O += P V of the tile before (P in pa), then runs tile kt's softmax while P V is in
// flight, rescales O once P V has landed and packs tile kt's P into pa. K tiles are released after
// S, V tiles after P V (their own empty mbarriers, so the producer refills K a tile ahead of V).
// it: the tile's place in the block's stream of key tiles (from 0, or past earlier query tiles'
// with the persistent grid), which picks the stage and its phase; kt is the key tile itself (keys
// kt BK ..), which the mask reads.
template <int HS, int NC, int NS, int PV, bool MASK, bool LOWER>
__device__ __forceinline__ void hop_forward_step(float* o, float* s, uint32_t (*pa)[4], float (&m)[2], float (&l)[2],
                                                 const AttnArgs& a, int kt, int c, const floatX* Qc,
                                                 const floatX* Ks, const floatX* Vs, uint64_t* bar,
                                                 const int (&vis)[2], const int (&lo)[2], int it) {
    typedef HopFwd<HS, NC> F;
    const int st = it % F::STAGES, pst = (it - 1) % F::STAGES;
    const unsigned ph = (unsigned)(it / F::STAGES) & 1u, pph = (unsigned)((it - 1) / F::STAGES) & 1u;
ATTN_UNROLL
    for (int i = 0; i < F::BK / 2; i++) s[i] = 0.0f;
    hop_turn_wait(c);
    // Both waits before the fence (V of tile kt - 1 was loaded before K of tile kt): a wait loop
    // between the fence and a wgmma makes ptxas insert another fence (C7519).
    hop_wait(F::v_full(bar, pst), pph);
    hop_wait(F::k_full(bar, st), ph);
    wgmma_fence();   // P and the rescaled O, ready for the asynchronous MMA
    hop_issue_s<HS, NC, NS>(s, Qc, Ks + st * F::TK::ELEMS);
    hop_issue_pv<HS, PV>(o, pa, Vs + pst * F::TK::ELEMS);
    hop_turn_pass<NC>(c);
    wgmma_wait<1>();   // S has landed; P V may still be in flight
ATTN_UNROLL
    for (int i = 0; i < F::BK / 2; i++) wgmma_fence_operand(s[i]);
    mbarrier_arrive(F::k_empty(bar, st));
    float corr[2];
    hop_softmax<HS, MASK, LOWER>(s, m, l, corr, a, kt, vis, lo);
    wgmma_wait<0>();
ATTN_UNROLL
    for (int i = 0; i < hop_head_cols<HS, PV>() / 2; i++) wgmma_fence_operand(o[i]);
    mbarrier_arrive(F::v_empty(bar, pst));
ATTN_UNROLL
    for (int n = 0; n < HS / 8; n++)   // (O's padding columns are 0 and stay 0)
ATTN_UNROLL
        for (int hi = 0; hi < 2; hi++) {
            o[4 * n + 2 * hi] *= corr[hi];
            o[4 * n + 2 * hi + 1] *= corr[hi];
        }
    hop_pack_a<F::BK>(pa, s);
}

// A consumer thread's rows r0 + g and r0 + g + 8 of O (normalised by inv; its HS real columns)
// staged in shared memory Os, then the block's rows [0, nq) written to og by the consumers' 256
// threads (fa_copy_o).
template <int HS, int NC, typename T>
__device__ __forceinline__ void hop_write_o(T* Os, T* og, long long ldo, int nq, const float* o, const float inv[2],
                                            int r0, const float2* wts) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, nthreads = 128 * NC;
ATTN_UNROLL
    for (int n = 0; n < HS / 8; n++)
ATTN_UNROLL
        for (int hi = 0; hi < 2; hi++)
            fa_put_pair(Os + fa_o_at<HS>(Os, r0 + 8 * hi + g, 8 * n + 2 * t), o[4 * n + 2 * hi] * inv[hi],
                        o[4 * n + 2 * hi + 1] * inv[hi]);
    named_barrier_sync(3, nthreads);
    fa_copy_o<HS>(Os, og, ldo, nq, wts, threadIdx.x - 128, nthreads);
}

// One query tile of a block: head h of sequence b, rows [i0, i0 + nq), which see the nkt key tiles
// from kt0 on; of those (counted from kt0) the tiles [nlow, nfull) are seen whole by every row.
// kt0 and nlow are 0 without LOWER; with it (a sliding window or a document mask: masked_below)
// kt0 is the tile holding the first row's first visible key and nlow the first tile no row's lower
// edge cuts (both edges grow with the row, so the first row's is the tile's lowest and the last
// row's its highest). Tile x ends at Tq - x BQ, so a partial tile is the first rows', which see
// the fewest keys (a 192-row tile at T = 1024 would otherwise compute 128 empty rows against every
// key).
struct HopTile {
    int h, b, i0, nq, kt0, nkt, nlow, nfull;
};
template <int BQ, int BK, bool NARROW, bool LOWER>
__device__ __forceinline__ HopTile hop_tile(const AttnArgs& a, int x, int h, int b) {
    HopTile tl;
    const int iend = a.Tq - x * BQ;
    tl.h = h, tl.b = b, tl.i0 = max(0, iend - BQ), tl.nq = iend - tl.i0;
    const int last = tl.i0 + tl.nq - 1;
    const int nseen = (visible_keys_as<NARROW>(a, last) + BK - 1) / BK;   // up to what the last query sees
    const int whole = visible_keys_as<NARROW>(a, tl.i0) / BK;             // seen whole by every row
    if constexpr (LOWER) {
        tl.kt0 = first_visible_key(a, b, tl.i0) / BK;
        tl.nkt = max(0, nseen - tl.kt0);
        tl.nlow = min(tl.nkt, max(0, (first_visible_key(a, b, last) + BK - 1) / BK - tl.kt0));
        tl.nfull = max(0, whole - tl.kt0);
    } else {
        tl.kt0 = 0, tl.nkt = nseen, tl.nlow = 0, tl.nfull = whole;
    }
    return tl;
}

// The block's n-th query tile: with a grid of tiles (x, NH, B) the block's own, n = 0 only; with the
// persistent grid (PERSISTENT: min(tiles, SMs) blocks) tiles blockIdx.x, + gridDim.x, ... in
// the order latest query tile first (x outer, then heads, then sequences), so each round of blocks
// takes tiles of about the same length, the longest first. False past the block's last tile.
template <int BQ, int BK, bool PERSISTENT, bool LOWER>
__device__ __forceinline__ bool hop_block_tile(const AttnArgs& a, int NH, int n, HopTile& tl) {
    static_assert(!(PERSISTENT && LOWER), "lower edges on the grid of tiles only");
    if constexpr (!PERSISTENT) {
        tl = hop_tile<BQ, BK, false, LOWER>(a, (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z);
        return n == 0;
    }
    // (32-bit, as the tile's visible keys (visible_keys_as): a 64-bit division is a call, and the
    // values live across a call in a loop spill; the launcher checks that the tiles number below 2^31)
    const int tile = (int)blockIdx.x + n * (int)gridDim.x, per_x = NH * a.B;
    if (tile >= (a.Tq + BQ - 1) / BQ * per_x) return false;
    const int x = tile / per_x, hb = tile - x * per_x, b = hb / NH;
    tl = hop_tile<BQ, BK, true, false>(a, x, hb - b * NH, b);
    return true;
}

// Grid (query tiles, NH, B), latest query tiles first (the last tile ends at row Tq), or with
// PERSISTENT the persistent grid (hop_block_tile); HopFwd<HS, NC>::THREADS threads. The tensor
// maps (model/cuda_ptx_sm90.cuh) are rank 3, (HS columns, NH heads, B Tq or B Tk rows), with boxes
// of 64 columns x 1 head x BQ or 128 rows, 128-byte swizzle: a box at column 64 of HS 80 reads the
// head's 16 columns and zeros, never the next head's. Outputs as flash_forward_kernel without
// splits: o (fp32, or floatX into a.ox) and lse, or with a.merge merged into them. NS: the keys per
// wgmma of S (hop_issue_s); NC: the consumer warpgroups (HopFwd); PV: the columns per wgmma of P V
// (hop_issue_pv). LOWER: the instance for calls under a sliding window or a document mask
// (masked_below), on the grid of tiles: a tile's key tiles start at the one holding its first row's
// first visible key (HopTile.kt0), and the masked tiles cut each row from below too.
// The persistent grid keeps the pipeline running from one query tile into the next: key tiles
// flow through the stages in one stream (their mbarrier phases run on), the producer loads the
// next Q tile once the consumers have issued their last S (q_empty) and its first key tiles as
// stages free up, while the consumers finish the last P V and write O through their own staging
// buffer (HopFwd::OFF_O). So one tile's epilogue and the next one's first loads overlap, and no
// block is launched or set up twice on an SM (FlashAttention-3's persistent kernel, with a static
// schedule: the forward needs no order). Its own instances (PERSISTENT), so the grid of tiles
// keeps its code; the same register split.
template <int HS, int NS, int NC, int PV, bool PERSISTENT, bool LOWER = false>
__global__ void __launch_bounds__(HopFwd<HS, NC>::THREADS, 1)
    hopper_forward_kernel(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
                          const __grid_constant__ CUtensorMap vmap, const AttnArgs a, const int NH) {
#if CUDA_PTX_HAS_SM90A
    typedef HopFwd<HS, NC> F;
    constexpr int BK = F::BK;
    DYNAMIC_SHARED(unsigned char, raw);
    unsigned char* smem = raw + ((1024 - smem_desc_address(raw) % 1024) % 1024);
    floatX* Qs = reinterpret_cast<floatX*>(smem);
    floatX* Ks = reinterpret_cast<floatX*>(smem + F::OFF_K);
    floatX* Vs = reinterpret_cast<floatX*>(smem + F::OFF_V);
    uint64_t* bar = reinterpret_cast<uint64_t*>(smem + F::OFF_BAR);
    uint64_t* q_full = bar;
    unsigned char* ostage = PERSISTENT ? smem + F::OFF_O : smem;   // O staging (and merge weights)
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        mbarrier_init(q_full, 1);
        mbarrier_init(F::q_empty(bar), 128 * F::CONSUMERS);
        for (int st = 0; st < F::STAGES; st++) {
            mbarrier_init(F::k_full(bar, st), 1);
            mbarrier_init(F::v_full(bar, st), 1);
            mbarrier_init(F::k_empty(bar, st), 128 * F::CONSUMERS);
            mbarrier_init(F::v_empty(bar, st), 128 * F::CONSUMERS);
        }
        fence_mbarrier_init();
    }
    __syncthreads();

    HopTile tl;
    if (wg == 0) {   // the producer
        setmaxnreg_dec<F::PRODUCER_REGS>();
        if (threadIdx.x != 0) return;
        // n: the block's tiles so far, each with its Q tile (with the persistent grid even where it
        // sees no key: one counter fewer); it: key tiles loaded so far (the stream's position).
        for (int n = 0, it = 0; hop_block_tile<F::BQ, BK, PERSISTENT, LOWER>(a, NH, n, tl); n++) {
            if constexpr (!PERSISTENT) {   // one tile: no loop (its state would cost registers)
                if (tl.nkt == 0) break;   // (a tile that sees no key loads nothing)
            }
            if (n > 0) hop_wait(F::q_empty(bar), (unsigned)(n - 1) & 1u);
            mbarrier_arrive_expect_tx(q_full, (unsigned)F::Q);
            for (int p = 0; p < F::HP / 64; p++)
                tma_load_3d(Qs + p * F::TQ::PANEL, &qmap, 64 * p, tl.h, tl.b * a.Tq + tl.i0, q_full);
            for (int kt = 0; kt < tl.nkt; kt++, it++) {
                const int st = it % F::STAGES, row = tl.b * a.Tk + (tl.kt0 + kt) * BK;
                const unsigned free_ph = (unsigned)(it / F::STAGES - 1) & 1u;   // the phase that freed stage st
                if (it >= F::STAGES) hop_wait(F::k_empty(bar, st), free_ph);
                mbarrier_arrive_expect_tx(F::k_full(bar, st), (unsigned)F::KV);
                for (int p = 0; p < F::HP / 64; p++)
                    tma_load_3d(Ks + st * F::TK::ELEMS + p * F::TK::PANEL, &kmap, 64 * p, tl.h, row, F::k_full(bar, st));
                if (it >= F::STAGES) hop_wait(F::v_empty(bar, st), free_ph);
                mbarrier_arrive_expect_tx(F::v_full(bar, st), (unsigned)F::KV);
                for (int p = 0; p < F::HP / 64; p++)
                    tma_load_3d(Vs + st * F::TK::ELEMS + p * F::TK::PANEL, &vmap, 64 * p, tl.h, row, F::v_full(bar, st));
            }
            if constexpr (!PERSISTENT) break;
        }
        return;
    }

    // A consumer: rows 64 c .. 64 c + 63 of the tile; this lane's rows r0 + g and r0 + g + 8.
    setmaxnreg_inc<F::CONSUMER_REGS>();
    const int c = wg - 1, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int r0 = 64 * c + 16 * ((threadIdx.x / 32) % 4);
    const floatX* Qc = Qs + 64 * c * 64;   // the warpgroup's 64 rows of every panel
    constexpr int OC = hop_head_cols<HS, PV>();   // O's columns in registers
    // it0: the stream position of the tile's first key tile; n: the block's tiles so far (Q tiles).
    for (int n = 0, it0 = 0; hop_block_tile<F::BQ, BK, PERSISTENT, LOWER>(a, NH, n, tl); n++) {
        const int nkt = tl.nkt, nfull = tl.nfull, nq = tl.nq;
        float o[OC / 2], s[BK / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
        uint32_t pa[BK / 16][4];
ATTN_UNROLL
        for (int i = 0; i < OC / 2; i++) o[i] = 0.0f;
ATTN_UNROLL
        for (int i = 0; i < BK / 2; i++) s[i] = 0.0f;
        int vis[2], lo[2];   // this lane's rows see the keys [lo[hi], vis[hi]) (lo 0 without LOWER)
ATTN_UNROLL
        for (int hi = 0; hi < 2; hi++) {
            const int row = r0 + 8 * hi + g;
            vis[hi] = row < nq ? visible_keys_as<PERSISTENT>(a, tl.i0 + row) : 0;
            lo[hi] = LOWER && row < nq ? first_visible_key(a, tl.b, tl.i0 + row) : 0;
        }
        if (nkt > 0) {
            // Tile 0's S and softmax, then tiles 1 .. nkt - 1 overlapped, then the last tile's P V.
            // Consumer 0 takes the first turn, which the last consumer opens; that one gives up its
            // last pass, so every round of the turn barriers completes (nkt + 1 turns each).
            const int st0 = it0 % F::STAGES;
            if (c == NC - 1) hop_turn_pass<NC>(c);
            hop_wait(q_full, (unsigned)n & 1u);
            hop_turn_wait(c);
            hop_wait(F::k_full(bar, st0), (unsigned)(it0 / F::STAGES) & 1u);
            wgmma_fence();
            hop_issue_s<HS, NC, NS>(s, Qc, Ks + st0 * F::TK::ELEMS);
            hop_turn_pass<NC>(c);
            wgmma_wait<0>();
ATTN_UNROLL
            for (int i = 0; i < BK / 2; i++) wgmma_fence_operand(s[i]);
            mbarrier_arrive(F::k_empty(bar, st0));
            float corr[2];   // O is 0: nothing to rescale
            const int kt0 = tl.kt0, nlow = tl.nlow;
            if (nlow == 0 && nfull > 0) hop_softmax<HS, false, false>(s, m, l, corr, a, kt0, vis, lo);
            else hop_softmax<HS, true, LOWER>(s, m, l, corr, a, kt0, vis, lo);
            hop_pack_a<F::BK>(pa, s);
            int kt = 1;
            if constexpr (LOWER) {
                // One loop: the tiles every row sees whole ([nlow, nfull)) unmasked, the others masked
                // from both sides (one inlined copy of each step).
                for (; kt < nkt; kt++) {
                    if (kt >= nlow && kt < nfull)
                        hop_forward_step<HS, NC, NS, PV, false, false>(o, s, pa, m, l, a, kt0 + kt, c, Qc, Ks, Vs, bar, vis, lo, it0 + kt);
                    else
                        hop_forward_step<HS, NC, NS, PV, true, true>(o, s, pa, m, l, a, kt0 + kt, c, Qc, Ks, Vs, bar, vis, lo, it0 + kt);
                }
            } else {
                for (; kt < min(nfull, nkt); kt++)
                    hop_forward_step<HS, NC, NS, PV, false, false>(o, s, pa, m, l, a, kt, c, Qc, Ks, Vs, bar, vis, lo, it0 + kt);
                for (; kt < nkt; kt++)
                    hop_forward_step<HS, NC, NS, PV, true, false>(o, s, pa, m, l, a, kt, c, Qc, Ks, Vs, bar, vis, lo, it0 + kt);
            }
            // Every S has landed: the producer may load the next Q tile (the persistent grid's).
            if (PERSISTENT) mbarrier_arrive(F::q_empty(bar));
            const int pit = it0 + nkt - 1, pst = pit % F::STAGES;
            hop_turn_wait(c);
            hop_wait(F::v_full(bar, pst), (unsigned)(pit / F::STAGES) & 1u);
            wgmma_fence();
            hop_issue_pv<HS, PV>(o, pa, Vs + pst * F::TK::ELEMS);
            if (c != NC - 1) hop_turn_pass<NC>(c);
            wgmma_wait<0>();
ATTN_UNROLL
            for (int i = 0; i < OC / 2; i++) wgmma_fence_operand(o[i]);
            mbarrier_arrive(F::v_empty(bar, pst));
            it0 += nkt;
        } else if (PERSISTENT) {   // the Q tile the producer loaded all the same, waited for and released
            hop_wait(q_full, (unsigned)n & 1u);
            mbarrier_arrive(F::q_empty(bar));
        }

        // Epilogue: both consumers are done with every tile before the staging overwrites them (the
        // grid of tiles), or with the previous tile's staged O (the persistent grid).
        float inv[2];
ATTN_UNROLL
        for (int hi = 0; hi < 2; hi++) {
            l[hi] = group_sum(l[hi]);
            inv[hi] = l[hi] > 0.0f ? 1.0f / l[hi] : 0.0f;
        }
        named_barrier_sync(3, 128 * F::CONSUMERS);
        float2* wts = a.merge ? reinterpret_cast<float2*>(ostage + F::BQ * FaFwd<HS>::OLD * sizeof(float)) : nullptr;
        if (t == 0) {
            float* lse = a.lse + ((long long)tl.b * NH + tl.h) * a.Tq + tl.i0;
ATTN_UNROLL
            for (int hi = 0; hi < 2; hi++)
                if (r0 + 8 * hi + g < nq) fa_row_lse(lse, wts, r0 + 8 * hi + g, l[hi], m[hi]);
        }
        const long long ooff = ((long long)tl.b * a.Tq + tl.i0) * a.ldo + (long long)tl.h * HS;
        if (a.ox) hop_write_o<HS, NC>(reinterpret_cast<floatX*>(ostage), a.ox + ooff, a.ldo, nq, o, inv, r0, nullptr);
        else hop_write_o<HS, NC>(reinterpret_cast<float*>(ostage), a.o + ooff, a.ldo, nq, o, inv, r0, wts);
        if constexpr (!PERSISTENT) break;
    }
#else
    __trap();   // not sm_90a: the launcher never takes this kernel there
#endif
}
