# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Test programs: the fake libcuda.so.1 and the workloads linked against it.
# Included by the top-level Makefile, which provides:
#   OUT          output directory (e.g. build/x86)
#   CC           compiler
#   TEST_CFLAGS  -Wall -Wextra -Werror -O2 -g -fno-omit-frame-pointer
# and gets FAKECUDA_LIB and TEST_PROGS back.
#
# Sources are found relative to this file, so the includer may live
# anywhere. Nothing here may set the default goal.

UMT_TESTS_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
UMT_TESTS_SAVED_GOAL := $(.DEFAULT_GOAL)

UMT_FAKECUDA_DIR := $(UMT_TESTS_DIR)/fakecuda
UMT_WORKLOADS_DIR := $(UMT_TESTS_DIR)/workloads
UMT_TESTS_OUT := $(OUT)/tests

FAKECUDA_LIB := $(UMT_TESTS_OUT)/libcuda.so.1
TEST_PROGS := $(FAKECUDA_LIB) $(UMT_TESTS_OUT)/alloc_mix \
	$(UMT_TESTS_OUT)/demo $(UMT_TESTS_OUT)/fakecuda_selftest \
	$(UMT_TESTS_OUT)/nofp_chain $(UMT_TESTS_OUT)/pagehog \
	$(UMT_TESTS_OUT)/lifecycle $(UMT_TESTS_OUT)/dlcycle \
	$(UMT_TESTS_OUT)/realcuda_calls $(UMT_TESTS_OUT)/compact_call \
	$(UMT_TESTS_OUT)/hostile

# The fake must keep default symbol visibility and semantic interposition
# (no -Bsymbolic, no -fno-semantic-interposition): cuMemAllocFromPoolAsync
# reaches cuMemAllocAsync through the PLT so probes on it fire nested.
# -z now only resolves that PLT slot at load instead of on first use,
# which keeps the dynamic linker's work out of the traced call windows.
UMT_FAKECUDA_LDFLAGS := -shared -Wl,-soname,libcuda.so.1 \
	-Wl,--version-script=$(UMT_FAKECUDA_DIR)/libcuda.map -Wl,-z,now

UMT_WORKLOAD_LDFLAGS := -L$(UMT_TESTS_OUT) -l:libcuda.so.1 \
	-Wl,-rpath,$(abspath $(UMT_TESTS_OUT)) -pthread

$(FAKECUDA_LIB): $(UMT_FAKECUDA_DIR)/fake_libcuda.c \
		 $(UMT_FAKECUDA_DIR)/cuda_fake.h $(UMT_FAKECUDA_DIR)/libcuda.map \
		 $(UMT_TESTS_DIR)/fakedriver/fakenv_uapi.h
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -I$(UMT_TESTS_DIR)/fakedriver -fPIC -pthread -o $@ $< \
		$(UMT_FAKECUDA_LDFLAGS)

# compact_call: compaction inside a GPU call (test_trace); hostile: a job
# whose name and symbols test_hostile patches into an attacker's bytes.
$(UMT_TESTS_OUT)/alloc_mix $(UMT_TESTS_OUT)/demo $(UMT_TESTS_OUT)/compact_call \
$(UMT_TESTS_OUT)/hostile: \
		$(UMT_TESTS_OUT)/%: $(UMT_WORKLOADS_DIR)/%.c \
		$(UMT_FAKECUDA_DIR)/cuda_fake.h $(FAKECUDA_LIB)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -I$(UMT_FAKECUDA_DIR) -o $@ $< \
		$(UMT_WORKLOAD_LDFLAGS)

# Built the way PyTorch and libcuda are: no frame pointers, only call frame
# information (.eh_frame; asked for explicitly, though it is the default).
UMT_NOFP_CFLAGS := $(filter-out -fno-omit-frame-pointer,$(TEST_CFLAGS)) \
	-O2 -g -fomit-frame-pointer -fasynchronous-unwind-tables

