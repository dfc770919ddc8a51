/*
 * test_coord_register_shard_down.c - registration over HTTP against a real
 * cluster while a shard is down: the simulator's ranks, two real shards
 * and a coordinator started without a discovery file, so that every pod
 * comes from POST /register.
 *
 * test_register_shard_down: a pod registered while one shard is down is
 * answered 202 "pending" and is not half-registered: the live shard owns
 * none of its listeners. Once the shard is back, the pod registers in the
 * background, on both shards, each owning exactly what /workers says.
 * The helpers are in register_check.h.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "register_check.h"

/* ---- a shard down during registration ------------------------------ */

#define DP8 8

/* coord_metric reads one unlabelled sample of the coordinator's
 * /metrics; -1 when absent. */
static double
coord_metric(cluster *c, const char *name)
{
	char url[128];
	snprintf(url, sizeof(url), "%s/metrics", c->base);
	kvt_http_resp r;
	assert_int_equal(kvt_http_get(url, 5000, &r), KVI_OK);
	assert_int_equal(r.status, 200);
	double v = -1;
	size_t n = strlen(name);
	for (const char *p = r.body; p != NULL && *p != '\0';) {
		if (strncmp(p, name, n) == 0 && p[n] == ' ') {
			v = strtod(p + n + 1, NULL);
			break;
		}
		p = strchr(p, '\n');
		p = p != NULL ? p + 1 : NULL;
	}
	kvt_http_resp_fini(&r);
	return v;
}

/* check_pending checks the 202 answer of a pod registered while shard-1
 * is down. */
static void
check_pending(const json_t *j, const char *name)
{
	assert_string_equal(json_string_value(json_object_get(j, "status")),
			    "pending");
	error_has(j, "shard-1");
	assert_string_equal(json_string_value(json_object_get(j, "name")),
			    name);
	assert_int_equal(json_array_size(json_object_get(j, "listeners")), DP8);
	assert_true(json_is_integer(json_object_get(j, "retry_in_ms")));
}

/* no_half checks that the live shard-0 owns none of pod p's listeners
 * and that /workers shows them all unassigned. */
static void
no_half(cluster *c, int p)
{
	json_t *have = shard_keys(&c->shards[0]);
	for (int r = 0; r < DP8; r++) {
		char key[64];
		snprintf(key, sizeof(key), "sim/pod-%d#%d", p, r);
		if (json_object_get(have, key) != NULL) {
			fail_msg("half-registered: shard-0 owns %s: %s", key,
				 dump(have));
		}
	}
	json_decref(have);
	char name[32];
	pod_name(p, name, sizeof(name));
	for (int r = 0; r < DP8; r++) {
		json_t *ws;
		json_t *l = clu_listener(c, name, r, &ws);
		if (l == NULL || !json_is_null(json_object_get(l, "shard")) ||
		    strcmp(json_string_value(json_object_get(l, "status")),
			   "pending") != 0) {
			fail_msg("%s rank %d should be unassigned: %s", name, r,
				 dump(ws));
		}
		json_decref(ws);
	}
}

