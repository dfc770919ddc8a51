/*
 * kube_api.c - the pod API: GET of a pod, lists and watches of pods in a
 * namespace or in all namespaces (kube_http_int.h).
 */
#include <errno.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kube_http_int.h"
#include "kube_list.h"
#include "kube_selector.h"
#include "kube_watch.h"

/* The real server's default watch timeout is random in [min, 2 * min)
 * with --min-request-timeout=1800. */
#define WATCH_TIMEOUT_MIN_S 1800

/* A parsed collection request: GET .../pods?... */
typedef struct pods_request {
	const char *ns; /* NULL: all namespaces */
	bool watch;
	bool bookmarks;
	bool has_rv; /* resourceVersion given, not "" */
	uint64_t rv; /* 0 for "0" */
	uint64_t limit;
	int timeout_s; /* 0: none given */
	const char *cont;
	kube_selector *labels;
	kube_selector *fields;
} pods_request;

static void
not_found(struct evhttp_request *req)
{
	kube_reply_status(req, 404, "NotFound",
			  "the server could not find the requested resource");
}

/* parse_bool is Go's strconv.ParseBool. */
static bool
parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"1",    "t",    "T",
					  "TRUE", "true", "True"};
	static const char *const no[] = {"0",     "f",     "F",
					 "FALSE", "false", "False"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcmp(s, yes[i]) == 0 || strcmp(s, no[i]) == 0) {
			*out = strcmp(s, yes[i]) == 0;
			return true;
		}
	}
	return false;
}

static bool
parse_u64(const char *s, uint64_t *out)
{
	if (*s < '0' || *s > '9') {
		return false;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end != '\0' || errno != 0) {
		return false;
	}
	*out = v;
	return true;
}

/* parse_request fills r from the query; on failure it has answered 400
 * and returns false. */
static bool
parse_request(struct evhttp_request *req, const kube_query *q, bool watch,
	      pods_request *r)
{
	char err[512];
	const char *v;
	bool ok = true;
	r->watch = watch;
	if ((v = kube_query_get(q, "watch")) != NULL && !watch) {
		ok = *v == '\0' || parse_bool(v, &r->watch);
	}
	if (ok && (v = kube_query_get(q, "allowWatchBookmarks")) != NULL) {
		ok = *v == '\0' || parse_bool(v, &r->bookmarks);
	}
	if (ok && (v = kube_query_get(q, "resourceVersion")) != NULL &&
	    *v != '\0') {
		r->has_rv = true;
		ok = parse_u64(v, &r->rv);
	}
	uint64_t n;
	if (ok && (v = kube_query_get(q, "limit")) != NULL && *v != '\0') {
		/* A negative limit means no limit, as for the real server. */
		ok = *v == '-' ? parse_u64(v + 1, &n) : parse_u64(v, &r->limit);
	}
	if (ok && (v = kube_query_get(q, "timeoutSeconds")) != NULL &&
	    *v != '\0') {
		ok = parse_u64(v, &n) && n <= INT32_MAX;
		r->timeout_s = ok ? (int)n : 0;
	}
	if (!ok) {
		kube_reply_status(req, 400, "BadRequest",
				  "invalid query parameter value");
		return false;
	}
	r->cont = kube_query_get(q, "continue");
	if (kube_selector_parse(kube_query_get(q, "labelSelector"),
				KUBE_SELECTOR_LABELS, &r->labels, err,
				sizeof(err)) != KVI_OK ||
	    kube_selector_parse(kube_query_get(q, "fieldSelector"),
				KUBE_SELECTOR_FIELDS, &r->fields, err,
				sizeof(err)) != KVI_OK) {
		kube_reply_status(req, 400, "BadRequest", err);
		return false;
	}
	return true;
}

static void
request_fini(pods_request *r)
{
	kube_selector_free(r->labels);
	kube_selector_free(r->fields);
}

/* too_large answers a resourceVersion the server has not reached, as the
 * watch cache does once it gave up waiting for it. */
static void
too_large(kube_http *h, struct evhttp_request *req, uint64_t rv)
{
	char msg[128];
	snprintf(msg, sizeof(msg),
		 "Too large resource version: %" PRIu64 ", current: %" PRIu64,
		 rv, kube_store_rv(h->store));
	json_t *st = kube_status(504, "Timeout", msg);
	json_object_set_new(st, "details",
			    json_pack("{s:[{s:s,s:s}],s:i}", "causes", "reason",
				      "ResourceVersionTooLarge", "message",
				      "Too large resource version",
				      "retryAfterSeconds", 1));
	kube_reply_json(req, 504, st);
}

