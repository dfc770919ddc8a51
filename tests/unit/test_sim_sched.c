/*
 * Unit tests of the simulator's timed mode (tools/sim/sim_sched.h) over its
 * cache model: requests of a rank run one at a time in arrival order; the
 * hit is vLLM's, capped at num_tokens - 1 (a prompt cached in full
 * recomputes, and stores again, its last block); each chunked-prefill step
 * ends at its scheduled time and caches exactly the full blocks it
 * computed, in one batch with the evictions its allocation made; the
 * request's own blocks are never evicted for it; a full queue refuses; a
 * restart drains.
 *
 * Times are simulated: at 1000 tokens/s a token takes 1 ms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "sim_cache.h"
#include "sim_fixture.h"
#include "sim_load.h"
#include "sim_sched.h"

#define MS    1000000ull
#define RATE  1000.0 /* tokens/s: 1 ms a token */
#define EVERY 0      /* no chunking */

typedef struct tfx {
	fixture f;
	sim_sched s;
} tfx;

static void
tfx_init(tfx *t, uint32_t gpu, uint64_t chunk, uint32_t max_queue)
{
	fx_setup(&t->f, gpu, 0, false);
	sim_sched_config cfg = {.rate = RATE,
				.chunk = chunk,
				.block_size = BS,
				.max_queue = max_queue};
	sim_sched_init(&t->s, &cfg);
}

static void
tfx_fini(tfx *t)
{
	sim_sched_fini(&t->s);
	fx_fini(&t->f);
}

/* job_of makes a request of the given block ids (one block each) plus
 * extra tokens of a partial last block. */
static sim_job *
job_of(const uint64_t *ids, size_t n, uint32_t extra)
{
	uint32_t blocks;
	uint32_t *tok = sim_load_expand(ids, n, 1, BS, &blocks);
	return sim_job_alloc(tok, blocks, (uint64_t)blocks * BS + extra, NULL);
}

/* push queues a request at time at (ms) and returns it (still owned by
 * the scheduler). */
static sim_job *
push(tfx *t, const uint64_t *ids, size_t n, uint32_t extra, uint64_t at,
     uint32_t expect_ahead)
{
	sim_job *j = job_of(ids, n, extra);
	uint32_t ahead = 99;
	assert_true(sim_sched_push(&t->s, j, at * MS, &ahead));
	assert_int_equal(ahead, expect_ahead);
	return j;
}

/* step runs the current step in a fresh batch; returns the finished job. */
static sim_job *
step(tfx *t)
{
	sim_batch_reset(&t->f.batch);
	return sim_sched_step(&t->s, t->f.cache, &t->f.batch);
}

/* run_all runs the current request to its end; returns it (caller frees). */
static sim_job *
run_all(tfx *t)
{
	assert_non_null(t->s.cur);
	sim_job *done;
	while ((done = step(t)) == NULL) {
	}
	return done;
}

/* ext_of_ids returns the external hash of the last of n ids' blocks. */
static uint64_t
ext_of_ids(const uint64_t *ids, size_t n)
{
	uint32_t blocks;
	uint32_t *tok = sim_load_expand(ids, n, 1, BS, &blocks);
	uint64_t h = 0;
	for (uint32_t i = 0; i < blocks; i++) {
		h = sim_external_hash(7, i > 0, h, tok + (size_t)i * BS, BS);
	}
	kvi_free(tok);
	return h;
}

static bool
cached(const tfx *t, const uint64_t *ids, size_t n)
{
	sim_block_info info;
	return sim_cache_lookup(t->f.cache, ext_of_ids(ids, n), &info);
}

