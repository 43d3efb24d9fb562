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
