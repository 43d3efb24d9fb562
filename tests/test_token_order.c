// token_order (model/token_order.h) against qsort on (token, row): random tokens over ranges that
// need one to four radix bytes, runs of one token, all rows one token, n = 0 and 1.
#include <stdio.h>
#include <stdlib.h>

#include "model/token_order.h"

static const int* sort_tokens;   // qsort's comparator has no context argument

static int by_token_then_row(const void* a, const void* b) {
    const int ra = *(const int*)a, rb = *(const int*)b;
    const int ta = sort_tokens[ra], tb = sort_tokens[rb];
    if (ta != tb) return ta < tb ? -1 : 1;
    return (ra > rb) - (ra < rb);
}

static unsigned long long rng = 88172645463325252ull;
static unsigned next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 32);
}

// One case: n rows, tokens in [0, range) in runs of `run` rows. Returns 1 when it matches qsort.
static int check_case(size_t n, unsigned range, int run) {
    int* tokens = malloc((n + 1) * sizeof(int));
    int* order = malloc((n + 1) * sizeof(int));
    int* scratch = malloc((n + 1) * sizeof(int));
    int* want = malloc((n + 1) * sizeof(int));
    for (size_t i = 0; i < n; i++) {
        tokens[i] = i % (size_t)run ? tokens[i - 1] : (int)(next_u32() % range);
        want[i] = (int)i;
    }
    sort_tokens = tokens;
    qsort(want, n, sizeof(int), by_token_then_row);
    token_order(order, scratch, tokens, n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += order[i] != want[i];
    printf("%s n=%zu range=%u run=%d: %zu of %zu slots differ from qsort\n", wrong ? "FAIL" : "ok  ", n, range,
           run, wrong, n);
    free(tokens);
    free(order);
    free(scratch);
    free(want);
    return wrong == 0;
}

int main(void) {
    int failures = 0;
    failures += !check_case(0, 1, 1);
    failures += !check_case(1, 50257, 1);
    failures += !check_case(8192, 1, 1);                // every row one token: the identity
    failures += !check_case(8192, 200, 1);              // one byte
    failures += !check_case(8192, 50257, 1);            // GPT-2's vocabulary: two bytes
    failures += !check_case(8192, 50257, 40);           // runs of one token
    failures += !check_case(5000, 1u << 20, 3);         // three bytes
    failures += !check_case(5000, 0x7fffffffu, 1);      // four bytes
    failures += !check_case(131072, 50257, 1);          // a long context's micro-batch
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
    return failures != 0;
}
