// The distributed data loader (see data/loader.h for the order it defines).
#include "data/loader.h"

#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/fail.h"
#include "data/blend.h"
#include "data/shard.h"

// Tags that keep the shard-order and window-order random streams apart.
#define STREAM_SHARD_ORDER 0x5348415244ull   // "SHARD"
#define STREAM_WINDOW_ORDER 0x57494e444full  // "WINDO"
#define STREAM_BLEND 0x424c454e44ull         // "BLEND": the seeds of components 1, 2, ...
#define STREAM_PHASE 0x5048415345ull         // "PHASE": every component's seed after a phase
#define NSLOTS 2  // shards kept mapped: a batch that crosses a boundary needs both

// One mapped shard and its window permutation for one epoch.
typedef struct {
    int file;            // index into the component's file list, -1 when the slot is empty
    ShardView view;
    int64_t perm_epoch;  // epoch `perm` was drawn for, -1 when none
    uint32_t* perm;      // perm[i] = window read at position i of this shard (shuffled only)
    uint64_t last_use;   // for evicting the least recently used slot
} ShardSlot;

// One component of the data: its files, their order in an epoch, and its mapped shards. A
// loader without a blend has one.
typedef struct {
    int nfiles;
    char** paths;
    int64_t* nwin;        // windows per file
    int64_t total;        // windows per epoch
    uint64_t seed;        // seeds this component's permutations
    uint64_t id;          // its files' names and windows (loader_set_id): the set across phases
    int64_t offset;       // windows of its own sequence read before this phase (a set that
                          // continues, loader_apply_positions), 0 in a fresh order
    int64_t order_epoch;  // epoch `order` and `cum` belong to, -1 when none
    int* order;           // order[i] = file at position i of the epoch
    int64_t* cum;         // cum[i] = windows before position i (nfiles + 1 entries)
    ShardSlot slots[NSLOTS];
} ShardSet;

struct DataLoader {
    LoaderConfig cfg;
    int nsets;
    ShardSet* sets;       // (nsets,) the blend's components
    char** patterns;      // (nsets,) as given, for reports (NULL for loader_open_files)
    double* weights;      // (nsets,) as given
    BlendTable blend;
    int nfiles;           // files of every component
    uint64_t use_clock;
    int64_t n;            // micro-batches this rank has produced since epoch 0 began
    int32_t phase;        // data phases begun (loader_begin_phase); 0: the run's first data
    int64_t phase_start;  // global window where the phase began
    LoaderSetPosition* others;   // (nothers,) sets of earlier phases that this one does not read
    int nothers;
};

// ---- Deterministic permutations: splitmix64 streams keyed by (seed, tag, a, b). ----

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t stream_key(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b) {
    uint64_t k = mix64(seed + 0x9E3779B97F4A7C15ull);
    k = mix64(k ^ tag);
    k = mix64(k ^ (a + 0x632BE59BD9B4E019ull));
    return mix64(k ^ (b + 0x8CB92BA72F3D8DD7ull));
}

static uint64_t splitmix64_next(uint64_t* state) {
    *state += 0x9E3779B97F4A7C15ull;
    return mix64(*state);
}

// Uniform integer in [0, n) without modulo bias (rejects the top partial range).
static uint64_t uniform_below(uint64_t* state, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t x = splitmix64_next(state);
        if (x < limit) return x % n;
    }
}

// Fisher-Yates shuffle of the identity 0..n-1 into perm, driven by the given stream.
static void draw_perm_u32(uint32_t* perm, uint32_t n, uint64_t key) {
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)uniform_below(&key, i);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

