/*
 * test_coord_ladder.c - the routing ladder in production, end to end: the
 * engine simulator serving vLLM's prefix cache counters per rank on a
 * metrics port, two real shards and a real coordinator that scrapes them.
 *
 *  - A blind rank, the seed's failure: pod 0 is registered with DP 1 while
 *    its engine has two ranks, and requests run on rank 1, which no
 *    listener hears. The ladder names the rank (/workers "unheard_ranks")
 *    and counts it.
 *  - A phantom: a router reports routing a prompt the listener holds to
 *    pod 1 rank 0 (kvindex predicts nearly all of it as hits), but the
 *    engine runs other prompts there and hits nothing.
 *  - A blind listener: pod 1 rank 1 is reported routed fresh prompts
 *    (kvindex predicts nothing) while its engine reuses one prompt again
 *    and again.
 * Each gap shows on /workers beside both hit ratios, is counted in
 * kvindex_coord_prediction_gaps_total and logged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_check.h"
#include "kvitest.h"

#define NB  64
#define NTK (NB * 16)

/* reg registers the simulator's pod p with dp_size dp and its metrics
 * port. */
static void
reg(cluster *c, int p, int dp)
{
	int i = p * c->sim.dp;
	char body[512];
	snprintf(
	    body, sizeof(body),
	    "{\"name\":\"sim/pod-%d\",\"ip\":\"127.0.0.1\",\"zmq_port\":%d,"
	    "\"recover_port\":%d,\"replay_port\":%d,\"dp_size\":%d,"
	    "\"model_name\":\"sim-model\",\"block_size\":16,"
	    "\"metrics_port\":%d}",
	    p, c->sim.zmq_port[i], c->sim.recover_port[i],
	    c->sim.replay_port[i], dp, kvt_sim_metrics_port(&c->sim, p));
	long st;
	json_t *a = clu_post(c, "/register", body, &st);
	json_decref(a);
	assert_true(st == 200 || st == 201);
}

static void
routed(cluster *c, const uint32_t *t, int p, int rank)
{
	char *toks = clu_tokens_text(t, NTK);
	size_t cap = strlen(toks) + 200;
	char *body = malloc(cap);
	snprintf(body, cap,
		 "{\"model_name\":\"sim-model\",\"token_ids\":%s,"
		 "\"pod\":\"sim/pod-%d\",\"dp_rank\":%d,\"ttl_ms\":1}",
		 toks, p, rank);
	long st;
	json_decref(clu_post(c, "/routed", body, &st));
	assert_int_equal(st, 202);
	free(body);
	free(toks);
}

/* ladder_of returns the "ladder" of (pod, rank) in /workers as text
 * into buf, and its gap ("" when none or no ladder yet). */
static const char *
gap_of(cluster *c, int p, int rank, char *buf, size_t len)
{
	char pod[32];
	snprintf(pod, sizeof(pod), "sim/pod-%d", p);
	json_t *all = NULL;
	json_t *l = clu_listener(c, pod, rank, &all);
	json_t *ld = json_object_get(l, "ladder");
	char *text = ld != NULL ? json_dumps(ld, JSON_COMPACT) : NULL;
	snprintf(buf, len, "%s", text != NULL ? text : "");
	free(text);
	const char *g = json_string_value(json_object_get(ld, "gap"));
	static char gap[16];
	snprintf(gap, sizeof(gap), "%s", g != NULL ? g : "");
	json_decref(all);
	return gap;
}

static bool
unheard_is(cluster *c, int p, int rank)
{
	long st;
	json_t *ws = clu_get(c, "/workers", &st);
	char pod[32];
	snprintf(pod, sizeof(pod), "sim/pod-%d", p);
	bool yes = false;
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		const char *n = json_string_value(json_object_get(w, "name"));
		json_t *u = json_object_get(w, "unheard_ranks");
		if (n != NULL && strcmp(n, pod) == 0 &&
		    json_array_size(u) == 1 &&
		    json_integer_value(json_array_get(u, 0)) == rank) {
			yes = true;
		}
	}
	json_decref(ws);
	return yes;
}

