/*
 * test_kube_table.c - which watched pods are registered
 * (coordinator/discovery/kube_table.h): nothing before every namespace is
 * listed, Ready pods with an IP, a NotReady blip kept within the grace and a
 * long NotReady dropped, terminating and deleted pods dropped at once, an IP
 * change seen as a different pod, and a relist that replaces a namespace
 * (missed deletions) while keeping what it knew of the pods still there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "kube_table.h"

#define GRACE 1000

static const kvc_kube_defaults defaults = {
    .zmq_port = 5557,
    .dp_size = 2,
    .block_size = 16,
    .model_label = "model",
};

/* mkpod parses a pod of namespace ns into *p. */
static void
mkpod(kvc_kube_pod *p, const char *ns, const char *name, const char *uid,
      const char *ip, bool ready, bool terminating)
{
	json_t *j = json_pack(
	    "{s:{s:s,s:s,s:s,s:{s:s}},s:{s:[{s:s,s:s}]}}", "metadata", "name",
	    name, "namespace", ns, "uid", uid, "labels", "model", "m", "status",
	    "conditions", "type", "Ready", "status", ready ? "True" : "False");
	assert_non_null(j);
	if (ip != NULL) {
		json_object_set_new(json_object_get(j, "status"), "podIP",
				    json_string(ip));
	}
	if (terminating) {
		json_object_set_new(json_object_get(j, "metadata"),
				    "deletionTimestamp",
				    json_string("2026-01-01T00:00:00Z"));
	}
	char err[200];
	assert_int_equal(kvc_kube_pod_parse(j, &defaults, p, err, sizeof(err)),
			 KVI_OK);
	json_decref(j);
}

static void
upsert(kvc_kube_table *t, size_t ns, const char *nsname, const char *name,
       const char *ip, bool ready, int64_t now)
{
	kvc_kube_pod p;
	mkpod(&p, nsname, name, "uid-1", ip, ready, false);
	kvc_kube_table_upsert(t, ns, &p, now);
	kvc_kube_pod_fini(&p); /* moved-from: empty */
}

/* desired returns the registered pods as "name@ip,..." and whether the
 * set changed. */
static bool
desired(kvc_kube_table *t, int64_t now, char *out, size_t len, int64_t *next)
{
	const kvc_pod *pods;
	size_t n;
	int64_t nx;
	bool changed = kvc_kube_table_desired(t, now, &pods, &n, &nx);
	out[0] = '\0';
	for (size_t i = 0; changed && i < n; i++) {
		size_t l = strlen(out);
		snprintf(out + l, len - l, "%s%s@%s", i ? "," : "",
			 pods[i].name, pods[i].ip);
	}
	if (next != NULL) {
		*next = nx;
	}
	return changed;
}

static void
test_waits_for_every_namespace(void **state)
{
	(void)state;
	kvc_kube_table *t = kvc_kube_table_alloc(2, GRACE);
	char s[512];
	kvc_kube_table_replace(t, 0, NULL, 0, 10);
	upsert(t, 0, "a", "p0", "10.0.0.1", true, 11);
	assert_false(kvc_kube_table_synced(t));
	assert_false(desired(t, 12, s, sizeof(s), NULL));
	kvc_kube_table_replace(t, 1, NULL, 0, 13);
	assert_true(kvc_kube_table_synced(t));
	assert_true(desired(t, 14, s, sizeof(s), NULL));
	assert_string_equal(s, "a/p0@10.0.0.1");
	/* unchanged: not handed over again */
	assert_false(desired(t, 15, s, sizeof(s), NULL));
	kvc_kube_table_free(t);

	/* an empty first set still counts (so /ready can pass) */
	t = kvc_kube_table_alloc(1, GRACE);
	kvc_kube_table_replace(t, 0, NULL, 0, 1);
	assert_true(desired(t, 2, s, sizeof(s), NULL));
	assert_string_equal(s, "");
	kvc_kube_table_free(t);
}

static void
test_ready_ip_terminating(void **state)
{
	(void)state;
	kvc_kube_table *t = kvc_kube_table_alloc(1, GRACE);
	char s[512];
	kvc_kube_table_replace(t, 0, NULL, 0, 1);
	desired(t, 1, s, sizeof(s), NULL);
	upsert(t, 0, "a", "p0", NULL, true, 2);        /* no IP yet */
	upsert(t, 0, "a", "p1", "10.0.0.2", false, 2); /* never Ready */
	assert_false(desired(t, 3, s, sizeof(s), NULL));
	upsert(t, 0, "a", "p0", "10.0.0.1", true, 4);
	assert_true(desired(t, 5, s, sizeof(s), NULL));
	assert_string_equal(s, "a/p0@10.0.0.1");
	/* never-Ready p1 is not kept by any grace */
	int64_t next;
	assert_false(desired(t, 5 + 10 * GRACE, s, sizeof(s), &next));
	assert_int_equal(next, -1);

	kvc_kube_pod p;
	mkpod(&p, "a", "p0", "uid-1", "10.0.0.1", true, true);
	kvc_kube_table_upsert(t, 0, &p, 6);
	assert_true(desired(t, 7, s, sizeof(s), NULL));
	assert_string_equal(s, "");
	kvc_kube_table_free(t);
}

