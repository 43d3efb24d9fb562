// Starting without MPI (comm/launch.c, comm/rendezvous.c), in plain processes: forked ranks
// exchange a random blob through file:PATH and tcp:127.0.0.1:PORT; stale, foreign, torn and
// missing rendezvous are refused with messages that say so; each launcher's variables, bad values
// and flags; the run key's precedence.
// Usage: test_rendezvous [--case file|tcp|launch|run-key|args] (no argument: all).
#include "comm/fail.h"
#include "comm/launch.h"
#include "comm/rendezvous.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/test_expect.h"

#define BLOB_LEN 128      // an NCCL unique id
#define MAX_RANKS 8
#define CHILD_ALARM_S 10  // a child still running then is killed: a hang shows as a failure

static char tmpdir[256];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int contains(const char* text, const char* part) { return strstr(text, part) != NULL; }

static void random_blob(unsigned char* blob, size_t n) {
    if (getrandom(blob, n, 0) != (ssize_t)n) setup_fail("getrandom: %s", strerror(errno));
}

static void remove_tmpdir(void) {
    DIR* d = opendir(tmpdir);
    if (!d) return;
    char path[512];
    for (struct dirent* e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
        if (unlink(path) != 0)
            fprintf(stderr, "note: cannot remove %s: %s\n", path, strerror(errno));
    }
    closedir(d);
    if (rmdir(tmpdir) != 0)
        fprintf(stderr, "note: cannot remove %s: %s\n", tmpdir, strerror(errno));
}

// "file:<tmpdir>/name"
static void file_spec(char* spec, size_t n, const char* name) {
    snprintf(spec, n, "file:%s/%s", tmpdir, name);
}

// A port nothing listens on now: the kernel's pick for port 0 on 127.0.0.1.
static int free_port(void) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr*)&a, &len) != 0)
        setup_fail("cannot find a free port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

// --- ranks as child processes --------------------------------------------------------------------

typedef struct {
    int rc;       // what rendezvous_exchange returned; -99 when the child did not report
    int blob_ok;  // the blob equals rank 0's
    char err[ERR_LEN];
} Report;

typedef struct {
    pid_t pid;
    int fd;  // the read end of the child's report pipe
} Child;

// Starts one rank: rank 0 offers `blob`, the others expect it.
static Child spawn_rank(const char* spec, const char* key, int rank, int world,
                        const unsigned char* blob, double timeout_s) {
    int p[2];
    if (pipe(p) != 0) setup_fail("pipe: %s", strerror(errno));
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) setup_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        alarm(CHILD_ALARM_S);
        close(p[0]);
        unsigned char got[BLOB_LEN] = {0};
        if (rank == 0) memcpy(got, blob, BLOB_LEN);
        Report r = {.rc = -1};
        r.rc = rendezvous_exchange(spec, key, rank, world, got, BLOB_LEN, timeout_s, r.err);
        r.blob_ok = memcmp(got, blob, BLOB_LEN) == 0;
        const int wrote = write(p[1], &r, sizeof r) == (ssize_t)sizeof r;
        _exit(wrote ? 0 : 3);
    }
    close(p[1]);
    return (Child){.pid = pid, .fd = p[0]};
}

