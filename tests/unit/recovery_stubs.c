/*
 * recovery_stubs.c - what test_recovery.c links recovery against: the
 * index (kva_*), the /kv_recover fetcher (kvr_*), the listener's errors
 * and log lines, and the ingest's side of kvq_owner; each records what
 * recovery asked of it in st (recovery_stubs.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "recovery_stubs.h"

recovery_stubs st;

/* Payloads of another rank's batches start with "other-" (foreign()). */
static bool
other_rank(const void *payload, size_t len)
{
	return len >= 6 && memcmp(payload, "other-", 6) == 0;
}

kva_result
kva_batch(kvx_index *idx, kvi_decoder *dec, kva_scratch *scratch,
	  kvl_listener *l, uint64_t seq, const void *payload, size_t len)
{
	(void)idx, (void)dec, (void)scratch;
	if (other_rank(payload, len)) {
		l->c.rank_mismatches++;
		return KVA_FOREIGN;
	}
	if (st.n_applied < 64) {
		st.applied[st.n_applied++] = seq;
	}
	l->mark = (kvs_mark){.has_wm = true,
			     .wm = seq,
			     .has_fp = true,
			     .fp = XXH3_64bits(payload, len),
			     .incomplete = l->mark.incomplete};
	return seq != st.lose_seq ? KVA_APPLIED : KVA_LOST;
}

bool
kva_foreign(kvl_listener *l, const void *payload, size_t len)
{
	if (!other_rank(payload, len)) {
		return false;
	}
	l->c.rank_mismatches++;
	return true;
}

size_t
kvx_listener_entries(const kvx_index *idx, uint32_t lid)
{
	(void)idx, (void)lid;
	return st.entries;
}

void
kva_clear(kvx_index *idx, kva_scratch *scratch, kvl_listener *l)
{
	(void)idx, (void)scratch;
	st.clears++;
	st.entries = 0;
	l->mark = (kvs_mark){0};
}

void
kva_recover(kvx_index *idx, kva_scratch *scratch, kvl_listener *l,
	    const kvr_response *r)
{
	(void)idx, (void)scratch;
	l->mark = (kvs_mark){.has_wm = true, .wm = r->last_event_id};
}

void
kva_scratch_fini(kva_scratch *s)
{
	(void)s;
}

static void
io_timer(void *arg, kvl_listener *l, int ms)
{
	(void)arg, (void)l;
	st.timer_ms = ms;
}

static kvi_err
io_replay_start(void *arg, kvl_listener *l, uint64_t seq)
{
	(void)arg, (void)l;
	st.replays++;
	st.replay_from = seq;
	st.replay_open = st.replay_rv == KVI_OK;
	return st.replay_rv;
}

static void
io_replay_stop(void *arg, kvl_listener *l)
{
	(void)arg, (void)l;
	st.replay_open = false;
}

kvi_err
kvr_fetcher_submit(kvr_fetcher *f, uint64_t token, const char *url,
		   uint64_t max_blocks)
{
	(void)f, (void)token;
	st.fetches++;
	st.max_blocks = max_blocks;
	snprintf(st.url, sizeof(st.url), "%s", url);
	return KVI_OK;
}

void
kvr_fetcher_cancel(kvr_fetcher *f, uint64_t token)
{
	(void)f, (void)token;
	st.cancels++;
}

const kvr_response *
kvr_parser_result(const kvr_parser *p)
{
	(void)p;
	return &st.resp;
}

void
kvr_result_free(kvr_result *r)
{
	free(r);
}

static kvl_listener *
listener_of(void *arg, uint32_t lid)
{
	(void)arg;
	return st.l != NULL && st.l->lid == lid ? st.l : NULL;
}

void
kvl_error(kvl_listener *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->last_error, sizeof(l->last_error), fmt, ap);
	va_end(ap);
}

void
kvl_log(kvl_listener *l, const char *event, const char *fmt, ...)
{
	(void)l, (void)event, (void)fmt;
}

void
kvl_warn(kvl_listener *l, const char *event, const char *fmt, ...)
{
	(void)l, (void)event, (void)fmt;
	st.warnings++;
}

static void
handoff_ask(void *arg, kvl_listener *l)
{
	(void)arg;
	st.asks++;
	l->ho.tries++;
}

kvq_owner
recovery_stubs_owner(void)
{
	return (kvq_owner){.timer = io_timer,
			   .replay_start = io_replay_start,
			   .replay_stop = io_replay_stop,
			   .handoff_ask = handoff_ask,
			   .listener = listener_of};
}
