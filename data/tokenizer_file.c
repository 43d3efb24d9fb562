// llm.c tokenizer files: checked reading and atomic writing.
#include "data/tokenizer_file.h"
#include "comm/fail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/atomic_file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data/tokenizer_file.c assumes a little-endian host"
#endif

#define HEADER_BYTES (TOKENIZER_HEADER_INTS * sizeof(uint32_t))

void token_table_free(TokenTable* table) {
    if (!table) return;
    free(table->offset);
    free(table->bytes);
    memset(table, 0, sizeof *table);
}

long token_table_find(const TokenTable* table, const void* text, size_t len) {
    for (uint32_t id = 0; id < table->vocab_size; id++)
        if (table->offset[id + 1] - table->offset[id] == len &&
            memcmp(table->bytes + table->offset[id], text, len) == 0)
            return id;
    return -1;
}

// Reads exactly n bytes at offset; a short file is reported by the caller's size checks, so a
// short read here means the file changed underneath us or the device failed.
static int read_at(int fd, void* buf, size_t n, off_t offset, const char* path, char* err,
                   size_t errlen) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char*)buf + got, n - got, offset + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return set_err(err, errlen, "%s: cannot read: %s", path,
                           r < 0 ? strerror(errno) : "unexpected end of file");
        got += (size_t)r;
    }
    return 0;
}

static int check_header(const char* path, const uint32_t* hdr, uint32_t* eot, char* err,
                        size_t errlen) {
    if (hdr[0] != TOKENIZER_MAGIC)
        return set_err(err, errlen, "%s: header[0] (magic): expected %d, found %u", path,
                       TOKENIZER_MAGIC, hdr[0]);
    if (hdr[1] != 1 && hdr[1] != 2)
        return set_err(err, errlen, "%s: header[1] (version): expected 1 or 2, found %u", path,
                       hdr[1]);
    if (hdr[2] == 0 || hdr[2] > TOKENIZER_MAX_VOCAB)
        return set_err(err, errlen, "%s: header[2] (vocab size): expected 1..%u, found %u", path,
                       TOKENIZER_MAX_VOCAB, hdr[2]);
    int first_unused = 3;
    if (hdr[1] == 2) {
        if (hdr[3] >= hdr[2])
            return set_err(err, errlen,
                           "%s: header[3] (end-of-text id): expected < vocab size %u, found %u",
                           path, hdr[2], hdr[3]);
        *eot = hdr[3];
        first_unused = 4;
    } else {
        *eot = hdr[2] > 50256 ? 50256 : TOKENIZER_NO_EOT;  // llm.c's assumption for version 1
    }
    for (int i = first_unused; i < TOKENIZER_HEADER_INTS; i++)
        if (hdr[i] != 0)
            return set_err(err, errlen, "%s: header[%d]: expected 0 (unused in version %u), "
                           "found %u", path, i, hdr[1], hdr[i]);
    return 0;
}

// Splits the body into tokens, checking every length byte and the exact end of the file.
static int parse_body(const char* path, const uint8_t* body, size_t body_len, TokenTable* t,
                      char* err, size_t errlen) {
    size_t pos = 0, nbytes = 0;
    for (uint32_t i = 0; i < t->vocab_size; i++) {
        if (pos >= body_len)
            return set_err(err, errlen,
                           "%s: token %u: expected a length byte at offset %zu, found end of "
                           "file (the file holds %u of %u tokens)", path, i,
                           HEADER_BYTES + pos, i, t->vocab_size);
        uint8_t len = body[pos];
        if (len == 0)
            return set_err(err, errlen,
                           "%s: token %u: length: expected 1..255, found 0 (at offset %zu)",
                           path, i, HEADER_BYTES + pos);
        if (body_len - pos - 1 < len)
            return set_err(err, errlen,
                           "%s: token %u: expected %u bytes at offset %zu, found only %zu "
                           "(file truncated)", path, i, len, HEADER_BYTES + pos + 1,
                           body_len - pos - 1);
        memmove(t->bytes + nbytes, body + pos + 1, len);
        t->offset[i] = (uint32_t)nbytes;
        nbytes += len;
        pos += 1 + (size_t)len;
    }
    t->offset[t->vocab_size] = (uint32_t)nbytes;
    if (pos != body_len)
        return set_err(err, errlen,
                       "%s: end of file: expected %u tokens ending at offset %zu, found %zu "
                       "more bytes (wrong vocab size in header[2]?)", path, t->vocab_size,
                       HEADER_BYTES + pos, body_len - pos);
    return 0;
}

