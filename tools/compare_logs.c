// compare_logs: two training runs' JSONL logs (train/run_log.c), step by step.
//
//   compare_logs REF.jsonl TEST.jsonl --loss-tol X --norm-tol Y [--min-entries N]
//
// Takes every "step" record's loss and grad_norm and every "eval" record's val_loss, in log order,
// from both files (after a resume, the last record of a step); the two must hold the same (kind, step) sequence, of at least N entries
// (default 1). Prints one "BAD ..." line per value whose relative difference |test - ref| / |ref|
// exceeds its bound (loss and val_loss: X; grad_norm: Y), then the largest relative difference of
// each kind. Exit status 0 when every value is within its bound, 1 when not, 2 on a usage or file
// error. Used by tools/trainer_checks.sh (the CUDA trainer against the CPU trainer, in `make test`
// and on a GPU).
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_LOSS, KIND_NORM, KIND_VAL, NUM_KINDS };
static const char* KIND_NAME[NUM_KINDS] = {"loss", "norm", "val"};

typedef struct {
    int kind, step;
    double value;
} Entry;

typedef struct {
    Entry* e;
    int n, cap;
} Series;

// Appends an entry. A resumed run's log repeats the steps after its checkpoint: the killed run's
// records, then the resumed run's. The last record of a step wins: an entry drops every earlier
// one that a straight run would have written after it (a later step, or a later kind of the
// same step: loss, norm, then the evaluation that follows the step).
static void push(Series* s, int kind, int step, double value) {
    while (s->n > 0 && (s->e[s->n - 1].step > step ||
                        (s->e[s->n - 1].step == step && s->e[s->n - 1].kind >= kind)))
        s->n--;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->e = realloc(s->e, sizeof(Entry) * (size_t)s->cap);
        if (!s->e) {
            fprintf(stderr, "compare_logs: out of memory\n");
            exit(2);
        }
    }
    s->e[s->n++] = (Entry){kind, step, value};
}

// The number after "key": in a JSON line; 0 if absent or not a number.
static int number_field(const char* line, const char* key, double* out) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char* p = strstr(line, pat);
    if (!p) return 0;
    p += strlen(pat);
    char* end;
    errno = 0;
    *out = strtod(p, &end);
    return end != p && errno == 0 && isfinite(*out) && (*end == ',' || *end == '}');
}

static int read_series(const char* path, Series* s) {
    FILE* f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "compare_logs: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[8192];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        const int is_step = strstr(line, "\"type\":\"step\"") != NULL;
        const int is_eval = strstr(line, "\"type\":\"eval\"") != NULL;
        if (!is_step && !is_eval) continue;
        double step, a, b;
        // A step is a whole number that fits an int (converting any other double is undefined).
        int ok = number_field(line, "step", &step) && step >= 0 && step <= INT_MAX &&
                 step == floor(step);
        if (is_step) {
            ok = ok && number_field(line, "loss", &a) && number_field(line, "grad_norm", &b);
            if (ok) push(s, KIND_LOSS, (int)step, a), push(s, KIND_NORM, (int)step, b);
        } else {
            ok = ok && number_field(line, "val_loss", &a);
            if (ok) push(s, KIND_VAL, (int)step, a);
        }
        if (!ok) {
            fprintf(stderr, "compare_logs: %s:%d: expected finite numbers for step (a whole "
                    "number in [0, %d]) and loss/grad_norm/val_loss, found: %.200s", path, lineno,
                    INT_MAX, line);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

static int parse_double(const char* flag, const char* text, double* out) {
    char* end;
    *out = strtod(text, &end);
    if (end == text || *end || !(*out >= 0)) {
        fprintf(stderr, "compare_logs: %s: expected a non-negative number, found '%s'\n", flag, text);
        return -1;
    }
    return 0;
}

// Compares two series: 0 when every value is within its bound, 1 when not (the BAD lines and the
// largest differences printed).
static int compare(const Series* ref, const Series* test, const double tol[NUM_KINDS],
                   double min_entries) {
    int same = ref->n == test->n && ref->n >= min_entries;
    for (int i = 0; same && i < ref->n; i++)
        same = ref->e[i].kind == test->e[i].kind && ref->e[i].step == test->e[i].step;
    if (!same) {
        printf("BAD the logs hold different steps: %d vs %d entries (at least %.0f expected)\n", ref->n, test->n,
               min_entries);
        return 1;
    }
    int bad = 0, worst_i[NUM_KINDS] = {-1, -1, -1};
    double worst[NUM_KINDS] = {-1, -1, -1};
    for (int i = 0; i < ref->n; i++) {
        const Entry *r = &ref->e[i], *t = &test->e[i];
        const double a = r->value, b = t->value;
        double rel = fabs(b - a) / (fabs(a) > 1e-30 ? fabs(a) : 1e-30);
        if (rel != rel) rel = INFINITY;   // NaN on either side
        if (rel > worst[r->kind]) worst[r->kind] = rel, worst_i[r->kind] = i;
        if (!(rel <= tol[r->kind])) {
            printf("BAD %s at step %d: %.9g vs %.9g, relative difference %.3g > %g\n", KIND_NAME[r->kind], r->step,
                   a, b, rel, tol[r->kind]);
            bad++;
        }
    }
    for (int k = 0; k < NUM_KINDS; k++) {
        if (worst_i[k] < 0) continue;
        const int i = worst_i[k];
        printf("max relative difference of %-4s %.3g (step %d: reference %.9g, test %.9g; bound %g)\n",
               KIND_NAME[k], worst[k], ref->e[i].step, ref->e[i].value, test->e[i].value, tol[k]);
    }
    return bad ? 1 : 0;
}

int main(int argc, char** argv) {
    const char *ref_path = NULL, *test_path = NULL;
    double tol[NUM_KINDS] = {-1, -1, -1};
    double min_entries = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--loss-tol") && i + 1 < argc) {
            if (parse_double(argv[i], argv[i + 1], &tol[KIND_LOSS])) return 2;
            tol[KIND_VAL] = tol[KIND_LOSS];
            i++;
        } else if (!strcmp(argv[i], "--norm-tol") && i + 1 < argc) {
            if (parse_double(argv[i], argv[i + 1], &tol[KIND_NORM])) return 2;
            i++;
        } else if (!strcmp(argv[i], "--min-entries") && i + 1 < argc) {
            if (parse_double(argv[i], argv[i + 1], &min_entries)) return 2;
            i++;
        } else if (argv[i][0] != '-' && !ref_path) {
            ref_path = argv[i];
        } else if (argv[i][0] != '-' && !test_path) {
            test_path = argv[i];
        } else {
            ref_path = NULL;
            break;
        }
    }
    if (!ref_path || !test_path || tol[KIND_LOSS] < 0 || tol[KIND_NORM] < 0) {
        fprintf(stderr, "usage: compare_logs REF.jsonl TEST.jsonl --loss-tol X --norm-tol Y [--min-entries N]\n");
        return 2;
    }
    Series ref = {0}, test = {0};
    const int rc = read_series(ref_path, &ref) || read_series(test_path, &test)
                       ? 2 : compare(&ref, &test, tol, min_entries);
    free(ref.e);
    free(test.e);
    return rc;
}

