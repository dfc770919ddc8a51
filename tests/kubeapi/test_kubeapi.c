/*
 * test_kubeapi.c - kvindex-kubeapi from the outside, as a pod watcher
 * sees it.
 *
 * Starts the server through kvt_kubeapi.h with a token, a state file and
 * 200 ms bookmarks, and checks: 401 without or with a wrong token and 200
 * with the right one (also after changing it); lists sorted by name,
 * paginated from one snapshot; label selectors; watches that see ADDED,
 * MODIFIED and DELETED with increasing resourceVersions, replay history,
 * start with synthetic ADDED, follow selector transitions, get bookmarks
 * and end at timeoutSeconds; the chunking modes; 410 after a compaction;
 * dropped and blocked watches; and a restart that keeps resourceVersions
 * increasing and uids stable; and a clean exit on SIGTERM. The tests run
 * in order on one server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kvitest.h"
#include "watch_client.h"

#define TOKEN   "s3cret"
#define WAIT_MS 5000
#define NS      "/api/v1/namespaces/"

static kvt_kube K;

/* ---- helpers -------------------------------------------------------- */

static uint64_t
rv_of(const json_t *obj)
{
	const char *s = json_string_value(json_object_get(
	    json_object_get(obj, "metadata"), "resourceVersion"));
	assert_non_null(s);
	return strtoull(s, NULL, 10);
}

static const char *
md(const json_t *obj, const char *key)
{
	return json_string_value(
	    json_object_get(json_object_get(obj, "metadata"), key));
}

static const char *
label(const json_t *obj, const char *key)
{
	json_t *labels =
	    json_object_get(json_object_get(obj, "metadata"), "labels");
	return json_string_value(json_object_get(labels, key));
}

/* api GETs path with token and checks the status; returns the JSON. */
static json_t *
api(const char *path, const char *token, long expect)
{
	kvt_http_resp r;
	assert_int_equal(
	    kvt_kube_request(&K, "GET", path, NULL, token, WAIT_MS, &r),
	    KVI_OK);
	if (r.status != expect) {
		fail_msg("GET %s: %ld %s", path, r.status, r.body);
	}
	assert_non_null(r.json);
	json_t *v = json_incref(r.json);
	kvt_http_resp_fini(&r);
	return v;
}

static json_t *
list(const char *path)
{
	json_t *l = api(path, TOKEN, 200);
	assert_string_equal(json_string_value(json_object_get(l, "kind")),
			    "PodList");
	return l;
}

/* put stores pod ns/name with labels "k", "v", ... (NULL-terminated) and
 * returns its resourceVersion; *uid (may be NULL) gets its uid. */
static uint64_t
put(const char *ns, const char *name, const char *const *labels, char *uid)
{
	json_t *pod = kvt_kube_pod("10.0.0.1", true, labels, NULL);
	json_t *stored;
	assert_int_equal(kvt_kube_put_pod(&K, ns, name, pod, &stored), KVI_OK);
	json_decref(pod);
	if (uid != NULL) {
		snprintf(uid, 64, "%s", md(stored, "uid"));
	}
	uint64_t rv = rv_of(stored);
	json_decref(stored);
	return rv;
}

static uint64_t
current_rv(void)
{
	long long rv = kvt_kube_stat(&K, "rv");
	assert_true(rv > 0);
	return (uint64_t)rv;
}

static watch_client *
watch(const char *path, long expect)
{
	watch_client *c;
	assert_int_equal(
	    watch_client_open(K.host, K.port, path, TOKEN, WAIT_MS, &c),
	    KVI_OK);
	assert_int_equal(watch_client_status(c), expect);
	return c;
}

/* next checks that the next event has type and name (NULL: any) and
 * returns it (json_decref). */
