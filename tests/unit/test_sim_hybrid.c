/*
 * Unit tests of the hybrid hit rule (tools/sim/sim_hybrid.h). Most cases
 * are vLLM's own unit tests translated: the blocks each group holds after
 * the test's requests and evictions become the held map, and the hit the
 * test asserts is asserted here, each case citing its vLLM test. The rest
 * sit at and around the rule's boundaries: the n - 1 cap, window sizes
 * around multiples of the block size, holes in sliding-window groups,
 * Mamba states on and off the common block multiple in each cache mode,
 * groups of different block sizes, and the rounds of the fixed point.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sim_hybrid.h"

#define MAX_GROUPS 4
#define MAX_BLOCKS 1024

/* Which blocks each group holds, and the furthest block it was asked
 * about (the rule must never look past the length it was offered). */
typedef struct held_map {
	bool held[MAX_GROUPS][MAX_BLOCKS];
	uint64_t asked_end[MAX_GROUPS];
} held_map;

static bool
map_held(void *arg, size_t group, uint64_t block)
{
	held_map *m = arg;
	assert_true(group < MAX_GROUPS);
	assert_true(block < MAX_BLOCKS);
	if (block + 1 > m->asked_end[group]) {
		m->asked_end[group] = block + 1;
	}
	return m->held[group][block];
}

static void
map_clear(held_map *m)
{
	memset(m, 0, sizeof(*m));
}

/* hold marks blocks [from, to) of group g held. */
static void
hold(held_map *m, size_t g, uint64_t from, uint64_t to)
{
	for (uint64_t b = from; b < to; b++) {
		m->held[g][b] = true;
	}
}

/* hold_pattern marks block i of group g held when pattern[i] is 'T'. */
static void
hold_pattern(held_map *m, size_t g, const char *pattern)
{
	for (size_t i = 0; pattern[i] != '\0'; i++) {
		m->held[g][i] = pattern[i] == 'T';
	}
}

static sim_group_spec
full(uint32_t bs)
{
	return (sim_group_spec){.kind = SIM_GROUP_FULL, .block_size = bs};
}

static sim_group_spec
mla(uint32_t bs)
{
	return (sim_group_spec){.kind = SIM_GROUP_MLA, .block_size = bs};
}

static sim_group_spec
swa(uint32_t bs, uint32_t window)
{
	return (sim_group_spec){.kind = SIM_GROUP_SLIDING,
				.block_size = bs,
				.sliding_window = window};
}

static sim_group_spec
swa_mla(uint32_t bs, uint32_t window)
{
	return (sim_group_spec){.kind = SIM_GROUP_SLIDING_MLA,
				.block_size = bs,
				.sliding_window = window};
}

static sim_group_spec
chunked(uint32_t bs, uint32_t chunk)
{
	return (sim_group_spec){.kind = SIM_GROUP_CHUNKED_LOCAL,
				.block_size = bs,
				.chunk_size = chunk};
}

static sim_group_spec
mamba(uint32_t bs, sim_mamba_mode mode)
{
	return (sim_group_spec){
	    .kind = SIM_GROUP_MAMBA, .block_size = bs, .mamba_mode = mode};
}

/* hit returns sim_hybrid_hit for a prompt of n tokens and checks that no
 * group was asked about a block ending past n - 1 tokens (the cap). */
static uint64_t
hit(const sim_group_spec *groups, size_t n_groups, held_map *m, uint64_t n)
{
	memset(m->asked_end, 0, sizeof(m->asked_end));
	uint64_t got = sim_hybrid_hit(groups, n_groups, n, map_held, m);
	for (size_t g = 0; g < n_groups; g++) {
		uint64_t limit = n == 0 ? 0 : (n - 1) / groups[g].block_size;
		assert_true(m->asked_end[g] <= limit);
	}
	return got;
}

/* vLLM tests/v1/core/test_single_type_kv_cache_manager.py::
 * test_sliding_window_possible_cached_prefix: block 2, window 4, offered
 * every block of the chain, aligned to the block. */
