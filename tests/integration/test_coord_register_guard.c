/*
 * test_coord_register_guard.c - what the coordinator refuses to register,
 * against a real cluster (the simulator, two shards, a coordinator):
 *
 * test_endpoint_http: one endpoint is one listener. A pod registered per
 * pod; its endpoint registered again under another name, as an instance
 * id (the per-rank form), and with "localhost" for 127.0.0.1: each 409
 * naming the listener that has it, nothing added; the same pod again is
 * 200. /query then lists the engine's rank once, and its best is the pod.
 * Once the pod is unregistered, its endpoint can be registered again.
 *
 * test_endpoint_file: a pod of the discovery file whose endpoint an HTTP
 * registration has is skipped - a warning naming the listener that keeps
 * it, counted once however many times the file is read - and the rest of
 * the file registered; once the HTTP pod is unregistered, the file's pod
 * is registered without the file changing.
 *
 * test_dp_size_cap: a pod may have --max-dp-size ranks (1024 unless
 * given), whatever its source: over HTTP one more is 400 naming the cap
 * and exactly the cap is taken; a discovery file's pod over it is
 * rejected (logged and counted) and the file's others registered; a
 * --watch-dp-size over the cap stops the start.
 *
 * test_memory_given_back: 20 pods of 1,000 ranks registered and
 * unregistered: the coordinator's resident memory comes back near where
 * it was before (it stayed at the peak).
 *
 * The Kubernetes source is test_coord_kube's.
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
#include "register_check.h"

static const char *refused_http_endpoint =
    "kvindex_coord_registrations_refused_total{source=\"http\","
    "reason=\"endpoint\"}";
static const char *refused_file_endpoint =
    "kvindex_coord_registrations_refused_total{source=\"file\","
    "reason=\"endpoint\"}";

/* refused409 posts body, expects 409 naming holder, and the "listener"
 * field to be holder. */
static void
refused409(cluster *c, const char *body, const char *holder)
{
	json_t *j = post_expect(c, "/register", body, 409);
	error_has(j, holder);
	error_has(j, "one endpoint is one listener");
	const char *l = json_string_value(json_object_get(j, "listener"));
	if (l == NULL || strcmp(l, holder) != 0) {
		fail_msg("409 without listener %s: %s", holder, dump(j));
	}
	json_decref(j);
}

static void
test_endpoint_http(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "2", "--dp", "2", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, false, NULL);

	char body[1024], id0[24];
	pod_id(0, id0, sizeof(id0));
	pod_body(c, body, sizeof(body), "sim/pod-0", 0, 16);
	json_decref(post_expect(c, "/register", body, 201));
	clu_wait_active(c, 2, CLU_WAIT_MS);

	/* another name, the same ports */
	char other[1024];
	pod_body(c, other, sizeof(other), "ns/other", 0, 16);
	refused409(c, other, "sim/pod-0#0");
	/* the per-rank form, on rank 1's endpoint */
	snprintf(other, sizeof(other),
		 "{\"instance_id\":77,\"dp_rank\":0,"
		 "\"endpoint\":\"tcp://127.0.0.1:%d\","
		 "\"model_name\":\"sim-model\",\"block_size\":16}",
		 c->sim.zmq_port[1]);
	refused409(c, other, "sim/pod-0#1");
	/* localhost for 127.0.0.1 */
	snprintf(other, sizeof(other),
		 "{\"name\":\"ns/local\",\"ip\":\"localhost\",\"zmq_port\":%d,"
		 "\"dp_size\":2,\"model_name\":\"sim-model\","
		 "\"block_size\":16}",
		 c->sim.zmq_port[0]);
	refused409(c, other, "sim/pod-0#0");
	snprintf(other, sizeof(other),
		 "{\"instance_id\":78,\"endpoint\":\"tcp://localhost:%d\","
		 "\"model_name\":\"sim-model\",\"block_size\":16}",
		 c->sim.zmq_port[1]);
	refused409(c, other, "sim/pod-0#1");
	assert_true(clu_metric(c, refused_http_endpoint) == 4);
	/* the same pod again is still 200 */
	json_t *j = post_expect(c, "/register", body, 200);
	assert_true(json_is_true(json_object_get(j, "existed")));
	json_decref(j);
	assert_int_equal(n_workers(c), 1);

	/* the engine's rank is listed once, on the pod */
	uint32_t t[NTOK];
	make_tokens(t, 30);
	clu_prefill(c, 0, 1, t, NTOK);
	j = wait_match(c, t, id0, 1);
	assert_int_equal(json_array_size(json_object_get(j, "workers")), 1);
	assert_int_equal(json_object_size(json_object_get(j, "scores")), 1);
	json_decref(j);

	/* unregistered, the endpoint is free again */
	json_decref(
	    post_expect(c, "/unregister", "{\"name\":\"sim/pod-0\"}", 200));
	pod_body(c, other, sizeof(other), "ns/other", 0, 16);
	json_decref(post_expect(c, "/register", other, 201));
	clu_wait_active(c, 2, CLU_WAIT_MS);
}

