/*
 * test_metrics.c - the Prometheus registry: exact text exposition, bucket
 * cumulativity, escaping, registration errors and concurrent updates.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "metrics.h"

static const char *const kinds[] = {"events", "treedump", "failed"};

static void
collect_listeners(void *arg, kvi_metrics_out *out)
{
	int *calls = arg;
	(*calls)++;
	kvi_metrics_out_family(out, "kvindex_listeners", "Listeners by state.",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample_i64(out, "kvindex_listeners",
				   (kvi_label[]){{"state", "active"}}, 1, 3);
	kvi_metrics_out_sample_i64(out, "kvindex_listeners",
				   (kvi_label[]){{"state", "we\"ird\\\n"}}, 1,
				   1);
	kvi_metrics_out_family(out, "kvindex_lmdb_bytes", "LMDB file size.",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample(out, "kvindex_lmdb_bytes", NULL, 0, 1.5e9);
	/* invalid names are dropped, not written */
	kvi_metrics_out_sample(out, "bad name", NULL, 0, 1);
	kvi_metrics_out_sample(out, "kvindex_x", (kvi_label[]){{"__x", "v"}}, 1,
			       1);
}

static void
test_render_exact(void **state)
{
	(void)state;
	kvi_metrics *m = kvi_metrics_alloc();
	kvi_counter *applied, *rec[3];
	kvi_gauge *entries, *ratio;
	kvi_histogram *lat, *by_shard[2];
	static const double bounds[] = {0.25, 0.5, 1, 2.5};
	static const char *const shards[] = {"a", "b"};
	int calls = 0;

	assert_int_equal(
	    kvi_metrics_counter_add(m, "kvindex_events_applied_total",
				    "Events applied to the index.", &applied),
	    KVI_OK);
	assert_int_equal(
	    kvi_metrics_counter_vec_add(m, "kvindex_recoveries_total",
					"Listener recoveries by kind.", "kind",
					kinds, 3, rec),
	    KVI_OK);
	assert_int_equal(kvi_metrics_gauge_add(m, "kvindex_entries",
					       "Entries in the index.",
					       KVI_GAUGE_INT, &entries),
			 KVI_OK);
	assert_int_equal(
	    kvi_metrics_gauge_add(m, "kvindex_fill_ratio",
				  "A \\ backslash\nand \"quotes\".",
				  KVI_GAUGE_DOUBLE, &ratio),
	    KVI_OK);
	assert_int_equal(kvi_metrics_histogram_add(m, "kvindex_query_seconds",
						   "Query latency.", bounds, 4,
						   &lat),
			 KVI_OK);
	assert_int_equal(kvi_metrics_histogram_vec_add(
			     m, "kvindex_commit_seconds", "Commit latency.",
			     bounds, 2, "shard", shards, 2, by_shard),
			 KVI_OK);
	kvi_metrics_collector_add(m, collect_listeners, &calls);

	kvi_counter_add(applied, 41);
	kvi_counter_inc(applied);
	kvi_counter_add(rec[0], 3);
	kvi_counter_inc(rec[1]);
	kvi_gauge_set(entries, 10);
	kvi_gauge_add(entries, -17);
	kvi_gauge_set_double(ratio, 0.1);
	const double obs[] = {0.125, 0.25, 0.75, 2, 4};
	for (size_t i = 0; i < 5; i++) {
		kvi_histogram_observe(lat, obs[i]);
	}
	kvi_histogram_observe(by_shard[1], 0.5);

	const char *expect =
	    "# HELP kvindex_events_applied_total Events applied to the index.\n"
	    "# TYPE kvindex_events_applied_total counter\n"
	    "kvindex_events_applied_total 42\n"
	    "# HELP kvindex_recoveries_total Listener recoveries by kind.\n"
	    "# TYPE kvindex_recoveries_total counter\n"
	    "kvindex_recoveries_total{kind=\"events\"} 3\n"
	    "kvindex_recoveries_total{kind=\"treedump\"} 1\n"
	    "kvindex_recoveries_total{kind=\"failed\"} 0\n"
	    "# HELP kvindex_entries Entries in the index.\n"
	    "# TYPE kvindex_entries gauge\n"
	    "kvindex_entries -7\n"
	    "# HELP kvindex_fill_ratio A \\\\ backslash\\nand \"quotes\".\n"
	    "# TYPE kvindex_fill_ratio gauge\n"
	    "kvindex_fill_ratio 0.1\n"
	    "# HELP kvindex_query_seconds Query latency.\n"
	    "# TYPE kvindex_query_seconds histogram\n"
	    "kvindex_query_seconds_bucket{le=\"0.25\"} 2\n"
	    "kvindex_query_seconds_bucket{le=\"0.5\"} 2\n"
	    "kvindex_query_seconds_bucket{le=\"1\"} 3\n"
	    "kvindex_query_seconds_bucket{le=\"2.5\"} 4\n"
	    "kvindex_query_seconds_bucket{le=\"+Inf\"} 5\n"
	    "kvindex_query_seconds_sum 7.125\n"
	    "kvindex_query_seconds_count 5\n"
	    "# HELP kvindex_commit_seconds Commit latency.\n"
	    "# TYPE kvindex_commit_seconds histogram\n"
	    "kvindex_commit_seconds_bucket{shard=\"a\",le=\"0.25\"} 0\n"
	    "kvindex_commit_seconds_bucket{shard=\"a\",le=\"0.5\"} 0\n"
	    "kvindex_commit_seconds_bucket{shard=\"a\",le=\"+Inf\"} 0\n"
	    "kvindex_commit_seconds_sum{shard=\"a\"} 0\n"
	    "kvindex_commit_seconds_count{shard=\"a\"} 0\n"
	    "kvindex_commit_seconds_bucket{shard=\"b\",le=\"0.25\"} 0\n"
	    "kvindex_commit_seconds_bucket{shard=\"b\",le=\"0.5\"} 1\n"
	    "kvindex_commit_seconds_bucket{shard=\"b\",le=\"+Inf\"} 1\n"
	    "kvindex_commit_seconds_sum{shard=\"b\"} 0.5\n"
	    "kvindex_commit_seconds_count{shard=\"b\"} 1\n"
	    "# HELP kvindex_listeners Listeners by state.\n"
	    "# TYPE kvindex_listeners gauge\n"
	    "kvindex_listeners{state=\"active\"} 3\n"
	    "kvindex_listeners{state=\"we\\\"ird\\\\\\n\"} 1\n"
	    "# HELP kvindex_lmdb_bytes LMDB file size.\n"
	    "# TYPE kvindex_lmdb_bytes gauge\n"
	    "kvindex_lmdb_bytes 1.5e+09\n";

	size_t len;
	char *text = kvi_metrics_render(m, &len);
	assert_string_equal(text, expect);
	assert_int_equal(len, strlen(expect));
	assert_int_equal(calls, 1);
	kvi_free(text);

	/* a second render sees new values and calls the collector again */
	kvi_counter_inc(applied);
	text = kvi_metrics_render(m, &len);
	assert_non_null(strstr(text, "\nkvindex_events_applied_total 43\n"));
	assert_int_equal(calls, 2);
	kvi_free(text);
	kvi_metrics_free(m);
}

