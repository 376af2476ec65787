// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "attach/opts.h"
#include "lib/log.h"
#include "lib/numa.h"
#include "lib/units.h"

#define DEFAULT_RESCAN_MS 5000


void attach_opts__init(struct attach_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->ringbuf_bytes = ATTACH_DEFAULT_RINGBUF;
	o->rescan_ms = DEFAULT_RESCAN_MS;
}

/* "-p 12,34" or repeated -p: all of them are traced. */
static int parse_pids(struct attach_opts *o, const char *arg)
{
	char *copy = strdup(arg), *tok, *save = NULL;
	int err = 0;
	long v;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (parse_long(tok, 1, 0x7fffffff, &v)) {
			elog("invalid pid '%s': expected a positive number", tok);
			err = -EINVAL;
			break;
		}
		if (o->n_pids == ATTACH_MAX_PIDS) {
			elog("too many pids (at most %d)", ATTACH_MAX_PIDS);
			err = -EINVAL;
			break;
		}
		o->pids[o->n_pids++] = (pid_t)v;
	}
	if (!err && !o->n_pids) {
		elog("invalid pid '%s'", arg);
		err = -EINVAL;
	}
	free(copy);
	return err;
}

static int add_path(const char ***list, size_t *n, const char *arg)
{
	const char **v = realloc(*list, (*n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	*list = v;
	v[(*n)++] = arg;
	return 0;
}

int attach_opts__parse(struct attach_opts *o, int opt, const char *arg)
{
	uint64_t v;

	switch (opt) {
	case 'p':
		return parse_pids(o, arg) ? -EINVAL : 1;
	case 'v':
		log_verbose++;
		return 1;
	case OPT_LIBCUDA:
		if (!*arg) {
			elog("--libcuda needs a path");
			return -EINVAL;
		}
		return add_path(&o->libcuda, &o->n_libcuda, arg) ? -EINVAL : 1;
	case OPT_LIBC10:
		if (!*arg) {
			elog("--libc10 needs a path");
			return -EINVAL;
		}
		if (o->no_libc10) {
			elog("give --libc10 or --no-libc10, not both");
			return -EINVAL;
		}
		return add_path(&o->libc10, &o->n_libc10, arg) ? -EINVAL : 1;
	case OPT_NO_LIBC10:
		if (o->n_libc10) {
			elog("give --libc10 or --no-libc10, not both");
			return -EINVAL;
		}
		o->no_libc10 = true;
		return 1;
	case OPT_LIBC10_EVERY_CALL:
		o->torch_continuous = true;
		return 1;
	case OPT_RINGBUF:
		if (parse_size(arg, &v) || v < 4096 || v > (1ULL << 30)) {
			elog("invalid --ringbuf-size '%s': expected a size from 4K to 1G", arg);
			return -EINVAL;
		}
		o->ringbuf_bytes = v;
		return 1;
	case OPT_MANAGED_FAULTS:
		o->managed_faults = true;
		return 1;
	case OPT_DEVICE_NODES: {
		uint64_t bits[UMT_MAX_NODES / 64];
		char why[160];

		if (strcmp(arg, "auto") && numa__parse_list(arg, bits, why, sizeof(why))) {
			elog("invalid --device-nodes %s", why);
			return -EINVAL;
		}
		if (strcmp(arg, "auto") && numa__check_online(bits, why, sizeof(why))) {
			elog("invalid --device-nodes %s: %s", arg, why);
			return -EINVAL;
		}
		o->device_nodes = arg;
		return 1;
	}
	case OPT_PLATFORM:
		if (platform__parse(arg, &o->platform)) {
			elog("invalid --platform '%s': expected unified, discrete or auto", arg);
			return -EINVAL;
		}
		return 1;
	case OPT_RESCAN:
		if (parse_duration_ms(arg, &v) || (v && v < 100)) {
			elog("invalid --rescan '%s': expected 0 (off) or an interval of at least 100ms", arg);
			return -EINVAL;
		}
		o->rescan_ms = v;
		o->rescan_given = true;
		return 1;
	}
	return 0;
}

void attach_opts__usage(FILE *f)
{
	fprintf(f,
"  -p, --pid PID[,PID...]   trace only these processes and their children\n"
"      --libcuda PATH       probe this libcuda file (repeatable); default: the\n"
"                           linker cache, LD_LIBRARY_PATH, the usual driver\n"
"                           directories and every libcuda mapped by a process\n"
"      --libc10 PATH        probe PyTorch's allocator hook in this libc10.so\n"
"                           (repeatable; top, report, record, guard); default:\n"
"                           the linker cache, LD_LIBRARY_PATH and every\n"
"                           libc10.so mapped by a process\n"
"      --no-libc10          leave PyTorch's allocator hook alone\n"
"      --libc10-every-call  probe the hook on every tensor allocation and free\n"
"                           (a uprobe each), not in windows of 10 ms a second\n"
"                           and while the allocator's segments move\n"
"      --rescan INTERVAL    look for new libcuda (and libc10) files this often\n"
"                           (default 5s, 0 to turn off)\n"
"      --ringbuf-size SIZE  BPF ring buffer size (default 8M)\n"
"      --platform MODEL     host cost of GPU allocations: unified (GB10,\n"
"                           Jetson: device memory is host RAM), discrete,\n"
"                           or auto (default: the driver, then what device\n"
"                           allocations are seen to take)\n"
"      --managed-faults     charge the pages CPU faults bring into managed\n"
"                           memory to their allocation (x86 only; hooks every\n"
"                           user page fault on the host, so it is opt-in)\n"
"      --device-nodes LIST  NUMA nodes whose memory is not host RAM (1,3-4,\n"
"                           none; default auto: nodes without CPUs while\n"
"                           NVIDIA's driver is loaded, as GH200's HBM): their\n"
"                           pages are counted apart, never as host memory\n"
"  -v, --verbose            say what is found and attached (which form of\n"
"                           PyTorch's hook, too); twice, -vv: libbpf's debug\n"
"                           log as well\n");
}

int attach_opts__bad_option(const char *cmd, int opt, char **argv)
{
	if (opt == ':')
		elog("%s: option '%s' needs a value", cmd, argv[optind - 1]);
	/* Not for a long option given a value it takes none of: optopt is its val. */
	else if (optopt > ' ' && optopt < 0x7f && strncmp(argv[optind - 1], "--", 2))
		elog("%s: unknown option '-%c'; see 'umtrace %s --help'", cmd, optopt, cmd);
	else
		elog("%s: unknown option '%s'; see 'umtrace %s --help'", cmd,
		     argv[optind - 1], cmd);
	return -EINVAL;
}

void attach_opts__free(struct attach_opts *o)
{
	free(o->libcuda);
	o->libcuda = NULL;
	o->n_libcuda = 0;
	free(o->libc10);
	o->libc10 = NULL;
	o->n_libc10 = 0;
}
