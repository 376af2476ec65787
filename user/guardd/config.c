// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "lib/parse.h"
#include "guardd/config.h"
#include "umtrace.h"
#include "lib/units.h"

#define MSG_LEN 256

enum key {
	K_FLOOR,
	K_LOW,
	K_DROP,
	K_METRIC,
	K_ACTION,
	K_SCOPE,
	K_PROTECT,
	K_DRY_RUN,
	K_TORCH,
	K_AUTO_RESUME,
	K_ON_STOP,
	K_POSTMORTEM_DIR,
	K_METRICS_FILE,
	K_LIBCUDA,
	K_PAGE_PROGRAMS,
	K_WARN_ETA,
	K_ON_WARN,
	K_WARN_SIGNAL,
	K__COUNT,
};

static const struct {
	const char *name;
	bool repeat;		/* a list: each line adds to it */
	const char *choices;	/* a word of these (set_choice()), for the message */
} keys[K__COUNT] = {
	[K_FLOOR] = { "floor" },
	[K_LOW] = { "low" },
	[K_DROP] = { "drop" },
	[K_METRIC] = { "metric", .choices = "available or free" },
	[K_ACTION] = { "action", .choices = "stop or freeze" },
	[K_SCOPE] = { "scope" },
	[K_PROTECT] = { "protect", true },
	[K_DRY_RUN] = { "dry_run", .choices = "true or false" },
	[K_TORCH] = { "torch", .choices = "true or false" },
	[K_AUTO_RESUME] = { "auto_resume" },
	[K_ON_STOP] = { "on_stop" },
	[K_POSTMORTEM_DIR] = { "postmortem_dir" },
	[K_METRICS_FILE] = { "metrics_file" },
	[K_LIBCUDA] = { "libcuda", true },
	[K_PAGE_PROGRAMS] = { "page_programs", .choices = "auto or always" },
	[K_WARN_ETA] = { "warn_eta" },
	[K_ON_WARN] = { "on_warn" },
	[K_WARN_SIGNAL] = { "warn_signal", .choices = "USR1, USR2, HUP, INT, TERM or off" },
};

/*
 * What a trainer catches to checkpoint (PyTorch Lightning: USR1), or
 * stops on. Each ends a job that does not catch it: the operator's choice.
 */
static const struct {
	const char *name;
	int sig;
} warn_signals[] = {
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "HUP", SIGHUP }, { "INT", SIGINT },
	{ "TERM", SIGTERM },
};

static int parse_signal(const char *v, int *sig)
{
	size_t i;

	if (!strcasecmp(v, "off")) {
		*sig = 0;
		return 0;
	}
	if (!strncasecmp(v, "SIG", 3))
		v += 3;
	for (i = 0; i < sizeof(warn_signals) / sizeof(warn_signals[0]); i++) {
		if (!strcasecmp(v, warn_signals[i].name)) {
			*sig = warn_signals[i].sig;
			return 0;
		}
	}
	return -EINVAL;
}

const char *guard_config__signal_name(int sig)
{
	size_t i;

	for (i = 0; i < sizeof(warn_signals) / sizeof(warn_signals[0]); i++)
		if (warn_signals[i].sig == sig)
			return warn_signals[i].name;
	return "-";
}

/* "30m", "2h"...: how long before its floor a job is warned; "off": never. */
static int set_eta(uint64_t *ms, const char *v, const char *name, char *err, size_t errlen)
{
	uint64_t t;

	if (!strcasecmp(v, "off")) {
		*ms = 0;
		return 0;
	}
	if (parse_duration_ms(v, &t) || t < 1000 || t > 7 * 24 * 3600000ULL) {
		errbuf__set(err, errlen, "invalid %s '%s': expected a duration of 1s to 7 days "
			    "(90s, 30m, 2h) or off", name, v);
		return -EINVAL;
	}
	*ms = t;
	return 0;
}


/* --- one key = value --- */

