# Partial attention kernel, the LSE merge and the single-device attention layer.
ATTENTION_SRCS = attention/partial_attention.c attention/attention_local.c
ATTENTION_OBJS = $(ATTENTION_SRCS:%.c=$(BUILD)/%.o)
ATTENTION_OBJS_F64 = $(ATTENTION_SRCS:%.c=$(BUILD)/f64/%.o)
