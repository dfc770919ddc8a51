/*
 * Unit tests of the simulator's cache model (tools/sim/sim_cache.h): prefix
 * hits, LRU eviction of tails first, capacity, no orphan parents, the CPU
 * tier's write-through and load-back, and the ground-truth hashes; keyed
 * requests' external and local hashes and extra keys; offload stores. How
 * the events look on the wire is test_sim_encode.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "hash.h"
#include "sim_cache.h"
#include "sim_fixture.h"
#include "sim_keys.h"
#include "sim_load.h"
#include "wire_encode.h"

/* tokens_of expands block ids (one block each) into tokens. */
static uint32_t *
tokens_of(const uint64_t *ids, size_t n)
{
	uint32_t blocks;
	return sim_load_expand(ids, n, 1, BS, &blocks);
}

static void
fx_init(fixture *f, uint32_t gpu, uint32_t cpu)
{
	fx_setup(f, gpu, cpu, false);
}

/* fx_run runs one request of the given block ids in a fresh batch. */
static void
fx_run(fixture *f, const uint64_t *ids, size_t n)
{
	uint32_t *tok = tokens_of(ids, n);
	sim_batch_reset(&f->batch);
	sim_cache_run(f->cache, &f->batch, tok, (uint32_t)n, &f->res);
	kvi_free(tok);
}

/* fx_run_keyed runs one request of n blocks of tokens with keys in a fresh
 * batch. */
static void
fx_run_keyed(fixture *f, const uint32_t *tok, size_t n,
	     const kvi_prompt_keys *keys)
{
	sim_batch_reset(&f->batch);
	sim_cache_run_keyed(f->cache, &f->batch, tok, (uint32_t)n, keys,
			    &f->res);
}

static uint64_t
ext_of(const fixture *f, uint32_t i)
{
	return f->batch.ext[f->res.first_block + i];
}

static void
test_prefix_hit(void **state)
{
	(void)state;
	fixture f;
	fx_init(&f, 64, 0);
	uint64_t a[] = {1, 2, 3, 4};
	fx_run(&f, a, 4);
	assert_int_equal(f.batch.n_events, 1);
	assert_int_equal(f.batch.events[0].type, SIM_EV_STORED);
	assert_int_equal(f.batch.events[0].tier, SIM_TIER_GPU);
	assert_false(f.batch.events[0].has_parent);
	assert_int_equal(f.batch.events[0].n, 4);
	assert_int_equal(f.res.gpu_hit, 0);
	assert_int_equal(f.res.stored, 4);
	uint64_t head[4];
	memcpy(head, f.batch.ext, sizeof(head));

	fx_run(&f, a, 4); /* all cached: nothing to publish */
	assert_int_equal(f.batch.n_events, 0);
	assert_int_equal(f.res.gpu_hit, 4);
	assert_memory_equal(f.batch.ext, head, sizeof(head));

	uint64_t b[] = {1, 2, 9, 10, 11};
	fx_run(&f, b, 5);
	assert_int_equal(f.res.gpu_hit, 2);
	assert_int_equal(f.batch.n_events, 1);
	assert_true(f.batch.events[0].has_parent);
	assert_true(f.batch.events[0].parent == head[1]);
	assert_int_equal(f.batch.events[0].first, 2);
	assert_int_equal(f.batch.events[0].n, 3);
	assert_int_equal(sim_cache_count(f.cache, SIM_TIER_GPU), 7);
	fx_fini(&f);
}

static void
test_same_prefix_same_hashes(void **state)
{
	(void)state;
	fixture f, g;
	fx_init(&f, 16, 0);
	fx_init(&g, 8, 4);
	uint64_t a[] = {5, 6, 7};
	uint64_t b[] = {5, 6, 8};
	fx_run(&f, a, 3);
	fx_run(&g, b, 3);
	assert_true(f.batch.ext[0] == g.batch.ext[0]);
	assert_true(f.batch.ext[1] == g.batch.ext[1]);
	assert_true(f.batch.ext[2] != g.batch.ext[2]);
	/* The same tokens under another parent hash apart. */
	uint64_t c[] = {6};
	fx_run(&f, c, 1);
	assert_true(f.batch.ext[0] != g.batch.ext[1]);
	assert_true(f.batch.local[0] == g.batch.local[1]);
	fx_fini(&f);
	fx_fini(&g);
}

