/*
 * httpd_loop.c - the server's loop threads (httpd.h): each loop's listening
 * socket, event_base and evhttp, dispatch of a request to its route, the
 * queue that carries replies made on other threads to the loop, draining at
 * stop, and the orphans a closed loop leaves behind.
 */
#include "httpd.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "httpd_int.h"
#include "log.h"

#define LISTEN_QUEUE    1024
#define ACCEPT_PAUSE_MS 100

/* The loop this thread runs, if it is a loop thread. */
static _Thread_local kvi_http_loop *loop_current;

static void loop_check_drained(kvi_http_loop *loop);
static void loop_on_written(struct evhttp_request *ev, void *arg);

static const char *
method_name(enum evhttp_cmd_type t)
{
	switch (t) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	case EVHTTP_REQ_TRACE:
		return "TRACE";
	case EVHTTP_REQ_CONNECT:
		return "CONNECT";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	}
	return "UNKNOWN";
}

/* kvi_http_send_now hands a response to evhttp; on the loop thread only. out
 * may be NULL and is left for the caller to free. */
void
kvi_http_send_now(kvi_http_loop *loop, struct evhttp_request *ev, int status,
		  const reply_header *headers, struct evbuffer *out)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(ev);
	for (const reply_header *hd = headers; hd != NULL; hd = hd->next) {
		evhttp_add_header(oh, hd->name, hd->value);
	}
	if (loop->draining) {
		evhttp_add_header(oh, "Connection", "close");
		if (evhttp_request_get_connection(ev) != NULL) {
			loop->writing++;
			evhttp_request_set_on_complete_cb(ev, loop_on_written,
							  loop);
		}
	}
	kvi_http_conn_busy(loop, ev, false); /* its next request is due */
	evhttp_send_reply(ev, status, NULL, out);
}

/* pending_unlink takes req off loop->pending; under loop->mu. */
static void
pending_unlink(kvi_http_loop *loop, kvi_http_req *req)
{
	if (req->prev != NULL) {
		req->prev->next = req->next;
	} else {
		loop->pending = req->next;
	}
	if (req->next != NULL) {
		req->next->prev = req->prev;
	}
	req->prev = req->next = NULL;
	loop->n_pending--;
}

/* loop_wake makes the loop thread run loop_on_wake; under loop->mu. */
static void
loop_wake(kvi_http_loop *loop)
{
	if (loop->wake_sent) {
		return;
	}
	uint64_t one = 1;
	loop->wake_sent = true;
	if (write(loop->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, so the loop
		 * wakes anyway */
	}
}

static void loop_destroy(kvi_http_loop *loop);

/* kvi_http_req_finish sends or queues the reply stored in req, and
 * releases req. */
void
kvi_http_req_finish(kvi_http_req *req)
{
	kvi_http_loop *loop = req->loop;
	if (req->status < 100 || req->status > 599) {
		req->status = 500;
	}
	if (loop_current == loop) {
		pthread_mutex_lock(&loop->mu);
		pending_unlink(loop, req);
		pthread_mutex_unlock(&loop->mu);
		kvi_http_send_now(loop, req->ev, req->status, req->headers,
				  req->out);
		if (req->in_handler) {
			req->sent = true; /* loop_on_request frees it */
			return;
		}
		kvi_http_req_free(req);
		loop_check_drained(loop);
		return;
	}
	pthread_mutex_lock(&loop->mu);
	pending_unlink(loop, req);
	if (loop->closed) {
		bool last = loop->released && loop->n_pending == 0;
		pthread_mutex_unlock(&loop->mu);
		/* an orphan: evhttp let go of it when the loop closed */
		evhttp_request_free(req->ev);
		kvi_http_req_free(req);
		if (last) {
			loop_destroy(loop);
		}
		return;
	}
	req->next = NULL;
	*loop->done_tail = req;
	loop->done_tail = &req->next;
	loop_wake(loop);
	pthread_mutex_unlock(&loop->mu);
}

/* ---- loops ---- */

/* no_delay turns Nagle's algorithm off on the request's connection: a
 * reply written in more than one segment would otherwise wait for the
 * client's delayed ACK (40 ms on Linux) before its last segment goes. */
static void
no_delay(struct evhttp_request *ev)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(ev);
	struct bufferevent *bev =
	    conn != NULL ? evhttp_connection_get_bufferevent(conn) : NULL;
	evutil_socket_t fd = bev != NULL ? bufferevent_getfd(bev) : -1;
	if (fd >= 0) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
}

