/*
 * assigner.h - the coordinator's single writer of listener ownership.
 *
 * One thread, the assigner, decides which shard owns each listener and
 * tells the shards. Everything that changes ownership reaches it as a
 * command on its queue - an HTTP /register or /unregister, the full pod
 * set of a discovery source (the static file, Kubernetes) - and the rest
 * happens on its tick (every tick_ms, and at once after a command):
 *
 *  1. Poll. Every shard is asked for its status, in parallel. A shard that
 *     answers is up; what it reports tells which listeners it owns, in
 *     what state. Those states are what /workers shows. A shard that
 *     missed a poll is not waited for again: it is probed in the
 *     background, and polled with the others once a probe is answered, so
 *     that a dead shard delays no tick and no command. The owners found
 *     here tell the registry which shards each model's queries ask.
 *  2. Adopt. A listener a shard already owns with the same spec is simply
 *     recorded as owned: this is how a restarted coordinator finds its
 *     assignments again without making any shard re-ingest anything. A
 *     shard owning a listener under another spec (a pod whose IP changed
 *     while the coordinator was away) is told to drop it.
 *  3. Register. Listeners no shard owns are assigned, a registration unit
 *     (a named pod, or one rank registered on its own) at a time and all
 *     or nothing: each listener goes to the shard rendezvous hashing picks
 *     (rendezvous.h); if any of the unit's shards is down or refuses, the
 *     listeners this attempt did assign are unassigned again and the unit
 *     is retried later with exponential backoff (retry_min_ms doubling to
 *     retry_max_ms). No pod is ever left half-subscribed.
 *  4. Converge. A listener owned by a shard other than the one hashing
 *     picks (a shard added to --shards, a shard back from a failover) is
 *     assigned to the picked shard as well; once that shard reports it
 *     active, the other owners are told to drop it. Queries see it
 *     throughout; while two shards own it the merge keeps the longer match.
 *  5. Fail over. A shard that has not answered for failover_grace_ms is
 *     no longer eligible: its listeners are assigned to the shards hashing
 *     now picks, which rebuild them from the engines. Until a stand-in
 *     reports a listener active, the silent shard stays its owner (moving
 *     to the stand-in), so that queries that lack it say partial. If it
 *     comes back it is eligible again, is picked again, resumes from its
 *     LMDB, and the stand-ins drop the listeners once it is active.
 *  6. Clean up. Once every discovery source has delivered its first full
 *     pod set, a listener a shard owns that no source knows is dropped
 *     from that shard (it was removed while the shard was away).
 *
 * Removing a pod (a source no longer lists it, or /unregister) removes it
 * from the registry and unassigns its listeners from every shard owning
 * them, which deletes their blocks from memory and disk. A pod whose IP or
 * ports changed is removed and added again.
 *
 * Replicas: with a lease (kvc_assigner_set_lease), only the leader
 * commands shards (steps 3-6, and commands); a follower runs steps 1 and 2
 * on every tick, so that its registry knows the owners and states the
 * leader's work produced, and answers /workers and queries alike. HTTP
 * registrations travel with their listeners to the shards (adopt_http.c);
 * the shard set, pins, drains and registrations no shard holds yet travel
 * in the Lease (share.c).
 *
 * Durability: pods registered over HTTP are written to the coordinator
 * store (cstore.h) before they are acknowledged, and loaded from it at
 * start, since no source can give them back; everything else is
 * re-derived. While the store cannot commit (a full disk), /ready says
 * so and the ticks probe it, once a second, until it commits again.
 *
 * Threading: the functions below may be called from any thread. Command
 * results come back through a callback on the assigner thread.
 */
#ifndef KVI_COORDINATOR_ASSIGNER_H
#define KVI_COORDINATOR_ASSIGNER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cstore.h"
#include "lease.h"
#include "metrics.h"
#include "pod.h"
#include "registry.h"
#include "shardset.h"

