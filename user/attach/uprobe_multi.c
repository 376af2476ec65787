// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "attach/uprobe_multi.h"

#define UMT_BPF_F_UPROBE_MULTI_RETURN 1U

/* The BPF_LINK_CREATE member of union bpf_attr, as Linux 6.6 defines it. */
struct link_create_uprobe_multi {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t multi_flags;
	uint32_t pid;
	uint32_t pad;
};

int uprobe_multi__attach(int prog_fd, const char *path, const uint64_t *offsets,
			 const uint64_t *cookies, size_t cnt, bool retprobe)
{
	struct link_create_uprobe_multi attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = prog_fd;
	attr.attach_type = UMT_BPF_TRACE_UPROBE_MULTI;
	attr.path = (uint64_t)(uintptr_t)path;
	attr.offsets = (uint64_t)(uintptr_t)offsets;
	attr.cookies = (uint64_t)(uintptr_t)cookies;
	attr.cnt = (uint32_t)cnt;
	attr.multi_flags = retprobe ? UMT_BPF_F_UPROBE_MULTI_RETURN : 0;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : (int)fd;
}

/*
 * Load the smallest program of that attach type and ask for a link on "/":
 * a kernel that knows multi-uprobes opens the path and refuses a directory
 * with EBADF; an older one refuses the attach type itself.
 */
bool uprobe_multi__supported(void)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = UMT_BPF_TRACE_UPROBE_MULTI);
	uint64_t offset = 0, cookie = 0;
	int prog_fd, fd;

	prog_fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns,
				sizeof(insns) / sizeof(insns[0]), &opts);
	if (prog_fd < 0)
		return false;
	fd = uprobe_multi__attach(prog_fd, "/", &offset, &cookie, 1, false);
	if (fd >= 0)
		close(fd);
	close(prog_fd);
	return fd == -EBADF;
}
