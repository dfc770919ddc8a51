/*
 * pending.c - pending entries, kept by routed request.
 *
 * A routed request's blocks are one run: their sequence hashes copied in
 * order, a bit per block that says whether the entry is still this run's,
 * one expiry. Runs are listed oldest first, for the shard and for each
 * listener, so the oldest entry - the first live block of the oldest run -
 * is evicted in O(1), and entries keep the order of the lists of entries
 * they stand for: runs in the order they came, blocks in chain order.
 *
 * Each entry also has a slot in an open-addressing table on (listener,
 * sequence hash) that names its run and position. Making a request
 * pending writes one slot per block; the lookups of a request are all
 * known before its walk, so their slots are prefetched ahead of it. A
 * query's walk along a prefix looks up its first block and then follows
 * the run, comparing the hashes the run holds in order, and falls back on
 * the table only where the run stops: a prefix pending from one routed
 * request costs one lookup, not one per block.
 *
 * A block routed again is taken by the newer run (its entry refreshed:
 * newer expiry, newest in the lists); the older run keeps its place and
 * its other blocks.
 */
#include "pending.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"

#define NIL UINT32_MAX

/* The table's slots, 16 bytes: the listener is the run's. Run NIL is
 * empty. */
typedef struct slot {
	uint64_t seq;
	uint32_t run;
	uint32_t pos;
} slot;

typedef struct run {
	uint64_t *seq; /* seq[0..n), then the bits: block k is live here */
	int64_t expire_ms;
	uint32_t lid, n, live;
	uint32_t first;        /* no live block before it */
	uint32_t gprev, gnext; /* every run, oldest first; the free list */
	uint32_t lprev, lnext; /* the listener's runs, oldest first */
} run;

typedef struct listener {
	uint32_t head, tail, n;
	kvd_listener_stats st;
} listener;

typedef enum end_kind {
	END_CONFIRMED,
	END_EXPIRED,
	END_EVICTED,
	END_DROPPED
} end_kind;

struct kvd_pending {
	pthread_rwlock_t lock;
	size_t max_entries, max_per;

	slot *s;
	uint32_t cap, used; /* cap a power of two, or 0 before the first */
	unsigned bits;

	run *r;
	uint32_t nrun, caprun, free_run;
	uint32_t ghead, gtail;
	uint32_t filling;      /* the run kvd_add fills, kept while empty */
	uint64_t count;        /* live entries, under the lock */
	_Atomic uint64_t live; /* count, published at each unlock */

	listener *l;
	uint32_t nl;

	kvd_stats st;
};

/* The distance, in blocks, at which a walk of a request's blocks
 * prefetches their slots. */
#define PF_AHEAD 16

static inline uint32_t
home(const kvd_pending *p, uint32_t lid, uint64_t seq)
{
	uint64_t h = (seq ^ ((uint64_t)lid * 0x9E3779B97F4A7C15ull)) *
		     0xff51afd7ed558ccdull;
	return (uint32_t)(h >> (64 - p->bits));
}

/* always inlined: GCC takes a function that only prefetches for a pure
 * one whose calls do nothing, and drops them */
static inline __attribute__((always_inline)) void
prefetch_slot(const kvd_pending *p, uint32_t lid, uint64_t seq)
{
	if (p->cap > 0) {
		__builtin_prefetch(&p->s[home(p, lid, seq)]);
	}
}

static inline uint64_t *
bits_of(const run *r)
{
	return r->seq + r->n;
}

static inline bool
bit_get(const run *r, uint32_t k)
{
	return (bits_of(r)[k >> 6] >> (k & 63)) & 1u;
}

static inline void
bit_set(run *r, uint32_t k, bool on)
{
	uint64_t m = (uint64_t)1 << (k & 63);
	if (on) {
		bits_of(r)[k >> 6] |= m;
	} else {
		bits_of(r)[k >> 6] &= ~m;
	}
}

/* find returns the slot of (lid, seq), or NIL. */
static uint32_t
find(const kvd_pending *p, uint32_t lid, uint64_t seq)
{
	if (p->cap == 0) {
		return NIL;
	}
	uint32_t mask = p->cap - 1;
	for (uint32_t i = home(p, lid, seq);; i = (i + 1) & mask) {
		const slot *x = &p->s[i];
		if (x->run == NIL) {
			return NIL;
		}
		if (x->seq == seq && p->r[x->run].lid == lid) {
			return i;
		}
	}
}

