/*
 * test_discovery_file.c - the static discovery file. The parser reads the
 * simulator's layout file, applies defaults, reports each invalid pod with
 * its index and a reason and keeps the others, and rejects documents that
 * are not a pod list. The watcher, polling every 20 ms, hands over each
 * new version of the file - written in place, changed within the same
 * mtime tick, replaced by rename - and keeps the last good set when the
 * file turns invalid, disappears or becomes a directory.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "discovery_file.h"

/* What the engine simulator writes (tools/sim/main.c write_layout). */
static const char sim_layout[] =
    "{\n"
    "  \"control\": \"http://127.0.0.1:39000\",\n"
    "  \"pods\": [\n"
    "    {\"name\": \"sim/pod-0\", \"ip\": \"127.0.0.1\", \"zmq_port\": "
    "20000, \"dp_size\": 2, \"model\": \"sim-model\", \"block_size\": 16, "
    "\"replay_port\": 21000, \"recover_port\": 22000},\n"
    "    {\"name\": \"sim/pod-1\", \"ip\": \"127.0.0.1\", \"zmq_port\": "
    "20002, \"dp_size\": 2, \"model\": \"sim-model\", \"block_size\": 16, "
    "\"replay_port\": 21002, \"recover_port\": 22002}\n"
    "  ]\n"
    "}\n";

static kvc_dfile
parse_ok(const char *text, uint32_t default_dp_size)
{
	kvc_dfile f;
	char err[256] = "";
	kvi_err rv = kvc_dfile_parse(text, strlen(text), default_dp_size, &f,
				     err, sizeof(err));
	if (rv != KVI_OK) {
		fail_msg("parse: %s: %s", kvi_strerror(rv), err);
	}
	return f;
}

static void
test_simulator_layout(void **state)
{
	(void)state;
	kvc_dfile f = parse_ok(sim_layout, 1);
	assert_int_equal(f.n_pods, 2);
	assert_int_equal(f.n_errors, 0);
	const kvc_pod *p = &f.pods[1];
	assert_int_equal(p->source, KVC_SOURCE_FILE);
	assert_string_equal(p->name, "sim/pod-1");
	assert_true(p->instance_id == kvc_instance_id("sim/pod-1"));
	assert_string_equal(p->ip, "127.0.0.1");
	assert_string_equal(p->model, "sim-model");
	assert_int_equal(p->block_size, 16);
	assert_int_equal(p->zmq_port, 20002);
	assert_int_equal(p->dp_size, 2);
	assert_true(p->has_replay_port && p->replay_port == 21002);
	assert_true(p->has_recover_port && p->recover_port == 22002);
	size_t n;
	kvc_rank *r = kvc_pod_ranks(p, &n);
	assert_int_equal(n, 2);
	assert_string_equal(r[1].key, "sim/pod-1#1");
	assert_string_equal(r[1].endpoint, "tcp://127.0.0.1:20003");
	assert_string_equal(r[1].replay_endpoint, "tcp://127.0.0.1:21003");
	assert_string_equal(r[1].recover_endpoint, "http://127.0.0.1:22003");
	kvc_ranks_free(r, n);
	kvc_dfile_fini(&f);
	kvc_dfile_fini(&f); /* twice is fine */
}

/* A pod of a data-parallel group over several pods: its ranks are the
 * group's global ones, from dp_start_rank. */
static void
test_start_rank(void **state)
{
	(void)state;
	kvc_dfile f = parse_ok(
	    "{\"pods\": [{\"name\": \"ns/b\", \"ip\": \"10.0.0.2\", "
	    "\"zmq_port\": 5557, \"replay_port\": 5600, \"model\": \"m\", "
	    "\"block_size\": 16, \"dp_size\": 4, \"dp_start_rank\": 4}]}",
	    1);
	assert_int_equal(f.n_pods, 1);
	size_t n;
	kvc_rank *r = kvc_pod_ranks(&f.pods[0], &n);
	assert_int_equal(n, 4);
	assert_string_equal(r[0].key, "ns/b#4");
	assert_string_equal(r[3].key, "ns/b#7");
	assert_int_equal(r[3].rank, 7);
	assert_string_equal(r[3].endpoint, "tcp://10.0.0.2:5564");
	assert_string_equal(r[3].replay_endpoint, "tcp://10.0.0.2:5607");
	kvc_ranks_free(r, n);
	kvc_dfile_fini(&f);
}

