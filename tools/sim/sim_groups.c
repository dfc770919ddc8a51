#include "sim_groups.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "sim_gstore.h"

typedef struct group {
	sim_group_spec spec;
	uint32_t r; /* hash blocks per block */
	sim_gstore store;
} group;

struct sim_groups {
	sim_groups_config cfg;
	group groups[SIM_MAX_GROUPS];
	uint32_t stamp;    /* pins of the running step */
	uint64_t *evicted; /* scratch: hashes evicted by one group */
	kvi_xbuf xbuf;
};

/* A request loaded into a batch: its hash blocks [base, base + nb). */
typedef struct req {
	sim_batch *batch;
	uint32_t base;
	uint32_t nb;
	uint32_t keys; /* batch->reqs index or SIM_NO_KEYS */
} req;

/* ---- setup ---------------------------------------------------------- */

sim_groups *
sim_groups_alloc(const sim_groups_config *cfg)
{
	sim_groups *g = kvi_calloc(1, sizeof(*g));
	g->cfg = *cfg;
	uint32_t most = 0;
	for (size_t i = 0; i < cfg->n_groups; i++) {
		group *gr = &g->groups[i];
		gr->spec = cfg->groups[i].spec;
		gr->r = gr->spec.block_size / cfg->hash_block_size;
		sim_gstore_init(&gr->store, cfg->groups[i].blocks);
		if (cfg->groups[i].blocks > most) {
			most = cfg->groups[i].blocks;
		}
	}
	g->evicted = kvi_malloc(((size_t)most + 1) * sizeof(uint64_t));
	return g;
}

void
sim_groups_free(sim_groups *g)
{
	if (g == NULL) {
		return;
	}
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		sim_gstore_fini(&g->groups[i].store);
	}
	kvi_free(g->evicted);
	kvi_xbuf_fini(&g->xbuf);
	kvi_free(g);
}

const sim_groups_config *
sim_groups_cfg(const sim_groups *g)
{
	return &g->cfg;
}

/* is_align says whether a group is Mamba in "align" mode: it holds at
 * most two blocks of a request at once, the state it hit and the one it
 * stores. */
static bool
is_align(const sim_group_spec *s)
{
	return s->kind == SIM_GROUP_MAMBA && s->mamba_mode == SIM_MAMBA_ALIGN;
}

uint64_t
sim_groups_limit(const sim_groups *g, uint64_t n_tokens)
{
	/* A step pins every block it stores and the window before it:
	 * the prompt must fit in every group but "align" ones (which have
	 * two blocks at least, sim_groups_parse). */
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		if (is_align(&g->groups[i].spec)) {
			continue;
		}
		uint64_t cap = (uint64_t)g->cfg.groups[i].blocks *
			       g->groups[i].spec.block_size;
		if (cap < n_tokens) {
			n_tokens = cap;
		}
	}
	return n_tokens;
}

uint32_t
sim_groups_count(const sim_groups *g, size_t i)
{
	return g->groups[i].store.count;
}

void
sim_groups_clear(sim_groups *g, sim_batch *batch)
{
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		sim_gstore_clear(&g->groups[i].store);
	}
	if (batch != NULL) {
		sim_batch_add_event(batch)->type = SIM_EV_CLEARED;
	}
}

static uint32_t
next_stamp(sim_groups *g)
{
	if (++g->stamp == 0) {
		/* wrapped: no slot may look pinned by accident */
		for (size_t i = 0; i < g->cfg.n_groups; i++) {
			sim_gstore *s = &g->groups[i].store;
			for (uint32_t k = 0; k < s->high; k++) {
				s->slots[k].pin = 0;
			}
		}
		g->stamp = 1;
	}
	return g->stamp;
}

/* ---- a request's blocks ----------------------------------------------- */

/* load copies the prompt's first nb hash blocks into batch and hashes
 * them (sim_cache.h). */
static req
load(sim_groups *g, sim_batch *batch, const uint32_t *tokens, uint32_t nb,
     const kvi_prompt_keys *keys)
{
	req q = {.batch = batch, .nb = nb};
	q.base = sim_batch_add_request(batch, g->cfg.salt, tokens, nb, keys,
				       &g->xbuf, &q.keys);
	return q;
}

