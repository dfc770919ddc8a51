/*
 * poll.c - step 1 of the assigner's tick (assigner.h): ask every shard
 * for its status, at once, keep the last full answer of each (a shard
 * whose listeners are unchanged answers with its digest only), note which
 * shards answered and what each owns, and probe the shards known down.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "assigner_int.h"
#include "log.h"

void
kvc_poll_free(kvc_assigner *a)
{
	kvc_shardset_release(a->poll.snap, a->poll.n);
	kvi_free(a->poll.ids);
	kvi_free(a->poll.answered);
	kvi_free(a->poll.eligible);
	kvi_free(a->poll.resps);
	kvi_free(a->poll.owned);
	a->poll.snap = NULL;
	a->poll.ids = NULL;
	a->poll.answered = a->poll.eligible = NULL;
	a->poll.resps = NULL;
	a->poll.owned = NULL;
	a->poll.n = a->poll.n_owned = 0;
}

static int
owned_cmp(const void *x, const void *y)
{
	const kvc_owned *a = x, *b = y;
	int c = strcmp(a->key, b->key);
	if (c != 0) {
		return c;
	}
	return a->shard < b->shard ? -1 : a->shard > b->shard;
}

const kvc_owned *
kvc_owned_find(const kvc_assigner *a, const char *key, size_t *n)
{
	size_t lo = 0, hi = a->poll.n_owned;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(a->poll.owned[mid].key, key) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	size_t k = lo;
	while (k < a->poll.n_owned && strcmp(a->poll.owned[k].key, key) == 0) {
		k++;
	}
	*n = k - lo;
	return *n > 0 ? &a->poll.owned[lo] : NULL;
}

size_t
kvc_shard_index(const kvc_assigner *a, const char *id)
{
	for (size_t i = 0; id != NULL && i < a->poll.n; i++) {
		if (strcmp(a->poll.ids[i], id) == 0) {
			return i;
		}
	}
	return SIZE_MAX;
}

static void
shard_answered(kvc_shard *sh, const Kvindex__StatusResponse *st, int64_t now)
{
	if (!atomic_load(&sh->up)) {
		KVI_INFO("shard_up", "shard=%s url=%s listeners=%zu", sh->id,
			 sh->url, st->n_listeners);
	}
	atomic_store(&sh->up, true);
	atomic_store(&sh->last_ok_ms, now);
	atomic_store(&sh->down_since_ms, 0);
	atomic_store(&sh->listeners, st->n_listeners);
	atomic_store(&sh->entries, st->entries);
	atomic_store(&sh->store_bytes, st->store_bytes);
	if ((st->store_error != NULL) != atomic_load(&sh->stale)) {
		if (st->store_error != NULL) {
			KVI_WARN("shard_stale", "shard=%s err=\"%s\"", sh->id,
				 st->store_error);
		} else {
			KVI_INFO("shard_store_back", "shard=%s", sh->id);
		}
	}
	kvc_shard_set_store_error(sh, st->store_error);
}

typedef struct kvc_probe {
	kvc_assigner *a;
	kvc_shard *sh;
} kvc_probe;

/* probe_done ends a probe. A shard that answered is polled, and
 * waited for, again at once: the assigner is woken. On an nng thread;
 * the shard's client and the assigner both wait for it before they go. */
