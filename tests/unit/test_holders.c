/*
 * test_holders.c - a stripe's holder lists (shard/index/holders.h) against a
 * model: random puts and drops of up to a few hundred holders per sequence
 * hash, so that lists move between every block size up to a pool mapped
 * from the kernel and back, and blocks freed by one list are reused by
 * the next.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "holders.h"
#include "xorshift.h"

#define N_SEQS 64
#define N_LIDS 300

static uint64_t rng = 0x13198a2e03707344ull;

static uint64_t
next_rand(void)
{
	return xorshift64(&rng);
}

/* The model: tiers[s][l] of listener l for seqs[s], 0 when not held. */
static uint64_t seqs[N_SEQS];
static uint8_t tiers[N_SEQS][N_LIDS];

static void
check_all(kvx_holdmap *h)
{
	uint64_t held = 0;
	for (int s = 0; s < N_SEQS; s++) {
		uint32_t one, n;
		const uint32_t *w = kvx_hold_get(kvx_hold_stripe(h, seqs[s]),
						 seqs[s], &one, &n);
		uint32_t k = 0;
		for (uint32_t l = 0; l < N_LIDS; l++) {
			if (tiers[s][l] == 0) {
				continue;
			}
			assert_true(k < n);
			assert_int_equal(KVX_HOLDER_LID(w[k]), l);
			assert_int_equal(KVX_HOLDER_TIERS(w[k]), tiers[s][l]);
			k++;
		}
		assert_int_equal(k, n);
		assert_true(n > 0 || w == NULL);
		held += n > 0;
	}
	assert_int_equal(kvx_hold_seqs(h), held);
}

/* step puts or drops one random holder; a sequence hash fills up when s
 * is even and is emptied mostly when odd, so lists grow and shrink. */
static void
step(kvx_holdmap *h, int phase)
{
	int s = (int)(next_rand() % N_SEQS);
	uint32_t l = (uint32_t)(next_rand() % N_LIDS);
	kvx_stripe *st = kvx_hold_stripe(h, seqs[s]);
	bool grow = (s % 2 == 0) == (phase % 2 == 0);
	if (next_rand() % 8 < (grow ? 7u : 1u)) {
		uint8_t t = (uint8_t)(next_rand() % 7 + 1);
		assert_int_equal(kvx_hold_put(st, seqs[s], l, t), tiers[s][l]);
		tiers[s][l] = t;
	} else {
		kvx_hold_drop(st, seqs[s], l);
		tiers[s][l] = 0;
	}
}

static void
test_random_against_model(void **state)
{
	(void)state;
	kvx_holdmap *h = malloc(sizeof(*h));
	kvx_hold_init(h);
	/* All in one stripe, so they share one pool. */
	for (int s = 0; s < N_SEQS; s++) {
		seqs[s] = (UINT64_C(7) << 56) | (next_rand() >> 8) | 1;
	}
	memset(tiers, 0, sizeof(tiers));
	kvx_stripe *st = kvx_hold_stripe(h, seqs[0]);
	size_t used_after[6] = {0};
	for (int phase = 0; phase < 6; phase++) {
		for (int i = 0; i < 40000; i++) {
			step(h, phase);
		}
		check_all(h);
		used_after[phase] = st->pool_used;
	}
	/* Half the hashes fill while the other half empty, then the other
	 * way round: the same sizes come back, so the pool stops growing
	 * once it has had its first full swing. */
	assert_true(used_after[5] == used_after[3]);
	uint64_t table = 0, lists = 0;
	kvx_hold_bytes(h, &table, &lists);
	assert_true(lists >= st->pool_used * sizeof(uint32_t));
	/* Empty every list: each goes back inline, then away. */
	for (int s = 0; s < N_SEQS; s++) {
		for (uint32_t l = 0; l < N_LIDS; l++) {
			kvx_hold_drop(st, seqs[s], l);
			tiers[s][l] = 0;
		}
	}
	check_all(h);
	assert_int_equal(kvx_seqmap_size(&st->map), 0);
	kvx_hold_fini(h);
	free(h);
}

/* A holder of a list that is dropped from the middle, front and back
 * keeps the others in order; the last two go back inline. */
static void
test_list_edges(void **state)
{
	(void)state;
	kvx_holdmap *h = malloc(sizeof(*h));
	kvx_hold_init(h);
	uint64_t seq = 0xfedcba9876543210ull;
	kvx_stripe *st = kvx_hold_stripe(h, seq);
	for (uint32_t l = 10; l > 0; l--) {
		assert_int_equal(kvx_hold_put(st, seq, l, 1), 0);
	}
	uint32_t drop[] = {5, 1, 10, 2, 9, 3, 8, 4};
	uint32_t n, one;
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
		kvx_hold_drop(st, seq, drop[i]);
		kvx_hold_drop(st, seq, drop[i]); /* not a holder: no-op */
		const uint32_t *w = kvx_hold_get(st, seq, &one, &n);
		assert_int_equal(n, 9 - i);
		for (uint32_t k = 1; k < n; k++) {
			assert_true(KVX_HOLDER_LID(w[k - 1]) <
				    KVX_HOLDER_LID(w[k]));
		}
	}
	const uint32_t *w = kvx_hold_get(st, seq, &one, &n);
	assert_int_equal(n, 2);
	assert_int_equal(KVX_HOLDER_LID(w[0]), 6);
	assert_int_equal(KVX_HOLDER_LID(w[1]), 7);
	kvx_hold_drop(st, seq, 6);
	w = kvx_hold_get(st, seq, &one, &n);
	assert_int_equal(n, 1);
	assert_ptr_equal(w, &one);
	assert_int_equal(KVX_HOLDER_LID(one), 7);
	kvx_hold_fini(h);
	free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_against_model),
	    cmocka_unit_test(test_list_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
