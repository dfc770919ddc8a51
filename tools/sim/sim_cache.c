#include "sim_cache.h"

#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "alloc.h"
#include "hash.h"
#include "sim_keys.h"

#define NIL UINT32_MAX
#define GPU 0 /* index of the GPU LRU list */
#define CPU 1

/* A block slot. prev/next link it into the LRU list of each tier it is in
 * (head = most recently used); next[GPU] also links free slots. */
typedef struct sim_slot {
	uint64_t ext;
	uint64_t parent;
	uint64_t local;
	uint64_t seq;
	uint32_t depth;
	uint32_t prev[2];
	uint32_t next[2];
	uint32_t pin; /* == cache stamp: part of the running request */
	uint8_t tiers;
	uint8_t has_parent;
} sim_slot;

typedef struct sim_lru {
	uint32_t head;
	uint32_t tail;
	uint32_t count;
	uint32_t cap;
} sim_lru;

struct sim_cache {
	sim_cache_config cfg;
	sim_slot *slots;
	uint32_t n_slots;   /* gpu_blocks + cpu_blocks */
	uint32_t high;      /* slots [0, high) have been used */
	uint32_t free_head; /* free slots below high */
	uint32_t *table;    /* open addressing: slot + 1, 0 = empty */
	uint32_t table_mask;
	unsigned table_shift;
	sim_lru lru[2];
	uint32_t stamp;
	uint32_t *req_slots; /* scratch: the running request's slots */
	uint32_t cap_req;
	kvi_xbuf xbuf; /* scratch: a block's extra bytes */
};

static const unsigned tier_bit[2] = {SIM_TIER_GPU, SIM_TIER_CPU};

/* ---- batch ---------------------------------------------------------- */

void
sim_batch_init(sim_batch *b, uint32_t block_size)
{
	memset(b, 0, sizeof(*b));
	b->block_size = block_size;
}

void
sim_batch_fini(sim_batch *b)
{
	kvi_free(b->events);
	kvi_free(b->ext);
	kvi_free(b->local);
	kvi_free(b->seq);
	kvi_free(b->tokens);
	kvi_free(b->removed);
	kvi_free(b->xkeys);
	kvi_free(b->xkey_start);
	kvi_free(b->reqs);
	kvi_free(b->text);
	memset(b, 0, sizeof(*b));
}

void
sim_batch_reset(sim_batch *b)
{
	b->n_events = 0;
	b->n_blocks = 0;
	b->n_removed = 0;
	b->n_xkeys = 0;
	b->n_reqs = 0;
	b->text_len = 0;
}

static uint32_t
grow_cap(uint32_t cap, uint32_t need)
{
	uint32_t n = cap ? cap : 16;
	while (n < need) {
		n *= 2;
	}
	return n;
}

sim_event *
sim_batch_add_event(sim_batch *b)
{
	if (b->n_events == b->cap_events) {
		b->cap_events = grow_cap(b->cap_events, b->n_events + 1);
		b->events = kvi_reallocarray(b->events, b->cap_events,
					     sizeof(*b->events));
	}
	sim_event *ev = &b->events[b->n_events++];
	memset(ev, 0, sizeof(*ev));
	return ev;
}

static void
batch_reserve_blocks(sim_batch *b, uint32_t n)
{
	uint32_t need = b->n_blocks + n;
	if (need <= b->cap_blocks) {
		return;
	}
	b->cap_blocks = grow_cap(b->cap_blocks, need);
	b->ext = kvi_reallocarray(b->ext, b->cap_blocks, sizeof(uint64_t));
	b->local = kvi_reallocarray(b->local, b->cap_blocks, sizeof(uint64_t));
	b->seq = kvi_reallocarray(b->seq, b->cap_blocks, sizeof(uint64_t));
	b->tokens = kvi_reallocarray(b->tokens, b->cap_blocks,
				     (size_t)b->block_size * sizeof(uint32_t));
	b->xkey_start = kvi_reallocarray(b->xkey_start, b->cap_blocks + 1,
					 sizeof(uint32_t));
	b->xkey_start[0] = 0;
}

void
sim_batch_add_removed(sim_batch *b, uint64_t hash)
{
	if (b->n_removed == b->cap_removed) {
		b->cap_removed = grow_cap(b->cap_removed, b->n_removed + 1);
		b->removed = kvi_reallocarray(b->removed, b->cap_removed,
					      sizeof(uint64_t));
	}
	b->removed[b->n_removed++] = hash;
}

