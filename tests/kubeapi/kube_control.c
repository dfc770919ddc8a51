/*
 * kube_control.c - the test-only control API under /control/ (no
 * authentication; kube_http_int.h, README.md). Errors are answered
 * 400/404/405 with {"error": "..."}.
 */
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "kube_http_int.h"
#include "kube_watch.h"

#define NAME_MAX_LEN 253

static void
reply_error(struct evhttp_request *req, int code, const char *msg)
{
	kube_reply_json(req, code, json_pack("{s:s}", "error", msg));
}

static json_t *
rv_string(uint64_t rv)
{
	char text[24];
	snprintf(text, sizeof(text), "%" PRIu64, rv);
	return json_string(text);
}

/* valid_name accepts what could be a namespace or pod name: lower-case
 * letters, digits, '-' and '.', starting and ending with a letter or
 * digit. */
static bool
valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > NAME_MAX_LEN || s[0] == '-' || s[0] == '.' ||
	    s[n - 1] == '-' || s[n - 1] == '.') {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.')) {
			return false;
		}
	}
	return true;
}

static void
handle_pod(kube_http *h, struct evhttp_request *req, enum evhttp_cmd_type cmd,
	   const char *ns, const char *name)
{
	if (!valid_name(ns) || !valid_name(name)) {
		reply_error(req, 400, "invalid namespace or pod name");
		return;
	}
	if (cmd == EVHTTP_REQ_DELETE) {
		const json_t *last;
		if (kube_store_delete(h->store, ns, name, &last) != KVI_OK) {
			reply_error(req, 404, "no such pod");
			return;
		}
		kube_reply_json(req, 200, kube_pod_out(last));
		return;
	}
	if (cmd != EVHTTP_REQ_PUT) {
		reply_error(req, 405, "PUT or DELETE");
		return;
	}
	json_t *body = kube_request_json(req);
	bool created = kube_store_get(h->store, ns, name) == NULL;
	const json_t *stored;
	if (body == NULL ||
	    kube_store_put(h->store, ns, name, body, &stored) != KVI_OK) {
		json_decref(body);
		reply_error(req, 400, "the body must be a pod object");
		return;
	}
	json_decref(body);
	kube_reply_json(req, created ? 201 : 200, kube_pod_out(stored));
}

static void
handle_stats(kube_http *h, struct evhttp_request *req)
{
	kube_watch_stats ws;
	kube_watch_hub_stats(h->hub, &ws);
	kube_reply_json(
	    req, 200,
	    json_pack("{s:I,s:I,s:I,s:I,s:I,s:o,s:o,s:I,s:b,s:b}", "lists",
		      (json_int_t)h->lists, "watches", (json_int_t)ws.started,
		      "open_watches", (json_int_t)ws.open, "unauthorized",
		      (json_int_t)h->unauthorized, "gone",
		      (json_int_t)(h->gone + ws.gone), "rv",
		      rv_string(kube_store_rv(h->store)), "compacted_rv",
		      rv_string(kube_store_compacted_rv(h->store)), "events",
		      (json_int_t)ws.events, "watches_blocked",
		      h->block_watches, "auth", h->token != NULL));
}

static void
handle_token(kube_http *h, struct evhttp_request *req, const json_t *body)
{
	json_t *t = json_object_get(body, "token");
	if (!json_is_string(t) && !json_is_null(t)) {
		reply_error(req, 400, "token must be a string or null");
		return;
	}
	kvi_free(h->token);
	const char *text = json_string_value(t);
	h->token = text != NULL && *text != '\0' ? kvi_strdup(text) : NULL;
	kube_reply_json(req, 200, json_pack("{s:b}", "auth", h->token != NULL));
}

