/*
 * test_sim_groups_live.c - the simulator's hybrid models (--kv-groups), driven
 * as a real process.
 *
 * One kvindex-sim, three pods of one rank, each a hybrid model:
 *   pod 0: full attention (64 blocks) + sliding window of 64 tokens (8);
 *   pod 1: full attention + Mamba in "align" mode;
 *   pod 2: full attention at block 16 (64 blocks) + at block 32 (4).
 * A SUB on every rank reads the batches, which the indexer's decoder
 * (common/wire.h) decodes; the fields it keeps no copy of
 * (kv_cache_spec_kind, kv_cache_spec_sliding_window) are read as raw
 * msgpack. Each pod evicts in one group only, and POST /hit must then say
 * exactly the hit the next /prefill of the same prompt takes. Replay,
 * /kv_recover (group 0 alone), /truth's groups, /clear and bad requests
 * and flags are checked too. The tests run in order on one simulator.
 */
#include <msgpack.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <zmq.h>

#include "alloc.h"
#include "frame.h"
#include "sim_check.h"

#define BS   SIMC_BS
#define NA   (6 * BS + 1) /* prompt A: 6 blocks and a token */
#define NB   (4 * BS + 1) /* prompt B: 4 blocks and a token */
#define WAIT 5000

static simproc A;
static uint32_t tok_a[NA], tok_b[NB];

/* One live batch: frames, decoded events, raw msgpack. */
typedef struct live {
	kvt_frames f;
	kvi_batch b;
	msgpack_unpacked raw;
	uint64_t seq;
} live;

static int
group_setup(void **state)
{
	(void)state;
	simc_setup();
	simc_tokens(tok_a, NA, 1);
	simc_tokens(tok_b, NB, 2);
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	assert_int_equal(simc_stop(&A), 0);
	simc_teardown();
	return 0;
}

/* recv_live receives rank idx's next batch of n events. */
static void
recv_live(int idx, uint32_t n, live *l)
{
	l->seq = simc_recv_live(&A, idx, "", &l->f);
	kvi_err rv = kvi_decoder_decode(simc_decoder(), l->f.data[2],
					l->f.len[2], &l->b);
	if (rv != KVI_OK) {
		fail_msg("decode: %s", kvi_decoder_error(simc_decoder()));
	}
	assert_int_equal(l->b.n_skipped, 0);
	assert_int_equal(l->b.n_events, n);
	msgpack_unpacked_init(&l->raw);
	assert_int_equal(
	    msgpack_unpack_next(&l->raw, l->f.data[2], l->f.len[2], NULL),
	    MSGPACK_UNPACK_SUCCESS);
}

static void
live_fini(live *l)
{
	msgpack_unpacked_destroy(&l->raw);
	kvt_frames_fini(&l->f);
}

/* raw_field returns the value of key in event k (a map), NULL if absent. */
static const msgpack_object *
raw_field(const live *l, uint32_t k, const char *key)
{
	const msgpack_object *root = &l->raw.data;
	assert_int_equal(root->type, MSGPACK_OBJECT_ARRAY);
	const msgpack_object *ev = &root->via.array.ptr[1].via.array.ptr[k];
	assert_int_equal(ev->type, MSGPACK_OBJECT_MAP);
	for (uint32_t i = 0; i < ev->via.map.size; i++) {
		const msgpack_object_kv *kv = &ev->via.map.ptr[i];
		if (kv->key.via.str.size == strlen(key) &&
		    memcmp(kv->key.via.str.ptr, key, strlen(key)) == 0) {
			return &kv->val;
		}
	}
	return NULL;
}

/* check_spec checks event k's kind and window (0: no window field). */
static void
check_spec(const live *l, uint32_t k, const char *kind, uint64_t window)
{
	const msgpack_object *v = raw_field(l, k, "kv_cache_spec_kind");
	assert_non_null(v);
	assert_int_equal(v->type, MSGPACK_OBJECT_STR);
	assert_int_equal(v->via.str.size, strlen(kind));
	assert_memory_equal(v->via.str.ptr, kind, strlen(kind));
	v = raw_field(l, k, "kv_cache_spec_sliding_window");
	if (window == 0) {
		assert_null(v);
	} else {
		assert_non_null(v);
		assert_int_equal(v->via.u64, window);
	}
}

