// SPDX-License-Identifier: GPL-2.0
/*
 * fakenv: the shapes of NVIDIA's kernel driver that decide what umtrace
 * can see of host memory, for `make vmtest`'s guests only (never loaded on
 * a host). Read from the open kernel modules (590 and later), written anew:
 *
 * - FAKENV_ALLOC takes the pages in the caller's thread, as
 *   nv_alloc_system_pages() does: GFP_KERNEL | __GFP_RETRY_MAYFAIL, zeroed,
 *   no __GFP_ACCOUNT (not charged to the job's memory cgroup), pages of
 *   the allocation's page size (orders 0, 4 and 9 with 4K pages), on one
 *   node with __GFP_THISNODE when asked (GH200's HBM is a node without
 *   CPUs); a page size that fails is retried smaller, what it took freed
 *   inside the call.
 * - Frees go to per-node, per-order pools (sysmem_page_pools) without a
 *   page given back; a kernel thread whose comm is nv_mem_pool_scr zeroes
 *   them; allocations take pooled pages first, without the page
 *   allocator; only a shrinker gives them back to the kernel.
 * - A kernel thread named "UVM GPU0 BH" services a job's faults: first
 *   with the job's memory cgroup active (set_active_memcg) and no mm, as
 *   UVM's uvm_memcg_context_start() charges the pages it takes for a job;
 *   then with the job's mm adopted too (kthread_use_mm), faulting the
 *   job's pages in as ATS fault servicing populates them.
 * - /proc/driver/nvidia/version exists while it is loaded, as the real
 *   driver's does (nothing under gpus/: the platform stays decided by what
 *   the allocations take).
 *
 * /proc/fakenv gives the module's own counters, in base pages, so the
 * tests compare umtrace's figures with the truth to the page.
 */
#include <linux/completion.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/kthread.h>
#include <linux/memcontrol.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/nodemask.h>
#include <linux/proc_fs.h>
#include <linux/sched/mm.h>
#include <linux/seq_file.h>
#include <linux/shrinker.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/utsname.h>
#include <linux/version.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "fakenv_uapi.h"

static bool pools = true;
module_param(pools, bool, 0644);
MODULE_PARM_DESC(pools, "keep freed pages in the driver's pools, as driver 590 does (default on)");

/* The page sizes the driver allocates in: 4K (the kernel's), 64K, 2M. */
#define FAKENV_NSIZES		3
/* Pools are kept for the guests' nodes; pages of others are freed. */
#define FAKENV_MAX_NODES	4
/* One call's limit: far more than a guest has. */
#define FAKENV_MAX_BYTES	(1ULL << 40)

static unsigned int fakenv_order[FAKENV_NSIZES];

/* The counters of /proc/fakenv, in base pages. */
enum fakenv_stat {
	ST_TAKEN,	/* from the page allocator by allocations, kept */
	ST_RETRIED,	/* taken by a page size that failed, freed in the call */
	ST_HELD,	/* in live allocations */
	ST_FREED,	/* given back to the page allocator by frees */
	ST_POOL_IN,	/* put into the pools by frees */
	ST_POOL_OUT,	/* taken from the pools by allocations */
	ST_POOL,	/* in the pools now */
	ST_POOL_DIRTY,	/* in the pools, not yet zeroed */
	ST_SCRUBBED,	/* zeroed by the scrubber */
	ST_SHRUNK,	/* given back to the page allocator by the shrinker */
	ST_BH_FAULTED,	/* job pages the BH thread faulted in */
	ST_BH_KERNEL,	/* pages the BH thread took for jobs, charged to them */
	ST_COUNT
};

static const char *const fakenv_stat_name[ST_COUNT] = {
	[ST_TAKEN] = "taken", [ST_RETRIED] = "retried", [ST_HELD] = "held",
	[ST_FREED] = "freed", [ST_POOL_IN] = "pool_in",
	[ST_POOL_OUT] = "pool_out", [ST_POOL] = "pool",
	[ST_POOL_DIRTY] = "pool_dirty", [ST_SCRUBBED] = "scrubbed",
	[ST_SHRUNK] = "shrunk", [ST_BH_FAULTED] = "bh_faulted",
	[ST_BH_KERNEL] = "bh_kernel",
};

