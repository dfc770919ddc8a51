/*
 * test_sim_recover.c - the engine simulator's /kv_recover endpoint.
 *
 * Starts kvindex-sim (1 pod x DP=2, a recover log of 3 batches), publishes
 * four batches on rank 1 and checks every answer of docs/wire.md#kv_recover
 * against /truth: Events for a range the log holds, TreeDump without a
 * range or when the log lost the start, TooNew, InvalidRange, a 400 for a
 * half range, the answers of a rank that published nothing, and the forced
 * answers of /fault/recover (error, too_new, tree_dump, invalid_range,
 * hang).
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

#define BS SIMC_BS

static simproc A;
static uint64_t first_tail; /* the first batch's last block */

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
	simc_teardown();
	return 0;
}

/* test_publish_four_batches publishes, on rank 1: 3 blocks; 2 more after
 * them; then twice 2 blocks of new prefixes. */
static void
test_publish_four_batches(void **state)
{
	(void)state;
	const char *extra[] = {
	    "--paused", "--cache-blocks", "64", "--recover-log", "3", NULL};
	simc_start(&A, 1, 2, extra);
	uint32_t tok[5 * BS];
	simc_tokens(tok, 5 * BS, 1);
	json_t *rep = simc_prefill(&A, 0, 1, tok, 3 * BS);
	uint64_t last_local =
	    simc_u64(json_array_get(json_object_get(rep, "local_hashes"), 2));
	json_decref(rep);
	rep = simc_prefill(&A, 0, 1, tok, 5 * BS);
	assert_int_equal(simc_int(rep, "seq"), 1);
	json_decref(rep);
	for (int i = 2; i < 4; i++) {
		simc_tokens(tok, 2 * BS, (uint32_t)i + 10);
		rep = simc_prefill(&A, 0, 1, tok, 2 * BS);
		assert_int_equal(simc_int(rep, "seq"), i);
		json_decref(rep);
	}
	/* The first batch's last block, by its local hash. */
	json_t *t = simc_http(&A, "GET", "/truth?pod=0&rank=1", NULL, 200);
	json_t *blocks = json_object_get(t, "blocks");
	assert_int_equal(json_array_size(blocks), 9);
	for (size_t i = 0; i < json_array_size(blocks); i++) {
		json_t *b = json_array_get(blocks, i);
		if (simc_u64(json_object_get(b, "local_hash")) == last_local) {
			first_tail = simc_u64(json_object_get(b, "hash"));
		}
	}
	assert_true(first_tail != 0);
	json_decref(t);
}

static void
check_tree_dump(const json_t *v, int pod, int rank, const char *last)
{
	json_t *dump = json_object_get(v, "TreeDump");
	assert_non_null(dump);
	json_t *last_id = json_object_get(dump, "last_event_id");
	if (last == NULL) {
		assert_true(json_is_null(last_id));
	} else {
		assert_int_equal(json_integer_value(last_id), atoi(last));
	}
	char path[64];
	snprintf(path, sizeof(path), "/truth?pod=%d&rank=%d", pod, rank);
	json_t *truth = simc_http(&A, "GET", path, NULL, 200);
	json_t *blocks = json_object_get(truth, "blocks");
	json_t *events = json_object_get(dump, "events");
	size_t n = json_array_size(events);
	assert_int_equal(n, json_array_size(blocks));
	for (size_t i = 0; i < n; i++) {
		json_t *re = json_array_get(events, i);
		assert_int_equal(simc_int(re, "worker_id"), pod);
		assert_string_equal(
		    json_string_value(json_object_get(re, "storage_tier")),
		    "Device");
		json_t *ev = json_object_get(re, "event");
		assert_int_equal(simc_int(ev, "dp_rank"), rank);
		json_t *st =
		    json_object_get(json_object_get(ev, "data"), "stored");
		json_t *blk = json_array_get(json_object_get(st, "blocks"), 0);
		uint64_t h = simc_u64(json_object_get(blk, "block_hash"));
		json_t *parent = json_object_get(st, "parent_hash");
		bool found = false, parent_before = json_is_null(parent);
		for (size_t j = 0; j < n; j++) {
			json_t *tb = json_array_get(blocks, j);
			if (simc_u64(json_object_get(tb, "hash")) == h) {
				found = true;
				assert_true(simc_u64(json_object_get(
						blk, "tokens_hash")) ==
					    simc_u64(json_object_get(
						tb, "local_hash")));
			}
		}
		for (size_t j = 0; j < i && !parent_before; j++) {
			json_t *pe = json_object_get(
			    json_object_get(
				json_object_get(json_array_get(events, j),
						"event"),
				"data"),
			    "stored");
			json_t *pb =
			    json_array_get(json_object_get(pe, "blocks"), 0);
			parent_before =
			    simc_u64(json_object_get(pb, "block_hash")) ==
			    simc_u64(parent);
		}
		assert_true(found);
		assert_true(parent_before);
	}
	json_decref(truth);
}

