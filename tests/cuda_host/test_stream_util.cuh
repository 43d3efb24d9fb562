// Shared by the stream and graph tests (test_streams.cu, test_graphs.cu): a producer and a
// consumer kernel, device buffers, and the seeded schedules each case runs under.
#pragma once
#include <stdio.h>

enum { SEEDS = 20 };

__global__ void produce_kernel(int* buf, int value) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[i] = value + i;
}

__global__ void consume_kernel(const int* buf, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = 2 * buf[i];
}

// The host runtime's schedule for this seed (cuda_host_schedule_seed); nothing on a GPU.
#ifdef CUDA_HOST
static void use_seed(int seed) { cuda_host_schedule_seed((unsigned long long)seed); }
#else
static void use_seed(int seed) { (void)seed; }
#endif

static int* dev_ints(int n) {
    int* d;
    CUDA_CHECK(cudaMalloc(&d, (size_t)n * sizeof(int)));
    return d;
}

// Prints the seeds in mask (bit s-1: seed s) after `what`.
static void print_seeds(const char* what, unsigned mask) {
    printf("info %s:", what);
    for (int s = 1; s <= SEEDS; s++)
        if (mask >> (s - 1) & 1u) printf(" %d", s);
    printf("%s\n", mask ? "" : " none");
}
