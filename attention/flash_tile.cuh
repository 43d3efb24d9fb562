// The shared-memory layout of the FlashAttention-2-class kernels' bf16 tiles (attention/
// flash_attention.cuh): index arithmetic only, so that test_ptx can check it against the TMA's
// 128-byte swizzle (the layout Hopper's TMA writes and wgmma reads).
#pragma once
#include <stddef.h>

// A tile of ROWS x HS bf16 in shared memory; element (r, 8c .. 8c+7) is chunk c of row r. Swizzled
// (HS = 64, 128): panel p = c / 8 holds columns 64p .. 64p+63 of every row, PANEL elements apart;
// inside it a row is 64 elements and chunk c sits at (c ^ r) % 8. Padded: rows of LD = HS + 8.
template <int HS, int ROWS> struct FaTile {
    static_assert(HS % 16 == 0 && HS >= 16 && HS <= 128, "HS must be a multiple of 16 in [16, 128]");
    static constexpr int CPR = HS / 8;                 // 16-byte chunks per row
    static constexpr bool SWIZZLE = CPR % 8 == 0;
    static constexpr int LD = SWIZZLE ? 64 : HS + 8;   // elements from one row to the next
    static constexpr int PANEL = ROWS * LD;            // elements from one panel to the next
    static constexpr int ELEMS = SWIZZLE ? ROWS * HS : ROWS * LD;
    static constexpr size_t BYTES = (size_t)ELEMS * 2;   // bf16
    __host__ __device__ static int chunk(int r, int c) {
        if (!SWIZZLE) return r * LD + c * 8;
        if (CPR == 8) return r * LD + (c ^ (r & 7)) * 8;   // one panel (c < 8)
        return (c >> 3) * PANEL + r * LD + ((c ^ r) & 7) * 8;
    }
};

// T::chunk(r + dr, c + dc) from e = T::chunk(r, c) (plus any offset below 8 elements), for dr a
// multiple of 8 and dc whose low 3 bits have none in common with c's and do not carry past them
// (then (c + dc) % 8 == (c % 8) ^ (dc % 8), and in the swizzled layout r & 7 is unchanged: the XOR
// stays inside the panel's 64-element row, dc / 8 moves whole panels): one XOR and one add of
// constants, so per-lane base offsets computed once serve every fragment of a tile.
template <typename T> __host__ __device__ __forceinline__ int fa_chunk_at(int e, int dr, int dc) {
    return T::SWIZZLE ? (e ^ ((dc & 7) * 8)) + dr * T::LD + (dc >> 3) * T::PANEL : e + dr * T::LD + dc * 8;
}
