/*
 * ingest_load.c - building the ingest thread: loading the store into the
 * index at start-up, its recovery and its loop.
 */
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "handoff.h"
#include "ingest_int.h"
#include "log.h"

/* ---- loading ------------------------------------------------------- */

static kvi_err
load_listener(void *arg, uint32_t lid, const void *val, size_t len)
{
	kvg_ingest *g = arg;
	if (g->pass == KVG_LOAD_ENTRIES) {
		return KVI_OK; /* made by the pass before */
	}
	Kvindex__Listener *spec = kvindex__listener__unpack(NULL, len, val);
	if (spec == NULL) {
		return KVI_ECORRUPT;
	}
	kvl_listener *l;
	kvi_err rv = kvg_listener_create(g, lid, spec, val, len, &l);
	kvindex__listener__free_unpacked(spec, NULL);
	return rv == KVI_OK ? KVI_OK : KVI_ECORRUPT;
}

static kvi_err
load_snapshot(void *arg, uint32_t lid, const kvs_mark *mark, uint64_t lsn,
	      uint64_t n)
{
	kvg_ingest *g = arg;
	kvl_listener *l = kvg_listener(g, lid);
	if (l != NULL && g->pass != KVG_LOAD_ENTRIES) {
		l->mark = *mark;
	}
	return g->pass == KVG_LOAD_TAIL ? kvg_tail_snapshot(g, lid, lsn, n)
					: KVI_OK;
}

/* group_lid finds the index listener of l's cache group group, making
 * one the first time. */
static uint32_t
group_lid(kvg_ingest *g, kvl_listener *l, uint32_t group)
{
	if (group == 0) {
		return l->lid;
	}
	kva_group_open(g->idx, &g->recovery.scratch, l, group);
	return kvx_group_lid(g->idx, l->lid, group);
}

/* group_spec_load takes what a record says a group is. */
static void
group_spec_load(kvg_ingest *g, kvl_listener *l, uint32_t group,
		const kvx_group_spec *spec)
{
	if (group_lid(g, l, group) == KVX_NO_LID) {
		return;
	}
	kvx_write_begin(g->idx, l->lid);
	kvx_group_spec_set(g->idx, l->lid, group, spec);
	kvx_write_end(g->idx, l->lid);
}

static kvi_err
load_entries(void *arg, uint32_t lid, const uint8_t *e, size_t n)
{
	kvg_ingest *g = arg;
	kvl_listener *l = kvg_listener(g, lid);
	if (g->pass == KVG_LOAD_TAIL) {
		kvg_tail_entries(g, lid, e, n);
		return KVI_OK;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t ext, seq;
		uint8_t tiers;
		uint32_t group;
		kvx_group_spec spec;
		kvs_entry_get(e + i * KVS_ENTRY_SIZE, &ext, &seq, &tiers);
		if (kvx_record_spec(ext, seq, tiers, &group, &spec)) {
			if (l != NULL) {
				group_spec_load(g, l, group, &spec);
			}
		} else if (tiers < (1u << KVX_GROUP_SHIFT)) {
			kvx_bulk_add(g->bulk, lid, ext, seq, tiers);
		} else if (l != NULL) {
			uint32_t sub =
			    group_lid(g, l, tiers >> KVX_GROUP_SHIFT);
			kvx_bulk_add(g->bulk, sub, ext, seq,
				     tiers & KVX_TIERS_ALL);
		}
	}
	return KVI_OK;
}

/* load_op adds one log op of l to the bulk load, in its group's
 * listener; a clear clears them all. */
static void
load_op(kvg_ingest *g, kvl_listener *l, const kvo_op *op)
{
	if (op->kind == KVO_GROUP) {
		kvx_group_spec spec = {.kind = (kvx_kind)op->spec_kind,
				       .ratio = op->ratio,
				       .window = op->window};
		group_spec_load(g, l, op->group, &spec);
		return;
	}
	if (op->kind == KVO_CLEAR) {
		for (uint32_t k = 0; k < l->n_groups; k++) {
			uint32_t sub = kvx_group_lid(g->idx, l->lid, k);
			if (sub != KVX_NO_LID) {
				kvx_bulk_op_add(g->bulk, sub, KVX_BULK_CLEAR, 0,
						0, KVI_TIER_GPU);
			}
		}
		return;
	}
	kvx_bulk_kind kind =
	    op->kind == KVO_STORE ? KVX_BULK_STORE : KVX_BULK_REMOVE;
	uint32_t sub = group_lid(g, l, op->group);
	if (sub != KVX_NO_LID) {
		kvx_bulk_op_add(g->bulk, sub, kind, op->ext, op->seq,
				(kvi_tier)op->tier);
	}
}

/* load_built builds the index from the snapshots and log records
 * loaded (read from the store in scan_s), on as many threads as there are
 * processors (up to 8). */
