#include "httpd.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"

#define HEADERS_MAX  (64 * 1024)
#define LISTEN_QUEUE 1024

typedef struct route {
	char *method; /* NULL: any */
	char *path;
	size_t len;
	bool prefix;
	kvi_http_handler fn;
	void *arg;
} route;

/* One response header, name and value in the same allocation. */
typedef struct reply_header {
	struct reply_header *next;
	const char *name;
	const char *value;
} reply_header;

typedef struct kvi_http_loop kvi_http_loop;

struct kvi_http_req {
	kvi_http_loop *loop;
	struct evhttp_request *ev; /* valid until the reply */
	kvi_http_req *prev;        /* in loop->pending */
	kvi_http_req *next;        /* in loop->pending, or loop->done */
	const char *method;
	const char *path;
	const char *suffix;
	const char *query_raw;
	char **query; /* key, value, key, value ... */
	size_t n_query;
	bool query_parsed;
	const void *body;
	size_t body_len;
	/* the reply */
	int status;
	struct evbuffer *out;
	reply_header *headers;
	reply_header **headers_tail;
	/* loop thread only */
	bool in_handler;
	bool sent;
};

/*
 * A loop: one thread, its event_base and evhttp. The fields under mu are
 * shared with the threads that reply; the rest belong to the loop thread
 * while it runs and to the stopping thread after it was joined. A loop
 * outlives its server while orphans still point at it: the last of the
 * server's release and the orphans' replies frees it.
 */
struct kvi_http_loop {
	kvi_httpd *h;
	int index;
	struct event_base *base;
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
	struct event *wake_ev;
	struct event *drain_ev;
	int wake_fd;
	pthread_t tid;
	bool running;
	bool stopping; /* stop seen: not accepting, draining or done */
	bool draining;
	unsigned writing; /* replies being written while draining */

	pthread_mutex_t mu;
	kvi_http_req *pending; /* handed to the application, not replied */
	size_t n_pending;
	kvi_http_req *done; /* replied off the loop thread, to send */
	kvi_http_req **done_tail;
	bool wake_sent;
	bool stop;
	bool closed;   /* thread gone: replies are dropped */
	bool released; /* the server let go of it */
};

struct kvi_httpd {
	kvi_httpd_config cfg;
	route *routes;
	size_t n_routes;
	kvi_http_loop **loops;
	int n_loops;
	uint16_t port;
	bool started;
	bool stopped;
};

/* The loop this thread runs, if it is a loop thread. */
static _Thread_local kvi_http_loop *loop_current;

static void loop_check_drained(kvi_http_loop *loop);
static void loop_on_written(struct evhttp_request *ev, void *arg);

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (err == NULL || errlen == 0) {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static const char *
method_name(enum evhttp_cmd_type t)
{
	switch (t) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	case EVHTTP_REQ_TRACE:
		return "TRACE";
	case EVHTTP_REQ_CONNECT:
		return "CONNECT";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	}
	return "UNKNOWN";
}

/* ---- percent-decoding ---- */

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

/* unescape decodes s[0..len) into out (len + 1 bytes). strict rejects bad
 * escapes and %00; otherwise they are kept as they are. plus turns '+' into
 * a space (query strings). Returns the decoded length, or -1. */
static long
unescape(const char *s, size_t len, char *out, bool strict, bool plus)
{
	size_t j = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '%') {
			int hi = i + 2 < len ? hex_value(s[i + 1]) : -1;
			int lo = i + 2 < len ? hex_value(s[i + 2]) : -1;
			if (hi >= 0 && lo >= 0 && (hi | lo) != 0) {
				out[j++] = (char)(hi * 16 + lo);
				i += 2;
				continue;
			}
			if (strict) {
				return -1;
			}
		} else if (c == '+' && plus) {
			c = ' ';
		}
		out[j++] = c;
	}
	out[j] = '\0';
	return (long)j;
}

kvi_err
kvi_http_unescape(const char *s, size_t len, char *out, size_t *out_len)
{
	long n = unescape(s, len, out, true, false);
	if (n < 0) {
		return KVI_EPROTO;
	}
	*out_len = (size_t)n;
	return KVI_OK;
}

/* ---- requests ---- */

static void
req_free(kvi_http_req *req)
{
	for (size_t i = 0; i < 2 * req->n_query; i++) {
		kvi_free(req->query[i]);
	}
	kvi_free(req->query);
	while (req->headers != NULL) {
		reply_header *hd = req->headers;
		req->headers = hd->next;
		kvi_free(hd);
	}
	if (req->out != NULL) {
		evbuffer_free(req->out);
	}
	kvi_free(req);
}