static Report collect(Child c) {
    Report r = {.rc = -99};
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0)
        if (errno != EINTR) setup_fail("waitpid: %s", strerror(errno));
    if (read(c.fd, &r, sizeof r) != (ssize_t)sizeof r) {
        r.rc = -99;
        if (WIFSIGNALED(status))
            snprintf(r.err, sizeof r.err, "child killed by signal %d (hung?)", WTERMSIG(status));
        else
            snprintf(r.err, sizeof r.err, "child exited %d without a report",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    close(c.fd);
    return r;
}

// A world of n ranks exchanging a random blob: ranks 1..n-1 start first and rank 0 after
// `delay` s, so they have to wait for it. Every rank must return rank 0's blob.
static void check_world(const char* what, const char* spec, const char* key, int n, double delay) {
    unsigned char blob[BLOB_LEN];
    random_blob(blob, sizeof blob);
    Child kids[MAX_RANKS];
    for (int r = 1; r < n; r++) kids[r] = spawn_rank(spec, key, r, n, blob, 5.0);
    nap(delay);
    kids[0] = spawn_rank(spec, key, 0, n, blob, 5.0);
    for (int r = 0; r < n; r++) {
        const Report rep = collect(kids[r]);
        EXPECT(rep.rc == 0 && rep.blob_ok, "%s: rank %d of %d holds rank 0's blob %s", what, r, n,
               rep.rc ? rep.err : rep.blob_ok ? "" : "(a different blob)");
    }
}

// One rank in this process; returns rendezvous_exchange's result, the message in err.
static int exchange_here(const char* spec, const char* key, int rank, int world, size_t len,
                         double timeout_s, char* err, double* seconds) {
    unsigned char blob[RENDEZVOUS_MAX_BLOB] = {0};
    if (rank == 0) random_blob(blob, len);
    err[0] = '\0';
    const double t0 = now_s();
    const int rc = rendezvous_exchange(spec, key, rank, world, blob, len, timeout_s, err);
    if (seconds) *seconds = now_s() - t0;
    return rc;
}

// Expects a rank alone to fail within timeout + 1 s, with a message containing every part.
static void check_alone_fails(const char* what, const char* spec, const char* key, int rank,
                              int world, size_t len, double timeout_s, const char* const* parts) {
    char err[ERR_LEN];
    double secs = 0;
    const int rc = exchange_here(spec, key, rank, world, len, timeout_s, err, &secs);
    int all = 1;
    for (const char* const* p = parts; *p; p++) all &= contains(err, *p);
    EXPECT(rc == -1 && all && secs < timeout_s + 1.0, "%s: fails after %.2f s: %s", what, secs,
           err);
    if (!all)
        for (const char* const* p = parts; *p; p++)
            if (!contains(err, *p)) printf("        the message lacks '%s'\n", *p);
}

// --- file:PATH -----------------------------------------------------------------------------------

static void write_bytes(const char* path, const void* data, size_t n) {
    FILE* f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0)
        setup_fail("cannot write %s: %s", path, strerror(errno));
}