static void
load_built(kvg_ingest *g, double scan_s)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	kvx_bulk_stats st;
	kvx_bulk_finish(g->bulk, cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus, &st);
	g->bulk = NULL;
	g->image_tail = st.entries + st.ops; /* no image has any of it */
	kvi_log(KVI_LOG_INFO, "index_built",
		"entries=%zu log_ops=%zu scan_s=%.3f items_s=%.3f "
		"maps_s=%.3f gather_s=%.3f holders_s=%.3f narrow_s=%.3f",
		st.entries, st.ops, scan_s, st.items_s, st.maps_s, st.gather_s,
		st.holders_s, st.narrow_s);
}

static kvi_err
load_record(void *arg, uint32_t lid, uint64_t lsn, const void *payload,
	    size_t len)
{
	kvg_ingest *g = arg;
	kvl_listener *l = kvg_listener(g, lid);
	kvo_iter it;
	kvs_mark mark;
	if (l == NULL) {
		return KVI_OK;
	}
	kvi_err rv = kvo_iter_init(&it, payload, len, &mark);
	if (rv == KVI_OK &&
	    (g->pass == KVG_LOAD_MARKS ||
	     (g->pass == KVG_LOAD_TAIL && !kvg_tail_wants(g, lsn)))) {
		rv = KVI_ENOENT; /* the ops are in the image */
	}
	kvo_op op;
	while (rv == KVI_OK && (rv = kvo_iter_next(&it, &op)) == KVI_OK) {
		if (g->pass == KVG_LOAD_TAIL) {
			kvg_tail_op(g, lid, &op);
		} else {
			load_op(g, l, &op);
		}
	}
	if (rv != KVI_ENOENT) {
		return KVI_ECORRUPT;
	}
	if (g->pass != KVG_LOAD_ENTRIES) {
		l->mark = mark;
		l->log_bytes += len;
	}
	return KVI_OK;
}

/* load_imaged loads the listeners and their marks, and the index from
 * the image fd of state at: an image of the store's state stamp as it is,
 * one of an earlier state with what was committed since replayed onto it
 * (ingest_tail.c). Returns whether the index came from the image; if not,
 * and the store read, the index is still to be built. */
static bool
load_imaged(kvg_ingest *g, kvs_load_cb *cb, int fd, const kvs_stamp *stamp,
	    const kvs_stamp *at, kvi_err *rv, char *err, size_t errlen)
{
	bool imaged;
	if (memcmp(at, stamp, sizeof(*at)) == 0) {
		g->pass = KVG_LOAD_MARKS;
		cb->entries = NULL;
		*rv = kvs_store_load(g->store, cb, err, errlen);
		imaged = *rv == KVI_OK && kvg_image_load(g, fd, at, NULL, 0);
	} else {
		g->pass = KVG_LOAD_TAIL;
		kvg_tail_begin(g, kvs_stamp_lsn(at));
		double t0 = kvi_now_s();
		*rv = kvs_store_load(g->store, cb, err, errlen);
		kvi_log(KVI_LOG_INFO, "tail_read", "seconds=%.3f",
			kvi_now_s() - t0);
		imaged = *rv == KVI_OK && kvg_tail_load(g, fd, at);
		kvg_tail_end(g);
		if (*rv == KVI_OK && !imaged) {
			kvg_image_drop(g); /* the store only moves away */
		}
	}
	cb->entries = load_entries;
	return imaged;
}

/* load loads the store's state: the listeners and their marks, and
 * the index from the image when there is one of this state or an earlier
 * one, else rebuilt from the store's entries. */
static kvi_err
load(kvg_ingest *g, char *err, size_t errlen)
{
	kvs_load_cb cb = {
	    .arg = g,
	    .listener = load_listener,
	    .snapshot = load_snapshot,
	    .entries = load_entries,
	    .record = load_record,
	};
	kvs_stamp stamp, at;
	kvs_store_stamp(g->store, &stamp);
	int fd = kvg_image_find(g, &stamp, &at);
	kvi_err rv;
	if (fd >= 0) {
		bool imaged =
		    load_imaged(g, &cb, fd, &stamp, &at, &rv, err, errlen);
		close(fd);
		if (rv != KVI_OK || imaged) {
			g->loaded = rv == KVI_OK;
			return rv;
		}
		g->pass = KVG_LOAD_ENTRIES;
	}
	g->bulk = kvx_bulk_begin(g->idx);
	double t0 = kvi_now_s();
	rv = kvs_store_load(g->store, &cb, err, errlen);
	load_built(g, kvi_now_s() - t0);
	g->loaded = rv == KVI_OK;
	return rv;
}

/* ---- open ---------------------------------------------------------- */

