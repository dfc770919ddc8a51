#include "http_api.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "alloc.h"
#include "api_json.h"
#include "api_packed.h"
#include "api_query.h"

static void
reply_done(void *arg, int status, json_t *body)
{
	kvi_http_reply_json(arg, status, body);
}

static void
reply_refused(kvi_http_req *req, kvc_qerr *e)
{
	kvi_http_reply_json(req, e->status, kvc_qerr_body(e));
	kvc_qerr_fini(e);
}

static void
on_register(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	size_t len;
	const char *body = kvi_http_req_body(req, &len);
	kvc_pod pod;
	kvc_qerr e = {0};
	if (kvc_api_register_parse(body, len, api->default_dp_size, &pod, &e) !=
	    KVI_OK) {
		reply_refused(req, &e);
		return;
	}
	kvc_assigner_register(api->assigner, &pod, reply_done, req);
	kvc_pod_fini(&pod);
}

static void
on_unregister(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	size_t len;
	const char *body = kvi_http_req_body(req, &len);
	kvc_api_unregister u;
	kvc_qerr e = {0};
	if (kvc_api_unregister_parse(body, len, &u, &e) != KVI_OK) {
		reply_refused(req, &e);
		return;
	}
	kvc_assigner_unregister(api->assigner, u.name, u.instance_id,
				u.has_dp_rank ? (int)u.dp_rank : -1, u.model,
				reply_done, req);
	kvc_api_unregister_fini(&u);
}

/* body_copy copies a request's body for the packed parser. */
static void
body_copy(void *arg, void *dst)
{
	kvi_http_req_body_copy(arg, dst);
}

/* packed_parse reads a request in the packed form (api_packed.h). */
static kvi_err
packed_parse(kvi_http_req *req, kvc_packed_route route, size_t max, kvc_qreq *r,
	     kvc_qerr *e)
{
	size_t n;
	const char *const *params = kvi_http_req_params(req, &n);
	return kvc_api_packed_parse(route, params, n,
				    kvi_http_req_body_len(req), body_copy, req,
				    max, r, e);
}

static bool
is_packed(const kvi_http_req *req)
{
	return kvc_api_is_packed(kvi_http_req_header(req, "Content-Type"));
}

/* on_query parses a /query or /query_by_hash request, a JSON body or a
 * packed one, and hands the request, or the error, to the query path. */
static void
on_query(kvc_api *api, kvi_http_req *req, kvc_query_route route)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	size_t len, max_tokens, max_hashes;
	kvc_query_limits(api->query, &max_tokens, &max_hashes);
	bool by_tokens = route == KVC_QUERY_TOKENS;
	kvc_qreq r = {0};
	kvc_qerr e = {0};
	kvi_err rv;
	if (is_packed(req)) {
		rv = packed_parse(
		    req, by_tokens ? KVC_PACKED_QUERY : KVC_PACKED_HASH_QUERY,
		    by_tokens ? max_tokens : max_hashes, &r, &e);
	} else {
		const char *body = kvi_http_req_body(req, &len);
		rv = by_tokens
			 ? kvc_api_query_parse(body, len, max_tokens, &r, &e)
			 : kvc_api_hash_query_parse(body, len, max_hashes, &r,
						    &e);
	}
	if (rv != KVI_OK) {
		kvc_query_refuse(api->query, req, route, &t0, &e);
		return;
	}
	kvc_query_start(api->query, req, route, &t0, &r);
}

static void
on_query_tokens(void *arg, kvi_http_req *req)
{
	on_query(arg, req, KVC_QUERY_TOKENS);
}

static void
on_query_hashes(void *arg, kvi_http_req *req)
{
	on_query(arg, req, KVC_QUERY_HASHES);
}

/* on_routed parses a /routed request, JSON or packed, and hands it to
 * routed.h. Like /query it takes no token: it changes predictions only,
 * which expire. */
