// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * interleave: what a tracer's page programs cost a page-fault storm,
 * measured finely enough to tell 3% from 5% on a shared VM.
 *
 *   interleave [-p PID] [-P PROG...] [-A] [-n PAIRS] [-m MIB] OBJECT
 *
 * Whole storm runs under a tracer and without one differ by 10 to 30% on
 * this project's VMs from one run to the next, whatever the tracer; 32 MiB
 * slices of one storm, 25 ms apart, differ by about 4% (their times
 * correlate at 0.88 from one slice to the next). So this program loads
 * OBJECT's tracing programs once and attaches them for every other slice,
 * in pairs ordered off-on, on-off, ... so that a drift in the machine's
 * speed weighs on both halves alike, and prints each pair's two times.
 *
 * With -p, OBJECT is set up as the running tracer PID set up its copy: the
 * contents of its .rodata, .data and .bss maps are copied in before load
 * (options, thresholds, the guard's anchor), and the programs toggled are
 * those PID has attached to tracepoints. Only then does this print
 * "ready" and wait for PID to exit, so that its own programs are gone
 * before the first slice; the caller stops it. Without -p, the tracing
 * programs in OBJECT are toggled as they were compiled. Either way -P
 * keeps only the programs it names (repeatable).
 *
 * -A is the method's own check (an A/A test): everything is loaded as
 * above but nothing is ever attached, so both halves of each pair run
 * alike and their ratio should come out at 1 within its interval.
 *
 * Output (stdout, after "ready"): one JSON object with each pair's times
 * in ms. Exit 0, 1 on failure, 2 on bad usage.
 */
#include <errno.h>
#include <dirent.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define MAX_TOGGLED	64
#define MAX_PAIRS	100000
#define WAIT_EXIT_MS	60000

struct toggled {
	char **names;		/* -P: only these, if any */
	int n_names;
	struct bpf_program *prog[MAX_TOGGLED];
	struct bpf_link *link[MAX_TOGGLED];
	int n;
	bool on;
};

static int print_warnings(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: interleave [-p PID] [-P PROG...] [-A] [-n PAIRS] [-m MIB] OBJECT\n");
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* "umtrace_.rodata" -> ".rodata": the prefix is the object's name, cut. */
static const char *section_of(const char *map_name)
{
	return strchr(map_name, '.');
}

/* The program of a raw tracepoint link, from its fdinfo; -1 if not one. */
static long raw_tp_link_prog(const char *path)
{
	char line[256];
	long prog = -1;
	bool raw_tp = false;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "link_type:", 10))
			raw_tp = strstr(line, "raw_tracepoint");
		else if (!strncmp(line, "prog_id:", 8))
			prog = strtol(line + 8, NULL, 10);
	}
	fclose(f);
	return raw_tp ? prog : -1;
}

/* The source's map MAP_ID seeds obj's internal map of the same section. */
static int copy_map(struct bpf_object *obj, __u32 map_id)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info), zero = 0;
	struct bpf_map *map;
	const char *sec;
	void *val = NULL;
	int fd, err = 0;

	fd = bpf_map_get_fd_by_id(map_id);
	if (fd < 0)
		return 0;	/* gone meanwhile: not one of its data maps */
	if (bpf_obj_get_info_by_fd(fd, &info, &len) || !(sec = section_of(info.name)))
		goto out;
	if (!strcmp(sec, ".kconfig"))
		goto out;	/* libbpf fills it from this kernel */
	bpf_object__for_each_map(map, obj) {
		const char *mine = section_of(bpf_map__name(map));

		if (!bpf_map__is_internal(map) || !mine || strcmp(mine, sec))
			continue;
		if (bpf_map__value_size(map) != info.value_size) {
			fprintf(stderr, "interleave: %s: %u bytes there, %u here: not this object\n",
				sec, info.value_size, bpf_map__value_size(map));
			err = -EINVAL;
			goto out;
		}
		val = malloc(info.value_size);
		if (!val || bpf_map_lookup_elem(fd, &zero, val)) {
			err = -errno;
			goto out;
		}
		err = bpf_map__set_initial_value(map, val, info.value_size);
		break;
	}
out:
	free(val);
	close(fd);
	return err;
}