/* write_file writes the discovery file at path with the simulator's pods
 * listed in pods[0..n). */
static void
write_file(cluster *c, const char *path, const int *pods, int n)
{
	char *tmp = kvi_malloc(strlen(path) + 8);
	sprintf(tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	assert_non_null(f);
	fprintf(f, "{\"pods\": [");
	for (int k = 0; k < n; k++) {
		int i = pods[k] * c->sim.dp;
		fprintf(f,
			"%s{\"name\":\"sim/pod-%d\",\"ip\":\"127.0.0.1\","
			"\"zmq_port\":%d,\"replay_port\":%d,\"recover_port\":"
			"%d,\"dp_size\":%d,\"model\":\"sim-model\","
			"\"block_size\":16}",
			k ? "," : "", pods[k], c->sim.zmq_port[i],
			c->sim.replay_port[i], c->sim.recover_port[i],
			c->sim.dp);
	}
	fprintf(f, "]}\n");
	fclose(f);
	assert_int_equal(rename(tmp, path), 0);
	kvi_free(tmp);
}

/* log_count returns how many times text is in the coordinator's log. */
static int
log_count(cluster *c, const char *text)
{
	char *log = kvt_file_read(c->log_path, NULL);
	assert_non_null(log);
	int n = 0;
	for (const char *p = log; (p = strstr(p, text)) != NULL; p++) {
		n++;
	}
	kvi_free(log);
	return n;
}

typedef struct log_wait {
	cluster *c;
	const char *text;
	int n;
} log_wait;

static bool
log_reaches(void *arg)
{
	log_wait *w = arg;
	return log_count(w->c, w->text) >= w->n;
}

static void
test_endpoint_file(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "3", "--dp", "2", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	char *dir;
	assert_int_equal(kvt_tmpdir_make("kvi-dfile", &dir), KVI_OK);
	char *path = kvt_path(dir, "pods.json");
	const int first[] = {1};
	write_file(c, path, first, 1);
	const char *extra[] = {"--discovery-file", path, NULL};
	clu_coord(c, false, extra);
	clu_wait_active(c, 2, CLU_WAIT_MS);

	/* an HTTP pod on pod 0's ports, then the file lists pod 0 too */
	char body[1024];
	pod_body(c, body, sizeof(body), "ns/http", 0, 16);
	json_decref(post_expect(c, "/register", body, 201));
	/* a file pod's endpoint is not the HTTP client's to take */
	pod_body(c, body, sizeof(body), "ns/http2", 1, 16);
	refused409(c, body, "sim/pod-1#0");
	const int all[] = {0, 1, 2};
	write_file(c, path, all, 3);
	log_wait w = {c, "pod_skipped source=file pod=sim/pod-0", 1};
	assert_true(kvt_wait_until(log_reaches, &w, CLU_WAIT_MS));
	assert_true(log_count(c, "kept_by=ns/http#0") >= 1);
	clu_wait_active(c, 6, CLU_WAIT_MS); /* ns/http, pods 1 and 2 */
	assert_true(clu_metric(c, refused_file_endpoint) == 1);
	/* read again (another order): not said or counted again */
	const int again[] = {2, 0, 1};
	write_file(c, path, again, 3);
	log_wait synced = {c, "source_synced source=file pods=3", 2};
	assert_true(kvt_wait_until(log_reaches, &synced, CLU_WAIT_MS));
	assert_int_equal(log_count(c, "pod_skipped source=file pod=sim/pod-0 "
				      "reason=endpoint kept_by"),
			 1);
	assert_true(clu_metric(c, refused_file_endpoint) == 1);
	json_t *ws;
	assert_null(clu_listener(c, "sim/pod-0", 0, &ws));
	json_decref(ws);

	/* the HTTP pod goes: the file's pod 0 comes, the file unchanged */
	json_decref(
	    post_expect(c, "/unregister", "{\"name\":\"ns/http\"}", 200));
	clu_wait_active(c, 6, CLU_WAIT_MS);
	json_t *l = clu_listener(c, "sim/pod-0", 1, &ws);
	assert_non_null(l);
	json_decref(ws);
	uint32_t t[NTOK];
	char id0[24];
	pod_id(0, id0, sizeof(id0));
	make_tokens(t, 40);
	clu_prefill(c, 0, 1, t, NTOK);
	json_decref(wait_match(c, t, id0, 1));
	kvi_free(path);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
}

static const char *refused_http_dp =
    "kvindex_coord_registrations_refused_total{source=\"http\","
    "reason=\"dp_size\"}";
static const char *refused_file_dp =
    "kvindex_coord_registrations_refused_total{source=\"file\","
    "reason=\"dp_size\"}";

/* big_body writes the /register body of pod name with dp ranks from
 * port on, on an address where nothing listens. */
static void
big_body(char *buf, size_t len, const char *name, int dp, int port)
{
	snprintf(buf, len,
		 "{\"name\":\"%s\",\"ip\":\"127.0.0.3\",\"zmq_port\":%d,"
		 "\"dp_size\":%d,\"model_name\":\"sim-model\","
		 "\"block_size\":16}",
		 name, port, dp);
}

static void
test_dp_size_cap(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "1", "--dp", "2", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	char *dir;
	assert_int_equal(kvt_tmpdir_make("kvi-dfile", &dir), KVI_OK);
	char *path = kvt_path(dir, "pods.json");
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"pods\": [{\"name\":\"file/big\",\"ip\":\"127.0.0.3\","
		"\"zmq_port\":40000,\"dp_size\":1025,\"model\":\"sim-model\","
		"\"block_size\":16}, {\"name\":\"sim/pod-0\",\"ip\":"
		"\"127.0.0.1\",\"zmq_port\":%d,\"replay_port\":%d,"
		"\"recover_port\":%d,\"dp_size\":2,\"model\":\"sim-model\","
		"\"block_size\":16}]}\n",
		c->sim.zmq_port[0], c->sim.replay_port[0],
		c->sim.recover_port[0]);
	fclose(f);
	const char *extra[] = {"--discovery-file", path, NULL};
	clu_coord(c, false, extra);
	clu_wait_active(c, 2, CLU_WAIT_MS);
	assert_int_equal(log_count(c, "event=pod_rejected source=file "
				      "pod=file/big reason=dp_size"),
			 1);
	assert_true(clu_metric(c, refused_file_dp) == 1);

	char body[512];
	big_body(body, sizeof(body), "ns/big", 1025, 30000);
	json_t *j = post_expect(c, "/register", body, 400);
	error_has(j, "dp_size 1025");
	error_has(j, "1024");
	error_has(j, "--max-dp-size");
	json_decref(j);
	assert_true(clu_metric(c, refused_http_dp) == 1);
	big_body(body, sizeof(body), "ns/big", 1024, 30000);
	json_decref(post_expect(c, "/register", body, 201));
	assert_int_equal(n_workers(c), 2);
	json_decref(
	    post_expect(c, "/unregister", "{\"name\":\"ns/big\"}", 200));

	/* the pods a source gives without dp_size may not exceed it */
	char *log = kvt_path(dir, "start.log");
	const char *argv[] = {
	    KVI_COORD_BIN, "--shards",    "s=tcp://127.0.0.1:1",
	    "--http",      "127.0.0.1:0", "--watch-dp-size",
	    "2000",        NULL};
	kvt_proc *p;
	assert_int_equal(kvt_proc_start(argv, log, &p), KVI_OK);
	int status;
	assert_int_equal(kvt_proc_wait(p, 10000, &status), KVI_OK);
	assert_int_equal(status, 2);
	kvt_proc_free(p);
	char *text = kvt_file_read(log, NULL);
	assert_non_null(text);
	assert_non_null(strstr(text, "--watch-dp-size 2000 is over "
				     "--max-dp-size 1024"));
	kvi_free(text);
	kvi_free(log);
	kvi_free(path);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
}

