/*
 * pending.h - blocks a listener is expected to hold soon, because a
 * router sent it a request whose prefill has not published them yet.
 *
 * An engine publishes a block only once it has computed it. Between a
 * routing decision and that moment the index cannot know the block is
 * coming, and a burst of requests sharing a new prefix would be spread
 * over ranks that each compute it again. A router therefore says where it
 * sent a request (the coordinator's POST /routed), and the blocks of that
 * request the listener does not hold become pending entries here.
 *
 * Pending entries are predictions, not facts, and are kept apart from the
 * index: in memory only (never in LMDB, never in an image, never carried
 * by a hand-off), read by queries beside the exact entries and never
 * changing them. An entry ends in one of five ways, each counted:
 *
 *   confirmed  the engine's BlockStored for it arrived (kvd_confirm);
 *   expired    its time to live passed (kvd_sweep; a query ignores an
 *              expired entry at once);
 *   dropped    the engine said the listener cannot have it: a removal of
 *              the block, AllBlocksCleared, an engine restart, or the
 *              listener removed or moved (kvd_drop, kvd_drop_listener);
 *   evicted    the bound was reached and it was the oldest (per listener
 *              or for the shard, whichever bound was hit).
 *
 * A routed block that is pending already is refreshed: its time to live
 * starts again and it becomes the newest.
 *
 * Keys: (listener id, sequence hash). The sequence hash is common/hash.h's
 * chain, so a pending entry means "this listener will hold this prefix
 * up to this block", exactly as an exact entry does.
 *
 * Threads: any number of readers (queries, between kvd_read_begin and
 * kvd_read_end) and writers (routed requests on rpc's threads, confirms
 * and drops on the ingest thread) behind one rwlock. kvd_empty() is a
 * lock-free check that lets the ingest thread and queries skip all of it
 * while nothing is pending, which is the common case for a fleet whose
 * routers do not report their decisions.
 *
 * Memory: per entry a 16-byte slot in a table kept between a quarter and
 * half full (32 to 64 bytes) and 8 bytes of its request's copy of the
 * hashes; 48 bytes per routed request with entries left; up to
 * max_entries. Per-listener counters grow with the highest listener id.
 */
#ifndef KVI_SHARD_PENDING_H
#define KVI_SHARD_PENDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Defaults of the shard's flags. */
#define KVD_MAX_ENTRIES_DEFAULT      (1u << 20)
#define KVD_MAX_PER_LISTENER_DEFAULT 65536u
/* How long an entry lives when its request does not say, and the most
 * it may ask. */
#define KVD_TTL_DEFAULT_MS 10000u
#define KVD_TTL_MAX_MS     600000u

typedef struct kvd_pending kvd_pending;

typedef struct kvd_config {
	size_t max_entries;      /* for the shard; 0: the default */
	size_t max_per_listener; /* 0: the default */
} kvd_config;

/* Why the entries of a listener or some of its blocks are dropped. */
typedef enum kvd_drop_reason {
	KVD_DROP_REMOVED = 0, /* BlockRemoved named the block */
	KVD_DROP_CLEARED = 1, /* AllBlocksCleared */
	KVD_DROP_RESTART = 2, /* the engine restarted (or a gap emptied it) */
	KVD_DROP_GONE = 3,    /* the listener was removed or moved away */
} kvd_drop_reason;
#define KVD_DROP_REASONS 4

/* The shard's totals. */
typedef struct kvd_stats {
	uint64_t entries; /* live now (expired ones not swept yet included) */
	uint64_t routed;  /* routed requests taken */
	uint64_t added;   /* entries made (refreshes not counted) */
	uint64_t confirmed, expired, evicted;
	uint64_t dropped[KVD_DROP_REASONS];
} kvd_stats;

/* One listener's totals (zero for a listener with none). */
typedef struct kvd_listener_stats {
	uint64_t entries;
	uint64_t routed, added, confirmed, expired, evicted, dropped;
	/* over routed requests that said their length (kvd_route) */
	uint64_t prompt_tokens, predicted_tokens;
} kvd_listener_stats;

kvd_pending *kvd_pending_alloc(const kvd_config *cfg);
void kvd_pending_free(kvd_pending *p);

/* kvd_empty is true when no entry is live: a relaxed read, for skipping
 * work; a writer racing it is seen by the next call. */
bool kvd_empty(const kvd_pending *p);

/* kvd_add makes seq[0..n) pending on listener lid for ttl_ms (at most
 * KVD_TTL_MAX_MS) from now_ms, refreshing those that are already, and
 * counts one routed request. Returns how many of the n are pending after
 * the call (fewer than n only when the per-listener bound is below n). */
size_t kvd_add(kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t n,
	       int64_t now_ms, uint32_t ttl_ms);

/* A routed request: its sequence hashes seq[0..n), of which lid holds the
 * first held; when it names its prompt's length (prompt_tokens, 0: not)
 * and the model's block size, the hit it predicts is counted. */
typedef struct kvd_route_req {
	const uint64_t *seq;
	size_t n, held;
	int64_t now_ms;
	uint32_t ttl_ms;
	uint32_t prompt_tokens, block_size;
	/* out: the blocks pending past held after it, and the hit predicted
	 * for it - what lid holds and what earlier routed requests compute
	 * there, at most (prompt_tokens - 1) / block_size, as the engine
	 * takes a hit */
	size_t pending, predicted;
} kvd_route_req;

/* kvd_route takes a routed request for lid at once, under one lock: its
 * prediction first, then its blocks past held made pending (kvd_add). */
void kvd_route(kvd_pending *p, uint32_t lid, kvd_route_req *r);

/* kvd_confirm ends the entries of lid for seq[0..n) that exist, as
 * confirmed: the engine stored those blocks. */
void kvd_confirm(kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t n);

/* kvd_drop ends the entries of lid for seq[0..n) that exist, as dropped
 * for reason. */
void kvd_drop(kvd_pending *p, uint32_t lid, const uint64_t *seq, size_t n,
	      kvd_drop_reason reason);

/* kvd_drop_listener ends every entry of lid as dropped for reason; with
 * KVD_DROP_GONE the listener's totals are forgotten too. */
void kvd_drop_listener(kvd_pending *p, uint32_t lid, kvd_drop_reason reason);

/* kvd_sweep ends, as expired, the entries whose time passed before now_ms
 * that are reached from the oldest end; returns how many. */
size_t kvd_sweep(kvd_pending *p, int64_t now_ms);

/* The read side, for queries: between kvd_read_begin and kvd_read_end no
 * writer changes anything. */
void kvd_read_begin(kvd_pending *p);
void kvd_read_end(kvd_pending *p);

/* kvd_extend counts the blocks from seq[from] on, up to seq[n - 1], that
 * are pending on lid and live at now_ms, one after the other: how far
 * the listener's prefix is expected to reach beyond from. Read side. */
size_t kvd_extend(const kvd_pending *p, uint32_t lid, const uint64_t *seq,
		  size_t from, size_t n, int64_t now_ms);

/* kvd_foreach_listener calls fn for every listener with a live entry for
 * seq0 (a query's first block): the listeners the index may not name.
 * Read side. */
typedef void (*kvd_listener_fn)(void *arg, uint32_t lid);
void kvd_foreach_listener(const kvd_pending *p, uint64_t seq0, int64_t now_ms,
			  kvd_listener_fn fn, void *arg);

void kvd_stats_get(kvd_pending *p, kvd_stats *out);
void kvd_listener_stats_get(kvd_pending *p, uint32_t lid,
			    kvd_listener_stats *out);

#endif /* KVI_SHARD_PENDING_H */
