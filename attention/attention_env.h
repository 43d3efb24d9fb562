// The attention launchers' settings from the environment (to time and test the kernels' forms):
// the parsers every launcher file uses, and the one setting both Hopper launchers read.
#pragma once
#include "comm/fail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A positive integer from the environment variable `name`, or fallback where it is unset or empty.
static inline long env_positive(const char* name, long fallback) {
    const char* env = getenv(name);
    if (!env || !*env) return fallback;
    char* end = NULL;
    errno = 0;
    const long v = strtol(env, &end, 10);
    CHECK(errno == 0 && *end == '\0' && v >= 1, "set it to a positive integer, or unset it",
          "%s: expected an integer >= 1, found '%s'", name, env);
    return v;
}

// A two-way setting in the environment (a launcher choice to time on a GPU): 0 when unset, empty or
// off, 1 when on, an error naming the variable otherwise.
static inline int env_switch(const char* name, const char* off, const char* on) {
    const char* env = getenv(name);
    if (!env || !*env || !strcmp(env, off)) return 0;
    char hint[96];
    snprintf(hint, sizeof hint, "set it to %s or %s, or unset it", off, on);
    CHECK(!strcmp(env, on), hint, "%s: expected %s or %s, found '%s'", name, off, on, env);
    return 1;
}

// The Hopper kernels' GEMMs over a head's columns at HS 80 (the forward's P V, the backward's dV and
// dK): one wgmma per 64-column panel, the second padded (padded, the default), or one m64n80k16 over
// the 80 columns (exact): ATTENTION_HOPPER_HS80=padded|exact. Other head sizes are whole panels.
static inline bool hopper_hs80_exact(void) { return env_switch("ATTENTION_HOPPER_HS80", "padded", "exact"); }
