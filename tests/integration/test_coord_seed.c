/*
 * test_coord_seed.c - the failure kvindex exists to fix (seeds/): on an
 * engine run with --data-parallel-size 2, a prefill that ran on rank 1
 * must be found on rank 1. Three DP=2 pods from the simulator, two real
 * shards and the coordinator reading the simulator's layout as its
 * discovery file. Then the same fleet seen with --watch-dp-size 1 and no
 * per-pod dp_size, where rank-1 prefills are invisible: the behaviour of
 * an indexer that subscribes to rank 0 only.
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

#define PODS 3
#define DP   2
#define NTOK 64 /* four blocks */

static const char *const sim_flags[] = {"--pods", "3", "--dp", "2", NULL};

static void
make_tokens(uint32_t *t, uint32_t seed)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = seed * 1000u + i + 1;
	}
}

static const json_t *
best_of(const json_t *ans)
{
	const json_t *b = json_object_get(ans, "best");
	return json_is_object(b) ? b : NULL;
}

/* wait_best waits until /query for tokens names (pod, rank) as best with
 * every block matched, and returns the answer. */
static json_t *
wait_best(cluster *c, const uint32_t *tokens, int pod, int rank)
{
	char want[32];
	snprintf(want, sizeof(want), "sim/pod-%d", pod);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ans = clu_query(c, tokens, NTOK, NULL);
		const json_t *b = best_of(ans);
		if (b != NULL &&
		    strcmp(json_string_value(json_object_get(b, "pod")),
			   want) == 0 &&
		    json_integer_value(json_object_get(b, "dp_rank")) == rank &&
		    json_integer_value(json_object_get(b, "matched_tokens")) ==
			NTOK) {
			return ans;
		}
		if (kvt_now_ms() > deadline) {
			char *d = json_dumps(ans, JSON_COMPACT);
			fail_msg("wanted best %s rank %d: %s", want, rank, d);
		}
		json_decref(ans);
		kvt_sleep_ms(50);
	}
}

static void
check_workers(cluster *c)
{
	long st;
	json_t *ws = clu_get(c, "/workers", &st);
	assert_int_equal(st, 200);
	assert_int_equal(json_array_size(ws), PODS);
	for (int p = 0; p < PODS; p++) {
		char name[32];
		snprintf(name, sizeof(name), "sim/pod-%d", p);
		json_t *pod = NULL, *w;
		size_t i;
		json_array_foreach(ws, i, w)
		{
			if (strcmp(
				json_string_value(json_object_get(w, "name")),
				name) == 0) {
				pod = w;
			}
		}
		assert_non_null(pod);
		assert_string_equal(
		    json_string_value(json_object_get(pod, "source")), "file");
		assert_string_equal(
		    json_string_value(json_object_get(pod, "status")),
		    "active");
		json_t *ls = json_object_get(pod, "listeners");
		assert_int_equal(json_object_size(ls), DP);
		for (int r = 0; r < DP; r++) {
			char key[8], ep[64], rec[64];
			snprintf(key, sizeof(key), "%d", r);
			json_t *l = json_object_get(ls, key);
			assert_non_null(l);
			/* rank r on zmq_port + r, recover_port + r */
			snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d",
				 c->sim.zmq_port[p * DP] + r);
			snprintf(rec, sizeof(rec), "http://127.0.0.1:%d",
				 c->sim.recover_port[p * DP] + r);
			assert_string_equal(
			    json_string_value(json_object_get(l, "endpoint")),
			    ep);
			assert_string_equal(json_string_value(json_object_get(
						l, "recover_endpoint")),
					    rec);
			assert_string_equal(
			    json_string_value(json_object_get(l, "status")),
			    "active");
			const char *sh =
			    json_string_value(json_object_get(l, "shard"));
			assert_non_null(sh);
			assert_true(strcmp(sh, "shard-0") == 0 ||
				    strcmp(sh, "shard-1") == 0);
			assert_true(json_integer_value(
					json_object_get(l, "blocks")) > 0);
			assert_true(
			    json_is_integer(json_object_get(l, "last_seq")));
		}
	}
	json_decref(ws);
}

