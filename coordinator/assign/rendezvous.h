/*
 * rendezvous.h - which shard owns a listener: rendezvous (highest random
 * weight) hashing, with an admin pin table consulted first
 * (docs/design.md#assignment).
 *
 * Every shard gets a weight for every listener key,
 *
 *     weight(shard, key) = XXH3_64(shard_id || '\0' || key, seed 0)
 *
 * and a listener goes to the eligible shard of highest weight; equal
 * weights (in practice only a shard id listed twice) go to the smaller
 * shard id by strcmp, then to the earlier index. The NUL separator cannot
 * occur in either string, so ("ab", "c") and ("a", "bc") never hash alike.
 *
 * Why rendezvous rather than a ring with virtual nodes: the map depends on
 * nothing but the shard ids and the key, so every coordinator (and the
 * same coordinator after a restart) computes it identically with no ring to
 * build or share; there is no vnode count to tune for balance; adding a
 * shard moves exactly the keys whose new highest weight is that shard, an
 * expected 1/N of them and all towards it, and removing one moves only its
 * own keys; and excluding a shard (drained, being handed off, down past
 * its grace period) is just a mask over the list. The price is O(shards)
 * hashes per pick, which is nothing at the scale of shards (tens) and of
 * assignment decisions (pod arrivals, membership changes).
 *
 * Pins (admin overrides, persisted by the caller in the coordinator store)
 * come first: a pinned listener goes to its pinned shard when that shard
 * is in the list and eligible, and otherwise falls back to hashing, so a
 * pin to a drained or removed shard never leaves a listener unowned.
 *
 * Threading: kvc_rdv_weight/pick are pure and thread-safe. A pin table is
 * not locked: the caller serializes writes against reads.
 */
#ifndef KVI_COORDINATOR_RENDEZVOUS_H
#define KVI_COORDINATOR_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What kvc_rdv_pick_index returns when no shard is eligible. */
#define KVC_RDV_NONE SIZE_MAX

/* kvc_rdv_weight returns the weight of shard_id for key. */
uint64_t kvc_rdv_weight(const char *shard_id, const char *key);

/* kvc_rdv_pick_index returns the index in shard_ids[0..n) of the shard that
 * owns key: the highest weight among the shards with eligible[i] true (all
 * of them when eligible is NULL). Returns KVC_RDV_NONE when none is
 * eligible. */
size_t kvc_rdv_pick_index(const char *const *shard_ids, size_t n,
			  const bool *eligible, const char *key);

/* kvc_rdv_pick is kvc_rdv_pick_index returning the shard id (one of
 * shard_ids' pointers), or NULL when no shard is eligible. */
const char *kvc_rdv_pick(const char *const *shard_ids, size_t n,
			 const bool *eligible, const char *key);

/* A pin table: listener key -> shard id. */
typedef struct kvc_rdv_pins kvc_rdv_pins;

kvc_rdv_pins *kvc_rdv_pins_alloc(void);
void kvc_rdv_pins_free(kvc_rdv_pins *p);

/* kvc_rdv_pins_set pins key to shard_id, replacing an earlier pin of key.
 * Both strings are copied. */
void kvc_rdv_pins_set(kvc_rdv_pins *p, const char *key, const char *shard_id);

/* kvc_rdv_pins_unset removes key's pin; returns whether there was one. */
bool kvc_rdv_pins_unset(kvc_rdv_pins *p, const char *key);

/* kvc_rdv_pins_get returns the shard key is pinned to, or NULL. The string
 * is valid until the pin is changed or the table freed. */
const char *kvc_rdv_pins_get(const kvc_rdv_pins *p, const char *key);

size_t kvc_rdv_pins_count(const kvc_rdv_pins *p);

/* kvc_rdv_pins_at sets *key and *shard_id to pin i (0 <= i < count), in
 * key order. */
void kvc_rdv_pins_at(const kvc_rdv_pins *p, size_t i, const char **key,
		     const char **shard_id);

/* kvc_rdv_assign returns the index of the shard that owns key: its pinned
 * shard when pins (may be NULL) pins it to a shard of the list that is
 * eligible, else kvc_rdv_pick_index(). *pinned (may be NULL) says which.
 * Returns KVC_RDV_NONE when no shard is eligible. */
size_t kvc_rdv_assign(const kvc_rdv_pins *pins, const char *const *shard_ids,
		      size_t n, const bool *eligible, const char *key,
		      bool *pinned);

#endif /* KVI_COORDINATOR_RENDEZVOUS_H */
