/*
 * http_api.h - the coordinator's HTTP routes (API.md), other than the
 * queries (query.h): /register, /unregister, /workers, /health, /ready,
 * /metrics and GET /admin/shards.
 *
 * Registration and unregistration are handed to the assigner, which
 * answers from its thread; the rest is answered on the loop thread from
 * the registry and the shard set.
 */
#ifndef KVI_COORDINATOR_HTTP_API_H
#define KVI_COORDINATOR_HTTP_API_H

#include <stdint.h>

#include "assigner.h"
#include "httpd.h"
#include "metrics.h"
#include "query.h"
#include "registry.h"
#include "shardset.h"

typedef struct kvc_api {
	kvc_registry *reg;
	kvc_shardset *shards;
	kvc_assigner *assigner;
	kvc_query *query;
	kvi_metrics *metrics;
	uint32_t default_dp_size;
	const char *admin_token; /* NULL: the admin paths are open */
} kvc_api;

/* kvc_api_routes routes every endpoint to h, and registers the per-shard
 * metrics collector in api->metrics. api must outlive h. */
kvi_err kvc_api_routes(kvi_httpd *h, kvc_api *api);

#endif /* KVI_COORDINATOR_HTTP_API_H */
