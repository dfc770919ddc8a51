/*
 * hit_rule.h - the prefix hit vLLM itself takes for a hybrid model.
 *
 * A hybrid model (sliding window + full attention, Mamba + attention,
 * chunked local + full) has one KV cache group per attention kind in vLLM;
 * each group caches and evicts its blocks on its own, and the engine reuses
 * a prompt's prefix only as far as every group allows. kvx_hit is that
 * rule as a pure function: given, per group, which of a prompt's hash
 * blocks it holds, it returns the hit the engine would take. It allocates
 * nothing and keeps no state: it reads held[] in place, so a call costs a
 * few scans of the n blocks. Each part follows one piece of vLLM's v1 KV
 * cache manager, kv_cache_coordinator.py and single_type_kv_cache_manager.py
 * as of commit 00b08dc44519 (the newest version we could read; the simple
 * hybrid shortcut, the alignment to the scheduler block and the skipping
 * of groups that are not prefix-cacheable are as it has them), and the
 * kind strings from kv_cache_interface.py (KVCacheSpecKind,
 * get_kv_cache_spec_kind):
 *   - one group (n_groups == 1): UnitaryKVCacheCoordinator, which calls
 *     that group's manager once, aligned to its own block;
 *   - several: HybridKVCacheCoordinator.find_longest_cache_hit. Groups
 *     with the same spec are checked together, a block being hit only when
 *     every one of them holds it (verify_and_split_kv_cache_groups, and
 *     BlockPool.get_cached_block over several group ids); full attention
 *     first, then the others in the order they first appear. The candidate
 *     length starts at the maximum and each spec either keeps it or
 *     lowers it, round after round, until a round leaves it unchanged;
 *     with exactly two specs the first of which is full attention (the
 *     "simple hybrid"), one round is all. Full attention is looked up in
 *     the first round only (it is downward-closed). Every hit is a
 *     multiple of the scheduler block, the least common multiple of the
 *     groups' block sizes (_cache_hit_alignment_tokens,
 *     resolve_kv_cache_block_sizes);
 *   - full attention (FullAttentionManager): the run of held blocks from
 *     the start, rounded down to the alignment;
 *   - sliding window (SlidingWindowManager): scanning from the right, the
 *     first ceil((window - 1) / block) contiguous held blocks whose right
 *     end is aligned (a held block that would start a run at an unaligned
 *     end is skipped); when there is none, the run from the start, rounded
 *     down to the alignment;
 *   - chunked local attention (ChunkedLocalAttentionManager): the blocks
 *     before the chunk that holds max_length count as hit, held or not (a
 *     chunked group alone hits with nothing cached); then the held blocks
 *     from that chunk's first block onwards;
 *   - Mamba (MambaManager): the last held block whose end is aligned.
 * A group block of ratio hash blocks is held when all of them are (vLLM
 * keys it by the last one's chained hash, BlockHashListWithBlockSize).
 *
 * Decisions, where vLLM has no answer for what events carry:
 *   - the maximum length is n * block_size tokens. vLLM passes
 *     num_tokens - 1 (the last token is always recomputed); the caller
 *     picks n with that in mind;
 *   - chunked local attention with window 0 (vLLM's events do not carry
 *     the chunk size) is judged as full attention, and so is a sliding
 *     window of 0: a hit full attention takes is one any window takes, so
 *     this never reports a hit the engine would not take (it may report
 *     less);
 *   - KVX_KIND_NONE groups (encoder-only, cross attention, unknown) are
 *     never looked up; if no group is anything else the hit is 0. Their
 *     ratio still enters the alignment, as every KV cache group's block
 *     size enters vLLM's scheduler block (pass 1 when unknown), and a
 *     second group, even a NONE one, makes vLLM's coordinator the hybrid
 *     one;
 *   - vLLM asserts that a chunked local group's block is the alignment;
 *     when it is not, the hit is lowered until it is aligned and the
 *     chunked rule takes it again;
 *   - not modelled: EAGLE/MTP (the dropped lookahead block), decode/prefill
 *     context parallelism, and Mamba "align" partial hits finer than a
 *     group block (vLLM's enable_partial_hash_hits, whose finer alignment
 *     can give the engine a longer hit than this one).
 */
#ifndef KVI_SHARD_HIT_RULE_H
#define KVI_SHARD_HIT_RULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kvx_kind {
	/* full_attention, mla_attention, sink_full_attention */
	KVX_KIND_FULL = 0,
	/* sliding_window, sliding_window_mla: window = tokens */
	KVX_KIND_SLIDING,
	/* chunked_local_attention: window = chunk tokens; 0 = unknown */
	KVX_KIND_CHUNKED,
	KVX_KIND_MAMBA,
	/* not prefix-cacheable (encoder-only, cross attention, unknown):
	 * ignored */
	KVX_KIND_NONE,
} kvx_kind;

/* kvx_kind_parse maps vLLM's kv_cache_spec_kind string (len bytes, not
 * NUL-terminated) to a kind; false for a string it does not know. */
bool kvx_kind_parse(const char *s, size_t len, kvx_kind *out);
const char *kvx_kind_name(kvx_kind k); /* vLLM's spelling */

typedef struct kvx_hit_group {
	kvx_kind kind;
	uint32_t ratio;  /* this group's block = ratio hash blocks (>= 1) */
	uint32_t window; /* tokens: the sliding window or the chunk size */
	/* per HASH block 0..n-1: a tier mask, 0 = not held */
	const uint8_t *held;
} kvx_hit_group;

/* kvx_hit returns the engine's hit, in hash blocks, for a prompt of n hash
 * blocks of block_size tokens each, counting a block as held by a group when
 * (held[i] & mask) != 0. A group block j (ratio > 1) is held when all of its
 * hash blocks are. The prompt's length passed to the engine's rule is
 * n * block_size tokens (the caller decides n). */
uint32_t kvx_hit(const kvx_hit_group *groups, size_t n_groups,
		 uint32_t block_size, uint32_t n, uint8_t mask);

#endif /* KVI_SHARD_HIT_RULE_H */
