#include "kube_http.h"

#include <ctype.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "alloc.h"
#include "kube_http_int.h"
#include "kube_state.h"
#include "log.h"

/* ---- query strings and paths ---------------------------------------- */

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* decode returns s[0..n) with %XX (and "+" when plus) decoded; a "%" not
 * followed by two hex digits stays as it is. */
static char *
decode(const char *s, size_t n, bool plus)
{
	char *out = kvi_malloc(n + 1);
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hex_value(s[i + 1]) >= 0 &&
		    hex_value(s[i + 2]) >= 0) {
			out[j++] = (char)(hex_value(s[i + 1]) * 16 +
					  hex_value(s[i + 2]));
			i += 2;
		} else if (plus && s[i] == '+') {
			out[j++] = ' ';
		} else {
			out[j++] = s[i];
		}
	}
	out[j] = '\0';
	return out;
}

void
kube_query_parse(const char *raw, kube_query *q)
{
	memset(q, 0, sizeof(*q));
	const char *p = raw != NULL ? raw : "";
	while (*p != '\0') {
		size_t n = strcspn(p, "&;");
		const char *eq = memchr(p, '=', n);
		size_t klen = eq != NULL ? (size_t)(eq - p) : n;
		if (n > 0) {
			q->keys = kvi_reallocarray(q->keys, q->n + 1,
						   sizeof(q->keys[0]));
			q->values = kvi_reallocarray(q->values, q->n + 1,
						     sizeof(q->values[0]));
			q->keys[q->n] = decode(p, klen, true);
			q->values[q->n] =
			    eq != NULL ? decode(eq + 1, n - klen - 1, true)
				       : kvi_strdup("");
			q->n++;
		}
		p += n;
		if (*p != '\0') {
			p++;
		}
	}
}

const char *
kube_query_get(const kube_query *q, const char *key)
{
	for (size_t i = 0; i < q->n; i++) {
		if (strcmp(q->keys[i], key) == 0) {
			return q->values[i];
		}
	}
	return NULL;
}

void
kube_query_fini(kube_query *q)
{
	for (size_t i = 0; i < q->n; i++) {
		kvi_free(q->keys[i]);
		kvi_free(q->values[i]);
	}
	kvi_free(q->keys);
	kvi_free(q->values);
	memset(q, 0, sizeof(*q));
}

int
kube_path_split(const char *path, char **segs)
{
	int n = 0;
	const char *p = path;
	while (*p != '\0') {
		while (*p == '/') {
			p++;
		}
		if (*p == '\0') {
			break;
		}
		size_t len = strcspn(p, "/");
		if (n == KUBE_MAX_SEGMENTS) {
			kube_path_free(segs, n);
			return -1;
		}
		segs[n++] = decode(p, len, false);
		p += len;
	}
	return n;
}

void
kube_path_free(char **segs, int n)
{
	for (int i = 0; i < n; i++) {
		kvi_free(segs[i]);
	}
}

/* ---- replies -------------------------------------------------------- */

void
kube_reply_json(struct evhttp_request *req, int code, json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	if (text == NULL) {
		kvi_oom(0);
	}
	struct evbuffer *out = evbuffer_new();
	if (out == NULL) {
		kvi_oom(0);
	}
	evbuffer_add(out, text, strlen(text));
	evbuffer_add(out, "\n", 1);
	free(text); /* allocated by jansson */
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "Content-Type", "application/json");
	evhttp_send_reply(req, code, code < 300 ? "OK" : "Error", out);
	evbuffer_free(out);
}

json_t *
kube_status(int code, const char *reason, const char *message)
{
	return json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status",
			 "apiVersion", "v1", "metadata", "status", "Failure",
			 "message", message, "reason", reason, "code", code);
}

void
kube_reply_status(struct evhttp_request *req, int code, const char *reason,
		  const char *message)
{
	kube_reply_json(req, code, kube_status(code, reason, message));
}

json_t *
kube_request_json(struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	if (len == 0) {
		return json_object();
	}
	const char *data = (const char *)evbuffer_pullup(in, -1);
	return json_loadb(data, len, 0, NULL);
}

json_t *
kube_pod_out(const json_t *pod)
{
	json_t *o = json_pack("{s:s,s:s}", "kind", "Pod", "apiVersion", "v1");
	json_object_update(o, (json_t *)pod);
	return o;
}

/* ---- routing -------------------------------------------------------- */

/* authorized applies the real server's bearer-token authenticator: the
 * scheme is case-insensitive and the token is the second word. */
static bool
authorized(const kube_http *h, struct evhttp_request *req)
{
	if (h->token == NULL) {
		return true;
	}
	const char *auth = evhttp_find_header(
	    evhttp_request_get_input_headers(req), "Authorization");
	if (auth == NULL) {
		return false;
	}
	while (*auth == ' ') {
		auth++;
	}
	if (strncasecmp(auth, "bearer ", 7) != 0) {
		return false;
	}
	const char *tok = auth + 7;
	size_t n = strcspn(tok, " ");
	return n > 0 && n == strlen(h->token) && memcmp(tok, h->token, n) == 0;
}

