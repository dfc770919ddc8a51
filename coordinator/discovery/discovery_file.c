#include "discovery_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"

/* A change younger than this is re-read even if stat looks the same:
 * mtime advances in clock ticks, so two writes of the same size within
 * one tick are otherwise indistinguishable. */
#define KVC_DFILE_RACY_NS (2 * 1000000000LL)

/* Parser */

typedef struct kvc_df_parse {
	kvc_dfile_error *errors;
	size_t n_errors, cap_errors;
} kvc_df_parse;

static void df_error(kvc_df_parse *ps, size_t index, const char *name,
		     kvi_err code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void
df_error(kvc_df_parse *ps, size_t index, const char *name, kvi_err code,
	 const char *fmt, ...)
{
	if (ps->n_errors == ps->cap_errors) {
		ps->cap_errors = ps->cap_errors ? ps->cap_errors * 2 : 8;
		ps->errors = kvi_reallocarray(ps->errors, ps->cap_errors,
					      sizeof(*ps->errors));
	}
	kvc_dfile_error *e = &ps->errors[ps->n_errors++];
	e->index = index;
	e->code = code;
	snprintf(e->name, sizeof(e->name), "%s", name != NULL ? name : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

/* df_string reads a required string field; NULL when it is missing or
 * not a string. */
static const char *
df_string(json_t *o, const char *field)
{
	json_t *v = json_object_get(o, field);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* df_uint reads an integer field into *out when it is present and in
 * lo..hi; *has says whether it was present (not absent, not null). */
static kvi_err
df_uint(json_t *o, const char *field, int64_t lo, int64_t hi, uint32_t *out,
	bool *has, char *msg, size_t msglen)
{
	json_t *v = json_object_get(o, field);
	*has = v != NULL && !json_is_null(v);
	if (!*has) {
		return KVI_OK;
	}
	if (!json_is_integer(v)) {
		snprintf(msg, msglen, "%s is not an integer", field);
		return KVI_EINVAL;
	}
	json_int_t n = json_integer_value(v);
	if (n < lo || n > hi) {
		snprintf(msg, msglen,
			 "%s %" JSON_INTEGER_FORMAT " is not in %" PRId64
			 "..%" PRId64,
			 field, n, lo, hi);
		return KVI_ERANGE;
	}
	*out = (uint32_t)n;
	return KVI_OK;
}

/* df_pod turns one element of "pods" into p, or explains in msg why
 * it cannot. The strings of p point into o. */
static kvi_err
df_pod(json_t *o, uint32_t default_dp_size, kvc_pod *p, char *msg,
       size_t msglen)
{
	if (!json_is_object(o)) {
		snprintf(msg, msglen, "pod is not an object");
		return KVI_EINVAL;
	}
	const char *name = df_string(o, "name");
	const char *ip = df_string(o, "ip");
	const char *model = df_string(o, "model");
	const char *missing = name == NULL    ? "name"
			      : ip == NULL    ? "ip"
			      : model == NULL ? "model"
					      : NULL;
	if (missing != NULL) {
		snprintf(msg, msglen, "%s is missing or not a string", missing);
		return KVI_EINVAL;
	}
	if (model[0] == '\0') {
		snprintf(msg, msglen, "model is empty");
		return KVI_EINVAL;
	}
	/* p borrows the document's strings; the caller copies it */
	memset(p, 0, sizeof(*p));
	p->source = KVC_SOURCE_FILE;
	p->name = (char *)name;
	p->ip = (char *)ip;
	p->model = (char *)model;
	bool has_zmq, has_dp, has_bs, has_start;
	kvi_err rv;
	if ((rv = df_uint(o, "zmq_port", 1, 65535, &p->zmq_port, &has_zmq, msg,
			  msglen)) != KVI_OK ||
	    (rv = df_uint(o, "recover_port", 1, 65535, &p->recover_port,
			  &p->has_recover_port, msg, msglen)) != KVI_OK ||
	    (rv = df_uint(o, "replay_port", 1, 65535, &p->replay_port,
			  &p->has_replay_port, msg, msglen)) != KVI_OK ||
	    (rv = df_uint(o, "metrics_port", 1, 65535, &p->metrics_port,
			  &p->has_metrics_port, msg, msglen)) != KVI_OK ||
	    (rv = df_uint(o, "dp_size", 1, KVC_DP_SIZE_MAX, &p->dp_size,
			  &has_dp, msg, msglen)) != KVI_OK ||
	    (rv = df_uint(o, "dp_start_rank", 0, UINT16_MAX, &p->dp_start_rank,
			  &has_start, msg, msglen)) != KVI_OK ||
	    (rv = df_uint(o, "block_size", 1, 1 << 20, &p->block_size, &has_bs,
			  msg, msglen)) != KVI_OK) {
		return rv;
	}
	if (!has_zmq || !has_bs) {
		snprintf(msg, msglen, "%s is missing",
			 !has_zmq ? "zmq_port" : "block_size");
		return KVI_EINVAL;
	}
	if (!has_dp) {
		p->dp_size = default_dp_size;
	}
	kvc_pod_origin_given(p, has_dp, has_start);
	p->instance_id = kvc_instance_id(p->name);
	return kvc_pod_check(p, msg, msglen);
}

/* For finding duplicates: a candidate's name, id and index. */
typedef struct kvc_df_ref {
	const char *name;
	uint64_t id;
	size_t index;
} kvc_df_ref;

static int
df_by_name(const void *a, const void *b)
{
	const kvc_df_ref *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c != 0 ? c : (x->index > y->index) - (x->index < y->index);
}

static int
df_by_id(const void *a, const void *b)
{
	const kvc_df_ref *x = a, *y = b;
	if (x->id != y->id) {
		return x->id < y->id ? -1 : 1;
	}
	return (x->index > y->index) - (x->index < y->index);
}

static int
df_by_index(const void *a, const void *b)
{
	const kvc_dfile_error *x = a, *y = b;
	return (x->index > y->index) - (x->index < y->index);
}

/* df_dups marks in bad[] each candidate whose name or instance id an
 * earlier one has, and reports it. */
static void
df_dups(kvc_df_parse *ps, const kvc_pod *cand, const bool *ok, size_t n,
	bool *bad)
{
	kvc_df_ref *refs = kvi_calloc(n ? n : 1, sizeof(*refs));
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (ok[i]) {
			refs[m++] =
			    (kvc_df_ref){cand[i].name, cand[i].instance_id, i};
		}
	}
	qsort(refs, m, sizeof(*refs), df_by_name);
	size_t run = 0; /* the first, hence earliest, pod of a run of names */
	for (size_t i = 1; i < m; i++) {
		if (strcmp(refs[i].name, refs[run].name) != 0) {
			run = i;
			continue;
		}
		bad[refs[i].index] = true;
		df_error(ps, refs[i].index, refs[i].name, KVI_EEXIST,
			 "duplicate name: pod %zu has it", refs[run].index);
	}
	qsort(refs, m, sizeof(*refs), df_by_id);
	size_t keep = SIZE_MAX; /* the earliest pod kept with this id */
	for (size_t i = 0; i < m; i++) {
		if (bad[refs[i].index]) {
			continue;
		}
		if (keep == SIZE_MAX || refs[keep].id != refs[i].id) {
			keep = i;
			continue;
		}
		bad[refs[i].index] = true;
		df_error(ps, refs[i].index, refs[i].name, KVI_EEXIST,
			 "instance id %" PRIu64 " collides with pod %zu",
			 refs[i].id, refs[keep].index);
	}
	kvi_free(refs);
}

static json_t *
df_load(const void *data, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL) {
		snprintf(err, errlen, "line %d column %d: %s", je.line,
			 je.column, je.text);
		return NULL;
	}
	if (!json_is_array(json_object_get(root, "pods"))) {
		snprintf(err, errlen, "%s",
			 json_is_object(root) ? "\"pods\" is missing or not "
						"an array"
					      : "the document is not an "
						"object");
		json_decref(root);
		return NULL;
	}
	return root;
}

kvi_err
kvc_dfile_parse(const void *data, size_t len, uint32_t default_dp_size,
		kvc_dfile *out, char *err, size_t errlen)
{
	json_t *root = df_load(data, len, err, errlen);
	if (root == NULL) {
		return KVI_EPROTO;
	}
	json_t *arr = json_object_get(root, "pods");
	size_t n = json_array_size(arr);
	kvc_pod *cand = kvi_calloc(n ? n : 1, sizeof(*cand));
	bool *ok = kvi_calloc(n ? n : 1, 2 * sizeof(bool)), *bad = ok + n;
	kvc_df_parse ps = {0};
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(arr, i);
		char msg[sizeof(ps.errors->msg)];
		kvi_err rv =
		    df_pod(o, default_dp_size, &cand[i], msg, sizeof(msg));
		ok[i] = rv == KVI_OK;
		if (!ok[i]) {
			df_error(&ps, i, df_string(o, "name"), rv, "%s", msg);
		}
	}
	df_dups(&ps, cand, ok, n, bad);
	kvc_dfile f = {0};
	f.pods = kvi_calloc(n ? n : 1, sizeof(*f.pods));
	for (size_t i = 0; i < n; i++) {
		if (ok[i] && !bad[i]) {
			/* copy: cand's strings belong to the document */
			kvc_pod_copy(&f.pods[f.n_pods++], &cand[i]);
		}
	}
	if (ps.n_errors > 1) {
		qsort(ps.errors, ps.n_errors, sizeof(*ps.errors), df_by_index);
	}
	f.errors = ps.errors;
	f.n_errors = ps.n_errors;
	kvi_free(ok);
	kvi_free(cand);
	json_decref(root);
	*out = f;
	return KVI_OK;
}

void
kvc_dfile_fini(kvc_dfile *f)
{
	for (size_t i = 0; i < f->n_pods; i++) {
		kvc_pod_fini(&f->pods[i]);
	}
	kvi_free(f->pods);
	kvi_free(f->errors);
	memset(f, 0, sizeof(*f));
}

/* Watcher */

/* What stat says of the file; a change of any field means a re-read. */
typedef struct kvc_df_sig {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
} kvc_df_sig;

struct kvc_dfile_watch {
	char *path;
	uint32_t default_dp_size;
	uint32_t interval_ms;
	kvc_dfile_cb cb;
	void *arg;
	pthread_t thread;
	pthread_mutex_t mu; /* guards stop and stats */
	pthread_cond_t cv;
	bool stop;
	kvc_dfile_stats stats;
	/* watcher thread only */
	bool have_sig, have_hash, racy, logged_missing, logged_stat;
	kvc_df_sig sig;
	uint64_t hash; /* of the last content read, valid or not */
};

static void
df_sig_of(const struct stat *st, kvc_df_sig *s)
{
	memset(s, 0, sizeof(*s));
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->size = st->st_size;
	s->mtime = st->st_mtim;
	s->ctime = st->st_ctim;
}

static bool
df_sig_eq(const kvc_df_sig *a, const kvc_df_sig *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static void
df_count(kvc_dfile_watch *w, bool failed, bool missing)
{
	pthread_mutex_lock(&w->mu);
	w->stats.failures += failed;
	w->stats.missing = missing;
	pthread_mutex_unlock(&w->mu);
}

/* df_read reads the open file fd into a buffer of *len bytes, the
 * caller frees it. NULL with errno set on failure; EFBIG when it is
 * larger than KVC_DFILE_MAX_BYTES. */
static char *
df_read(int fd, size_t hint, size_t *len)
{
	size_t cap = hint + 1, n = 0;
	if (cap > KVC_DFILE_MAX_BYTES + 1) {
		errno = EFBIG;
		return NULL;
	}
	char *buf = kvi_malloc(cap);
	for (;;) {
		if (n == cap) {
			if (cap > KVC_DFILE_MAX_BYTES) {
				kvi_free(buf);
				errno = EFBIG;
				return NULL;
			}
			cap *= 2;
			buf = kvi_realloc(buf, cap);
		}
		ssize_t got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR) {
			continue;
		}
		if (got < 0) {
			int e = errno;
			kvi_free(buf);
			errno = e;
			return NULL;
		}
		if (got == 0) {
			break;
		}
		n += (size_t)got;
	}
	*len = n;
	return buf;
}

/* df_deliver parses a new version of the file and hands it over. */
static void
df_deliver(kvc_dfile_watch *w, const char *data, size_t len)
{
	char qpath[300], qmsg[300], qname[300];
	kvi_log_quote(qpath, sizeof(qpath), w->path);
	kvc_dfile f;
	char err[200];
	if (kvc_dfile_parse(data, len, w->default_dp_size, &f, err,
			    sizeof(err)) != KVI_OK) {
		KVI_WARN("discovery_file_invalid", "path=%s error=%s", qpath,
			 kvi_log_quote(qmsg, sizeof(qmsg), err));
		df_count(w, true, false);
		return;
	}
	for (size_t i = 0; i < f.n_errors; i++) {
		const kvc_dfile_error *e = &f.errors[i];
		KVI_WARN("discovery_file_bad_pod",
			 "path=%s index=%zu name=%s error=%s", qpath, e->index,
			 kvi_log_quote(qname, sizeof(qname), e->name),
			 kvi_log_quote(qmsg, sizeof(qmsg), e->msg));
	}
	KVI_INFO("discovery_file_loaded", "path=%s pods=%zu bad_pods=%zu",
		 qpath, f.n_pods, f.n_errors);
	pthread_mutex_lock(&w->mu);
	w->stats.loads++;
	w->stats.bad_pods = f.n_errors;
	w->stats.missing = false;
	pthread_mutex_unlock(&w->mu);
	w->cb(w->arg, f.pods, f.n_pods);
	kvc_dfile_fini(&f);
}

static int64_t
df_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* df_poll checks the file once and delivers a new version. */
static void
df_poll(kvc_dfile_watch *w)
{
	char qpath[300];
	kvi_log_quote(qpath, sizeof(qpath), w->path);
	struct stat st;
	if (stat(w->path, &st) != 0) {
		bool missing = errno == ENOENT;
		if (missing ? !w->logged_missing : !w->logged_stat) {
			KVI_WARN(missing ? "discovery_file_missing"
					 : "discovery_file_unreadable",
				 "path=%s error=\"%s\" pods=kept", qpath,
				 strerror(errno));
			df_count(w, !missing, missing);
		}
		w->logged_missing = missing;
		w->logged_stat = !missing;
		w->have_sig = false;
		return;
	}
	w->logged_missing = w->logged_stat = false;
	kvc_df_sig sig;
	df_sig_of(&st, &sig);
	if (w->have_sig && df_sig_eq(&sig, &w->sig) && !w->racy) {
		return;
	}
	/* O_NONBLOCK: a FIFO put in the file's place must not block us */
	size_t len = 0;
	char *data = NULL;
	const char *why = NULL;
	int fd = open(w->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) != 0) {
		why = strerror(errno);
	} else if (!S_ISREG(st.st_mode)) {
		why = "not a regular file";
	} else if ((data = df_read(fd, (size_t)st.st_size, &len)) == NULL) {
		why =
		    errno == EFBIG ? "larger than the limit" : strerror(errno);
	}
	if (fd >= 0) {
		/* the file read is the one described, even if replaced since */
		df_sig_of(&st, &sig);
		close(fd);
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	bool changed = !w->have_sig || !df_sig_eq(&sig, &w->sig);
	w->racy = df_ns(&now) - df_ns(&sig.mtime) < KVC_DFILE_RACY_NS;
	w->sig = sig;
	w->have_sig = true;
	if (data == NULL) {
		if (changed) {
			char qwhy[200];
			KVI_WARN("discovery_file_unreadable",
				 "path=%s error=%s pods=kept", qpath,
				 kvi_log_quote(qwhy, sizeof(qwhy), why));
			df_count(w, true, false);
		}
		return;
	}
	pthread_mutex_lock(&w->mu);
	w->stats.reads++;
	pthread_mutex_unlock(&w->mu);
	uint64_t h = XXH3_64bits(data, len);
	if (!w->have_hash || h != w->hash) {
		w->hash = h;
		w->have_hash = true;
		df_deliver(w, data, len);
	} else {
		df_count(w, false, false);
	}
	kvi_free(data);
}

static void *
df_main(void *arg)
{
	kvc_dfile_watch *w = arg;
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		pthread_mutex_unlock(&w->mu);
		df_poll(w);
		pthread_mutex_lock(&w->mu);
		struct timespec at =
		    kvi_deadline_ms(CLOCK_MONOTONIC, w->interval_ms);
		while (!w->stop &&
		       pthread_cond_timedwait(&w->cv, &w->mu, &at) == 0) {
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

kvi_err
kvc_dfile_watch_open(const char *path, uint32_t default_dp_size,
		     uint32_t interval_ms, kvc_dfile_cb cb, void *arg,
		     kvc_dfile_watch **out)
{
	if (path == NULL || path[0] == '\0' || cb == NULL || interval_ms == 0) {
		return KVI_EINVAL;
	}
	kvc_dfile_watch *w = kvi_calloc(1, sizeof(*w));
	w->path = kvi_strdup(path);
	w->default_dp_size = default_dp_size;
	w->interval_ms = interval_ms;
	w->cb = cb;
	w->arg = arg;
	pthread_mutex_init(&w->mu, NULL);
	kvi_cond_init_monotonic(&w->cv);
	if (pthread_create(&w->thread, NULL, df_main, w) != 0) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		kvi_free(w->path);
		kvi_free(w);
		return KVI_EIO;
	}
	*out = w;
	return KVI_OK;
}

void
kvc_dfile_watch_free(kvc_dfile_watch *w)
{
	if (w == NULL) {
		return;
	}
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	kvi_free(w->path);
	kvi_free(w);
}

void
kvc_dfile_watch_stats(kvc_dfile_watch *w, kvc_dfile_stats *out)
{
	pthread_mutex_lock(&w->mu);
	*out = w->stats;
	pthread_mutex_unlock(&w->mu);
}
