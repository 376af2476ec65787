// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "guardd/report.h"
#include "lib/sys.h"
#include "lib/file_writer.h"
#include "lib/out_file.h"

void guard_report__init(struct guard_report *r, const char *state_path,
			const char *metrics_path)
{
	memset(r, 0, sizeof(*r));
	r->state_path = state_path;
	r->metrics_path = metrics_path;
	r->state_err.what = "guard: cannot write the state file";
	r->metrics_err.what = "guard: cannot write the metrics file";
}

/*
 * Hand a file's new content to the writer thread (the loop goes on at
 * once), or, before it runs, write it here. Failures are logged when
 * they start, now and then while they last, and when they end.
 */
static void put_file(struct guard_report *r, struct log_repeat *rep, const char *path,
		     char *buf, size_t len, mode_t mode, bool mkdir)
{
	int err;

	if (!buf) {
		err = -ENOMEM;
	} else if (r->files) {
		file_writer__put(r->files, path, buf, len, mode, mkdir);
		/* The last write that ended: this one may still be on its way. */
		err = file_writer__result(r->files, path);
	} else {
		err = mkdir ? file__make_parent(path) : 0;
		if (!err)
			err = out_file__replace(path, buf, len, mode);
		free(buf);
	}
	if (err > 0)
		return;
	if (err)
		log__repeat(rep, clock__mono_ms(), "guard: cannot write %s: %s", path,
			    strerror(-err));
	else
		log__repeat_end(rep);
}

void guard_report__write(struct guard_report *r, const struct guard_snapshot *s)
{
	size_t len = 0;
	char *buf;

	buf = guard_state__format(&s->status, &len);
	/* The state file's directory is root's, made 0700 when missing. */
	put_file(r, &r->state_err, r->state_path, buf, len, 0600, true);
	if (!r->metrics_path)
		return;
	buf = metrics__text(&s->metrics, &len);
	put_file(r, &r->metrics_err, r->metrics_path, buf, len, METRICS_MODE, false);
}

void guard_snapshot__free(struct guard_snapshot *s)
{
	free((void *)s->metrics.procs);
	free((void *)s->metrics.stops);
	free((void *)s->metrics.torch);
	s->metrics.procs = NULL;
	s->metrics.stops = NULL;
	s->metrics.torch = NULL;
}
