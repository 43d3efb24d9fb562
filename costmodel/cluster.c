// The cluster file parser (format in cluster.h): a table of keys, each with its unit and range,
// and one-line errors that name the file, the line, the key, what was expected and what was found.
#include "costmodel/cluster.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

typedef enum { KEY_STRING, KEY_INT, KEY_NUMBER, KEY_CURVE } KeyType;

typedef struct {
    const char* key;
    KeyType type;
    size_t offset;       // into Cluster
    double scale;        // file unit -> SI (TFLOP/s -> FLOP/s, GB/s -> B/s, us -> s)
    double min, max;     // inclusive range in the file's unit
} KeySpec;

#define OFF(field) offsetof(Cluster, field)
#define LINK(tier, field) (offsetof(Cluster, link) + (tier) * sizeof(Link) + offsetof(Link, field))
static const KeySpec KEYS[] = {
    {"name", KEY_STRING, OFF(name), 1, 0, 0},
    {"node.gpus", KEY_INT, OFF(gpus_per_node), 1, 1, 1 << 20},
    {"node.shared_cores", KEY_INT, OFF(shared_cores), 1, 0, 1 << 20},
    {"node.shared_efficiency", KEY_CURVE, OFF(shared_eff), 1, 0, 0},
    {"node.async_comm", KEY_INT, OFF(async_comm), 1, 0, 1},
    {"device.memory_gib", KEY_NUMBER, OFF(memory_bytes), 1073741824.0, 1e-3, 1e9},
    {"matmul.peak_tflops", KEY_NUMBER, OFF(matmul_flops), 1e12, 1e-6, 1e9},
    {"matmul.efficiency", KEY_CURVE, OFF(matmul_eff), 1, 0, 0},
    {"attention.forward_efficiency", KEY_CURVE, OFF(attention_fwd_eff), 1, 0, 0},
    {"attention.backward_efficiency", KEY_CURVE, OFF(attention_bwd_eff), 1, 0, 0},
    {"vector.peak_tflops", KEY_NUMBER, OFF(vector_flops), 1e12, 1e-6, 1e9},
    {"vector.efficiency", KEY_CURVE, OFF(vector_eff), 1, 0, 0},
    {"memory.bandwidth_gbs", KEY_NUMBER, OFF(memory_bw), 1e9, 1e-3, 1e9},
    {"memory.efficiency", KEY_CURVE, OFF(memory_eff), 1, 0, 0},
    {"bytes.activation", KEY_NUMBER, OFF(act_bytes), 1, 1, 8},
    {"bytes.accumulator", KEY_NUMBER, OFF(acc_bytes), 1, 1, 8},
    {"bytes.param", KEY_NUMBER, OFF(param_bytes), 1, 1, 8},
    {"bytes.optimizer_state", KEY_NUMBER, OFF(state_bytes), 1, 0, 64},
    {"inter.nics_per_node", KEY_INT, OFF(nics_per_node), 1, 1, 1 << 20},
    {"intra.bandwidth_gbs", KEY_NUMBER, LINK(TIER_INTRA, bandwidth), 1e9, 1e-6, 1e9},
    {"intra.p2p_bandwidth_gbs", KEY_NUMBER, LINK(TIER_INTRA, p2p_bandwidth), 1e9, 1e-6, 1e9},
    {"intra.efficiency", KEY_NUMBER, LINK(TIER_INTRA, efficiency), 1, 1e-3, 1},
    {"intra.call_latency_us", KEY_NUMBER, LINK(TIER_INTRA, call_latency), 1e-6, 0, 1e6},
    {"intra.hop_latency_us", KEY_NUMBER, LINK(TIER_INTRA, hop_latency), 1e-6, 0, 1e6},
    {"inter.bandwidth_gbs", KEY_NUMBER, LINK(TIER_INTER, bandwidth), 1e9, 1e-6, 1e9},
    {"inter.efficiency", KEY_NUMBER, LINK(TIER_INTER, efficiency), 1, 1e-3, 1},
    {"inter.call_latency_us", KEY_NUMBER, LINK(TIER_INTER, call_latency), 1e-6, 0, 1e6},
    {"inter.hop_latency_us", KEY_NUMBER, LINK(TIER_INTER, hop_latency), 1e-6, 0, 1e6},
};
enum { NKEYS = sizeof KEYS / sizeof KEYS[0] };

