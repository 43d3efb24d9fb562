// The tiles and fragments shared by the FlashAttention-2-class kernels of the bf16 build of
// attention/partial_attention.cu (flash_forward.cuh, flash_backward.cuh; all included there,
// inside its anonymous namespace, after AttnArgs, visible_keys and first_query).
//
// Everything runs on mma.sync m16n8k16 (bf16 in, fp32 accumulate) through model/cuda_ptx.cuh:
// - S and P live in registers. The softmax works on the accumulator fragments (a lane holds rows
//   g and g+8 of its warp's 16 rows, columns 2t, 2t+1 of each 8-column tile; row statistics are
//   reduced over the 4 lanes of a group), and P is packed to bf16 in registers and used directly
//   as the A operand of P V: the C fragments of two adjacent 8-column tiles are exactly the A
//   fragment of one 16-wide k-step.
// - Operand tiles are loaded by ldmatrix from shared memory in a layout without bank conflicts:
//   for HS a multiple of 64, 64-column panels of 128-byte rows whose 16-byte chunks are
//   XOR-swizzled by (row % 8): the layout Hopper's TMA writes and wgmma reads with 128-byte
//   swizzle (CU_TENSOR_MAP_SWIZZLE_128B, one box per panel); other head sizes pad each row by 16
//   bytes (an odd number of chunks per row). Either way the 8 rows one ldmatrix phase reads hit 8
//   different 16-byte bank groups.
// - K/V (forward) and Q/dO/lse/D (backward) tiles are double-buffered with cp.async: the next
//   tile is in flight while the current one is computed.
#pragma once
#include "attention/flash_tile.cuh"
#include "model/cuda_ptx.cuh"

static_assert(sizeof(floatX) == 2, "the flash kernels are the bf16 build's");

// The block copies rows [0, nrows) of a rows x HS tile (source rows lds elements apart) into
// shared memory; rows >= nrows become zeros (never garbage: 0 * NaN would poison the products).
// With vec (16-byte aligned source) the copies are cp.async and land at the caller's wait.
template <int HS, int ROWS>
__device__ __forceinline__ void fa_load_tile(floatX* tile, const floatX* src, long long lds, int nrows, int vec) {
    typedef FaTile<HS, ROWS> T;
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
