/*
 * test_index_groups.c - the cache groups of hybrid listeners in the index
 * (index.h, index_groups.c): a group is a listener of its own, never
 * reported by itself; its owner is answered with the hit of all its
 * groups and each group's own; its records go through foreach as
 * snapshots and hand-offs carry them; removing the owner removes them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "index.h"

#define NB 6

typedef struct seen {
	int n;
	uint32_t lid[8];
	kvx_match m[8];
	uint32_t ids[8][KVX_MAX_GROUPS], blocks[8][KVX_MAX_GROUPS];
} seen;

static void
on_match(void *arg, const kvx_listener_info *info, const kvx_match *m)
{
	seen *s = arg;
	assert_true(s->n < 8);
	s->lid[s->n] = info->lid;
	s->m[s->n] = *m;
	for (uint32_t g = 0; g < m->n_groups; g++) {
		s->ids[s->n][g] = m->group_ids[g];
		s->blocks[s->n][g] = m->group_blocks[g];
	}
	s->n++;
}

static uint64_t seq[NB], ext[NB];

static kvx_index *
setup_index(void)
{
	for (int i = 0; i < NB; i++) {
		seq[i] = 0x1000 + (uint64_t)i * 7919;
		ext[i] = 0x9000 + (uint64_t)i;
	}
	kvx_index *idx = kvx_index_alloc();
	assert_int_equal(
	    kvx_listener_add(idx, 0, "h#0", "ns/h", 10, 0, "m", 16), KVI_OK);
	assert_int_equal(
	    kvx_listener_add(idx, 1, "p#0", "ns/p", 11, 0, "m", 16), KVI_OK);
	return idx;
}

static void
store_n(kvx_index *idx, uint32_t lid, uint32_t owner, int from, int to)
{
	kvx_write_begin(idx, owner);
	for (int i = from; i < to; i++) {
		kvx_store(idx, lid, ext[i], seq[i], KVI_TIER_GPU);
	}
	kvx_write_end(idx, owner);
}

static seen
query(kvx_index *idx, const kvx_filter *f)
{
	seen s = {0};
	uint32_t bs;
	assert_int_equal(kvx_query(idx, "m", seq, NB, f, on_match, &s, &bs),
			 KVI_OK);
	return s;
}

static const seen *
find(const seen *s, uint32_t lid, int *at)
{
	for (int i = 0; i < s->n; i++) {
		if (s->lid[i] == lid) {
			*at = i;
			return s;
		}
	}
	return NULL;
}

/* Two full-attention groups: the listener reuses as far as both hold. */
static void
test_group_is_not_a_listener(void **state)
{
	(void)state;
	kvx_index *idx = setup_index();
	assert_int_equal(kvx_group_add(idx, 0, 1, 5), KVI_OK);
	assert_int_equal(kvx_group_add(idx, 0, 1, 6), KVI_EEXIST);
	assert_int_equal(kvx_group_add(idx, 5, 1, 6), KVI_EINVAL);
	assert_int_equal(kvx_group_add(idx, 0, 0, 6), KVI_EINVAL);
	assert_int_equal(kvx_group_add(idx, 0, KVX_MAX_GROUPS, 6), KVI_EINVAL);
	assert_int_equal(kvx_group_lid(idx, 0, 1), 5);
	assert_int_equal(kvx_group_lid(idx, 0, 0), 0);
	assert_int_equal(kvx_group_lid(idx, 0, 2), KVX_NO_LID);
	assert_int_equal(kvx_groups_count(idx, 0), 2);
	assert_int_equal(kvx_groups_count(idx, 1), 1);

	store_n(idx, 0, 0, 0, NB); /* group 0: every block */
	store_n(idx, 5, 0, 0, 3);  /* group 1: the first three */
	store_n(idx, 1, 1, 0, 4);  /* the plain listener */
	seen s = query(idx, NULL);
	assert_int_equal(s.n, 2); /* the group's listener is not one */
	int at = -1;
	assert_non_null(find(&s, 0, &at));
	assert_int_equal(s.m[at].longest, 3);
	assert_int_equal(s.m[at].gpu, 3);
	assert_int_equal(s.m[at].n_groups, 2);
	assert_int_equal(s.ids[at][0], 0);
	assert_int_equal(s.ids[at][1], 1);
	assert_int_equal(s.blocks[at][0], NB);
	assert_int_equal(s.blocks[at][1], 3);
	assert_non_null(find(&s, 1, &at));
	assert_int_equal(s.m[at].longest, 4);
	assert_int_equal(s.m[at].n_groups, 0);

	/* the group's own listener is never found as a rank's */
	uint32_t lid, bs;
	assert_int_equal(kvx_listener_find(idx, "m", 10, 0, &lid, &bs), KVI_OK);
	assert_int_equal(lid, 0);
	kvx_stats st;
	kvx_index_stats(idx, &st);
	assert_int_equal(st.listeners, 2);
	assert_int_equal(kvx_listener_entries(idx, 0), NB + 3);

	/* a filter applies to the hybrid listener */
	uint64_t only = 11;
	kvx_filter f = {.instances = &only, .n_instances = 1};
	s = query(idx, &f);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.lid[0], 1);

	/* removing the owner removes its group */
	kvx_listener_remove(idx, 0);
	assert_false(kvx_listener_exists(idx, 5));
	assert_false(kvx_index_hybrid(idx));
	s = query(idx, NULL);
	assert_int_equal(s.n, 1);
	kvx_index_free(idx);
}

