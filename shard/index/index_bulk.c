/*
 * index_bulk.c - loading whole listener states into an empty index at
 * start-up.
 *
 * Inserting ten million entries one by one costs a cache miss or two each
 * in tables far larger than the cache. The bulk loader instead collects
 * the snapshot entries and the log ops that follow them, and builds in two
 * phases on several threads. First each listener's external-hash map on
 * its own - each is small - applying its snapshot then its ops in order,
 * so a log of millions of ops replays at cache speed. Then the holder maps
 * from the final listener maps: entries sorted by holder stripe, one
 * stripe built at a time (a stripe fits in the cache), stripes being
 * independent. The stripe sort is stable and listeners are visited in id
 * order, so holder lists grow by appends. A sequence hash that two
 * external hashes of one listener share is noted while building and its
 * per-tier counts are computed at the end, one pass over that listener's
 * map.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "index_int.h"

typedef struct kvx_bulk_ent {
	uint64_t seq, ext;
	uint32_t lid;
	uint8_t tiers;
} kvx_bulk_ent;

/* An entry sorted into its stripe. */
typedef struct kvx_bulk_hold {
	uint64_t seq;
	uint32_t lid;
	uint8_t tiers;
} kvx_bulk_hold;

/* A log op, in the order the log holds them. */
typedef struct kvx_bulk_op {
	uint64_t ext, seq;
	uint32_t lid;
	uint8_t kind, tier;
} kvx_bulk_op;

/* A run of entries of one listener. */
typedef struct kvx_bulk_run {
	uint32_t lid;
	size_t start, n;
} kvx_bulk_run;

typedef struct kvx_fixup {
	uint32_t lid;
	uint64_t seq;
} kvx_fixup;

/* (listener, sequence hash) pairs one thread noted. */
typedef struct kvx_fixlist {
	kvx_fixup *f;
	size_t n, cap;
} kvx_fixlist;

struct kvx_bulk {
	kvx_index *idx;
	kvx_bulk_ent *e;
	size_t n, cap;
	kvx_bulk_run *runs;
	size_t n_runs, cap_runs;
	kvx_bulk_op *ops;
	size_t n_ops, cap_ops;
};

/* What the build threads share. */
typedef struct kvx_bulk_job {
	kvx_bulk *b;
	int threads;
	/* phase A: each listener's items, by listener id */
	struct kvx_bulk_item *items;
	size_t *item_start; /* cap_lis + 1 */
	/* phase B */
	kvx_part **parts;
	size_t n_parts;
	kvx_bulk_hold *holds;
	size_t *bucket_start; /* n_parts * KVX_STRIPES + 1 */
	_Atomic size_t next_bucket;
	/* one list per thread of sequence hashes that two external hashes
	 * of one listener share, and of those a listener must hold as
	 * exceptions (index_refs.c) */
	kvx_fixlist *alias_fix, *prefix_fix;
	/* phase D: the latter, merged */
	kvx_fixup *prefix_all;
	size_t n_prefix_all;
} kvx_bulk_job;

typedef struct kvx_bulk_worker {
	kvx_bulk_job *job;
	int id;
} kvx_bulk_worker;

kvx_bulk *
kvx_bulk_begin(kvx_index *idx)
{
	kvx_bulk *b = kvi_calloc(1, sizeof(*b));
	b->idx = idx;
	return b;
}

void
kvx_bulk_add(kvx_bulk *b, uint32_t lid, uint64_t ext, uint64_t seq,
	     uint8_t tiers)
{
	if (tiers == 0 || kvx_lis_get(b->idx, lid) == NULL) {
		return;
	}
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 65536;
		b->e = kvi_reallocarray(b->e, b->cap, sizeof(*b->e));
	}
	if (b->n_runs == 0 || b->runs[b->n_runs - 1].lid != lid) {
		if (b->n_runs == b->cap_runs) {
			b->cap_runs = b->cap_runs ? b->cap_runs * 2 : 256;
			b->runs = kvi_reallocarray(b->runs, b->cap_runs,
						   sizeof(*b->runs));
		}
		b->runs[b->n_runs++] = (kvx_bulk_run){lid, b->n, 0};
	}
	b->runs[b->n_runs - 1].n++;
	b->e[b->n++] = (kvx_bulk_ent){seq, ext, lid, tiers};
}

