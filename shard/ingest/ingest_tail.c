/*
 * ingest_tail.c - a start from an index image the store has moved past:
 * the image, then what was committed since (the log's tail) replayed onto
 * it, instead of rebuilding the index from the whole store.
 *
 * An image holds the store's state at its stamp exactly (ingest_image.c).
 * Every snapshot and log record committed after that state has an lsn at
 * or past the stamp's next lsn, and every one committed before, an lsn
 * below it (kvs_stamp_lsn). So, listener by listener:
 *
 *   - one whose snapshot is older than the image is the image's, plus its
 *     log records from the stamp's lsn on: the store keeps every record
 *     past a listener's snapshot;
 *   - one whose snapshot is at or past that lsn (snapshotted since, or
 *     made since) is its snapshot plus the records after it, as in a
 *     rebuild: the image may lack it, and what it holds of it is
 *     cleared first;
 *   - one the image holds and the store no longer does (removed since)
 *     makes the image refused: the index is rebuilt.
 *
 * The load collects that tail (kvg_tail_entries, kvg_tail_op) in
 * load order - snapshot entries, then records by lsn - and
 * kvg_tail_load() applies it in the same order, a listener's changes
 * through the index's own kvx_store_batch(), kvx_remove() and
 * kvx_clear(), as the live path does. A tail that names a KV cache group
 * (the image never holds a hybrid listener), or that is larger than the
 * rebuild it would save, is not replayed: the index is rebuilt.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "ingest_int.h"
#include "log.h"

/* What a tail item is: a snapshot entry or a stored block (tiers a mask,
 * set on top of what the listener holds), a removal (tiers a mask too),
 * or a clear. */
enum { KVG_TAIL_PUT, KVG_TAIL_REMOVE, KVG_TAIL_CLEAR };

/* A tail of more items than a fifth of the store's snapshot entries is
 * not replayed: a replayed item costs about five times a rebuilt one (0.5
 * against 0.1 us at 10M entries), and a rebuild reads the log too. One of
 * up to KVG_TAIL_MIN items always is. */
#define KVG_TAIL_MAX_DIV 5
#define KVG_TAIL_MIN     65536

struct kvg_tail {
	uint64_t from; /* the image's next lsn */
	/* the items, in load order */
	uint64_t *ext, *seq;
	uint32_t *lid;
	uint8_t *kind, *tiers;
	size_t n, cap;
	/* by listener id: snapshotted since (its snapshot's entries
	 * follow), and how many entries that snapshot has */
	bool *fresh;
	uint64_t *fresh_n;
	uint32_t cap_lis;
	uint64_t snap_entries; /* of every snapshot in the store */
	const char *unfit;     /* why it cannot be replayed, or NULL */
};

void
kvg_tail_begin(kvg_ingest *g, uint64_t from)
{
	g->tail = kvi_calloc(1, sizeof(*g->tail));
	g->tail->from = from;
}

void
kvg_tail_end(kvg_ingest *g)
{
	kvg_tail *t = g->tail;
	if (t == NULL) {
		return;
	}
	kvi_free(t->ext);
	kvi_free(t->seq);
	kvi_free(t->lid);
	kvi_free(t->kind);
	kvi_free(t->tiers);
	kvi_free(t->fresh);
	kvi_free(t->fresh_n);
	kvi_free(t);
	g->tail = NULL;
}

bool
kvg_tail_wants(const kvg_ingest *g, uint64_t lsn)
{
	return lsn >= g->tail->from && g->tail->unfit == NULL;
}

static void
tail_add(kvg_tail *t, uint32_t lid, uint8_t kind, uint64_t ext, uint64_t seq,
	 uint8_t tiers)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 65536;
		t->ext = kvi_reallocarray(t->ext, t->cap, sizeof(*t->ext));
		t->seq = kvi_reallocarray(t->seq, t->cap, sizeof(*t->seq));
		t->lid = kvi_reallocarray(t->lid, t->cap, sizeof(*t->lid));
		t->kind = kvi_reallocarray(t->kind, t->cap, 1);
		t->tiers = kvi_reallocarray(t->tiers, t->cap, 1);
	}
	t->ext[t->n] = ext;
	t->seq[t->n] = seq;
	t->lid[t->n] = lid;
	t->kind[t->n] = kind;
	t->tiers[t->n] = tiers;
	t->n++;
}

kvi_err
kvg_tail_snapshot(kvg_ingest *g, uint32_t lid, uint64_t lsn, uint64_t n)
{
	kvg_tail *t = g->tail;
	t->snap_entries += n;
	if (lsn < t->from) {
		return KVI_ENOENT; /* older than the image: its entries are
				    * there */
	}
	if (lid >= t->cap_lis) {
		uint32_t cap = t->cap_lis ? t->cap_lis : 64;
		while (cap <= lid) {
			cap *= 2;
		}
		t->fresh = kvi_reallocarray(t->fresh, cap, sizeof(*t->fresh));
		t->fresh_n =
		    kvi_reallocarray(t->fresh_n, cap, sizeof(*t->fresh_n));
		memset(t->fresh + t->cap_lis, 0,
		       (cap - t->cap_lis) * sizeof(*t->fresh));
		memset(t->fresh_n + t->cap_lis, 0,
		       (cap - t->cap_lis) * sizeof(*t->fresh_n));
		t->cap_lis = cap;
	}
	t->fresh[lid] = true;
	t->fresh_n[lid] = n;
	return KVI_OK;
}

