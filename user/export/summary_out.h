/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The summary (user/model/summary.h) for people and for programs: one row
 * per process and entry point, then the totals. For the end of trace, and
 * the guard's post-mortem report.
 */
#ifndef UMTRACE_SUMMARY_OUT_H
#define UMTRACE_SUMMARY_OUT_H

#include <stdio.h>
#include "model/summary.h"

/* A table under a blank line, then lines for the totals and caps hit. */
void export_summary_text(const struct summary *s, FILE *f);
/* One JSON line a row: {"event":"summary",...}. */
void export_summary_json(const struct summary *s, FILE *f);

/*
 * The driver's page pool (model/driver_pool.h), a line, when any free kept
 * its pages or the shrinker gave some back; nothing otherwise.
 */
void export_pool_text(const struct summary *s, FILE *f);
/* {"event":"driver_pool",...} on a line, when the text would say anything. */
void export_pool_json(const struct summary *s, FILE *f);

#endif /* UMTRACE_SUMMARY_OUT_H */
