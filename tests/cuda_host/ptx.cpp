// The PTX twins of model/cuda_ptx.cuh (host_ptx.h): mma.sync m16n8k16 bf16, ldmatrix and cp.async,
// with PTX's fragment layouts and loud failures where a GPU would fault or give garbage.
//
// mma and ldmatrix are full-warp exchanges through the warp's slots (block_exec.cpp): each lane
// deposits its operands and waits in one warp round; the last lane to arrive checks that all 32
// are in the same instruction, computes every lane's registers into its slot and clears the tags
// (cuda_host_exchange_complete), and each lane takes its own. On the 2-core build machines a
// warp's mma takes about 3.4 us, an ldmatrix about 2.9 us (tests/cuda_host/README.md).
//
// cp.async keeps a queue of pending copies per CUDA thread (by its index in the block) on the OS
// thread that runs the block; a copy is done at the cp_async_wait that retires its group.
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <float.h>
#include <link.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <vector>

// --- Shared memory -------------------------------------------------------------------------------

// Static __shared__ is thread_local (host_types.h), so it lies in this OS thread's TLS block of the
// executable, the module that defines tls_marker too (the runtime and the kernels are linked into
// one program). Found once per OS thread; not found: static shared memory is not checked.
typedef struct {
    uintptr_t begin, end;
    int state;  // 0: not looked up yet, 1: found, -1: not found
} TlsRange;
static __thread TlsRange tl_tls;
static __thread int tls_marker;

static int find_tls(struct dl_phdr_info* info, size_t size, void* data) {
    TlsRange* r = (TlsRange*)data;
    (void)size;
    if (!info->dlpi_tls_data) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_TLS) continue;
        uintptr_t b = (uintptr_t)info->dlpi_tls_data, e = b + info->dlpi_phdr[i].p_memsz;
        uintptr_t m = (uintptr_t)&tls_marker;
        if (m >= b && m < e) {
            r->begin = b, r->end = e, r->state = 1;
            return 1;
        }
    }
    return 0;
}

static const TlsRange* static_shared_range(void) {
    if (tl_tls.state == 0) {
        tl_tls.state = -1;
        dl_iterate_phdr(find_tls, &tl_tls);
    }
    return &tl_tls;
}

// 1 if [p, p + bytes) lies in the block's dynamic shared memory or in static __shared__.
static int in_shared(const void* p, size_t bytes, const CudaHostLaunch* l) {
    uintptr_t a = (uintptr_t)p, d = (uintptr_t)cuda_host_dynamic_smem();
    if (a >= d && a - d <= l->shmem && bytes <= l->shmem - (a - d)) return 1;
    const TlsRange* t = static_shared_range();
    return t->state != 1 || (a >= t->begin && a < t->end && bytes <= t->end - a);
}

int cuda_host_in_shared(const void* p, size_t bytes) {
    return in_shared(p, bytes, cuda_host_current_launch("shared memory check"));
}

static int in_dynamic_smem(const void* p, const CudaHostLaunch* l) {
    uintptr_t a = (uintptr_t)p, d = (uintptr_t)cuda_host_dynamic_smem();
    return a >= d && a - d < l->shmem;
}

// --- Warp exchanges ------------------------------------------------------------------------------

// Slot tags: which instruction a lane is in. 0: none (the lane is in another warp collective).
enum { TAG_MMA = 1, TAG_LDMATRIX = 2 };  // ldmatrix: TAG_LDMATRIX + its index in ldmatrix_names
static const char* const ldmatrix_names[6] = {"ldmatrix.x1", "ldmatrix.x1.trans", "ldmatrix.x2",
                                              "ldmatrix.x2.trans", "ldmatrix.x4",
                                              "ldmatrix.x4.trans"};
static const char* const mma_name = "mma.sync.m16n8k16.bf16";

static const char* tag_name(unsigned tag) {
    if (tag == TAG_MMA) return mma_name;
    if (tag >= TAG_LDMATRIX && tag < TAG_LDMATRIX + 6) return ldmatrix_names[tag - TAG_LDMATRIX];
    return "another warp collective";
}

