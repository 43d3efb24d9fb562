// What a schedule computes: its calls of the partial-attention operations (attention/dist_ops.h),
// recorded by wrappers the linker puts between the schedules and the backend
// (-Wl,--wrap=dist_attention_forward etc., explain/explain.mk), so the schedules run unchanged.
// The problems (query and key positions, sizes) are the blocks of the T x T matrix a rank works on.
#pragma once
#include "attention/partial_attention.h"
#include "comm/comm.h"

typedef enum { CALL_FORWARD, CALL_BACKWARD, CALL_MERGE } CallKind;

typedef struct {
    CallKind kind;
    CommPhase phase;
    AttentionProblem p;   // forward and backward; merges: B, NH, HS and Tq = rows merged
} ComputeCall;

typedef struct {
    int run_kernels;      // 1: call the backend (real results); 0: record only (shapes suffice)
    CommPhase phase;      // the phase the caller is running, stored with each call
    ComputeCall* call;
    int n, cap;
} ComputeRecorder;

// Calls from now on are recorded into r (NULL: none; the kernels run as usual).
void compute_record_into(ComputeRecorder* r);
void compute_recorder_free(ComputeRecorder* r);
