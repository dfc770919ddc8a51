/*
 * handoff.c - planned moves between shards (docs/design.md#assignment).
 *
 * A move is a hand-off, not a drop. The coordinator assigns the listener
 * to its new owner naming the old one (AssignRequest.handoff_from). The new
 * owner subscribes at once and holds the live batches in the listener's
 * backlog (KVL_R_HANDOFF_ARMED, recovery.h); once its SUB is connected (and a
 * moment more, for the subscription to reach the engine: a batch published
 * before that reaches neither the backlog nor, if the snapshot were older,
 * the state) it takes the listener's state from the old owner over nng:
 * HandoffRequest chunks of a snapshot the old owner takes of the listener,
 * exact at its watermark. Once the whole snapshot is here it is applied: to
 * the store in one group commit - never half - and to the index in bounded
 * runs, each under its own write lock, so that a query of the partition is
 * not held for the whole of a large listener (until the last run a query
 * sees part of it, which the old owner's answer, whole, outranks in the
 * merge); the listener then catches up from the snapshot's watermark
 * through the backlog; what the backlog lacks in between is repaired by the
 * engine's replay socket or /kv_recover, or, for engines that have neither, by
 * a newer snapshot from the old owner, which keeps applying the live stream
 * meanwhile. The coordinator moves ownership only once the new owner is ACTIVE,
 * so queries see the listener throughout.
 *
 * If the old owner cannot be reached or no longer has the listener, the
 * new owner starts as any new listener does (from the engine, or from the
 * live stream); the old owner, if alive, still owns the listener until the
 * new one is active. If the new owner dies, the old one never stopped.
 *
 * Threads: one hand-off thread per shard fetches the chunks (blocking nng
 * calls, one hand-off at a time, each chunk pulled when the last one is
 * stored: the flow control) and queues each finished fetch for the ingest
 * thread, which it wakes; everything else runs on the ingest thread. The
 * old owner's side (kvg_do_handoff) is an ingest-thread request like dump.
 */
#include "handoff.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "apply.h"
#include "clock.h"
#include "log.h"
#include "rpc.h"

#define KVG_HANDOFF_CHUNK      65536u
#define KVG_HANDOFF_TIMEOUT_MS 10000
#define KVG_HANDOFF_RETRY_MS   20
#define KVG_HANDOFF_FAILS      5 /* failed fetches before giving up */

/* One fetch: the job the ingest thread queues and, filled in, the result
 * the hand-off thread gives back. */
typedef struct kvg_hojob {
	struct kvg_hojob *next;
	uint64_t token;
	char *key, *from;
	int wait_ms; /* before asking: a newer snapshot, or a retry */
	/* the result */
	kvi_err rv;
	char err[256];
	uint64_t *ext, *seq;
	uint8_t *tiers;
	size_t n;
	kvs_mark mark;
} kvg_hojob;

static void
hojob_free(kvg_hojob *j)
{
	kvi_free(j->key);
	kvi_free(j->from);
	kvi_free(j->ext);
	kvi_free(j->seq);
	kvi_free(j->tiers);
	kvi_free(j);
}

/* ---- the old owner ------------------------------------------------- */

static void
snapshot_free(kvl_snapshot *s)
{
	if (s != NULL) {
		kvi_free(s->ext);
		kvi_free(s->seq);
		kvi_free(s->tiers);
		kvi_free(s);
	}
}

static void
snapshot_entry(void *arg, uint64_t ext, uint64_t seq, uint8_t tiers)
{
	kvl_snapshot *s = arg;
	s->ext[s->n] = ext;
	s->seq[s->n] = seq;
	s->tiers[s->n] = tiers;
	s->n++;
}

static kvl_snapshot *
snapshot_take(kvg_ingest *g, kvl_listener *l)
{
	size_t n = kvx_listener_records(g->idx, l->lid);
	kvl_snapshot *s = kvi_calloc(1, sizeof(*s));
	s->ext = kvi_reallocarray(NULL, n + 1, sizeof(uint64_t));
	s->seq = kvi_reallocarray(NULL, n + 1, sizeof(uint64_t));
	s->tiers = kvi_malloc(n + 1);
	kvx_listener_foreach(g->idx, l->lid, snapshot_entry, s);
	s->mark = l->mark;
	return s;
}

