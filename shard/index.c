#include "index.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "table.h"

#define KVX_STRIPE_BITS        6
#define KVX_STRIPES            (1u << KVX_STRIPE_BITS)
#define KVX_LIST_FLAG          0x80000000u
#define KVX_HOLDER(lid, tiers) ((uint32_t)(lid) << 3 | (uint32_t)(tiers))
#define KVX_HOLDER_LID(h)      ((h) >> 3)
#define KVX_HOLDER_TIERS(h)    ((uint8_t)((h)&7u))
#define KVX_QUERY_STACK        256

/* A sorted (by listener id) list of holder words for one sequence hash. */
typedef struct kvx_hlist {
	uint32_t n, cap;
	uint32_t h[];
} kvx_hlist;

typedef struct kvx_part {
	char *model;
	uint32_t block_size;
	uint32_t n_listeners;
	pthread_rwlock_t lock;
	kvx_seqmap stripes[KVX_STRIPES];
	kvx_hlist **lists; /* by list id; NULL when free */
	uint32_t n_lists, cap_lists;
	uint32_t *free_ids;
	uint32_t n_free, cap_free;
	_Atomic uint64_t seq_count;
	struct kvx_part *next;
} kvx_part;

typedef struct kvx_lis {
	kvx_part *part;
	kvx_listener_info info; /* strings owned */
	kvx_extmap ext;
	kvx_aliasmap alias;
	_Atomic uint64_t entries; /* ext's size, readable from any thread */
} kvx_lis;

struct kvx_index {
	/* Guards the partition list and the listener array. Taken shared by
	 * queries and stats, exclusively by listener add/remove. */
	pthread_rwlock_t meta;
	kvx_part *parts;
	kvx_lis **lis;
	uint32_t cap_lis;
};

/* ---- holders ------------------------------------------------------- */

static kvx_seqmap *
kvx_stripe(kvx_part *p, uint64_t seq)
{
	return &p->stripes[seq >> (64 - KVX_STRIPE_BITS)];
}

static uint32_t
kvx_list_new(kvx_part *p, uint32_t cap)
{
	uint32_t id;
	if (p->n_free > 0) {
		id = p->free_ids[--p->n_free];
	} else {
		if (p->n_lists == p->cap_lists) {
			p->cap_lists = p->cap_lists ? p->cap_lists * 2 : 64;
			p->lists = kvi_reallocarray(p->lists, p->cap_lists,
						    sizeof(*p->lists));
		}
		id = p->n_lists++;
	}
	p->lists[id] = kvi_malloc(sizeof(kvx_hlist) + cap * sizeof(uint32_t));
	p->lists[id]->n = 0;
	p->lists[id]->cap = cap;
	return id;
}

static void
kvx_list_free(kvx_part *p, uint32_t id)
{
	kvi_free(p->lists[id]);
	p->lists[id] = NULL;
	if (p->n_free == p->cap_free) {
		p->cap_free = p->cap_free ? p->cap_free * 2 : 64;
		p->free_ids = kvi_reallocarray(p->free_ids, p->cap_free,
					       sizeof(uint32_t));
	}
	p->free_ids[p->n_free++] = id;
}

