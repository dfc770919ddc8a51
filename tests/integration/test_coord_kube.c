/*
 * test_coord_kube.c - pods discovered from Kubernetes, end to end: a test
 * API server (kvindex-kubeapi) feeds a real coordinator's pod watcher,
 * which registers the pods' ranks on two real shards fed by the engine
 * simulator. After every step the cluster is checked through /workers and
 * through /query against prefills run on the simulated engines:
 *
 *  - pods appearing: a DP=2 pod (--watch-dp-size 2) is two listeners on
 *    ports +0 and +1, a pod annotated kvindex.io/dp-size=1 is one, a pod
 *    of another label or never Ready is none, a pod in a second watched
 *    namespace counts too; a rank-1 prefill matches on rank 1;
 *  - an annotation changed: dp-size 1 -> 2 adds rank 1;
 *  - a NotReady blip shorter than the grace keeps the listeners (nothing
 *    unassigned); a long NotReady removes them, not before the grace;
 *    Ready again brings them back;
 *  - an IP change (with new ports) moves the listeners to the new address;
 *  - deletion and termination remove a pod's listeners at once.
 *
 * test_kube_refused: a second pod on the endpoint of a registered one is
 * skipped, with a warning naming the listener that keeps it, counted once
 * however many watch events follow; once the first pod is deleted, the
 * second is registered. A pod annotated with a dp-size over --max-dp-size
 * (1024) is rejected, and counted.
 *
 * test_kube_engine_args: a pod with no kvindex.io annotation but its
 * engine's command line (`sh -c "vllm serve m --data-parallel-size 2
 * --kv-events-config '{...}'"`) is two listeners on the ports its
 * --kv-events-config names, which /workers says came from engine_args; a
 * pod whose dp-size annotation disagrees with its engine's arguments, and
 * one whose engine's DP size is set by the shell with no annotation, are
 * not registered, logged with the reason and counted as unregistrable; the
 * second is registered once annotated.
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
#include "kube_check.h"

#define NTOK 64

static const char *unassigned_ok =
    "kvindex_coord_unassign_total{result=\"ok\"}";

static void
test_kube_pods(void **state)
{
	(void)state;
	kcluster kk, *k = &kk;
	kc_start(k, 3, "tok-1");
	kvt_sim *sim = &k->c.sim;
	kc_put(k, "engine-0", sim, 0, "127.0.0.1", true, 0, "engine");
	kc_put(k, "engine-1", sim, 1, "127.0.0.1", true, 1, "engine");
	kc_put(k, "other-0", sim, 2, "127.0.0.1", true, 0, "other");
	kc_put(k, "engine-2", sim, 2, "127.0.0.1", false, 0, "engine");
	/* a pod in the second watched namespace */
	char port4[16], replay4[16];
	snprintf(port4, sizeof(port4), "%d", sim->zmq_port[4]);
	snprintf(replay4, sizeof(replay4), "%d", sim->replay_port[4]);
	json_t *solo = kvt_kube_pod(
	    "127.0.0.1", true,
	    (const char *const[]){"app", "engine", "kvindex.io/model",
				  "sim-model", NULL},
	    (const char *const[]){"kvindex.io/zmq-port", port4,
				  "kvindex.io/replay-port", replay4,
				  "kvindex.io/dp-size", "1", NULL});
	assert_int_equal(kvt_kube_put_pod(&k->api, KC_NS2, "solo", solo, NULL),
			 KVI_OK);
	json_decref(solo);
	kc_coord(k, "tok-1");

	/* appearing: DP=2 from the flag, DP=1 from the annotation */
	char want[4096] = "";
	kc_expect(want, sizeof(want), "engine-0", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_expect(want, sizeof(want), "engine-1", 1, "127.0.0.1",
		  sim->zmq_port[2]);
	char with_solo[4200];
	snprintf(with_solo, sizeof(with_solo),
		 "%s," KC_NS2 "/solo#0=tcp://127.0.0.1:%d", want,
		 sim->zmq_port[4]);
	kc_wait_workers(k, with_solo, KC_WAIT_MS);
	assert_int_equal(kvt_kube_delete_pod(&k->api, KC_NS2, "solo"), KVI_OK);
	kc_wait_workers(k, want, KC_WAIT_MS);
	long st;
	json_t *r = clu_get(&k->c, "/ready", &st);
	json_decref(r);
	assert_int_equal(st, 200);

	uint32_t a[NTOK], b[NTOK], c[NTOK];
	kc_tokens(a, NTOK, 1);
	kc_prefill(sim, 0, 1, a, NTOK);
	kc_wait_matched(k, a, NTOK, "engine-0", 1, NTOK);
	assert_int_equal(kc_matched(k, a, NTOK, "engine-0", 0), 0);
	/* rank 1 of the DP=1 pod is not a listener; rank 0 is */
	kc_tokens(b, NTOK, 2);
	kc_prefill(sim, 1, 1, b, NTOK);
	kc_prefill(sim, 1, 0, a, NTOK);
	kc_wait_matched(k, a, NTOK, "engine-1", 0, NTOK);
	assert_int_equal(kc_matched(k, b, NTOK, "engine-1", 1), 0);

	/* an annotation changed: dp-size 1 -> 2 */
	kc_put(k, "engine-1", sim, 1, "127.0.0.1", true, 2, "engine");
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-0", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_expect(want, sizeof(want), "engine-1", 2, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	kc_tokens(c, NTOK, 3);
	kc_prefill(sim, 1, 1, c, NTOK);
	kc_wait_matched(k, c, NTOK, "engine-1", 1, NTOK);

	/* a NotReady blip: nothing is unassigned, the index stays */
	double unassigned = clu_metric(&k->c, unassigned_ok);
	kc_put(k, "engine-0", sim, 0, "127.0.0.1", false, 0, "engine");
	kvt_sleep_ms(KC_GRACE_MS / 3);
	kc_wait_workers(k, want, 1000);
	kc_put(k, "engine-0", sim, 0, "127.0.0.1", true, 0, "engine");
	kvt_sleep_ms(KC_GRACE_MS);
	kc_wait_workers(k, want, 1000);
	assert_true(clu_metric(&k->c, unassigned_ok) == unassigned);
	assert_int_equal(kc_matched(k, a, NTOK, "engine-0", 1), NTOK);

	/* a long NotReady: gone once the grace ran out, not before */
	int64_t t0 = kvt_now_ms();
	kc_put(k, "engine-1", sim, 1, "127.0.0.1", false, 2, "engine");
	char only0[1024] = "";
	kc_expect(only0, sizeof(only0), "engine-0", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_wait_workers(k, only0, KC_GRACE_MS + KC_WAIT_MS);
	assert_true(kvt_now_ms() - t0 >= KC_GRACE_MS - 100);
	/* /workers drops the pod at once; the shards' answers to the
	 * unassigns are counted when they come */
	int64_t until = kvt_now_ms() + KC_WAIT_MS;
	while (clu_metric(&k->c, unassigned_ok) < unassigned + 2 &&
	       kvt_now_ms() < until) {
		kvt_sleep_ms(20);
	}
	assert_true(clu_metric(&k->c, unassigned_ok) >= unassigned + 2);
	assert_int_equal(kc_matched(k, c, NTOK, "engine-1", 1), 0);
	/* Ready again: back, and what it holds is indexed again */
	kc_put(k, "engine-1", sim, 1, "127.0.0.1", true, 2, "engine");
	kc_wait_workers(k, want, KC_WAIT_MS);
	kc_wait_matched(k, c, NTOK, "engine-1", 1, NTOK);

	/* an IP change: engine-0 now runs on another host (a second
	 * simulator on 127.0.0.2, with other ports) */
	kvt_sim simb;
	const char *bflags[] = {"--pods", "1",         "--dp",         "2",
				"--ip",   "127.0.0.2", "--block-size", "16",
				NULL};
	assert_int_equal(kvt_sim_start(KVI_SIM_BIN, bflags, 10000, &simb),
			 KVI_OK);
	kc_put(k, "engine-0", &simb, 0, "127.0.0.2", true, 0, "engine");
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-0", 2, "127.0.0.2",
		  simb.zmq_port[0]);
	kc_expect(want, sizeof(want), "engine-1", 2, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	uint32_t d[NTOK], e[NTOK];
	kc_tokens(d, NTOK, 4);
	kc_prefill(&simb, 0, 1, d, NTOK);
	kc_wait_matched(k, d, NTOK, "engine-0", 1, NTOK);
	/* the old address is no longer listened to */
	kc_tokens(e, NTOK, 5);
	kc_prefill(sim, 0, 1, e, NTOK);
	kvt_sleep_ms(500);
	assert_int_equal(kc_matched(k, e, NTOK, "engine-0", 1), 0);

	/* deletion: at once */
	kc_delete(k, "engine-1");
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-0", 2, "127.0.0.2",
		  simb.zmq_port[0]);
	t0 = kvt_now_ms();
	kc_wait_workers(k, want, KC_WAIT_MS);
	assert_true(kvt_now_ms() - t0 < KC_GRACE_MS);
	assert_int_equal(kc_matched(k, c, NTOK, "engine-1", 1), 0);

	/* terminating: at once too, without waiting for the grace */
	json_t *pod = kvt_kube_pod("127.0.0.2", true,
				   (const char *const[]){"app", "engine",
							 "kvindex.io/model",
							 "sim-model", NULL},
				   NULL);
	kvt_kube_pod_terminating(pod);
	kc_put_json(k, "engine-0", pod);
	json_decref(pod);
	t0 = kvt_now_ms();
	kc_wait_workers(k, "", KC_WAIT_MS);
	assert_true(kvt_now_ms() - t0 < KC_GRACE_MS);

	kvt_sim_stop(&simb, NULL);
	kc_cleanup(k);
}

