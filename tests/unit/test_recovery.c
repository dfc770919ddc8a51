/*
 * test_recovery.c - a listener's recovery as a state machine, without
 * sockets: recovery.c, recovery_rules.c and backlog.c linked against the
 * stubs of recovery_stubs.c, which stand for the index (kva_*), the sockets
 * (kvg_io_*), the /kv_recover fetcher (kvr_*), the listener's last error and
 * log lines (listener.c) and what the ingest does for recovery (kvq_owner: the
 * sockets and the hand-off thread), and record what the machine asked of
 * them. Each test drives one listener through events
 * and checks its state and those requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "recovery_stubs.h"

/* ---- the rules ------------------------------------------------------ */

static void
test_judge(void **state)
{
	fx *f = *state;
	kvl_listener *l = &f->l;
	assert_int_equal(kvq_judge(l, 0), KVQ_APPLY);
	assert_int_equal(kvq_judge(l, 5), KVQ_NEED_HISTORY);
	l->mark = (kvs_mark){.has_wm = true, .wm = 10, .has_fp = true};
	/* continuity unknown and checkable: verify, whatever the seq */
	assert_int_equal(kvq_judge(l, 11), KVQ_VERIFY);
	l->recovery.unverifiable = true;
	assert_int_equal(kvq_judge(l, 11), KVQ_APPLY);
	l->recovery.unverifiable = false;
	l->recovery.trusted = true;
	assert_int_equal(kvq_judge(l, 10), KVQ_DROP);
	assert_int_equal(kvq_judge(l, 3), KVQ_DROP);
	assert_int_equal(kvq_judge(l, 11), KVQ_APPLY);
	assert_int_equal(kvq_judge(l, 12), KVQ_GAP);
	assert_int_equal(kvq_judge(l, 13), KVQ_GAP);
	/* without a replay socket there is nothing to verify with */
	l->recovery.trusted = false;
	l->replay_ep = NULL;
	assert_int_equal(kvq_judge(l, 11), KVQ_APPLY);
}

static void
test_is_restart(void **state)
{
	fx *f = *state;
	kvl_listener *l = &f->l;
	assert_false(kvq_is_restart(l, 0));
	l->has_live = true;
	l->last_live = 9;
	assert_true(kvq_is_restart(l, 9));
	assert_false(kvq_is_restart(l, 10));
	l->has_live = false;
	l->mark = (kvs_mark){.has_wm = true, .wm = 20};
	assert_true(kvq_is_restart(l, 20)); /* continuity unknown */
	l->recovery.trusted = true;
	assert_false(kvq_is_restart(l, 20)); /* a duplicate, then */
}

static void
test_plan(void **state)
{
	fx *f = *state;
	kvl_listener *l = &f->l;
	/* no state: replay from 0, else a dump */
	assert_int_equal(kvq_plan_repair(l, false).repair, KVQ_REPAIR_REPLAY);
	l->recovery.replay_spent = true;
	assert_int_equal(kvq_plan_repair(l, false).repair, KVQ_REPAIR_DUMP);
	/* a gap with a state: replay, then the gap's events */
	l->recovery.replay_spent = false;
	l->mark = (kvs_mark){.has_wm = true, .wm = 10, .has_fp = true};
	assert_int_equal(kvq_plan_repair(l, false).repair, KVQ_REPAIR_REPLAY);
	assert_int_equal(kvq_plan_repair(l, true).repair, KVQ_REPAIR_VERIFY);
	l->recovery.replay_spent = true;
	kvq_plan p = kvq_plan_repair(l, false);
	assert_int_equal(p.repair, KVQ_REPAIR_EVENTS);
	assert_false(p.need_full);
	/* verification impossible: only a whole state will do */
	p = kvq_plan_repair(l, true);
	assert_int_equal(p.repair, KVQ_REPAIR_DUMP);
	assert_true(p.need_full);
	/* a whole state is not replayed */
	l->recovery.replay_spent = false;
	l->recovery.need_full = true;
	assert_int_equal(kvq_plan_repair(l, false).repair, KVQ_REPAIR_DUMP);
	/* neither endpoint: a newer snapshot if it came by a hand-off */
	l->recovery.need_full = false;
	l->replay_ep = l->recover_ep = NULL;
	assert_int_equal(kvq_plan_repair(l, false).repair, KVQ_REPAIR_GIVE_UP);
	l->ho.from = "tcp://old";
	l->ho.taken = true;
	assert_int_equal(kvq_plan_repair(l, false).repair, KVQ_REPAIR_HANDOFF);
	l->ho.tries = KVQ_HANDOFF_TRIES;
	assert_int_equal(kvq_plan_repair(l, false).repair, KVQ_REPAIR_GIVE_UP);
	/* no state and nothing at all: wait for a hand-off, once */
	l->ho = (kvl_handoff){0};
	l->mark = (kvs_mark){0};
	assert_int_equal(kvq_plan_repair(l, false).repair,
			 KVQ_REPAIR_AWAIT_HANDOFF);
	l->ho.waited = true;
	assert_int_equal(kvq_plan_repair(l, false).repair, KVQ_REPAIR_GIVE_UP);
}