static void
test_fifo_order(void **state)
{
	(void)state;
	tfx t;
	tfx_init(&t, 64, EVERY, 8);
	uint64_t a[] = {1, 2, 3, 4};
	uint64_t b[] = {9};
	uint64_t c[] = {10, 11};
	assert_int_equal(sim_sched_due(&t.s), UINT64_MAX);
	assert_null(sim_sched_start(&t.s, t.f.cache));
	sim_job *ja = push(&t, a, 4, 0, 0, 0);
	sim_job *jb = push(&t, b, 1, 0, 1, 1);
	assert_ptr_equal(sim_sched_start(&t.s, t.f.cache), ja);
	/* Nothing else starts while a runs; c queues behind b. */
	assert_null(sim_sched_start(&t.s, t.f.cache));
	sim_job *jc = push(&t, c, 2, 0, 2, 2);
	assert_int_equal(ja->start_ns, 0);
	assert_int_equal(sim_sched_due(&t.s), 16 * MS);
	assert_int_equal(sim_sched_busy_until(&t.s), 16 * MS);
	assert_ptr_equal(step(&t), ja);
	assert_int_equal(ja->end_ns, 16 * MS);

	/* b starts when a ends, not when it arrived. */
	assert_ptr_equal(sim_sched_start(&t.s, t.f.cache), jb);
	assert_int_equal(jb->arrival_ns, 1 * MS);
	assert_int_equal(jb->start_ns, 16 * MS);
	assert_int_equal(jb->end_ns, 20 * MS);
	assert_ptr_equal(run_all(&t), jb);
	assert_ptr_equal(sim_sched_start(&t.s, t.f.cache), jc);
	assert_int_equal(jc->start_ns, 20 * MS);
	assert_ptr_equal(run_all(&t), jc);
	assert_null(sim_sched_start(&t.s, t.f.cache));

	/* An idle rank starts a request at its arrival. */
	sim_job *jd = push(&t, b, 1, 0, 100, 0);
	assert_ptr_equal(sim_sched_start(&t.s, t.f.cache), jd);
	assert_int_equal(jd->start_ns, 100 * MS);
	/* b is cached now: its one block is capped, so it recomputes. */
	assert_int_equal(jd->hit_blocks, 0);
	assert_ptr_equal(run_all(&t), jd);
	sim_job_free(ja);
	sim_job_free(jb);
	sim_job_free(jc);
	sim_job_free(jd);
	tfx_fini(&t);
}

static void
test_queue_bound_and_drain(void **state)
{
	(void)state;
	tfx t;
	tfx_init(&t, 64, EVERY, 2);
	uint64_t a[] = {1, 2};
	sim_job *j1 = push(&t, a, 2, 0, 0, 0);
	push(&t, a, 2, 0, 0, 1);
	sim_job *j3 = job_of(a, 2, 0);
	uint32_t ahead;
	assert_false(sim_sched_push(&t.s, j3, 0, &ahead));
	/* The running request does not count against the bound. */
	assert_ptr_equal(sim_sched_start(&t.s, t.f.cache), j1);
	assert_true(sim_sched_push(&t.s, j3, 0, &ahead));
	assert_int_equal(ahead, 2);
	sim_job *list = sim_sched_drain(&t.s);
	assert_ptr_equal(list, j1);
	int n = 0;
	while (list != NULL) {
		sim_job *next = list->next;
		sim_job_free(list);
		list = next;
		n++;
	}
	assert_int_equal(n, 3);
	assert_int_equal(sim_sched_due(&t.s), UINT64_MAX);
	assert_int_equal(t.s.queued, 0);
	tfx_fini(&t);
}

