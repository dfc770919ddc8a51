/*
 * Unit tests of the simulator's KV cache groups (tools/sim/sim_groups.h):
 * the --kv-groups syntax; what each kind stores, pins, releases and
 * evicts, group by group; the engine's hit over the groups after
 * evictions in one of them, equal to what /hit answers (sim_kv_query);
 * and the scheduler's steps in Mamba "align" mode. The events on the
 * wire are test_sim_groups_wire.c's.
 *
 * Hash blocks are BS = 4 tokens; a prompt of 6 blocks and one token (25
 * tokens) may hit its 6 blocks.
 */
#include <msgpack.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "sim_encode.h"
#include "sim_groups_fixture.h"
#include "sim_recover.h"
#include "sim_ring.h"
#include "sim_sched.h"
#include "wire.h"

/* ---- the flag --------------------------------------------------------- */

static void
test_parse(void **state)
{
	(void)state;
	sim_groups_config c;
	const char *ok = "full,swa=64:32:8,mla:16,mamba=align,chunked=64:32,"
			 "swa-mla=32";
	/* chunked has the common block size (32): vLLM accepts it */
	assert_null(sim_groups_parse(ok, strlen(ok), 16, 100, &c));
	assert_int_equal(c.n_groups, 6);
	assert_int_equal(c.groups[4].spec.chunk_size, 64);
	assert_int_equal(c.groups[5].spec.kind, SIM_GROUP_SLIDING_MLA);
	const char *ok2 = "full,sliding_window=64:16:8,mamba=all:32:7";
	assert_null(sim_groups_parse(ok2, strlen(ok2), 16, 100, &c));
	assert_int_equal(c.n_groups, 3);
	assert_int_equal(c.hash_block_size, 16);
	assert_int_equal(c.groups[0].spec.kind, SIM_GROUP_FULL);
	assert_int_equal(c.groups[0].spec.block_size, 16);
	assert_int_equal(c.groups[0].blocks, 100);
	assert_int_equal(c.groups[1].spec.kind, SIM_GROUP_SLIDING);
	assert_int_equal(c.groups[1].spec.sliding_window, 64);
	assert_int_equal(c.groups[1].blocks, 8);
	assert_int_equal(c.groups[2].spec.kind, SIM_GROUP_MAMBA);
	assert_int_equal(c.groups[2].spec.mamba_mode, SIM_MAMBA_ALL);
	assert_int_equal(c.groups[2].spec.block_size, 32);
	assert_int_equal(c.groups[2].blocks, 7);
	assert_false(sim_groups_keys_ok(&c));
	assert_int_equal(sim_groups_step_align(&c), 0);
	const char *al = "full,mamba=align:16";
	assert_null(sim_groups_parse(al, strlen(al), 16, 2, &c));
	assert_int_equal(sim_groups_step_align(&c), 16);
	assert_true(sim_groups_keys_ok(&c));
	static const char *const bad[] = {
	    "",
	    "full,",
	    "fool",
	    "full=3",
	    "swa",
	    "swa=0",
	    "swa=x",
	    "mamba=none",
	    "mamba",
	    "full:24",
	    "full:16:0",
	    "full:0",
	    "full:16:8:9",
	    "chunked=64:16,full:32",
	    "full,full,full,full,full,full,full,full,full,full,full,full,"
	    "full,full,full,full,full"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (sim_groups_parse(bad[i], strlen(bad[i]), 16, 1, &c) ==
		    NULL) {
			fail_msg("accepted \"%s\"", bad[i]);
		}
	}
	assert_string_equal(sim_group_kind_name(SIM_GROUP_SLIDING_MLA),
			    "sliding_window_mla");
	assert_string_equal(sim_group_kind_name(SIM_GROUP_CHUNKED_LOCAL),
			    "chunked_local_attention");
}

/* ---- sliding window ---------------------------------------------------- */

/* The sliding window group evicts alone; the hit falls to what its window
 * allows, and a request's hit leaves the blocks before its window where
 * they were, first to go. */
