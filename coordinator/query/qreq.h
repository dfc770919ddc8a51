/*
 * qreq.h - what a query asks: a /query or /query_by_hash request as its
 * body's parser (api/api_json.h) hands it to the query path (query.h).
 *
 * A /query names its prompt by token ids (with the LoRA, salt and
 * multimodal items that select the blocks the engine would reuse); a
 * /query_by_hash by the local hashes of its blocks
 * (docs/wire.md#local-block-hash). Either may restrict the answer to some
 * instances, to one dp_rank, and to the top_k best listeners.
 *
 * Ownership: a request owns every array and string it points to; free
 * them with kvc_qreq_fini(), or take one by setting its pointer to NULL.
 */
#ifndef KVI_COORDINATOR_QREQ_H
#define KVI_COORDINATOR_QREQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"

/* The longest a routed request's blocks may stay pending (the shard's
 * bound, shard/pending/pending.h). */
#define KVC_QREQ_TTL_MAX_MS 600000u

/* The largest top_k a query may ask for: more than any fleet has
 * listeners, so it never truncates a fleet's answer. */
#define KVC_QREQ_TOP_K_MAX 1048576u

/* A /query or /query_by_hash request. Exactly one of token_ids and
 * block_hashes (local hashes, docs/wire.md#local-block-hash) is used, by the
 * parser that filled it. */
typedef struct kvc_qreq {
	char *model;      /* non-empty */
	char *lora_name;  /* NULL: none (/query only) */
	char *cache_salt; /* NULL: none (/query only) */
	kvi_mm_item *mm;  /* /query: multimodal items, ids owned */
	size_t n_mm;
	uint32_t *token_ids;    /* /query; NULL when n_tokens is 0 */
	size_t n_tokens;        /* at most the parser's max_tokens */
	uint64_t *block_hashes; /* /query_by_hash: local hashes */
	size_t n_hashes;        /* at most the parser's max_hashes */
	uint64_t *instances;    /* restriction; n_instances 0: all instances */
	size_t n_instances;
	bool has_dp_rank;
	uint16_t dp_rank;
	uint32_t top_k;  /* 0: every listener with a match; else the k best */
	bool no_pending; /* "pending": false - exact entries only */
	/* POST /routed: the rank the request was sent to, by pod name or
	 * instance id (exactly one), its rank dp_rank (0 when absent), and
	 * how long its blocks stay pending (has_ttl_ms false: the shard's
	 * default) */
	char *pod;
	bool has_instance_id;
	uint64_t instance_id;
	bool has_ttl_ms;
	uint32_t ttl_ms;
} kvc_qreq;

/* kvc_qreq_fini frees what q owns and zeroes it; safe on a zeroed
 * request. */
void kvc_qreq_fini(kvc_qreq *q);

/* kvc_qreq_seq_hashes returns the sequence hashes of r's prompt for block
 * size bs, a new array of *nb (kvi_free): hashed from its token ids, LoRA,
 * salt and items (by_tokens), or chained from its block hashes, which it
 * then takes. */
uint64_t *kvc_qreq_seq_hashes(kvc_qreq *r, bool by_tokens, uint32_t bs,
			      size_t *nb);

#endif /* KVI_COORDINATOR_QREQ_H */
