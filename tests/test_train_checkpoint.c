// Checkpoint file tests below the trainer: training-state and model files rejected when
// corrupted or truncated at any offset, the checkpoint directory (complete steps, pruning),
// atomic writes cut short by SIGKILL, and `verify DIR`, which checks that every DONE-marked
// checkpoint in a trainer's output directory loads (used by tests/test_train.sh).
// Usage: test_train_checkpoint [state|model|dir|atomic] (no argument: all)
//        test_train_checkpoint verify DIR [MIN_COMPLETE]
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/atomic_file.h"
#include "checkpoints/checkpoint_dir.h"
#include "checkpoints/model_file.h"
#include "checkpoints/train_state.h"
#include "comm/fail.h"
#include "model/gpt.h"

#include "tests/test_expect.h"

static char tmpdir[256];

static void path_in_tmp(char* out, size_t len, const char* name) {
    snprintf(out, len, "%s/%s", tmpdir, name);
}

static unsigned char* read_all(const char* path, size_t* n) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "test setup: cannot read %s: %s\n", path, strerror(errno));
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char* p = malloc(*n ? *n : 1);
    if (!p || fread(p, 1, *n, f) != *n) exit(2);
    fclose(f);
    return p;
}

static void write_all(const char* path, const void* data, size_t n) {
    FILE* f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "test setup: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

static int exists(const char* path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static float rand_float(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * 0x1.0p-24) * 2 - 1;
}

// ---- training state ----

static TrainStateInfo sample_info(uint64_t num_params, uint64_t begin, uint64_t count) {
    TrainStateInfo info;
    memset(&info, 0, sizeof info);
    info.step = 7;
    info.world_size = 3;
    info.rank = 2;
    info.dp = 3;
    info.pq = 1;
    info.pkv = 1;
    info.zero_stage = count < num_params;
    info.model = (GPTConfig){.max_T = 8, .V = 100, .Vp = 128, .L = 1, .NH = 2, .C = 8};
    info.B = 2;
    info.T = 8;
    info.accum_steps = 4;
    info.sample_rng = 0x0123456789abcdefULL;
    info.loader = (LoaderState){.epoch = 1, .next_batch = 42, .seed = 99, .shuffle = 1,
                                .nfiles = 2, .B = 2, .T = 8, .components = 3,
                                .blend = 0xfedcba9876543210ULL, .phase = 2,
                                .phase_start = 0x123456789aLL, .data = 0x0f1e2d3c4b5a6978ULL};
    info.phase_step = 5;
    info.train_data_hash = 0x8877665544332211ULL;
    info.npositions = 2;   // the loader's sets: this phase's and an earlier one's
    info.positions[0] = (LoaderSetPosition){0x1111222233334444ULL, 99, 12345};
    info.positions[1] = (LoaderSetPosition){0x5555666677778888ULL, 0xabcdefULL, 0x10000000007LL};
    info.num_params = num_params;
    info.shard_begin = begin;
    info.shard_count = count;
    snprintf(info.config_json, sizeof info.config_json, "{\"steps\":20,\"note\":\"x\"}");
    return info;
}

// Saves, reads back and compares every field and tensor. Returns the file size.
static size_t state_roundtrip(const char* path, const TrainStateInfo* info, const char* what) {
    const size_t np = info->num_params, nc = info->shard_count;
    float *p = malloc(4 * np), *m = malloc(4 * (nc + 1)), *v = malloc(4 * (nc + 1));
    float *p2 = malloc(4 * np), *m2 = malloc(4 * (nc + 1)), *v2 = malloc(4 * (nc + 1));
    for (size_t i = 0; i < np; i++) p[i] = rand_float();
    // m any sign, v a second moment (>= 0)
    for (size_t i = 0; i < nc; i++) m[i] = rand_float(), v[i] = fabsf(rand_float() * rand_float());
    char err[ERR_LEN] = "";
    int rc = train_state_save(path, info, p, m, v, err, sizeof err);
    EXPECT(rc == 0, "state %s: save %s", what, err);
    TrainStateInfo got;
    rc = train_state_read_info(path, &got, err, sizeof err);
    EXPECT(rc == 0, "state %s: read_info %s", what, err);
    const int same_info =
        got.step == info->step && got.world_size == info->world_size && got.rank == info->rank &&
        got.dp == info->dp && got.pq == info->pq && got.pkv == info->pkv &&
        got.zero_stage == info->zero_stage && !memcmp(&got.model, &info->model, sizeof got.model) &&
        got.B == info->B && got.T == info->T && got.accum_steps == info->accum_steps &&
        got.sample_rng == info->sample_rng && got.loader.epoch == info->loader.epoch &&
        got.loader.next_batch == info->loader.next_batch && got.loader.seed == info->loader.seed &&
        got.loader.shuffle == info->loader.shuffle && got.loader.nfiles == info->loader.nfiles &&
        got.loader.B == info->loader.B && got.loader.T == info->loader.T &&
        got.loader.components == info->loader.components &&
        got.loader.blend == info->loader.blend && got.loader.phase == info->loader.phase &&
        got.loader.phase_start == info->loader.phase_start &&
        got.loader.data == info->loader.data && got.phase_step == info->phase_step &&
        got.train_data_hash == info->train_data_hash && got.npositions == info->npositions &&
        !memcmp(got.positions, info->positions, sizeof got.positions[0] * (size_t)got.npositions) &&
        got.num_params == np && got.shard_begin == info->shard_begin && got.shard_count == nc &&
        !strcmp(got.config_json, info->config_json);
    EXPECT(same_info, "state %s: every header field and the config JSON read back", what);
    // The weights of the slice (version 4: a state with set positions) or all of them (older
    // versions) come back; the others' places stay as they were.
    for (size_t i = 0; i < np; i++) p2[i] = -7.0f;
    rc = train_state_load(path, &got, p2, m2, v2, err, sizeof err);
    const size_t wb = info->npositions ? info->shard_begin : 0, wn = info->npositions ? nc : np;
    int others_kept = 1;
    for (size_t i = 0; i < np; i++) others_kept &= (i >= wb && i < wb + wn) || p2[i] == -7.0f;
    EXPECT(rc == 0 && got.version == (info->npositions ? STATE_VERSION_SLICES
                                      : info->loader.phase ? STATE_VERSION_PHASES
                                                           : STATE_VERSION) &&
           !memcmp(p + wb, p2 + wb, 4 * wn) && others_kept && !memcmp(m, m2, 4 * nc) &&
           !memcmp(v, v2, 4 * nc),
           "state %s: version %d; weights %zu..%zu and moments read back bit for bit, the other "
           "weights untouched %s", what, got.version, wb, wb + wn, err);
    free(p), free(m), free(v), free(p2), free(m2), free(v2);
    struct stat st;
    stat(path, &st);
    return (size_t)st.st_size;
}

// Both readers must reject the file at `path`; err must name the file.
static int state_rejected(const char* path, size_t np, size_t nc, char* err, size_t errlen) {
    TrainStateInfo got;
    float *p = malloc(4 * np), *m = malloc(4 * (nc + 1)), *v = malloc(4 * (nc + 1));
    char err2[ERR_LEN] = "";
    err[0] = 0;
    const int a = train_state_read_info(path, &got, err, errlen);
    const int b = train_state_load(path, &got, p, m, v, err2, sizeof err2);
    free(p), free(m), free(v);
    return a != 0 && b != 0 && strstr(err, path) && strstr(err2, path);
}

static void test_state(void) {
    char path[512], copy[512], err[ERR_LEN];
    path_in_tmp(path, sizeof path, "state_00000007_00002.bin");
    path_in_tmp(copy, sizeof copy, "state_copy.bin");
    TrainStateInfo full = sample_info(37, 0, 37);
    state_roundtrip(path, &full, "full");
    TrainStateInfo shard = sample_info(37, 25, 12);   // a ZeRO-1 shard: moments of 25..36
    const size_t size = state_roundtrip(path, &shard, "shard");
    TrainStateInfo empty = sample_info(37, 37, 0);    // a rank whose shard is all padding
    state_roundtrip(copy, &empty, "empty shard");

    size_t n;
    unsigned char* good = read_all(path, &n);
    EXPECT(n == size, "state: file of %zu bytes", n);
    // A state with set positions is version 4 (whatever its phase; its slice of the weights);
    // without, one in a data phase is version 2 (a program without phases refuses it), else 1
    // (every weight); a phase begun after the file's step is refused.
    int32_t version, plain_version, phase_version;
    memcpy(&version, good + 4, 4);
    TrainStateInfo first = sample_info(37, 0, 37);
    first.loader.phase = 0;
    first.loader.phase_start = 0;
    first.phase_step = 0;
    first.npositions = 0;
    state_roundtrip(copy, &first, "phase 0, no positions");
    unsigned char* plain = read_all(copy, &n);
    memcpy(&plain_version, plain + 4, 4);
    free(plain);
    TrainStateInfo phased = sample_info(37, 0, 37);
    phased.npositions = 0;
    state_roundtrip(copy, &phased, "phase 2, no positions");
    plain = read_all(copy, &n);
    memcpy(&phase_version, plain + 4, 4);
    free(plain);
    first.npositions = 1;
    state_roundtrip(copy, &first, "phase 0, one position");
    EXPECT(version == STATE_VERSION_SLICES && plain_version == STATE_VERSION &&
           phase_version == STATE_VERSION_PHASES,
           "state: version %d with positions, %d in the first phase and %d in a data phase "
           "without", version, plain_version, phase_version);
    // A version 4 header with no positions, or more than a state keeps, is refused.
    for (int bad = 0; bad < 2; bad++) {
        unsigned char* h = read_all(path, &n);
        const int32_t count = bad ? LOADER_MAX_POSITIONS + 1 : 0;
        memcpy(h + 4 * 66, &count, 4);
        write_all(copy, h, n);
        free(h);
        EXPECT(state_rejected(copy, 37, 37, err, sizeof err) && strstr(err, "set positions"),
               "state: %d set positions in a version 4 file refused: %s", count, err);
    }
    TrainStateInfo later = sample_info(37, 0, 37);
    later.phase_step = later.step + 1;
    EXPECT(train_state_save(copy, &later, (float[37]){0}, (float[37]){0}, (float[37]){0}, err,
                            sizeof err) == 0 &&
           state_rejected(copy, 37, 37, err, sizeof err) && strstr(err, "data phase 2 from step 8"),
           "state: a phase begun after the file's step refused: %s", err);
    n = size;
    // A single flipped bit anywhere: header, config JSON, weights, moments, checksum.
    int missed = 0, tried = 0;
    char first_err[ERR_LEN] = "", missed_at[64] = "";
    for (size_t off = 0; off < n; off++) {
        {   // one bit per byte, cycling through the bit positions
            const int bit = (int)(off % 8);
            good[off] ^= (unsigned char)(1u << bit);
            write_all(copy, good, n);
            good[off] ^= (unsigned char)(1u << bit);
            tried++;
            if (!state_rejected(copy, 37, 37, err, sizeof err)) {
                if (!missed++) snprintf(missed_at, sizeof missed_at, "offset %zu bit %d", off, bit);
            } else if (!first_err[0] && off >= 1024) {
                snprintf(first_err, sizeof first_err, "%s", err);
            }
        }
    }
    EXPECT(missed == 0, "state: %d of %d single-bit flips (every offset) rejected; first missed "
           "at %s", tried - missed, tried, missed ? missed_at : "-");
    EXPECT(strstr(first_err, "checksum") != NULL, "state: a flipped body bit is reported as: %s",
           first_err);
    // Every truncation, and bytes appended.
    missed = 0;
    for (size_t len = 0; len < n; len++) {
        write_all(copy, good, len);
        if (!state_rejected(copy, 37, 37, err, sizeof err) && !missed++)
            snprintf(missed_at, sizeof missed_at, "length %zu", len);
    }
    EXPECT(missed == 0, "state: all %zu truncations rejected; first missed at %s", n,
           missed ? missed_at : "-");
    write_all(copy, good, n / 2);
    state_rejected(copy, 37, 37, err, sizeof err);
    EXPECT(strstr(err, "size") || strstr(err, "header"), "state: truncation reported as: %s", err);
    unsigned char* longer = calloc(n + 8, 1);
    memcpy(longer, good, n);
    for (size_t extra = 1; extra <= 8; extra *= 2) {
        write_all(copy, longer, n + extra);
        EXPECT(state_rejected(copy, 37, 37, err, sizeof err), "state: %zu appended byte(s) "
               "rejected: %s", extra, err);
    }
    // Specific fields name themselves.
    memcpy(longer, good, n);
    longer[0] ^= 0xff;
    write_all(copy, longer, n);
    state_rejected(copy, 37, 37, err, sizeof err);
    EXPECT(strstr(err, "magic") != NULL, "state: bad magic reported as: %s", err);
    memcpy(longer, good, n);
    longer[4] = 9;
    write_all(copy, longer, n);
    state_rejected(copy, 37, 37, err, sizeof err);
    EXPECT(strstr(err, "version") != NULL, "state: unknown version reported as: %s", err);
    write_all(copy, "garbage\n", 8);
    EXPECT(state_rejected(copy, 37, 37, err, sizeof err), "state: a garbage file: %s", err);
    path_in_tmp(copy, sizeof copy, "no_such_state.bin");
    EXPECT(state_rejected(copy, 37, 37, err, sizeof err) && strstr(err, "cannot open"),
           "state: a missing file: %s", err);
    // A header whose checksum is valid but whose batch geometry is impossible (B, T,
    // accumulation were once read and never checked).
    const int bad_geometry[][3] = {{0, 8, 4}, {2, 0, 4}, {2, 9, 4}, {2, 8, 0}, {-1, 8, 4}};
    for (size_t k = 0; k < sizeof bad_geometry / sizeof *bad_geometry; k++) {
        TrainStateInfo odd = sample_info(37, 0, 37);
        odd.B = bad_geometry[k][0], odd.T = bad_geometry[k][1], odd.accum_steps = bad_geometry[k][2];
        float p[37] = {0}, mv[37] = {0};
        path_in_tmp(copy, sizeof copy, "state_geometry.bin");
        err[0] = 0;
        EXPECT(train_state_save(copy, &odd, p, mv, mv, err, sizeof err) == 0, "state: save %s", err);
        EXPECT(state_rejected(copy, 37, 37, err, sizeof err) && strstr(err, "batch geometry"),
               "state: B=%d T=%d accumulation %d (context 8) rejected as: %s", odd.B, odd.T,
               odd.accum_steps, err);
    }
    // Values no training produces, under a valid checksum: a NaN or infinity (a diverged run's
    // state), beyond 1e30 in magnitude, a negative second moment; refused by the loader (resume
    // takes them as unusable). Large but plausible values load.
    const char* const sections[] = {"params", "adam m", "adam v"};
    const char* const finite = "expected finite values", * const big = "expected magnitudes up "
        "to 1e30", * const negative = "expected a second moment >= 0";
    struct { int sec; float value; const char* why; } forged[] = {
        {0, NAN, finite}, {1, NAN, finite}, {2, INFINITY, finite}, {0, 1e31f, big},
        {0, -3e38f, big}, {1, -2e30f, big}, {2, 1e31f, big}, {2, -1e-12f, negative},
        {2, -1.0f, negative}, {-1, 0, NULL}};  // the last: none forged
    for (size_t k = 0; k < sizeof forged / sizeof *forged; k++) {
        TrainStateInfo info = sample_info(37, 0, 37);
        float p[37] = {0}, m[37] = {0}, v[37] = {0};
        p[3] = 9e29f, m[3] = -9e29f, v[3] = 9e29f;  // plausible bounds: accepted
        const int sec = forged[k].sec;
        if (sec >= 0) (sec == 0 ? p : sec == 1 ? m : v)[7] = forged[k].value;
        path_in_tmp(copy, sizeof copy, "state_forged.bin");
        err[0] = 0;
        EXPECT(train_state_save(copy, &info, p, m, v, err, sizeof err) == 0, "state: save %s", err);
        float p2[37], m2[37], v2[37];
        TrainStateInfo got;
        const int rc = train_state_load(copy, &got, p2, m2, v2, err, sizeof err);
        if (sec < 0) {
            EXPECT(rc == 0 && p2[3] == 9e29f && v2[3] == 9e29f && m2[3] == -9e29f,
                   "state: magnitudes up to 1e30 and a zero second moment load: %s", err);
            continue;
        }
        char want[96];
        snprintf(want, sizeof want, "%s: element 7 is", sections[sec]);
        EXPECT(rc != 0 && strstr(err, want) && strstr(err, forged[k].why) && strstr(err, copy),
               "state: %g in %s under a valid checksum is refused: %s", (double)forged[k].value,
               sections[sec], err);
    }
    // In a slice (parameters 25..36), the element named is the parameter's number.
    {
        TrainStateInfo info = sample_info(37, 25, 12);
        float p[37] = {0}, m[12] = {0}, v[12] = {0}, p2[37], m2[12], v2[12];
        p[27] = INFINITY;
        path_in_tmp(copy, sizeof copy, "state_forged.bin");
        EXPECT(train_state_save(copy, &info, p, m, v, err, sizeof err) == 0, "state: save %s", err);
        TrainStateInfo got;
        EXPECT(train_state_load(copy, &got, p2, m2, v2, err, sizeof err) != 0 &&
               strstr(err, "params: element 27 is inf"),
               "state: an infinity at parameter 27 of the slice 25..36 is named so: %s", err);
    }
    free(longer);
    free(good);
}

// ---- model file ----

static int model_rejected(const char* path, const GPTConfig* expect, float* params, char* err,
                          size_t errlen) {
    GPTConfig c;
    int version;
    char err2[ERR_LEN] = "";
    const int a = model_file_read_header(path, &c, &version, err, errlen);
    const int b = model_file_load(path, expect, params, err2, sizeof err2);
    if (a == 0) snprintf(err, errlen, "%s", err2);   // the header was fine: report the load
    return b != 0 && strstr(err2, path) != NULL;
}

static void test_model(void) {
    const GPTConfig cfg = {.max_T = 4, .V = 8, .Vp = 8, .L = 2, .NH = 2, .C = 4};
    const size_t np = gpt_num_params(&cfg);
    float* p = malloc(4 * np);
    float* q = malloc(4 * np);
    for (size_t i = 0; i < np; i++) p[i] = rand_float();
    char path[512], copy[512], err[ERR_LEN] = "";
    path_in_tmp(path, sizeof path, "model_00000007.bin");
    path_in_tmp(copy, sizeof copy, "model_copy.bin");
    // Round trips: fp32 exact, bf16 to within bf16 rounding.
    int rc = model_file_save(path, &cfg, p, MODEL_VERSION_BF16, err, sizeof err);
    rc |= model_file_load(path, &cfg, q, err, sizeof err);
    double worst = 0;
    for (size_t i = 0; i < np; i++) worst = fmax(worst, fabs(q[i] - p[i]) / fabs(p[i]));
    EXPECT(rc == 0 && worst <= 1.0 / 256, "model: bf16 round trip, worst relative error %.2g %s",
           worst, err);
    rc = model_file_save(path, &cfg, p, MODEL_VERSION_FP32, err, sizeof err);
    GPTConfig got;
    int version = 0;
    rc |= model_file_read_header(path, &got, &version, err, sizeof err);
    rc |= model_file_load(path, &cfg, q, err, sizeof err);
    EXPECT(rc == 0 && version == 3 && !memcmp(&got, &cfg, sizeof got) && !memcmp(p, q, 4 * np),
           "model: fp32 round trip bit for bit %s", err);
    size_t n;
    unsigned char* good = read_all(path, &n);
    EXPECT(n == 1024 + 4 * np, "model: %zu bytes = header + %zu fp32 parameters", n, np);
    // Every truncation, and appended bytes.
    int missed = 0;
    size_t missed_at = 0;
    for (size_t len = 0; len < n; len++) {
        write_all(copy, good, len);
        if (!model_rejected(copy, &cfg, q, err, sizeof err) && !missed++) missed_at = len;
    }
    EXPECT(missed == 0, "model: all %zu truncations rejected (first missed at length %zu)", n,
           missed_at);
    write_all(copy, good, n - 3);
    model_rejected(copy, &cfg, q, err, sizeof err);
    EXPECT(strstr(err, "file size") != NULL, "model: truncation reported as: %s", err);
    unsigned char* buf = malloc(n + 4);
    memcpy(buf, good, n);
    write_all(copy, buf, n + 4);
    EXPECT(model_rejected(copy, &cfg, q, err, sizeof err), "model: appended bytes: %s", err);
    // Header fields: each bad value is rejected and named.
    const struct { int field; int32_t value; const char* name; } bad[] = {
        {0, 20240327, "magic"}, {0, 0, "magic"}, {1, 4, "version"}, {1, -3, "version"},
        {2, 0, "max_seq_len"}, {2, -8, "max_seq_len"}, {2, 1 << 25, "max_seq_len"},
        {2, 9, "file size"}, {3, 0, "vocab_size"}, {3, 9, "padded_vocab_size"},
        {4, 0, "num_layers"}, {4, 3, "file size"}, {5, 0, "num_heads"}, {5, 3, "channels"},
        {6, -1, "channels"}, {6, 16, "file size"}, {7, 0, "padded_vocab_size"},
        {7, 4, "padded_vocab_size"}, {7, 1 << 30, "padded_vocab_size"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memcpy(buf, good, n);
        memcpy(buf + 4 * bad[k].field, &bad[k].value, 4);
        write_all(copy, buf, n);
        const int rej = model_rejected(copy, NULL, q, err, sizeof err);
        EXPECT(rej && strstr(err, bad[k].name), "model: header[%d] = %d rejected naming %s: %s",
               bad[k].field, bad[k].value, bad[k].name, err);
    }
    // Non-finite weights (a flipped exponent bit): the format has no checksum, but these at
    // least are caught.
    const float nonfinite[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        memcpy(buf, good, n);
        memcpy(buf + n - 4 * (size_t)(k * 97 + 1), &nonfinite[k], 4);
        write_all(copy, buf, n);
        EXPECT(model_rejected(copy, &cfg, q, err, sizeof err) && strstr(err, "finite"),
               "model: a %g weight rejected: %s", nonfinite[k], err);
    }
    // A sound file of another shape than expected.
    GPTConfig other = cfg;
    other.L = 1;
    EXPECT(model_rejected(path, &other, q, err, sizeof err) && strstr(err, "shape"),
           "model: shape differing from the expected one: %s", err);
    write_all(copy, "not a model\n", 12);
    EXPECT(model_rejected(copy, NULL, q, err, sizeof err) && strstr(err, "header"),
           "model: a garbage file: %s", err);
    write_all(copy, "", 0);
    EXPECT(model_rejected(copy, NULL, q, err, sizeof err), "model: an empty file: %s", err);
    path_in_tmp(copy, sizeof copy, "no_such_model.bin");
    EXPECT(model_rejected(copy, NULL, q, err, sizeof err) && strstr(err, "cannot open"),
           "model: a missing file: %s", err);
    free(buf), free(good), free(p), free(q);
}

// ---- checkpoint directory ----

static void touch(const char* dir, const char* name) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_all(path, "x", 1);
}

// The sorted names in dir, space-separated.
static void listing(const char* dir, char* out, size_t n) {
    DIR* d = opendir(dir);
    char names[64][64];
    int k = 0;
    for (struct dirent* e; d && (e = readdir(d)) && k < 64;)
        if (e->d_name[0] != '.') snprintf(names[k++], 64, "%.63s", e->d_name);
    if (d) closedir(d);
    qsort(names, (size_t)k, 64, (int (*)(const void*, const void*))strcmp);
    out[0] = 0;
    for (int i = 0; i < k; i++) {
        strncat(out, i ? " " : "", n - strlen(out) - 1);
        strncat(out, names[i], n - strlen(out) - 1);
    }
}

static void test_dir(void) {
    char dir[512], err[ERR_LEN] = "", name[64], list[4096];
    path_in_tmp(dir, sizeof dir, "run/a/b");
    EXPECT(checkpoint_make_dir(dir, err, sizeof err) == 0 && exists(dir),
           "dir: nested out-dir created %s", err);
    EXPECT(checkpoint_make_dir(dir, err, sizeof err) == 0, "dir: an existing out-dir is fine");
    char file[600];
    snprintf(file, sizeof file, "%s/plain", dir);
    write_all(file, "x", 1);
    snprintf(file, sizeof file, "%s/plain/sub", dir);
    EXPECT(checkpoint_make_dir(file, err, sizeof err) != 0 && strstr(err, "plain"),
           "dir: an out-dir below a plain file is refused: %s", err);
    snprintf(file, sizeof file, "%s/plain", dir);
    unlink(file);

    // Complete steps: only DONE_ + 8 digits exactly, newest first.
    for (int s = 2; s <= 10; s += 2) {
        err[0] = 0;
        EXPECT(checkpoint_mark_done(dir, s, err, sizeof err) == 0, "dir: DONE for step %d %s", s,
               err);
        snprintf(name, sizeof name, "model_%08d.bin", s), touch(dir, name);
        for (int r = 0; r < 2; r++)
            snprintf(name, sizeof name, "state_%08d_%05d.bin", s, r), touch(dir, name);
    }
    touch(dir, "DONE_00000012.tmp.777");   // an interrupted DONE write
    touch(dir, "DONE_13");                 // not llm.c's 8 digits
    touch(dir, "DONE_000000014");
    touch(dir, "DONE_0000001x");
    // Leftovers of interrupted checkpoints: step 3 (temporaries), 5 (model file only), 12 (newer
    // than every complete step: may still be in progress, so kept).
    touch(dir, "state_00000003_00000.bin.tmp.41");
    touch(dir, "model_00000003.bin.tmp.41");
    touch(dir, "model_00000005.bin");
    touch(dir, "state_00000012_00000.bin.tmp.9");
    touch(dir, "model_00000012.bin");
    touch(dir, "notes.txt");
    int steps[16];
    const int n = checkpoint_complete_steps(dir, steps, 16);
    EXPECT(n == 5 && steps[0] == 10 && steps[1] == 8 && steps[2] == 6 && steps[3] == 4 &&
           steps[4] == 2, "dir: complete steps 10 8 6 4 2, found %d starting %d", n,
           n ? steps[0] : -1);
    char path[600];
    checkpoint_done_path(dir, 4, path, sizeof path);
    size_t len;
    unsigned char* text = read_all(path, &len);
    EXPECT(len == 2 && !memcmp(text, "4\n", 2), "dir: DONE_00000004 holds the step");
    free(text);
    // keep-last 2 and keep-every 4: 10 8 (newest) and 4 (multiple of 4) stay.
    checkpoint_prune(dir, 2, 4);
    listing(dir, list, sizeof list);
    const char* want =   // in strcmp order
        "DONE_000000014 DONE_00000004 DONE_00000008 DONE_00000010 DONE_00000012.tmp.777 "
        "DONE_0000001x DONE_13 "
        "model_00000004.bin model_00000008.bin model_00000010.bin model_00000012.bin notes.txt "
        "state_00000004_00000.bin state_00000004_00001.bin state_00000008_00000.bin "
        "state_00000008_00001.bin state_00000010_00000.bin state_00000010_00001.bin "
        "state_00000012_00000.bin.tmp.9";
    EXPECT(!strcmp(list, want), "dir: prune(keep-last 2, keep-every 4) leaves\n        %s\n"
           "        expected\n        %s", list, want);
    checkpoint_prune(dir, 1, 0);
    listing(dir, list, sizeof list);
    EXPECT(strstr(list, "DONE_00000010") && !strstr(list, "_00000008") &&
           !strstr(list, "_00000004") && strstr(list, "model_00000012.bin"),
           "dir: prune(keep-last 1) leaves step 10 and the newer leftovers: %s", list);
}

// ---- atomic writes ----

static void test_atomic(void) {
    char path[512], err[ERR_LEN] = "";
    path_in_tmp(path, sizeof path, "atomic.bin");
    enum { N = 1 << 20 };
    unsigned char* old_data = malloc(N);
    unsigned char* new_data = malloc(N);
    memset(old_data, 0x11, N);
    memset(new_data, 0x22, N);
    AtomicFile af;
    int rc = atomic_open(&af, path, err, sizeof err);
    rc |= atomic_write(&af, old_data, N, err, sizeof err);
    rc |= atomic_commit(&af, err, sizeof err);
    size_t n;
    unsigned char* got = read_all(path, &n);
    EXPECT(rc == 0 && n == N && !memcmp(got, old_data, N), "atomic: write and commit %s", err);
    free(got);
    // Abandoned: the target is untouched, the temporary is gone.
    rc = atomic_open(&af, path, err, sizeof err);
    rc |= atomic_write(&af, new_data, N / 2, err, sizeof err);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", af.tmp);
    atomic_abort(&af);
    got = read_all(path, &n);
    EXPECT(rc == 0 && n == N && !memcmp(got, old_data, N) && !exists(tmp),
           "atomic: abort leaves the old file and no temporary");
    free(got);
    // SIGKILL in the middle of a write, and right after the commit.
    for (int when = 0; when < 2; when++) {
        const pid_t pid = fork();
        if (pid == 0) {
            AtomicFile c;
            char e[ERR_LEN];
            if (atomic_open(&c, path, e, sizeof e) || atomic_write(&c, new_data, N / 2, e, sizeof e))
                _exit(3);
            if (when == 1 && (atomic_write(&c, new_data + N / 2, N / 2, e, sizeof e) ||
                              atomic_commit(&c, e, sizeof e)))
                _exit(3);
            raise(SIGKILL);
            _exit(4);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        got = read_all(path, &n);
        const unsigned char* want = when ? new_data : old_data;
        EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && n == N &&
               !memcmp(got, want, N), "atomic: killed %s: the target holds the %s file",
               when ? "after the commit" : "mid-write", when ? "new" : "old complete");
        free(got);
        char leftover[4200];
        snprintf(leftover, sizeof leftover, "%s.tmp.%d", path, (int)pid);
        EXPECT(exists(leftover) == !when, "atomic: temporary %s %s", leftover,
               when ? "gone" : "left behind, under a name no reader takes for the target");
        unlink(leftover);
    }
    free(old_data);
    free(new_data);
}

// ---- verify DIR: every DONE-marked checkpoint loads ----

static int verify_dir(const char* dir, int min_complete) {
    int steps[4096];
    const int n = checkpoint_complete_steps(dir, steps, 4096);
    EXPECT(n >= min_complete, "verify %s: %d complete checkpoint(s), at least %d expected", dir,
           n, min_complete);
    for (int i = 0; i < n; i++) {
        char path[4096], err[ERR_LEN] = "";
        TrainStateInfo info;
        checkpoint_state_path(dir, steps[i], 0, path, sizeof path);
        int ok = train_state_read_info(path, &info, err, sizeof err) == 0;
        if (!ok) {
            EXPECT(0, "verify step %d: %s", steps[i], err);
            continue;
        }
        // Version 4: the files' slices of the weights, in rank order, make up all of them;
        // before, every file holds all of them, each the same.
        const size_t np = info.num_params;
        const int sliced = info.version >= STATE_VERSION_SLICES;
        float* p = malloc(4 * np);
        float* q = malloc(4 * np);
        size_t next = 0;
        for (int r = 0; ok && r < info.world_size; r++) {
            TrainStateInfo ri;
            checkpoint_state_path(dir, steps[i], r, path, sizeof path);
            if (train_state_read_info(path, &ri, err, sizeof err) != 0) {
                ok = 0;
                break;
            }
            float* m = malloc(4 * (ri.shard_count + 1));
            float* v = malloc(4 * (ri.shard_count + 1));
            ok = train_state_load(path, &ri, r && !sliced ? q : p, m, v, err, sizeof err) == 0;
            if (ok && (ri.step != steps[i] || ri.rank != r || ri.num_params != np)) {
                snprintf(err, sizeof err, "%.400s: holds step %d rank %d, expected step %d rank %d",
                         path, ri.step, ri.rank, steps[i], r);
                ok = 0;
            }
            if (ok && sliced && (ri.version != info.version || ri.shard_begin != next)) {
                snprintf(err, sizeof err, "%.400s: version %d, slice from %llu, expected version "
                         "%d, from %zu", path, ri.version, (unsigned long long)ri.shard_begin,
                         info.version, next);
                ok = 0;
            }
            next = ri.shard_begin + ri.shard_count;
            if (ok && sliced && r + 1 == info.world_size && next != np) {
                snprintf(err, sizeof err, "%.400s: the slices end at %zu of %zu weights", path,
                         next, np);
                ok = 0;
            }
            if (ok && r && !sliced && memcmp(p, q, 4 * np)) {
                snprintf(err, sizeof err, "%.400s: weights differ from rank 0's", path);
                ok = 0;
            }
            free(m), free(v);
        }
        int version = 0;
        GPTConfig c;
        checkpoint_model_path(dir, steps[i], path, sizeof path);
        if (ok) ok = model_file_read_header(path, &c, &version, err, sizeof err) == 0 &&
                     model_file_load(path, &info.model, q, err, sizeof err) == 0;
        if (ok && version == MODEL_VERSION_FP32 && memcmp(p, q, 4 * np)) {
            snprintf(err, sizeof err, "%.400s: weights differ from the training state's", path);
            ok = 0;
        }
        EXPECT(ok, "verify step %d: model file and %d state file(s) load and agree %s", steps[i],
               info.world_size, err);
        free(p), free(q);
    }
    return failures ? 1 : 0;
}

int main(int argc, char** argv) {
    const char* only = argc > 1 ? argv[1] : "";
    if (!strcmp(only, "verify")) {
        if (argc < 3) {
            fprintf(stderr, "usage: %s verify DIR [MIN_COMPLETE]\n", argv[0]);
            return 2;
        }
        return verify_dir(argv[2], argc > 3 ? atoi(argv[3]) : 1);
    }
    test_make_tmpdir(tmpdir, sizeof tmpdir, "test_train_checkpoint");
    int ran = 0;
    if (!*only || !strcmp(only, "state")) test_state(), ran++;
    if (!*only || !strcmp(only, "model")) test_model(), ran++;
    if (!*only || !strcmp(only, "dir")) test_dir(), ran++;
    if (!*only || !strcmp(only, "atomic")) test_atomic(), ran++;
    if (!ran) {
        fprintf(stderr, "usage: %s [state|model|dir|atomic] | verify DIR [MIN_COMPLETE]\n",
                argv[0]);
        return 2;
    }
    if (!failures) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", tmpdir);
    } else {
        printf("files kept in %s\n", tmpdir);
    }
    printf("%s: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
