/*
 * test_shard_pending.c - pending entries in the shard: a routed request
 * through the shard's request handler, queries with and without them,
 * and engine batches (applied as the ingest thread applies them) that
 * confirm or drop them.
 *
 * Three listeners of model "m" (block size 4): instance 100 ranks 0 and 1,
 * instance 200 rank 0. Listener 0 holds the prompt's first three blocks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "apply.h"
#include "arena.h"
#include "handler.h"
#include "hash.h"
#include "index.h"
#include "pending.h"
#include "rpc.h"
#include "wire.h"
#include "wire_encode.h"

enum { BS = 4, NB = 8 };

typedef struct fixture {
	kvx_index *idx;
	kvd_pending *pd;
	kvh_shard *h;
	kvi_decoder *dec;
	kva_scratch scratch;
	kvl_listener lis[3];
	uint64_t next_seq[3];
	uint32_t tokens[NB * BS];
	uint64_t ext[NB];
	uint64_t seq[NB];
} fixture;

static int
setup(void **state)
{
	fixture *f = test_calloc(1, sizeof(*f));
	f->idx = kvx_index_alloc();
	f->pd = kvd_pending_alloc(NULL);
	f->h = kvh_shard_alloc(f->idx, NULL, f->pd, 10000, NULL);
	f->dec = kvi_decoder_alloc();
	f->scratch.pending = f->pd;
	const struct {
		uint64_t instance;
		uint16_t rank;
	} who[3] = {{100, 0}, {100, 1}, {200, 0}};
	for (uint32_t i = 0; i < 3; i++) {
		char key[16];
		snprintf(key, sizeof(key), "l%u", i);
		assert_int_equal(kvx_listener_add(f->idx, i, key, "pod",
						  who[i].instance, who[i].rank,
						  "m", BS),
				 KVI_OK);
		kvl_listener *l = &f->lis[i];
		l->lid = i;
		l->instance_id = who[i].instance;
		l->dp_rank = who[i].rank;
		l->block_size = BS;
		kvo_rec_init(&l->rec);
	}
	uint64_t local[NB];
	for (size_t i = 0; i < NB * BS; i++) {
		f->tokens[i] = (uint32_t)(7 * i + 3);
	}
	for (size_t b = 0; b < NB; b++) {
		local[b] = kvi_local_hash(f->tokens + b * BS, BS, 1337);
		f->ext[b] = 5000 + b;
	}
	kvi_seq_hashes(KVI_SEQ_ROOT, local, NB, f->seq);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;
	for (int i = 0; i < 3; i++) {
		kvo_rec_fini(&f->lis[i].rec);
	}
	kva_scratch_fini(&f->scratch);
	kvi_decoder_free(f->dec);
	kvh_shard_free(f->h);
	kvd_pending_free(f->pd);
	kvx_index_free(f->idx);
	test_free(f);
	return 0;
}

/* ---- engine batches -------------------------------------------------------
 */

typedef enum { EV_STORE, EV_REMOVE, EV_CLEAR } ev_kind;

/* batch applies one event to listener lid: blocks [from, to) stored
 * (chained on block from - 1) or removed, or everything cleared. */
static void
batch(fixture *f, uint32_t lid, ev_kind kind, size_t from, size_t to)
{
	kvi_encoder enc;
	kvi_encoder_init(&enc, KVI_FORM_MAP, KVI_HASH_UINT);
	kvi_encoder_begin(&enc, 1.0, 1, true, f->lis[lid].dp_rank);
	if (kind == EV_STORE) {
		kvi_encoder_stored(&enc, f->ext + from, to - from,
				   from > 0 ? &f->ext[from - 1] : NULL,
				   f->tokens + from * BS, (to - from) * BS, BS,
				   NULL, NULL);
	} else if (kind == EV_REMOVE) {
		kvi_encoder_removed(&enc, f->ext + from, to - from, NULL);
	} else {
		kvi_encoder_cleared(&enc);
	}
	size_t len;
	const void *data = kvi_encoder_data(&enc, &len);
	assert_int_equal(kva_batch(f->idx, f->dec, &f->scratch, &f->lis[lid],
				   f->next_seq[lid]++, data, len),
			 KVA_APPLIED);
	kvi_encoder_fini(&enc);
}

