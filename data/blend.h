// Data blends: several training sets read in fixed proportions (Megatron-LM's --data-path
// "W1 PREFIX1 W2 PREFIX2 ...", here over llm.c shard patterns).
//
// The proportions. The weights are normalised and apportioned by largest remainder to integer
// shares q_c that sum to BLEND_PERIOD (a weight under one slot's worth is refused), each within
// a slot of its exact share. One period of BLEND_PERIOD
// windows is laid out by smooth weighted round-robin: at each slot every component's credit
// grows by its share and the component with the most credit (the first on a tie) takes the slot
// and pays BLEND_PERIOD. So a period holds exactly q_c windows of component c, spread as evenly
// as they can be: any prefix of the sequence is within half a window of two components' shares,
// and within a window or so of more (1.12 the worst measured, up to 1024).
//
// Random access. Window p of the blended sequence lies in period m = p / BLEND_PERIOD at slot
// o = p % BLEND_PERIOD; it is window m q_c + (the slots of c before o) of component c's own
// sequence. No state is carried from window to window, so data-parallel ranks and resumed runs
// find their windows without replaying the order.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define BLEND_PERIOD 100000
#define BLEND_MAX_COMPONENTS 1024

// A parsed --train-data value: n (weight, pattern) pairs. A value of one word, or whose first
// word is not a number, is one pattern of weight 1 (so a path with spaces still names one
// pattern; data/loader.c also takes a value that names files as a whole as one pattern).
typedef struct {
    int n;
    double* weight;   // (n,) as written, > 0
    char** pattern;   // (n,) glob pattern or path of each component's shards
} BlendSpec;

// Parses "W1 PATTERN1 W2 PATTERN2 ..." (words separated by white space) or a single pattern.
// Returns 0, or -1 with a one-line message in err (an odd word count, a weight that is not a
// positive finite number, more than BLEND_MAX_COMPONENTS components, an empty value).
int blend_spec_parse(const char* value, BlendSpec* spec, char* err, size_t errlen);
// The value as one pattern of weight 1.
void blend_spec_single(const char* pattern, BlendSpec* spec);
void blend_spec_free(BlendSpec* spec);

typedef struct {
    int n;
    int32_t* share;    // (n,) q_c, windows of component c per period; sum = BLEND_PERIOD
    uint16_t* comp;    // (BLEND_PERIOD,) component of each slot of a period (n > 1 only)
    int32_t* before;   // (BLEND_PERIOD,) slots of the same component earlier in the period
} BlendTable;

// Builds the table for n weights (each > 0 and finite, however large). A single component needs
// no table: window p is its window p. Returns 0, or -1 with err set when a weight is below
// 1 / BLEND_PERIOD of the total (its share would be less than one slot), naming its index.
int blend_table_build(const double* weight, int n, BlendTable* table, char* err, size_t errlen);
void blend_table_free(BlendTable* table);

// Window p of the blend: its component and its index in that component's own sequence.
static inline void blend_locate(const BlendTable* t, int64_t p, int* comp, int64_t* index) {
    if (t->n == 1) {
        *comp = 0;
        *index = p;
        return;
    }
    const int64_t m = p / BLEND_PERIOD, o = p % BLEND_PERIOD;
    *comp = t->comp[o];
    *index = m * t->share[*comp] + t->before[o];
}

// counts[c] = windows of component c among the first p of the blend (p >= 0), for every c.
void blend_counts(const BlendTable* t, int64_t p, int64_t* counts);
