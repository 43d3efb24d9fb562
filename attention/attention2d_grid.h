// A rank's place in ATTENTION2D's pq x pkv grid and its K/V permutation (attention2d.md), shared
// by the plain schedule (attention2d.c) and the overlapped one (attention2d_overlap.c).
#pragma once
#include "comm/mesh.h"

typedef struct {
    int pq, pkv, P;
    int r, c, i;       // row, column, SP index i = r + pq*c
    int perm_dst;      // SP rank that holds this rank's K/V shard after the permutation
    int perm_src;      // SP rank whose K/V shard this rank holds after it
} Attention2DGrid;

static inline Attention2DGrid attention2d_grid(const Mesh* m) {
    Attention2DGrid g;
    g.pq = m->pq;
    g.pkv = m->pkv;
    g.P = m->P;
    g.r = m->r;
    g.c = m->c;
    g.i = m->sp_index;
    // This shard goes to the rank whose row-major index c' + pkv*r' equals i; the shard held
    // here is the one of SP rank c + pkv*r.
    g.perm_dst = mesh_sp_index(m, g.i / g.pkv, g.i % g.pkv);
    g.perm_src = g.c + g.pkv * g.r;
    return g;
}
