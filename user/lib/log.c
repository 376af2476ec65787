// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "lib/log.h"
#include "lib/sys.h"

int log_verbose;

struct log_line {
	char *text;
	size_t len;
	enum log_prio prio;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t more;		/* a line queued, or stop asked */
	pthread_cond_t idle;		/* the queue is empty and nothing is being written */
	pthread_t thread;
	struct log_line *q;		/* a ring of cap lines from head */
	unsigned int cap, head, n;
	uint64_t unreported;		/* dropped, not yet said */
	bool async;			/* only the main thread changes it */
	bool started;			/* the writer runs */
	bool writing;
	bool stopping;
	bool atfork_set;
	struct log_stats st;
} lq = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.more = PTHREAD_COND_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER,
};

/* All of it, or an error: a partial write is finished, not cut. */
static int write_all(const char *p, size_t len)
{
	struct pollfd pfd = { .fd = STDERR_FILENO, .events = POLLOUT };
	ssize_t w;

	while (len) {
		w = write(STDERR_FILENO, p, len);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		/* Someone made the shared description non-blocking. */
		if (w < 0 && errno == EAGAIN) {
			poll(&pfd, 1, -1);
			continue;
		}
		return w < 0 ? -errno : -EIO;
	}
	return 0;
}

static struct log_line *slot(unsigned int i)
{
	return &lq.q[(lq.head + i) % lq.cap];
}

/* Remove queued line i (0: the oldest), keeping the others in order. */
static void drop_at(unsigned int i)
{
	struct log_line *victim = slot(i);

	lq.st.dropped++;
	lq.st.dropped_stops += victim->prio == LOG_PRIO_STOP;
	lq.unreported++;
	free(victim->text);
	for (; i + 1 < lq.n; i++)
		*slot(i) = *slot(i + 1);
	lq.n--;
}

/* Called locked. Takes text; frees it if it cannot be queued. */
static void enqueue(char *text, size_t len, enum log_prio prio)
{
	unsigned int i;

	lq.st.queued++;
	if (lq.n == lq.cap) {
		for (i = 0; i < lq.n && slot(i)->prio != LOG_PRIO_INFO; i++)
			;
		if (i == lq.n && prio == LOG_PRIO_INFO) {
			/* Only stop lines are queued: this one goes. */
			lq.st.dropped++;
			lq.unreported++;
			free(text);
			return;
		}
		drop_at(i == lq.n ? 0 : i);
	}
	*slot(lq.n++) = (struct log_line){ .text = text, .len = len, .prio = prio };
	pthread_cond_signal(&lq.more);
}

/*
 * Called locked: the next line to write, or NULL when told to stop;
 * *notice: it is the count of dropped lines, not a queued line.
 */
static char *next_line(size_t *len, bool *notice)
{
	struct log_line l;
	char *text;

	while (!lq.n && !lq.unreported && !lq.stopping)
		pthread_cond_wait(&lq.more, &lq.lock);
	*notice = lq.unreported;
	if (lq.unreported) {
		/* Said before the next line, so it is said where it happened. */
		if (asprintf(&text, "umtrace: %llu log lines dropped: stderr was not "
			     "taking them\n", (unsigned long long)lq.unreported) < 0)
			return NULL;
		lq.unreported = 0;
		*len = strlen(text);
		return text;
	}
	if (!lq.n)
		return NULL;
	l = *slot(0);
	lq.head = (lq.head + 1) % lq.cap;
	lq.n--;
	*len = l.len;
	return l.text;
}

static void *writer(void *arg)
{
	bool notice;
	char *text;
	size_t len;
	int err;

	(void)arg;
	pthread_mutex_lock(&lq.lock);
	while ((text = next_line(&len, &notice))) {
		lq.writing = true;
		pthread_mutex_unlock(&lq.lock);
		err = write_all(text, len);
		free(text);
		pthread_mutex_lock(&lq.lock);
		lq.writing = false;
		if (!err && !notice)
			lq.st.written++;
		if (!lq.n)
			pthread_cond_broadcast(&lq.idle);
	}
	lq.writing = false;
	pthread_cond_broadcast(&lq.idle);
	pthread_mutex_unlock(&lq.lock);
	return NULL;
}

