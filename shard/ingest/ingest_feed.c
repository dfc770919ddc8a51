/*
 * ingest_feed.c - feeding the ingest path in process (see ingest.h): the
 * calling thread plays the ingest thread, without sockets.
 */
#include <stdio.h>

#include "ingest_int.h"

kvi_err
kvg_feed_start(kvg_ingest *g, char *err, size_t errlen)
{
	kvi_err rv = kvg_fetcher_open(g, NULL, NULL);
	if (rv == KVI_OK) {
		rv = kvg_commit_start(g, NULL, NULL);
	}
	if (rv != KVI_OK) {
		snprintf(err, errlen, "cannot start threads: %s",
			 kvi_strerror(rv));
		return rv;
	}
	g->feeding = true;
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

kvi_err
kvg_feed_unassign(kvg_ingest *g, const char *key, char *err, size_t errlen)
{
	kvg_cmd c = {
	    .kind = KVG_CMD_UNASSIGN, .key = key, .err = err, .errlen = errlen};
	return kvg_do_unassign(g, &c);
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
	kvg_commit_feed(g);
}

void
kvg_feed_sync(kvg_ingest *g)
{
	kvg_commit_sync(g);
}

bool
kvg_feed_image(kvg_ingest *g)
{
	return kvg_commit_settle(g) && kvg_image_save(g);
}

bool
kvg_feed_idle(kvg_ingest *g)
{
	kvg_commit_sync(g);
	kvg_image_tick(g);
	return !kvg_image_waiting(g);
}
