/*
 * test_httpd.c - the HTTP server over real loopback sockets, with libcurl
 * as the client: routing, errors, bodies, limits, deferred replies from
 * other threads, concurrency over two loops, clients that leave early and
 * stopping with requests in flight.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc.h"
#include "httpd.h"

/* ---- client ---- */

typedef struct fetch {
	CURLcode rc;
	long status;
	char *body;
	size_t len;
	char ctype[128];
	char allow[128];
	char xreply[64];
	char connection[32];
} fetch;

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	fetch *f = arg;
	f->body = kvi_realloc(f->body, f->len + size * n + 1);
	memcpy(f->body + f->len, p, size * n);
	f->len += size * n;
	f->body[f->len] = '\0';
	return size * n;
}

static void
copy_header(char *dst, size_t size, const char *line, size_t len,
	    const char *name)
{
	size_t nl = strlen(name);
	if (len <= nl || strncasecmp(line, name, nl) != 0) {
		return;
	}
	const char *v = line + nl;
	size_t vl = len - nl;
	while (vl > 0 && (*v == ' ')) {
		v++;
		vl--;
	}
	while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n')) {
		vl--;
	}
	snprintf(dst, size, "%.*s", (int)vl, v);
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	fetch *f = arg;
	size_t len = size * n;
	copy_header(f->ctype, sizeof(f->ctype), p, len, "Content-Type:");
	copy_header(f->allow, sizeof(f->allow), p, len, "Allow:");
	copy_header(f->xreply, sizeof(f->xreply), p, len, "X-Reply:");
	copy_header(f->connection, sizeof(f->connection), p, len,
		    "Connection:");
	return len;
}

static CURL *
easy_new(const char *method, uint16_t port, const char *path, const void *body,
	 size_t len, struct curl_slist *hdrs, long timeout_ms, fetch *f)
{
	char url[512];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
	memset(f, 0, sizeof(*f));
	CURL *c = curl_easy_init();
	assert_non_null(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, f);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_PRIVATE, f);
	if (body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)len);
	}
	if (hdrs != NULL) {
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	}
	return c;
}

static void
easy_done(CURL *c, fetch *f)
{
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &f->status);
	curl_easy_cleanup(c);
}

/* do_fetch runs one request to completion into f. */
static void
do_fetch(const char *method, uint16_t port, const char *path, const void *body,
	 size_t len, struct curl_slist *hdrs, long timeout_ms, fetch *f)
{
	CURL *c = easy_new(method, port, path, body, len, hdrs, timeout_ms, f);
	f->rc = curl_easy_perform(c);
	easy_done(c, f);
}

static void
fetch_fini(fetch *f)
{
	kvi_free(f->body);
	f->body = NULL;
}

/* json_field returns the string member key of the JSON object in body, in
 * buf, or "" when absent or not a string. */
static const char *
json_field(const char *body, const char *key, char *buf, size_t size)
{
	buf[0] = '\0';
	json_t *j = json_loads(body ? body : "", 0, NULL);
	const char *s = json_string_value(json_object_get(j, key));
	if (s != NULL) {
		snprintf(buf, size, "%s", s);
	}
	json_decref(j);
	return buf;
}

static long long
json_int(const char *body, const char *key)
{
	json_t *j = json_loads(body ? body : "", 0, NULL);
	json_t *v = json_object_get(j, key);
	long long n = json_is_integer(v) ? json_integer_value(v) : -1;
	json_decref(j);
	return n;
}

/* ---- server-side handlers ---- */

typedef struct holder {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	kvi_http_req *reqs[16];
	int n;
	int calls; /* handler invocations, for the 413 test */
} holder;

static holder hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void
holder_reset(void)
{
	pthread_mutex_lock(&hold.mu);
	hold.n = 0;
	hold.calls = 0;
	pthread_mutex_unlock(&hold.mu);
}

/* holder_wait waits until n requests are held; false after 5 s. */
static bool
holder_wait(int n)
{
	double end = now_s() + 5;
	pthread_mutex_lock(&hold.mu);
	while (hold.n < n && now_s() < end) {
		pthread_mutex_unlock(&hold.mu);
		sleep_ms(2);
		pthread_mutex_lock(&hold.mu);
	}
	bool ok = hold.n >= n;
	pthread_mutex_unlock(&hold.mu);
	return ok;
}

static void
h_hold(void *arg, kvi_http_req *req)
{
	(void)arg;
	pthread_mutex_lock(&hold.mu);
	hold.reqs[hold.n++] = req;
	pthread_cond_broadcast(&hold.cv);
	pthread_mutex_unlock(&hold.mu);
}

