#include "handler.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "rpc.h"
#include "topk.h"

struct kvh_shard {
	kvx_index *idx;
	kvg_ingest *ingest;
	kvd_pending *pending;
	uint32_t pending_ttl_ms;
	kvi_histogram *h_query;
	kvi_counter *c_queries;
	kvi_counter *c_unauthenticated;
	_Atomic uint64_t term; /* the newest leadership term seen */
	kvi_gauge *g_term;
	kvi_counter *c_fenced;
};

/* fence admits a command of the request's term and raises the newest
 * term seen to it; a command of an older term - from a coordinator that
 * led before a pause and has not noticed it lost the lease - is refused
 * (err says why). Any request carries the term; only assign and unassign
 * are refused for it. */
static bool
fence(kvh_shard *s, const Kvindex__Request *req, bool command, char *err,
      size_t errlen)
{
	uint64_t term = req->has_term ? req->term : 0;
	uint64_t seen = atomic_load(&s->term);
	while (term > seen) {
		if (atomic_compare_exchange_weak(&s->term, &seen, term)) {
			KVI_INFO("term_raised",
				 "term=%" PRIu64 " from=%" PRIu64, term, seen);
			kvi_gauge_set(s->g_term, (int64_t)term);
			return true;
		}
	}
	if (command && term < seen) {
		kvi_counter_inc(s->c_fenced);
		snprintf(err, errlen,
			 "a command of leadership term %" PRIu64
			 ", older than term %" PRIu64 " already seen: refused",
			 term, seen);
		KVI_WARN("fenced", "%s", err);
		return false;
	}
	return true;
}

/* Matches in the compact form of QueryResponse, grown in the arena; with
 * a top_k, the k best are selected in topk first. With pending entries
 * (pd), each match's are counted past its exact prefix, and the listeners
 * matched are noted, so that those with only pending blocks can be
 * added. */
typedef struct kvh_matches {
	kvp_arena *arena;
	uint64_t *instance;
	uint32_t *rank, *gpu, *cpu, *disk, *pending;
	size_t n, cap;
	kvh_topk *topk;        /* NULL: keep every match */
	const kvd_pending *pd; /* NULL: exact entries only */
	const uint64_t *seq;
	size_t n_seq;
	int64_t now_ms;
	bool any_pending;
	uint32_t *seen; /* listener ids matched exactly */
	size_t n_seen, cap_seen;
	/* hybrid listeners' groups, one row each (QueryResponse.g_*) */
	uint64_t *g_instance;
	uint32_t *g_rank, *g_group, *g_window, *g_blocks;
	char **g_kind;
	size_t n_g, cap_g;
} kvh_matches;

static void *
grow(kvp_arena *a, void *old, size_t n, size_t cap, size_t size)
{
	void *p = kvp_arena_alloc(a, cap * size);
	if (n > 0) {
		memcpy(p, old, n * size);
	}
	return p;
}

/* match_push appends one match to the compact arrays. */
static void
match_push(kvh_matches *ms, const kvh_topk_entry *e)
{
	if (ms->n == ms->cap) {
		size_t cap = ms->cap ? ms->cap * 2 : 64;
		kvp_arena *a = ms->arena;
		ms->instance = grow(a, ms->instance, ms->n, cap, 8);
		ms->rank = grow(a, ms->rank, ms->n, cap, 4);
		ms->gpu = grow(a, ms->gpu, ms->n, cap, 4);
		ms->cpu = grow(a, ms->cpu, ms->n, cap, 4);
		ms->disk = grow(a, ms->disk, ms->n, cap, 4);
		ms->pending = grow(a, ms->pending, ms->n, cap, 4);
		ms->cap = cap;
	}
	size_t i = ms->n++;
	ms->instance[i] = e->instance_id;
	ms->rank[i] = e->dp_rank;
	ms->gpu[i] = e->gpu;
	ms->cpu[i] = e->cpu;
	ms->disk[i] = e->disk;
	ms->pending[i] = e->pending;
	ms->any_pending |= e->pending > 0;
}