static void
test_lru_evicts_tails_first(void **state)
{
	(void)state;
	fixture f;
	fx_init(&f, 4, 0);
	uint64_t a[] = {1, 2, 3};
	fx_run(&f, a, 3);
	uint64_t a_ext[3] = {ext_of(&f, 0), ext_of(&f, 1), ext_of(&f, 2)};
	uint64_t b[] = {20, 21};
	fx_run(&f, b, 2);
	uint64_t b_ext[2] = {ext_of(&f, 0), ext_of(&f, 1)};
	/* One block must go: the least recently used tail, A's last. */
	assert_int_equal(f.batch.n_events, 2);
	assert_int_equal(f.batch.events[0].type, SIM_EV_REMOVED);
	assert_int_equal(f.batch.events[0].tier, SIM_TIER_GPU);
	assert_int_equal(f.batch.events[0].n, 1);
	assert_true(f.batch.removed[0] == a_ext[2]);
	assert_int_equal(f.batch.events[1].type, SIM_EV_STORED);

	/* A again: its head is cached and pinned, B's tail goes first even
	 * though A's head is older. */
	fx_run(&f, a, 3);
	assert_int_equal(f.res.gpu_hit, 2);
	assert_int_equal(f.batch.events[0].type, SIM_EV_REMOVED);
	assert_int_equal(f.batch.events[0].n, 1);
	assert_true(f.batch.removed[0] == b_ext[1]);
	assert_true(f.batch.events[1].parent == a_ext[1]);
	sim_block_info info;
	assert_true(sim_cache_lookup(f.cache, b_ext[0], &info));
	assert_false(sim_cache_lookup(f.cache, b_ext[1], &info));
	fx_fini(&f);
}

static void
test_capacity_and_truncation(void **state)
{
	(void)state;
	fixture f;
	fx_init(&f, 8, 0);
	uint64_t ids[20];
	for (int i = 0; i < 20; i++) {
		ids[i] = 100 + (uint64_t)i;
	}
	fx_run(&f, ids, 20);
	assert_int_equal(f.res.n_blocks, 8);
	assert_int_equal(f.batch.events[0].n, 8);
	assert_int_equal(sim_cache_count(f.cache, SIM_TIER_GPU), 8);
	/* A request as long as the cache evicts all of it but nothing of
	 * itself. */
	for (int i = 0; i < 20; i++) {
		ids[i] = 200 + (uint64_t)i;
	}
	fx_run(&f, ids, 8);
	assert_int_equal(f.batch.events[0].type, SIM_EV_REMOVED);
	assert_int_equal(f.batch.events[0].n, 8);
	assert_int_equal(sim_cache_count(f.cache, SIM_TIER_GPU), 8);
	fx_fini(&f);
}

/* A minimal indexer: the set of blocks per tier, built from events. */
typedef struct model {
	uint64_t hash[4096];
	unsigned tiers[4096];
	size_t n;
	size_t removed[SIM_TIER_CPU + 1]; /* blocks removed, by tier */
} model;

static size_t
model_find(const model *m, uint64_t h)
{
	for (size_t i = 0; i < m->n; i++) {
		if (m->hash[i] == h && m->tiers[i] != 0) {
			return i;
		}
	}
	return SIZE_MAX;
}

/* model_slot returns the entry of h, or a free one set to h. */
static size_t
model_slot(model *m, uint64_t h)
{
	size_t i = model_find(m, h);
	if (i != SIZE_MAX) {
		return i;
	}
	for (i = 0; i < m->n && m->tiers[i] != 0; i++) {
	}
	if (i == m->n) {
		assert_true(m->n < 4096);
		m->n++;
	}
	m->hash[i] = h;
	m->tiers[i] = 0;
	return i;
}

static void
model_apply(model *m, const sim_batch *b)
{
	for (uint32_t e = 0; e < b->n_events; e++) {
		const sim_event *ev = &b->events[e];
		if (ev->type == SIM_EV_STORED) {
			/* The parent must be held at this very moment. */
			if (ev->has_parent) {
				assert_int_not_equal(model_find(m, ev->parent),
						     SIZE_MAX);
			}
			for (uint32_t j = 0; j < ev->n; j++) {
				size_t i = model_slot(m, b->ext[ev->first + j]);
				m->tiers[i] |= ev->tier;
			}
		} else if (ev->type == SIM_EV_REMOVED) {
			for (uint32_t j = 0; j < ev->n; j++) {
				size_t i =
				    model_find(m, b->removed[ev->first + j]);
				assert_int_not_equal(i, SIZE_MAX);
				assert_true(m->tiers[i] & ev->tier);
				m->tiers[i] &= ~ev->tier;
				m->removed[ev->tier]++;
			}
		} else {
			m->n = 0;
		}
	}
}