static void
test_values_format(void **state)
{
	(void)state;
	kvi_metrics *m = kvi_metrics_alloc();
	kvi_gauge *g[4];
	static const char *const v[] = {"small", "inf", "nan", "big"};
	assert_int_equal(kvi_metrics_gauge_vec_add(m, "g", "", KVI_GAUGE_DOUBLE,
						   "v", v, 4, g),
			 KVI_OK);
	kvi_gauge_set_double(g[0], 1e-6);
	kvi_gauge_set_double(g[1], -1.0 / 0.0);
	kvi_gauge_set_double(g[2], 0.0 / 0.0);
	kvi_gauge_set(g[3], INT64_C(1) << 53);
	size_t len;
	char *text = kvi_metrics_render(m, &len);
	assert_string_equal(text, "# HELP g \n"
				  "# TYPE g gauge\n"
				  "g{v=\"small\"} 1e-06\n"
				  "g{v=\"inf\"} -Inf\n"
				  "g{v=\"nan\"} NaN\n"
				  "g{v=\"big\"} 9007199254740992\n");
	kvi_free(text);

	/* mixed-kind operations convert as documented */
	kvi_gauge *n;
	assert_int_equal(kvi_metrics_gauge_add(m, "n", "", KVI_GAUGE_INT, &n),
			 KVI_OK);
	kvi_gauge_set_double(n, 2.6);
	assert_int_equal(kvi_gauge_get(n), 3);
	kvi_gauge_add_double(n, -4.4);
	assert_int_equal(kvi_gauge_get(n), -1);
	kvi_gauge_add(g[0], 2);
	double d = kvi_gauge_get_double(g[0]);
	assert_true(d > 2.0000009 && d < 2.0000011);
	kvi_metrics_free(m);
}

