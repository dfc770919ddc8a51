/*
 * test_index.c - the in-memory index against a brute-force model.
 *
 * Random stores, removals, moves and clears over a few listeners, with
 * external hashes that often share a sequence hash (the aliasing case);
 * after every step, queries over random prefixes of the chains must equal
 * what a scan of the model says, per listener and per tier.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "index.h"

#define N_LIS    6
#define N_EXT    48
#define N_CHAINS 3
#define CHAIN    8

typedef struct model_ent {
	bool present;
	uint64_t seq;
	uint8_t tiers;
} model_ent;

static model_ent model[N_LIS][N_EXT];
static uint64_t chains[N_CHAINS][CHAIN];

typedef struct got {
	bool seen[N_LIS];
	kvx_match m[N_LIS];
} got;

static void
on_match(void *arg, const kvx_listener_info *info, const kvx_match *m)
{
	got *g = arg;
	assert_true(info->lid < N_LIS);
	assert_false(g->seen[info->lid]);
	g->seen[info->lid] = true;
	g->m[info->lid] = *m;
}

static uint8_t
model_tiers(int lis, uint64_t seq)
{
	uint8_t t = 0;
	for (int e = 0; e < N_EXT; e++) {
		if (model[lis][e].present && model[lis][e].seq == seq) {
			t |= model[lis][e].tiers;
		}
	}
	return t;
}

static kvx_match
model_match(int lis, const uint64_t *seq, size_t n)
{
	kvx_match m = {0};
	uint32_t any = 0, gc = 0, gpu = 0;
	bool gc_open = true, gpu_open = true;
	for (size_t i = 0; i < n; i++) {
		uint8_t t = model_tiers(lis, seq[i]);
		if (t == 0) {
			break;
		}
		any++;
		gc_open = gc_open && (t & 3);
		gc += gc_open;
		gpu_open = gpu_open && (t & 1);
		gpu += gpu_open;
	}
	m.gpu = gpu;
	m.cpu = gc - gpu;
	m.disk = any - gc;
	m.longest = any;
	return m;
}

static void
check_queries(kvx_index *idx)
{
	for (int c = 0; c < N_CHAINS; c++) {
		for (size_t n = 1; n <= CHAIN; n++) {
			got g = {0};
			uint32_t bs = 0;
			assert_int_equal(kvx_query(idx, "m", chains[c], n, NULL,
						   on_match, &g, &bs),
					 KVI_OK);
			assert_int_equal(bs, 4);
			for (int l = 0; l < N_LIS; l++) {
				kvx_match want = model_match(l, chains[c], n);
				assert_int_equal(g.seen[l], want.longest > 0);
				if (!g.seen[l]) {
					continue;
				}
				assert_int_equal(g.m[l].gpu, want.gpu);
				assert_int_equal(g.m[l].cpu, want.cpu);
				assert_int_equal(g.m[l].disk, want.disk);
				assert_int_equal(g.m[l].longest, want.longest);
			}
		}
	}
}

static void
check_entries(kvx_index *idx)
{
	for (int l = 0; l < N_LIS; l++) {
		size_t n = 0;
		for (int e = 0; e < N_EXT; e++) {
			n += model[l][e].present;
			uint64_t seq;
			bool found = kvx_lookup(idx, (uint32_t)l,
						(uint64_t)e * 7919, &seq);
			assert_int_equal(found, model[l][e].present);
			if (found) {
				assert_true(seq == model[l][e].seq);
			}
		}
		assert_int_equal(kvx_listener_entries(idx, (uint32_t)l), n);
	}
}

/* A listener's map keeps a sequence hash's top 29 bits; hashes that
 * share them are the case it must tell apart. */
#define PREFIX_SHIFT 35

/* run_random runs random operations against the model. With narrow, the
 * chains' hashes have only three prefixes between them (0 among them, with
 * the hash 0), so every listener holds many hashes of one prefix. */
