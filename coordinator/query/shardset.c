#include "shardset.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "log.h"

struct kvc_shardset {
	pthread_rwlock_t lock;
	kvc_shard **s; /* sorted by id */
	size_t n;
	int batch_inflight; /* for the shards added from now on */
	size_t batch_max;
};

kvc_shardset *
kvc_shardset_alloc(void)
{
	kvc_shardset *s = kvi_calloc(1, sizeof(*s));
	pthread_rwlock_init(&s->lock, NULL);
	return s;
}

/* shard_destroy closes sh's client, which waits for its calls in
 * flight, and frees sh. */
static void
shard_destroy(kvc_shard *sh)
{
	kvp_client_close(sh->client);
	kvc_qbatch_free(sh->qbatch);
	pthread_mutex_destroy(&sh->mu);
	kvi_free(sh->id);
	kvi_free(sh->url);
	kvi_free(sh);
}

void
kvc_shardset_set_batching(kvc_shardset *s, int max_inflight, size_t max_batch)
{
	pthread_rwlock_wrlock(&s->lock);
	s->batch_inflight = max_inflight;
	s->batch_max = max_batch;
	pthread_rwlock_unlock(&s->lock);
}

void
kvc_shard_unref(kvc_shard *sh)
{
	if (sh != NULL && atomic_fetch_sub(&sh->refs, 1) == 1) {
		shard_destroy(sh);
	}
}

static void *
shard_destroy_main(void *arg)
{
	shard_destroy(arg);
	return NULL;
}

/* shard_unref_async drops a reference; the last one destroys sh on a
 * detached thread (on this one when no thread can start). */
static void
shard_unref_async(kvc_shard *sh)
{
	if (sh == NULL || atomic_fetch_sub(&sh->refs, 1) != 1) {
		return;
	}
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, shard_destroy_main, sh) != 0) {
		shard_destroy(sh);
	}
	pthread_attr_destroy(&attr);
}

void
kvc_shardset_free(kvc_shardset *s)
{
	if (s == NULL) {
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		kvc_shard_unref(s->s[i]);
	}
	kvi_free(s->s);
	pthread_rwlock_destroy(&s->lock);
	kvi_free(s);
}

/* shardset_find_locked returns the position of shard id, or s->n. */
static size_t
shardset_find_locked(const kvc_shardset *s, const char *id)
{
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->s[i]->id, id) == 0) {
			return i;
		}
	}
	return s->n;
}

kvi_err
kvc_shardset_add(kvc_shardset *s, const char *id, const char *url, char *err,
		 size_t errlen)
{
	if (id == NULL || id[0] == '\0' || strlen(id) > 64 ||
	    strpbrk(id, " \t\n/\"") != NULL) {
		snprintf(err, errlen,
			 "shard id must be 1..64 characters "
			 "without spaces, slashes or quotes");
		return KVI_EINVAL;
	}
	/* Refused before a client is opened: nng 1.5.2 can lose a TCP pipe
	 * and its dialer when a socket is closed while its first dial is
	 * being negotiated. */
	pthread_rwlock_rdlock(&s->lock);
	bool exists = shardset_find_locked(s, id) < s->n;
	pthread_rwlock_unlock(&s->lock);
	if (exists) {
		snprintf(err, errlen, "shard %s exists already", id);
		return KVI_EEXIST;
	}
	kvp_client *client;
	if (url == NULL || kvp_client_open(url, &client) != KVI_OK) {
		snprintf(err, errlen,
			 "shard %s: %s is not an nng address "
			 "(tcp://host:port, or ipc:///path on this host)",
			 id, url ? url : "(none)");
		return KVI_EINVAL;
	}
	kvc_shard *sh = kvi_calloc(1, sizeof(*sh));
	sh->id = kvi_strdup(id);
	sh->url = kvi_strdup(url);
	sh->client = client;
	pthread_mutex_init(&sh->mu, NULL);
	pthread_rwlock_rdlock(&s->lock);
	sh->qbatch = kvc_qbatch_alloc(client, s->batch_inflight, s->batch_max);
	pthread_rwlock_unlock(&s->lock);
	atomic_store(&sh->refs, 1);
	pthread_rwlock_wrlock(&s->lock);
	size_t pos = 0;
	while (pos < s->n && strcmp(s->s[pos]->id, id) < 0) {
		pos++;
	}
	if (pos < s->n && strcmp(s->s[pos]->id, id) == 0) {
		pthread_rwlock_unlock(&s->lock);
		snprintf(err, errlen, "shard %s exists already", id);
		kvc_shard_unref(sh);
		return KVI_EEXIST;
	}
	s->s = kvi_reallocarray(s->s, s->n + 1, sizeof(*s->s));
	memmove(&s->s[pos + 1], &s->s[pos], (s->n - pos) * sizeof(*s->s));
	s->s[pos] = sh;
	s->n++;
	pthread_rwlock_unlock(&s->lock);
	return KVI_OK;
}

