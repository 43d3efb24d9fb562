// The Hopper kernels' launchers (sm_90a): attention/hopper_forward.cu and hopper_backward.cu, each a
// file of its own, called by attention/partial_attention.cu for the calls they serve (HS 64, 80 and
// 128, 16-byte aligned tensors; its use_hopper_forward and use_hopper_backward). Each enqueues on
// `stream` the form its settings in the environment name (ATTENTION_FWD_HOPPER*, ATTENTION_BWD_HOPPER,
// ATTENTION_HOPPER_HS80) and checks the launch.
#pragma once
#include "attention/attention_args.cuh"

#ifndef GPT_CUDA_FP32
// The forward of a (o or ox, lse): a block per 128 (or 192) query rows, or the persistent grid.
void hopper_forward_launch(const AttnArgs& a, int HS, int B, int NH, cudaStream_t stream);

// The backward of a over `blocks` = key tiles x B x NH blocks, dQ added in the semaphores' order
// into a.dq_acc (a floatX dQ) or a.dq, which the caller zeroed with the semaphores.
void hopper_backward_launch(const AttnArgs& a, int HS, int NH, unsigned blocks, cudaStream_t stream);

// Whether the backward of head size HS over Tq queries takes 128-query tiles (ATTENTION_BWD_HOPPER=q128
// at HS 64 where Tq is a multiple of 128): the kernel name the callers report.
bool hopper_backward_takes_q128(int HS, int Tq);
#endif
