#include "index.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "index_int.h"

#define KVX_QUERY_STACK 256
#define KVX_PROBE_AHEAD 16

/* ---- listeners ----------------------------------------------------- */

static kvx_part *
part_find(const kvx_index *idx, const char *model)
{
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		if (strcmp(p->model, model) == 0) {
			return p;
		}
	}
	return NULL;
}

static kvx_part *
part_new(kvx_index *idx, const char *model, uint32_t block_size)
{
	kvx_part *p = kvi_calloc(1, sizeof(*p));
	p->model = kvi_strdup(model);
	p->block_size = block_size;
	pthread_rwlockattr_t attr;
	pthread_rwlockattr_init(&attr);
	/* Queries are many and short; a writer must not starve behind them. */
	pthread_rwlockattr_setkind_np(
	    &attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&p->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	kvx_hold_init(&p->holders);
	p->next = idx->parts;
	idx->parts = p;
	return p;
}

static void
part_free(kvx_part *p)
{
	kvi_free(p->hybrid);
	kvi_free(p->members);
	kvi_free(p->slot_of);
	kvx_hold_fini(&p->holders);
	pthread_rwlock_destroy(&p->lock);
	kvi_free(p->model);
	kvi_free(p);
}

kvx_index *
kvx_index_alloc(void)
{
	kvx_index *idx = kvi_calloc(1, sizeof(*idx));
	pthread_rwlock_init(&idx->meta, NULL);
	return idx;
}

static void
lis_free(kvx_lis *l)
{
	kvx_ents_fini(l);
	kvi_free((char *)l->info.key);
	kvi_free((char *)l->info.pod);
	kvi_free(l->groups);
	kvi_free(l);
}

void
kvx_index_free(kvx_index *idx)
{
	if (idx == NULL) {
		return;
	}
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		if (idx->lis[i] != NULL) {
			lis_free(idx->lis[i]);
		}
	}
	kvi_free(idx->lis);
	while (idx->parts != NULL) {
		kvx_part *p = idx->parts;
		idx->parts = p->next;
		part_free(p);
	}
	pthread_rwlock_destroy(&idx->meta);
	kvi_free(idx);
}

kvi_err
kvx_listener_add(kvx_index *idx, uint32_t lid, const char *key, const char *pod,
		 uint64_t instance_id, uint16_t dp_rank, const char *model,
		 uint32_t block_size)
{
	if (lid >= KVX_MAX_LISTENERS || block_size == 0) {
		return KVI_EINVAL;
	}
	kvi_err rv = KVI_OK;
	pthread_rwlock_wrlock(&idx->meta);
	kvx_part *p = part_find(idx, model);
	if (kvx_lis_get(idx, lid) != NULL) {
		rv = KVI_EEXIST;
		goto out;
	}
	if (p != NULL && p->block_size != block_size) {
		rv = KVI_EINVAL;
		goto out;
	}
	if (lid >= idx->cap_lis) {
		uint32_t cap = idx->cap_lis ? idx->cap_lis : 64;
		while (cap <= lid) {
			cap *= 2;
		}
		idx->lis = kvi_reallocarray(idx->lis, cap, sizeof(*idx->lis));
		memset(idx->lis + idx->cap_lis, 0,
		       (cap - idx->cap_lis) * sizeof(*idx->lis));
		idx->cap_lis = cap;
	}
	if (p == NULL) {
		p = part_new(idx, model, block_size);
	}
	kvx_lis *l = kvi_calloc(1, sizeof(*l));
	l->part = p;
	l->info = (kvx_listener_info){
	    .lid = lid,
	    .instance_id = instance_id,
	    .dp_rank = dp_rank,
	    .key = kvi_strdup(key),
	    .pod = kvi_strdup(pod != NULL ? pod : ""),
	    .model = p->model,
	    .block_size = block_size,
	};
	l->owner = lid;
	l->slot = -1;
	kvx_ents_init(l);
	idx->lis[lid] = l;
	p->n_listeners++;
out:
	pthread_rwlock_unlock(&idx->meta);
	return rv;
}

