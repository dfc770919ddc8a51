/*
 * sim_kv.h - a simulated rank's KV cache: one full-attention group
 * (sim_cache.h, the default, with its optional CPU tier) or the KV cache
 * groups of a hybrid model (sim_groups.h, --kv-groups).
 *
 * The rank (sim_rank.c) and the scheduler's caller go through this module
 * so that neither cares which one a rank has. Both report the hit the
 * engine takes for a request (vLLM's KVCacheManager.get_computed_blocks:
 * at most prompt_tokens - 1, by sim_hybrid_hit's rule), answer /hit
 * without running anything, and give the ground truth (/truth, with the
 * groups holding each block) and the tree dump of /kv_recover, which
 * carries group 0 alone (its RouterEvents have no group field).
 *
 * The default cache keeps its own, older behaviour for instant requests
 * (it stores past the uncapped hit) and its bytes on the wire (no group
 * fields): only its reported hit_tokens is capped.
 *
 * Pure: no I/O, no locking; the rank's mutex serialises access.
 */
#ifndef KVI_SIM_KV_H
#define KVI_SIM_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "sim_cache.h"
#include "sim_groups.h"
#include "sim_sched.h"

typedef struct sim_kv sim_kv;

/* sim_kv_alloc returns an empty cache: groups (copied) when not NULL, else
 * a sim_cache of cache. */
sim_kv *sim_kv_alloc(const sim_cache_config *cache,
		     const sim_groups_config *groups);
void sim_kv_free(sim_kv *kv);

/* sim_kv_groups returns the groups' config, NULL for the default. */
const sim_groups_config *sim_kv_groups(const sim_kv *kv);

/* sim_kv_run runs a request of n_tokens prompt tokens (tokens holds its
 * n_blocks full blocks) at once into batch. res->hit_tokens is the hit
 * the engine takes. */
void sim_kv_run(sim_kv *kv, sim_batch *batch, const uint32_t *tokens,
		uint32_t n_blocks, uint64_t n_tokens,
		const kvi_prompt_keys *keys, sim_request_result *res);

/* sim_kv_start and sim_kv_step are sim_sched_start and sim_sched_step on
 * this cache. */
sim_job *sim_kv_start(sim_kv *kv, sim_sched *s);
sim_job *sim_kv_step(sim_kv *kv, sim_sched *s, sim_batch *batch);

/* sim_kv_clear empties the cache (AllBlocksCleared into batch unless
 * NULL). */
void sim_kv_clear(sim_kv *kv, sim_batch *batch);

/* Blocks held: GPU (every group's together), CPU, and per group. */
typedef struct sim_kv_counts {
	uint32_t gpu;
	uint32_t cpu;
	size_t n_groups; /* 0 for the default */
	uint32_t group[SIM_MAX_GROUPS];
} sim_kv_counts;

void sim_kv_counts_get(const sim_kv *kv, sim_kv_counts *out);

/* sim_kv_snapshot returns every cached block with its tiers and groups
 * (/truth); sim_kv_dump the blocks a /kv_recover TreeDump lists (group 0
 * at its block size; the default: every tier). New arrays (kvi_free) of
 * *n entries, parents first. */
sim_block_info *sim_kv_snapshot(const sim_kv *kv, size_t *n);
sim_block_info *sim_kv_dump(const sim_kv *kv, size_t *n);

/* The engine's hit for a prompt and each group's own. */
typedef struct sim_kv_hit {
	uint64_t hit_tokens;
	size_t n_groups;
	struct {
		sim_group_spec spec;
		uint64_t hit_tokens;
	} groups[SIM_MAX_GROUPS];
} sim_kv_hit;

/* sim_kv_query fills *out for a prompt of n_tokens tokens without running
 * it; batch is scratch (its block size the hash block size). */
void sim_kv_query(sim_kv *kv, sim_batch *batch, const uint32_t *tokens,
		  uint64_t n_tokens, const kvi_prompt_keys *keys,
		  sim_kv_hit *out);

#endif /* KVI_SIM_KV_H */