static void
test_sliding_window_evicts_alone(void **state)
{
	(void)state;
	gfx f;
	/* window 8 tokens: a hit needs cdiv(7, 4) = 2 blocks before it */
	gfx_setup(&f, "full:4:16,swa=8:4:8");
	uint32_t a[25], b[17];
	uint64_t ha[6], hb[4];
	ramp(a, 25, 100);
	ramp(b, 17, 900);
	hashes_of(a, 6, ha);
	hashes_of(b, 4, hb);

	run(&f, a, 25);
	assert_int_equal(f.res.hit_tokens, 0);
	assert_int_equal(f.res.stored, 12);
	assert_int_equal(f.batch.n_events, 2);
	const sim_event *s0 = event(&f, 0, SIM_EV_STORED, 0);
	const sim_event *s1 = event(&f, 1, SIM_EV_STORED, 1);
	assert_int_equal(s0->n, 6);
	assert_int_equal(s1->n, 6);
	assert_false(s0->has_parent || s1->has_parent);
	for (uint32_t j = 0; j < 6; j++) {
		assert_true(stored_hash(&f, s1, j) == ha[j]);
	}

	/* B takes 4 of the sliding group's 8 slots: A's tail goes, A's last
	 * blocks were released first */
	run(&f, b, 17);
	assert_int_equal(f.res.removed, 2);
	const sim_event *rm = event(&f, 0, SIM_EV_REMOVED, 1);
	assert_int_equal(rm->n, 2);
	assert_true(f.batch.removed[rm->first] == ha[5]);
	assert_true(f.batch.removed[rm->first + 1] == ha[4]);
	event(&f, 1, SIM_EV_STORED, 0);
	event(&f, 2, SIM_EV_STORED, 1);
	assert_true(held(&f, 0, ha[5]) && !held(&f, 1, ha[5]));

	/* full attention holds A's 6 blocks; the window's two blocks
	 * before 24 are gone, those before 16 are not */
	uint64_t gh[SIM_MAX_GROUPS];
	assert_int_equal(query(&f, a, 25, gh), 16);
	assert_int_equal(gh[0], 24);
	assert_int_equal(gh[1], 16);

	/* A again takes exactly that hit. The window at 16 pins A2, A3;
	 * A0, A1 were left where they were and go first. */
	run(&f, a, 25);
	assert_int_equal(f.res.hit_tokens, 16);
	assert_int_equal(f.res.gpu_hit, 4);
	assert_int_equal(f.batch.n_events, 3);
	rm = event(&f, 0, SIM_EV_REMOVED, 1);
	assert_int_equal(rm->n, 2);
	assert_true(f.batch.removed[rm->first] == ha[1]);
	assert_true(f.batch.removed[rm->first + 1] == ha[0]);
	s0 = event(&f, 1, SIM_EV_STORED, 0);
	s1 = event(&f, 2, SIM_EV_STORED, 1);
	/* full attention stores A4, A5 again: named, not new */
	assert_int_equal(s0->n, 2);
	assert_true(s0->has_parent && s0->parent == ha[3]);
	assert_true(s1->has_parent && s1->parent == ha[3]);
	assert_int_equal(f.res.stored, 2);
	assert_int_equal(query(&f, a, 25, NULL), 24);
	for (uint32_t j = 0; j < 4; j++) {
		assert_true(held(&f, 1, hb[j]));
	}
	gfx_fini(&f);
}

/* ---- Mamba -------------------------------------------------------------- */

