/*
 * recovery_rules.c - the choices of a listener's recovery, as pure
 * functions of the listener: what a live batch is to it, which repair
 * closes its gap, and what status reports. recovery.c carries them out;
 * test_recovery checks them without sockets.
 */
#include "recovery.h"

kvq_verdict
kvq_judge(const kvl_listener *l, uint64_t seq)
{
	const kvl_recovery *r = &l->recovery;
	if (!l->mark.has_wm) {
		return seq == 0 ? KVQ_APPLY : KVQ_NEED_HISTORY;
	}
	if (!r->trusted && !r->unverifiable && kvq_can_verify(l)) {
		return KVQ_VERIFY;
	}
	if (seq <= l->mark.wm) {
		return KVQ_DROP;
	}
	return seq == l->mark.wm + 1 ? KVQ_APPLY : KVQ_GAP;
}

bool
kvq_is_restart(const kvl_listener *l, uint64_t seq)
{
	return (l->has_live && seq <= l->last_live) ||
	       (!l->recovery.trusted && l->mark.has_wm && seq <= l->mark.wm);
}

bool
kvq_can_verify(const kvl_listener *l)
{
	return l->mark.has_wm && l->mark.has_fp && l->replay_ep != NULL;
}

kvq_plan
kvq_plan_repair(const kvl_listener *l, bool verify)
{
	const kvl_recovery *r = &l->recovery;
	kvq_plan p = {.need_full = r->need_full};
	if (verify) {
		if (!r->replay_spent) {
			p.repair = KVQ_REPAIR_VERIFY;
			return p;
		}
		/* Continuity cannot be checked: only a whole state is
		 * known to be the engine's. */
		p.need_full = true;
	}
	bool full = p.need_full || !l->mark.has_wm;
	if (!full && l->backlog != NULL && l->backlog->seq <= l->mark.wm + 1) {
		/* Nothing is missing: what was replayed reaches the batches
		 * held since the gap, which take it from here. */
		p.repair = KVQ_REPAIR_NONE;
	} else if (!r->replay_spent && l->replay_ep != NULL &&
		   (!full || !l->mark.has_wm)) {
		/* A gap: replay from the watermark. No state at all: the
		 * buffer may still hold the engine's whole history. */
		p.repair = KVQ_REPAIR_REPLAY;
	} else if (l->recover_ep != NULL) {
		p.repair = full ? KVQ_REPAIR_DUMP : KVQ_REPAIR_EVENTS;
	} else if (kvq_handoff_can_retry(l)) {
		/* the old owner, still applying, is newer by now */
		p.repair = KVQ_REPAIR_HANDOFF;
	} else if (!l->mark.has_wm && !l->ho.taken && !l->ho.waited) {
		/* No state at all and nothing to repair it from: a hand-off
		 * may be on its way (this shard restarted in the middle of
		 * one). Not in step meanwhile, so ownership stays put. */
		p.repair = KVQ_REPAIR_AWAIT_HANDOFF;
	} else {
		p.repair = KVQ_REPAIR_GIVE_UP;
	}
	return p;
}

kvl_state
kvq_state_of(const kvl_listener *l)
{
	switch (l->recovery.state) {
	case KVL_R_VERIFYING:
	case KVL_R_REPLAYING:
	case KVL_R_FETCH_EVENTS:
	case KVL_R_FETCH_DUMP:
	case KVL_R_HANDOFF_ARMED:
	case KVL_R_HANDOFF:
		return KVL_RECOVERING;
	case KVL_R_BACKOFF:
	case KVL_R_AWAIT_HANDOFF:
		return KVL_FAILED;
	case KVL_R_STREAMING:
		break;
	}
	/* in step with the engine: something applied, or a catch-up that
	 * found it has published nothing yet */
	return l->mark.has_wm || l->recovery.trusted ? KVL_ACTIVE : KVL_PENDING;
}

const char *
kvq_rstate_name(kvl_rstate s)
{
	static const char *const names[KVL_RSTATE_COUNT] = {
	    [KVL_R_STREAMING] = "streaming",
	    [KVL_R_VERIFYING] = "verifying",
	    [KVL_R_REPLAYING] = "replaying",
	    [KVL_R_FETCH_EVENTS] = "fetching_events",
	    [KVL_R_FETCH_DUMP] = "fetching_dump",
	    [KVL_R_BACKOFF] = "backoff",
	    [KVL_R_AWAIT_HANDOFF] = "awaiting_handoff",
	    [KVL_R_HANDOFF_ARMED] = "handoff_armed",
	    [KVL_R_HANDOFF] = "handoff",
	};
	return (unsigned)s < KVL_RSTATE_COUNT ? names[s] : "?";
}
