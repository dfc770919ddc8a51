/*
 * ingest_metrics.c - the shard-wide totals the ingest thread publishes
 * after each commit (a sum over every listener, so at most every 100 ms
 * and less often the more listeners there are), and /metrics, which the
 * metrics thread renders from the last ones published.
 */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "ingest_int.h"

#define KVG_TOTALS_MS 100 /* shard-wide figures, republished */

/* ---- the totals (the ingest thread) --------------------------------- */

void
kvg_metrics_init(kvg_ingest *g)
{
	pthread_mutex_init(&g->stats.mu, NULL);
}

void
kvg_metrics_fini(kvg_ingest *g)
{
	pthread_mutex_destroy(&g->stats.mu);
}

kvs_store_stats
kvg_metrics_store(kvg_ingest *g)
{
	pthread_mutex_lock(&g->stats.mu);
	kvs_store_stats ss = g->stats.totals.store;
	pthread_mutex_unlock(&g->stats.mu);
	return ss;
}

/* lag_note keeps l in t's list of the listeners furthest behind, by
 * bytes queued, largest first. */
static void
lag_note(kvg_totals *t, const kvl_listener *l)
{
	size_t at = t->n_lagging;
	while (at > 0 && t->lagging[at - 1].bytes < l->backlog_bytes) {
		at--;
	}
	if (at == KVG_LAGGING_MAX) {
		return;
	}
	size_t n =
	    t->n_lagging < KVG_LAGGING_MAX ? t->n_lagging + 1 : KVG_LAGGING_MAX;
	memmove(&t->lagging[at + 1], &t->lagging[at],
		(n - 1 - at) * sizeof(t->lagging[0]));
	kvg_lag *e = &t->lagging[at];
	snprintf(e->key, sizeof(e->key), "%s", l->key);
	e->batches = l->backlog_len;
	e->bytes = l->backlog_bytes;
	t->n_lagging = n;
}

void
kvg_publish_totals(kvg_ingest *g, const kvw_job *done)
{
	if (done != NULL) {
		g->stats.store = done->stats;
	}
	/* a sum over every listener: at most every KVG_TOTALS_MS, however
	 * often commits come, and a millisecond later for every ten
	 * listeners, so that what it costs does not grow with the fleet */
	int64_t now = kvi_now_ms();
	int64_t every = KVG_TOTALS_MS + (int64_t)(g->n_keyed / 10);
	if (g->stats.at_ms != 0 && now - g->stats.at_ms < every) {
		return;
	}
	g->stats.at_ms = now;
	kvg_totals t = {0};
	t.store_failing = kvg_ingest_store_failing(g, NULL, 0);
	for (uint32_t i = 0; i < g->next_lid; i++) {
		kvl_listener *l = g->lis[i];
		if (l != NULL) {
			kvg_counters_add(&t.c, &l->c);
			t.backlog_batches += l->backlog_len;
			if (l->backlog_bytes > t.backlog_max_listener) {
				t.backlog_max_listener = l->backlog_bytes;
			}
			if (l->backlog_len > 0) {
				lag_note(&t, l);
			}
			t.by_state[t.store_failing ? KVL_STALE
						   : kvq_state_of(l)]++;
			t.waiting += kvg_io_waiting(l);
		}
	}
	t.backlog_bytes = kvq_backlog_bytes(&g->recovery);
	pthread_mutex_lock(&g->stats.mu);
	t.store = g->stats.store;
	g->stats.totals = t;
	pthread_mutex_unlock(&g->stats.mu);
}

/* ---- /metrics, from the totals (the metrics thread) ----------------- */

typedef struct kvg_family {
	const char *name, *help;
	size_t offset; /* into kvl_counters */
} kvg_family;

