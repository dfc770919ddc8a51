/*
 * ingest_probe.c - a listener whose engine is not there holds no socket.
 *
 * A SUB and its monitor cost 32 KiB and three descriptors (libzmq 4.3.4
 * as Debian builds it; bench_zmq_sockets), and a fleet has many ranks that
 * are gone or not up yet. Before the SUB is made, a plain non-blocking
 * connect probes the endpoint, backing off as ZeroMQ's reconnects do (100
 * ms, doubling to --reconnect-max-ms); once the engine takes one, the probe
 * is closed, the sockets are made, and the SUB's first CONNECTED starts
 * catching up as before. A SUB that lost its engine and has not connected
 * again within KVG_PARK_MS is closed (its monitor has said DISCONNECTED,
 * so the next connection is verified) and the listener probes again.
 * tcp:// endpoints with a numeric address and ipc:// ones are probed;
 * others (host names, source addresses) are ZeroMQ's to resolve, off this
 * thread, and get their sockets at once.
 *
 * A probe holds a descriptor while its connect is in flight, at most
 * KVG_PROBES_MAX at once. Beyond each listener's first (which is never
 * kept waiting: a new listener's engine is usually up), the shard probes
 * at most --probe-rate times a second: each probe takes the next free
 * slot of that budget and waits for it, so that a fleet's back-offs - a
 * few thousand listeners just registered, or whose engines all went at
 * once - cost a bounded share of a core, and spread out evenly instead of
 * meeting. Ingest thread only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "ingest_io_int.h"

bool
kvg_endpoint_addr(const char *ep, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (strncmp(ep, "ipc://", 6) == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;
		const char *path = ep + 6;
		size_t n = strlen(path);
		if (n == 0 || n >= sizeof(un->sun_path)) {
			return false;
		}
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, path, n);
		/* "@name" is abstract, as ZeroMQ reads it */
		if (path[0] == '@') {
			un->sun_path[0] = '\0';
		}
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
				   (path[0] != '@'));
		return true;
	}
	if (strncmp(ep, "tcp://", 6) != 0) {
		return false;
	}
	const char *host = ep + 6, *colon = strrchr(host, ':');
	if (colon == NULL || strchr(host, ';') != NULL) {
		return false; /* no port, or a source address */
	}
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || colon[1] == '\0' || port == 0 || port > 65535) {
		return false;
	}
	char buf[64];
	size_t hl = (size_t)(colon - host);
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		host++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(buf)) {
		return false;
	}
	memcpy(buf, host, hl);
	buf[hl] = '\0';
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, buf, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*len = sizeof(*in4);
		return true;
	}
	if (inet_pton(AF_INET6, buf, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
		return true;
	}
	return false;
}

/* Descriptors a listener's sockets take: the SUB's, its monitor's two, and
 * the connection. */
#define KVG_IO_FDS 4

kvi_err
kvg_io_room(kvg_ingest *g, kvl_listener *l)
{
	int fds[KVG_IO_FDS], n = 0, err = 0;
	for (; n < KVG_IO_FDS; n++) {
		if ((fds[n] = fcntl(g->wake_fd, F_DUPFD_CLOEXEC, 0)) < 0) {
			err = errno;
			break;
		}
	}
	while (n > 0) {
		close(fds[--n]);
	}
	if (err == 0) {
		return KVI_OK;
	}
	char what[320];
	snprintf(what, sizeof(what), "no room for the sockets of %s",
		 l->endpoint);
	return kvg_io_failed(g, l, what, err);
}

static void on_probe(evutil_socket_t fd, short what, void *arg);

/* io_arm sets io's probe event: fd's connect, or a timer (fd -1).
 * The event is made once and set again each time. */
static void
io_arm(kvg_io *io, int fd, int ms)
{
	short what = fd >= 0 ? EV_WRITE : 0;
	if (io->ev_probe == NULL) {
		io->ev_probe = event_new(io->g->base, fd, what, on_probe, io);
	} else {
		event_del(io->ev_probe);
		event_assign(io->ev_probe, io->g->base, fd, what, on_probe, io);
	}
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	event_add(io->ev_probe, &tv);
}

/* io_disarm cancels io's probe event, if set. */
static void
io_disarm(kvg_io *io)
{
	if (io->ev_probe != NULL) {
		event_del(io->ev_probe);
	}
}

/* io_probe_later probes again after the back-off, which grows to the
 * reconnect ceiling; listeners that failed together spread out. The
 * back-off follows time, not the probes made: one that came late, having
 * waited for the probe budget, waits at least as long again for the next,
 * so that a budget that is behind does not keep listeners probing at
 * their first back-offs for longer. */
static void
io_probe_later(kvg_io *io)
{
	int ms = io->probe_ms;
	int max = io->g->cfg.reconnect_max_ms;
	if (io->probed_us != 0) {
		uint64_t since = (kvi_now_us() - io->probed_us) / 1000;
		if (since > (uint64_t)ms) {
			ms = since < (uint64_t)max ? (int)since : max;
		}
	}
	io->probe_ms = ms >= max / 2 ? max : ms * 2;
	io_arm(io, -1, ms + (int)(io->l->lid * 7919u % (unsigned)(ms / 4 + 1)));
}

/* io_retry probes again after rv, a probe's or the sockets' failure:
 * at the ceiling when the shard is out of descriptors, for a descriptor
 * that another listener gives back is better left to /metrics and /ready
 * than taken at once by a listener that already failed for want of it. */
static void
io_retry(kvg_io *io, kvi_err rv)
{
	if (rv == KVI_OK) {
		return;
	}
	if (rv == KVI_EFULL) {
		io->probe_ms = io->g->cfg.reconnect_max_ms;
	}
	io_probe_later(io);
}

