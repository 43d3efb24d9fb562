// Document bounds of packed sequences, for document masking (AttentionProblem.docs): llm.c's
// shards prefix every document with <|endoftext|>, so a document begins at each occurrence of a
// boundary token and runs to the next one; the tokens before a sequence's first boundary continue
// a document begun in an earlier sequence and form one document of their own.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// tokens: (B, T). start, end: (B, T), per position: the first position of its document and one
// past its last.
void document_bounds(const int* tokens, int B, int T, int boundary, int* start, int* end);

// The (query, key) pairs attention computes over B sequences of T tokens: a query at t sees the
// keys from the later of its document's start (start: (B, T) as above, or NULL: no documents)
// and, under a sliding window W (0: none), t - W + 1, up to t.
double document_pairs(const int* start, int B, int T, long window);

// The most keys any query's document gives it: max over (b, t) of t - start[b, t] + 1
// (DocumentBounds.span), from 1 (every token a document) to T.
int document_span(const int* start, int B, int T);

#ifdef __cplusplus
}
#endif
