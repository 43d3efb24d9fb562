// nvcuda::wmma for the host runtime: m16n16k16 with bf16 matrix_a/matrix_b and a float
// accumulator (the shape and types of bf16 tensor-core GEMMs on sm_80/sm_90).
//
// Each lane holds the whole 16x16 tile (num_elements = 256, x[] in row-major order), so code that
// applies one operation to every x[i] of a fragment behaves as on the GPU. The *_sync calls are
// warp collectives: all 32 lanes must call them (a warp barrier is taken), and each lane then does
// the whole operation itself. Pointer alignment (32 bytes) and ldm (a multiple of 16 bytes) are
// checked as the GPU requires. Any other shape or type does not compile.
#pragma once
#include "tests/cuda_host/host_bf16.h"
#include "tests/cuda_host/host_device.h"

// Warp barrier of all 32 lanes, plus the checks of one wmma call (block_exec.cpp).
void cuda_host_wmma_sync(const void* ptr, unsigned ldm, size_t elem_bytes, const char* what);

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> class fragment;

template <typename T> struct cuda_host_tile {
    enum { num_elements = 256 };
    typedef T element_type;
    typedef T storage_element_type;
    T x[256];  // element (r, c) of the 16x16 tile at x[r * 16 + c]
};

template <typename Layout>
class fragment<matrix_a, 16, 16, 16, __nv_bfloat16, Layout> : public cuda_host_tile<__nv_bfloat16> {};
template <typename Layout>
class fragment<matrix_b, 16, 16, 16, __nv_bfloat16, Layout> : public cuda_host_tile<__nv_bfloat16> {};
template <>
class fragment<accumulator, 16, 16, 16, float, void> : public cuda_host_tile<float> {};

template <typename Use, typename T, typename Layout, typename V>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, const V& v) {
    T value = (T)v;
    for (int i = 0; i < 256; i++) f.x[i] = value;
}

// matrix_a is M x K (row r, column k), matrix_b is K x N: a row-major tile has element (r, c)
// at ptr[r * ldm + c], a column-major one at ptr[c * ldm + r].
template <typename Use, typename Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout>& f,
                                    const __nv_bfloat16* ptr, unsigned ldm) {
    static_assert(std::is_same<Layout, row_major>::value || std::is_same<Layout, col_major>::value,
                  "wmma::load_matrix_sync: matrix_a/matrix_b need row_major or col_major");
    cuda_host_wmma_sync(ptr, ldm, sizeof(__nv_bfloat16), "wmma::load_matrix_sync");
    bool row = std::is_same<Layout, row_major>::value;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[r * 16 + c] = row ? ptr[r * ldm + c] : ptr[c * ldm + r];
}

static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* ptr,
                                    unsigned ldm, layout_t layout) {
    cuda_host_wmma_sync(ptr, ldm, sizeof(float), "wmma::load_matrix_sync");
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r * 16 + c] = layout == mem_row_major ? ptr[r * ldm + c] : ptr[c * ldm + r];
}

// Barriers before and after: no lane overwrites the tile while another still reads the old
// contents, and no lane goes on to change the stored tile before every lane has stored it.
static inline void store_matrix_sync(float* ptr, const fragment<accumulator, 16, 16, 16, float>& f,
                                     unsigned ldm, layout_t layout) {
    cuda_host_wmma_sync(ptr, ldm, sizeof(float), "wmma::store_matrix_sync");
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            if (layout == mem_row_major) ptr[r * ldm + c] = f.x[r * 16 + c];
            else ptr[c * ldm + r] = f.x[r * 16 + c];
        }
    cuda_host_wmma_sync(ptr, ldm, sizeof(float), "wmma::store_matrix_sync");
}

// d = a * b + c with float accumulation (bf16 products are exact in float); d may alias c.
template <typename LA, typename LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                            const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA>& a,
                            const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB>& b,
                            const fragment<accumulator, 16, 16, 16, float>& c) {
    cuda_host_wmma_sync(NULL, 0, 0, "wmma::mma_sync");
    float out[256];
    for (int r = 0; r < 16; r++)
        for (int col = 0; col < 16; col++) {
            float acc = c.x[r * 16 + col];
            for (int k = 0; k < 16; k++) acc += (float)a.x[r * 16 + k] * (float)b.x[k * 16 + col];
            out[r * 16 + col] = acc;
        }
    memcpy(d.x, out, sizeof out);
}

}  // namespace wmma
}  // namespace nvcuda
