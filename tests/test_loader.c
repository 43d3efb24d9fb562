// Data loader tests. Shard f holds token f*10000 + i at position i, so every row of a batch
// names the window it came from. Usage: test_loader [GROUP] with GROUP one of windows, order,
// epochs, dp, resume, val, errors, cyclic, blend-period, blend-values, blend (no argument: all).
#include "data/loader.h"

#include <math.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/fail.h"
#include "data/blend.h"
#include "data/shard.h"

#include "tests/test_expect.h"

// The test data set: 5 shards of these lengths at T = 8 (windows: 6, 4, 1, 9, 5 = 25).
#define NF 5
#define T_ 8
static const int shard_len[NF] = {50, 33, 9, 80, 41};
static const int shard_nwin[NF] = {6, 4, 1, 9, 5};
#define NWIN 25
#define VOCAB 65536
static char tmpdir[256];
static char paths_buf[NF][512];
static const char* paths[NF];

static void die(const char* what) {
    fprintf(stderr, "test setup: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void make_shards(void) {
    for (int f = 0; f < NF; f++) {
        snprintf(paths_buf[f], sizeof paths_buf[f], "%s/ld_train_%06d.bin", tmpdir, f);
        paths[f] = paths_buf[f];
        uint32_t tok[100];
        for (int i = 0; i < shard_len[f]; i++) tok[i] = (uint32_t)(f * 10000 + i);
        char err[ERR_LEN];
        // Shard 3 uses the uint32 variant, so a data set may mix both.
        if (shard_write(paths[f], tok, (size_t)shard_len[f], f == 3, err, sizeof err) != 0) {
            fprintf(stderr, "test setup: %s\n", err);
            exit(2);
        }
    }
}

static LoaderConfig config(int B, int dp_rank, int dp_size, int shuffle, uint64_t seed) {
    return (LoaderConfig){.B = B, .T = T_, .dp_rank = dp_rank, .dp_size = dp_size,
                          .shuffle = shuffle, .seed = seed, .vocab_size = VOCAB,
                          .mode = LOADER_TRAIN};
}

static DataLoader* open_or_die(const LoaderConfig* c) {
    char err[ERR_LEN];
    DataLoader* L = loader_open_files(paths, NF, c, err, sizeof err);
    if (!L) {
        fprintf(stderr, "loader_open_files: %s\n", err);
        exit(2);
    }
    return L;
}

// Global id (0..NWIN-1, files in list order) of the window in one row; -1 if the row is not a
// well-formed window (inputs consecutive from a multiple of T, targets shifted by one).
static int window_id(const int32_t* in, const int32_t* tgt) {
    int f = in[0] / 10000, pos = in[0] % 10000;
    if (f < 0 || f >= NF || pos % T_ != 0) return -1;
    int k = pos / T_;
    if (k >= shard_nwin[f]) return -1;
    for (int t = 0; t < T_; t++)
        if (in[t] != in[0] + t || tgt[t] != in[0] + t + 1) return -1;
    int id = k;
    for (int i = 0; i < f; i++) id += shard_nwin[i];
    return id;
}

static int file_of(int id) {
    int f = 0;
    while (id >= shard_nwin[f]) id -= shard_nwin[f++];
    return f;
}

// Reads nb batches of B rows and stores their window ids in ids (nb*B); -1 marks a bad row.
static int read_ids(DataLoader* L, int B, int nb, int* ids) {
    int32_t in[16 * T_], tgt[16 * T_];
    char err[ERR_LEN];
    for (int n = 0; n < nb; n++) {
        int rc = loader_next(L, in, tgt, err, sizeof err);
        if (rc != 0) {
            printf("        loader_next returned %d: %s\n", rc, rc < 0 ? err : "end");
            return -1;
        }
        for (int b = 0; b < B; b++) ids[n * B + b] = window_id(in + b * T_, tgt + b * T_);
    }
    return 0;
}

static int all_valid(const int* ids, int n) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0) return 0;
    return 1;
}

static void test_windows(void) {
    printf("windows and batch layout\n");
    LoaderConfig c = config(3, 0, 1, 0, 0);
    DataLoader* L = open_or_die(&c);
    EXPECT(loader_windows_per_epoch(L) == NWIN, "windows per epoch %lld == sum of (n-1)/T = %d",
           (long long)loader_windows_per_epoch(L), NWIN);
    EXPECT(loader_num_files(L) == NF, "file count %d", loader_num_files(L));
    int32_t in[3 * T_], tgt[3 * T_];
    char err[ERR_LEN];
    int rc = loader_next(L, in, tgt, err, sizeof err);
    int exact = rc == 0;
    for (int b = 0; b < 3 && exact; b++)
        for (int t = 0; t < T_; t++)
            exact = exact && in[b * T_ + t] == b * T_ + t && tgt[b * T_ + t] == b * T_ + t + 1;
    EXPECT(exact, "first batch: row b = tokens b*T..b*T+T-1 of shard 0, targets shifted by one");
    // Unshuffled order is the natural one, and micro-batches span shard boundaries.
    int ids[2 * NWIN + 1];
    ids[0] = 0, ids[1] = 1, ids[2] = 2;
    rc = read_ids(L, 3, 16, ids + 3);
    int natural = rc == 0;
    for (int i = 0; i < 51 && natural; i++) natural = ids[i] == i % NWIN;
    EXPECT(natural, "unshuffled: windows in natural order, batches crossing shards and epochs");
    loader_close(L);
}

static void test_order(void) {
    printf("determinism and shuffling\n");
    int a[60], b[60], d[60];
    LoaderConfig c = config(3, 0, 1, 1, 1234);
    DataLoader* L1 = open_or_die(&c);
    DataLoader* L2 = open_or_die(&c);
    c.seed = 1235;
    DataLoader* L3 = open_or_die(&c);
    int ok = read_ids(L1, 3, 20, a) == 0 && read_ids(L2, 3, 20, b) == 0 &&
             read_ids(L3, 3, 20, d) == 0;
    EXPECT(ok && all_valid(a, 60), "20 shuffled batches read, every row a well-formed window");
    EXPECT(ok && memcmp(a, b, sizeof a) == 0, "same seed: identical batches");
    EXPECT(ok && memcmp(a, d, sizeof a) != 0, "different seed: different batches");
    int natural = 1;
    for (int i = 0; i < NWIN; i++) natural = natural && a[i] == i;
    EXPECT(!natural, "shuffled order differs from natural order");
    // Golden fingerprint of the seed-1234 order: the permutation must not change between
    // machines or versions, or resumed runs would read different data.
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 60; i++) h = (h ^ (uint64_t)a[i]) * 1099511628211ull;
    printf("        first windows:");
    for (int i = 0; i < 25; i++) printf(" %d", a[i]);
    printf("\n");
    EXPECT(h == 0x35f0ce981ee4dd88ull, "order fingerprint %016llx matches the recorded one",
           (unsigned long long)h);
    loader_close(L1);
    loader_close(L2);
    loader_close(L3);
}

