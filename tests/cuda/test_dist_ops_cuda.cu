// The CUDA backend of attention/dist_ops.h (attention/dist_ops_cuda.cu) against obvious host loops
// on host copies. It cannot link the CPU twin (dist_ops_cpu.c defines the same names), so every
// reference is written here. Random data, odd sizes and layouts:
//   - row copies (one, and n in one call: interleaved columns and blocks apart) and both packings
//     for 2-, 4- and 8-byte elements, widths 1, 5, 64, strides wider
//     than the rows, pointers one element off 16-byte alignment (the scalar path) and aligned ones
//     (the 16-byte path), G = 1, 2, 3 blocks, B = 1, 2, Tl = 1, 3: bit-exact against the loops,
//     and blocks_to_rows after rows_to_blocks (and the reverse) gives the input back;
//   - acc_to_real: round to nearest even (checked against the host bf16 conversion and a bit
//     formula, ties, overflow to infinity, denormals and signed zeros included; a copy in fp32);
//   - zero_acc and add_acc: exact, and nothing written past n; add_acc on more elements than the
//     capped grid has threads (the grid-stride loop's second round);
//   - the attention forwarders: the same bits as a direct call of the *_cuda launcher;
//   - calls on zero rows or elements launch nothing (a zero grid would end the job).
// Every destination starts as random bytes and is compared WHOLE with the reference, so a byte
// written outside the rows (the stride gaps, past the end) is a mismatch too. A mismatch prints
// one FAIL line naming the case and the first differing element; the exit status is then 1.
#ifndef GPT_BACKEND_CUDA
#define GPT_BACKEND_CUDA  // real = floatX, real_acc = float, as in dist_ops_cuda.cu
#endif
#include "attention/dist_ops.h"

#include <stdint.h>
#include <string.h>

#include <vector>

#include "attention/partial_attention_cuda.cuh"
#include "model/backend_kernels_cuda.cuh"
#include "tests/cuda_host/test_check.h"

typedef std::vector<unsigned char> Bytes;

static unsigned long long rng = 0x9E3779B97F4A7C15ULL;
static unsigned next_u32(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng >> 32);
}
static float uniform(void) { return (float)(next_u32() >> 8) * 0x1.0p-24f * 2.0f - 1.0f; }  // [-1, 1)

static Bytes random_bytes(size_t n) {
    Bytes b(n);
    for (unsigned char& x : b) x = (unsigned char)next_u32();
    return b;
}

static void* upload(const Bytes& h) {
    void* d = dist_alloc(h.size(), "test buffer");
    dist_to_backend(d, h.data(), h.size());
    return d;
}

static Bytes download(const void* d, size_t n) {
    Bytes h(n);
    dist_to_host(h.data(), d, n);
    return h;
}

// Compares two whole buffers of esize-byte elements; on a mismatch prints a FAIL line with the
// case and the first differing element, and returns 0.
static int same_bytes(const Bytes& got, const Bytes& want, size_t esize, const char* what) {
    for (size_t i = 0; i < want.size(); i++) {
        if (got[i] == want[i]) continue;
        const size_t e = i / esize;
        unsigned long long g = 0, w = 0;
        memcpy(&g, &got[e * esize], esize);
        memcpy(&w, &want[e * esize], esize);
        printf("FAIL %s: element %zu is 0x%llx, expected 0x%llx\n", what, e, g, w);
        return 0;
    }
    return 1;
}

// Per operation: cases run and cases that failed.
struct Tally {
    int cases, failed;
};
static void tally(Tally* t, int ok) {
    t->cases++;
    t->failed += !ok;
}

// --- Row copies ----------------------------------------------------------------------------------

// dst (rows, w) stride ldd <- src (rows, w) stride lds, elements of es bytes.
static void ref_copy_rows(unsigned char* dst, long ldd, const unsigned char* src, long lds, long rows,
                          int w, size_t es) {
    for (long i = 0; i < rows; i++)
        for (int c = 0; c < w; c++) memcpy(dst + (i * ldd + c) * es, src + (i * lds + c) * es, es);
}

// Byte offset of element c of rows-side row (b, t) and of block g row (b, j).
static size_t row_at(long ld, int G, int Tl, int b, long t, int c, size_t es) {
    return (size_t)(((long)b * G * Tl + t) * ld + c) * es;
}
static size_t block_at(long bstride, int Tl, int w, int g, int b, int j, int c, size_t es) {
    return (size_t)(g * bstride + ((long)b * Tl + j) * w + c) * es;
}

