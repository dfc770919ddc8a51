#include "routed.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "qlink.h"
#include "rpc.h"

enum { R_OK, R_BAD, R_NOT_FOUND, R_UNAVAILABLE, R_COUNT };

struct kvc_routed {
	kvc_registry *reg;
	kvc_shardset *shards;
	kvc_query *q;
	int timeout_ms;
	kvi_counter *count[R_COUNT];
	kvi_histogram *lat;
};

/* One routed request waiting for its shard. */
typedef struct rcall {
	kvc_routed *rt;
	kvi_http_req *req;
	struct timespec t0;
	char key[KVC_NAME_MAX + 16];
	char shard[128];
} rcall;

static int
result_of(int status)
{
	return status == 202   ? R_OK
	       : status == 404 ? R_NOT_FOUND
	       : status == 503 ? R_UNAVAILABLE
			       : R_BAD;
}

static void
reply_error(kvc_routed *rt, kvi_http_req *req, kvc_qerr *e)
{
	kvi_counter_inc(rt->count[result_of(e->status)]);
	kvi_http_reply_json(req, e->status, kvc_qerr_body(e));
	kvc_qerr_fini(e);
}

void
kvc_routed_refuse(kvc_routed *rt, kvi_http_req *req, kvc_qerr *e)
{
	reply_error(rt, req, e);
}

/* reply_ok sends the 202 with what the shard said. */
static void
reply_ok(kvc_routed *rt, kvi_http_req *req, const struct timespec *t0,
	 const char *key, uint32_t matched, uint32_t pending,
	 uint32_t predicted)
{
	json_t *o = json_pack("{s:s, s:I, s:I, s:I}", "listener", key,
			      "matched_blocks", (json_int_t)matched,
			      "pending_blocks", (json_int_t)pending,
			      "predicted_blocks", (json_int_t)predicted);
	kvi_histogram_observe(rt->lat, kvi_since_s(t0));
	kvi_counter_inc(rt->count[R_OK]);
	kvi_http_reply_json(req, 202, o);
}

static void
shard_done(void *arg, kvi_err rv, Kvindex__Response *resp, const char *err)
{
	rcall *c = arg;
	kvc_qerr e = {0};
	if (rv == KVI_OK && resp != NULL && resp->code == KVI_OK &&
	    resp->body_case == KVINDEX__RESPONSE__BODY_ROUTED) {
		const Kvindex__RoutedResponse *r = resp->routed;
		reply_ok(c->rt, c->req, &c->t0, c->key, r->matched_blocks,
			 r->pending_blocks, r->predicted_blocks);
	} else {
		/* the listener may have just moved, or its shard be down:
		 * a router retries, or routes on without it */
		const char *why = rv != KVI_OK ? err
				  : resp != NULL && resp->error != NULL
				      ? resp->error
				      : "no answer";
		kvc_qerr_set(&e, rv != KVI_OK ? rv : KVI_EAGAIN, 503,
			     "shard %s did not take the routed request for "
			     "listener %s: %s",
			     c->shard, c->key, why);
		reply_error(c->rt, c->req, &e);
	}
	if (resp != NULL) {
		kvindex__response__free_unpacked(resp, NULL);
	}
	kvi_free(c);
}

/* owner finds the listener r names and its shard; false with e set. */
static bool
owner(kvc_routed *rt, const kvc_qreq *r, uint16_t rank,
      kvc_reg_owner_info *info, kvc_qerr *e)
{
	char who[300];
	if (r->pod != NULL) {
		snprintf(who, sizeof(who), "pod %s", r->pod);
	} else {
		snprintf(who, sizeof(who), "instance %" PRIu64, r->instance_id);
	}
	switch (kvc_reg_owner(rt->reg, r->pod, r->instance_id, rank, info)) {
	case KVI_OK:
		break;
	case KVI_ENOENT:
		kvc_qerr_set(e, KVI_ENOENT, 404, "%s is not registered", who);
		return false;
	case KVI_ERANGE:
		kvc_qerr_set(e, KVI_ENOENT, 404,
			     "dp_rank %u is not a rank of %s (it has %zu)",
			     rank, who, info->n_ranks);
		return false;
	default:
		kvc_qerr_set(e, KVI_EAGAIN, 503,
			     "no shard owns listener %s now; try again",
			     info->key);
		return false;
	}
	if (strcmp(info->model, r->model) != 0) {
		kvc_qerr_set(e, KVI_EINVAL, 400, "%s serves model %s, not %s",
			     who, info->model, r->model);
		return false;
	}
	return true;
}