static void test_epochs(void) {
    printf("epochs\n");
    enum { E = 6 };
    int ids[E * NWIN];
    LoaderConfig c = config(1, 0, 1, 1, 77);
    DataLoader* L = open_or_die(&c);
    int ok = read_ids(L, 1, E * NWIN, ids) == 0 && all_valid(ids, E * NWIN);
    loader_close(L);
    EXPECT(ok, "%d epochs read one window at a time", E);
    int first_files[E][NF];
    for (int e = 0; ok && e < E; e++) {
        int seen[NWIN] = {0}, once = 1, runs = 1;
        const int* w = ids + e * NWIN;
        for (int i = 0; i < NWIN; i++) seen[w[i]]++;
        for (int i = 0; i < NWIN; i++) once = once && seen[i] == 1;
        EXPECT(once, "epoch %d: every window exactly once", e);
        // The epoch is a concatenation of whole shards: the file changes NF-1 times.
        int nf = 0;
        first_files[e][nf++] = file_of(w[0]);
        for (int i = 1; i < NWIN; i++)
            if (file_of(w[i]) != file_of(w[i - 1])) {
                runs++;
                if (nf < NF) first_files[e][nf++] = file_of(w[i]);
            }
        EXPECT(runs == NF, "epoch %d: shards visited whole, one after another (%d runs)", e, runs);
        if (e > 0)
            EXPECT(memcmp(w, ids, NWIN * sizeof *w) != 0,
                   "epoch %d re-permuted (differs from epoch 0)", e);
    }
    int shard_orders_differ = 0;
    for (int e = 1; ok && e < E; e++)
        shard_orders_differ += memcmp(first_files[e], first_files[0], sizeof first_files[0]) != 0;
    EXPECT(shard_orders_differ > 0, "shard order changes between epochs (%d of %d differ)",
           shard_orders_differ, E - 1);
    // Micro-batches are plain chunks of the same global sequence, whatever B is.
    int ids3[E * NWIN];
    c.B = 3;
    L = open_or_die(&c);
    ok = read_ids(L, 3, E * NWIN / 3, ids3) == 0;
    loader_close(L);
    EXPECT(ok && memcmp(ids, ids3, sizeof ids) == 0,
           "B = 3 batches are consecutive chunks of the B = 1 sequence (across epochs)");
}

static void test_dp(void) {
    printf("data parallelism\n");
    enum { B = 3, DP = 4, STEPS = 9 };  // 9 steps x 4 x 3 = 108 windows: crosses 4 epochs
    int single[STEPS * DP * B], ranks[DP][STEPS * B];
    LoaderConfig c = config(B, 0, 1, 1, 99);
    DataLoader* L = open_or_die(&c);
    int ok = read_ids(L, B, STEPS * DP, single) == 0;
    loader_close(L);
    for (int d = 0; d < DP; d++) {
        c = config(B, d, DP, 1, 99);
        L = open_or_die(&c);
        ok = ok && read_ids(L, B, STEPS, ranks[d]) == 0;
        loader_close(L);
    }
    EXPECT(ok && all_valid(single, STEPS * DP * B), "1 rank x %d micro-steps and %d ranks read",
           DP, DP);
    int exact = ok;
    for (int n = 0; n < STEPS && exact; n++)
        for (int d = 0; d < DP; d++)
            exact = exact && memcmp(ranks[d] + n * B, single + (n * DP + d) * B,
                                    B * sizeof(int)) == 0;
    EXPECT(exact, "rank d's batch n == global batch n*%d + d", DP);
    // The same statement as a set: per step, the union over ranks equals the 4 micro-steps.
    int same_sets = ok;
    for (int n = 0; n < STEPS && same_sets; n++) {
        int cnt[NWIN] = {0};
        for (int m = 0; m < DP * B; m++) cnt[single[n * DP * B + m]]++;
        for (int d = 0; d < DP; d++)
            for (int b = 0; b < B; b++) cnt[ranks[d][n * B + b]]--;
        for (int i = 0; i < NWIN; i++) same_sets = same_sets && cnt[i] == 0;
    }
    EXPECT(same_sets, "each step: tokens of 1 rank x %d micro-steps == union of %d ranks", DP, DP);
    int differ = 0;
    for (int d = 1; d < DP; d++) differ += memcmp(ranks[d], ranks[0], sizeof ranks[0]) != 0;
    EXPECT(differ == DP - 1, "ranks read different batches");
}

static void test_resume(void) {
    printf("checkpoint state\n");
    enum { B = 3, BEFORE = 7, AFTER = 15 };
    char err[ERR_LEN] = "";
    int want[AFTER * B], got[AFTER * B];
    LoaderConfig c = config(B, 0, 1, 1, 5);
    DataLoader* L = open_or_die(&c);
    int skip[BEFORE * B];
    int ok = read_ids(L, B, BEFORE, skip) == 0;
    LoaderState st;
    loader_get_state(L, &st);
    ok = ok && read_ids(L, B, AFTER, want) == 0;
    loader_close(L);
    EXPECT(ok && st.next_batch == BEFORE && st.epoch == BEFORE * B / NWIN && st.seed == 5 &&
           st.shuffle == 1 && st.nfiles == NF && st.B == B && st.T == T_,
           "state after %d batches: next_batch %lld, epoch %lld, seed %llu, shuffle %d, %d files",
           BEFORE, (long long)st.next_batch, (long long)st.epoch, (unsigned long long)st.seed,
           st.shuffle, st.nfiles);
    // A fresh loader with another seed adopts the saved one.
    c.seed = 999;
    L = open_or_die(&c);
    int rc = loader_set_state(L, &st, err, sizeof err);
    ok = rc == 0 && read_ids(L, B, AFTER, got) == 0;
    EXPECT(ok && memcmp(want, got, sizeof want) == 0,
           "restored loader reproduces the next %d batches exactly (across an epoch) %s", AFTER,
           err);
    // Restoring into the same loader after reading further also rewinds exactly.
    rc = loader_set_state(L, &st, err, sizeof err);
    ok = rc == 0 && read_ids(L, B, AFTER, got) == 0;
    EXPECT(ok && memcmp(want, got, sizeof want) == 0, "rewinding a used loader works too");
    loader_close(L);

    // With data parallelism every rank saves the same state, and restores its own stream.
    int w2[AFTER * B], g2[AFTER * B];
    c = config(B, 2, 4, 1, 5);
    L = open_or_die(&c);
    ok = read_ids(L, B, BEFORE, skip) == 0;
    loader_get_state(L, &st);
    ok = ok && read_ids(L, B, AFTER, w2) == 0;
    loader_close(L);
    L = open_or_die(&c);
    rc = loader_set_state(L, &st, err, sizeof err);
    ok = ok && rc == 0 && read_ids(L, B, AFTER, g2) == 0;
    EXPECT(ok && st.next_batch == BEFORE * 4 && memcmp(w2, g2, sizeof w2) == 0,
           "dp rank 2 of 4: state next_batch %lld, resumed batches identical",
           (long long)st.next_batch);
    LoaderState good = st, bad;
    bad = good, bad.nfiles = 4;
    err[0] = '\0';
    rc = loader_set_state(L, &bad, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "nfiles: expected 5") && strstr(err, "found 4"),
           "state with another file count rejected: \"%s\"", err);
    bad = good, bad.next_batch = good.next_batch + 1;
    bad.epoch = bad.next_batch * B / NWIN;
    rc = loader_set_state(L, &bad, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "multiple of dp_size 4"),
           "next_batch not divisible by dp_size rejected: \"%s\"", err);
    bad = good, bad.B = 2;
    rc = loader_set_state(L, &bad, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "B x T"), "state for another B rejected: \"%s\"", err);
    bad = good, bad.epoch = good.epoch + 1;
    rc = loader_set_state(L, &bad, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "epoch: expected"), "inconsistent epoch rejected: \"%s\"", err);
    loader_close(L);
}

