#include "train/config_check.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "comm/fail.h"

static char* copy_text(const char* s) {
    const size_t n = strlen(s) + 1;
    char* c = xmalloc(n, "configuration item");
    memcpy(c, s, n);
    return c;
}

void config_items_add(ConfigItems* items, const char* name, const char* fmt, ...) {
    if (items->n == items->cap) {
        items->cap = items->cap ? 2 * items->cap : 64;
        items->names = realloc(items->names, sizeof(char*) * (size_t)items->cap);
        items->values = realloc(items->values, sizeof(char*) * (size_t)items->cap);
        CHECK(items->names && items->values, "", "out of memory for %d configuration items",
              items->cap);
    }
    char value[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    items->names[items->n] = copy_text(name);
    items->values[items->n] = copy_text(value);
    items->n++;
}

void config_items_free(ConfigItems* items) {
    for (int i = 0; i < items->n; i++) {
        free(items->names[i]);
        free(items->values[i]);
    }
    free(items->names);
    free(items->values);
    memset(items, 0, sizeof *items);
}

// ---- This run's items ----

static void add_option(void* ctx, const char* name, const char* value) {
    // Options that differ between the ranks of one job by design.
    if (strcmp(name, "rank") == 0 || strcmp(name, "local-rank") == 0) return;
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", name);
    config_items_add(ctx, flag, "%s", value);
}

// "PATH (N bytes)", or "PATH (not found)".
static void add_file(ConfigItems* items, const char* name, const char* path) {
    struct stat st;
    if (stat(path, &st) == 0)
        config_items_add(items, name, "%s (%lld bytes)", path, (long long)st.st_size);
    else
        config_items_add(items, name, "%s (not found)", path);
}

static void add_loader_files(ConfigItems* items, const char* flag, const DataLoader* loader) {
    if (!loader) return;
    const int n = loader_num_files(loader);
    char name[96];
    snprintf(name, sizeof name, "%s (number of files)", flag);
    config_items_add(items, name, "%d", n);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s (file %d)", flag, i + 1);
        add_file(items, name, loader_file_path(loader, i));
    }
}

void config_items_of_run(ConfigItems* items, const TrainOptions* o, const GPTConfig* cfg,
                         const DataLoader* train, const DataLoader* const* val, int nval) {
    train_options_each(o, add_option, items);
    char kv[32] = "";   // (named only under grouped-query attention)
    if (gpt_kv_heads(cfg) != cfg->NH) snprintf(kv, sizeof kv, " KV=%d", gpt_kv_heads(cfg));
    char rope[80] = "";   // (named only under rotary positions)
    if (cfg->rope_scaling)
        snprintf(rope, sizeof rope, " rope=%d %s x%g from %d", cfg->rope_theta,
                 rope_scaling_name(cfg->rope_scaling), cfg->rope_factor, cfg->rope_original_T);
    else if (cfg->rope_theta) snprintf(rope, sizeof rope, " rope=%d", cfg->rope_theta);
    char block[96] = "", eps[24] = "";   // (named only where it is not GPT's)
    if (cfg->norm_eps > 0) snprintf(eps, sizeof eps, " eps=%g", cfg->norm_eps);
    if (cfg->norm || cfg->mlp || cfg->ffn_hidden || cfg->no_linear_bias || cfg->untied_classifier ||
        cfg->norm_eps > 0 || cfg->qk_norm)
        snprintf(block, sizeof block, " %s%s %s F=%d%s%s%s", gpt_norm_name(cfg->norm), eps,
                 gpt_mlp_name(cfg->mlp), gpt_ffn_hidden(cfg),
                 !cfg->no_linear_bias ? "" : cfg->qkv_bias ? " qkvbias" : " nobias",
                 cfg->untied_classifier ? " untied" : "", cfg->qk_norm ? " qknorm" : "");
    config_items_add(items, "the model shape", "L=%d C=%d NH=%d%s V=%d (padded %d) context=%d%s%s",
                     cfg->L, cfg->C, cfg->NH, kv, cfg->V, cfg->Vp, cfg->max_T, rope, block);
    if (o->init_from && o->init_from[0]) add_file(items, "--init-from (file)", o->init_from);
    add_loader_files(items, "--train-data", train);
    for (int c = 0; c < nval; c++) {
        char flag[48];
        if (nval == 1) snprintf(flag, sizeof flag, "--val-data");
        else snprintf(flag, sizeof flag, "--val-data set %d", c + 1);
        add_loader_files(items, flag, val[c]);
    }
    if (o->tokenizer && o->tokenizer[0]) add_file(items, "--tokenizer (file)", o->tokenizer);
    if (o->mc_eval && o->mc_eval[0]) add_file(items, "--mc-eval (file)", o->mc_eval);
}

// ---- Comparing across ranks ----

