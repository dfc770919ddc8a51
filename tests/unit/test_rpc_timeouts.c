/*
 * test_rpc_timeouts.c - the client over time: a connection lost mid-call, a
 * slow call that does not hold up others, deadlines with a slow shard and
 * with nothing listening, reconnection to a shard that comes up late, a
 * fan-out with one shard down (kvp_call_async), a close that aborts the
 * calls in flight, and the contexts that answered calls leave for the next.
 * Over real nng sockets on loopback, against the fake shard of rpc_fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpc_fixture.h"

typedef struct dropping_server {
	nng_socket sock;
	int received;
	pthread_t thread;
} dropping_server;

/* Receives one request and closes its socket instead of answering. */
static void *
dropping_main(void *arg)
{
	dropping_server *ds = arg;
	void *buf = NULL;
	size_t len = 0;
	if (nng_recv(ds->sock, &buf, &len, NNG_FLAG_ALLOC) == 0) {
		nng_free(buf, len);
		ds->received++;
	}
	nng_close(ds->sock);
	return NULL;
}

/* A connection lost after the request went out ends the call at once, and
 * the request is not sent again. */
static void
test_connection_lost(void **state)
{
	(void)state;
	dropping_server ds = {0};
	nng_listener l;
	assert_int_equal(nng_rep0_open(&ds.sock), 0);
	assert_int_equal(nng_socket_set_ms(ds.sock, NNG_OPT_RECVTIMEO, 5000),
			 0);
	assert_int_equal(nng_listen(ds.sock, "tcp://127.0.0.1:0", &l, 0), 0);
	int port = 0;
	assert_int_equal(nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port),
			 0);
	assert_int_equal(pthread_create(&ds.thread, NULL, dropping_main, &ds),
			 0);
	char url[64], err[256];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	kvp_client *c;
	assert_int_equal(kvp_client_open(url, &c), KVI_OK);
	Kvindex__Request req;
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "k");
	int64_t t0 = now_ms();
	assert_int_equal(kvp_call(c, &req, 3000, NULL, err, sizeof(err)),
			 KVI_EUNREACHABLE);
	/* ended by the loss, well before its 3 s deadline */
	assert_true(now_ms() - t0 < 2500);
	assert_non_null(strstr(err, "lost before the reply"));
	pthread_join(ds.thread, NULL);
	assert_int_equal(ds.received, 1);
	kvp_client_close(c);
}

typedef struct slow_call {
	kvp_client *client;
	int timeout_ms;
	kvi_err rv;
	atomic_int done;
} slow_call;

static void *
slow_call_main(void *arg)
{
	slow_call *sc = arg;
	Kvindex__Request req;
	Kvindex__AssignRequest ar;
	Kvindex__Listener l;
	req_assign(&req, &ar, &l, "slow");
	sc->rv = kvp_call(sc->client, &req, sc->timeout_ms, NULL, NULL, 0);
	atomic_store(&sc->done, 1);
	return NULL;
}

/* wait_slow_started waits (at most 2 s) for the fake's slow assign. */
static void
wait_slow_started(fake_shard *f)
{
	for (int i = 0; i < 2000 && !atomic_load(&f->slow_started); i++) {
		sleep_ms(1);
	}
	assert_true(atomic_load(&f->slow_started));
}

static void
test_slow_assign_does_not_block_query(void **state)
{
	(void)state;
	atomic_store(&g_shard.slow_started, 0);
	atomic_store(&g_shard.slow_done, 0);
	slow_call sc = {.client = g_client, .timeout_ms = 3000};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, slow_call_main, &sc), 0);
	wait_slow_started(&g_shard);

	Kvindex__Request req;
	Kvindex__QueryRequest qr;
	req_query(&req, &qr);
	assert_int_equal(kvp_call(g_client, &req, 2000, NULL, NULL, 0), KVI_OK);
	bool assign_in_flight = !atomic_load(&sc.done);
	bool assign_served = atomic_load(&g_shard.slow_done);
	pthread_join(t, NULL);

	/* the query did not wait behind the assign: it was answered while
	 * the shard was still serving the assign (which answers only after
	 * SLOW_MS), and before the assign's caller had its reply */
	assert_false(assign_served);
	assert_true(assign_in_flight);
	assert_int_equal(sc.rv, KVI_OK);
	assert_true(atomic_load(&g_shard.slow_done));
}

