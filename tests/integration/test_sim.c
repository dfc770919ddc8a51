/*
 * test_sim.c - the engine simulator's live stream and replay, driven as a
 * real process.
 *
 * Starts kvindex-sim (2 pods x DP=2, paused, ephemeral ports, layout file)
 * and checks it from the outside, as an indexer would see it: a ZMQ SUB on
 * every rank's live stream and a DEALER on every replay socket; /prefill
 * reaches exactly its rank, decodes, and matches /truth; replay returns the
 * buffer and the end marker; /fault/skip makes a gap, /fault/stall holds
 * batches back, /clear publishes AllBlocksCleared, /fault/restart resets
 * seq to 0; bad requests get 400; SIGTERM exits cleanly. The tests run in
 * order on one simulator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <zmq.h>

#include "alloc.h"
#include "frame.h"
#include "hash.h"
#include "sim_check.h"

#define PODS  2
#define DP    2
#define RANKS (PODS * DP)
#define BS    SIMC_BS

static simproc A;

/* State carried between the ordered tests on rank (0, 1). */
static uint32_t tokens0[3 * BS + 5];
static uint64_t hashes0[3];
static uint64_t locals0[3];
static void *payload0;
static size_t payload0_len;

static int
rank_index(int pod, int rank)
{
	return pod * DP + rank;
}

static int
group_setup(void **state)
{
	(void)state;
	simc_setup();
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	simc_stop(&A);
	kvi_free(payload0);
	simc_teardown();
	return 0;
}

static void
test_start_and_layout(void **state)
{
	(void)state;
	const char *extra[] = {"--paused", "--cache-blocks", "64", NULL};
	simc_start(&A, PODS, DP, extra);
	json_t *st = simc_http(&A, "GET", "/status", NULL, 200);
	assert_true(json_is_true(json_object_get(st, "paused")));
	json_t *ranks = json_object_get(st, "ranks");
	assert_int_equal(json_array_size(ranks), RANKS);
	for (int i = 0; i < RANKS; i++) {
		json_t *r = json_array_get(ranks, (size_t)i);
		assert_int_equal(simc_int(r, "pod"), i / DP);
		assert_int_equal(simc_int(r, "rank"), i % DP);
		assert_int_equal(simc_int(r, "seq"), -1);
		assert_int_equal(simc_int(r, "gpu_blocks"), 0);
	}
	json_decref(st);
	simc_connect(&A);
}

static void
test_prefill_reaches_exactly_its_rank(void **state)
{
	(void)state;
	int idx = rank_index(0, 1);
	simc_tokens(tokens0, 3 * BS + 5, 1);
	json_t *rep = simc_prefill(&A, 0, 1, tokens0, 3 * BS + 5);
	assert_int_equal(simc_int(rep, "seq"), 0);
	assert_int_equal(simc_int(rep, "stored_blocks"), 3);
	assert_int_equal(simc_int(rep, "hit_blocks"), 0);
	json_t *locals = json_object_get(rep, "local_hashes");
	assert_int_equal(json_array_size(locals), 3);

	kvt_frames f;
	assert_true(simc_recv_live(&A, idx, "", &f) == 0);
	kvi_batch b;
	const kvi_event *ev = simc_decode_one(&f, 1, &b);
	assert_int_equal(ev->type, KVI_EVENT_STORED);
	assert_int_equal(ev->tier, KVI_TIER_GPU);
	assert_false(ev->has_parent);
	assert_int_equal(ev->block_size, BS);
	assert_int_equal(ev->n_hashes, 3);
	assert_int_equal(ev->n_tokens, 3 * BS);
	assert_memory_equal(ev->tokens, tokens0, 3 * BS * sizeof(uint32_t));
	assert_int_equal(kvi_local_hashes(ev->tokens, ev->n_tokens, BS,
					  kvi_local_seed(NULL, 0, NULL, 0),
					  locals0),
			 3);
	for (int i = 0; i < 3; i++) {
		assert_true(locals0[i] ==
			    simc_u64(json_array_get(locals, (size_t)i)));
		hashes0[i] = ev->hashes[i];
	}
	payload0_len = f.len[2];
	payload0 = kvi_malloc(payload0_len);
	memcpy(payload0, f.data[2], payload0_len);
	kvt_frames_fini(&f);
	json_decref(rep);
	for (int i = 0; i < RANKS; i++) {
		if (i != idx) {
			simc_expect_quiet(A.sub[i].socket);
		}
	}
}