static void
test_buckets_cumulative(void **state)
{
	(void)state;
	kvi_metrics *m = kvi_metrics_alloc();
	static const double bounds[] = {0.001, 0.005, 0.01, 0.05, 0.1, 1};
	kvi_histogram *h;
	assert_int_equal(
	    kvi_metrics_histogram_add(m, "h_seconds", "h", bounds, 6, &h),
	    KVI_OK);
	double obs[200];
	uint32_t x = 12345;
	for (size_t i = 0; i < 200; i++) {
		x = x * 1103515245u + 12345u;
		obs[i] = (double)(x >> 8) / (double)(1u << 24) * 1.5;
		kvi_histogram_observe(h, obs[i]);
	}
	kvi_histogram_observe(h, 0.0 / 0.0); /* ignored */
	kvi_histogram_snap s;
	kvi_histogram_snapshot(h, &s);
	assert_int_equal(s.n_bounds, 6);
	assert_int_equal(s.count, 200);
	assert_int_equal(s.buckets[6], 200);
	double sum = 0;
	for (size_t b = 0; b < 6; b++) {
		uint64_t want = 0;
		for (size_t i = 0; i < 200; i++) {
			want += obs[i] <= bounds[b];
		}
		assert_int_equal(s.buckets[b], want);
		if (b > 0) {
			assert_true(s.buckets[b] >= s.buckets[b - 1]);
		}
	}
	for (size_t i = 0; i < 200; i++) {
		sum += obs[i];
	}
	assert_true(s.sum > sum - 1e-9 && s.sum < sum + 1e-9);
	/* a value on a bound falls in that bound's bucket */
	kvi_histogram_observe(h, 0.005);
	kvi_histogram_snap t;
	kvi_histogram_snapshot(h, &t);
	assert_int_equal(t.buckets[0], s.buckets[0]);
	assert_int_equal(t.buckets[1], s.buckets[1] + 1);
	kvi_metrics_free(m);
}

static void
test_label_escaping(void **state)
{
	(void)state;
	kvi_metrics *m = kvi_metrics_alloc();
	static const char *const v[] = {"a\"b\\c\nd", "plain"};
	kvi_counter *c[2];
	assert_int_equal(
	    kvi_metrics_counter_vec_add(m, "c_total", "x", "pod", v, 2, c),
	    KVI_OK);
	kvi_counter_inc(c[0]);
	size_t len;
	char *text = kvi_metrics_render(m, &len);
	assert_non_null(strstr(text, "c_total{pod=\"a\\\"b\\\\c\\nd\"} 1\n"));
	assert_non_null(strstr(text, "c_total{pod=\"plain\"} 0\n"));
	kvi_free(text);
	kvi_metrics_free(m);
}

static void
test_registration_errors(void **state)
{
	(void)state;
	kvi_metrics *m = kvi_metrics_alloc();
	kvi_counter *c = NULL, *cs[2] = {NULL, NULL};
	kvi_histogram *h = NULL;
	static const double good[] = {1, 2};
	static const double unsorted[] = {2, 1};
	static const char *const dup[] = {"x", "x"};
	static const char *const two[] = {"x", "y"};

	assert_int_equal(kvi_metrics_counter_add(m, "ok_total", "", &c),
			 KVI_OK);
	kvi_counter *again = NULL;
	assert_int_equal(kvi_metrics_counter_add(m, "ok_total", "", &again),
			 KVI_EEXIST);
	assert_null(again); /* out written only on success */
	assert_int_equal(kvi_metrics_counter_add(m, "1bad", "", &again),
			 KVI_EINVAL);
	assert_int_equal(kvi_metrics_counter_add(m, "bad-name", "", &again),
			 KVI_EINVAL);
	assert_int_equal(kvi_metrics_counter_add(m, "", "", &again),
			 KVI_EINVAL);
	assert_int_equal(
	    kvi_metrics_counter_vec_add(m, "d_total", "", "k", dup, 2, cs),
	    KVI_EINVAL);
	assert_int_equal(
	    kvi_metrics_counter_vec_add(m, "d_total", "", "__k", two, 2, cs),
	    KVI_EINVAL);
	assert_int_equal(
	    kvi_metrics_counter_vec_add(m, "d_total", "", "a:b", two, 2, cs),
	    KVI_EINVAL);
	assert_int_equal(
	    kvi_metrics_counter_vec_add(m, "d_total", "", "k", two, 0, cs),
	    KVI_EINVAL);
	assert_null(cs[0]);
	assert_int_equal(kvi_metrics_histogram_add(m, "h", "", unsorted, 2, &h),
			 KVI_EINVAL);
	double inf_bound[] = {1, 1.0 / 0.0};
	assert_int_equal(
	    kvi_metrics_histogram_add(m, "h", "", inf_bound, 2, &h),
	    KVI_EINVAL);
	double many[KVI_HISTOGRAM_MAX_BOUNDS + 1];
	for (size_t i = 0; i <= KVI_HISTOGRAM_MAX_BOUNDS; i++) {
		many[i] = (double)i;
	}
	assert_int_equal(kvi_metrics_histogram_add(m, "h", "", many,
						   KVI_HISTOGRAM_MAX_BOUNDS + 1,
						   &h),
			 KVI_EINVAL);
	assert_int_equal(kvi_metrics_histogram_add(
			     m, "hmax", "", many, KVI_HISTOGRAM_MAX_BOUNDS, &h),
			 KVI_OK);
	h = NULL;
	kvi_histogram *hs[2];
	assert_int_equal(kvi_metrics_histogram_vec_add(m, "h", "", good, 2,
						       "le", two, 2, hs),
			 KVI_EINVAL);
	assert_null(h);
	assert_int_equal(kvi_metrics_histogram_add(m, "h", "", good, 2, &h),
			 KVI_OK);
	assert_int_equal(
	    kvi_metrics_counter_vec_add(m, "d_total", "", "k", two, 2, cs),
	    KVI_OK);
	assert_true(cs[0] != cs[1]);
	kvi_metrics_free(m);
}

