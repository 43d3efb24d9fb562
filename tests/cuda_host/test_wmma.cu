// WMMA m16n16k16 (bf16 inputs, fp32 accumulate) under the host runtime against a double reference
// computed from the same bf16 inputs: every operand layout, accumulate from memory, and a 64 x 64
// GEMM whose tiles four warps load from shared memory that the whole block filled.
// `--die misaligned` must end with a diagnostic (an ldm that is not a multiple of 16 bytes).
#include "model/cuda_common.cuh"
#include "tests/cuda_host/test_check.h"

#include <stdlib.h>
#include <string.h>
#include <type_traits>

using namespace nvcuda;

// D (16x16, row-major) = A (16x16, row-major, lda 16) * B (16x16 stored with ldb) + C (row-major),
// with A and B read in the layouts given by the template parameters.
template <typename LA, typename LB>
__global__ void tile_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c, float* d,
                            float* d_col) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
    for (int i = 0; i < acc.num_elements; i++) acc.x[i] *= 2.0f;  // element-wise ops work on any mapping
    wmma::store_matrix_sync(d_col, acc, 16, wmma::mem_col_major);
}

// C (M x N, row-major) = A (M x K, row-major) * B (K x N, row-major). Block: 4 warps, a 32 x 32
// tile of C; the block stages 32 x 16 of A and 16 x 32 of B in shared memory per k step.
__global__ void gemm_kernel(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
    __shared__ __align__(32) __nv_bfloat16 sa[32 * 16];
    __shared__ __align__(32) __nv_bfloat16 sb[16 * 32];
    int warp = threadIdx.x / 32, wr = warp / 2, wc = warp % 2;
    int row0 = blockIdx.y * 32, col0 = blockIdx.x * 32;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int i = threadIdx.x; i < 32 * 16; i += blockDim.x) {
            sa[i] = A[(size_t)(row0 + i / 16) * K + k0 + i % 16];
            sb[i] = B[(size_t)(k0 + i / 32) * N + col0 + i % 32];
        }
        __syncthreads();
        wmma::load_matrix_sync(fa, sa + wr * 16 * 16, 16);
        wmma::load_matrix_sync(fb, sb + wc * 16, 32);
        wmma::mma_sync(acc, fa, fb, acc);
        __syncthreads();
    }
    wmma::store_matrix_sync(C + (size_t)(row0 + wr * 16) * N + col0 + wc * 16, acc, N, wmma::mem_row_major);
}

__global__ void misaligned_kernel(const __nv_bfloat16* a) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a, 20);  // 40 bytes: not a multiple of 16
}

static void fill_bf16(__nv_bfloat16* h, int n, int seed) {
    for (int i = 0; i < n; i++) h[i] = __float2bfloat16((float)((i * 37 + seed * 101) % 97 - 48) / 17.0f);
}

template <typename LA, typename LB> static void test_tile(const char* name) {
    const bool a_row = std::is_same<LA, wmma::row_major>::value;
    const bool b_row = std::is_same<LB, wmma::row_major>::value;
    __nv_bfloat16 ha[256], hb[256];
    float hc[256], hd[256], hd_col[256];
    fill_bf16(ha, 256, 1);
    fill_bf16(hb, 256, 2);
    for (int i = 0; i < 256; i++) hc[i] = (float)(i % 13) - 6.0f;
    __nv_bfloat16 *da, *db;
    float *dc, *dd, *dd_col;
    CUDA_CHECK(cudaMalloc(&da, sizeof ha));
    CUDA_CHECK(cudaMalloc(&db, sizeof hb));
    CUDA_CHECK(cudaMalloc(&dc, sizeof hc));
    CUDA_CHECK(cudaMalloc(&dd, sizeof hd));
    CUDA_CHECK(cudaMalloc(&dd_col, sizeof hd_col));
    CUDA_CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dc, hc, sizeof hc, cudaMemcpyHostToDevice));
    LAUNCH((tile_kernel<LA, LB>), 1, 32, 0, 0, da, db, dc, dd, dd_col);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(hd_col, dd_col, sizeof hd_col, cudaMemcpyDeviceToHost));
    double want[256], want_col[256];
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            double s = hc[r * 16 + c];
            for (int k = 0; k < 16; k++) {
                float av = __bfloat162float(a_row ? ha[r * 16 + k] : ha[k * 16 + r]);
                float bv = __bfloat162float(b_row ? hb[k * 16 + c] : hb[c * 16 + k]);
                s += (double)av * bv;
            }
            want[r * 16 + c] = s;
            want_col[c * 16 + r] = 2.0 * s;
        }
    double e1 = tolerance_ratio(hd, want, 256, 1e-5, 1e-5), e2 = tolerance_ratio(hd_col, want_col, 256, 1e-5, 1e-5);
    check(e1 <= 1.0 && e2 <= 1.0, "wmma 16x16x16 bf16, %s: row-major D and 2x col-major D match the reference "
          "(error ratios %.3g, %.3g)", name, e1, e2);
    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(db));
    CUDA_CHECK(cudaFree(dc));
    CUDA_CHECK(cudaFree(dd));
    CUDA_CHECK(cudaFree(dd_col));
}

static void test_gemm(void) {
    const int M = 64, N = 96, K = 48;
    __nv_bfloat16* ha = (__nv_bfloat16*)malloc(M * K * sizeof(__nv_bfloat16));
    __nv_bfloat16* hb = (__nv_bfloat16*)malloc(K * N * sizeof(__nv_bfloat16));
    float* hc = (float*)malloc(M * N * sizeof(float));
    double* want = (double*)malloc(M * N * sizeof(double));
    fill_bf16(ha, M * K, 3);
    fill_bf16(hb, K * N, 4);
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)__bfloat162float(ha[r * K + k]) * __bfloat162float(hb[k * N + c]);
            want[r * N + c] = s;
        }
    __nv_bfloat16 *da, *db;
    float* dc;
    CUDA_CHECK(cudaMalloc(&da, M * K * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&db, K * N * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&dc, M * N * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(da, ha, M * K * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db, hb, K * N * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    LAUNCH(gemm_kernel, dim3(N / 32, M / 32), 128, 0, 0, da, db, dc, M, N, K);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(hc, dc, M * N * sizeof(float), cudaMemcpyDeviceToHost));
    double e = tolerance_ratio(hc, want, M * N, 1e-5, 1e-5);
    check(e <= 1.0, "64 x 96 x 48 GEMM from shared-memory wmma tiles, 4 warps per block: error ratio %.3g "
          "(every element written: no NaN poison left)", e);
    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(db));
    CUDA_CHECK(cudaFree(dc));
    free(ha);
    free(hb);
    free(hc);
    free(want);
}

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--die") && !strcmp(argv[2], "misaligned")) {
        __nv_bfloat16* d;
        CUDA_CHECK(cudaMalloc(&d, 1024 * sizeof(__nv_bfloat16)));
        LAUNCH(misaligned_kernel, 1, 32, 0, 0, d);
        CUDA_CHECK(cudaDeviceSynchronize());
        printf("--die misaligned: the program was expected to end with a diagnostic\n");
        return 0;
    }
    test_tile<wmma::row_major, wmma::col_major>("A row-major, B col-major");
    test_tile<wmma::row_major, wmma::row_major>("A row-major, B row-major");
    test_tile<wmma::col_major, wmma::col_major>("A col-major, B col-major");
    test_tile<wmma::col_major, wmma::row_major>("A col-major, B row-major");
    test_gemm();
    return test_finish("test_wmma");
}
