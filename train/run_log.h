// The trainer's outputs for people and machines: progress lines on stdout and one JSON object
// per line (JSONL) in the log file. Only rank 0 logs.
#pragma once
#include <stdio.h>

typedef struct {
    FILE* jsonl;   // NULL: no file
    char path[4096];
} RunLog;

// Opens path for appending (a resumed run continues its log). Returns 0, or -1 with err set.
int run_log_open(RunLog* log, const char* path, char* err, size_t errlen);
// Closes the file; a failed close (data that never reached the disk) ends the job like a failed
// write.
void run_log_close(RunLog* log);
// Writes one line (a complete JSON object, without the newline) and flushes it. A write or flush
// that fails (disk full, file system gone) ends the job with an error naming the file: a run
// whose log silently stops is worse than a run that stops.
void run_log_json(RunLog* log, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Escapes bytes as a JSON string body (no quotes) into out; invalid UTF-8 bytes become \u00XX.
void json_escape(const unsigned char* text, size_t n, char* out, size_t outlen);
