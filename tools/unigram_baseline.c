// The unigram baseline of a dataset: the cross-entropy (nats/token) on the validation tokens of
// a model that predicts every token from its training-set frequency (add-one smoothed). A
// language model that learns anything beyond token frequencies goes below it.
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"
#include "data/shard.h"

// Adds the tokens of every shard matching pattern to counts (or to the loss when counts is
// NULL); returns the number of tokens.
static double visit(const char* pattern, int V, double* counts, const double* logp, double* loss) {
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0)
        fail_msg("%s: no shard matches this pattern", pattern);
    double n = 0;
    for (size_t f = 0; f < g.gl_pathc; f++) {
        uint32_t* tokens;
        size_t ntok;
        char err[ERR_LEN];
        if (shard_read(g.gl_pathv[f], V, &tokens, &ntok, err, sizeof err) != 0) fail_msg("%s", err);
        for (size_t i = 0; i < ntok; i++) {
            if (counts) counts[tokens[i]] += 1;
            else *loss -= logp[tokens[i]];
        }
        n += (double)ntok;
        free(tokens);
    }
    globfree(&g);
    return n;
}

int main(int argc, char** argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s TRAIN_PATTERN VAL_PATTERN [VOCAB_SIZE]\n", argv[0]);
        return 2;
    }
    const int V = argc == 4 ? atoi(argv[3]) : 50257;
    if (V < 2) fail_msg("VOCAB_SIZE: expected at least 2, found '%s'", argv[3]);
    double* counts = xcalloc((size_t)V, sizeof(double), "token counts");
    double* logp = xmalloc(sizeof(double) * V, "log probabilities");
    const double ntrain = visit(argv[1], V, counts, NULL, NULL);
    for (int v = 0; v < V; v++) logp[v] = log((counts[v] + 1) / (ntrain + V));
    double loss = 0;
    const double nval = visit(argv[2], V, NULL, logp, &loss);
    printf("%.4f\n", loss / nval);
    fprintf(stderr, "unigram baseline: %.4f nats/token on %.0f validation tokens (%.0f training "
            "tokens)\n", loss / nval, nval, ntrain);
    free(counts);
    free(logp);
    return 0;
}
