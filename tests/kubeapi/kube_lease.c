/*
 * kube_lease.c - Leases of coordination.k8s.io/v1, as leader election
 * uses them (kube_http_int.h, README.md): get, create and update of one
 * Lease by name, with the real server's optimistic concurrency. An update
 * must carry the stored metadata.resourceVersion, or it is refused 409
 * Conflict with the real server's message; a create of a name that exists
 * is 409 AlreadyExists; a missing Lease is 404 NotFound. The spec is
 * stored as given (holderIdentity, leaseDurationSeconds, acquireTime,
 * renewTime, leaseTransitions), and so are metadata.annotations.
 *
 * Leases live in memory only; their resourceVersions come from a counter
 * of their own. The control API can make the lease API answer 503 (as an
 * API server that lost etcd does) to test a leader that cannot renew, and
 * make the next updates lose a race with another writer (409 Conflict).
 */
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kube_http_int.h"

struct kube_leases {
	json_t *by_key; /* "ns/name" -> the stored Lease */
	uint64_t rv;
	bool down;
	uint64_t races; /* updates still to lose a race (set_races) */
	uint64_t conflicts, updates;
};

kube_leases *
kube_leases_alloc(void)
{
	kube_leases *l = kvi_calloc(1, sizeof(*l));
	l->by_key = json_object();
	l->rv = 1000;
	return l;
}

void
kube_leases_free(kube_leases *l)
{
	if (l == NULL) {
		return;
	}
	json_decref(l->by_key);
	kvi_free(l);
}

void
kube_leases_set_down(kube_leases *l, bool down)
{
	l->down = down;
}

void
kube_leases_set_races(kube_leases *l, uint64_t n)
{
	l->races = n;
}

json_t *
kube_leases_stats(const kube_leases *l)
{
	return json_pack("{s:I,s:I,s:I,s:b}", "leases",
			 (json_int_t)json_object_size(l->by_key), "updates",
			 (json_int_t)l->updates, "conflicts",
			 (json_int_t)l->conflicts, "down", l->down);
}

/* lease_out returns the Lease as the API shows it. */
static json_t *
lease_out(const json_t *stored)
{
	json_t *o = json_pack("{s:s,s:s}", "kind", "Lease", "apiVersion",
			      "coordination.k8s.io/v1");
	json_object_update(o, (json_t *)stored);
	return o;
}

/* lease_store writes body as the Lease ns/name with a new
 * resourceVersion and answers it with code. */
static void
lease_store(kube_leases *l, struct evhttp_request *req, const char *ns,
	    const char *name, const char *key, json_t *body, int code)
{
	char rv[24];
	snprintf(rv, sizeof(rv), "%" PRIu64, ++l->rv);
	json_t *meta = json_object();
	json_object_set_new(meta, "name", json_string(name));
	json_object_set_new(meta, "namespace", json_string(ns));
	json_object_set_new(meta, "resourceVersion", json_string(rv));
	json_t *ann =
	    json_object_get(json_object_get(body, "metadata"), "annotations");
	if (json_is_object(ann)) {
		json_object_set(meta, "annotations", ann);
	}
	json_t *spec = json_object_get(body, "spec");
	json_t *stored = json_pack("{s:o,s:O}", "metadata", meta, "spec",
				   json_is_object(spec) ? spec : json_object());
	json_object_set_new(l->by_key, key, stored);
	l->updates++;
	kube_reply_json(req, code, lease_out(stored));
}

static void
lease_method_not_allowed(struct evhttp_request *req)
{
	kube_reply_status(req, 405, "MethodNotAllowed",
			  "the server does not allow this method on the "
			  "requested resource");
}

static void
lease_not_found(struct evhttp_request *req, const char *name)
{
	char msg[600];
	snprintf(msg, sizeof(msg),
		 "leases.coordination.k8s.io \"%s\" not found", name);
	kube_reply_status(req, 404, "NotFound", msg);
}

void
kube_lease_handle(kube_http *h, struct evhttp_request *req, char **segs, int n)
{
	/* apis coordination.k8s.io v1 namespaces NS leases [NAME] */
	kube_leases *l = h->leases;
	if (n < 6 || n > 7 || strcmp(segs[1], "coordination.k8s.io") != 0 ||
	    strcmp(segs[2], "v1") != 0 || strcmp(segs[3], "namespaces") != 0 ||
	    strcmp(segs[5], "leases") != 0) {
		kube_reply_status(req, 404, "NotFound",
				  "the server could not find the requested "
				  "resource");
		return;
	}
	if (l->down) {
		kube_reply_status(req, 503, "ServiceUnavailable",
				  "etcdserver: request timed out");
		return;
	}
	const char *ns = segs[4];
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	json_t *body = NULL;
	if (cmd == EVHTTP_REQ_POST || cmd == EVHTTP_REQ_PUT) {
		body = kube_request_json(req);
		if (!json_is_object(body)) {
			json_decref(body);
			kube_reply_status(req, 400, "BadRequest",
					  "the body is not a JSON object");
			return;
		}
	}
	const char *name =
	    n == 7 ? segs[6]
		   : json_string_value(json_object_get(
			 json_object_get(body, "metadata"), "name"));
	if ((n == 6 && cmd != EVHTTP_REQ_POST) ||
	    (n == 7 && cmd == EVHTTP_REQ_POST)) {
		json_decref(body);
		lease_method_not_allowed(req);
		return;
	}
	if (name == NULL || *name == '\0') {
		json_decref(body);
		kube_reply_status(req, 400, "BadRequest",
				  "metadata.name is required");
		return;
	}
	char key[600];
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	json_t *stored = json_object_get(l->by_key, key);
	char msg[800];
	if (cmd == EVHTTP_REQ_GET) {
		if (stored == NULL) {
			lease_not_found(req, name);
		} else {
			kube_reply_json(req, 200, lease_out(stored));
		}
	} else if (cmd == EVHTTP_REQ_POST) {
		if (stored != NULL) {
			snprintf(msg, sizeof(msg),
				 "leases.coordination.k8s.io \"%s\" already "
				 "exists",
				 name);
			kube_reply_status(req, 409, "AlreadyExists", msg);
		} else {
			lease_store(l, req, ns, name, key, body, 201);
		}
	} else if (cmd == EVHTTP_REQ_PUT) {
		if (stored != NULL && l->races > 0) {
			/* another writer got there between this client's
			 * read and its write: the Lease has a new version */
			l->races--;
			char rv[24];
			snprintf(rv, sizeof(rv), "%" PRIu64, ++l->rv);
			json_object_set_new(json_object_get(stored, "metadata"),
					    "resourceVersion", json_string(rv));
		}
		const char *want = json_string_value(json_object_get(
		    json_object_get(body, "metadata"), "resourceVersion"));
		const char *have = json_string_value(json_object_get(
		    json_object_get(stored, "metadata"), "resourceVersion"));
		if (stored == NULL) {
			lease_not_found(req, name);
		} else if (want != NULL && strcmp(want, have) != 0) {
			l->conflicts++;
			snprintf(msg, sizeof(msg),
				 "Operation cannot be fulfilled on "
				 "leases.coordination.k8s.io \"%s\": the "
				 "object has been modified; please apply your "
				 "changes to the latest version and try again",
				 name);
			kube_reply_status(req, 409, "Conflict", msg);
		} else {
			lease_store(l, req, ns, name, key, body, 200);
		}
	} else {
		lease_method_not_allowed(req);
	}
	json_decref(body);
}
