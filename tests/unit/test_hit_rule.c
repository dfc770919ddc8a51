/*
 * test_hit_rule.c - the engine's hit rule for hybrid models
 * (shard/index/hit_rule.h) against the cases of vLLM's own tests and the
 * lines of its source each rule follows. A case names the vLLM test it
 * mirrors (tests/v1/core/...) or, where vLLM has no test for it, the
 * source function and the lines it exercises. Held blocks are written as
 * strings, one digit per hash block: '0' not held, else that tier mask.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hit_rule.h"

#define FULL  KVX_KIND_FULL
#define SW    KVX_KIND_SLIDING
#define CHUNK KVX_KIND_CHUNKED
#define MAMBA KVX_KIND_MAMBA
#define NONE  KVX_KIND_NONE

/* held_of: the blocks of s in a buffer of its own (slot 0..7). */
static const uint8_t *
held_of(int slot, const char *s)
{
	static uint8_t buf[8][1024];
	size_t n = strlen(s);
	assert_true(n <= sizeof(buf[0]));
	for (size_t i = 0; i < n; i++) {
		buf[slot][i] = (uint8_t)(s[i] - '0');
	}
	return buf[slot];
}

static kvx_hit_group
grp(kvx_kind k, uint32_t ratio, uint32_t window, const uint8_t *held)
{
	return (kvx_hit_group){
	    .kind = k, .ratio = ratio, .window = window, .held = held};
}

/* one: a single group (vLLM's unitary coordinator), tier mask 1. */
static uint32_t
one(kvx_kind k, uint32_t ratio, uint32_t window, const char *held, uint32_t bs,
    uint32_t n)
{
	kvx_hit_group g = grp(k, ratio, window, held_of(7, held));
	return kvx_hit(&g, 1, bs, n, 1);
}

/* kv_cache_interface.py: KVCacheSpecKind's values, and the manager
 * register_all_kvcache_specs gives each spec (MLA and sink full attention
 * are FullAttentionManager, sliding_window_mla SlidingWindowManager). */
static void
test_kind_parse(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		kvx_kind k;
	} known[] = {
	    {"full_attention", FULL},
	    {"mla_attention", FULL},
	    {"sink_full_attention", FULL},
	    {"sliding_window", SW},
	    {"sliding_window_mla", SW},
	    {"chunked_local_attention", CHUNK},
	    {"mamba", MAMBA},
	    {"encoder_only_attention", NONE},
	    {"cross_attention", NONE},
	    {"unknown", NONE},
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		char buf[64];
		size_t len = strlen(known[i].s);
		memcpy(buf, known[i].s, len);
		memcpy(buf + len, "_xyz", 5); /* not NUL-terminated at len */
		kvx_kind k = (kvx_kind)99;
		assert_true(kvx_kind_parse(buf, len, &k));
		assert_int_equal(k, known[i].k);
		assert_false(kvx_kind_parse(buf, len + 2, &k));
	}
	kvx_kind k = FULL;
	assert_false(kvx_kind_parse("full", 4, &k));
	assert_false(kvx_kind_parse("Mamba", 5, &k));
	assert_false(kvx_kind_parse("", 0, &k));
	assert_false(kvx_kind_parse(NULL, 0, &k));
	assert_string_equal(kvx_kind_name(FULL), "full_attention");
	assert_string_equal(kvx_kind_name(SW), "sliding_window");
	assert_string_equal(kvx_kind_name(CHUNK), "chunked_local_attention");
	assert_string_equal(kvx_kind_name(MAMBA), "mamba");
	assert_string_equal(kvx_kind_name(NONE), "unknown");
	for (int i = FULL; i <= NONE; i++) {
		const char *s = kvx_kind_name((kvx_kind)i);
		assert_true(kvx_kind_parse(s, strlen(s), &k));
		assert_int_equal(k, i);
	}
}

/* An empty prompt, no groups, no block size: nothing to hit, whatever the
 * kind (chunked local attention included, which otherwise counts blocks
 * before its chunk as hit: see test_chunked_possible_cached_prefix). */