static void
on_routed(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	size_t len, max_tokens, max_hashes;
	kvc_query_limits(api->query, &max_tokens, &max_hashes);
	size_t max = max_tokens > max_hashes ? max_tokens : max_hashes;
	kvc_qreq r = {0};
	kvc_qerr e = {0};
	kvi_err rv;
	if (is_packed(req)) {
		rv = packed_parse(req, KVC_PACKED_ROUTED, max, &r, &e);
	} else {
		const char *body = kvi_http_req_body(req, &len);
		rv = kvc_api_routed_parse(body, len, max, &r, &e);
	}
	if (rv != KVI_OK) {
		kvc_routed_refuse(api->routed, req, &e);
		return;
	}
	kvc_routed_start(api->routed, req, &t0, &r);
}

/* param_u64 reads the query parameter name as a decimal u64 into
 * *out: false (with a 400 sent) when it is there and is not one. */
static bool
param_u64(kvi_http_req *req, const char *name, bool *has, uint64_t *out)
{
	const char *v = kvi_http_req_query(req, name);
	*has = v != NULL;
	if (v == NULL) {
		return true;
	}
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0) {
		kvi_http_reply_error(
		    req, 400, "%s: %s is not a non-negative integer", name, v);
		return false;
	}
	*out = x;
	return true;
}

static void
on_workers(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	kvc_workers_query q = {
	    .model = kvi_http_req_query(req, "model_name"),
	    .name = kvi_http_req_query(req, "name"),
	};
	bool has_limit;
	uint64_t limit = 0;
	if (!param_u64(req, "limit", &has_limit, &limit) ||
	    !param_u64(req, "cursor", &q.has_cursor, &q.cursor)) {
		return;
	}
	if (has_limit && (limit == 0 || limit > 100000)) {
		kvi_http_reply_error(req, 400,
				     "limit: %llu is not in 1..100000",
				     (unsigned long long)limit);
		return;
	}
	q.limit = (size_t)limit;
	bool more;
	uint64_t next = 0;
	json_t *body = kvc_reg_workers(api->reg, &q, &more, &next);
	if (more) {
		/* the body stays the array docs/api.md#get-workers gives: the
		 * next page is named in a header */
		char cur[24];
		snprintf(cur, sizeof(cur), "%" PRIu64, next);
		kvi_http_reply_header(req, "X-Next-Cursor", cur);
	}
	kvi_http_reply_json(req, 200, body);
}

static void
on_health(void *arg, kvi_http_req *req)
{
	(void)arg;
	kvi_http_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

static void
on_ready(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	char why[512];
	if (kvc_assigner_ready(api->assigner, why, sizeof(why))) {
		kvi_http_reply_json(req, 200, json_pack("{s:b}", "ready", 1));
	} else {
		kvi_http_reply_json(
		    req, 503,
		    json_pack("{s:b,s:s}", "ready", 0, "reason", why));
	}
}

static void
on_metrics(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	size_t len;
	char *text = kvi_metrics_render(api->metrics, &len);
	kvi_http_reply(req, 200, KVI_METRICS_CONTENT_TYPE, text, len);
	kvi_free(text);
}

/* token_equal compares a client's token with ours in time that
 * depends on the length of ours only. */
static bool
token_equal(const char *given, const char *ours)
{
	size_t n = strlen(ours), m = strlen(given);
	unsigned diff = m != n;
	for (size_t i = 0; i < n; i++) {
		diff |= (unsigned char)((i < m ? given[i] : 0) ^ ours[i]);
	}
	return diff == 0;
}

/* auth_ok checks the bearer token a write of kind auth needs; false
 * when it replied 401 or 403. */
static bool
auth_ok(const kvc_api *api, kvi_http_req *req, kvc_api_auth auth)
{
	const char *tokens[2] = {api->admin_token, auth == KVC_AUTH_REGISTER
						       ? api->register_token
						       : NULL};
	if (tokens[0] == NULL && tokens[1] == NULL) {
		return true;
	}
	const char *what = auth == KVC_AUTH_ADMIN
			       ? "admin paths need Authorization: Bearer "
				 "<the admin token>"
			       : "registrations need Authorization: Bearer "
				 "<the registration or the admin token>";
	const char *h = kvi_http_req_header(req, "Authorization");
	if (h == NULL || strncmp(h, "Bearer ", 7) != 0) {
		kvi_http_reply_error(req, 401, "%s", what);
		return false;
	}
	bool ok = false;
	for (int i = 0; i < 2; i++) {
		ok |= tokens[i] != NULL && token_equal(h + 7, tokens[i]);
	}
	if (!ok) {
		kvi_http_reply_error(req, 403, "wrong %s token",
				     auth == KVC_AUTH_ADMIN ? "admin"
							    : "registration");
	}
	return ok;
}

static json_t *
shard_json(kvc_shard *sh, int64_t now)
{
	int64_t last = atomic_load(&sh->last_ok_ms);
	json_t *o = json_object();
	json_object_set_new(o, "id", json_string(sh->id));
	json_object_set_new(o, "endpoint", json_string(sh->url));
	json_object_set_new(o, "status",
			    json_string(atomic_load(&sh->draining) ? "draining"
					: atomic_load(&sh->up)     ? "up"
								   : "down"));
	json_object_set_new(
	    o, "listeners",
	    json_integer((json_int_t)atomic_load(&sh->listeners)));
	json_object_set_new(
	    o, "blocks", json_integer((json_int_t)atomic_load(&sh->entries)));
	json_object_set_new(
	    o, "store_bytes",
	    json_integer((json_int_t)atomic_load(&sh->store_bytes)));
	json_object_set_new(o, "last_heard_ms_ago",
			    last ? json_integer(now - last) : json_null());
	char why[256];
	json_object_set_new(o, "store_error",
			    kvc_shard_stale(sh, why, sizeof(why))
				? json_string(why)
				: json_null());
	return o;
}

static void
on_admin_shards(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	size_t n;
	kvc_shard **sh = kvc_shardset_snapshot(api->shards, &n);
	int64_t now = kvi_now_ms();
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, shard_json(sh[i], now));
	}
	kvc_shardset_release(sh, n);
	kvi_http_reply_json(req, 200, arr);
}

