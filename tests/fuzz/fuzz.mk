# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# libFuzzer target for the recording reader (tests/fuzz/fuzz_recording.c):
#   make fuzz             build it, run it FUZZ_TIME seconds (default 20)
#                         over a copy of the seed corpus
#   make fuzz-build       build it only
# Included by the top-level Makefile, which provides OUT, Q and msg, and
# gets FUZZ_BIN back. Needs clang with libFuzzer (libclang-rt-14-dev).
# Nothing here may set the default goal.

UMT_FUZZ_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
UMT_FUZZ_SAVED_GOAL := $(.DEFAULT_GOAL)

FUZZ_CC ?= clang
FUZZ_TIME ?= 20
FUZZ_BIN := $(OUT)/tests/fuzz/fuzz_recording
UMT_FUZZ_CORPUS := $(OUT)/tests/fuzz/corpus
# The reader and what it needs, nothing that loads BPF.
UMT_FUZZ_SRCS := $(UMT_FUZZ_DIR)/fuzz_recording.c user/recording.c user/recfile.c \
	user/meminfo.c user/units.c user/callsites.c
UMT_FUZZ_CFLAGS := -Wall -Wextra -Werror -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -D_GNU_SOURCE -Ibpf -Iuser

.PHONY: fuzz fuzz-build

$(FUZZ_BIN): $(UMT_FUZZ_SRCS) $(wildcard user/*.h) bpf/umtrace.h
	@mkdir -p $(@D)
	$(call msg,FUZZ-CC,$@)
	$(Q)$(FUZZ_CC) $(UMT_FUZZ_CFLAGS) $(UMT_FUZZ_SRCS) -lz -o $@

fuzz-build: $(FUZZ_BIN)

# The corpus grows as it runs: work on a copy, never on the seeds.
fuzz: $(FUZZ_BIN)
	@mkdir -p $(UMT_FUZZ_CORPUS)
	$(Q)cp $(UMT_FUZZ_DIR)/corpus/* $(UMT_FUZZ_CORPUS)/
	$(Q)$(FUZZ_BIN) -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 $(UMT_FUZZ_CORPUS)

.DEFAULT_GOAL := $(UMT_FUZZ_SAVED_GOAL)
