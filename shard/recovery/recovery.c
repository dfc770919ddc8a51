/*
 * recovery.c - a listener's sequence: in-order application, duplicates,
 * engine restarts, and gap repair.
 *
 * The watermark w is the seq of the last batch applied. A live batch s:
 *
 *   s == w + 1        apply it
 *   s <= w            a duplicate (a replay already applied it): drop
 *   s >  w + 1        a gap: repair [w + 1, s) - from the replay socket if
 *                     the rank has one, else (or when the replay cannot
 *                     cover it) from /kv_recover - holding live batches in
 *                     the listener's backlog meanwhile
 *   s <= last live s  the seq went backwards on one connection: the
 *                     engine restarted; clear the listener and rebuild it
 *
 * A (re)connection is special: an engine restarted while we were not
 * connected may already have published past w, so continuity with the
 * process behind the new connection is checked before trusting it. With a
 * replay socket and a fingerprint of batch w, the listener replays from w
 * once it is connected and its subscription has had a moment to reach the
 * engine (KVQ_CONNECT_SUB_MS), and compares: the same payload means the same
 * engine process, and the replay also catches up what was missed; another
 * payload, or an empty buffer, means a restart. Without them, a first
 * batch s == w + 1 is taken as continuous, s <= w as a restart, and
 * anything else rebuilds the listener from a tree dump. A listener
 * without a watermark (new, or cleared by a restart) needs the engine's
 * whole history: seq 0 onwards from the replay buffer if it still holds
 * seq 0 (an empty buffer: the engine has published nothing), else a tree
 * dump.
 *
 * Repairs that fail are retried with exponential backoff (FAILED state);
 * a gap no endpoint can repair is counted, logged, and stepped over, the
 * listener emptied and marked incomplete (give_up says why).
 *
 * A batch of another data-parallel rank (an engine that publishes several
 * ranks on one socket) is never sequenced: its seq belongs to that rank's
 * numbering, and would read here as a restart, a duplicate or a gap.
 *
 * recovery.h draws the states and their transitions; kvq_recovery_on
 * takes every event, and each state's handling is below under its name.
 * The choices (what a batch is, which repair) are recovery_rules.c's; the
 * live batches in order (applying, duplicates, restarts, the queue) are
 * recovery_live.c's.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"
#include "apply.h"
#include "log.h"
#include "recovery_int.h"

#define KVQ_BACKOFF_MIN_MS 100
#define KVQ_TOO_NEW_FULL   3 /* TooNew answers before asking for a dump */

/* How long a listener with no state and no engine to repair it from waits
 * for a hand-off before it takes the stream as it comes. */
#define KVQ_HANDOFF_WAIT_MS 3000

static void finish(kvq_recovery *q, kvl_listener *l);
static void begin_fetch(kvq_recovery *q, kvl_listener *l, bool full);

void
kvq_recovery_init(kvq_recovery *q, const kvq_config *cfg, kvx_index *idx,
		  const kvq_owner *owner)
{
	*q = (kvq_recovery){.cfg = *cfg, .owner = *owner, .idx = idx};
	q->dec = kvi_decoder_alloc();
}

void
kvq_recovery_use_fetcher(kvq_recovery *q, kvr_fetcher *f)
{
	q->fetcher = f;
}

void
kvq_recovery_fini(kvq_recovery *q)
{
	kvi_decoder_free(q->dec);
	q->dec = NULL;
	kva_scratch_fini(&q->scratch);
}

/* ---- what the owner does for recovery (kvq_owner) ------------------- */

/* arm_timer arms l's one timer; whatever it was armed for before, a
 * catch-up due included, is dropped. */
static void
arm_timer(kvq_recovery *q, kvl_listener *l, int ms)
{
	l->recovery.catch_up_due = false;
	q->owner.timer(q->owner.arg, l, ms);
}

static kvi_err
replay_start(kvq_recovery *q, kvl_listener *l, uint64_t seq)
{
	return q->owner.replay_start(q->owner.arg, l, seq);
}

static void
replay_stop(kvq_recovery *q, kvl_listener *l)
{
	q->owner.replay_stop(q->owner.arg, l);
}

