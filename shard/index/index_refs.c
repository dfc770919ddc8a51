/*
 * index_refs.c - a listener's entries (external hash -> sequence hash and
 * tiers) and what they make of its partition's holders.
 *
 * A listener's map has one slot per block it holds, most of the index's
 * memory, so a slot does not keep the 64-bit sequence hash: it keeps a
 * reference to it, the hash's top KVX_REF_BITS bits and the entry's tiers,
 * 12 bytes where the whole hash took 17. The holder map resolves a
 * reference: its slots are in key order, so the hashes with a prefix sit
 * from one home slot on (a few homes, in a stripe of more than 2^21
 * slots), and of those the listener holds exactly one that is not an
 * exception.
 *
 * That is what the exceptions are for. When a listener would hold by
 * reference a second hash with the prefix of one it holds, the entries of
 * the second keep their whole hash in a small map of their own, and the
 * hash is counted in another, so that resolving skips it. A listener of n
 * entries has about n^2 / 2^30 of them (0.1 at 10,000, 9 at 100,000). A
 * hash that is an exception stays one until its last entry goes.
 *
 * Everything here runs on the writer thread, inside a write group, or
 * on a bulk load's threads, one listener to a thread.
 */
#include <stdio.h>
#include <stdlib.h>

#include "index_int.h"

/* ref_ok says whether l holds seq, whose holder word in st is w, by
 * reference. */
static bool
ref_ok(kvx_lis *l, const kvx_stripe *st, uint32_t w, uint64_t seq)
{
	return kvx_hold_word_tiers(st, w, l->info.lid) != 0 &&
	       (kvx_countmap_size(&l->exc_seqs) == 0 ||
		kvx_countmap_find(&l->exc_seqs, seq) == NULL);
}

/* ref_find finds the sequence hash with prefix p that l holds by
 * reference, skip excepted when has_skip. */
static bool
ref_find(kvx_lis *l, uint32_t p, bool has_skip, uint64_t skip, uint64_t *seq)
{
	const kvx_stripe *st =
	    &l->part->holders.stripes[p >> (KVX_REF_BITS - KVX_STRIPE_BITS)];
	const kvx_seqmap *m = &st->map;
	if (p == 0 && m->has_zero && !(has_skip && skip == 0) &&
	    ref_ok(l, st, m->zero_val.w, 0)) {
		*seq = 0;
		return true;
	}
	if (m->slots == NULL) {
		return false;
	}
	uint64_t lo = (uint64_t)p << (64 - KVX_REF_BITS);
	uint64_t hi = lo | ((UINT64_C(1) << (64 - KVX_REF_BITS)) - 1);
	size_t cap = kvx_seqmap_cap(m), mask = cap - 1;
	size_t home = kvx_seqmap_home(m, lo);
	size_t span = kvx_seqmap_home(m, hi) - home;
	size_t i = home;
	/* Robin Hood keeps a run of slots in home order: skip the keys of
	 * earlier homes, stop at the first key of a later one. */
	for (size_t dist = 0; dist < cap; dist++, i = (i + 1) & mask) {
		uint64_t k = m->slots[i].key;
		if (k == 0) {
			break;
		}
		size_t disp = (i - kvx_seqmap_home(m, k)) & mask;
		if (disp > dist) {
			continue;
		}
		if (dist - disp > span) {
			break;
		}
		if (KVX_REF_PREFIX(k) == p && !(has_skip && k == skip) &&
		    ref_ok(l, st, m->slots[i].val.w, k)) {
			*seq = k;
			return true;
		}
	}
	return false;
}

/* ref_resolve returns the sequence hash of l's reference r. */
static uint64_t
ref_resolve(kvx_lis *l, uint32_t r)
{
	uint64_t seq;
	if (!ref_find(l, KVX_REF_OF(r), false, 0, &seq)) {
		/* The holders and the listener's map disagree: nothing the
		 * index says could be trusted any more. */
		fprintf(stderr, "kvx: listener %u: reference %08x unresolved\n",
			l->info.lid, r);
		abort();
	}
	return seq;
}

/* ---- holders ------------------------------------------------------- */

