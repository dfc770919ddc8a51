/*
 * test_coord_handoff.c - planned moves carry the listener's state.
 *
 * 1. Engines with neither a replay socket nor /kv_recover (vLLM's default):
 *    prompts are indexed on three DP=2 pods, then - while the engines keep
 *    publishing - a shard is added, every listener is moved by an admin
 *    pin, and a shard is drained. Nothing but the old owner can give the
 *    new one what was indexed before the move, so afterwards every
 *    listener must still equal its rank's ground truth, /query must equal
 *    a scan of the truth for the prompts indexed before the moves, no
 *    answer during the moves may be partial, and /admin/moves must list
 *    the hand-offs with the blocks they carried.
 * 2. Replay-capable engines, with a shard killed -9 in the middle of a
 *    hand-off (shards capped at 2,000 entries/s of hand-off, so that the
 *    move is seen taking its state first), once the old owner and once
 *    the new one: no listener is left unowned, and once the cluster
 *    settles (the killed shard back with its LMDB) every listener equals
 *    the truth.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "coord_check.h"

#define TRACE   KVI_DATA_DIR "/traces/conversation_trace.jsonl"
#define PODS    3
#define DP      2
#define NLIS    (PODS * DP)
#define PROMPTS 24
#define BLOCKS  12
#define BS      16

static uint32_t prompts[PROMPTS][BLOCKS * BS];

static void
make_prompts(void)
{
	uint32_t x = 12345;
	for (int p = 0; p < PROMPTS; p++) {
		for (int i = 0; i < BLOCKS * BS; i++) {
			x = x * 1103515245u + 12345u;
			/* every fourth prompt shares the first's first half */
			prompts[p][i] = p % 4 == 1 && i < BLOCKS * BS / 2
					    ? prompts[0][i]
					    : (x >> 8) % 150000u;
		}
	}
}

static void
key_of(int idx, char *buf, size_t len)
{
	snprintf(buf, len, "sim/pod-%d#%d", idx / DP, idx % DP);
}

/* check_not_partial asks one prompt's query and fails on a partial
 * answer: every listener must stay queryable through its move. */
static void
check_not_partial(cluster *c, int p)
{
	json_t *ans = clu_query(c, prompts[p], BLOCKS * BS, NULL);
	if (json_is_true(json_object_get(ans, "partial"))) {
		char *d = json_dumps(ans, JSON_COMPACT);
		fail_msg("a partial answer during the moves: %s", d);
	}
	json_decref(ans);
}

static const char *
owner_of(json_t *map, int idx)
{
	char key[64];
	key_of(idx, key, sizeof(key));
	return json_string_value(json_object_get(map, key));
}

/* settled says whether every listener is where it should be: on
 * targets[idx] (NULL: where a rebalance would leave it), with no move in
 * flight. */
static bool
settled(cluster *c, const char *const *targets)
{
	if (clu_moves_busy(c, NULL) > 0) {
		return false;
	}
	if (targets == NULL) {
		json_t *r = NULL;
		assert_int_equal(clu_admin(c, "POST", "/admin/rebalance",
					   "{\"dry_run\": true}", &r),
				 200);
		size_t moves = json_array_size(json_object_get(r, "moves"));
		json_decref(r);
		return moves == 0;
	}
	json_t *map = clu_owner_map(c);
	bool ok = true;
	for (int idx = 0; idx < NLIS; idx++) {
		const char *o = owner_of(map, idx);
		ok = ok && o != NULL &&
		     (targets[idx] == NULL || strcmp(o, targets[idx]) == 0);
	}
	json_decref(map);
	return ok;
}

/* settle waits until settled(), querying meanwhile (q NULL: not), then
 * until every listener is active. */
static void
settle(cluster *c, int *q, const char *const *targets)
{
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!settled(c, targets)) {
		if (q != NULL) {
			check_not_partial(c, (*q)++ % PROMPTS);
		}
		if (kvt_now_ms() > deadline) {
			char *d = NULL;
			clu_moves_busy(c, &d);
			fail_msg("not settled; moves %s", d);
		}
		kvt_sleep_ms(50);
	}
	clu_wait_active(c, NLIS, CLU_WAIT_MS);
}

