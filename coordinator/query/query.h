/*
 * query.h - POST /query and /query_by_hash: hash once, fan out to every
 * shard, merge.
 *
 * A query comes parsed (qreq.h: api/ reads its body), its model is looked
 * up (404 when no registered pod serves it), any instances/dp_rank
 * restriction checked against the registry (an unknown instance, or a
 * rank the instance does not have, is a 400 that lists the instance's
 * connected ranks), and its tokens hashed once into local then sequence hashes
 * (hash.h) with the block size of the model. One QueryRequest then goes at once
 * to every shard that owns one of the model's listeners (registry_route.c) and
 * has not missed a status poll, through the loop's batcher for that shard
 * (qbatch.h: alone when the shard has room, else coalesced with the queries
 * that wait for it), each bounded by the query deadline. The batcher sends
 * on the loop's own link to the shard (qloop.h), or through the shard's nng
 * client while that link is not connected. The shards answer for the
 * listeners they own (with top_k, only their k best), each answer is added
 * to the query's matches as it arrives, and the last one merges and
 * replies: on the loop thread when the answers came over its links, else
 * on an nng thread. A
 * shard that does not answer in time is left out and the answer says
 * `partial: true`, so no query ever waits past its deadline; a shard known
 * down that owns some of the model's listeners is left out the same way,
 * without waiting. When no shard answers it is a 503.
 *
 * The HTTP loop thread never waits.
 *
 * Metrics: kvindex_coord_query_seconds{endpoint} (latency from the
 * request's arrival at the handler to the reply),
 * kvindex_coord_queries_total{code} and kvindex_coord_hash_queries_total{code},
 * and kvindex_coord_fanout_errors_total{shard} (calls that failed or missed the
 * deadline, and queries not sent to it while it was down).
 */
#ifndef KVI_COORDINATOR_QUERY_H
#define KVI_COORDINATOR_QUERY_H

#include <stdbool.h>
#include <stddef.h>

#include <time.h>

#include "httpd.h"
#include "metrics.h"
#include "qerr.h"
#include "qloop.h"
#include "qreq.h"
#include "registry.h"
#include "shardset.h"

typedef struct kvc_query_config {
	int deadline_ms;    /* per query; 0: 100 */
	size_t max_tokens;  /* token ids per /query; 0: 1048576 */
	size_t max_hashes;  /* block hashes per /query_by_hash; 0: 65536 */
	int batch_inflight; /* coalescing per loop and shard (qbatch.h) */
	size_t batch_max;
	bool via_nng; /* every query through the shards' nng clients, none
		       * through the loops' own links (qloop.h) */
} kvc_query_config;

typedef struct kvc_query kvc_query;

/* kvc_query_alloc registers the metrics in m (not NULL). */
kvc_query *kvc_query_alloc(kvc_registry *reg, kvc_shardset *shards,
			   kvi_metrics *m, const kvc_query_config *cfg);

/* kvc_query_free frees q; queries in flight must have been answered
 * (stop the HTTP server first, which waits for them). */
void kvc_query_free(kvc_query *q);

/* kvc_query_loop_free is kvi_httpd_config.local_free for the server
 * that routes to these handlers (local_arg: the kvc_query). */
void kvc_query_loop_free(void *q, void *local);

/* kvc_query_loop returns the shard links of the loop req came in on,
 * made at its first request; NULL when the configuration sends every
 * request through the shards' nng clients. Called on that loop. */
kvc_qloop *kvc_query_loop(kvc_query *q, kvi_http_req *req);

/* The routes a query comes by (its metrics are counted by route). */
typedef enum kvc_query_route {
	KVC_QUERY_TOKENS = 0, /* POST /query */
	KVC_QUERY_HASHES,     /* POST /query_by_hash */
} kvc_query_route;

/* kvc_query_limits writes the most token ids a /query and block hashes a
 * /query_by_hash may hold: the limits of their bodies' parser. */
void kvc_query_limits(const kvc_query *q, size_t *max_tokens,
		      size_t *max_hashes);

/* kvc_query_start answers req, which came by route with the request r: a
 * 404 or 400 when the registry refuses r (unknown model, instance or
 * rank), else the merged answers of the shards, from the thread the last
 * one arrives on. It takes what r owns (r is left zeroed). t0 is when req
 * reached its handler (CLOCK_MONOTONIC): its latency is measured from
 * there. Called on the HTTP loop thread that received req. */
void kvc_query_start(kvc_query *q, kvi_http_req *req, kvc_query_route route,
		     const struct timespec *t0, kvc_qreq *r);

/* kvc_query_refuse answers req, whose body its parser refused with e, as
 * kvc_query_start does a refused query (the same metrics), and releases
 * e. */
void kvc_query_refuse(kvc_query *q, kvi_http_req *req, kvc_query_route route,
		      const struct timespec *t0, kvc_qerr *e);

#endif /* KVI_COORDINATOR_QUERY_H */
