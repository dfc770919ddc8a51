/*
 * recovery.h - a listener's sequence as one state machine (recovery.c),
 * with its choices as pure functions (recovery_rules.c) and its queue of
 * waiting live batches (backlog.c).
 *
 * The states are kvl_rstate (listener.h, a comment each). The events that
 * drive them are kvq_event_kind; kvq_recovery_on is the one transition
 * function. What changes state, in short:
 *
 *   STREAMING      --live batch past a gap / no state--> a repair
 *                  --connected--> (a moment, KVQ_CONNECT_SUB_MS)
 *                    --timer, continuity checkable--> VERIFYING
 *                    --timer, no state--> a repair from seq 0
 *   VERIFYING      --the watermark's batch, same payload--> REPLAYING
 *                  --another payload, or nothing--> (engine restart,
 *                    cleared) a repair
 *                  --no answer in time--> STREAMING, unverifiable
 *   REPLAYING      --end, gap closed--> STREAMING (backlog applied)
 *                  --cut short after progress--> REPLAYING again
 *                  --failed--> a repair, the replay spent
 *   FETCH_EVENTS,  --answer applied--> STREAMING (backlog applied)
 *   FETCH_DUMP     --failed--> BACKOFF
 *   BACKOFF,       --timer--> a repair
 *   AWAIT_HANDOFF
 *   HANDOFF_ARMED  --connected--> (a moment) --timer--> HANDOFF
 *   HANDOFF        --taken--> STREAMING   --failed--> a repair or a start
 *
 * "A repair" is what kvq_plan_repair chooses: verify, replay, fetch the
 * gap's events or a whole dump, a newer hand-off snapshot, wait for a
 * hand-off, nothing (the backlog reaches the watermark), or give up (the
 * gap is counted and stepped over, the listener emptied and marked
 * incomplete). A live batch that reveals a restart
 * (its seq went back) clears the listener first, in any state.
 *
 * Recovery sees a listener's engine only through the thread that owns
 * the listeners (ingest), which hands it every event and does for it what
 * it asks (kvq_owner): a timer, a replay, a hand-off. /kv_recover fetches
 * it submits itself, to the owner's fetcher. Ingest thread only, like the
 * listeners.
 */
#ifndef KVI_SHARD_RECOVERY_H
#define KVI_SHARD_RECOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apply.h"
#include "index.h"
#include "listener.h"
#include "recover_fetch.h"
#include "wire.h"

/* ---- the shard's recovery (recovery.c) -------------------------------- */

/* What recovery asks of the thread that owns the listeners, called with
 * arg on that thread. */
typedef struct kvq_owner {
	void *arg;
	/* arm l's one timer (replay silence, backoff), which comes back as
	 * KVQ_EV_TIMER; ms < 0 disarms it */
	void (*timer)(void *arg, kvl_listener *l, int ms);
	/* ask l's replay socket for every batch from seq on, which come
	 * back as KVQ_EV_REPLAY and KVQ_EV_REPLAY_END; replay_stop drops
	 * the replay in flight */
	kvi_err (*replay_start)(void *arg, kvl_listener *l, uint64_t seq);
	void (*replay_stop)(void *arg, kvl_listener *l);
	/* ask l->ho.from for l's state, which comes back as
	 * KVQ_EV_HANDOFF_TAKEN or KVQ_EV_HANDOFF_FAILED */
	void (*handoff_ask)(void *arg, kvl_listener *l);
	/* the listener with id lid; NULL: gone */
	kvl_listener *(*listener)(void *arg, uint32_t lid);
} kvq_owner;

/* What recovery is configured with (ingest.h's kvg_config says each). */
typedef struct kvq_config {
	int replay_timeout_ms;
	int backoff_max_ms;
	uint32_t orphan_resync;
	uint64_t listener_max_entries;
	size_t backlog_max_bytes;
	size_t listener_backlog_max_bytes;
} kvq_config;

/* The live batches queued over every listener (backlog.c's). */
typedef struct kvq_backlog {
	size_t bytes;
	size_t peak; /* since memory was last given back */
} kvq_backlog;

/* The shard's recovery, embedded in its owner: what it applies with (the
 * index, a decoder and scratch arrays), the fetcher it submits to (the
 * owner's), the tokens of its fetches and the backlog's totals. */