kvi_err
kvg_do_handoff(kvg_ingest *g, kvg_cmd *c)
{
	kvl_listener *l = kvg_listener_find(g, c->ho_req->key);
	if (l == NULL) {
		snprintf(c->err, c->errlen, "listener %s is not owned here",
			 c->ho_req->key);
		return KVI_ENOENT;
	}
	uint64_t off = c->ho_req->offset;
	if (off == 0) {
		snapshot_free(l->ho.snap);
		l->ho.snap = snapshot_take(g, l);
		kvl_log(l, "handoff_snapshot", "entries=%zu watermark=%" PRIu64,
			l->ho.snap->n, l->ho.snap->mark.wm);
	}
	kvl_snapshot *s = l->ho.snap;
	if (s == NULL || off > s->n) {
		snprintf(c->err, c->errlen,
			 "no snapshot of %s reaches offset %" PRIu64
			 ": start at 0",
			 l->key, off);
		return KVI_EINVAL;
	}
	uint32_t limit = c->ho_req->has_limit && c->ho_req->limit > 0
			     ? c->ho_req->limit
			     : KVG_HANDOFF_CHUNK;
	size_t m = s->n - off < limit ? s->n - off : limit;
	Kvindex__HandoffResponse *out = c->ho_resp;
	out->has_watermark = s->mark.has_wm;
	out->watermark = s->mark.wm;
	out->has_fingerprint = s->mark.has_fp;
	out->fingerprint = s->mark.fp;
	out->has_incomplete = s->mark.incomplete;
	out->incomplete = s->mark.incomplete;
	out->total = s->n;
	out->n_ext = out->n_seq = m;
	out->ext = kvp_arena_alloc(c->arena, (m + 1) * sizeof(uint64_t));
	out->seq = kvp_arena_alloc(c->arena, (m + 1) * sizeof(uint64_t));
	memcpy(out->ext, s->ext + off, m * sizeof(uint64_t));
	memcpy(out->seq, s->seq + off, m * sizeof(uint64_t));
	out->has_tiers = true;
	out->tiers.len = m;
	out->tiers.data = kvp_arena_alloc(c->arena, m + 1);
	memcpy(out->tiers.data, s->tiers + off, m);
	if (off + m == s->n) {
		snapshot_free(s);
		l->ho.snap = NULL;
	}
	return KVI_OK;
}

/* ---- the hand-off thread -------------------------------------------- */

/* pace sleeps until `done` entries are within the rate cap, counted
 * from t0. */
static void
pace(const kvg_ingest *g, double t0, uint64_t done)
{
	uint64_t rate = g->cfg.handoff_rate;
	if (rate == 0) {
		return;
	}
	double ahead = (double)done / (double)rate - (kvi_now_s() - t0);
	if (ahead > 0) {
		usleep((useconds_t)(ahead * 1e6));
	}
}