static void
handoff_ask(kvq_recovery *q, kvl_listener *l)
{
	q->owner.handoff_ask(q->owner.arg, l);
}

/* ---- the end of a repair -------------------------------------------- */

/* finish ends a repair: the listener is in step (unless a batch on the
 * way asked for a whole state, which comes first), and what it held
 * meanwhile is applied. */
static void
finish(kvq_recovery *q, kvl_listener *l)
{
	kvl_recovery *r = &l->recovery;
	arm_timer(q, l, -1);
	r->state = KVL_R_STREAMING;
	if (r->need_full && l->recover_ep != NULL) {
		/* A batch applied on the way was lost or orphaned: only
		 * the engine's whole state repairs it. */
		begin_fetch(q, l, true);
		return;
	}
	r->trusted = true; /* what was applied came from this engine */
	r->attempts = 0;
	r->too_new = 0;
	r->replay_spent = false;
	kvq_backlog_apply(q, l, SIZE_MAX);
}

/* give_up steps over a gap nothing can repair. What the listener held
 * is dropped: the batches it missed may have evicted any of it - all of
 * it, when the gap is an engine restart it could not see (an engine
 * without a replay socket restarted while this shard was down) - and an
 * entry the engine no longer holds would be answered as a hit the engine
 * cannot give. A router that sends a request to a rank for a phantom
 * prefix pays a full prefill there while trusting it; a missed prefix
 * only costs the hit. So the listener starts again from the gap with
 * what the engine stores from there on, and is marked incomplete (in its
 * status, /workers and durably in its mark) until a whole state or an
 * AllBlocksCleared makes it exact again. */
/* drop_incomplete drops what l holds for a loss it steps over (what,
 * why), and marks it incomplete at watermark wm (none: no watermark). */
static void
drop_incomplete(kvq_recovery *q, kvl_listener *l, const char *what,
		const char *why, bool has_wm, uint64_t wm)
{
	l->c.unrepaired_gaps++;
	size_t dropped = kvx_listener_entries(q->idx, l->lid);
	char text[160];
	snprintf(text, sizeof(text), "%s cannot be repaired (%s)", what, why);
	kvl_error(l,
		  "%s: %zu entries dropped, incomplete until the engine's "
		  "whole state is taken",
		  text, dropped);
	kvl_warn(l, "gap_unrepaired", "what=\"%s\" entries_dropped=%zu", what,
		 dropped);
	kva_clear(q->idx, &q->scratch, l);
	if (has_wm) {
		l->mark =
		    (kvs_mark){.has_wm = true, .wm = wm, .incomplete = true};
	}
}

static void
give_up(kvq_recovery *q, kvl_listener *l)
{
	kvl_recovery *r = &l->recovery;
	char what[64];
	snprintf(what, sizeof(what), "gap before seq %" PRIu64, r->gap_seq);
	/* batches before gap_seq were missed */
	drop_incomplete(q, l, what,
			l->replay_ep == NULL && l->recover_ep == NULL
			    ? "no replay or recover endpoint"
			    : "the replay buffer does not reach back far "
			      "enough",
			r->gap_seq > 0, r->gap_seq - 1);
	r->need_full = false;
	finish(q, l);
}

void
kvq_lost(kvq_recovery *q, kvl_listener *l, uint64_t seq)
{
	char what[64];
	snprintf(what, sizeof(what), "batch %" PRIu64 " unreadable", seq);
	drop_incomplete(q, l, what,
			"no recover endpoint; a replay returns the same bytes",
			true, seq);
}

static void
backoff(kvq_recovery *q, kvl_listener *l)
{
	kvl_recovery *r = &l->recovery;
	r->attempts++;
	long ms = KVQ_BACKOFF_MIN_MS;
	for (int i = 1; i < r->attempts && ms < q->cfg.backoff_max_ms; i++) {
		ms *= 2;
	}
	if (ms > q->cfg.backoff_max_ms) {
		ms = q->cfg.backoff_max_ms;
	}
	r->state = KVL_R_BACKOFF;
	arm_timer(q, l, (int)ms);
}

