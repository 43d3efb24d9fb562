// attention/dist_ops.h on the CUDA backend: device memory, kernels on the backend's stream
// (model/backend_kernels_cuda.cuh), so they are ordered with the layer kernels and with the device
// transports' collectives. real = floatX (bf16, or fp32 with -DGPT_CUDA_FP32), real_acc = float:
// the partial-attention kernels write fp32.
//
// Row copies and packings move "units" of 2, 4, 8 or 16 bytes: the widest that divides the
// element size times every width and stride and both pointers, so aligned rows move 16 bytes per
// thread and any other layout still works element by element. Every kernel is a grid-stride loop
// over a capped grid (no overflow for large n); empty calls launch nothing (a zero grid is an
// invalid launch).
#ifndef GPT_BACKEND_CUDA
#define GPT_BACKEND_CUDA  // this file is the CUDA backend: real = floatX in the schedules
#endif
#include "attention/dist_ops.h"

#include <stdint.h>

#include "attention/partial_attention_cuda.cuh"
#include "model/backend_kernels_cuda.cuh"

static const int DIST_THREADS = 256;
static const long DIST_MAX_BLOCKS = 1 << 16;  // then each thread loops

CommType dist_real_comm_type(void) {
#if defined(GPT_CUDA_FP32)
    return COMM_F32;
#else
    return COMM_BF16;
#endif
}
CommType dist_acc_comm_type(void) { return COMM_F32; }
int dist_host_memory(void) { return 0; }

void* dist_alloc(size_t bytes, const char* what) {
    void* p = NULL;
    const cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess)
        FAIL(cuda_error_hint(err), "cudaMalloc of %zu bytes for %s failed: %s", bytes, what,
             cudaGetErrorName(err));
    return p;
}

// Kernels enqueued earlier may still read or write p.
void dist_free(void* p) {
    if (!p) return;
    CUDA_CHECK(cudaStreamSynchronize(cuda_backend_stream()));
    CUDA_CHECK(cudaFree(p));
}

