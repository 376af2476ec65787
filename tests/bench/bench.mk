# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# `make bench`'s programs: the empty mm_page_alloc program with its loader
# (the floor any BPF page tracer pays), the page-fault storm that
# tests/bench/suite.py times under each tracer, and interleave, which times
# slices of one storm with a tracer's programs on and off. `make OUT=DIR
# bench-progs` builds everything the suite needs into DIR without running
# it (and without touching ./umtrace); then `tests/bench/overhead.sh DIR`. The
# peers the suite compares with (stress-ng, bpftrace, perf) come from
# `scripts/install-deps.sh --bench`. Included by the
# top-level Makefile, which provides OUT, ARCH, CC, CFLAGS, CLANG,
# BPF_CFLAGS, BPFTOOL and LLVM_STRIP (Q and msg if it has them), and gets
# BENCH_PROGS back. Include it before any rule that names $(BENCH_PROGS):
# make expands prerequisites as it reads them.
#
# Sources are found relative to this file; nothing here sets the default
# goal.

UMT_BENCH_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
UMT_BENCH_SAVED_GOAL := $(.DEFAULT_GOAL)
UMT_BENCH_OUT := $(OUT)/bench
UMT_BENCH_LDLIBS := -lbpf -lelf -lz

BENCH_PROGS := $(UMT_BENCH_OUT)/empty_tp $(UMT_BENCH_OUT)/storm $(UMT_BENCH_OUT)/interleave \
	$(UMT_BENCH_OUT)/hookloop $(UMT_BENCH_OUT)/maps_walk $(UMT_BENCH_OUT)/model_bench

.PHONY: bench-progs
bench-progs: $(BENCH_PROGS) $(OUT)/umtrace $(FAKECUDA_LIB) $(OUT)/tests/alloc_mix \
	$(OUT)/tests/libc10.so

$(UMT_BENCH_OUT):
	$(Q)mkdir -p $@

$(UMT_BENCH_OUT)/empty_tp.bpf.o: $(UMT_BENCH_DIR)/empty_tp.bpf.c \
		vmlinux/$(ARCH)/vmlinux.h | $(UMT_BENCH_OUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@.tmp
	$(Q)$(LLVM_STRIP) -g $@.tmp -o $@	# keep BTF, drop DWARF
	$(Q)rm -f $@.tmp

$(UMT_BENCH_OUT)/empty_tp.skel.h: $(UMT_BENCH_OUT)/empty_tp.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name empty_tp_bpf > $@

$(UMT_BENCH_OUT)/empty_tp: $(UMT_BENCH_DIR)/empty_tp.c \
		$(UMT_BENCH_OUT)/empty_tp.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -D_GNU_SOURCE -I$(UMT_BENCH_OUT) $< \
		$(UMT_BENCH_LDLIBS) -o $@

$(UMT_BENCH_OUT)/interleave: $(UMT_BENCH_DIR)/interleave.c | $(UMT_BENCH_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -D_GNU_SOURCE $< $(UMT_BENCH_LDLIBS) -o $@

# PyTorch's allocator hook, called alone or by the test caching allocator
# (tests/workloads), through the fake libcuda and libc10 (tests/tests.mk).
$(UMT_BENCH_OUT)/hookloop: $(UMT_BENCH_DIR)/hookloop.c \
		tests/workloads/caching_allocator.c tests/workloads/caching_allocator.h \
		tests/fakecuda/c10_fake.h tests/fakecuda/cuda_fake.h \
		$(OUT)/tests/libcuda.so.1 $(OUT)/tests/libc10.so | $(UMT_BENCH_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Itests/fakecuda -Itests/workloads \
		$(filter %.c,$^) -L$(OUT)/tests -l:libcuda.so.1 -l:libc10.so \
		-Wl,-rpath,$(abspath $(OUT)/tests) -o $@

# The /proc/PID/maps walk's cost a line (lib/procfs.c), alone.
$(UMT_BENCH_OUT)/maps_walk: $(UMT_BENCH_DIR)/maps_walk.c user/lib/procfs.c user/lib/out_file.c \
		user/lib/procfs.h | $(UMT_BENCH_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -D_GNU_SOURCE -Iuser $(filter %.c,$^) -o $@

# PyTorch's allocator model's cost a sample and a process (user/model), alone.
$(UMT_BENCH_OUT)/model_bench: $(UMT_BENCH_DIR)/model_bench.c $(wildcard user/model/torch*.c) \
		user/model/trend.c user/model/cuda_api.c user/model/alloc_table.c user/lib/pid_table.c \
		$(wildcard user/model/*.h) | $(UMT_BENCH_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -D_GNU_SOURCE -Iuser -Ibpf $(filter %.c,$^) -o $@

$(UMT_BENCH_OUT)/storm: $(UMT_BENCH_DIR)/storm.c | $(UMT_BENCH_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -D_GNU_SOURCE -pthread $< -o $@

.DEFAULT_GOAL := $(UMT_BENCH_SAVED_GOAL)