/* ---- hashing -------------------------------------------------------- */

uint64_t
sim_external_hash(uint64_t salt, bool has_parent, uint64_t parent,
		  const uint32_t *tokens, uint32_t bs)
{
	/* The parent enters through the seed: equal tokens under different
	 * parents hash apart, as vLLM's chained block hashes do. */
	uint64_t seed = salt ^ (has_parent ? parent * 0x9e3779b97f4a7c15u
					   : 0x5eed0f0a11b10c5u);
	return XXH3_64bits_withSeed(tokens, (size_t)bs * sizeof(uint32_t),
				    seed);
}

uint64_t
sim_external_hash_extra(uint64_t salt, bool has_parent, uint64_t parent,
			const uint32_t *tokens, uint32_t bs, const void *extra,
			size_t extra_len)
{
	if (extra_len == 0) {
		return sim_external_hash(salt, has_parent, parent, tokens, bs);
	}
	uint64_t seed = salt ^ (has_parent ? parent * 0x9e3779b97f4a7c15u
					   : 0x5eed0f0a11b10c5u);
	XXH3_state_t st;
	memset(&st, 0, sizeof(st));
	XXH3_64bits_reset_withSeed(&st, seed);
	XXH3_64bits_update(&st, tokens, (size_t)bs * sizeof(uint32_t));
	XXH3_64bits_update(&st, extra, extra_len);
	return XXH3_64bits_digest(&st);
}

/* ---- slot table ----------------------------------------------------- */

static uint32_t
table_home(const sim_cache *c, uint64_t ext)
{
	return (uint32_t)((ext * 0x9e3779b97f4a7c15u) >> c->table_shift) &
	       c->table_mask;
}

static uint32_t
table_find(const sim_cache *c, uint64_t ext)
{
	for (uint32_t i = table_home(c, ext);; i = (i + 1) & c->table_mask) {
		uint32_t v = c->table[i];
		if (v == 0) {
			return NIL;
		}
		if (c->slots[v - 1].ext == ext) {
			return v - 1;
		}
	}
}

static void
table_insert(sim_cache *c, uint32_t slot)
{
	uint32_t i = table_home(c, c->slots[slot].ext);
	while (c->table[i] != 0) {
		i = (i + 1) & c->table_mask;
	}
	c->table[i] = slot + 1;
}

/* table_delete removes slot with backward-shift deletion, so lookups never
 * need tombstones. */
static void
table_delete(sim_cache *c, uint32_t slot)
{
	uint32_t i = table_home(c, c->slots[slot].ext);
	while (c->table[i] != slot + 1) {
		i = (i + 1) & c->table_mask;
	}
	c->table[i] = 0;
	for (uint32_t j = (i + 1) & c->table_mask; c->table[j] != 0;
	     j = (j + 1) & c->table_mask) {
		uint32_t k = table_home(c, c->slots[c->table[j] - 1].ext);
		/* The entry at j may move to the hole at i unless its home
		 * lies cyclically in (i, j]. */
		bool stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
		if (!stays) {
			c->table[i] = c->table[j];
			c->table[j] = 0;
			i = j;
		}
	}
}

/* ---- LRU lists ------------------------------------------------------ */

static void
lru_unlink(sim_cache *c, int t, uint32_t s)
{
	sim_slot *b = &c->slots[s];
	if (b->prev[t] != NIL) {
		c->slots[b->prev[t]].next[t] = b->next[t];
	} else {
		c->lru[t].head = b->next[t];
	}
	if (b->next[t] != NIL) {
		c->slots[b->next[t]].prev[t] = b->prev[t];
	} else {
		c->lru[t].tail = b->prev[t];
	}
	c->lru[t].count--;
}

static void
lru_push_head(sim_cache *c, int t, uint32_t s)
{
	sim_slot *b = &c->slots[s];
	b->prev[t] = NIL;
	b->next[t] = c->lru[t].head;
	if (c->lru[t].head != NIL) {
		c->slots[c->lru[t].head].prev[t] = s;
	} else {
		c->lru[t].tail = s;
	}
	c->lru[t].head = s;
	c->lru[t].count++;
}

/* ---- slots ---------------------------------------------------------- */

static uint32_t
slot_alloc(sim_cache *c)
{
	uint32_t s;
	if (c->free_head != NIL) {
		s = c->free_head;
		c->free_head = c->slots[s].next[GPU];
	} else {
		s = c->high++;
	}
	memset(&c->slots[s], 0, sizeof(c->slots[s]));
	return s;
}

