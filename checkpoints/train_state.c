#include "checkpoints/train_state.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "comm/atomic_file.h"
#include "model/gpt.h"

enum { HEADER_INTS = 256, HEADER_BYTES = HEADER_INTS * 4 };

// Header field indices.
enum {
    TS_MAGIC = 0, TS_VERSION = 1, TS_STEP = 2, TS_WORLD = 3, TS_RANK = 4, TS_DP = 5, TS_PQ = 6,
    TS_PKV = 7, TS_ZERO = 8, TS_WINDOW = 9, TS_WINDOW_EVERY = 19,
    TS_MAXT = 10, TS_V = 11, TS_L = 12, TS_NH = 13, TS_C = 14, TS_VP = 15,
    TS_B = 16, TS_T = 17, TS_ACCUM = 18,
    TS_RNG = 20,                                   // u64
    TS_KV_HEADS = 22,                              // GPTConfig.kv_heads (0: one per head)
    TS_ROPE_THETA = 23,                            // GPTConfig.rope_theta (0: learned positions)
    TS_ROPE_SCALING = 24, TS_ROPE_FACTOR = 25,     // GPTConfig.rope_scaling, rope_factor (fp32 bits)
    TS_ROPE_ORIGINAL_T = 26,                       // GPTConfig.rope_original_T
    TS_NORM = 27, TS_MLP = 28, TS_FFN_HIDDEN = 29, // GPTConfig.norm, mlp, ffn_hidden (0: GPT's)
    TS_LD_EPOCH = 30, TS_LD_NEXT = 32, TS_LD_SEED = 34,   // u64 each
    TS_LD_SHUFFLE = 36, TS_LD_NFILES = 37, TS_LD_B = 38, TS_LD_T = 39,
    TS_NPARAMS = 40, TS_SHARD_BEGIN = 42, TS_SHARD_COUNT = 44,   // u64 each
    TS_CONFIG_BYTES = 46,
    TS_NO_LINEAR_BIAS = 47,                        // GPTConfig.no_linear_bias
    TS_UNTIED_CLASSIFIER = 48,                     // GPTConfig.untied_classifier
    TS_NORM_EPS = 49,                              // GPTConfig.norm_eps (fp32 bits; 0: 1e-5)
    TS_CHECKSUM = 50,                              // u64
    TS_QKV_BIAS = 52,                              // GPTConfig.qkv_bias
    TS_LD_COMPONENTS = 53, TS_LD_BLEND = 54,       // LoaderState.components, blend (u64)
    TS_LD_PHASE = 56, TS_LD_PHASE_START = 57,      // LoaderState.phase, phase_start (u64)
    TS_LD_DATA = 59,                               // LoaderState.data (u64)
    TS_TRAIN_DATA_HASH = 61, TS_PHASE_STEP = 63,   // train_data_hash (u64), phase_step
    TS_QK_NORM = 64,                               // GPTConfig.qk_norm
    TS_OPTIMIZER = 65,                             // optimizer (0 in files written before it)
    TS_LD_POSITIONS = 66,                          // npositions (version 3)
};

static void put64(int32_t* h, int at, uint64_t v) { memcpy(h + at, &v, 8); }
static uint64_t get64(const int32_t* h, int at) {
    uint64_t v;
    memcpy(&v, h + at, 8);
    return v;
}

// A 64-bit checksum over 8-byte words (FNV-1a's multiply, one word at a time, so it runs at
// memory speed): any changed, truncated or reordered word changes it with high probability.
typedef struct {
    uint64_t h;
    unsigned char tail[8];
    int ntail;
} Checksum;

static void checksum_init(Checksum* c) {
    c->h = 0xcbf29ce484222325ULL;
    c->ntail = 0;
}

static void checksum_word(Checksum* c, uint64_t w) {
    c->h = (c->h ^ w) * 0x100000001b3ULL;
    c->h ^= c->h >> 29;
}

static void checksum_add(Checksum* c, const void* data, size_t n) {
    const unsigned char* p = data;
    while (n && c->ntail) {   // finish a partial word first
        c->tail[c->ntail++] = *p++;
        n--;
        if (c->ntail == 8) {
            uint64_t w;
            memcpy(&w, c->tail, 8);
            checksum_word(c, w);
            c->ntail = 0;
        }
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        checksum_word(c, w);
    }
    while (n--) c->tail[c->ntail++] = *p++;
}