static void
test_empty(void **state)
{
	(void)state;
	kvx_kind kinds[] = {FULL, SW, CHUNK, MAMBA, NONE};
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(one(kinds[i], 1, 4, "1111", 2, 0), 0);
	}
	kvx_hit_group g = grp(FULL, 1, 0, held_of(0, "1111"));
	assert_int_equal(kvx_hit(&g, 0, 16, 4, 1), 0);
	assert_int_equal(kvx_hit(NULL, 1, 16, 4, 1), 0);
	assert_int_equal(kvx_hit(&g, 1, 0, 4, 1), 0);
	g.held = NULL;
	assert_int_equal(kvx_hit(&g, 1, 16, 4, 1), 0);
}

/* test_prefix_caching.py::test_prefill (3 cached blocks hit) and
 * FullAttentionManager.find_longest_cache_hit, phase 1: "A missing block
 * implies every later block misses too", then round down to the
 * alignment (a group block of 2 hash blocks is the alignment alone). */
static void
test_full_prefix_run(void **state)
{
	(void)state;
	assert_int_equal(one(FULL, 1, 0, "111", 16, 3), 3);
	assert_int_equal(one(FULL, 1, 0, "0111", 16, 4), 0);
	assert_int_equal(one(FULL, 1, 0, "1101", 16, 4), 2);
	assert_int_equal(one(FULL, 1, 0, "1111", 16, 2), 2);
	assert_int_equal(one(FULL, 2, 0, "111111", 16, 6), 6);
	assert_int_equal(one(FULL, 2, 0, "111101", 16, 6), 4);
	assert_int_equal(one(FULL, 2, 0, "11111", 16, 5), 4);
}

/* test_single_type_kv_cache_manager.py::
 * test_sliding_window_possible_cached_prefix: block 2, window 4, so
 * cdiv(4 - 1, 2) = 2 contiguous blocks; max_length = len * block_size. */
static void
test_sliding_possible_cached_prefix(void **state)
{
	(void)state;
	static const struct {
		const char *held;
		uint32_t want;
	} cases[] = {
	    {"0000000000", 0},  {"1", 1},
	    {"10", 1},          {"11", 2},
	    {"110", 2},         {"111", 3},
	    {"1110", 3},        {"110100110111", 12},
	    {"11010011000", 8}, {"110100110001", 8},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t n = (uint32_t)strlen(cases[i].held);
		assert_int_equal(one(SW, 1, 4, cases[i].held, 2, n),
				 cases[i].want);
	}
}

/* SlidingWindowManager._contiguous_blocks_for_hit: cdiv(window - 1,
 * block_size) blocks, not window / block_size; its docstring's example
 * (block 4, window 8: [NULL, NULL, 7, 8]). A window of 1 needs no block
 * before the hit point, but the scan still ends only on a held one. */
static void
test_sliding_window_blocks(void **state)
{
	(void)state;
	assert_int_equal(one(SW, 1, 17, "0001", 16, 4), 4);
	assert_int_equal(one(SW, 1, 18, "0001", 16, 4), 0);
	assert_int_equal(one(SW, 1, 16, "0001", 16, 4), 4);
	assert_int_equal(one(SW, 1, 33, "0011", 16, 4), 4);
	assert_int_equal(one(SW, 1, 34, "0011", 16, 4), 0);
	assert_int_equal(one(SW, 1, 8, "0011", 4, 4), 4);
	assert_int_equal(one(SW, 1, 1, "0100", 16, 4), 2);
	assert_int_equal(one(SW, 1, 1, "0000", 16, 4), 0);
}

/* SlidingWindowManager.find_longest_cache_hit, "if not match_found: The
 * first num_contiguous_blocks is a cache hit": block 4, window 12, so 3
 * blocks. Blocks evicted outside the window do not matter
 * (test_prefix_caching.py::test_prefill_hybrid_model, "Evict the blocks
 * outside sliding window, does not affect the hit length"). */
static void
test_sliding_run_from_start(void **state)
{
	(void)state;
	assert_int_equal(one(SW, 1, 12, "11000", 4, 5), 2);
	assert_int_equal(one(SW, 1, 12, "11011", 4, 5), 2);
	assert_int_equal(one(SW, 1, 12, "11101", 4, 5), 3);
	assert_int_equal(one(SW, 1, 12, "10111", 4, 5), 5);
	assert_int_equal(one(SW, 1, 12, "01111", 4, 5), 5);
	assert_int_equal(one(SW, 1, 12, "00000", 4, 5), 0);
}

