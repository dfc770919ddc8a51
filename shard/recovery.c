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
 * as soon as it connects and compares: the same payload means the same
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
 * a gap no endpoint can repair is counted, logged, and stepped over.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"
#include "apply.h"
#include "handoff.h"
#include "ingest_int.h"
#include "log.h"

#define KVG_BACKOFF_MIN_MS 100
#define KVG_TOO_NEW_FULL   3 /* TooNew answers before asking for a dump */

static void kvg_drain_backlog(kvg_ingest *g, kvl_listener *l);
static void kvg_begin_fetch(kvg_ingest *g, kvl_listener *l, bool full);

/* How long a listener with no state and no engine to repair it from waits
 * for a hand-off before it takes the stream as it comes. */
#define KVG_HANDOFF_WAIT_MS 3000

kvl_state
kvg_state_of(const kvl_listener *l)
{
	switch (l->phase) {
	case KVL_REPLAYING:
	case KVL_FETCHING:
	case KVL_HANDOFF:
		return KVL_RECOVERING;
	case KVL_BACKOFF:
		return KVL_FAILED;
	default:
		/* in step with the engine: something applied, or a
		 * catch-up that found it has published nothing yet */
		return l->mark.has_wm || l->trusted ? KVL_ACTIVE : KVL_PENDING;
	}
}

void
kvg_error(kvl_listener *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->last_error, sizeof(l->last_error), fmt, ap);
	va_end(ap);
}

/* ---- backlog ------------------------------------------------------- */

static void
kvg_backlog_clear(kvg_ingest *g, kvl_listener *l)
{
	while (l->backlog != NULL) {
		kvl_pending_msg *m = l->backlog;
		l->backlog = m->next;
		kvi_free(m);
	}
	l->backlog_tail = NULL;
	g->backlog_bytes -= l->backlog_bytes;
	l->backlog_bytes = 0;
	l->backlog_len = 0;
}

static void
kvg_backlog_push(kvg_ingest *g, kvl_listener *l, uint64_t seq,
		 const void *payload, size_t len)
{
	if (g->backlog_bytes + len > g->cfg.backlog_max_bytes ||
	    l->backlog_bytes + len > g->cfg.listener_backlog_max_bytes) {
		/* What is dropped becomes a gap that the next repair covers,
		 * from the watermark: memory stays bounded, nothing is lost
		 * for good. */
		if (l->c.backlog_overflows++ == 0 || l->backlog_len > 0) {
			kvg_log_listener(
			    l, "backlog_overflow",
			    "batches=%zu bytes=%zu shard_bytes=%zu",
			    l->backlog_len, l->backlog_bytes, g->backlog_bytes);
		}
		kvg_error(l,
			  "%zu live batches (%zu bytes) queued past the "
			  "budget (%zu per listener, %zu per shard): dropped, "
			  "to be repaired from the watermark",
			  l->backlog_len + 1, l->backlog_bytes + len,
			  g->cfg.listener_backlog_max_bytes,
			  g->cfg.backlog_max_bytes);
		kvg_backlog_clear(g, l);
		return;
	}
	kvl_pending_msg *m = kvi_malloc(sizeof(*m) + len);
	m->next = NULL;
	m->seq = seq;
	m->len = len;
	memcpy(m->payload, payload, len);
	if (l->backlog_tail != NULL) {
		l->backlog_tail->next = m;
	} else {
		l->backlog = m;
	}
	l->backlog_tail = m;
	l->backlog_len++;
	l->backlog_bytes += len;
	g->backlog_bytes += len;
	if (g->backlog_bytes > g->backlog_peak) {
		g->backlog_peak = g->backlog_bytes;
	}
}

static kvl_pending_msg *
kvg_backlog_pop(kvg_ingest *g, kvl_listener *l)
{
	kvl_pending_msg *m = l->backlog;
	if (m != NULL) {
		l->backlog = m->next;
		if (l->backlog == NULL) {
			l->backlog_tail = NULL;
		}
		l->backlog_len--;
		l->backlog_bytes -= m->len;
		g->backlog_bytes -= m->len;
	}
	return m;
}

