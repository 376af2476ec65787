# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# umtrace: `make` builds ./umtrace; `make static` a static binary to copy onto
# GPU hosts; `make ARCH=arm64` cross-builds one for DGX Spark and Grace;
# `make test` runs every test; `make demo` traces the built-in demo;
# `make install` and `make deb` install it (scripts/install.mk).

HOST_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
ARCH ?= $(HOST_ARCH)
OUT := build/$(ARCH)

ifeq ($(ARCH),$(HOST_ARCH))
CC ?= gcc
STATIC ?=
else ifeq ($(ARCH),arm64)
CC := aarch64-linux-gnu-gcc
STATIC ?= 1
else
$(error ARCH must be x86 or arm64)
endif

CLANG ?= clang
LLVM_STRIP ?= llvm-strip
BPFTOOL ?= bpftool
PYTHON ?= python3
VERSION := 0.1.0

CFLAGS ?= -O2 -g
CFLAGS += -Wall -Wextra -Werror -std=gnu11 -fno-omit-frame-pointer
CPPFLAGS += -D_GNU_SOURCE -DUMTRACE_VERSION='"$(VERSION)"' -Iuser -Ibpf -I$(OUT)
LDLIBS := -lbpf -ldw -lelf -lz -linih -lcap -lpthread -lstdc++
# libdw.a needs lzma and bzip2; its debuginfod code warns about dlopen in a
# static binary, a path umtrace never takes.
STATIC_LDLIBS := -lbpf -ldw -lelf -lz -linih -lcap -lzstd -llzma -lbz2 -lpthread -lstdc++
BPF_CFLAGS := -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_$(ARCH) \
	-Ivmlinux/$(ARCH) -Ibpf

