// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Which processes the guard may stop, from --scope: parsed once, matched
 * against a process's pid, name and cgroup. Pure: no /proc, no BPF (the
 * kernel's half of the scope is guardd/scope_kernel.c).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "guardd/scope.h"
#include "lib/parse.h"
#include "lib/procfs.h"
#include "lib/units.h"

/* Where cgroup v2 is mounted on every host this runs on but hybrid ones. */
#define CGROUP_MOUNT "/sys/fs/cgroup"

static int scope_pids(struct guard_scope *sc, const char *list, const char *name,
		      const char *spec, char *err, size_t errlen)
{
	char *copy = strdup(list), *p, *comma;
	int ret = 0;
	long v;

	if (!copy)
		return -ENOMEM;
	for (p = copy; p; p = comma ? comma + 1 : NULL) {
		comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (parse_long(p, 1, INT_MAX, &v)) {
			errbuf__set(err, errlen, "invalid %s '%s': '%s' is not a pid", name, spec, p);
			ret = -EINVAL;
			break;
		}
		if (sc->n_pids == GUARD_SCOPE_MAX_PIDS) {
			errbuf__set(err, errlen, "invalid %s '%s': at most %d pids", name, spec,
				GUARD_SCOPE_MAX_PIDS);
			ret = -EINVAL;
			break;
		}
		sc->pids[sc->n_pids++] = (pid_t)v;
	}
	free(copy);
	return ret;
}

/*
 * Kept relative to the cgroup v2 root with single slashes, so that it
 * compares with /proc/PID/cgroup's path by prefix. ".." could leave the
 * subtree the operator meant, so it is refused rather than resolved.
 */
int guard_cgroup__parse(const char *path, char **out_path, const char *name,
			const char *spec, char *err, size_t errlen)
{
	const char *mnt = cgroup2__root(), *p = path, *end;
	size_t root, n = 0;
	char *out;

	/* Hybrid hosts mount cgroup v2 at /sys/fs/cgroup/unified. */
	if (!mnt || strncmp(p, mnt, strlen(mnt)) || (p[strlen(mnt)] && p[strlen(mnt)] != '/'))
		mnt = CGROUP_MOUNT;
	root = strlen(mnt);
	if (*p == '/') {
		if (strncmp(p, mnt, root) || (p[root] && p[root] != '/')) {
			errbuf__set(err, errlen, "invalid %s '%s': a cgroup path must be under %s or relative to it",
				name, spec, CGROUP_MOUNT);
			return -EINVAL;
		}
		p += root;
	} else if (!*p) {
		errbuf__set(err, errlen, "invalid %s '%s': cgroup: needs a path", name, spec);
		return -EINVAL;
	}
	out = malloc(strlen(p) + 1);
	if (!out)
		return -ENOMEM;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchrnul(p, '/');
		if ((end - p == 1 && p[0] == '.') || (end - p == 2 && p[0] == '.' && p[1] == '.')) {
			errbuf__set(err, errlen, "invalid %s '%s': '.' and '..' are not allowed in a cgroup path",
				name, spec);
			free(out);
			return -EINVAL;
		}
		if (n)
			out[n++] = '/';
		memcpy(out + n, p, (size_t)(end - p));
		n += (size_t)(end - p);
		p = end;
	}
	out[n] = '\0';
	*out_path = out;
	return 0;
}

bool guard_cgroup__holds(const char *base, const char *cgroup)
{
	size_t len = strlen(base);

	if (!cgroup)
		return false;
	while (*cgroup == '/')
		cgroup++;
	/* "a/b" holds "a/b" and "a/b/c", not "a/bc". */
	return !len || (!strncmp(cgroup, base, len) && (!cgroup[len] || cgroup[len] == '/'));
}

/* Nesting deeper than a process name's 15 characters needs. */
#define RE_MAX_DEPTH	16
/* Atoms after repeats are spelled out: a name's regex needs few. */
#define RE_MAX_ATOMS	1024

/* Past a bracket expression ("[]a]", "[^]a]", "[[:alpha:]]"): its last ']'. */
static const char *bracket_end(const char *p)
{
	p++;
	if (*p == '^')
		p++;
	if (*p == ']')
		p++;
	for (; *p && *p != ']'; p++)
		if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
			const char *q = strstr(p + 2, (char[]){ p[1], ']', 0 });

			if (!q)
				return p + strlen(p) - 1;
			p = q + 1;
		}
	return *p ? p : p - 1;
}

/*
 * regcomp() spells a repeat out, copies of copies for nested groups:
 * "(((c|){16}){16}){16}" took 131 MB here, one level more some GB. So
 * count the atoms it would spell out: a group is the sum of its atoms, a
 * repeat multiplies the atom or group before it by its count (by 2 for
 * *, + and ?).
 */
static bool regex_too_large(const char *re)
{
	uint64_t sum[RE_MAX_DEPTH + 1] = { 0 }, last[RE_MAX_DEPTH + 1] = { 0 }, f;
	unsigned long lo, hi;
	unsigned int d = 0;
	const char *p;
	char *end;

	for (p = re; *p; p++) {
		f = 0;
		if (*p == '(') {
			if (++d > RE_MAX_DEPTH)
				return true;
			sum[d] = last[d] = 0;
			continue;
		} else if (*p == ')' && d) {
			last[d - 1] = sum[d];
			sum[d - 1] += sum[d];
			d--;
			continue;
		} else if (*p == '*' || *p == '+' || *p == '?') {
			f = 2;
		} else if (*p == '{') {
			lo = strtoul(p + 1, &end, 10);
			hi = *end == ',' ? (isdigit((unsigned char)end[1]) ?
					    strtoul(end + 1, &end, 10) : lo + 1) : lo;
			f = (hi > lo ? hi : lo) + 1;
			p = strchrnul(p, '}');
			if (!*p)
				break;
		} else if (*p == '|') {
			last[d] = 0;
			continue;
		} else if (*p == '[') {
			p = bracket_end(p);
		} else if (*p == '\\' && p[1]) {
			p++;
		}
		if (f > RE_MAX_ATOMS)
			return true;
		if (f) {
			sum[d] += last[d] * (f - 1);
			last[d] *= f;
		} else {
			last[d] = 1;
			sum[d]++;
		}
		if (sum[d] > RE_MAX_ATOMS || last[d] > RE_MAX_ATOMS)
			return true;
	}
	return false;
}