static void
test_no_orphans_and_events_match_state(void **state)
{
	(void)state;
	static model m;
	fixture f;
	fx_init(&f, 24, 40);
	memset(&m, 0, sizeof(m));
	uint64_t rng = 42;
	size_t loaded = 0;
	for (int r = 0; r < 3000; r++) {
		/* Prefixes drawn from a small tree: shared heads, varied
		 * tails. */
		uint64_t ids[12];
		size_t n = 1 + (size_t)((rng = rng * 6364136223846793005u +
					       1442695040888963407u) >>
					60) %
				   12;
		for (size_t i = 0; i < n; i++) {
			rng = rng * 6364136223846793005u + 1442695040888963407u;
			ids[i] = (rng >> 61) + 8 * i;
		}
		fx_run(&f, ids, n);
		loaded += f.res.cpu_loaded;
		model_apply(&m, &f.batch);
		assert_true(sim_cache_count(f.cache, SIM_TIER_GPU) <= 24);
		assert_true(sim_cache_count(f.cache, SIM_TIER_CPU) <= 40);
	}
	/* The workload exercised both tiers' evictions and load-backs. */
	assert_true(m.removed[SIM_TIER_GPU] > 100);
	assert_true(m.removed[SIM_TIER_CPU] > 100);
	assert_true(loaded > 100);
	/* The indexer's view equals the cache; each block's parent is held
	 * in the block's own tiers (prefix closure). */
	size_t n;
	sim_block_info *blocks = sim_cache_snapshot(f.cache, &n);
	size_t held = 0;
	for (size_t i = 0; i < m.n; i++) {
		held += m.tiers[i] != 0;
	}
	assert_int_equal(held, n);
	for (size_t i = 0; i < n; i++) {
		size_t k = model_find(&m, blocks[i].hash);
		assert_int_not_equal(k, SIZE_MAX);
		assert_int_equal(m.tiers[k], blocks[i].tiers);
		if (blocks[i].has_parent) {
			sim_block_info p;
			assert_true(
			    sim_cache_lookup(f.cache, blocks[i].parent, &p));
			assert_int_equal(p.tiers & blocks[i].tiers,
					 blocks[i].tiers);
			assert_int_equal(p.depth + 1, blocks[i].depth);
		}
		if (i > 0) {
			assert_true(blocks[i - 1].depth <= blocks[i].depth);
		}
	}
	kvi_free(blocks);
	fx_fini(&f);
}

static void
test_cpu_write_through_and_load_back(void **state)
{
	(void)state;
	fixture f;
	fx_init(&f, 4, 8);
	uint64_t a[] = {1, 2, 3, 4};
	uint64_t b[] = {11, 12, 13, 14};
	fx_run(&f, a, 4);
	assert_int_equal(f.batch.n_events, 2);
	assert_int_equal(f.batch.events[0].tier, SIM_TIER_GPU);
	assert_int_equal(f.batch.events[1].type, SIM_EV_STORED);
	assert_int_equal(f.batch.events[1].tier, SIM_TIER_CPU);
	assert_int_equal(f.batch.events[1].n, 4);
	assert_int_equal(sim_cache_count(f.cache, SIM_TIER_CPU), 4);
	uint64_t a_ext[4];
	memcpy(a_ext, f.batch.ext, sizeof(a_ext));

	fx_run(&f, b, 4);
	/* GPU evicts A (tail first), CPU has room for B. */
	assert_int_equal(f.batch.n_events, 3);
	assert_int_equal(f.batch.events[0].type, SIM_EV_REMOVED);
	assert_int_equal(f.batch.events[0].tier, SIM_TIER_GPU);
	assert_true(f.batch.removed[0] == a_ext[3]);
	assert_true(f.batch.removed[3] == a_ext[0]);
	assert_int_equal(f.batch.events[2].tier, SIM_TIER_CPU);
	assert_int_equal(sim_cache_count(f.cache, SIM_TIER_CPU), 8);

	/* A misses on GPU, hits on CPU: loaded back, no CPU store. */
	fx_run(&f, a, 4);
	assert_int_equal(f.res.gpu_hit, 0);
	assert_int_equal(f.res.cpu_loaded, 4);
	assert_int_equal(f.batch.n_events, 2);
	assert_int_equal(f.batch.events[0].type, SIM_EV_REMOVED);
	assert_int_equal(f.batch.events[1].type, SIM_EV_STORED);
	assert_int_equal(f.batch.events[1].tier, SIM_TIER_GPU);
	assert_false(f.batch.events[1].has_parent);
	sim_block_info info;
	assert_true(sim_cache_lookup(f.cache, a_ext[2], &info));
	assert_int_equal(info.tiers, SIM_TIER_GPU | SIM_TIER_CPU);

	/* A new request evicts CPU blocks (B's tails) with a CPU remove. */
	uint64_t c[] = {21, 22};
	fx_run(&f, c, 2);
	int cpu_removed = 0;
	for (uint32_t i = 0; i < f.batch.n_events; i++) {
		if (f.batch.events[i].type == SIM_EV_REMOVED &&
		    f.batch.events[i].tier == SIM_TIER_CPU) {
			cpu_removed += (int)f.batch.events[i].n;
		}
	}
	assert_int_equal(cpu_removed, 2);
	assert_int_equal(sim_cache_count(f.cache, SIM_TIER_CPU), 8);
	fx_fini(&f);
}

