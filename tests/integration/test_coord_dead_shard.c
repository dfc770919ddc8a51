/*
 * test_coord_dead_shard.c - what a shard that cannot help costs queries
 * and registrations: nothing. Three DP=2 pods from the simulator, two
 * shards, the coordinator with a fan-out deadline of 3 s, so that a query
 * that waited for a shard would show it.
 *
 * test_model_asks_its_shards: a query of a model asks only the shards
 * that own its listeners. A shard that owns none of them gets none of its
 * queries (its own query counter says so) and, stopped, delays none.
 *
 * test_lost_connection_skips: a shard whose connection breaks under a
 * query (a call in flight on an HTTP loop's link) is skipped by the
 * queries after it at once, before any poll has missed it (the polls are
 * 5 s apart).
 *
 * test_dead_shard_costs_nothing: with a shard killed, once the poll has
 * seen it down, a query answers at once, partial, from the other shard;
 * registrations are answered at once (201 or 202), since no poll waits
 * for the dead shard any more; and once failover has moved every
 * listener away from it, answers are whole again.
 *
 * test_shards_by_host_name: shards named by host name are reached on the
 * HTTP loops' own links (the coordinator's counter of shard queries by
 * way says so) and answer as shards named by address do.
 */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_check.h"

#define PODS     3
#define DP       2
#define N        (PODS * DP)
#define NTOK     64
#define DEADLINE 3000
/* well under the deadline, with room for a busy host */
#define FAST_MS 1500

static const char *const sim_flags[] = {"--pods", "3", "--dp", "2", NULL};

static void
make_tokens(uint32_t *t, uint32_t seed)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = seed * 1000u + i + 1;
	}
}

#define BODY_MAX 2048

/* query_body writes the /query body of model for NTOK tokens of seed. */
static void
query_body(char body[BODY_MAX], const char *model, uint32_t seed)
{
	uint32_t t[NTOK];
	make_tokens(t, seed);
	int off = snprintf(body, BODY_MAX,
			   "{\"model_name\":\"%s\",\"token_ids\":[", model);
	for (int i = 0; i < NTOK; i++) {
		off += snprintf(body + off, BODY_MAX - (size_t)off, "%s%u",
				i ? "," : "", t[i]);
	}
	snprintf(body + off, BODY_MAX - (size_t)off, "]}");
}

/* query_of posts a /query of model for NTOK tokens of seed; returns the
 * answer and the time it took. */
static json_t *
query_of(cluster *c, const char *model, uint32_t seed, int64_t *took)
{
	char body[BODY_MAX];
	query_body(body, model, seed);
	long st;
	int64_t t0 = kvt_now_ms();
	json_t *ans = clu_post(c, "/query", body, &st);
	*took = kvt_now_ms() - t0;
	assert_int_equal(st, 200);
	return ans;
}

static bool
partial(const json_t *ans)
{
	return json_is_true(json_object_get(ans, "partial"));
}

/* by_name names every shard to the coordinator by host name. */
static void
by_name(cluster *c)
{
	for (int i = 0; i < c->n_shards; i++) {
		char *url = c->shards[i].url;
		const char *colon = strrchr(url, ':');
		assert_non_null(colon);
		int port = atoi(colon + 1);
		snprintf(url, sizeof(c->shards[i].url), "tcp://localhost:%d",
			 port);
	}
}

/* start_as brings the cluster up with one prefill per rank (seed
 * 10+idx), the shards named by host name when names. */
static void
start_as(cluster *c, const char *const *coord_extra, bool names)
{
	clu_sim(c, sim_flags);
	if (names) {
		/* on 127.0.0.1, which "localhost" names (after ::1) */
		for (int i = 0; i < 2; i++) {
			shc_start_host(&c->shards[i], NULL, "127.0.0.1");
		}
		c->n_shards = 2;
		by_name(c);
	} else {
		clu_shards(c, 2);
	}
	clu_coord(c, true, coord_extra);
	uint32_t t[NTOK];
	for (int i = 0; i < N; i++) {
		make_tokens(t, 10 + (uint32_t)i);
		clu_prefill(c, i / DP, i % DP, t, NTOK);
	}
	clu_wait_active(c, N, CLU_WAIT_MS);
	for (int i = 0; i < N; i++) {
		int64_t until = kvt_now_ms() + CLU_WAIT_MS, took;
		for (;;) {
			json_t *ans =
			    query_of(c, "sim-model", 10 + (uint32_t)i, &took);
			long s = clu_score(ans, i, DP);
			json_decref(ans);
			if (s == NTOK) {
				break;
			}
			assert_true(kvt_now_ms() < until);
			kvt_sleep_ms(50);
		}
	}
}

static void
start(cluster *c, const char *const *coord_extra)
{
	start_as(c, coord_extra, false);
}

#define VIA_LINK "kvindex_coord_shard_queries_total{via=\"link\"}"
#define VIA_NNG  "kvindex_coord_shard_queries_total{via=\"nng\"}"

