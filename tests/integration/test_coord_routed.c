/*
 * test_coord_routed.c - pending entries from routing decisions, end to end:
 * the engine simulator in timed mode (a prefill takes time and publishes
 * its blocks chunk by chunk, as vLLM does), two real shards and two real
 * coordinators on loopback.
 *
 *  - POST /routed makes a prompt pending on the rank it names; /query then
 *    lists that rank with pending_blocks (and matched 0), ranks it best,
 *    and keeps it out of the compatible scores; "pending": false hides it;
 *    a second coordinator sees it too (it is the shard's state).
 *  - While the engine computes the prompt, every answer has matched +
 *    pending = the prompt: each chunk's BlockStored confirms its blocks,
 *    never leaving a block in neither; at the end all are exact, none
 *    pending, and /workers counts them confirmed.
 *  - An entry expires after its ttl_ms; AllBlocksCleared and an engine
 *    restart drop a rank's entries, and so does a move of the listener to
 *    another shard (its old shard counts them gone).
 *  - A flood of routed fresh prompts stays within the shard's bound.
 *  - A router may name the instance by id and the prompt by the engine's
 *    block hashes: the same entries.
 *  - Bad bodies, unknown pods and ranks get 400 / 404 and change nothing.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_check.h"
#include "hash.h"
#include "kvitest.h"

#define NB  64 /* blocks of a prompt */
#define NTK (NB * 16)

/* routed posts /routed for t to (pod p, rank) with extra JSON fields
 * (may be NULL) and returns the status; *ans gets the body. */
static long
routed(cluster *c, const uint32_t *t, size_t n, int p, int rank,
       const char *extra, json_t **ans)
{
	char *toks = clu_tokens_text(t, n);
	size_t cap = strlen(toks) + 256;
	char *body = malloc(cap);
	snprintf(body, cap,
		 "{\"model_name\":\"sim-model\",\"token_ids\":%s,"
		 "\"pod\":\"sim/pod-%d\",\"dp_rank\":%d%s%s}",
		 toks, p, rank, extra ? "," : "", extra ? extra : "");
	long status = 0;
	json_t *a = clu_post(c, "/routed", body, &status);
	if (status != 202) {
		char *text = a != NULL ? json_dumps(a, JSON_COMPACT) : NULL;
		print_message("/routed: %ld %s\n", status, text ? text : "");
		free(text);
	}
	free(body);
	free(toks);
	if (ans != NULL) {
		*ans = a;
	} else {
		json_decref(a);
	}
	return status;
}

/* One rank's line of a /query answer: -1 when it is not listed. */
typedef struct wline {
	long matched, pending, pending_tokens;
} wline;

static wline
worker(const json_t *ans, int p, int rank)
{
	const json_t *w = clu_worker(ans, p, rank);
	if (w == NULL) {
		return (wline){-1, -1, -1};
	}
	return (wline){
	    json_integer_value(json_object_get(w, "matched_blocks")),
	    json_integer_value(json_object_get(w, "pending_blocks")),
	    json_integer_value(json_object_get(w, "pending_tokens")),
	};
}

static void
start(cluster *c)
{
	const char *sim[] = {"--pods",   "2",
			     "--dp",     "2",
			     "--paused", "--prefill-rate",
			     "4000",     "--prefill-chunk",
			     "256",      NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, true, NULL);
	clu_wait_active(c, 4, CLU_WAIT_MS);
}