static void
kvg_backlog_unpop(kvg_ingest *g, kvl_listener *l, kvl_pending_msg *m)
{
	m->next = l->backlog;
	l->backlog = m;
	if (l->backlog_tail == NULL) {
		l->backlog_tail = m;
	}
	l->backlog_len++;
	l->backlog_bytes += m->len;
	g->backlog_bytes += m->len;
}

/* ---- applying ------------------------------------------------------ */

static void
kvg_apply(kvg_ingest *g, kvl_listener *l, uint64_t seq, const void *payload,
	  size_t len)
{
	if (!kva_batch(g->idx, g->dec, &g->scratch, l, seq, payload, len) &&
	    l->recover_ep != NULL) {
		/* A replay would return the same bytes: only the engine's
		 * whole state repairs a lost batch. */
		kvg_log_listener(l, "lost_batch_resync", "seq=%" PRIu64, seq);
		l->want_full = true;
		if (l->phase == KVL_STREAMING) {
			l->gap_seq = seq + 1;
			kvg_start_recovery(g, l);
		}
		return;
	}
	if (l->orphan_streak >= g->cfg.orphan_resync && l->recover_ep != NULL) {
		kvg_log_listener(l, "orphan_resync", "orphans=%u",
				 l->orphan_streak);
		l->orphan_streak = 0;
		l->want_full = true;
		if (l->phase == KVL_STREAMING) {
			l->gap_seq = seq + 1;
			kvg_start_recovery(g, l);
		}
	}
}

static void
kvg_engine_restart(kvg_ingest *g, kvl_listener *l, uint64_t seq)
{
	l->c.engine_restarts++;
	l->trusted = false;
	kvg_log_listener(l, "engine_restart",
			 "watermark=%" PRIu64 " last_live=%" PRIu64
			 " seq=%" PRIu64,
			 l->mark.wm, l->last_live, seq);
	kvg_recovery_reset(g, l);
	kva_clear(g->idx, l);
	l->has_live = false;
}

/* kvg_can_verify says whether continuity can be checked by replaying the
 * batch at the watermark. */
static bool
kvg_can_verify(const kvl_listener *l)
{
	return l->mark.has_wm && l->mark.has_fp && l->replay_ep != NULL;
}

typedef enum kvg_action {
	KVG_APPLY,
	KVG_DROP,    /* a duplicate */
	KVG_RECOVER, /* hold it: a recovery must come first */
} kvg_action;

/* kvg_decide says what to do with batch seq while streaming, noting in l
 * what a recovery must do when that is the answer. */
static kvg_action
kvg_decide(kvl_listener *l, uint64_t seq)
{
	if (!l->mark.has_wm) {
		if (seq == 0) {
			l->trusted = true;
			return KVG_APPLY;
		}
		l->gap_seq = seq;
		return KVG_RECOVER;
	}
	if (!l->trusted && !l->verify_skip && kvg_can_verify(l)) {
		l->gap_seq = seq;
		l->verify = true;
		return KVG_RECOVER;
	}
	if (seq <= l->mark.wm) {
		l->c.duplicates++;
		return KVG_DROP;
	}
	if (seq == l->mark.wm + 1) {
		l->trusted = true;
		return KVG_APPLY;
	}
	l->c.gaps++;
	l->gap_seq = seq;
	l->want_full = l->want_full || !l->trusted;
	kvg_log_listener(l, "gap",
			 "watermark=%" PRIu64 " seq=%" PRIu64 " full=%d",
			 l->mark.wm, seq, l->want_full);
	return KVG_RECOVER;
}

void
kvg_on_live(kvg_ingest *g, kvl_listener *l, uint64_t seq, const void *payload,
	    size_t len, bool defer)
{
	if ((l->has_live && seq <= l->last_live) ||
	    (!l->trusted && l->mark.has_wm && seq <= l->mark.wm)) {
		kvg_engine_restart(g, l, seq);
	}
	l->has_live = true;
	l->last_live = seq;
	if (l->phase != KVL_STREAMING || l->backlog != NULL || defer) {
		/* recovering, or behind: after what is queued already */
		kvg_backlog_push(g, l, seq, payload, len);
		return;
	}
	switch (kvg_decide(l, seq)) {
	case KVG_APPLY:
		kvg_apply(g, l, seq, payload, len);
		break;
	case KVG_DROP:
		break;
	case KVG_RECOVER:
		kvg_backlog_push(g, l, seq, payload, len);
		kvg_start_recovery(g, l);
		break;
	}
}

