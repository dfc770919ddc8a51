/*
 * test_kube_parse.c - the Kubernetes pod, list and watch-stream parsers
 * (coordinator/discovery/kube_parse.h): per-pod settings from flags,
 * annotations and the engine's command line (annotation over arguments
 * over flag, a disagreement or a value left to the container's start
 * refused with a reason), rejected annotation values, lists with continue
 * tokens and Status answers, and watch streams cut at every byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kube_parse.h"

static const kvc_kube_defaults defaults = {
    .zmq_port = 5557,
    .dp_size = 1,
    .block_size = 16,
    .model_label = "kvindex.io/model",
};

/* pod_json builds a pod object; annotations is a JSON object text. */
static json_t *
pod_json(const char *name, const char *ip, bool ready, const char *ann)
{
	char text[2048];
	snprintf(
	    text, sizeof(text),
	    "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
	    "\"namespace\":\"ml\",\"uid\":\"u-%s\","
	    "\"resourceVersion\":\"42\","
	    "\"labels\":{\"kvindex.io/model\":\"llama\"},"
	    "\"annotations\":%s},\"status\":{%s%s%s"
	    "\"conditions\":[{\"type\":\"PodScheduled\","
	    "\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
	    name, name, ann ? ann : "{}", ip ? "\"podIP\":\"" : "",
	    ip ? ip : "", ip ? "\"," : "", ready ? "True" : "False");
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	assert_non_null(j);
	return j;
}

static void
test_pod_defaults(void **state)
{
	(void)state;
	json_t *j = pod_json("engine-0", "10.1.2.3", true, NULL);
	kvc_kube_pod p;
	char err[200];
	assert_int_equal(kvc_kube_pod_parse(j, &defaults, &p, err, sizeof(err)),
			 KVI_OK);
	assert_string_equal(p.key, "ml/engine-0");
	assert_string_equal(p.uid, "u-engine-0");
	assert_string_equal(p.ip, "10.1.2.3");
	assert_true(p.ready);
	assert_false(p.terminating);
	assert_int_equal(p.rv, 42);
	assert_true(p.valid);
	assert_int_equal(p.pod.source, KVC_SOURCE_KUBERNETES);
	assert_string_equal(p.pod.name, "ml/engine-0");
	assert_string_equal(p.pod.model, "llama");
	assert_int_equal(p.pod.dp_size, 1);
	assert_int_equal(p.pod.zmq_port, 5557);
	assert_int_equal(p.pod.block_size, 16);
	assert_false(p.pod.has_replay_port);
	assert_int_equal(p.pod.instance_id, kvc_instance_id("ml/engine-0"));
	kvc_kube_pod_fini(&p);
	json_decref(j);
}