static void
test_state_of(void **state)
{
	fx *f = *state;
	kvl_listener *l = &f->l;
	assert_int_equal(kvq_state_of(l), KVL_PENDING);
	l->recovery.trusted = true;
	assert_int_equal(kvq_state_of(l), KVL_ACTIVE);
	static const kvl_state want[KVL_RSTATE_COUNT] = {
	    [KVL_R_STREAMING] = KVL_ACTIVE,
	    [KVL_R_VERIFYING] = KVL_RECOVERING,
	    [KVL_R_REPLAYING] = KVL_RECOVERING,
	    [KVL_R_FETCH_EVENTS] = KVL_RECOVERING,
	    [KVL_R_FETCH_DUMP] = KVL_RECOVERING,
	    [KVL_R_BACKOFF] = KVL_FAILED,
	    [KVL_R_AWAIT_HANDOFF] = KVL_FAILED,
	    [KVL_R_HANDOFF_ARMED] = KVL_RECOVERING,
	    [KVL_R_HANDOFF] = KVL_RECOVERING,
	};
	for (int s = 0; s < KVL_RSTATE_COUNT; s++) {
		l->recovery.state = (kvl_rstate)s;
		assert_int_equal(kvq_state_of(l), want[s]);
		assert_string_not_equal(kvq_rstate_name((kvl_rstate)s), "?");
	}
}

/* ---- the transitions ------------------------------------------------ */

/* A new listener that connects replays the engine's history from seq 0,
 * a moment later, once its subscription has reached the engine; an empty
 * buffer means the engine has published nothing yet. */
static void
test_connect_without_state(void **state)
{
	fx *f = *state;
	ev(f, KVQ_EV_CONNECTED, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(st.timer_ms, KVQ_CONNECT_SUB_MS);
	assert_int_equal(st.replays, 0);
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_REPLAYING);
	assert_int_equal(st.replay_from, 0);
	assert_int_equal(st.timer_ms, 2000);
	assert_int_equal(kvq_state_of(&f->l), KVL_RECOVERING);
	ev(f, KVQ_EV_REPLAY_END, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(kvq_state_of(&f->l), KVL_ACTIVE);
	assert_int_equal(f->l.c.replays_ok, 1);
	live(f, 0, 2);
	assert_int_equal(st.n_applied, 3);
	assert_int_equal(f->l.mark.wm, 2);
}

/* A gap is replayed from the watermark while the live batches wait; the
 * held batches follow the replay in order. */
static void
test_gap_replayed(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	live(f, 8, 9);
	assert_rstate(f, KVL_R_REPLAYING);
	assert_int_equal(st.replay_from, 6);
	assert_int_equal(f->l.c.gaps, 1);
	assert_int_equal(f->l.backlog_len, 2);
	ev(f, KVQ_EV_REPLAY, 6);
	ev(f, KVQ_EV_REPLAY, 7);
	ev(f, KVQ_EV_REPLAY, 8); /* the replay reaches into the backlog */
	ev(f, KVQ_EV_REPLAY_END, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.mark.wm, 9);
	assert_int_equal(st.n_applied, 4); /* 6 7 8, then 9; 8 dropped */
	assert_int_equal(st.applied[3], 9);
	assert_int_equal(f->l.c.duplicates, 1);
	assert_int_equal(f->l.backlog_len, 0);
	assert_false(st.replay_open);
}

/* A replay that does not answer gives way to /kv_recover for the gap's
 * events; a failed fetch backs off, and the timer tries again. */
static void
test_replay_silent_then_fetch(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	live(f, 9, 9);
	ev(f, KVQ_EV_TIMER, 0); /* the replay's silence */
	assert_rstate(f, KVL_R_FETCH_EVENTS);
	assert_int_equal(f->l.c.replays_failed, 1);
	assert_string_equal(st.url,
			    "http://127.0.0.1:8100/kv_recover?start=6&end=9");
	kvr_result *r = calloc(1, sizeof(*r));
	r->token = f->l.recovery.fetch_token;
	r->err = KVI_EIO;
	kvq_on_fetched(f->q, r);
	assert_rstate(f, KVL_R_BACKOFF);
	assert_int_equal(kvq_state_of(&f->l), KVL_FAILED);
	assert_int_equal(st.timer_ms, 100);
	/* an answer to an older ask is ignored */
	r = calloc(1, sizeof(*r));
	r->token = f->l.recovery.fetch_token + 1;
	kvq_on_fetched(f->q, r);
	assert_rstate(f, KVL_R_BACKOFF);
	ev(f, KVQ_EV_TIMER, 0); /* backoff over: the replay again first */
	assert_rstate(f, KVL_R_REPLAYING);
	ev(f, KVQ_EV_REPLAY_END, 0); /* nothing: the gap stays */
	assert_rstate(f, KVL_R_FETCH_EVENTS);
	fetched(f, KVR_KIND_EVENTS, 8);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.c.recoveries_events, 1);
	assert_int_equal(f->l.mark.wm, 9); /* 8 fetched, then 9 held */
}