/* A group that holds none of the prompt: no hit at all. */
static void
test_empty_group_no_hit(void **state)
{
	(void)state;
	kvx_index *idx = setup_index();
	assert_int_equal(kvx_group_add(idx, 0, 2, 7), KVI_OK);
	store_n(idx, 0, 0, 0, NB);
	seen s = query(idx, NULL);
	int at = -1;
	assert_null(find(&s, 0, &at));
	assert_true(kvx_index_hybrid(idx));
	kvx_index_free(idx);
}

/* Specs: a plain group 0 stays plain; another kind makes it hybrid;
 * foreach gives every group's entries tagged, and a record of each
 * spec, which kvx_record_spec reads back. */
typedef struct recs {
	int entries[KVX_MAX_GROUPS], specs;
	kvx_group_spec spec[KVX_MAX_GROUPS];
	bool has_spec[KVX_MAX_GROUPS];
} recs;

static void
on_record(void *arg, uint64_t e, uint64_t s, uint8_t tiers)
{
	recs *r = arg;
	uint32_t g;
	kvx_group_spec sp;
	if (kvx_record_spec(e, s, tiers, &g, &sp)) {
		r->specs++;
		r->spec[g] = sp;
		r->has_spec[g] = true;
	} else {
		assert_true((tiers & KVX_TIERS_ALL) != 0);
		r->entries[tiers >> KVX_GROUP_SHIFT]++;
	}
}

static void
test_specs_and_records(void **state)
{
	(void)state;
	kvx_index *idx = setup_index();
	kvx_group_spec full = {.kind = KVX_KIND_FULL, .ratio = 1};
	kvx_write_begin(idx, 0);
	kvx_group_spec_set(idx, 0, 0, &full);
	kvx_write_end(idx, 0);
	assert_false(kvx_index_hybrid(idx));
	assert_int_equal(kvx_listener_records(idx, 0), 0);

	kvx_group_spec swa = {
	    .kind = KVX_KIND_SLIDING, .ratio = 1, .window = 64};
	kvx_group_spec bad = {.kind = KVX_KIND_SLIDING, .ratio = 0};
	assert_int_equal(kvx_group_add(idx, 0, 3, 9), KVI_OK);
	kvx_write_begin(idx, 0);
	kvx_group_spec_set(idx, 0, 3, &swa);
	kvx_group_spec_set(idx, 0, 3, &bad); /* refused: kept */
	kvx_write_end(idx, 0);
	kvx_group_spec got;
	assert_true(kvx_group_spec_get(idx, 0, 3, &got));
	assert_int_equal(got.kind, KVX_KIND_SLIDING);
	assert_int_equal(got.window, 64);
	assert_false(kvx_group_spec_get(idx, 0, 2, &got));
	store_n(idx, 0, 0, 0, 4);
	store_n(idx, 9, 0, 2, 5);
	/* the entries, and a spec of group 0 and of group 3 */
	assert_int_equal(kvx_listener_records(idx, 0), 4 + 3 + 2);
	recs r = {0};
	kvx_listener_foreach(idx, 0, on_record, &r);
	assert_int_equal(r.entries[0], 4);
	assert_int_equal(r.entries[3], 3);
	assert_int_equal(r.specs, 2);
	assert_true(r.has_spec[0] && r.has_spec[3]);
	assert_int_equal(r.spec[3].kind, KVX_KIND_SLIDING);
	assert_int_equal(r.spec[3].window, 64);
	assert_int_equal(r.spec[3].ratio, 1);
	assert_int_equal(r.spec[0].kind, KVX_KIND_FULL);
	kvx_index_free(idx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_group_is_not_a_listener),
	    cmocka_unit_test(test_empty_group_no_hit),
	    cmocka_unit_test(test_specs_and_records),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
