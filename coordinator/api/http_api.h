/*
 * http_api.h - the coordinator's HTTP routes (docs/api.md#summary): /query,
 * /query_by_hash, /register, /unregister, /workers, /health, /ready,
 * /metrics, /leader and the admin paths.
 *
 * A query's body is parsed here (api_json.h) and the request handed to
 * the query path (query.h), which answers once the shards have.
 * Registration and unregistration are handed to the assigner, which
 * answers from its thread; the rest is answered on the loop thread from
 * the registry and the shard set.
 *
 * Tokens. Every /admin path needs "Authorization: Bearer <admin token>"
 * when the coordinator has one; /register and /unregister need the
 * registration token or the admin token when it has either (a
 * registration makes shards dial the address it names and fetch from it).
 * No header, or not a bearer token, is 401; a wrong token 403. Tokens are
 * compared in time that does not depend on where they differ.
 *
 * Replicas. With leader election (lease.h), writes - /register,
 * /unregister and every /admin path - are the leader's: a follower answers
 * them 307 Temporary Redirect to the same path on the leader's URL (the
 * method and body are to be sent again there; curl -L, Go and Python
 * clients follow it), or 503 with Retry-After while no replica leads. A
 * follower checks the token first, as the leader does again: a write
 * without the right token is refused where it arrives, and the leader's
 * address goes only to those that may write. Clients drop Authorization
 * on a redirect to another host or port unless told to keep it (curl
 * --location-trusted), so a client with a token sends its writes to the
 * leader (GET /leader names it) or sends the token again. Queries,
 * /workers, /health, /ready and /metrics are answered by every replica.
 * GET /leader says who leads (docs/api.md#get-leader).
 */
#ifndef KVI_COORDINATOR_HTTP_API_H
#define KVI_COORDINATOR_HTTP_API_H

#include <stdint.h>

#include "assigner.h"
#include "httpd.h"
#include "lease.h"
#include "metrics.h"
#include "query.h"
#include "registry.h"
#include "routed.h"
#include "shardset.h"

struct kvc_api;

/* The longest admin or registration token accepted, in bytes. */
#define KVC_TOKEN_MAX 4096

/* Which token a write needs. */
typedef enum kvc_api_auth {
	KVC_AUTH_ADMIN = 0, /* the admin token */
	KVC_AUTH_REGISTER,  /* the registration token or the admin token */
} kvc_api_auth;

/* A route that only the leader serves (filled by kvc_api_routes). */
typedef struct kvc_write_route {
	struct kvc_api *api;
	kvi_http_handler fn;
	kvc_api_auth auth;
} kvc_write_route;

#define KVC_API_ROUTES 16

typedef struct kvc_api {
	kvc_registry *reg;
	kvc_shardset *shards;
	kvc_assigner *assigner;
	kvc_query *query;
	kvc_routed *routed; /* POST /routed */
	kvi_metrics *metrics;
	uint32_t default_dp_size;
	const char *admin_token;    /* NULL: the admin paths are open */
	const char *register_token; /* NULL: only the admin token, if any */
	kvc_lease *lease;           /* NULL: no leader election, always leads */
	const char *identity;       /* this replica, for GET /leader */
	kvc_write_route writes[KVC_API_ROUTES];
} kvc_api;

/* kvc_api_routes routes every endpoint to h, and registers the per-shard
 * metrics collector in api->metrics. api must outlive h. */
kvi_err kvc_api_routes(kvi_httpd *h, kvc_api *api);

#endif /* KVI_COORDINATOR_HTTP_API_H */
