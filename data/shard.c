// llm.c token shards: checked reading (whole file or memory-mapped) and atomic writing.
#include "data/shard.h"
#include "comm/fail.h"

#include "comm/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// The formats are little-endian and are read and written here by plain memory copies.
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data/shard.c assumes a little-endian host"
#endif

#define HEADER_BYTES (SHARD_HEADER_INTS * (int)sizeof(int32_t))

// Checks a header against the file length; on success sets the token count and width.
static int check_header(const char* path, const int32_t* hdr, long long file_bytes,
                        size_t* ntok, int* width, char* err, size_t errlen) {
    int expect_version;
    if (hdr[0] == SHARD_MAGIC_U16) {
        *width = 2;
        expect_version = SHARD_VERSION_U16;
    } else if (hdr[0] == SHARD_MAGIC_U32) {
        *width = 4;
        expect_version = SHARD_VERSION_U32;
    } else {
        return set_err(err, errlen,
                       "%s: header[0] (magic): expected %d (uint16 tokens) or %d (uint32 tokens), "
                       "found %d", path, SHARD_MAGIC_U16, SHARD_MAGIC_U32, hdr[0]);
    }
    if (hdr[1] != expect_version)
        return set_err(err, errlen, "%s: header[1] (version): expected %d for magic %d, found %d",
                       path, expect_version, hdr[0], hdr[1]);
    if (hdr[2] < 0)
        return set_err(err, errlen, "%s: header[2] (token count): expected >= 0, found %d", path,
                       hdr[2]);
    long long expect_bytes = HEADER_BYTES + (long long)hdr[2] * *width;
    if (file_bytes != expect_bytes)
        return set_err(err, errlen,
                       "%s: file size: expected %lld bytes (1024 + %d tokens x %d bytes, from "
                       "header[2]), found %lld bytes", path, expect_bytes, hdr[2], *width,
                       file_bytes);
    *ntok = (size_t)hdr[2];
    return 0;
}

// Opens a shard, checks it is a regular file of at least one header, and reads the header.
// Returns the descriptor (caller closes) and the file length, or -1 with err set.
static int open_shard(const char* path, int32_t* hdr, long long* file_bytes, char* err,
                      size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(err, errlen, "%s: file type: expected a regular file, found %s", path,
                S_ISDIR(st.st_mode) ? "a directory" : "a special file");
        close(fd);
        return -1;
    }
    *file_bytes = (long long)st.st_size;
    if (*file_bytes < HEADER_BYTES) {
        set_err(err, errlen,
                "%s: file size: expected at least 1024 bytes (the header), found %lld bytes",
                path, *file_bytes);
        close(fd);
        return -1;
    }
    size_t got = 0;
    while (got < (size_t)HEADER_BYTES) {
        ssize_t r = pread(fd, (char*)hdr + got, (size_t)HEADER_BYTES - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            set_err(err, errlen, "%s: cannot read header: %s", path,
                    r < 0 ? strerror(errno) : "unexpected end of file");
            close(fd);
            return -1;
        }
        got += (size_t)r;
    }
    return fd;
}