static void test_val(void) {
    printf("validation mode\n");
    enum { B = 3 };
    LoaderConfig c = config(B, 0, 1, 1, 5);
    c.mode = LOADER_VAL;  // shuffle = 1 is ignored
    DataLoader* L = open_or_die(&c);
    int64_t nb = loader_global_batches(L);
    EXPECT(nb == NWIN / B && loader_batches_per_epoch(L) == nb,
           "batches per pass %lld == %d windows / B", (long long)nb, NWIN);
    int a[NWIN], b[NWIN];
    int ok = read_ids(L, B, (int)nb, a) == 0;
    int32_t in[B * T_], tgt[B * T_];
    char err[ERR_LEN];
    EXPECT(loader_next(L, in, tgt, err, sizeof err) == 1, "after %lld batches loader_next says "
           "end of pass", (long long)nb);
    loader_reset(L);
    ok = ok && read_ids(L, B, (int)nb, b) == 0;
    int natural = ok;
    for (int i = 0; i < nb * B && natural; i++) natural = a[i] == i;
    EXPECT(natural, "validation windows in natural order despite shuffle = 1");
    EXPECT(ok && memcmp(a, b, (size_t)nb * B * sizeof(int)) == 0,
           "after loader_reset the same batches again");
    loader_close(L);
    // dp ranks split the pass as training does: rank d gets global batches n*dp + d, up to the
    // pass's end, so the first pass % dp ranks get one more (8 batches: 4+4 on 2 ranks, 3+3+2 on 3).
    for (int dp = 2; dp <= 3; dp++) {
        int r[3][NWIN];
        int64_t got[3];
        int split = ok;
        for (int d = 0; d < dp; d++) {
            c.dp_rank = d, c.dp_size = dp;
            L = open_or_die(&c);
            got[d] = nb / dp + (d < nb % dp);
            split = split && loader_global_batches(L) == nb &&
                    read_ids(L, B, (int)got[d], r[d]) == 0 &&
                    loader_next(L, in, tgt, err, sizeof err) == 1;
            loader_close(L);
        }
        for (int d = 0; split && d < dp; d++)
            for (int n = 0; split && n < got[d]; n++)
                split = memcmp(r[d] + n * B, a + (n * dp + d) * B, B * sizeof(int)) == 0;
        EXPECT(split, "%d dp ranks: %lld, %lld%s batches, then the end; rank d's batch n == "
               "global batch n*%d + d", dp, (long long)got[0], (long long)got[1],
               dp == 3 ? " and 2" : "", dp);
    }
}

// Opens with the given file list and checks the error message has both fragments.
static void expect_open_error(const char* what, const char* const* list, int n,
                              const LoaderConfig* c, const char* f1, const char* f2) {
    char err[ERR_LEN] = "";
    DataLoader* L = loader_open_files(list, n, c, err, sizeof err);
    EXPECT(!L && strstr(err, f1) && strstr(err, f2), "%s: \"%s\"", what, err);
    loader_close(L);
}

static void test_errors(void) {
    printf("bad input\n");
    LoaderConfig c = config(3, 0, 1, 1, 5);
    char err[ERR_LEN] = "";
    char p_short[600], p_missing[600], p_magic[600], p_big[600], pattern[600];
    snprintf(p_short, sizeof p_short, "%s/short.bin", tmpdir);
    snprintf(p_missing, sizeof p_missing, "%s/missing.bin", tmpdir);
    snprintf(p_magic, sizeof p_magic, "%s/magic.bin", tmpdir);
    snprintf(p_big, sizeof p_big, "%s/bigtoken.bin", tmpdir);
    uint32_t tok[20] = {0};
    if (shard_write(p_short, tok, T_, 0, err, sizeof err) != 0) die(err);  // T tokens: 0 windows
    tok[13] = 70000;
    if (shard_write(p_big, tok, 20, 0, err, sizeof err) != 0) die(err);
    FILE* f = fopen(p_magic, "wb");
    int32_t hdr[SHARD_HEADER_INTS] = {20240519, 1, 0};
    if (!f || fwrite(hdr, sizeof hdr, 1, f) != 1 || fclose(f) != 0) die(p_magic);

    const char* l_short[] = {paths[0], p_short};
    expect_open_error("short shard", l_short, 2, &c, p_short,
                      "token count: expected at least T+1 = 9 tokens (one window of T = 8), "
                      "found 8");
    const char* l_missing[] = {paths[0], p_missing};
    expect_open_error("missing file", l_missing, 2, &c, p_missing, "No such file");
    const char* l_magic[] = {p_magic, paths[0]};
    expect_open_error("bad magic (checked at open, before any token is read)", l_magic, 2, &c,
                      p_magic, "header[0] (magic)");
    expect_open_error("empty file list", paths, 0, &c, "file list",
                      "expected at least one shard file");
    LoaderConfig bad = c;
    bad.dp_rank = 4, bad.dp_size = 4;
    expect_open_error("dp_rank out of range", paths, NF, &bad, "dp_rank", "found 4");
    bad = c, bad.T = 0;
    expect_open_error("T = 0", paths, NF, &bad, "T: expected >= 1", "found 0");
    bad = c, bad.mode = LOADER_VAL, bad.B = 20, bad.dp_size = 2;
    bad.dp_rank = 1;  // one micro-batch of 20 windows, for rank 0: rank 1 opens, gets none
    DataLoader* V = loader_open_files(paths, NF, &bad, err, sizeof err);
    int32_t vin[20 * T_], vtgt[20 * T_];
    EXPECT(V && loader_global_batches(V) == 1 && loader_next(V, vin, vtgt, err, sizeof err) == 1,
           "validation pass of one micro-batch on 2 dp ranks: rank 1 opens and gets none");
    loader_close(V);
    bad.B = 30;
    expect_open_error("validation set smaller than one micro-batch", paths, NF, &bad,
                      "expected at least one micro-batch of B = 30", "found 25 windows");

    snprintf(pattern, sizeof pattern, "%s/nothing_*.bin", tmpdir);
    err[0] = '\0';
    DataLoader* L = loader_open(pattern, &c, err, sizeof err);
    EXPECT(!L && strstr(err, pattern) && strstr(err, "found none"),
           "pattern matching nothing: \"%s\"", err);
    loader_close(L);
    L = loader_open(p_missing, &c, err, sizeof err);
    EXPECT(!L && strstr(err, p_missing) && strstr(err, "cannot open"),
           "plain missing path: \"%s\"", err);
    loader_close(L);

    // A token over the vocabulary is found when its shard is loaded, and names file and index.
    const char* l_big[] = {p_big};
    c.shuffle = 0;
    c.vocab_size = 50257;
    L = loader_open_files(l_big, 1, &c, err, sizeof err);
    EXPECT(L != NULL, "shard with a token >= vocab size opens (tokens are checked lazily) %s",
           L ? "" : err);
    if (L) {
        int32_t in[3 * T_], tgt[3 * T_];
        err[0] = '\0';
        int rc = loader_next(L, in, tgt, err, sizeof err);
        EXPECT(rc == -1 && strstr(err, p_big) &&
               strstr(err, "token 13: expected id < vocab size 50257, found 70000"),
               "token out of range on load: \"%s\"", err);
        loader_close(L);
    }

    // The glob form opens the training shards in sorted order, like the explicit list.
    snprintf(pattern, sizeof pattern, "%s/ld_train_*.bin", tmpdir);
    c = config(3, 0, 1, 1, 5);
    L = loader_open(pattern, &c, err, sizeof err);
    DataLoader* L2 = open_or_die(&c);
    int a[30], b[30];
    int ok = L && read_ids(L, 3, 10, a) == 0 && read_ids(L2, 3, 10, b) == 0;
    EXPECT(ok && loader_num_files(L) == NF && memcmp(a, b, sizeof a) == 0,
           "glob pattern == explicit sorted list %s", L ? "" : err);
    loader_close(L);
    loader_close(L2);
    unlink(p_short);
    unlink(p_magic);
    unlink(p_big);
}