static void
test_mamba_align_and_all(void **state)
{
	(void)state;
	gfx f;
	gfx_setup(&f, "full:4:16,mamba=align:4:16");
	uint32_t a[25];
	uint64_t ha[6];
	ramp(a, 25, 100);
	hashes_of(a, 6, ha);

	/* "align": the state at the prompt's last block boundary only */
	run(&f, a, 25);
	assert_int_equal(f.batch.n_events, 2);
	assert_int_equal(event(&f, 0, SIM_EV_STORED, 0)->n, 6);
	const sim_event *m = event(&f, 1, SIM_EV_STORED, 1);
	assert_int_equal(m->n, 1);
	assert_true(stored_hash(&f, m, 0) == ha[5]);
	assert_true(m->has_parent && m->parent == ha[4]);
	assert_int_equal(sim_groups_count(f.g, 1), 1);
	assert_int_equal(query(&f, a, 25, NULL), 24);
	/* the 24-token prefix may hit at most 23: no state ends there */
	uint64_t gh[SIM_MAX_GROUPS];
	assert_int_equal(query(&f, a, 24, gh), 0);
	assert_int_equal(gh[0], 20);
	assert_int_equal(gh[1], 0);
	run(&f, a, 24);
	assert_int_equal(f.res.hit_tokens, 0);
	assert_int_equal(f.res.stored, 0); /* everything stored again */
	assert_int_equal(event(&f, 1, SIM_EV_STORED, 1)->n, 1);
	run(&f, a, 25);
	assert_int_equal(f.res.hit_tokens, 24);
	gfx_fini(&f);

	/* A request releases the state it hit when its step to the last
	 * boundary is done, and the state it stored at its end: a group of
	 * two states evicts the hit one first. Two blocks do not truncate
	 * the prompt. */
	gfx_setup(&f, "full:4:16,mamba=align:4:2");
	uint32_t c[33], d[9];
	ramp(c, 33, 100); /* A and two more blocks */
	ramp(d, 9, 5000);
	uint64_t hc[8];
	hashes_of(c, 8, hc);
	run(&f, a, 25);
	run(&f, c, 33);
	assert_int_equal(f.res.hit_tokens, 24);
	assert_int_equal(event(&f, 1, SIM_EV_STORED, 1)->n, 1);
	assert_true(held(&f, 1, hc[5]) && held(&f, 1, hc[7]));
	run(&f, d, 9);
	const sim_event *rm = event(&f, 0, SIM_EV_REMOVED, 1);
	assert_int_equal(rm->n, 1);
	assert_true(f.batch.removed[rm->first] == hc[5]);
	assert_true(held(&f, 1, hc[7]));
	assert_int_equal(sim_groups_limit(f.g, 1000), 64);
	gfx_fini(&f);

	/* "all": a state at every block boundary */
	gfx_setup(&f, "full:4:16,mamba=all:4:16");
	run(&f, a, 25);
	assert_int_equal(event(&f, 1, SIM_EV_STORED, 1)->n, 6);
	assert_int_equal(query(&f, a, 24, NULL), 20);
	assert_int_equal(query(&f, a, 25, NULL), 24);
	gfx_fini(&f);
}

/* ---- two block sizes ---------------------------------------------------- */

static void
test_two_block_sizes(void **state)
{
	(void)state;
	gfx f;
	gfx_setup(&f, "full:4:32,full:8:8");
	uint32_t a[33], b[25], c[25];
	uint64_t ha[8];
	ramp(a, 33, 100);
	ramp(b, 25, 500);
	ramp(c, 25, 700);
	hashes_of(a, 8, ha);

	run(&f, a, 25);
	const sim_event *s1 = event(&f, 1, SIM_EV_STORED, 1);
	assert_int_equal(s1->stride, 2);
	assert_int_equal(s1->n, 3);
	for (uint32_t j = 0; j < 3; j++) {
		assert_true(stored_hash(&f, s1, j) == ha[2 * j + 1]);
	}
	assert_true(held(&f, 1, ha[1]) && !held(&f, 1, ha[0]));

	/* the continuation hits 24 and stores group 1's block 3 under its
	 * last hash, parent the end of block 2 */
	run(&f, a, 33);
	assert_int_equal(f.res.hit_tokens, 24);
	s1 = event(&f, 1, SIM_EV_STORED, 1);
	assert_int_equal(s1->n, 1);
	assert_true(stored_hash(&f, s1, 0) == ha[7]);
	assert_true(s1->has_parent && s1->parent == ha[5]);

	/* group 1 (8 blocks) evicts A's last block, last released first */
	run(&f, b, 25);
	run(&f, c, 25);
	assert_int_equal(f.batch.n_events, 3);
	const sim_event *rm = event(&f, 0, SIM_EV_REMOVED, 1);
	assert_int_equal(rm->n, 2);
	assert_true(f.batch.removed[rm->first] == ha[7]);
	assert_true(f.batch.removed[rm->first + 1] == ha[5]);
	uint64_t gh[SIM_MAX_GROUPS];
	assert_int_equal(query(&f, a, 33, gh), 16);
	assert_int_equal(gh[0], 32);
	assert_int_equal(gh[1], 16);
	run(&f, a, 33);
	assert_int_equal(f.res.hit_tokens, 16);

	/* the tree dump is group 0's; the truth lists both */
	size_t n;
	sim_block_info *d = sim_groups_dump(f.g, &n);
	assert_int_equal(n, sim_groups_count(f.g, 0));
	for (size_t i = 1; i < n; i++) {
		assert_true(d[i - 1].depth <= d[i].depth);
	}
	kvi_free(d);
	gfx_fini(&f);
}

/* count returns how many times needle occurs in text. */
static int
count(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(text, needle); p != NULL;
	     p = strstr(p + 1, needle)) {
		n++;
	}
	return n;
}