static void
slot_release(sim_cache *c, uint32_t s)
{
	table_delete(c, s);
	c->slots[s].tiers = 0;
	c->slots[s].next[GPU] = c->free_head;
	c->free_head = s;
}

/* ---- cache ---------------------------------------------------------- */

sim_cache *
sim_cache_alloc(const sim_cache_config *cfg)
{
	sim_cache *c = kvi_calloc(1, sizeof(*c));
	c->cfg = *cfg;
	c->n_slots = cfg->gpu_blocks + cfg->cpu_blocks;
	/* calloc: pages are committed only as slots are first used. */
	c->slots = kvi_calloc(c->n_slots, sizeof(*c->slots));
	uint32_t size = 16;
	unsigned bits = 4;
	while (size < 2 * c->n_slots) {
		size *= 2;
		bits++;
	}
	c->table = kvi_calloc(size, sizeof(*c->table));
	c->table_mask = size - 1;
	c->table_shift = 64 - bits;
	c->lru[GPU].cap = cfg->gpu_blocks;
	c->lru[CPU].cap = cfg->cpu_blocks;
	sim_cache_clear(c, NULL);
	return c;
}

void
sim_cache_free(sim_cache *c)
{
	if (c == NULL) {
		return;
	}
	kvi_free(c->slots);
	kvi_free(c->table);
	kvi_free(c->req_slots);
	kvi_xbuf_fini(&c->xbuf);
	kvi_free(c);
}

void
sim_cache_clear(sim_cache *c, sim_batch *batch)
{
	if (c->high > 0) {
		memset(c->table, 0, (c->table_mask + 1) * sizeof(*c->table));
	}
	c->high = 0;
	c->free_head = NIL;
	for (int t = 0; t < 2; t++) {
		c->lru[t].head = c->lru[t].tail = NIL;
		c->lru[t].count = 0;
	}
	if (batch != NULL) {
		sim_batch_add_event(batch)->type = SIM_EV_CLEARED;
	}
}

uint32_t
sim_cache_count(const sim_cache *c, unsigned tier)
{
	return c->lru[tier == SIM_TIER_CPU ? CPU : GPU].count;
}

/* evict removes up to count unpinned blocks from tier t, least recently
 * used first, and appends one BlockRemoved for them. Returns the number
 * removed. */
static uint32_t
evict(sim_cache *c, int t, uint32_t count, sim_batch *batch)
{
	uint32_t first = batch->n_removed;
	uint32_t done = 0;
	uint32_t s = c->lru[t].tail;
	while (done < count && s != NIL) {
		uint32_t prev = c->slots[s].prev[t];
		if (c->slots[s].pin != c->stamp) {
			lru_unlink(c, t, s);
			c->slots[s].tiers &= (uint8_t)~tier_bit[t];
			sim_batch_add_removed(batch, c->slots[s].ext);
			if (c->slots[s].tiers == 0) {
				slot_release(c, s);
			}
			done++;
		}
		s = prev;
	}
	if (done > 0) {
		sim_event *ev = sim_batch_add_event(batch);
		ev->type = SIM_EV_REMOVED;
		ev->tier = tier_bit[t];
		ev->first = first;
		ev->n = done;
	}
	return done;
}

/* make_room evicts enough blocks of tier t for need more. */
static uint32_t
make_room(sim_cache *c, int t, uint32_t need, sim_batch *batch)
{
	uint32_t free = c->lru[t].cap - c->lru[t].count;
	return need > free ? evict(c, t, need - free, batch) : 0;
}

static void
add_stored(sim_batch *batch, unsigned tier, uint32_t base, uint32_t from,
	   uint32_t to, uint32_t req, bool offload)
{
	sim_event *ev = sim_batch_add_event(batch);
	ev->type = SIM_EV_STORED;
	ev->tier = tier;
	ev->req = req;
	ev->offload = offload;
	ev->first = base + from;
	ev->n = to - from;
	ev->has_parent = from > 0;
	ev->parent = from > 0 ? batch->ext[base + from - 1] : 0;
}

/* hash_blocks computes the external, local and sequence hashes of the
 * request's n blocks of bs tokens, already copied into the batch at base. */
