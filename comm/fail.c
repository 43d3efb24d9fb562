#include "comm/fail.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static FailHook fail_hook;
static char fail_prefix[64];

int set_err(char* err, size_t errlen, const char* fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void fail_set_hook(FailHook hook) { fail_hook = hook; }

void fail_set_prefix(const char* prefix) {
    snprintf(fail_prefix, sizeof fail_prefix, "%s", prefix ? prefix : "");
}

static void __attribute__((noreturn)) fail_end(void) {
    fflush(stdout);
    fflush(stderr);
    if (fail_hook) fail_hook(1);
    exit(1);
}

// The whole line is formatted first and written with one call: the ranks of a job share stderr,
// and a line written in pieces interleaves with another rank's.
static void __attribute__((noreturn)) fail_line(const char* file, int line, const char* hint,
                                                const char* fmt, va_list ap) {
    char text[2048];
    size_t n = (size_t)snprintf(text, sizeof text, "error: %s%s", fail_prefix,
                                fail_prefix[0] ? ": " : "");
    if (file && n < sizeof text) n += (size_t)snprintf(text + n, sizeof text - n, "%s:%d: ", file, line);
    if (n < sizeof text) n += (size_t)vsnprintf(text + n, sizeof text - n, fmt, ap);
    if (hint && hint[0] && n < sizeof text)
        n += (size_t)snprintf(text + n, sizeof text - n, " (hint: %s)", hint);
    if (n >= sizeof text - 1) n = sizeof text - 2;
    text[n] = '\n';
    text[n + 1] = '\0';
    fputs(text, stderr);
    fail_end();
}

void fail_msg(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fail_line(NULL, 0, NULL, fmt, ap);
}

void fail_at(const char* file, int line, const char* hint, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fail_line(file, line, hint, fmt, ap);
}

// A hint: where transparent huge pages are set to madvise, as on many systems, only advised memory
// gets them. A large model's parameters, gradients, moments and activations are otherwise faulted
// in 4 KiB at a time: two steps of the CPU trainer at gpt3-125m (B = 1, T = 256) took 6.45 s each
// without it and 4.43 s with it on a paravirtualised machine, where each fault is expensive.
void advise_huge_pages(void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    const uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), b = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (b > a) (void)madvise((void*)a, b - a, MADV_HUGEPAGE);   // EINVAL where THP is not built in
#else
    (void)p, (void)bytes;
#endif
}

void* xmalloc_at(size_t bytes, const char* what, const char* file, int line) {
    void* p = malloc(bytes ? bytes : 1);
    if (!p) fail_at(file, line, "reduce the batch size, sequence length or model size",
                    "out of memory allocating %zu bytes for %s", bytes, what);
    advise_huge_pages(p, bytes);
    return p;
}

void* xcalloc_at(size_t count, size_t size, const char* what, const char* file, int line) {
    void* p = calloc(count ? count : 1, size ? size : 1);
    if (!p) fail_at(file, line, "reduce the batch size, sequence length or model size",
                    "out of memory allocating %zu x %zu bytes for %s", count, size, what);
    advise_huge_pages(p, count * size);
    return p;
}