static uint64_t checksum_final(Checksum* c) {
    if (c->ntail) {
        memset(c->tail + c->ntail, 0, 8 - c->ntail);
        uint64_t w;
        memcpy(&w, c->tail, 8);
        checksum_word(c, w);
        c->ntail = 0;
    }
    return c->h;
}

static size_t config_bytes(const TrainStateInfo* info) {
    const size_t n = strnlen(info->config_json, sizeof info->config_json - 1) + 1;
    return (n + 7) / 8 * 8;
}

static void header_from_info(const TrainStateInfo* s, size_t cfg_bytes, int32_t* h) {
    memset(h, 0, HEADER_BYTES);
    h[TS_MAGIC] = STATE_MAGIC;
    h[TS_VERSION] = s->npositions ? STATE_VERSION_SLICES
                    : s->loader.phase ? STATE_VERSION_PHASES
                                      : STATE_VERSION;
    h[TS_LD_POSITIONS] = s->npositions;
    h[TS_STEP] = s->step;
    h[TS_WORLD] = s->world_size;
    h[TS_RANK] = s->rank;
    h[TS_DP] = s->dp;
    h[TS_PQ] = s->pq;
    h[TS_PKV] = s->pkv;
    h[TS_ZERO] = s->zero_stage;
    h[TS_MAXT] = s->model.max_T;
    h[TS_V] = s->model.V;
    h[TS_L] = s->model.L;
    h[TS_NH] = s->model.NH;
    h[TS_C] = s->model.C;
    h[TS_VP] = s->model.Vp;
    h[TS_WINDOW] = s->model.window;
    h[TS_WINDOW_EVERY] = s->model.window_every;
    h[TS_KV_HEADS] = s->model.kv_heads;
    h[TS_ROPE_THETA] = s->model.rope_theta;
    h[TS_ROPE_SCALING] = s->model.rope_scaling;
    memcpy(h + TS_ROPE_FACTOR, &s->model.rope_factor, 4);
    h[TS_ROPE_ORIGINAL_T] = s->model.rope_original_T;
    h[TS_NORM] = s->model.norm;
    h[TS_MLP] = s->model.mlp;
    h[TS_FFN_HIDDEN] = s->model.ffn_hidden;
    h[TS_NO_LINEAR_BIAS] = s->model.no_linear_bias;
    h[TS_UNTIED_CLASSIFIER] = s->model.untied_classifier;
    memcpy(h + TS_NORM_EPS, &s->model.norm_eps, 4);
    h[TS_QKV_BIAS] = s->model.qkv_bias;
    h[TS_QK_NORM] = s->model.qk_norm;
    h[TS_OPTIMIZER] = s->optimizer;
    h[TS_B] = s->B;
    h[TS_T] = s->T;
    h[TS_ACCUM] = s->accum_steps;
    put64(h, TS_RNG, s->sample_rng);
    put64(h, TS_LD_EPOCH, (uint64_t)s->loader.epoch);
    put64(h, TS_LD_NEXT, (uint64_t)s->loader.next_batch);
    put64(h, TS_LD_SEED, s->loader.seed);
    h[TS_LD_SHUFFLE] = s->loader.shuffle;
    h[TS_LD_NFILES] = s->loader.nfiles;
    h[TS_LD_B] = s->loader.B;
    h[TS_LD_T] = s->loader.T;
    h[TS_LD_COMPONENTS] = s->loader.components;
    put64(h, TS_LD_BLEND, s->loader.blend);
    h[TS_LD_PHASE] = s->loader.phase;
    put64(h, TS_LD_PHASE_START, (uint64_t)s->loader.phase_start);
    put64(h, TS_LD_DATA, s->loader.data);
    put64(h, TS_TRAIN_DATA_HASH, s->train_data_hash);
    h[TS_PHASE_STEP] = s->phase_step;
    put64(h, TS_NPARAMS, s->num_params);
    put64(h, TS_SHARD_BEGIN, s->shard_begin);
    put64(h, TS_SHARD_COUNT, s->shard_count);
    h[TS_CONFIG_BYTES] = (int32_t)cfg_bytes;
}