static void
test_sliding_window_possible_cached_prefix(void **state)
{
	(void)state;
	static const struct {
		const char *cached;
		uint64_t blocks;
	} cases[] = {
	    {"FFFFFFFFFF", 0},  {"T", 1},
	    {"TF", 1},          {"TT", 2},
	    {"TTF", 2},         {"TTT", 3},
	    {"TTTF", 3},        {"TTFTFFTTFTTT", 12},
	    {"TTFTFFTTFFF", 8}, {"TTFTFFTTFFFT", 8},
	};
	sim_group_spec s = swa(2, 4);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		held_map m;
		map_clear(&m);
		hold_pattern(&m, 0, cases[i].cached);
		uint64_t max = strlen(cases[i].cached) * 2;
		assert_int_equal(
		    sim_hybrid_group_hit(&s, 0, max, 2, map_held, &m),
		    cases[i].blocks * 2);
	}
}

/* vLLM tests/v1/core/test_single_type_kv_cache_manager.py::
 * test_chunked_local_attention_possible_cached_prefix: block 2, chunk 4,
 * offered the chain plus 0 or 1 token. The test draws the first 8
 * blocks at random (they are before the chunk and never matter); here
 * each of three fixed prefixes stands for them. */
static void
test_chunked_local_attention_possible_cached_prefix(void **state)
{
	(void)state;
	static const struct {
		const char *cached;
		uint64_t tail;
		uint64_t blocks;
	} short_cases[] =
	    {
		{"T", 0, 1},   {"T", 1, 1},   {"TF", 0, 2},   {"TF", 1, 2},
		{"TT", 0, 2},  {"TT", 1, 2},  {"TTF", 0, 2},  {"TTF", 1, 2},
		{"TTT", 0, 3}, {"TTT", 1, 3}, {"TTTF", 0, 4}, {"TTTF", 1, 4},
	    },
	  long_cases[] = {
	      {"T", 1, 9},   {"F", 1, 8},   {"TT", 1, 10},
	      {"TF", 0, 10}, {"TF", 1, 10}, {"FT", 0, 10},
	      {"FT", 1, 10}, {"FF", 0, 10}, {"FF", 1, 10},
	  };
	static const char *prefixes[] = {"TTTTTTTT", "FFFFFFFF", "TFFTFTTF"};
	sim_group_spec s = chunked(2, 4);
	held_map m;
	for (size_t i = 0; i < sizeof(short_cases) / sizeof(short_cases[0]);
	     i++) {
		map_clear(&m);
		hold_pattern(&m, 0, short_cases[i].cached);
		uint64_t max =
		    strlen(short_cases[i].cached) * 2 + short_cases[i].tail;
		assert_int_equal(
		    sim_hybrid_group_hit(&s, 0, max, 2, map_held, &m),
		    short_cases[i].blocks * 2);
	}
	for (size_t p = 0; p < 3; p++) {
		for (size_t i = 0;
		     i < sizeof(long_cases) / sizeof(long_cases[0]); i++) {
			char pattern[16];
			strcpy(pattern, prefixes[p]);
			strcat(pattern, long_cases[i].cached);
			map_clear(&m);
			hold_pattern(&m, 0, pattern);
			uint64_t max = strlen(pattern) * 2 + long_cases[i].tail;
			assert_int_equal(
			    sim_hybrid_group_hit(&s, 0, max, 2, map_held, &m),
			    long_cases[i].blocks * 2);
		}
	}
}

/* vLLM tests/v1/core/test_single_type_kv_cache_manager.py::
 * test_sliding_window_cache_hit_with_finer_hash_alignment: block 4,
 * window 8, alignment 2 (finer than the block): both blocks give 8. */
static void
test_sliding_window_finer_alignment(void **state)
{
	(void)state;
	sim_group_spec s = swa(4, 8);
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 2);
	assert_int_equal(sim_hybrid_group_hit(&s, 0, 8, 2, map_held, &m), 8);
	/* without block 0 the two-block window has no run, nor a head */
	m.held[0][0] = false;
	assert_int_equal(sim_hybrid_group_hit(&s, 0, 8, 2, map_held, &m), 0);
}

