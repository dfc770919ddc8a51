#include "sim_hybrid.h"

/*
 * A probe asks whether a spec group holds a block: the group `first`
 * (spec `lead`) and every later group below `end` whose spec equals it,
 * as vLLM's BlockPool.get_cached_block(hash, kv_cache_group_ids) answers
 * only when every group of the spec group has the block. A probe of one
 * group has end = first + 1 and needs no array.
 */
typedef struct probe {
	const sim_group_spec *groups;
	const sim_group_spec *lead;
	size_t first;
	size_t end;
	sim_held_fn held;
	void *arg;
} probe;

static uint64_t
gcd_u64(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static bool
is_full_kind(sim_group_kind kind)
{
	return kind == SIM_GROUP_FULL || kind == SIM_GROUP_MLA;
}

static bool
is_sliding_kind(sim_group_kind kind)
{
	return kind == SIM_GROUP_SLIDING || kind == SIM_GROUP_SLIDING_MLA;
}

/* spec_equal says whether two groups have equal specs: the same kind (a
 * dataclass of another class is never equal) and the same fields of it. */
static bool
spec_equal(const sim_group_spec *a, const sim_group_spec *b)
{
	if (a->kind != b->kind || a->block_size != b->block_size) {
		return false;
	}
	if (is_sliding_kind(a->kind)) {
		return a->sliding_window == b->sliding_window;
	}
	if (a->kind == SIM_GROUP_CHUNKED_LOCAL) {
		return a->chunk_size == b->chunk_size;
	}
	if (a->kind == SIM_GROUP_MAMBA) {
		return a->mamba_mode == b->mamba_mode;
	}
	return true;
}

static const char *
spec_check(const sim_group_spec *s)
{
	if (s->block_size == 0) {
		return "a group's block size is 0";
	}
	switch (s->kind) {
	case SIM_GROUP_FULL:
	case SIM_GROUP_MLA:
		return NULL;
	case SIM_GROUP_SLIDING:
	case SIM_GROUP_SLIDING_MLA:
		return s->sliding_window == 0 ? "a sliding window is 0" : NULL;
	case SIM_GROUP_CHUNKED_LOCAL:
		return s->chunk_size == 0 ? "an attention chunk size is 0"
					  : NULL;
	case SIM_GROUP_MAMBA:
		return (unsigned)s->mamba_mode > SIM_MAMBA_ALIGN
			   ? "an unknown Mamba cache mode"
			   : NULL;
	}
	return "an unknown group kind";
}

static bool
probe_held(const probe *p, uint64_t block)
{
	if (!p->held(p->arg, p->first, block)) {
		return false;
	}
	for (size_t g = p->first + 1; g < p->end; g++) {
		if (spec_equal(&p->groups[g], p->lead) &&
		    !p->held(p->arg, g, block)) {
			return false;
		}
	}
	return true;
}

/* ends_aligned says whether a run ending after block i (exclusive end
 * i + 1) ends on the alignment, as the managers test
 * `(i + 1) * block_size % alignment_tokens`. */
static bool
ends_aligned(uint64_t i, uint64_t bs, uint64_t align)
{
	return bs == align || (i + 1) * bs % align == 0;
}

/* FullAttentionManager.find_longest_cache_hit: the leading run of held
 * blocks, popped until its length is a multiple of the alignment. */
static uint64_t
full_hit(const probe *p, uint64_t bs, uint64_t max, uint64_t align)
{
	uint64_t max_blocks = max / bs;
	uint64_t n = 0;
	while (n < max_blocks && probe_held(p, n)) {
		n++;
	}
	while (bs != align && n * bs % align != 0) {
		n--;
	}
	return n * bs;
}

/* SlidingWindowManager.find_longest_cache_hit: scan right to left for a
 * run of `need` held blocks whose right end is aligned (blocks past the
 * run are dropped; blocks before it are never looked at). Without one,
 * the run counted down to block 0 is the hit, popped to the alignment. */
static uint64_t
sliding_hit(const probe *p, const sim_group_spec *s, uint64_t max,
	    uint64_t align)
{
	uint64_t bs = s->block_size;
	/* -1: the token being computed is in its own window */
	uint64_t need = ((uint64_t)s->sliding_window - 1 + bs - 1) / bs;
	uint64_t run = 0;
	for (uint64_t i = max / bs; i-- > 0;) {
		if (!probe_held(p, i)) {
			run = 0;
			continue;
		}
		if (run == 0 && !ends_aligned(i, bs, align)) {
			continue;
		}
		if (++run >= need) {
			return (i + run) * bs;
		}
	}
	while (bs != align && run * bs % align != 0) {
		run--;
	}
	return run * bs;
}

/* ChunkedLocalAttentionManager.find_longest_cache_hit: the blocks before
 * the start of max's attention chunk are out of the window and count as
 * computed; from there the leading run of held blocks. */
static uint64_t
chunked_hit(const probe *p, const sim_group_spec *s, uint64_t max)
{
	uint64_t bs = s->block_size;
	uint64_t max_blocks = max / bs;
	uint64_t n = max / s->chunk_size * s->chunk_size / bs;
	while (n < max_blocks && probe_held(p, n)) {
		n++;
	}
	return n * bs;
}

/* MambaManager.find_longest_cache_hit: the rightmost held block whose end
 * is aligned; the state there is all a hit needs. */
static uint64_t
mamba_hit(const probe *p, uint64_t bs, uint64_t max, uint64_t align)
{
	for (uint64_t i = max / bs; i-- > 0;) {
		if (probe_held(p, i) && ends_aligned(i, bs, align)) {
			return (i + 1) * bs;
		}
	}
	return 0;
}

/* kind_hit dispatches to the spec group's manager. The spec is valid,
 * align is not 0, and a chunked local block size equals align. */
static uint64_t
kind_hit(const probe *p, uint64_t max, uint64_t align)
{
	const sim_group_spec *s = p->lead;
	switch (s->kind) {
	case SIM_GROUP_FULL:
	case SIM_GROUP_MLA:
		return full_hit(p, s->block_size, max, align);
	case SIM_GROUP_SLIDING:
	case SIM_GROUP_SLIDING_MLA:
		return sliding_hit(p, s, max, align);
	case SIM_GROUP_CHUNKED_LOCAL:
		return chunked_hit(p, s, max);
	case SIM_GROUP_MAMBA:
		return mamba_hit(p, s->block_size, max, align);
	}
	return 0;
}

/* lcm_of returns the least common multiple of the block sizes, 0 if it
 * passes UINT32_MAX (far past any model's; the bound keeps the products
 * below in range). */
static uint64_t
lcm_of(const sim_group_spec *groups, size_t n_groups)
{
	uint64_t l = 1;
	for (size_t g = 0; g < n_groups; g++) {
		uint64_t bs = groups[g].block_size;
		l = l / gcd_u64(l, bs) * bs;
		if (l > UINT32_MAX) {
			return 0;
		}
	}
	return l;
}

const char *
sim_hybrid_check(const sim_group_spec *groups, size_t n_groups)
{
	if (n_groups == 0) {
		return "no KV cache group";
	}
	for (size_t g = 0; g < n_groups; g++) {
		const char *why = spec_check(&groups[g]);
		if (why != NULL) {
			return why;
		}
	}
	uint64_t align = lcm_of(groups, n_groups);
	if (align == 0) {
		return "the block sizes' common multiple is too large";
	}
	for (size_t g = 0; g < n_groups; g++) {
		if (groups[g].kind == SIM_GROUP_CHUNKED_LOCAL &&
		    groups[g].block_size != align) {
			return "chunked local attention with groups of other "
			       "block sizes";
		}
	}
	return NULL;
}

uint64_t
sim_hybrid_alignment(const sim_group_spec *groups, size_t n_groups)
{
	if (sim_hybrid_check(groups, n_groups) != NULL) {
		return 0;
	}
	return lcm_of(groups, n_groups);
}

uint64_t
sim_hybrid_group_hit(const sim_group_spec *spec, size_t group,
		     uint64_t max_tokens, uint64_t align, sim_held_fn held,
		     void *arg)
{
	if (spec_check(spec) != NULL || align == 0 ||
	    (spec->kind == SIM_GROUP_MAMBA &&
	     spec->mamba_mode == SIM_MAMBA_NONE) ||
	    (spec->kind == SIM_GROUP_CHUNKED_LOCAL &&
	     spec->block_size != align)) {
		return 0;
	}
	probe p = {NULL, spec, group, group + 1, held, arg};
	return kind_hit(&p, max_tokens, align);
}

/* caching_off says whether prefix caching is disabled: vLLM sets
 * mamba_cache_mode "none" exactly then, and a model without prefix
 * caching gets KVCacheCoordinatorNoPrefixCache, which never hits. */
static bool
caching_off(const sim_group_spec *groups, size_t n_groups)
{
	for (size_t g = 0; g < n_groups; g++) {
		if (groups[g].kind == SIM_GROUP_MAMBA &&
		    groups[g].mamba_mode == SIM_MAMBA_NONE) {
			return true;
		}
	}
	return false;
}

/* is_lead says whether group g is the first of its spec group
 * (verify_and_split_kv_cache_groups merges groups with equal specs). */
static bool
is_lead(const sim_group_spec *groups, size_t g)
{
	for (size_t e = 0; e < g; e++) {
		if (spec_equal(&groups[e], &groups[g])) {
			return false;
		}
	}
	return true;
}

/* The spec groups of a hybrid lookup and what they share. */
typedef struct hybrid {
	const sim_group_spec *groups;
	size_t n_groups;
	uint64_t align;
	sim_held_fn held;
	void *arg;
} hybrid;

/* round_step asks the spec group led by g for the length it allows from
 * curr. Full attention looks its blocks up in the first round only: it is
 * downward-closed, so later rounds keep a prefix of what it found. */
static uint64_t
round_step(const hybrid *h, size_t g, bool first_round, uint64_t curr)
{
	const sim_group_spec *s = &h->groups[g];
	if (is_full_kind(s->kind) && !first_round) {
		return curr / s->block_size * s->block_size;
	}
	probe p = {h->groups, s, g, h->n_groups, h->held, h->arg};
	return kind_hit(&p, curr, h->align);
}

/* round_pass asks, in order, the spec groups that are (or are not) full
 * attention. */
static uint64_t
round_pass(const hybrid *h, bool full, bool first_round, uint64_t curr)
{
	for (size_t g = 0; g < h->n_groups; g++) {
		if (is_full_kind(h->groups[g].kind) == full &&
		    is_lead(h->groups, g)) {
			curr = round_step(h, g, first_round, curr);
		}
	}
	return curr;
}

/* hybrid_round runs one round of HybridKVCacheCoordinator's loop: the
 * spec groups in turn, full attention ones first (a stable sort), each
 * offered what the previous one allowed. */
static uint64_t
hybrid_round(const hybrid *h, bool first_round, uint64_t curr)
{
	curr = round_pass(h, true, first_round, curr);
	return round_pass(h, false, first_round, curr);
}

/* simple_hybrid says whether HybridKVCacheCoordinator stops after one
 * round: two spec groups, one of them full attention. vLLM stops there so
 * that EAGLE drops do not compound; without EAGLE a second round would
 * keep the hit, since each kind accepts again the length it returned. */
static bool
simple_hybrid(const sim_group_spec *groups, size_t n_groups)
{
	size_t leads = 0;
	bool full = false;
	for (size_t g = 0; g < n_groups; g++) {
		if (is_lead(groups, g)) {
			leads++;
			full = full || is_full_kind(groups[g].kind);
		}
	}
	return leads == 2 && full;
}

uint64_t
sim_hybrid_hit(const sim_group_spec *groups, size_t n_groups, uint64_t n_tokens,
	       sim_held_fn held, void *arg)
{
	if (sim_hybrid_check(groups, n_groups) != NULL ||
	    caching_off(groups, n_groups) || n_tokens < 2) {
		return 0;
	}
	uint64_t max = n_tokens - 1;
	if (n_groups == 1) {
		/* UnitaryKVCacheCoordinator: aligned to the group's blocks */
		return sim_hybrid_group_hit(&groups[0], 0, max,
					    groups[0].block_size, held, arg);
	}
	hybrid h = {groups, n_groups, lcm_of(groups, n_groups), held, arg};
	bool once = simple_hybrid(groups, n_groups);
	uint64_t hit = max;
	/* each round that does not end the loop lowers hit, so it ends */
	for (bool first = true;; first = false) {
		uint64_t curr = hybrid_round(&h, first, hit);
		if (curr >= hit) {
			break;
		}
		hit = curr;
		if (once) {
			break;
		}
	}
	return hit;
}