/* test_single_type_kv_cache_manager.py::
 * test_chunked_local_attention_possible_cached_prefix, the tail_token = 0
 * cases: block 2, chunk 4. Blocks before the chunk max_length falls in
 * count as hit held or not ("we marked blocks out of window as computed
 * with null blocks"), so a chunked group alone hits with nothing cached. */
static void
test_chunked_possible_cached_prefix(void **state)
{
	(void)state;
	static const struct {
		const char *held;
		uint32_t want;
	} cases[] = {
	    {"1", 1},           {"10", 2},          {"11", 2},
	    {"110", 2},         {"111", 3},         {"1110", 4},
	    {"1010110110", 10}, {"0110100101", 10}, {"1111111100", 10},
	    {"000000001", 9},   {"000000000", 8},   {"0000000000", 10},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t n = (uint32_t)strlen(cases[i].held);
		assert_int_equal(one(CHUNK, 1, 4, cases[i].held, 2, n),
				 cases[i].want);
	}
}

/* The header's decision: a chunk size of 0 (events do not carry it), or a
 * sliding window of 0, is judged as full attention. Against the same held
 * blocks the known window gives more (ChunkedLocalAttentionManager: block
 * 4, chunk 8, max 16 tokens: 4 null blocks). */
static void
test_unknown_window_judged_full(void **state)
{
	(void)state;
	assert_int_equal(one(CHUNK, 1, 0, "1011", 4, 4), 1);
	assert_int_equal(one(CHUNK, 1, 8, "1011", 4, 4), 4);
	assert_int_equal(one(SW, 1, 0, "0111", 4, 4), 0);
	assert_int_equal(one(SW, 1, 8, "0111", 4, 4), 4);
}

/* MambaManager.find_longest_cache_hit, block-aligned path: "Search from
 * right to left and early stop when a match is found"; a group block is
 * held when both its hash blocks are. */
static void
test_mamba_last_block(void **state)
{
	(void)state;
	assert_int_equal(one(MAMBA, 1, 0, "01010", 16, 5), 4);
	assert_int_equal(one(MAMBA, 1, 0, "01010", 16, 3), 2);
	assert_int_equal(one(MAMBA, 1, 0, "00000", 16, 5), 0);
	assert_int_equal(one(MAMBA, 2, 0, "110011", 16, 6), 6);
	assert_int_equal(one(MAMBA, 2, 0, "111100", 16, 6), 4);
	assert_int_equal(one(MAMBA, 2, 0, "111110", 16, 6), 4);
}

/* MambaManager.find_longest_cache_hit: "if block_size != alignment_tokens
 * and (i + 1) * block_size % alignment_tokens != 0: continue". Full
 * attention of 3 hash blocks and Mamba of 2 align to 6: the Mamba state
 * ending at 10 is skipped for the one ending at 6. */
static void
test_mamba_alignment(void **state)
{
	(void)state;
	kvx_hit_group g[2] = {
	    grp(FULL, 3, 0, held_of(0, "111111111111")),
	    grp(MAMBA, 2, 0, held_of(1, "000011001100")),
	};
	assert_int_equal(kvx_hit(g, 2, 16, 12, 1), 6);
	g[1].held = held_of(1, "000011001111");
	assert_int_equal(kvx_hit(g, 2, 16, 12, 1), 12);
	assert_int_equal(one(MAMBA, 2, 0, "000011001100", 16, 12), 10);
}

/* test_prefix_caching.py::test_prefill_hybrid_model: full attention and
 * two sliding window groups of one spec (block 16, window 32), a 3-block
 * prompt, and its evictions, each with its expected hit. */