static size_t read_bytes(const char* path, unsigned char* buf, size_t cap) {
    FILE* f = fopen(path, "rb");
    if (!f) setup_fail("cannot read %s: %s", path, strerror(errno));
    const size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

// Rank 0 of another run (or world) writes the file, as an earlier run would have.
static void publish(const char* spec, const char* key, int world) {
    char err[ERR_LEN];
    if (exchange_here(spec, key, 0, world, BLOB_LEN, 1.0, err, NULL) != 0)
        setup_fail("rank 0 cannot write %s: %s", spec, err);
}

static void case_file(void) {
    printf("file:PATH\n");
    char spec[512], key[64];
    for (int n = 1; n <= 4; n *= 2) {
        char name[32];
        snprintf(name, sizeof name, "world%d", n);
        file_spec(spec, sizeof spec, name);
        snprintf(key, sizeof key, "test-run-%d-%d", n, (int)getpid());
        check_world("file", spec, key, n, 0.1);
    }

    // A stale file of an earlier run: the waiting ranks must take only rank 0's new one.
    file_spec(spec, sizeof spec, "stale");
    publish(spec, "earlier-run", 4);
    check_world("file over a stale file", spec, "this-run", 4, 0.3);

    file_spec(spec, sizeof spec, "stale-alone");
    publish(spec, "earlier-run", 2);
    const char* stale[] = {"written by another run", "'earlier-run'", "'this-run'", "stale",
                           "stale-alone", "0.5 s", NULL};
    check_alone_fails("rank 1 alone beside a stale file", spec, "this-run", 1, 2, BLOB_LEN, 0.5,
                      stale);

    file_spec(spec, sizeof spec, "missing");
    const char* missing[] = {"not found after 0.5 s", "missing", "shared file system", NULL};
    check_alone_fails("rank 1 alone without a file", spec, "this-run", 1, 2, BLOB_LEN, 0.5,
                      missing);

    file_spec(spec, sizeof spec, "world3");
    publish(spec, "this-run", 3);
    const char* world[] = {"world of 3 ranks, expected 2", NULL};
    check_alone_fails("a file for another world size", spec, "this-run", 1, 2, BLOB_LEN, 0.3,
                      world);
    const char* length[] = {"holds a 128-byte blob, expected 64", NULL};
    check_alone_fails("a file with another blob length", spec, "this-run", 1, 3, 64, 0.3, length);

    // Torn or foreign files: garbage, a cut-off file, one flipped byte.
    char path[512];
    snprintf(path, sizeof path, "%s/torn", tmpdir);
    file_spec(spec, sizeof spec, "torn");
    write_bytes(path, "not a rendezvous file at all", 28);
    const char* short_file[] = {"malformed", "too short", NULL};
    check_alone_fails("a short foreign file", spec, "this-run", 1, 2, BLOB_LEN, 0.3, short_file);
    unsigned char buf[RENDEZVOUS_MAX_BLOB + 512];
    publish(spec, "this-run", 2);
    size_t n = read_bytes(path, buf, sizeof buf);
    write_bytes(path, buf, n - 20);
    const char* cut[] = {"malformed", "its header says", NULL};
    check_alone_fails("a cut-off file", spec, "this-run", 1, 2, BLOB_LEN, 0.3, cut);
    buf[n / 2] ^= 1;
    write_bytes(path, buf, n);
    const char* flipped[] = {"malformed", "checksum mismatch", NULL};
    check_alone_fails("a file with a flipped byte", spec, "this-run", 1, 2, BLOB_LEN, 0.3, flipped);
    memset(buf, 'x', sizeof buf);
    write_bytes(path, buf, n);
    const char* magic[] = {"malformed", "no rendezvous magic", NULL};
    check_alone_fails("a foreign file of the right size", spec, "this-run", 1, 2, BLOB_LEN, 0.3,
                      magic);

    snprintf(path, sizeof path, "%s/fifo", tmpdir);
    if (mkfifo(path, 0600) != 0) setup_fail("mkfifo %s: %s", path, strerror(errno));
    file_spec(spec, sizeof spec, "fifo");
    const char* fifo[] = {"malformed", NULL};
    check_alone_fails("a FIFO at the path (no hang)", spec, "this-run", 1, 2, BLOB_LEN, 0.3, fifo);

    file_spec(spec, sizeof spec, "no-such-dir/rdzv");
    const char* unwritable[] = {"no-such-dir/rdzv", "No such file or directory", NULL};
    check_alone_fails("rank 0 cannot write", spec, "this-run", 0, 2, BLOB_LEN, 1.0, unwritable);
}

// --- tcp:HOST:PORT -------------------------------------------------------------------------------

static void tcp_spec(char* spec, size_t n) { snprintf(spec, n, "tcp:127.0.0.1:%d", free_port()); }

static void case_tcp(void) {
    printf("tcp:HOST:PORT\n");
    char spec[64], key[64];
    for (int n = 1; n <= 4; n *= 2) {
        tcp_spec(spec, sizeof spec);
        snprintf(key, sizeof key, "test-run-%d-%d", n, (int)getpid());
        check_world("tcp", spec, key, n, 0.1);
    }

    // Rank 0 on every address (tcp:*:PORT), rank 1 through 127.0.0.1.
    unsigned char blob[BLOB_LEN];
    random_blob(blob, sizeof blob);
    const int port = free_port();
    char any[64];
    snprintf(any, sizeof any, "tcp:*:%d", port);
    snprintf(spec, sizeof spec, "tcp:127.0.0.1:%d", port);
    const Child any0 = spawn_rank(any, "this-run", 0, 2, blob, 5.0);
    Report r = collect(spawn_rank(spec, "this-run", 1, 2, blob, 5.0));
    EXPECT(r.rc == 0 && r.blob_ok, "tcp:*:PORT: rank 1 holds rank 0's blob %s", r.err);
    r = collect(any0);
    EXPECT(r.rc == 0, "tcp:*:PORT: rank 0 served %s", r.err);

    tcp_spec(spec, sizeof spec);
    const char* alone[] = {spec + 4, "rank 1 got nothing from rank 0 within 0.5 s",
                           "Connection refused", NULL};
    check_alone_fails("rank 1 alone", spec, "this-run", 1, 2, BLOB_LEN, 0.5, alone);
    const char* alone0[] = {spec + 4, "heard from 0 of the 2 other ranks within 0.5 s",
                            "missing: rank 1, 2", NULL};
    check_alone_fails("rank 0 alone", spec, "this-run", 0, 3, BLOB_LEN, 0.5, alone0);

    // Two processes with rank 1 in a world of 3: the second is refused, rank 0 says so.
    tcp_spec(spec, sizeof spec);
    const Child first = spawn_rank(spec, "this-run", 1, 3, blob, 2.0);
    const Child rank0 = spawn_rank(spec, "this-run", 0, 3, blob, 1.0);
    nap(0.4);
    const Child second = spawn_rank(spec, "this-run", 1, 3, blob, 2.0);
    r = collect(first);
    EXPECT(r.rc == 0 && r.blob_ok, "duplicate rank: the first rank 1 holds rank 0's blob %s",
           r.err);
    r = collect(second);
    EXPECT(r.rc == -1 && contains(r.err, "refused rank 1") && contains(r.err, "connected twice") &&
           contains(r.err, spec + 4), "duplicate rank: the second rank 1 is refused: %s", r.err);
    r = collect(rank0);
    EXPECT(r.rc == -1 && contains(r.err, "rank 1 connected twice") &&
           contains(r.err, "missing: rank 2"), "duplicate rank: rank 0 reports it: %s", r.err);

    // A rank of another run: refused at once; rank 0 names the key at its timeout.
    tcp_spec(spec, sizeof spec);
    const Child owner = spawn_rank(spec, "run-a", 0, 2, blob, 1.0);
    const double t0 = now_s();
    const Child foreign = spawn_rank(spec, "run-b", 1, 2, blob, 3.0);
    r = collect(foreign);
    const double secs = now_s() - t0;
    EXPECT(r.rc == -1 && contains(r.err, "refused rank 1") && contains(r.err, "'run-b'") &&
           secs < 2.0, "another run's rank is refused after %.2f s: %s", secs, r.err);
    r = collect(owner);
    EXPECT(r.rc == -1 && contains(r.err, "run key 'run-b'"), "rank 0 names the other run's key: %s",
           r.err);

    // A port another program listens on.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr*)&a, &len) != 0)
        setup_fail("cannot listen on 127.0.0.1: %s", strerror(errno));
    snprintf(spec, sizeof spec, "tcp:127.0.0.1:%d", ntohs(a.sin_port));
    const char* busy[] = {spec + 4, "cannot listen", "Address already in use", NULL};
    check_alone_fails("rank 0 on a busy port", spec, "this-run", 0, 2, BLOB_LEN, 1.0, busy);
    // ... and a rank that reaches it gets no rendezvous answer: it retries until its timeout.
    const char* mute[] = {spec + 4, "got nothing from rank 0 within 0.3 s", NULL};
    check_alone_fails("a rank facing a mute server", spec, "this-run", 1, 2, BLOB_LEN, 0.3, mute);
    close(fd);
}

// --- arguments -----------------------------------------------------------------------------------

static void case_args(void) {
    printf("arguments\n");
    static const struct {
        const char* spec;
        const char* expect;
    } bad_specs[] = {
        {"udp:host:1", "expected file:PATH or tcp:HOST:PORT"},
        {"/some/path", "expected file:PATH or tcp:HOST:PORT"},
        {"file:", "expected file:PATH or tcp:HOST:PORT"},
        {"tcp:host", "expected tcp:HOST:PORT"},
        {"tcp::80", "expected tcp:HOST:PORT"},
        {"tcp:host:0", "PORT in 1..65535"},
        {"tcp:host:65536", "PORT in 1..65535"},
        {"tcp:host:80x", "PORT in 1..65535"},
        {"tcp:::1:80", "tcp:[IPv6]:PORT"},
    };
    char err[ERR_LEN];
    for (size_t i = 0; i < sizeof bad_specs / sizeof bad_specs[0]; i++) {
        const int rc = exchange_here(bad_specs[i].spec, "k", 1, 2, BLOB_LEN, 1.0, err, NULL);
        EXPECT(rc == -1 && contains(err, bad_specs[i].expect) && contains(err, bad_specs[i].spec),
               "spec '%s' refused: %s", bad_specs[i].spec, err);
    }
    EXPECT(exchange_here("file:/x", "", 1, 2, BLOB_LEN, 1.0, err, NULL) == -1 &&
           contains(err, "run key of 0 bytes"), "an empty run key refused: %s", err);
    EXPECT(exchange_here("file:/x", "k", 2, 2, BLOB_LEN, 1.0, err, NULL) == -1 &&
           contains(err, "rank 2 outside a world of 2"), "rank 2 of 2 refused: %s", err);
    EXPECT(exchange_here("file:/x", "k", 1, 2, RENDEZVOUS_MAX_BLOB + 1, 1.0, err, NULL) == -1 &&
           contains(err, "at most 4096"), "a 4097-byte blob refused: %s", err);
    EXPECT(exchange_here("file:/x", "k", 1, 2, BLOB_LEN, 0, err, NULL) == -1 &&
           contains(err, "timeout 0 s"), "a zero timeout refused: %s", err);
    EXPECT(exchange_here("file:/no/such/dir/x", "k", 0, 1, BLOB_LEN, 1.0, err, NULL) == 0,
           "a world of one needs no rendezvous %s", err);
}

// --- launch_info ---------------------------------------------------------------------------------

static const char* const launch_vars[] = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NODEID", "PMI_RANK", "PMI_SIZE",
    "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
    "TORCHELASTIC_RUN_ID", NULL};