/* ---- requests --------------------------------------------------------------
 */

static Kvindex__Response *
call(fixture *f, Kvindex__Request *req, kvp_arena *a)
{
	Kvindex__Response *resp = kvp_arena_alloc(a, sizeof(*resp));
	kvindex__response__init(resp);
	req->version = KVP_VERSION;
	kvh_shard_handler()(f->h, req, resp, a);
	return resp;
}

/* routed says that a request for the first n blocks went to (instance,
 * rank); returns the answer's code and its counts. */
static uint32_t
routed_len(fixture *f, uint64_t instance, uint32_t rank, size_t n,
	   uint32_t tokens, uint32_t *matched, uint32_t *pending,
	   uint32_t *predicted)
{
	kvp_arena a;
	kvp_arena_init(&a);
	Kvindex__RoutedRequest r = KVINDEX__ROUTED_REQUEST__INIT;
	r.model = "m";
	r.seq_hashes = f->seq;
	r.n_seq_hashes = n;
	r.instance_id = instance;
	r.dp_rank = rank;
	r.has_prompt_tokens = tokens > 0;
	r.prompt_tokens = tokens;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_ROUTED;
	req.routed = &r;
	Kvindex__Response *resp = call(f, &req, &a);
	uint32_t code = resp->code;
	if (code == 0) {
		assert_int_equal(resp->body_case,
				 KVINDEX__RESPONSE__BODY_ROUTED);
		*matched = resp->routed->matched_blocks;
		*pending = resp->routed->pending_blocks;
		*predicted = resp->routed->predicted_blocks;
	}
	kvp_arena_fini(&a);
	return code;
}

static uint32_t
routed(fixture *f, uint64_t instance, uint32_t rank, size_t n,
       uint32_t *matched, uint32_t *pending)
{
	uint32_t predicted;
	return routed_len(f, instance, rank, n, 0, matched, pending,
			  &predicted);
}

/* One listener's line of a query answer. */
typedef struct line {
	uint64_t instance;
	uint32_t rank, longest, pending;
} line;

/* query asks for the whole prompt; returns how many lines, in out. */
static size_t
query(fixture *f, bool pending, uint32_t top_k, const uint64_t *instance,
      line *out, size_t max)
{
	kvp_arena a;
	kvp_arena_init(&a);
	Kvindex__QueryRequest q = KVINDEX__QUERY_REQUEST__INIT;
	q.model = "m";
	q.seq_hashes = f->seq;
	q.n_seq_hashes = NB;
	q.has_pending = true;
	q.pending = pending;
	q.has_top_k = top_k > 0;
	q.top_k = top_k;
	if (instance != NULL) {
		q.instances = (uint64_t *)instance;
		q.n_instances = 1;
	}
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_QUERY;
	req.query = &q;
	Kvindex__Response *resp = call(f, &req, &a);
	assert_int_equal(resp->code, 0);
	const Kvindex__QueryResponse *r = resp->query;
	size_t n = r->n_m_instance;
	assert_true(n <= max);
	assert_true(r->n_m_pending == 0 || r->n_m_pending == n);
	if (!pending) {
		assert_int_equal(r->n_m_pending, 0);
	}
	for (size_t i = 0; i < n; i++) {
		out[i] = (line){
		    .instance = r->m_instance[i],
		    .rank = r->m_rank[i],
		    .longest = r->m_gpu[i] + r->m_cpu[i] + r->m_disk[i],
		    .pending = r->n_m_pending ? r->m_pending[i] : 0,
		};
	}
	kvp_arena_fini(&a);
	return n;
}

static const line *
find(const line *ls, size_t n, uint64_t instance, uint32_t rank)
{
	for (size_t i = 0; i < n; i++) {
		if (ls[i].instance == instance && ls[i].rank == rank) {
			return &ls[i];
		}
	}
	return NULL;
}

