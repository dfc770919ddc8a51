/*
 * test_sim_load.c - the engine simulator's older wire shapes, under load.
 *
 * A simulator with legacy events, bin hashes, no rank, a topic, replies
 * without the topic frame and a CPU tier serves part of a Mooncake trace at
 * full speed. A SUB decodes every batch into a small indexer model, which
 * must never see an orphan parent nor a removal of a block it does not
 * hold, and must end up equal to /truth, tiers included. Replay then
 * returns every batch without the topic frame, and POST /quit exits
 * cleanly. A second simulator runs a thousand ranks in one process.
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
#include <zmq.h>

#include "alloc.h"
#include "frame.h"
#include "hash.h"
#include "sim_check.h"

/* A minimal indexer: external hash -> tiers, from decoded events. */
typedef struct index_model {
	uint64_t *hash;
	unsigned *tiers;
	size_t n;
	size_t cap;
} index_model;

static size_t
index_find(const index_model *m, uint64_t h)
{
	for (size_t i = 0; i < m->n; i++) {
		if (m->hash[i] == h) {
			return i;
		}
	}
	return SIZE_MAX;
}

static void
index_apply(index_model *m, const kvi_batch *b)
{
	for (uint32_t e = 0; e < b->n_events; e++) {
		const kvi_event *ev = &b->events[e];
		unsigned bit = 1u << ev->tier;
		if (ev->type == KVI_EVENT_CLEARED) {
			m->n = 0;
			continue;
		}
		if (ev->type == KVI_EVENT_STORED && ev->has_parent) {
			size_t p = index_find(m, ev->parent);
			assert_true(p != SIZE_MAX && m->tiers[p] != 0);
		}
		for (uint32_t j = 0; j < ev->n_hashes; j++) {
			size_t i = index_find(m, ev->hashes[j]);
			if (ev->type == KVI_EVENT_REMOVED) {
				assert_true(i != SIZE_MAX &&
					    (m->tiers[i] & bit));
				m->tiers[i] &= ~bit;
				continue;
			}
			if (i == SIZE_MAX) {
				if (m->n == m->cap) {
					m->cap = m->cap ? 2 * m->cap : 1024;
					m->hash = kvi_reallocarray(
					    m->hash, m->cap, sizeof(uint64_t));
					m->tiers = kvi_reallocarray(
					    m->tiers, m->cap, sizeof(unsigned));
				}
				i = m->n++;
				m->hash[i] = ev->hashes[j];
				m->tiers[i] = 0;
			}
			m->tiers[i] |= bit;
		}
	}
}

static void
test_legacy_shapes_under_load(void **state)
{
	(void)state;
	simproc B;
	char trace[512];
	snprintf(trace, sizeof(trace),
		 "%s/traces/mooncake_arxiv_trace_1000.jsonl", KVI_DATA_DIR);
	const char *extra[] = {"--paused",
			       "--form",
			       "legacy",
			       "--hash-format",
			       "bin",
			       "--no-rank",
			       "--topic",
			       "kv",
			       "--replay-topic",
			       "no",
			       "--cache-blocks",
			       "48",
			       "--cpu-blocks",
			       "96",
			       "--trace",
			       trace,
			       "--requests",
			       "80",
			       "--requests-per-batch",
			       "2",
			       "--rate",
			       "0",
			       NULL};
	simc_start(&B, 1, 1, extra);
	simc_connect(&B);
	json_decref(simc_http(&B, "POST", "/resume", json_object(), 200));

	index_model m = {0};
	uint64_t next = 0;
	bool saw_cpu = false, saw_removed = false;
	for (;;) {
		kvt_frames f;
		kvi_err rv = kvt_zmq_recv(B.sub[0].socket, 500, &f);
		if (rv == KVI_ETIMEDOUT) {
			break;
		}
		assert_int_equal(rv, KVI_OK);
		assert_int_equal(f.n, 3);
		assert_int_equal(f.len[0], 2);
		assert_memory_equal(f.data[0], "kv", 2);
		assert_true(kvi_seq_get(f.data[1]) == next);
		next++;
		kvi_batch b;
		if (kvi_decoder_decode(simc_decoder(), f.data[2], f.len[2],
				       &b) != KVI_OK) {
			fail_msg("decode: %s",
				 kvi_decoder_error(simc_decoder()));
		}
		assert_false(b.has_dp_rank);
		for (uint32_t e = 0; e < b.n_events; e++) {
			saw_cpu |= b.events[e].tier == KVI_TIER_CPU;
			saw_removed |= b.events[e].type == KVI_EVENT_REMOVED;
		}
		index_apply(&m, &b);
		kvt_frames_fini(&f);
	}
	assert_true(saw_cpu);
	assert_true(saw_removed);
	json_t *st = simc_http(&B, "GET", "/status", NULL, 200);
	assert_true(json_is_true(json_object_get(st, "load_done")));
	assert_int_equal(simc_int(st, "requests_done"), 80);
	json_t *r0 = json_array_get(json_object_get(st, "ranks"), 0);
	assert_int_equal(simc_int(r0, "published"), (int)next);
	assert_true(next > 0 &&
		    next <= 40); /* a step of hits publishes nothing */
	json_decref(st);

	/* The model equals the ground truth, tiers included. */
	json_t *t = simc_http(&B, "GET", "/truth?pod=0&rank=0", NULL, 200);
	json_t *blocks = json_object_get(t, "blocks");
	size_t held = 0;
	for (size_t i = 0; i < m.n; i++) {
		held += m.tiers[i] != 0;
	}
	assert_int_equal(held, json_array_size(blocks));
	for (size_t i = 0; i < json_array_size(blocks); i++) {
		json_t *blk = json_array_get(blocks, i);
		size_t k =
		    index_find(&m, simc_u64(json_object_get(blk, "hash")));
		assert_true(k != SIZE_MAX);
		unsigned tiers = 0;
		json_t *tl = json_object_get(blk, "tiers");
		for (size_t j = 0; j < json_array_size(tl); j++) {
			const char *name =
			    json_string_value(json_array_get(tl, j));
			tiers |= strcmp(name, "cpu") == 0 ? 1u << KVI_TIER_CPU
							  : 1u << KVI_TIER_GPU;
		}
		assert_int_equal(m.tiers[k], tiers);
	}
	json_decref(t);
	kvi_free(m.hash);
	kvi_free(m.tiers);

	/* Replay without the topic frame: [b"", seq8, payload]. */
	simc_replay_request(&B, 0, 0);
	for (uint64_t s = 0; s < next; s++) {
		kvt_frames f;
		assert_true(simc_recv_replay(&B, 0, false, NULL, &f) == s);
		kvt_frames_fini(&f);
	}
	kvt_frames f;
	assert_true(simc_recv_replay(&B, 0, false, NULL, &f) == KVI_SEQ_END);
	kvt_frames_fini(&f);

	/* POST /quit exits cleanly. */
	json_decref(simc_http(&B, "POST", "/quit", json_object(), 200));
	int status = -1;
	assert_int_equal(kvt_proc_wait(B.sim.proc, 10000, &status), KVI_OK);
	assert_int_equal(status, 0);
	simc_stop(&B);
}