// to_rows: row (b, g + G*j) <- block g row (b, j); else the reverse.
static void ref_pack(int to_rows, unsigned char* rows, long ld, unsigned char* blocks, long bstride,
                     int G, int B, int Tl, int w, size_t es) {
    for (int g = 0; g < G; g++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < Tl; j++)
                for (int c = 0; c < w; c++) {
                    unsigned char* r = rows + row_at(ld, G, Tl, b, g + (long)G * j, c, es);
                    unsigned char* k = blocks + block_at(bstride, Tl, w, g, b, j, c, es);
                    if (to_rows) memcpy(r, k, es);
                    else memcpy(k, r, es);
                }
}

static const size_t ESIZES[] = {2, 4, 8};
static const int WIDTHS[] = {1, 5, 64};

static void test_copy_rows(void) {
    static const long ROWS[] = {1, 3, 7};
    static const int GAPS[][2] = {{0, 0}, {3, 8}, {8, 1}};   // lds - w, ldd - w
    for (size_t es : ESIZES) {
        Tally t = {0, 0};
        for (long rows : ROWS)
            for (int w : WIDTHS)
                for (const int* gap : GAPS)
                    for (int off = 0; off < 2; off++) {   // elements before the first row
                        const long lds = w + gap[0], ldd = w + gap[1];
                        const Bytes src = random_bytes((off + (rows - 1) * lds + w) * es);
                        const Bytes before = random_bytes((off + (rows - 1) * ldd + w) * es);
                        void* s = upload(src);
                        void* d = upload(before);
                        dist_copy_rows((char*)d + off * es, ldd, (const char*)s + off * es, lds, rows, w, es);
                        Bytes want = before;
                        ref_copy_rows(&want[off * es], ldd, &src[off * es], lds, rows, w, es);
                        char what[160];
                        snprintf(what, sizeof what, "copy_rows esize %zu rows %ld w %d lds %ld ldd %ld off %d",
                                 es, rows, w, lds, ldd, off);
                        tally(&t, same_bytes(download(d, before.size()), want, es, what));
                        dist_free(s);
                        dist_free(d);
                    }
        check(t.failed == 0, "copy_rows esize %zu: %d of %d cases bit-exact (gaps untouched)", es,
              t.cases - t.failed, t.cases);
    }
}

// n copies in one call, copy i at dst + i dstep and src + i sstep: the blocks of an all-to-all
// (Ulysses' peers), interleaved (steps smaller than a copy's extent) or apart, against n loops.
static void test_copy_rows_batch(void) {
    static const int NS[] = {1, 3, 4};
    static const int GAPS[][2] = {{0, 0}, {3, 8}};   // lds - w, ldd - w
    for (size_t es : ESIZES) {
        Tally t = {0, 0};
        for (int n : NS)
            for (int w : WIDTHS)
                for (const int* gap : GAPS)
                    for (int interleaved = 0; interleaved < 2; interleaved++)
                        for (int off = 0; off < 2; off++) {
                            const long rows = 3, lds = (long)n * w + gap[0], ldd = (long)n * w + gap[1];
                            // interleaved: copy i in columns [i w, (i+1) w) of shared rows (the
                            // peers' heads); else each copy's rows after the previous copy's.
                            const long sstep = interleaved ? w : rows * lds;
                            const long dstep = interleaved ? w : rows * ldd + 2;
                            const Bytes src = random_bytes((off + (n - 1) * sstep + (rows - 1) * lds + w) * es);
                            const Bytes before = random_bytes((off + (n - 1) * dstep + (rows - 1) * ldd + w) * es);
                            void* sd = upload(src);
                            void* d = upload(before);
                            dist_copy_rows_batch((char*)d + off * es, ldd, dstep, (const char*)sd + off * es,
                                                 lds, sstep, n, rows, w, es);
                            Bytes want = before;
                            for (int i = 0; i < n; i++)
                                ref_copy_rows(&want[(off + i * dstep) * es], ldd, &src[(off + i * sstep) * es],
                                              lds, rows, w, es);
                            char what[192];
                            snprintf(what, sizeof what, "copy_rows_batch esize %zu n %d w %d lds %ld ldd %ld "
                                     "%s off %d", es, n, w, lds, ldd, interleaved ? "interleaved" : "apart", off);
                            tally(&t, same_bytes(download(d, before.size()), want, es, what));
                            dist_free(sd);
                            dist_free(d);
                        }
        check(t.failed == 0, "copy_rows_batch esize %zu: %d of %d cases bit-exact (gaps untouched)", es,
              t.cases - t.failed, t.cases);
    }
}