/* fetch_chunks reads the whole snapshot of j->key from j->from. */
static void
fetch_chunks(kvg_ingest *g, kvp_client *cl, kvg_hojob *j)
{
	uint64_t off = 0, total = 0;
	size_t cap = 0;
	uint32_t chunk = KVG_HANDOFF_CHUNK;
	if (g->cfg.handoff_rate > 0 && g->cfg.handoff_rate / 10 < chunk) {
		/* a tenth of a second's worth per chunk */
		chunk = g->cfg.handoff_rate / 10 > 0
			    ? (uint32_t)(g->cfg.handoff_rate / 10)
			    : 1;
	}
	double t0 = kvi_now_s();
	do {
		Kvindex__HandoffRequest hr = KVINDEX__HANDOFF_REQUEST__INIT;
		hr.key = j->key;
		hr.offset = off;
		hr.has_limit = true;
		hr.limit = chunk;
		Kvindex__Request req = KVINDEX__REQUEST__INIT;
		req.body_case = KVINDEX__REQUEST__BODY_HANDOFF;
		req.handoff = &hr;
		Kvindex__Response *resp = NULL;
		j->rv = kvp_call(cl, &req, KVG_HANDOFF_TIMEOUT_MS, &resp,
				 j->err, sizeof(j->err));
		const Kvindex__HandoffResponse *h =
		    resp != NULL &&
			    resp->body_case == KVINDEX__RESPONSE__BODY_HANDOFF
			? resp->handoff
			: NULL;
		if (j->rv == KVI_OK && (h == NULL || h->n_ext != h->n_seq ||
					h->tiers.len != h->n_ext ||
					(off > 0 && h->total != total) ||
					off + h->n_ext > h->total ||
					(h->n_ext == 0 && off < h->total))) {
			j->rv = KVI_EPROTO;
			snprintf(j->err, sizeof(j->err),
				 "a hand-off chunk that does not fit");
		}
		if (j->rv != KVI_OK) {
			if (resp != NULL) {
				kvindex__response__free_unpacked(resp, NULL);
			}
			return;
		}
		if (off == 0) {
			total = h->total;
			j->mark = (kvs_mark){.has_wm = h->has_watermark,
					     .wm = h->watermark,
					     .has_fp = h->has_fingerprint,
					     .fp = h->fingerprint,
					     .incomplete = h->incomplete};
			cap = total + 1;
			j->ext = kvi_reallocarray(NULL, cap, sizeof(uint64_t));
			j->seq = kvi_reallocarray(NULL, cap, sizeof(uint64_t));
			j->tiers = kvi_malloc(cap);
		}
		if (h->n_ext > 0) {
			memcpy(j->ext + off, h->ext,
			       h->n_ext * sizeof(uint64_t));
			memcpy(j->seq + off, h->seq,
			       h->n_ext * sizeof(uint64_t));
			memcpy(j->tiers + off, h->tiers.data, h->n_ext);
		}
		off += h->n_ext;
		kvindex__response__free_unpacked(resp, NULL);
		pace(g, t0, off);
	} while (off < total && !atomic_load(&g->stopping));
	j->n = (size_t)off;
	if (off < total) {
		j->rv = KVI_ECLOSED;
		snprintf(j->err, sizeof(j->err), "the shard is stopping");
	}
}

static void *
handoff_main(void *arg)
{
	kvg_ingest *g = arg;
	pthread_mutex_lock(&g->handoffs.mu);
	for (;;) {
		while (g->handoffs.jobs == NULL && !g->handoffs.stop) {
			pthread_cond_wait(&g->handoffs.cv, &g->handoffs.mu);
		}
		if (g->handoffs.stop) {
			break;
		}
		kvg_hojob *j = g->handoffs.jobs;
		g->handoffs.jobs = j->next;
		j->next = NULL;
		pthread_mutex_unlock(&g->handoffs.mu);
		if (j->wait_ms > 0) {
			usleep((useconds_t)j->wait_ms * 1000);
		}
		kvp_client *cl = NULL;
		j->rv = kvp_client_open(j->from, &cl);
		if (j->rv != KVI_OK) {
			snprintf(j->err, sizeof(j->err), "bad address %.200s",
				 j->from);
		} else {
			fetch_chunks(g, cl, j);
			kvp_client_close(cl);
		}
		pthread_mutex_lock(&g->handoffs.mu);
		j->next = g->handoffs.done;
		g->handoffs.done = j;
		pthread_mutex_unlock(&g->handoffs.mu);
		kvg_wake(g);
		pthread_mutex_lock(&g->handoffs.mu);
	}
	pthread_mutex_unlock(&g->handoffs.mu);
	return NULL;
}

kvi_err
kvg_handoff_start(kvg_ingest *g)
{
	pthread_mutex_init(&g->handoffs.mu, NULL);
	pthread_cond_init(&g->handoffs.cv, NULL);
	if (pthread_create(&g->handoffs.thread, NULL, handoff_main, g) != 0) {
		return KVI_EIO;
	}
	g->handoffs.started = true;
	return KVI_OK;
}

bool
kvg_handoff_running(const kvg_ingest *g)
{
	return g->handoffs.started;
}

static void
hojobs_free(kvg_hojob *j)
{
	while (j != NULL) {
		kvg_hojob *next = j->next;
		hojob_free(j);
		j = next;
	}
}

