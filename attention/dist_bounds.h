// The shapes a distributed attention layer is created for (its scratch is sized for them) and the
// check every forward and backward makes: anything from 1 up to them. Shared by attention2d.c,
// attention2d_overlap.c and ring.c.
#pragma once
#include <stdio.h>

#include "comm/fail.h"

typedef struct {
    int B, Tl, NH, NKV, HS;   // NKV: key/value heads, dividing NH (grouped-query attention)
} DistBounds;

static inline DistBounds dist_bounds(const char* layer, int B, int Tl, int NH, int NKV, int HS) {
    CHECK(B >= 1 && Tl >= 1 && NH >= 1 && NKV >= 1 && NH % NKV == 0 && HS >= 1, "caller bug",
          "%s created with B=%d Tl=%d NH=%d NKV=%d HS=%d", layer, B, Tl, NH, NKV, HS);
    DistBounds b = {B, Tl, NH, NKV, HS};
    return b;
}

static inline void dist_bounds_check(const DistBounds* max, const char* layer, int B, int Tl,
                                     int NH, int NKV, int HS) {
    CHECK(B >= 1 && Tl >= 1 && NH >= 1 && NKV >= 1 && NH % NKV == 0 && HS >= 1 && B <= max->B &&
              Tl <= max->Tl && NH <= max->NH && NKV <= max->NKV && HS <= max->HS,
          "create the layer with bounds that cover every call",
          "%s called with B=%d Tl=%d NH=%d NKV=%d HS=%d, bounds %d %d %d %d %d", layer, B, Tl, NH,
          NKV, HS, max->B, max->Tl, max->NH, max->NKV, max->HS);
}

// --a2a-chunks for a schedule (`what`, as the caller's flag names it: "--attention ring",
// "ulysses"): chunks of heads only for the all-to-all schedules (a2a), as a divisor of their
// heads per rank. 0, or -1 with a one-line message in err.
static inline int dist_chunks_check(int chunks, int a2a, int heads_per_rank, const char* what,
                                    char* err, size_t errlen) {
    if (chunks <= 1) return 0;
    if (!a2a)
        snprintf(err, errlen, "--a2a-chunks %d: only ulysses and usp run their heads in chunks, "
                 "found %s", chunks, what);
    else if (heads_per_rank % chunks)
        snprintf(err, errlen, "--a2a-chunks %d: expected a divisor of the %d heads per rank of %s",
                 chunks, heads_per_rank, what);
    else
        return 0;
    return -1;
}