/* TooNew three times in a row asks for the whole state. */
static void
test_too_new_asks_for_dump(void **state)
{
	fx *f = *state;
	f->l.replay_ep = NULL;
	in_step(f, 5);
	live(f, 9, 9);
	for (int i = 0; i < 3; i++) {
		assert_rstate(f, KVL_R_FETCH_EVENTS);
		fetched(f, KVR_KIND_TOO_NEW, 0);
		assert_rstate(f, KVL_R_BACKOFF);
		ev(f, KVQ_EV_TIMER, 0);
	}
	assert_rstate(f, KVL_R_FETCH_DUMP);
	assert_string_equal(st.url, "http://127.0.0.1:8100/kv_recover");
	fetched(f, KVR_KIND_TREE_DUMP, 12);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.c.recoveries_treedump, 1);
	assert_int_equal(f->l.recovery.attempts, 0);
	assert_int_equal(f->l.mark.wm, 12); /* 9 held: a duplicate now */
}

/* An answer refused for its size applies nothing, is counted and said,
 * and is asked again after a back-off. A gap's events may bring what the
 * listener's bound leaves, a dump the whole bound. */
static void
test_too_big_refused(void **state)
{
	fx *f = *state;
	f->l.replay_ep = NULL;
	f->q->cfg.listener_max_entries = 1000;
	in_step(f, 5);
	st.entries = 400;
	live(f, 9, 9);
	assert_rstate(f, KVL_R_FETCH_EVENTS);
	assert_int_equal(st.max_blocks, 600);
	kvr_result *r = calloc(1, sizeof(*r));
	r->token = f->l.recovery.fetch_token;
	r->err = KVI_ETOOBIG;
	r->blocks = 601;
	snprintf(r->message, sizeof(r->message),
		 "the answer stores more than 600 blocks");
	kvq_on_fetched(f->q, r);
	assert_rstate(f, KVL_R_BACKOFF);
	assert_int_equal(f->l.c.recoveries_too_big, 1);
	assert_int_equal(f->l.c.recoveries_failed, 1);
	assert_int_equal(f->l.mark.wm, 5);
	assert_string_equal(f->l.last_error,
			    "/kv_recover refused, none of it applied: the "
			    "answer stores more than 600 blocks "
			    "(--listener-max-entries 1000)");
	f->l.recovery.need_full = true;
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_FETCH_DUMP);
	assert_int_equal(st.max_blocks, 1000);
}

/* On a new connection the engine is checked: the same batch at the
 * watermark is the same process, and the replay goes on as a catch-up. */
