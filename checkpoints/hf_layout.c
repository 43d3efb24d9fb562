#include "checkpoints/hf_layout.h"

#include <stdio.h>

#include "model/gpt.h"

int hf_layout(const GPTConfig* cfg, const char* prefix, HfTensor* w) {
    size_t sizes[NUM_PARAM_TENSORS], start[NUM_PARAM_TENSORS];
    gpt_param_sizes(cfg, sizes);
    for (int k = 0; k < NUM_PARAM_TENSORS; k++)
        start[k] = k ? start[k - 1] + sizes[k - 1] : 0;
    enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW,
           FCPROJB, LNFW, LNFB };
    const size_t C = (size_t)cfg->C;
    int n = 0;
#define WANT(tensor_, at_, rows_, cols_, tr_, ...) \
    (snprintf(w[n].name, sizeof w[n].name, __VA_ARGS__), w[n].rows = rows_, w[n].cols = cols_, \
     w[n].offset = start[tensor_] + (at_), w[n].transposed = tr_, n++)
    WANT(WTE, 0, (size_t)cfg->V, C, 0, "%swte.weight", prefix);
    WANT(WPE, 0, (size_t)cfg->max_T, C, 0, "%swpe.weight", prefix);
    for (size_t l = 0; l < (size_t)cfg->L; l++) {
        WANT(LN1W, l * C, 0, C, 0, "%sh.%zu.ln_1.weight", prefix, l);
        WANT(LN1B, l * C, 0, C, 0, "%sh.%zu.ln_1.bias", prefix, l);
        WANT(QKVW, l * 3 * C * C, C, 3 * C, 1, "%sh.%zu.attn.c_attn.weight", prefix, l);
        WANT(QKVB, l * 3 * C, 0, 3 * C, 0, "%sh.%zu.attn.c_attn.bias", prefix, l);
        WANT(ATTPROJW, l * C * C, C, C, 1, "%sh.%zu.attn.c_proj.weight", prefix, l);
        WANT(ATTPROJB, l * C, 0, C, 0, "%sh.%zu.attn.c_proj.bias", prefix, l);
        WANT(LN2W, l * C, 0, C, 0, "%sh.%zu.ln_2.weight", prefix, l);
        WANT(LN2B, l * C, 0, C, 0, "%sh.%zu.ln_2.bias", prefix, l);
        WANT(FCW, l * 4 * C * C, C, 4 * C, 1, "%sh.%zu.mlp.c_fc.weight", prefix, l);
        WANT(FCB, l * 4 * C, 0, 4 * C, 0, "%sh.%zu.mlp.c_fc.bias", prefix, l);
        WANT(FCPROJW, l * 4 * C * C, 4 * C, C, 1, "%sh.%zu.mlp.c_proj.weight", prefix, l);
        WANT(FCPROJB, l * C, 0, C, 0, "%sh.%zu.mlp.c_proj.bias", prefix, l);
    }
    WANT(LNFW, 0, 0, C, 0, "%sln_f.weight", prefix);
    WANT(LNFB, 0, 0, C, 0, "%sln_f.bias", prefix);
#undef WANT
    return n;
}