// One layout of the packings: blocks -> rows -> blocks and rows -> blocks -> rows, each step
// against the loops, and each round trip against its input.
static int pack_case(size_t es, int G, int B, int Tl, int w, long ld, long bstride, int off) {
    const long nrows = (long)B * G * Tl;
    const size_t rows_bytes = (off + (nrows - 1) * ld + w) * es;
    const size_t blocks_bytes = (off + (G - 1) * bstride + (long)B * Tl * w) * es;
    char what[200];
    snprintf(what, sizeof what, "esize %zu G %d B %d Tl %d w %d ld %ld bstride %ld off %d", es, G, B,
             Tl, w, ld, bstride, off);
    char step[260];
    int ok = 1;

    // blocks X -> rows -> blocks: the rows and the blocks against the loops, the blocks against X.
    const Bytes x = random_bytes(blocks_bytes);
    const Bytes rows_before = random_bytes(rows_bytes), blocks_before = random_bytes(blocks_bytes);
    void* xd = upload(x);
    void* rd = upload(rows_before);
    void* bd = upload(blocks_before);
    dist_blocks_to_rows((char*)rd + off * es, ld, (const char*)xd + off * es, bstride, G, B, Tl, w, es);
    dist_rows_to_blocks((char*)bd + off * es, bstride, (const char*)rd + off * es, ld, G, B, Tl, w, es);
    Bytes rows_want = rows_before, blocks_want = blocks_before;
    ref_pack(1, &rows_want[off * es], ld, (unsigned char*)&x[off * es], bstride, G, B, Tl, w, es);
    ref_pack(0, &rows_want[off * es], ld, &blocks_want[off * es], bstride, G, B, Tl, w, es);
    snprintf(step, sizeof step, "blocks_to_rows %s", what);
    ok &= same_bytes(download(rd, rows_bytes), rows_want, es, step);
    const Bytes back = download(bd, blocks_bytes);
    snprintf(step, sizeof step, "rows_to_blocks %s", what);
    ok &= same_bytes(back, blocks_want, es, step);
    Bytes identity = blocks_before;   // X where the blocks hold rows, the poison in the gaps
    for (int g = 0; g < G; g++)
        memcpy(&identity[block_at(bstride, Tl, w, g, 0, 0, 0, es) + off * es],
               &x[block_at(bstride, Tl, w, g, 0, 0, 0, es) + off * es], (size_t)B * Tl * w * es);
    snprintf(step, sizeof step, "rows_to_blocks(blocks_to_rows(X)) == X %s", what);
    ok &= same_bytes(back, identity, es, step);

    // rows R -> blocks -> rows: the rows that come back are R (the poison in the stride gaps).
    const Bytes r = random_bytes(rows_bytes);
    dist_to_backend(rd, r.data(), rows_bytes);
    dist_rows_to_blocks((char*)bd + off * es, bstride, (const char*)rd + off * es, ld, G, B, Tl, w, es);
    dist_to_backend(rd, rows_before.data(), rows_bytes);
    dist_blocks_to_rows((char*)rd + off * es, ld, (const char*)bd + off * es, bstride, G, B, Tl, w, es);
    Bytes rows_identity = rows_before;
    for (long i = 0; i < nrows; i++)
        memcpy(&rows_identity[(off + i * ld) * es], &r[(off + i * ld) * es], w * es);
    snprintf(step, sizeof step, "blocks_to_rows(rows_to_blocks(R)) == R %s", what);
    ok &= same_bytes(download(rd, rows_bytes), rows_identity, es, step);

    dist_free(xd);
    dist_free(rd);
    dist_free(bd);
    return ok;
}

static void test_packings(void) {
    for (size_t es : ESIZES) {
        Tally t = {0, 0};
        for (int G = 1; G <= 3; G++)
            for (int B = 1; B <= 2; B++)
                for (int Tl : {1, 3})
                    for (int w : WIDTHS)
                        for (int ld_gap : {0, 3, 8})
                            for (int bs_gap : {0, 5})
                                for (int off = 0; off < 2; off++)
                                    tally(&t, pack_case(es, G, B, Tl, w, w + ld_gap,
                                                        (long)B * Tl * w + bs_gap, off));
        check(t.failed == 0,
              "blocks_to_rows, rows_to_blocks esize %zu: %d of %d layouts bit-exact, both round trips "
              "the identity", es, t.cases - t.failed, t.cases);
    }
}