/* An eviction of one block of one group. */
typedef struct evict {
	size_t group;
	uint64_t block;
} evict;

/* hit_without returns the hit with the given blocks evicted, then puts
 * them back (vLLM's _test_partial_request_hit). */
static uint64_t
hit_without(const sim_group_spec *groups, size_t n_groups, held_map *m,
	    uint64_t n, const evict *ev, size_t n_ev)
{
	for (size_t i = 0; i < n_ev; i++) {
		m->held[ev[i].group][ev[i].block] = false;
	}
	uint64_t got = hit(groups, n_groups, m, n);
	for (size_t i = 0; i < n_ev; i++) {
		m->held[ev[i].group][ev[i].block] = true;
	}
	return got;
}

/* vLLM tests/v1/core/test_prefix_caching.py::test_prefill_hybrid_model:
 * full attention and two sliding-window groups of one spec (block 16,
 * window 32), a 55-token request cached (3 full blocks in every group),
 * then a 53-token request on the same 3 blocks. */
static void
test_prefill_hybrid_model(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(16), swa(16, 32), swa(16, 32)};
	held_map m;
	map_clear(&m);
	assert_int_equal(hit(g, 3, &m, 55), 0);
	for (size_t i = 0; i < 3; i++) {
		hold(&m, i, 0, 3);
	}
	assert_int_equal(hit(g, 3, &m, 53), 48);
	/* blocks outside the window of the hit do not matter */
	evict sw_head[] = {{1, 0}, {2, 0}};
	assert_int_equal(hit_without(g, 3, &m, 53, sw_head, 2), 48);
	evict full_head[] = {{0, 0}};
	assert_int_equal(hit_without(g, 3, &m, 53, full_head, 1), 0);
	evict all_last[] = {{0, 2}, {1, 2}, {2, 2}};
	assert_int_equal(hit_without(g, 3, &m, 53, all_last, 3), 32);
	evict full_last[] = {{0, 2}};
	assert_int_equal(hit_without(g, 3, &m, 53, full_last, 1), 32);
	evict sw1_last[] = {{1, 2}};
	assert_int_equal(hit_without(g, 3, &m, 53, sw1_last, 1), 32);
	evict sw2_last[] = {{2, 2}};
	assert_int_equal(hit_without(g, 3, &m, 53, sw2_last, 1), 32);
	/* full attention allows 16, sliding window 32: no common hit */
	evict mixed[] = {{0, 2}, {1, 0}, {2, 0}};
	assert_int_equal(hit_without(g, 3, &m, 53, mixed, 3), 0);
}

/* vLLM tests/v1/core/test_prefix_caching.py::
 * test_prefill_hybrid_model_combinations (_HYBRID_MODEL_TEST_CASES): each
 * combination misses on an empty cache, then hits the 3 blocks a 55-token
 * request cached with a 53-token one. "mamba" is a Mamba group caching
 * every block ("all"). */
static void
test_prefill_hybrid_model_combinations(void **state)
{
	(void)state;
	const sim_group_spec F = full(16), SW = swa(16, 32), SWL = swa(16, 64),
			     M = mamba(16, SIM_MAMBA_ALL);
	const struct {
		size_t n;
		sim_group_spec g[4];
	} cases[] = {
	    {2, {F, SW}},         {2, {F, M}},          {2, {SW, M}},
	    {2, {SW, SWL}},       {3, {F, SW, SW}},     {3, {F, M, M}},
	    {3, {F, SW, M}},      {3, {F, SW, SWL}},    {3, {F, F, SW}},
	    {3, {F, F, M}},       {4, {F, SW, F, SWL}}, {4, {F, M, F, M}},
	    {4, {F, SW, F, SWL}}, {4, {SW, M, SWL, M}}, {4, {F, F, SW, M}},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		held_map m;
		map_clear(&m);
		assert_int_equal(hit(cases[i].g, cases[i].n, &m, 55), 0);
		for (size_t g = 0; g < cases[i].n; g++) {
			hold(&m, g, 0, 3);
		}
		assert_int_equal(hit(cases[i].g, cases[i].n, &m, 53), 48);
	}
}