/* event checks event k's type, group and size, and returns it. */
static const kvi_event *
event(const live *l, uint32_t k, kvi_event_type type, int group, uint32_t n)
{
	const kvi_event *ev = &l->b.events[k];
	assert_int_equal(ev->type, type);
	assert_true(ev->has_group_idx);
	assert_int_equal(ev->group_idx, group);
	assert_int_equal(ev->n_hashes, n);
	return ev;
}

/* hit asks POST /hit of pod for the first n tokens of tok and checks the
 * answer: the engine's hit and each group's (kinds and block sizes). */
static void
check_hit(int pod, const uint32_t *tok, size_t n, uint64_t want,
	  const char *const *kinds, const int *bs, const uint64_t *groups)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_integer(tok[i]));
	}
	json_t *v = simc_http(
	    &A, "POST", "/hit",
	    json_pack("{s:i,s:i,s:o}", "pod", pod, "rank", 0, "token_ids", arr),
	    200);
	assert_int_equal(simc_int(v, "hit_tokens"), (int)want);
	assert_int_equal(simc_int(v, "hit_blocks"), (int)(want / BS));
	json_t *g = json_object_get(v, "groups");
	assert_int_equal(json_array_size(g), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *e = json_array_get(g, i);
		assert_string_equal(
		    json_string_value(json_object_get(e, "kind")), kinds[i]);
		assert_int_equal(simc_int(e, "block_size"), bs[i]);
		assert_int_equal(simc_int(e, "hit_tokens"), (int)groups[i]);
	}
	json_decref(v);
}

/* prefill runs the first n tokens of tok on pod and checks the hit the
 * engine took; returns the reply. */
static json_t *
prefill(int pod, const uint32_t *tok, size_t n, uint64_t hit)
{
	json_t *rep = simc_prefill(&A, pod, 0, tok, n);
	assert_int_equal(simc_int(rep, "hit_tokens"), (int)hit);
	assert_int_equal(simc_int(rep, "hit_blocks"), (int)(hit / BS));
	return rep;
}

/* truth_groups returns the groups holding hash on pod, as a bit set (0:
 * not listed), and checks tiers: gpu exactly when group 0 holds it. */
static unsigned
truth_groups(int pod, uint64_t hash)
{
	char path[64];
	snprintf(path, sizeof(path), "/truth?pod=%d&rank=0", pod);
	json_t *t = simc_http(&A, "GET", path, NULL, 200);
	json_t *blocks = json_object_get(t, "blocks");
	unsigned bits = 0;
	for (size_t i = 0; i < json_array_size(blocks); i++) {
		json_t *b = json_array_get(blocks, i);
		if (simc_u64(json_object_get(b, "hash")) != hash) {
			continue;
		}
		json_t *g = json_object_get(b, "groups");
		for (size_t k = 0; k < json_array_size(g); k++) {
			bits |= 1u << json_integer_value(json_array_get(g, k));
		}
		assert_int_equal(json_array_size(json_object_get(b, "tiers")),
				 (bits & 1u) ? 1 : 0);
	}
	json_decref(t);
	return bits;
}

/* recover_counts counts the stored blocks and removed events of pod's
 * /kv_recover answer to query, of kind (Events or TreeDump). */
static void
recover_counts(int pod, const char *query, const char *kind, size_t *stored,
	       size_t *removed)
{
	json_t *v = simc_recover(&A, pod, query, 200);
	json_t *evs = json_object_get(json_object_get(v, kind), "events");
	assert_non_null(evs);
	*stored = *removed = 0;
	for (size_t i = 0; i < json_array_size(evs); i++) {
		json_t *data = json_object_get(
		    json_object_get(json_array_get(evs, i), "event"), "data");
		json_t *st = json_object_get(data, "stored");
		*stored += json_array_size(json_object_get(st, "blocks"));
		*removed += json_object_get(data, "removed") != NULL;
	}
	json_decref(v);
}

