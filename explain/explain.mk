# build/explain: what each distributed attention schedule does, computed by running it over a
# recording transport (explain/main.c), its tests (suite explain) and `make docs`, which
# regenerates attention/README.md and attention/figures/ (explain/make_docs.sh).
# Objects live in $(BUILD)/explain_obj: build/explain is the program.
EXPLAIN_OBJ_DIR = $(BUILD)/explain_obj
EXPLAIN_OBJS = $(patsubst explain/%.c,$(EXPLAIN_OBJ_DIR)/%.o,$(wildcard explain/*.c))
# The schedules' partial-attention calls go through explain/record_compute.c.
EXPLAIN_WRAP = -Wl,--wrap=dist_attention_forward,--wrap=dist_attention_backward,--wrap=dist_attention_merge,--wrap=dist_attention_forward_merge

$(EXPLAIN_OBJ_DIR)/%.o: explain/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

PROGRAMS += $(BUILD)/explain
TEST_PROGS += $(BUILD)/explain
SUITES_dist += explain

$(BUILD)/explain: $(EXPLAIN_OBJS) $(DIST_ATTENTION_OBJS) $(ATTENTION_OBJS) $(COMM_OBJS) \
		$(BUILD)/comm/comm_device_none.o $(FAIL_OBJS)
	$(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS) $(EXPLAIN_WRAP)

# The walkthrough: text from the explain tool, pictures from it and from a short 2x2 run of the
# trainer (its trace). DOCS_OUT: where the text goes (the test writes it elsewhere and compares).
DOCS_OUT ?= attention
.PHONY: docs
docs: setup
	@$(MAKE) --no-print-directory $(BUILD)/explain $(BUILD)/train_gpt
	@bash explain/make_docs.sh $(BUILD) $(DOCS_OUT)