static float bf16_bits_to_float(uint32_t bits) {  // the low 16 bits
    uint32_t u = (bits & 0xffffu) << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t load_b16(const unsigned char* p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

// A lane deposits its registers unpacked: f[2 r + h] is half h of a[r], f[8 + 2 r + h] of b[r].
// By model/cuda_ptx.cuh, A (row, k) is then in lane 4 (row % 8) + (k % 8) / 2 at
// f[2 (row / 8 + 2 (k / 8)) + k % 2], and B (k, n) in lane 4 n + (k % 8) / 2 at f[8 + 2 (k / 8) + k % 2].
// Lane (g, t) = (lane / 4, lane % 4) gets D (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1): rows
// g, g + 8 of A from lanes 4 g + u, columns n = 2t, 2t + 1 of B from lanes 4 n + u. Products are
// exact; fp32 sums in k order, from its c.
static void mma_complete(CudaHostLaneSlot* s) {
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, t = lane & 3;
        float out[4] = {s[lane].c[0], s[lane].c[1], s[lane].c[2], s[lane].c[3]};
        for (int kh = 0; kh < 2; kh++)      // k = 8 kh + 2 u + h
            for (int u = 0; u < 4; u++) {
                const float* fa = s[4 * g + u].f;
                const float* fb0 = s[8 * t + u].f;
                const float* fb1 = s[8 * t + 4 + u].f;
                for (int h = 0; h < 2; h++) {
                    float a0 = fa[4 * kh + h], a1 = fa[4 * kh + 2 + h];
                    float b0 = fb0[8 + 2 * kh + h], b1 = fb1[8 + 2 * kh + h];
                    out[0] += a0 * b0;
                    out[1] += a0 * b1;
                    out[2] += a1 * b0;
                    out[3] += a1 * b1;
                }
            }
        memcpy(s[lane].d, out, sizeof out);
    }
}

// Lane l gave the row address of row l % 8 of matrix l / 8; lane (g, t) gets elements (g, 2t) and
// (g, 2t + 1) of each matrix, or with .trans (2t, g) and (2t + 1, g).
static void ldmatrix_complete(CudaHostLaneSlot* s, int nmat, int trans) {
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < nmat; i++) {
            if (!trans) {
                const unsigned char* row = (const unsigned char*)s[8 * i + g].ptr;
                s[lane].r[i] = load_b16(row + 4 * t) | load_b16(row + 4 * t + 2) << 16;
            } else {
                s[lane].r[i] = load_b16((const unsigned char*)s[8 * i + 2 * t].ptr + 2 * g) |
                               load_b16((const unsigned char*)s[8 * i + 2 * t + 1].ptr + 2 * g) << 16;
            }
        }
    }
}

// The last lane of the round: every lane must be in its instruction (a lane in another exchange, or
// in a shuffle or other warp collective, whose tag is 0, is named); then the instruction runs once
// for the warp. The row addresses of ldmatrix are read now, while no lane of the warp can change
// the memory.
void cuda_host_exchange_complete(CudaHostLaneSlot* s, int completer, const char* what) {
    unsigned tag = s[completer].tag;
    for (int l = 0; l < 32; l++) {
        if (s[l].tag == tag) continue;
        char where[512];
        cuda_host_where(where, sizeof where, what);
        fail_msg("%s: lane %d of the warp is in %s in the same warp round; all 32 lanes must "
                 "execute the same instruction (PTX .aligned) (%s)", what, l, tag_name(s[l].tag), where);
    }
    if (tag == TAG_MMA) mma_complete(s);
    else {
        int idx = (int)tag - TAG_LDMATRIX;
        ldmatrix_complete(s, idx < 2 ? 1 : idx < 4 ? 2 : 4, idx % 2);
    }
    for (int l = 0; l < 32; l++) s[l].tag = 0;
}

// Deposits this lane's slot and waits for the 32 lanes; returns the slot with this lane's result.
static const CudaHostLaneSlot* exchange(const CudaHostLaneSlot* mine, const char* what) {
    CudaHostLaneSlot* s = cuda_host_warp_slots(what) + cuda_host_lane();
    *s = *mine;
    cuda_host_warp_exchange(what);
    return s;
}

void cuda_host_mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    CudaHostLaneSlot mine;
    mine.tag = TAG_MMA;
    for (int h = 0; h < 2; h++) {
        for (int r = 0; r < 4; r++) mine.f[2 * r + h] = bf16_bits_to_float(a[r] >> 16 * h);
        for (int r = 0; r < 2; r++) mine.f[8 + 2 * r + h] = bf16_bits_to_float(b[r] >> 16 * h);
    }
    memcpy(mine.c, c, sizeof mine.c);
    memcpy(d, exchange(&mine, mma_name)->d, sizeof mine.d);  // d may alias c
}

