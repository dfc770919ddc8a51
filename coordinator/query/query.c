#include "query.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "hash.h"
#include "log.h"
#include "qanswer.h"
#include "qbatch.h"
#include "qloop.h"
#include "rpc.h"

enum { ROUTE_COUNT = KVC_QUERY_HASHES + 1 };
enum { CODE_200 = 0, CODE_400, CODE_404, CODE_413, CODE_503, CODE_COUNT };

struct kvc_query {
	kvc_registry *reg;
	kvc_shardset *shards;
	kvc_query_config cfg;
	kvi_histogram *lat[ROUTE_COUNT];
	kvi_counter *count[ROUTE_COUNT][CODE_COUNT];
	kvi_counter *partial[ROUTE_COUNT]; /* 200s that say partial */
	kvi_counter *via[2]; /* shard calls: the loop's link, nng */
};

/* One query in flight. */
typedef struct qctx qctx;

/* The query's call to one shard. */
typedef struct qslot {
	kvc_qbatch_item item;
	qctx *c;
	size_t idx;
	bool answered; /* under c->mu */
} qslot;

struct qctx {
	kvc_query *q;
	kvi_http_req *req;
	kvc_query_route route;
	struct timespec t0;
	uint32_t block_size;
	Kvindex__QueryRequest qr; /* what every shard is sent */
	pthread_mutex_t mu;
	size_t pending, answered, total; /* under mu */
	kvc_qanswer_match *m;            /* every shard's matches; under mu */
	size_t n, cap;
	kvc_qanswer_group *g; /* their groups (kinds owned); under mu */
	size_t n_g, cap_g;
	kvc_shard **shards;
	qslot *slots; /* per shard */
};

static int
code_index(int status)
{
	switch (status) {
	case 200:
		return CODE_200;
	case 404:
		return CODE_404;
	case 413:
		return CODE_413;
	case 503:
		return CODE_503;
	default:
		return CODE_400;
	}
}

static void
finish(kvc_query *q, kvc_query_route route, const struct timespec *t0,
       kvi_http_req *req, int status, json_t *body)
{
	kvi_histogram_observe(q->lat[route], kvi_since_s(t0));
	kvi_counter_inc(q->count[route][code_index(status)]);
	kvi_http_reply_json(req, status, body);
}

static void
fail(kvc_query *q, kvc_query_route route, const struct timespec *t0,
     kvi_http_req *req, kvc_qerr *e)
{
	finish(q, route, t0, req, e->status, kvc_qerr_body(e));
	kvc_qerr_fini(e);
}

static void
qctx_free(qctx *c)
{
	/* maybe on the nng thread of a shard's reply: never close a shard's
	 * client from there */
	kvc_shardset_release_async(c->shards, c->total);
	kvi_free(c->slots);
	kvi_free(c->m);
	for (size_t i = 0; i < c->n_g; i++) {
		kvi_free((char *)c->g[i].kind);
	}
	kvi_free(c->g);
	kvi_free(c->qr.seq_hashes);
	kvi_free(c->qr.instances);
	kvi_free(c->qr.model);
	pthread_mutex_destroy(&c->mu);
	kvi_free(c);
}

/* compact_len returns the number of matches of qr in compact form:
 * its arrays' common length, 0 when they disagree (a malformed answer). */
static size_t
compact_len(const Kvindex__QueryResponse *qr)
{
	size_t n = qr->n_m_instance;
	return qr->n_m_rank == n && qr->n_m_gpu == n && qr->n_m_cpu == n &&
		       qr->n_m_disk == n
		   ? n
		   : 0;
}