/* ---- tests ----------------------------------------------------------------
 */

static void
test_routed_then_query(void **state)
{
	fixture *f = *state;
	batch(f, 0, EV_STORE, 0, 3);
	uint32_t m = 99, p = 99;
	assert_int_equal(routed(f, 100, 0, NB, &m, &p), 0);
	assert_int_equal(m, 3);
	assert_int_equal(p, NB - 3);

	line ls[4];
	/* exact only: today's answer */
	size_t n = query(f, false, 0, NULL, ls, 4);
	assert_int_equal(n, 1);
	assert_int_equal(ls[0].longest, 3);
	assert_int_equal(ls[0].pending, 0);
	/* with pending entries: 5 more blocks expected there */
	n = query(f, true, 0, NULL, ls, 4);
	assert_int_equal(n, 1);
	assert_int_equal(ls[0].longest, 3);
	assert_int_equal(ls[0].pending, 5);

	/* a listener that holds nothing is listed with its pending blocks */
	assert_int_equal(routed(f, 200, 0, 6, &m, &p), 0);
	assert_int_equal(m, 0);
	assert_int_equal(p, 6);
	n = query(f, true, 0, NULL, ls, 4);
	assert_int_equal(n, 2);
	const line *l200 = find(ls, n, 200, 0);
	assert_non_null(l200);
	assert_int_equal(l200->longest, 0);
	assert_int_equal(l200->pending, 6);
	assert_int_equal(query(f, false, 0, NULL, ls, 4), 1);
	/* the query's restriction holds for them too */
	const uint64_t only100 = 100, only200 = 200;
	n = query(f, true, 0, &only100, ls, 4);
	assert_int_equal(n, 1);
	assert_int_equal(ls[0].instance, 100);
	n = query(f, true, 0, &only200, ls, 4);
	assert_int_equal(n, 1);
	assert_int_equal(ls[0].instance, 200);
	/* top_k ranks by what is held and pending: 3 + 5 over 0 + 6 */
	n = query(f, true, 1, NULL, ls, 4);
	assert_int_equal(n, 1);
	assert_int_equal(ls[0].instance, 100);
	assert_int_equal(routed(f, 200, 0, NB, &m, &p), 0);
	assert_int_equal(routed(f, 100, 1, NB, &m, &p), 0);
	/* 8 blocks predicted on all three; the tie goes to the most on the
	 * GPU: top_k 1 keeps the one that holds 3 */
	n = query(f, true, 3, NULL, ls, 4);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(ls[i].longest + ls[i].pending, NB);
	}
	n = query(f, true, 1, NULL, ls, 4);
	assert_int_equal(n, 1);
	assert_int_equal(ls[0].instance, 100);
	assert_int_equal(ls[0].rank, 0);
	assert_int_equal(ls[0].longest, 3);
}

