// tools/kernel_costs.c reproduces the tables of the three cost notes (model/cuda_perf_layers.md,
// model/cuda_perf_matmul_loss_adamw.md, attention/cuda_perf_attention.md) to their printed
// digits: N = 8192 tokens, gpt3-125m (C = 768) and gpt3-2.7b (C = 2560), Vp = 50304, the attention
// rows at B = 4 (the notes' B x NH), floors on the H100 SXM (989 TFLOP/s bf16, 67 fp32, 3.35 TB/s).
#include "tools/kernel_costs.h"
#include "tests/test_expect.h"

#include <math.h>

static const double N = 8192, T_LAYERS = 2048, VP = 50304, V = 50257;
static const double H100_BF16 = 989e12, H100_FP32 = 67e12, H100_HBM = 3.35e12;

// A printed table value: equal to `printed` (in units of `unit`) within half its last digit.
static int matches(double value, double unit, double printed, double last_digit) {
    return fabs(value / unit - printed) <= 0.5 * last_digit + 1e-9;
}

// One table row: GFLOP (or MFLOP) and MB as printed, with the digit each is printed to.
static void expect_row(const char* what, KernelCost c, double flops_unit, double flops, double flops_digit,
                       double mb, double mb_digit) {
    EXPECT(matches(c.flops, flops_unit, flops, flops_digit), "%s: %.4g %s FLOP (table %g)", what,
           c.flops / flops_unit, flops_unit == 1e9 ? "G" : "M", flops);
    EXPECT(matches(c.bytes, 1e6, mb, mb_digit), "%s: %.4f MB (table %g)", what, c.bytes / 1e6, mb);
}

static double floor_us(KernelCost c, int* compute) {
    return 1e6 * kernel_floor_seconds(c, H100_BF16, H100_FP32, H100_HBM, compute);
}

static void test_layers(void) {
    printf("token-local layers (model/cuda_perf_layers.md)\n");
    const double C1 = 768, C2 = 2560;
    expect_row("125m encoder_forward", kernel_cost_encoder_forward(N, T_LAYERS, C1), 1e6, 6, 1, 28.3, 0.1);
    expect_row("125m encoder_backward", kernel_cost_encoder_backward(N, T_LAYERS, C1), 1e6, 13, 1, 44.1, 0.1);
    expect_row("125m layernorm_forward", kernel_cost_layernorm_forward(N, C1), 1e6, 44, 1, 25.2, 0.1);
    expect_row("125m fused_residual_layernorm_forward", kernel_cost_fused_residual_layernorm_forward(N, C1),
               1e6, 50, 1, 50.4, 0.1);
    expect_row("125m layernorm_backward", kernel_cost_layernorm_backward(N, C1), 1e6, 88, 1, 56.7, 0.1);
    expect_row("125m gelu_forward", kernel_cost_gelu_forward(4 * N * C1), 1e6, 755, 1, 100.7, 0.1);
    expect_row("125m gelu_backward", kernel_cost_gelu_backward(4 * N * C1), 1e6, 1007, 1, 201.3, 0.1);
    expect_row("125m residual_forward", kernel_cost_residual_forward(N * C1), 1e6, 6, 1, 37.7, 0.1);
    expect_row("2.7b encoder_forward", kernel_cost_encoder_forward(N, T_LAYERS, C2), 1e6, 21, 1, 94.4, 0.1);
    expect_row("2.7b encoder_backward", kernel_cost_encoder_backward(N, T_LAYERS, C2), 1e6, 42, 1, 146.9, 0.1);
    expect_row("2.7b layernorm_backward", kernel_cost_layernorm_backward(N, C2), 1e6, 294, 1, 188.8, 0.1);
    expect_row("2.7b gelu_backward", kernel_cost_gelu_backward(4 * N * C2), 1e6, 3355, 1, 671.1, 0.1);
    EXPECT(kernel_layernorm_backward_blocks(8192) == 512, "layernorm_backward blocks at N = 8192: %ld (512)",
           kernel_layernorm_backward_blocks(8192));
    int compute = 1;
    const double f = floor_us(kernel_cost_gelu_backward(4 * N * C1), &compute);
    EXPECT(matches(f, 1, 60.1, 0.1) && !compute, "125m gelu_backward floor %.2f us, memory (table 60.1)", f);
}

