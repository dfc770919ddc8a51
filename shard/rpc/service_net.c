/*
 * service_net.c - the request server's loops: accepting on the listening
 * socket (service_listen.c), the connections and nng's framing on them
 * (sp.h), the replies.
 *
 * Loop 0 accepts and deals connections out to the loops in turn; a
 * connection then belongs to its loop's thread. A loop reads each complete
 * request, answers an inline kind at once (kvn_answer) and writes the reply
 * behind it, and copies any other request into a job for a worker, whose
 * reply comes back through the loop's done queue and an eventfd. A
 * connection stops being read while it has KVN_CONN_JOBS jobs out or more
 * than KVN_OUT_HIGH bytes of replies unwritten, and is read again once
 * they drain: a peer that stops reading holds at most that much.
 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "rpc.h"
#include "service_int.h"

/* Jobs a connection may have out before it is no longer read. */
#define KVN_CONN_JOBS 32
/* Unwritten reply bytes past which a connection is no longer read; it is
 * read again below half of it. */
#define KVN_OUT_HIGH ((size_t)8 << 20)
/* How long a stopping loop waits for its replies to leave. */
#define KVN_DRAIN_MS 1000
/* How long accepting pauses after an error (out of descriptors). */
#define KVN_ACCEPT_PAUSE_MS 100

struct kvn_conn {
	kvn_loop *loop;
	struct bufferevent *bev;
	kvn_conn *prev, *next; /* in loop->conns */
	int refs;              /* 1 while open, and 1 per job out */
	int jobs;
	bool hello;  /* the peer's hello was read */
	bool paused; /* not read, for its jobs or its output */
	bool closed;
};

/* The phases a loop is told to go through. */
enum { KVN_RUN, KVN_QUIET, KVN_STOP };

struct kvn_loop {
	kvn_service *svc;
	int index;
	struct event_base *base;
	int wake_fd;
	struct event *wake;
	struct event *drain;        /* the stop's deadline */
	struct event *accept_pause; /* loop 0 */
	struct evconnlistener *lev; /* loop 0, until quiet */
	pthread_t thread;
	bool started;
	/* shared with other threads, under mu */
	pthread_mutex_t mu;
	kvn_job *done, **done_tail;
	int *incoming; /* accepted descriptors dealt to this loop */
	size_t n_incoming, cap_incoming;
	int phase;
	/* the loop thread's */
	kvn_conn *conns;
	bool quiet, stopping;
	kvp_arena arena;
};

/* ---- connections --------------------------------------------------------- */

static void conn_process(kvn_conn *c);

static void
conn_unref(kvn_conn *c)
{
	if (--c->refs == 0) {
		kvi_free(c);
	}
}

/* conn_close drops c's socket; its jobs still out keep c until they
 * come back. */
static void
conn_close(kvn_conn *c, const char *why)
{
	if (c->closed) {
		return;
	}
	KVI_DEBUG("rpc_conn_closed", "why=\"%s\" jobs=%d", why, c->jobs);
	c->closed = true;
	bufferevent_free(c->bev);
	c->bev = NULL;
	kvn_loop *loop = c->loop;
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		loop->conns = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	}
	conn_unref(c);
}

/* conn_readable says whether c may take more requests now. */
static bool
conn_readable(const kvn_conn *c)
{
	return !c->closed && !c->loop->quiet && c->jobs < KVN_CONN_JOBS &&
	       evbuffer_get_length(bufferevent_get_output(c->bev)) <
		   KVN_OUT_HIGH;
}

static void
reply_free(const void *data, size_t len, void *msg)
{
	(void)data;
	(void)len;
	nng_msg_free(msg);
}