static char *
query_decode(const char *s, size_t len)
{
	char *out = kvi_malloc(len + 1);
	unescape(s, len, out, false, true);
	return out;
}

/* req_parse_query splits a=1&b=x+y&c into decoded pairs. Malformed escapes
 * are kept as sent rather than failing the whole query. */
static void
req_parse_query(kvi_http_req *req)
{
	req->query_parsed = true;
	size_t cap = 0;
	for (const char *q = req->query_raw; q != NULL && *q != '\0';) {
		const char *end = strchr(q, '&');
		if (end == NULL) {
			end = q + strlen(q);
		}
		const char *eq = memchr(q, '=', (size_t)(end - q));
		const char *key_end = eq != NULL ? eq : end;
		if (key_end > q) {
			if (req->n_query == cap) {
				cap = cap ? cap * 2 : 4;
				req->query = kvi_reallocarray(
				    req->query, 2 * cap, sizeof(char *));
			}
			const char *v = eq != NULL ? eq + 1 : end;
			req->query[2 * req->n_query] =
			    query_decode(q, (size_t)(key_end - q));
			req->query[2 * req->n_query + 1] =
			    query_decode(v, (size_t)(end - v));
			req->n_query++;
		}
		q = *end != '\0' ? end + 1 : end;
	}
}

const char *
kvi_http_req_method(const kvi_http_req *req)
{
	return req->method;
}

const char *
kvi_http_req_path(const kvi_http_req *req)
{
	return req->path;
}

const char *
kvi_http_req_suffix(const kvi_http_req *req)
{
	return req->suffix;
}

const char *
kvi_http_req_query(kvi_http_req *req, const char *name)
{
	if (!req->query_parsed) {
		req_parse_query(req);
	}
	for (size_t i = 0; i < req->n_query; i++) {
		if (strcmp(req->query[2 * i], name) == 0) {
			return req->query[2 * i + 1];
		}
	}
	return NULL;
}

const char *
kvi_http_req_header(const kvi_http_req *req, const char *name)
{
	return evhttp_find_header(evhttp_request_get_input_headers(req->ev),
				  name);
}

const void *
kvi_http_req_body(const kvi_http_req *req, size_t *len)
{
	*len = req->body_len;
	return req->body;
}

/* ---- replies ---- */

static bool
token_valid(const char *s)
{
	if (*s == '\0') {
		return false;
	}
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= 32 || c >= 127 || strchr("()<>@,;:\\\"/[]?={}", c)) {
			return false;
		}
	}
	return true;
}

static bool
header_value_valid(const char *s)
{
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c < 32 && c != '\t') || c == 127) {
			return false;
		}
	}
	return true;
}

static void
req_add_header(kvi_http_req *req, const char *name, const char *value)
{
	size_t nl = strlen(name) + 1;
	size_t vl = strlen(value) + 1;
	reply_header *hd = kvi_malloc(sizeof(*hd) + nl + vl);
	char *p = (char *)(hd + 1);
	memcpy(p, name, nl);
	memcpy(p + nl, value, vl);
	hd->next = NULL;
	hd->name = p;
	hd->value = p + nl;
	if (req->headers_tail == NULL) {
		req->headers_tail = &req->headers;
	}
	*req->headers_tail = hd;
	req->headers_tail = &hd->next;
}

kvi_err
kvi_http_reply_header(kvi_http_req *req, const char *name, const char *value)
{
	if (!token_valid(name) || !header_value_valid(value)) {
		return KVI_EINVAL;
	}
	req_add_header(req, name, value);
	return KVI_OK;
}

/* send_now hands a response to evhttp; on the loop thread only. out may be
 * NULL and is left for the caller to free. */
static void
send_now(kvi_http_loop *loop, struct evhttp_request *ev, int status,
	 const reply_header *headers, struct evbuffer *out)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(ev);
	for (const reply_header *hd = headers; hd != NULL; hd = hd->next) {
		evhttp_add_header(oh, hd->name, hd->value);
	}
	if (loop->draining) {
		evhttp_add_header(oh, "Connection", "close");
		if (evhttp_request_get_connection(ev) != NULL) {
			loop->writing++;
			evhttp_request_set_on_complete_cb(ev, loop_on_written,
							  loop);
		}
	}
	evhttp_send_reply(ev, status, NULL, out);
}

/* pending_unlink takes req off loop->pending; under loop->mu. */
static void
pending_unlink(kvi_http_loop *loop, kvi_http_req *req)
{
	if (req->prev != NULL) {
		req->prev->next = req->next;
	} else {
		loop->pending = req->next;
	}
	if (req->next != NULL) {
		req->next->prev = req->prev;
	}
	req->prev = req->next = NULL;
	loop->n_pending--;
}