void
kvx_bulk_op_add(kvx_bulk *b, uint32_t lid, kvx_bulk_kind kind, uint64_t ext,
		uint64_t seq, kvi_tier tier)
{
	if (kvx_lis_get(b->idx, lid) == NULL) {
		return;
	}
	if (b->n_ops == b->cap_ops) {
		b->cap_ops = b->cap_ops ? b->cap_ops * 2 : 65536;
		b->ops = kvi_reallocarray(b->ops, b->cap_ops, sizeof(*b->ops));
	}
	b->ops[b->n_ops++] =
	    (kvx_bulk_op){ext, seq, lid, (uint8_t)kind, (uint8_t)tier};
}

/* ---- phase A: external-hash maps, by listener ---------------------- */

/* What phase A applies to one listener: its snapshot entries (kind 0, all
 * tiers at once) then its log ops, in order. */
typedef struct kvx_bulk_item {
	uint64_t ext, seq;
	uint8_t kind, tiers;
} kvx_bulk_item;

static void
bulk_apply_op(kvx_lis *l, const kvx_bulk_item *it)
{
	bool added;
	kvx_extval *v;
	switch (it->kind) {
	case 0:
	case KVX_BULK_STORE:
		v = kvx_extmap_insert(&l->exc, it->ext, &added);
		if (added || v->seq != it->seq) {
			v->tiers = 0; /* new, or reused for another prefix */
		}
		v->seq = it->seq;
		v->tiers |= it->tiers;
		break;
	case KVX_BULK_REMOVE:
		v = kvx_extmap_find(&l->exc, it->ext);
		if (v != NULL) {
			v->tiers &= (uint8_t)~it->tiers;
			if (v->tiers == 0) {
				kvx_extmap_remove(&l->exc, it->ext, NULL);
			}
		}
		break;
	}
}

/* bulk_radix sorts items[0..n) by their home slot in l's map with an
 * LSD radix sort, which keeps the items of one home (one ext) in log
 * order. The items themselves move, so the pass that applies them reads
 * them in order too. */
static void
bulk_radix(const kvx_lis *l, kvx_bulk_item *items, kvx_bulk_item *tmp, size_t n)
{
	for (uint32_t shift = 0; shift < l->exc.bits; shift += 11) {
		size_t count[2049] = {0};
		for (size_t i = 0; i < n; i++) {
			size_t h = kvx_extmap_home(&l->exc, items[i].ext);
			count[((h >> shift) & 2047) + 1]++;
		}
		for (size_t d = 0; d < 2048; d++) {
			count[d + 1] += count[d];
		}
		for (size_t i = 0; i < n; i++) {
			size_t h = kvx_extmap_home(&l->exc, items[i].ext);
			tmp[count[(h >> shift) & 2047]++] = items[i];
		}
		memcpy(items, tmp, n * sizeof(*items));
	}
}

/* bulk_listener builds one listener's map from its items: what
 * follows its last clear, inserted in the order of their home slots, so
 * the table fills front to back instead of at random. */
static void
bulk_listener(kvx_lis *l, kvx_bulk_item *items, size_t n, kvx_bulk_item **tmp,
	      size_t *cap)
{
	size_t first = 0;
	for (size_t i = 0; i < n; i++) {
		if (items[i].kind == KVX_BULK_CLEAR) {
			first = i + 1;
		}
	}
	if (first > 0) {
		kvx_extmap_clear(&l->exc);
	}
	items += first;
	n -= first;
	if (n == 0) {
		return;
	}
	kvx_extmap_reserve(&l->exc, kvx_extmap_size(&l->exc) + n);
	if (n > *cap) {
		*cap = n;
		*tmp = kvi_reallocarray(*tmp, n, sizeof(**tmp));
	}
	bulk_radix(l, items, *tmp, n);
	for (size_t i = 0; i < n; i++) {
		bulk_apply_op(l, &items[i]);
	}
}

/* bulk_items lays every listener's items out together: snapshot
 * entries first, then ops in log order. */