static void
test_truth(void **state)
{
	(void)state;
	json_t *t = simc_http(&A, "GET", "/truth?pod=0&rank=1", NULL, 200);
	assert_int_equal(simc_int(t, "pod"), 0);
	assert_int_equal(simc_int(t, "rank"), 1);
	assert_int_equal(simc_int(t, "seq"), 0);
	assert_int_equal(simc_int(t, "block_size"), BS);
	json_t *blocks = json_object_get(t, "blocks");
	assert_int_equal(json_array_size(blocks), 3);
	uint64_t seq[3];
	kvi_seq_hashes(KVI_SEQ_ROOT, locals0, 3, seq);
	for (size_t i = 0; i < 3; i++) {
		json_t *b = json_array_get(blocks, i);
		assert_true(simc_u64(json_object_get(b, "hash")) == hashes0[i]);
		json_t *parent = json_object_get(b, "parent");
		if (i == 0) {
			assert_true(json_is_null(parent));
		} else {
			assert_true(simc_u64(parent) == hashes0[i - 1]);
		}
		assert_true(simc_u64(json_object_get(b, "local_hash")) ==
			    locals0[i]);
		assert_true(simc_u64(json_object_get(b, "seq_hash")) == seq[i]);
		json_t *tiers = json_object_get(b, "tiers");
		assert_int_equal(json_array_size(tiers), 1);
		assert_string_equal(json_string_value(json_array_get(tiers, 0)),
				    "gpu");
	}
	json_decref(t);
	t = simc_http(&A, "GET", "/truth?pod=1&rank=0", NULL, 200);
	assert_int_equal(simc_int(t, "seq"), -1);
	assert_int_equal(json_array_size(json_object_get(t, "blocks")), 0);
	json_decref(t);
	json_decref(simc_http(&A, "GET", "/truth?pod=2&rank=0", NULL, 400));
	json_decref(simc_http(&A, "GET", "/truth?pod=0", NULL, 400));
}

static void
test_extend_and_replay(void **state)
{
	(void)state;
	int idx = rank_index(0, 1);
	uint32_t tok[5 * BS];
	memcpy(tok, tokens0, 3 * BS * sizeof(uint32_t));
	simc_tokens(tok + 3 * BS, 2 * BS, 2);
	json_t *rep = simc_prefill(&A, 0, 1, tok, 5 * BS);
	assert_int_equal(simc_int(rep, "seq"), 1);
	assert_int_equal(simc_int(rep, "hit_blocks"), 3);
	assert_int_equal(simc_int(rep, "stored_blocks"), 2);
	json_decref(rep);
	kvt_frames f;
	assert_true(simc_recv_live(&A, idx, "", &f) == 1);
	kvi_batch b;
	const kvi_event *ev = simc_decode_one(&f, 1, &b);
	assert_true(ev->has_parent);
	assert_true(ev->parent == hashes0[2]);
	assert_int_equal(ev->n_hashes, 2);
	kvt_frames_fini(&f);

	/* Replay from 0: both batches, byte for byte, then the marker. */
	simc_replay_request(&A, idx, 0);
	assert_true(simc_recv_replay(&A, idx, true, "", &f) == 0);
	assert_int_equal(f.len[3], payload0_len);
	assert_memory_equal(f.data[3], payload0, payload0_len);
	kvt_frames_fini(&f);
	assert_true(simc_recv_replay(&A, idx, true, "", &f) == 1);
	kvt_frames_fini(&f);
	assert_true(simc_recv_replay(&A, idx, true, "", &f) == KVI_SEQ_END);
	assert_int_equal(f.len[2], 0);
	kvt_frames_fini(&f);

	const uint64_t one[] = {1};
	simc_expect_replay(&A, idx, 1, one, 1);
	simc_expect_replay(&A, idx, 7, NULL,
			   0); /* newer than all: marker only */
	/* Anything but [b"", seq8] is ignored. */
	assert_int_equal(zmq_send(A.dealer[idx].socket, "", 0, ZMQ_SNDMORE), 0);
	assert_int_equal(zmq_send(A.dealer[idx].socket, "abcd", 4, 0), 4);
	simc_expect_quiet(A.dealer[idx].socket);
	/* Another rank's replay buffer is its own (empty). */
	simc_expect_replay(&A, rank_index(1, 1), 0, NULL, 0);
}