/* conn_reply writes reply behind the request's header head. */
static void
conn_reply(kvn_conn *c, const uint8_t *head, size_t head_len, nng_msg *reply)
{
	size_t blen = nng_msg_len(reply);
	uint8_t p[KVI_SP_PREFIX_MAX];
	size_t pl = kvi_sp_prefix(p, c->loop->svc->ipc, head_len + blen);
	struct evbuffer *out = bufferevent_get_output(c->bev);
	if (evbuffer_add(out, p, pl) != 0 ||
	    evbuffer_add(out, head, head_len) != 0 ||
	    evbuffer_add_reference(out, nng_msg_body(reply), blen, reply_free,
				   reply) != 0) {
		kvi_oom(blen);
	}
}

/* conn_request answers or hands off the request data[0..len). */
static void
conn_request(kvn_conn *c, const uint8_t *data, size_t len)
{
	kvn_loop *loop = c->loop;
	kvn_service *svc = loop->svc;
	size_t hl = kvi_sp_backtrace_len(data, len);
	if (hl == 0) {
		kvn_count(&svc->malformed, 1);
		conn_close(c, "a request without a request id");
		return;
	}
	nng_msg *reply = kvn_answer(svc, &loop->arena, data + hl, len - hl);
	kvp_arena_reset(&loop->arena);
	if (reply != NULL) {
		conn_reply(c, data, hl, reply);
		return;
	}
	kvn_job *job = kvi_calloc(1, sizeof(*job));
	job->svc = svc;
	job->loop = loop;
	job->conn = c;
	memcpy(job->head, data, hl);
	job->head_len = hl;
	job->len = len - hl;
	job->body = kvi_malloc(job->len > 0 ? job->len : 1);
	memcpy(job->body, data + hl, job->len);
	c->refs++;
	c->jobs++;
	kvn_submit(svc, job);
}

/* conn_frame takes the next whole frame off c's input, if there is
 * one; false when there is not (or c was closed). */
static bool
conn_frame(kvn_conn *c)
{
	kvn_service *svc = c->loop->svc;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t have = evbuffer_get_length(in);
	if (!c->hello) {
		uint8_t h[KVI_SP_HELLO_LEN];
		if (have < sizeof(h)) {
			return false;
		}
		evbuffer_remove(in, h, sizeof(h));
		if (!kvi_sp_hello_is(h, KVI_SP_PROTO_REQ)) {
			kvn_count(&svc->malformed, 1);
			conn_close(c, "the peer is not an nng req0 socket");
			return false;
		}
		c->hello = true;
		return true;
	}
	size_t pl = kvi_sp_prefix_len(svc->ipc);
	uint8_t p[KVI_SP_PREFIX_MAX];
	uint64_t len;
	if (have < pl || evbuffer_copyout(in, p, pl) != (ev_ssize_t)pl) {
		return false;
	}
	if (!kvi_sp_prefix_read(p, svc->ipc, &len) ||
	    len > KVP_MSG_MAX + 4 * KVI_SP_HOPS_MAX) {
		kvn_count(&svc->malformed, 1);
		conn_close(c, "malformed or oversized message frame");
		return false;
	}
	if (have - pl < len) {
		return false;
	}
	evbuffer_drain(in, pl);
	const uint8_t *data = len > 0 ? evbuffer_pullup(in, (ev_ssize_t)len)
				      : (const uint8_t *)"";
	conn_request(c, data, (size_t)len);
	if (!c->closed) {
		evbuffer_drain(bufferevent_get_input(c->bev), (size_t)len);
	}
	return !c->closed;
}

/* conn_process takes c's whole requests while it may, then reads on
 * or pauses. */
static void
conn_process(kvn_conn *c)
{
	c->refs++; /* c outlives a close in here */
	while (conn_readable(c) && conn_frame(c)) {
	}
	if (!c->closed) {
		bool on = conn_readable(c);
		if (on && c->paused) {
			bufferevent_enable(c->bev, EV_READ);
		} else if (!on && !c->paused) {
			bufferevent_disable(c->bev, EV_READ);
		}
		c->paused = !on;
	}
	conn_unref(c);
}

static void
conn_on_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	conn_process(arg);
}

static void loop_check_drained(kvn_loop *loop);

/* Called when c's output falls to half of KVN_OUT_HIGH: it may be read
 * again. */