static void
h_hello(void *arg, kvi_http_req *req)
{
	(void)arg;
	kvi_http_reply(req, 200, "text/plain", "hello", 5);
}

static void
h_count(void *arg, kvi_http_req *req)
{
	(void)arg;
	size_t len;
	kvi_http_req_body(req, &len);
	pthread_mutex_lock(&hold.mu);
	hold.calls++;
	pthread_mutex_unlock(&hold.mu);
	kvi_http_reply_json(req, 200,
			    json_pack("{s:I}", "len", (json_int_t)len));
}

static void
h_echo(void *arg, kvi_http_req *req)
{
	(void)arg;
	size_t len;
	const void *body = kvi_http_req_body(req, &len);
	json_error_t jerr;
	json_t *in = json_loadb(body, len, 0, &jerr);
	if (in == NULL) {
		kvi_http_reply_error(req, 400, "bad JSON: %s", jerr.text);
		return;
	}
	const char *x = kvi_http_req_header(req, "x-test");
	/* no cmocka asserts off the test thread: report through the reply */
	bool checks =
	    kvi_http_reply_header(req, "X-Reply", "yes") == KVI_OK &&
	    kvi_http_reply_header(req, "Bad Name", "v") == KVI_EINVAL &&
	    kvi_http_reply_header(req, "X-Split", "a\r\nb: c") == KVI_EINVAL;
	kvi_http_reply_json(req, 201,
			    json_pack("{s:o,s:s,s:s?,s:b}", "echo", in,
				      "method", kvi_http_req_method(req), "x",
				      x, "header_checks", checks));
}

