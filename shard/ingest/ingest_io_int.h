/*
 * ingest_io_int.h - a listener's sockets, shared by ingest_io.c (the
 * ZeroMQ sockets) and ingest_probe.c (probing an engine that is not
 * there, before they are made). Ingest thread only.
 */
#ifndef KVI_SHARD_INGEST_IO_INT_H
#define KVI_SHARD_INGEST_IO_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ingest_int.h"

#define KVG_PROBE_MIN_MS   100  /* the first probe's back-off, as ZeroMQ's */
#define KVG_PROBE_WAIT_MS  2000 /* a probe's connect gives up after this */
#define KVG_PROBES_MAX     256  /* probes in flight (one descriptor each) */
#define KVG_PARK_MS        5000 /* a SUB without its engine this long goes */
#define KVG_PROBE_BURST_MS 100  /* the probe budget a quiet spell saves */

typedef struct kvg_io {
	kvg_ingest *g;
	kvl_listener *l;
	void *sub, *mon, *dealer;
	struct event *ev_sub, *ev_mon, *ev_dealer, *ev_timer;
	struct kvg_io *next; /* on the ready list */
	bool queued;
	uint8_t want;
	/* the endpoint, for probing (addr_len 0: not probed) */
	struct sockaddr_storage addr;
	socklen_t addr_len;
	/* without a SUB: the next probe's timer, or the probe's connect;
	 * with one: the timer that parks it when its engine stays away */
	struct event *ev_probe;
	int probe_fd;       /* a connect in flight, or -1 */
	int probe_ms;       /* the back-off after the next failure */
	bool slotted;       /* holds a slot of the probe budget, not used yet */
	uint64_t probed_us; /* the last probe made (0: none since a SUB) */
} kvg_io;

/* ingest_io.c */

/* kvg_io_sub_open makes io's SUB and its monitor and connects them. */
kvi_err kvg_io_sub_open(kvg_ingest *g, kvg_io *io);
void kvg_io_sub_close(kvg_io *io);
/* kvg_io_failed says in l's last_error why what failed with errno err:
 * KVI_EFULL for a shard out of descriptors, else KVI_EINVAL. */
kvi_err kvg_io_failed(kvg_ingest *g, kvl_listener *l, const char *what,
		      int err);

/* ingest_probe.c */

/* kvg_endpoint_addr reads a tcp:// endpoint with a numeric address, or an
 * ipc:// one, into *ss; false for anything else. */
bool kvg_endpoint_addr(const char *ep, struct sockaddr_storage *ss,
		       socklen_t *len);
/* kvg_io_room checks that the descriptors l's sockets will take are there
 * now, as making them at once would: KVI_EFULL, said in l's last_error,
 * if not. A listener is refused then rather than taken and left without
 * sockets once its engine answers. */
kvi_err kvg_io_room(kvg_ingest *g, kvl_listener *l);
/* kvg_io_probe connects to io's endpoint without ZeroMQ, and makes the
 * sockets once the engine takes a connection. Returns an error only if no
 * descriptor could be had for it (or for the sockets, when the connection
 * is taken at once). */
kvi_err kvg_io_probe(kvg_ingest *g, kvg_io *io);
/* kvg_io_lost: io's SUB lost its connection (lost) or has it again. */
void kvg_io_lost(kvg_io *io, bool lost);
/* kvg_io_probe_stop ends io's probing, before io is freed. */
void kvg_io_probe_stop(kvg_io *io);

#endif /* KVI_SHARD_INGEST_IO_INT_H */
