// Rendezvous without MPI: rank 0 hands a small blob (e.g. the 128-byte NCCL unique id) to every
// other rank, through a file on a shared file system or a TCP connection to rank 0.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RENDEZVOUS_MAX_BLOB 4096
// The run key fills a fixed 128-byte field with its terminating NUL.
#define RENDEZVOUS_MAX_KEY 127

// Every rank calls it with the same spec, run_key, world_size and len; rank 0's blob reaches the
// others' (filled in on return). spec:
//   file:PATH       rank 0 writes PATH atomically (header with the run key and world size, the
//                   blob, a checksum) and returns; the others poll it every 25 ms until a
//                   complete file of this run is there. A file of another run key (stale), world
//                   size or blob length, or a torn one, is never accepted.
//   tcp:HOST:PORT   rank 0 listens on HOST:PORT ("*" or 0.0.0.0: every address) and answers
//                   each other rank's hello (rank, world size, run key) with the blob, or with
//                   an error (duplicate rank, other run); the others connect, retrying every
//                   50 ms until rank 0 listens. [IPv6]:PORT works too.
// Every wait ends by timeout_s. A world of one returns at once. Returns 0, or -1 with a one-line
// message in err (ERR_LEN bytes) naming the path or HOST:PORT and what was last seen.
int rendezvous_exchange(const char* spec, const char* run_key, int rank, int world_size,
                        void* blob, size_t len, double timeout_s, char* err);

// The key that tells this run from an earlier one, into key (n bytes): flag_value when non-empty
// (--rendezvous-id), else SLURM_JOB_ID[.SLURM_STEP_ID], else PMIX_NAMESPACE, else
// OMPI_MCA_ess_base_jobid, else TORCHELASTIC_RUN_ID. Returns 0, or -1 with a message in err
// (ERR_LEN bytes) when none is set (pass --rendezvous-id) or the key is too long.
int rendezvous_run_key(char* key, size_t n, const char* flag_value, char* err);

#ifdef __cplusplus
}
#endif
