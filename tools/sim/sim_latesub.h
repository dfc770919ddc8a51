/*
 * sim_latesub.h - subscriptions that take effect late (--sub-delay-ms).
 *
 * With the flag a rank's live socket is an XPUB in manual mode
 * (ZMQ_XPUB_MANUAL): a subscriber's subscription reaches the rank but lets
 * nothing through until the rank applies it. The engine (sim_engine.c)
 * holds each new one for the delay and, just before it applies it,
 * publishes one batch of the rank's own: a batch between the subscriber's
 * connect and its subscription, which the subscriber receives neither live
 * nor by a replay it asked for at once on connecting. An idle rank then
 * publishes nothing more, so such a subscriber stays without it.
 *
 * The XPUB applies a subscription to the connection of the last message
 * read from it, so nothing more is read from the socket while one is held
 * (the subscriptions of several subscribers connecting at once are held in
 * turn, each with its own batch). libzmq forgets that connection when any
 * subscriber leaves: a subscription held meanwhile is then lost, and its
 * subscriber gets nothing live until it connects again. Engine thread
 * only.
 */
#ifndef KVI_SIM_LATESUB_H
#define KVI_SIM_LATESUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_LATESUB_TOPIC_MAX 256

/* A rank's held subscription, if any. */
typedef struct sim_latesub {
	void *sock; /* the XPUB it came on */
	bool held;
	uint64_t due_ns; /* monotonic */
	size_t len;
	uint8_t topic[SIM_LATESUB_TOPIC_MAX];
} sim_latesub;

/* sim_latesub_read reads what reached sock (an XPUB in manual mode)
 * while nothing is held: an unsubscription is applied at once, the first
 * subscription is held until now + delay_ns and ends the reading. */
void sim_latesub_read(sim_latesub *h, void *sock, uint64_t now,
		      uint64_t delay_ns);

/* sim_latesub_wait_ms says how long the engine may wait before a held
 * subscription is due at now (0: due; IDLE_MS when none is held). */
int sim_latesub_wait_ms(const sim_latesub *h, uint64_t now, int idle_ms);

/* sim_latesub_apply applies the held subscription; the socket is read
 * again from the next poll. */
void sim_latesub_apply(sim_latesub *h);

#endif /* KVI_SIM_LATESUB_H */