/* ---- VERIFYING and REPLAYING ------------------------------------------ */

static void
begin_replay(kvq_recovery *q, kvl_listener *l, uint64_t from, bool verify)
{
	kvl_recovery *r = &l->recovery;
	r->state = verify ? KVL_R_VERIFYING : KVL_R_REPLAYING;
	r->replay_from = from;
	r->replay_expect = from;
	r->replay_started = false;
	r->replay_got = 0;
	if (replay_start(q, l, from) != KVI_OK) {
		l->c.replays_failed++;
		r->replay_spent = true;
		r->state = KVL_R_STREAMING;
		kvq_repair_gap(q, l, verify);
		return;
	}
	arm_timer(q, l, q->cfg.replay_timeout_ms);
}

/* replay_failed ends a replay that did not repair the gap. unchecked:
 * it was checking continuity, which stays unknown on this connection, so
 * batches are judged from here as without a replay socket. */
static void
replay_failed(kvq_recovery *q, kvl_listener *l, bool unchecked, const char *why)
{
	kvl_recovery *r = &l->recovery;
	replay_stop(q, l);
	arm_timer(q, l, -1);
	l->c.replays_failed++;
	r->replay_spent = true;
	kvl_error(l, "replay from %" PRIu64 ": %s", r->replay_from, why);
	char quoted[600];
	kvl_log(l, "replay_failed", "from=%" PRIu64 " reason=%s",
		r->replay_from, kvi_log_quote(quoted, sizeof(quoted), why));
	r->state = KVL_R_STREAMING;
	if (unchecked) {
		r->unverifiable = true;
		r->replay_spent = false;
		kvq_backlog_apply(q, l, SIZE_MAX);
		return;
	}
	if (r->replay_started && l->mark.has_wm &&
	    l->mark.wm + 1 > r->replay_from) {
		/* Cut short after it delivered something - an engine's
		 * ROUTER drops what passes its high-water mark (1,000
		 * messages) - : ask again from where it got to. Each round
		 * moves the watermark on, so this ends. */
		kvl_log(l, "replay_again", "from=%" PRIu64, l->mark.wm + 1);
		begin_replay(q, l, l->mark.wm + 1, false);
		return;
	}
	kvq_repair_gap(q, l, false);
}

/* verified takes the replayed batch a VERIFYING listener asked for:
 * the one at the watermark, compared with the fingerprint of the one
 * applied. */
static void
verified(kvq_recovery *q, kvl_listener *l, uint64_t seq, const void *payload,
	 size_t len)
{
	kvl_recovery *r = &l->recovery;
	if (seq != l->mark.wm) {
		/* The buffer no longer reaches back to the watermark: with
		 * continuity unknown, rebuild from a tree dump. */
		r->need_full = true;
		replay_failed(q, l, false,
			      "the watermark's batch is no longer "
			      "buffered, continuity unknown");
		return;
	}
	if (XXH3_64bits(payload, len) == l->mark.fp) {
		/* The same engine: the replay goes on as a catch-up. */
		r->trusted = true;
		r->state = KVL_R_REPLAYING;
		r->replay_started = true;
		r->replay_expect = seq + 1;
		return;
	}
	/* Same seq, other payload: another engine process. */
	replay_stop(q, l);
	kvq_restarted(q, l, "fingerprint");
}

/* replayed takes a replayed batch of a REPLAYING listener. */
static void
replayed(kvq_recovery *q, kvl_listener *l, uint64_t seq, const void *payload,
	 size_t len)
{
	kvl_recovery *r = &l->recovery;
	if (!r->replay_started) {
		r->replay_started = true;
		if (seq > r->replay_expect) {
			char why[96];
			snprintf(why, sizeof(why),
				 "the buffer starts at %" PRIu64, seq);
			replay_failed(q, l, false, why);
			return;
		}
	}
	if (seq < r->replay_expect) {
		return;
	}
	if (seq > r->replay_expect) {
		replay_failed(q, l, false, "replay skipped batches");
		return;
	}
	r->replay_expect = seq + 1;
	kvq_apply(q, l, seq, payload, len);
}

