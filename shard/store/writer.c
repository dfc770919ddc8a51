#include "writer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"

#define KVW_BACKOFF_MIN_MS 100
#define KVW_BACKOFF_MAX_MS 10000

struct kvw_writer {
	kvs_store *store;
	void (*notify)(void *arg);
	void *arg;
	kvi_counter *failures;
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	kvw_job *job;  /* submitted, being committed */
	kvw_job *done; /* committed, not yet polled */
	bool stop;
	atomic_bool failing;
	char last_error[256]; /* under mu */
};

/* ---- jobs ---------------------------------------------------------- */

void
kvw_job_init(kvw_job *j)
{
	memset(j, 0, sizeof(*j));
}

void
kvw_job_fini(kvw_job *j)
{
	for (size_t i = 0; i < j->cap_bufs; i++) {
		kvi_free(j->bufs[i].p);
	}
	kvi_free(j->bufs);
	kvi_free(j->puts);
	kvi_free(j->recs);
	kvi_free(j->snaps);
	memset(j, 0, sizeof(*j));
}

void
kvw_job_reset(kvw_job *j)
{
	for (size_t i = 0; i < j->n_bufs; i++) {
		j->bufs[i].len = 0;
	}
	j->n_bufs = j->n_puts = j->n_recs = j->n_snaps = 0;
	j->bytes = 0;
	j->rv = KVI_OK;
	j->err[0] = '\0';
	j->attempts = 0;
	j->has_oldest = false;
}

#define KVW_PUSH(arr, n, cap)                                                  \
	do {                                                                   \
		if ((n) == (cap)) {                                            \
			(cap) = (cap) ? (cap)*2 : 16;                          \
			(arr) =                                                \
			    kvi_reallocarray((arr), (cap), sizeof(*(arr)));    \
		}                                                              \
	} while (0)

uint8_t *
kvw_job_buf(kvw_job *j, size_t len)
{
	if (j->n_bufs == j->cap_bufs) {
		size_t cap = j->cap_bufs ? j->cap_bufs * 2 : 16;
		j->bufs = kvi_reallocarray(j->bufs, cap, sizeof(*j->bufs));
		memset(j->bufs + j->cap_bufs, 0,
		       (cap - j->cap_bufs) * sizeof(*j->bufs));
		j->cap_bufs = cap;
	}
	kvw_buf *b = &j->bufs[j->n_bufs++];
	if (b->cap < len) {
		b->cap = len < 256 ? 256 : len;
		b->p = kvi_realloc(b->p, b->cap);
	}
	b->len = len;
	j->bytes += len;
	return b->p;
}

void
kvw_job_put(kvw_job *j, uint32_t lid, const void *val, size_t len)
{
	KVW_PUSH(j->puts, j->n_puts, j->cap_puts);
	uint8_t *p = NULL;
	if (val != NULL) {
		p = kvw_job_buf(j, len);
		memcpy(p, val, len);
	}
	j->puts[j->n_puts++] = (kvs_put){lid, p, len};
}

void
kvw_job_rec(kvw_job *j, uint32_t lid, const void *payload, size_t len)
{
	KVW_PUSH(j->recs, j->n_recs, j->cap_recs);
	uint8_t *p = kvw_job_buf(j, len);
	memcpy(p, payload, len);
	j->recs[j->n_recs++] = (kvs_rec){lid, p, len};
}

uint8_t *
kvw_job_snap(kvw_job *j, uint32_t lid, const kvs_mark *mark, size_t n)
{
	KVW_PUSH(j->snaps, j->n_snaps, j->cap_snaps);
	uint8_t *p = kvw_job_buf(j, n * KVS_ENTRY_SIZE);
	j->snaps[j->n_snaps++] =
	    (kvs_snap){.lid = lid, .mark = *mark, .entries = p, .n = n};
	return p;
}

bool
kvw_job_empty(const kvw_job *j)
{
	return j->n_puts == 0 && j->n_recs == 0 && j->n_snaps == 0;
}

/* ---- the thread ---------------------------------------------------- */

/* commit commits j, retrying with backoff while the writer runs.
 * Returns with j->rv set. */
