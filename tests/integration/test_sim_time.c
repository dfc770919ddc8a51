/*
 * test_sim_time.c - the engine simulator's timed mode, driven as a real
 * process (1 pod x DP=2, --prefill-rate 4000 tokens/s, --prefill-chunk
 * 512, --metrics-port 0).
 *
 * Two /prefill with a shared prefix go to the same rank concurrently: the
 * second waits for the first (its reply comes after the first's, no
 * earlier than both prefills' time from the first's post) and hits the
 * prefix the first stored. The first's chunks arrive on the PUB socket as
 * one batch per chunk, in order, each a BlockStored chained on the
 * previous; /truth follows. "wait": false answers 202 with the queue
 * position and /status shows the queue. /metrics has vLLM's prefix cache
 * counters, counted as vLLM counts (the num_tokens - 1 cap included), and
 * a restart of a rank resets its counters only. Time is asserted only as
 * lower bounds.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

#include "alloc.h"
#include "sim_check.h"

#define BS     SIMC_BS
#define RATE   4000 /* tokens/s */
#define CHUNK  512  /* tokens: 32 blocks */
#define P1_BLK 100  /* 1600 tokens: 400 ms, chunks of 32, 32, 32, 4 */
#define SHARED 64   /* blocks P2 shares with P1 */
#define P2_BLK 80   /* 1280 tokens, 1024 hit: 64 ms */
#define P3_BLK 125  /* 2000 tokens: 500 ms */

static simproc A;
static uint32_t p1[P1_BLK * BS];
static uint32_t p2[P2_BLK * BS];
static uint32_t p3[P3_BLK * BS];

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static json_t *
prefill_body(int pod, int rank, const uint32_t *tok, size_t n, int wait)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_integer(tok[i]));
	}
	json_t *b = json_pack("{s:i,s:i,s:o}", "pod", pod, "rank", rank,
			      "token_ids", arr);
	if (wait >= 0) {
		json_object_set_new(b, "wait", json_boolean(wait));
	}
	return b;
}

/* A /prefill posted from its own thread. */
typedef struct poster {
	json_t *body;
	long status;
	json_t *reply;
	double done_ms;
} poster;

static void *
post_main(void *arg)
{
	poster *p = arg;
	kvt_http_resp r;
	if (kvt_sim_call(&A.sim, "POST", "/prefill", p->body, &r) == KVI_OK) {
		p->status = r.status;
		p->reply = json_incref(r.json);
	}
	p->done_ms = now_ms();
	kvt_http_resp_fini(&r);
	return NULL;
}

static json_t *
rank_status(int idx)
{
	json_t *st = simc_http(&A, "GET", "/status", NULL, 200);
	json_t *r = json_incref(
	    json_array_get(json_object_get(st, "ranks"), (size_t)idx));
	json_decref(st);
	return r;
}

static double
num(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	assert_true(json_is_number(v));
	return json_number_value(v);
}

/* wait_idle waits up to 10 s for rank idx to have nothing queued. */
static void
wait_idle(int idx)
{
	for (int i = 0; i < 1000; i++) {
		json_t *r = rank_status(idx);
		bool idle = simc_int(r, "queued") == 0 &&
			    json_is_false(json_object_get(r, "prefilling"));
		json_decref(r);
		if (idle) {
			return;
		}
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	fail_msg("rank %d did not go idle", idx);
}

static double
metric(const char *name, int engine)
{
	char url[128], sample[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics",
		 kvt_sim_metrics_port(&A.sim, 0));
	snprintf(sample, sizeof(sample),
		 "%s{engine=\"%d\",model_name=\"sim-model\"}", name, engine);
	return kvt_http_metric(url, sample);
}

static int
group_setup(void **state)
{
	(void)state;
	simc_setup();
	simc_tokens(p1, P1_BLK * BS, 11);
	memcpy(p2, p1, SHARED * BS * sizeof(uint32_t));
	simc_tokens(p2 + SHARED * BS, (P2_BLK - SHARED) * BS, 12);
	simc_tokens(p3, P3_BLK * BS, 13);
	const char *extra[] = {
	    "--paused", "--prefill-rate", "4000", "--prefill-chunk",
	    "512",      "--metrics-port", "0",    NULL};
	simc_start(&A, 1, 2, extra);
	simc_connect(&A);
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	int st = simc_stop(&A);
	simc_teardown();
	return st == 0 ? 0 : -1;
}

static void
test_second_waits_for_first_and_hits_its_prefix(void **state)
{
	(void)state;
	assert_true(kvt_sim_metrics_port(&A.sim, 0) > 0);
	poster a = {.body = prefill_body(0, 1, p1, P1_BLK * BS, -1)};
	double t0 = now_ms();
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, post_main, &a), 0);

	/* Post the second while the first is prefilling with time left. */
	bool running = false;
	for (int i = 0; i < 200 && !running; i++) {
		json_t *r = rank_status(1);
		running = json_is_true(json_object_get(r, "prefilling")) &&
			  num(r, "busy_until_ms") > 150;
		json_decref(r);
		if (!running) {
			struct timespec ts = {0, 2000000};
			nanosleep(&ts, NULL);
		}
	}
	assert_true(running);
	json_t *b = simc_http(&A, "POST", "/prefill",
			      prefill_body(0, 1, p2, P2_BLK * BS, 1), 200);
	double t2 = now_ms();
	pthread_join(th, NULL);
	json_decref(a.body);
	assert_int_equal(a.status, 200);

	/* The first ran at once, at the rate, in four chunks. */
	assert_int_equal(simc_int(a.reply, "prompt_tokens"), P1_BLK * BS);
	assert_int_equal(simc_int(a.reply, "hit_tokens"), 0);
	assert_int_equal(simc_int(a.reply, "stored_blocks"), P1_BLK);
	assert_int_equal(simc_int(a.reply, "batches"), 4);
	assert_int_equal(simc_int(a.reply, "seq"), 3);
	assert_true(num(a.reply, "queue_ms") == 0);
	assert_true(num(a.reply, "prefill_ms") > 399.9 &&
		    num(a.reply, "prefill_ms") < 400.1);
	assert_true(a.done_ms - t0 >= 400);

	/* The second waited for it, then hit its prefix. */
	assert_int_equal(simc_int(b, "hit_blocks"), SHARED);
	assert_int_equal(simc_int(b, "hit_tokens"), SHARED * BS);
	assert_int_equal(simc_int(b, "stored_blocks"), P2_BLK - SHARED);
	assert_int_equal(simc_int(b, "seq"), 4);
	assert_true(num(b, "queue_ms") > 0);
	assert_true(num(b, "prefill_ms") > 63.9 && num(b, "prefill_ms") < 64.1);
	assert_true(t2 >= a.done_ms);
	assert_true(t2 - t0 >= 400 + 64);
	assert_int_equal(json_array_size(json_object_get(b, "local_hashes")),
			 P2_BLK);
	json_decref(a.reply);
	json_decref(b);
}

