/*
 * store.h - the shard's durable state in LMDB
 * (docs/design.md#durability-and-restart).
 *
 * LMDB takes millions of appends a second but only a few hundred thousand
 * random-key puts once the tree outgrows the cache, and a block index is
 * all random keys. So the store is log-structured:
 *
 *   "log"        lsn (u64 big-endian, appended with MDB_APPEND)
 *                -> [xxh32][lid u32][payload]: what one listener applied in
 *                   one group commit, with its new watermark
 * (shard/store/oplog.h) "snap"       (lid u32 BE, 0) -> snapshot header: the
 * lsn it covers up to, the mark (watermark, fingerprint), the entry and chunk
 * counts (lid u32 BE, k >= 1) -> [xxh32][entries]: a listener's whole state,
 * KVS_ENTRY_SIZE bytes an entry "listeners"  lid (u32 BE) -> the listener's
 * assignment (caller's bytes) "meta"       "format" -> u32 format version
 *
 * A listener's state is its snapshot plus the log records for it with an
 * lsn at or past the snapshot's. Every record carries its listener's
 * watermark, so the watermark is committed in the same transaction as the
 * blocks it covers, and what LMDB holds after any crash is exactly the
 * state at that watermark. The caller snapshots a listener whose log has
 * grown as large as its state; log records that no live listener needs
 * (older than the first record past each listener's snapshot) are deleted,
 * a bounded number per commit.
 *
 * Values carry a checksum: a bad one, a bad format, a file cut short
 * (checked at open, before LMDB reads past its meta pages: lmdb_util.h) or
 * an unreadable file is KVI_ECORRUPT, for which the caller may move the
 * directory aside with kvi_store_quarantine() (lmdb_util.h) and start empty
 * rather than fail forever. A full map is grown (doubling, up to max_map_size)
 * and the commit retried; a full disk is KVI_EFULL and the commit is not
 * applied, so the caller keeps its records and retries.
 *
 * Threading: open, load and commit from one thread at a time (the shard's
 * writer thread after start-up); stats from any thread.
 */
#ifndef KVI_SHARD_STORE_H
#define KVI_SHARD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* A snapshot entry: ext u64 LE, seq u64 LE, tiers u8. */
#define KVS_ENTRY_SIZE 17

typedef struct kvs_store kvs_store;

/* Where a listener's durable state stands: the watermark (the seq of the
 * last batch applied) and a fingerprint of that batch's payload; and
 * whether the state is incomplete - the listener stepped over a gap that
 * nothing could repair, and holds only what its engine stored since
 * (shard/recovery/recovery.c says why), a subset of what the engine holds. */
typedef struct kvs_mark {
	bool has_wm, has_fp;
	uint64_t wm, fp;
	bool incomplete;
} kvs_mark;

/* kvs_mark_flags packs the three bools into one byte (bits 0, 1, 2), as
 * log records and snapshot headers store them; kvs_mark_from_flags reads
 * them back, false for a byte with other bits set. */
uint8_t kvs_mark_flags(const kvs_mark *m);
bool kvs_mark_from_flags(uint8_t flags, kvs_mark *m);

typedef struct kvs_store_opts {
	const char *dir;     /* created if missing */
	size_t map_size;     /* initial LMDB map size; 0 = 1 GiB */
	size_t max_map_size; /* growth limit; 0 = none (until the disk) */
	bool no_sync;        /* skip fsync: kill -9 safe, power loss not */
} kvs_store_opts;

/* One group commit. Applied in one LMDB write transaction, in order:
 * listener puts/deletes, snapshots, log records, log truncation. A
 * snapshot is a listener's state before the commit's records: a listener's
 * records in the same commit apply on top of it, never under it. */
typedef struct kvs_put {
	uint32_t lid;
	const void *val; /* NULL deletes the listener and its snapshot */
	size_t len;
} kvs_put;

typedef struct kvs_rec {
	uint32_t lid;
	const void *payload;
	size_t len;
} kvs_rec;

typedef struct kvs_snap {
	uint32_t lid;
	kvs_mark mark;
	const uint8_t *entries; /* n * KVS_ENTRY_SIZE bytes */
	size_t n;
} kvs_snap;

