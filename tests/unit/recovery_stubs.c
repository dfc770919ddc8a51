/*
 * recovery_stubs.c - what test_recovery.c links recovery against: the
 * index (kva_*), the /kv_recover fetcher (kvr_*), the listener's errors
 * and log lines, and the ingest's side of kvq_owner; each records what
 * recovery asked of it in st (recovery_stubs.h). Then the fixture each
 * test starts from, and the events it drives the listener with.
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

/* ---- the fixture --------------------------------------------------- */

int
recovery_setup(void **state)
{
	memset(&st, 0, sizeof(st));
	fx *f = calloc(1, sizeof(*f));
	f->q = calloc(1, sizeof(*f->q));
	f->q->owner = recovery_stubs_owner();
	f->q->cfg.replay_timeout_ms = 2000;
	f->q->cfg.backoff_max_ms = 30000;
	f->q->cfg.orphan_resync = 8;
	f->q->cfg.backlog_max_bytes = 1 << 20;
	f->q->cfg.listener_backlog_max_bytes = 1 << 20;
	f->l.lid = 7;
	f->l.key = "pod-a#0";
	f->l.replay_ep = "tcp://127.0.0.1:5558";
	f->l.recover_ep = "http://127.0.0.1:8100/";
	st.l = &f->l;
	st.timer_ms = -1;
	st.lose_seq = UINT64_MAX;
	*state = f;
	return 0;
}

int
recovery_teardown(void **state)
{
	fx *f = *state;
	kvq_backlog_clear(f->q, &f->l);
	free(f->q);
	free(f);
	return 0;
}

/* send_event gives the recovery an event whose payload is prefix and seq. */
static void
send_event(fx *f, kvq_event_kind kind, uint64_t seq, const char *prefix)
{
	char payload[24];
	int n = snprintf(payload, sizeof(payload), "%s-%llu", prefix,
			 (unsigned long long)seq);
	kvq_recovery_on(f->q, &f->l,
			&(kvq_event){.kind = kind,
				     .seq = seq,
				     .payload = payload,
				     .len = (size_t)n});
}

/* Payloads are the seq's decimal text: the fingerprint of batch s. */
void
ev(fx *f, kvq_event_kind kind, uint64_t seq)
{
	send_event(f, kind, seq, "batch");
}

/* foreign sends a batch of another rank, numbered seq, as live or
 * replayed. */
void
foreign(fx *f, kvq_event_kind kind, uint64_t seq)
{
	send_event(f, kind, seq, "other");
}

void
live(fx *f, uint64_t from, uint64_t to)
{
	for (uint64_t s = from; s <= to; s++) {
		ev(f, KVQ_EV_LIVE, s);
	}
}

void
fetched(fx *f, kvr_kind kind, uint64_t last)
{
	kvr_result *r = calloc(1, sizeof(*r));
	r->token = f->l.recovery.fetch_token;
	st.resp = (kvr_response){.kind = kind, .last_event_id = last};
	kvq_on_fetched(f->q, r);
}

/* A listener in step at watermark wm on a trusted connection. */
void
in_step(fx *f, uint64_t wm)
{
	f->l.recovery.trusted = true;
	f->l.recovery.gap_seq = 0;
	live(f, 0, wm);
	assert_rstate(f, KVL_R_STREAMING);
	assert_int_equal(f->l.mark.wm, wm);
	st.n_applied = 0;
}
