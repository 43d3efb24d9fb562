// float_round_mantissa (comm/bf16.h), the rounding Muon's Newton-Schulz inputs get on the CPU at
// --muon-fp32-matmul-prec medium and high: at 7 bits it is bf16_from_float's value for every
// finite float tried (random bit patterns, ties, the largest floats, subnormals); at 10 bits
// (TF32) known answers: ties to even, above and below the tie, negative values, a carry into the
// exponent; infinities and NaN unchanged.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm/bf16.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static int failures;

static void expect(float got, float want, const char* what) {
    if (to_bits(got) == to_bits(want)) return;
    if (failures++ < 10) printf("FAIL %s: got %.9g (0x%08x), want %.9g (0x%08x)\n", what, got,
                                to_bits(got), want, to_bits(want));
}

int main(void) {
    uint64_t s = 88172645463325252ull;
    long tried = 0;
    for (long i = 0; i < 2000000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)s;
        if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u;   // a tie at bf16's last bit
        if (i % 4 == 2) u = (u & 0x807f0000u) | 0x7f000000u | (u & 0xffffu);   // the largest floats
        if (i % 4 == 3) u &= 0x807fffffu;                                       // subnormals
        const float f = from_bits(u);
        if (!isfinite(f)) continue;
        tried++;
        expect(float_round_mantissa(f, 7), bf16_to_float(bf16_from_float(f)), "7 bits (bf16)");
    }
    const float ulp = ldexpf(1, -10);   // TF32's ulp at 1
    expect(float_round_mantissa(1 + 0.25f * ulp, 10), 1, "TF32 1 + u/4");
    expect(float_round_mantissa(1 + 0.5f * ulp, 10), 1, "TF32 1 + u/2 (tie to even)");
    expect(float_round_mantissa(1 + 0.75f * ulp, 10), 1 + ulp, "TF32 1 + 3u/4");
    expect(float_round_mantissa(1 + 1.5f * ulp, 10), 1 + 2 * ulp, "TF32 1 + 3u/2 (tie to even)");
    expect(float_round_mantissa(-(1 + 2.5f * ulp), 10), -(1 + 2 * ulp), "TF32 -(1 + 5u/2)");
    expect(float_round_mantissa(2 - 0.25f * ulp, 10), 2, "TF32 2 - u/4 (carry into the exponent)");
    expect(float_round_mantissa(INFINITY, 10), INFINITY, "TF32 infinity");
    expect(float_round_mantissa(-INFINITY, 7), -INFINITY, "bf16 -infinity");
    const float nan = float_round_mantissa(NAN, 10);
    if (!isnan(nan) && failures++ < 10) printf("FAIL TF32 NaN: got %g\n", nan);
    printf("%s float_round_mantissa: bf16's value for %ld finite floats, TF32's known answers\n",
           failures ? "FAIL" : "ok  ", tried);
    return failures != 0;
}
