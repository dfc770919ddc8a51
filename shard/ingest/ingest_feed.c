/*
 * ingest_feed.c - feeding the ingest path in process (see ingest.h): the
 * calling thread plays the ingest thread, without sockets.
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ingest_int.h"

kvi_err
kvg_feed_start(kvg_ingest *g, char *err, size_t errlen)
{
	kvi_err rv = kvg_fetcher_start(g, NULL, NULL);
	if (rv == KVI_OK) {
		rv = kvw_start(g->store, NULL, NULL, g->c_commit_errors,
			       &g->writer);
	}
	if (rv != KVI_OK) {
		snprintf(err, errlen, "cannot start threads: %s",
			 kvi_strerror(rv));
		return rv;
	}
	g->feeding = true;
	g->last_commit = kvi_now_s();
	return KVI_OK;
}

kvi_err
kvg_feed_assign(kvg_ingest *g, const Kvindex__Listener *spec, uint32_t *lid,
		char *err, size_t errlen)
{
	kvg_cmd c = {
	    .kind = KVG_CMD_ASSIGN, .spec = spec, .err = err, .errlen = errlen};
	kvi_err rv = kvg_do_assign(g, &c);
	if (rv == KVI_OK) {
		*lid = c.lid;
	}
	return rv;
}

void
kvg_feed(kvg_ingest *g, uint32_t lid, uint64_t seq, const void *payload,
	 size_t len)
{
	kvl_listener *l = kvg_listener(g, lid);
	if (l != NULL) {
		kvq_recovery_on(&g->recovery, l,
				&(kvq_event){.kind = KVQ_EV_LIVE,
					     .seq = seq,
					     .payload = payload,
					     .len = len});
	}
	double now = kvi_now_s();
	if (now - g->last_commit < g->cfg.commit_ms / 1000.0) {
		return;
	}
	g->last_commit = now;
	kvg_commit(g);
	while (g->paused) {
		/* The store lags: wait for it, as the loop would stop
		 * reading. */
		usleep(200);
		kvg_commit(g);
	}
}

void
kvg_feed_sync(kvg_ingest *g)
{
	for (;;) {
		kvw_job *done;
		while ((done = kvw_poll(g->writer)) == NULL &&
		       kvw_busy(g->writer)) {
			usleep(200);
		}
		if (done != NULL) {
			kvg_commit_done(g, done);
		}
		if (g->dirtyq.n == 0 && kvw_job_empty(g->filling)) {
			return;
		}
		kvg_commit(g);
	}
}