static void info_from_header(const int32_t* h, TrainStateInfo* s) {
    memset(s, 0, sizeof *s);
    s->step = h[TS_STEP];
    s->world_size = h[TS_WORLD];
    s->rank = h[TS_RANK];
    s->dp = h[TS_DP];
    s->pq = h[TS_PQ];
    s->pkv = h[TS_PKV];
    s->zero_stage = h[TS_ZERO];
    s->optimizer = h[TS_OPTIMIZER];
    s->model = (GPTConfig){.max_T = h[TS_MAXT], .V = h[TS_V], .L = h[TS_L], .NH = h[TS_NH],
                           .C = h[TS_C], .Vp = h[TS_VP], .window = h[TS_WINDOW],
                           .window_every = h[TS_WINDOW_EVERY], .kv_heads = h[TS_KV_HEADS],
                           .rope_theta = h[TS_ROPE_THETA], .rope_scaling = h[TS_ROPE_SCALING],
                           .rope_original_T = h[TS_ROPE_ORIGINAL_T], .norm = h[TS_NORM],
                           .mlp = h[TS_MLP], .ffn_hidden = h[TS_FFN_HIDDEN],
                           .no_linear_bias = h[TS_NO_LINEAR_BIAS],
                           .untied_classifier = h[TS_UNTIED_CLASSIFIER],
                           .qkv_bias = h[TS_QKV_BIAS], .qk_norm = h[TS_QK_NORM]};
    memcpy(&s->model.rope_factor, h + TS_ROPE_FACTOR, 4);
    memcpy(&s->model.norm_eps, h + TS_NORM_EPS, 4);
    s->B = h[TS_B];
    s->T = h[TS_T];
    s->accum_steps = h[TS_ACCUM];
    s->sample_rng = get64(h, TS_RNG);
    s->loader.epoch = (int64_t)get64(h, TS_LD_EPOCH);
    s->loader.next_batch = (int64_t)get64(h, TS_LD_NEXT);
    s->loader.seed = get64(h, TS_LD_SEED);
    s->loader.shuffle = h[TS_LD_SHUFFLE];
    s->loader.nfiles = h[TS_LD_NFILES];
    s->loader.B = h[TS_LD_B];
    s->loader.T = h[TS_LD_T];
    s->loader.components = h[TS_LD_COMPONENTS];
    s->loader.blend = get64(h, TS_LD_BLEND);
    s->loader.phase = h[TS_LD_PHASE];
    s->loader.phase_start = (int64_t)get64(h, TS_LD_PHASE_START);
    s->loader.data = get64(h, TS_LD_DATA);
    s->train_data_hash = get64(h, TS_TRAIN_DATA_HASH);
    s->phase_step = h[TS_PHASE_STEP];
    s->npositions = h[TS_LD_POSITIONS];
    s->num_params = get64(h, TS_NPARAMS);
    s->shard_begin = get64(h, TS_SHARD_BEGIN);
    s->shard_count = get64(h, TS_SHARD_COUNT);
    s->version = h[TS_VERSION];
}

// The weights a file of this header holds: its slice (version 4), or every one.
static void weights_held(const int32_t* h, const TrainStateInfo* s, uint64_t* begin,
                         uint64_t* count) {
    const int sliced = h[TS_VERSION] >= STATE_VERSION_SLICES;
    *begin = sliced ? s->shard_begin : 0;
    *count = sliced ? s->shard_count : s->num_params;
}

int train_state_save(const char* path, const TrainStateInfo* info, const float* params,
                     const float* m, const float* v, char* err, size_t errlen) {
    int32_t h[HEADER_INTS];
    const size_t cb = config_bytes(info);
    char* cfg = calloc(1, cb);
    if (!cfg) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(cfg, info->config_json, strnlen(info->config_json, cb - 1));
    header_from_info(info, cb, h);
    uint64_t wb, wn;
    weights_held(h, info, &wb, &wn);
    const size_t pb = (size_t)info->npositions * sizeof info->positions[0];
    Checksum ck;
    checksum_init(&ck);
    checksum_add(&ck, h, HEADER_BYTES);
    checksum_add(&ck, cfg, cb);
    checksum_add(&ck, info->positions, pb);
    checksum_add(&ck, params + wb, wn * sizeof(float));
    checksum_add(&ck, m, info->shard_count * sizeof(float));
    checksum_add(&ck, v, info->shard_count * sizeof(float));
    put64(h, TS_CHECKSUM, checksum_final(&ck));
    AtomicFile af;
    int rc = atomic_open(&af, path, err, errlen);
    if (rc == 0) rc = atomic_write(&af, h, HEADER_BYTES, err, errlen);
    if (rc == 0) rc = atomic_write(&af, cfg, cb, err, errlen);
    if (rc == 0 && pb) rc = atomic_write(&af, info->positions, pb, err, errlen);
    if (rc == 0) rc = atomic_write(&af, params + wb, wn * sizeof(float), err, errlen);
    if (rc == 0) rc = atomic_write(&af, m, info->shard_count * sizeof(float), err, errlen);
    if (rc == 0) rc = atomic_write(&af, v, info->shard_count * sizeof(float), err, errlen);
    if (rc == 0) rc = atomic_commit(&af, err, errlen);
    free(cfg);
    return rc;
}