// Clears every variable either module reads, then sets the NAME=VALUE pairs given.
static void set_env(const char* const* assignments) {
    for (const char* const* v = launch_vars; *v; v++)
        if (unsetenv(*v) != 0) setup_fail("unsetenv %s: %s", *v, strerror(errno));
    for (const char* const* a = assignments; *a; a++) {
        char name[64];
        const char* eq = strchr(*a, '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - *a), *a);
        if (setenv(name, eq + 1, 1) != 0) setup_fail("setenv %s: %s", *a, strerror(errno));
    }
}

#define ENV(...) ((const char* const[]){__VA_ARGS__, NULL})

static void check_launch(const char* what, const char* const* env, int rank, int size,
                         int local_rank, int local_size, const char* source) {
    set_env(env);
    LaunchInfo li;
    char err[ERR_LEN] = "";
    const int rc = launch_info_from_env(&li, err);
    EXPECT(rc == 0 && li.rank == rank && li.world_size == size && li.local_rank == local_rank &&
           li.local_size == local_size && strcmp(li.source, source) == 0,
           "%s: rank %d of %d, local %d of %d, from %s %s", what, rc ? -1 : li.rank,
           rc ? -1 : li.world_size, rc ? -1 : li.local_rank, rc ? -1 : li.local_size,
           rc ? "?" : li.source, err);
}

static void check_launch_fails(const char* env_text, const char* const* env, const char* expect) {
    set_env(env);
    LaunchInfo li;
    char err[ERR_LEN] = "";
    const int rc = launch_info_from_env(&li, err);
    EXPECT(rc == -1 && contains(err, expect), "%s refused: %s", env_text, err);
}

static void check_override(const char* what, const char* const* env, int rank, int size,
                           int local_rank, const char* expect) {
    set_env(env);
    LaunchInfo li, before;
    char err[ERR_LEN] = "";
    if (launch_info_from_env(&li, err) != 0) setup_fail("%s: %s", what, err);
    before = li;
    const int rc = launch_info_override(&li, rank, size, local_rank, err);
    if (expect)
        EXPECT(rc == -1 && contains(err, expect) && memcmp(&li, &before, sizeof li) == 0,
               "%s refused: %s", what, err);
    else
        EXPECT(rc == 0 && li.rank == (rank >= 0 ? rank : before.rank) &&
               li.world_size == (size >= 0 ? size : before.world_size) &&
               li.local_rank == (local_rank >= 0 ? local_rank : before.local_rank),
               "%s: rank %d of %d, local %d of %d, from %s %s", what, li.rank, li.world_size,
               li.local_rank, li.local_size, li.source, err);
}

static void case_launch(void) {
    printf("launch_info\n");
    check_launch("no launcher", ENV("UNRELATED=1"), 0, 1, 0, 1, "none");
    check_launch("Open MPI", ENV("OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8",
                                 "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4"),
                 5, 8, 1, 4, "Open MPI");
    check_launch("Slurm, --ntasks-per-node",
                 ENV("SLURM_PROCID=6", "SLURM_NTASKS=8", "SLURM_LOCALID=2",
                     "SLURM_NTASKS_PER_NODE=4", "SLURM_TASKS_PER_NODE=3,5", "SLURM_NODEID=1"),
                 6, 8, 2, 4, "Slurm");
    check_launch("Slurm, node 2 of 4(x2),3",
                 ENV("SLURM_PROCID=9", "SLURM_NTASKS=11", "SLURM_LOCALID=1",
                     "SLURM_TASKS_PER_NODE=4(x2),3", "SLURM_NODEID=2"), 9, 11, 1, 3, "Slurm");
    check_launch("Slurm, node 1 of 4(x2),3",
                 ENV("SLURM_PROCID=5", "SLURM_NTASKS=11", "SLURM_LOCALID=1",
                     "SLURM_TASKS_PER_NODE=4(x2),3", "SLURM_NODEID=1"), 5, 11, 1, 4, "Slurm");
    check_launch("Slurm, no node id", ENV("SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1",
                                          "SLURM_TASKS_PER_NODE=2"), 1, 2, 1, -1, "Slurm");
    check_launch("MPICH/Hydra", ENV("PMI_RANK=3", "PMI_SIZE=4", "MPI_LOCALRANKID=1",
                                    "MPI_LOCALNRANKS=2"), 3, 4, 1, 2, "MPICH/Hydra");
    check_launch("torchrun", ENV("RANK=7", "WORLD_SIZE=16", "LOCAL_RANK=7",
                                 "LOCAL_WORLD_SIZE=8"), 7, 16, 7, 8, "torchrun");
    check_launch("torchrun-style without a local size", ENV("RANK=1", "WORLD_SIZE=2",
                 "LOCAL_RANK=0"), 1, 2, 0, -1, "torchrun");
    check_launch("Open MPI before Slurm and torchrun",
                 ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                     "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                     "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", "RANK=0",
                     "WORLD_SIZE=1", "LOCAL_RANK=0"), 1, 2, 1, 2, "Open MPI");
    check_launch("Slurm before Hydra and torchrun",
                 ENV("SLURM_PROCID=2", "SLURM_NTASKS=3", "SLURM_LOCALID=0", "PMI_RANK=0",
                     "PMI_SIZE=1", "MPI_LOCALRANKID=0", "RANK=0", "WORLD_SIZE=1",
                     "LOCAL_RANK=0"), 2, 3, 0, -1, "Slurm");
    check_launch("salloc's SLURM_NTASKS alone is no launch", ENV("SLURM_NTASKS=4"), 0, 1, 0, 1,
                 "none");

    check_launch_fails("SLURM_PROCID=x",
                       ENV("SLURM_PROCID=x", "SLURM_NTASKS=4", "SLURM_LOCALID=0"),
                       "SLURM_PROCID='x': expected an integer in [0, SLURM_NTASKS)");
    check_launch_fails("SLURM_PROCID=4 of 4",
                       ENV("SLURM_PROCID=4", "SLURM_NTASKS=4", "SLURM_LOCALID=0"),
                       "SLURM_PROCID='4': expected an integer in [0, SLURM_NTASKS) = [0, 4)");
    check_launch_fails("RANK=-1", ENV("RANK=-1", "WORLD_SIZE=4", "LOCAL_RANK=0"),
                       "RANK='-1': expected an integer in [0, WORLD_SIZE)");
    check_launch_fails("PMI_RANK=3abc", ENV("PMI_RANK=3abc", "PMI_SIZE=4", "MPI_LOCALRANKID=0"),
                       "PMI_RANK='3abc'");
    check_launch_fails("RANK=' 1'", ENV("RANK= 1", "WORLD_SIZE=4", "LOCAL_RANK=0"), "RANK=' 1'");
    check_launch_fails("SLURM_NTASKS=0", ENV("SLURM_PROCID=0", "SLURM_NTASKS=0", "SLURM_LOCALID=0"),
                       "SLURM_NTASKS='0': expected a positive integer");
    check_launch_fails("OMPI_COMM_WORLD_SIZE=99999999999",
                       ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=99999999999",
                           "OMPI_COMM_WORLD_LOCAL_RANK=0"), "OMPI_COMM_WORLD_SIZE='99999999999'");
    check_launch_fails("SLURM_PROCID without SLURM_NTASKS",
                       ENV("SLURM_PROCID=0", "SLURM_LOCALID=0"),
                       "SLURM_PROCID is set but SLURM_NTASKS is not");
    check_launch_fails("RANK without LOCAL_RANK", ENV("RANK=0", "WORLD_SIZE=2"),
                       "RANK is set but LOCAL_RANK is not");
    check_launch_fails("LOCAL_RANK=4 of 4",
                       ENV("RANK=0", "WORLD_SIZE=8", "LOCAL_RANK=4", "LOCAL_WORLD_SIZE=4"),
                       "LOCAL_RANK='4': expected an integer in [0, LOCAL_WORLD_SIZE) = [0, 4)");
    check_launch_fails("OMPI_COMM_WORLD_LOCAL_SIZE=9 of 8",
                       ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=8",
                           "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=9"),
                       "OMPI_COMM_WORLD_LOCAL_SIZE='9': expected an integer in [1, "
                       "OMPI_COMM_WORLD_SIZE] = [1, 8]");
    check_launch_fails("MPI_LOCALNRANKS=-2",
                       ENV("PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=-2"),
                       "MPI_LOCALNRANKS='-2'");
    check_launch_fails("SLURM_NODEID=3 of 4(x2),3",
                       ENV("SLURM_PROCID=0", "SLURM_NTASKS=11", "SLURM_LOCALID=0",
                           "SLURM_TASKS_PER_NODE=4(x2),3", "SLURM_NODEID=3"),
                       "SLURM_TASKS_PER_NODE='4(x2),3': expected counts like");
    check_launch_fails("SLURM_TASKS_PER_NODE=4(x2",
                       ENV("SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_LOCALID=0",
                           "SLURM_TASKS_PER_NODE=4(x2", "SLURM_NODEID=0"),
                       "SLURM_TASKS_PER_NODE='4(x2'");
    check_launch_fails("SLURM_NODEID=x",
                       ENV("SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_LOCALID=0",
                           "SLURM_TASKS_PER_NODE=8", "SLURM_NODEID=x"), "SLURM_NODEID='x'");
    check_launch_fails("SLURM_LOCALID=3 of SLURM_TASKS_PER_NODE 3",
                       ENV("SLURM_PROCID=10", "SLURM_NTASKS=11", "SLURM_LOCALID=3",
                           "SLURM_TASKS_PER_NODE=4(x2),3", "SLURM_NODEID=2"),
                       "SLURM_LOCALID='3': expected an integer in [0, SLURM_TASKS_PER_NODE) = "
                       "[0, 3)");

    check_override("no flags keep Slurm's", ENV("SLURM_PROCID=1", "SLURM_NTASKS=2",
                   "SLURM_LOCALID=1"), -1, -1, -1, NULL);
    check_override("--rank 2 --world-size 4 --local-rank 2 without a launcher", ENV("A=1"), 2, 4,
                   2, NULL);
    check_override("--rank 3 over Slurm's 4 ranks", ENV("SLURM_PROCID=1", "SLURM_NTASKS=4",
                   "SLURM_LOCALID=1"), 3, -1, -1, NULL);
    check_override("--rank 5 over Slurm's 4 ranks", ENV("SLURM_PROCID=1", "SLURM_NTASKS=4",
                   "SLURM_LOCALID=1"), 5, -1, -1,
                   "--rank 5: expected an integer in [0, --world-size) = [0, 4)");
    check_override("--rank 1 without a launcher", ENV("A=1"), 1, -1, -1,
                   "--rank 1: expected an integer in [0, --world-size) = [0, 1)");
    check_override("--world-size 0", ENV("A=1"), -1, 0, -1,
                   "--world-size 0: expected a positive integer");
    check_override("--world-size 2 below Slurm's local rank 3",
                   ENV("SLURM_PROCID=1", "SLURM_NTASKS=8", "SLURM_LOCALID=3"), 1, 2, -1,
                   "--local-rank (not given: 3 from Slurm): expected an integer in [0, "
                   "--world-size) = [0, 2)");
    set_env(ENV("SLURM_PROCID=1", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_NTASKS_PER_NODE=4"));
    LaunchInfo li;
    char err[ERR_LEN] = "";
    const int rc = launch_info_from_env(&li, err) || launch_info_override(&li, 0, 2, 0, err);
    EXPECT(rc == 0 && li.local_size == -1 && strcmp(li.source, "flags over Slurm") == 0,
           "flags make the local size unknown and the source '%s' %s", rc ? "?" : li.source, err);
}

// --- run key -------------------------------------------------------------------------------------

static void check_key(const char* what, const char* const* env, const char* flag,
                      const char* expect) {
    set_env(env);
    char key[RENDEZVOUS_MAX_KEY + 1] = "", err[ERR_LEN] = "";
    const int rc = rendezvous_run_key(key, sizeof key, flag, err);
    EXPECT(rc == 0 && strcmp(key, expect) == 0, "%s: run key '%s' (expected '%s') %s", what, key,
           expect, err);
}

static void case_run_key(void) {
    printf("run key\n");
    const char* const* all = ENV("SLURM_JOB_ID=123", "SLURM_STEP_ID=4", "PMIX_NAMESPACE=pmix-ns",
                                 "OMPI_MCA_ess_base_jobid=777", "TORCHELASTIC_RUN_ID=te-run");
    check_key("--rendezvous-id first", all, "my-run", "my-run");
    check_key("an empty flag is no flag", all, "", "123.4");
    check_key("SLURM_JOB_ID.SLURM_STEP_ID next", all, NULL, "123.4");
    check_key("SLURM_JOB_ID without a step", ENV("SLURM_JOB_ID=123", "PMIX_NAMESPACE=pmix-ns"),
              NULL, "123");
    check_key("PMIX_NAMESPACE next", ENV("PMIX_NAMESPACE=pmix-ns", "OMPI_MCA_ess_base_jobid=777",
              "TORCHELASTIC_RUN_ID=te-run"), NULL, "pmix-ns");
    check_key("OMPI_MCA_ess_base_jobid next", ENV("OMPI_MCA_ess_base_jobid=777",
              "TORCHELASTIC_RUN_ID=te-run", "SLURM_JOB_ID="), NULL, "777");
    check_key("TORCHELASTIC_RUN_ID last", ENV("TORCHELASTIC_RUN_ID=te-run"), NULL, "te-run");

    char key[RENDEZVOUS_MAX_KEY + 1], err[ERR_LEN] = "";
    set_env(ENV("UNRELATED=1"));
    EXPECT(rendezvous_run_key(key, sizeof key, NULL, err) == -1 &&
           contains(err, "pass --rendezvous-id"), "no key anywhere: %s", err);
    char longer[RENDEZVOUS_MAX_KEY + 2];
    memset(longer, 'k', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    EXPECT(rendezvous_run_key(key, sizeof key, longer, err) == -1 &&
           contains(err, "--rendezvous-id") && contains(err, "at most 127"),
           "a 128-byte key refused: %s", err);
    set_env(ENV("SLURM_JOB_ID=123", "SLURM_STEP_ID=4"));
    EXPECT(rendezvous_run_key(key, 4, NULL, err) == -1 && contains(err, "'123.4'"),
           "a key longer than the buffer refused: %s", err);
}

int main(int argc, char** argv) {
    const char* only = NULL;
    if (argc == 3 && strcmp(argv[1], "--case") == 0)
        only = argv[2];
    else if (argc != 1) {
        fprintf(stderr, "usage: %s [--case file|tcp|launch|run-key|args]\n", argv[0]);
        return 2;
    }
    static const struct {
        const char* name;
        void (*run)(void);
    } cases[] = {{"file", case_file}, {"tcp", case_tcp}, {"launch", case_launch},
                 {"run-key", case_run_key}, {"args", case_args}};
    int ran = 0;
    test_make_tmpdir(tmpdir, sizeof tmpdir, "rendezvous");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (only && strcmp(only, cases[i].name) != 0) continue;
        cases[i].run();
        ran++;
    }
    remove_tmpdir();
    if (!ran) {
        fprintf(stderr, "test_rendezvous: --case '%s': expected file, tcp, launch, run-key or "
                "args\n", only);
        return 2;
    }
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