void
kvg_handoff_stop(kvg_ingest *g)
{
	if (!g->handoffs.started) {
		return;
	}
	pthread_mutex_lock(&g->handoffs.mu);
	g->handoffs.stop = true;
	pthread_cond_signal(&g->handoffs.cv);
	pthread_mutex_unlock(&g->handoffs.mu);
	pthread_join(g->handoffs.thread, NULL);
	hojobs_free(g->handoffs.jobs);
	hojobs_free(g->handoffs.done);
	g->handoffs.jobs = g->handoffs.done = NULL;
	pthread_mutex_destroy(&g->handoffs.mu);
	pthread_cond_destroy(&g->handoffs.cv);
	g->handoffs.started = false;
}

/* ---- the new owner -------------------------------------------------- */

void
kvg_handoff_ask(kvg_ingest *g, kvl_listener *l)
{
	kvg_hojob *j = kvi_calloc(1, sizeof(*j));
	l->ho.token =
	    ((uint64_t)l->lid << 32) | (++g->handoffs.gen & 0xffffffffu);
	j->token = l->ho.token;
	j->key = kvi_strdup(l->key);
	j->from = kvi_strdup(l->ho.from);
	/* a newer snapshot gives the old owner a moment to apply; a retry
	 * after a failure backs off: 100, 200, 400, 800 ms */
	j->wait_ms = l->ho.fails > 0   ? 100 << (l->ho.fails - 1)
		     : l->ho.tries > 0 ? KVG_HANDOFF_RETRY_MS
				       : 0;
	l->ho.tries++;
	kvl_log(l, "handoff_begin", "from=%s try=%d", l->ho.from, l->ho.tries);
	pthread_mutex_lock(&g->handoffs.mu);
	kvg_hojob **p = &g->handoffs.jobs;
	while (*p != NULL) {
		p = &(*p)->next;
	}
	*p = j;
	pthread_cond_signal(&g->handoffs.cv);
	pthread_mutex_unlock(&g->handoffs.mu);
}

void
kvg_handoff_forget(kvl_listener *l)
{
	kvi_free(l->ho.from);
	l->ho.from = NULL;
	snapshot_free(l->ho.snap);
	l->ho.snap = NULL;
}

/* on_handoff takes one finished fetch. */
static void
on_handoff(kvg_ingest *g, kvg_hojob *j)
{
	kvl_listener *l = kvg_listener(g, (uint32_t)(j->token >> 32));
	if (l == NULL || l->recovery.state != KVL_R_HANDOFF ||
	    l->ho.token != j->token) {
		return; /* a listener gone, or an answer to an older ask */
	}
	if (j->rv != KVI_OK) {
		l->c.handoffs_failed++;
		kvl_error(l, "hand-off from %.100s: %s (%.100s)", l->ho.from,
			  kvi_strerror(j->rv), j->err);
		kvl_log(l, "handoff_failed", "from=%s error=\"%s\"", l->ho.from,
			l->last_error);
		if (++l->ho.fails < KVG_HANDOFF_FAILS && j->rv != KVI_ENOENT) {
			/* The old owner may be restarting: ask again. */
			kvg_handoff_ask(g, l);
			return;
		}
		kvg_handoff_forget(l);
		kvq_recovery_on(&g->recovery, l,
				&(kvq_event){.kind = KVQ_EV_HANDOFF_FAILED});
		return;
	}
	kva_handoff(g->idx, &g->recovery.scratch, l, j->ext, j->seq, j->tiers,
		    j->n, &j->mark);
	l->ho.taken = true;
	l->ho.blocks = j->n;
	l->c.handoffs++;
	kvl_log(l, "handoff_applied", "from=%s entries=%zu watermark=%" PRIu64,
		l->ho.from, j->n, j->mark.wm);
	kvq_recovery_on(&g->recovery, l,
			&(kvq_event){.kind = KVQ_EV_HANDOFF_TAKEN});
}

void
kvg_handoff_results(kvg_ingest *g)
{
	if (!g->handoffs.started) {
		return;
	}
	pthread_mutex_lock(&g->handoffs.mu);
	kvg_hojob *done = g->handoffs.done;
	g->handoffs.done = NULL;
	pthread_mutex_unlock(&g->handoffs.mu);
	/* oldest first */
	kvg_hojob *rev = NULL;
	while (done != NULL) {
		kvg_hojob *next = done->next;
		done->next = rev;
		rev = done;
		done = next;
	}
	while (rev != NULL) {
		kvg_hojob *next = rev->next;
		on_handoff(g, rev);
		hojob_free(rev);
		rev = next;
	}
}