typedef struct kvq_recovery {
	kvq_config cfg;
	kvq_owner owner;
	kvx_index *idx;
	kvi_decoder *dec;
	kva_scratch scratch;
	kvr_fetcher *fetcher; /* NULL until the owner starts one */
	uint64_t fetch_gen;
	kvq_backlog backlog;
} kvq_recovery;

/* kvq_recovery_init readies q, which applies to idx and asks owner; the
 * owner hands it its fetcher once started (kvq_recovery_use_fetcher).
 * kvq_recovery_fini frees what q holds, once no listener recovers. */
void kvq_recovery_init(kvq_recovery *q, const kvq_config *cfg, kvx_index *idx,
		       const kvq_owner *owner);
void kvq_recovery_use_fetcher(kvq_recovery *q, kvr_fetcher *f);
void kvq_recovery_fini(kvq_recovery *q);

/* ---- the transition function (recovery.c) --------------------------- */

typedef enum kvq_event_kind {
	KVQ_EV_LIVE,           /* a live batch: seq, payload, len, defer */
	KVQ_EV_CONNECTED,      /* the SUB connected to the engine */
	KVQ_EV_DISCONNECTED,   /* the SUB lost it */
	KVQ_EV_REPLAY,         /* a replayed batch: seq, payload, len */
	KVQ_EV_REPLAY_END,     /* the replay's end marker */
	KVQ_EV_FETCHED,        /* a /kv_recover answer: fetched */
	KVQ_EV_TIMER,          /* the listener's one timer */
	KVQ_EV_HANDOFF_TAKEN,  /* the old owner's snapshot was applied */
	KVQ_EV_HANDOFF_FAILED, /* the old owner gave no snapshot, for good */
} kvq_event_kind;

typedef struct kvq_event {
	kvq_event_kind kind;
	uint64_t seq;
	const void *payload;
	size_t len;
	/* KVQ_EV_LIVE: queue the batch rather than apply it now (the store
	 * is paused, or this turn's budget is spent) */
	bool defer;
	/* KVQ_EV_FETCHED: the answer, taken (freed) by the call */
	kvr_result *fetched;
} kvq_event;

/* kvq_recovery_on takes one event of listener l. */
void kvq_recovery_on(kvq_recovery *q, kvl_listener *l, const kvq_event *ev);

/* kvq_on_fetched finds the listener a fetcher result is for (none: a
 * listener gone) and gives it the result. */
void kvq_on_fetched(kvq_recovery *q, kvr_result *r);

/* kvq_recovery_begin starts a listener that has just been assigned or
 * loaded: without a state it fetches the engine's current one when it
 * can; otherwise it takes the stream as it comes. */
void kvq_recovery_begin(kvq_recovery *q, kvl_listener *l);

/* kvq_recovery_move_in starts a planned move: the listener asks the old
 * owner (l->ho.from) for its state once its SUB is connected, or after ms
 * at the latest. */
void kvq_recovery_move_in(kvq_recovery *q, kvl_listener *l, int ms);

/* The wait for the SUB before a planned move asks anyway, and the moment
 * given to a connected SUB's subscription to reach the engine, in ms. */
#define KVQ_HANDOFF_CONNECT_WAIT_MS 2000
#define KVQ_HANDOFF_SUB_MS          100

/* The moment a listener gives its SUB's subscription to reach the engine
 * before it catches up on a new connection, in ms. ZeroMQ says CONNECTED
 * at the TCP connect; the subscription follows the handshake. A catch-up
 * answered before it takes effect would miss a batch published in
 * between, which the live stream does not deliver either: the listener
 * would lack it until the engine's next batch, however long it idles. */
#define KVQ_CONNECT_SUB_MS 50

/* kvq_recovery_reset drops the listener's recovery and backlog. */
void kvq_recovery_reset(kvq_recovery *q, kvl_listener *l);

/* kvq_backlog_apply applies at most max queued batches of a listener in
 * step, in order (a gap among them starts a repair); returns how many it
 * took. */
size_t kvq_backlog_apply(kvq_recovery *q, kvl_listener *l, size_t max);

/* ---- the rules, pure (recovery_rules.c) ------------------------------ */

