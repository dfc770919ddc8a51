#include "apply.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"
#include "clock.h"
#include "hash.h"

static void
set_error(kvl_listener *l, const char *fmt, const char *detail)
{
	snprintf(l->last_error, sizeof(l->last_error), fmt, detail);
}

void
kva_scratch_fini(kva_scratch *s)
{
	kvi_free(s->ext);
	kvi_free(s->seq);
	kvi_free(s->tiers);
	kvi_free(s->confirm);
	kvi_free(s->gone);
	memset(s, 0, sizeof(*s));
}

/* pend_note appends n sequence hashes to a list of the batch's. */
static void
pend_note(uint64_t **list, size_t *len, size_t *cap, const uint64_t *seq,
	  size_t n)
{
	if (*len + n > *cap) {
		*cap = *len + n < 256 ? 256 : 2 * (*len + n);
		*list = kvi_reallocarray(*list, *cap, sizeof(uint64_t));
	}
	memcpy(*list + *len, seq, n * sizeof(uint64_t));
	*len += n;
}

/* pend_begin starts following what a batch does to l's pending entries:
 * only while some are pending, so that a shard without routed requests
 * pays one relaxed load per batch. */
static void
pend_begin(kva_scratch *s)
{
	s->pend_on = s->pending != NULL && !kvd_empty(s->pending);
	s->pend_cleared = false;
	s->n_confirm = s->n_gone = 0;
}

/* pend_end applies what the batch did to l's pending entries, after its
 * index write group, so that a query never misses a block that is in
 * neither: an AllBlocksCleared drops them all, a removal its block, and a
 * store confirms its block. */
static void
pend_end(kva_scratch *s, const kvl_listener *l)
{
	if (!s->pend_on) {
		return;
	}
	if (s->pend_cleared) {
		kvd_drop_listener(s->pending, l->lid, KVD_DROP_CLEARED);
	}
	kvd_drop(s->pending, l->lid, s->gone, s->n_gone, KVD_DROP_REMOVED);
	kvd_confirm(s->pending, l->lid, s->confirm, s->n_confirm);
	s->pend_on = false;
}

static void
scratch_reserve(kva_scratch *s, size_t n)
{
	if (n > s->cap) {
		s->cap = n < 256 ? 256 : n;
		s->ext = kvi_reallocarray(s->ext, s->cap, sizeof(uint64_t));
		s->seq = kvi_reallocarray(s->seq, s->cap, sizeof(uint64_t));
		s->tiers = kvi_reallocarray(s->tiers, s->cap, sizeof(uint8_t));
	}
}

/* put_run stores n blocks of one event: the index in one overlapped
 * pass, then the log ops. */
static void
put_run(kvx_index *idx, kva_scratch *s, kvl_listener *l, const uint64_t *ext,
	size_t n, kvi_tier tier)
{
	memset(s->tiers, (int)KVX_TIER_BIT(tier), n);
	kvx_store_batch(idx, l->lid, ext, s->seq, s->tiers, n);
	for (size_t i = 0; i < n; i++) {
		kvo_rec_store(&l->rec, ext[i], s->seq[i], (uint8_t)tier);
	}
	l->c.blocks_stored += n;
	if (s->pend_on) {
		pend_note(&s->confirm, &s->n_confirm, &s->cap_confirm, s->seq,
			  n);
	}
}

static void
dirty(kvl_listener *l)
{
	kvl_touch(l);
}

/* chain_start finds the sequence hash a stored run continues from:
 * the root, or the parent's. Returns false for an orphan. */
static bool
chain_start(kvx_index *idx, kvl_listener *l, bool has_parent, uint64_t parent,
	    uint64_t *prev)
{
	if (!has_parent) {
		*prev = KVI_SEQ_ROOT;
		return true;
	}
	if (kvx_lookup(idx, l->lid, parent, prev)) {
		return true;
	}
	l->c.orphans++;
	l->orphan_streak++;
	return false;
}

static void
drop(kvx_index *idx, kva_scratch *s, kvl_listener *l, uint64_t ext,
     kvi_tier tier)
{
	uint64_t seq;
	if (s->pend_on && kvx_lookup(idx, l->lid, ext, &seq)) {
		pend_note(&s->gone, &s->n_gone, &s->cap_gone, &seq, 1);
	}
	if (kvx_remove(idx, l->lid, ext, tier)) {
		kvo_rec_remove(&l->rec, ext, (uint8_t)tier);
		l->c.blocks_removed++;
	} else {
		l->c.unknown_removes++;
	}
}

/* clear_locked empties the listener's entries: from here on it holds
 * what its engine holds again, so an incomplete mark ends. */
static void
clear_locked(kvx_index *idx, kvl_listener *l)
{
	kvx_clear(idx, l->lid);
	kvo_rec_clear(&l->rec);
	l->mark.incomplete = false;
}

/* stored_known adds the event's tier to blocks the listener holds: a
 * store without tokens, as an offload to another tier reports it. */
