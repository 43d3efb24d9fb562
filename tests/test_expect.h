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

// A fresh directory BUILD/tmp/NAME.XXXXXX for a test's files, where BUILD is the build directory
// whose programs the suites run (the environment's BUILD, as tests/run_suites.sh exports it;
// default "build"). Writes its path into dir[size].
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
static inline void test_make_tmpdir(char* dir, size_t size, const char* name) {
    const char* build = getenv("BUILD");
    if (!build || !*build) build = "build";
    // BUILD, BUILD/tmp (either may exist already), then the directory itself.
    static const char* const steps[] = {"%s", "%s/tmp", "%s/tmp/%s.XXXXXX"};
    for (int i = 0; i < 3; i++) {
        int n = snprintf(dir, size, steps[i], build, name);
        if (n < 0 || (size_t)n >= size) setup_fail("BUILD=%s: path too long for %s", build, name);
        int made = i < 2 ? mkdir(dir, 0755) == 0 || errno == EEXIST : mkdtemp(dir) != NULL;
        if (!made) setup_fail("cannot create %s: %s", dir, strerror(errno));
    }
}
