/*
 * httpd_req.c - requests and replies of the HTTP server (httpd.h): the
 * request accessors, query and percent-decoding, and the reply functions,
 * which build a reply and hand it to its loop (httpd_loop.c).
 */
#include "httpd.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "httpd_int.h"

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

void
kvi_http_req_free(kvi_http_req *req)
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

const char *const *
kvi_http_req_params(kvi_http_req *req, size_t *n)
{
	if (!req->query_parsed) {
		req_parse_query(req);
	}
	*n = req->n_query;
	return (const char *const *)req->query;
}

const char *
kvi_http_req_query(kvi_http_req *req, const char *name)
{
	size_t n;
	const char *const *kv = kvi_http_req_params(req, &n);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(kv[2 * i], name) == 0) {
			return kv[2 * i + 1];
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
kvi_http_req_body(kvi_http_req *req, size_t *len)
{
	if (req->body == NULL) {
		/* copied into the loop's buffer, which the next request's
		 * handler reuses: valid while this handler runs */
		kvi_http_loop *loop = req->loop;
		if (loop->body_cap < req->body_len + 1) {
			size_t cap = loop->body_cap ? loop->body_cap : 65536;
			while (cap < req->body_len + 1) {
				cap *= 2;
			}
			kvi_free(loop->body_buf);
			loop->body_buf = kvi_malloc(cap);
			loop->body_cap = cap;
		}
		evbuffer_copyout(req->in, loop->body_buf, req->body_len);
		loop->body_buf[req->body_len] = '\0';
		req->body = loop->body_buf;
	}
	*len = req->body_len;
	return req->body;
}

size_t
kvi_http_req_body_len(const kvi_http_req *req)
{
	return req->body_len;
}

void
kvi_http_req_body_copy(const kvi_http_req *req, void *dst)
{
	if (req->body != NULL) {
		memcpy(dst, req->body, req->body_len);
	} else if (req->body_len > 0) {
		evbuffer_copyout(req->in, dst, req->body_len);
	}
}

void **
kvi_http_req_local(kvi_http_req *req, struct event_base **base)
{
	*base = req->loop->base;
	return &req->loop->local;
}

/* ---- replies ---- */

bool
kvi_http_token_valid(const char *s)
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
	if (!kvi_http_token_valid(name) || !header_value_valid(value)) {
		return KVI_EINVAL;
	}
	req_add_header(req, name, value);
	return KVI_OK;
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
	kvi_http_req_finish(req);
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
	kvi_http_req_finish(req);
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
	kvi_http_req_finish(req);
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

/* kvi_http_send_error_now answers ev with a JSON error without involving a
 * handler; allow, when set, becomes the Allow header of a 405. */
void
kvi_http_send_error_now(kvi_http_loop *loop, struct evhttp_request *ev,
			int status, const char *msg, const char *allow)
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
	kvi_http_send_now(loop, ev, status, &ctype, out);
	evbuffer_free(out);
}