/* replay_end judges a replay by what it delivered before its end
 * marker. */
static void
replay_end(kvq_recovery *q, kvl_listener *l)
{
	kvl_recovery *r = &l->recovery;
	replay_stop(q, l);
	bool empty = r->replay_got == 0;
	if (r->state == KVL_R_VERIFYING && empty) {
		/* The engine has no batch at all, not even the one at the
		 * watermark it published to us: a new process. */
		kvq_restarted(q, l, "empty_replay");
	} else if (r->state == KVL_R_VERIFYING) {
		r->need_full = true;
		replay_failed(q, l, false,
			      "the watermark's batch was not "
			      "replayed, continuity unknown");
	} else if (!l->mark.has_wm && empty) {
		/* From seq 0 and nothing: the engine has published nothing;
		 * the next batch is seq 0. */
		l->c.replays_ok++;
		finish(q, l);
	} else if (l->mark.has_wm && l->mark.wm + 1 >= r->gap_seq) {
		l->c.replays_ok++;
		finish(q, l);
	} else {
		replay_failed(q, l, false, "ended before the gap closed");
	}
}

/* ---- FETCH_EVENTS and FETCH_DUMP ------------------------------------ */

static void
begin_fetch(kvq_recovery *q, kvl_listener *l, bool full)
{
	kvl_recovery *r = &l->recovery;
	char url[1024];
	size_t n = strlen(l->recover_ep);
	while (n > 0 && l->recover_ep[n - 1] == '/') {
		n--;
	}
	if (full) {
		snprintf(url, sizeof(url), "%.*s/kv_recover", (int)n,
			 l->recover_ep);
	} else {
		snprintf(url, sizeof(url),
			 "%.*s/kv_recover?start=%" PRIu64 "&end=%" PRIu64,
			 (int)n, l->recover_ep, l->mark.wm + 1, r->gap_seq);
	}
	r->fetch_token =
	    (uint64_t)l->lid << 32 | (++q->fetch_gen & 0xffffffffu);
	r->state = full ? KVL_R_FETCH_DUMP : KVL_R_FETCH_EVENTS;
	/* a dump replaces the listener's entries, events add to them */
	uint64_t max = q->cfg.listener_max_entries;
	uint64_t have = full ? 0 : kvx_listener_entries(q->idx, l->lid);
	kvi_err rv = kvr_fetcher_submit(q->fetcher, r->fetch_token, url,
					have < max ? max - have : 0);
	if (rv != KVI_OK) {
		l->c.recoveries_failed++;
		kvl_error(l, "cannot fetch %s: %s", url, kvi_strerror(rv));
		backoff(q, l);
	}
}