#define KVG_FAM(f, h)                                                          \
	{"kvindex_shard_" #f "_total", h, offsetof(kvl_counters, f)},

/* every counter with a family of its own (help not NULL) */
static const kvg_family kvg_families[] = {KVL_COUNTERS(KVG_FAM)};
#undef KVG_FAM

static const char *const kvg_state_names[KVL_STATE_COUNT] = {
    "pending", "active", "recovering", "failed", "stale"};

static void
out_labeled(kvi_metrics_out *out, const char *name, const char *help,
	    const char *label, const char *const *values,
	    const uint64_t *counts, size_t n, kvi_metric_type type)
{
	kvi_metrics_out_family(out, name, help, type);
	for (size_t i = 0; i < n; i++) {
		kvi_label lb = {label, values[i]};
		kvi_metrics_out_sample_i64(out, name, &lb, 1,
					   (int64_t)counts[i]);
	}
}

static void
out_one(kvi_metrics_out *out, const char *name, const char *help,
	kvi_metric_type type, uint64_t v)
{
	kvi_metrics_out_family(out, name, help, type);
	kvi_metrics_out_sample_i64(out, name, NULL, 0, (int64_t)v);
}

/* out_lagging gives the listeners furthest behind, by name: a series
 * each for at most KVG_LAGGING_MAX of them, none while none is behind, so
 * that a fleet of listeners does not make a series each. */
static void
out_lagging(kvi_metrics_out *out, const kvg_totals *t)
{
	static const char *const names[] = {
	    "kvindex_shard_listener_queued_bytes",
	    "kvindex_shard_listener_queued_batches"};
	static const char *const helps[] = {
	    "Bytes of live batches queued for a listener behind its engine "
	    "(the shard's most behind only).",
	    "Live batches queued for a listener behind its engine (the "
	    "shard's most behind only)."};
	for (int k = 0; k < 2; k++) {
		kvi_metrics_out_family(out, names[k], helps[k],
				       KVI_METRIC_GAUGE);
		for (size_t i = 0; i < t->n_lagging; i++) {
			const kvg_lag *e = &t->lagging[i];
			kvi_label lb = {"listener", e->key};
			kvi_metrics_out_sample_i64(
			    out, names[k], &lb, 1,
			    (int64_t)(k == 0 ? e->bytes : e->batches));
		}
	}
}

/* out_pending writes the pending entries' totals (pending.h). */
static void
out_pending(kvi_metrics_out *out, kvd_pending *p)
{
	kvd_stats ps;
	kvd_stats_get(p, &ps);
	out_one(out, "kvindex_shard_routed_total",
		"Routed requests taken (POST /routed on a coordinator).",
		KVI_METRIC_COUNTER, ps.routed);
	out_one(out, "kvindex_shard_pending_entries",
		"Pending entries live: blocks routed to a listener and not "
		"stored by its engine yet.",
		KVI_METRIC_GAUGE, ps.entries);
	out_one(out, "kvindex_shard_pending_added_total",
		"Pending entries made (a block routed again only refreshes "
		"its entry).",
		KVI_METRIC_COUNTER, ps.added);
	static const char *const how[] = {"confirmed", "expired", "evicted",
					  "removed",   "cleared", "restart",
					  "gone"};
	uint64_t v[] = {ps.confirmed,
			ps.expired,
			ps.evicted,
			ps.dropped[KVD_DROP_REMOVED],
			ps.dropped[KVD_DROP_CLEARED],
			ps.dropped[KVD_DROP_RESTART],
			ps.dropped[KVD_DROP_GONE]};
	out_labeled(out, "kvindex_shard_pending_ended_total",
		    "Pending entries ended: confirmed by the engine's store, "
		    "expired, evicted by a bound, or dropped (the block "
		    "removed, the cache cleared, the engine restarted, the "
		    "listener gone).",
		    "how", how, v, sizeof(v) / sizeof(v[0]),
		    KVI_METRIC_COUNTER);
}

static void
collect_metrics(void *arg, kvi_metrics_out *out)
{
	kvg_ingest *g = arg;
	kvg_totals t;
	pthread_mutex_lock(&g->stats.mu);
	t = g->stats.totals;
	pthread_mutex_unlock(&g->stats.mu);
	for (size_t i = 0; i < sizeof(kvg_families) / sizeof(kvg_families[0]);
	     i++) {
		const kvg_family *f = &kvg_families[i];
		if (f->help == NULL) {
			continue;
		}
		uint64_t v =
		    *(const uint64_t *)((const char *)&t.c + f->offset);
		out_one(out, f->name, f->help, KVI_METRIC_COUNTER, v);
	}
	static const char *const replay[] = {"ok", "failed"};
	uint64_t rc[2] = {t.c.replays_ok, t.c.replays_failed};
	out_labeled(out, "kvindex_shard_replays_total",
		    "Gap repairs from the replay socket.", "result", replay, rc,
		    2, KVI_METRIC_COUNTER);
	static const char *const kinds[] = {"events", "treedump", "failed"};
	uint64_t kc[3] = {t.c.recoveries_events, t.c.recoveries_treedump,
			  t.c.recoveries_failed};
	out_labeled(out, "kvindex_shard_recoveries_total",
		    "Repairs from /kv_recover.", "kind", kinds, kc, 3,
		    KVI_METRIC_COUNTER);
	out_labeled(out, "kvindex_shard_listeners", "Listeners by state.",
		    "state", kvg_state_names, t.by_state, KVL_STATE_COUNT,
		    KVI_METRIC_GAUGE);
	out_one(out, "kvindex_shard_listeners_unreachable",
		"Listeners whose engine takes no connection: they hold no "
		"socket, and are probed with back-off.",
		KVI_METRIC_GAUGE, t.waiting);
	kvx_stats xs;
	kvx_index_stats(g->idx, &xs);
	out_one(out, "kvindex_shard_entries",
		"(block, listener) entries in the index.", KVI_METRIC_GAUGE,
		xs.entries);
	out_one(out, "kvindex_shard_sequence_hashes",
		"Distinct sequence hashes in the index.", KVI_METRIC_GAUGE,
		xs.seq_hashes);
	out_one(out, "kvindex_shard_backlog_bytes",
		"Bytes of live batches queued: listeners recovering, or "
		"behind their engines.",
		KVI_METRIC_GAUGE, t.backlog_bytes);
	out_one(out, "kvindex_shard_backlog_batches",
		"Live batches queued (the shard's lag behind its engines).",
		KVI_METRIC_GAUGE, t.backlog_batches);
	out_one(out, "kvindex_shard_backlog_max_listener_bytes",
		"Bytes queued for the listener furthest behind.",
		KVI_METRIC_GAUGE, t.backlog_max_listener);
	out_lagging(out, &t);
	out_one(out, "kvindex_store_bytes", "LMDB file size.", KVI_METRIC_GAUGE,
		t.store.file_bytes);
	out_one(out, "kvindex_store_map_bytes", "LMDB map size.",
		KVI_METRIC_GAUGE, t.store.map_bytes);
	out_one(out, "kvindex_store_log_records",
		"Log records not yet covered by snapshots.", KVI_METRIC_GAUGE,
		t.store.log_records);
	out_one(out, "kvindex_store_failing",
		"1 while commits to the store fail (full disk, I/O).",
		KVI_METRIC_GAUGE, t.store_failing);
	kvg_probe_metrics(out, g);
	if (g->cfg.pending != NULL) {
		out_pending(out, g->cfg.pending);
	}
}

void
kvg_metrics_register(kvg_ingest *g)
{
	kvi_metrics *m = g->cfg.metrics;
	if (m == NULL) {
		return;
	}
	kvg_commit_metrics(g, m);
	kvi_metrics_collector_add(m, collect_metrics, g);
}