static void
test_engine_confirms_and_drops(void **state)
{
	fixture *f = *state;
	batch(f, 0, EV_STORE, 0, 3);
	uint32_t m, p;
	assert_int_equal(routed(f, 100, 0, NB, &m, &p), 0);
	assert_int_equal(routed(f, 200, 0, NB, &m, &p), 0);
	assert_int_equal(routed(f, 100, 1, 4, &m, &p), 0);

	/* the engine's stores of blocks 3-4: exact now, no longer pending */
	batch(f, 0, EV_STORE, 3, 5);
	line ls[4];
	const uint64_t only100 = 100;
	size_t n = query(f, true, 0, &only100, ls, 4);
	const line *l0 = find(ls, n, 100, 0);
	assert_non_null(l0);
	assert_int_equal(l0->longest, 5);
	assert_int_equal(l0->pending, 3);
	kvd_stats st;
	kvd_stats_get(f->pd, &st);
	assert_int_equal(st.confirmed, 2);
	assert_int_equal(st.entries, 3 + NB + 4);

	/* AllBlocksCleared on listener 0 drops its pending entries */
	batch(f, 0, EV_CLEAR, 0, 0);
	n = query(f, true, 0, &only100, ls, 4);
	assert_null(find(ls, n, 100, 0));
	kvd_stats_get(f->pd, &st);
	assert_int_equal(st.dropped[KVD_DROP_CLEARED], 3);

	/* an engine restart of listener 2 drops its own, not rank 1's */
	kva_clear(f->idx, &f->scratch, &f->lis[2]);
	kvd_stats_get(f->pd, &st);
	assert_int_equal(st.dropped[KVD_DROP_RESTART], NB);
	n = query(f, true, 0, NULL, ls, 4);
	assert_int_equal(n, 1);
	assert_int_equal(ls[0].instance, 100);
	assert_int_equal(ls[0].rank, 1);
	assert_int_equal(ls[0].pending, 4);

	/* a removal of a block both held and pending drops the entry: rank
	 * 1 stores blocks 0-3 (confirming its four), loses block 1, and is
	 * routed the prompt again: 1-3 pending, 2 and 3 held too */
	batch(f, 1, EV_STORE, 0, 4);
	kvd_stats_get(f->pd, &st);
	assert_int_equal(st.confirmed, 2 + 4);
	batch(f, 1, EV_REMOVE, 1, 2);
	assert_int_equal(routed(f, 100, 1, 4, &m, &p), 0);
	assert_int_equal(m, 1);
	assert_int_equal(p, 3);
	batch(f, 1, EV_REMOVE, 2, 3);
	kvd_stats_get(f->pd, &st);
	assert_int_equal(st.dropped[KVD_DROP_REMOVED], 1);
	n = query(f, true, 0, NULL, ls, 4);
	const line *l1 = find(ls, n, 100, 1);
	assert_non_null(l1);
	assert_int_equal(l1->longest, 1);
	assert_int_equal(l1->pending, 1); /* block 1; block 2 is gone */
}

/* The hit predicted for a routed request: what the listener holds and
 * what earlier routed requests compute there, at most the prompt less one
 * token, as the engine takes it. */
static void
test_predicted(void **state)
{
	fixture *f = *state;
	batch(f, 0, EV_STORE, 0, 3);
	uint32_t m, p, pr;
	assert_int_equal(routed_len(f, 100, 0, NB, NB * BS, &m, &p, &pr), 0);
	assert_int_equal(pr, 3);
	/* the same prompt again: all 8 blocks expected, the engine takes 7 */
	assert_int_equal(routed_len(f, 100, 0, NB, NB * BS, &m, &p, &pr), 0);
	assert_int_equal(pr, NB - 1);
	/* with two more tokens (a partial block) it takes all 8 */
	assert_int_equal(routed_len(f, 100, 0, NB, NB * BS + 2, &m, &p, &pr),
			 0);
	assert_int_equal(pr, NB);
	kvd_listener_stats ls;
	kvd_listener_stats_get(f->pd, 0, &ls);
	assert_int_equal(ls.routed, 3);
	assert_int_equal(ls.prompt_tokens, 3 * NB * BS + 2);
	assert_int_equal(ls.predicted_tokens, (3 + NB - 1 + NB) * BS);
}

static void
test_bad_routed(void **state)
{
	fixture *f = *state;
	uint32_t m, p;
	assert_int_equal(routed(f, 300, 0, NB, &m, &p), KVI_ENOENT);
	assert_int_equal(routed(f, 100, 2, NB, &m, &p), KVI_ENOENT);
	assert_int_equal(routed(f, 100, 70000, NB, &m, &p), KVI_ERANGE);
	kvd_stats st;
	kvd_stats_get(f->pd, &st);
	assert_int_equal(st.routed, 0);
	assert_true(kvd_empty(f->pd));
	/* a prompt the listener holds whole leaves nothing pending */
	batch(f, 0, EV_STORE, 0, NB);
	assert_int_equal(routed(f, 100, 0, NB, &m, &p), 0);
	assert_int_equal(m, NB);
	assert_int_equal(p, 0);
	assert_true(kvd_empty(f->pd));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_routed_then_query, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_engine_confirms_and_drops,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_predicted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_routed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
