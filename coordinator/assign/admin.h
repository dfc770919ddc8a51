/*
 * admin.h - rebalancing: the operations behind the admin API
 * (docs/api.md#admin), run on the assigner thread.
 *
 * None of them moves a listener itself. Each changes what the assigner's
 * tick aims at - the set of shards, which of them are eligible, the pins
 * - and the tick's converge step does the hand-off as it does for any
 * listener whose owner is not the shard hashing picks: the new shard is
 * assigned the listener and takes its state from the old owner
 * (shard/ingest/handoff.c; from the engine, by replay or /kv_recover, when
 * the old owner cannot give it), queries keep seeing the old owner's
 * answer meanwhile (the merge keeps the longer match), and the old owner
 * drops it once the new one reports it active. So a hand-off never leaves
 * a listener unowned.
 *
 *  - Adding a shard (kvc_admin_add_shard) makes it a candidate for every
 *    key: about 1/N of the listeners move to it. It is kept in the
 *    coordinator store, so a restarted coordinator still has it.
 *  - Draining a shard (kvc_admin_drain_shard) makes it ineligible: all
 *    its listeners move away; once it reports none and the registry
 *    records none on it, it is forgotten (and removed from the store). The
 *    drain is kept in the store until then, so a coordinator restarted
 *    mid-drain goes on draining; a drained shard given by --shards comes
 *    back at the next restart unless removed from the flag.
 *  - Pinning a listener (kvc_admin_move) sends it to a named shard
 *    whatever hashing says, while that shard is eligible; pins are kept in
 *    the store.
 *  - Rebalancing (kvc_admin_rebalance) lists the listeners whose owner is
 *    not the shard hashing picks among the eligible ones; performing it
 *    removes the pins of the listeners it lists, so the converge step
 *    moves them back. Failovers need nothing: a shard that answers again
 *    is picked again.
 *  - kvc_admin_moves lists the hand-offs in progress (a listener with an
 *    owner and a shard it is moving to) and the last ones completed.
 *
 * Each function queues a command; done(arg, status, body) is called on
 * the assigner thread with an HTTP status and a JSON body, as for
 * kvc_assigner_register.
 */
#ifndef KVI_COORDINATOR_ADMIN_H
#define KVI_COORDINATOR_ADMIN_H

#include <stdbool.h>

#include "assigner.h"

/* The most completed hand-offs kvc_admin_moves remembers. */
#define KVC_ADMIN_MOVES_KEPT 100

/* kvc_admin_add_shard adds shard id at url: 201, 400 for a bad id or url,
 * 409 for a taken id, 500 when it cannot be stored. */
void kvc_admin_add_shard(kvc_assigner *a, const char *id, const char *url,
			 kvc_assigner_done done, void *arg);

/* kvc_admin_drain_shard starts draining shard id: 202 with the listeners
 * it owns, 404 for an unknown shard, 409 when no other shard would be
 * eligible. */
void kvc_admin_drain_shard(kvc_assigner *a, const char *id,
			   kvc_assigner_done done, void *arg);

/* kvc_admin_move pins listener key to shard to: 202 with where it is,
 * 404 for an unknown listener or shard, 409 for a draining shard, 500
 * when the pin cannot be stored. */
void kvc_admin_move(kvc_assigner *a, const char *key, const char *to,
		    kvc_assigner_done done, void *arg);

/* kvc_admin_rebalance answers the moves back to the hash map: 200 with
 * dry_run, else 202 after removing the pins of the listeners it lists;
 * 503 before the first status poll. */
void kvc_admin_rebalance(kvc_assigner *a, bool dry_run, kvc_assigner_done done,
			 void *arg);

/* kvc_admin_moves answers the hand-offs in progress and done: 200. */
void kvc_admin_moves(kvc_assigner *a, kvc_assigner_done done, void *arg);

#endif /* KVI_COORDINATOR_ADMIN_H */