static void
test_chunk_batches_in_order(void **state)
{
	(void)state;
	uint32_t sizes[] = {32, 32, 32, 4, P2_BLK - SHARED};
	uint64_t hashes[P1_BLK];
	uint32_t have = 0;
	for (uint64_t k = 0; k < 5; k++) {
		kvt_frames f;
		assert_true(simc_recv_live(&A, 1, "", &f) == k);
		kvi_batch bt;
		const kvi_event *ev = simc_decode_one(&f, 1, &bt);
		assert_int_equal(ev->type, KVI_EVENT_STORED);
		assert_int_equal(ev->n_hashes, sizes[k]);
		if (k == 0) {
			assert_false(ev->has_parent);
		} else if (k < 4) {
			assert_true(ev->has_parent);
			assert_true(ev->parent == hashes[have - 1]);
		} else {
			/* P2's store hangs off the last shared block. */
			assert_true(ev->has_parent);
			assert_true(ev->parent == hashes[SHARED - 1]);
		}
		if (k < 4) {
			assert_memory_equal(ev->tokens, p1 + (size_t)have * BS,
					    sizes[k] * BS * sizeof(uint32_t));
			for (uint32_t i = 0; i < sizes[k]; i++) {
				hashes[have++] = ev->hashes[i];
			}
		} else {
			assert_memory_equal(ev->tokens, p2 + SHARED * BS,
					    sizes[k] * BS * sizeof(uint32_t));
		}
		kvt_frames_fini(&f);
	}
	simc_expect_quiet(A.sub[1].socket);
	simc_expect_quiet(A.sub[0].socket);
	json_t *t = simc_http(&A, "GET", "/truth?pod=0&rank=1", NULL, 200);
	assert_int_equal(simc_int(t, "seq"), 4);
	assert_int_equal(json_array_size(json_object_get(t, "blocks")),
			 P1_BLK + P2_BLK - SHARED);
	json_decref(t);
}

static void
test_no_wait_and_queue_status(void **state)
{
	(void)state;
	json_t *r = simc_http(&A, "POST", "/prefill",
			      prefill_body(0, 0, p3, P3_BLK * BS, 0), 202);
	assert_int_equal(simc_int(r, "queued"), 0);
	json_decref(r);
	r = simc_http(&A, "POST", "/prefill",
		      prefill_body(0, 0, p3, P3_BLK * BS, 0), 202);
	assert_int_equal(simc_int(r, "queued"), 1);
	json_decref(r);
	json_t *st = rank_status(0);
	assert_int_equal(simc_int(st, "queued"), 1);
	assert_true(json_is_true(json_object_get(st, "prefilling")));
	assert_true(num(st, "busy_until_ms") > 0);
	json_decref(st);
	json_decref(simc_http(&A, "POST", "/prefill",
			      json_pack("{s:i,s:i,s:[],s:i}", "pod", 0, "rank",
					0, "token_ids", "wait", 1),
			      400));
	wait_idle(0);
}

static void
test_metrics_count_as_vllm_and_reset_on_restart(void **state)
{
	(void)state;
	const char *q = "vllm:prefix_cache_queries_total";
	const char *h = "vllm:prefix_cache_hits_total";
	/* Rank 1: P1 and P2 in full, P2's shared prefix hit. */
	assert_true(metric(q, 1) == (P1_BLK + P2_BLK) * BS);
	assert_true(metric(h, 1) == SHARED * BS);
	/* Rank 0: P3 twice; the second is cached in full, so its hit stops
	 * at num_tokens - 1, one block short. */
	assert_true(metric(q, 0) == 2 * P3_BLK * BS);
	assert_true(metric(h, 0) == (P3_BLK - 1) * BS);
	assert_true(metric("vllm:num_requests_waiting", 0) == 0);
	assert_true(metric("vllm:num_requests_running", 0) == 0);

	simc_post(&A, "/fault/restart",
		  json_pack("{s:i,s:i}", "pod", 0, "rank", 1));
	assert_true(metric(q, 1) == 0);
	assert_true(metric(h, 1) == 0);
	assert_true(metric(q, 0) == 2 * P3_BLK * BS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_second_waits_for_first_and_hits_its_prefix),
	    cmocka_unit_test(test_chunk_batches_in_order),
	    cmocka_unit_test(test_no_wait_and_queue_status),
	    cmocka_unit_test(test_metrics_count_as_vllm_and_reset_on_restart),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