static json_t *
next(watch_client *c, const char *type, const char *name)
{
	json_t *ev = watch_client_next(c, WAIT_MS);
	if (ev == NULL) {
		fail_msg("no %s event for %s", type, name ? name : "-");
	}
	const char *got = json_string_value(json_object_get(ev, "type"));
	json_t *obj = json_object_get(ev, "object");
	if (got == NULL || strcmp(got, type) != 0 ||
	    (name != NULL && strcmp(md(obj, "name"), name) != 0)) {
		fail_msg("expected %s %s, got %s", type, name ? name : "-",
			 json_dumps(ev, JSON_COMPACT));
	}
	return ev;
}

/* ---- tests ---------------------------------------------------------- */

static void
test_auth(void **state)
{
	(void)state;
	json_t *st = api(NS "default/pods", NULL, 401);
	assert_string_equal(json_string_value(json_object_get(st, "kind")),
			    "Status");
	assert_string_equal(json_string_value(json_object_get(st, "reason")),
			    "Unauthorized");
	assert_int_equal(json_integer_value(json_object_get(st, "code")), 401);
	json_decref(st);
	json_decref(api(NS "default/pods", "wrong", 401));
	json_decref(list(NS "default/pods"));
	assert_int_equal(kvt_kube_stat(&K, "unauthorized"), 2);

	assert_int_equal(kvt_kube_set_token(&K, "other"), KVI_OK);
	json_decref(api(NS "default/pods", TOKEN, 401));
	json_decref(api(NS "default/pods", "other", 200));
	assert_int_equal(kvt_kube_set_token(&K, TOKEN), KVI_OK);
	json_decref(list(NS "default/pods"));
}

static void
test_list_pages(void **state)
{
	(void)state;
	const char *const vllm[] = {"app", "vllm", "gpu", "a100", NULL};
	const char *const other[] = {"app", "other", NULL};
	for (int i = 4; i >= 0; i--) { /* stored out of order */
		char name[16];
		snprintf(name, sizeof(name), "p%d", i);
		put("ns1", name, i % 2 ? other : vllm, NULL);
	}
	put("ns2", "p0", vllm, NULL);

	json_t *l1 = list(NS "ns1/pods?limit=2");
	json_t *items = json_object_get(l1, "items");
	assert_int_equal(json_array_size(items), 2);
	assert_string_equal(md(json_array_get(items, 0), "name"), "p0");
	assert_string_equal(md(json_array_get(items, 1), "name"), "p1");
	assert_null(json_object_get(json_array_get(items, 0), "kind"));
	uint64_t rv = rv_of(l1);
	const char *cont = md(l1, "continue");
	assert_non_null(cont);
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(l1, "metadata"),
					       "remainingItemCount")),
	    3);
	/* Changes after the first page must not show in later pages. */
	put("ns1", "p2b", vllm, NULL);
	assert_true(put("ns1", "p3", vllm, NULL) > rv);

	char path[1024];
	snprintf(path, sizeof(path), NS "ns1/pods?limit=2&continue=%s", cont);
	json_t *l2 = list(path);
	items = json_object_get(l2, "items");
	assert_int_equal(json_array_size(items), 2);
	assert_string_equal(md(json_array_get(items, 0), "name"), "p2");
	assert_string_equal(md(json_array_get(items, 1), "name"), "p3");
	assert_true(rv_of(json_array_get(items, 1)) <= rv);
	assert_string_equal(label(json_array_get(items, 1), "app"), "other");
	assert_int_equal(rv_of(l2), rv);
	snprintf(path, sizeof(path), NS "ns1/pods?limit=2&continue=%s",
		 md(l2, "continue"));
	json_t *l3 = list(path);
	assert_int_equal(json_array_size(json_object_get(l3, "items")), 1);
	assert_null(md(l3, "continue"));

	/* A fresh list sees the changes, sorted by name. */
	json_t *all = list(NS "ns1/pods");
	items = json_object_get(all, "items");
	assert_int_equal(json_array_size(items), 6);
	assert_string_equal(md(json_array_get(items, 3), "name"), "p2b");
	assert_true(rv_of(all) > rv);
	json_t *every = list("/api/v1/pods");
	assert_int_equal(json_array_size(json_object_get(every, "items")), 7);
	assert_string_equal(
	    md(json_array_get(json_object_get(every, "items"), 6), "namespace"),
	    "ns2");
	json_decref(
	    api(NS "ns1/pods?limit=2&continue=bm90LWEtdG9rZW4", TOKEN, 400));
	snprintf(path, sizeof(path),
		 NS "ns1/pods?resourceVersion=1&continue=%s", cont);
	json_decref(api(path, TOKEN, 400));
	json_decref(l1);
	json_decref(l2);
	json_decref(l3);
	json_decref(all);
	json_decref(every);
}