static void
test_defaults(void **state)
{
	(void)state;
	kvc_dfile f = parse_ok(
	    "{\"pods\": [{\"name\": \"ns/a\", \"ip\": \"fd00::1\", "
	    "\"zmq_port\": 5557, \"model\": \"m\", \"block_size\": 32, "
	    "\"recover_port\": null, \"dp_size\": null, \"zone\": \"eu\"}, "
	    "{\"name\": \"ns/b\", \"ip\": \"10.0.0.2\", \"zmq_port\": 5557, "
	    "\"model\": \"m\", \"block_size\": 32, \"dp_size\": 1}], "
	    "\"version\": 3}",
	    4);
	assert_int_equal(f.n_pods, 2);
	assert_int_equal(f.n_errors, 0);
	assert_int_equal(f.pods[0].dp_size, 4); /* --watch-dp-size */
	assert_int_equal(f.pods[0].dp_start_rank, 0);
	assert_false(f.pods[0].has_recover_port);
	assert_false(f.pods[0].has_replay_port);
	assert_int_equal(f.pods[1].dp_size, 1);
	kvc_dfile_fini(&f);
	f = parse_ok("{\"pods\": []}", 1);
	assert_int_equal(f.n_pods + f.n_errors, 0);
	kvc_dfile_fini(&f);
	/* a default that is itself invalid is reported per pod */
	f = parse_ok("{\"pods\": [{\"name\": \"a\", \"ip\": \"h\", "
		     "\"zmq_port\": 1, \"model\": \"m\", \"block_size\": 1}]}",
		     0);
	assert_int_equal(f.n_pods, 0);
	assert_int_equal(f.n_errors, 1);
	assert_string_equal(f.errors[0].msg, "dp_size 0 is not in 1..65536");
	kvc_dfile_fini(&f);
}

#define GOOD                                                                   \
	"\"ip\": \"10.0.0.1\", \"zmq_port\": 5557, \"model\": \"m\", "         \
	"\"block_size\": 16"