/* loop_wake makes the loop thread run loop_on_wake; under loop->mu. */
static void
loop_wake(kvi_http_loop *loop)
{
	if (loop->wake_sent) {
		return;
	}
	uint64_t one = 1;
	loop->wake_sent = true;
	if (write(loop->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, so the loop
		 * wakes anyway */
	}
}

static void loop_destroy(kvi_http_loop *loop);

/* req_finish sends or queues the reply stored in req, and releases req. */
static void
req_finish(kvi_http_req *req)
{
	kvi_http_loop *loop = req->loop;
	if (req->status < 100 || req->status > 599) {
		req->status = 500;
	}
	if (loop_current == loop) {
		pthread_mutex_lock(&loop->mu);
		pending_unlink(loop, req);
		pthread_mutex_unlock(&loop->mu);
		send_now(loop, req->ev, req->status, req->headers, req->out);
		if (req->in_handler) {
			req->sent = true; /* loop_on_request frees it */
			return;
		}
		req_free(req);
		loop_check_drained(loop);
		return;
	}
	pthread_mutex_lock(&loop->mu);
	pending_unlink(loop, req);
	if (loop->closed) {
		bool last = loop->released && loop->n_pending == 0;
		pthread_mutex_unlock(&loop->mu);
		/* an orphan: evhttp let go of it when the loop closed */
		evhttp_request_free(req->ev);
		req_free(req);
		if (last) {
			loop_destroy(loop);
		}
		return;
	}
	req->next = NULL;
	*loop->done_tail = req;
	loop->done_tail = &req->next;
	loop_wake(loop);
	pthread_mutex_unlock(&loop->mu);
}

void
kvi_http_reply(kvi_http_req *req, int status, const char *content_type,
	       const void *body, size_t len)
{
	req->status = status;
	req->out = evbuffer_new();
	if (req->out == NULL) {
		kvi_oom(sizeof(struct evbuffer *));
	}
	if (len > 0 && evbuffer_add(req->out, body, len) != 0) {
		kvi_oom(len);
	}
	if (content_type == NULL && len > 0) {
		content_type = "application/octet-stream";
	}
	if (content_type != NULL) {
		req_add_header(req, "Content-Type", content_type);
	}
	req_finish(req);
}

static void
free_body(const void *data, size_t len, void *arg)
{
	(void)len;
	(void)arg;
	kvi_free((void *)data);
}

void
kvi_http_reply_take(kvi_http_req *req, int status, const char *content_type,
		    char *body, size_t len)
{
	req->status = status;
	req->out = evbuffer_new();
	if (req->out == NULL) {
		kvi_oom(sizeof(struct evbuffer *));
	}
	if (len == 0) {
		kvi_free(body);
	} else if (evbuffer_add_reference(req->out, body, len, free_body,
					  NULL) != 0) {
		kvi_oom(len);
	}
	if (content_type != NULL) {
		req_add_header(req, "Content-Type", content_type);
	}
	req_finish(req);
}

static int
json_to_evbuffer(const char *buf, size_t size, void *data)
{
	return evbuffer_add(data, buf, size);
}

void
kvi_http_reply_json(kvi_http_req *req, int status, json_t *body)
{
	struct evbuffer *out = evbuffer_new();
	if (out == NULL) {
		kvi_oom(sizeof(struct evbuffer *));
	}
	/* one dump, one copy: evbuffer_add per token is slow for a big
	 * body */
	char *text = body != NULL
			 ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY)
			 : NULL;
	int rc = body == NULL   ? evbuffer_add(out, "null", 4)
		 : text != NULL ? evbuffer_add(out, text, strlen(text))
				: -1;
	free(text);
	json_decref(body);
	if (rc != 0) {
		evbuffer_free(out);
		kvi_http_reply_error(req, 500, "response is not encodable");
		return;
	}
	req->status = status;
	req->out = out;
	req_add_header(req, "Content-Type", "application/json");
	req_finish(req);
}

/* error_json returns {"error": msg}; bytes of msg that are not ASCII
 * become '?' when msg is not valid UTF-8, which JSON strings must be. */
static json_t *
error_json(const char *msg)
{
	json_t *s = json_string(msg);
	if (s == NULL) {
		char *copy = kvi_strdup(msg);
		for (char *p = copy; *p != '\0'; p++) {
			if ((unsigned char)*p >= 0x80) {
				*p = '?';
			}
		}
		s = json_string(copy);
		kvi_free(copy);
	}
	json_t *o = json_object();
	json_object_set_new(o, "error", s);
	return o;
}