static void test_matmul_125m(void) {
    printf("GEMMs, classifier, optimizer at gpt3-125m (model/cuda_perf_matmul_loss_adamw.md)\n");
    const double C = 768;
    expect_row("fwd qkv", kernel_cost_matmul_forward(N, C, 3 * C, 1, 0), 1e9, 29.0, 0.1, 53.9, 0.1);
    expect_row("bwd dinp qkv", kernel_cost_matmul_backward_dinp(N, C, 3 * C), 1e9, 29.0, 0.1, 66.5, 0.1);
    expect_row("bwd dW qkv", kernel_cost_matmul_backward_dweight(N, C, 3 * C, 1), 1e9, 29.0, 0.1, 57.4, 0.1);
    expect_row("fwd attproj", kernel_cost_matmul_forward(N, C, C, 1, 0), 1e9, 9.7, 0.1, 26.3, 0.1);
    expect_row("bwd dinp attproj", kernel_cost_matmul_backward_dinp(N, C, C), 1e9, 9.7, 0.1, 38.9, 0.1);
    expect_row("fwd fc + GELU", kernel_cost_matmul_forward(N, C, 4 * C, 1, 1), 1e9, 38.7, 0.1, 118.0, 0.1);
    expect_row("fwd fcproj", kernel_cost_matmul_forward(N, 4 * C, C, 1, 0), 1e9, 38.7, 0.1, 67.6, 0.1);
    expect_row("bwd dW fcproj", kernel_cost_matmul_backward_dweight(N, 4 * C, C, 1), 1e9, 38.7, 0.1, 72.4, 0.1);
    expect_row("fwd LM head", kernel_cost_matmul_forward(N, C, VP, 0, 0), 1e9, 633.0, 0.1, 914.0, 0.1);
    expect_row("bwd dinp LM head", kernel_cost_matmul_backward_dinp(N, C, VP), 1e9, 633.0, 0.1, 926.6, 0.1);
    expect_row("bwd dW LM head", kernel_cost_matmul_backward_dweight(N, C, VP, 0), 1e9, 633.0, 0.1, 991.3, 0.1);
    const KernelCost whole = kernel_cost_matmul_backward(N, C, 3 * C, 1);
    EXPECT(matches(whole.flops, 1e9, 58.0, 0.1) && matches(whole.bytes, 1e6, 123.9, 0.1) && whole.tensor,
           "whole matmul_backward qkv = dinp + dW: %.1f GFLOP, %.1f MB, tensor cores", whole.flops / 1e9,
           whole.bytes / 1e6);
    int compute = 1;
    double f = floor_us(kernel_cost_matmul_backward_dinp(N, C, C), &compute);
    EXPECT(matches(f, 1, 11.6, 0.1) && !compute, "bwd dinp attproj floor %.2f us, memory (table 11.6)", f);
    f = floor_us(kernel_cost_matmul_forward(N, C, 3 * C, 1, 0), &compute);
    EXPECT(matches(f, 1, 29.3, 0.1) && compute, "fwd qkv floor %.2f us, compute (table 29.3)", f);

    const KernelCost cls = kernel_cost_classifier(N, V, VP);
    EXPECT(matches(cls.bytes, 1e6, 1648.4, 0.1) && fabs(cls.flops / 1e9 - 4) < 0.5 && !cls.tensor,
           "classifier: %.1f MB (table 1,648.4), ~%.1f GFLOP fp32 (table ~4)", cls.bytes / 1e6, cls.flops / 1e9);
    f = floor_us(cls, &compute);
    EXPECT(matches(f, 1, 492.1, 0.1) && !compute, "classifier floor %.1f us (table 492.1)", f);

    const double params = kernel_gpt_num_params(12, C, VP, 2048);
    EXPECT(matches(params, 1e6, 125.3, 0.1), "gpt3-125m parameters %.2f M (table 125.3)", params / 1e6);
    const KernelCost adamw = kernel_cost_adamw(params);
    EXPECT(kernel_cost_adamw(1).bytes == 28 && kernel_cost_adamw(1).flops == 20,
           "AdamW: 28 bytes, 20 FLOPs per parameter");
    expect_row("AdamW 125.3 M", adamw, 1e9, 2.5, 0.1, 3507.3, 0.1);
    f = floor_us(adamw, &compute);
    EXPECT(matches(f, 1, 1047.0, 0.1), "AdamW floor %.1f us (table 1,047.0)", f);
    expect_row("global norm 125.3 M", kernel_cost_global_norm(params), 1e9, 0.25, 0.01, 250.5, 0.1);
}

