/*
 * test_httpd_framing.c - how the HTTP server frames the requests on a
 * connection (RFC 9112 6; common/httpd_frame.c), over raw loopback
 * sockets: chunked bodies with extensions and trailers, in pieces as
 * small as a byte, pipelined; every malformed chunked body and coding
 * answered with its status, the connection closed and nothing after it
 * served (a body on HEAD or TRACE, which evhttp would read as the next
 * request, and a head over the limit, too); Expect: 100-continue before a
 * chunked body; and a client's own copy of the framer's mark. Requests framed
 * two ways are test_httpd.c's test_smuggling.
 */
#include <jansson.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc.h"
#include "httpd_fixture.h"

/* read_until reads from fd into out until it holds n replies ("HTTP/1.1 "
 * lines other than 100 Continue), the server closes, or 3 s pass. */
static size_t
read_until(int fd, int n, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	double t0 = now_s();
	while (now_s() - t0 < 3.0 && len + 1 < cap) {
		int got = count_of(out, "HTTP/1.1 ") -
			  count_of(out, "HTTP/1.1 100 Continue");
		if (got >= n) {
			break;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0) {
			continue;
		}
		ssize_t r = read(fd, out + len, cap - 1 - len);
		if (r <= 0) {
			break;
		}
		len += (size_t)r;
		out[len] = '\0';
	}
	return len;
}

static const char *const chunked_head =
    "POST /count HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n";

