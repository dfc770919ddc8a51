/*
 * test_recover_fetch.c - the /kv_recover fetcher against a small HTTP
 * server that runs in the test, on an ephemeral loopback port.
 *
 * The server answers by path: a chunked Events body sent in small pieces,
 * a TreeDump, a 500 and a long 404 with bodies, a malformed 200, a slow
 * answer and no answer at all; it counts the connections open at once. A
 * closed port covers refused connections.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "recover_fetch.h"

#define SRV_MAX_CONNS 64
#define SLOW_MS       300

#define BODY_EVENTS                                                            \
	"{\"Events\": {\"events\": ["                                          \
	"{\"worker_id\": 7, \"storage_tier\": \"Device\", \"event\": "         \
	"{\"event_id\": 42, \"dp_rank\": 1, \"data\": {\"stored\": "           \
	"{\"parent_hash\": 123, \"blocks\": [{\"block_hash\": 456, "           \
	"\"tokens_hash\": 789}]}}}}, "                                         \
	"{\"worker_id\": 7, \"event\": {\"event_id\": 43, \"data\": "          \
	"{\"removed\": {\"block_hashes\": [18446744073709551615]}}}}, "        \
	"{\"worker_id\": 7, \"event\": {\"event_id\": 44, \"data\": "          \
	"\"cleared\"}}], \"last_event_id\": 44}}"

#define BODY_DUMP                                                              \
	"{\"TreeDump\": {\"events\": [{\"event\": {\"event_id\": 0, "          \
	"\"data\": {\"stored\": {\"parent_hash\": null, \"blocks\": "          \
	"[{\"block_hash\": 1, \"tokens_hash\": 11}]}}}}, {\"event\": "         \
	"{\"event_id\": 1, \"data\": {\"stored\": {\"parent_hash\": 1, "       \
	"\"blocks\": [{\"block_hash\": 2, \"tokens_hash\": 22}]}}}}], "        \
	"\"last_event_id\": 9}}"

/* ---- the server ------------------------------------------------------ */

typedef struct srv {
	int lfd;
	int port;
	int stop[2]; /* readable once the server stops */
	pthread_t acceptor;
	pthread_mutex_t mu;
	/* under mu */
	pthread_t conns[SRV_MAX_CONNS];
	int n_conns;
	int open; /* connections open now */
	/* /slow requests being answered; counted from the request to just
	 * before the reply, so a connection still closing after its reply
	 * is not counted as in flight */
	int busy, max_busy;
	int chunks; /* chunks of /events written */
	char paths[SRV_MAX_CONNS][64];
	int n_paths;
} srv;

typedef struct conn {
	srv *s;
	int fd;
} conn;

static srv server;

/* srv_sleep waits ms milliseconds, or less if the server stops; returns
 * false when it stops. */
static bool
srv_sleep(srv *s, int ms)
{
	struct pollfd pfd = {.fd = s->stop[0], .events = POLLIN};
	return poll(&pfd, 1, ms) == 0;
}

static void
srv_send(int fd, const void *buf, size_t len)
{
	const char *b = buf;
	while (len > 0) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);
		if (n <= 0) {
			return;
		}
		b += n;
		len -= (size_t)n;
	}
}

static void
srv_reply(int fd, const char *status, const char *body)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, strlen(body));
	srv_send(fd, head, (size_t)n);
	srv_send(fd, body, strlen(body));
}

/* srv_events sends BODY_EVENTS chunked, 8 bytes at a time, 2 ms apart. */
static void
srv_events(srv *s, int fd)
{
	const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json"
			   "\r\nTransfer-Encoding: chunked\r\n"
			   "Connection: close\r\n\r\n";
	srv_send(fd, head, strlen(head));
	const char *body = BODY_EVENTS;
	size_t len = strlen(body);
	for (size_t o = 0; o < len; o += 8) {
		size_t k = len - o < 8 ? len - o : 8;
		char size[16];
		int n = snprintf(size, sizeof(size), "%zx\r\n", k);
		srv_send(fd, size, (size_t)n);
		srv_send(fd, body + o, k);
		srv_send(fd, "\r\n", 2);
		pthread_mutex_lock(&s->mu);
		s->chunks++;
		pthread_mutex_unlock(&s->mu);
		if (!srv_sleep(s, 2)) {
			return;
		}
	}
	srv_send(fd, "0\r\n\r\n", 5);
}