/* match_keep keeps a match: every one, or the top_k best. */
static void
match_keep(kvh_matches *ms, const kvh_topk_entry *e)
{
	if (ms->topk == NULL) {
		match_push(ms, e);
	} else {
		kvh_topk_add(ms->topk, e);
	}
}

/* groups_push keeps the rows of a hybrid listener's groups. */
static void
groups_push(kvh_matches *ms, const kvx_listener_info *info, const kvx_match *m)
{
	kvp_arena *a = ms->arena;
	if (ms->n_g + m->n_groups > ms->cap_g) {
		size_t cap = 2 * (ms->n_g + m->n_groups);
		ms->g_instance = grow(a, ms->g_instance, ms->n_g, cap, 8);
		ms->g_rank = grow(a, ms->g_rank, ms->n_g, cap, 4);
		ms->g_group = grow(a, ms->g_group, ms->n_g, cap, 4);
		ms->g_window = grow(a, ms->g_window, ms->n_g, cap, 4);
		ms->g_blocks = grow(a, ms->g_blocks, ms->n_g, cap, 4);
		ms->g_kind = grow(a, ms->g_kind, ms->n_g, cap, sizeof(char *));
		ms->cap_g = cap;
	}
	for (uint32_t k = 0; k < m->n_groups; k++) {
		size_t i = ms->n_g++;
		ms->g_instance[i] = info->instance_id;
		ms->g_rank[i] = info->dp_rank;
		ms->g_group[i] = m->group_ids[k];
		ms->g_window[i] = m->group_specs[k].window;
		ms->g_blocks[i] = m->group_blocks[k];
		/* names of static storage: the message only points at them */
		ms->g_kind[i] = (char *)kvx_kind_name(m->group_specs[k].kind);
	}
}

static void
match_add(void *arg, const kvx_listener_info *info, const kvx_match *m)
{
	kvh_matches *ms = arg;
	kvh_topk_entry e = {
	    .instance_id = info->instance_id,
	    .dp_rank = info->dp_rank,
	    .gpu = m->gpu,
	    .cpu = m->cpu,
	    .disk = m->disk,
	    .longest = m->longest,
	};
	if (ms->pd != NULL) {
		e.pending =
		    (uint32_t)kvd_extend(ms->pd, info->lid, ms->seq, m->longest,
					 ms->n_seq, ms->now_ms);
		if (ms->n_seen == ms->cap_seen) {
			size_t cap = ms->cap_seen ? ms->cap_seen * 2 : 64;
			ms->seen = grow(ms->arena, ms->seen, ms->n_seen, cap,
					sizeof(*ms->seen));
			ms->cap_seen = cap;
		}
		ms->seen[ms->n_seen++] = info->lid;
	}
	if (m->n_groups > 1) {
		groups_push(ms, info, m);
	}
	match_keep(ms, &e);
}

/* pending_only_add keeps a listener that holds none of the query but
 * has its first blocks pending. */
static void
pending_only_add(void *arg, const kvx_listener_info *info, const kvx_match *m)
{
	(void)m;
	kvh_matches *ms = arg;
	kvh_topk_entry e = {
	    .instance_id = info->instance_id,
	    .dp_rank = info->dp_rank,
	    .pending = (uint32_t)kvd_extend(ms->pd, info->lid, ms->seq, 0,
					    ms->n_seq, ms->now_ms),
	};
	if (e.pending > 0) {
		match_keep(ms, &e);
	}
}

static int
lid_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

typedef struct kvh_lids {
	const kvh_matches *ms;
	kvp_arena *arena;
	uint32_t *lid;
	size_t n, cap;
} kvh_lids;

/* unseen_add notes a listener with the query's first block pending that
 * the index did not name. */
static void
unseen_add(void *arg, uint32_t lid)
{
	kvh_lids *u = arg;
	if (u->ms->n_seen > 0 && bsearch(&lid, u->ms->seen, u->ms->n_seen,
					 sizeof(lid), lid_cmp) != NULL) {
		return;
	}
	if (u->n == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 16;
		u->lid = grow(u->arena, u->lid, u->n, cap, sizeof(*u->lid));
		u->cap = cap;
	}
	u->lid[u->n++] = lid;
}

