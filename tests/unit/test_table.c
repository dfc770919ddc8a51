/*
 * test_table.c - the index's hash tables (shard/index/table.h) against a model:
 * random inserts and removes while a table grows from 16 slots to slot
 * arrays mapped from the kernel (KVX_TABLE_MAP_MIN) and goes, keys at the
 * end of the slot array that wrap around to its start, key 0, and the
 * order of home slots that the bulk loader relies on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "table.h"
#include "xorshift.h"

#define N_KEYS 40000

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t
next_rand(void)
{
	return xorshift64(&rng);
}

/* The model: keys[i] present when in[i], with value val[i]. */
static uint64_t keys[N_KEYS];
static bool in[N_KEYS];
static uint64_t val[N_KEYS];

/* check_ext checks that t holds exactly the model and is at most 29/32
 * full. */
static void
check_ext(kvx_extmap *t)
{
	size_t n = 0;
	for (size_t i = 0; i < N_KEYS; i++) {
		kvx_extval *v = kvx_extmap_find(t, keys[i]);
		if (in[i]) {
			assert_non_null(v);
			assert_true(v->seq == val[i]);
			n++;
		} else {
			assert_null(v);
		}
	}
	assert_int_equal(kvx_extmap_size(t), n);
	if (kvx_extmap_cap(t) > 0) {
		assert_true(kvx_extmap_size(t) <=
			    kvx_extmap_max_load(kvx_extmap_cap(t)));
	}
	size_t pos = 0, seen = 0;
	uint64_t k;
	kvx_extval v;
	while (kvx_extmap_next(t, &pos, &k, &v)) {
		seen++;
	}
	assert_int_equal(seen, n);
}

/* Random inserts and removes, the table growing past KVX_TABLE_MAP_MIN:
 * it equals the model after every thousand steps. */
static void
test_random_against_model(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_KEYS; i++) {
		keys[i] = next_rand() | 1; /* key 0 has its own test */
		in[i] = false;
	}
	kvx_extmap t;
	kvx_extmap_init(&t);
	size_t caps_seen = 0, last_cap = 0;
	for (size_t step = 0; step < 6 * N_KEYS; step++) {
		size_t i = next_rand() % N_KEYS;
		/* mostly inserts at first, then churn */
		bool add = step < 2 * N_KEYS ? next_rand() % 8 != 0
					     : next_rand() % 2 == 0;
		if (add) {
			bool added;
			kvx_extval *v = kvx_extmap_insert(&t, keys[i], &added);
			assert_true(added == !in[i]);
			v->seq = val[i] = next_rand();
			in[i] = true;
		} else {
			kvx_extval old;
			assert_true(kvx_extmap_remove(&t, keys[i], &old) ==
				    in[i]);
			if (in[i]) {
				assert_true(old.seq == val[i]);
			}
			in[i] = false;
		}
		if (kvx_extmap_cap(&t) != last_cap) {
			last_cap = kvx_extmap_cap(&t);
			caps_seen++;
		}
		if (step % 1000 == 0) {
			check_ext(&t);
		}
	}
	check_ext(&t);
	/* 16 slots to 64Ki by 3/2 and 4/3: mapped from the kernel past
	 * 16 KiB */
	assert_true(caps_seen >= 23);
	assert_true(kvx_extmap_bytes(&t) >= KVX_TABLE_MAP_MIN);
	kvx_extmap_fini(&t);
	assert_int_equal(kvx_extmap_cap(&t), 0);
}

/* Sequence hashes whose homes are the last slots: their runs wrap to
 * the start of the array, and removing them shifts back across it. */
static void
test_wrap_and_zero(void **state)
{
	(void)state;
	kvx_seqmap t;
	kvx_seqmap_init(&t);
	kvx_seqmap_reserve(&t, 20);
	assert_int_equal(kvx_seqmap_cap(&t), 32);
	uint64_t k[20];
	for (int i = 0; i < 20; i++) {
		/* all bits after the stripe's set: home is the last slot */
		k[i] = (uint64_t)i << 56 | (UINT64_MAX >> KVX_STRIPE_BITS);
		k[i] -= (uint64_t)i; /* distinct, same home */
		assert_int_equal(kvx_seqmap_home(&t, k[i]), 31);
		bool added;
		kvx_seqmap_insert(&t, k[i], &added)->w = (uint32_t)i + 1;
		assert_true(added);
	}
	bool added;
	kvx_seqmap_insert(&t, 0, &added)->w = 99;
	assert_true(added);
	assert_int_equal(kvx_seqmap_size(&t), 21);
	for (int i = 0; i < 20; i += 2) {
		assert_true(kvx_seqmap_remove(&t, k[i], NULL));
	}
	for (int i = 0; i < 20; i++) {
		kvx_holder *h = kvx_seqmap_find(&t, k[i]);
		if (i % 2 == 0) {
			assert_null(h);
		} else {
			assert_non_null(h);
			assert_int_equal(h->w, i + 1);
		}
	}
	assert_int_equal(kvx_seqmap_find(&t, 0)->w, 99);
	kvx_seqmap_fini(&t);

	/* the same with mixed keys, found to have the last home */
	kvx_extmap e;
	kvx_extmap_init(&e);
	kvx_extmap_reserve(&e, 20);
	assert_int_equal(kvx_extmap_cap(&e), 24); /* 16 slots take 14 */
	uint64_t x[18];
	for (int i = 0; i < 18;) {
		uint64_t key = next_rand() | 1;
		if (kvx_extmap_home(&e, key) == 23) {
			x[i++] = key;
		}
	}
	for (int i = 0; i < 18; i++) {
		kvx_extmap_insert(&e, x[i], &added)->seq = (uint64_t)i;
	}
	for (int i = 0; i < 18; i += 3) {
		assert_true(kvx_extmap_remove(&e, x[i], NULL));
	}
	for (int i = 0; i < 18; i++) {
		kvx_extval *v = kvx_extmap_find(&e, x[i]);
		if (i % 3 == 0) {
			assert_null(v);
		} else {
			assert_non_null(v);
			assert_true(v->seq == (uint64_t)i);
		}
	}
	kvx_extmap_fini(&e);
}

/* Home slots of uniform keys follow the order of their bits after the
 * stripe's, at every size: the bulk loader fills tables front to back by
 * sorting on those bits. */
static void
test_home_order(void **state)
{
	(void)state;
	for (uint32_t bits = 4; bits < 30; bits++) {
		kvx_seqmap t;
		kvx_seqmap_init(&t);
		t.bits = bits;
		uint64_t a = next_rand(), b = next_rand();
		uint64_t ka = a << KVX_STRIPE_BITS, kb = b << KVX_STRIPE_BITS;
		size_t ha = kvx_seqmap_home(&t, a), hb = kvx_seqmap_home(&t, b);
		assert_true(ha < ((size_t)1 << bits));
		assert_true(hb < ((size_t)1 << bits));
		assert_true(ka <= kb ? ha <= hb : ha >= hb);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_against_model),
	    cmocka_unit_test(test_wrap_and_zero),
	    cmocka_unit_test(test_home_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