void
kvg_on_disconnect(kvg_ingest *g, kvl_listener *l)
{
	(void)g;
	l->trusted = false;
	l->verify_skip = false;
}

void
kvg_on_connect(kvg_ingest *g, kvl_listener *l)
{
	if (kvg_handoff_armed_event(g, l, true)) {
		return;
	}
	/* Check the process behind the new connection, and catch up, now
	 * rather than at its next batch: an idle engine may not publish
	 * for a long time. */
	if (l->trusted || l->phase != KVL_STREAMING) {
		return;
	}
	if (!l->verify_skip && kvg_can_verify(l)) {
		l->verify = true;
		l->gap_seq = l->mark.wm + 1;
		kvg_start_recovery(g, l);
	} else if (!l->mark.has_wm &&
		   (l->replay_ep != NULL || l->recover_ep != NULL)) {
		/* No state yet: fetch the engine's current one. */
		l->gap_seq = 0;
		kvg_start_recovery(g, l);
	}
}

/* ---- the end of a recovery ------------------------------------------ */

void
kvg_finish_recovery(kvg_ingest *g, kvl_listener *l)
{
	kvg_io_timer(g, l, -1);
	if (l->want_full && l->recover_ep != NULL) {
		/* A batch applied on the way was lost or orphaned: only
		 * the engine's whole state repairs it. */
		l->phase = KVL_STREAMING;
		kvg_begin_fetch(g, l, true);
		return;
	}
	l->phase = KVL_STREAMING;
	l->trusted = true; /* what was applied came from this engine */
	l->attempts = 0;
	l->too_new = 0;
	l->replay_tried = false;
	l->verify = false;
	kvg_drain_backlog(g, l);
}

static void
kvg_drain_backlog(kvg_ingest *g, kvl_listener *l)
{
	kvg_backlog_apply(g, l, SIZE_MAX);
}

size_t
kvg_backlog_apply(kvg_ingest *g, kvl_listener *l, size_t max)
{
	size_t n = 0;
	kvl_pending_msg *m;
	while (n < max && l->phase == KVL_STREAMING &&
	       (m = kvg_backlog_pop(g, l)) != NULL) {
		n++;
		switch (kvg_decide(l, m->seq)) {
		case KVG_APPLY:
			kvg_apply(g, l, m->seq, m->payload, m->len);
			break;
		case KVG_DROP:
			break;
		case KVG_RECOVER:
			kvg_backlog_unpop(g, l, m);
			kvg_start_recovery(g, l);
			return n;
		}
		kvi_free(m);
	}
	return n;
}

/* kvg_give_up steps over a gap nothing can repair. */
static void
kvg_give_up(kvg_ingest *g, kvl_listener *l)
{
	l->c.unrepaired_gaps++;
	kvg_error(l, "gap before seq %" PRIu64 " cannot be repaired: %s",
		  l->gap_seq,
		  l->replay_ep == NULL && l->recover_ep == NULL
		      ? "no replay or recover endpoint"
		      : "the replay buffer does not reach back far enough");
	kvg_log_listener(l, "gap_unrepaired", "seq=%" PRIu64, l->gap_seq);
	if (l->gap_seq > 0) {
		l->mark = (kvs_mark){.has_wm = true, .wm = l->gap_seq - 1};
	}
	l->want_full = false;
	kvg_finish_recovery(g, l);
}

static void
kvg_backoff(kvg_ingest *g, kvl_listener *l)
{
	l->attempts++;
	long ms = KVG_BACKOFF_MIN_MS;
	for (int i = 1; i < l->attempts && ms < g->cfg.backoff_max_ms; i++) {
		ms *= 2;
	}
	if (ms > g->cfg.backoff_max_ms) {
		ms = g->cfg.backoff_max_ms;
	}
	l->phase = KVL_BACKOFF;
	kvg_io_timer(g, l, (int)ms);
}

/* ---- replay -------------------------------------------------------- */

