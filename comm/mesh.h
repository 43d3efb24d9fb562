// The process mesh: world = dp x pq x pkv ranks. Pure rank arithmetic (no MPI), so the MPI and
// NCCL communication layers derive the same groups from it.
//
// Layout: world rank = dp_index * P + sp_index with P = pq * pkv. Inside a sequence-parallel
// (SP) group the rank sits at mesh coordinates (r, c), r in [0, pq), c in [0, pkv), with the
// column-major index sp_index = r + pq * c (attention2d.md). Groups:
//   MESH_WORLD  every rank
//   MESH_DP     the dp ranks with the same sp_index (they see different sequences)
//   MESH_SP     the P ranks with the same dp_index (they share one sequence)
//   MESH_ROW    the pkv ranks (r, *) of one SP group; rank in the row = c
//   MESH_COL    the pq ranks (*, c) of one SP group; rank in the column = r
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MESH_WORLD, MESH_DP, MESH_SP, MESH_ROW, MESH_COL, MESH_NGROUPS } MeshGroup;

typedef struct {
    int dp, pq, pkv;          // mesh shape
    int P;                    // pq * pkv: ranks in an SP group
    int world_rank, world_size;
    int dp_index, sp_index;   // world_rank = dp_index * P + sp_index
    int r, c;                 // sp_index = r + pq * c
} Mesh;

// Fills the mesh of this rank. Returns 0, or -1 with a one-line message in err (ERR_LEN bytes)
// when a dimension is not positive or dp * pq * pkv differs from the world size.
int mesh_init(Mesh* mesh, int dp, int pq, int pkv, int world_rank, int world_size, char* err);

// Checks that a sequence of T tokens splits over the SP group: T > 0 and T % P == 0, so every
// rank holds T/P tokens (and T/pq queries and T/pkv keys after the ATTENTION2D gathers).
// Returns 0, or -1 with a message in err naming --seq-len and the mesh.
int mesh_check_seq_len(const Mesh* mesh, long T, char* err);

const char* mesh_group_name(MeshGroup group);
// Size of a group and this rank's index in it.
int mesh_group_size(const Mesh* mesh, MeshGroup group);
int mesh_group_rank(const Mesh* mesh, MeshGroup group);
// A number shared by exactly the ranks of this rank's group (the "color" of a split).
int mesh_group_color(const Mesh* mesh, MeshGroup group);
// World rank of member `member` of this rank's group.
int mesh_group_world_rank(const Mesh* mesh, MeshGroup group, int member);

// SP index of the mesh position (r, c).
static inline int mesh_sp_index(const Mesh* mesh, int r, int c) { return r + mesh->pq * c; }

#ifdef __cplusplus
}
#endif