/* kvx_list_pos returns the position of lid in l, or where it would go. */
static uint32_t
kvx_list_pos(const kvx_hlist *l, uint32_t lid, bool *found)
{
	uint32_t lo = 0, hi = l->n;
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

/* kvx_holders returns the holder words of seq (count in *n): a single
 * holder is copied to *one, a list points into the partition, valid while
 * its lock is held. */
static const uint32_t *
kvx_holders(kvx_part *p, uint64_t seq, uint32_t *one, uint32_t *n)
{
	kvx_holder *w = kvx_seqmap_find(kvx_stripe(p, seq), seq);
	if (w == NULL) {
		*n = 0;
		return NULL;
	}
	if (w->w & KVX_LIST_FLAG) {
		kvx_hlist *l = p->lists[w->w & ~KVX_LIST_FLAG];
		*n = l->n;
		return l->h;
	}
	*n = 1;
	*one = w->w;
	return one;
}

/* kvx_holder_get returns lid's tiers for seq (0: not a holder). */
static uint8_t
kvx_holder_get(kvx_part *p, uint64_t seq, uint32_t lid)
{
	kvx_holder *w = kvx_seqmap_find(kvx_stripe(p, seq), seq);
	if (w == NULL) {
		return 0;
	}
	if (!(w->w & KVX_LIST_FLAG)) {
		return KVX_HOLDER_LID(w->w) == lid ? KVX_HOLDER_TIERS(w->w) : 0;
	}
	bool found;
	const kvx_hlist *l = p->lists[w->w & ~KVX_LIST_FLAG];
	uint32_t pos = kvx_list_pos(l, lid, &found);
	return found ? KVX_HOLDER_TIERS(l->h[pos]) : 0;
}

static void
kvx_holder_drop(kvx_part *p, kvx_seqmap *m, uint64_t seq, kvx_holder *w,
		uint32_t lid)
{
	if (!(w->w & KVX_LIST_FLAG)) {
		if (KVX_HOLDER_LID(w->w) == lid) {
			kvx_seqmap_remove(m, seq, NULL);
			atomic_store_explicit(
			    &p->seq_count,
			    atomic_load_explicit(&p->seq_count,
						 memory_order_relaxed) -
				1,
			    memory_order_relaxed);
		}
		return;
	}
	uint32_t id = w->w & ~KVX_LIST_FLAG;
	kvx_hlist *l = p->lists[id];
	bool found;
	uint32_t pos = kvx_list_pos(l, lid, &found);
	if (!found) {
		return;
	}
	memmove(&l->h[pos], &l->h[pos + 1], (l->n - pos - 1) * sizeof(l->h[0]));
	if (--l->n == 1) {
		w->w = l->h[0]; /* back inline */
		kvx_list_free(p, id);
	}
}

static void
kvx_holder_put(kvx_part *p, kvx_seqmap *m, uint64_t seq, uint32_t lid,
	       uint8_t tiers)
{
	bool added;
	kvx_holder *w = kvx_seqmap_insert(m, seq, &added);
	uint32_t word = KVX_HOLDER(lid, tiers);
	if (added) {
		w->w = word;
		atomic_store_explicit(
		    &p->seq_count,
		    atomic_load_explicit(&p->seq_count, memory_order_relaxed) +
			1,
		    memory_order_relaxed);
		return;
	}
	if (!(w->w & KVX_LIST_FLAG)) {
		if (KVX_HOLDER_LID(w->w) == lid) {
			w->w = word;
			return;
		}
		uint32_t other = w->w;
		uint32_t id = kvx_list_new(p, 4);
		kvx_hlist *l = p->lists[id];
		bool first = KVX_HOLDER_LID(other) < lid;
		l->h[0] = first ? other : word;
		l->h[1] = first ? word : other;
		l->n = 2;
		w->w = KVX_LIST_FLAG | id;
		return;
	}
	uint32_t id = w->w & ~KVX_LIST_FLAG;
	kvx_hlist *l = p->lists[id];
	bool found;
	uint32_t pos = kvx_list_pos(l, lid, &found);
	if (found) {
		l->h[pos] = word;
		return;
	}
	if (l->n == l->cap) {
		l->cap *= 2;
		l = kvi_realloc(l,
				sizeof(kvx_hlist) + l->cap * sizeof(uint32_t));
		p->lists[id] = l;
	}
	memmove(&l->h[pos + 1], &l->h[pos], (l->n - pos) * sizeof(l->h[0]));
	l->h[pos] = word;
	l->n++;
}

/* kvx_holder_set makes lid's tiers for seq exactly tiers (0: not held). */
static void
kvx_holder_set(kvx_part *p, uint64_t seq, uint32_t lid, uint8_t tiers)
{
	kvx_seqmap *m = kvx_stripe(p, seq);
	if (tiers != 0) {
		kvx_holder_put(p, m, seq, lid, tiers);
		return;
	}
	kvx_holder *w = kvx_seqmap_find(m, seq);
	if (w != NULL) {
		kvx_holder_drop(p, m, seq, w, lid);
	}
}

/* ---- listeners ----------------------------------------------------- */

/* kvx_ref_update applies the change of one external hash's tiers for seq,
 * from `from` to `to` (0 meaning absent), to lid's holder word, counting
 * per tier when several external hashes of the listener share seq. */
static void
kvx_ref_update(kvx_lis *l, uint64_t seq, uint8_t from, uint8_t to)
{
	kvx_part *p = l->part;
	kvx_aliasval *a = kvx_aliasmap_find(&l->alias, seq);
	if (a == NULL) {
		uint8_t cur =
		    from == 0 ? kvx_holder_get(p, seq, l->info.lid) : 0;
		if (cur == 0) {
			kvx_holder_set(p, seq, l->info.lid, to);
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

static void
kvx_entries_sync(kvx_lis *l)
{
	atomic_store_explicit(&l->entries, kvx_extmap_size(&l->ext),
			      memory_order_relaxed);
}

static kvx_lis *
kvx_lis_get(const kvx_index *idx, uint32_t lid)
{
	return lid < idx->cap_lis ? idx->lis[lid] : NULL;
}

static kvx_part *
kvx_part_find(const kvx_index *idx, const char *model)
{
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		if (strcmp(p->model, model) == 0) {
			return p;
		}
	}
	return NULL;
}

static kvx_part *
kvx_part_new(kvx_index *idx, const char *model, uint32_t block_size)
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
	for (uint32_t s = 0; s < KVX_STRIPES; s++) {
		kvx_seqmap_init(&p->stripes[s]);
	}
	p->next = idx->parts;
	idx->parts = p;
	return p;
}

static void
kvx_part_free(kvx_part *p)
{
	for (uint32_t s = 0; s < KVX_STRIPES; s++) {
		kvx_seqmap_fini(&p->stripes[s]);
	}
	for (uint32_t i = 0; i < p->n_lists; i++) {
		kvi_free(p->lists[i]);
	}
	kvi_free(p->lists);
	kvi_free(p->free_ids);
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
kvx_lis_free(kvx_lis *l)
{
	kvx_extmap_fini(&l->ext);
	kvx_aliasmap_fini(&l->alias);
	kvi_free((char *)l->info.key);
	kvi_free((char *)l->info.pod);
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
			kvx_lis_free(idx->lis[i]);
		}
	}
	kvi_free(idx->lis);
	while (idx->parts != NULL) {
		kvx_part *p = idx->parts;
		idx->parts = p->next;
		kvx_part_free(p);
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
	kvx_part *p = kvx_part_find(idx, model);
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
		p = kvx_part_new(idx, model, block_size);
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
	kvx_extmap_init(&l->ext);
	kvx_aliasmap_init(&l->alias);
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
	kvx_write_begin(idx, lid);
	kvx_clear(idx, lid);
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
		kvx_part_free(p);
	}
	pthread_rwlock_unlock(&idx->meta);
	kvx_lis_free(l);
}

bool
kvx_listener_exists(const kvx_index *idx, uint32_t lid)
{
	return kvx_lis_get(idx, lid) != NULL;
}

size_t
kvx_listener_entries(const kvx_index *idx, uint32_t lid)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	return l == NULL
		   ? 0
		   : atomic_load_explicit(&l->entries, memory_order_relaxed);
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
	kvx_extval *v = l == NULL ? NULL : kvx_extmap_find(&l->ext, ext);
	if (v == NULL) {
		return false;
	}
	*seq = v->seq;
	return true;
}