/* /kv_recover speaks of group 0 alone, at its own block size. */
static void
test_recover_group0(void **state)
{
	(void)state;
	gfx f;
	gfx_setup(&f, "full:8:8,full:4:16");
	uint32_t a[25];
	uint64_t ha[6];
	ramp(a, 25, 100);
	hashes_of(a, 6, ha);
	run(&f, a, 25);
	uint64_t seed = kvi_local_seed(NULL, 0, NULL, 0);

	size_t n;
	sim_block_info *d = sim_groups_dump(f.g, &n);
	assert_int_equal(n, 3);
	for (uint32_t i = 0; i < 3; i++) {
		assert_true(d[i].hash == ha[2 * i + 1]);
		assert_int_equal(d[i].has_parent, i > 0);
		assert_true(i == 0 || d[i].parent == ha[2 * i - 1]);
		assert_true(d[i].local_hash ==
			    kvi_local_hash(a + 8 * i, 8, seed));
	}
	kvi_free(d);

	/* the recover log keeps group 0's store: 3 blocks, their hashes
	 * and local hashes over 8 tokens; group 1's is not there */
	sim_ring log;
	sim_ring_init(&log, 4);
	size_t len;
	void *rec = sim_recover_record(&f.batch, &len);
	sim_ring_put(&log, rec, len, 0);
	sim_buf b;
	sim_buf_init(&b);
	sim_recover_origin o = {0};
	sim_recover_write_events(&b, &o, &log, 0, 0);
	const char *text = b.data;
	assert_int_equal(count(text, "\"block_hash\""), 3);
	assert_int_equal(count(text, "\"stored\""), 1);
	char num[32];
	for (uint32_t i = 0; i < 6; i++) {
		snprintf(num, sizeof(num), ":%llu", (unsigned long long)ha[i]);
		assert_int_equal(count(text, num) > 0, i % 2 == 1);
	}
	snprintf(num, sizeof(num), ":%llu",
		 (unsigned long long)kvi_local_hash(a + 16, 8, seed));
	assert_int_equal(count(text, num), 1);
	sim_buf_fini(&b);
	sim_ring_fini(&log);
	gfx_fini(&f);
}

/* ---- chunked local attention, step by step ------------------------------ */

static void
test_chunked_local_spans(void **state)
{
	(void)state;
	gfx f;
	/* chunks of 8 tokens: 2 blocks */
	gfx_setup(&f, "full:4:16,chunked=8:4:8");
	uint32_t a[24], b[13];
	uint64_t ha[6];
	ramp(a, 24, 100);
	ramp(b, 13, 900);
	hashes_of(a, 6, ha);

	/* three steps of 8 tokens: each releases the chunk before */
	sim_batch_reset(&f.batch);
	assert_int_equal(sim_groups_hit(f.g, &f.batch, a, 24, NULL), 0);
	uint64_t stops[] = {0, 8, 16, 24};
	for (int k = 1; k <= 3; k++) {
		sim_batch_reset(&f.batch);
		sim_groups_span(f.g, &f.batch, a, 24, NULL,
				stops[k > 1 ? k - 2 : 0], stops[k - 1],
				stops[k], k == 3, &f.res);
		assert_int_equal(f.res.stored, 4);
		assert_int_equal(event(&f, 1, SIM_EV_STORED, 1)->n, 2);
	}
	/* the chunked group evicts A's first chunk first (released when
	 * the second step began), full attention would lose A's tail */
	run(&f, b, 13);
	const sim_event *rm = event(&f, 0, SIM_EV_REMOVED, 1);
	assert_int_equal(rm->n, 1);
	assert_true(f.batch.removed[rm->first] == ha[1]);
	/* a hit needs the chunked group's blocks of its own chunk only:
	 * the evicted A1 was in the first, a hit at its end needs none */
	assert_int_equal(query(&f, a, 24, NULL), 20);
	assert_int_equal(query(&f, a, 21, NULL), 20);
	assert_int_equal(query(&f, a, 9, NULL), 8);
	assert_int_equal(query(&f, a, 6, NULL), 4);
	/* C evicts A0, A3, A2, A5 from the chunked group (its LRU order:
	 * A's chunks as they were released, then B): without A2, in the
	 * chunk 8..16, a hit inside that chunk falls to its start */
	uint32_t c[17];
	ramp(c, 17, 2000);
	run(&f, c, 17);
	rm = event(&f, 0, SIM_EV_REMOVED, 1);
	assert_int_equal(rm->n, 4);
	assert_true(f.batch.removed[rm->first + 2] == ha[2]);
	assert_int_equal(f.batch.n_events, 3); /* full attention evicts none */
	uint64_t gh[SIM_MAX_GROUPS];
	assert_int_equal(query(&f, a, 13, gh), 8);
	assert_int_equal(gh[0], 12);
	assert_int_equal(gh[1], 8);
	gfx_fini(&f);
}

