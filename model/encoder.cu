// Token + position embedding, forward and deterministic backward: twins of encoder_forward and
// encoder_backward in model/layers.c.
//
// Backward without float atomics. dwpe: position pos(t) receives the rows b*T + t, b = 0..B-1;
// one block per t sums them in a fixed order. dwte: rows that share a token must be summed in a
// fixed order too, so the rows are first sorted by the 64-bit key (token << 32 | row):
//   1. encoder_sort_chunks_kernel: a bitonic sort of each chunk of ENC_SORT_CHUNK keys in shared
//      memory;
//   2. encoder_merge_rank_kernel (only when there are several chunks): the final place of a key is
//      its rank in its own chunk plus, for every other chunk, the number of keys there below it
//      (a binary search). The keys are distinct (the row is part of the key), so the places are
//      a permutation and no two threads write the same slot;
//   3. encoder_wte_backward_kernel: one block per sorted slot; a block whose slot starts a run
//      of equal tokens sums the rows of the run (warp w takes every ENC_WARPS-th row, then the
//      warps' sums are added in warp order) in fp32 and adds the total to dwte[token] once.
// Every step is a fixed function of the tokens, so the result is bitwise reproducible.
#include "model/layers_cuda.cuh"

static constexpr int ENC_THREADS = 256;        // forward and merge kernels
static constexpr int ENC_SORT_CHUNK = 2048;    // keys sorted per block (16 KiB of shared memory)
static constexpr int ENC_SORT_THREADS = 1024;  // one compare-exchange per thread per stage
static constexpr int ENC_WARPS = 4;            // warps summing the rows of one token or position

typedef unsigned long long u64;

// --- Forward ----------------------------------------------------------------------------------------

// One thread per VEC channels of one row.
template <int VEC>
__global__ void encoder_forward_kernel(floatX* out, const int* tokens, const floatX* wte, const floatX* wpe,
                                       int N, int T, int C, TokenLayout pos, const int* row_pos) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const int per_row = C / VEC;
    const long n = idx / per_row;
    if (n >= N) return;
    const int c = (int)(idx - n * per_row) * VEC;
    const long p = row_pos ? row_pos[n] : token_layout_position(pos, n % T);
    const PackX<VEC> we = load_packx<VEC>(wte + (long)tokens[n] * C + c);
    const PackX<VEC> pe = load_packx<VEC>(wpe + p * C + c);
    PackX<VEC> o;
    UNROLL
    for (int k = 0; k < VEC; k++) o.v[k] = from_float<floatX>(to_float(we.v[k]) + to_float(pe.v[k]));
    store_packx<VEC>(out + n * C + c, o);
}

template <int VEC>
static void launch_encoder_forward(floatX* out, const int* tokens, const floatX* wte, const floatX* wpe,
                                   int N, int T, int C, TokenLayout pos, const int* row_pos,
                                   cudaStream_t stream) {
    const long threads = (long)N * (C / VEC);
    LAUNCH(encoder_forward_kernel<VEC>, (unsigned)ceil_div_long(threads, ENC_THREADS), ENC_THREADS, 0,
           stream, out, tokens, wte, wpe, N, T, C, pos, row_pos);
}

void encoder_forward_cuda(floatX* out, const int* tokens, const floatX* wte, const floatX* wpe,
                          int B, int T, int C, TokenLayout pos, const int* row_pos,
                          cudaStream_t stream) {
    const int N = B * T;
    if (N <= 0 || C <= 0) return;
    if (C % X128_ELEMS == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe))
        launch_encoder_forward<X128_ELEMS>(out, tokens, wte, wpe, N, T, C, pos, row_pos, stream);
    else
        launch_encoder_forward<1>(out, tokens, wte, wpe, N, T, C, pos, row_pos, stream);
}

// --- Backward: sort rows by token -----------------------------------------------------------------