static void draw_perm_int(int* perm, int n, uint64_t key) {
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n; i > 1; i--) {
        int j = (int)uniform_below(&key, (uint64_t)i);
        int t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

// ---- Opening ----

static int check_config(const LoaderConfig* c, char* err, size_t errlen) {
    if (!c) return set_err(err, errlen, "loader config: expected a config, found NULL");
    if (c->B < 1) return set_err(err, errlen, "loader config: B: expected >= 1, found %d", c->B);
    if (c->T < 1) return set_err(err, errlen, "loader config: T: expected >= 1, found %d", c->T);
    if (c->dp_size < 1)
        return set_err(err, errlen, "loader config: dp_size: expected >= 1, found %d",
                       c->dp_size);
    if (c->dp_rank < 0 || c->dp_rank >= c->dp_size)
        return set_err(err, errlen, "loader config: dp_rank: expected 0..%d, found %d",
                       c->dp_size - 1, c->dp_rank);
    if (c->mode != LOADER_TRAIN && c->mode != LOADER_VAL)
        return set_err(err, errlen, "loader config: mode: expected LOADER_TRAIN or LOADER_VAL, "
                       "found %d", (int)c->mode);
    return 0;
}

static char* copy_string(const char* s) {
    size_t n = strlen(s) + 1;
    char* out = malloc(n);
    if (out) memcpy(out, s, n);
    return out;
}

static void close_set(ShardSet* S) {
    for (int i = 0; i < NSLOTS; i++) {
        shard_unmap(&S->slots[i].view);
        free(S->slots[i].perm);
    }
    if (S->paths)
        for (int i = 0; i < S->nfiles; i++) free(S->paths[i]);
    free(S->paths);
    free(S->nwin);
    free(S->order);
    free(S->cum);
}

// Copies the file list and checks every file's header and size now, so that a bad file fails
// at start-up rather than hours into training; the tokens themselves are read (and checked)
// lazily. The caller closes S whatever this returns.
static int open_set(ShardSet* S, const char* const* paths, int nfiles, int T, char* err,
                    size_t errlen) {
    S->order_epoch = -1;
    for (int i = 0; i < NSLOTS; i++) S->slots[i] = (ShardSlot){.file = -1, .perm_epoch = -1};
    if (nfiles <= 0 || !paths)
        return set_err(err, errlen, "loader: file list: expected at least one shard file, "
                       "found none");
    S->nfiles = nfiles;
    S->paths = calloc((size_t)nfiles, sizeof *S->paths);
    S->nwin = calloc((size_t)nfiles, sizeof *S->nwin);
    S->order = calloc((size_t)nfiles, sizeof *S->order);
    S->cum = calloc((size_t)nfiles + 1, sizeof *S->cum);
    if (!S->paths || !S->nwin || !S->order || !S->cum)
        return set_err(err, errlen, "loader: out of memory for %d files", nfiles);
    for (int i = 0; i < nfiles; i++) {
        if (!paths[i]) return set_err(err, errlen, "loader: file list: entry %d is NULL", i);
        S->paths[i] = copy_string(paths[i]);
        if (!S->paths[i]) return set_err(err, errlen, "loader: out of memory");
        size_t ntok;
        int width;
        if (shard_probe(paths[i], &ntok, &width, err, errlen) != 0) return -1;
        if (ntok < (size_t)T + 1)
            return set_err(err, errlen, "%s: token count: expected at least T+1 = %lld tokens "
                           "(one window of T = %d), found %zu", paths[i], (long long)T + 1, T,
                           ntok);
        S->nwin[i] = (int64_t)((ntok - 1) / (size_t)T);
        S->total += S->nwin[i];
    }
    S->id = loader_set_id((const char* const*)S->paths, S->nwin, nfiles);
    return 0;
}

// Drops a set's drawn shard order and window permutations (its seed or position changed).
static void forget_orders(ShardSet* S) {
    S->order_epoch = -1;
    for (int i = 0; i < NSLOTS; i++) S->slots[i].perm_epoch = -1;
}

// Component 0 draws its permutations from the run's seed, as a loader without a blend does;
// every other component from a seed of its own. After a phase change every component draws
// from a seed of (seed, phase, component). Each reads its sequence from the start (offset 0), and
// no earlier phase's sets are remembered (loader_apply_positions sets both).
static void seed_sets(DataLoader* L) {
    for (int c = 0; c < L->nsets; c++) {
        ShardSet* S = &L->sets[c];
        S->seed = L->phase ? stream_key(L->cfg.seed, STREAM_PHASE, (uint64_t)L->phase, (uint64_t)c)
                  : c == 0 ? L->cfg.seed
                           : stream_key(L->cfg.seed, STREAM_BLEND, (uint64_t)c, 0);
        S->offset = 0;
        forget_orders(S);
    }
    L->nothers = 0;
}

DataLoader* loader_open_blend(const LoaderComponent* comps, int n, const LoaderConfig* cfg,
                              char* err, size_t errlen) {
    if (check_config(cfg, err, errlen) != 0) return NULL;
    if (n < 1 || !comps) {
        set_err(err, errlen, "loader: components: expected at least one, found %d", n);
        return NULL;
    }
    if (n > 1 && cfg->mode == LOADER_VAL) {
        set_err(err, errlen, "a blend of %d components: expected one pattern for validation "
                "data (each validation set is a loader of its own)", n);
        return NULL;
    }
    DataLoader* L = calloc(1, sizeof *L);
    if (!L) {
        set_err(err, errlen, "loader: out of memory");
        return NULL;
    }
    L->cfg = *cfg;
    if (L->cfg.mode == LOADER_VAL) L->cfg.shuffle = 0;
    L->cfg.shuffle = L->cfg.shuffle != 0;
    L->sets = calloc((size_t)n, sizeof *L->sets);
    L->patterns = calloc((size_t)n, sizeof *L->patterns);
    L->weights = calloc((size_t)n, sizeof *L->weights);
    if (!L->sets || !L->patterns || !L->weights) {
        free(L->sets);
        free(L->patterns);
        free(L->weights);
        free(L);
        set_err(err, errlen, "loader: out of memory for %d components", n);
        return NULL;
    }
    L->nsets = n;
    for (int c = 0; c < n; c++) {
        L->weights[c] = comps[c].weight;
        if (comps[c].pattern && !(L->patterns[c] = copy_string(comps[c].pattern))) {
            set_err(err, errlen, "loader: out of memory");
            loader_close(L);
            return NULL;
        }
        if (open_set(&L->sets[c], comps[c].paths, comps[c].nfiles, cfg->T, err, errlen) != 0) {
            loader_close(L);
            return NULL;
        }
        L->nfiles += comps[c].nfiles;
    }
    if (blend_table_build(L->weights, n, &L->blend, err, errlen) != 0) {
        loader_close(L);
        return NULL;
    }
    seed_sets(L);
    if (L->cfg.mode == LOADER_VAL && loader_global_batches(L) == 0) {
        set_err(err, errlen, "loader: validation shards (%d files, first %s): expected at least "
                "one micro-batch of B = %d windows of T = %d, found %lld windows", L->nfiles,
                L->sets[0].paths[0], cfg->B, cfg->T, (long long)L->sets[0].total);
        loader_close(L);
        return NULL;
    }
    return L;
}

DataLoader* loader_open_files(const char* const* paths, int nfiles, const LoaderConfig* cfg,
                              char* err, size_t errlen) {
    const LoaderComponent one = {.paths = paths, .nfiles = nfiles, .weight = 1.0};
    return loader_open_blend(&one, 1, cfg, err, errlen);
}

// The files of one pattern: a plain path as is (so that a missing file is reported as
// missing), else glob's sorted matches.
typedef struct {
    const char* single;   // the plain path, or NULL when globbed
    glob_t g;
    int globbed;
} PatternFiles;

static const char* const* pattern_paths(const PatternFiles* f) {
    return f->globbed ? (const char* const*)f->g.gl_pathv : &f->single;
}

static int pattern_count(const PatternFiles* f) { return f->globbed ? (int)f->g.gl_pathc : 1; }

// Returns 0 with *f filled (free_pattern releases it), or -1 with err set.
static int expand_pattern(const char* pattern, PatternFiles* f, char* err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (!pattern || !*pattern)
        return set_err(err, errlen, "loader: file pattern: expected a path or glob pattern, "
                       "found an empty string");
    if (!strpbrk(pattern, "*?[")) {
        f->single = pattern;
        return 0;
    }
    int rc = glob(pattern, 0, NULL, &f->g);
    f->globbed = 1;
    if (rc == GLOB_NOMATCH)
        return set_err(err, errlen, "%s: file pattern: expected at least one matching shard "
                       "file, found none", pattern);
    if (rc != 0)
        return set_err(err, errlen, "%s: file pattern: cannot expand (%s)", pattern,
                       rc == GLOB_NOSPACE ? "out of memory" : "read error");
    if (f->g.gl_pathc > (size_t)INT32_MAX)
        return set_err(err, errlen, "%s: file pattern: too many matches (%zu)", pattern,
                       f->g.gl_pathc);
    return 0;
}

static void free_pattern(PatternFiles* f) {
    if (f->globbed) globfree(&f->g);
    memset(f, 0, sizeof *f);
}

// Whether a value of several words names files as a whole (a path with spaces, or a pattern
// with matches): then it is one pattern, as before blends, whatever its first word looks like.
static int names_files(const char* value) {
    if (!strpbrk(value, " \t\n\v\f\r")) return 0;
    PatternFiles f;
    char why[ERR_LEN];
    const int found = expand_pattern(value, &f, why, sizeof why) == 0 &&
                      (f.globbed || access(value, F_OK) == 0);
    free_pattern(&f);
    return found;
}

int loader_parse_value(const char* value, BlendSpec* spec, char* err, size_t errlen) {
    if (names_files(value)) {
        blend_spec_single(value, spec);
        return 0;
    }
    return blend_spec_parse(value, spec, err, errlen);
}

DataLoader* loader_open(const char* value, const LoaderConfig* cfg, char* err,
                        size_t errlen) {
    if (!value || !*value) {
        set_err(err, errlen, "loader: file pattern: expected a path or glob pattern, found "
                "an empty string");
        return NULL;
    }
    BlendSpec spec;
    if (loader_parse_value(value, &spec, err, errlen) != 0) return NULL;
    PatternFiles* g = calloc((size_t)spec.n, sizeof *g);
    LoaderComponent* comps = calloc((size_t)spec.n, sizeof *comps);
    DataLoader* L = NULL;
    int expanded = 0;
    if (!g || !comps) {
        set_err(err, errlen, "loader: out of memory for %d components", spec.n);
    } else {
        for (; expanded < spec.n; expanded++) {
            const int rc = expand_pattern(spec.pattern[expanded], &g[expanded], err, errlen);
            if (rc != 0) {
                free_pattern(&g[expanded]);
                break;
            }
            comps[expanded] = (LoaderComponent){
                .paths = pattern_paths(&g[expanded]), .nfiles = pattern_count(&g[expanded]),
                .weight = spec.weight[expanded], .pattern = spec.pattern[expanded]};
        }
        if (expanded == spec.n) L = loader_open_blend(comps, spec.n, cfg, err, errlen);
    }
    for (int i = 0; i < expanded; i++) free_pattern(&g[i]);
    free(g);
    free(comps);
    blend_spec_free(&spec);
    return L;
}

void loader_close(DataLoader* L) {
    if (!L) return;
    for (int c = 0; c < L->nsets; c++) {
        close_set(&L->sets[c]);
        free(L->patterns[c]);
    }
    free(L->sets);
    free(L->patterns);
    free(L->weights);
    blend_table_free(&L->blend);
    free(L->others);
    free(L);
}

// ---- Walking the global order ----

// Makes `order` and `cum` of component S describe its epoch e.
static void ensure_epoch_order(const DataLoader* L, ShardSet* S, int64_t e) {
    if (S->order_epoch == e) return;
    if (L->cfg.shuffle)
        draw_perm_int(S->order, S->nfiles,
                      stream_key(S->seed, STREAM_SHARD_ORDER, (uint64_t)e, 0));
    else
        for (int i = 0; i < S->nfiles; i++) S->order[i] = i;
    S->cum[0] = 0;
    for (int i = 0; i < S->nfiles; i++) S->cum[i + 1] = S->cum[i] + S->nwin[S->order[i]];
    S->order_epoch = e;
}

// Returns the slot of S holding its file f mapped, with its window permutation for epoch e.
static ShardSlot* ensure_shard(DataLoader* L, ShardSet* S, int f, int64_t e, char* err,
                               size_t errlen) {
    ShardSlot* s = NULL;
    for (int i = 0; i < NSLOTS; i++)
        if (S->slots[i].file == f) s = &S->slots[i];
    if (!s) {
        s = &S->slots[0];
        for (int i = 1; i < NSLOTS; i++)
            if (S->slots[i].last_use < s->last_use) s = &S->slots[i];
        shard_unmap(&s->view);
        s->file = -1;
        s->perm_epoch = -1;
        int vocab = L->cfg.vocab_size > 0 ? L->cfg.vocab_size : INT32_MAX;  // ids must fit int32
        if (shard_map(S->paths[f], vocab, &s->view, err, errlen) != 0) return NULL;
        int64_t nwin = s->view.ntok >= (size_t)L->cfg.T + 1
                           ? (int64_t)((s->view.ntok - 1) / (size_t)L->cfg.T) : 0;
        if (nwin != S->nwin[f]) {
            set_err(err, errlen, "%s: token count: changed since the loader opened it "
                    "(%lld windows then, %lld now)", S->paths[f], (long long)S->nwin[f],
                    (long long)nwin);
            shard_unmap(&s->view);
            return NULL;
        }
        free(s->perm);
        s->perm = NULL;
        s->file = f;
    }
    s->last_use = ++L->use_clock;
    if (L->cfg.shuffle && s->perm_epoch != e) {
        if (!s->perm) {
            s->perm = malloc((size_t)S->nwin[f] * sizeof *s->perm);
            if (!s->perm) {
                set_err(err, errlen, "%s: out of memory for %lld window indices", S->paths[f],
                        (long long)S->nwin[f]);
                return NULL;
            }
        }
        draw_perm_u32(s->perm, (uint32_t)S->nwin[f],
                      stream_key(S->seed, STREAM_WINDOW_ORDER, (uint64_t)e, (uint64_t)f));
        s->perm_epoch = e;
    }
    return s;
}

// Copies window p of the global sequence (window k of one component's own sequence) into one
// row of inputs and targets.
static int fetch_window(DataLoader* L, int64_t p, int32_t* in, int32_t* tgt, char* err,
                        size_t errlen) {
    int c;
    int64_t k;
    blend_locate(&L->blend, p - L->phase_start, &c, &k);
    ShardSet* S = &L->sets[c];
    k += S->offset;
    int64_t e = k / S->total, r = k % S->total;
    ensure_epoch_order(L, S, e);
    int lo = 0, hi = S->nfiles - 1;  // last position i with cum[i] <= r
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (S->cum[mid] <= r) lo = mid;
        else hi = mid - 1;
    }
    int f = S->order[lo];
    ShardSlot* s = ensure_shard(L, S, f, e, err, errlen);
    if (!s) return -1;
    int64_t local = r - S->cum[lo];
    size_t w = L->cfg.shuffle ? s->perm[local] : (size_t)local;
    size_t start = w * (size_t)L->cfg.T;
    int T = L->cfg.T;
    for (int t = 0; t < T; t++) in[t] = (int32_t)shard_token(&s->view, start + (size_t)t);
    for (int t = 0; t < T; t++) tgt[t] = (int32_t)shard_token(&s->view, start + (size_t)t + 1);
    return 0;
}