/* warm_links sends enough queries that each HTTP loop has its links up. */
static void
warm_links(cluster *c)
{
	for (int i = 0; i < 20; i++) {
		int64_t took;
		json_decref(query_of(c, "sim-model", 10, &took));
	}
	kvt_sleep_ms(100);
}

/* register_rank registers rank 0 of instance id on a port of its own
 * (one endpoint is one listener) where nothing listens. */
static long
register_rank(cluster *c, const char *model, uint64_t id, int64_t *took)
{
	char body[256];
	snprintf(body, sizeof(body),
		 "{\"instance_id\":%" PRIu64 ",\"endpoint\":\"tcp://"
		 "127.0.0.1:%u\",\"model_name\":\"%s\",\"block_size\":16}",
		 id, (unsigned)(1 + id % 1000), model);
	long st;
	int64_t t0 = kvt_now_ms();
	json_t *j = clu_post(c, "/register", body, &st);
	*took = kvt_now_ms() - t0;
	json_decref(j);
	return st;
}

/* owner_of returns the index of the shard /workers names for rank 0 of
 * instance id, or -1. */
static int
owner_of(cluster *c, uint64_t id)
{
	long st;
	json_t *ws = clu_get(c, "/workers", &st);
	assert_int_equal(st, 200);
	char want[24];
	snprintf(want, sizeof(want), "%" PRIu64, id);
	int k = -1;
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		const char *wid =
		    json_string_value(json_object_get(w, "instance_id"));
		if (wid == NULL || strcmp(wid, want) != 0) {
			continue;
		}
		const char *sh = json_string_value(json_object_get(
		    json_object_get(json_object_get(w, "listeners"), "0"),
		    "shard"));
		if (sh != NULL) {
			sscanf(sh, "shard-%d", &k);
		}
	}
	json_decref(ws);
	return k;
}

static void
test_model_asks_its_shards(void **state)
{
	cluster *c = *state;
	const char *extra[] = {"--query-deadline-ms", "3000", NULL};
	start(c, extra);
	int64_t took;
	assert_int_equal(register_rank(c, "solo", 9001, &took), 201);
	int k = owner_of(c, 9001);
	assert_true(k == 0 || k == 1);
	shardproc *owner = &c->shards[k], *other = &c->shards[1 - k];

	const char *q = "kvindex_shard_queries_total";
	double own0 = shc_metric(owner, q), oth0 = shc_metric(other, q);
	for (int i = 0; i < 20; i++) {
		json_decref(query_of(c, "solo", 500 + (uint32_t)i, &took));
	}
	assert_true(shc_metric(owner, q) >= own0 + 20);
	assert_true(shc_metric(other, q) == oth0);
	/* both own listeners of the simulator's model: both are asked */
	json_decref(query_of(c, "sim-model", 10, &took));
	assert_true(shc_metric(other, q) > oth0);

	/* stopped, it delays no query of a model it has no part in */
	pid_t pid = kvt_proc_pid(other->proc);
	clu_sigstop(pid);
	for (int i = 0; i < 3; i++) {
		json_t *ans = query_of(c, "solo", 600 + (uint32_t)i, &took);
		assert_false(partial(ans));
		assert_true(took < FAST_MS);
		json_decref(ans);
	}
	assert_int_equal(kill(pid, SIGCONT), 0);
}

/* A query posted from a thread of its own, timed. */
typedef struct bg_query {
	cluster *c;
	char body[BODY_MAX];
	long status;
	bool partial;
	int64_t took;
	pthread_t tid;
} bg_query;

static void *
bg_query_main(void *arg)
{
	bg_query *q = arg;
	char url[128];
	snprintf(url, sizeof(url), "%s/query", q->c->base);
	kvt_http_resp r;
	int64_t t0 = kvt_now_ms();
	if (kvt_http_post(url, q->body, 30000, &r) == KVI_OK) {
		q->status = r.status;
		q->partial = r.json != NULL && partial(r.json);
	}
	q->took = kvt_now_ms() - t0;
	kvt_http_resp_fini(&r);
	return NULL;
}

