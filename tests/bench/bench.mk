# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# `make bench`'s programs, included by the top-level Makefile: the empty
# mm_page_alloc program with its loader (the floor of any BPF page tracer)
# and the page-fault storm that tests/bench/overhead.sh times under each.

BENCH_OUT := $(OUT)/bench
BENCH_PROGS := $(BENCH_OUT)/empty_tp $(BENCH_OUT)/storm
BENCH_LDLIBS := -lbpf -lelf -lz

$(BENCH_OUT):
	$(Q)mkdir -p $@

$(BENCH_OUT)/empty_tp.bpf.o: tests/bench/empty_tp.bpf.c vmlinux/$(ARCH)/vmlinux.h | $(BENCH_OUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@.tmp
	$(Q)$(LLVM_STRIP) -g $@.tmp -o $@
	$(Q)rm -f $@.tmp

$(BENCH_OUT)/empty_tp.skel.h: $(BENCH_OUT)/empty_tp.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name empty_tp_bpf > $@

$(BENCH_OUT)/empty_tp: tests/bench/empty_tp.c $(BENCH_OUT)/empty_tp.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -D_GNU_SOURCE -I$(BENCH_OUT) $< $(BENCH_LDLIBS) -o $@

$(BENCH_OUT)/storm: tests/bench/storm.c | $(BENCH_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -D_GNU_SOURCE -pthread $< -o $@
