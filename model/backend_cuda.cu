// The CUDA backend of model/backend.h. Parameters, gradients and activations are floatX in device
// memory (bf16, or fp32 with -DGPT_CUDA_FP32); the AdamW moments are fp32 in device memory. In the
// bf16 build the model also keeps fp32 master weights (GPT.master_params): the optimizer updates
// them and writes the bf16 parameters by stochastic rounding (model/optim_cuda.cuh), and the host
// copies of the parameters (model files, checkpoints) are the master weights. Under ZeRO-1 each
// rank keeps the master weights of its optimizer shard only (GPT.master_begin, master_count). In
// the fp32 build the parameters are their own master copy (master_params stays NULL).
//
// Everything runs on the backend's one stream (model/backend_kernels_cuda.cuh). A training step's
// loss, gradient norm and clip factor stay on the device (GPT.scalars) until gpt_scalars_wait;
// the other functions that return data to the host synchronise the stream.
#ifndef GPT_BACKEND_CUDA
#define GPT_BACKEND_CUDA  // this file is the CUDA backend: real = floatX in model/gpt.h
#endif
#include <stdlib.h>
#include <string.h>

#include "model/backend.h"
#include "model/backend_kernels_cuda.cuh"
#include "model/timeline_clock_cuda.cuh"
#include "attention/partial_attention_cuda.cuh"
#include "train/gpu_peaks.h"
#include "model/layers.h"
#include "model/optim_cuda.cuh"
#include "model/param_staging.h"

struct Optimizer {
    size_t begin, count;
    float *m, *v;              // (count) fp32 moments of [begin, begin + count), device memory;
                               // under Muon the compact ones (model/muon.h): m the other tensors'
                               // and the owned matrices' momenta (muon_m_elements), v the other
                               // tensors' (v_count)
    size_t v_count;
    GPTConfig cfg;
    AdamWTensorTable table;    // which elements are weight-decayed
    // Muon (model/muon.h): fp32 scratch in device memory.
    int muon;
    MuonConfig muon_cfg;
    MuonScratch scratch;
    double* muon_sumsq;        // U's sum of squares (device)
    cublasHandle_t blas;       // the Newton-Schulz GEMMs, on the backend's stream
};

const char* gpt_backend_name(void) { return "cuda-" FLOATX_NAME; }

int gpt_backend_head_size(int HS, char* err, size_t errlen) {
    if (attention_cuda_head_size_ok(HS)) return 0;
    snprintf(err, errlen, "head size %d: the %s attention kernels take " ATTENTION_CUDA_HEAD_SIZES
             " (the tensor-core tiles are 16 wide)", HS, gpt_backend_name());
    return -1;
}

int gpt_backend_host_memory(void) { return 0; }

int gpt_backend_select_device(int local_rank, int local_size, int share, int* device, char* err) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1)
        return set_err(err, ERR_LEN, "no usable GPU on this node (%s); check the driver and "
                       "CUDA_VISIBLE_DEVICES, or use the CPU trainer (build/train_gpt)",
                       e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    if (local_rank >= count && !share)
        return set_err(err, ERR_LEN, "%d ranks on this node but %d GPU%s visible: expected one GPU "
                       "per rank (start fewer ranks per node, check CUDA_VISIBLE_DEVICES, or let "
                       "ranks share GPUs with --comm mpi-staged)", local_size, count,
                       count == 1 ? "" : "s");
    *device = local_rank % count;
    CUDA_CHECK(cudaSetDevice(*device));
    return 0;
}

void gpt_backend_device(BackendDevice* d) {
    memset(d, 0, sizeof *d);
    cuda_backend_context();   // the device is checked and the stream made
    int device = 0;
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    snprintf(d->name, sizeof d->name, "%s", p.name);
    const GpuPeak* peak = gpu_peak_lookup(p.name, p.totalGlobalMem);
    d->peak_flops = gpu_peak_flops(peak, sizeof(floatX) == sizeof(float));
    if (peak && d->peak_flops > 0)
        snprintf(d->peak_entry, sizeof d->peak_entry, "%s, %s %.1f TFLOP/s (%s)", peak->name,
                 sizeof(floatX) == sizeof(float) ? "fp32" : "bf16", d->peak_flops * 1e-12, peak->source);
    size_t free_bytes = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    d->memory_used = total - free_bytes;
    d->memory_total = total;
}

