// The distributed attention schedules over the sequence-parallel (SP) group of a mesh. Each is
// an AttentionLayer: the model hands it the local tokens of its layout (AttentionLayer.positions)
// and gets back results for exactly those tokens. Communication is counted by the Comm under
// the scope (layer, COMM_FORWARD / COMM_BACKWARD) of each call.
//
// Bounds B, Tl (local tokens per sequence, T/P), NH, NKV (key/value heads: NH, or a divisor of it
// under grouped-query attention, whose K/V blocks are NKV/NH as large), HS size the scratch, allocated once here;
// forward and backward accept anything up to them (Ring's contiguous layout: exactly Tl) and
// allocate nothing. The `layer` of forward/backward must be a scope of the Comm (created with
// num_layers >= the model's layers). Every rank of the SP group calls forward and backward
// together, with the same shapes.
#pragma once
#include "attention/attention_layer.h"
#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

// ATTENTION2D on the pq x pkv mesh (attention2d.md), cyclic layout. keep_kv_layers = 0 re-does
// the K/V permutation and column all-gather in backward; L > 0 keeps the gathered K/V of layers
// 0..L-1 from forward for backward instead (L * B * T/pkv * 2 NKV HS extra reals), so the
// backward of a layer must follow the latest forward of that layer.
AttentionLayer* attention2d_create(Comm* comm, int B, int Tl, int NH, int NKV, int HS,
                                   int keep_kv_layers);

// ATTENTION2D, the paper's overlapped variant: the layout, results and bytes of attention2d
// (without kept K/V), with every collective a ring of point-to-point passes along the row or
// column, computing on each block as it arrives (attention/attention2d_overlap.c).
AttentionLayer* attention2d_overlap_create(Comm* comm, int B, int Tl, int NH, int NKV, int HS);

// Ring schedule over the SP group (P = pq * pkv, mesh shape ignored): Q stays, K/V rotate in
// P-1 steps overlapped with compute; backward rotates K, V and the dK, dV accumulators. The three
// layouts share the schedule and its volume; they differ in which (query, key) blocks are masked,
// and in the steps a window or documents leave (ring_steps, attention/dist_cost.h).
typedef enum {
    RING_CONTIGUOUS,   // Ring Attention: rank i holds tokens [i*Tl, (i+1)*Tl)
    RING_CYCLIC,       // Striped Attention: token t on rank t mod P
    RING_ZIGZAG,       // Megatron's load-balanced layout: the sequence in 2P chunks of Tl/2,
                       // rank i holding chunks i and 2P-1-i (Tl even)
} RingLayout;
AttentionLayer* attention_ring_create(Comm* comm, RingLayout layout, int B, int Tl, int NH,
                                      int NKV, int HS);
// The layout of a ring schedule's name ("ring", "striped", "zigzag", as the trainer's
// --attention): 0, or -1 for another name.
int ring_layout_parse(const char* name, RingLayout* out);
// The same ring over the ranks of one mesh group (MESH_SP above; MESH_ROW inside USP), in the
// layout over that group's ranks.
AttentionLayer* attention_ring_create_on(Comm* comm, MeshGroup group, RingLayout layout, int B,
                                         int Tl, int NH, int NKV, int HS);
// Ulysses over the SP group (P = pq * pkv, mesh shape ignored; NKV a multiple of P): Striped's
// cyclic layout, an all-to-all trading the sequence for heads, one single-device attention call
// on NH / P heads over all T positions, and an all-to-all back (attention/ulysses.c).
// chunks (1..ULYSSES_MAX_CHUNKS, dividing NH / P): the heads run in that many chunks, each
// chunk's all-to-alls travelling while another chunk computes (1: in, compute, out).
enum { ULYSSES_MAX_CHUNKS = 8 };
AttentionLayer* attention_ulysses_create(Comm* comm, int B, int Tl, int NH, int NKV, int HS,
                                         int chunks);
// USP, Ulysses inside a ring (pq dividing NKV): an all-to-all over the mesh column trades its pq
// ranks' tokens for NH / pq heads, a Striped ring over the mesh row computes them, and an
// all-to-all returns the outputs. Rank (r, c) holds the tokens t = c + pkv r (mod P); pq = 1 is
// Striped, pkv = 1 Ulysses (attention/ulysses.c). chunks as Ulysses', dividing NH / pq.
AttentionLayer* attention_usp_create(Comm* comm, int B, int Tl, int NH, int NKV, int HS,
                                     int chunks);
// USP's place of this rank in its cyclic layout: c + pkv r (tokens t = c + pkv r mod P).
static inline int attention_usp_place(const Mesh* m) { return m->c + m->pkv * m->r; }
// The positions of SP rank `rank`'s Tl local tokens in a layout (zigzag: Tl even).
TokenLayout ring_rank_layout(RingLayout layout, int P, int rank, int Tl);

#ifdef __cplusplus
}
#endif