/* put writes a slot for (lid, seq), which has none; the table has room. */
static void
put(kvd_pending *p, uint32_t lid, uint64_t seq, uint32_t run_id, uint32_t pos)
{
	uint32_t mask = p->cap - 1;
	uint32_t i = home(p, lid, seq);
	while (p->s[i].run != NIL) {
		i = (i + 1) & mask;
	}
	p->s[i] = (slot){.seq = seq, .run = run_id, .pos = pos};
	p->used++;
}

/* unput empties slot i, moving back the slots after it that would no
 * longer be found (linear probing's deletion, no tombstones). */
static void
unput(kvd_pending *p, uint32_t i)
{
	uint32_t mask = p->cap - 1;
	for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
		slot *x = &p->s[j];
		if (x->run == NIL) {
			break;
		}
		uint32_t h = home(p, p->r[x->run].lid, x->seq);
		/* x stays unless its home is cyclically in (i, j] */
		bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
		if (!stays) {
			p->s[i] = *x;
			i = j;
		}
	}
	p->s[i].run = NIL;
	p->used--;
}

/* grow makes room for one more slot, keeping the load at most half. */
static void
grow(kvd_pending *p)
{
	if ((uint64_t)(p->used + 1) * 2 <= p->cap) {
		return;
	}
	slot *old = p->s;
	uint32_t old_cap = p->cap;
	p->bits = p->cap == 0 ? 10 : p->bits + 1;
	p->cap = 1u << p->bits;
	p->s = kvi_malloc((size_t)p->cap * sizeof(*p->s));
	for (uint32_t i = 0; i < p->cap; i++) {
		p->s[i].run = NIL;
	}
	p->used = 0;
	for (uint32_t i = 0; i < old_cap; i++) {
		if (old[i].run != NIL) {
			put(p, p->r[old[i].run].lid, old[i].seq, old[i].run,
			    old[i].pos);
		}
	}
	kvi_free(old);
}

static listener *
listener_at(kvd_pending *p, uint32_t lid)
{
	if (lid >= p->nl) {
		uint32_t n = p->nl == 0 ? 64 : p->nl;
		while (n <= lid) {
			n *= 2;
		}
		p->l = kvi_realloc(p->l, (size_t)n * sizeof(*p->l));
		for (uint32_t i = p->nl; i < n; i++) {
			p->l[i] = (listener){.head = NIL, .tail = NIL};
		}
		p->nl = n;
	}
	return &p->l[lid];
}

/* run_new returns a run of lid for n blocks, none live, newest in both
 * lists. */
static uint32_t
run_new(kvd_pending *p, uint32_t lid, uint32_t n, int64_t expire)
{
	uint32_t id = p->free_run;
	if (id != NIL) {
		p->free_run = p->r[id].gnext;
	} else {
		if (p->nrun == p->caprun) {
			p->caprun = p->caprun == 0 ? 16 : 2 * p->caprun;
			p->r = kvi_reallocarray(p->r, p->caprun, sizeof(*p->r));
		}
		id = p->nrun++;
	}
	run *r = &p->r[id];
	size_t words = ((size_t)n + 63) / 64;
	r->seq = kvi_malloc(((size_t)n + words) * sizeof(uint64_t));
	memset(r->seq + n, 0, words * sizeof(uint64_t));
	r->expire_ms = expire;
	r->lid = lid;
	r->n = n;
	r->live = 0;
	r->first = 0;
	listener *l = listener_at(p, lid);
	r->gprev = p->gtail;
	r->gnext = NIL;
	if (p->gtail != NIL) {
		p->r[p->gtail].gnext = id;
	} else {
		p->ghead = id;
	}
	p->gtail = id;
	r->lprev = l->tail;
	r->lnext = NIL;
	if (l->tail != NIL) {
		p->r[l->tail].lnext = id;
	} else {
		l->head = id;
	}
	l->tail = id;
	return id;
}

/* run_free unlinks run id, which has no live block, and frees it. */
static void
run_free(kvd_pending *p, uint32_t id)
{
	run *r = &p->r[id];
	listener *l = &p->l[r->lid];
	if (r->gprev != NIL) {
		p->r[r->gprev].gnext = r->gnext;
	} else {
		p->ghead = r->gnext;
	}
	if (r->gnext != NIL) {
		p->r[r->gnext].gprev = r->gprev;
	} else {
		p->gtail = r->gprev;
	}
	if (r->lprev != NIL) {
		p->r[r->lprev].lnext = r->lnext;
	} else {
		l->head = r->lnext;
	}
	if (r->lnext != NIL) {
		p->r[r->lnext].lprev = r->lprev;
	} else {
		l->tail = r->lprev;
	}
	kvi_free(r->seq);
	r->seq = NULL;
	r->gnext = p->free_run;
	p->free_run = id;
}

