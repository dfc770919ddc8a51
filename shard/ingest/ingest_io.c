/*
 * ingest_io.c - the ingest thread's ZeroMQ sockets.
 *
 * Each listener has a SUB socket to its rank's live endpoint, a monitor
 * socket that reports the SUB's disconnections (after which the next batch
 * cannot be trusted to continue the same engine process), and, while it
 * replays, a DEALER to the rank's replay socket. libevent watches each
 * socket's ZMQ_FD. That descriptor is edge-like: it signals that the
 * socket's state may have changed, not that a message is waiting, and it
 * does not signal again for messages already queued. So a signalled socket
 * joins a ready list and is read until it reports EAGAIN; one that still
 * has messages after its budget goes to the back of the list, and the drain
 * event re-runs until the list is empty.
 *
 * A listener whose engine is not there has none of these until the engine
 * takes a connection: ingest_probe.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <zmq.h>

#include "alloc.h"
#include "clock.h"
#include "frame.h"
#include "ingest_io_int.h"
#include "log.h"

#define KVG_BUDGET        64   /* messages applied per socket per turn */
#define KVG_READ_AHEAD    1024 /* messages read (and queued) per turn */
#define KVG_MAX_FRAMES    6
#define KVG_REPLAY_RCVHWM 1000 /* replay batches ZeroMQ queues for us */
enum { KVG_SUB = 1, KVG_MON = 2, KVG_DEALER = 4 };
/* ZeroMQ sockets the ingest context may hold (ZMQ_MAX_SOCKETS). */
#define KVG_MAX_SOCKETS 65536

/* ---- ready list ---------------------------------------------------- */

/* io_queue puts io on the ready list without scheduling a drain. */
static void
io_queue(kvg_ingest *g, kvg_io *io, uint8_t what)
{
	io->want |= what;
	if (!io->queued) {
		io->queued = true;
		io->next = NULL;
		if (g->sockets.ready_tail != NULL) {
			g->sockets.ready_tail->next = io;
		} else {
			g->sockets.ready_head = io;
		}
		g->sockets.ready_tail = io;
	}
}

/* io_ready queues io and has the drain run in this loop turn. */
static void
io_ready(kvg_ingest *g, kvg_io *io, uint8_t what)
{
	io_queue(g, io, what);
	event_active(g->sockets.ev_drain, EV_READ, 0);
}

static void
io_unqueue(kvg_ingest *g, kvg_io *io)
{
	kvg_io **pp = &g->sockets.ready_head;
	kvg_io *prev = NULL;
	while (*pp != NULL && *pp != io) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp == io) {
		*pp = io->next;
		if (g->sockets.ready_tail == io) {
			g->sockets.ready_tail = prev;
		}
	}
	io->queued = false;
}

static void
on_sub_fd(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvg_io *io = arg;
	io_ready(io->g, io, KVG_SUB);
}

static void
on_mon_fd(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvg_io *io = arg;
	io_ready(io->g, io, KVG_MON);
}

static void
on_dealer_fd(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvg_io *io = arg;
	io_ready(io->g, io, KVG_DEALER);
}

static void
on_timer_ev(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvg_io *io = arg;
	kvq_recovery_on(&io->g->recovery, io->l,
			&(kvq_event){.kind = KVQ_EV_TIMER});
}

/* ---- receiving ----------------------------------------------------- */

typedef struct kvg_msg {
	zmq_msg_t parts[KVG_MAX_FRAMES];
	kvi_frame frames[KVG_MAX_FRAMES];
	int n; /* frames the message had */
} kvg_msg;

static void
msg_close(kvg_msg *m)
{
	for (int i = 0; i < m->n && i < KVG_MAX_FRAMES; i++) {
		zmq_msg_close(&m->parts[i]);
	}
	m->n = 0;
}

/* msg_recv receives one whole message without blocking. Returns false
 * (errno EAGAIN) when none is waiting. Frames past KVG_MAX_FRAMES are
 * counted and dropped. */