/* merge builds the reply once every shard has answered or timed out. */
static void
merge(qctx *c)
{
	if (c->answered == 0 && c->total > 0) {
		kvc_qerr e = {0};
		kvc_qerr_set(&e, KVI_EUNREACHABLE, 503,
			     "no shard answered within %d ms (%zu "
			     "configured)",
			     c->q->cfg.deadline_ms, c->total);
		fail(c->q, c->route, &c->t0, c->req, &e);
		return;
	}
	/* the compact form names no pods: the registry does, and notes
	 * whether anything held matched (the silent mismatch check) */
	uint64_t *ids = kvi_calloc(c->n + 1, sizeof(*ids));
	const char **pods = kvi_calloc(c->n + 1, sizeof(*pods));
	bool matched = false;
	for (size_t i = 0; i < c->n; i++) {
		ids[i] = c->m[i].instance_id;
		matched |= c->m[i].longest > 0;
	}
	char *names = kvc_reg_answer_names(c->q->reg, c->qr.model, matched, ids,
					   c->n, pods);
	for (size_t i = 0; i < c->n; i++) {
		c->m[i].pod = pods[i];
	}
	/* what came from a shard whose store cannot commit is stale */
	const char **stale = kvi_calloc(c->total + 1, sizeof(*stale));
	size_t n_stale = 0;
	for (size_t i = 0; i < c->total; i++) {
		if (c->slots[i].answered &&
		    kvc_shard_stale(c->shards[i], NULL, 0)) {
			stale[n_stale++] = c->shards[i]->id;
		}
	}
	kvc_qanswer_result r = {
	    .model = c->qr.model,
	    .block_size = c->block_size,
	    .query_blocks = c->qr.n_seq_hashes,
	    .matches = c->m,
	    .n_matches = c->n,
	    .groups = c->g,
	    .top_k = c->qr.top_k,
	    .shards_answered = (uint32_t)c->answered,
	    .shards_total = (uint32_t)c->total,
	    .stale = stale,
	    .n_stale = n_stale,
	};
	size_t len;
	char *text = kvc_qanswer_text(&r, &len);
	kvi_free(ids);
	kvi_free(pods);
	kvi_free(names);
	kvi_free(stale);
	kvi_histogram_observe(c->q->lat[c->route], kvi_since_s(&c->t0));
	kvi_counter_inc(c->q->count[c->route][CODE_200]);
	if (c->answered < c->total) {
		kvi_counter_inc(c->q->partial[c->route]);
	}
	kvi_http_reply_take(c->req, 200, "application/json", text, len);
}

/* qctx_add_groups gives c's matches from `from` on the rows of their
 * KV cache groups that qr has (a hybrid model's listeners). Under c->mu. */
static void
qctx_add_groups(qctx *c, const Kvindex__QueryResponse *qr, size_t from)
{
	size_t n = qr->n_g_instance;
	if (n == 0 || qr->n_g_rank != n || qr->n_g_group != n ||
	    qr->n_g_kind != n || qr->n_g_window != n || qr->n_g_blocks != n) {
		return;
	}
	for (size_t i = from; i < c->n; i++) {
		kvc_qanswer_match *m = &c->m[i];
		for (size_t j = 0; j < n; j++) {
			if (qr->g_instance[j] != m->instance_id ||
			    qr->g_rank[j] != m->dp_rank) {
				continue;
			}
			if (c->n_g == c->cap_g) {
				c->cap_g = c->cap_g ? 2 * c->cap_g : 16;
				c->g = kvi_reallocarray(c->g, c->cap_g,
							sizeof(*c->g));
			}
			if (m->n_groups++ == 0) {
				m->g_first = (uint32_t)c->n_g;
			}
			c->g[c->n_g++] = (kvc_qanswer_group){
			    .group = qr->g_group[j],
			    .kind = kvi_strdup(qr->g_kind[j]),
			    .window = qr->g_window[j],
			    .blocks = qr->g_blocks[j],
			};
		}
	}
}

/* qctx_add appends a shard's matches to c's. Under c->mu. */
static void
qctx_add(qctx *c, const Kvindex__QueryResponse *qr)
{
	size_t n = compact_len(qr);
	if (c->n + n > c->cap) {
		c->cap = c->n + n > 2 * c->cap ? c->n + n : 2 * c->cap;
		c->m = kvi_reallocarray(c->m, c->cap, sizeof(*c->m));
	}
	for (size_t j = 0; j < n; j++) {
		uint32_t g = qr->m_gpu[j], cp = qr->m_cpu[j], d = qr->m_disk[j];
		c->m[c->n++] = (kvc_qanswer_match){
		    .instance_id = qr->m_instance[j],
		    .dp_rank = qr->m_rank[j],
		    .gpu = g,
		    .cpu = cp,
		    .disk = d,
		    .longest = g + cp + d,
		    .pending = qr->n_m_pending == n ? qr->m_pending[j] : 0,
		};
	}
	qctx_add_groups(c, qr, c->n - n);
}