static void
handle_list(kube_http *h, struct evhttp_request *req, pods_request *r)
{
	h->lists++;
	bool has_cont = r->cont != NULL && *r->cont != '\0';
	if (has_cont && r->has_rv) {
		kube_reply_status(req, 400, "BadRequest",
				  "specifying resource version is not allowed "
				  "when using continue");
		return;
	}
	if (r->has_rv && r->rv > kube_store_rv(h->store)) {
		too_large(h, req, r->rv);
		return;
	}
	kube_list_query lq = {.ns = r->ns,
			      .labels = r->labels,
			      .fields = r->fields,
			      .limit = r->limit,
			      .cont = r->cont};
	char err[512];
	json_t *list;
	kvi_err rv = kube_list_page(h->store, &lq, &list, err, sizeof(err));
	if (rv == KVI_EPROTO) {
		kube_reply_status(req, 400, "BadRequest", err);
	} else if (rv == KVI_ENOENT) {
		h->gone++;
		kube_reply_status(req, 410, "Expired", err);
	} else {
		kube_reply_json(req, 200, list);
	}
}

static void
handle_watch(kube_http *h, struct evhttp_request *req, pods_request *r)
{
	if (h->block_watches) {
		kube_reply_status(req, 503, "ServiceUnavailable",
				  "the watch cache is not ready: watches are "
				  "blocked by the control API");
		return;
	}
	if (r->has_rv && r->rv > kube_store_rv(h->store)) {
		too_large(h, req, r->rv);
		return;
	}
	kube_watch_spec spec = {
	    .ns = r->ns ? kvi_strdup(r->ns) : NULL,
	    .labels = r->labels,
	    .fields = r->fields,
	    .from_now = !r->has_rv || r->rv == 0,
	    .rv = r->rv,
	    .bookmarks = r->bookmarks,
	    .timeout_s = r->timeout_s > 0 ? r->timeout_s
					  : WATCH_TIMEOUT_MIN_S +
						rand() % WATCH_TIMEOUT_MIN_S,
	};
	r->labels = r->fields = NULL; /* taken by the stream */
	kube_watch_start(h->hub, req, &spec);
}

static void
handle_pods(kube_http *h, struct evhttp_request *req, const char *ns,
	    bool watch, const kube_query *q)
{
	pods_request r = {.ns = ns};
	if (parse_request(req, q, watch, &r)) {
		if (r.watch) {
			handle_watch(h, req, &r);
		} else {
			handle_list(h, req, &r);
		}
	}
	request_fini(&r);
}

static void
handle_get(kube_http *h, struct evhttp_request *req, const char *ns,
	   const char *name)
{
	const json_t *pod = kube_store_get(h->store, ns, name);
	if (pod == NULL) {
		char msg[600];
		snprintf(msg, sizeof(msg), "pods \"%s\" not found", name);
		json_t *st = kube_status(404, "NotFound", msg);
		json_object_set_new(
		    st, "details",
		    json_pack("{s:s,s:s}", "name", name, "kind", "pods"));
		kube_reply_json(req, 404, st);
		return;
	}
	kube_reply_json(req, 200, kube_pod_out(pod));
}

void
kube_api_handle(kube_http *h, struct evhttp_request *req, char **segs, int n,
		const kube_query *q)
{
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	/* Accept /api/v1/watch/... as the legacy form of watch=true. */
	bool legacy_watch = n >= 3 && strcmp(segs[2], "watch") == 0;
	char *s[KUBE_MAX_SEGMENTS];
	int m = 0;
	for (int i = 0; i < n; i++) {
		if (!(legacy_watch && i == 2)) {
			s[m++] = segs[i];
		}
	}
	if (m < 3 || strcmp(s[1], "v1") != 0) {
		not_found(req);
		return;
	}
	bool all = m == 3 && strcmp(s[2], "pods") == 0;
	bool in_ns = (m == 5 || m == 6) && strcmp(s[2], "namespaces") == 0 &&
		     strcmp(s[4], "pods") == 0;
	if (!all && !in_ns) {
		not_found(req);
		return;
	}
	if (cmd != EVHTTP_REQ_GET) {
		kube_reply_status(req, 405, "MethodNotAllowed",
				  "the server does not allow this method on "
				  "the requested resource");
		return;
	}
	if (m == 6 && !legacy_watch) {
		handle_get(h, req, s[3], s[5]);
	} else if (m == 6) {
		not_found(req);
	} else {
		handle_pods(h, req, all ? NULL : s[3], legacy_watch, q);
	}
}
