// The GPU kit report reader (gpu_report.h). The kit writes one flat JSON object per line (the
// device record's "peak" and a throughput record's "summary" are nested one level; their keys
// are unique on the line), so a key is found by its quoted name.
#include "costmodel/gpu_report.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "comm/fail.h"

// The value of "key" on the line (after the colon and spaces), or NULL.
static const char* value_of(const char* line, const char* key) {
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    for (const char* p = strstr(line, pat); p; p = strstr(p + 1, pat)) {
        const char* v = p + strlen(pat);
        while (*v == ' ') v++;
        if (*v != ':') continue;
        v++;
        while (*v == ' ') v++;
        return v;
    }
    return NULL;
}

static int number(const ReadWhere* w, const char* line, const char* key, double* out) {
    const char* v = value_of(line, key);
    char* end = NULL;
    errno = 0;
    if (v) *out = strtod(v, &end);
    if (!v || end == v || errno || !isfinite(*out) || (*end != ',' && *end != '}' && *end != ' '))
        return set_err(w->err, w->errlen, "%s:%d: expected a finite number for \"%s\", found %s",
                       w->path, w->line, key, v ? "something else" : "no such key");
    return 0;
}

// A count (head size, T, B, heads, ranks): a whole number in [1, INT_MAX].
static int count(const ReadWhere* w, const char* line, const char* key, int* out) {
    double x;
    if (number(w, line, key, &x) != 0) return -1;
    if (!(x >= 1 && x <= INT_MAX && x == floor(x)))
        return set_err(w->err, w->errlen, "%s:%d: expected a whole number in [1, %d] for \"%s\", "
                       "found %g", w->path, w->line, INT_MAX, key, x);
    *out = (int)x;
    return 0;
}

static int text(const ReadWhere* w, const char* line, const char* key, char* out, size_t len) {
    const char* v = value_of(line, key);
    const char* close = v && *v == '"' ? strchr(v + 1, '"') : NULL;
    if (!close || (size_t)(close - v - 1) >= len || memchr(v + 1, '\\', (size_t)(close - v - 1)))
        return set_err(w->err, w->errlen, "%s:%d: expected a string of at most %zu characters "
                       "(no escapes) for \"%s\", found %s", w->path, w->line, len - 1, key,
                       v ? "something else" : "no such key");
    memcpy(out, v + 1, (size_t)(close - v - 1));
    out[close - v - 1] = 0;
    return 0;
}

// The whole number a "B=" or "T=" starts, in [1, max].
static int whole(const char* s, long max, long* out) {
    char* end;
    errno = 0;
    const long x = strtol(s, &end, 10);
    if (errno || end == s || x < 1 || x > max) return -1;
    *out = x;
    return 0;
}

int gpu_report_parse_shape(const char* s, char* preset, size_t len, int* B, long* T) {
    char name[64];
    int used = 0;
    if (sscanf(s, "%63s%n", name, &used) != 1 || strlen(name) >= len) return -1;
    snprintf(preset, len, "%s", name);
    const char* b = strstr(s + used, "B=");
    const char* t = strstr(s + used, "T=");
    long batch = 1;
    if ((b && whole(b + 2, INT_MAX, &batch) != 0) || !t || whole(t + 2, LONG_MAX, T) != 0) return -1;
    if (B) *B = (int)batch;
    return 0;
}

// Grows an array of `size`-byte rows by one; returns the new row (zeroed).
static void* push(void** rows, int* n, size_t size) {
    char* grown = realloc(*rows, (size_t)(*n + 1) * size);
    CHECK(grown, "out of memory", "reading a GPU report (%d rows)", *n + 1);
    *rows = grown;
    memset(grown + (size_t)*n * size, 0, size);
    return grown + (size_t)(*n)++ * size;
}

static int read_kernel(const ReadWhere* w, const char* line, GpuReport* r) {
    GpuKernelRow* k = push((void**)&r->kernels, &r->nkernels, sizeof *k);
    return text(w, line, "shape", k->shape, sizeof k->shape) ||
                   text(w, line, "kernel", k->kernel, sizeof k->kernel) ||
                   number(w, line, "ms", &k->ms) || number(w, line, "gflop", &k->gflop) ||
                   number(w, line, "mbytes", &k->mbytes)
               ? -1
               : 0;
}

static int read_attention(const ReadWhere* w, const char* line, GpuReport* r) {
    GpuAttentionRow* a = push((void**)&r->attention, &r->nattention, sizeof *a);
    return count(w, line, "hs", &a->hs) || count(w, line, "T", &a->T) ||
                   count(w, line, "B", &a->B) || count(w, line, "NH", &a->NH) ||
                   number(w, line, "ours_fwd_ms", &a->ours_fwd_ms) ||
                   number(w, line, "ours_bwd_ms", &a->ours_bwd_ms) ||
                   number(w, line, "sdpa_fwd_ms", &a->sdpa_fwd_ms) ||
                   number(w, line, "sdpa_bwd_ms", &a->sdpa_bwd_ms) ||
                   number(w, line, "ours_fwd_tflops", &a->ours_fwd_tflops) ||
                   number(w, line, "ours_bwd_tflops", &a->ours_bwd_tflops)
               ? -1
               : 0;
}