static void
bulk_items(kvx_bulk_job *j)
{
	kvx_bulk *b = j->b;
	uint32_t n_lis = b->idx->cap_lis;
	j->item_start = kvi_calloc(n_lis + 2, sizeof(size_t));
	for (size_t r = 0; r < b->n_runs; r++) {
		j->item_start[b->runs[r].lid + 1] += b->runs[r].n;
	}
	for (size_t i = 0; i < b->n_ops; i++) {
		j->item_start[b->ops[i].lid + 1]++;
	}
	for (uint32_t l = 0; l < n_lis; l++) {
		j->item_start[l + 1] += j->item_start[l];
	}
	size_t *fill = kvi_malloc((n_lis + 1) * sizeof(size_t));
	memcpy(fill, j->item_start, (n_lis + 1) * sizeof(size_t));
	j->items = kvi_malloc((b->n + b->n_ops + 1) * sizeof(*j->items));
	for (size_t r = 0; r < b->n_runs; r++) {
		for (size_t i = b->runs[r].start;
		     i < b->runs[r].start + b->runs[r].n; i++) {
			j->items[fill[b->e[i].lid]++] = (kvx_bulk_item){
			    b->e[i].ext, b->e[i].seq, 0, b->e[i].tiers};
		}
	}
	for (size_t i = 0; i < b->n_ops; i++) {
		const kvx_bulk_op *op = &b->ops[i];
		j->items[fill[op->lid]++] =
		    (kvx_bulk_item){op->ext, op->seq, op->kind,
				    (uint8_t)KVX_TIER_BIT(op->tier)};
	}
	kvi_free(fill);
	/* the inputs are in items now */
	kvi_free(b->e);
	kvi_free(b->ops);
	b->e = NULL;
	b->ops = NULL;
}

static void
bulk_ext_maps(kvx_bulk_job *j, int id)
{
	kvx_bulk_item *tmp = NULL;
	size_t cap = 0;
	kvx_index *idx = j->b->idx;
	for (uint32_t lid = 0; lid < idx->cap_lis; lid++) {
		size_t n = j->item_start[lid + 1] - j->item_start[lid];
		if (n == 0 || (int)(lid % (uint32_t)j->threads) != id) {
			continue;
		}
		bulk_listener(kvx_lis_get(idx, lid),
			      j->items + j->item_start[lid], n, &tmp, &cap);
	}
	kvi_free(tmp);
}

/* ---- phase B: holders, by stripe ----------------------------------- */

static size_t
bulk_part_of(kvx_bulk_job *j, const kvx_part *p)
{
	for (size_t i = 0; i < j->n_parts; i++) {
		if (j->parts[i] == p) {
			return i;
		}
	}
	return 0;
}

/* bulk_sort places every entry of the listener maps, as phase A left
 * them, in its (partition, stripe) bucket, listeners in id order. */
static void
bulk_sort(kvx_bulk_job *j)
{
	kvx_index *idx = j->b->idx;
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		j->n_parts++;
	}
	j->parts = kvi_calloc(j->n_parts + 1, sizeof(*j->parts));
	size_t k = 0;
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		j->parts[k++] = p;
	}
	size_t buckets = j->n_parts * KVX_STRIPES;
	j->bucket_start = kvi_calloc(buckets + 2, sizeof(size_t));
	size_t *base = kvi_calloc(idx->cap_lis + 1, sizeof(size_t));
	size_t total = 0;
	for (int pass = 0; pass < 2; pass++) {
		size_t *fill = NULL;
		if (pass == 1) {
			for (size_t i = 0; i < buckets; i++) {
				j->bucket_start[i + 1] += j->bucket_start[i];
			}
			fill = kvi_malloc((buckets + 1) * sizeof(size_t));
			memcpy(fill, j->bucket_start,
			       (buckets + 1) * sizeof(size_t));
			j->holds = kvi_malloc((total + 1) * sizeof(*j->holds));
		}
		for (uint32_t lid = 0; lid < idx->cap_lis; lid++) {
			kvx_lis *l = idx->lis[lid];
			if (l == NULL) {
				continue;
			}
			if (pass == 0) {
				base[lid] =
				    bulk_part_of(j, l->part) * KVX_STRIPES;
				total += kvx_extmap_size(&l->exc);
			}
			size_t pos = 0;
			uint64_t ext;
			kvx_extval v;
			while (kvx_extmap_next(&l->exc, &pos, &ext, &v)) {
				size_t bucket =
				    base[lid] +
				    (v.seq >> (64 - KVX_STRIPE_BITS));
				if (pass == 0) {
					j->bucket_start[bucket + 1]++;
				} else {
					j->holds[fill[bucket]++] =
					    (kvx_bulk_hold){v.seq, lid,
							    v.tiers};
				}
			}
		}
		kvi_free(fill);
	}
	kvi_free(base);
}

static void
bulk_fix(kvx_fixlist *fl, uint32_t lid, uint64_t seq)
{
	if (fl->n == fl->cap) {
		fl->cap = fl->cap ? fl->cap * 2 : 64;
		fl->f = kvi_reallocarray(fl->f, fl->cap, sizeof(kvx_fixup));
	}
	fl->f[fl->n++] = (kvx_fixup){lid, seq};
}