void
kvx_holder_set(kvx_part *p, uint64_t seq, uint32_t lid, uint8_t tiers)
{
	kvx_stripe *st = kvx_hold_stripe(&p->holders, seq);
	if (tiers != 0) {
		(void)kvx_hold_put(st, seq, lid, tiers);
	} else {
		kvx_hold_drop(st, seq, lid);
	}
}

/* ref_update applies the change of one external hash's tiers for seq,
 * from `from` to `to` (0 meaning absent), to lid's holder word, counting
 * per tier when several external hashes of the listener share seq. */
static void
ref_update(kvx_lis *l, uint64_t seq, uint8_t from, uint8_t to)
{
	kvx_part *p = l->part;
	kvx_aliasval *a = kvx_aliasmap_size(&l->alias) == 0
			      ? NULL
			      : kvx_aliasmap_find(&l->alias, seq);
	if (a == NULL) {
		if (from != 0) {
			kvx_holder_set(p, seq, l->info.lid, to);
			return;
		}
		/* A new external hash: one probe that also tells whether
		 * another external hash of the listener holds seq. */
		uint8_t cur = kvx_hold_put(kvx_hold_stripe(&p->holders, seq),
					   seq, l->info.lid, to);
		if (cur == 0) {
			return;
		}
		/* A second external hash joins one that holds cur. */
		bool added;
		a = kvx_aliasmap_insert(&l->alias, seq, &added);
		for (int t = 0; t < KVI_TIER_COUNT; t++) {
			a->count[t] = (cur >> t) & 1;
		}
		a->total = 1;
	}
	uint8_t uni = 0;
	for (int t = 0; t < KVI_TIER_COUNT; t++) {
		a->count[t] = (uint16_t)(a->count[t] + ((to >> t) & 1) -
					 ((from >> t) & 1));
		uni |= (uint8_t)((a->count[t] != 0) << t);
	}
	a->total = (uint16_t)(a->total + (from == 0) - (to == 0));
	if (a->total <= 1) {
		kvx_aliasmap_remove(&l->alias, seq, NULL);
	}
	kvx_holder_set(p, seq, l->info.lid, uni);
}

/* ---- entries ------------------------------------------------------- */

void
kvx_ents_init(kvx_lis *l)
{
	kvx_refmap_init(&l->ext);
	kvx_extmap_init(&l->exc);
	kvx_countmap_init(&l->exc_seqs);
	kvx_aliasmap_init(&l->alias);
}

void
kvx_ents_fini(kvx_lis *l)
{
	kvx_refmap_fini(&l->ext);
	kvx_extmap_fini(&l->exc);
	kvx_countmap_fini(&l->exc_seqs);
	kvx_aliasmap_fini(&l->alias);
}

size_t
kvx_ents_bytes(const kvx_lis *l)
{
	return kvx_refmap_bytes(&l->ext) + kvx_extmap_bytes(&l->exc) +
	       kvx_countmap_bytes(&l->exc_seqs) + kvx_aliasmap_bytes(&l->alias);
}

/* One entry, as found. */
typedef struct kvx_ent {
	bool exc; /* in the exceptions' map */
	uint64_t seq;
	uint8_t tiers;
} kvx_ent;

static bool
ent_get(kvx_lis *l, uint64_t ext, kvx_ent *e)
{
	kvx_ref *r = kvx_refmap_find(&l->ext, ext);
	if (r != NULL) {
		*e =
		    (kvx_ent){false, ref_resolve(l, r->r), KVX_REF_TIERS(r->r)};
		return true;
	}
	kvx_extval *v = kvx_extmap_size(&l->exc) == 0
			    ? NULL
			    : kvx_extmap_find(&l->exc, ext);
	if (v != NULL) {
		*e = (kvx_ent){true, v->seq, v->tiers};
		return true;
	}
	return false;
}

static void
exc_count(kvx_lis *l, uint64_t seq, int d)
{
	bool added;
	kvx_count *c = kvx_countmap_insert(&l->exc_seqs, seq, &added);
	c->n = (uint32_t)((int64_t)c->n + d);
	if (c->n == 0) {
		kvx_countmap_remove(&l->exc_seqs, seq, NULL);
	}
}

