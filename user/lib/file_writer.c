// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include "lib/file_writer.h"
#include "lib/out_file.h"
#include "lib/sys.h"

struct fw_file {
	char *path;		/* NULL: a free slot */
	char *buf;		/* waiting content, NULL: none */
	size_t len;
	mode_t mode;
	bool mkdir;
	int result;		/* of the last write that ended; 1: none yet */
};

struct file_writer {
	pthread_mutex_t lock;
	pthread_cond_t more;	/* content waits, or stop asked */
	pthread_cond_t idle;	/* nothing waits and nothing is being written */
	pthread_t thread;
	struct fw_file files[FILE_WRITER_MAX];
	bool writing;
	bool stopping;
	struct file_writer_stats st;
};

/* Called locked: a slot with content waiting, or NULL. */
static struct fw_file *waiting(struct file_writer *w)
{
	int i;

	for (i = 0; i < FILE_WRITER_MAX; i++)
		if (w->files[i].buf)
			return &w->files[i];
	return NULL;
}

static bool anything_waits(struct file_writer *w)
{
	return waiting(w) != NULL;
}

static void *writer(void *arg)
{
	struct file_writer *w = arg;
	struct fw_file *f;
	char *buf, *path;
	size_t len;
	mode_t mode;
	bool mk;
	int err;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!(f = waiting(w)) && !w->stopping)
			pthread_cond_wait(&w->more, &w->lock);
		if (!f)
			break;
		buf = f->buf;
		len = f->len;
		mode = f->mode;
		mk = f->mkdir;
		f->buf = NULL;
		/* The path stays: slots are only freed with the writer. */
		path = f->path;
		w->writing = true;
		pthread_mutex_unlock(&w->lock);
		err = mk ? file__make_parent(path) : 0;
		if (!err)
			err = out_file__replace(path, buf, len, mode);
		free(buf);
		pthread_mutex_lock(&w->lock);
		w->writing = false;
		f->result = err;
		if (err)
			w->st.failed++;
		else
			w->st.written++;
		if (!anything_waits(w))
			pthread_cond_broadcast(&w->idle);
	}
	pthread_cond_broadcast(&w->idle);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

struct file_writer *file_writer__new(void)
{
	struct file_writer *w = calloc(1, sizeof(*w));
	sigset_t all, old;
	int err;

	if (!w)
		return NULL;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->more, NULL);
	pthread_cond_init(&w->idle, NULL);
	/* Signals stay the loop's. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&w->thread, NULL, writer, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		free(w);
		errno = err;
		return NULL;
	}
	return w;
}

/* Called locked: path's slot, a new one when absent, NULL when full. */
static struct fw_file *slot_for(struct file_writer *w, const char *path)
{
	struct fw_file *free_slot = NULL;
	int i;

	for (i = 0; i < FILE_WRITER_MAX; i++) {
		struct fw_file *f = &w->files[i];

		if (f->path && !strcmp(f->path, path))
			return f;
		if (!f->path && !free_slot)
			free_slot = f;
	}
	if (!free_slot)
		return NULL;
	free_slot->path = strdup(path);
	if (!free_slot->path)
		return NULL;
	free_slot->result = 1;
	return free_slot;
}

int file_writer__put(struct file_writer *w, const char *path, char *buf, size_t len,
		     mode_t mode, bool mkdir)
{
	struct fw_file *f;

	pthread_mutex_lock(&w->lock);
	f = slot_for(w, path);
	if (!f) {
		pthread_mutex_unlock(&w->lock);
		free(buf);
		return -ENOSPC;
	}
	w->st.puts++;
	if (f->buf) {
		free(f->buf);
		w->st.replaced++;
	}
	f->buf = buf;
	f->len = len;
	f->mode = mode;
	f->mkdir = mkdir;
	pthread_cond_signal(&w->more);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

int file_writer__result(struct file_writer *w, const char *path)
{
	int i, r = 1;

	pthread_mutex_lock(&w->lock);
	for (i = 0; i < FILE_WRITER_MAX; i++)
		if (w->files[i].path && !strcmp(w->files[i].path, path))
			r = w->files[i].result;
	pthread_mutex_unlock(&w->lock);
	return r;
}

void file_writer__stats(struct file_writer *w, struct file_writer_stats *st)
{
	pthread_mutex_lock(&w->lock);
	*st = w->st;
	pthread_mutex_unlock(&w->lock);
}

unsigned int file_writer__free(struct file_writer *w, unsigned int timeout_ms)
{
	struct timespec until;
	unsigned int left = 0;
	int i;

	if (!w)
		return 0;
	clock__deadline(&until, timeout_ms);
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_signal(&w->more);
	while (anything_waits(w) || w->writing)
		if (pthread_cond_timedwait(&w->idle, &w->lock, &until) == ETIMEDOUT)
			break;
	for (i = 0; i < FILE_WRITER_MAX; i++)
		left += w->files[i].buf != NULL;
	left += w->writing;
	pthread_mutex_unlock(&w->lock);
	if (left) {
		/* Stuck in the kernel on a dead disk: it dies with the process. */
		pthread_detach(w->thread);
		return left;
	}
	pthread_join(w->thread, NULL);
	for (i = 0; i < FILE_WRITER_MAX; i++)
		free(w->files[i].path);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->more);
	pthread_cond_destroy(&w->idle);
	free(w);
	return 0;
}