/* admin_body parses the JSON object body of an admin request; NULL
 * when it replied 400. */
static json_t *
admin_body(kvi_http_req *req, bool empty_ok)
{
	size_t len;
	const char *body = kvi_http_req_body(req, &len);
	if (len == 0 && empty_ok) {
		return json_object();
	}
	json_error_t je;
	json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(doc)) {
		char msg[256];
		snprintf(msg, sizeof(msg), "the body is not a JSON object: %s",
			 doc == NULL ? je.text : "wrong type");
		json_decref(doc);
		kvi_http_reply_error(req, 400, "%s", msg);
		return NULL;
	}
	return doc;
}

/* admin_string reads a required string field; NULL when it replied. */
static const char *
admin_string(kvi_http_req *req, json_t *doc, const char *field)
{
	const char *v = json_string_value(json_object_get(doc, field));
	if (v == NULL || v[0] == '\0') {
		char msg[128];
		snprintf(msg, sizeof(msg), "%s is missing or not a string",
			 field);
		kvi_http_reply_error(req, 400, "%s", msg);
	}
	return v != NULL && v[0] != '\0' ? v : NULL;
}

static void
on_admin_add_shard(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	json_t *doc;
	const char *id, *url;
	if ((doc = admin_body(req, false)) == NULL) {
		return;
	}
	if ((id = admin_string(req, doc, "id")) != NULL &&
	    (url = admin_string(req, doc, "endpoint")) != NULL) {
		kvc_admin_add_shard(api->assigner, id, url, reply_done, req);
	}
	json_decref(doc);
}

/* admin_suffix percent-decodes the path after the route's prefix,
 * dropping tail when the path ends with it; NULL when it replied. */
static char *
admin_suffix(kvi_http_req *req, const char *tail)
{
	const char *s = kvi_http_req_suffix(req);
	size_t len = strlen(s), tl = tail != NULL ? strlen(tail) : 0;
	if (tail != NULL && (len <= tl || strcmp(s + len - tl, tail) != 0)) {
		kvi_http_reply_error(req, 404, "no such admin path");
		return NULL;
	}
	len -= tl;
	char *out = kvi_malloc(len + 1);
	size_t n;
	if (len == 0 || kvi_http_unescape(s, len, out, &n) != KVI_OK) {
		kvi_free(out);
		kvi_http_reply_error(req, 400, "bad name in the path");
		return NULL;
	}
	return out;
}

