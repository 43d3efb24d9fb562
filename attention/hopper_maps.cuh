// The Hopper kernels' TMA maps (cuTensorMapEncodeTiled through the driver's entry point,
// model/cuda_ptx_sm90.cuh): host code of the launchers of attention/hopper_forward.cu and
// hopper_backward.cu. Included after hopper_forward.cuh, in the file's unnamed namespace.
#pragma once

// A TMA map of a tensor of rank 2 or 3 (bf16 or fp32, esize bytes): dims[0] elements per row
// (innermost), byte strides of the outer dimensions, boxes of box[] elements.
inline CUtensorMap tma_map(const void* base, CUtensorMapDataType type, unsigned rank, const cuuint64_t* dims,
                           const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle,
                           const char* what) {
    static TmaEncodeTiledFn encode = NULL;   // the driver's entry point, found once
    if (!encode) encode = tma_encode_tiled_fn();
    CHECK(encode != NULL, "update the NVIDIA driver (CUDA 12.0 or newer)",
          "cuTensorMapEncodeTiled not found through cudaGetDriverEntryPointByVersion");
    CUtensorMap map;
    const cuuint32_t estrides[3] = {1, 1, 1};
    const CUresult r = encode(&map, type, rank, (void*)base, dims, strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    CHECK(r == CUDA_SUCCESS, "a caller bug: the launchers check 16-byte alignment first",
          "cuTensorMapEncodeTiled for the Hopper kernels' %s (rank %u, %llu x %llu elements, strides %llu bytes) "
          "failed: error %d", what, rank, (unsigned long long)dims[0], (unsigned long long)dims[1],
          (unsigned long long)strides[0], (int)r);
    return map;
}

// A matrix of `rows` rows of `cols` elements, rows `ld` elements apart, boxes of box_cols x box_rows.
inline CUtensorMap tma_map_2d(const void* base, CUtensorMapDataType type, size_t esize, long long cols, long long rows,
                              long long ld, int box_cols, int box_rows, CUtensorMapSwizzle swizzle, const char* what) {
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)ld * esize};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    return tma_map(base, type, 2, dims, strides, box, swizzle, what);
}

// Rows of NH heads of HS elements, rows ld elements apart, as a rank-3 tensor (HS, NH, rows), boxes
// of box_cols x 1 head x box_rows: a box never reaches into the next head (its columns past HS
// read as zeros, and are not written by a store or reduction).
inline CUtensorMap tma_map_heads(const void* base, CUtensorMapDataType type, size_t esize, int HS, int NH,
                                 long long rows, long long ld, int box_cols, int box_rows,
                                 CUtensorMapSwizzle swizzle, const char* what) {
    const cuuint64_t dims[3] = {(cuuint64_t)HS, (cuuint64_t)NH, (cuuint64_t)rows};
    const cuuint64_t strides[2] = {(cuuint64_t)HS * esize, (cuuint64_t)ld * esize};
    const cuuint32_t box[3] = {(cuuint32_t)box_cols, 1, (cuuint32_t)box_rows};
    return tma_map(base, type, 3, dims, strides, box, swizzle, what);
}

// Q, K, V or dO of the Hopper kernels: bf16 heads in 128-byte-swizzled boxes of 64 columns (one
// FaTile panel) x box_rows rows.
inline CUtensorMap hopper_tensor_map(const floatX* base, int HS, int NH, long long rows, int ld, int box_rows,
                                     const char* what) {
    return tma_map_heads(base, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(floatX), HS, NH, rows, ld, 64, box_rows,
                         CU_TENSOR_MAP_SWIZZLE_128B, what);
}
