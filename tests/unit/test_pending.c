/*
 * test_pending.c - pending entries (shard/pending/pending.h): what a
 * routed request makes pending, how far a prefix extends, and each way an
 * entry ends - confirmed, expired, dropped, evicted by either bound -
 * checked against plain models kept beside it over random operations,
 * with and without bounds small enough to evict all the time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pending.h"

static const uint64_t seq[] = {11, 12, 13, 14, 15, 16, 17, 18};

static void
test_add_extend_confirm(void **state)
{
	(void)state;
	kvd_pending *p = kvd_pending_alloc(NULL);
	assert_true(kvd_empty(p));
	assert_int_equal(kvd_add(p, 3, seq, 6, 1000, 500), 6);
	assert_false(kvd_empty(p));
	kvd_read_begin(p);
	assert_int_equal(kvd_extend(p, 3, seq, 0, 8, 1000), 6);
	assert_int_equal(kvd_extend(p, 3, seq, 2, 8, 1000), 4);
	assert_int_equal(kvd_extend(p, 4, seq, 0, 8, 1000), 0);
	/* a prompt that starts elsewhere: keys are sequence hashes, so a
	 * block pending anywhere in the chain extends it from there */
	const uint64_t other[] = {21, 12, 13};
	assert_int_equal(kvd_extend(p, 3, other, 0, 3, 1000), 0);
	assert_int_equal(kvd_extend(p, 3, other, 1, 3, 1000), 2);
	kvd_read_end(p);

	/* the engine stores blocks 0-1: no longer pending, the rest is */
	kvd_confirm(p, 3, seq, 2);
	kvd_read_begin(p);
	assert_int_equal(kvd_extend(p, 3, seq, 0, 8, 1000), 0);
	assert_int_equal(kvd_extend(p, 3, seq, 2, 8, 1000), 4);
	kvd_read_end(p);
	kvd_stats st;
	kvd_stats_get(p, &st);
	assert_int_equal(st.entries, 4);
	assert_int_equal(st.routed, 1);
	assert_int_equal(st.added, 6);
	assert_int_equal(st.confirmed, 2);
	kvd_listener_stats ls;
	kvd_listener_stats_get(p, 3, &ls);
	assert_int_equal(ls.confirmed, 2);
	assert_int_equal(ls.entries, 4);
	/* a confirm of blocks that are not pending counts nothing */
	kvd_confirm(p, 3, seq, 2);
	kvd_confirm(p, 9, seq, 8);
	kvd_stats_get(p, &st);
	assert_int_equal(st.confirmed, 2);
	kvd_pending_free(p);
}

static void
test_expiry_and_refresh(void **state)
{
	(void)state;
	kvd_pending *p = kvd_pending_alloc(NULL);
	kvd_add(p, 1, seq, 4, 1000, 100);
	kvd_add(p, 2, seq, 4, 1050, 100);
	kvd_read_begin(p);
	/* at 1100 listener 1's entries are dead for a query at once */
	assert_int_equal(kvd_extend(p, 1, seq, 0, 4, 1099), 4);
	assert_int_equal(kvd_extend(p, 1, seq, 0, 4, 1100), 0);
	assert_int_equal(kvd_extend(p, 2, seq, 0, 4, 1100), 4);
	kvd_read_end(p);
	/* a second routed request refreshes block 0-1 of listener 1 */
	kvd_add(p, 1, seq, 2, 1090, 100);
	assert_int_equal(kvd_sweep(p, 1100), 2); /* blocks 2-3 of 1 */
	kvd_read_begin(p);
	assert_int_equal(kvd_extend(p, 1, seq, 0, 4, 1150), 2);
	kvd_read_end(p);
	assert_int_equal(kvd_sweep(p, 1200), 6);
	assert_true(kvd_empty(p));
	kvd_stats st;
	kvd_stats_get(p, &st);
	assert_int_equal(st.expired, 8);
	assert_int_equal(st.added, 8);
	assert_int_equal(st.routed, 3);
	kvd_pending_free(p);
}

static void
count_listener(void *arg, uint32_t lid)
{
	uint32_t *mask = arg;
	*mask |= 1u << lid;
}

static void
test_foreach_and_drops(void **state)
{
	(void)state;
	kvd_pending *p = kvd_pending_alloc(NULL);
	kvd_add(p, 0, seq, 3, 0, 1000);
	kvd_add(p, 2, seq, 5, 0, 1000);
	kvd_add(p, 5, seq + 1, 3, 0, 1000);
	uint32_t mask = 0;
	kvd_read_begin(p);
	kvd_foreach_listener(p, seq[0], 10, count_listener, &mask);
	kvd_read_end(p);
	assert_int_equal(mask, (1u << 0) | (1u << 2));

	/* a removal of block 1 on listener 2 cuts its prefix there */
	kvd_drop(p, 2, seq + 1, 1, KVD_DROP_REMOVED);
	kvd_read_begin(p);
	assert_int_equal(kvd_extend(p, 2, seq, 0, 8, 10), 1);
	kvd_read_end(p);
	kvd_drop_listener(p, 0, KVD_DROP_CLEARED);
	kvd_drop_listener(p, 5, KVD_DROP_RESTART);
	kvd_stats st;
	kvd_stats_get(p, &st);
	assert_int_equal(st.dropped[KVD_DROP_REMOVED], 1);
	assert_int_equal(st.dropped[KVD_DROP_CLEARED], 3);
	assert_int_equal(st.dropped[KVD_DROP_RESTART], 3);
	assert_int_equal(st.entries, 4);
	kvd_listener_stats ls;
	kvd_listener_stats_get(p, 5, &ls);
	assert_int_equal(ls.dropped, 3);
	kvd_drop_listener(p, 5, KVD_DROP_GONE);
	kvd_listener_stats_get(p, 5, &ls);
	assert_int_equal(ls.dropped, 0); /* a listener gone is forgotten */
	kvd_drop_listener(p, 2, KVD_DROP_GONE);
	assert_true(kvd_empty(p));
	kvd_pending_free(p);
}