void
kvc_routed_start(kvc_routed *rt, kvi_http_req *req, const struct timespec *t0,
		 kvc_qreq *r)
{
	kvc_qerr e = {0};
	kvc_reg_owner_info info;
	uint16_t rank = r->has_dp_rank ? r->dp_rank : 0;
	uint32_t bs = kvc_reg_model(rt->reg, r->model);
	if (bs == 0) {
		kvc_qerr_set(&e, KVI_ENOENT, 404,
			     "model %s is not served by any registered pod",
			     r->model);
	}
	if (bs == 0 || !owner(rt, r, rank, &info, &e)) {
		kvc_qreq_fini(r);
		reply_error(rt, req, &e);
		return;
	}
	size_t nb;
	uint64_t *seq = kvc_qreq_seq_hashes(
	    r, r->token_ids != NULL || r->block_hashes == NULL, bs, &nb);
	kvc_shard *sh = kvc_shardset_find(rt->shards, info.shard);
	if (sh == NULL) {
		kvi_free(seq);
		kvc_qreq_fini(r);
		kvc_qerr_set(&e, KVI_EAGAIN, 503,
			     "shard %s, owner of listener %s, is gone",
			     info.shard, info.key);
		reply_error(rt, req, &e);
		return;
	}
	Kvindex__RoutedRequest rr = KVINDEX__ROUTED_REQUEST__INIT;
	rr.model = r->model;
	rr.seq_hashes = seq;
	rr.n_seq_hashes = nb;
	rr.instance_id = info.instance_id;
	rr.dp_rank = rank;
	rr.has_ttl_ms = r->has_ttl_ms;
	rr.ttl_ms = r->ttl_ms;
	rr.has_prompt_tokens = r->token_ids != NULL;
	rr.prompt_tokens = (uint32_t)r->n_tokens;
	Kvindex__Request kreq = KVINDEX__REQUEST__INIT;
	kreq.version = KVP_VERSION;
	kreq.body_case = KVINDEX__REQUEST__BODY_ROUTED;
	kreq.routed = &rr;
	rcall *c = kvi_calloc(1, sizeof(*c));
	c->rt = rt;
	c->req = req;
	c->t0 = *t0;
	snprintf(c->key, sizeof(c->key), "%s", info.key);
	snprintf(c->shard, sizeof(c->shard), "%s", info.shard);
	kvc_qloop *ql = kvc_query_loop(rt->q, req);
	kvc_qlink *link = ql != NULL ? kvc_qloop_link(ql, sh) : NULL;
	kvi_err rv =
	    link != NULL
		? kvc_qlink_call(link, &kreq, rt->timeout_ms, shard_done, c)
		: kvp_call_async(sh->client, &kreq, rt->timeout_ms, shard_done,
				 c);
	kvc_shard_unref(sh);
	kvi_free(seq);
	kvc_qreq_fini(r);
	if (rv != KVI_OK) {
		kvc_qerr_set(&e, rv, 503, "shard %s: %s", c->shard,
			     kvi_strerror(rv));
		kvi_free(c);
		reply_error(rt, req, &e);
	}
}

kvc_routed *
kvc_routed_alloc(kvc_registry *reg, kvc_shardset *shards, kvc_query *q,
		 kvi_metrics *m, int timeout_ms)
{
	static const char *const results[R_COUNT] = {
	    [R_OK] = "ok",
	    [R_BAD] = "bad_request",
	    [R_NOT_FOUND] = "not_found",
	    [R_UNAVAILABLE] = "unavailable",
	};
	static const double bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
					0.005,  0.01,    0.025,  0.05,  0.1};
	kvc_routed *rt = kvi_calloc(1, sizeof(*rt));
	rt->reg = reg;
	rt->shards = shards;
	rt->q = q;
	rt->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
	kvi_metrics_counter_vec_add(
	    m, "kvindex_coord_routed_total",
	    "POST /routed requests, by result: ok (the owning shard made the "
	    "blocks pending), bad_request, not_found, unavailable.",
	    "result", results, R_COUNT, rt->count);
	kvi_metrics_histogram_add(m, "kvindex_coord_routed_seconds",
				  "Time to answer a POST /routed that was "
				  "taken, shard call included.",
				  bounds, sizeof(bounds) / sizeof(bounds[0]),
				  &rt->lat);
	return rt;
}

void
kvc_routed_free(kvc_routed *rt)
{
	kvi_free(rt);
}
