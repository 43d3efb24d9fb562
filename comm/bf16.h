// bf16 as the bits of a float's upper half: the one rounding (to nearest even, NaN kept quiet)
// that the model files, the MPI transport's bf16 sums and the Hugging Face export share; and a
// float rounded to fewer mantissa bits (bf16's 7, TF32's 10), as tensor cores read fp32 inputs.
#pragma once
#include <stdint.h>
#include <string.h>

static inline uint16_t bf16_from_float(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);   // NaN
    bits += 0x7fffu + ((bits >> 16) & 1);                                            // nearest even
    return (uint16_t)(bits >> 16);
}

static inline float bf16_to_float(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

// f rounded to nearest even at `bits` mantissa bits (0 < bits < 23), still a float: bf16 (7) and
// TF32 (10) values. NaN and infinity stay as they are.
static inline float float_round_mantissa(float f, int bits) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) return f;
    const int drop = 23 - bits;
    u += ((1u << (drop - 1)) - 1) + ((u >> drop) & 1);
    u &= ~((1u << drop) - 1);
    memcpy(&f, &u, sizeof f);
    return f;
}
