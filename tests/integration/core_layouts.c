// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * core_layouts: load umtrace's BPF object against this kernel's BTF as it
 * is, then against a copy rewritten to an older layout of a struct the
 * programs read in two ways, so that the way this kernel does not take is
 * relocated and verified too. The kernel's verifier still checks every
 * access against the real types; a rewrite only changes which CO-RE branch
 * is live, and so it must keep the field's offset and size.
 *
 * Layouts:
 *   page-word  struct page's flags as the plain word it was before Linux
 *              6.17 (memdesc_flags_t since)
 *
 * Prints "LAYOUT: loaded" per layout; exits 0 when all loaded, 1 when one
 * did not (libbpf's log on stderr), 77 when this kernel cannot say.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "umtrace.h"
#include "umtrace.skel.h"

#define SKIP 77

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level != LIBBPF_WARN)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* struct page's first member turned into an unsigned long, if it is not one. */
static int rewrite_page_word(struct btf *btf)
{
	const struct btf_type *t;
	struct btf_member *m;
	int page, word;

	page = btf__find_by_name_kind(btf, "page", BTF_KIND_STRUCT);
	word = btf__find_by_name_kind(btf, "long unsigned int", BTF_KIND_INT);
	if (page < 0 || word < 0)
		return -ENOENT;
	t = btf__type_by_id(btf, page);
	m = (struct btf_member *)btf_members(t);
	if (strcmp(btf__name_by_offset(btf, m->name_off), "flags") || m->offset)
		return -EINVAL;
	if (btf_kind(btf__type_by_id(btf, m->type)) == BTF_KIND_INT)
		return -EEXIST;	/* this kernel has the old layout already */
	m->type = word;
	return 0;
}

static int write_btf(const struct btf *btf, const char *path)
{
	const void *data;
	__u32 size;
	FILE *f;

	data = btf__raw_data(btf, &size);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	if (fwrite(data, 1, size, f) != size) {
		fclose(f);
		return -EIO;
	}
	return fclose(f) ? -errno : 0;
}

/*
 * Every program that reads page flags does so only with a device node
 * named: name one, or the verifier would drop that code unseen.
 */
static int load(const char *layout, const char *btf_path)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = btf_path);
	struct umtrace_bpf *skel;
	int err;

	skel = umtrace_bpf__open_opts(&opts);
	if (!skel) {
		fprintf(stderr, "%s: cannot open the object: %s\n", layout, strerror(errno));
		return 1;
	}
	skel->rodata->any_device_node = true;
	skel->rodata->node_flags_shift = 54;
	((__u64 *)skel->rodata->device_nodes)[0] = 2;
	err = umtrace_bpf__load(skel);
	umtrace_bpf__destroy(skel);
	if (err) {
		fprintf(stderr, "%s: not loaded: %s\n", layout, strerror(-err));
		return 1;
	}
	printf("%s: loaded\n", layout);
	return 0;
}

int main(void)
{
	char path[] = "/tmp/umtrace-core-XXXXXX";
	struct btf *btf;
	int fd, err, failed;

	libbpf_set_print(quiet);
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		fprintf(stderr, "no kernel BTF: %s\n", strerror(errno));
		return SKIP;
	}
	failed = load("current", NULL);
	err = rewrite_page_word(btf);
	if (err == -EEXIST) {
		printf("page-word: this kernel's own layout, loaded above\n");
		btf__free(btf);
		return failed;
	}
	if (err) {
		fprintf(stderr, "struct page is not as expected: %s\n", strerror(-err));
		btf__free(btf);
		return 1;
	}
	fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		btf__free(btf);
		return 1;
	}
	close(fd);
	err = write_btf(btf, path);
	btf__free(btf);
	if (err) {
		fprintf(stderr, "%s: %s\n", path, strerror(-err));
		unlink(path);
		return 1;
	}
	failed |= load("page-word", path);
	unlink(path);
	return failed;
}
