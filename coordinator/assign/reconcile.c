/*
 * reconcile.c - the assigner's tick: the shards polled (poll.c), bring
 * ownership to what rendezvous hashing says (assigner.h, steps 2-6).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "assigner_int.h"
#include "log.h"

#define KVC_ACTIVE KVINDEX__LISTENER_STATE__LISTENER_STATE_ACTIVE

/* ---- specs --------------------------------------------------------- */

void
kvc_spec_fill(Kvindex__Listener *sp, const kvc_lview *lv)
{
	kvindex__listener__init(sp);
	sp->key = lv->r.key;
	sp->instance_id = lv->instance_id;
	sp->pod = lv->pod != NULL && lv->pod[0] != '\0' ? lv->pod : NULL;
	sp->dp_rank = lv->r.rank;
	sp->model = lv->model;
	sp->block_size = lv->block_size;
	sp->endpoint = lv->r.endpoint;
	sp->replay_endpoint = lv->r.replay_endpoint;
	sp->recover_endpoint = lv->r.recover_endpoint;
}

static bool
str_same(const char *x, const char *y)
{
	return strcmp(x != NULL ? x : "", y != NULL ? y : "") == 0;
}

/* spec_same says whether a shard owns lv under the spec the registry
 * would assign. */
static bool
spec_same(const Kvindex__Listener *s, const kvc_lview *lv)
{
	return s->instance_id == lv->instance_id && s->dp_rank == lv->r.rank &&
	       s->block_size == lv->block_size &&
	       str_same(s->model, lv->model) && str_same(s->pod, lv->pod) &&
	       str_same(s->endpoint, lv->r.endpoint) &&
	       str_same(s->replay_endpoint, lv->r.replay_endpoint) &&
	       str_same(s->recover_endpoint, lv->r.recover_endpoint);
}

static void
status_from(kvc_lstatus *out, const Kvindex__ListenerStatus *st)
{
	memset(out, 0, sizeof(*out));
	out->known = true;
	out->state = (int)st->state;
	out->has_wm = st->has_watermark;
	out->wm = st->watermark;
	out->blocks = st->blocks;
	out->queued_batches = st->queued_batches;
	out->queued_bytes = st->queued_bytes;
	if (st->last_error != NULL) {
		snprintf(out->last_error, sizeof(out->last_error), "%s",
			 st->last_error);
	}
	out->incomplete = st->incomplete;
	if (st->misconfigured != NULL) {
		snprintf(out->misconfigured, sizeof(out->misconfigured), "%s",
			 st->misconfigured);
	}
	if (st->pending != NULL) {
		const Kvindex__PendingCounts *pc = st->pending;
		out->pending = (kvc_lpending){
		    .known = true,
		    .entries = pc->entries,
		    .routed = pc->routed,
		    .added = pc->added,
		    .confirmed = pc->confirmed,
		    .expired = pc->expired,
		    .evicted = pc->evicted,
		    .dropped = pc->dropped,
		    .prompt_tokens = pc->prompt_tokens,
		    .predicted_tokens = pc->predicted_tokens,
		};
	}
	if (st->handoff_from != NULL) {
		out->handoff = true;
		out->handoff_taken = st->has_handoff_blocks;
		out->handoff_blocks = st->handoff_blocks;
		snprintf(out->handoff_from, sizeof(out->handoff_from), "%s",
			 st->handoff_from);
	}
}

/* status_changes logs what an operator must act on when a listener's
 * status turns to it: misconfigured, or incomplete. */
static void
status_changes(const char *key, const kvc_lstatus *was, const kvc_lstatus *now)
{
	if (now->misconfigured[0] != '\0' && was->misconfigured[0] == '\0') {
		KVI_WARN("listener_misconfigured", "listener=%s reason=\"%s\"",
			 key, now->misconfigured);
	}
	if (now->incomplete && !was->incomplete && was->known) {
		KVI_WARN("listener_incomplete", "listener=%s reason=\"%s\"",
			 key, now->last_error);
	}
}

