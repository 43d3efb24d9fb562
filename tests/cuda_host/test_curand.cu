// cuRAND Philox4x32-10 under the host runtime. Known answers: the Random123 known-answer vectors
// for the Philox4x32-10 bijection, and output streams of curand_init/curand/curand4 as produced by
// the CUDA 13 curand_kernel.h (compiled for the host with nvcc, outside this project) for the same
// seeds, subsequences and offsets. Uniforms are checked bit-exactly against their definition
// (x * 2^-32 + 2^-33, fused) and normals against Box-Muller and by their moments.
#if defined(__CUDACC__)
#include <curand_kernel.h>   // the host runtime provides it through cuda_host.h
#endif
#include "model/cuda_common.cuh"
#include "tests/cuda_host/test_check.h"

#include <stdlib.h>
#include <string.h>

// out: 3 KAT blocks (12 words), then stream A (6 words), B (5 words), C curand4 after 8 normals (4 words)
__global__ void philox_kernel(unsigned* out, float* uni, float* nrm) {
    if (threadIdx.x != 0) return;
    const uint4 ctr[3] = {make_uint4(0, 0, 0, 0), make_uint4(~0u, ~0u, ~0u, ~0u),
                          make_uint4(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u)};
    const uint2 key[3] = {make_uint2(0, 0), make_uint2(~0u, ~0u), make_uint2(0xa4093822u, 0x299f31d0u)};
    for (int i = 0; i < 3; i++) {
        uint4 r = curand_Philox4x32_10(ctr[i], key[i]);
        out[4 * i] = r.x, out[4 * i + 1] = r.y, out[4 * i + 2] = r.z, out[4 * i + 3] = r.w;
    }
    curandStatePhilox4_32_10_t s;
    curand_init(1234ULL, 5, 7, &s);
    for (int i = 0; i < 6; i++) out[12 + i] = curand(&s);
    curand_init(0xdeadbeefcafeULL, 3ULL << 40, 123456789ULL, &s);
    for (int i = 0; i < 5; i++) out[18 + i] = curand(&s);
    curand_init(42ULL, 0, 0, &s);
    for (int i = 0; i < 4; i++) uni[i] = curand_uniform(&s);
    for (int i = 0; i < 4; i++) nrm[i] = curand_normal(&s);
    uint4 q = curand4(&s);
    out[23] = q.x, out[24] = q.y, out[25] = q.z, out[26] = q.w;
    // raw words of seed 42 for the uniform and normal checks
    curand_init(42ULL, 0, 0, &s);
    for (int i = 0; i < 8; i++) out[27 + i] = curand(&s);
}

// Many threads, one subsequence each: moments of curand_normal and curand_uniform.
__global__ void moments_kernel(float* sums, int per_thread) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    curandStatePhilox4_32_10_t s;
    curand_init(2024ULL, (unsigned long long)t, 0, &s);
    float n1 = 0, n2 = 0, u1 = 0;
    for (int i = 0; i < per_thread; i++) {
        float z = curand_normal(&s), u = curand_uniform(&s);
        n1 += z, n2 += z * z, u1 += u;
    }
    atomicAdd(&sums[0], n1);
    atomicAdd(&sums[1], n2);
    atomicAdd(&sums[2], u1);
}

static void test_known_answers(void) {
    unsigned* d;
    float *du, *dn;
    CUDA_CHECK(cudaMalloc(&d, 35 * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&du, 4 * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dn, 4 * sizeof(float)));
    LAUNCH(philox_kernel, 1, 32, 0, 0, d, du, dn);
    CUDA_CHECK(cudaGetLastError());
    unsigned h[35];
    float u[4], z[4];
    CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(u, du, sizeof u, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(z, dn, sizeof z, cudaMemcpyDeviceToHost));
    static const unsigned kat[12] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8,   // ctr 0, key 0
                                     0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd,   // all ones
                                     0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};  // pi digits
    static const unsigned stream_a[6] = {0x72c26332, 0x26a9bd1b, 0xd88ecb0d, 0x088f2111, 0xd1e85602, 0xc19c9fa2};
    static const unsigned stream_b[5] = {0x1fb70178, 0x902982da, 0x0296f8c3, 0xe6255b8b, 0xf48bc69c};
    static const unsigned quad_c[4] = {0xd36c0225, 0xa8875dcb, 0x9a4d6d99, 0xc609a559};
    for (int i = 0; i < 3; i++)
        check(!memcmp(h + 4 * i, kat + 4 * i, 16), "Random123 KAT %d: %08x %08x %08x %08x", i, h[4 * i],
              h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]);
    check(!memcmp(h + 12, stream_a, sizeof stream_a), "curand_init(1234, subsequence 5, offset 7): 6 curand() values match cuRAND");
    check(!memcmp(h + 18, stream_b, sizeof stream_b),
          "curand_init(0xdeadbeefcafe, subsequence 3<<40, offset 123456789): 5 values match cuRAND");
    check(!memcmp(h + 23, quad_c, sizeof quad_c), "seed 42: curand4 after 4 uniforms and 4 normals matches cuRAND (outputs 8 to 11)");
    int bad = 0;
    for (int i = 0; i < 4; i++) bad += u[i] != fmaf((float)h[27 + i], 2.3283064e-10f, 2.3283064e-10f / 2.0f);
    check(bad == 0 && u[0] > 0.0f && u[0] <= 1.0f, "curand_uniform = x * 2^-32 + 2^-33 on the same words (%.9g ...)", u[0]);
    double worst = 0.0;
    for (int p = 0; p < 2; p++) {
        double x = h[31 + 2 * p] * 2.3283064365386963e-10 + 1.1641532182693481e-10;
        double y = h[32 + 2 * p] * (2.3283064365386963e-10 * 6.283185307179586) + 1.4629180792671596e-09 / 2;
        double r = sqrt(-2.0 * log(x));
        double e0 = fabs(z[2 * p] - r * sin(y)), e1 = fabs(z[2 * p + 1] - r * cos(y));
        if (e0 > worst) worst = e0;
        if (e1 > worst) worst = e1;
    }
    check(worst < 1e-5, "curand_normal is Box-Muller of consecutive words, pairs in order (max error %.2g)", worst);
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(du));
    CUDA_CHECK(cudaFree(dn));
}

static void test_moments(void) {
    const int blocks = 16, threads = 128, per = 64;
    const double count = (double)blocks * threads * per;
    float* d;
    float s[3];
    CUDA_CHECK(cudaMalloc(&d, sizeof s));
    CUDA_CHECK(cudaMemset(d, 0, sizeof s));
    LAUNCH(moments_kernel, blocks, threads, 0, 0, d, per);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(s, d, sizeof s, cudaMemcpyDeviceToHost));
    double mean = s[0] / count, var = s[1] / count - mean * mean, umean = s[2] / count;
    // 131072 samples: standard errors about 0.003 (mean), 0.004 (variance), 0.0008 (uniform mean)
    check(fabs(mean) < 0.015 && fabs(var - 1.0) < 0.02 && fabs(umean - 0.5) < 0.004,
          "131072 normals from 2048 subsequences: mean %.4f, variance %.4f; uniform mean %.4f", mean, var, umean);
    CUDA_CHECK(cudaFree(d));
}

int main(void) {
    test_known_answers();
    test_moments();
    return test_finish("test_curand");
}