/* srv_wait_close waits until the client closes fd or the server stops. */
static void
srv_wait_close(srv *s, int fd)
{
	struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN},
				{.fd = s->stop[0], .events = POLLIN}};
	char buf[256];
	for (;;) {
		if (poll(pfd, 2, -1) < 0 || pfd[1].revents != 0) {
			return;
		}
		if (pfd[0].revents != 0 && recv(fd, buf, sizeof(buf), 0) <= 0) {
			return;
		}
	}
}

static void
srv_route(srv *s, int fd, const char *path)
{
	if (strcmp(path, "/events") == 0) {
		srv_events(s, fd);
	} else if (strcmp(path, "/dump") == 0) {
		srv_reply(fd, "200 OK", BODY_DUMP);
	} else if (strcmp(path, "/fail") == 0) {
		srv_reply(fd, "500 Internal Server Error",
			  "engine exploded:\nreplay buffer gone");
	} else if (strcmp(path, "/missing") == 0) {
		char body[4096];
		memset(body, 'z', sizeof(body) - 1);
		body[sizeof(body) - 1] = '\0';
		memcpy(body, "no such route", 13);
		srv_reply(fd, "404 Not Found", body);
	} else if (strcmp(path, "/bad") == 0) {
		srv_reply(fd, "200 OK", "{\"Events\": {\"events\": [");
	} else if (strncmp(path, "/slow", 5) == 0) {
		pthread_mutex_lock(&s->mu);
		if (++s->busy > s->max_busy) {
			s->max_busy = s->busy;
		}
		pthread_mutex_unlock(&s->mu);
		bool ok = srv_sleep(s, SLOW_MS);
		pthread_mutex_lock(&s->mu);
		s->busy--;
		pthread_mutex_unlock(&s->mu);
		if (ok) {
			srv_reply(fd, "200 OK", BODY_EVENTS);
		}
	} else if (strcmp(path, "/hang") == 0) {
		srv_wait_close(s, fd);
	} else {
		srv_reply(fd, "404 Not Found", "?");
	}
}

static void *
srv_conn_main(void *arg)
{
	conn *c = arg;
	srv *s = c->s;
	char req[4096];
	size_t len = 0;
	struct pollfd pfd[2] = {{.fd = c->fd, .events = POLLIN},
				{.fd = s->stop[0], .events = POLLIN}};
	while (len < sizeof(req) - 1) {
		if (poll(pfd, 2, -1) < 0 || pfd[1].revents != 0) {
			goto out;
		}
		ssize_t n = recv(c->fd, req + len, sizeof(req) - 1 - len, 0);
		if (n <= 0) {
			goto out;
		}
		len += (size_t)n;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n") != NULL) {
			break;
		}
	}
	char path[64] = "";
	sscanf(req, "GET %63s", path);
	pthread_mutex_lock(&s->mu);
	if (s->n_paths < SRV_MAX_CONNS) {
		snprintf(s->paths[s->n_paths++], sizeof(s->paths[0]), "%s",
			 path);
	}
	pthread_mutex_unlock(&s->mu);
	srv_route(s, c->fd, path);
out:
	close(c->fd);
	pthread_mutex_lock(&s->mu);
	s->open--;
	pthread_mutex_unlock(&s->mu);
	free(c);
	return NULL;
}

static void *
srv_accept_main(void *arg)
{
	srv *s = arg;
	struct pollfd pfd[2] = {{.fd = s->lfd, .events = POLLIN},
				{.fd = s->stop[0], .events = POLLIN}};
	for (;;) {
		if (poll(pfd, 2, -1) < 0 || pfd[1].revents != 0) {
			return NULL;
		}
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0) {
			continue;
		}
		conn *c = malloc(sizeof(*c));
		c->s = s;
		c->fd = fd;
		pthread_mutex_lock(&s->mu);
		if (s->n_conns == SRV_MAX_CONNS) {
			pthread_mutex_unlock(&s->mu);
			close(fd);
			free(c);
			continue;
		}
		s->open++;
		pthread_create(&s->conns[s->n_conns++], NULL, srv_conn_main, c);
		pthread_mutex_unlock(&s->mu);
	}
}

