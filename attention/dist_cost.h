// Closed-form costs of the distributed attention schedules, per rank and layer: what the comm
// counters must read after one forward or backward (tests check equality; the comm benchmark
// prints them), and the unmasked scores each rank computes (load balance).
#pragma once
#include "attention/dist_attention.h"

#ifdef __cplusplus
extern "C" {
#endif

// Expected counters of one rank for one layer and phase, per kind (comm.h's counting rules).
typedef struct {
    CommCount kind[COMM_NKINDS];
} CommVolume;

// The operations behind those counters, one list per rank, layer and phase, in the order the
// schedule issues them: what each moves, in which group, and at which stage of the schedule (the
// cost model, costmodel/, times each on the network its group crosses). The volumes below are
// their sums, so the two cannot drift apart.
typedef enum {
    DIST_ALONG_ROW,         // the mesh row (MESH_ROW, pkv ranks; USP's ring passes too)
    DIST_ALONG_COLUMN,      // the mesh column (MESH_COL, pq ranks; USP's all-to-alls too)
    DIST_ALONG_TRANSPOSE,   // point-to-point with the transposed mesh position (the permutation)
    DIST_ALONG_RING,        // point-to-point with the next SP rank (the ring family)
    DIST_ALONG_SP,          // the whole SP group (P ranks): Ulysses' all-to-alls
} DistAlong;
typedef enum {
    DIST_STAGE_PERMUTE,   // K|V to the transposed rank, before the column gather
    DIST_STAGE_GATHER,    // all-gathers (or their ring passes)
    DIST_STAGE_REDUCE,    // the O|LSE all-to-all, the dQ and dK|dV reduce-scatters (or passes)
    DIST_STAGE_RETURN,    // dK|dV back to their owner
    DIST_STAGE_PASS,      // the ring family's K|V and dK|dV passes
} DistStage;
typedef struct {
    CommKind kind;
    DistAlong along;
    DistStage stage;
    long long bytes, messages, calls;   // as the counters count them (received per rank)
} DistCommOp;
enum { DIST_MAX_OPS = 16 };
typedef struct {
    int n;
    DistCommOp op[DIST_MAX_OPS];
} DistCommOps;

// Element sizes in bytes: act_size of the activations (Q, K, V, dO: the storage type, 2 for the
// CUDA bf16 build), acc_size of what is merged or summed (partial O, LSE, D, dQ/dK/dV partial
// sums: 4 on CUDA); both sizeof(real) on the CPU. keep_kv: the layer keeps gathered K/V for
// backward. NKV: key/value heads (NH; fewer under grouped-query attention, whose K, V and their
// gradients move NKV / NH of the bytes).
CommVolume attention2d_volume(const Mesh* mesh, CommPhase phase, int B, int Tl, int NH, int NKV,
                              int HS, int keep_kv, size_t act_size, size_t acc_size);
// The overlapped ATTENTION2D: attention2d's bytes and messages without kept K/V, every row or
// column exchange as pq-1 or pkv-1 send/recv calls of one message each.
CommVolume attention2d_overlap_volume(const Mesh* mesh, CommPhase phase, int B, int Tl, int NH,
                                      int NKV, int HS, size_t act_size, size_t acc_size);
// The steps of the ring schedule (attention/ring.c) in a layer with the given window (0: causal)
// and document span (DocumentBounds.span; 0: none or unknown). A query sees at most
// look = min(T - 1, W - 1, span - 1) keys before it, so a rank needs only the blocks within
// reach = ceil(look / chunk) chunks of its own:
// - Ring (contiguous chunks of Tl): ranks i - reach .. i, 1 + reach steps;
// - Zigzag (chunks i and 2P-1-i of Tl/2): chunk i reaches back into ranks i - 1 .. i - reach and
//   chunk 2P-1-i into ranks i + 1 .. i + reach (and, past the middle, into first chunks of ranks
//   no further away), 1 + 2 reach steps of a two-way tour (ring_step_offset);
// - Striped's cyclic tokens reach every rank's keys within a few positions.
// P where that is not fewer: the whole one-way ring.
int ring_steps(RingLayout layout, int P, int Tl, long window, int doc_span);
// The block a rank holds at step s (0 <= s < steps) of a ring of `steps` steps: the rank at this
// offset from it (mod P). The one-way ring: -s. Zigzag's two-way tour (steps < P): 0, -1, ..,
// -reach, then +1, .., +reach. Every rank makes the same tour, so each block travels from the
// rank that held it at step s to the one holding it at s + 1, d(s) - d(s + 1) ranks on.
int ring_step_offset(RingLayout layout, int P, int steps, int s);
// That tour in words, for rank i of P: "its own block, then those of ranks i-1 .. i-3", "its own
// block, then those of rank i-1, then of rank i+1" (Zigzag's two-way tour), "its own block only"
// (steps 1); n bytes at buf.
void ring_tour_text(RingLayout layout, int P, int steps, char* buf, size_t n);
// The rank whose block `rank` holds at step s of that tour: rank + ring_step_offset, mod P.
int ring_step_origin(RingLayout layout, int P, int steps, int rank, int s);
// Ring, Striped and Zigzag over `steps` ring steps (ring_steps; P for the whole ring): the
// layout changes nothing else.
CommVolume ring_volume(const Mesh* mesh, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                       int steps, size_t act_size, size_t acc_size);
// The operations of those schedules (ring != 0: ATTENTION2D's overlapped schedule, every row or
// column exchange as n-1 send/recv passes; it keeps no K/V), and their sum per kind.
DistCommOps attention2d_ops(const Mesh* mesh, CommPhase phase, int B, int Tl, int NH, int NKV,
                            int HS, int keep_kv, size_t act_size, size_t acc_size, int ring);
DistCommOps ring_ops(const Mesh* mesh, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                     int steps, size_t act_size, size_t acc_size);
// Ulysses (attention/ulysses.c): all-to-alls over the SP group, each rank receiving (P-1)/P of
// what its heads need. Forward: Q|K|V in (3 S / P per peer, storage type), O back (S / P) and
// its LSE back (L / P, accumulator type); backward: Q|K|V|O|dO in (5 S / P), the LSE in (L / P)
// and dQ|dK|dV back (3 S / P, storage type); under grouped-query attention each K, V or their
// gradient counts Skv = S NKV / NH instead of S. NKV must be a multiple of P. In `chunks` chunks
// of heads each exchange is that many all-to-alls of 1 / chunks of its bytes.
DistCommOps ulysses_ops(const Mesh* mesh, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                        int chunks, size_t act_size, size_t acc_size);
CommVolume ulysses_volume(const Mesh* mesh, CommPhase phase, int B, int Tl, int NH, int NKV,
                          int HS, int chunks, size_t act_size, size_t acc_size);
// USP (attention_usp_create): Ulysses' all-to-alls over the mesh column (pq ranks, NH / pq heads
// per rank) around Striped's passes over the mesh row (pkv steps of the column's pq Tl tokens:
// the same 2 S per pass as Striped's over P). In `chunks` chunks of heads, the ring runs once
// per chunk: its passes and the all-to-alls are that many calls of 1 / chunks of the bytes.
DistCommOps usp_ops(const Mesh* mesh, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                    int chunks, size_t act_size, size_t acc_size);
CommVolume usp_volume(const Mesh* mesh, CommPhase phase, int B, int Tl, int NH, int NKV, int HS,
                      int chunks, size_t act_size, size_t acc_size);
CommVolume dist_comm_volume(const DistCommOps* ops);

// Bytes SP rank `rank` of P receives per decoded token, per layer and sequence, from the decode
// layer of attention/kv_cache.h. Tree: log2(P) exchanges of the (C + NH) partial output | LSE in
// the accumulator type, where P is a power of two (otherwise ranks past the largest power of two
// P2 receive the result once, and the ranks they fold into one partial more than the P2 ranks'
// log2(P2)); independent of the context. A step decoding n sequences together receives n times
// that in as many exchanges. Ring: every other rank's shard of the n cached tokens (the new one
// included) as K|V rows in the storage type, (n - n_rank) * 2 NKV HS where the rank holds n_rank of
// them (kv_cache_rank_rows: its prefill layout's share and its cyclic share of the decoded
// tokens), linear in n.
long long tree_decode_bytes(int P, int rank, int NH, int HS, size_t acc_size);
long long ring_decode_bytes(long n, long n_rank, int NKV, int HS, size_t act_size);

// Unmasked (query, key) pairs of one sequence and head in a partial-attention problem: the
// causal mask, p->window and, where p->docs.start is set, sequence 0's document mask (read on the
// host: host memory only).
long long attention_visible_pairs(const AttentionProblem* p);
// The same for a whole sequence of T tokens on one rank: T (T+1) / 2 causal; under a sliding
// window W < T, W (W+1) / 2 for the first W queries and W for each of the T - W after them.
long long window_visible_pairs(long T, long window);
// Unmasked scores per sequence and head on SP rank (r, c) of a pq x pkv mesh, T tokens, in a
// layer with the given window (0: causal) and, unless doc_start is NULL, a document mask:
// doc_start (T) holds each position's document's first position (model/documents.h).
long long attention2d_visible_pairs(int pq, int pkv, int r, int c, long T, long window,
                                    const int* doc_start);
// The same for every rank (r, c) of mesh row r at once, per_column[c] for c < pkv, in O(T/pq + pkv)
// rather than O(T pkv): a query whose visible keys span len = n pkv + e positions from lo sees n
// keys of every column, and one more of the e columns lo, lo + 1, ... (mod pkv).
void attention2d_row_visible_pairs(int pq, int pkv, int r, long T, long window,
                                   const int* doc_start, long long* per_column);
// The same for SP rank `rank` of a ring of P ranks in the given layout (zigzag: T % 2P == 0).
long long ring_visible_pairs(RingLayout layout, int P, int rank, long T, long window,
                             const int* doc_start);

// What a kernel computes rather than what is visible: it takes queries `rows` at a time (local
// queries 0 .., rows, ...) and computes each such tile's scores against the keys of
// attention_tile_keys (the first its first query sees to the last its last query sees), widened
// to whole tiles of `keys` keys (tile edges at local keys 0, keys, ...; 1: not widened). The CPU
// kernel: {ATTENTION_CPU_TILE_ROWS, 1}; the CUDA kernels: their query and key tiles. {1, 1}
// computes the visible pairs exactly.
typedef struct {
    int rows, keys;
} AttentionTile;

// Scores one sequence and head of a partial-attention call computes under `tile` (p->docs read on
// the host, as attention_visible_pairs). At least attention_visible_pairs(p).
long long attention_tile_pairs(const AttentionProblem* p, AttentionTile tile);
// The same for causal attention over n tokens (positions 0 .. n-1 on both sides): what a kernel
// computes where the GPU kernels' attention was measured.
long long attention_causal_tile_pairs(long n, AttentionTile tile);
// The scores SP rank (r, c) of a pq x pkv mesh computes per sequence and head in one layer under
// `tile`, as attention2d_visible_pairs: ATTENTION2D's one call of its row's T/pq queries against
// its column's T/pkv keys; `overlap`: the overlapped schedule's P calls of Tl x Tl, one per (query
// block, K|V block) pair (blocks that no query sees are skipped, as the schedule skips them).
long long attention2d_tile_pairs(int pq, int pkv, int r, int c, long T, long window,
                                 const int* doc_start, int overlap, AttentionTile tile);
// The same for SP rank `rank` of a ring of P ranks over `steps` steps (ring_steps): a call per
// step and pair of query and key runs that any query sees (Zigzag: two runs of Tl/2 each).
long long ring_tile_pairs(RingLayout layout, int P, int rank, int steps, long T, long window,
                          const int* doc_start, AttentionTile tile);

#ifdef __cplusplus
}
#endif
