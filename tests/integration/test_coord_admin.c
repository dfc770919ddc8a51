/*
 * test_coord_admin.c - rebalancing through the admin API on a whole
 * cluster (the simulator's six DP=2 pods, real shards, the coordinator):
 *
 *  - POST /admin/shards adds a third shard: listeners hashing now maps to
 *    it are handed off (each listed by /admin/moves as done), every
 *    listener stays active and queried, a prefill on a moved listener
 *    matches, and a restarted coordinator still has the shard;
 *  - POST /admin/listeners/<key>/move pins a listener elsewhere; a dry-run
 *    rebalance lists the move back, a real one performs it;
 *  - DELETE /admin/shards/<id> drains a shard until it owns nothing and
 *    forgets it; draining the last eligible shard is refused; a drain
 *    that cannot finish yet (the other shard stopped) survives a
 *    coordinator restart and finishes once it can;
 *  - bad requests get 400, 404 or 409 with a message.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "coord_check.h"

#define NLIS 12
#define NTOK 64

static long
admin(cluster *c, const char *method, const char *path, const char *body,
      json_t **out)
{
	return clu_admin(c, method, path, body, out);
}

/* count_on returns how many listeners the owner map puts on shard. */
static int
count_on(json_t *map, const char *shard)
{
	int n = 0;
	const char *k;
	json_t *v;
	json_object_foreach(map, k, v)
	{
		n += json_is_string(v) &&
		     strcmp(json_string_value(v), shard) == 0;
	}
	return n;
}

/* wait_owner waits until listener key is owned by shard and all NLIS
 * listeners are active. */
static void
wait_owner(cluster *c, const char *key, const char *shard)
{
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *m = clu_owner_map(c);
		const char *o = json_string_value(json_object_get(m, key));
		bool ok = o != NULL && strcmp(o, shard) == 0;
		json_decref(m);
		if (ok) {
			break;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("%s not moved to %s", key, shard);
		}
		kvt_sleep_ms(100);
	}
	clu_wait_active(c, NLIS, CLU_WAIT_MS);
}

static void
wait_converged(cluster *c)
{
	clu_wait_converged(c, NLIS);
}

