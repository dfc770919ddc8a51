/*
 * index_groups.c - the cache groups of hybrid listeners (index.h).
 *
 * An engine serving a hybrid model keeps one KV cache per kind of layer
 * (full attention, a sliding window, Mamba state...): vLLM's KV cache
 * groups. Each caches and evicts on its own, and the engine reuses a
 * prefix only as far as every group allows (hit_rule.h). So each group of
 * a listener is indexed as a listener of its own: the same holder maps,
 * the same maps of external hashes, the same bulk load. Group 0 is the
 * listener itself; a listener that has only that group, of full attention
 * at the model's block size, stays a plain one and costs nothing here.
 *
 * A hybrid listener is never a candidate of the prefix probe (index.c):
 * its groups may hold blocks past a hole (a sliding window keeps the
 * blocks before the hit point only), so its own probe reads every block
 * of the query, noting the tiers each group holds, then asks the rule.
 * A partition lists its hybrid listeners and their groups' listeners (its
 * members, each at its slot) so that the probe finds them without a
 * search: a holder whose listener has a slot is a member.
 */
#include <string.h>

#include "alloc.h"
#include "index_int.h"

#define KVX_GROUPS_AHEAD 16

static const kvx_group_spec plain = {.kind = KVX_KIND_FULL, .ratio = 1};

static void
list_add(uint32_t **a, uint32_t *n, uint32_t *cap, uint32_t v)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 8;
		*a = kvi_reallocarray(*a, *cap, sizeof(**a));
	}
	(*a)[(*n)++] = v;
}

static void
list_del(uint32_t *a, uint32_t *n, uint32_t v)
{
	for (uint32_t i = 0; i < *n; i++) {
		if (a[i] == v) {
			a[i] = a[--*n];
			return;
		}
	}
}

/* slot_set notes lid's slot (or -1) in p's dense map by listener id,
 * which the probe reads instead of each holder's listener. */
static void
slot_set(kvx_part *p, uint32_t lid, int32_t slot)
{
	if (lid >= p->cap_slot_of) {
		uint32_t cap = p->cap_slot_of ? p->cap_slot_of : 64;
		while (cap <= lid) {
			cap *= 2;
		}
		p->slot_of = kvi_reallocarray(p->slot_of, cap, sizeof(int32_t));
		memset(p->slot_of + p->cap_slot_of, 0xff,
		       (cap - p->cap_slot_of) * sizeof(int32_t));
		p->cap_slot_of = cap;
	}
	p->slot_of[lid] = slot;
}

static void
member_add(kvx_index *idx, kvx_part *p, kvx_lis *l)
{
	(void)idx;
	l->slot = (int32_t)p->n_members;
	slot_set(p, l->info.lid, l->slot);
	list_add(&p->members, &p->n_members, &p->cap_members, l->info.lid);
}

static void
member_del(kvx_index *idx, kvx_part *p, kvx_lis *l)
{
	if (l->slot < 0) {
		return;
	}
	uint32_t last = p->members[--p->n_members];
	if ((uint32_t)l->slot != p->n_members) {
		p->members[l->slot] = last;
		idx->lis[last]->slot = l->slot;
		slot_set(p, last, l->slot);
	}
	slot_set(p, l->info.lid, -1);
	l->slot = -1;
}

/* make_hybrid gives l its group table, under its partition's lock held
 * exclusively. */
static void
make_hybrid(kvx_index *idx, kvx_lis *l)
{
	if (l->groups != NULL) {
		return;
	}
	kvx_part *p = l->part;
	l->groups = kvi_calloc(1, sizeof(*l->groups));
	for (uint32_t g = 0; g < KVX_MAX_GROUPS; g++) {
		l->groups->lid[g] = KVX_NO_LID;
		l->groups->spec[g] = plain;
	}
	l->groups->lid[0] = l->info.lid;
	l->groups->n = 1;
	list_add(&p->hybrid, &p->n_hybrid, &p->cap_hybrid, l->info.lid);
	member_add(idx, p, l);
}