// Reads `bytes` into dst (or into a bounce buffer when dst is NULL), feeding the checksum.
static int read_section(FILE* f, void* dst, size_t bytes, Checksum* ck) {
    enum { CHUNK = 1 << 20 };
    static _Thread_local unsigned char bounce[CHUNK];
    unsigned char* out = dst;
    while (bytes) {
        const size_t k = bytes < CHUNK ? bytes : CHUNK;
        unsigned char* p = out ? out : bounce;
        if (fread(p, 1, k, f) != k) return -1;
        checksum_add(ck, p, k);
        if (out) out += k;
        bytes -= k;
    }
    return 0;
}

// Values no training produces: parameters and moments beyond this magnitude (a finite fp32 goes
// to 3.4e38; the first step's clipped updates and AdamW's bounded steps keep real values far
// below), and a negative second moment (a mean of squares).
#define STATE_MAX_MAGNITUDE 1e30

// 1 (with err set) when one of the n floats of section `what` (those of parameters first..) is
// not finite, is beyond STATE_MAX_MAGNITUDE, or (nonnegative) is below 0.
static int first_unusable(const char* path, const char* what, const float* x, uint64_t first,
                          uint64_t n, int nonnegative, char* err, size_t errlen) {
    for (uint64_t i = 0; i < n; i++) {
        const char* why = !isfinite(x[i])                       ? "expected finite values"
                          : fabsf(x[i]) > STATE_MAX_MAGNITUDE   ? "expected magnitudes up to 1e30"
                          : nonnegative && x[i] < 0             ? "expected a second moment >= 0"
                                                                : NULL;
        if (!why) continue;
        snprintf(err, errlen, "%s: %s: element %llu is %g, %s (saved by a run that diverged, or "
                 "written by something else?)", path, what, (unsigned long long)(first + i),
                 (double)x[i], why);
        return 1;
    }
    return 0;
}

