// Batch-size ramp-up: reading --rampup-batch-tokens and the batch of each step.
#include "train/batch_rampup.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLAG "--rampup-batch-tokens"
#define SYNTAX "expected three whole numbers START INCREMENT TOKENS (e.g. '32768 32768 4000000000')"

static int is_separator(char c) { return c == ' ' || c == ',' || c == '\t'; }

int batch_rampup_parse(const char* value, int64_t micro, int64_t total, int total_given,
                       BatchRampup* r, char* err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->total = total;
    if (!value || !value[0]) return 0;
    // Three whole numbers, separated by spaces or commas.
    int64_t v[3];
    const char* p = value;
    int n = 0;
    for (;;) {
        while (is_separator(*p)) p++;
        if (!*p) break;
        const int len = (int)strcspn(p, " ,\t");
        if (n == 3) {
            snprintf(err, errlen, FLAG " '%.80s': " SYNTAX ", found a fourth, '%.*s'", value,
                     len > 40 ? 40 : len, p);
            return -1;
        }
        char* end = (char*)p;
        errno = 0;
        const long long x = isdigit((unsigned char)*p) ? strtoll(p, &end, 10) : 0;
        if (!isdigit((unsigned char)*p) || (*end && !is_separator(*end))) {
            snprintf(err, errlen, FLAG " '%.80s': " SYNTAX ", found '%.*s'", value,
                     len > 40 ? 40 : len, p);
            return -1;
        }
        if (errno == ERANGE || x > RAMPUP_MAX_TOKENS) {
            snprintf(err, errlen, FLAG " '%.80s': expected numbers up to %lld, found '%.*s'",
                     value, RAMPUP_MAX_TOKENS, len > 40 ? 40 : len, p);
            return -1;
        }
        v[n++] = x;
        p = end;
    }
    if (n != 3) {
        snprintf(err, errlen, FLAG " '%.80s': " SYNTAX ", found %d number%s", value, n,
                 n == 1 ? "" : "s");
        return -1;
    }
    const int64_t start = v[0], increment = v[1], tokens = v[2];
    if (start <= 0 || start % micro != 0 || increment <= 0 || increment % micro != 0) {
        snprintf(err, errlen, FLAG ": START %lld and INCREMENT %lld: expected positive multiples "
                 "of batch x seq-len x dp = %lld tokens (a step is whole micro-batches)",
                 (long long)start, (long long)increment, (long long)micro);
        return -1;
    }
    if (start >= total) {
        snprintf(err, errlen, FLAG ": START %lld: expected fewer tokens than --total-batch-tokens "
                 "%lld%s, the batch it ramps up to", (long long)start, (long long)total,
                 total_given ? "" : " (its default: batch x seq-len x dp)");
        return -1;
    }
    if ((total - start) % increment != 0) {
        snprintf(err, errlen, FLAG ": INCREMENT %lld: expected a divisor of --total-batch-tokens "
                 "- START = %lld - %lld = %lld", (long long)increment, (long long)total,
                 (long long)start, (long long)(total - start));
        return -1;
    }
    const int64_t increments = (total - start) / increment;
    if (increments > RAMPUP_MAX_INCREMENTS) {
        snprintf(err, errlen, FLAG ": INCREMENT %lld: expected at most %d increments from START "
                 "%lld to --total-batch-tokens %lld, found %lld", (long long)increment,
                 RAMPUP_MAX_INCREMENTS, (long long)start, (long long)total,
                 (long long)increments);
        return -1;
    }
    if (tokens < increments) {
        snprintf(err, errlen, FLAG ": TOKENS %lld: expected at least the %lld increments from "
                 "START to --total-batch-tokens (one trained token each)", (long long)tokens,
                 (long long)increments);
        return -1;
    }
    r->start = start;
    r->increment = increment;
    r->tokens = tokens;
    r->increments = increments;
    return 0;
}

// The increments made after `trained` tokens: floor(trained n / TOKENS), at most n. The product
// needs more than 64 bits (TOKENS up to 1e18, n up to 1e6).
static int64_t increments_made(const BatchRampup* r, int64_t trained) {
    if (trained >= r->tokens) return r->increments;
    return (int64_t)((unsigned __int128)trained * (uint64_t)r->increments / (uint64_t)r->tokens);
}

// The trained tokens from which k increments are made: ceil(k TOKENS / n).
static int64_t increment_begins(const BatchRampup* r, int64_t k) {
    const unsigned __int128 kt = (unsigned __int128)k * (uint64_t)r->tokens;
    return (int64_t)((kt + (uint64_t)r->increments - 1) / (uint64_t)r->increments);
}

int64_t batch_rampup_step_tokens(const BatchRampup* r, int64_t trained) {
    if (!batch_rampup_on(r)) return r->total;
    return r->start + increments_made(r, trained) * r->increment;
}

// The steps at the batch of `trained` before the next increment is made, or -1 at the full batch.
static int64_t steps_at_batch(const BatchRampup* r, int64_t trained) {
    const int64_t k = batch_rampup_on(r) ? increments_made(r, trained) : 0;
    if (!batch_rampup_on(r) || k == r->increments) return -1;
    const int64_t b = r->start + k * r->increment;
    return (increment_begins(r, k + 1) - trained + b - 1) / b;
}

int64_t batch_rampup_tokens_of_steps(const BatchRampup* r, int64_t trained, int64_t steps) {
    int64_t sum = 0;
    // One batch at a time (at most n + 1 rounds), saturating at INT64_MAX.
    while (steps > 0) {
        const int64_t b = batch_rampup_step_tokens(r, trained);
        int64_t k = steps_at_batch(r, trained);
        if (k < 0 || k > steps) k = steps;
        if (k > (INT64_MAX - sum) / b) return INT64_MAX;
        sum += k * b;
        steps -= k;
        if (steps > 0) trained += k * b;   // within the ramp: below TOKENS + b
    }
    return sum;
}

int64_t batch_rampup_steps_for_tokens(const BatchRampup* r, int64_t tokens) {
    // The tokens of the first s steps grow with s (every step trains some): double s until they
    // reach `tokens` (each step trains one at least, so s stays under 2 x tokens), then bisect.
    int64_t lo = 1, hi = 1;
    while (batch_rampup_tokens_of_steps(r, 0, hi) < tokens) hi *= 2;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (batch_rampup_tokens_of_steps(r, 0, mid) >= tokens) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

int64_t batch_rampup_steps(const BatchRampup* r) {
    int64_t steps = 0, trained = 0, k;
    while ((k = steps_at_batch(r, trained)) > 0) {
        steps += k;
        trained += k * batch_rampup_step_tokens(r, trained);
    }
    return steps;
}
