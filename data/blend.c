// Data blends: parsing the weights and laying out one period (see data/blend.h).
#include "data/blend.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

// ---- Parsing ----

// The next white-space-separated word of *s (copied), or NULL at the end.
static char* next_word(const char** s) {
    const char* p = *s;
    while (*p && isspace((unsigned char)*p)) p++;
    if (!*p) {
        *s = p;
        return NULL;
    }
    const char* b = p;
    while (*p && !isspace((unsigned char)*p)) p++;
    *s = p;
    char* w = xmalloc((size_t)(p - b) + 1, "blend word");
    memcpy(w, b, (size_t)(p - b));
    w[p - b] = 0;
    return w;
}

// A word that is all of a finite number (strtod's syntax), or 0 with *ok = 0.
static double parse_number(const char* w, int* ok) {
    char* end;
    const double x = strtod(w, &end);
    *ok = end != w && *end == 0 && isfinite(x);
    return x;
}

void blend_spec_free(BlendSpec* s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->pattern ? s->pattern[i] : NULL);
    free(s->pattern);
    free(s->weight);
    memset(s, 0, sizeof *s);
}

static void spec_add(BlendSpec* s, double weight, char* pattern) {
    s->weight = realloc(s->weight, sizeof *s->weight * (size_t)(s->n + 1));
    s->pattern = realloc(s->pattern, sizeof *s->pattern * (size_t)(s->n + 1));
    CHECK(s->weight && s->pattern, "free some memory", "out of memory for %d blend components",
          s->n + 1);
    s->weight[s->n] = weight;
    s->pattern[s->n] = pattern;
    s->n++;
}

void blend_spec_single(const char* pattern, BlendSpec* s) {
    memset(s, 0, sizeof *s);
    char* whole = xmalloc(strlen(pattern) + 1, "shard pattern");
    strcpy(whole, pattern);
    spec_add(s, 1.0, whole);
}

int blend_spec_parse(const char* value, BlendSpec* s, char* err, size_t errlen) {
    memset(s, 0, sizeof *s);
    const char* p = value ? value : "";
    char* first = next_word(&p);
    if (!first)
        return set_err(err, errlen, "blend: expected a shard pattern or WEIGHT PATTERN pairs, "
                       "found an empty value");
    int ok;
    parse_number(first, &ok);
    free(first);
    char* second = next_word(&p);
    free(second);
    if (!ok || !second) {   // one pattern, taken whole (a path may hold spaces or be a number)
        blend_spec_single(value, s);
        return 0;
    }
    p = value;
    int words = 0;
    for (;;) {
        char* w = next_word(&p);
        if (!w) break;
        char* pattern = next_word(&p);
        words += 1 + (pattern != NULL);
        if (!pattern) {
            set_err(err, errlen, "blend: expected WEIGHT PATTERN pairs (e.g. '0.7 "
                    "web_train_*.bin 0.3 code_train_*.bin'), found %d words: weight '%s' has no "
                    "pattern after it", words, w);
            free(w);
            blend_spec_free(s);
            return -1;
        }
        const double weight = parse_number(w, &ok);
        if (!ok || !(weight > 0)) {
            set_err(err, errlen, "blend: word %d: expected a weight (a positive finite "
                    "number) before pattern '%s', found '%s'", words - 1, pattern, w);
            free(w);
            free(pattern);
            blend_spec_free(s);
            return -1;
        }
        free(w);
        if (s->n == BLEND_MAX_COMPONENTS) {
            free(pattern);
            blend_spec_free(s);
            return set_err(err, errlen, "blend: expected at most %d components, found more "
                           "(%d words)", BLEND_MAX_COMPONENTS, words);
        }
        spec_add(s, weight, pattern);
    }
    return 0;
}

// ---- The period ----

void blend_table_free(BlendTable* t) {
    if (!t) return;
    free(t->share);
    free(t->comp);
    free(t->before);
    memset(t, 0, sizeof *t);
}

