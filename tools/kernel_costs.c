// Per-call FLOPs and DRAM bytes of the CUDA launchers (kernel_costs.h). Each formula is the one
// its note states; the comments name the terms as the notes do (x = KERNEL_COST_X bytes).
#include "tools/kernel_costs.h"

static const double X = KERNEL_COST_X;
static const double F32 = 4.0;

static KernelCost cost(double flops, double bytes, int tensor) {
    KernelCost c;
    c.flops = flops;
    c.bytes = bytes;
    c.tensor = tensor;
    return c;
}

// --- Token-local layers (model/cuda_perf_layers.md) --------------------------------------------

KernelCost kernel_cost_encoder_forward(double N, double T, double C) {
    // out N*C*x + wte rows N*C*x (a gather) + wpe T*C*x + tokens 4N; one add per element.
    return cost(N * C, 2 * N * C * X + T * C * X + 4 * N, 0);
}

KernelCost kernel_cost_encoder_backward(double N, double T, double C) {
    // dout N*C*x + read-modify-write of U = N dwte rows 2*U*C*x + dwpe 2*T*C*x + the rows by
    // token 4N (sorted on the host: model/token_order.h) + tokens 4N; two adds per element.
    const double U = N;
    return cost(2 * N * C, N * C * X + 2 * U * C * X + 2 * T * C * X + 4 * N + 4 * N, 0);
}

KernelCost kernel_cost_layernorm_forward(double N, double C) {
    // inp, out N*C*x + weight, bias 2*C*x + mean, rstd 8N; ~7 fp32 ops per element.
    return cost(7 * N * C, 2 * N * C * X + 2 * C * X + 8 * N, 0);
}

KernelCost kernel_cost_fused_residual_layernorm_forward(double N, double C) {
    // a, b read, residual and out written 4*N*C*x + weight, bias + mean, rstd; ~8 ops per element.
    return cost(8 * N * C, 4 * N * C * X + 2 * C * X + 8 * N, 0);
}

long kernel_layernorm_backward_blocks(long N) {
    // layernorm.cu: rows per block = ceil(ceil(N / 512) / 4) * 4 (at least 4), blocks = N / that.
    const long target = 512, rows_step = 4;
    long rows = ((N + target - 1) / target + rows_step - 1) / rows_step * rows_step;
    if (rows < rows_step) rows = rows_step;
    return (N + rows - 1) / rows;
}

KernelCost kernel_cost_layernorm_backward(double N, double C) {
    // dout, inp read, dinp read and written 4*N*C*x + fp32 partials (blocks x 2C floats written
    // and read) + mean, rstd 8N + weight C*x + dweight, dbias read and written 4*C*x;
    // ~14 ops per element.
    const double partials = (double)kernel_layernorm_backward_blocks((long)N) * 2 * C * F32;
    return cost(14 * N * C, 4 * N * C * X + 2 * partials + 8 * N + C * X + 4 * C * X, 0);
}

KernelCost kernel_cost_gelu_forward(double n) {
    // inp read, out written; ~30 ops per element (tanhf counted as ~20).
    return cost(30 * n, 2 * n * X, 0);
}

KernelCost kernel_cost_gelu_backward(double n) {
    // inp, dout read, dinp read and written (it accumulates); ~40 ops per element.
    return cost(40 * n, 4 * n * X, 0);
}

KernelCost kernel_cost_swiglu_forward(double N, double F) {
    // gate and up read, out written; ~25 ops per element (expf counted as ~20).
    return cost(25 * N * F, 3 * N * F * X, 0);
}

KernelCost kernel_cost_swiglu_backward(double N, double F) {
    // gate, up, dout read, dgate and dup written (overwritten); ~30 ops per element.
    return cost(30 * N * F, 5 * N * F * X, 0);
}

KernelCost kernel_cost_residual_forward(double n) {
    // a, b read, out written; one add per element.
    return cost(n, 3 * n * X, 0);
}

// --- GEMMs, classifier, optimizer (model/cuda_perf_matmul_loss_adamw.md) -------------------------

KernelCost kernel_cost_matmul_forward(double N, double IC, double OC, int bias, int gelu) {
    // 2*(N*IC + OC*IC + OC + N*OC), one more N*OC with the fused GELU's pre-activation store; no
    // OC term without a bias (the LM head).
    const double elems = N * IC + OC * IC + (bias ? OC : 0) + (gelu ? 2 : 1) * N * OC;
    return cost(2 * N * IC * OC, X * elems, 1);
}

KernelCost kernel_cost_matmul_backward_dinp(double N, double IC, double OC) {
    // dinp += dout @ weight: 2*(N*OC + OC*IC + 2*N*IC).
    return cost(2 * N * IC * OC, X * (N * OC + OC * IC + 2 * N * IC), 1);
}

KernelCost kernel_cost_matmul_backward_dweight(double N, double IC, double OC, int bias) {
    // dweight += dout^T @ inp, dbias from BGRADB: 2*(N*IC + N*OC + 2*OC*IC + 2*OC).
    return cost(2 * N * IC * OC, X * (N * IC + N * OC + 2 * OC * IC + (bias ? 2 * OC : 0)), 1);
}

KernelCost kernel_cost_matmul_backward(double N, double IC, double OC, int bias) {
    const KernelCost a = kernel_cost_matmul_backward_dinp(N, IC, OC);
    const KernelCost b = kernel_cost_matmul_backward_dweight(N, IC, OC, bias);
    return cost(a.flops + b.flops, a.bytes + b.bytes, 1);
}