static void
on_admin_drain_shard(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	char *id;
	if ((id = admin_suffix(req, NULL)) == NULL) {
		return;
	}
	kvc_admin_drain_shard(api->assigner, id, reply_done, req);
	kvi_free(id);
}

static void
on_admin_move(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	char *key;
	json_t *doc;
	if ((key = admin_suffix(req, "/move")) == NULL) {
		return;
	}
	const char *to;
	if ((doc = admin_body(req, false)) != NULL &&
	    (to = admin_string(req, doc, "to")) != NULL) {
		kvc_admin_move(api->assigner, key, to, reply_done, req);
	}
	json_decref(doc);
	kvi_free(key);
}

static void
on_admin_rebalance(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	json_t *doc;
	if ((doc = admin_body(req, true)) == NULL) {
		return;
	}
	json_t *dry = json_object_get(doc, "dry_run");
	if (dry != NULL && !json_is_boolean(dry)) {
		kvi_http_reply_error(req, 400, "dry_run is not a boolean");
	} else {
		/* without dry_run, only say what would move */
		kvc_admin_rebalance(api->assigner,
				    dry == NULL || json_is_true(dry),
				    reply_done, req);
	}
	json_decref(doc);
}

static void
on_admin_moves(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	kvc_admin_moves(api->assigner, reply_done, req);
}

static void
collect_shards(void *arg, kvi_metrics_out *out)
{
	kvc_api *api = arg;
	size_t n;
	kvc_shard **sh = kvc_shardset_snapshot(api->shards, &n);
	static const struct {
		const char *name, *help;
		kvi_metric_type type;
	} fam[] = {
	    {"kvindex_coord_shard_up",
	     "1 when the shard answered the last status poll.",
	     KVI_METRIC_GAUGE},
	    {"kvindex_coord_fanout_errors_total",
	     "Queries the shard was needed for and did not answer: calls "
	     "that failed or missed the deadline, and queries not sent "
	     "while it was down.",
	     KVI_METRIC_COUNTER},
	    {"kvindex_coord_shard_listeners",
	     "Listeners the shard reported owning.", KVI_METRIC_GAUGE},
	    {"kvindex_coord_shard_entries",
	     "(block, listener) entries the shard reported.", KVI_METRIC_GAUGE},
	};
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		kvi_metrics_out_family(out, fam[f].name, fam[f].help,
				       fam[f].type);
		for (size_t i = 0; i < n; i++) {
			kvi_label l = {"shard", sh[i]->id};
			double v =
			    f == 0 ? atomic_load(&sh[i]->up)
			    : f == 1
				? (double)atomic_load(&sh[i]->fanout_errors)
			    : f == 2 ? (double)atomic_load(&sh[i]->listeners)
				     : (double)atomic_load(&sh[i]->entries);
			kvi_metrics_out_sample(out, fam[f].name, &l, 1, v);
		}
	}
	kvc_shardset_release(sh, n);
}

/* ---- replicas -------------------------------------------------------- */

static void
on_leader(void *arg, kvi_http_req *req)
{
	kvc_api *api = arg;
	if (api->lease == NULL) {
		kvi_http_reply_json(req, 200,
				    json_pack("{s:s,s:s,s:b,s:I}", "identity",
					      api->identity, "leader",
					      api->identity, "is_leader", 1,
					      "epoch", (json_int_t)0));
		return;
	}
	kvc_lease_view v;
	kvc_lease_view_get(api->lease, &v);
	json_t *o =
	    json_pack("{s:s,s:b,s:I}", "identity", v.identity, "is_leader",
		      v.is_leader, "epoch", (json_int_t)v.epoch);
	json_object_set_new(o, "leader",
			    v.holder[0] ? json_string(v.holder) : json_null());
	json_object_set_new(o, "leader_url",
			    v.holder_url[0] ? json_string(v.holder_url)
					    : json_null());
	kvi_http_reply_json(req, 200, o);
}