static void
test_hit_capped_at_num_tokens_minus_one(void **state)
{
	(void)state;
	tfx t;
	tfx_init(&t, 64, EVERY, 8);
	uint64_t p[] = {1, 2, 3, 4};
	push(&t, p, 4, 0, 0, 0);
	sim_sched_start(&t.s, t.f.cache);
	sim_job_free(run_all(&t));

	/* Cached in full: the hit stops one block short, the last block is
	 * computed (one block of time) and stored again. */
	sim_job *j = push(&t, p, 4, 0, 100, 0);
	sim_sched_start(&t.s, t.f.cache);
	assert_int_equal(j->hit_blocks, 3);
	assert_int_equal(j->hit_tokens, 3 * BS);
	assert_int_equal(j->end_ns - j->start_ns, BS * MS);
	assert_ptr_equal(step(&t), j);
	assert_int_equal(t.f.batch.n_events, 1);
	const sim_event *ev = &t.f.batch.events[0];
	assert_int_equal(ev->type, SIM_EV_STORED);
	assert_int_equal(ev->n, 1);
	assert_true(ev->has_parent);
	assert_true(ev->parent == ext_of_ids(p, 3));
	assert_true(t.f.batch.ext[ev->first] == ext_of_ids(p, 4));
	assert_int_equal(j->stored, 0); /* nothing new on GPU */
	assert_int_equal(j->n_local, 4);
	sim_job_free(j);

	/* With a partial block after it every full block hits: only the
	 * partial tokens are computed, and no block is stored. */
	j = push(&t, p, 4, 2, 200, 0);
	sim_sched_start(&t.s, t.f.cache);
	assert_int_equal(j->hit_blocks, 4);
	assert_int_equal(j->end_ns - j->start_ns, 2 * MS);
	assert_ptr_equal(step(&t), j);
	assert_int_equal(t.f.batch.n_events, 0);
	sim_job_free(j);

	/* One token: nothing can hit. */
	uint64_t one[] = {1};
	j = push(&t, one, 0, 1, 300, 0);
	sim_sched_start(&t.s, t.f.cache);
	assert_int_equal(j->hit_blocks, 0);
	assert_int_equal(j->end_ns - j->start_ns, 1 * MS);
	sim_job_free(run_all(&t));
	tfx_fini(&t);
}

static void
test_chunk_publish_boundaries(void **state)
{
	(void)state;
	tfx t;
	tfx_init(&t, 64, 2 * BS, 8);
	uint64_t p[] = {1, 2, 3, 4, 5, 6};
	sim_job *j = push(&t, p, 6, 0, 0, 0);
	sim_sched_start(&t.s, t.f.cache);
	for (uint32_t k = 0; k < 3; k++) {
		/* Step k ends after 2(k+1) blocks of compute. */
		assert_int_equal(sim_sched_due(&t.s), 2 * BS * (k + 1) * MS);
		sim_job *done = step(&t);
		assert_true((done != NULL) == (k == 2));
		assert_int_equal(t.f.batch.n_events, 1);
		const sim_event *ev = &t.f.batch.events[0];
		assert_int_equal(ev->type, SIM_EV_STORED);
		assert_int_equal(ev->n, 2);
		assert_true(t.f.batch.ext[ev->first] ==
			    ext_of_ids(p, 2 * k + 1));
		assert_true(ev->has_parent == (k > 0));
		if (k > 0) {
			assert_true(ev->parent == ext_of_ids(p, 2 * k));
		}
		/* What is not computed yet is not cached yet. */
		assert_true(cached(&t, p, 2 * k + 2));
		if (k < 2) {
			assert_false(cached(&t, p, 2 * k + 3));
		}
	}
	assert_int_equal(j->stored, 6);
	sim_job_free(j);

	/* A chunk that ends inside a block caches the full blocks only. */
	sim_sched_fini(&t.s);
	sim_sched_config cfg = {
	    .rate = RATE, .chunk = BS + 2, .block_size = BS, .max_queue = 8};
	sim_sched_init(&t.s, &cfg);
	uint64_t q[] = {20, 21, 22};
	j = push(&t, q, 3, 0, 0, 0);
	sim_sched_start(&t.s, t.f.cache);
	assert_null(step(&t)); /* tokens [0, 6): block 0 */
	assert_int_equal(t.f.batch.n_events, 1);
	assert_int_equal(t.f.batch.events[0].n, 1);
	assert_int_equal(sim_sched_due(&t.s), 3 * BS * MS);
	assert_ptr_equal(step(&t), j); /* tokens [6, 12): blocks 1, 2 */
	assert_int_equal(t.f.batch.n_events, 1);
	assert_int_equal(t.f.batch.events[0].n, 2);
	assert_true(t.f.batch.events[0].parent == ext_of_ids(q, 1));
	assert_true(cached(&t, q, 3));
	assert_int_equal(j->done_tokens, 3 * BS);
	sim_job_free(j);
	tfx_fini(&t);
}

