/*
 * test_httpd.c - the HTTP server over real loopback sockets, with libcurl
 * as the client: routing, errors, bodies, limits and deferred replies from
 * other threads, requests framed two ways (smuggling) and requests with two
 * Authorization headers. Concurrency over
 * two loops, clients that leave early and stopping with requests in flight
 * are test_httpd_threads.c; a process out of descriptors, too many
 * connections and clients that drip are test_httpd_limits.c; the client and
 * the server's routes all three use are in httpd_fixture.h.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <poll.h>
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
	/* answered by the worker, once it replied (100 ms on), and not
	 * held past that */
	assert_string_equal(json_field(f.body, "from", buf, sizeof(buf)),
			    "worker");
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

static void
test_smuggling(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	uint16_t port = kvi_httpd_port(h);
	char out[8192];
	/* each hides a second request in what its first header gives as
	 * the body's end: one 400, the connection closed, nothing else */
	static const char *const bad[] = {
	    "POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
	    "Content-Length: 44\r\n\r\nhelloPOST /count HTTP/1.1\r\n"
	    "Host: x\r\nContent-Length: 0\r\n\r\n",
	    "POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 44\r\n"
	    "\r\nhelloGET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
	    "POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 44\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
	    "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		raw_exchange(port, bad[i], out, sizeof(out));
		assert_int_equal(count_of(out, "HTTP/1.1 "), 1);
		assert_non_null(strstr(out, "HTTP/1.1 400 "));
		assert_non_null(strcasestr(out, "Connection: close"));
	}
	assert_int_equal(hold.calls, 0);
	/* the same length twice is one length */
	raw_exchange(port,
		     "POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
		     "Content-Length: 5\r\nConnection: close\r\n\r\nhello",
		     out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 "));
	assert_int_equal(hold.calls, 1);
	kvi_httpd_free(h);
}

/* test_two_authorizations: a request with two Authorization headers, in
 * either order and in any case, is 400 naming the header, and no handler
 * sees it; one Authorization header, or two headers of another name, is
 * served. */
static void
test_two_authorizations(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	uint16_t port = kvi_httpd_port(h);
	char out[8192];
	static const char *const bad[] = {
	    "POST /count HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\n"
	    "Authorization: Bearer b\r\nContent-Length: 0\r\n"
	    "Connection: close\r\n\r\n",
	    "POST /count HTTP/1.1\r\nHost: x\r\nauthorization: Bearer a\r\n"
	    "Content-Length: 0\r\nAUTHORIZATION: Bearer a\r\n"
	    "Connection: close\r\n\r\n",
	};
	hold.calls = 0;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		raw_exchange(port, bad[i], out, sizeof(out));
		assert_int_equal(count_of(out, "HTTP/1.1 "), 1);
		assert_non_null(strstr(out, "HTTP/1.1 400 "));
		assert_non_null(strstr(out, "more than one Authorization"));
	}
	assert_int_equal(hold.calls, 0);
	raw_exchange(port,
		     "POST /count HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
		     "a\r\nX-Test: 1\r\nX-Test: 2\r\nContent-Length: 0\r\n"
		     "Connection: close\r\n\r\n",
		     out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 "));
	assert_int_equal(hold.calls, 1);
	kvi_httpd_free(h);
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
	    cmocka_unit_test(test_smuggling),
	    cmocka_unit_test(test_two_authorizations),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