static void
hash_blocks(sim_batch *batch, uint64_t salt, uint32_t base, uint32_t n)
{
	uint32_t bs = batch->block_size;
	uint64_t seed = kvi_local_seed(NULL, 0, NULL, 0);
	for (uint32_t i = 0; i < n; i++) {
		const uint32_t *tok = batch->tokens + (size_t)(base + i) * bs;
		uint32_t k = base + i;
		batch->ext[k] = sim_external_hash(
		    salt, i > 0, i > 0 ? batch->ext[k - 1] : 0, tok, bs);
		batch->local[k] = kvi_local_hash(tok, bs, seed);
		batch->seq[k] = kvi_seq_hash(
		    i > 0 ? batch->seq[k - 1] : KVI_SEQ_ROOT, batch->local[k]);
		batch->xkey_start[k + 1] = batch->n_xkeys;
	}
}

/* hash_keyed is hash_blocks for a request with keys, kept as
 * batch->reqs[req]: local hashes by hash.h's rule, external hashes over
 * each block's extra keys. */
static void
hash_keyed(sim_batch *batch, uint64_t salt, kvi_xbuf *x, uint32_t base,
	   uint32_t n, const kvi_prompt_keys *keys, uint32_t req)
{
	uint32_t bs = batch->block_size;
	const uint32_t *tokens = batch->tokens + (size_t)base * bs;
	kvi_prompt_hashes(tokens, (size_t)n * bs, bs, keys, x,
			  batch->local + base);
	size_t next = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = base + i;
		sim_batch_block_keys(batch, k, req, keys, i, &next);
		kvi_xbuf_reset(x);
		sim_keys_bytes(batch, k, x);
		batch->ext[k] = sim_external_hash_extra(
		    salt, i > 0, i > 0 ? batch->ext[k - 1] : 0,
		    tokens + (size_t)i * bs, bs, x->p, x->len);
		batch->seq[k] = kvi_seq_hash(
		    i > 0 ? batch->seq[k - 1] : KVI_SEQ_ROOT, batch->local[k]);
	}
}

uint32_t
sim_batch_add_request(sim_batch *batch, uint64_t salt, const uint32_t *tokens,
		      uint32_t n, const kvi_prompt_keys *keys, kvi_xbuf *x,
		      uint32_t *req)
{
	uint32_t bs = batch->block_size;
	uint32_t base = batch->n_blocks;
	batch_reserve_blocks(batch, n);
	memcpy(batch->tokens + (size_t)base * bs, tokens,
	       (size_t)n * bs * sizeof(uint32_t));
	batch->n_blocks += n;
	*req = SIM_NO_KEYS;
	if (sim_keys_empty(keys)) {
		hash_blocks(batch, salt, base, n);
	} else {
		*req = sim_batch_add_keys(batch, keys);
		hash_keyed(batch, salt, x, base, n, keys, *req);
	}
	return base;
}

static uint32_t
new_slot(sim_cache *c, const sim_batch *batch, uint32_t base, uint32_t i)
{
	uint32_t s = slot_alloc(c);
	sim_slot *b = &c->slots[s];
	b->ext = batch->ext[base + i];
	b->local = batch->local[base + i];
	b->seq = batch->seq[base + i];
	b->has_parent = i > 0;
	b->parent = i > 0 ? batch->ext[base + i - 1] : 0;
	b->depth = i;
	b->pin = c->stamp;
	table_insert(c, s);
	return s;
}

/* prefix_in returns how many leading request blocks are in tier t. */
static uint32_t
prefix_in(const sim_cache *c, int t, uint32_t n)
{
	uint32_t k = 0;
	while (k < n && c->req_slots[k] != NIL &&
	       (c->slots[c->req_slots[k]].tiers & tier_bit[t])) {
		k++;
	}
	return k;
}

/* touch makes the request's blocks in tier t the most recently used, the
 * head of the chain last so that tails are evicted first. */
static void
touch(sim_cache *c, int t, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;) {
		uint32_t s = c->req_slots[i];
		if (s != NIL && (c->slots[s].tiers & tier_bit[t])) {
			lru_unlink(c, t, s);
			lru_push_head(c, t, s);
		}
	}
}

static void
begin_request(sim_cache *c, uint32_t n)
{
	if (++c->stamp == 0) {
		for (uint32_t s = 0; s < c->high; s++) {
			c->slots[s].pin = 0;
		}
		c->stamp = 1;
	}
	if (n > c->cap_req) {
		c->cap_req = grow_cap(c->cap_req, n);
		c->req_slots = kvi_reallocarray(c->req_slots, c->cap_req,
						sizeof(uint32_t));
	}
}

