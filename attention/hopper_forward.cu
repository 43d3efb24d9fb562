// The Hopper forward's launcher (sm_90a; the kernel: attention/hopper_forward.cuh, TMA, wgmma, one
// producer and two or three consumer warpgroups): the form the environment asks for, its tensor maps
// and its grid (attention/hopper_launch.h). A file of its own, next to the FlashAttention-2-class
// kernels of attention/partial_attention.cu, which calls it: each compiles alone (nvcc, two at a time),
// and a mutant of hopper_forward.cuh (attention/cuda_attention.mk) recompiles only this file.
#include "attention/hopper_launch.h"

#ifndef GPT_CUDA_FP32
#include "attention/attention_env.h"

namespace {

#include "attention/hopper_forward.cuh"
#include "attention/hopper_maps.cuh"

// The Hopper forward's S GEMM: a wgmma per 64 keys (n64, the default) or one per 128 (n128,
// hopper_forward.cuh's hop_issue_s): ATTENTION_FWD_HOPPER=n64|n128, to time both on an H100 or H200.
static bool hopper_forward_wide_s(void) { return env_switch("ATTENTION_FWD_HOPPER", "n64", "n128"); }

// Its query rows per block at HS 64: 128 (two consumer warpgroups, the default) or 192 (three;
// HopFwd): ATTENTION_FWD_HOPPER_ROWS=128|192. HS 80 and 128 always take 128.
static bool hopper_forward_three_consumers(void) { return env_switch("ATTENTION_FWD_HOPPER_ROWS", "128", "192"); }

// Its grid: a block per query tile (tiles, the default), or one block per SM that takes tile after
// tile (persistent; hopper_forward.cuh's hopper_forward_kernel): ATTENTION_FWD_HOPPER_GRID=
// tiles|persistent. fp32 O at HS 128 stays on the grid of tiles (HopFwd::PERSISTENT_FP32), as do
// positions past 2^29 (positions_fit_32). ATTENTION_FWD_HOPPER_BLOCKS=N caps the persistent grid
// at N blocks (tests: on their small shapes a block then takes several tiles, on a GPU too).
static bool hopper_forward_persistent(void) { return env_switch("ATTENTION_FWD_HOPPER_GRID", "tiles", "persistent"); }

// Whether visible_keys_as<true> is exact for every query of a: each term of qoff + qstride i -
// koff under 2^29 in size, so the sum stays inside an int.
static bool positions_fit_32(const AttnArgs& a) {
    const long long lim = 1LL << 29;
    return a.qoff > -lim && a.qoff < lim && a.koff > -lim && a.koff < lim && a.qstride > 0 && a.kstride > 0 &&
           a.qstride * a.Tq < lim && a.kstride < lim;
}

// The forward's tensor maps: Q in boxes of the form's query rows, K and V of its key tiles.
struct HopFwdMaps {
    CUtensorMap q, k, v;
};
template <int HS, int NC> HopFwdMaps hopper_forward_maps(const AttnArgs& a, int B, int NH) {
    typedef HopFwd<HS, NC> F;
    HopFwdMaps m;
    m.q = hopper_tensor_map(a.q, HS, NH, (long long)B * a.Tq, a.ldq, F::BQ, "Q");
    m.k = hopper_tensor_map(a.k, HS, NH, (long long)B * a.Tk, a.ldk, F::BK, "K");
    m.v = hopper_tensor_map(a.v, HS, NH, (long long)B * a.Tk, a.ldv, F::BK, "V");
    return m;
}

template <int HS, int NS, int NC, int PV>
void launch_hopper_forward_form(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    typedef HopFwd<HS, NC> F;
    const HopFwdMaps maps = hopper_forward_maps<HS, NC>(a, B, NH);
    const CUtensorMap &qm = maps.q, &km = maps.k, &vm = maps.v;
    const unsigned qtiles = (unsigned)((a.Tq + F::BQ - 1) / F::BQ);
    if (hopper_forward_persistent() && (a.ox || F::PERSISTENT_FP32) && positions_fit_32(a)) {
        // One block per SM (a block fills one: __launch_bounds__(THREADS, 1), and its registers).
        const size_t smem = a.ox ? F::SMEM_PERSISTENT_BF16 : F::SMEM_PERSISTENT_FP32;
        // Raised once to what either output takes (a later, smaller raise would lower the limit).
        CUDA_RAISE_DYNAMIC_SMEM((hopper_forward_kernel<HS, NS, NC, PV, true>), F::SMEM_PERSISTENT, "head size", HS);
        int device = 0, sms = 0;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        const long long tiles = (long long)qtiles * NH * B;
        CHECK(tiles < (1LL << 31) - sms, "use ATTENTION_FWD_HOPPER_GRID=tiles for this call",
              "Hopper forward, persistent grid: %lld query tiles, expected fewer than 2^31 (its tile indices are 32-bit)",
              tiles);
        const long cap = env_positive("ATTENTION_FWD_HOPPER_BLOCKS", sms);
        const unsigned blocks = (unsigned)(tiles < cap ? tiles : cap);
        LAUNCH((hopper_forward_kernel<HS, NS, NC, PV, true>), blocks, F::THREADS, smem, stream, qm, km, vm, a, NH);
        return;
    }
    CUDA_RAISE_DYNAMIC_SMEM((hopper_forward_kernel<HS, NS, NC, PV, false>), F::SMEM, "head size", HS);
    LAUNCH((hopper_forward_kernel<HS, NS, NC, PV, false>), dim3(qtiles, (unsigned)NH, (unsigned)B), F::THREADS,
           F::SMEM, stream, qm, km, vm, a, NH);
}

template <int HS, int NC, int PV> void launch_hopper_forward_nc(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    if (hopper_forward_wide_s()) launch_hopper_forward_form<HS, 128, NC, PV>(a, B, NH, stream);
    else launch_hopper_forward_form<HS, 64, NC, PV>(a, B, NH, stream);
}

// A call under a sliding window or a document mask (masked_below): the LOWER instance, in the
// default form (S by wgmmas of 64 keys, 128 rows, the grid of tiles) with P V as ATTENTION_HOPPER_HS80
// asks; the other forms are timing experiments on causal calls.
template <int HS, int PV> void launch_hopper_forward_bounded(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    typedef HopFwd<HS, 2> F;
    const HopFwdMaps m = hopper_forward_maps<HS, 2>(a, B, NH);
    CUDA_RAISE_DYNAMIC_SMEM((hopper_forward_kernel<HS, 64, 2, PV, false, true>), F::SMEM, "head size", HS);
    LAUNCH((hopper_forward_kernel<HS, 64, 2, PV, false, true>), dim3((unsigned)((a.Tq + F::BQ - 1) / F::BQ), (unsigned)NH, (unsigned)B),
           F::THREADS, F::SMEM, stream, m.q, m.k, m.v, a, NH);
}

// The form the environment asks for (each knob read at every HS, so a bad value is always refused).
template <int HS> void launch_hopper_forward(const AttnArgs& a, int B, int NH, cudaStream_t stream) {
    const bool three = hopper_forward_three_consumers(), exact = hopper_hs80_exact();
    if (masked_below(a)) {
        (void)hopper_forward_wide_s(), (void)hopper_forward_persistent();   // (refused if bad, unused)
        if (exact) launch_hopper_forward_bounded<HS, HS == 80 ? 80 : 64>(a, B, NH, stream);
        else launch_hopper_forward_bounded<HS, 64>(a, B, NH, stream);
        return;
    }
    if constexpr (HS == 64) {
        if (three) launch_hopper_forward_nc<HS, 3, 64>(a, B, NH, stream);
        else launch_hopper_forward_nc<HS, 2, 64>(a, B, NH, stream);
    } else if constexpr (HS == 80) {
        if (exact) launch_hopper_forward_nc<HS, 2, 80>(a, B, NH, stream);
        else launch_hopper_forward_nc<HS, 2, 64>(a, B, NH, stream);
    } else if constexpr (HS == 128) {
        launch_hopper_forward_nc<HS, 2, 64>(a, B, NH, stream);
    }
}

}  // namespace

void hopper_forward_launch(const AttnArgs& a, int HS, int B, int NH, cudaStream_t stream) {
    switch (HS) {
    case 64: launch_hopper_forward<64>(a, B, NH, stream); break;
    case 80: launch_hopper_forward<80>(a, B, NH, stream); break;
    case 128: launch_hopper_forward<128>(a, B, NH, stream); break;
    default: FAIL("a caller bug: use_hopper_forward takes HS 64, 80 and 128", "Hopper forward: head size %d", HS);
    }
}
#endif