// --- Accumulators --------------------------------------------------------------------------------

// bf16 bits of x rounded to nearest even (x not NaN): the bits below the top 16 are rounded away.
static uint16_t bf16_rne_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// Values that exercise the rounding: ties (even and odd), just above and below a tie, overflow to
// infinity, infinities, signed zeros, denormals; the rest random over many magnitudes.
static float rounding_case(long i) {
    static const uint32_t SPECIAL[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu,
                                       0xbf818000u, 0x7f7fffffu, 0x7f7f8000u, 0x7f800000u,
                                       0xff800000u, 0x00000000u, 0x80000000u, 0x00018000u,
                                       0x80000001u, 0x3e9a8000u};
    const long n = sizeof SPECIAL / sizeof SPECIAL[0];
    float x;
    if (i % 3 == 0 && i / 3 < n) {
        memcpy(&x, &SPECIAL[i / 3], sizeof x);
        return x;
    }
    return uniform() * ldexpf(1.0f, (int)(next_u32() % 40) - 20);
}

static void test_acc_to_real(void) {
    static const long ROWS[] = {1, 4, 9};
    Tally t = {0, 0};
    int host_rounding_ok = 1;
    for (long rows : ROWS)
        for (int w : WIDTHS)
            for (int lds_gap : {0, 3})
                for (int ldd_gap : {0, 8})
                    for (int off = 0; off < 2; off++) {
                        const long lds = w + lds_gap, ldd = w + ldd_gap;
                        const long nsrc = off + (rows - 1) * lds + w, ndst = off + (rows - 1) * ldd + w;
                        std::vector<float> src((size_t)nsrc);
                        for (long i = 0; i < nsrc; i++) src[i] = rounding_case(i);
                        Bytes src_bytes(sizeof(float) * nsrc);
                        memcpy(src_bytes.data(), src.data(), src_bytes.size());
                        const Bytes before = random_bytes(sizeof(floatX) * ndst);
                        void* s = upload(src_bytes);
                        void* d = upload(before);
                        dist_acc_to_real((floatX*)d + off, ldd, (const float*)s + off, lds, rows, w);
                        Bytes want = before;
                        for (long i = 0; i < rows; i++)
                            for (int c = 0; c < w; c++) {
                                const float x = src[off + i * lds + c];
                                const floatX y = from_float<floatX>(x);
                                if (sizeof(floatX) == 2) {
                                    uint16_t bits;
                                    memcpy(&bits, &y, sizeof bits);
                                    host_rounding_ok &= bits == bf16_rne_bits(x);
                                }
                                memcpy(&want[sizeof(floatX) * (off + i * ldd + c)], &y, sizeof y);
                            }
                        char what[160];
                        snprintf(what, sizeof what, "acc_to_real rows %ld w %d lds %ld ldd %ld off %d",
                                 rows, w, lds, ldd, off);
                        tally(&t, same_bytes(download(d, before.size()), want, sizeof(floatX), what));
                        dist_free(s);
                        dist_free(d);
                    }
    if (sizeof(floatX) == 2)
        check(host_rounding_ok, "the host's float -> bf16 conversion rounds to nearest even (the bit "
              "formula) on the test values");
    check(t.failed == 0, "acc_to_real fp32 -> " FLOATX_NAME ": %d of %d cases equal the host "
          "conversion (gaps untouched)", t.cases - t.failed, t.cases);
}

static Bytes random_floats(long n) {
    std::vector<float> v((size_t)n);
    for (float& x : v) x = uniform() * 4.0f;
    Bytes b(sizeof(float) * n);
    memcpy(b.data(), v.data(), b.size());
    return b;
}

