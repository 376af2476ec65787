// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <zlib.h>
#include "lib/numa.h"

#define NODE_DIR "/sys/devices/system/node"
#define CONFIG_MAX (1 << 20)

static void set_bit_(uint64_t *bits, unsigned long n)
{
	bits[n / 64] |= 1ULL << (n % 64);
}

static int parse_node(const char **p, unsigned long *n)
{
	char *end;

	if (!isdigit((unsigned char)**p))
		return -EINVAL;
	errno = 0;
	*n = strtoul(*p, &end, 10);
	if (errno || *n >= UMT_MAX_NODES)
		return -EINVAL;
	*p = end;
	return 0;
}

int numa__parse_list(const char *s, uint64_t *bits, char *why, size_t len)
{
	unsigned long a, b;
	const char *p = s;

	memset(bits, 0, UMT_MAX_NODES / 8);
	if (!strcmp(s, "none"))
		return 0;
	for (;;) {
		if (parse_node(&p, &a))
			goto bad;
		b = a;
		if (*p == '-') {
			p++;
			if (parse_node(&p, &b) || b < a)
				goto bad;
		}
		for (; a <= b; a++)
			set_bit_(bits, a);
		if (!*p)
			return 0;
		if (*p++ != ',')
			goto bad;
	}
bad:
	snprintf(why, len, "'%s': expected node numbers below %d, as 1,3-4, or none",
		 s, UMT_MAX_NODES);
	return -EINVAL;
}

static long config_value(const char *config, const char *key)
{
	size_t klen = strlen(key);
	const char *p = config;

	while (p && *p) {
		if (!strncmp(p, key, klen) && p[klen] == '=')
			return p[klen + 1] == 'y' ? 1 : strtol(p + klen + 1, NULL, 10);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return 0;
}

unsigned int numa__flags_shift(const char *config)
{
	long shift = config_value(config, "CONFIG_NODES_SHIFT");

	/*
	 * With SPARSEMEM_VMEMMAP no section number takes the top of the
	 * flags, and on 64 bit the node number always fits below it.
	 */
	if (!config_value(config, "CONFIG_NUMA") ||
	    !config_value(config, "CONFIG_SPARSEMEM_VMEMMAP") ||
	    !config_value(config, "CONFIG_64BIT") || shift <= 0 || shift > 10)
		return 0;
	return (unsigned int)(64 - shift);
}

/* The running kernel's config, as libbpf looks for it. NULL if none. */
static char *read_config(void)
{
	char path[300], *buf;
	struct utsname u;
	gzFile f = NULL;
	int n = 0;

	buf = malloc(CONFIG_MAX + 1);
	if (!buf)
		return NULL;
	if (!uname(&u)) {
		snprintf(path, sizeof(path), "/boot/config-%s", u.release);
		f = gzopen(path, "rb");	/* reads plain files too */
	}
	if (!f)
		f = gzopen("/proc/config.gz", "rb");
	if (f) {
		n = gzread(f, buf, CONFIG_MAX);
		gzclose(f);
	}
	if (n <= 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok;
}

unsigned int numa__possible(void)
{
	uint64_t bits[UMT_MAX_NODES / 64];
	char line[4096], why[64];
	unsigned int n;

	if (!read_line(NODE_DIR "/possible", line, sizeof(line)))
		return 1;
	line[strcspn(line, "\n")] = '\0';
	if (numa__parse_list(line, bits, why, sizeof(why)))
		return 1;
	for (n = UMT_MAX_NODES; n > 1; n--)
		if (numa__has(bits, n - 1))
			break;
	return n;
}

/* Nodes with memory and no CPU, while NVIDIA's driver is loaded. */
static void auto_nodes(uint64_t *bits)
{
	char path[128], line[4096];
	unsigned long n;
	const char *p;

	memset(bits, 0, UMT_MAX_NODES / 8);
	if (access("/proc/driver/nvidia", F_OK))
		return;
	if (!read_line(NODE_DIR "/has_memory", line, sizeof(line)))
		return;
	line[strcspn(line, "\n")] = '\0';
	if (numa__parse_list(line, bits, path, sizeof(path)))
		return;
	for (n = 0; n < UMT_MAX_NODES; n++) {
		if (!numa__has(bits, (unsigned int)n))
			continue;
		snprintf(path, sizeof(path), NODE_DIR "/node%lu/cpulist", n);
		p = read_line(path, line, sizeof(line)) ? line : "";
		if (isdigit((unsigned char)*p))
			bits[n / 64] &= ~(1ULL << (n % 64));	/* it has CPUs */
	}
}

int numa__check_online(const uint64_t *bits, char *why, size_t len)
{
	char path[64];
	unsigned int n;

	for (n = 0; n < UMT_MAX_NODES; n++) {
		if (!numa__has(bits, n))
			continue;
		snprintf(path, sizeof(path), NODE_DIR "/node%u/meminfo", n);
		if (access(path, R_OK)) {
			snprintf(why, len, "this host has no NUMA node %u", n);
			return -ENOENT;
		}
	}
	return 0;
}

/*
 * The shift of this kernel's page-flags node field: read once, since the
 * guard resolves its nodes twice at start (its percentages, its session)
 * and reading the config means inflating /proc/config.gz.
 */
static unsigned int kernel_flags_shift(void)
{
	static int shift = -1;
	char *config;

	if (shift >= 0)
		return shift;
	config = read_config();
	shift = config ? (int)numa__flags_shift(config) : 0;
	free(config);
	return shift;
}

int numa__device_nodes(const char *spec, struct numa_nodes *out, char *why, size_t len)
{
	unsigned int i;
	int err;

	memset(out, 0, sizeof(*out));
	if (!spec || !strcmp(spec, "auto")) {
		auto_nodes(out->device);
	} else {
		err = numa__parse_list(spec, out->device, why, len);
		if (!err)
			err = numa__check_online(out->device, why, len);
		if (err)
			return err;
	}
	for (i = 0; i < UMT_MAX_NODES / 64; i++)
		out->n_device += (unsigned int)__builtin_popcountll(out->device[i]);
	if (!out->n_device)
		return 0;
	out->flags_shift = kernel_flags_shift();
	if (!out->flags_shift) {
		snprintf(why, len, "cannot tell a page's NUMA node on this kernel (its config "
			 "is not in /boot or /proc/config.gz, or it has no NUMA nodes in page flags)");
		memset(out->device, 0, sizeof(out->device));
		out->n_device = 0;
		return -ENOTSUP;
	}
	return 0;
}

bool numa__has(const uint64_t *bits, unsigned int n)
{
	return n < UMT_MAX_NODES && (bits[n / 64] & (1ULL << (n % 64)));
}

const char *numa__format(const struct numa_nodes *nodes, char *buf, size_t len)
{
	unsigned int a, b;
	size_t off = 0;

	buf[0] = '\0';
	for (a = 0; a < UMT_MAX_NODES && off < len; a = b + 1) {
		if (!numa__has(nodes->device, a)) {
			b = a;
			continue;
		}
		for (b = a; numa__has(nodes->device, b + 1); b++)
			;
		off += (size_t)snprintf(buf + off, len - off, "%s%u", off ? "," : "", a);
		if (b > a && off < len)
			off += (size_t)snprintf(buf + off, len - off, "-%u", b);
	}
	return buf;
}
