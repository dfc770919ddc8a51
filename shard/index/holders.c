#include "holders.h"

#include <string.h>
#include <sys/mman.h>

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
		kvx_table_free(st->pool, st->pool_cap * sizeof(uint32_t));
	}
	memset(h, 0, sizeof(*h));
}

static void
seqs_add(kvx_stripe *st, int64_t d)
{
	atomic_store_explicit(
	    &st->seqs,
	    atomic_load_explicit(&st->seqs, memory_order_relaxed) + (uint64_t)d,
	    memory_order_relaxed);
}

/* ---- the pool ------------------------------------------------------ */

/* block_size returns the size class of a list of n holders (n >= 2)
 * and sets *words to the size of its block: the smallest of 3, 4, 6, 8,
 * 12, 16, ... that holds n + 1 words. */
static uint32_t
block_size(uint32_t n, size_t *words)
{
	uint32_t w = n + 1;
	if (w <= 3) {
		*words = 3;
		return 0;
	}
	/* 2^b < w <= 2^(b+1); the sizes in there: 3 * 2^(b-1), 2^(b+1). */
	uint32_t b = 31u - (uint32_t)__builtin_clz(w - 1);
	size_t small = (size_t)3 << (b - 1);
	*words = w <= small ? small : (size_t)1 << (b + 1);
	return 2 * (b - 1) + (w > small);
}

/* pool_grow makes room for at least need more words in st's pool. It
 * may move the pool. */
static void
pool_grow(kvx_stripe *st, size_t need)
{
	if (st->pool_used == 0) {
		st->pool_used = 1; /* offset 0 marks "no block" */
	}
	size_t cap = st->pool_cap;
	size_t want = st->pool_used + need;
	if (want > ((size_t)1 << 31)) {
		kvi_oom(want * sizeof(uint32_t));
	}
	/* A quarter more at a time: a pool is its lists plus what it has
	 * not handed out yet, and big ones move by remapping, not copying. */
	size_t next = cap < 1024 ? 1024 : cap + cap / 4;
	while (next < want) {
		next += next / 4;
	}
	size_t old_b = cap * sizeof(uint32_t), new_b = next * sizeof(uint32_t);
	uint32_t *pool;
	if (old_b >= KVX_TABLE_MAP_MIN) {
		pool = mremap(st->pool, old_b, new_b, MREMAP_MAYMOVE);
		if (pool == MAP_FAILED) {
			kvi_oom(new_b);
		}
	} else if (new_b >= KVX_TABLE_MAP_MIN) {
		pool = kvx_table_alloc(new_b);
		memcpy(pool, st->pool, old_b);
		kvx_table_free(st->pool, old_b);
	} else {
		pool = kvi_realloc(st->pool, new_b);
		memset(pool + cap, 0, new_b - old_b);
	}
	st->pool = pool;
	st->pool_cap = next;
}

/* list_alloc returns the offset of a block for a list of n holders,
 * its first word set to n. It may move the pool. */
static uint32_t
list_alloc(kvx_stripe *st, uint32_t n)
{
	size_t words;
	uint32_t c = block_size(n, &words);
	uint32_t off = st->free_head[c];
	if (off != 0) {
		st->free_head[c] = st->pool[off];
	} else {
		if (st->pool_used + words > st->pool_cap) {
			pool_grow(st, words);
		}
		off = (uint32_t)st->pool_used;
		st->pool_used += words;
	}
	st->pool[off] = n;
	return off;
}

/* list_release frees the block at off, which holds a list of n. */
static void
list_release(kvx_stripe *st, uint32_t off, uint32_t n)
{
	size_t words;
	uint32_t c = block_size(n, &words);
	st->pool[off] = st->free_head[c];
	st->free_head[c] = off;
}

/* list_fits says whether a list of n holders can take the block of
 * one of m holders: sizes depend only on the length. */
static bool
list_fits(uint32_t n, uint32_t m)
{
	size_t wn, wm;
	return block_size(n, &wn) == block_size(m, &wm);
}

/* list_pos returns the position of lid in the n holders h, or where
 * it would go. */
static uint32_t
list_pos(const uint32_t *h, uint32_t n, uint32_t lid, bool *found)
{
	uint32_t lo = 0, hi = n;
	/* Lists grow by appends in id order most of the time: look at the
	 * end first. */
	if (hi > 0 && KVX_HOLDER_LID(h[hi - 1]) < lid) {
		*found = false;
		return hi;
	}
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (KVX_HOLDER_LID(h[mid]) < lid) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	*found = lo < n && KVX_HOLDER_LID(h[lo]) == lid;
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
		const uint32_t *l = &st->pool[w->w & ~KVX_LIST_FLAG];
		*n = l[0];
		return l + 1;
	}
	*n = 1;
	*one = w->w;
	return one;
}