kvi_err
kvx_group_add(kvx_index *idx, uint32_t lid, uint32_t group, uint32_t sub)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	if (l == NULL || l->owner != lid || group == 0 ||
	    group >= KVX_MAX_GROUPS) {
		return KVI_EINVAL;
	}
	if (l->groups != NULL && l->groups->lid[group] != KVX_NO_LID) {
		return KVI_EEXIST;
	}
	const kvx_listener_info *in = &l->info;
	kvi_err rv =
	    kvx_listener_add(idx, sub, in->key, in->pod, in->instance_id,
			     in->dp_rank, in->model, in->block_size);
	if (rv != KVI_OK) {
		return rv;
	}
	kvx_lis *s = kvx_lis_get(idx, sub);
	kvx_part *p = l->part;
	pthread_rwlock_wrlock(&p->lock);
	make_hybrid(idx, l);
	s->owner = lid;
	s->group = group;
	member_add(idx, p, s);
	l->groups->lid[group] = sub;
	l->groups->spec[group] = plain;
	if (group >= l->groups->n) {
		l->groups->n = group + 1;
	}
	pthread_rwlock_unlock(&p->lock);
	return KVI_OK;
}

uint32_t
kvx_group_lid(const kvx_index *idx, uint32_t lid, uint32_t group)
{
	const kvx_lis *l = kvx_lis_get(idx, lid);
	if (l == NULL || group >= KVX_MAX_GROUPS) {
		return KVX_NO_LID;
	}
	if (group == 0) {
		return lid;
	}
	return l->groups != NULL ? l->groups->lid[group] : KVX_NO_LID;
}

void
kvx_group_spec_set(kvx_index *idx, uint32_t lid, uint32_t group,
		   const kvx_group_spec *spec)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	if (l == NULL || kvx_group_lid(idx, lid, group) == KVX_NO_LID ||
	    spec->ratio == 0 || spec->kind > KVX_KIND_NONE) {
		return; /* a record of a later build: not ours to guess */
	}
	if (l->groups == NULL) {
		if (spec->kind == plain.kind && spec->ratio == plain.ratio) {
			return;
		}
		make_hybrid(idx, l);
	}
	l->groups->spec[group] = *spec;
}

bool
kvx_group_spec_get(const kvx_index *idx, uint32_t lid, uint32_t group,
		   kvx_group_spec *out)
{
	const kvx_lis *l = kvx_lis_get(idx, lid);
	if (kvx_group_lid(idx, lid, group) == KVX_NO_LID) {
		return false;
	}
	*out = l->groups != NULL ? l->groups->spec[group] : plain;
	return true;
}

uint32_t
kvx_groups_count(const kvx_index *idx, uint32_t lid)
{
	const kvx_lis *l = kvx_lis_get(idx, lid);
	if (l == NULL) {
		return 0;
	}
	if (l->groups == NULL) {
		return 1;
	}
	uint32_t n = 0;
	for (uint32_t g = 0; g < l->groups->n; g++) {
		n += l->groups->lid[g] != KVX_NO_LID;
	}
	return n;
}

void
kvx_groups_forget(kvx_index *idx, kvx_lis *l)
{
	kvx_part *p = l->part;
	member_del(idx, p, l);
	if (l->owner != l->info.lid) {
		kvx_lis *o = kvx_lis_get(idx, l->owner);
		if (o != NULL && o->groups != NULL) {
			o->groups->lid[l->group] = KVX_NO_LID;
		}
		return;
	}
	if (l->groups != NULL) {
		list_del(p->hybrid, &p->n_hybrid, l->info.lid);
		kvi_free(l->groups);
		l->groups = NULL;
	}
}

/* ---- a listener's whole state --------------------------------------- */

static size_t
own_entries(const kvx_lis *l)
{
	return atomic_load_explicit(&l->entries, memory_order_relaxed);
}

