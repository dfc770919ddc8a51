/*
 * test_coord_truth.c - the whole cluster against the simulator's ground
 * truth. A DP=2 fleet serves part of the Mooncake conversation trace with
 * a small GPU cache (evictions) and a CPU tier; once the load is done,
 * every rank's listener, on whichever of the two shards owns it, must
 * hold exactly the rank's block set, and /query for 1,000 trace requests
 * must equal a brute-force scan of the truth: the same listeners, with
 * the same matched blocks per tier. With "top_k": 2 the answer must be
 * the first two of that scan in the order of docs/api.md#post-query (ties by
 * instance id and rank), in that order. Every query is also sent in the
 * packed form (docs/api.md#compact-request-bodies), with and without top_k,
 * and its answer must be the JSON form's, byte for byte.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "coord_check.h"
#include "sim_load.h"

#define TRACE   KVI_DATA_DIR "/traces/conversation_trace.jsonl"
#define PODS    3
#define DP      2
#define QUERIES 1000
#define MAX_EXP (PODS * DP)
#define TOP_K   2

/* best_first orders expected matches as top_k does (docs/api.md#post-query):
 * longest, gpu descending; instance id, rank ascending. */
static int
best_first(const void *pa, const void *pb)
{
	const clu_expect *a = pa, *b = pb;
	if (a->longest != b->longest) {
		return a->longest > b->longest ? -1 : 1;
	}
	if (a->gpu != b->gpu) {
		return a->gpu > b->gpu ? -1 : 1;
	}
	uint64_t ia = clu_instance_id(a->pod), ib = clu_instance_id(b->pod);
	if (ia != ib) {
		return ia < ib ? -1 : 1;
	}
	return a->rank - b->rank;
}

/* check_packed asks the query again in the packed form, with params,
 * and compares its answer's text with the JSON form's answer, ans. */
static void
check_packed(cluster *c, const uint32_t *tokens, uint32_t nb, const json_t *ans,
	     const char *params)
{
	char *packed = clu_query_packed(c, tokens, (size_t)nb * 16, params);
	char *text = json_dumps(ans, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_t *pj = kvt_json_loads(packed, strlen(packed));
	char *ptext = json_dumps(pj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (strcmp(text, ptext) != 0) {
		fail_msg("packed query (%u blocks, %s): %s; JSON form %s", nb,
			 params ? params : "full", packed, text);
	}
	free(ptext);
	free(text);
	json_decref(pj);
	kvi_free(packed);
}

/* check_top_k asks the query again with top_k and compares the answer
 * with the best TOP_K of exp, in order. */
static void
check_top_k(cluster *c, const uint32_t *tokens, uint32_t nb, clu_expect *exp,
	    int ne)
{
	qsort(exp, (size_t)ne, sizeof(*exp), best_first);
	int k = ne < TOP_K ? ne : TOP_K;
	json_t *ans = clu_query(c, tokens, (size_t)nb * 16, "\"top_k\": 2");
	check_packed(c, tokens, nb, ans, "top_k=2");
	char why[512];
	if (!clu_check_answer(ans, exp, k, why, sizeof(why))) {
		char *d = json_dumps(ans, JSON_COMPACT);
		fail_msg("top_k query (%u blocks): %s; answer %s", nb, why, d);
	}
	json_t *ws = json_object_get(ans, "workers");
	for (int i = 0; i < k; i++) {
		json_t *w = json_array_get(ws, (size_t)i);
		char pod[32];
		snprintf(pod, sizeof(pod), "sim/pod-%d", exp[i].pod);
		assert_string_equal(
		    json_string_value(json_object_get(w, "pod")), pod);
		assert_int_equal(
		    json_integer_value(json_object_get(w, "dp_rank")),
		    exp[i].rank);
	}
	assert_int_equal(json_object_size(json_object_get(ans, "scores")) > 0,
			 k > 0);
	json_decref(ans);
}

/* shard_of returns the shard /workers says owns rank idx. */
static shardproc *
shard_of(cluster *c, int idx)
{
	return clu_shard_of(c, idx / DP, idx % DP);
}

static void
test_index_and_queries_equal_truth(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods",       "3",    "--dp",           "2",
			     "--trace",      TRACE,  "--requests",     "1500",
			     "--rate",       "0",    "--cache-blocks", "600",
			     "--cpu-blocks", "3000", "--paused",       NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, true, NULL);
	/* an empty engine's listener is active once its shard caught up */
	clu_wait_active(c, PODS * DP, CLU_WAIT_MS);
	json_decref(clu_sim_post(c, "/resume", "{}"));
	assert_true(kvt_wait_until(clu_sim_load_done, c, 120000));

	/* the index equals the truth, rank by rank, on both shards */
	int owned[CLU_MAX_SHARDS] = {0};
	for (int idx = 0; idx < PODS * DP; idx++) {
		shardproc *s = shard_of(c, idx);
		owned[s - c->shards]++;
		shc_wait_truth(s, &c->sim, &idx, 1, CLU_WAIT_MS);
	}
	assert_true(owned[0] > 0 && owned[1] > 0);

	/* 1,000 trace requests: /query equals a scan of the truth */
	clu_truth *truth = clu_truth_get(c);
	sim_load_config lc = {.trace_path = TRACE,
			      .block_size = 16,
			      .blocks_per_id = 1,
			      .copies = 1,
			      .requests = QUERIES};
	sim_load *load;
	char err[256];
	assert_int_equal(sim_load_open(&lc, &load, err, sizeof(err)), KVI_OK);
	const uint32_t *tokens;
	uint32_t nb;
	int queries = 0, matched = 0, tiered = 0;
	while (sim_load_next(load, &tokens, &nb)) {
		uint64_t *seq = kvi_calloc((size_t)nb + 1, sizeof(*seq));
		size_t n = clu_seq_hashes(tokens, (size_t)nb * 16, seq);
		clu_expect exp[MAX_EXP];
		int ne = clu_truth_match(truth, seq, n, exp);
		json_t *ans = clu_query(c, tokens, (size_t)nb * 16, NULL);
		char why[512];
		if (!clu_check_answer(ans, exp, ne, why, sizeof(why))) {
			char *d = json_dumps(ans, JSON_COMPACT);
			fail_msg("query %d (%u blocks): %s; answer %s", queries,
				 nb, why, d);
		}
		assert_false(json_is_true(json_object_get(ans, "partial")));
		check_packed(c, tokens, nb, ans, NULL);
		check_top_k(c, tokens, nb, exp, ne);
		matched += ne > 0;
		for (int e = 0; e < ne; e++) {
			tiered += exp[e].cpu > 0;
		}
		json_decref(ans);
		kvi_free(seq);
		queries++;
	}
	sim_load_free(load);
	clu_truth_free(truth);
	assert_int_equal(queries, QUERIES);
	/* the comparison was not vacuous */
	assert_true(matched > QUERIES / 2);
	assert_true(tiered > 0);
	print_message("%d queries, %d matched, %d cpu-tier matches\n", queries,
		      matched, tiered);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_index_and_queries_equal_truth,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