static void
test_invalid_pods_are_reported_and_skipped(void **state)
{
	(void)state;
	static const struct {
		const char *pod;
		kvi_err code;
		const char *msg;
	} cases[] = {
	    {"7", KVI_EINVAL, "pod is not an object"},
	    {"{" GOOD "}", KVI_EINVAL, "name is missing or not a string"},
	    {"{\"name\": 5, " GOOD "}", KVI_EINVAL,
	     "name is missing or not a string"},
	    {"{\"name\": \"\", " GOOD "}", KVI_EINVAL,
	     "name must be 1..253 characters"},
	    {"{\"name\": \"x\", \"zmq_port\": 1, \"model\": \"m\", "
	     "\"block_size\": 16}",
	     KVI_EINVAL, "ip is missing or not a string"},
	    {"{\"name\": \"x\", \"ip\": \"10.0.0.0/8\", \"zmq_port\": 1, "
	     "\"model\": \"m\", \"block_size\": 16}",
	     KVI_EINVAL, "ip is missing or not an address"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": 1, "
	     "\"block_size\": 16}",
	     KVI_EINVAL, "model is missing or not a string"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": 1, "
	     "\"model_name\": \"m\", \"block_size\": 16}",
	     KVI_EINVAL, "model is missing or not a string"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": 1, "
	     "\"model\": \"\", \"block_size\": 16}",
	     KVI_EINVAL, "model is empty"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"model\": \"m\", "
	     "\"block_size\": 16}",
	     KVI_EINVAL, "zmq_port is missing"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": \"5557\", "
	     "\"model\": \"m\", \"block_size\": 16}",
	     KVI_EINVAL, "zmq_port is not an integer"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": 5557.0, "
	     "\"model\": \"m\", \"block_size\": 16}",
	     KVI_EINVAL, "zmq_port is not an integer"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": 0, "
	     "\"model\": \"m\", \"block_size\": 16}",
	     KVI_ERANGE, "zmq_port 0 is not in 1..65535"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": 70000, "
	     "\"model\": \"m\", \"block_size\": 16}",
	     KVI_ERANGE, "zmq_port 70000 is not in 1..65535"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": 65535, "
	     "\"dp_size\": 2, \"model\": \"m\", \"block_size\": 16}",
	     KVI_ERANGE,
	     "zmq_port 65535 plus the ranks does not fit: ports are 1..65535"},
	    {"{\"name\": \"x\", " GOOD ", \"recover_port\": -1}", KVI_ERANGE,
	     "recover_port -1 is not in 1..65535"},
	    {"{\"name\": \"x\", " GOOD ", \"replay_port\": true}", KVI_EINVAL,
	     "replay_port is not an integer"},
	    {"{\"name\": \"x\", " GOOD ", \"dp_size\": 0}", KVI_ERANGE,
	     "dp_size 0 is not in 1..65536"},
	    {"{\"name\": \"x\", " GOOD ", \"dp_size\": 65537}", KVI_ERANGE,
	     "dp_size 65537 is not in 1..65536"},
	    {"{\"name\": \"x\", " GOOD ", \"dp_size\": 99999999999}",
	     KVI_ERANGE, "dp_size 99999999999 is not in 1..65536"},
	    {"{\"name\": \"x\", " GOOD ", \"dp_size\": 2.5}", KVI_EINVAL,
	     "dp_size is not an integer"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": 1, "
	     "\"model\": \"m\"}",
	     KVI_EINVAL, "block_size is missing"},
	    {"{\"name\": \"x\", \"ip\": \"h\", \"zmq_port\": 1, "
	     "\"model\": \"m\", \"block_size\": 0}",
	     KVI_ERANGE, "block_size 0 is not in 1..1048576"},
	};
	size_t n_cases = sizeof(cases) / sizeof(cases[0]);
	/* one document: a good pod, every bad one, a good pod */
	char doc[8192];
	size_t len = (size_t)snprintf(
	    doc, sizeof(doc), "{\"pods\": [{\"name\": \"first\", " GOOD "}");
	for (size_t i = 0; i < n_cases; i++) {
		len += (size_t)snprintf(doc + len, sizeof(doc) - len, ", %s",
					cases[i].pod);
	}
	snprintf(doc + len, sizeof(doc) - len,
		 ", {\"name\": \"last\", " GOOD "}]}");
	kvc_dfile f = parse_ok(doc, 1);
	assert_int_equal(f.n_pods, 2);
	assert_string_equal(f.pods[0].name, "first");
	assert_string_equal(f.pods[1].name, "last");
	assert_int_equal(f.n_errors, n_cases);
	for (size_t i = 0; i < n_cases; i++) {
		const kvc_dfile_error *e = &f.errors[i];
		assert_int_equal(e->index, i + 1);
		if (strcmp(e->msg, cases[i].msg) != 0 ||
		    e->code != cases[i].code) {
			fail_msg("pod %zu: got %s \"%s\", want %s \"%s\"",
				 i + 1, kvi_strerror(e->code), e->msg,
				 kvi_strerror(cases[i].code), cases[i].msg);
		}
	}
	assert_string_equal(f.errors[2].name, "");
	assert_string_equal(f.errors[4].name, "x");
	kvc_dfile_fini(&f);

	/* a name one character too long */
	char pod[600];
	char name[KVC_NAME_MAX + 2];
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(pod, sizeof(pod), "{\"pods\": [{\"name\": \"%s\", " GOOD "}]}",
		 name);
	f = parse_ok(pod, 1);
	assert_int_equal(f.n_errors, 1);
	assert_string_equal(f.errors[0].msg, "name must be 1..253 characters");
	kvc_dfile_fini(&f);
}

static void
test_duplicate_names(void **state)
{
	(void)state;
	kvc_dfile f = parse_ok(
	    "{\"pods\": [{\"name\": \"a\", \"zmq_port\": 0, \"ip\": \"h\", "
	    "\"model\": \"m\", \"block_size\": 16}, "
	    "{\"name\": \"a\", " GOOD "}, {\"name\": \"b\", " GOOD "}, "
	    "{\"name\": \"a\", " GOOD "}, {\"name\": \"b\", " GOOD "}, "
	    "{\"name\": \"a\", " GOOD ", \"dp_size\": 4}]}",
	    1);
	/* pod 0 is invalid, so pod 1 is the first valid "a" */
	assert_int_equal(f.n_pods, 2);
	assert_string_equal(f.pods[0].name, "a");
	assert_string_equal(f.pods[1].name, "b");
	assert_int_equal(f.n_errors, 4);
	static const char *const want[] = {
	    "zmq_port 0 is not in 1..65535", "duplicate name: pod 1 has it",
	    "duplicate name: pod 2 has it", "duplicate name: pod 1 has it"};
	static const size_t at[] = {0, 3, 4, 5};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(f.errors[i].index, at[i]);
		assert_string_equal(f.errors[i].msg, want[i]);
		assert_int_equal(f.errors[i].code,
				 i == 0 ? KVI_ERANGE : KVI_EEXIST);
	}
	kvc_dfile_fini(&f);
}

