/*
 * test_coord_replicas.c - several coordinator replicas over the same
 * shards and engines (replica_check.h):
 *
 *  - three replicas: exactly one leads and all name it; every replica is
 *    healthy and ready, serves /metrics, and its /query and /query_by_hash
 *    find each rank's prefill on that rank alone; a write on a
 *    follower is redirected to the leader; kill -9 of the leader: another
 *    leads within the lease duration and a retry period, assigns a pod
 *    that appeared in the discovery file meanwhile, keeps the pod that
 *    was registered over HTTP on a follower (rebuilt from the shards),
 *    and the prefills of both match through every replica;
 *  - two replicas, the leader SIGSTOPped past the lease: the follower
 *    takes over and moves a listener; the old leader, continued, steps
 *    down without touching the shards and the move stays; a command of
 *    the old term sent to a shard is refused (fencing); a shard added
 *    over the new leader's admin API is queried by the follower too;
 *  - two of the leader's renewals losing a race with another writer
 *    (409 Conflict): it reads again, renews and leads on in the same
 *    term; then the lease API answering 503: the leader steps down
 *    within the renew deadline, every replica goes on answering
 *    queries, writes get 503; once the API is back a replica leads
 *    again.
 *  - a registration token on both replicas: a follower refuses a write
 *    without it (401) or with another (403) where the leader would,
 *    rather than redirecting it, and redirects one with it; the leader
 *    takes it with the token only.
 *
 * What the leader shares through the Lease is test_coord_replicas_state's.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "replica_check.h"

static void
test_three_replicas(void **state)
{
	world *w = *state;
	int l = world_led(w, 3);
	const int first[] = {0, 1, 2, 3};
	prefill_and_check(w, first, 4, 1);
	/* every replica is healthy and ready, the followers too, and
	 * answers /query_by_hash as /query */
	for (int i = 0; i < w->n; i++) {
		long hs = 0, rs = 0, ms = 0;
		json_decref(clu_get(on(w, i), "/health", &hs));
		assert_true(
		    clu_metric(on(w, i), "kvindex_coordinator_leader") ==
		    (i == l));
		json_decref(clu_get(on(w, i), "/metrics", &ms));
		assert_int_equal(ms, 200);
		by_hash_is_query(w, i, 2);
		int64_t until = kvt_now_ms() + CLU_WAIT_MS;
		for (;;) {
			json_decref(clu_get(on(w, i), "/ready", &rs));
			if (rs == 200 || kvt_now_ms() > until) {
				break;
			}
			kvt_sleep_ms(100);
		}
		assert_int_equal(hs, 200);
		assert_int_equal(rs, 200);
	}

	/* a write on a follower goes to the leader: the last pod registered
	 * there, following the redirect as a client does */
	int f = (l + 1) % w->n;
	long st = 0;
	char body[512];
	int http_pod = PODS - 1, i0 = http_pod * DP;
	reg_body(w, http_pod, body, sizeof(body));
	json_t *ans = clu_post(on(w, f), "/register", body, &st);
	assert_int_equal(st, 307);
	char want[128];
	snprintf(want, sizeof(want), "%s/register", w->r[l].base);
	assert_string_equal(json_string_value(json_object_get(ans, "location")),
			    want);
	json_decref(ans);
	json_decref(clu_post(on(w, l), "/register", body, &st));
	assert_int_equal(st, 201);
	const int reg[] = {i0, i0 + 1};
	prefill_and_check(w, reg, 2, 1);

	/* the leader killed: another leads, and assigns a new pod */
	int64_t t0 = kvt_now_ms();
	rep_kill(w, l);
	int nl = leader(w, LEASE_MS + 2 * RETRY_MS + 3000);
	int64_t took = kvt_now_ms() - t0;
	assert_true(nl >= 0 && nl != l);
	fprintf(stderr, "new leader after %" PRId64 " ms\n", took);
	assert_true(took <= LEASE_MS + 2 * RETRY_MS + 3000);
	write_dfile(w, FILE_PODS + 1);
	clu_wait_active(on(w, nl), PODS * DP, CLU_WAIT_MS);
	const int all[] = {0, 1, 2, 3, 4, 5, 6, 7};
	prefill_and_check(w, all, 8, 2);
	/* the HTTP pod is a registration of the new leader now, and stays */
	json_t *ws = clu_get(on(w, nl), "/workers", &st);
	size_t k;
	json_t *pod;
	bool found = false;
	json_array_foreach(ws, k, pod)
	{
		const char *name =
		    json_string_value(json_object_get(pod, "name"));
		if (name != NULL && strcmp(name, "sim/pod-3") == 0) {
			found = true;
			assert_string_equal(
			    json_string_value(json_object_get(pod, "source")),
			    "http");
		}
	}
	json_decref(ws);
	assert_true(found);
	kvt_sleep_ms(1000); /* ticks of the new leader: nothing dropped */
	prefill_and_check(w, reg, 2, 3);
	world_stop(w);
}