static void
probe_done(void *arg, kvi_err rv, Kvindex__Response *resp, const char *err)
{
	(void)err;
	kvc_probe *p = arg;
	kvc_assigner *a = p->a;
	bool ok = rv == KVI_OK && resp != NULL;
	if (ok) {
		atomic_store(&p->sh->probe_ok, true);
	}
	if (resp != NULL) {
		kvindex__response__free_unpacked(resp, NULL);
	}
	atomic_store(&p->sh->probing, false);
	kvi_free(p);
	pthread_mutex_lock(&a->mu);
	a->poll.probe_answer = a->poll.probe_answer || ok;
	a->poll.probes--;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* poll_waits says whether this tick's poll waits for sh: not for a
 * shard known down, which is probed in the background instead until it
 * answers, so that a dead shard delays no tick (and no command queued
 * behind one). */
static bool
poll_waits(kvc_assigner *a, kvc_shard *sh, const Kvindex__Request *req)
{
	if (!kvc_shard_known_down(sh) ||
	    atomic_exchange(&sh->probe_ok, false)) {
		return true;
	}
	if (atomic_exchange(&sh->probing, true)) {
		return false; /* one in flight */
	}
	kvc_probe *p = kvi_calloc(1, sizeof(*p));
	p->a = a;
	p->sh = sh;
	pthread_mutex_lock(&a->mu);
	a->poll.probes++;
	pthread_mutex_unlock(&a->mu);
	if (kvp_call_async(sh->client, req, a->cfg.poll_timeout_ms, probe_done,
			   p) != KVI_OK) {
		atomic_store(&sh->probing, false);
		kvi_free(p);
		pthread_mutex_lock(&a->mu);
		a->poll.probes--;
		pthread_mutex_unlock(&a->mu);
	}
	return false;
}

static void
poll_gauges(kvc_assigner *a)
{
	if (a->m.shards_up != NULL) {
		size_t up = 0;
		for (size_t i = 0; i < a->poll.n; i++) {
			up += a->poll.answered[i];
		}
		kvi_gauge_set(a->m.shards_up, (int64_t)up);
	}
}

static void
kept_fini(kvc_kept *k)
{
	kvi_free(k->id);
	if (k->resp != NULL) {
		kvindex__response__free_unpacked(k->resp, NULL);
	}
}

void
kvc_kept_free(kvc_assigner *a)
{
	for (size_t i = 0; i < a->poll.n_kept; i++) {
		kept_fini(&a->poll.kept[i]);
	}
	kvi_free(a->poll.kept);
	a->poll.kept = NULL;
	a->poll.n_kept = 0;
}

/* kept_of returns shard id's kept status, made empty if it has none. */
static kvc_kept *
kept_of(kvc_assigner *a, const char *id)
{
	for (size_t i = 0; i < a->poll.n_kept; i++) {
		if (strcmp(a->poll.kept[i].id, id) == 0) {
			return &a->poll.kept[i];
		}
	}
	a->poll.kept = kvi_reallocarray(a->poll.kept, a->poll.n_kept + 1,
					sizeof(*a->poll.kept));
	kvc_kept *k = &a->poll.kept[a->poll.n_kept++];
	*k = (kvc_kept){.id = kvi_strdup(id)};
	return k;
}

/* kept_update takes a shard's answer (consuming resp) and returns the
 * status to go on with: the answer, kept, or - when it says the listeners
 * are unchanged - the status kept, with the answer's shard-wide figures
 * (and *same set). */
static Kvindex__Response *
kept_update(kvc_kept *k, Kvindex__Response *resp, bool *same)
{
	const Kvindex__StatusResponse *st = resp->status;
	*same = false;
	if (st->has_unchanged && st->unchanged && k->resp != NULL &&
	    k->has_digest && st->has_digest && st->digest == k->digest) {
		*same = true;
		Kvindex__StatusResponse *ks = k->resp->status;
		ks->entries = st->entries;
		ks->store_bytes = st->store_bytes;
		ks->has_term = st->has_term;
		ks->term = st->term;
		kvindex__response__free_unpacked(resp, NULL);
		return k->resp;
	}
	if (k->resp != NULL) {
		kvindex__response__free_unpacked(k->resp, NULL);
	}
	k->resp = resp;
	k->has_digest = st->has_digest && !(st->has_unchanged && st->unchanged);
	k->digest = st->digest;
	return resp;
}

/* kept_prune drops what is kept of shards no longer in the set. */
static void
kept_prune(kvc_assigner *a)
{
	size_t w = 0;
	for (size_t i = 0; i < a->poll.n_kept; i++) {
		bool in = false;
		for (size_t j = 0; j < a->poll.n && !in; j++) {
			in = strcmp(a->poll.ids[j], a->poll.kept[i].id) == 0;
		}
		if (in) {
			a->poll.kept[w++] = a->poll.kept[i];
		} else {
			kept_fini(&a->poll.kept[i]);
		}
	}
	a->poll.n_kept = w;
}

/* kvc_poll_shards asks every shard for its listeners. When all answer that they
 * are as kept, from the same shards, as eligible, and all answered the
 * poll before too, owned is the poll before's (poll_same): the kept
 * answers it points into are unchanged. A shard that did not answer the
 * poll before has none of its listeners in that poll's owned, whatever
 * it kept from before its silence: its first answer rebuilds owned. */
void
kvc_poll_shards(kvc_assigner *a)
{
	kvc_shard **prev = a->poll.snap;
	size_t n_prev = a->poll.n;
	bool *prev_eligible = a->poll.eligible;
	bool *prev_answered = a->poll.answered;
	kvc_owned *prev_owned = a->poll.owned;
	size_t n_prev_owned = a->poll.n_owned;
	bool was_polled = a->poll.done;
	a->poll.snap = NULL;
	a->poll.eligible = NULL;
	a->poll.answered = NULL;
	a->poll.owned = NULL;
	kvc_poll_free(a);
	a->poll.snap = kvc_shardset_snapshot(a->shards, &a->poll.n);
	size_t n = a->poll.n;
	a->poll.ids = kvi_calloc(n + 1, sizeof(*a->poll.ids));
	a->poll.answered = kvi_calloc(n + 1, sizeof(bool));
	a->poll.eligible = kvi_calloc(n + 1, sizeof(bool));
	a->poll.resps = kvi_calloc(n + 1, sizeof(*a->poll.resps));

	Kvindex__StatusRequest sr = KVINDEX__STATUS_REQUEST__INIT;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &sr;
	/* a leader's polls carry its term, so that a shard learns it (and
	 * refuses its predecessor) before the first command */
	uint64_t term = 0;
	req.has_term = kvc_leading(a, &term) && term > 0;
	req.term = term;
	kvc_fanout f;
	kvc_fanout_init(&f);
	size_t *call = kvi_calloc(n + 1, sizeof(*call));
	for (size_t i = 0; i < n; i++) {
		a->poll.ids[i] = a->poll.snap[i]->id;
		/* the request is packed as it is sent: one since each */
		const kvc_kept *k = kept_of(a, a->poll.ids[i]);
		sr.has_since_digest = k->resp != NULL && k->has_digest;
		sr.since_digest = k->digest;
		call[i] =
		    poll_waits(a, a->poll.snap[i], &req)
			? kvc_fanout_start(&f, a->poll.snap[i]->client, &req,
					   a->cfg.poll_timeout_ms, NULL)
			: SIZE_MAX;
	}
	kvc_fanout_wait(&f);
	int64_t now = kvi_now_ms();
	size_t total = 0;
	bool same = was_polled && n == n_prev;
	for (size_t i = 0; i < n; i++) {
		kvc_call *c = call[i] != SIZE_MAX ? &f.calls[call[i]] : NULL;
		bool kept = false;
		/* c == NULL: known down, and its probe has not answered */
		if (c != NULL && c->rv == KVI_OK && c->resp != NULL &&
		    c->resp->body_case == KVINDEX__RESPONSE__BODY_STATUS) {
			a->poll.resps[i] = kept_update(
			    kept_of(a, a->poll.ids[i]), c->resp, &kept);
			c->resp = NULL;
			a->poll.answered[i] = true;
			shard_answered(a->poll.snap[i],
				       a->poll.resps[i]->status, now);
			total += a->poll.resps[i]->status->n_listeners;
		} else if (c != NULL) {
			kvc_shard_mark_down(a->poll.snap[i], c->rv, c->err,
					    now);
		}
		int64_t down = atomic_load(&a->poll.snap[i]->down_since_ms);
		bool grace = a->cfg.failover_grace_ms < 0 ||
			     a->poll.answered[i] ||
			     now - down < a->cfg.failover_grace_ms;
		a->poll.eligible[i] =
		    grace && !atomic_load(&a->poll.snap[i]->draining);
		same = same && kept && a->poll.snap[i] == prev[i] &&
		       prev_answered[i] &&
		       a->poll.eligible[i] == prev_eligible[i];
	}
	kvc_fanout_fini(&f);
	kvi_free(call);
	kept_prune(a);
	kvc_shardset_release(prev, n_prev);
	kvi_free(prev_eligible);
	kvi_free(prev_answered);
	a->poll.same = same;
	poll_gauges(a);
	if (same) {
		a->poll.owned = prev_owned;
		a->poll.n_owned = n_prev_owned;
		return;
	}
	kvi_free(prev_owned);

	a->poll.owned = kvi_calloc(total + 1, sizeof(*a->poll.owned));
	for (size_t i = 0; i < n; i++) {
		if (!a->poll.answered[i]) {
			continue;
		}
		const Kvindex__StatusResponse *st = a->poll.resps[i]->status;
		for (size_t k = 0; k < st->n_listeners; k++) {
			kvc_owned *o = &a->poll.owned[a->poll.n_owned++];
			o->key = st->listeners[k]->listener->key;
			o->shard = i;
			o->st = st->listeners[k];
		}
	}
	qsort(a->poll.owned, a->poll.n_owned, sizeof(*a->poll.owned),
	      owned_cmp);
	a->poll.done = true;
}
