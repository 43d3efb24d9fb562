#include "attention/token_blocks.h"

#include <string.h>

void copy_rows(real* dst, long ldd, const real* src, long lds, long rows, int w) {
    for (long i = 0; i < rows; i++) memcpy(dst + i * ldd, src + i * lds, sizeof(real) * w);
}

void blocks_to_rows(real* rows, long ld, const real* blocks, long bstride, int G, int B, int Tl,
                    int w) {
    const long T = (long)G * Tl;
    for (int g = 0; g < G; g++) {
        for (int b = 0; b < B; b++) {
            // block g, sequence b: rows g, g+G, g+2G, ... of sequence b
            copy_rows(rows + (b * T + g) * ld, G * ld, blocks + g * bstride + (long)b * Tl * w, w,
                      Tl, w);
        }
    }
}

void rows_to_blocks(real* blocks, long bstride, const real* rows, long ld, int G, int B, int Tl,
                    int w) {
    const long T = (long)G * Tl;
    for (int g = 0; g < G; g++) {
        for (int b = 0; b < B; b++) {
            copy_rows(blocks + g * bstride + (long)b * Tl * w, w, rows + (b * T + g) * ld, G * ld,
                      Tl, w);
        }
    }
}