/* qctx_unhold drops one of c's pending counts; the last one merges,
 * replies and frees c. */
static void
qctx_unhold(qctx *c)
{
	pthread_mutex_lock(&c->mu);
	bool last = --c->pending == 0;
	pthread_mutex_unlock(&c->mu);
	if (last) {
		merge(c);
		qctx_free(c);
	}
}

static void
shard_done(void *arg, kvi_err rv, const Kvindex__QueryResponse *qr,
	   const char *err)
{
	qslot *sl = arg;
	qctx *c = sl->c;
	if (rv != KVI_OK) {
		atomic_fetch_add(&c->shards[sl->idx]->fanout_errors, 1);
		KVI_DEBUG("fanout_failed", "shard=%s err=%s: %s",
			  c->shards[sl->idx]->id, kvi_strerror(rv), err);
		if (rv == KVI_EUNREACHABLE) {
			/* its connection broke under the query: the next
			 * queries skip it until a poll finds it again */
			kvc_shard_mark_down(c->shards[sl->idx], rv, err,
					    kvi_now_ms());
		}
	} else {
		pthread_mutex_lock(&c->mu);
		qctx_add(c, qr);
		c->answered++;
		sl->answered = true;
		pthread_mutex_unlock(&c->mu);
	}
	qctx_unhold(c);
}

/* check_restriction verifies instances and dp_rank against the
 * registry. */
static kvi_err
check_restriction(kvc_query *q, const kvc_qreq *qq, kvc_qerr *e)
{
	for (size_t i = 0; i < qq->n_instances; i++) {
		uint64_t id = qq->instances[i];
		uint32_t ranks[64];
		int n = kvc_reg_ranks(q->reg, id, false, ranks, 64);
		if (n < 0) {
			return kvc_qerr_set(e, KVI_ENOENT, 400,
					    "instances[%zu]: instance %" PRIu64
					    " is not registered",
					    i, id);
		}
		if (!qq->has_dp_rank) {
			continue;
		}
		/* is dp_rank one of its ranks? ask for all of them */
		uint32_t *all = kvi_calloc((size_t)n + 1, sizeof(*all));
		kvc_reg_ranks(q->reg, id, false, all, n);
		bool found = false;
		for (int k = 0; k < n && !found; k++) {
			found = all[k] == qq->dp_rank;
		}
		kvi_free(all);
		if (found) {
			continue;
		}
		int nc = kvc_reg_ranks(q->reg, id, true, NULL, 0);
		uint32_t *conn =
		    kvi_calloc((size_t)(nc > 0 ? nc : 0) + 1, sizeof(*conn));
		nc = kvc_reg_ranks(q->reg, id, true, conn, nc > 0 ? nc : 0);
		json_t *arr = json_array();
		for (int k = 0; k < nc; k++) {
			json_array_append_new(arr, json_integer(conn[k]));
		}
		kvi_free(conn);
		kvc_qerr_set(e, KVI_ENOENT, 400,
			     "dp_rank %u is not a rank of instance %" PRIu64
			     " (it has %d)",
			     qq->dp_rank, id, n);
		e->extra = json_pack("{s:o}", "connected_ranks", arr);
		return KVI_ENOENT;
	}
	return KVI_OK;
}

/* route_of returns model's block size, or 0 with e set when no
 * registered pod serves it, and which of the n shards to ask. */
static uint32_t
route_of(kvc_query *q, const char *model, kvc_shard *const *shards, size_t n,
	 bool *ask, kvc_qerr *e)
{
	const char **ids = kvi_calloc(n + 1, sizeof(*ids));
	for (size_t i = 0; i < n; i++) {
		ids[i] = shards[i]->id;
	}
	uint32_t bs = kvc_reg_route(q->reg, model, ids, n, ask);
	kvi_free(ids);
	if (bs == 0) {
		kvc_qerr_set(e, KVI_ENOENT, 404,
			     "model %s is not served by any registered "
			     "pod",
			     model);
	}
	return bs;
}

