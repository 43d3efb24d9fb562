// Where this process sits in the job, read from the launcher's environment (or from flags), so a
// multi-GPU run can start without MPI: e.g. Slurm's srun without PMIx, or a hand-written script.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rank, world_size;     // this process among all of the job's processes
    int local_rank;           // among the processes on this node (picks the GPU)
    int local_size;           // processes on this node; -1 when the launcher does not say
    char source[64];          // what the values came from: "Open MPI", "Slurm", ..., "none"
} LaunchInfo;

// Reads the first launcher whose rank variable is set, in this order:
//   Open MPI      OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   Slurm         SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the local size from
//                 SLURM_NTASKS_PER_NODE, else SLURM_TASKS_PER_NODE ("4(x2),3") at SLURM_NODEID
//   MPICH/Hydra   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//   torchrun      RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
// (the local size may be missing: -1). No launcher: a world of one, source "none".
// Returns 0, or -1 with a one-line message in err (ERR_LEN bytes) naming the variable when one is
// missing beside the rank variable, not an integer or out of range,
// e.g. "SLURM_PROCID='x': expected an integer in [0, SLURM_NTASKS)".
int launch_info_from_env(LaunchInfo* li, char* err);

// Applies the flags --rank, --world-size, --local-rank: each value >= 0 replaces the
// environment's (a negative one keeps it). Once any flag is given the local size is unknown (-1),
// since the launcher's layout no longer describes the job. Checks the result as above; the
// messages name the flags. Returns 0, or -1 with a message in err (ERR_LEN bytes).
int launch_info_override(LaunchInfo* li, int rank, int world_size, int local_rank, char* err);

#ifdef __cplusplus
}
#endif