static atomic_long_t fakenv_stats[ST_COUNT];
static atomic_long_t fakenv_held_node[FAKENV_MAX_NODES];

static void stat_add(enum fakenv_stat s, long pages)
{
	atomic_long_add(pages, &fakenv_stats[s]);
}

/* One allocation: chunks of one order, on one node or anywhere. */
struct fakenv_mem {
	unsigned int size_idx;
	unsigned long nchunks;
	struct page *chunks[];
};

/* An open /dev/fakenv: a job's allocations and what the BH took for it. */
struct fakenv_file {
	struct xarray mems;		/* handle -> struct fakenv_mem */
	spinlock_t lock;		/* bh_pages */
	struct list_head bh_pages;
};

/* ---- the pools ---- */

/* Chunks linked by the head page's lru: the driver owns the pages. */
struct fakenv_pool {
	spinlock_t lock;
	struct list_head clean;
	struct list_head dirty;
};

static struct fakenv_pool fakenv_pools[FAKENV_MAX_NODES][FAKENV_NSIZES];
static DECLARE_WAIT_QUEUE_HEAD(fakenv_scrub_wq);
static struct task_struct *fakenv_scrubber;

static void fakenv_zero(struct page *page, unsigned int order)
{
	unsigned long i;

	for (i = 0; i < (1UL << order); i++) {
		clear_highpage(page + i);
		cond_resched();
	}
}

static void fakenv_pool_put(struct page *page, unsigned int size_idx)
{
	struct fakenv_pool *p = &fakenv_pools[page_to_nid(page)][size_idx];
	long n = 1L << fakenv_order[size_idx];

	spin_lock(&p->lock);
	list_add(&page->lru, &p->dirty);
	spin_unlock(&p->lock);
	stat_add(ST_POOL_IN, n);
	stat_add(ST_POOL, n);
	stat_add(ST_POOL_DIRTY, n);
	wake_up(&fakenv_scrub_wq);
}

/*
 * A chunk off @p, clean ones first; *dirty says it is not zeroed. The
 * counters are the caller's to move.
 */
static struct page *fakenv_pool_pop(struct fakenv_pool *p, bool clean_only,
				    bool *dirty)
{
	struct page *page = NULL;

	spin_lock(&p->lock);
	*dirty = false;
	if (!clean_only && list_empty(&p->clean) && !list_empty(&p->dirty)) {
		page = list_first_entry(&p->dirty, struct page, lru);
		*dirty = true;
	} else if (!clean_only || !list_empty(&p->clean)) {
		page = list_first_entry_or_null(&p->clean, struct page, lru);
	}
	if (page)
		list_del(&page->lru);
	spin_unlock(&p->lock);
	return page;
}

/*
 * An allocation's chunk from the pools: the node's, or, for one on no
 * node, any node's with CPUs (a memory-only node's pages are the GPU's).
 */
static struct page *fakenv_pool_take(int node, unsigned int size_idx)
{
	unsigned int order = fakenv_order[size_idx];
	struct page *page = NULL;
	bool dirty;
	int nid;

	for (nid = 0; nid < FAKENV_MAX_NODES && !page; nid++) {
		if (node != NUMA_NO_NODE ? nid != node :
		    nid >= nr_node_ids || !node_state(nid, N_CPU))
			continue;
		page = fakenv_pool_pop(&fakenv_pools[nid][size_idx], false,
				       &dirty);
	}
	if (!page)
		return NULL;
	/* the scrubber has not reached it: zero it here, as the caller */
	if (dirty) {
		fakenv_zero(page, order);
		stat_add(ST_POOL_DIRTY, -(1L << order));
	}
	stat_add(ST_POOL, -(1L << order));
	stat_add(ST_POOL_OUT, 1L << order);
	return page;
}