/* A forked child writes its own lines at once: the writer is not its. */
static void child_after_fork(void)
{
	lq.async = false;
}

int log__queue(unsigned int max_lines)
{
	if (lq.async || !max_lines)
		return lq.async ? 0 : -EINVAL;
	lq.q = calloc(max_lines, sizeof(*lq.q));
	if (!lq.q)
		return -ENOMEM;
	lq.cap = max_lines;
	lq.head = lq.n = 0;
	lq.stopping = false;
	if (!lq.atfork_set && !pthread_atfork(NULL, NULL, child_after_fork))
		lq.atfork_set = true;
	fflush(stderr);
	lq.async = true;
	return 0;
}

int log__start_writer(void)
{
	sigset_t all, old;
	int err;

	if (!lq.async)
		return -EINVAL;
	if (lq.started)
		return 0;
	/*
	 * The writer takes no signal: SIGINT and SIGTERM stay the loop's, and
	 * a reader gone makes write() fail with EPIPE instead of killing us.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&lq.thread, NULL, writer, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	lq.started = true;
	return 0;
}

/* Queued lines with no writer to take them: written here, as before. */
static void write_queued(void)
{
	while (lq.n) {
		write_all(slot(0)->text, slot(0)->len);
		free(slot(0)->text);
		lq.head = (lq.head + 1) % lq.cap;
		lq.n--;
	}
}

uint64_t log__stop_async(unsigned int timeout_ms)
{
	struct timespec until;
	uint64_t left;
	bool done;

	if (!lq.async)
		return 0;
	if (!lq.started && log__start_writer()) {
		lq.async = false;
		write_queued();
		free(lq.q);
		lq.q = NULL;
		return 0;
	}
	clock__deadline(&until, timeout_ms);
	pthread_mutex_lock(&lq.lock);
	lq.async = false;	/* lines from now on are written at once */
	lq.stopping = true;
	pthread_cond_signal(&lq.more);
	while (lq.n || lq.writing || lq.unreported)
		if (pthread_cond_timedwait(&lq.idle, &lq.lock, &until) == ETIMEDOUT)
			break;
	left = lq.n + lq.writing;
	done = !left && !lq.unreported;
	pthread_mutex_unlock(&lq.lock);
	/* A writer stuck in write() is left behind: it dies with us. */
	if (done) {
		pthread_join(lq.thread, NULL);
		free(lq.q);
		lq.q = NULL;
	} else {
		pthread_detach(lq.thread);
	}
	lq.started = false;
	return left;
}

void log__vprintf(enum log_prio prio, const char *fmt, va_list ap)
{
	char *text;
	int len;

	if (!lq.async) {
		vfprintf(stderr, fmt, ap);
		return;
	}
	len = vasprintf(&text, fmt, ap);
	pthread_mutex_lock(&lq.lock);
	if (len < 0) {
		lq.st.queued++;
		lq.st.dropped++;
		lq.unreported++;
		pthread_cond_signal(&lq.more);
	} else {
		enqueue(text, (size_t)len, prio);
	}
	pthread_mutex_unlock(&lq.lock);
}

void log__printf(enum log_prio prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log__vprintf(prio, fmt, ap);
	va_end(ap);
}

void log__stats(struct log_stats *st)
{
	pthread_mutex_lock(&lq.lock);
	*st = lq.st;
	pthread_mutex_unlock(&lq.lock);
}

void log__repeat(struct log_repeat *r, uint64_t now_ms, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	r->total++;
	if (r->active && now_ms - r->last_ms < LOG_REPEAT_MS) {
		r->held++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!r->active)
		wlog("%s", line);
	else
		wlog("%s (%llu times in the last %d s)", line,
		     (unsigned long long)r->held + 1, LOG_REPEAT_MS / 1000);
	r->active = true;
	r->last_ms = now_ms;
	r->held = 0;
}

void log__repeat_end(struct log_repeat *r)
{
	if (!r->active)
		return;
	elog("%s: no longer, after %llu times", r->what, (unsigned long long)r->total);
	r->active = false;
	r->held = r->total = 0;
}
