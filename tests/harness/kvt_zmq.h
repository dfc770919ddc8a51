/*
 * kvt_zmq.h - ZeroMQ helpers for integration tests.
 *
 * Tests talk to engines (or the simulator) directly: a SUB on a rank's
 * live stream, a DEALER on its replay socket. kvt_zmq_connect connects a
 * socket and waits for the handshake with the peer, observed through a
 * socket monitor, which removes most of the "slow joiner" race before the
 * first message (a PUB still needs the subscription, which follows the
 * handshake within microseconds). The monitor stays attached so that a
 * later reconnect (a restarted peer) can be awaited too.
 *
 * kvt_zmq_recv receives one multipart message with a timeout into copied
 * frames. A kvt_zmq_link and its socket belong to one thread.
 */
#ifndef KVI_TESTS_KVT_ZMQ_H
#define KVI_TESTS_KVT_ZMQ_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define KVT_ZMQ_MAX_FRAMES 16

typedef struct kvt_frames {
	size_t n; /* frames received; more than KVT_ZMQ_MAX_FRAMES are
		     counted but not kept */
	void *data[KVT_ZMQ_MAX_FRAMES];
	size_t len[KVT_ZMQ_MAX_FRAMES];
} kvt_frames;

/* A socket with its monitor. */
typedef struct kvt_zmq_link {
	void *socket;
	void *monitor;
} kvt_zmq_link;

/* kvt_zmq_connect creates a socket of type (ZMQ_SUB subscribes to every
 * topic; receive queue unbounded, linger 0), connects it to endpoint and
 * waits up to timeout_ms for the handshake. Returns KVI_ETIMEDOUT (the
 * link is still usable and must be closed) or KVI_EIO. */
kvi_err kvt_zmq_connect(void *ctx, int type, const char *endpoint,
			int timeout_ms, kvt_zmq_link *out);

/* kvt_zmq_wait_handshake waits for the next completed handshake (after a
 * peer restart). Returns KVI_ETIMEDOUT. */
kvi_err kvt_zmq_wait_handshake(kvt_zmq_link *l, int timeout_ms);

void kvt_zmq_close(kvt_zmq_link *l);

/* kvt_zmq_bind_any binds socket (an engine's, played by the test) to a
 * port of 127.0.0.1 the kernel picks and writes the port into *port.
 * Returns KVI_EIO. */
kvi_err kvt_zmq_bind_any(void *socket, int *port);

/* kvt_zmq_recv receives one message within timeout_ms into *out (release
 * with kvt_frames_fini). Returns KVI_ETIMEDOUT or KVI_EIO. */
kvi_err kvt_zmq_recv(void *socket, int timeout_ms, kvt_frames *out);

void kvt_frames_fini(kvt_frames *f);

#endif /* KVI_TESTS_KVT_ZMQ_H */