/* match_pending_only adds the listeners of the query's model that hold
 * none of its blocks but have its first ones pending. */
static void
match_pending_only(kvx_index *idx, kvh_matches *ms, const char *model,
		   const kvx_filter *f)
{
	if (ms->n_seq == 0) {
		return;
	}
	if (ms->n_seen > 1) {
		qsort(ms->seen, ms->n_seen, sizeof(*ms->seen), lid_cmp);
	}
	kvh_lids u = {.ms = ms, .arena = ms->arena};
	kvd_foreach_listener(ms->pd, ms->seq[0], ms->now_ms, unseen_add, &u);
	if (u.n > 0) {
		(void)kvx_listeners_describe(idx, model, u.lid, u.n, f,
					     pending_only_add, ms);
	}
}

/* match_flush moves what topk kept to the compact arrays. */
static void
match_flush(kvh_matches *ms)
{
	if (ms->topk == NULL) {
		return;
	}
	for (size_t i = 0; i < ms->topk->n; i++) {
		match_push(ms, &ms->topk->e[i]);
	}
}

/* query answers one query into a new QueryResponse. A query that
 * cannot be answered gets its code and error set in the answer. */
static Kvindex__QueryResponse *
query(kvh_shard *s, const Kvindex__QueryRequest *q, kvp_arena *a)
{
	double t0 = kvi_now_s();
	Kvindex__QueryResponse *out = kvp_arena_alloc(a, sizeof(*out));
	kvindex__query_response__init(out);
	if (q->has_dp_rank && q->dp_rank > UINT16_MAX) {
		out->has_code = true;
		out->code = KVI_ERANGE;
		out->error = kvp_arena_strdup(a, "dp_rank does not fit in u16");
		return out;
	}
	kvx_filter f = {
	    .instances = q->n_instances > 0 ? q->instances : NULL,
	    .n_instances = q->n_instances,
	    .has_rank = q->has_dp_rank,
	    .rank = (uint16_t)q->dp_rank,
	    .has_hit_cap = q->has_hit_cap,
	    .hit_cap = q->hit_cap,
	};
	kvh_matches ms = {.arena = a};
	kvh_topk topk;
	if (q->has_top_k && q->top_k > 0) {
		kvh_topk_init(&topk, q->top_k, a);
		ms.topk = &topk;
	}
	uint32_t bs = 0;
	if (q->has_pending && q->pending && s->pending != NULL &&
	    !kvd_empty(s->pending)) {
		/* taken before the index's locks, as every reader does */
		kvd_read_begin(s->pending);
		ms.pd = s->pending;
		ms.seq = q->seq_hashes;
		ms.n_seq = q->n_seq_hashes;
		ms.now_ms = kvi_now_ms();
	}
	kvi_err rv = kvx_query(s->idx, q->model, q->seq_hashes, q->n_seq_hashes,
			       &f, match_add, &ms, &bs);
	if (ms.pd != NULL) {
		if (rv == KVI_OK) {
			match_pending_only(s->idx, &ms, q->model, &f);
		}
		kvd_read_end(s->pending);
	}
	match_flush(&ms);
	if (rv == KVI_OK) {
		out->m_instance = ms.instance;
		out->n_m_instance = ms.n;
		out->m_rank = ms.rank;
		out->n_m_rank = ms.n;
		out->m_gpu = ms.gpu;
		out->n_m_gpu = ms.n;
		out->m_cpu = ms.cpu;
		out->n_m_cpu = ms.n;
		out->m_disk = ms.disk;
		out->n_m_disk = ms.n;
		if (ms.any_pending) {
			out->m_pending = ms.pending;
			out->n_m_pending = ms.n;
		}
		out->g_instance = ms.g_instance;
		out->n_g_instance = ms.n_g;
		out->g_rank = ms.g_rank;
		out->n_g_rank = ms.n_g;
		out->g_group = ms.g_group;
		out->n_g_group = ms.n_g;
		out->g_kind = ms.g_kind;
		out->n_g_kind = ms.n_g;
		out->g_window = ms.g_window;
		out->n_g_window = ms.n_g;
		out->g_blocks = ms.g_blocks;
		out->n_g_blocks = ms.n_g;
	}
	if (s->h_query != NULL) {
		kvi_histogram_observe(s->h_query, kvi_now_s() - t0);
		kvi_counter_inc(s->c_queries);
	}
	return out;
}