void
sim_cache_run(sim_cache *c, sim_batch *batch, const uint32_t *tokens,
	      uint32_t n_blocks, sim_request_result *res)
{
	sim_cache_run_keyed(c, batch, tokens, n_blocks, NULL, res);
}

/* load_request copies the request's first n blocks into batch, hashes
 * them and finds each one's slot (pinned): c->req_slots[0..n). Returns the
 * request's first block in the batch; *req is its keys' index. */
static uint32_t
load_request(sim_cache *c, sim_batch *batch, const uint32_t *tokens, uint32_t n,
	     const kvi_prompt_keys *keys, uint32_t *req)
{
	uint32_t base = sim_batch_add_request(batch, c->cfg.salt, tokens, n,
					      keys, &c->xbuf, req);
	begin_request(c, n);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = table_find(c, batch->ext[base + i]);
		c->req_slots[i] = s;
		if (s != NIL) {
			c->slots[s].pin = c->stamp;
		}
	}
	return base;
}

/* write_through stores on CPU the request's blocks among the first n that
 * it lacks, within its capacity; returns min(n, CPU capacity), the blocks
 * to touch on CPU. */
static uint32_t
write_through(sim_cache *c, sim_batch *batch, uint32_t base, uint32_t n,
	      uint32_t req)
{
	uint32_t cpu_hit = prefix_in(c, CPU, n);
	uint32_t cpu_end = n < c->cfg.cpu_blocks ? n : c->cfg.cpu_blocks;
	if (cpu_hit < cpu_end) {
		make_room(c, CPU, cpu_end - cpu_hit, batch);
		for (uint32_t i = cpu_hit; i < cpu_end; i++) {
			c->slots[c->req_slots[i]].tiers |= SIM_TIER_CPU;
			lru_push_head(c, CPU, c->req_slots[i]);
		}
		add_stored(batch, SIM_TIER_CPU, base, cpu_hit, cpu_end, req,
			   c->cfg.offload);
	}
	return cpu_end;
}

void
sim_cache_run_keyed(sim_cache *c, sim_batch *batch, const uint32_t *tokens,
		    uint32_t n_blocks, const kvi_prompt_keys *keys,
		    sim_request_result *res)
{
	uint32_t n =
	    n_blocks < c->cfg.gpu_blocks ? n_blocks : c->cfg.gpu_blocks;
	uint32_t removed_before = batch->n_removed;
	memset(res, 0, sizeof(*res));
	res->first_block = batch->n_blocks;
	res->n_blocks = n;
	if (n == 0) {
		return;
	}
	uint32_t req;
	uint32_t base = load_request(c, batch, tokens, n, keys, &req);
	uint32_t gpu_hit = prefix_in(c, GPU, n);
	uint32_t cpu_hit = c->cfg.cpu_blocks > 0 ? prefix_in(c, CPU, n) : 0;

	/* GPU: everything past the hit is loaded from CPU or computed. */
	if (gpu_hit < n) {
		make_room(c, GPU, n - gpu_hit, batch);
		for (uint32_t i = gpu_hit; i < n; i++) {
			if (c->req_slots[i] == NIL) {
				c->req_slots[i] = new_slot(c, batch, base, i);
			}
			c->slots[c->req_slots[i]].tiers |= SIM_TIER_GPU;
			lru_push_head(c, GPU, c->req_slots[i]);
		}
		add_stored(batch, SIM_TIER_GPU, base, gpu_hit, n, req, false);
	}

	/* CPU write-through of the blocks it lacks, within its capacity. */
	uint32_t cpu_end = cpu_hit;
	if (c->cfg.cpu_blocks > 0) {
		cpu_end = write_through(c, batch, base, n, req);
	}

	touch(c, GPU, n);
	touch(c, CPU, cpu_end);
	res->gpu_hit = gpu_hit;
	res->cpu_loaded = cpu_hit > gpu_hit ? cpu_hit - gpu_hit : 0;
	res->stored = n - gpu_hit;
	res->removed = batch->n_removed - removed_before;
}

uint32_t
sim_cache_hit(sim_cache *c, sim_batch *batch, const uint32_t *tokens,
	      uint32_t n_blocks, const kvi_prompt_keys *keys,
	      uint32_t max_blocks)
{
	uint32_t n =
	    n_blocks < c->cfg.gpu_blocks ? n_blocks : c->cfg.gpu_blocks;
	if (max_blocks < n) {
		n = max_blocks;
	}
	if (n == 0) {
		return 0;
	}
	uint32_t req;
	load_request(c, batch, tokens, n, keys, &req);
	return prefix_in(c, GPU, n);
}

