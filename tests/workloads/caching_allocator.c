// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * PyTorch's CUDA caching allocator in miniature: c10/cuda/
 * CUDACachingAllocator.cpp with its default settings, for one device and
 * one stream, written anew in C for the tests.
 *  - Requests are rounded up to 512 bytes; those of 1 MiB or less go to
 *    the small pool, the others to the large pool.
 *  - A request takes the best-fitting cached free block of its pool (the
 *    smallest, then the lowest address), split if the remainder is at
 *    least 512 bytes (small pool) or more than 1 MiB (large pool); a freed
 *    block coalesces with the free neighbours of its segment.
 *  - When nothing fits, a new segment: cuMemAlloc_v2 of 2 MiB (small
 *    pool), 20 MiB (requests under 10 MiB) or the request rounded up to
 *    2 MiB. Segments go back (cuMemFree_v2) only in empty_cache, and only
 *    those wholly free.
 *  - Expandable segments (expandable_segments:True) instead: each pool
 *    reserves once 1.125 x the GPU's memory with cuMemAddressReserve and
 *    grows by pages of 2 MiB (small) or 20 MiB (large), cuMemCreate and
 *    cuMemMap per page, then one cuMemSetAccess for the range, at the
 *    lowest address where free and unmapped space together fit; a free
 *    block that could grow more loses to a larger one that fits as it is.
 *    Every remainder of 512 bytes or more is split off. empty_cache unmaps
 *    the wholly free pages (cuMemUnmap, cuMemRelease per page) and frees
 *    the reservation (cuMemAddressFree) once nothing in it is mapped.
 *  - After each block allocation the hook gets (ptr, +block size,
 *    allocated, reserved, {CUDA, 0}), after each free (ptr, -block size,
 *    ...), the totals being the current allocated and reserved bytes after
 *    the change. empty_cache calls no hook: reserved drops unreported until
 *    the next allocation or free.
 * Left out: other streams and their events, CUDA graph pools,
 * max_split_size, garbage collection, the retry after a failed cudaMalloc
 * (here any failing driver call ends the run), more than one expandable
 * segment per pool.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "c10_fake.h"
#include "caching_allocator.h"

/* CUDACachingAllocator.cpp's constants */
#define CA_MIN_BLOCK	512ULL			/* kMinBlockSize */
#define CA_SMALL_SIZE	(1 * CA_MiB)		/* kSmallSize */
#define CA_SMALL_BUFFER	(2 * CA_MiB)		/* kSmallBuffer */
#define CA_MIN_LARGE	(10 * CA_MiB)		/* kMinLargeAlloc */
#define CA_ROUND_LARGE	(2 * CA_MiB)		/* kRoundLarge */

struct ca_pool;

struct ca_block {
	uint64_t ptr;
	uint64_t size;
	bool allocated;
	bool mapped;		/* backed; false only in expandable segments */
	struct ca_pool *pool;
	struct ca_block *prev, *next;	/* address neighbours in the segment */
	struct ca_block *fprev, *fnext;	/* the pool's free, mapped blocks */
	struct ca_block *aprev, *anext;	/* every block, for the checks */
};

struct ca_pool {
	bool small;
	struct ca_block *free;
	/* the expandable segment: one reservation, mapped page by page */
	uint64_t page;
	CUdeviceptr base;		/* 0: nothing reserved */
	uint64_t npages;
	CUmemGenericAllocationHandle *handles;	/* 0: page not mapped */
	struct ca_block *head;		/* its lowest block */
};

static struct ca_pool ca_small = { .small = true, .page = CA_SMALL_BUFFER };
static struct ca_pool ca_large = { .small = false, .page = CA_LARGE_BUFFER };

static struct ca_config ca_cfg;
static struct ca_stats ca_st;
/* every block, for the checks */
static struct ca_block *ca_all;
static unsigned long ca_nblocks;