static void test_cyclic(void) {
    printf("sequence-parallel cyclic layout\n");
    enum { B = 2, T = 12 };
    int32_t full[B * T], local[B * T], rebuilt[B * T];
    for (int i = 0; i < B * T; i++) full[i] = 1000 + i;
    int Ps[] = {1, 2, 3, 4, 6, 12};
    for (int pi = 0; pi < 6; pi++) {
        int P = Ps[pi], Tl = T / P, ok = 1;
        for (int i = 0; i < B * T; i++) rebuilt[i] = -1;
        for (int r = 0; r < P; r++) {
            for (int i = 0; i < B * Tl; i++) local[i] = -7;
            long positions[T];
            for (int i = 0; i < Tl; i++) positions[i] = r + (long)P * i;
            layout_take(full, B, T, positions, T / P, local);
            for (int b = 0; b < B; b++)
                for (int i = 0; i < Tl; i++) {
                    int pos = r + P * i;  // the position contract
                    ok = ok && local[b * Tl + i] == full[b * T + pos];
                    rebuilt[b * T + pos] = local[b * Tl + i];
                }
        }
        EXPECT(ok && memcmp(rebuilt, full, sizeof full) == 0,
               "P = %d: local i holds global position sp_rank + P*i; ranks together hold all", P);
    }
    // Tokens that do not fit the row (rank 3 of P = 4 with T = 10 would need position 11) are a
    // caller bug: the helper ends the process with a message, never reads past the row.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const long beyond[3] = {3, 7, 11};
        layout_take(full, B, 10, beyond, 3, local);
        _exit(0);
    }
    int status = 0;
    int waited = pid > 0 && waitpid(pid, &status, 0) == pid;
    EXPECT(waited && WIFEXITED(status) && WEXITSTATUS(status) == 1,
           "T = 10, rank 3 of P = 4: clean fatal error (exit 1), no crash");
}

// ---- Blends ----

// The period of a blend: exact shares, windows spread evenly, random access equal to walking.
static void test_blend_table(void) {
    printf("blend period\n");
    char err[ERR_LEN] = "";
    BlendTable t;
    const double w3[3] = {1, 1, 1}, w2[2] = {0.7, 0.3};
    int rc = blend_table_build(w3, 3, &t, err, sizeof err);
    EXPECT(rc == 0 && t.share[0] == 33334 && t.share[1] == 33333 && t.share[2] == 33333,
           "weights 1 1 1: shares %d %d %d of %d (largest remainder)", rc ? 0 : t.share[0],
           rc ? 0 : t.share[1], rc ? 0 : t.share[2], BLEND_PERIOD);
    blend_table_free(&t);
    rc = blend_table_build(w2, 2, &t, err, sizeof err);
    EXPECT(rc == 0 && t.share[0] == 70000 && t.share[1] == 30000, "weights 0.7 0.3: 70000 30000");
    // Walk three periods: window p of component c is its (windows of c before p)-th, every
    // prefix is within a window of the proportions, and blend_counts agrees.
    int64_t seen[2] = {0, 0}, worst_index = 0;
    double worst_dev = 0;
    int counts_ok = 1;
    for (int64_t p = 0; p < 3 * BLEND_PERIOD + 17; p++) {
        if (p % 9973 == 0) {
            int64_t counts[2];
            blend_counts(&t, p, counts);
            counts_ok = counts_ok && counts[0] == seen[0] && counts[1] == seen[1];
        }
        int c;
        int64_t k;
        blend_locate(&t, p, &c, &k);
        if (k != seen[c]) worst_index++;
        seen[c]++;
        for (int i = 0; i < 2; i++) {
            const double dev = fabs((double)seen[i] - (double)(p + 1) * w2[i]);
            if (dev > worst_dev) worst_dev = dev;
        }
    }
    EXPECT(worst_index == 0, "random access: window p is the next window of its component (%lld "
           "mismatches over 3 periods)", (long long)worst_index);
    EXPECT(worst_dev < 1, "every prefix within %.3f windows of 0.7 / 0.3", worst_dev);
    EXPECT(counts_ok, "blend_counts equals the walked counts");
    blend_table_free(&t);
    // Seven uneven weights: each period holds exactly the shares; deviation stays small.
    const double w7[7] = {5, 1e-3, 2.5, 0.25, 1, 1, 0.5};
    rc = blend_table_build(w7, 7, &t, err, sizeof err);
    int64_t period[7] = {0};
    double dev7 = 0;
    int64_t run[7] = {0};
    for (int64_t p = 0; rc == 0 && p < BLEND_PERIOD; p++) {
        period[t.comp[p]]++;
        run[t.comp[p]]++;
        for (int i = 0; i < 7; i++) {
            const double dev = fabs((double)run[i] - (double)(p + 1) * t.share[i] / BLEND_PERIOD);
            if (dev > dev7) dev7 = dev;
        }
    }
    int exact = rc == 0;
    for (int i = 0; exact && i < 7; i++) exact = period[i] == t.share[i];
    // 1e-3 / 10.251 of 100000 is 9.755: floor 9, and one of the four slots left over.
    EXPECT(exact && t.share[1] == 10 && t.share[0] == 48776,
           "seven weights (one of 1e-3 / 10.251): each period holds exactly the shares (%d for "
           "1e-3, %d for 5)", rc ? 0 : t.share[1], rc ? 0 : t.share[0]);
    // Smooth weighted round-robin keeps two components within half a window of the proportions
    // (above) and more within a window or so (1.12 the worst of random weights up to 16).
    EXPECT(dev7 < 1.5, "seven weights: every prefix within %.3f windows of the shares", dev7);
    blend_table_free(&t);
    // Weights near DBL_MAX: normalised by the largest before they are summed.
    const double huge[3] = {1e308, 1e308, 5e307};
    rc = blend_table_build(huge, 3, &t, err, sizeof err);
    EXPECT(rc == 0 && t.share[0] == 40000 && t.share[1] == 40000 && t.share[2] == 20000,
           "weights 1e308 1e308 5e307: shares 40000 40000 20000 %s", err);
    blend_table_free(&t);
    // A weight whose exact share is under one slot is refused, even where rounding would give
    // it one (0.6 of 100000 slots here).
    const double under[2] = {99999.4, 0.6};
    err[0] = 0;
    rc = blend_table_build(under, 2, &t, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "component 2: weight 0.6"), "a share of 0.6 slots refused: "
           "\"%s\"", err);
    // A weight that rounds to nothing, and bad weights, are refused.
    const double tiny[2] = {1, 1e-6};
    rc = blend_table_build(tiny, 2, &t, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "component 2: weight 1e-06") && strstr(err, "1/100000"),
           "a weight below 1/%d of the total refused: \"%s\"", BLEND_PERIOD, err);
    const double neg[2] = {1, -1};
    rc = blend_table_build(neg, 2, &t, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "component 2: expected a positive"), "negative weight: \"%s\"",
           err);
    // One component: window p is its window p, with no table.
    const double one[1] = {3};
    rc = blend_table_build(one, 1, &t, err, sizeof err);
    int c1;
    int64_t k1;
    if (rc == 0) blend_locate(&t, 123456789012LL, &c1, &k1);
    EXPECT(rc == 0 && !t.comp && c1 == 0 && k1 == 123456789012LL, "one component: the identity");
    blend_table_free(&t);
}