/* check_truth: every listener equals its rank's truth on its owner, and
 * the prompts' queries equal a scan of the truth. */
static void
check_truth(cluster *c)
{
	for (int idx = 0; idx < NLIS; idx++) {
		shc_wait_truth(clu_shard_of(c, idx / DP, idx % DP), &c->sim,
			       &idx, 1, CLU_WAIT_MS);
	}
	clu_truth *t = clu_truth_get(c);
	int held = 0;
	for (int p = 0; p < PROMPTS; p++) {
		uint64_t seq[BLOCKS];
		size_t nb = clu_seq_hashes(prompts[p], BLOCKS * BS, seq);
		clu_expect exp[NLIS];
		int ne = clu_truth_match(t, seq, nb, exp);
		held += ne > 0;
		json_t *ans = clu_query(c, prompts[p], BLOCKS * BS, NULL);
		char why[512];
		if (!clu_check_answer(ans, exp, ne, why, sizeof(why))) {
			char *d = json_dumps(ans, JSON_COMPACT);
			fail_msg("prompt %d: %s; answer %s", p, why, d);
		}
		assert_false(json_is_true(json_object_get(ans, "partial")));
		json_decref(ans);
	}
	clu_truth_free(t);
	/* not vacuous: most prompts are still cached somewhere */
	assert_true(held >= PROMPTS / 2);
}

/* wait_assigned waits until /workers gives every listener a shard, then
 * a moment for the subscriptions to reach the engines: an engine without
 * replay cannot resend what a subscriber missed. */
static void
wait_assigned(cluster *c)
{
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *m = clu_owner_map(c);
		int n = 0;
		const char *k;
		json_t *v;
		json_object_foreach(m, k, v)
		{
			n += json_is_string(v);
		}
		json_decref(m);
		if (n == NLIS) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(50);
	}
	kvt_sleep_ms(1000);
}

static void
prefill_all(cluster *c)
{
	for (int p = 0; p < PROMPTS; p++) {
		int idx = p % NLIS;
		clu_prefill(c, idx / DP, idx % DP, prompts[p], BLOCKS * BS);
	}
}

/* index_prompts starts the coordinator, indexes the prompts and checks
 * them against the truth. */
static void
index_prompts(cluster *c, const char *const *coord)
{
	clu_coord(c, true, coord);
	wait_assigned(c);
	prefill_all(c);
	clu_wait_active(c, NLIS, CLU_WAIT_MS);
	check_truth(c);
}

/* moved_with_state counts the done moves /admin/moves lists as hand-offs
 * that carried blocks. */
static int
moved_with_state(cluster *c)
{
	json_t *moves = NULL;
	assert_int_equal(clu_admin(c, "GET", "/admin/moves", NULL, &moves),
			 200);
	int n = 0;
	size_t i;
	json_t *m;
	json_array_foreach(moves, i, m)
	{
		n += json_is_true(json_object_get(m, "handoff")) &&
		     json_integer_value(json_object_get(m, "blocks")) > 0;
	}
	if (getenv("KVI_TEST_DEBUG") != NULL) {
		char *d = json_dumps(moves, JSON_COMPACT);
		fprintf(stderr, "moves: %s\n", d);
		free(d);
	}
	json_decref(moves);
	return n;
}

static void
move_to(cluster *c, int idx, const char *to)
{
	char key[64], path[128], body[64];
	key_of(idx, key, sizeof(key));
	snprintf(path, sizeof(path),
		 "/admin/listeners/sim%%2Fpod-%d%%23%d/move", idx / DP,
		 idx % DP);
	snprintf(body, sizeof(body), "{\"to\": \"%s\"}", to);
	assert_int_equal(clu_admin(c, "POST", path, body, NULL), 202);
}

