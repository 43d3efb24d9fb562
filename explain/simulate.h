// Runs a distributed attention schedule as every rank of one sequence-parallel group would, one
// simulated rank after another in this process: the real layer (attention2d.c, ring.c, ...) over
// the recording transport (record_comm.h), its partial-attention calls recorded
// (record_compute.h), and the closed forms of attention/dist_cost.h for the same rank.
#pragma once
#include "attention/dist_cost.h"
#include "explain/record_comm.h"
#include "explain/record_compute.h"

typedef enum {
    ALGO_2D, ALGO_2D_OVERLAP, ALGO_RING, ALGO_STRIPED, ALGO_ZIGZAG, ALGO_ULYSSES, ALGO_USP,
    ALGO_COUNT
} ExplainAlgo;

typedef struct {
    ExplainAlgo algo;
    int dp, pq, pkv;
    long T;              // sequence length
    int B, NH, HS;       // batch, heads, head size (the byte counts scale with them)
    long window;         // the trainer's --attention-window: 0 causal, W a sliding window
    long doc_len;        // --document-length D: documents of D tokens from position 0 (0: none)
    int chunks;          // --a2a-chunks G: ulysses and usp run their heads in G chunks
} ExplainShape;

// One simulated rank of SP group 0.
typedef struct {
    Mesh mesh;
    TokenLayout layout;          // AttentionLayer.positions of the layer on this rank
    RecordedOp* op;              // every operation, forward then backward
    int nops;
    ComputeCall* call;           // every partial-attention call, forward then backward
    int ncalls;
    CommVolume counted[2];       // the Comm's counters, forward and backward
    DistCommOps closed[2];       // dist_cost.c's operations of this rank
} RankRun;

typedef struct {
    ExplainShape s;
    int P, Tl;
    RankRun* rank;        // P entries, by SP index
    DocumentBounds docs;  // the document mask the ranks ran under (explain_documents)
} Simulation;

const char* explain_algo_name(ExplainAlgo a);           // "2d", "2d-overlap", "ring", ...
const char* explain_algo_title(ExplainAlgo a);          // "ATTENTION2D", "Ring", ...
int explain_algo_parse(const char* name, ExplainAlgo* a);   // 0, or -1 for an unknown name
int explain_algo_is_ring(ExplainAlgo a);   // ring, striped, zigzag
// The ring family and Ulysses: P ranks, the mesh shape plays no part.
int explain_algo_ignores_mesh(ExplainAlgo a);

// Checks T against the mesh and the algorithm; 0, or -1 with a one-line message naming the flag.
int explain_check_shape(const ExplainShape* s, char* err);

// The document bounds of s: (B, T) start and end arrays of documents of s->doc_len tokens from
// position 0, the same in every sequence (start NULL without documents). Free them with
// explain_documents_free once no recorded call that points at them is read.
DocumentBounds explain_documents(const ExplainShape* s);
void explain_documents_free(DocumentBounds* docs);

// The layer the trainer would create for this algorithm on comm (its Comm must have a scope 0).
AttentionLayer* explain_layer_create(Comm* comm, const ExplainShape* s);
// One forward and one backward of layer 0 on (B, Tl, 3C) inputs qkv, dout (B, Tl, C) under the
// document mask docs; the outputs land in scratch the function owns. rec (may be NULL) records
// the partial calls.
void explain_run_layer(AttentionLayer* layer, Comm* comm, const ExplainShape* s,
                       DocumentBounds docs, const real* qkv, const real* dout,
                       ComputeRecorder* rec);
// The ring family: (P, P) the step at which rank i holds the K|V block of rank o, at [i P + o]
// (ring_step_origin over the steps of the simulated shape), -1 where it never does. Free it.
int* explain_ring_step_table(const Simulation* sim);
// dist_cost.c's operations for this rank and phase.
DistCommOps explain_closed_ops(const Mesh* mesh, const ExplainShape* s, CommPhase phase);

// Simulates every rank of SP group 0 (shapes only: no kernel runs).
Simulation* simulate(const ExplainShape* s);
void simulation_free(Simulation* sim);

// Unmasked (query, key) pairs of one sequence and head computed by a rank's forward calls (Ulysses:
// of each of its NH / P heads, every pair of the sequence).
long long rank_visible_pairs(const RankRun* r);
// The closed form of the same (attention2d_visible_pairs / ring_visible_pairs, with the window
// and the documents).
long long closed_visible_pairs(const Simulation* sim, int sp);
// The scores a rank's calls of one kind (CALL_FORWARD or CALL_BACKWARD) compute per sequence and
// head under a kernel's tile (attention_tile_pairs), calls that no query sees counting nothing;
// and the closed form of the same (attention2d_tile_pairs / ring_tile_pairs, what the cost model
// prices).
long long rank_tile_pairs(const RankRun* r, CallKind kind, AttentionTile tile);
long long closed_tile_pairs(const Simulation* sim, int sp, AttentionTile tile);
// Bytes a rank receives in one phase, summed over its recorded operations.
long long rank_bytes(const RankRun* r, CommPhase phase);