static void
kvg_begin_replay(kvg_ingest *g, kvl_listener *l, uint64_t from)
{
	l->phase = KVL_REPLAYING;
	l->replay_from = from;
	l->replay_expect = from;
	l->replay_started = false;
	l->replay_got = 0;
	if (kvg_io_replay_start(g, l, from) != KVI_OK) {
		l->c.replays_failed++;
		l->replay_tried = true;
		l->phase = KVL_STREAMING;
		kvg_start_recovery(g, l);
		return;
	}
	kvg_io_timer(g, l, g->cfg.replay_timeout_ms);
}

static void
kvg_replay_failed(kvg_ingest *g, kvl_listener *l, const char *why)
{
	kvg_io_replay_stop(g, l);
	kvg_io_timer(g, l, -1);
	l->c.replays_failed++;
	l->replay_tried = true;
	kvg_error(l, "replay from %" PRIu64 ": %s", l->replay_from, why);
	kvg_log_listener(l, "replay_failed", "from=%" PRIu64 " reason=\"%s\"",
			 l->replay_from, why);
	l->phase = KVL_STREAMING;
	if (l->verify) {
		/* Continuity stays unchecked on this connection: batches are
		 * judged as without a replay socket. */
		l->verify = false;
		l->verify_skip = true;
		l->replay_tried = false;
		kvg_drain_backlog(g, l);
		return;
	}
	if (l->replay_started && l->mark.has_wm &&
	    l->mark.wm + 1 > l->replay_from) {
		/* Cut short after it delivered something - an engine's
		 * ROUTER drops what passes its high-water mark (1,000
		 * messages) - : ask again from where it got to. Each round
		 * moves the watermark on, so this ends. */
		kvg_log_listener(l, "replay_again", "from=%" PRIu64,
				 l->mark.wm + 1);
		kvg_begin_replay(g, l, l->mark.wm + 1);
		return;
	}
	kvg_start_recovery(g, l);
}

/* kvg_verify checks the replayed batch at the watermark against the
 * fingerprint of the one applied. */
static void
kvg_verify(kvg_ingest *g, kvl_listener *l, uint64_t seq, const void *payload,
	   size_t len)
{
	if (seq != l->mark.wm) {
		/* The buffer no longer reaches back to the watermark: with
		 * continuity unknown, rebuild from a tree dump. */
		l->verify = false;
		l->want_full = true;
		kvg_replay_failed(g, l,
				  "the watermark's batch is no longer "
				  "buffered, continuity unknown");
		return;
	}
	if (XXH3_64bits(payload, len) == l->mark.fp) {
		l->verify = false;
		l->trusted = true;
		l->replay_started = true;
		l->replay_expect = seq + 1;
		return;
	}
	/* Same seq, other payload: another engine process. */
	kvg_io_replay_stop(g, l);
	l->verify = false;
	l->c.engine_restarts++;
	kvg_log_listener(l, "engine_restart",
			 "watermark=%" PRIu64 " reason=fingerprint",
			 l->mark.wm);
	kva_clear(g->idx, l);
	l->phase = KVL_STREAMING;
	kvg_start_recovery(g, l);
}

/* kvg_replay_end judges a replay by what it delivered before its end
 * marker. */
static void
kvg_replay_end(kvg_ingest *g, kvl_listener *l)
{
	kvg_io_replay_stop(g, l);
	bool empty = l->replay_got == 0;
	if (l->verify && empty) {
		/* The engine has no batch at all, not even the one at the
		 * watermark it published to us: a new process. */
		l->verify = false;
		l->c.engine_restarts++;
		kvg_log_listener(l, "engine_restart",
				 "watermark=%" PRIu64 " reason=empty_replay",
				 l->mark.wm);
		kva_clear(g->idx, l);
		l->phase = KVL_STREAMING;
		kvg_start_recovery(g, l);
	} else if (l->verify) {
		l->verify = false;
		l->want_full = true;
		kvg_replay_failed(g, l,
				  "the watermark's batch was not "
				  "replayed, continuity unknown");
	} else if (!l->mark.has_wm && empty) {
		/* From seq 0 and nothing: the engine has published nothing;
		 * the next batch is seq 0. */
		l->c.replays_ok++;
		kvg_finish_recovery(g, l);
	} else if (l->mark.has_wm && l->mark.wm + 1 >= l->gap_seq) {
		l->c.replays_ok++;
		kvg_finish_recovery(g, l);
	} else {
		kvg_replay_failed(g, l, "ended before the gap closed");
	}
}

