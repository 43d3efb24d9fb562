#include "comm/rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/atomic_file.h"
#include "comm/fail.h"

#define FORMAT_VERSION 1
#define KEY_FIELD (RENDEZVOUS_MAX_KEY + 1)
#define FILE_POLL_S 0.025   // how often the other ranks look at the file
#define TCP_RETRY_S 0.05    // how often they try to reach rank 0
#define MAX_PENDING 256     // connections rank 0 reads hellos from at once; more retry
#define MAX_REFUSAL 400     // the text of an error reply

// Every integer is stored little-endian, so ranks of any byte order agree.
static void put_le(unsigned char* p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_le(const unsigned char* p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static void put_u32(unsigned char* p, uint32_t v) { put_le(p, v, 4); }
static uint32_t get_u32(const unsigned char* p) { return (uint32_t)get_le(p, 4); }

static uint64_t fnv1a64(const unsigned char* p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

// The run key in its fixed NUL-padded field; a field without a NUL is no key.
static void put_key(unsigned char* field, const char* key) {
    memset(field, 0, KEY_FIELD);
    memcpy(field, key, strlen(key));
}
static const char* get_key(const unsigned char* field) {
    return memchr(field, '\0', KEY_FIELD) ? (const char*)field : NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Sleeps min(step, time left); a signal only makes the next look come sooner.
static void nap_until(double deadline, double step) {
    double left = deadline - now_s();
    if (left > step) left = step;
    if (left <= 0) return;
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    nanosleep(&ts, NULL);
}

// Milliseconds left before the deadline, for poll(), rounded up.
static int ms_left(double deadline) {
    const double ms = ceil((deadline - now_s()) * 1000.0);
    return ms <= 0 ? 0 : ms > 1e9 ? 1000000000 : (int)ms;
}

// --- spec ----------------------------------------------------------------------------------------

typedef struct {
    int tcp;            // 0: file:PATH, 1: tcp:HOST:PORT
    char path[4096];
    char host[256];
    char port[8];
} Spec;

static int parse_spec(const char* spec, Spec* s, char* err) {
    memset(s, 0, sizeof *s);
    const char* forms = "expected file:PATH or tcp:HOST:PORT";
    if (!spec) return set_err(err, ERR_LEN, "rendezvous spec missing: %s", forms);
    if (strncmp(spec, "file:", 5) == 0) {
        const char* path = spec + 5;
        if (!path[0] || strlen(path) + 32 >= sizeof s->path)
            return set_err(err, ERR_LEN, "rendezvous spec '%s': %s with PATH of 1 to %zu bytes",
                           spec, forms, sizeof s->path - 33);
        snprintf(s->path, sizeof s->path, "%s", path);
        return 0;
    }
    if (strncmp(spec, "tcp:", 4) != 0)
        return set_err(err, ERR_LEN, "rendezvous spec '%s': %s", spec, forms);
    s->tcp = 1;
    const char* host = spec + 4;
    const char* colon = strrchr(host, ':');
    size_t host_len = colon ? (size_t)(colon - host) : 0;
    if (host[0] == '[' && host_len >= 2 && host[host_len - 1] == ']') {  // [IPv6]:PORT
        host++;
        host_len -= 2;
    } else if (host_len && memchr(host, ':', host_len)) {
        host_len = 0;  // a bare IPv6 address: the port cannot be told apart
    }
    const char* port = colon ? colon + 1 : "";
    const size_t port_len = strlen(port);
    char* end = NULL;
    const long port_num = port_len ? strtol(port, &end, 10) : 0;
    if (!host_len || host_len >= sizeof s->host || !port_len || port_len >= sizeof s->port ||
        port[0] < '0' || port[0] > '9' || *end || port_num < 1 || port_num > 65535)
        return set_err(err, ERR_LEN, "rendezvous spec '%s': expected tcp:HOST:PORT (or "
                       "tcp:[IPv6]:PORT) with PORT in 1..65535", spec);
    memcpy(s->host, host, host_len);
    memcpy(s->port, port, port_len);
    return 0;
}

// --- file:PATH -----------------------------------------------------------------------------------
// Layout: magic[8] | u32 version | u32 world size | key[128] | u32 blob length | blob |
// u64 FNV-1a 64 of everything before it.

static const char FILE_MAGIC[8] = {'R', 'D', 'Z', 'V', 'F', 'I', 'L', 'E'};
#define FILE_HEADER (8 + 4 + 4 + KEY_FIELD + 4)
#define FILE_MAX (FILE_HEADER + RENDEZVOUS_MAX_BLOB + 8)

static int file_publish(const Spec* s, const char* key, int world_size, const void* blob,
                        size_t len, char* err) {
    unsigned char buf[FILE_MAX];
    memcpy(buf, FILE_MAGIC, 8);
    put_u32(buf + 8, FORMAT_VERSION);
    put_u32(buf + 12, (uint32_t)world_size);
    put_key(buf + 16, key);
    put_u32(buf + 16 + KEY_FIELD, (uint32_t)len);
    if (len) memcpy(buf + FILE_HEADER, blob, len);
    put_le(buf + FILE_HEADER + len, fnv1a64(buf, FILE_HEADER + len), 8);
    AtomicFile af;
    char why[ERR_LEN];
    if (atomic_open(&af, s->path, why, sizeof why) != 0 ||
        atomic_write(&af, buf, FILE_HEADER + len + 8, why, sizeof why) != 0 ||
        atomic_commit(&af, why, sizeof why) != 0)
        return set_err(err, ERR_LEN, "rendezvous file %s", why);
    return 0;
}

// Reads the whole file (at most FILE_MAX + 1 bytes, to see one too long). Returns the byte
// count, or -1 with errno. O_NONBLOCK: a FIFO at PATH reads as empty instead of blocking.
static long read_small_file(const char* path, unsigned char* buf) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    size_t got = 0;
    while (got < FILE_MAX + 1) {
        const ssize_t k = read(fd, buf + got, FILE_MAX + 1 - got);
        if (k == 0) break;
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            const int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        got += (size_t)k;
    }
    close(fd);  // read-only: nothing a failed close could lose
    return (long)got;
}

// Looks at PATH once. Returns 1 when it holds this run's blob (copied into blob); else 0, with
// the message to give if nothing better comes before the timeout in `seen` (ERR_LEN bytes).
static int file_try(const Spec* s, const char* key, int world_size, void* blob, size_t len,
                    double timeout_s, char* seen) {
    unsigned char buf[FILE_MAX + 1];
    const long n = read_small_file(s->path, buf);
    if (n < 0) {
        if (errno == ENOENT)
            set_err(seen, ERR_LEN, "rendezvous file %s: not found after %g s (rank 0 writes it; is "
                    "the path on a shared file system?)", s->path, timeout_s);
        else
            set_err(seen, ERR_LEN, "rendezvous file %s: cannot read it: %s (for %g s)", s->path,
                    strerror(errno), timeout_s);
        return 0;
    }
    char bad[128] = "";
    const size_t blob_len = n >= FILE_HEADER ? get_u32(buf + 16 + KEY_FIELD) : 0;
    if (n < FILE_HEADER + 8)
        snprintf(bad, sizeof bad, "%ld bytes, too short for the header", n);
    else if (memcmp(buf, FILE_MAGIC, 8) != 0)
        snprintf(bad, sizeof bad, "no rendezvous magic: another program's file?");
    else if (get_u32(buf + 8) != FORMAT_VERSION)
        snprintf(bad, sizeof bad, "format version %u, expected %d", get_u32(buf + 8),
                 FORMAT_VERSION);
    else if (blob_len > RENDEZVOUS_MAX_BLOB || (size_t)n != FILE_HEADER + blob_len + 8)
        snprintf(bad, sizeof bad, "%ld bytes, its header says %zu", n, FILE_HEADER + blob_len + 8);
    else if (get_le(buf + FILE_HEADER + blob_len, 8) != fnv1a64(buf, FILE_HEADER + blob_len))
        snprintf(bad, sizeof bad, "checksum mismatch");
    else if (!get_key(buf + 16))
        snprintf(bad, sizeof bad, "run key field not terminated");
    const char* file_key = bad[0] ? NULL : get_key(buf + 16);
    const uint32_t file_world = bad[0] ? 0 : get_u32(buf + 12);
    if (bad[0])
        set_err(seen, ERR_LEN, "rendezvous file %s: malformed (%s) and not replaced within %g s",
                s->path, bad, timeout_s);
    else if (strcmp(file_key, key) != 0)
        set_err(seen, ERR_LEN, "rendezvous file %s: written by another run (run key '%s', "
                "expected '%s') and not replaced within %g s: a stale file from an earlier run?",
                s->path, file_key, key, timeout_s);
    else if (file_world != (uint32_t)world_size)
        set_err(seen, ERR_LEN, "rendezvous file %s: written for a world of %u ranks, expected %d, "
                "and not replaced within %g s: an earlier run with the same run key, or ranks "
                "started with different world sizes?", s->path, file_world, world_size, timeout_s);
    else if (blob_len != len)
        set_err(seen, ERR_LEN, "rendezvous file %s: holds a %zu-byte blob, expected %zu, and not "
                "replaced within %g s: ranks of different programs?", s->path, blob_len, len,
                timeout_s);
    else {
        if (len) memcpy(blob, buf + FILE_HEADER, len);
        return 1;
    }
    return 0;
}

static int file_receive(const Spec* s, const char* key, int world_size, void* blob, size_t len,
                        double timeout_s, char* err) {
    const double deadline = now_s() + timeout_s;
    char seen[ERR_LEN];
    for (;;) {
        if (file_try(s, key, world_size, blob, len, timeout_s, seen)) return 0;
        if (now_s() >= deadline) return set_err(err, ERR_LEN, "%s", seen);
        nap_until(deadline, FILE_POLL_S);
    }
}

// --- tcp:HOST:PORT -------------------------------------------------------------------------------
// Hello (rank -> rank 0): u32 magic | u32 version | u32 rank | u32 world size | key[128].
// Reply (rank 0 -> rank): u32 magic | u32 version | u32 status | u32 length | the blob (status
// REPLY_OK) or the reason of a refusal (REPLY_REFUSED).

#define HELLO_MAGIC 0x4c4c4548u  // "HELL"
#define REPLY_MAGIC 0x594c5052u  // "RPLY"
#define HELLO_SIZE (16 + KEY_FIELD)
#define REPLY_HEADER 16
enum { REPLY_OK = 0, REPLY_REFUSED = 1 };

// Waits for `events` on fd until the deadline: 1 ready, 0 timed out, -1 error (errno).
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        const int rc = poll(&p, 1, ms_left(deadline));
        if (rc > 0) return 1;
        if (rc == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

// Moves exactly n bytes over a non-blocking socket before the deadline, sending when `out`, else
// receiving: 0; -1 with errno (ETIMEDOUT at the deadline); -2 when the peer closed first.
// MSG_NOSIGNAL: a closed peer is an error, not a SIGPIPE.
static int transfer_all(int fd, unsigned char* p, size_t n, int out, double deadline) {
    while (n > 0) {
        const ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k == 0) {
            return -2;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            const int w = wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
            if (w <= 0) {
                if (w == 0) errno = ETIMEDOUT;
                return -1;
            }
        } else {
            return -1;
        }
    }
    return 0;
}

static int send_all(int fd, const void* data, size_t n, double deadline) {
    return transfer_all(fd, (unsigned char*)data, n, 1, deadline);  // only read when sending
}

static int recv_all(int fd, void* data, size_t n, double deadline) {
    return transfer_all(fd, data, n, 0, deadline);
}

static int send_reply(int fd, uint32_t status, const void* payload, size_t n, double deadline) {
    unsigned char head[REPLY_HEADER];
    put_u32(head, REPLY_MAGIC);
    put_u32(head + 4, FORMAT_VERSION);
    put_u32(head + 8, status);
    put_u32(head + 12, (uint32_t)n);
    if (send_all(fd, head, sizeof head, deadline) != 0) return -1;
    return n ? send_all(fd, payload, n, deadline) : 0;
}

static int tcp_listen(const Spec* s, int backlog, int* out, char* err) {
    const int any = strcmp(s->host, "*") == 0 || strcmp(s->host, "0.0.0.0") == 0;
    struct addrinfo hints = {.ai_family = any ? AF_INET : AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo* res = NULL;
    const int rc = getaddrinfo(any ? NULL : s->host, s->port, &hints, &res);
    if (rc != 0)
        return set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: rank 0 cannot resolve HOST '%s': %s",
                       s->host, s->port, s->host, gai_strerror(rc));
    int fd = -1, last = 0;
    for (const struct addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        const int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
            last = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: rank 0 cannot listen there: %s%s",
                       s->host, s->port, strerror(last),
                       last == EADDRINUSE ? " (another program or run holds the port: pick "
                                            "another PORT)"
                       : last == EADDRNOTAVAIL ? " (HOST is no address of this node: start rank 0 "
                                                 "on HOST, or use tcp:*:PORT there)"
                                               : "");
    *out = fd;
    return 0;
}

// A connection rank 0 accepted and reads a hello from.
typedef struct {
    int fd;
    size_t got;
    unsigned char hello[HELLO_SIZE];
} Pending;

// What rank 0 knows while it waits.
typedef struct {
    const char* key;
    int world_size;
    const void* blob;
    size_t len;
    double deadline;
    unsigned char* served;  // world_size flags
    int nserved;
    int refused;            // connections refused so far; the first reason is kept
    char first_refusal[MAX_REFUSAL];
} Server;

// Reads what has come of a hello. Returns 1 when it is complete, 0 when more is to come, -1 when
// the connection ended first.
static int read_hello_part(Pending* p) {
    for (;;) {
        const ssize_t k = recv(p->fd, p->hello + p->got, HELLO_SIZE - p->got, 0);
        if (k > 0) {
            p->got += (size_t)k;
            if (p->got == HELLO_SIZE) return 1;
        } else if (k < 0 && errno == EINTR) {
            continue;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            return -1;
        }
    }
}

// Answers a complete hello: the blob to a rank of this run not served yet, else a refusal whose
// reason the server keeps for its timeout message.
static void answer_hello(Server* sv, int fd, const unsigned char* hello) {
    const uint32_t rank = get_u32(hello + 8), world = get_u32(hello + 12);
    const char* key = get_key(hello + 16);
    char why[MAX_REFUSAL] = "";
    if (get_u32(hello) != HELLO_MAGIC || get_u32(hello + 4) != FORMAT_VERSION || !key)
        snprintf(why, sizeof why, "a connection sent no rendezvous hello (another program?)");
    else if (strcmp(key, sv->key) != 0)
        snprintf(why, sizeof why, "rank %u has run key '%.128s', rank 0 has '%.128s' (a rank of "
                 "another run?)", rank, key, sv->key);
    else if (world != (uint32_t)sv->world_size)
        snprintf(why, sizeof why, "rank %u says the world has %u ranks, rank 0 says %d", rank,
                 world, sv->world_size);
    else if (rank < 1 || rank >= world)
        snprintf(why, sizeof why, "rank %u is outside [1, %d)", rank, sv->world_size);
    else if (sv->served[rank])
        snprintf(why, sizeof why, "rank %u connected twice (two processes started with the same "
                 "rank?)", rank);
    if (why[0]) {
        send_reply(fd, REPLY_REFUSED, why, strlen(why), sv->deadline);  // best effort
        if (sv->refused++ == 0) snprintf(sv->first_refusal, sizeof sv->first_refusal, "%s", why);
        return;
    }
    // A rank whose reply failed is not served: it retries and is answered again.
    if (send_reply(fd, REPLY_OK, sv->blob, sv->len, sv->deadline) == 0) {
        sv->served[rank] = 1;
        sv->nserved++;
    }
}

static int server_timeout(const Spec* s, const Server* sv, double timeout_s, char* err) {
    char missing[160] = "";
    size_t used = 0;
    int listed = 0;
    for (int r = 1; r < sv->world_size && used + 16 < sizeof missing; r++) {
        if (sv->served[r]) continue;
        if (listed++ == 8) {
            used += (size_t)snprintf(missing + used, sizeof missing - used, ", ...");
            break;
        }
        used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d",
                                 listed > 1 ? ", " : "", r);
    }
    char refusals[MAX_REFUSAL + 64] = "";
    if (sv->refused)
        snprintf(refusals, sizeof refusals, "; refused %d connection%s, the first: %s", sv->refused,
                 sv->refused > 1 ? "s" : "", sv->first_refusal);
    return set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: rank 0 heard from %d of the %d other "
                   "ranks within %g s (missing: rank %s)%s", s->host, s->port, sv->nserved,
                   sv->world_size - 1, timeout_s, missing, refusals);
}

static int tcp_serve(const Spec* s, const char* key, int world_size, const void* blob, size_t len,
                     double timeout_s, char* err) {
    Server sv = {.key = key, .world_size = world_size, .blob = blob, .len = len,
                 .deadline = now_s() + timeout_s};
    const int cap = world_size - 1 < MAX_PENDING ? world_size - 1 : MAX_PENDING;
    int lfd = -1;
    if (tcp_listen(s, cap, &lfd, err) != 0) return -1;
    sv.served = calloc((size_t)world_size, 1);
    Pending* pending = calloc((size_t)cap, sizeof *pending);
    struct pollfd* pfd = calloc((size_t)cap + 1, sizeof *pfd);
    int npending = 0, rc = 0;
    if (!sv.served || !pending || !pfd)
        rc = set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: out of memory for %d ranks", s->host,
                     s->port, world_size);
    while (rc == 0 && sv.nserved < world_size - 1) {
        pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < npending; i++)
            pfd[i + 1] = (struct pollfd){.fd = pending[i].fd, .events = POLLIN};
        const int ready = poll(pfd, (nfds_t)npending + 1, ms_left(sv.deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) {
            rc = set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: poll failed: %s", s->host, s->port,
                         strerror(errno));
        } else if (ready == 0) {
            rc = server_timeout(s, &sv, timeout_s, err);
        }
        if (rc != 0) break;
        // From the end, so that moving the last connection into a freed slot skips none.
        for (int i = npending - 1; i >= 0; i--) {
            if (!pfd[i + 1].revents) continue;
            const int part = read_hello_part(&pending[i]);
            if (part == 0) continue;
            if (part == 1) answer_hello(&sv, pending[i].fd, pending[i].hello);
            close(pending[i].fd);
            pending[i] = pending[--npending];
        }
        if (!(pfd[0].revents & POLLIN)) continue;
        for (;;) {
            const int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) break;  // EAGAIN: none left; a failed connection: its rank retries
            if (npending == cap) {
                close(fd);  // full: the rank sees the connection close and retries
                continue;
            }
            pending[npending] = (Pending){.fd = fd};
            npending++;
        }
    }
    for (int i = 0; i < npending; i++) close(pending[i].fd);
    close(lfd);
    free(pfd);
    free(pending);
    free(sv.served);
    return rc;
}

