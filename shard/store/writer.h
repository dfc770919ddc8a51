/*
 * writer.h - the thread that commits group commits to the store.
 *
 * The ingest thread fills a kvw_job (listener puts, log records,
 * snapshots), hands it over with kvw_submit() and keeps applying events
 * into the next one. The writer thread commits the job in one LMDB
 * transaction (fsync included, unless the store was opened without sync)
 * and hands it back, with what it learnt of the store, through
 * kvw_poll(); the ingest thread then recycles its buffers. One job is in
 * flight at a time: a slow disk makes the next job larger, not more
 * numerous.
 *
 * A commit that fails (full disk, I/O error) is retried with backoff
 * (100 ms doubling to 10 s) until it succeeds or the writer stops; the job
 * is not lost, and kvw_failing() tells the ingest thread to stop reading
 * events until it is committed. When the writer stops with a job it could
 * not commit, that job's events are lost to the store only: the engines
 * still hold them, and the shard's next start replays from the committed
 * watermarks.
 *
 * notify(arg) is called on the writer thread each time a job is done.
 */
#ifndef KVI_SHARD_WRITER_H
#define KVI_SHARD_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "metrics.h"
#include "store.h"

/* A growable byte buffer the job owns. */
typedef struct kvw_buf {
	uint8_t *p;
	size_t len, cap;
} kvw_buf;

typedef struct kvw_job {
	/* what to commit; the arrays point into the buffers below */
	kvs_put *puts;
	size_t n_puts, cap_puts;
	kvs_rec *recs;
	size_t n_recs, cap_recs;
	kvs_snap *snaps;
	size_t n_snaps, cap_snaps;
	kvw_buf *bufs; /* owned payloads, one per put/rec/snap */
	size_t n_bufs, cap_bufs;
	size_t bytes; /* payload bytes, for backpressure */
	/* what the writer reports back */
	kvi_err rv;
	char err[256];
	double commit_seconds; /* of the successful attempt */
	int attempts;
	kvs_store_stats stats; /* after the commit */
	bool has_oldest; /* a listener whose snapshot would trim the log */
	uint32_t oldest_lid;
} kvw_job;

typedef struct kvw_writer kvw_writer;

void kvw_job_init(kvw_job *j);
void kvw_job_fini(kvw_job *j);
/* kvw_job_reset empties j for reuse, keeping its buffers. */
void kvw_job_reset(kvw_job *j);
/* kvw_job_buf returns a buffer of len bytes owned by j. */
uint8_t *kvw_job_buf(kvw_job *j, size_t len);
void kvw_job_put(kvw_job *j, uint32_t lid, const void *val, size_t len);
void kvw_job_rec(kvw_job *j, uint32_t lid, const void *payload, size_t len);
/* kvw_job_snap adds a snapshot of n entries and returns the buffer to fill
 * with them (n * KVS_ENTRY_SIZE bytes). */
uint8_t *kvw_job_snap(kvw_job *j, uint32_t lid, const kvs_mark *mark, size_t n);
bool kvw_job_empty(const kvw_job *j);

/* kvw_open makes a writer and starts its thread; each failed commit
 * attempt is counted on failures (may be NULL). */
kvi_err kvw_open(kvs_store *store, void (*notify)(void *arg), void *arg,
		 kvi_counter *failures, kvw_writer **out);
/* kvw_stop commits the job in flight if it can (one more attempt), then
 * joins the thread. Idempotent. */
void kvw_stop(kvw_writer *w);
void kvw_free(kvw_writer *w);

/* kvw_submit hands j to the writer; returns KVI_EAGAIN when a job is
 * already in flight. */
kvi_err kvw_submit(kvw_writer *w, kvw_job *j);
/* kvw_poll returns the finished job, or NULL while one is in flight or
 * none was submitted. */
kvw_job *kvw_poll(kvw_writer *w);
bool kvw_busy(kvw_writer *w);
/* kvw_failing says whether the job in flight has failed at least once;
 * msg receives the last error. */
bool kvw_failing(kvw_writer *w, char *msg, size_t len);

#endif /* KVI_SHARD_WRITER_H */