/* block_ext returns the hash of group block i: its last hash block's. */
static uint64_t
block_ext(const group *gr, const req *q, uint64_t i)
{
	return q->batch->ext[q->base + (i + 1) * gr->r - 1];
}

/* find returns the slot of group block i, SIM_GSTORE_NIL if not held. */
static uint32_t
find(const group *gr, const req *q, uint64_t i)
{
	if ((i + 1) * gr->r > q->nb) {
		return SIM_GSTORE_NIL;
	}
	return sim_gstore_find(&gr->store, block_ext(gr, q, i));
}

typedef struct held_arg {
	const sim_groups *g;
	const req *q;
} held_arg;

static bool
held(void *arg, size_t gi, uint64_t block)
{
	const held_arg *a = arg;
	return find(&a->g->groups[gi], a->q, block) != SIM_GSTORE_NIL;
}

static uint64_t
engine_hit(const sim_groups *g, const req *q, uint64_t n_tokens)
{
	sim_group_spec specs[SIM_MAX_GROUPS];
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		specs[i] = g->groups[i].spec;
	}
	held_arg a = {g, q};
	return sim_hybrid_hit(specs, g->cfg.n_groups, n_tokens, held, &a);
}

/* ---- what each kind keeps --------------------------------------------- */

/* skipped returns the blocks before which a request computed up to x
 * tokens no longer needs the group's blocks: the managers'
 * get_num_skipped_tokens(x) / block_size (SlidingWindowManager: x -
 * window + 1; ChunkedLocalAttentionManager: x's chunk start;
 * MambaManager: x - 1; full attention: none). */
static uint64_t
skipped(const sim_group_spec *s, uint64_t x)
{
	uint64_t t = 0;
	switch (s->kind) {
	case SIM_GROUP_SLIDING:
	case SIM_GROUP_SLIDING_MLA:
		t = x + 1 > s->sliding_window ? x + 1 - s->sliding_window : 0;
		break;
	case SIM_GROUP_CHUNKED_LOCAL:
		t = x / s->chunk_size * s->chunk_size;
		break;
	case SIM_GROUP_MAMBA:
		t = x > 0 ? x - 1 : 0;
		break;
	default:
		break;
	}
	return t / s->block_size;
}

/* stores writes into [*lo, *hi) the group blocks a step [from, to)
 * caches (SingleTypeKVCacheManager.cache_blocks: the full blocks from the
 * first one not cached yet; in "align" mode only the running state
 * block, when the step ends on its boundary). */
static void
stores(const sim_group_spec *s, uint64_t from, uint64_t to, uint64_t *lo,
       uint64_t *hi)
{
	uint64_t bs = s->block_size;
	if (is_align(s)) {
		uint64_t end = to / bs * bs;
		*lo = end > from ? end / bs - 1 : 0;
		*hi = end > from ? end / bs : 0;
		return;
	}
	*lo = from / bs;
	*hi = to / bs;
}

/* release releases group block i if the group holds it. */
static void
release(group *gr, const req *q, uint64_t i)
{
	uint32_t slot = find(gr, q, i);
	if (slot != SIM_GSTORE_NIL) {
		sim_gstore_release(&gr->store, slot);
	}
}

/* release_skipped releases, last first, the request's blocks that a step
 * starting at from no longer needs and the one before (prev) did
 * (remove_skipped_blocks frees them in that order). In "align" mode that
 * is the previous state block alone: blocks between two states were never
 * the request's. */
static void
release_skipped(group *gr, const req *q, uint64_t prev, uint64_t from)
{
	uint64_t bs = gr->spec.block_size;
	if (is_align(&gr->spec)) {
		if (prev > 0 && prev % bs == 0 && prev < from &&
		    prev / bs - 1 < skipped(&gr->spec, from)) {
			release(gr, q, prev / bs - 1);
		}
		return;
	}
	for (uint64_t i = skipped(&gr->spec, from);
	     i-- > skipped(&gr->spec, prev);) {
		release(gr, q, i);
	}
}