static void fetch_failed(kvq_recovery *q, kvl_listener *l, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
fetch_failed(kvq_recovery *q, kvl_listener *l, const char *fmt, ...)
{
	char why[sizeof(l->last_error)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	kvl_error(l, "%s", why);
	l->c.recoveries_failed++;
	char quoted[600];
	kvl_log(l, "recover_failed", "attempt=%d error=%s",
		l->recovery.attempts + 1,
		kvi_log_quote(quoted, sizeof(quoted), l->last_error));
	backoff(q, l);
}

static void
fetched_events(kvq_recovery *q, kvl_listener *l, const kvr_response *resp)
{
	kvl_recovery *r = &l->recovery;
	if (r->state == KVL_R_FETCH_DUMP || !l->mark.has_wm) {
		fetch_failed(q, l, "asked for a tree dump, got Events");
		return;
	}
	if (resp->n_events > 0 && resp->events[0].event_id > l->mark.wm + 1) {
		/* The engine no longer has the start of the gap. */
		r->need_full = true;
		l->c.recoveries_failed++;
		r->state = KVL_R_STREAMING;
		kvq_repair_gap(q, l, false);
		return;
	}
	if (resp->last_event_id + 1 < r->gap_seq) {
		fetch_failed(q, l,
			     "Events end at %" PRIu64 ", the gap at %" PRIu64,
			     resp->last_event_id, r->gap_seq);
		return;
	}
	kva_recover(q->idx, &q->scratch, l, resp);
	l->c.recoveries_events++;
	finish(q, l);
}

/* fetch_refused takes an answer refused for its size (res, freed
 * here): nothing of it is applied, and the listener says why. */
static void
fetch_refused(kvq_recovery *q, kvl_listener *l, kvr_result *res)
{
	char quoted[400];
	l->c.recoveries_too_big++;
	kvi_log(KVI_LOG_WARN, "recover_refused",
		"listener=%s blocks=%" PRIu64 " bytes=%" PRIu64
		" max_entries=%" PRIu64 " reason=%s",
		l->key, res->blocks, res->body_bytes,
		q->cfg.listener_max_entries,
		kvi_log_quote(quoted, sizeof(quoted), res->message));
	char bound[64] = ""; /* too many blocks, not a body past 1 GiB */
	if (res->body_bytes <= KVR_FETCH_BODY_MAX) {
		snprintf(bound, sizeof(bound),
			 " (--listener-max-entries %" PRIu64 ")",
			 q->cfg.listener_max_entries);
	}
	fetch_failed(q, l, "/kv_recover refused, none of it applied: %s%s",
		     res->message, bound);
	kvr_result_free(res);
}

/* fetched takes a fetching listener's answer (r, freed here). */
static void
fetched(kvq_recovery *q, kvl_listener *l, kvr_result *res)
{
	kvl_recovery *r = &l->recovery;
	if ((r->state != KVL_R_FETCH_EVENTS && r->state != KVL_R_FETCH_DUMP) ||
	    r->fetch_token != res->token) {
		kvr_result_free(res);
		return; /* an answer to an older ask */
	}
	if (res->err == KVI_ETOOBIG) {
		fetch_refused(q, l, res);
		return;
	}
	if (res->err != KVI_OK) {
		fetch_failed(q, l, "/kv_recover: %s (%s)",
			     kvi_strerror(res->err), res->message);
		kvr_result_free(res);
		return;
	}
	const kvr_response *resp = kvr_parser_result(res->parser);
	switch (resp->kind) {
	case KVR_KIND_TREE_DUMP:
		kva_recover(q->idx, &q->scratch, l, resp);
		l->c.recoveries_treedump++;
		r->need_full = false;
		l->orphan_streak = 0;
		kvl_log(l, "recovered",
			"kind=tree_dump events=%zu watermark=%" PRIu64,
			resp->n_events, resp->last_event_id);
		finish(q, l);
		break;
	case KVR_KIND_EVENTS:
		fetched_events(q, l, resp);
		break;
	case KVR_KIND_TOO_NEW:
		if (++r->too_new >= KVQ_TOO_NEW_FULL) {
			r->need_full = true;
		}
		fetch_failed(q, l,
			     "TooNew: asked %" PRIu64 "..%" PRIu64
			     ", newest %" PRIu64,
			     resp->requested_start, resp->requested_end,
			     resp->newest_available);
		break;
	case KVR_KIND_INVALID_RANGE:
		r->need_full = true;
		fetch_failed(q, l, "InvalidRange %" PRIu64 "..%" PRIu64,
			     resp->start_id, resp->end_id);
		break;
	default:
		fetch_failed(
		    q, l, "Error: %.*s",
		    (int)(resp->message_len > 200 ? 200 : resp->message_len),
		    resp->message != NULL ? resp->message : "");
		break;
	}
	kvr_result_free(res);
}

void
kvq_on_fetched(kvq_recovery *q, kvr_result *r)
{
	kvl_listener *l =
	    q->owner.listener(q->owner.arg, (uint32_t)(r->token >> 32));
	if (l == NULL) {
		kvr_result_free(r);
		return; /* a listener gone */
	}
	kvq_recovery_on(q, l,
			&(kvq_event){.kind = KVQ_EV_FETCHED, .fetched = r});
}

/* ---- choosing a repair --------------------------------------------- */

/* kvq_repair_gap starts the repair kvq_plan_repair chooses. */
void
kvq_repair_gap(kvq_recovery *q, kvl_listener *l, bool verify)
{
	kvl_recovery *r = &l->recovery;
	arm_timer(q, l, -1);
	kvq_plan p = kvq_plan_repair(l, verify);
	r->need_full = p.need_full;
	switch (p.repair) {
	case KVQ_REPAIR_VERIFY:
		begin_replay(q, l, l->mark.wm, true);
		break;
	case KVQ_REPAIR_NONE:
		finish(q, l);
		break;
	case KVQ_REPAIR_REPLAY:
		begin_replay(q, l, l->mark.has_wm ? l->mark.wm + 1 : 0, false);
		break;
	case KVQ_REPAIR_EVENTS:
	case KVQ_REPAIR_DUMP:
		begin_fetch(q, l, p.repair == KVQ_REPAIR_DUMP);
		break;
	case KVQ_REPAIR_HANDOFF:
		r->state = KVL_R_HANDOFF;
		handoff_ask(q, l);
		break;
	case KVQ_REPAIR_AWAIT_HANDOFF:
		l->ho.waited = true;
		r->state = KVL_R_AWAIT_HANDOFF;
		arm_timer(q, l, KVQ_HANDOFF_WAIT_MS);
		break;
	case KVQ_REPAIR_GIVE_UP:
		give_up(q, l);
		break;
	}
}

void
kvq_recovery_begin(kvq_recovery *q, kvl_listener *l)
{
	if (!l->mark.has_wm &&
	    (l->replay_ep != NULL || l->recover_ep != NULL)) {
		l->recovery.gap_seq = 0;
		kvq_repair_gap(q, l, false);
	} else {
		finish(q, l);
	}
}

void
kvq_recovery_move_in(kvq_recovery *q, kvl_listener *l, int ms)
{
	l->recovery.state = KVL_R_HANDOFF_ARMED;
	arm_timer(q, l, ms);
}

void
kvq_recovery_reset(kvq_recovery *q, kvl_listener *l)
{
	kvl_recovery *r = &l->recovery;
	replay_stop(q, l);
	arm_timer(q, l, -1);
	if (r->state == KVL_R_FETCH_EVENTS || r->state == KVL_R_FETCH_DUMP) {
		kvr_fetcher_cancel(q->fetcher, r->fetch_token);
	}
	r->state = KVL_R_STREAMING;
	r->need_full = false;
	r->replay_spent = false;
	r->attempts = 0;
	r->too_new = 0;
	kvq_backlog_clear(q, l);
}

/* ---- the transition function ----------------------------------------- */

/* catch_up_wanted: a new connection is to be checked and caught up with
 * now rather than at the engine's next batch, since an idle engine may not
 * publish for a long time: nothing since the connection did (trusted), no
 * repair runs (it catches up), and there is either a state to check or
 * none and an endpoint to take one from. */
static bool
catch_up_wanted(const kvl_listener *l)
{
	const kvl_recovery *r = &l->recovery;
	if (r->trusted || r->state != KVL_R_STREAMING) {
		return false;
	}
	return (!r->unverifiable && kvq_can_verify(l)) ||
	       (!l->mark.has_wm &&
		(l->replay_ep != NULL || l->recover_ep != NULL));
}

/* catch_up checks the process behind the connection, and catches up. */
static void
catch_up(kvq_recovery *q, kvl_listener *l)
{
	kvl_recovery *r = &l->recovery;
	if (!catch_up_wanted(l)) {
		return;
	}
	if (!r->unverifiable && kvq_can_verify(l)) {
		r->gap_seq = l->mark.wm + 1;
		kvq_repair_gap(q, l, true);
	} else {
		/* No state yet: fetch the engine's current one. */
		r->gap_seq = 0;
		kvq_repair_gap(q, l, false);
	}
}

/* on_connected: the SUB is connected, its subscription not yet at the
 * engine. A catch-up asked now could be answered before it is, and a
 * batch published in between would come by neither; so the catch-up
 * waits a moment on the timer (KVQ_CONNECT_SUB_MS), as a planned move
 * does. A live batch meanwhile starts the repair it needs itself, which
 * takes the timer, and the catch-up is no longer due. */
static void
on_connected(kvq_recovery *q, kvl_listener *l)
{
	kvl_recovery *r = &l->recovery;
	if (r->state == KVL_R_HANDOFF_ARMED) {
		/* give the subscription a moment to reach the engine */
		arm_timer(q, l, KVQ_HANDOFF_SUB_MS);
		return;
	}
	if (catch_up_wanted(l)) {
		arm_timer(q, l, KVQ_CONNECT_SUB_MS);
		r->catch_up_due = true;
	}
}

static void
on_disconnected(kvq_recovery *q, kvl_listener *l)
{
	kvl_recovery *r = &l->recovery;
	r->trusted = false;
	r->unverifiable = false;
	if (r->catch_up_due) {
		/* the next connection catches up */
		arm_timer(q, l, -1);
	}
}

static void
on_timer(kvq_recovery *q, kvl_listener *l)
{
	kvl_recovery *r = &l->recovery;
	switch (r->state) {
	case KVL_R_HANDOFF_ARMED:
		r->state = KVL_R_HANDOFF;
		handoff_ask(q, l);
		break;
	case KVL_R_VERIFYING:
	case KVL_R_REPLAYING:
		replay_failed(q, l, r->state == KVL_R_VERIFYING,
			      "no answer in time");
		break;
	case KVL_R_BACKOFF:
	case KVL_R_AWAIT_HANDOFF:
		r->state = KVL_R_STREAMING;
		r->replay_spent = false;
		kvq_repair_gap(q, l, false);
		break;
	case KVL_R_STREAMING:
		if (r->catch_up_due) {
			r->catch_up_due = false;
			catch_up(q, l);
		}
		break;
	default:
		break;
	}
}

static void
on_replay(kvq_recovery *q, kvl_listener *l, const kvq_event *ev)
{
	kvl_recovery *r = &l->recovery;
	if (r->state != KVL_R_VERIFYING && r->state != KVL_R_REPLAYING) {
		return;
	}
	arm_timer(q, l, q->cfg.replay_timeout_ms);
	if (ev->kind == KVQ_EV_REPLAY_END) {
		replay_end(q, l);
		return;
	}
	if (kvq_foreign(l, ev->payload, ev->len)) {
		return; /* a replay socket shared by several ranks */
	}
	r->replay_got++;
	if (r->state == KVL_R_VERIFYING) {
		verified(q, l, ev->seq, ev->payload, ev->len);
	} else {
		replayed(q, l, ev->seq, ev->payload, ev->len);
	}
}

static void
on_handoff_end(kvq_recovery *q, kvl_listener *l, bool taken)
{
	if (l->recovery.state != KVL_R_HANDOFF) {
		return;
	}
	if (taken) {
		finish(q, l);
		return;
	}
	l->recovery.state = KVL_R_STREAMING;
	if (l->ho.taken) {
		/* A gap after a snapshot: the usual repairs. */
		kvq_repair_gap(q, l, false);
	} else {
		/* Start as any new listener does. */
		kvq_recovery_begin(q, l);
	}
}

void
kvq_recovery_on(kvq_recovery *q, kvl_listener *l, const kvq_event *ev)
{
	switch (ev->kind) {
	case KVQ_EV_LIVE:
		kvq_on_live(q, l, ev);
		break;
	case KVQ_EV_CONNECTED:
		on_connected(q, l);
		break;
	case KVQ_EV_DISCONNECTED:
		on_disconnected(q, l);
		break;
	case KVQ_EV_REPLAY:
	case KVQ_EV_REPLAY_END:
		on_replay(q, l, ev);
		break;
	case KVQ_EV_FETCHED:
		fetched(q, l, ev->fetched);
		break;
	case KVQ_EV_TIMER:
		on_timer(q, l);
		break;
	case KVQ_EV_HANDOFF_TAKEN:
	case KVQ_EV_HANDOFF_FAILED:
		on_handoff_end(q, l, ev->kind == KVQ_EV_HANDOFF_TAKEN);
		break;
	}
}
