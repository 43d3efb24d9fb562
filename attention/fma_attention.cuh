// Tiled FMA kernels for the fp32 build of attention/partial_attention.cu (-DGPT_CUDA_FP32, the
// precision reference; included there, inside its anonymous namespace, after AttnArgs,
// visible_keys and first_query, as flash_attention.cuh is in the bf16 build): tensor cores take no
// fp32 inputs. A block has 4 warps and 64 rows of one (sequence, head); the other side streams
// through shared memory in tiles of 64; per-warp GEMMs on shared-memory tiles (warp_gemm_nt:
// scores into the warp's scratch; WarpAcc::mma: the output in registers), with lane l computing
// rows 8*(l/16) .. +8 and columns l%16 + 16c. Elementwise work on a warp's 16 x 64 scores is done
// by lane pairs (row l/2, columns 2t + l%2). The backward is two passes (dK/dV per key tile, dQ per
// query tile), each recomputing S and dP. Every output element has one writer per launch. Under a
// sliding window (a.window) the key loops start at the first key the tile's first query sees and
// the query loop stops at the last query the tile's last key is seen by (query_end); per warp,
// the 16-column blocks before its first row's band (after its last key's) are skipped. A document
// mask (a.doc_start) bounds the rows from below the same way (first_visible_key, query_end take
// the later start and the earlier end): both grow with the position, so the tile's first query
// still has the lowest first key and its last key the latest query end.
#pragma once
// Lanes read a tile column-wise (row r0 + 16 lanes' rows); an odd row stride puts the 16 rows in
// 16 different banks.
constexpr int TILE_PAD = 1;
// constexpr ints rather than an enum: the host runtime's min/max take arithmetic types only.
constexpr int BQ = 64, BK = 64, NWARPS = 4, NTHREADS = 32 * NWARPS, WROWS = 16;
static_assert(BQ == BK && BQ == NWARPS * WROWS, "a block's rows are its warps' rows; tiles are square");

constexpr size_t align128(size_t x) { return (x + 127) & ~(size_t)127; }

// Shared-memory layout for a head size.
template <int HS> struct Layout {
    static_assert(HS % 16 == 0 && HS >= 16 && HS <= 128, "HS must be a multiple of 16 in [16, 128]");
    static constexpr int TLD = HS + TILE_PAD;                 // row stride of a floatX tile (64 x HS)
    static constexpr int SLD = (HS > BK ? HS : BK) + 4;       // row stride of a warp's fp32 scratch
    // The same scratch viewed as floatX (P or dS written over the scores they came from).
    static constexpr int PLD = SLD * (int)(sizeof(float) / sizeof(floatX));
    static constexpr size_t TILE = align128(sizeof(floatX) * BQ * TLD);
    static constexpr size_t SCRATCH = align128(sizeof(float) * WROWS * SLD);   // per warp
    static constexpr size_t VEC = align128(sizeof(float) * BQ);                // 64 floats or ints
    // Forward: Q, K, V tiles; a scratch per warp; per-warp row values (4 x 16); visible keys.
    static constexpr size_t FWD = 3 * TILE + NWARPS * SCRATCH + 2 * VEC;
    // Backward passes: four tiles; two scratches per warp; lse, d and visibility per row.
    static constexpr size_t BWD = 4 * TILE + 2 * NWARPS * SCRATCH + 3 * VEC;
};

// The block copies a 64 x HS tile (rows of stride lds in global memory) into shared memory with
// row stride TLD; rows >= nrows become zeros (never garbage: 0 * NaN would poison the products).
template <int HS>
__device__ void load_tile(floatX* dst, const floatX* src, int lds, int nrows, int vec) {
    constexpr int TLD = Layout<HS>::TLD;
    if (vec) {
        constexpr int CPR = HS / X128_ELEMS;   // 16-byte chunks per row
        for (int idx = threadIdx.x; idx < BQ * CPR; idx += blockDim.x) {
            const int r = idx / CPR, c = (idx % CPR) * X128_ELEMS;
            x128 val;
            if (r < nrows) {
                val = load128(src + (long long)r * lds + c);
            } else {
                for (int e = 0; e < X128_ELEMS; e++) val.v[e] = zero_x();
            }
            if constexpr (TLD % X128_ELEMS == 0) {
                store128(dst + r * TLD + c, val);
            } else {
                for (int e = 0; e < X128_ELEMS; e++) dst[r * TLD + c + e] = val.v[e];
            }
        }
    } else {
        for (int idx = threadIdx.x; idx < BQ * HS; idx += blockDim.x) {
            const int r = idx / HS, c = idx % HS;
            dst[r * TLD + c] = r < nrows ? src[(long long)r * lds + c] : zero_x();
        }
    }
}