/* io_reached makes the sockets of a listener whose engine took a
 * probe's connection. */
static kvi_err
io_reached(kvg_ingest *g, kvg_io *io)
{
	io->probe_ms = KVG_PROBE_MIN_MS;
	io->probed_us = 0;
	io_disarm(io);
	return kvg_io_sub_open(g, io);
}

/* probe_slot takes the next free slot of the probe budget for io and
 * returns the milliseconds until it (0: now). A listener's first probe is
 * outside the budget. */
static int
probe_slot(kvg_ingest *g, const kvg_io *io)
{
	uint32_t rate = g->cfg.probe_rate;
	if (rate == 0 || io->probe_ms == KVG_PROBE_MIN_MS) {
		return 0;
	}
	uint64_t now = kvi_now_us(), step = 1000000u / rate + 1;
	uint64_t saved = (uint64_t)KVG_PROBE_BURST_MS * 1000;
	uint64_t slot = atomic_load(&g->probes.slot_us);
	if (slot + saved < now) {
		slot = now - saved;
	}
	atomic_store(&g->probes.slot_us, slot + step);
	if (slot <= now) {
		return 0;
	}
	return (int)((slot - now + 999) / 1000);
}

kvi_err
kvg_io_probe(kvg_ingest *g, kvg_io *io)
{
	if (!io->slotted) {
		int wait = probe_slot(g, io);
		io->slotted = true; /* the slot is io's until it probes */
		if (wait > 0) {
			atomic_fetch_add(&g->probes.waited, 1);
			io_arm(io, -1, wait);
			return KVI_OK;
		}
	}
	if (g->probes.in_flight >= KVG_PROBES_MAX) {
		io_arm(io, -1, 10 + (int)(io->l->lid % 90));
		return KVI_OK;
	}
	io->slotted = false;
	int fd = socket(io->addr.ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		char what[320];
		snprintf(what, sizeof(what), "cannot reach %s",
			 io->l->endpoint);
		return kvg_io_failed(g, io->l, what, errno);
	}
	atomic_fetch_add(&g->probes.made, 1);
	io->probed_us = kvi_now_us();
	if (connect(fd, (struct sockaddr *)&io->addr, io->addr_len) == 0) {
		close(fd);
		return io_reached(g, io);
	}
	if (errno == EINPROGRESS) {
		io->probe_fd = fd;
		g->probes.in_flight++;
		io_arm(io, fd, KVG_PROBE_WAIT_MS);
		return KVI_OK;
	}
	close(fd);
	io_probe_later(io);
	return KVI_OK;
}

/* on_probe: a probe's connect ended, or a timer: the next probe, or,
 * for a SUB whose engine went, the time to close it. */
static void
on_probe(evutil_socket_t fd, short what, void *arg)
{
	kvg_io *io = arg;
	kvg_ingest *g = io->g;
	if (io->sub != NULL) {
		kvg_io_sub_close(io);
		io->probe_ms = KVG_PROBE_MIN_MS;
		io_probe_later(io);
		return;
	}
	if (io->probe_fd < 0) {
		io_retry(io, kvg_io_probe(g, io));
		return;
	}
	int err = ETIMEDOUT;
	if (what & EV_WRITE) {
		socklen_t len = sizeof(err);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
			err = errno;
		}
	}
	close(io->probe_fd);
	io->probe_fd = -1;
	g->probes.in_flight--;
	io_retry(io, err != 0 ? KVI_EAGAIN : io_reached(g, io));
}

/* kvg_io_lost: the SUB's connection went; unless it comes back, the
 * sockets are closed after KVG_PARK_MS and the listener probes. */
void
kvg_io_lost(kvg_io *io, bool lost)
{
	if (io->addr_len == 0) {
		return;
	}
	if (lost) {
		io_arm(io, -1, KVG_PARK_MS);
	} else {
		io_disarm(io);
	}
}

bool
kvg_io_waiting(const kvl_listener *l)
{
	const kvg_io *io = l->io;
	return io != NULL && io->sub == NULL;
}

void
kvg_io_probe_stop(kvg_io *io)
{
	if (io->ev_probe != NULL) {
		event_free(io->ev_probe);
		io->ev_probe = NULL;
	}
	if (io->probe_fd >= 0) {
		close(io->probe_fd);
		io->probe_fd = -1;
		io->g->probes.in_flight--;
	}
}

/* counter_out gives one unlabelled counter. */
static void
counter_out(kvi_metrics_out *out, const char *name, const char *help,
	    uint64_t v)
{
	kvi_metrics_out_family(out, name, help, KVI_METRIC_COUNTER);
	kvi_metrics_out_sample_i64(out, name, NULL, 0, (int64_t)v);
}

void
kvg_probe_metrics(kvi_metrics_out *out, kvg_ingest *g)
{
	counter_out(out, "kvindex_shard_probes_total",
		    "Connects made to engines that took no connection yet.",
		    atomic_load(&g->probes.made));
	counter_out(out, "kvindex_shard_probes_waited_total",
		    "Probes that waited for the probe budget (--probe-rate).",
		    atomic_load(&g->probes.waited));
	uint64_t slot = atomic_load(&g->probes.slot_us), now = kvi_now_us();
	kvi_metrics_out_family(out, "kvindex_shard_probe_behind_seconds",
			       "How long a probe that asks now waits for the "
			       "probe budget.",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample(out, "kvindex_shard_probe_behind_seconds", NULL,
			       0, slot > now ? (double)(slot - now) / 1e6 : 0);
}
