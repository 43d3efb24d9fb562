// Row copies between the strided token layouts of the distributed schedules and the contiguous
// per-rank blocks that collectives send and receive.
//
// A collective over G ranks moves G blocks; block g holds (B, Tl, w) rows, contiguous. After an
// all-gather in the cyclic layout, row j of block g is the token with local index g + G*j of the
// gathered (B, G*Tl, w) tensor; before a reduce-scatter or all-to-all the same mapping tells
// which block (destination rank) a row goes to.
#pragma once
#include "model/real.h"

// dst (rows, w) with row stride ldd  <-  src (rows, w) with row stride lds.
void copy_rows(real* dst, long ldd, const real* src, long lds, long rows, int w);

// blocks: G blocks of (B, Tl, w) at stride bstride  ->  rows: (B, G*Tl, w), row stride ld;
// block g row (b, j) lands on row (b, g + G*j).
void blocks_to_rows(real* rows, long ld, const real* blocks, long bstride, int G, int B, int Tl,
                    int w);
// The inverse: row (b, g + G*j) of rows goes to block g row (b, j).
void rows_to_blocks(real* blocks, long bstride, const real* rows, long ld, int G, int B, int Tl,
                    int w);