void
kvx_listener_remove(kvx_index *idx, uint32_t lid)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	if (l == NULL) {
		return;
	}
	for (uint32_t g = 1; l->groups != NULL && g < l->groups->n; g++) {
		if (l->groups->lid[g] != KVX_NO_LID) {
			kvx_listener_remove(idx, l->groups->lid[g]);
		}
	}
	kvx_write_begin(idx, lid);
	kvx_clear(idx, lid);
	kvx_groups_forget(idx, l);
	kvx_write_end(idx, lid);
	pthread_rwlock_wrlock(&idx->meta);
	idx->lis[lid] = NULL;
	kvx_part *p = l->part;
	if (--p->n_listeners == 0) {
		kvx_part **pp = &idx->parts;
		while (*pp != p) {
			pp = &(*pp)->next;
		}
		*pp = p->next;
		part_free(p);
	}
	pthread_rwlock_unlock(&idx->meta);
	lis_free(l);
}

bool
kvx_listener_exists(const kvx_index *idx, uint32_t lid)
{
	return kvx_lis_get(idx, lid) != NULL;
}

void
kvx_listener_reserve(kvx_index *idx, uint32_t lid, size_t n)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	if (l != NULL) {
		kvx_refmap_reserve(&l->ext, n);
	}
}

void
kvx_write_begin(kvx_index *idx, uint32_t lid)
{
	pthread_rwlock_wrlock(&kvx_lis_get(idx, lid)->part->lock);
}

void
kvx_write_end(kvx_index *idx, uint32_t lid)
{
	pthread_rwlock_unlock(&kvx_lis_get(idx, lid)->part->lock);
}

bool
kvx_lookup(const kvx_index *idx, uint32_t lid, uint64_t ext, uint64_t *seq)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	return l != NULL && kvx_ents_lookup(l, ext, seq);
}

void
kvx_store(kvx_index *idx, uint32_t lid, uint64_t ext, uint64_t seq,
	  kvi_tier tier)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	kvx_ents_store(l, ext, seq, (uint8_t)KVX_TIER_BIT(tier));
	kvx_entries_sync(l);
}

#define KVX_PREFETCH_AHEAD 8

void
kvx_store_batch(kvx_index *idx, uint32_t lid, const uint64_t *ext,
		const uint64_t *seq, const uint8_t *tiers, size_t n)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	kvx_part *p = l->part;
	/* Most of the cost is cache misses on two big tables: ask for the
	 * slots a few entries ahead so the misses overlap. */
	for (size_t i = 0; i < n && i < KVX_PREFETCH_AHEAD; i++) {
		kvx_refmap_prefetch(&l->ext, ext[i]);
		kvx_hold_prefetch(&p->holders, seq[i]);
	}
	for (size_t i = 0; i < n; i++) {
		size_t ahead = i + KVX_PREFETCH_AHEAD;
		if (ahead < n) {
			kvx_refmap_prefetch(&l->ext, ext[ahead]);
			kvx_hold_prefetch(&p->holders, seq[ahead]);
		}
		if (tiers[i] != 0) {
			kvx_ents_store(l, ext[i], seq[i], tiers[i]);
		}
	}
	kvx_entries_sync(l);
}

bool
kvx_remove(kvx_index *idx, uint32_t lid, uint64_t ext, kvi_tier tier)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	if (!kvx_ents_remove(l, ext, (uint8_t)KVX_TIER_BIT(tier))) {
		return false;
	}
	kvx_entries_sync(l);
	return true;
}

void
kvx_clear(kvx_index *idx, uint32_t lid)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	kvx_ents_clear(l);
	kvx_entries_sync(l);
}

/* ---- queries ------------------------------------------------------- */

/* A listener still matching. A prefix length is still growing exactly
 * when it equals any, so no flags are kept: a candidate is four words,
 * read and written whole. */
typedef struct kvx_cand {
	uint32_t lid;
	uint32_t any, gc, gpu; /* prefix lengths: any tier, gpu|cpu, gpu */
} kvx_cand;

/* cand_step extends c by one block held on tiers. */
static inline kvx_cand
cand_step(kvx_cand c, uint8_t tiers)
{
	const uint8_t gc =
	    KVX_TIER_BIT(KVI_TIER_GPU) | KVX_TIER_BIT(KVI_TIER_CPU);
	c.gc += c.gc == c.any && (tiers & gc);
	c.gpu += c.gpu == c.any && (tiers & KVX_TIER_BIT(KVI_TIER_GPU));
	c.any++;
	return c;
}

static void
cand_emit(kvx_index *idx, const kvx_cand *c, kvx_match_fn fn, void *arg)
{
	kvx_match m = {
	    .gpu = c->gpu,
	    .cpu = c->gc - c->gpu,
	    .disk = c->any - c->gc,
	    .longest = c->any,
	};
	fn(arg, &idx->lis[c->lid]->info, &m);
}