static void
test_not_ready_grace(void **state)
{
	(void)state;
	kvc_kube_table *t = kvc_kube_table_alloc(1, GRACE);
	char s[512];
	int64_t next;
	kvc_kube_table_replace(t, 0, NULL, 0, 1);
	upsert(t, 0, "a", "p0", "10.0.0.1", true, 1);
	upsert(t, 0, "a", "p1", "10.0.0.2", true, 1);
	assert_true(desired(t, 2, s, sizeof(s), NULL));
	assert_string_equal(s, "a/p0@10.0.0.1,a/p1@10.0.0.2");

	/* a blip: NotReady, then Ready again within the grace */
	upsert(t, 0, "a", "p0", "10.0.0.1", false, 100);
	assert_false(desired(t, 101, s, sizeof(s), &next));
	assert_int_equal(next, 100 + GRACE);
	kvc_kube_table_stats st;
	kvc_kube_table_stats_get(t, &st);
	assert_int_equal(st.registered, 2);
	assert_int_equal(st.not_ready, 1);
	/* a second NotReady update does not restart the clock */
	upsert(t, 0, "a", "p0", "10.0.0.1", false, 500);
	assert_false(desired(t, 501, s, sizeof(s), &next));
	assert_int_equal(next, 100 + GRACE);
	upsert(t, 0, "a", "p0", "10.0.0.1", true, 600);
	assert_false(desired(t, 601, s, sizeof(s), &next));
	assert_int_equal(next, -1);
	assert_false(desired(t, 100 + 5 * GRACE, s, sizeof(s), NULL));

	/* a long NotReady: dropped when the grace runs out, not before */
	upsert(t, 0, "a", "p1", "10.0.0.2", false, 10000);
	assert_false(desired(t, 10000 + GRACE - 1, s, sizeof(s), &next));
	assert_int_equal(next, 10000 + GRACE);
	assert_true(desired(t, 10000 + GRACE, s, sizeof(s), NULL));
	assert_string_equal(s, "a/p0@10.0.0.1");
	/* Ready again: registered again */
	upsert(t, 0, "a", "p1", "10.0.0.2", true, 20000);
	assert_true(desired(t, 20001, s, sizeof(s), NULL));
	assert_string_equal(s, "a/p0@10.0.0.1,a/p1@10.0.0.2");
	kvc_kube_table_free(t);
}

static void
test_ip_change_and_delete(void **state)
{
	(void)state;
	kvc_kube_table *t = kvc_kube_table_alloc(1, GRACE);
	char s[512];
	kvc_kube_table_replace(t, 0, NULL, 0, 1);
	upsert(t, 0, "a", "p0", "10.0.0.1", true, 1);
	assert_true(desired(t, 2, s, sizeof(s), NULL));
	upsert(t, 0, "a", "p0", "10.0.0.7", true, 3);
	assert_true(desired(t, 4, s, sizeof(s), NULL));
	assert_string_equal(s, "a/p0@10.0.0.7");
	assert_true(kvc_kube_table_delete(t, "a/p0"));
	assert_false(kvc_kube_table_delete(t, "a/p0"));
	assert_true(desired(t, 5, s, sizeof(s), NULL));
	assert_string_equal(s, "");
	kvc_kube_table_free(t);
}

