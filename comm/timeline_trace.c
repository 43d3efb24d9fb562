// The Chrome trace of a timeline: each rank writes its spans as one part file (JSON lines, written
// atomically), and rank 0 merges the parts into one trace-event document.
#include "comm/timeline.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/atomic_file.h"
#include "comm/fail.h"
#include "comm/timeline_internal.h"

// The part writer hands its buffer to the file once it holds this much.
#define FLUSH_BYTES (1 << 16)
// The first line of a part; the merge reads it back with the same format.
#define PART_HEADER "{\"timeline_part\":1,\"rank\":%d,\"world_size\":%d,\"events\":%ld,\"summary\":"

// ---------------------------------------------------------------------------------------------
// Writing: a growing text buffer, JSON strings, the part file.

typedef struct {
    char* data;
    size_t len, cap;
} Text;

static void text_reserve(Text* t, size_t more) {
    if (t->len + more + 1 <= t->cap) return;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + more + 1) cap *= 2;
    t->data = timeline_grow(t->data, cap, 1, "trace text");
    t->cap = cap;
}

static void __attribute__((format(printf, 2, 3))) text_printf(Text* t, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    CHECK(n >= 0, "", "vsnprintf failed for \"%s\"", fmt);
    text_reserve(t, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(t->data + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static void text_put(Text* t, const char* s, size_t n) {
    text_reserve(t, n);
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = 0;
}

// Length of the well-formed UTF-8 sequence at p (1..4; no overlong forms, surrogates or code
// points above U+10FFFF, which strict JSON readers refuse), or 0.
static size_t utf8_len(const unsigned char* p) {
    const unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;   // bounds of the second byte
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) { len = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
    else return 0;
    if (p[1] < lo || p[1] > hi) return 0;   // also stops at the terminating 0
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    return len;
}

// s as a quoted JSON string: quotes, backslashes and control bytes escaped; bytes that are not
// UTF-8 become \u00XX (so any label gives valid JSON). NULL is "".
static void text_json_string(Text* t, const char* s) {
    text_put(t, "\"", 1);
    const unsigned char* p = (const unsigned char*)(s ? s : "");
    while (*p) {
        const size_t len = utf8_len(p);
        if (*p == '"' || *p == '\\') {
            const char esc[2] = {'\\', (char)*p};
            text_put(t, esc, 2);
        } else if (*p == '\n') {
            text_put(t, "\\n", 2);
        } else if (*p < 0x20 || len == 0) {
            text_printf(t, "\\u%04x", *p);
        } else {
            text_put(t, (const char*)p, len);
            p += len;
            continue;
        }
        p++;
    }
    text_put(t, "\"", 1);
}

// ns as microseconds with three exact decimals.
static void text_us(Text* t, long long ns) {
    const char* sign = ns < 0 ? "-" : "";
    const unsigned long long a = ns < 0 ? 0ull - (unsigned long long)ns : (unsigned long long)ns;
    text_printf(t, "%s%llu.%03llu", sign, a / 1000, a % 1000);
}

// A JSON number, or 0 for what JSON cannot hold (a clock that returned NaN).
static void text_number(Text* t, double x) { text_printf(t, "%.9g", isfinite(x) ? x : 0.0); }

// "12.3 KB": decimal units, as people read transfer sizes.
static void human_bytes(long long bytes, char* out, size_t n) {
    const double b = (double)bytes;
    if (bytes < 1000) snprintf(out, n, "%lld B", bytes);
    else if (b < 1e6) snprintf(out, n, "%.1f KB", b / 1e3);
    else if (b < 1e9) snprintf(out, n, "%.1f MB", b / 1e6);
    else snprintf(out, n, "%.1f GB", b / 1e9);
}

// Appends " word" (or "word" at the start) to out when word is non-empty.
static void add_word(char* out, size_t n, const char* word) {
    if (!word || !word[0]) return;
    const size_t len = strlen(out);
    snprintf(out + len, n - len, "%s%s", len ? " " : "", word);
}

// The name of an event without one: "all-gather row 12.3 KB", "layer 3 forward",
// "wait all-gather row".
static void derived_name(const Event* e, char* out, size_t n) {
    char num[48] = "";
    out[0] = 0;
    if (e->kind == TL_WAIT) add_word(out, n, "wait");
    if (e->kind != TL_COMPUTE) {
        add_word(out, n, e->comm_kind);
        add_word(out, n, e->group);
    }
    if (e->kind == TL_COMM_ISSUE || e->kind == TL_COMM_FLIGHT) {
        if (e->bytes > 0) human_bytes(e->bytes, num, sizeof num);
    } else if (e->layer >= 0) {
        snprintf(num, sizeof num, "layer %d", e->layer);
    }
    add_word(out, n, num);
    if (e->kind == TL_COMPUTE) add_word(out, n, e->phase);
    if (!out[0]) snprintf(out, n, "%s", timeline_kind_name(e->kind));
}

static void text_event(Text* t, const Timeline* tl, const Event* e) {
    char name[512];
    if (!e->name) derived_name(e, name, sizeof name);
    text_printf(t, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", tl->rank, e->track);
    text_us(t, e->ts_ns);
    text_put(t, ",\"dur\":", 7);
    text_us(t, e->dur_ns);
    text_put(t, ",\"name\":", 8);
    text_json_string(t, e->name ? e->name : name);
    text_printf(t, ",\"cat\":\"%s\",\"args\":{\"kind\":\"%s\",\"comm\":", timeline_kind_name(e->kind),
                timeline_kind_name(e->kind));
    text_json_string(t, e->comm_kind);
    text_put(t, ",\"group\":", 9);
    text_json_string(t, e->group);
    text_printf(t, ",\"bytes\":%lld,\"layer\":%d,\"phase\":", e->bytes, e->layer);
    text_json_string(t, e->phase);
    text_printf(t, ",\"step\":%d}}\n", e->step);
}

// The header line: the event count and this rank's totals (the merge puts them in otherData).
static void text_header(Text* t, const Timeline* tl, long lines) {
    const TimelineStep s = timeline_totals(tl);
    text_printf(t, PART_HEADER, tl->rank, tl->world_size, lines);
    text_printf(t, "{\"rank\":%d,\"steps\":%d,\"step_s\":", tl->rank, s.steps);
    text_number(t, s.step_s);
    text_put(t, ",\"compute_frac\":", 16);
    text_number(t, s.compute_frac);
    text_put(t, ",\"exposed_comm_frac\":", 21);
    text_number(t, s.exposed_comm_frac);
    text_put(t, ",\"wait_frac\":", 13);
    text_number(t, s.wait_frac);
    text_printf(t, ",\"comm_bytes\":%lld,\"dropped_marks\":%lld,\"dropped_events\":%ld}}\n",
                s.comm_bytes, tl->sum_dropped_marks, tl->dropped_events);
}

// Names of the rank's process and of its threads (one per track), sorted by rank and track id.
static void text_metadata(Text* t, const Timeline* tl) {
    const int r = tl->rank;
    text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\","
                   "\"args\":{\"name\":\"rank %d\"}}\n", r, r);
    text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\","
                   "\"args\":{\"sort_index\":%d}}\n", r, r);
    for (int i = 0; i < tl->ntracks; i++) {
        text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":",
                    r, i);
        text_json_string(t, tl->tracks[i].name);
        text_put(t, "}}\n", 3);
        text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\","
                       "\"args\":{\"sort_index\":%d}}\n", r, i, i);
    }
}