int loader_next(DataLoader* L, int32_t* inputs, int32_t* targets, char* err, size_t errlen) {
    int64_t g = L->n * L->cfg.dp_size + L->cfg.dp_rank;
    if (L->cfg.mode == LOADER_VAL && g >= loader_global_batches(L)) return 1;
    int B = L->cfg.B, T = L->cfg.T;
    for (int b = 0; b < B; b++)
        if (fetch_window(L, g * B + b, inputs + (size_t)b * T, targets + (size_t)b * T, err,
                         errlen) != 0)
            return -1;
    L->n++;
    return 0;
}

void loader_reset(DataLoader* L) {
    L->n = 0;
    if (L->phase) {   // the state after open: the first phase
        L->phase = 0;
        L->phase_start = 0;
        seed_sets(L);
    }
}

int64_t loader_windows_per_epoch(const DataLoader* L) {
    int64_t total = 0;
    for (int c = 0; c < L->nsets; c++) total += L->sets[c].total;
    return total;
}

int64_t loader_global_batches(const DataLoader* L) {
    return loader_windows_per_epoch(L) / L->cfg.B;
}

int64_t loader_batches_per_epoch(const DataLoader* L) {
    return loader_windows_per_epoch(L) / L->cfg.B / L->cfg.dp_size;
}

