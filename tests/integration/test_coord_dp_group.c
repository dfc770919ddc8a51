/*
 * test_coord_dp_group.c - one data-parallel group over several pods, as
 * vLLM runs it with --data-parallel-size-local and
 * --data-parallel-start-rank: the simulator's two pods of DP 2 are one
 * group of four (--dp-group), pod 1 hosting global ranks 2 and 3, each
 * publishing its global rank in its batches on the group's base port plus
 * that rank. The discovery file says so with dp_start_rank.
 *
 * The coordinator makes listeners sim/pod-1#2 and #3 on those ports; a
 * prompt prefilled on each rank is answered under its global rank - in
 * workers, scores and best - no batch is refused as another rank's, a
 * query pinned to dp_rank 3 names pod 1 alone, and /routed takes pod 1's
 * rank 3 but not its rank 1, which it does not host.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_check.h"

#define NTOK 64

/* blocks_of returns the matched blocks the answer gives (pod, global
 * rank), -1 when it does not list it. */
static long
blocks_of(const json_t *ans, int pod, int rank)
{
	const json_t *w = clu_worker(ans, pod, rank);
	return w != NULL ? (long)json_integer_value(
			       json_object_get(w, "matched_blocks"))
			 : -1;
}

/* score_of returns the compatible score of (pod, rank), -1 when none. */
static long
score_of(const json_t *ans, int pod, int rank)
{
	char id[24], r[16];
	snprintf(id, sizeof(id), "%" PRIu64, clu_instance_id(pod));
	snprintf(r, sizeof(r), "%d", rank);
	const json_t *v = json_object_get(
	    json_object_get(json_object_get(ans, "scores"), id), r);
	return v != NULL ? (long)json_integer_value(v) : -1;
}

static void
test_group_over_pods(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "2", "--dp", "2", "--dp-group", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, true, NULL);
	clu_wait_active(c, 4, CLU_WAIT_MS);
	/* the listeners are the group's global ranks */
	json_t *all = NULL;
	assert_non_null(clu_listener(c, "sim/pod-1", 2, &all));
	json_decref(all);
	assert_non_null(clu_listener(c, "sim/pod-1", 3, &all));
	json_decref(all);
	assert_null(clu_listener(c, "sim/pod-1", 0, &all));
	json_decref(all);

	uint32_t t[4][NTOK];
	for (int g = 0; g < 4; g++) {
		clu_tokens_seeded(t[g], NTOK, 40 + (uint32_t)g);
		clu_prefill(c, g / 2, g % 2, t[g], NTOK);
	}
	for (int g = 0; g < 4; g++) {
		int pod = g / 2;
		int64_t until = kvt_now_ms() + CLU_WAIT_MS;
		for (;;) {
			json_t *ans = clu_query(c, t[g], NTOK, NULL);
			long b = blocks_of(ans, pod, g);
			if (b == NTOK / 16) {
				assert_int_equal(score_of(ans, pod, g), NTOK);
				/* nobody else holds it, under any rank */
				assert_int_equal(
				    json_array_size(
					json_object_get(ans, "workers")),
				    1);
				json_t *best = json_object_get(ans, "best");
				assert_int_equal(
				    json_integer_value(
					json_object_get(best, "dp_rank")),
				    g);
				json_decref(ans);
				break;
			}
			json_decref(ans);
			assert_true(kvt_now_ms() < until);
			kvt_sleep_ms(50);
		}
	}
	/* no batch was taken for another rank's */
	assert_true(clu_metric(c, "kvindex_coord_listeners_misconfigured") ==
		    0);

	/* pinned to global rank 3: pod 1 alone */
	json_t *ans = clu_query(c, t[3], NTOK, "\"dp_rank\": 3");
	assert_int_equal(blocks_of(ans, 1, 3), NTOK / 16);
	json_decref(ans);

	/* /routed: pod 1 hosts ranks 2 and 3, not 1 */
	char *toks = clu_tokens_text(t[0], NTOK);
	size_t cap = strlen(toks) + 200;
	char *body = malloc(cap);
	snprintf(body, cap,
		 "{\"model_name\":\"sim-model\",\"token_ids\":%s,"
		 "\"pod\":\"sim/pod-1\",\"dp_rank\":3}",
		 toks);
	long status = 0;
	json_t *r = clu_post(c, "/routed", body, &status);
	assert_int_equal(status, 202);
	assert_string_equal(json_string_value(json_object_get(r, "listener")),
			    "sim/pod-1#3");
	json_decref(r);
	snprintf(body, cap,
		 "{\"model_name\":\"sim-model\",\"token_ids\":%s,"
		 "\"pod\":\"sim/pod-1\",\"dp_rank\":1}",
		 toks);
	r = clu_post(c, "/routed", body, &status);
	assert_int_equal(status, 404);
	json_decref(r);
	free(body);
	free(toks);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_group_over_pods,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
