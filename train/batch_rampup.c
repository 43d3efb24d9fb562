// Batch-size ramp-up: reading --rampup-batch-tokens and the batch of each step.
#include "train/batch_rampup.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLAG "--rampup-batch-tokens"

int batch_rampup_parse(const char* value, int64_t micro, int64_t total, BatchRampup* r, char* err,
                       size_t errlen) {
    memset(r, 0, sizeof *r);
    r->total = total;
    if (!value || !value[0]) return 0;
    // Three whole numbers, separated by spaces or commas.
    int64_t v[3];
    const char* p = value;
    int n = 0;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t') p++;
        if (!*p) break;
        if (n == 3 || !isdigit((unsigned char)*p)) {
            snprintf(err, errlen, FLAG " '%.80s': expected three whole numbers START INCREMENT "
                     "TOKENS (e.g. '32768 32768 4000000000'), found %s", value,
                     n == 3 ? "more than three" : "a word that is not one");
            return -1;
        }
        char* end;
        errno = 0;
        const long long x = strtoll(p, &end, 10);
        if (errno == ERANGE || (*end && *end != ' ' && *end != ',' && *end != '\t')) {
            snprintf(err, errlen, FLAG " '%.80s': expected three whole numbers START INCREMENT "
                     "TOKENS (e.g. '32768 32768 4000000000'), found '%.*s'", value,
                     (int)strcspn(p, " ,\t"), p);
            return -1;
        }
        v[n++] = x;
        p = end;
    }
    if (n != 3) {
        snprintf(err, errlen, FLAG " '%.80s': expected three whole numbers START INCREMENT TOKENS "
                 "(e.g. '32768 32768 4000000000'), found %d number%s", value, n, n == 1 ? "" : "s");
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
                 "%lld, the batch it ramps up to", (long long)start, (long long)total);
        return -1;
    }
    if ((total - start) % increment != 0) {
        snprintf(err, errlen, FLAG ": INCREMENT %lld: expected a divisor of --total-batch-tokens "
                 "- START = %lld - %lld = %lld", (long long)increment, (long long)total,
                 (long long)start, (long long)(total - start));
        return -1;
    }
    const int64_t increments = (total - start) / increment;
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
    r->per_increment = tokens / increments;
    return 0;
}

int64_t batch_rampup_step_tokens(const BatchRampup* r, int64_t trained) {
    if (!batch_rampup_on(r)) return r->total;
    int64_t k = trained / r->per_increment;
    if (k > r->increments) k = r->increments;
    return r->start + k * r->increment;
}

int64_t batch_rampup_tokens_of_steps(const BatchRampup* r, int64_t trained, int64_t steps) {
    int64_t sum = 0;
    // One batch at a time: the steps at this batch until the next increment (at most
    // `increments` rounds), then the rest at the full batch.
    while (steps > 0) {
        const int64_t b = batch_rampup_step_tokens(r, trained);
        if (b == r->total) return sum + steps * b;
        const int64_t next = (trained / r->per_increment + 1) * r->per_increment;
        int64_t k = (next - trained + b - 1) / b;   // steps until trained reaches next
        if (k > steps) k = steps;
        sum += k * b;
        trained += k * b;
        steps -= k;
    }
    return sum;
}

int64_t batch_rampup_steps(const BatchRampup* r) {
    int64_t steps = 0, trained = 0;
    while (batch_rampup_step_tokens(r, trained) < r->total) {
        const int64_t b = batch_rampup_step_tokens(r, trained);
        const int64_t next = (trained / r->per_increment + 1) * r->per_increment;
        const int64_t k = (next - trained + b - 1) / b;
        steps += k;
        trained += k * b;
    }
    return steps;
}
