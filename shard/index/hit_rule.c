#include "hit_rule.h"

#include <string.h>

/* vLLM's KVCacheSpecKind values (kv_cache_interface.py), with the manager
 * each spec class is registered to (register_all_kvcache_specs): MLA and
 * sink full attention use FullAttentionManager, sliding window MLA the
 * SlidingWindowManager. */
static const struct {
	const char *name;
	kvx_kind kind;
} kind_names[] = {
    {"full_attention", KVX_KIND_FULL},
    {"mla_attention", KVX_KIND_FULL},
    {"sink_full_attention", KVX_KIND_FULL},
    {"sliding_window", KVX_KIND_SLIDING},
    {"sliding_window_mla", KVX_KIND_SLIDING},
    {"chunked_local_attention", KVX_KIND_CHUNKED},
    {"mamba", KVX_KIND_MAMBA},
    {"encoder_only_attention", KVX_KIND_NONE},
    {"cross_attention", KVX_KIND_NONE},
    {"unknown", KVX_KIND_NONE},
};

bool
kvx_kind_parse(const char *s, size_t len, kvx_kind *out)
{
	if (s == NULL) {
		return false;
	}
	for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]);
	     i++) {
		const char *name = kind_names[i].name;
		if (strlen(name) == len && memcmp(name, s, len) == 0) {
			*out = kind_names[i].kind;
			return true;
		}
	}
	return false;
}

const char *
kvx_kind_name(kvx_kind k)
{
	switch (k) {
	case KVX_KIND_FULL:
		return "full_attention";
	case KVX_KIND_SLIDING:
		return "sliding_window";
	case KVX_KIND_CHUNKED:
		return "chunked_local_attention";
	case KVX_KIND_MAMBA:
		return "mamba";
	default:
		return "unknown";
	}
}

/* One call's inputs; lengths are in hash blocks. */
typedef struct hit_ctx {
	const kvx_hit_group *g;
	size_t ng;
	uint64_t bs;    /* tokens per hash block */
	uint32_t align; /* the scheduler block, in hash blocks */
	uint8_t mask;
	uint64_t solo; /* bit i: no other group has group i's spec */
} hit_ctx;

/* judged_kind: the rule a group is judged by. A window of 0 (unknown) is
 * judged as full attention, a kind out of range as NONE. */
static kvx_kind
judged_kind(const kvx_hit_group *g)
{
	if ((unsigned)g->kind > KVX_KIND_NONE) {
		return KVX_KIND_NONE;
	}
	if ((g->kind == KVX_KIND_SLIDING || g->kind == KVX_KIND_CHUNKED) &&
	    g->window == 0) {
		return KVX_KIND_FULL;
	}
	return g->kind;
}

static uint32_t
ratio_of(const kvx_hit_group *g)
{
	return g->ratio ? g->ratio : 1;
}

/* same_spec: would vLLM put a and b in one spec group (equal specs)? The
 * kind, the block and the window are all the events tell apart. */
static bool
same_spec(const kvx_hit_group *a, const kvx_hit_group *b)
{
	kvx_kind k = judged_kind(a);
	if (k != judged_kind(b) || ratio_of(a) != ratio_of(b)) {
		return false;
	}
	if (k == KVX_KIND_SLIDING || k == KVX_KIND_CHUNKED) {
		return a->window == b->window;
	}
	return true;
}

/* gblock_held: does every group of lead's spec hold group block j, that is
 * all of its hash blocks (BlockPool.get_cached_block over several group
 * ids)? lead is the first group of its spec, so the others follow it. */
static inline bool
gblock_held(const hit_ctx *c, size_t lead, uint32_t j)
{
	const kvx_hit_group *l = &c->g[lead];
	uint32_t r = ratio_of(l);
	if (r == 1 && lead < 64 && (c->solo >> lead & 1) != 0) {
		/* the common case, a group of its own of the model's blocks */
		return l->held != NULL && (l->held[j] & c->mask) != 0;
	}
	for (size_t k = lead; k < c->ng; k++) {
		const kvx_hit_group *g = &c->g[k];
		if (k != lead && !same_spec(g, l)) {
			continue;
		}
		if (g->held == NULL) {
			return false;
		}
		const uint8_t *h = g->held + (size_t)j * r;
		for (uint32_t t = 0; t < r; t++) {
			if ((h[t] & c->mask) == 0) {
				return false;
			}
		}
	}
	return true;
}