/* cand_step_run extends c by run blocks each held on tiers: a prefix
 * that grows at the first of them grows at all. */
static inline kvx_cand
cand_step_run(kvx_cand c, uint8_t tiers, uint32_t run)
{
	const uint8_t gc =
	    KVX_TIER_BIT(KVI_TIER_GPU) | KVX_TIER_BIT(KVI_TIER_CPU);
	c.gc += (c.gc == c.any && (tiers & gc)) ? run : 0;
	c.gpu +=
	    (c.gpu == c.any && (tiers & KVX_TIER_BIT(KVI_TIER_GPU))) ? run : 0;
	c.any += run;
	return c;
}

/* merge extends the candidates alive[0..*na) by run blocks whose
 * holders are h[0..nh) (both sorted by listener id), emitting those that
 * do not hold them; returns how many remain. */
static uint32_t
merge(kvx_index *idx, kvx_cand *alive, uint32_t na, const uint32_t *h,
      uint32_t nh, uint32_t run, kvx_match_fn fn, void *arg)
{
	uint32_t out = 0, k = 0;
	for (uint32_t a = 0; a < na; a++) {
		kvx_cand c = alive[a];
		while (k < nh && KVX_HOLDER_LID(h[k]) < c.lid) {
			k++;
		}
		if (k < nh && KVX_HOLDER_LID(h[k]) == c.lid) {
			alive[out++] =
			    cand_step_run(c, KVX_HOLDER_TIERS(h[k]), run);
		} else {
			cand_emit(idx, &c, fn, arg);
		}
	}
	return out;
}

/* probe runs the probe loop over a partition whose read lock is held.
 *
 * A query's cost is the candidates stepped per block. A prefix every
 * listener of a fleet holds (a system prompt) would step them all at
 * every one of its blocks; but consecutive blocks with exactly the same
 * holders step every candidate the same way, so such a run is found by
 * comparing holder lists and applied to the candidates once. */
static void
probe(kvx_index *idx, kvx_part *p, const uint64_t *seq, size_t n,
      const kvx_filter *filter, kvx_match_fn fn, void *arg)
{
	uint32_t nh, one;
	const uint32_t *h =
	    n > 0 ? kvx_hold_get(kvx_hold_stripe(&p->holders, seq[0]), seq[0],
				 &one, &nh)
		  : NULL;
	if (h == NULL) {
		return;
	}
	kvx_cand stack[KVX_QUERY_STACK];
	kvx_cand *alive =
	    nh <= KVX_QUERY_STACK ? stack : kvi_malloc(nh * sizeof(kvx_cand));
	uint32_t na = 0;
	for (uint32_t k = 0; k < nh; k++) {
		uint32_t lid = KVX_HOLDER_LID(h[k]);
		if (p->n_members > 0 && idx->lis[lid]->slot >= 0) {
			continue; /* a hybrid listener's group: its own probe */
		}
		if (kvx_filter_pass(filter, &idx->lis[lid]->info)) {
			alive[na++] = cand_step((kvx_cand){.lid = lid},
						KVX_HOLDER_TIERS(h[k]));
		}
	}
	/* The holders of the last block merged, and how many blocks after
	 * it had the very same holders (not yet applied). */
	const uint32_t *prev = h;
	uint32_t prev_n = nh, prev_one = one, run = 0;
	if (prev == &one) {
		prev = &prev_one;
	}
	for (size_t i = 1; i < n && i < KVX_PROBE_AHEAD; i++) {
		kvx_hold_prefetch(&p->holders, seq[i]);
	}
	for (size_t i = 1; i < n && na > 0; i++) {
		/* Lookups miss the cache: overlap the next ones. */
		if (i + KVX_PROBE_AHEAD < n) {
			kvx_hold_prefetch(&p->holders,
					  seq[i + KVX_PROBE_AHEAD]);
		}
		h = kvx_hold_get(kvx_hold_stripe(&p->holders, seq[i]), seq[i],
				 &one, &nh);
		if (h != NULL && nh == prev_n &&
		    memcmp(h, prev, nh * sizeof(*h)) == 0) {
			run++;
			continue;
		}
		if (run > 0) {
			na = merge(idx, alive, na, prev, prev_n, run, fn, arg);
			run = 0;
		}
		na = merge(idx, alive, na, h, h ? nh : 0, 1, fn, arg);
		prev = h == &one ? (prev_one = one, &prev_one) : h;
		prev_n = h ? nh : 0;
	}
	if (run > 0) {
		na = merge(idx, alive, na, prev, prev_n, run, fn, arg);
	}
	for (uint32_t a = 0; a < na; a++) {
		cand_emit(idx, &alive[a], fn, arg);
	}
	if (alive != stack) {
		kvi_free(alive);
	}
}