static void
test_ground_truth_hashes(void **state)
{
	(void)state;
	fixture f;
	fx_init(&f, 32, 0);
	uint64_t ids[] = {3, 1, 4, 1, 5, 9};
	uint32_t *tok = tokens_of(ids, 6);
	sim_batch_reset(&f.batch);
	sim_cache_run(f.cache, &f.batch, tok, 6, &f.res);
	uint64_t local[6], seq[6];
	uint64_t seed = kvi_local_seed(NULL, 0, NULL, 0);
	assert_int_equal(kvi_local_hashes(tok, 6 * BS, BS, seed, local), 6);
	kvi_seq_hashes(KVI_SEQ_ROOT, local, 6, seq);
	for (int i = 0; i < 6; i++) {
		sim_block_info info;
		assert_true(f.batch.local[i] == local[i]);
		assert_true(f.batch.seq[i] == seq[i]);
		assert_true(sim_cache_lookup(f.cache, f.batch.ext[i], &info));
		assert_true(info.local_hash == local[i]);
		assert_true(info.seq_hash == seq[i]);
		assert_int_equal(info.depth, i);
		assert_int_equal(info.has_parent, i > 0);
		if (i > 0) {
			assert_true(info.parent == f.batch.ext[i - 1]);
		}
		assert_true(f.batch.ext[i] ==
			    sim_external_hash(7, i > 0,
					      i > 0 ? f.batch.ext[i - 1] : 0,
					      tok + i * BS, BS));
	}
	/* Tokens appear in the batch as given. */
	assert_memory_equal(f.batch.tokens, tok, 6 * BS * sizeof(uint32_t));
	kvi_free(tok);
	fx_fini(&f);
}

static void
test_clear_and_several_requests_per_batch(void **state)
{
	(void)state;
	fixture f;
	fx_init(&f, 16, 0);
	uint64_t a[] = {1, 2};
	uint64_t b[] = {1, 3};
	uint32_t *ta = tokens_of(a, 2), *tb = tokens_of(b, 2);
	sim_request_result ra, rb;
	sim_batch_reset(&f.batch);
	sim_cache_run(f.cache, &f.batch, ta, 2, &ra);
	sim_cache_run(f.cache, &f.batch, tb, 2, &rb);
	assert_int_equal(f.batch.n_events, 2);
	assert_int_equal(rb.first_block, 2);
	assert_int_equal(rb.gpu_hit, 1);
	assert_true(f.batch.events[1].parent == f.batch.ext[0]);
	assert_int_equal(f.batch.events[1].first, 3);

	sim_batch_reset(&f.batch);
	sim_cache_clear(f.cache, &f.batch);
	assert_int_equal(f.batch.n_events, 1);
	assert_int_equal(f.batch.events[0].type, SIM_EV_CLEARED);
	assert_int_equal(sim_cache_count(f.cache, SIM_TIER_GPU), 0);
	size_t n;
	assert_null(sim_cache_snapshot(f.cache, &n));
	assert_int_equal(n, 0);
	/* After a clear everything is stored again from the root. */
	fx_run(&f, a, 2);
	assert_int_equal(f.res.stored, 2);
	assert_false(f.batch.events[0].has_parent);
	kvi_free(ta);
	kvi_free(tb);
	fx_fini(&f);
}