static void
test_routed_pending_confirmed(void **state)
{
	cluster *c = *state;
	start(c);
	uint32_t a[NTK];
	clu_tokens_seeded(a, NTK, 1);
	json_t *ans = NULL;
	assert_int_equal(routed(c, a, NTK, 0, 1, NULL, &ans), 202);
	assert_int_equal(
	    json_integer_value(json_object_get(ans, "pending_blocks")), NB);
	assert_int_equal(
	    json_integer_value(json_object_get(ans, "matched_blocks")), 0);
	json_decref(ans);

	ans = clu_query(c, a, NTK, NULL);
	wline w = worker(ans, 0, 1);
	assert_int_equal(w.matched, 0);
	assert_int_equal(w.pending, NB);
	assert_int_equal(w.pending_tokens, NTK);
	json_t *best = json_object_get(ans, "best");
	assert_int_equal(json_integer_value(json_object_get(best, "dp_rank")),
			 1);
	assert_string_equal(json_string_value(json_object_get(best, "pod")),
			    "sim/pod-0");
	/* the compatible fields stay exact: nothing is held */
	assert_int_equal(json_object_size(json_object_get(ans, "scores")), 0);
	json_decref(ans);
	ans = clu_query(c, a, NTK, "\"pending\": false");
	assert_int_equal(json_array_size(json_object_get(ans, "workers")), 0);
	assert_true(json_is_null(json_object_get(ans, "best")));
	json_decref(ans);

	/* the engine runs it: 4 chunks of 16 blocks, ~64 ms each. Every
	 * answer meanwhile has held + pending = the whole prompt */
	char *toks = clu_tokens_text(a, NTK);
	size_t cap = strlen(toks) + 128;
	char *body = malloc(cap);
	snprintf(body, cap,
		 "{\"pod\":0,\"rank\":1,\"token_ids\":%s,\"wait\":false}",
		 toks);
	kvt_http_resp r;
	char url[160];
	snprintf(url, sizeof(url), "%s/prefill", c->sim.control);
	assert_int_equal(kvt_http_post(url, body, 5000, &r), KVI_OK);
	assert_int_equal(r.status, 202);
	kvt_http_resp_fini(&r);
	free(body);
	free(toks);
	int64_t until = kvt_now_ms() + 20000;
	bool mid = false;
	for (;;) {
		ans = clu_query(c, a, NTK, NULL);
		w = worker(ans, 0, 1);
		json_decref(ans);
		assert_int_equal(w.matched + w.pending, NB);
		mid |= w.matched > 0 && w.pending > 0;
		if (w.matched == NB || kvt_now_ms() > until) {
			break;
		}
		kvt_sleep_ms(5);
	}
	assert_int_equal(w.matched, NB);
	assert_int_equal(w.pending, 0);
	(void)mid; /* seen on most runs; the invariant holds either way */
	/* /workers: all 64 confirmed, none left */
	int64_t t_end = kvt_now_ms() + 10000;
	json_t *all = NULL, *l = NULL;
	for (;;) {
		l = clu_listener(c, "sim/pod-0", 1, &all);
		json_t *pd = json_object_get(l, "pending");
		if (pd != NULL && json_integer_value(
				      json_object_get(pd, "confirmed")) == NB) {
			assert_int_equal(
			    json_integer_value(json_object_get(pd, "entries")),
			    0);
			assert_int_equal(
			    json_integer_value(json_object_get(pd, "routed")),
			    1);
			assert_true(json_real_value(json_object_get(
					pd, "confirmed_share")) == 1.0);
			json_decref(all);
			break;
		}
		json_decref(all);
		assert_true(kvt_now_ms() < t_end);
		kvt_sleep_ms(50);
	}
	assert_true(
	    clu_metric(c, "kvindex_coord_routed_total{result=\"ok\"}") >= 1);
}

static void
test_routed_seen_by_second_coordinator(void **state)
{
	cluster *c = *state;
	start(c);
	/* a second coordinator over the same shards and pods */
	cluster c2 = {0};
	c2.sim = c->sim;
	c2.n_shards = c->n_shards;
	for (int i = 0; i < c->n_shards; i++) {
		c2.shards[i] = c->shards[i];
	}
	clu_coord(&c2, true, NULL);
	clu_wait_active(&c2, 4, CLU_WAIT_MS);
	uint32_t b[NTK];
	clu_tokens_seeded(b, NTK, 2);
	assert_int_equal(routed(c, b, NTK, 1, 0, NULL, NULL), 202);
	int64_t t0 = kvt_now_ms();
	json_t *ans = clu_query(&c2, b, NTK, NULL);
	wline w = worker(ans, 1, 0);
	json_decref(ans);
	assert_int_equal(w.pending, NB);
	assert_true(kvt_now_ms() - t0 < 5000);
	/* c2 shares c's simulator and shards: only its own parts go */
	c2.sim_started = false;
	c2.n_shards = 0;
	clu_cleanup(&c2);
}