static void
test_kv_recover(void **state)
{
	(void)state;
	int idx = 1;
	/* The log holds the last 3 batches: seqs 1..3. */
	json_t *v = simc_recover(&A, idx, "?start=2&end=3", 200);
	json_t *evs = json_object_get(v, "Events");
	assert_non_null(evs);
	assert_int_equal(simc_int(evs, "last_event_id"), 3);
	json_t *list = json_object_get(evs, "events");
	assert_int_equal(json_array_size(list), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *re = json_array_get(list, i);
		json_t *ev = json_object_get(re, "event");
		assert_int_equal(simc_int(re, "worker_id"), 0);
		assert_int_equal(simc_int(ev, "event_id"), (int)i + 2);
		assert_int_equal(simc_int(ev, "dp_rank"), 1);
		json_t *st =
		    json_object_get(json_object_get(ev, "data"), "stored");
		assert_true(json_is_null(json_object_get(st, "parent_hash")));
		assert_int_equal(json_array_size(json_object_get(st, "blocks")),
				 2);
	}
	json_decref(v);

	v = simc_recover(&A, idx, "?start=1&end=100", 200);
	evs = json_object_get(v, "Events");
	assert_int_equal(simc_int(evs, "last_event_id"), 3);
	json_t *first = json_object_get(
	    json_object_get(json_array_get(json_object_get(evs, "events"), 0),
			    "event"),
	    "data");
	json_t *st = json_object_get(first, "stored");
	assert_true(simc_u64(json_object_get(st, "parent_hash")) == first_tail);
	json_decref(v);

	v = simc_recover(&A, idx, "", 200);
	check_tree_dump(v, 0, 1, "3");
	json_decref(v);
	v = simc_recover(&A, idx, "?start=0&end=3",
			 200); /* seq 0 left the log */
	check_tree_dump(v, 0, 1, "3");
	json_decref(v);

	v = simc_recover(&A, idx, "?start=4&end=9", 200);
	json_t *tn = json_object_get(v, "TooNew");
	assert_non_null(tn);
	assert_int_equal(simc_int(tn, "requested_start"), 4);
	assert_int_equal(simc_int(tn, "requested_end"), 9);
	assert_int_equal(simc_int(tn, "newest_available"), 3);
	json_decref(v);

	v = simc_recover(&A, idx, "?start=3&end=2", 200);
	json_t *ir = json_object_get(v, "InvalidRange");
	assert_non_null(ir);
	assert_int_equal(simc_int(ir, "start_id"), 3);
	assert_int_equal(simc_int(ir, "end_id"), 2);
	json_decref(v);

	v = simc_recover(&A, idx, "?start=1", 400);
	assert_non_null(json_object_get(v, "Error"));
	json_decref(v);

	/* A rank that published nothing. */
	v = simc_recover(&A, 0, "?start=0&end=0", 200);
	tn = json_object_get(v, "TooNew");
	assert_true(json_is_null(json_object_get(tn, "newest_available")));
	json_decref(v);
	v = simc_recover(&A, 0, "", 200);
	check_tree_dump(v, 0, 0, NULL);
	json_decref(v);
}

static void
test_forced_recover_answers(void **state)
{
	(void)state;
	int idx = 1;
	simc_post(&A, "/fault/recover",
		  json_pack("{s:i,s:i,s:s,s:i}", "pod", 0, "rank", 1, "mode",
			    "error", "count", 1));
	json_t *v = simc_recover(&A, idx, "?start=2&end=3", 500);
	assert_true(json_is_string(json_object_get(v, "Error")));
	json_decref(v);
	simc_post(&A, "/fault/recover",
		  json_pack("{s:i,s:i,s:s,s:i}", "pod", 0, "rank", 1, "mode",
			    "too_new", "count", 2));
	for (int i = 0; i < 2; i++) {
		v = simc_recover(&A, idx, "?start=2&end=3", 200);
		assert_non_null(json_object_get(v, "TooNew"));
		json_decref(v);
	}
	simc_post(&A, "/fault/recover",
		  json_pack("{s:i,s:i,s:s}", "pod", 0, "rank", 1, "mode",
			    "tree_dump"));
	v = simc_recover(&A, idx, "?start=2&end=3", 200);
	check_tree_dump(v, 0, 1, "3");
	json_decref(v);
	simc_post(&A, "/fault/recover",
		  json_pack("{s:i,s:i,s:s}", "pod", 0, "rank", 1, "mode",
			    "invalid_range"));
	v = simc_recover(&A, idx, "?start=2&end=3", 200);
	assert_non_null(json_object_get(v, "InvalidRange"));
	json_decref(v);
	/* Back to normal. */
	v = simc_recover(&A, idx, "?start=2&end=3", 200);
	assert_non_null(json_object_get(v, "Events"));
	json_decref(v);

	/* hang: no answer within the client's timeout. */
	simc_post(
	    &A, "/fault/recover",
	    json_pack("{s:i,s:i,s:s}", "pod", 0, "rank", 1, "mode", "hang"));
	char url[128];
	kvt_http_resp r;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/kv_recover",
		 A.sim.recover_port[idx]);
	assert_int_equal(kvt_http_get(url, 300, &r), KVI_ETIMEDOUT);
	v = simc_recover(&A, idx, "?start=2&end=3", 200);
	assert_non_null(json_object_get(v, "Events"));
	json_decref(v);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_publish_four_batches),
	    cmocka_unit_test(test_kv_recover),
	    cmocka_unit_test(test_forced_recover_answers),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