/* header_repeated returns the name of a header that ev gives more than
 * once and that a request may give only once, or NULL. Of two
 * Authorization headers evhttp hands out the first, and a proxy in front
 * may have checked the last: which credentials the request carries would
 * depend on who reads it, so it carries none that count (RFC 9110 5.3:
 * a field that is not a list may not be repeated). */
static const char *
header_repeated(struct evhttp_request *ev)
{
	static const char *const once[] = {"Authorization"};
	const struct evkeyvalq *hs = evhttp_request_get_input_headers(ev);
	for (size_t i = 0; i < sizeof(once) / sizeof(once[0]); i++) {
		int seen = 0;
		const struct evkeyval *kv;
		TAILQ_FOREACH(kv, hs, next)
		{
			seen += evutil_ascii_strcasecmp(kv->key, once[i]) == 0;
		}
		if (seen > 1) {
			return once[i];
		}
	}
	return NULL;
}

static void
loop_on_request(struct evhttp_request *ev, void *arg)
{
	kvi_http_loop *loop = arg;
	no_delay(ev);
	kvi_http_conn_busy(loop, ev, true);
	if (loop->stopping) {
		kvi_http_send_error_now(loop, ev, 503,
					"server is shutting down", NULL);
		return;
	}
	int bad_status;
	const char *bad = kvi_http_frame_error(ev, &bad_status);
	if (bad != NULL) {
		/* the framer dropped the rest of the connection */
		evhttp_add_header(evhttp_request_get_output_headers(ev),
				  "Connection", "close");
		kvi_http_send_error_now(loop, ev, bad_status, bad, NULL);
		return;
	}
	const char *twice = header_repeated(ev);
	if (twice != NULL) {
		char msg[96];
		snprintf(msg, sizeof(msg), "more than one %s header", twice);
		kvi_http_send_error_now(loop, ev, 400, msg, NULL);
		return;
	}
	const char *method = method_name(evhttp_request_get_command(ev));
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(ev);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	if (path == NULL || path[0] == '\0') {
		path = "/";
	}
	char allow[128];
	const route *r =
	    kvi_httpd_route_find(loop->h, method, path, allow, sizeof(allow));
	if (r == NULL && allow[0] != '\0') {
		kvi_http_send_error_now(loop, ev, 405, "method not allowed",
					allow);
		return;
	}
	if (r == NULL) {
		kvi_http_send_error_now(loop, ev, 404, "no such path", NULL);
		return;
	}

	kvi_http_req *req = kvi_calloc(1, sizeof(*req));
	req->loop = loop;
	req->ev = ev;
	req->method = method;
	req->path = path;
	req->suffix = r->prefix ? path + r->len : "";
	req->query_raw = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
	req->in = evhttp_request_get_input_buffer(ev);
	req->body_len = evbuffer_get_length(req->in);
	pthread_mutex_lock(&loop->mu);
	req->next = loop->pending;
	if (loop->pending != NULL) {
		loop->pending->prev = req;
	}
	loop->pending = req;
	loop->n_pending++;
	pthread_mutex_unlock(&loop->mu);

	req->in_handler = true;
	r->fn(r->arg, req);
	/* req is alive here even if another thread replied: only this
	 * thread frees requests, and it has not yet seen the queue */
	req->in_handler = false;
	if (req->sent) {
		kvi_http_req_free(req);
		loop_check_drained(loop);
	}
}

static void
loop_begin_stop(kvi_http_loop *loop)
{
	loop->stopping = true;
	if (loop->bound != NULL) {
		evhttp_del_accept_socket(loop->http, loop->bound);
		loop->bound = NULL;
	}
	int ms = loop->h->cfg.drain_ms;
	if (ms <= 0) {
		event_base_loopbreak(loop->base);
		return;
	}
	loop->draining = true;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(loop->drain_ev, &tv);
	loop_check_drained(loop);
}

/* loop_check_drained ends a draining loop once nothing is deferred and every
 * reply sent while draining has been written. */
static void
loop_check_drained(kvi_http_loop *loop)
{
	if (!loop->draining) {
		return;
	}
	pthread_mutex_lock(&loop->mu);
	size_t pending = loop->n_pending;
	pthread_mutex_unlock(&loop->mu);
	if (pending == 0 && loop->writing == 0) {
		event_base_loopbreak(loop->base);
	}
}