/* ent_needs_exc says whether a new entry of l for seq must keep its
 * whole hash: seq is an exception already, or l holds by reference
 * another hash with its prefix. */
static bool
ent_needs_exc(kvx_lis *l, uint64_t seq)
{
	uint64_t other;
	return (kvx_countmap_size(&l->exc_seqs) != 0 &&
		kvx_countmap_find(&l->exc_seqs, seq) != NULL) ||
	       ref_find(l, KVX_REF_PREFIX(seq), true, seq, &other);
}

static void
ent_drop(kvx_lis *l, uint64_t ext, const kvx_ent *e)
{
	if (e->exc) {
		kvx_extmap_remove(&l->exc, ext, NULL);
		exc_count(l, e->seq, -1);
	} else {
		kvx_refmap_remove(&l->ext, ext, NULL);
	}
}

static void
ent_retier(kvx_lis *l, uint64_t ext, const kvx_ent *e, uint8_t tiers)
{
	if (e->exc) {
		kvx_extmap_find(&l->exc, ext)->tiers = tiers;
	} else {
		kvx_refmap_find(&l->ext, ext)->r = KVX_REF(e->seq, tiers);
	}
}

/* ents_store_slow is kvx_ents_store() for an external hash l has, or
 * one whose sequence hash must be an exception. */
static void
ents_store_slow(kvx_lis *l, uint64_t ext, uint64_t seq, uint8_t mask)
{
	kvx_ent e;
	if (ent_get(l, ext, &e)) {
		if (e.seq == seq) {
			uint8_t to = (uint8_t)(e.tiers | mask);
			if (to != e.tiers) {
				ent_retier(l, ext, &e, to);
				ref_update(l, seq, e.tiers, to);
			}
			return;
		}
		/* The engine reused an external hash for another prefix:
		 * the old mapping goes entirely. */
		ent_drop(l, ext, &e);
		ref_update(l, e.seq, e.tiers, 0);
	}
	bool added;
	if (ent_needs_exc(l, seq)) {
		kvx_extval *v = kvx_extmap_insert(&l->exc, ext, &added);
		*v = (kvx_extval){seq, mask};
		exc_count(l, seq, 1);
	} else {
		kvx_refmap_insert(&l->ext, ext, &added)->r = KVX_REF(seq, mask);
	}
	ref_update(l, seq, 0, mask);
}

void
kvx_ents_store(kvx_lis *l, uint64_t ext, uint64_t seq, uint8_t mask)
{
	bool added;
	kvx_ref *r = kvx_refmap_insert(&l->ext, ext, &added);
	if (added) {
		if ((kvx_extmap_size(&l->exc) == 0 ||
		     kvx_extmap_find(&l->exc, ext) == NULL) &&
		    !ent_needs_exc(l, seq)) {
			r->r = KVX_REF(seq, mask); /* the common case */
			ref_update(l, seq, 0, mask);
			return;
		}
		kvx_refmap_remove(&l->ext, ext, NULL);
	}
	ents_store_slow(l, ext, seq, mask);
}

bool
kvx_ents_remove(kvx_lis *l, uint64_t ext, uint8_t bit)
{
	kvx_ent e;
	if (!ent_get(l, ext, &e) || !(e.tiers & bit)) {
		return false;
	}
	uint8_t to = (uint8_t)(e.tiers & ~bit);
	if (to == 0) {
		ent_drop(l, ext, &e);
	} else {
		ent_retier(l, ext, &e, to);
	}
	ref_update(l, e.seq, e.tiers, to);
	return true;
}

bool
kvx_ents_lookup(kvx_lis *l, uint64_t ext, uint64_t *seq)
{
	kvx_ent e;
	if (!ent_get(l, ext, &e)) {
		return false;
	}
	*seq = e.seq;
	return true;
}

