// tokenizer.json (read by data/hf_tokenizer_json.c) and tokenizer_config.json's document token ->
// BpeVocab: which form the file is, its pieces, table, index and merge rules.
#include "data/hf_tokenizer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoints/json_read.h"
#include "comm/fail.h"
#include "data/bpe_added.h"
#include "data/hf_tokenizer_json.h"
#include "data/whole_file.h"

#define MAX_CONFIG_FILE_BYTES (16u << 20)

// Unicode's White_Space, which \s is in Oniguruma (the tokenizers library) and in Rust's regex.
#define WHITE_SPACE "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}" \
                    "\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

// The patterns whose chunk rule is known (bpe_vocab.h), as tokenizer.json spells them.
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char llama3_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2's (and Qwen2.5's): Llama 3's with each digit a piece of its own. Llama 3's chunk rule
// holds for it. A cut at i has text[i] a space, tab, VT or FF and text[i - 1] an ASCII non-space.
// No match crosses i: the contractions, \p{L}+ and \p{N} hold no white space; the optional
// first character of [^\r\n\p{L}\p{N}]?\p{L}+ and the " ?" of the symbol run begin a match,
// so a match holding text[i] there starts at i; the symbol run's [\r\n]* takes no space, tab,
// VT or FF; \s*[\r\n]+, \s+(?!\S) and \s+ would need text[i - 1] to be white space. No match
// before i looks past it either: each alternative that stops at i stops because text[i] is not
// in its class, as it would at the end of the text, and the one lookahead, (?!\S), follows
// white space, which text[i - 1] is not. The pattern has no lookbehind, so matching from i
// alone gives the matches of the whole from there. The same cut keeps NFC and the added tokens
// whole: see bpe_chunk_end (data/bpe.c).
static const char qwen2_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int hf_pattern_to_pcre2(const char* pattern, char** out, char* err, size_t errlen) {
    size_t cap = strlen(pattern) * (sizeof WHITE_SPACE + 4) + 1, n = 0;
    char* s = xmalloc(cap, "pattern");
    int in_class = 0;
#define EMIT(str) do { size_t l_ = strlen(str); memcpy(s + n, (str), l_); n += l_; } while (0)
    for (size_t i = 0; pattern[i];) {
        const char c = pattern[i];
        if (c == '\\') {
            const char e = pattern[i + 1];
            if (!e) { free(s); return set_err(err, errlen, "pattern: expected a character after "
                                              "the final '\\', found the end"); }
            if (e == 's') EMIT(in_class ? WHITE_SPACE : "[" WHITE_SPACE "]");
            else if (e == 'S' && !in_class) EMIT("[^" WHITE_SPACE "]");
            else if (e == 'S') {
                free(s);
                return set_err(err, errlen, "pattern: byte %zu: expected no \\S inside a "
                               "character class, found one", i);
            } else { s[n++] = c; s[n++] = e; }
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            s[n++] = pattern[i++];
            if (pattern[i] == '^') s[n++] = pattern[i++];
            if (pattern[i] == ']') s[n++] = pattern[i++];  // a ']' first is a member
            continue;
        }
        if (in_class && c == '[') {
            const char* close = pattern[i + 1] == ':' ? strstr(pattern + i, ":]") : NULL;
            if (!close) {
                free(s);
                return set_err(err, errlen, "pattern: byte %zu: expected no class nested in a "
                               "character class, found '['", i);
            }
            const size_t l = (size_t)(close + 2 - (pattern + i));  // [:alpha:] is PCRE2's too
            memcpy(s + n, pattern + i, l);
            n += l;
            i += l;
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        s[n++] = pattern[i++];
    }
#undef EMIT
    s[n] = 0;
    *out = s;
    return 0;
}

int hf_tokenizer_locate(const char* path, char* out, size_t n) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        if (snprintf(out, n, "%s/tokenizer.json", path) >= (int)n) return 0;
        return stat(out, &st) == 0 && S_ISREG(st.st_mode);
    }
    const size_t len = strlen(path);
    if (!S_ISREG(st.st_mode) || len < 5 || strcmp(path + len - 5, ".json") != 0) return 0;
    return snprintf(out, n, "%s", path) < (int)n;
}