/* loop_on_written is evhttp's on-complete callback of a reply sent while
 * draining: the reply has left for the socket. */
static void
loop_on_written(struct evhttp_request *ev, void *arg)
{
	(void)ev;
	kvi_http_loop *loop = arg;
	loop->writing--;
	loop_check_drained(loop);
}

static void
loop_on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvi_http_loop *loop = arg;
	event_base_loopbreak(loop->base);
}

static void
loop_on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	kvi_http_loop *loop = arg;
	uint64_t n;
	if (read(fd, &n, sizeof(n)) < 0) {
		/* EAGAIN: a wake-up already consumed */
	}
	pthread_mutex_lock(&loop->mu);
	kvi_http_req *done = loop->done;
	loop->done = NULL;
	loop->done_tail = &loop->done;
	loop->wake_sent = false;
	bool stop = loop->stop;
	pthread_mutex_unlock(&loop->mu);

	while (done != NULL) {
		kvi_http_req *req = done;
		done = req->next;
		kvi_http_send_now(loop, req->ev, req->status, req->headers,
				  req->out);
		kvi_http_req_free(req);
	}
	if (stop && !loop->stopping) {
		loop_begin_stop(loop);
		return;
	}
	loop_check_drained(loop);
}

void *
kvi_http_loop_main(void *arg)
{
	kvi_http_loop *loop = arg;
	char name[16];
	snprintf(name, sizeof(name), "kvi-http-%d", loop->index);
	pthread_setname_np(pthread_self(), name);
	loop_current = loop;
	event_base_loop(loop->base, EVLOOP_NO_EXIT_ON_EMPTY);
	loop_current = NULL;
	return NULL;
}

kvi_http_loop *
kvi_http_loop_alloc(kvi_httpd *h, int index)
{
	kvi_http_loop *loop = kvi_calloc(1, sizeof(*loop));
	loop->h = h;
	loop->index = index;
	loop->wake_fd = -1;
	loop->reserve_fd = -1;
	loop->done_tail = &loop->done;
	pthread_mutex_init(&loop->mu, NULL);
	return loop;
}

/* loop_fini frees what kvi_http_loop_init built; idempotent, and a half-built
 * loop survives it. Not while the loop thread runs. */
static void
loop_fini(kvi_http_loop *loop)
{
	if (loop->http != NULL) {
		evhttp_free(loop->http); /* closes sockets, frees requests */
		loop->http = NULL;
		loop->bound = NULL;
	}
	if (loop->wake_ev != NULL) {
		event_free(loop->wake_ev);
		loop->wake_ev = NULL;
	}
	if (loop->drain_ev != NULL) {
		event_free(loop->drain_ev);
		loop->drain_ev = NULL;
	}
	if (loop->pause_ev != NULL) {
		event_free(loop->pause_ev);
		loop->pause_ev = NULL;
	}
	kvi_http_conns_fini(loop); /* after evhttp let go of them */
	kvi_free(loop->body_buf);
	loop->body_buf = NULL;
	loop->body_cap = 0;
	if (loop->base != NULL) {
		event_base_free(loop->base);
		loop->base = NULL;
	}
	if (loop->wake_fd >= 0) {
		close(loop->wake_fd);
		loop->wake_fd = -1;
	}
	if (loop->reserve_fd >= 0) {
		close(loop->reserve_fd);
		loop->reserve_fd = -1;
	}
}

static void
loop_destroy(kvi_http_loop *loop)
{
	loop_fini(loop);
	pthread_mutex_destroy(&loop->mu);
	kvi_free(loop);
}

/* kvi_httpd_listen_reuse opens a listening socket on the address ss with
 * SO_REUSEPORT. Each loop listens on one, so the kernel spreads new
 * connections over the loops by their addresses (loops sharing a socket
 * would leave it to whichever thread wakes first, on a busy host often the
 * same one). listen_open first binds the address without SO_REUSEPORT
 * and lets it go only to open the group, so a port already taken, by
 * kvindex or anything else, is refused rather than shared. Returns -1
 * with errno set on failure. */