static void
test_bounds(void **state)
{
	(void)state;
	kvd_pending *p = kvd_pending_alloc(
	    &(kvd_config){.max_entries = 10, .max_per_listener = 4});
	/* a request longer than the listener's bound keeps its first blocks */
	assert_int_equal(kvd_add(p, 1, seq, 8, 0, 1000), 4);
	kvd_read_begin(p);
	assert_int_equal(kvd_extend(p, 1, seq, 0, 8, 1), 4);
	kvd_read_end(p);
	/* a second request to the same listener evicts its oldest */
	uint64_t other[] = {101, 102};
	kvd_add(p, 1, other, 2, 0, 1000);
	kvd_read_begin(p);
	assert_int_equal(kvd_extend(p, 1, seq, 0, 8, 1), 0);
	assert_int_equal(kvd_extend(p, 1, seq, 2, 8, 1), 2);
	assert_int_equal(kvd_extend(p, 1, other, 0, 2, 1), 2);
	kvd_read_end(p);
	/* the shard's bound: 10, the oldest of any listener go first */
	for (uint32_t lid = 2; lid < 6; lid++) {
		kvd_add(p, lid, seq, 4, lid, 1000);
	}
	kvd_stats st;
	kvd_stats_get(p, &st);
	assert_int_equal(st.entries, 10);
	assert_int_equal(st.evicted, 2 + 10);
	kvd_read_begin(p);
	assert_int_equal(kvd_extend(p, 5, seq, 0, 8, 1), 4);
	assert_int_equal(kvd_extend(p, 1, other, 0, 2, 1), 0);
	kvd_read_end(p);
	kvd_pending_free(p);
}

/* A model: per (listener, seq) an expiry, 0 for none. */
enum { M_LIDS = 6, M_SEQS = 24 };
typedef struct model {
	int64_t exp[M_LIDS][M_SEQS];
} model;

static void
test_random_against_model(void **state)
{
	(void)state;
	srand(7);
	kvd_pending *p = kvd_pending_alloc(NULL);
	model m = {0};
	uint64_t keys[M_SEQS];
	for (int i = 0; i < M_SEQS; i++) {
		keys[i] = 0x1000u + (uint64_t)i * 0x9E37u;
	}
	int64_t now = 1;
	for (int round = 0; round < 20000; round++) {
		now += rand() % 3;
		uint32_t lid = (uint32_t)(rand() % M_LIDS);
		size_t from = (size_t)(rand() % M_SEQS);
		size_t n = (size_t)(rand() % (M_SEQS - from)) + 1;
		switch (rand() % 6) {
		case 0:
		case 1: {
			uint32_t ttl = (uint32_t)(rand() % 40) + 1;
			kvd_add(p, lid, keys + from, n, now, ttl);
			for (size_t k = from; k < from + n; k++) {
				m.exp[lid][k] = now + ttl;
			}
			break;
		}
		case 2:
			kvd_confirm(p, lid, keys + from, n);
			for (size_t k = from; k < from + n; k++) {
				m.exp[lid][k] = 0;
			}
			break;
		case 3:
			kvd_drop(p, lid, keys + from, n, KVD_DROP_REMOVED);
			for (size_t k = from; k < from + n; k++) {
				m.exp[lid][k] = 0;
			}
			break;
		case 4:
			if (rand() % 20 == 0) {
				kvd_drop_listener(p, lid, KVD_DROP_CLEARED);
				memset(m.exp[lid], 0, sizeof(m.exp[lid]));
			}
			break;
		default:
			kvd_sweep(p, now);
			break;
		}
		/* extend agrees with the model from every start */
		kvd_read_begin(p);
		for (size_t s = 0; s < M_SEQS; s++) {
			size_t want = 0;
			while (s + want < M_SEQS &&
			       m.exp[lid][s + want] > now) {
				want++;
			}
			assert_int_equal(
			    kvd_extend(p, lid, keys, s, M_SEQS, now), want);
		}
		kvd_read_end(p);
	}
	kvd_pending_free(p);
}

/* A model with the bounds: per (listener, seq) whether an entry is
 * there, its expiry, and its age (a stamp, renewed when refreshed): the
 * oldest is the one each bound evicts and the sweep reaches first. */
