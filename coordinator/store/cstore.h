/*
 * cstore.h - the coordinator's own durable state, in LMDB (--data-dir).
 *
 * Most of what the coordinator knows is re-derived at start-up: pods from
 * their discovery sources, assignments from rendezvous hashing, listener
 * state from the shards (docs/design.md#durability-and-restart). The store
 * keeps the rest, what no source can give back:
 *
 *   "pods"    pod key -> a kvc_pod registered over HTTP (encoding below);
 *             the key is the prefix of the pod's listener keys: its name
 *             for a named pod, "instance_id#rank" for a per-rank
 *             registration (kvc_pod_key)
 *   "pins"    listener key -> shard id (admin pins)
 *   "shards"  shard id -> endpoint (shards added at run time)
 *   "drains"  shard id -> nothing (shards being drained)
 *   "meta"    "format" -> u32 LE format version; "probe" -> u64 LE, the
 *             time of the last write that probed a failing store
 *
 * Every value is [xxh32 of the rest, LE][rest]; a pod's is its record
 * (pod.h's kvc_pod_encode). A bad checksum, a malformed value, an
 * unknown format, a file cut short (checked at open, before LMDB reads
 * past its meta pages: lmdb_util.h) or a file LMDB cannot read is
 * KVI_ECORRUPT (an unknown
 * newer format is KVI_EVERSION); the caller may move the directory aside
 * with kvi_store_quarantine() (lmdb_util.h) and start empty, at the price of
 * losing admin overrides and the HTTP registrations no shard holds (those
 * the shards hold are taken back from them: adopt_http.c).
 *
 * Writes are rare (registrations, admin calls): each call is one write
 * transaction (kvc_cstore_pods_put writes several registrations in one),
 * synced to disk before it returns. A full map
 * is grown (doubling) and the write retried.
 *
 * A full disk. LMDB reports a write the filesystem cut short as EIO; the
 * store calls it "disk full", with the bytes free, when the filesystem
 * has less than 4 MiB free (as the shard's store does), and returns
 * KVI_EFULL. A failed write marks the store failing until a write goes
 * through again (kvc_cstore_failing, for /ready); after a full disk, a
 * write that fits in pages LMDB freed earlier is not enough: the
 * filesystem must have 4 MiB free again, so that /ready does not say yes
 * to the next registration that would fail. kvc_cstore_probe writes a
 * small record meanwhile, to learn when the store commits again.
 *
 * Threading: any thread. Calls are serialized by a mutex inside the store;
 * list callbacks run with it held and must not call back into the store.
 * kvc_cstore_failing does not wait for a write in progress.
 */
#ifndef KVI_COORDINATOR_CSTORE_H
#define KVI_COORDINATOR_CSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "pod.h"

/* The longest key (pod key, listener key, shard id) the store accepts;
 * LMDB's default key limit is 511 bytes. */
#define KVC_CSTORE_KEY_MAX 480
/* The longest endpoint or other stored string. */
#define KVC_CSTORE_STR_MAX KVC_POD_STR_MAX

typedef struct kvc_cstore kvc_cstore;

/* kvc_cstore_open opens the store in dir, creating dir (and its parents)
 * if missing. Returns KVI_ECORRUPT for a file LMDB or this format cannot
 * read or one cut short, KVI_EVERSION for a newer format, KVI_EIO otherwise;
 * err says what. *out is written only on success. */
kvi_err kvc_cstore_open(const char *dir, kvc_cstore **out, char *err,
			size_t errlen);

/* kvc_cstore_open_or_move opens the store in dir as kvc_cstore_open does,
 * logging what it finds: a 0-byte data.mdb starts empty, with a warning;
 * a store that cannot be read (KVI_ECORRUPT) is moved aside
 * (kvi_store_quarantine) and a new one opened, at the price of the HTTP
 * registrations and pins it held. Other errors are logged and returned. */
kvi_err kvc_cstore_open_or_move(const char *dir, kvc_cstore **out);