void
kvx_store(kvx_index *idx, uint32_t lid, uint64_t ext, uint64_t seq,
	  kvi_tier tier)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	bool added;
	kvx_extval *v = kvx_extmap_insert(&l->ext, ext, &added);
	uint8_t from = added ? 0 : v->tiers;
	if (!added && v->seq != seq) {
		/* The engine reused an external hash for another prefix:
		 * the old mapping goes entirely. */
		kvx_ref_update(l, v->seq, from, 0);
		from = 0;
	}
	uint8_t to = (uint8_t)(from | KVX_TIER_BIT(tier));
	v->seq = seq;
	v->tiers = to;
	if (to != from) {
		kvx_ref_update(l, seq, from, to);
	}
	kvx_entries_sync(l);
}

bool
kvx_remove(kvx_index *idx, uint32_t lid, uint64_t ext, kvi_tier tier)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	kvx_extval *v = kvx_extmap_find(&l->ext, ext);
	if (v == NULL || !(v->tiers & KVX_TIER_BIT(tier))) {
		return false;
	}
	uint8_t from = v->tiers;
	uint8_t to = (uint8_t)(from & ~KVX_TIER_BIT(tier));
	uint64_t seq = v->seq;
	if (to == 0) {
		kvx_extmap_remove(&l->ext, ext, NULL);
	} else {
		v->tiers = to;
	}
	kvx_ref_update(l, seq, from, to);
	kvx_entries_sync(l);
	return true;
}

