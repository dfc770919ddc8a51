/*
 * pending.c - pending entries: one pool of entries, a chained hash table
 * on (listener, sequence hash), and two lists through the pool - every
 * entry oldest first, and each listener's oldest first - so that either
 * bound evicts the oldest in O(1).
 */
#include "pending.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"

#define NIL UINT32_MAX

typedef struct entry {
	uint64_t seq;
	int64_t expire_ms;
	uint32_t lid;
	uint32_t hnext;        /* hash chain; the free list when unused */
	uint32_t gprev, gnext; /* every entry, oldest first */
	uint32_t lprev, lnext; /* the listener's entries, oldest first */
} entry;

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

	entry *e;
	uint32_t cap, used, free_head;
	uint32_t *bucket;
	uint32_t nbucket; /* a power of two, or 0 before the first entry */
	unsigned bits;
	uint32_t ghead, gtail;
	_Atomic uint64_t live;

	listener *l;
	uint32_t nl;

	kvd_stats st;
};

static uint32_t
slot(const kvd_pending *p, uint32_t lid, uint64_t seq)
{
	uint64_t h = (seq ^ ((uint64_t)lid * 0x9E3779B97F4A7C15ull)) *
		     0xff51afd7ed558ccdull;
	return (uint32_t)(h >> (64 - p->bits));
}

static uint32_t
find(const kvd_pending *p, uint32_t lid, uint64_t seq)
{
	if (p->nbucket == 0) {
		return NIL;
	}
	for (uint32_t i = p->bucket[slot(p, lid, seq)]; i != NIL;
	     i = p->e[i].hnext) {
		if (p->e[i].seq == seq && p->e[i].lid == lid) {
			return i;
		}
	}
	return NIL;
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

/* rehash doubles the buckets (or makes the first ones) and links every
 * live entry again. */
static void
rehash(kvd_pending *p)
{
	unsigned bits = p->nbucket == 0 ? 10 : p->bits + 1;
	kvi_free(p->bucket);
	p->bits = bits;
	p->nbucket = 1u << bits;
	p->bucket = kvi_malloc((size_t)p->nbucket * sizeof(*p->bucket));
	memset(p->bucket, 0xff, (size_t)p->nbucket * sizeof(*p->bucket));
	for (uint32_t i = p->ghead; i != NIL; i = p->e[i].gnext) {
		uint32_t b = slot(p, p->e[i].lid, p->e[i].seq);
		p->e[i].hnext = p->bucket[b];
		p->bucket[b] = i;
	}
}

static uint32_t
entry_take(kvd_pending *p)
{
	if (p->free_head != NIL) {
		uint32_t i = p->free_head;
		p->free_head = p->e[i].hnext;
		return i;
	}
	if (p->used == p->cap) {
		uint32_t cap = p->cap == 0 ? 1024 : p->cap * 2;
		if (cap > p->max_entries) {
			cap = (uint32_t)p->max_entries;
		}
		p->e = kvi_realloc(p->e, (size_t)cap * sizeof(*p->e));
		p->cap = cap;
	}
	return p->used++;
}

static void
unlink_lists(kvd_pending *p, uint32_t i)
{
	entry *x = &p->e[i];
	listener *l = &p->l[x->lid];
	if (x->gprev != NIL) {
		p->e[x->gprev].gnext = x->gnext;
	} else {
		p->ghead = x->gnext;
	}
	if (x->gnext != NIL) {
		p->e[x->gnext].gprev = x->gprev;
	} else {
		p->gtail = x->gprev;
	}
	if (x->lprev != NIL) {
		p->e[x->lprev].lnext = x->lnext;
	} else {
		l->head = x->lnext;
	}
	if (x->lnext != NIL) {
		p->e[x->lnext].lprev = x->lprev;
	} else {
		l->tail = x->lprev;
	}
}

static void
link_tails(kvd_pending *p, uint32_t i)
{
	entry *x = &p->e[i];
	listener *l = &p->l[x->lid];
	x->gprev = p->gtail;
	x->gnext = NIL;
	if (p->gtail != NIL) {
		p->e[p->gtail].gnext = i;
	} else {
		p->ghead = i;
	}
	p->gtail = i;
	x->lprev = l->tail;
	x->lnext = NIL;
	if (l->tail != NIL) {
		p->e[l->tail].lnext = i;
	} else {
		l->head = i;
	}
	l->tail = i;
}

/* end removes entry i and counts how it ended. */
static void
end(kvd_pending *p, uint32_t i, end_kind kind, kvd_drop_reason reason)
{
	entry *x = &p->e[i];
	listener *l = &p->l[x->lid];
	uint32_t *at = &p->bucket[slot(p, x->lid, x->seq)];
	while (*at != i) {
		at = &p->e[*at].hnext;
	}
	*at = x->hnext;
	unlink_lists(p, i);
	l->n--;
	l->st.entries--;
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
	x->hnext = p->free_head;
	p->free_head = i;
	atomic_fetch_sub_explicit(&p->live, 1, memory_order_relaxed);
}

kvd_pending *
kvd_pending_alloc(const kvd_config *cfg)
{
	kvd_pending *p = kvi_calloc(1, sizeof(*p));
	pthread_rwlock_init(&p->lock, NULL);
	p->max_entries = cfg != NULL && cfg->max_entries > 0
			     ? cfg->max_entries
			     : KVD_MAX_ENTRIES_DEFAULT;
	if (p->max_entries >= NIL) {
		p->max_entries = NIL - 1;
	}
	p->max_per = cfg != NULL && cfg->max_per_listener > 0
			 ? cfg->max_per_listener
			 : KVD_MAX_PER_LISTENER_DEFAULT;
	if (p->max_per > p->max_entries) {
		p->max_per = p->max_entries;
	}
	p->free_head = p->ghead = p->gtail = NIL;
	return p;
}

void
kvd_pending_free(kvd_pending *p)
{
	if (p == NULL) {
		return;
	}
	pthread_rwlock_destroy(&p->lock);
	kvi_free(p->e);
	kvi_free(p->bucket);
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
	int64_t expire = now_ms + (int64_t)ttl_ms;
	listener *l = listener_at(p, lid);
	l->st.routed++;
	p->st.routed++;
	for (size_t k = 0; k < n; k++) {
		uint32_t i = find(p, lid, seq[k]);
		if (i != NIL) {
			p->e[i].expire_ms = expire;
			unlink_lists(p, i);
			link_tails(p, i);
			continue;
		}
		if (l->n >= p->max_per) {
			end(p, l->head, END_EVICTED, 0);
		}
		if (atomic_load_explicit(&p->live, memory_order_relaxed) >=
		    p->max_entries) {
			end(p, p->ghead, END_EVICTED, 0);
		}
		i = entry_take(p);
		p->e[i] =
		    (entry){.seq = seq[k], .expire_ms = expire, .lid = lid};
		uint64_t live = atomic_fetch_add_explicit(
				    &p->live, 1, memory_order_relaxed) +
				1;
		if (live > p->nbucket) {
			rehash(p); /* links every entry but i */
		}
		uint32_t b = slot(p, lid, seq[k]);
		p->e[i].hnext = p->bucket[b];
		p->bucket[b] = i;
		link_tails(p, i);
		l->n++;
		l->st.entries++;
		l->st.added++;
		p->st.added++;
	}
	return n;
}

size_t
kvd_add(kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t n,
	int64_t now_ms, uint32_t ttl_ms)
{
	pthread_rwlock_wrlock(&p->lock);
	n = add(p, lid, seq, n, now_ms, ttl_ms);
	pthread_rwlock_unlock(&p->lock);
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
	pthread_rwlock_unlock(&p->lock);
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
			uint32_t i = find(p, lid, seq[k]);
			if (i != NIL) {
				end(p, i, kind, reason);
			}
		}
	}
	pthread_rwlock_unlock(&p->lock);
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
			end(p, p->l[lid].head, END_DROPPED, reason);
		}
		if (reason == KVD_DROP_GONE) {
			p->l[lid] = (listener){.head = NIL, .tail = NIL};
		}
	}
	pthread_rwlock_unlock(&p->lock);
}