static bool fakenv_dirty_listed(void)
{
	int nid, s;

	for (nid = 0; nid < FAKENV_MAX_NODES; nid++)
		for (s = 0; s < FAKENV_NSIZES; s++)
			if (!list_empty(&fakenv_pools[nid][s].dirty))
				return true;
	return false;
}

/* nv_mem_pool_scrubber_queue's work: zero what frees put in the pools. */
static int fakenv_scrub(void *unused)
{
	while (!kthread_should_stop()) {
		bool found = false;
		int nid, s;

		for (nid = 0; nid < FAKENV_MAX_NODES; nid++) {
			for (s = 0; s < FAKENV_NSIZES; s++) {
				struct fakenv_pool *p = &fakenv_pools[nid][s];
				long n = 1L << fakenv_order[s];
				struct page *page = NULL;

				spin_lock(&p->lock);
				page = list_first_entry_or_null(&p->dirty,
								struct page, lru);
				if (page)
					list_del(&page->lru);
				spin_unlock(&p->lock);
				if (!page)
					continue;
				found = true;
				fakenv_zero(page, fakenv_order[s]);
				spin_lock(&p->lock);
				list_add_tail(&page->lru, &p->clean);
				spin_unlock(&p->lock);
				stat_add(ST_POOL_DIRTY, -n);
				stat_add(ST_SCRUBBED, n);
			}
		}
		if (!found)
			wait_event_interruptible(fakenv_scrub_wq,
						 fakenv_dirty_listed() ||
						 kthread_should_stop());
	}
	return 0;
}

/*
 * The shrinker gives pooled pages back, clean ones first: the pool's only
 * way back to the kernel (kswapd, direct reclaim, drop_caches).
 */
static unsigned long fakenv_shrink_count(struct shrinker *s,
					 struct shrink_control *sc)
{
	long n = atomic_long_read(&fakenv_stats[ST_POOL]);

	return n > 0 ? n : SHRINK_EMPTY;
}

static unsigned long fakenv_shrink_scan(struct shrinker *s,
					struct shrink_control *sc)
{
	unsigned long freed = 0;
	int pass, nid, sz;

	for (pass = 0; pass < 2; pass++) {
		for (nid = 0; nid < FAKENV_MAX_NODES; nid++) {
			for (sz = 0; sz < FAKENV_NSIZES; sz++) {
				unsigned int order = fakenv_order[sz];
				struct page *page;
				bool dirty;

				while (freed < sc->nr_to_scan) {
					page = fakenv_pool_pop(&fakenv_pools[nid][sz],
							       pass == 0, &dirty);
					if (!page)
						break;
					if (dirty)
						stat_add(ST_POOL_DIRTY, -(1L << order));
					stat_add(ST_POOL, -(1L << order));
					stat_add(ST_SHRUNK, 1L << order);
					__free_pages(page, order);
					freed += 1UL << order;
				}
			}
		}
	}
	return freed ? freed : SHRINK_STOP;
}

/* The shrinker API changed in 6.7: one variant per side of it. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
static struct shrinker *fakenv_shrinker;

static int fakenv_shrinker_add(void)
{
	fakenv_shrinker = shrinker_alloc(0, "nv-sysmem-alloc-fakenv");
	if (!fakenv_shrinker)
		return -ENOMEM;
	fakenv_shrinker->count_objects = fakenv_shrink_count;
	fakenv_shrinker->scan_objects = fakenv_shrink_scan;
	shrinker_register(fakenv_shrinker);
	return 0;
}

static void fakenv_shrinker_del(void)
{
	shrinker_free(fakenv_shrinker);
}
#else
static struct shrinker fakenv_shrinker = {
	.count_objects = fakenv_shrink_count,
	.scan_objects = fakenv_shrink_scan,
	.seeks = DEFAULT_SEEKS,
};

static int fakenv_shrinker_add(void)
{
	return register_shrinker(&fakenv_shrinker, "nv-sysmem-alloc-fakenv");
}

static void fakenv_shrinker_del(void)
{
	unregister_shrinker(&fakenv_shrinker);
}
#endif

/* ---- allocations ---- */