static void
test_routed_expired_and_dropped(void **state)
{
	cluster *c = *state;
	start(c);
	uint32_t b[NTK], d[NTK], e[NTK];
	clu_tokens_seeded(b, NTK, 3);
	clu_tokens_seeded(d, NTK, 4);
	clu_tokens_seeded(e, NTK, 5);
	/* expiry: 300 ms, then a query no longer counts it */
	assert_int_equal(routed(c, b, NTK, 1, 0, "\"ttl_ms\": 300", NULL), 202);
	json_t *ans = clu_query(c, b, NTK, NULL);
	assert_int_equal(worker(ans, 1, 0).pending, NB);
	json_decref(ans);
	kvt_sleep_ms(400);
	ans = clu_query(c, b, NTK, NULL);
	assert_int_equal(worker(ans, 1, 0).pending, -1);
	json_decref(ans);

	/* AllBlocksCleared on the rank drops its entries */
	assert_int_equal(routed(c, b, NTK, 1, 0, NULL, NULL), 202);
	json_decref(clu_sim_post(c, "/clear", "{\"pod\":1,\"rank\":0}"));
	int64_t until = kvt_now_ms() + 10000;
	long p = 0;
	do {
		kvt_sleep_ms(20);
		ans = clu_query(c, b, NTK, NULL);
		p = worker(ans, 1, 0).pending;
		json_decref(ans);
	} while (p != -1 && kvt_now_ms() < until);
	assert_int_equal(p, -1);

	/* an engine restart (seen at its next batch, whose seq goes back)
	 * drops them too */
	clu_prefill(c, 0, 0, e, 64);
	clu_prefill(c, 0, 0, e + 64, 64);
	assert_int_equal(routed(c, d, NTK, 0, 0, NULL, NULL), 202);
	json_decref(
	    clu_sim_post(c, "/fault/restart", "{\"pod\":0,\"rank\":0}"));
	clu_prefill(c, 0, 0, e, 64); /* seq 0 again: a restart */
	until = kvt_now_ms() + 10000;
	do {
		kvt_sleep_ms(20);
		ans = clu_query(c, d, NTK, NULL);
		p = worker(ans, 0, 0).pending;
		json_decref(ans);
	} while (p != -1 && kvt_now_ms() < until);
	assert_int_equal(p, -1);
	json_t *all = NULL;
	json_t *l = clu_listener(c, "sim/pod-0", 0, &all);
	until = kvt_now_ms() + 10000;
	while (json_integer_value(json_object_get(json_object_get(l, "pending"),
						  "dropped")) != NB &&
	       kvt_now_ms() < until) {
		json_decref(all);
		kvt_sleep_ms(50);
		l = clu_listener(c, "sim/pod-0", 0, &all);
	}
	assert_int_equal(json_integer_value(json_object_get(
			     json_object_get(l, "pending"), "dropped")),
			 NB);
	json_decref(all);
}

/* instance_of returns sim/pod-p's instance id as /workers gives it. */
static char *
instance_of(cluster *c, int p)
{
	char pod[32];
	snprintf(pod, sizeof(pod), "sim/pod-%d", p);
	long st;
	json_t *ws = clu_get(c, "/workers", &st);
	assert_int_equal(st, 200);
	char *id = NULL;
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		const char *name =
		    json_string_value(json_object_get(w, "name"));
		if (name != NULL && strcmp(name, pod) == 0) {
			id = strdup(json_string_value(
			    json_object_get(w, "instance_id")));
		}
	}
	json_decref(ws);
	assert_non_null(id);
	return id;
}

/* A router that knows the engine's block hashes and the instance id
 * routes by those: the same entries as by token ids and pod name. */
