/*
 * kube_watch.h - the Kubernetes pod watcher
 * (docs/design.md#discovery-and-registration, source 1;
 * docs/wire.md#kubernetes-pod-watch): list, then watch, per namespace, and hand
 * the coordinator the full set of pods to register each time it changes.
 *
 * One thread drives every namespace's requests through one libcurl multi
 * handle. Each namespace runs this state machine:
 *
 *   LIST     GET .../pods?labelSelector=..&limit=N, following continue
 *            tokens; the pages are one snapshot at the list's
 *            resourceVersion. The whole list replaces what the table had
 *            for the namespace (kube_table.h), so changes made while the
 *            watcher was away - deletions included - are all seen.
 *   WATCH    GET .../pods?watch=1&resourceVersion=RV&allowWatchBookmarks=
 *            true&timeoutSeconds=T: a chunked stream of events, parsed as
 *            bytes arrive (kube_parse.h). Every event and bookmark moves
 *            RV on. A stream that ends (the server's timeout) or breaks
 *            (a dropped connection, an API server restart) is watched
 *            again from RV; an ERROR event or an HTTP answer with code 410
 *            Gone (RV too old) sends the namespace back to LIST.
 *   BACKOFF  after an API error (401/403/5xx, a refused connection, a bad
 *            answer): wait, doubling from backoff_min_ms to backoff_max_ms
 *            with jitter, then retry what failed. Each failure is logged
 *            with what the API server said; 401 and 403 say to check the
 *            token and the RBAC rules.
 *
 * The token file is read again for every request, so a rotated service
 * account token is picked up. After every batch of changes, and when a
 * NotReady grace runs out, the table's desired set is compared with the
 * last one delivered and, when it differs, handed to the callback: the
 * assigner diffs it against the registry (kvc_assigner_sync), so a relist
 * never registers a pod twice. Nothing is delivered before every
 * namespace's first list: /ready waits for it.
 *
 * Threading: the callback runs on the watcher thread; the pods it is
 * given are valid only during the call. kvc_kube_watch_free() waits for
 * the thread. Stats may be read from any thread.
 */
#ifndef KVI_COORDINATOR_KUBE_WATCH_H
#define KVI_COORDINATOR_KUBE_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "kube_config.h"
#include "kube_parse.h"
#include "metrics.h"
#include "pod.h"

/* The set of pods to register: the full set, each time it changes. */
typedef void (*kvc_kube_cb)(void *arg, const kvc_pod *pods, size_t n);

typedef struct kvc_kube_watch kvc_kube_watch;

typedef struct kvc_kube_stats {
	uint64_t lists;        /* complete lists */
	uint64_t watches;      /* watch requests answered 200 */
	uint64_t relists;      /* lists forced by 410 Gone */
	uint64_t events;       /* watch events applied */
	uint64_t errors;       /* failed requests */
	uint64_t unauthorized; /* 401 and 403 answers */
	uint64_t syncs;        /* sets handed to the callback */
	bool synced;           /* every namespace listed once */
	size_t pods, registered, not_ready, unregistrable;
	char last_error[256];
} kvc_kube_stats;

/* kvc_kube_watch_open starts the watcher (cfg resolved; copied),
 * registers its metrics in m (may be NULL). Returns KVI_EIO when libcurl
 * or the thread cannot start. */
kvi_err kvc_kube_watch_open(const kvc_kube_config *cfg, kvi_metrics *m,
			    kvc_kube_cb cb, void *arg, kvc_kube_watch **out,
			    char *err, size_t errlen);

/* kvc_kube_watch_free stops the thread and frees w; NULL is allowed. */
void kvc_kube_watch_free(kvc_kube_watch *w);

void kvc_kube_watch_stats(kvc_kube_watch *w, kvc_kube_stats *out);

#endif /* KVI_COORDINATOR_KUBE_WATCH_H */