// ---- fp32: FMA loops (lane l: rows r0 = 8*(l/16) .. r0+8, columns l%16 + 16c) ---------------
struct RowMap {
    __device__ void init(float*) {}
};

template <int HS, int G = BK / 16>   // G: see the WMMA version (unused here)
__device__ void warp_gemm_nt(float* C, int ldc, const floatX* A, int lda, const floatX* B, int ldb,
                             int cb0, int cb1) {
    const int lane = threadIdx.x & 31, r0 = (lane >> 4) * 8, cl = lane & 15;
    for (int cb = cb0; cb < cb1; cb++) {
        float acc[8];
ATTN_UNROLL
        for (int i = 0; i < 8; i++) acc[i] = 0.0f;
        const float* b = B + (cb * 16 + cl) * ldb;
        for (int k = 0; k < HS; k++) {
            const float bk = b[k];
ATTN_UNROLL
            for (int i = 0; i < 8; i++) acc[i] = fmaf(A[(r0 + i) * lda + k], bk, acc[i]);
        }
ATTN_UNROLL
        for (int i = 0; i < 8; i++) C[(r0 + i) * ldc + cb * 16 + cl] = acc[i];
    }
    __syncwarp();
}

template <int HS> struct WarpAcc {
    float x[8][HS / 16];
    __device__ void zero() {
ATTN_UNROLL
        for (int i = 0; i < 8; i++)
ATTN_UNROLL
            for (int n = 0; n < HS / 16; n++) x[i][n] = 0.0f;
    }
    __device__ void scale(float s) {
ATTN_UNROLL
        for (int i = 0; i < 8; i++)
ATTN_UNROLL
            for (int n = 0; n < HS / 16; n++) x[i][n] *= s;
    }
    __device__ void scale_rows(const float* s, const RowMap&) {
        const int r0 = ((threadIdx.x & 31) >> 4) * 8;
ATTN_UNROLL
        for (int i = 0; i < 8; i++) {
            const float si = s[r0 + i];
ATTN_UNROLL
            for (int n = 0; n < HS / 16; n++) x[i][n] *= si;
        }
    }
    __device__ void mma(const floatX* A, int lda, const floatX* B, int ldb, int kb0, int kb1) {
        const int lane = threadIdx.x & 31, r0 = (lane >> 4) * 8, cl = lane & 15;
        for (int k = kb0 * 16; k < kb1 * 16; k++) {
            float b[HS / 16];
ATTN_UNROLL
            for (int n = 0; n < HS / 16; n++) b[n] = B[k * ldb + cl + 16 * n];
ATTN_UNROLL
            for (int i = 0; i < 8; i++) {
                const float ai = A[(r0 + i) * lda + k];
ATTN_UNROLL
                for (int n = 0; n < HS / 16; n++) x[i][n] = fmaf(ai, b[n], x[i][n]);
            }
        }
    }
    __device__ void store(float* C, int ldc) {
        const int lane = threadIdx.x & 31, r0 = (lane >> 4) * 8, cl = lane & 15;
        __syncwarp();
ATTN_UNROLL
        for (int i = 0; i < 8; i++)
ATTN_UNROLL
            for (int n = 0; n < HS / 16; n++) C[(r0 + i) * ldc + cl + 16 * n] = x[i][n];
        __syncwarp();
    }
};