// Connects to one of rank 0's addresses before the deadline. Returns the socket, or -1 with
// the reason in *why (an errno).
static int connect_any(const struct addrinfo* res, double deadline, int* why) {
    for (const struct addrinfo* ai = res; ai; ai = ai->ai_next) {
        const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                              ai->ai_protocol);
        if (fd < 0) {
            *why = errno;
            continue;
        }
        int so_error = 0;
        socklen_t so_len = sizeof so_error;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return fd;
        if (errno != EINPROGRESS) {
            *why = errno;
        } else {
            const int w = wait_fd(fd, POLLOUT, deadline);
            if (w > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &so_len) == 0 &&
                so_error == 0)
                return fd;
            *why = w == 0 ? ETIMEDOUT : w < 0 ? errno : so_error ? so_error : errno;
        }
        close(fd);
    }
    return -1;
}

// One hello and its answer on a connected socket. Returns 0 with the blob; -1 on a failure
// worth a retry (described in `last`); -2 on a final one (message in err).
static int ask_rank0(const Spec* s, int fd, const char* key, int rank, int world_size, void* blob,
                     size_t len, double deadline, char* last, size_t last_len, char* err) {
    unsigned char hello[HELLO_SIZE];
    put_u32(hello, HELLO_MAGIC);
    put_u32(hello + 4, FORMAT_VERSION);
    put_u32(hello + 8, (uint32_t)rank);
    put_u32(hello + 12, (uint32_t)world_size);
    put_key(hello + 16, key);
    if (send_all(fd, hello, sizeof hello, deadline) != 0) {
        snprintf(last, last_len, "sending the hello: %s", strerror(errno));
        return -1;
    }
    unsigned char head[REPLY_HEADER];
    int r = recv_all(fd, head, sizeof head, deadline);
    if (r != 0) {
        snprintf(last, last_len, "%s", r == -2 ? "rank 0 closed the connection before answering"
                                               : strerror(errno));
        return -1;
    }
    const uint32_t status = get_u32(head + 8), n = get_u32(head + 12);
    if (get_u32(head) != REPLY_MAGIC || get_u32(head + 4) != FORMAT_VERSION ||
        (status == REPLY_OK && n != len) || (status != REPLY_OK && status != REPLY_REFUSED) ||
        (status == REPLY_REFUSED && n >= MAX_REFUSAL)) {
        if (get_u32(head) == REPLY_MAGIC && status == REPLY_OK)
            set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: rank 0 sent a %u-byte blob, rank %d "
                    "expected %zu: ranks of different programs?", s->host, s->port, n, rank, len);
        else
            set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: the answer is no rendezvous reply: "
                    "another program on that port?", s->host, s->port);
        return -2;
    }
    char why[MAX_REFUSAL] = "";
    r = recv_all(fd, status == REPLY_OK ? blob : (void*)why, n, deadline);
    if (r != 0) {
        snprintf(last, last_len, "reading the answer: %s", r == -2 ? "rank 0 closed the connection"
                                                                   : strerror(errno));
        return -1;
    }
    if (status == REPLY_REFUSED) {
        set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: rank 0 refused rank %d: %s", s->host,
                s->port, rank, why);
        return -2;
    }
    return 0;
}