static void
test_ladder_blind_rank_and_phantom(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods",         "2", "--dp", "2", "--paused",
			     "--metrics-port", "0", NULL};
	clu_sim(c, sim);
	assert_true(kvt_sim_metrics_port(&c->sim, 0) > 0);
	clu_shards(c, 2);
	const char *coord[] = {"--ladder-interval-ms", "200",
			       "--ladder-min-tokens", "2000", NULL};
	clu_coord(c, false, coord);
	reg(c, 0, 1); /* the engine has two ranks: rank 1 is unheard */
	reg(c, 1, 2);
	clu_wait_active(c, 3, CLU_WAIT_MS);

	/* the blind rank: pod 0's engine serves on rank 1 */
	uint32_t t[NTK];
	clu_tokens_seeded(t, NTK, 1);
	for (int k = 0; k < 3; k++) {
		clu_prefill(c, 0, 1, t, NTK);
	}
	/* the phantom: pod 1 rank 0 holds A; a router reports A there four
	 * times, while the engine runs fresh prompts */
	uint32_t a[NTK];
	clu_tokens_seeded(a, NTK, 2);
	clu_prefill(c, 1, 0, a, NTK);
	int64_t until = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ans = clu_query(c, a, NTK, "\"pending\": false");
		json_t *best = json_object_get(ans, "best");
		bool held = json_integer_value(
				json_object_get(best, "matched_tokens")) == NTK;
		json_decref(ans);
		if (held) {
			break;
		}
		assert_true(kvt_now_ms() < until);
		kvt_sleep_ms(20);
	}
	/* the blind listener: pod 1 rank 1 reused B, reported fresh */
	uint32_t b[NTK];
	clu_tokens_seeded(b, NTK, 3);
	for (uint32_t k = 0; k < 4; k++) {
		uint32_t q[NTK];
		routed(c, a, 1, 0);
		clu_tokens_seeded(q, NTK, 100 + k);
		clu_prefill(c, 1, 0, q, NTK);
		clu_tokens_seeded(q, NTK, 200 + k);
		routed(c, q, 1, 1);
		clu_prefill(c, 1, 1, b, NTK);
	}

	char l0[512] = "", l1[512] = "";
	const char *g0 = "", *g1 = "";
	bool unheard = false;
	until = kvt_now_ms() + CLU_WAIT_MS;
	while (kvt_now_ms() < until) {
		unheard = unheard_is(c, 0, 1);
		g0 = gap_of(c, 1, 0, l0, sizeof(l0));
		bool phantom = strcmp(g0, "phantom") == 0;
		g1 = gap_of(c, 1, 1, l1, sizeof(l1));
		if (unheard && phantom && strcmp(g1, "blind") == 0) {
			break;
		}
		kvt_sleep_ms(100);
	}
	print_message("pod-1 rank 0: %s\npod-1 rank 1: %s\n", l0, l1);
	assert_true(unheard);
	assert_string_equal(gap_of(c, 1, 0, l0, sizeof(l0)), "phantom");
	assert_string_equal(gap_of(c, 1, 1, l1, sizeof(l1)), "blind");
	assert_true(clu_metric(c, "kvindex_coord_prediction_gaps_total{kind="
				  "\"unheard_rank\"}") >= 1);
	assert_true(clu_metric(c, "kvindex_coord_prediction_gaps_total{kind="
				  "\"phantom\"}") >= 1);
	assert_true(clu_metric(c, "kvindex_coord_prediction_gaps_total{kind="
				  "\"blind\"}") >= 1);
	assert_true(clu_metric(c, "kvindex_coord_ladder_scrapes_total{result="
				  "\"ok\"}") >= 1);
	/* pod 0 rank 0 served nothing: no gap, whatever its ratios */
	char lz[512];
	assert_string_equal(gap_of(c, 0, 0, lz, sizeof(lz)), "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ladder_blind_rank_and_phantom,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
