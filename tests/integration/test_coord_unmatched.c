/*
 * test_coord_unmatched.c - the silent fallback, named: a model whose
 * listeners hold blocks while none of its queries matches one (routers
 * hashing prompts otherwise than the engines: another hash seed, block
 * size or tokenizer) is reported - once in the log, in /metrics and on
 * its instances in /workers - and no longer once a query matches again.
 *
 * Two DP=2 pods from the simulator, a prompt prefilled on each rank, two
 * shards, a coordinator with a 1 s window. Queries of prompts no engine
 * ever saw (a tokenizer that disagrees) match nothing; before the window
 * and before 20 of them nothing is said; after both it is; a query of a
 * prefilled prompt clears it.
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
#include "coord_check.h"

#define NTOK 64

#define UNMATCHED "kvindex_coord_models_unmatched"

static void
query_unknown(cluster *c, uint32_t seed)
{
	uint32_t t[NTOK];
	clu_tokens_seeded(t, NTOK, seed);
	json_t *ans = clu_query(c, t, NTOK, NULL);
	assert_int_equal(json_array_size(json_object_get(ans, "workers")), 0);
	json_decref(ans);
}

/* marked_on says what /workers gives as sim/pod-0's model_unmatched. */
static json_t *
marked_on(cluster *c)
{
	long st;
	json_t *ws = clu_get(c, "/workers", &st);
	assert_int_equal(st, 200);
	json_t *out = NULL;
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		const char *name =
		    json_string_value(json_object_get(w, "name"));
		if (name != NULL && strcmp(name, "sim/pod-0") == 0) {
			out =
			    json_incref(json_object_get(w, "model_unmatched"));
		}
	}
	json_decref(ws);
	assert_non_null(out);
	return out;
}

static int
log_count(cluster *c, const char *what)
{
	char *log = kvt_file_read(c->log_path, NULL);
	assert_non_null(log);
	int n = 0;
	for (const char *at = log; (at = strstr(at, what)) != NULL; at++) {
		n++;
	}
	kvi_free(log);
	return n;
}

static bool
marked(void *arg)
{
	return clu_metric(arg, UNMATCHED) == 1;
}

static void
test_unmatched_model_reported(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "2", "--dp", "2", "--paused", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	const char *extra[] = {"--unmatched-window-ms", "1000", NULL};
	clu_coord(c, true, extra);
	clu_wait_active(c, 4, CLU_WAIT_MS);
	uint32_t t[NTOK];
	for (int i = 0; i < 4; i++) {
		clu_tokens_seeded(t, NTOK, 100 + (uint32_t)i);
		clu_prefill(c, i / 2, i % 2, t, NTOK);
	}
	/* the listeners hold the prompts: a query of one matches */
	clu_tokens_seeded(t, NTOK, 100);
	int64_t until = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ans = clu_query(c, t, NTOK, NULL);
		size_t n = json_array_size(json_object_get(ans, "workers"));
		json_decref(ans);
		if (n > 0) {
			break;
		}
		assert_true(kvt_now_ms() < until);
		kvt_sleep_ms(50);
	}

	/* fewer than 20 queries that match nothing: not reported, however
	 * long */
	for (uint32_t k = 0; k < 10; k++) {
		query_unknown(c, 1000 + k);
	}
	kvt_sleep_ms(1500);
	assert_int_equal(clu_metric(c, UNMATCHED), 0);
	json_t *m = marked_on(c);
	assert_true(json_is_null(m));
	json_decref(m);

	/* 20 and more, over the window: reported, once */
	for (uint32_t k = 10; k < 30; k++) {
		query_unknown(c, 1000 + k);
	}
	assert_true(kvt_wait_until(marked, c, CLU_WAIT_MS));
	m = marked_on(c);
	assert_true(json_is_object(m));
	assert_true(json_integer_value(json_object_get(m, "queries")) >= 30);
	assert_true(json_integer_value(json_object_get(m, "blocks")) > 0);
	assert_true(json_integer_value(json_object_get(m, "seconds")) >= 1);
	json_decref(m);
	kvt_sleep_ms(500); /* a few more checks: still said only once */
	assert_int_equal(log_count(c, "event=model_unmatched"), 1);

	/* a query that matches clears it */
	clu_tokens_seeded(t, NTOK, 101);
	json_t *ans = clu_query(c, t, NTOK, NULL);
	assert_true(json_array_size(json_object_get(ans, "workers")) > 0);
	json_decref(ans);
	until = kvt_now_ms() + CLU_WAIT_MS;
	while (clu_metric(c, UNMATCHED) != 0) {
		assert_true(kvt_now_ms() < until);
		kvt_sleep_ms(50);
	}
	m = marked_on(c);
	assert_true(json_is_null(m));
	json_decref(m);
	assert_int_equal(log_count(c, "event=model_matched"), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_unmatched_model_reported,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