/* loopback_socket returns a socket bound to an ephemeral loopback port. */
static int
loopback_socket(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t alen = sizeof(a);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static int
srv_start(void **state)
{
	(void)state;
	srv *s = &server;
	memset(s, 0, sizeof(*s));
	s->lfd = loopback_socket(&s->port);
	assert_int_equal(listen(s->lfd, 64), 0);
	assert_int_equal(pipe(s->stop), 0);
	pthread_mutex_init(&s->mu, NULL);
	pthread_create(&s->acceptor, NULL, srv_accept_main, s);
	return 0;
}

static int
srv_stop(void **state)
{
	(void)state;
	srv *s = &server;
	close(s->stop[1]);
	pthread_join(s->acceptor, NULL);
	for (int i = 0; i < s->n_conns; i++) {
		pthread_join(s->conns[i], NULL);
	}
	close(s->lfd);
	close(s->stop[0]);
	pthread_mutex_destroy(&s->mu);
	return 0;
}

/* srv_reset forgets the counts of earlier tests, once their connections
 * are closed. */
static void
srv_reset(void)
{
	srv *s = &server;
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&s->mu);
		int open = s->open;
		if (open == 0) {
			s->max_busy = 0;
			s->chunks = 0;
			s->n_paths = 0;
		}
		pthread_mutex_unlock(&s->mu);
		if (open == 0) {
			return;
		}
		usleep(10000);
	}
	fail_msg("connections of an earlier test still open");
}

static bool
srv_saw(const char *path)
{
	bool seen = false;
	pthread_mutex_lock(&server.mu);
	for (int i = 0; i < server.n_paths; i++) {
		seen |= strcmp(server.paths[i], path) == 0;
	}
	pthread_mutex_unlock(&server.mu);
	return seen;
}

/* ---- the owner's side ------------------------------------------------ */

static int wake[2]; /* notify writes, the test waits */

static void
on_notify(void *arg)
{
	(void)arg;
	char c = 1;
	ssize_t n = write(wake[1], &c, 1);
	(void)n;
}

static int64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* wait_result pops the next result, waiting up to ms for one. */
static kvr_result *
wait_result(kvr_fetcher *f, int ms)
{
	int64_t end = now_ms() + ms;
	for (;;) {
		kvr_result *r = kvr_fetcher_pop(f);
		int64_t left = end - now_ms();
		if (r != NULL || left <= 0) {
			return r;
		}
		struct pollfd pfd = {.fd = wake[0], .events = POLLIN};
		if (poll(&pfd, 1, (int)left) > 0) {
			char buf[64];
			ssize_t n = read(wake[0], buf, sizeof(buf));
			(void)n;
		}
	}
}

static kvr_fetcher *
start(int max_concurrent, long timeout_ms)
{
	kvr_fetcher *f = NULL;
	assert_int_equal(
	    kvr_fetcher_start(max_concurrent, timeout_ms, on_notify, NULL, &f),
	    KVI_OK);
	assert_non_null(f);
	return f;
}

static void
submit(kvr_fetcher *f, uint64_t token, const char *path)
{
	char url[128];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", server.port, path);
	assert_int_equal(kvr_fetcher_submit(f, token, url), KVI_OK);
}

static int
setup(void **state)
{
	(void)state;
	assert_int_equal(pipe(wake), 0);
	srv_reset();
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	close(wake[0]);
	close(wake[1]);
	return 0;
}

/* ---- tests ----------------------------------------------------------- */