// Hands the buffer to the file once it is large (or always, with force); -1 on a write error.
static int flush_text(AtomicFile* af, Text* t, int force, char* err, size_t errlen) {
    if (!force && t->len < FLUSH_BYTES) return 0;
    if (atomic_write(af, t->data, t->len, err, errlen) != 0) return -1;
    t->len = 0;
    return 0;
}

static void part_path(char* out, size_t n, const char* trace_path, int rank) {
    snprintf(out, n, "%s.rank%d", trace_path, rank);
}

int timeline_write_part(const Timeline* tl, const char* trace_path, char* err, size_t errlen) {
    if (!tl) return 0;
    char path[4096];
    part_path(path, sizeof path, trace_path, tl->rank);
    if (strlen(trace_path) + 16 >= sizeof path)
        return set_err(err, errlen, "%s: trace path too long", trace_path);
    AtomicFile af;
    if (atomic_open(&af, path, err, errlen) != 0) return -1;
    Text t = {0};
    text_header(&t, tl, 2 + 2l * tl->ntracks + tl->nevents);
    text_metadata(&t, tl);
    int rc = 0;
    for (long i = 0; i < tl->nevents && rc == 0; i++) {
        text_event(&t, tl, &tl->events[i]);
        rc = flush_text(&af, &t, 0, err, errlen);
    }
    if (rc == 0) rc = flush_text(&af, &t, 1, err, errlen);   // atomic_write aborts on failure
    free(t.data);
    if (rc != 0) return -1;
    return atomic_commit(&af, err, errlen);
}

