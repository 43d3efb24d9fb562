#include "comm/mesh.h"

#include <stdio.h>

#include "comm/fail.h"

int mesh_init(Mesh* mesh, int dp, int pq, int pkv, int world_rank, int world_size, char* err) {
    if (dp < 1 || pq < 1 || pkv < 1) {
        snprintf(err, ERR_LEN, "mesh: --dp %d --pq %d --pkv %d: every dimension must be >= 1",
                 dp, pq, pkv);
        return -1;
    }
    const long ranks = (long)dp * pq * pkv;
    if (ranks != world_size) {
        snprintf(err, ERR_LEN,
                 "mesh: --dp %d x --pq %d x --pkv %d = %ld ranks expected, found %d MPI ranks "
                 "(mpirun -np %ld, or change --dp/--pq/--pkv)",
                 dp, pq, pkv, ranks, world_size, ranks);
        return -1;
    }
    if (world_rank < 0 || world_rank >= world_size) {
        snprintf(err, ERR_LEN, "mesh: rank %d outside the world of %d ranks", world_rank,
                 world_size);
        return -1;
    }
    mesh->dp = dp;
    mesh->pq = pq;
    mesh->pkv = pkv;
    mesh->P = pq * pkv;
    mesh->world_rank = world_rank;
    mesh->world_size = world_size;
    mesh->dp_index = world_rank / mesh->P;
    mesh->sp_index = world_rank % mesh->P;
    mesh->r = mesh->sp_index % pq;
    mesh->c = mesh->sp_index / pq;
    return 0;
}

int mesh_check_seq_len(const Mesh* mesh, long T, char* err) {
    if (T <= 0 || T % mesh->P != 0) {
        snprintf(err, ERR_LEN,
                 "mesh: --seq-len %ld must be a positive multiple of --pq %d x --pkv %d = %d "
                 "(each sequence-parallel rank holds T/%d tokens)",
                 T, mesh->pq, mesh->pkv, mesh->P, mesh->P);
        return -1;
    }
    return 0;
}

const char* mesh_group_name(MeshGroup group) {
    static const char* names[MESH_NGROUPS] = {"world", "dp", "sp", "row", "col"};
    return group >= 0 && group < MESH_NGROUPS ? names[group] : "?";
}

int mesh_group_size(const Mesh* mesh, MeshGroup group) {
    switch (group) {
    case MESH_WORLD: return mesh->world_size;
    case MESH_DP: return mesh->dp;
    case MESH_SP: return mesh->P;
    case MESH_ROW: return mesh->pkv;
    case MESH_COL: return mesh->pq;
    default: FAIL("caller bug", "unknown mesh group %d", (int)group);
    }
}

int mesh_group_rank(const Mesh* mesh, MeshGroup group) {
    switch (group) {
    case MESH_WORLD: return mesh->world_rank;
    case MESH_DP: return mesh->dp_index;
    case MESH_SP: return mesh->sp_index;
    case MESH_ROW: return mesh->c;
    case MESH_COL: return mesh->r;
    default: FAIL("caller bug", "unknown mesh group %d", (int)group);
    }
}

int mesh_group_color(const Mesh* mesh, MeshGroup group) {
    switch (group) {
    case MESH_WORLD: return 0;
    case MESH_DP: return mesh->sp_index;
    case MESH_SP: return mesh->dp_index;
    case MESH_ROW: return mesh->dp_index * mesh->pq + mesh->r;
    case MESH_COL: return mesh->dp_index * mesh->pkv + mesh->c;
    default: FAIL("caller bug", "unknown mesh group %d", (int)group);
    }
}

int mesh_group_world_rank(const Mesh* mesh, MeshGroup group, int member) {
    CHECK(member >= 0 && member < mesh_group_size(mesh, group), "caller bug",
          "member %d outside the %s group of %d ranks", member, mesh_group_name(group),
          mesh_group_size(mesh, group));
    const int base = mesh->dp_index * mesh->P;
    switch (group) {
    case MESH_WORLD: return member;
    case MESH_DP: return member * mesh->P + mesh->sp_index;
    case MESH_SP: return base + member;
    case MESH_ROW: return base + mesh_sp_index(mesh, mesh->r, member);
    case MESH_COL: return base + mesh_sp_index(mesh, member, mesh->c);
    default: FAIL("caller bug", "unknown mesh group %d", (int)group);
    }
}