static void
test_skip_makes_a_gap(void **state)
{
	(void)state;
	int idx = rank_index(0, 1);
	uint32_t tok[2 * BS];
	simc_post(&A, "/fault/skip",
		  json_pack("{s:i,s:i,s:i}", "pod", 0, "rank", 1, "count", 1));
	simc_tokens(tok, 2 * BS, 3);
	json_t *rep = simc_prefill(&A, 0, 1, tok, 2 * BS);
	assert_int_equal(simc_int(rep, "seq"), 2);
	json_decref(rep);
	simc_expect_quiet(A.sub[idx].socket);
	simc_tokens(tok, 2 * BS, 4);
	rep = simc_prefill(&A, 0, 1, tok, 2 * BS);
	assert_int_equal(simc_int(rep, "seq"), 3);
	json_decref(rep);
	kvt_frames f;
	assert_true(simc_recv_live(&A, idx, "", &f) == 3); /* 2 is missing */
	kvt_frames_fini(&f);
	/* The skipped batch is still in the replay buffer. */
	const uint64_t seqs[] = {2, 3};
	simc_expect_replay(&A, idx, 2, seqs, 2);
	json_t *st = simc_http(&A, "GET", "/status", NULL, 200);
	json_t *r = json_array_get(json_object_get(st, "ranks"), (size_t)idx);
	assert_int_equal(simc_int(r, "published"), 4);
	assert_int_equal(simc_int(r, "sent"), 3);
	assert_int_equal(simc_int(r, "skipped"), 1);
	json_decref(st);
}

static void
test_stall_holds_back(void **state)
{
	(void)state;
	int idx = rank_index(1, 0);
	uint32_t tok[BS];
	/* from before the stall is asked for: it cannot end sooner than
	 * 600 ms after t0, however late this thread runs */
	int64_t t0 = kvt_now_ms();
	simc_post(&A, "/fault/stall",
		  json_pack("{s:i,s:i,s:i}", "pod", 1, "rank", 0, "ms", 600));
	simc_tokens(tok, BS, 5);
	json_t *rep = simc_prefill(&A, 1, 0, tok, BS);
	assert_int_equal(simc_int(rep, "seq"), 0);
	json_decref(rep);
	simc_replay_request(&A, idx, 0);
	simc_expect_quiet(A.sub[idx].socket);
	simc_expect_quiet(A.dealer[idx].socket);
	kvt_frames f;
	assert_true(simc_recv_live(&A, idx, "", &f) == 0);
	assert_true(kvt_now_ms() - t0 >= 600 - 5);
	kvt_frames_fini(&f);
	assert_true(simc_recv_replay(&A, idx, true, "", &f) == 0);
	kvt_frames_fini(&f);
	assert_true(simc_recv_replay(&A, idx, true, "", &f) == KVI_SEQ_END);
	kvt_frames_fini(&f);
}

static void
test_clear(void **state)
{
	(void)state;
	int idx = rank_index(1, 0);
	json_t *rep =
	    simc_http(&A, "POST", "/clear",
		      json_pack("{s:i,s:i}", "pod", 1, "rank", 0), 200);
	assert_int_equal(simc_int(rep, "seq"), 1);
	json_decref(rep);
	kvt_frames f;
	assert_true(simc_recv_live(&A, idx, "", &f) == 1);
	kvi_batch b;
	const kvi_event *ev = simc_decode_one(&f, 0, &b);
	assert_int_equal(ev->type, KVI_EVENT_CLEARED);
	kvt_frames_fini(&f);
	json_t *t = simc_http(&A, "GET", "/truth?pod=1&rank=0", NULL, 200);
	assert_int_equal(simc_int(t, "seq"), 1);
	assert_int_equal(json_array_size(json_object_get(t, "blocks")), 0);
	json_decref(t);
}