size_t
kvx_listener_entries(const kvx_index *idx, uint32_t lid)
{
	const kvx_lis *l = kvx_lis_get(idx, lid);
	if (l == NULL) {
		return 0;
	}
	size_t n = own_entries(l);
	for (uint32_t g = 1; l->groups != NULL && g < l->groups->n; g++) {
		if (l->groups->lid[g] != KVX_NO_LID) {
			n += own_entries(idx->lis[l->groups->lid[g]]);
		}
	}
	return n;
}

size_t
kvx_listener_records(const kvx_index *idx, uint32_t lid)
{
	const kvx_lis *l = kvx_lis_get(idx, lid);
	return kvx_listener_entries(idx, lid) +
	       (l != NULL && l->groups != NULL ? kvx_groups_count(idx, lid)
					       : 0);
}

/* The entries of one group, tagged with it. */
typedef struct tag_fn {
	kvx_entry_fn fn;
	void *arg;
	uint8_t tag;
} tag_fn;

static void
tagged(void *arg, uint64_t ext, uint64_t seq, uint8_t tiers)
{
	const tag_fn *t = arg;
	t->fn(t->arg, ext, seq, (uint8_t)(tiers | t->tag));
}

void
kvx_listener_foreach(const kvx_index *idx, uint32_t lid, kvx_entry_fn fn,
		     void *arg)
{
	kvx_lis *l = kvx_lis_get(idx, lid);
	if (l == NULL) {
		return;
	}
	kvx_ents_foreach(l, fn, arg);
	const kvx_groups *gs = l->groups;
	for (uint32_t g = 0; gs != NULL && g < gs->n; g++) {
		if (gs->lid[g] == KVX_NO_LID) {
			continue;
		}
		const kvx_group_spec *sp = &gs->spec[g];
		uint8_t tag = (uint8_t)(g << KVX_GROUP_SHIFT);
		fn(arg, (uint64_t)sp->kind | (uint64_t)sp->ratio << 32,
		   sp->window, tag);
		if (g > 0) {
			tag_fn t = {fn, arg, tag};
			kvx_ents_foreach(idx->lis[gs->lid[g]], tagged, &t);
		}
	}
}

bool
kvx_record_spec(uint64_t ext, uint64_t seq, uint8_t tiers, uint32_t *group,
		kvx_group_spec *spec)
{
	if ((tiers & KVX_TIERS_ALL) != 0) {
		return false;
	}
	*group = tiers >> KVX_GROUP_SHIFT;
	spec->kind = (kvx_kind)(ext & 0xff);
	spec->ratio = (uint32_t)(ext >> 32);
	spec->window = (uint32_t)seq;
	return true;
}

bool
kvx_index_hybrid(kvx_index *idx)
{
	bool any = false;
	pthread_rwlock_rdlock(&idx->meta);
	for (kvx_part *p = idx->parts; p != NULL && !any; p = p->next) {
		any = p->n_hybrid > 0;
	}
	pthread_rwlock_unlock(&idx->meta);
	return any;
}

/* ---- the probe ------------------------------------------------------ */

/* What one probe of hybrid listeners keeps: per member seen, a row of the
 * tiers it holds of each block; per member, whether it is a full
 * attention group and how long a run from the first block it holds. */
typedef struct held_rows {
	int32_t *row_of; /* by slot: its row, or -1 */
	uint8_t *rows;   /* n bytes a row */
	uint32_t n_rows, cap_rows;
	size_t n;
	uint8_t *full;  /* by slot */
	uint32_t *run;  /* by slot: full attention members only */
	uint8_t *tiers; /* by row: every tier its row names */
} held_rows;

/* row_note notes that the member at slot holds blocks [from, to) on
 * tiers. */
static void
row_note(held_rows *h, int32_t slot, size_t from, size_t to, uint8_t tiers)
{
	int32_t r = h->row_of[slot];
	if (r < 0) {
		if (h->n_rows == h->cap_rows) {
			h->cap_rows = h->cap_rows ? 2 * h->cap_rows : 4;
			h->rows = kvi_reallocarray(h->rows, h->cap_rows, h->n);
			h->tiers = kvi_reallocarray(h->tiers, h->cap_rows, 1);
		}
		r = (int32_t)h->n_rows++;
		memset(h->rows + (size_t)r * h->n, 0, h->n);
		h->tiers[r] = 0;
		h->row_of[slot] = r;
	}
	memset(h->rows + (size_t)r * h->n + from, tiers, to - from);
	h->tiers[r] |= tiers;
}