void
kvi_http_reply_error(kvi_http_req *req, int status, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	char *msg = small;
	if (n >= (int)sizeof(small)) {
		msg = kvi_malloc((size_t)n + 1);
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
	} else if (n < 0) {
		small[0] = '\0';
	}
	json_t *body = error_json(msg);
	if (msg != small) {
		kvi_free(msg);
	}
	kvi_http_reply_json(req, status, body);
}

/* send_error_now answers ev with a JSON error without involving a
 * handler; allow, when set, becomes the Allow header of a 405. */
static void
send_error_now(kvi_http_loop *loop, struct evhttp_request *ev, int status,
	       const char *msg, const char *allow)
{
	struct evbuffer *out = evbuffer_new();
	if (out == NULL) {
		kvi_oom(sizeof(struct evbuffer *));
	}
	json_t *body = error_json(msg);
	json_dump_callback(body, json_to_evbuffer, out, JSON_COMPACT);
	json_decref(body);
	reply_header allow_hd = {NULL, "Allow", allow};
	reply_header ctype = {allow != NULL ? &allow_hd : NULL, "Content-Type",
			      "application/json"};
	send_now(loop, ev, status, &ctype, out);
	evbuffer_free(out);
}

/* ---- routing ---- */

static bool
route_path_matches(const route *r, const char *path)
{
	if (r->prefix) {
		return strncmp(path, r->path, r->len) == 0;
	}
	return strcmp(path, r->path) == 0;
}

/* allow_add appends method to the comma-separated list allow. */
static void
allow_add(char *allow, size_t size, const char *method)
{
	size_t ml = strlen(method);
	for (const char *p = allow; (p = strstr(p, method)) != NULL; p += ml) {
		if ((p == allow || p[-1] == ' ') &&
		    (p[ml] == ',' || p[ml] == '\0')) {
			return;
		}
	}
	size_t used = strlen(allow);
	snprintf(allow + used, size - used, "%s%s", used ? ", " : "", method);
}

/* route_find returns the most specific route for method and path, or
 * NULL; then *allow lists the methods the path has (405), or is empty
 * (404). */
static const route *
route_find(const kvi_httpd *h, const char *method, const char *path,
	   char *allow, size_t allow_size)
{
	const route *best = NULL;
	size_t best_score = 0;
	/* HEAD is GET without the body, which evhttp leaves out */
	bool is_head = strcmp(method, "HEAD") == 0;
	allow[0] = '\0';
	for (size_t i = 0; i < h->n_routes; i++) {
		const route *r = &h->routes[i];
		if (!route_path_matches(r, path)) {
			continue;
		}
		if (r->method != NULL && strcmp(r->method, method) != 0 &&
		    !(is_head && strcmp(r->method, "GET") == 0)) {
			allow_add(allow, allow_size, r->method);
			if (strcmp(r->method, "GET") == 0) {
				allow_add(allow, allow_size, "HEAD");
			}
			continue;
		}
		size_t score = r->prefix ? r->len : SIZE_MAX;
		if (best == NULL || score > best_score ||
		    (score == best_score && r->method != NULL)) {
			best = r;
			best_score = score;
		}
	}
	return best;
}

static kvi_err
route_add(kvi_httpd *h, const char *method, const char *path, bool prefix,
	  kvi_http_handler fn, void *arg)
{
	if (h->started || path == NULL || path[0] != '/' || fn == NULL ||
	    (method != NULL && !token_valid(method))) {
		return KVI_EINVAL;
	}
	for (size_t i = 0; i < h->n_routes; i++) {
		const route *r = &h->routes[i];
		bool same_method = (r->method == NULL && method == NULL) ||
				   (r->method != NULL && method != NULL &&
				    strcmp(r->method, method) == 0);
		if (same_method && r->prefix == prefix &&
		    strcmp(r->path, path) == 0) {
			return KVI_EEXIST;
		}
	}
	h->routes =
	    kvi_reallocarray(h->routes, h->n_routes + 1, sizeof(*h->routes));
	route *r = &h->routes[h->n_routes++];
	r->method = method != NULL ? kvi_strdup(method) : NULL;
	r->path = kvi_strdup(path);
	r->len = strlen(path);
	r->prefix = prefix;
	r->fn = fn;
	r->arg = arg;
	return KVI_OK;
}

kvi_err
kvi_httpd_route(kvi_httpd *h, const char *method, const char *path,
		kvi_http_handler fn, void *arg)
{
	return route_add(h, method, path, false, fn, arg);
}

kvi_err
kvi_httpd_route_prefix(kvi_httpd *h, const char *method, const char *prefix,
		       kvi_http_handler fn, void *arg)
{
	return route_add(h, method, prefix, true, fn, arg);
}