static void
test_restart_resets_seq(void **state)
{
	(void)state;
	int idx = rank_index(0, 1);
	json_decref(simc_http(&A, "POST", "/fault/restart",
			      json_pack("{s:i,s:i}", "pod", 0, "rank", 1),
			      200));
	json_t *t = simc_http(&A, "GET", "/truth?pod=0&rank=1", NULL, 200);
	assert_int_equal(simc_int(t, "seq"), -1);
	assert_int_equal(json_array_size(json_object_get(t, "blocks")), 0);
	json_decref(t);
	/* libzmq reconnects both sockets to the new ones. */
	assert_int_equal(kvt_zmq_wait_handshake(&A.sub[idx], SIMC_WAIT_MS),
			 KVI_OK);
	assert_int_equal(kvt_zmq_wait_handshake(&A.dealer[idx], SIMC_WAIT_MS),
			 KVI_OK);
	json_t *rep = simc_prefill(&A, 0, 1, tokens0, 3 * BS);
	assert_int_equal(simc_int(rep, "seq"), 0);
	assert_int_equal(simc_int(rep, "stored_blocks"), 3);
	json_decref(rep);
	kvt_frames f;
	assert_true(simc_recv_live(&A, idx, "", &f) == 0);
	kvi_batch b;
	const kvi_event *ev = simc_decode_one(&f, 1, &b);
	assert_false(ev->has_parent);
	/* Same prefix, same external hashes: a restarted engine with a
	 * fixed hash seed. */
	assert_true(ev->hashes[0] == hashes0[0]);
	kvt_frames_fini(&f);
	const uint64_t zero[] = {0};
	simc_expect_replay(&A, idx, 0, zero, 1);
	json_t *v = simc_recover(&A, idx, "?start=0&end=0", 200);
	assert_non_null(json_object_get(v, "Events"));
	json_decref(v);
}

static void
test_bad_requests(void **state)
{
	(void)state;
	json_decref(simc_http(
	    &A, "POST", "/prefill",
	    json_pack("{s:i,s:i,s:[i]}", "pod", 7, "rank", 0, "token_ids", 1),
	    400));
	json_decref(simc_http(&A, "POST", "/prefill",
			      json_pack("{s:i,s:i,s:[I]}", "pod", 0, "rank", 0,
					"token_ids", (json_int_t)1 << 33),
			      400));
	json_decref(simc_http(&A, "POST", "/prefill",
			      json_pack("{s:i,s:i}", "pod", 0, "rank", 0),
			      400));
	json_decref(simc_http(&A, "POST", "/fault/recover",
			      json_pack("{s:i,s:i,s:s}", "pod", 0, "rank", 0,
					"mode", "sometimes"),
			      400));
	json_decref(simc_http(&A, "POST", "/fault/stall",
			      json_pack("{s:i,s:i}", "pod", 0, "rank", 0),
			      400));
	json_decref(simc_http(&A, "POST", "/nope", json_object(), 404));
	json_decref(simc_http(&A, "GET", "/nope", NULL, 404));
	char url[256];
	kvt_http_resp r;
	snprintf(url, sizeof(url), "%s/prefill", A.sim.control);
	assert_int_equal(kvt_http_post(url, "{not json", 5000, &r), KVI_OK);
	assert_int_equal(r.status, 400);
	assert_non_null(json_object_get(r.json, "error"));
	kvt_http_resp_fini(&r);
}

static void
test_sigterm_exits_cleanly(void **state)
{
	(void)state;
	assert_int_equal(simc_stop(&A), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_start_and_layout),
	    cmocka_unit_test(test_prefill_reaches_exactly_its_rank),
	    cmocka_unit_test(test_truth),
	    cmocka_unit_test(test_extend_and_replay),
	    cmocka_unit_test(test_skip_makes_a_gap),
	    cmocka_unit_test(test_stall_holds_back),
	    cmocka_unit_test(test_clear),
	    cmocka_unit_test(test_restart_resets_seq),
	    cmocka_unit_test(test_bad_requests),
	    cmocka_unit_test(test_sigterm_exits_cleanly),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