uint8_t
kvx_hold_word_tiers(const kvx_stripe *st, uint32_t w, uint32_t lid)
{
	if (!(w & KVX_LIST_FLAG)) {
		return KVX_HOLDER_LID(w) == lid ? KVX_HOLDER_TIERS(w) : 0;
	}
	const uint32_t *l = &st->pool[w & ~KVX_LIST_FLAG];
	bool found;
	uint32_t pos = list_pos(l + 1, l[0], lid, &found);
	return found ? KVX_HOLDER_TIERS(l[1 + pos]) : 0;
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
			seqs_add(st, -1);
		}
		return;
	}
	uint32_t off = w->w & ~KVX_LIST_FLAG;
	uint32_t n = st->pool[off];
	bool found;
	uint32_t pos = list_pos(&st->pool[off + 1], n, lid, &found);
	if (!found) {
		return;
	}
	if (n == 2) {
		w->w = st->pool[off + 1 + (pos == 0)]; /* back inline */
		list_release(st, off, n);
		return;
	}
	uint32_t to = off;
	if (!list_fits(n - 1, n)) {
		to = list_alloc(st, n - 1);
		memcpy(&st->pool[to + 1], &st->pool[off + 1],
		       pos * sizeof(uint32_t));
	}
	memmove(&st->pool[to + 1 + pos], &st->pool[off + 2 + pos],
		(n - pos - 1) * sizeof(uint32_t));
	st->pool[to] = n - 1;
	if (to != off) {
		list_release(st, off, n);
		w->w = KVX_LIST_FLAG | to;
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
		seqs_add(st, 1);
		return 0;
	}
	if (!(w->w & KVX_LIST_FLAG)) {
		if (KVX_HOLDER_LID(w->w) == lid) {
			uint8_t old = KVX_HOLDER_TIERS(w->w);
			w->w = word;
			return old;
		}
		uint32_t other = w->w;
		uint32_t off = list_alloc(st, 2);
		bool first = KVX_HOLDER_LID(other) < lid;
		st->pool[off + 1] = first ? other : word;
		st->pool[off + 2] = first ? word : other;
		w->w = KVX_LIST_FLAG | off;
		return 0;
	}
	uint32_t off = w->w & ~KVX_LIST_FLAG;
	uint32_t n = st->pool[off];
	bool found;
	uint32_t pos = list_pos(&st->pool[off + 1], n, lid, &found);
	if (found) {
		uint8_t old = KVX_HOLDER_TIERS(st->pool[off + 1 + pos]);
		st->pool[off + 1 + pos] = word;
		return old;
	}
	uint32_t to = off;
	if (!list_fits(n + 1, n)) {
		to = list_alloc(st, n + 1); /* may move the pool */
		memcpy(&st->pool[to + 1], &st->pool[off + 1],
		       pos * sizeof(uint32_t));
	}
	memmove(&st->pool[to + 2 + pos], &st->pool[off + 1 + pos],
		(n - pos) * sizeof(uint32_t));
	st->pool[to + 1 + pos] = word;
	st->pool[to] = n + 1;
	if (to != off) {
		list_release(st, off, n);
		w->w = KVX_LIST_FLAG | to;
	}
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
		*lists += (uint64_t)st->pool_cap * sizeof(uint32_t);
	}
}

/* ---- images -------------------------------------------------------- */

void
kvx_hold_save(const kvx_holdmap *h, kvx_imgw *w)
{
	for (uint32_t s = 0; s < KVX_STRIPES; s++) {
		const kvx_stripe *st = &h->stripes[s];
		kvx_seqmap_save(&st->map, w);
		kvx_imgw_u64(w, st->pool_used);
		kvx_imgw_u64(
		    w, atomic_load_explicit(&st->seqs, memory_order_relaxed));
		kvx_imgw_put(w, st->free_head, sizeof(st->free_head));
		kvx_imgw_put(w, st->pool, st->pool_used * sizeof(uint32_t));
	}
}

bool
kvx_hold_load(kvx_holdmap *h, kvx_imgr *r)
{
	for (uint32_t s = 0; s < KVX_STRIPES; s++) {
		kvx_stripe *st = &h->stripes[s];
		if (!kvx_seqmap_load(&st->map, r)) {
			return false;
		}
		uint64_t used = kvx_imgr_u64(r), seqs = kvx_imgr_u64(r);
		if (!kvx_imgr_get(r, st->free_head, sizeof(st->free_head))) {
			return false;
		}
		if (used > ((uint64_t)1 << 31) ||
		    used > r->left / sizeof(uint32_t) ||
		    seqs != kvx_seqmap_size(&st->map)) {
			return kvx_imgr_fail(r, "a stripe's fields are out of "
						"range");
		}
		for (uint32_t c = 0; c < KVX_POOL_SIZES; c++) {
			if (st->free_head[c] >= used && st->free_head[c] != 0) {
				return kvx_imgr_fail(r, "a free list is past "
							"its pool");
			}
		}
		if (used != 0) {
			st->pool = kvx_table_alloc(used * sizeof(uint32_t));
			st->pool_used = st->pool_cap = (size_t)used;
			if (!kvx_imgr_get(r, st->pool,
					  used * sizeof(uint32_t))) {
				return false;
			}
		}
		atomic_store_explicit(&st->seqs, seqs, memory_order_relaxed);
	}
	return true;
}
