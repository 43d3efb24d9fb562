// A cluster description for the cost model (costmodel/clusters/*.cluster): the devices, how many
// share a node, and the two network tiers, each number with its source.
//
// File format: one `key = value  # source` per line; blank lines and lines that start with '#'
// are ignored. Every key of the table in cluster.c must appear exactly once, except the optional
// `fit.*` lines; a number without a `# source` comment is refused (a figure nobody can check is
// not a figure). Values:
//   numbers        1e-6, 312, 0.65
//   curves         `GFLOP:efficiency` pairs, largest first ("128:0.95 16:0.9 1:0.6 0:0.1"), read
//                  as Calculon reads its gflops_efficiency tables: an op of x GFLOP runs at the
//                  efficiency of the first pair whose threshold is <= x (memory curves: MB)
//   fits           `fit.OP.pN = ALPHA_S BETA_S_PER_BYTE`: a measured alpha-beta fit of OP
//                  (all_gather, reduce_scatter, all_reduce, send_recv) over N ranks, as
//                  tools/bench_collectives.c writes it (beta per bus byte); when present they
//                  replace the datasheet link model for that op (this machine's clusters)
// Optional keys, written by `costmodel --calibrate-gpu` from a GPU kit report (measured kernels):
//   attention.hsN.forward_efficiency, attention.hsN.backward_efficiency   curves (GFLOP per call)
//                  for head size N; a shape takes the nearest head size listed (ratio), else the
//                  attention.* curves
//   kernel.NAME.efficiency   a curve (MB) of achieved memory bandwidth over memory.bandwidth_gbs
//                  for one memory-bound kernel (NAME: cluster_kernel_name), its time then
//                  bytes / (bandwidth x efficiency); kernels without one use memory.efficiency
//   step.fixed_ms  milliseconds per optimizer step outside the forward, backward and optimizer
//                  (the host's part of a step: data, logging, synchronisation)
// Optional, with the kernels' source as its source:
//   attention.tiles   `ROWSxKEYS ROWSxKEYS`: the attention kernels' tiles, forward then backward
//                  (attention/dist_cost.h AttentionTile: query rows per tile, keys widened to
//                  whole tiles of KEYS); attention calls are priced by the scores those tiles
//                  compute (costmodel/README.md). Absent: 1x1 1x1, the visible pairs.
//   attention.masked_cost   `F B`: what a score those tiles compute but mask costs against a
//                  visible pair, forward and backward, in [0, 1]. Absent: 1 1 (a GPU tile
//                  computes every score alike); the CPU kernel exponentiates only visible ones.
// Errors are one line: "FILE:LINE: key 'KEY': expected WHAT, found 'TEXT'" (or "FILE: key 'KEY':
// expected a line 'KEY = ...', found none" for a missing key).
#pragma once
#include <stddef.h>

#include "attention/dist_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { CLUSTER_MAX_CURVE = 24, CLUSTER_MAX_FITS = 64, CLUSTER_NAME_LEN = 64,
       CLUSTER_MAX_HEAD_SIZES = 8 };

// Calculon's efficiency table: points sorted by threshold, largest first.
typedef struct {
    int n;
    double threshold[CLUSTER_MAX_CURVE];    // GFLOP (or MB for memory)
    double efficiency[CLUSTER_MAX_CURVE];   // fraction of peak, (0, 1]
} EfficiencyCurve;

typedef enum { TIER_INTRA, TIER_INTER, TIER_COUNT } Tier;

// One network tier. Time of a transfer = call_latency per call + hop_latency per message +
// bytes / (bandwidth * efficiency) (bytes as the comm counters count them: bus bytes).
typedef struct {
    double bandwidth;       // bytes/s each way per device (intra) or per NIC (inter)
    double p2p_bandwidth;   // bytes/s each way between two devices (intra: one peer's links)
    double efficiency;      // achieved fraction of bandwidth
    double call_latency;    // seconds per collective or send/recv call
    double hop_latency;     // seconds per message (per ring step)
} Link;

// The memory-bound kernels the cost model times (tools/kernel_costs.c; the GPU kit's kernel rows
// name them NAME_cuda, the classifier classifier_forward_backward_cuda).
typedef enum {
    CK_ENCODER_FORWARD, CK_LAYERNORM_FORWARD, CK_FUSED_RESIDUAL_LAYERNORM_FORWARD, CK_RESIDUAL_FORWARD,
    CK_CLASSIFIER, CK_GELU_BACKWARD, CK_LAYERNORM_BACKWARD, CK_ENCODER_BACKWARD, CK_ATTENTION_MERGE,
    CK_ATTENTION_ROW_DOT, CK_GLOBAL_NORM, CK_ADAMW, CK_COUNT,
    CK_GEMM = -1   // not one of them: a GEMM (its curve is matmul.efficiency)
} ClusterKernel;

