/*
 * httpd_fixture.c - what the HTTP server's tests share; see httpd_fixture.h.
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

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cmocka.h>

#include "alloc.h"
#include "httpd_fixture.h"

/* ---- client ---- */

double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
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

CURL *
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

void
easy_done(CURL *c, fetch *f)
{
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &f->status);
	curl_easy_cleanup(c);
}

/* do_fetch runs one request to completion into f. */
void
do_fetch(const char *method, uint16_t port, const char *path, const void *body,
	 size_t len, struct curl_slist *hdrs, long timeout_ms, fetch *f)
{
	CURL *c = easy_new(method, port, path, body, len, hdrs, timeout_ms, f);
	f->rc = curl_easy_perform(c);
	easy_done(c, f);
}

void
fetch_fini(fetch *f)
{
	kvi_free(f->body);
	f->body = NULL;
}

/* json_field returns the string member key of the JSON object in body, in
 * buf, or "" when absent or not a string. */
const char *
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

long long
json_int(const char *body, const char *key)
{
	json_t *j = json_loads(body ? body : "", 0, NULL);
	json_t *v = json_object_get(j, key);
	long long n = json_is_integer(v) ? json_integer_value(v) : -1;
	json_decref(j);
	return n;
}

/* ---- raw sockets ---- */

/* connect_raw opens a connection to port, or returns -1 when this process
 * is out of descriptors. */
int
connect_raw(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0) {
		return -1;
	}
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* raw_exchange sends req as it is on a new connection and reads what comes
 * back until the server closes it (or 3 s pass) into out. */
size_t
raw_exchange(uint16_t port, const char *req, char *out, size_t cap)
{
	int fd = connect_raw(port);
	assert_true(fd >= 0);
	struct timeval tv = {3, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	size_t n = 0;
	ssize_t r;
	while (n + 1 < cap && (r = read(fd, out + n, cap - 1 - n)) > 0) {
		n += (size_t)r;
	}
	out[n] = '\0';
	close(fd);
	return n;
}

int
count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) {
		n++;
	}
	return n;
}

/* assert_framed checks that the reply in out carries a body of exactly
 * its Content-Length: a client reading it would otherwise fail. */
void
assert_framed(const char *out)
{
	const char *cl = strstr(out, "Content-Length: ");
	const char *body = strstr(out, "\r\n\r\n");
	assert_non_null(cl);
	assert_non_null(body);
	assert_int_equal(strtoul(cl + 16, NULL, 10), strlen(body + 4));
}

/* ---- server-side handlers ---- */

holder hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void
holder_reset(void)
{
	pthread_mutex_lock(&hold.mu);
	hold.n = 0;
	hold.calls = 0;
	pthread_mutex_unlock(&hold.mu);
}

/* holder_wait waits until n requests are held; false after 5 s. */
bool
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

void
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

void
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

kvi_httpd *
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
