// The distributed data loader: micro-batches of B windows of T+1 tokens from llm.c shards.
//
// Windows. Window k of a shard starts at token k*T and spans T+1 tokens, so a shard of n tokens
// has (n-1)/T windows (consecutive windows share one token). inputs = window[0..T-1] and
// targets = window[1..T], each int32 of shape (B, T), row-major.
//
// Global order. For epoch e the shard order is a permutation seeded by (seed, e), and the window
// order inside shard s (s = position in the file list) a permutation seeded by (seed, e, s); the
// epoch's window sequence is the concatenation in shard order, and epochs follow one another, so
// training never runs out. Unshuffled: files in list order, windows in natural order. The
// permutations come from splitmix64 + Fisher-Yates on integers only, so they are identical on
// every machine.
//
// Micro-batches. Global micro-batch g is windows [g*B, (g+1)*B) of that sequence; it may span
// shard (and, in training, epoch) boundaries. With dp_size data-parallel ranks, rank d's n-th
// micro-batch is global micro-batch n*dp_size + d. So 1 rank running 4 accumulation steps sees
// exactly the tokens 4 dp ranks see in one step. Every rank reads the same file sequence; only the
// batches it keeps depend on dp_rank.
//
// Blends. Several components (each a list of files with its own epochs and permutations) may
// be read in fixed proportions: window p of the global sequence is window k of component c's
// own sequence, as data/blend.h lays them out. Component 0 is ordered exactly as a loader of its
// files alone; the others draw their permutations from seeds derived from (seed, c). A loader
// of one pattern is a blend of one component whose window p is its window p.
//
// Phases. A run may go on under other data (loader_begin_phase): from the global window where
// the phase begins, window p is window p - phase_start of this loader's blend, every component
// ordered by permutations drawn from seeds derived from (seed, phase), so no set repeats the order
// it had in an earlier phase. Or a set read before (the same files by name and windows, wherever
// they lie) continues: its order's seed, and its windows counted on from where it stood
// (loader_apply_positions with a table of loader_positions saved with the state).
//
// Validation mode: always unshuffled, one pass over epoch 0 of loader_global_batches() micro-batches
// (windows / B). Rank d gets the pass's global batches n*dp_size + d, as in training, up to its end
// (the first pass % dp_size ranks get one more), then loader_next returns 1; loader_reset starts the
// same pass again. So the first N global batches, split over any dp size, are the same windows:
// the same validation loss on every mesh.
//
// Shards are memory-mapped lazily, at most two at a time (the tokens are checked against the
// vocabulary size when a shard is mapped); every file's header and size are checked at open.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/blend.h"

typedef struct DataLoader DataLoader;

typedef enum { LOADER_TRAIN = 0, LOADER_VAL = 1 } LoaderMode;

typedef struct {
    int B;              // windows per micro-batch
    int T;              // tokens per window row (each window reads T+1 tokens)
    int dp_rank;        // this rank's data-parallel index, 0 <= dp_rank < dp_size
    int dp_size;        // number of data-parallel ranks (1 for a single process)
    int shuffle;        // training mode: 1 = permuted per epoch, 0 = natural order
    uint64_t seed;      // seeds the permutations (ignored when unshuffled)
    int vocab_size;     // every token must be < vocab_size; <= 0: only < 2^31 (fits int32)
    LoaderMode mode;    // LOADER_TRAIN or LOADER_VAL (validation ignores shuffle)
} LoaderConfig;

