/*
 * test_api_response.c - the /query response (docs/api.md#post-query) built from
 * matches of 3 instances x 2 ranks with a listener reported twice (as during a
 * hand-off) and listeners that matched nothing.
 *
 * Bodies are written with ' for " (see J()).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_fixture.h"
#include "qanswer.h"

/* ---- the /query response ------------------------------------------------- */

#define BIG UINT64_MAX

/* 3 instances x 2 ranks (and a third rank of instance 7), as 3 shards
 * report them: 3#1 twice (a hand-off; the shorter report first), 7#1
 * twice alike, and 3#0, 7#2, BIG#... none with zero blocks matched. */
static const kvc_qanswer_match fixture[] = {
    {"ns/a#0", 7, "ns/a", 0, 0, 3, 4, 7},
    {"ns/c#1", 3, "ns/c", 1, 0, 4, 0, 4}, /* the stale copy of ns/c#1 */
    {"ns/a#1", 7, "ns/a", 1, 10, 2, 0, 12},
    {"BIG#0", BIG, NULL, 0, 12, 0, 0, 12},
    {"ns/c#0", 3, "ns/c", 0, 0, 0, 0, 0},
    {"BIG#1", BIG, "", 1, 12, 0, 0, 12},
    {"ns/c#1", 3, "ns/c", 1, 0, 3, 4, 7},
    {"ns/a#1", 7, "ns/a", 1, 10, 2, 0, 12},
    {"ns/a#2", 7, "ns/a", 2, 0, 0, 0, 0},
};
#define N_FIXTURE (sizeof(fixture) / sizeof(fixture[0]))

static json_t *
build(const kvc_qanswer_match *m, size_t n, uint32_t answered)
{
	kvc_qanswer_result r = {.model = "m",
				.block_size = 16,
				.query_blocks = 12,
				.matches = m,
				.n_matches = n,
				.shards_answered = answered,
				.shards_total = 4};
	return kvc_qanswer_json(&r);
}

static void
assert_json(const json_t *got, const char *want)
{
	json_error_t je;
	json_t *w = json_loads(J(want), 0, &je);
	if (w == NULL) {
		fail_msg("bad expectation: %s", je.text);
	}
	if (!json_equal(got, w)) {
		char *g = json_dumps(got, JSON_COMPACT);
		char *x = json_dumps(w, JSON_COMPACT);
		fail_msg("got  %s\nwant %s", g, x);
	}
	json_decref(w);
}

static void
test_response_scores_and_instances(void **state)
{
	(void)state;
	json_t *o = build(fixture, N_FIXTURE, 3);
	assert_json(json_object_get(o, "scores"),
		    "{'18446744073709551615': {'0': 192, '1': 192},"
		    " '7': {'1': 192, '0': 112}, '3': {'1': 112}}");
	assert_json(json_object_get(o, "instances"),
		    "{'18446744073709551615': {'longest_matched': 192,"
		    "   'gpu': 192, 'cpu': 0, 'disk': 0,"
		    "   'dp': {'0': 192, '1': 192}},"
		    " '7': {'longest_matched': 192, 'gpu': 160, 'cpu': 32,"
		    "   'disk': 0, 'dp': {'1': 192, '0': 112}},"
		    " '3': {'longest_matched': 112, 'gpu': 0, 'cpu': 48,"
		    "   'disk': 64, 'dp': {'1': 112}}}");
	assert_json(json_object_get(o, "frequencies"), "[]");
	assert_string_equal(json_string_value(json_object_get(o, "model_name")),
			    "m");
	assert_int_equal(json_integer_value(json_object_get(o, "block_size")),
			 16);
	assert_int_equal(json_integer_value(json_object_get(o, "query_blocks")),
			 12);
	json_decref(o);
}