// The --train-data value: a pattern (spaces and all), or WEIGHT PATTERN pairs.
static void test_blend_spec(void) {
    printf("blend values\n");
    char err[ERR_LEN] = "";
    BlendSpec s;
    int rc = blend_spec_parse("data/my shards/x_*.bin", &s, err, sizeof err);
    EXPECT(rc == 0 && s.n == 1 && s.weight[0] == 1 && !strcmp(s.pattern[0], "data/my shards/x_*.bin"),
           "a pattern with a space is one pattern of weight 1");
    blend_spec_free(&s);
    rc = blend_spec_parse("2024", &s, err, sizeof err);
    EXPECT(rc == 0 && s.n == 1 && !strcmp(s.pattern[0], "2024"), "one word that is a number is "
           "one pattern (a file named 2024)");
    blend_spec_free(&s);
    rc = blend_spec_parse(" 0.7  web_*.bin\t3e-1 code_*.bin ", &s, err, sizeof err);
    EXPECT(rc == 0 && s.n == 2 && s.weight[0] == 0.7 && s.weight[1] == 0.3 &&
           !strcmp(s.pattern[0], "web_*.bin") && !strcmp(s.pattern[1], "code_*.bin"),
           "'0.7 web 3e-1 code': two components");
    blend_spec_free(&s);
    const char* bad[][2] = {{"0.7 a 0.3", "weight '0.3' has no pattern"},
                            {"0.7 a b c", "word 3: expected a weight"},
                            {"0.7 a 0 b", "found '0'"},
                            {"0.7 a -1 b", "found '-1'"},
                            {"0.7 a inf b", "found 'inf'"},
                            {"   ", "empty value"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        rc = blend_spec_parse(bad[i][0], &s, err, sizeof err);
        EXPECT(rc == -1 && strstr(err, bad[i][1]) && s.n == 0, "'%s' refused: \"%s\"", bad[i][0],
               err);
    }
}

// Component of a window id of the test files, with files 0-1 as component A and 2-4 as B.
static int blend_comp_of(int id) { return file_of(id) >= 2; }

static DataLoader* open_blend_or_die(const LoaderConfig* c, double wa, double wb) {
    const LoaderComponent comps[2] = {{.paths = paths, .nfiles = 2, .weight = wa, .pattern = "A"},
                                      {.paths = paths + 2, .nfiles = 3, .weight = wb}};
    char err[ERR_LEN];
    DataLoader* L = loader_open_blend(comps, 2, c, err, sizeof err);
    if (!L) setup_fail("loader_open_blend: %s", err);
    return L;
}

// A loader over a blend: component A (10 windows) ordered as a loader of its files alone, B (15)
// a permutation per epoch of its own, in the table's proportions; the same on any dp size and
// after a restore; other blends refused by a restore.
static void test_blend_loader(void) {
    printf("blend loader\n");
    enum { B = 4, NB = 30, N = B * NB };
    int ids[N], a_alone[N];
    LoaderConfig c = config(B, 0, 1, 1, 77);
    DataLoader* L = open_blend_or_die(&c, 3, 1);
    EXPECT(loader_num_components(L) == 2 && loader_num_files(L) == NF &&
           !strcmp(loader_file_path(L, 3), paths[3]) && loader_windows_per_epoch(L) == NWIN,
           "2 components, %d files listed in order, %d windows per epoch of each", NF, NWIN);
    LoaderComponentInfo ia, ib;
    loader_component_info(L, 0, &ia);
    loader_component_info(L, 1, &ib);
    EXPECT(ia.share == 0.75 && ib.share == 0.25 && ia.nfiles == 2 && ib.nfiles == 3 &&
           ia.windows == 10 && ib.windows == 15 && !strcmp(ia.pattern, "A") && !ib.pattern,
           "component info: shares %.3f %.3f, files %d %d, windows %lld %lld", ia.share, ib.share,
           ia.nfiles, ib.nfiles, (long long)ia.windows, (long long)ib.windows);
    int ok = read_ids(L, B, NB, ids) == 0 && all_valid(ids, N);
    BlendTable t;
    char err[ERR_LEN] = "";
    const double w[2] = {3, 1};
    ok = ok && blend_table_build(w, 2, &t, err, sizeof err) == 0;
    int placed = ok;
    int na = 0, nb = 0, a_seq[N], b_seq[N];
    for (int p = 0; ok && p < N; p++) {
        int comp;
        int64_t k;
        blend_locate(&t, p, &comp, &k);
        placed = placed && blend_comp_of(ids[p]) == comp;
        if (comp == 0) a_seq[na++] = ids[p];
        else b_seq[nb++] = ids[p];
    }
    int64_t reads[2];
    loader_component_reads(L, N, reads);
    EXPECT(placed && reads[0] == na && reads[1] == nb && na == 90 && nb == 30,
           "each row from the component the period names: %d of A, %d of B in %d windows", na, nb,
           N);
    // A alone, same seed: the same order (component 0 draws from the run's seed).
    LoaderConfig c1 = config(1, 0, 1, 1, 77);
    DataLoader* LA = loader_open_files(paths, 2, &c1, err, sizeof err);
    ok = LA && read_ids(LA, 1, na, a_alone) == 0;
    EXPECT(ok && memcmp(a_alone, a_seq, sizeof(int) * (size_t)na) == 0,
           "component A's windows are those of a loader of its files alone (9 epochs)");
    loader_close(LA);
    // B: each epoch of its 15 windows a permutation of them (and epochs differ).
    int perm_ok = 1, epochs_differ = 0;
    for (int e = 0; e < 2; e++) {
        int seen[NWIN] = {0};
        for (int i = 0; i < 15; i++) seen[b_seq[e * 15 + i]]++;
        for (int id = 10; id < NWIN; id++) perm_ok = perm_ok && seen[id] == 1;
    }
    epochs_differ = memcmp(b_seq, b_seq + 15, 15 * sizeof(int)) != 0;
    EXPECT(perm_ok && epochs_differ, "component B: each of its 2 epochs a permutation of its 15 "
           "windows, in different orders");
    blend_table_free(&t);
    // dp 3: rank d's micro-batches are global batches n*3 + d.
    int dp_ok = 1;
    for (int d = 0; d < 3; d++) {
        LoaderConfig cd = config(B, d, 3, 1, 77);
        DataLoader* LD = open_blend_or_die(&cd, 3, 1);
        int got[9 * B];
        dp_ok = dp_ok && read_ids(LD, B, 9, got) == 0;
        for (int n = 0; dp_ok && n < 9; n++)
            dp_ok = memcmp(got + n * B, ids + (n * 3 + d) * B, sizeof(int) * B) == 0;
        loader_close(LD);
    }
    EXPECT(dp_ok, "dp 3: every rank reads its global batches of the blended sequence");
    // Restore: the same batches after the saved position, into a fresh loader of another seed.
    loader_reset(L);
    int skip[11 * B], want[10 * B], got[10 * B];
    ok = read_ids(L, B, 11, skip) == 0;
    LoaderState st;
    loader_get_state(L, &st);
    ok = ok && read_ids(L, B, 10, want) == 0;
    c.seed = 5;
    DataLoader* L2 = open_blend_or_die(&c, 3, 1);
    ok = ok && loader_set_state(L2, &st, err, sizeof err) == 0 && read_ids(L2, B, 10, got) == 0;
    EXPECT(ok && st.components == 2 && st.blend != 0 && memcmp(want, got, sizeof want) == 0,
           "restored blend reproduces the next 10 batches (state: %d components, fingerprint "
           "%016llx) %s", st.components, (unsigned long long)st.blend, err);
    loader_close(L2);
    // Another blend's position, or one pattern's, is refused, and a blend's by one pattern.
    L2 = open_blend_or_die(&c, 1, 1);
    err[0] = 0;
    int rc = loader_set_state(L2, &st, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "blend: expected the one the checkpoint was written with (2 "
                              "components"), "other weights refused: \"%s\"", err);
    LoaderState plain = st;
    plain.components = 0;   // a state written before blends (and phases)
    plain.blend = 0;
    plain.data = 0;
    rc = loader_set_state(L2, &plain, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "(1 component, fingerprint 0000000000000000), found 2"),
           "a one-pattern state refused by a blend: \"%s\"", err);
    loader_close(L2);
    // The same shares and file counts in the other order (files 0-1 hold 10 windows, 3-4 14):
    // refused.
    const LoaderComponent swapped[2] = {{.paths = paths + 3, .nfiles = 2, .weight = 1},
                                        {.paths = paths, .nfiles = 2, .weight = 1}};
    const LoaderComponent straight[2] = {{.paths = paths, .nfiles = 2, .weight = 1},
                                         {.paths = paths + 3, .nfiles = 2, .weight = 1}};
    DataLoader* LS = loader_open_blend(straight, 2, &c, err, sizeof err);
    DataLoader* LW = loader_open_blend(swapped, 2, &c, err, sizeof err);
    LoaderState sst;
    if (LS) loader_get_state(LS, &sst);
    err[0] = 0;
    rc = LS && LW ? loader_set_state(LW, &sst, err, sizeof err) : 0;
    EXPECT(rc == -1 && strstr(err, "in the same order, over the same files"),
           "the components swapped (equal shares and file counts, other windows): \"%s\"", err);
    loader_close(LS);
    loader_close(LW);
    DataLoader* L3 = open_or_die(&c);
    rc = loader_set_state(L3, &st, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, "found 1 "), "a blend's state refused by one pattern: \"%s\"",
           err);
    plain.nfiles = NF;
    err[0] = 0;
    rc = loader_set_state(L3, &plain, err, sizeof err);
    EXPECT(rc == 0, "a state written before blends (components 0) restores one pattern %s", err);
    loader_close(L3);
    loader_close(L);
    // A value that names a file as a whole is one pattern, though its first word is a number.
    char cwd[1024];
    const int have_cwd = getcwd(cwd, sizeof cwd) != NULL;
    char spaced[600];
    snprintf(spaced, sizeof spaced, "%s/3 ld.bin", tmpdir);
    int linked = have_cwd && link(paths[0], spaced) == 0 && chdir(tmpdir) == 0;
    DataLoader* LN = linked ? loader_open("3 ld.bin", &c, err, sizeof err) : NULL;
    EXPECT(LN && loader_num_components(LN) == 1 && loader_windows_per_epoch(LN) == shard_nwin[0],
           "'3 ld.bin', an existing file: one pattern, not weight 3 of ld.bin %s", LN ? "" : err);
    loader_close(LN);
    LN = linked ? loader_open("3 ld.b*", &c, err, sizeof err) : NULL;
    EXPECT(LN && loader_num_components(LN) == 1, "'3 ld.b*', a glob with a match: one pattern");
    loader_close(LN);
    if (have_cwd && chdir(cwd) != 0) setup_fail("chdir back to %s", cwd);
    unlink(spaced);
    // Validation takes one pattern.
    LoaderConfig cv = config(B, 0, 1, 0, 1);
    cv.mode = LOADER_VAL;
    const LoaderComponent comps[2] = {{.paths = paths, .nfiles = 2, .weight = 1},
                                      {.paths = paths + 2, .nfiles = 3, .weight = 1}};
    err[0] = 0;
    EXPECT(!loader_open_blend(comps, 2, &cv, err, sizeof err) &&
           strstr(err, "expected one pattern for validation data"),
           "a validation blend refused: \"%s\"", err);
}

