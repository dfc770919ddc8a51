/*
 * kube_watch.h - watch streams: newline-delimited JSON events over a
 * chunked HTTP response.
 *
 * A watch starts with the events it has to catch up on - synthetic ADDED
 * for every matching pod when it asked for no resourceVersion (or "0"),
 * else every retained event after its resourceVersion - then receives the
 * live events the store publishes through the hub. A watch from a
 * resourceVersion older than the store's compacted_rv gets one ERROR event
 * (a 410 Expired Status) and the stream ends, as with the real server.
 *
 * Selectors are applied per event the way the real server's watch cache
 * does: a pod that starts matching is ADDED, one that stops matching is
 * DELETED (its previous state with the event's resourceVersion), a
 * matching pod that changes is MODIFIED. BOOKMARK events carry the current
 * resourceVersion every bookmark_ms when the client allowed them. A stream
 * ends cleanly (terminating chunk) after its timeoutSeconds.
 *
 * Chunking: every event line is one chunk (KUBE_CHUNK_LINE), or is cut in
 * two chunks whose second half follows a few milliseconds later
 * (KUBE_CHUNK_SPLIT), or events are gathered for a short while and sent
 * together as one chunk (KUBE_CHUNK_BATCH). The mode is global and applies
 * to open streams from their next event on.
 *
 * Closing: when the client goes away, libevent's close callback frees the
 * stream; kube_watch_hub_drop shuts every stream's socket down without a
 * terminating chunk (an abrupt close as seen by the client), and the same
 * callback then frees them.
 *
 * Single-threaded: the hub and its streams live on the server's event loop.
 * The hub borrows the store; each stream owns its spec.
 */
#ifndef KVI_KUBEAPI_KUBE_WATCH_H
#define KVI_KUBEAPI_KUBE_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "kube_selector.h"
#include "kube_store.h"

struct event_base;
struct evhttp_request;

typedef enum kube_chunking {
	KUBE_CHUNK_LINE,
	KUBE_CHUNK_SPLIT,
	KUBE_CHUNK_BATCH,
} kube_chunking;

typedef struct kube_watch_spec {
	char *ns;              /* NULL: all namespaces */
	kube_selector *labels; /* NULL: everything */
	kube_selector *fields; /* NULL: everything */
	bool from_now;         /* no resourceVersion or "0": synthetic ADDED */
	uint64_t rv;           /* otherwise: the events after rv */
	bool bookmarks;        /* allowWatchBookmarks=true */
	int timeout_s;         /* timeoutSeconds, > 0 */
} kube_watch_spec;

typedef struct kube_watch_stats {
	uint64_t started; /* streams started (status 200) */
	uint64_t open;    /* streams open now */
	uint64_t events;  /* event lines written, BOOKMARK and ERROR included */
	uint64_t gone;    /* 410 ERROR events */
} kube_watch_stats;

typedef struct kube_watch_hub kube_watch_hub;

/* kube_watch_hub_alloc returns a hub on base over store (both borrowed);
 * connections of finished streams get their timeout set back to
 * http_timeout_s. */
kube_watch_hub *kube_watch_hub_alloc(struct event_base *base, kube_store *store,
				     int bookmark_ms, int http_timeout_s);

/* kube_watch_hub_free forgets every stream without writing to it: the
 * caller then frees the evhttp server, which closes the connections. */
void kube_watch_hub_free(kube_watch_hub *h);

/* kube_watch_start answers req with a 200 stream described by spec (its
 * strings and selectors are taken; spec is zeroed). */
void kube_watch_start(kube_watch_hub *h, struct evhttp_request *req,
		      kube_watch_spec *spec);

/* kube_watch_hub_publish sends ev to every stream it concerns. */
void kube_watch_hub_publish(kube_watch_hub *h, const kube_event *ev);

/* kube_watch_hub_drop closes every open stream abruptly. */
void kube_watch_hub_drop(kube_watch_hub *h);

void kube_watch_hub_set_chunking(kube_watch_hub *h, kube_chunking mode);

void kube_watch_hub_stats(const kube_watch_hub *h, kube_watch_stats *out);

#endif /* KVI_KUBEAPI_KUBE_WATCH_H */
