/*
 * rpc_fixture.h - what the rpc tests (test_rpc_envelope.c, test_rpc_calls.c,
 * test_rpc_timeouts.c) share.
 *
 * A fake shard: a real kvn_service on a loopback port whose handler answers
 * from the request itself (a match per seq hash, a rank per instance, fixed
 * status and dump bodies) and keeps the last request it saw. Some keys make
 * it misbehave: assign "slow" sleeps SLOW_MS, assign "fail" answers EEXIST,
 * unassign "missing" ENOENT, status "broken" a response without its required
 * shard_id, dump "nomsg" a code without a message.
 *
 * The test group (group_setup, group_teardown) runs one fake shard, g_shard,
 * and one client connected to it, g_client. Request builders fill caller-
 * owned structs; raw_call talks to a service with a plain nng req socket, to
 * send what kvp_call never would. Every helper fails the running test
 * through cmocka on an unexpected error.
 */
#ifndef KVI_TESTS_UNIT_RPC_FIXTURE_H
#define KVI_TESTS_UNIT_RPC_FIXTURE_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "rpc.h"
#include "service.h"

#define SLOW_MS 500

/* A shard whose handler answers from the request itself and keeps the last
 * request it saw, packed. */
typedef struct fake_shard {
	kvn_service *svc;
	char url[64];
	pthread_mutex_t mu;
	uint8_t last[8192]; /* the last request, packed again */
	size_t last_len;
	atomic_int calls;
	atomic_int slow_started;
	atomic_int slow_done; /* the slow assign has answered */
} fake_shard;

extern fake_shard g_shard;
extern kvp_client *g_client;

/* What req_query asks, and what the fake's dump answers. */
extern const uint64_t query_hashes[5];
extern const uint64_t query_instances[2];
extern const uint64_t dump_ext[3];
extern const uint64_t dump_seq[3];

/* now_ms returns a monotonic clock in milliseconds. */
int64_t now_ms(void);

void sleep_ms(int ms);

/* port_hold binds a loopback TCP port the kernel picks, without
 * SO_REUSEADDR and without listening, writes it into *port and returns
 * the descriptor: until it is closed, connections to the port are
 * refused and nothing else binds it, not even as the local end of an
 * outgoing connection (a port released at once, in the ephemeral range,
 * could be anyone's by the time a test uses it). */
int port_hold(int *port);

/* fake_handler is the fake shard's kvn_handler; arg is its fake_shard. */
void fake_handler(void *arg, const Kvindex__Request *req,
		  Kvindex__Response *resp, kvp_arena *arena);

/* fake_start starts f on a loopback port (0: any) and sets f->url. */
void fake_start(fake_shard *f, int port);

void fake_stop(fake_shard *f);

/* fake_last returns the last request f handled (the caller frees it). */
Kvindex__Request *fake_last(fake_shard *f);

/* group_setup starts g_shard and opens g_client to it; group_teardown
 * closes both. */
int group_setup(void **state);
int group_teardown(void **state);

void req_dump(Kvindex__Request *req, Kvindex__DumpRequest *dr, const char *key);
void req_assign(Kvindex__Request *req, Kvindex__AssignRequest *ar,
		Kvindex__Listener *l, const char *key);
void req_query(Kvindex__Request *req, Kvindex__QueryRequest *qr);

/* raw_call sends len bytes with a plain req socket to url and returns the
 * decoded reply (the caller frees it). */
Kvindex__Response *raw_call(const char *url, const void *buf, size_t len);

/* raw_call_request packs req as is (any version, any body) and sends it. */
Kvindex__Response *raw_call_request(const char *url,
				    const Kvindex__Request *req);

#endif /* KVI_TESTS_UNIT_RPC_FIXTURE_H */