// Chunk blockIdx.x: keys of rows [base, base + count) sorted ascending into out[base ...]. The
// sort length is the power of two >= count (the same for the whole block), padded with ~0.
__global__ void encoder_sort_chunks_kernel(u64* out, const int* tokens, int N) {
    __shared__ u64 keys[ENC_SORT_CHUNK];
    const int base = blockIdx.x * ENC_SORT_CHUNK;
    const int count = min(ENC_SORT_CHUNK, N - base);
    int len = 2;
    while (len < count) len <<= 1;
    for (int i = threadIdx.x; i < len; i += blockDim.x)
        keys[i] = i < count ? ((u64)(unsigned)tokens[base + i] << 32) | (u64)(unsigned)(base + i) : ~0ull;
    __syncthreads();
    for (int k = 2; k <= len; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int p = threadIdx.x; p < len / 2; p += blockDim.x) {
                const int i = ((p & ~(j - 1)) << 1) | (p & (j - 1));  // bit j of i is 0; partner i + j
                const u64 a = keys[i], b = keys[i + j];
                const bool ascending = (i & k) == 0;
                if ((a > b) == ascending) {
                    keys[i] = b;
                    keys[i + j] = a;
                }
            }
            __syncthreads();
        }
    }
    for (int i = threadIdx.x; i < count; i += blockDim.x) out[base + i] = keys[i];
}

// Number of keys below key in the sorted range [lo, hi).
__device__ __forceinline__ int count_below(const u64* keys, int lo, int hi, u64 key) {
    int a = lo, b = hi;
    while (a < b) {
        const int mid = (a + b) >> 1;
        if (keys[mid] < key) a = mid + 1;
        else b = mid;
    }
    return a - lo;
}

__global__ void encoder_merge_rank_kernel(u64* sorted, const u64* chunked, int N) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    const int own = i / ENC_SORT_CHUNK;
    const int nchunks = (N + ENC_SORT_CHUNK - 1) / ENC_SORT_CHUNK;
    const u64 key = chunked[i];
    int pos = i - own * ENC_SORT_CHUNK;
    for (int cc = 0; cc < nchunks; cc++) {
        if (cc == own) continue;
        const int lo = cc * ENC_SORT_CHUNK;
        pos += count_below(chunked, lo, min(N, lo + ENC_SORT_CHUNK), key);
    }
    sorted[pos] = key;
}

// --- Backward: fixed-order sums ---------------------------------------------------------------------

// The block is (32, ENC_WARPS): every thread holds the fp32 sum of its warp's rows for channels
// [c, c + VEC). The warps' sums are added in warp order and the total is added to dst[c...].
template <int VEC>
__device__ __forceinline__ void combine_warps_and_accumulate(const float (&acc)[VEC], floatX* dst, int c,
                                                             bool active) {
    __shared__ float part[ENC_WARPS][VEC][32];
    UNROLL
    for (int v = 0; v < VEC; v++) part[threadIdx.y][v][threadIdx.x] = acc[v];
    __syncthreads();
    if (threadIdx.y != 0 || !active) return;
    float total[VEC];
    UNROLL
    for (int v = 0; v < VEC; v++) {
        total[v] = 0.0f;
        for (int w = 0; w < ENC_WARPS; w++) total[v] += part[w][v][threadIdx.x];
    }
    PackX<VEC> d = load_packx<VEC>(dst + c);
    UNROLL
    for (int v = 0; v < VEC; v++) d.v[v] = from_float<floatX>(to_float(d.v[v]) + total[v]);
    store_packx<VEC>(dst + c, d);
}