static void
count_end(kvd_pending *p, listener *l, end_kind kind, kvd_drop_reason reason)
{
	switch (kind) {
	case END_CONFIRMED:
		l->st.confirmed++;
		p->st.confirmed++;
		break;
	case END_EXPIRED:
		l->st.expired++;
		p->st.expired++;
		break;
	case END_EVICTED:
		l->st.evicted++;
		p->st.evicted++;
		break;
	case END_DROPPED:
		l->st.dropped++;
		p->st.dropped[reason]++;
		break;
	}
}

/* write_end publishes the count for kvd_empty and lets go of the write
 * lock. */
static void
write_end(kvd_pending *p)
{
	atomic_store_explicit(&p->live, p->count, memory_order_relaxed);
	pthread_rwlock_unlock(&p->lock);
}

/* end_slot ends the entry in slot i and counts how it ended; its run goes
 * with its last live block, unless kvd_add is filling it. */
static void
end_slot(kvd_pending *p, uint32_t i, end_kind kind, kvd_drop_reason reason)
{
	uint32_t id = p->s[i].run, pos = p->s[i].pos;
	run *r = &p->r[id];
	listener *l = &p->l[r->lid];
	unput(p, i);
	bit_set(r, pos, false);
	r->live--;
	l->n--;
	l->st.entries--;
	count_end(p, l, kind, reason);
	p->count--;
	if (r->live == 0 && id != p->filling) {
		run_free(p, id);
	}
}

/* end_first ends the oldest live entry of run id (evicted). */
static void
end_first(kvd_pending *p, uint32_t id)
{
	run *r = &p->r[id];
	while (!bit_get(r, r->first)) {
		r->first++;
	}
	if (r->first + PF_AHEAD < r->n) {
		prefetch_slot(p, r->lid, r->seq[r->first + PF_AHEAD]);
	}
	end_slot(p, find(p, r->lid, r->seq[r->first]), END_EVICTED, 0);
}

/* end_run ends every live entry of run id, which goes. */
static void
end_run(kvd_pending *p, uint32_t id, end_kind kind, kvd_drop_reason reason)
{
	run *r = &p->r[id];
	uint32_t lid = r->lid;
	for (uint32_t k = r->first; k < r->n && p->r[id].live > 0; k++) {
		r = &p->r[id];
		if (k + PF_AHEAD < r->n) {
			prefetch_slot(p, lid, r->seq[k + PF_AHEAD]);
		}
		if (bit_get(r, k)) {
			end_slot(p, find(p, lid, r->seq[k]), kind, reason);
		}
	}
}

/* expire_run ends every live entry of run id as expired, which goes,
 * without touching the table: for a sweep that refills it (refill). */
static void
expire_run(kvd_pending *p, uint32_t id)
{
	run *r = &p->r[id];
	listener *l = &p->l[r->lid];
	uint32_t n = r->live;
	l->n -= n;
	l->st.entries -= n;
	l->st.expired += n;
	p->st.expired += n;
	p->count -= n;
	r->live = 0;
	run_free(p, id);
}

/* refill empties the table and puts back the live entries of every run
 * left, its capacity kept. */
static void
refill(kvd_pending *p)
{
	memset(p->s, 0xff, (size_t)p->cap * sizeof(*p->s)); /* run NIL */
	p->used = 0;
	for (uint32_t id = p->ghead; id != NIL; id = p->r[id].gnext) {
		const run *r = &p->r[id];
		for (uint32_t k = r->first; k < r->n; k++) {
			if (k + PF_AHEAD < r->n) {
				prefetch_slot(p, r->lid, r->seq[k + PF_AHEAD]);
			}
			if (bit_get(r, k)) {
				put(p, r->lid, r->seq[k], id, k);
			}
		}
	}
}

kvd_pending *
kvd_pending_alloc(const kvd_config *cfg)
{
	kvd_pending *p = kvi_calloc(1, sizeof(*p));
	pthread_rwlock_init(&p->lock, NULL);
	p->max_entries = cfg != NULL && cfg->max_entries > 0
			     ? cfg->max_entries
			     : KVD_MAX_ENTRIES_DEFAULT;
	/* the table's load stays at most half in 32-bit indexes */
	if (p->max_entries > (1u << 30)) {
		p->max_entries = 1u << 30;
	}
	p->max_per = cfg != NULL && cfg->max_per_listener > 0
			 ? cfg->max_per_listener
			 : KVD_MAX_PER_LISTENER_DEFAULT;
	if (p->max_per > p->max_entries) {
		p->max_per = p->max_entries;
	}
	p->free_run = p->ghead = p->gtail = p->filling = NIL;
	return p;
}

