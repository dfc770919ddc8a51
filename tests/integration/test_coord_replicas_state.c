/*
 * test_coord_replicas_state.c - what the leader shares through the Lease
 * (replica_check.h): a pin (a listener moved off its shard) and a
 * registration left pending while both shards are paused are known to the
 * follower; kill -9 of the leader: the follower leads, keeps the pin
 * through its ticks, and assigns the pending pod once the shards are back
 * (its prefills match); a shard that never answers is added and drained;
 * the pin moved again, the old leader restarted with its old store (which
 * has neither) follows the Lease's state, and keeps the pin and the drain
 * when it leads after a second kill.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "replica_check.h"

static void
test_shared_state(void **state)
{
	world *w = *state;
	int l = world_led(w, 2);
	int f = 1 - l;

	/* a pin: rank 0 moved off the shard the hash gives it */
	int from = shard_of(w, l, 0), to = 1 - from;
	assert_true(from >= 0);
	move_to(w, l, 0, to);
	wait_shard(w, l, 0, to);
	wait_shard(w, f, 0, to);

	/* a registration no shard can take yet (both paused): pending, and
	 * the follower knows it from the Lease */
	for (int k = 0; k < 2; k++) {
		kill(kvt_proc_pid(w->c.shards[k].proc), SIGSTOP);
	}
	char body[512];
	int http_pod = PODS - 1, i0 = http_pod * DP;
	reg_body(w, http_pod, body, sizeof(body));
	long st = 0;
	json_t *ans = clu_post(on(w, l), "/register", body, &st);
	assert_int_equal(st, 202);
	assert_string_equal(json_string_value(json_object_get(ans, "status")),
			    "pending");
	json_decref(ans);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!workers_has(w, f, "sim/pod-3")) {
		if (kvt_now_ms() > deadline) {
			fail_msg("the follower never listed the pending pod");
		}
		kvt_sleep_ms(100);
	}

	/* the leader killed: the follower leads, with the pin and the
	 * registration, and assigns the pod once the shards are back */
	rep_kill(w, l);
	for (int k = 0; k < 2; k++) {
		kill(kvt_proc_pid(w->c.shards[k].proc), SIGCONT);
	}
	assert_int_equal(leader(w, LEASE_MS + 2 * RETRY_MS + 3000), f);
	clu_wait_active(on(w, f), (FILE_PODS + 1) * DP, CLU_WAIT_MS);
	const int reg[] = {i0, i0 + 1};
	prefill_and_check(w, reg, 2, 5);
	kvt_sleep_ms(1500); /* ticks of the new leader: the pin holds */
	assert_int_equal(shard_of(w, f, 0), to);

	/* a drain: of a shard added with nothing behind it, which never
	 * answers, so the drain stays until the end; its port is held, not
	 * listened on, so that nothing else comes to answer there */
	int dead;
	int dead_fd = kvt_port_refusing(&dead);
	assert_true(dead_fd >= 0);
	char add[128];
	snprintf(add, sizeof(add),
		 "{\"id\": \"shard-2\", \"endpoint\": "
		 "\"tcp://127.0.0.1:%d\"}",
		 dead);
	assert_int_equal(
	    clu_admin(on(w, f), "POST", "/admin/shards", add, NULL), 201);
	long ds =
	    clu_admin(on(w, f), "DELETE", "/admin/shards/shard-2", NULL, NULL);
	assert_true(ds == 200 || ds == 202);
	assert_true(clu_shard_status_is(on(w, f), "shard-2", "draining"));

	/* the pin changed while the old leader is down; restarted with its
	 * old store, it follows the Lease, and keeps the Lease's state when
	 * it leads again */
	move_to(w, f, 0, from);
	wait_shard(w, f, 0, from);
	rep_start(w, l);
	assert_int_equal(leader(w, 10000), f);
	wait_shard(w, l, 0, from);
	assert_true(workers_has(w, l, "sim/pod-3"));
	rep_kill(w, f);
	assert_int_equal(leader(w, LEASE_MS + 2 * RETRY_MS + 3000), l);
	kvt_sleep_ms(1500);
	assert_int_equal(shard_of(w, l, 0), from);
	assert_true(clu_shard_status_is(on(w, l), "shard-2", "draining"));
	const int idx[] = {0, 1, i0, i0 + 1};
	prefill_and_check(w, idx, 4, 6);
	world_stop(w);
	close(dead_fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_shared_state, rep_setup,
					    rep_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