template <int VEC>
__global__ void encoder_wte_backward_kernel(floatX* dwte, const floatX* dout, const u64* sorted, int N, int C) {
    const int start = blockIdx.x;
    const unsigned tok = (unsigned)(sorted[start] >> 32);
    if (start > 0 && (unsigned)(sorted[start - 1] >> 32) == tok) return;  // not the first of its run
    const int c = (blockIdx.y * 32 + threadIdx.x) * VEC;
    const bool active = c < C;
    float acc[VEC];
    UNROLL
    for (int v = 0; v < VEC; v++) acc[v] = 0.0f;
    for (int i = start + threadIdx.y; i < N; i += ENC_WARPS) {
        const u64 key = sorted[i];
        if ((unsigned)(key >> 32) != tok) break;  // the run is contiguous
        if (!active) continue;
        const PackX<VEC> g = load_packx<VEC>(dout + (long)(unsigned)key * C + c);
        UNROLL
        for (int v = 0; v < VEC; v++) acc[v] += to_float(g.v[v]);
    }
    combine_warps_and_accumulate<VEC>(acc, dwte + (long)tok * C, c, active);
}

template <int VEC>
__global__ void encoder_wpe_backward_kernel(floatX* dwpe, const floatX* dout, int B, int T, int C,
                                            TokenLayout pos) {
    const long t = blockIdx.x;
    const int c = (blockIdx.y * 32 + threadIdx.x) * VEC;
    const bool active = c < C;
    float acc[VEC];
    UNROLL
    for (int v = 0; v < VEC; v++) acc[v] = 0.0f;
    if (active) {
        for (int b = threadIdx.y; b < B; b += ENC_WARPS) {
            const PackX<VEC> g = load_packx<VEC>(dout + ((long)b * T + t) * C + c);
            UNROLL
            for (int v = 0; v < VEC; v++) acc[v] += to_float(g.v[v]);
        }
    }
    combine_warps_and_accumulate<VEC>(acc, dwpe + token_layout_position(pos, t) * C, c, active);
}

template <int VEC>
static void launch_encoder_param_backward(floatX* dwte, floatX* dwpe, const floatX* dout, const u64* sorted,
                                          int B, int T, int C, TokenLayout pos, cudaStream_t stream) {
    const unsigned col_blocks = (unsigned)ceil_div_long(C, 32 * VEC);
    const dim3 block(32, ENC_WARPS);
    LAUNCH(encoder_wte_backward_kernel<VEC>, dim3(B * T, col_blocks), block, 0, stream, dwte, dout, sorted,
           B * T, C);
    LAUNCH(encoder_wpe_backward_kernel<VEC>, dim3(T, col_blocks), block, 0, stream, dwpe, dout, B, T, C, pos);
}

size_t encoder_backward_scratch_bytes(int B, int T) {
    const long N = (long)B * T;
    return N > 0 ? (size_t)N * 2 * sizeof(u64) : 0;
}

void encoder_backward_cuda(floatX* dwte, floatX* dwpe, const floatX* dout, const int* tokens,
                           int B, int T, int C, TokenLayout pos, void* scratch,
                           cudaStream_t stream) {
    const int N = B * T;
    if (N <= 0 || C <= 0) return;
    if (pos.stride == 0 && T > 1)
        FAIL("the positions of the local tokens must be distinct", "encoder_backward_cuda: pos.stride is 0 with T = %d", T);
    if (!aligned16(scratch))
        FAIL("pass memory from cudaMalloc", "encoder_backward_cuda: scratch %p is not 16-byte aligned", scratch);
    u64* chunked = (u64*)scratch;
    u64* sorted = chunked + N;
    const int nchunks = (int)ceil_div_long(N, ENC_SORT_CHUNK);
    LAUNCH(encoder_sort_chunks_kernel, nchunks, ENC_SORT_THREADS, 0, stream, nchunks == 1 ? sorted : chunked,
           tokens, N);
    if (nchunks > 1) {
        LAUNCH(encoder_merge_rank_kernel, (unsigned)ceil_div_long(N, ENC_THREADS), ENC_THREADS, 0, stream,
               sorted, (const u64*)chunked, N);
    }
    if (C % X128_ELEMS == 0 && aligned16(dwte) && aligned16(dwpe) && aligned16(dout))
        launch_encoder_param_backward<X128_ELEMS>(dwte, dwpe, dout, sorted, B, T, C, pos, stream);
    else
        launch_encoder_param_backward<1>(dwte, dwpe, dout, sorted, B, T, C, pos, stream);
}
