// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * model_bench: what PyTorch's allocator model (user/model/torch.c) costs
 * `top` per sample and per process, alone: PROCS processes of one device
 * each, SAMPLES_HZ hook samples a second each for SECONDS of a clock this
 * program drives (no sleeping), every process judged once a second as
 * top's refresh does. Steps swing allocated between a floor and a peak;
 * one process in eight also slides (its floor rises 1 GiB an hour), so
 * the horizons and episodes have work to do.
 *
 * usage: model_bench [-p PROCS] [-s SECONDS] [-r SAMPLES_HZ]
 *
 * Prints one JSON object: samples fed, ns a sample (the feed alone), ns a
 * judgement, the process's CPU seconds and peak RSS (KiB), and the
 * model's bytes per process (RSS growth over the run / PROCS). Built the
 * same against an older model, it gives the before and after of one change
 * on the same machine (the API it uses has not changed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include "model/torch.h"

#define MIB (1ULL << 20)
#define NS 1000000000ULL

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static long rss_kib(void)
{
	char line[256];
	long kib = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Process i's sample k: a step's swing, and for one in eight a slide. */
static void make_sample(struct torch_sample *s, uint32_t i, uint64_t k, uint64_t ts,
			unsigned int hz)
{
	uint64_t floor = 1024 * MIB + (uint64_t)i * MIB;
	uint64_t swing = (k % 4) * 64 * MIB;

	if (i % 8 == 0)
		floor += (1024 * MIB) * (ts / NS) / 3600;	/* 1 GiB an hour */
	memset(s, 0, sizeof(*s));
	s->ts_ns = ts;
	s->pid = 1000 + i;
	s->flags = TORCH_S_TOTALS | TORCH_S_CONF;
	s->allocated = floor + swing;
	s->reserved = floor + 512 * MIB;
	s->peak_allocated = floor + 192 * MIB;
	s->peak_reserved = s->reserved;
	s->alloc_low = floor;
	s->alloc_high = floor + 192 * MIB;
	s->allocs = s->frees = k * 10;
	snprintf(s->comm, sizeof(s->comm), "job%u", i);
	(void)hz;
}

static void usage(void)
{
	fprintf(stderr, "usage: model_bench [-p PROCS] [-s SECONDS] [-r SAMPLES_HZ]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned int procs = 500, hz = 10, i;
	uint64_t seconds = 3600, sec, k, samples = 0, judged = 0;
	uint64_t feed_ns = 0, judge_ns = 0, t;
	struct torch_verdict v;
	struct torch_sample s;
	struct torch_model m;
	long rss0, rss1;
	double cpu0;
	int c;

	while ((c = getopt(argc, argv, "p:s:r:")) != -1) {
		switch (c) {
		case 'p':
			procs = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 's':
			seconds = strtoull(optarg, NULL, 10);
			break;
		case 'r':
			hz = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		default:
			usage();
		}
	}
	if (!procs || !hz || !seconds || optind != argc)
		usage();
	rss0 = rss_kib();
	cpu0 = cpu_s();
	torch_model__init(&m, NULL);
	for (sec = 0; sec < seconds; sec++) {
		t = mono_ns();
		for (k = sec * hz; k < (sec + 1) * hz; k++) {
			for (i = 0; i < procs; i++) {
				make_sample(&s, i, k, k * NS / hz + NS, hz);
				if (torch_model__add(&m, &s)) {
					fprintf(stderr, "model_bench: out of memory\n");
					return 1;
				}
				samples++;
			}
		}
		feed_ns += mono_ns() - t;
		t = mono_ns();
		for (i = 0; i < procs; i++)
			judged += torch_model__judge_pid(&m, 1000 + i, &v);
		judge_ns += mono_ns() - t;
	}
	rss1 = rss_kib();
	printf("{\"procs\": %u, \"seconds\": %llu, \"hz\": %u, \"samples\": %llu, "
	       "\"ns_per_sample\": %.1f, \"ns_per_judgement\": %.1f, \"cpu_s\": %.3f, "
	       "\"rss_kib\": %ld, \"model_bytes_per_proc\": %ld}\n",
	       procs, (unsigned long long)seconds, hz, (unsigned long long)samples,
	       (double)feed_ns / (double)samples, (double)judge_ns / (double)judged,
	       cpu_s() - cpu0, rss1, (rss1 - rss0) * 1024 / (long)procs);
	torch_model__free(&m);
	return 0;
}