/* count lists ns1 with a label selector, or a field selector when it
 * names a field (holds a dot), and returns the number of items. */
static size_t
count(const char *selector)
{
	char path[512];
	snprintf(path, sizeof(path), NS "ns1/pods?%sSelector=%s",
		 strchr(selector, '.') ? "field" : "label", selector);
	json_t *l = list(path);
	size_t n = json_array_size(json_object_get(l, "items"));
	json_decref(l);
	return n;
}

static void
test_selectors(void **state)
{
	(void)state;
	/* ns1: p0 p2 p2b p3 p4 are app=vllm,gpu=a100; p1 is app=other. */
	assert_int_equal(count("app%3Dvllm"), 5);
	assert_int_equal(count("app%3D%3Dother"), 1);
	assert_int_equal(count("app!%3Dvllm"), 1);
	assert_int_equal(count("app+in+(vllm,other)"), 6);
	assert_int_equal(count("app%20notin%20(vllm)"), 1);
	assert_int_equal(count("gpu"), 5);
	assert_int_equal(count("!gpu"), 1);
	assert_int_equal(count("app%3Dvllm,!gpu"), 0);
	assert_int_equal(count("missing!%3Dx"), 6);
	assert_int_equal(count(""), 6);
	assert_int_equal(count("metadata.name%3Dp1"), 1);
	assert_int_equal(count("status.phase!%3DRunning"), 0);
	json_decref(api(NS "ns1/pods?fieldSelector=spec.foo%3Dx", TOKEN, 400));
	json_decref(api(NS "ns1/pods?labelSelector=app+in+(a", TOKEN, 400));
	json_decref(api(NS "ns1/pods?labelSelector=%3Dx", TOKEN, 400));
	json_decref(api(NS "ns1/pods?labelSelector=a%20b", TOKEN, 400));
}

static void
test_watch_events(void **state)
{
	(void)state;
	uint64_t start = current_rv();
	char path[256];
	snprintf(path, sizeof(path), NS "w/pods?watch=1&resourceVersion=%llu",
		 (unsigned long long)start);
	watch_client *c = watch(path, 200);
	assert_string_equal(watch_client_header(c, "Content-Type"),
			    "application/json");
	assert_string_equal(watch_client_header(c, "Transfer-Encoding"),
			    "chunked");
	put("other", "x", NULL, NULL); /* another namespace: not seen */
	char uid[64];
	put("w", "a", NULL, uid);
	json_t *ev = next(c, "ADDED", "a");
	json_t *obj = json_object_get(ev, "object");
	assert_string_equal(json_string_value(json_object_get(obj, "kind")),
			    "Pod");
	assert_string_equal(md(obj, "uid"), uid);
	uint64_t rv1 = rv_of(obj);
	assert_true(rv1 > start + 1);
	json_decref(ev);
	const char *const l[] = {"x", "y", NULL};
	put("w", "a", l, NULL);
	ev = next(c, "MODIFIED", "a");
	uint64_t rv2 = rv_of(json_object_get(ev, "object"));
	assert_true(rv2 > rv1);
	json_decref(ev);
	assert_int_equal(kvt_kube_delete_pod(&K, "w", "a"), KVI_OK);
	assert_int_equal(kvt_kube_delete_pod(&K, "w", "a"), KVI_ENOENT);
	ev = next(c, "DELETED", "a");
	obj = json_object_get(ev, "object");
	assert_true(rv_of(obj) > rv2);
	assert_string_equal(md(obj, "uid"), uid);
	assert_string_equal(label(obj, "x"), "y");
	json_decref(ev);
	size_t n;
	const watch_chunk *ch = watch_client_chunks(c, &n);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(ch[i].newlines, 1);
		assert_true(ch[i].ends_line);
	}
	watch_client_close(c);

	/* From an older resourceVersion: the same three events again. */
	c = watch(path, 200);
	json_decref(next(c, "ADDED", "a"));
	json_decref(next(c, "MODIFIED", "a"));
	json_decref(next(c, "DELETED", "a"));
	watch_client_close(c);
}