static void
test_moves_without_replay_or_recover(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods",
			     "3",
			     "--dp",
			     "2",
			     "--replay-port",
			     "off",
			     "--recover-port",
			     "off",
			     "--cache-blocks",
			     "4096",
			     "--trace",
			     TRACE,
			     "--rate",
			     "150",
			     "--loop",
			     "--paused",
			     NULL};
	const char *coord[] = {"--tick-ms", "100", NULL};
	make_prompts();
	clu_sim(c, sim);
	clu_shards(c, 3);
	c->n_shards = 2; /* shard-2 joins through the admin API */
	index_prompts(c, coord);

	/* the engines keep publishing through every move */
	json_decref(clu_sim_post(c, "/resume", "{}"));
	int q = 0;
	char body[256];
	snprintf(body, sizeof(body),
		 "{\"id\": \"shard-2\", \"endpoint\": \"%s\"}",
		 c->shards[2].url);
	assert_int_equal(clu_admin(c, "POST", "/admin/shards", body, NULL),
			 201);
	c->n_shards = 3;
	kvt_sleep_ms(300); /* a tick or two: the moves begin */
	settle(c, &q, NULL);
	int after_add = moved_with_state(c);
	assert_true(after_add > 0);

	/* every listener pinned to the next shard */
	json_t *map = clu_owner_map(c);
	static char to[NLIS][16];
	const char *targets[NLIS];
	for (int idx = 0; idx < NLIS; idx++) {
		int k = -1;
		assert_int_equal(sscanf(owner_of(map, idx), "shard-%d", &k), 1);
		snprintf(to[idx], sizeof(to[idx]), "shard-%d", (k + 1) % 3);
		targets[idx] = to[idx];
		move_to(c, idx, to[idx]);
	}
	json_decref(map);
	settle(c, &q, targets);
	assert_true(moved_with_state(c) >= after_add + NLIS);

	/* drain shard-0: its listeners are handed to the others */
	assert_int_equal(
	    clu_admin(c, "DELETE", "/admin/shards/shard-0", NULL, NULL), 202);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *m = clu_owner_map(c);
		bool on0 = false;
		for (int idx = 0; idx < NLIS; idx++) {
			const char *o = owner_of(m, idx);
			on0 |= o != NULL && strcmp(o, "shard-0") == 0;
		}
		json_decref(m);
		if (!on0) {
			break;
		}
		check_not_partial(c, q++ % PROMPTS);
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(50);
	}
	const char *anywhere[NLIS] = {0};
	settle(c, &q, anywhere);

	json_decref(clu_sim_post(c, "/pause", "{}"));
	check_truth(c);
	/* nothing was repaired from the engines: they cannot */
	assert_true(clu_metric(c, "kvindex_coordinator_failovers_total") <= 0);
}

/* biggest_on returns the listener of shard with the most blocks. */
static int
biggest_on(cluster *c, const char *shard)
{
	int best = -1;
	json_int_t most = -1;
	for (int idx = 0; idx < NLIS; idx++) {
		char pod[32];
		snprintf(pod, sizeof(pod), "sim/pod-%d", idx / DP);
		json_t *ws;
		json_t *l = clu_listener(c, pod, idx % DP, &ws);
		const char *sh = json_string_value(json_object_get(l, "shard"));
		json_int_t b = json_integer_value(json_object_get(l, "blocks"));
		if (sh != NULL && strcmp(sh, shard) == 0 && b > most) {
			best = idx;
			most = b;
		}
		json_decref(ws);
	}
	assert_true(best >= 0 && most > 0);
	return best;
}

/* wait_taking_state waits until /admin/moves shows idx's hand-off taking
 * its state from the old owner. */
static void
wait_taking_state(cluster *c, int idx)
{
	char key[64];
	key_of(idx, key, sizeof(key));
	int64_t deadline = kvt_now_ms() + 10000;
	for (;;) {
		json_t *moves = NULL;
		assert_int_equal(
		    clu_admin(c, "GET", "/admin/moves", NULL, &moves), 200);
		bool seen = false;
		size_t i;
		json_t *m;
		json_array_foreach(moves, i, m)
		{
			const char *l =
			    json_string_value(json_object_get(m, "listener"));
			const char *ph =
			    json_string_value(json_object_get(m, "phase"));
			seen |= l != NULL && ph != NULL &&
				strcmp(l, key) == 0 &&
				strcmp(ph, "taking_state") == 0;
			if (getenv("KVI_TEST_DEBUG") && l != NULL &&
			    strcmp(l, key) == 0) {
				fprintf(stderr, "phase %s\n", ph);
			}
		}
		if (seen) {
			json_decref(moves);
			return;
		}
		if (kvt_now_ms() > deadline) {
			char *d = json_dumps(moves, JSON_COMPACT);
			fail_msg("%s never seen taking its state: %s", key, d);
		}
		json_decref(moves);
		kvt_sleep_ms(10);
	}
}