/* kvc_cstore_close closes s; NULL is allowed. */
void kvc_cstore_close(kvc_cstore *s);

/* kvc_cstore_pod_put stores p under kvc_pod_key(p), replacing what
 * was there. Returns KVI_EINVAL for a key or string too long, KVI_EFULL
 * when the disk (or the map, at its limit) is full, KVI_EIO otherwise. */
kvi_err kvc_cstore_pod_put(kvc_cstore *s, const kvc_pod *p, char *err,
			   size_t errlen);

/* kvc_cstore_pods_put stores n pods as kvc_cstore_pod_put does, in one
 * transaction (one sync for them all): all of them, or none when one
 * fails (KVI_EINVAL naming it, or an error of the write). */
kvi_err kvc_cstore_pods_put(kvc_cstore *s, const kvc_pod *const *pods, size_t n,
			    char *err, size_t errlen);

/* kvc_cstore_failing says whether the store cannot commit now - its last
 * write failed, or it failed for a full disk and the disk is still next
 * to full - and why ("disk full: ..., N bytes free on the store's
 * filesystem (DIR)"; why may be NULL). */
bool kvc_cstore_failing(kvc_cstore *s, char *why, size_t len);

/* kvc_cstore_probe writes a small record when the store is failing, so
 * that it learns when it commits again; nothing otherwise. */
void kvc_cstore_probe(kvc_cstore *s);

/* kvc_cstore_pod_delete deletes the pod stored under key. Returns
 * KVI_ENOENT if there is none. */
kvi_err kvc_cstore_pod_delete(kvc_cstore *s, const char *key, char *err,
			      size_t errlen);

/* A list callback returning an error stops the listing with it. Arguments
 * are valid only during the call; the callback copies what it keeps. */
typedef kvi_err (*kvc_cstore_pod_cb)(void *arg, const char *key,
				     const kvc_pod *pod);
typedef kvi_err (*kvc_cstore_pair_cb)(void *arg, const char *key,
				      const char *value);
typedef kvi_err (*kvc_cstore_key_cb)(void *arg, const char *key);

/* kvc_cstore_pod_list calls cb for every stored pod, in key order.
 * Returns KVI_ECORRUPT (err says which key) for a value that does not
 * decode; the callbacks already made stand. */
kvi_err kvc_cstore_pod_list(kvc_cstore *s, kvc_cstore_pod_cb cb, void *arg,
			    char *err, size_t errlen);

/* Pins: listener key -> shard id. Same errors as for pods. */
kvi_err kvc_cstore_pin_put(kvc_cstore *s, const char *listener_key,
			   const char *shard_id, char *err, size_t errlen);
kvi_err kvc_cstore_pin_delete(kvc_cstore *s, const char *listener_key,
			      char *err, size_t errlen);
kvi_err kvc_cstore_pin_list(kvc_cstore *s, kvc_cstore_pair_cb cb, void *arg,
			    char *err, size_t errlen);

/* Shards added at run time: shard id -> endpoint. */
kvi_err kvc_cstore_shard_put(kvc_cstore *s, const char *shard_id,
			     const char *endpoint, char *err, size_t errlen);
kvi_err kvc_cstore_shard_delete(kvc_cstore *s, const char *shard_id, char *err,
				size_t errlen);
kvi_err kvc_cstore_shard_list(kvc_cstore *s, kvc_cstore_pair_cb cb, void *arg,
			      char *err, size_t errlen);

/* Shards being drained: a set of shard ids. */
kvi_err kvc_cstore_drain_put(kvc_cstore *s, const char *shard_id, char *err,
			     size_t errlen);
kvi_err kvc_cstore_drain_delete(kvc_cstore *s, const char *shard_id, char *err,
				size_t errlen);
kvi_err kvc_cstore_drain_list(kvc_cstore *s, kvc_cstore_key_cb cb, void *arg,
			      char *err, size_t errlen);

#endif /* KVI_COORDINATOR_CSTORE_H */
