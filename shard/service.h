/*
 * service.h - the shard's request server: coordinator requests in over nng,
 * answers out.
 *
 * A kvs_service listens with an nng rep0 socket through `workers` + 8
 * slots, each one nng context driven by its aio's callback: receive a
 * request, answer it, send the reply, receive the next. Requests of the
 * kinds named inline (queries, which only take a read lock and probe) are
 * answered in that callback, on the nng thread that received them, so a
 * query costs no thread hand-off in the shard. Every other request goes to
 * one of `workers` threads of the service's own: a handler that blocks
 * (LMDB commits, a slow assign) must not occupy nng's shared task threads,
 * and a slow one never holds up queries behind it, which keep flowing
 * through the other slots.
 *
 * The service owns the envelope (rpc.h): it decodes the request, answers a
 * malformed one with KVI_EPROTO and one of another protocol version with
 * KVI_EVERSION (naming both versions) without calling the handler, a request
 * without a body with KVI_EINVAL, and sets the reply's version. The handler
 * sees only well-formed requests of this version and fills in the response:
 * its code (a kvi_err), its error message when the code is not KVI_OK
 * (kvi_strerror(code) when left NULL) and the body matching the request
 * (none for unassign). A response lacking a required field is replaced by
 * KVI_EINTERNAL, one larger than KVP_MSG_MAX by KVI_ETOOBIG.
 *
 * Memory: the request and everything the handler hangs on the response live
 * in the worker's arena (strings may also be static), which is reset once the
 * reply is packed; the handler allocates nothing that outlives the call.
 *
 * Threading: the handler runs on a worker thread or, for inline kinds, on
 * an nng thread, concurrently with itself; it must be thread-safe, and for
 * inline kinds it must not block. kvs_service_stats may be called from any
 * thread at any time.
 */
#ifndef KVI_SHARD_SERVICE_H
#define KVI_SHARD_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "error.h"
#include "kvindex.pb-c.h"

/* The most workers a service runs. */
#define KVS_WORKERS_MAX 256

typedef struct kvs_service kvs_service;

/* kvs_handler answers req into resp (see above); arena provides the memory
 * for resp's body and strings. */
typedef void (*kvs_handler)(void *arg, const Kvindex__Request *req,
			    Kvindex__Response *resp, kvp_arena *arena);

/* The request kinds, for statistics. */
typedef enum kvs_kind {
	KVS_KIND_ASSIGN = 0,
	KVS_KIND_UNASSIGN,
	KVS_KIND_QUERY,
	KVS_KIND_STATUS,
	KVS_KIND_DUMP,
	KVS_KIND_QUERY_BATCH,
	KVS_KIND_HANDOFF,
	KVS_KIND_COUNT
} kvs_kind;

/* Counters since start; a snapshot, each counter read atomically. */
typedef struct kvs_stats {
	uint64_t requests[KVS_KIND_COUNT];   /* handed to the handler */
	uint64_t errors[KVS_KIND_COUNT];     /* of those, answered code != 0 */
	uint64_t handler_us[KVS_KIND_COUNT]; /* time spent in the handler */
	uint64_t malformed;          /* undecodable requests, answered EPROTO */
	uint64_t version_mismatches; /* answered EVERSION */
	uint64_t no_body;            /* answered EINVAL */
	uint64_t bad_responses; /* handler responses replaced by an error */
	uint64_t send_failures; /* replies that could not be sent */
} kvs_stats;

/* kvs_service_start listens on url (e.g. "tcp://0.0.0.0:7001"; a tcp port
 * of 0 picks a free port, see kvs_service_port) and starts workers
 * (1..KVS_WORKERS_MAX) threads that answer requests with handler(arg, ...).
 * Returns KVI_EINVAL for a malformed url, an address this host cannot bind
 * or a bad worker count; KVI_EIO when the address is in use or a thread
 * cannot start; with a message in err (may be NULL). *out is written only
 * on success. */
kvi_err kvs_service_start(const char *url, int workers, kvs_handler handler,
			  void *arg, kvs_service **out, char *err,
			  size_t errlen);

/* kvs_service_start_inline is kvs_service_start with the kinds of the
 * bit mask inline_kinds (bit 1 << kind) answered on the nng thread that
 * received them rather than by a worker: for handlers that never block
 * (queries), it saves the two thread wake-ups a worker costs per
 * request. */
kvi_err kvs_service_start_inline(const char *url, int workers,
				 unsigned inline_kinds, kvs_handler handler,
				 void *arg, kvs_service **out, char *err,
				 size_t errlen);

/* kvs_service_port returns the TCP port svc listens on (the one picked when
 * the url asked for port 0), or 0 for another transport. */
int kvs_service_port(const kvs_service *svc);

/* kvs_service_free stops receiving requests, waits for the handlers in
 * progress to return, aborts the replies not yet sent, closes the socket
 * and frees svc. NULL is a no-op. Must not be called from a handler. */
void kvs_service_free(kvs_service *svc);

/* kvs_service_stats copies svc's counters into *out (the shard exports
 * them as kvindex_shard_rpc_*). */
void kvs_service_stats(kvs_service *svc, kvs_stats *out);

/* kvs_kind_name returns "assign", "unassign", "query", "status", "dump"
 * or "query_batch", for metric labels. */
const char *kvs_kind_name(kvs_kind kind);

#endif /* KVI_SHARD_SERVICE_H */