static const char* const FIT_NAMES[FIT_OPS] = {"all_gather", "reduce_scatter", "all_reduce",
                                               "send_recv"};

const char* fit_op_name(FitOp op) { return op >= 0 && op < FIT_OPS ? FIT_NAMES[op] : "?"; }

int fit_op_parse(const char* name) {
    for (int k = 0; k < FIT_OPS; k++)
        if (!strcmp(name, FIT_NAMES[k])) return k;
    return -1;
}

// Where a value came from, for messages.
typedef struct {
    const char* path;
    int line;
    const char* key;
    char* err;
    size_t errlen;
} Where;

static int bad_value(const Where* w, const char* expected, const char* found) {
    return set_err(w->err, w->errlen, "%s:%d: key '%s': expected %s, found '%s'", w->path,
                   w->line, w->key, expected, found);
}

static char* trim(char* s) {
    while (*s == ' ' || *s == '\t') s++;
    char* e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = 0;
    return s;
}

// A whole-string number in [min, max]; expected-text names the range.
static int parse_number(const Where* w, const char* text, double min, double max, double* out) {
    char* end;
    errno = 0;
    const double x = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(x) || x < min || x > max) {
        char expected[96];
        snprintf(expected, sizeof expected, "a number in [%g, %g]", min, max);
        return bad_value(w, expected, text);
    }
    *out = x;
    return 0;
}

static int parse_int(const Where* w, const char* text, double min, double max, int* out) {
    char* end;
    errno = 0;
    const long x = strtol(text, &end, 10);
    if (errno || end == text || *end || x < min || x > max) {
        char expected[96];
        snprintf(expected, sizeof expected, "an integer in [%.0f, %.0f]", min, max);
        return bad_value(w, expected, text);
    }
    *out = (int)x;
    return 0;
}

// "128:0.95 16:0.9 1:0.6 0:0.1": thresholds strictly decreasing down to 0, efficiencies in (0, 1].
static int parse_curve(const Where* w, const char* text, EfficiencyCurve* c) {
    static const char* expected =
        "'SIZE:EFFICIENCY' pairs, finite sizes strictly decreasing to 0, efficiencies in (0, 1]";
    char buf[512];
    if (strlen(text) >= sizeof buf)   // never parse a truncated curve
        return bad_value(w, "a curve of at most 511 characters", text);
    snprintf(buf, sizeof buf, "%s", text);
    c->n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, " \t", &save); tok;
         tok = strtok_r(NULL, " \t", &save)) {
        char* colon = strchr(tok, ':');
        if (!colon || c->n == CLUSTER_MAX_CURVE) return bad_value(w, expected, text);
        *colon = 0;
        char *e1, *e2;
        const double size = strtod(tok, &e1), eff = strtod(colon + 1, &e2);
        const int decreasing = c->n == 0 || size < c->threshold[c->n - 1];
        if (*e1 || *e2 || e1 == tok || e2 == colon + 1 || !(size >= 0) || !isfinite(size) ||
            !(eff > 0 && eff <= 1) || !decreasing)
            return bad_value(w, expected, text);
        c->threshold[c->n] = size;
        c->efficiency[c->n++] = eff;
    }
    if (c->n == 0 || c->threshold[c->n - 1] != 0) return bad_value(w, expected, text);
    return 0;
}