// Where the loader stands, for checkpoints: plain fixed-width fields, the same on every rank of
// a dp group (ranks advance in lock step), so one copy can be saved and restored everywhere.
typedef struct {
    int64_t epoch;       // epoch of the first window of the next batch (derived; checked)
    int64_t next_batch;  // global micro-batch index the group reads next (= batches per rank
                         // so far x dp_size); a restore needs next_batch % dp_size == 0
    uint64_t seed;       // permutation seed in use
    int32_t shuffle;     // 1 = shuffled
    int32_t nfiles;      // number of shard files (checked on restore)
    int32_t B, T;        // batch geometry the position refers to (checked on restore)
    int32_t components;  // blend components (0 in states written before blends: one)
    uint64_t blend;      // fingerprint of the blend's shares and file counts (0: one component)
    int32_t phase;       // data phases begun since the run started (0: the first data)
    int64_t phase_start; // global window where the phase began (0 in the first)
    uint64_t data;       // fingerprint of every set's share, files and windows, one set's too
                         // (0 in states written before phases)
} LoaderState;

// One component of a blend: its files in order, its weight (> 0; the weights are normalised)
// and the pattern they came from (for reports; may be NULL).
typedef struct {
    const char* const* paths;
    int nfiles;
    double weight;
    const char* pattern;
} LoaderComponent;

// A component as the loader holds it: share = its windows' fraction of the blended sequence
// (its weight's share, to 1 / BLEND_PERIOD); windows = its windows per epoch of its own.
typedef struct {
    const char* pattern;
    double weight, share;
    int nfiles;
    int64_t windows;
} LoaderComponentInfo;

// Opens every file matching a glob pattern (sorted by name), e.g. "data/fw_train_*.bin", or a
// blend of patterns with weights, "0.7 data/fw_train_*.bin 0.3 data/code_train_*.bin"
// (data/blend.h says how the value is read). Returns NULL with a one-line message in err when a
// pattern matches nothing, any file is missing or bad (magic, version, size) or shorter than one
// window, the blend is malformed, a validation loader is given a blend, or the config is invalid.
DataLoader* loader_open(const char* value, const LoaderConfig* cfg, char* err, size_t errlen);
// How loader_open reads a value: one pattern, or weights and patterns (data/blend.h), a value
// of several words that names files as a whole being one pattern. Returns 0 (spec filled; free it
// with blend_spec_free), or -1 with a one-line message in err.
int loader_parse_value(const char* value, BlendSpec* spec, char* err, size_t errlen);
// The same over an explicit list of nfiles paths (in that order; nfiles == 0 is an error).
DataLoader* loader_open_files(const char* const* paths, int nfiles, const LoaderConfig* cfg,
                              char* err, size_t errlen);
// A blend of n explicit components.
DataLoader* loader_open_blend(const LoaderComponent* comps, int n, const LoaderConfig* cfg,
                              char* err, size_t errlen);
void loader_close(DataLoader* loader);

// Fills inputs and targets (each B*T int32) with this rank's next micro-batch. Returns 0, 1 at
// the end of a validation pass (nothing written), or -1 with err set when a shard cannot be
// mapped or holds a token >= vocab_size (naming the file and the token index).
int loader_next(DataLoader* loader, int32_t* inputs, int32_t* targets, char* err,
                size_t errlen);
// Back to the first batch of epoch 0 (the state after open).
void loader_reset(DataLoader* loader);

// Windows in one epoch (all files; of a blend, one epoch of every component); the micro-batches of one epoch over all ranks (windows / B,
// rounded down: the validation pass); and those every rank gets from one epoch (windows / B /
// dp_size, rounded down).
int64_t loader_windows_per_epoch(const DataLoader* loader);
int64_t loader_global_batches(const DataLoader* loader);
int64_t loader_batches_per_epoch(const DataLoader* loader);
int loader_num_files(const DataLoader* loader);
// The path of file i (0 <= i < loader_num_files, the components' files one after another), as
// the pattern resolved it.
const char* loader_file_path(const DataLoader* loader, int i);
int loader_num_components(const DataLoader* loader);
void loader_component_info(const DataLoader* loader, int c, LoaderComponentInfo* info);
// counts[c] (one per component) = windows of component c among the first `windows` of the
// global sequence that belong to the current phase: what a data-parallel group has read of each
// in this phase after that many windows of the run.
void loader_component_reads(const DataLoader* loader, int64_t windows, int64_t* counts);