static int read_throughput(const ReadWhere* w, const char* line, GpuReport* r, const char* file) {
    GpuThroughputRow t = {0};
    if (text(w, line, "run", t.run, sizeof t.run) ||
        number(w, line, "ms_per_step", &t.ms_per_step) ||
        number(w, line, "forward_ms", &t.forward_ms) ||
        number(w, line, "backward_ms", &t.backward_ms) ||
        number(w, line, "optimizer_ms", &t.optimizer_ms))
        return -1;
    if (gpu_report_parse_shape(t.run, t.preset, sizeof t.preset, &t.B, &t.T) != 0)
        return set_err(w->err, w->errlen, "%s:%d: run: expected 'PRESET B=N T=N, ...', found '%s'",
                       w->path, w->line, t.run);
    for (int k = 0; k < r->nthroughput; k++)   // the same run in two files: the first one's
        if (!strcmp(r->throughput[k].preset, t.preset) && r->throughput[k].B == t.B &&
            r->throughput[k].T == t.T)
            return 0;
    snprintf(t.file, sizeof t.file, "%s", file);
    *(GpuThroughputRow*)push((void**)&r->throughput, &r->nthroughput, sizeof t) = t;
    return 0;
}

static int read_fit(const ReadWhere* w, const char* line, GpuReport* r) {
    GpuFitRow* f = push((void**)&r->fits, &r->nfits, sizeof *f);
    return text(w, line, "op", f->op, sizeof f->op) ||
                   text(w, line, "transport", f->transport, sizeof f->transport) ||
                   count(w, line, "P", &f->P) || number(w, line, "alpha_s", &f->alpha_s) ||
                   number(w, line, "beta_s_per_byte", &f->beta_s_per_byte)
               ? -1
               : 0;
}

static int read_device(const ReadWhere* w, const char* line, GpuReport* r) {
    if (r->gpu[0]) return 0;   // the first device record (the GPU the kit ran on)
    return text(w, line, "name", r->gpu, sizeof r->gpu) ||
                   number(w, line, "bf16_tflops", &r->bf16_tflops) ||
                   number(w, line, "hbm_gbps", &r->hbm_gbps)
               ? -1
               : 0;
}

static int read_file(const char* path, GpuReport* r, char* err, size_t errlen) {
    FILE* f = fopen(path, "r");
    if (!f) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    const char* base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    ReadWhere w = {path, 0, err, errlen};
    char line[8192];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        w.line++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = set_err(err, errlen, "%s:%d: expected a line of at most %zu characters", path,
                         w.line, sizeof line - 2);
            break;
        }
        char type[64];
        if (line[strspn(line, " \t\r\n")] == 0) continue;
        if (text(&w, line, "type", type, sizeof type) != 0) rc = -1;
        else if (!strcmp(type, "device")) rc = read_device(&w, line, r);
        else if (!strcmp(type, "kernel")) rc = read_kernel(&w, line, r);
        else if (!strcmp(type, "attention_vs_sdpa")) rc = read_attention(&w, line, r);
        else if (!strcmp(type, "throughput")) rc = read_throughput(&w, line, r, base);
        else if (!strcmp(type, "fit")) rc = read_fit(&w, line, r);
    }
    if (rc == 0 && ferror(f)) rc = set_err(err, errlen, "%s: read failed: %s", path, strerror(errno));
    fclose(f);
    return rc;
}

int gpu_report_read(const char* path, GpuReport* r, char* err, size_t errlen) {
    memset(r, 0, sizeof *r);
    struct stat st;
    if (stat(path, &st) != 0) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    int rc = 0;
    if (S_ISDIR(st.st_mode)) {
        char pattern[4096];
        snprintf(pattern, sizeof pattern, "%s/*.jsonl", path);
        glob_t g;
        if (glob(pattern, 0, NULL, &g) != 0)
            return set_err(err, errlen, "%s: expected a GPU kit report folder holding .jsonl "
                           "files (gpu_report.jsonl), found none", path);
        for (size_t k = 0; k < g.gl_pathc && rc == 0; k++)
            rc = read_file(g.gl_pathv[k], r, err, errlen);
        globfree(&g);
    } else {
        rc = read_file(path, r, err, errlen);
    }
    if (rc == 0 && !r->gpu[0])
        rc = set_err(err, errlen, "%s: expected a device record (a GPU kit report), found none", path);
    if (rc != 0) gpu_report_free(r);
    return rc;
}

void gpu_report_free(GpuReport* r) {
    free(r->kernels);
    free(r->attention);
    free(r->throughput);
    free(r->fits);
    r->kernels = NULL, r->attention = NULL, r->throughput = NULL, r->fits = NULL;
    r->nkernels = r->nattention = r->nthroughput = r->nfits = 0;
}
