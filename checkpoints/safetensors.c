#include "checkpoints/safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/atomic_file.h"
#include "checkpoints/json_read.h"
#include "comm/fail.h"
#include "comm/bf16.h"

const char* safetensors_dtype_name(SafetensorsDtype dtype) {
    return dtype == SAFETENSORS_BF16 ? "BF16" : "F32";
}

static size_t dtype_bytes(SafetensorsDtype dtype) { return dtype == SAFETENSORS_BF16 ? 2 : 4; }

// Appends printf output to a growing string; returns 0, or -1 when out of memory.
static int append(char** s, size_t* len, size_t* cap, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int append(char** s, size_t* len, size_t* cap, const char* fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int k = vsnprintf(*s + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if (k < 0) return -1;
        if (*len + (size_t)k < *cap) {
            *len += (size_t)k;
            return 0;
        }
        char* grown = realloc(*s, 2 * *cap + (size_t)k);
        if (!grown) return -1;
        *s = grown;
        *cap = 2 * *cap + (size_t)k;
    }
}

// The JSON header, padded with spaces to a multiple of 8 bytes; NULL when out of memory.
static char* make_header(const SafetensorsTensor* t, int n, SafetensorsDtype dtype, size_t* len) {
    size_t cap = 4096, offset = 0;
    char* s = malloc(cap);
    if (!s) return NULL;
    *len = 0;
    int bad = append(&s, len, &cap, "{");
    for (int k = 0; k < n && !bad; k++) {
        const size_t bytes = t[k].rows * t[k].cols * dtype_bytes(dtype);
        bad |= append(&s, len, &cap, "\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[k].name,
                      safetensors_dtype_name(dtype));
        bad |= t[k].ndim == 1 ? append(&s, len, &cap, "%zu", t[k].cols)
                              : append(&s, len, &cap, "%zu,%zu", t[k].rows, t[k].cols);
        bad |= append(&s, len, &cap, "],\"data_offsets\":[%zu,%zu]},", offset, offset + bytes);
        offset += bytes;
    }
    bad |= append(&s, len, &cap, "\"__metadata__\":{\"format\":\"pt\"}}");
    while (!bad && *len % 8) bad |= append(&s, len, &cap, " ");
    if (bad) free(s);
    return bad ? NULL : s;
}

// Names go into the JSON header as they are: no quote, backslash or control byte.
static int plain_name(const char* name) {
    if (!name || !*name) return 0;
    for (const unsigned char* p = (const unsigned char*)name; *p; p++)
        if (*p < 0x20 || *p == '"' || *p == '\\') return 0;
    return 1;
}

int safetensors_write(const char* path, const SafetensorsTensor* t, int n, SafetensorsDtype dtype,
                      char* err, size_t errlen) {
    for (int k = 0; k < n; k++)
        if (!plain_name(t[k].name) || (t[k].ndim != 1 && t[k].ndim != 2) ||
            (t[k].ndim == 1 && t[k].rows != 1) || !t[k].rows || !t[k].cols) {
            snprintf(err, errlen, "%s: tensor %d ('%s'): expected a plain name and 1 or 2 "
                     "non-zero dimensions", path, k, t[k].name ? t[k].name : "");
            return -1;
        }
    size_t header_len;
    char* header = make_header(t, n, dtype, &header_len);
    // One output row at a time: the gather (a transpose is a strided read) and the narrowing.
    size_t widest = 1;
    for (int k = 0; k < n; k++) widest = t[k].cols > widest ? t[k].cols : widest;
    unsigned char* row = malloc(widest * 4);
    if (!header || !row) {
        free(header), free(row);
        snprintf(err, errlen, "%s: out of memory for the header and one row", path);
        return -1;
    }
    AtomicFile af;
    int rc = atomic_open(&af, path, err, errlen);
    if (rc == 0) {
        unsigned char len_le[8];
        for (int b = 0; b < 8; b++) len_le[b] = (unsigned char)((uint64_t)header_len >> (8 * b));
        rc = atomic_write(&af, len_le, 8, err, errlen);
        if (rc == 0) rc = atomic_write(&af, header, header_len, err, errlen);
    }
    // The host is little-endian (x86-64, aarch64), as the format's bytes are.
    for (int k = 0; k < n && rc == 0; k++)
        for (size_t i = 0; i < t[k].rows && rc == 0; i++) {
            const float* src = t[k].src + i * t[k].row_stride;
            const size_t cs = t[k].col_stride;
            if (dtype == SAFETENSORS_BF16) {
                uint16_t* out = (uint16_t*)row;
                for (size_t j = 0; j < t[k].cols; j++) out[j] = bf16_from_float(src[j * cs]);
            } else {
                float* out = (float*)row;
                for (size_t j = 0; j < t[k].cols; j++) out[j] = src[j * cs];
            }
            rc = atomic_write(&af, row, t[k].cols * dtype_bytes(dtype), err, errlen);
        }
    if (rc == 0) rc = atomic_commit(&af, err, errlen);
    free(header);
    free(row);
    return rc;
}

// ---- reading ----

enum { MAX_HEADER = 100 << 20 };

// Element sizes of the dtypes the format defines; 0: unknown.
static size_t dtype_size(const char* d) {
    static const struct { const char* name; size_t bytes; } known[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
        {"I8", 1}, {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1},
        {"F8_E5M2", 1}};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (!strcmp(d, known[k].name)) return known[k].bytes;
    return 0;
}

static int parse_entry(JsonCursor* c, SafetensorsEntry* e) {
    if (json_object_begin(c) != 0) return -1;
    int have_dtype = 0, have_shape = 0, have_offsets = 0, more;
    char key[32];
    while ((more = json_object_next(c, key, sizeof key)) == 1) {
        if (!strcmp(key, "dtype")) {
            if (json_string(c, e->dtype, sizeof e->dtype) != 0) return -1;
            have_dtype = 1;
        } else if (!strcmp(key, "shape")) {
            if (json_array_begin(c) != 0) return -1;
            e->ndim = 0;
            while ((more = json_array_next(c)) == 1) {
                if (e->ndim == SAFETENSORS_MAX_DIMS) {
                    snprintf(c->err, sizeof c->err, "tensor '%.200s': shape: expected at most %d "
                             "dimensions", e->name, SAFETENSORS_MAX_DIMS);
                    return -1;
                }
                if (json_count(c, 1ull << 40, &e->shape[e->ndim++]) != 0) return -1;
            }
            if (more < 0) return -1;
            have_shape = 1;
        } else if (!strcmp(key, "data_offsets")) {
            unsigned long long* off[2] = {&e->begin, &e->end};
            int k = 0;
            if (json_array_begin(c) != 0) return -1;
            while ((more = json_array_next(c)) == 1 && k < 2)
                if (json_count(c, 1ull << 50, off[k++]) != 0) return -1;
            if (more < 0) return -1;
            if (more == 1 || k != 2) {
                snprintf(c->err, sizeof c->err, "tensor '%.200s': data_offsets: expected [BEGIN, END]",
                         e->name);
                return -1;
            }
            have_offsets = 1;
        } else {
            snprintf(c->err, sizeof c->err, "tensor '%.200s': expected the keys dtype, shape and "
                     "data_offsets, found '%s'", e->name, key);
            return -1;
        }
    }
    if (more < 0) return -1;
    if (!have_dtype || !have_shape || !have_offsets) {
        snprintf(c->err, sizeof c->err, "tensor '%.200s': expected dtype, shape and data_offsets, "
                 "found no %s", e->name, !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
        return -1;
    }
    return 0;
}

unsigned long long safetensors_numel(const SafetensorsEntry* e) {
    unsigned long long n = 1;
    for (int k = 0; k < e->ndim; k++) n *= e->shape[k];
    return n;
}

// The entry's bytes as its shape and dtype give them, or ULLONG_MAX when that overflows.
static unsigned long long entry_bytes(const SafetensorsEntry* e) {
    unsigned long long n = dtype_size(e->dtype);
    for (int k = 0; k < e->ndim; k++) {
        if (e->shape[k] && n > ~0ull / e->shape[k]) return ~0ull;
        n *= e->shape[k];
    }
    return n;
}

static int by_begin(const void* a, const void* b) {
    const SafetensorsEntry *x = *(SafetensorsEntry* const*)a, *y = *(SafetensorsEntry* const*)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int by_name(const void* a, const void* b) {
    return strcmp((*(SafetensorsEntry* const*)a)->name, (*(SafetensorsEntry* const*)b)->name);
}

// The entries against each other and the data section's length.
static int check_entries(SafetensorsFile* f, unsigned long long data_len, char* why, size_t n) {
    SafetensorsEntry** order = malloc(sizeof *order * (size_t)(f->n ? f->n : 1));
    if (!order) return set_err(why, n, "out of memory for %d entries", f->n);
    int rc = 0;
    for (int k = 0; k < f->n && rc == 0; k++) {
        SafetensorsEntry* e = &f->entries[k];
        order[k] = e;
        if (!dtype_size(e->dtype))
            rc = set_err(why, n, "tensor '%.200s': dtype: expected one of F64 F32 F16 BF16 I64 I32 I16 "
                          "I8 U64 U32 U16 U8 BOOL F8_E4M3 F8_E5M2, found '%s'", e->name, e->dtype);
        else if (e->begin > e->end || entry_bytes(e) != e->end - e->begin)
            rc = set_err(why, n, "tensor '%.200s': data_offsets [%llu, %llu]: expected %llu bytes for "
                          "its shape and dtype", e->name, e->begin, e->end, entry_bytes(e));
    }
    if (rc == 0) qsort(order, (size_t)f->n, sizeof *order, by_begin);
    unsigned long long pos = 0;
    for (int k = 0; k < f->n && rc == 0; k++) {
        if (order[k]->begin != pos)
            rc = set_err(why, n, "tensor '%.200s': data_offsets: expected it to start at byte %llu (the "
                          "tensors tile the data with no gap or overlap), found %llu", order[k]->name,
                          pos, order[k]->begin);
        pos = order[k]->end;
    }
    // Names twice, whatever their offsets: neighbours once sorted by name.
    if (rc == 0) qsort(order, (size_t)f->n, sizeof *order, by_name);
    for (int k = 1; k < f->n && rc == 0; k++)
        if (!strcmp(order[k]->name, order[k - 1]->name))
            rc = set_err(why, n, "tensor '%.200s' named twice", order[k]->name);
    if (rc == 0 && pos != data_len)
        rc = set_err(why, n, "expected the tensors to cover the %llu data bytes after the header, "
                      "found %llu", data_len, pos);
    free(order);
    return rc;
}

static int parse_header(SafetensorsFile* f, const char* text, unsigned long long data_len,
                        char* why, size_t n) {
    JsonCursor c;
    json_init(&c, text);
    int cap = 64, more;
    f->entries = malloc(sizeof *f->entries * (size_t)cap);
    if (!f->entries || json_object_begin(&c) != 0) goto bad;
    char key[sizeof f->entries->name];
    while ((more = json_object_next(&c, key, sizeof key)) == 1) {
        if (!strcmp(key, "__metadata__")) {
            if (json_skip(&c) != 0) goto bad;
            continue;
        }
        if (f->n == cap) {
            SafetensorsEntry* grown = realloc(f->entries, sizeof *grown * (size_t)(cap *= 2));
            if (!grown) goto bad;
            f->entries = grown;
        }
        for (const unsigned char* q = (const unsigned char*)key; *q; q++)
            if (*q < 0x20 || *q == 0x7f) {
                snprintf(c.err, sizeof c.err, "a tensor name without control characters, found "
                         "byte 0x%02x in one", *q);
                goto bad;
            }
        SafetensorsEntry* e = &f->entries[f->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", key);
        if (parse_entry(&c, e) != 0) goto bad;
    }
    if (more < 0 || json_end(&c) != 0) goto bad;
    return check_entries(f, data_len, why, n);
bad:
    snprintf(why, n, "header: %.380s", c.err[0] ? c.err : "out of memory");
    return -1;
}

int safetensors_open(const char* path, SafetensorsFile* f, char* err, size_t errlen) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    FILE* in = fopen(path, "rb");
    if (!in) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    unsigned char len_le[8];
    char why[400] = "";
    char* text = NULL;
    unsigned long long header_len = 0, size = 0;
    if (fseeko(in, 0, SEEK_END) == 0) size = (unsigned long long)ftello(in);
    rewind(in);
    if (size < 8 || fread(len_le, 1, 8, in) != 8) {
        snprintf(why, sizeof why, "expected an 8-byte header length, found a file of %llu bytes", size);
    } else {
        for (int b = 7; b >= 0; b--) header_len = header_len << 8 | len_le[b];
        if (header_len < 2 || header_len > size - 8 || header_len > MAX_HEADER)
            snprintf(why, sizeof why, "header length: expected 2 to %llu bytes (the file's rest, "
                     "at most 100 MiB), found %llu", size - 8 < MAX_HEADER ? size - 8 : MAX_HEADER,
                     header_len);
        else if (!(text = malloc(header_len + 1)) || fread(text, 1, header_len, in) != header_len)
            snprintf(why, sizeof why, "cannot read the %llu-byte header", header_len);
        else if (text[header_len] = 0, strlen(text) != header_len)
            snprintf(why, sizeof why, "header: expected JSON text, found a NUL byte at byte %zu",
                     strlen(text));
    }
    fclose(in);
    f->data_start = 8 + header_len;
    if (!why[0]) parse_header(f, text, size - 8 - header_len, why, sizeof why);
    free(text);
    if (why[0]) {
        snprintf(err, errlen, "%s: %s", path, why);
        safetensors_close(f);
        return -1;
    }
    return 0;
}

const SafetensorsEntry* safetensors_find(const SafetensorsFile* f, const char* name) {
    for (int k = 0; k < f->n; k++)
        if (!strcmp(f->entries[k].name, name)) return &f->entries[k];
    return NULL;
}

// IEEE binary16 to float, subnormals, infinities and NaN included.
static float f16_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | man << 13;
    else if (exp) bits = sign | (exp + 112) << 23 | man << 13;
    else if (!man) bits = sign;
    else {   // subnormal, man x 2^-24: shifted s places to a leading 1, (m / 2^10) x 2^(-14 - s)
        uint32_t m = man, s = 0;
        while (!(m & 0x400)) m <<= 1, s++;
        bits = sign | (113 - s) << 23 | (m & 0x3ff) << 13;
    }
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

int safetensors_read_f32(const SafetensorsFile* f, const SafetensorsEntry* e, float* out,
                         char* err, size_t errlen) {
    const int f32 = !strcmp(e->dtype, "F32"), bf16 = !strcmp(e->dtype, "BF16");
    if (!f32 && !bf16 && strcmp(e->dtype, "F16"))
        return set_err(err, errlen, "%s: tensor '%.200s': dtype: expected F32, BF16 or F16, found %s",
                        f->path, e->name, e->dtype);
    FILE* in = fopen(f->path, "rb");
    if (!in) return set_err(err, errlen, "%s: cannot open: %s", f->path, strerror(errno));
    const unsigned long long n = safetensors_numel(e);
    int ok = fseeko(in, (off_t)(f->data_start + e->begin), SEEK_SET) == 0;
    if (ok && f32) ok = fread(out, 4, n, in) == n;
    uint16_t buf[4096];
    for (unsigned long long i = 0; ok && !f32 && i < n; i += 4096) {
        const size_t k = n - i < 4096 ? (size_t)(n - i) : 4096;
        ok = fread(buf, 2, k, in) == k;
        for (size_t j = 0; ok && j < k; j++) out[i + j] = bf16 ? bf16_to_float(buf[j]) : f16_to_float(buf[j]);
    }
    fclose(in);
    if (!ok)
        return set_err(err, errlen, "%s: tensor '%.200s': cannot read its %llu bytes", f->path,
                        e->name, e->end - e->begin);
    return 0;
}

void safetensors_close(SafetensorsFile* f) {
    free(f->entries);
    f->entries = NULL;
    f->n = 0;
}
