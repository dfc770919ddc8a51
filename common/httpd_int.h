/*
 * httpd_int.h - the HTTP server's internals, private to httpd.c (the server:
 * routes, the address, start, stop and free), httpd_loop.c (the loop
 * threads: their sockets, dispatch, the reply queue, draining and orphans)
 * and httpd_req.c (requests and replies: accessors, percent-decoding, reply
 * headers and bodies). Not a public header; httpd.h says what the server
 * does, who owns a request and which thread may call what.
 */
#ifndef KVI_COMMON_HTTPD_INT_H
#define KVI_COMMON_HTTPD_INT_H

#include <event2/http.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "httpd.h"
#include "httpd_frame.h"

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
typedef struct kvi_http_conn kvi_http_conn; /* httpd_conn.c */

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
	struct evbuffer *in; /* the body, as read */
	const void *body;    /* NULL until kvi_http_req_body */
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
	void *local; /* the application's (kvi_http_req_local) */
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
	struct event *wake_ev;
	struct event *drain_ev;
	struct event *pause_ev; /* accepting again after a failed accept */
	_Atomic uint64_t accept_pauses;
	/* a descriptor held back for when none is left: closed to accept
	 * and answer a connection, then opened again (httpd_reserve.c) */
	int reserve_fd;
	_Atomic uint64_t reserve_answers;
	atomic_bool reserve_busy; /* in kvi_http_reserve_use */
	/* the connections (httpd_conn.c; loop thread) */
	kvi_http_conn *conns;
	kvi_http_conn **conn_buckets;
	_Atomic size_t n_conns; /* written by the loop, read by stats */
	struct event *sweep_ev;
	_Atomic uint64_t refused, timed_out;
	int wake_fd;
	/* the body of the request a handler runs for, made contiguous
	 * (kvi_http_req_body; loop thread): kept at the largest body seen,
	 * so a body is never copied into pages faulted in anew */
	char *body_buf;
	size_t body_cap;
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

/* httpd.c */
const route *kvi_httpd_route_find(const kvi_httpd *h, const char *method,
				  const char *path, char *allow,
				  size_t allow_size);

/* httpd_loop.c */
int kvi_httpd_listen_reuse(const struct sockaddr_storage *ss, socklen_t sl,
			   int v6only);
kvi_http_loop *kvi_http_loop_alloc(kvi_httpd *h, int index);
kvi_err kvi_http_loop_init(kvi_http_loop *loop, int listen_fd, char *err,
			   size_t errlen);
void *kvi_http_loop_main(void *arg);
void kvi_httpd_loops_shutdown(kvi_httpd *h);
void kvi_httpd_loops_release(kvi_httpd *h);
void kvi_http_send_now(kvi_http_loop *loop, struct evhttp_request *ev,
		       int status, const reply_header *headers,
		       struct evbuffer *out);
void kvi_http_req_finish(kvi_http_req *req);

/* httpd_reserve.c: out of descriptors. kvi_http_reserve_take opens the
 * loop's reserve descriptor if it has none; kvi_http_reserve_use gives it
 * up to accept and answer one of the connections waiting on listen_fd, and
 * takes it back; again, up to a few times, while the process is still out
 * of descriptors. Once one is free again the waiting connections are left
 * to be accepted and served as usual. */
void kvi_http_reserve_take(kvi_http_loop *loop);
void kvi_http_reserve_use(kvi_http_loop *loop, int listen_fd);

/* httpd_conn.c: counting and timing connections */
kvi_err kvi_http_conns_init(kvi_http_loop *loop);
/* kvi_http_conn_busy says ev's connection has a request being handled
 * (busy: not timed) or has just been answered (its next request is due
 * within the timeout). */
void kvi_http_conn_busy(kvi_http_loop *loop, struct evhttp_request *ev,
			bool busy);
void kvi_http_conns_fini(kvi_http_loop *loop);

/* httpd_frame.c (httpd_frame.h): each connection reads through a filter
 * that frames its requests (RFC 9112 6) and passes evhttp each with a
 * Content-Length body, or its head alone marked with
 * KVI_HTTP_FRAME_ERROR_HEADER. The longest request head the framer takes;
 * evhttp's own limit (evhttp_set_max_headers_size) leaves room for what it
 * adds. */
#define KVI_HTTP_HEADERS_MAX (64 * 1024)
/* kvi_http_framed_new returns a new bufferevent for evhttp_set_bevcb: a
 * socket's, read through the framer, whose chunked bodies may not decode
 * to more than max_body bytes (0: no limit). */
struct bufferevent *kvi_http_framed_new(struct event_base *base,
					size_t max_body, size_t max_head);
/* kvi_http_frame_error returns the reason the framer refused ev, with the
 * status to answer in *status, or NULL. */
const char *kvi_http_frame_error(struct evhttp_request *ev, int *status);

/* httpd_req.c */
void kvi_http_req_free(kvi_http_req *req);
bool kvi_http_token_valid(const char *s);
void kvi_http_send_error_now(kvi_http_loop *loop, struct evhttp_request *ev,
			     int status, const char *msg, const char *allow);

/* kvi_http_canned writes into out a whole reply that closes the
 * connection - status ("503 Service Unavailable"), a JSON body, its
 * Content-Length counted, and Retry-After: 1 when retry - for answers
 * written to a socket directly, without evhttp. Returns its length. */
static inline size_t
kvi_http_canned(char *out, size_t cap, const char *status, const char *body,
		bool retry)
{
	int n = snprintf(out, cap,
			 "HTTP/1.1 %s\r\n"
			 "Content-Type: application/json\r\n"
			 "Content-Length: %zu\r\n"
			 "Connection: close\r\n"
			 "%s"
			 "\r\n"
			 "%s",
			 status, strlen(body),
			 retry ? "Retry-After: 1\r\n" : "", body);
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

#endif /* KVI_COMMON_HTTPD_INT_H */