enum { B_LIDS = 4, B_SEQS = 16, B_MAX = 20, B_PER = 7 };
typedef struct bmodel {
	bool on[B_LIDS][B_SEQS];
	int64_t exp[B_LIDS][B_SEQS];
	uint64_t stamp[B_LIDS][B_SEQS];
	uint64_t clock;
} bmodel;

/* oldest finds the oldest entry, of lid (or of all, lid -1). */
static bool
oldest(const bmodel *m, int lid, int *ol, int *ok)
{
	bool any = false;
	for (int l = 0; l < B_LIDS; l++) {
		for (int k = 0; k < B_SEQS; k++) {
			if (!m->on[l][k] || (lid >= 0 && l != lid)) {
				continue;
			}
			if (!any || m->stamp[l][k] < m->stamp[*ol][*ok]) {
				*ol = l;
				*ok = k;
				any = true;
			}
		}
	}
	return any;
}

static size_t
count(const bmodel *m, int lid)
{
	size_t n = 0;
	for (int l = 0; l < B_LIDS; l++) {
		for (int k = 0; k < B_SEQS; k++) {
			n += m->on[l][k] && (lid < 0 || l == lid);
		}
	}
	return n;
}

static void
model_add(bmodel *m, int lid, size_t from, size_t n, int64_t exp)
{
	if (n > B_PER) {
		n = B_PER;
	}
	for (size_t k = from; k < from + n; k++) {
		if (!m->on[lid][k]) {
			int ol, ok;
			if (count(m, lid) >= B_PER &&
			    oldest(m, lid, &ol, &ok)) {
				m->on[ol][ok] = false;
			}
			if (count(m, -1) >= B_MAX && oldest(m, -1, &ol, &ok)) {
				m->on[ol][ok] = false;
			}
		}
		m->on[lid][k] = true;
		m->exp[lid][k] = exp;
		m->stamp[lid][k] = ++m->clock;
	}
}

static void
model_sweep(bmodel *m, int64_t now)
{
	int ol, ok;
	while (oldest(m, -1, &ol, &ok) && m->exp[ol][ok] <= now) {
		m->on[ol][ok] = false;
	}
}

/* Random operations under small bounds, against the model: what each
 * bound evicts, what a sweep ends, every listener's walk from every
 * start, and the count of entries. */
static void
test_random_bounded_against_model(void **state)
{
	(void)state;
	srand(11);
	kvd_pending *p = kvd_pending_alloc(
	    &(kvd_config){.max_entries = B_MAX, .max_per_listener = B_PER});
	static bmodel m;
	memset(&m, 0, sizeof(m));
	uint64_t keys[B_SEQS];
	for (int i = 0; i < B_SEQS; i++) {
		keys[i] = 0x5000u + (uint64_t)i * 0x9E37u;
	}
	int64_t now = 1;
	for (int round = 0; round < 20000; round++) {
		now += rand() % 3;
		int lid = rand() % B_LIDS;
		size_t from = (size_t)(rand() % B_SEQS);
		size_t n = (size_t)(rand() % (B_SEQS - from)) + 1;
		switch (rand() % 7) {
		case 0:
		case 1:
		case 2: {
			uint32_t ttl = (uint32_t)(rand() % 30) + 1;
			size_t took =
			    kvd_add(p, (uint32_t)lid, keys + from, n, now, ttl);
			assert_int_equal(took, n < B_PER ? n : B_PER);
			model_add(&m, lid, from, n, now + ttl);
			break;
		}
		case 3:
			kvd_confirm(p, (uint32_t)lid, keys + from, n);
			for (size_t k = from; k < from + n; k++) {
				m.on[lid][k] = false;
			}
			break;
		case 4:
			kvd_drop(p, (uint32_t)lid, keys + from, n,
				 KVD_DROP_REMOVED);
			for (size_t k = from; k < from + n; k++) {
				m.on[lid][k] = false;
			}
			break;
		case 5:
			if (rand() % 10 == 0) {
				kvd_drop_listener(p, (uint32_t)lid,
						  KVD_DROP_CLEARED);
				memset(m.on[lid], 0, sizeof(m.on[lid]));
			}
			break;
		default:
			kvd_sweep(p, now);
			model_sweep(&m, now);
			break;
		}
		kvd_stats st;
		kvd_stats_get(p, &st);
		assert_int_equal(st.entries, count(&m, -1));
		kvd_read_begin(p);
		for (int l = 0; l < B_LIDS; l++) {
			for (size_t s0 = 0; s0 < B_SEQS; s0++) {
				size_t want = 0;
				while (s0 + want < B_SEQS &&
				       m.on[l][s0 + want] &&
				       m.exp[l][s0 + want] > now) {
					want++;
				}
				assert_int_equal(kvd_extend(p, (uint32_t)l,
							    keys, s0, B_SEQS,
							    now),
						 want);
			}
		}
		kvd_read_end(p);
	}
	kvd_pending_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_add_extend_confirm),
	    cmocka_unit_test(test_expiry_and_refresh),
	    cmocka_unit_test(test_foreach_and_drops),
	    cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_random_against_model),
	    cmocka_unit_test(test_random_bounded_against_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