static void
test_start(void **state)
{
	(void)state;
	const char *extra[] = {"--paused", "--kv-groups",
			       "full:16:64,swa=64:16:8/"
			       "full:16:64,mamba=align:16:64/"
			       "full:16:64,full:32:4",
			       NULL};
	simc_start(&A, 3, 1, extra);
	simc_connect(&A);
	json_t *st = simc_http(&A, "GET", "/status", NULL, 200);
	json_t *ranks = json_object_get(st, "ranks");
	for (size_t i = 0; i < 3; i++) {
		json_t *g =
		    json_object_get(json_array_get(ranks, i), "group_blocks");
		assert_int_equal(json_array_size(g), 2);
	}
	json_decref(st);
}

static const char *const swa_kinds[] = {"full_attention", "sliding_window"};
static const char *const mamba_kinds[] = {"full_attention", "mamba"};
static const char *const full_kinds[] = {"full_attention", "full_attention"};
static const int bs16[] = {BS, BS};
static const int bs16_32[] = {BS, 2 * BS};

/* Pod 0: B evicts A's tail from the sliding window group only; the
 * window before 96 is gone, the one before 64 is not. */
static void
test_sliding_window(void **state)
{
	(void)state;
	uint64_t ha[6], hb[4];
	live l;
	json_decref(prefill(0, tok_a, NA, 0));
	recv_live(0, 2, &l);
	assert_true(l.seq == 0);
	const kvi_event *e0 = event(&l, 0, KVI_EVENT_STORED, 0, 6);
	const kvi_event *e1 = event(&l, 1, KVI_EVENT_STORED, 1, 6);
	assert_int_equal(e0->block_size, BS);
	assert_int_equal(e1->block_size, BS);
	assert_memory_equal(e0->hashes, e1->hashes, sizeof(ha));
	assert_memory_equal(e1->tokens, tok_a, 6 * BS * sizeof(uint32_t));
	memcpy(ha, e0->hashes, sizeof(ha));
	check_spec(&l, 0, "full_attention", 0);
	check_spec(&l, 1, "sliding_window", 64);
	void *first = kvi_malloc(l.f.len[2]);
	size_t first_len = l.f.len[2];
	memcpy(first, l.f.data[2], first_len);
	live_fini(&l);

	json_decref(prefill(0, tok_b, NB, 0));
	recv_live(0, 3, &l);
	const kvi_event *rm = event(&l, 0, KVI_EVENT_REMOVED, 1, 2);
	assert_true(rm->hashes[0] == ha[5] && rm->hashes[1] == ha[4]);
	memcpy(hb, event(&l, 1, KVI_EVENT_STORED, 0, 4)->hashes, sizeof(hb));
	event(&l, 2, KVI_EVENT_STORED, 1, 4);
	live_fini(&l);
	assert_int_equal(truth_groups(0, ha[5]), 1);
	assert_int_equal(truth_groups(0, ha[3]), 3);
	assert_int_equal(truth_groups(0, hb[3]), 3);

	const uint64_t before[] = {96, 64};
	check_hit(0, tok_a, NA, 64, swa_kinds, bs16, before);
	json_decref(prefill(0, tok_a, NA, 64));
	/* the window at 64 pins A0..A3: B's tail makes room */
	recv_live(0, 3, &l);
	rm = event(&l, 0, KVI_EVENT_REMOVED, 1, 2);
	assert_true(rm->hashes[0] == hb[3] && rm->hashes[1] == hb[2]);
	e0 = event(&l, 1, KVI_EVENT_STORED, 0, 2);
	e1 = event(&l, 2, KVI_EVENT_STORED, 1, 2);
	assert_true(e0->has_parent && e0->parent == ha[3]);
	assert_true(e1->hashes[0] == ha[4] && e1->hashes[1] == ha[5]);
	live_fini(&l);
	const uint64_t after[] = {96, 96};
	check_hit(0, tok_a, NA, 96, swa_kinds, bs16, after);

	/* replay serves the very bytes of the live stream */
	kvt_frames f;
	simc_replay_request(&A, 0, 0);
	assert_true(simc_recv_replay(&A, 0, true, "", &f) == 0);
	assert_int_equal(f.len[3], first_len);
	assert_memory_equal(f.data[3], first, first_len);
	kvt_frames_fini(&f);
	kvi_free(first);
	const uint64_t rest[] = {1, 2, KVI_SEQ_END};
	for (size_t i = 0; i < 3; i++) {
		assert_true(simc_recv_replay(&A, 0, true, "", &f) == rest[i]);
		kvt_frames_fini(&f);
	}

	/* /kv_recover: group 0's events and blocks alone */
	size_t stored, removed;
	recover_counts(0, "?start=0&end=2", "Events", &stored, &removed);
	assert_int_equal(stored, 6 + 4 + 2);
	assert_int_equal(removed, 0);
	recover_counts(0, "", "TreeDump", &stored, &removed);
	assert_int_equal(stored, 10);
}

