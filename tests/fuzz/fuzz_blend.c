// A --train-data value (data/blend.c). Input: the value's bytes (cut at the first NUL). An
// accepted value has 1..BLEND_MAX_COMPONENTS components with positive finite weights and
// non-empty patterns; a refused one says why in one line. With up to 8 components the period is
// built: shares of at least 1, each within a slot of its weight's exact share, summing to the
// period, each slot's index within its component
// counted right, and blend_counts equal to the walked counts.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/blend.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void check_table(const BlendSpec* s) {
    BlendTable t;
    char err[ERR_LEN] = "";
    if (blend_table_build(s->weight, s->n, &t, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        return;
    }
    int64_t total = 0, taken[8] = {0};
    double largest = 0, sum = 0;
    for (int c = 0; c < s->n; c++) largest = s->weight[c] > largest ? s->weight[c] : largest;
    for (int c = 0; c < s->n; c++) sum += s->weight[c] / largest;
    for (int c = 0; c < s->n; c++) {
        fuzz_expect(t.share[c] >= 1, "a component with no share of the period");
        const double exact = s->weight[c] / largest / sum * BLEND_PERIOD;
        fuzz_expect(fabs(t.share[c] - exact) < 1, "a share a slot or more from its weight's");
        total += t.share[c];
    }
    fuzz_expect(total == BLEND_PERIOD, "the shares do not sum to the period");
    const int64_t probe = BLEND_PERIOD + 7;   // across a period boundary
    for (int64_t p = 0; p < probe; p++) {
        int c;
        int64_t k;
        blend_locate(&t, p, &c, &k);
        fuzz_expect(c >= 0 && c < s->n, "a slot of no component");
        fuzz_expect(k == taken[c], "a window's index in its component skips or repeats");
        taken[c]++;
    }
    int64_t counts[8];
    blend_counts(&t, probe, counts);
    for (int c = 0; c < s->n; c++)
        fuzz_expect(counts[c] == taken[c], "blend_counts differs from the walked counts");
    blend_table_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const uint8_t* part[1];
    size_t len[1];
    fuzz_split(data, size, 1, part, len);
    const size_t n = len[0] ? strnlen((const char*)part[0], len[0]) : 0;
    char* value = malloc(n + 1);
    memcpy(value, part[0], n);
    value[n] = 0;
    BlendSpec s;
    char err[ERR_LEN] = "";
    if (blend_spec_parse(value, &s, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        fuzz_expect(s.n == 0 && !s.weight && !s.pattern, "a refused value left components");
        free(value);
        return 0;
    }
    fuzz_expect(s.n >= 1 && s.n <= BLEND_MAX_COMPONENTS, "a component count out of range");
    for (int c = 0; c < s.n; c++) {
        fuzz_expect(s.weight[c] > 0 && isfinite(s.weight[c]), "a weight that is not positive");
        fuzz_expect(s.pattern[c] && s.pattern[c][0], "an empty pattern");
    }
    if (s.n <= 8) check_table(&s);
    blend_spec_free(&s);
    free(value);
    return 0;
}