void cuda_host_ldmatrix(uint32_t* r, int nmat, int trans, const void* row_address) {
    if ((nmat != 1 && nmat != 2 && nmat != 4) || (trans != 0 && trans != 1))
        fail_msg("ldmatrix: .x%d%s is not an ldmatrix shape (x1, x2, x4)", nmat, trans ? ".trans" : "");
    int idx = 2 * (nmat == 4 ? 2 : nmat - 1) + trans;
    const char* what = ldmatrix_names[idx];
    const CudaHostLaunch* l = cuda_host_current_launch(what);
    int lane = cuda_host_lane();
    if (lane < 8 * nmat) {  // the other lanes' addresses are not used (PTX)
        int misaligned = (uintptr_t)row_address % 16 != 0;
        if (misaligned || !in_shared(row_address, 16, l)) {
            char where[512];
            cuda_host_where(where, sizeof where, what);
            fail_msg("%s: lane %d's row address %p %s (%s)", what, lane, row_address,
                     misaligned ? "is not 16-byte aligned"
                                : "is not 16 bytes of the block's shared memory (dynamic shared memory or "
                                  "a static __shared__ variable)", where);
        }
    }
    CudaHostLaneSlot mine;
    mine.tag = TAG_LDMATRIX + idx;
    mine.ptr = (uintptr_t)row_address;
    memcpy(r, exchange(&mine, what)->r, (size_t)nmat * sizeof r[0]);
}

// --- cp.async --------------------------------------------------------------------------------------

enum { CP_MAX_PENDING = 64 };  // per CUDA thread; more fails loudly

typedef struct {
    unsigned char* dst;
    const unsigned char* src;
    int bytes;        // read from src; the rest of the 16 are zeros
    unsigned group;   // the group it belongs to: the number of commits before it was issued
} CpCopy;

typedef struct {
    int n;          // pending copies, oldest first (so in group order)
    unsigned open;  // the open group's number = commits so far
    CpCopy copy[CP_MAX_PENDING];
} CpQueue;

// One queue per CUDA thread of the block running on this OS thread, by thread index; every thread
// leaves its queue empty (checked when it returns), so the next block starts clean.
static thread_local std::vector<CpQueue> tl_cp;

static CpQueue* cp_queue(const char* what) {
    int i = cuda_host_current_thread(what);
    if ((size_t)i >= tl_cp.size()) {
        dim3 b = cuda_host_current_launch(what)->block;
        tl_cp.resize((size_t)b.x * b.y * b.z);  // new queues are zeroed: empty, group 0
    }
    return &tl_cp[(size_t)i];
}

static void cp_fail(const char* why, const void* dst, const void* src, int src_bytes) {
    char where[512];
    cuda_host_where(where, sizeof where, "cp.async");
    fail_msg("cp.async (dst %p, src %p, src_bytes %d): %s (%s)", dst, src, src_bytes, why, where);
}

void cuda_host_cp_async_16(void* dst_shared, const void* src_global, int src_bytes) {
    const CudaHostLaunch* l = cuda_host_current_launch("cp.async");
    if (src_bytes < 0 || src_bytes > 16)
        cp_fail("src_bytes must be in [0, 16]", dst_shared, src_global, src_bytes);
    if ((uintptr_t)dst_shared % 16 || (uintptr_t)src_global % 16)
        cp_fail("dst and src must be 16-byte aligned", dst_shared, src_global, src_bytes);
    if (!in_shared(dst_shared, 16, l))
        cp_fail("dst is not 16 bytes of the block's shared memory (dynamic shared memory or a static "
                "__shared__ variable)", dst_shared, src_global, src_bytes);
    if (src_bytes > 0 && in_dynamic_smem(src_global, l))
        cp_fail("src is in shared memory; cp.async copies from global memory", dst_shared, src_global,
                src_bytes);
    if (src_bytes > 0 && cuda_host_mem_kind(src_global, (size_t)src_bytes) == CUDA_HOST_MEM_OVERRUN)
        cp_fail("the src_bytes read from src run past the end of its cudaMalloc allocation", dst_shared,
                src_global, src_bytes);
    CpQueue* q = cp_queue("cp.async");
    if (q->n == CP_MAX_PENDING) {
        char limit[128];
        snprintf(limit, sizeof limit, "the thread has %d copies pending, the host runtime's limit "
                 "(wait for some with cp_async_wait first)", CP_MAX_PENDING);
        cp_fail(limit, dst_shared, src_global, src_bytes);
    }
    CpCopy* c = &q->copy[q->n++];
    c->dst = (unsigned char*)dst_shared;
    c->src = (const unsigned char*)src_global;
    c->bytes = src_bytes;
    c->group = q->open;
}