static void
test_register_shard_down(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "2", "--dp", "8", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	const char *extra[] = {"--rpc-timeout-ms", "1000", NULL};
	clu_coord(c, false, extra);

	/* shard-1 dies; the coordinator may not have noticed yet, so the
	 * assign to it fails and what went to shard-0 is taken back */
	shc_kill9(&c->shards[1]);
	char body[1024], name0[32], name1[32];
	pod_name(0, name0, sizeof(name0));
	pod_name(1, name1, sizeof(name1));
	pod_body(c, body, sizeof(body), name0, 0, 16);
	json_t *j = post_expect(c, "/register", body, 202);
	check_pending(j, name0);
	json_decref(j);
	no_half(c, 0);

	/* once it is seen down, the registration is refused up front */
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!clu_shard_status_is(c, "shard-1", "down")) {
		if (kvt_now_ms() > deadline) {
			fail_msg("the coordinator did not see shard-1 down");
		}
		kvt_sleep_ms(50);
	}
	pod_body(c, body, sizeof(body), name1, 1, 16);
	j = post_expect(c, "/register", body, 202);
	check_pending(j, name1);
	json_decref(j);
	/* registering it again while pending changes nothing */
	j = post_expect(c, "/register", body, 202);
	check_pending(j, name1);
	json_decref(j);
	/* retries while the shard is away never leave a half pod */
	for (int i = 0; i < 8; i++) {
		no_half(c, 0);
		no_half(c, 1);
		kvt_sleep_ms(100);
	}
	/* a pending pod can be unregistered: it never reaches a shard */
	j = post_expect(c, "/unregister", "{\"name\":\"sim/pod-1\"}", 200);
	assert_int_equal(json_array_size(json_object_get(j, "unregistered")),
			 DP8);
	json_decref(j);
	/* the pending registration is stored: a coordinator restart keeps
	 * it (and forgets pod 1) */
	clu_coord_restart(c);
	assert_int_equal(n_workers(c), 1);
	no_half(c, 0);

	/* shard-1 is back: pod 0 registers in the background */
	shc_restart(&c->shards[1]);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		int assigned = 0;
		json_t *ws = NULL;
		for (int r = 0; r < DP8; r++) {
			json_decref(ws);
			json_t *l = clu_listener(c, name0, r, &ws);
			assigned += l != NULL &&
				    json_is_string(json_object_get(l, "shard"));
		}
		if (assigned == DP8) {
			json_decref(ws);
			break;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("pod 0 did not register: %s", dump(ws));
		}
		json_decref(ws);
		kvt_sleep_ms(100);
	}
	clu_wait_active(c, DP8, CLU_WAIT_MS);
	wait_owners(c, true);
	/* on both shards: rendezvous hashing split the pod, so the
	 * registration really needed the shard that was down */
	json_t *k0 = shard_keys(&c->shards[0]);
	json_t *k1 = shard_keys(&c->shards[1]);
	assert_true(json_object_size(k0) > 0);
	assert_true(json_object_size(k1) > 0);
	assert_int_equal(json_object_size(k0) + json_object_size(k1), DP8);
	double on1 = (double)json_object_size(k1);
	json_decref(k0);
	json_decref(k1);
	/* the unregistered pod 1 never reached a shard */
	for (int r = 0; r < DP8; r++) {
		char key[64];
		snprintf(key, sizeof(key), "sim/pod-1#%d", r);
		assert_false(owned_by_any(c, key, NULL));
	}
	assert_int_equal(n_workers(c), 1);
	/* and every rank of pod 0 is indexed */
	char id0[24];
	pod_id(0, id0, sizeof(id0));
	uint32_t t[NTOK];
	for (int r = 0; r < DP8; r++) {
		make_tokens(t, 50 + (uint32_t)r);
		clu_prefill(c, 0, r, t, NTOK);
		json_decref(wait_match(c, t, id0, r));
	}

	/* unregistered while shard-1 is away: shard-0 drops its part at
	 * once, shard-1 (which kept its part in its store) as soon as it is
	 * back, and nothing brings the pod back */
	assert_int_equal(shc_stop(&c->shards[1]), 0);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!clu_shard_status_is(c, "shard-1", "down")) {
		if (kvt_now_ms() > deadline) {
			fail_msg("the coordinator did not see shard-1 down");
		}
		kvt_sleep_ms(50);
	}
	double orphans = coord_metric(c, "kvindex_coord_orphans_dropped_total");
	j = post_expect(c, "/unregister", "{\"name\":\"sim/pod-0\"}", 200);
	assert_int_equal(json_array_size(json_object_get(j, "unregistered")),
			 DP8);
	json_decref(j);
	k0 = shard_keys(&c->shards[0]);
	assert_int_equal(json_object_size(k0), 0);
	json_decref(k0);
	assert_int_equal(n_workers(c), 0);
	shc_restart(&c->shards[1]);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		k1 = shard_keys(&c->shards[1]);
		size_t left = json_object_size(k1);
		double dropped =
		    coord_metric(c, "kvindex_coord_orphans_dropped_total") -
		    orphans;
		if (left == 0 && dropped >= on1) {
			json_decref(k1);
			break;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("shard-1 still owns %s (%.0f orphans dropped, "
				 "expected %.0f)",
				 dump(k1), dropped, on1);
		}
		json_decref(k1);
		kvt_sleep_ms(100);
	}
	assert_int_equal(n_workers(c), 0);
	for (int i = 0; i < 2; i++) {
		k0 = shard_keys(&c->shards[i]);
		assert_int_equal(json_object_size(k0), 0);
		json_decref(k0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_register_shard_down,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