/* bulk_slot_bits returns the bits a table reserved for n keys gets. */
static uint32_t
bulk_slot_bits(size_t n)
{
	uint32_t bits = 4;
	while (n > kvx_seqmap_max_load((size_t)1 << bits)) {
		bits++;
	}
	return bits;
}

/* The slot-order key of a sequence hash in a table of bits bits. */
static inline uint64_t
bulk_slot(uint64_t seq, uint32_t bits)
{
	return (seq << KVX_STRIPE_BITS) >> (64 - bits);
}

/* bulk_distinct counts the distinct sequence hashes of holds sorted
 * by slot key: equal hashes share a slot key, so they are only looked for
 * within a run of equal keys. */
static size_t
bulk_distinct(const kvx_bulk_hold *h, size_t n, uint32_t bits)
{
	size_t distinct = 0;
	for (size_t i = 0; i < n;) {
		size_t end = i;
		uint64_t key = bulk_slot(h[i].seq, bits);
		while (end < n && bulk_slot(h[end].seq, bits) == key) {
			end++;
		}
		for (size_t k = i; k < end; k++) {
			size_t m = i;
			while (m < k && h[m].seq != h[k].seq) {
				m++;
			}
			distinct += m == k;
		}
		i = end;
	}
	return distinct;
}

static int
hold_cmp(const void *a, const void *b)
{
	const kvx_bulk_hold *x = a, *y = b;
	if (x->lid != y->lid) {
		return x->lid < y->lid ? -1 : 1;
	}
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* bulk_prefixes notes in fl the sequence hashes that a listener must
 * hold as exceptions (index_refs.c): of the hashes with one prefix that
 * one listener holds, all but the smallest (some noted twice). h[0..n)
 * are sorted by their
 * slot key of bits bits, so the hashes of one prefix are adjacent, or,
 * when a slot key is shorter than a prefix, among those of one slot key;
 * tmp has room for n. */
static void
bulk_prefixes(kvx_fixlist *fl, const kvx_bulk_hold *h, size_t n, uint32_t bits,
	      kvx_bulk_hold *tmp)
{
	uint32_t run_bits =
	    KVX_STRIPE_BITS + (bits < KVX_REF_BITS - KVX_STRIPE_BITS
				   ? bits
				   : KVX_REF_BITS - KVX_STRIPE_BITS);
	for (size_t i = 0; i < n;) {
		uint64_t run = h[i].seq >> (64 - run_bits);
		size_t end = i + 1;
		bool mixed = false;
		while (end < n && h[end].seq >> (64 - run_bits) == run) {
			mixed |= h[end].seq != h[i].seq;
			end++;
		}
		if (!mixed) {
			i = end; /* one hash, however many holders */
			continue;
		}
		size_t m = end - i;
		if (m <= 16) {
			/* a few: each pair, a mark of the greater hash of
			 * a pair (marked twice, the same) */
			for (size_t x = i; x < end; x++) {
				for (size_t y = x + 1; y < end; y++) {
					const kvx_bulk_hold *a = &h[x],
							    *b = &h[y];
					if (a->lid == b->lid &&
					    a->seq != b->seq &&
					    KVX_REF_PREFIX(a->seq) ==
						KVX_REF_PREFIX(b->seq)) {
						bulk_fix(fl, a->lid,
							 a->seq > b->seq
							     ? a->seq
							     : b->seq);
					}
				}
			}
			i = end;
			continue;
		}
		memcpy(tmp, h + i, m * sizeof(*tmp));
		qsort(tmp, m, sizeof(*tmp), hold_cmp);
		for (size_t k = 1; k < m; k++) {
			const kvx_bulk_hold *a = &tmp[k - 1], *b = &tmp[k];
			if (a->lid == b->lid && a->seq != b->seq &&
			    KVX_REF_PREFIX(a->seq) == KVX_REF_PREFIX(b->seq)) {
				bulk_fix(fl, b->lid, b->seq);
			}
		}
		i = end;
	}
}

/* bulk_stripe builds one stripe: its holds sorted by slot (stably, so
 * listeners stay in id order), the table sized for the distinct hashes,
 * then filled front to back. */
static void
bulk_stripe(kvx_bulk_job *j, int id, size_t bucket, kvx_bulk_hold **tmp,
	    size_t *cap)
{
	kvx_part *p = j->parts[bucket / KVX_STRIPES];
	kvx_stripe *st = &p->holders.stripes[bucket % KVX_STRIPES];
	kvx_bulk_hold *h = j->holds + j->bucket_start[bucket];
	size_t n = j->bucket_start[bucket + 1] - j->bucket_start[bucket];
	if (n == 0) {
		return;
	}
	if (n > *cap) {
		*cap = n;
		*tmp = kvi_reallocarray(*tmp, n, sizeof(**tmp));
	}
	uint32_t bits = bulk_slot_bits(n);
	for (uint32_t shift = 0; shift < bits; shift += 11) {
		size_t count[2049] = {0};
		for (size_t i = 0; i < n; i++) {
			count[((bulk_slot(h[i].seq, bits) >> shift) & 2047) +
			      1]++;
		}
		for (size_t d = 0; d < 2048; d++) {
			count[d + 1] += count[d];
		}
		for (size_t i = 0; i < n; i++) {
			(*tmp)[count[(bulk_slot(h[i].seq, bits) >> shift) &
				     2047]++] = h[i];
		}
		memcpy(h, *tmp, n * sizeof(*h));
	}
	bulk_prefixes(&j->prefix_fix[id], h, n, bits, *tmp);
	kvx_hold_reserve(st, bulk_distinct(h, n, bits));
	for (size_t i = 0; i < n; i++) {
		uint8_t cur = kvx_hold_put(st, h[i].seq, h[i].lid, h[i].tiers);
		if (cur != 0) {
			/* Another external hash of lid holds seq too. */
			kvx_hold_put(st, h[i].seq, h[i].lid,
				     (uint8_t)(cur | h[i].tiers));
			bulk_fix(&j->alias_fix[id], h[i].lid, h[i].seq);
		}
	}
}

static void *
bulk_work_maps(void *arg)
{
	kvx_bulk_worker *w = arg;
	bulk_ext_maps(w->job, w->id);
	return NULL;
}

static void *
bulk_work_holders(void *arg)
{
	kvx_bulk_worker *w = arg;
	kvx_bulk_job *j = w->job;
	size_t buckets = j->n_parts * KVX_STRIPES;
	kvx_bulk_hold *tmp = NULL;
	size_t cap = 0;
	for (;;) {
		size_t bucket = atomic_fetch_add(&j->next_bucket, 1);
		if (bucket >= buckets) {
			break;
		}
		bulk_stripe(j, w->id, bucket, &tmp, &cap);
	}
	kvi_free(tmp);
	return NULL;
}

/* bulk_run_phase runs fn on threads threads, this one included. */
static void
bulk_run_phase(kvx_bulk_worker *w, int threads, void *(*fn)(void *))
{
	pthread_t *tids = kvi_calloc((size_t)threads, sizeof(*tids));
	for (int t = 1; t < threads; t++) {
		if (pthread_create(&tids[t], NULL, fn, &w[t]) != 0) {
			kvi_oom(0); /* no thread: nothing sensible left to do */
		}
	}
	fn(&w[0]);
	for (int t = 1; t < threads; t++) {
		pthread_join(tids[t], NULL);
	}
	kvi_free(tids);
}

/* ---- phase C: shared sequence hashes ------------------------------- */

static int
fixup_cmp(const void *a, const void *b)
{
	const kvx_fixup *x = a, *y = b;
	if (x->lid != y->lid) {
		return x->lid < y->lid ? -1 : 1;
	}
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static kvx_fixup *
fixup_find(kvx_fixup *f, size_t n, uint32_t lid, uint64_t seq)
{
	kvx_fixup key = {lid, seq};
	return bsearch(&key, f, n, sizeof(*f), fixup_cmp);
}

/* fix_merge returns every thread's pairs of fl, sorted (NULL when
 * there are none), and their number in *n; it frees the lists. */
static kvx_fixup *
fix_merge(kvx_fixlist *fl, int threads, size_t *n)
{
	*n = 0;
	for (int t = 0; t < threads; t++) {
		*n += fl[t].n;
	}
	kvx_fixup *all = *n == 0 ? NULL : kvi_malloc(*n * sizeof(*all));
	size_t k = 0;
	for (int t = 0; t < threads; t++) {
		if (fl[t].n > 0) {
			memcpy(all + k, fl[t].f, fl[t].n * sizeof(*all));
			k += fl[t].n;
		}
		kvi_free(fl[t].f);
		fl[t] = (kvx_fixlist){0};
	}
	if (*n > 1) {
		qsort(all, *n, sizeof(*all), fixup_cmp);
	}
	return all;
}

/* bulk_aliases counts, per tier, the external hashes of each listener
 * behind every sequence hash a fixup names. */
static void
bulk_aliases(kvx_bulk_job *j)
{
	size_t n;
	kvx_fixup *all = fix_merge(j->alias_fix, j->threads, &n);
	for (size_t i = 0; i < n;) {
		uint32_t lid = all[i].lid;
		size_t end = i;
		while (end < n && all[end].lid == lid) {
			end++;
		}
		kvx_lis *l = kvx_lis_get(j->b->idx, lid);
		size_t pos = 0;
		uint64_t ext;
		kvx_extval v;
		while (kvx_extmap_next(&l->exc, &pos, &ext, &v)) {
			if (fixup_find(all + i, end - i, lid, v.seq) == NULL) {
				continue;
			}
			bool added;
			kvx_aliasval *a =
			    kvx_aliasmap_insert(&l->alias, v.seq, &added);
			for (int t = 0; t < KVI_TIER_COUNT; t++) {
				a->count[t] = (uint16_t)(a->count[t] +
							 ((v.tiers >> t) & 1));
			}
			a->total++;
		}
		i = end;
	}
	kvi_free(all);
}

/* ---- phase D: listener maps by reference -------------------------- */

static void *
bulk_work_narrow(void *arg)
{
	kvx_bulk_worker *w = arg;
	kvx_bulk_job *j = w->job;
	kvx_index *idx = j->b->idx;
	size_t k = 0; /* fixups of the listeners before lid */
	for (uint32_t lid = 0; lid < idx->cap_lis; lid++) {
		size_t end = k;
		while (end < j->n_prefix_all && j->prefix_all[end].lid == lid) {
			end++;
		}
		kvx_lis *l = idx->lis[lid];
		if (l != NULL && (int)(lid % (uint32_t)j->threads) == w->id) {
			for (size_t i = k; i < end; i++) {
				bool added;
				(void)kvx_countmap_insert(
				    &l->exc_seqs, j->prefix_all[i].seq, &added);
			}
			kvx_ents_narrow(l);
		}
		k = end;
	}
	return NULL;
}

void
kvx_bulk_finish(kvx_bulk *b, int threads, kvx_bulk_stats *stats)
{
	kvx_bulk_stats st = {.entries = b->n, .ops = b->n_ops};
	double t0 = kvi_now_s();
	if (threads < 1) {
		threads = 1;
	}
	kvx_bulk_job j = {.b = b, .threads = threads};
	j.alias_fix = kvi_calloc((size_t)threads, sizeof(*j.alias_fix));
	j.prefix_fix = kvi_calloc((size_t)threads, sizeof(*j.prefix_fix));
	kvx_bulk_worker *w = kvi_calloc((size_t)threads, sizeof(*w));
	for (int t = 0; t < threads; t++) {
		w[t] = (kvx_bulk_worker){&j, t};
	}
	bulk_items(&j);
	st.items_s = kvi_now_s() - t0;
	t0 += st.items_s;
	bulk_run_phase(w, threads, bulk_work_maps);
	kvi_free(j.items);
	j.items = NULL;
	st.maps_s = kvi_now_s() - t0;
	t0 += st.maps_s;
	bulk_sort(&j);
	st.gather_s = kvi_now_s() - t0;
	t0 += st.gather_s;
	bulk_run_phase(w, threads, bulk_work_holders);
	bulk_aliases(&j);
	st.holders_s = kvi_now_s() - t0;
	t0 += st.holders_s;
	j.prefix_all = fix_merge(j.prefix_fix, threads, &j.n_prefix_all);
	bulk_run_phase(w, threads, bulk_work_narrow);
	st.narrow_s = kvi_now_s() - t0;
	if (stats != NULL) {
		*stats = st;
	}
	for (uint32_t lid = 0; lid < b->idx->cap_lis; lid++) {
		if (b->idx->lis[lid] != NULL) {
			kvx_entries_sync(b->idx->lis[lid]);
		}
	}
	kvi_free(j.alias_fix);
	kvi_free(j.prefix_fix);
	kvi_free(j.prefix_all);
	kvi_free(j.parts);
	kvi_free(j.holds);
	kvi_free(j.bucket_start);
	kvi_free(j.item_start);
	kvi_free(w);
	kvi_free(b->e);
	kvi_free(b->runs);
	kvi_free(b->ops);
	kvi_free(b);
}
