// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target for `umtrace guard --config FILE` (user/guardd/config.c).
 * The module reads the file through its own line reader handed to inih's
 * ini_parse_stream(), and checks the file's owner and mode first: there
 * is no string entry point, so the input is written to a memfd (mode
 * 0600, ours) and loaded by its /proc/self/fd path, which takes the same
 * path a real file does.
 *
 * An input starting with a 0 byte is a command-line flag instead:
 * "\0KEY\0VALUE" goes to guard_config__set(), the parser behind --floor,
 * --scope and the rest. Either way a config that loads is then resolved
 * against a MemTotal and its scope and protected list are exercised, so
 * every string it kept is read back.
 *
 * It found glibc's regcomp() taking memory exponential in stacked
 * quantifiers ("c++++..." wanted tens of GiB) through comm:REGEX; the
 * module now refuses such patterns, and the target checks that it does.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/types.h>
#include "guardd/config.h"
#include "umtrace.h"

#define GIB (1ULL << 30)

static int cfg_fd = -1;
static char cfg_path[64];
static volatile size_t sink;

static int put_file(const uint8_t *data, size_t size)
{
	if (cfg_fd < 0) {
		cfg_fd = memfd_create("fuzz-guard.conf", MFD_CLOEXEC);
		/* memfds start 0777: the owner check would refuse every input */
		if (cfg_fd < 0 || fchmod(cfg_fd, 0600))
			abort();
		snprintf(cfg_path, sizeof(cfg_path), "/proc/self/fd/%d", cfg_fd);
	}
	if (ftruncate(cfg_fd, 0) ||
	    (size && pwrite(cfg_fd, data, size, 0) != (ssize_t)size))
		abort();
	return 0;
}

/* "\0KEY\0VALUE": a flag and its value, both NUL-terminated copies. */
static int set_flag(struct guard_config *cfg, const uint8_t *data, size_t size,
		    char *err, size_t errlen)
{
	const uint8_t *sep = memchr(data, 0, size);
	char *key, *value;
	int ret;

	if (!sep)
		return -1;
	key = strndup((const char *)data, (size_t)(sep - data));
	value = strndup((const char *)sep + 1, size - (size_t)(sep - data) - 1);
	if (!key || !value) {
		free(key);
		free(value);
		return -1;
	}
	ret = guard_config__set(cfg, key, value, err, errlen);
	free(key);
	free(value);
	return ret;
}

static void use(const struct guard_config *cfg)
{
	static const char *const comms[] = { "python3", "torchrun", "sshd", "" };
	static const char *const cgroups[] = { "/", "/slurm.slice/job_1", "a/b/c" };
	struct guard_policy pol;
	struct proc_id id;
	char err[256];
	size_t i;

	for (i = 0; i < 3; i++)
		guard_config__policy(cfg, (4ULL << i) * GIB, &pol, err, sizeof(err));
	for (i = 0; i < cfg->protect.n; i++)
		sink += protect__describe(&cfg->protect.v[i], err, sizeof(err))[0];
	for (i = 0; i < 4; i++) {
		sink += guard_scope__match(&cfg->scope, (pid_t)(100 + i), comms[i],
					   cgroups[i % 3]);
		memset(&id, 0, sizeof(id));
		id.pid = (pid_t)(100 + i);
		snprintf(id.comm, sizeof(id.comm), "%s", comms[i]);
		snprintf(id.exe_name, sizeof(id.exe_name), "%s", comms[i]);
		snprintf(id.cgroup, sizeof(id.cgroup), "%s", cgroups[i % 3]);
		id.have_exe = id.have_uid = true;
		sink += protect__match(&cfg->protect, &id, 0);
	}
	for (i = 0; i < cfg->n_libcuda; i++)
		sink += strlen(cfg->libcuda[i]);
	if (cfg->scope.spec)
		sink += strlen(cfg->scope.spec);
	if (cfg->on_stop)
		sink += strlen(cfg->on_stop);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct guard_config cfg;
	char err[256] = "";
	int ret;

	guard_config__init(&cfg);
	if (size && !data[0]) {
		ret = set_flag(&cfg, data + 1, size - 1, err, sizeof(err));
	} else {
		put_file(data, size);
		ret = guard_config__load(&cfg, cfg_path, err, sizeof(err));
	}
	/* A message, when there is one, must be a terminated string. */
	if (ret)
		sink += strnlen(err, sizeof(err));
	use(&cfg);
	guard_config__free(&cfg);
	return 0;
}