void gpt_backend_sync(void) { cuda_backend_sync(); }

int gpt_backend_counters(BackendCounters* out) {
    memset(out, 0, sizeof *out);
#ifdef CUDA_HOST
    CudaHostCounters c;
    cuda_host_counters(&c);
    out->launches = (long long)c.launches;
    out->d2h = (long long)c.d2h;
    out->syncs = (long long)c.syncs;
    out->graph_launches = (long long)c.graph_launches;
    out->graph_kernels = (long long)c.graph_kernels;
    return 1;
#else
    return 0;   // the CUDA runtime counts nothing of the kind
#endif
}

struct GptGraph {
    cudaGraph_t graph;            // kept: its node handles name the timeline's nodes in exec
    cudaGraphExec_t exec;
    size_t nodes;
    int marks;                    // event record nodes of the timeline's captured marks
    cudaGraphNode_t* mark_nodes;  // (marks)
    int* mark_index;              // (marks) the captured mark each records
    int bound;                    // 1: the nodes record into step slots (cuda_clock_bind)
};

int gpt_backend_graphs(void) { return 1; }

void gpt_graph_begin(void) {
    CUDA_CHECK(cudaStreamBeginCapture(cuda_backend_stream(), cudaStreamCaptureModeGlobal));
}

GptGraph* gpt_graph_end(const char* what) {
    cudaGraph_t g = NULL;
    const cudaError_t err = cudaStreamEndCapture(cuda_backend_stream(), &g);
    if (err != cudaSuccess)
        FAIL("the work between the capture's begin and end must be device work on the backend's "
             "stream and streams it forks and joins (no synchronisation, allocation or NCCL call)",
             "capturing %s as a CUDA graph failed: %s (%s)", what, cudaGetErrorName(err),
             cudaGetErrorString(err));
    GptGraph* graph = (GptGraph*)xcalloc(1, sizeof *graph, "CUDA graph");
    graph->graph = g;
    CUDA_CHECK(cudaGraphGetNodes(g, NULL, &graph->nodes));
    // The timeline's marks (comm/timeline.h, "CUDA GRAPHS"): the event record nodes it captured.
    cudaGraphNode_t* nodes = (cudaGraphNode_t*)xcalloc(graph->nodes + 1, sizeof *nodes, "graph nodes");
    size_t n = graph->nodes;
    CUDA_CHECK(cudaGraphGetNodes(g, nodes, &n));
    graph->mark_nodes = (cudaGraphNode_t*)xcalloc(n + 1, sizeof *graph->mark_nodes, "graph marks");
    graph->mark_index = (int*)xcalloc(n + 1, sizeof *graph->mark_index, "graph marks");
    for (size_t i = 0; i < n; i++) {
        cudaGraphNodeType type;
        CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &type));
        if (type != cudaGraphNodeTypeEventRecord) continue;
        cudaEvent_t event;
        CUDA_CHECK(cudaGraphEventRecordNodeGetEvent(nodes[i], &event));
        const int k = cuda_clock_captured_index(event);
        if (k < 0) continue;
        graph->mark_nodes[graph->marks] = nodes[i];
        graph->mark_index[graph->marks++] = k;
    }
    free(nodes);
    CUDA_CHECK(cudaGraphInstantiate(&graph->exec, g, 0));
    return graph;
}

void gpt_graph_launch(GptGraph* g, int first_mark) {
    if (g->marks > 0 && (first_mark >= 0 || g->bound)) {
        cuda_clock_bind(g->exec, g->mark_nodes, g->mark_index, g->marks, first_mark);
        g->bound = first_mark >= 0;
    }
    CUDA_CHECK(cudaGraphLaunch(g->exec, cuda_backend_stream()));
}