static void
commit(kvw_writer *w, kvw_job *j)
{
	int backoff = KVW_BACKOFF_MIN_MS;
	kvs_commit c = {j->puts,   j->n_puts, j->recs,
			j->n_recs, j->snaps,  j->n_snaps};
	for (;;) {
		double t0 = kvi_now_s();
		j->attempts++;
		j->rv = kvs_store_commit(w->store, &c, j->err, sizeof(j->err));
		if (j->rv == KVI_OK) {
			j->commit_seconds = kvi_now_s() - t0;
			atomic_store(&w->failing, false);
			break;
		}
		if (w->failures != NULL) {
			kvi_counter_inc(w->failures);
		}
		char q[600];
		kvi_log(KVI_LOG_ERROR, "store_commit_failed",
			"error=\"%s\" attempt=%d records=%zu bytes=%zu msg=%s",
			kvi_strerror(j->rv), j->attempts, j->n_recs, j->bytes,
			kvi_log_quote(q, sizeof(q), j->err));
		pthread_mutex_lock(&w->mu);
		snprintf(w->last_error, sizeof(w->last_error), "%s", j->err);
		atomic_store(&w->failing, true);
		if (!w->stop) {
			struct timespec until =
			    kvi_deadline_ms(CLOCK_REALTIME, backoff);
			pthread_cond_timedwait(&w->cv, &w->mu, &until);
		}
		bool stop = w->stop;
		pthread_mutex_unlock(&w->mu);
		if (stop) {
			break;
		}
		backoff = backoff * 2 > KVW_BACKOFF_MAX_MS ? KVW_BACKOFF_MAX_MS
							   : backoff * 2;
	}
	kvs_store_stats_get(w->store, &j->stats);
	j->has_oldest =
	    kvs_store_oldest(w->store, &j->oldest_lid, &(uint64_t){0});
}

static void *
writer_main(void *arg)
{
	kvw_writer *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->job == NULL && !w->stop) {
			pthread_cond_wait(&w->cv, &w->mu);
		}
		if (w->job == NULL) {
			break;
		}
		kvw_job *j = w->job;
		pthread_mutex_unlock(&w->mu);
		commit(w, j);
		pthread_mutex_lock(&w->mu);
		w->job = NULL;
		w->done = j;
		pthread_mutex_unlock(&w->mu);
		if (w->notify != NULL) {
			w->notify(w->arg);
		}
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

kvi_err
kvw_open(kvs_store *store, void (*notify)(void *arg), void *arg,
	 kvi_counter *failures, kvw_writer **out)
{
	kvw_writer *w = kvi_calloc(1, sizeof(*w));
	w->store = store;
	w->notify = notify;
	w->arg = arg;
	w->failures = failures;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
		kvw_free(w);
		return KVI_EIO;
	}
	w->started = true;
	*out = w;
	return KVI_OK;
}

void
kvw_stop(kvw_writer *w)
{
	if (w == NULL || !w->started) {
		return;
	}
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	w->started = false;
}

void
kvw_free(kvw_writer *w)
{
	if (w == NULL) {
		return;
	}
	kvw_stop(w);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	kvi_free(w);
}

kvi_err
kvw_submit(kvw_writer *w, kvw_job *j)
{
	pthread_mutex_lock(&w->mu);
	if (w->job != NULL || w->done != NULL) {
		pthread_mutex_unlock(&w->mu);
		return KVI_EAGAIN;
	}
	w->job = j;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return KVI_OK;
}

kvw_job *
kvw_poll(kvw_writer *w)
{
	pthread_mutex_lock(&w->mu);
	kvw_job *j = w->done;
	w->done = NULL;
	pthread_mutex_unlock(&w->mu);
	return j;
}

bool
kvw_busy(kvw_writer *w)
{
	pthread_mutex_lock(&w->mu);
	bool busy = w->job != NULL || w->done != NULL;
	pthread_mutex_unlock(&w->mu);
	return busy;
}

bool
kvw_failing(kvw_writer *w, char *msg, size_t len)
{
	bool failing = atomic_load(&w->failing);
	if (failing && msg != NULL) {
		pthread_mutex_lock(&w->mu);
		snprintf(msg, len, "%s", w->last_error);
		pthread_mutex_unlock(&w->mu);
	}
	return failing;
}