static int tcp_fetch(const Spec* s, const char* key, int rank, int world_size, void* blob,
                     size_t len, double timeout_s, char* err) {
    const double deadline = now_s() + timeout_s;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo* res = NULL;
    char last[256] = "no attempt";
    int rc = -1;
    for (;;) {
        if (!res) {
            const int g = getaddrinfo(s->host, s->port, &hints, &res);
            if (g != 0 && g != EAI_AGAIN)
                return set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: cannot resolve HOST '%s': %s",
                               s->host, s->port, s->host, gai_strerror(g));
            if (g != 0) {
                res = NULL;
                snprintf(last, sizeof last, "resolving HOST: %s", gai_strerror(g));
            }
        }
        if (res) {
            int why = 0;
            const int fd = connect_any(res, deadline, &why);
            if (fd < 0) {
                snprintf(last, sizeof last, "connecting: %s", strerror(why));
            } else {
                rc = ask_rank0(s, fd, key, rank, world_size, blob, len, deadline, last,
                               sizeof last, err);
                close(fd);
                if (rc != -1) break;
            }
        }
        if (now_s() >= deadline) {
            rc = set_err(err, ERR_LEN, "rendezvous tcp:%s:%s: rank %d got nothing from rank 0 "
                         "within %g s (last attempt: %s); is rank 0 running and listening there, "
                         "reachable from this node?", s->host, s->port, rank, timeout_s, last);
            break;
        }
        nap_until(deadline, TCP_RETRY_S);
    }
    if (res) freeaddrinfo(res);
    return rc == 0 ? 0 : -1;
}

