// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A plain page-fault hog for the guard's page-level backstop: maps and
 * touches CHUNK bytes at a time, as fast as it can, up to TOTAL, then
 * holds it all for HOLD_MS. No GPU call at all.
 *
 * usage: pagehog [-c CHUNK_MIB] [-t TOTAL_MIB] [-w HOLD_MS] [-o FILE]
 * FILE receives the MiB touched so far after every chunk.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

static void progress(int fd, long mib)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", mib);

	if (fd >= 0 && pwrite(fd, buf, (size_t)n, 0) != n)
		perror("pagehog: progress");
}

int main(int argc, char **argv)
{
	long chunk = 4, total = 1024, hold = 0, done;
	long ps = sysconf(_SC_PAGESIZE);
	int opt, fd = -1;

	while ((opt = getopt(argc, argv, "c:t:w:o:")) != -1) {
		switch (opt) {
		case 'c': chunk = atol(optarg); break;
		case 't': total = atol(optarg); break;
		case 'w': hold = atol(optarg); break;
		case 'o':
			fd = open(optarg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			break;
		default:
			fprintf(stderr, "usage: pagehog [-c CHUNK_MIB] [-t TOTAL_MIB] [-w HOLD_MS] [-o FILE]\n");
			return 2;
		}
	}
	if (chunk <= 0 || total <= 0)
		return 2;
	for (done = 0; done < total; done += chunk) {
		char *p = mmap(NULL, (size_t)chunk << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		long off;

		if (p == MAP_FAILED) {
			perror("pagehog: mmap");
			return 1;
		}
		for (off = 0; off < chunk << 20; off += ps)
			p[off] = 1;
		progress(fd, done + chunk);
	}
	usleep((useconds_t)hold * 1000);
	return 0;
}