static bool
given_back(void *arg)
{
	return log_count(arg, "event=memory_given_back") > 0;
}

static void
test_memory_given_back(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "1", "--dp", "1", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, false, NULL);
	pid_t pid = kvt_proc_pid(c->coord);
	kvt_sleep_ms(500);
	long before = kvt_pid_rss_kib(pid);
	char body[512], name[32];
	for (int k = 0; k < 20; k++) {
		snprintf(name, sizeof(name), "ns/huge-%d", k);
		big_body(body, sizeof(body), name, 1000, 20000 + 1000 * k);
		json_decref(post_expect(c, "/register", body, 201));
	}
	kvt_sleep_ms(1000); /* polls that list every listener */
	long peak = kvt_pid_rss_kib(pid);
	for (int k = 0; k < 20; k++) {
		snprintf(body, sizeof(body), "{\"name\":\"ns/huge-%d\"}", k);
		json_decref(post_expect(c, "/unregister", body, 200));
	}
	kvt_wait_until(given_back, c, 5000); /* and fail on the figures */
	kvt_sleep_ms(500);
	long after = kvt_pid_rss_kib(pid);
	fprintf(stderr,
		"coordinator RSS: %ld KiB before, %ld with 20,000 listeners, "
		"%ld after\n",
		before, peak, after);
	assert_true(peak - before > 20 * 1024);
	/* not under ASan, whose allocator keeps what is freed in
	 * quarantine and gives nothing back */
#ifndef __SANITIZE_ADDRESS__
	assert_true(after - before < (peak - before) / 4);
#endif
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_endpoint_http, clu_test_setup,
					    clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_endpoint_file, clu_test_setup,
					    clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_dp_size_cap, clu_test_setup,
					    clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_memory_given_back,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