void
kvx_ents_clear(kvx_lis *l)
{
	uint32_t lid = l->info.lid;
	size_t pos = 0;
	uint64_t ext, seq;
	kvx_ref r;
	while (kvx_refmap_next(&l->ext, &pos, &ext, &r)) {
		/* Not found: another external hash of the same block has
		 * dropped it already. */
		if (ref_find(l, KVX_REF_OF(r.r), false, 0, &seq)) {
			kvx_holder_set(l->part, seq, lid, 0);
		}
	}
	pos = 0;
	kvx_extval v;
	while (kvx_extmap_next(&l->exc, &pos, &ext, &v)) {
		kvx_holder_set(l->part, v.seq, lid, 0);
	}
	kvx_refmap_clear(&l->ext);
	kvx_extmap_clear(&l->exc);
	kvx_countmap_clear(&l->exc_seqs);
	kvx_aliasmap_clear(&l->alias);
}

void
kvx_ents_foreach(kvx_lis *l, kvx_entry_fn fn, void *arg)
{
	size_t pos = 0;
	uint64_t ext;
	kvx_ref r;
	while (kvx_refmap_next(&l->ext, &pos, &ext, &r)) {
		fn(arg, ext, ref_resolve(l, r.r), KVX_REF_TIERS(r.r));
	}
	pos = 0;
	kvx_extval v;
	while (kvx_extmap_next(&l->exc, &pos, &ext, &v)) {
		fn(arg, ext, v.seq, v.tiers);
	}
}

/* ---- a whole map, narrowed ---------------------------------------- */

/* One entry of a listener's whole map. */
typedef struct kvx_narrow_exc {
	uint64_t ext;
	kvx_extval v;
} kvx_narrow_exc;

void
kvx_ents_narrow(kvx_lis *l)
{
	kvx_extmap full = l->exc;
	kvx_countmap *seqs = &l->exc_seqs;
	size_t nf = kvx_countmap_size(seqs);
	kvx_narrow_exc *exc = NULL;
	size_t n_exc = 0, cap_exc = 0;
	size_t cap = kvx_extmap_cap(&full);
	kvx_refmap *r = &l->ext;
	kvx_refmap_fini(r);
	unsigned char *a = (unsigned char *)full.slots;
	for (size_t i = 0; i < cap; i++) {
		kvx_extmap_slot s;
		memcpy(&s, a + i * sizeof(s), sizeof(s));
		kvx_refmap_slot t = {s.key, {KVX_REF(s.val.seq, s.val.tiers)}};
		memcpy(a + i * sizeof(t), &t, sizeof(t));
		if (nf == 0 || s.key == 0 ||
		    kvx_countmap_find(seqs, s.val.seq) == NULL) {
			continue;
		}
		if (n_exc == cap_exc) {
			cap_exc = cap_exc ? cap_exc * 2 : 16;
			exc = kvi_reallocarray(exc, cap_exc, sizeof(*exc));
		}
		exc[n_exc++] = (kvx_narrow_exc){s.key, s.val};
	}
	if (cap > 0) {
		r->slots =
		    kvx_table_shrink(full.slots, cap * sizeof(kvx_extmap_slot),
				     cap * sizeof(kvx_refmap_slot));
	}
	r->seed = full.seed;
	r->cap = full.cap;
	r->bits = full.bits;
	r->len = full.len;
	r->has_zero = full.has_zero;
	r->zero_val.r = KVX_REF(full.zero_val.seq, full.zero_val.tiers);
	if (full.has_zero && nf > 0 &&
	    kvx_countmap_find(seqs, full.zero_val.seq) != NULL) {
		/* key 0 lives outside the slots */
		if (n_exc == cap_exc) {
			exc = kvi_reallocarray(exc, ++cap_exc, sizeof(*exc));
		}
		exc[n_exc++] = (kvx_narrow_exc){0, full.zero_val};
	}
	kvx_extmap_init(&l->exc); /* its array is r's now */
	for (size_t i = 0; i < n_exc; i++) {
		bool added;
		kvx_refmap_remove(r, exc[i].ext, NULL);
		*kvx_extmap_insert(&l->exc, exc[i].ext, &added) = exc[i].v;
		kvx_countmap_insert(seqs, exc[i].v.seq, &added)->n++;
	}
	kvi_free(exc);
}