/* A reply later than the deadline: the call returns at the deadline. */
static void
test_timeout_slow_reply(void **state)
{
	(void)state;
	atomic_store(&g_shard.slow_started, 0);
	atomic_store(&g_shard.slow_done, 0);
	Kvindex__Request req;
	Kvindex__AssignRequest ar;
	Kvindex__Listener l;
	req_assign(&req, &ar, &l, "slow");
	char err[256];
	Kvindex__Response *resp = NULL;
	int64_t t0 = now_ms();
	assert_int_equal(kvp_call(g_client, &req, 200, &resp, err, sizeof(err)),
			 KVI_ETIMEDOUT);
	int64_t ms = now_ms() - t0;
	assert_null(resp);
	/* not before the deadline, and before the reply came: ordering, not
	 * a window that a loaded host could miss */
	assert_true(ms >= 190);
	assert_false(atomic_load(&g_shard.slow_done));
	assert_non_null(strstr(err, "no reply from"));
	assert_true(atomic_load(&g_shard.slow_started));
}

static void
test_timeout_nothing_listening(void **state)
{
	(void)state;
	char url[64], err[256];
	int port, held = port_hold(&port);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	kvp_client *c;
	assert_int_equal(kvp_client_open(url, &c), KVI_OK);
	Kvindex__Request req;
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "k");
	Kvindex__Response *resp = NULL;
	int64_t t0 = now_ms();
	assert_int_equal(kvp_call(c, &req, 300, &resp, err, sizeof(err)),
			 KVI_ETIMEDOUT);
	int64_t ms = now_ms() - t0;
	assert_null(resp);
	/* at the deadline, not before; the upper bound only says it did not
	 * wait for anything else (a connection that never comes) */
	assert_true(ms >= 290 && ms < 300 + 2000);
	assert_non_null(strstr(err, "no connection to"));
	kvp_client_close(c);
	close(held);
}

/* A client opened while its shard is down reaches it once it is up. */
static void
test_reconnect(void **state)
{
	(void)state;
	int port, held = port_hold(&port);
	char url[64];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	kvp_client *c;
	assert_int_equal(kvp_client_open(url, &c), KVI_OK);
	Kvindex__Request req;
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "k");
	assert_int_equal(kvp_call(c, &req, 200, NULL, NULL, 0), KVI_ETIMEDOUT);

	static fake_shard late;
	close(held); /* free for the shard, which binds it at once */
	fake_start(&late, port);
	int64_t t0 = now_ms();
	char err[256];
	kvi_err rv = kvp_call(c, &req, 3000, NULL, err, sizeof(err));
	int64_t ms = now_ms() - t0;
	if (rv != KVI_OK) {
		fail_msg("call after the shard came up: %s", err);
	}
	/* once up, it is reached at the next try of a backoff capped at
	 * KVP_RECONNECT_MAX_MS, not at the call's deadline; room for a
	 * busy host */
	assert_true(ms < 4 * KVP_RECONNECT_MAX_MS);
	assert_int_equal(atomic_load(&late.calls), 1);
	kvp_client_close(c);
	fake_stop(&late);
}

/* The outcome of one call of a fan-out. */
typedef struct fan_slot {
	struct fan_out *fo;
	int calls;
	kvi_err rv;
	long n_matches; /* -1 without a response */
	int64_t at_ms;
	int order; /* 0 for the first callback of the fan-out, 1, 2 */
} fan_slot;

typedef struct fan_out {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int finished;
	fan_slot slots[3];
} fan_out;

