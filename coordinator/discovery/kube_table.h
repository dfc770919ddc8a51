/*
 * kube_table.h - the pods the Kubernetes watcher has seen, and which of
 * them are registered.
 *
 * The watcher (kube_watch.h) feeds the table with what the API server
 * says - a full list per namespace, then watch events - and asks it for
 * the set of pods to register. The table has no I/O and no clock of its
 * own (callers pass now_ms), so every rule below is unit-tested directly.
 *
 * A pod is registered when its settings are valid (kube_parse.h: a model,
 * good annotations, an IP), it is Ready and it is not terminating. Once
 * registered it stays registered while NotReady for less than grace_ms -
 * a short blip keeps its listeners, their index and their watermarks -
 * and is dropped once it has been NotReady for grace_ms. A terminating or
 * deleted pod is dropped at once. A pod whose IP, ports, model or dp size
 * change is simply a different kvc_pod in the next set: the assigner
 * removes the old listeners and adds the new ones.
 *
 * A relist (the first list, or after 410 Gone) replaces one namespace's
 * pods wholesale: pods the list no longer has are gone (a deletion missed
 * while the watch was down is not lost), pods it still has keep how long
 * they have been NotReady and whether they are registered.
 *
 * Nothing is registered until every namespace has been listed once, so
 * the first set handed to the assigner is complete.
 *
 * Threading: none; the watcher thread owns the table.
 */
#ifndef KVI_COORDINATOR_KUBE_TABLE_H
#define KVI_COORDINATOR_KUBE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube_parse.h"
#include "pod.h"

typedef struct kvc_kube_table kvc_kube_table;

/* kvc_kube_table_alloc makes a table for n_ns namespaces (0..n_ns-1). */
kvc_kube_table *kvc_kube_table_alloc(size_t n_ns, int64_t grace_ms);
void kvc_kube_table_free(kvc_kube_table *t);

/* kvc_kube_table_upsert records pod p (ADDED or MODIFIED) of namespace
 * ns, taking what p owns. */
void kvc_kube_table_upsert(kvc_kube_table *t, size_t ns, kvc_kube_pod *p,
			   int64_t now_ms);

/* kvc_kube_table_delete forgets the pod named key ("ns/name"); false when
 * it was not there. */
bool kvc_kube_table_delete(kvc_kube_table *t, const char *key);

/* kvc_kube_table_replace makes pods[0..n) the whole content of namespace
 * ns (a list), taking what they own, and marks ns listed. */
void kvc_kube_table_replace(kvc_kube_table *t, size_t ns, kvc_kube_pod *pods,
			    size_t n, int64_t now_ms);

/* kvc_kube_table_synced says whether every namespace was listed once. */
bool kvc_kube_table_synced(const kvc_kube_table *t);

/* kvc_kube_table_desired computes the pods to register at now_ms into
 * *pods / *n (borrowed from the table: valid until its next change) and
 * returns true when that set differs from the one it returned last (the
 * first set after the table is synced always counts as different).
 * Returns false with nothing written while not synced. *next_ms is set to
 * the earliest time the set can change by the clock alone (a NotReady
 * grace running out), or -1. */
bool kvc_kube_table_desired(kvc_kube_table *t, int64_t now_ms,
			    const kvc_pod **pods, size_t *n, int64_t *next_ms);

typedef struct kvc_kube_table_stats {
	size_t pods;          /* every pod seen */
	size_t registered;    /* in the last desired set */
	size_t not_ready;     /* registered, NotReady within the grace */
	size_t unregistrable; /* Ready with an IP but bad settings */
} kvc_kube_table_stats;

void kvc_kube_table_stats_get(const kvc_kube_table *t,
			      kvc_kube_table_stats *out);

#endif /* KVI_COORDINATOR_KUBE_TABLE_H */