static struct page *fakenv_page_new(int node, unsigned int order)
{
	gfp_t gfp = GFP_KERNEL | __GFP_RETRY_MAYFAIL | __GFP_ZERO | __GFP_NOWARN;

	if (node == NUMA_NO_NODE)
		return alloc_pages(gfp, order);
	return alloc_pages_node(node, gfp | __GFP_THISNODE, order);
}

/* A chunk leaves an allocation: to the pools, or back to the kernel. */
static void fakenv_chunk_drop(struct page *page, unsigned int size_idx)
{
	unsigned int order = fakenv_order[size_idx];
	int nid = page_to_nid(page);

	stat_add(ST_HELD, -(1L << order));
	if (nid < FAKENV_MAX_NODES)
		atomic_long_sub(1L << order, &fakenv_held_node[nid]);
	if (READ_ONCE(pools) && nid < FAKENV_MAX_NODES) {
		fakenv_pool_put(page, size_idx);
		return;
	}
	stat_add(ST_FREED, 1L << order);
	__free_pages(page, order);
}

static void fakenv_mem_free(struct fakenv_mem *m)
{
	unsigned long i;

	for (i = 0; i < m->nchunks; i++)
		fakenv_chunk_drop(m->chunks[i], m->size_idx);
	kvfree(m);
}

/*
 * @a's pages at one page size. With @fail, the try stops half way as if
 * the page allocator had said no: what it took goes back to the kernel
 * at once, inside the call, and -ENOMEM asks for the next size down.
 */
static struct fakenv_mem *fakenv_try_size(struct fakenv_alloc *a,
					  unsigned int size_idx, bool fail)
{
	unsigned int order = fakenv_order[size_idx];
	unsigned long chunk = PAGE_SIZE << order;
	unsigned long n = DIV_ROUND_UP(a->size, chunk), stop, i;
	struct fakenv_mem *m;

	m = kvzalloc(struct_size(m, chunks, n), GFP_KERNEL);
	if (!m)
		return ERR_PTR(-ENOMEM);
	m->size_idx = size_idx;
	stop = fail ? max(1UL, n / 2) : n;
	for (i = 0; i < stop; i++) {
		struct page *page = NULL;

		if (READ_ONCE(pools))
			page = fakenv_pool_take(a->node, size_idx);
		if (page) {
			a->pages_pooled += 1UL << order;
		} else {
			page = fakenv_page_new(a->node, order);
			if (!page)
				break;
			a->pages_new += 1UL << order;
		}
		m->chunks[i] = page;
	}
	if (!fail && i == n) {
		m->nchunks = n;
		return m;
	}
	/* the retry's pages, new or pooled, go back to the kernel */
	while (i-- > 0) {
		__free_pages(m->chunks[i], order);
		a->pages_retried += 1UL << order;
	}
	a->pages_new = 0;
	a->pages_pooled = 0;
	kvfree(m);
	return ERR_PTR(-ENOMEM);
}