static bool
load_done(void *arg)
{
	json_t *st = simc_http(arg, "GET", "/status", NULL, 200);
	bool done = json_is_true(json_object_get(st, "load_done"));
	json_decref(st);
	return done;
}

/* test_thousand_ranks runs 500 pods x DP=2 in one process: every rank has
 * its endpoints, the load spreads over them, and the streams of the first
 * and the last rank carry exactly what those ranks published. */
static void
test_thousand_ranks(void **state)
{
	(void)state;
	simproc T;
	const char *extra[] = {
	    "--paused",    "--cache-blocks",  "32", "--generate",
	    "3000",        "--rate",          "0",  "--route",
	    "round-robin", "--replay-buffer", "16", NULL};
	simc_start(&T, 500, 2, extra);
	assert_int_equal(T.sim.n, 1000);
	kvt_zmq_link sub[2];
	const int watched[2] = {0, 999};
	for (int i = 0; i < 2; i++) {
		char ep[64];
		snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d",
			 T.sim.zmq_port[watched[i]]);
		assert_int_equal(kvt_zmq_connect(simc_zmq(), ZMQ_SUB, ep,
						 SIMC_WAIT_MS, &sub[i]),
				 KVI_OK);
	}
	simc_post(&T, "/resume", NULL);
	assert_true(kvt_wait_until(load_done, &T, 30000));

	json_t *st = simc_http(&T, "GET", "/status", NULL, 200);
	assert_int_equal(simc_int(st, "requests_done"), 3000);
	json_t *ranks = json_object_get(st, "ranks");
	assert_int_equal(json_array_size(ranks), 1000);
	int published = 0;
	for (size_t i = 0; i < 1000; i++) {
		json_t *r = json_array_get(ranks, i);
		assert_int_equal(simc_int(r, "requests"), 3); /* round-robin */
		published += simc_int(r, "published");
	}
	assert_int_equal(published, simc_int(st, "batches"));
	for (int i = 0; i < 2; i++) {
		json_t *r = json_array_get(ranks, (size_t)watched[i]);
		int n = simc_int(r, "published");
		assert_true(n > 0);
		for (int k = 0; k < n; k++) {
			kvt_frames f;
			assert_int_equal(kvt_zmq_recv(sub[i].socket, 3000, &f),
					 KVI_OK);
			assert_true(kvi_seq_get(f.data[1]) == (uint64_t)k);
			kvt_frames_fini(&f);
		}
		simc_expect_quiet(sub[i].socket);
		kvt_zmq_close(&sub[i]);
	}
	json_decref(st);
	json_decref(simc_recover(&T, 999, "?start=0&end=0", 200));
	assert_int_equal(simc_stop(&T), 0);
}

static int
group_setup(void **state)
{
	(void)state;
	simc_setup();
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	simc_teardown();
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_legacy_shapes_under_load),
	    cmocka_unit_test(test_thousand_ranks),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
