// Token + position embedding, forward and deterministic backward: twins of encoder_forward and
// encoder_backward in model/layers.c.
//
// Backward without float atomics. dwte: rows that share a token must be summed in a fixed order,
// so the kernel reads the rows sorted by (token, row): `order`, computed on the host by
// token_order (model/token_order.h) while the device runs the backward, and uploaded with the
// tokens (model/gpt.c). One launch, encoder_backward_kernel (below), sums dwte and dwpe: a warp per
// segment of a token's run of sorted rows, a warp per position. Every step is a fixed function of
// the tokens, so the result is bitwise reproducible. (Sorting on the device took two more launches
// whose bitonic stages, a few blocks each, cost more than the sums: results/gpu/.)
#include "model/layers_cuda.cuh"

static constexpr int ENC_THREADS = 256;        // forward kernel
static constexpr int ENC_WARPS = 8;            // backward units (sorted slots, positions) per block

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
    PackX<VEC> o;
    if (!wpe) {   // rotary positions: the token embedding alone
        store_packx<VEC>(out + n * C + c, we);
        return;
    }
    const PackX<VEC> pe = load_packx<VEC>(wpe + p * C + c);
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

// --- Backward: the sorted rows ---------------------------------------------------------------------

// A caller bug that would otherwise race: two warps adding into one dwte row. Slots (token, row)
// strictly ascending and rows in [0, N) make the order a permutation, so checking each slot
// against the one before it checks it all.
__device__ void encoder_order_broken(int slot, int row, int N) {
    printf("encoder_backward_cuda: order[%d] = %d breaks the rows' order by (token, row) over %d rows; "
           "upload token_order's output (model/token_order.h)\n", slot, row, N);
    __trap();
}