typedef struct kvh_exact {
	uint32_t longest;
} kvh_exact;

static void
exact_of(void *arg, const kvx_listener_info *info, const kvx_match *m)
{
	(void)info;
	((kvh_exact *)arg)->longest = m->longest;
}

/* routed makes the blocks of a routed request that its listener does not
 * hold pending there (pending.h). */
static kvi_err
routed(kvh_shard *s, const Kvindex__RoutedRequest *req, Kvindex__Response *resp,
       kvp_arena *a, char *err, size_t errlen)
{
	if (req->dp_rank > UINT16_MAX) {
		snprintf(err, errlen, "dp_rank %u does not fit in u16",
			 req->dp_rank);
		return KVI_ERANGE;
	}
	uint32_t lid, bs;
	uint16_t rank = (uint16_t)req->dp_rank;
	if (kvx_listener_find(s->idx, req->model, req->instance_id, rank, &lid,
			      &bs) != KVI_OK) {
		int n = snprintf(err, errlen,
				 "no listener is rank %u of instance %" PRIu64
				 " for model ",
				 rank, req->instance_id);
		if (n > 0 && (size_t)n < errlen) {
			snprintf(err + n, errlen - (size_t)n, "%s", req->model);
		}
		return KVI_ENOENT;
	}
	kvx_filter f = {.instances = &req->instance_id,
			.n_instances = 1,
			.has_rank = true,
			.rank = rank};
	kvh_exact ex = {0};
	(void)kvx_query(s->idx, req->model, req->seq_hashes, req->n_seq_hashes,
			&f, exact_of, &ex, &bs);
	size_t n = req->n_seq_hashes;
	kvd_route_req rr = {
	    .seq = req->seq_hashes,
	    .n = n,
	    .held = ex.longest < n ? ex.longest : n,
	    .now_ms = kvi_now_ms(),
	    .ttl_ms = req->has_ttl_ms ? req->ttl_ms : s->pending_ttl_ms,
	    .prompt_tokens = req->has_prompt_tokens ? req->prompt_tokens : 0,
	    .block_size = bs,
	};
	kvd_route(s->pending, lid, &rr);
	Kvindex__RoutedResponse *out = kvp_arena_alloc(a, sizeof(*out));
	kvindex__routed_response__init(out);
	out->has_matched_blocks = out->has_pending_blocks = true;
	out->has_predicted_blocks = true;
	out->matched_blocks = (uint32_t)rr.held;
	out->pending_blocks = (uint32_t)rr.pending;
	out->predicted_blocks = (uint32_t)rr.predicted;
	resp->body_case = KVINDEX__RESPONSE__BODY_ROUTED;
	resp->routed = out;
	return KVI_OK;
}

/* query_batch answers every query of b, each on its own. */
static Kvindex__QueryBatchResponse *
query_batch(kvh_shard *s, const Kvindex__QueryBatchRequest *b, kvp_arena *a)
{
	Kvindex__QueryBatchResponse *out = kvp_arena_alloc(a, sizeof(*out));
	kvindex__query_batch_response__init(out);
	out->answers =
	    kvp_arena_alloc(a, (b->n_queries + 1) * sizeof(*out->answers));
	for (size_t i = 0; i < b->n_queries; i++) {
		out->answers[i] = query(s, b->queries[i], a);
	}
	out->n_answers = b->n_queries;
	return out;
}

/* admit checks what comes before any answer: the cluster's RPC secret,
 * then the request's leadership term (fence). False, with resp's code and
 * error set, for a request refused. */