/* qctx_alloc returns the context of a query to the shards[0..total) it
 * holds, asking for hashes[0..nb) (taken) and taking r's model and
 * instances. */
static qctx *
qctx_alloc(kvc_query *q, kvi_http_req *req, kvc_query_route route,
	   const struct timespec *t0, uint32_t bs, kvc_qreq *r,
	   uint64_t *hashes, size_t nb, kvc_shard **shards, size_t total)
{
	qctx *c = kvi_calloc(1, sizeof(*c));
	c->q = q;
	c->req = req;
	c->route = route;
	c->t0 = *t0;
	c->block_size = bs;
	pthread_mutex_init(&c->mu, NULL);
	kvindex__query_request__init(&c->qr);
	c->qr.model = r->model;
	c->qr.seq_hashes = hashes;
	c->qr.n_seq_hashes = nb;
	c->qr.instances = r->instances;
	c->qr.n_instances = r->n_instances;
	c->qr.has_dp_rank = r->has_dp_rank;
	c->qr.dp_rank = r->dp_rank;
	c->qr.has_top_k = r->top_k > 0;
	c->qr.top_k = r->top_k;
	c->qr.has_pending = !r->no_pending;
	c->qr.pending = !r->no_pending;
	if (r->n_tokens > 0 && r->n_tokens % bs == 0 && nb > 0) {
		/* the engine recomputes the last token, so the last block */
		c->qr.has_hit_cap = true;
		c->qr.hit_cap = (uint32_t)nb - 1;
	}
	r->model = NULL;
	r->instances = NULL;
	c->shards = shards;
	c->total = total;
	c->slots = kvi_calloc(c->total + 1, sizeof(*c->slots));
	return c;
}

kvc_qloop *
kvc_query_loop(kvc_query *q, kvi_http_req *req)
{
	if (q->cfg.via_nng) {
		return NULL;
	}
	struct event_base *base;
	void **local = kvi_http_req_local(req, &base);
	if (*local == NULL) {
		*local = kvc_qloop_alloc(base, q->cfg.batch_inflight,
					 q->cfg.batch_max);
	}
	return *local;
}

/* send_all submits c's query to every shard ask[] names, on the loop's
 * own links unless the configuration says through nng, then lets go of
 * c's own count. */
static void
send_all(qctx *c, const bool *ask, size_t asked)
{
	kvc_query *q = c->q;
	kvc_qloop *ql = asked > 0 ? kvc_query_loop(q, c->req) : NULL;
	/* one extra count holds the context until every call has started */
	c->pending = asked + 1;
	int64_t deadline = kvi_now_ms() + q->cfg.deadline_ms;
	for (size_t i = 0; i < c->total; i++) {
		if (!ask[i]) {
			continue;
		}
		qslot *sl = &c->slots[i];
		sl->c = c;
		sl->idx = i;
		sl->item = (kvc_qbatch_item){
		    .query = &c->qr,
		    .deadline_ms = deadline,
		    .done = shard_done,
		    .arg = sl,
		};
		kvc_qbatch *qb = ql != NULL
				     ? kvc_qloop_batcher(ql, c->shards[i])
				     : c->shards[i]->qbatch;
		kvi_counter_inc(q->via[qb == c->shards[i]->qbatch]);
		kvc_qbatch_submit(qb, &sl->item);
	}
	qctx_unhold(c);
}