// ---------------------------------------------------------------------------------------------
// Which of the two forms a file is

// SentencePiece's space, U+2581 LOWER ONE EIGHTH BLOCK.
#define SP_SPACE "\xe2\x96\x81"

typedef struct Form {
    int sentencepiece;
    int strip_first_space;  // sentencepiece: the decoder drops the space before the text
    int nfc;              // byte-level: the normalizer NFC
    const char* pattern;  // byte-level: the pre-tokenizer's pattern, as the file spells it
} Form;

static int is_type(const HfStep* s, const char* type) { return strcmp(s->type, type) == 0; }

static int is_byte_level(const HfStep* s, int use_regex) {
    return is_type(s, "ByteLevel") && s->add_prefix_space != 1 &&
           (use_regex ? s->use_regex != 0 : s->use_regex == 0);
}

// Llama 2's normalizer: Sequence [Prepend "▁", Replace " " with "▁"].
static int is_sp_normalizer(const HfComponent* c) {
    const HfStep* s = c->steps;
    return c->present && is_type(&c->top, "Sequence") && c->nsteps == 2 &&
           is_type(&s[0], "Prepend") && strcmp(s[0].prepend, SP_SPACE) == 0 &&
           is_type(&s[1], "Replace") && s[1].has_string && strcmp(s[1].string, " ") == 0 &&
           strcmp(s[1].content, SP_SPACE) == 0;
}

// The same as a pre-tokenizer (the library's newer form): Metaspace "▁", not split at spaces.
static int is_sp_metaspace(const HfComponent* c) {
    const HfStep* s = &c->top;
    const int prepends = strcmp(s->prepend_scheme, "always") == 0 ||
                         strcmp(s->prepend_scheme, "first") == 0 ||
                         (!s->prepend_scheme[0] && s->add_prefix_space == 1);
    return c->present && is_type(s, "Metaspace") && strcmp(s->replacement, SP_SPACE) == 0 &&
           s->split == 0 && prepends;
}

// Sequence [Replace "▁" with " ", ByteFallback, Fuse (, Strip)], or Metaspace.
// A SentencePiece-style decoder: 2 when it drops the space before the decoded text (Llama 2's
// Strip(" ", 1, 0) last; Metaspace, unless its prepend_scheme is never), 1 when it keeps it (the
// same Sequence without Strip), 0 for another.
static int sp_decoder(const HfComponent* c) {
    const HfStep* s = c->steps;
    if (c->present && is_type(&c->top, "Metaspace"))
        return strcmp(c->top.prepend_scheme, "never") == 0 || c->top.add_prefix_space == 0 ? 1 : 2;
    const int sequence = c->present && is_type(&c->top, "Sequence") &&
                         (c->nsteps == 3 || c->nsteps == 4) && is_type(&s[0], "Replace") &&
                         s[0].has_string && strcmp(s[0].string, SP_SPACE) == 0 &&
                         strcmp(s[0].content, " ") == 0 && is_type(&s[1], "ByteFallback") &&
                         is_type(&s[2], "Fuse");
    if (!sequence) return 0;
    if (c->nsteps == 3) return 1;
    return is_type(&s[3], "Strip") && strcmp(s[3].content, " ") == 0 && s[3].start == 1 &&
                   s[3].stop == 0 ? 2 : 0;
}