static void
conn_on_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	kvn_conn *c = arg;
	if (c->loop->stopping) {
		loop_check_drained(c->loop);
	} else if (c->paused) {
		conn_process(c);
	}
}

static void
conn_on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	kvn_conn *c = arg;
	char why[160];
	if (what & BEV_EVENT_EOF) {
		snprintf(why, sizeof(why), "closed by the peer");
	} else {
		snprintf(why, sizeof(why), "%s",
			 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	}
	kvn_loop *loop = c->loop;
	conn_close(c, why);
	if (loop->stopping) {
		loop_check_drained(loop);
	}
}

/* conn_open serves the accepted descriptor fd on loop. */
static void
conn_open(kvn_loop *loop, int fd)
{
	if (loop->quiet) {
		close(fd);
		return;
	}
	if (!loop->svc->ipc) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	evutil_make_socket_nonblocking(fd);
	kvn_conn *c = kvi_calloc(1, sizeof(*c));
	c->loop = loop;
	c->refs = 1;
	c->bev = bufferevent_socket_new(loop->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		kvi_oom(sizeof(struct bufferevent *));
	}
	bufferevent_setcb(c->bev, conn_on_read, conn_on_write, conn_on_event,
			  c);
	bufferevent_setwatermark(c->bev, EV_WRITE, KVN_OUT_HIGH / 2, 0);
	uint8_t h[KVI_SP_HELLO_LEN];
	kvi_sp_hello(h, KVI_SP_PROTO_REP);
	bufferevent_write(c->bev, h, sizeof(h));
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	c->next = loop->conns;
	if (loop->conns != NULL) {
		loop->conns->prev = c;
	}
	loop->conns = c;
}

/* conn_done writes a worker's reply to its connection, if still open. */
static void
conn_done(kvn_job *job)
{
	kvn_conn *c = job->conn;
	if (c->closed || job->reply == NULL) {
		kvn_net_drop(job);
		return;
	}
	c->jobs--;
	conn_reply(c, job->head, job->head_len, job->reply);
	job->reply = NULL;
	job->conn = NULL;
	kvn_net_drop(job);
	if (c->paused && !c->loop->stopping) {
		conn_process(c);
	}
	conn_unref(c);
}

/* ---- loops --------------------------------------------------------------- */

/* loop_wake makes loop run loop_on_wake; under loop->mu. */
static void
loop_wake(kvn_loop *loop)
{
	uint64_t one = 1;
	if (write(loop->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is non-zero, the loop wakes anyway */
	}
}

static void
loop_check_drained(kvn_loop *loop)
{
	for (kvn_conn *c = loop->conns; c != NULL; c = c->next) {
		if (evbuffer_get_length(bufferevent_get_output(c->bev)) > 0) {
			return;
		}
	}
	event_base_loopbreak(loop->base);
}

static void
loop_go_quiet(kvn_loop *loop)
{
	if (loop->quiet) {
		return;
	}
	loop->quiet = true;
	if (loop->lev != NULL) {
		evconnlistener_free(loop->lev); /* closes the socket */
		loop->lev = NULL;
	}
	for (kvn_conn *c = loop->conns; c != NULL; c = c->next) {
		bufferevent_disable(c->bev, EV_READ);
	}
}

static void
loop_on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	kvn_loop *loop = arg;
	uint64_t n;
	if (read(fd, &n, sizeof(n)) < 0) {
		/* EAGAIN: woken twice for one write */
	}
	pthread_mutex_lock(&loop->mu);
	kvn_job *done = loop->done;
	loop->done = NULL;
	loop->done_tail = &loop->done;
	int in[64];
	size_t n_in = loop->n_incoming < 64 ? loop->n_incoming : 64;
	if (n_in > 0) {
		memcpy(in, loop->incoming, n_in * sizeof(int));
		loop->n_incoming -= n_in;
		memmove(loop->incoming, loop->incoming + n_in,
			loop->n_incoming * sizeof(int));
	}
	if (loop->n_incoming > 0) {
		loop_wake(loop); /* the rest on the next turn */
	}
	int phase = loop->phase;
	pthread_mutex_unlock(&loop->mu);

	if (phase >= KVN_QUIET) {
		loop_go_quiet(loop);
	}
	for (size_t i = 0; i < n_in; i++) {
		conn_open(loop, in[i]);
	}
	while (done != NULL) {
		kvn_job *job = done;
		done = job->next;
		conn_done(job);
	}
	if (phase == KVN_STOP && !loop->stopping) {
		loop->stopping = true;
		struct timeval tv = {KVN_DRAIN_MS / 1000,
				     (KVN_DRAIN_MS % 1000) * 1000};
		evtimer_add(loop->drain, &tv);
		loop_check_drained(loop);
	}
}