static void
run_random(bool narrow)
{
	srand(12345);
	memset(model, 0, sizeof(model));
	for (int c = 0; c < N_CHAINS; c++) {
		for (int i = 0; i < CHAIN; i++) {
			/* include 0 and values >= 2^63 among the keys */
			chains[c][i] = c == 0 && i == 3
					   ? 0
					   : ((uint64_t)rand() << 33) ^
						 (uint64_t)rand() ^
						 ((uint64_t)(c & 1) << 63);
			if (narrow && chains[c][i] != 0) {
				uint64_t low =
				    chains[c][i] &
				    ((UINT64_C(1) << PREFIX_SHIFT) - 1);
				uint64_t prefix = (uint64_t)(c + i) % 3;
				chains[c][i] =
				    (prefix * 0x1234567u) << PREFIX_SHIFT | low;
			}
		}
	}
	kvx_index *idx = kvx_index_alloc();
	for (int l = 0; l < N_LIS; l++) {
		char key[16];
		snprintf(key, sizeof(key), "p#%d", l);
		assert_int_equal(kvx_listener_add(idx, (uint32_t)l, key, "ns/p",
						  100 + (uint64_t)l / 2,
						  (uint16_t)(l % 2), "m", 4),
				 KVI_OK);
	}
	for (int step = 0; step < 20000; step++) {
		int l = rand() % N_LIS;
		int e = rand() % N_EXT;
		kvi_tier tier = (kvi_tier)(rand() % 3);
		int op = rand() % 100;
		uint64_t ext = (uint64_t)e * 7919; /* ext 0 included */
		kvx_write_begin(idx, (uint32_t)l);
		if (op < 60) {
			/* ext e usually maps to a fixed chain position; with
			 * N_EXT > chain positions, several exts alias */
			int pos = (op < 57 ? e : rand()) % (N_CHAINS * CHAIN);
			uint64_t seq = chains[pos / CHAIN][pos % CHAIN];
			kvx_store(idx, (uint32_t)l, ext, seq, tier);
			model_ent *me = &model[l][e];
			if (me->present && me->seq != seq) {
				me->tiers = 0;
			}
			me->present = true;
			me->seq = seq;
			me->tiers |= (uint8_t)(1u << tier);
		} else if (op < 97) {
			model_ent *me = &model[l][e];
			bool had = me->present && (me->tiers & (1u << tier));
			assert_int_equal(
			    kvx_remove(idx, (uint32_t)l, ext, tier), had);
			if (had) {
				me->tiers &= (uint8_t) ~(1u << tier);
				me->present = me->tiers != 0;
			}
		} else {
			kvx_clear(idx, (uint32_t)l);
			memset(model[l], 0, sizeof(model[l]));
		}
		kvx_write_end(idx, (uint32_t)l);
		if (step % 50 == 0) {
			check_queries(idx);
			check_entries(idx);
		}
	}
	check_queries(idx);
	check_entries(idx);
	kvx_index_free(idx);
}

static void
test_random_against_model(void **state)
{
	(void)state;
	run_random(false);
}

static void
test_random_shared_prefixes(void **state)
{
	(void)state;
	run_random(true);
}

