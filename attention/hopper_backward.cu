// The Hopper backward's launcher (sm_90a; the kernel: attention/hopper_backward.cuh, TMA, wgmma,
// dQ reduced by TMA in the semaphores' order): the schedule the environment asks for, its tensor
// maps and its launch (attention/hopper_launch.h). A file of its own, as the forward's
// (attention/hopper_forward.cu): a mutant of hopper_backward.cuh recompiles only this file.
#include "attention/hopper_launch.h"

#ifndef GPT_CUDA_FP32
#include "attention/attention_env.h"

namespace {

#include "attention/hopper_backward.cuh"
#include "attention/hopper_maps.cuh"

// The Hopper backward's schedule (hopper_backward.cuh's HopBwdSched): serial (the default, each
// GEMM waited for before the next step), overlap, regs (overlap with K and V in registers at HS
// 64), early (regs, and the next query tile's S^T issued behind this one's dQ), pingpong (early,
// and at HS 64 the consumers taking turns at the GEMMs) or ds2 (early with two dS^T buffers, no
// barrier of both consumers after dQ), all with the same bits; or q128 (the launcher's own value:
// overlap with 128-query tiles at HS 64 where Tq is a multiple of 128, its own bits as dQ sums all
// 128 keys in one GEMM; overlap elsewhere):
// ATTENTION_BWD_HOPPER=serial|overlap|regs|early|pingpong|ds2|q128, to time them on an H100 or H200.
enum { HOP_BWD_Q128 = HOP_BWD_DS2 + 1 };
static int hopper_backward_schedule(void) {
    const char* env = getenv("ATTENTION_BWD_HOPPER");
    if (!env || !*env || !strcmp(env, "serial")) return HOP_BWD_SERIAL;
    if (!strcmp(env, "overlap")) return HOP_BWD_OVERLAP;
    if (!strcmp(env, "early")) return HOP_BWD_EARLY;
    if (!strcmp(env, "pingpong")) return HOP_BWD_PINGPONG;
    if (!strcmp(env, "ds2")) return HOP_BWD_DS2;
    if (!strcmp(env, "q128")) return HOP_BWD_Q128;
    CHECK(!strcmp(env, "regs"), "set it to serial, overlap, regs, early, pingpong, ds2 or q128, or unset it",
          "ATTENTION_BWD_HOPPER: expected serial, overlap, regs, early, pingpong, ds2 or q128, found '%s'", env);
    return HOP_BWD_KV_REGS;
}
// Whether a Hopper backward in schedule sched of head size HS over Tq queries takes 128-query tiles.
static bool hopper_backward_q128(int sched, int HS, int Tq) {
    return sched == HOP_BWD_Q128 && HS == 64 && Tq % 128 == 0;
}

template <int HS, int SCHED, int DN, int BQ = FA_BWD_BQ, bool LOWER = false> struct HopperBackwardSchedule {
    static void launch(unsigned blocks, cudaStream_t stream, const AttnArgs& a, int NH) {
        typedef HopBwdOf<HS, SCHED, BQ> F;
        CUDA_RAISE_DYNAMIC_SMEM((hopper_backward_kernel<HS, SCHED, DN, BQ, LOWER>), F::SMEM, "head size", HS);
        const int C = NH * HS;
        const long long kr = (long long)a.B * a.Tk, qr = (long long)a.B * a.Tq, heads = (long long)a.B * NH;
        const CUtensorMap km = hopper_tensor_map(a.k, HS, NH, kr, a.ldk, F::BK, "K");
        const CUtensorMap vm = hopper_tensor_map(a.v, HS, NH, kr, a.ldv, F::BK, "V");
        const CUtensorMap qm = hopper_tensor_map(a.q, HS, NH, qr, a.ldq, F::BQ, "Q");
        const CUtensorMap gm = hopper_tensor_map(a.dout, HS, NH, qr, a.lddo, F::BQ, "dO");
        const CUtensorMap lm = tma_map_2d(a.lse_in, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sizeof(float), a.Tq, heads, a.Tq,
                                          F::BQ, 1, CU_TENSOR_MAP_SWIZZLE_NONE, "lse");
        const CUtensorMap dm = tma_map_2d(a.d, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sizeof(float), a.Tq, heads, a.Tq, F::BQ,
                                          1, CU_TENSOR_MAP_SWIZZLE_NONE, "D");
        float* dq = a.dq_acc ? a.dq_acc : a.dq;
        const CUtensorMap dqm = tma_map_heads(dq, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sizeof(float), HS, NH, qr,
                                              a.dq_acc ? C : a.lddq, F::HP, F::BQ, CU_TENSOR_MAP_SWIZZLE_NONE, "dQ");
        LAUNCH((hopper_backward_kernel<HS, SCHED, DN, BQ, LOWER>), blocks, F::THREADS, F::SMEM, stream, km, vm, qm, gm, lm, dm,
               dqm, a, NH);
    }
};
template <int HS, int DN> void launch_hopper_backward_dn(unsigned blocks, cudaStream_t stream, const AttnArgs& a, int NH) {
    int sched = hopper_backward_schedule();
    // A call under a sliding window or a document mask (masked_below): the LOWER instance of the
    // default schedule (the others are timing experiments on causal calls).
    if (masked_below(a)) {
        HopperBackwardSchedule<HS, HOP_BWD_SERIAL, DN, FA_BWD_BQ, true>::launch(blocks, stream, a, NH);
        return;
    }
    // (pingpong's turns are HS 64's: elsewhere it is early, one instance fewer to compile; q128's
    // tiles too: elsewhere, and where Tq is not a multiple of 128, it is overlap)
    if constexpr (HS == 64) {
        if (hopper_backward_q128(sched, HS, a.Tq)) {
            HopperBackwardSchedule<HS, HOP_BWD_OVERLAP, DN, 128>::launch(blocks, stream, a, NH);
            return;
        }
        if (sched == HOP_BWD_PINGPONG) {
            HopperBackwardSchedule<HS, HOP_BWD_PINGPONG, DN>::launch(blocks, stream, a, NH);
            return;
        }
    }
    if (sched == HOP_BWD_Q128) sched = HOP_BWD_OVERLAP;
    if (sched == HOP_BWD_DS2) HopperBackwardSchedule<HS, HOP_BWD_DS2, DN>::launch(blocks, stream, a, NH);
    else if (sched >= HOP_BWD_EARLY) HopperBackwardSchedule<HS, HOP_BWD_EARLY, DN>::launch(blocks, stream, a, NH);
    else if (sched == HOP_BWD_KV_REGS) HopperBackwardSchedule<HS, HOP_BWD_KV_REGS, DN>::launch(blocks, stream, a, NH);
    else if (sched == HOP_BWD_OVERLAP) HopperBackwardSchedule<HS, HOP_BWD_OVERLAP, DN>::launch(blocks, stream, a, NH);
    else HopperBackwardSchedule<HS, HOP_BWD_SERIAL, DN>::launch(blocks, stream, a, NH);
}

template <int HS> void launch_hopper_backward(const AttnArgs& a, int NH, unsigned blocks, cudaStream_t stream) {
    const bool exact = hopper_hs80_exact();   // (read at every HS, so a bad value is always refused)
    if constexpr (HS == 80) {
        if (exact) launch_hopper_backward_dn<HS, 80>(blocks, stream, a, NH);
        else launch_hopper_backward_dn<HS, 64>(blocks, stream, a, NH);
    } else {
        launch_hopper_backward_dn<HS, 64>(blocks, stream, a, NH);
    }
}

}  // namespace

void hopper_backward_launch(const AttnArgs& a, int HS, int NH, unsigned blocks, cudaStream_t stream) {
    switch (HS) {
    case 64: launch_hopper_backward<64>(a, NH, blocks, stream); break;
    case 80: launch_hopper_backward<80>(a, NH, blocks, stream); break;
    case 128: launch_hopper_backward<128>(a, NH, blocks, stream); break;
    default: FAIL("a caller bug: use_hopper_backward takes HS 64, 80 and 128", "Hopper backward: head size %d", HS);
    }
}

bool hopper_backward_takes_q128(int HS, int Tq) { return hopper_backward_q128(hopper_backward_schedule(), HS, Tq); }
#endif
