/*
 * httpd_conn.c - a loop's connections, counted and timed.
 *
 * evhttp (libevent 2.1) neither counts its connections nor bounds how
 * long a request may take to arrive: its timeout restarts at every read,
 * so a client that drips a header line at a time holds its connection
 * for ever. So every connection's bufferevent is made here
 * (evhttp_set_bevcb) and held by one reference of ours. When evhttp is
 * done with a connection it shuts the socket for writing and frees the
 * bufferevent, which clears its callbacks; our reference keeps it (and
 * its socket, closed with the last reference), so the sweep, every
 * CONN_SWEEP_MS, can tell those (no callbacks) from the live ones, drop
 * them - closing the socket - and know the count.
 *
 *  - Past max_conns a new connection is answered 503 and closed at once,
 *    without evhttp reading a byte of it.
 *  - A connection must deliver each whole request within timeout_s of
 *    its start or of its previous reply, whatever it sends meanwhile; one
 *    that does not is shut down (a request being handled is not timed).
 *
 * Loop thread only.
 */
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "httpd_int.h"
#include "log.h"

#define CONN_SWEEP_MS 250
#define CONN_BUCKETS  1024

struct kvi_http_conn {
	struct bufferevent *bev;
	int64_t deadline_ms;               /* 0: a request is being handled */
	struct kvi_http_conn *next, *prev; /* every connection of the loop */
	struct kvi_http_conn *hnext;       /* its bucket */
};

static size_t
conn_bucket(const struct bufferevent *bev)
{
	uintptr_t p = (uintptr_t)bev;
	return (size_t)((p >> 4) ^ (p >> 14)) & (CONN_BUCKETS - 1);
}

static kvi_http_conn *
conn_find(kvi_http_loop *loop, const struct bufferevent *bev)
{
	kvi_http_conn *c = loop->conn_buckets[conn_bucket(bev)];
	while (c != NULL && c->bev != bev) {
		c = c->hnext;
	}
	return c;
}

static void
conn_drop(kvi_http_loop *loop, kvi_http_conn *c)
{
	kvi_http_conn **pp = &loop->conn_buckets[conn_bucket(c->bev)];
	while (*pp != c) {
		pp = &(*pp)->hnext;
	}
	*pp = c->hnext;
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		loop->conns = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	}
	loop->n_conns--;
	bufferevent_decref(c->bev);
	kvi_free(c);
}

/* conn_released says whether evhttp has freed bev: bufferevent_free()
 * clears the callbacks, which evhttp keeps set while it uses one. */
static bool
conn_released(struct bufferevent *bev)
{
	bufferevent_event_cb eventcb = NULL;
	bufferevent_getcb(bev, NULL, NULL, &eventcb, NULL);
	return eventcb == NULL;
}

/* conn_refuse answers a connection past the limit and shuts it; evhttp
 * then sees its end and lets it go. */
static void
conn_refuse(evutil_socket_t unused, short what, void *arg)
{
	(void)unused;
	(void)what;
	struct bufferevent *bev = arg;
	char reply[256];
	size_t len = kvi_http_canned(
	    reply, sizeof(reply), "503 Service Unavailable",
	    "{\"error\":\"too many connections; try again\"}", true);
	evutil_socket_t fd = bufferevent_getfd(bev);
	if (fd >= 0 && !conn_released(bev)) {
		ssize_t n = send(fd, reply, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)n;
		shutdown(fd, SHUT_RDWR);
	}
	bufferevent_decref(bev);
}

static struct bufferevent *
conn_new(struct event_base *base, void *arg)
{
	kvi_http_loop *loop = arg;
	struct bufferevent *bev = kvi_http_framed_new(
	    base, loop->h->cfg.max_body, KVI_HTTP_HEADERS_MAX);
	if (bev == NULL) {
		return NULL; /* evhttp makes one itself */
	}
	kvi_http_conn *c = kvi_calloc(1, sizeof(*c));
	c->bev = bev;
	bufferevent_incref(bev);
	c->deadline_ms = kvi_now_ms() + (int64_t)loop->h->cfg.timeout_s * 1000;
	size_t b = conn_bucket(bev);
	c->hnext = loop->conn_buckets[b];
	loop->conn_buckets[b] = c;
	c->next = loop->conns;
	if (c->next != NULL) {
		c->next->prev = c;
	}
	loop->conns = c;
	loop->n_conns++;
	int max = loop->h->cfg.max_conns;
	if (max > 0 && loop->n_conns > (size_t)max) {
		/* evhttp sets the socket once this returns: answer after */
		atomic_fetch_add(&loop->refused, 1);
		bufferevent_incref(bev);
		static const struct timeval now = {0, 0};
		if (event_base_once(base, -1, EV_TIMEOUT, conn_refuse, bev,
				    &now) != 0) {
			bufferevent_decref(bev);
		}
	}
	return bev;
}

/* conn_sweep drops what evhttp let go of and ends what is past its
 * deadline. */
static void
conn_sweep(evutil_socket_t unused, short what, void *arg)
{
	(void)unused;
	(void)what;
	kvi_http_loop *loop = arg;
	int64_t now = kvi_now_ms();
	kvi_http_conn *next;
	for (kvi_http_conn *c = loop->conns; c != NULL; c = next) {
		next = c->next;
		evutil_socket_t fd = bufferevent_getfd(c->bev);
		if (conn_released(c->bev)) {
			conn_drop(loop, c);
		} else if (fd >= 0 && c->deadline_ms > 0 &&
			   now > c->deadline_ms) {
			atomic_fetch_add(&loop->timed_out, 1);
			c->deadline_ms = 0;
			shutdown(fd, SHUT_RDWR);
		}
	}
}

kvi_err
kvi_http_conns_init(kvi_http_loop *loop)
{
	loop->conn_buckets =
	    kvi_calloc(CONN_BUCKETS, sizeof(*loop->conn_buckets));
	evhttp_set_bevcb(loop->http, conn_new, loop);
	loop->sweep_ev =
	    event_new(loop->base, -1, EV_PERSIST, conn_sweep, loop);
	struct timeval every = {0, CONN_SWEEP_MS * 1000};
	if (loop->sweep_ev == NULL || event_add(loop->sweep_ev, &every) != 0) {
		return KVI_EIO;
	}
	return KVI_OK;
}

void
kvi_http_conn_busy(kvi_http_loop *loop, struct evhttp_request *ev, bool busy)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(ev);
	kvi_http_conn *c =
	    evcon != NULL
		? conn_find(loop, evhttp_connection_get_bufferevent(evcon))
		: NULL;
	if (c != NULL) {
		c->deadline_ms =
		    busy
			? 0
			: kvi_now_ms() + (int64_t)loop->h->cfg.timeout_s * 1000;
	}
}

void
kvi_http_conns_fini(kvi_http_loop *loop)
{
	if (loop->sweep_ev != NULL) {
		event_free(loop->sweep_ev);
		loop->sweep_ev = NULL;
	}
	while (loop->conns != NULL) {
		conn_drop(loop, loop->conns);
	}
	kvi_free(loop->conn_buckets);
	loop->conn_buckets = NULL;
}
