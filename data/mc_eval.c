// Multiple-choice evaluation files (llm.c's format) and their completion-style scoring
// (data/mc_eval.h).
#include "data/mc_eval.h"

#include <stdlib.h>
#include <string.h>

#include "comm/atomic_file.h"
#include "comm/fail.h"
#include "data/whole_file.h"

#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * 4)
// HellaSwag's validation file is 3.6 MB, its training file about 40; refuse what no eval set is.
#define MAX_FILE_BYTES ((size_t)1 << 30)
// Words (uint16) before an example's context tokens: delimiter, bytes, index, label,
// completions, context length.
#define EXAMPLE_HEAD_WORDS 6

static int32_t word_at(const uint8_t* body, size_t k) {
    return (int32_t)body[2 * k] | (int32_t)body[2 * k + 1] << 8;
}

// Checks the first n examples of the body (`words` uint16 words) and appends each to s; *end is
// where they end. Token ids must be below `limit` (`what` names the bound in the message).
static int read_examples(const char* path, const uint8_t* body, size_t words, int n,
                         int longest_bytes, int32_t limit, const char* what, McEvalSet* s,
                         size_t* end, char* err, size_t errlen) {
    int32_t* tokens = xmalloc(sizeof(int32_t) * 32768, "eval example");   // < 65536 bytes
    const int32_t* comp[MC_EVAL_MAX_COMPLETIONS];
    int comp_len[MC_EVAL_MAX_COMPLETIONS];
    size_t k = 0;
    int rc = 0;
    for (int e = 0; rc == 0 && e < n; e++) {
        if (k + EXAMPLE_HEAD_WORDS > words) {
            rc = set_err(err, errlen, "%s: example %d: expected its %d-word head at byte %zu, "
                         "found the end of the file (truncated?)", path, e, EXAMPLE_HEAD_WORDS,
                         HEADER_BYTES + 2 * k);
            break;
        }
        const int32_t start = word_at(body, k), bytes = word_at(body, k + 1);
        const int32_t index = word_at(body, k + 2), label = word_at(body, k + 3);
        const int32_t completions = word_at(body, k + 4), ctx = word_at(body, k + 5);
        if (start != MC_EVAL_START)
            rc = set_err(err, errlen, "%s: example %d: expected the delimiter %d at byte %zu, "
                         "found %d", path, e, MC_EVAL_START, HEADER_BYTES + 2 * k, start);
        else if (bytes % 2 || bytes < 2 * EXAMPLE_HEAD_WORDS || k + (size_t)bytes / 2 > words)
            rc = set_err(err, errlen, "%s: example %d: byte count: expected an even count of "
                         "at least %d within the file's %zu remaining bytes, found %d", path, e,
                         2 * EXAMPLE_HEAD_WORDS, 2 * (words - k), bytes);
        else if (bytes > longest_bytes)
            rc = set_err(err, errlen, "%s: example %d: byte count %d is above header[3] "
                         "(longest example) %d", path, e, bytes, longest_bytes);
        else if (index != (e & 0xffff))
            rc = set_err(err, errlen, "%s: example %d: index: expected %d, found %d", path, e,
                         e & 0xffff, index);
        else if (completions < 2 || completions > MC_EVAL_MAX_COMPLETIONS)
            rc = set_err(err, errlen, "%s: example %d: completions: expected 2 to %d, found %d",
                         path, e, MC_EVAL_MAX_COMPLETIONS, completions);
        else if (label >= completions)
            rc = set_err(err, errlen, "%s: example %d: label: expected below its %d "
                         "completions, found %d", path, e, completions, label);
        else if (ctx < 1)
            rc = set_err(err, errlen, "%s: example %d: context length: expected at least 1 "
                         "token, found 0", path, e);
        if (rc != 0) break;
        // The tokens, as stored: the context, then each completion after its length word.
        const size_t example_end = k + (size_t)bytes / 2;
        size_t w = k + EXAMPLE_HEAD_WORDS, nt = 0;
        for (int c = -1; rc == 0 && c < completions; c++) {
            if (c >= 0 && w >= example_end) {
                rc = set_err(err, errlen, "%s: example %d: its lengths run past its byte count "
                             "%d (at a completion)", path, e, bytes);
                break;
            }
            const int32_t len = c < 0 ? ctx : word_at(body, w++);
            if (len < 1) {
                rc = set_err(err, errlen, "%s: example %d: completion %d: expected at least "
                             "1 token, found 0", path, e, c);
                break;
            }
            if (w + (size_t)len > example_end) {
                rc = set_err(err, errlen, "%s: example %d: its lengths run past its byte count "
                             "%d (at %s)", path, e, bytes, c < 0 ? "the context" : "a completion");
                break;
            }
            if (c >= 0) {
                comp[c] = tokens + nt;
                comp_len[c] = len;
            }
            for (int32_t j = 0; j < len; j++, w++) {
                tokens[nt++] = word_at(body, w);
                if (tokens[nt - 1] >= limit) {
                    rc = set_err(err, errlen, "%s: example %d: token %d at byte %zu: expected "
                                 "below %s %d", path, e, tokens[nt - 1], HEADER_BYTES + 2 * w,
                                 what, limit);
                    break;
                }
            }
        }
        if (rc == 0 && w != example_end)
            rc = set_err(err, errlen, "%s: example %d: its lengths add up to %zu bytes, its "
                         "byte count says %d", path, e, 2 * (w - k), bytes);
        if (rc == 0) mc_eval_append(s, label, tokens, ctx, completions, comp, comp_len);
        k = example_end;
    }
    free(tokens);
    *end = k;
    return rc;
}

