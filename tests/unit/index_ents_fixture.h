/*
 * index_ents_fixture.h - a listener's entries in an index, collected and
 * sorted by external hash, for tests that compare two indexes entry by
 * entry (test_image, test_restart_tail).
 */
#ifndef KVI_TESTS_INDEX_ENTS_FIXTURE_H
#define KVI_TESTS_INDEX_ENTS_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>

#include "index.h"

typedef struct ent {
	uint64_t ext, seq;
	uint8_t tiers;
} ent;

typedef struct ents {
	ent *v;
	size_t n, cap;
} ents;

static inline void
ents_collect(void *arg, uint64_t ext, uint64_t seq, uint8_t tiers)
{
	ents *e = arg;
	if (e->n == e->cap) {
		e->cap = e->cap ? e->cap * 2 : 1024;
		e->v = realloc(e->v, e->cap * sizeof(*e->v));
	}
	e->v[e->n++] = (ent){ext, seq, tiers};
}

static inline int
ent_cmp(const void *a, const void *b)
{
	const ent *x = a, *y = b;
	return x->ext < y->ext ? -1 : x->ext > y->ext;
}

/* ents_of returns the entries listener lid of idx holds, sorted by
 * external hash (free v). */
static inline ents
ents_of(kvx_index *idx, uint32_t lid)
{
	ents e = {0};
	kvx_listener_foreach(idx, lid, ents_collect, &e);
	if (e.n > 1) {
		qsort(e.v, e.n, sizeof(ent), ent_cmp);
	}
	return e;
}

#endif /* KVI_TESTS_INDEX_ENTS_FIXTURE_H */