/* Extensions and trailers are ignored; the body is what the chunks hold. */
static void
test_chunk_extensions(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	uint16_t port = kvi_httpd_port(h);
	char req[1024], out[8192];
	snprintf(req, sizeof(req),
		 "%sConnection: close\r\n\r\n"
		 "5;ext=1\r\nhello\r\n"
		 "6 ; a=b;c=\"d;e\"\r\n world\r\n"
		 "A\r\n0123456789\r\n"
		 "0;last\r\nX-Trailer: 1\r\nX-Other: 2\r\n\r\n",
		 chunked_head);
	raw_exchange(port, req, out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 "));
	assert_framed(out);
	assert_int_equal(json_int(strstr(out, "\r\n\r\n") + 4, "len"), 21);

	/* the body itself, to a handler that parses it */
	raw_exchange(port,
		     "POST /echo HTTP/1.1\r\nHost: x\r\n"
		     "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
		     "3;x\r\n{\"a\r\n"
		     "b\r\n\": \"hello w\r\n"
		     "5;y=\"z\"\r\norld\"\r\n"
		     "1\r\n}\r\n0\r\n\r\n",
		     out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 201 "));
	json_t *got = json_loads(strstr(out, "\r\n\r\n") + 4, 0, NULL);
	assert_non_null(got);
	assert_string_equal(json_string_value(json_object_get(
				json_object_get(got, "echo"), "a")),
			    "hello world");
	json_decref(got);

	/* leading empty lines before a request are ignored (RFC 9112 2.2) */
	raw_exchange(port,
		     "\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n"
		     "Connection: close\r\n\r\n",
		     out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 "));
	kvi_httpd_free(h);
}

/* Each of these is answered with its status, the connection is closed,
 * and the request hidden after it is not served. */
static void
test_bad_framing(void **state)
{
	(void)state;
	kvi_httpd_config cfg = {.max_body = 1024};
	kvi_httpd *h = server_new(&cfg, 1);
	uint16_t port = kvi_httpd_port(h);
	char *too_long = kvi_malloc(6000);
	memset(too_long, 'a', 5999);
	too_long[5999] = '\0';
	memcpy(too_long, "5;", 2);
	char over[512];
	snprintf(over, sizeof(over), "%x\r\n", 1025);
	const struct {
		const char *method; /* NULL: POST */
		const char *te;     /* NULL: chunked */
		const char *body;
		const char *status, *reason;
	} bad[] = {
	    {NULL, NULL, "zz\r\nhello\r\n0\r\n\r\n", "400", "bad chunk size"},
	    {NULL, NULL, "-5\r\nhello\r\n0\r\n\r\n", "400", "bad chunk size"},
	    {NULL, NULL, "5 x\r\nhello\r\n0\r\n\r\n", "400", "bad chunk size"},
	    {NULL, NULL, ";x\r\nhello\r\n0\r\n\r\n", "400", "bad chunk size"},
	    {NULL, NULL, "fffffffffffffffffff\r\n", "400", "bad chunk size"},
	    {NULL, NULL, too_long, "400", "bad chunk size"},
	    {NULL, NULL, "3\r\nhello\r\n0\r\n\r\n", "400",
	     "chunk longer than its size"},
	    {NULL, NULL, over, "413", "request body too large"},
	    {NULL, "Transfer-Encoding: gzip\r\n", "5\r\nhello\r\n0\r\n\r\n",
	     "501", "Transfer-Encoding other than chunked"},
	    {NULL, "Transfer-Encoding: gzip, chunked\r\n",
	     "5\r\nhello\r\n0\r\n\r\n", "501",
	     "Transfer-Encoding other than chunked"},
	    {NULL,
	     "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
	     "5\r\nhello\r\n0\r\n\r\n", "501",
	     "Transfer-Encoding other than chunked"},
	    {NULL, "Transfer-Encoding: chunked\r\nX-Long: a\r\n b\r\n",
	     "5\r\nhello\r\n0\r\n\r\n", "400",
	     "header line folding is not accepted"},
	    {"HEAD", "Content-Length: 40\r\n",
	     "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", "400",
	     "a body on a HEAD or TRACE request"},
	    {"TRACE", NULL, "5\r\nhello\r\n0\r\n\r\n", "400",
	     "a body on a HEAD or TRACE request"},
	};
	size_t cap = 16384;
	char *req = kvi_malloc(cap), *out = kvi_malloc(cap);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(req, cap,
			 "%s /count HTTP/1.1\r\nHost: x\r\n%s\r\n%s"
			 "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
			 bad[i].method != NULL ? bad[i].method : "POST",
			 bad[i].te != NULL ? bad[i].te
					   : "Transfer-Encoding: chunked\r\n",
			 bad[i].body);
		raw_exchange(port, req, out, cap);
		char want[64], why[128];
		snprintf(want, sizeof(want), "HTTP/1.1 %s ", bad[i].status);
		snprintf(why, sizeof(why), "{\"error\":\"%s\"}", bad[i].reason);
		print_message("case %zu: %.60s\n", i, out);
		assert_int_equal(count_of(out, "HTTP/1.1 "), 1);
		assert_non_null(strstr(out, want));
		assert_non_null(strcasestr(out, "Connection: close"));
		if (bad[i].method == NULL || strcmp(bad[i].method, "HEAD")) {
			/* a reply to HEAD has no body */
			assert_non_null(strstr(out, why));
			assert_framed(out);
		}
	}
	assert_int_equal(hold.calls, 0);
	/* a head over the limit, whole or not, with a request after it */
	for (int whole = 0; whole < 2; whole++) {
		size_t big = 70 * 1024;
		char *huge = kvi_malloc(big + 256);
		int n = snprintf(huge, big + 256,
				 "POST /count HTTP/1.1\r\nX-Big: ");
		memset(huge + n, 'b', big);
		snprintf(huge + n + big, 256, "%s",
			 whole ? "\r\n\r\nGET /hello HTTP/1.1\r\n\r\n"
			       : "\r\nX-More: 1\r\n");
		char reply[4096];
		raw_exchange(port, huge, reply, sizeof(reply));
		assert_int_equal(count_of(reply, "HTTP/1.1 "), 1);
		assert_non_null(strstr(reply, "HTTP/1.1 431 "));
		assert_non_null(strstr(reply, "request head too large"));
		assert_non_null(strcasestr(reply, "Connection: close"));
		kvi_free(huge);
	}
	assert_int_equal(hold.calls, 0);
	/* a head just under the limit, chunked: taken */
	size_t near = 63 * 1024;
	char *under = kvi_malloc(near + 256);
	int k = snprintf(under, near + 256, "%sX-Big: ", chunked_head);
	memset(under + k, 'u', near);
	snprintf(under + k + near, 256,
		 "\r\nConnection: close\r\n\r\n2\r\nok\r\n0\r\n\r\n");
	raw_exchange(port, under, out, cap);
	assert_non_null(strstr(out, "HTTP/1.1 200 "));
	assert_int_equal(json_int(strstr(out, "\r\n\r\n") + 4, "len"), 2);
	kvi_free(under);
	/* at the limit is not over it */
	snprintf(req, cap, "%sConnection: close\r\n\r\n%x\r\n", chunked_head,
		 1024);
	size_t n = strlen(req);
	memset(req + n, 'y', 1024);
	snprintf(req + n + 1024, cap - n - 1024, "\r\n0\r\n\r\n");
	raw_exchange(port, req, out, cap);
	assert_non_null(strstr(out, "HTTP/1.1 200 "));
	assert_int_equal(json_int(strstr(out, "\r\n\r\n") + 4, "len"), 1024);
	kvi_free(req);
	kvi_free(out);
	kvi_free(too_long);
	kvi_httpd_free(h);
}

/* Two chunked requests and a plain one on one connection, sent a byte at
 * a time: three replies, in order. */
static void
test_chunked_pipelined(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	uint16_t port = kvi_httpd_port(h);
	char req[1024], out[8192];
	snprintf(req, sizeof(req),
		 "%s\r\n3;a\r\nabc\r\n0\r\n\r\n"
		 "%s\r\n1\r\nz\r\n2\r\nzz\r\n0\r\nT: 1\r\n\r\n"
		 "POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
		 "Connection: close\r\n\r\nabcd",
		 chunked_head, chunked_head);
	int fd = connect_raw(port);
	assert_true(fd >= 0);
	for (size_t i = 0; req[i] != '\0'; i++) {
		assert_int_equal(send(fd, req + i, 1, MSG_NOSIGNAL), 1);
		if (i % 16 == 0) {
			sleep_ms(1);
		}
	}
	read_until(fd, 3, out, sizeof(out));
	close(fd);
	assert_int_equal(count_of(out, "HTTP/1.1 200 "), 3);
	const char *a = strstr(out, "{\"len\":3}");
	const char *b = strstr(out, "{\"len\":3}") != NULL
			    ? strstr(a + 1, "{\"len\":3}")
			    : NULL;
	const char *c = strstr(out, "{\"len\":4}");
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_true(a < b && b < c);
	assert_int_equal(hold.calls, 3);
	kvi_httpd_free(h);
}

/* A client that asks to be told before it sends a chunked body is told,
 * once, and its body then read. */
static void
test_chunked_expect(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	uint16_t port = kvi_httpd_port(h);
	char head[512], out[4096] = "";
	snprintf(head, sizeof(head),
		 "%sExpect: 100-continue\r\nConnection: close\r\n\r\n",
		 chunked_head);
	int fd = connect_raw(port);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, head, strlen(head)), (ssize_t)strlen(head));
	size_t n = 0;
	double t0 = now_s();
	while (strstr(out, "\r\n\r\n") == NULL && now_s() - t0 < 3.0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) > 0) {
			ssize_t r = read(fd, out + n, sizeof(out) - 1 - n);
			assert_true(r > 0);
			n += (size_t)r;
		}
		out[n] = '\0';
	}
	assert_string_equal(out, "HTTP/1.1 100 Continue\r\n\r\n");
	const char *body = "4\r\nwxyz\r\n0\r\n\r\n";
	assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
	read_until(fd, 1, out, sizeof(out));
	close(fd);
	assert_int_equal(count_of(out, "HTTP/1.1 100"), 0);
	assert_non_null(strstr(out, "HTTP/1.1 200 "));
	assert_non_null(strstr(out, "{\"len\":4}"));
	kvi_httpd_free(h);
}