void
kvg_on_replay(kvg_ingest *g, kvl_listener *l, uint64_t seq, bool end,
	      const void *payload, size_t len)
{
	if (l->phase != KVL_REPLAYING) {
		return;
	}
	kvg_io_timer(g, l, g->cfg.replay_timeout_ms);
	if (end) {
		kvg_replay_end(g, l);
		return;
	}
	l->replay_got++;
	if (l->verify) {
		kvg_verify(g, l, seq, payload, len);
		return;
	}
	if (!l->replay_started) {
		l->replay_started = true;
		if (seq > l->replay_expect) {
			char why[96];
			snprintf(why, sizeof(why),
				 "the buffer starts at %" PRIu64, seq);
			kvg_replay_failed(g, l, why);
			return;
		}
	}
	if (seq < l->replay_expect) {
		return;
	}
	if (seq > l->replay_expect) {
		kvg_replay_failed(g, l, "replay skipped batches");
		return;
	}
	l->replay_expect = seq + 1;
	kvg_apply(g, l, seq, payload, len);
}

/* ---- /kv_recover --------------------------------------------------- */

static void
kvg_begin_fetch(kvg_ingest *g, kvl_listener *l, bool full)
{
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
			 (int)n, l->recover_ep, l->mark.wm + 1, l->gap_seq);
	}
	l->fetch_token =
	    (uint64_t)l->lid << 32 | (++g->fetch_gen & 0xffffffffu);
	l->fetch_full = full;
	l->phase = KVL_FETCHING;
	kvi_err rv = kvr_fetcher_submit(g->fetcher, l->fetch_token, url);
	if (rv != KVI_OK) {
		l->c.recoveries_failed++;
		kvg_error(l, "cannot fetch %s: %s", url, kvi_strerror(rv));
		kvg_backoff(g, l);
	}
}

static void kvg_fetch_failed(kvg_ingest *g, kvl_listener *l, const char *fmt,
			     ...) __attribute__((format(printf, 3, 4)));

static void
kvg_fetch_failed(kvg_ingest *g, kvl_listener *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->last_error, sizeof(l->last_error), fmt, ap);
	va_end(ap);
	l->c.recoveries_failed++;
	kvg_log_listener(l, "recover_failed", "attempt=%d error=\"%s\"",
			 l->attempts + 1, l->last_error);
	kvg_backoff(g, l);
}

static void
kvg_fetched_events(kvg_ingest *g, kvl_listener *l, const kvr_response *r)
{
	if (l->fetch_full || !l->mark.has_wm) {
		kvg_fetch_failed(g, l, "asked for a tree dump, got Events");
		return;
	}
	if (r->n_events > 0 && r->events[0].event_id > l->mark.wm + 1) {
		/* The engine no longer has the start of the gap. */
		l->want_full = true;
		l->c.recoveries_failed++;
		l->phase = KVL_STREAMING;
		kvg_start_recovery(g, l);
		return;
	}
	if (r->last_event_id + 1 < l->gap_seq) {
		kvg_fetch_failed(
		    g, l, "Events end at %" PRIu64 ", the gap at %" PRIu64,
		    r->last_event_id, l->gap_seq);
		return;
	}
	kva_recover(g->idx, &g->scratch, l, r);
	l->c.recoveries_events++;
	kvg_finish_recovery(g, l);
}