/* bounded says whether every hybrid listener of p has a full attention
 * group, noting in h->full which members are one. Such a listener reuses
 * no block past the run from the first block its full attention groups
 * hold (vLLM's hybrid coordinator looks them up first and takes no more),
 * so the probe may stop once no such run goes on. */
static bool
bounded(kvx_index *idx, kvx_part *p, held_rows *h)
{
	bool all = true;
	for (uint32_t i = 0; i < p->n_hybrid; i++) {
		const kvx_groups *gs = idx->lis[p->hybrid[i]]->groups;
		bool any = false;
		for (uint32_t g = 0; g < gs->n; g++) {
			if (gs->lid[g] == KVX_NO_LID) {
				continue;
			}
			bool f = gs->spec[g].kind == KVX_KIND_FULL;
			h->full[idx->lis[gs->lid[g]]->slot] = f;
			any |= f;
		}
		all &= any;
	}
	return all;
}

/* note_run notes that the holders w[0..nh) hold blocks [from, to), and
 * returns how many full attention members' runs from the first block
 * now reach to. */
static uint32_t
note_run(kvx_part *p, held_rows *h, const uint32_t *w, uint32_t nh, size_t from,
	 size_t to)
{
	uint32_t going = 0;
	for (uint32_t k = 0; k < nh; k++) {
		uint32_t lid = KVX_HOLDER_LID(w[k]);
		int32_t slot = lid < p->cap_slot_of ? p->slot_of[lid] : -1;
		if (slot < 0) {
			continue;
		}
		row_note(h, slot, from, to, KVX_HOLDER_TIERS(w[k]));
		if (h->full[slot] && h->run[slot] == from) {
			h->run[slot] = (uint32_t)to;
			going++;
		}
	}
	return going;
}

/* gather notes, block after block, the tiers each member holds; returns
 * how many blocks it read: all n, or, when every listener is bounded,
 * those up to where no full attention group's run goes on. Consecutive
 * blocks with the very same holders (a prefix many listeners share) are
 * noted as one run, as the prefix probe does (index.c). */
static size_t
gather(kvx_part *p, const uint64_t *seq, size_t n, held_rows *h, bool bound)
{
	for (size_t i = 0; i < n && i < KVX_GROUPS_AHEAD; i++) {
		kvx_hold_prefetch(&p->holders, seq[i]);
	}
	const uint32_t *prev = NULL;
	uint32_t prev_n = 0, prev_one = 0;
	size_t start = 0;
	for (size_t i = 0; i < n; i++) {
		if (i + KVX_GROUPS_AHEAD < n) {
			kvx_hold_prefetch(&p->holders,
					  seq[i + KVX_GROUPS_AHEAD]);
		}
		uint32_t one, nh;
		const uint32_t *w = kvx_hold_get(
		    kvx_hold_stripe(&p->holders, seq[i]), seq[i], &one, &nh);
		nh = w != NULL ? nh : 0;
		if (i > 0 && nh == prev_n &&
		    (nh == 0 || memcmp(w, prev, nh * sizeof(*w)) == 0)) {
			continue;
		}
		if (i > 0 && note_run(p, h, prev, prev_n, start, i) == 0 &&
		    bound) {
			return i; /* no full attention run reaches block i */
		}
		prev = w == &one ? (prev_one = one, &prev_one) : w;
		prev_n = nh;
		start = i;
	}
	note_run(p, h, prev, prev_n, start, n);
	return n;
}

/* judge asks the rule for listener l's hit over the first n blocks, and
 * each group's own. The rule reads no further than the shortest run
 * from the first block of l's full attention groups, past which l reuses
 * nothing; and once when every block l holds is on the device tier. */