static void
test_watch_selector(void **state)
{
	(void)state;
	const char *const worker[] = {"role", "worker", NULL};
	const char *const worker2[] = {"role", "worker", "v", "2", NULL};
	const char *const other[] = {"role", "other", NULL};
	put("w", "b", NULL, NULL);
	watch_client *c = watch(NS "w/pods?watch=true&labelSelector=role%3D"
				   "worker",
				200);
	put("w", "b", worker, NULL);
	json_decref(next(c, "ADDED", "b"));
	put("w", "b", worker2, NULL);
	json_decref(next(c, "MODIFIED", "b"));
	uint64_t rv = put("w", "b", other, NULL);
	json_t *ev = next(c, "DELETED", "b");
	json_t *obj = json_object_get(ev, "object");
	assert_int_equal(rv_of(obj), rv);
	assert_string_equal(label(obj, "role"), "worker"); /* previous state */
	json_decref(ev);
	put("w", "b", NULL, NULL); /* still not matching: nothing */
	put("w", "c", worker, NULL);
	json_decref(next(c, "ADDED", "c"));
	watch_client_close(c);

	/* No resourceVersion: synthetic ADDED for the matching pods. */
	c = watch(NS "w/pods?watch=1&labelSelector=role", 200);
	json_decref(next(c, "ADDED", "c"));
	put("w", "d", worker, NULL);
	json_decref(next(c, "ADDED", "d"));
	watch_client_close(c);
}

static void
test_bookmarks_and_timeout(void **state)
{
	(void)state;
	watch_client *c = watch(NS "w/pods?watch=1&resourceVersion=0&"
				   "allowWatchBookmarks=true&timeoutSeconds=1",
				200);
	json_decref(next(c, "ADDED", NULL)); /* b, c, d */
	json_decref(next(c, "ADDED", NULL));
	json_decref(next(c, "ADDED", NULL));
	json_t *ev = next(c, "BOOKMARK", NULL);
	assert_int_equal(rv_of(json_object_get(ev, "object")), current_rv());
	json_decref(ev);
	assert_true(watch_client_wait_end(c, 3000));
	assert_true(watch_client_ended(c));
	assert_false(watch_client_cut(c));
	watch_client_close(c);

	/* Without allowWatchBookmarks: nothing at all. */
	char path[256];
	snprintf(path, sizeof(path), NS "w/pods?watch=1&resourceVersion=%llu",
		 (unsigned long long)current_rv());
	c = watch(path, 200);
	assert_null(watch_client_next(c, 600));
	watch_client_close(c);
}

static void
test_chunking(void **state)
{
	(void)state;
	uint64_t from = current_rv();
	char path[256];
	snprintf(path, sizeof(path), NS "w/pods?watch=1&resourceVersion=%llu",
		 (unsigned long long)from);
	assert_int_equal(kvt_kube_set_chunking(&K, "split"), KVI_OK);
	watch_client *c = watch(path, 200);
	put("w", "s1", NULL, NULL);
	json_decref(next(c, "ADDED", "s1"));
	size_t n;
	const watch_chunk *ch = watch_client_chunks(c, &n);
	assert_int_equal(n, 2);
	assert_false(ch[0].ends_line);
	assert_int_equal(ch[0].newlines, 0);
	assert_true(ch[1].ends_line);
	watch_client_close(c);

	assert_int_equal(kvt_kube_set_chunking(&K, "batch"), KVI_OK);
	put("w", "s2", NULL, NULL);
	c = watch(path, 200); /* replays s1 and s2 in one chunk */
	json_decref(next(c, "ADDED", "s1"));
	json_decref(next(c, "ADDED", "s2"));
	ch = watch_client_chunks(c, &n);
	assert_int_equal(n, 1);
	assert_int_equal(ch[0].newlines, 2);
	watch_client_close(c);
	assert_int_equal(kvt_kube_set_chunking(&K, "line"), KVI_OK);
	assert_int_equal(kvt_kube_set_chunking(&K, "bogus"), KVI_EPROTO);
}