// ---------------------------------------------------------------------------------------------
// Merging the parts.

// One line of f without its newline, in *line (getline's buffer); 1, 0 at the end, -1 on a read
// error (message in err).
static int read_line(FILE* f, char** line, size_t* cap, size_t* len, const char* path, char* err,
                     size_t errlen) {
    errno = 0;
    const ssize_t n = getline(line, cap, f);
    if (n < 0) {
        if (ferror(f)) return set_err(err, errlen, "%s: read failed: %s", path, strerror(errno));
        return 0;
    }
    *len = (size_t)n;
    if (*len && (*line)[*len - 1] == '\n') (*line)[--*len] = 0;
    return 1;
}

// Whether a line holds one JSON object the way a part writes it: {...} with no NUL inside.
static int object_line(const char* line, size_t len) {
    return len >= 2 && line[0] == '{' && line[len - 1] == '}' && strlen(line) == len;
}

// The summary object of a part's header line (checked against rank and world size), copied.
static char* parse_header(const char* line, size_t len, int rank, int world_size, long* lines,
                          const char* path, char* err, size_t errlen) {
    int r = -1, w = -1, at = 0;
    long n = -1;
    if (!object_line(line, len) || sscanf(line, PART_HEADER "%n", &r, &w, &n, &at) != 3 || at == 0 ||
        n < 0 || len < (size_t)at + 2 || line[at] != '{' || line[len - 2] != '}') {
        set_err(err, errlen, "%s: line 1: malformed part (expected a timeline part header)", path);
        return NULL;
    }
    if (r != rank || w != world_size) {
        set_err(err, errlen, "%s: malformed part: written by rank %d of %d, expected rank %d of %d",
                path, r, w, rank, world_size);
        return NULL;
    }
    *lines = n;
    const size_t slen = len - 1 - (size_t)at;
    char* summary = xmalloc(slen + 1, "trace summary");
    memcpy(summary, line + at, slen);
    summary[slen] = 0;
    return summary;
}

typedef struct {
    AtomicFile af;
    Text text;
    long events;          // written so far (a comma goes before every event but the first)
    char** summaries;     // per rank
} Merge;