static void
test_response_workers_best_partial(void **state)
{
	(void)state;
	json_t *o = build(fixture, N_FIXTURE, 3);
	/* longest desc, gpu desc, instance asc, rank asc */
	assert_json(
	    json_object_get(o, "workers"),
	    "[{'instance_id': '18446744073709551615', 'pod': null,"
	    "  'dp_rank': 0, 'matched_blocks': 12, 'matched_tokens': 192,"
	    "  'gpu': 192, 'cpu': 0, 'disk': 0,"
	    "  'pending_blocks': 0, 'pending_tokens': 0},"
	    " {'instance_id': '18446744073709551615', 'pod': null,"
	    "  'dp_rank': 1, 'matched_blocks': 12, 'matched_tokens': 192,"
	    "  'gpu': 192, 'cpu': 0, 'disk': 0,"
	    "  'pending_blocks': 0, 'pending_tokens': 0},"
	    " {'instance_id': '7', 'pod': 'ns/a', 'dp_rank': 1,"
	    "  'matched_blocks': 12, 'matched_tokens': 192,"
	    "  'gpu': 160, 'cpu': 32, 'disk': 0,"
	    "  'pending_blocks': 0, 'pending_tokens': 0},"
	    " {'instance_id': '3', 'pod': 'ns/c', 'dp_rank': 1,"
	    "  'matched_blocks': 7, 'matched_tokens': 112,"
	    "  'gpu': 0, 'cpu': 48, 'disk': 64,"
	    "  'pending_blocks': 0, 'pending_tokens': 0},"
	    " {'instance_id': '7', 'pod': 'ns/a', 'dp_rank': 0,"
	    "  'matched_blocks': 7, 'matched_tokens': 112,"
	    "  'gpu': 0, 'cpu': 48, 'disk': 64,"
	    "  'pending_blocks': 0, 'pending_tokens': 0}]");
	assert_json(
	    json_object_get(o, "best"),
	    "{'instance_id': '18446744073709551615', 'pod': null,"
	    " 'dp_rank': 0, 'matched_tokens': 192, 'pending_tokens': 0}");
	assert_true(json_is_true(json_object_get(o, "partial")));
	assert_json(json_object_get(o, "shards"),
		    "{'answered': 3, 'total': 4, 'stale': []}");
	assert_true(json_is_false(json_object_get(o, "stale")));
	json_decref(o);

	o = build(fixture, N_FIXTURE, 4);
	assert_true(json_is_false(json_object_get(o, "partial")));
	json_decref(o);

	/* answers from shards whose store cannot commit are named */
	const char *stale[] = {"shard-1", "shard-2"};
	kvc_qanswer_result r = {.model = "m",
				.block_size = 16,
				.matches = fixture,
				.n_matches = N_FIXTURE,
				.shards_answered = 4,
				.shards_total = 4,
				.stale = stale,
				.n_stale = 2};
	o = kvc_qanswer_json(&r);
	assert_true(json_is_false(json_object_get(o, "partial")));
	assert_true(json_is_true(json_object_get(o, "stale")));
	assert_json(json_object_get(o, "shards"),
		    "{'answered': 4, 'total': 4,"
		    " 'stale': ['shard-1', 'shard-2']}");
	json_decref(o);
}

/* Pending entries: a rank with only pending blocks is a worker (and may be
 * best: held plus pending ranks it), never in the compatible fields. */
static void
test_response_pending(void **state)
{
	(void)state;
	const kvc_qanswer_match m[] = {
	    {"ns/a#0", 7, "ns/a", 0, 4, 0, 0, 4, 0},
	    {"ns/a#1", 7, "ns/a", 1, 0, 0, 0, 0, 10},
	    {"ns/c#0", 3, "ns/c", 0, 0, 0, 0, 0, 3},
	    {"ns/c#1", 3, "ns/c", 1, 2, 0, 0, 2, 3},
	};
	json_t *o = build(m, 4, 4);
	assert_json(json_object_get(o, "scores"),
		    "{'7': {'0': 64}, '3': {'1': 32}}");
	assert_json(json_object_get(o, "instances"),
		    "{'7': {'longest_matched': 64, 'gpu': 64, 'cpu': 0,"
		    "   'disk': 0, 'dp': {'0': 64}},"
		    " '3': {'longest_matched': 32, 'gpu': 32, 'cpu': 0,"
		    "   'disk': 0, 'dp': {'1': 32}}}");
	json_t *w = json_object_get(o, "workers");
	assert_int_equal(json_array_size(w), 4);
	const char *order[][2] = {
	    {"ns/a", "1"}, {"ns/c", "1"}, {"ns/a", "0"}, {"ns/c", "0"}};
	for (size_t i = 0; i < 4; i++) {
		json_t *x = json_array_get(w, i);
		assert_string_equal(
		    json_string_value(json_object_get(x, "pod")), order[i][0]);
		assert_int_equal(
		    json_integer_value(json_object_get(x, "dp_rank")),
		    atoi(order[i][1]));
	}
	assert_json(json_object_get(o, "best"),
		    "{'instance_id': '7', 'pod': 'ns/a', 'dp_rank': 1,"
		    " 'matched_tokens': 0, 'pending_tokens': 160}");
	json_decref(o);
}

static void
test_response_order_independent(void **state)
{
	(void)state;
	json_t *want = build(fixture, N_FIXTURE, 3);
	kvc_qanswer_match m[N_FIXTURE];
	for (size_t round = 0; round < 50; round++) {
		memcpy(m, fixture, sizeof(m));
		for (size_t i = N_FIXTURE - 1; i > 0; i--) {
			size_t k = (size_t)rand() % (i + 1);
			kvc_qanswer_match t = m[i];
			m[i] = m[k];
			m[k] = t;
		}
		json_t *got = build(m, N_FIXTURE, 3);
		assert_true(json_equal(got, want));
		json_decref(got);
	}
	json_decref(want);
}

static void
test_response_no_match(void **state)
{
	(void)state;
	/* only zero-match listeners: an empty answer, best null */
	json_t *o = build(&fixture[4], 1, 4);
	assert_json(o, "{'scores': {}, 'instances': {}, 'frequencies': [],"
		       " 'model_name': 'm', 'block_size': 16,"
		       " 'query_blocks': 12, 'workers': [], 'best': null,"
		       " 'partial': false, 'stale': false,"
		       " 'shards': {'answered': 4, 'total': 4, 'stale': []}}");
	json_decref(o);
	o = build(NULL, 0, 0);
	assert_true(json_is_null(json_object_get(o, "best")));
	assert_true(json_is_true(json_object_get(o, "partial")));
	json_decref(o);
}

int
main(void)
{
	srand(7);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_response_scores_and_instances),
	    cmocka_unit_test(test_response_workers_best_partial),
	    cmocka_unit_test(test_response_pending),
	    cmocka_unit_test(test_response_order_independent),
	    cmocka_unit_test(test_response_no_match),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
