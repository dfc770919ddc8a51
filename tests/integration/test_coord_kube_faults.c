/*
 * test_coord_kube_faults.c - the coordinator's pod watcher when the
 * Kubernetes API misbehaves, end to end (a test API server, a real
 * coordinator, two real shards, the engine simulator):
 *
 *  - a wrong token: a clear error, /ready 503 until the first list
 *    succeeds, retries with backoff, and ready once the token file is
 *    right;
 *  - watch streams cut mid-event and batched (chunking modes);
 *  - the watch down while pods change, then history compacted: the watch
 *    from the old resourceVersion gets 410 Gone, the watcher lists again
 *    and ends with exactly the pods the API has (a missed deletion is
 *    applied, nothing registered twice);
 *  - the API server restarted: pods stay registered while it is down, and
 *    changes after the restart are seen;
 *  - the token rotated on the server: 401s are counted and retried, pods
 *    stay registered, and the new token in the file is picked up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "kube_check.h"

#define NTOK 64

static const char *unauthorized = "kvindex_coord_kube_unauthorized_total";

/* wait_metric waits until the coordinator's sample is at least want. */
static void
wait_metric(kcluster *k, const char *sample, double want)
{
	int64_t deadline = kvt_now_ms() + KC_WAIT_MS;
	double v;
	while ((v = clu_metric(&k->c, sample)) < want) {
		if (kvt_now_ms() > deadline) {
			fail_msg("%s is %g, want >= %g", sample, v, want);
		}
		kvt_sleep_ms(100);
	}
}

/* log_has says whether the coordinator's log contains needle. */
static bool
log_has(kcluster *k, const char *needle)
{
	size_t len;
	char *text = kvt_file_read(k->c.log_path, &len);
	bool has = text != NULL && strstr(text, needle) != NULL;
	kvi_free(text);
	return has;
}

static void
test_kube_faults(void **state)
{
	(void)state;
	kcluster kk, *k = &kk;
	kc_start(k, 3, "good-token");
	kvt_sim *sim = &k->c.sim;
	kc_put(k, "engine-0", sim, 0, "127.0.0.1", true, 0, "engine");
	kc_put(k, "engine-1", sim, 1, "127.0.0.1", true, 0, "engine");

	/* a wrong token: not ready, a clear error, retried */
	kc_coord(k, "wrong-token");
	wait_metric(k, unauthorized, 2);
	long st;
	json_t *r = clu_get(&k->c, "/ready", &st);
	assert_int_equal(st, 503);
	const char *why = json_string_value(json_object_get(r, "reason"));
	assert_non_null(why);
	assert_non_null(strstr(why, "kubernetes"));
	json_decref(r);
	assert_true(log_has(k, "refused the token"));
	assert_true(kvt_kube_stat(&k->api, "unauthorized") >= 2);
	char want[4096] = "";
	kc_wait_workers(k, "", 100);
	/* the right token: listed, registered, ready */
	kc_token_file(k, "good-token");
	kc_expect(want, sizeof(want), "engine-0", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_expect(want, sizeof(want), "engine-1", 2, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_wait_workers(k, want, KC_WAIT_MS + 30000);
	r = clu_get(&k->c, "/ready", &st);
	json_decref(r);
	assert_int_equal(st, 200);

	/* events cut mid-line, then several in one chunk */
	assert_int_equal(kvt_kube_set_chunking(&k->api, "split"), KVI_OK);
	kc_put(k, "engine-1", sim, 1, "127.0.0.1", true, 1, "engine");
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-0", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_expect(want, sizeof(want), "engine-1", 1, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	assert_int_equal(kvt_kube_set_chunking(&k->api, "batch"), KVI_OK);
	kc_put(k, "engine-1", sim, 1, "127.0.0.1", true, 2, "engine");
	kc_put(k, "engine-0", sim, 0, "127.0.0.1", true, 1, "engine");
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-0", 1, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_expect(want, sizeof(want), "engine-1", 2, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	assert_int_equal(kvt_kube_set_chunking(&k->api, "line"), KVI_OK);

	/* the watch down while pods change, history compacted: 410, relist */
	double relists = clu_metric(&k->c, "kvindex_coord_kube_relists_total");
	double unassign_ok =
	    clu_metric(&k->c, "kvindex_coord_unassign_total{result=\"ok\"}");
	assert_int_equal(kvt_kube_block_watches(&k->api, true), KVI_OK);
	assert_int_equal(kvt_kube_drop_watches(&k->api), KVI_OK);
	kc_delete(k, "engine-0");
	kc_put(k, "engine-2", sim, 2, "127.0.0.1", true, 0, "engine");
	kc_put(k, "engine-1", sim, 1, "127.0.0.1", true, 1, "engine");
	assert_int_equal(kvt_kube_compact(&k->api), KVI_OK);
	kvt_sleep_ms(500);
	/* nothing seen while the watch is down */
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-0", 1, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_expect(want, sizeof(want), "engine-1", 2, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_wait_workers(k, want, 100);
	assert_int_equal(kvt_kube_block_watches(&k->api, false), KVI_OK);
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-1", 1, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_expect(want, sizeof(want), "engine-2", 2, "127.0.0.1",
		  sim->zmq_port[4]);
	kc_wait_workers(k, want, KC_WAIT_MS + 30000);
	assert_true(clu_metric(&k->c, "kvindex_coord_kube_relists_total") >
		    relists);
	assert_true(kvt_kube_stat(&k->api, "gone") >= 1);
	/* engine-0's rank and engine-1's rank 1 unassigned, once each */
	wait_metric(k, "kvindex_coord_unassign_total{result=\"ok\"}",
		    unassign_ok + 2);
	uint32_t t[NTOK];
	kc_tokens(t, NTOK, 11);
	kc_prefill(sim, 2, 1, t, NTOK);
	kc_wait_matched(k, t, NTOK, "engine-2", 1, NTOK);

	/* the API server restarted: nothing lost while it is down */
	kvt_kube_kill(&k->api);
	kvt_sleep_ms(1500);
	kc_wait_workers(k, want, 100);
	assert_int_equal(kvt_kube_restart(&k->api, 10000), KVI_OK);
	kc_put(k, "engine-0", sim, 0, "127.0.0.1", true, 0, "engine");
	kc_expect(want, sizeof(want), "engine-0", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_wait_workers(k, want, KC_WAIT_MS + 30000);

	/* the token rotated on the server: 401s, pods kept, then the new
	 * token from the file */
	double unauth = clu_metric(&k->c, unauthorized);
	assert_int_equal(kvt_kube_set_token(&k->api, "rotated"), KVI_OK);
	assert_int_equal(kvt_kube_drop_watches(&k->api), KVI_OK);
	wait_metric(k, unauthorized, unauth + 2);
	kc_wait_workers(k, want, 100);
	kc_token_file(k, "rotated");
	kc_delete(k, "engine-2");
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-0", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_expect(want, sizeof(want), "engine-1", 1, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_wait_workers(k, want, KC_WAIT_MS + 30000);
	kc_cleanup(k);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kube_faults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
