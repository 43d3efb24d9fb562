# Starting without MPI: where this process sits in the job (comm/launch.c, from the launcher's
# environment or flags) and rank 0 handing a small blob, such as the NCCL unique id, to the other
# ranks (comm/rendezvous.c, through a shared file or TCP). Plain C: no mpicc needed.
# rendezvous.c writes its file with comm/atomic_file.c; programs that also link DATA_OBJS
# or CHECKPOINT_OBJS name that object twice, which $^ lists once.
LAUNCH_OBJS = $(BUILD)/comm/launch.o $(BUILD)/comm/rendezvous.o $(BUILD)/comm/atomic_file.o

TEST_PROGS += $(BUILD)/tests/test_rendezvous
SUITES_dist += dist-launch

$(BUILD)/tests/test_rendezvous: $(BUILD)/tests/test_rendezvous.o $(LAUNCH_OBJS) $(FAIL_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
