/*
 * listener.h - one engine rank as the shard sees it.
 *
 * A listener is the unit a shard owns: the rank's assignment (endpoints,
 * model, block size), its sequence position (watermark, fingerprint), its
 * recovery state, what it has applied since the last group commit, and its
 * counters. Listeners belong to the ingest thread: only that thread reads
 * or writes them (status requests are answered on it).
 *
 * States (what status reports; kvq_state_of gives it from the recovery
 * state, recovery.h):
 *
 *   PENDING     assigned and subscribed, not yet known to be in step
 *   ACTIVE      applying the live stream in order
 *   RECOVERING  closing a gap: a replay, a /kv_recover fetch or a
 *               hand-off is in flight; live batches wait in the
 *               listener's backlog
 *   FAILED      the last recovery attempt failed; the next one is
 *               scheduled with backoff; live batches keep waiting
 *   STALE       the store cannot commit (status and the totals say so)
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
	KVL_STALE = 4, /* the store cannot commit */
} kvl_state;
#define KVL_STATE_COUNT 5

/*
 * Where a listener's recovery stands: one state at a time, changed only by
 * recovery.c (its header draws the transitions).
 */
typedef enum kvl_rstate {
	/* Live batches are judged as they come (kvq_judge): applied in
	 * order, duplicates dropped, a gap starts a repair. */
	KVL_R_STREAMING = 0,
	/* A replay from the watermark is in flight to compare its batch
	 * with the fingerprint of the one applied: is the engine behind
	 * this connection the process we followed? */
	KVL_R_VERIFYING,
	/* A replay is in flight from the start of the gap (0 without a
	 * state); its batches are applied in order. */
	KVL_R_REPLAYING,
	/* /kv_recover?start=&end= for the gap is in flight. */
	KVL_R_FETCH_EVENTS,
	/* /kv_recover for the engine's whole state is in flight. */
	KVL_R_FETCH_DUMP,
	/* A repair failed; the timer tries again (backoff). */
	KVL_R_BACKOFF,
	/* No state and nothing to take one from: a hand-off may be on its
	 * way (this shard restarted in one), so it waits once, a moment. */
	KVL_R_AWAIT_HANDOFF,
	/* A planned move: waiting for the SUB to connect (and a moment for
	 * the subscription to reach the engine) before asking the old
	 * owner, so that no batch falls between its snapshot and ours. */
	KVL_R_HANDOFF_ARMED,
	/* The old owner's snapshot is being fetched (handoff.c). */
	KVL_R_HANDOFF,
} kvl_rstate;
#define KVL_RSTATE_COUNT 9

/* A listener's recovery: its state and what it knows on the way. */
typedef struct kvl_recovery {
	kvl_rstate state;
	/* Continuity with the engine process behind the current connection
	 * is established: a batch at the watermark, or a whole state, came
	 * from it. Lost with the connection. */
	bool trusted;
	/* Checking continuity failed on this connection: batches are judged
	 * as if the rank had no replay socket. Lost with the connection. */
	bool unverifiable;
	/* The SUB connected a moment ago, and the timer is the catch-up's
	 * (recovery.c's on_connected). Dropped when the timer is armed for
	 * anything else, and with the connection. */
	bool catch_up_due;
	/* The gap: the live seq that revealed it (the repair must reach
	 * it), whether only the engine's whole state repairs it, and
	 * whether the replay socket already failed to. */
	uint64_t gap_seq;
	bool need_full;
	bool replay_spent;
	/* The replay in flight: where it started, the next seq it owes,
	 * whether it has delivered its first batch, how many it has. */
	uint64_t replay_from, replay_expect, replay_got;
	bool replay_started;
	/* The fetch in flight, failed attempts (the backoff), and TooNew
	 * answers in a row (enough of them ask for a dump). */
	uint64_t fetch_token;
	int attempts, too_new;
} kvl_recovery;

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
	X(skipped_events, "Events of REMOTE locality, or of a KV cache " \
			  "group out of range or never stored.") \
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
			     "their budget and were dropped for a resync.") \
	X(recoveries_too_big, "/kv_recover answers refused whole for their " \
			      "size: more blocks than --listener-max-entries " \
			      "allows, or a body over 1 GiB.") \
	X(unknown_kinds, "Stores of a KV cache group of a kind this build " \
			 "does not know, judged as full attention.")
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
	bool checked; /* its rank read, a restart it revealed acted on */
	size_t len;
	uint8_t payload[];
} kvl_pending_msg;

/* The listeners with ops to commit, by id (the ingest's; see kvl_touch). */
typedef struct kvl_dirtyq {
	uint32_t *lids;
	size_t n, cap;
} kvl_dirtyq;

typedef struct kvl_listener {
	uint32_t lid;
	struct kvl_listener *key_next; /* the ingest's table by key */
	/* assignment (strings owned) */
	char *key, *pod, *model, *endpoint, *replay_ep, *recover_ep, *topic;
	char *lora_name;
	uint64_t instance_id;
	uint16_t dp_rank;
	uint32_t block_size;
	uint8_t *spec; /* the packed Listener message, as persisted */
	size_t spec_len;
	/* KV cache groups seen (a hybrid model's): the highest group_idx
	 * stored, plus one; 1 for a plain listener. Group g's blocks are in
	 * the index's listener kvx_group_lid(idx, lid, g). */
	uint32_t n_groups;

	/* sequence */
	kvs_mark mark; /* watermark and fingerprint of the state */
	bool has_live; /* a live batch has arrived */
	uint64_t last_live;
	uint32_t orphan_streak;

	kvl_recovery recovery;
	/* live batches waiting for the recovery (backlog.c) */
	kvl_pending_msg *backlog, *backlog_tail;
	size_t backlog_len, backlog_bytes;

	/* durability: ops since the last commit; a listener that becomes
	 * dirty joins dirtyq (kvl_touch), so that a commit visits only
	 * those */
	kvo_rec rec;
	bool dirty;
	kvl_dirtyq *dirtyq;
	bool snapshot_due;
	uint64_t log_bytes; /* record bytes committed since the snapshot */

	kvl_handoff ho;

	kvl_counters c;
	char last_error[256];
	/* the last batch of another rank on this rank's socket: its rank and
	 * when (kvi_now_ms; 0: never), and when that was last logged */
	uint16_t foreign_rank;
	int64_t foreign_at_ms, foreign_logged_ms;
	/* the last BlockStored of another block size than the listener's:
	 * its block size and when, and when that was last logged */
	uint32_t foreign_bs;
	int64_t foreign_bs_at_ms, foreign_bs_logged_ms;

	/* owned by the ingest thread's socket code */
	void *io;
} kvl_listener;

/* kvl_touch marks l as having ops to commit. */
void kvl_touch(kvl_listener *l);

/* kvl_error sets l's last_error, what /workers and status show. */
void kvl_error(kvl_listener *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* kvl_log logs event of l at info, kvl_warn at warn, for what an
 * operator must act on or know; any thread. */
void kvl_log(kvl_listener *l, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void kvl_warn(kvl_listener *l, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* KVI_SHARD_LISTENER_H */
