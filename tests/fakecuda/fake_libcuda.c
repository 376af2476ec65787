// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A fake libcuda.so.1 for testing umtrace without a GPU.
 *
 * By default it behaves like the driver of a unified-memory machine (DGX
 * Spark): a "device" allocation is plain host memory whose pages the driver
 * takes inside the call, in the calling thread. So each allocating entry
 * point maps anonymous memory with MAP_POPULATE (the pages are allocated
 * and zeroed before mmap returns), hands the host address back as the
 * device pointer, and the matching free munmaps it (the pages are freed
 * inside the free call). Exceptions, on purpose:
 *
 *  - cuMemAllocManaged maps lazily; pages arrive on first touch, outside
 *    any call.
 *  - cuMemHostRegister pins memory the caller already has (mlock, which
 *    faults in whatever is not yet present, inside the call);
 *    cuMemHostUnregister unpins and frees nothing.
 *  - cuMemCreate commits physical memory (a memfd, fallocate'd in full);
 *    cuMemAddressReserve/cuMemMap/cuMemUnmap only move address space. The
 *    pages are freed by whichever of cuMemRelease or cuMemUnmap drops the
 *    last reference to the memfd.
 *  - cuMemAllocFromPoolAsync calls cuMemAllocAsync through its exported
 *    symbol (the PLT), so a probe on cuMemAllocAsync fires nested inside
 *    it, as driver entry points call one another.
 *
 * FAKECUDA_MODE=discrete: a discrete GPU's driver (H100/H200 on x86).
 * Device memory (cuMemAlloc*, cuMemAllocPitch*, cuMemAllocAsync*,
 * cuMemAllocFromPoolAsync*, cuMemCreate) lives on the GPU: the call takes
 * one page of host RAM for the driver's bookkeeping, whatever the size,
 * and returns a device address that is not mapped in the process (from a
 * counter in [0x700000000000, 0x780000000000), or [3 GiB, 4 GiB) for the
 * 32-bit v1 calls); the free gives that one page back. cuMemMap maps
 * nothing the CPU can touch: the reserved range stays PROT_NONE. Host
 * memory (cuMemAllocHost*, cuMemHostAlloc, cuMemHostRegister*) and managed
 * memory behave as in unified mode. The bookkeeping pages come from an
 * arena whose page tables are built at load and never torn down (one page
 * stays resident in every page-table page's span), so taking one costs
 * exactly one page allocation and nothing else.
 *
 * FAKECUDA_POOL=1 (either mode): the driver-590 page pool. Freeing device
 * memory or VMM physical memory (the last reference of a cuMemCreate
 * handle) gives nothing back to the kernel: the host pages it held stay
 * mapped (a memfd stays open) on a process-global free list, and a later
 * allocation that needs a chunk of the same page-rounded size and backing
 * (mapping, 32-bit mapping, memfd, bookkeeping page) takes it from there
 * without taking a single new page. A free gives its pages back inside the
 * call only when keeping them would push the pool past
 * FAKECUDA_POOL_MAX_BYTES, and fakecuda_pool_trim() empties the pool
 * outside any entry point. Host and managed memory are never pooled.
 *
 * FAKECUDA_DRIVER=/dev/fakenv (unified mode): the host pages of device
 * memory come from the fake NVIDIA kernel module of the test guests
 * (tests/fakedriver), as on GB10: cuMemAlloc*, cuMemAllocPitch* and the
 * stream-ordered calls ask it for them (FAKENV_ALLOC, in the calling
 * thread) and return a device address nothing maps; their frees hand
 * them back to it (FAKENV_FREE), and its own pool, not this library's,
 * decides whether the kernel gets them. fakecuda_gpu_touch() has its
 * "UVM GPU0 BH" thread fault managed memory in, as a GPU access would.
 * Without the variable nothing changes.
 *
 * Knobs (environment, read once at load):
 *   FAKECUDA_MODE=M        unified (default) or discrete, as above
 *   FAKECUDA_POOL=0|1      pool freed device pages (default 0)
 *   FAKECUDA_POOL_MAX_BYTES=N  the pool's cap (suffix K, M, G, T: powers
 *                          of 1024; default unlimited)
 *   FAKECUDA_DELAY_MS=N    sleep N ms inside every page-taking call, after
 *                          its pages are in (fakecuda_set_thread_delay_ms()
 *                          overrides it per thread)
 *   FAKECUDA_STALL_MS=N    sleep N ms at the start of every allocation, before
 *                          it takes a page (a driver that waits on the GPU
 *                          first): an admitted call holds its reservation
 *                          with no page in it yet
 *   FAKECUDA_SPIN_MS=N     spin N ms on the CPU inside every page-taking
 *                          call instead (a driver polling the GPU): unlike a
 *                          sleeping caller, a spinning one is what the
 *                          CPU's interrupts and softirqs land on
 *   FAKECUDA_FAIL_EVERY=N  every Nth page-taking call fails with
 *                          CUDA_ERROR_OUT_OF_MEMORY before taking pages
 *   FAKECUDA_TABLE_SLOTS=N initial size of the pointer table (power of 2)
 *   FAKECUDA_THP=1         ask for transparent huge pages (MADV_HUGEPAGE)
 *                          on anonymous allocations before populating them,
 *                          so the kernel may hand out order-9 blocks
 * A bad value of one of the first three is reported on stderr at load and
 * makes cuInit fail with CUDA_ERROR_INVALID_VALUE, so a typo cannot quietly
 * test the wrong driver.
 * "Page-taking" calls: cuMemAlloc*, cuMemAllocManaged, cuMemAllocHost*,
 * cuMemHostAlloc, cuMemHostRegister*, cuMemAllocAsync*, cuMemCreate (also
 * in discrete mode, and when the pool serves them).
 *
 * Bookkeeping never allocates inside a call in steady state: the pointer
 * table, the pool's chunk table and the discrete arena's page tables are
 * set up at load, and only the pointer table grows (counted in
 * fakecuda_stats.overhead_bytes) past 3/4 full.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cuda_fake.h"
#include "fakenv_uapi.h"

#define FC_EXPORT __attribute__((noinline, used, visibility("default")))

/* What a table entry describes; the same key may exist in several classes. */
enum fc_class {
	FC_CLS_MEM = 1,		/* allocation or registration, key = pointer */
	FC_CLS_RESERVE,		/* cuMemAddressReserve range, key = base */
	FC_CLS_MAP,		/* cuMemMap range, key = base */
	FC_CLS_HANDLE,		/* cuMemCreate handle, key = handle id */
};

/* Which free call accepts a FC_CLS_MEM entry; handle state for HANDLE. */
enum fc_kind {
	FC_KIND_DEVICE = 1,	/* cuMemFree*, cuMemFreeAsync* */
	FC_KIND_HOST,		/* cuMemFreeHost */
	FC_KIND_REGISTERED,	/* cuMemHostUnregister */
	FC_KIND_LIVE,		/* handle not yet released */
	FC_KIND_RELEASED,	/* handle released, still mapped somewhere */
};

#define FC_KMASK(kind) (1u << (kind))

/*
 * What holds the host pages of a FC_CLS_MEM or FC_CLS_HANDLE entry, and so
 * how they are given back and whether the pool may keep them. A pool chunk
 * only serves an allocation that needs the same backing.
 */
enum fc_back {
	FC_BACK_HOST = 0,	/* host memory: mapping at key, never pooled */
	FC_BACK_ANON,		/* unified device memory: mapping at key */
	FC_BACK_ANON32,		/* the same below 4 GiB (v1 calls) */
	FC_BACK_LAZY,		/* managed: paged on touch, never pooled */
	FC_BACK_MEMFD,		/* unified cuMemCreate: memfd in aux */
	FC_BACK_BK,		/* discrete: one bookkeeping page at aux */
	FC_BACK_DRIVER,		/* FAKECUDA_DRIVER: the module's handle in aux */
};

struct fc_entry {
	uint64_t key;		/* 0: empty slot */
	uint64_t size;		/* bytes covered, page rounded */
	uint64_t aux;		/* HANDLE: memfd or bookkeeping page;
				 * MAP: handle; MEM: mlocked (registered)
				 * or bookkeeping page (discrete device) */
	uint32_t cls;
	uint32_t kind;
	uint32_t refs;		/* HANDLE: live maps, plus 1 until released */
	uint32_t back;		/* MEM, HANDLE: enum fc_back */
};

/* Open addressing, linear probing, backward-shift deletion. */
static struct {
	pthread_mutex_t lock;
	struct fc_entry *slots;
	size_t cap;		/* power of two, or 0 before the first map */
	size_t used;
} fc_tab = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * The driver's pool of freed pages (FAKECUDA_POOL=1): chunks hashed by
 * (size, backing) into buckets of singly linked lists, LIFO so the most
 * recently freed chunk is reused first. The chunk table is mapped and
 * populated at load and never grows: when it is full, a free gives its
 * pages back as if the cap had been reached.
 */
#define FC_POOL_CHUNKS	(1u << 16)
#define FC_POOL_BUCKETS	256
#define FC_NIL		UINT32_MAX

struct fc_chunk {
	uint64_t mem;		/* address (FC_BACK_MEMFD: descriptor) */
	uint64_t len;		/* host bytes it holds */
	uint32_t back;		/* enum fc_back */
	uint32_t next;		/* next in its bucket, or spare */
};

static struct {
	/* taken after fc_tab.lock, before fc_bk.lock */
	pthread_mutex_t lock;
	struct fc_chunk *chunks;
	uint32_t spare;		/* first unused chunk */
	uint32_t head[FC_POOL_BUCKETS];
} fc_pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * Discrete mode's host side of device memory. Bookkeeping pages are slots
 * of one arena mapped at load; a stack holds the free slots. The first
 * page of every page-table page's span stays resident for good, so the
 * page tables exist before any call and the kernel never reclaims them
 * as empty (CONFIG_PT_RECLAIM): taking a slot faults in exactly one page,
 * giving it back (MADV_DONTNEED) frees exactly one, and neither changes a
 * VMA. Device addresses come from two counters over ranges nothing maps.
 */
#define FC_BK_PAGES	(1u << 17)
#define FC_DEV_BASE	0x700000000000ULL
#define FC_DEV_END	0x780000000000ULL
#define FC_DEV32_BASE	0xc0000000ULL
#define FC_DEV32_END	0x100000000ULL

static struct {
	pthread_mutex_t lock;	/* innermost lock */
	char *arena;
	char *drain;		/* a page never touched, see fc_bk_take() */
	uint32_t *free;		/* stack of free slot numbers */
	uint32_t nfree;
	uint64_t va_next;	/* next device address, 64-bit calls */
	uint64_t va32_next;	/* next device address, v1 calls */
} fc_bk = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct fakecuda_stats fc_stats;
static enum fakecuda_mode fc_mode = FAKECUDA_MODE_UNIFIED;
static bool fc_pool_on;
static uint64_t fc_pool_max = FAKECUDA_POOL_UNLIMITED;
static bool fc_config_bad;
static size_t fc_page = 4096;
static size_t fc_initial_slots = 1u << 16;
static unsigned int fc_delay_ms;
static unsigned int fc_spin_ms;
static unsigned int fc_stall_ms;
static unsigned long long fc_fail_every;
static bool fc_thp;
static int fc_drv_fd = -1;	/* FAKECUDA_DRIVER's device, when set */
static int fc_drv_node = -1;	/* FAKECUDA_DRIVER_NODE: its NUMA node */
static unsigned int fc_drv_flags;	/* FAKECUDA_DRIVER_RETRY: FAKENV_F_FAIL_ONCE */
static unsigned long long fc_take_seq;
static unsigned long long fc_handle_seq;
static int fc_initialized;
static __thread unsigned int fc_thread_delay_ms;

static const char *const fc_api_names[FAKECUDA_API_COUNT] = {
#define FC_API_NAME(name) #name,
	FAKECUDA_API_LIST(FC_API_NAME)
#undef FC_API_NAME
};

static void fc_add(unsigned long long *ctr, unsigned long long v)
{
	__atomic_fetch_add(ctr, v, __ATOMIC_RELAXED);
}

static void fc_count_populated(unsigned int api, uint64_t bytes)
{
	fc_add(&fc_stats.populated[api], bytes);
	fc_add(&fc_stats.populated_total, bytes);
}

static void fc_count_released(unsigned int api, uint64_t bytes)
{
	fc_add(&fc_stats.released[api], bytes);
	fc_add(&fc_stats.released_total, bytes);
}

/* Round up to whole pages; false if that overflows. */
static bool fc_page_round(uint64_t size, size_t *len)
{
	if (size > SIZE_MAX - (fc_page - 1))
		return false;
	*len = (size + fc_page - 1) & ~(fc_page - 1);
	return true;
}

static unsigned long long fc_env_ull(const char *name, unsigned long long def)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return def;
	return v;
}