#define THREADS 4
#define ROUNDS  200000

typedef struct hammer {
	kvi_counter *c;
	kvi_counter *labelled;
	kvi_gauge *g;
	kvi_gauge *gd;
	kvi_histogram *h;
	kvi_metrics *m;
} hammer;

static void *
hammer_main(void *arg)
{
	hammer *hm = arg;
	for (int i = 0; i < ROUNDS; i++) {
		kvi_counter_inc(hm->c);
		kvi_counter_add(hm->labelled, 2);
		kvi_gauge_add(hm->g, (i & 1) ? -1 : 3);
		kvi_gauge_add_double(hm->gd, 0.5);
		kvi_histogram_observe(hm->h, (double)(i % 4));
		if (i % 50000 == 0) {
			size_t len;
			kvi_free(kvi_metrics_render(hm->m, &len));
		}
	}
	return NULL;
}

static void
test_concurrent_updates(void **state)
{
	(void)state;
	kvi_metrics *m = kvi_metrics_alloc();
	static const double bounds[] = {0.5, 1.5, 2.5};
	hammer hm = {.m = m};
	kvi_counter *lab[3];
	assert_int_equal(kvi_metrics_counter_add(m, "c_total", "", &hm.c),
			 KVI_OK);
	assert_int_equal(kvi_metrics_counter_vec_add(m, "l_total", "", "kind",
						     kinds, 3, lab),
			 KVI_OK);
	hm.labelled = lab[1];
	assert_int_equal(
	    kvi_metrics_gauge_add(m, "g", "", KVI_GAUGE_INT, &hm.g), KVI_OK);
	assert_int_equal(
	    kvi_metrics_gauge_add(m, "gd", "", KVI_GAUGE_DOUBLE, &hm.gd),
	    KVI_OK);
	assert_int_equal(
	    kvi_metrics_histogram_add(m, "h", "", bounds, 3, &hm.h), KVI_OK);

	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &hm),
				 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
	}
	uint64_t n = (uint64_t)THREADS * ROUNDS;
	assert_int_equal(kvi_counter_get(hm.c), n);
	assert_int_equal(kvi_counter_get(lab[1]), 2 * n);
	assert_int_equal(kvi_counter_get(lab[0]), 0);
	assert_int_equal(kvi_gauge_get(hm.g), (int64_t)n); /* +3 -1 per 2 */
	assert_true(kvi_gauge_get_double(hm.gd) == 0.5 * (double)n);
	kvi_histogram_snap s;
	kvi_histogram_snapshot(hm.h, &s);
	assert_int_equal(s.count, n);
	/* values 0,1,2,3 in turn: a quarter per bucket */
	assert_int_equal(s.buckets[0], n / 4);
	assert_int_equal(s.buckets[1], n / 2);
	assert_int_equal(s.buckets[2], 3 * n / 4);
	assert_true(s.sum == 1.5 * (double)n);
	kvi_metrics_free(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_render_exact),
	    cmocka_unit_test(test_values_format),
	    cmocka_unit_test(test_buckets_cumulative),
	    cmocka_unit_test(test_label_escaping),
	    cmocka_unit_test(test_registration_errors),
	    cmocka_unit_test(test_concurrent_updates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
