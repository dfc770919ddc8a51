/*
 * test_coord_marks.c - what a listener cannot be trusted for, the cluster
 * says, through /workers, the coordinator's metrics and its log.
 *
 * test_two_ranks_one_socket: an engine publishes the batches of two
 * data-parallel ranks on rank 0's socket, each rank numbering its own.
 * Rank 1's batches, whose seqs go back and repeat rank 0's, are neither a
 * restart nor duplicates of rank 0: they are ignored and counted, rank 0
 * keeps every block, and the listener is reported misconfigured.
 *
 * test_engine_restart_unseen: engines without replay or /kv_recover
 * restart while the shard owning them is down and publish past its
 * watermark. The blocks from before are gone from the index (the engines
 * hold none of them, and /query no longer finds their prompts), and the
 * listeners are reported incomplete.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "coord_check.h"
#include "wire_encode.h"

#define BS 16

/* mark_of returns /workers' field of the listener (name, rank); the
 * workers array is the caller's to release. */
static json_t *
mark_of(cluster *c, const char *pod, int rank, const char *field, json_t **ws)
{
	json_t *l = clu_listener(c, pod, rank, ws);
	assert_non_null(l);
	return json_object_get(l, field);
}

/* wait_assigned waits until /workers gives rank `rank` of pod a shard (a
 * listener whose engine has neither replay nor /kv_recover and has
 * published nothing stays pending), then a moment for its subscription
 * to reach the engine. */
static void
wait_assigned(cluster *c, const char *pod, int rank)
{
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ws;
		json_t *l = clu_listener(c, pod, rank, &ws);
		bool done =
		    l != NULL && json_is_string(json_object_get(l, "shard"));
		json_decref(ws);
		if (done) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(50);
	}
	kvt_sleep_ms(1000);
}

