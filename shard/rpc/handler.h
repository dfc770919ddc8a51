/*
 * handler.h - the shard's answers to coordinator requests.
 *
 * Queries (and batches of them) are answered on the service thread that
 * received them, straight from the index, in the compact form of
 * QueryResponse; assignments, status, dumps and hand-off chunks are
 * requests to the ingest thread, which owns the listeners and may make
 * them wait, so the service's worker threads carry them. A query for a
 * model the shard has no listener of is not an error: it matches nothing
 * (the coordinator knows the fleet's models and answers 404 for others).
 * A routed request (a router's decision) is answered inline too: a lookup
 * of its listener's exact prefix, then its pending entries.
 */
#ifndef KVI_SHARD_HANDLER_H
#define KVI_SHARD_HANDLER_H

#include "index.h"
#include "ingest.h"
#include "metrics.h"
#include "pending.h"
#include "service.h"

typedef struct kvh_shard kvh_shard;

/* kvh_shard_alloc returns the handler state; it registers the query
 * metrics with metrics (may be NULL). Routed requests make entries pending
 * in pending, for pending_ttl_ms unless they say otherwise. */
kvh_shard *kvh_shard_alloc(kvx_index *idx, kvg_ingest *ingest,
			   kvd_pending *pending, uint32_t pending_ttl_ms,
			   kvi_metrics *metrics);
void kvh_shard_free(kvh_shard *s);

/* kvh_shard_handler returns the kvn_handler to serve with, called with a
 * kvh_shard as its arg. */
kvn_handler kvh_shard_handler(void);

/* kvh_shard_inline_kinds returns the request kinds the handler answers
 * without blocking (queries: a read lock and a probe), for
 * kvn_service_opts.inline_kinds. */
unsigned kvh_shard_inline_kinds(void);

#endif /* KVI_SHARD_HANDLER_H */
