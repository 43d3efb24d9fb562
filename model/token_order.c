// Rows ordered by token: model/token_order.h.
#include "model/token_order.h"

#include <string.h>

#include "comm/fail.h"

enum { RADIX_BITS = 8, RADIX = 1 << RADIX_BITS };

// One stable counting pass on byte `shift` of the token: dst = src reordered.
static void order_pass(int* dst, const int* src, const int* tokens, size_t n, int shift) {
    size_t start[RADIX] = {0};
    for (size_t i = 0; i < n; i++) start[((unsigned)tokens[src[i]] >> shift) & (RADIX - 1)]++;
    size_t sum = 0;
    for (int d = 0; d < RADIX; d++) {
        const size_t count = start[d];
        start[d] = sum;
        sum += count;
    }
    for (size_t i = 0; i < n; i++) dst[start[((unsigned)tokens[src[i]] >> shift) & (RADIX - 1)]++] = src[i];
}

void token_order(int* order, int* scratch, const int* tokens, size_t n) {
    unsigned bits = 0;   // the union of every token's bits: which bytes need a pass
    for (size_t i = 0; i < n; i++) {
        CHECK(tokens[i] >= 0, "caller bug", "token_order: token %d at row %zu is negative", tokens[i], i);
        bits |= (unsigned)tokens[i];
        order[i] = (int)i;
    }
    int* src = order;
    int* dst = scratch;
    for (int shift = 0; shift < 32; shift += RADIX_BITS) {
        if (((bits >> shift) & (RADIX - 1)) == 0) continue;   // the byte is 0 in every token
        order_pass(dst, src, tokens, n, shift);
        int* t = src;
        src = dst;
        dst = t;
    }
    if (src != order) memcpy(order, src, n * sizeof(int));
}