int gpt_graph_marks(const GptGraph* g) { return g->marks; }

size_t gpt_graph_nodes(const GptGraph* g) { return g->nodes; }

void gpt_graph_free(GptGraph* g) {
    if (!g) return;
    CUDA_CHECK(cudaGraphExecDestroy(g->exec));
    CUDA_CHECK(cudaGraphDestroy(g->graph));
    free(g->mark_nodes);
    free(g->mark_index);
    free(g);
}

static const int master_weights = sizeof(floatX) < sizeof(float);

static float* alloc_f32(size_t n, const char* what) {
    float* p = NULL;
    const size_t bytes = (n ? n : 1) * sizeof(float);
    const cudaError_t err = cudaMalloc((void**)&p, bytes);
    if (err != cudaSuccess)
        FAIL(cuda_error_hint(err), "cudaMalloc of %zu bytes (%.1f MiB) for %s failed: %s (%s)", bytes,
             bytes / 1048576.0, what, cudaGetErrorName(err), cudaGetErrorString(err));
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cuda_backend_stream()));
    return p;
}

// The Philox seed of AdamW's stochastic rounding at step t: a function of t only, so a resumed
// run draws what the uninterrupted one drew (the kernel also offsets its stream by t).
static unsigned long long adamw_seed(int t) {
    unsigned long long z = 0x243f6a8885a308d3ULL + 0x9e3779b97f4a7c15ULL * (unsigned long long)t;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// --- Parameters ----------------------------------------------------------------------------------

// Elements per chunk of the parameter staging (model/param_staging.h), which stands in for a
// full-size buffer when loading beside a master shard, gathering the shards and re-rounding.
#ifdef CUDA_HOST
enum { PARAM_CHUNK = PARAM_STAGING_CHUNK_HOST_RUNTIME };
#else
enum { PARAM_CHUNK = PARAM_STAGING_CHUNK };
#endif
size_t gpt_backend_param_chunk(void) { return PARAM_CHUNK; }

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

// The master copy's elements that are real parameters: [*lo, *hi), empty past num_params.
static void master_range(const GPT* m, size_t* lo, size_t* hi) {
    *lo = min_size(m->master_begin, m->num_params);
    *hi = min_size(m->master_begin + m->master_count, m->num_params);
}

// A master copy of [begin, begin + count), zeroed (the padding past num_params stays zero), and
// the parameter staging beside it.
static void alloc_master(GPT* m, size_t begin, size_t count) {
    m->master_params = alloc_f32(count, "fp32 master weights");
    m->param_staging = alloc_f32(param_staging_floats(m->padded_params, PARAM_CHUNK), "parameter staging");
    m->master_begin = begin;
    m->master_count = count;
}

void gpt_params_from_host(GPT* m, const float* host) {
    CHECK(m->owns_params, "caller bug", "gpt_params_from_host on a model that shares its parameters");
    cudaStream_t s = cuda_backend_stream();
    const size_t n = m->num_params;
    if (!master_weights) {
        CUDA_CHECK(cudaMemcpyAsync(m->params_memory, host, n * sizeof(float), cudaMemcpyHostToDevice, s));
        CUDA_CHECK(cudaStreamSynchronize(s));  // the host array is free again
        return;
    }
    if (!m->master_params) alloc_master(m, 0, m->padded_params);   // no optimizer chose a shard
    size_t lo, hi;
    master_range(m, &lo, &hi);
    CUDA_CHECK(cudaMemcpyAsync(m->master_params + (lo - m->master_begin), host + lo,
                               (hi - lo) * sizeof(float), cudaMemcpyHostToDevice, s));
    // Every parameter rounded to nearest by the one conversion kernel: a chunk inside the master
    // copy converts from it, any other goes through bounded staging (same values, same bits).
    for (size_t b = 0; b < n; b += PARAM_CHUNK) {
        const size_t e = min_size(b + PARAM_CHUNK, n);
        const float* src;
        if (b >= lo && e <= hi) {
            src = m->master_params + (b - m->master_begin);
        } else {   // the stream orders this copy after the previous chunk's conversion
            CUDA_CHECK(cudaMemcpyAsync(m->param_staging, host + b, (e - b) * sizeof(float),
                                       cudaMemcpyHostToDevice, s));
            src = m->param_staging;
        }
        cuda_backend_float_to_floatx(m->params_memory + b, src, e - b);
    }
    CUDA_CHECK(cudaStreamSynchronize(s));  // the host array is free again
}

// floatX device values to host fp32, through a temporary host buffer.
static void floatx_to_host(float* host, const floatX* dev, size_t n) {
    cudaStream_t s = cuda_backend_stream();
    if (!master_weights) {  // floatX is float
        CUDA_CHECK(cudaMemcpyAsync(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        return;
    }
    floatX* tmp = (floatX*)xmalloc((n ? n : 1) * sizeof(floatX), "host staging of device values");
    CUDA_CHECK(cudaMemcpyAsync(tmp, dev, n * sizeof(floatX), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < n; i++) host[i] = to_float(tmp[i]);
    free(tmp);
}

// The master shards of all ranks (shard r = [r S, (r + 1) S), S = master_count) to the host:
// each round gathers the next `k` elements of every shard into bounded staging and copies the
// part of each rank's piece within [begin, end) to its place (the padding past num_params is
// left out). Every round gathers, whatever the range: the other ranks' copies need this one's.
static void gather_master_to_host(const GPT* m, float* host, size_t begin, size_t end,
                                  GptGatherMaster gather, void* ctx) {
    CHECK(gather, "caller bug", "gpt_params_to_host: the master copy is a shard and no gather given");
    cudaStream_t s = cuda_backend_stream();
    const size_t S = m->master_count, world = m->padded_params / S, n = m->num_params;
    const size_t k = min_size(S, PARAM_CHUNK / world ? PARAM_CHUNK / world : 1);
    CHECK(world * k <= param_staging_floats(m->padded_params, PARAM_CHUNK), "caller bug",
          "gpt_params_to_host: %zu ranks x %zu elements over the parameter staging", world, k);
    float* staging = m->param_staging;
    for (size_t j = 0; j < S; j += k) {
        const size_t kk = min_size(k, S - j);
        gather(ctx, m->master_params + j, staging, kk);
        for (size_t r = 0; r < world; r++) {
            const size_t at = r * S + j;
            const size_t lo = at > begin ? at : begin, hi = min_size(min_size(at + kk, n), end);
            if (lo < hi)
                CUDA_CHECK(cudaMemcpyAsync(host + lo, staging + r * kk + (lo - at),
                                           (hi - lo) * sizeof(float), cudaMemcpyDeviceToHost, s));
        }
        CUDA_CHECK(cudaStreamSynchronize(s));  // the staging is free for the next round
    }
}

void gpt_params_to_host(const GPT* m, float* host, size_t begin, size_t count,
                        GptGatherMaster gather, void* ctx) {
    cudaStream_t s = cuda_backend_stream();
    CHECK(begin <= m->num_params && count <= m->num_params - begin, "caller bug",
          "gpt_params_to_host: [%zu, +%zu) of %zu parameters", begin, count, m->num_params);
    if (!m->master_params) {
        floatx_to_host(host + begin, m->params_memory + begin, count);
    } else if (m->master_begin == 0 && m->master_count >= m->num_params) {
        CUDA_CHECK(cudaMemcpyAsync(host + begin, m->master_params + begin, count * sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
    } else {
        CHECK(m->padded_params % m->master_count == 0 && m->master_begin % m->master_count == 0,
              "caller bug", "gpt_params_to_host: master shard [%zu, +%zu) of %zu is not one of "
              "equal shards", m->master_begin, m->master_count, m->padded_params);
        gather_master_to_host(m, host, begin, begin + count, gather, ctx);
    }
}

void* gpt_host_pinned_alloc(size_t bytes) {
    void* p = NULL;
    const cudaError_t err = cudaMallocHost(&p, bytes ? bytes : 1);
    if (err == cudaErrorMemoryAllocation) {   // more than the system lets us lock
        (void)cudaGetLastError();
        return NULL;
    }
    CUDA_CHECK(err);
    memset(p, 0, bytes);
    return p;
}

void gpt_host_pinned_free(void* p) {
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

void gpt_params_restore_rounding(GPT* m, int step) {
    if (!m->master_params || step < 1) return;
    // One AdamW call that changes nothing but re-rounds: zero gradients and zero moments with
    // lr = 0 and no weight decay leave every master value exactly as it is (p -= 0 * p + 0 *
    // 0 / (0 + eps)), and the kernel then writes the bf16 parameters from it with step `step`'s
    // seed and offset, i.e. the very bits that step wrote. Moments go to zeroed scratch (they stay
    // zero, so one chunk of scratch serves every chunk of parameters). Only the master copy's
    // range: a shard's owner re-rounds it, the others gather it (model/backend.h).
    size_t lo, hi;
    master_range(m, &lo, &hi);
    const size_t scratch_n = min_size(hi - lo, PARAM_CHUNK);   // two of them fit the staging
    float* zm = m->param_staging;
    float* zv = m->param_staging + scratch_n;
    CUDA_CHECK(cudaMemsetAsync(zm, 0, 2 * scratch_n * sizeof(float), cuda_backend_stream()));
    tensor_zero(m->grads_memory, m->padded_params);
    AdamWTensorTable table;
    memset(&table, 0, sizeof table);  // no tensor is decayed (the decay rate is 0 anyway)
    for (size_t b = lo; b < hi; b += PARAM_CHUNK) {
        const size_t e = min_size(b + PARAM_CHUNK, hi);
        adamw_update_cuda(m->params_memory, m->master_params + (b - m->master_begin),
                          m->grads_memory, zm, zv, b, e, &table, step, 0.0, 0.5, 0.5, 1.0, 0.0,
                          NULL, adamw_seed(step), cuda_backend_stream());
    }
}

void gpt_logits_row_to_host(const GPT* m, int n, float* host) {
    CHECK(n >= 0 && n < m->B * m->T, "caller bug", "gpt_logits_row_to_host: row %d of %d", n, m->B * m->T);
    floatx_to_host(host, m->acts.logits + (size_t)n * m->cfg.Vp, (size_t)m->cfg.V);
}

void gpt_losses_to_host(const GPT* m, float* host) {   // real_stat is float here
    cudaStream_t s = cuda_backend_stream();
    CUDA_CHECK(cudaMemcpyAsync(host, m->acts.losses, (size_t)m->B * m->T * sizeof(float),
                               cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

// --- Gradient norm, clip factor and the step's read -----------------------------------------------

// The norm kernels' partials (allocated at the first call, the first step, and kept for the
// process), or NULL after *out = 0 for an empty range.
static double* norm_partials(CudaBackendContext* c, size_t count, double* out) {
    if (!c->norm_partials)
        CUDA_CHECK(cudaMalloc((void**)&c->norm_partials, GLOBAL_NORM_MAX_BLOCKS * sizeof(double)));
    if (count > 0) return c->norm_partials;
    CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), c->stream));
    return NULL;
}

void gpt_grad_sum_squares(const GPT* m, size_t begin, size_t count, double* out) {
    CudaBackendContext* c = cuda_backend_context();
    double* partials = norm_partials(c, count, out);
    if (partials)
        global_norm_squared_cuda(out, m->grads_memory + begin, count, partials, 0, c->stream);
}

void gpt_param_sum_squares(const GPT* m, size_t begin, size_t count, double* out) {
    CudaBackendContext* c = cuda_backend_context();
    double* partials = norm_partials(c, count, out);
    if (!partials) return;
    if (!m->master_params) {   // fp32 storage: the parameters are their own master copy
        global_norm_squared_cuda(out, m->params_memory + begin, count, partials, 0, c->stream);
        return;
    }
    CHECK(begin >= m->master_begin && begin + count <= m->master_begin + m->master_count,
          "caller bug", "gpt_param_sum_squares: elements [%zu, %zu) outside the master copy's "
          "[%zu, %zu)", begin, begin + count, m->master_begin, m->master_begin + m->master_count);
    global_norm_squared_f32_cuda(out, m->master_params + (begin - m->master_begin), count,
                                 partials, 0, c->stream);
}

void gpt_clip_scale(GPT* m, double max_norm, StepLimits limits) {
    clip_scale_cuda(m->scalars + GPT_CLIP_SCALE, m->scalars + GPT_LOSS_SUM,
                    m->scalars + GPT_GRAD_SUMSQ, max_norm, limits.loss_sum, limits.sumsq,
                    cuda_backend_stream());
}

void gpt_scalars_fetch(const GPT* m) {
    CudaBackendContext* c = cuda_backend_context();
    CHECK(!c->scalars_pending, "caller bug", "gpt_scalars_fetch: the previous fetch was not waited for");
    if (!c->host_scalars) {   // the first step's end: pinned, so that the copy is asynchronous
        CUDA_CHECK(cudaMallocHost((void**)&c->host_scalars, GPT_NUM_SCALARS * sizeof(double)));
        CUDA_CHECK(cudaEventCreateWithFlags(&c->scalars_copied, cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaMemcpyAsync(c->host_scalars, m->scalars, GPT_NUM_SCALARS * sizeof(double),
                               cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaEventRecord(c->scalars_copied, c->stream));
    c->scalars_pending = 1;
}

void gpt_scalars_wait(double out[GPT_NUM_SCALARS]) {
    CudaBackendContext* c = cuda_backend_context();
    CHECK(c->scalars_pending, "caller bug", "gpt_scalars_wait without gpt_scalars_fetch");
    CUDA_CHECK(cudaEventSynchronize(c->scalars_copied));
    memcpy(out, c->host_scalars, GPT_NUM_SCALARS * sizeof(double));
    c->scalars_pending = 0;
}

// --- AdamW ---------------------------------------------------------------------------------------

Optimizer* optimizer_create(GPT* m, size_t begin, size_t count, const MuonConfig* muon) {
    Optimizer* o = (Optimizer*)xcalloc(1, sizeof *o, "optimizer");
    o->begin = begin;
    o->count = count;
    o->cfg = m->cfg;
    o->v_count = muon ? muon_v_elements(&m->cfg, m->num_params) : count;
    o->m = alloc_f32(muon ? muon_m_elements(&m->cfg, muon, m->num_params) : count,
                     "AdamW first moments");
    o->v = alloc_f32(o->v_count, "AdamW second moments");
    // The master weights of the optimizer's range only: under ZeRO-1 the shard (the bf16
    // parameters of the others arrive by the all-gather after each step).
    if (master_weights && !m->master_params) alloc_master(m, begin, count);
    CHECK(!m->master_params || (m->master_begin <= begin &&
                                begin + count <= m->master_begin + m->master_count),
          "caller bug", "optimizer_create: range [%zu, +%zu) outside the master copy [%zu, +%zu)",
          begin, count, m->master_begin, m->master_count);
    int decays[NUM_PARAM_TENSORS];
    for (int k = 0; k < NUM_PARAM_TENSORS; k++) decays[k] = gpt_param_decays(k);
    o->table = adamw_tensor_table(m->param_sizes, decays, NUM_PARAM_TENSORS);
    if (muon) {
        CHECK(begin == 0 && count >= m->num_params, "caller bug",
              "optimizer_create: Muon needs every parameter, not [%zu, +%zu)", begin, count);
        o->muon = 1;
        o->muon_cfg = *muon;
        // The scratch, then U's sum of squares (a double: after an even number of floats).
        const size_t n = (muon_scratch_elements(&m->cfg) + 1) / 2 * 2;
        float* block = alloc_f32(n + 2, "Muon's Newton-Schulz scratch");
        o->scratch = muon_scratch_split(&m->cfg, block, sizeof(float));
        o->muon_sumsq = (double*)(block + n);
        CUDA_CHECK(cublasCreate(&o->blas));
        CUDA_CHECK(cublasSetStream(o->blas, cuda_backend_stream()));
    }
    cuda_backend_sync();
    return o;
}

void optimizer_free(Optimizer* o) {
    if (!o) return;
    tensor_free(o->m);
    tensor_free(o->v);
    if (o->muon) {
        tensor_free(o->scratch.u);
        CUDA_CHECK(cublasDestroy(o->blas));
    }
    free(o);
}

// --- Muon's steps on device buffers (model/muon.h) ---

typedef struct {
    GPT* model;
    Optimizer* o;
    const double* grad_scale;   // device
    int t;                      // AdamW's step and settings, for the tensors Muon leaves
    double lr;
    const AdamWConfig* adam;
} CudaMuon;

static void cuda_muon_momentum(void* ctx, size_t offset, size_t n, size_t m_slot, const MuonConfig* c,
                               void* u) {
    CudaMuon* q = (CudaMuon*)ctx;
    muon_momentum_cuda(q->o->m + m_slot, (float*)u, q->model->grads_memory + offset, n,
                       c->momentum, c->nesterov, q->grad_scale, cuda_backend_stream());
}

static void cuda_muon_normalize(void* ctx, int rows, int cols) {
    CudaMuon* q = (CudaMuon*)ctx;
    CudaBackendContext* c = cuda_backend_context();
    const size_t n = (size_t)rows * cols;
    double* partials = norm_partials(c, n, q->o->muon_sumsq);
    if (partials)
        global_norm_squared_f32_cuda(q->o->muon_sumsq, (const float*)q->o->scratch.u, n, partials, 0,
                                     c->stream);
    muon_normalize_cuda((float*)q->o->scratch.x, (const float*)q->o->scratch.u, rows, cols,
                        q->o->muon_sumsq, c->stream);
}

static void cuda_muon_gemm(void* ctx, int ta, int tb, int M, int N, int K, double alpha,
                           const void* A, int lda, const void* B, int ldb, double beta, void* C, int ldc) {
    const Optimizer* o = ((CudaMuon*)ctx)->o;
    muon_gemm_cuda(o->blas, o->muon_cfg.matmul_prec, ta, tb, M, N, K, alpha, (const float*)A, lda,
                   (const float*)B, ldb, beta, (float*)C, ldc);
}

static void cuda_muon_copy(void* ctx, void* dst, const void* src, size_t n) {
    (void)ctx;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice,
                               cuda_backend_stream()));
}

static void cuda_muon_update(void* ctx, size_t offset, int rows, int cols, const void* x, double step,
                             double decay) {
    CudaMuon* q = (CudaMuon*)ctx;
    // The master copy covers every parameter from 0 (Muon has no ZeRO-1 shard).
    muon_update_cuda(q->model->params_memory, q->model->master_params, (const float*)x, offset, rows,
                     cols, step, decay, q->grad_scale, adamw_seed(q->t), q->t, cuda_backend_stream());
}

static void cuda_muon_adamw(void* ctx, size_t begin, size_t end, size_t slot) {
    CudaMuon* q = (CudaMuon*)ctx;   // the master copy covers every parameter
    GPT* m = q->model;
    const AdamWConfig* a = q->adam;
    adamw_update_cuda(m->params_memory, m->master_params ? m->master_params + begin : NULL,
                      m->grads_memory, q->o->m + slot, q->o->v + slot, begin, end, &q->o->table,
                      q->t, q->lr, a->beta1, a->beta2, a->eps, a->weight_decay, q->grad_scale,
                      adamw_seed(q->t), cuda_backend_stream());
}

static const MuonOps cuda_muon_ops = {cuda_muon_momentum, cuda_muon_normalize, cuda_muon_gemm,
                                      cuda_muon_copy, cuda_muon_update, cuda_muon_adamw};

void optimizer_step(Optimizer* o, GPT* m, int t, double lr, const AdamWConfig* cfg,
                    const double* grad_scale) {
    // The range may reach into the zero padding past the last parameter (ZeRO-1 shards).
    const size_t end = o->begin + o->count < m->num_params ? o->begin + o->count : m->num_params;
    if (end <= o->begin) return;
    if (o->muon) {
        CudaMuon q = {m, o, grad_scale, t, lr, cfg};
        muon_step(&cuda_muon_ops, &q, &o->scratch, &m->cfg, &o->muon_cfg, lr, cfg->weight_decay);
        return;
    }
    // master, m and v are indexed from the shard's first element (model/optim_cuda.cuh).
    float* master = m->master_params ? m->master_params + (o->begin - m->master_begin) : NULL;
    adamw_update_cuda(m->params_memory, master, m->grads_memory, o->m, o->v, o->begin, end,
                      &o->table, t, lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay,
                      grad_scale, adamw_seed(t), cuda_backend_stream());
}

// Muon's first moment between the device and the host (muon_m_to_host), a span at a time: each
// copy is complete before the next broadcast reuses the scratch it may read.
static void cuda_to_host(void* ctx, float* dst, const void* src, size_t n) {
    (void)ctx;
    cudaStream_t s = cuda_backend_stream();
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

static void cuda_from_host(void* ctx, void* dst, const float* src, size_t n) {
    (void)ctx;
    cudaStream_t s = cuda_backend_stream();
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

static const MuonHostOps cuda_host_ops = {cuda_to_host, cuda_from_host};

void optimizer_moments_to_host(const Optimizer* o, float* m, float* v, size_t begin, size_t count) {
    cudaStream_t s = cuda_backend_stream();
    CHECK(begin <= o->count && count <= o->count - begin, "caller bug",
          "optimizer_moments_to_host: [%zu, +%zu) of %zu", begin, count, o->count);
    if (!o->muon) {
        CUDA_CHECK(cudaMemcpyAsync(m + begin, o->m + begin, count * sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaMemcpyAsync(v + begin, o->v + begin, count * sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        return;
    }
    muon_m_to_host(&cuda_host_ops, NULL, &o->scratch, &o->cfg, &o->muon_cfg, o->m, m, o->count);
    // The compact second moment, spread over its tensors' places (0 for the matrices).
    float* compact = (float*)xmalloc(o->v_count * sizeof(float) + 1, "second moments");
    CUDA_CHECK(cudaMemcpyAsync(compact, o->v, o->v_count * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    muon_v_expand(&o->cfg, compact, v, o->count);
    free(compact);
}

void optimizer_moments_from_host(Optimizer* o, const float* m, const float* v) {
    cudaStream_t s = cuda_backend_stream();
    if (o->muon)
        muon_m_from_host(&cuda_host_ops, NULL, &o->scratch, &o->cfg, &o->muon_cfg, o->m, m);
    else
        CUDA_CHECK(cudaMemcpyAsync(o->m, m, o->count * sizeof(float), cudaMemcpyHostToDevice, s));
    float* compact = NULL;
    if (o->muon) {
        compact = (float*)xmalloc(o->v_count * sizeof(float) + 1, "second moments");
        muon_v_compact(&o->cfg, v, compact);
    }
    CUDA_CHECK(cudaMemcpyAsync(o->v, compact ? compact : v, o->v_count * sizeof(float),
                               cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    free(compact);
}