static int fakenv_alloc(struct fakenv_file *f, struct fakenv_alloc *a)
{
	struct fakenv_mem *m;
	unsigned int size_idx;
	unsigned long i;
	u32 id;
	int err;

	if (!a->size || a->size > FAKENV_MAX_BYTES ||
	    (a->flags & ~FAKENV_F_FAIL_ONCE))
		return -EINVAL;
	if (a->node != NUMA_NO_NODE &&
	    (a->node < 0 || a->node >= nr_node_ids ||
	     !node_state(a->node, N_MEMORY)))
		return -EINVAL;
	/* the page size: the largest of the driver's that divides the size */
	size_idx = !(a->size % SZ_2M) ? 2 : !(a->size % SZ_64K) ? 1 : 0;
	a->pages_new = a->pages_pooled = a->pages_retried = 0;
	for (;;) {
		m = fakenv_try_size(a, size_idx,
				    (a->flags & FAKENV_F_FAIL_ONCE) &&
				    !a->pages_retried && size_idx > 0);
		if (!IS_ERR(m) || size_idx == 0)
			break;
		size_idx--;
	}
	if (IS_ERR(m)) {
		stat_add(ST_RETRIED, a->pages_retried);
		return PTR_ERR(m);
	}
	err = xa_alloc(&f->mems, &id, m, xa_limit_31b, GFP_KERNEL);
	if (err) {
		a->pages_retried += a->pages_new + a->pages_pooled;
		for (i = 0; i < m->nchunks; i++)
			__free_pages(m->chunks[i], fakenv_order[size_idx]);
		kvfree(m);
		stat_add(ST_RETRIED, a->pages_retried);
		return err;
	}
	for (i = 0; i < m->nchunks; i++) {
		int nid = page_to_nid(m->chunks[i]);

		if (nid < FAKENV_MAX_NODES)
			atomic_long_add(1L << fakenv_order[size_idx],
					&fakenv_held_node[nid]);
	}
	stat_add(ST_TAKEN, a->pages_new);
	stat_add(ST_RETRIED, a->pages_retried);
	stat_add(ST_HELD, a->pages_new + a->pages_pooled);
	a->handle = id;
	a->order = fakenv_order[size_idx];
	return 0;
}

static int fakenv_free(struct fakenv_file *f, unsigned long long handle)
{
	struct fakenv_mem *m;

	if (handle > U32_MAX)
		return -EINVAL;
	m = xa_erase(&f->mems, handle);
	if (!m)
		return -ENOENT;
	fakenv_mem_free(m);
	return 0;
}

/* ---- the bottom half ---- */

struct fakenv_bh_job {
	struct list_head node;
	struct fakenv_file *f;
	struct mm_struct *mm;
	struct mem_cgroup *memcg;
	struct fakenv_bh_fault *req;
	int err;
	struct completion done;
};

static LIST_HEAD(fakenv_bh_queue);
static DEFINE_SPINLOCK(fakenv_bh_lock);
static DECLARE_WAIT_QUEUE_HEAD(fakenv_bh_wq);
static struct task_struct *fakenv_bh;

/*
 * In the BH thread: the job's memory cgroup is ours meanwhile, and its mm
 * while the job's pages are faulted in. The kernel pages are taken before
 * the mm is adopted, so that the cgroup alone says whom they are for.
 */
static void fakenv_bh_service(struct fakenv_bh_job *j)
{
	struct fakenv_bh_fault *r = j->req;
	struct mem_cgroup *old;
	unsigned long i;

	old = set_active_memcg(j->memcg);
	for (i = 0; i < r->kernel_pages; i++) {
		struct page *page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);

		if (!page) {
			j->err = -ENOMEM;
			break;
		}
		spin_lock(&j->f->lock);
		list_add(&page->lru, &j->f->bh_pages);
		spin_unlock(&j->f->lock);
		stat_add(ST_BH_KERNEL, 1);
	}
	kthread_use_mm(j->mm);
	for (i = 0; !j->err && i < r->len; i += PAGE_SIZE) {
		/* a write through the adopted mm faults the page in */
		if (put_user((u8)0, (u8 __user *)(uintptr_t)(r->addr + i))) {
			j->err = -EFAULT;
			break;
		}
		r->pages_faulted++;
		stat_add(ST_BH_FAULTED, 1);
	}
	kthread_unuse_mm(j->mm);
	set_active_memcg(old);
}

static int fakenv_bh_run(void *unused)
{
	while (!kthread_should_stop()) {
		struct fakenv_bh_job *j;

		spin_lock(&fakenv_bh_lock);
		j = list_first_entry_or_null(&fakenv_bh_queue,
					     struct fakenv_bh_job, node);
		if (j)
			list_del(&j->node);
		spin_unlock(&fakenv_bh_lock);
		if (!j) {
			wait_event_interruptible(fakenv_bh_wq,
						 !list_empty(&fakenv_bh_queue) ||
						 kthread_should_stop());
			continue;
		}
		fakenv_bh_service(j);
		complete(&j->done);
	}
	return 0;
}

