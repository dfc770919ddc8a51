/*
 * bench_query_load.c - the closed-loop HTTP load generator
 * (bench_query_load.h): connections, the epoll loop, answers read by their
 * Content-Length, and the latency figures.
 */
#include "bench_query_load.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"

#define HEAD_CAP    (BQ_TARGET_MAX + BQ_TYPE_MAX + 192)
#define IN_CAP      16384
#define SCRATCH_CAP 65536
#define WARMUP_NS   200000000u

typedef struct conn {
	int fd;
	bool busy, want_out;
	size_t next; /* the body to send next (timed runs) */
	size_t cur;  /* the body in flight */
	char head[HEAD_CAP];
	size_t head_len, sent; /* bytes of head and body written */
	char *in;              /* the answer's headers (and body when kept) */
	size_t in_len, in_cap;
	size_t head_end; /* 0 until the headers are in */
	size_t body_len, body_got;
	int status;
	uint64_t t0;
} conn;

typedef struct loadgen {
	int port, ep;
	const bq_bodies *b;
	conn *c;
	int n;
	uint64_t deadline;   /* timed runs: start nothing after it */
	const size_t *which; /* bq_load_each: the bodies to send */
	size_t n_which, pos;
	bq_answer_fn fn;
	void *arg;
	bool record;
	uint64_t *lat;
	size_t n_lat, cap_lat;
	size_t done, errors;
	int first_error;
	int busy;
	char scratch[SCRATCH_CAP];
} loadgen;

uint64_t
bq_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* dial connects to 127.0.0.1:port and returns a non-blocking socket with
 * Nagle off, or -1. */
static int
dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

static void
watch(loadgen *lg, conn *c, int op, bool out)
{
	struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0),
				 .data.ptr = c};
	epoll_ctl(lg->ep, op, c->fd, &ev);
	c->want_out = out;
}

static kvi_err
conn_open(loadgen *lg, conn *c)
{
	c->fd = dial(lg->port);
	if (c->fd < 0) {
		return KVI_EUNREACHABLE;
	}
	watch(lg, c, EPOLL_CTL_ADD, false);
	return KVI_OK;
}

static void
conn_close(loadgen *lg, conn *c)
{
	if (c->fd >= 0) {
		epoll_ctl(lg->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
}

/* conn_write writes what is left of the request; returns false when the
 * connection broke. */
static bool
conn_write(loadgen *lg, conn *c)
{
	size_t blen = lg->b->len[c->cur];
	while (c->sent < c->head_len + blen) {
		struct iovec iov[2];
		int k = 0;
		if (c->sent < c->head_len) {
			iov[k++] = (struct iovec){c->head + c->sent,
						  c->head_len - c->sent};
		}
		size_t boff = c->sent > c->head_len ? c->sent - c->head_len : 0;
		iov[k++] =
		    (struct iovec){lg->b->body[c->cur] + boff, blen - boff};
		ssize_t w = writev(c->fd, iov, k);
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!c->want_out) {
				watch(lg, c, EPOLL_CTL_MOD, true);
			}
			return true;
		}
		if (w <= 0) {
			return false;
		}
		c->sent += (size_t)w;
	}
	if (c->want_out) {
		watch(lg, c, EPOLL_CTL_MOD, false);
	}
	return true;
}

static bool
conn_send(loadgen *lg, conn *c, size_t i)
{
	c->cur = i;
	c->busy = true;
	c->sent = 0;
	c->in_len = c->head_end = c->body_len = c->body_got = 0;
	const bq_bodies *b = lg->b;
	c->head_len = (size_t)snprintf(
	    c->head, HEAD_CAP,
	    "POST %s HTTP/1.1\r\nHost: bench\r\n"
	    "Content-Type: %s\r\nX-Bench-Req: %u\r\n"
	    "Content-Length: %zu\r\n\r\n",
	    b->target != NULL ? b->target : "/query",
	    b->content_type != NULL ? b->content_type : "application/json",
	    b->id_base + (uint32_t)i, b->len[i]);
	lg->busy++;
	c->t0 = bq_now_ns();
	return conn_write(lg, c);
}

/* parse_head reads the status and Content-Length once the headers are
 * in; returns false for an answer that is not HTTP/1.x. */