// --- the two entry points ------------------------------------------------------------------------

int rendezvous_exchange(const char* spec, const char* run_key, int rank, int world_size,
                        void* blob, size_t len, double timeout_s, char* err) {
    Spec s;
    if (parse_spec(spec, &s, err) != 0) return -1;
    const size_t key_len = run_key ? strlen(run_key) : 0;
    if (key_len < 1 || key_len > RENDEZVOUS_MAX_KEY)
        return set_err(err, ERR_LEN, "rendezvous %s: run key of %zu bytes, expected 1 to %d",
                       spec, key_len, RENDEZVOUS_MAX_KEY);
    if (world_size < 1 || rank < 0 || rank >= world_size)
        return set_err(err, ERR_LEN, "rendezvous %s: rank %d outside a world of %d ranks", spec,
                       rank, world_size);
    if (len > RENDEZVOUS_MAX_BLOB || (len && !blob))
        return set_err(err, ERR_LEN, "rendezvous %s: a blob of %zu bytes, expected at most %d",
                       spec, len, RENDEZVOUS_MAX_BLOB);
    if (!(timeout_s > 0) || !isfinite(timeout_s))
        return set_err(err, ERR_LEN, "rendezvous %s: timeout %g s, expected a positive number of "
                       "seconds", spec, timeout_s);
    if (world_size == 1) return 0;
    if (s.tcp)
        return rank == 0 ? tcp_serve(&s, run_key, world_size, blob, len, timeout_s, err)
                         : tcp_fetch(&s, run_key, rank, world_size, blob, len, timeout_s, err);
    return rank == 0 ? file_publish(&s, run_key, world_size, blob, len, err)
                     : file_receive(&s, run_key, world_size, blob, len, timeout_s, err);
}