// Attention curves measured at one head size.
typedef struct {
    int head_size;
    EfficiencyCurve forward, backward;
} HeadSizeCurves;

typedef enum { FIT_ALL_GATHER, FIT_REDUCE_SCATTER, FIT_ALL_REDUCE, FIT_SEND_RECV, FIT_OPS } FitOp;

typedef struct {
    FitOp op;
    int P;          // ranks the fit was measured on
    double alpha;   // seconds per call
    double beta;    // seconds per bus byte
} CollectiveFit;

typedef struct {
    char name[CLUSTER_NAME_LEN];
    int gpus_per_node;     // ranks per node; world rank / gpus_per_node = node (mesh.h order)
    int shared_cores;      // 0: each rank owns its device; > 0: the node's ranks share this many
                           // cores for compute AND communication (the CPU machine)
    EfficiencyCurve shared_eff;   // by ranks on the node: the aggregate compute throughput of
                                  // that many one-thread ranks over min(ranks, cores) alone
    int async_comm;        // 1: transfers progress during compute (NCCL streams); 0: they
                           // progress only inside MPI calls, so nothing overlaps
    double memory_bytes;   // per device (shared_cores > 0: the node's memory, shared)
    double matmul_flops;   // peak FLOP/s of the GEMM unit (tensor cores; sgemm peak on the CPU)
    EfficiencyCurve matmul_eff;      // by GFLOP of one GEMM
    EfficiencyCurve attention_fwd_eff;   // fused attention forward, of matmul_flops, by GFLOP per call
    EfficiencyCurve attention_bwd_eff;   // its backward (model FLOPs: 4*HS and 10*HS per pair)
    AttentionTile attention_tile[2];     // the kernels' tiles, forward and backward ({1, 1}:
                                         // priced by the visible pairs)
    double attention_masked_cost[2];     // a masked score's cost over a visible pair's (1)
    double vector_flops;   // peak FLOP/s of the non-GEMM units (CUDA cores)
    EfficiencyCurve vector_eff;      // by GFLOP of one kernel
    double memory_bw;      // bytes/s of device memory
    EfficiencyCurve memory_eff;      // by MB moved by one kernel
    double act_bytes;      // element of activations and what travels as them (bf16: 2)
    double acc_bytes;      // element of partial sums, LSE, merged outputs (fp32: 4)
    double param_bytes;    // element of a parameter and of a gradient
    double state_bytes;    // optimizer state per parameter (fp32 master + m + v: 12)
    int nics_per_node;
    Link link[TIER_COUNT];
    int nfits;
    CollectiveFit fit[CLUSTER_MAX_FITS];
    // optional (a GPU kit report's measurements): n = 0 / 0 when absent
    int n_head_sizes;
    HeadSizeCurves head_size[CLUSTER_MAX_HEAD_SIZES];
    EfficiencyCurve kernel_eff[CK_COUNT];
    double step_fixed_s;
} Cluster;

// Reads a cluster file. Returns 0, or -1 with a one-line message in err (errlen bytes).
int cluster_load(const char* path, Cluster* c, char* err, size_t errlen);
// The same from text already in memory (`path` only names it in messages).
int cluster_parse(const char* path, const char* text, Cluster* c, char* err, size_t errlen);
// A curve as a cluster file writes it ("128:0.95 16:0.9 1:0.6 0:0.1"), into out (len bytes).
void cluster_format_curve(const EfficiencyCurve* c, char* out, size_t len);
// Efficiency of an op of `size` (GFLOP or MB) on a curve: Calculon's lookup.
double curve_efficiency(const EfficiencyCurve* curve, double size);
// The fit of `op` measured on P ranks, NULL when the cluster has none for that op. Without one
// at exactly P: the nearest measured P above (a conservative choice), else the largest below.
const CollectiveFit* cluster_fit(const Cluster* c, FitOp op, int P);
const char* fit_op_name(FitOp op);
int fit_op_parse(const char* name);   // -1 if unknown
// Adds the alpha-beta fits of a tools/bench_collectives JSONL ("fit" records over P >= 2 ranks
// with a positive beta) to c->fit. Returns 0, or -1 with a one-line message (none found, a
// malformed record).
int cluster_read_fits(const char* path, Cluster* c, char* err, size_t errlen);
// "encoder_forward", ... for CK_*; NULL for any other value. And back (-1 if unknown).
const char* cluster_kernel_name(ClusterKernel k);
int cluster_kernel_parse(const char* name);
// The attention curves for head size hs: the listed head size nearest hs (by ratio; the smaller
// on a tie), or the cluster's attention.* curves when none is listed.
void cluster_attention_curves(const Cluster* c, int hs, const EfficiencyCurve** forward,
                              const EfficiencyCurve** backward);

#ifdef __cplusplus
}
#endif