int mc_eval_read(const char* path, int max_examples, int vocab, McEvalSet* s,
                 char* err, size_t errlen) {
    memset(s, 0, sizeof *s);
    uint8_t* data;
    size_t len;
    if (whole_file_read(path, MAX_FILE_BYTES, "multiple-choice eval file", &data, &len, err,
                        errlen) != 0)
        return -1;
    int rc = 0;
    if (len < HEADER_BYTES) {
        rc = set_err(err, errlen, "%s: file size: expected at least %d bytes (the header), found "
                     "%zu", path, HEADER_BYTES, len);
        goto done;
    }
    int32_t h[4];   // magic, version, examples, longest example in bytes
    memcpy(h, data, sizeof h);   // little-endian host (data/shard.c)
    if (h[0] != MC_EVAL_MAGIC) {
        rc = set_err(err, errlen, "%s: header[0] (magic): expected %d (a multiple-choice eval "
                     "file), found %d", path, MC_EVAL_MAGIC, h[0]);
        goto done;
    }
    if (h[1] != MC_EVAL_VERSION) {
        rc = set_err(err, errlen, "%s: header[1] (version): expected %d, found %d", path,
                     MC_EVAL_VERSION, h[1]);
        goto done;
    }
    if (h[2] < 1) {
        rc = set_err(err, errlen, "%s: header[2] (examples): expected at least 1, found %d", path,
                     h[2]);
        goto done;
    }
    if (h[3] < 2 * EXAMPLE_HEAD_WORDS || h[3] > 65535) {
        rc = set_err(err, errlen, "%s: header[3] (longest example): expected %d to 65535 bytes, "
                     "found %d", path, 2 * EXAMPLE_HEAD_WORDS, h[3]);
        goto done;
    }
    if ((len - HEADER_BYTES) % 2) {
        rc = set_err(err, errlen, "%s: file size: expected the header and whole uint16 words, "
                     "found %zu bytes", path, len);
        goto done;
    }
    const int n = max_examples > 0 && max_examples < h[2] ? max_examples : h[2];
    const size_t words = (len - HEADER_BYTES) / 2;
    const int by_vocab = vocab > 0 && vocab < MC_EVAL_START;
    size_t end;
    rc = read_examples(path, data + HEADER_BYTES, words, n, h[3], by_vocab ? vocab : MC_EVAL_START,
                       by_vocab ? "the vocabulary size" : "the example delimiter", s, &end, err,
                       errlen);
    if (rc == 0 && n == h[2] && end != words)
        rc = set_err(err, errlen, "%s: end of file: expected it after the %d examples of "
                     "header[2], found %zu more bytes", path, h[2], 2 * (words - end));
done:
    free(data);
    if (rc != 0) mc_eval_free(s);
    return rc;
}

