/*
 * lease.h - leader election among coordinator replicas with a Kubernetes
 * Lease (coordination.k8s.io/v1), with the semantics of client-go's
 * leaderelection package.
 *
 * One thread per replica tries every retry period to acquire or renew the
 * Lease: it reads it, and writes it back with its own identity, always by
 * an update that carries the resourceVersion it read (a 409 Conflict means
 * another replica wrote meanwhile: nothing is taken, the next try reads
 * again). A Lease held by another identity is taken over only once its
 * record has stayed unchanged for the holder's leaseDurationSeconds, as
 * measured by this replica's own monotonic clock from the moment it first
 * saw that record (clocks of different machines are never compared); a
 * follower tries again at that moment when it comes before its next
 * (jittered) retry. A
 * change of holder increments leaseTransitions and sets acquireTime; every
 * write sets renewTime. A leader that has not renewed within the renew
 * deadline (counted from the start of its last successful renewal, which
 * is before the write took effect) stops leading at once: kvc_lease_leading
 * reads the clock itself, so even a renewal stuck in a hung request ends
 * leadership on time. The renew deadline is below the lease duration, so
 * a paused or partitioned leader has stopped before any follower may take
 * over. At a clean stop a leader releases the Lease (empty holder, 1 s
 * duration) so that a follower takes over at its next try.
 *
 * The term of a leadership is the Lease's leaseTransitions when it was
 * acquired, plus one (so that it is never 0, which is a coordinator
 * without leader election); every command the leader sends to a shard carries
 * it, and a shard refuses commands of a term older than the newest it has seen
 * (fencing: a leader that wakes from a pause cannot undo its successor's
 * work). The leader also writes its HTTP address into the annotation
 * kvindex.io/leader-url, which followers use to redirect writes to it.
 *
 * Threading: kvc_lease_leading and kvc_lease_view may be called from any
 * thread; start, stop and free by the owner.
 */
#ifndef KVI_COORDINATOR_LEASE_H
#define KVI_COORDINATOR_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "metrics.h"

#define KVC_LEASE_URL_ANNOTATION     "kvindex.io/leader-url"
#define KVC_LEASE_SHARDS_ANNOTATION  "kvindex.io/shards"
#define KVC_LEASE_PINS_ANNOTATION    "kvindex.io/pins"
#define KVC_LEASE_DRAINS_ANNOTATION  "kvindex.io/drains"
#define KVC_LEASE_PENDING_ANNOTATION "kvindex.io/pending"
#define KVC_LEASE_IDENTITY_MAX       256
#define KVC_LEASE_URL_MAX            512

typedef struct kvc_lease_config {
	const char *api;        /* API server base URL */
	const char *token_file; /* NULL: no token */
	const char *ca_file;    /* NULL: the system's CAs */
	const char *ns, *name;  /* the Lease */
	const char *identity;   /* this replica; unique among replicas */
	const char *url;        /* this replica's HTTP base URL; NULL: not
				   known yet (kvc_lease_set_url) */
	int lease_duration_ms;  /* 0: 15000 */
	int renew_deadline_ms;  /* 0: 10000; below the lease duration */
	int retry_period_ms;    /* 0: 2000; below the renew deadline */
} kvc_lease_config;

typedef struct kvc_lease kvc_lease;

/* kvc_lease_open checks cfg (KVI_EINVAL, err says why) and starts the
 * election thread; metrics go to m (may be NULL). */
kvi_err kvc_lease_open(const kvc_lease_config *cfg, kvi_metrics *m,
		       kvc_lease **out, char *err, size_t errlen);

/* kvc_lease_stop ends the thread, releasing the Lease when this replica
 * holds it; kvc_lease_leading is false from then on. NULL is a no-op. */
void kvc_lease_stop(kvc_lease *l);

/* kvc_lease_free frees a stopped elector. NULL is a no-op. */
void kvc_lease_free(kvc_lease *l);

/* kvc_lease_leading says whether this replica leads now, and then sets
 * *term (may be NULL) to its term. */
bool kvc_lease_leading(kvc_lease *l, uint64_t *term);

/* kvc_lease_set_url sets the URL this replica writes into the Lease
 * while it leads (once its HTTP port is known). */
void kvc_lease_set_url(kvc_lease *l, const char *url);

/* kvc_lease_share sets the annotation name to value (NULL: no longer
 * written by this replica) in what this replica writes into the Lease
 * while it leads: the state a leader shares with its followers and its
 * successor (KVC_LEASE_SHARDS_ANNOTATION and the others below). A change
 * is written at once, not at the next renewal. The annotations a replica
 * does not set are written back as it read them, so the state of the
 * leader before it survives until it sets its own. kvc_lease_shared
 * returns the value of annotation name in the Lease as last seen, or
 * NULL; the caller frees it. */
void kvc_lease_share(kvc_lease *l, const char *name, const char *value);
char *kvc_lease_shared(kvc_lease *l, const char *name);

/* What GET /leader shows. */
typedef struct kvc_lease_view {
	char identity[KVC_LEASE_IDENTITY_MAX];
	char holder[KVC_LEASE_IDENTITY_MAX]; /* "": nobody holds it, or its
						record was not renewed for
						its duration */
	char holder_url[KVC_LEASE_URL_MAX];  /* "": not known */
	bool is_leader;
	uint64_t epoch; /* the holder's term: leaseTransitions + 1 as last
			   seen; 0 before the Lease was read */
} kvc_lease_view;

void kvc_lease_view_get(kvc_lease *l, kvc_lease_view *v);

#endif /* KVI_COORDINATOR_LEASE_H */
