// Multiple-choice evaluation files in llm.c's format (dev/data/data_common.py write_evalfile:
// HellaSwag's hellaswag_val.bin, MMLU), and the completion-style scoring of llm.c and its
// dev/data/hellaswag.py: each completion follows the shared context in its own row, and the
// prediction is the completion of least loss over its own tokens.
//
// File: a 256 x int32 header (magic 20240522, version 1, number of examples, longest example in
// bytes), then per example a stream of uint16: 65535, the example's bytes, its index, the label,
// the number of completions, the context length and tokens, then each completion's length and
// tokens.
//
// Rows: completion c of example e is row first_row[e] + c. A row holds the context then the
// completion (positions 0 .. ctx + len - 1); the targets of positions ctx - 1 .. ctx + len - 2
// are the completion's tokens, and only those positions count (the mask).
#pragma once
#include <stddef.h>
#include <stdint.h>

#define MC_EVAL_MAGIC 20240522
#define MC_EVAL_VERSION 1
#define MC_EVAL_START 65535
#define MC_EVAL_MAX_COMPLETIONS 64

typedef struct {
    int examples;          // examples read (the file's first ones when capped)
    long rows;             // completions over all examples
    int* label;            // (examples) index of the right completion
    long* first_row;       // (examples + 1) example e's rows: first_row[e] .. first_row[e+1] - 1
    int* row_ctx;          // (rows) context length of the row's example
    int* row_len;          // (rows) the completion's length
    long* row_tokens;      // (rows) offset in tokens of the row's context: its completion
    long* row_completion;  // (rows) offset in tokens of the completion
    int32_t* tokens;       // every context and completion token, as in the file
    int longest_row;       // context + completion tokens of the longest row
    int longest_example;   // the example it belongs to
    long ntokens;          // tokens held
    long cap_examples, cap_rows, cap_tokens;   // mc_eval_append's capacities
} McEvalSet;

// Reads the first max_examples examples (<= 0: all) of an eval file, checking the header, each
// example's delimiter, byte count, index, label, completion count (2 .. 64), lengths (>= 1) and
// tokens (< vocab when vocab > 0, and < 65535, the delimiter, always), and that the file ends
// after its last example when all are read. Returns 0, or -1 with one line in err ("PATH: what: expected ..., found ...")
// and nothing allocated.
int mc_eval_read(const char* path, int max_examples, int vocab, McEvalSet* s,
                 char* err, size_t errlen);
void mc_eval_free(McEvalSet* s);

// Appends an example to a set (start from a zeroed one): label < completions, completion c's
// tokens at comp[c], comp_len[c] of them. Copies the tokens.
void mc_eval_append(McEvalSet* s, int label, const int32_t* ctx, int ctx_len, int completions,
                    const int32_t* const* comp, const int* comp_len);
// Writes a set in llm.c's layout, atomically (temporary file, fsync, rename). Refuses what the
// format cannot hold: more than 65535 examples, tokens of 65535 and above, an example of 65536
// bytes or more. Returns 0, or -1 with err set.
int mc_eval_write(const char* path, const McEvalSet* s, char* err, size_t errlen);

// Rows first_row .. first_row + B - 1 as a (B, T) batch of inputs, targets and mask (1 where the
// position's loss counts). Rows past the set's end, and positions past a row's tokens, hold
// pad_token with mask 0. Every row must fit: longest_row <= T.
void mc_eval_fill(const McEvalSet* s, long first_row, int B, int T, int pad_token,
                  int32_t* inputs, int32_t* targets, int32_t* mask);

// The scores from each row's summed loss over its mask (row_loss: (rows)). acc: the completion of
// least summed loss is the label; acc_norm (llm.c's HellaSwag figure): least mean loss per token.
// Ties go to the first completion.
typedef struct {
    int examples, correct, correct_norm;
    double acc, acc_norm;
} McEvalScore;
McEvalScore mc_eval_score(const McEvalSet* s, const double* row_loss);
