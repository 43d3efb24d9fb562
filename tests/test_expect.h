// The check macro of the C unit tests: prints "  ok    what" or "  FAIL  what" per check and
// counts the failures in the including file's `failures` (which main returns as the status).
#pragma once
#include <stdio.h>

static int failures;

#define EXPECT(cond, ...)            \
    do {                             \
        if (cond) {                  \
            printf("  ok    ");      \
        } else {                     \
            printf("  FAIL  ");      \
            failures++;              \
        }                            \
        printf(__VA_ARGS__);         \
        printf("\n");                \
    } while (0)

// A test that cannot set itself up (a temporary directory, a child process) says so and exits 2.
#include <stdarg.h>
#include <stdlib.h>
static inline void __attribute__((noreturn, format(printf, 1, 2))) setup_fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test setup: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}