static void
test_routed_by_instance_and_hashes(void **state)
{
	cluster *c = *state;
	start(c);
	uint32_t g[NTK];
	clu_tokens_seeded(g, NTK, 7);
	uint64_t h[NB];
	size_t nb =
	    kvi_local_hashes(g, NTK, 16, kvi_local_seed(NULL, 0, NULL, 0), h);
	assert_int_equal(nb, NB);
	char *id = instance_of(c, 1);
	size_t cap = NB * 24 + 256;
	char *body = malloc(cap);
	int off = snprintf(body, cap,
			   "{\"model_name\":\"sim-model\",\"instance_id\":%s,"
			   "\"dp_rank\":1,\"block_hashes\":[",
			   id);
	for (size_t k = 0; k < nb; k++) {
		off += snprintf(body + off, cap - (size_t)off, "%s%" PRIu64,
				k ? "," : "", h[k]);
	}
	snprintf(body + off, cap - (size_t)off, "]}");
	long status = 0;
	json_t *a = clu_post(c, "/routed", body, &status);
	assert_int_equal(status, 202);
	assert_string_equal(json_string_value(json_object_get(a, "listener")),
			    "sim/pod-1#1");
	assert_int_equal(
	    json_integer_value(json_object_get(a, "pending_blocks")), NB);
	json_decref(a);
	/* the same in the compact form: the tokens to pod 0's rank 0, the
	 * hashes to instance 1's rank 0 (g and h in this host's order,
	 * little-endian) */
	char url[512];
	kvt_http_resp r;
	snprintf(url, sizeof(url),
		 "%s/routed?model_name=sim-model&pod=sim/pod-0&dp_rank=0",
		 c->base);
	assert_int_equal(kvt_http_post_bytes(url, g, sizeof(g),
					     "application/octet-stream", 10000,
					     &r),
			 KVI_OK);
	assert_int_equal(r.status, 202);
	assert_int_equal(
	    json_integer_value(json_object_get(r.json, "pending_blocks")), NB);
	kvt_http_resp_fini(&r);
	snprintf(url, sizeof(url),
		 "%s/routed?model_name=sim-model&instance_id=%s&dp_rank=0&"
		 "prompt=block_hashes",
		 c->base, id);
	assert_int_equal(kvt_http_post_bytes(url, h, sizeof(h),
					     "application/octet-stream", 10000,
					     &r),
			 KVI_OK);
	assert_int_equal(r.status, 202);
	assert_string_equal(
	    json_string_value(json_object_get(r.json, "listener")),
	    "sim/pod-1#0");
	kvt_http_resp_fini(&r);
	/* the query by token ids sees them on those ranks */
	json_t *ans = clu_query(c, g, NTK, NULL);
	assert_int_equal(worker(ans, 1, 1).pending, NB);
	assert_int_equal(worker(ans, 1, 0).pending, NB);
	assert_int_equal(worker(ans, 0, 0).pending, NB);
	assert_int_equal(worker(ans, 0, 1).pending, -1);
	json_decref(ans);
	/* an instance id no pod has: 404 */
	snprintf(body, cap,
		 "{\"model_name\":\"sim-model\",\"instance_id\":12345,"
		 "\"block_hashes\":[1,2]}");
	a = clu_post(c, "/routed", body, &status);
	assert_int_equal(status, 404);
	json_decref(a);
	free(body);
	free(id);
}

/* move_done says whether /admin/moves lists key's move as done, and no
 * move of it as in flight. */
static bool
move_done(cluster *c, const char *key)
{
	json_t *moves = NULL;
	assert_int_equal(clu_admin(c, "GET", "/admin/moves", NULL, &moves),
			 200);
	bool done = false, busy = false;
	size_t i;
	json_t *m;
	json_array_foreach(moves, i, m)
	{
		const char *l =
		    json_string_value(json_object_get(m, "listener"));
		const char *ph = json_string_value(json_object_get(m, "phase"));
		if (l == NULL || ph == NULL || strcmp(l, key) != 0) {
			continue;
		}
		done |= strcmp(ph, "done") == 0;
		busy |= strcmp(ph, "done") != 0;
	}
	json_decref(moves);
	return done && !busy;
}

/* A listener that leaves its shard leaves its pending entries there:
 * they are not carried by the hand-off, and the old shard counts them
 * dropped as gone. */
static void
test_routed_listener_moved(void **state)
{
	cluster *c = *state;
	start(c);
	uint32_t f[NTK];
	clu_tokens_seeded(f, NTK, 6);
	shardproc *from = clu_shard_of(c, 1, 1);
	int k = (int)(from - c->shards);
	assert_int_equal(routed(c, f, NTK, 1, 1, NULL, NULL), 202);
	json_t *ans = clu_query(c, f, NTK, NULL);
	assert_int_equal(worker(ans, 1, 1).pending, NB);
	json_decref(ans);
	const char *gone = "kvindex_shard_pending_ended_total{how=\"gone\"}";
	assert_true(shc_metric(from, gone) == 0);

	char body[64];
	snprintf(body, sizeof(body), "{\"to\": \"shard-%d\"}", 1 - k);
	assert_int_equal(clu_admin(c, "POST",
				   "/admin/listeners/sim%2Fpod-1%231/move",
				   body, NULL),
			 202);
	/* pinned there: done once the moves log says so */
	int64_t until = kvt_now_ms() + CLU_WAIT_MS;
	while (!move_done(c, "sim/pod-1#1")) {
		assert_true(kvt_now_ms() < until);
		kvt_sleep_ms(50);
	}
	assert_ptr_not_equal(clu_shard_of(c, 1, 1), from);
	/* the new owner has the exact entries (none) and no pending ones */
	ans = clu_query(c, f, NTK, NULL);
	assert_int_equal(worker(ans, 1, 1).pending, -1);
	json_decref(ans);
	assert_true(shc_wait_metric(from, gone, NB, CLU_WAIT_MS) == NB);
}

