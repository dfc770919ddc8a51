/*
 * service.h - the shard's request server: coordinator requests in, answers
 * out, on nng's request/reply wire.
 *
 * A kvn_service listens on tcp:// or ipc:// and speaks the protocol of an
 * nng rep0 socket (common/sp.h), so nng's req0 clients (rpc.h, the
 * coordinator's control path and tools) and the coordinator's own query
 * links (coordinator/query/qlink.h) both talk to it. It is served by `loops`
 * libevent threads of its own rather than through nng: on a small machine
 * every hand-off between nng's poller and task threads is a futex wake-up
 * that costs more than the query it carries. Loop 0 accepts; each
 * connection then belongs to one loop, which reads its requests and
 * answers the kinds named inline (queries, which only take a read lock
 * and probe) on the spot, writing the reply behind them: a query costs no
 * thread hand-off in the shard. Every other request is copied to one of
 * `workers` threads of the service's own: a handler that blocks (LMDB
 * commits, a slow assign) must not hold up a loop, and a slow one never
 * holds up queries behind it. Requests on one connection may be answered
 * out of order; each reply carries its request's id. A connection with 32
 * requests at the workers, or 8 MiB of replies its peer has not read, is
 * not read until they drain.
 *
 * The service owns the envelope (rpc.h): it decodes the request, answers a
 * malformed one with KVI_EPROTO and one of another protocol version with
 * KVI_EVERSION (naming both versions) without calling the handler, a request
 * without a body with KVI_EINVAL, and sets the reply's version. The handler
 * sees only well-formed requests of this version and fills in the response:
 * its code (a kvi_err), its error message when the code is not KVI_OK
 * (kvi_strerror(code) when left NULL) and the body matching the request
 * (none for unassign). A response lacking a required field is replaced by
 * KVI_EINTERNAL, one larger than KVP_MSG_MAX by KVI_ETOOBIG. A frame that
 * is not nng's (a bad hello, a bad length, one over KVP_MSG_MAX, no request
 * id) closes its connection, as nng does, and counts as malformed.
 *
 * Memory: the request and everything the handler hangs on the response live
 * in the thread's arena (strings may also be static), which is reset once the
 * reply is packed; the handler allocates nothing that outlives the call.
 *
 * Threading: the handler runs on a worker thread or, for inline kinds, on
 * a loop thread, concurrently with itself; it must be thread-safe, and for
 * inline kinds it must not block. kvn_service_stats may be called from any
 * thread at any time.
 */
#ifndef KVI_SHARD_SERVICE_H
#define KVI_SHARD_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "error.h"
#include "kvindex.pb-c.h"

/* The most workers a service runs, and its loops. */
#define KVN_WORKERS_MAX   256
#define KVN_LOOPS_MAX     64
#define KVN_LOOPS_DEFAULT 2

typedef struct kvn_service kvn_service;

/* kvn_handler answers req into resp (see above); arena provides the memory
 * for resp's body and strings. */
typedef void (*kvn_handler)(void *arg, const Kvindex__Request *req,
			    Kvindex__Response *resp, kvp_arena *arena);

/* The request kinds, for statistics. */
typedef enum kvn_kind {
	KVN_KIND_ASSIGN = 0,
	KVN_KIND_UNASSIGN,
	KVN_KIND_QUERY,
	KVN_KIND_STATUS,
	KVN_KIND_DUMP,
	KVN_KIND_QUERY_BATCH,
	KVN_KIND_HANDOFF,
	KVN_KIND_ROUTED,
	KVN_KIND_COUNT
} kvn_kind;

/* Counters since start; a snapshot, each counter read atomically. */
typedef struct kvn_stats {
	uint64_t requests[KVN_KIND_COUNT];   /* handed to the handler */
	uint64_t errors[KVN_KIND_COUNT];     /* of those, answered code != 0 */
	uint64_t handler_us[KVN_KIND_COUNT]; /* time spent in the handler */
	uint64_t malformed;          /* undecodable requests, answered EPROTO */
	uint64_t version_mismatches; /* answered EVERSION */
	uint64_t no_body;            /* answered EINVAL */
	uint64_t bad_responses; /* handler responses replaced by an error */
	uint64_t send_failures; /* replies that could not be sent */
} kvn_stats;

/* How a service is started. */
typedef struct kvn_service_opts {
	const char *url;       /* "tcp://host:port" (port 0: any), "ipc:///p" */
	int workers;           /* 1..KVN_WORKERS_MAX */
	int loops;             /* 1..KVN_LOOPS_MAX; 0: KVN_LOOPS_DEFAULT */
	unsigned inline_kinds; /* bit 1 << kind: answered on the loops */
} kvn_service_opts;

/* kvn_service_open listens on o->url (host "*" or empty: every address;
 * see kvn_service_port for the port picked) and starts the workers and
 * loops, which answer requests with handler(arg, ...). Returns KVI_EINVAL
 * for a malformed url, an address this host cannot bind or a bad count;
 * KVI_EIO when the address is in use or a thread cannot start; with a
 * message in err (may be NULL). *out is written only on success. */
kvi_err kvn_service_open(const kvn_service_opts *o, kvn_handler handler,
			 void *arg, kvn_service **out, char *err,
			 size_t errlen);

/* kvn_service_open_url is kvn_service_open of url with workers workers,
 * the default loops and no kind inline. */
kvi_err kvn_service_open_url(const char *url, int workers, kvn_handler handler,
			     void *arg, kvn_service **out, char *err,
			     size_t errlen);

/* kvn_service_port returns the TCP port svc listens on (the one picked when
 * the url asked for port 0), or 0 for another transport. */
int kvn_service_port(const kvn_service *svc);

/* kvn_service_free stops accepting and reading requests, waits for the
 * handlers in progress to return, gives their replies and those already
 * written up to a second to leave, closes every connection and the socket
 * (removing an ipc path) and frees svc. NULL is a no-op. Must not be called
 * from a handler. */
void kvn_service_free(kvn_service *svc);

/* kvn_service_stats copies svc's counters into *out (the shard exports
 * them as kvindex_shard_rpc_*). */
void kvn_service_stats(kvn_service *svc, kvn_stats *out);

/* kvn_kind_name returns "assign", "unassign", "query", "status", "dump"
 * or "query_batch", for metric labels. */
const char *kvn_kind_name(kvn_kind kind);

#endif /* KVI_SHARD_SERVICE_H */
