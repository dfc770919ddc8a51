/*
 * test_shard_connect.c - a real kvindex-shard against an engine that
 * publishes one batch between the shard's connect and its subscription
 * taking effect, then stays idle (the simulator's --sub-delay-ms: the
 * subscription takes effect 20 ms after it reaches the rank, just after
 * that batch). The batch comes neither live nor by a catch-up asked at
 * once on connecting; a listener that waits a moment before it catches up
 * (shard/recovery's KVQ_CONNECT_SUB_MS) has it, without the engine
 * publishing again. Checked for a listener without a state (replay from
 * seq 0, or a tree dump) and for one with a state (the watermark's batch
 * replayed to check continuity, after a restart of the shard).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shard_check.h"

/* How long the listener may take to hold the batch once it is published:
 * the moment before the catch-up and the catch-up itself take tens of
 * ms. */
#define CONNECT_WAIT_MS 3000

typedef struct fixture {
	kvt_sim sim;
	shardproc shard;
} fixture;

static const int rank0[] = {0};

static fixture *
start(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	*state = f;
	const char *argv[] = {"--block-size",   "16",     "--log-level",
			      "debug",          "--pods", "1",
			      "--dp",           "1",      "--paused",
			      "--sub-delay-ms", "20",     NULL};
	kvi_err rv = kvt_sim_start(KVI_SIM_BIN, argv, 10000, &f->sim);
	if (rv != KVI_OK) {
		fail_msg("simulator did not start: %s", kvi_strerror(rv));
	}
	shc_start(&f->shard, NULL);
	return f;
}

static int
teardown(void **state)
{
	fixture *f = *state;
	if (f != NULL) {
		shc_cleanup(&f->shard);
		kvt_sim_stop(&f->sim, NULL);
		free(f);
	}
	return 0;
}

/* rank_seq returns rank 0's last published seq (-1: none). */
static long long
rank_seq(fixture *f)
{
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&f->sim, "GET", "/status", NULL, &r),
			 KVI_OK);
	const json_t *rank =
	    json_array_get(json_object_get(r.json, "ranks"), 0);
	long long seq = json_integer_value(json_object_get(rank, "seq"));
	kvt_http_resp_fini(&r);
	return seq;
}

/* wait_published waits until rank 0 has published seq: the batch it
 * publishes as a new subscription takes effect. */
static void
wait_published(fixture *f, long long seq)
{
	int64_t deadline = kvt_now_ms() + SHC_WAIT_MS;
	while (rank_seq(f) < seq) {
		if (kvt_now_ms() > deadline) {
			fail_msg("the simulator did not publish seq %lld (log "
				 "%s)",
				 seq, f->sim.log_path);
		}
		kvt_sleep_ms(5);
	}
	assert_int_equal(rank_seq(f), seq);
}

/* A new listener, with a replay socket (replay from seq 0) or only
 * /kv_recover (a tree dump): the engine's first batch falls in the
 * window. */
static void
connect_without_state(void **state, bool replay)
{
	fixture *f = start(state);
	shc_assign(&f->shard, &f->sim, 0, replay, true, 0);
	wait_published(f, 0);
	shc_wait_truth(&f->shard, &f->sim, rank0, 1, CONNECT_WAIT_MS);
	assert_int_equal(shc_stop(&f->shard), 0);
}

static void
test_connect_replay(void **state)
{
	connect_without_state(state, true);
}

static void
test_connect_recover(void **state)
{
	connect_without_state(state, false);
}

/* A listener with a state, after a restart of its shard: the check of
 * the watermark's batch, and the catch-up with it, come after the batch
 * in the window. */
static void
test_reconnect_with_state(void **state)
{
	fixture *f = start(state);
	shc_assign(&f->shard, &f->sim, 0, true, true, 0);
	wait_published(f, 0);
	/* a batch on the live stream: the listener has a state, whatever it
	 * did with seq 0 (a gap it repairs, if it missed it) */
	json_t *body = json_pack("{s:i, s:i, s:[i, i, i]}", "pod", 0, "rank", 0,
				 "hash_ids", 5001, 5002, 5003);
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&f->sim, "POST", "/prefill", body, &r),
			 KVI_OK);
	assert_int_equal(r.status, 200);
	kvt_http_resp_fini(&r);
	json_decref(body);
	shc_wait_truth(&f->shard, &f->sim, rank0, 1, SHC_WAIT_MS);
	assert_int_equal(shc_stop(&f->shard), 0);
	shc_restart(&f->shard);
	wait_published(f, 2);
	shc_wait_truth(&f->shard, &f->sim, rank0, 1, CONNECT_WAIT_MS);
	assert_int_equal(shc_stop(&f->shard), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_connect_replay, teardown),
	    cmocka_unit_test_teardown(test_connect_recover, teardown),
	    cmocka_unit_test_teardown(test_reconnect_with_state, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