/* What to do with a live batch while streaming. */
typedef enum kvq_verdict {
	KVQ_APPLY,        /* the next one: apply it */
	KVQ_DROP,         /* at or below the watermark: a duplicate */
	KVQ_NEED_HISTORY, /* no state, and not seq 0: the engine's history */
	KVQ_VERIFY,       /* continuity unknown and checkable: check first */
	KVQ_GAP,          /* past the next one: repair the gap */
	KVQ_FOREIGN,      /* another rank's, dropped unsequenced (only
			   * recovery_live.c finds it out) */
} kvq_verdict;

/* kvq_judge says what batch seq is to l, streaming. */
kvq_verdict kvq_judge(const kvl_listener *l, uint64_t seq);

/* kvq_is_restart says whether live batch seq shows the engine restarted:
 * its seq went back on one connection, or, continuity unknown, it is at
 * or below the watermark. */
bool kvq_is_restart(const kvl_listener *l, uint64_t seq);

/* kvq_can_verify says whether continuity can be checked by replaying the
 * batch at the watermark. */
bool kvq_can_verify(const kvl_listener *l);

typedef enum kvq_repair {
	KVQ_REPAIR_VERIFY,        /* replay from the watermark, comparing */
	KVQ_REPAIR_NONE,          /* the backlog reaches the watermark */
	KVQ_REPAIR_REPLAY,        /* replay from watermark + 1 (or 0) */
	KVQ_REPAIR_EVENTS,        /* /kv_recover the gap's events */
	KVQ_REPAIR_DUMP,          /* /kv_recover the whole state */
	KVQ_REPAIR_HANDOFF,       /* a newer snapshot from the old owner */
	KVQ_REPAIR_AWAIT_HANDOFF, /* wait once for a hand-off */
	KVQ_REPAIR_GIVE_UP,       /* step over the gap, counted */
} kvq_repair;

typedef struct kvq_plan {
	kvq_repair repair;
	bool need_full; /* what l->recovery.need_full becomes */
} kvq_plan;

/* kvq_plan_repair chooses the next repair of l's gap; verify: its
 * continuity is to be checked first. */
kvq_plan kvq_plan_repair(const kvl_listener *l, bool verify);

/* Snapshots a move may take, the later ones to close gaps that no engine
 * endpoint can. */
#define KVQ_HANDOFF_TRIES 50

/* kvq_handoff_can_retry says whether a newer snapshot may close a gap of
 * l: it came by a hand-off and has tries left. */
static inline bool
kvq_handoff_can_retry(const kvl_listener *l)
{
	return l->ho.from != NULL && l->ho.taken &&
	       l->ho.tries < KVQ_HANDOFF_TRIES;
}

/* kvq_state_of is what status reports for l's recovery state. */
kvl_state kvq_state_of(const kvl_listener *l);

/* kvq_rstate_name names a recovery state, for logs and tests. */
const char *kvq_rstate_name(kvl_rstate s);

/* ---- the backlog (backlog.c) ----------------------------------------- */

/* kvq_backlog_push queues a live batch (checked: its rank was read, and
 * the restart it could reveal looked for); past the listener's or the
 * shard's budget it drops the whole queue instead (counted, logged, to
 * be repaired from the watermark). */
void kvq_backlog_push(kvq_recovery *q, kvl_listener *l, uint64_t seq,
		      const void *payload, size_t len, bool checked);
/* kvq_backlog_pop takes the oldest queued batch (NULL: none); the caller
 * frees it or gives it back with kvq_backlog_unpop. */
kvl_pending_msg *kvq_backlog_pop(kvq_recovery *q, kvl_listener *l);
void kvq_backlog_unpop(kvq_recovery *q, kvl_listener *l, kvl_pending_msg *m);
void kvq_backlog_clear(kvq_recovery *q, kvl_listener *l);

/* kvq_backlog_bytes is what every listener has queued. */
size_t kvq_backlog_bytes(const kvq_recovery *q);

/* kvq_backlog_give_back returns to the system the memory a burst of
 * queued batches took, once the queues are empty again: the allocator
 * would otherwise keep it. */
void kvq_backlog_give_back(kvq_recovery *q);

#endif /* KVI_SHARD_RECOVERY_H */