static int file_form(const char* path, const HfTokenizerFile* f, Form* form, char* err,
                     size_t errlen) {
    char found[160];
    const HfComponent *norm = &f->normalizer, *pre = &f->pre_tokenizer, *dec = &f->decoder;
    form->sentencepiece = form->strip_first_space = 0;
    form->pattern = NULL;
    // NFC (Qwen2's) goes with a byte-level pre-tokenizer; SentencePiece's normalizer alone.
    form->nfc = norm->present && is_type(&norm->top, "NFC");
    if (norm->present && !form->nfc) {
        hf_component_describe(norm, found, sizeof found);
        if (!is_sp_normalizer(norm) || pre->present)
            return set_err(err, errlen, "%s: normalizer: expected null, NFC (Qwen2's) with a "
                           "byte-level pre-tokenizer, or SentencePiece's Sequence [Prepend \""
                           SP_SPACE "\", Replace \" \" with \"" SP_SPACE "\"] (Llama 2's) without "
                           "a pre-tokenizer, found %s%s", path, found,
                           pre->present ? " with a pre-tokenizer" : "");
        form->sentencepiece = 1;
    } else if (!form->nfc && is_sp_metaspace(pre)) {
        form->sentencepiece = 1;
    } else if (pre->present && is_byte_level(&pre->top, 1)) {
        form->pattern = gpt2_pattern;
    } else if (pre->present && is_type(&pre->top, "Sequence") && pre->nsteps == 2 &&
               is_type(&pre->steps[0], "Split") && pre->steps[0].regex &&
               !pre->steps[0].has_string && strcmp(pre->steps[0].behavior, "Isolated") == 0 &&
               pre->steps[0].invert != 1 && is_byte_level(&pre->steps[1], 0)) {
        form->pattern = pre->steps[0].regex;
    } else {
        hf_component_describe(pre, found, sizeof found);
        return set_err(err, errlen, "%s: pre_tokenizer: expected ByteLevel (use_regex true, "
                       "add_prefix_space false), a Sequence of a Split by a Regex (Isolated) "
                       "and ByteLevel (use_regex false, add_prefix_space false)%s, found %s",
                       path, form->nfc ? " after the normalizer NFC"
                                       : ", or Metaspace (\"" SP_SPACE "\", split false)", found);
    }
    hf_component_describe(dec, found, sizeof found);
    const int sp_dec = form->sentencepiece ? sp_decoder(dec) : 0;
    if (form->sentencepiece ? !sp_dec : !(dec->present && is_type(&dec->top, "ByteLevel")))
        return set_err(err, errlen, "%s: decoder: expected %s, found %s", path,
                       form->sentencepiece ? "Sequence [Replace, ByteFallback, Fuse, Strip(\" \", "
                                             "1, 0)] or Metaspace" : "ByteLevel", found);
    form->strip_first_space = sp_dec == 2;
    if (!form->sentencepiece && f->byte_fallback == 1)
        return set_err(err, errlen, "%s: model.byte_fallback: expected false for a byte-level "
                       "tokenizer, found true", path);
    if (form->sentencepiece && f->byte_fallback != 1)
        return set_err(err, errlen, "%s: model.byte_fallback: expected true for a "
                       "SentencePiece-style tokenizer (characters outside the vocabulary as "
                       "<0xXX> byte tokens), found %s", path, f->byte_fallback ? "none" : "false");
    if (form->sentencepiece && f->ignore_merges == 1)
        return set_err(err, errlen, "%s: model.ignore_merges: expected false for a "
                       "SentencePiece-style tokenizer, found true", path);
    return 0;
}