static void test_zero_add(void) {
    // n elements starting one element in, in a buffer of n + 3: the last two must stay.
    static const long COUNTS[] = {1, 5, 1000, 4099};
    Tally zero = {0, 0}, add = {0, 0};
    for (long n : COUNTS) {
        const Bytes before = random_floats(n + 3), x = random_floats(n + 3);
        void* yd = upload(before);
        void* xd = upload(x);
        dist_add_acc((float*)yd + 1, (const float*)xd + 2, (size_t)n);
        Bytes want = before;
        for (long i = 0; i < n; i++) {
            float a, b;
            memcpy(&a, &want[sizeof(float) * (1 + i)], sizeof a);
            memcpy(&b, &x[sizeof(float) * (2 + i)], sizeof b);
            a += b;
            memcpy(&want[sizeof(float) * (1 + i)], &a, sizeof a);
        }
        char what[80];
        snprintf(what, sizeof what, "add_acc n %ld", n);
        tally(&add, same_bytes(download(yd, before.size()), want, sizeof(float), what));
        dist_zero_acc((float*)yd + 1, (size_t)n);
        memset(&want[sizeof(float)], 0, sizeof(float) * n);
        snprintf(what, sizeof what, "zero_acc n %ld", n);
        tally(&zero, same_bytes(download(yd, before.size()), want, sizeof(float), what));
        dist_free(yd);
        dist_free(xd);
    }
    check(zero.failed == 0, "zero_acc: %d of %d counts exact, nothing past n", zero.cases - zero.failed,
          zero.cases);
    check(add.failed == 0, "add_acc: %d of %d counts exact, nothing past n", add.cases - add.failed,
          add.cases);

    // More elements than 65536 blocks of 256 threads: each thread takes a second element.
    const long big = (1L << 24) + 1000;
    std::vector<float> y((size_t)big), xs((size_t)big);
    for (long i = 0; i < big; i++) y[i] = (float)(i % 1024), xs[i] = (float)(i % 7) * 0.5f;
    float* yd = (float*)dist_alloc(sizeof(float) * big, "big y");
    float* xd = (float*)dist_alloc(sizeof(float) * big, "big x");
    dist_to_backend(yd, y.data(), sizeof(float) * big);
    dist_to_backend(xd, xs.data(), sizeof(float) * big);
    dist_add_acc(yd, xd, (size_t)big);
    std::vector<float> got((size_t)big);
    dist_to_host(got.data(), yd, sizeof(float) * big);
    long bad = -1;
    for (long i = 0; i < big && bad < 0; i++)
        if (got[i] != y[i] + xs[i]) bad = i;
    if (bad >= 0) printf("FAIL add_acc n %ld: element %ld is %g, expected %g\n", big, bad, got[bad], y[bad] + xs[bad]);
    check(bad < 0, "add_acc on %ld elements (past the capped grid) exact", big);
    dist_free(yd);
    dist_free(xd);
}

// --- Attention forwarders ------------------------------------------------------------------------

static void* random_x(long n) {   // floatX values in [-1, 1)
    std::vector<floatX> v((size_t)n);
    for (floatX& x : v) x = from_float<floatX>(uniform());
    Bytes b(sizeof(floatX) * n);
    memcpy(b.data(), v.data(), b.size());
    return upload(b);
}

static void* copy_of(const void* d, size_t bytes) {
    return upload(download(d, bytes));
}

static int same_device(const void* a, const void* b, size_t bytes, const char* what) {
    return same_bytes(download(a, bytes), download(b, bytes), 4, what);
}