static int read_state(const char* path, TrainStateInfo* info, float* params, float* m, float* v,
                      char* err, size_t errlen) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open training state: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    int32_t h[HEADER_INTS];
    int rc = -1;
    if (fstat(fileno(f), &st) != 0 || fread(h, 1, HEADER_BYTES, f) != HEADER_BYTES) {
        snprintf(err, errlen, "%s: header: expected 1024 bytes, found a shorter file", path);
        goto out;
    }
    if (h[TS_MAGIC] != STATE_MAGIC) {
        snprintf(err, errlen, "%s: magic: expected %d, found %d", path, STATE_MAGIC, h[TS_MAGIC]);
        goto out;
    }
    const int version = h[TS_VERSION];
    if (version < STATE_VERSION || version > STATE_VERSION_SLICES) {
        snprintf(err, errlen, "%s: version: expected %d to %d, found %d", path, STATE_VERSION,
                 STATE_VERSION_SLICES, version);
        goto out;
    }
    const int npositions = h[TS_LD_POSITIONS];
    const int has_positions = version >= STATE_VERSION_POSITIONS;
    if (has_positions ? npositions < 1 || npositions > LOADER_MAX_POSITIONS : npositions != 0) {
        snprintf(err, errlen, "%s: header: %d set positions in a version %d file: expected 1 to "
                 "%d from version %d on, none before", path, npositions, version,
                 LOADER_MAX_POSITIONS, STATE_VERSION_POSITIONS);
        goto out;
    }
    if ((!has_positions &&
         (version == STATE_VERSION_PHASES) != (h[TS_LD_PHASE] != 0)) ||
        h[TS_PHASE_STEP] < 0 || h[TS_PHASE_STEP] > h[TS_STEP] ||
        (h[TS_LD_PHASE] == 0 && h[TS_PHASE_STEP] != 0)) {
        snprintf(err, errlen, "%s: header: data phase %d from step %d in a version %d file of "
                 "step %d: expected version %d or later for a phase > 0, begun at a step up to "
                 "the file's (phase 0 at step 0)", path, h[TS_LD_PHASE], h[TS_PHASE_STEP], version,
                 h[TS_STEP], STATE_VERSION_PHASES);
        goto out;
    }
    info_from_header(h, info);
    const size_t cb = (size_t)h[TS_CONFIG_BYTES];
    if (h[TS_CONFIG_BYTES] <= 0 || cb > sizeof info->config_json || cb % 8 ||
        info->num_params > ((uint64_t)1 << 40) || info->shard_count > info->num_params ||
        info->shard_begin > info->num_params - info->shard_count) {
        snprintf(err, errlen, "%s: header: inconsistent sizes (config %d bytes, %llu params, "
                 "shard %llu+%llu)", path, h[TS_CONFIG_BYTES],
                 (unsigned long long)info->num_params, (unsigned long long)info->shard_begin,
                 (unsigned long long)info->shard_count);
        goto out;
    }
    if (info->B < 1 || info->T < 1 || info->accum_steps < 1 || info->T > info->model.max_T) {
        snprintf(err, errlen, "%s: header: batch geometry: expected B >= 1, 1 <= T <= context %d "
                 "and accumulation >= 1, found B=%d T=%d accumulation %d", path,
                 info->model.max_T, info->B, info->T, info->accum_steps);
        goto out;
    }
    if (info->optimizer != TRAIN_STATE_ADAMW && info->optimizer != TRAIN_STATE_MUON) {
        snprintf(err, errlen, "%s: header: optimizer: expected %d (AdamW) or %d (Muon), found %d",
                 path, TRAIN_STATE_ADAMW, TRAIN_STATE_MUON, info->optimizer);
        goto out;
    }
    uint64_t wb, wn;
    weights_held(h, info, &wb, &wn);
    const size_t pb = (size_t)npositions * sizeof info->positions[0];
    const long long want = HEADER_BYTES + (long long)cb + (long long)pb +
                           4LL * (long long)(wn + 2 * info->shard_count);
    if (st.st_size != want) {
        snprintf(err, errlen, "%s: file size: expected %lld bytes for this header, found %lld "
                 "(truncated or appended?)", path, want, (long long)st.st_size);
        goto out;
    }
    const uint64_t stored = get64(h, TS_CHECKSUM);
    put64(h, TS_CHECKSUM, 0);
    Checksum ck;
    checksum_init(&ck);
    checksum_add(&ck, h, HEADER_BYTES);
    if (read_section(f, info->config_json, cb, &ck) != 0 ||
        read_section(f, info->positions, pb, &ck) != 0 ||
        read_section(f, params ? params + wb : NULL, wn * 4, &ck) != 0 ||
        read_section(f, m, info->shard_count * 4, &ck) != 0 ||
        read_section(f, v, info->shard_count * 4, &ck) != 0) {
        snprintf(err, errlen, "%s: body: read failed", path);
        goto out;
    }
    info->config_json[sizeof info->config_json - 1] = 0;
    const uint64_t actual = checksum_final(&ck);
    if (actual != stored) {
        snprintf(err, errlen, "%s: checksum: expected %016llx, found %016llx (file corrupted)",
                 path, (unsigned long long)stored, (unsigned long long)actual);
        goto out;
    }
    // A sound file may still hold a NaN or infinity written by a run that diverged, or values no
    // training produces: training on from it would only log non-finite losses (the model file
    // reader refuses non-finite values too). Unusable: resume falls back to an older checkpoint.
    const uint64_t sb = info->shard_begin, sc = info->shard_count;
    if (params && first_unusable(path, "params", params + wb, wb, wn, 0, err, errlen)) goto out;
    if (m && first_unusable(path, "adam m", m, sb, sc, 0, err, errlen)) goto out;
    if (v && first_unusable(path, "adam v", v, sb, sc, 1, err, errlen)) goto out;
    rc = 0;
out:
    fclose(f);
    return rc;
}

int train_state_read_info(const char* path, TrainStateInfo* info, char* err, size_t errlen) {
    return read_state(path, info, NULL, NULL, NULL, err, errlen);
}

int train_state_load(const char* path, TrainStateInfo* info, float* params, float* m, float* v,
                     char* err, size_t errlen) {
    return read_state(path, info, params, m, v, err, errlen);
}
