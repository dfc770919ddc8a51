/*
 * sim_groups.h - the prefix cache of a simulated rank serving a hybrid
 * model: one cache per KV cache group.
 *
 * A hybrid model (full attention mixed with sliding-window, chunked local
 * or Mamba layers) has one KV cache group per attention kind in vLLM.
 * Every group caches and evicts on its own, under the same block hashes:
 * hashes are computed at the hash block size (the rank's --block-size),
 * and a group whose block size is r times larger knows its block i by the
 * hash of hash block (i + 1) * r - 1, the last one it spans
 * (vllm/v1/core/kv_cache_utils.py BlockHashListWithBlockSize).
 *
 * A request. Its hit is the engine's (sim_hybrid_hit over the groups'
 * stores, at most prompt_tokens - 1), on the prompt truncated to what every
 * group can hold at once (a Mamba group in "align" mode holds two states
 * of a request at most: it needs two blocks and truncates nothing). The engine
 * then computes the rest in one or more steps [from, to) (one per span;
 * sim_sched.h cuts them in timed mode). Each step does what vLLM's
 * KVCacheManager.allocate_slots and coordinator.cache_blocks do per group
 * (vllm/v1/core/ single_type_kv_cache_manager.py, SingleTypeKVCacheManager and
 * its managers):
 *   1. remove_skipped_blocks(from): the request's blocks that fell out of
 *      the kind's window are released (the request no longer uses them;
 *      they stay cached): sliding window, tokens before
 *      from - window + 1; chunked local, tokens before the chunk of from;
 *      Mamba, every state but the one at from; full attention, none;
 *   2. the blocks the request still uses are pinned; the group evicts its
 *      least recently released blocks to make room for the step's new
 *      blocks -> one BlockRemoved of the group;
 *   3. cache_blocks(to): the step's full blocks are stored -> one
 *      BlockStored of the group, parent the group's block before them.
 *      Every kind stores every full block the step computed, except Mamba
 *      in mamba_cache_mode "align", which caches the state at the step's
 *      end only, when that end is a block boundary (MambaManager
 *      allocate_new_blocks keeps one running state block). An instant
 *      request is split as vLLM's scheduler splits it in "align" mode
 *      (Scheduler._mamba_block_aligned_split): a step up to the prompt's
 *      last block boundary, then the rest.
 * All groups' BlockRemoved come first, then their BlockStored, in group
 * order. At the request's end every block it still uses is released,
 * last block first (SingleTypeKVCacheManager.free frees them in reverse
 * order), so that, as in vLLM's free block queue, tails are evicted
 * first and blocks released early (out of a window) before those kept to
 * the end. A block already held that a step stores again (a recomputed
 * block) is named by the BlockStored again and takes no new slot.
 *
 * Not modelled: vLLM's one block pool shared by every group (here each
 * group has its own capacity, in its own blocks), a decode phase (a
 * request releases everything when its prefill ends), EAGLE, the CPU
 * tier, and requests with keys (LoRA, salt, multimodal items) on a model
 * with a group of another block size than the hash block size (refused:
 * sim_groups_keys_ok).
 *
 * Events name their group (sim_event.grouped, .group) and a group of
 * block size r * hash block size stores with stride r. The caller
 * serialises access (the rank's mutex). Pure otherwise: no I/O.
 */
#ifndef KVI_SIM_GROUPS_H
#define KVI_SIM_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "sim_cache.h"
#include "sim_hybrid.h"

#define SIM_MAX_GROUPS 16

/* One KV cache group: its spec and how many of its blocks it holds. */
typedef struct sim_group_config {
	sim_group_spec spec;
	uint32_t blocks;
} sim_group_config;

typedef struct sim_groups_config {
	uint32_t hash_block_size;
	uint64_t salt; /* external hash salt, as sim_cache_config's */
	size_t n_groups;
	sim_group_config groups[SIM_MAX_GROUPS];
} sim_groups_config;

/* sim_groups_parse parses one model's groups, "GROUP[,GROUP...]", each
 * GROUP "KIND[:BLOCK_SIZE[:BLOCKS]]" with KIND one of full, mla, swa=W,
 * swa-mla=W, chunked=C, mamba=all, mamba=align (vLLM's kind names
 * full_attention, mla_attention, sliding_window=W, sliding_window_mla=W,
 * chunked_local_attention=C too), BLOCK_SIZE (hash_bs) a multiple of
 * hash_bs and BLOCKS (blocks) positive (2 at least for mamba=align), into *out
 * (hash_block_size set, salt 0). Returns NULL, or a static sentence saying what
 * is wrong. */