int tokenizer_file_read(const char* path, TokenTable* table, char* err, size_t errlen) {
    memset(table, 0, sizeof *table);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    uint8_t* body = NULL;
    TokenTable t = {0};
    if (fstat(fd, &st) != 0) {
        rc = set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = set_err(err, errlen, "%s: file type: expected a regular file, found %s", path,
                     S_ISDIR(st.st_mode) ? "a directory" : "a special file");
        goto done;
    }
    size_t file_bytes = (size_t)st.st_size;
    if (file_bytes < HEADER_BYTES) {
        rc = set_err(err, errlen, "%s: file size: expected at least %zu bytes (the header), "
                     "found %zu", path, HEADER_BYTES, file_bytes);
        goto done;
    }
    uint32_t hdr[TOKENIZER_HEADER_INTS];
    if ((rc = read_at(fd, hdr, HEADER_BYTES, 0, path, err, errlen)) != 0) goto done;
    if ((rc = check_header(path, hdr, &t.eot_id, err, errlen)) != 0) goto done;
    t.vocab_size = hdr[2];
    size_t body_len = file_bytes - HEADER_BYTES;
    size_t max_body = (size_t)t.vocab_size * 256;
    if (body_len > max_body) {
        rc = set_err(err, errlen, "%s: file size: expected at most %zu bytes for %u tokens of "
                     "at most 255 bytes, found %zu", path, HEADER_BYTES + max_body,
                     t.vocab_size, file_bytes);
        goto done;
    }
    // Every token takes at least two bytes (its length and one byte): a header claiming more
    // tokens than that is refused before its offset table (4 bytes a token) is allocated.
    if (body_len < (size_t)t.vocab_size * 2) {
        rc = set_err(err, errlen, "%s: file size: expected at least %zu bytes for %u tokens of "
                     "at least 1 byte, found %zu (truncated, or a wrong vocab size in "
                     "header[2]?)", path, HEADER_BYTES + (size_t)t.vocab_size * 2, t.vocab_size,
                     file_bytes);
        goto done;
    }
    body = malloc(body_len ? body_len : 1);
    t.bytes = malloc(body_len ? body_len : 1);
    t.offset = malloc(((size_t)t.vocab_size + 1) * sizeof(uint32_t));
    if (!body || !t.bytes || !t.offset) {
        rc = set_err(err, errlen, "%s: out of memory reading %zu bytes", path, file_bytes);
        goto done;
    }
    if ((rc = read_at(fd, body, body_len, (off_t)HEADER_BYTES, path, err, errlen)) != 0)
        goto done;
    rc = parse_body(path, body, body_len, &t, err, errlen);
done:
    close(fd);
    free(body);
    if (rc != 0) token_table_free(&t);
    else *table = t;
    return rc;
}

int tokenizer_file_write(const char* path, const TokenTable* table, char* err, size_t errlen) {
    const TokenTable* t = table;
    if (t->vocab_size == 0 || t->vocab_size > TOKENIZER_MAX_VOCAB)
        return set_err(err, errlen, "%s: vocab size: expected 1..%u, found %u", path,
                       TOKENIZER_MAX_VOCAB, t->vocab_size);
    if (t->eot_id >= t->vocab_size)
        return set_err(err, errlen, "%s: end-of-text id: expected < vocab size %u, found %u "
                       "(version 2 needs one)", path, t->vocab_size, t->eot_id);
    for (uint32_t i = 0; i < t->vocab_size; i++) {
        if (t->offset[i + 1] < t->offset[i] || t->offset[i + 1] - t->offset[i] == 0 ||
            t->offset[i + 1] - t->offset[i] > 255)
            return set_err(err, errlen, "%s: token %u: length: expected 1..255 bytes, found %lld",
                           path, i, (long long)t->offset[i + 1] - (long long)t->offset[i]);
    }
    uint32_t hdr[TOKENIZER_HEADER_INTS] = {0};
    hdr[0] = TOKENIZER_MAGIC;
    hdr[1] = TOKENIZER_VERSION;
    hdr[2] = t->vocab_size;
    hdr[3] = t->eot_id;
    AtomicFile af;
    if (atomic_open(&af, path, err, errlen) != 0) return -1;
    if (atomic_write(&af, hdr, sizeof hdr, err, errlen) != 0) return -1;
    for (uint32_t i = 0; i < t->vocab_size; i++) {
        uint8_t len = (uint8_t)(t->offset[i + 1] - t->offset[i]);
        if (atomic_write(&af, &len, 1, err, errlen) != 0 ||
            atomic_write(&af, t->bytes + t->offset[i], len, err, errlen) != 0)
            return -1;  // atomic_write has removed the temporary file
    }
    return atomic_commit(&af, err, errlen);
}
