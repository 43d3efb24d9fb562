// Fatal-error reporting shared by every module. A failure prints where it happened, what was
// being done and a hint, then ends the process; under MPI the registered abort hook takes the
// whole job down so no other rank is left waiting in a collective.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Length of the message buffers that readers fill on bad input ("file: field: expected, found").
#define ERR_LEN 512

// Formats a one-line message into err (when err is non-NULL) and returns -1: the usual way a
// reader reports bad input, `return set_err(err, errlen, "%s: magic: expected ...", path);`.
int set_err(char* err, size_t errlen, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// Where a reader of a line-oriented file stands, for its messages ("PATH:LINE: ...").
typedef struct {
    const char* path;
    int line;
    char* err;
    size_t errlen;
} ReadWhere;

typedef void (*FailHook)(int exit_code);

// Installs the function that ends the job (e.g. one that calls MPI_Abort); NULL restores exit().
void fail_set_hook(FailHook hook);
// Prefix for every fatal message (e.g. "rank 3"); NULL or "" for none.
void fail_set_prefix(const char* prefix);

// Prints "error: <message>" (with the prefix) and ends the job. Never returns.
void fail_msg(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
// Prints "error: file:line: <message> (hint: ...)" and ends the job. Never returns.
void fail_at(const char* file, int line, const char* hint, const char* fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

#define FAIL(hint, ...) fail_at(__FILE__, __LINE__, hint, __VA_ARGS__)
// Checks a condition that should hold unless a library call or the environment failed.
#define CHECK(cond, hint, ...) do { if (!(cond)) FAIL(hint, __VA_ARGS__); } while (0)

// Checked allocation: names what was being allocated and how much when it fails. The whole 2 MiB
// pages inside a block are offered to transparent huge pages (advise_huge_pages).
void* xmalloc_at(size_t bytes, const char* what, const char* file, int line);
void* xcalloc_at(size_t count, size_t size, const char* what, const char* file, int line);
#define xmalloc(bytes, what) xmalloc_at((bytes), (what), __FILE__, __LINE__)
#define xcalloc(count, size, what) xcalloc_at((count), (size), (what), __FILE__, __LINE__)
// Offers the whole 2 MiB pages inside [p, p + bytes) to transparent huge pages (madvise; a hint
// that changes no contents, and nothing where the kernel has no THP).
void advise_huge_pages(void* p, size_t bytes);

#ifdef __cplusplus
}
#endif