static void
test_compact(void **state)
{
	(void)state;
	uint64_t old = current_rv();
	json_t *page = list(NS "ns1/pods?limit=1");
	put("w", "e", NULL, NULL);
	assert_int_equal(kvt_kube_compact(&K), KVI_OK);
	uint64_t now = current_rv();
	long long gone = kvt_kube_stat(&K, "gone");

	char path[1024];
	snprintf(path, sizeof(path), NS "w/pods?watch=1&resourceVersion=%llu",
		 (unsigned long long)old);
	watch_client *c = watch(path, 200);
	json_t *ev = next(c, "ERROR", NULL);
	json_t *st = json_object_get(ev, "object");
	assert_int_equal(json_integer_value(json_object_get(st, "code")), 410);
	assert_string_equal(json_string_value(json_object_get(st, "reason")),
			    "Expired");
	char msg[128];
	snprintf(msg, sizeof(msg), "too old resource version: %llu (%llu)",
		 (unsigned long long)old, (unsigned long long)now);
	assert_string_equal(json_string_value(json_object_get(st, "message")),
			    msg);
	json_decref(ev);
	assert_true(watch_client_wait_end(c, WAIT_MS));
	assert_true(watch_client_ended(c));
	watch_client_close(c);

	snprintf(path, sizeof(path), NS "ns1/pods?limit=1&continue=%s",
		 md(page, "continue"));
	json_t *exp = api(path, TOKEN, 410);
	assert_string_equal(json_string_value(json_object_get(exp, "reason")),
			    "Expired");
	json_decref(exp);
	json_decref(page);
	assert_int_equal(kvt_kube_stat(&K, "gone"), gone + 2);

	/* From the compaction point on, watching works. */
	snprintf(path, sizeof(path), NS "w/pods?watch=1&resourceVersion=%llu",
		 (unsigned long long)now);
	c = watch(path, 200);
	put("w", "f", NULL, NULL);
	json_decref(next(c, "ADDED", "f"));
	watch_client_close(c);
	snprintf(path, sizeof(path), NS "w/pods?watch=1&resourceVersion=%llu",
		 (unsigned long long)now + 100);
	json_decref(api(path, TOKEN, 504));
}

static bool
no_open_watches(void *arg)
{
	(void)arg;
	return kvt_kube_stat(&K, "open_watches") == 0;
}

static void
test_drop_and_block(void **state)
{
	(void)state;
	assert_true(kvt_wait_until(no_open_watches, NULL, WAIT_MS));
	watch_client *a = watch(NS "w/pods?watch=1", 200);
	watch_client *b = watch("/api/v1/watch/pods", 200); /* legacy */
	json_decref(next(a, "ADDED", NULL));
	assert_int_equal(kvt_kube_stat(&K, "open_watches"), 2);
	assert_int_equal(kvt_kube_drop_watches(&K), KVI_OK);
	assert_true(watch_client_wait_end(a, WAIT_MS));
	assert_true(watch_client_wait_end(b, WAIT_MS));
	assert_true(watch_client_cut(a));
	assert_true(watch_client_cut(b));
	assert_false(watch_client_ended(a));
	watch_client_close(a);
	watch_client_close(b);
	assert_true(kvt_wait_until(no_open_watches, NULL, WAIT_MS));

	assert_int_equal(kvt_kube_block_watches(&K, true), KVI_OK);
	watch_client *c = watch(NS "w/pods?watch=1", 503);
	json_t *st = watch_client_next(c, WAIT_MS);
	assert_string_equal(json_string_value(json_object_get(st, "reason")),
			    "ServiceUnavailable");
	json_decref(st);
	watch_client_close(c);
	json_decref(list(NS "w/pods"));
	assert_int_equal(kvt_kube_block_watches(&K, false), KVI_OK);
	watch_client_close(watch(NS "w/pods?watch=1", 200));
}