static void
test_full_sliding(void **state)
{
	(void)state;
	static const struct {
		const char *full, *sw1, *sw2;
		uint32_t want;
	} cases[] = {
	    {"111", "111", "111", 3}, /* cache hit in the common prefix */
	    {"111", "011", "011", 3}, /* evict outside the window */
	    {"011", "111", "111", 0}, /* evict full attention's first */
	    {"110", "110", "110", 2}, /* evict the last block of all */
	    {"110", "111", "111", 2}, /* ... of full attention */
	    {"111", "110", "111", 2}, /* ... of one sliding window */
	    {"111", "111", "110", 2}, /* ... of the other */
	    {"110", "011", "011", 0}, /* hits 1 and 2 blocks: a miss */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kvx_hit_group g[3] = {
		    grp(FULL, 1, 0, held_of(0, cases[i].full)),
		    grp(SW, 1, 32, held_of(1, cases[i].sw1)),
		    grp(SW, 1, 32, held_of(2, cases[i].sw2)),
		};
		assert_int_equal(kvx_hit(g, 3, 16, 3, 1), cases[i].want);
	}
}

/* test_prefix_caching.py::test_prefill_hybrid_model_combinations,
 * "2g-full+mamba" (3 blocks hit), and evictions: the simple hybrid takes
 * the last Mamba state within full attention's run. */