// First index in [lo, hi) whose row's token is >= tok (hi when none): order is sorted by token.
__device__ __forceinline__ int lower_bound_token(const int* order, const int* tokens, int lo, int hi,
                                                 unsigned tok) {
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if ((unsigned)tokens[order[mid]] < tok) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// --- Backward: fixed-order sums ---------------------------------------------------------------------

// One kernel sums both tables. Every warp owns 32 * VEC channels (blockIdx.y) of one unit: a sorted
// slot (dwte) or a position (dwpe); lane l holds channels [c, c + VEC), so a row is read as one
// 32 * VEC * sizeof(floatX)-byte line.
//
// dwte: a token's run of sorted slots [rs, re) is cut into segments of ENC_SEG slots starting at
// rs, rs + ENC_SEG, ...; the warp of a segment's first slot sums its rows in slot order (the
// other warps return). A run of one segment (most tokens) is added to dwte by that warp. A longer
// one stores each segment's fp32 sum in scratch; the last of its warps to finish (an atomic
// ticket per run and channel block) adds the segment sums in segment order. Long runs (frequent
// tokens) so spread over re - rs / ENC_SEG warps, and which warp finishes last never changes the
// order of the additions.
//
// dwpe: one warp per position sums its B rows in sequence order. With GRAD_WRITE the units are all
// wpe_rows positions (a position no local token sits at is written 0: no zeroing pass); else the
// T local positions, added.

// ENC_SEG (rows per segment) and the scratch layout: model/layer_scratch.h.
static constexpr unsigned FULL_MASK = 0xffffffffu;

// The local token at position p (TokenLayout's inverse), or -1 when no local token sits there.
__device__ long local_token_of_position(TokenLayout l, int T, long p) {
    for (int g = 0; g < l.chunks; g++) {
        const long d = p - l.off[g];
        if (l.stride == 0) {  // T == 1 (encoder_backward_cuda refuses stride 0 otherwise)
            if (d == 0 && g < T) return g;
            continue;
        }
        if (d < 0 || d % l.stride != 0) continue;
        const long t = l.chunks == 2 ? 2 * (d / l.stride) + g : d / l.stride;
        if (t < T) return t;
    }
    return -1;
}

// Scratch row (C floats) of the segment starting at sorted slot i of a run starting at rs: a
// multi-segment run's first segment spans ENC_SEG slots, as do all but its last, so no two
// segments that start at the same i / ENC_SEG are both first or both later ones.
__device__ __forceinline__ long segment_row(int i, int rs) { return 2L * (i / ENC_SEG) + (i == rs ? 0 : 1); }

template <int VEC>
__device__ __forceinline__ void add_to_row(floatX* dst, const float (&acc)[VEC], bool accumulate) {
    PackX<VEC> d;
    if (accumulate) d = load_packx<VEC>(dst);
    UNROLL
    for (int v = 0; v < VEC; v++) d.v[v] = from_float<floatX>(accumulate ? to_float(d.v[v]) + acc[v] : acc[v]);
    store_packx<VEC>(dst, d);
}

template <int VEC>
__device__ void encoder_wte_unit(floatX* dwte, const floatX* dout, const int* order, const int* tokens,
                                 float* partial, unsigned* tickets, int N, int C, int i, int c, bool active) {
    const int lane = threadIdx.x;
    const int row = order[i];
    if ((unsigned)row >= (unsigned)N) encoder_order_broken(i, row, N);
    const unsigned tok = (unsigned)tokens[row];
    int rs = i;
    if (i > 0) {   // the order, checked where it is read: (token, row) ascending
        const int prev = order[i - 1];
        if ((unsigned)prev >= (unsigned)N) encoder_order_broken(i - 1, prev, N);
        const unsigned prev_tok = (unsigned)tokens[prev];
        if (prev_tok > tok || (prev_tok == tok && prev >= row)) encoder_order_broken(i, row, N);
        if (prev_tok == tok) rs = lower_bound_token(order, tokens, 0, i, tok);
    }
    if ((i - rs) % ENC_SEG != 0) return;  // inside a segment: its first slot's warp sums it
    // Lane j holds slot i + j's row; the segment is the leading lanes of the same token (a row out
    // of range is its own slot's warp's error).
    const int key = i + lane < N ? order[i + lane] : -1;
    const bool in = (unsigned)key < (unsigned)N;
    const unsigned same = __ballot_sync(FULL_MASK, in && (unsigned)tokens[in ? key : 0] == tok);
    const int len = same == FULL_MASK ? ENC_SEG : __ffs(~same) - 1;
    float acc[VEC];
    UNROLL
    for (int v = 0; v < VEC; v++) acc[v] = 0.0f;
    int r = 0;
    for (; r + 4 <= len; r += 4) {  // four rows in flight
        PackX<VEC> g[4];
        UNROLL
        for (int u = 0; u < 4; u++) {
            const unsigned seg_row = (unsigned)__shfl_sync(FULL_MASK, (unsigned)key, r + u);
            if (active) g[u] = load_packx<VEC>(dout + (long)seg_row * C + c);
        }
        if (active) {
            UNROLL
            for (int u = 0; u < 4; u++) {
                UNROLL
                for (int v = 0; v < VEC; v++) acc[v] += to_float(g[u].v[v]);
            }
        }
    }
    for (; r < len; r++) {
        const unsigned seg_row = (unsigned)__shfl_sync(FULL_MASK, (unsigned)key, r);
        if (!active) continue;
        const PackX<VEC> g = load_packx<VEC>(dout + (long)seg_row * C + c);
        UNROLL
        for (int v = 0; v < VEC; v++) acc[v] += to_float(g.v[v]);
    }
    floatX* dst = dwte + (long)tok * C + c;
    const bool more = len == ENC_SEG && i + ENC_SEG < N && (unsigned)tokens[order[i + ENC_SEG]] == tok;
    if (rs == i && !more) {  // the whole run
        if (active) add_to_row<VEC>(dst, acc, true);
        return;
    }
    const int re = lower_bound_token(order, tokens, i + 1, N, tok + 1);
    const int nseg = (re - rs + ENC_SEG - 1) / ENC_SEG;
    if (active) {
        float* mine = partial + segment_row(i, rs) * C + c;
        UNROLL
        for (int v = 0; v < VEC; v++) mine[v] = acc[v];
    }
    __threadfence();  // the segment sum before the ticket
    __syncwarp();
    unsigned last = 0;
    if (lane == 0) {
        unsigned* ticket = tickets + (long)(rs / ENC_SEG) * gridDim.y + blockIdx.y;
        last = atomicAdd(ticket, 1u) == (unsigned)nseg - 1;
        if (last) *ticket = 0;  // every other segment has counted: ready for the next call
    }
    if (!__shfl_sync(FULL_MASK, last, 0)) return;
    __threadfence();
    if (!active) return;
    float tot[VEC];
    UNROLL
    for (int v = 0; v < VEC; v++) tot[v] = 0.0f;
    for (int k = 0; k < nseg; k++) {
        const int s = rs + k * ENC_SEG;
        const float* seg = partial + segment_row(s, rs) * C + c;
        UNROLL
        for (int v = 0; v < VEC; v++) tot[v] += s == i ? acc[v] : __ldcg(seg + v);
    }
    add_to_row<VEC>(dst, tot, true);
}

template <int VEC>
__device__ void encoder_wpe_unit(floatX* dwpe, const floatX* dout, int B, int T, int C, TokenLayout pos,
                                 bool write, int u, int c, bool active) {
    const long t = write ? local_token_of_position(pos, T, u) : u;
    const long p = write ? u : token_layout_position(pos, u);
    if (!active) return;
    float acc[VEC];
    UNROLL
    for (int v = 0; v < VEC; v++) acc[v] = 0.0f;
    if (t >= 0) {
        const floatX* col = dout + t * C + c;
        const long row_step = (long)T * C;
        int b = 0;
        for (; b + 4 <= B; b += 4) {  // four rows in flight, added in sequence order
            PackX<VEC> g[4];
            UNROLL
            for (int k = 0; k < 4; k++) g[k] = load_packx<VEC>(col + (b + k) * row_step);
            UNROLL
            for (int k = 0; k < 4; k++) {
                UNROLL
                for (int v = 0; v < VEC; v++) acc[v] += to_float(g[k].v[v]);
            }
        }
        for (; b < B; b++) {
            const PackX<VEC> g = load_packx<VEC>(col + b * row_step);
            UNROLL
            for (int v = 0; v < VEC; v++) acc[v] += to_float(g.v[v]);
        }
    }
    add_to_row<VEC>(dwpe + p * C + c, acc, !write);
}

// Blocks [0, wte_blocks) take sorted slots, the rest positions; ENC_WARPS units per block.
template <int VEC>
__global__ void __launch_bounds__(32 * ENC_WARPS)
    encoder_backward_kernel(floatX* dwte, floatX* dwpe, const floatX* dout, const int* order, const int* tokens,
                            float* partial, unsigned* tickets, int B, int T, int C, TokenLayout pos, int wte_blocks,
                            int wpe_units, int write_wpe) {
    const int c = (blockIdx.y * 32 + threadIdx.x) * VEC;
    const bool active = c < C;
    if ((int)blockIdx.x < wte_blocks) {
        const int i = blockIdx.x * ENC_WARPS + threadIdx.y;
        if (i < B * T) encoder_wte_unit<VEC>(dwte, dout, order, tokens, partial, tickets, B * T, C, i, c, active);
    } else {
        const int u = (blockIdx.x - wte_blocks) * ENC_WARPS + threadIdx.y;
        if (u < wpe_units) encoder_wpe_unit<VEC>(dwpe, dout, B, T, C, pos, write_wpe != 0, u, c, active);
    }
}

// wpe_units: 0 (no dwpe: a table keyed by rows, as dwte, only), T or wpe_rows (write_wpe).
template <int VEC>
static void launch_encoder_backward(floatX* dwte, floatX* dwpe, const floatX* dout, const int* order,
                                    const int* tokens, float* partial, unsigned* tickets, int B, int T, int C,
                                    TokenLayout pos, int wpe_units, int write_wpe, cudaStream_t stream) {
    const unsigned col_blocks = (unsigned)ceil_div_long(C, 32 * VEC);
    const int wte_blocks = (int)ceil_div_long((long)B * T, ENC_WARPS);
    const unsigned blocks = (unsigned)(wte_blocks + ceil_div_long(wpe_units, ENC_WARPS));
    LAUNCH(encoder_backward_kernel<VEC>, dim3(blocks, col_blocks), dim3(32, ENC_WARPS), 0, stream, dwte, dwpe,
           dout, order, tokens, partial, tickets, B, T, C, pos, wte_blocks, wpe_units, write_wpe);
}

// The same, the channel vector width picked at run time: X128_ELEMS where every table is 16-byte
// aligned and C a multiple of it, else one.
static void launch_encoder_backward_any(bool vec, floatX* dwte, floatX* dwpe, const floatX* dout,
                                        const int* order, const int* tokens, float* partial,
                                        unsigned* tickets, int B, int T, int C, TokenLayout pos,
                                        int wpe_units, int write_wpe, cudaStream_t stream) {
    if (vec)
        launch_encoder_backward<X128_ELEMS>(dwte, dwpe, dout, order, tokens, partial, tickets, B, T, C, pos,
                                            wpe_units, write_wpe, stream);
    else
        launch_encoder_backward<1>(dwte, dwpe, dout, order, tokens, partial, tickets, B, T, C, pos, wpe_units,
                                   write_wpe, stream);
}

void encoder_backward_cuda(floatX* dwte, floatX* dwpe, const floatX* dout, const int* tokens, const int* order,
                           int B, int T, int C, TokenLayout pos, const int* row_pos, const int* row_pos_order,
                           int wpe_rows, int accumulate_wpe, void* scratch, cudaStream_t stream) {
    const int N = B * T;
    if (N <= 0 || C <= 0) return;
    if (pos.stride == 0 && T > 1)
        FAIL("the positions of the local tokens must be distinct", "encoder_backward_cuda: pos.stride is 0 with T = %d", T);
    if (!aligned16(scratch))
        FAIL("pass memory from cudaMalloc", "encoder_backward_cuda: scratch %p is not 16-byte aligned", scratch);
    CHECK(!dwpe || accumulate_wpe || wpe_rows > 0, "caller bug", "encoder_backward_cuda: writing dwpe needs wpe_rows > 0");
    CHECK(order != NULL, "upload token_order's rows (model/token_order.h)", "encoder_backward_cuda: order is NULL");
    CHECK(!row_pos || row_pos_order, "upload token_order's rows of the positions (model/token_order.h)",
          "encoder_backward_cuda: row_pos_order is NULL beside row_pos");
    float* partial = (float*)scratch;
    unsigned* tickets = (unsigned*)((char*)partial + enc_partial_bytes(N, C));
    const int write = !accumulate_wpe;
    const int wpe_units = row_pos || !dwpe ? 0 : write ? wpe_rows : T;
    const bool vec = C % X128_ELEMS == 0 && aligned16(dwte) && aligned16(dwpe) && aligned16(dout);
    launch_encoder_backward_any(vec, dwte, dwpe, dout, order, tokens, partial, tickets, B, T, C, pos, wpe_units,
                                write, stream);
    if (!row_pos || !dwpe) return;
    // Positions that repeat within a sequence: dwpe is a table keyed by rows, as dwte is by token.
    // The same scratch, after the first launch on this stream (which leaves its tickets at 0).
    if (write) CUDA_CHECK(cudaMemsetAsync(dwpe, 0, (size_t)wpe_rows * C * sizeof(floatX), stream));
    launch_encoder_backward_any(vec, dwpe, NULL, dout, row_pos_order, row_pos, partial, tickets, B, T, C, pos, 0,
                                0, stream);
}
