/*
 * qanswer.h - a query's answer: per-listener matches from every shard
 * merged into the /query response of docs/api.md#post-query.
 *
 * The answer is written as text directly, not built as a jansson tree
 * and dumped: a query whose prefix every listener holds (a shared system
 * prompt) names every listener of the fleet, and the tree would cost
 * several allocations per listener on the query path. Everything here is
 * a pure function of its arguments.
 */
#ifndef KVI_COORDINATOR_QANSWER_H
#define KVI_COORDINATOR_QANSWER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* One listener's match: a shard's compact answer (QueryResponse's m_*
 * arrays) with the key and pod the registry knows it by. Counts are in
 * blocks: gpu is the device-tier prefix, cpu and disk how far lower tiers
 * extend it, longest the whole match, pending how far routed requests
 * are expected to extend it (shard/pending). Strings are borrowed. */
typedef struct kvc_qanswer_match {
	const char *key; /* listener key */
	uint64_t instance_id;
	const char *pod; /* "ns/name"; NULL or "" for a per-rank registration */
	uint32_t dp_rank;
	uint32_t gpu, cpu, disk, longest, pending;
	/* a hybrid model's listener: its groups are
	 * result.groups[g_first .. g_first + n_groups) */
	uint32_t g_first, n_groups;
} kvc_qanswer_match;

/* One KV cache group of a hybrid model's listener, and the hit it alone
 * allows (the listener's own match is what all of them allow). */
typedef struct kvc_qanswer_group {
	uint32_t group;
	const char *kind; /* vLLM's kv_cache_spec_kind */
	uint32_t window;  /* tokens; 0 none */
	uint32_t blocks;
} kvc_qanswer_group;

/* kvc_qanswer_cmp orders matches best first, in the order of rank.h
 * (longest + pending, then gpu, descending; then instance id and dp_rank,
 * ascending), the one shards select a query's top_k by. */
int kvc_qanswer_cmp(const kvc_qanswer_match *a, const kvc_qanswer_match *b);

/* What a /query response is built from. */
typedef struct kvc_qanswer_result {
	const char *model;
	uint32_t block_size;
	size_t query_blocks;
	const kvc_qanswer_match *matches; /* from every shard that answered */
	size_t n_matches;
	const kvc_qanswer_group *groups; /* the matches' groups */
	uint32_t top_k; /* 0: every listener with a match; else the k best */
	uint32_t shards_answered, shards_total;
	/* shards that answered from an index no longer following their
	 * engines (their store cannot commit): "stale" in the answer */
	const char *const *stale;
	size_t n_stale;
} kvc_qanswer_result;

/* kvc_qanswer_text returns the /query response (docs/api.md#post-query) as
 * compact JSON text (kvi_free), NUL-terminated, its length in *len: listeners
 * with no matched or pending block are left out; a listener (instance id,
 * dp_rank) that two shards report during a hand-off appears once, with the
 * longer match; workers are sorted best first (kvc_qanswer_cmp); with top_k
 * only the first top_k of that order appear, in workers, scores and instances
 * alike; an instance's gpu/cpu/disk are those of its best rank; tokens
 * are blocks * block_size; instance ids are decimal strings; a worker
 * without a pod name has "pod": null. Workers and best carry the pending
 * blocks too (pending_blocks, pending_tokens); scores and instances are
 * exact only, as routers that know nothing of pending entries read them. */
char *kvc_qanswer_text(const kvc_qanswer_result *r, size_t *len);

/* kvc_qanswer_json returns the same response as a new jansson object (for
 * tests and tools; the HTTP path sends the text). */
json_t *kvc_qanswer_json(const kvc_qanswer_result *r);

#endif /* KVI_COORDINATOR_QANSWER_H */