/* vLLM tests/v1/core/test_prefix_caching.py::
 * test_hybrid_cache_mamba_align_shared_prefix_detection: full attention
 * and Mamba "align". A 48-token request leaves full blocks 0-2 and the
 * Mamba state at 48; a request on those 48 tokens plus 7 hits 48. One
 * that differs in the last token of block 2 shares blocks 0-1 only, where
 * Mamba kept no state: no hit, though full attention alone allows 32
 * (what the test's newer revision reports as an uncached common prefix). */
static void
test_mamba_align_shared_prefix(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(16), mamba(16, SIM_MAMBA_ALIGN)};
	held_map m;
	map_clear(&m);
	assert_int_equal(hit(g, 2, &m, 48), 0);
	hold(&m, 0, 0, 3);
	hold(&m, 1, 2, 3);
	assert_int_equal(hit(g, 2, &m, 55), 48);
	/* the third request's chain: blocks 0-1 only */
	map_clear(&m);
	hold(&m, 0, 0, 2);
	assert_int_equal(hit(g, 2, &m, 48), 0);
	assert_int_equal(sim_hybrid_group_hit(&g[0], 0, 47, 16, map_held, &m),
			 32);
}

/* vLLM tests/v1/core/test_prefix_caching.py::test_different_block_size:
 * full attention of 32-token blocks, sliding window of 16-token blocks
 * (window 32), a 112-token request cached (3 full blocks, 7 sliding). */
static void
test_different_block_size(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(32), swa(16, 32)};
	held_map m;
	map_clear(&m);
	assert_int_equal(sim_hybrid_alignment(g, 2), 32);
	hold(&m, 0, 0, 3);
	hold(&m, 1, 0, 7);
	assert_int_equal(hit(g, 2, &m, 7 * 16 + 1), 96);
	assert_int_equal(hit(g, 2, &m, 6 * 16 + 1), 96);
	/* sliding window alone would allow 5 blocks: 80 is off the 32 grid */
	m.held[1][6] = false;
	m.held[1][5] = false;
	assert_int_equal(hit(g, 2, &m, 7 * 16 + 1), 64);
	assert_int_equal(sim_hybrid_group_hit(&g[1], 1, 112, 32, map_held, &m),
			 64);
	assert_int_equal(sim_hybrid_group_hit(&g[1], 1, 112, 16, map_held, &m),
			 80);
}

/* vLLM tests/v1/core/test_prefix_caching.py::
 * test_hybrid_local_kv_retention_latest_only_reuses_replay_boundary:
 * full attention of 32-token blocks, sliding window of 8 (window 8)
 * keeping only block 11 of a 128-token prompt. The same prompt hits 96;
 * its first 96 tokens hit nothing. */
static void
test_retention_latest_only(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(32), swa(8, 8)};
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 4);
	hold(&m, 1, 11, 12);
	assert_int_equal(hit(g, 2, &m, 128), 96);
	assert_int_equal(hit(g, 2, &m, 96), 0);
}

/* vLLM tests/v1/core/test_prefix_caching.py::
 * test_hybrid_local_kv_retention_interval_survives_recycling: an MLA group
 * of 256-token blocks and sliding windows of 64-token (window 512),
 * 8-token (window 128) and 4-token (window 8) blocks; a 4096-token
 * prompt retained every 1024 tokens, so each sliding group keeps the
 * cdiv(window - 1, block) blocks ending on each 1024 boundary
 * (SlidingWindowManager.reachable_block_mask). Its first 1800 tokens hit
 * 1024: 4, 16, 128 and 256 blocks. */