/* Kernel names keep 15 characters. */
static struct bpf_program *prog_by_kernel_name(struct bpf_object *obj, const char *name)
{
	struct bpf_program *p;

	bpf_object__for_each_program(p, obj)
		if (!strncmp(bpf_program__name(p), name, 15))
			return p;
	return NULL;
}

#define MAX_PROG_MAPS	64

/*
 * One of PID's attached programs: toggle ours of that name, and seed our
 * data sections from the maps it uses (those of its own object only).
 */
static bool named(const struct toggled *t, const char *name)
{
	int i;

	for (i = 0; i < t->n_names; i++)
		if (!strcmp(t->names[i], name))
			return true;
	return !t->n_names;
}

static int add_linked_prog(struct bpf_object *obj, struct toggled *t, __u32 prog_id)
{
	__u32 map_ids[MAX_PROG_MAPS], len, i;
	struct bpf_prog_info info;
	struct bpf_program *p;
	int fd, err = 0;

	fd = bpf_prog_get_fd_by_id(prog_id);
	if (fd < 0)
		return -errno;
	memset(&info, 0, sizeof(info));
	info.nr_map_ids = MAX_PROG_MAPS;
	info.map_ids = (__u64)(unsigned long)map_ids;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		err = -errno;
		goto out;
	}
	p = prog_by_kernel_name(obj, info.name);
	if (!p) {
		fprintf(stderr, "interleave: program %s is not in this object\n", info.name);
		err = -ENOENT;
		goto out;
	}
	if (t->n >= MAX_TOGGLED) {
		err = -E2BIG;
		goto out;
	}
	if (named(t, bpf_program__name(p)))
		t->prog[t->n++] = p;
	for (i = 0; !err && i < info.nr_map_ids && i < MAX_PROG_MAPS; i++)
		err = copy_map(obj, map_ids[i]);
out:
	close(fd);
	return err;
}

/* Seed obj from PID's maps and pick the programs PID attached to tracepoints. */
static int clone_tracer(struct bpf_object *obj, int pid, struct toggled *t)
{
	char dir[64], path[320];
	struct dirent *de;
	DIR *d;
	int err = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fdinfo", pid);
	d = opendir(dir);
	if (!d)
		return -errno;
	while (!err && (de = readdir(d))) {
		long id;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if ((id = raw_tp_link_prog(path)) > 0)
			err = add_linked_prog(obj, t, id);
	}
	closedir(d);
	return err;
}

/*
 * The tracing programs named; when none is, those loaded as compiled (a
 * "?" section's only when named: its tracepoint may be missing).
 */
static int named_progs(struct bpf_object *obj, struct toggled *t)
{
	struct bpf_program *p;

	bpf_object__for_each_program(p, obj) {
		if (!named(t, bpf_program__name(p)) ||
		    bpf_program__type(p) != BPF_PROG_TYPE_TRACING)
			continue;
		if (!t->n_names && !bpf_program__autoload(p))
			continue;
		if (t->n >= MAX_TOGGLED)
			return -E2BIG;
		t->prog[t->n++] = p;
	}
	return 0;
}

/* Load only what is toggled: the rest would cost nothing, but may not load. */
static void autoload_only(struct bpf_object *obj, const struct toggled *t)
{
	struct bpf_program *p;
	int i;

	bpf_object__for_each_program(p, obj) {
		bool keep = false;

		for (i = 0; i < t->n; i++)
			keep |= t->prog[i] == p;
		bpf_program__set_autoload(p, keep);
	}
}

/* Pairs run off-on, on-off: half the slices keep the state they find. */
static int set_attached(struct toggled *t, bool on)
{
	int i;

	if (t->on == on)
		return 0;
	t->on = on;
	for (i = 0; i < t->n; i++) {
		if (!on) {
			bpf_link__destroy(t->link[i]);
			t->link[i] = NULL;
			continue;
		}
		t->link[i] = bpf_program__attach(t->prog[i]);
		if (!t->link[i])
			return -errno;
	}
	return 0;
}