typedef struct kvc_assigner_config {
	int tick_ms;           /* 0: 500 */
	int poll_timeout_ms;   /* status poll deadline; 0: 1000 */
	int rpc_timeout_ms;    /* assign / unassign deadline; 0: 3000 */
	int failover_grace_ms; /* 0: 60000; negative: never fail over */
	int retry_min_ms;      /* registration retry backoff; 0: 500 */
	int retry_max_ms;      /* 0: 30000 */
	int max_in_flight;     /* assign/unassign calls at once; 0: 64 */
	int ready_stale_ms;    /* /ready: a shard must have answered this
				  recently; 0: 3 * tick + poll timeout */
	/* the sources that will deliver pod sets (bits 1 << kvc_source),
	 * known before the first tick: /ready waits for the first set of
	 * each, and until then no listener a shard owns is dropped as
	 * listed by no source */
	unsigned expect_sources;
	/* a listener's other owners are let go only once its owner has been
	 * in its model's query route this long, so that no query still in
	 * flight asked the others alone: the query deadline and a tick (for
	 * a replica's routes); 0: at once */
	int route_settle_ms;
	/* a model whose queries matched nothing this long while its
	 * listeners hold blocks is reported (kvc_reg_models_check); 0:
	 * never */
	int unmatched_window_ms;
} kvc_assigner_config;

typedef struct kvc_assigner kvc_assigner;

/* The outcome of a command: an HTTP status and a JSON body (a new
 * reference the callee takes). Runs on the assigner thread. */
typedef void (*kvc_assigner_done)(void *arg, int status, json_t *body);

/* kvc_assigner_open loads the HTTP registrations from store (may be
 * NULL: nothing is persisted), registers metrics in m (may be NULL) and
 * starts the thread. Returns KVI_ECORRUPT when the store cannot be read;
 * err says what. */
kvi_err kvc_assigner_open(kvc_registry *reg, kvc_shardset *shards,
			  kvc_cstore *store, kvi_metrics *m,
			  const kvc_assigner_config *cfg, kvc_assigner **out,
			  char *err, size_t errlen);

/* kvc_assigner_set_lease makes a follow the lease l (lease.h): it
 * commands shards only while l says it leads, with l's term on every
 * request, and otherwise only polls the shards to learn who owns what
 * (what /workers and queries need). Call before traffic; without it the
 * assigner leads alone. */
void kvc_assigner_set_lease(kvc_assigner *a, kvc_lease *l);

/* kvc_assigner_free stops the thread (commands still queued are answered
 * 503) and frees a. NULL is a no-op. */
void kvc_assigner_free(kvc_assigner *a);

/* kvc_assigner_register registers p (valid, source KVC_SOURCE_HTTP): 201
 * when all its listeners are assigned, 200 when the same pod was
 * registered already, 202 when a shard is down or refused (nothing stays
 * assigned; the assigner retries with backoff and the body says why), 409
 * when a rank or an endpoint is registered already or the model's block
 * size differs, 400 when its dp_size is over the cap; when it cannot be
 * persisted, 507 for a full disk, 503 for a store failing otherwise (and
 * nothing is kept). p is copied. */
void kvc_assigner_register(kvc_assigner *a, const kvc_pod *p,
			   kvc_assigner_done done, void *arg);

/* kvc_assigner_unregister removes a named pod (name non-NULL) or the ranks
 * of an instance (rank < 0: all; model, when non-NULL, must be the
 * instance's): 200 with the keys removed, 404 when nothing matched, 409
 * for a pod that a discovery source (not HTTP) lists. */
void kvc_assigner_unregister(kvc_assigner *a, const char *name, uint64_t id,
			     int rank, const char *model,
			     kvc_assigner_done done, void *arg);

/* kvc_assigner_sync hands over the complete pod set of source (copied):
 * pods it no longer lists are removed, new or changed ones added. */
void kvc_assigner_sync(kvc_assigner *a, kvc_source source, const kvc_pod *pods,
		       size_t n);

/* kvc_assigner_ready says whether every expected source has synced, the
 * store commits (cstore.h: kvc_cstore_failing) and every shard answered
 * recently; when not, why says what is missing. */
bool kvc_assigner_ready(kvc_assigner *a, char *why, size_t len);

#endif /* KVI_COORDINATOR_ASSIGNER_H */