// One problem: queries at off 3, stride 2; keys at 0, 1, 2, ... (some queries see every key, the
// first few only some); Q in tight-ish rows, K and V out of a fused (B, Tk, 2C + 8) buffer.
static void test_attention(void) {
    const int B = 2, NH = 2, HS = 16, Tq = 5, Tk = 7, C = NH * HS;
    const AttentionProblem p = attention_problem(B, NH, HS, Tq, Tk, token_positions(3, 2),
                                                 token_positions(0, 1));
    const int ldq = C + 4, ldkv = 2 * C + 8, ldo = C + 3, lddo = C;
    floatX* q = (floatX*)random_x((long)B * Tq * ldq);
    floatX* kv = (floatX*)random_x((long)B * Tk * ldkv);
    floatX* dout = (floatX*)random_x((long)B * Tq * lddo);
    floatX* ox = (floatX*)random_x((long)B * Tq * C);
    const size_t o_bytes = sizeof(float) * B * Tq * ldo, lse_bytes = sizeof(float) * B * NH * Tq;
    const size_t dq_bytes = sizeof(float) * B * Tq * C, dkv_bytes = sizeof(float) * B * Tk * 2 * C;
    cudaStream_t s = cuda_backend_stream();

    float* o1 = (float*)upload(random_bytes(o_bytes));
    float* lse1 = (float*)upload(random_bytes(lse_bytes));
    float* o2 = (float*)copy_of(o1, o_bytes);
    float* lse2 = (float*)copy_of(lse1, lse_bytes);
    dist_attention_forward(&p, q, ldq, kv, ldkv, kv + C, ldkv, o1, ldo, lse1);
    attention_partial_forward_cuda(&p, q, ldq, kv, ldkv, kv + C, ldkv, o2, ldo, lse2, s);
    check(same_device(o1, o2, o_bytes, "forward o") && same_device(lse1, lse2, lse_bytes, "forward lse"),
          "dist_attention_forward: the launcher's bits (o, lse)");

    float* d1 = (float*)upload(random_bytes(lse_bytes));
    float* d2 = (float*)copy_of(d1, lse_bytes);
    dist_attention_row_dot(&p, ox, C, dout, lddo, d1);
    attention_row_dot_cuda(&p, ox, C, dout, lddo, d2, s);
    check(same_device(d1, d2, lse_bytes, "row_dot d"), "dist_attention_row_dot: the launcher's bits");

    // Backward onto random gradients (it accumulates), dk and dv in one fused (B, Tk, 2C) buffer.
    float* dq1 = (float*)upload(random_floats((long)B * Tq * C));
    float* dkv1 = (float*)upload(random_floats((long)B * Tk * 2 * C));
    float* dq2 = (float*)copy_of(dq1, dq_bytes);
    float* dkv2 = (float*)copy_of(dkv1, dkv_bytes);
    dist_attention_backward(&p, q, ldq, kv, ldkv, kv + C, ldkv, dout, lddo, lse1, d1, dq1, C, dkv1,
                            2 * C, dkv1 + C, 2 * C);
    attention_partial_backward_cuda(&p, q, ldq, kv, ldkv, kv + C, ldkv, dout, lddo, lse1, d1, dq2, C,
                                    dkv2, 2 * C, dkv2 + C, 2 * C, s);
    check(same_device(dq1, dq2, dq_bytes, "backward dq") && same_device(dkv1, dkv2, dkv_bytes, "backward dk, dv"),
          "dist_attention_backward: the launcher's bits (dq, dk, dv)");

    // Merge the forward's partial (o1, lse1) with a second one.
    float* ob = (float*)upload(random_floats((long)B * Tq * C));
    float* lseb = (float*)upload(random_floats((long)B * NH * Tq));
    float* oa2 = (float*)copy_of(o1, o_bytes);
    float* lsea2 = (float*)copy_of(lse1, lse_bytes);
    dist_attention_merge(B, NH, HS, Tq, o1, ldo, lse1, ob, C, lseb);
    attention_merge_cuda(B, NH, HS, Tq, oa2, ldo, lsea2, ob, C, lseb, s);
    check(same_device(o1, oa2, o_bytes, "merge o") && same_device(lse1, lsea2, lse_bytes, "merge lse"),
          "dist_attention_merge: the launcher's bits (o, lse)");

    void* all[] = {q, kv, dout, ox, o1, lse1, o2, lse2, d1, d2, dq1, dkv1, dq2, dkv2, ob, lseb, oa2, lsea2};
    for (void* a : all) dist_free(a);
}

// --- The rest ------------------------------------------------------------------------------------

static void test_types_and_empty_calls(void) {
    check(dist_real_comm_type() == (sizeof(floatX) == 2 ? COMM_BF16 : COMM_F32) &&
          dist_acc_comm_type() == COMM_F32 && dist_host_memory() == 0,
          "comm types %s / fp32, device memory", FLOATX_NAME);
    // Any launch here would have a zero grid: an invalid configuration that ends the job.
    dist_copy_rows(NULL, 4, NULL, 4, 0, 4, 2);
    dist_copy_rows(NULL, 4, NULL, 4, 3, 0, 4);
    dist_copy_rows_batch(NULL, 4, 4, NULL, 4, 4, 0, 3, 4, 4);
    dist_blocks_to_rows(NULL, 4, NULL, 4, 2, 0, 3, 4, 8);
    dist_rows_to_blocks(NULL, 4, NULL, 4, 2, 2, 0, 4, 2);
    dist_acc_to_real(NULL, 4, NULL, 4, 0, 4);
    dist_zero_acc(NULL, 0);
    dist_add_acc(NULL, NULL, 0);
    dist_to_backend(NULL, NULL, 0);
    dist_to_host(NULL, NULL, 0);
    dist_free(NULL);
    cuda_backend_sync();
    check(1, "calls on zero rows, widths or elements launch nothing; dist_free(NULL) is a no-op");
}

int main(void) {
    printf("dist_ops_cuda (%s storage)\n", FLOATX_NAME);
    test_types_and_empty_calls();
    test_copy_rows();
    test_copy_rows_batch();
    test_packings();
    test_acc_to_real();
    test_zero_add();
    test_attention();
    return test_finish("test_dist_ops_cuda");
}