KernelCost kernel_cost_classifier(double N, double V, double Vp) {
    // ~8*N*V fp32 ops + 2*N*V exp (counted one op each: ~4 GFLOP at N = 8192);
    // logits read once and dlogits written once 2*2*N*Vp + targets, losses 8N.
    return cost(8 * N * V + 2 * N * V, 2 * 2 * N * Vp + 8 * N, 0);
}

KernelCost kernel_cost_adamw(double n) {
    // ~20 ops per parameter; 28 bytes: grad 2 + master, m, v 3*4 read; master, m, v 3*4 + param 2
    // written.
    return cost(20 * n, 28 * n, 0);
}

KernelCost kernel_cost_global_norm(double n) {
    // 2 ops and 2 bytes per gradient. The note adds "8 per block for the partials" (at most 1024
    // blocks: 8 KiB) but leaves them out of its tables (5,303.3 MB at 2.7b), as we do.
    return cost(2 * n, 2 * n, 0);
}

// --- Attention (attention/cuda_perf_attention.md) ------------------------------------------------

double kernel_causal_pairs(double B, double NH, double T) { return B * NH * T * (T + 1) / 2; }

KernelCost kernel_cost_attention_forward(double B, double NH, double HS, double T) {
    // Model FLOPs 4*HS per visible pair; bytes 3n*2 (Q, K, V) + 4n (o, fp32) + 4r (lse), with
    // n = B*T*NH*HS elements and r = B*NH*T rows.
    const double n = B * T * NH * HS, r = B * NH * T;
    return cost(4 * HS * kernel_causal_pairs(B, NH, T), 3 * n * X + 4 * n + 4 * r, 1);
}

KernelCost kernel_cost_attention_row_dot(double B, double NH, double HS, double T) {
    // 2n*2 (o, dout) + 4r (d); a multiply-add per element (the note gives no FLOPs).
    const double n = B * T * NH * HS, r = B * NH * T;
    return cost(2 * n, 2 * n * X + 4 * r, 0);
}

KernelCost kernel_cost_attention_backward(double B, double NH, double HS, double T) {
    // Model FLOPs 10*HS per visible pair (5 GEMMs); bytes 4n*2 + 2*4r (one pass reads Q, K, V,
    // dO, lse, d) + 3 x 8n (dq, dk, dv fp32 read and written). dQ's red.global.add of 4 bytes
    // per element and contributing key tile read and write L2, not DRAM; the semaphores' memset
    // (and, for the bf16 single-call form, one conversion pass) are left out.
    const double n = B * T * NH * HS, r = B * NH * T;
    return cost(10 * HS * kernel_causal_pairs(B, NH, T), 4 * n * X + 2 * 4 * r + 3 * 8 * n, 1);
}

KernelCost kernel_cost_attention_merge(double B, double NH, double HS, double T) {
    // 3*4n + 3*4r (o_a, lse_a read and written, o_b, lse_b read); two multiplies and an add per
    // element (the note gives no FLOPs).
    const double n = B * T * NH * HS, r = B * NH * T;
    return cost(3 * n, 3 * 4 * n + 3 * 4 * r, 0);
}

KernelCost kernel_cost_rope(double rows, double NH, double NKV, double HS) {
    // The query and key heads read and written in place, x each; per element 2 multiplies and an
    // add (x0 c - x1 s); the angles (a few per row) are not counted.
    const double n = rows * (NH + NKV) * HS;
    return cost(3 * n, 2 * X * n, 0);
}

KernelCost kernel_cost_gqa_widen(double rows, double NH, double NKV, double HS) {
    // NKV heads read, NH written, x each; a copy (no FLOPs).
    return cost(0, X * rows * (NKV + NH) * HS, 0);
}

KernelCost kernel_cost_gqa_group_sum(double rows, double NH, double NKV, double HS,
                                     int accumulate) {
    // The widened fp32 gradient read 4*rows*NH*HS; the group's sum added to an fp32 accumulator
    // (read and written 8 per element) or written in the storage type (x); an add per element.
    const double n = rows * NH * HS, out = rows * NKV * HS;
    return cost(n, F32 * n + (accumulate ? 2 * F32 : X) * out, 0);
}

// --- Model size and floors ----------------------------------------------------------------------

double kernel_gpt_num_params_block(double L, double C, double W, double F, double FC, double NB,
                                   double QB, double LB, double Vp, double max_T) {
    // per block: ln1 C + NB, qkv C W + W, attproj C^2 + C, ln2 C + NB, fc C FC + FC, fcproj F C + C
    // (the qkv projection's bias times QB, the other linear layers' times LB)
    return Vp * C + max_T * C +
           L * (C * W + C * C + C * FC + F * C + QB * W + LB * (C + FC + C) + 2 * (C + NB)) + C +
           NB;
}

double kernel_gpt_num_params_qkv(double L, double C, double W, double Vp, double max_T) {
    return kernel_gpt_num_params_block(L, C, W, 4 * C, 4 * C, C, 1, 1, Vp, max_T);
}

double kernel_gpt_num_params(double L, double C, double Vp, double max_T) {
    return kernel_gpt_num_params_qkv(L, C, 3 * C, Vp, max_T);
}

double kernel_floor_seconds(KernelCost c, double tensor_flops_per_s, double cuda_core_flops_per_s,
                            double bytes_per_s, int* compute_bound) {
    const double peak = c.tensor ? tensor_flops_per_s : cuda_core_flops_per_s;
    const double compute = peak > 0 ? c.flops / peak : 0;
    const double memory = bytes_per_s > 0 ? c.bytes / bytes_per_s : 0;
    if (compute_bound) *compute_bound = compute > memory;
    return compute > memory ? compute : memory;
}