static void
test_bad_documents(void **state)
{
	(void)state;
	static const char *const docs[] = {
	    "",
	    "not json",
	    "{\"pods\": [",
	    "[]",
	    "{}",
	    "{\"pods\": {}}",
	    "{\"pods\": null}",
	    "{\"pods\": [], \"pods\": []}",
	    "{\"pods\": [{\"name\": \"a\", \"name\": \"b\"}]}",
	    "{\"pods\": [{\"name\": \"a\\u0000b\"}]}",
	};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		kvc_dfile f = {.n_pods = 77};
		char err[256] = "";
		assert_int_equal(kvc_dfile_parse(docs[i], strlen(docs[i]), 1,
						 &f, err, sizeof(err)),
				 KVI_EPROTO);
		assert_true(err[0] != '\0');
		assert_int_equal(f.n_pods, 77); /* untouched */
	}
}

/* The watcher */

typedef struct rec {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int calls;
	char names[512];
} rec;

static void
on_pods(void *arg, const kvc_pod *pods, size_t n)
{
	rec *r = arg;
	pthread_mutex_lock(&r->mu);
	r->calls++;
	size_t len = 0;
	r->names[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		len +=
		    (size_t)snprintf(r->names + len, sizeof(r->names) - len,
				     "%s:%u ", pods[i].name, pods[i].dp_size);
	}
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* wait_calls waits up to 5 s for the callback count to reach n, and
 * checks the last set it saw. */
static void
wait_calls(rec *r, int n, const char *names)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&r->mu);
	while (r->calls < n &&
	       pthread_cond_timedwait(&r->cv, &r->mu, &until) == 0) {
	}
	int calls = r->calls;
	char got[512];
	snprintf(got, sizeof(got), "%s", r->names);
	pthread_mutex_unlock(&r->mu);
	if (calls != n || strcmp(got, names) != 0) {
		fail_msg("callbacks: %d, want %d; last set \"%s\", want \"%s\"",
			 calls, n, got, names);
	}
}

/* wait_stats waits up to 5 s for the watcher's failures count to reach
 * at least failures and its missing flag to be missing. (A write in
 * place may also be seen half done, as an empty file: one failure more.)
 * Returns the failures count. */
static uint64_t
wait_stats(kvc_dfile_watch *w, uint64_t failures, bool missing)
{
	kvc_dfile_stats st;
	for (int i = 0; i < 1000; i++) {
		kvc_dfile_watch_stats(w, &st);
		if (st.failures >= failures && st.missing == missing) {
			return st.failures;
		}
		usleep(5000);
	}
	fail_msg("failures %llu missing %d, want %llu %d",
		 (unsigned long long)st.failures, st.missing,
		 (unsigned long long)failures, missing);
	return 0;
}

static uint64_t
failures_now(kvc_dfile_watch *w)
{
	kvc_dfile_stats st;
	kvc_dfile_watch_stats(w, &st);
	return st.failures;
}

static void
write_in_place(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
	assert_int_equal(fclose(f), 0);
}

static void
write_by_rename(const char *path, const char *text)
{
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	write_in_place(tmp, text);
	assert_int_equal(rename(tmp, path), 0);
}

#define POD(name, extra) "{\"name\": \"" name "\", " GOOD extra "}"

