/*
 * ingest_commit.c - group commits: every commit interval, what the
 * listeners applied since the last one (a log record each, or a snapshot
 * once its log outgrows its state) goes to the writer thread as one job,
 * unless the writer is still busy with the last one; then the ingest
 * stops reading while the job waiting grows past a bound or the store
 * fails (backpressure).
 */
#include "ingest_int.h"

#define KVG_SNAPSHOT_MIN_BYTES (64u << 10)
#define KVG_LOG_RECORDS_MAX    100000u
#define KVG_JOB_MAX_BYTES      ((size_t)64 << 20)

typedef struct kvg_snap_fill {
	uint8_t *p;
	size_t n, cap;
} kvg_snap_fill;

static void
kvg_snap_entry(void *arg, uint64_t ext, uint64_t seq, uint8_t tiers)
{
	kvg_snap_fill *f = arg;
	if (f->n < f->cap) {
		kvs_entry_put(f->p + f->n * KVS_ENTRY_SIZE, ext, seq, tiers);
		f->n++;
	}
}

/* kvg_collect moves what listener l applied since the last commit into
 * job: a log record, or a snapshot once its log outgrows its state. */
static void
kvg_collect(kvg_ingest *g, kvw_job *job, kvl_listener *l)
{
	kvo_rec_finish(&l->rec, &l->mark);
	size_t entries = kvx_listener_entries(g->idx, l->lid);
	size_t state_bytes = entries * KVS_ENTRY_SIZE;
	l->log_bytes += l->rec.len;
	if (l->snapshot_due ||
	    l->log_bytes > (state_bytes > KVG_SNAPSHOT_MIN_BYTES
				? state_bytes
				: KVG_SNAPSHOT_MIN_BYTES)) {
		kvg_snap_fill f = {kvw_job_snap(job, l->lid, &l->mark, entries),
				   0, entries};
		kvx_listener_foreach(g->idx, l->lid, kvg_snap_entry, &f);
		l->log_bytes = 0;
		l->snapshot_due = false;
	} else {
		kvw_job_rec(job, l->lid, l->rec.buf, l->rec.len);
	}
	kvo_rec_reset(&l->rec);
	l->dirty = false;
}

bool
kvg_ingest_store_failing(kvg_ingest *g, char *why, size_t len)
{
	return g->writer != NULL && kvw_failing(g->writer, why, len);
}

void
kvg_commit_done(kvg_ingest *g, kvw_job *done)
{
	if (done->rv == KVI_OK) {
		if (g->h_commit != NULL) {
			kvi_histogram_observe(g->h_commit,
					      done->commit_seconds);
		}
	}
	g->snapshot_oldest =
	    done->has_oldest && done->stats.log_records > KVG_LOG_RECORDS_MAX;
	g->oldest_lid = done->oldest_lid;
	kvg_publish_totals(g, done);
	kvw_job_reset(done);
}

/* kvg_commit hands what was applied since the last commit to the writer,
 * unless the writer is still busy with the previous one. */
void
kvg_commit(kvg_ingest *g)
{
	kvw_job *done = kvw_poll(g->writer);
	if (done != NULL) {
		kvg_commit_done(g, done);
	}
	kvg_give_back(g);
	if (kvw_busy(g->writer)) {
		/* Backpressure: stop reading while the store lags too far. */
		kvg_io_pause(g, g->filling->bytes > KVG_JOB_MAX_BYTES ||
				    kvw_failing(g->writer, NULL, 0));
		if (done == NULL) {
			kvg_publish_totals(g, NULL);
		}
		return;
	}
	if (g->snapshot_oldest) {
		kvl_listener *l = kvg_listener(g, g->oldest_lid);
		if (l != NULL) {
			l->snapshot_due = true;
			kvl_touch(l);
		}
		g->snapshot_oldest = false;
	}
	/* only the listeners that changed: ids are not reused, and one
	 * removed meanwhile is NULL */
	for (size_t i = 0; i < g->dirtyq.n; i++) {
		kvl_listener *l = kvg_listener(g, g->dirtyq.lids[i]);
		if (l != NULL && l->dirty) {
			kvg_collect(g, g->filling, l);
		}
	}
	g->dirtyq.n = 0;
	if (!kvw_job_empty(g->filling)) {
		kvw_submit(g->writer, g->filling);
		g->filling =
		    g->filling == &g->jobs[0] ? &g->jobs[1] : &g->jobs[0];
	}
	kvg_io_pause(g, false);
	if (done == NULL) {
		kvg_publish_totals(g, NULL);
	}
}

void
kvg_on_commit_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvg_commit(arg);
}
