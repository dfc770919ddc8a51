/*
 * test_topk.c - top_k (docs/api.md#post-query): the request field, the shard's
 * selection and the coordinator's answer.
 *
 * top_k is read from /query and /query_by_hash bodies (valid values,
 * null, 0, too large, a string, a real); the shard's bounded heap keeps
 * exactly the k best of random matches under the coordinator's order
 * (checked against a full sort, with ties on every key); and an answer
 * with top_k lists only those k in workers, scores and instances, in the
 * same order an answer without top_k starts with.
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

#include "api_query.h"
#include "qanswer.h"
#include "topk.h"

/* ---- the request field --------------------------------------------------- */

static uint32_t
parse_top_k(const char *body)
{
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(kvc_api_query_parse(body, strlen(body), 64, &q, &e),
			 KVI_OK);
	uint32_t k = q.top_k;
	kvc_qreq_fini(&q);
	return k;
}

static void
top_k_fails(const char *body, const char *msg)
{
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_not_equal(
	    kvc_api_query_parse(body, strlen(body), 64, &q, &e), KVI_OK);
	assert_int_equal(e.status, 400);
	assert_string_equal(e.message, msg);
	kvc_qerr_fini(&e);
}

static void
test_parse(void **state)
{
	(void)state;
	assert_int_equal(
	    parse_top_k("{\"model_name\":\"m\",\"token_ids\":[1],\"top_k\":8}"),
	    8);
	assert_int_equal(
	    parse_top_k("{\"top_k\": 1048576, \"model_name\":\"m\","
			"\"token_ids\":[]}"),
	    KVC_QREQ_TOP_K_MAX);
	assert_int_equal(
	    parse_top_k(
		"{\"model_name\":\"m\",\"token_ids\":[1],\"top_k\":null}"),
	    0);
	assert_int_equal(
	    parse_top_k("{\"model_name\":\"m\",\"token_ids\":[1]}"), 0);
	top_k_fails("{\"model_name\":\"m\",\"token_ids\":[1],\"top_k\":0}",
		    "top_k 0 is not in 1..1048576");
	top_k_fails(
	    "{\"model_name\":\"m\",\"token_ids\":[1],\"top_k\":1048577}",
	    "top_k 1048577 is not in 1..1048576");
	top_k_fails("{\"model_name\":\"m\",\"token_ids\":[1],\"top_k\":\"8\"}",
		    "top_k must be an integer, got \"8\"");
	top_k_fails("{\"model_name\":\"m\",\"token_ids\":[1],\"top_k\":2.5}",
		    "top_k must be an integer, got 2.5");
	/* /query_by_hash reads it too */
	const char *h =
	    "{\"model_name\":\"m\",\"block_hashes\":[1],\"top_k\":3}";
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(kvc_api_hash_query_parse(h, strlen(h), 8, &q, &e),
			 KVI_OK);
	assert_int_equal(q.top_k, 3);
	kvc_qreq_fini(&q);
}

/* ---- the shard's selection ----------------------------------------------- */

static int
cmp_entries(const void *a, const void *b)
{
	return kvh_topk_cmp(a, b);
}

static kvh_topk_entry
random_entry(void)
{
	/* few distinct values, so that ties reach every key */
	uint32_t gpu = (uint32_t)rand() % 4, cpu = (uint32_t)rand() % 3;
	return (kvh_topk_entry){
	    .instance_id = (uint64_t)(rand() % 5),
	    .dp_rank = (uint32_t)rand() % 4,
	    .gpu = gpu,
	    .cpu = cpu,
	    .disk = 0,
	    .longest = gpu + cpu,
	};
}

static void
test_heap_keeps_the_best(void **state)
{
	(void)state;
	srand(7);
	for (int round = 0; round < 300; round++) {
		size_t n = (size_t)rand() % 200, k = 1 + (size_t)rand() % 40;
		kvh_topk_entry *all = calloc(n + 1, sizeof(*all));
		kvp_arena a;
		kvp_arena_init(&a);
		kvh_topk t;
		kvh_topk_init(&t, k, &a);
		for (size_t i = 0; i < n; i++) {
			all[i] = random_entry();
			kvh_topk_add(&t, &all[i]);
		}
		qsort(all, n, sizeof(*all), cmp_entries);
		size_t want = n < k ? n : k;
		assert_int_equal(t.n, want);
		qsort(t.e, t.n, sizeof(*t.e), cmp_entries);
		for (size_t i = 0; i < want; i++) {
			/* equal under the order: the same numbers */
			assert_int_equal(kvh_topk_cmp(&t.e[i], &all[i]), 0);
		}
		kvp_arena_fini(&a);
		free(all);
	}
}

/* ---- the coordinator's answer -------------------------------------------- */

static const kvc_qanswer_match fixture[] = {
    {"ns/a#0", 7, "ns/a", 0, 0, 3, 4, 7},
    {"ns/c#1", 3, "ns/c", 1, 0, 3, 4, 7},
    {"ns/a#1", 7, "ns/a", 1, 10, 2, 0, 12},
    {"x#0", 9, NULL, 0, 12, 0, 0, 12},
    {"ns/c#0", 3, "ns/c", 0, 0, 0, 0, 0},
    {"x#1", 9, NULL, 1, 12, 0, 0, 12},
    {"ns/a#1", 7, "ns/a", 1, 10, 2, 0, 12}, /* a second shard's copy */
};
#define N_FIXTURE (sizeof(fixture) / sizeof(fixture[0]))

static json_t *
answer(uint32_t top_k)
{
	kvc_qanswer_result r = {.model = "m",
				.block_size = 16,
				.query_blocks = 12,
				.matches = fixture,
				.n_matches = N_FIXTURE,
				.top_k = top_k,
				.shards_answered = 2,
				.shards_total = 2};
	return kvc_qanswer_json(&r);
}

static void
test_answer(void **state)
{
	(void)state;
	json_t *all = answer(0), *three = answer(3), *big = answer(100);
	json_t *wa = json_object_get(all, "workers");
	json_t *w3 = json_object_get(three, "workers");
	assert_int_equal(json_array_size(wa), 5);
	assert_int_equal(json_array_size(w3), 3);
	for (size_t i = 0; i < 3; i++) {
		assert_true(
		    json_equal(json_array_get(wa, i), json_array_get(w3, i)));
	}
	/* 7#1 (gpu 10) after 9#0 and 9#1 (gpu 12) */
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(w3, 2), "instance_id")),
			    "7");
	char *s = json_dumps(json_object_get(three, "scores"),
			     JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s,
			    "{\"7\":{\"1\":192},\"9\":{\"0\":192,\"1\":192}}");
	free(s);
	s = json_dumps(json_object_get(three, "instances"),
		       JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(
	    s, "{\"7\":{\"cpu\":32,\"disk\":0,\"dp\":{\"1\":192},\"gpu\":160,"
	       "\"longest_matched\":192},\"9\":{\"cpu\":0,\"disk\":0,\"dp\":{"
	       "\"0\":192,\"1\":192},\"gpu\":192,\"longest_matched\":192}}");
	free(s);
	assert_true(json_equal(json_object_get(three, "best"),
			       json_object_get(all, "best")));
	/* a k above the matches changes nothing */
	assert_true(json_equal(all, big));
	json_decref(all);
	json_decref(three);
	json_decref(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_heap_keeps_the_best),
	    cmocka_unit_test(test_answer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