/* ---- loops ---- */

/* no_delay turns Nagle's algorithm off on the request's connection: a
 * reply written in more than one segment would otherwise wait for the
 * client's delayed ACK (40 ms on Linux) before its last segment goes. */
static void
no_delay(struct evhttp_request *ev)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(ev);
	struct bufferevent *bev =
	    conn != NULL ? evhttp_connection_get_bufferevent(conn) : NULL;
	evutil_socket_t fd = bev != NULL ? bufferevent_getfd(bev) : -1;
	if (fd >= 0) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
}

static void
loop_on_request(struct evhttp_request *ev, void *arg)
{
	kvi_http_loop *loop = arg;
	no_delay(ev);
	if (loop->stopping) {
		send_error_now(loop, ev, 503, "server is shutting down", NULL);
		return;
	}
	const char *method = method_name(evhttp_request_get_command(ev));
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(ev);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	if (path == NULL || path[0] == '\0') {
		path = "/";
	}
	char allow[128];
	const route *r =
	    route_find(loop->h, method, path, allow, sizeof(allow));
	if (r == NULL && allow[0] != '\0') {
		send_error_now(loop, ev, 405, "method not allowed", allow);
		return;
	}
	if (r == NULL) {
		send_error_now(loop, ev, 404, "no such path", NULL);
		return;
	}

	kvi_http_req *req = kvi_calloc(1, sizeof(*req));
	req->loop = loop;
	req->ev = ev;
	req->method = method;
	req->path = path;
	req->suffix = r->prefix ? path + r->len : "";
	req->query_raw = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
	struct evbuffer *in = evhttp_request_get_input_buffer(ev);
	req->body_len = evbuffer_get_length(in);
	req->body = req->body_len > 0 ? evbuffer_pullup(in, -1) : NULL;
	if (req->body == NULL) {
		req->body = "";
		req->body_len = 0;
	}
	pthread_mutex_lock(&loop->mu);
	req->next = loop->pending;
	if (loop->pending != NULL) {
		loop->pending->prev = req;
	}
	loop->pending = req;
	loop->n_pending++;
	pthread_mutex_unlock(&loop->mu);

	req->in_handler = true;
	r->fn(r->arg, req);
	/* req is alive here even if another thread replied: only this
	 * thread frees requests, and it has not yet seen the queue */
	req->in_handler = false;
	if (req->sent) {
		req_free(req);
		loop_check_drained(loop);
	}
}

static void
loop_begin_stop(kvi_http_loop *loop)
{
	loop->stopping = true;
	if (loop->bound != NULL) {
		evhttp_del_accept_socket(loop->http, loop->bound);
		loop->bound = NULL;
	}
	int ms = loop->h->cfg.drain_ms;
	if (ms <= 0) {
		event_base_loopbreak(loop->base);
		return;
	}
	loop->draining = true;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(loop->drain_ev, &tv);
	loop_check_drained(loop);
}

/* loop_check_drained ends a draining loop once nothing is deferred and every
 * reply sent while draining has been written. */
static void
loop_check_drained(kvi_http_loop *loop)
{
	if (!loop->draining) {
		return;
	}
	pthread_mutex_lock(&loop->mu);
	size_t pending = loop->n_pending;
	pthread_mutex_unlock(&loop->mu);
	if (pending == 0 && loop->writing == 0) {
		event_base_loopbreak(loop->base);
	}
}

/* loop_on_written is evhttp's on-complete callback of a reply sent while
 * draining: the reply has left for the socket. */
static void
loop_on_written(struct evhttp_request *ev, void *arg)
{
	(void)ev;
	kvi_http_loop *loop = arg;
	loop->writing--;
	loop_check_drained(loop);
}

static void
loop_on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvi_http_loop *loop = arg;
	event_base_loopbreak(loop->base);
}

static void
loop_on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	kvi_http_loop *loop = arg;
	uint64_t n;
	if (read(fd, &n, sizeof(n)) < 0) {
		/* EAGAIN: a wake-up already consumed */
	}
	pthread_mutex_lock(&loop->mu);
	kvi_http_req *done = loop->done;
	loop->done = NULL;
	loop->done_tail = &loop->done;
	loop->wake_sent = false;
	bool stop = loop->stop;
	pthread_mutex_unlock(&loop->mu);

	while (done != NULL) {
		kvi_http_req *req = done;
		done = req->next;
		send_now(loop, req->ev, req->status, req->headers, req->out);
		req_free(req);
	}
	if (stop && !loop->stopping) {
		loop_begin_stop(loop);
		return;
	}
	loop_check_drained(loop);
}

