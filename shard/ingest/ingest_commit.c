/*
 * ingest_commit.c - group commits: every commit interval, what the
 * listeners applied since the last one (a log record each, or a snapshot
 * once its log outgrows its state) goes to the writer thread as one job,
 * unless the writer is still busy with the last one; then the ingest
 * stops reading while the job waiting grows past a bound or the store
 * fails (backpressure). Everything here is kvg_commits', which only this
 * file touches. Ingest thread only, except kvg_ingest_store_failing.
 */
#include <stdio.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "ingest_int.h"
#include "log.h"

#define KVG_SNAPSHOT_MIN_BYTES (64u << 10)
#define KVG_LOG_RECORDS_MAX    100000u
#define KVG_JOB_MAX_BYTES      ((size_t)64 << 20)

void
kvg_commit_init(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	kvw_job_init(&c->jobs[0]);
	kvw_job_init(&c->jobs[1]);
	c->filling = &c->jobs[0];
}

void
kvg_commit_metrics(kvg_ingest *g, kvi_metrics *m)
{
	static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005,
					0.01,   0.025, 0.05,   0.1,
					0.25,   0.5,   1,      2.5};
	kvi_metrics_histogram_add(
	    m, "kvindex_store_commit_seconds",
	    "Group commit latency (one LMDB transaction).", bounds,
	    sizeof(bounds) / sizeof(bounds[0]), &g->commits.h_latency);
	kvi_metrics_counter_add(m, "kvindex_store_commit_errors_total",
				"Failed group commit attempts (each is "
				"retried).",
				&g->commits.c_errors);
}

kvi_err
kvg_commit_start(kvg_ingest *g, void (*notify)(void *), void *arg)
{
	kvg_commits *c = &g->commits;
	c->last = kvi_now_s();
	return kvw_open(g->store, notify, arg, c->c_errors, &c->writer);
}

static void on_timer(evutil_socket_t fd, short what, void *arg);

void
kvg_commit_arm(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	c->timer = event_new(g->base, -1, EV_PERSIST, on_timer, g);
	struct timeval tv = {g->cfg.commit_ms / 1000,
			     (g->cfg.commit_ms % 1000) * 1000};
	event_add(c->timer, &tv);
}

void
kvg_commit_stop(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	kvw_stop(c->writer);
	kvw_job *done = kvw_poll(c->writer);
	if (done != NULL) {
		kvg_commit_done(g, done);
	}
}

void
kvg_commit_fini(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	kvw_free(c->writer);
	c->writer = NULL;
	kvw_job_fini(&c->jobs[0]);
	kvw_job_fini(&c->jobs[1]);
	if (c->timer != NULL) {
		event_free(c->timer);
		c->timer = NULL;
	}
	kvi_free(c->dirtyq.lids);
	c->dirtyq = (kvl_dirtyq){0};
}

void
kvg_commit_watch(kvg_ingest *g, kvl_listener *l)
{
	l->dirtyq = &g->commits.dirtyq;
}

void
kvg_commit_assign(kvg_ingest *g, const kvl_listener *l)
{
	kvg_commits *c = &g->commits;
	kvw_job_put(c->filling, l->lid, l->spec, l->spec_len);
	kvw_job_snap(c->filling, l->lid, &l->mark, 0);
}

void
kvg_commit_unassign(kvg_ingest *g, uint32_t lid)
{
	kvw_job_put(g->commits.filling, lid, NULL, 0);
}

bool
kvg_commit_settled(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	return !(c->writer != NULL &&
		 (kvw_busy(c->writer) || kvw_failing(c->writer, NULL, 0))) &&
	       kvw_job_empty(c->filling) && c->dirtyq.n == 0;
}

bool
kvg_ingest_store_failing(kvg_ingest *g, char *why, size_t len)
{
	kvw_writer *w = g->commits.writer;
	return w != NULL && kvw_failing(w, why, len);
}

/* ---- one commit ---------------------------------------------------- */

typedef struct kvg_snap_fill {
	uint8_t *p;
	size_t n, cap;
} kvg_snap_fill;

static void
snap_entry(void *arg, uint64_t ext, uint64_t seq, uint8_t tiers)
{
	kvg_snap_fill *f = arg;
	if (f->n < f->cap) {
		kvs_entry_put(f->p + f->n * KVS_ENTRY_SIZE, ext, seq, tiers);
		f->n++;
	}
}

/* collect moves what listener l applied since the last commit into
 * job: a log record, or a snapshot once its log outgrows its state. */
