// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "model/platform.h"
#include "lib/parse.h"
#include "lib/units.h"

#define MIN_CALL_BYTES (1ULL << 20)	/* small calls may be sub-allocated */
#define EVIDENCE_BYTES (64ULL << 20)
#define UNIFIED_RATIO 0.5		/* host pages per device byte, at least */
#define DISCRETE_RATIO 0.1		/* at most */

int platform__parse(const char *s, enum platform *out)
{
	static const char *const names[] = {
		[PLATFORM_AUTO] = "auto", [PLATFORM_UNIFIED] = "unified",
		[PLATFORM_DISCRETE] = "discrete",
	};
	int i = str__index(s, names, sizeof(names) / sizeof(names[0]));

	if (i < 0)
		return i;
	*out = (enum platform)i;
	return 0;
}

/*
 * GPUs that have no memory of their own: DGX Spark's GB10, Thor, and the
 * Jetsons (nvgpu, no /proc/driver/nvidia/gpus). Everything else the driver
 * lists gets decided by what its allocations take.
 */
static bool driver_says_unified(void)
{
	static const char *const models[] = { "GB10", "Thor", "Orin", "Xavier" };
	glob_t g;
	size_t i, j;
	bool unified = false;

	if (!access("/etc/nv_tegra_release", F_OK))
		return true;
	if (glob("/proc/driver/nvidia/gpus/*/information", 0, NULL, &g))
		return false;
	for (i = 0; i < g.gl_pathc && !unified; i++) {
		char line[256];
		FILE *f = fopen(g.gl_pathv[i], "re");

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f) && !unified)
			for (j = 0; j < sizeof(models) / sizeof(models[0]); j++)
				if (!strncmp(line, "Model:", 6) && strstr(line, models[j]))
					unified = true;
		fclose(f);
	}
	globfree(&g);
	return unified;
}

void platform__init(struct platform_model *m, enum platform forced)
{
	memset(m, 0, sizeof(*m));
	m->forced = forced;
	if (forced != PLATFORM_AUTO) {
		m->why = "--platform";
		return;
	}
	if (driver_says_unified()) {
		m->decided = PLATFORM_UNIFIED;
		m->why = "driver: a GPU without memory of its own";
	}
}

static bool is_device_class(enum umt_class c)
{
	return c == UMT_CLASS_DEVICE || c == UMT_CLASS_VMM_PHYS;
}

void platform__observe(struct platform_model *m, const struct umt_call_rec *r,
		       uint64_t page_size)
{
	const struct cuda_api *api = cuda_api__get(r->api);
	double ratio;

	if (m->forced != PLATFORM_AUTO || m->decided != PLATFORM_AUTO)
		return;
	if (!api || api->is_free || !is_device_class(api->class))
		return;
	if (r->ret || r->end != UMT_END_RETURNED || r->size < MIN_CALL_BYTES)
		return;
	m->dev_bytes += r->size;
	m->dev_observed += r->pages_taken * page_size;
	if (m->dev_bytes < EVIDENCE_BYTES)
		return;
	ratio = (double)m->dev_observed / (double)m->dev_bytes;
	if (ratio >= UNIFIED_RATIO) {
		m->decided = PLATFORM_UNIFIED;
		m->why = "device allocs took their size in host pages";
	} else if (ratio <= DISCRETE_RATIO) {
		m->decided = PLATFORM_DISCRETE;
		m->why = "device allocs took almost no host pages";
	}
}

enum platform platform__current(const struct platform_model *m)
{
	return m->forced != PLATFORM_AUTO ? m->forced : m->decided;
}

const char *platform__describe(const struct platform_model *m, char *buf, size_t len)
{
	static const char *const names[] = { "undecided", "unified", "discrete" };
	enum platform p = platform__current(m);
	char b[16];

	if (p != PLATFORM_AUTO)
		snprintf(buf, len, "%s (%s)", names[p], m->why);
	else
		snprintf(buf, len, "undecided (%s of device allocs seen; holds = observed)",
			 fmt_bytes(m->dev_bytes, b, sizeof(b)));
	return buf;
}

/*
 * The table above, as a yes or no: does a call of this class cost its
 * size in host RAM on this platform, whatever its window saw?
 */
static bool costs_size(enum platform p, enum umt_class c)
{
	switch (c) {
	case UMT_CLASS_PINNED:
	case UMT_CLASS_REGISTERED:
		return true;
	case UMT_CLASS_DEVICE:
	case UMT_CLASS_VMM_PHYS:
		return p == PLATFORM_UNIFIED;
	default:
		return false;	/* managed: its pages come later, as faults */
	}
}

uint64_t platform__holds(const struct platform_model *m, enum umt_class c,
			 uint64_t size, uint64_t observed)
{
	if (costs_size(platform__current(m), c))
		return size;
	if (c == UMT_CLASS_DEVICE || c == UMT_CLASS_VMM_PHYS || c == UMT_CLASS_MANAGED)
		return observed;
	return 0;
}

uint64_t platform__admission_apis(enum platform p)
{
	uint64_t mask = 0;
	unsigned int i;

	for (i = 0; i < UMT_API__COUNT && i < 64; i++) {
		const struct cuda_api *a = cuda_api__get(i);

		if (a && !a->is_free && costs_size(p, a->class))
			mask |= 1ULL << i;
	}
	return mask;
}

static bool driver_lists_gpus(void)
{
	struct stat st;

	return !stat("/proc/driver/nvidia/gpus", &st) && S_ISDIR(st.st_mode);
}

enum platform platform__decide_now(enum platform forced, const char **why)
{
	struct platform_model m;

	platform__init(&m, forced);
	if (m.forced != PLATFORM_AUTO) {
		*why = "--platform";
		return m.forced;
	}
	if (m.decided != PLATFORM_AUTO) {
		*why = m.why;
		return m.decided;
	}
	if (driver_lists_gpus()) {
		*why = "the NVIDIA driver lists GPUs with memory of their own";
		return PLATFORM_DISCRETE;
	}
	*why = "no NVIDIA GPU with memory of its own is listed";
	return PLATFORM_UNIFIED;
}