static bool
admit(kvh_shard *s, const Kvindex__Request *req, Kvindex__Response *resp,
      kvp_arena *a)
{
	char err[256] = "";
	bool command = req->body_case == KVINDEX__REQUEST__BODY_ASSIGN ||
		       req->body_case == KVINDEX__REQUEST__BODY_UNASSIGN;
	/* before anything, the term included: an outsider's must not fence */
	if (!kvp_request_authentic(req)) {
		kvi_counter_inc(s->c_unauthenticated);
		resp->code = KVI_EAUTH;
		resp->error = "the request does not carry this cluster's RPC "
			      "secret (--rpc-secret-file)";
		return false;
	}
	if (!fence(s, req, command, err, sizeof(err))) {
		resp->code = KVI_ESTALE;
		resp->error = kvp_arena_strdup(a, err);
		return false;
	}
	return true;
}

/* The answers of the requests that go through the ingest thread: each
 * fills in resp's body on success and returns the request's code, with
 * err saying why it failed. */

static kvi_err
assign(kvh_shard *s, const Kvindex__AssignRequest *req, Kvindex__Response *resp,
       kvp_arena *a, char *err, size_t errlen)
{
	bool existed = false;
	kvi_err rv = kvg_assign(s->ingest, req->listener, req->handoff_from,
				&existed, err, errlen);
	Kvindex__AssignResponse *out = kvp_arena_alloc(a, sizeof(*out));
	kvindex__assign_response__init(out);
	out->has_existed = true;
	out->existed = existed;
	resp->body_case = KVINDEX__RESPONSE__BODY_ASSIGN;
	resp->assign = out;
	return rv;
}

static kvi_err
status(kvh_shard *s, const Kvindex__StatusRequest *req, Kvindex__Response *resp,
       kvp_arena *a, char *err, size_t errlen)
{
	Kvindex__StatusResponse *out = kvp_arena_alloc(a, sizeof(*out));
	kvindex__status_response__init(out);
	kvi_err rv = kvg_status(s->ingest, req, a, out, err, errlen);
	out->has_term = true;
	out->term = atomic_load(&s->term);
	if (rv == KVI_OK) {
		resp->body_case = KVINDEX__RESPONSE__BODY_STATUS;
		resp->status = out;
	}
	return rv;
}

static kvi_err
dump(kvh_shard *s, const Kvindex__DumpRequest *req, Kvindex__Response *resp,
     kvp_arena *a, char *err, size_t errlen)
{
	Kvindex__DumpResponse *out = kvp_arena_alloc(a, sizeof(*out));
	kvindex__dump_response__init(out);
	kvi_err rv = kvg_dump(s->ingest, req->key, a, out, err, errlen);
	if (rv == KVI_OK) {
		resp->body_case = KVINDEX__RESPONSE__BODY_DUMP;
		resp->dump = out;
	}
	return rv;
}

static kvi_err
handoff(kvh_shard *s, const Kvindex__HandoffRequest *req,
	Kvindex__Response *resp, kvp_arena *a, char *err, size_t errlen)
{
	Kvindex__HandoffResponse *out = kvp_arena_alloc(a, sizeof(*out));
	kvindex__handoff_response__init(out);
	kvi_err rv = kvg_handoff_chunk(s->ingest, req, a, out, err, errlen);
	if (rv == KVI_OK) {
		resp->body_case = KVINDEX__RESPONSE__BODY_HANDOFF;
		resp->handoff = out;
	}
	return rv;
}

/* answer_query answers a lone query, whose outcome is the envelope's. */
static void
answer_query(kvh_shard *s, const Kvindex__QueryRequest *req,
	     Kvindex__Response *resp, kvp_arena *a)
{
	Kvindex__QueryResponse *out = query(s, req, a);
	resp->body_case = KVINDEX__RESPONSE__BODY_QUERY;
	resp->query = out;
	if (out->has_code) {
		resp->code = out->code;
		resp->error = out->error;
		out->has_code = false;
		out->error = NULL;
	}
}

