/*
 * ladder.h - the routing ladder in production: what each engine rank hit,
 * beside what kvindex predicted for the requests routed to it.
 *
 * Routers that report their decisions (POST /routed) make the shards
 * predict, per listener, the hit of every routed request (its exact
 * prefix plus what earlier routed requests are computing there; shard
 * status's PendingCounts). Engines count what they actually hit: vLLM
 * exports prompt tokens queried and hit per engine rank on the pod's
 * metrics endpoint (prom.h). For every pod that names that endpoint
 * (metrics_port), a thread of the ladder scrapes it every interval and
 * compares, per listener and over the same window, the engine's hit
 * ratio with the predicted one:
 *
 *   engine >> predicted  blind: the engine reuses what kvindex does not
 *                        see (events lost, a listener that hears nothing)
 *   engine << predicted  phantom: kvindex promises hits the engine does
 *                        not take
 *
 * A rank in the engine's metrics with no listener that serves requests
 * is blind too, the seed's failure: the pod's data-parallel size is larger
 * than the one registered. Each is logged when it begins and when it
 * ends, counted, and shown on /workers.
 *
 * A window starts when the ladder first sees a listener's counters, again
 * when either side's counters go back (an engine restart, a listener new
 * on its shard), and again once both sides passed window_tokens; ratios
 * are taken once both sides have min_tokens in it.
 */
#ifndef KVI_COORDINATOR_LADDER_H
#define KVI_COORDINATOR_LADDER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "metrics.h"
#include "registry.h"

typedef struct kvc_ladder_config {
	int interval_ms;        /* between scrapes; 0: 5000 */
	int timeout_ms;         /* one scrape, whole; 0: 2000 */
	double gap;             /* a hit-ratio difference that is a gap;
				 * 0: 0.25 */
	uint64_t min_tokens;    /* on both sides before ratios; 0: 20000 */
	uint64_t window_tokens; /* a window longer starts again;
				 * 0: 2000000 */
} kvc_ladder_config;

/* What a step did to a listener's gap. */
typedef enum kvc_ladder_event {
	KVC_LADDER_SAME = 0,
	KVC_LADDER_GAP_BEGAN,
	KVC_LADDER_GAP_ENDED,
} kvc_ladder_event;

/* kvc_ladder_step moves the ladder's view c of a listener to the engine's
 * counters (queries, hits) and the shard's prediction p, per cfg (its
 * defaults filled in). Pure. */
kvc_ladder_event kvc_ladder_step(kvc_lladder *c, uint64_t queries,
				 uint64_t hits, const kvc_lpending *p,
				 const kvc_ladder_config *cfg);

typedef struct kvc_ladder kvc_ladder;

/* kvc_ladder_open starts the scraping thread over reg's pods, with its
 * metrics in m. */
kvi_err kvc_ladder_open(const kvc_ladder_config *cfg, kvc_registry *reg,
			kvi_metrics *m, kvc_ladder **out, char *err,
			size_t errlen);

/* kvc_ladder_free stops the thread (a scrape in flight ends within its
 * timeout) and frees l; NULL is fine. */
void kvc_ladder_free(kvc_ladder *l);

#endif /* KVI_COORDINATOR_LADDER_H */
