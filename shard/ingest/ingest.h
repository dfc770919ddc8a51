/*
 * ingest.h - the shard's ingest thread (docs/design.md#ingest,
 * docs/design.md#durability-and-restart).
 *
 * One thread owns every listener: it subscribes to each rank's live
 * stream, keeps each listener's sequence, repairs gaps (the rank's replay
 * socket first, then /kv_recover), applies batches to the index and to the
 * listeners' pending log records, and every commit interval hands what it
 * applied to the writer thread as one group commit. Its loop is libevent
 * over the ZeroMQ sockets' notification descriptors: a socket is only
 * touched when it has something to read, so the loop does not scan
 * listeners to find work, and a busy socket yields after a budget of
 * messages so that no rank starves the others.
 *
 * Start-up: kvg_ingest_open() loads the store into the index (queries can
 * be answered as soon as it returns), kvg_ingest_start() subscribes and
 * catches up from each watermark.
 *
 * Other threads talk to it through requests (assign, unassign, status,
 * dump) that it answers on its own thread; each call blocks until answered.
 * Queries never go through it: they read the index directly.
 */
#ifndef KVI_SHARD_INGEST_H
#define KVI_SHARD_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "error.h"
#include "index.h"
#include "kvindex.pb-c.h"
#include "metrics.h"
#include "pending.h"
#include "store.h"

typedef struct kvg_ingest kvg_ingest;

/* The most entries a /kv_recover answer may give one listener, unless
 * configured (kvg_config.listener_max_entries). */
#define KVG_LISTENER_MAX_ENTRIES 4000000

typedef struct kvg_config {
	kvx_index *idx;
	kvs_store *store;
	kvi_metrics *metrics; /* NULL: no metrics */
	const char *shard_id;
	int commit_ms;           /* group commit interval; default 20 */
	int replay_timeout_ms;   /* silence that ends a replay; default 2000 */
	int recover_concurrency; /* parallel /kv_recover fetches; default 4 */
	long recover_timeout_ms; /* one fetch, whole; default 120000 */
	/* deadlines of each fetch (recover_fetch.h): to connect, from the
	 * request to the first byte, between two bytes; 0: 3000, 5000 and
	 * 5000 ms */
	long recover_connect_ms, recover_first_byte_ms, recover_idle_ms;
	/* the most entries a /kv_recover answer may give one listener: one
	 * storing more blocks is refused whole; 0: 4,000,000 */
	uint64_t listener_max_entries;
	size_t backlog_max_bytes; /* live batches queued (recovering, or
				   * behind): default 256 MiB over all
				   * listeners */
	size_t listener_backlog_max_bytes; /* the same for one listener;
					    * default 64 MiB */
	uint32_t orphan_resync; /* orphans in a row that resync; default 8 */
	int backoff_max_ms;     /* recovery retry cap; default 30000 */
	uint64_t handoff_rate;  /* entries/s a hand-off takes; 0: no cap */
	int reconnect_max_ms;   /* ceiling of the reconnect back-off to an
				 * engine; default 30000 */
	uint32_t probe_rate;    /* probes/s of engines that are not there, after
				 * each listener's first; 0: no cap */
	bool no_image; /* neither read nor write an index image beside the
			* store (ingest_image.c) */
	/* the shard's pending entries (pending.h), which the listeners'
	 * batches confirm and drop and the commit timer sweeps; NULL: none */
	kvd_pending *pending;
} kvg_config;

/* kvg_ingest_open loads the durable state of cfg->store into cfg->idx and
 * prepares (but does not start) the ingest thread. The index comes from the
 * image beside the store when there is one of the store's state (the last
 * stop wrote it) or of an earlier one (written while running, with what was
 * committed since replayed onto it: ingest_tail.c), else it is rebuilt from
 * the store. Returns KVI_ECORRUPT when the store cannot be read. */
kvi_err kvg_ingest_open(const kvg_config *cfg, kvg_ingest **out, char *err,
			size_t errlen);

/* kvg_ingest_start starts the writer and ingest threads: every listener
 * subscribes and catches up. */
kvi_err kvg_ingest_start(kvg_ingest *g, char *err, size_t errlen);