/* to_leader answers a write on a follower (true): a redirect to the
 * leader, or 503 while none is known. */
static bool
to_leader(kvc_api *api, kvi_http_req *req)
{
	if (api->lease == NULL || kvc_lease_leading(api->lease, NULL)) {
		return false;
	}
	kvc_lease_view v;
	kvc_lease_view_get(api->lease, &v);
	if (v.holder[0] == '\0' || v.holder_url[0] == '\0' ||
	    strcmp(v.holder, v.identity) == 0) {
		kvi_http_reply_header(req, "Retry-After", "1");
		kvi_http_reply_error(req, 503,
				     "no coordinator replica leads now; "
				     "retry");
		return true;
	}
	char loc[KVC_LEASE_URL_MAX + 2048];
	snprintf(loc, sizeof(loc), "%s%s", v.holder_url,
		 kvi_http_req_path(req));
	if (kvi_http_reply_header(req, "Location", loc) != KVI_OK) {
		kvi_http_reply_error(req, 503,
				     "the leader's URL is not usable");
		return true;
	}
	kvi_http_reply_json(
	    req, 307,
	    json_pack("{s:s,s:s}", "leader", v.holder, "location", loc));
	return true;
}

/* on_write serves a write: its token first, on a follower as on the
 * leader, then the redirect to the leader or the route itself. */
static void
on_write(void *arg, kvi_http_req *req)
{
	kvc_write_route *w = arg;
	if (auth_ok(w->api, req, w->auth) && !to_leader(w->api, req)) {
		w->fn(w->api, req);
	}
}

kvi_err
kvc_api_routes(kvi_httpd *h, kvc_api *api)
{
	enum { ANY, ADMIN, REGISTER };
	static const struct {
		const char *method, *path;
		kvi_http_handler fn;
		int kind;
		bool prefix;
	} routes[] = {
	    {"POST", "/query", on_query_tokens, ANY, false},
	    {"POST", "/query_by_hash", on_query_hashes, ANY, false},
	    {"POST", "/routed", on_routed, ANY, false},
	    {"POST", "/register", on_register, REGISTER, false},
	    {"POST", "/unregister", on_unregister, REGISTER, false},
	    {"GET", "/workers", on_workers, ANY, false},
	    {"GET", "/health", on_health, ANY, false},
	    {"GET", "/ready", on_ready, ANY, false},
	    {"GET", "/metrics", on_metrics, ANY, false},
	    {"GET", "/leader", on_leader, ANY, false},
	    {"GET", "/admin/shards", on_admin_shards, ADMIN, false},
	    {"POST", "/admin/shards", on_admin_add_shard, ADMIN, false},
	    {"POST", "/admin/rebalance", on_admin_rebalance, ADMIN, false},
	    {"GET", "/admin/moves", on_admin_moves, ADMIN, false},
	    {"DELETE", "/admin/shards/", on_admin_drain_shard, ADMIN, true},
	    {"POST", "/admin/listeners/", on_admin_move, ADMIN, true},
	};
	enum { N_ROUTES = sizeof(routes) / sizeof(routes[0]) };
	_Static_assert(N_ROUTES <= KVC_API_ROUTES, "room for every route");
	kvc_write_route *writes = api->writes;
	for (size_t i = 0; i < N_ROUTES; i++) {
		kvi_http_handler fn = routes[i].fn;
		void *arg = api;
		if (routes[i].kind == ADMIN || routes[i].kind == REGISTER) {
			writes[i] = (kvc_write_route){api, fn,
						      routes[i].kind == ADMIN
							  ? KVC_AUTH_ADMIN
							  : KVC_AUTH_REGISTER};
			fn = on_write;
			arg = &writes[i];
		}
		kvi_err rv =
		    routes[i].prefix
			? kvi_httpd_route_prefix(h, routes[i].method,
						 routes[i].path, fn, arg)
			: kvi_httpd_route(h, routes[i].method, routes[i].path,
					  fn, arg);
		if (rv != KVI_OK) {
			return rv;
		}
	}
	kvi_metrics_collector_add(api->metrics, collect_shards, api);
	return KVI_OK;
}