/* ---- keyed requests --------------------------------------------- */

/* ramp writes n blocks of tokens base, base + 1, ... */
static void
ramp(uint32_t *tok, size_t n, uint32_t base)
{
	for (size_t i = 0; i < n * BS; i++) {
		tok[i] = base + (uint32_t)i;
	}
}

/* check_truth asserts that the request's local and sequence hashes are
 * hash.h's for the prompt tokens[0..n blocks) under keys, in the batch
 * and in the cache. */
static void
check_truth(const fixture *f, const uint32_t *tok, size_t n,
	    const kvi_prompt_keys *keys)
{
	kvi_prompt_keys none = {0};
	kvi_xbuf x = {0};
	uint64_t local[16], seq[16];
	assert_true(n <= 16);
	kvi_prompt_hashes(tok, n * BS, BS, keys ? keys : &none, &x, local);
	kvi_xbuf_fini(&x);
	kvi_seq_hashes(KVI_SEQ_ROOT, local, n, seq);
	for (size_t i = 0; i < n; i++) {
		uint32_t k = f->res.first_block + (uint32_t)i;
		sim_block_info info;
		assert_true(f->batch.local[k] == local[i]);
		assert_true(f->batch.seq[k] == seq[i]);
		assert_true(sim_cache_lookup(f->cache, f->batch.ext[k], &info));
		assert_true(info.local_hash == local[i]);
		assert_true(info.seq_hash == seq[i]);
	}
}

/* plain_from asserts that block i of the request hashes as a block
 * without keys under its parent. */
static bool
plain_from(const fixture *f, const uint32_t *tok, uint32_t i)
{
	uint32_t k = f->res.first_block + i;
	return f->batch.ext[k] ==
	       sim_external_hash(7, i > 0, i > 0 ? f->batch.ext[k - 1] : 0,
				 tok + (size_t)i * BS, BS);
}

static void
test_keyed_external_hashes(void **state)
{
	(void)state;
	fixture f;
	fx_init(&f, 64, 0);
	uint32_t tok[3 * BS];
	ramp(tok, 3, 500);
	uint64_t plain[3], s1[3], s2[3], lora[3];
	fx_run_keyed(&f, tok, 3, NULL);
	memcpy(plain, f.batch.ext, sizeof(plain));
	for (uint32_t i = 0; i < 3; i++) {
		assert_true(plain_from(&f, tok, i));
	}
	/* empty keys are no keys: the same blocks, all hit */
	kvi_prompt_keys empty = {.cache_salt = "", .lora_name = ""};
	fx_run_keyed(&f, tok, 3, &empty);
	assert_int_equal(f.res.gpu_hit, 3);
	assert_int_equal(f.batch.n_events, 0);

	kvi_prompt_keys k1 = {.cache_salt = "s1", .salt_len = 2};
	kvi_prompt_keys k2 = {.cache_salt = "s2", .salt_len = 2};
	kvi_prompt_keys kl = {.lora_name = "ad", .lora_len = 2};
	fx_run_keyed(&f, tok, 3, &k1);
	assert_int_equal(f.res.stored, 3);
	memcpy(s1, f.batch.ext, sizeof(s1));
	check_truth(&f, tok, 3, &k1);
	/* the salt is a key of block 0 alone; later blocks differ through
	 * the parent only */
	assert_false(plain_from(&f, tok, 0));
	assert_true(plain_from(&f, tok, 1) && plain_from(&f, tok, 2));
	assert_int_equal(f.batch.xkey_start[1], 1);
	assert_int_equal(f.batch.xkey_start[3], 1);
	fx_run_keyed(&f, tok, 3, &k2);
	assert_int_equal(f.res.stored, 3);
	memcpy(s2, f.batch.ext, sizeof(s2));
	fx_run_keyed(&f, tok, 3, &kl);
	assert_int_equal(f.res.stored, 3);
	memcpy(lora, f.batch.ext, sizeof(lora));
	check_truth(&f, tok, 3, &kl);
	/* the LoRA name is a key of every block */
	for (uint32_t i = 0; i < 3; i++) {
		assert_false(plain_from(&f, tok, i));
		assert_int_equal(f.batch.xkey_start[i + 1], i + 1);
		assert_true(plain[i] != s1[i] && plain[i] != s2[i] &&
			    s1[i] != s2[i] && lora[i] != plain[i] &&
			    lora[i] != s1[i]);
	}
	/* the same salt again: the same blocks */
	fx_run_keyed(&f, tok, 3, &k1);
	assert_int_equal(f.res.gpu_hit, 3);
	fx_fini(&f);
}

