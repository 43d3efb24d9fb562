#include "train/run_log.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "comm/fail.h"

int run_log_open(RunLog* log, const char* path, char* err, size_t errlen) {
    snprintf(log->path, sizeof log->path, "%s", path);
    log->jsonl = fopen(path, "a");
    if (!log->jsonl) {
        snprintf(err, errlen, "%s: cannot open log for appending: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void write_failed(const RunLog* log, int error) {
    fail_msg("--log %s: writing the log failed: %s (disk full, or the file system went away?)",
             log->path, strerror(error ? error : EIO));
}

void run_log_close(RunLog* log) {
    if (!log->jsonl) return;
    FILE* f = log->jsonl;
    log->jsonl = NULL;
    if (fclose(f) != 0) write_failed(log, errno);
}

void run_log_json(RunLog* log, const char* fmt, ...) {
    if (!log->jsonl) return;
    va_list ap;
    va_start(ap, fmt);
    errno = 0;
    const int n = vfprintf(log->jsonl, fmt, ap);
    va_end(ap);
    if (n < 0 || fputc('\n', log->jsonl) == EOF || fflush(log->jsonl) != 0 || ferror(log->jsonl)) {
        const int error = errno;
        FILE* f = log->jsonl;
        log->jsonl = NULL;   // the failure path must not write again
        fclose(f);
        write_failed(log, error);
    }
}

// Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not one.
static size_t utf8_len(const unsigned char* p, size_t n) {
    size_t len = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3 : (p[0] >> 3) == 30 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    return len;
}

void json_escape(const unsigned char* text, size_t n, char* out, size_t outlen) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 8 < outlen;) {
        const unsigned char c = text[i];
        if (c == '"' || c == '\\') {
            out[k++] = '\\';
            out[k++] = (char)c;
            i++;
        } else if (c == '\n') {
            k += (size_t)snprintf(out + k, outlen - k, "\\n");
            i++;
        } else if (c < 0x20) {
            k += (size_t)snprintf(out + k, outlen - k, "\\u%04x", c);
            i++;
        } else {
            const size_t len = utf8_len(text + i, n - i);
            if (len == 0) {
                k += (size_t)snprintf(out + k, outlen - k, "\\u%04x", c);
                i++;
            } else {
                memcpy(out + k, text + i, len);
                k += len;
                i += len;
            }
        }
    }
    out[k] = 0;
}