int loader_num_files(const DataLoader* L) { return L->nfiles; }

const char* loader_file_path(const DataLoader* L, int i) {
    for (int c = 0; c < L->nsets; c++) {
        if (i < L->sets[c].nfiles) return L->sets[c].paths[i];
        i -= L->sets[c].nfiles;
    }
    return NULL;
}

int loader_num_components(const DataLoader* L) { return L->nsets; }

void loader_component_info(const DataLoader* L, int c, LoaderComponentInfo* info) {
    const ShardSet* S = &L->sets[c];
    *info = (LoaderComponentInfo){.pattern = L->patterns[c], .weight = L->weights[c],
                                  .share = (double)L->blend.share[c] / BLEND_PERIOD,
                                  .nfiles = S->nfiles, .windows = S->total};
}

void loader_component_reads(const DataLoader* L, int64_t windows, int64_t* counts) {
    blend_counts(&L->blend, windows > L->phase_start ? windows - L->phase_start : 0, counts);
}

int loader_phase(const DataLoader* L, int64_t* start) {
    *start = L->phase_start;
    return L->phase;
}

int64_t loader_windows_read(const DataLoader* L) { return L->n * L->cfg.dp_size * L->cfg.B; }

// ---- Checkpoint state ----

// Each component's share of the period, file count and windows per epoch, in order, hashed from h.
static uint64_t fingerprint_sets(const DataLoader* L, uint64_t h) {
    for (int c = 0; c < L->nsets; c++) {
        h = mix64(h ^ ((uint64_t)(uint32_t)L->blend.share[c] << 32 |
                       (uint32_t)L->sets[c].nfiles));
        h = mix64(h ^ (uint64_t)L->sets[c].total);
    }
    return h;
}