const char *sim_groups_parse(const char *s, size_t len, uint32_t hash_bs,
			     uint32_t blocks, sim_groups_config *out);

/* sim_group_kind_name returns vLLM's kv_cache_spec_kind of a kind
 * (vllm/v1/kv_cache_interface.py KVCacheSpecKind): "full_attention",
 * "mla_attention", "sliding_window", "sliding_window_mla",
 * "chunked_local_attention" or "mamba". */
const char *sim_group_kind_name(sim_group_kind kind);

/* sim_group_window returns the kv_cache_spec_sliding_window vLLM sends for
 * a spec (get_kv_cache_spec_sliding_window: the window of a sliding kind),
 * 0 when it sends none. */
uint32_t sim_group_window(const sim_group_spec *spec);

/* sim_groups_keys_ok says whether requests with keys can run: every group
 * has the hash block size. */
bool sim_groups_keys_ok(const sim_groups_config *cfg);

/* sim_groups_step_align returns the block size of the first Mamba group in
 * "align" mode, to which vLLM's scheduler aligns prefill steps; 0 when
 * there is none. */
uint32_t sim_groups_step_align(const sim_groups_config *cfg);

typedef struct sim_groups sim_groups;

/* sim_groups_alloc returns empty caches for a valid cfg (copied). Aborts
 * on out-of-memory. */
sim_groups *sim_groups_alloc(const sim_groups_config *cfg);
void sim_groups_free(sim_groups *g);
const sim_groups_config *sim_groups_cfg(const sim_groups *g);

/* sim_groups_limit returns how many of a prompt's n_tokens a request
 * uses: at most what every group can hold at once. */
uint64_t sim_groups_limit(const sim_groups *g, uint64_t n_tokens);

/* sim_groups_run runs a prompt of n_tokens tokens (tokens holds its full
 * hash blocks at least) at once, appending its blocks and events to
 * batch: res gets hit_tokens (and gpu_hit in hash blocks), the blocks new
 * in any group (stored) and removed. */
void sim_groups_run(sim_groups *g, sim_batch *batch, const uint32_t *tokens,
		    uint64_t n_tokens, const kvi_prompt_keys *keys,
		    sim_request_result *res);

/* Timed requests (sim_sched.h). sim_groups_hit loads the prompt's blocks
 * into batch (scratch) and returns the hit in tokens; it changes nothing.
 * sim_groups_span runs the step [from, to) of a request whose previous
 * step started at prev (prev == from for the first), as sim_groups_run
 * would, and with last set ends the request. res: n_blocks loaded, gpu_hit
 * = from in hash blocks, stored, removed. */
uint64_t sim_groups_hit(sim_groups *g, sim_batch *batch, const uint32_t *tokens,
			uint64_t n_tokens, const kvi_prompt_keys *keys);
void sim_groups_span(sim_groups *g, sim_batch *batch, const uint32_t *tokens,
		     uint64_t n_tokens, const kvi_prompt_keys *keys,
		     uint64_t prev, uint64_t from, uint64_t to, bool last,
		     sim_request_result *res);

/* sim_groups_query writes the engine's hit for the prompt into *hit and
 * each group's own hit (sim_hybrid_group_hit) into group_hits[0..n_groups)
 * without running it; batch is scratch. */
void sim_groups_query(sim_groups *g, sim_batch *batch, const uint32_t *tokens,
		      uint64_t n_tokens, const kvi_prompt_keys *keys,
		      uint64_t *hit, uint64_t *group_hits);

/* sim_groups_clear empties every group; with batch non-NULL it appends one
 * AllBlocksCleared. */
void sim_groups_clear(sim_groups *g, sim_batch *batch);

/* sim_groups_count returns the blocks group i holds. */
uint32_t sim_groups_count(const sim_groups *g, size_t i);

/* sim_groups_snapshot returns every hash block some group holds, by hash
 * level (parents before children), groups = the groups holding it, tiers
 * GPU when group 0 does; a new array (kvi_free) of *n entries, NULL when
 * none. */
sim_block_info *sim_groups_snapshot(const sim_groups *g, size_t *n);

/* sim_groups_dump returns group 0's blocks at its own block size (parent
 * and local hash of the group block), parents first, as sim_groups_snapshot
 * does. */
sim_block_info *sim_groups_dump(const sim_groups *g, size_t *n);

#endif /* KVI_SIM_GROUPS_H */
