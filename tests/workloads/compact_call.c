// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * compact_call: memory compaction inside a GPU call, in the calling thread.
 *
 * usage: compact_call [-s SIZE] [-f SIZE] [-d DELAY_MS] [-o FILE]
 *
 * Direct compaction runs in the allocating task: its migrate step frees
 * the pages it moved (other processes' pages as often as its own) through
 * mm_page_free in that task, and takes their copies from free pages it
 * isolated, with no mm_page_alloc. None of those frees are the call's.
 * A host with gigabytes free in 2 MiB blocks never compacts for an
 * allocation, so this drives the same compaction code (compact_zone(),
 * between mm_compaction_begin and mm_compaction_end) from inside a call
 * another way: a signal handler, which runs on the calling thread while
 * the call is still in flight, writes 1 to /proc/sys/vm/compact_memory.
 *
 * First, outside any call, it compacts once, so that the free memory it
 * allocates next lies where the next compaction moves pages out of, then
 * maps -f SIZE (default 128 MiB) of anonymous memory in base pages,
 * touches it and gives back every other page: scattered movable pages
 * for the compaction in the call to move, on top of whatever else the
 * host has allocated since. (Without the first compaction, pages taken
 * right after another compaction often lie where none are moved.) Then
 * it calls cuMemAlloc_v2(-s SIZE, default 32 MiB) with a per-thread delay
 * of DELAY_MS (default 300): the fake populates the pages, then sleeps inside
 * the call. A helper thread waits until the fake says a thread sleeps in a
 * call and sends SIGUSR1 to the caller; the handler compacts (the fake's
 * sleep resumes after it). Then cuMemFree_v2 frees the allocation.
 *
 * Writes one JSON object (-o FILE, else stdout): the host pages the
 * compaction migrated while the call was in flight (pgmigrate_success
 * before and after the call, host-wide), how long the handler took, and
 * whether it ran inside the call. Exit status 0 when the handler ran in
 * the call and the calls succeeded; 2 when /proc/sys/vm/compact_memory
 * cannot be written (no CONFIG_COMPACTION, not root).
 *
 * Which pages a compaction moves depends on where everything lies: on
 * this VM the call's compaction moved from a few hundred to tens of
 * thousands of pages. A test runs it again while it moved too few.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cuda_fake.h"

#define COMPACT_PATH	"/proc/sys/vm/compact_memory"

static pthread_t caller;
static volatile sig_atomic_t handler_ran;
static volatile sig_atomic_t handler_in_call;
static volatile sig_atomic_t handler_errno;
static volatile uint64_t handler_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static unsigned long long sleeping_in_call(void)
{
	struct fakecuda_stats st;

	fakecuda_stats(&st);
	return st.sleeping;
}

/* Returns 0 or an errno; async-signal-safe (open, write, close). */
static int compact(void)
{
	int fd, err = 0;

	fd = open(COMPACT_PATH, O_WRONLY);
	if (fd < 0 || write(fd, "1", 1) != 1)
		err = errno;
	if (fd >= 0)
		close(fd);
	return err;
}

static void on_usr1(int sig)
{
	uint64_t t0 = now_ns();
	int saved = errno;

	(void)sig;
	handler_in_call = sleeping_in_call() > 0;
	handler_errno = compact();
	handler_ns = now_ns() - t0;
	handler_ran = 1;
	errno = saved;
}

static void *poke(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < 10000 && !sleeping_in_call(); i++)
		usleep(1000);
	pthread_kill(caller, SIGUSR1);
	return NULL;
}

static long long vmstat(const char *name)
{
	char line[256];
	size_t n = strlen(name);
	long long v = -1;
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, name, n) && line[n] == ' ') {
			v = strtoll(line + n + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'K': v <<= 10; end++; break;
	case 'M': v <<= 20; end++; break;
	case 'G': v <<= 30; end++; break;
	}
	if (*end || !v)
		return -1;
	*out = v;
	return 0;
}

/* Base pages, every other one given back: movable pages in part-free blocks. */
static int fragment(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p;
	size_t off;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	madvise(p, len, MADV_NOHUGEPAGE);
	for (off = 0; off < len; off += page)
		p[off] = 1;
	for (off = 0; off < len; off += 2 * page)
		madvise(p + off, page, MADV_DONTNEED);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: compact_call [-s SIZE] [-f SIZE] [-d DELAY_MS] [-o FILE]\n");
	exit(1);
}

int main(int argc, char **argv)
{
	size_t size = 32 << 20, frag = 128 << 20;
	unsigned int delay_ms = 300;
	const char *out_path = NULL;
	long long mig0, mig1, iso0, iso1;
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigset_t usr1;
	CUdeviceptr dptr = 0;
	CUresult r_alloc, r_free = CUDA_ERROR_NOT_INITIALIZED;
	pthread_t helper;
	FILE *out = stdout;
	int c, err;

	while ((c = getopt(argc, argv, "s:f:d:o:")) != -1) {
		switch (c) {
		case 's':
			if (parse_size(optarg, &size))
				usage();
			break;
		case 'f':
			if (parse_size(optarg, &frag))
				usage();
			break;
		case 'd': {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || !v || v > 60000)
				usage();
			delay_ms = (unsigned int)v;
			break;
		}
		case 'o':
			out_path = optarg;
			break;
		default:
			usage();
		}
	}
	err = compact();
	if (err) {
		fprintf(stderr, "compact_call: %s: %s\n", COMPACT_PATH, strerror(err));
		return 2;
	}
	if (cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "compact_call: cuInit failed\n");
		return 1;
	}
	err = fragment(frag);
	if (err) {
		fprintf(stderr, "compact_call: mmap: %s\n", strerror(-err));
		return 1;
	}
	caller = pthread_self();
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	/* Only the caller takes SIGUSR1: the helper starts with it blocked. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	if (pthread_create(&helper, NULL, poke, NULL)) {
		fprintf(stderr, "compact_call: pthread_create failed\n");
		return 1;
	}
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);

	fakecuda_set_thread_delay_ms(delay_ms);
	mig0 = vmstat("pgmigrate_success");
	iso0 = vmstat("compact_isolated");
	r_alloc = cuMemAlloc_v2(&dptr, size);
	mig1 = vmstat("pgmigrate_success");
	iso1 = vmstat("compact_isolated");
	fakecuda_set_thread_delay_ms(0);
	pthread_join(helper, NULL);
	if (r_alloc == CUDA_SUCCESS)
		r_free = cuMemFree_v2(dptr);

	if (out_path) {
		out = fopen(out_path, "w");
		if (!out) {
			fprintf(stderr, "compact_call: %s: %s\n", out_path, strerror(errno));
			return 1;
		}
	}
	fprintf(out, "{\"pid\": %d, \"size\": %zu, \"fragment_bytes\": %zu, "
		"\"alloc_ret\": %d, \"free_ret\": %d, \"handler_ran\": %s, "
		"\"handler_in_call\": %s, \"handler_errno\": %d, \"handler_ms\": %.1f, "
		"\"migrated_pages\": %lld, \"isolated_pages\": %lld, \"page_size\": %ld}\n",
		(int)getpid(), size, frag, (int)r_alloc, (int)r_free,
		handler_ran ? "true" : "false", handler_in_call ? "true" : "false",
		(int)handler_errno, handler_ns / 1e6, mig1 - mig0, iso1 - iso0,
		sysconf(_SC_PAGESIZE));
	if (out != stdout)
		fclose(out);
	return handler_ran && handler_in_call && !handler_errno &&
	       r_alloc == CUDA_SUCCESS && r_free == CUDA_SUCCESS ? 0 : 1;
}