void
kvc_query_start(kvc_query *q, kvi_http_req *req, kvc_query_route route,
		const struct timespec *t0, kvc_qreq *r)
{
	kvc_qerr e = {0};
	size_t total;
	kvc_shard **shards = kvc_shardset_snapshot(q->shards, &total);
	bool *ask = kvi_calloc(total + 1, sizeof(*ask));
	uint32_t bs = route_of(q, r->model, shards, total, ask, &e);
	if (bs == 0 || check_restriction(q, r, &e) != KVI_OK) {
		kvc_shardset_release(shards, total);
		kvi_free(ask);
		kvc_qreq_fini(r);
		fail(q, route, t0, req, &e);
		return;
	}
	size_t nb;
	uint64_t *hashes =
	    kvc_qreq_seq_hashes(r, route == KVC_QUERY_TOKENS, bs, &nb);
	qctx *c =
	    qctx_alloc(q, req, route, t0, bs, r, hashes, nb, shards, total);
	kvc_qreq_fini(r);
	/* The answers known without asking count as given: a shard that owns
	 * none of the model's listeners has none to give, and with no full
	 * block nothing can match. A shard known down that owns some is not
	 * waited for: it is missing from the answer, which says partial. */
	size_t asked = 0;
	for (size_t i = 0; i < total; i++) {
		ask[i] = ask[i] && nb > 0;
		c->answered += !ask[i];
		if (ask[i] && kvc_shard_known_down(shards[i])) {
			ask[i] = false;
			atomic_fetch_add(&shards[i]->fanout_errors, 1);
		}
		asked += ask[i];
	}
	send_all(c, ask, asked);
	kvi_free(ask);
}

void
kvc_query_refuse(kvc_query *q, kvi_http_req *req, kvc_query_route route,
		 const struct timespec *t0, kvc_qerr *e)
{
	fail(q, route, t0, req, e);
}

void
kvc_query_limits(const kvc_query *q, size_t *max_tokens, size_t *max_hashes)
{
	*max_tokens = q->cfg.max_tokens;
	*max_hashes = q->cfg.max_hashes;
}

void
kvc_query_loop_free(void *q, void *local)
{
	(void)q;
	kvc_qloop_free(local);
}

kvc_query *
kvc_query_alloc(kvc_registry *reg, kvc_shardset *shards, kvi_metrics *m,
		const kvc_query_config *cfg)
{
	kvc_query *q = kvi_calloc(1, sizeof(*q));
	q->reg = reg;
	q->shards = shards;
	if (cfg != NULL) {
		q->cfg = *cfg;
	}
	if (q->cfg.deadline_ms <= 0) {
		q->cfg.deadline_ms = 100;
	}
	if (q->cfg.max_tokens == 0) {
		q->cfg.max_tokens = (size_t)1 << 20;
	}
	if (q->cfg.max_hashes == 0) {
		q->cfg.max_hashes = (size_t)1 << 16;
	}
	static const double bounds[] = {
	    50e-6, 100e-6, 200e-6, 300e-6, 500e-6, 750e-6, 1e-3,   2e-3, 3e-3,
	    5e-3,  10e-3,  20e-3,  50e-3,  100e-3, 200e-3, 500e-3, 1.0,
	};
	static const char *const eps[] = {"query", "query_by_hash"};
	static const char *const codes[] = {"200", "400", "404", "413", "503"};
	static const char *const via[] = {"link", "nng"};
	kvi_metrics_histogram_vec_add(
	    m, "kvindex_coord_query_seconds",
	    "Query latency at the coordinator, from the handler to the reply.",
	    bounds, sizeof(bounds) / sizeof(bounds[0]), "endpoint", eps, 2,
	    q->lat);
	for (int e = 0; e < ROUTE_COUNT; e++) {
		char name[64];
		snprintf(name, sizeof(name), "kvindex_coord_%s_total",
			 e == KVC_QUERY_TOKENS ? "queries" : "hash_queries");
		kvi_metrics_counter_vec_add(
		    m, name,
		    e == KVC_QUERY_TOKENS
			? "POST /query requests, by status code."
			: "POST /query_by_hash requests, by status code.",
		    "code", codes, CODE_COUNT, q->count[e]);
	}
	kvi_metrics_counter_vec_add(m, "kvindex_coord_partial_answers_total",
				    "Query answers (200) that say partial: a "
				    "shard of the route did not "
				    "answer within the deadline.",
				    "endpoint", eps, 2, q->partial);
	kvi_metrics_counter_vec_add(
	    m, "kvindex_coord_shard_queries_total",
	    "Queries sent to a shard: on the HTTP loop's own link to it, or "
	    "through nng (--query-via-nng, or while the link connects).",
	    "via", via, 2, q->via);
	return q;
}

void
kvc_query_free(kvc_query *q)
{
	kvi_free(q);
}