/* The mark the framer puts on a request it refuses cannot be sent by a
 * client: its copy is removed, and the request served. */
static void
test_forged_mark(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	char out[4096];
	raw_exchange(kvi_httpd_port(h),
		     "POST /count HTTP/1.1\r\nHost: x\r\n"
		     "X-Kvindex-Framing-Error: 400 forged\r\n"
		     "Content-Length: 2\r\nConnection: close\r\n\r\nok",
		     out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 "));
	assert_non_null(strstr(out, "{\"len\":2}"));
	assert_null(strstr(out, "forged"));
	kvi_httpd_free(h);
}

/* A chunked 4 MiB body, and its 4 MiB echo to a client that does not
 * read for a while, on a connection the reply closes: the socket takes
 * the reply in parts, and all of it arrives before the end. */
static void
test_large_reply_slow_reader(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	size_t big = (size_t)4 << 20, cap = big + 4096;
	char *req = kvi_malloc(cap + big / 65536 * 16);
	int n = snprintf(req, cap,
			 "POST /echo HTTP/1.1\r\nHost: x\r\n"
			 "Transfer-Encoding: chunked\r\nConnection: close\r\n"
			 "\r\n7\r\n{\"a\": \"\r\n");
	size_t off = (size_t)n;
	for (size_t done = 0; done < big; done += 65536) {
		off += (size_t)sprintf(req + off, "10000;part\r\n");
		memset(req + off, 'q', 65536);
		off += 65536;
		off += (size_t)sprintf(req + off, "\r\n");
	}
	off += (size_t)sprintf(req + off, "2\r\n\"}\r\n0\r\n\r\n");
	int fd = connect_raw(kvi_httpd_port(h));
	assert_true(fd >= 0);
	for (size_t sent = 0; sent < off;) {
		ssize_t w = send(fd, req + sent, off - sent, MSG_NOSIGNAL);
		assert_true(w > 0);
		sent += (size_t)w;
	}
	sleep_ms(300);
	size_t len = 0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		assert_true(poll(&p, 1, 5000) > 0);
		ssize_t r = read(fd, req + len, cap - 1 - len);
		assert_true(r >= 0);
		if (r == 0) {
			break;
		}
		len += (size_t)r;
		assert_true(len < cap - 1);
	}
	req[len] = '\0';
	close(fd);
	assert_non_null(strstr(req, "HTTP/1.1 201 "));
	assert_framed(req);
	json_t *got = json_loads(strstr(req, "\r\n\r\n") + 4, 0, NULL);
	assert_non_null(got);
	const char *a = json_string_value(
	    json_object_get(json_object_get(got, "echo"), "a"));
	assert_non_null(a);
	assert_int_equal(strlen(a), big);
	json_decref(got);
	kvi_free(req);
	kvi_httpd_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chunk_extensions),
	    cmocka_unit_test(test_bad_framing),
	    cmocka_unit_test(test_chunked_pipelined),
	    cmocka_unit_test(test_chunked_expect),
	    cmocka_unit_test(test_forged_mark),
	    cmocka_unit_test(test_large_reply_slow_reader),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