void
sim_cache_run_span(sim_cache *c, sim_batch *batch, const uint32_t *tokens,
		   uint32_t n_blocks, const kvi_prompt_keys *keys,
		   uint32_t from, uint32_t to, sim_request_result *res)
{
	uint32_t n =
	    n_blocks < c->cfg.gpu_blocks ? n_blocks : c->cfg.gpu_blocks;
	uint32_t removed_before = batch->n_removed;
	if (to > n) {
		to = n;
	}
	memset(res, 0, sizeof(*res));
	res->first_block = batch->n_blocks;
	res->n_blocks = to;
	if (from >= to) {
		return;
	}
	uint32_t req;
	uint32_t base = load_request(c, batch, tokens, to, keys, &req);
	/* The blocks before the span are the request's own; one lost
	 * meanwhile (a clear) is computed again here, so that every store
	 * names a parent the rank holds. */
	uint32_t held = prefix_in(c, GPU, from);
	if (held < from) {
		from = held;
	}
	uint32_t need = 0;
	for (uint32_t i = from; i < to; i++) {
		uint32_t s = c->req_slots[i];
		if (s == NIL || !(c->slots[s].tiers & SIM_TIER_GPU)) {
			need++;
			if (s != NIL && (c->slots[s].tiers & SIM_TIER_CPU)) {
				res->cpu_loaded++;
			}
		}
	}
	/* Allocation evicts for the span's new blocks only: the request's
	 * other blocks are pinned. */
	make_room(c, GPU, need, batch);
	for (uint32_t i = from; i < to; i++) {
		if (c->req_slots[i] == NIL) {
			c->req_slots[i] = new_slot(c, batch, base, i);
		}
		if (!(c->slots[c->req_slots[i]].tiers & SIM_TIER_GPU)) {
			c->slots[c->req_slots[i]].tiers |= SIM_TIER_GPU;
			lru_push_head(c, GPU, c->req_slots[i]);
		}
	}
	/* Every block the span computed is stored, one already cached (the
	 * recomputed last block of a fully cached prompt) included. */
	add_stored(batch, SIM_TIER_GPU, base, from, to, req, false);
	uint32_t cpu_end = 0;
	if (c->cfg.cpu_blocks > 0) {
		cpu_end = write_through(c, batch, base, to, req);
	}
	touch(c, GPU, to);
	touch(c, CPU, cpu_end);
	res->gpu_hit = from;
	res->stored = need;
	res->removed = batch->n_removed - removed_before;
}

static void
slot_info(const sim_slot *b, sim_block_info *out)
{
	out->hash = b->ext;
	out->parent = b->parent;
	out->has_parent = b->has_parent;
	out->local_hash = b->local;
	out->seq_hash = b->seq;
	out->depth = b->depth;
	out->tiers = b->tiers;
	out->groups = (b->tiers & SIM_TIER_GPU) ? 1u : 0u;
}

bool
sim_cache_lookup(const sim_cache *c, uint64_t hash, sim_block_info *out)
{
	uint32_t s = table_find(c, hash);
	if (s == NIL) {
		return false;
	}
	slot_info(&c->slots[s], out);
	return true;
}

sim_block_info *
sim_cache_snapshot(const sim_cache *c, size_t *n)
{
	/* Counting sort by depth: parents are shallower than children. */
	uint32_t depths = c->cfg.gpu_blocks + 1;
	size_t *start = kvi_calloc(depths + 1, sizeof(size_t));
	size_t total = 0;
	for (uint32_t s = 0; s < c->high; s++) {
		if (c->slots[s].tiers != 0) {
			start[c->slots[s].depth + 1]++;
			total++;
		}
	}
	*n = total;
	if (total == 0) {
		kvi_free(start);
		return NULL;
	}
	for (uint32_t d = 1; d <= depths; d++) {
		start[d] += start[d - 1];
	}
	sim_block_info *out = kvi_malloc(total * sizeof(*out));
	for (uint32_t s = 0; s < c->high; s++) {
		if (c->slots[s].tiers != 0) {
			slot_info(&c->slots[s],
				  &out[start[c->slots[s].depth]++]);
		}
	}
	kvi_free(start);
	return out;
}