kvi_err
kvc_shardset_remove(kvc_shardset *s, const char *id)
{
	kvc_shard *gone = NULL;
	pthread_rwlock_wrlock(&s->lock);
	size_t i = shardset_find_locked(s, id);
	if (i < s->n) {
		gone = s->s[i];
		atomic_store(&gone->removed, true);
		memmove(&s->s[i], &s->s[i + 1], (s->n - i - 1) * sizeof(*s->s));
		s->n--;
	}
	pthread_rwlock_unlock(&s->lock);
	kvc_shard_unref(gone);
	return gone != NULL ? KVI_OK : KVI_ENOENT;
}

kvc_shard **
kvc_shardset_snapshot(kvc_shardset *s, size_t *n)
{
	pthread_rwlock_rdlock(&s->lock);
	kvc_shard **out = kvi_calloc(s->n + 1, sizeof(*out));
	for (size_t i = 0; i < s->n; i++) {
		out[i] = s->s[i];
		atomic_fetch_add(&out[i]->refs, 1);
	}
	*n = s->n;
	pthread_rwlock_unlock(&s->lock);
	return out;
}

void
kvc_shardset_release(kvc_shard **shards, size_t n)
{
	for (size_t i = 0; shards != NULL && i < n; i++) {
		kvc_shard_unref(shards[i]);
	}
	kvi_free(shards);
}

void
kvc_shardset_release_async(kvc_shard **shards, size_t n)
{
	for (size_t i = 0; shards != NULL && i < n; i++) {
		shard_unref_async(shards[i]);
	}
	kvi_free(shards);
}

kvc_shard *
kvc_shardset_find(kvc_shardset *s, const char *id)
{
	kvc_shard *found = NULL;
	pthread_rwlock_rdlock(&s->lock);
	size_t i = shardset_find_locked(s, id);
	if (i < s->n) {
		found = s->s[i];
		atomic_fetch_add(&found->refs, 1);
	}
	pthread_rwlock_unlock(&s->lock);
	return found;
}

bool
kvc_shard_known_down(const kvc_shard *sh)
{
	return !atomic_load(&sh->up) && atomic_load(&sh->down_since_ms) != 0;
}

void
kvc_shard_mark_down(kvc_shard *sh, kvi_err rv, const char *err, int64_t now)
{
	if (atomic_exchange(&sh->up, false) ||
	    atomic_load(&sh->down_since_ms) == 0) {
		KVI_WARN("shard_down", "shard=%s url=%s err=%s: %s", sh->id,
			 sh->url, kvi_strerror(rv), err);
	}
	int64_t zero = 0;
	atomic_compare_exchange_strong(&sh->down_since_ms, &zero, now);
}

void
kvc_shard_set_store_error(kvc_shard *sh, const char *err)
{
	pthread_mutex_lock(&sh->mu);
	snprintf(sh->store_error, sizeof(sh->store_error), "%s",
		 err != NULL ? err : "");
	atomic_store(&sh->stale, err != NULL);
	pthread_mutex_unlock(&sh->mu);
}

bool
kvc_shard_stale(kvc_shard *sh, char *why, size_t len)
{
	if (!atomic_load(&sh->stale)) {
		return false;
	}
	if (why != NULL) {
		pthread_mutex_lock(&sh->mu);
		snprintf(why, len, "%s", sh->store_error);
		pthread_mutex_unlock(&sh->mu);
	}
	return true;
}

size_t
kvc_shardset_count(kvc_shardset *s)
{
	pthread_rwlock_rdlock(&s->lock);
	size_t n = s->n;
	pthread_rwlock_unlock(&s->lock);
	return n;
}