void mc_eval_free(McEvalSet* s) {
    free(s->label);
    free(s->first_row);
    free(s->row_ctx);
    free(s->row_len);
    free(s->row_tokens);
    free(s->row_completion);
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

// Capacity for `need` elements, doubling from *cap; 0 when *cap suffices.
static long grown(long cap, long need) {
    if (need <= cap) return 0;
    long c = cap ? cap : 16;
    while (c < need) c *= 2;
    return c;
}

static void* resize(void* p, long count, size_t size) {
    void* q = realloc(p, (size_t)count * size);
    CHECK(q, "the eval set does not fit in memory", "out of memory growing an eval set to %ld x "
          "%zu bytes", count, size);
    return q;
}

void mc_eval_append(McEvalSet* s, int label, const int32_t* ctx, int ctx_len, int completions,
                    const int32_t* const* comp, const int* comp_len) {
    CHECK(label >= 0 && label < completions && ctx_len >= 1, "caller bug",
          "mc_eval_append: label %d of %d completions, context of %d tokens", label, completions,
          ctx_len);
    long need = ctx_len;
    for (int c = 0; c < completions; c++) need += comp_len[c];
    long c;
    if ((c = grown(s->cap_examples, s->examples + 2))) {
        s->label = resize(s->label, c, sizeof(int));
        s->first_row = resize(s->first_row, c, sizeof(long));
        s->cap_examples = c;
    }
    const long rows = s->rows + completions;
    if ((c = grown(s->cap_rows, rows))) {
        s->row_ctx = resize(s->row_ctx, c, sizeof(int));
        s->row_len = resize(s->row_len, c, sizeof(int));
        s->row_tokens = resize(s->row_tokens, c, sizeof(long));
        s->row_completion = resize(s->row_completion, c, sizeof(long));
        s->cap_rows = c;
    }
    if ((c = grown(s->cap_tokens, s->ntokens + need))) {
        s->tokens = resize(s->tokens, c, sizeof(int32_t));
        s->cap_tokens = c;
    }
    const long at = s->ntokens;
    memcpy(s->tokens + at, ctx, sizeof(int32_t) * ctx_len);
    long t = at + ctx_len;
    s->label[s->examples] = label;
    s->first_row[s->examples] = s->rows;
    for (int k = 0; k < completions; k++) {
        const long r = s->rows + k;
        s->row_ctx[r] = ctx_len;
        s->row_len[r] = comp_len[k];
        s->row_tokens[r] = at;
        s->row_completion[r] = t;
        memcpy(s->tokens + t, comp[k], sizeof(int32_t) * comp_len[k]);
        t += comp_len[k];
        if (ctx_len + comp_len[k] > s->longest_row) {
            s->longest_row = ctx_len + comp_len[k];
            s->longest_example = s->examples;
        }
    }
    s->ntokens = t;
    s->rows = rows;
    s->examples++;
    s->first_row[s->examples] = rows;
}

int mc_eval_write(const char* path, const McEvalSet* s, char* err, size_t errlen) {
    if (s->examples < 1 || s->examples > 65535)
        return set_err(err, errlen, "%s: expected 1 to 65535 examples (the format's indices are "
                       "16-bit), found %d", path, s->examples);
    // Each example as its uint16 stream; the longest is the header's fourth field.
    long longest = 0;
    for (int e = 0; e < s->examples; e++) {
        const long r0 = s->first_row[e], r1 = s->first_row[e + 1];
        long words = EXAMPLE_HEAD_WORDS + s->row_ctx[r0];
        for (long r = r0; r < r1; r++) words += 1 + s->row_len[r];
        if (2 * words > 65535)
            return set_err(err, errlen, "%s: example %d: expected at most 65535 bytes, found %ld "
                           "(a context and completions of %ld tokens)", path, e, 2 * words,
                           words - EXAMPLE_HEAD_WORDS - (r1 - r0));
        if (2 * words > longest) longest = 2 * words;
    }
    for (long i = 0; i < s->ntokens; i++)
        if (s->tokens[i] < 0 || s->tokens[i] >= MC_EVAL_START)
            return set_err(err, errlen, "%s: token %d: expected 0 to 65534 (uint16, 65535 "
                           "delimits examples)", path, s->tokens[i]);
    uint8_t header[HEADER_BYTES] = {0};
    const int32_t h[4] = {MC_EVAL_MAGIC, MC_EVAL_VERSION, s->examples, (int32_t)longest};
    memcpy(header, h, sizeof h);   // little-endian host (data/shard.c)
    AtomicFile af;
    if (atomic_open(&af, path, err, errlen) != 0) return -1;
    int rc = atomic_write(&af, header, sizeof header, err, errlen);
    uint16_t* w = xmalloc(sizeof(uint16_t) * 65536, "eval example");
    for (int e = 0; rc == 0 && e < s->examples; e++) {
        const long r0 = s->first_row[e], r1 = s->first_row[e + 1];
        const int ctx = s->row_ctx[r0];
        size_t k = 0;
        w[k++] = MC_EVAL_START;
        k++;   // the byte count, below
        w[k++] = (uint16_t)e;
        w[k++] = (uint16_t)s->label[e];
        w[k++] = (uint16_t)(r1 - r0);
        w[k++] = (uint16_t)ctx;
        for (int i = 0; i < ctx; i++) w[k++] = (uint16_t)s->tokens[s->row_tokens[r0] + i];
        for (long r = r0; r < r1; r++) {
            w[k++] = (uint16_t)s->row_len[r];
            for (int i = 0; i < s->row_len[r]; i++)
                w[k++] = (uint16_t)s->tokens[s->row_completion[r] + i];
        }
        w[1] = (uint16_t)(2 * k);
        rc = atomic_write(&af, w, 2 * k, err, errlen);
    }
    free(w);
    if (rc != 0) return -1;   // atomic_write removed the temporary file
    return atomic_commit(&af, err, errlen);
}

void mc_eval_fill(const McEvalSet* s, long first_row, int B, int T, int pad_token,
                  int32_t* inputs, int32_t* targets, int32_t* mask) {
    CHECK(s->longest_row <= T, "caller bug", "mc_eval_fill: a row of %d tokens in %d",
          s->longest_row, T);
    for (int b = 0; b < B; b++) {
        int32_t *in = inputs + (size_t)b * T, *tg = targets + (size_t)b * T;
        int32_t* mk = mask + (size_t)b * T;
        for (int t = 0; t < T; t++) in[t] = tg[t] = pad_token, mk[t] = 0;
        const long r = first_row + b;
        if (r >= s->rows) continue;
        const int ctx = s->row_ctx[r], len = s->row_len[r];
        const int32_t* c = s->tokens + s->row_tokens[r];
        const int32_t* x = s->tokens + s->row_completion[r];
        for (int t = 0; t < ctx + len; t++) in[t] = t < ctx ? c[t] : x[t - ctx];
        for (int t = 0; t + 1 < ctx + len; t++) tg[t] = in[t + 1];
        // The last context token predicts the completion's first token, and so on.
        for (int t = ctx - 1; t < ctx + len - 1; t++) mk[t] = 1;
    }
}

McEvalScore mc_eval_score(const McEvalSet* s, const double* row_loss) {
    McEvalScore r = {s->examples, 0, 0, 0, 0};
    for (int e = 0; e < s->examples; e++) {
        const long r0 = s->first_row[e], r1 = s->first_row[e + 1];
        long best = r0, best_norm = r0;
        for (long q = r0 + 1; q < r1; q++) {
            if (row_loss[q] < row_loss[best]) best = q;
            if (row_loss[q] / s->row_len[q] < row_loss[best_norm] / s->row_len[best_norm])
                best_norm = q;
        }
        r.correct += best - r0 == s->label[e];
        r.correct_norm += best_norm - r0 == s->label[e];
    }
    r.acc = s->examples ? (double)r.correct / s->examples : 0;
    r.acc_norm = s->examples ? (double)r.correct_norm / s->examples : 0;
    return r;
}
