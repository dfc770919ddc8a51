/*
 * test_coord_crash.c - kill -9 at seeded random moments, under load: the
 * simulator's DP=2 pods serving the conversation trace with a small cache
 * (stores, evictions, a CPU tier), two shards and the coordinator.
 *
 * Each round waits a random while, then kills shard-0, shard-1, the
 * coordinator, or a shard and the coordinator together with SIGKILL,
 * restarts them after another random while, and once the cluster has
 * settled compares every listener, on the shard that owns it, with its
 * rank's truth - the same block set, tiers and watermark: 0 lost, 0
 * phantom - and a sample of /query answers with a scan of that truth.
 *
 * The seed is printed; KVI_CRASH_SEED replays one. KVI_SOAK=1 runs rounds
 * until KVI_SOAK_SECONDS (default 600) have passed instead of ROUNDS.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "alloc.h"
#include "coord_check.h"
#include "sim_load.h"

#define TRACE   KVI_DATA_DIR "/traces/conversation_trace.jsonl"
#define PODS    2
#define DP      2
#define N       (PODS * DP)
#define ROUNDS  20
#define QUERIES 40

/* check_truth: every listener equals its rank's truth on its owner, and
 * the next QUERIES trace prompts answer as a scan of the truth. Returns
 * how many of them matched something. */
static int
check_truth(cluster *c, sim_load *load, unsigned round)
{
	int matched = 0;
	for (int idx = 0; idx < N; idx++) {
		shardproc *s = clu_shard_of(c, idx / DP, idx % DP);
		assert_non_null(s);
		shc_wait_truth(s, &c->sim, &idx, 1, CLU_WAIT_MS);
	}
	clu_truth *truth = clu_truth_get(c);
	const uint32_t *tokens;
	uint32_t nb;
	for (int q = 0; q < QUERIES && sim_load_next(load, &tokens, &nb); q++) {
		uint64_t *seq = kvi_calloc((size_t)nb + 1, sizeof(*seq));
		size_t n = clu_seq_hashes(tokens, (size_t)nb * 16, seq);
		clu_expect exp[N];
		int ne = clu_truth_match(truth, seq, n, exp);
		/* A shard that missed a poll is left out, and the answer says
		 * partial, until it answers one again: a poll in flight when
		 * it was killed may end after it is back. Settled means
		 * whole. */
		int64_t until = kvt_now_ms() + CLU_WAIT_MS;
		json_t *ans = clu_query(c, tokens, (size_t)nb * 16, NULL);
		while (json_is_true(json_object_get(ans, "partial"))) {
			json_decref(ans);
			assert_true(kvt_now_ms() < until);
			kvt_sleep_ms(20);
			ans = clu_query(c, tokens, (size_t)nb * 16, NULL);
		}
		char why[512];
		if (!clu_check_answer(ans, exp, ne, why, sizeof(why))) {
			fail_msg("round %u, query %d: %s", round, q, why);
		}
		matched += ne > 0;
		json_decref(ans);
		kvi_free(seq);
	}
	clu_truth_free(truth);
	return matched;
}

static void
test_kill9_at_random_moments(void **state)
{
	cluster *c = *state;
	const char *env = getenv("KVI_CRASH_SEED");
	unsigned seed = env != NULL ? (unsigned)strtoul(env, NULL, 10)
				    : (unsigned)time(NULL);
	print_message("crash seed %u (KVI_CRASH_SEED=%u replays it)\n", seed,
		      seed);
	srand(seed);
	bool soak = getenv("KVI_SOAK") != NULL;
	const char *secs = getenv("KVI_SOAK_SECONDS");
	int64_t until = kvt_now_ms() + (secs ? atol(secs) : 600) * 1000;

	const char *sim[] = {"--pods",  "2",
			     "--dp",    "2",
			     "--trace", TRACE,
			     "--rate",  "150",
			     "--loop",  "--cache-blocks",
			     "800",     "--cpu-blocks",
			     "1600",    "--paused",
			     NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, true, NULL);
	clu_wait_active(c, N, CLU_WAIT_MS);
	sim_load_config lc = {.trace_path = TRACE,
			      .block_size = 16,
			      .blocks_per_id = 1,
			      .copies = 1,
			      .loop = true};
	sim_load *load;
	char err[256];
	assert_int_equal(sim_load_open(&lc, &load, err, sizeof(err)), KVI_OK);

	static const char *const names[] = {"shard-0", "shard-1",
					    "the coordinator",
					    "a shard and the coordinator"};
	unsigned round = 0;
	int kills[4] = {0}, matched = 0;
	while (soak ? kvt_now_ms() < until : round < ROUNDS) {
		json_decref(clu_sim_post(c, "/resume", "{}"));
		kvt_sleep_ms(100 + rand() % 700);
		int victim = rand() % 4;
		shardproc *sh = &c->shards[victim == 3 ? rand() % 2 : victim];
		kills[victim]++;
		if (victim != 2) {
			shc_kill9(sh);
		}
		if (victim >= 2) {
			clu_coord_kill9(c);
		}
		kvt_sleep_ms(rand() % 400); /* the engines go on meanwhile */
		if (victim != 2) {
			shc_restart(sh);
		}
		if (victim >= 2) {
			clu_coord_relaunch(c);
		}
		kvt_sleep_ms(rand() % 300);
		json_decref(clu_sim_post(c, "/pause", "{}"));
		clu_wait_active(c, N, CLU_WAIT_MS);
		matched += check_truth(c, load, round);
		round++;
	}
	sim_load_free(load);
	assert_true(matched > 0); /* the comparisons were not vacuous */
	print_message("%u rounds (seed %u): %d %s, %d %s, %d %s, %d %s; "
		      "%d queries matched\n",
		      round, seed, kills[0], names[0], kills[1], names[1],
		      kills[2], names[2], kills[3], names[3], matched);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_kill9_at_random_moments,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
