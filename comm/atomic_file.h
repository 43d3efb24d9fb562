// Atomic file writing: data goes to a temporary file next to the target, which is flushed,
// fsync'ed and renamed over the target (and the directory fsync'ed), so a crash at any moment
// leaves either the old complete file or the new complete file, never a torn one.
#pragma once
#include <stdio.h>
#include <stddef.h>

typedef struct {
    FILE* f;
    char path[4096];
    char tmp[4096];
} AtomicFile;

// Each returns 0, or -1 with a one-line message in err (and the temporary file removed; only when
// atomic_commit fails to sync the directory after the rename is the new file in place).
int atomic_open(AtomicFile* af, const char* path, char* err, size_t errlen);
int atomic_write(AtomicFile* af, const void* data, size_t bytes, char* err, size_t errlen);
int atomic_commit(AtomicFile* af, char* err, size_t errlen);
// Abandons the write: closes and removes the temporary file; the target is untouched.
void atomic_abort(AtomicFile* af);