static void
test_pod_annotations(void **state)
{
	(void)state;
	json_t *j = pod_json("engine-1", "10.1.2.4", false,
			     "{\"kvindex.io/dp-size\":\"2\","
			     "\"kvindex.io/zmq-port\":\"6000\","
			     "\"kvindex.io/replay-port\":\"6100\","
			     "\"kvindex.io/recover-port\":\"8100\","
			     "\"kvindex.io/block-size\":\"32\","
			     "\"kvindex.io/model\":\"qwen\","
			     "\"other\":\"x\"}");
	kvc_kube_pod p;
	char err[200];
	assert_int_equal(kvc_kube_pod_parse(j, &defaults, &p, err, sizeof(err)),
			 KVI_OK);
	assert_false(p.ready);
	assert_true(p.valid);
	assert_int_equal(p.pod.dp_size, 2);
	assert_int_equal(p.pod.zmq_port, 6000);
	assert_true(p.pod.has_replay_port);
	assert_int_equal(p.pod.replay_port, 6100);
	assert_true(p.pod.has_recover_port);
	assert_int_equal(p.pod.recover_port, 8100);
	assert_int_equal(p.pod.block_size, 32);
	assert_string_equal(p.pod.model, "qwen"); /* annotation beats label */
	size_t n = 0;
	kvc_rank *r = kvc_pod_ranks(&p.pod, &n);
	assert_int_equal(n, 2);
	assert_string_equal(r[1].endpoint, "tcp://10.1.2.4:6001");
	assert_string_equal(r[1].replay_endpoint, "tcp://10.1.2.4:6101");
	assert_string_equal(r[1].recover_endpoint, "http://10.1.2.4:8101");
	kvc_ranks_free(r, n);
	kvc_kube_pod_fini(&p);
	json_decref(j);

	/* a pod of a data-parallel group over several pods */
	j = pod_json("engine-2", "10.1.2.5", false,
		     "{\"kvindex.io/dp-size\":\"2\","
		     "\"kvindex.io/dp-start-rank\":\"2\","
		     "\"kvindex.io/zmq-port\":\"6000\","
		     "\"kvindex.io/model\":\"qwen\"}");
	assert_int_equal(kvc_kube_pod_parse(j, &defaults, &p, err, sizeof(err)),
			 KVI_OK);
	assert_true(p.valid);
	assert_int_equal(p.pod.dp_start_rank, 2);
	r = kvc_pod_ranks(&p.pod, &n);
	assert_int_equal(n, 2);
	assert_int_equal(r[0].rank, 2);
	assert_string_equal(r[1].key, "ml/engine-2#3");
	assert_string_equal(r[1].endpoint, "tcp://10.1.2.5:6003");
	kvc_ranks_free(r, n);
	kvc_kube_pod_fini(&p);
	json_decref(j);
}

/* Values that must make a pod unregistrable, each with a reason naming
 * the annotation: never truncated, never replaced by the default. */