static void *
loop_main(void *arg)
{
	kvi_http_loop *loop = arg;
	char name[16];
	snprintf(name, sizeof(name), "kvi-http-%d", loop->index);
	pthread_setname_np(pthread_self(), name);
	loop_current = loop;
	event_base_loop(loop->base, EVLOOP_NO_EXIT_ON_EMPTY);
	loop_current = NULL;
	return NULL;
}

static kvi_http_loop *
loop_alloc(kvi_httpd *h, int index)
{
	kvi_http_loop *loop = kvi_calloc(1, sizeof(*loop));
	loop->h = h;
	loop->index = index;
	loop->wake_fd = -1;
	loop->done_tail = &loop->done;
	pthread_mutex_init(&loop->mu, NULL);
	return loop;
}

/* loop_fini frees what loop_init built; idempotent, and a half-built loop
 * survives it. Not while the loop thread runs. */
static void
loop_fini(kvi_http_loop *loop)
{
	if (loop->http != NULL) {
		evhttp_free(loop->http); /* closes sockets, frees requests */
		loop->http = NULL;
		loop->bound = NULL;
	}
	if (loop->wake_ev != NULL) {
		event_free(loop->wake_ev);
		loop->wake_ev = NULL;
	}
	if (loop->drain_ev != NULL) {
		event_free(loop->drain_ev);
		loop->drain_ev = NULL;
	}
	if (loop->base != NULL) {
		event_base_free(loop->base);
		loop->base = NULL;
	}
	if (loop->wake_fd >= 0) {
		close(loop->wake_fd);
		loop->wake_fd = -1;
	}
}

static void
loop_destroy(kvi_http_loop *loop)
{
	loop_fini(loop);
	pthread_mutex_destroy(&loop->mu);
	kvi_free(loop);
}

/* listen_reuse opens a listening socket on the address ss with
 * SO_REUSEPORT. Each loop listens on one, so the kernel spreads new
 * connections over the loops by their addresses (loops sharing a socket
 * would leave it to whichever thread wakes first, on a busy host often the
 * same one). listen_open first binds the address without SO_REUSEPORT
 * and lets it go only to open the group, so a port already taken, by
 * kvindex or anything else, is refused rather than shared. Returns -1
 * with errno set on failure. */
static int
listen_reuse(const struct sockaddr_storage *ss, socklen_t sl, int v6only)
{
	int fd = socket(ss->ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	int on = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (ss->ss_family == AF_INET6) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
			   sizeof(v6only));
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) != 0 ||
	    bind(fd, (const struct sockaddr *)ss, sl) != 0 ||
	    listen(fd, LISTEN_QUEUE) != 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/* listen_again opens another socket of listen_fd's group. */
