# The process mesh, the comm layer (MPI on host memory) and the distributed attention schedules
# (ATTENTION2D non-overlapped and overlapped, Ring, Striped). Only the MPI transport includes
# mpi.h, so it alone is compiled with $(MPICC); every program that links COMM_OBJS links with
# $(MPICC).
MPICC ?= mpicc

# The comm layer records into a timeline (comm/timeline.mk, named here directly: rules read
# COMM_OBJS before that fragment is included), which writes its trace atomically.
COMM_OBJS = $(BUILD)/comm/mesh.o $(BUILD)/comm/comm.o $(BUILD)/comm/comm_watchdog.o \
	$(BUILD)/comm/comm_spans.o $(BUILD)/comm/comm_names.o $(BUILD)/comm/comm_mpi.o $(BUILD)/comm/timeline.o \
	$(BUILD)/comm/timeline_capture.o $(BUILD)/comm/timeline_trace.o $(BUILD)/comm/atomic_file.o
# Choosing and creating the transport (comm/transport.h: the trainer and build/generate), and a
# program's transport and device under MPI (model/backend_transport.h: generate, bench_collectives).
TRANSPORT_OBJS = $(BUILD)/comm/transport.o $(BUILD)/model/backend_transport.o
# The CPU side of the device transports (it refuses them), launching without MPI
# (comm/launch.mk) and the transport choice: what a trainer links besides COMM_OBJS.
TRAIN_COMM_OBJS = $(BUILD)/comm/comm_device_none.o $(LAUNCH_OBJS) $(TRANSPORT_OBJS)
# The schedules on the CPU backend (attention/dist_ops_cpu.c); the CUDA trainer compiles the same
# sources as CUDA C++ (train/train_cuda.mk).
DIST_SCHEDULE_SRCS = attention/attention2d.c attention/attention2d_overlap.c attention/ring.c attention/ulysses.c
# Their scratch sizes (attention/dist_scratch.c) are plain C, one object for every precision.
DIST_ATTENTION_OBJS = $(DIST_SCHEDULE_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/attention/dist_cost.o \
	$(BUILD)/attention/dist_scratch.o $(DIST_OPS_CPU_OBJS)


$(BUILD)/comm/comm_mpi.o: comm/comm_mpi.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -MMD -MP -c $< -o $@

DIST_PROGS = $(BUILD)/tests/test_dist_attention $(BUILD)/tools/bench_comm
TEST_PROGS += $(BUILD)/tests/test_comm $(BUILD)/tests/test_dist_attention
PROGRAMS += $(BUILD)/tools/bench_comm
SUITES_dist += dist-comm dist-attention

$(BUILD)/tests/test_comm: %: %.o $(COMM_OBJS) $(FAIL_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# Latency and bandwidth of the collectives against message size, alpha-beta fits
# (tools/bench_collectives.c; `make bench-collectives`, tools/bench_collectives.sh).
PROGRAMS += $(BUILD)/tools/bench_collectives
TEST_PROGS += $(BUILD)/tools/bench_collectives
# Its link rule is in tools/bench.mk (it needs the launch and model objects, defined later).

$(DIST_PROGS): %: %.o $(DIST_ATTENTION_OBJS) $(ATTENTION_OBJS) $(COMM_OBJS) \
		$(BUILD)/comm/comm_device_none.o $(BUILD)/model/documents.o $(FAIL_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# Bytes and messages per rank per layer of the schedules at P = 4, 16, 64, and their causal load
# balance at T = 4096; 64 heads, so that Ulysses (P must divide NH) runs at every P (the ratios
# of the others depend on the head size alone; USP needs pq to divide NH).
.PHONY: bench-comm
bench: bench-comm
bench-comm: $(BUILD)/tools/bench_comm
	@bash tests/mpirun.sh 4 $< --pq 2 --pkv 2 --NH 64
	@bash tests/mpirun.sh 16 $< --pq 4 --pkv 4 --NH 64 --no-header
	@bash tests/mpirun.sh 64 $< --pq 8 --pkv 8 --NH 64 --no-header