// What a resumed run must share with the one that saved: the components, in order (0 without a
// blend, as in states written before blends: one pattern's files are checked by their count
// alone, as they always were).
static uint64_t blend_fingerprint(const DataLoader* L) {
    return L->nsets == 1 ? 0 : fingerprint_sets(L, mix64((uint64_t)L->nsets));
}

// The same of one component too; never 0 (which marks a state written before phases).
static uint64_t data_fingerprint(const DataLoader* L) {
    const uint64_t data_tag = 0x44415441ull;   // "DATA"
    const uint64_t h = fingerprint_sets(L, mix64((uint64_t)L->nsets ^ data_tag));
    return h ? h : 1;
}

void loader_get_state(const DataLoader* L, LoaderState* st) {
    memset(st, 0, sizeof *st);
    st->next_batch = L->n * L->cfg.dp_size;
    st->epoch = (loader_windows_read(L) - L->phase_start) / loader_windows_per_epoch(L);
    st->seed = L->cfg.seed;
    st->shuffle = L->cfg.shuffle;
    st->nfiles = L->nfiles;
    st->B = L->cfg.B;
    st->T = L->cfg.T;
    st->components = L->nsets;
    st->blend = blend_fingerprint(L);
    st->phase = L->phase;
    st->phase_start = L->phase_start;
    st->data = data_fingerprint(L);
}