static void
test_reconnect_verified(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	ev(f, KVQ_EV_DISCONNECTED, 0);
	assert_false(f->l.recovery.trusted);
	ev(f, KVQ_EV_CONNECTED, 0);
	assert_int_equal(st.replays, 0);
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_VERIFYING);
	assert_int_equal(st.replay_from, 5);
	ev(f, KVQ_EV_REPLAY, 5);
	assert_rstate(f, KVL_R_REPLAYING);
	assert_true(f->l.recovery.trusted);
	ev(f, KVQ_EV_REPLAY, 6);
	ev(f, KVQ_EV_REPLAY_END, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.mark.wm, 6);
	assert_int_equal(f->l.c.engine_restarts, 0);
}

/* A live batch in the moment after a connection starts the check it needs
 * itself: the timer is the check's, and the catch-up is no longer due. So
 * is seq 0 without a state, the engine's whole history. */
static void
test_connect_live_first(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	ev(f, KVQ_EV_DISCONNECTED, 0);
	ev(f, KVQ_EV_CONNECTED, 0);
	assert_true(f->l.recovery.catch_up_due);
	live(f, 6, 6);
	assert_rstate(f, KVL_R_VERIFYING);
	assert_int_equal(st.timer_ms, 2000);
	assert_false(f->l.recovery.catch_up_due);
	ev(f, KVQ_EV_REPLAY, 5);
	ev(f, KVQ_EV_REPLAY_END, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.mark.wm, 6);
	ev(f, KVQ_EV_TIMER, 0); /* one already on its way: nothing */
	assert_int_equal(st.replays, 1);
	kvq_recovery_reset(f->q, &f->l);
	f->l.mark = (kvs_mark){0};
	f->l.has_live = f->l.recovery.trusted = false;
	ev(f, KVQ_EV_CONNECTED, 0);
	live(f, 0, 1);
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.mark.wm, 1);
	assert_int_equal(st.replays, 1);
	assert_int_equal(st.fetches, 0);
}

/* A connection lost in that moment catches nothing up: the next one
 * does, a moment after its last CONNECTED; one while a repair runs
 * leaves it alone. */
static void
test_connect_interrupted(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	ev(f, KVQ_EV_DISCONNECTED, 0);
	ev(f, KVQ_EV_CONNECTED, 0);
	ev(f, KVQ_EV_DISCONNECTED, 0);
	assert_int_equal(st.timer_ms, -1);
	ev(f, KVQ_EV_TIMER, 0); /* one already on its way */
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(st.replays, 0);
	ev(f, KVQ_EV_CONNECTED, 0);
	ev(f, KVQ_EV_CONNECTED, 0);
	assert_int_equal(st.timer_ms, KVQ_CONNECT_SUB_MS);
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_VERIFYING);
	assert_int_equal(st.replays, 1);
	ev(f, KVQ_EV_CONNECTED, 0);
	assert_rstate(f, KVL_R_VERIFYING);
	assert_int_equal(st.timer_ms, 2000);
	assert_int_equal(st.replays, 1);
}

/* A listener dropped in that moment has its timer disarmed; a planned
 * move takes the timer over. */
static void
test_connect_then_reset(void **state)
{
	fx *f = *state;
	ev(f, KVQ_EV_CONNECTED, 0);
	kvq_recovery_reset(f->q, &f->l);
	assert_int_equal(st.timer_ms, -1);
	ev(f, KVQ_EV_TIMER, 0);
	assert_int_equal(st.replays, 0);
	ev(f, KVQ_EV_CONNECTED, 0);
	f->l.ho.from = "tcp://127.0.0.1:9001";
	kvq_recovery_move_in(f->q, &f->l, KVQ_HANDOFF_SUB_MS);
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_HANDOFF);
	assert_int_equal(st.asks, 1);
	assert_int_equal(st.replays, 0);
}

/* Another payload at the watermark is another engine process: the
 * listener is cleared and rebuilt from seq 0. */
