// The distributed data loader (see data/loader.h for the order it defines).
#include "data/loader.h"

#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/shard.h"

// Tags that keep the shard-order and window-order random streams apart.
#define STREAM_SHARD_ORDER 0x5348415244ull   // "SHARD"
#define STREAM_WINDOW_ORDER 0x57494e444full  // "WINDO"
#define NSLOTS 2  // shards kept mapped: a batch that crosses a boundary needs both

// One mapped shard and its window permutation for one epoch.
typedef struct {
    int file;            // index into the file list, -1 when the slot is empty
    ShardView view;
    int64_t perm_epoch;  // epoch `perm` was drawn for, -1 when none
    uint32_t* perm;      // perm[i] = window read at position i of this shard (shuffled only)
    uint64_t last_use;   // for evicting the least recently used slot
} ShardSlot;

struct DataLoader {
    LoaderConfig cfg;
    int nfiles;
    char** paths;
    int64_t* nwin;        // windows per file
    int64_t total;        // windows per epoch
    int64_t order_epoch;  // epoch `order` and `cum` belong to, -1 when none
    int* order;           // order[i] = file at position i of the epoch
    int64_t* cum;         // cum[i] = windows before position i (nfiles + 1 entries)
    ShardSlot slots[NSLOTS];
    uint64_t use_clock;
    int64_t n;            // micro-batches this rank has produced since epoch 0 began
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

DataLoader* loader_open_files(const char* const* paths, int nfiles, const LoaderConfig* cfg,
                              char* err, size_t errlen) {
    if (check_config(cfg, err, errlen) != 0) return NULL;
    if (nfiles <= 0 || !paths) {
        set_err(err, errlen, "loader: file list: expected at least one shard file, found none");
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
    L->nfiles = nfiles;
    L->order_epoch = -1;
    for (int i = 0; i < NSLOTS; i++) L->slots[i] = (ShardSlot){.file = -1, .perm_epoch = -1};
    L->paths = calloc((size_t)nfiles, sizeof *L->paths);
    L->nwin = calloc((size_t)nfiles, sizeof *L->nwin);
    L->order = calloc((size_t)nfiles, sizeof *L->order);
    L->cum = calloc((size_t)nfiles + 1, sizeof *L->cum);
    if (!L->paths || !L->nwin || !L->order || !L->cum) {
        set_err(err, errlen, "loader: out of memory for %d files", nfiles);
        loader_close(L);
        return NULL;
    }
    // Every file's header and size are checked now, so a bad file fails at start-up rather
    // than hours into training; the tokens themselves are read (and checked) lazily.
    for (int i = 0; i < nfiles; i++) {
        if (!paths[i]) {
            set_err(err, errlen, "loader: file list: entry %d is NULL", i);
            loader_close(L);
            return NULL;
        }
        L->paths[i] = copy_string(paths[i]);
        size_t ntok;
        int width;
        if (!L->paths[i]) {
            set_err(err, errlen, "loader: out of memory");
        } else if (shard_probe(paths[i], &ntok, &width, err, errlen) == 0) {
            if (ntok >= (size_t)cfg->T + 1) {
                L->nwin[i] = (int64_t)((ntok - 1) / (size_t)cfg->T);
                L->total += L->nwin[i];
                continue;
            }
            set_err(err, errlen, "%s: token count: expected at least T+1 = %lld tokens (one "
                    "window of T = %d), found %zu", paths[i], (long long)cfg->T + 1, cfg->T,
                    ntok);
        }
        loader_close(L);
        return NULL;
    }
    if (L->cfg.mode == LOADER_VAL && loader_global_batches(L) == 0) {
        set_err(err, errlen, "loader: validation shards (%d files, first %s): expected at least "
                "one micro-batch of B = %d windows of T = %d, found %lld windows", nfiles, paths[0],
                cfg->B, cfg->T, (long long)L->total);
        loader_close(L);
        return NULL;
    }
    return L;
}

DataLoader* loader_open(const char* pattern, const LoaderConfig* cfg, char* err,
                        size_t errlen) {
    if (!pattern || !*pattern) {
        set_err(err, errlen, "loader: file pattern: expected a path or glob pattern, found "
                "an empty string");
        return NULL;
    }
    // A plain path is opened as is, so that a missing file is reported as missing.
    if (!strpbrk(pattern, "*?[")) return loader_open_files(&pattern, 1, cfg, err, errlen);
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH) {
        set_err(err, errlen, "%s: file pattern: expected at least one matching shard file, "
                "found none", pattern);
        globfree(&g);
        return NULL;
    }
    if (rc != 0) {
        set_err(err, errlen, "%s: file pattern: cannot expand (%s)", pattern,
                rc == GLOB_NOSPACE ? "out of memory" : "read error");
        globfree(&g);
        return NULL;
    }
    if (g.gl_pathc > (size_t)INT32_MAX) {
        set_err(err, errlen, "%s: file pattern: too many matches (%zu)", pattern, g.gl_pathc);
        globfree(&g);
        return NULL;
    }
    DataLoader* L = loader_open_files((const char* const*)g.gl_pathv, (int)g.gl_pathc, cfg,
                                      err, errlen);
    globfree(&g);
    return L;
}

void loader_close(DataLoader* L) {
    if (!L) return;
    for (int i = 0; i < NSLOTS; i++) {
        shard_unmap(&L->slots[i].view);
        free(L->slots[i].perm);
    }
    if (L->paths)
        for (int i = 0; i < L->nfiles; i++) free(L->paths[i]);
    free(L->paths);
    free(L->nwin);
    free(L->order);
    free(L->cum);
    free(L);
}

// ---- Walking the global order ----

// Makes `order` and `cum` describe epoch e.
static void ensure_epoch_order(DataLoader* L, int64_t e) {
    if (L->order_epoch == e) return;
    if (L->cfg.shuffle)
        draw_perm_int(L->order, L->nfiles,
                      stream_key(L->cfg.seed, STREAM_SHARD_ORDER, (uint64_t)e, 0));
    else
        for (int i = 0; i < L->nfiles; i++) L->order[i] = i;
    L->cum[0] = 0;
    for (int i = 0; i < L->nfiles; i++) L->cum[i + 1] = L->cum[i] + L->nwin[L->order[i]];
    L->order_epoch = e;
}

// Returns the slot holding file f mapped, with its window permutation for epoch e.
static ShardSlot* ensure_shard(DataLoader* L, int f, int64_t e, char* err, size_t errlen) {
    ShardSlot* s = NULL;
    for (int i = 0; i < NSLOTS; i++)
        if (L->slots[i].file == f) s = &L->slots[i];
    if (!s) {
        s = &L->slots[0];
        for (int i = 1; i < NSLOTS; i++)
            if (L->slots[i].last_use < s->last_use) s = &L->slots[i];
        shard_unmap(&s->view);
        s->file = -1;
        s->perm_epoch = -1;
        int vocab = L->cfg.vocab_size > 0 ? L->cfg.vocab_size : INT32_MAX;  // ids must fit int32
        if (shard_map(L->paths[f], vocab, &s->view, err, errlen) != 0) return NULL;
        int64_t nwin = s->view.ntok >= (size_t)L->cfg.T + 1
                           ? (int64_t)((s->view.ntok - 1) / (size_t)L->cfg.T) : 0;
        if (nwin != L->nwin[f]) {
            set_err(err, errlen, "%s: token count: changed since the loader opened it "
                    "(%lld windows then, %lld now)", L->paths[f], (long long)L->nwin[f],
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
            s->perm = malloc((size_t)L->nwin[f] * sizeof *s->perm);
            if (!s->perm) {
                set_err(err, errlen, "%s: out of memory for %lld window indices", L->paths[f],
                        (long long)L->nwin[f]);
                return NULL;
            }
        }
        draw_perm_u32(s->perm, (uint32_t)L->nwin[f],
                      stream_key(L->cfg.seed, STREAM_WINDOW_ORDER, (uint64_t)e, (uint64_t)f));
        s->perm_epoch = e;
    }
    return s;
}

// Copies window p of the global sequence into one row of inputs and targets.
static int fetch_window(DataLoader* L, int64_t p, int32_t* in, int32_t* tgt, char* err,
                        size_t errlen) {
    int64_t e = p / L->total, r = p % L->total;
    ensure_epoch_order(L, e);
    int lo = 0, hi = L->nfiles - 1;  // last position i with cum[i] <= r
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (L->cum[mid] <= r) lo = mid;
        else hi = mid - 1;
    }
    int f = L->order[lo];
    ShardSlot* s = ensure_shard(L, f, e, err, errlen);
    if (!s) return -1;
    int64_t local = r - L->cum[lo];
    size_t k = L->cfg.shuffle ? s->perm[local] : (size_t)local;
    size_t start = k * (size_t)L->cfg.T;
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

void loader_reset(DataLoader* L) { L->n = 0; }

int64_t loader_windows_per_epoch(const DataLoader* L) { return L->total; }

int64_t loader_global_batches(const DataLoader* L) { return L->total / L->cfg.B; }

int64_t loader_batches_per_epoch(const DataLoader* L) {
    return L->total / L->cfg.B / L->cfg.dp_size;
}

int loader_num_files(const DataLoader* L) { return L->nfiles; }

const char* loader_file_path(const DataLoader* L, int i) { return L->paths[i]; }

// ---- Checkpoint state ----

void loader_get_state(const DataLoader* L, LoaderState* st) {
    memset(st, 0, sizeof *st);
    st->next_batch = L->n * L->cfg.dp_size;
    st->epoch = st->next_batch * L->cfg.B / L->total;
    st->seed = L->cfg.seed;
    st->shuffle = L->cfg.shuffle;
    st->nfiles = L->nfiles;
    st->B = L->cfg.B;
    st->T = L->cfg.T;
}

int loader_set_state(DataLoader* L, const LoaderState* st, char* err, size_t errlen) {
    if (st->nfiles != L->nfiles)
        return set_err(err, errlen, "loader state: nfiles: expected %d (files given now), "
                       "found %d", L->nfiles, st->nfiles);
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
    int64_t epoch = st->next_batch * L->cfg.B / L->total;
    if (st->epoch != epoch)
        return set_err(err, errlen, "loader state: epoch: expected %lld (from next_batch %lld "
                       "and %lld windows per epoch), found %lld", (long long)epoch,
                       (long long)st->next_batch, (long long)L->total, (long long)st->epoch);
    L->cfg.seed = st->seed;
    L->cfg.shuffle = st->shuffle;
    L->order_epoch = -1;  // permutations depend on the seed: draw them again
    for (int i = 0; i < NSLOTS; i++) L->slots[i].perm_epoch = -1;
    L->n = st->next_batch / L->cfg.dp_size;
    return 0;
}

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
