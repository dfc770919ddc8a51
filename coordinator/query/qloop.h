/*
 * qloop.h - the shard links of one HTTP loop thread.
 *
 * Each loop that serves queries keeps one kvc_qlink (qlink.h) to each
 * shard, with a batcher of its own (qbatch.h), so that a query is sent,
 * answered, merged and replied to on the loop thread that parsed it. A
 * link is opened at the first query for its shard and connects in the
 * background; until it is ready (and whenever it is reconnecting) queries
 * take the shard's nng client, as they do for a URL a link cannot dial. A
 * link holds a reference to its shard, and lets it go once the shard has
 * been removed from the set and nothing is in flight.
 *
 * Threading: a kvc_qloop belongs to its loop thread; kvc_qloop_free runs
 * once that thread has stopped.
 */
#ifndef KVI_COORDINATOR_QLOOP_H
#define KVI_COORDINATOR_QLOOP_H

#include <stddef.h>

#include "qbatch.h"
#include "shardset.h"

struct event_base;

typedef struct kvc_qloop kvc_qloop;

/* kvc_qloop_alloc returns the links of the loop running base, batching
 * as kvc_qbatch_alloc does with max_inflight and max_batch. */
kvc_qloop *kvc_qloop_alloc(struct event_base *base, int max_inflight,
			   size_t max_batch);

/* kvc_qloop_free closes every link (calls in flight end with KVI_ECLOSED)
 * and lets go of the shards. NULL is a no-op. */
void kvc_qloop_free(kvc_qloop *ql);

/* kvc_qloop_batcher returns the batcher for this loop's queries to sh:
 * its link's when the link is ready, else sh's own. */
kvc_qbatch *kvc_qloop_batcher(kvc_qloop *ql, kvc_shard *sh);

/* kvc_qloop_link returns this loop's link to sh when it is ready, for a
 * lone request that is not a query (POST /routed); NULL: take sh's nng
 * client. */
struct kvc_qlink *kvc_qloop_link(kvc_qloop *ql, kvc_shard *sh);

#endif /* KVI_COORDINATOR_QLOOP_H */
