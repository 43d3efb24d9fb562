// The LSE merge on numbers small enough to check by hand: one query at position 3 and four keys
// (one head of size 2), the keys split over two "ranks" {0, 1} and {2, 3}. Each computes its
// partial output and LSE with attention_partial_forward; attention_merge combines them; the
// result equals one call over all four keys. The inputs are fixed small integers/4.
#include <math.h>

#include "attention/partial_attention.h"
#include "explain/explain_modes.h"

enum { HS = 2, NK = 4 };

static void print_row(FILE* out, const char* what, const real* o, real lse) {
    fprintf(out, "  %-28s O = (%+.6f, %+.6f)  LSE = %.6f\n", what, (double)o[0], (double)o[1], (double)lse);
}

int explain_lse_example(FILE* out) {
    // q: (1, HS) at position 3; k, v: (NK, HS) at positions 0..3.
    const real q[HS] = {1.0f, 0.5f};
    const real k[NK * HS] = {0.25f, 0.5f, 1.0f, -0.5f, -0.75f, 1.0f, 0.5f, 0.25f};
    const real v[NK * HS] = {1.0f, 0.0f, 0.0f, 1.0f, -1.0f, 0.5f, 0.5f, -0.5f};
    const TokenPositions qpos = token_positions(3, 1);
    real o_a[HS], o_b[HS], o_all[HS], lse_a, lse_b, lse_all;
    const AttentionProblem first = attention_problem(1, 1, HS, 1, 2, qpos, token_positions(0, 1));
    const AttentionProblem second = attention_problem(1, 1, HS, 1, 2, qpos, token_positions(2, 1));
    const AttentionProblem all = attention_problem(1, 1, HS, 1, NK, qpos, token_positions(0, 1));
    attention_partial_forward(&first, q, HS, k, HS, v, HS, o_a, HS, &lse_a);
    attention_partial_forward(&second, q, HS, k + 2 * HS, HS, v + 2 * HS, HS, o_b, HS, &lse_b);
    attention_partial_forward(&all, q, HS, k, HS, v, HS, o_all, HS, &lse_all);
    fprintf(out, "query (%.2f, %.2f) at position 3; keys at 0..3: ", (double)q[0], (double)q[1]);
    for (int j = 0; j < NK; j++) fprintf(out, "(%.2f, %.2f) ", (double)k[j * HS], (double)k[j * HS + 1]);
    fprintf(out, "\nvalues: ");
    for (int j = 0; j < NK; j++) fprintf(out, "(%.2f, %.2f) ", (double)v[j * HS], (double)v[j * HS + 1]);
    fprintf(out, "\nscores s_j = q.k_j / sqrt(2): ");
    for (int j = 0; j < NK; j++)
        fprintf(out, "%.6f ", (double)((q[0] * k[j * HS] + q[1] * k[j * HS + 1]) / sqrtf(2.0f)));
    fprintf(out, "\n");
    print_row(out, "rank A, keys 0 1:", o_a, lse_a);
    print_row(out, "rank B, keys 2 3:", o_b, lse_b);
    const real lse = fmaxf(lse_a, lse_b) + logf(expf(lse_a - fmaxf(lse_a, lse_b)) + expf(lse_b - fmaxf(lse_a, lse_b)));
    fprintf(out, "  weights exp(LSE_A - LSE) = %.6f, exp(LSE_B - LSE) = %.6f (they sum to 1)\n",
            (double)expf(lse_a - lse), (double)expf(lse_b - lse));
    attention_merge(1, 1, HS, 1, o_a, HS, &lse_a, o_b, HS, &lse_b);
    print_row(out, "merged (attention_merge):", o_a, lse_a);
    print_row(out, "one call over keys 0..3:", o_all, lse_all);
    const double err = fmax(fmax(fabs(o_a[0] - o_all[0]), fabs(o_a[1] - o_all[1])), fabs(lse_a - lse_all));
    fprintf(out, "  largest difference %s 1e-6\n", err <= 1e-6 ? "below" : "ABOVE");
    return err <= 1e-6 ? 0 : 1;
}