static void
test_lost_connection_skips(void **state)
{
	cluster *c = *state;
	const char *extra[] = {
	    "--query-deadline-ms", "3000",  "--tick-ms", "5000",
	    "--failover-grace-ms", "60000", NULL};
	start(c, extra);
	int on0 = clu_rank_on(c, 0, N, DP);
	assert_true(on0 >= 0);
	warm_links(c);
	/* a query waits for the stopped shard; its connection then breaks */
	pid_t pid = kvt_proc_pid(c->shards[1].proc);
	clu_sigstop(pid);
	bg_query q = {.c = c};
	query_body(q.body, "sim-model", 10 + (uint32_t)on0);
	double link0 = clu_metric(c, VIA_LINK);
	assert_int_equal(pthread_create(&q.tid, NULL, bg_query_main, &q), 0);
	kvt_sleep_ms(300);
	/* both of its calls, the one in flight to the stopped shard too, went
	 * on the HTTP loop's own links */
	assert_true(clu_metric(c, VIA_LINK) == link0 + 2);
	shc_kill9(&c->shards[1]);
	pthread_join(q.tid, NULL);
	assert_int_equal(q.status, 200);
	assert_true(q.partial);
	assert_true(q.took < 300 + FAST_MS);
	/* no poll has missed it yet: before, each of these waited the whole
	 * deadline for a shard with no connection */
	for (int i = 0; i < 3; i++) {
		int64_t took;
		json_t *ans =
		    query_of(c, "sim-model", 10 + (uint32_t)on0, &took);
		if (took >= FAST_MS) {
			fail_msg("query %d after the break took %" PRId64 " ms",
				 i, took);
		}
		assert_true(partial(ans));
		assert_int_equal(clu_score(ans, on0, DP), NTOK);
		json_decref(ans);
	}
}

/* all_on_shard0 says whether /workers puts every listener on shard-0. */
static bool
all_on_shard0(void *arg)
{
	cluster *c = arg;
	json_t *m = clu_owner_map(c);
	bool all = json_object_size(m) > 0;
	const char *key;
	json_t *v;
	json_object_foreach(m, key, v)
	{
		const char *sh = json_string_value(v);
		all = all && sh != NULL && strcmp(sh, "shard-0") == 0;
	}
	json_decref(m);
	return all;
}

static bool
shard1_down(void *arg)
{
	return clu_shard_status_is(arg, "shard-1", "down");
}

static void
test_dead_shard_costs_nothing(void **state)
{
	cluster *c = *state;
	const char *extra[] = {"--query-deadline-ms", "3000",
			       "--failover-grace-ms", "6000", NULL};
	start(c, extra);
	int on0 = clu_rank_on(c, 0, N, DP), on1 = clu_rank_on(c, 1, N, DP);
	assert_true(on0 >= 0 && on1 >= 0);

	shc_kill9(&c->shards[1]);
	assert_true(kvt_wait_until(shard1_down, c, CLU_WAIT_MS));
	int64_t took;
	for (int i = 0; i < 3; i++) {
		json_t *ans =
		    query_of(c, "sim-model", 10 + (uint32_t)on0, &took);
		assert_true(took < FAST_MS);
		assert_true(partial(ans)); /* it owns listeners of the model */
		assert_int_equal(clu_score(ans, on0, DP), NTOK);
		json_decref(ans);
	}
	/* Before, every tick's poll waited a second for the dead shard, and
	 * a registration queued behind it: most of these took 0.3-1 s, so
	 * the eight some 4 s (each waited out what was left of a poll).
	 * Counted together, one slow on a busy host does not fail them. */
	int64_t all = 0;
	for (uint64_t id = 9101; id < 9109; id++) {
		long st = register_rank(c, "sim-model", id, &took);
		assert_true(st == 201 || st == 202);
		all += took;
	}
	if (all >= 8 * 300) {
		fail_msg("eight registrations took %" PRId64 " ms", all);
	}

	/* failover: nothing is left on the dead shard, nothing is missing */
	assert_true(kvt_wait_until(all_on_shard0, c, CLU_WAIT_MS));
	int64_t until = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ans =
		    query_of(c, "sim-model", 10 + (uint32_t)on1, &took);
		bool whole = !partial(ans) && clu_score(ans, on1, DP) == NTOK;
		json_decref(ans);
		if (whole) {
			break;
		}
		assert_true(kvt_now_ms() < until);
		kvt_sleep_ms(100);
	}
	for (int i = 0; i < 3; i++) {
		json_t *ans =
		    query_of(c, "sim-model", 10 + (uint32_t)on0, &took);
		assert_true(took < FAST_MS);
		assert_false(partial(ans));
		assert_int_equal(clu_score(ans, on0, DP), NTOK);
		json_decref(ans);
	}
}

/* Shards named by host name are reached on each HTTP loop's own links,
 * resolved in the loop, and answer as shards named by address do. */
static void
test_shards_by_host_name(void **state)
{
	cluster *c = *state;
	start_as(c, NULL, true);
	warm_links(c);
	double link0 = clu_metric(c, VIA_LINK), nng0 = clu_metric(c, VIA_NNG);
	for (int i = 0; i < 20; i++) {
		int64_t took;
		json_t *ans =
		    query_of(c, "sim-model", 10 + (uint32_t)(i % N), &took);
		assert_false(partial(ans));
		assert_int_equal(clu_score(ans, i % N, DP), NTOK);
		json_decref(ans);
	}
	/* both shards asked by every query, all on the links */
	assert_true(clu_metric(c, VIA_LINK) == link0 + 40);
	assert_true(clu_metric(c, VIA_NNG) == nng0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_model_asks_its_shards,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_lost_connection_skips,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_dead_shard_costs_nothing,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_shards_by_host_name,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
