// GPU kit reports (costmodel/gpu_report.c): what `costmodel --calibrate-gpu` and
// `--validate-gpu` read, and `make costmodel-gpu` from every committed results/gpu/ report.
// Input: one gpu_report.jsonl. An accepted report has its device record, every number finite,
// the counts (head size, T, B, heads, ranks) whole numbers from 1, each throughput run once
// with the preset, B and T its run text gives; a refused one leaves nothing allocated.
#include <math.h>
#include <string.h>

#include "comm/fail.h"
#include "costmodel/gpu_report.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int terminated(const char* s, size_t len) { return memchr(s, 0, len) != NULL; }

static void check_report(const GpuReport* r) {
    fuzz_expect(r->gpu[0] && terminated(r->gpu, sizeof r->gpu) && isfinite(r->bf16_tflops) &&
                isfinite(r->hbm_gbps), "gpu_report_read accepted a report without a whole device record");
    for (int k = 0; k < r->nkernels; k++) {
        const GpuKernelRow* x = &r->kernels[k];
        fuzz_expect(terminated(x->shape, sizeof x->shape) && terminated(x->kernel, sizeof x->kernel) &&
                    isfinite(x->ms) && isfinite(x->gflop) && isfinite(x->mbytes),
                    "gpu_report_read accepted a malformed kernel row");
    }
    for (int k = 0; k < r->nattention; k++) {
        const GpuAttentionRow* a = &r->attention[k];
        fuzz_expect(a->hs >= 1 && a->T >= 1 && a->B >= 1 && a->NH >= 1 && isfinite(a->ours_fwd_ms) &&
                    isfinite(a->ours_bwd_ms) && isfinite(a->sdpa_fwd_ms) && isfinite(a->sdpa_bwd_ms) &&
                    isfinite(a->ours_fwd_tflops) && isfinite(a->ours_bwd_tflops),
                    "gpu_report_read accepted a malformed attention row");
    }
    for (int k = 0; k < r->nthroughput; k++) {
        const GpuThroughputRow* t = &r->throughput[k];
        char preset[32];
        int B = 0;
        long T = 0;
        fuzz_expect(t->B >= 1 && t->T >= 1 && t->preset[0] && isfinite(t->ms_per_step) &&
                    isfinite(t->forward_ms) && isfinite(t->backward_ms) && isfinite(t->optimizer_ms),
                    "gpu_report_read accepted a malformed throughput row");
        fuzz_expect(gpu_report_parse_shape(t->run, preset, sizeof preset, &B, &T) == 0 &&
                    !strcmp(preset, t->preset) && B == t->B && T == t->T,
                    "a throughput row's preset, B and T are not its run text's");
        for (int j = 0; j < k; j++)
            fuzz_expect(strcmp(r->throughput[j].preset, t->preset) || r->throughput[j].B != t->B ||
                        r->throughput[j].T != t->T, "a throughput run kept twice");
    }
    for (int k = 0; k < r->nfits; k++) {
        const GpuFitRow* f = &r->fits[k];
        fuzz_expect(f->P >= 1 && isfinite(f->alpha_s) && isfinite(f->beta_s_per_byte) &&
                    terminated(f->op, sizeof f->op) && terminated(f->transport, sizeof f->transport),
                    "gpu_report_read accepted a malformed fit row");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* path = fuzz_file("gpu_report.jsonl", data, size);
    GpuReport r;
    char err[ERR_LEN] = "";
    if (gpu_report_read(path, &r, err, sizeof err) != 0) {
        fuzz_expect_error_line(err);
        fuzz_expect(!r.kernels && !r.attention && !r.throughput && !r.fits && !r.nkernels &&
                    !r.nattention && !r.nthroughput && !r.nfits, "a refused report left rows behind");
        return 0;
    }
    check_report(&r);
    gpu_report_free(&r);
    return 0;
}