static void
test_retention_interval_mla_and_three_windows(void **state)
{
	(void)state;
	sim_group_spec g[] = {mla(256), swa(64, 512), swa(8, 128), swa(4, 8)};
	static held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 16);
	for (uint64_t i = 0; i < 64; i++) {
		m.held[1][i] = i % 16 >= 8;
	}
	for (uint64_t i = 0; i < 512; i++) {
		m.held[2][i] = i % 128 >= 112;
	}
	for (uint64_t i = 0; i < 1024; i++) {
		m.held[3][i] = i % 256 >= 254;
	}
	assert_int_equal(sim_hybrid_alignment(g, 4), 256);
	assert_int_equal(hit(g, 4, &m, 1800), 1024);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(
		    sim_hybrid_group_hit(&g[i], i, 1024, 256, map_held, &m),
		    1024);
	}
}

/* vLLM tests/v1/core/test_prefix_caching.py::
 * test_pure_swa_retention_interval_caches_sparse_tails and
 * ::test_pure_swa_retention_latest_only: one sliding-window group (block
 * 16, window 16) keeping blocks {3,7,11,14,15} or {14} of a 256-token
 * prompt; the same prompt hits 240 (block 15 is past the n - 1 cap). */
static void
test_pure_swa_retention(void **state)
{
	(void)state;
	sim_group_spec g[] = {swa(16, 16)};
	held_map m;
	map_clear(&m);
	static const uint64_t sparse[] = {3, 7, 11, 14, 15};
	for (size_t i = 0; i < 5; i++) {
		m.held[0][sparse[i]] = true;
	}
	assert_int_equal(hit(g, 1, &m, 256), 240);
	map_clear(&m);
	m.held[0][14] = true;
	assert_int_equal(hit(g, 1, &m, 256), 240);
	/* the block ending on the prompt's last token can never serve it */
	map_clear(&m);
	m.held[0][15] = true;
	assert_int_equal(hit(g, 1, &m, 256), 0);
}

/* vLLM tests/v1/core/test_hybrid_kv_cache_coordinator.py::
 * test_cache_hit_multiple_sliding_windows and
 * ::test_partial_cache_hit_different_sliding_windows: full attention with
 * two sliding windows of 16-token blocks. */
static void
test_multiple_sliding_windows(void **state)
{
	(void)state;
	sim_group_spec wide[] = {full(16), swa(16, 512), swa(16, 256)};
	held_map m;
	map_clear(&m);
	for (size_t i = 0; i < 3; i++) {
		hold(&m, i, 0, 6);
	}
	assert_int_equal(hit(wide, 3, &m, 96), 80);

	sim_group_spec narrow[] = {full(16), swa(16, 64), swa(16, 32)};
	map_clear(&m);
	for (size_t i = 0; i < 3; i++) {
		hold(&m, i, 0, 5);
	}
	assert_int_equal(hit(narrow, 3, &m, 80), 64);
	/* window 32 loses block 2: its last run is blocks 0-1 */
	m.held[2][2] = false;
	assert_int_equal(hit(narrow, 3, &m, 80), 32);
}

/* The n - 1 cap, alone and with a sliding window, every block held. */
static void
test_cap(void **state)
{
	(void)state;
	static const uint64_t n[] = {0, 1, 2, 16, 17, 47, 48, 49, 64, 65};
	static const uint64_t want[] = {0, 0, 0, 0, 16, 32, 32, 48, 48, 64};
	sim_group_spec one[] = {full(16)};
	sim_group_spec two[] = {full(16), swa(16, 32)};
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 10);
	hold(&m, 1, 0, 10);
	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
		assert_int_equal(hit(one, 1, &m, n[i]), want[i]);
		assert_int_equal(hit(two, 2, &m, n[i]), want[i]);
	}
}

/* Window sizes around multiples of the block: a window of W tokens needs
 * cdiv(W - 1, 16) blocks. The sliding group holds {0,2,3,5,6}: runs of
 * two, so windows up to 33 hit all 112 tokens and 34 falls back to the
 * head run of one block. */