/* pin pins group block i if held. */
static void
pin(group *gr, const req *q, uint64_t i, uint32_t stamp)
{
	uint32_t slot = find(gr, q, i);
	if (slot != SIM_GSTORE_NIL) {
		gr->store.slots[slot].pin = stamp;
	}
}

/* pin_step pins what a step [from, to) uses: the blocks still in the
 * window at from and those it stores again. Returns how many of its
 * stores are new. */
static uint32_t
pin_step(group *gr, const req *q, uint64_t from, uint64_t to, uint32_t stamp)
{
	for (uint64_t i = skipped(&gr->spec, from);
	     i < from / gr->spec.block_size; i++) {
		pin(gr, q, i, stamp);
	}
	uint64_t lo, hi;
	stores(&gr->spec, from, to, &lo, &hi);
	uint32_t fresh = 0;
	for (uint64_t i = lo; i < hi; i++) {
		if (find(gr, q, i) == SIM_GSTORE_NIL) {
			fresh++;
		} else {
			pin(gr, q, i, stamp);
		}
	}
	return fresh;
}

/* release_all ends the request: every block it still uses, last first. */
static void
release_all(group *gr, const req *q, uint64_t from, uint64_t to)
{
	uint64_t bs = gr->spec.block_size;
	if (is_align(&gr->spec)) {
		uint64_t lo, hi;
		stores(&gr->spec, from, to, &lo, &hi);
		if (hi > lo) {
			release(gr, q, lo);
		}
		if (from > 0 && from % bs == 0) {
			release(gr, q, from / bs - 1);
		}
		return;
	}
	for (uint64_t i = to / bs; i-- > skipped(&gr->spec, from);) {
		release(gr, q, i);
	}
}

/* ---- events --------------------------------------------------------- */

static void
add_removed(sim_batch *b, uint32_t group_idx, const uint64_t *hashes,
	    uint32_t n)
{
	uint32_t first = b->n_removed;
	for (uint32_t i = 0; i < n; i++) {
		sim_batch_add_removed(b, hashes[i]);
	}
	sim_event *ev = sim_batch_add_event(b);
	ev->type = SIM_EV_REMOVED;
	ev->tier = SIM_TIER_GPU;
	ev->grouped = true;
	ev->group = group_idx;
	ev->first = first;
	ev->n = n;
}

/* evict makes room in group i for fresh new blocks: one BlockRemoved. */
static uint32_t
evict(sim_groups *g, size_t i, uint32_t fresh, uint32_t stamp, sim_batch *b)
{
	sim_gstore *s = &g->groups[i].store;
	uint32_t room = sim_gstore_free_slots(s);
	if (fresh <= room) {
		return 0;
	}
	uint32_t n = sim_gstore_evict(s, fresh - room, stamp, g->evicted);
	if (n > 0) {
		add_removed(b, (uint32_t)i, g->evicted, n);
	}
	return n;
}

/* new_block fills a slot for group block i of the request. */
static void
new_block(const group *gr, const req *q, uint64_t i, uint32_t hash_bs,
	  sim_gslot *out)
{
	const sim_batch *b = q->batch;
	uint32_t k = q->base + (uint32_t)((i + 1) * gr->r - 1);
	uint32_t depth = k - q->base;
	memset(out, 0, sizeof(*out));
	out->ext = b->ext[k];
	out->has_parent = depth > 0;
	out->parent = depth > 0 ? b->ext[k - 1] : 0;
	out->has_gparent = i > 0;
	out->gparent = i > 0 ? b->ext[k - gr->r] : 0;
	out->local = b->local[k];
	out->seq = b->seq[k];
	out->depth = depth;
	out->gdepth = (uint32_t)i;
	out->glocal = out->local;
	if (gr->r > 1) {
		/* a group block of several hash blocks: its own local hash
		 * (requests with keys are refused on such a model) */
		const uint32_t *tok =
		    b->tokens + (size_t)(k + 1 - gr->r) * hash_bs;
		out->glocal = kvi_local_hash(tok, gr->spec.block_size,
					     kvi_local_seed(NULL, 0, NULL, 0));
	}
}

/* store caches the step's blocks of group i (new ones pinned) and appends
 * their BlockStored. Returns the blocks new to the group. */