static void
test_reconnect_other_engine(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	ev(f, KVQ_EV_DISCONNECTED, 0);
	ev(f, KVQ_EV_CONNECTED, 0);
	ev(f, KVQ_EV_TIMER, 0);
	char other[] = "another process";
	kvq_recovery_on(f->q, &f->l,
			&(kvq_event){.kind = KVQ_EV_REPLAY,
				     .seq = 5,
				     .payload = other,
				     .len = sizeof(other)});
	assert_int_equal(f->l.c.engine_restarts, 1);
	assert_int_equal(st.clears, 1);
	assert_rstate(f, KVL_R_REPLAYING);
	assert_int_equal(st.replay_from, 0);
}

/* A check that gets no answer leaves continuity unknown on this
 * connection: the held batches are judged as without a replay socket. */
static void
test_verify_silent(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	ev(f, KVQ_EV_DISCONNECTED, 0);
	live(f, 6, 7);
	assert_rstate(f, KVL_R_VERIFYING);
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_true(f->l.recovery.unverifiable);
	assert_int_equal(f->l.mark.wm, 7);
	assert_int_equal(st.n_applied, 2);
	/* a new connection may be checked again */
	ev(f, KVQ_EV_DISCONNECTED, 0);
	assert_false(f->l.recovery.unverifiable);
}

/* A gap that nothing can repair is counted and stepped over, and what
 * the listener held is dropped: the missed batches may have evicted any of
 * it. It stays marked incomplete, durably, until a whole state. */
static void
test_unrepairable_gap(void **state)
{
	fx *f = *state;
	f->l.replay_ep = f->l.recover_ep = NULL;
	in_step(f, 5);
	st.entries = 40;
	live(f, 9, 10);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.c.unrepaired_gaps, 1);
	assert_int_equal(st.clears, 1);
	assert_int_equal(st.warnings, 1);
	assert_non_null(strstr(f->l.last_error, "40 entries dropped"));
	assert_int_equal(f->l.mark.wm, 10);
	assert_true(f->l.mark.incomplete);
	assert_int_equal(st.n_applied, 2);
	/* a later engine restart starts it over: exact from seq 0 */
	live(f, 0, 0);
	assert_int_equal(f->l.c.engine_restarts, 1);
	assert_false(f->l.mark.incomplete);
}

/* An engine restart this shard could not see - it restarted while the
 * shard was down, and has no replay socket - shows as a gap on the new
 * connection: nothing from before it is kept. */
static void
test_unseen_restart_clears(void **state)
{
	fx *f = *state;
	f->l.replay_ep = f->l.recover_ep = NULL;
	in_step(f, 19);
	st.entries = 40;
	ev(f, KVQ_EV_DISCONNECTED, 0);
	ev(f, KVQ_EV_CONNECTED, 0);
	assert_int_equal(st.timer_ms, -1); /* nothing to check it with */
	live(f, 25, 26);
	assert_int_equal(st.clears, 1);
	assert_true(f->l.mark.incomplete);
	assert_int_equal(f->l.mark.wm, 26);
}

/* Batches of another rank on the listener's socket (an engine that
 * publishes several ranks on one) are counted and never sequenced: not a
 * restart, a duplicate, a gap or the next batch. */
static void
test_foreign_rank(void **state)
{
	fx *f = *state;
	f->l.replay_ep = f->l.recover_ep = NULL;
	in_step(f, 5);
	foreign(f, KVQ_EV_LIVE, 0); /* would read as a restart */
	foreign(f, KVQ_EV_LIVE, 3); /* as a duplicate */
	foreign(f, KVQ_EV_LIVE, 6); /* as the next one */
	foreign(f, KVQ_EV_LIVE, 9); /* as a gap */
	assert_int_equal(f->l.c.rank_mismatches, 4);
	assert_int_equal(f->l.c.engine_restarts, 0);
	assert_int_equal(f->l.c.duplicates, 0);
	assert_int_equal(f->l.c.gaps, 0);
	assert_int_equal(st.clears, 0);
	assert_int_equal(st.n_applied, 0);
	assert_int_equal(f->l.mark.wm, 5);
	assert_rstate(f, KVL_R_STREAMING);
	live(f, 6, 7);
	assert_int_equal(st.n_applied, 2);
	assert_int_equal(f->l.mark.wm, 7);
	assert_int_equal(f->l.c.gaps, 0);
}

/* Batches queued during a repair are judged when taken from the queue,
 * and another rank's are dropped then, whatever their seq. */