/* The caller waits for its fault to be serviced, as a GPU would. */
static int fakenv_bh_fault(struct fakenv_file *f, struct fakenv_bh_fault *r)
{
	struct fakenv_bh_job j = { .f = f, .req = r };

	if (!current->mm || !r->len || r->len > FAKENV_MAX_BYTES ||
	    r->kernel_pages > (FAKENV_MAX_BYTES >> PAGE_SHIFT) ||
	    !access_ok((void __user *)(uintptr_t)r->addr, r->len))
		return -EINVAL;
	r->pages_faulted = 0;
	init_completion(&j.done);
	mmget(current->mm);
	j.mm = current->mm;
	j.memcg = get_mem_cgroup_from_mm(current->mm);
	spin_lock(&fakenv_bh_lock);
	list_add_tail(&j.node, &fakenv_bh_queue);
	spin_unlock(&fakenv_bh_lock);
	wake_up(&fakenv_bh_wq);
	wait_for_completion(&j.done);
	mem_cgroup_put(j.memcg);
	mmput(j.mm);
	return j.err;
}

/* ---- the device ---- */

static int fakenv_open(struct inode *inode, struct file *file)
{
	struct fakenv_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	xa_init_flags(&f->mems, XA_FLAGS_ALLOC1);
	spin_lock_init(&f->lock);
	INIT_LIST_HEAD(&f->bh_pages);
	file->private_data = f;
	return 0;
}

/* A job's last close frees what it left, into the pools: the driver keeps it. */
static int fakenv_release(struct inode *inode, struct file *file)
{
	struct fakenv_file *f = file->private_data;
	struct fakenv_mem *m;
	struct page *page, *tmp;
	unsigned long id;

	xa_for_each(&f->mems, id, m)
		fakenv_mem_free(m);
	xa_destroy(&f->mems);
	list_for_each_entry_safe(page, tmp, &f->bh_pages, lru) {
		list_del(&page->lru);
		__free_page(page);
	}
	kfree(f);
	return 0;
}

static long fakenv_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct fakenv_file *f = file->private_data;
	void __user *uarg = (void __user *)arg;
	struct fakenv_bh_fault bh;
	struct fakenv_alloc a;
	unsigned long long h;
	int err;

	switch (cmd) {
	case FAKENV_ALLOC:
		if (copy_from_user(&a, uarg, sizeof(a)))
			return -EFAULT;
		err = fakenv_alloc(f, &a);
		if (copy_to_user(uarg, &a, sizeof(a)) && !err) {
			fakenv_free(f, a.handle);
			return -EFAULT;
		}
		return err;
	case FAKENV_FREE:
		if (copy_from_user(&h, uarg, sizeof(h)))
			return -EFAULT;
		return fakenv_free(f, h);
	case FAKENV_BH_FAULT:
		if (copy_from_user(&bh, uarg, sizeof(bh)))
			return -EFAULT;
		err = fakenv_bh_fault(f, &bh);
		if (copy_to_user(uarg, &bh, sizeof(bh)))
			return -EFAULT;
		return err;
	}
	return -ENOTTY;
}

static const struct file_operations fakenv_fops = {
	.owner = THIS_MODULE,
	.open = fakenv_open,
	.release = fakenv_release,
	.unlocked_ioctl = fakenv_ioctl,
};

static struct miscdevice fakenv_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "fakenv",
	.fops = &fakenv_fops,
	.mode = 0666,
};

static int fakenv_proc_show(struct seq_file *m, void *v)
{
	int i;

	seq_printf(m, "page_size %lu\n", PAGE_SIZE);
	for (i = 0; i < FAKENV_NSIZES; i++)
		seq_printf(m, "order%d %u\n", i, fakenv_order[i]);
	seq_printf(m, "pools %d\n", READ_ONCE(pools));
	for (i = 0; i < ST_COUNT; i++)
		seq_printf(m, "%s %ld\n", fakenv_stat_name[i],
			   atomic_long_read(&fakenv_stats[i]));
	for (i = 0; i < FAKENV_MAX_NODES && i < nr_node_ids; i++)
		seq_printf(m, "held_node%d %ld\n", i,
			   atomic_long_read(&fakenv_held_node[i]));
	return 0;
}