static void
handle(void *arg, const Kvindex__Request *req, Kvindex__Response *resp,
       kvp_arena *a)
{
	kvh_shard *s = arg;
	if (!admit(s, req, resp, a)) {
		return;
	}
	char err[256] = "";
	kvi_err rv = KVI_OK;
	switch (req->body_case) {
	case KVINDEX__REQUEST__BODY_QUERY:
		answer_query(s, req->query, resp, a);
		return;
	case KVINDEX__REQUEST__BODY_QUERY_BATCH:
		resp->body_case = KVINDEX__RESPONSE__BODY_QUERY_BATCH;
		resp->query_batch = query_batch(s, req->query_batch, a);
		return;
	case KVINDEX__REQUEST__BODY_ASSIGN:
		rv = assign(s, req->assign, resp, a, err, sizeof(err));
		break;
	case KVINDEX__REQUEST__BODY_UNASSIGN:
		rv = kvg_unassign(s->ingest, req->unassign->key, err,
				  sizeof(err));
		break;
	case KVINDEX__REQUEST__BODY_STATUS:
		rv = status(s, req->status, resp, a, err, sizeof(err));
		break;
	case KVINDEX__REQUEST__BODY_DUMP:
		rv = dump(s, req->dump, resp, a, err, sizeof(err));
		break;
	case KVINDEX__REQUEST__BODY_HANDOFF:
		rv = handoff(s, req->handoff, resp, a, err, sizeof(err));
		break;
	case KVINDEX__REQUEST__BODY_ROUTED:
		rv = routed(s, req->routed, resp, a, err, sizeof(err));
		break;
	default:
		rv = KVI_EINVAL;
		snprintf(err, sizeof(err), "unknown request");
		break;
	}
	resp->code = rv;
	if (rv != KVI_OK) {
		resp->error =
		    kvp_arena_strdup(a, err[0] ? err : kvi_strerror(rv));
	}
}

kvh_shard *
kvh_shard_alloc(kvx_index *idx, kvg_ingest *ingest, kvd_pending *pending,
		uint32_t pending_ttl_ms, kvi_metrics *metrics)
{
	static const double bounds[] = {0.00001, 0.000025, 0.00005, 0.0001,
					0.0002,  0.0005,   0.001,   0.0025,
					0.005,   0.01,     0.05};
	kvh_shard *s = kvi_calloc(1, sizeof(*s));
	s->idx = idx;
	s->ingest = ingest;
	s->pending = pending;
	s->pending_ttl_ms = pending_ttl_ms;
	if (metrics != NULL) {
		kvi_metrics_histogram_add(
		    metrics, "kvindex_shard_query_seconds",
		    "Query probe latency in the shard (index lookup only).",
		    bounds, sizeof(bounds) / sizeof(bounds[0]), &s->h_query);
		kvi_metrics_counter_add(metrics, "kvindex_shard_queries_total",
					"Queries answered.", &s->c_queries);
		kvi_metrics_counter_add(
		    metrics, "kvindex_shard_unauthenticated_requests_total",
		    "Requests refused for lacking the RPC secret.",
		    &s->c_unauthenticated);
		kvi_metrics_gauge_add(metrics, "kvindex_shard_leader_term",
				      "The newest coordinator leadership term "
				      "seen (fencing).",
				      KVI_GAUGE_INT, &s->g_term);
		kvi_metrics_counter_add(
		    metrics, "kvindex_shard_fenced_commands_total",
		    "Assign and unassign commands refused for an older "
		    "leadership term.",
		    &s->c_fenced);
	}
	return s;
}

void
kvh_shard_free(kvh_shard *s)
{
	kvi_free(s);
}

unsigned
kvh_shard_inline_kinds(void)
{
	return 1u << KVN_KIND_QUERY | 1u << KVN_KIND_QUERY_BATCH |
	       1u << KVN_KIND_ROUTED;
}

kvn_handler
kvh_shard_handler(void)
{
	return handle;
}