static int
listen_again(int listen_fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int v6only = 0;
	socklen_t ol = sizeof(v6only);
	if (getsockname(listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
		return -1;
	}
	if (ss.ss_family == AF_INET6) {
		getsockopt(listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ol);
	}
	return listen_reuse(&ss, sl, v6only);
}

static kvi_err
loop_init(kvi_http_loop *loop, int listen_fd, char *err, size_t errlen)
{
	const kvi_httpd_config *cfg = &loop->h->cfg;
	struct event_config *ec = event_config_new();
	if (ec == NULL) {
		kvi_oom(sizeof(struct event_config *));
	}
	/* one thread per base: no locking needed, whatever evthread says */
	event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
	loop->base = event_base_new_with_config(ec);
	event_config_free(ec);
	if (loop->base == NULL) {
		set_err(err, errlen, "event_base_new failed");
		return KVI_EIO;
	}
	loop->http = evhttp_new(loop->base);
	if (loop->http == NULL) {
		set_err(err, errlen, "evhttp_new failed");
		return KVI_EIO;
	}
	evhttp_set_gencb(loop->http, loop_on_request, loop);
	evhttp_set_allowed_methods(
	    loop->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
			    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
			    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
			    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_max_body_size(loop->http, (ev_ssize_t)cfg->max_body);
	evhttp_set_max_headers_size(loop->http, HEADERS_MAX);
	evhttp_set_timeout(loop->http, cfg->timeout_s);
	/* read and drop an oversized body so the client sees the 413 */
	evhttp_set_flags(loop->http, EVHTTP_SERVER_LINGERING_CLOSE);

	int fd = loop->index == 0 ? fcntl(listen_fd, F_DUPFD_CLOEXEC, 0)
				  : listen_again(listen_fd);
	if (fd < 0) {
		set_err(err, errlen, "listen socket of loop %d: %s",
			loop->index, strerror(errno));
		return KVI_EIO;
	}
	loop->bound = evhttp_accept_socket_with_handle(loop->http, fd);
	if (loop->bound == NULL) {
		close(fd);
		set_err(err, errlen, "evhttp_accept_socket failed");
		return KVI_EIO;
	}
	loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (loop->wake_fd < 0) {
		set_err(err, errlen, "eventfd: %s", strerror(errno));
		return KVI_EIO;
	}
	loop->wake_ev = event_new(loop->base, loop->wake_fd,
				  EV_READ | EV_PERSIST, loop_on_wake, loop);
	loop->drain_ev = evtimer_new(loop->base, loop_on_drain_timeout, loop);
	if (loop->wake_ev == NULL || loop->drain_ev == NULL ||
	    event_add(loop->wake_ev, NULL) != 0) {
		set_err(err, errlen, "event_new failed");
		return KVI_EIO;
	}
	return KVI_OK;
}

/* loop_close runs after the loop thread ended (or never ran): requests the
 * application still holds become orphans that evhttp must not free, queued
 * replies are dropped, and evhttp closes every connection.
 *
 * evhttp_free() runs under mu: it unlinks every request from its
 * connection, owned ones included, and an orphan's reply frees its request
 * as soon as it sees closed - which it must not do while evhttp_free() may
 * still be walking that connection's list. */
static void
loop_close(kvi_http_loop *loop)
{
	pthread_mutex_lock(&loop->mu);
	loop->closed = true;
	kvi_http_req *done = loop->done;
	loop->done = NULL;
	loop->done_tail = &loop->done;
	for (kvi_http_req *r = loop->pending; r != NULL; r = r->next) {
		evhttp_request_own(r->ev);
	}
	for (kvi_http_req *r = done; r != NULL; r = r->next) {
		evhttp_request_own(r->ev);
	}
	if (loop->http != NULL) {
		evhttp_free(loop->http);
		loop->http = NULL;
		loop->bound = NULL;
	}
	pthread_mutex_unlock(&loop->mu);
	loop_fini(loop);
	while (done != NULL) {
		kvi_http_req *req = done;
		done = req->next;
		evhttp_request_free(req->ev);
		req_free(req);
	}
}

/* loop_release lets go of a closed loop; it is freed now or by the reply
 * of its last orphan. */
static void
loop_release(kvi_http_loop *loop)
{
	pthread_mutex_lock(&loop->mu);
	loop->released = true;
	bool last = loop->n_pending == 0;
	pthread_mutex_unlock(&loop->mu);
	if (last) {
		loop_destroy(loop);
	}
}

/* ---- server ---- */

kvi_httpd *
kvi_httpd_alloc(const kvi_httpd_config *cfg)
{
	kvi_httpd *h = kvi_calloc(1, sizeof(*h));
	if (cfg != NULL) {
		h->cfg = *cfg;
	}
	if (h->cfg.max_body == 0) {
		h->cfg.max_body = KVI_HTTPD_DEFAULT_MAX_BODY;
	}
	if (h->cfg.timeout_s <= 0) {
		h->cfg.timeout_s = KVI_HTTPD_DEFAULT_TIMEOUT_S;
	}
	return h;
}

/* listen_open binds and listens on host_port; writes the socket and its
 * port. Returns KVI_EINVAL (unparsable) or KVI_EIO. */
static kvi_err
listen_open(const char *host_port, int *fd_out, uint16_t *port_out, char *err,
	    size_t errlen)
{
	char host[256];
	const char *colon;
	if (host_port == NULL) {
		set_err(err, errlen, "no address");
		return KVI_EINVAL;
	}
	if (host_port[0] == '[') {
		const char *close_br = strchr(host_port, ']');
		if (close_br == NULL || close_br[1] != ':') {
			set_err(err, errlen, "bad address %s", host_port);
			return KVI_EINVAL;
		}
		colon = close_br + 1;
		snprintf(host, sizeof(host), "%.*s",
			 (int)(close_br - host_port - 1), host_port + 1);
	} else {
		colon = strrchr(host_port, ':');
		if (colon == NULL ||
		    (size_t)(colon - host_port) >= sizeof(host)) {
			set_err(err, errlen, "bad address %s", host_port);
			return KVI_EINVAL;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(colon - host_port),
			 host_port);
	}
	const char *port = colon + 1;
	char *end;
	errno = 0;
	unsigned long pn = strtoul(port, &end, 10);
	if (*port == '\0' || *end != '\0' || pn > 65535 || errno != 0) {
		set_err(err, errlen, "bad port in %s", host_port);
		return KVI_EINVAL;
	}
	bool any = host[0] == '\0' || strcmp(host, "*") == 0;
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(any ? NULL : host, port, &hints, &res);
	if (rc != 0) {
		set_err(err, errlen, "%s: %s", host_port, gai_strerror(rc));
		return KVI_EINVAL;
	}
	int fd = -1;
	int saved = 0;
	for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		int on = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int v6only = 0;
		socklen_t ol = sizeof(v6only);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
			/* the address is free (and the port chosen): open it
			 * again as the first socket of a group */
			if (ss.ss_family == AF_INET6) {
				getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY,
					   &v6only, &ol);
			}
			close(fd);
			fd = listen_reuse(&ss, sl, v6only);
			if (fd >= 0) {
				break;
			}
			saved = errno;
			continue;
		}
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		set_err(err, errlen, "listen %s: %s", host_port,
			strerror(saved));
		return KVI_EIO;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
		saved = errno;
		close(fd);
		set_err(err, errlen, "getsockname: %s", strerror(saved));
		return KVI_EIO;
	}
	*port_out = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	*fd_out = fd;
	return KVI_OK;
}