static void
test_events_chunked(void **state)
{
	(void)state;
	kvr_fetcher *f = start(4, 10000);
	submit(f, 11, "/events");
	kvr_result *r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->token, 11);
	if (r->err != KVI_OK) {
		fail_msg("fetch failed: %s", r->message);
	}
	assert_int_equal(r->http_status, 200);
	assert_string_equal(r->message, "");
	assert_int_equal(r->body_bytes, strlen(BODY_EVENTS));
	const kvr_response *resp = kvr_parser_result(r->parser);
	assert_non_null(resp);
	assert_int_equal(resp->kind, KVR_KIND_EVENTS);
	assert_int_equal(resp->last_event_id, 44);
	assert_int_equal(resp->n_events, 3);
	assert_int_equal(resp->events[0].blocks[0].tokens_hash, 789);
	assert_true(resp->events[1].block_hashes[0] == UINT64_MAX);
	assert_int_equal(resp->events[2].type, KVI_EVENT_CLEARED);
	/* it did arrive in many pieces */
	pthread_mutex_lock(&server.mu);
	int chunks = server.chunks;
	pthread_mutex_unlock(&server.mu);
	assert_true(chunks > 20);
	kvr_result_free(r);
	assert_null(kvr_fetcher_pop(f));
	kvr_fetcher_free(f);
}

