/*
 * ingest_image.c - the index image beside the store (index_image.c): written
 * when the shard stops cleanly and, while it runs, each time enough was
 * committed since the last one; read at the next start instead of
 * rebuilding the index from the store - as it is when the store is still at
 * the state it was written at, with what was committed since replayed onto
 * it when the store has moved on (ingest_tail.c: a start after a kill).
 *
 * The stamp is the store's (kvs_store_stamp): LMDB's last transaction id,
 * the log's position, and the file's identity. An image of another file,
 * or of a state the store is not at nor past (it was rolled back), is
 * stale, and a stale or damaged image only costs the rebuild it was meant
 * to save: the store is the durable state, the image a copy of what it
 * builds. A stale image is logged as image_unused; one refused for
 * anything else (damaged, cut short, of another version) as image_refused,
 * a warning, with the reason index_image.c gives. An image is written only
 * when everything the index holds is committed (the writer idle and not
 * failing, no listener with changes left), so that it is exactly the store's
 * state.
 *
 * While running, an image is due once the items committed since the last
 * one (entries of snapshots, ops of log records) reach a sixteenth of the
 * index's entries, KVG_IMAGE_TAIL_MIN at least: the ingest thread then
 * commits what it applied, waits for the writer, and writes the image
 * (0.15 s at 10M entries, more while the disk is behind with what was
 * written before) while the engines' events wait in their sockets. When the
 * commits have settled by themselves - a group commit with nothing applied
 * since, say after a burst - a 64th is enough. Either way, images take at most
 * a KVG_IMAGE_COST_GAP-th of the ingest thread's time: one is not begun until
 * that many times what the last one took has passed since. What a start after a
 * kill replays is bounded by that: a sixteenth of the index while events come
 * at up to about 150,000 a second at 10M entries; above that rate, what arrives
 * in the time of 20 image writes, and past a fifth of the store's snapshot
 * entries the start rebuilds instead (ingest_tail.c). Queries go on meanwhile:
 * the image is read under the partitions' locks held shared.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "ingest_int.h"
#include "log.h"

static void
image_path(const kvg_ingest *g, char *path, size_t len, bool tmp)
{
	snprintf(path, len, "%s/%s%s", kvs_store_dir(g->store), KVG_IMAGE_FILE,
		 tmp ? ".tmp" : "");
}

int
kvg_image_find(kvg_ingest *g, const kvs_stamp *stamp, kvs_stamp *at)
{
	if (g->cfg.no_image) {
		return -1;
	}
	char path[4096], err[256];
	image_path(g, path, sizeof(path), false);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return -1;
	}
	uint8_t got[KVX_IMAGE_STAMP_MAX];
	size_t len = 0;
	kvi_err rv = kvx_image_stamp(fd, got, &len, err, sizeof(err));
	if (rv == KVI_OK) {
		if (len == sizeof(*at)) {
			memcpy(at, got, sizeof(*at));
		}
		if (len == sizeof(*at) &&
		    (memcmp(at, stamp, sizeof(*at)) == 0 ||
		     kvs_stamp_before(at, stamp))) {
			return fd;
		}
		rv = kvi_errf(err, sizeof(err), KVI_ENOENT,
			      "stale: of another state of the store");
	}
	/* of no use from now on: the store only moves further away */
	char q[300];
	kvi_log(rv == KVI_ENOENT ? KVI_LOG_INFO : KVI_LOG_WARN,
		rv == KVI_ENOENT ? "image_unused" : "image_refused",
		"reason=%s note=\"rebuilding from the store\"",
		kvi_log_quote(q, sizeof(q), err));
	close(fd);
	unlink(path);
	return -1;
}

void
kvg_image_drop(kvg_ingest *g)
{
	char path[4096];
	image_path(g, path, sizeof(path), false);
	unlink(path);
	g->image_current = false;
}

bool
kvg_image_load(kvg_ingest *g, int fd, const kvs_stamp *stamp, const bool *fresh,
	       size_t n_fresh)
{
	char err[256];
	double t0 = kvi_now_s();
	kvi_err rv = kvx_image_load(g->idx, fd, stamp, sizeof(*stamp), fresh,
				    n_fresh, err, sizeof(err));
	if (rv != KVI_OK) {
		char q[300];
		kvi_log(KVI_LOG_WARN, "image_refused",
			"reason=%s note=\"rebuilding from the store\"",
			kvi_log_quote(q, sizeof(q), err));
		return false;
	}
	kvx_stats xs;
	kvx_index_stats(g->idx, &xs);
	kvi_log(KVI_LOG_INFO, "image_loaded", "entries=%llu seconds=%.3f",
		(unsigned long long)xs.entries, kvi_now_s() - t0);
	g->image_stamp = *stamp;
	g->image_current = true;
	return true;
}

/* image_exact says whether the index holds exactly what the store
 * does: nothing applied and not yet committed. */
static bool
image_exact(kvg_ingest *g)
{
	if (!g->loaded || !kvg_commit_settled(g)) {
		return false;
	}
	for (uint32_t i = 0; i < g->next_lid; i++) {
		if (g->lis[i] != NULL && g->lis[i]->dirty) {
			return false;
		}
	}
	return true;
}