static void
test_restart(void **state)
{
	(void)state;
	char uid[64], uid2[64], uid3[64];
	uint64_t rv = put("r", "keep", NULL, uid);
	json_t *same = kvt_kube_pod("10.0.0.1", true, NULL, NULL);
	json_t *stored;
	assert_int_equal(kvt_kube_put_pod(&K, "r", "keep", same, &stored),
			 KVI_OK);
	assert_int_equal(rv_of(stored), rv); /* no-op update: no new RV */
	json_decref(stored);
	json_decref(same);
	kvt_kube_kill(&K);
	assert_int_equal(kvt_kube_restart(&K, WAIT_MS), KVI_OK);
	assert_int_equal(current_rv(), rv);
	json_t *pod = api(NS "r/pods/keep", TOKEN, 200);
	assert_string_equal(md(pod, "uid"), uid);
	json_decref(pod);
	json_decref(api(NS "r/pods/nope", TOKEN, 404));

	char path[256];
	snprintf(path, sizeof(path), NS "r/pods?watch=1&resourceVersion=%llu",
		 (unsigned long long)rv - 1);
	watch_client *c = watch(path, 200);
	json_decref(next(c, "ERROR", NULL));
	watch_client_close(c);
	snprintf(path, sizeof(path), NS "r/pods?watch=1&resourceVersion=%llu",
		 (unsigned long long)rv);
	c = watch(path, 200);
	const char *const l[] = {"after", "restart", NULL};
	assert_true(put("r", "keep", l, uid2) > rv);
	assert_string_equal(uid2, uid);
	json_decref(next(c, "MODIFIED", "keep"));
	watch_client_close(c);

	/* Re-created: a new uid. */
	assert_int_equal(kvt_kube_delete_pod(&K, "r", "keep"), KVI_OK);
	put("r", "keep", NULL, uid3);
	assert_string_not_equal(uid3, uid);

	/* SIGTERM, then a restart from the state saved on the way. */
	uint64_t last = current_rv();
	assert_int_equal(kvt_kube_restart(&K, WAIT_MS), KVI_OK);
	assert_int_equal(current_rv(), last);
}

/* Last: SIGTERM must exit 0 (under ASan, a leak or an error in the server
 * makes it non-zero). */
static void
test_exit_status(void **state)
{
	(void)state;
	int status;
	kvt_kube_stop(&K, &status);
	assert_int_equal(status, 0);
}

static int
setup(void **state)
{
	(void)state;
	kvt_kube_opts o = {.token = TOKEN, .state = true, .bookmark_ms = 200};
	return kvt_kube_start(KVI_KUBEAPI_BIN, &o, WAIT_MS, &K) == KVI_OK ? 0
									  : -1;
}

static int
teardown(void **state)
{
	(void)state;
	kvt_kube_stop(&K, NULL); /* after a failure before test_exit_status */
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_auth),
	    cmocka_unit_test(test_list_pages),
	    cmocka_unit_test(test_selectors),
	    cmocka_unit_test(test_watch_events),
	    cmocka_unit_test(test_watch_selector),
	    cmocka_unit_test(test_bookmarks_and_timeout),
	    cmocka_unit_test(test_chunking),
	    cmocka_unit_test(test_compact),
	    cmocka_unit_test(test_drop_and_block),
	    cmocka_unit_test(test_restart),
	    cmocka_unit_test(test_exit_status),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
