// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include "attach/caps.h"
#include "lib/procfs.h"

static bool has_flag(cap_t c, cap_value_t cap, cap_flag_t which)
{
	cap_flag_value_t v = CAP_CLEAR;

	return !cap_get_flag(c, cap, which, &v) && v == CAP_SET;
}

bool caps__permitted(cap_value_t cap)
{
	cap_t c = cap_get_proc();
	bool ret;

	if (!c)
		return false;
	ret = has_flag(c, cap, CAP_PERMITTED);
	cap_free(c);
	return ret;
}

static bool in_list(const cap_value_t *v, size_t n, cap_value_t cap)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] == cap)
			return true;
	return false;
}

/* The process's thread count, from /proc/self/status; 0 if unknown. */
static unsigned int threads(void)
{
	char buf[32];

	if (proc__status(0, "Threads", buf, sizeof(buf)))
		return 0;
	return (unsigned int)strtoul(buf, NULL, 10);
}

/*
 * Without CAP_SETPCAP (capabilities given by file capabilities rather than
 * by root) the bounding set cannot shrink; no_new_privs and the emptied
 * inheritable set already keep an exec from gaining anything.
 */
static int drop_bounding(cap_t cur, const cap_value_t *held, size_t n)
{
	cap_value_t cap, last = cap_max_bits();

	if (!has_flag(cur, CAP_SETPCAP, CAP_EFFECTIVE))
		return 0;
	for (cap = 0; cap < last; cap++) {
		if (in_list(held, n, cap))
			continue;
		if (cap_drop_bound(cap))
			return -errno;
	}
	return 0;
}

int caps__drop_to(const cap_value_t *keep, size_t n)
{
	cap_value_t held[CAPS_KEEP_MAX], last = cap_max_bits();
	cap_t cur, want = NULL;
	size_t i, n_held = 0;
	int err = 0;

	if (n > CAPS_KEEP_MAX)
		return -E2BIG;
	cur = cap_get_proc();
	if (!cur)
		return -errno;
	/* One this kernel does not know, or one not held, cannot be kept. */
	for (i = 0; i < n; i++)
		if (keep[i] < last && has_flag(cur, keep[i], CAP_PERMITTED) &&
		    !in_list(held, n_held, keep[i]))
			held[n_held++] = keep[i];

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		err = -errno;
		goto out;
	}
	/* The bounding set first: shrinking it takes CAP_SETPCAP, dropped next. */
	err = drop_bounding(cur, held, n_held);
	if (err)
		goto out;
	/* EINVAL: a kernel before 4.3 has no ambient set to clear. */
	if (cap_reset_ambient() && errno != EINVAL) {
		err = -errno;
		goto out;
	}
	want = cap_init();	/* every set empty */
	if (!want) {
		err = -errno;
		goto out;
	}
	if (n_held && (cap_set_flag(want, CAP_PERMITTED, (int)n_held, held, CAP_SET) ||
		       cap_set_flag(want, CAP_EFFECTIVE, (int)n_held, held, CAP_SET))) {
		err = -errno;
		goto out;
	}
	if (cap_set_proc(want)) {
		err = -errno;
		goto out;
	}
	if (threads() > 1)
		err = -EBUSY;
out:
	if (want)
		cap_free(want);
	cap_free(cur);
	return err;
}