static void
test_window_boundaries(void **state)
{
	(void)state;
	static const uint32_t window[] = {1, 16, 17, 32, 33, 34, 48, 49};
	static const uint64_t want[] = {112, 112, 112, 112, 112, 16, 16, 16};
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 7);
	hold_pattern(&m, 1, "TFTTFTT");
	for (size_t i = 0; i < sizeof(window) / sizeof(window[0]); i++) {
		sim_group_spec g[] = {full(16), swa(16, window[i])};
		assert_int_equal(hit(g, 2, &m, 113), want[i]);
	}
}

/* A sliding-window group that evicted the head of the chain (blocks 0-3)
 * and a prompt whose length crosses the block boundary after its last
 * two blocks (4 and 5). */
static void
test_sliding_window_evicted_head(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(16), swa(16, 32)};
	static const uint64_t n[] = {95, 96, 97, 98, 112, 113, 160};
	static const uint64_t want[] = {0, 0, 96, 96, 96, 96, 96};
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 10);
	hold(&m, 1, 4, 6);
	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
		assert_int_equal(hit(g, 2, &m, n[i]), want[i]);
	}
}

/* Groups of one spec are looked up together: a block counts only when
 * both hold it. Apart, the groups would allow 112 and 80. */
static void
test_equal_specs_joint(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(16), swa(16, 32), swa(16, 32)};
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 7);
	hold_pattern(&m, 1, "TTTTFTT");
	hold_pattern(&m, 2, "TTTTTFT");
	assert_int_equal(hit(g, 3, &m, 113), 64);
	assert_int_equal(sim_hybrid_group_hit(&g[1], 1, 112, 16, map_held, &m),
			 112);
	assert_int_equal(sim_hybrid_group_hit(&g[2], 2, 112, 16, map_held, &m),
			 80);
	/* different windows are different specs, each asked alone: a
	 * window of 17 needs one block, and its group allows 112 */
	sim_group_spec d[] = {full(16), swa(16, 32), swa(16, 17)};
	assert_int_equal(hit(d, 3, &m, 113), 112);
	d[2].sliding_window = 33;
	assert_int_equal(hit(d, 3, &m, 113), 64);
}

/* Mamba in each caching mode: the lookup is the same; the state must end
 * exactly on the hit. */
static void
test_mamba_boundaries(void **state)
{
	(void)state;
	static const sim_mamba_mode modes[] = {SIM_MAMBA_ALL, SIM_MAMBA_ALIGN};
	for (size_t k = 0; k < 2; k++) {
		held_map m;
		sim_group_spec same[] = {full(16), mamba(16, modes[k])};
		map_clear(&m);
		hold(&m, 0, 0, 6);
		m.held[1][1] = true;
		assert_int_equal(hit(same, 2, &m, 33), 32);
		assert_int_equal(hit(same, 2, &m, 32), 0);
		assert_int_equal(hit(same, 2, &m, 48), 32);
		assert_int_equal(hit(same, 2, &m, 97), 32);
		m.held[1][4] = true;
		assert_int_equal(hit(same, 2, &m, 97), 80);
		assert_int_equal(hit(same, 2, &m, 80), 32);

		/* Mamba blocks of 64: states only every 64 tokens */
		sim_group_spec big[] = {full(16), mamba(64, modes[k])};
		map_clear(&m);
		hold(&m, 0, 0, 10);
		m.held[1][0] = true;
		assert_int_equal(hit(big, 2, &m, 100), 64);
		m.held[1][0] = false;
		m.held[1][1] = true;
		assert_int_equal(hit(big, 2, &m, 128), 0);
		assert_int_equal(hit(big, 2, &m, 129), 128);

		/* Mamba blocks of 16 with full attention's of 32: a state at
		 * 48 is off the 32 grid and skipped */
		sim_group_spec small[] = {full(32), mamba(16, modes[k])};
		map_clear(&m);
		hold(&m, 0, 0, 4);
		m.held[1][2] = true;
		assert_int_equal(hit(small, 2, &m, 70), 0);
		m.held[1][1] = true;
		assert_int_equal(hit(small, 2, &m, 70), 32);
		m.held[1][3] = true;
		assert_int_equal(hit(small, 2, &m, 70), 64);

		/* Mamba alone (the unitary coordinator) */
		sim_group_spec alone[] = {mamba(16, modes[k])};
		map_clear(&m);
		m.held[0][2] = true;
		assert_int_equal(hit(alone, 1, &m, 49), 48);
		assert_int_equal(hit(alone, 1, &m, 48), 0);
	}
}