static void
test_pod_bad_annotations(void **state)
{
	(void)state;
	static const struct {
		const char *ann, *needle;
	} cases[] = {
	    {"{\"kvindex.io/dp-size\":\"0\"}", "kvindex.io/dp-size"},
	    {"{\"kvindex.io/dp-size\":\"65537\"}", "65537"},
	    {"{\"kvindex.io/dp-size\":\"4294967298\"}", "kvindex.io/dp-size"},
	    {"{\"kvindex.io/dp-size\":\"+2\"}", "kvindex.io/dp-size"},
	    {"{\"kvindex.io/dp-size\":\"2.0\"}", "kvindex.io/dp-size"},
	    {"{\"kvindex.io/dp-size\":\" 2\"}", "kvindex.io/dp-size"},
	    {"{\"kvindex.io/dp-size\":\"\"}", "kvindex.io/dp-size"},
	    {"{\"kvindex.io/dp-size\":2}", "not a string"},
	    {"{\"kvindex.io/zmq-port\":\"65536\"}", "kvindex.io/zmq-port"},
	    {"{\"kvindex.io/zmq-port\":\"-1\"}", "kvindex.io/zmq-port"},
	    {"{\"kvindex.io/block-size\":\"0\"}", "kvindex.io/block-size"},
	    /* a rank's port past 65535: rank 1 of 65535 */
	    {"{\"kvindex.io/zmq-port\":\"65535\",\"kvindex.io/dp-size\":\"2\"}",
	     "65535"},
	    {"{\"kvindex.io/model\":\"\"}", "no model"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = pod_json("bad", "10.0.0.1", true, cases[i].ann);
		kvc_kube_pod p;
		char err[200];
		assert_int_equal(
		    kvc_kube_pod_parse(j, &defaults, &p, err, sizeof(err)),
		    KVI_OK);
		if (p.valid || strstr(p.why, cases[i].needle) == NULL) {
			fail_msg("case %zu (%s): valid=%d why=%s", i,
				 cases[i].ann, p.valid, p.why);
		}
		kvc_kube_pod_fini(&p);
		json_decref(j);
	}
}

static void
test_pod_no_ip_no_model_terminating(void **state)
{
	(void)state;
	json_t *j = pod_json("e", NULL, true, NULL);
	kvc_kube_pod p;
	char err[200];
	assert_int_equal(kvc_kube_pod_parse(j, &defaults, &p, err, sizeof(err)),
			 KVI_OK);
	assert_false(p.valid);
	assert_null(p.ip);
	assert_non_null(strstr(p.why, "IP"));
	kvc_kube_pod_fini(&p);

	json_object_del(json_object_get(j, "metadata"), "labels");
	json_object_set_new(json_object_get(j, "status"), "podIP",
			    json_string("10.0.0.9"));
	assert_int_equal(kvc_kube_pod_parse(j, &defaults, &p, err, sizeof(err)),
			 KVI_OK);
	assert_false(p.valid);
	assert_non_null(strstr(p.why, "no model"));
	kvc_kube_pod_fini(&p);

	json_object_set_new(json_object_get(j, "metadata"), "deletionTimestamp",
			    json_string("2026-01-01T00:00:00Z"));
	assert_int_equal(kvc_kube_pod_parse(j, &defaults, &p, err, sizeof(err)),
			 KVI_OK);
	assert_true(p.terminating);
	kvc_kube_pod_fini(&p);

	/* not a pod at all */
	json_t *bad = json_loads("{\"metadata\":{\"name\":\"x\"}}", 0, NULL);
	assert_int_equal(
	    kvc_kube_pod_parse(bad, &defaults, &p, err, sizeof(err)),
	    KVI_EPROTO);
	json_decref(bad);
	json_decref(j);
}

/* ---- the engine's command line -------------------------------------- */

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* engine_pod is pod_json with one container running argv. */
static json_t *
engine_pod(const char *ann, const char *const *argv)
{
	json_t *j = pod_json("e", "10.0.0.7", true, ann);
	json_t *cmd = json_array();
	for (size_t i = 0; argv[i] != NULL; i++) {
		json_array_append_new(cmd, json_string(argv[i]));
	}
	json_object_set_new(j, "spec",
			    json_pack("{s:[{s:s,s:o}]}", "containers", "name",
				      "engine", "command", cmd));
	return j;
}

/* parse_engine parses engine_pod(ann, argv) into *p. */
static void
parse_engine(const char *ann, const char *const *argv, kvc_kube_pod *p)
{
	json_t *j = engine_pod(ann, argv);
	char err[200];
	assert_int_equal(kvc_kube_pod_parse(j, &defaults, p, err, sizeof(err)),
			 KVI_OK);
	json_decref(j);
}

static void
want_from(const kvc_pod *p, kvc_setting k, kvc_from f)
{
	if (p->origin.from[k] != f) {
		fail_msg("setting %d: from %s, want %s", k,
			 kvc_from_name((kvc_from)p->origin.from[k], p->source),
			 kvc_from_name(f, p->source));
	}
}

#define KV_EVENTS                                                              \
	"{\"enable_kv_cache_events\": true, \"endpoint\": \"tcp://*:6000\", "  \
	"\"replay_endpoint\": \"tcp://*:6100\"}"

static void
test_pod_engine_args(void **state)
{
	(void)state;
	const char *const *argv =
	    ARGV("vllm", "serve", "m", "--data-parallel-size", "4",
		 "--block-size", "32", "--kv-events-config", KV_EVENTS);
	kvc_kube_pod p;
	/* the engine's arguments over the defaults */
	parse_engine(NULL, argv, &p);
	assert_true(p.valid);
	assert_int_equal(p.pod.dp_size, 4);
	assert_int_equal(p.pod.dp_start_rank, 0);
	assert_int_equal(p.pod.zmq_port, 6000);
	assert_true(p.pod.has_replay_port);
	assert_int_equal(p.pod.replay_port, 6100);
	assert_int_equal(p.pod.block_size, 32);
	for (int k = 0; k < KVC_SETTINGS; k++) {
		want_from(&p.pod, (kvc_setting)k, KVC_FROM_ENGINE_ARGS);
	}
	assert_string_equal(p.pod.origin.engine, "vllm");
	assert_string_equal(p.pod.origin.kv_events, "enabled");
	assert_string_equal(p.pod.origin.container, "engine");
	/* a copy keeps the origin; it is not part of what the pod is */
	kvc_pod c;
	kvc_pod_copy(&c, &p.pod);
	assert_string_equal(c.origin.container, "engine");
	want_from(&c, KVC_SET_BLOCK_SIZE, KVC_FROM_ENGINE_ARGS);
	kvc_kube_pod q;
	parse_engine("{\"kvindex.io/dp-size\":\"4\","
		     "\"kvindex.io/zmq-port\":\"6000\"}",
		     argv, &q);
	assert_true(q.valid);
	want_from(&q.pod, KVC_SET_DP_SIZE, KVC_FROM_ANNOTATION);
	want_from(&q.pod, KVC_SET_ZMQ_PORT, KVC_FROM_ANNOTATION);
	want_from(&q.pod, KVC_SET_REPLAY_PORT, KVC_FROM_ENGINE_ARGS);
	assert_true(kvc_pod_equal(&c, &q.pod));
	kvc_pod_fini(&c);
	kvc_kube_pod_fini(&q);
	kvc_kube_pod_fini(&p);

	/* annotation over arguments over default, value by value */
	parse_engine("{\"kvindex.io/zmq-port\":\"7000\"}",
		     ARGV("vllm", "serve", "m", "-dpl", "2", "-dpr", "4"), &p);
	assert_true(p.valid);
	assert_int_equal(p.pod.dp_size, 2);
	want_from(&p.pod, KVC_SET_DP_SIZE, KVC_FROM_ENGINE_ARGS);
	assert_int_equal(p.pod.dp_start_rank, 4);
	want_from(&p.pod, KVC_SET_DP_START_RANK, KVC_FROM_ENGINE_ARGS);
	assert_int_equal(p.pod.zmq_port, 7000);
	want_from(&p.pod, KVC_SET_ZMQ_PORT, KVC_FROM_ANNOTATION);
	assert_int_equal(p.pod.block_size, 16);
	want_from(&p.pod, KVC_SET_BLOCK_SIZE, KVC_FROM_DEFAULT);
	assert_false(p.pod.has_replay_port);
	want_from(&p.pod, KVC_SET_REPLAY_PORT, KVC_FROM_DEFAULT);
	/* no --kv-events-config: not an error, and said */
	assert_string_equal(p.pod.origin.kv_events, "disabled");
	kvc_kube_pod_fini(&p);

	/* events without a replay endpoint: none, whatever the flag says */
	kvc_kube_defaults d = defaults;
	d.has_replay_port = true;
	d.replay_port = 5657;
	json_t *j =
	    engine_pod(NULL, ARGV("vllm", "serve", "m", "--kv-events-config",
				  "{\"enable_kv_cache_events\":true}"));
	char err[200];
	assert_int_equal(kvc_kube_pod_parse(j, &d, &p, err, sizeof(err)),
			 KVI_OK);
	json_decref(j);
	assert_true(p.valid);
	assert_int_equal(p.pod.zmq_port, 5557);
	assert_false(p.pod.has_replay_port);
	want_from(&p.pod, KVC_SET_REPLAY_PORT, KVC_FROM_ENGINE_ARGS);
	kvc_kube_pod_fini(&p);

	/* no engine: the defaults, and no engine said */
	parse_engine(NULL, ARGV("sleep", "inf"), &p);
	assert_true(p.valid);
	assert_int_equal(p.pod.dp_size, 1);
	want_from(&p.pod, KVC_SET_DP_SIZE, KVC_FROM_DEFAULT);
	assert_null(p.pod.origin.engine);
	kvc_kube_pod_fini(&p);
}

/* An annotation and the engine's arguments that disagree: the pod is
 * refused with both named, never guessed at. */
static void
test_pod_engine_disagrees(void **state)
{
	(void)state;
	const struct {
		const char *ann;
		const char *const *argv;
		const char *why;
	} cases[] = {
	    {"{\"kvindex.io/dp-size\":\"2\"}",
	     ARGV("vllm", "serve", "m", "-dp", "8", "-dpl", "4"),
	     "annotation kvindex.io/dp-size=2 disagrees with the engine's "
	     "--data-parallel-size-local 4"},
	    {"{\"kvindex.io/dp-start-rank\":\"2\"}",
	     ARGV("vllm", "serve", "m", "-dp", "4"),
	     "annotation kvindex.io/dp-start-rank=2 disagrees with the "
	     "engine's --data-parallel-size without "
	     "--data-parallel-size-local (rank 0)"},
	    {"{\"kvindex.io/zmq-port\":\"6001\"}",
	     ARGV("vllm", "serve", "m", "--kv-events-config", KV_EVENTS),
	     "annotation kvindex.io/zmq-port=6001 disagrees with the engine's "
	     "--kv-events-config endpoint tcp://*:6000"},
	    {"{\"kvindex.io/replay-port\":\"5657\"}",
	     ARGV("vllm", "serve", "m", "--kv-events-config",
		  "{\"enable_kv_cache_events\":true}"),
	     "annotation kvindex.io/replay-port=5657 disagrees with the "
	     "engine's --kv-events-config, which has no replay_endpoint"},
	    {"{\"kvindex.io/block-size\":\"16\"}",
	     ARGV("sglang", "serve", "--page-size", "64"),
	     "annotation kvindex.io/block-size=16 disagrees with the engine's "
	     "--page-size 64"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kvc_kube_pod p;
		parse_engine(cases[i].ann, cases[i].argv, &p);
		assert_false(p.valid);
		assert_string_equal(p.why, cases[i].why);
		kvc_kube_pod_fini(&p);
	}
}

/* A value the engine's arguments leave to the container's start, or
 * cannot be read, needs an annotation. */
static void
test_pod_engine_unknown(void **state)
{
	(void)state;
	kvc_kube_pod p;
	const char *const *argv =
	    ARGV("/bin/sh", "-c", "exec vllm serve m -dp $DP_SIZE");
	parse_engine(NULL, argv, &p);
	assert_false(p.valid);
	assert_string_equal(p.why, "the engine's --data-parallel-size is "
				   "$DP_SIZE, set when the container starts: "
				   "annotate kvindex.io/dp-size");
	kvc_kube_pod_fini(&p);
	/* annotated: the annotation gives it */
	parse_engine("{\"kvindex.io/dp-size\":\"4\"}", argv, &p);
	assert_true(p.valid);
	assert_int_equal(p.pod.dp_size, 4);
	want_from(&p.pod, KVC_SET_DP_SIZE, KVC_FROM_ANNOTATION);
	kvc_kube_pod_fini(&p);
	/* the start rank: the size is known, the start rank is not */
	parse_engine(
	    "{\"kvindex.io/dp-size\":\"4\"}",
	    ARGV("vllm", "serve", "m", "-dpl", "2", "-dpr", "$(START_RANK)"),
	    &p);
	assert_false(p.valid);
	assert_non_null(strstr(p.why, "disagrees"));
	kvc_kube_pod_fini(&p);
	parse_engine(
	    NULL,
	    ARGV("vllm", "serve", "m", "-dpl", "2", "-dpr", "$(START_RANK)"),
	    &p);
	assert_false(p.valid);
	assert_non_null(strstr(p.why, "annotate kvindex.io/dp-start-rank"));
	kvc_kube_pod_fini(&p);
	/* the event port */
	parse_engine(
	    NULL,
	    ARGV("sh", "-c", "vllm serve m --kv-events-config \"$KV_CONFIG\""),
	    &p);
	assert_false(p.valid);
	assert_non_null(strstr(p.why, "annotate kvindex.io/zmq-port"));
	kvc_kube_pod_fini(&p);
	/* the annotation naming the engine's container */
	parse_engine("{\"kvindex.io/engine-container\":\"vllm\"}",
		     ARGV("vllm", "serve", "m", "-dp", "2"), &p);
	assert_false(p.valid);
	assert_non_null(strstr(p.why, "names container \"vllm\""));
	kvc_kube_pod_fini(&p);
	parse_engine("{\"kvindex.io/engine-container\":\"engine\"}",
		     ARGV("vllm", "serve", "m", "-dp", "2"), &p);
	assert_true(p.valid);
	assert_int_equal(p.pod.dp_size, 2);
	kvc_kube_pod_fini(&p);
	parse_engine("{\"kvindex.io/engine-container\":1}",
		     ARGV("vllm", "serve", "m", "-dp", "2"), &p);
	assert_false(p.valid);
	assert_non_null(strstr(p.why, "is not a string"));
	kvc_kube_pod_fini(&p);
}

static void
test_list(void **state)
{
	(void)state;
	const char *text =
	    "{\"kind\":\"PodList\",\"apiVersion\":\"v1\","
	    "\"metadata\":{\"resourceVersion\":\"1234\",\"continue\":\"abc\"},"
	    "\"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"ml\","
	    "\"labels\":{\"kvindex.io/model\":\"m\"}},\"status\":{\"podIP\":"
	    "\"10.0.0.1\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
	    "\"True\"}]}},{\"bogus\":1},{\"metadata\":{\"name\":\"b\","
	    "\"namespace\":\"ml\"}}]}";
	kvc_kube_list l;
	char err[200];
	assert_int_equal(kvc_kube_list_parse(text, strlen(text), &defaults, &l,
					     NULL, err, sizeof(err)),
			 KVI_OK);
	assert_int_equal(l.rv, 1234);
	assert_string_equal(l.cont, "abc");
	assert_int_equal(l.n_pods, 2);
	assert_int_equal(l.n_skipped, 1);
	assert_true(l.pods[0].valid && l.pods[0].ready);
	assert_false(l.pods[1].valid);
	kvc_kube_list_fini(&l);

	const char *gone =
	    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
	    "\"status\":\"Failure\",\"message\":\"continue expired\","
	    "\"reason\":\"Expired\",\"code\":410}";
	kvc_kube_status st;
	assert_int_equal(kvc_kube_list_parse(gone, strlen(gone), &defaults, &l,
					     &st, err, sizeof(err)),
			 KVI_EPROTO);
	assert_int_equal(st.code, 410);
	assert_string_equal(st.reason, "Expired");
	assert_non_null(strstr(err, "continue expired"));

	const char *notlist = "{\"items\":[]}";
	assert_int_equal(kvc_kube_list_parse(notlist, strlen(notlist),
					     &defaults, &l, NULL, err,
					     sizeof(err)),
			 KVI_EPROTO);
	assert_int_equal(
	    kvc_kube_list_parse("[", 1, &defaults, &l, NULL, err, sizeof(err)),
	    KVI_EPROTO);
}

/* The stream's callback records event types and the pods' names. */
typedef struct seen {
	char log[1024];
	int n;
	int stop_at; /* stop the stream at this event (0: never) */
} seen;

static bool
on_event(void *arg, kvc_kube_ev type, const json_t *obj)
{
	seen *s = arg;
	static const char *names[] = {"A", "M", "D", "B", "E"};
	const char *name = json_string_value(
	    json_object_get(json_object_get(obj, "metadata"), "name"));
	size_t l = strlen(s->log);
	snprintf(s->log + l, sizeof(s->log) - l, "%s:%s;", names[type],
		 name ? name : "-");
	s->n++;
	return s->stop_at == 0 || s->n < s->stop_at;
}

static const char stream_text[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
    "\r\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\r\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":"
    "{\"resourceVersion\":\"9\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n";
static const char stream_expect[] = "A:a;M:a;B:-;D:a;E:-;";

static void
test_stream_every_cut(void **state)
{
	(void)state;
	size_t len = strlen(stream_text);
	for (size_t cut = 0; cut <= len; cut++) {
		seen s = {0};
		kvc_kube_stream *st = kvc_kube_stream_alloc(on_event, &s);
		char err[200];
		assert_int_equal(kvc_kube_stream_feed(st, stream_text, cut, err,
						      sizeof(err)),
				 KVI_OK);
		assert_int_equal(kvc_kube_stream_feed(st, stream_text + cut,
						      len - cut, err,
						      sizeof(err)),
				 KVI_OK);
		assert_string_equal(s.log, stream_expect);
		assert_int_equal(kvc_kube_stream_pending(st), 0);
		kvc_kube_stream_free(st);
	}
	/* byte by byte */
	seen s = {0};
	kvc_kube_stream *st = kvc_kube_stream_alloc(on_event, &s);
	char err[200];
	for (size_t i = 0; i < len; i++) {
		assert_int_equal(kvc_kube_stream_feed(st, stream_text + i, 1,
						      err, sizeof(err)),
				 KVI_OK);
	}
	assert_string_equal(s.log, stream_expect);
	kvc_kube_stream_free(st);
}

static void
test_stream_errors(void **state)
{
	(void)state;
	static const char *bad[] = {
	    "{\"type\":\"ADDED\",\"object\":{}\n",     /* not JSON */
	    "[1,2]\n",                                 /* not an object */
	    "{\"type\":\"ADDED\"}\n",                  /* no object */
	    "{\"object\":{}}\n",                       /* no type */
	    "{\"type\":\"SYNC\",\"object\":{}}\n",     /* unknown */
	    "{\"type\":\"ADDED\",\"object\":\"x\"}\n", /* not an obj */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		seen s = {0};
		kvc_kube_stream *st = kvc_kube_stream_alloc(on_event, &s);
		char err[200] = "";
		assert_int_equal(kvc_kube_stream_feed(st, bad[i],
						      strlen(bad[i]), err,
						      sizeof(err)),
				 KVI_EPROTO);
		assert_true(err[0] != '\0');
		assert_int_equal(s.n, 0);
		kvc_kube_stream_free(st);
	}
	/* the callback stops the stream */
	seen s = {.stop_at = 2};
	kvc_kube_stream *st = kvc_kube_stream_alloc(on_event, &s);
	char err[200];
	assert_int_equal(kvc_kube_stream_feed(st, stream_text,
					      strlen(stream_text), err,
					      sizeof(err)),
			 KVI_ECLOSED);
	assert_int_equal(s.n, 2);
	/* a partial line is reported, and reset drops it */
	kvc_kube_stream_reset(st);
	assert_int_equal(
	    kvc_kube_stream_feed(st, "{\"type\"", 7, err, sizeof(err)), KVI_OK);
	assert_int_equal(kvc_kube_stream_pending(st), 7);
	kvc_kube_stream_reset(st);
	assert_int_equal(kvc_kube_stream_pending(st), 0);
	kvc_kube_stream_free(st);

	/* an endless line is refused, not buffered forever */
	st = kvc_kube_stream_alloc(on_event, &s);
	static char chunk[65536];
	memset(chunk, 'x', sizeof(chunk));
	kvi_err rv = KVI_OK;
	for (size_t i = 0; rv == KVI_OK && i < 200; i++) {
		rv = kvc_kube_stream_feed(st, chunk, sizeof(chunk), err,
					  sizeof(err));
	}
	assert_int_equal(rv, KVI_ETOOBIG);
	kvc_kube_stream_free(st);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pod_defaults),
	    cmocka_unit_test(test_pod_annotations),
	    cmocka_unit_test(test_pod_bad_annotations),
	    cmocka_unit_test(test_pod_no_ip_no_model_terminating),
	    cmocka_unit_test(test_pod_engine_args),
	    cmocka_unit_test(test_pod_engine_disagrees),
	    cmocka_unit_test(test_pod_engine_unknown),
	    cmocka_unit_test(test_list),
	    cmocka_unit_test(test_stream_every_cut),
	    cmocka_unit_test(test_stream_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