// Reads exactly `bytes` from fd at `offset`.
static int read_exact(int fd, void* buf, size_t bytes, off_t offset, const char* path,
                      char* err, size_t errlen) {
    size_t got = 0;
    while (got < bytes) {
        ssize_t r = pread(fd, (char*)buf + got, bytes - got, offset + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return set_err(err, errlen, "%s: cannot read tokens: %s", path,
                           r < 0 ? strerror(errno) : "unexpected end of file");
        got += (size_t)r;
    }
    return 0;
}

static uint32_t token_at(const unsigned char* body, int width, size_t i) {
    ShardView v = {.body = body, .width = width};
    return shard_token(&v, i);
}

// Checks every token id against the vocabulary size (vocab_size <= 0: no check).
static int check_vocab(const char* path, const unsigned char* body, int width, size_t ntok,
                       int vocab_size, char* err, size_t errlen) {
    if (vocab_size <= 0) return 0;
    for (size_t i = 0; i < ntok; i++) {
        uint32_t t = token_at(body, width, i);
        if (t >= (uint32_t)vocab_size)
            return set_err(err, errlen, "%s: token %zu: expected id < vocab size %d, found %u",
                           path, i, vocab_size, t);
    }
    return 0;
}

int shard_probe(const char* path, size_t* ntok, int* width, char* err, size_t errlen) {
    int32_t hdr[SHARD_HEADER_INTS];
    long long file_bytes;
    int fd = open_shard(path, hdr, &file_bytes, err, errlen);
    if (fd < 0) return -1;
    close(fd);
    return check_header(path, hdr, file_bytes, ntok, width, err, errlen);
}

// Opens a shard and checks its header against the file size: returns the open descriptor and
// the token count and width, or -1 (nothing left open) with err set.
static int open_checked(const char* path, long long* file_bytes, size_t* n, int* width,
                        char* err, size_t errlen) {
    int32_t hdr[SHARD_HEADER_INTS];
    int fd = open_shard(path, hdr, file_bytes, err, errlen);
    if (fd < 0) return -1;
    if (check_header(path, hdr, *file_bytes, n, width, err, errlen) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int shard_read(const char* path, int vocab_size, uint32_t** tokens, size_t* ntok, char* err,
               size_t errlen) {
    long long file_bytes;
    size_t n;
    int width;
    int fd = open_checked(path, &file_bytes, &n, &width, err, errlen);
    if (fd < 0) return -1;
    // One uint32 array; uint16 ids are read into its front half and widened from the back.
    uint32_t* out = malloc((n > 0 ? n : 1) * sizeof(uint32_t));
    if (!out) {
        close(fd);
        return set_err(err, errlen, "%s: out of memory for %zu tokens", path, n);
    }
    int rc = read_exact(fd, out, n * (size_t)width, HEADER_BYTES, path, err, errlen);
    close(fd);
    if (rc == 0) rc = check_vocab(path, (const unsigned char*)out, width, n, vocab_size, err,
                                  errlen);
    if (rc != 0) {
        free(out);
        return -1;
    }
    if (width == 2) {
        for (size_t i = n; i-- > 0;) {
            uint16_t t;
            memcpy(&t, (const unsigned char*)out + 2 * i, sizeof t);
            out[i] = t;
        }
    }
    *tokens = out;
    *ntok = n;
    return 0;
}

int shard_map(const char* path, int vocab_size, ShardView* view, char* err, size_t errlen) {
    memset(view, 0, sizeof *view);
    long long file_bytes;
    size_t n;
    int width;
    int fd = open_checked(path, &file_bytes, &n, &width, err, errlen);
    if (fd < 0) return -1;
    void* map = mmap(NULL, (size_t)file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);  // the mapping stays valid without the descriptor
    if (map == MAP_FAILED)
        return set_err(err, errlen, "%s: cannot map %lld bytes: %s", path, file_bytes,
                       strerror(map_errno));
    const unsigned char* body = (const unsigned char*)map + HEADER_BYTES;
    if (check_vocab(path, body, width, n, vocab_size, err, errlen) != 0) {
        munmap(map, (size_t)file_bytes);
        return -1;
    }
    view->body = body;
    view->ntok = n;
    view->width = width;
    view->map = map;
    view->map_bytes = (size_t)file_bytes;
    return 0;
}

void shard_unmap(ShardView* view) {
    if (view->map) munmap(view->map, view->map_bytes);
    memset(view, 0, sizeof *view);
}

// Writes the header and the tokens at the given width through a small conversion buffer.
static int write_body(AtomicFile* af, const int32_t* hdr, const uint32_t* tokens, size_t ntok,
                      int width, char* err, size_t errlen) {
    if (atomic_write(af, hdr, sizeof(int32_t) * SHARD_HEADER_INTS, err, errlen) != 0) return -1;
    if (width == 4) return atomic_write(af, tokens, 4 * ntok, err, errlen);
    uint16_t buf[4096];
    for (size_t i = 0; i < ntok;) {
        size_t k = ntok - i < 4096 ? ntok - i : 4096;
        for (size_t j = 0; j < k; j++) buf[j] = (uint16_t)tokens[i + j];
        if (atomic_write(af, buf, 2 * k, err, errlen) != 0) return -1;
        i += k;
    }
    return 0;
}

int shard_write(const char* path, const uint32_t* tokens, size_t ntok, int wide, char* err,
                size_t errlen) {
    if (ntok > (size_t)INT32_MAX)
        return set_err(err, errlen, "%s: token count: expected <= %d (int32 header), found %zu",
                       path, INT32_MAX, ntok);
    if (ntok > 0 && !tokens) return set_err(err, errlen, "%s: no token array given", path);
    int width = 4;
    if (!wide) {
        width = 2;
        for (size_t i = 0; i < ntok; i++)
            if (tokens[i] > UINT16_MAX) {
                width = 4;
                break;
            }
    }
    int32_t hdr[SHARD_HEADER_INTS] = {0};
    hdr[0] = width == 2 ? SHARD_MAGIC_U16 : SHARD_MAGIC_U32;
    hdr[1] = width == 2 ? SHARD_VERSION_U16 : SHARD_VERSION_U32;
    hdr[2] = (int32_t)ntok;

    AtomicFile af;   // temporary file next to the target, fsync, rename, directory fsync
    if (atomic_open(&af, path, err, errlen) != 0) return -1;
    if (write_body(&af, hdr, tokens, ntok, width, err, errlen) != 0) return -1;
    return atomic_commit(&af, err, errlen);
}
