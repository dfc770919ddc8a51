/*
 * ingest_status.c - what the ingest thread says of its listeners: status
 * (state, watermark, counters, a hand-off in progress) and the exact dump
 * of one listener's entries, run on the ingest thread as requests.
 */
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "clock.h"
#include "ingest_int.h"

/* How long after the last batch of another rank on its socket, or the
 * last store of another block size, a listener is reported
 * misconfigured. */
#define KVG_MISCONFIGURED_MS 60000

/* misconfigured_why writes why l is misconfigured into buf and returns
 * it, or NULL when it is not (now, as of now_ms). */
static const char *
misconfigured_why(const kvl_listener *l, int64_t now_ms, char *buf, size_t len)
{
	if (l->foreign_at_ms != 0 &&
	    now_ms - l->foreign_at_ms <= KVG_MISCONFIGURED_MS) {
		snprintf(buf, len,
			 "batches of data_parallel_rank %u arrive on the "
			 "socket of rank %u: the engine publishes several "
			 "ranks on one endpoint",
			 l->foreign_rank, l->dp_rank);
		return buf;
	}
	if (l->foreign_bs_at_ms != 0 &&
	    now_ms - l->foreign_bs_at_ms <= KVG_MISCONFIGURED_MS) {
		snprintf(buf, len,
			 "BlockStored events of block_size %u, the "
			 "registration says %u: its blocks are not indexed",
			 l->foreign_bs, l->block_size);
		return buf;
	}
	return NULL;
}

static Kvindex__Counters *
counters_pb(kvp_arena *a, const kvl_counters *c)
{
	Kvindex__Counters *pb = kvp_arena_alloc(a, sizeof(*pb));
	kvindex__counters__init(pb);
#define KVG_SET(f, help)                                                       \
	pb->has_##f = true;                                                    \
	pb->f = c->f;
	KVL_COUNTERS(KVG_SET)
#undef KVG_SET
	return pb;
}

void
kvg_counters_add(kvl_counters *sum, const kvl_counters *c)
{
	const uint64_t *src = (const uint64_t *)c;
	uint64_t *dst = (uint64_t *)sum;
	for (size_t i = 0; i < sizeof(*c) / sizeof(uint64_t); i++) {
		dst[i] += src[i];
	}
}

/* pending_of says what l's pending entries did, or NULL when it never
 * had any. */
static Kvindex__PendingCounts *
pending_of(kvg_ingest *g, const kvl_listener *l, kvp_arena *a)
{
	kvd_listener_stats ps;
	if (g->cfg.pending == NULL) {
		return NULL;
	}
	kvd_listener_stats_get(g->cfg.pending, l->lid, &ps);
	if (ps.routed == 0) {
		return NULL;
	}
	Kvindex__PendingCounts *pc = kvp_arena_alloc(a, sizeof(*pc));
	kvindex__pending_counts__init(pc);
	pc->has_entries = pc->has_routed = pc->has_added = true;
	pc->has_confirmed = pc->has_expired = pc->has_evicted = true;
	pc->has_dropped = true;
	pc->entries = ps.entries;
	pc->routed = ps.routed;
	pc->added = ps.added;
	pc->confirmed = ps.confirmed;
	pc->expired = ps.expired;
	pc->evicted = ps.evicted;
	pc->dropped = ps.dropped;
	pc->has_prompt_tokens = pc->has_predicted_tokens = true;
	pc->prompt_tokens = ps.prompt_tokens;
	pc->predicted_tokens = ps.predicted_tokens;
	return pc;
}

/* status_of says what a status answer says of l. Whatever it reads of
 * l, status_digest must read too: a poll that holds the digest gets
 * nothing else. */
static Kvindex__ListenerStatus *
status_of(kvg_ingest *g, kvl_listener *l, kvp_arena *a, const char *store_error)
{
	Kvindex__ListenerStatus *st = kvp_arena_alloc(a, sizeof(*st));
	kvindex__listener_status__init(st);
	ProtobufCAllocator alloc;
	kvp_arena_allocator(a, &alloc);
	st->listener = kvindex__listener__unpack(&alloc, l->spec_len, l->spec);
	st->state = (Kvindex__ListenerState)kvq_state_of(l);
	st->has_watermark = l->mark.has_wm;
	st->watermark = l->mark.wm;
	st->blocks = kvx_listener_entries(g->idx, l->lid);
	st->counters = counters_pb(a, &l->c);
	st->has_queued_batches = st->has_queued_bytes = true;
	st->queued_batches = l->backlog_len;
	st->queued_bytes = l->backlog_bytes;
	if (l->last_error[0] != '\0') {
		st->last_error = kvp_arena_strdup(a, l->last_error);
	}
	if (store_error != NULL) {
		/* in memory, served, and no longer following the engine */
		st->state = KVINDEX__LISTENER_STATE__LISTENER_STATE_STALE;
		st->last_error = (char *)store_error;
	}
	st->has_incomplete = l->mark.incomplete;
	st->incomplete = l->mark.incomplete;
	char why[200];
	if (misconfigured_why(l, kvi_now_ms(), why, sizeof(why)) != NULL) {
		st->misconfigured = kvp_arena_strdup(a, why);
	}
	if (l->ho.from != NULL) {
		st->handoff_from = kvp_arena_strdup(a, l->ho.from);
		st->has_handoff_blocks = l->ho.taken; /* absent: taking it */
		st->handoff_blocks = l->ho.blocks;
	}
	st->pending = pending_of(g, l, a);
	return st;
}