void
kvg_tail_entries(kvg_ingest *g, uint32_t lid, const uint8_t *e, size_t n)
{
	kvg_tail *t = g->tail;
	if (t->unfit != NULL) {
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t ext, seq;
		uint8_t tiers;
		uint32_t group;
		kvx_group_spec spec;
		kvs_entry_get(e + i * KVS_ENTRY_SIZE, &ext, &seq, &tiers);
		if (kvx_record_spec(ext, seq, tiers, &group, &spec) ||
		    tiers >= (1u << KVX_GROUP_SHIFT)) {
			t->unfit = "a snapshot of a listener with cache groups";
			return;
		}
		if (tiers != 0) {
			tail_add(t, lid, KVG_TAIL_PUT, ext, seq, tiers);
		}
	}
}

/* tail_long says whether t is too long to be worth replaying; once the
 * records come, every snapshot has been counted. */
static bool
tail_long(const kvg_tail *t)
{
	return t->n > KVG_TAIL_MIN && t->n > t->snap_entries / KVG_TAIL_MAX_DIV;
}

void
kvg_tail_op(kvg_ingest *g, uint32_t lid, const kvo_op *op)
{
	kvg_tail *t = g->tail;
	if (t->unfit != NULL) {
		return;
	}
	if (op->kind == KVO_GROUP || op->group != 0) {
		t->unfit = "log records of a listener with cache groups";
		return;
	}
	if (tail_long(t)) {
		t->unfit = "a tail longer than a rebuild is worth";
		return;
	}
	switch (op->kind) {
	case KVO_STORE:
		tail_add(t, lid, KVG_TAIL_PUT, op->ext, op->seq,
			 (uint8_t)KVX_TIER_BIT(op->tier));
		break;
	case KVO_REMOVE:
		tail_add(t, lid, KVG_TAIL_REMOVE, op->ext, 0,
			 (uint8_t)KVX_TIER_BIT(op->tier));
		break;
	default:
		tail_add(t, lid, KVG_TAIL_CLEAR, 0, 0, 0);
		break;
	}
}

/* tail_clear empties the listeners snapshotted since the image of what
 * the image held of them, and makes room for their snapshots. */
static void
tail_clear(kvg_ingest *g, kvg_tail *t)
{
	for (uint32_t lid = 0; lid < t->cap_lis; lid++) {
		if (!t->fresh[lid] || !kvx_listener_exists(g->idx, lid)) {
			continue;
		}
		kvx_write_begin(g->idx, lid);
		if (kvx_listener_entries(g->idx, lid) != 0) {
			kvx_clear(g->idx, lid);
		}
		kvx_listener_reserve(g->idx, lid, t->fresh_n[lid]);
		kvx_write_end(g->idx, lid);
	}
}

/* tail_apply applies the items of one listener from *i on, while they
 * last, in one write group. */
static void
tail_apply(kvg_ingest *g, kvg_tail *t, size_t *i)
{
	uint32_t lid = t->lid[*i];
	kvx_index *idx = g->idx;
	size_t k = *i;
	if (!kvx_listener_exists(idx, lid)) {
		while (k < t->n && t->lid[k] == lid) {
			k++; /* as the bulk loader drops them */
		}
		*i = k;
		return;
	}
	kvx_write_begin(idx, lid);
	while (k < t->n && t->lid[k] == lid) {
		size_t end = k + 1;
		switch (t->kind[k]) {
		case KVG_TAIL_PUT:
			while (end < t->n && t->lid[end] == lid &&
			       t->kind[end] == KVG_TAIL_PUT) {
				end++;
			}
			kvx_store_batch(idx, lid, t->ext + k, t->seq + k,
					t->tiers + k, end - k);
			break;
		case KVG_TAIL_REMOVE:
			for (int tier = 0; tier < KVI_TIER_COUNT; tier++) {
				if (t->tiers[k] & KVX_TIER_BIT(tier)) {
					kvx_remove(idx, lid, t->ext[k],
						   (kvi_tier)tier);
				}
			}
			break;
		default:
			kvx_clear(idx, lid);
			break;
		}
		k = end;
	}
	kvx_write_end(idx, lid);
	*i = k;
}

bool
kvg_tail_load(kvg_ingest *g, int fd, const kvs_stamp *stamp)
{
	kvg_tail *t = g->tail;
	const char *why = t->unfit;
	char q[300];
	if (why == NULL && tail_long(t)) {
		why = "a tail longer than a rebuild is worth";
	}
	if (why != NULL) {
		kvi_log(KVI_LOG_INFO, "image_unused",
			"reason=%s note=\"rebuilding from the store\"",
			kvi_log_quote(q, sizeof(q), why));
		return false;
	}
	if (!kvg_image_load(g, fd, stamp, t->fresh, t->cap_lis)) {
		return false;
	}
	double t0 = kvi_now_s();
	tail_clear(g, t);
	uint32_t rebuilt = 0, imaged = 0;
	for (uint32_t lid = 0; lid < t->cap_lis; lid++) {
		rebuilt += t->fresh[lid];
	}
	bool *seen = kvi_calloc(g->next_lid + 1, sizeof(*seen));
	for (size_t i = 0; i < t->n;) {
		uint32_t lid = t->lid[i];
		if (lid < g->next_lid && !seen[lid] &&
		    (lid >= t->cap_lis || !t->fresh[lid])) {
			seen[lid] = true;
			imaged++;
		}
		tail_apply(g, t, &i);
	}
	kvi_free(seen);
	kvi_log(KVI_LOG_INFO, "tail_replayed",
		"items=%zu listeners_from_snapshots=%u listeners_from_image=%u "
		"seconds=%.3f",
		t->n, rebuilt, imaged, kvi_now_s() - t0);
	/* the image on disk is still this one: a start after a kill
	 * replays the tail from it again */
	g->image_current = false;
	g->image_tail = t->n;
	return true;
}