/* kvg_ingest_store_failing says whether the store cannot commit what was
 * applied (disk full, I/O error, map full), and why in why (may be NULL).
 * Ingest waits for it meanwhile: every listener is stale. Any thread. */
bool kvg_ingest_store_failing(kvg_ingest *g, char *why, size_t len);

/* kvg_ingest_files_out says whether a listener's socket could not be made
 * for want of descriptors within the last ms milliseconds. Any thread. */
bool kvg_ingest_files_out(kvg_ingest *g, int64_t ms);

/* kvg_ingest_stop stops reading, commits what was applied, and joins both
 * threads. Idempotent. */
void kvg_ingest_stop(kvg_ingest *g);
/* kvg_ingest_free stops g and frees it. When everything applied is
 * committed, it first writes the index image for the next start. */
void kvg_ingest_free(kvg_ingest *g);

/* kvg_assign makes the shard own the listener spec describes; with
 * handoff_from (NULL: none), a new listener takes its state from the shard
 * at that address (a planned move, handoff.c). Assigning a
 * key the shard already owns with the same spec is a success with
 * *existed = true; with another spec it is KVI_EEXIST. KVI_EINVAL for a
 * spec that is not valid (rank > 65535, block size 0, model with another
 * block size, bad endpoint). */
kvi_err kvg_assign(kvg_ingest *g, const Kvindex__Listener *spec,
		   const char *handoff_from, bool *existed, char *err,
		   size_t errlen);

/* kvg_unassign drops the listener with key and all its data, in memory and
 * on disk. KVI_ENOENT when not owned. */
kvi_err kvg_unassign(kvg_ingest *g, const char *key, char *err, size_t errlen);

/* kvg_status fills out (allocating from a) for one listener (req->key)
 * or all (no key): then with their digest, and none of them when it is
 * req->since_digest. KVI_ENOENT for an unknown key. err says why it
 * failed. */
kvi_err kvg_status(kvg_ingest *g, const Kvindex__StatusRequest *req,
		   kvp_arena *a, Kvindex__StatusResponse *out, char *err,
		   size_t errlen);

/* kvg_dump fills out with the exact state of the listener with key;
 * KVI_ENOENT for an unknown key. err says why it failed. */
kvi_err kvg_dump(kvg_ingest *g, const char *key, kvp_arena *a,
		 Kvindex__DumpResponse *out, char *err, size_t errlen);

/* kvg_handoff_chunk answers one chunk of a hand-off of req->key (the old
 * owner's side, handoff.h). */
kvi_err kvg_handoff_chunk(kvg_ingest *g, const Kvindex__HandoffRequest *req,
			  kvp_arena *a, Kvindex__HandoffResponse *out,
			  char *err, size_t errlen);

/*
 * In-process feeding, for benchmarks and tools that drive the shard's
 * ingest path without sockets: after kvg_ingest_open(), kvg_feed_start()
 * starts the writer (not the ingest thread) and the calling thread takes
 * the ingest thread's place. Listeners assigned with kvg_feed_assign() have
 * no sockets; kvg_feed() hands one live batch to a listener exactly as if
 * it had arrived on its SUB, and runs the group commit when it is due;
 * kvg_feed_sync() returns once everything fed is committed;
 * kvg_feed_idle() does that and then what the loop does at a tick with
 * nothing new, writing the index image if one is due (ingest_image.c), and
 * returns false while one is wanted but waits its turn;
 * kvg_feed_image() commits what was fed and writes the image now (false
 * when it could not). Do not mix with kvg_ingest_start().
 */
kvi_err kvg_feed_start(kvg_ingest *g, char *err, size_t errlen);
kvi_err kvg_feed_assign(kvg_ingest *g, const Kvindex__Listener *spec,
			uint32_t *lid, char *err, size_t errlen);
kvi_err kvg_feed_unassign(kvg_ingest *g, const char *key, char *err,
			  size_t errlen);
void kvg_feed(kvg_ingest *g, uint32_t lid, uint64_t seq, const void *payload,
	      size_t len);
void kvg_feed_sync(kvg_ingest *g);
bool kvg_feed_idle(kvg_ingest *g);
bool kvg_feed_image(kvg_ingest *g);

#endif /* KVI_SHARD_INGEST_H */
