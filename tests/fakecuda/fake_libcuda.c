// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A fake libcuda.so.1 for testing umtrace without a GPU.
 *
 * It behaves like the driver of a unified-memory machine (DGX Spark): a
 * "device" allocation is plain host memory whose pages the driver takes
 * inside the call, in the calling thread. So each allocating entry point
 * maps anonymous memory with MAP_POPULATE (the pages are allocated and
 * zeroed before mmap returns), hands the host address back as the device
 * pointer, and the matching free munmaps it (the pages are freed inside
 * the free call). Exceptions, on purpose:
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
 * Knobs (environment, read once at load):
 *   FAKECUDA_DELAY_MS=N    sleep N ms inside every page-taking call, after
 *                          its pages are in (fakecuda_set_thread_delay_ms()
 *                          overrides it per thread)
 *   FAKECUDA_FAIL_EVERY=N  every Nth page-taking call fails with
 *                          CUDA_ERROR_OUT_OF_MEMORY before taking pages
 *   FAKECUDA_TABLE_SLOTS=N initial size of the pointer table (power of 2)
 *   FAKECUDA_THP=1         ask for transparent huge pages (MADV_HUGEPAGE)
 *                          on anonymous allocations before populating them,
 *                          so the kernel may hand out order-9 blocks
 * "Page-taking" calls: cuMemAlloc*, cuMemAllocManaged, cuMemAllocHost*,
 * cuMemHostAlloc, cuMemHostRegister*, cuMemAllocAsync*, cuMemCreate.
 *
 * Bookkeeping never allocates inside a call in steady state: the pointer
 * table is mapped and populated at load time, and only grows (counted in
 * fakecuda_stats.overhead_bytes) past 3/4 full.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cuda_fake.h"

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

struct fc_entry {
	uint64_t key;		/* 0: empty slot */
	uint64_t size;		/* bytes covered, page rounded */
	uint64_t aux;		/* HANDLE: memfd; MAP: handle; MEM: mlocked */
	uint32_t cls;
	uint32_t kind;
	uint32_t refs;		/* HANDLE: live maps, plus 1 until released */
	uint32_t pad;
};

/* Open addressing, linear probing, backward-shift deletion. */
static struct {
	pthread_mutex_t lock;
	struct fc_entry *slots;
	size_t cap;		/* power of two, or 0 before the first map */
	size_t used;
} fc_tab = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct fakecuda_stats fc_stats;
static size_t fc_page = 4096;
static size_t fc_initial_slots = 1u << 16;
static unsigned int fc_delay_ms;
static unsigned long long fc_fail_every;
static bool fc_thp;
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

