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

/* Where an event's blocks go: the listener of its cache group, and how
 * many of the model's blocks one of the group's is. */
typedef struct kva_target {
	uint32_t lid;
	uint32_t group;
	uint32_t ratio;
} kva_target;

/* kva_part_key is the key of model block j (0..ratio-2) of a group block
 * whose hash is ext; its last model block is keyed by ext itself, which
 * is also the hash the next run names as its parent. */
static inline uint64_t
kva_part_key(uint64_t ext, uint32_t j)
{
	return XXH3_64bits_withSeed(&ext, sizeof(ext), (uint64_t)j + 1);
}

void
kva_group_open(kvx_index *idx, kva_scratch *s, kvl_listener *l, uint32_t g)
{
	if (g == 0 || g >= KVX_MAX_GROUPS || s->new_lid == NULL ||
	    kvx_group_lid(idx, l->lid, g) != KVX_NO_LID) {
		return;
	}
	uint32_t sub = s->new_lid(s->lid_arg);
	if (kvx_group_add(idx, l->lid, g, sub) != KVI_OK) {
		return;
	}
	if (g >= l->n_groups) {
		l->n_groups = g + 1;
	}
}

void
kva_group_spec(kvx_index *idx, kvl_listener *l, uint32_t g,
	       const kvx_group_spec *spec)
{
	kvx_group_spec cur;
	if (!kvx_group_spec_get(idx, l->lid, g, &cur) ||
	    (cur.kind == spec->kind && cur.ratio == spec->ratio &&
	     cur.window == spec->window)) {
		return;
	}
	kvx_group_spec_set(idx, l->lid, g, spec);
	kvo_rec_group(&l->rec, (uint8_t)g, (uint8_t)spec->kind, spec->ratio,
		      spec->window);
}

/* kva_group_learn takes what a store says its group is: its kind and
 * window when it names them (else what the group was: vLLM may leave
 * them out), and its block size. A kind this build does not know, and
 * vLLM's "unknown" (a group of mixed specs, which the engine still looks
 * up), are judged as full attention, which never reports a hit the engine
 * would not take. */