// Data phases: a position saved over files 0-1 continued over files 3-4 (other data) as phase 1;
// its first epoch each of their windows once, in an order of its own (not the files' phase-0
// order), resumable within the phase, split over dp 2 as the global order; phase 2 another order;
// bad phase fields and another geometry refused; a phase over a blend laid out from its start;
// a reset back to phase 0.
static DataLoader* open_files_or_die(int first, int n, const LoaderConfig* c) {
    char err[ERR_LEN];
    DataLoader* L = loader_open_files(paths + first, n, c, err, sizeof err);
    if (!L) {
        fprintf(stderr, "loader_open_files: %s\n", err);
        exit(2);
    }
    return L;
}

static void test_phase(void) {
    printf("data phases\n");
    enum { B = 2, NY = 14 };   // files 3 and 4: 9 + 5 windows
    char err[ERR_LEN] = "";
    LoaderConfig c = config(B, 0, 1, 1, 77);
    DataLoader* LX = open_files_or_die(0, 2, &c);
    int skip[8 * B];
    int ok = read_ids(LX, B, 8, skip) == 0;   // 16 windows: into X's second epoch
    LoaderState st;
    loader_get_state(LX, &st);
    DataLoader* LY = open_files_or_die(3, 2, &c);
    EXPECT(ok && loader_state_same_data(LX, &st) && !loader_state_same_data(LY, &st) &&
           st.phase == 0 && st.phase_start == 0 && st.data != 0,
           "a state over files 0-1 is the same data for them, not for files 3-4");
    int64_t start = -1;
    ok = loader_begin_phase(LY, &st, err, sizeof err) == 0;
    const int phase = loader_phase(LY, &start);
    int ids[NY + 10 * B], fresh[NY];
    ok = ok && read_ids(LY, B, NY / B, ids) == 0 && all_valid(ids, NY);
    int seen[NWIN] = {0}, once = ok;
    for (int i = 0; ok && i < NY; i++) seen[ids[i]]++;
    for (int id = 0; ok && id < NWIN; id++) once = once && seen[id] == (file_of(id) >= 3);
    EXPECT(ok && once && phase == 1 && start == 16,
           "phase 1 from window %lld: its first %d windows each window of files 3-4 once %s",
           (long long)start, NY, err);
    DataLoader* LY0 = open_files_or_die(3, 2, &c);
    ok = read_ids(LY0, B, NY / B, fresh) == 0;
    EXPECT(ok && memcmp(fresh, ids, sizeof fresh) != 0,
           "in an order of the phase's own, not the files' phase-0 order");
    int64_t reads[1];
    loader_component_reads(LY, 16 + 10, reads);
    EXPECT(reads[0] == 10, "windows read in the phase after 26 of the run: %lld, expected 10",
           (long long)reads[0]);
    // Saved within the phase and restored into a loader of another seed: the same next batches.
    LoaderState st1;
    loader_get_state(LY, &st1);
    int want[5 * B], got[5 * B];
    ok = read_ids(LY, B, 5, want) == 0;
    c.seed = 5;
    DataLoader* LY2 = open_files_or_die(3, 2, &c);
    ok = ok && loader_set_state(LY2, &st1, err, sizeof err) == 0 && read_ids(LY2, B, 5, got) == 0;
    EXPECT(ok && st1.phase == 1 && st1.phase_start == 16 && st1.epoch == 1 &&
           loader_state_same_data(LY2, &st1) && memcmp(want, got, sizeof want) == 0,
           "restored within phase 1 (position %lld, epoch %lld): the same next 5 batches %s",
           (long long)st1.next_batch, (long long)st1.epoch, err);
    for (int i = 0; i < 5 * B; i++) ids[NY + i] = want[i];
    // dp 2: rank d's n-th micro-batch is global batch 8 + 2n + d, the phase's batch 2n + d.
    int dp_ok = 1;
    for (int d = 0; d < 2; d++) {
        LoaderConfig cd = config(B, d, 2, 1, 77);
        DataLoader* LD = open_files_or_die(3, 2, &cd);
        int mine[6 * B];
        dp_ok = dp_ok && loader_begin_phase(LD, &st, err, sizeof err) == 0 &&
                read_ids(LD, B, 6, mine) == 0;
        for (int n = 0; dp_ok && n < 6; n++)
            dp_ok = memcmp(mine + n * B, ids + (2 * n + d) * B, sizeof(int) * B) == 0;
        loader_close(LD);
    }
    EXPECT(dp_ok, "dp 2: each rank reads its global batches of the phase %s", err);
    // The phase's state is not files 0-1's; a phase 2 over the same files is another order.
    err[0] = 0;
    EXPECT(!loader_state_same_data(LX, &st1) && loader_set_state(LX, &st1, err, sizeof err) == -1 &&
           strstr(err, "data: expected the files the checkpoint was written with"),
           "files 0-1 refuse phase 1's state: \"%s\"", err);
    DataLoader* LZ = open_files_or_die(3, 2, &c);
    int second[NY];
    ok = loader_begin_phase(LZ, &st1, err, sizeof err) == 0 && loader_phase(LZ, &start) == 2 &&
         start == 16 + NY && read_ids(LZ, B, NY / B, second) == 0;
    EXPECT(ok && memcmp(second, ids, sizeof second) != 0 && memcmp(second, fresh, sizeof second),
           "phase 2 from window %lld: an order of its own again", (long long)start);
    // Bad phase fields, another batch geometry: refused.
    struct {
        const char* what;
        int phase;
        int64_t start;
    } bad[] = {{"phase 0 begun past window 0", 0, 16},
               {"a start off the batch boundary", 1, 17},
               {"a start past the position", 1, st1.next_batch * B + B},
               {"a negative phase", -1, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        LoaderState b = st1;
        b.phase = bad[i].phase;
        b.phase_start = bad[i].start;
        err[0] = 0;
        EXPECT(loader_set_state(LY2, &b, err, sizeof err) == -1 && strstr(err, "loader state: "),
               "%s refused: \"%s\"", bad[i].what, err);
    }
    LoaderState g = st;
    g.B = 3;
    err[0] = 0;
    EXPECT(loader_begin_phase(LZ, &g, err, sizeof err) == -1 && strstr(err, "B x T"),
           "a phase from a position of another B refused: \"%s\"", err);
    // A phase over a blend (A 7 : B 3, a pattern of 10 slots) from window 16: its window p is
    // window p - 16 of the blend, so each row comes from the component the period names at
    // p - 16 (at p it would differ), and its first 10 windows of A are each of A's windows once.
    DataLoader* LB = open_blend_or_die(&c, 7, 3);
    enum { NBL = 40 };
    int blended[NBL];
    BlendTable table;
    const double w[2] = {7, 3};
    err[0] = 0;
    ok = loader_begin_phase(LB, &st, err, sizeof err) == 0 &&
         read_ids(LB, B, NBL / B, blended) == 0 && all_valid(blended, NBL) &&
         blend_table_build(w, 2, &table, err, sizeof err) == 0;
    int placed = ok, unshifted = ok, a_seen[NWIN] = {0}, a_count = 0;
    for (int p = 0; ok && p < NBL; p++) {
        int comp, comp_at;
        int64_t k;
        blend_locate(&table, p, &comp, &k);
        placed = placed && blend_comp_of(blended[p]) == comp;
        blend_locate(&table, p + 16, &comp_at, &k);
        unshifted = unshifted && blend_comp_of(blended[p]) == comp_at;
        if (comp == 0 && a_count < 10) a_seen[blended[p]]++, a_count++;
    }
    int a_once = a_count == 10;
    for (int id = 0; id < 10; id++) a_once = a_once && a_seen[id] == 1;
    EXPECT(placed && !unshifted && a_once, "a phase over a blend: its rows from the components of "
           "windows 0..%d of the period (not of 16..%d), A's first 10 each of its windows once %s",
           NBL - 1, NBL + 15, err);
    if (ok) blend_table_free(&table);
    loader_close(LB);
    // A reset is the state after open: phase 0, its order.
    loader_reset(LY);
    ok = read_ids(LY, B, NY / B, ids) == 0 && loader_phase(LY, &start) == 0;
    EXPECT(ok && start == 0 && memcmp(ids, fresh, sizeof fresh) == 0,
           "a reset goes back to phase 0 and its order");
    loader_close(LX);
    loader_close(LY);
    loader_close(LY0);
    loader_close(LY2);
    loader_close(LZ);
}

// The rows of component A (files 0-1) among n window ids, in order, into a; returns how many.
static int a_rows(const int* ids, int n, int* a) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0 && blend_comp_of(ids[i]) == 0) a[k++] = ids[i];
    return k;
}