// Whether a state was saved over this loader's data (its blend, file count and, in states that
// record it, every set's shape): 0, or -1 with err set.
static int check_data(const DataLoader* L, const LoaderState* st, char* err, size_t errlen) {
    const int components = st->components ? st->components : 1;   // 0: written before blends
    if (components != L->nsets || st->blend != blend_fingerprint(L))
        return set_err(err, errlen, "loader state: blend: expected the one the checkpoint was "
                       "written with (%d component%s, fingerprint %016llx), found %d (fingerprint "
                       "%016llx); resume with the same weights and patterns, in the same order, "
                       "over the same files", components, components == 1 ? "" : "s",
                       (unsigned long long)st->blend, L->nsets,
                       (unsigned long long)blend_fingerprint(L));
    if (st->nfiles != L->nfiles)
        return set_err(err, errlen, "loader state: nfiles: expected %d (files given now), "
                       "found %d", L->nfiles, st->nfiles);
    // One set's files of other sizes (a blend's are in its fingerprint already).
    if (st->data != 0 && st->data != data_fingerprint(L))
        return set_err(err, errlen, "loader state: data: expected the files the checkpoint was "
                       "written with (fingerprint %016llx of their count and windows), found "
                       "others (%d files, %lld windows per epoch: fingerprint %016llx); resume "
                       "over the same files", (unsigned long long)st->data, L->nfiles,
                       (long long)loader_windows_per_epoch(L),
                       (unsigned long long)data_fingerprint(L));
    return 0;
}