void dist_to_backend(void* dst, const void* host, size_t bytes) {
    if (!bytes) return;
    cudaStream_t s = cuda_backend_stream();
    CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

void dist_to_host(void* host, const void* src, size_t bytes) {
    if (!bytes) return;
    cudaStream_t s = cuda_backend_stream();
    CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

// Blocks of a grid-stride loop over n > 0 items.
static unsigned grid_for(long n) {
    const long blocks = (n + DIST_THREADS - 1) / DIST_THREADS;
    return (unsigned)(blocks < DIST_MAX_BLOCKS ? blocks : DIST_MAX_BLOCKS);
}

#define GRID_STRIDE_LOOP(e, n)                                                      \
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < (n);             \
         e += (long)gridDim.x * blockDim.x)

// --- Row copies and packings, in units of T (strides and widths in units) ------------------------

// n copies: dst + k dstep (rows, w) row stride ldd  <-  src + k sstep (rows, w) row stride lds.
template <typename T>
__global__ void copy_rows_kernel(T* dst, long ldd, long dstep, const T* src, long lds, long sstep,
                                 long n, long rows, long w) {
    GRID_STRIDE_LOOP(e, n * rows * w) {
        const long i = e / w, c = e % w, k = i / rows, r = i % rows;
        dst[k * dstep + r * ldd + c] = src[k * sstep + r * lds + c];
    }
}

// Where row r = (b, g + G*j) of the rows side (B, G*Tl, w) lives on the block side: block g
// (stride bstride) row (b, j) of (B, Tl, w).
__device__ __forceinline__ long block_offset(long r, int G, int Tl, long bstride, long w) {
    const long T = (long)G * Tl;
    const long b = r / T, t = r % T;
    const long g = t % G, j = t / G;
    return g * bstride + (b * Tl + j) * w;
}

// rows (B, G*Tl, w) row stride ld  <-  blocks; one item per unit of the rows side.
template <typename T>
__global__ void blocks_to_rows_kernel(T* rows, long ld, const T* blocks, long bstride, int G, int B,
                                      int Tl, long w) {
    GRID_STRIDE_LOOP(e, (long)B * G * Tl * w) {
        const long r = e / w, c = e % w;
        rows[r * ld + c] = blocks[block_offset(r, G, Tl, bstride, w) + c];
    }
}

// blocks  <-  rows (B, G*Tl, w) row stride ld.
template <typename T>
__global__ void rows_to_blocks_kernel(T* blocks, long bstride, const T* rows, long ld, int G, int B,
                                      int Tl, long w) {
    GRID_STRIDE_LOOP(e, (long)B * G * Tl * w) {
        const long r = e / w, c = e % w;
        blocks[block_offset(r, G, Tl, bstride, w) + c] = rows[r * ld + c];
    }
}

// A copy of (rows, w) elements of esize bytes between the rows side (stride ld) and either plain
// rows (stride lds) or the blocks (stride bstride).
typedef enum { COPY_ROWS, BLOCKS_TO_ROWS, ROWS_TO_BLOCKS } CopyKind;

typedef struct {
    CopyKind kind;
    void* dst;
    const void* src;
    long ldd, lds, bstride;  // elements, then units
    long dstep, sstep, n;    // row copies: n copies, dstep and sstep apart (elements, then units)
    int G, B, Tl;            // packings only
    long rows, w;            // elements, then units
} RowCopy;

template <typename T>
static void launch_copy(const RowCopy* c) {
    const long n = c->n * c->rows * c->w;
    cudaStream_t s = cuda_backend_stream();
    switch (c->kind) {
    case COPY_ROWS:
        LAUNCH(copy_rows_kernel<T>, grid_for(n), DIST_THREADS, 0, s, (T*)c->dst, c->ldd, c->dstep,
               (const T*)c->src, c->lds, c->sstep, c->n, c->rows, c->w);
        break;
    case BLOCKS_TO_ROWS:
        LAUNCH(blocks_to_rows_kernel<T>, grid_for(n), DIST_THREADS, 0, s, (T*)c->dst, c->ldd,
               (const T*)c->src, c->bstride, c->G, c->B, c->Tl, c->w);
        break;
    case ROWS_TO_BLOCKS:
        LAUNCH(rows_to_blocks_kernel<T>, grid_for(n), DIST_THREADS, 0, s, (T*)c->dst, c->bstride,
               (const T*)c->src, c->lds, c->G, c->B, c->Tl, c->w);
        break;
    }
}

// Converts c's strides and widths from elements of esize bytes to the widest unit that divides
// them all and both pointers, then launches.
static void run_copy(RowCopy c, size_t esize) {
    if (esize != 2 && esize != 4 && esize != 8)
        FAIL("caller bug", "dist row copy of %zu-byte elements (2, 4 or 8 expected)", esize);
    if (c.n <= 0 || c.rows <= 0 || c.w <= 0) return;
    const uintptr_t bits = (uintptr_t)c.dst | (uintptr_t)c.src | (uintptr_t)(c.ldd * esize) |
                           (uintptr_t)(c.lds * esize) | (uintptr_t)(c.bstride * esize) |
                           (uintptr_t)(c.dstep * esize) | (uintptr_t)(c.sstep * esize) |
                           (uintptr_t)(c.w * esize);
    size_t unit = 16;
    while (unit > esize && (bits & (unit - 1))) unit /= 2;
    const long k = (long)(unit / esize);  // elements per unit
    c.ldd /= k, c.lds /= k, c.bstride /= k, c.dstep /= k, c.sstep /= k, c.w /= k;
    switch (unit) {
    case 2: launch_copy<unsigned short>(&c); break;
    case 4: launch_copy<unsigned int>(&c); break;
    case 8: launch_copy<unsigned long long>(&c); break;
    default: launch_copy<uint4>(&c); break;
    }
}

static RowCopy row_copy(CopyKind kind, void* dst, long ldd, const void* src, long lds, long rows,
                        int w) {
    RowCopy c;
    c.kind = kind, c.dst = dst, c.src = src, c.ldd = ldd, c.lds = lds, c.bstride = 0;
    c.dstep = 0, c.sstep = 0, c.n = 1;
    c.G = 1, c.B = 1, c.Tl = 1, c.rows = rows, c.w = w;
    return c;
}

void dist_copy_rows(void* dst, long ldd, const void* src, long lds, long rows, int w, size_t esize) {
    run_copy(row_copy(COPY_ROWS, dst, ldd, src, lds, rows, w), esize);
}

void dist_copy_rows_batch(void* dst, long ldd, long dstep, const void* src, long lds, long sstep,
                          int n, long rows, int w, size_t esize) {
    RowCopy c = row_copy(COPY_ROWS, dst, ldd, src, lds, rows, w);
    c.dstep = dstep, c.sstep = sstep, c.n = n;
    run_copy(c, esize);
}

void dist_blocks_to_rows(void* rows, long ld, const void* blocks, long bstride, int G, int B,
                         int Tl, int w, size_t esize) {
    RowCopy c = row_copy(BLOCKS_TO_ROWS, rows, ld, blocks, 0, (long)B * G * Tl, w);
    c.bstride = bstride, c.G = G, c.B = B, c.Tl = Tl;
    run_copy(c, esize);
}

void dist_rows_to_blocks(void* blocks, long bstride, const void* rows, long ld, int G, int B,
                         int Tl, int w, size_t esize) {
    RowCopy c = row_copy(ROWS_TO_BLOCKS, blocks, 0, rows, ld, (long)B * G * Tl, w);
    c.bstride = bstride, c.G = G, c.B = B, c.Tl = Tl;
    run_copy(c, esize);
}

// --- Accumulators ----------------------------------------------------------------------------------

// dst (rows, w) floatX row stride ldd  <-  src (rows, w) fp32 row stride lds, rounded to nearest.
__global__ void acc_to_real_kernel(floatX* dst, long ldd, const float* src, long lds, long rows,
                                   long w) {
    GRID_STRIDE_LOOP(e, rows * w) {
        const long i = e / w, c = e % w;
        dst[i * ldd + c] = from_float<floatX>(src[i * lds + c]);
    }
}

void dist_acc_to_real(real* dst, long ldd, const real_acc* src, long lds, long rows, int w) {
    if (rows <= 0 || w <= 0) return;
    const long n = rows * w;
    LAUNCH(acc_to_real_kernel, grid_for(n), DIST_THREADS, 0, cuda_backend_stream(), dst, ldd, src,
           lds, rows, (long)w);
}

void dist_zero_acc(real_acc* x, size_t n) {
    if (n) CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof(real_acc), cuda_backend_stream()));
}

