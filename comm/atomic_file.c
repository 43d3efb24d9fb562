#include "comm/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int atomic_open(AtomicFile* af, const char* path, char* err, size_t errlen) {
    memset(af, 0, sizeof *af);
    if (strlen(path) + 16 >= sizeof af->path) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%d", path, (int)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        snprintf(err, errlen, "%s: cannot create temporary file %s: %s", path, af->tmp,
                 strerror(errno));
        return -1;
    }
    return 0;
}

int atomic_write(AtomicFile* af, const void* data, size_t bytes, char* err, size_t errlen) {
    if (bytes && fwrite(data, 1, bytes, af->f) != bytes) {
        snprintf(err, errlen, "%s: write failed: %s (hint: is the disk full?)", af->path,
                 strerror(errno));
        atomic_abort(af);
        return -1;
    }
    return 0;
}

int atomic_commit(AtomicFile* af, char* err, size_t errlen) {
    if (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0) {
        snprintf(err, errlen, "%s: flush/fsync failed: %s", af->path, strerror(errno));
        atomic_abort(af);
        return -1;
    }
    if (fclose(af->f) != 0) {
        af->f = NULL;
        snprintf(err, errlen, "%s: close failed: %s", af->path, strerror(errno));
        atomic_abort(af);
        return -1;
    }
    af->f = NULL;
    if (rename(af->tmp, af->path) != 0) {
        snprintf(err, errlen, "%s: rename from %s failed: %s", af->path, af->tmp,
                 strerror(errno));
        atomic_abort(af);
        return -1;
    }
    // Make the rename itself durable (a file system that cannot fsync a directory says EINVAL).
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", af->path);
    const int fd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL)) {
        snprintf(err, errlen, "%s: written, but its directory could not be synced: %s", af->path,
                 strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

void atomic_abort(AtomicFile* af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    if (af->tmp[0]) unlink(af->tmp);
}
