/*
 * routed.h - POST /routed: a router says where it sent a request.
 *
 * The coordinator hashes the prompt once, as for /query, finds the
 * listener (a pod by name or an instance by id, and its dp_rank) and the
 * shard that owns it, and hands it the blocks in one RoutedRequest; the
 * shard makes those it does not hold pending there (shard/pending) and
 * predicts the request's hit. Nothing else is asked, and nothing is
 * stored here: every coordinator replica sees the entries, since they are
 * the shard's.
 *
 * Answers: 202 {"listener", "matched_blocks", "pending_blocks",
 * "predicted_blocks"}; 400 for a bad body or a pod serving another model;
 * 404 for an unknown model, pod, instance or rank; 503 when no shard owns
 * the listener now, or its shard does not answer. The request goes over
 * the loop's own link to the shard (qloop.h), so the reply is written on
 * the loop thread that parsed it, or, while that link is not ready, through
 * the shard's nng client, and the reply is sent from nng's thread. No loop
 * thread waits either way.
 */
#ifndef KVI_COORDINATOR_ROUTED_H
#define KVI_COORDINATOR_ROUTED_H

#include <time.h>

#include "httpd.h"
#include "metrics.h"
#include "qerr.h"
#include "qreq.h"
#include "query.h"
#include "registry.h"
#include "shardset.h"

typedef struct kvc_routed kvc_routed;

/* kvc_routed_alloc returns the /routed handler's state; shard calls wait
 * at most timeout_ms, over the loops' links q keeps (kvc_query_loop).
 * Its counters go to m. */
kvc_routed *kvc_routed_alloc(kvc_registry *reg, kvc_shardset *shards,
			     kvc_query *q, kvi_metrics *m, int timeout_ms);
void kvc_routed_free(kvc_routed *rt);

/* kvc_routed_start answers req for the request r (taken), parsed at t0. */
void kvc_routed_start(kvc_routed *rt, kvi_http_req *req,
		      const struct timespec *t0, kvc_qreq *r);

/* kvc_routed_refuse answers req with the parser's refusal e (taken). */
void kvc_routed_refuse(kvc_routed *rt, kvi_http_req *req, kvc_qerr *e);

#endif /* KVI_COORDINATOR_ROUTED_H */
