/*
 * rank.h - the order in which a query's matches are ranked, best first.
 *
 * Most matched blocks first, then most on the GPU tier; ties go to the
 * lower instance id (a pod's id), then the lower dp_rank. It is the order of
 * docs/api.md#post-query ("Order"), computed with integers only, because it is
 * applied to every listener that matches a query.
 *
 * Shards select a query's top_k by this order (shard/index/topk.h) and the
 * coordinator ranks the merged answer by it (coordinator/query/qanswer.c):
 * the k best of each shard hold the k best of the fleet only because
 * both use this one definition.
 *
 * A key is three words compared in order, as unsigned integers, so that a
 * sort or a heap compares inline.
 */
#ifndef KVI_COMMON_RANK_H
#define KVI_COMMON_RANK_H

#include <stdint.h>

typedef struct kvi_rank_key {
	uint64_t k[3];
} kvi_rank_key;

/* kvi_rank_key_of returns the key of a match (counts in blocks). */
static inline kvi_rank_key
kvi_rank_key_of(uint32_t longest, uint32_t gpu, uint64_t instance_id,
		uint32_t dp_rank)
{
	kvi_rank_key key = {{
	    (uint64_t)(UINT32_MAX - longest) << 32 | (UINT32_MAX - gpu),
	    instance_id,
	    dp_rank,
	}};
	return key;
}

/* kvi_rank_cmp returns < 0 when a ranks before (is better than) b, 0 when
 * they rank alike, > 0 otherwise. */
static inline int
kvi_rank_cmp(const kvi_rank_key *a, const kvi_rank_key *b)
{
	for (int i = 0; i < 3; i++) {
		if (a->k[i] != b->k[i]) {
			return a->k[i] < b->k[i] ? -1 : 1;
		}
	}
	return 0;
}

#endif /* KVI_COMMON_RANK_H */