/* loops_shutdown stops, joins and closes every loop of h. */
static void
loops_shutdown(kvi_httpd *h)
{
	for (int i = 0; i < h->n_loops; i++) {
		kvi_http_loop *loop = h->loops[i];
		pthread_mutex_lock(&loop->mu);
		loop->stop = true;
		if (loop->wake_fd >= 0) {
			loop_wake(loop);
		}
		pthread_mutex_unlock(&loop->mu);
	}
	for (int i = 0; i < h->n_loops; i++) {
		kvi_http_loop *loop = h->loops[i];
		if (loop->running) {
			pthread_join(loop->tid, NULL);
			loop->running = false;
		}
		loop_close(loop);
	}
}

static void
loops_release(kvi_httpd *h)
{
	for (int i = 0; i < h->n_loops; i++) {
		loop_release(h->loops[i]);
	}
	kvi_free(h->loops);
	h->loops = NULL;
	h->n_loops = 0;
}

kvi_err
kvi_httpd_start(kvi_httpd *h, const char *host_port, int threads, char *err,
		size_t errlen)
{
	if (h->started || h->n_loops > 0 || threads < 1 ||
	    threads > KVI_HTTPD_MAX_THREADS) {
		set_err(err, errlen, "bad thread count or already started");
		return KVI_EINVAL;
	}
	int fd;
	uint16_t port;
	kvi_err rc = listen_open(host_port, &fd, &port, err, errlen);
	if (rc != KVI_OK) {
		return rc;
	}
	h->loops = kvi_calloc((size_t)threads, sizeof(*h->loops));
	h->n_loops = threads;
	for (int i = 0; i < threads; i++) {
		h->loops[i] = loop_alloc(h, i);
	}
	for (int i = 0; i < threads; i++) {
		rc = loop_init(h->loops[i], fd, err, errlen);
		if (rc != KVI_OK) {
			goto fail;
		}
	}
	close(fd);
	fd = -1;

	/* loop threads take no asynchronous signals: EPIPE instead of
	 * SIGPIPE, and the process's own signal handling stays on its own
	 * threads. Faults stay deliverable, for crash reports. */
	sigset_t all, old;
	sigfillset(&all);
	static const int faults[] = {SIGSEGV, SIGBUS,  SIGFPE, SIGILL,
				     SIGTRAP, SIGABRT, SIGSYS};
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		sigdelset(&all, faults[i]);
	}
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < threads; i++) {
		kvi_http_loop *loop = h->loops[i];
		int e = pthread_create(&loop->tid, NULL, loop_main, loop);
		if (e != 0) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			set_err(err, errlen, "pthread_create: %s", strerror(e));
			rc = KVI_EIO;
			goto fail;
		}
		loop->running = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	h->port = port;
	h->started = true;
	return KVI_OK;

fail:
	if (fd >= 0) {
		close(fd);
	}
	loops_shutdown(h);
	loops_release(h);
	return rc;
}

uint16_t
kvi_httpd_port(const kvi_httpd *h)
{
	return h->started ? h->port : 0;
}

void
kvi_httpd_stop(kvi_httpd *h)
{
	if (h == NULL || !h->started || h->stopped) {
		return;
	}
	h->stopped = true;
	loops_shutdown(h);
}

void
kvi_httpd_free(kvi_httpd *h)
{
	if (h == NULL) {
		return;
	}
	kvi_httpd_stop(h);
	loops_release(h);
	for (size_t i = 0; i < h->n_routes; i++) {
		kvi_free(h->routes[i].method);
		kvi_free(h->routes[i].path);
	}
	kvi_free(h->routes);
	kvi_free(h);
}