static void
loop_on_drain(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvn_loop *loop = arg;
	event_base_loopbreak(loop->base);
}

static void
loop_on_accept(struct evconnlistener *lev, evutil_socket_t fd,
	       struct sockaddr *sa, int salen, void *arg)
{
	(void)lev;
	(void)sa;
	(void)salen;
	kvn_loop *loop0 = arg;
	kvn_service *svc = loop0->svc;
	unsigned i =
	    atomic_fetch_add(&svc->next_loop, 1) % (unsigned)svc->n_loops;
	if (i == 0) {
		conn_open(loop0, fd);
		return;
	}
	kvn_loop *loop = svc->loops[i];
	pthread_mutex_lock(&loop->mu);
	if (loop->n_incoming == loop->cap_incoming) {
		loop->cap_incoming =
		    loop->cap_incoming ? 2 * loop->cap_incoming : 16;
		loop->incoming = kvi_realloc(loop->incoming,
					     loop->cap_incoming * sizeof(int));
	}
	loop->incoming[loop->n_incoming++] = fd;
	loop_wake(loop);
	pthread_mutex_unlock(&loop->mu);
}

static void
loop_on_accept_error(struct evconnlistener *lev, void *arg)
{
	kvn_loop *loop = arg;
	int e = EVUTIL_SOCKET_ERROR();
	KVI_WARN("rpc_accept_failed", "error=\"%s\" pause_ms=%d",
		 evutil_socket_error_to_string(e), KVN_ACCEPT_PAUSE_MS);
	evconnlistener_disable(lev);
	struct timeval tv = {0, KVN_ACCEPT_PAUSE_MS * 1000};
	evtimer_add(loop->accept_pause, &tv);
}

static void
loop_on_accept_pause(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvn_loop *loop = arg;
	if (loop->lev != NULL) {
		evconnlistener_enable(loop->lev);
	}
}

static void *
loop_main(void *arg)
{
	kvn_loop *loop = arg;
	char name[16];
	snprintf(name, sizeof(name), "kvs-rpc-%d", loop->index);
	pthread_setname_np(pthread_self(), name);
	event_base_dispatch(loop->base);
	return NULL;
}

static kvn_loop *
loop_alloc(kvn_service *svc, int index)
{
	kvn_loop *loop = kvi_calloc(1, sizeof(*loop));
	loop->svc = svc;
	loop->index = index;
	pthread_mutex_init(&loop->mu, NULL);
	loop->done_tail = &loop->done;
	kvp_arena_init(&loop->arena);
	loop->base = event_base_new();
	loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (loop->base == NULL || loop->wake_fd < 0) {
		kvi_oom(sizeof(*loop));
	}
	loop->wake = event_new(loop->base, loop->wake_fd, EV_READ | EV_PERSIST,
			       loop_on_wake, loop);
	loop->drain = evtimer_new(loop->base, loop_on_drain, loop);
	loop->accept_pause =
	    evtimer_new(loop->base, loop_on_accept_pause, loop);
	if (loop->wake == NULL || loop->drain == NULL ||
	    loop->accept_pause == NULL || event_add(loop->wake, NULL) != 0) {
		kvi_oom(sizeof(struct event *));
	}
	return loop;
}