static void
test_paused_leader(void **state)
{
	world *w = *state;
	int l = world_led(w, 2);
	int f = 1 - l;
	long st = 0;
	json_t *lj = clu_get(on(w, l), "/leader", &st);
	uint64_t old_term =
	    (uint64_t)json_integer_value(json_object_get(lj, "epoch"));
	json_decref(lj);
	assert_true(old_term >= 1);

	/* paused past the lease: the follower takes over and moves rank 0 */
	kill(kvt_proc_pid(w->r[l].proc), SIGSTOP);
	int64_t deadline = kvt_now_ms() + LEASE_MS + 2 * RETRY_MS + 5000;
	json_t *fj = NULL;
	for (;;) {
		fj = clu_get(on(w, f), "/leader", &st);
		if (json_is_true(json_object_get(fj, "is_leader"))) {
			break;
		}
		json_decref(fj);
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	assert_true((uint64_t)json_integer_value(json_object_get(fj, "epoch")) >
		    old_term);
	json_decref(fj);
	int from;
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	while ((from = shard_of(w, f, 0)) < 0) {
		if (kvt_now_ms() > deadline) {
			json_t *ws = clu_get(on(w, f), "/workers", &st);
			char *d = json_dumps(ws, JSON_COMPACT);
			fail_msg("rank 0 not active on the new leader: %s", d);
		}
		kvt_sleep_ms(100);
	}
	int to = 1 - from;
	char key[64];
	shc_key(&w->c.sim, 0, key, sizeof(key));
	move_to(w, f, 0, to);
	wait_shard(w, f, 0, to);

	/* the old leader wakes: it steps down and undoes nothing */
	kill(kvt_proc_pid(w->r[l].proc), SIGCONT);
	kvt_sleep_ms(2000);
	json_t *oj = clu_get(on(w, l), "/leader", &st);
	assert_false(json_is_true(json_object_get(oj, "is_leader")));
	json_decref(oj);
	assert_int_equal(shard_of(w, f, 0), to);
	assert_int_equal(shard_of(w, l, 0), to);
	const int idx[] = {0, 1, 2, 3};
	prefill_and_check(w, idx, 4, 4);

	/* a command of the old term is refused by the shard */
	Kvindex__UnassignRequest ur = KVINDEX__UNASSIGN_REQUEST__INIT;
	ur.key = key;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_UNASSIGN;
	req.unassign = &ur;
	req.has_term = true;
	req.term = old_term;
	Kvindex__Response *resp = shc_call(&w->c.shards[to], &req);
	assert_int_equal(resp->code, KVI_ESTALE);
	kvindex__response__free_unpacked(resp, NULL);
	assert_int_equal(shard_of(w, f, 0), to);
	assert_true(shc_metric(&w->c.shards[to],
			       "kvindex_shard_fenced_commands_total") >= 1);

	/* a shard added over the leader's admin API: the follower learns it
	 * from the Lease and queries it too */
	shc_start(&w->c.shards[2], NULL);
	w->c.n_shards = 3;
	char add[256];
	snprintf(add, sizeof(add),
		 "{\"id\": \"shard-2\", \"endpoint\": \"%s\"}",
		 w->c.shards[2].url);
	json_decref(clu_post(on(w, f), "/admin/shards", add, &st));
	assert_int_equal(st, 201);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		bool moved = false;
		for (int i = 1; i < FILE_PODS * DP && !moved; i++) {
			moved = shard_of(w, f, i) == 2;
		}
		if (moved) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (clu_metric(on(w, l),
			  "kvindex_coord_shard_up{shard=\"shard-2\"}") != 1) {
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	const int again[] = {1, 2, 3};
	prefill_and_check(w, again, 3, 7);
	world_stop(w);
}

static void
test_lease_api_down(void **state)
{
	world *w = *state;
	int l = world_led(w, 2);
	const int idx[] = {0, 1, 2, 3};
	prefill_and_check(w, idx, 4, 5);

	/* two renewals lose a race with another writer (409): the leader
	 * reads again and renews, and stays the leader of the same term */
	kvt_http_resp r;
	json_t *tj = clu_get(on(w, l), "/leader", &(long){0});
	json_int_t term = json_integer_value(json_object_get(tj, "epoch"));
	json_decref(tj);
	json_t *races = json_pack("{s:i}", "n", 2);
	assert_int_equal(kvt_kube_request(&w->kube, "POST",
					  "/control/lease-races", races, NULL,
					  5000, &r),
			 KVI_OK);
	assert_int_equal(r.status, 200);
	kvt_http_resp_fini(&r);
	json_decref(races);
	int64_t until = kvt_now_ms() + 5000;
	while (clu_metric(on(w, l),
			  "kvindex_coordinator_lease_conflicts_total") < 2) {
		assert_true(kvt_now_ms() < until);
		kvt_sleep_ms(100);
	}
	kvt_sleep_ms(2 * RETRY_MS);
	assert_int_equal(leader(w, 1000), l);
	tj = clu_get(on(w, l), "/leader", &(long){0});
	assert_int_equal(json_integer_value(json_object_get(tj, "epoch")),
			 term);
	json_decref(tj);

	json_t *on_body = json_pack("{s:b}", "on", 1);
	assert_int_equal(kvt_kube_request(&w->kube, "POST",
					  "/control/block-leases", on_body,
					  NULL, 5000, &r),
			 KVI_OK);
	assert_int_equal(r.status, 200);
	kvt_http_resp_fini(&r);
	json_decref(on_body);
	/* the leader steps down within its renew deadline (2 s) */
	int64_t deadline = kvt_now_ms() + LEASE_MS * 2 / 3 + RETRY_MS + 1500;
	long st = 0;
	for (;;) {
		json_t *lj = clu_get(on(w, l), "/leader", &st);
		bool leads = json_is_true(json_object_get(lj, "is_leader"));
		json_decref(lj);
		if (!leads) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	/* queries still answered everywhere; writes wait for a leader (a
	 * follower redirects to the last holder until its record is a lease
	 * duration old) */
	prefill_and_check(w, idx, 4, 6);
	for (int i = 0; i < w->n; i++) {
		deadline = kvt_now_ms() + LEASE_MS + 2000;
		for (;;) {
			json_decref(clu_post(on(w, i), "/register", "{}", &st));
			if (st == 503) {
				break;
			}
			assert_int_equal(st, i == l ? 503 : 307);
			assert_true(kvt_now_ms() < deadline);
			kvt_sleep_ms(100);
		}
		for (;;) {
			json_t *lj = clu_get(on(w, i), "/leader", &st);
			bool none = json_is_null(json_object_get(lj, "leader"));
			json_decref(lj);
			if (none) {
				break;
			}
			assert_true(kvt_now_ms() < deadline);
			kvt_sleep_ms(100);
		}
	}
	json_t *off_body = json_pack("{s:b}", "on", 0);
	assert_int_equal(kvt_kube_request(&w->kube, "POST",
					  "/control/block-leases", off_body,
					  NULL, 5000, &r),
			 KVI_OK);
	kvt_http_resp_fini(&r);
	json_decref(off_body);
	assert_true(leader(w, LEASE_MS + 2 * RETRY_MS + 3000) >= 0);
	world_stop(w);
}

/* write_to posts body to path on replica i with the bearer token (NULL:
 * none), and returns the status; *location gets a redirect's target. */
static long
write_to(world *w, int i, const char *path, const char *body, const char *token,
	 char *location, size_t len)
{
	char url[128], h[128];
	snprintf(url, sizeof(url), "%s%s", w->r[i].base, path);
	snprintf(h, sizeof(h), "Authorization: Bearer %s", token ? token : "");
	kvt_http_resp r;
	assert_int_equal(
	    kvt_http_request("POST", url, body, token ? h : NULL, 10000, &r),
	    KVI_OK);
	long st = r.status;
	const char *loc =
	    json_string_value(json_object_get(r.json, "location"));
	if (location != NULL) {
		snprintf(location, len, "%s", loc != NULL ? loc : "");
	}
	kvt_http_resp_fini(&r);
	return st;
}

static void
test_register_token(void **state)
{
	world *w = *state;
	char *dir;
	assert_int_equal(kvt_tmpdir_make("kvi-token", &dir), KVI_OK);
	char *path = kvt_path(dir, "token");
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "reg-secret\n");
	fclose(f);
	const char *extra[] = {"--register-token-file", path, NULL};
	int l = world_led_with(w, 2, extra);
	int fo = 1 - l;
	char body[512], loc[256], want[128];
	reg_body(w, PODS - 1, body, sizeof(body));
	snprintf(want, sizeof(want), "%s/register", w->r[l].base);
	assert_int_equal(write_to(w, fo, "/register", body, NULL, NULL, 0),
			 401);
	assert_int_equal(write_to(w, fo, "/register", body, "nope", NULL, 0),
			 403);
	assert_int_equal(
	    write_to(w, fo, "/register", body, "reg-secret", loc, sizeof(loc)),
	    307);
	assert_string_equal(loc, want);
	assert_int_equal(write_to(w, l, "/register", body, NULL, NULL, 0), 401);
	assert_false(workers_has(w, l, "sim/pod-3"));
	assert_int_equal(
	    write_to(w, l, "/register", body, "reg-secret", NULL, 0), 201);
	const char *unreg = "{\"name\":\"sim/pod-3\"}";
	assert_int_equal(write_to(w, fo, "/unregister", unreg, NULL, NULL, 0),
			 401);
	assert_int_equal(write_to(w, l, "/unregister", unreg, "nope", NULL, 0),
			 403);
	assert_int_equal(
	    write_to(w, l, "/unregister", unreg, "reg-secret", NULL, 0), 200);
	world_stop(w);
	kvi_free(path);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_three_replicas, rep_setup,
					    rep_teardown),
	    cmocka_unit_test_setup_teardown(test_paused_leader, rep_setup,
					    rep_teardown),
	    cmocka_unit_test_setup_teardown(test_lease_api_down, rep_setup,
					    rep_teardown),
	    cmocka_unit_test_setup_teardown(test_register_token, rep_setup,
					    rep_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
