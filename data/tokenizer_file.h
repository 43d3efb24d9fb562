// llm.c's tokenizer file (gpt2_tokenizer.bin), the table a trainer needs to turn ids into bytes:
// a 256 x uint32 header ([0] = 20240328, [1] = version 2, [2] = vocab size, [3] = end-of-text id,
// the rest 0), then per token one length byte (1..255) and that many raw bytes.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2
#define TOKENIZER_HEADER_INTS 256
// Largest vocabulary a reader accepts; a larger header value means a corrupt file.
#define TOKENIZER_MAX_VOCAB (1u << 24)
#define TOKENIZER_NO_EOT UINT32_MAX

// Token id -> raw bytes. Token i is bytes[offset[i] .. offset[i + 1]).
typedef struct TokenTable {
    uint32_t vocab_size;
    uint32_t eot_id;    // end-of-text id, or TOKENIZER_NO_EOT when the table has none
    uint32_t* offset;   // vocab_size + 1 entries
    uint8_t* bytes;
    // 1: a decoded text drops the one space it begins with (a SentencePiece-style tokenizer.json
    // whose decoder ends with Strip(" ", 1, 0) or is Metaspace: the space its encoder put before
    // the text); 0 for llm.c's files and byte-level tokenizers.
    int strip_first_space;
} TokenTable;

// Reads and checks a whole tokenizer file (versions 1 and 2; version 1 has no end-of-text field
// and, as in llm.c, means GPT-2's 50256). On success fills *table (free with token_table_free)
// and returns 0; on failure returns -1 with one line in err ("PATH: FIELD: expected ..., found
// ...") and allocates nothing.
int tokenizer_file_read(const char* path, TokenTable* table, char* err, size_t errlen);

// Writes a version-2 file atomically (temporary file, fsync, rename, directory fsync). Every
// token must be 1..255 bytes long. Returns 0, or -1 with err set; the target is then untouched.
int tokenizer_file_write(const char* path, const TokenTable* table, char* err, size_t errlen);

void token_table_free(TokenTable* table);

// The id whose bytes are text[0 .. len), the lowest if several, or -1 (a linear search: for a
// lookup at start-up, such as a document token named on the command line).
long token_table_find(const TokenTable* table, const void* text, size_t len);