static void
test_listeners_and_filters(void **state)
{
	(void)state;
	kvx_index *idx = kvx_index_alloc();
	assert_int_equal(kvx_listener_add(idx, 0, "a#0", "ns/a", 7, 0, "m", 16),
			 KVI_OK);
	assert_int_equal(kvx_listener_add(idx, 1, "a#1", "ns/a", 7, 1, "m", 16),
			 KVI_OK);
	assert_int_equal(kvx_listener_add(idx, 2, "b#0", "ns/b", 9, 0, "m", 16),
			 KVI_OK);
	/* taken id; block size conflict within a model; other model ok */
	assert_int_equal(kvx_listener_add(idx, 1, "x", "", 1, 0, "m", 16),
			 KVI_EEXIST);
	assert_int_equal(kvx_listener_add(idx, 3, "x", "", 1, 0, "m", 32),
			 KVI_EINVAL);
	assert_int_equal(kvx_listener_add(idx, 3, "x", "", 1, 0, "m2", 32),
			 KVI_OK);
	uint64_t seq[3] = {11, 12, 13};
	for (uint32_t l = 0; l < 3; l++) {
		kvx_write_begin(idx, l);
		for (uint32_t i = 0; i <= l; i++) {
			kvx_store(idx, l, 1000 + i, seq[i], KVI_TIER_GPU);
		}
		kvx_write_end(idx, l);
	}
	got g = {0};
	uint32_t bs;
	assert_int_equal(kvx_query(idx, "m", seq, 3, NULL, on_match, &g, &bs),
			 KVI_OK);
	assert_int_equal(bs, 16);
	assert_int_equal(g.m[0].longest, 1);
	assert_int_equal(g.m[1].longest, 2);
	assert_int_equal(g.m[2].longest, 3);
	/* model without listeners, and the other model's partition */
	assert_int_equal(
	    kvx_query(idx, "nope", seq, 3, NULL, on_match, &g, &bs),
	    KVI_ENOENT);
	memset(&g, 0, sizeof(g));
	assert_int_equal(kvx_query(idx, "m2", seq, 3, NULL, on_match, &g, &bs),
			 KVI_OK);
	assert_int_equal(bs, 32);
	assert_false(g.seen[0] || g.seen[1] || g.seen[2]);
	/* filters: instance 7 rank 1; instance 9 only */
	uint64_t inst7 = 7, inst9 = 9;
	kvx_filter f = {
	    .instances = &inst7, .n_instances = 1, .has_rank = true, .rank = 1};
	memset(&g, 0, sizeof(g));
	kvx_query(idx, "m", seq, 3, &f, on_match, &g, &bs);
	assert_true(!g.seen[0] && g.seen[1] && !g.seen[2]);
	f = (kvx_filter){.instances = &inst9, .n_instances = 1};
	memset(&g, 0, sizeof(g));
	kvx_query(idx, "m", seq, 3, &f, on_match, &g, &bs);
	assert_true(!g.seen[0] && !g.seen[1] && g.seen[2]);
	/* removing a listener drops its entries from queries */
	kvx_listener_remove(idx, 2);
	assert_false(kvx_listener_exists(idx, 2));
	memset(&g, 0, sizeof(g));
	kvx_query(idx, "m", seq, 3, NULL, on_match, &g, &bs);
	assert_false(g.seen[2]);
	assert_int_equal(g.m[1].longest, 2);
	kvx_stats st;
	kvx_index_stats(idx, &st);
	assert_int_equal(st.listeners, 3);
	assert_int_equal(st.entries, 3);
	/* the last listener of m2 takes its partition with it */
	kvx_listener_remove(idx, 3);
	assert_int_equal(kvx_query(idx, "m2", seq, 3, NULL, on_match, &g, &bs),
			 KVI_ENOENT);
	kvx_index_free(idx);
}

typedef struct sink {
	kvx_match *res;
	bool *seen;
} sink;

static void
on_match_many(void *arg, const kvx_listener_info *info, const kvx_match *m)
{
	sink *s = arg;
	s->seen[info->lid] = true;
	s->res[info->lid] = *m;
}