static const char *refused_kube_endpoint =
    "kvindex_coord_registrations_refused_total{source=\"kubernetes\","
    "reason=\"endpoint\"}";
static const char *refused_kube_dp =
    "kvindex_coord_registrations_refused_total{source=\"kubernetes\","
    "reason=\"dp_size\"}";

/* log_has says whether the coordinator's log has text. */
static bool
log_has(kcluster *k, const char *text)
{
	char *log = kvt_file_read(k->c.log_path, NULL);
	assert_non_null(log);
	bool has = strstr(log, text) != NULL;
	kvi_free(log);
	return has;
}

static bool
dp_rejected(void *arg)
{
	return log_has(arg, "event=pod_rejected source=kubernetes "
			    "pod=ml/engine-d reason=dp_size");
}

static void
test_kube_refused(void **state)
{
	(void)state;
	kcluster kk, *k = &kk;
	kc_start(k, 2, "tok-1");
	kvt_sim *sim = &k->c.sim;
	kc_put(k, "engine-a", sim, 0, "127.0.0.1", true, 0, "engine");
	kc_coord(k, "tok-1");
	char want[1024] = "";
	kc_expect(want, sizeof(want), "engine-a", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_wait_workers(k, want, KC_WAIT_MS);

	/* engine-b on engine-a's endpoint: skipped, engine-c registered */
	kc_put(k, "engine-b", sim, 0, "127.0.0.1", true, 0, "engine");
	kc_put(k, "engine-c", sim, 1, "127.0.0.1", true, 0, "engine");
	kc_expect(want, sizeof(want), "engine-c", 2, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	assert_true(log_has(k, "event=pod_skipped source=kubernetes "
			       "pod=ml/engine-b reason=endpoint "
			       "kept_by=ml/engine-a#0"));
	/* more events: said and counted once */
	kc_put(k, "engine-c", sim, 1, "127.0.0.1", false, 0, "engine");
	kc_put(k, "engine-c", sim, 1, "127.0.0.1", true, 0, "engine");
	kvt_sleep_ms(500);
	kc_wait_workers(k, want, KC_WAIT_MS);
	assert_true(clu_metric(&k->c, refused_kube_endpoint) == 1);

	/* engine-a deleted: engine-b takes the endpoint */
	kc_delete(k, "engine-a");
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-b", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_expect(want, sizeof(want), "engine-c", 2, "127.0.0.1",
		  sim->zmq_port[2]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	uint32_t t[NTOK];
	kc_tokens(t, NTOK, 9);
	kc_prefill(sim, 0, 1, t, NTOK);
	kc_wait_matched(k, t, NTOK, "engine-b", 1, NTOK);

	/* more ranks than a pod may have */
	kc_put(k, "engine-d", sim, 1, "127.0.0.4", true, 1025, "engine");
	assert_true(kvt_wait_until(dp_rejected, k, KC_WAIT_MS));
	assert_true(clu_metric(&k->c, refused_kube_dp) == 1);
	kc_wait_workers(k, want, KC_WAIT_MS);
	kc_cleanup(k);
}

/* engine_pod stores pod name in namespace ml: Ready at 127.0.0.1, the
 * annotations ann (NULL-terminated pairs, NULL: none), and one container
 * "vllm" running script through /bin/sh -c. */
static void
engine_pod(kcluster *k, const char *name, const char *const *ann,
	   const char *script)
{
	const char *labels[] = {"app", "engine", "kvindex.io/model",
				"sim-model", NULL};
	json_t *pod = kvt_kube_pod("127.0.0.1", true, labels, ann);
	json_object_set_new(pod, "spec",
			    json_pack("{s:[{s:s,s:s,s:[s,s,s]}]}", "containers",
				      "name", "vllm", "image",
				      "vllm/vllm-openai", "command", "/bin/sh",
				      "-c", script));
	kc_put_json(k, name, pod);
	json_decref(pod);
}

/* vllm_script writes the engine's command line: dp as given, and the KV
 * events on port and replay. */
static void
vllm_script(char *buf, size_t len, const char *dp, int port, int replay)
{
	snprintf(buf, len,
		 "exec vllm serve sim-model --data-parallel-size %s "
		 "--kv-events-config '{\"enable_kv_cache_events\": true, "
		 "\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:%d\", "
		 "\"replay_endpoint\": \"tcp://*:%d\"}' 2>&1",
		 dp, port, replay);
}

/* settings_of returns /workers' settings of pod ml/name (json_decref the
 * returned document: *settings points into it). */
static json_t *
settings_of(kcluster *k, const char *name, json_t **settings)
{
	char path[128];
	long st;
	snprintf(path, sizeof(path), "/workers?name=" KC_NS "/%s", name);
	json_t *ws = clu_get(&k->c, path, &st);
	assert_int_equal(st, 200);
	assert_int_equal(json_array_size(ws), 1);
	*settings = json_object_get(json_array_get(ws, 0), "settings");
	assert_non_null(*settings);
	return ws;
}

static void
want_setting(json_t *settings, const char *key, json_int_t value,
	     const char *from)
{
	json_t *s = json_object_get(settings, key);
	json_t *v = json_object_get(s, "value");
	const char *f = json_string_value(json_object_get(s, "from"));
	if (!json_is_integer(v) || json_integer_value(v) != value ||
	    f == NULL || strcmp(f, from) != 0) {
		char *text = json_dumps(settings, JSON_COMPACT);
		fail_msg("settings.%s: want %" JSON_INTEGER_FORMAT
			 " from %s in %s",
			 key, value, from, text);
	}
}

static const char *unregistrable =
    "kvindex_coord_kube_pods{state=\"unregistrable\"}";

static bool
disagree_logged(void *arg)
{
	return log_has(arg, "pod=\"ml/engine-y\" why=\"annotation "
			    "kvindex.io/dp-size=1 disagrees with the engine's "
			    "--data-parallel-size 2\"");
}

static bool
shell_set_logged(void *arg)
{
	return log_has(arg, "pod=\"ml/engine-z\" why=\"the engine's "
			    "--data-parallel-size is $DP_SIZE, set when the "
			    "container starts: annotate kvindex.io/dp-size\"");
}

static void
test_kube_engine_args(void **state)
{
	(void)state;
	kcluster kk, *k = &kk;
	kc_start(k, 3, "tok-1");
	kvt_sim *sim = &k->c.sim;
	kc_coord(k, "tok-1");
	/* no annotation but the model: the engine's arguments say it all */
	char script[512];
	vllm_script(script, sizeof(script), "2", sim->zmq_port[0],
		    sim->replay_port[0]);
	engine_pod(k, "engine-x", NULL, script);
	char want[1024] = "";
	kc_expect(want, sizeof(want), "engine-x", 2, "127.0.0.1",
		  sim->zmq_port[0]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	json_t *settings;
	json_t *ws = settings_of(k, "engine-x", &settings);
	want_setting(settings, "dp_size", 2, "engine_args");
	want_setting(settings, "dp_start_rank", 0, "engine_args");
	want_setting(settings, "zmq_port", sim->zmq_port[0], "engine_args");
	want_setting(settings, "replay_port", sim->replay_port[0],
		     "engine_args");
	want_setting(settings, "block_size", 16, "default");
	json_t *engine = json_object_get(settings, "engine");
	assert_string_equal(json_string_value(json_object_get(engine, "kind")),
			    "vllm");
	assert_string_equal(
	    json_string_value(json_object_get(engine, "container")), "vllm");
	assert_string_equal(
	    json_string_value(json_object_get(engine, "kv_events")), "enabled");
	json_decref(ws);
	/* rank 1 is heard on the port the engine's arguments gave it */
	uint32_t t[NTOK];
	kc_tokens(t, NTOK, 11);
	kc_prefill(sim, 0, 1, t, NTOK);
	kc_wait_matched(k, t, NTOK, "engine-x", 1, NTOK);

	/* an annotation that disagrees with the engine: refused */
	assert_true(clu_metric(&k->c, unregistrable) == 0);
	vllm_script(script, sizeof(script), "2", sim->zmq_port[2],
		    sim->replay_port[2]);
	engine_pod(k, "engine-y",
		   (const char *const[]){"kvindex.io/dp-size", "1", NULL},
		   script);
	assert_true(kvt_wait_until(disagree_logged, k, KC_WAIT_MS));
	assert_true(clu_metric(&k->c, unregistrable) == 1);

	/* a DP size the shell sets, with no annotation: refused */
	vllm_script(script, sizeof(script), "$DP_SIZE", sim->zmq_port[4],
		    sim->replay_port[4]);
	engine_pod(k, "engine-z", NULL, script);
	assert_true(kvt_wait_until(shell_set_logged, k, KC_WAIT_MS));
	assert_true(clu_metric(&k->c, unregistrable) == 2);
	kc_wait_workers(k, want, KC_WAIT_MS);
	/* annotated, it is registered, and /workers says so */
	engine_pod(k, "engine-z",
		   (const char *const[]){"kvindex.io/dp-size", "2", NULL},
		   script);
	kc_expect(want, sizeof(want), "engine-z", 2, "127.0.0.1",
		  sim->zmq_port[4]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	ws = settings_of(k, "engine-z", &settings);
	want_setting(settings, "dp_size", 2, "annotation");
	want_setting(settings, "zmq_port", sim->zmq_port[4], "engine_args");
	json_decref(ws);
	assert_true(clu_metric(&k->c, unregistrable) == 1);
	kc_cleanup(k);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kube_pods),
	    cmocka_unit_test(test_kube_refused),
	    cmocka_unit_test(test_kube_engine_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
