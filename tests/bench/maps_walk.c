// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * maps_walk: what walking a /proc/PID/maps text with proc__maps_parse
 * costs a line, for texts of 100 to 30,000 lines (a PyTorch process maps
 * a few thousand; the symbolizer walks the whole text each time it reads
 * a process's maps). A parser whose cost grows with what follows the
 * line makes the walk quadratic: the per-line figure of the largest text
 * against the smallest's, measured in the same run, says which it is.
 *
 * usage: maps_walk [ROUNDS]   (default 5; the best round is printed)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lib/procfs.h"

static const unsigned int sizes[] = { 100, 1000, 10000, 30000 };

static char *make_maps(unsigned int lines)
{
	size_t cap = (size_t)lines * 128 + 1, at = 0;
	char *text = malloc(cap);
	unsigned int i;

	if (!text)
		return NULL;
	for (i = 0; i < lines; i++)
		at += (size_t)snprintf(text + at, cap - at,
				       "7f%010x-7f%010x r-xp 00001000 fd:01 %-8u /usr/lib/x86_64-linux-gnu/lib%u.so\n",
				       i * 0x1000, i * 0x1000 + 0x1000, 1000 + i, i % 97);
	return text;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The best of rounds walks, in ns a line; *files gets the lines parsed as files. */
static double walk_ns(const char *text, unsigned int lines, int rounds, unsigned int *files)
{
	double best = 0, t0, ns;
	struct maps_ent e;
	const char *line;
	int r;

	for (r = 0; r < rounds; r++) {
		*files = 0;
		t0 = now_ns();
		for (line = text; *line; line = e.next)
			*files += proc__maps_parse(line, &e) && *e.path == '/';
		ns = (now_ns() - t0) / lines;
		if (!r || ns < best)
			best = ns;
	}
	return best;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5;
	double first = 0, ns = 0;
	unsigned int i, files;
	char *text;

	if (rounds < 1) {
		fprintf(stderr, "usage: maps_walk [ROUNDS]\n");
		return 2;
	}
	printf("%8s %12s\n", "lines", "ns/line");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		text = make_maps(sizes[i]);
		if (!text) {
			perror("maps_walk");
			return 1;
		}
		ns = walk_ns(text, sizes[i], rounds, &files);
		free(text);
		if (files != sizes[i]) {
			fprintf(stderr, "maps_walk: %u of %u lines parsed\n", files, sizes[i]);
			return 1;
		}
		if (!i)
			first = ns;
		printf("%8u %12.1f\n", sizes[i], ns);
	}
	printf("ns/line at %u lines over %u lines: %.1fx\n", sizes[i - 1], sizes[0], ns / first);
	return 0;
}