static void
test_many_holders_and_growth(void **state)
{
	(void)state;
	kvx_index *idx = kvx_index_alloc();
	enum { L = 300, B = 2000 };
	static uint64_t seq[B];
	for (int i = 0; i < B; i++) {
		seq[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
	}
	for (uint32_t l = 0; l < L; l++) {
		char key[16];
		snprintf(key, sizeof(key), "p#%u", l);
		kvx_listener_add(idx, l, key, "", l, 0, "m", 16);
		kvx_write_begin(idx, l);
		/* listener l holds the first l + 1 blocks... of every
		 * 7th listener, everything */
		int n = l % 7 == 0 ? B : (int)l + 1;
		for (int i = 0; i < n; i++) {
			kvx_store(idx, l, (uint64_t)i + 1, seq[i],
				  i < 10 ? KVI_TIER_GPU : KVI_TIER_CPU);
		}
		kvx_write_end(idx, l);
	}
	static kvx_match res[L];
	static bool seen[L];
	memset(seen, 0, sizeof(seen));
	uint32_t bs;
	assert_int_equal(kvx_query(idx, "m", seq, B, NULL, on_match_many,
				   &(sink){res, seen}, &bs),
			 KVI_OK);
	for (uint32_t l = 0; l < L; l++) {
		uint32_t n = l % 7 == 0 ? B : l + 1;
		assert_true(seen[l]);
		assert_int_equal(res[l].longest, n);
		assert_int_equal(res[l].gpu, n < 10 ? n : 10);
		assert_int_equal(res[l].cpu, n < 10 ? 0 : n - 10);
	}
	kvx_index_free(idx);
}

typedef struct copy_ctx {
	kvx_bulk *bulk;
	uint32_t lid;
} copy_ctx;

static void
copy_entry(void *arg, uint64_t ext, uint64_t seq, uint8_t tiers)
{
	copy_ctx *c = arg;
	kvx_bulk_add(c->bulk, c->lid, ext, seq, tiers);
}

/* The bulk loader builds the same index as one store at a time: states
 * made by random operations (aliases and several tiers included) are
 * copied through it, and every query and lookup must agree. */
static void
bulk_load_matches(bool narrow)
{
	run_random(narrow); /* leaves model[] and chains[] */
	kvx_index *a = kvx_index_alloc(), *b = kvx_index_alloc();
	for (int l = 0; l < N_LIS; l++) {
		char key[16];
		snprintf(key, sizeof(key), "p#%d", l);
		kvx_listener_add(a, (uint32_t)l, key, "", 100 + (uint64_t)l / 2,
				 (uint16_t)(l % 2), "m", 4);
		kvx_listener_add(b, (uint32_t)l, key, "", 100 + (uint64_t)l / 2,
				 (uint16_t)(l % 2), "m", 4);
		kvx_write_begin(a, (uint32_t)l);
		for (int e = 0; e < N_EXT; e++) {
			const model_ent *me = &model[l][e];
			for (int t = 0; me->present && t < 3; t++) {
				if (me->tiers & (1u << t)) {
					kvx_store(a, (uint32_t)l,
						  (uint64_t)e * 7919, me->seq,
						  (kvi_tier)t);
				}
			}
		}
		kvx_write_end(a, (uint32_t)l);
	}
	kvx_bulk *bulk = kvx_bulk_begin(b);
	for (uint32_t l = 0; l < N_LIS; l++) {
		copy_ctx c = {bulk, l};
		kvx_listener_foreach(a, l, copy_entry, &c);
	}
	kvx_bulk_finish(bulk, 3, NULL);
	check_queries(b);
	check_entries(b);
	/* and it keeps working as a live index: remove everything */
	for (int l = 0; l < N_LIS; l++) {
		kvx_write_begin(b, (uint32_t)l);
		for (int e = 0; e < N_EXT; e++) {
			for (int t = 0; t < 3; t++) {
				if (model[l][e].present &&
				    (model[l][e].tiers & (1u << t))) {
					assert_true(kvx_remove(
					    b, (uint32_t)l, (uint64_t)e * 7919,
					    (kvi_tier)t));
				}
			}
		}
		kvx_write_end(b, (uint32_t)l);
	}
	memset(model, 0, sizeof(model));
	check_queries(b);
	kvx_stats st;
	kvx_index_stats(b, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.seq_hashes, 0);
	kvx_index_free(a);
	kvx_index_free(b);
}

static void
test_bulk_load_matches(void **state)
{
	(void)state;
	bulk_load_matches(false);
}

static void
test_bulk_load_shared_prefixes(void **state)
{
	(void)state;
	bulk_load_matches(true);
}

/* A stripe of more than 2^21 slots: a prefix covers two home slots there.
 * One listener holds 2M hashes of one stripe, every 64th with a twin of
 * its prefix; another holds the twins. Each is found, then all go. */
static void
test_wide_stripe(void **state)
{
	(void)state;
	enum { N = 1 << 21, BATCH = 4096 };
	kvx_index *idx = kvx_index_alloc();
	kvx_listener_add(idx, 0, "w#0", "", 1, 0, "m", 16);
	kvx_listener_add(idx, 1, "w#1", "", 2, 0, "m", 16);
	uint64_t *ext = malloc(2 * BATCH * sizeof(uint64_t));
	uint64_t *seq = malloc(2 * BATCH * sizeof(uint64_t));
	uint8_t *tiers = malloc(2 * BATCH);
	memset(tiers, 1, 2 * BATCH);
	/* hash i: stripe 7, a prefix that is a bijection of i (spread over
	 * the stripe, as hashes are), low bits from i too */
#define WIDE_SEQ(i, twin)                                                      \
	((UINT64_C(7) << 56) |                                                 \
	 (((uint64_t)(i)*0x9e3779b1u & 0x1fffff) << PREFIX_SHIFT) |            \
	 ((uint64_t)(i)*0x9e3779b1u & 0x3ffffffffull) | (twin))
	for (int l = 0; l < 2; l++) {
		kvx_write_begin(idx, (uint32_t)l);
		for (uint32_t i = 0; i < N; i += BATCH) {
			size_t n = 0;
			for (uint32_t k = i; k < i + BATCH; k++) {
				if (l == 1 && k % 64 != 0) {
					continue;
				}
				ext[n] = (uint64_t)k + 1;
				seq[n++] = WIDE_SEQ(k, 0);
				if (l == 0 && k % 64 == 0) {
					ext[n] = (uint64_t)k + 1 + N;
					seq[n++] =
					    WIDE_SEQ(k, UINT64_C(1) << 34);
				}
			}
			kvx_store_batch(idx, (uint32_t)l, ext, seq, tiers, n);
		}
		kvx_write_end(idx, (uint32_t)l);
	}
	kvx_stats st;
	kvx_index_stats(idx, &st);
	assert_int_equal(st.seq_hashes, N + N / 64);
	for (uint32_t k = 0; k < N; k += 61) {
		uint64_t found;
		assert_true(kvx_lookup(idx, 0, (uint64_t)k + 1, &found));
		assert_true(found == WIDE_SEQ(k, 0));
		if (k % 64 == 0) {
			assert_true(
			    kvx_lookup(idx, 0, (uint64_t)k + 1 + N, &found));
			assert_true(found == WIDE_SEQ(k, UINT64_C(1) << 34));
			assert_true(
			    kvx_lookup(idx, 1, (uint64_t)k + 1, &found));
			assert_true(found == WIDE_SEQ(k, 0));
		}
	}
	kvx_write_begin(idx, 0);
	for (uint32_t k = 0; k < N; k++) {
		assert_true(kvx_remove(idx, 0, (uint64_t)k + 1, KVI_TIER_GPU));
		if (k % 64 == 0) {
			assert_true(kvx_remove(idx, 0, (uint64_t)k + 1 + N,
					       KVI_TIER_GPU));
		}
	}
	kvx_write_end(idx, 0);
	kvx_index_stats(idx, &st);
	assert_int_equal(st.seq_hashes, N / 64);
	assert_int_equal(kvx_listener_entries(idx, 0), 0);
	kvx_write_begin(idx, 1);
	kvx_clear(idx, 1);
	kvx_write_end(idx, 1);
	kvx_index_stats(idx, &st);
	assert_int_equal(st.seq_hashes, 0);
#undef WIDE_SEQ
	free(ext);
	free(seq);
	free(tiers);
	kvx_index_free(idx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_against_model),
	    cmocka_unit_test(test_random_shared_prefixes),
	    cmocka_unit_test(test_listeners_and_filters),
	    cmocka_unit_test(test_many_holders_and_growth),
	    cmocka_unit_test(test_bulk_load_matches),
	    cmocka_unit_test(test_bulk_load_shared_prefixes),
	    cmocka_unit_test(test_wide_stripe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