static void
test_routed_bad_input(void **state)
{
	cluster *c = *state;
	start(c);
	uint32_t b[64];
	clu_tokens_seeded(b, 64, 6);
	json_t *ans = NULL;
	/* an unknown pod, a rank past its dp_size: 404 naming it */
	assert_int_equal(routed(c, b, 64, 7, 0, NULL, &ans), 404);
	assert_non_null(strstr(json_string_value(json_object_get(ans, "error")),
			       "sim/pod-7"));
	json_decref(ans);
	assert_int_equal(routed(c, b, 64, 0, 2, NULL, &ans), 404);
	json_decref(ans);
	long status;
	const char *bad[] = {
	    "{\"model_name\":\"sim-model\",\"token_ids\":[1,2,3]}", /* no pod */
	    "{\"model_name\":\"sim-model\",\"token_ids\":[1],\"pod\":\"sim/"
	    "pod-0\",\"dp_rank\":-1}",
	    "{\"model_name\":\"sim-model\",\"token_ids\":[1],\"pod\":\"sim/"
	    "pod-0\",\"ttl_ms\":\"x\"}",
	    "{\"model_name\":\"sim-model\",\"token_ids\":[1],\"pod\":7}",
	    "not json",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ans = clu_post(c, "/routed", bad[i], &status);
		assert_int_equal(status, 400);
		assert_non_null(json_object_get(ans, "error"));
		json_decref(ans);
	}
	/* an unknown model: 404, as /query */
	ans = clu_post(c, "/routed",
		       "{\"model_name\":\"nope\",\"token_ids\":[1],\"pod\":"
		       "\"sim/pod-0\"}",
		       &status);
	assert_int_equal(status, 404);
	json_decref(ans);
	/* nothing became pending */
	assert_int_equal(
	    clu_metric(c, "kvindex_coord_routed_total{result=\"ok\"}"), 0);
}

static void
test_routed_flood_bounded(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "1", "--dp", "1", "--paused", NULL};
	clu_sim(c, sim);
	const char *shard_extra[] = {"--pending-per-listener", "1000", NULL};
	c->n_shards = 0;
	clu_shards_with(c, 1, shard_extra);
	clu_coord(c, true, NULL);
	clu_wait_active(c, 1, CLU_WAIT_MS);
	uint32_t f[32 * 16];
	for (uint32_t i = 0; i < 200; i++) {
		clu_tokens_seeded(f, 32 * 16, 1000 + i);
		assert_int_equal(routed(c, f, 32 * 16, 0, 0, NULL, NULL), 202);
	}
	json_t *all = NULL;
	int64_t until = kvt_now_ms() + 10000;
	json_t *pd = NULL;
	for (;;) {
		json_t *l = clu_listener(c, "sim/pod-0", 0, &all);
		pd = json_object_get(l, "pending");
		if ((pd != NULL && json_integer_value(
				       json_object_get(pd, "routed")) == 200) ||
		    kvt_now_ms() > until) {
			break;
		}
		json_decref(all);
		kvt_sleep_ms(50);
	}
	assert_non_null(pd);
	assert_true(json_integer_value(json_object_get(pd, "entries")) <= 1000);
	assert_int_equal(json_integer_value(json_object_get(pd, "evicted")),
			 200 * 32 - 1000);
	json_decref(all);
	/* the newest prompt is still pending whole */
	json_t *ans = clu_query(c, f, 32 * 16, NULL);
	assert_int_equal(worker(ans, 0, 0).pending, 32);
	json_decref(ans);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_routed_pending_confirmed,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(
		test_routed_seen_by_second_coordinator, clu_test_setup,
		clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_routed_expired_and_dropped,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_routed_by_instance_and_hashes,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_routed_listener_moved,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_routed_bad_input,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_routed_flood_bounded,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