static int set_value(const Where* w, const KeySpec* k, const char* text, Cluster* c) {
    char* field = (char*)c + k->offset;
    switch (k->type) {
    case KEY_STRING:
        if (!*text || strlen(text) >= CLUSTER_NAME_LEN)
            return bad_value(w, "a name of 1 to 63 characters", text);
        snprintf(field, CLUSTER_NAME_LEN, "%s", text);
        return 0;
    case KEY_INT: return parse_int(w, text, k->min, k->max, (int*)field);
    case KEY_CURVE: return parse_curve(w, text, (EfficiencyCurve*)field);
    default: {
        double x = 0;
        if (parse_number(w, text, k->min, k->max, &x) != 0) return -1;
        *(double*)field = x * k->scale;
        return 0;
    }
    }
}

// fit.OP.pN = ALPHA BETA
static int parse_fit(const Where* w, const char* key, const char* text, Cluster* c) {
    char op[32];
    int P, used = 0;
    if (sscanf(key, "fit.%31[a-z_].p%d%n", op, &P, &used) != 2 || key[used] || P < 2)
        return set_err(w->err, w->errlen,
                       "%s:%d: key '%s': expected a key 'fit.OP.pN' with N >= 2, found '%s'",
                       w->path, w->line, key, key);
    int which = -1;
    for (int k = 0; k < FIT_OPS; k++)
        if (!strcmp(op, FIT_NAMES[k])) which = k;
    if (which < 0)
        return set_err(w->err, w->errlen,
                       "%s:%d: key '%s': expected OP one of all_gather, reduce_scatter, "
                       "all_reduce, send_recv, found '%s'", w->path, w->line, key, op);
    double alpha, beta;
    char extra;
    if (sscanf(text, "%lf %lf %c", &alpha, &beta, &extra) != 2 || !(alpha >= 0) || !(beta > 0) ||
        !isfinite(alpha) || !isfinite(beta))
        return bad_value(w, "'ALPHA_S BETA_S_PER_BYTE' (alpha >= 0, beta > 0)", text);
    for (int k = 0; k < c->nfits; k++)
        if (c->fit[k].op == (FitOp)which && c->fit[k].P == P)
            return bad_value(w, "one fit per op and P", key);
    if (c->nfits == CLUSTER_MAX_FITS) return bad_value(w, "at most 64 fits", key);
    c->fit[c->nfits++] = (CollectiveFit){(FitOp)which, P, alpha, beta};
    return 0;
}

static const char* const KERNEL_NAMES[CK_COUNT] = {
    "encoder_forward", "layernorm_forward", "fused_residual_layernorm_forward", "residual_forward",
    "classifier", "gelu_backward", "layernorm_backward", "encoder_backward", "attention_merge",
    "attention_row_dot", "global_norm", "adamw"};

const char* cluster_kernel_name(ClusterKernel k) {
    return k >= 0 && k < CK_COUNT ? KERNEL_NAMES[k] : NULL;
}

int cluster_kernel_parse(const char* name) {
    for (int k = 0; k < CK_COUNT; k++)
        if (!strcmp(name, KERNEL_NAMES[k])) return k;
    return -1;
}

void cluster_attention_curves(const Cluster* c, int hs, const EfficiencyCurve** forward,
                              const EfficiencyCurve** backward) {
    *forward = &c->attention_fwd_eff, *backward = &c->attention_bwd_eff;
    double best = INFINITY;
    for (int k = 0; k < c->n_head_sizes; k++) {
        const HeadSizeCurves* h = &c->head_size[k];
        const double ratio = fabs(log((double)h->head_size / hs));
        if (ratio < best - 1e-12 || (ratio < best + 1e-12 && h->head_size < hs)) {
            best = ratio;
            *forward = &h->forward, *backward = &h->backward;
        }
    }
}

// A line seen twice is refused; seen[] holds the first line of each.
static int once(const Where* w, int* first) {
    if (*first) {
        char found[64];
        snprintf(found, sizeof found, "a second line (the first is line %d)", *first);
        return bad_value(w, "the key once", found);
    }
    *first = w->line;
    return 0;
}