static uint32_t
store(sim_groups *g, size_t i, const req *q, uint64_t from, uint64_t to,
      uint32_t stamp)
{
	group *gr = &g->groups[i];
	uint64_t lo, hi;
	stores(&gr->spec, from, to, &lo, &hi);
	if (hi <= lo) {
		return 0;
	}
	uint32_t fresh = 0;
	for (uint64_t k = lo; k < hi; k++) {
		if (find(gr, q, k) == SIM_GSTORE_NIL) {
			sim_gslot b;
			new_block(gr, q, k, g->cfg.hash_block_size, &b);
			sim_gstore_insert(&gr->store, &b, stamp);
			fresh++;
		}
	}
	sim_event *ev = sim_batch_add_event(q->batch);
	ev->type = SIM_EV_STORED;
	ev->tier = SIM_TIER_GPU;
	ev->grouped = true;
	ev->group = (uint32_t)i;
	ev->stride = gr->r;
	ev->req = gr->r == 1 ? q->keys : SIM_NO_KEYS;
	ev->first = q->base + (uint32_t)(lo * gr->r);
	ev->n = (uint32_t)(hi - lo);
	ev->has_parent = lo > 0;
	ev->parent = lo > 0 ? block_ext(gr, q, lo - 1) : 0;
	return fresh;
}

/* ---- steps ---------------------------------------------------------- */

/* step runs [from, to) of a request whose previous step started at prev:
 * releases, evictions (every group's), stores (every group's), and with
 * last the request's end. */
static void
step(sim_groups *g, const req *q, uint64_t prev, uint64_t from, uint64_t to,
     bool last, sim_request_result *res)
{
	uint32_t stamp = next_stamp(g);
	uint32_t fresh[SIM_MAX_GROUPS];
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		release_skipped(&g->groups[i], q, prev, from);
		fresh[i] = pin_step(&g->groups[i], q, from, to, stamp);
	}
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		res->removed += evict(g, i, fresh[i], stamp, q->batch);
	}
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		res->stored += store(g, i, q, from, to, stamp);
	}
	if (last) {
		for (size_t i = 0; i < g->cfg.n_groups; i++) {
			release_all(&g->groups[i], q, from, to);
		}
	}
}

void
sim_groups_run(sim_groups *g, sim_batch *batch, const uint32_t *tokens,
	       uint64_t n_tokens, const kvi_prompt_keys *keys,
	       sim_request_result *res)
{
	uint64_t n = sim_groups_limit(g, n_tokens);
	uint32_t hbs = g->cfg.hash_block_size;
	memset(res, 0, sizeof(*res));
	res->first_block = batch->n_blocks;
	if (n < hbs) {
		return;
	}
	req q = load(g, batch, tokens, (uint32_t)(n / hbs), keys);
	uint64_t hit = engine_hit(g, &q, n);
	res->n_blocks = q.nb;
	res->hit_tokens = hit;
	res->gpu_hit = (uint32_t)(hit / hbs);
	/* Scheduler._mamba_block_aligned_split: in "align" mode a step
	 * ends on the prompt's last block boundary. */
	uint32_t align = sim_groups_step_align(&g->cfg);
	uint64_t cut = align > 0 ? n / align * align : n;
	if (hit < cut && cut < n) {
		step(g, &q, hit, hit, cut, false, res);
		step(g, &q, hit, cut, n, true, res);
	} else {
		step(g, &q, hit, hit, n, true, res);
	}
}

uint64_t
sim_groups_hit(sim_groups *g, sim_batch *batch, const uint32_t *tokens,
	       uint64_t n_tokens, const kvi_prompt_keys *keys)
{
	uint64_t n = sim_groups_limit(g, n_tokens);
	uint32_t hbs = g->cfg.hash_block_size;
	req q = load(g, batch, tokens, (uint32_t)(n / hbs), keys);
	return engine_hit(g, &q, n);
}

