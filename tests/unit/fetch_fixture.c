#include "fetch_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

srv server;
int wake[2];

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

/* srv_reply_as answers with body, as Content-Type type (NULL: none). */
static void
srv_reply_as(int fd, const char *status, const char *type, const char *body)
{
	char head[256], ct[96] = "";
	if (type != NULL) {
		snprintf(ct, sizeof(ct), "Content-Type: %s\r\n", type);
	}
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %s\r\n%sContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 status, ct, strlen(body));
	srv_send(fd, head, (size_t)n);
	srv_send(fd, body, strlen(body));
}

static void
srv_reply(int fd, const char *status, const char *body)
{
	srv_reply_as(fd, status, "application/json", body);
}

/* srv_drip sends BODY_DUMP in pieces of 20 bytes, 100 ms apart: slow, and
 * flowing. */
static void
srv_drip(srv *s, int fd)
{
	char head[160];
	const char *body = BODY_DUMP;
	size_t len = strlen(body);
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: application/json"
			 "\r\nContent-Length: %zu\r\n\r\n",
			 len);
	srv_send(fd, head, (size_t)n);
	for (size_t o = 0; o < len && srv_sleep(s, 100); o += 20) {
		srv_send(fd, body + o, len - o < 20 ? len - o : 20);
	}
}

/* srv_stall sends a head and the start of a body, then nothing. */
static void
srv_stall(srv *s, int fd)
{
	const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json"
			   "\r\nContent-Length: 1000\r\n\r\n{\"TreeDump\"";
	srv_send(fd, head, strlen(head));
	srv_wait_close(s, fd);
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

static void srv_route_more(srv *s, int fd, const char *path);

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
		srv_route_more(s, fd, path);
	}
}

/* srv_route_more: the answers test_recover_limits.c refuses or takes. */
static void
srv_route_more(srv *s, int fd, const char *path)
{
	if (strcmp(path, "/stall") == 0) {
		srv_stall(s, fd);
	} else if (strcmp(path, "/drip") == 0) {
		srv_drip(s, fd);
	} else if (strcmp(path, "/html") == 0) {
		srv_reply_as(fd, "200 OK", "text/html", BODY_DUMP);
	} else if (strcmp(path, "/html-empty") == 0) {
		srv_reply_as(fd, "200 OK", "text/html; charset=utf-8", "");
	} else if (strcmp(path, "/jsonx") == 0) {
		srv_reply_as(fd, "200 OK", "application/jsonx", BODY_DUMP);
	} else if (strcmp(path, "/charset") == 0) {
		srv_reply_as(fd, "200 OK", "Application/JSON; charset=utf-8",
			     BODY_DUMP);
	} else if (strcmp(path, "/notype") == 0) {
		srv_reply_as(fd, "200 OK", NULL, BODY_DUMP);
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
int
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

int
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

int
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

bool
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

void
on_notify(void *arg)
{
	(void)arg;
	char c = 1;
	ssize_t n = write(wake[1], &c, 1);
	(void)n;
}

int64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* wait_result pops the next result, waiting up to ms for one. */
kvr_result *
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

kvr_fetcher *
start_opts(kvr_fetch_opts o)
{
	kvr_fetcher *f = NULL;
	o.notify = on_notify;
	assert_int_equal(kvr_fetcher_open(&o, &f), KVI_OK);
	assert_non_null(f);
	return f;
}

kvr_fetcher *
start(int max_concurrent, long timeout_ms)
{
	return start_opts((kvr_fetch_opts){.max_concurrent = max_concurrent,
					   .timeout_ms = timeout_ms});
}

void
submit_max(kvr_fetcher *f, uint64_t token, const char *path,
	   uint64_t max_blocks)
{
	char url[128];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", server.port, path);
	assert_int_equal(kvr_fetcher_submit(f, token, url, max_blocks), KVI_OK);
}

void
submit(kvr_fetcher *f, uint64_t token, const char *path)
{
	submit_max(f, token, path, KVR_FETCH_BLOCKS_ANY);
}

int
setup(void **state)
{
	(void)state;
	assert_int_equal(pipe(wake), 0);
	srv_reset();
	return 0;
}

int
teardown(void **state)
{
	(void)state;
	close(wake[0]);
	close(wake[1]);
	return 0;
}