static void
fan_done(void *arg, kvi_err rv, Kvindex__Response *resp, const char *err)
{
	(void)err;
	fan_slot *s = arg;
	long n = -1;
	if (resp != NULL) {
		n = resp->body_case == KVINDEX__RESPONSE__BODY_QUERY
			? (long)resp->query->n_m_instance
			: -2;
		kvindex__response__free_unpacked(resp, NULL);
	}
	pthread_mutex_lock(&s->fo->mu);
	s->calls++;
	s->rv = rv;
	s->n_matches = n;
	s->at_ms = now_ms();
	s->order = s->fo->finished++;
	pthread_cond_signal(&s->fo->cv);
	pthread_mutex_unlock(&s->fo->mu);
}

static void
test_fanout_one_shard_down(void **state)
{
	(void)state;
	static fake_shard shards[3];
	kvp_client *clients[3];
	for (int i = 0; i < 3; i++) {
		fake_start(&shards[i], 0);
		assert_int_equal(kvp_client_open(shards[i].url, &clients[i]),
				 KVI_OK);
	}
	/* every client connected, then shard 1 dies */
	Kvindex__Request req;
	Kvindex__QueryRequest qr;
	req_query(&req, &qr);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(
		    kvp_call(clients[i], &req, 2000, NULL, NULL, 0), KVI_OK);
	}
	fake_stop(&shards[1]);

	fan_out fo = {.finished = 0};
	pthread_mutex_init(&fo.mu, NULL);
	pthread_cond_init(&fo.cv, NULL);
	const int deadline = 400;
	int64_t t0 = now_ms();
	for (int i = 0; i < 3; i++) {
		fo.slots[i].fo = &fo;
		assert_int_equal(kvp_call_async(clients[i], &req, deadline,
						fan_done, &fo.slots[i]),
				 KVI_OK);
	}
	pthread_mutex_lock(&fo.mu);
	while (fo.finished < 3 && now_ms() - t0 < 3000) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&fo.cv, &fo.mu, &ts);
	}
	pthread_mutex_unlock(&fo.mu);
	int64_t all_ms = now_ms() - t0;
	assert_int_equal(fo.finished, 3);
	assert_true(all_ms < deadline + 2000); /* nothing outlived it */

	assert_int_equal(fo.slots[0].rv, KVI_OK);
	assert_int_equal(fo.slots[0].n_matches, 5);
	assert_int_equal(fo.slots[2].rv, KVI_OK);
	assert_int_equal(fo.slots[2].n_matches, 5);
	/* The dead shard's call either waits out the deadline for a
	 * connection or, when it raced onto the closing pipe, fails at once
	 * with the reset: both are "no answer" to a fan-out. */
	assert_int_equal(fo.slots[1].n_matches, -1);
	if (fo.slots[1].rv == KVI_ETIMEDOUT) {
		assert_true(fo.slots[1].at_ms - t0 >= deadline - 10);
	} else {
		assert_int_equal(fo.slots[1].rv, KVI_EUNREACHABLE);
	}
	/* the live shards answered (so within the deadline) without
	 * waiting for the dead one: before its call ran out */
	if (fo.slots[1].rv == KVI_ETIMEDOUT) {
		assert_true(fo.slots[0].order < fo.slots[1].order);
		assert_true(fo.slots[2].order < fo.slots[1].order);
	}

	sleep_ms(100); /* no callback runs twice */
	pthread_mutex_lock(&fo.mu);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(fo.slots[i].calls, 1);
	}
	pthread_mutex_unlock(&fo.mu);

	for (int i = 0; i < 3; i++) {
		kvp_client_close(clients[i]);
	}
	fake_stop(&shards[0]);
	fake_stop(&shards[2]);
	pthread_cond_destroy(&fo.cv);
	pthread_mutex_destroy(&fo.mu);
}

/* Closing a client aborts its calls in flight, and their callbacks have
 * run when close returns. */