/* ---- the scheduler in "align" mode -------------------------------------- */

static void
test_sched_align_steps(void **state)
{
	(void)state;
	gfx f;
	gfx_setup(&f, "full:4:16,mamba=align:4:16");
	sim_sched s;
	sim_sched_config sc = {.rate = 1e6,
			       .chunk = 10,
			       .block_size = BS,
			       .max_queue = 4,
			       .align = 4};
	sim_sched_init(&s, &sc);
	uint32_t *tok = kvi_malloc(25 * sizeof(uint32_t));
	ramp(tok, 25, 100);
	uint64_t ha[6];
	hashes_of(tok, 6, ha);
	uint32_t ahead;
	assert_true(
	    sim_sched_push(&s, sim_job_alloc(tok, 6, 25, NULL), 0, &ahead));
	sim_job *j = sim_sched_start_groups(&s, f.g);
	assert_non_null(j);
	assert_int_equal(j->hit_tokens, 0);
	/* chunks of 10 cut to block boundaries; the last boundary (24)
	 * ends a step, then the last token */
	const uint64_t ends[] = {8, 16, 24, 25};
	const int state_block[] = {1, 3, 5, -1};
	sim_job *done = NULL;
	for (int k = 0; k < 4; k++) {
		assert_null(done);
		sim_batch_reset(&f.batch);
		done = sim_sched_step_groups(&s, f.g, &f.batch);
		assert_int_equal(j->done_tokens, ends[k]);
		bool mamba = false;
		for (uint32_t e = 0; e < f.batch.n_events; e++) {
			const sim_event *ev = &f.batch.events[e];
			if (ev->group == 1 && ev->type == SIM_EV_STORED) {
				mamba = true;
				assert_int_equal(ev->n, 1);
				assert_true(stored_hash(&f, ev, 0) ==
					    ha[state_block[k]]);
			}
		}
		assert_int_equal(mamba, state_block[k] >= 0);
	}
	assert_ptr_equal(done, j);
	/* the states at 8 and 16 were released, not dropped */
	assert_int_equal(sim_groups_count(f.g, 1), 3);
	sim_job_free(j);
	sim_sched_fini(&s);
	gfx_fini(&f);
}

/* ---- the default cache through sim_kv ------------------------------------ */

static void
test_default_hit_matches_query(void **state)
{
	(void)state;
	sim_cache_config cc = {
	    .gpu_blocks = 16, .block_size = BS, .salt = SALT};
	sim_kv *kv = sim_kv_alloc(&cc, NULL);
	sim_batch b, scratch;
	sim_batch_init(&b, BS);
	sim_batch_init(&scratch, BS);
	uint32_t a[24];
	ramp(a, 24, 100);
	sim_request_result res;
	sim_kv_run(kv, &b, a, 6, 24, NULL, &res);
	sim_kv_hit q;
	sim_kv_query(kv, &scratch, a, 24, NULL, &q);
	/* 6 blocks cached, 23 tokens at most: 5 blocks */
	assert_int_equal(q.hit_tokens, 20);
	assert_int_equal(q.n_groups, 1);
	assert_int_equal(q.groups[0].spec.kind, SIM_GROUP_FULL);
	sim_batch_reset(&b);
	sim_kv_run(kv, &b, a, 6, 24, NULL, &res);
	assert_int_equal(res.gpu_hit, 6); /* the default stores nothing */
	assert_int_equal(res.hit_tokens, q.hit_tokens);
	/* no group fields: the events are the default's */
	sim_batch_reset(&b);
	sim_kv_clear(kv, &b);
	assert_false(b.events[0].grouped);
	sim_batch_fini(&b);
	sim_batch_fini(&scratch);
	sim_kv_free(kv);
}

/* ---- on the wire --------------------------------------------------------- */

/* raw_event returns event k of a msgpack batch (map or array). */
int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_sliding_window_evicts_alone),
	    cmocka_unit_test(test_mamba_align_and_all),
	    cmocka_unit_test(test_two_block_sizes),
	    cmocka_unit_test(test_recover_group0),
	    cmocka_unit_test(test_chunked_local_spans),
	    cmocka_unit_test(test_sched_align_steps),
	    cmocka_unit_test(test_default_hit_matches_query),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