int loader_state_same_data(const DataLoader* L, const LoaderState* st) {
    char why[ERR_LEN];
    return check_data(L, st, why, sizeof why) == 0;
}

// What any saved position must fit, whatever data it was saved over: B, T, the shuffle flag, a
// next batch in range that this dp_size can continue.
static int check_position(const DataLoader* L, const LoaderState* st, char* err, size_t errlen) {
    if (st->B != L->cfg.B || st->T != L->cfg.T)
        return set_err(err, errlen, "loader state: B x T: expected %d x %d (this run), found "
                       "%d x %d", L->cfg.B, L->cfg.T, st->B, st->T);
    if (st->shuffle != 0 && st->shuffle != 1)
        return set_err(err, errlen, "loader state: shuffle: expected 0 or 1, found %d",
                       st->shuffle);
    if (st->shuffle && L->cfg.mode == LOADER_VAL)
        return set_err(err, errlen, "loader state: shuffle: expected 0 for a validation "
                       "loader, found 1");
    int64_t max_batch = INT64_MAX / L->cfg.B - L->cfg.dp_size;
    if (st->next_batch < 0 || st->next_batch > max_batch)
        return set_err(err, errlen, "loader state: next_batch: expected 0..%lld, found %lld",
                       (long long)max_batch, (long long)st->next_batch);
    if (st->next_batch % L->cfg.dp_size != 0)
        return set_err(err, errlen, "loader state: next_batch: expected a multiple of dp_size "
                       "%d, found %lld", L->cfg.dp_size, (long long)st->next_batch);
    return 0;
}

int loader_set_state(DataLoader* L, const LoaderState* st, char* err, size_t errlen) {
    if (check_data(L, st, err, errlen) != 0) return -1;
    if (check_position(L, st, err, errlen) != 0) return -1;
    const int64_t at = st->next_batch * L->cfg.B;
    if (st->phase < 0 || st->phase_start < 0 || st->phase_start > at ||
        st->phase_start % L->cfg.B != 0 || (st->phase == 0 && st->phase_start != 0))
        return set_err(err, errlen, "loader state: phase %d from window %lld: expected a phase "
                       ">= 0 begun at a batch boundary up to the position, window %lld (phase 0 "
                       "at window 0)", st->phase, (long long)st->phase_start, (long long)at);
    const int64_t total = loader_windows_per_epoch(L);
    int64_t epoch = (at - st->phase_start) / total;
    if (st->epoch != epoch)
        return set_err(err, errlen, "loader state: epoch: expected %lld (from next_batch %lld "
                       "and %lld windows per epoch), found %lld", (long long)epoch,
                       (long long)st->next_batch, (long long)total, (long long)st->epoch);
    L->cfg.seed = st->seed;
    L->cfg.shuffle = st->shuffle;
    L->phase = st->phase;
    L->phase_start = st->phase_start;
    seed_sets(L);   // permutations depend on the seed and the phase: draw them again
    L->n = st->next_batch / L->cfg.dp_size;
    return 0;
}

int loader_begin_phase(DataLoader* L, const LoaderState* st, char* err, size_t errlen) {
    if (check_position(L, st, err, errlen) != 0) return -1;
    if (st->phase < 0 || st->phase == INT32_MAX)
        return set_err(err, errlen, "loader state: phase: expected 0..%d, found %d",
                       INT32_MAX - 1, st->phase);
    L->cfg.seed = st->seed;
    L->cfg.shuffle = st->shuffle;
    L->phase = st->phase + 1;
    L->phase_start = st->next_batch * L->cfg.B;
    seed_sets(L);
    L->n = st->next_batch / L->cfg.dp_size;
    return 0;
}

// ---- Sets across phases ----

uint64_t loader_set_id(const char* const* paths, const int64_t* windows, int nfiles) {
    uint64_t h = mix64(0x53455453ull ^ (uint64_t)nfiles);   // "SETS"
    for (int i = 0; i < nfiles; i++) {
        const char* slash = strrchr(paths[i], '/');
        for (const char* p = slash ? slash + 1 : paths[i]; *p; p++) h = mix64(h ^ (uint8_t)*p);
        h = mix64(h ^ (uint64_t)windows[i]);
    }
    return h;
}