static void
kva_group_learn(kvx_index *idx, kvl_listener *l, kva_target t,
		const kvi_event *ev)
{
	kvx_group_spec spec;
	if (!kvx_group_spec_get(idx, l->lid, t.group, &spec)) {
		return;
	}
	spec.ratio = t.ratio;
	if (ev->spec_kind.ptr != NULL) {
		if (!kvx_kind_parse(ev->spec_kind.ptr, ev->spec_kind.len,
				    &spec.kind) ||
		    spec.kind == KVX_KIND_NONE) {
			spec.kind = KVX_KIND_FULL;
			l->c.unknown_kinds++;
		}
		spec.window = ev->window;
	}
	kva_group_spec(idx, l, t.group, &spec);
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

/* put_run stores n blocks of one event into the listener of its cache
 * group t: the index in one overlapped pass, then the log ops. */
static void
put_run(kvx_index *idx, kva_scratch *s, kvl_listener *l, kva_target t,
	const uint64_t *ext, size_t n, kvi_tier tier)
{
	memset(s->tiers, (int)KVX_TIER_BIT(tier), n);
	kvx_store_batch(idx, t.lid, ext, s->seq, s->tiers, n);
	uint8_t op_tier = kvo_tier_group((uint8_t)tier, t.group);
	for (size_t i = 0; i < n; i++) {
		kvo_rec_store(&l->rec, ext[i], s->seq[i], op_tier);
	}
	l->c.blocks_stored += n;
	if (s->pend_on && t.group == 0) {
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
 * the root, or the parent's, which the run's own group may not hold (a
 * sliding window or a Mamba state keeps few blocks) while another group
 * of the listener does: every group hashes the same chain. Returns false
 * for an orphan. */
static bool
chain_start(kvx_index *idx, kvl_listener *l, kva_target t, bool has_parent,
	    uint64_t parent, uint64_t *prev)
{
	if (!has_parent) {
		*prev = KVI_SEQ_ROOT;
		return true;
	}
	if (kvx_lookup(idx, t.lid, parent, prev)) {
		return true;
	}
	for (uint32_t g = 0; g < l->n_groups; g++) {
		uint32_t lid = kvx_group_lid(idx, l->lid, g);
		if (lid != KVX_NO_LID && lid != t.lid &&
		    kvx_lookup(idx, lid, parent, prev)) {
			return true;
		}
	}
	l->c.orphans++;
	l->orphan_streak++;
	return false;
}

static void
drop(kvx_index *idx, kva_scratch *s, kvl_listener *l, kva_target t,
     uint64_t ext, kvi_tier tier)
{
	uint64_t seq;
	if (s->pend_on && t.group == 0 && kvx_lookup(idx, t.lid, ext, &seq)) {
		pend_note(&s->gone, &s->n_gone, &s->cap_gone, &seq, 1);
	}
	if (kvx_remove(idx, t.lid, ext, tier)) {
		kvo_rec_remove(&l->rec, ext,
			       kvo_tier_group((uint8_t)tier, t.group));
		l->c.blocks_removed++;
	} else {
		l->c.unknown_removes++;
	}
	/* a group block of several of the model's: its other keys */
	for (uint32_t j = 0; j + 1 < t.ratio; j++) {
		uint64_t key = kva_part_key(ext, j);
		if (kvx_remove(idx, t.lid, key, tier)) {
			kvo_rec_remove(&l->rec, key,
				       kvo_tier_group((uint8_t)tier, t.group));
		}
	}
}

/* clear_locked empties the listener's entries, every group's: from here
 * on it holds what its engine holds again, so an incomplete mark ends. */
static void
clear_locked(kvx_index *idx, kvl_listener *l)
{
	kvx_clear(idx, l->lid);
	for (uint32_t g = 1; g < l->n_groups; g++) {
		uint32_t lid = kvx_group_lid(idx, l->lid, g);
		if (lid != KVX_NO_LID) {
			kvx_clear(idx, lid);
		}
	}
	kvo_rec_clear(&l->rec);
	l->mark.incomplete = false;
}

/* stored_known adds the event's tier to blocks the listener holds: a
 * store without tokens, as an offload to another tier reports it. */
static void
stored_known(kvx_index *idx, kva_scratch *s, kvl_listener *l, kva_target t,
	     const kvi_event *ev)
{
	scratch_reserve(s, (size_t)ev->n_hashes * t.ratio);
	size_t n = 0;
	for (uint32_t i = 0; i < ev->n_hashes; i++) {
		if (!kvx_lookup(idx, t.lid, ev->hashes[i], &s->seq[n])) {
			l->c.orphans++;
			l->orphan_streak++;
			continue;
		}
		s->ext[n++] = ev->hashes[i];
		for (uint32_t j = 0; j + 1 < t.ratio; j++) {
			uint64_t key = kva_part_key(ev->hashes[i], j);
			if (kvx_lookup(idx, t.lid, key, &s->seq[n])) {
				s->ext[n++] = key;
			}
		}
	}
	if (n < ev->n_hashes) {
		set_error(l, "%s",
			  "BlockStored without tokens of a block the "
			  "listener does not hold");
	}
	put_run(idx, s, l, t, s->ext, n, ev->tier);
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

/* stored_run stores a run whose blocks are the model's, all listed: the
 * common case, hashed as sent. */
static void
stored_run(kvx_index *idx, kva_scratch *s, kvl_listener *l, kva_target t,
	   const kvi_event *ev, uint64_t prev)
{
	scratch_reserve(s, ev->n_hashes);
	kvi_event_local_hashes(ev, s->seq);
	kvi_seq_hashes(prev, s->seq, ev->n_hashes, s->seq);
	put_run(idx, s, l, t, ev->hashes, ev->n_hashes, ev->tier);
}

/* stored_group stores a run of a cache group whose blocks are t.ratio of
 * the model's each, of which only the last m of the nbg its tokens span
 * are listed (vLLM leaves out the blocks a group does not keep: those
 * before a sliding window, those between two Mamba states). Every
 * model block of the span is hashed, so that the chain goes on; the
 * listed ones are stored, each model block of a group block under a key
 * of its own (kva_part_key), the last under the group block's hash. */
static void
stored_group(kvx_index *idx, kva_scratch *s, kvl_listener *l, kva_target t,
	     const kvi_event *ev, uint32_t nbg, uint64_t prev)
{
	uint32_t r = t.ratio, m = ev->n_hashes;
	size_t nbm = (size_t)nbg * r;
	scratch_reserve(s, nbm);
	kvi_event_local_hashes_bs(ev, l->block_size, nbm, s->seq);
	kvi_seq_hashes(prev, s->seq, nbm, s->seq);
	for (uint32_t i = 0; i < m; i++) {
		size_t q = (size_t)(nbg - m + i) * r;
		for (uint32_t j = 0; j < r; j++) {
			size_t o = (size_t)i * r + j;
			s->ext[o] = j + 1 == r ? ev->hashes[i]
					       : kva_part_key(ev->hashes[i], j);
			s->seq[o] = s->seq[q + j];
		}
	}
	put_run(idx, s, l, t, s->ext, (size_t)m * r, ev->tier);
}

static void
malformed_store(kvl_listener *l, const char *why)
{
	l->c.malformed++;
	set_error(l, "%s", why);
}

static void
stored(kvx_index *idx, kva_scratch *s, kvl_listener *l, kva_target t,
       const kvi_event *ev)
{
	if (ev->n_tokens == 0 && ev->n_hashes > 0) {
		stored_known(idx, s, l, t, ev);
		return;
	}
	uint32_t bs = l->block_size;
	/* Only an engine that names groups stores blocks of several of the
	 * model's (a group's own block size) or lists some blocks only. */
	bool grouped = ev->has_group_idx;
	if (ev->block_size != bs &&
	    (!grouped || ev->block_size % bs != 0 || ev->block_size < bs)) {
		note_block_size(l, ev->block_size);
		return;
	}
	t.ratio = ev->block_size / bs;
	uint32_t nbg = ev->n_tokens / ev->block_size;
	if (ev->n_tokens % ev->block_size != 0 || ev->n_hashes > nbg ||
	    (ev->n_hashes < nbg && !grouped)) {
		malformed_store(l, "BlockStored token count is not "
				   "block_hashes x block_size");
		return;
	}
	bool plain = t.ratio == 1 && ev->n_hashes == nbg;
	if (!plain && ev->extra_off != NULL) {
		malformed_store(l, "BlockStored of a cache group with extra "
				   "keys on blocks it does not list: not "
				   "indexed");
		return;
	}
	uint64_t prev;
	if (!chain_start(idx, l, t, ev->has_parent, ev->parent, &prev)) {
		return;
	}
	if (ev->unknown_keys) {
		l->c.unknown_extra_keys++;
	}
	kva_group_learn(idx, l, t, ev);
	if (plain) {
		stored_run(idx, s, l, t, ev, prev);
	} else {
		stored_group(idx, s, l, t, ev, nbg, prev);
	}
}

/* target finds the listener of the event's cache group; false when the
 * group is out of range, or has never stored a block here. */
static bool
target(kvx_index *idx, kvl_listener *l, const kvi_event *ev, kva_target *t)
{
	uint32_t g = 0;
	if (ev->has_group_idx) {
		if (ev->group_idx < 0 || ev->group_idx >= KVX_MAX_GROUPS) {
			char what[32];
			snprintf(what, sizeof(what), "%" PRId64, ev->group_idx);
			set_error(l, "group_idx %s is out of range: skipped",
				  what);
			return false;
		}
		g = (uint32_t)ev->group_idx;
	}
	kvx_group_spec spec;
	if (!kvx_group_spec_get(idx, l->lid, g, &spec)) {
		return false;
	}
	*t = (kva_target){.lid = kvx_group_lid(idx, l->lid, g),
			  .group = g,
			  .ratio = spec.ratio};
	return true;
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
	if (ev->remote) {
		l->c.skipped_events++;
		return;
	}
	kva_target t = {.lid = l->lid, .ratio = 1};
	if (ev->type != KVI_EVENT_CLEARED && !target(idx, l, ev, &t)) {
		if (ev->type == KVI_EVENT_REMOVED) {
			l->c.events++;
			l->c.unknown_removes += ev->n_hashes;
		} else {
			l->c.skipped_events++;
		}
		return;
	}
	l->c.events++;
	switch (ev->type) {
	case KVI_EVENT_STORED:
		stored(idx, s, l, t, ev);
		break;
	case KVI_EVENT_REMOVED:
		for (uint32_t i = 0; i < ev->n_hashes; i++) {
			drop(idx, s, l, t, ev->hashes[i], ev->tier);
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
	for (uint32_t i = 0; i < b.n_events; i++) {
		const kvi_event *ev = &b.events[i];
		if (ev->type == KVI_EVENT_STORED && ev->has_group_idx &&
		    !ev->remote && ev->group_idx > 0 &&
		    ev->group_idx < KVX_MAX_GROUPS) {
			kva_group_open(idx, scratch, l,
				       (uint32_t)ev->group_idx);
		}
	}
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
	kva_target t = {.lid = l->lid, .ratio = 1};
	if (!chain_start(idx, l, t, ev->has_parent, ev->parent_hash, &prev)) {
		return;
	}
	scratch_reserve(s, ev->n_blocks);
	for (uint32_t i = 0; i < ev->n_blocks; i++) {
		prev = kvi_seq_hash(prev, ev->blocks[i].tokens_hash);
		s->ext[i] = ev->blocks[i].block_hash;
		s->seq[i] = prev;
	}
	put_run(idx, s, l, t, s->ext, ev->n_blocks, ev->tier);
}

void
kva_recover(kvx_index *idx, kva_scratch *scratch, kvl_listener *l,
	    const kvr_response *r)
{
	bool dump = r->kind == KVR_KIND_TREE_DUMP;
	uint64_t after = l->mark.wm;
	bool all = dump || !l->mark.has_wm;
	/* /kv_recover names no cache group: its blocks are group 0's */
	const kva_target t0 = {.lid = l->lid, .ratio = 1};
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
				drop(idx, scratch, l, t0, ev->block_hashes[k],
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

/* handoff_run stores n entries of one group of l, read from another
 * shard's snapshot, a bounded run per write lock. */
static void
handoff_run(kvx_index *idx, kvl_listener *l, uint32_t group,
	    const uint64_t *ext, const uint64_t *seq, const uint8_t *tiers,
	    size_t n, uint8_t *masks)
{
	uint32_t lid = kvx_group_lid(idx, l->lid, group);
	if (lid == KVX_NO_LID) {
		return;
	}
	for (size_t i = 0; i < n; i++) {
		masks[i] = tiers[i] & KVX_TIERS_ALL;
	}
	for (size_t at = 0; at < n; at += KVA_HANDOFF_LOCK_RUN) {
		size_t m = n - at < KVA_HANDOFF_LOCK_RUN ? n - at
							 : KVA_HANDOFF_LOCK_RUN;
		kvx_write_begin(idx, l->lid);
		kvx_store_batch(idx, lid, ext + at, seq + at, masks + at, m);
		kvx_write_end(idx, l->lid);
	}
	for (size_t i = 0; i < n; i++) {
		for (unsigned t = 0; t < KVI_TIER_COUNT; t++) {
			if (masks[i] & KVX_TIER_BIT(t)) {
				kvo_rec_store(
				    &l->rec, ext[i], seq[i],
				    kvo_tier_group((uint8_t)t, group));
			}
		}
	}
}

void
kva_handoff(kvx_index *idx, kva_scratch *s, kvl_listener *l,
	    const uint64_t *ext, const uint64_t *seq, const uint8_t *tiers,
	    size_t n, const kvs_mark *mark)
{
	/* the groups first: a group's listener is made outside a write
	 * group, its spec said inside one */
	for (size_t i = 0; i < n; i++) {
		if (tiers[i] >= (1u << KVX_GROUP_SHIFT)) {
			kva_group_open(idx, s, l, tiers[i] >> KVX_GROUP_SHIFT);
		}
	}
	kvx_write_begin(idx, l->lid);
	clear_locked(idx, l);
	kvx_listener_reserve(idx, l->lid, n);
	for (size_t i = 0; i < n; i++) {
		uint32_t group;
		kvx_group_spec spec;
		if (kvx_record_spec(ext[i], seq[i], tiers[i], &group, &spec)) {
			kva_group_spec(idx, l, group, &spec);
		}
	}
	kvx_write_end(idx, l->lid);
	uint8_t *masks = kvi_malloc(n + 1);
	/* a snapshot lists a group's entries together */
	size_t start = 0;
	for (size_t i = 1; i <= n; i++) {
		if (i < n && tiers[i] >> KVX_GROUP_SHIFT ==
				 tiers[start] >> KVX_GROUP_SHIFT) {
			continue;
		}
		handoff_run(idx, l, tiers[start] >> KVX_GROUP_SHIFT,
			    ext + start, seq + start, tiers + start, i - start,
			    masks + start);
		start = i;
	}
	kvi_free(masks);
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
