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
        int past = T;
        for (int t = T - 1; t >= 0; t--) {
            e[t] = past;
            if (s[t] == t) past = t;
        }
    }
}