// Copies the event lines of one part into the merge; returns its summary, or NULL with err set.
static char* merge_part(Merge* m, const char* path, int rank, int world_size, char* err,
                        size_t errlen) {
    FILE* f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            set_err(err, errlen, "%s: missing part of rank %d (hint: every rank writes its part with "
                    "timeline_write_part before rank 0 merges)", path, rank);
        else
            set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char* line = NULL;
    size_t cap = 0, len = 0;
    long lines = 0, seen = 0, lineno = 1;
    char* summary = NULL;
    int rc = read_line(f, &line, &cap, &len, path, err, errlen), bad = rc != 1;
    if (rc == 0) set_err(err, errlen, "%s: malformed part: empty", path);
    if (rc == 1) summary = parse_header(line, len, rank, world_size, &lines, path, err, errlen);
    bad = bad || !summary;
    while (!bad && (rc = read_line(f, &line, &cap, &len, path, err, errlen)) == 1) {
        lineno++;
        if (!object_line(line, len))
            bad = set_err(err, errlen, "%s: line %ld: malformed part (expected one JSON object per "
                          "line)", path, lineno);
        else if (++seen > lines)
            bad = set_err(err, errlen, "%s: line %ld: malformed part (more events than its header "
                          "says)", path, lineno);
        if (bad) break;
        if (m->events++) text_put(&m->text, ",\n", 2);
        text_put(&m->text, line, len);
        bad = flush_text(&m->af, &m->text, 0, err, errlen);   // aborts the trace on failure
    }
    if (!bad && rc < 0) bad = -1;   // a read error
    if (!bad && seen != lines)
        bad = set_err(err, errlen, "%s: malformed part: %ld events, its header says %ld "
                      "(truncated?)", path, seen, lines);
    if (bad) {
        free(summary);
        summary = NULL;
    }
    free(line);
    if (fclose(f) != 0 && summary) {
        set_err(err, errlen, "%s: close failed: %s", path, strerror(errno));
        free(summary);
        summary = NULL;
    }
    return summary;
}

// Ends the document: display unit and otherData with the world size and every rank's totals.
static void text_trailer(Text* t, char* const* summaries, int world_size) {
    text_printf(t, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"world_size\":%d,\"ranks\":[",
                world_size);
    for (int r = 0; r < world_size; r++) {
        if (r) text_put(t, ",", 1);
        text_put(t, summaries[r], strlen(summaries[r]));
    }
    text_put(t, "]}}\n", 4);
}

// Removes the parts once the trace is in place.
static int remove_parts(const char* trace_path, int world_size, char* err, size_t errlen) {
    char path[4096];
    for (int r = 0; r < world_size; r++) {
        part_path(path, sizeof path, trace_path, r);
        if (unlink(path) != 0)
            return set_err(err, errlen, "%s: trace written, but cannot remove this part: %s", path,
                           strerror(errno));
    }
    return 0;
}

int timeline_merge_parts(const char* trace_path, int world_size, char* err, size_t errlen) {
    if (world_size < 1) return set_err(err, errlen, "%s: world size %d", trace_path, world_size);
    if (strlen(trace_path) + 16 >= 4096)
        return set_err(err, errlen, "%s: trace path too long", trace_path);
    Merge m = {.events = 0};
    if (atomic_open(&m.af, trace_path, err, errlen) != 0) return -1;
    m.summaries = xcalloc((size_t)world_size, sizeof *m.summaries, "trace summaries");
    text_put(&m.text, "{\"traceEvents\":[\n", 17);
    int ok = 1;
    char path[4096];
    for (int r = 0; r < world_size && ok; r++) {
        part_path(path, sizeof path, trace_path, r);
        m.summaries[r] = merge_part(&m, path, r, world_size, err, errlen);
        ok = m.summaries[r] != NULL;
    }
    if (ok) {
        text_trailer(&m.text, m.summaries, world_size);
        ok = flush_text(&m.af, &m.text, 1, err, errlen) == 0 && atomic_commit(&m.af, err, errlen) == 0;
    } else if (m.af.f) {
        atomic_abort(&m.af);   // a bad part (a failed write has aborted already)
    }
    for (int r = 0; r < world_size; r++) free(m.summaries[r]);
    free(m.summaries);
    free(m.text.data);
    if (!ok) return -1;
    return remove_parts(trace_path, world_size, err, errlen);
}