void ca_die(const char *fmt, ...)
{
	va_list ap;

	fputs("torch_alloc: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void ca_check(unsigned int api, uint64_t bytes, CUresult ret)
{
	ca_st.calls[api]++;
	ca_st.bytes[api] += bytes;
	if (ret != CUDA_SUCCESS)
		ca_die("%s(%llu) failed: CUresult %d", fakecuda_api_name(api),
		       (unsigned long long)bytes, (int)ret);
}

/* ---- the profiler hook ---- */

static void ca_hook(void *ptr, int64_t size, uint64_t allocated,
		    uint64_t reserved, struct c10_device dev)
{
	switch (ca_cfg.hook) {
	case CA_HOOK_SIZE_T:
		c10_report_memory_usage(ptr, size, allocated, reserved, dev);
		break;
	case CA_HOOK_INT64:
		c10_report_memory_usage_i64(ptr, size, (int64_t)allocated,
					    (int64_t)reserved, dev);
		break;
	case CA_HOOK_V1:
		c10_report_memory_usage_v1(ptr, size, dev);
		break;
	}
}

static void ca_report(uint64_t ptr, int64_t size)
{
	struct c10_device dev = { .type = C10_DEVICE_CUDA, .index = 0 };

	ca_hook((void *)(uintptr_t)ptr, size, ca_st.allocated, ca_st.reserved,
		dev);
	if (size > 0) {
		ca_st.allocs++;
		ca_st.alloc_bytes += (uint64_t)size;
	} else {
		ca_st.frees++;
		ca_st.free_bytes += (uint64_t)-size;
	}
	/* every increase is reported at once, so these are the true peaks */
	if (ca_st.allocated > ca_st.peak_allocated)
		ca_st.peak_allocated = ca_st.allocated;
	if (ca_st.reserved > ca_st.peak_reserved)
		ca_st.peak_reserved = ca_st.reserved;
	ca_st.reported = true;
	ca_st.last_ptr = ptr;
	ca_st.last_size = size;
	ca_st.last_allocated = ca_st.allocated;
	ca_st.last_reserved = ca_st.reserved;
}

static struct c10_device ca_cpu_dev = { .type = C10_DEVICE_CPU, .index = -1 };

void ca_set_cpu_device(int8_t type, int8_t index)
{
	ca_cpu_dev = (struct c10_device){ .type = type, .index = index };
}

/* CPUAllocator's reporter: its own totals, no reserve, c10::Device(kCPU). */
void ca_report_cpu(void *buf, int64_t size)
{
	struct c10_device dev = ca_cpu_dev;

	if (size > 0) {
		ca_st.cpu_allocated += (uint64_t)size;
		ca_st.cpu_allocs++;
		ca_st.cpu_bytes += (uint64_t)size;
	} else {
		ca_st.cpu_allocated -= (uint64_t)-size;
		ca_st.cpu_frees++;
	}
	ca_hook(buf, size, ca_st.cpu_allocated, 0, dev);
}

/* ---- blocks and pools ---- */

static struct ca_block *ca_block_new(struct ca_pool *p, uint64_t ptr,
				     uint64_t size, bool mapped)
{
	struct ca_block *b = calloc(1, sizeof(*b));

	if (!b)
		ca_die("out of memory");
	b->pool = p;
	b->ptr = ptr;
	b->size = size;
	b->mapped = mapped;
	b->anext = ca_all;
	if (ca_all)
		ca_all->aprev = b;
	ca_all = b;
	ca_nblocks++;
	return b;
}

static void ca_block_del(struct ca_block *b)
{
	if (b->aprev)
		b->aprev->anext = b->anext;
	else
		ca_all = b->anext;
	if (b->anext)
		b->anext->aprev = b->aprev;
	ca_nblocks--;
	free(b);
}

static void ca_link_after(struct ca_block *a, struct ca_block *b)
{
	b->prev = a;
	b->next = a->next;
	if (b->next)
		b->next->prev = b;
	a->next = b;
}

static void ca_link_before(struct ca_block *a, struct ca_block *b)
{
	b->next = a;
	b->prev = a->prev;
	if (b->prev)
		b->prev->next = b;
	a->prev = b;
	if (a->pool->head == a)
		a->pool->head = b;
}

static void ca_free_add(struct ca_block *b)
{
	struct ca_pool *p = b->pool;

	b->fprev = NULL;
	b->fnext = p->free;
	if (p->free)
		p->free->fprev = b;
	p->free = b;
}

static void ca_free_del(struct ca_block *b)
{
	if (b->fprev)
		b->fprev->fnext = b->fnext;
	else
		b->pool->free = b->fnext;
	if (b->fnext)
		b->fnext->fprev = b->fprev;
	b->fprev = b->fnext = NULL;
}

/* try_merge_blocks: @dst takes in its neighbour @src, free and alike. */
static void ca_merge(struct ca_block *dst, struct ca_block *src)
{
	if (!src || src->allocated || src->mapped != dst->mapped)
		return;
	if (src->mapped)
		ca_free_del(src);
	if (src == dst->prev) {
		dst->ptr = src->ptr;
		dst->prev = src->prev;
		if (dst->prev)
			dst->prev->next = dst;
		if (dst->pool->head == src)
			dst->pool->head = dst;
	} else {
		dst->next = src->next;
		if (dst->next)
			dst->next->prev = dst;
	}
	dst->size += src->size;
	ca_block_del(src);
}

static uint64_t ca_round(uint64_t size)
{
	if (size < CA_MIN_BLOCK)
		return CA_MIN_BLOCK;
	return (size + CA_MIN_BLOCK - 1) / CA_MIN_BLOCK * CA_MIN_BLOCK;
}

static uint64_t ca_alloc_size(uint64_t size)
{
	if (size <= CA_SMALL_SIZE)
		return CA_SMALL_BUFFER;
	if (size < CA_MIN_LARGE)
		return CA_LARGE_BUFFER;
	return (size + CA_ROUND_LARGE - 1) / CA_ROUND_LARGE * CA_ROUND_LARGE;
}

static bool ca_should_split(const struct ca_block *b, uint64_t size)
{
	uint64_t rest = b->size - size;

	if (b->pool->small || ca_cfg.expandable)
		return rest >= CA_MIN_BLOCK;
	return rest > CA_SMALL_SIZE;
}

/* The order of PyTorch's set of free blocks: size, then address. */
static bool ca_before(const struct ca_block *a, const struct ca_block *b)
{
	return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
}

/* The first free block of at least @min after @after (NULL: any). */
static struct ca_block *ca_next_fit(const struct ca_pool *p,
				    const struct ca_block *after, uint64_t min)
{
	struct ca_block *b, *best = NULL;

	for (b = p->free; b; b = b->fnext) {
		if (b->size < min || (after && !ca_before(after, b)))
			continue;
		if (!best || ca_before(b, best))
			best = b;
	}
	return best;
}

/* A free block's size counting the unmapped space it could grow into. */
static uint64_t ca_expandable_size(const struct ca_block *b)
{
	return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

/*
 * get_free_block: the best fit. With expandable segments a larger block
 * wins over a smaller one that could grow more (PyTorch's walk).
 */
static struct ca_block *ca_get_free_block(struct ca_pool *p, uint64_t size)
{
	struct ca_block *b = ca_next_fit(p, NULL, size), *n;

	while (b && ca_cfg.expandable && (n = ca_next_fit(p, b, size)) &&
	       ca_expandable_size(n) < ca_expandable_size(b))
		b = n;
	if (b)
		ca_free_del(b);
	return b;
}

/*
 * The device is full: a driver call would fail with out-of-memory. On
 * unified memory it would not, until the host runs out; here the run ends
 * first, so that no setting can take the test machine's memory.
 */
static void ca_room_for(uint64_t len)
{
	if (ca_st.reserved + len > ca_cfg.gpu_mem)
		ca_die("out of device memory: %llu reserved, %llu more, -M %llu",
		       (unsigned long long)ca_st.reserved,
		       (unsigned long long)len,
		       (unsigned long long)ca_cfg.gpu_mem);
}

/* ---- classic segments ---- */

static struct ca_block *ca_segment_alloc(struct ca_pool *p, uint64_t size)
{
	uint64_t len = ca_alloc_size(size);
	CUdeviceptr ptr;

	ca_room_for(len);
	CA_CU(cuMemAlloc_v2, len, (&ptr, len));
	ca_st.reserved += len;
	return ca_block_new(p, ptr, len, true);
}

/* ---- expandable segments ---- */

static void ca_es_reserve(struct ca_pool *p)
{
	uint64_t want = ca_cfg.gpu_mem + ca_cfg.gpu_mem / 8, len;

	p->npages = (want + p->page - 1) / p->page;
	len = p->npages * p->page;
	p->handles = calloc(p->npages, sizeof(*p->handles));
	if (!p->handles)
		ca_die("out of memory");
	CA_CU(cuMemAddressReserve, len, (&p->base, len, 0, 0, 0));
	p->head = ca_block_new(p, p->base, len, false);
}

static void ca_es_release(struct ca_pool *p)
{
	uint64_t len = p->npages * p->page;

	CA_CU(cuMemAddressFree, len, (p->base, len));
	ca_block_del(p->head);
	free(p->handles);
	p->handles = NULL;
	p->head = NULL;
	p->base = 0;
}

/* map_block: back the pages under [b->ptr, b->ptr + size) of unmapped @b. */
static struct ca_block *ca_es_map(struct ca_block *b, uint64_t size)
{
	struct ca_pool *p = b->pool;
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
	};
	CUmemAccessDesc desc = {
		.location = prop.location,
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	uint64_t first = (b->ptr - p->base) / p->page;
	uint64_t end = (b->ptr - p->base + size + p->page - 1) / p->page;
	uint64_t len = (end - first) * p->page, i;

	ca_room_for(len);
	for (i = first; i < end; i++)
		CA_CU(cuMemCreate, p->page, (&p->handles[i], p->page, &prop, 0));
	for (i = first; i < end; i++)
		CA_CU(cuMemMap, p->page, (p->base + i * p->page, p->page, 0,
					  p->handles[i], 0));
	CA_CU(cuMemSetAccess, len, (p->base + first * p->page, len, &desc, 1));
	if (len < b->size) {
		ca_link_after(b, ca_block_new(p, b->ptr + len, b->size - len,
					      false));
		b->size = len;
	}
	b->mapped = true;
	ca_merge(b, b->prev);
	ca_merge(b, b->next);
	ca_free_add(b);
	ca_st.reserved += len;
	return b;
}

/* has_available_address_space: free or unmapped blocks from @b on. */
static bool ca_es_room(const struct ca_block *b, uint64_t size)
{
	uint64_t bytes = 0;

	for (; b && !b->allocated && bytes < size; b = b->next)
		bytes += b->size;
	return bytes >= size;
}

/* try_allocate_expandable_block: the lowest place that can grow to @size */
static struct ca_block *ca_es_alloc(struct ca_pool *p, uint64_t size)
{
	struct ca_block *b, *c = NULL;

	if (!p->base)
		ca_es_reserve(p);
	for (b = p->head; b && !c; b = b->next) {
		if (b->mapped)
			continue;
		c = b->prev && !b->prev->allocated ? b->prev : b;
		if (!ca_es_room(c, size))
			c = NULL;
	}
	if (!c)
		ca_die("expandable segment full (%llu bytes): raise -M",
		       (unsigned long long)(p->npages * p->page));
	if (!c->mapped)
		c = ca_es_map(c, size < c->size ? size : c->size);
	while (c->size < size)
		c = ca_es_map(c->next, size - c->size < c->next->size ?
				       size - c->size : c->next->size);
	ca_free_del(c);
	return c;
}

/* unmap_block: give back the wholly free pages of free block @b. */
static void ca_es_unmap(struct ca_block *b)
{
	struct ca_pool *p = b->pool;
	uint64_t off = b->ptr - p->base;
	uint64_t first = (off + p->page - 1) / p->page;
	uint64_t end = (off + b->size) / p->page;
	uint64_t start = p->base + first * p->page, len, i;

	if (first >= end)
		return;
	len = (end - first) * p->page;
	for (i = first; i < end; i++) {
		CA_CU(cuMemUnmap, p->page, (p->base + i * p->page, p->page));
		CA_CU(cuMemRelease, p->page, (p->handles[i]));
		p->handles[i] = 0;
	}
	ca_free_del(b);
	if (start > b->ptr) {
		ca_link_before(b, ca_block_new(p, b->ptr, start - b->ptr, true));
		ca_free_add(b->prev);
	}
	if (b->ptr + b->size > start + len) {
		ca_link_after(b, ca_block_new(p, start + len,
					      b->ptr + b->size - start - len,
					      true));
		ca_free_add(b->next);
	}
	b->ptr = start;
	b->size = len;
	b->mapped = false;
	ca_merge(b, b->prev);
	ca_merge(b, b->next);
	ca_st.reserved -= len;
	if (!b->prev && !b->next)
		ca_es_release(p);
}

/* ---- the invariants, checked after every change (verify) ---- */

static int ca_cmp_ptr(const void *a, const void *b)
{
	const struct ca_block *x = *(struct ca_block *const *)a;
	const struct ca_block *y = *(struct ca_block *const *)b;

	return x->ptr < y->ptr ? -1 : x->ptr > y->ptr;
}

/* Expandable: mapped bytes lie on mapped pages, unmapped pages are bare. */
static bool ca_pages_ok(const struct ca_block *b)
{
	const struct ca_pool *p = b->pool;
	uint64_t off = b->ptr - p->base, i;

	if (!ca_cfg.expandable)
		return b->mapped;
	if (!b->mapped && (off % p->page || b->size % p->page))
		return false;
	for (i = off / p->page; i < (off + b->size + p->page - 1) / p->page;
	     i++)
		if (!p->handles[i] != !b->mapped)
			return false;
	return true;
}

static const char *ca_block_bad(const struct ca_block *b,
				const struct ca_block *after)
{
	if (after && b->ptr + b->size > after->ptr)
		return "blocks overlap";
	if (b->prev && (b->prev->next != b ||
			b->prev->ptr + b->prev->size != b->ptr))
		return "bad prev link";
	if (b->next && (b->next->prev != b || b->ptr + b->size != b->next->ptr))
		return "bad next link";
	if (b->allocated && !b->mapped)
		return "allocated block not mapped";
	if (!ca_pages_ok(b))
		return "pages disagree with the block";
	if (!b->allocated && b->next && !b->next->allocated &&
	    b->next->mapped == b->mapped)
		return "free neighbours not coalesced";
	return NULL;
}

static void ca_verify(const char *where)
{
	struct ca_pool *pools[] = { &ca_small, &ca_large };
	uint64_t allocated = 0, mapped = 0;
	unsigned long n = 0, nfree = 0, listed = 0, i;
	struct ca_block **v, *b;
	const char *bad = NULL;

	if (!ca_cfg.verify)
		return;
	v = calloc(ca_nblocks ? ca_nblocks : 1, sizeof(*v));
	if (!v)
		ca_die("out of memory");
	for (b = ca_all; b; b = b->anext)
		v[n++] = b;
	qsort(v, n, sizeof(*v), ca_cmp_ptr);
	for (i = 0; i < n && !bad; i++) {
		bad = ca_block_bad(v[i], i + 1 < n ? v[i + 1] : NULL);
		allocated += v[i]->allocated ? v[i]->size : 0;
		mapped += v[i]->mapped ? v[i]->size : 0;
		nfree += !v[i]->allocated && v[i]->mapped;
	}
	free(v);
	for (i = 0; i < 2 && !bad; i++)
		for (b = pools[i]->free; b && !bad; b = b->fnext, listed++)
			if (b->allocated || !b->mapped || b->pool != pools[i])
				bad = "bad block on a free list";
	if (!bad && listed != nfree)
		bad = "free lists miss free blocks";
	if (!bad && (allocated != ca_st.allocated || mapped != ca_st.reserved))
		bad = "totals disagree with the blocks";
	if (bad)
		ca_die("after %s: %s", where, bad);
}

/* ---- the allocator's entry points ---- */

struct ca_block *ca_malloc(uint64_t orig)
{
	uint64_t size = ca_round(orig);
	struct ca_pool *p = size <= CA_SMALL_SIZE ? &ca_small : &ca_large;
	struct ca_block *b = ca_get_free_block(p, size);

	if (!b)
		b = ca_cfg.expandable ? ca_es_alloc(p, size) :
				     ca_segment_alloc(p, size);
	if (ca_should_split(b, size)) {
		ca_link_after(b, ca_block_new(p, b->ptr + size, b->size - size,
					      true));
		ca_free_add(b->next);
		b->size = size;
	}
	b->allocated = true;
	ca_st.allocated += b->size;
	ca_report(b->ptr, (int64_t)b->size);
	ca_verify("malloc");
	return b;
}

void ca_free(struct ca_block *b)
{
	uint64_t ptr = b->ptr, size = b->size;

	b->allocated = false;
	ca_st.allocated -= size;
	ca_merge(b, b->prev);
	ca_merge(b, b->next);
	ca_free_add(b);
	ca_report(ptr, -(int64_t)size);
	ca_verify("free");
}

/* release_cached_blocks: no hook call; reserved drops silently. */
static void ca_empty_pool(struct ca_pool *p)
{
	struct ca_block *b, *n, **list;
	size_t cnt = 0, i;

	if (!ca_cfg.expandable) {
		for (b = p->free; b; b = n) {
			n = b->fnext;
			if (b->prev || b->next)
				continue;
			CA_CU(cuMemFree_v2, b->size, (b->ptr));
			ca_st.reserved -= b->size;
			ca_free_del(b);
			ca_block_del(b);
		}
		return;
	}
	/* unmapping changes the free list: take it first */
	for (b = p->free; b; b = b->fnext)
		cnt++;
	list = calloc(cnt ? cnt : 1, sizeof(*list));
	if (!list)
		ca_die("out of memory");
	for (b = p->free, i = 0; b; b = b->fnext)
		list[i++] = b;
	for (i = 0; i < cnt; i++)
		ca_es_unmap(list[i]);
	free(list);
}

uint64_t ca_empty_cache(void)
{
	uint64_t before = ca_st.reserved;

	ca_empty_pool(&ca_large);
	ca_empty_pool(&ca_small);
	ca_verify("empty_cache");
	return before - ca_st.reserved;
}

void ca_init(const struct ca_config *cfg)
{
	ca_cfg = *cfg;
}

const struct ca_stats *ca_stats(void)
{
	return &ca_st;
}