void
kvg_on_fetched(kvg_ingest *g, kvr_result *r)
{
	kvl_listener *l = kvg_listener(g, (uint32_t)(r->token >> 32));
	if (l == NULL || l->phase != KVL_FETCHING ||
	    l->fetch_token != r->token) {
		kvr_result_free(r);
		return; /* a listener gone, or an answer to an older ask */
	}
	if (r->err != KVI_OK) {
		kvg_fetch_failed(g, l, "/kv_recover: %s (%s)",
				 kvi_strerror(r->err), r->message);
		kvr_result_free(r);
		return;
	}
	const kvr_response *resp = kvr_parser_result(r->parser);
	switch (resp->kind) {
	case KVR_KIND_TREE_DUMP:
		kva_recover(g->idx, &g->scratch, l, resp);
		l->c.recoveries_treedump++;
		l->want_full = false;
		l->orphan_streak = 0;
		kvg_log_listener(l, "recovered",
				 "kind=tree_dump events=%zu watermark=%" PRIu64,
				 resp->n_events, resp->last_event_id);
		kvg_finish_recovery(g, l);
		break;
	case KVR_KIND_EVENTS:
		kvg_fetched_events(g, l, resp);
		break;
	case KVR_KIND_TOO_NEW:
		if (++l->too_new >= KVG_TOO_NEW_FULL) {
			l->want_full = true;
		}
		kvg_fetch_failed(g, l,
				 "TooNew: asked %" PRIu64 "..%" PRIu64
				 ", newest %" PRIu64,
				 resp->requested_start, resp->requested_end,
				 resp->newest_available);
		break;
	case KVR_KIND_INVALID_RANGE:
		l->want_full = true;
		kvg_fetch_failed(g, l, "InvalidRange %" PRIu64 "..%" PRIu64,
				 resp->start_id, resp->end_id);
		break;
	default:
		kvg_fetch_failed(
		    g, l, "Error: %.*s",
		    (int)(resp->message_len > 200 ? 200 : resp->message_len),
		    resp->message != NULL ? resp->message : "");
		break;
	}
	kvr_result_free(r);
}

/* ---- choosing a repair --------------------------------------------- */

void
kvg_start_recovery(kvg_ingest *g, kvl_listener *l)
{
	kvg_io_timer(g, l, -1);
	if (l->verify) {
		if (!l->replay_tried) {
			kvg_begin_replay(g, l, l->mark.wm);
			return;
		}
		l->verify = false;
		l->want_full = true;
	}
	bool full = l->want_full || !l->mark.has_wm;
	if (!full && l->backlog != NULL && l->backlog->seq <= l->mark.wm + 1) {
		/* Nothing is missing: what was replayed reaches the batches
		 * held since the gap, which take it from here. */
		kvg_finish_recovery(g, l);
		return;
	}
	if (!l->replay_tried && l->replay_ep != NULL &&
	    (!full || !l->mark.has_wm)) {
		/* A gap: replay from the watermark. No state at all: the
		 * buffer may still hold the engine's whole history. */
		kvg_begin_replay(g, l, l->mark.has_wm ? l->mark.wm + 1 : 0);
		return;
	}
	if (l->recover_ep != NULL) {
		kvg_begin_fetch(g, l, full);
		return;
	}
	if (kvg_handoff_again(g, l)) {
		return; /* the old owner, still applying, is newer by now */
	}
	if (!l->mark.has_wm && !l->ho.taken && !l->ho.waited) {
		/* No state at all and nothing to repair it from: a hand-off
		 * may be on its way (this shard restarted in the middle of
		 * one). Not in step meanwhile, so ownership stays put. */
		l->ho.waited = true;
		l->phase = KVL_BACKOFF;
		kvg_io_timer(g, l, KVG_HANDOFF_WAIT_MS);
		return;
	}
	kvg_give_up(g, l);
}

void
kvg_catch_up(kvg_ingest *g, kvl_listener *l)
{
	if (!l->mark.has_wm &&
	    (l->replay_ep != NULL || l->recover_ep != NULL)) {
		l->gap_seq = 0;
		kvg_start_recovery(g, l);
	} else {
		kvg_finish_recovery(g, l);
	}
}

void
kvg_on_timer(kvg_ingest *g, kvl_listener *l)
{
	if (kvg_handoff_armed_event(g, l, false)) {
		return;
	}
	if (l->phase == KVL_REPLAYING) {
		kvg_replay_failed(g, l, "no answer in time");
	} else if (l->phase == KVL_BACKOFF) {
		l->phase = KVL_STREAMING;
		l->replay_tried = false;
		kvg_start_recovery(g, l);
	}
}

void
kvg_recovery_reset(kvg_ingest *g, kvl_listener *l)
{
	kvg_io_replay_stop(g, l);
	kvg_io_timer(g, l, -1);
	if (l->phase == KVL_FETCHING) {
		kvr_fetcher_cancel(g->fetcher, l->fetch_token);
	}
	l->phase = KVL_STREAMING;
	l->verify = false;
	l->want_full = false;
	l->replay_tried = false;
	l->attempts = 0;
	l->too_new = 0;
	kvg_backlog_clear(g, l);
}