void
kvd_pending_free(kvd_pending *p)
{
	if (p == NULL) {
		return;
	}
	pthread_rwlock_destroy(&p->lock);
	for (uint32_t i = 0; i < p->nrun; i++) {
		kvi_free(p->r[i].seq);
	}
	kvi_free(p->r);
	kvi_free(p->s);
	kvi_free(p->l);
	kvi_free(p);
}

bool
kvd_empty(const kvd_pending *p)
{
	return atomic_load_explicit(&((kvd_pending *)p)->live,
				    memory_order_relaxed) == 0;
}

/* add makes seq[0..n) pending on lid (kvd_add), the lock held. */
static size_t
add(kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t n, int64_t now_ms,
    uint32_t ttl_ms)
{
	if (ttl_ms > KVD_TTL_MAX_MS) {
		ttl_ms = KVD_TTL_MAX_MS;
	}
	/* a prefix is worth what its first blocks are: past a bound, the
	 * tail of the request is what is left out */
	if (n > p->max_per) {
		n = p->max_per;
	}
	listener *l = listener_at(p, lid);
	l->st.routed++;
	p->st.routed++;
	if (n == 0) {
		return 0;
	}
	uint32_t id = run_new(p, lid, (uint32_t)n, now_ms + (int64_t)ttl_ms);
	p->filling = id;
	memcpy(p->r[id].seq, seq, n * sizeof(*seq));
	for (size_t k = 0; k < n && k < PF_AHEAD; k++) {
		prefetch_slot(p, lid, seq[k]);
	}
	for (size_t k = 0; k < n; k++) {
		if (k + PF_AHEAD < n) {
			prefetch_slot(p, lid, seq[k + PF_AHEAD]);
		}
		uint32_t i = find(p, lid, seq[k]);
		if (i != NIL) {
			/* pending already: this run takes it, as newest */
			slot *x = &p->s[i];
			uint32_t from = x->run;
			bit_set(&p->r[from], x->pos, false);
			x->run = id;
			x->pos = (uint32_t)k;
			bit_set(&p->r[id], (uint32_t)k, true);
			p->r[id].live++;
			if (from != id && --p->r[from].live == 0) {
				run_free(p, from);
			}
			continue;
		}
		/* the bounds: the oldest entry of the listener, or of all */
		if (l->n >= p->max_per) {
			end_first(p, l->head);
		}
		if (p->count >= p->max_entries) {
			end_first(p, p->ghead);
		}
		grow(p);
		put(p, lid, seq[k], id, (uint32_t)k);
		bit_set(&p->r[id], (uint32_t)k, true);
		p->r[id].live++;
		p->count++;
		l->n++;
		l->st.entries++;
		l->st.added++;
		p->st.added++;
	}
	p->filling = NIL;
	if (p->r[id].live == 0) {
		run_free(p, id);
	}
	return n;
}

size_t
kvd_add(kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t n,
	int64_t now_ms, uint32_t ttl_ms)
{
	pthread_rwlock_wrlock(&p->lock);
	n = add(p, lid, seq, n, now_ms, ttl_ms);
	write_end(p);
	return n;
}

void
kvd_route(kvd_pending *p, uint32_t lid, kvd_route_req *r)
{
	pthread_rwlock_wrlock(&p->lock);
	size_t predicted =
	    r->held + kvd_extend(p, lid, r->seq, r->held, r->n, r->now_ms);
	if (r->prompt_tokens > 0 && r->block_size > 0) {
		size_t most = (r->prompt_tokens - 1) / r->block_size;
		predicted = predicted < most ? predicted : most;
		listener *l = listener_at(p, lid);
		l->st.prompt_tokens += r->prompt_tokens;
		l->st.predicted_tokens += (uint64_t)predicted * r->block_size;
	}
	r->predicted = predicted;
	r->pending =
	    add(p, lid, r->seq + r->held, r->n - r->held, r->now_ms, r->ttl_ms);
	write_end(p);
}

/* end_some ends the entries of lid for seq[0..n) that exist. */
static void
end_some(kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t n,
	 end_kind kind, kvd_drop_reason reason)
{
	if (kvd_empty(p)) {
		return;
	}
	pthread_rwlock_wrlock(&p->lock);
	if (lid < p->nl && p->l[lid].n > 0) {
		for (size_t k = 0; k < n && p->l[lid].n > 0; k++) {
			if (k + PF_AHEAD < n) {
				prefetch_slot(p, lid, seq[k + PF_AHEAD]);
			}
			uint32_t i = find(p, lid, seq[k]);
			if (i != NIL) {
				end_slot(p, i, kind, reason);
			}
		}
	}
	write_end(p);
}