static void
test_keyed_continuation(void **state)
{
	(void)state;
	fixture f;
	fx_init(&f, 64, 0);
	uint32_t tok[5 * BS];
	ramp(tok, 5, 900);
	kvi_prompt_keys k = {.cache_salt = "tenant", .salt_len = 6};
	fx_run_keyed(&f, tok, 2, &k);
	uint64_t head[2];
	memcpy(head, f.batch.ext, sizeof(head));
	/* the prompt extended: the event starts at block 2 with a parent,
	 * its keys (none) follow the blocks' positions in the request */
	fx_run_keyed(&f, tok, 5, &k);
	assert_int_equal(f.res.gpu_hit, 2);
	assert_int_equal(f.batch.n_events, 1);
	const sim_event *ev = &f.batch.events[0];
	assert_true(ev->has_parent && ev->parent == head[1]);
	assert_int_equal(ev->first, 2);
	assert_int_not_equal(ev->req, SIM_NO_KEYS);
	assert_int_equal(f.batch.xkey_start[2], f.batch.xkey_start[5]);
	assert_true(plain_from(&f, tok, 2));
	check_truth(&f, tok, 5, &k);
	/* block 0's salt reaches block 4 through the chain: unsalted, the
	 * whole prompt is another one */
	uint64_t salted_tail = f.batch.ext[4];
	fx_run_keyed(&f, tok, 5, NULL);
	assert_int_equal(f.res.gpu_hit, 0);
	assert_true(f.batch.ext[4] != salted_tail);
	fx_fini(&f);
}

static void
test_mm_items_per_block(void **state)
{
	(void)state;
	fixture f;
	fx_init(&f, 64, 0);
	uint32_t tok[6 * BS];
	ramp(tok, 6, 40);
	/* an image over tokens 6..13 (blocks 1-3), another at 20..21 */
	kvi_mm_item a[2] = {{"img-a", 5, 6, 8}, {"img-c", 5, 20, 2}};
	kvi_mm_item b[2] = {{"img-b", 5, 6, 8}, {"img-c", 5, 20, 2}};
	kvi_prompt_keys ka = {.lora_name = "L",
			      .lora_len = 1,
			      .mm = a,
			      .n_mm = 2,
			      .cache_salt = "s",
			      .salt_len = 1};
	kvi_prompt_keys kb = ka;
	kb.mm = b;
	fx_run_keyed(&f, tok, 6, &ka);
	uint64_t ea[6];
	memcpy(ea, f.batch.ext, sizeof(ea));
	check_truth(&f, tok, 6, &ka);
	/* vLLM's order: LoRA, items, the salt on block 0 */
	const sim_xkey *x = f.batch.xkeys;
	const uint32_t *st = f.batch.xkey_start;
	assert_int_equal(st[1] - st[0], 2); /* L, s */
	assert_int_equal(x[1].kind, KVI_XKEY_STR);
	assert_string_equal(sim_batch_str(&f.batch, x[1].off), "s");
	assert_int_equal(st[2] - st[1], 2); /* L, (img-a, 2) */
	assert_int_equal(x[st[1] + 1].kind, KVI_XKEY_MM);
	assert_int_equal(x[st[1] + 1].offset, 2);
	assert_int_equal(st[4] - st[3], 2); /* L, (img-a, -6) */
	assert_int_equal(x[st[3] + 1].offset, -6);
	assert_int_equal(st[5] - st[4], 1); /* L */
	assert_int_equal(st[6] - st[5], 2); /* L, (img-c, 0) */
	assert_string_equal(sim_batch_str(&f.batch, x[st[5] + 1].off), "img-c");
	/* another image over equal tokens: block 0 is shared, block 1 on
	 * differ */
	fx_run_keyed(&f, tok, 6, &kb);
	assert_int_equal(f.res.gpu_hit, 1);
	for (int i = 1; i < 6; i++) {
		assert_true(f.batch.ext[i] != ea[i]);
	}
	check_truth(&f, tok, 6, &kb);
	fx_fini(&f);
}

/* ---- offload ------------------------------------------------------ */