void
kvx_clear(kvx_index *idx, uint32_t lid)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	size_t pos = 0;
	uint64_t ext;
	kvx_extval v;
	while (kvx_extmap_next(&l->ext, &pos, &ext, &v)) {
		kvx_holder_set(l->part, v.seq, lid, 0);
	}
	kvx_extmap_clear(&l->ext);
	kvx_aliasmap_clear(&l->alias);
	kvx_entries_sync(l);
}

void
kvx_listener_foreach(const kvx_index *idx, uint32_t lid, kvx_entry_fn fn,
		     void *arg)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	if (l == NULL) {
		return;
	}
	size_t pos = 0;
	uint64_t ext;
	kvx_extval v;
	while (kvx_extmap_next(&l->ext, &pos, &ext, &v)) {
		fn(arg, ext, v.seq, v.tiers);
	}
}

/* ---- queries ------------------------------------------------------- */

typedef struct kvx_cand {
	uint32_t lid;
	uint32_t any, gc, gpu; /* prefix lengths: any tier, gpu|cpu, gpu */
	bool gc_open, gpu_open;
} kvx_cand;

static bool
kvx_filter_pass(const kvx_filter *f, const kvx_listener_info *info)
{
	if (f == NULL) {
		return true;
	}
	if (f->has_rank && info->dp_rank != f->rank) {
		return false;
	}
	if (f->instances == NULL) {
		return true;
	}
	for (size_t i = 0; i < f->n_instances; i++) {
		if (f->instances[i] == info->instance_id) {
			return true;
		}
	}
	return false;
}

static void
kvx_cand_step(kvx_cand *c, uint8_t tiers)
{
	const uint8_t gc =
	    KVX_TIER_BIT(KVI_TIER_GPU) | KVX_TIER_BIT(KVI_TIER_CPU);
	c->any++;
	c->gc_open = c->gc_open && (tiers & gc);
	c->gc += c->gc_open;
	c->gpu_open = c->gpu_open && (tiers & KVX_TIER_BIT(KVI_TIER_GPU));
	c->gpu += c->gpu_open;
}

static void
kvx_cand_emit(kvx_index *idx, const kvx_cand *c, kvx_match_fn fn, void *arg)
{
	kvx_match m = {
	    .gpu = c->gpu,
	    .cpu = c->gc - c->gpu,
	    .disk = c->any - c->gc,
	    .longest = c->any,
	};
	fn(arg, &idx->lis[c->lid]->info, &m);
}