kvi_err
kvx_query(kvx_index *idx, const char *model, const uint64_t *seq, size_t n,
	  const kvx_filter *filter, kvx_match_fn fn, void *arg,
	  uint32_t *block_size)
{
	pthread_rwlock_rdlock(&idx->meta);
	kvx_part *p = part_find(idx, model);
	if (p == NULL) {
		pthread_rwlock_unlock(&idx->meta);
		return KVI_ENOENT;
	}
	*block_size = p->block_size;
	pthread_rwlock_rdlock(&p->lock);
	probe(idx, p, seq, n, filter, fn, arg);
	if (p->n_hybrid > 0) {
		kvx_groups_probe(idx, p, seq, n, filter, fn, arg);
	}
	pthread_rwlock_unlock(&p->lock);
	pthread_rwlock_unlock(&idx->meta);
	return KVI_OK;
}

kvi_err
kvx_listener_find(kvx_index *idx, const char *model, uint64_t instance_id,
		  uint16_t dp_rank, uint32_t *lid, uint32_t *block_size)
{
	kvi_err rv = KVI_ENOENT;
	pthread_rwlock_rdlock(&idx->meta);
	kvx_part *p = part_find(idx, model);
	for (uint32_t i = 0; p != NULL && i < idx->cap_lis; i++) {
		const kvx_lis *l = idx->lis[i];
		if (l != NULL && l->part == p && l->owner == i &&
		    l->info.instance_id == instance_id &&
		    l->info.dp_rank == dp_rank) {
			*lid = i;
			*block_size = p->block_size;
			rv = KVI_OK;
			break;
		}
	}
	pthread_rwlock_unlock(&idx->meta);
	return rv;
}

kvi_err
kvx_listeners_describe(kvx_index *idx, const char *model, const uint32_t *lids,
		       size_t n, const kvx_filter *filter, kvx_match_fn fn,
		       void *arg)
{
	pthread_rwlock_rdlock(&idx->meta);
	kvx_part *p = part_find(idx, model);
	if (p == NULL) {
		pthread_rwlock_unlock(&idx->meta);
		return KVI_ENOENT;
	}
	const kvx_match none = {0};
	pthread_rwlock_rdlock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		const kvx_lis *l =
		    lids[i] < idx->cap_lis ? idx->lis[lids[i]] : NULL;
		if (l != NULL && l->part == p &&
		    kvx_filter_pass(filter, &l->info)) {
			fn(arg, &l->info, &none);
		}
	}
	pthread_rwlock_unlock(&p->lock);
	pthread_rwlock_unlock(&idx->meta);
	return KVI_OK;
}

void
kvx_index_stats(kvx_index *idx, kvx_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_rwlock_rdlock(&idx->meta);
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		if (idx->lis[i] != NULL) {
			out->listeners += idx->lis[i]->owner == i;
			out->entries += atomic_load_explicit(
			    &idx->lis[i]->entries, memory_order_relaxed);
		}
	}
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		out->seq_hashes += kvx_hold_seqs(&p->holders);
	}
	pthread_rwlock_unlock(&idx->meta);
}

void
kvx_index_memory(kvx_index *idx, kvx_memory *out)
{
	memset(out, 0, sizeof(*out));
	pthread_rwlock_rdlock(&idx->meta);
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		pthread_rwlock_rdlock(&p->lock);
		kvx_hold_bytes(&p->holders, &out->seq_bytes, &out->list_bytes);
		pthread_rwlock_unlock(&p->lock);
	}
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		kvx_lis *l = idx->lis[i];
		if (l == NULL) {
			continue;
		}
		pthread_rwlock_rdlock(&l->part->lock);
		out->ext_bytes += kvx_ents_bytes(l);
		pthread_rwlock_unlock(&l->part->lock);
	}
	pthread_rwlock_unlock(&idx->meta);
}