// The optional keys of a calibrated GPU cluster (cluster.h). Returns 1 when `key` is not one of
// them, else 0 or -1 (bad value, with err set).
static int parse_measured(const Where* w, const char* key, const char* text, Cluster* c,
                          int* seen_kernel, int* seen_head_size) {
    if (!strcmp(key, "step.fixed_ms")) {   // seen_kernel[CK_COUNT]: this key's line
        double ms;
        if (once(w, &seen_kernel[CK_COUNT]) != 0 || parse_number(w, text, 0, 1e6, &ms) != 0)
            return -1;
        c->step_fixed_s = ms * 1e-3;
        return 0;
    }
    char name[64], phase[16];
    int hs, used = 0;
    if (sscanf(key, "kernel.%63[a-z_].efficiency%n", name, &used) == 1 && !key[used]) {
        const int k = cluster_kernel_parse(name);
        if (k < 0)
            return set_err(w->err, w->errlen, "%s:%d: key '%s': expected a kernel of "
                           "cluster_kernel_name (encoder_forward, ..., adamw), found '%s'",
                           w->path, w->line, key, name);
        if (once(w, &seen_kernel[k]) != 0) return -1;
        return parse_curve(w, text, &c->kernel_eff[k]);
    }
    used = 0;
    if (sscanf(key, "attention.hs%d.%15[a-z]_efficiency%n", &hs, phase, &used) == 2 && !key[used]) {
        const int backward = !strcmp(phase, "backward");
        if ((!backward && strcmp(phase, "forward")) || hs < 1 || hs > 1024)
            return set_err(w->err, w->errlen, "%s:%d: key '%s': expected "
                           "'attention.hsN.forward_efficiency' or '..._backward_efficiency' with "
                           "N in [1, 1024], found '%s'", w->path, w->line, key, key);
        int k = 0;
        while (k < c->n_head_sizes && c->head_size[k].head_size != hs) k++;
        if (k == c->n_head_sizes) {
            if (k == CLUSTER_MAX_HEAD_SIZES) return bad_value(w, "at most 8 head sizes", key);
            c->head_size[c->n_head_sizes++].head_size = hs;
        }
        if (once(w, &seen_head_size[2 * k + backward]) != 0) return -1;
        HeadSizeCurves* h = &c->head_size[k];
        return parse_curve(w, text, backward ? &h->backward : &h->forward);
    }
    return 1;
}

// attention.tiles = ROWSxKEYS ROWSxKEYS (forward, backward), each from 1 to 4096.
static int parse_tiles(const Where* w, const char* text, Cluster* c) {
    AttentionTile t[2];
    int used = 0;
    if (sscanf(text, "%dx%d %dx%d%n", &t[0].rows, &t[0].keys, &t[1].rows, &t[1].keys, &used) != 4 ||
        text[used])
        return bad_value(w, "'ROWSxKEYS ROWSxKEYS' (forward, backward tiles)", text);
    for (int k = 0; k < 2; k++)
        if (t[k].rows < 1 || t[k].rows > 4096 || t[k].keys < 1 || t[k].keys > 4096)
            return bad_value(w, "tile rows and keys from 1 to 4096", text);
    c->attention_tile[0] = t[0], c->attention_tile[1] = t[1];
    return 0;
}

// attention.masked_cost = F B (forward, backward), each in [0, 1].
static int parse_masked_cost(const Where* w, const char* text, Cluster* c) {
    double f, b;
    int used = 0;
    if (sscanf(text, "%lf %lf%n", &f, &b, &used) != 2 || text[used] || !(f >= 0 && f <= 1) ||
        !(b >= 0 && b <= 1))
        return bad_value(w, "'F B' (forward, backward), each in [0, 1]", text);
    c->attention_masked_cost[0] = f, c->attention_masked_cost[1] = b;
    return 0;
}

