// What the trainer needs from a model backend beyond the layer sequence (gpt.h): moving
// parameters and logits between host and backend memory, the gradient norm, and AdamW on the
// backend's memory. The CPU backend implements it in backend_cpu.c; the CUDA backend (fp32
// master weights beside bf16 parameters) in backend_cuda.cu. The trainer is written once
// against this header and gpt.h.
#pragma once
#include <stddef.h>

#include "model/gpt.h"
#include "model/muon.h"
#include "model/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

// "cpu" or "cuda-bf16" / "cuda-fp32".
const char* gpt_backend_name(void);

// The device a backend computes on, for the trainer's report.
typedef struct {
    char name[256];        // "NVIDIA H100 80GB HBM3"; the CPU backend: "cpu"
    // The peak FLOP/s of this build's arithmetic on the device, from the peak table
    // (train/gpu_peaks.h: bf16 tensor cores, or fp32 CUDA cores for the fp32 build); 0 when
    // unknown (and always for the CPU, whose peak the trainer measures).
    double peak_flops;
    char peak_entry[192];  // the table entry and its source; "" when unknown
    // Memory in use now and in total: the CUDA backend reads cudaMemGetInfo (everything on the
    // device, this process's context included); the CPU backend reports its peak resident set
    // (getrusage) and 0 as the total.
    size_t memory_used, memory_total;
} BackendDevice;
void gpt_backend_device(BackendDevice* d);
// Waits until the work the backend has queued is done (CUDA: its stream); nothing on the CPU. Not
// for use inside a training step, which never waits for the device (the step's one read is
// gpt_scalars_fetch / gpt_scalars_wait below).
void gpt_backend_sync(void);
// What the process has asked of the device so far: kernel launches (cuBLAS GEMMs included),
// copies from device to host memory, and host synchronisations (calls that block the host until
// device work is done). Only the CUDA backend on the host runtime (tests/cuda_host) counts them:
// it returns 1 and fills *out there; 0 on the CPU backend and on a GPU build (no counters).
// graph_launches: CUDA graph launches; graph_kernels: the kernels and GEMMs they ran (not in
// launches, which counts what the host issued one by one).
typedef struct {
    long long launches, d2h, syncs, graph_launches, graph_kernels;
} BackendCounters;
int gpt_backend_counters(BackendCounters* out);

// CUDA graphs of the backend's stream: the work issued between gpt_graph_begin and gpt_graph_end
// is captured (recorded, not run) and gpt_graph_launch runs it again, as one launch, with the
// arguments and buffers of the capture. What runs in between must be device work only (no host
// synchronisation, allocation or communication). gpt_backend_graphs: 1 when the backend has them
// (CUDA); the CPU backend has none and fails if asked.
// Timeline marks taken while capturing (timeline_capture_begin .. timeline_capture_end, with the
// backend's clock) are event record nodes of the graph; first_mark is the step slot of the first
// of them at this launch (timeline_replay), so that the launch records its own marks, or -1 (no
// timeline, or no room in the step: they record into events nothing reads).
typedef struct GptGraph GptGraph;
int gpt_backend_graphs(void);
void gpt_graph_begin(void);
GptGraph* gpt_graph_end(const char* what);   // what: for messages, e.g. "micro-batch 1's step"
void gpt_graph_launch(GptGraph* g, int first_mark);
size_t gpt_graph_nodes(const GptGraph* g);  // kernels, GEMMs, copies, memsets, timeline marks
int gpt_graph_marks(const GptGraph* g);     // the timeline's marks among them
void gpt_graph_free(GptGraph* g);
// Picks this process's GPU before any other backend call: device local_rank of the node's
// (local_size ranks). With share = 1 (a transport that lets ranks share a GPU, mpi-staged) ranks
// beyond the device count wrap around (local_rank mod count). Returns 0, or -1 with a one-line
// message in err (ERR_LEN bytes) when the node has fewer GPUs than ranks and share = 0. The CPU
// backend has nothing to pick and returns 0. *device gets the device index (-1 on the CPU).
int gpt_backend_select_device(int local_rank, int local_size, int share, int* device, char* err);
// 0 when the backend's attention serves head size HS (the CPU: any; CUDA: the tensor-core
// kernels' sizes), else -1 with a one-line message in err naming what it serves.
int gpt_backend_head_size(int HS, char* err, size_t errlen);
// 1 when the model's buffers (parameters, gradients, activations) are host memory that the MPI
// comm layer can move (CPU); 0 for device memory (CUDA), which needs a device-memory transport.
int gpt_backend_host_memory(void);
// Elements per chunk of the parameter staging buffer (model/param_staging.h); 0: the backend keeps
// none (no master copy).
size_t gpt_backend_param_chunk(void);

// A clock for the trainer's timeline (comm/timeline.h) that times device work: marks on
// streams are events, resolved after the step; marks on *host_track are the host clock. NULL on
// the CPU (the trainer uses the timeline's host clock). *compute_track is the backend's stream.
// The clock lives as long as the process; one per process.
typedef struct {
    const TimelineClock* clock;
    void* ctx;
    void* compute_track;
    void* host_track;
} BackendClock;
int gpt_backend_clock(BackendClock* out);   // 1 when the backend has a device clock