static const sim_event *
find_event(const sim_batch *b, sim_event_type type, unsigned tier)
{
	for (uint32_t i = 0; i < b->n_events; i++) {
		if (b->events[i].type == type && b->events[i].tier == tier) {
			return &b->events[i];
		}
	}
	return NULL;
}

static void
test_offload_events(void **state)
{
	(void)state;
	fixture f;
	fx_setup(&f, 4, 16, true);
	uint64_t a[] = {1, 2, 3, 4}, b[] = {11, 12, 13, 14};
	fx_run(&f, a, 4);
	uint64_t a_ext[4];
	memcpy(a_ext, f.batch.ext, sizeof(a_ext));
	const sim_event *cpu =
	    find_event(&f.batch, SIM_EV_STORED, SIM_TIER_CPU);
	assert_non_null(cpu);
	assert_true(cpu->offload);
	assert_int_equal(cpu->n, 4);
	assert_int_equal(f.batch.events[0].tier, SIM_TIER_GPU);
	assert_false(f.batch.events[0].offload);
	assert_int_equal(cpu->first, f.batch.events[0].first);
	assert_false(cpu->has_parent); /* A's root: nothing before it */

	/* B evicts A from GPU; A's CPU copy stays */
	fx_run(&f, b, 4);
	const sim_event *rm =
	    find_event(&f.batch, SIM_EV_REMOVED, SIM_TIER_GPU);
	assert_non_null(rm);
	assert_int_equal(rm->n, 4);
	assert_null(find_event(&f.batch, SIM_EV_REMOVED, SIM_TIER_CPU));
	sim_block_info info;
	assert_true(sim_cache_lookup(f.cache, a_ext[0], &info));
	assert_int_equal(info.tiers, SIM_TIER_CPU);
	/* the offloaded blocks are named by a stored event of the batch
	 * before the offload: the indexer knows them by hash */
	assert_true(f.batch.events[1].type == SIM_EV_STORED &&
		    f.batch.events[1].tier == SIM_TIER_GPU &&
		    f.batch.events[2].offload &&
		    f.batch.events[2].first == f.batch.events[1].first);

	/* A on CPU only: loaded back with tokens, no new offload */
	fx_run(&f, a, 4);
	assert_int_equal(f.res.cpu_loaded, 4);
	assert_null(find_event(&f.batch, SIM_EV_STORED, SIM_TIER_CPU));
	const sim_event *load =
	    find_event(&f.batch, SIM_EV_STORED, SIM_TIER_GPU);
	assert_false(load->offload);
	assert_int_equal(load->n, 4);
	assert_true(sim_cache_lookup(f.cache, a_ext[3], &info));
	assert_int_equal(info.tiers, SIM_TIER_GPU | SIM_TIER_CPU);

	/* the CPU fills up: CPU removals, still prefix-closed */
	for (uint64_t r = 0; r < 6; r++) {
		uint64_t c[] = {100 + 4 * r, 101 + 4 * r, 102 + 4 * r};
		fx_run(&f, c, 3);
	}
	assert_non_null(find_event(&f.batch, SIM_EV_REMOVED, SIM_TIER_CPU));
	assert_int_equal(sim_cache_count(f.cache, SIM_TIER_CPU), 16);
	size_t n;
	sim_block_info *blocks = sim_cache_snapshot(f.cache, &n);
	for (size_t i = 0; i < n; i++) {
		sim_block_info p;
		assert_true(!blocks[i].has_parent ||
			    (sim_cache_lookup(f.cache, blocks[i].parent, &p) &&
			     (p.tiers & blocks[i].tiers) == blocks[i].tiers));
	}
	kvi_free(blocks);
	fx_fini(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prefix_hit),
	    cmocka_unit_test(test_same_prefix_same_hashes),
	    cmocka_unit_test(test_lru_evicts_tails_first),
	    cmocka_unit_test(test_capacity_and_truncation),
	    cmocka_unit_test(test_no_orphans_and_events_match_state),
	    cmocka_unit_test(test_cpu_write_through_and_load_back),
	    cmocka_unit_test(test_ground_truth_hashes),
	    cmocka_unit_test(test_clear_and_several_requests_per_batch),
	    cmocka_unit_test(test_keyed_external_hashes),
	    cmocka_unit_test(test_keyed_continuation),
	    cmocka_unit_test(test_mm_items_per_block),
	    cmocka_unit_test(test_offload_events),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