void cuda_host_cp_async_commit(void) { cp_queue("cp.async.commit_group")->open++; }

void cuda_host_cp_async_wait(int n) {
    if (n < 0) fail_msg("cp.async.wait_group %d: the count must not be negative", n);
    CpQueue* q = cp_queue("cp.async.wait_group");
    // Committed groups are those numbered below open; the n most recent stay pending, and so does
    // the open group. The source is read now (a GPU may read it any time between issue and wait).
    int done = 0;
    while (done < q->n && (unsigned long long)q->copy[done].group + (unsigned)n < q->open) {
        const CpCopy* c = &q->copy[done++];
        if (c->bytes) memcpy(c->dst, c->src, (size_t)c->bytes);
        memset(c->dst + c->bytes, 0, (size_t)(16 - c->bytes));
    }
    q->n -= done;
    memmove(q->copy, q->copy + done, (size_t)q->n * sizeof q->copy[0]);
}

void cuda_host_ptx_thread_exit(void) {
    if (tl_cp.empty()) return;  // no cp.async on this OS thread yet
    int i = cuda_host_current_thread("cp.async");
    if ((size_t)i >= tl_cp.size()) return;
    CpQueue* q = &tl_cp[(size_t)i];
    if (q->n) {
        const CudaHostLaunch* l = cuda_host_current_launch("cp.async");
        fail_msg("cp.async: thread (%u,%u,%u) of block (%u,%u,%u) of kernel %s (launched at %s:%d) returned "
                 "with %d cop%s not waited for; on a GPU they would land in shared memory that may "
                 "belong to another block by then (hint: commit them and cp_async_wait<0>() before the "
                 "thread returns)", threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y,
                 blockIdx.z, l->name, l->file, l->line, q->n, q->n == 1 ? "y" : "ies");
    }
    q->open = 0;
}

// --- ex2, red, acquire/release, nanosleep ---------------------------------------------------------

float cuda_host_ex2_approx_ftz(float x) {
    if (fpclassify(x) == FP_SUBNORMAL) x = 0.0f;  // .ftz on the input
    float y = exp2f(x);
    return y < FLT_MIN ? 0.0f : y;  // .ftz on the result (2^x is never negative; NaN stays)
}

// .global operands: aligned, and not shared memory (a fault on a GPU).
static void red_check(const void* p, size_t align, const char* what) {
    const CudaHostLaunch* l = cuda_host_current_launch(what);
    const char* why = NULL;
    if ((uintptr_t)p % align) why = align == 8 ? "is not 8-byte aligned" : "is not 4-byte aligned";
    else if (in_dynamic_smem(p, l)) why = "is in shared memory (the instruction takes a global address)";
    else {
        const TlsRange* t = static_shared_range();
        if (t->state == 1 && (uintptr_t)p >= t->begin && (uintptr_t)p < t->end)
            why = "is a static __shared__ variable (the instruction takes a global address)";
    }
    if (why) {
        char where[512];
        cuda_host_where(where, sizeof where, what);
        fail_msg("%s: address %p %s (%s)", what, p, why, where);
    }
}

static void atomic_add_f32(float* p, float v) {
    float old, next;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do {
        next = old + v;
    } while (!__atomic_compare_exchange(p, &old, &next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

void cuda_host_red_add_f32(float* p, float v) {
    red_check(p, 4, "red.global.add.f32");
    atomic_add_f32(p, v);
}

void cuda_host_red_add_v2_f32(float* p, float a, float b) {
    red_check(p, 8, "red.global.add.v2.f32");
    atomic_add_f32(p, a);
    atomic_add_f32(p + 1, b);
}

unsigned cuda_host_ld_acquire_u32(const unsigned* p) {
    red_check(p, 4, "ld.acquire.gpu.global.u32");
    unsigned v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    cuda_host_spin_acquired(p, v);
    return v;
}

void cuda_host_red_release_add_u32(unsigned* p, unsigned v) {
    red_check(p, 4, "red.release.gpu.global.add.u32");
    __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
    cuda_host_spin_progress();
}

void cuda_host_nanosleep(unsigned ns) { cuda_host_spin_pause(ns); }