static void
test_client_close_aborts_calls(void **state)
{
	(void)state;
	kvp_client *c;
	assert_int_equal(kvp_client_open(g_shard.url, &c), KVI_OK);
	atomic_store(&g_shard.slow_started, 0);
	atomic_store(&g_shard.slow_done, 0);
	fan_out fo = {.finished = 0};
	pthread_mutex_init(&fo.mu, NULL);
	pthread_cond_init(&fo.cv, NULL);
	fo.slots[0].fo = &fo;
	Kvindex__Request req;
	Kvindex__AssignRequest ar;
	Kvindex__Listener l;
	req_assign(&req, &ar, &l, "slow");
	assert_int_equal(kvp_call_async(c, &req, 3000, fan_done, &fo.slots[0]),
			 KVI_OK);
	wait_slow_started(&g_shard);
	kvp_client_close(c);
	/* the close did not wait for the reply: the shard has not sent it */
	assert_false(atomic_load(&g_shard.slow_done));
	assert_int_equal(fo.slots[0].calls, 1);
	assert_int_equal(fo.slots[0].rv, KVI_ECLOSED);
	pthread_cond_destroy(&fo.cv);
	pthread_mutex_destroy(&fo.mu);
}

/* idle_settled returns c's idle calls once they have stopped changing: a
 * call's callback keeps its context just after it has told the caller. */
static unsigned
idle_settled(kvp_client *c)
{
	unsigned n = kvp_client_idle_calls(c);
	for (int i = 0; i < 100; i++) {
		sleep_ms(2);
		unsigned m = kvp_client_idle_calls(c);
		if (m == n && i >= 2) {
			break;
		}
		n = m;
	}
	return n;
}

/* A call answered leaves its context for the next call; one that timed
 * out does not (its reply may still come), and the calls after it get
 * their own replies. */
static void
test_contexts_reused(void **state)
{
	(void)state;
	kvp_client *c;
	assert_int_equal(kvp_client_open(g_shard.url, &c), KVI_OK);
	Kvindex__Request req;
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "k");
	assert_int_equal(kvp_client_idle_calls(c), 0);
	for (int i = 0; i < 50; i++) {
		assert_int_equal(kvp_call(c, &req, 3000, NULL, NULL, 0),
				 KVI_OK);
		assert_int_equal(idle_settled(c), 1);
	}
	atomic_store(&g_shard.slow_started, 0);
	atomic_store(&g_shard.slow_done, 0);
	Kvindex__Request slow;
	Kvindex__AssignRequest ar;
	Kvindex__Listener l;
	req_assign(&slow, &ar, &l, "slow");
	assert_int_equal(kvp_call(c, &slow, 100, NULL, NULL, 0), KVI_ETIMEDOUT);
	assert_int_equal(kvp_client_idle_calls(c), 0);
	/* the slow reply comes while these run: each gets its own */
	for (int i = 0; !atomic_load(&g_shard.slow_done) || i < 20; i++) {
		Kvindex__Response *resp = NULL;
		assert_int_equal(kvp_call(c, &req, 3000, &resp, NULL, 0),
				 KVI_OK);
		assert_int_equal(resp->body_case, KVINDEX__RESPONSE__BODY_DUMP);
		assert_int_equal(resp->dump->watermark, 99);
		kvindex__response__free_unpacked(resp, NULL);
		assert_int_equal(idle_settled(c), 1);
	}
	/* a shard's error is a reply: the context is kept */
	req_dump(&req, &dr, "nomsg");
	assert_int_equal(kvp_call(c, &req, 3000, NULL, NULL, 0), KVI_ENOENT);
	assert_int_equal(idle_settled(c), 1);
	kvp_client_close(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_connection_lost),
	    cmocka_unit_test(test_slow_assign_does_not_block_query),
	    cmocka_unit_test(test_timeout_slow_reply),
	    cmocka_unit_test(test_timeout_nothing_listening),
	    cmocka_unit_test(test_reconnect),
	    cmocka_unit_test(test_fanout_one_shard_down),
	    cmocka_unit_test(test_client_close_aborts_calls),
	    cmocka_unit_test(test_contexts_reused),
	};
	int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
	nng_fini();
	return failed;
}