static void
test_relist(void **state)
{
	(void)state;
	kvc_kube_table *t = kvc_kube_table_alloc(2, GRACE);
	char s[512];
	kvc_kube_table_replace(t, 0, NULL, 0, 1);
	kvc_kube_table_replace(t, 1, NULL, 0, 1);
	upsert(t, 0, "a", "p0", "10.0.0.1", true, 1);
	upsert(t, 0, "a", "p1", "10.0.0.2", true, 1);
	upsert(t, 0, "a", "p2", "10.0.0.3", true, 1);
	upsert(t, 1, "b", "q0", "10.0.1.1", true, 1);
	assert_true(desired(t, 2, s, sizeof(s), NULL));
	/* p1 went NotReady just before the watch broke */
	upsert(t, 0, "a", "p1", "10.0.0.2", false, 100);
	assert_false(desired(t, 101, s, sizeof(s), NULL));

	/* the relist of namespace a: p0 deleted meanwhile, p2's IP changed,
	 * p3 new, p1 still NotReady */
	kvc_kube_pod pods[3];
	mkpod(&pods[0], "a", "p3", "uid-3", "10.0.0.4", true, false);
	mkpod(&pods[1], "a", "p1", "uid-1", "10.0.0.2", false, false);
	mkpod(&pods[2], "a", "p2", "uid-1", "10.0.0.9", true, false);
	kvc_kube_table_replace(t, 0, pods, 3, 200);
	for (int i = 0; i < 3; i++) {
		kvc_kube_pod_fini(&pods[i]);
	}
	int64_t next;
	assert_true(desired(t, 201, s, sizeof(s), &next));
	/* namespace b untouched; p1 kept by its grace, which still counts
	 * from 100, not from the relist */
	assert_string_equal(s, "a/p1@10.0.0.2,a/p2@10.0.0.9,a/p3@10.0.0.4,"
			       "b/q0@10.0.1.1");
	assert_int_equal(next, 100 + GRACE);
	assert_true(desired(t, 100 + GRACE, s, sizeof(s), NULL));
	assert_string_equal(s, "a/p2@10.0.0.9,a/p3@10.0.0.4,b/q0@10.0.1.1");

	/* a pod re-created under the same name (new uid) while NotReady is
	 * a new pod: no grace carried over */
	upsert(t, 0, "a", "p3", "10.0.0.4", true, 300);
	kvc_kube_pod p;
	mkpod(&p, "a", "p3", "uid-new", "10.0.0.4", false, false);
	kvc_kube_table_replace(t, 0, &p, 1, 301);
	kvc_kube_pod_fini(&p);
	assert_true(desired(t, 302, s, sizeof(s), NULL));
	assert_string_equal(s, "b/q0@10.0.1.1");
	kvc_kube_table_stats st;
	kvc_kube_table_stats_get(t, &st);
	assert_int_equal(st.pods, 2);
	assert_int_equal(st.registered, 1);
	kvc_kube_table_free(t);
}

/* A relist of many pods, in any order, keeps every one's state. */
static void
test_relist_many(void **state)
{
	(void)state;
	enum { N = 64 };
	kvc_kube_table *t = kvc_kube_table_alloc(1, GRACE);
	char s[8192], name[32], ip[32];
	kvc_kube_table_replace(t, 0, NULL, 0, 1);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "p%02d", i);
		snprintf(ip, sizeof(ip), "10.0.0.%d", i);
		upsert(t, 0, "a", name, ip, true, 1);
	}
	assert_true(desired(t, 2, s, sizeof(s), NULL));
	/* every odd pod NotReady, then a relist listing all, reversed */
	for (int i = 1; i < N; i += 2) {
		snprintf(name, sizeof(name), "p%02d", i);
		snprintf(ip, sizeof(ip), "10.0.0.%d", i);
		upsert(t, 0, "a", name, ip, false, 10);
	}
	assert_false(desired(t, 11, s, sizeof(s), NULL));
	kvc_kube_pod pods[N];
	for (int i = 0; i < N; i++) {
		int k = N - 1 - i;
		snprintf(name, sizeof(name), "p%02d", k);
		snprintf(ip, sizeof(ip), "10.0.0.%d", k);
		mkpod(&pods[i], "a", name, "uid-1", ip, k % 2 == 0, false);
	}
	kvc_kube_table_replace(t, 0, pods, N, 20);
	for (int i = 0; i < N; i++) {
		kvc_kube_pod_fini(&pods[i]);
	}
	int64_t next;
	assert_false(desired(t, 21, s, sizeof(s), &next));
	assert_int_equal(next, 10 + GRACE);
	assert_true(desired(t, 10 + GRACE, s, sizeof(s), NULL));
	kvc_kube_table_stats st;
	kvc_kube_table_stats_get(t, &st);
	assert_int_equal(st.pods, N);
	assert_int_equal(st.registered, N / 2);
	assert_non_null(strstr(s, "a/p62@10.0.0.62"));
	assert_null(strstr(s, "a/p63@"));
	kvc_kube_table_free(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_waits_for_every_namespace),
	    cmocka_unit_test(test_ready_ip_terminating),
	    cmocka_unit_test(test_not_ready_grace),
	    cmocka_unit_test(test_ip_change_and_delete),
	    cmocka_unit_test(test_relist),
	    cmocka_unit_test(test_relist_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
