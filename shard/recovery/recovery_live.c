/*
 * recovery_live.c - a listener's live batches in order: the next one
 * applied, duplicates dropped, the engine restart a seq going back
 * reveals, another rank's batches kept out of the sequence, and the queue
 * of batches that wait (recovery.h). What a gap starts is recovery.c's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "apply.h"
#include "log.h"
#include "recovery_int.h"

/* ---- applying ------------------------------------------------------ */

/* resync asks for the engine's whole state: a batch was lost or
 * orphans keep coming. At once when streaming; a repair in flight
 * fetches it when it ends. */
static void
resync(kvq_recovery *q, kvl_listener *l, uint64_t seq)
{
	l->recovery.need_full = true;
	if (l->recovery.state == KVL_R_STREAMING) {
		l->recovery.gap_seq = seq + 1;
		kvq_repair_gap(q, l, false);
	}
}

/* misconfigured logs, at most once a minute, that batches of another
 * rank arrive on l's socket (the batch was just dropped as foreign). */
static void
misconfigured(kvl_listener *l)
{
	if (l->foreign_at_ms - l->foreign_logged_ms < 60000) {
		return;
	}
	l->foreign_logged_ms = l->foreign_at_ms;
	kvl_warn(
	    l, "listener_misconfigured",
	    "foreign_rank=%u rank=%u batches=%" PRIu64
	    " reason=\"batches of another data-parallel rank arrive on this "
	    "rank's socket: the engine publishes several ranks on one "
	    "endpoint; they are ignored\"",
	    l->foreign_rank, l->dp_rank, l->c.rank_mismatches);
}

/* kvq_foreign drops a batch of another rank before anything sequences it
 * (kva_foreign); true when it did. */
bool
kvq_foreign(kvl_listener *l, const void *payload, size_t len)
{
	if (!kva_foreign(l, payload, len)) {
		return false;
	}
	misconfigured(l);
	return true;
}

/* kvq_apply applies the batch at seq; false when it was another rank's
 * (nothing changed). */
bool
kvq_apply(kvq_recovery *q, kvl_listener *l, uint64_t seq, const void *payload,
	  size_t len)
{
	kva_result res =
	    kva_batch(q->idx, q->dec, &q->scratch, l, seq, payload, len);
	if (res == KVA_FOREIGN) {
		misconfigured(l);
		return false;
	}
	if (res == KVA_LOST) {
		/* A replay would return the same bytes: only the engine's
		 * whole state repairs a lost batch. */
		if (l->recover_ep != NULL) {
			kvl_log(l, "lost_batch_resync", "seq=%" PRIu64, seq);
			resync(q, l, seq);
		} else {
			kvq_lost(q, l, seq);
		}
		return true;
	}
	if (l->orphan_streak >= q->cfg.orphan_resync && l->recover_ep != NULL) {
		kvl_log(l, "orphan_resync", "orphans=%u", l->orphan_streak);
		l->orphan_streak = 0;
		resync(q, l, seq);
	}
	return true;
}

/* take applies or drops a batch while streaming, as kvq_judge says;
 * any other verdict is returned for the caller to hold the batch and
 * start the repair, after noting what the repair must reach. */
static kvq_verdict
take(kvq_recovery *q, kvl_listener *l, uint64_t seq, const void *payload,
     size_t len)
{
	kvl_recovery *r = &l->recovery;
	kvq_verdict v = kvq_judge(l, seq);
	switch (v) {
	case KVQ_APPLY:
		if (!kvq_apply(q, l, seq, payload, len)) {
			return KVQ_FOREIGN;
		}
		r->trusted = true;
		break;
	case KVQ_DROP:
		l->c.duplicates++;
		break;
	case KVQ_NEED_HISTORY:
	case KVQ_VERIFY:
		r->gap_seq = seq;
		break;
	case KVQ_FOREIGN:
		break;
	case KVQ_GAP:
		l->c.gaps++;
		r->gap_seq = seq;
		r->need_full = r->need_full || !r->trusted;
		kvl_log(l, "gap",
			"watermark=%" PRIu64 " seq=%" PRIu64 " full=%d",
			l->mark.wm, seq, r->need_full);
		break;
	}
	return v;
}

static bool
taken(kvq_verdict v)
{
	return v == KVQ_APPLY || v == KVQ_DROP || v == KVQ_FOREIGN;
}

static void engine_restart(kvq_recovery *q, kvl_listener *l, uint64_t seq);

