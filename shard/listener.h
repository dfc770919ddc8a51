/*
 * listener.h - one engine rank as the shard sees it.
 *
 * A listener is the unit a shard owns: the rank's assignment (endpoints,
 * model, block size), its sequence position (watermark, fingerprint), its
 * recovery state, what it has applied since the last group commit, and its
 * counters. Listeners belong to the ingest thread: only that thread reads
 * or writes them (status requests are answered on it).
 *
 * States (what status reports):
 *
 *   PENDING     assigned and subscribed, not yet known to be in step
 *   ACTIVE      applying the live stream in order
 *   RECOVERING  closing a gap: a replay or a /kv_recover fetch is in
 *               flight; live batches wait in the listener's backlog
 *   FAILED      the last recovery attempt failed; the next one is
 *               scheduled with backoff; live batches keep waiting
 *
 * A listener assigned by a planned move starts RECOVERING too, taking its
 * state from the shard that owns it (a hand-off) before catching up.
 *
 * PENDING -> ACTIVE on the first batch applied, or once the catch-up at
 * connect found that the engine has published nothing yet; ACTIVE -> RECOVERING
 * on a gap, an engine restart that needs history, or a resync; RECOVERING ->
 * ACTIVE once the gap is closed and the backlog applied; RECOVERING ->
 * FAILED on a failed attempt; FAILED -> RECOVERING when the backoff
 * expires.
 */
#ifndef KVI_SHARD_LISTENER_H
#define KVI_SHARD_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oplog.h"
#include "store.h"

typedef enum kvl_state {
	KVL_PENDING = 0,
	KVL_ACTIVE = 1,
	KVL_RECOVERING = 2,
	KVL_FAILED = 3,
	KVL_STALE = 4, /* the store cannot commit (kvg_state_in) */
} kvl_state;
#define KVL_STATE_COUNT 5

/* What a listener is doing about its sequence. */
typedef enum kvl_phase {
	KVL_STREAMING = 0, /* no recovery in progress */
	KVL_REPLAYING,     /* a replay request is being answered */
	KVL_FETCHING,      /* a /kv_recover fetch is in flight */
	KVL_BACKOFF,       /* waiting to retry a failed recovery */
	KVL_HANDOFF,       /* taking the state from the shard that owns it */
} kvl_phase;

/* A snapshot of a listener's entries, exact at mark, read in chunks by the
 * shard that takes the listener over. */
typedef struct kvl_snapshot {
	uint64_t *ext, *seq;
	uint8_t *tiers;
	size_t n;
	kvs_mark mark;
} kvl_snapshot;

/* A planned move, on both sides. The new owner takes the listener's state
 * from the old one (from), applies it, then catches up from its watermark;
 * the old owner answers from a snapshot (snap). */
typedef struct kvl_handoff {
	char *from;      /* the old owner's address; NULL: none */
	uint64_t token;  /* of the fetch in flight */
	uint64_t blocks; /* entries taken over */
	int tries;       /* snapshots taken, to close gaps no engine can */
	int fails;       /* fetches that failed */
	bool taken;      /* a snapshot was applied */
	bool waited;     /* gave a hand-off time to come, once */
	bool armed;      /* waiting for the SUB before asking */
	kvl_snapshot *snap;
} kvl_handoff;

/*
 * Every per-listener counter, once: its name and the help of its metric
 * family kvindex_shard_<name>_total (NULL: part of a labelled family,
 * ingest_load.c). The struct, the status RPC's Counters (kvindex.proto
 * has a field of the same name for each: one missing does not compile)
 * and the metrics are all made from this list.
 */
// clang-format off
#define KVL_COUNTERS(X) \
	X(batches, "Event batches applied.") \
	X(events, "Events applied.") \
	X(blocks_stored, "Block entries stored.") \
	X(blocks_removed, "Block entries removed.") \
	X(gaps, "Sequence gaps seen on live streams.") \
	X(replays_ok, NULL) \
	X(replays_failed, NULL) \
	X(recoveries_events, NULL) \
	X(recoveries_treedump, NULL) \
	X(recoveries_failed, NULL) \
	X(engine_restarts, "Engine restarts detected (seq went back).") \
	X(orphans, "BlockStored events whose parent was unknown.") \
	X(rank_mismatches, "Batches of another data-parallel rank.") \
	X(skipped_events, "Events of another KV group or REMOTE.") \
	X(malformed, "Batches whose envelope failed to decode.") \
	X(duplicates, "Batches dropped as already applied.") \
	X(block_size_mismatches, "Stored events of another block size.") \
	X(unknown_removes, "Removals of blocks the listener lacked.") \
	X(unrepaired_gaps, "Gaps no endpoint could repair.") \
	X(unknown_events, "Events of an unknown type, skipped.") \
	X(unreadable_events, "Events whose fields could not be read, skipped.") \
	X(unknown_extra_keys, "Stores with extra keys of unknown kinds.") \
	X(lost_batches, "Batches lost to an unreadable envelope.") \
	X(handoffs, "Listener states taken over from another shard.") \
	X(handoffs_failed, "Hand-offs that could not take the state.") \
	X(backlog_overflows, "Times a listener's queued live batches passed " \
			     "their budget and were dropped for a resync.")
// clang-format on

typedef struct kvl_counters {
#define KVL_COUNTER_FIELD(name, help) uint64_t name;
	KVL_COUNTERS(KVL_COUNTER_FIELD)
#undef KVL_COUNTER_FIELD
} kvl_counters;

/* A live batch waiting while the listener recovers. */
typedef struct kvl_pending_msg {
	struct kvl_pending_msg *next;
	uint64_t seq;
	size_t len;
	uint8_t payload[];
} kvl_pending_msg;

typedef struct kvl_listener {
	uint32_t lid;
	/* assignment (strings owned) */
	char *key, *pod, *model, *endpoint, *replay_ep, *recover_ep, *topic;
	char *lora_name;
	uint64_t instance_id;
	uint16_t dp_rank;
	uint32_t block_size;
	uint8_t *spec; /* the packed Listener message, as persisted */
	size_t spec_len;

	/* sequence */
	kvs_mark mark; /* watermark and fingerprint of the state */
	bool has_live; /* a live batch has arrived */
	uint64_t last_live;
	/* Continuity with the engine process behind the current connection
	 * is established: a batch at the watermark, or a whole state, came
	 * from it. Lost with the connection. */
	bool trusted;
	bool verify_skip; /* checking failed on this connection: don't retry */

	/* recovery */
	kvl_state state;
	kvl_phase phase;
	bool want_full;   /* the next recovery must rebuild everything */
	bool verify;      /* check the fingerprint before continuing */
	uint64_t gap_seq; /* the live seq that revealed the gap */
	uint64_t replay_from, replay_expect;
	bool replay_started;
	uint64_t replay_got; /* batches this replay delivered */
	bool replay_tried;   /* the replay could not repair this gap */
	bool fetch_full;     /* the fetch in flight asks for a tree dump */
	int attempts;
	int too_new;
	uint64_t fetch_token;
	uint32_t orphan_streak;
	kvl_pending_msg *backlog, *backlog_tail;
	size_t backlog_len, backlog_bytes;

	/* durability: ops since the last commit */
	kvo_rec rec;
	bool dirty;
	bool snapshot_due;
	uint64_t log_bytes; /* record bytes committed since the snapshot */

	kvl_handoff ho;

	kvl_counters c;
	char last_error[256];

	/* owned by the ingest thread's socket code */
	void *io;
} kvl_listener;

#endif /* KVI_SHARD_LISTENER_H */