/* full_hit follows FullAttentionManager.find_longest_cache_hit: the run of
 * held blocks from the start (a miss ends it: hashes are chained), rounded
 * down to the alignment. */
static uint32_t
full_hit(const hit_ctx *c, size_t lead, uint32_t max)
{
	uint32_t r = ratio_of(&c->g[lead]);
	uint32_t nb = max / r, k = 0;
	while (k < nb && gblock_held(c, lead, k)) {
		k++;
	}
	uint32_t hit = k * r;
	return hit - hit % c->align;
}

/* sliding_hit follows SlidingWindowManager.find_longest_cache_hit: from the
 * right, the first cdiv(window - 1, block) contiguous held blocks; a run
 * may only start (at its right end) where its end is aligned. With no such
 * run, the run that reaches the start counts, popped to alignment. */
static uint32_t
sliding_hit(const hit_ctx *c, size_t lead, uint32_t max)
{
	const kvx_hit_group *l = &c->g[lead];
	uint32_t r = ratio_of(l), a = c->align;
	uint64_t btok = c->bs * r;
	/* window >= 1 here: 0 is judged as full attention. */
	uint64_t need = ((uint64_t)l->window - 1 + btok - 1) / btok;
	uint32_t run = 0;
	for (uint32_t i = max / r; i-- > 0;) {
		if (!gblock_held(c, lead, i)) {
			run = 0;
			continue;
		}
		if (run == 0 && r != a && (uint64_t)(i + 1) * r % a != 0) {
			continue;
		}
		if (++run >= need) {
			return (i + run) * r;
		}
	}
	/* vLLM pops to the alignment here too; the skip above already left
	 * the run's end aligned. */
	while (r != a && (uint64_t)run * r % a != 0) {
		run--;
	}
	return run * r;
}

/* chunked_raw follows ChunkedLocalAttentionManager.find_longest_cache_hit:
 * the blocks before the chunk max falls in are out of the window and count
 * as hit (null blocks, held or not); then the held blocks from the first
 * block of that chunk. */
static uint32_t
chunked_raw(const hit_ctx *c, size_t lead, uint32_t max)
{
	const kvx_hit_group *l = &c->g[lead];
	uint32_t r = ratio_of(l);
	uint64_t start = (uint64_t)max * c->bs / l->window * l->window;
	uint32_t k = (uint32_t)(start / (c->bs * r)), nb = max / r;
	while (k < nb && gblock_held(c, lead, k)) {
		k++;
	}
	return k * r;
}

/* chunked_hit: vLLM asserts that a chunked group's block is the alignment;
 * when the caller's groups say otherwise, lower the hit to the alignment
 * until the chunked rule takes it again. */
static uint32_t
chunked_hit(const hit_ctx *c, size_t lead, uint32_t max)
{
	uint32_t hit = chunked_raw(c, lead, max);
	if (ratio_of(&c->g[lead]) == c->align) {
		return hit;
	}
	for (;;) {
		hit -= hit % c->align;
		if (hit == max || hit == 0 ||
		    chunked_raw(c, lead, hit) == hit) {
			return hit;
		}
		max = hit;
		hit = chunked_raw(c, lead, max);
	}
}

/* mamba_hit follows MambaManager.find_longest_cache_hit (block-aligned
 * lookups): the last held block whose end is aligned. */
static uint32_t
mamba_hit(const hit_ctx *c, size_t lead, uint32_t max)
{
	uint32_t r = ratio_of(&c->g[lead]), a = c->align;
	for (uint32_t i = max / r; i-- > 0;) {
		if (r != a && (uint64_t)(i + 1) * r % a != 0) {
			continue;
		}
		if (gblock_held(c, lead, i)) {
			return (i + 1) * r;
		}
	}
	return 0;
}