/* hash_str adds s, with its end, to the digest st. */
static void
hash_str(XXH3_state_t *st, const char *s)
{
	XXH3_64bits_update(st, s != NULL ? s : "",
			   s != NULL ? strlen(s) + 1 : 0);
}

/* status_digest is a digest of everything status_of reads of
 * every listener, and of store_error: equal digests, equal answers. Keep
 * the two in step. */
static uint64_t
status_digest(kvg_ingest *g, const char *store_error)
{
	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	hash_str(&st, store_error);
	int64_t now = kvi_now_ms();
	for (uint32_t i = 0; i < g->next_lid; i++) {
		const kvl_listener *l = g->lis[i];
		if (l == NULL) {
			continue;
		}
		uint64_t v[] = {l->spec_len,
				(uint64_t)kvq_state_of(l),
				l->mark.has_wm,
				l->mark.wm,
				kvx_listener_entries(g->idx, l->lid),
				l->backlog_len,
				l->backlog_bytes,
				l->ho.from != NULL,
				l->ho.taken,
				l->ho.blocks,
				l->mark.incomplete};
		XXH3_64bits_update(&st, v, sizeof(v));
		XXH3_64bits_update(&st, l->spec, l->spec_len);
		XXH3_64bits_update(&st, &l->c, sizeof(l->c));
		if (g->cfg.pending != NULL) {
			kvd_listener_stats ps;
			kvd_listener_stats_get(g->cfg.pending, l->lid, &ps);
			XXH3_64bits_update(&st, &ps, sizeof(ps));
		}
		hash_str(&st, l->last_error);
		hash_str(&st, l->ho.from);
		char why[200];
		hash_str(&st, misconfigured_why(l, now, why, sizeof(why)));
	}
	return XXH3_64bits_digest(&st);
}

kvi_err
kvg_do_status(kvg_ingest *g, kvg_cmd *c)
{
	Kvindex__StatusResponse *out = c->status;
	kvp_arena *a = c->arena;
	size_t n = 0;
	for (uint32_t i = 0; i < g->next_lid; i++) {
		n += g->lis[i] != NULL;
	}
	out->listeners =
	    kvp_arena_calloc(a, n ? n : 1, sizeof(*out->listeners));
	kvl_counters totals = {0};
	char why[300];
	const char *store_error = NULL;
	if (kvg_ingest_store_failing(g, why, sizeof(why))) {
		size_t len = strlen(why) + 64;
		char *e = kvp_arena_alloc(a, len);
		snprintf(e, len, "the store cannot commit: %s", why);
		store_error = out->store_error = e;
	}
	/* every listener, as the caller has them already: none is sent */
	bool unchanged = false;
	if (c->key == NULL) {
		out->has_digest = out->has_unchanged = true;
		out->digest = status_digest(g, store_error);
		out->unchanged = c->has_since && c->since == out->digest;
		unchanged = out->unchanged;
	}
	for (uint32_t i = 0; i < g->next_lid; i++) {
		kvl_listener *l = g->lis[i];
		if (l == NULL) {
			continue;
		}
		kvg_counters_add(&totals, &l->c);
		if (unchanged) {
			continue;
		}
		if (c->key == NULL || strcmp(c->key, l->key) == 0) {
			out->listeners[out->n_listeners++] =
			    status_of(g, l, a, store_error);
		}
	}
	if (c->key != NULL && out->n_listeners == 0) {
		snprintf(c->err, c->errlen, "listener %s is not owned here",
			 c->key);
		return KVI_ENOENT;
	}
	kvx_stats xs;
	kvx_index_stats(g->idx, &xs);
	kvs_store_stats ss = kvg_metrics_store(g);
	out->shard_id = kvp_arena_strdup(a, g->cfg.shard_id);
	out->entries = xs.entries;
	out->store_bytes = ss.file_bytes;
	out->totals = counters_pb(a, &totals);
	return KVI_OK;
}

typedef struct kvg_dump_fill {
	Kvindex__DumpResponse *out;
	Kvindex__DumpEntry *entries;
} kvg_dump_fill;

static void
dump_entry(void *arg, uint64_t ext, uint64_t seq, uint8_t tiers)
{
	kvg_dump_fill *f = arg;
	Kvindex__DumpEntry *e = &f->entries[f->out->n_entries];
	kvindex__dump_entry__init(e);
	e->ext_hash = ext;
	e->seq_hash = seq;
	e->tiers = tiers;
	f->out->entries[f->out->n_entries++] = e;
}

kvi_err
kvg_do_dump(kvg_ingest *g, kvg_cmd *c)
{
	kvl_listener *l = kvg_listener_find(g, c->key);
	if (l == NULL) {
		snprintf(c->err, c->errlen, "listener %s is not owned here",
			 c->key);
		return KVI_ENOENT;
	}
	size_t n = kvx_listener_entries(g->idx, l->lid);
	kvg_dump_fill f = {
	    .out = c->dump,
	    .entries = kvp_arena_alloc(
		c->arena, (n ? n : 1) * sizeof(Kvindex__DumpEntry)),
	};
	c->dump->entries =
	    kvp_arena_alloc(c->arena, (n ? n : 1) * sizeof(*c->dump->entries));
	c->dump->n_entries = 0;
	kvx_listener_foreach(g->idx, l->lid, dump_entry, &f);
	c->dump->has_watermark = l->mark.has_wm;
	c->dump->watermark = l->mark.wm;
	return KVI_OK;
}
