/*
 * topk.h - the k best matches of a query, selected as they are found.
 *
 * A query with top_k asks only for the k best listeners. The shard keeps
 * them in a bounded heap while the index reports matches (kvx_query's
 * callback), so selecting costs O(n log k) and holds k entries, whatever
 * the number of listeners that match. "Best" is the order of rank.h, the
 * one the coordinator ranks its answer by, so the k best of each shard
 * hold the k best of the fleet and merging them is exact.
 *
 * The heap keeps the worst of the kept entries at its root, so a new match
 * replaces it or is dropped after one comparison.
 *
 * Memory: the entries come from the arena given to kvh_topk_init and live
 * as long as it does. One thread uses a kvh_topk.
 */
#ifndef KVI_SHARD_TOPK_H
#define KVI_SHARD_TOPK_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"

/* One kept match, in blocks; pending is how far pending entries extend
 * it (ranked as if held: the prefix expected there). */
typedef struct kvh_topk_entry {
	uint64_t instance_id;
	uint32_t dp_rank;
	uint32_t gpu, cpu, disk, longest, pending;
} kvh_topk_entry;

typedef struct kvh_topk {
	kvh_topk_entry *e; /* a heap: the worst kept entry at e[0] */
	size_t n, cap, k;
	kvp_arena *arena;
} kvh_topk;

/* kvh_topk_init prepares t to keep the k (> 0) best matches, in memory
 * from a that grows with what is kept (a large k costs only what
 * matches). */
void kvh_topk_init(kvh_topk *t, size_t k, kvp_arena *a);

/* kvh_topk_add offers one match: it is kept when fewer than k are, or
 * when it is better than the worst kept one, which it then replaces. */
void kvh_topk_add(kvh_topk *t, const kvh_topk_entry *m);

/* kvh_topk_cmp orders two matches best first (< 0: a is better). */
int kvh_topk_cmp(const kvh_topk_entry *a, const kvh_topk_entry *b);

#endif /* KVI_SHARD_TOPK_H */