static bool
msg_recv(void *sock, kvg_msg *m)
{
	m->n = 0;
	for (;;) {
		zmq_msg_t scratch;
		zmq_msg_t *zm =
		    m->n < KVG_MAX_FRAMES ? &m->parts[m->n] : &scratch;
		zmq_msg_init(zm);
		if (zmq_msg_recv(zm, sock, m->n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
			zmq_msg_close(zm);
			msg_close(m);
			return false;
		}
		int more = zmq_msg_more(zm);
		if (m->n < KVG_MAX_FRAMES) {
			m->frames[m->n] =
			    (kvi_frame){zmq_msg_data(zm), zmq_msg_size(zm)};
		} else {
			zmq_msg_close(zm);
		}
		m->n++;
		if (!more) {
			return true;
		}
	}
}

/* drain_sub applies what the listener has queued, then reads what the
 * engine sent: up to KVG_BUDGET batches are applied per turn, and what
 * arrives beyond that (or while ingest is paused for the store) is read
 * into the listener's queue rather than left to ZeroMQ, whose receive
 * queue has no bound (ingest_io.c's io_setopts): the queue's budget
 * is ours to enforce. Returns whether to come back next turn. */
static bool
drain_sub(kvg_ingest *g, kvg_io *io)
{
	kvl_listener *l = io->l;
	size_t applied = 0;
	if (!g->sockets.paused && l->recovery.state == KVL_R_STREAMING) {
		applied = kvq_backlog_apply(&g->recovery, l, KVG_BUDGET);
	}
	for (int i = 0; i < KVG_READ_AHEAD; i++) {
		kvg_msg m;
		if (io->sub == NULL || !msg_recv(io->sub, &m)) {
			return !g->sockets.paused &&
			       l->recovery.state == KVL_R_STREAMING &&
			       l->backlog != NULL;
		}
		kvi_msg msg;
		char why[128];
		if (kvi_frame_parse_live(m.frames, (size_t)m.n, &msg, why,
					 sizeof(why)) == KVI_OK) {
			bool defer = g->sockets.paused || applied >= KVG_BUDGET;
			kvq_recovery_on(&g->recovery, l,
					&(kvq_event){.kind = KVQ_EV_LIVE,
						     .seq = msg.seq,
						     .payload = msg.payload.ptr,
						     .len = msg.payload.len,
						     .defer = defer});
			applied += !defer;
		} else {
			l->c.malformed++;
			kvl_error(l, "%s", why);
		}
		msg_close(&m);
	}
	return true;
}

static bool
drain_mon(kvg_ingest *g, kvg_io *io)
{
	for (int i = 0; i < KVG_BUDGET; i++) {
		kvg_msg m;
		if (io->mon == NULL || !msg_recv(io->mon, &m)) {
			return false;
		}
		if (m.n >= 1 && m.frames[0].len >= 2) {
			uint16_t ev;
			memcpy(&ev, m.frames[0].ptr, sizeof(ev));
			if (ev == ZMQ_EVENT_DISCONNECTED ||
			    ev == ZMQ_EVENT_CONNECTED) {
				kvg_io_lost(io, ev == ZMQ_EVENT_DISCONNECTED);
			}
			if (ev == ZMQ_EVENT_DISCONNECTED) {
				kvq_recovery_on(
				    &g->recovery, io->l,
				    &(kvq_event){.kind = KVQ_EV_DISCONNECTED});
			} else if (ev == ZMQ_EVENT_CONNECTED) {
				kvq_recovery_on(
				    &g->recovery, io->l,
				    &(kvq_event){.kind = KVQ_EV_CONNECTED});
			}
		}
		msg_close(&m);
	}
	return true;
}

static bool
drain_dealer(kvg_ingest *g, kvg_io *io)
{
	for (int i = 0; i < KVG_BUDGET && io->dealer != NULL; i++) {
		kvg_msg m;
		if (!msg_recv(io->dealer, &m)) {
			return false;
		}
		kvi_msg msg;
		char why[128];
		if (kvi_frame_parse_replay(m.frames, (size_t)m.n, &msg, why,
					   sizeof(why)) == KVI_OK) {
			kvq_recovery_on(
			    &g->recovery, io->l,
			    &(kvq_event){.kind = msg.end ? KVQ_EV_REPLAY_END
							 : KVQ_EV_REPLAY,
					 .seq = msg.seq,
					 .payload = msg.payload.ptr,
					 .len = msg.payload.len});
		} else {
			io->l->c.malformed++;
			kvl_error(io->l, "%s", why);
		}
		msg_close(&m);
	}
	return io->dealer != NULL;
}

static void
on_drain(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvg_io_drain(arg);
}

void
kvg_io_drain(kvg_ingest *g)
{
	/* One pass over what is ready now; what stays ready goes round. */
	kvg_io *tail = g->sockets.ready_tail;
	while (g->sockets.ready_head != NULL) {
		kvg_io *io = g->sockets.ready_head;
		g->sockets.ready_head = io->next;
		if (g->sockets.ready_head == NULL) {
			g->sockets.ready_tail = NULL;
		}
		io->queued = false;
		uint8_t want = io->want;
		io->want = 0;
		uint8_t again = 0;
		if ((want & KVG_MON) && drain_mon(g, io)) {
			again |= KVG_MON;
		}
		if ((want & KVG_DEALER) && io->dealer != NULL &&
		    drain_dealer(g, io)) {
			again |= KVG_DEALER;
		}
		if ((want & KVG_SUB) && drain_sub(g, io)) {
			again |= KVG_SUB;
		}
		if (again != 0) {
			io_queue(g, io, again);
		}
		if (io == tail) {
			break;
		}
	}
	if (g->sockets.ready_head != NULL) {
		/* More to read: go on in the next loop turn, after timers
		 * (group commits) and wake-ups (requests) have run. An
		 * event activated from its own callback would run again in
		 * this turn, for ever under load. */
		static const struct timeval now = {0, 0};
		event_add(g->sockets.ev_drain, &now);
	}
}

void
kvg_io_pause(kvg_ingest *g, bool paused)
{
	if (g->sockets.paused == paused) {
		return;
	}
	g->sockets.paused = paused;
	kvi_log(paused ? KVI_LOG_WARN : KVI_LOG_INFO,
		paused ? "ingest_paused" : "ingest_resumed",
		"reason=store_backlog");
	if (!paused) {
		for (uint32_t i = 0; i < g->next_lid; i++) {
			kvl_listener *l = kvg_listener(g, i);
			if (l != NULL && l->io != NULL) {
				io_ready(g, l->io, KVG_SUB);
			}
		}
	}
}

kvi_err
kvg_io_init(kvg_ingest *g)
{
	kvg_sockets *s = &g->sockets;
	s->zctx = zmq_ctx_new();
	if (s->zctx == NULL) {
		return KVI_EIO;
	}
	/* Three sockets a listener (SUB, its monitor and the monitor's
	 * pipe), more while replaying: libzmq's default of 1023 would cap a
	 * shard at about 340 listeners. */
	zmq_ctx_set(s->zctx, ZMQ_MAX_SOCKETS, KVG_MAX_SOCKETS);
	s->ev_drain = event_new(g->base, -1, 0, on_drain, g);
	return KVI_OK;
}

void
kvg_io_fini(kvg_ingest *g)
{
	kvg_sockets *s = &g->sockets;
	if (s->ev_drain != NULL) {
		event_free(s->ev_drain);
		s->ev_drain = NULL;
	}
	if (s->zctx != NULL) {
		zmq_ctx_term(s->zctx);
		s->zctx = NULL;
	}
}

bool
kvg_ingest_files_out(kvg_ingest *g, int64_t ms)
{
	int64_t at = atomic_load(&g->sockets.files_out_ms);
	return at != 0 && kvi_now_ms() - at < ms;
}

bool
kvg_io_paused(const kvg_ingest *g)
{
	return g->sockets.paused;
}

/* ---- sockets ------------------------------------------------------- */

static struct event *
io_watch(kvg_ingest *g, void *sock, event_callback_fn cb, kvg_io *io)
{
	int fd;
	size_t len = sizeof(fd);
	if (zmq_getsockopt(sock, ZMQ_FD, &fd, &len) != 0) {
		return NULL;
	}
	struct event *ev = event_new(g->base, fd, EV_READ | EV_PERSIST, cb, io);
	if (ev != NULL && event_add(ev, NULL) != 0) {
		event_free(ev);
		ev = NULL;
	}
	return ev;
}

static void
io_setopts(kvg_ingest *g, void *sock)
{
	/* Reconnecting backs off from 100 ms to the ceiling: a fleet of
	 * engines that are gone costs connection attempts at listeners /
	 * ceiling per second, not a core. */
	int zero = 0, ivl = 100, ivl_max = g->cfg.reconnect_max_ms;
	/* Unbounded receive queue: libzmq 4.3.4 aborts when a heartbeating
	 * peer restarts a pipe that hit its HWM (docs/design.md#ingest). */
	zmq_setsockopt(sock, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(sock, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl));
	zmq_setsockopt(sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof(ivl_max));
}

static void io_sock_close(void **sock, struct event **ev);

/* kvg_io_failed says in l's last_error why what failed with errno err:
 * a shard out of descriptors (or of ZeroMQ sockets) says so, with its
 * limit. Returns KVI_EFULL for that, else KVI_EINVAL. */
kvi_err
kvg_io_failed(kvg_ingest *g, kvl_listener *l, const char *what, int err)
{
	if (err == EMFILE || err == ENFILE) {
		atomic_store(&g->sockets.files_out_ms, kvi_now_ms());
		struct rlimit lim = {0};
		getrlimit(RLIMIT_NOFILE, &lim);
		kvl_error(l,
			  "%s: the shard is out of file descriptors or ZeroMQ "
			  "sockets (%s; open-file limit %llu, ZMQ_MAX_SOCKETS "
			  "%d)",
			  what, zmq_strerror(err),
			  (unsigned long long)lim.rlim_cur, KVG_MAX_SOCKETS);
		return KVI_EFULL;
	}
	kvl_error(l, "%s: %s", what, zmq_strerror(err));
	return KVI_EINVAL;
}

kvi_err
kvg_io_sub_open(kvg_ingest *g, kvg_io *io)
{
	static unsigned long monitor_seq;
	kvl_listener *l = io->l;
	char what[320];
	snprintf(what, sizeof(what), "cannot subscribe to %s", l->endpoint);
	kvi_err rv = KVI_OK;
	if ((io->sub = zmq_socket(g->sockets.zctx, ZMQ_SUB)) == NULL) {
		rv = kvg_io_failed(g, l, what, errno);
		goto fail;
	}
	io_setopts(g, io->sub);
	const char *topic = l->topic != NULL ? l->topic : "";
	zmq_setsockopt(io->sub, ZMQ_SUBSCRIBE, topic, strlen(topic));
	/* The monitor is listening before the SUB connects, or the first
	 * CONNECTED event - the one that starts catching up - is lost. */
	char addr[64];
	snprintf(addr, sizeof(addr), "inproc://kvi-mon-%u-%lu", l->lid,
		 ++monitor_seq);
	int zero = 0;
	if (zmq_socket_monitor(io->sub, addr,
			       ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) !=
		0 ||
	    (io->mon = zmq_socket(g->sockets.zctx, ZMQ_PAIR)) == NULL ||
	    zmq_setsockopt(io->mon, ZMQ_LINGER, &zero, sizeof(zero)) != 0 ||
	    zmq_connect(io->mon, addr) != 0 ||
	    zmq_connect(io->sub, l->endpoint) != 0) {
		rv = kvg_io_failed(g, l, what, errno);
		goto fail;
	}
	if ((io->ev_sub = io_watch(g, io->sub, on_sub_fd, io)) == NULL ||
	    (io->ev_mon = io_watch(g, io->mon, on_mon_fd, io)) == NULL) {
		rv = kvg_io_failed(g, l, what, errno);
		goto fail;
	}
	io_ready(g, io, KVG_SUB | KVG_MON);
	return KVI_OK;
fail:
	kvg_io_sub_close(io);
	return rv;
}

void
kvg_io_sub_close(kvg_io *io)
{
	if (io->sub != NULL) {
		zmq_socket_monitor(io->sub, NULL, 0);
	}
	io_sock_close(&io->sub, &io->ev_sub);
	io_sock_close(&io->mon, &io->ev_mon);
}

/* ---- a listener's sockets ----------------------------------------- */

kvi_err
kvg_io_open(kvg_ingest *g, kvl_listener *l)
{
	kvg_io *io = kvi_calloc(1, sizeof(*io));
	io->g = g;
	io->l = l;
	io->probe_fd = -1;
	io->probe_ms = KVG_PROBE_MIN_MS;
	io->ev_timer = evtimer_new(g->base, on_timer_ev, io);
	kvi_err rv;
	if (kvg_endpoint_addr(l->endpoint, &io->addr, &io->addr_len)) {
		if ((rv = kvg_io_room(g, l)) == KVI_OK) {
			rv = kvg_io_probe(g, io);
		}
	} else {
		rv = kvg_io_sub_open(g, io);
	}
	l->io = io;
	if (rv != KVI_OK) {
		kvg_io_close(g, l);
	}
	return rv;
}

static void
io_sock_close(void **sock, struct event **ev)
{
	if (*ev != NULL) {
		event_free(*ev);
		*ev = NULL;
	}
	if (*sock != NULL) {
		zmq_close(*sock);
		*sock = NULL;
	}
}

void
kvg_io_close(kvg_ingest *g, kvl_listener *l)
{
	kvg_io *io = l->io;
	if (io == NULL) {
		return;
	}
	io_unqueue(g, io);
	io_sock_close(&io->dealer, &io->ev_dealer);
	kvg_io_sub_close(io);
	kvg_io_probe_stop(io);
	if (io->ev_timer != NULL) {
		event_free(io->ev_timer);
	}
	kvi_free(io);
	l->io = NULL;
}

kvi_err
kvg_io_replay_start(kvg_ingest *g, kvl_listener *l, uint64_t seq)
{
	kvg_io *io = l->io;
	if (io == NULL) {
		return KVI_ECLOSED; /* fed in process: no sockets */
	}
	kvg_io_replay_stop(g, l);
	char what[320];
	snprintf(what, sizeof(what), "cannot connect to replay %s",
		 l->replay_ep);
	if ((io->dealer = zmq_socket(g->sockets.zctx, ZMQ_DEALER)) == NULL) {
		return kvg_io_failed(g, l, what, errno);
	}
	io_setopts(g, io->dealer);
	/* A replay is bounded, unlike the live stream: an engine streams all
	 * it holds from seq on, faster than it is applied, and an unbounded
	 * queue would hold all of it (tens of MB in test_shard_ingest's
	 * flood). Past ZeroMQ's default the engine's ROUTER drops the rest:
	 * the replay is cut, and asked again from where it got to. */
	int hwm = KVG_REPLAY_RCVHWM;
	zmq_setsockopt(io->dealer, ZMQ_RCVHWM, &hwm, sizeof(hwm));
	if (zmq_connect(io->dealer, l->replay_ep) != 0) {
		kvi_err rv = kvg_io_failed(g, l, what, errno);
		io_sock_close(&io->dealer, &io->ev_dealer);
		return rv;
	}
	uint8_t seq8[8];
	kvi_seq_put(seq8, seq);
	/* DEALER sends queue until the connection is up. */
	zmq_send(io->dealer, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	zmq_send(io->dealer, seq8, sizeof(seq8), ZMQ_DONTWAIT);
	if ((io->ev_dealer = io_watch(g, io->dealer, on_dealer_fd, io)) ==
	    NULL) {
		kvi_err rv = kvg_io_failed(g, l, what, errno);
		io_sock_close(&io->dealer, &io->ev_dealer);
		return rv;
	}
	io_ready(g, io, KVG_DEALER);
	return KVI_OK;
}

void
kvg_io_replay_stop(kvg_ingest *g, kvl_listener *l)
{
	(void)g;
	kvg_io *io = l->io;
	if (io != NULL) {
		io_sock_close(&io->dealer, &io->ev_dealer);
	}
}

void
kvg_io_timer(kvg_ingest *g, kvl_listener *l, int ms)
{
	(void)g;
	kvg_io *io = l->io;
	if (io == NULL) {
		return;
	}
	if (ms < 0) {
		evtimer_del(io->ev_timer);
		return;
	}
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(io->ev_timer, &tv);
}