void loader_get_state(const DataLoader* loader, LoaderState* state);
// Restores a position saved by loader_get_state (adopting its seed, shuffle flag and phase) so
// that the following batches are exactly those that followed the save. Returns 0, or -1 with err
// set when the state does not fit this loader (blend, file count, B, T, epoch, phase, or dp_size
// divisibility).
int loader_set_state(DataLoader* loader, const LoaderState* state, char* err, size_t errlen);
// Whether a state was saved over this loader's data: the same components, shares, files (by
// count) and windows. (A state written before phases is judged by what it recorded.)
int loader_state_same_data(const DataLoader* loader, const LoaderState* state);
// Goes on from a position saved over other data: the next batches begin phase state->phase + 1
// at the saved position (adopting its seed and shuffle flag). Returns 0, or -1 with err set when
// B, T, the position or dp_size divisibility do not fit.
int loader_begin_phase(DataLoader* loader, const LoaderState* state, char* err, size_t errlen);
// The current phase and the global window where it began.
int loader_phase(const DataLoader* loader, int64_t* start);
// Windows the data-parallel group has read in the whole run, every phase and resume included
// (the saved position's next_batch x B): a training run's trained tokens over T.
int64_t loader_windows_read(const DataLoader* loader);

// Sets across phases. A set is known by its files' names (not directories) and windows; each
// position is its order's seed and the windows of its own sequence read, in every phase so far.
typedef struct {
    uint64_t id;     // loader_set_id of its files
    uint64_t seed;   // the seed its order is drawn from
    int64_t read;    // windows of its own sequence read
} LoaderSetPosition;

// The most positions a state keeps (the sets of the current phase first, then those of earlier
// phases, the most recent first).
#define LOADER_MAX_POSITIONS 1024

// A set's identity: a hash of its files' base names and windows, in order.
uint64_t loader_set_id(const char* const* paths, const int64_t* windows, int nfiles);
// Writes the position of every set at the loader's position: this phase's (each set once), then
// those of earlier phases it was given (loader_apply_positions); returns how many (at most max).
int loader_positions(const DataLoader* loader, LoaderSetPosition* out, int max);

typedef enum {
    LOADER_POSITIONS_RESUME,     // after loader_set_state: this phase's sets where they stood
    LOADER_POSITIONS_CONTINUE,   // after loader_begin_phase: sets read before go on from there
    LOADER_POSITIONS_RECORD,     // after loader_begin_phase: every set fresh; earlier ones kept
} LoaderPositionsUse;

// Takes the positions a state saved (n = 0: a state written before positions, every set as
// loader_set_state or loader_begin_phase left it), keeping those of sets this phase does not read
// for loader_positions. Returns 0, or -1 with err set (a count below 0; on RESUME a set of this
// phase missing from a table, or one that read fewer windows than this phase alone has).
int loader_apply_positions(DataLoader* loader, const LoaderSetPosition* table, int n,
                           LoaderPositionsUse use, char* err, size_t errlen);
// Windows of component c's own sequence read before this phase (0: a fresh order).
int64_t loader_set_offset(const DataLoader* loader, int c);

// Sequence parallelism: copies Tl tokens of each row of full (B, T) into local (B, Tl), local
// token i being full token pos[i] (its absolute position, for position embeddings and the causal
// mask; the attention layer's layout says which). Cyclic layout (ATTENTION2D, Striped):
// pos[i] = sp_rank + P*i, Tl = T/P; contiguous (Ring): sp_rank * Tl + i; Zigzag: two chunks
// interleaved. The caller checks T % P == 0 with a clear error when the run is configured; this
// function ends the process via FAIL if a position is outside [0, T).
void layout_take(const int32_t* full, int B, int T, const long* pos, int Tl, int32_t* local);