static void
stored_known(kvx_index *idx, kva_scratch *s, kvl_listener *l,
	     const kvi_event *ev)
{
	scratch_reserve(s, ev->n_hashes);
	size_t n = 0;
	for (uint32_t i = 0; i < ev->n_hashes; i++) {
		if (kvx_lookup(idx, l->lid, ev->hashes[i], &s->seq[n])) {
			s->ext[n++] = ev->hashes[i];
		} else {
			l->c.orphans++;
			l->orphan_streak++;
		}
	}
	if (n < ev->n_hashes) {
		set_error(l, "%s",
			  "BlockStored without tokens of a block the "
			  "listener does not hold");
	}
	put_run(idx, s, l, s->ext, n, ev->tier);
}

/* note_block_size counts a BlockStored of block size bs on l, whose
 * registration says another: nothing of it can be indexed (its hashes
 * chain other token runs than queries hash), which is said in the log at
 * most once a minute and in l's status for a minute after. */
static void
note_block_size(kvl_listener *l, uint32_t bs)
{
	l->c.block_size_mismatches++;
	l->foreign_bs = bs;
	l->foreign_bs_at_ms = kvi_now_ms();
	char what[64];
	snprintf(what, sizeof(what), "%u, listener has %u", bs, l->block_size);
	set_error(l, "BlockStored with block_size %s", what);
	if (l->foreign_bs_at_ms - l->foreign_bs_logged_ms < 60000) {
		return;
	}
	l->foreign_bs_logged_ms = l->foreign_bs_at_ms;
	kvl_warn(l, "listener_misconfigured",
		 "event_block_size=%u block_size=%u events=%" PRIu64
		 " reason=\"the engine stores blocks of another size than the "
		 "registration says: they are not indexed\"",
		 bs, l->block_size, l->c.block_size_mismatches);
}

static void
stored(kvx_index *idx, kva_scratch *s, kvl_listener *l, const kvi_event *ev)
{
	if (ev->n_tokens == 0 && ev->n_hashes > 0) {
		stored_known(idx, s, l, ev);
		return;
	}
	if (ev->block_size != l->block_size) {
		note_block_size(l, ev->block_size);
		return;
	}
	if ((uint64_t)ev->n_hashes * ev->block_size != ev->n_tokens) {
		l->c.malformed++;
		set_error(l, "%s",
			  "BlockStored token count is not "
			  "block_hashes x block_size");
		return;
	}
	uint64_t prev;
	if (!chain_start(idx, l, ev->has_parent, ev->parent, &prev)) {
		return;
	}
	if (ev->unknown_keys) {
		l->c.unknown_extra_keys++;
	}
	scratch_reserve(s, ev->n_hashes);
	kvi_event_local_hashes(ev, s->seq);
	kvi_seq_hashes(prev, s->seq, ev->n_hashes, s->seq);
	put_run(idx, s, l, ev->hashes, ev->n_hashes, ev->tier);
}

static void
apply_event(kvx_index *idx, kva_scratch *s, kvl_listener *l,
	    const kvi_event *ev)
{
	if (ev->type == KVI_EVENT_SKIPPED) {
		if (ev->skip == KVI_SKIP_UNKNOWN_TYPE) {
			l->c.unknown_events++;
		} else {
			l->c.unreadable_events++;
		}
		return;
	}
	if ((ev->has_group_idx && ev->group_idx != 0) || ev->remote) {
		l->c.skipped_events++;
		return;
	}
	l->c.events++;
	switch (ev->type) {
	case KVI_EVENT_STORED:
		stored(idx, s, l, ev);
		break;
	case KVI_EVENT_REMOVED:
		for (uint32_t i = 0; i < ev->n_hashes; i++) {
			drop(idx, s, l, ev->hashes[i], ev->tier);
		}
		break;
	case KVI_EVENT_CLEARED:
		clear_locked(idx, l);
		s->pend_cleared = true;
		break;
	case KVI_EVENT_SKIPPED:
		break;
	}
}

/* note_foreign counts a batch of rank on l's socket. */
static void
note_foreign(kvl_listener *l, uint16_t rank)
{
	l->c.rank_mismatches++;
	l->foreign_rank = rank;
	l->foreign_at_ms = kvi_now_ms();
	char what[96];
	snprintf(what, sizeof(what), "%u arrive on the socket of rank %u", rank,
		 l->dp_rank);
	set_error(l, "batches of data_parallel_rank %s: ignored", what);
}

bool
kva_foreign(kvl_listener *l, const void *payload, size_t len)
{
	bool has;
	uint16_t rank;
	if (kvi_batch_rank(payload, len, &has, &rank) != KVI_OK || !has ||
	    rank == l->dp_rank) {
		return false; /* unreadable ones are the decoder's to judge */
	}
	note_foreign(l, rank);
	return true;
}