$(UMT_TESTS_OUT)/nofp_chain: $(UMT_WORKLOADS_DIR)/nofp_chain.c \
		$(UMT_FAKECUDA_DIR)/cuda_fake.h $(FAKECUDA_LIB)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(UMT_NOFP_CFLAGS) -I$(UMT_FAKECUDA_DIR) -o $@ $< \
		$(UMT_WORKLOAD_LDFLAGS)

# No GPU call at all: the guard's page-level backstop.
$(UMT_TESTS_OUT)/pagehog: $(UMT_WORKLOADS_DIR)/pagehog.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -o $@ $<

# Ends, execs, forks and pid reuse in the middle of GPU calls (test_faults).
$(UMT_TESTS_OUT)/lifecycle: $(UMT_WORKLOADS_DIR)/lifecycle.c \
		$(UMT_FAKECUDA_DIR)/cuda_fake.h $(FAKECUDA_LIB)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -I$(UMT_FAKECUDA_DIR) -o $@ $< \
		$(UMT_WORKLOAD_LDFLAGS)

# dlopen()s the fake itself, so it must not be linked with it.
$(UMT_TESTS_OUT)/dlcycle: $(UMT_WORKLOADS_DIR)/dlcycle.c $(UMT_FAKECUDA_DIR)/cuda_fake.h
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -I$(UMT_FAKECUDA_DIR) -o $@ $<

# Calls NVIDIA's real libcuda.so.1 (scripts/vmtest.sh): dlopen()s the file
# it is given, so nothing of the fake is linked in.
$(UMT_TESTS_OUT)/realcuda_calls: $(UMT_WORKLOADS_DIR)/realcuda_calls.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -o $@ $<

# Checks the fake on its own (TAP output, non-zero exit on failure).
$(UMT_TESTS_OUT)/fakecuda_selftest: $(UMT_FAKECUDA_DIR)/fake_selftest.c \
		$(UMT_FAKECUDA_DIR)/cuda_fake.h $(FAKECUDA_LIB)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -I$(UMT_FAKECUDA_DIR) -o $@ $< \
		$(UMT_WORKLOAD_LDFLAGS)

# The fake libc10.so: PyTorch's profiler hook (c10::reportMemoryUsageToProfiler,
# three mangled forms) as empty functions a uprobe can attach to.
# torch_alloc: a caching allocator like PyTorch's that calls it.
UMT_FAKEC10_LIB := $(UMT_TESTS_OUT)/libc10.so
TEST_PROGS += $(UMT_FAKEC10_LIB) $(UMT_TESTS_OUT)/torch_alloc

$(UMT_FAKEC10_LIB): $(UMT_FAKECUDA_DIR)/fake_libc10.c \
		    $(UMT_FAKECUDA_DIR)/c10_fake.h $(UMT_FAKECUDA_DIR)/libc10.map
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -fPIC -o $@ $< -shared \
		-Wl,-soname,libc10.so \
		-Wl,--version-script=$(UMT_FAKECUDA_DIR)/libc10.map -Wl,-z,now

$(UMT_TESTS_OUT)/torch_alloc: $(UMT_WORKLOADS_DIR)/torch_alloc.c \
		$(UMT_WORKLOADS_DIR)/caching_allocator.c \
		$(UMT_WORKLOADS_DIR)/caching_allocator.h \
		$(UMT_FAKECUDA_DIR)/cuda_fake.h $(UMT_FAKECUDA_DIR)/c10_fake.h \
		$(FAKECUDA_LIB) $(UMT_FAKEC10_LIB)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TEST_CFLAGS) -I$(UMT_FAKECUDA_DIR) -o $@ \
		$(filter %.c,$^) $(UMT_WORKLOAD_LDFLAGS) -l:libc10.so

.DEFAULT_GOAL := $(UMT_TESTS_SAVED_GOAL)
