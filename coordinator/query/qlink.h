/*
 * qlink.h - one HTTP loop's own connection to one shard, for queries.
 *
 * A shard serves requests on nng's rep0 wire (shard/rpc/service.h). nng's
 * client (rpc.h) runs every call through nng's threads: the caller hands
 * the message to a task thread that writes it, nng's poller reads the
 * reply, and a task thread completes the call, which for a query then hands the
 * answer back to the HTTP loop that must write it. Each hand-off is a futex
 * wake-up, and on a small machine they cost more CPU than the query itself. A
 * kvc_qlink speaks the same protocol from the loop thread, through libevent:
 * the query is written, its reply read and merged and the HTTP answer written,
 * all on the thread that parsed the request.
 *
 * The wire is nng's req0 (common/sp.h): each request goes out with a
 * request id of the link's own, which the reply carries back.
 *
 * A link dials in the background and redials with back-off (50 ms doubling
 * to 1 s) whenever the connection fails; it is ready once both handshakes
 * are through. A host name is resolved through evdns and its addresses (8
 * at most) are tried in turn, the next at once when one fails; it is
 * resolved again once every one has failed, or a connection was lost (a
 * shard's pod may have moved). Calls behave like
 * kvp_call_async: each has a deadline, a reply that comes after it is
 * dropped, a call in flight when the connection fails ends with
 * KVI_EUNREACHABLE, and done runs exactly once, always from an event of
 * the loop (never inside kvc_qlink_call).
 *
 * Threading: a link belongs to the thread that runs its event_base; every
 * function is called there.
 */
#ifndef KVI_COORDINATOR_QLINK_H
#define KVI_COORDINATOR_QLINK_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "rpc.h"

struct event_base;
struct evdns_base;

typedef struct kvc_qlink kvc_qlink;

/* kvc_qlink_open starts dialing url ("tcp://host:port" or "ipc:///path")
 * on base; dns resolves host names (may be NULL: numeric hosts only).
 * Returns NULL for a URL it cannot dial. */
kvc_qlink *kvc_qlink_open(struct event_base *base, struct evdns_base *dns,
			  const char *url);

/* kvc_qlink_close ends the calls in flight with KVI_ECLOSED (their
 * callbacks run before it returns) and frees l. NULL is a no-op. */
void kvc_qlink_close(kvc_qlink *l);

/* kvc_qlink_ready says whether l is connected and past the handshake. */
bool kvc_qlink_ready(const kvc_qlink *l);

/* kvc_qlink_inflight returns how many of l's calls await their reply. */
size_t kvc_qlink_inflight(const kvc_qlink *l);

/* kvc_qlink_url returns the URL l dials. */
const char *kvc_qlink_url(const kvc_qlink *l);

/* kvc_qlink_call sends req (packed before it returns) and calls done
 * with the reply, as kvp_call_async does. Returns KVI_EUNREACHABLE when l
 * is not ready, KVI_ECLOSED while it closes, KVI_EINVAL or KVI_ETOOBIG for
 * a request that does not pack; then nothing was sent and done is never
 * called. */
kvi_err kvc_qlink_call(kvc_qlink *l, const Kvindex__Request *req,
		       int timeout_ms, kvp_call_done done, void *arg);

/* kvc_qlink_call_fn is kvc_qlink_call for kvc_qbatch_alloc_via. */
kvi_err kvc_qlink_call_fn(void *link, const Kvindex__Request *req,
			  int timeout_ms, kvp_call_done done, void *arg);

#endif /* KVI_COORDINATOR_QLINK_H */