static void
handle_chunking(kube_http *h, struct evhttp_request *req, const json_t *body)
{
	const char *mode = json_string_value(json_object_get(body, "mode"));
	static const struct {
		const char *name;
		kube_chunking mode;
	} modes[] = {{"line", KUBE_CHUNK_LINE},
		     {"split", KUBE_CHUNK_SPLIT},
		     {"batch", KUBE_CHUNK_BATCH}};
	for (size_t i = 0; mode != NULL && i < sizeof(modes) / sizeof(modes[0]);
	     i++) {
		if (strcmp(mode, modes[i].name) == 0) {
			kube_watch_hub_set_chunking(h->hub, modes[i].mode);
			kube_reply_json(req, 200,
					json_pack("{s:s}", "mode", mode));
			return;
		}
	}
	reply_error(req, 400, "mode must be line, split or batch");
}

/* handle_action answers the control calls that take a JSON body (or
 * none) and no path parameter. */
static void
handle_action(kube_http *h, struct evhttp_request *req,
	      enum evhttp_cmd_type cmd, const char *what)
{
	bool post = cmd == EVHTTP_REQ_POST;
	json_t *body = kube_request_json(req);
	if (body == NULL) {
		reply_error(req, 400, "the body is not JSON");
	} else if (strcmp(what, "compact") == 0 && post) {
		kube_store_compact(h->store);
		kube_reply_json(
		    req, 200,
		    json_pack("{s:o}", "compacted_rv",
			      rv_string(kube_store_compacted_rv(h->store))));
	} else if (strcmp(what, "drop-watches") == 0 && post) {
		kube_watch_stats ws;
		kube_watch_hub_stats(h->hub, &ws);
		kube_watch_hub_drop(h->hub);
		kube_reply_json(
		    req, 200,
		    json_pack("{s:I}", "dropped", (json_int_t)ws.open));
	} else if (strcmp(what, "block-watches") == 0 && post) {
		json_t *on = json_object_get(body, "on");
		if (!json_is_boolean(on)) {
			reply_error(req, 400, "on must be a boolean");
		} else {
			h->block_watches = json_is_true(on);
			kube_reply_json(
			    req, 200,
			    json_pack("{s:b}", "on", h->block_watches));
		}
	} else if (strcmp(what, "block-leases") == 0 && post) {
		json_t *on = json_object_get(body, "on");
		if (!json_is_boolean(on)) {
			reply_error(req, 400, "on must be a boolean");
		} else {
			kube_leases_set_down(h->leases, json_is_true(on));
			kube_reply_json(
			    req, 200,
			    json_pack("{s:b}", "on", json_is_true(on)));
		}
	} else if (strcmp(what, "lease-races") == 0 && post) {
		json_t *n = json_object_get(body, "n");
		if (!json_is_integer(n) || json_integer_value(n) < 0) {
			reply_error(req, 400, "n must be a count");
		} else {
			kube_leases_set_races(h->leases,
					      (uint64_t)json_integer_value(n));
			kube_reply_json(req, 200, json_pack("{s:O}", "n", n));
		}
	} else if (strcmp(what, "leases") == 0 && cmd == EVHTTP_REQ_GET) {
		kube_reply_json(req, 200, kube_leases_stats(h->leases));
	} else if (strcmp(what, "token") == 0 && cmd == EVHTTP_REQ_PUT) {
		handle_token(h, req, body);
	} else if (strcmp(what, "chunking") == 0 && post) {
		handle_chunking(h, req, body);
	} else if (strcmp(what, "stats") == 0 && cmd == EVHTTP_REQ_GET) {
		handle_stats(h, req);
	} else {
		reply_error(req, 404, "no such control call (or method)");
	}
	json_decref(body);
}

void
kube_control_handle(kube_http *h, struct evhttp_request *req, char **segs,
		    int n)
{
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	if (n == 4 && strcmp(segs[1], "pods") == 0) {
		handle_pod(h, req, cmd, segs[2], segs[3]);
	} else if (n == 2) {
		handle_action(h, req, cmd, segs[1]);
	} else {
		reply_error(req, 404, "no such control call");
	}
}