static json_t *
str_or_null(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

static void
h_query(void *arg, kvi_http_req *req)
{
	(void)arg;
	json_t *o = json_object();
	const char *names[] = {"a", "b", "c", "flag", "empty", "missing"};
	for (size_t i = 0; i < 6; i++) {
		json_object_set_new(
		    o, names[i],
		    str_or_null(kvi_http_req_query(req, names[i])));
	}
	json_object_set_new(o, "path", json_string(kvi_http_req_path(req)));
	kvi_http_reply_json(req, 200, o);
}

static void
h_listener(void *arg, kvi_http_req *req)
{
	(void)arg;
	/* /admin/listeners/<key>/move, key percent-encoded */
	const char *rest = kvi_http_req_suffix(req);
	const char *slash = strrchr(rest, '/');
	size_t klen = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
	char key[256];
	size_t n;
	if (klen >= sizeof(key) ||
	    kvi_http_unescape(rest, klen, key, &n) != KVI_OK) {
		kvi_http_reply_error(req, 400, "bad key");
		return;
	}
	kvi_http_reply_json(req, 200,
			    json_pack("{s:s,s:s,s:s}", "suffix", rest, "key",
				      key, "action", slash ? slash + 1 : ""));
}

static void
h_badmsg(void *arg, kvi_http_req *req)
{
	(void)arg;
	kvi_http_reply_error(req, 422, "bad %s byte", "\xff");
}

static void
h_admin_any(void *arg, kvi_http_req *req)
{
	(void)arg;
	kvi_http_reply_json(req, 200, json_pack("{s:s}", "route", "admin-any"));
}

/* A deferred reply from a thread that sleeps delay_ms first. */
typedef struct later {
	kvi_http_req *req;
	int delay_ms;
	int status;
} later;

static void *
later_main(void *arg)
{
	later *l = arg;
	sleep_ms(l->delay_ms);
	kvi_http_reply_json(l->req, l->status,
			    json_pack("{s:s}", "from", "worker"));
	kvi_free(l);
	return NULL;
}

static void
reply_later(kvi_http_req *req, int delay_ms, int status)
{
	later *l = kvi_malloc(sizeof(*l));
	l->req = req;
	l->delay_ms = delay_ms;
	l->status = status;
	pthread_t t;
	if (pthread_create(&t, NULL, later_main, l) != 0) {
		abort();
	}
	pthread_detach(t);
}

static void
h_later(void *arg, kvi_http_req *req)
{
	(void)arg;
	reply_later(req, 100, 200);
}

static kvi_httpd *
server_new(const kvi_httpd_config *cfg, int threads)
{
	kvi_httpd *h = kvi_httpd_alloc(cfg);
	assert_int_equal(kvi_httpd_route(h, "GET", "/hello", h_hello, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_route(h, "POST", "/echo", h_echo, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_route(h, NULL, "/count", h_count, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_route(h, "GET", "/q", h_query, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_route(h, "GET", "/later", h_later, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_route(h, NULL, "/hold", h_hold, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_route(h, "GET", "/badmsg", h_badmsg, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_route_prefix(h, "POST", "/admin/listeners/",
						h_listener, NULL),
			 KVI_OK);
	assert_int_equal(
	    kvi_httpd_route_prefix(h, NULL, "/admin/", h_admin_any, NULL),
	    KVI_OK);
	char err[256] = "";
	assert_int_equal(
	    kvi_httpd_start(h, "127.0.0.1:0", threads, err, sizeof(err)),
	    KVI_OK);
	assert_true(kvi_httpd_port(h) != 0);
	holder_reset();
	return h;
}

/* ---- tests ---- */

static void
test_routes_and_errors(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	uint16_t port = kvi_httpd_port(h);
	fetch f;
	char buf[256];

	do_fetch("GET", port, "/hello", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.rc, CURLE_OK);
	assert_int_equal(f.status, 200);
	assert_string_equal(f.body, "hello");
	assert_string_equal(f.ctype, "text/plain");
	fetch_fini(&f);

	/* unknown path: 404 with a JSON error */
	do_fetch("GET", port, "/nope", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 404);
	assert_string_equal(f.ctype, "application/json");
	assert_string_equal(json_field(f.body, "error", buf, sizeof(buf)),
			    "no such path");
	fetch_fini(&f);

	/* known path, wrong method: 405 naming the allowed ones */
	do_fetch("DELETE", port, "/hello", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 405);
	assert_string_equal(f.allow, "GET, HEAD");
	assert_string_equal(json_field(f.body, "error", buf, sizeof(buf)),
			    "method not allowed");
	fetch_fini(&f);

	/* HEAD is served by the GET route, without the body */
	do_fetch("HEAD", port, "/hello", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.rc, CURLE_OK);
	assert_int_equal(f.status, 200);
	assert_int_equal(f.len, 0);
	fetch_fini(&f);
	do_fetch("PUT", port, "/echo", "{}", 2, NULL, 5000, &f);
	assert_int_equal(f.status, 405);
	assert_string_equal(f.allow, "POST");
	fetch_fini(&f);

	/* an error message that is not UTF-8 still makes valid JSON */
	do_fetch("GET", port, "/badmsg", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 422);
	assert_string_equal(json_field(f.body, "error", buf, sizeof(buf)),
			    "bad ? byte");
	fetch_fini(&f);

	/* a query string does not change the route */
	do_fetch("GET", port, "/hello?x=1", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	fetch_fini(&f);

	/* prefix routes: the longest prefix wins, with its suffix */
	do_fetch("POST", port, "/admin/listeners/ns%2Fpod%231/move", "{}", 2,
		 NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	assert_string_equal(json_field(f.body, "key", buf, sizeof(buf)),
			    "ns/pod#1");
	assert_string_equal(json_field(f.body, "suffix", buf, sizeof(buf)),
			    "ns%2Fpod%231/move");
	assert_string_equal(json_field(f.body, "action", buf, sizeof(buf)),
			    "move");
	fetch_fini(&f);
	do_fetch("POST", port, "/admin/listeners/bad%zz/move", "{}", 2, NULL,
		 5000, &f);
	assert_int_equal(f.status, 400);
	fetch_fini(&f);
	/* a GET matches only the shorter, any-method prefix */
	do_fetch("GET", port, "/admin/listeners/x", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	assert_string_equal(json_field(f.body, "route", buf, sizeof(buf)),
			    "admin-any");
	fetch_fini(&f);
	/* "/adminx" does not start with "/admin/" */
	do_fetch("GET", port, "/adminx", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 404);
	fetch_fini(&f);

	/* registration errors */
	assert_int_equal(kvi_httpd_route(h, "GET", "/late", h_hello, NULL),
			 KVI_EINVAL);
	kvi_httpd_stop(h);
	kvi_httpd_stop(h); /* idempotent */
	kvi_httpd_free(h);

	kvi_httpd *g = kvi_httpd_alloc(NULL);
	assert_int_equal(kvi_httpd_route(g, "GET", "nope", h_hello, NULL),
			 KVI_EINVAL);
	assert_int_equal(kvi_httpd_route(g, "GET", "/a", h_hello, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_route(g, "GET", "/a", h_hello, NULL),
			 KVI_EEXIST);
	assert_int_equal(kvi_httpd_route(g, "POST", "/a", h_hello, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_port(g), 0);
	kvi_httpd_stop(g); /* never started */
	kvi_httpd_free(g);
	kvi_httpd_stop(NULL);
	kvi_httpd_free(NULL);
}

static void
test_start_errors(void **state)
{
	(void)state;
	char err[256];
	kvi_httpd *a = kvi_httpd_alloc(NULL);
	err[0] = '\0';
	assert_int_equal(kvi_httpd_start(a, "nonsense", 1, err, sizeof(err)),
			 KVI_EINVAL);
	assert_true(err[0] != '\0');
	assert_int_equal(
	    kvi_httpd_start(a, "127.0.0.1:99999", 1, err, sizeof(err)),
	    KVI_EINVAL);
	assert_int_equal(kvi_httpd_start(a, "127.0.0.1:0", 0, err, sizeof(err)),
			 KVI_EINVAL);
	assert_int_equal(kvi_httpd_start(a, "127.0.0.1:0", 2, err, sizeof(err)),
			 KVI_OK);
	assert_int_equal(kvi_httpd_start(a, "127.0.0.1:0", 1, NULL, 0),
			 KVI_EINVAL);
	char taken[64];
	snprintf(taken, sizeof(taken), "127.0.0.1:%u", kvi_httpd_port(a));
	kvi_httpd *b = kvi_httpd_alloc(NULL);
	err[0] = '\0';
	assert_int_equal(kvi_httpd_start(b, taken, 1, err, sizeof(err)),
			 KVI_EIO);
	assert_non_null(strstr(err, "in use"));
	assert_int_equal(kvi_httpd_port(b), 0);
	kvi_httpd_free(b);
	kvi_httpd_free(a);

	/* IPv6 literal form parses (the bind itself may be unavailable) */
	kvi_httpd *c = kvi_httpd_alloc(NULL);
	kvi_err rc = kvi_httpd_start(c, "[::1]:0", 1, err, sizeof(err));
	assert_true(rc == KVI_OK || rc == KVI_EIO);
	kvi_httpd_free(c);
}

static void
test_query_params(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	fetch f;
	char buf[256];
	do_fetch("GET", kvi_httpd_port(h),
		 "/q?a=1&b=hello+world&c=%2F%26x%3D&flag&empty=&a=2", NULL, 0,
		 NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	json_t *j = json_loads(f.body, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "a")), "1");
	assert_string_equal(json_string_value(json_object_get(j, "b")),
			    "hello world");
	assert_string_equal(json_string_value(json_object_get(j, "c")), "/&x=");
	assert_string_equal(json_string_value(json_object_get(j, "flag")), "");
	assert_string_equal(json_string_value(json_object_get(j, "empty")), "");
	assert_true(json_is_null(json_object_get(j, "missing")));
	assert_string_equal(json_string_value(json_object_get(j, "path")),
			    "/q");
	json_decref(j);
	fetch_fini(&f);

	do_fetch("GET", kvi_httpd_port(h), "/q", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	j = json_loads(f.body, 0, NULL);
	assert_true(json_is_null(json_object_get(j, "a")));
	json_decref(j);
	(void)buf;
	fetch_fini(&f);
	kvi_httpd_free(h);
}

static void
test_unescape(void **state)
{
	(void)state;
	char out[64];
	size_t n;
	assert_int_equal(kvi_http_unescape("a%2Fb%23c+d", 11, out, &n), KVI_OK);
	assert_string_equal(out, "a/b#c+d");
	assert_int_equal(n, 7);
	assert_int_equal(kvi_http_unescape("%41%4a%4A", 9, out, &n), KVI_OK);
	assert_string_equal(out, "AJJ");
	assert_int_equal(kvi_http_unescape("abc", 2, out, &n), KVI_OK);
	assert_string_equal(out, "ab");
	assert_int_equal(kvi_http_unescape("%zz", 3, out, &n), KVI_EPROTO);
	assert_int_equal(kvi_http_unescape("%4", 2, out, &n), KVI_EPROTO);
	assert_int_equal(kvi_http_unescape("a%", 2, out, &n), KVI_EPROTO);
	assert_int_equal(kvi_http_unescape("%00", 3, out, &n), KVI_EPROTO);
	/* a length that cuts an escape short is an error too */
	assert_int_equal(kvi_http_unescape("%41", 2, out, &n), KVI_EPROTO);
}

static void
test_json_echo(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	fetch f;
	const char *body = "{\"token_ids\": [1, 2, 3], \"model_name\": \"m\"}";
	struct curl_slist *hdrs = curl_slist_append(NULL, "X-Test: abc");
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	do_fetch("POST", kvi_httpd_port(h), "/echo", body, strlen(body), hdrs,
		 5000, &f);
	assert_int_equal(f.rc, CURLE_OK);
	assert_int_equal(f.status, 201);
	assert_string_equal(f.ctype, "application/json");
	assert_string_equal(f.xreply, "yes");
	json_t *got = json_loads(f.body, 0, NULL);
	json_t *want = json_loads(body, 0, NULL);
	assert_non_null(got);
	assert_true(json_equal(json_object_get(got, "echo"), want));
	assert_string_equal(json_string_value(json_object_get(got, "method")),
			    "POST");
	assert_string_equal(json_string_value(json_object_get(got, "x")),
			    "abc");
	assert_true(json_is_true(json_object_get(got, "header_checks")));
	json_decref(got);
	json_decref(want);
	fetch_fini(&f);

	/* bad JSON: the handler's 400 */
	char buf[256];
	do_fetch("POST", kvi_httpd_port(h), "/echo", "{nope", 5, hdrs, 5000,
		 &f);
	assert_int_equal(f.status, 400);
	assert_non_null(
	    strstr(json_field(f.body, "error", buf, sizeof(buf)), "bad JSON"));
	fetch_fini(&f);
	curl_slist_free_all(hdrs);
	kvi_httpd_free(h);
}

static void
test_body_limit(void **state)
{
	(void)state;
	kvi_httpd_config cfg = {.max_body = 1024};
	kvi_httpd *h = server_new(&cfg, 1);
	uint16_t port = kvi_httpd_port(h);
	char *big = kvi_malloc(4096);
	memset(big, 'x', 4096);
	fetch f;

	do_fetch("POST", port, "/count", big, 1024, NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	assert_int_equal(json_int(f.body, "len"), 1024);
	fetch_fini(&f);
	assert_int_equal(hold.calls, 1);

	do_fetch("POST", port, "/count", big, 1025, NULL, 5000, &f);
	assert_int_equal(f.rc, CURLE_OK);
	assert_int_equal(f.status, 413);
	fetch_fini(&f);

	/* with and without Expect: 100-continue */
	struct curl_slist *noexpect = curl_slist_append(NULL, "Expect:");
	do_fetch("POST", port, "/count", big, 4096, noexpect, 5000, &f);
	assert_int_equal(f.status, 413);
	fetch_fini(&f);
	struct curl_slist *expect =
	    curl_slist_append(NULL, "Expect: 100-continue");
	double t0 = now_s();
	do_fetch("POST", port, "/count", big, 4096, expect, 5000, &f);
	assert_int_equal(f.status, 413);
	assert_true(now_s() - t0 < 3.0);
	fetch_fini(&f);
	curl_slist_free_all(noexpect);
	curl_slist_free_all(expect);

	/* the handler never saw the oversized ones; the server still serves */
	assert_int_equal(hold.calls, 1);
	do_fetch("GET", port, "/hello", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	fetch_fini(&f);
	kvi_free(big);
	kvi_httpd_free(h);
}

static void
test_deferred_reply(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	fetch f;
	char buf[64];
	double t0 = now_s();
	do_fetch("GET", kvi_httpd_port(h), "/later", NULL, 0, NULL, 5000, &f);
	double dt = now_s() - t0;
	assert_int_equal(f.rc, CURLE_OK);
	assert_int_equal(f.status, 200);
	assert_string_equal(json_field(f.body, "from", buf, sizeof(buf)),
			    "worker");
	assert_true(dt >= 0.095);
	assert_true(dt < 2.0);
	fetch_fini(&f);

	/* the loop kept serving while the reply was pending */
	CURL *slow = easy_new("GET", kvi_httpd_port(h), "/later", NULL, 0, NULL,
			      5000, &f);
	fetch g;
	CURL *fast = easy_new("GET", kvi_httpd_port(h), "/hello", NULL, 0, NULL,
			      5000, &g);
	CURLM *m = curl_multi_init();
	curl_multi_add_handle(m, slow);
	curl_multi_add_handle(m, fast);
	double fast_at = 0, slow_at = 0;
	t0 = now_s();
	int running = 1;
	while (running > 0) {
		curl_multi_perform(m, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			if (msg->msg != CURLMSG_DONE) {
				continue;
			}
			if (msg->easy_handle == fast) {
				fast_at = now_s() - t0;
			} else {
				slow_at = now_s() - t0;
			}
		}
		curl_multi_poll(m, NULL, 0, 50, NULL);
	}
	assert_true(fast_at > 0 && slow_at > 0);
	assert_true(fast_at < slow_at);
	curl_multi_remove_handle(m, slow);
	curl_multi_remove_handle(m, fast);
	easy_done(slow, &f);
	easy_done(fast, &g);
	curl_multi_cleanup(m);
	assert_int_equal(f.status, 200);
	assert_int_equal(g.status, 200);
	fetch_fini(&f);
	fetch_fini(&g);
	kvi_httpd_free(h);
}

/* A worker that answers queued requests: half of the concurrent test's
 * replies cross threads. */
typedef struct worker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	kvi_http_req *q[256];
	int n;
	bool quit;
} worker;

static worker work = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void *
worker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&work.mu);
	for (;;) {
		while (work.n == 0 && !work.quit) {
			pthread_cond_wait(&work.cv, &work.mu);
		}
		if (work.n == 0 && work.quit) {
			break;
		}
		kvi_http_req *req = work.q[--work.n];
		pthread_mutex_unlock(&work.mu);
		const char *id = kvi_http_req_query(req, "id");
		kvi_http_reply_json(
		    req, 200, json_pack("{s:s,s:s}", "id", id, "by", "worker"));
		pthread_mutex_lock(&work.mu);
	}
	pthread_mutex_unlock(&work.mu);
	return NULL;
}

typedef struct loop_seen {
	pthread_mutex_t mu;
	pthread_t threads[4];
	int counts[4];
	int n;
} loop_seen;

static loop_seen seen = {PTHREAD_MUTEX_INITIALIZER};

static void
h_mixed(void *arg, kvi_http_req *req)
{
	(void)arg;
	pthread_mutex_lock(&seen.mu);
	int i = 0;
	while (i < seen.n && !pthread_equal(seen.threads[i], pthread_self())) {
		i++;
	}
	if (i == seen.n && seen.n < 4) {
		seen.threads[seen.n++] = pthread_self();
	}
	if (i < 4) {
		seen.counts[i]++;
	}
	pthread_mutex_unlock(&seen.mu);
	const char *id = kvi_http_req_query(req, "id");
	if (id != NULL && atoi(id) % 2 == 0) {
		kvi_http_reply_json(
		    req, 200, json_pack("{s:s,s:s}", "id", id, "by", "loop"));
		return;
	}
	pthread_mutex_lock(&work.mu);
	work.q[work.n++] = req;
	pthread_cond_signal(&work.cv);
	pthread_mutex_unlock(&work.mu);
}

#define CONCURRENT 200

static void
test_two_loops_concurrent(void **state)
{
	(void)state;
	kvi_httpd *h = kvi_httpd_alloc(NULL);
	assert_int_equal(kvi_httpd_route(h, "GET", "/mixed", h_mixed, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_start(h, "127.0.0.1:0", 2, NULL, 0), KVI_OK);
	pthread_t wt;
	work.quit = false;
	assert_int_equal(pthread_create(&wt, NULL, worker_main, NULL), 0);

	CURLM *m = curl_multi_init();
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)CONCURRENT);
	static fetch f[CONCURRENT];
	CURL *e[CONCURRENT];
	for (int i = 0; i < CONCURRENT; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/mixed?id=%d", i);
		e[i] = easy_new("GET", kvi_httpd_port(h), path, NULL, 0, NULL,
				10000, &f[i]);
		curl_multi_add_handle(m, e[i]);
	}
	int running = 1;
	while (running > 0) {
		curl_multi_perform(m, &running);
		curl_multi_poll(m, NULL, 0, 50, NULL);
	}
	int ok = 0;
	for (int i = 0; i < CONCURRENT; i++) {
		curl_multi_remove_handle(m, e[i]);
		easy_done(e[i], &f[i]);
		char id[16], want[16], by[16];
		snprintf(want, sizeof(want), "%d", i);
		json_field(f[i].body, "id", id, sizeof(id));
		json_field(f[i].body, "by", by, sizeof(by));
		if (f[i].status == 200 && strcmp(id, want) == 0 &&
		    strcmp(by, i % 2 ? "worker" : "loop") == 0) {
			ok++;
		}
		fetch_fini(&f[i]);
	}
	curl_multi_cleanup(m);
	assert_int_equal(ok, CONCURRENT);
	pthread_mutex_lock(&seen.mu);
	int total = 0;
	for (int i = 0; i < seen.n; i++) {
		total += seen.counts[i];
	}
	print_message("requests per loop thread: %d / %d\n", seen.counts[0],
		      seen.n > 1 ? seen.counts[1] : 0);
	assert_int_equal(total, CONCURRENT);
	assert_true(seen.n <= 2);
	pthread_mutex_unlock(&seen.mu);

	pthread_mutex_lock(&work.mu);
	work.quit = true;
	pthread_cond_signal(&work.cv);
	pthread_mutex_unlock(&work.mu);
	pthread_join(wt, NULL);
	kvi_httpd_free(h);
}

static void
test_client_gone_before_reply(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	fetch f;
	/* the client gives up after 200 ms and closes its connection */
	do_fetch("GET", kvi_httpd_port(h), "/hold", NULL, 0, NULL, 200, &f);
	assert_int_equal(f.rc, CURLE_OPERATION_TIMEDOUT);
	fetch_fini(&f);
	assert_true(holder_wait(1));
	kvi_http_req *req = hold.reqs[0];
	/* the request is still readable, then answered into the void */
	assert_string_equal(kvi_http_req_path(req), "/hold");
	kvi_http_reply_error(req, 500, "too late for %s", "you");
	sleep_ms(50);

	/* the same with the reply made on another thread, twice over */
	do_fetch("GET", kvi_httpd_port(h), "/hold", NULL, 0, NULL, 200, &f);
	assert_int_equal(f.rc, CURLE_OPERATION_TIMEDOUT);
	fetch_fini(&f);
	assert_true(holder_wait(2));
	reply_later(hold.reqs[1], 10, 200);
	sleep_ms(100);

	/* the server is unharmed */
	do_fetch("GET", kvi_httpd_port(h), "/hello", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	fetch_fini(&f);
	kvi_httpd_free(h);
}

/* The client side of the stop tests: n requests to /hold at once. */
typedef struct volley {
	uint16_t port;
	int n;
	fetch f[8];
	double took;
} volley;

static void *
volley_main(void *arg)
{
	volley *v = arg;
	CURLM *m = curl_multi_init();
	CURL *e[8];
	double t0 = now_s();
	for (int i = 0; i < v->n; i++) {
		e[i] = easy_new("GET", v->port, "/hold", NULL, 0, NULL, 10000,
				&v->f[i]);
		curl_multi_add_handle(m, e[i]);
	}
	int running = 1;
	while (running > 0) {
		curl_multi_perform(m, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			if (msg->msg == CURLMSG_DONE) {
				fetch *f;
				curl_easy_getinfo(msg->easy_handle,
						  CURLINFO_PRIVATE, &f);
				f->rc = msg->data.result;
			}
		}
		curl_multi_poll(m, NULL, 0, 20, NULL);
	}
	v->took = now_s() - t0;
	for (int i = 0; i < v->n; i++) {
		curl_multi_remove_handle(m, e[i]);
		easy_done(e[i], &v->f[i]);
	}
	curl_multi_cleanup(m);
	return NULL;
}

static void *
reply_main(void *arg)
{
	kvi_http_reply(arg, 200, "text/plain", "orphan", 6);
	return NULL;
}

static void
test_stop_in_flight(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 2);
	volley v = {.port = kvi_httpd_port(h), .n = 5};
	pthread_t ct;
	assert_int_equal(pthread_create(&ct, NULL, volley_main, &v), 0);
	assert_true(holder_wait(5));

	double t0 = now_s();
	kvi_httpd_stop(h);
	assert_true(now_s() - t0 < 1.0);
	pthread_join(ct, NULL);
	/* every client saw its connection closed, none waited for a timeout */
	assert_true(v.took < 5.0);
	for (int i = 0; i < 5; i++) {
		assert_true(v.f[i].rc != CURLE_OK);
		assert_true(v.f[i].rc != CURLE_OPERATION_TIMEDOUT);
		fetch_fini(&v.f[i]);
	}
	/* orphans: still readable, replies dropped, before and after free */
	assert_string_equal(kvi_http_req_method(hold.reqs[0]), "GET");
	kvi_http_reply(hold.reqs[0], 200, "text/plain", "x", 1);
	kvi_http_reply_error(hold.reqs[1], 503, "stopped");
	kvi_httpd_stop(h);
	kvi_httpd_free(h);
	assert_string_equal(kvi_http_req_path(hold.reqs[2]), "/hold");
	kvi_http_reply_json(hold.reqs[2], 200, json_true());
	pthread_t rt;
	assert_int_equal(pthread_create(&rt, NULL, reply_main, hold.reqs[3]),
			 0);
	pthread_join(rt, NULL);
	kvi_http_reply(hold.reqs[4], 200, NULL, NULL, 0);
}

typedef struct replier {
	kvi_http_req **reqs;
	int n;
} replier;

static void *
replier_main(void *arg)
{
	replier *r = arg;
	for (int i = 0; i < r->n; i++) {
		kvi_http_reply(r->reqs[i], 200, "text/plain", "race", 4);
		if (i % 2) {
			sleep_ms(1);
		}
	}
	return NULL;
}

static void
test_stop_races_replies(void **state)
{
	(void)state;
	/* replies land before, during and after the loops close: sent,
	 * queued and dropped, or orphaned; none may leak or crash */
	for (int round = 0; round < 5; round++) {
		kvi_httpd *h = server_new(NULL, 2);
		volley v = {.port = kvi_httpd_port(h), .n = 8};
		pthread_t ct, rt;
		assert_int_equal(pthread_create(&ct, NULL, volley_main, &v), 0);
		assert_true(holder_wait(8));
		replier r = {hold.reqs, 8};
		assert_int_equal(pthread_create(&rt, NULL, replier_main, &r),
				 0);
		sleep_ms(round);
		kvi_httpd_stop(h);
		pthread_join(rt, NULL);
		pthread_join(ct, NULL);
		int answered = 0;
		for (int i = 0; i < 8; i++) {
			if (v.f[i].rc == CURLE_OK) {
				assert_int_equal(v.f[i].status, 200);
				assert_string_equal(v.f[i].body, "race");
				answered++;
			}
			fetch_fini(&v.f[i]);
		}
		assert_true(v.took < 5.0);
		print_message("round %d: %d of 8 answered before stop\n", round,
			      answered);
		kvi_httpd_free(h);
	}
}

static void
test_stop_drains(void **state)
{
	(void)state;
	kvi_httpd_config cfg = {.drain_ms = 3000};
	kvi_httpd *h = server_new(&cfg, 1);
	volley v = {.port = kvi_httpd_port(h), .n = 1};
	pthread_t ct;
	assert_int_equal(pthread_create(&ct, NULL, volley_main, &v), 0);
	assert_true(holder_wait(1));
	reply_later(hold.reqs[0], 150, 200);

	double t0 = now_s();
	kvi_httpd_stop(h);
	double dt = now_s() - t0;
	pthread_join(ct, NULL);
	/* stop waited for the deferred reply, and not for the whole drain */
	assert_true(dt >= 0.1);
	assert_true(dt < 2.0);
	assert_int_equal(v.f[0].rc, CURLE_OK);
	assert_int_equal(v.f[0].status, 200);
	assert_string_equal(v.f[0].connection, "close");
	char buf[32];
	assert_string_equal(json_field(v.f[0].body, "from", buf, sizeof(buf)),
			    "worker");
	fetch_fini(&v.f[0]);

	/* nothing listens any more */
	fetch f;
	do_fetch("GET", v.port, "/hello", NULL, 0, NULL, 2000, &f);
	assert_int_equal(f.rc, CURLE_COULDNT_CONNECT);
	fetch_fini(&f);
	kvi_httpd_free(h);
}

static void
test_drain_deadline(void **state)
{
	(void)state;
	kvi_httpd_config cfg = {.drain_ms = 200};
	kvi_httpd *h = server_new(&cfg, 1);
	volley v = {.port = kvi_httpd_port(h), .n = 1};
	pthread_t ct;
	assert_int_equal(pthread_create(&ct, NULL, volley_main, &v), 0);
	assert_true(holder_wait(1));
	double t0 = now_s();
	kvi_httpd_stop(h);
	double dt = now_s() - t0;
	pthread_join(ct, NULL);
	/* nobody answered: stop gave up after drain_ms */
	assert_true(dt >= 0.19);
	assert_true(dt < 1.5);
	assert_true(v.f[0].rc != CURLE_OK);
	fetch_fini(&v.f[0]);
	kvi_httpd_free(h);
	kvi_http_reply(hold.reqs[0], 200, NULL, NULL, 0);
}

int
main(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_routes_and_errors),
	    cmocka_unit_test(test_start_errors),
	    cmocka_unit_test(test_query_params),
	    cmocka_unit_test(test_unescape),
	    cmocka_unit_test(test_json_echo),
	    cmocka_unit_test(test_body_limit),
	    cmocka_unit_test(test_deferred_reply),
	    cmocka_unit_test(test_two_loops_concurrent),
	    cmocka_unit_test(test_client_gone_before_reply),
	    cmocka_unit_test(test_stop_in_flight),
	    cmocka_unit_test(test_stop_races_replies),
	    cmocka_unit_test(test_stop_drains),
	    cmocka_unit_test(test_drain_deadline),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