// What every file must be: a BPE model without dropout or affixes.
static int check_model(const char* path, const HfTokenizerFile* f, char* err, size_t errlen) {
    if (!f->have_model)
        return set_err(err, errlen, "%s: model: expected a BPE model, found none", path);
    if (strcmp(f->model_type, "BPE") != 0)
        return set_err(err, errlen, "%s: model.type: expected \"BPE\", found \"%s\"", path,
                       f->model_type[0] ? f->model_type : "none");
    if (f->dropout)
        return set_err(err, errlen, "%s: model.dropout: expected null, found a value (BPE "
                       "dropout is not supported)", path);
    if (f->affix[0])
        return set_err(err, errlen, "%s: model.%s: expected null or \"\" (word prefixes and "
                       "suffixes are not supported)", path, f->affix);
    if (f->nvocab == 0)
        return set_err(err, errlen, "%s: model.vocab: expected tokens, found none", path);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Added tokens that are not special: the text is split around them (data/bpe_added.h)

static const char* flag_name(int v) { return v == 1 ? "true" : v == 0 ? "false" : "none"; }

// One line naming the file, the token and the flag that is not as expected.
static int refuse_flag(const char* path, const HfTokenizerFile* f, size_t i, const char* flag,
                       const char* expected, int found, const char* why, char* err,
                       size_t errlen) {
    const HfEntry* e = &f->added[i];
    return set_err(err, errlen, "%s: added_tokens[%zu] \"%.*s\": %s: expected %s, found %s (%s)",
                   path, i, (int)(e->text.len < 40 ? e->text.len : 40),
                   (const char*)f->text + e->text.off, flag, expected, flag_name(found), why);
}

// The flags this encoder follows as the library does, checked against transformers.js: special
// (true or false), lstrip, rstrip; normalized false (matched in the raw text; transformers.js
// matches every added token there, so the library's matching in normalized text is
// unverified), single_word false (transformers.js ignores it). Not in SentencePiece's form,
// whose "\u2581" the library would put before each piece between the tokens.
static int check_added_token(const char* path, const HfTokenizerFile* f, const Form* form,
                             size_t i, int any_strip, char* err, size_t errlen) {
    const HfEntry* e = &f->added[i];
    if (e->special != 1 && e->special != 0)
        return refuse_flag(path, f, i, "special", "true or false", e->special, "the library "
                           "needs it", err, errlen);
    if (e->special) return 0;
    if (form->sentencepiece)
        return refuse_flag(path, f, i, "special", "true in a SentencePiece-style tokenizer", 0,
                           "added tokens that split its text are not supported", err, errlen);
    if (e->single_word == 1)
        return refuse_flag(path, f, i, "single_word", "false or none", 1, "whole-word matching "
                           "is not supported", err, errlen);
    if (e->normalized != 0)
        return refuse_flag(path, f, i, "normalized", "false", e->normalized, "tokens matched "
                           "in the normalized text are not supported", err, errlen);
    if (any_strip && bpe_added_space_at_ends(f->text + e->text.off, e->text.len))
        return set_err(err, errlen, "%s: added_tokens[%zu] \"%.*s\": content: expected no white "
                       "space at either end beside tokens with lstrip or rstrip, found some "
                       "(a strip would overlap the token)", path, i, (int)e->text.len,
                       (const char*)f->text + e->text.off);
    return 0;
}

// v->added: every added token matched in the raw text (special ones too: a match of one hides
// the text it covers from the others, as in the library), when some token is not special.
static int build_added(const char* path, const HfTokenizerFile* f, const Form* form,
                       BpeVocab* v, char* err, size_t errlen) {
    size_t splitting = 0;
    int any_strip = 0;
    for (size_t i = 0; i < f->nadded; i++)
        if (f->added[i].special == 0) {
            splitting++;
            any_strip |= f->added[i].lstrip == 1 || f->added[i].rstrip == 1;
        }
    for (size_t i = 0; i < f->nadded; i++)
        if (check_added_token(path, f, form, i, any_strip, err, errlen) != 0) return -1;
    if (splitting == 0) return 0;
    v->added = xcalloc(f->nadded, sizeof *v->added, "added tokens");
    for (size_t i = 0; i < f->nadded; i++) {
        const HfEntry* e = &f->added[i];
        if (e->special && e->normalized == 1) continue;  // matched in normalized text, skipped
        v->added[v->nadded++] = (BpeAddedToken){e->id, e->text.off, e->text.len,
                                                (uint8_t)e->special, e->lstrip == 1,
                                                e->rstrip == 1};
    }
    const long dup = bpe_added_index(v, f->text);
    if (dup >= 0) {   // the later of two tokens of one text: the earlier named too
        const BpeAddedToken* t = &v->added[dup];
        const uint8_t* s = v->added_text + t->off;
        for (long k = 0; k < dup; k++)
            if (v->added[k].len == t->len && memcmp(v->added_text + v->added[k].off, s, t->len) == 0)
                return set_err(err, errlen, "%s: added_tokens: \"%.*s\": expected each text "
                               "once, found it for ids %u and %u", path, (int)t->len,
                               (const char*)s, v->added[k].id, t->id);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// The vocabulary

// Growing bytes with each token's (off, len) in them.
typedef struct Spelled {
    uint8_t* bytes;
    size_t len, cap;
} Spelled;

static void spelled_add(Spelled* s, const void* p, size_t n) {
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 1 << 16;
        while (cap < s->len + n) cap *= 2;
        s->bytes = realloc(s->bytes, cap);
        CHECK(s->bytes, "", "out of memory for %zu token bytes", cap);
        s->cap = cap;
    }
    memcpy(s->bytes + s->len, p, n);
    s->len += n;
}

// A vocabulary or merge text as the encoder sees it: through the byte alphabet (byte-level), or
// as the file spells it (SentencePiece-style: "▁the").
static int piece_of(const char* path, const char* where, const HfTokenizerFile* f, HfText t,
                    const Form* form, const int16_t* cp_to_byte, Spelled* out, HfText* piece,
                    char* err, size_t errlen) {
    const uint8_t *p = f->text + t.off, *end = p + t.len;
    piece->off = (uint32_t)out->len;
    if (form->sentencepiece) {
        spelled_add(out, p, t.len);
    } else {
        while (p < end) {
            uint32_t cp = 0;
            const int k = bpe_utf8_decode(p, end, &cp);
            if (k == 0 || cp >= BPE_ALPHABET_CODE_POINTS || cp_to_byte[cp] < 0) {
                char found[32];
                if (k == 0) snprintf(found, sizeof found, "invalid UTF-8");
                else snprintf(found, sizeof found, "U+%04X", cp);
                return set_err(err, errlen, "%s: %s: token \"%.*s\": expected characters of the "
                               "byte-level alphabet (GPT-2's), found %s", path, where,
                               (int)(t.len < 40 ? t.len : 40), (const char*)f->text + t.off,
                               found);
            }
            const uint8_t byte = (uint8_t)cp_to_byte[cp];
            spelled_add(out, &byte, 1);
            p += k;
        }
    }
    piece->len = (uint32_t)(out->len - piece->off);
    return 0;
}

static int hex_digit(uint8_t c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

// A SentencePiece-style token's decoded bytes: "<0xXX>" is byte XX, "▁" a space.
static void decode_sp(const uint8_t* p, size_t n, Spelled* out) {
    if (n == 6 && memcmp(p, "<0x", 3) == 0 && p[5] == '>' && hex_digit(p[3]) >= 0 &&
        hex_digit(p[4]) >= 0) {
        const uint8_t byte = (uint8_t)(hex_digit(p[3]) * 16 + hex_digit(p[4]));
        spelled_add(out, &byte, 1);
        return;
    }
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && memcmp(p + i, SP_SPACE, 3) == 0) {
            spelled_add(out, " ", 1);
            i += 3;
        } else {
            spelled_add(out, p + i, 1);
            i++;
        }
    }
}

// Fills the table (decoded bytes), the pieces (SentencePiece-style: the spelled ones), the index
// of the vocabulary's pieces and the byte tokens. vocab_piece[i]: vocabulary entry i's piece.
static int build_tokens(const char* path, const HfTokenizerFile* f, const Form* form,
                        const Spelled* pieces, const HfText* vocab_piece, BpeVocab* v,
                        char* err, size_t errlen) {
    uint32_t V = 0;
    for (size_t i = 0; i < f->nvocab; i++) V = f->vocab[i].id + 1 > V ? f->vocab[i].id + 1 : V;
    for (size_t i = 0; i < f->nadded; i++) V = f->added[i].id + 1 > V ? f->added[i].id + 1 : V;
    const size_t entries = f->nvocab + f->nadded;
    if (V > entries)  // a gap, found before anything of V's size is allocated
        return set_err(err, errlen, "%s: model.vocab and added_tokens: expected the ids 0..%zu "
                       "of their %zu tokens, found id %u", path, entries - 1, entries, V - 1);
    // Each id's piece: a vocabulary entry's, or an added token's text.
    const uint8_t** at = xcalloc(V, sizeof *at, "token pieces");
    uint32_t* len = xcalloc(V, sizeof *len, "token lengths");
    uint8_t* added = xcalloc(V, 1, "added token flags");
    int rc = 0;
    for (size_t i = 0; i < f->nvocab && rc == 0; i++) {
        const uint32_t id = f->vocab[i].id;
        if (at[id])
            rc = set_err(err, errlen, "%s: model.vocab: id %u: expected each id once, found it "
                         "twice", path, id);
        at[id] = pieces->bytes + vocab_piece[i].off;
        len[id] = vocab_piece[i].len;
    }
    for (size_t i = 0; i < f->nadded && rc == 0; i++) {  // the vocabulary's own token, or new
        const HfEntry* e = &f->added[i];
        const uint8_t* text = f->text + e->text.off;
        if (at[e->id] && (added[e->id] || len[e->id] != e->text.len ||
                          memcmp(at[e->id], text, e->text.len) != 0))
            rc = set_err(err, errlen, "%s: added_tokens: id %u \"%.*s\": expected a new id or the "
                         "vocabulary's token of that id, found another", path, e->id,
                         (int)e->text.len, (const char*)text);
        if (!at[e->id]) {
            at[e->id] = text;
            len[e->id] = e->text.len;
        }
        added[e->id] = 1;
    }
    for (uint32_t id = 0; id < V && rc == 0; id++)
        if (!at[id])
            rc = set_err(err, errlen, "%s: model.vocab and added_tokens: expected every id "
                         "0..%u, found none for %u", path, V - 1, id);
    if (rc == 0) {
        Spelled table = {0}, spelled = {0};
        TokenTable* t = &v->table;
        t->vocab_size = V;
        t->eot_id = TOKENIZER_NO_EOT;
        t->offset = xmalloc(((size_t)V + 1) * sizeof *t->offset, "token offsets");
        if (form->sentencepiece)
            v->piece_offset = xmalloc(((size_t)V + 1) * sizeof *v->piece_offset, "piece offsets");
        for (uint32_t id = 0; id < V; id++) {
            t->offset[id] = (uint32_t)table.len;
            if (!form->sentencepiece) {
                spelled_add(&table, at[id], len[id]);
                continue;
            }
            v->piece_offset[id] = (uint32_t)spelled.len;
            spelled_add(&spelled, at[id], len[id]);
            if (added[id]) spelled_add(&table, at[id], len[id]);
            else decode_sp(at[id], len[id], &table);
        }
        t->offset[V] = (uint32_t)table.len;
        spelled_add(&table, "", 1);  // never empty
        t->bytes = table.bytes;
        TokenTable index_of = *t;  // the index looks pieces up
        if (form->sentencepiece) {
            v->piece_offset[V] = (uint32_t)spelled.len;
            spelled_add(&spelled, "", 1);
            v->piece_bytes = spelled.bytes;
            index_of.offset = v->piece_offset;
            index_of.bytes = v->piece_bytes;
        }
        token_index_init(&v->index, &index_of, f->nvocab);
        for (size_t i = 0; i < f->nvocab && rc == 0; i++)
            if (token_index_insert(&v->index, f->vocab[i].id) != 0)
                rc = set_err(err, errlen, "%s: model.vocab: token id %u: expected each token "
                             "once, found a repeat", path, f->vocab[i].id);
    }
    free(at);
    free(len);
    free(added);
    for (int b = 0; b < 256 && rc == 0; b++) {  // a byte's token, or its byte fallback token
        char name[8];
        const uint8_t byte = (uint8_t)b;
        snprintf(name, sizeof name, "<0x%02X>", b);
        const long id = form->sentencepiece ? token_index_find(&v->index, (uint8_t*)name, 6)
                                            : token_index_find(&v->index, &byte, 1);
        if (id < 0)
            rc = set_err(err, errlen, "%s: model.vocab: expected every %s as a token, found none "
                         "for byte 0x%02X", path, form->sentencepiece ? "byte fallback token "
                         "<0xXX>" : "single byte", b);
        else v->byte_token[b] = (uint32_t)id;
    }
    return rc;
}

static int build_rules(const char* path, const HfTokenizerFile* f, const Spelled* pieces,
                       const HfMerge* merge_piece, BpeVocab* v, char* err, size_t errlen) {
    v->rules = xmalloc((f->nmerges ? f->nmerges : 1) * sizeof *v->rules, "merge rules");
    Spelled joined = {0};
    int rc = 0;
    for (size_t r = 0; r < f->nmerges && rc == 0; r++) {
        const HfMerge* m = &merge_piece[r];
        const uint8_t *a = pieces->bytes + m->left.off, *b = pieces->bytes + m->right.off;
        const long left = token_index_find(&v->index, a, m->left.len);
        const long right = token_index_find(&v->index, b, m->right.len);
        joined.len = 0;
        spelled_add(&joined, a, m->left.len);
        spelled_add(&joined, b, m->right.len);
        const long merged = token_index_find(&v->index, joined.bytes, joined.len);
        if (left < 0 || right < 0 || merged < 0)
            rc = set_err(err, errlen, "%s: model.merges[%zu]: expected %s of the vocabulary, "
                         "found \"%.*s\" that is not one", path, r,
                         merged < 0 && left >= 0 && right >= 0 ? "the merge to be a token"
                                                               : "two tokens",
                         (int)(left < 0 ? m->left.len : right < 0 ? m->right.len : joined.len),
                         (const char*)(left < 0 ? a : right < 0 ? b : joined.bytes));
        else v->rules[v->nrules++] = (BpeRule){(uint32_t)left, (uint32_t)right,
                                               (uint32_t)merged, (uint32_t)r};
    }
    free(joined.bytes);
    return rc;
}

// SentencePiece-style: text may be split into words before each run of "▁" that follows another
// character when no token has a "▁" after another character (Llama 2's and Mistral's have none).
static int sp_words_split(const BpeVocab* v) {
    for (uint32_t id = 0; id < v->table.vocab_size; id++) {
        const uint8_t *p = v->piece_bytes + v->piece_offset[id];
        const uint8_t* end = v->piece_bytes + v->piece_offset[id + 1];
        while (end - p >= 3 && memcmp(p, SP_SPACE, 3) == 0) p += 3;
        for (; end - p >= 3; p++)
            if (memcmp(p, SP_SPACE, 3) == 0) return 0;
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------
// tokenizer_config.json: the document token

// A special token entry: a string, {"content": ...} (older files' AddedToken) or null ("").
static int read_token_name(JsonCursor* c, char* out, size_t n) {
    out[0] = 0;
    const char* p = c->p;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p == '"') return json_string(c, out, n);
    if (*p == '{') {
        char key[32];
        int more;
        if (json_object_begin(c) != 0) return -1;
        while ((more = json_object_next(c, key, sizeof key)) == 1)
            if ((strcmp(key, "content") == 0 ? json_string(c, out, n) : json_skip(c)) != 0)
                return -1;
        return more == 0 ? 0 : -1;
    }
    int v;
    return json_literal(c, &v);
}

static int document_token(const char* path, TokenTable* t, char* err, size_t errlen) {
    char config[4096];
    const char* slash = strrchr(path, '/');
    const int dir_len = slash ? (int)(slash - path) : 1;
    snprintf(config, sizeof config, "%.*s/tokenizer_config.json", dir_len, slash ? path : ".");
    char bos[512] = "", eos[512] = "";
    struct stat st;
    if (stat(config, &st) == 0) {
        uint8_t* text = NULL;
        size_t len = 0;
        if (whole_file_read(config, MAX_CONFIG_FILE_BYTES, "tokenizer config", &text, &len,
                            err, errlen) != 0)
            return -1;
        JsonCursor c;
        char key[64];
        int more, rc = 0;
        json_init(&c, (const char*)text);
        if (json_object_begin(&c) != 0) rc = -1;
        while (rc == 0 && (more = json_object_next(&c, key, sizeof key)) == 1)
            rc = strcmp(key, "bos_token") == 0 ? read_token_name(&c, bos, sizeof bos)
               : strcmp(key, "eos_token") == 0 ? read_token_name(&c, eos, sizeof eos)
               : json_skip(&c);
        if (rc == 0 && (more != 0 || json_end(&c) != 0)) rc = -1;
        free(text);
        if (rc != 0) return set_err(err, errlen, "%s: %s", config, c.err);
        const char* name = bos[0] ? bos : eos;
        if (name[0]) {
            const long id = token_table_find(t, name, strlen(name));
            if (id < 0)
                return set_err(err, errlen, "%s: %s \"%s\": expected a token of %s, found none",
                               config, bos[0] ? "bos_token" : "eos_token", name, path);
            t->eot_id = (uint32_t)id;
            return 0;
        }
    }
    const long id = token_table_find(t, "<|endoftext|>", 13);
    t->eot_id = id < 0 ? TOKENIZER_NO_EOT : (uint32_t)id;
    return 0;
}

// ---------------------------------------------------------------------------------------------

// The chunk rule and the description line of a loaded vocabulary.
static void describe(const Form* form, BpeVocab* v) {
    const char* p = form->pattern;
    const int gpt2 = p && strcmp(p, gpt2_pattern) == 0;
    const int llama3 = p && strcmp(p, llama3_pattern) == 0;
    const int qwen2 = p && strcmp(p, qwen2_pattern) == 0;
    v->chunk_rule = gpt2 ? BPE_CHUNK_GPT2 : llama3 || qwen2 ? BPE_CHUNK_LLAMA3 : BPE_CHUNK_NONE;
    if (form->sentencepiece) {
        snprintf(v->description, sizeof v->description, "tokenizer.json, SentencePiece-style "
                 "BPE with byte fallback");
        return;
    }
    char split[64] = "";
    if (v->nadded) {
        size_t n = 0;
        for (size_t k = 0; k < v->nadded; k++) n += !v->added[k].special;
        snprintf(split, sizeof split, ", %zu added token%s split out", n, n == 1 ? "" : "s");
    }
    snprintf(v->description, sizeof v->description, "tokenizer.json, byte-level BPE, %s%s "
             "pattern%s", v->nfc ? "NFC, " : "", gpt2 ? "GPT-2's" : llama3 ? "Llama 3's"
             : qwen2 ? "Qwen2's" : "its own", split);
}

int hf_tokenizer_load(const char* path, BpeVocab* vocab, char* err, size_t errlen) {
    memset(vocab, 0, sizeof *vocab);
    HfTokenizerFile f;
    if (hf_tokenizer_file_read(path, &f, err, errlen) != 0) return -1;
    BpeVocab v = {0};
    Form form = {0};
    Spelled pieces = {0};
    HfText* vocab_piece = xmalloc((f.nvocab + 1) * sizeof *vocab_piece, "vocabulary pieces");
    HfMerge* merge_piece = xmalloc((f.nmerges + 1) * sizeof *merge_piece, "merge pieces");
    int16_t cp_to_byte[BPE_ALPHABET_CODE_POINTS];
    bpe_alphabet_decoder(cp_to_byte);
    int rc = check_model(path, &f, err, errlen);
    if (rc == 0) rc = file_form(path, &f, &form, err, errlen);
    if (rc == 0 && form.pattern &&
        hf_pattern_to_pcre2(form.pattern, &v.pattern, err, errlen) != 0) {
        char reason[256];
        snprintf(reason, sizeof reason, "%s", err);
        rc = set_err(err, errlen, "%s: pre_tokenizer: %s", path, reason);
    }
    for (size_t i = 0; i < f.nvocab && rc == 0; i++)
        rc = piece_of(path, "model.vocab", &f, f.vocab[i].text, &form, cp_to_byte, &pieces,
                      &vocab_piece[i], err, errlen);
    for (size_t r = 0; r < f.nmerges && rc == 0; r++) {
        char where[48];
        snprintf(where, sizeof where, "model.merges[%zu]", r);
        rc = piece_of(path, where, &f, f.merges[r].left, &form, cp_to_byte, &pieces,
                      &merge_piece[r].left, err, errlen);
        if (rc == 0)
            rc = piece_of(path, where, &f, f.merges[r].right, &form, cp_to_byte, &pieces,
                          &merge_piece[r].right, err, errlen);
    }
    if (rc == 0) rc = build_tokens(path, &f, &form, &pieces, vocab_piece, &v, err, errlen);
    if (rc == 0) rc = build_rules(path, &f, &pieces, merge_piece, &v, err, errlen);
    if (rc == 0) rc = build_added(path, &f, &form, &v, err, errlen);
    if (rc == 0) rc = document_token(path, &v.table, err, errlen);
    if (rc == 0) {
        v.merge_one_at_a_time = 1;
        v.ignore_merges = f.ignore_merges == 1;
        v.sentencepiece = form.sentencepiece;
        v.table.strip_first_space = form.strip_first_space;
        v.sp_words = form.sentencepiece && sp_words_split(&v);
        v.nfc = form.nfc;
        describe(&form, &v);
        *vocab = v;
    } else {
        bpe_vocab_free(&v);
    }
    free(pieces.bytes);
    free(vocab_piece);
    free(merge_piece);
    hf_tokenizer_file_free(&f);
    return rc;
}