static void
test_tree_dump(void **state)
{
	(void)state;
	kvr_fetcher *f = start(1, 0);
	submit(f, 5, "/dump");
	kvr_result *r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->token, 5);
	assert_int_equal(r->err, KVI_OK);
	const kvr_response *resp = kvr_parser_result(r->parser);
	assert_int_equal(resp->kind, KVR_KIND_TREE_DUMP);
	assert_int_equal(resp->n_events, 2);
	assert_int_equal(resp->last_event_id, 9);
	assert_int_equal(resp->events[1].blocks[0].tokens_hash, 22);
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_http_errors(void **state)
{
	(void)state;
	kvr_fetcher *f = start(4, 10000);
	submit(f, 1, "/fail");
	kvr_result *r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->err, KVI_EIO);
	assert_int_equal(r->http_status, 500);
	assert_null(r->parser);
	assert_string_equal(r->message,
			    "HTTP 500: engine exploded: replay buffer gone");
	kvr_result_free(r);

	/* a long error page is cut to a snippet */
	submit(f, 2, "/missing");
	r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->err, KVI_ENOENT);
	assert_int_equal(r->http_status, 404);
	assert_int_equal(strncmp(r->message, "HTTP 404: no such route", 23), 0);
	assert_int_equal(strlen(r->message),
			 strlen("HTTP 404: ") + KVR_FETCH_SNIPPET_MAX);
	kvr_result_free(r);

	/* a 200 whose body is not a complete document */
	submit(f, 3, "/bad");
	r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->err, KVI_EPROTO);
	assert_int_equal(r->http_status, 200);
	assert_null(r->parser);
	assert_string_equal(r->message,
			    "body: byte 23: Events.events[0]: body ends before "
			    "the JSON value does");
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_timeout(void **state)
{
	(void)state;
	kvr_fetcher *f = start(1, 500);
	int64_t t0 = now_ms();
	submit(f, 9, "/hang");
	kvr_result *r = wait_result(f, 10000);
	int64_t took = now_ms() - t0;
	assert_non_null(r);
	assert_int_equal(r->token, 9);
	assert_int_equal(r->err, KVI_ETIMEDOUT);
	assert_null(r->parser);
	assert_true(r->message[0] != '\0');
	assert_true(took >= 450 && took < 5000);
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_unreachable(void **state)
{
	(void)state;
	int port;
	int fd = loopback_socket(&port); /* bound, not listening: refused */
	kvr_fetcher *f = start(1, 10000);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/kv_recover", port);
	assert_int_equal(kvr_fetcher_submit(f, 4, url), KVI_OK);
	kvr_result *r = wait_result(f, 10000);
	close(fd);
	assert_non_null(r);
	assert_int_equal(r->token, 4);
	assert_int_equal(r->err, KVI_EUNREACHABLE);
	assert_int_equal(r->http_status, 0);
	assert_true(r->message[0] != '\0');
	kvr_result_free(r);

	/* a scheme other than http(s) is refused */
	assert_int_equal(kvr_fetcher_submit(f, 6, "file:///etc/hostname"),
			 KVI_OK);
	r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->err, KVI_EINVAL);
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_bounded_concurrency(void **state)
{
	(void)state;
	kvr_fetcher *f = start(2, 10000);
	int64_t t0 = now_ms();
	for (int i = 0; i < 5; i++) {
		char path[32];
		snprintf(path, sizeof(path), "/slow?%d", i);
		submit(f, (uint64_t)i, path);
	}
	unsigned seen = 0;
	for (int i = 0; i < 5; i++) {
		kvr_result *r = wait_result(f, 10000);
		assert_non_null(r);
		if (r->err != KVI_OK) {
			fail_msg("fetch %d failed: %s", (int)r->token,
				 r->message);
		}
		assert_true(r->token < 5);
		assert_false(seen & (1u << r->token));
		seen |= 1u << r->token;
		kvr_result_free(r);
	}
	assert_int_equal(seen, 0x1f);
	/* three rounds of SLOW_MS: two, two, one */
	assert_true(now_ms() - t0 >= 3 * SLOW_MS - 50);
	pthread_mutex_lock(&server.mu);
	int max_busy = server.max_busy;
	pthread_mutex_unlock(&server.mu);
	assert_int_equal(max_busy, 2);
	kvr_fetcher_free(f);
}

static void
test_cancel(void **state)
{
	(void)state;
	kvr_fetcher *f = start(1, 10000);
	submit(f, 7, "/slow?7"); /* runs */
	submit(f, 8, "/slow?8"); /* waits */
	submit(f, 9, "/slow?9"); /* waits */
	for (int i = 0; i < 500 && !srv_saw("/slow?7"); i++) {
		usleep(2000);
	}
	assert_true(srv_saw("/slow?7"));
	/* the waiting one first: aborting 7 frees its slot for the next */
	kvr_fetcher_cancel(f, 8); /* forgets a waiting one */
	kvr_fetcher_cancel(f, 7); /* aborts a running fetch */
	kvr_result *r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->token, 9);
	assert_int_equal(r->err, KVI_OK);
	kvr_result_free(r);
	assert_null(wait_result(f, SLOW_MS + 200));
	assert_false(srv_saw("/slow?8"));

	/* a queued result is dropped too; a later fetch with the same
	 * token is not */
	submit(f, 10, "/dump");
	for (int i = 0; i < 500; i++) {
		struct pollfd pfd = {.fd = wake[0], .events = POLLIN};
		if (poll(&pfd, 1, 20) > 0) {
			break;
		}
	}
	kvr_fetcher_cancel(f, 10);
	assert_null(kvr_fetcher_pop(f));
	submit(f, 10, "/dump");
	r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->token, 10);
	assert_int_equal(r->err, KVI_OK);
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_stop(void **state)
{
	(void)state;
	kvr_fetcher *f = start(2, 60000);
	submit(f, 1, "/hang");
	submit(f, 2, "/hang");
	submit(f, 3, "/hang"); /* waiting */
	submit(f, 4, "/dump");
	for (int i = 0; i < 500 && !srv_saw("/hang"); i++) {
		usleep(2000);
	}
	int64_t t0 = now_ms();
	kvr_fetcher_stop(f);
	assert_true(now_ms() - t0 < 3000); /* running fetches are aborted */
	kvr_fetcher_stop(f);
	assert_null(kvr_fetcher_pop(f));
	assert_int_equal(kvr_fetcher_submit(f, 5, "http://127.0.0.1:1/"),
			 KVI_ECLOSED);
	kvr_fetcher_cancel(f, 1);
	kvr_fetcher_free(f);
	kvr_fetcher_free(NULL);
	kvr_result_free(NULL);
}

static void
test_bad_args(void **state)
{
	(void)state;
	kvr_fetcher *f = (kvr_fetcher *)&f;
	assert_int_equal(kvr_fetcher_start(0, 1000, NULL, NULL, &f),
			 KVI_EINVAL);
	assert_int_equal(kvr_fetcher_start(1, -1, NULL, NULL, &f), KVI_EINVAL);
	assert_true(f == (kvr_fetcher *)&f); /* untouched on failure */
	f = start(1, 1000);
	assert_int_equal(kvr_fetcher_submit(f, 1, ""), KVI_EINVAL);
	assert_int_equal(kvr_fetcher_submit(f, 1, NULL), KVI_EINVAL);
	kvr_fetcher_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_events_chunked, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_tree_dump, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unreachable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bounded_concurrency, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
	};
	return cmocka_run_group_tests(tests, srv_start, srv_stop);
}