static void
test_watcher(void **state)
{
	(void)state;
	char dir[256], path[300];
	snprintf(dir, sizeof(dir), "%s/kvi-dfile-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/pods.json", dir);
	rec r = {.calls = 0};
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	kvc_dfile_watch *w = NULL;
	assert_int_equal(kvc_dfile_watch_open(path, 3, 20, on_pods, &r, &w),
			 KVI_OK);

	/* no file yet: nothing, and the watcher says so */
	wait_stats(w, 0, true);
	wait_calls(&r, 0, "");
	/* written */
	write_in_place(
	    path,
	    "{\"pods\": [" POD("a", ", \"dp_size\": 2") ", " POD("b", "") "]}");
	wait_calls(&r, 1, "a:2 b:3 ");
	/* changed in place at once: same size, likely the same mtime */
	write_in_place(
	    path,
	    "{\"pods\": [" POD("c", ", \"dp_size\": 2") ", " POD("b", "") "]}");
	wait_calls(&r, 2, "c:2 b:3 ");
	/* rewritten with the same bytes: no new version */
	write_in_place(
	    path,
	    "{\"pods\": [" POD("c", ", \"dp_size\": 2") ", " POD("b", "") "]}");
	usleep(150 * 1000);
	wait_calls(&r, 2, "c:2 b:3 ");
	/* A change younger than 2 s is re-read at every tick, since a second
	 * write within one mtime tick looks the same to stat; an old one is
	 * not. (Setting mtime changes ctime: one more read.) */
	kvc_dfile_stats st;
	kvc_dfile_watch_stats(w, &st);
	uint64_t reads = st.reads;
	usleep(100 * 1000);
	kvc_dfile_watch_stats(w, &st);
	assert_true(st.reads >= reads + 2);
	struct timespec old[2] = {{time(NULL) - 10, 0}, {time(NULL) - 10, 0}};
	assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
	usleep(100 * 1000);
	kvc_dfile_watch_stats(w, &st);
	reads = st.reads;
	usleep(100 * 1000);
	kvc_dfile_watch_stats(w, &st);
	assert_int_equal(st.reads, reads);
	wait_calls(&r, 2, "c:2 b:3 ");
	/* replaced by rename */
	write_by_rename(path, "{\"pods\": [" POD("d", "") "]}");
	wait_calls(&r, 3, "d:3 ");
	/* invalid: the last good set stays */
	uint64_t failures = failures_now(w);
	write_in_place(path, "{\"pods\": [" POD("e", ""));
	wait_stats(w, failures + 1, false);
	usleep(100 * 1000);
	wait_calls(&r, 3, "d:3 ");
	/* one bad pod: the others are handed over */
	write_by_rename(path, "{\"pods\": [" POD("e", "") ", " POD(
				  "f", ", \"dp_size\": 0") "]}");
	wait_calls(&r, 4, "e:3 ");
	kvc_dfile_watch_stats(w, &st);
	assert_int_equal(st.loads, 4);
	assert_int_equal(st.bad_pods, 1);
	/* deleted: the last good set stays */
	assert_int_equal(unlink(path), 0);
	wait_stats(w, 0, true);
	usleep(100 * 1000);
	wait_calls(&r, 4, "e:3 ");
	/* back */
	write_by_rename(path, "{\"pods\": [" POD("g", "") "]}");
	wait_calls(&r, 5, "g:3 ");
	/* a directory in its place cannot be read: the set stays */
	assert_int_equal(unlink(path), 0);
	failures = failures_now(w);
	assert_int_equal(mkdir(path, 0755), 0);
	wait_stats(w, failures + 1, false);
	usleep(100 * 1000);
	wait_calls(&r, 5, "g:3 ");
	assert_int_equal(rmdir(path), 0);
	write_by_rename(path, "{\"pods\": []}");
	wait_calls(&r, 6, "");
	kvc_dfile_watch_free(w);

	/* stop does not wait for the interval */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(kvc_dfile_watch_open(path, 1, 60000, on_pods, &r, &w),
			 KVI_OK);
	wait_calls(&r, 7, "");
	kvc_dfile_watch_free(w);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 5);
	kvc_dfile_watch_free(NULL);

	/* bad arguments */
	assert_int_equal(kvc_dfile_watch_open("", 1, 20, on_pods, &r, &w),
			 KVI_EINVAL);
	assert_int_equal(kvc_dfile_watch_open(path, 1, 0, on_pods, &r, &w),
			 KVI_EINVAL);
	assert_int_equal(kvc_dfile_watch_open(path, 1, 20, NULL, &r, &w),
			 KVI_EINVAL);

	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_simulator_layout),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_start_rank),
	    cmocka_unit_test(test_invalid_pods_are_reported_and_skipped),
	    cmocka_unit_test(test_duplicate_names),
	    cmocka_unit_test(test_bad_documents),
	    cmocka_unit_test(test_watcher),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