static void
test_admin_rebalancing(void **state)
{
	(void)state;
	cluster cc = {0}, *c = &cc;
	const char *sim[] = {"--pods", "6", "--dp", "2", NULL};
	clu_sim(c, sim);
	/* shard-2 runs, but --shards names only shard-0 and shard-1, also
	 * at restarts: the coordinator knows shard-2 from the admin API and
	 * its store alone */
	clu_shards(c, 3);
	c->n_shards = 2;
	clu_coord(c, true, NULL);
	clu_wait_active(c, NLIS, CLU_WAIT_MS);

	/* bad requests */
	assert_int_equal(admin(c, "POST", "/admin/shards", "{\"id\": 3}", NULL),
			 400);
	assert_int_equal(admin(c, "POST", "/admin/shards",
			       "{\"id\": \"a b\", \"endpoint\": \"tcp://x:1\"}",
			       NULL),
			 400);
	char body[1024];
	snprintf(body, sizeof(body),
		 "{\"id\": \"shard-0\", \"endpoint\": \"%s\"}",
		 c->shards[2].url);
	assert_int_equal(admin(c, "POST", "/admin/shards", body, NULL), 409);
	assert_int_equal(admin(c, "DELETE", "/admin/shards/nope", NULL, NULL),
			 404);
	assert_int_equal(admin(c, "POST", "/admin/listeners/nope%230/move",
			       "{\"to\": \"shard-0\"}", NULL),
			 404);
	assert_int_equal(
	    admin(c, "POST", "/admin/rebalance", "{\"dry_run\": 1}", NULL),
	    400);
	/* the error quotes the body's bytes, never as a format */
	json_t *err = NULL;
	assert_int_equal(admin(c, "POST", "/admin/shards",
			       "{\"id\" \"%s%s%s%s%s%s%s%n\"}", &err),
			 400);
	assert_non_null(
	    strstr(json_string_value(json_object_get(err, "error")), "%s%s%s"));
	json_decref(err);

	/* grow: add shard-2 */
	snprintf(body, sizeof(body),
		 "{\"id\": \"shard-2\", \"endpoint\": \"%s\"}",
		 c->shards[2].url);
	assert_int_equal(admin(c, "POST", "/admin/shards", body, NULL), 201);
	wait_converged(c);
	json_t *map = clu_owner_map(c);
	int on2 = count_on(map, "shard-2");
	assert_true(on2 > 0 && on2 < NLIS);
	json_t *moves = NULL;
	assert_int_equal(admin(c, "GET", "/admin/moves", NULL, &moves), 200);
	int done_to2 = 0;
	size_t i;
	json_t *m;
	json_array_foreach(moves, i, m)
	{
		done_to2 +=
		    strcmp(json_string_value(json_object_get(m, "to")),
			   "shard-2") == 0 &&
		    strcmp(json_string_value(json_object_get(m, "phase")),
			   "done") == 0;
	}
	json_decref(moves);
	assert_int_equal(done_to2, on2);
	/* a listener that moved is indexed on its new shard */
	const char *k;
	json_t *v;
	int pod = -1, rank = -1;
	json_object_foreach(map, k, v)
	{
		if (pod < 0 && strcmp(json_string_value(v), "shard-2") == 0) {
			sscanf(k, "sim/pod-%d#%d", &pod, &rank);
		}
	}
	assert_true(pod >= 0 && rank >= 0);
	uint32_t t[NTOK];
	for (int j = 0; j < NTOK; j++) {
		t[j] = 900000u + (uint32_t)j;
	}
	clu_prefill(c, pod, rank, t, NTOK);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ans = clu_query(c, t, NTOK, NULL);
		json_t *best = json_object_get(ans, "best");
		bool ok = json_integer_value(
			      json_object_get(best, "dp_rank")) == rank &&
			  json_integer_value(
			      json_object_get(best, "matched_tokens")) == NTOK;
		json_decref(ans);
		if (ok) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(50);
	}
	/* the added shard survives a coordinator restart, and nothing moves */
	clu_coord_restart(c);
	assert_true(clu_shard_status_is(c, "shard-2", NULL));
	wait_converged(c);
	json_t *again = clu_owner_map(c);
	assert_true(json_equal(map, again));
	json_decref(again);

	/* pin one listener of shard-0 to shard-1, then rebalance it back */
	char key[64] = "";
	json_object_foreach(map, k, v)
	{
		if (key[0] == '\0' &&
		    strcmp(json_string_value(v), "shard-0") == 0) {
			snprintf(key, sizeof(key), "%s", k);
		}
	}
	assert_true(key[0] != '\0');
	char path[128], esc[96];
	snprintf(esc, sizeof(esc), "%s", key);
	char *hash = strchr(esc, '#');
	*hash = '\0';
	snprintf(path, sizeof(path), "/admin/listeners/%s%%23%s/move", esc,
		 hash + 1);
	assert_int_equal(admin(c, "POST", path, "{\"to\": \"shard-1\"}", NULL),
			 202);
	wait_owner(c, key, "shard-1");
	json_t *r = NULL;
	assert_int_equal(admin(c, "POST", "/admin/rebalance", "{}", &r), 200);
	json_t *mv = json_array_get(json_object_get(r, "moves"), 0);
	assert_int_equal(json_array_size(json_object_get(r, "moves")), 1);
	assert_string_equal(json_string_value(json_object_get(mv, "listener")),
			    key);
	assert_string_equal(json_string_value(json_object_get(mv, "to")),
			    "shard-0");
	json_decref(r);
	assert_int_equal(
	    admin(c, "POST", "/admin/rebalance", "{\"dry_run\": false}", NULL),
	    202);
	wait_owner(c, key, "shard-0");
	wait_converged(c);
	json_decref(map);

	/* shrink: drain shard-2, then shard-0; the last one is refused */
	assert_int_equal(
	    admin(c, "DELETE", "/admin/shards/shard-2", NULL, NULL), 202);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (clu_shard_status_is(c, "shard-2", NULL)) {
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	clu_wait_active(c, NLIS, CLU_WAIT_MS);
	map = clu_owner_map(c);
	assert_int_equal(count_on(map, "shard-2"), 0);
	json_decref(map);
	/* with shard-1 stopped, shard-0's drain cannot finish; it survives
	 * a coordinator restart and finishes once shard-1 is back */
	pid_t pid1 = kvt_proc_pid(c->shards[1].proc);
	clu_sigstop(pid1);
	assert_int_equal(
	    admin(c, "DELETE", "/admin/shards/shard-0", NULL, NULL), 202);
	assert_int_equal(
	    admin(c, "DELETE", "/admin/shards/shard-1", NULL, NULL), 409);
	clu_coord_restart(c);
	assert_true(clu_shard_status_is(c, "shard-0", "draining"));
	assert_int_equal(kill(pid1, SIGCONT), 0);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (clu_shard_status_is(c, "shard-0", NULL)) {
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	clu_wait_active(c, NLIS, CLU_WAIT_MS);
	map = clu_owner_map(c);
	assert_int_equal(count_on(map, "shard-1"), NLIS);
	json_decref(map);
	shc_cleanup(&c->shards[2]);
	clu_cleanup(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_admin_rebalancing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
