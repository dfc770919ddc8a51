/*
 * test_ladder.c - the routing ladder's pure parts: reading an engine's
 * counters out of its Prometheus text (as vLLM writes it), and the rule
 * that turns them and the shard's predictions into ratios and gaps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ladder.h"
#include "prom.h"

/* What a vLLM engine process with DP 2 serves, trimmed; the sample order,
 * the _created gauges and the float values are prometheus_client's. */
static const char vllm_text[] =
    "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in "
    "terms of number of queried tokens.\n"
    "# TYPE vllm:prefix_cache_queries_total counter\n"
    "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} "
    "4096.0\n"
    "vllm:prefix_cache_queries_total{engine=\"1\",model_name=\"m\"} "
    "2.5e+04\n"
    "# HELP vllm:prefix_cache_queries_created Prefix cache queries\n"
    "# TYPE vllm:prefix_cache_queries_created gauge\n"
    "vllm:prefix_cache_queries_created{engine=\"0\",model_name=\"m\"} "
    "1.7e+09\n"
    "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 1024.0\n"
    "vllm:prefix_cache_hits_total{model_name=\"m\",engine=\"1\"} "
    "20000.0 1712000000000\n"
    "vllm:prefix_cache_hits_total{engine=\"x\",model_name=\"m\"} 5.0\n"
    "vllm:prefix_cache_hits_total{engine=\"7\",model_name=\"a \\\"q\\\" "
    "b\"} 3.0\n"
    "vllm:prefix_cache_hits_total{engine=\"2\" 9.0\n"
    "vllm:prefix_cache_hits_totalx{engine=\"3\"} 9.0\n"
    "vllm:prefix_cache_hits_total{engine=\"4\"} -1\n";

static void
test_prom(void **state)
{
	(void)state;
	uint64_t q[8] = {0}, h[8] = {0};
	bool sq[8] = {false}, sh[8] = {false};
	size_t len = strlen(vllm_text);
	assert_int_equal(
	    kvc_prom_by_engine(vllm_text, len, KVC_PROM_QUERIES, q, sq, 8), 2);
	assert_true(sq[0] && sq[1] && !sq[2]);
	assert_int_equal(q[0], 4096);
	assert_int_equal(q[1], 25000);
	/* engine "x", an unclosed label set, another name and a negative
	 * value are skipped; an escaped quote in a label value is read */
	assert_int_equal(
	    kvc_prom_by_engine(vllm_text, len, KVC_PROM_HITS, h, sh, 8), 3);
	assert_int_equal(h[0], 1024);
	assert_int_equal(h[1], 20000);
	assert_int_equal(h[7], 3);
	assert_false(sh[2] || sh[3] || sh[4]);
	/* ranks past max are not written */
	uint64_t one[1] = {0};
	bool s1[1] = {false};
	assert_int_equal(
	    kvc_prom_by_engine(vllm_text, len, KVC_PROM_HITS, one, s1, 1), 1);
	/* no final newline, and an empty text */
	const char *last = "vllm:prefix_cache_hits_total{engine=\"0\"} 12";
	memset(h, 0, sizeof(h));
	assert_int_equal(
	    kvc_prom_by_engine(last, strlen(last), KVC_PROM_HITS, h, sh, 8), 1);
	assert_int_equal(h[0], 12);
	assert_int_equal(kvc_prom_by_engine("", 0, KVC_PROM_HITS, h, sh, 8), 0);
}

static const kvc_ladder_config cfg = {
    .gap = 0.25, .min_tokens = 1000, .window_tokens = 100000};

static void
test_step_window_and_gaps(void **state)
{
	(void)state;
	kvc_lladder c = {0};
	kvc_lpending p = {
	    .known = true, .prompt_tokens = 500, .predicted_tokens = 100};
	/* the first sight starts the window: nothing measured yet */
	assert_int_equal(kvc_ladder_step(&c, 7000, 3000, &p, &cfg),
			 KVC_LADDER_SAME);
	assert_true(c.engine_known);
	assert_true(c.engine_ratio < 0 && c.predicted_ratio < 0);
	/* 800 tokens on each side: not enough */
	p.prompt_tokens += 800;
	p.predicted_tokens += 400;
	assert_int_equal(kvc_ladder_step(&c, 7800, 3400, &p, &cfg),
			 KVC_LADDER_SAME);
	assert_true(c.engine_ratio < 0);
	/* 2000 each: engine 0.5, predicted 0.5 - no gap */
	p.prompt_tokens += 1200;
	p.predicted_tokens += 600;
	assert_int_equal(kvc_ladder_step(&c, 9000, 4000, &p, &cfg),
			 KVC_LADDER_SAME);
	assert_float_equal(c.engine_ratio, 0.5, 1e-9);
	assert_float_equal(c.predicted_ratio, 0.5, 1e-9);
	assert_int_equal(c.gap, 0);
	/* then the engine hits everything, kvindex predicts nothing: over
	 * the window 6000 tokens, engine (1000 + 4000) / 6000, predicted
	 * 1000 / 6000 - blind */
	p.prompt_tokens += 4000;
	assert_int_equal(kvc_ladder_step(&c, 13000, 8000, &p, &cfg),
			 KVC_LADDER_GAP_BEGAN);
	assert_int_equal(c.gap, KVC_GAP_BLIND);
	/* an engine restart (its counters back to small) starts again and
	 * ends the gap */
	assert_int_equal(kvc_ladder_step(&c, 10, 0, &p, &cfg),
			 KVC_LADDER_GAP_ENDED);
	assert_int_equal(c.gap, 0);
	assert_true(c.engine_ratio < 0);
	/* kvindex predicts hits the engine does not take: phantom */
	p.prompt_tokens += 2000;
	p.predicted_tokens += 1800;
	assert_int_equal(kvc_ladder_step(&c, 2010, 100, &p, &cfg),
			 KVC_LADDER_GAP_BEGAN);
	assert_int_equal(c.gap, KVC_GAP_PHANTOM);
	/* a gap within the threshold is none */
	kvc_lladder d = {0};
	kvc_lpending q = {.known = true};
	kvc_ladder_step(&d, 0, 0, &q, &cfg);
	q.prompt_tokens = 10000;
	q.predicted_tokens = 5000;
	kvc_ladder_step(&d, 10000, 7400, &q, &cfg);
	assert_float_equal(d.engine_ratio, 0.74, 1e-9);
	assert_int_equal(d.gap, 0);
}

static void
test_step_window_restarts(void **state)
{
	(void)state;
	kvc_lladder c = {0};
	kvc_lpending p = {.known = true};
	kvc_ladder_step(&c, 0, 0, &p, &cfg);
	p.prompt_tokens = 100000;
	p.predicted_tokens = 0;
	assert_int_equal(kvc_ladder_step(&c, 100000, 90000, &p, &cfg),
			 KVC_LADDER_GAP_BEGAN);
	/* the window was full: it starts again where it ended, so a fix
	 * shows within one window, not diluted by all that came before */
	assert_int_equal(c.queries0, 100000);
	p.prompt_tokens += 2000;
	p.predicted_tokens += 1800;
	assert_int_equal(kvc_ladder_step(&c, 102000, 91800, &p, &cfg),
			 KVC_LADDER_GAP_ENDED);
	assert_float_equal(c.engine_ratio, 0.9, 1e-9);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prom),
	    cmocka_unit_test(test_step_window_and_gaps),
	    cmocka_unit_test(test_step_window_restarts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