void
sim_groups_span(sim_groups *g, sim_batch *batch, const uint32_t *tokens,
		uint64_t n_tokens, const kvi_prompt_keys *keys, uint64_t prev,
		uint64_t from, uint64_t to, bool last, sim_request_result *res)
{
	uint64_t n = sim_groups_limit(g, n_tokens);
	to = to < n ? to : n;
	from = from < to ? from : to;
	prev = prev < from ? prev : from;
	uint32_t hbs = g->cfg.hash_block_size;
	memset(res, 0, sizeof(*res));
	req q = load(g, batch, tokens, (uint32_t)(to / hbs), keys);
	res->first_block = q.base;
	res->n_blocks = q.nb;
	res->gpu_hit = (uint32_t)(from / hbs);
	step(g, &q, prev, from, to, last, res);
}

void
sim_groups_query(sim_groups *g, sim_batch *batch, const uint32_t *tokens,
		 uint64_t n_tokens, const kvi_prompt_keys *keys, uint64_t *hit,
		 uint64_t *group_hits)
{
	uint64_t n = sim_groups_limit(g, n_tokens);
	uint32_t hbs = g->cfg.hash_block_size;
	req q = load(g, batch, tokens, (uint32_t)(n / hbs), keys);
	*hit = engine_hit(g, &q, n);
	sim_group_spec specs[SIM_MAX_GROUPS];
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		specs[i] = g->groups[i].spec;
	}
	uint64_t align = g->cfg.n_groups == 1
			     ? specs[0].block_size
			     : sim_hybrid_alignment(specs, g->cfg.n_groups);
	held_arg a = {g, &q};
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		group_hits[i] = n < 2
				    ? 0
				    : sim_hybrid_group_hit(&specs[i], i, n - 1,
							   align, held, &a);
	}
}

/* ---- ground truth --------------------------------------------------- */

static int
by_depth(const void *pa, const void *pb)
{
	const sim_block_info *a = pa, *b = pb;
	if (a->depth != b->depth) {
		return a->depth < b->depth ? -1 : 1;
	}
	return a->hash < b->hash ? -1 : a->hash > b->hash;
}

sim_block_info *
sim_groups_snapshot(const sim_groups *g, size_t *n)
{
	size_t total = 0;
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		total += g->groups[i].store.count;
	}
	*n = 0;
	if (total == 0) {
		return NULL;
	}
	sim_block_info *out = kvi_malloc(total * sizeof(*out));
	for (size_t i = 0; i < g->cfg.n_groups; i++) {
		const sim_gstore *s = &g->groups[i].store;
		for (uint32_t k = 0; k < s->high; k++) {
			const sim_gslot *b = &s->slots[k];
			if (b->used) {
				out[(*n)++] = (sim_block_info){
				    .hash = b->ext,
				    .parent = b->parent,
				    .has_parent = b->has_parent,
				    .local_hash = b->local,
				    .seq_hash = b->seq,
				    .depth = b->depth,
				    .groups = 1u << i};
			}
		}
	}
	qsort(out, *n, sizeof(*out), by_depth);
	/* one entry per hash, with every group holding it */
	size_t m = 0;
	for (size_t k = 0; k < *n; k++) {
		if (m > 0 && out[m - 1].hash == out[k].hash) {
			out[m - 1].groups |= out[k].groups;
		} else {
			out[m++] = out[k];
		}
	}
	for (size_t k = 0; k < m; k++) {
		out[k].tiers = (out[k].groups & 1u) ? SIM_TIER_GPU : 0;
	}
	*n = m;
	return out;
}

sim_block_info *
sim_groups_dump(const sim_groups *g, size_t *n)
{
	const sim_gstore *s = &g->groups[0].store;
	*n = 0;
	if (s->count == 0) {
		return NULL;
	}
	sim_block_info *out = kvi_malloc(s->count * sizeof(*out));
	for (uint32_t k = 0; k < s->high; k++) {
		const sim_gslot *b = &s->slots[k];
		if (b->used) {
			out[(*n)++] =
			    (sim_block_info){.hash = b->ext,
					     .parent = b->gparent,
					     .has_parent = b->has_gparent,
					     .local_hash = b->glocal,
					     .seq_hash = b->seq,
					     .depth = b->gdepth,
					     .tiers = SIM_TIER_GPU,
					     .groups = 1};
		}
	}
	qsort(out, *n, sizeof(*out), by_depth);
	return out;
}