/* Pod 1: "align" caches the state at the prompt's last block boundary;
 * the prompt ending there may hit at most one token less: nothing. */
static void
test_mamba_align(void **state)
{
	(void)state;
	live l;
	json_decref(prefill(1, tok_a, NA, 0));
	recv_live(1, 2, &l);
	const kvi_event *e0 = event(&l, 0, KVI_EVENT_STORED, 0, 6);
	const kvi_event *e1 = event(&l, 1, KVI_EVENT_STORED, 1, 1);
	assert_true(e1->hashes[0] == e0->hashes[5]);
	assert_true(e1->has_parent && e1->parent == e0->hashes[4]);
	assert_int_equal(e1->n_tokens, BS);
	check_spec(&l, 0, "full_attention", 0);
	check_spec(&l, 1, "mamba", 0);
	uint64_t a5 = e0->hashes[5];
	live_fini(&l);
	assert_int_equal(truth_groups(1, a5), 3);

	const uint64_t whole[] = {96, 96};
	check_hit(1, tok_a, NA, 96, mamba_kinds, bs16, whole);
	json_t *rep = prefill(1, tok_a, NA, 96);
	assert_true(json_is_null(json_object_get(rep, "seq")));
	json_decref(rep);
	const uint64_t prefix[] = {80, 0};
	check_hit(1, tok_a, 6 * BS, 0, mamba_kinds, bs16, prefix);
	json_decref(prefill(1, tok_a, 6 * BS, 0));
	recv_live(1, 2, &l);
	event(&l, 0, KVI_EVENT_STORED, 0, 6);
	e1 = event(&l, 1, KVI_EVENT_STORED, 1, 1);
	assert_true(e1->hashes[0] == a5);
	live_fini(&l);
}

/* Pod 2: the group of block 32 stores every second hash; B evicts A's
 * last 32-block from it alone. */
static void
test_block_sizes(void **state)
{
	(void)state;
	live l;
	uint64_t ha[6];
	json_decref(prefill(2, tok_a, NA, 0));
	recv_live(2, 2, &l);
	memcpy(ha, event(&l, 0, KVI_EVENT_STORED, 0, 6)->hashes, sizeof(ha));
	const kvi_event *e1 = event(&l, 1, KVI_EVENT_STORED, 1, 3);
	assert_int_equal(e1->block_size, 2 * BS);
	assert_int_equal(e1->n_tokens, 6 * BS);
	assert_false(e1->has_parent);
	for (int j = 0; j < 3; j++) {
		assert_true(e1->hashes[j] == ha[2 * j + 1]);
	}
	check_spec(&l, 1, "full_attention", 0);
	live_fini(&l);
	assert_int_equal(truth_groups(2, ha[4]), 1);
	assert_int_equal(truth_groups(2, ha[5]), 3);

	json_decref(prefill(2, tok_b, NB, 0));
	recv_live(2, 3, &l);
	const kvi_event *rm = event(&l, 0, KVI_EVENT_REMOVED, 1, 1);
	assert_true(rm->hashes[0] == ha[5]);
	event(&l, 1, KVI_EVENT_STORED, 0, 4);
	uint64_t hb3 = event(&l, 2, KVI_EVENT_STORED, 1, 2)->hashes[1];
	live_fini(&l);

	const uint64_t groups[] = {96, 64};
	check_hit(2, tok_a, NA, 64, full_kinds, bs16_32, groups);
	json_decref(prefill(2, tok_a, NA, 64));
	/* A's first two 32-blocks are its hit: B's last makes room */
	recv_live(2, 3, &l);
	assert_true(event(&l, 0, KVI_EVENT_REMOVED, 1, 1)->hashes[0] == hb3);
	event(&l, 1, KVI_EVENT_STORED, 0, 2);
	e1 = event(&l, 2, KVI_EVENT_STORED, 1, 1);
	assert_true(e1->hashes[0] == ha[5] && e1->parent == ha[3]);
	live_fini(&l);
	size_t stored, removed;
	recover_counts(2, "", "TreeDump", &stored, &removed);
	assert_int_equal(stored, 10);
}