# make SANITIZE=1 test: everything under ASan and UBSan, in its own tree.
ifeq ($(SANITIZE),1)
OUT := build/$(ARCH)-san
CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# user/ is layered, each folder using only those below it (README, Layout):
# lib, model, stacks, rec, attach, export, guard, guardd, cmd.
USER_LAYERS := lib model stacks rec attach export guard guardd cmd
USER_SRCS := $(foreach l,$(USER_LAYERS),$(wildcard user/$(l)/*.c))
USER_HDRS := $(foreach l,$(USER_LAYERS),$(wildcard user/$(l)/*.h))
USER_OBJS := $(patsubst user/%.c,$(OUT)/user/%.o,$(USER_SRCS))
# Everything but the commands (their shared option loop and JSON writer
# included), for the unit tests to link against.
LIB_OBJS := $(filter-out $(OUT)/user/cmd/%,$(USER_OBJS)) \
	$(OUT)/user/cmd/cli.o $(OUT)/user/cmd/json.o
# The programs: the bpf/*.bpf.c below (not the rescan's iterator), compiled
# apart and linked into one object, one skeleton (bpf/shared.bpf.h). A file
# comes after every file whose maps it uses: bookworm's libbpf (1.1) links a
# map declared extern wrongly when its definition comes later.
BPF_PARTS := $(patsubst %,$(OUT)/bpf/%.bpf.o,shared meter guard kthreads managed pages \
	procpages torch libload calls lifetime)
BPF_HDRS := $(wildcard bpf/*.h)
SKEL := $(OUT)/umtrace.skel.h $(OUT)/libcuda_scan.skel.h

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUT)/tests/unit/%,$(UNIT_SRCS))
TEST_CFLAGS := -Wall -Wextra -Werror -O2 -g -fno-omit-frame-pointer

.DELETE_ON_ERROR:
# The BPF objects stay beside their skeletons (bpftool reads them; so may you).
.SECONDARY: $(OUT)/umtrace.bpf.o $(OUT)/libcuda_scan.bpf.o $(SKEL) $(BPF_PARTS)
.PHONY: all static test unit demo bench clean vmlinux vmtest vmtest-build

ifeq ($(STATIC),1)
all: $(OUT)/umtrace-static
else ifeq ($(SANITIZE),1)
all: $(OUT)/umtrace	# ./umtrace stays the plain build
else
all: $(OUT)/umtrace umtrace
endif

static: $(OUT)/umtrace-static

umtrace: $(OUT)/umtrace
	$(Q)ln -sf $< $@

# BPF C to an object: keep BTF, drop DWARF.
define umt_bpf_cc
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@.tmp
	$(Q)$(LLVM_STRIP) -g $@.tmp -o $@
	$(Q)rm -f $@.tmp
endef

$(OUT)/bpf/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) vmlinux/$(ARCH)/vmlinux.h
	$(umt_bpf_cc)

$(OUT)/libcuda_scan.bpf.o: bpf/libcuda_scan.bpf.c $(BPF_HDRS) vmlinux/$(ARCH)/vmlinux.h
	$(umt_bpf_cc)

$(OUT)/umtrace.bpf.o: $(BPF_PARTS)
	$(call msg,BPF-LINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(OUT)/%.skel.h: $(OUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $*_bpf > $@

$(OUT)/user/%.o: user/%.c $(SKEL) $(USER_HDRS) $(BPF_HDRS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(OUT)/umtrace: $(USER_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(OUT)/umtrace-static: $(USER_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) -static $(LDFLAGS) $^ $(STATIC_LDLIBS) -o $@

$(OUT) $(OUT)/tests/unit:
	$(Q)mkdir -p $@

$(OUT)/tests/unit/%: tests/unit/%.c tests/unit/check.h $(LIB_OBJS) | $(OUT)/tests/unit
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $< $(LIB_OBJS) $(LDLIBS) -o $@

# Loads the BPF object against kernel BTF rewritten to older struct layouts
# (tests/integration/test_build.py), so both ways a field is read get verified.
CORE_LAYOUTS := $(OUT)/tests/core_layouts
$(CORE_LAYOUTS): tests/integration/core_layouts.c $(OUT)/umtrace.skel.h bpf/umtrace.h | $(OUT)/tests/unit
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $< $(LDFLAGS) -lbpf -lelf -lz -o $@

include tests/tests.mk
include tests/bench/bench.mk
include tests/fuzz/fuzz.mk
include tests/soak/soak.mk
# make install, uninstall, man, deb (README, Installing).
include scripts/install.mk

unit: $(UNIT_BINS)

# README's test command: unit tests, then integration tests as root.
test: all $(UNIT_BINS) $(TEST_PROGS) $(CORE_LAYOUTS) $(BENCH_PROGS) $(MAN_PAGES)
	$(Q)$(PYTHON) tests/run.py --out $(OUT)

demo: all $(TEST_PROGS)
	$(Q)./umtrace trace --libcuda $(FAKECUDA_LIB) -- $(OUT)/tests/demo

# Not part of make test: figures, not pass/fail (tests/bench/overhead.sh).
bench: all $(TEST_PROGS) $(BENCH_PROGS)
	$(Q)tests/bench/overhead.sh $(OUT)

# The qemu kernel matrix (scripts/vmtest.sh): both arches' static umtrace
# and test programs, booted under Debian's 6.1, 6.12 and 5.10 kernels.
vmtest:
	$(Q)$(MAKE) --no-print-directory ARCH=x86 vmtest-build
	$(Q)$(MAKE) --no-print-directory ARCH=arm64 vmtest-build
	$(Q)scripts/vmtest.sh

# What scripts/vmtest.sh puts in each guest (its PROGS), nothing more: a
# test program that does not cross-build must not stop the matrix.
VMTEST_PROGS := $(addprefix $(OUT)/tests/,libcuda.so.1 alloc_mix demo pagehog \
	lifecycle dlcycle nofp_chain realcuda_calls)
vmtest-build: $(OUT)/umtrace-static $(VMTEST_PROGS)

vmlinux:
	$(Q)scripts/gen-vmlinux.sh all

clean:
	$(Q)rm -rf build umtrace
