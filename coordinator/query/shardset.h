/*
 * shardset.h - the shards a coordinator talks to, and what it knows of
 * their health.
 *
 * Each shard has an id (what consistent hashing hashes), the nng address
 * of its service and a client to it. The assigner polls every shard's
 * status each tick and records here whether it answered. A shard that
 * missed a poll is down: queries do not wait for it, and polls only probe
 * it without waiting until it answers again; after the failover grace its
 * listeners are reassigned (see assigner.h).
 *
 * Thread safety: a read-write lock guards the list (queries read it, the
 * admin API changes it); health fields are atomics or under the lock.
 * kvc_shardset_snapshot() hands out references that stay valid until
 * kvc_shardset_release(): shards are freed only when the last snapshot
 * holding them is released.
 */
#ifndef KVI_COORDINATOR_SHARDSET_H
#define KVI_COORDINATOR_SHARDSET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "error.h"
#include "qbatch.h"
#include "rpc.h"

typedef struct kvc_shard {
	char *id;
	char *url;
	kvp_client *client;
	kvc_qbatch *qbatch; /* the queries bound for it, coalesced */
	_Atomic int refs;
	_Atomic bool removed; /* no longer in the set */
	/* health, written by the assigner */
	_Atomic bool up;            /* answered its last poll */
	_Atomic int64_t last_ok_ms; /* when it last answered, 0: never */
	_Atomic int64_t down_since_ms;
	_Atomic uint64_t listeners, entries, store_bytes;
	_Atomic bool draining;
	/* a status call to a shard known down, which no poll waits for */
	_Atomic bool probing;  /* in flight */
	_Atomic bool probe_ok; /* it answered: the next poll waits for it */
	/* query fan-out calls that failed or missed the deadline */
	_Atomic uint64_t fanout_errors;
	/* its store cannot commit, as its last poll said: its answers are
	 * stale (kvc_shard_stale) */
	_Atomic bool stale;
	pthread_mutex_t mu;
	char store_error[256]; /* under mu */
} kvc_shard;

typedef struct kvc_shardset kvc_shardset;

kvc_shardset *kvc_shardset_alloc(void);
void kvc_shardset_free(kvc_shardset *s);

/* kvc_shardset_set_batching sets how the queries of the shards added
 * from now on are coalesced (kvc_qbatch_alloc; 0: the defaults). */
void kvc_shardset_set_batching(kvc_shardset *s, int max_inflight,
			       size_t max_batch);

/* kvc_shardset_add adds shard id at url. KVI_EEXIST for a taken id,
 * KVI_EINVAL for a bad url. */
kvi_err kvc_shardset_add(kvc_shardset *s, const char *id, const char *url,
			 char *err, size_t errlen);

/* kvc_shardset_remove forgets shard id (KVI_ENOENT if unknown). */
kvi_err kvc_shardset_remove(kvc_shardset *s, const char *id);

/* kvc_shardset_snapshot returns the shards, in id order, each referenced
 * until kvc_shardset_release(). */
kvc_shard **kvc_shardset_snapshot(kvc_shardset *s, size_t *n);
void kvc_shardset_release(kvc_shard **shards, size_t n);

/* kvc_shardset_release_async is kvc_shardset_release for a thread that
 * must not close a shard's client (an nng callback: closing waits for the
 * callbacks to return): a shard whose last reference it drops is closed
 * and freed on a thread of its own. */
void kvc_shardset_release_async(kvc_shard **shards, size_t n);

/* kvc_shardset_find returns a referenced shard (release with
 * kvc_shard_unref) or NULL. */
kvc_shard *kvc_shardset_find(kvc_shardset *s, const char *id);
void kvc_shard_unref(kvc_shard *sh);

size_t kvc_shardset_count(kvc_shardset *s);

/* kvc_shard_known_down says whether sh has missed a poll, or lost its
 * connection under a query, since it last answered a poll (a shard not
 * polled yet is not known down). Queries skip such a shard, and polls do
 * not wait for it. */
bool kvc_shard_known_down(const kvc_shard *sh);

/* kvc_shard_mark_down records that sh did not answer (why: rv, err) at
 * now: down, since now unless it already was; logged once. */
void kvc_shard_mark_down(kvc_shard *sh, kvi_err rv, const char *err,
			 int64_t now);

/* kvc_shard_set_store_error records what sh's last poll said of its
 * store: why it cannot commit, or NULL when it can. */
void kvc_shard_set_store_error(kvc_shard *sh, const char *err);

/* kvc_shard_stale says whether sh's store cannot commit, and why (why may
 * be NULL). */
bool kvc_shard_stale(kvc_shard *sh, char *why, size_t len);

#endif /* KVI_COORDINATOR_SHARDSET_H */