/* rule: the hit lead's spec allows within max hash blocks. */
static uint32_t
rule(const hit_ctx *c, size_t lead, uint32_t max)
{
	switch (judged_kind(&c->g[lead])) {
	case KVX_KIND_FULL:
		return full_hit(c, lead, max);
	case KVX_KIND_SLIDING:
		return sliding_hit(c, lead, max);
	case KVX_KIND_CHUNKED:
		return chunked_hit(c, lead, max);
	case KVX_KIND_MAMBA:
		return mamba_hit(c, lead, max);
	default:
		return 0;
	}
}

/* is_lead: is group i looked up, as the first group of its spec? */
static bool
is_lead(const hit_ctx *c, size_t i)
{
	if (judged_kind(&c->g[i]) == KVX_KIND_NONE) {
		return false;
	}
	for (size_t k = 0; k < i; k++) {
		if (same_spec(&c->g[k], &c->g[i])) {
			return false;
		}
	}
	return true;
}

/* hybrid_hit follows HybridKVCacheCoordinator.find_longest_cache_hit. Each
 * round runs the full attention specs, then the others, in the order they
 * first appear, each lowering the candidate; the rounds stop when one
 * leaves it as it was, or after the first for a simple hybrid (two specs,
 * one of them full attention). Full attention is downward-closed: after
 * the first round the candidate is within its hit, so it is not looked up
 * again. */
static uint32_t
hybrid_hit(const hit_ctx *c, uint32_t max)
{
	size_t n_specs = 0;
	bool has_full = false;
	for (size_t i = 0; i < c->ng; i++) {
		if (is_lead(c, i)) {
			n_specs++;
			has_full |= judged_kind(&c->g[i]) == KVX_KIND_FULL;
		}
	}
	if (n_specs == 0) {
		return 0;
	}
	bool simple = n_specs == 2 && has_full;
	uint32_t hit = max;
	for (int round = 0;; round++) {
		uint32_t curr = hit;
		for (int full_pass = round == 0; full_pass >= 0; full_pass--) {
			for (size_t i = 0; i < c->ng; i++) {
				bool full =
				    judged_kind(&c->g[i]) == KVX_KIND_FULL;
				if (full == (full_pass == 1) && is_lead(c, i)) {
					curr = rule(c, i, curr);
				}
			}
		}
		if (curr >= hit) {
			return hit;
		}
		hit = curr;
		if (simple) {
			return hit;
		}
	}
}

static uint64_t
gcd64(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

uint32_t
kvx_hit(const kvx_hit_group *groups, size_t n_groups, uint32_t block_size,
	uint32_t n, uint8_t mask)
{
	if (groups == NULL || n_groups == 0 || block_size == 0 || n == 0) {
		return 0;
	}
	hit_ctx c = {
	    .g = groups, .ng = n_groups, .bs = block_size, .mask = mask};
	for (size_t i = 0; i < n_groups && i < 64; i++) {
		bool alone = true;
		for (size_t k = 0; k < n_groups && alone; k++) {
			alone = k == i || !same_spec(&groups[k], &groups[i]);
		}
		c.solo |= (uint64_t)alone << i;
	}
	if (n_groups == 1) {
		/* UnitaryKVCacheCoordinator: the manager alone, aligned to its
		 * own block. */
		if (judged_kind(groups) == KVX_KIND_NONE) {
			return 0;
		}
		c.align = ratio_of(groups);
		return rule(&c, 0, n);
	}
	/* The scheduler block: the lcm of every group's block. Past n no hit
	 * is aligned but 0. */
	uint64_t a = 1;
	for (size_t i = 0; i < n_groups; i++) {
		uint64_t r = ratio_of(&groups[i]);
		a = a / gcd64(a, r) * r;
		if (a > n) {
			return 0;
		}
	}
	c.align = (uint32_t)a;
	return hybrid_hit(&c, n);
}