static void
test_eviction_at_allocation(void **state)
{
	(void)state;
	tfx t;
	tfx_init(&t, 4, 2 * BS, 8);
	uint64_t x[] = {1, 2, 3, 4};
	push(&t, x, 4, 0, 0, 0);
	sim_sched_start(&t.s, t.f.cache);
	sim_job_free(run_all(&t));

	/* y needs the whole cache: each step evicts for its own two blocks
	 * only, x's tails first, in that step's batch before its store. */
	uint64_t y[] = {5, 6, 7, 8};
	sim_job *j = push(&t, y, 4, 0, 100, 0);
	sim_sched_start(&t.s, t.f.cache);
	assert_int_equal(j->hit_blocks, 0);
	assert_null(step(&t));
	assert_int_equal(t.f.batch.n_events, 2);
	assert_int_equal(t.f.batch.events[0].type, SIM_EV_REMOVED);
	assert_int_equal(t.f.batch.events[0].n, 2);
	assert_true(t.f.batch.removed[0] == ext_of_ids(x, 4));
	assert_true(t.f.batch.removed[1] == ext_of_ids(x, 3));
	assert_int_equal(t.f.batch.events[1].type, SIM_EV_STORED);
	assert_true(cached(&t, x, 2));
	assert_false(cached(&t, x, 3));

	assert_ptr_equal(step(&t), j);
	assert_int_equal(t.f.batch.events[0].type, SIM_EV_REMOVED);
	assert_int_equal(t.f.batch.events[0].n, 2);
	assert_true(t.f.batch.removed[0] == ext_of_ids(x, 2));
	assert_true(t.f.batch.removed[1] == ext_of_ids(x, 1));
	assert_int_equal(j->removed, 4);
	assert_true(cached(&t, y, 4));
	sim_job_free(j);
	tfx_fini(&t);
}

static void
test_pinned_blocks(void **state)
{
	(void)state;
	tfx t;
	tfx_init(&t, 4, BS, 8);
	/* h is cached first, o after it: the cache is full and h is the
	 * least recently used. */
	uint64_t h[] = {1, 2};
	uint64_t o[] = {7, 8};
	push(&t, h, 2, 0, 0, 0);
	sim_sched_start(&t.s, t.f.cache);
	sim_job_free(run_all(&t));
	push(&t, o, 2, 0, 0, 0);
	sim_sched_start(&t.s, t.f.cache);
	sim_job_free(run_all(&t));

	/* h + 2 new blocks, one block a step: each step evicts one block,
	 * but never the hit (the oldest blocks) nor what earlier steps
	 * computed; o goes. */
	uint64_t p[] = {1, 2, 3, 4};
	sim_job *j = push(&t, p, 4, 0, 100, 0);
	sim_sched_start(&t.s, t.f.cache);
	assert_int_equal(j->hit_blocks, 2);
	for (int k = 0; k < 2; k++) {
		step(&t);
		for (uint32_t i = 0; i < t.f.batch.n_removed; i++) {
			for (size_t m = 1; m <= 2 + (size_t)k; m++) {
				assert_true(t.f.batch.removed[i] !=
					    ext_of_ids(p, m));
			}
		}
	}
	assert_null(t.s.cur);
	for (size_t m = 1; m <= 4; m++) {
		assert_true(cached(&t, p, m));
	}
	assert_false(cached(&t, o, 1));
	assert_int_equal(j->removed, 2);
	sim_job_free(j);
	tfx_fini(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fifo_order),
	    cmocka_unit_test(test_queue_bound_and_drain),
	    cmocka_unit_test(test_hit_capped_at_num_tokens_minus_one),
	    cmocka_unit_test(test_chunk_publish_boundaries),
	    cmocka_unit_test(test_eviction_at_allocation),
	    cmocka_unit_test(test_pinned_blocks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