static void
test_foreign_rank_queued(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	live(f, 8, 8);
	assert_rstate(f, KVL_R_REPLAYING);
	foreign(f, KVQ_EV_LIVE, 0);  /* below the last seq: read at once */
	foreign(f, KVQ_EV_LIVE, 30); /* queued as it is */
	live(f, 9, 9);
	assert_int_equal(f->l.backlog_len, 3);
	ev(f, KVQ_EV_REPLAY, 6);
	ev(f, KVQ_EV_REPLAY, 7);
	ev(f, KVQ_EV_REPLAY_END, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.mark.wm, 9);
	assert_int_equal(f->l.backlog_len, 0);
	assert_int_equal(f->l.c.rank_mismatches, 2);
	assert_int_equal(f->l.c.engine_restarts, 0);
	assert_int_equal(f->l.c.gaps, 1);
	assert_int_equal(st.replays, 1);
}

/* The same on a replay socket shared by several ranks. */
static void
test_foreign_rank_replayed(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	live(f, 8, 8);
	assert_rstate(f, KVL_R_REPLAYING);
	assert_int_equal(st.replay_from, 6);
	foreign(f, KVQ_EV_REPLAY, 2);
	foreign(f, KVQ_EV_REPLAY, 9);
	ev(f, KVQ_EV_REPLAY, 6);
	foreign(f, KVQ_EV_REPLAY, 7);
	ev(f, KVQ_EV_REPLAY, 7);
	ev(f, KVQ_EV_REPLAY_END, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.mark.wm, 8);
	assert_int_equal(f->l.c.rank_mismatches, 3);
	assert_int_equal(f->l.c.replays_ok, 1);
}

/* A seq that goes back on one connection is an engine restart, in any
 * state: the repair in flight is dropped and the listener cleared. */
static void
test_live_restart(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	live(f, 9, 9);
	assert_rstate(f, KVL_R_REPLAYING);
	live(f, 0, 0);
	assert_int_equal(f->l.c.engine_restarts, 1);
	assert_int_equal(st.clears, 1);
	assert_false(st.replay_open);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.mark.wm, 0);
	assert_int_equal(f->l.backlog_len, 0);
}

/* A batch lost to an unreadable envelope asks for the whole state. */
static void
test_lost_batch_resyncs(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	st.lose_seq = 6;
	live(f, 6, 7);
	assert_rstate(f, KVL_R_FETCH_DUMP);
	assert_int_equal(f->l.backlog_len, 1);
	fetched(f, KVR_KIND_TREE_DUMP, 7);
	assert_rstate(f, KVL_R_STREAMING);
	assert_false(f->l.recovery.need_full);
}

/* A planned move waits for the SUB, then a moment, then asks the old
 * owner; the live batches wait meanwhile and follow the snapshot. */
static void
test_move_in(void **state)
{
	fx *f = *state;
	f->l.replay_ep = f->l.recover_ep = NULL;
	f->l.ho.from = "tcp://127.0.0.1:9001";
	kvq_recovery_move_in(f->q, &f->l, KVQ_HANDOFF_CONNECT_WAIT_MS);
	assert_rstate(f, KVL_R_HANDOFF_ARMED);
	assert_int_equal(st.timer_ms, KVQ_HANDOFF_CONNECT_WAIT_MS);
	ev(f, KVQ_EV_CONNECTED, 0);
	assert_int_equal(st.timer_ms, KVQ_HANDOFF_SUB_MS);
	assert_int_equal(st.asks, 0);
	live(f, 4, 5);
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_HANDOFF);
	assert_int_equal(st.asks, 1);
	assert_int_equal(kvq_state_of(&f->l), KVL_RECOVERING);
	/* the snapshot, exact at 3 */
	f->l.mark = (kvs_mark){.has_wm = true, .wm = 3};
	f->l.ho.taken = true;
	ev(f, KVQ_EV_HANDOFF_TAKEN, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.mark.wm, 5);
	assert_int_equal(st.n_applied, 2);
	/* a gap later: a newer snapshot, as no engine endpoint can */
	live(f, 8, 8);
	assert_rstate(f, KVL_R_HANDOFF);
	assert_int_equal(st.asks, 2);
}

