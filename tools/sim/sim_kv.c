#include "sim_kv.h"

#include <string.h>

#include "alloc.h"

struct sim_kv {
	sim_cache_config cache_cfg;
	sim_cache *cache;   /* the default, or NULL */
	sim_groups *groups; /* or the groups */
	kvi_xbuf xbuf;      /* scratch of the default's queries */
};

sim_kv *
sim_kv_alloc(const sim_cache_config *cache, const sim_groups_config *groups)
{
	sim_kv *kv = kvi_calloc(1, sizeof(*kv));
	kv->cache_cfg = *cache;
	if (groups != NULL) {
		kv->groups = sim_groups_alloc(groups);
	} else {
		kv->cache = sim_cache_alloc(cache);
	}
	return kv;
}

void
sim_kv_free(sim_kv *kv)
{
	if (kv == NULL) {
		return;
	}
	sim_cache_free(kv->cache);
	sim_groups_free(kv->groups);
	kvi_xbuf_fini(&kv->xbuf);
	kvi_free(kv);
}

const sim_groups_config *
sim_kv_groups(const sim_kv *kv)
{
	return kv->groups != NULL ? sim_groups_cfg(kv->groups) : NULL;
}

void
sim_kv_run(sim_kv *kv, sim_batch *batch, const uint32_t *tokens,
	   uint32_t n_blocks, uint64_t n_tokens, const kvi_prompt_keys *keys,
	   sim_request_result *res)
{
	if (kv->groups != NULL) {
		sim_groups_run(kv->groups, batch, tokens, n_tokens, keys, res);
		return;
	}
	sim_cache_run_keyed(kv->cache, batch, tokens, n_blocks, keys, res);
	/* what the engine would take: the same prefix, capped below the
	 * prompt's last token */
	uint32_t bs = kv->cache_cfg.block_size;
	uint64_t cap = n_tokens > 0 ? (n_tokens - 1) / bs : 0;
	res->hit_tokens = (res->gpu_hit < cap ? res->gpu_hit : cap) * bs;
}

sim_job *
sim_kv_start(sim_kv *kv, sim_sched *s)
{
	return kv->groups != NULL ? sim_sched_start_groups(s, kv->groups)
				  : sim_sched_start(s, kv->cache);
}

sim_job *
sim_kv_step(sim_kv *kv, sim_sched *s, sim_batch *batch)
{
	return kv->groups != NULL ? sim_sched_step_groups(s, kv->groups, batch)
				  : sim_sched_step(s, kv->cache, batch);
}

void
sim_kv_clear(sim_kv *kv, sim_batch *batch)
{
	if (kv->groups != NULL) {
		sim_groups_clear(kv->groups, batch);
	} else {
		sim_cache_clear(kv->cache, batch);
	}
}

void
sim_kv_counts_get(const sim_kv *kv, sim_kv_counts *out)
{
	memset(out, 0, sizeof(*out));
	if (kv->groups == NULL) {
		out->gpu = sim_cache_count(kv->cache, SIM_TIER_GPU);
		out->cpu = sim_cache_count(kv->cache, SIM_TIER_CPU);
		return;
	}
	out->n_groups = sim_groups_cfg(kv->groups)->n_groups;
	for (size_t i = 0; i < out->n_groups; i++) {
		out->group[i] = sim_groups_count(kv->groups, i);
		out->gpu += out->group[i];
	}
}

sim_block_info *
sim_kv_snapshot(const sim_kv *kv, size_t *n)
{
	return kv->groups != NULL ? sim_groups_snapshot(kv->groups, n)
				  : sim_cache_snapshot(kv->cache, n);
}

sim_block_info *
sim_kv_dump(const sim_kv *kv, size_t *n)
{
	return kv->groups != NULL ? sim_groups_dump(kv->groups, n)
				  : sim_cache_snapshot(kv->cache, n);
}

/* The default's prompt blocks, asked about by sim_hybrid_hit. */
typedef struct default_arg {
	const sim_cache *cache;
	const sim_batch *batch;
	uint32_t base;
	uint32_t nb;
} default_arg;

static bool
default_held(void *arg, size_t group, uint64_t block)
{
	(void)group;
	const default_arg *a = arg;
	sim_block_info info;
	return block < a->nb &&
	       sim_cache_lookup(a->cache, a->batch->ext[a->base + block],
				&info) &&
	       (info.tiers & SIM_TIER_GPU);
}

void
sim_kv_query(sim_kv *kv, sim_batch *batch, const uint32_t *tokens,
	     uint64_t n_tokens, const kvi_prompt_keys *keys, sim_kv_hit *out)
{
	memset(out, 0, sizeof(*out));
	if (kv->groups != NULL) {
		const sim_groups_config *c = sim_groups_cfg(kv->groups);
		uint64_t hits[SIM_MAX_GROUPS];
		sim_groups_query(kv->groups, batch, tokens, n_tokens, keys,
				 &out->hit_tokens, hits);
		out->n_groups = c->n_groups;
		for (size_t i = 0; i < c->n_groups; i++) {
			out->groups[i].spec = c->groups[i].spec;
			out->groups[i].hit_tokens = hits[i];
		}
		return;
	}
	/* one full-attention group, on the prompt a request would run:
	 * truncated to the GPU size */
	uint32_t bs = kv->cache_cfg.block_size;
	uint64_t nb = n_tokens / bs;
	if (nb > kv->cache_cfg.gpu_blocks) {
		nb = kv->cache_cfg.gpu_blocks;
	}
	uint32_t req;
	default_arg a = {kv->cache, batch, 0, (uint32_t)nb};
	a.base = sim_batch_add_request(batch, kv->cache_cfg.salt, tokens,
				       (uint32_t)nb, keys, &kv->xbuf, &req);
	sim_group_spec full = {.kind = SIM_GROUP_FULL, .block_size = bs};
	out->hit_tokens = sim_hybrid_hit(&full, 1, n_tokens, default_held, &a);
	out->n_groups = 1;
	out->groups[0].spec = full;
	out->groups[0].hit_tokens = out->hit_tokens;
}