static const KeySpec* find_key(const char* key) {
    for (int k = 0; k < NKEYS; k++)
        if (!strcmp(KEYS[k].key, key)) return &KEYS[k];
    return NULL;
}

// The line each key was first seen on (0: not yet).
typedef struct {
    int key[NKEYS];
    int kernel[CK_COUNT + 1];
    int head_size[2 * CLUSTER_MAX_HEAD_SIZES];
    int tiles, masked_cost;
} Seen;

// One non-blank line: `key = value  # source`.
static int parse_line(const Where* at, char* line, Cluster* c, Seen* seen) {
    char* hash = strchr(line, '#');
    const int has_source = hash && *trim(hash + 1);
    if (hash) *hash = 0;
    char* eq = strchr(line, '=');
    Where w = *at;
    if (!eq) {
        w.key = trim(line);
        return bad_value(&w, "'key = value  # source'", w.key);
    }
    *eq = 0;
    char *key = trim(line), *value = trim(eq + 1);
    w.key = key;
    if (!*value) return bad_value(&w, "a value after '='", "");
    if (!has_source && strcmp(key, "name") != 0)
        return bad_value(&w, "a '# source' comment after the value", value);
    if (!strncmp(key, "fit.", 4)) return parse_fit(&w, key, value, c);
    if (!strcmp(key, "attention.tiles"))
        return once(&w, &seen->tiles) != 0 ? -1 : parse_tiles(&w, value, c);
    if (!strcmp(key, "attention.masked_cost"))
        return once(&w, &seen->masked_cost) != 0 ? -1 : parse_masked_cost(&w, value, c);
    const int measured = parse_measured(&w, key, value, c, seen->kernel, seen->head_size);
    if (measured <= 0) return measured;
    const KeySpec* k = find_key(key);
    if (!k)
        return set_err(at->err, at->errlen,
                       "%s:%d: key '%s': expected a known key (see costmodel/README.md), found "
                       "an unknown key", at->path, at->line, key);
    if (once(&w, &seen->key[k - KEYS]) != 0) return -1;
    return set_value(&w, k, value, c);
}

int cluster_parse(const char* path, const char* text, Cluster* c, char* err, size_t errlen) {
    memset(c, 0, sizeof *c);
    c->attention_tile[0] = c->attention_tile[1] = (AttentionTile){1, 1};
    c->attention_masked_cost[0] = c->attention_masked_cost[1] = 1;
    Seen seen;
    memset(&seen, 0, sizeof seen);
    Where at = {path, 0, "", err, errlen};
    for (const char* p = text; *p;) {
        const char* nl = strchr(p, '\n');
        const size_t len = nl ? (size_t)(nl - p) : strlen(p);
        at.line++;
        char line[1024];
        if (len >= sizeof line)
            return set_err(err, errlen, "%s:%d: expected a line of at most %zu characters, "
                           "found %zu", path, at.line, sizeof line - 1, len);
        memcpy(line, p, len);
        line[len] = 0;
        const char* t = trim(line);
        if (*t && *t != '#' && parse_line(&at, line, c, &seen) != 0) return -1;
        p += len + (nl ? 1 : 0);
    }
    for (int k = 0; k < NKEYS; k++)
        if (!seen.key[k])
            return set_err(err, errlen, "%s: key '%s': expected a line '%s = ...', found none",
                           path, KEYS[k].key, KEYS[k].key);
    for (int k = 0; k < c->n_head_sizes; k++)
        for (int backward = 0; backward < 2; backward++)
            if (!seen.head_size[2 * k + backward])
                return set_err(err, errlen, "%s: key 'attention.hs%d.%s_efficiency': expected a "
                               "line for it (head size %d has the other phase's), found none",
                               path, c->head_size[k].head_size, backward ? "backward" : "forward",
                               c->head_size[k].head_size);
    return 0;
}