/*
 * glibc's regcomp() grows exponentially with quantifiers stacked on one
 * another ("c++++" took 720 MB at 20 of them) and with large repeat
 * counts. A process name has 15 characters: neither is ever needed.
 */
static const char *regex_too_costly(const char *re)
{
	unsigned long lo, hi;
	const char *p;
	char *end;
	bool after_quant = false;

	for (p = re; *p; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			after_quant = false;
			continue;
		}
		if (*p == '*' || *p == '+' || *p == '?' || *p == '{') {
			if (after_quant)
				return "a quantifier on a quantifier";
			if (*p == '{') {
				lo = strtoul(p + 1, &end, 10);
				hi = *end == ',' ? strtoul(end + 1, &end, 10) : lo;
				if (lo > 16 || hi > 16)
					return "a repeat count above 16";
				p = strchrnul(end, '}');
				if (!*p)
					break;
			}
			after_quant = true;
			continue;
		}
		after_quant = false;
	}
	if (regex_too_large(re))
		return "repeats nested too deep or too long";
	return NULL;
}

static int scope_comm(struct guard_scope *sc, const char *re, const char *name,
		      const char *spec, char *err, size_t errlen)
{
	const char *costly;
	char why[128];
	int ret;

	if (!*re) {
		errbuf__set(err, errlen, "invalid %s '%s': comm: needs a regular expression", name,
			spec);
		return -EINVAL;
	}
	costly = regex_too_costly(re);
	if (costly) {
		errbuf__set(err, errlen, "invalid %s '%s': %s (a process name has 15 characters)",
			    name, spec, costly);
		return -EINVAL;
	}
	sc->comm_re = malloc(sizeof(*sc->comm_re));
	if (!sc->comm_re)
		return -ENOMEM;
	ret = regcomp(sc->comm_re, re, REG_EXTENDED | REG_NOSUB);
	if (ret) {
		regerror(ret, sc->comm_re, why, sizeof(why));
		errbuf__set(err, errlen, "invalid %s '%s': %s", name, spec, why);
		free(sc->comm_re);
		sc->comm_re = NULL;
		return -EINVAL;
	}
	return 0;
}

static int scope_parse(struct guard_scope *sc, const char *spec, const char *name, char *err,
		       size_t errlen)
{
	struct guard_scope n = { .kind = UMT_SCOPE_ALL };
	int ret = 0;

	if (!strcmp(spec, "all")) {
		n.kind = UMT_SCOPE_ALL;
	} else if (!strcmp(spec, "gpu")) {
		n.kind = UMT_SCOPE_GPU;
	} else if (!strncmp(spec, "pid:", 4)) {
		n.kind = UMT_SCOPE_PIDS;
		ret = scope_pids(&n, spec + 4, name, spec, err, errlen);
	} else if (!strncmp(spec, "cgroup:", 7)) {
		n.kind = UMT_SCOPE_CGROUP;
		ret = guard_cgroup__parse(spec + 7, &n.cgroup, name, spec, err, errlen);
	} else if (!strncmp(spec, "comm:", 5)) {
		n.kind = UMT_SCOPE_COMM;
		ret = scope_comm(&n, spec + 5, name, spec, err, errlen);
	} else {
		errbuf__set(err, errlen, "invalid %s '%s': expected gpu, all, pid:LIST, cgroup:PATH or comm:REGEX",
			name, spec);
		return -EINVAL;
	}
	if (!ret) {
		n.spec = strdup(spec);
		if (!n.spec)
			ret = -ENOMEM;
	}
	if (ret == -ENOMEM)
		errbuf__set(err, errlen, "%s: out of memory", name);
	if (ret) {
		guard_scope__free(&n);
		return ret;
	}
	guard_scope__free(sc);
	*sc = n;
	return 0;
}

int guard_scope__parse(struct guard_scope *sc, const char *spec, const char *name,
		       char *err, size_t errlen)
{
	return scope_parse(sc, spec, name ? name : "scope", err, errlen);
}

bool guard_scope__match(const struct guard_scope *sc, pid_t pid, const char *comm,
			const char *cgroup)
{
	size_t i;

	switch (sc->kind) {
	case UMT_SCOPE_GPU:	/* the caller offers only GPU processes */
	case UMT_SCOPE_ALL:
		return true;
	case UMT_SCOPE_PIDS:
		for (i = 0; i < sc->n_pids; i++)
			if (sc->pids[i] == pid)
				return true;
		return false;
	case UMT_SCOPE_CGROUP:
		return guard_cgroup__holds(sc->cgroup, cgroup);
	case UMT_SCOPE_COMM:
		return comm && !regexec(sc->comm_re, comm, 0, NULL, 0);
	}
	return false;
}

void guard_scope__free(struct guard_scope *sc)
{
	if (sc->comm_re) {
		regfree(sc->comm_re);
		free(sc->comm_re);
	}
	free(sc->cgroup);
	free(sc->spec);
	memset(sc, 0, sizeof(*sc));
	sc->kind = UMT_SCOPE_GPU;
}