/* kvx_probe runs the probe loop over a partition whose read lock is held. */
static void
kvx_probe(kvx_index *idx, kvx_part *p, const uint64_t *seq, size_t n,
	  const kvx_filter *filter, kvx_match_fn fn, void *arg)
{
	uint32_t nh, one;
	const uint32_t *h = n > 0 ? kvx_holders(p, seq[0], &one, &nh) : NULL;
	if (h == NULL) {
		return;
	}
	kvx_cand stack[KVX_QUERY_STACK];
	kvx_cand *alive =
	    nh <= KVX_QUERY_STACK ? stack : kvi_malloc(nh * sizeof(kvx_cand));
	uint32_t na = 0;
	for (uint32_t k = 0; k < nh; k++) {
		uint32_t lid = KVX_HOLDER_LID(h[k]);
		if (!kvx_filter_pass(filter, &idx->lis[lid]->info)) {
			continue;
		}
		alive[na] =
		    (kvx_cand){.lid = lid, .gc_open = true, .gpu_open = true};
		kvx_cand_step(&alive[na++], KVX_HOLDER_TIERS(h[k]));
	}
	for (size_t i = 1; i < n && na > 0; i++) {
		h = kvx_holders(p, seq[i], &one, &nh);
		/* Merge the sorted candidates with the sorted holders. */
		uint32_t out = 0, k = 0;
		for (uint32_t a = 0; a < na; a++) {
			while (k < nh && KVX_HOLDER_LID(h[k]) < alive[a].lid) {
				k++;
			}
			if (k < nh && KVX_HOLDER_LID(h[k]) == alive[a].lid) {
				kvx_cand_step(&alive[a],
					      KVX_HOLDER_TIERS(h[k]));
				alive[out++] = alive[a];
			} else {
				kvx_cand_emit(idx, &alive[a], fn, arg);
			}
		}
		na = out;
	}
	for (uint32_t a = 0; a < na; a++) {
		kvx_cand_emit(idx, &alive[a], fn, arg);
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
	kvx_part *p = kvx_part_find(idx, model);
	if (p == NULL) {
		pthread_rwlock_unlock(&idx->meta);
		return KVI_ENOENT;
	}
	*block_size = p->block_size;
	pthread_rwlock_rdlock(&p->lock);
	kvx_probe(idx, p, seq, n, filter, fn, arg);
	pthread_rwlock_unlock(&p->lock);
	pthread_rwlock_unlock(&idx->meta);
	return KVI_OK;
}

kvi_err
kvx_instance_ranks(kvx_index *idx, const char *model, const kvx_filter *filter,
		   kvx_match_fn fn, void *arg)
{
	kvx_filter instances_only = {0};
	if (filter != NULL) {
		instances_only.instances = filter->instances;
		instances_only.n_instances = filter->n_instances;
	}
	pthread_rwlock_rdlock(&idx->meta);
	kvx_part *p = kvx_part_find(idx, model);
	if (p == NULL) {
		pthread_rwlock_unlock(&idx->meta);
		return KVI_ENOENT;
	}
	const kvx_match none = {0};
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		kvx_lis *l = idx->lis[i];
		if (l != NULL && l->part == p &&
		    kvx_filter_pass(&instances_only, &l->info)) {
			fn(arg, &l->info, &none);
		}
	}
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
			out->listeners++;
			out->entries += atomic_load_explicit(
			    &idx->lis[i]->entries, memory_order_relaxed);
		}
	}
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		out->seq_hashes +=
		    atomic_load_explicit(&p->seq_count, memory_order_relaxed);
		pthread_rwlock_rdlock(&p->lock);
		for (uint32_t s = 0; s < KVX_STRIPES; s++) {
			out->table_bytes += kvx_seqmap_bytes(&p->stripes[s]);
		}
		pthread_rwlock_unlock(&p->lock);
	}
	pthread_rwlock_unlock(&idx->meta);
}