static bool
parse_head(conn *c)
{
	char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
	if (end == NULL) {
		return true;
	}
	*end = '\0';
	c->head_end = (size_t)(end + 4 - c->in);
	if (strncmp(c->in, "HTTP/1.", 7) != 0 || c->head_end < 13) {
		return false;
	}
	c->status = atoi(c->in + 9);
	const char *cl = strcasestr(c->in, "\r\nContent-Length:");
	c->body_len = cl != NULL ? strtoul(cl + 17, NULL, 10) : 0;
	c->body_got = c->in_len - c->head_end;
	return true;
}

/* conn_read reads what has arrived; returns -1 when the connection broke
 * or the answer is malformed, 1 when the answer is complete, else 0. */
static int
conn_read(loadgen *lg, conn *c)
{
	bool keep = lg->fn != NULL;
	for (;;) {
		if (c->head_end > 0 && keep &&
		    c->in_cap < c->head_end + c->body_len + 1) {
			c->in_cap = c->head_end + c->body_len + 1;
			c->in = kvi_realloc(c->in, c->in_cap);
		}
		if (c->head_end == 0 && c->in_len + 1 >= c->in_cap) {
			return -1; /* headers past IN_CAP */
		}
		bool into_in = c->head_end == 0 || keep;
		char *dst = into_in ? c->in + c->in_len : lg->scratch;
		size_t room = into_in ? c->in_cap - 1 - c->in_len : SCRATCH_CAP;
		ssize_t r = read(c->fd, dst, room);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return 0;
		}
		if (r <= 0) {
			return -1;
		}
		if (c->head_end == 0) {
			c->in_len += (size_t)r;
			if (!parse_head(c)) {
				return -1;
			}
		} else {
			c->in_len += into_in ? (size_t)r : 0;
			c->body_got += (size_t)r;
		}
		if (c->head_end > 0 && c->body_got >= c->body_len) {
			return c->body_got == c->body_len ? 1 : -1;
		}
	}
}

static void
record(loadgen *lg, uint64_t ns)
{
	if (lg->n_lat == lg->cap_lat) {
		lg->cap_lat = lg->cap_lat ? lg->cap_lat * 2 : 8192;
		lg->lat =
		    kvi_reallocarray(lg->lat, lg->cap_lat, sizeof(*lg->lat));
	}
	lg->lat[lg->n_lat++] = ns;
}

/* start_next sends the connection's next request if the run wants one. */
static bool
start_next(loadgen *lg, conn *c)
{
	if (lg->which != NULL) {
		if (lg->pos == lg->n_which) {
			return true;
		}
		return conn_send(lg, c, lg->which[lg->pos++]);
	}
	if (bq_now_ns() >= lg->deadline) {
		return true;
	}
	size_t i = c->next;
	c->next = (c->next + 1) % lg->b->n;
	return conn_send(lg, c, i);
}

static void
finish(loadgen *lg, conn *c)
{
	uint64_t t1 = bq_now_ns();
	c->busy = false;
	lg->busy--;
	if (lg->record) {
		record(lg, t1 - c->t0);
		lg->done++;
		lg->errors += c->status != 200;
	}
	if (c->status != 200 && lg->first_error == 0) {
		lg->first_error = c->status;
	}
	if (lg->fn != NULL) {
		lg->fn(lg->arg, c->cur, c->status, c->in + c->head_end,
		       c->body_len);
	}
}

/* fail counts a broken connection as an error and dials again. Returns
 * KVI_EIO in bq_load_each, where every answer is needed. */
static kvi_err
fail(loadgen *lg, conn *c)
{
	if (c->busy) {
		c->busy = false;
		lg->busy--;
	}
	lg->errors++;
	lg->done += lg->record;
	lg->first_error = lg->first_error ? lg->first_error : -1;
	conn_close(lg, c);
	if (lg->which != NULL) {
		return KVI_EIO;
	}
	kvi_err rc = conn_open(lg, c);
	if (rc == KVI_OK && !start_next(lg, c)) {
		return fail(lg, c);
	}
	return rc;
}

static kvi_err
on_event(loadgen *lg, conn *c, uint32_t events)
{
	if (!c->busy) {
		return fail(lg, c); /* the server spoke or closed unasked */
	}
	if ((events & EPOLLOUT) && !conn_write(lg, c)) {
		return fail(lg, c);
	}
	if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
		return KVI_OK;
	}
	int r = conn_read(lg, c);
	if (r < 0) {
		return fail(lg, c);
	}
	if (r > 0) {
		finish(lg, c);
		if (!start_next(lg, c)) {
			return fail(lg, c);
		}
	}
	return KVI_OK;
}