__global__ void add_acc_kernel(float* y, const float* x, long n) {
    GRID_STRIDE_LOOP(e, n) y[e] += x[e];
}

void dist_add_acc(real_acc* y, const real_acc* x, size_t n) {
    if (!n) return;
    LAUNCH(add_acc_kernel, grid_for((long)n), DIST_THREADS, 0, cuda_backend_stream(), y, x, (long)n);
}

// --- Partial attention -----------------------------------------------------------------------------

void dist_attention_forward(const AttentionProblem* p, const real* q, int ldq, const real* k,
                            int ldk, const real* v, int ldv, real_acc* o, int ldo, real_acc* lse) {
    attention_partial_forward_cuda(p, q, ldq, k, ldk, v, ldv, o, ldo, lse, cuda_backend_stream());
}

void dist_attention_forward_merge(const AttentionProblem* p, const real* q, int ldq, const real* k,
                                  int ldk, const real* v, int ldv, real_acc* o, int ldo,
                                  real_acc* lse, real_acc* step_o, real_acc* step_lse) {
#ifdef GPT_CUDA_FP32
    attention_partial_forward_cuda(p, q, ldq, k, ldk, v, ldv, step_o, ldo, step_lse, cuda_backend_stream());
    attention_merge_cuda(p->B, p->NH, p->HS, p->Tq, o, ldo, lse, step_o, ldo, step_lse, cuda_backend_stream());
#else
    (void)step_o;
    (void)step_lse;
    attention_partial_forward_merge_cuda(p, q, ldq, k, ldk, v, ldv, o, ldo, lse, cuda_backend_stream());
#endif
}

int dist_attention_merges_in_forward(void) {
#ifdef GPT_CUDA_FP32
    return 0;
#else
    return 1;
#endif
}

void dist_attention_row_dot(const AttentionProblem* p, const real* o, int ldo, const real* dout,
                            int lddo, real_acc* d) {
    attention_row_dot_cuda(p, o, ldo, dout, lddo, d, cuda_backend_stream());
}

void dist_attention_backward(const AttentionProblem* p, const real* q, int ldq, const real* k,
                             int ldk, const real* v, int ldv, const real* dout, int lddo,
                             const real_acc* lse, const real_acc* d, real_acc* dq, int lddq,
                             real_acc* dk, int lddk, real_acc* dv, int lddv) {
    attention_partial_backward_cuda(p, q, ldq, k, ldk, v, ldv, dout, lddo, lse, d, dq, lddq, dk,
                                    lddk, dv, lddv, cuda_backend_stream());
}

void dist_attention_merge(int B, int NH, int HS, int T, real_acc* o_a, int lda, real_acc* lse_a,
                          const real_acc* o_b, int ldb, const real_acc* lse_b) {
    attention_merge_cuda(B, NH, HS, T, o_a, lda, lse_a, o_b, ldb, lse_b, cuda_backend_stream());
}