// ---- forward ------------------------------------------------------------------------------------
// Grid (query tiles, NH, B), latest query tiles (the most keys) first. o, lse: see the header.
template <int HS>
__global__ void __launch_bounds__(NTHREADS) attention_forward_kernel(const AttnArgs a) {
    typedef Layout<HS> L;
    DYNAMIC_SHARED(unsigned char, smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    floatX* Qs = reinterpret_cast<floatX*>(smem);
    floatX* Ks = reinterpret_cast<floatX*>(smem + L::TILE);
    floatX* Vs = reinterpret_cast<floatX*>(smem + 2 * L::TILE);
    float* S = reinterpret_cast<float*>(smem + 3 * L::TILE + warp * L::SCRATCH);   // this warp's
    floatX* P = reinterpret_cast<floatX*>(S);                                       // P over S
    float* rowv = reinterpret_cast<float*>(smem + 3 * L::TILE + NWARPS * L::SCRATCH) + warp * WROWS;
    int* nvis = reinterpret_cast<int*>(smem + 3 * L::TILE + NWARPS * L::SCRATCH + L::VEC);

    const int NH = gridDim.y, h = blockIdx.y, b = blockIdx.z;
    const int i0 = (gridDim.x - 1 - blockIdx.x) * BQ;
    const int nq = min(BQ, a.Tq - i0);
    const floatX* kg = a.k + (long long)b * a.Tk * a.ldk + (long long)h * HS;
    const floatX* vg = a.v + (long long)b * a.Tk * a.ldv + (long long)h * HS;

    load_tile<HS>(Qs, a.q + ((long long)b * a.Tq + i0) * a.ldq + (long long)h * HS, a.ldq, nq, a.vec);
    for (int r = threadIdx.x; r < BQ; r += blockDim.x) nvis[r] = r < nq ? visible_keys(a, i0 + r) : 0;
    __syncthreads();
    const int kend = nvis[nq - 1];   // keys beyond what the last query sees: masked for the tile
    const int kbeg = first_visible_key(a, b, i0);   // ... and before what the first sees (window, documents)
    const int wlast = min(warp * WROWS + WROWS, nq) - 1;
    const int wvis = wlast >= warp * WROWS ? nvis[wlast] : 0;   // keys this warp's rows see
    const int wlo = warp * WROWS < nq ? first_visible_key(a, b, i0 + warp * WROWS) : 0;   // ... from

    RowMap map;
    map.init(S);
    WarpAcc<HS> acc;
    acc.zero();
    const int r = lane >> 1, half = lane & 1;   // this lane's row and column parity
    const int my_nvis = nvis[warp * WROWS + r];
    const int my_lo = first_visible_key(a, b, i0 + warp * WROWS + r);   // (a row past nq sees none)
    float m = -INFINITY, l = 0.0f;              // running max (log2 units) and sum of the row
    const floatX* Qw = Qs + warp * WROWS * L::TLD;

    for (int j0 = kbeg; j0 < kend; j0 += BK) {
        const int nk = min(BK, kend - j0);
        __syncthreads();   // every warp is done with the previous K, V tiles
        load_tile<HS>(Ks, kg + (long long)j0 * a.ldk, a.ldk, nk, a.vec);
        load_tile<HS>(Vs, vg + (long long)j0 * a.ldv, a.ldv, nk, a.vec);
        __syncthreads();
        const int wn = min(nk, wvis - j0);
        const int cb0 = max(0, wlo - j0) / 16;  // 16-key blocks before the warp's band
        if (wn <= cb0 * 16) continue;           // no row of this warp sees this tile
        const int ncb = (wn + 15) / 16;         // 16-key blocks that some row of the warp sees
        warp_gemm_nt<HS>(S, L::SLD, Qw, L::TLD, Ks, L::TLD, cb0, ncb);

        const int nv = max(0, min(my_nvis - j0, nk));   // this row's visible keys in the tile:
        const int lo = my_lo - j0;                      // those from lo on
        float s[BK / 2];
        float mx = -INFINITY;
ATTN_UNROLL
        for (int t = 0; t < BK / 2; t++) {
            const int j = 2 * t + half;
            s[t] = j < nv && j >= lo ? S[r * L::SLD + j] * a.scale_log2 : -INFINITY;
            mx = fmaxf(mx, s[t]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_new = fmaxf(m, mx);
        const float corr = m_new == -INFINITY ? 1.0f : exp2f(m - m_new);   // 0 for an empty row
        float sum = 0.0f;
ATTN_UNROLL
        for (int t = 0; t < BK / 2; t++) {
            s[t] = s[t] == -INFINITY ? 0.0f : exp2f(s[t] - m_new);
            sum += s[t];
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * corr + sum;
        m = m_new;
        __syncwarp();   // every lane has read its scores before P overwrites them
ATTN_UNROLL
        for (int t = 0; t < BK / 2; t++) {
            const int j = 2 * t + half;
            if (j >= cb0 * 16 && j < ncb * 16) P[r * L::PLD + j] = from_float<floatX>(s[t]);
        }
        if (half == 0) rowv[r] = corr;
        __syncwarp();
        acc.scale_rows(rowv, map);
        acc.mma(P, L::PLD, Vs, L::TLD, cb0, ncb);   // O += P V
    }

    __syncwarp();
    if (half == 0) rowv[r] = l > 0.0f ? 1.0f / l : 0.0f;   // no visible key: o = 0
    __syncwarp();
    acc.scale_rows(rowv, map);
    acc.store(S, L::SLD);
    const int rows = min(WROWS, nq - warp * WROWS);
    const long long row0 = (long long)b * a.Tq + i0 + warp * WROWS;
    for (int idx = lane; idx < rows * HS; idx += 32) {
        const int rr = idx / HS, c = idx % HS;
        a.o[(row0 + rr) * a.ldo + (long long)h * HS + c] = S[rr * L::SLD + c];
    }
    if (half == 0 && r < rows) {
        a.lse[((long long)b * NH + h) * a.Tq + i0 + warp * WROWS + r] =
            l > 0.0f ? m * LN2 + logf(l) : -INFINITY;
    }
}

// ---- backward: dK, dV ---------------------------------------------------------------------------
// Grid (key tiles, NH, B). Warp w owns keys 16w .. 16w+16 of the tile and works on transposed
// tiles: S^T = K_w Q^T, P^T, dP^T = V_w dO^T, dS^T; dV_w += P^T dO, dK_w += scale dS^T Q.
template <int HS>
__global__ void __launch_bounds__(NTHREADS) attention_backward_dkdv_kernel(const AttnArgs a) {
    typedef Layout<HS> L;
    DYNAMIC_SHARED(unsigned char, smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    floatX* Ks = reinterpret_cast<floatX*>(smem);
    floatX* Vs = reinterpret_cast<floatX*>(smem + L::TILE);
    floatX* Qs = reinterpret_cast<floatX*>(smem + 2 * L::TILE);
    floatX* Gs = reinterpret_cast<floatX*>(smem + 3 * L::TILE);   // dO
    unsigned char* scratch = smem + 4 * L::TILE + 2 * warp * L::SCRATCH;
    float* S = reinterpret_cast<float*>(scratch);                 // S^T, then P^T over it
    float* Dp = reinterpret_cast<float*>(scratch + L::SCRATCH);   // dP^T, then dS^T over it
    floatX* Pt = reinterpret_cast<floatX*>(S);
    floatX* dSt = reinterpret_cast<floatX*>(Dp);
    unsigned char* vecs = smem + 4 * L::TILE + 2 * NWARPS * L::SCRATCH;
    float* lse2 = reinterpret_cast<float*>(vecs);            // final lse * log2(e) per query
    float* dsum = reinterpret_cast<float*>(vecs + L::VEC);   // d per query
    int* fq = reinterpret_cast<int*>(vecs + 2 * L::VEC);     // first query that sees each key

    const int NH = gridDim.y, h = blockIdx.y, b = blockIdx.z;
    const int j0 = blockIdx.x * BK;
    const int nk = min(BK, a.Tk - j0);
    for (int r = threadIdx.x; r < BK; r += blockDim.x) fq[r] = r < nk ? first_query(a, j0 + r) : a.Tq;
    __syncthreads();
    const int qstart = fq[0];
    const int qend = query_end(a, b, j0 + nk - 1);   // (a.Tq without a window or documents)
    if (qstart >= qend) return;   // no query of this problem sees these keys: dk, dv += 0
    load_tile<HS>(Ks, a.k + ((long long)b * a.Tk + j0) * a.ldk + (long long)h * HS, a.ldk, nk, a.vec);
    load_tile<HS>(Vs, a.v + ((long long)b * a.Tk + j0) * a.ldv + (long long)h * HS, a.ldv, nk, a.vec);
    const floatX* qg = a.q + (long long)b * a.Tq * a.ldq + (long long)h * HS;
    const floatX* gg = a.dout + (long long)b * a.Tq * a.lddo + (long long)h * HS;
    const float* lse_h = a.lse_in + ((long long)b * NH + h) * a.Tq;
    const float* d_h = a.d + ((long long)b * NH + h) * a.Tq;

    const int wfq = fq[warp * WROWS];   // the warp's earliest key: the first query of the warp
    const int wlast = min(warp * WROWS + WROWS, nk) - 1;   // ... its latest: the end of its queries
    const int wqe = wlast >= warp * WROWS ? query_end(a, b, j0 + wlast) : 0;
    const int r = lane >> 1, half = lane & 1;
    const int my_fq = fq[warp * WROWS + r];
    const int my_qe = query_end(a, b, j0 + warp * WROWS + r);   // (a key past nk: my_fq is Tq)
    const floatX* Kw = Ks + warp * WROWS * L::TLD;
    const floatX* Vw = Vs + warp * WROWS * L::TLD;
    WarpAcc<HS> dk_acc, dv_acc;
    dk_acc.zero();
    dv_acc.zero();

    for (int i0 = qstart / BQ * BQ; i0 < qend; i0 += BQ) {
        const int nq = min(BQ, a.Tq - i0);
        __syncthreads();   // every warp is done with the previous Q, dO tiles
        load_tile<HS>(Qs, qg + (long long)i0 * a.ldq, a.ldq, nq, a.vec);
        load_tile<HS>(Gs, gg + (long long)i0 * a.lddo, a.lddo, nq, a.vec);
        for (int c = threadIdx.x; c < BQ; c += blockDim.x) {
            lse2[c] = c < nq ? lse_h[i0 + c] * LOG2E : -INFINITY;
            dsum[c] = c < nq ? d_h[i0 + c] : 0.0f;
        }
        __syncthreads();
        if (wfq >= i0 + nq || wqe <= i0) continue;   // no query of this tile sees any key of this warp
        const int cb0 = max(0, wfq - i0) / 16, cb1 = (min(nq, wqe - i0) + 15) / 16;
        constexpr int G = HS >= 96 ? 2 : BQ / 16;   // dK, dV accumulators already hold 2*HS/8 floats
        warp_gemm_nt<HS, G>(S, L::SLD, Kw, L::TLD, Qs, L::TLD, cb0, cb1);
        warp_gemm_nt<HS, G>(Dp, L::SLD, Vw, L::TLD, Gs, L::TLD, cb0, cb1);

        // P^T = exp2(scale_log2 S^T - lse2) where visible, dS^T = P^T (dP^T - d), in chunks of 16
        // query columns. The floatX value of column c lands on float c/2 of the same row, which
        // belongs to this chunk or an earlier one: read the chunk, sync, then write it.
        for (int c0 = 0; c0 < BQ; c0 += 16) {
            float pv[8], dsv[8];
ATTN_UNROLL
            for (int t = 0; t < 8; t++) {
                const int c = c0 + 2 * t + half;   // query column; visible implies cb0*16 <= c < nq
                float p = 0.0f, ds = 0.0f;
                if (i0 + c >= my_fq && i0 + c < my_qe && lse2[c] != -INFINITY) {
                    p = exp2f(S[r * L::SLD + c] * a.scale_log2 - lse2[c]);
                    ds = p * (Dp[r * L::SLD + c] - dsum[c]);
                }
                pv[t] = p;
                dsv[t] = ds;
            }
            __syncwarp();
            if (c0 >= cb0 * 16 && c0 < cb1 * 16) {
ATTN_UNROLL
                for (int t = 0; t < 8; t++) {
                    const int c = c0 + 2 * t + half;
                    Pt[r * L::PLD + c] = from_float<floatX>(pv[t]);
                    dSt[r * L::PLD + c] = from_float<floatX>(dsv[t]);
                }
            }
        }
        __syncwarp();
        dv_acc.mma(Pt, L::PLD, Gs, L::TLD, cb0, cb1);    // dV_w += P^T dO
        dk_acc.mma(dSt, L::PLD, Qs, L::TLD, cb0, cb1);   // dK_w += dS^T Q
    }

    dk_acc.scale(a.scale);
    dk_acc.store(S, L::SLD);
    dv_acc.store(Dp, L::SLD);
    const int rows = min(WROWS, nk - warp * WROWS);
    const long long row0 = (long long)b * a.Tk + j0 + warp * WROWS;
    for (int idx = lane; idx < rows * HS; idx += 32) {
        const int rr = idx / HS, c = idx % HS;
        a.dk[(row0 + rr) * a.lddk + (long long)h * HS + c] += S[rr * L::SLD + c];
        a.dv[(row0 + rr) * a.lddv + (long long)h * HS + c] += Dp[rr * L::SLD + c];
    }
}

// ---- backward: dQ -------------------------------------------------------------------------------
// Grid (query tiles, NH, B), latest first. Warp w owns queries 16w .. 16w+16 of the tile:
// S = Q_w K^T, dP = dO_w V^T, dS = P (dP - d), dQ_w += scale dS K.
template <int HS>
__global__ void __launch_bounds__(NTHREADS) attention_backward_dq_kernel(const AttnArgs a) {
    typedef Layout<HS> L;
    DYNAMIC_SHARED(unsigned char, smem);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    floatX* Qs = reinterpret_cast<floatX*>(smem);
    floatX* Gs = reinterpret_cast<floatX*>(smem + L::TILE);   // dO
    floatX* Ks = reinterpret_cast<floatX*>(smem + 2 * L::TILE);
    floatX* Vs = reinterpret_cast<floatX*>(smem + 3 * L::TILE);
    unsigned char* scratch = smem + 4 * L::TILE + 2 * warp * L::SCRATCH;
    float* S = reinterpret_cast<float*>(scratch);                 // S, then dS over it
    float* Dp = reinterpret_cast<float*>(scratch + L::SCRATCH);   // dP
    floatX* dS = reinterpret_cast<floatX*>(S);
    unsigned char* vecs = smem + 4 * L::TILE + 2 * NWARPS * L::SCRATCH;
    float* lse2 = reinterpret_cast<float*>(vecs);
    float* dsum = reinterpret_cast<float*>(vecs + L::VEC);
    int* nvis = reinterpret_cast<int*>(vecs + 2 * L::VEC);

    const int NH = gridDim.y, h = blockIdx.y, b = blockIdx.z;
    const int i0 = (gridDim.x - 1 - blockIdx.x) * BQ;
    const int nq = min(BQ, a.Tq - i0);
    const float* lse_h = a.lse_in + ((long long)b * NH + h) * a.Tq;
    const float* d_h = a.d + ((long long)b * NH + h) * a.Tq;
    for (int r = threadIdx.x; r < BQ; r += blockDim.x) {
        nvis[r] = r < nq ? visible_keys(a, i0 + r) : 0;
        lse2[r] = r < nq ? lse_h[i0 + r] * LOG2E : -INFINITY;
        dsum[r] = r < nq ? d_h[i0 + r] : 0.0f;
    }
    __syncthreads();
    const int kend = nvis[nq - 1];
    const int kbeg = first_visible_key(a, b, i0);   // (0 without a window or documents)
    if (kend <= kbeg) return;   // no query of this tile sees a key: dq += 0
    load_tile<HS>(Qs, a.q + ((long long)b * a.Tq + i0) * a.ldq + (long long)h * HS, a.ldq, nq, a.vec);
    load_tile<HS>(Gs, a.dout + ((long long)b * a.Tq + i0) * a.lddo + (long long)h * HS, a.lddo, nq, a.vec);
    const floatX* kg = a.k + (long long)b * a.Tk * a.ldk + (long long)h * HS;
    const floatX* vg = a.v + (long long)b * a.Tk * a.ldv + (long long)h * HS;

    const int wlast = min(warp * WROWS + WROWS, nq) - 1;
    const int wvis = wlast >= warp * WROWS ? nvis[wlast] : 0;
    const int wlo = warp * WROWS < nq ? first_visible_key(a, b, i0 + warp * WROWS) : 0;
    const int r = lane >> 1, half = lane & 1;
    const int my_nvis = nvis[warp * WROWS + r];
    const int my_lo = first_visible_key(a, b, i0 + warp * WROWS + r);
    const float my_lse2 = lse2[warp * WROWS + r], my_d = dsum[warp * WROWS + r];
    const floatX* Qw = Qs + warp * WROWS * L::TLD;
    const floatX* Gw = Gs + warp * WROWS * L::TLD;
    WarpAcc<HS> dq_acc;
    dq_acc.zero();

    for (int j0 = kbeg; j0 < kend; j0 += BK) {
        const int nk = min(BK, kend - j0);
        __syncthreads();
        load_tile<HS>(Ks, kg + (long long)j0 * a.ldk, a.ldk, nk, a.vec);
        load_tile<HS>(Vs, vg + (long long)j0 * a.ldv, a.ldv, nk, a.vec);
        __syncthreads();
        const int wn = min(nk, wvis - j0);
        const int cb0 = max(0, wlo - j0) / 16;
        if (wn <= cb0 * 16) continue;
        const int ncb = (wn + 15) / 16;
        warp_gemm_nt<HS>(S, L::SLD, Qw, L::TLD, Ks, L::TLD, cb0, ncb);
        warp_gemm_nt<HS>(Dp, L::SLD, Gw, L::TLD, Vs, L::TLD, cb0, ncb);

        const int nv = max(0, min(my_nvis - j0, nk)), lo = my_lo - j0;   // visible: [lo, nv)
        float dsv[BK / 2];
ATTN_UNROLL
        for (int t = 0; t < BK / 2; t++) {
            const int j = 2 * t + half;
            float ds = 0.0f;
            if (j < nv && j >= lo && my_lse2 != -INFINITY) {
                const float p = exp2f(S[r * L::SLD + j] * a.scale_log2 - my_lse2);
                ds = p * (Dp[r * L::SLD + j] - my_d);
            }
            dsv[t] = ds;
        }
        __syncwarp();   // every lane has read S before dS overwrites it
ATTN_UNROLL
        for (int t = 0; t < BK / 2; t++) {
            const int j = 2 * t + half;
            if (j >= cb0 * 16 && j < ncb * 16) dS[r * L::PLD + j] = from_float<floatX>(dsv[t]);
        }
        __syncwarp();
        dq_acc.mma(dS, L::PLD, Ks, L::TLD, cb0, ncb);   // dQ_w += dS K
    }

    dq_acc.scale(a.scale);
    dq_acc.store(S, L::SLD);
    const int rows = min(WROWS, nq - warp * WROWS);
    const long long row0 = (long long)b * a.Tq + i0 + warp * WROWS;
    for (int idx = lane; idx < rows * HS; idx += 32) {
        const int rr = idx / HS, c = idx % HS;
        a.dq[(row0 + rr) * a.lddq + (long long)h * HS + c] += S[rr * L::SLD + c];
    }
}

// Columns [0, width) of rows rows of stride ld set to 0 (the gradients of a call that writes them).
__global__ void zero_heads_kernel(float* x, int ld, long long rows, int width) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * width) x[(idx / width) * ld + idx % width] = 0.0f;
}
void zero_heads(float* x, int ld, long long rows, int width, cudaStream_t stream) {
    const long long n = rows * width;
    if (n > 0) LAUNCH(zero_heads_kernel, (unsigned)((n + 255) / 256), 256, 0, stream, x, ld, rows, width);
}
