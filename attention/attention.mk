# Partial attention kernel, the LSE merge and the single-device attention layer.
ATTENTION_SRCS = attention/partial_attention.c attention/attention_local.c
ATTENTION_OBJS = $(ATTENTION_SRCS:%.c=$(BUILD)/%.o)
ATTENTION_OBJS_F64 = $(ATTENTION_SRCS:%.c=$(BUILD)/f64/%.o)

# Its CUDA twin: the launchers and the FlashAttention-2-class kernels (partial_attention.cu), and the
# Hopper kernels' launchers, files of their own (attention/hopper_launch.h), all three in every
# program that runs the attention. Their objects for the host runtime, bf16 and fp32 (the Hopper
# files hold nothing in fp32); the nvcc objects come from train/train_cuda.mk's pattern rules.
CUDA_ATTENTION_SRCS = attention/partial_attention.cu attention/hopper_forward.cu attention/hopper_backward.cu
CUDA_ATTENTION_HOST_OBJS = $(CUDA_ATTENTION_SRCS:%.cu=$(BUILD)/cuda-host/%.o)
CUDA_ATTENTION_HOST_OBJS_FP32 = $(CUDA_ATTENTION_SRCS:%.cu=$(BUILD)/cuda-host-fp32-attn/%.o)
