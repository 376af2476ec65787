# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# libFuzzer targets, one per parser of input umtrace does not control:
#   fuzz_recording  the recording reader (umtrace report FILE)
#   fuzz_config     umtrace guard --config FILE, and the flags behind it
#   fuzz_proc       /proc/meminfo, /proc/zoneinfo and /proc/PID/maps text
#   fuzz_elf        the entry point lookup in libcuda files (libelf)
#
#   make fuzz             build them all, run each FUZZ_TIME seconds
#                         (default 20) over a copy of its seed corpus
#   make fuzz-NAME        the same for one (fuzz-config, ...)
#   make fuzz-build       build them only
# Included by the top-level Makefile, which provides OUT, Q and msg, and
# gets FUZZ_BIN (the recording target) and FUZZ_BINS back; it also works
# on its own (make -f tests/fuzz/fuzz.mk OUT=... TARGET). Needs clang
# with libFuzzer (libclang-rt-14-dev). Nothing here may set the default
# goal.

UMT_FUZZ_SELF := $(lastword $(MAKEFILE_LIST))
UMT_FUZZ_DIR := $(patsubst %/,%,$(dir $(UMT_FUZZ_SELF)))
UMT_FUZZ_SAVED_GOAL := $(.DEFAULT_GOAL)

FUZZ_CC ?= clang
FUZZ_TIME ?= 20
UMT_FUZZ_OUT := $(OUT)/tests/fuzz
UMT_FUZZ_TARGETS := recording config proc elf
FUZZ_BIN := $(UMT_FUZZ_OUT)/fuzz_recording
FUZZ_BINS := $(patsubst %,$(UMT_FUZZ_OUT)/fuzz_%,$(UMT_FUZZ_TARGETS))
UMT_FUZZ_CFLAGS := -Wall -Wextra -Werror -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -D_GNU_SOURCE -Ibpf -Iuser

# Each target: the module under test and what it needs, nothing that
# loads BPF. fuzz_proc compiles user/attach/libcuda.c in itself (see the file).
UMT_FUZZ_SRCS_recording := user/rec/recording_read.c user/rec/recording_write.c \
	user/rec/rec_sample.c user/rec/recfile_read.c user/rec/recfile_write.c user/lib/meminfo.c \
	user/lib/numa.c user/lib/sys.c user/lib/procfs.c user/lib/out_file.c user/lib/strtab.c \
	user/lib/hashtab.c user/lib/units.c user/lib/pid_table.c user/model/callsites.c \
	user/model/torch.c user/model/torch_episode.c user/model/torch_slide.c user/model/trend.c \
	user/model/torch_seg.c user/model/alloc_table.c \
	user/model/cuda_api.c
UMT_FUZZ_LIBS_recording := -lz
UMT_FUZZ_SRCS_config := user/guardd/config.c user/guard/policy.c user/guard/action.c \
	user/guardd/scope.c user/guardd/protect.c user/lib/procfs.c user/lib/units.c \
	user/lib/out_file.c
# protect.c keeps the kernel side's map too: the skeleton and libbpf.
UMT_FUZZ_LIBS_config := -linih -lbpf -lelf -lz
UMT_FUZZ_DEPS_config := $(OUT)/umtrace.skel.h
# clang 14 counts a designated initializer that leaves a field to zero
# as missing one (gcc, which builds umtrace, does not).
UMT_FUZZ_CFLAGS_config := -Wno-missing-field-initializers -I$(OUT)
UMT_FUZZ_SRCS_proc := user/lib/meminfo.c user/lib/numa.c user/lib/procfs.c user/lib/log.c \
	user/lib/sys.c user/lib/out_file.c user/lib/escape.c
UMT_FUZZ_LIBS_proc := -lz
UMT_FUZZ_DEPS_proc := user/attach/libcuda.c
UMT_FUZZ_SRCS_elf := user/attach/elf_syms.c user/model/cuda_api.c
UMT_FUZZ_LIBS_elf := -lelf

# Seeds, committed; the recording's predate the others and keep their place.
UMT_FUZZ_SEEDS_recording := $(UMT_FUZZ_DIR)/corpus
UMT_FUZZ_SEEDS_config := $(UMT_FUZZ_DIR)/corpus-config
UMT_FUZZ_SEEDS_proc := $(UMT_FUZZ_DIR)/corpus-proc
UMT_FUZZ_SEEDS_elf := $(UMT_FUZZ_DIR)/corpus-elf
# Working copies: the corpus grows as it runs, never over the seeds.
UMT_FUZZ_WORK_recording := $(UMT_FUZZ_OUT)/corpus
UMT_FUZZ_WORK_config := $(UMT_FUZZ_OUT)/corpus-config
UMT_FUZZ_WORK_proc := $(UMT_FUZZ_OUT)/corpus-proc
UMT_FUZZ_WORK_elf := $(UMT_FUZZ_OUT)/corpus-elf

.PHONY: fuzz fuzz-build $(patsubst %,fuzz-%,$(UMT_FUZZ_TARGETS))

define UMT_FUZZ_RULES
$(UMT_FUZZ_OUT)/fuzz_$(1): $(UMT_FUZZ_DIR)/fuzz_$(1).c $$(UMT_FUZZ_SRCS_$(1)) \
		$$(UMT_FUZZ_DEPS_$(1)) $(wildcard user/*/*.h) bpf/umtrace.h
	@mkdir -p $$(@D)
	$$(call msg,FUZZ-CC,$$@)
	$$(Q)$$(FUZZ_CC) $$(UMT_FUZZ_CFLAGS) $$(UMT_FUZZ_CFLAGS_$(1)) $(UMT_FUZZ_DIR)/fuzz_$(1).c \
		$$(UMT_FUZZ_SRCS_$(1)) $$(UMT_FUZZ_LIBS_$(1)) -o $$@

fuzz-$(1): $(UMT_FUZZ_OUT)/fuzz_$(1)
	@mkdir -p $$(UMT_FUZZ_WORK_$(1))
	$$(Q)cp $$(UMT_FUZZ_SEEDS_$(1))/* $$(UMT_FUZZ_WORK_$(1))/
	$$(Q)$$< -max_total_time=$$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 $$(UMT_FUZZ_WORK_$(1))
endef
$(foreach t,$(UMT_FUZZ_TARGETS),$(eval $(call UMT_FUZZ_RULES,$(t))))

fuzz-build: $(FUZZ_BINS)

# One after the other, each for FUZZ_TIME, even under make -j: running
# them side by side would share the CPUs and each would get less.
fuzz: $(FUZZ_BINS)
	$(Q)set -e; for t in $(UMT_FUZZ_TARGETS); do \
		$(MAKE) --no-print-directory -f $(UMT_FUZZ_SELF) OUT=$(OUT) \
			FUZZ_CC=$(FUZZ_CC) FUZZ_TIME=$(FUZZ_TIME) Q=$(Q) fuzz-$$t; \
	done

.DEFAULT_GOAL := $(UMT_FUZZ_SAVED_GOAL)