/* FAKECUDA_DELAY_MS: runs after the pages are in, still inside the call. */
static void fc_delay(void)
{
	unsigned int ms = fc_thread_delay_ms ? fc_thread_delay_ms : fc_delay_ms;
	struct timespec ts;
	int saved = errno;

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

/* Map @size bytes for @api, record them as @kind, return the address. */
static CUresult fc_alloc(unsigned int api, uint64_t size, enum fc_map_mode mode,
			 uint32_t kind, uintptr_t *out)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	struct fc_entry e = { .cls = FC_CLS_MEM, .kind = kind };
	void *p;

	if (!size || !fc_page_round(size, &e.size))
		return CUDA_ERROR_INVALID_VALUE;
	if (fc_should_fail())
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (mode != FC_LAZY)
		flags |= MAP_POPULATE;
#ifdef MAP_32BIT
	if (mode == FC_POPULATE_32BIT)
		flags |= MAP_32BIT;
#endif
	if (fc_thp && mode == FC_POPULATE)
		p = fc_map_thp(e.size, flags);
	else
		p = mmap(NULL, e.size, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e.key = (uintptr_t)p;
	if (fc_track(&e)) {
		munmap(p, e.size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (mode != FC_LAZY)
		fc_count_populated(api, e.size);
	*out = (uintptr_t)p;
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

#ifdef MAP_32BIT
static CUresult fc_alloc32(unsigned int api, CUdeviceptr_v1 *dptr,
			   uint64_t size)
{
	uintptr_t p;
	CUresult ret;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	ret = fc_alloc(api, size, FC_POPULATE_32BIT, FC_KIND_DEVICE, &p);
	if (ret == CUDA_SUCCESS)
		*dptr = (CUdeviceptr_v1)p;
	return ret;
}
#else
static CUresult fc_alloc32(unsigned int api, CUdeviceptr_v1 *dptr,
			   uint64_t size)
{
	(void)api;
	(void)dptr;
	(void)size;
	return CUDA_ERROR_NOT_SUPPORTED;
}
#endif

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

/* munmap a FC_CLS_MEM entry whose kind is in @kinds. */
static CUresult fc_free(unsigned int api, uint64_t key, uint32_t kinds)
{
	struct fc_entry e;

	if (fc_untrack(key, FC_CLS_MEM, kinds, &e))
		return CUDA_ERROR_INVALID_VALUE;
	munmap((void *)(uintptr_t)e.key, e.size);
	fc_count_released(api, e.size);
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

/* Physical memory: a memfd with every page allocated now, in this call. */
static CUresult fc_create(unsigned int api, CUmemGenericAllocationHandle *handle,
			  uint64_t size, const CUmemAllocationProp *prop,
			  unsigned long long flags)
{
	struct fc_entry e = {
		.cls = FC_CLS_HANDLE, .kind = FC_KIND_LIVE,
		.refs = 1,	/* the handle's own, until cuMemRelease */
	};
	int fd;

	if (!handle || !prop || flags || !size ||
	    !fc_page_round(size, &e.size) ||
	    prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (fc_should_fail())
		return CUDA_ERROR_OUT_OF_MEMORY;
	fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (fallocate(fd, 0, 0, (off_t)e.size))
		goto fail;
	e.key = __atomic_add_fetch(&fc_handle_seq, 1, __ATOMIC_RELAXED);
	e.aux = (uint64_t)fd;
	if (fc_track(&e))
		goto fail;
	fc_count_populated(api, e.size);
	*handle = e.key;
	fc_delay();
	return CUDA_SUCCESS;
fail:
	close(fd);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Drop one reference; the last one closes the memfd (if still open). */
static uint64_t fc_handle_put(struct fc_entry *h)
{
	uint64_t size = h->size;

	if (--h->refs)
		return 0;
	if (h->kind == FC_KIND_LIVE)
		close((int)h->aux);
	fc_tab_erase(h);
	return size;
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
 * Shared mapping of the memfd over the reservation, not populated: the
 * pages already exist, so touching them later only adds page tables.
 * The lock is held across the mmap so a concurrent cuMemRelease cannot
 * close (and recycle) the descriptor under us.
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
	p = mmap((void *)(uintptr_t)ptr, m.size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, (int)h->aux, (off_t)offset);
	if (p == MAP_FAILED)
		goto out;
	if (fc_tab_insert(&m)) {
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
	ret = CUDA_ERROR_OUT_OF_MEMORY;
	if (fc_map_none(ptr, m->size))
		goto out;
	hid = m->aux;
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
	/* close now: from here only the mappings keep the pages alive */
	close((int)h->aux);
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
	if (flags)
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

/* Mappings are read-write from cuMemMap on, so access needs no change. */
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
	fc_delay_ms = (unsigned int)fc_env_ull("FAKECUDA_DELAY_MS", 0);
	fc_fail_every = fc_env_ull("FAKECUDA_FAIL_EVERY", 0);
	fc_thp = fc_env_ull("FAKECUDA_THP", 0) != 0;
	slots = fc_env_ull("FAKECUDA_TABLE_SLOTS", fc_initial_slots);
	if (slots >= 16 && slots <= (1ULL << 28) && !(slots & (slots - 1)))
		fc_initial_slots = (size_t)slots;
	fc_prefault(&fc_stats, sizeof(fc_stats));
	fc_prefault(&fc_tab, sizeof(fc_tab));
	fc_prefault(&fc_take_seq, sizeof(fc_take_seq));
	fc_prefault(&fc_handle_seq, sizeof(fc_handle_seq));
	fc_prefault(&fc_initialized, sizeof(fc_initialized));
	pthread_mutex_lock(&fc_tab.lock);
	if (!fc_tab.cap)
		fc_tab_grow();	/* on failure the first insert retries */
	pthread_mutex_unlock(&fc_tab.lock);
}
