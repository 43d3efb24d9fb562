#include "checkpoints/checkpoint_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/atomic_file.h"

void checkpoint_model_path(const char* dir, int step, char* out, size_t n) {
    snprintf(out, n, "%s/model_%08d.bin", dir, step);
}

void checkpoint_state_path(const char* dir, int step, int rank, char* out, size_t n) {
    snprintf(out, n, "%s/state_%08d_%05d.bin", dir, step, rank);
}

void checkpoint_done_path(const char* dir, int step, char* out, size_t n) {
    snprintf(out, n, "%s/DONE_%08d", dir, step);
}

int checkpoint_make_dir(const char* dir, char* err, size_t errlen) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char* p = path + 1;; p++) {
        const char c = *p;
        if (c == '/' || c == 0) {
            *p = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST) {
                snprintf(err, errlen, "%s: cannot create directory: %s", path, strerror(errno));
                return -1;
            }
            *p = c;
        }
        if (!c) break;
    }
    return 0;
}

int checkpoint_mark_done(const char* dir, int step, char* err, size_t errlen) {
    char path[4096];
    checkpoint_done_path(dir, step, path, sizeof path);
    AtomicFile af;
    if (atomic_open(&af, path, err, errlen) != 0) return -1;
    char text[32];
    const int n = snprintf(text, sizeof text, "%d\n", step);
    if (atomic_write(&af, text, (size_t)n, err, errlen) != 0) return -1;
    return atomic_commit(&af, err, errlen);
}

static int cmp_desc(const void* a, const void* b) {
    const int x = *(const int*)a, y = *(const int*)b;
    return (x < y) - (x > y);
}

// Every step number that has a file with the given prefix ("DONE_", "model_", "state_").
static int steps_with_prefix(const char* dir, const char* prefix, int* steps, int max) {
    DIR* d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    const size_t plen = strlen(prefix);
    for (struct dirent* e; (e = readdir(d)) && n < max;) {
        if (strncmp(e->d_name, prefix, plen) != 0) continue;
        const char* s = e->d_name + plen;
        int digits = 0;
        while (s[digits] >= '0' && s[digits] <= '9') digits++;
        if (digits != 8) continue;
        if (strcmp(prefix, "DONE_") == 0 && s[digits] != 0) continue;   // not a temp file
        int step = atoi(s), seen = 0;
        for (int i = 0; i < n; i++) seen |= steps[i] == step;
        if (!seen) steps[n++] = step;
    }
    closedir(d);
    qsort(steps, (size_t)n, sizeof(int), cmp_desc);
    return n;
}

int checkpoint_complete_steps(const char* dir, int* steps, int max) {
    return steps_with_prefix(dir, "DONE_", steps, max);
}

void checkpoint_remove_step(const char* dir, int step) {
    char path[4096];
    checkpoint_done_path(dir, step, path, sizeof path);
    unlink(path);
    DIR* d = opendir(dir);
    if (!d) return;
    char prefixes[3][32];
    snprintf(prefixes[0], sizeof prefixes[0], "DONE_%08d.", step);
    snprintf(prefixes[1], sizeof prefixes[1], "model_%08d.", step);
    snprintf(prefixes[2], sizeof prefixes[2], "state_%08d_", step);
    for (struct dirent* e; (e = readdir(d));) {
        for (int k = 0; k < 3; k++) {
            if (strncmp(e->d_name, prefixes[k], strlen(prefixes[k])) != 0) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

void checkpoint_prune(const char* dir, int keep_last, int keep_every) {
    enum { MAX = 65536 };
    int* done = malloc(sizeof(int) * MAX);
    int* any = malloc(sizeof(int) * MAX);
    if (!done || !any) {
        free(done);
        free(any);
        return;   // pruning is housekeeping: skipping it loses nothing
    }
    const int ndone = checkpoint_complete_steps(dir, done, MAX);
    for (int i = keep_last; i < ndone; i++) {
        if (keep_every > 0 && done[i] % keep_every == 0) continue;
        checkpoint_remove_step(dir, done[i]);
    }
    // Leftovers of checkpoints that never completed, older than the newest complete one.
    const char* prefixes[] = {"state_", "model_"};
    for (int p = 0; p < 2; p++) {
        const int nany = steps_with_prefix(dir, prefixes[p], any, MAX);
        for (int i = 0; i < nany; i++) {
            int complete = 0;
            for (int j = 0; j < ndone; j++) complete |= done[j] == any[i];
            if (!complete && ndone > 0 && any[i] < done[0]) checkpoint_remove_step(dir, any[i]);
        }
    }
    free(done);
    free(any);
}