/* /clear empties every group; keys need every block size to be 16. */
static void
test_clear_and_keys(void **state)
{
	(void)state;
	live l;
	simc_post(&A, "/clear", json_pack("{s:i,s:i}", "pod", 0, "rank", 0));
	recv_live(0, 1, &l);
	assert_int_equal(l.b.events[0].type, KVI_EVENT_CLEARED);
	assert_false(l.b.events[0].has_group_idx);
	live_fini(&l);
	json_t *t = simc_http(&A, "GET", "/truth?pod=0&rank=0", NULL, 200);
	assert_int_equal(json_array_size(json_object_get(t, "blocks")), 0);
	json_decref(t);

	json_t *arr = json_array();
	for (int i = 0; i < NA; i++) {
		json_array_append_new(arr, json_integer(tok_a[i]));
	}
	json_t *body = json_pack("{s:i,s:i,s:O,s:s}", "pod", 2, "rank", 0,
				 "token_ids", arr, "lora_name", "lora-1");
	json_decref(simc_http(&A, "POST", "/prefill", json_incref(body), 400));
	json_decref(simc_http(&A, "POST", "/hit", json_incref(body), 400));
	json_object_set_new(body, "pod", json_integer(0));
	json_t *rep = simc_http(&A, "POST", "/prefill", body, 200);
	assert_int_equal(simc_int(rep, "hit_tokens"), 0);
	json_decref(rep);
	json_decref(arr);
	recv_live(0, 2, &l);
	const kvi_event *e1 = event(&l, 1, KVI_EVENT_STORED, 1, 6);
	assert_int_equal(e1->lora_name.len, 6);
	assert_non_null(raw_field(&l, 1, "extra_keys"));
	live_fini(&l);
	json_decref(simc_http(
	    &A, "POST", "/hit",
	    json_pack("{s:i,s:i,s:[i]}", "pod", 3, "rank", 0, "token_ids", 1),
	    400));
}

/* run_bad runs the simulator with flags it must refuse (exit status 2). */
static void
run_bad(const char *a, const char *b, const char *c, const char *d)
{
	const char *argv[] = {KVI_SIM_BIN, "--block-size", "16", a, b, c, d,
			      NULL};
	kvt_proc *p;
	int status = -1;
	assert_int_equal(kvt_proc_start(argv, "/dev/null", &p), KVI_OK);
	assert_int_equal(kvt_proc_wait(p, WAIT, &status), KVI_OK);
	kvt_proc_free(p);
	if (status != 2) {
		fail_msg("%s %s %s %s: exit status %d", a, b, c, d, status);
	}
}

static void
test_bad_flags(void **state)
{
	(void)state;
	run_bad("--kv-groups", "full:24", "--paused", "--paused");
	run_bad("--kv-groups", "full,swa=0", "--paused", "--paused");
	run_bad("--kv-groups", "full", "--cpu-blocks", "8");
	run_bad("--kv-groups", "full", "--flavours", "vllm,sglang");
	run_bad("--kv-groups", "full,full:32", "--loras", "2");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_start),
	    cmocka_unit_test(test_sliding_window),
	    cmocka_unit_test(test_mamba_align),
	    cmocka_unit_test(test_block_sizes),
	    cmocka_unit_test(test_clear_and_keys),
	    cmocka_unit_test(test_bad_flags),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
