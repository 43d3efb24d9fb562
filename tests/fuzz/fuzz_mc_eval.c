// Multiple-choice eval files (data/mc_eval.c): an accepted set is well formed (rows, lengths,
// tokens within the vocabulary), fills batches whose masks count each completion's tokens, and
// written again reads back as the same set; a capped read is the start of the whole one.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/mc_eval.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int same_rows(const McEvalSet* a, const McEvalSet* b, long rows) {
    for (long r = 0; r < rows; r++) {
        if (a->row_ctx[r] != b->row_ctx[r] || a->row_len[r] != b->row_len[r]) return 0;
        const int32_t *ca = a->tokens + a->row_tokens[r], *cb = b->tokens + b->row_tokens[r];
        const int32_t *xa = a->tokens + a->row_completion[r], *xb = b->tokens + b->row_completion[r];
        if (memcmp(ca, cb, sizeof(int32_t) * a->row_ctx[r]) ||
            memcmp(xa, xb, sizeof(int32_t) * a->row_len[r]))
            return 0;
    }
    return 1;
}

// a's first `examples` examples are b's.
static int same_start(const McEvalSet* a, const McEvalSet* b, int examples) {
    if (a->examples < examples || b->examples < examples) return 0;
    for (int e = 0; e <= examples; e++)
        if (a->first_row[e] != b->first_row[e] || (e < examples && a->label[e] != b->label[e]))
            return 0;
    return same_rows(a, b, a->first_row[examples]);
}

static void check_set(const McEvalSet* s, int vocab) {
    fuzz_expect(s->examples >= 1 && s->first_row[0] == 0 && s->first_row[s->examples] == s->rows,
                "rows do not tile the examples");
    int longest = 0;
    for (int e = 0; e < s->examples; e++) {
        const long k = s->first_row[e + 1] - s->first_row[e];
        fuzz_expect(k >= 2 && k <= MC_EVAL_MAX_COMPLETIONS && s->label[e] >= 0 && s->label[e] < k,
                    "an example's completions or label out of range");
    }
    for (long r = 0; r < s->rows; r++) {
        fuzz_expect(s->row_ctx[r] >= 1 && s->row_len[r] >= 1, "an empty context or completion");
        if (s->row_ctx[r] + s->row_len[r] > longest) longest = s->row_ctx[r] + s->row_len[r];
    }
    fuzz_expect(longest == s->longest_row, "longest_row is not the longest row");
    for (long i = 0; i < s->ntokens; i++)
        fuzz_expect(s->tokens[i] >= 0 && s->tokens[i] < (vocab > 0 ? vocab : 65535),
                    "a token beyond the vocabulary");
    // Batches of 3 rows (the last one partly past the end): each row's mask counts its
    // completion, and its inputs after the context are the completion's targets shifted.
    const int B = 3, T = s->longest_row;
    int32_t* in = malloc(sizeof(int32_t) * B * T);
    int32_t* tg = malloc(sizeof(int32_t) * B * T);
    int32_t* mk = malloc(sizeof(int32_t) * B * T);
    for (long r0 = 0; r0 < s->rows; r0 += B) {
        mc_eval_fill(s, r0, B, T, 7, in, tg, mk);
        for (int b = 0; b < B; b++) {
            int count = 0;
            for (int t = 0; t < T; t++) {
                count += mk[b * T + t];
                if (mk[b * T + t]) fuzz_expect(tg[b * T + t] == in[b * T + t + 1], "a masked target is not the next input");
            }
            fuzz_expect(count == (r0 + b < s->rows ? s->row_len[r0 + b] : 0),
                        "a row's mask does not count its completion");
        }
    }
    free(in);
    free(tg);
    free(mk);
    double* loss = calloc((size_t)s->rows, sizeof(double));
    const McEvalScore sc = mc_eval_score(s, loss);   // all tied: the first completion everywhere
    int first = 0;
    for (int e = 0; e < s->examples; e++) first += s->label[e] == 0;
    fuzz_expect(sc.correct == first && sc.correct_norm == first, "ties do not go to the first");
    free(loss);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* path = fuzz_file("eval.bin", data, size);
    char err[ERR_LEN] = "";
    McEvalSet all, gpt2, capped, back;
    if (mc_eval_read(path, 0, 0, &all, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        fuzz_expect(mc_eval_read(path, 0, 50257, &gpt2, err, sizeof err) != 0,
                    "a vocabulary made a refused file acceptable");
        fuzz_expect_error_line(err);
        if (mc_eval_read(path, 2, 0, &capped, err, sizeof err) == 0) {   // its start may be fine
            check_set(&capped, 0);
            mc_eval_free(&capped);
        } else {
            fuzz_expect_error_line(err);
        }
        return 0;
    }
    check_set(&all, 0);
    if (mc_eval_read(path, 0, 50257, &gpt2, err, sizeof err) == 0) {
        fuzz_expect(same_start(&all, &gpt2, all.examples), "the vocabulary check changed the set");
        mc_eval_free(&gpt2);
    } else {
        fuzz_expect_error_line(err);
    }
    fuzz_expect(mc_eval_read(path, 2, 0, &capped, err, sizeof err) == 0,
                "the start of an accepted file was refused");
    fuzz_expect(same_start(&all, &capped, capped.examples) &&
                capped.examples == (all.examples < 2 ? all.examples : 2),
                "a capped read is not the start of the whole");
    mc_eval_free(&capped);
    char out[4096];
    snprintf(out, sizeof out, "%s/written.bin", fuzz_dir());
    if (mc_eval_write(out, &all, err, sizeof err) == 0) {
        fuzz_expect(mc_eval_read(out, 0, 0, &back, err, sizeof err) == 0,
                    "a written set was refused");
        fuzz_expect(same_start(&all, &back, all.examples) && back.examples == all.examples,
                    "a written set read back differently");
        mc_eval_free(&back);
    } else {
        fuzz_expect_error_line(err);   // e.g. more than 65535 examples
    }
    mc_eval_free(&all);
    return 0;
}