// A variable's value, or NULL when unset or empty.
static const char* env_nonempty(const char* name) {
    const char* v = getenv(name);
    return v && v[0] ? v : NULL;
}

int rendezvous_run_key(char* key, size_t n, const char* flag_value, char* err) {
    static const char* const job_ids[] = {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                                          "TORCHELASTIC_RUN_ID"};
    char found[RENDEZVOUS_MAX_KEY + 2];  // one more than a key may hold, to see one too long
    const char* from = NULL;
    if (flag_value && flag_value[0]) {
        from = "--rendezvous-id";
        snprintf(found, sizeof found, "%s", flag_value);
    } else if (env_nonempty("SLURM_JOB_ID")) {
        from = "SLURM_JOB_ID";
        const char* step = env_nonempty("SLURM_STEP_ID");
        snprintf(found, sizeof found, "%s%s%s", getenv("SLURM_JOB_ID"), step ? "." : "",
                 step ? step : "");
    } else {
        for (size_t i = 0; i < sizeof job_ids / sizeof job_ids[0] && !from; i++)
            if (env_nonempty(job_ids[i])) {
                from = job_ids[i];
                snprintf(found, sizeof found, "%s", getenv(job_ids[i]));
            }
    }
    if (!from)
        return set_err(err, ERR_LEN, "rendezvous: no run key: pass --rendezvous-id ID (a string "
                       "every rank of this run shares and no earlier run used), or start under "
                       "Slurm, PMIx, Open MPI or torchrun");
    const size_t len = strlen(found);
    if (len > RENDEZVOUS_MAX_KEY)
        return set_err(err, ERR_LEN, "rendezvous: run key from %s: more than %d bytes, expected "
                       "at most %d", from, RENDEZVOUS_MAX_KEY, RENDEZVOUS_MAX_KEY);
    if (len + 1 > n)
        return set_err(err, ERR_LEN, "rendezvous: run key '%s' from %s needs %zu bytes, the "
                       "buffer has %zu", found, from, len + 1, n);
    memcpy(key, found, len + 1);
    return 0;
}