static void
config_defaults(kvg_config *c)
{
	if (c->commit_ms <= 0) {
		c->commit_ms = 20;
	}
	if (c->replay_timeout_ms <= 0) {
		c->replay_timeout_ms = 2000;
	}
	if (c->recover_concurrency <= 0) {
		c->recover_concurrency = 4;
	}
	if (c->recover_timeout_ms <= 0) {
		c->recover_timeout_ms = 120000;
	}
	if (c->listener_max_entries == 0) {
		c->listener_max_entries = KVG_LISTENER_MAX_ENTRIES;
	}
	if (c->backlog_max_bytes == 0) {
		c->backlog_max_bytes = (size_t)256 << 20;
	}
	if (c->listener_backlog_max_bytes == 0) {
		c->listener_backlog_max_bytes = (size_t)64 << 20;
	}
	if (c->orphan_resync == 0) {
		c->orphan_resync = 8;
	}
	if (c->backoff_max_ms <= 0) {
		c->backoff_max_ms = 30000;
	}
	if (c->reconnect_max_ms <= 0) {
		c->reconnect_max_ms = 30000;
	}
	if (c->shard_id == NULL) {
		c->shard_id = "shard";
	}
}

kvi_err
kvg_fetcher_open(kvg_ingest *g, void (*notify)(void *), void *arg)
{
	kvr_fetch_opts o = {
	    .max_concurrent = g->cfg.recover_concurrency,
	    .timeout_ms = g->cfg.recover_timeout_ms,
	    .connect_ms = g->cfg.recover_connect_ms,
	    .first_byte_ms = g->cfg.recover_first_byte_ms,
	    .idle_ms = g->cfg.recover_idle_ms,
	    .notify = notify,
	    .arg = arg,
	};
	kvi_err rv = kvr_fetcher_open(&o, &g->fetcher);
	if (rv == KVI_OK) {
		kvq_recovery_use_fetcher(&g->recovery, g->fetcher);
	}
	return rv;
}

/* ---- what recovery asks of the ingest (recovery.h's kvq_owner) ------ */

static void
owner_timer(void *arg, kvl_listener *l, int ms)
{
	kvg_io_timer(arg, l, ms);
}

static kvi_err
owner_replay_start(void *arg, kvl_listener *l, uint64_t seq)
{
	return kvg_io_replay_start(arg, l, seq);
}

static void
owner_replay_stop(void *arg, kvl_listener *l)
{
	kvg_io_replay_stop(arg, l);
}

static void
owner_handoff_ask(void *arg, kvl_listener *l)
{
	kvg_handoff_ask(arg, l);
}

static kvl_listener *
owner_listener(void *arg, uint32_t lid)
{
	return kvg_listener(arg, lid);
}

/* recovery_init readies g's recovery with g's config. */
static void
recovery_init(kvg_ingest *g)
{
	kvq_config qc = {
	    .replay_timeout_ms = g->cfg.replay_timeout_ms,
	    .backoff_max_ms = g->cfg.backoff_max_ms,
	    .orphan_resync = g->cfg.orphan_resync,
	    .listener_max_entries = g->cfg.listener_max_entries,
	    .backlog_max_bytes = g->cfg.backlog_max_bytes,
	    .listener_backlog_max_bytes = g->cfg.listener_backlog_max_bytes,
	};
	kvq_owner owner = {
	    .arg = g,
	    .timer = owner_timer,
	    .replay_start = owner_replay_start,
	    .replay_stop = owner_replay_stop,
	    .handoff_ask = owner_handoff_ask,
	    .listener = owner_listener,
	};
	kvq_recovery_init(&g->recovery, &qc, g->idx, &owner);
	g->recovery.scratch.pending = g->cfg.pending;
	g->recovery.scratch.new_lid = kvg_group_lid_new;
	g->recovery.scratch.lid_arg = g;
}

kvi_err
kvg_ingest_open(const kvg_config *cfg, kvg_ingest **out, char *err,
		size_t errlen)
{
	kvg_ingest *g = kvi_calloc(1, sizeof(*g));
	g->cfg = *cfg;
	config_defaults(&g->cfg);
	g->idx = cfg->idx;
	g->store = cfg->store;
	recovery_init(g);
	g->wake_fd = -1;
	pthread_mutex_init(&g->cmd_mu, NULL);
	kvg_metrics_init(g);
	kvg_commit_init(g);
	kvi_err rv = load(g, err, errlen);
	if (rv != KVI_OK) {
		kvg_ingest_free(g);
		return rv;
	}
	g->base = event_base_new();
	g->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (g->base == NULL || g->wake_fd < 0 || kvg_io_init(g) != KVI_OK) {
		snprintf(err, errlen, "cannot create the ingest loop");
		kvg_ingest_free(g);
		return KVI_EIO;
	}
	g->ev_wake = event_new(g->base, g->wake_fd, EV_READ | EV_PERSIST,
			       kvg_on_wake, g);
	event_add(g->ev_wake, NULL);
	kvg_metrics_register(g);
	kvg_publish_totals(g, NULL);
	*out = g;
	return KVI_OK;
}
