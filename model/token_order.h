// The rows of a micro-batch ordered by token: what the CUDA encoder backward (model/encoder.cu)
// needs to sum the rows that share a token in a fixed order without float atomics. Computed on
// the host, where the tokens come from, while the device is still busy with the backward, and
// uploaded beside them (model/gpt.c), as llm.c does: the device then runs one summing kernel
// instead of a sort. Plain C, no backend.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// order[i], i in [0, n): the rows 0..n-1 sorted by (tokens[row], row), ascending: the rows of one
// token in row order. scratch: n ints. A stable LSD radix sort on bytes, skipping the bytes that
// are 0 in every token (two passes for a GPT-2 vocabulary). Tokens must be >= 0 (a negative one
// is a caller bug: the data loader and the trainer refuse them first).
void token_order(int* order, int* scratch, const int* tokens, size_t n);

#ifdef __cplusplus
}
#endif