// The first component reading set `id`, or -1 (a blend that names one set twice continues and
// records only its first).
static int component_of(const DataLoader* L, uint64_t id) {
    for (int c = 0; c < L->nsets; c++)
        if (L->sets[c].id == id) return c;
    return -1;
}

// reads[c]: windows of component c read in this phase at the loader's position.
static int64_t* reads_in_phase(const DataLoader* L) {
    int64_t* reads = calloc((size_t)L->nsets, sizeof *reads);
    if (reads) loader_component_reads(L, loader_windows_read(L), reads);
    return reads;
}

int loader_positions(const DataLoader* L, LoaderSetPosition* out, int max) {
    int64_t* reads = reads_in_phase(L);
    CHECK(reads != NULL, "free memory", "loader: out of memory for %d set positions", L->nsets);
    int n = 0;
    for (int c = 0; c < L->nsets && n < max; c++) {
        const ShardSet* S = &L->sets[c];
        if (component_of(L, S->id) == c)
            out[n++] = (LoaderSetPosition){S->id, S->seed, S->offset + reads[c]};
    }
    for (int i = 0; i < L->nothers && n < max; i++) out[n++] = L->others[i];
    free(reads);
    return n;
}

int loader_apply_positions(DataLoader* L, const LoaderSetPosition* table, int n,
                           LoaderPositionsUse use, char* err, size_t errlen) {
    if (n < 0 || (n > 0 && !table))
        return set_err(err, errlen, "loader state: set positions: expected a table, found %d "
                       "entries", n);
    int64_t* reads = reads_in_phase(L);
    LoaderSetPosition* others = calloc((size_t)n + 1, sizeof *others);
    if (!reads || !others) {
        free(reads);
        free(others);
        return set_err(err, errlen, "loader: out of memory for %d set positions", n);
    }
    int nothers = 0, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const int c = component_of(L, table[i].id);
        if (c < 0) {
            others[nothers++] = table[i];
            continue;
        }
        // CONTINUE: on after every window read; RESUME: less this phase's; RECORD: fresh.
        const int64_t before = use == LOADER_POSITIONS_RESUME ? reads[c] : 0;
        if (table[i].read < before || table[i].read < 0)
            rc = set_err(err, errlen, "loader state: set positions: set %d had read %lld "
                         "windows: expected at least the %lld of this phase before the position "
                         "(written over other data?)", c, (long long)table[i].read,
                         (long long)before);
        else if (use != LOADER_POSITIONS_RECORD) {
            L->sets[c].seed = table[i].seed;
            L->sets[c].offset = table[i].read - before;
            forget_orders(&L->sets[c]);
        }
    }
    // A state that records positions records every set this phase reads.
    for (int c = 0; c < L->nsets && rc == 0 && use == LOADER_POSITIONS_RESUME && n > 0; c++) {
        int found = 0;
        for (int i = 0; i < n; i++) found |= table[i].id == L->sets[c].id;
        if (!found)
            rc = set_err(err, errlen, "loader state: set positions: expected one for set %d "
                         "(%s), found none: its files are not the ones (by name and windows) "
                         "the checkpoint was written over", c, L->sets[c].paths[0]);
    }
    free(reads);
    if (rc != 0) {
        free(others);
        seed_sets(L);
        return rc;
    }
    free(L->others);
    L->others = others;
    L->nothers = nothers;
    return 0;
}

int64_t loader_set_offset(const DataLoader* L, int c) { return L->sets[c].offset; }

// ---- Sequence parallelism ----

void layout_take(const int32_t* full, int B, int T, const long* pos, int Tl, int32_t* local) {
    CHECK(Tl >= 1, "check T against the sequence-parallel size when the run is configured",
          "layout_take: %d local tokens", Tl);
    for (int i = 0; i < Tl; i++)
        CHECK(pos[i] >= 0 && pos[i] < T,
              "check T against the sequence-parallel size when the run is configured",
              "layout_take: local token %d at position %ld does not fit a sequence of %d", i,
              pos[i], T);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tl; i++) local[(size_t)b * Tl + i] = full[(size_t)b * T + pos[i]];
}