typedef struct kvs_commit {
	const kvs_put *puts;
	size_t n_puts;
	const kvs_rec *recs;
	size_t n_recs;
	const kvs_snap *snaps;
	size_t n_snaps;
} kvs_commit;

/* What kvs_store_load() hands back, in this order: every listener, then
 * each listener's snapshot (header, then its entries in chunks), then the
 * log records that follow the snapshots, in lsn order. Records of deleted
 * listeners and records older than their listener's snapshot are skipped.
 * A snapshot's lsn is the first of the records that apply on top of it;
 * a record's is its own. A snapshot callback returning KVI_ENOENT skips
 * that snapshot's entries (the caller has them); any other error, from
 * any callback, stops the load with it, and err names the record the
 * callback refused. */
typedef struct kvs_load_cb {
	void *arg;
	kvi_err (*listener)(void *arg, uint32_t lid, const void *val,
			    size_t len);
	kvi_err (*snapshot)(void *arg, uint32_t lid, const kvs_mark *mark,
			    uint64_t lsn, uint64_t n_entries);
	kvi_err (*entries)(void *arg, uint32_t lid, const uint8_t *entries,
			   size_t n); /* NULL: snapshot entries are skipped */
	kvi_err (*record)(void *arg, uint32_t lid, uint64_t lsn,
			  const void *payload, size_t len);
} kvs_load_cb;

/* What state the store is at: the file (device and inode), LMDB's last
 * transaction id, the log's next lsn and its length. Two stamps of one
 * store are equal only if nothing was committed in between. */
typedef struct kvs_stamp {
	uint64_t v[5];
} kvs_stamp;

/* kvs_stamp_lsn returns the next lsn of the state st: every snapshot and
 * log record committed after that state has an lsn at or past it, and
 * every one committed before, below it. */
uint64_t kvs_stamp_lsn(const kvs_stamp *st);

/* kvs_stamp_before says whether then is an earlier state of the store
 * whose state is now: the same file, with commits since. */
bool kvs_stamp_before(const kvs_stamp *then, const kvs_stamp *now);

typedef struct kvs_store_stats {
	uint64_t file_bytes;  /* data.mdb size */
	uint64_t map_bytes;   /* current map size */
	uint64_t log_records; /* live records in the log */
	uint64_t next_lsn;
	uint64_t commits;
	uint64_t truncated; /* log records deleted so far */
	uint64_t map_growths;
} kvs_store_stats;

/* kvs_store_open opens (creating if needed) the store in o->dir. Returns
 * KVI_ECORRUPT for a file LMDB or this format cannot read, or one cut
 * short, KVI_EIO for other failures; err says what. */
kvi_err kvs_store_open(const kvs_store_opts *o, kvs_store **out, char *err,
		       size_t errlen);
void kvs_store_close(kvs_store *s);

/* kvs_store_load reads the whole durable state through cb. Returns
 * KVI_ECORRUPT on a bad checksum or malformed value. It may be called again
 * (the same state comes through again). */
kvi_err kvs_store_load(kvs_store *s, const kvs_load_cb *cb, char *err,
		       size_t errlen);

/* kvs_store_commit applies c in one transaction. Returns KVI_EFULL when the
 * disk (or max_map_size) is full, KVI_EIO otherwise; on error nothing of c
 * is applied. */
kvi_err kvs_store_commit(kvs_store *s, const kvs_commit *c, char *err,
			 size_t errlen);

void kvs_store_stats_get(kvs_store *s, kvs_store_stats *out);

/* kvs_store_stamp says what state s is at now (kvs_stamp). Same thread as
 * commits. */
void kvs_store_stamp(kvs_store *s, kvs_stamp *out);

/* kvs_store_dir returns the directory s was opened in. */
const char *kvs_store_dir(const kvs_store *s);

/* kvs_store_oldest finds the live listener whose uncovered log records
 * start earliest, the one whose snapshot would let the log shrink most.
 * Returns false when no listener needs the log. Committing thread only. */
bool kvs_store_oldest(const kvs_store *s, uint32_t *lid, uint64_t *need);

/* Entry codec for snapshot buffers. */
void kvs_entry_put(uint8_t *p, uint64_t ext, uint64_t seq, uint8_t tiers);
void kvs_entry_get(const uint8_t *p, uint64_t *ext, uint64_t *seq,
		   uint8_t *tiers);

#endif /* KVI_SHARD_STORE_H */