size_t
kvd_sweep(kvd_pending *p, int64_t now_ms)
{
	if (kvd_empty(p)) {
		return 0;
	}
	size_t n = 0;
	pthread_rwlock_wrlock(&p->lock);
	while (p->ghead != NIL && p->e[p->ghead].expire_ms <= now_ms) {
		end(p, p->ghead, END_EXPIRED, 0);
		n++;
	}
	pthread_rwlock_unlock(&p->lock);
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

size_t
kvd_extend(const kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t from,
	   size_t n, int64_t now_ms)
{
	if (lid >= p->nl || p->l[lid].n == 0) {
		return 0;
	}
	size_t k = from;
	for (; k < n; k++) {
		uint32_t i = find(p, lid, seq[k]);
		if (i == NIL || p->e[i].expire_ms <= now_ms) {
			break;
		}
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
		uint32_t i = find(p, lid, seq0);
		if (i != NIL && p->e[i].expire_ms > now_ms) {
			fn(arg, lid);
		}
	}
}

void
kvd_stats_get(kvd_pending *p, kvd_stats *out)
{
	pthread_rwlock_rdlock(&p->lock);
	*out = p->st;
	out->entries = atomic_load_explicit(&p->live, memory_order_relaxed);
	pthread_rwlock_unlock(&p->lock);
}

void
kvd_listener_stats_get(kvd_pending *p, uint32_t lid, kvd_listener_stats *out)
{
	pthread_rwlock_rdlock(&p->lock);
	*out = lid < p->nl ? p->l[lid].st : (kvd_listener_stats){0};
	pthread_rwlock_unlock(&p->lock);
}
