/*
 * assigner.c - the assigner thread: its queue, its loop and its life
 * (assigner.h). What the commands do is in commands.c, the tick in
 * reconcile.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "assigner_int.h"
#include "clock.h"
#include "log.h"

/* ---- metrics ------------------------------------------------------- */

static void
collect_listeners(void *arg, kvi_metrics_out *out)
{
	kvc_assigner *a = arg;
	kvc_reg_stats st;
	kvc_reg_stats_get(a->reg, &st);
	kvi_metrics_out_family(out, "kvindex_coord_listeners",
			       "Listeners by the state their shard reports.",
			       KVI_METRIC_GAUGE);
	for (size_t i = 0; i < KVC_STATES; i++) {
		kvi_label l = {"state", kvc_state_names[i]};
		kvi_metrics_out_sample(out, "kvindex_coord_listeners", &l, 1,
				       (double)st.by_state[i]);
	}
	kvi_metrics_out_family(out, "kvindex_coord_listeners_unassigned",
			       "Listeners no shard owns yet.",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample(out, "kvindex_coord_listeners_unassigned", NULL,
			       0, (double)st.unassigned);
	kvi_metrics_out_family(
	    out, "kvindex_coord_listeners_incomplete",
	    "Listeners that stepped over a gap nothing could repair and hold "
	    "only what their engine stored since.",
	    KVI_METRIC_GAUGE);
	kvi_metrics_out_sample(out, "kvindex_coord_listeners_incomplete", NULL,
			       0, (double)st.incomplete);
	kvi_metrics_out_family(out, "kvindex_coord_listeners_misconfigured",
			       "Listeners whose socket carries batches of "
			       "another data-parallel rank, or whose engine "
			       "stores blocks of another size.",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample(out, "kvindex_coord_listeners_misconfigured",
			       NULL, 0, (double)st.misconfigured);
	kvi_metrics_out_family(
	    out, "kvindex_coord_models_unmatched",
	    "Models whose listeners hold blocks while their queries matched "
	    "nothing for --unmatched-window-ms: routers and engines hash "
	    "prompts differently.",
	    KVI_METRIC_GAUGE);
	kvi_metrics_out_sample(out, "kvindex_coord_models_unmatched", NULL, 0,
			       (double)st.models_unmatched);
	kvi_metrics_out_family(out, "kvindex_coord_instances",
			       "Registered instances (pods).",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample(out, "kvindex_coord_instances", NULL, 0,
			       (double)st.instances);
	const char *fam = "kvindex_coord_registrations_refused_total";
	kvi_metrics_out_family(
	    out, fam,
	    "Pods refused, by source and reason: a name or an endpoint "
	    "another listener has, a block size the model does not have "
	    "here, a dp_size over --max-dp-size (a source's pod counted once "
	    "while it stays refused).",
	    KVI_METRIC_COUNTER);
	for (int s = 0; s < KVC_SOURCES; s++) {
		for (int w = KVC_REG_OK + 1; w < KVC_REG_WHYS; w++) {
			kvi_label l[2] = {
			    {"source", kvc_source_name((kvc_source)s)},
			    {"reason", kvc_reg_why_name((kvc_reg_why)w)}};
			kvi_metrics_out_sample_i64(
			    out, fam, l, 2,
			    (int64_t)atomic_load(&a->refusals.count[s][w]));
		}
	}
}

static void
metrics_setup(kvc_assigner *a, kvi_metrics *m)
{
	static const char *const res[] = {"ok", "failed"};
	kvi_counter *c[2];
	kvi_metrics_counter_vec_add(m, "kvindex_coord_assign_total",
				    "Assign calls to shards, by result.",
				    "result", res, 2, c);
	a->m.assign_ok = c[0];
	a->m.assign_failed = c[1];
	kvi_metrics_counter_vec_add(m, "kvindex_coord_unassign_total",
				    "Unassign calls to shards, by result.",
				    "result", res, 2, c);
	a->m.unassign_ok = c[0];
	a->m.unassign_failed = c[1];
	kvi_metrics_counter_add(m, "kvindex_coord_failovers_total",
				"Listeners reassigned away from a shard "
				"silent past the grace period.",
				&a->m.failovers);
	kvi_metrics_counter_add(m, "kvindex_coord_orphans_dropped_total",
				"Listeners dropped from shards because no "
				"source lists them.",
				&a->m.orphans);
	kvi_metrics_counter_add(m, "kvindex_coord_registration_retries_total",
				"Registration attempts that failed and were "
				"rolled back, to be retried.",
				&a->m.reg_retries);
	static const char *const kind[] = {"full", "quiet"};
	kvi_metrics_counter_vec_add(m, "kvindex_coord_ticks_total",
				    "Assigner ticks: full, or quiet (steps "
				    "skipped: nothing changed since the last "
				    "full one, or registrations are streaming "
				    "in and it is recent).",
				    "kind", kind, 2, c);
	a->m.ticks_full = c[0];
	a->m.ticks_quiet = c[1];
	static const double tick_bounds[] = {
	    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
	kvi_metrics_histogram_vec_add(
	    m, "kvindex_coord_tick_seconds",
	    "Assigner tick duration, the poll included, by kind.", tick_bounds,
	    sizeof(tick_bounds) / sizeof(tick_bounds[0]), "kind", kind, 2,
	    a->m.tick_seconds);
	kvi_metrics_gauge_add(m, "kvindex_coord_shards_up",
			      "Shards that answered the last status poll.",
			      KVI_GAUGE_INT, &a->m.shards_up);
	kvi_metrics_gauge_add(m, "kvindex_coord_registrations_pending",
			      "Registration units waiting for a retry.",
			      KVI_GAUGE_INT, &a->m.pending_units);
	kvi_metrics_collector_add(m, collect_listeners, a);
}

static void
cmd_free(kvc_cmd *c)
{
	kvc_pod_fini(&c->pod);
	kvc_pods_free(c->pods, c->n_pods);
	kvi_free(c->name);
	kvi_free(c->model);
	kvi_free(c);
}

void
kvc_enqueue(kvc_assigner *a, kvc_cmd *c)
{
	pthread_mutex_lock(&a->mu);
	bool stopped = a->stop;
	if (!stopped) {
		if (a->tail != NULL) {
			a->tail->next = c;
		} else {
			a->head = c;
		}
		a->tail = c;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	if (stopped) {
		if (c->done != NULL) {
			c->done(c->arg, 503, kvc_err_body("shutting down"));
		}
		cmd_free(c);
	}
}

void
kvc_assigner_register(kvc_assigner *a, const kvc_pod *p, kvc_assigner_done done,
		      void *arg)
{
	kvc_cmd *c = kvi_calloc(1, sizeof(*c));
	c->kind = KVC_CMD_REGISTER;
	kvc_pod_copy(&c->pod, p);
	c->done = done;
	c->arg = arg;
	kvc_enqueue(a, c);
}

void
kvc_assigner_unregister(kvc_assigner *a, const char *name, uint64_t id,
			int rank, const char *model, kvc_assigner_done done,
			void *arg)
{
	kvc_cmd *c = kvi_calloc(1, sizeof(*c));
	c->kind = KVC_CMD_UNREGISTER;
	c->name = kvi_strdup_null(name);
	c->model = kvi_strdup_null(model);
	c->id = id;
	c->rank = rank;
	c->done = done;
	c->arg = arg;
	kvc_enqueue(a, c);
}

void
kvc_assigner_sync(kvc_assigner *a, kvc_source source, const kvc_pod *pods,
		  size_t n)
{
	kvc_cmd *c = kvi_calloc(1, sizeof(*c));
	c->kind = KVC_CMD_SYNC;
	c->source = source;
	c->pods = kvi_calloc(n + 1, sizeof(*c->pods));
	for (size_t i = 0; i < n; i++) {
		kvc_pod_copy(&c->pods[i], &pods[i]);
	}
	c->n_pods = n;
	kvc_enqueue(a, c);
}

bool
kvc_assigner_ready(kvc_assigner *a, char *why, size_t len)
{
	pthread_mutex_lock(&a->mu);
	unsigned missing = a->sources.expected & ~a->sources.synced;
	bool polled = a->ticks > 0;
	pthread_mutex_unlock(&a->mu);
	for (int s = 0; s <= KVC_SOURCE_KUBERNETES; s++) {
		if (missing & (1u << s)) {
			snprintf(why, len, "the %s source has not synced yet",
				 kvc_source_name((kvc_source)s));
			return false;
		}
	}
	if (!polled) {
		snprintf(why, len, "the shards have not been polled yet");
		return false;
	}
	char store_err[256];
	if (a->store != NULL &&
	    kvc_cstore_failing(a->store, store_err, sizeof(store_err))) {
		snprintf(why, len,
			 "the coordinator's store cannot commit, so "
			 "registrations cannot be kept: %s",
			 store_err);
		return false;
	}
	size_t n;
	kvc_shard **sh = kvc_shardset_snapshot(a->shards, &n);
	int64_t now = kvi_now_ms();
	bool ok = n > 0;
	if (!ok) {
		snprintf(why, len, "no shards are configured");
	}
	for (size_t i = 0; ok && i < n; i++) {
		int64_t last = atomic_load(&sh[i]->last_ok_ms);
		char err[256];
		if (last == 0 || now - last > a->cfg.ready_stale_ms) {
			snprintf(why, len, "shard %s has not answered %s",
				 sh[i]->id, last == 0 ? "yet" : "recently");
			ok = false;
		} else if (kvc_shard_stale(sh[i], err, sizeof(err))) {
			snprintf(why, len,
				 "shard %s answers from an index that no "
				 "longer follows its engines: %s",
				 sh[i]->id, err);
			ok = false;
		}
	}
	kvc_shardset_release(sh, n);
	return ok;
}

/* ---- the thread ---------------------------------------------------- */

/* store_watch probes the store while it cannot commit, at most once a
 * second (kvc_cstore_probe), and logs when it starts failing and when it
 * commits again: a store that fails is found by the write that fails, a
 * registration's, and it is ready again once a write goes through. */
static void
store_watch(kvc_assigner *a)
{
	if (a->store == NULL) {
		return;
	}
	int64_t now = kvi_now_ms();
	char why[256];
	bool failing = kvc_cstore_failing(a->store, why, sizeof(why));
	if (failing && now - a->store_probe_ms >= 1000) {
		a->store_probe_ms = now;
		kvc_cstore_probe(a->store);
		failing = kvc_cstore_failing(a->store, why, sizeof(why));
	}
	if (failing && !a->store_failing) {
		KVI_ERROR("store_failing", "err=\"%s\"", why);
	} else if (!failing && a->store_failing) {
		KVI_INFO("store_commits", "msg=\"the store commits again\"");
	}
	a->store_failing = failing;
}

/* Listeners removed past which the memory they held is given back. */
#define KVC_GIVE_BACK_LISTENERS 1024

/* give_back returns to the system the memory of many listeners
 * removed (an unregister of a large pod, a source emptied): the allocator
 * keeps what is freed otherwise, and a coordinator that held 60,000
 * listeners for a moment kept 255 MB. It waits two ticks after the
 * removals, for the polls that drop the shards' statuses listing them. */
static void
give_back(kvc_assigner *a)
{
	if (a->removed_total - a->given_back_at < KVC_GIVE_BACK_LISTENERS) {
		return;
	}
	int64_t now = kvi_now_ms();
	if (a->give_back_ms == 0) {
		a->give_back_ms = now + 2 * (int64_t)a->cfg.tick_ms;
		return;
	}
	if (now < a->give_back_ms) {
		return;
	}
	KVI_INFO("memory_given_back", "listeners_removed=%" PRIu64,
		 a->removed_total - a->given_back_at);
	a->given_back_at = a->removed_total;
	a->give_back_ms = 0;
	malloc_trim(0);
}

/* run_cmds runs the first of cmds - with the registrations queued
 * right behind it when it is one, up to KVC_REGISTER_BATCH, which go
 * together - and returns the command after those it ran. */
static kvc_cmd *
run_cmds(kvc_assigner *a, kvc_cmd *cmds)
{
	/* a new leader takes the Lease's state before its first change */
	uint64_t term;
	if (kvc_leading(a, &term)) {
		kvc_share_take(a, true);
	}
	kvc_cmd *c = cmds;
	if (c->kind == KVC_CMD_REGISTER) {
		kvc_cmd *batch[KVC_REGISTER_BATCH];
		size_t n = 0;
		while (cmds != NULL && cmds->kind == KVC_CMD_REGISTER &&
		       n < KVC_REGISTER_BATCH) {
			batch[n++] = cmds;
			cmds = cmds->next;
		}
		kvc_do_registers(a, batch, n);
		for (size_t i = 0; i < n; i++) {
			cmd_free(batch[i]);
		}
		return cmds;
	}
	cmds = c->next;
	switch (c->kind) {
	case KVC_CMD_REGISTER:
		break;
	case KVC_CMD_UNREGISTER:
		kvc_do_unregister(a, c);
		break;
	case KVC_CMD_SYNC:
		kvc_do_sync(a, c);
		break;
	case KVC_CMD_CALL:
		c->call(a, c);
		break;
	}
	cmd_free(c);
	return cmds;
}

/* superseded says whether c is a source's sync that a later one in
 * the queue replaces: each carries the source's whole set of pods, so
 * only the last counts, and a watch that outpaces the assigner does not
 * pile up work. */
static bool
superseded(const kvc_cmd *c)
{
	if (c->kind != KVC_CMD_SYNC) {
		return false;
	}
	for (const kvc_cmd *l = c->next; l != NULL; l = l->next) {
		if (l->kind == KVC_CMD_SYNC && l->source == c->source) {
			return true;
		}
	}
	return false;
}

/* cmd_skip frees c, which is not run, and returns the next. */
static kvc_cmd *
cmd_skip(kvc_cmd *c)
{
	kvc_cmd *next = c->next;
	cmd_free(c);
	return next;
}

/* The loop: a tick every tick_ms, and at once after a command or a probe that a
 * down shard answered - except after registrations and sources' syncs,
 * which assign their own listeners: a fleet registering, or appearing in
 * a watch, does not pay a whole tick (a poll of every listener) per
 * request or per sync. */
static void *
assigner_main(void *arg)
{
	kvc_assigner *a = arg;
	bool tick_now = true;
	struct timespec dl = {0};
	for (;;) {
		pthread_mutex_lock(&a->mu);
		if (a->stop) {
			pthread_mutex_unlock(&a->mu);
			break;
		}
		if (tick_now) {
			pthread_mutex_unlock(&a->mu);
			double t0 = kvi_now_s();
			bool full = kvc_tick(a);
			kvi_histogram_observe(a->m.tick_seconds[!full],
					      kvi_now_s() - t0);
			give_back(a);
			store_watch(a);
			pthread_mutex_lock(&a->mu);
			a->ticks++;
			dl = kvi_deadline_ms(CLOCK_MONOTONIC, a->cfg.tick_ms);
		}
		tick_now = false;
		while (!a->stop && a->head == NULL && !a->poll.probe_answer) {
			if (pthread_cond_timedwait(&a->cv, &a->mu, &dl) ==
			    ETIMEDOUT) {
				tick_now = true;
				break;
			}
		}
		tick_now = tick_now || a->poll.probe_answer;
		kvc_cmd *cmds = a->head;
		a->head = a->tail = NULL;
		a->poll.probe_answer = false;
		bool stop = a->stop;
		pthread_mutex_unlock(&a->mu);

		while (cmds != NULL && stop) {
			kvc_cmd *c = cmds;
			cmds = c->next;
			if (c->done != NULL) {
				c->done(c->arg, 503,
					kvc_err_body("shutting down"));
			}
			cmd_free(c);
		}
		while (cmds != NULL) {
			if (superseded(cmds)) {
				cmds = cmd_skip(cmds);
				continue;
			}
			kvc_cmd_kind kind = cmds->kind;
			a->sources.sync_left = false;
			cmds = run_cmds(a, cmds);
			/* registrations and syncs assign their own
			 * listeners; a sync that left some to adopt or
			 * retry wants the tick at once all the same */
			bool own =
			    kind == KVC_CMD_REGISTER ||
			    (kind == KVC_CMD_SYNC && !a->sources.sync_left);
			tick_now = tick_now || !own;
			a->settle.registering = a->settle.registering || own;
			a->settle.dirty = true;
		}
		/* what a removal made room for: a source's skipped pods */
		kvc_skip_retry(a);
	}
	return NULL;
}

static kvi_err
load_pod(void *arg, const char *key, const kvc_pod *pod)
{
	kvc_assigner *a = arg;
	char err[320];
	kvc_reg_result res;
	if (kvc_pod_check(pod, err, sizeof(err)) != KVI_OK ||
	    kvc_reg_add(a->reg, pod, &res, err, sizeof(err)) != KVI_OK) {
		KVI_ERROR("stored_pod_rejected", "pod=%s err=%s", key, err);
	}
	return KVI_OK;
}

static kvi_err
load_pin(void *arg, const char *key, const char *shard)
{
	kvc_assigner *a = arg;
	kvc_rdv_pins_set(a->pins, key, shard);
	return KVI_OK;
}

static void
config_defaults(kvc_assigner_config *c)
{
	c->tick_ms = c->tick_ms > 0 ? c->tick_ms : 500;
	c->poll_timeout_ms = c->poll_timeout_ms > 0 ? c->poll_timeout_ms : 1000;
	c->rpc_timeout_ms = c->rpc_timeout_ms > 0 ? c->rpc_timeout_ms : 3000;
	c->failover_grace_ms =
	    c->failover_grace_ms != 0 ? c->failover_grace_ms : 60000;
	c->retry_min_ms = c->retry_min_ms > 0 ? c->retry_min_ms : 500;
	c->retry_max_ms = c->retry_max_ms > 0 ? c->retry_max_ms : 30000;
	if (c->retry_max_ms < c->retry_min_ms) {
		c->retry_max_ms = c->retry_min_ms;
	}
	c->max_in_flight = c->max_in_flight > 0 ? c->max_in_flight : 64;
	if (c->ready_stale_ms <= 0) {
		c->ready_stale_ms = 3 * c->tick_ms + c->poll_timeout_ms;
	}
}

kvi_err
kvc_assigner_open(kvc_registry *reg, kvc_shardset *shards, kvc_cstore *store,
		  kvi_metrics *m, const kvc_assigner_config *cfg,
		  kvc_assigner **out, char *err, size_t errlen)
{
	kvc_assigner *a = kvi_calloc(1, sizeof(*a));
	a->reg = reg;
	a->shards = shards;
	a->store = store;
	if (cfg != NULL) {
		a->cfg = *cfg;
	}
	config_defaults(&a->cfg);
	a->sources.expected = a->cfg.expect_sources;
	a->pins = kvc_rdv_pins_alloc();
	if (m == NULL) {
		a->m.own = kvi_metrics_alloc();
		m = a->m.own;
	}
	metrics_setup(a, m);
	if (store != NULL) {
		kvi_err rv =
		    kvc_cstore_pod_list(store, load_pod, a, err, errlen);
		if (rv == KVI_OK) {
			rv = kvc_cstore_pin_list(store, load_pin, a, err,
						 errlen);
		}
		if (rv != KVI_OK) {
			kvc_rdv_pins_free(a->pins);
			kvi_metrics_free(a->m.own);
			kvi_free(a);
			return rv;
		}
	}
	pthread_mutex_init(&a->mu, NULL);
	kvi_cond_init_monotonic(&a->cv);
	if (pthread_create(&a->thread, NULL, assigner_main, a) != 0) {
		snprintf(err, errlen, "cannot start the assigner thread");
		pthread_mutex_destroy(&a->mu);
		pthread_cond_destroy(&a->cv);
		kvc_rdv_pins_free(a->pins);
		kvi_metrics_free(a->m.own);
		kvi_free(a);
		return KVI_EIO;
	}
	*out = a;
	return KVI_OK;
}

void
kvc_assigner_set_lease(kvc_assigner *a, kvc_lease *l)
{
	a->lease = l;
}

void
kvc_assigner_free(kvc_assigner *a)
{
	if (a == NULL) {
		return;
	}
	pthread_mutex_lock(&a->mu);
	a->stop = true;
	kvc_cmd *cmds = a->head;
	a->head = a->tail = NULL;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	pthread_join(a->thread, NULL);
	pthread_mutex_lock(&a->mu);
	while (a->poll.probes > 0) { /* each ends within the poll timeout */
		pthread_cond_wait(&a->cv, &a->mu);
	}
	pthread_mutex_unlock(&a->mu);
	while (cmds != NULL) {
		kvc_cmd *c = cmds;
		cmds = c->next;
		if (c->done != NULL) {
			c->done(c->arg, 503, kvc_err_body("shutting down"));
		}
		cmd_free(c);
	}
	kvc_poll_free(a);
	kvc_kept_free(a);
	for (size_t i = 0; i < a->retries.n; i++) {
		kvi_free(a->retries.v[i].unit);
	}
	kvi_free(a->retries.v);
	for (size_t i = 0; i < a->removed.n; i++) {
		kvi_free(a->removed.keys[i]);
	}
	kvi_free(a->removed.keys);
	kvc_pods_free(a->share.pending, a->share.n_pending);
	for (int s = 0; s < KVC_SOURCES; s++) {
		kvc_skips_fini(&a->refusals.skipped[s]);
	}
	kvc_rdv_pins_free(a->pins);
	kvc_admin_fini(a);
	kvi_metrics_free(a->m.own);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	kvi_free(a);
}