static void
judge(kvx_index *idx, const kvx_lis *l, held_rows *h, size_t n,
      const uint8_t *none, kvx_match_fn fn, void *arg)
{
	const kvx_groups *gs = l->groups;
	kvx_hit_group hg[KVX_MAX_GROUPS];
	kvx_group_spec specs[KVX_MAX_GROUPS];
	uint32_t own[KVX_MAX_GROUPS], ids[KVX_MAX_GROUPS];
	uint32_t ng = 0, cap = (uint32_t)n, bs = l->info.block_size;
	uint8_t tiers = 0;
	for (uint32_t g = 0; g < gs->n; g++) {
		if (gs->lid[g] == KVX_NO_LID) {
			continue;
		}
		int32_t slot = idx->lis[gs->lid[g]]->slot;
		int32_t r = h->row_of[slot];
		if (h->full[slot] && h->run[slot] < cap) {
			cap = h->run[slot];
		}
		tiers |= r >= 0 ? h->tiers[r] : 0;
		hg[ng] = (kvx_hit_group){
		    .kind = gs->spec[g].kind,
		    .ratio = gs->spec[g].ratio,
		    .window = gs->spec[g].window,
		    .held = r >= 0 ? h->rows + (size_t)r * h->n : none,
		};
		specs[ng] = gs->spec[g];
		ids[ng] = g;
		ng++;
	}
	if (tiers == 0 || cap == 0) {
		return; /* holds none of the query, or not its first block */
	}
	const uint8_t gpu = KVX_TIER_BIT(KVI_TIER_GPU);
	const uint8_t gc = gpu | KVX_TIER_BIT(KVI_TIER_CPU);
	uint32_t any = kvx_hit(hg, ng, bs, cap, KVX_TIERS_ALL);
	if (any == 0) {
		return;
	}
	uint32_t on_gc = any, on_gpu = any;
	if (tiers != gpu) {
		on_gc = kvx_hit(hg, ng, bs, cap, gc);
		on_gpu = kvx_hit(hg, ng, bs, cap, gpu);
		on_gc = on_gc > any ? any : on_gc;
		on_gpu = on_gpu > on_gc ? on_gc : on_gpu;
	}
	for (uint32_t k = 0; k < ng; k++) {
		own[k] = kvx_hit(&hg[k], 1, bs, (uint32_t)n, KVX_TIERS_ALL);
	}
	kvx_match m = {
	    .gpu = on_gpu,
	    .cpu = on_gc - on_gpu,
	    .disk = any - on_gc,
	    .longest = any,
	    .n_groups = ng,
	    .group_ids = ids,
	    .group_blocks = own,
	    .group_specs = specs,
	};
	fn(arg, &l->info, &m);
}

void
kvx_groups_probe(kvx_index *idx, kvx_part *p, const uint64_t *seq, size_t n,
		 const kvx_filter *filter, kvx_match_fn fn, void *arg)
{
	if (filter != NULL && filter->has_hit_cap && filter->hit_cap < n) {
		n = filter->hit_cap; /* the engine's rule reads no further */
	}
	if (n == 0 || n > UINT32_MAX) {
		return;
	}
	size_t nm = p->n_members;
	held_rows h = {.n = n};
	h.row_of = kvi_malloc(nm * sizeof(*h.row_of));
	memset(h.row_of, 0xff, nm * sizeof(*h.row_of));
	h.full = kvi_calloc(nm, 1);
	h.run = kvi_calloc(nm, sizeof(*h.run));
	size_t got = gather(p, seq, n, &h, bounded(idx, p, &h));
	uint8_t *none = kvi_calloc(n, 1);
	for (uint32_t i = 0; i < p->n_hybrid && h.n_rows > 0; i++) {
		const kvx_lis *l = idx->lis[p->hybrid[i]];
		if (kvx_filter_pass(filter, &l->info)) {
			judge(idx, l, &h, got, none, fn, arg);
		}
	}
	kvi_free(none);
	kvi_free(h.rows);
	kvi_free(h.tiers);
	kvi_free(h.run);
	kvi_free(h.full);
	kvi_free(h.row_of);
}
