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
