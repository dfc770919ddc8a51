#include "holders.h"

#include <string.h>

#include "alloc.h"

void
kvx_hold_init(kvx_holdmap *h)
{
	memset(h, 0, sizeof(*h));
	for (uint32_t s = 0; s < KVX_STRIPES; s++) {
		kvx_seqmap_init(&h->stripes[s].map);
	}
}

void
kvx_hold_fini(kvx_holdmap *h)
{
	for (uint32_t s = 0; s < KVX_STRIPES; s++) {
		kvx_stripe *st = &h->stripes[s];
		kvx_seqmap_fini(&st->map);
		for (uint32_t i = 0; i < st->n_lists; i++) {
			kvi_free(st->lists[i]);
		}
		kvi_free(st->lists);
		kvi_free(st->free_ids);
	}
	memset(h, 0, sizeof(*h));
}

static void
kvx_seqs_add(kvx_stripe *st, int64_t d)
{
	atomic_store_explicit(
	    &st->seqs,
	    atomic_load_explicit(&st->seqs, memory_order_relaxed) + (uint64_t)d,
	    memory_order_relaxed);
}

static uint32_t
kvx_list_new(kvx_stripe *st, uint32_t cap)
{
	uint32_t id;
	if (st->n_free > 0) {
		id = st->free_ids[--st->n_free];
	} else {
		if (st->n_lists == st->cap_lists) {
			st->cap_lists = st->cap_lists ? st->cap_lists * 2 : 16;
			st->lists = kvi_reallocarray(st->lists, st->cap_lists,
						     sizeof(*st->lists));
		}
		id = st->n_lists++;
	}
	st->lists[id] = kvi_malloc(sizeof(kvx_hlist) + cap * sizeof(uint32_t));
	st->lists[id]->n = 0;
	st->lists[id]->cap = cap;
	return id;
}

static void
kvx_list_free(kvx_stripe *st, uint32_t id)
{
	kvi_free(st->lists[id]);
	st->lists[id] = NULL;
	if (st->n_free == st->cap_free) {
		st->cap_free = st->cap_free ? st->cap_free * 2 : 16;
		st->free_ids = kvi_reallocarray(st->free_ids, st->cap_free,
						sizeof(uint32_t));
	}
	st->free_ids[st->n_free++] = id;
}

/* kvx_list_pos returns the position of lid in l, or where it would go. */
static uint32_t
kvx_list_pos(const kvx_hlist *l, uint32_t lid, bool *found)
{
	uint32_t lo = 0, hi = l->n;
	/* Lists grow by appends in id order most of the time: look at the
	 * end first. */
	if (hi > 0 && KVX_HOLDER_LID(l->h[hi - 1]) < lid) {
		*found = false;
		return hi;
	}
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (KVX_HOLDER_LID(l->h[mid]) < lid) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	*found = lo < l->n && KVX_HOLDER_LID(l->h[lo]) == lid;
	return lo;
}

const uint32_t *
kvx_hold_get(kvx_stripe *st, uint64_t seq, uint32_t *one, uint32_t *n)
{
	kvx_holder *w = kvx_seqmap_find(&st->map, seq);
	if (w == NULL) {
		*n = 0;
		return NULL;
	}
	if (w->w & KVX_LIST_FLAG) {
		kvx_hlist *l = st->lists[w->w & ~KVX_LIST_FLAG];
		*n = l->n;
		return l->h;
	}
	*n = 1;
	*one = w->w;
	return one;
}

void
kvx_hold_drop(kvx_stripe *st, uint64_t seq, uint32_t lid)
{
	kvx_holder *w = kvx_seqmap_find(&st->map, seq);
	if (w == NULL) {
		return;
	}
	if (!(w->w & KVX_LIST_FLAG)) {
		if (KVX_HOLDER_LID(w->w) == lid) {
			kvx_seqmap_remove(&st->map, seq, NULL);
			kvx_seqs_add(st, -1);
		}
		return;
	}
	uint32_t id = w->w & ~KVX_LIST_FLAG;
	kvx_hlist *l = st->lists[id];
	bool found;
	uint32_t pos = kvx_list_pos(l, lid, &found);
	if (!found) {
		return;
	}
	memmove(&l->h[pos], &l->h[pos + 1], (l->n - pos - 1) * sizeof(l->h[0]));
	if (--l->n == 1) {
		w->w = l->h[0]; /* back inline */
		kvx_list_free(st, id);
	}
}

uint8_t
kvx_hold_put(kvx_stripe *st, uint64_t seq, uint32_t lid, uint8_t tiers)
{
	bool added;
	kvx_holder *w = kvx_seqmap_insert(&st->map, seq, &added);
	uint32_t word = KVX_HOLDER(lid, tiers);
	if (added) {
		w->w = word;
		kvx_seqs_add(st, 1);
		return 0;
	}
	if (!(w->w & KVX_LIST_FLAG)) {
		if (KVX_HOLDER_LID(w->w) == lid) {
			uint8_t old = KVX_HOLDER_TIERS(w->w);
			w->w = word;
			return old;
		}
		uint32_t other = w->w;
		uint32_t id = kvx_list_new(st, 4);
		kvx_hlist *l = st->lists[id];
		bool first = KVX_HOLDER_LID(other) < lid;
		l->h[0] = first ? other : word;
		l->h[1] = first ? word : other;
		l->n = 2;
		w->w = KVX_LIST_FLAG | id;
		return 0;
	}
	uint32_t id = w->w & ~KVX_LIST_FLAG;
	kvx_hlist *l = st->lists[id];
	bool found;
	uint32_t pos = kvx_list_pos(l, lid, &found);
	if (found) {
		uint8_t old = KVX_HOLDER_TIERS(l->h[pos]);
		l->h[pos] = word;
		return old;
	}
	if (l->n == l->cap) {
		l->cap *= 2;
		l = kvi_realloc(l,
				sizeof(kvx_hlist) + l->cap * sizeof(uint32_t));
		st->lists[id] = l;
	}
	memmove(&l->h[pos + 1], &l->h[pos], (l->n - pos) * sizeof(l->h[0]));
	l->h[pos] = word;
	l->n++;
	return 0;
}

void
kvx_hold_prefetch(kvx_holdmap *h, uint64_t seq)
{
	kvx_seqmap_prefetch(&kvx_hold_stripe(h, seq)->map, seq);
}

void
kvx_hold_reserve(kvx_stripe *st, size_t n)
{
	kvx_seqmap_reserve(&st->map, n);
}

uint64_t
kvx_hold_seqs(const kvx_holdmap *h)
{
	uint64_t n = 0;
	for (uint32_t s = 0; s < KVX_STRIPES; s++) {
		n += atomic_load_explicit(&h->stripes[s].seqs,
					  memory_order_relaxed);
	}
	return n;
}

void
kvx_hold_bytes(const kvx_holdmap *h, uint64_t *table, uint64_t *lists)
{
	for (uint32_t s = 0; s < KVX_STRIPES; s++) {
		const kvx_stripe *st = &h->stripes[s];
		*table += kvx_seqmap_bytes(&st->map);
		*lists += (uint64_t)st->cap_lists * sizeof(*st->lists) +
			  (uint64_t)st->cap_free * sizeof(uint32_t);
		for (uint32_t i = 0; i < st->n_lists; i++) {
			if (st->lists[i] != NULL) {
				*lists += sizeof(kvx_hlist) +
					  st->lists[i]->cap * sizeof(uint32_t);
			}
		}
	}
}
