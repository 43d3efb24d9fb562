// A GPU cluster file whose compute side comes from a GPU kit report (costmodel/gpu_report.h):
//   matmul.efficiency        the report's GEMM rows (tools/bench_kernels_cuda.cu), TFLOP/s over
//                            the datasheet peak by GFLOP per GEMM, made to rise with size
//   attention.hsN.*          attention TFLOP/s by head size and GFLOP per call, forward and
//                            backward: the kernel rows of the step's shapes and the attention
//                            rows (ours, or with ATTENTION_SDPA PyTorch's flash SDPA measured
//                            beside it: FlashAttention-2 on the same GPU)
//   attention.*_efficiency   the same over every head size (shapes whose head size the report
//                            lacks use the nearest one's)
//   memory.efficiency        every memory-bound kernel row, GB/s over the datasheet bandwidth by MB
//   kernel.NAME.efficiency   each memory-bound kernel's own rows (AdamW, the gradient norm,
//                            LayerNorm, the classifier, ...)
//   step.fixed_ms            the throughput runs' time per step outside forward, backward, optimizer
//   fit.OP.pN                with a tools/bench_collectives JSONL (e.g. --comm nccl on the GPUs):
//                            its alpha-beta fits, which replace the link model for their op
// Everything else (devices per node, memory, element sizes, the network tiers) is the base cluster
// file's lines, copied with their sources. Every line says where its number came from.
#pragma once

typedef enum { ATTENTION_OURS, ATTENTION_SDPA } AttentionSource;

// Writes `out` (atomically) from the report at `report` (a .jsonl or a results/gpu/ folder), the
// base cluster file and, unless NULL, a collectives JSONL. Returns the exit status; bad input
// ends the program with a message.
int gpu_calibrate(const char* report, const char* base, AttentionSource attention,
                  const char* collectives, const char* out);
