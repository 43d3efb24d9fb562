// The trainer's command line (train/options.c). Input: the arguments after the program name,
// separated by NUL bytes. Accepted options keep every value in its range and choice list, and
// the printed and JSON configurations stay within their buffers.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_file.h"
#include "train/options.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

enum { MAX_ARGS = 64 };

static void ignore_line(const char* line) { (void)line; }

// A value of a choice option must be one whole choice, never a part or a run of them.
static void expect_choice(const char* value, const char* choices) {
    const size_t n = strlen(value);
    for (const char* c = choices; c;) {
        const char* bar = strchr(c, '|');
        const size_t k = bar ? (size_t)(bar - c) : strlen(c);
        if (k == n && memcmp(c, value, n) == 0) return;
        c = bar ? bar + 1 : NULL;
    }
    fprintf(stderr, "fuzz: '%s' accepted, expected one of %s\n", value, choices);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const uint8_t* part[MAX_ARGS];
    size_t len[MAX_ARGS];
    const size_t nparts = fuzz_split(data, size, MAX_ARGS - 1, part, len);
    char* argv[MAX_ARGS + 1];
    argv[0] = strdup("train_gpt");
    for (size_t i = 0; i < nparts; i++) {
        argv[i + 1] = malloc(len[i] + 1);   // each word its own allocation: over-reads show
        memcpy(argv[i + 1], part[i], len[i]);
        argv[i + 1][len[i]] = 0;
    }
    const int argc = (int)nparts + 1;
    argv[argc] = NULL;
    char** words = malloc((size_t)argc * sizeof *words);   // getopt_long permutes argv
    memcpy(words, argv, (size_t)argc * sizeof *words);
    TrainOptions o;
    // report: the help text and error lines go to stdout / stderr (make fuzz closes both).
    if (train_options_parse(&o, argc, argv, 1) == 0) {
        expect_choice(o.attention, "2d|2d-overlap|ring|striped|zigzag|ulysses|usp");
        expect_choice(o.mesh, "manual|auto");
        expect_choice(o.comm, "auto|mpi|nccl|mpi-staged");
        expect_choice(o.on_nan, "stop|skip");
        fuzz_expect(o.batch >= 1 && o.seq_len >= 1 && o.steps >= 1 && o.dp >= 1 && o.pq >= 1 &&
                    o.pkv >= 1, "a size option below 1 accepted");
        train_options_print(&o, ignore_line);
        static const size_t caps[] = {1, 2, 3, 64, 1024, 8192};   // "{}" needs 3
        for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
            char* json = malloc(caps[i]);   // exactly that many bytes: a write past them shows
            train_options_json(&o, json, caps[i]);
            fuzz_expect(caps[i] < 3 ? json[0] == 0 : json[0] == '{' && strlen(json) < caps[i],
                        "train_options_json wrote past its buffer or no object");
            free(json);
        }
    }
    // Whatever the input did, it leaves no parser state behind for the next command line.
    char* plain[] = {"train_gpt", "--steps", "7", NULL};
    fuzz_expect(train_options_parse(&o, 3, plain, 0) == 0 && o.steps == 7,
                "a parse after this input fails: the parser kept state from it");
    for (int i = 0; i < argc; i++) free(words[i]);
    free(words);
    return 0;
}