void
kvd_confirm(kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t n)
{
	end_some(p, lid, seq, n, END_CONFIRMED, 0);
}

void
kvd_drop(kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t n,
	 kvd_drop_reason reason)
{
	end_some(p, lid, seq, n, END_DROPPED, reason);
}

void
kvd_drop_listener(kvd_pending *p, uint32_t lid, kvd_drop_reason reason)
{
	pthread_rwlock_wrlock(&p->lock);
	if (lid < p->nl) {
		while (p->l[lid].head != NIL) {
			end_run(p, p->l[lid].head, END_DROPPED, reason);
		}
		if (reason == KVD_DROP_GONE) {
			p->l[lid] = (listener){.head = NIL, .tail = NIL};
		}
	}
	write_end(p);
}

size_t
kvd_sweep(kvd_pending *p, int64_t now_ms)
{
	if (kvd_empty(p)) {
		return 0;
	}
	pthread_rwlock_wrlock(&p->lock);
	uint64_t before = p->st.expired, ending = 0;
	for (uint32_t id = p->ghead; id != NIL && p->r[id].expire_ms <= now_ms;
	     id = p->r[id].gnext) {
		ending += p->r[id].live;
	}
	if (ending * 4 >= (uint64_t)p->count * 3) {
		/* three quarters and more go (a burst's entries expire
		 * together): emptying the table and putting the others back
		 * costs less than a lookup and a deletion for each */
		while (p->ghead != NIL && p->r[p->ghead].expire_ms <= now_ms) {
			expire_run(p, p->ghead);
		}
		refill(p);
	} else {
		while (p->ghead != NIL && p->r[p->ghead].expire_ms <= now_ms) {
			end_run(p, p->ghead, END_EXPIRED, 0);
		}
	}
	size_t n = (size_t)(p->st.expired - before);
	write_end(p);
	return n;
}

void
kvd_read_begin(kvd_pending *p)
{
	pthread_rwlock_rdlock(&p->lock);
}

void
kvd_read_end(kvd_pending *p)
{
	pthread_rwlock_unlock(&p->lock);
}

/* live_at returns the run of the live entry in slot i at now_ms, or
 * NULL. */
static const run *
live_at(const kvd_pending *p, uint32_t i, int64_t now_ms)
{
	if (i == NIL) {
		return NULL;
	}
	const run *r = &p->r[p->s[i].run];
	return r->expire_ms > now_ms ? r : NULL;
}

size_t
kvd_extend(const kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t from,
	   size_t n, int64_t now_ms)
{
	if (from >= n || lid >= p->nl || p->l[lid].n == 0) {
		return 0;
	}
	uint32_t i = find(p, lid, seq[from]);
	const run *r = live_at(p, i, now_ms);
	if (r == NULL) {
		return 0;
	}
	uint32_t pos = p->s[i].pos;
	size_t k = from + 1;
	while (k < n) {
		/* along the run while it holds the prompt's next block */
		pos++;
		if (pos < r->n && r->seq[pos] == seq[k] && bit_get(r, pos)) {
			k++;
			continue;
		}
		i = find(p, lid, seq[k]);
		if ((r = live_at(p, i, now_ms)) == NULL) {
			break;
		}
		pos = p->s[i].pos;
		k++;
	}
	return k - from;
}

void
kvd_foreach_listener(const kvd_pending *p, uint64_t seq0, int64_t now_ms,
		     kvd_listener_fn fn, void *arg)
{
	for (uint32_t lid = 0; lid < p->nl; lid++) {
		if (p->l[lid].n == 0) {
			continue;
		}
		if (live_at(p, find(p, lid, seq0), now_ms) != NULL) {
			fn(arg, lid);
		}
	}
}

void
kvd_stats_get(kvd_pending *p, kvd_stats *out)
{
	pthread_rwlock_rdlock(&p->lock);
	*out = p->st;
	out->entries = p->count;
	pthread_rwlock_unlock(&p->lock);
}

void
kvd_listener_stats_get(kvd_pending *p, uint32_t lid, kvd_listener_stats *out)
{
	pthread_rwlock_rdlock(&p->lock);
	*out = lid < p->nl ? p->l[lid].st : (kvd_listener_stats){0};
	pthread_rwlock_unlock(&p->lock);
}