/* mamba_cache_mode "none": prefix caching is off, nothing hits. */
static void
test_mamba_mode_none(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(16), mamba(16, SIM_MAMBA_NONE)};
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 8);
	hold(&m, 1, 0, 8);
	assert_null(sim_hybrid_check(g, 2));
	assert_int_equal(hit(g, 2, &m, 100), 0);
	assert_int_equal(hit(&g[1], 1, &m, 100), 0);
	assert_int_equal(sim_hybrid_group_hit(&g[1], 1, 99, 16, map_held, &m),
			 0);
	g[1].mamba_mode = SIM_MAMBA_ALL;
	assert_int_equal(hit(g, 2, &m, 100), 96);
}

/* Block sizes 16 and 24: hits are multiples of 48. */
static void
test_lcm_alignment(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(16), swa(24, 48)};
	held_map m;
	map_clear(&m);
	assert_int_equal(sim_hybrid_alignment(g, 2), 48);
	hold(&m, 0, 0, 10);
	hold(&m, 1, 0, 7);
	assert_int_equal(hit(g, 2, &m, 161), 144);
	assert_int_equal(sim_hybrid_group_hit(&g[0], 0, 160, 48, map_held, &m),
			 144);
	assert_int_equal(sim_hybrid_group_hit(&g[0], 0, 160, 16, map_held, &m),
			 160);
	/* the sliding run must end on the grid: block 4 ends at 120 */
	m.held[1][5] = false;
	m.held[1][6] = false;
	assert_int_equal(hit(g, 2, &m, 161), 96);

	/* two full-attention kinds of different block sizes */
	sim_group_spec f[] = {full(16), mla(64)};
	map_clear(&m);
	hold(&m, 0, 0, 10);
	hold(&m, 1, 0, 2);
	assert_int_equal(hit(f, 2, &m, 161), 128);
	m.held[1][1] = false;
	assert_int_equal(hit(f, 2, &m, 161), 64);
}

/* The MLA kinds follow their base classes: MLA is full attention,
 * sliding-window MLA a sliding window (test_prefill_hybrid_model's
 * shape). */
static void
test_mla_kinds(void **state)
{
	(void)state;
	sim_group_spec g[] = {mla(16), swa_mla(16, 32)};
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 3);
	hold(&m, 1, 1, 3);
	assert_int_equal(hit(g, 2, &m, 53), 48);
	m.held[0][0] = false;
	assert_int_equal(hit(g, 2, &m, 53), 0);
	m.held[0][0] = true;
	m.held[1][2] = false;
	assert_int_equal(hit(g, 2, &m, 53), 0);
	m.held[1][0] = true;
	assert_int_equal(hit(g, 2, &m, 53), 32);
}

/* Chunked local attention (chunk 64) needs only the blocks of the hit's
 * own chunk; with other block sizes vLLM refuses it. */
static void
test_chunked_local_hybrid(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(16), chunked(16, 64)};
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 10);
	assert_int_equal(hit(g, 2, &m, 129), 128);
	assert_int_equal(hit(g, 2, &m, 65), 64);
	assert_int_equal(hit(g, 2, &m, 100), 64);
	m.held[1][4] = true;
	assert_int_equal(hit(g, 2, &m, 100), 80);
	m.held[1][5] = true;
	assert_int_equal(hit(g, 2, &m, 100), 96);

	sim_group_spec bad[] = {full(32), chunked(16, 64)};
	assert_non_null(sim_hybrid_check(bad, 2));
	assert_int_equal(hit(bad, 2, &m, 100), 0);
	assert_int_equal(sim_hybrid_group_hit(&bad[1], 1, 99, 32, map_held, &m),
			 0);
}

