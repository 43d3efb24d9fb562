// What every fuzz target (tests/fuzz/fuzz_*.c) shares: the readers take paths, so an input is
// written to a file in a scratch directory this process owns, and a few targets cut one input
// into several parts (argv words, two vocabulary files) at NUL bytes.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Writes size bytes to NAME in the scratch directory (created on first use, removed at exit)
// and returns its path, valid until the next call. A fatal error (fail_msg) from here on
// aborts, so a reader that ends the process on bad input instead of returning -1 is a finding.
const char* fuzz_file(const char* name, const uint8_t* data, size_t size);
// The scratch directory itself (created on first use).
const char* fuzz_dir(void);

// Reads a whole file (malloc'd, caller frees; *size bytes), or returns NULL when it cannot.
uint8_t* fuzz_read(const char* path, size_t* size);

// Cuts data at NUL bytes into at most max_parts parts (the last part keeps any further NULs).
// part[i] points into data, len[i] is its length; returns the number of parts (>= 1).
size_t fuzz_split(const uint8_t* data, size_t size, size_t max_parts, const uint8_t** part,
                  size_t* len);

// Ends the process with "fuzz: <what>" on stderr when a reader broke its own contract (e.g.
// accepted a file, then read back something else): a finding like a crash.
void fuzz_expect(int ok, const char* what);
// A reader's failure message must be one non-empty line (the readers' contract, comm/fail.h).
void fuzz_expect_error_line(const char* err);
