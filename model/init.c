#include "model/init.h"

#include <math.h>

#include "model/gpt.h"

// splitmix64's finaliser: a strong 64-bit mix, so hashing a counter gives independent values.
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Uniform in (0, 1] from the top 53 bits.
static double to_unit(uint64_t x) { return ((x >> 11) + 1) * 0x1.0p-53; }

static uint64_t stream_key(uint64_t seed, uint64_t stream) {
    return mix64(seed ^ mix64(stream + 0x9e3779b97f4a7c15ULL));
}

uint64_t counter_bits(uint64_t seed, uint64_t stream, uint64_t index) {
    return mix64(stream_key(seed, stream) ^ mix64(index));
}

double counter_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    const uint64_t key = stream_key(seed, stream);
    const double u1 = to_unit(mix64(key ^ (2 * index)));
    const double u2 = to_unit(mix64(key ^ (2 * index + 1)));
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);   // Box-Muller, one value per index
}

void gpt_init_slice(const GPTConfig* cfg, uint64_t seed, double weight_std, int tensor, size_t start,
                    size_t count, real* out) {
    const int is_ln_weight = tensor == 2 || tensor == 8 || tensor == 14 || tensor == 17 ||
                             tensor == 19;
    const int is_bias = tensor == 3 || tensor == 5 || tensor == 7 || tensor == 9 ||
                        tensor == 11 || tensor == 13 || tensor == 15 || tensor == 18 ||
                        tensor == 20;
    const int is_residual_proj = tensor == 6 || tensor == 12;
    double std = weight_std;
    if (is_residual_proj) std = weight_std / sqrt(2.0 * cfg->L);
    for (size_t i = 0; i < count; i++) {
        const size_t e = start + i;
        if (is_ln_weight) out[i] = 1;
        else if (is_bias) out[i] = 0;
        else if ((tensor == 0 || tensor == 16) && e >= (size_t)cfg->V * cfg->C)
            out[i] = 0;   // padded vocab rows
        else out[i] = (real)(std * counter_normal(seed, (uint64_t)tensor, e));
    }
}

void gpt_init_params(const GPTConfig* cfg, uint64_t seed, double std, real* flat) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt_param_sizes(cfg, sizes);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        const size_t n = sizes[t];
        // Chunks in parallel: the counter makes the result independent of the split.
#pragma omp parallel for schedule(static)
        for (size_t c = 0; c < n; c += 65536) {
            gpt_init_slice(cfg, seed, std, t, c, n - c < 65536 ? n - c : 65536, flat + c);
        }
        flat += n;
    }
}
