// Gradient reduction in buckets while backward goes on (data parallelism over every rank that
// holds a replica of the weights). The model reports parameter groups as their gradients complete
// (model/gpt.h: the final layernorm, layers L-1 .. 0, the embeddings); consecutive groups form a
// bucket of at least `bucket_bytes`, and a bucket's all-reduce starts as soon as its last group is
// complete, so it travels while the earlier layers' backward runs.
//
// The flat llm.c order does not stand in the way: a group of layers is one contiguous slice of each
// of the 12 per-layer tensors, so a bucket is at most 14 contiguous ranges of the flat gradient
// buffer (adjacent ranges merged), each reduced in place with its own all-reduce. Nothing is
// copied or permuted, and checkpoints keep llm.c's layout.
#pragma once
#include <stddef.h>

#include "comm/comm.h"
#include "model/config.h"

typedef struct GradBuckets GradBuckets;

// Plans the buckets of a model (elements of esize bytes). bucket_bytes = 0: one bucket, started
// when the embeddings complete (no overlap).
GradBuckets* grad_buckets_create(const GPTConfig* cfg, size_t bucket_bytes, size_t esize);
void grad_buckets_free(GradBuckets* b);
int grad_buckets_count(const GradBuckets* b);

// Arms the buckets for one backward pass: the sums of `grads` (backend memory, the flat buffer)
// over group g of the comm, in elements of type t.
void grad_buckets_begin(GradBuckets* b, Comm* comm, MeshGroup g, void* grads, CommType t);
// The GptGradsReady callback (ctx: the GradBuckets): starts every bucket that is complete.
void grad_buckets_ready(void* ctx, int group);
// After backward: every bucket has started (a group never reported is a caller bug); the compute
// stream waits for all of them (comm_wait).
void grad_buckets_finish(GradBuckets* b);