static void
test_dp2_every_rank_visible(void **state)
{
	cluster *c = *state;
	clu_sim(c, sim_flags);
	clu_shards(c, 2);
	clu_coord(c, true, NULL);

	/* a prefill on every rank, so that every listener is active */
	uint32_t t[NTOK];
	for (int i = 0; i < PODS * DP; i++) {
		make_tokens(t, 100 + (uint32_t)i);
		clu_prefill(c, i / DP, i % DP, t, NTOK);
	}
	clu_wait_active(c, PODS * DP, CLU_WAIT_MS);
	check_workers(c);

	/* prefills placed on rank 1 only are matched on that pod's rank 1 */
	for (int p = 0; p < PODS; p++) {
		make_tokens(t, 200 + (uint32_t)p);
		clu_prefill(c, p, 1, t, NTOK);
		json_t *ans = wait_best(c, t, p, 1);
		/* nobody else holds it */
		assert_int_equal(
		    json_array_size(json_object_get(ans, "workers")), 1);
		json_decref(ans);
		/* restricted to rank 0 of that pod: no match */
		char extra[96];
		snprintf(extra, sizeof(extra),
			 "\"instances\":[%" PRIu64 "],\"dp_rank\":0",
			 clu_instance_id(p));
		ans = clu_query(c, t, NTOK, extra);
		assert_true(json_is_null(json_object_get(ans, "best")));
		json_decref(ans);
	}

	/* every prefill matches, whichever rank ran it */
	for (int k = 0; k < 24; k++) {
		int pod = (k * 7) % PODS, rank = (k * 5 + k / 3) % DP;
		make_tokens(t, 300 + (uint32_t)k);
		clu_prefill(c, pod, rank, t, NTOK);
		json_decref(wait_best(c, t, pod, rank));
	}
}

/* write_dp1_file writes the simulator's layout without per-pod dp_size. */
static char *
write_dp1_file(cluster *c)
{
	json_t *layout = json_deep_copy(c->sim.layout);
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(layout, "pods"), i, p)
	{
		json_object_del(p, "dp_size");
	}
	char *path = kvt_path(c->sim.dir, "dp1.json");
	assert_int_equal(json_dump_file(layout, path, 0), 0);
	json_decref(layout);
	return path;
}

static void
test_dp1_misses_rank1(void **state)
{
	cluster *c = *state;
	clu_sim(c, sim_flags);
	clu_shards(c, 2);
	char *file = write_dp1_file(c);
	const char *extra[] = {"--discovery-file", file, "--watch-dp-size", "1",
			       NULL};
	clu_coord(c, false, extra);

	uint32_t t[NTOK];
	for (int p = 0; p < PODS; p++) {
		make_tokens(t, 400 + (uint32_t)p);
		clu_prefill(c, p, 0, t, NTOK);
	}
	/* one listener per pod: rank 0 only */
	clu_wait_active(c, PODS, CLU_WAIT_MS);
	for (int p = 0; p < PODS; p++) {
		make_tokens(t, 400 + (uint32_t)p);
		json_decref(wait_best(c, t, p, 0));
	}
	/* rank-1 prefills are invisible: the failure the DP ranks fix */
	for (int p = 0; p < PODS; p++) {
		make_tokens(t, 500 + (uint32_t)p);
		clu_prefill(c, p, 1, t, NTOK);
	}
	/* a marker prefill on rank 0 after them: once it is seen, the
	 * rank-1 batches (published before it) would have been too */
	make_tokens(t, 599);
	clu_prefill(c, 0, 0, t, NTOK);
	json_decref(wait_best(c, t, 0, 0));
	for (int p = 0; p < PODS; p++) {
		make_tokens(t, 500 + (uint32_t)p);
		json_t *ans = clu_query(c, t, NTOK, NULL);
		assert_true(json_is_null(json_object_get(ans, "best")));
		assert_int_equal(
		    json_array_size(json_object_get(ans, "workers")), 0);
		json_decref(ans);
	}
	kvi_free(file);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_dp2_every_rank_visible,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_dp1_misses_rank1,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