/* publish_at sends the encoded batch as [topic, seq, payload]. */
static void
publish_at(void *pub, uint64_t seq, const kvi_encoder *enc)
{
	uint8_t seq8[8];
	for (int i = 0; i < 8; i++) {
		seq8[i] = (uint8_t)(seq >> (56 - 8 * i));
	}
	size_t len;
	const void *data = kvi_encoder_data(enc, &len);
	assert_true(zmq_send(pub, "", 0, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(pub, seq8, 8, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(pub, data, len, 0) >= 0);
}

/* stored publishes, as rank `rank` at seq, one block of hash h whose
 * parent is parent (0: none). */
static void
stored(void *pub, int rank, uint64_t seq, uint64_t h, uint64_t parent)
{
	static const uint32_t toks[BS] = {7, 7, 7};
	kvi_encoder enc;
	kvi_encoder_init(&enc, KVI_FORM_MAP, KVI_HASH_UINT);
	kvi_encoder_begin(&enc, 1.0, 1, true, (uint16_t)rank);
	kvi_encoder_stored(&enc, &h, 1, parent != 0 ? &parent : NULL, toks, BS,
			   BS, "GPU", NULL);
	publish_at(pub, seq, &enc);
	kvi_encoder_fini(&enc);
}

static void
test_two_ranks_one_socket(void **state)
{
	cluster *c = *state;
	clu_shards(c, 1);
	clu_coord(c, false, NULL);
	void *zctx = zmq_ctx_new();
	void *pub = zmq_socket(zctx, ZMQ_PUB);
	int zero = 0, port;
	zmq_setsockopt(pub, ZMQ_LINGER, &zero, sizeof(zero));
	assert_int_equal(kvt_zmq_bind_any(pub, &port), KVI_OK);
	char body[256];
	snprintf(body, sizeof(body),
		 "{\"name\":\"mis/pod\",\"ip\":\"127.0.0.1\",\"zmq_port\":%d,"
		 "\"dp_size\":1,\"model_name\":\"m\",\"block_size\":%d}",
		 port, BS);
	long st;
	json_decref(clu_post(c, "/register", body, &st));
	assert_int_equal(st, 201);
	wait_assigned(c, "mis/pod", 0);
	long from = kvt_file_size(c->log_path);

	/* rank 0: seq 0..3, a chain of four blocks; rank 1 interleaved,
	 * seq 0..3 of its own */
	for (uint64_t s = 0; s < 4; s++) {
		stored(pub, 0, s, 100 + s, s > 0 ? 100 + s - 1 : 0);
		stored(pub, 1, s, 200 + s, s > 0 ? 200 + s - 1 : 0);
	}
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ws;
		json_t *l = clu_listener(c, "mis/pod", 0, &ws);
		assert_non_null(l);
		bool done =
		    json_integer_value(json_object_get(l, "last_seq")) == 3 &&
		    json_is_string(json_object_get(l, "misconfigured"));
		if (done) {
			assert_int_equal(
			    json_integer_value(json_object_get(l, "blocks")),
			    4);
			assert_string_equal(
			    json_string_value(json_object_get(l, "status")),
			    "active");
			assert_non_null(
			    strstr(json_string_value(
				       json_object_get(l, "misconfigured")),
				   "data_parallel_rank 1"));
			json_decref(ws);
			break;
		}
		json_decref(ws);
		if (kvt_now_ms() > deadline) {
			fail_msg("rank 0 did not apply its four batches, or "
				 "is not reported misconfigured");
		}
		kvt_sleep_ms(50);
	}
	assert_true(clu_metric(c, "kvindex_coord_listeners_misconfigured") ==
		    1);
	char v[256];
	assert_int_equal(kvt_log_field(c->log_path, from,
				       "listener_misconfigured", "listener", v,
				       sizeof(v), NULL, CLU_WAIT_MS),
			 KVI_OK);
	assert_string_equal(v, "mis/pod#0");
	shardproc *s = &c->shards[0];
	/* the shard's totals follow its group commits */
	assert_true(shc_wait_metric(s, "kvindex_shard_rank_mismatches_total", 4,
				    5000) == 4);
	assert_true(shc_metric(s, "kvindex_shard_engine_restarts_total") == 0);
	zmq_close(pub);
	zmq_ctx_term(zctx);
}

/* prefill_ids runs n new one-id prompts on rank r of pod 0, from id on. */
static void
prefill_ids(cluster *c, int r, unsigned id, int n)
{
	for (int k = 0; k < n; k++) {
		char body[128];
		snprintf(body, sizeof(body),
			 "{\"pod\":0,\"rank\":%d,\"hash_ids\":[%u]}", r,
			 id + (unsigned)k);
		json_decref(clu_sim_post(c, "/prefill", body));
	}
}

static void
test_engine_restart_unseen(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods",        "1",   "--dp",           "2",
			     "--replay-port", "off", "--recover-port", "off",
			     "--paused",      NULL};
	clu_sim(c, sim);
	clu_shards(c, 1);
	clu_coord(c, true, NULL);
	wait_assigned(c, "sim/pod-0", 0);
	wait_assigned(c, "sim/pod-0", 1);
	prefill_ids(c, 0, 1000, 10);
	prefill_ids(c, 1, 2000, 10);
	/* what a router would ask: the first prompt of rank 1 */
	json_t *ws;
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (json_integer_value(
		   mark_of(c, "sim/pod-0", 1, "last_seq", &ws)) != 9) {
		json_decref(ws);
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(50);
	}
	json_decref(ws);
	json_t *before = clu_sim_post(
	    c, "/prefill", "{\"pod\":0,\"rank\":1,\"hash_ids\":[2000]}");
	assert_int_equal(
	    json_integer_value(json_object_get(before, "hit_blocks")), 1);
	json_decref(before);

	shardproc *s = &c->shards[0];
	assert_int_equal(shc_stop(s), 0);
	json_decref(
	    clu_sim_post(c, "/fault/restart", "{\"pod\":0,\"rank\":1}"));
	prefill_ids(c, 1, 3000, 15); /* past the old watermark, unseen */
	shc_restart(s);
	kvt_sleep_ms(1500); /* the shard resubscribes */
	long from = kvt_file_size(c->log_path);
	prefill_ids(c, 1, 4000, 1);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *inc = mark_of(c, "sim/pod-0", 1, "incomplete", &ws);
		bool done = json_is_true(inc);
		json_decref(ws);
		if (done) {
			break;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("rank 1 is not reported incomplete");
		}
		kvt_sleep_ms(50);
	}
	json_t *inc0 = mark_of(c, "sim/pod-0", 0, "incomplete", &ws);
	assert_false(json_is_true(inc0));
	json_decref(ws);
	assert_true(clu_metric(c, "kvindex_coord_listeners_incomplete") == 1);
	char v[256];
	assert_int_equal(kvt_log_field(c->log_path, from, "listener_incomplete",
				       "listener", v, sizeof(v), NULL,
				       CLU_WAIT_MS),
			 KVI_OK);
	assert_string_equal(v, "sim/pod-0#1");
	/* the index keeps nothing the restarted engine does not hold */
	shc_diff d;
	assert_true(shc_diff_truth(s, &c->sim, 1, &d));
	assert_int_equal(d.phantom, 0);
	assert_true(shc_diff_truth(s, &c->sim, 0, &d));
	assert_int_equal(d.phantom + d.lost, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_two_ranks_one_socket,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_engine_restart_unseen,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