// Sets that continue across phases (loader_positions, loader_apply_positions): files 0-1 (A) read
// for 6 windows, then a phase over the blend A 1 : B 1 where A goes on: its rows are exactly A's
// own sequence from window 6 on, across its epoch boundary (10 windows), while B starts fresh;
// without continuing A's rows are another order. Restored within the phase (into a loader of
// another seed) the same next batches; a third phase over A alone goes on after both phases' A
// windows, and keeps B's position. Tables that do not fit are refused.
static void test_continue(void) {
    printf("sets that continue across phases\n");
    enum { B = 2, NREF = 80, NBL = 20 };
    char err[ERR_LEN] = "";
    LoaderConfig c = config(B, 0, 1, 1, 77);
    DataLoader* LX = open_files_or_die(0, 2, &c);
    DataLoader* LA = open_files_or_die(0, 2, &c);
    int skip[3 * B], ref[NREF];
    int ok = read_ids(LX, B, 3, skip) == 0 && read_ids(LA, B, NREF / B, ref) == 0;
    LoaderState st;
    loader_get_state(LX, &st);
    LoaderSetPosition pos[4];
    const int npos = loader_positions(LX, pos, 4);
    EXPECT(ok && npos == 1 && pos[0].read == 6 && pos[0].seed == 77,
           "files 0-1 after 6 windows: one position, 6 windows read of the order of seed 77 "
           "(%d positions, read %lld)", npos, npos ? (long long)pos[0].read : -1LL);
    DataLoader* LB = open_blend_or_die(&c, 1, 1);
    int ids[NBL + 10 * B], a[NBL + 10 * B];
    ok = loader_begin_phase(LB, &st, err, sizeof err) == 0 &&
         loader_apply_positions(LB, pos, npos, LOADER_POSITIONS_CONTINUE, err, sizeof err) == 0 &&
         read_ids(LB, B, NBL / B, ids) == 0 && all_valid(ids, NBL);
    int na = ok ? a_rows(ids, NBL, a) : 0;
    EXPECT(ok && na > 5 && 6 + na > 10 && memcmp(a, ref + 6, sizeof(int) * na) == 0 &&
           loader_set_offset(LB, 0) == 6 && loader_set_offset(LB, 1) == 0,
           "a phase over A 1 : B 1 continuing: A's %d rows are A's windows 6..%d of its own "
           "order, into its second epoch; B fresh %s", na, 5 + na, err);
    DataLoader* LR = open_blend_or_die(&c, 1, 1);
    int rids[NBL], ra[NBL];
    ok = loader_begin_phase(LR, &st, err, sizeof err) == 0 &&
         loader_apply_positions(LR, pos, npos, LOADER_POSITIONS_RECORD, err, sizeof err) == 0 &&
         read_ids(LR, B, NBL / B, rids) == 0;
    const int nra = ok ? a_rows(rids, NBL, ra) : 0;
    LoaderSetPosition rpos[4];
    const int nrpos = ok ? loader_positions(LR, rpos, 4) : 0;
    EXPECT(ok && nra == na && memcmp(ra, ref + 6, sizeof(int) * nra) != 0 &&
           loader_set_offset(LR, 0) == 0 && nrpos == 2 && rpos[0].read == nra &&
           rpos[1].read == NBL - nra,
           "the same phase not continuing: A in a fresh order, its position counting from 0 %s",
           err);
    // Saved within the phase, restored into a loader of another seed: the same next batches.
    LoaderState stb;
    loader_get_state(LB, &stb);
    LoaderSetPosition bpos[4];
    const int nbpos = loader_positions(LB, bpos, 4);
    int want[5 * B], got[5 * B];
    ok = nbpos == 2 && bpos[0].read == 6 + na && bpos[1].read == NBL - na &&
         read_ids(LB, B, 5, want) == 0;
    c.seed = 5;
    DataLoader* LB2 = open_blend_or_die(&c, 1, 1);
    ok = ok && loader_set_state(LB2, &stb, err, sizeof err) == 0 &&
         loader_apply_positions(LB2, bpos, nbpos, LOADER_POSITIONS_RESUME, err, sizeof err) == 0 &&
         read_ids(LB2, B, 5, got) == 0;
    EXPECT(ok && memcmp(want, got, sizeof want) == 0 && loader_set_offset(LB2, 0) == 6,
           "restored within the phase: positions A %lld, B %lld windows; the same next 5 "
           "batches %s", (long long)bpos[0].read, (long long)bpos[1].read, err);
    memcpy(ids + NBL, want, sizeof want);
    na = a_rows(ids, NBL + 5 * B, a);
    // Phase 3 over A alone, continuing: after every A window of phases 1 and 2.
    loader_get_state(LB, &stb);
    const int nb3 = loader_positions(LB, bpos, 4);
    DataLoader* LZ = open_files_or_die(0, 2, &c);
    int third[4 * B];
    LoaderSetPosition zpos[4];
    ok = nb3 == 2 && loader_begin_phase(LZ, &stb, err, sizeof err) == 0 &&
         loader_apply_positions(LZ, bpos, nb3, LOADER_POSITIONS_CONTINUE, err, sizeof err) == 0 &&
         read_ids(LZ, B, 4, third) == 0;
    const int nz = ok ? loader_positions(LZ, zpos, 4) : 0;
    EXPECT(ok && 6 + na + 4 * B <= NREF && memcmp(third, ref + 6 + na, sizeof third) == 0 &&
           nz == 2 && zpos[0].read == 6 + na + 4 * B && zpos[1].id == bpos[1].id &&
           zpos[1].read == bpos[1].read && zpos[1].seed == bpos[1].seed,
           "phase 3 over A alone: A's windows %d.. of its order, B's position kept %s", 6 + na,
           err);
    // Tables that do not fit a restore.
    LoaderSetPosition bad[2] = {bpos[0], bpos[1]};
    bad[0].read = 1;
    err[0] = 0;
    EXPECT(loader_set_state(LB2, &stb, err, sizeof err) == 0 &&
           loader_apply_positions(LB2, bad, 2, LOADER_POSITIONS_RESUME, err, sizeof err) == -1 &&
           strstr(err, "expected at least the 15 of this phase"),
           "a set that read fewer windows than the phase refused: \"%s\"", err);
    err[0] = 0;
    EXPECT(loader_apply_positions(LB2, bpos + 1, 1, LOADER_POSITIONS_RESUME, err, sizeof err) ==
               -1 && strstr(err, "expected one for set 0"),
           "a table without one of the phase's sets refused: \"%s\"", err);
    bad[0].read = -1;
    err[0] = 0;
    EXPECT(loader_apply_positions(LB2, bad, 1, LOADER_POSITIONS_CONTINUE, err, sizeof err) == -1 &&
           strstr(err, "had read -1 windows: expected at least the 0"),
           "a negative count refused: \"%s\"", err);
    loader_close(LX);
    loader_close(LA);
    loader_close(LB);
    loader_close(LR);
    loader_close(LB2);
    loader_close(LZ);
}

int main(int argc, char** argv) {
    const char* only = argc > 1 ? argv[1] : "";
    test_make_tmpdir(tmpdir, sizeof tmpdir, "test_loader");
    make_shards();
    struct {
        const char* name;
        void (*fn)(void);
    } groups[] = {{"windows", test_windows}, {"order", test_order}, {"epochs", test_epochs},
                  {"dp", test_dp},           {"resume", test_resume}, {"val", test_val},
                  {"errors", test_errors},   {"cyclic", test_cyclic},
                  {"blend-period", test_blend_table}, {"blend-values", test_blend_spec},
                  {"blend", test_blend_loader}, {"phase", test_phase},
                  {"continue", test_continue}};
    int ran = 0;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        if (!*only || !strcmp(only, groups[i].name)) groups[i].fn(), ran++;
    for (int f = 0; f < NF; f++) unlink(paths[f]);
    rmdir(tmpdir);
    if (!ran) {
        fprintf(stderr, "usage: %s [windows|order|epochs|dp|resume|val|errors|cyclic|blend-period|blend-values|blend|"
                "phase|continue]\n",
                argv[0]);
        return 2;
    }
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