/* in_order takes live batch seq, the next in arrival order, while
 * streaming: first the engine restart it may reveal, then take. One
 * of another rank must not be sequenced at all - its seq would read as a
 * restart or a gap - but reading a batch's rank costs a fraction of a
 * decode, too much for every batch of a flood: it is read only where the
 * seq would start a repair or reveal a restart (checked: already read,
 * at its arrival). The next batch, applied at once, is decoded anyway,
 * and its decode finds another rank for free; a duplicate is dropped
 * either way. Returns the verdict, KVQ_FOREIGN for a batch dropped as
 * another rank's. */
static kvq_verdict
in_order(kvq_recovery *q, kvl_listener *l, uint64_t seq, const void *payload,
	 size_t len, bool checked)
{
	if (!checked && kvq_is_restart(l, seq)) {
		if (kvq_foreign(l, payload, len)) {
			return KVQ_FOREIGN;
		}
		checked = true;
		engine_restart(q, l, seq);
	}
	kvq_verdict j = kvq_judge(l, seq);
	if (!checked && j != KVQ_APPLY && j != KVQ_DROP &&
	    kvq_foreign(l, payload, len)) {
		return KVQ_FOREIGN;
	}
	kvq_verdict v = take(q, l, seq, payload, len);
	if (v != KVQ_FOREIGN) {
		l->has_live = true;
		l->last_live = seq;
	}
	return v;
}

size_t
kvq_backlog_apply(kvq_recovery *q, kvl_listener *l, size_t max)
{
	size_t n = 0;
	kvl_pending_msg *m;
	while (n < max && l->recovery.state == KVL_R_STREAMING &&
	       (m = kvq_backlog_pop(q, l)) != NULL) {
		n++;
		kvq_verdict v =
		    in_order(q, l, m->seq, m->payload, m->len, m->checked);
		if (!taken(v)) {
			m->checked = true;
			kvq_backlog_unpop(q, l, m);
			kvq_repair_gap(q, l, v == KVQ_VERIFY);
			return n;
		}
		kvi_free(m);
	}
	return n;
}

static void
engine_restart(kvq_recovery *q, kvl_listener *l, uint64_t seq)
{
	l->c.engine_restarts++;
	l->recovery.trusted = false;
	kvl_log(l, "engine_restart",
		"watermark=%" PRIu64 " last_live=%" PRIu64 " seq=%" PRIu64,
		l->mark.wm, l->last_live, seq);
	kvq_recovery_reset(q, l);
	kva_clear(q->idx, &q->scratch, l);
	l->has_live = false;
}

/* kvq_restarted clears a listener whose engine turned out to be another
 * process (reason), and repairs it from nothing. */
void
kvq_restarted(kvq_recovery *q, kvl_listener *l, const char *reason)
{
	l->c.engine_restarts++;
	kvl_log(l, "engine_restart", "watermark=%" PRIu64 " reason=%s",
		l->mark.wm, reason);
	kva_clear(q->idx, &q->scratch, l);
	l->recovery.state = KVL_R_STREAMING;
	kvq_repair_gap(q, l, false);
}

/* kvq_on_live takes a live batch. A restart it reveals is acted on at
 * once, whatever the listener is doing (a repair in flight is dropped);
 * otherwise a batch that must wait - a repair in flight, or ingest
 * behind - is queued as it is and judged in order when taken from the
 * queue (kvq_backlog_apply), its rank read then if need be
 * (in_order). */
void
kvq_on_live(kvq_recovery *q, kvl_listener *l, const kvq_event *ev)
{
	bool checked = false;
	if (kvq_is_restart(l, ev->seq)) {
		if (kvq_foreign(l, ev->payload, ev->len)) {
			return;
		}
		checked = true;
		engine_restart(q, l, ev->seq);
		l->has_live = true;
		l->last_live = ev->seq;
	}
	if (l->recovery.state != KVL_R_STREAMING || l->backlog != NULL ||
	    ev->defer) {
		kvq_backlog_push(q, l, ev->seq, ev->payload, ev->len, checked);
		return;
	}
	kvq_verdict v = in_order(q, l, ev->seq, ev->payload, ev->len, checked);
	if (!taken(v)) {
		kvq_backlog_push(q, l, ev->seq, ev->payload, ev->len, true);
		kvq_repair_gap(q, l, v == KVQ_VERIFY);
	}
}