static int set_string(char **slot, const char *v, const char *name, char *err, size_t errlen)
{
	char *s = strdup(v);

	if (!s) {
		errbuf__set(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	free(*slot);
	*slot = s;
	return 0;
}

/*
 * Only the syntax here: a percentage needs MemTotal, which is resolved
 * later, so any total serves.
 */
static int set_threshold(char **slot, const char *v, const char *name, char *err,
			 size_t errlen)
{
	uint64_t bytes;

	if (guard_policy__parse_threshold(name, v, GUARD_SCALE_TOTAL, &bytes, err, errlen))
		return -EINVAL;
	return set_string(slot, v, name, err, errlen);
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(v, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(v, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * A file read by a daemon whose working directory is "/" should not
 * depend on it: paths in the file are absolute. The command line may be
 * relative to where it was typed.
 */
static int check_path(const char *v, bool cli, const char *name, char *err, size_t errlen)
{
	if (!cli && v[0] != '/') {
		errbuf__set(err, errlen, "invalid %s '%s': expected an absolute path", name, v);
		return -EINVAL;
	}
	return 0;
}

static int set_path(char **slot, const char *v, bool cli, const char *name, char *err,
		    size_t errlen)
{
	if (check_path(v, cli, name, err, errlen))
		return -EINVAL;
	return set_string(slot, v, name, err, errlen);
}

static int add_libcuda(struct guard_config *cfg, const char *v, bool cli, const char *name,
		       char *err, size_t errlen)
{
	char **list;
	size_t i;

	if (check_path(v, cli, name, err, errlen))
		return -EINVAL;
	if (cli && !cfg->cli_libcuda) {
		for (i = 0; i < cfg->n_libcuda; i++)
			free(cfg->libcuda[i]);
		cfg->n_libcuda = 0;
		cfg->cli_libcuda = true;
	}
	list = realloc(cfg->libcuda, (cfg->n_libcuda + 1) * sizeof(*list));
	if (!list)
		goto nomem;
	cfg->libcuda = list;
	list[cfg->n_libcuda] = strdup(v);
	if (!list[cfg->n_libcuda])
		goto nomem;
	cfg->n_libcuda++;
	return 0;
nomem:
	errbuf__set(err, errlen, "%s: out of memory", name);
	return -ENOMEM;
}

/* Where a threshold key's value is kept, as written. */
static char **threshold_of(struct guard_config *cfg, enum key k)
{
	if (k == K_FLOOR)
		return &cfg->floor;
	if (k == K_LOW)
		return &cfg->low;
	return k == K_DROP ? &cfg->drop : &cfg->auto_resume;
}

/* A key whose value is one of a few words: 0, -EINVAL for another word, 1 for another key. */
static int set_choice(struct guard_config *cfg, enum key k, const char *v)
{
	switch (k) {
	case K_METRIC:
		return guard_metric__parse(v, &cfg->metric) ? -EINVAL : 0;
	case K_ACTION:
		return guard_act__parse(v, &cfg->action) ? -EINVAL : 0;
	case K_TORCH:
		return parse_bool(v, &cfg->torch);
	case K_DRY_RUN:
		return parse_bool(v, &cfg->dry_run);
	case K_PAGE_PROGRAMS:
		if (strcmp(v, "auto") && strcmp(v, "always"))
			return -EINVAL;
		cfg->pages_always = !strcmp(v, "always");
		return 0;
	case K_WARN_SIGNAL:
		return parse_signal(v, &cfg->warn_signal);
	default:
		return 1;
	}
}

static int apply(struct guard_config *cfg, enum key k, const char *v, bool cli, char *err,
		 size_t errlen)
{
	char name[32];
	size_t i, len;
	int ret;

	/* "floor" in the file, "--floor" on the command line. */
	snprintf(name, sizeof(name), "%s%s", cli ? "--" : "", keys[k].name);
	for (i = 0; cli && name[i]; i++)
		if (name[i] == '_')
			name[i] = '-';
	if (!*v) {
		errbuf__set(err, errlen, "invalid %s: empty value", name);
		return -EINVAL;
	}
	ret = set_choice(cfg, k, v);
	if (ret < 0)
		errbuf__set(err, errlen, "invalid %s '%s': expected %s", name, v, keys[k].choices);
	if (ret <= 0)
		return ret;
	switch (k) {
	case K_AUTO_RESUME:
		if (!strcmp(v, "off")) {
			free(cfg->auto_resume);
			cfg->auto_resume = NULL;
			return 0;
		}
		/* fall through */
	case K_FLOOR:
	case K_LOW:
	case K_DROP:
		return set_threshold(threshold_of(cfg, k), v, name, err, errlen);
	case K_SCOPE:
		return guard_scope__parse(&cfg->scope, v, name, err, errlen);
	case K_PROTECT:
		return protect__add(&cfg->protect, v, name, err, errlen);
	case K_ON_STOP:
		return set_string(&cfg->on_stop, v, name, err, errlen);
	case K_ON_WARN:
		return set_string(&cfg->on_warn, v, name, err, errlen);
	case K_WARN_ETA:
		return set_eta(&cfg->warn_eta_ms, v, name, err, errlen);
	case K_POSTMORTEM_DIR:
		return set_path(&cfg->postmortem_dir, v, cli, name, err, errlen);
	case K_METRICS_FILE:
		/* node_exporter's textfile collector skips every other name. */
		len = strlen(v);
		if (len < 6 || strcmp(v + len - 5, ".prom") || v[len - 6] == '/') {
			errbuf__set(err, errlen, "invalid %s '%s': node_exporter reads only files named *.prom",
				name, v);
			return -EINVAL;
		}
		return set_path(&cfg->metrics_file, v, cli, name, err, errlen);
	case K_LIBCUDA:
		return add_libcuda(cfg, v, cli, name, err, errlen);
	default:
		break;
	}
	return -EINVAL;
}

static int find_key(const char *name)
{
	int k;

	for (k = 0; k < K__COUNT; k++)
		if (!strcmp(name, keys[k].name))
			return k;
	return -1;
}

/* "Dry-Run" for dry_run: the key meant, if any. */
static int near_key(const char *name)
{
	char buf[32];
	size_t i;

	for (i = 0; name[i] && i < sizeof(buf) - 1; i++)
		buf[i] = name[i] == '-' ? '_' : (char)tolower((unsigned char)name[i]);
	buf[i] = '\0';
	return name[i] ? -1 : find_key(buf);
}

int guard_config__set(struct guard_config *cfg, const char *key, const char *value,
		      char *err, size_t errlen)
{
	char buf[32];
	size_t i;
	int k;

	for (i = 0; key[i] && i < sizeof(buf) - 1; i++)
		buf[i] = key[i] == '-' ? '_' : key[i];
	buf[i] = '\0';
	k = key[i] ? -1 : find_key(buf);
	if (k < 0) {
		errbuf__set(err, errlen, "unknown option --%s", key);
		return -EINVAL;
	}
	return apply(cfg, (enum key)k, value ? value : "true", true, err, errlen);
}

/* --- the file --- */

struct load_ctx {
	struct guard_config *cfg;
	FILE *f;
	int lineno;		/* of the line last handed to inih */
	int err_line;		/* of the first error, 0: none */
	int err;
	int read_errno;
	int line_of[K__COUNT];	/* where each key was set */
	char msg[MSG_LEN];
};

static int fail(struct load_ctx *ctx, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct load_ctx *ctx, int err, const char *fmt, ...)
{
	va_list ap;

	if (ctx->err_line)
		return 0;
	ctx->err_line = ctx->lineno;
	ctx->err = err;
	va_start(ap, fmt);
	vsnprintf(ctx->msg, sizeof(ctx->msg), fmt, ap);
	va_end(ap);
	return 0;
}

/*
 * inih's line reader, in place of fgets: one whole line per call so that
 * its line count is ours, leading blanks dropped so that an indented line
 * is never taken for a continuation of the previous value, and a file
 * that is not text stopped at its first line with a byte no config has.
 */
static char *read_line(char *str, int num, void *stream)
{
	struct load_ctx *ctx = stream;
	size_t n = 0, max = num > 2 ? (size_t)num - 2 : 0;
	bool lead = true, any = false;
	int ch, next;

	if (ctx->err_line)
		return NULL;	/* stop at the first error */
	while ((ch = getc(ctx->f)) != EOF) {
		if (!any) {
			any = true;
			ctx->lineno++;
		}
		if (ch == '\n')
			break;
		if (ch == '\r') {
			next = getc(ctx->f);
			if (next == '\n' || next == EOF)
				break;	/* CRLF, from an editor elsewhere */
			ungetc(next, ctx->f);
		}
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
			fail(ctx, -EINVAL, "binary data (byte 0x%02x), not a config file", ch);
			return NULL;
		}
		if (lead && (ch == ' ' || ch == '\t'))
			continue;
		lead = false;
		if (n >= max) {
			fail(ctx, -EINVAL, "line too long (at most %zu characters)", max);
			return NULL;
		}
		str[n++] = (char)ch;
	}
	if (ferror(ctx->f)) {
		ctx->read_errno = errno ? errno : EIO;
		return NULL;
	}
	if (!any)
		return NULL;
	str[n++] = '\n';
	str[n] = '\0';
	return str;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct load_ctx *ctx = user;
	char msg[MSG_LEN];
	int k;

	if (*section && strcmp(section, "guard"))
		return fail(ctx, -EINVAL, "unknown section [%s]: keys go in [guard] or before any section",
			    section);
	k = find_key(name);
	if (k < 0) {
		k = near_key(name);
		if (k >= 0)
			return fail(ctx, -EINVAL, "unknown key '%s' (did you mean %s?)", name,
				    keys[k].name);
		return fail(ctx, -EINVAL, "unknown key '%s'", name);
	}
	if (!keys[k].repeat && ctx->line_of[k])
		return fail(ctx, -EINVAL, "duplicate key '%s' (first on line %d)", name,
			    ctx->line_of[k]);
	ctx->line_of[k] = ctx->lineno;
	if (apply(ctx->cfg, (enum key)k, value ? value : "", false, msg, sizeof(msg)))
		return fail(ctx, -EINVAL, "%s", msg);
	return 1;
}

/*
 * umtrace runs as root and the file names a command to run and paths to
 * write: whoever can edit it can do both.
 */
static int check_owner(const char *path, const struct stat *st, char *err, size_t errlen)
{
	if (!S_ISREG(st->st_mode)) {
		errbuf__set(err, errlen, "%s: not a regular file", path);
		return -EINVAL;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		errbuf__set(err, errlen, "%s: writable by group or others, and umtrace runs its on_stop and on_warn as root (chmod go-w %s)",
			path, path);
		return -EPERM;
	}
	if (st->st_uid != 0 && st->st_uid != geteuid()) {
		errbuf__set(err, errlen, "%s: owned by uid %u, not by root", path,
			(unsigned int)st->st_uid);
		return -EPERM;
	}
	return 0;
}

int guard_config__load(struct guard_config *cfg, const char *path, char *err, size_t errlen)
{
	struct load_ctx ctx = { .cfg = cfg };
	struct stat st;
	int fd, ret;

	/* O_NONBLOCK: a FIFO given as the file must not hang the open. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		errbuf__set(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		errbuf__set(err, errlen, "%s: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}
	if (!S_ISREG(st.st_mode)) {
		errbuf__set(err, errlen, "%s: not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	ret = check_owner(path, &st, err, errlen);
	if (ret) {
		close(fd);
		return ret;
	}
	ctx.f = fdopen(fd, "r");
	if (!ctx.f) {
		ret = -errno;
		errbuf__set(err, errlen, "%s: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}

	ret = ini_parse_stream(read_line, &ctx, on_key, &ctx);
	if (ret > 0 && (!ctx.err_line || ret < ctx.err_line)) {
		errbuf__set(err, errlen, "%s:%d: expected 'key = value', '[guard]' or a comment",
			path, ret);
		ret = -EINVAL;
	} else if (ctx.err_line) {
		errbuf__set(err, errlen, "%s:%d: %s", path, ctx.err_line, ctx.msg);
		ret = ctx.err;
	} else if (ctx.read_errno) {
		errbuf__set(err, errlen, "%s: %s", path, strerror(ctx.read_errno));
		ret = -ctx.read_errno;
	} else if (ret < 0) {
		errbuf__set(err, errlen, "%s: out of memory", path);
		ret = -ENOMEM;
	}
	fclose(ctx.f);
	return ret;
}

/* --- the whole --- */

void guard_config__init(struct guard_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->metric = GUARD_METRIC_AVAILABLE;
	cfg->action = GUARD_ACT_STOP;
	cfg->scope.kind = UMT_SCOPE_GPU;
	cfg->torch = GUARD_TORCH_DEFAULT;
	cfg->self_pid = getpid();
	protect__init(&cfg->protect);
}

int guard_config__policy(const struct guard_config *cfg, uint64_t mem_total,
			 struct guard_policy *p, char *err, size_t errlen)
{
	int ret;

	ret = guard_policy__init(p, mem_total, cfg->floor, cfg->low, cfg->drop, cfg->auto_resume,
				 err, errlen);
	if (ret)
		return ret;
	p->metric = cfg->metric;
	return 0;
}

static void free_list(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void guard_config__free(struct guard_config *cfg)
{
	free(cfg->floor);
	free(cfg->low);
	free(cfg->drop);
	free(cfg->auto_resume);
	guard_scope__free(&cfg->scope);
	protect__free(&cfg->protect);
	free(cfg->on_stop);
	free(cfg->on_warn);
	free(cfg->postmortem_dir);
	free(cfg->metrics_file);
	free_list(cfg->libcuda, cfg->n_libcuda);
	memset(cfg, 0, sizeof(*cfg));
}