/* A hand-off that never came starts the listener as a new one. */
static void
test_move_in_failed(void **state)
{
	fx *f = *state;
	f->l.ho.from = "tcp://127.0.0.1:9001";
	kvq_recovery_move_in(f->q, &f->l, KVQ_HANDOFF_CONNECT_WAIT_MS);
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_HANDOFF);
	f->l.ho.from = NULL; /* handoff.c forgets it, then says so */
	ev(f, KVQ_EV_HANDOFF_FAILED, 0);
	assert_rstate(f, KVL_R_REPLAYING);
	assert_int_equal(st.replay_from, 0);
}

/* With no state and nothing to repair it from, a listener waits once
 * for a hand-off, then takes the stream as it comes. */
static void
test_await_handoff(void **state)
{
	fx *f = *state;
	f->l.replay_ep = f->l.recover_ep = NULL;
	live(f, 7, 7);
	assert_rstate(f, KVL_R_AWAIT_HANDOFF);
	assert_int_equal(kvq_state_of(&f->l), KVL_FAILED);
	assert_int_equal(st.timer_ms, 3000);
	ev(f, KVQ_EV_TIMER, 0);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.c.unrepaired_gaps, 1);
	assert_int_equal(f->l.mark.wm, 7);
}

/* A replay socket that cannot be opened is spent at once. */
static void
test_replay_cannot_open(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	st.replay_rv = KVI_EIO;
	live(f, 9, 9);
	assert_int_equal(f->l.c.replays_failed, 1);
	assert_rstate(f, KVL_R_FETCH_EVENTS);
}

/* A replay cut short after it delivered something is asked again from
 * where it got to. */
static void
test_replay_cut_short(void **state)
{
	fx *f = *state;
	in_step(f, 5);
	live(f, 12, 12);
	ev(f, KVQ_EV_REPLAY, 6);
	ev(f, KVQ_EV_REPLAY, 7);
	ev(f, KVQ_EV_REPLAY_END, 0);
	assert_rstate(f, KVL_R_REPLAYING);
	assert_int_equal(st.replays, 2);
	assert_int_equal(st.replay_from, 8);
}

/* Reset drops a fetch in flight and the backlog. */
static void
test_reset(void **state)
{
	fx *f = *state;
	f->l.replay_ep = NULL;
	in_step(f, 5);
	live(f, 9, 11);
	assert_rstate(f, KVL_R_FETCH_EVENTS);
	kvq_recovery_reset(f->q, &f->l);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(st.cancels, 1);
	assert_int_equal(f->l.backlog_len, 0);
	assert_int_equal(f->q->backlog.bytes, 0);
}

/* Past its budget the backlog is dropped whole, to be repaired. */
static void
test_backlog_budget(void **state)
{
	fx *f = *state;
	f->q->cfg.listener_backlog_max_bytes = 40;
	in_step(f, 5);
	live(f, 9, 14); /* 39 bytes by 13: the sixth passes 40 */
	assert_int_equal(f->l.c.backlog_overflows, 1);
	assert_true(f->l.backlog_bytes <= 40);
	assert_rstate(f, KVL_R_REPLAYING);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(t)                                                                   \
	cmocka_unit_test_setup_teardown(t, recovery_setup, recovery_teardown)
	    T(test_judge),
	    T(test_is_restart),
	    T(test_plan),
	    T(test_state_of),
	    T(test_connect_without_state),
	    T(test_gap_replayed),
	    T(test_replay_silent_then_fetch),
	    T(test_too_new_asks_for_dump),
	    T(test_too_big_refused),
	    T(test_reconnect_verified),
	    T(test_connect_live_first),
	    T(test_connect_interrupted),
	    T(test_connect_then_reset),
	    T(test_reconnect_other_engine),
	    T(test_verify_silent),
	    T(test_unrepairable_gap),
	    T(test_unseen_restart_clears),
	    T(test_foreign_rank),
	    T(test_foreign_rank_replayed),
	    T(test_foreign_rank_queued),
	    T(test_live_restart),
	    T(test_lost_batch_resyncs),
	    T(test_move_in),
	    T(test_move_in_failed),
	    T(test_await_handoff),
	    T(test_replay_cannot_open),
	    T(test_replay_cut_short),
	    T(test_reset),
	    T(test_backlog_budget),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