int cluster_load(const char* path, Cluster* c, char* err, size_t errlen) {
    FILE* f = fopen(path, "rb");
    if (!f) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    char* text = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            char* grown = realloc(text, cap);
            CHECK(grown, "out of memory", "reading %s (%zu bytes)", path, cap);
            text = grown;
        }
        const size_t got = fread(text + n, 1, 4096, f);
        n += got;
        if (got < 4096) break;
    }
    if (ferror(f)) rc = set_err(err, errlen, "%s: read failed: %s", path, strerror(errno));
    fclose(f);
    if (rc == 0) {
        text[n] = 0;
        if (strlen(text) != n) rc = set_err(err, errlen, "%s: expected text, found a NUL byte", path);
        else rc = cluster_parse(path, text, c, err, errlen);
    }
    free(text);
    return rc;
}

void cluster_format_curve(const EfficiencyCurve* c, char* out, size_t len) {
    size_t used = 0;
    out[0] = 0;
    for (int k = 0; k < c->n && used < len; k++)
        used += (size_t)snprintf(out + used, len - used, "%s%.6g:%.4f", k ? " " : "",
                                 c->threshold[k], c->efficiency[k]);
}

double curve_efficiency(const EfficiencyCurve* curve, double size) {
    for (int k = 0; k < curve->n; k++)
        if (size >= curve->threshold[k]) return curve->efficiency[k];
    return curve->n ? curve->efficiency[curve->n - 1] : 1.0;
}

int cluster_read_fits(const char* path, Cluster* c, char* err, size_t errlen) {
    FILE* f = fopen(path, "r");
    if (!f) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    char line[1024];
    int lineno = 0, rc = 0, before = c->nfits;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;   // the error below quotes the line: one line
        if (!strstr(line, "\"type\":\"fit\"")) continue;
        const char *op = strstr(line, "\"op\":\""), *P = strstr(line, "\"P\":"),
                   *al = strstr(line, "\"alpha_s\":"), *be = strstr(line, "\"beta_s_per_byte\":");
        char name[32];
        int ranks;
        double alpha, beta;
        if (!op || !P || !al || !be || sscanf(op + 6, "%31[a-z_]", name) != 1 ||
            sscanf(P + 4, "%d", &ranks) != 1 || sscanf(al + 10, "%lf", &alpha) != 1 ||
            sscanf(be + 18, "%lf", &beta) != 1) {
            rc = set_err(err, errlen, "%s:%d: expected a fit record with op, P, alpha_s, "
                         "beta_s_per_byte, found '%.80s'", path, lineno, line);
            break;
        }
        if (ranks < 2 || !(beta > 0) || !isfinite(beta) || !isfinite(alpha))
            continue;   // nothing moved, or no fit
        const int op_index = fit_op_parse(name);
        if (op_index < 0 || c->nfits == CLUSTER_MAX_FITS) continue;
        c->fit[c->nfits++] = (CollectiveFit){(FitOp)op_index, ranks, alpha > 0 ? alpha : 0, beta};
    }
    if (rc == 0 && ferror(f)) rc = set_err(err, errlen, "%s: read failed: %s", path, strerror(errno));
    fclose(f);
    if (rc == 0 && c->nfits == before)
        rc = set_err(err, errlen, "%s: expected fit records for P >= 2 with a positive beta, "
                     "found none", path);
    return rc;
}

const CollectiveFit* cluster_fit(const Cluster* c, FitOp op, int P) {
    const CollectiveFit *above = NULL, *below = NULL;
    for (int k = 0; k < c->nfits; k++) {
        const CollectiveFit* f = &c->fit[k];
        if (f->op != op) continue;
        if (f->P >= P && (!above || f->P < above->P)) above = f;
        if (f->P < P && (!below || f->P > below->P)) below = f;
    }
    return above ? above : below;
}
