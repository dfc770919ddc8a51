/*
 * kube_store.h - the pods of the test API server, their resourceVersions
 * and the watch history.
 *
 * The store plays the part of etcd behind a real API server: one global
 * resourceVersion counter, incremented by every change; pods keyed
 * "namespace/name" and kept in key order (etcd's order, which lists
 * return); a uid per pod, kept across updates and new when a pod is
 * re-created; and a history of changes that watches replay. A change that
 * leaves a pod exactly as it was is a no-op, as for a real update: no new
 * resourceVersion, no event.
 *
 * compacted_rv is the oldest resourceVersion a watch may start from: every
 * event after it is retained. The history keeps at most KUBE_HISTORY_MAX
 * events (older ones are dropped, raising compacted_rv), kube_store_compact
 * forgets all of it, and a restored store starts with compacted_rv = its
 * resourceVersion. List snapshots (for paginated lists) are whole pod
 * arrays kept by resourceVersion; they are dropped when compacted.
 *
 * Stored pod objects are immutable once stored and shared by reference
 * (snapshots, events, replies): callers must never modify them. They
 * carry no kind/apiVersion (list items do not); writers add them where the
 * real server does.
 *
 * Single-threaded: the server's event loop owns the store.
 */
#ifndef KVI_KUBEAPI_KUBE_STORE_H
#define KVI_KUBEAPI_KUBE_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define KUBE_HISTORY_MAX   10000
#define KUBE_SNAPSHOTS_MAX 64

typedef enum kube_event_type {
	KUBE_ADDED,
	KUBE_MODIFIED,
	KUBE_DELETED,
} kube_event_type;

typedef struct kube_event {
	uint64_t rv;
	kube_event_type type;
	/* The pod after the change; for KUBE_DELETED its last state carrying
	 * the deletion's resourceVersion. */
	json_t *obj;
	/* The pod before the change; NULL for KUBE_ADDED. */
	json_t *prev;
} kube_event;

/* Called after every change with the new event (borrowed). */
typedef void (*kube_store_listener)(void *arg, const kube_event *ev);

typedef struct kube_store kube_store;

kube_store *kube_store_alloc(void);
void kube_store_free(kube_store *s);

void kube_store_set_listener(kube_store *s, kube_store_listener fn, void *arg);

uint64_t kube_store_rv(const kube_store *s);
uint64_t kube_store_compacted_rv(const kube_store *s);

/* kube_store_put creates or replaces pod ns/name from body (a pod object,
 * borrowed: copied) and writes the stored pod into *stored (borrowed,
 * valid until the next change). metadata.name, namespace, uid,
 * resourceVersion and creationTimestamp are the server's; kind and
 * apiVersion are dropped. Returns KVI_EINVAL when body or its metadata is
 * not an object. */
kvi_err kube_store_put(kube_store *s, const char *ns, const char *name,
		       const json_t *body, const json_t **stored);

/* kube_store_delete deletes pod ns/name and writes its last state, with
 * the deletion's resourceVersion, into *last (borrowed, valid until the
 * next change). Returns KVI_ENOENT when there is no such pod. */
kvi_err kube_store_delete(kube_store *s, const char *ns, const char *name,
			  const json_t **last);

/* kube_store_get returns pod ns/name (borrowed) or NULL. */
const json_t *kube_store_get(const kube_store *s, const char *ns,
			     const char *name);

/* kube_store_pods returns a new array (json_decref) holding every pod in
 * key order. */
json_t *kube_store_pods(const kube_store *s);

/* kube_store_events returns the retained history, oldest first (borrowed,
 * valid until the next change or compaction), and its length in *n. */
const kube_event *kube_store_events(const kube_store *s, size_t *n);

/* kube_store_compact forgets every event and snapshot: compacted_rv
 * becomes the current resourceVersion. */
void kube_store_compact(kube_store *s);

/* kube_store_snapshot_add keeps pods (an array from kube_store_pods at the
 * current resourceVersion; a reference is taken) for later pages of a
 * list. The oldest snapshot goes when KUBE_SNAPSHOTS_MAX are kept. */
void kube_store_snapshot_add(kube_store *s, json_t *pods);

/* kube_store_snapshot returns the pods kept at rv (borrowed) or NULL. */
const json_t *kube_store_snapshot(const kube_store *s, uint64_t rv);

/* kube_store_dump returns {"resourceVersion": "N", "pods": [...]}, a new
 * value (json_decref). */
json_t *kube_store_dump(const kube_store *s);

/* kube_store_restore loads a dump into an empty store; compacted_rv
 * becomes the loaded resourceVersion. Returns KVI_ECORRUPT when state is
 * not a valid dump (the store is then left empty) and KVI_EEXIST when the
 * store is not empty. */
kvi_err kube_store_restore(kube_store *s, const json_t *state);

/* kube_pod_key writes "namespace/name" of pod into buf (size bytes). */
void kube_pod_key(const json_t *pod, char *buf, size_t size);

/* kube_pod_rv returns the resourceVersion of pod, 0 if it has none. */
uint64_t kube_pod_rv(const json_t *pod);

#endif /* KVI_KUBEAPI_KUBE_STORE_H */
