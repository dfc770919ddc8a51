/*
 * sim_hybrid.h - the prefix-cache hit of a hybrid model, by the engine's
 * own rule.
 *
 * A hybrid model (full attention mixed with sliding-window attention,
 * chunked local attention or Mamba layers) has one KV cache group per
 * attention kind. The groups cache and evict their blocks independently,
 * under the same block hashes, and a new request reuses a cached prefix
 * only as far as every group allows. This module is that rule, written
 * from vLLM's source as the independent ground truth the simulator (and
 * through it the indexer's tests) compare with. It knows nothing of the
 * indexer.
 *
 * The rule. A request of n tokens may hit at most n - 1 tokens
 * (KVCacheManager.get_computed_blocks: the last token is always computed,
 * for its logits). Each kind then accepts a hit length L (a multiple of
 * its block size B, at most the length it is offered):
 *   - full attention and MLA: the leading run of held blocks;
 *   - sliding window (and sliding-window MLA): the cdiv(window - 1, B)
 *     blocks just before L are held (blocks further back may be missing),
 *     found by scanning right to left for the first such run; failing
 *     that, a run of held blocks from block 0;
 *   - chunked local attention: the blocks of L's own attention chunk, from
 *     the chunk start up to L, are held (the blocks of earlier chunks are
 *     not needed at all);
 *   - Mamba: the one block ending exactly at L is held (the state there);
 *     L is the end of the rightmost such block.
 * With several groups, every hit must also be a multiple of the least
 * common multiple of the groups' block sizes; full attention pops blocks
 * to it, and the other kinds only start a match at a block ending on it.
 * Groups with equal specs are looked up together (a block counts only if
 * every one of them holds it). The combined hit is a fixed point: the
 * groups are asked in turn, full attention first, each with the length
 * the previous one allowed, and the round repeats until no group lowers
 * it (one round when there are exactly two specs and one is full
 * attention).
 *
 * Followed: vllm/v1/core/kv_cache_coordinator.py at commit 52b9a57da84e
 * (UnitaryKVCacheCoordinator and HybridKVCacheCoordinator
 * .find_longest_cache_hit, verify_and_split_kv_cache_groups) and
 * vllm/v1/core/single_type_kv_cache_manager.py at commit 129ab7c60cbb
 * (FullAttentionManager, SlidingWindowManager,
 * ChunkedLocalAttentionManager and MambaManager .find_longest_cache_hit);
 * vllm/v1/core/kv_cache_manager.py get_computed_blocks for the n - 1
 * cap; vllm/v1/kv_cache_interface.py for the spec classes (MLAAttentionSpec
 * is a FullAttentionSpec, SlidingWindowMLASpec a SlidingWindowSpec served
 * by SlidingWindowManager); vllm/config/cache.py for mamba_cache_mode.
 * Not modelled: EAGLE/MTP drops, decode/prefill context parallelism,
 * requests that skip the prefix cache (prompt logprobs), and the
 * sub-block hits later revisions add for Mamba "align" groups.
 *
 * Blocks are numbered in each group's own block size: block i of a group
 * of block size B covers tokens [i*B, (i+1)*B) of the prompt and is known
 * by the chained hash at token (i+1)*B (vllm/v1/core/kv_cache_utils.py
 * BlockHashListWithBlockSize). The caller says which blocks each group
 * holds through a predicate; the module never asks about a block past
 * the length it was offered.
 *
 * Pure: no I/O, no globals, no allocation.
 */
#ifndef KVI_SIM_HYBRID_H
#define KVI_SIM_HYBRID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The attention kind of a KV cache group (vLLM's KVCacheSpec classes). */
typedef enum sim_group_kind {
	SIM_GROUP_FULL = 0,      /* FullAttentionSpec */
	SIM_GROUP_MLA,           /* MLAAttentionSpec, a FullAttentionSpec */
	SIM_GROUP_SLIDING,       /* SlidingWindowSpec */
	SIM_GROUP_SLIDING_MLA,   /* SlidingWindowMLASpec, a SlidingWindowSpec */
	SIM_GROUP_CHUNKED_LOCAL, /* ChunkedLocalAttentionSpec */
	SIM_GROUP_MAMBA,         /* MambaSpec */
} sim_group_kind;

/* mamba_cache_mode. It decides which Mamba states get cached (every block
 * boundary with "all"; only scheduler-step ends on a block boundary with
 * "align"), which is the caller's predicate; the lookup is the same for
 * both. "none" means prefix caching is off: no hit at all. */
typedef enum sim_mamba_mode {
	SIM_MAMBA_NONE = 0,
	SIM_MAMBA_ALL,
	SIM_MAMBA_ALIGN,
} sim_mamba_mode;

/* One KV cache group. Fields a kind does not use are ignored (also when
 * deciding whether two groups have equal specs). */
typedef struct sim_group_spec {
	sim_group_kind kind;
	uint32_t block_size;       /* tokens per block of this group */
	uint32_t sliding_window;   /* tokens; sliding kinds */
	uint32_t chunk_size;       /* attention_chunk_size; chunked local */
	sim_mamba_mode mamba_mode; /* Mamba */
} sim_group_spec;

/* Whether group `group` holds its block `block` (in its own block size)
 * of this prompt's chain. Evictions are per group, so a group may hold a
 * block and not the ones before it. */
typedef bool (*sim_held_fn)(void *arg, size_t group, uint64_t block);

/* sim_hybrid_check returns NULL when vLLM accepts these groups, else a
 * static sentence saying why not: no group, a zero block size, window or
 * chunk, an unknown kind or mode, a chunked local group whose block size
 * is not the groups' common multiple (vLLM asserts it), or a common
 * multiple too large. */
const char *sim_hybrid_check(const sim_group_spec *groups, size_t n_groups);

/* sim_hybrid_alignment returns the least common multiple of the groups'
 * block sizes: every hybrid hit is a multiple of it. 0 when the groups do
 * not pass sim_hybrid_check. */
uint64_t sim_hybrid_alignment(const sim_group_spec *groups, size_t n_groups);

/* sim_hybrid_group_hit returns the hit in tokens that one group alone
 * allows: at most max_tokens, a multiple of its block size and of
 * `align` (its own block size when it is the only group, else
 * sim_hybrid_alignment). held is asked about `group`'s blocks only. 0 for
 * a spec that fails sim_hybrid_check, align 0, a Mamba group in mode
 * "none", or a chunked local group whose block size is not `align`. */
uint64_t sim_hybrid_group_hit(const sim_group_spec *spec, size_t group,
			      uint64_t max_tokens, uint64_t align,
			      sim_held_fn held, void *arg);

/* sim_hybrid_hit returns the engine's hit in tokens for a prompt of
 * n_tokens tokens: at most n_tokens - 1, allowed by every group. 0 when
 * the groups fail sim_hybrid_check or prefix caching is off (a Mamba
 * group in mode "none"). */
uint64_t sim_hybrid_hit(const sim_group_spec *groups, size_t n_groups,
			uint64_t n_tokens, sim_held_fn held, void *arg);

#endif /* KVI_SIM_HYBRID_H */
