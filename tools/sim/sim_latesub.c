/*
 * sim_latesub.c - subscriptions that take effect late (sim_latesub.h).
 */
#include "sim_latesub.h"

#include <string.h>
#include <zmq.h>

#include "log.h"

void
sim_latesub_read(sim_latesub *h, void *sock, uint64_t now, uint64_t delay_ns)
{
	while (!h->held) {
		uint8_t msg[SIM_LATESUB_TOPIC_MAX + 1];
		int n = zmq_recv(sock, msg, sizeof(msg), ZMQ_DONTWAIT);
		if (n < 0) {
			return;
		}
		if (n < 1 || (size_t)n > sizeof(msg)) {
			continue; /* not a subscription, or a topic too long */
		}
		if (msg[0] == 0) {
			zmq_setsockopt(sock, ZMQ_UNSUBSCRIBE, msg + 1,
				       (size_t)n - 1);
			continue;
		}
		*h = (sim_latesub){.sock = sock,
				   .held = true,
				   .due_ns = now + delay_ns,
				   .len = (size_t)n - 1};
		memcpy(h->topic, msg + 1, h->len);
		KVI_DEBUG("subscription_held", "delay_ms=%llu",
			  (unsigned long long)(delay_ns / 1000000));
	}
}

int
sim_latesub_wait_ms(const sim_latesub *h, uint64_t now, int idle_ms)
{
	if (!h->held) {
		return idle_ms;
	}
	if (h->due_ns <= now) {
		return 0;
	}
	uint64_t ms = (h->due_ns - now + 999999) / 1000000;
	return ms < (uint64_t)idle_ms ? (int)ms : idle_ms;
}

void
sim_latesub_apply(sim_latesub *h)
{
	zmq_setsockopt(h->sock, ZMQ_SUBSCRIBE, h->topic, h->len);
	h->held = false;
	KVI_DEBUG("subscription_applied", "topic_len=%zu", h->len);
}