kva_result
kva_batch(kvx_index *idx, kvi_decoder *dec, kva_scratch *scratch,
	  kvl_listener *l, uint64_t seq, const void *payload, size_t len)
{
	kvi_batch b;
	kvi_err rv = kvi_decoder_decode(dec, payload, len, &b);
	if (rv == KVI_OK && b.has_dp_rank && b.dp_rank != l->dp_rank) {
		note_foreign(l, b.dp_rank);
		return KVA_FOREIGN;
	}
	l->mark = (kvs_mark){.has_wm = true,
			     .wm = seq,
			     .has_fp = true,
			     .fp = XXH3_64bits(payload, len),
			     .incomplete = l->mark.incomplete};
	dirty(l);
	if (rv != KVI_OK) {
		l->c.malformed++;
		l->c.lost_batches++;
		set_error(l, "malformed batch: %s", kvi_decoder_error(dec));
		return KVA_LOST;
	}
	l->c.batches++;
	pend_begin(scratch);
	kvx_write_begin(idx, l->lid);
	for (uint32_t i = 0; i < b.n_events; i++) {
		apply_event(idx, scratch, l, &b.events[i]);
	}
	kvx_write_end(idx, l->lid);
	pend_end(scratch, l);
	if (b.n_skipped > 0) {
		set_error(l, "event skipped: %s", kvi_decoder_skip_error(dec));
	}
	return KVA_APPLIED;
}

static void
recover_stored(kvx_index *idx, kva_scratch *s, kvl_listener *l,
	       const kvr_event *ev)
{
	uint64_t prev;
	if (!chain_start(idx, l, ev->has_parent, ev->parent_hash, &prev)) {
		return;
	}
	scratch_reserve(s, ev->n_blocks);
	for (uint32_t i = 0; i < ev->n_blocks; i++) {
		prev = kvi_seq_hash(prev, ev->blocks[i].tokens_hash);
		s->ext[i] = ev->blocks[i].block_hash;
		s->seq[i] = prev;
	}
	put_run(idx, s, l, s->ext, ev->n_blocks, ev->tier);
}

void
kva_recover(kvx_index *idx, kva_scratch *scratch, kvl_listener *l,
	    const kvr_response *r)
{
	bool dump = r->kind == KVR_KIND_TREE_DUMP;
	uint64_t after = l->mark.wm;
	bool all = dump || !l->mark.has_wm;
	pend_begin(scratch);
	kvx_write_begin(idx, l->lid);
	if (dump) {
		clear_locked(idx, l);
	}
	for (size_t i = 0; i < r->n_events; i++) {
		const kvr_event *ev = &r->events[i];
		if (!all && ev->event_id <= after) {
			continue; /* already applied from the live stream */
		}
		l->c.events++;
		switch (ev->type) {
		case KVI_EVENT_STORED:
			recover_stored(idx, scratch, l, ev);
			break;
		case KVI_EVENT_REMOVED:
			for (uint32_t k = 0; k < ev->n_hashes; k++) {
				drop(idx, scratch, l, ev->block_hashes[k],
				     ev->tier);
			}
			break;
		case KVI_EVENT_CLEARED:
			clear_locked(idx, l);
			scratch->pend_cleared = true;
			break;
		case KVI_EVENT_SKIPPED:
			break;
		}
	}
	kvx_write_end(idx, l->lid);
	pend_end(scratch, l);
	/* A dump of an engine that has published nothing has no last id:
	 * the next batch is its seq 0. */
	l->mark = (kvs_mark){.has_wm = r->has_last_event_id,
			     .wm = r->last_event_id,
			     .incomplete = l->mark.incomplete};
	dirty(l);
}

#define KVA_HANDOFF_LOCK_RUN 65536 /* entries stored per write lock */

void
kva_handoff(kvx_index *idx, kvl_listener *l, const uint64_t *ext,
	    const uint64_t *seq, const uint8_t *tiers, size_t n,
	    const kvs_mark *mark)
{
	kvx_write_begin(idx, l->lid);
	clear_locked(idx, l);
	kvx_listener_reserve(idx, l->lid, n);
	kvx_write_end(idx, l->lid);
	for (size_t at = 0; at < n; at += KVA_HANDOFF_LOCK_RUN) {
		size_t m = n - at < KVA_HANDOFF_LOCK_RUN ? n - at
							 : KVA_HANDOFF_LOCK_RUN;
		kvx_write_begin(idx, l->lid);
		kvx_store_batch(idx, l->lid, ext + at, seq + at, tiers + at, m);
		kvx_write_end(idx, l->lid);
	}
	for (size_t i = 0; i < n; i++) {
		for (unsigned t = 0; t < KVI_TIER_COUNT; t++) {
			if (tiers[i] & KVX_TIER_BIT(t)) {
				kvo_rec_store(&l->rec, ext[i], seq[i],
					      (uint8_t)t);
			}
		}
	}
	l->c.blocks_stored += n;
	l->mark = *mark;
	dirty(l);
}

void
kva_clear(kvx_index *idx, kva_scratch *scratch, kvl_listener *l)
{
	kvx_write_begin(idx, l->lid);
	clear_locked(idx, l);
	kvx_write_end(idx, l->lid);
	if (scratch->pending != NULL) {
		kvd_drop_listener(scratch->pending, l->lid, KVD_DROP_RESTART);
	}
	l->mark = (kvs_mark){0};
	dirty(l);
}