/* ---- the tick ------------------------------------------------------ */

typedef struct kvc_opvec {
	kvc_op *v;
	size_t n, cap;
} kvc_opvec;

static void
push(kvc_opvec *o, bool assign, size_t shard, const kvc_lview *lv,
     const char *key)
{
	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 16;
		o->v = kvi_reallocarray(o->v, o->cap, sizeof(*o->v));
	}
	kvc_op *op = &o->v[o->n++];
	*op = (kvc_op){0};
	op->assign = assign;
	op->shard = shard;
	op->lv = lv;
	op->key = (char *)key;
}

/* push_move assigns lv to shard, taking its state from the shard from
 * that owns it now (a hand-off). */
static void
push_move(kvc_opvec *o, size_t shard, const kvc_lview *lv, size_t from)
{
	push(o, true, shard, lv, NULL);
	o->v[o->n - 1].handoff = true;
	o->v[o->n - 1].from = from;
}

static int
strp_cmp(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* silent_status records that lv's owner, shard silent, is not
 * answering: what it last reported stands, as not known now. */
static void
silent_status(kvc_assigner *a, const kvc_lview *lv, size_t silent)
{
	kvc_lstatus st = lv->st;
	st.known = false;
	snprintf(st.last_error, sizeof(st.last_error),
		 "shard %s is not answering", a->poll.ids[silent]);
	kvc_reg_set_status(a->reg, lv->r.key, &st);
}

/* owner_note records that cur owns lv, as cur_st says, moving to
 * desired when that is another shard - unless cur stands in for the
 * owner the registry names (reg_owner), which is silent: a failover's new
 * owner rebuilding lv from the engine. The silent shard still holds lv's
 * blocks, and cur has none or some of them, so until cur reports lv
 * active the silent shard stays its owner, moving to cur, as the old
 * owner of a planned move does: the model's queries ask both, and an
 * answer that lacks the silent one says partial instead of passing off
 * cur's state as whole. */
static void
owner_note(kvc_assigner *a, const kvc_lview *lv, size_t cur,
	   const Kvindex__ListenerStatus *cur_st, size_t desired,
	   size_t reg_owner)
{
	const char *key = lv->r.key;
	if (cur_st->state != KVC_ACTIVE && reg_owner != SIZE_MAX &&
	    reg_owner != cur && !a->poll.answered[reg_owner]) {
		silent_status(a, lv, reg_owner);
		kvc_reg_set_owner(a->reg, key, a->poll.ids[reg_owner],
				  a->poll.ids[cur]);
		return;
	}
	kvc_lstatus st;
	status_from(&st, cur_st);
	status_changes(key, &lv->st, &st);
	kvc_reg_set_owner(a->reg, key, a->poll.ids[cur],
			  desired != cur && desired != KVC_RDV_NONE
			      ? a->poll.ids[desired]
			      : NULL);
	kvc_reg_set_status(a->reg, key, &st);
}

/* route_settled says whether shard has been in the query route of lv's
 * model long enough (route_settle_ms) that every query in flight asks
 * it: until then lv's other owners answer for it. A failed-over listener
 * whose shard comes back is owned by it again at once, and its stand-in,
 * let go at the same tick, would leave queries that took their route a
 * moment before asking neither. */
static bool
route_settled(kvc_assigner *a, const kvc_lview *lv, size_t shard, int64_t now)
{
	if (a->cfg.route_settle_ms <= 0) {
		return true;
	}
	int64_t since =
	    kvc_reg_route_since(a->reg, lv->model, a->poll.ids[shard]);
	return since >= 0 && now - since >= a->cfg.route_settle_ms;
}

/* listener_step decides one listener (steps 2, 4 and 5). Returns
 * whether no shard owns it. */
static bool
listener_step(kvc_assigner *a, const kvc_lview *lv, kvc_opvec *ops, int64_t now)
{
	const char *key = lv->r.key;
	size_t cnt;
	const kvc_owned *o = kvc_owned_find(a, key, &cnt);
	size_t desired = kvc_rdv_assign(a->pins, a->poll.ids, a->poll.n,
					a->poll.eligible, key, NULL);
	size_t cur = SIZE_MAX, reg_owner = kvc_shard_index(a, lv->shard);
	const Kvindex__ListenerStatus *cur_st = NULL;
	bool desired_active = false;
	for (size_t k = 0; k < cnt; k++) {
		if (!spec_same(o[k].st->listener, lv)) {
			KVI_WARN("spec_changed",
				 "listener=%s shard=%s: owned with an old "
				 "spec, dropping it",
				 key, a->poll.ids[o[k].shard]);
			push(ops, false, o[k].shard, NULL, key);
			continue;
		}
		bool better = cur == SIZE_MAX || o[k].shard == desired ||
			      (cur != desired && o[k].shard == reg_owner);
		if (better) {
			cur = o[k].shard;
			cur_st = o[k].st;
		}
		if (o[k].shard == desired) {
			desired_active = o[k].st->state == KVC_ACTIVE;
		}
	}
	bool move_due = desired != KVC_RDV_NONE && a->poll.answered[desired] &&
			desired != cur && kvc_retry_due(a, key, now);
	if (cur != SIZE_MAX) {
		owner_note(a, lv, cur, cur_st, desired, reg_owner);
		if (cur == desired && desired_active &&
		    !route_settled(a, lv, desired, now)) {
			/* the others go at a later tick: no quiet one first */
			for (size_t k = 0; k < cnt; k++) {
				if (o[k].shard != desired) {
					a->settle.dirty = true;
					kvc_admin_note_release(
					    a, key, a->poll.ids[o[k].shard],
					    a->poll.ids[desired]);
				}
			}
		} else if (cur == desired && desired_active) {
			for (size_t k = 0; k < cnt; k++) {
				if (o[k].shard != desired &&
				    spec_same(o[k].st->listener, lv)) {
					push(ops, false, o[k].shard, NULL, key);
					kvc_admin_note_move(
					    a, key, cur_st,
					    a->poll.ids[o[k].shard],
					    a->poll.ids[desired]);
				}
			}
		} else if (move_due) {
			push_move(ops, desired, lv, cur);
		} else if (cur == desired && cur_st->handoff_from == NULL &&
			   !cur_st->has_handoff_blocks &&
			   kvc_retry_due(a, key, now)) {
			/* The new owner is not in step and not taking the
			 * state - restarted mid-hand-off, say: name the old
			 * owner again (a shard ignores it for a listener
			 * that has state). */
			for (size_t k = 0; k < cnt; k++) {
				if (o[k].shard != desired &&
				    o[k].st->state == KVC_ACTIVE &&
				    spec_same(o[k].st->listener, lv)) {
					push_move(ops, desired, lv, o[k].shard);
					break;
				}
			}
		}
		return false;
	}
	if (reg_owner != SIZE_MAX && !a->poll.answered[reg_owner]) {
		/* its shard is silent: keep it there until the grace ends */
		silent_status(a, lv, reg_owner);
		if (move_due) {
			KVI_WARN("failover",
				 "listener=%s from=%s to=%s: the shard has "
				 "been silent past the grace period",
				 key, a->poll.ids[reg_owner],
				 a->poll.ids[desired]);
			kvi_counter_inc(a->m.failovers);
			kvc_reg_set_owner(a->reg, key, a->poll.ids[reg_owner],
					  a->poll.ids[desired]);
			push(ops, true, desired, lv, NULL);
		}
		return false;
	}
	if (lv->shard != NULL) {
		kvc_reg_set_owner(a->reg, key, NULL, NULL);
		kvc_lstatus none = {0};
		kvc_reg_set_status(a->reg, key, &none);
	}
	return true;
}

/* orphans unassigns what shards own that no source lists (step 6). */
static void
orphans(kvc_assigner *a, const kvc_lview *lv, size_t n, kvc_opvec *ops)
{
	const char **keys = kvi_calloc(n + 1, sizeof(*keys));
	for (size_t i = 0; i < n; i++) {
		keys[i] = lv[i].r.key;
	}
	qsort(keys, n, sizeof(*keys), strp_cmp);
	for (size_t i = 0; i < a->poll.n_owned; i++) {
		const char *k = a->poll.owned[i].key;
		if (bsearch(&k, keys, n, sizeof(*keys), strp_cmp) == NULL) {
			KVI_INFO("orphan",
				 "listener=%s shard=%s: no source "
				 "lists it, dropping it",
				 k, a->poll.ids[a->poll.owned[i].shard]);
			kvi_counter_inc(a->m.orphans);
			push(ops, false, a->poll.owned[i].shard, NULL, k);
		}
	}
	kvi_free(keys);
}

/* attempt_due_units attempts, all at once, the registration units that have
 * unowned listeners and whose retry is due (step 3). */
static size_t
attempt_due_units(kvc_assigner *a, const kvc_lview *lv, size_t n,
		  const bool *unowned, int64_t now)
{
	const kvc_lview **group = kvi_calloc(n + 1, sizeof(*group));
	size_t *first = kvi_calloc(n + 2, sizeof(*first));
	const char **names = kvi_calloc(n + 1, sizeof(*names));
	size_t pending = 0, units = 0, m = 0;
	for (size_t i = 0; i < n;) {
		const char *unit = kvc_unit_of(&lv[i]);
		size_t j = i, start = m;
		while (j < n && strcmp(kvc_unit_of(&lv[j]), unit) == 0) {
			if (unowned[j]) {
				group[m++] = &lv[j];
			}
			j++;
		}
		if (m > start && !kvc_retry_due(a, unit, now)) {
			pending++;
			m = start;
		} else if (m > start) {
			first[units] = start;
			names[units++] = unit;
		}
		i = j;
	}
	first[units] = m;
	pending += kvc_units_retry(a, group, first, names, units);
	kvi_free(names);
	kvi_free(first);
	kvi_free(group);
	return pending;
}

/* routes tells the registry which shards each model's queries ask:
 * its owners, and every shard that reported one of its listeners. */
static void
routes(kvc_assigner *a)
{
	const char **models = kvi_calloc(a->poll.n_owned + 1, sizeof(*models));
	const char **shards = kvi_calloc(a->poll.n_owned + 1, sizeof(*shards));
	for (size_t i = 0; i < a->poll.n_owned; i++) {
		models[i] = a->poll.owned[i].st->listener->model;
		shards[i] = a->poll.ids[a->poll.owned[i].shard];
	}
	kvc_reg_routes_set(a->reg, models, shards, a->poll.n_owned);
	kvi_free(models);
	kvi_free(shards);
}

/* settle notes what a full tick saw, and whether it left anything to
 * do: a listener owned by no shard, an operation, a retry waiting. */
static void
settle(kvc_assigner *a, bool leading, uint64_t term, uint64_t gen, int64_t now,
       bool settled)
{
	a->settle.done = settled && a->retries.n == 0;
	a->settle.leading = leading;
	a->settle.term = term;
	a->settle.gen = gen;
	a->settle.full_at_ms = now;
}

/* quiet says whether this tick would decide what the last full one
 * did: that one left nothing to do, and since then no command ran, no
 * listener was registered or removed, the leadership is as it was, and
 * every shard answered that its listeners are as they were. Its steps
 * are skipped then: an idle fleet costs a poll, not a walk of every
 * listener, twice a second. A full tick runs at least every
 * KVC_QUIET_MAX_MS all the same. */
#define KVC_QUIET_MAX_MS 10000

static bool
quiet(const kvc_assigner *a, bool leading, uint64_t term, uint64_t gen,
      int64_t now)
{
	return a->settle.done && a->poll.same && !a->settle.dirty &&
	       leading == a->settle.leading && term == a->settle.term &&
	       gen == a->settle.gen &&
	       now - a->settle.full_at_ms < KVC_QUIET_MAX_MS;
}

/* busy says whether registrations (or sources' syncs) are streaming
 * in, with the last full tick recent and the leadership as it saw it.
 * They assign their own listeners, so the walk of every listener waits
 * then, up to KVC_BUSY_FULL_MS: a fleet registering does not stall behind
 * one twice a second (106 ms each at 20,000 listeners, bench_fleet). What
 * is left to do - a retry, an orphan - waits as long. */
#define KVC_BUSY_FULL_MS 5000

static bool
busy(const kvc_assigner *a, bool registering, bool leading, uint64_t term,
     int64_t now)
{
	return registering && leading == a->settle.leading &&
	       term == a->settle.term &&
	       now - a->settle.full_at_ms < KVC_BUSY_FULL_MS;
}

bool
kvc_tick(kvc_assigner *a)
{
	kvc_poll_shards(a);
	/* one answer for the whole tick: leading or following */
	uint64_t term;
	bool leading = kvc_leading(a, &term);
	kvc_share_state(a, leading);
	int64_t now = kvi_now_ms();
	kvc_reg_models_check(a->reg, now, a->cfg.unmatched_window_ms);
	bool registering = a->settle.registering;
	a->settle.registering = false;
	if (quiet(a, leading, term, kvc_reg_gen(a->reg), now) ||
	    busy(a, registering, leading, term, now)) {
		kvi_counter_inc(a->m.ticks_quiet);
		kvc_admin_tick(a);
		return false;
	}
	kvi_counter_inc(a->m.ticks_full);
	a->settle.dirty = false;
	kvc_admin_releases_clear(a);
	kvc_adopt_http(a, leading);
	/* what the steps below see; a change after this is the next tick's */
	uint64_t gen = kvc_reg_gen(a->reg);
	size_t n;
	kvc_lview *lv = kvc_reg_listeners(a->reg, &n);
	bool *unowned = kvi_calloc(n + 1, sizeof(bool));
	kvc_opvec ops = {0};
	for (size_t i = 0; i < n; i++) {
		unowned[i] = listener_step(a, &lv[i], &ops, now);
	}
	routes(a);
	pthread_mutex_lock(&a->mu);
	bool all_synced =
	    (a->sources.synced & a->sources.expected) == a->sources.expected;
	pthread_mutex_unlock(&a->mu);
	if (!leading) {
		/* a follower: it learnt the owners, and changes nothing */
		settle(a, leading, term, gen, now, true);
		kvi_free(ops.v);
		kvi_free(unowned);
		kvc_lviews_free(lv, n);
		kvc_admin_tick(a);
		return true;
	}
	if (all_synced) {
		orphans(a, lv, n, &ops);
	}
	if (ops.n > 0) {
		bool *ok = kvi_calloc(ops.n, sizeof(bool));
		kvc_run_ops(a, ops.v, ops.n, ok, NULL, NULL, 0);
		for (size_t i = 0; i < ops.n; i++) {
			if (ops.v[i].assign) {
				const char *key = ops.v[i].lv->r.key;
				if (ok[i]) {
					kvc_retry_clear(a, key);
				} else {
					kvc_retry_fail(a, key, "move failed");
				}
			}
		}
		kvi_free(ok);
	}
	size_t pending = attempt_due_units(a, lv, n, unowned, now);
	if (a->m.pending_units != NULL) {
		kvi_gauge_set(a->m.pending_units, (int64_t)pending);
	}
	bool any_unowned = false;
	for (size_t i = 0; i < n && !any_unowned; i++) {
		any_unowned = unowned[i];
	}
	settle(a, leading, term, gen, now, ops.n == 0 && !any_unowned);
	kvi_free(ops.v);
	kvi_free(unowned);
	kvc_lviews_free(lv, n);
	kvc_admin_tick(a);
	return true;
}