/* loop_free closes what loop still holds; its thread has stopped. */
static void
loop_free(kvn_loop *loop)
{
	while (loop->done != NULL) {
		kvn_job *job = loop->done;
		loop->done = job->next;
		kvn_net_drop(job);
	}
	while (loop->conns != NULL) {
		conn_close(loop->conns, "the service stopped");
	}
	for (size_t i = 0; i < loop->n_incoming; i++) {
		close(loop->incoming[i]);
	}
	kvi_free(loop->incoming);
	if (loop->lev != NULL) {
		evconnlistener_free(loop->lev);
	}
	event_free(loop->wake);
	event_free(loop->drain);
	event_free(loop->accept_pause);
	event_base_free(loop->base);
	close(loop->wake_fd);
	kvp_arena_fini(&loop->arena);
	pthread_mutex_destroy(&loop->mu);
	kvi_free(loop);
}

kvi_err
kvn_net_start(kvn_service *svc, int n_loops, char *err, size_t errlen)
{
	svc->loops = kvi_calloc((size_t)n_loops, sizeof(kvn_loop *));
	svc->n_loops = n_loops;
	for (int i = 0; i < n_loops; i++) {
		svc->loops[i] = loop_alloc(svc, i);
	}
	kvn_loop *loop0 = svc->loops[0];
	loop0->lev = evconnlistener_new(
	    loop0->base, loop_on_accept, loop0,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, svc->listen_fd);
	if (loop0->lev == NULL) {
		kvi_msgf(err, errlen, "listen on %s: cannot watch the socket",
			 svc->url);
		return KVI_EIO;
	}
	svc->listen_fd = -1; /* the listener's now */
	evconnlistener_set_error_cb(loop0->lev, loop_on_accept_error);
	for (int i = 0; i < n_loops; i++) {
		kvn_loop *loop = svc->loops[i];
		if (pthread_create(&loop->thread, NULL, loop_main, loop) != 0) {
			kvi_msgf(err, errlen, "cannot start loop thread %d", i);
			return KVI_EIO;
		}
		loop->started = true;
	}
	return KVI_OK;
}

/* net_phase tells every loop to go to phase. */
static void
net_phase(kvn_service *svc, int phase)
{
	for (int i = 0; i < svc->n_loops; i++) {
		kvn_loop *loop = svc->loops[i];
		pthread_mutex_lock(&loop->mu);
		loop->phase = phase;
		loop_wake(loop);
		pthread_mutex_unlock(&loop->mu);
	}
}

void
kvn_net_quiet(kvn_service *svc)
{
	net_phase(svc, KVN_QUIET);
}

void
kvn_net_stop(kvn_service *svc)
{
	net_phase(svc, KVN_STOP);
	for (int i = 0; i < svc->n_loops; i++) {
		if (svc->loops[i]->started) {
			pthread_join(svc->loops[i]->thread, NULL);
		}
	}
	for (int i = 0; i < svc->n_loops; i++) {
		loop_free(svc->loops[i]);
	}
	kvi_free(svc->loops);
	svc->loops = NULL;
	svc->n_loops = 0;
	if (svc->listen_fd >= 0) {
		close(svc->listen_fd); /* bound, never watched */
		svc->listen_fd = -1;
	}
	if (svc->ipc_path != NULL) {
		unlink(svc->ipc_path);
	}
}

void
kvn_net_drop(kvn_job *job)
{
	kvn_conn *c = job->conn;
	if (c != NULL) {
		kvn_count(&job->svc->send_failures, 1);
		c->jobs--;
		conn_unref(c);
	}
	if (job->reply != NULL) {
		nng_msg_free(job->reply);
	}
	kvi_free(job->body);
	kvi_free(job);
}

void
kvn_net_done(kvn_job *job)
{
	kvn_loop *loop = job->loop;
	job->next = NULL;
	pthread_mutex_lock(&loop->mu);
	*loop->done_tail = job;
	loop->done_tail = &job->next;
	loop_wake(loop);
	pthread_mutex_unlock(&loop->mu);
}