// FNV-1a, 64 bits.
static uint64_t hash_bytes(uint64_t h, const char* s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t config_text_hash(const char* s) {
    const uint64_t h = hash_bytes(0xcbf29ce484222325ULL, s, strlen(s));
    return h ? h : 1;
}

static uint64_t hash_item(const ConfigItems* items, int i) {
    uint64_t h = 0xcbf29ce484222325ULL;
    if (i >= items->n) return h;   // an item this rank does not have
    h = hash_bytes(h, items->names[i], strlen(items->names[i]) + 1);
    return hash_bytes(h, items->values[i], strlen(items->values[i]) + 1);
}

// A 64-bit value in 4 slots of 16 bits: exact in a double, and summing slots that only one rank
// fills gathers them exactly.
static void put_u64(double* slot, uint64_t v) {
    for (int k = 0; k < 4; k++) slot[k] = (double)((v >> (16 * k)) & 0xffff);
}

static uint64_t get_u64(const double* slot) {
    uint64_t v = 0;
    for (int k = 0; k < 4; k++) v |= (uint64_t)slot[k] << (16 * k);
    return v;
}

static void all_gather_sum(Comm* comm, double* buf, size_t n) {
    comm_set_scope(comm, COMM_NO_LAYER, COMM_OTHER);
    comm_all_reduce_host(comm, MESH_WORLD, buf, n, COMM_F64);
}

enum { TEXT = 400 };   // characters of a name or value that travel (longer ones are cut)

static void put_text(double* slot, const char* s) {
    for (size_t i = 0; i < TEXT - 1 && s[i]; i++) slot[i] = (unsigned char)s[i];
}

static void get_text(const double* slot, char* out) {
    size_t i = 0;
    for (; i < TEXT - 1 && slot[i] != 0; i++) out[i] = (char)(int)slot[i];
    out[i] = 0;
}

int config_items_compare(Comm* comm, const Mesh* mesh, const ConfigItems* items, char* msg,
                         size_t msglen) {
    const int world = mesh->world_size, me = mesh->world_rank;
    // 1. Every rank's hash of its whole list and its item count.
    uint64_t all = 0xcbf29ce484222325ULL;
    for (int i = 0; i < items->n; i++) {
        const uint64_t h = hash_item(items, i);
        all = hash_bytes(all, (const char*)&h, sizeof h);
    }
    double* lists = xcalloc((size_t)world * 5, sizeof(double), "configuration hashes");
    put_u64(lists + 5 * me, all);
    lists[5 * me + 4] = items->n;
    all_gather_sum(comm, lists, (size_t)world * 5);
    int other = -1;
    for (int r = 1; r < world && other < 0; r++)
        if (get_u64(lists + 5 * r) != get_u64(lists) || lists[5 * r + 4] != lists[4]) other = r;
    const int n0 = (int)lists[4], n1 = other > 0 ? (int)lists[5 * other + 4] : 0;
    free(lists);
    if (other < 0) return 0;
    // 2. Rank 0's and that rank's item hashes: the first item in which they differ.
    const int n = n0 > n1 ? n0 : n1;
    double* hashes = xcalloc((size_t)n * 8, sizeof(double), "configuration item hashes");
    if (me == 0 || me == other)
        for (int i = 0; i < n; i++) put_u64(hashes + 8 * i + (me == 0 ? 0 : 4), hash_item(items, i));
    all_gather_sum(comm, hashes, (size_t)n * 8);
    int first = 0;
    while (first < n - 1 && get_u64(hashes + 8 * first) == get_u64(hashes + 8 * first + 4)) first++;
    free(hashes);
    // 3. That item's name and value on both ranks.
    double* text = xcalloc(4 * TEXT, sizeof(double), "configuration values");
    if ((me == 0 || me == other) && first < items->n) {
        double* slot = text + (me == 0 ? 0 : 2 * TEXT);
        put_text(slot, items->names[first]);
        put_text(slot + TEXT, items->values[first]);
    }
    all_gather_sum(comm, text, 4 * TEXT);
    char name0[TEXT], value0[TEXT], name1[TEXT], value1[TEXT];
    get_text(text, name0);
    get_text(text + TEXT, value0);
    get_text(text + 2 * TEXT, name1);
    get_text(text + 3 * TEXT, value1);
    free(text);
    // An item one rank lacks (a list ended early, or another item stands there).
    if (!name0[0] || strcmp(name0, name1) != 0) {
        snprintf(msg, msglen, "rank 0 has %s where rank %d has %s", name0[0] ? name0 : "nothing",
                 other, name1[0] ? name1 : "nothing");
        return 1;
    }
    snprintf(msg, msglen, "%s is %s on rank 0 but %s on rank %d", name0, value0[0] ? value0 : "''",
             value1[0] ? value1 : "''", other);
    return 1;
}