/* Three specs: the fixed point takes three rounds here, where one round
 * would stop at 96. */
static void
test_fixed_point_rounds(void **state)
{
	(void)state;
	sim_group_spec g[] = {full(16), swa(16, 32), mamba(16, SIM_MAMBA_ALL)};
	held_map m;
	map_clear(&m);
	hold(&m, 0, 0, 8);
	hold_pattern(&m, 1, "TTTTFTTT");
	m.held[2][2] = true;
	m.held[2][5] = true;
	assert_int_equal(hit(g, 3, &m, 129), 48);
	/* the order of the groups does not matter; full attention goes
	 * first whatever its place */
	sim_group_spec r[] = {mamba(16, SIM_MAMBA_ALL), swa(16, 32), full(16)};
	held_map q;
	map_clear(&q);
	hold(&q, 2, 0, 8);
	hold_pattern(&q, 1, "TTTTFTTT");
	q.held[0][2] = true;
	q.held[0][5] = true;
	assert_int_equal(hit(r, 3, &q, 129), 48);
}

static void
test_check(void **state)
{
	(void)state;
	sim_group_spec ok[] = {full(16), swa(16, 32), mamba(16, SIM_MAMBA_ALL),
			       chunked(16, 64)};
	assert_null(sim_hybrid_check(ok, 4));
	assert_int_equal(sim_hybrid_alignment(ok, 4), 16);
	assert_non_null(sim_hybrid_check(ok, 0));
	assert_int_equal(sim_hybrid_alignment(ok, 0), 0);

	sim_group_spec g[2] = {full(16), full(16)};
	g[1].block_size = 0;
	assert_non_null(sim_hybrid_check(g, 2));
	g[1] = swa(16, 0);
	assert_non_null(sim_hybrid_check(g, 2));
	g[1] = chunked(16, 0);
	assert_non_null(sim_hybrid_check(g, 2));
	g[1] = mamba(16, (sim_mamba_mode)7);
	assert_non_null(sim_hybrid_check(g, 2));
	g[1] = full(16);
	g[1].kind = (sim_group_kind)42;
	assert_non_null(sim_hybrid_check(g, 2));

	/* three primes near 2^16: their product passes UINT32_MAX */
	sim_group_spec big[] = {full(65521), full(65519), full(65497)};
	assert_non_null(sim_hybrid_check(big, 3));
	assert_null(sim_hybrid_check(big, 2));
	assert_int_equal(sim_hybrid_alignment(big, 2), (uint64_t)65521 * 65519);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sliding_window_possible_cached_prefix),
	    cmocka_unit_test(
		test_chunked_local_attention_possible_cached_prefix),
	    cmocka_unit_test(test_sliding_window_finer_alignment),
	    cmocka_unit_test(test_prefill_hybrid_model),
	    cmocka_unit_test(test_prefill_hybrid_model_combinations),
	    cmocka_unit_test(test_mamba_align_shared_prefix),
	    cmocka_unit_test(test_different_block_size),
	    cmocka_unit_test(test_retention_latest_only),
	    cmocka_unit_test(test_retention_interval_mla_and_three_windows),
	    cmocka_unit_test(test_pure_swa_retention),
	    cmocka_unit_test(test_multiple_sliding_windows),
	    cmocka_unit_test(test_cap),
	    cmocka_unit_test(test_window_boundaries),
	    cmocka_unit_test(test_sliding_window_evicted_head),
	    cmocka_unit_test(test_equal_specs_joint),
	    cmocka_unit_test(test_mamba_boundaries),
	    cmocka_unit_test(test_mamba_mode_none),
	    cmocka_unit_test(test_lcm_alignment),
	    cmocka_unit_test(test_mla_kinds),
	    cmocka_unit_test(test_chunked_local_hybrid),
	    cmocka_unit_test(test_fixed_point_rounds),
	    cmocka_unit_test(test_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