bool
kvg_image_save(kvg_ingest *g)
{
	if (g->cfg.no_image || !image_exact(g)) {
		return false;
	}
	if (kvx_index_hybrid(g->idx)) {
		/* an image holds listeners, not their cache groups: the
		 * next start rebuilds from the store */
		kvi_log(KVI_LOG_INFO, "image_not_written",
			"reason=\"listeners of hybrid models\"");
		return false;
	}
	kvs_stamp stamp;
	kvs_store_stamp(g->store, &stamp);
	if (g->image_current &&
	    memcmp(&stamp, &g->image_stamp, sizeof(stamp)) == 0) {
		return true; /* the one on disk is still this state */
	}
	char tmp[4096], path[4096], err[256];
	image_path(g, tmp, sizeof(tmp), true);
	image_path(g, path, sizeof(path), false);
	double t0 = kvi_now_s();
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		char q[300], why[4200];
		snprintf(why, sizeof(why), "%s: %s", tmp, strerror(errno));
		kvi_log(KVI_LOG_WARN, "image_not_written", "reason=%s",
			kvi_log_quote(q, sizeof(q), why));
		return false;
	}
	/* No fsync: an image a crash cuts short fails its digest, and the
	 * next start rebuilds, as it would have without one. */
	kvi_err rv =
	    kvx_image_save(g->idx, fd, &stamp, sizeof(stamp), err, sizeof(err));
	off_t bytes = lseek(fd, 0, SEEK_CUR);
	if (close(fd) != 0 && rv == KVI_OK) {
		rv = kvi_errf(err, sizeof(err), KVI_EIO, "close: %s",
			      strerror(errno));
	}
	/* The old image goes first: a rename over a file makes ext4 write
	 * the new one out at once (auto_da_alloc), a tenth of a second of
	 * this thread's at 10M entries. A crash in between leaves no image,
	 * a rebuild. */
	if (rv == KVI_OK && unlink(path) != 0 && errno != ENOENT) {
		rv = kvi_errf(err, sizeof(err), KVI_EIO, "unlink: %s",
			      strerror(errno));
	}
	if (rv == KVI_OK && rename(tmp, path) != 0) {
		rv = kvi_errf(err, sizeof(err), KVI_EIO, "rename: %s",
			      strerror(errno));
	}
	if (rv != KVI_OK) {
		unlink(tmp);
		g->image_current = false; /* the old one may be gone */
		char q[300];
		kvi_log(KVI_LOG_WARN, "image_not_written", "reason=%s",
			kvi_log_quote(q, sizeof(q), err));
		return false;
	}
	kvi_log(KVI_LOG_INFO, "image_written",
		"bytes=%lld seconds=%.3f items_since=%llu", (long long)bytes,
		kvi_now_s() - t0, (unsigned long long)g->image_tail);
	g->image_tail = 0;
	g->image_stamp = stamp;
	g->image_current = true;
	return true;
}

/* ---- while running ------------------------------------------------- */

void
kvg_image_note(kvg_ingest *g, uint64_t items)
{
	g->image_tail += items;
}

/* image_wanted says whether enough was committed since the image on
 * disk for another one to be worth its write: idle, the commits settled by
 * themselves; otherwise they are to be settled for it. */
static bool
image_wanted(kvg_ingest *g, bool idle)
{
	if (g->cfg.no_image || !g->loaded ||
	    g->image_tail < KVG_IMAGE_TAIL_MIN || kvx_index_hybrid(g->idx)) {
		return false;
	}
	kvx_stats xs;
	kvx_index_stats(g->idx, &xs);
	return g->image_tail >=
	       xs.entries / (idle ? KVG_IMAGE_IDLE_DIV : KVG_IMAGE_TAIL_DIV);
}

/* image_turn says whether an image may be begun now: the last one's cost
 * times KVG_IMAGE_COST_GAP has passed since it. */
static bool
image_turn(const kvg_ingest *g)
{
	return kvi_now_s() - g->image_at >= KVG_IMAGE_COST_GAP * g->image_took;
}

void
kvg_image_tick(kvg_ingest *g)
{
	if (g->image_tail < KVG_IMAGE_TAIL_MIN || !image_turn(g)) {
		return; /* the usual tick: nothing to look at */
	}
	bool idle = image_exact(g);
	if (!image_wanted(g, idle)) {
		return;
	}
	double t0 = kvi_now_s();
	bool written = (idle || kvg_commit_settle(g)) && kvg_image_save(g);
	/* tried, written or not: the next try waits its turn, a minute at
	 * least after a failure (a warning each time) */
	g->image_at = kvi_now_s();
	g->image_took = g->image_at - t0;
	if (!written &&
	    g->image_took < KVG_IMAGE_RETRY_S / KVG_IMAGE_COST_GAP) {
		g->image_took = KVG_IMAGE_RETRY_S / KVG_IMAGE_COST_GAP;
	}
}

bool
kvg_image_waiting(kvg_ingest *g)
{
	return image_wanted(g, image_exact(g));
}