static const char *
method_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	default:
		return "OTHER";
	}
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	kube_http *h = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = evhttp_uri_get_path(uri);
	if (path == NULL || *path == '\0') {
		path = "/";
	}
	if (kvi_log_enabled(KVI_LOG_DEBUG)) {
		char q[600];
		KVI_DEBUG("request", "method=%s path=%s",
			  method_name(evhttp_request_get_command(req)),
			  kvi_log_quote(q, sizeof(q), path));
	}
	char *segs[KUBE_MAX_SEGMENTS];
	int n = kube_path_split(path, segs);
	if (n < 0) {
		kube_reply_status(req, 404, "NotFound",
				  "the server could not find the requested "
				  "resource");
		return;
	}
	if (n >= 1 && strcmp(segs[0], "control") == 0) {
		kube_control_handle(h, req, segs, n);
	} else if (n == 1 && (strcmp(segs[0], "healthz") == 0 ||
			      strcmp(segs[0], "readyz") == 0 ||
			      strcmp(segs[0], "livez") == 0)) {
		struct evbuffer *out = evbuffer_new();
		evbuffer_add(out, "ok", 2);
		evhttp_send_reply(req, 200, "OK", out);
		evbuffer_free(out);
	} else if (!authorized(h, req)) {
		h->unauthorized++;
		kube_reply_status(req, 401, "Unauthorized", "Unauthorized");
	} else if (n >= 1 && strcmp(segs[0], "apis") == 0) {
		kube_lease_handle(h, req, segs, n);
	} else if (n >= 1 && strcmp(segs[0], "api") == 0) {
		kube_query q;
		kube_query_parse(evhttp_uri_get_query(uri), &q);
		kube_api_handle(h, req, segs, n, &q);
		kube_query_fini(&q);
	} else {
		kube_reply_status(req, 404, "NotFound",
				  "the server could not find the requested "
				  "resource");
	}
	kube_path_free(segs, n);
}

/* on_change publishes a store change to the watches, then saves the
 * state so that a restart continues from it. */
static void
on_change(void *arg, const kube_event *ev)
{
	kube_http *h = arg;
	kube_watch_hub_publish(h->hub, ev);
	if (h->state_path != NULL) {
		kvi_err rv = kube_state_save(h->state_path, h->store);
		if (rv != KVI_OK) {
			KVI_ERROR("state_save_failed", "path=%s error=%s",
				  h->state_path, kvi_strerror(rv));
		}
	}
}

kube_http *
kube_http_alloc(struct event_base *base, kube_store *store,
		const kube_http_config *cfg)
{
	kube_http *h = kvi_calloc(1, sizeof(*h));
	h->base = base;
	h->store = store;
	h->leases = kube_leases_alloc();
	h->http = evhttp_new(base);
	if (h->http == NULL) {
		kvi_oom(0);
	}
	h->hub = kube_watch_hub_alloc(base, store, cfg->bookmark_ms,
				      KUBE_HTTP_TIMEOUT_S);
	h->state_path = cfg->state_path ? kvi_strdup(cfg->state_path) : NULL;
	h->token = cfg->token && *cfg->token ? kvi_strdup(cfg->token) : NULL;
	evhttp_set_timeout(h->http, KUBE_HTTP_TIMEOUT_S);
	evhttp_set_max_body_size(h->http, KUBE_MAX_BODY);
	evhttp_set_allowed_methods(h->http,
				   EVHTTP_REQ_GET | EVHTTP_REQ_POST |
				       EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
				       EVHTTP_REQ_HEAD | EVHTTP_REQ_PATCH);
	evhttp_set_gencb(h->http, on_request, h);
	kube_store_set_listener(store, on_change, h);
	return h;
}

kvi_err
kube_http_bind(kube_http *h, const char *host, int port, int *bound)
{
	struct evhttp_bound_socket *s =
	    evhttp_bind_socket_with_handle(h->http, host, (uint16_t)port);
	if (s == NULL) {
		return KVI_EIO;
	}
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&ss,
			&len) != 0) {
		return KVI_EIO;
	}
	if (ss.ss_family == AF_INET6) {
		*bound = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	} else {
		*bound = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	}
	return KVI_OK;
}

void
kube_http_free(kube_http *h)
{
	if (h == NULL) {
		return;
	}
	kube_store_set_listener(h->store, NULL, NULL);
	kube_watch_hub_free(h->hub); /* before the connections go */
	evhttp_free(h->http);
	kube_leases_free(h->leases);
	kvi_free(h->state_path);
	kvi_free(h->token);
	kvi_free(h);
}
