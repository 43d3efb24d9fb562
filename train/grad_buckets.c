// Gradient buckets: see grad_buckets.h.
#include "train/grad_buckets.h"

#include <stdlib.h>

#include "comm/fail.h"
#include "model/gpt.h"

// Most ranges in one bucket: 12 per-layer tensors plus the two two-tensor groups.
enum { MAX_RANGES = NUM_PARAM_TENSORS };
// Requests kept in flight before the oldest is waited on (below the comm's pool size).
enum { MAX_PENDING = COMM_MAX_INFLIGHT - 8 };

typedef struct {
    int last_group;   // the bucket starts when this group is complete
    int nranges;
    size_t offset[MAX_RANGES], count[MAX_RANGES];
} Bucket;

struct GradBuckets {
    int nbuckets, next;    // buckets planned; the next one to start
    Bucket* buckets;
    size_t esize;
    Comm* comm;
    MeshGroup group;
    char* grads;
    CommType type;
    int groups_done;       // groups reported so far in this pass
    int ngroups;
    CommRequest* pending[COMM_MAX_INFLIGHT];
    int npending;
};

// The groups in the order backward completes them.
static int group_at(const GPTConfig* cfg, int k) {
    if (k == 0) return GPT_GRADS_LNF;
    if (k <= cfg->L) return cfg->L - k;
    return GPT_GRADS_EMBEDDINGS;
}

// Adds a range to the bucket, merging it with one it touches.
static void add_range(Bucket* b, size_t offset, size_t count) {
    for (int i = 0; i < b->nranges; i++) {
        if (b->offset[i] + b->count[i] == offset) {
            b->count[i] += count;
            return;
        }
        if (offset + count == b->offset[i]) {
            b->offset[i] = offset;
            b->count[i] += count;
            return;
        }
    }
    CHECK(b->nranges < MAX_RANGES, "caller bug", "gradient bucket of more than %d ranges",
          MAX_RANGES);
    b->offset[b->nranges] = offset;
    b->count[b->nranges] = count;
    b->nranges++;
}

GradBuckets* grad_buckets_create(const GPTConfig* cfg, size_t bucket_bytes, size_t esize) {
    GradBuckets* g = xcalloc(1, sizeof *g, "gradient buckets");
    g->ngroups = cfg->L + 2;
    g->esize = esize;
    g->buckets = xcalloc((size_t)g->ngroups, sizeof *g->buckets, "gradient buckets");
    size_t bytes = 0;
    Bucket* b = &g->buckets[0];
    for (int k = 0; k < g->ngroups; k++) {
        size_t offset[NUM_PARAM_TENSORS], count[NUM_PARAM_TENSORS];
        const int group = group_at(cfg, k);
        const int n = gpt_param_group_ranges(cfg, group, offset, count);
        for (int i = 0; i < n; i++) {
            add_range(b, offset[i], count[i]);
            bytes += count[i] * esize;
        }
        b->last_group = group;
        // A bucket closes once it is large enough; the last group closes the last bucket.
        const int last = k == g->ngroups - 1;
        if ((bucket_bytes > 0 && bytes >= bucket_bytes) || last) {
            g->nbuckets++;
            if (!last) b = &g->buckets[g->nbuckets];
            bytes = 0;
        }
    }
    return g;
}

void grad_buckets_free(GradBuckets* b) {
    if (!b) return;
    free(b->buckets);
    free(b);
}

int grad_buckets_count(const GradBuckets* b) { return b->nbuckets; }

void grad_buckets_begin(GradBuckets* b, Comm* comm, MeshGroup g, void* grads, CommType t) {
    CHECK(b->npending == 0, "caller bug", "gradient buckets armed with reductions in flight");
    b->comm = comm;
    b->group = g;
    b->grads = grads;
    b->type = t;
    b->next = 0;
    b->groups_done = 0;
}

static void start_bucket(GradBuckets* b, const Bucket* k) {
    for (int i = 0; i < k->nranges; i++) {
        if (b->npending == MAX_PENDING) {   // the oldest first: the pool stays bounded
            comm_wait(b->comm, b->pending[0]);
            for (int j = 1; j < b->npending; j++) b->pending[j - 1] = b->pending[j];
            b->npending--;
        }
        CommRequest* req = comm_all_reduce_sum_start(b->comm, b->group,
                                                     b->grads + k->offset[i] * b->esize,
                                                     k->count[i], b->type);
        if (req) b->pending[b->npending++] = req;
    }
}

void grad_buckets_ready(void* ctx, int group) {
    GradBuckets* b = ctx;
    CHECK(b->comm && b->groups_done < b->ngroups, "caller bug",
          "gradient group %d reported outside a backward pass", group);
    b->groups_done++;
    if (b->next < b->nbuckets && b->buckets[b->next].last_group == group) {
        start_bucket(b, &b->buckets[b->next]);
        b->next++;
    }
}

void grad_buckets_finish(GradBuckets* b) {
    CHECK(b->next == b->nbuckets && b->groups_done == b->ngroups, "caller bug",
          "backward reported %d of %d gradient groups", b->groups_done, b->ngroups);
    for (int i = 0; i < b->npending; i++) comm_wait(b->comm, b->pending[i]);
    b->npending = 0;
    b->comm = NULL;
}