// The exact shares: weight / total x BLEND_PERIOD, the weights first divided by the largest so
// that their sum stays finite however large they are written.
static void exact_shares(const double* weight, int n, double* exact) {
    double largest = 0, total = 0;
    for (int c = 0; c < n; c++) largest = weight[c] > largest ? weight[c] : largest;
    for (int c = 0; c < n; c++) total += weight[c] / largest;
    for (int c = 0; c < n; c++) exact[c] = weight[c] / largest / total * BLEND_PERIOD;
}

// Largest-remainder apportionment of BLEND_PERIOD slots to the exact shares (ties to the lower
// index).
static void apportion(const double* exact, int n, int32_t* share) {
    double* rest = xmalloc(sizeof *rest * (size_t)n, "blend remainders");
    int64_t given = 0;
    for (int c = 0; c < n; c++) {
        share[c] = (int32_t)floor(exact[c]);
        rest[c] = exact[c] - share[c];
        given += share[c];
    }
    for (; given < BLEND_PERIOD; given++) {
        int best = 0;
        for (int c = 1; c < n; c++)
            if (rest[c] > rest[best]) best = c;
        share[best]++;
        rest[best] = -1;
    }
    free(rest);
}

int blend_table_build(const double* weight, int n, BlendTable* t, char* err, size_t errlen) {
    memset(t, 0, sizeof *t);
    if (n < 1 || n > BLEND_MAX_COMPONENTS)
        return set_err(err, errlen, "blend: expected 1..%d components, found %d",
                       BLEND_MAX_COMPONENTS, n);
    for (int c = 0; c < n; c++)
        if (!(weight[c] > 0) || !isfinite(weight[c]))
            return set_err(err, errlen, "blend: component %d: expected a positive finite "
                           "weight, found %g", c + 1, weight[c]);
    t->n = n;
    t->share = xmalloc(sizeof *t->share * (size_t)n, "blend shares");
    if (n == 1) {
        t->share[0] = BLEND_PERIOD;
        return 0;
    }
    double* exact = xmalloc(sizeof *exact * (size_t)n, "blend shares");
    exact_shares(weight, n, exact);
    for (int c = 0; c < n; c++)
        if (exact[c] < 1) {   // a share rounded up to one slot would not be the weight asked for
            set_err(err, errlen, "blend: component %d: weight %g is %.3g of the total, below "
                    "the 1/%d a component needs; raise it or leave the component out", c + 1,
                    weight[c], exact[c] / BLEND_PERIOD, BLEND_PERIOD);
            free(exact);
            blend_table_free(t);
            return -1;
        }
    apportion(exact, n, t->share);
    free(exact);
    t->comp = xmalloc(sizeof *t->comp * BLEND_PERIOD, "blend period");
    t->before = xmalloc(sizeof *t->before * BLEND_PERIOD, "blend period");
    int64_t* credit = calloc((size_t)n, sizeof *credit);
    int32_t* taken = calloc((size_t)n, sizeof *taken);
    CHECK(credit && taken, "free some memory", "out of memory for %d blend components", n);
    // Smooth weighted round-robin: the credits always sum to 0 after a slot is paid for, so
    // after BLEND_PERIOD slots every component has taken exactly its share.
    for (int o = 0; o < BLEND_PERIOD; o++) {
        int best = 0;
        for (int c = 0; c < n; c++) {
            credit[c] += t->share[c];
            if (credit[c] > credit[best]) best = c;
        }
        credit[best] -= BLEND_PERIOD;
        t->comp[o] = (uint16_t)best;
        t->before[o] = taken[best]++;
    }
    for (int c = 0; c < n; c++)
        CHECK(taken[c] == t->share[c], "report this as a bug",
              "blend period: component %d took %d slots, its share is %d", c, taken[c],
              t->share[c]);
    free(credit);
    free(taken);
    return 0;
}

void blend_counts(const BlendTable* t, int64_t p, int64_t* counts) {
    if (t->n == 1) {
        counts[0] = p;
        return;
    }
    const int64_t m = p / BLEND_PERIOD, o = p % BLEND_PERIOD;
    for (int c = 0; c < t->n; c++) counts[c] = m * t->share[c];
    for (int64_t i = 0; i < o; i++) counts[t->comp[i]]++;
}