static void
test_full_mamba(void **state)
{
	(void)state;
	static const struct {
		const char *full, *mamba;
		uint32_t want;
	} cases[] = {
	    {"111", "111", 3},
	    {"111", "110", 2},
	    {"100", "111", 1},
	    {"110", "001", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kvx_hit_group g[2] = {
		    grp(FULL, 1, 0, held_of(0, cases[i].full)),
		    grp(MAMBA, 1, 0, held_of(1, cases[i].mamba)),
		};
		assert_int_equal(kvx_hit(g, 2, 16, 3, 1), cases[i].want);
	}
}

/* test_prefix_caching.py::test_different_block_size: hash block 16, full
 * attention of 32 tokens, sliding window of 16 (window 32), 7 hash blocks
 * (112 tokens): 96 tokens hit; with the window's blocks 5 and 6 evicted,
 * "should return 4 * 16 because full attention cache hit length must be a
 * multiple of 32". Then SlidingWindowManager's "Skip prefix matching check
 * if the block is not aligned with alignment_tokens": a window of one
 * block held at 5 (unaligned) and 2 takes 2. */
static void
test_mixed_block_sizes(void **state)
{
	(void)state;
	kvx_hit_group g[2] = {
	    grp(FULL, 2, 0, held_of(0, "1111110")),
	    grp(SW, 1, 32, held_of(1, "1111110")),
	};
	assert_int_equal(kvx_hit(g, 2, 16, 7, 1), 6);
	g[1].held = held_of(1, "1111100");
	assert_int_equal(kvx_hit(g, 2, 16, 7, 1), 4);

	g[0].held = held_of(0, "111111");
	g[1] = grp(SW, 1, 16, held_of(1, "010010"));
	assert_int_equal(kvx_hit(g, 2, 16, 6, 1), 2);
	g[1].held = held_of(1, "000011");
	assert_int_equal(kvx_hit(g, 2, 16, 6, 1), 6);
}

/* test_prefix_caching.py::
 * test_hybrid_local_kv_retention_interval_survives_recycling's groups:
 * hash block 4, MLA of 256 tokens, sliding windows 512 (64-token blocks),
 * 128 (8) and 8 (4); a 1800-token replay. Dense, the hit is the last
 * 256-token boundary (448 hash blocks); when each window holds only the
 * tail ending at 1024 tokens, the hit is 1024 tokens (its 4, 16, 128, 256
 * group blocks). */
static void
test_mixed_block_sizes_sparse(void **state)
{
	(void)state;
	static uint8_t full[1024], w512[1024], w128[1024], w8[1024];
	memset(full, 1, sizeof(full));
	memset(w512, 1, sizeof(w512));
	memset(w128, 1, sizeof(w128));
	memset(w8, 1, sizeof(w8));
	kvx_hit_group g[4] = {
	    grp(FULL, 64, 0, full),
	    grp(SW, 16, 512, w512),
	    grp(SW, 2, 128, w128),
	    grp(SW, 1, 8, w8),
	};
	assert_int_equal(kvx_hit(g, 4, 4, 450, 1), 448);
	memset(w512, 0, sizeof(w512));
	memset(w128, 0, sizeof(w128));
	memset(w8, 0, sizeof(w8));
	memset(w512 + 128, 1, 128); /* 8 blocks of 64 tokens */
	memset(w128 + 224, 1, 32);  /* 16 blocks of 8 tokens */
	memset(w8 + 254, 1, 2);     /* 2 blocks of 4 tokens */
	assert_int_equal(kvx_hit(g, 4, 4, 450, 1), 256);
	w8[254] = 0;
	assert_int_equal(kvx_hit(g, 4, 4, 450, 1), 0);
}

/* HybridKVCacheCoordinator.verify_and_split_kv_cache_groups: groups of one
 * spec are looked up together, and BlockPool.get_cached_block returns a
 * block only if every group id holds it. Two sliding window groups of one
 * spec share only blocks 0 and 3: 1 block, where alone they hit 2 and 4.
 * Different windows are different specs:
 * test_hybrid_kv_cache_coordinator.py::
 * test_partial_cache_hit_different_sliding_windows (windows 64 and 32,
 * block 16, block 2 of the 32 one evicted: 32 tokens). */
static void
test_same_spec_together(void **state)
{
	(void)state;
	kvx_hit_group g[3] = {
	    grp(SW, 1, 32, held_of(0, "1101")),
	    grp(SW, 1, 32, held_of(1, "1011")),
	};
	assert_int_equal(kvx_hit(g, 2, 16, 4, 1), 1);
	assert_int_equal(kvx_hit(&g[0], 1, 16, 4, 1), 2);
	assert_int_equal(kvx_hit(&g[1], 1, 16, 4, 1), 4);

	g[0] = grp(FULL, 1, 0, held_of(0, "1111"));
	g[1] = grp(SW, 1, 64, held_of(1, "1111"));
	g[2] = grp(SW, 1, 32, held_of(2, "1111"));
	assert_int_equal(kvx_hit(g, 3, 16, 4, 1), 4);
	g[2].held = held_of(2, "1101");
	assert_int_equal(kvx_hit(g, 3, 16, 4, 1), 2);
}

/* HybridKVCacheCoordinator.find_longest_cache_hit: "If any type reduces
 * the length, restart checks over all types", except for the simple
 * hybrid ("1 full attn + 1 other: one iteration suffices").
 * test_prefix_caching.py's "2g-sw+mamba" groups need three rounds here:
 * 6, 4, then 2. Full attention and chunked local attention (block 4,
 * chunk 6) stop after one round at 4; with a third spec the rounds go on
 * to 3. */
static void
test_rounds(void **state)
{
	(void)state;
	kvx_hit_group g[3] = {
	    grp(SW, 1, 32, held_of(0, "111011")),
	    grp(MAMBA, 1, 0, held_of(1, "010100")),
	};
	assert_int_equal(kvx_hit(g, 2, 16, 6, 1), 2);

	g[0] = grp(FULL, 1, 0, held_of(0, "11111"));
	g[1] = grp(CHUNK, 1, 6, held_of(1, "11100"));
	assert_int_equal(kvx_hit(g, 2, 4, 5, 1), 4);
	g[2] = grp(MAMBA, 1, 0, held_of(2, "11111"));
	assert_int_equal(kvx_hit(g, 3, 4, 5, 1), 3);
}

/* NONE groups: never looked up (CrossAttentionManager is not, and
 * verify_and_split_kv_cache_groups skips specs that are not
 * prefix_cacheable); none but NONE: 0. Their block still enters the
 * scheduler block (KVCacheCoordinator.__init__ asserts it divides it), and
 * a second group makes get_kv_cache_coordinator pick the hybrid
 * coordinator: the chunked case of test_rounds, alone, is one manager call
 * (4); with a NONE group beside it the rounds run (3). */
static void
test_none_groups(void **state)
{
	(void)state;
	kvx_hit_group g[2] = {
	    grp(FULL, 1, 0, held_of(0, "1111")),
	    grp(NONE, 1, 0, NULL),
	};
	assert_int_equal(kvx_hit(g, 2, 16, 4, 1), 4);
	assert_int_equal(kvx_hit(&g[1], 1, 16, 4, 1), 0);
	g[0] = grp(NONE, 1, 0, held_of(0, "1111"));
	assert_int_equal(kvx_hit(g, 2, 16, 4, 1), 0);

	g[0] = grp(FULL, 1, 0, held_of(0, "11111"));
	g[1] = grp(NONE, 2, 0, NULL);
	assert_int_equal(kvx_hit(g, 2, 16, 5, 1), 4);

	g[0] = grp(CHUNK, 1, 6, held_of(0, "11100"));
	assert_int_equal(kvx_hit(g, 1, 4, 5, 1), 4);
	g[1] = grp(NONE, 1, 0, NULL);
	assert_int_equal(kvx_hit(g, 2, 4, 5, 1), 3);
}

/* Tier masks: a block counts when (held & mask) != 0. 1 = GPU, 2 = CPU,
 * 4 = disk. A window held on the CPU only counts for a CPU query. */
static void
test_tier_masks(void **state)
{
	(void)state;
	kvx_hit_group g[2] = {grp(FULL, 1, 0, held_of(0, "1324"))};
	assert_int_equal(kvx_hit(g, 1, 16, 4, 1), 2);
	assert_int_equal(kvx_hit(g, 1, 16, 4, 2), 0);
	assert_int_equal(kvx_hit(g, 1, 16, 4, 3), 3);
	assert_int_equal(kvx_hit(g, 1, 16, 4, 4), 0);
	assert_int_equal(kvx_hit(g, 1, 16, 4, 7), 4);
	assert_int_equal(kvx_hit(g, 1, 16, 4, 0), 0);

	g[0] = grp(FULL, 1, 0, held_of(0, "1111"));
	g[1] = grp(SW, 1, 32, held_of(1, "0022"));
	assert_int_equal(kvx_hit(g, 2, 16, 4, 1), 0);
	assert_int_equal(kvx_hit(g, 2, 16, 4, 2), 0);
	assert_int_equal(kvx_hit(g, 2, 16, 4, 3), 4);
}

/* A long prompt (100k hash blocks): full attention, a 4096-token window
 * (256 blocks of 16) held only at the end, and Mamba; the window's last
 * block lost leaves no window but a 255-block one: 0; a window ending one
 * block earlier hits there. */
static void
test_long_prompt(void **state)
{
	(void)state;
	enum { N = 100000 };
	static uint8_t full[N], win[N], mamba[N];
	memset(full, 1, N);
	memset(mamba, 1, N);
	memset(win, 0, N);
	memset(win + N - 256, 1, 256);
	kvx_hit_group g[3] = {
	    grp(FULL, 1, 0, full),
	    grp(SW, 1, 4096, win),
	    grp(MAMBA, 1, 0, mamba),
	};
	assert_int_equal(kvx_hit(g, 3, 16, N, 1), N);
	win[N - 1] = 0;
	assert_int_equal(kvx_hit(g, 3, 16, N, 1), 0);
	win[N - 257] = 1;
	assert_int_equal(kvx_hit(g, 3, 16, N, 1), N - 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kind_parse),
	    cmocka_unit_test(test_empty),
	    cmocka_unit_test(test_full_prefix_run),
	    cmocka_unit_test(test_sliding_possible_cached_prefix),
	    cmocka_unit_test(test_sliding_window_blocks),
	    cmocka_unit_test(test_sliding_run_from_start),
	    cmocka_unit_test(test_chunked_possible_cached_prefix),
	    cmocka_unit_test(test_unknown_window_judged_full),
	    cmocka_unit_test(test_mamba_last_block),
	    cmocka_unit_test(test_mamba_alignment),
	    cmocka_unit_test(test_full_sliding),
	    cmocka_unit_test(test_full_mamba),
	    cmocka_unit_test(test_mixed_block_sizes),
	    cmocka_unit_test(test_mixed_block_sizes_sparse),
	    cmocka_unit_test(test_same_spec_together),
	    cmocka_unit_test(test_rounds),
	    cmocka_unit_test(test_none_groups),
	    cmocka_unit_test(test_tier_masks),
	    cmocka_unit_test(test_long_prompt),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
