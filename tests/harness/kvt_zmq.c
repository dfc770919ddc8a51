#include "kvt_zmq.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "alloc.h"
#include "kvt_env.h"

#define SETTLE_STEPS   10
#define SETTLE_STEP_MS 5

static atomic_uint monitor_counter;

void
kvt_frames_fini(kvt_frames *f)
{
	for (size_t i = 0; i < f->n && i < KVT_ZMQ_MAX_FRAMES; i++) {
		kvi_free(f->data[i]);
	}
	memset(f, 0, sizeof(*f));
}

kvi_err
kvt_zmq_recv(void *socket, int timeout_ms, kvt_frames *out)
{
	zmq_pollitem_t item = {.socket = socket, .events = ZMQ_POLLIN};
	int rc = zmq_poll(&item, 1, timeout_ms);
	if (rc < 0) {
		return KVI_EIO;
	}
	if (rc == 0) {
		return KVI_ETIMEDOUT;
	}
	kvt_frames f;
	memset(&f, 0, sizeof(f));
	int more = 1;
	while (more) {
		zmq_msg_t m;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, socket, 0) < 0) {
			zmq_msg_close(&m);
			kvt_frames_fini(&f);
			return KVI_EIO;
		}
		if (f.n < KVT_ZMQ_MAX_FRAMES) {
			f.len[f.n] = zmq_msg_size(&m);
			f.data[f.n] = kvi_malloc(f.len[f.n] + 1);
			memcpy(f.data[f.n], zmq_msg_data(&m), f.len[f.n]);
		}
		f.n++;
		more = zmq_msg_more(&m);
		zmq_msg_close(&m);
	}
	*out = f;
	return KVI_OK;
}

/* settle lets the socket run its pending commands for a while: after a
 * reconnect, libzmq re-sends a SUB's subscriptions only when the
 * application thread touches the socket. */
static void
settle(void *socket)
{
	for (int i = 0; i < SETTLE_STEPS; i++) {
		int events;
		size_t len = sizeof(events);
		zmq_getsockopt(socket, ZMQ_EVENTS, &events, &len);
		kvt_sleep_ms(SETTLE_STEP_MS);
	}
}

kvi_err
kvt_zmq_wait_handshake(kvt_zmq_link *l, int timeout_ms)
{
	int64_t deadline = kvt_now_ms() + timeout_ms;
	for (;;) {
		int left = (int)(deadline - kvt_now_ms());
		kvt_frames f;
		if (left < 0 || kvt_zmq_recv(l->monitor, left, &f) != KVI_OK) {
			return KVI_ETIMEDOUT;
		}
		/* Frame 0: u16 event, u32 value; frame 1: the address. */
		uint16_t ev = 0;
		if (f.len[0] >= 2) {
			memcpy(&ev, f.data[0], 2);
		}
		kvt_frames_fini(&f);
		if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
			settle(l->socket);
			return KVI_OK;
		}
	}
}

kvi_err
kvt_zmq_connect(void *ctx, int type, const char *endpoint, int timeout_ms,
		kvt_zmq_link *out)
{
	memset(out, 0, sizeof(*out));
	char mon_ep[64];
	snprintf(mon_ep, sizeof(mon_ep), "inproc://kvt-monitor-%u",
		 atomic_fetch_add(&monitor_counter, 1));
	out->socket = zmq_socket(ctx, type);
	if (out->socket == NULL) {
		return KVI_EIO;
	}
	int zero = 0;
	zmq_setsockopt(out->socket, ZMQ_LINGER, &zero, sizeof(zero));
	if (type == ZMQ_SUB) {
		zmq_setsockopt(out->socket, ZMQ_RCVHWM, &zero, sizeof(zero));
		zmq_setsockopt(out->socket, ZMQ_SUBSCRIBE, "", 0);
	}
	if (zmq_socket_monitor(out->socket, mon_ep,
			       ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0) {
		kvt_zmq_close(out);
		return KVI_EIO;
	}
	out->monitor = zmq_socket(ctx, ZMQ_PAIR);
	zmq_setsockopt(out->monitor, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_connect(out->monitor, mon_ep) != 0 ||
	    zmq_connect(out->socket, endpoint) != 0) {
		kvt_zmq_close(out);
		return KVI_EIO;
	}
	return kvt_zmq_wait_handshake(out, timeout_ms);
}

void
kvt_zmq_close(kvt_zmq_link *l)
{
	if (l->socket != NULL) {
		zmq_socket_monitor(l->socket, NULL, 0);
		zmq_close(l->socket);
	}
	if (l->monitor != NULL) {
		zmq_close(l->monitor);
	}
	memset(l, 0, sizeof(*l));
}

kvi_err
kvt_zmq_bind_any(void *socket, int *port)
{
	char ep[64];
	size_t len = sizeof(ep);
	if (zmq_bind(socket, "tcp://127.0.0.1:*") != 0 ||
	    zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, ep, &len) != 0) {
		return KVI_EIO;
	}
	const char *colon = strrchr(ep, ':');
	int p = colon != NULL ? atoi(colon + 1) : 0;
	if (p <= 0) {
		return KVI_EIO;
	}
	*port = p;
	return KVI_OK;
}