/* kill_during_handoff moves shard-0's biggest listener to shard-1 once
 * per victim and kills the old owner (victim 0) or the new one (1) while
 * the new one takes the state; then restarts it. Engines with replay and
 * /kv_recover unless bare. */
static void
kill_during_handoff(cluster *c, bool bare, const int *victims, int n)
{
	const char *sim_full[] = {
	    "--pods",  "3",   "--dp",           "2",
	    "--trace", TRACE, "--cache-blocks", "16384",
	    "--rate",  "60",  "--loop",         "--paused",
	    NULL};
	const char *sim_bare[] = {"--pods",
				  "3",
				  "--dp",
				  "2",
				  "--replay-port",
				  "off",
				  "--recover-port",
				  "off",
				  "--trace",
				  TRACE,
				  "--cache-blocks",
				  "16384",
				  "--rate",
				  "60",
				  "--loop",
				  "--paused",
				  NULL};
	const char *coord[] = {"--tick-ms", "100", "--failover-grace-ms",
			       "1500", NULL};
	/* hand-offs slow enough to be caught in the middle */
	static const char *const shard[] = {"--handoff-rate", "2000", NULL};
	make_prompts();
	clu_sim(c, bare ? sim_bare : sim_full);
	for (int i = 0; i < 2; i++) {
		shc_start(&c->shards[i], shard);
	}
	c->n_shards = 2;
	index_prompts(c, coord);
	json_decref(clu_sim_post(c, "/resume", "{}"));
	kvt_sleep_ms(2000);

	int idx = -1;
	for (int v = 0; v < n; v++) {
		idx = biggest_on(c, "shard-0");
		move_to(c, idx, "shard-1");
		wait_taking_state(c, idx);
		shardproc *dead = &c->shards[victims[v] == 0 ? 0 : 1];
		shc_kill9(dead);
		kvt_sleep_ms(2500); /* past the grace period */
		/* no listener is unowned meanwhile */
		json_t *m = clu_owner_map(c);
		for (int i = 0; i < NLIS; i++) {
			assert_non_null(owner_of(m, i));
		}
		json_decref(m);
		shc_restart(dead);
		/* settled below means settled with it back, not before the
		 * coordinator has seen it return */
		char id[16];
		snprintf(id, sizeof(id), "shard-%d", victims[v] == 0 ? 0 : 1);
		int64_t until = kvt_now_ms() + CLU_WAIT_MS;
		while (!clu_shard_status_is(c, id, "up")) {
			assert_true(kvt_now_ms() < until);
			kvt_sleep_ms(20);
		}
		const char *targets[NLIS] = {0};
		targets[idx] = "shard-1";
		settle(c, NULL, targets);
	}
	json_decref(clu_sim_post(c, "/pause", "{}"));
	if (!bare) {
		check_truth(c);
		return;
	}
	/* The killed shard's other listeners lost, for good, what their
	 * engines published while it was down; the one it was taking over
	 * must be whole. */
	shc_wait_truth(clu_shard_of(c, idx / DP, idx % DP), &c->sim, &idx, 1,
		       CLU_WAIT_MS);
}

static void
test_kill_during_handoff(void **state)
{
	static const int both[] = {0, 1};
	kill_during_handoff(*state, false, both, 2);
}

/* Engines without replay or /kv_recover, the new owner killed: it comes
 * back owning the listener with no state, and takes it from the old owner
 * again. (Its other listeners lose what their engines published while it
 * was down: such engines cannot resend it.) */
static void
test_kill_new_owner_bare_engines(void **state)
{
	static const int new_owner[] = {1};
	kill_during_handoff(*state, true, new_owner, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
		test_moves_without_replay_or_recover, clu_test_setup,
		clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_kill_during_handoff,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_kill_new_owner_bare_engines,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