/* drive starts a request on every connection and runs the loop until no
 * request is in flight. */
static kvi_err
drive(loadgen *lg)
{
	kvi_err rc = KVI_OK;
	for (int i = 0; i < lg->n && rc == KVI_OK; i++) {
		if (!start_next(lg, &lg->c[i])) {
			rc = fail(lg, &lg->c[i]);
		}
	}
	struct epoll_event evs[64];
	while (rc == KVI_OK && lg->busy > 0) {
		int k = epoll_wait(lg->ep, evs, 64, 1000);
		for (int i = 0; i < k && rc == KVI_OK; i++) {
			rc = on_event(lg, evs[i].data.ptr, evs[i].events);
		}
	}
	return rc;
}

/* head_fits says whether every request head of b fits in HEAD_CAP. */
static bool
head_fits(const bq_bodies *b)
{
	return (b->target == NULL || strlen(b->target) <= BQ_TARGET_MAX) &&
	       (b->content_type == NULL ||
		strlen(b->content_type) <= BQ_TYPE_MAX);
}

static kvi_err
lg_open(loadgen *lg, int port, const bq_bodies *b, int conns)
{
	lg->port = port;
	lg->b = b;
	lg->n = conns;
	lg->ep = epoll_create1(EPOLL_CLOEXEC);
	lg->c = kvi_calloc((size_t)conns, sizeof(*lg->c));
	for (int i = 0; i < conns; i++) {
		lg->c[i].fd = -1;
		lg->c[i].in_cap = IN_CAP;
		lg->c[i].in = kvi_malloc(IN_CAP);
		lg->c[i].next = b->n * (size_t)i / (size_t)conns;
	}
	for (int i = 0; i < conns; i++) {
		kvi_err rc = conn_open(lg, &lg->c[i]);
		if (rc != KVI_OK) {
			return rc;
		}
	}
	return KVI_OK;
}

static void
lg_close(loadgen *lg)
{
	for (int i = 0; i < lg->n; i++) {
		conn_close(lg, &lg->c[i]);
		kvi_free(lg->c[i].in);
	}
	kvi_free(lg->c);
	kvi_free(lg->lat);
	close(lg->ep);
}

static double
percentile_us(const uint64_t *v, size_t n, size_t pct)
{
	size_t i = n * pct / 100;
	if (n == 0) {
		return 0;
	}
	return (double)v[i < n ? i : n - 1] / 1e3;
}

kvi_err
bq_load_run(int port, const bq_bodies *b, int conns, double seconds,
	    void (*on_timed)(void *arg), void *arg, bq_load_result *out)
{
	if (!head_fits(b)) {
		return KVI_EINVAL;
	}
	loadgen *lg = kvi_calloc(1, sizeof(*lg));
	kvi_err rc = lg_open(lg, port, b, conns);
	if (rc == KVI_OK) {
		lg->deadline = bq_now_ns() + WARMUP_NS;
		rc = drive(lg);
	}
	if (rc == KVI_OK) {
		lg->done = 0; /* errors of the warm-up still count */
		lg->record = true;
		if (on_timed != NULL) {
			on_timed(arg);
		}
		uint64_t t0 = bq_now_ns();
		lg->deadline = t0 + (uint64_t)(seconds * 1e9);
		rc = drive(lg);
		qsort(lg->lat, lg->n_lat, sizeof(*lg->lat), cmp_u64);
		*out = (bq_load_result){
		    .done = lg->done,
		    .errors = lg->errors,
		    .first_error = lg->first_error,
		    .seconds = (double)(bq_now_ns() - t0) / 1e9,
		    .p50_us = percentile_us(lg->lat, lg->n_lat, 50),
		    .p99_us = percentile_us(lg->lat, lg->n_lat, 99),
		};
		out->qps = (double)out->done / out->seconds;
	}
	lg_close(lg);
	kvi_free(lg);
	return rc;
}

kvi_err
bq_load_each(int port, const bq_bodies *b, const size_t *which, size_t n,
	     bq_answer_fn fn, void *arg)
{
	if (!head_fits(b)) {
		return KVI_EINVAL;
	}
	loadgen *lg = kvi_calloc(1, sizeof(*lg));
	kvi_err rc = lg_open(lg, port, b, 1);
	if (rc == KVI_OK) {
		lg->which = which;
		lg->n_which = n;
		lg->fn = fn;
		lg->arg = arg;
		rc = drive(lg);
	}
	lg_close(lg);
	kvi_free(lg);
	return rc;
}