static void test_matmul_2_7b(void) {
    printf("GEMMs and optimizer at gpt3-2.7b\n");
    const double C = 2560;
    expect_row("fwd qkv", kernel_cost_matmul_forward(N, C, 3 * C, 1, 0), 1e9, 322.1, 0.1, 207.1, 0.1);
    expect_row("bwd dinp attproj", kernel_cost_matmul_backward_dinp(N, C, C), 1e9, 107.4, 0.1, 138.9, 0.1);
    expect_row("fwd fc + GELU", kernel_cost_matmul_forward(N, C, 4 * C, 1, 1), 1e9, 429.5, 0.1, 429.9, 0.1);
    expect_row("bwd dW fc", kernel_cost_matmul_backward_dweight(N, C, 4 * C, 1), 1e9, 429.5, 0.1, 314.6, 0.1);
    expect_row("bwd dW LM head", kernel_cost_matmul_backward_dweight(N, C, VP, 0), 1e9, 2109.9, 0.1, 1381.2, 0.1);
    const double params = kernel_gpt_num_params(32, C, VP, 2048);
    EXPECT(matches(params, 1e6, 2651.7, 0.1), "gpt3-2.7b parameters %.2f M (table 2,651.7)", params / 1e6);
    expect_row("AdamW 2,651.7 M", kernel_cost_adamw(params), 1e9, 53, 1, 74246.9, 0.1);
    expect_row("global norm 2,651.7 M", kernel_cost_global_norm(params), 1e9, 5.3, 0.1, 5303.3, 0.1);
}

// One model's attention rows: forward, backward, row-dot and merge (model GFLOP and MB).
static void expect_attention(const char* what, double NH, double HS, double T, const double fwd[2],
                             const double bwd[2], double row_dot_mb, double merge_mb) {
    char name[96];
    snprintf(name, sizeof name, "%s T=%g forward", what, T);
    expect_row(name, kernel_cost_attention_forward(4, NH, HS, T), 1e9, fwd[0], 0.1, fwd[1], 0.1);
    snprintf(name, sizeof name, "%s T=%g backward", what, T);
    expect_row(name, kernel_cost_attention_backward(4, NH, HS, T), 1e9, bwd[0], 0.1, bwd[1], 0.1);
    const KernelCost rd = kernel_cost_attention_row_dot(4, NH, HS, T);
    const KernelCost mg = kernel_cost_attention_merge(4, NH, HS, T);
    EXPECT(matches(rd.bytes, 1e6, row_dot_mb, 0.1) && !rd.tensor, "%s T=%g row-dot %.2f MB (table %g)", what, T,
           rd.bytes / 1e6, row_dot_mb);
    EXPECT(matches(mg.bytes, 1e6, merge_mb, 0.1) && !mg.tensor, "%s T=%g merge %.2f MB (table %g)", what, T,
           mg.bytes / 1e6, merge_mb);
}

static void test_attention(void) {
    printf("attention, B = 4 (attention/cuda_perf_attention.md)\n");
    expect_attention("125m", 12, 64, 1024, (const double[]){6.4, 31.7}, (const double[]){16.1, 101.1}, 12.8, 38.3);
    expect_attention("125m", 12, 64, 8192, (const double[]){412.4, 253.2}, (const double[]){1030.9, 808.5},
                     102.2, 306.7);
    expect_attention("2.7b", 32, 80, 1024, (const double[]){21.5, 105.4}, (const double[]){53.7, 336.6}, 42.5,
                     127.4);
    expect_attention("2.7b", 32, 80, 8192, (const double[]){1374.6, 843.1}, (const double[]){3436.4, 2692.7},
                     339.7, 1019.2);
    int compute = 0;
    double f = floor_us(kernel_cost_attention_forward(4, 12, 64, 1024), &compute);
    EXPECT(matches(f, 1, 9.4, 0.1) && !compute, "125m T=1024 forward floor %.2f us, memory (table 9.4)", f);
    f = floor_us(kernel_cost_attention_backward(4, 12, 64, 8192), &compute);
    // The note's backward floor is on executed FLOPs (5 GEMMs, masked-block overhead); on model FLOPs 1042.
    EXPECT(f > 1000 && f < 1100 && compute, "125m T=8192 backward floor on model FLOPs %.0f us, compute", f);
}

int main(void) {
    test_layers();
    test_matmul_125m();
    test_matmul_2_7b();
    test_attention();
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
    return failures != 0;
}