int
kvi_httpd_listen_reuse(const struct sockaddr_storage *ss, socklen_t sl,
		       int v6only)
{
	int fd = socket(ss->ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	int on = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (ss->ss_family == AF_INET6) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
			   sizeof(v6only));
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) != 0 ||
	    bind(fd, (const struct sockaddr *)ss, sl) != 0 ||
	    listen(fd, LISTEN_QUEUE) != 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/* listen_again opens another socket of listen_fd's group. */
static int
listen_again(int listen_fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int v6only = 0;
	socklen_t ol = sizeof(v6only);
	if (getsockname(listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
		return -1;
	}
	if (ss.ss_family == AF_INET6) {
		getsockopt(listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ol);
	}
	return kvi_httpd_listen_reuse(&ss, sl, v6only);
}

/* loop_on_accept_error pauses accepting for ACCEPT_PAUSE_MS when accept()
 * fails (out of descriptors, mostly): the listening socket stays readable,
 * and accepting again at once would spin the loop and log each failure.
 * What is being served goes on meanwhile; a warning per pause, at most one
 * a second. Out of descriptors, the reserve answers a few of the waiting
 * connections first (httpd_reserve.c). */
static void
loop_on_accept_error(struct evconnlistener *lev, void *arg)
{
	(void)arg;
	int e = EVUTIL_SOCKET_ERROR();
	kvi_http_loop *loop = loop_current;
	if (loop == NULL || loop->bound == NULL) {
		return;
	}
	uint64_t n = atomic_fetch_add(&loop->accept_pauses, 1) + 1;
	if (e == EMFILE || e == ENFILE) {
		kvi_http_reserve_use(loop, evconnlistener_get_fd(lev));
	}
	evconnlistener_disable(lev);
	struct timeval tv = {0, ACCEPT_PAUSE_MS * 1000};
	evtimer_add(loop->pause_ev, &tv);
	static _Atomic int64_t last_warned;
	int64_t s = kvi_now_ms() / 1000;
	if (atomic_exchange(&last_warned, s) != s) {
		KVI_WARN("accept_paused",
			 "loop=%d pauses=%" PRIu64 " err=\"%s\": not accepting "
			 "for %d ms",
			 loop->index, n, evutil_socket_error_to_string(e),
			 ACCEPT_PAUSE_MS);
	}
}

static void
loop_on_pause_end(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvi_http_loop *loop = arg;
	kvi_http_reserve_take(loop);
	if (loop->bound != NULL && !loop->stopping) {
		evconnlistener_enable(
		    evhttp_bound_socket_get_listener(loop->bound));
	}
}

kvi_err
kvi_http_loop_init(kvi_http_loop *loop, int listen_fd, char *err, size_t errlen)
{
	const kvi_httpd_config *cfg = &loop->h->cfg;
	struct event_config *ec = event_config_new();
	if (ec == NULL) {
		kvi_oom(sizeof(struct event_config *));
	}
	/* one thread per base: no locking needed, whatever evthread says */
	event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
	loop->base = event_base_new_with_config(ec);
	event_config_free(ec);
	if (loop->base == NULL) {
		kvi_msgf(err, errlen, "event_base_new failed");
		return KVI_EIO;
	}
	loop->http = evhttp_new(loop->base);
	if (loop->http == NULL) {
		kvi_msgf(err, errlen, "evhttp_new failed");
		return KVI_EIO;
	}
	evhttp_set_gencb(loop->http, loop_on_request, loop);
	if (kvi_http_conns_init(loop) != KVI_OK) {
		kvi_msgf(err, errlen, "event_new failed");
		return KVI_EIO;
	}
	evhttp_set_allowed_methods(
	    loop->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
			    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
			    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
			    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_max_body_size(loop->http, (ev_ssize_t)cfg->max_body);
	evhttp_set_max_headers_size(loop->http, KVI_HTTP_HEADERS_MAX + 1024);
	/* a request's arrival is timed by httpd_conn.c, which counts what
	 * it ends; evhttp's own timeout, which restarts whenever the framer
	 * passes it something, only backs it up */
	evhttp_set_timeout(loop->http, 2 * cfg->timeout_s);
	/* read and drop an oversized body so the client sees the 413 */
	evhttp_set_flags(loop->http, EVHTTP_SERVER_LINGERING_CLOSE);

	int fd = loop->index == 0 ? fcntl(listen_fd, F_DUPFD_CLOEXEC, 0)
				  : listen_again(listen_fd);
	if (fd < 0) {
		kvi_msgf(err, errlen, "listen socket of loop %d: %s",
			 loop->index, strerror(errno));
		return KVI_EIO;
	}
	loop->bound = evhttp_accept_socket_with_handle(loop->http, fd);
	if (loop->bound == NULL) {
		close(fd);
		kvi_msgf(err, errlen, "evhttp_accept_socket failed");
		return KVI_EIO;
	}
	loop->pause_ev = evtimer_new(loop->base, loop_on_pause_end, loop);
	if (loop->pause_ev == NULL) {
		kvi_msgf(err, errlen, "event_new failed");
		return KVI_EIO;
	}
	evconnlistener_set_error_cb(
	    evhttp_bound_socket_get_listener(loop->bound),
	    loop_on_accept_error);
	kvi_http_reserve_take(loop);
	loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (loop->wake_fd < 0) {
		kvi_msgf(err, errlen, "eventfd: %s", strerror(errno));
		return KVI_EIO;
	}
	loop->wake_ev = event_new(loop->base, loop->wake_fd,
				  EV_READ | EV_PERSIST, loop_on_wake, loop);
	loop->drain_ev = evtimer_new(loop->base, loop_on_drain_timeout, loop);
	if (loop->wake_ev == NULL || loop->drain_ev == NULL ||
	    event_add(loop->wake_ev, NULL) != 0) {
		kvi_msgf(err, errlen, "event_new failed");
		return KVI_EIO;
	}
	return KVI_OK;
}

/* loop_close runs after the loop thread ended (or never ran): requests the
 * application still holds become orphans that evhttp must not free, queued
 * replies are dropped, and evhttp closes every connection.
 *
 * evhttp_free() runs under mu: it unlinks every request from its
 * connection, owned ones included, and an orphan's reply frees its request
 * as soon as it sees closed - which it must not do while evhttp_free() may
 * still be walking that connection's list. */
static void
loop_close(kvi_http_loop *loop)
{
	pthread_mutex_lock(&loop->mu);
	loop->closed = true;
	kvi_http_req *done = loop->done;
	loop->done = NULL;
	loop->done_tail = &loop->done;
	for (kvi_http_req *r = loop->pending; r != NULL; r = r->next) {
		evhttp_request_own(r->ev);
	}
	for (kvi_http_req *r = done; r != NULL; r = r->next) {
		evhttp_request_own(r->ev);
	}
	if (loop->http != NULL) {
		evhttp_free(loop->http);
		loop->http = NULL;
		loop->bound = NULL;
	}
	pthread_mutex_unlock(&loop->mu);
	if (loop->local != NULL && loop->h->cfg.local_free != NULL) {
		/* closed: what it replies is dropped as an orphan */
		loop->h->cfg.local_free(loop->h->cfg.local_arg, loop->local);
		loop->local = NULL;
	}
	loop_fini(loop);
	while (done != NULL) {
		kvi_http_req *req = done;
		done = req->next;
		evhttp_request_free(req->ev);
		kvi_http_req_free(req);
	}
}

/* loop_release lets go of a closed loop; it is freed now or by the reply
 * of its last orphan. */
static void
loop_release(kvi_http_loop *loop)
{
	pthread_mutex_lock(&loop->mu);
	loop->released = true;
	bool last = loop->n_pending == 0;
	pthread_mutex_unlock(&loop->mu);
	if (last) {
		loop_destroy(loop);
	}
}

/* kvi_httpd_loops_shutdown stops, joins and closes every loop of h. */
void
kvi_httpd_loops_shutdown(kvi_httpd *h)
{
	for (int i = 0; i < h->n_loops; i++) {
		kvi_http_loop *loop = h->loops[i];
		pthread_mutex_lock(&loop->mu);
		loop->stop = true;
		if (loop->wake_fd >= 0) {
			loop_wake(loop);
		}
		pthread_mutex_unlock(&loop->mu);
	}
	for (int i = 0; i < h->n_loops; i++) {
		kvi_http_loop *loop = h->loops[i];
		if (loop->running) {
			pthread_join(loop->tid, NULL);
			loop->running = false;
		}
		loop_close(loop);
	}
}

void
kvi_httpd_loops_release(kvi_httpd *h)
{
	for (int i = 0; i < h->n_loops; i++) {
		loop_release(h->loops[i]);
	}
	kvi_free(h->loops);
	h->loops = NULL;
	h->n_loops = 0;
}
