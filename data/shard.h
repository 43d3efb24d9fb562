// llm.c token shards: a 256 x int32 header (magic, version, token count) then the tokens.
// Version 1 (magic 20240520) stores uint16 tokens; version 7 (magic 20240801) uint32 tokens.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define SHARD_MAGIC_U16 20240520
#define SHARD_VERSION_U16 1
#define SHARD_MAGIC_U32 20240801
#define SHARD_VERSION_U32 7
#define SHARD_HEADER_INTS 256

// Reads a whole shard, checking magic, version, size against the file length and every token
// against vocab_size (vocab_size <= 0 skips that check). On success *tokens (malloc'd, caller
// frees) holds *ntok ids and 0 is returned; on failure returns -1 with a one-line message in
// err ("PATH: FIELD: expected ..., found ...") and allocates nothing.
int shard_read(const char* path, int vocab_size, uint32_t** tokens, size_t* ntok,
               char* err, size_t errlen);

// Writes ntok tokens atomically (temporary file, fsync, rename). Uses the uint16 variant when
// every id fits (and wide == 0), the uint32 variant otherwise. Returns 0, or -1 with err set.
int shard_write(const char* path, const uint32_t* tokens, size_t ntok, int wide,
                char* err, size_t errlen);

// Token width in bytes (2 or 4) and count of a shard, from its header, after checking magic,
// version and that the file length equals 1024 + ntok * width. Reads no tokens. 0 or -1 + err.
int shard_probe(const char* path, size_t* ntok, int* width, char* err, size_t errlen);

// A shard mapped read-only into memory (for loaders that keep only a few shards resident).
typedef struct {
    const unsigned char* body;  // the token ids, `width` bytes each, little-endian
    size_t ntok;
    int width;                  // 2 or 4
    void* map;                  // the whole mapping, for munmap
    size_t map_bytes;
} ShardView;

// Maps a shard and performs every check shard_read does (vocab_size <= 0 skips the token
// check). On failure returns -1 with err set and leaves *view empty. The file must not be
// truncated while it is mapped.
int shard_map(const char* path, int vocab_size, ShardView* view, char* err, size_t errlen);
// Unmaps a view from shard_map; safe on an empty (zeroed) view.
void shard_unmap(ShardView* view);

// Token i of a mapped shard (i < view->ntok).
static inline uint32_t shard_token(const ShardView* view, size_t i) {
    const unsigned char* p = view->body + i * (size_t)view->width;
    if (view->width == 2) return (uint32_t)p[0] | (uint32_t)p[1] << 8;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