/* A knob with a value the fake does not know: say so, and fail cuInit. */
static void fc_bad_env(const char *name, const char *val, const char *want)
{
	fprintf(stderr, "fakecuda: %s=%s: expected %s; cuInit will fail\n",
		name, val, want);
	fc_config_bad = true;
}

/* A byte count with an optional K, M, G or T suffix (powers of 1024). */
static bool fc_parse_bytes(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	const char *u;
	unsigned int shift = 0;
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return false;
	if (*end) {
		u = strchr(units, *end & ~0x20);
		if (!u || end[1])
			return false;
		shift = 10 * (unsigned int)(u - units + 1);
	}
	if (v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

/*
 * FAKECUDA_MODE, FAKECUDA_POOL and FAKECUDA_POOL_MAX_BYTES are parsed
 * strictly, unlike the older knobs: they choose which driver is being
 * imitated, and a test of the wrong one would pass for the wrong reason.
 */
static void fc_read_model_knobs(void)
{
	const char *mode = getenv("FAKECUDA_MODE");
	const char *pool = getenv("FAKECUDA_POOL");
	const char *max = getenv("FAKECUDA_POOL_MAX_BYTES");

	if (mode && !strcmp(mode, "discrete"))
		fc_mode = FAKECUDA_MODE_DISCRETE;
	else if (mode && *mode && strcmp(mode, "unified"))
		fc_bad_env("FAKECUDA_MODE", mode, "unified or discrete");
	if (pool && !strcmp(pool, "1"))
		fc_pool_on = true;
	else if (pool && *pool && strcmp(pool, "0"))
		fc_bad_env("FAKECUDA_POOL", pool, "0 or 1");
	if (max && *max && !fc_parse_bytes(max, &fc_pool_max))
		fc_bad_env("FAKECUDA_POOL_MAX_BYTES", max,
			   "a byte count (suffix K, M, G or T)");
	fc_stats.mode = fc_mode;
	fc_stats.pool_enabled = fc_pool_on;
	fc_stats.pool_max_bytes = fc_pool_max;
}

/* ---- pointer table; every fc_tab_* function expects fc_tab.lock held ---- */

static size_t fc_tab_home(uint64_t key, uint32_t cls)
{
	uint64_t h = (key ^ ((uint64_t)cls << 58)) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 29) & (fc_tab.cap - 1);
}

static struct fc_entry *fc_tab_map_slots(size_t cap)
{
	void *p = mmap(NULL, cap * sizeof(struct fc_entry),
		       PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void fc_tab_place(const struct fc_entry *e)
{
	size_t mask = fc_tab.cap - 1;
	size_t i = fc_tab_home(e->key, e->cls);

	while (fc_tab.slots[i].key)
		i = (i + 1) & mask;
	fc_tab.slots[i] = *e;
}

/*
 * Only reached past 3/4 load (or before load-time setup succeeded), so in
 * the tests it normally never runs inside a call; when it does, the pages
 * it takes are reported as overhead so ground truths stay exact.
 */
static int fc_tab_grow(void)
{
	struct fc_entry *old = fc_tab.slots;
	size_t old_cap = fc_tab.cap;
	size_t cap = old_cap ? old_cap * 2 : fc_initial_slots;
	struct fc_entry *slots = fc_tab_map_slots(cap);
	size_t i;

	if (!slots)
		return -ENOMEM;
	fc_tab.slots = slots;
	fc_tab.cap = cap;
	for (i = 0; i < old_cap; i++)
		if (old[i].key)
			fc_tab_place(&old[i]);
	if (old)
		munmap(old, old_cap * sizeof(*old));
	return 0;
}

static struct fc_entry *fc_tab_find(uint64_t key, uint32_t cls)
{
	size_t mask = fc_tab.cap - 1;
	size_t i;

	if (!fc_tab.cap || !key)
		return NULL;
	for (i = fc_tab_home(key, cls); fc_tab.slots[i].key; i = (i + 1) & mask)
		if (fc_tab.slots[i].key == key && fc_tab.slots[i].cls == cls)
			return &fc_tab.slots[i];
	return NULL;
}

static int fc_tab_insert(const struct fc_entry *e)
{
	if (!e->key)
		return -EINVAL;
	if (fc_tab_find(e->key, e->cls))
		return -EEXIST;
	if ((fc_tab.used + 1) * 4 > fc_tab.cap * 3) {
		if (fc_tab_grow())
			return -ENOMEM;
		fc_add(&fc_stats.overhead_bytes,
		       fc_tab.cap * sizeof(struct fc_entry));
	}
	fc_tab_place(e);
	fc_tab.used++;
	return 0;
}

/* Is @home cyclically within (@hole, @at]? Then the entry at @at stays. */
static bool fc_tab_stays(size_t hole, size_t home, size_t at)
{
	if (hole <= at)
		return home > hole && home <= at;
	return home > hole || home <= at;
}

/* Remove @e (a pointer into the table), closing the gap it leaves. */
static void fc_tab_erase(struct fc_entry *e)
{
	size_t mask = fc_tab.cap - 1;
	size_t hole = (size_t)(e - fc_tab.slots);
	size_t at = hole;
	struct fc_entry *s = fc_tab.slots;

	for (;;) {
		s[hole].key = 0;
		do {
			at = (at + 1) & mask;
			if (!s[at].key)
				goto out;
		} while (fc_tab_stays(hole, fc_tab_home(s[at].key, s[at].cls),
				      at));
		s[hole] = s[at];
		hole = at;
	}
out:
	fc_tab.used--;
}

/* ---- locked wrappers for the common single-entry operations ---- */

static int fc_track(const struct fc_entry *e)
{
	int err;

	pthread_mutex_lock(&fc_tab.lock);
	err = fc_tab_insert(e);
	pthread_mutex_unlock(&fc_tab.lock);
	return err;
}

/* Take the entry out if it exists and its kind is in @kinds. */
static int fc_untrack(uint64_t key, uint32_t cls, uint32_t kinds,
		      struct fc_entry *out)
{
	struct fc_entry *e;
	int err = -ENOENT;

	pthread_mutex_lock(&fc_tab.lock);
	e = fc_tab_find(key, cls);
	if (e && (FC_KMASK(e->kind) & kinds)) {
		*out = *e;
		fc_tab_erase(e);
		err = 0;
	}
	pthread_mutex_unlock(&fc_tab.lock);
	return err;
}

/* ---- call accounting and knobs ---- */

/*
 * Out of line on purpose: x86 uprobes refuse an instruction with a LOCK
 * prefix, and if this were inlined, shrink-wrapping would make the atomic
 * increment below the first instruction of every entry point, so a probe
 * there would silently never fire. Calling a function first forces the
 * frame setup (push %rbp) to the entry instead.
 */
static __attribute__((noinline)) CUresult fc_enter(unsigned int api)
{
	asm volatile("");
	fc_add(&fc_stats.calls[api], 1);
	if (!__atomic_load_n(&fc_initialized, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_NOT_INITIALIZED;
	return CUDA_SUCCESS;
}

static CUresult fc_leave(unsigned int api, CUresult ret)
{
	if (ret != CUDA_SUCCESS)
		fc_add(&fc_stats.failed[api], 1);
	asm volatile("");
	return ret;
}

/* FAKECUDA_FAIL_EVERY: decided before any page is taken. */
static bool fc_should_fail(void)
{
	unsigned long long n;

	if (!fc_fail_every)
		return false;
	n = __atomic_add_fetch(&fc_take_seq, 1, __ATOMIC_RELAXED);
	return n % fc_fail_every == 0;
}

static void fc_spin(unsigned int ms)
{
	struct timespec now, end;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	do {
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec ||
		 (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
}

/*
 * FAKECUDA_DELAY_MS, FAKECUDA_SPIN_MS: run after the pages are in, still
 * inside the call.
 */
static void fc_delay(void)
{
	unsigned int ms = fc_thread_delay_ms ? fc_thread_delay_ms : fc_delay_ms;
	struct timespec ts;
	int saved = errno;

	if (fc_spin_ms)
		fc_spin(fc_spin_ms);
	if (!ms)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	fc_add(&fc_stats.sleeping, 1);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	__atomic_fetch_sub(&fc_stats.sleeping, 1, __ATOMIC_RELAXED);
	errno = saved;
}

/* ---- discrete mode: bookkeeping pages and device addresses ---- */

static uint64_t fc_bk_slot_addr(uint32_t slot)
{
	return (uintptr_t)fc_bk.arena + (uint64_t)slot * fc_page;
}

/*
 * Map the arena and build its page tables by touching one page per
 * page-table page (a page-table page maps fc_page / 8 pages); those pages
 * are never handed out, which keeps each page-table page non-empty.
 */
static int fc_bk_setup(void)
{
	size_t span = fc_page / sizeof(uint64_t), len;
	uintptr_t addr;
	uint32_t i;

	len = (size_t)FC_BK_PAGES * fc_page;
	fc_bk.arena = mmap(NULL, len, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (fc_bk.arena == MAP_FAILED)
		goto fail;
	/* one bookkeeping page must never become a 2 MiB fault */
	madvise(fc_bk.arena, len, MADV_NOHUGEPAGE);
	fc_bk.free = mmap(NULL, FC_BK_PAGES * sizeof(*fc_bk.free),
			  PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (fc_bk.free == MAP_FAILED)
		goto fail;
	fc_bk.drain = mmap(NULL, fc_page, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (fc_bk.drain == MAP_FAILED)
		goto fail;
	/* pushed from the top, so the lowest slots are handed out first */
	for (i = FC_BK_PAGES; i-- > 0;) {
		addr = fc_bk_slot_addr(i);
		if (!i || !(addr & (span * fc_page - 1)))
			*(volatile char *)addr = 1;
		else
			fc_bk.free[fc_bk.nfree++] = i;
	}
	return 0;
fail:
	fc_bk.arena = NULL;
	fc_bk.free = NULL;
	fc_bk.drain = NULL;
	return -ENOMEM;
}

/*
 * Fault in one free slot: exactly one page, nothing else.
 *
 * A page just faulted in waits in this CPU's LRU-add batch, which holds a
 * reference to it; MADV_DONTNEED in a cuMemFree right after would then
 * leave the actual free to whoever drains the batch later, outside the
 * call. MADV_COLD drains this CPU's batches before it walks its range,
 * and its range here is a page never touched, so it walks nothing: the
 * new page goes to the LRU now, and its free will happen inside the free.
 */
static int fc_bk_take(uint64_t *addr)
{
	uint32_t slot;

	pthread_mutex_lock(&fc_bk.lock);
	if (!fc_bk.nfree) {
		pthread_mutex_unlock(&fc_bk.lock);
		return -ENOMEM;
	}
	slot = fc_bk.free[--fc_bk.nfree];
	pthread_mutex_unlock(&fc_bk.lock);
	*addr = fc_bk_slot_addr(slot);
	*(volatile uint64_t *)(uintptr_t)*addr = slot;
#ifdef MADV_COLD
	madvise(fc_bk.drain, fc_page, MADV_COLD);
#endif
	return 0;
}

static void fc_bk_give_back(uint64_t addr)
{
	madvise((void *)(uintptr_t)addr, fc_page, MADV_DONTNEED);
	pthread_mutex_lock(&fc_bk.lock);
	fc_bk.free[fc_bk.nfree++] =
		(uint32_t)((addr - (uintptr_t)fc_bk.arena) / fc_page);
	pthread_mutex_unlock(&fc_bk.lock);
}

/*
 * A device address range of @len bytes that nothing in the process maps.
 * The counter wraps: by then the early ranges are long freed, and a key
 * still in use is caught by the table (the caller asks again).
 */
static int fc_dev_addr(uint64_t len, bool v1, uint64_t *addr)
{
	uint64_t base = v1 ? FC_DEV32_BASE : FC_DEV_BASE;
	uint64_t end = v1 ? FC_DEV32_END : FC_DEV_END;
	uint64_t *next = v1 ? &fc_bk.va32_next : &fc_bk.va_next;

	if (len > end - base)
		return -ENOMEM;
	pthread_mutex_lock(&fc_bk.lock);
	if (*next < base || *next > end - len)
		*next = base;
	*addr = *next;
	*next += len;
	pthread_mutex_unlock(&fc_bk.lock);
	return 0;
}

/* ---- the page pool (FAKECUDA_POOL=1) ---- */

static bool fc_poolable(uint32_t back)
{
	return fc_pool_on && back != FC_BACK_HOST && back != FC_BACK_LAZY &&
	       back != FC_BACK_DRIVER;
}

static uint32_t *fc_pool_bucket(uint32_t back, uint64_t len)
{
	uint64_t h = (len / fc_page * 4 + back) * 0x9e3779b97f4a7c15ULL;

	return &fc_pool.head[(h >> 56) & (FC_POOL_BUCKETS - 1)];
}

/* Give a chunk's pages back to the kernel (munmap, close or DONTNEED). */
static void fc_back_free(uint32_t back, uint64_t mem, uint64_t len)
{
	switch (back) {
	case FC_BACK_MEMFD:
		close((int)mem);
		break;
	case FC_BACK_BK:
		fc_bk_give_back(mem);
		break;
	case FC_BACK_DRIVER:
		ioctl(fc_drv_fd, FAKENV_FREE, &mem);
		break;
	default:
		munmap((void *)(uintptr_t)mem, len);
		break;
	}
}

/*
 * Take a pooled chunk of exactly this backing and length: no syscall, no
 * fault, so no page is allocated in the call. Counts the hit or the miss.
 */
static bool fc_pool_take(uint32_t back, uint64_t len, uint64_t *mem)
{
	uint32_t *link, i;
	struct fc_chunk *c;

	if (!fc_poolable(back))
		return false;
	pthread_mutex_lock(&fc_pool.lock);
	for (link = fc_pool_bucket(back, len); *link != FC_NIL;
	     link = &fc_pool.chunks[*link].next) {
		c = &fc_pool.chunks[*link];
		if (c->back != back || c->len != len)
			continue;
		i = *link;
		*link = c->next;
		c->next = fc_pool.spare;
		fc_pool.spare = i;
		*mem = c->mem;
		__atomic_fetch_sub(&fc_stats.pool_bytes, len, __ATOMIC_RELAXED);
		__atomic_fetch_sub(&fc_stats.pool_chunks, 1, __ATOMIC_RELAXED);
		fc_add(&fc_stats.pool_hits, 1);
		fc_add(&fc_stats.pool_hit_bytes, len);
		pthread_mutex_unlock(&fc_pool.lock);
		return true;
	}
	fc_add(&fc_stats.pool_misses, 1);
	pthread_mutex_unlock(&fc_pool.lock);
	return false;
}

/* Keep a freed chunk if the cap and the chunk table leave room for it. */
static bool fc_pool_put(uint32_t back, uint64_t mem, uint64_t len)
{
	uint64_t held;
	uint32_t *head, i;
	struct fc_chunk *c;

	pthread_mutex_lock(&fc_pool.lock);
	held = __atomic_load_n(&fc_stats.pool_bytes, __ATOMIC_RELAXED);
	if (fc_pool.spare == FC_NIL || len > fc_pool_max ||
	    held > fc_pool_max - len) {
		fc_add(&fc_stats.pool_overflow_bytes, len);
		pthread_mutex_unlock(&fc_pool.lock);
		return false;
	}
	i = fc_pool.spare;
	c = &fc_pool.chunks[i];
	fc_pool.spare = c->next;
	head = fc_pool_bucket(back, len);
	c->mem = mem;
	c->len = len;
	c->back = back;
	c->next = *head;
	*head = i;
	fc_add(&fc_stats.pool_bytes, len);
	fc_add(&fc_stats.pool_chunks, 1);
	fc_add(&fc_stats.pool_kept_bytes, len);
	pthread_mutex_unlock(&fc_pool.lock);
	return true;
}

/*
 * The driver is done with these pages: pool them if it may, otherwise
 * give them back now. Returns the bytes given back (0 when pooled).
 */
static uint64_t fc_drop(uint32_t back, uint64_t mem, uint64_t len)
{
	if (fc_poolable(back) && fc_pool_put(back, mem, len))
		return 0;
	fc_back_free(back, mem, len);
	return len;
}

static int fc_pool_setup(void)
{
	uint32_t i;

	fc_pool.chunks = mmap(NULL, FC_POOL_CHUNKS * sizeof(*fc_pool.chunks),
			      PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
			      -1, 0);
	if (fc_pool.chunks == MAP_FAILED) {
		fc_pool.chunks = NULL;
		return -ENOMEM;
	}
	for (i = 0; i < FC_POOL_CHUNKS; i++)
		fc_pool.chunks[i].next = i + 1;
	fc_pool.chunks[FC_POOL_CHUNKS - 1].next = FC_NIL;
	fc_pool.spare = 0;
	for (i = 0; i < FC_POOL_BUCKETS; i++)
		fc_pool.head[i] = FC_NIL;
	return 0;
}

/* A bookkeeping page for a discrete allocation: pooled, else a new one. */
static int fc_bk_get(uint64_t *addr, uint64_t *taken)
{
	*taken = 0;
	if (fc_pool_take(FC_BACK_BK, fc_page, addr))
		return 0;
	if (fc_bk_take(addr))
		return -ENOMEM;
	*taken = fc_page;
	return 0;
}

/*
 * A call that fails after getting its pages leaves as it came: pages it
 * took go back now, a chunk it took from the pool goes back there.
 */
static void fc_undo(uint32_t back, uint64_t mem, uint64_t len, uint64_t taken)
{
	if (taken)
		fc_back_free(back, mem, len);
	else
		fc_drop(back, mem, len);
}

/* Where an entry's host pages are, and how many bytes of them. */
static uint64_t fc_entry_mem(const struct fc_entry *e)
{
	return e->back == FC_BACK_BK || e->back == FC_BACK_MEMFD ||
	       e->back == FC_BACK_DRIVER ? e->aux : e->key;
}

static uint64_t fc_entry_host_len(const struct fc_entry *e)
{
	return e->back == FC_BACK_BK ? fc_page : e->size;
}

/* ---- anonymous allocations ---- */

enum fc_map_mode {
	FC_POPULATE,		/* pages taken inside the call */
	FC_LAZY,		/* pages taken on first touch */
	FC_POPULATE_32BIT,	/* v1 entry points: MAP_32BIT, [1 GiB, 2 GiB) */
};

/*
 * FAKECUDA_THP: huge pages must be asked for before the first fault, so
 * map without MAP_POPULATE, madvise, then populate in a second step.
 */
static void *fc_map_thp(size_t len, int flags)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       flags & ~MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED)
		return p;
	madvise(p, len, MADV_HUGEPAGE);	/* best effort */
	if (!madvise(p, len, MADV_POPULATE_WRITE))
		return p;
	munmap(p, len);
	return MAP_FAILED;
}

/*
 * Host pages for @e (size set, kind set): a pooled chunk if one fits,
 * otherwise a new mapping. Sets key and back; *taken is what the call
 * took from the page allocator.
 */
static CUresult fc_map_anon(struct fc_entry *e, enum fc_map_mode mode,
			    uint64_t *taken)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	uint64_t mem;
	void *p;

	if (e->kind == FC_KIND_HOST)
		e->back = FC_BACK_HOST;
	else if (mode == FC_LAZY)
		e->back = FC_BACK_LAZY;
	else
		e->back = mode == FC_POPULATE_32BIT ? FC_BACK_ANON32 :
						      FC_BACK_ANON;
	*taken = 0;
	if (fc_pool_take(e->back, e->size, &mem)) {
		e->key = mem;
		return CUDA_SUCCESS;
	}
	if (mode != FC_LAZY)
		flags |= MAP_POPULATE;
#ifdef MAP_32BIT
	if (mode == FC_POPULATE_32BIT)
		flags |= MAP_32BIT;
#endif
	if (fc_thp && mode == FC_POPULATE)
		p = fc_map_thp(e->size, flags);
	else
		p = mmap(NULL, e->size, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->key = (uintptr_t)p;
	if (mode != FC_LAZY)
		*taken = e->size;
	return CUDA_SUCCESS;
}

/*
 * Discrete device memory: one bookkeeping page (pooled or new) and an
 * address the CPU cannot reach. Tracked here, because a device address
 * the counter reuses while still live is refused by the table and the
 * next one is tried.
 */
static CUresult fc_alloc_discrete(struct fc_entry *e, bool v1,
				  uint64_t *taken)
{
	int err = -EEXIST, tries;

	e->back = FC_BACK_BK;
	if (fc_bk_get(&e->aux, taken))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (tries = 0; tries < 8 && err == -EEXIST; tries++) {
		err = fc_dev_addr(e->size, v1, &e->key);
		if (!err)
			err = fc_track(e);
	}
	if (!err)
		return CUDA_SUCCESS;
	fc_undo(FC_BACK_BK, e->aux, fc_page, *taken);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * FAKECUDA_DRIVER: the module takes the pages in this thread (*taken: what
 * it took from the page allocator, not what its pool served) and keeps
 * them under a handle; the address is a device address, tracked here.
 */
static CUresult fc_alloc_driver(struct fc_entry *e, uint64_t *taken)
{
	struct fakenv_alloc a = { .size = e->size, .node = fc_drv_node,
				  .flags = fc_drv_flags };
	int err = -EEXIST, tries;

	*taken = 0;
	if (ioctl(fc_drv_fd, FAKENV_ALLOC, &a))
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->back = FC_BACK_DRIVER;
	e->aux = a.handle;
	for (tries = 0; tries < 8 && err == -EEXIST; tries++) {
		err = fc_dev_addr(e->size, false, &e->key);
		if (!err)
			err = fc_track(e);
	}
	if (err) {
		fc_back_free(FC_BACK_DRIVER, a.handle, e->size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*taken = a.pages_new * fc_page;
	return CUDA_SUCCESS;
}

/* Allocate @size bytes for @api, record them as @kind, return the address. */
static CUresult fc_alloc(unsigned int api, uint64_t size, enum fc_map_mode mode,
			 uint32_t kind, uintptr_t *out)
{
	struct fc_entry e = { .cls = FC_CLS_MEM, .kind = kind };
	uint64_t taken;
	CUresult ret;

	if (!size || !fc_page_round(size, &e.size))
		return CUDA_ERROR_INVALID_VALUE;
	if (fc_stall_ms)
		usleep(fc_stall_ms * 1000U);
	if (fc_should_fail())
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (fc_mode == FAKECUDA_MODE_DISCRETE && kind == FC_KIND_DEVICE &&
	    mode != FC_LAZY) {
		ret = fc_alloc_discrete(&e, mode == FC_POPULATE_32BIT, &taken);
		if (ret != CUDA_SUCCESS)
			return ret;
	} else if (fc_drv_fd >= 0 && kind == FC_KIND_DEVICE &&
		   mode == FC_POPULATE) {
		ret = fc_alloc_driver(&e, &taken);
		if (ret != CUDA_SUCCESS)
			return ret;
	} else {
		ret = fc_map_anon(&e, mode, &taken);
		if (ret != CUDA_SUCCESS)
			return ret;
		if (fc_track(&e)) {
			fc_undo(e.back, e.key, e.size, taken);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	if (taken)
		fc_count_populated(api, taken);
	*out = (uintptr_t)e.key;
	fc_delay();
	return CUDA_SUCCESS;
}

static CUresult fc_alloc64(unsigned int api, CUdeviceptr *dptr, uint64_t size,
			   enum fc_map_mode mode, uint32_t kind)
{
	uintptr_t p;
	CUresult ret;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	ret = fc_alloc(api, size, mode, kind, &p);
	if (ret == CUDA_SUCCESS)
		*dptr = p;
	return ret;
}

static CUresult fc_alloc_host(unsigned int api, void **pp, uint64_t size)
{
	uintptr_t p;
	CUresult ret;

	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	ret = fc_alloc(api, size, FC_POPULATE, FC_KIND_HOST, &p);
	if (ret == CUDA_SUCCESS)
		*pp = (void *)p;
	return ret;
}

/*
 * v1 entry points return 32-bit pointers: MAP_32BIT host memory in
 * unified mode, a 32-bit device address in discrete mode.
 */
static CUresult fc_alloc32(unsigned int api, CUdeviceptr_v1 *dptr,
			   uint64_t size)
{
	uintptr_t p;
	CUresult ret;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
#ifndef MAP_32BIT
	if (fc_mode != FAKECUDA_MODE_DISCRETE)
		return CUDA_ERROR_NOT_SUPPORTED;
#endif
	ret = fc_alloc(api, size, FC_POPULATE_32BIT, FC_KIND_DEVICE, &p);
	if (ret == CUDA_SUCCESS)
		*dptr = (CUdeviceptr_v1)p;
	return ret;
}

/* The real driver only takes 4, 8 or 16 byte elements. */
static CUresult fc_pitch(uint64_t width, uint64_t height, unsigned int elem,
			 uint64_t *pitch, uint64_t *total)
{
	if (!width || !height || (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	if (width > UINT64_MAX - 511)
		return CUDA_ERROR_INVALID_VALUE;
	*pitch = (width + 511) & ~511ULL;
	if (*pitch > UINT64_MAX / height)
		return CUDA_ERROR_INVALID_VALUE;
	*total = *pitch * height;
	return CUDA_SUCCESS;
}

/*
 * Free a FC_CLS_MEM entry whose kind is in @kinds: its pages go back to
 * the kernel (munmap, or the bookkeeping page's DONTNEED), or to the pool.
 */
static CUresult fc_free(unsigned int api, uint64_t key, uint32_t kinds)
{
	struct fc_entry e;
	uint64_t freed;

	if (fc_untrack(key, FC_CLS_MEM, kinds, &e))
		return CUDA_ERROR_INVALID_VALUE;
	freed = fc_drop(e.back, fc_entry_mem(&e), fc_entry_host_len(&e));
	if (freed)
		fc_count_released(api, freed);
	return CUDA_SUCCESS;
}

/* ---- host registration ---- */

/* Resident pages in [start, start + npages pages), or -1 if not mapped. */
static long fc_resident_pages(uintptr_t start, size_t npages)
{
	unsigned char vec[512];
	size_t done = 0, i, n;
	long resident = 0;

	while (done < npages) {
		n = npages - done < sizeof(vec) ? npages - done : sizeof(vec);
		if (mincore((void *)(start + done * fc_page), n * fc_page, vec))
			return -1;
		for (i = 0; i < n; i++)
			resident += vec[i] & 1;
		done += n;
	}
	return resident;
}

/*
 * mlock() faults in what is missing; without CAP_IPC_LOCK or enough
 * RLIMIT_MEMLOCK it fails, and MADV_POPULATE_WRITE still takes the same
 * pages inside the call, just without pinning them.
 */
static int fc_pin(void *start, size_t len, bool *locked)
{
	*locked = !mlock(start, len);
	if (*locked)
		return 0;
	return madvise(start, len, MADV_POPULATE_WRITE);
}

/* Remember that unregistering must munlock (p may be gone by now). */
static void fc_mark_locked(uint64_t key)
{
	struct fc_entry *e;

	pthread_mutex_lock(&fc_tab.lock);
	e = fc_tab_find(key, FC_CLS_MEM);
	if (e && e->kind == FC_KIND_REGISTERED)
		e->aux = 1;
	pthread_mutex_unlock(&fc_tab.lock);
}

static CUresult fc_register(unsigned int api, void *p, uint64_t size)
{
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)(fc_page - 1);
	struct fc_entry e = {
		.key = (uintptr_t)p, .cls = FC_CLS_MEM,
		.kind = FC_KIND_REGISTERED,
	};
	long resident;
	bool locked;

	if (!p || !size || size > UINTPTR_MAX - (uintptr_t)p ||
	    !fc_page_round((uintptr_t)p + size - start, &e.size))
		return CUDA_ERROR_INVALID_VALUE;
	if (fc_should_fail())
		return CUDA_ERROR_OUT_OF_MEMORY;
	resident = fc_resident_pages(start, e.size / fc_page);
	if (resident < 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* tracked first, so a second registration of p is refused unpinned */
	if (fc_track(&e))
		return CUDA_ERROR_INVALID_VALUE;
	if (fc_pin((void *)start, e.size, &locked)) {
		fc_untrack(e.key, FC_CLS_MEM, FC_KMASK(FC_KIND_REGISTERED), &e);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (locked)
		fc_mark_locked(e.key);
	fc_count_populated(api, e.size - (size_t)resident * fc_page);
	fc_delay();
	return CUDA_SUCCESS;
}

static CUresult fc_unregister(void *p)
{
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)(fc_page - 1);
	struct fc_entry e;

	if (fc_untrack((uintptr_t)p, FC_CLS_MEM, FC_KMASK(FC_KIND_REGISTERED),
		       &e))
		return CUDA_ERROR_INVALID_VALUE;
	if (e.aux)
		munlock((void *)start, e.size);
	return CUDA_SUCCESS;
}

/* ---- virtual memory management ---- */

/* Reserve PROT_NONE address space; no page is taken. */
static CUresult fc_reserve(CUdeviceptr *ptr, uint64_t size, uint64_t align,
			   uint64_t hint)
{
	struct fc_entry e = { .cls = FC_CLS_RESERVE };
	size_t len, span;
	uintptr_t base;
	char *p;

	if (!ptr || !size || !fc_page_round(size, &len) ||
	    (align & (align - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	if (align < fc_page)
		align = fc_page;
	span = len + (align > fc_page ? align : 0);
	if (span < len)
		return CUDA_ERROR_INVALID_VALUE;
	p = mmap((void *)(uintptr_t)hint, span, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	base = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
	if (base > (uintptr_t)p)
		munmap(p, base - (uintptr_t)p);
	if ((uintptr_t)p + span > base + len)
		munmap((void *)(base + len), (uintptr_t)p + span - base - len);
	e.key = base;
	e.size = len;
	if (fc_track(&e)) {
		munmap((void *)base, len);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*ptr = base;
	return CUDA_SUCCESS;
}

static CUresult fc_address_free(uint64_t ptr, uint64_t size)
{
	struct fc_entry e;
	size_t len;

	if (!fc_page_round(size, &len))
		return CUDA_ERROR_INVALID_VALUE;
	if (fc_untrack(ptr, FC_CLS_RESERVE, ~0u, &e))
		return CUDA_ERROR_INVALID_VALUE;
	munmap((void *)(uintptr_t)e.key, e.size);
	return CUDA_SUCCESS;
}

/* A new memfd with every page allocated now, in this call. */
static int fc_memfd_new(uint64_t size, uint64_t *fd_out)
{
	int fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);

	if (fd < 0)
		return -ENOMEM;
	if (fallocate(fd, 0, 0, (off_t)size)) {
		close(fd);
		return -ENOMEM;
	}
	*fd_out = (uint64_t)fd;
	return 0;
}

/*
 * Physical memory. Unified: a memfd whose pages are all allocated in this
 * call (or a pooled memfd of the same size, which already has them).
 * Discrete: the memory is on the GPU; the call takes one bookkeeping page.
 */
static CUresult fc_create(unsigned int api, CUmemGenericAllocationHandle *handle,
			  uint64_t size, const CUmemAllocationProp *prop,
			  unsigned long long flags)
{
	struct fc_entry e = {
		.cls = FC_CLS_HANDLE, .kind = FC_KIND_LIVE,
		.refs = 1,	/* the handle's own, until cuMemRelease */
	};
	uint64_t taken = 0;

	if (!handle || !prop || flags || !size ||
	    !fc_page_round(size, &e.size) ||
	    prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (fc_should_fail())
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (fc_mode == FAKECUDA_MODE_DISCRETE) {
		e.back = FC_BACK_BK;
		if (fc_bk_get(&e.aux, &taken))
			return CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		e.back = FC_BACK_MEMFD;
		if (!fc_pool_take(FC_BACK_MEMFD, e.size, &e.aux)) {
			if (fc_memfd_new(e.size, &e.aux))
				return CUDA_ERROR_OUT_OF_MEMORY;
			taken = e.size;
		}
	}
	e.key = __atomic_add_fetch(&fc_handle_seq, 1, __ATOMIC_RELAXED);
	if (fc_track(&e)) {
		fc_undo(e.back, e.aux, fc_entry_host_len(&e), taken);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (taken)
		fc_count_populated(api, taken);
	*handle = e.key;
	fc_delay();
	return CUDA_SUCCESS;
}

/*
 * Drop one reference. The last one (release with nothing mapped, or the
 * last unmap after release) ends the physical memory: to the pool, or
 * back to the kernel. The memfd stays open until then even after
 * cuMemRelease, so the pool can keep it; with no pool, closing it last
 * frees the pages in the same call as before, since the last mapping is
 * already gone. Returns the bytes given back to the kernel.
 */
static uint64_t fc_handle_put(struct fc_entry *h)
{
	struct fc_entry gone;

	if (--h->refs)
		return 0;
	gone = *h;
	fc_tab_erase(h);
	return fc_drop(gone.back, gone.aux, fc_entry_host_len(&gone));
}

/* Unmap a range by putting its PROT_NONE reservation back in place. */
static int fc_map_none(uint64_t ptr, size_t len)
{
	void *p = mmap((void *)(uintptr_t)ptr, len, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		       -1, 0);

	return p == MAP_FAILED ? -ENOMEM : 0;
}

/*
 * Unified: shared mapping of the memfd over the reservation, not
 * populated: the pages already exist, so touching them later only adds
 * page tables. The lock is held across the mmap so a concurrent last
 * cuMemUnmap cannot close (and recycle) the descriptor under us.
 * Discrete: device memory is not mapped for the CPU; the reservation
 * stays PROT_NONE and only the mapping's bookkeeping is kept.
 */
static CUresult fc_map(uint64_t ptr, uint64_t size, uint64_t offset,
		       uint64_t handle, unsigned long long flags)
{
	struct fc_entry m = { .key = ptr, .cls = FC_CLS_MAP, .aux = handle };
	struct fc_entry *h;
	CUresult ret = CUDA_ERROR_INVALID_VALUE;
	void *p;

	if (!ptr || flags || !size || !fc_page_round(size, &m.size) ||
	    (ptr | offset) & (fc_page - 1))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fc_tab.lock);
	h = fc_tab_find(handle, FC_CLS_HANDLE);
	if (!h || h->kind != FC_KIND_LIVE || offset > h->size ||
	    m.size > h->size - offset || fc_tab_find(ptr, FC_CLS_MAP))
		goto out;
	ret = CUDA_ERROR_OUT_OF_MEMORY;
	if (h->back == FC_BACK_MEMFD) {
		p = mmap((void *)(uintptr_t)ptr, m.size, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, (int)h->aux, (off_t)offset);
		if (p == MAP_FAILED)
			goto out;
	}
	if (fc_tab_insert(&m)) {
		if (h->back == FC_BACK_MEMFD)
			fc_map_none(ptr, m.size);
		goto out;
	}
	/* the insert may have moved the table: find the handle again */
	fc_tab_find(handle, FC_CLS_HANDLE)->refs++;
	ret = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fc_tab.lock);
	return ret;
}

static CUresult fc_unmap(unsigned int api, uint64_t ptr)
{
	struct fc_entry *m, *h;
	uint64_t freed = 0, hid;
	CUresult ret = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&fc_tab.lock);
	m = fc_tab_find(ptr, FC_CLS_MAP);
	if (!m)
		goto out;
	hid = m->aux;
	h = fc_tab_find(hid, FC_CLS_HANDLE);
	ret = CUDA_ERROR_OUT_OF_MEMORY;
	/* discrete mappings never left PROT_NONE */
	if ((!h || h->back != FC_BACK_BK) && fc_map_none(ptr, m->size))
		goto out;
	fc_tab_erase(m);
	/* looked up after the erase, which may shift entries */
	h = fc_tab_find(hid, FC_CLS_HANDLE);
	if (h)
		freed = fc_handle_put(h);
	ret = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fc_tab.lock);
	if (freed)
		fc_count_released(api, freed);
	return ret;
}

static CUresult fc_release(unsigned int api, uint64_t handle)
{
	struct fc_entry *h;
	uint64_t freed = 0;
	CUresult ret = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&fc_tab.lock);
	h = fc_tab_find(handle, FC_CLS_HANDLE);
	if (!h || h->kind != FC_KIND_LIVE)
		goto out;
	/* the mappings, if any, keep the memory (and the memfd) alive */
	h->kind = FC_KIND_RELEASED;
	freed = fc_handle_put(h);
	ret = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fc_tab.lock);
	if (freed)
		fc_count_released(api, freed);
	return ret;
}

/* ---- exported entry points ---- */

FC_EXPORT CUresult cuInit(unsigned int flags)
{
	unsigned int api = FAKECUDA_API_cuInit;

	fc_enter(api);
	/* a bad knob (reported at load) must not pass for a working fake */
	if (flags || fc_config_bad)
		return fc_leave(api, CUDA_ERROR_INVALID_VALUE);
	__atomic_store_n(&fc_initialized, 1, __ATOMIC_RELEASE);
	return fc_leave(api, CUDA_SUCCESS);
}

FC_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	unsigned int api = FAKECUDA_API_cuMemAlloc_v2;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_alloc64(api, dptr, bytesize, FC_POPULATE,
				 FC_KIND_DEVICE);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	unsigned int api = FAKECUDA_API_cuMemAlloc;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_alloc32(api, dptr, bytesize);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
				      size_t WidthInBytes, size_t Height,
				      unsigned int ElementSizeBytes)
{
	unsigned int api = FAKECUDA_API_cuMemAllocPitch_v2;
	CUresult ret = fc_enter(api);
	uint64_t pitch, total;

	if (ret == CUDA_SUCCESS && !pPitch)
		ret = CUDA_ERROR_INVALID_VALUE;
	if (ret == CUDA_SUCCESS)
		ret = fc_pitch(WidthInBytes, Height, ElementSizeBytes, &pitch,
			       &total);
	if (ret == CUDA_SUCCESS)
		ret = fc_alloc64(api, dptr, total, FC_POPULATE,
				 FC_KIND_DEVICE);
	if (ret == CUDA_SUCCESS)
		*pPitch = pitch;
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
				   unsigned int WidthInBytes,
				   unsigned int Height,
				   unsigned int ElementSizeBytes)
{
	unsigned int api = FAKECUDA_API_cuMemAllocPitch;
	CUresult ret = fc_enter(api);
	uint64_t pitch, total;

	if (ret == CUDA_SUCCESS && !pPitch)
		ret = CUDA_ERROR_INVALID_VALUE;
	if (ret == CUDA_SUCCESS)
		ret = fc_pitch(WidthInBytes, Height, ElementSizeBytes, &pitch,
			       &total);
	if (ret == CUDA_SUCCESS && total > UINT32_MAX)
		ret = CUDA_ERROR_INVALID_VALUE;
	if (ret == CUDA_SUCCESS)
		ret = fc_alloc32(api, dptr, total);
	if (ret == CUDA_SUCCESS)
		*pPitch = (unsigned int)pitch;
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
				     unsigned int flags)
{
	unsigned int api = FAKECUDA_API_cuMemAllocManaged;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS && flags != CU_MEM_ATTACH_GLOBAL &&
	    flags != CU_MEM_ATTACH_HOST)
		ret = CUDA_ERROR_INVALID_VALUE;
	if (ret == CUDA_SUCCESS)
		ret = fc_alloc64(api, dptr, bytesize, FC_LAZY, FC_KIND_DEVICE);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	unsigned int api = FAKECUDA_API_cuMemAllocHost_v2;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_alloc_host(api, pp, bytesize);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
	unsigned int api = FAKECUDA_API_cuMemAllocHost;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_alloc_host(api, pp, bytesize);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize,
				  unsigned int Flags)
{
	unsigned int api = FAKECUDA_API_cuMemHostAlloc;
	CUresult ret = fc_enter(api);

	(void)Flags;
	if (ret == CUDA_SUCCESS)
		ret = fc_alloc_host(api, pp, bytesize);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize,
					unsigned int Flags)
{
	unsigned int api = FAKECUDA_API_cuMemHostRegister_v2;
	CUresult ret = fc_enter(api);

	(void)Flags;
	if (ret == CUDA_SUCCESS)
		ret = fc_register(api, p, bytesize);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize,
				     unsigned int Flags)
{
	unsigned int api = FAKECUDA_API_cuMemHostRegister;
	CUresult ret = fc_enter(api);

	(void)Flags;
	if (ret == CUDA_SUCCESS)
		ret = fc_register(api, p, bytesize);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemHostUnregister(void *p)
{
	unsigned int api = FAKECUDA_API_cuMemHostUnregister;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_unregister(p);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
				   CUstream hStream)
{
	unsigned int api = FAKECUDA_API_cuMemAllocAsync;
	CUresult ret = fc_enter(api);

	(void)hStream;
	if (ret == CUDA_SUCCESS)
		ret = fc_alloc64(api, dptr, bytesize, FC_POPULATE,
				 FC_KIND_DEVICE);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
					CUstream hStream)
{
	unsigned int api = FAKECUDA_API_cuMemAllocAsync_ptsz;
	CUresult ret = fc_enter(api);

	(void)hStream;
	if (ret == CUDA_SUCCESS)
		ret = fc_alloc64(api, dptr, bytesize, FC_POPULATE,
				 FC_KIND_DEVICE);
	return fc_leave(api, ret);
}

/*
 * Both pool variants go through the exported cuMemAllocAsync (PLT call,
 * not a tail call: fc_leave() still needs the result), so its probe fires
 * nested inside theirs and the pages are counted under cuMemAllocAsync.
 */
FC_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
					   CUmemoryPool pool, CUstream hStream)
{
	unsigned int api = FAKECUDA_API_cuMemAllocFromPoolAsync;
	CUresult ret = fc_enter(api);

	(void)pool;
	if (ret == CUDA_SUCCESS)
		ret = cuMemAllocAsync(dptr, bytesize, hStream);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr,
						size_t bytesize,
						CUmemoryPool pool,
						CUstream hStream)
{
	unsigned int api = FAKECUDA_API_cuMemAllocFromPoolAsync_ptsz;
	CUresult ret = fc_enter(api);

	(void)pool;
	if (ret == CUDA_SUCCESS)
		ret = cuMemAllocAsync(dptr, bytesize, hStream);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	unsigned int api = FAKECUDA_API_cuMemFree_v2;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_free(api, dptr, FC_KMASK(FC_KIND_DEVICE));
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	unsigned int api = FAKECUDA_API_cuMemFree;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_free(api, dptr, FC_KMASK(FC_KIND_DEVICE));
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemFreeHost(void *p)
{
	unsigned int api = FAKECUDA_API_cuMemFreeHost;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_free(api, (uintptr_t)p, FC_KMASK(FC_KIND_HOST));
	return fc_leave(api, ret);
}

/* Stream order is not modelled: the memory is unmapped right away. */
FC_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	unsigned int api = FAKECUDA_API_cuMemFreeAsync;
	CUresult ret = fc_enter(api);

	(void)hStream;
	if (ret == CUDA_SUCCESS)
		ret = fc_free(api, dptr, FC_KMASK(FC_KIND_DEVICE));
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	unsigned int api = FAKECUDA_API_cuMemFreeAsync_ptsz;
	CUresult ret = fc_enter(api);

	(void)hStream;
	if (ret == CUDA_SUCCESS)
		ret = fc_free(api, dptr, FC_KMASK(FC_KIND_DEVICE));
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
				       size_t alignment, CUdeviceptr addr,
				       unsigned long long flags)
{
	unsigned int api = FAKECUDA_API_cuMemAddressReserve;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS && flags)
		ret = CUDA_ERROR_INVALID_VALUE;
	if (ret == CUDA_SUCCESS)
		ret = fc_reserve(ptr, size, alignment, addr);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	unsigned int api = FAKECUDA_API_cuMemAddressFree;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_address_free(ptr, size);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle,
			       size_t size, const CUmemAllocationProp *prop,
			       unsigned long long flags)
{
	unsigned int api = FAKECUDA_API_cuMemCreate;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_create(api, handle, size, prop, flags);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			    CUmemGenericAllocationHandle handle,
			    unsigned long long flags)
{
	unsigned int api = FAKECUDA_API_cuMemMap;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_map(ptr, size, offset, handle, flags);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	unsigned int api = FAKECUDA_API_cuMemUnmap;
	CUresult ret = fc_enter(api);

	(void)size;
	if (ret == CUDA_SUCCESS)
		ret = fc_unmap(api, ptr);
	return fc_leave(api, ret);
}

FC_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	unsigned int api = FAKECUDA_API_cuMemRelease;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS)
		ret = fc_release(api, handle);
	return fc_leave(api, ret);
}

/*
 * Unified mappings are read-write from cuMemMap on, and discrete ones are
 * never CPU-accessible, so access needs no change in either mode.
 */
FC_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
				  const CUmemAccessDesc *desc, size_t count)
{
	unsigned int api = FAKECUDA_API_cuMemSetAccess;
	CUresult ret = fc_enter(api);

	if (ret == CUDA_SUCCESS && (!ptr || !size || !desc || !count))
		ret = CUDA_ERROR_INVALID_VALUE;
	return fc_leave(api, ret);
}

/* ---- test-only extension ---- */

FC_EXPORT void fakecuda_stats(struct fakecuda_stats *out)
{
	const unsigned long long *src = (const void *)&fc_stats;
	unsigned long long *dst = (void *)out;
	size_t i;

	_Static_assert(sizeof(fc_stats) % sizeof(*src) == 0,
		       "fakecuda_stats holds only 64-bit counters");
	if (!out)
		return;
	for (i = 0; i < sizeof(fc_stats) / sizeof(*src); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

FC_EXPORT const char *fakecuda_api_name(unsigned int api)
{
	return api < FAKECUDA_API_COUNT ? fc_api_names[api] : NULL;
}

FC_EXPORT void fakecuda_set_thread_delay_ms(unsigned int ms)
{
	fc_thread_delay_ms = ms;
}

/*
 * The driver's BH thread takes one page of its own per 2 MiB it faults for
 * a job (with 4 KiB pages), charged to the job: UVM's bookkeeping.
 */
#define FC_BH_PAGES_PER_KERNEL_PAGE	512

FC_EXPORT unsigned long long fakecuda_gpu_touch(CUdeviceptr ptr, size_t len)
{
	struct fakenv_bh_fault f = { .addr = ptr, .len = len };

	if (fc_drv_fd < 0 || !len)
		return 0;
	f.kernel_pages = (len / fc_page + FC_BH_PAGES_PER_KERNEL_PAGE - 1) /
			 FC_BH_PAGES_PER_KERNEL_PAGE;
	if (ioctl(fc_drv_fd, FAKENV_BH_FAULT, &f))
		return 0;
	return f.pages_faulted * fc_page;
}

FC_EXPORT unsigned long long fakecuda_pool_trim(void)
{
	unsigned long long bytes = 0, chunks = 0;
	struct fc_chunk *c;
	uint32_t b, i;

	if (!fc_pool_on || !fc_pool.chunks)
		return 0;
	pthread_mutex_lock(&fc_pool.lock);
	for (b = 0; b < FC_POOL_BUCKETS; b++) {
		while (fc_pool.head[b] != FC_NIL) {
			i = fc_pool.head[b];
			c = &fc_pool.chunks[i];
			fc_pool.head[b] = c->next;
			fc_back_free(c->back, c->mem, c->len);
			bytes += c->len;
			chunks++;
			c->next = fc_pool.spare;
			fc_pool.spare = i;
		}
	}
	__atomic_fetch_sub(&fc_stats.pool_bytes, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&fc_stats.pool_chunks, chunks, __ATOMIC_RELAXED);
	fc_add(&fc_stats.pool_trimmed_bytes, bytes);
	pthread_mutex_unlock(&fc_pool.lock);
	return bytes;
}

/* Write every page of [p, p + len) so it is private and present now. */
static void fc_prefault(void *p, size_t len)
{
	volatile char *c = p;
	size_t off;

	for (off = 0; off < len; off += fc_page)
		c[off] = c[off];
	c[len - 1] = c[len - 1];
}

/*
 * FAKECUDA_DRIVER names the fake kernel driver's device; unified mode
 * only (a discrete GPU's device memory is not host memory).
 */
static void fc_drv_open(void)
{
	const char *dev = getenv("FAKECUDA_DRIVER");

	if (!dev || !*dev)
		return;
	if (fc_mode != FAKECUDA_MODE_UNIFIED) {
		fc_bad_env("FAKECUDA_DRIVER", dev, "unset in discrete mode");
		return;
	}
	fc_drv_fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fc_drv_fd < 0) {
		fprintf(stderr, "fakecuda: cannot open FAKECUDA_DRIVER %s: %s\n",
			dev, strerror(errno));
		fc_config_bad = true;
		return;
	}
	fc_drv_node = (int)fc_env_ull("FAKECUDA_DRIVER_NODE", (unsigned long long)-1);
	if (fc_env_ull("FAKECUDA_DRIVER_RETRY", 0))
		fc_drv_flags |= FAKENV_F_FAIL_ONCE;
}

/*
 * Everything that could take pages for bookkeeping happens here, at load:
 * the table is mapped populated, and the counters' first write (a
 * copy-on-write fault on this library's .data/.bss) happens now rather
 * than inside somebody's first call.
 */
__attribute__((constructor)) static void fc_setup(void)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long long slots;

	if (page > 0)
		fc_page = (size_t)page;
	fc_read_model_knobs();
	fc_delay_ms = (unsigned int)fc_env_ull("FAKECUDA_DELAY_MS", 0);
	fc_spin_ms = (unsigned int)fc_env_ull("FAKECUDA_SPIN_MS", 0);
	fc_stall_ms = (unsigned int)fc_env_ull("FAKECUDA_STALL_MS", 0);
	fc_fail_every = fc_env_ull("FAKECUDA_FAIL_EVERY", 0);
	fc_thp = fc_env_ull("FAKECUDA_THP", 0) != 0;
	fc_drv_open();
	slots = fc_env_ull("FAKECUDA_TABLE_SLOTS", fc_initial_slots);
	if (slots >= 16 && slots <= (1ULL << 28) && !(slots & (slots - 1)))
		fc_initial_slots = (size_t)slots;
	fc_prefault(&fc_stats, sizeof(fc_stats));
	fc_prefault(&fc_tab, sizeof(fc_tab));
	fc_prefault(&fc_take_seq, sizeof(fc_take_seq));
	fc_prefault(&fc_handle_seq, sizeof(fc_handle_seq));
	fc_prefault(&fc_initialized, sizeof(fc_initialized));
	fc_prefault(&fc_pool, sizeof(fc_pool));
	fc_prefault(&fc_bk, sizeof(fc_bk));
	if (fc_pool_on && fc_pool_setup()) {
		fprintf(stderr, "fakecuda: cannot map the pool's table\n");
		fc_config_bad = true;
	}
	if (fc_mode == FAKECUDA_MODE_DISCRETE && fc_bk_setup()) {
		fprintf(stderr, "fakecuda: cannot map the bookkeeping arena\n");
		fc_config_bad = true;
	}
	pthread_mutex_lock(&fc_tab.lock);
	if (!fc_tab.cap)
		fc_tab_grow();	/* on failure the first insert retries */
	pthread_mutex_unlock(&fc_tab.lock);
}