static int wait_exit(int pid)
{
	struct pollfd pfd = { .events = POLLIN };
	int n;

	pfd.fd = syscall(SYS_pidfd_open, pid, 0);
	if (pfd.fd < 0)
		return errno == ESRCH ? 0 : -errno;
	n = poll(&pfd, 1, WAIT_EXIT_MS);
	close(pfd.fd);
	return n == 1 ? 0 : -ETIMEDOUT;
}

/* One slice of the storm: map, touch each page, unmap. */
static double slice_ms(size_t bytes, size_t page)
{
	double t0 = now_ms();
	volatile char *p;
	size_t off;

	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	madvise((void *)p, bytes, MADV_NOHUGEPAGE);
	for (off = 0; off < bytes; off += page)
		p[off] = 1;
	munmap((void *)p, bytes);
	return now_ms() - t0;
}

static int measure(struct toggled *t, int pairs, size_t bytes)
{
	size_t page = sysconf(_SC_PAGESIZE);
	double ms[2];
	int i, k, err;

	/* Warm-up, untimed: the first touches may pay the hypervisor too. */
	slice_ms(bytes, page);
	slice_ms(bytes, page);
	printf("{\"slice_mib\": %zu, \"programs\": %d, \"pairs\": [", bytes >> 20, t->n);
	for (i = 0; i < pairs; i++) {
		for (k = 0; k < 2; k++) {
			bool on = (i + k) % 2;

			err = set_attached(t, on);
			if (err)
				return err;
			ms[on] = slice_ms(bytes, page);
			if (ms[on] < 0)
				return -ENOMEM;
		}
		printf("%s[%.3f, %.3f]", i ? ", " : "", ms[0], ms[1]);
	}
	printf("]}\n");
	return set_attached(t, false);
}

int main(int argc, char **argv)
{
	char *names[MAX_TOGGLED];
	struct toggled t = { .names = names };
	struct bpf_object *obj;
	int pid = 0, pairs = 200, mib = 32, opt, err, i;
	bool control = false;

	while ((opt = getopt(argc, argv, "p:P:An:m:h")) != -1) {
		switch (opt) {
		case 'p':
			pid = atoi(optarg);
			break;
		case 'P':
			if (t.n_names >= MAX_TOGGLED) {
				usage(stderr);
				return 2;
			}
			names[t.n_names++] = optarg;
			break;
		case 'A':
			control = true;
			break;
		case 'n':
			pairs = atoi(optarg);
			break;
		case 'm':
			mib = atoi(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || pid < 0 || pairs < 1 || pairs > MAX_PAIRS || mib < 1 ||
	    mib > 4096) {
		usage(stderr);
		return 2;
	}
	libbpf_set_print(print_warnings);
	obj = bpf_object__open_file(argv[optind], NULL);
	if (!obj) {
		fprintf(stderr, "interleave: %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	err = pid ? clone_tracer(obj, pid, &t) : named_progs(obj, &t);
	if (err) {
		if (pid)
			fprintf(stderr, "interleave: process %d: %s\n", pid, strerror(-err));
		else
			fprintf(stderr, "interleave: %s: %s\n", argv[optind], strerror(-err));
		goto out;
	}
	if (!t.n || (t.n_names && t.n != t.n_names)) {
		err = -ENOENT;
		fprintf(stderr, "interleave: %s: %s\n", argv[optind], t.n_names ?
			"a program named with -P is not one of its tracing programs" :
			pid ? "the tracer has no tracepoint program of it attached" :
			"no tracing program");
		goto out;
	}
	autoload_only(obj, &t);
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "interleave: load: %s\n", strerror(-err));
		goto out;
	}
	for (i = 0; i < t.n; i++)
		fprintf(stderr, "interleave: %s %s\n", control ? "loaded, never attached:" :
			"toggling", bpf_program__name(t.prog[i]));
	if (control)
		t.n = 0;
	printf("ready\n");
	fflush(stdout);
	if (pid && (err = wait_exit(pid))) {
		fprintf(stderr, "interleave: tracer %d did not exit: %s\n", pid, strerror(-err));
		goto out;
	}
	err = measure(&t, pairs, (size_t)mib << 20);
	if (err)
		fprintf(stderr, "interleave: %s\n", strerror(-err));
out:
	set_attached(&t, false);
	bpf_object__close(obj);
	return err ? 1 : 0;
}