/* As the real driver's first line says it, with this module's name. */
static int fakenv_version_show(struct seq_file *m, void *v)
{
	seq_printf(m, "NVRM version: NVIDIA UNIX Open Kernel Module for %s  590.44.01  "
		   "fakenv (umtrace's test driver)\n", utsname()->machine);
	return 0;
}

/*
 * /proc/driver/nvidia: umtrace takes its presence for a loaded driver
 * (--device-nodes auto). Only the version file: a gpus/ directory would
 * make umtrace decide the platform from the GPUs listed there.
 */
static int fakenv_nvidia_proc_add(void)
{
	struct proc_dir_entry *dir = proc_mkdir("driver/nvidia", NULL);

	if (!dir)
		return -ENOMEM;
	if (!proc_create_single("version", 0444, dir, fakenv_version_show)) {
		proc_remove(dir);
		return -ENOMEM;
	}
	return 0;
}

/* ---- the module ---- */

static void fakenv_pools_empty(void)
{
	int nid, s;

	for (nid = 0; nid < FAKENV_MAX_NODES; nid++) {
		for (s = 0; s < FAKENV_NSIZES; s++) {
			struct page *page;
			bool dirty;

			while ((page = fakenv_pool_pop(&fakenv_pools[nid][s],
						       false, &dirty)))
				__free_pages(page, fakenv_order[s]);
		}
	}
}

static int __init fakenv_init(void)
{
	int nid, s, err;

	fakenv_order[0] = 0;
	fakenv_order[1] = get_order(SZ_64K);
	fakenv_order[2] = get_order(SZ_2M);
	for (nid = 0; nid < FAKENV_MAX_NODES; nid++) {
		for (s = 0; s < FAKENV_NSIZES; s++) {
			spin_lock_init(&fakenv_pools[nid][s].lock);
			INIT_LIST_HEAD(&fakenv_pools[nid][s].clean);
			INIT_LIST_HEAD(&fakenv_pools[nid][s].dirty);
		}
	}
	/* comms cut to 15 characters: nv_mem_pool_scr, as the driver's */
	fakenv_scrubber = kthread_run(fakenv_scrub, NULL, "nv_mem_pool_scrubber");
	if (IS_ERR(fakenv_scrubber))
		return PTR_ERR(fakenv_scrubber);
	fakenv_bh = kthread_run(fakenv_bh_run, NULL, "UVM GPU0 BH");
	if (IS_ERR(fakenv_bh)) {
		err = PTR_ERR(fakenv_bh);
		goto err_scrubber;
	}
	err = fakenv_shrinker_add();
	if (err)
		goto err_bh;
	if (!proc_create_single("fakenv", 0444, NULL, fakenv_proc_show)) {
		err = -ENOMEM;
		goto err_shrinker;
	}
	err = fakenv_nvidia_proc_add();
	if (err)
		goto err_proc;
	err = misc_register(&fakenv_misc);
	if (err)
		goto err_nvidia;
	return 0;

err_nvidia:
	remove_proc_subtree("driver/nvidia", NULL);
err_proc:
	remove_proc_entry("fakenv", NULL);
err_shrinker:
	fakenv_shrinker_del();
err_bh:
	kthread_stop(fakenv_bh);
err_scrubber:
	kthread_stop(fakenv_scrubber);
	return err;
}

static void __exit fakenv_exit(void)
{
	misc_deregister(&fakenv_misc);
	remove_proc_subtree("driver/nvidia", NULL);
	remove_proc_entry("fakenv", NULL);
	fakenv_shrinker_del();
	kthread_stop(fakenv_bh);
	kthread_stop(fakenv_scrubber);
	fakenv_pools_empty();
}

module_init(fakenv_init);
module_exit(fakenv_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("umtrace's fake NVIDIA driver: its page pool, kernel threads and node allocations, for test guests");