// Parameters as num_params fp32 values in llm.c's tensor order. Where the backend stores the
// parameters in lower precision (CUDA bf16), from_host rounds every value to nearest into the
// parameters and sets the fp32 master weights of the master copy's range (m->master_params: all
// of them where no optimizer_create chose a shard first), and to_host returns the master weights:
// checkpoints keep fp32 precision.
void gpt_params_from_host(GPT* m, const float* host);
// An all-gather over the ranks whose master shards make up the parameters (ZeRO-1: every rank,
// shard r on rank r): count floats of send from each rank into recv, rank after rank; both in
// backend memory, complete in the backend's stream order on return.
typedef void (*GptGatherMaster)(void* ctx, const float* send, float* recv, size_t count);
// to_host fills host[begin, begin + count) only (host indexes every parameter; the rest is left
// as it is): a checkpoint's rank 0 needs every weight for the model file, the other ranks only
// the slice their state file holds. Where the master copy is a shard, to_host gathers the others'
// through `gather` in bounded chunks (every rank must call it, whatever its range); gather may be
// NULL where it is not.
void gpt_params_to_host(const GPT* m, float* host, size_t begin, size_t count,
                        GptGatherMaster gather, void* ctx);
// After gpt_params_from_host has loaded the parameters of a checkpoint written after `step`
// optimizer steps (step >= 1): makes the stored parameters exactly those of the run that was not
// interrupted. The CUDA bf16 optimizer rounds the master weights STOCHASTICALLY into the bf16
// parameters (model/optim_cuda.cuh), which from_host's round-to-nearest does not reproduce; this
// re-applies the rounding of optimizer step `step` (same random bits) to the loaded master
// weights. Clears the gradients. A no-op where the parameters are their own master copy (CPU,
// CUDA fp32) and for step 0. Where the master copy is a shard (ZeRO-1), only the shard's
// parameters are re-rounded: the caller then gathers the others' from their owners, as after
// every ZeRO-1 step.
void gpt_params_restore_rounding(GPT* m, int step);
// The first V logits of row n (= b * T + t) of the last forward.
void gpt_logits_row_to_host(const GPT* m, int n, float* host);
// The (B, T) per-token losses of the last gpt_loss or gpt_backward (multiple-choice evaluation
// scores rows by them). The host waits for the device.
void gpt_losses_to_host(const GPT* m, float* host);
// Sum of squares of gradient elements [begin, begin + count), in double, written to *out in
// backend memory (m->scalars + GPT_GRAD_SUMSQ): the host does not wait. Deterministic (a fixed
// order of summation).
void gpt_grad_sum_squares(const GPT* m, size_t begin, size_t count, double* out);
// Sum of squares of parameters [begin, begin + count) as the optimizer holds them: the fp32 master
// weights where the backend keeps a master copy (which must cover the range: under ZeRO-1 the
// shard), the parameters themselves elsewhere; in double, written to *out in backend memory
// (m->scalars + GPT_PARAM_SUMSQ), the host does not wait. Deterministic, as the gradients' sum.
void gpt_param_sum_squares(const GPT* m, size_t begin, size_t count, double* out);
// m->scalars[GPT_CLIP_SCALE] = step_grad_scale(loss sum, grad sum of squares, max_norm, limits)
// (model/optimizer.h: the clip factor, or OPTIMIZER_SKIP when either is not finite or above its
// limit), computed on the backend in double: what optimizer_step's grad_scale reads.
void gpt_clip_scale(GPT* m, double max_norm, StepLimits limits);
// The end of a training step: copies m->scalars to the host behind the work issued so far,
// without waiting (CUDA: into pinned memory, then an event); gpt_scalars_wait waits for that
// copy (the step's one host synchronisation) and returns the GPT_NUM_SCALARS values. One fetch at
// a time per process: every fetch is waited for before the next.
void gpt_scalars_fetch(const GPT* m);
void gpt_scalars_wait(double out[GPT_NUM_SCALARS]);

// AdamW state for parameter elements [begin, begin + count) of a model (ZeRO-1 shards it).
// Allocates everything the optimizer will use, the CUDA bf16 build's fp32 master weights included
// (of [begin, begin + count) only: the master copy then holds the shard), so that a model too
// large for the device fails here, before the parameters are initialised. muon (NULL: AdamW
// everywhere) makes it Muon's for the hidden matrices (model/muon.h), AdamW's for the rest; it
// needs every parameter (begin 0, no ZeRO-1 shard) and adds the Newton-Schulz scratch. The
// moments keep their layout: Muon's momentum is m of its matrices, whose v stays 0.
typedef struct Optimizer Optimizer;
Optimizer* optimizer_create(GPT* m, size_t begin, size_t count, const MuonConfig* muon);
void optimizer_free(Optimizer* o);
// One AdamW (or Muon and AdamW) step (t = 1, 2, ...) on the optimizer's range; gradients scaled by *grad_scale, one
// double in BACKEND memory (m->scalars + GPT_CLIP_SCALE), read by the update itself: the host
// never learns the clip factor.
void optimizer_step(Optimizer* o, GPT* m, int t, double lr, const AdamWConfig* cfg,
                    const double* grad_scale);
// The fp32 moments for checkpoints: m and v index the optimizer's range and get its elements
// [begin, begin + count) (the slice a state file holds), the rest left as it is; under Muon, whose
// momentum is gathered from the ranks that own its matrices (every rank must call), all of them.
void optimizer_moments_to_host(const Optimizer* o, float* m, float* v, size_t begin, size_t count);
// Host memory the backend's device copies into at full speed (CUDA: pinned), zeroed: the
// checkpoint buffers under --async-save, whose copy the steps wait for. NULL where the backend has
// none (CPU) or cannot lock that much (the caller then uses ordinary memory). Freed by
// gpt_host_pinned_free (NULL is a no-op).
void* gpt_host_pinned_alloc(size_t bytes);
void gpt_host_pinned_free(void* p);
void optimizer_moments_from_host(Optimizer* o, const float* m, const float* v);

#ifdef __cplusplus
}
#endif
