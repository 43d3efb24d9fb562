// A whole small input file read into memory (data/whole_file.h).
#include "data/whole_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "comm/fail.h"

int whole_file_read(const char* path, size_t max_bytes, const char* what, uint8_t** data,
                    size_t* len, char* err, size_t errlen) {
    FILE* f = fopen(path, "rb");
    if (!f) return set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        fclose(f);
        return set_err(err, errlen, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return set_err(err, errlen, "%s: file type: expected a regular file, found %s", path,
                       S_ISDIR(st.st_mode) ? "a directory" : "a special file");
    }
    if ((unsigned long long)st.st_size > max_bytes) {
        fclose(f);
        return set_err(err, errlen, "%s: file size: expected at most %zu bytes for a %s, found "
                       "%lld", path, max_bytes, what, (long long)st.st_size);
    }
    size_t n = (size_t)st.st_size;
    uint8_t* buf = xmalloc(n + 1, what);
    size_t got = fread(buf, 1, n, f);
    int read_error = ferror(f);
    fclose(f);
    if (got != n || read_error) {
        free(buf);
        return set_err(err, errlen, "%s: cannot read %zu bytes (got %zu)", path, n, got);
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}
