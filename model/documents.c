#include "model/documents.h"

void document_bounds(const int* tokens, int B, int T, int boundary, int* start, int* end) {
    for (int b = 0; b < B; b++) {
        const int* tok = tokens + (long)b * T;
        int* s = start + (long)b * T;
        int* e = end + (long)b * T;
        int first = 0;
        for (int t = 0; t < T; t++) {
            if (t > 0 && tok[t] == boundary) first = t;
            s[t] = first;
        }
        int past = T;   // one past the last position of the document being walked back
        for (int t = T - 1; t >= 0; t--) {
            e[t] = past;
            if (s[t] == t) past = t;
        }
    }
}

double document_pairs(const int* start, int B, int T, long window) {
    double pairs = 0;
    for (int b = 0; b < B; b++)
        for (long t = 0; t < T; t++) {
            long lo = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
            if (start && start[(long)b * T + t] > lo) lo = start[(long)b * T + t];
            pairs += (double)(t + 1 - lo);
        }
    return pairs;
}

int document_span(const int* start, int B, int T) {
    int span = 0;
    for (long i = 0; i < (long)B * T; i++) {
        const int n = (int)(i % T) - start[i] + 1;
        span = n > span ? n : span;
    }
    return span;
}