static void
collect(kvg_ingest *g, kvw_job *job, kvl_listener *l)
{
	kvo_rec_finish(&l->rec, &l->mark);
	size_t entries = kvx_listener_records(g->idx, l->lid);
	size_t state_bytes = entries * KVS_ENTRY_SIZE;
	l->log_bytes += l->rec.len;
	if (l->snapshot_due ||
	    l->log_bytes > (state_bytes > KVG_SNAPSHOT_MIN_BYTES
				? state_bytes
				: KVG_SNAPSHOT_MIN_BYTES)) {
		kvg_snap_fill f = {kvw_job_snap(job, l->lid, &l->mark, entries),
				   0, entries};
		kvx_listener_foreach(g->idx, l->lid, snap_entry, &f);
		l->log_bytes = 0;
		l->snapshot_due = false;
		kvg_image_note(g, entries);
	} else {
		kvw_job_rec(job, l->lid, l->rec.buf, l->rec.len);
		kvg_image_note(g, l->rec.n_ops);
	}
	kvo_rec_reset(&l->rec);
	l->dirty = false;
}

void
kvg_commit_done(kvg_ingest *g, kvw_job *done)
{
	kvg_commits *c = &g->commits;
	if (done->rv == KVI_OK) {
		if (c->h_latency != NULL) {
			kvi_histogram_observe(c->h_latency,
					      done->commit_seconds);
		}
	}
	c->snapshot_oldest =
	    done->has_oldest && done->stats.log_records > KVG_LOG_RECORDS_MAX;
	c->oldest_lid = done->oldest_lid;
	kvg_publish_totals(g, done);
	kvw_job_reset(done);
}

/* kvg_commit hands what was applied since the last commit to the writer,
 * unless the writer is still busy with the previous one. */
void
kvg_commit(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	kvw_job *done = kvw_poll(c->writer);
	if (done != NULL) {
		kvg_commit_done(g, done);
	}
	kvg_give_back(g);
	if (kvw_busy(c->writer)) {
		/* Backpressure: stop reading while the store lags too far. */
		kvg_io_pause(g, c->filling->bytes > KVG_JOB_MAX_BYTES ||
				    kvw_failing(c->writer, NULL, 0));
		if (done == NULL) {
			kvg_publish_totals(g, NULL);
		}
		return;
	}
	if (c->snapshot_oldest) {
		kvl_listener *l = kvg_listener(g, c->oldest_lid);
		if (l != NULL) {
			l->snapshot_due = true;
			kvl_touch(l);
		}
		c->snapshot_oldest = false;
	}
	/* only the listeners that changed: ids are not reused, and one
	 * removed meanwhile is NULL */
	for (size_t i = 0; i < c->dirtyq.n; i++) {
		kvl_listener *l = kvg_listener(g, c->dirtyq.lids[i]);
		if (l != NULL && l->dirty) {
			collect(g, c->filling, l);
		}
	}
	c->dirtyq.n = 0;
	if (!kvw_job_empty(c->filling)) {
		kvw_submit(c->writer, c->filling);
		c->filling =
		    c->filling == &c->jobs[0] ? &c->jobs[1] : &c->jobs[0];
	}
	kvg_io_pause(g, false);
	if (done == NULL) {
		kvg_publish_totals(g, NULL);
	}
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvg_ingest *g = arg;
	if (g->cfg.pending != NULL) {
		kvd_sweep(g->cfg.pending, kvi_now_ms());
	}
	kvg_commit(g);
	kvg_image_tick(g);
}

/* commit_wait waits for the job in flight, unless the store is failing,
 * and takes it back. */
static void
commit_wait(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	kvw_job *done;
	while ((done = kvw_poll(c->writer)) == NULL && kvw_busy(c->writer) &&
	       !kvw_failing(c->writer, NULL, 0)) {
		usleep(200);
	}
	if (done != NULL) {
		kvg_commit_done(g, done);
	}
}

bool
kvg_commit_settle(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	commit_wait(g);
	if (kvw_failing(c->writer, NULL, 0)) {
		return false;
	}
	kvg_commit(g);
	commit_wait(g);
	return kvg_commit_settled(g);
}

void
kvg_commit_last(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	char why[256];
	commit_wait(g);
	if (kvw_failing(c->writer, why, sizeof(why))) {
		char q[600];
		kvi_log(KVI_LOG_ERROR, "stop_uncommitted",
			"reason=%s note=\"events since the last commit "
			"are replayed from the engines at the next start\"",
			kvi_log_quote(q, sizeof(q), why));
		return;
	}
	kvg_commit(g);
}

/* ---- fed in process (ingest_feed.c) --------------------------------- */

void
kvg_commit_feed(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	double now = kvi_now_s();
	if (now - c->last < g->cfg.commit_ms / 1000.0) {
		return;
	}
	c->last = now;
	kvg_commit(g);
	while (kvg_io_paused(g)) {
		/* The store lags: wait for it, as the loop would stop
		 * reading. */
		usleep(200);
		kvg_commit(g);
	}
	kvg_image_tick(g);
}

void
kvg_commit_sync(kvg_ingest *g)
{
	kvg_commits *c = &g->commits;
	for (;;) {
		kvw_job *done;
		while ((done = kvw_poll(c->writer)) == NULL &&
		       kvw_busy(c->writer)) {
			usleep(200);
		}
		if (done != NULL) {
			kvg_commit_done(g, done);
		}
		if (c->dirtyq.n == 0 && kvw_job_empty(c->filling)) {
			return;
		}
		kvg_commit(g);
	}
}
