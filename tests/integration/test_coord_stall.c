/*
 * test_coord_stall.c - no answer leaves out a stopped shard's listeners
 * without saying partial: not while it is stopped, not after it comes
 * back. Three DP=2 pods from the simulator, one prompt prefilled on each
 * rank, then the engines stay idle, so the simulator's ground truth, read
 * once, is every answer's truth. Three clients query the six prompts
 * without pause while shard-1 is stopped (SIGSTOP) and long after it is
 * continued (SIGCONT); every answer is checked as it comes: one that is
 * not partial must be the truth exactly, a partial one may lack
 * listeners but never show a wrong match.
 *
 * "After" lasts until two full assigner ticks have run since the shard
 * answered again (a full tick runs at least every 10 s): the first saw
 * it back, the next is the one that once dropped its listeners.
 *
 * test_stall_within_grace: the shard is stopped for 3 s, well within the
 * failover grace; it keeps its listeners throughout.
 *
 * test_stall_past_grace: stopped for 6 s, past a 1 s grace: its
 * listeners fail over to shard-0, which rebuilds them from the engines,
 * and move back once it is continued. Its engines send and replay nothing
 * for 8 s from just before the stop, so shard-0 holds a listener for a
 * while (the replay's 2 s timeout, then a tree dump) before it has its
 * state: answers must not pass that off as whole while shard-1, silent,
 * holds the blocks.
 */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_check.h"

#define PODS     3
#define DP       2
#define N        (PODS * DP)
#define NTOK     64
#define CLIENTS  3
#define BODY_MAX 2048

#define FULL_TICKS "kvindex_coord_ticks_total{kind=\"full\"}"

static const char *const sim_flags[] = {"--pods", "3", "--dp", "2", NULL};

static void
make_tokens(uint32_t *t, uint32_t seed)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = seed * 1000u + i + 1;
	}
}

/* What the clients share: the prompts, their truth, and the tally. */
typedef struct stall_run {
	char url[128]; /* the coordinator's /query */
	char body[N][BODY_MAX];
	clu_expect exp[N][N];
	int n_exp[N];
	atomic_bool stop;
	_Atomic int64_t cont_ms; /* when the shard was continued; 0: not */
	pthread_mutex_t mu;
	/* under mu */
	long answers, partial, whole, errors;
	long bad; /* whole but not the truth, or partial with a wrong match */
	char first[2048]; /* the first bad answer, and why */
} stall_run;

/* listed_ok says whether every worker ans lists is one of exp, with its
 * match: a partial answer may lack listeners, never be wrong. */
static bool
listed_ok(const json_t *ans, const clu_expect *exp, int n_exp, char *why,
	  size_t len)
{
	size_t i;
	json_t *w;
	json_array_foreach(json_object_get(ans, "workers"), i, w)
	{
		const char *pod = json_string_value(json_object_get(w, "pod"));
		json_int_t rank =
		    json_integer_value(json_object_get(w, "dp_rank"));
		json_int_t mb =
		    json_integer_value(json_object_get(w, "matched_blocks"));
		bool found = false;
		for (int e = 0; e < n_exp && !found; e++) {
			char want[32];
			snprintf(want, sizeof(want), "sim/pod-%d", exp[e].pod);
			found = pod != NULL && strcmp(pod, want) == 0 &&
				rank == exp[e].rank && mb == exp[e].longest;
		}
		if (!found) {
			snprintf(why, len,
				 "%s rank %lld: %lld blocks, not the "
				 "truth",
				 pod ? pod : "?", (long long)rank,
				 (long long)mb);
			return false;
		}
	}
	return true;
}

/* stall_note counts one answer to prompt p, posted at t0. */
static void
stall_note(stall_run *r, int p, int64_t t0, const kvt_http_resp *resp)
{
	char why[512] = "";
	bool ok = resp->status == 200 && resp->json != NULL;
	bool part = ok && json_is_true(json_object_get(resp->json, "partial"));
	bool whole = ok && !part &&
		     clu_check_answer(resp->json, r->exp[p], r->n_exp[p], why,
				      sizeof(why));
	bool bad = ok && !part && !whole;
	if (ok && part &&
	    !listed_ok(resp->json, r->exp[p], r->n_exp[p], why, sizeof(why))) {
		bad = true;
	}
	pthread_mutex_lock(&r->mu);
	r->answers++;
	r->errors += !ok;
	r->partial += part;
	r->whole += whole;
	if (bad && r->bad++ == 0) {
		int64_t cont = atomic_load(&r->cont_ms);
		char when[64];
		if (cont != 0) {
			snprintf(when, sizeof(when), "%+.2f s after SIGCONT",
				 (double)(t0 - cont) / 1000.0);
		} else {
			snprintf(when, sizeof(when), "before SIGCONT");
		}
		snprintf(r->first, sizeof(r->first),
			 "prompt %d, %s, partial %s: %s; answer %.600s", p,
			 when, part ? "true" : "false", why, resp->body);
	}
	pthread_mutex_unlock(&r->mu);
}

/* stall_client queries prompt after prompt until told to stop. */
static void *
stall_client(void *arg)
{
	stall_run *r = ((void **)arg)[0];
	int p = (int)(intptr_t)((void **)arg)[1];
	while (!atomic_load(&r->stop)) {
		kvt_http_resp resp;
		int64_t t0 = kvt_now_ms();
		if (kvt_http_post(r->url, r->body[p], 10000, &resp) != KVI_OK) {
			resp.status = 0;
		}
		stall_note(r, p, t0, &resp);
		kvt_http_resp_fini(&resp);
		p = (p + 1) % N;
	}
	return NULL;
}

/* start brings the cluster up with one prefill per rank (seed 10+idx),
 * each matched, and fills r with the prompts and their truth. */
static void
start(cluster *c, stall_run *r, const char *const *coord_extra)
{
	clu_sim(c, sim_flags);
	clu_shards(c, 2);
	clu_coord(c, true, coord_extra);
	uint32_t t[NTOK];
	for (int i = 0; i < N; i++) {
		make_tokens(t, 10 + (uint32_t)i);
		clu_prefill(c, i / DP, i % DP, t, NTOK);
	}
	clu_wait_active(c, N, CLU_WAIT_MS);
	for (int i = 0; i < N; i++) {
		make_tokens(t, 10 + (uint32_t)i);
		int64_t until = kvt_now_ms() + CLU_WAIT_MS;
		for (;;) {
			json_t *ans = clu_query(c, t, NTOK, NULL);
			long s = clu_score(ans, i, DP);
			json_decref(ans);
			if (s == NTOK) {
				break;
			}
			assert_true(kvt_now_ms() < until);
			kvt_sleep_ms(50);
		}
	}
	snprintf(r->url, sizeof(r->url), "%s/query", c->base);
	pthread_mutex_init(&r->mu, NULL);
	clu_truth *truth = clu_truth_get(c);
	for (int p = 0; p < N; p++) {
		make_tokens(t, 10 + (uint32_t)p);
		uint64_t seq[NTOK / 16];
		size_t nb = clu_seq_hashes(t, NTOK, seq);
		r->n_exp[p] = clu_truth_match(truth, seq, nb, r->exp[p]);
		assert_true(r->n_exp[p] > 0);
		int off = snprintf(r->body[p], BODY_MAX,
				   "{\"model_name\":\"sim-model\","
				   "\"token_ids\":[");
		for (int i = 0; i < NTOK; i++) {
			off +=
			    snprintf(r->body[p] + off, BODY_MAX - (size_t)off,
				     "%s%u", i ? "," : "", t[i]);
		}
		snprintf(r->body[p] + off, BODY_MAX - (size_t)off, "]}");
	}
	clu_truth_free(truth);
}

static bool
shard1_up(void *arg)
{
	return clu_shard_status_is(arg, "shard-1", "up");
}

static bool
shard1_down(void *arg)
{
	return clu_shard_status_is(arg, "shard-1", "down");
}

/* stall_engines makes every rank shard-1 owns send and replay nothing
 * for ms: a listener that fails over to shard-0 waits that long for its
 * history (or for the replay's timeout, then a tree dump). */
static void
stall_engines(cluster *c, int ms)
{
	for (int i = 0; i < N; i++) {
		if (clu_shard_of(c, i / DP, i % DP) != &c->shards[1]) {
			continue;
		}
		char body[96];
		snprintf(body, sizeof(body),
			 "{\"pod\": %d, \"rank\": %d, \"ms\": %d}", i / DP,
			 i % DP, ms);
		json_decref(clu_sim_post(c, "/fault/stall", body));
	}
}

/* stall_cycle stops shard-1 for stop_ms (at least until the coordinator
 * has seen it down), continues it, and waits until two full ticks have
 * run since it answered again, then a second more. Returns NULL, or what
 * went wrong. */
static const char *
stall_cycle(cluster *c, stall_run *r, int stop_ms, long *during)
{
	pid_t pid = kvt_proc_pid(c->shards[1].proc);
	clu_sigstop(pid);
	int64_t t0 = kvt_now_ms();
	if (!kvt_wait_until(shard1_down, c, CLU_WAIT_MS)) {
		kill(pid, SIGCONT);
		return "the coordinator never saw shard-1 down";
	}
	int64_t left = stop_ms - (kvt_now_ms() - t0);
	if (left > 0) {
		kvt_sleep_ms((int)left);
	}
	pthread_mutex_lock(&r->mu);
	*during = r->partial;
	pthread_mutex_unlock(&r->mu);
	atomic_store(&r->cont_ms, kvt_now_ms());
	if (kill(pid, SIGCONT) != 0) {
		return "SIGCONT failed";
	}
	if (!kvt_wait_until(shard1_up, c, CLU_WAIT_MS)) {
		return "the coordinator never saw shard-1 up again";
	}
	double full0 = clu_metric(c, FULL_TICKS);
	int64_t until = kvt_now_ms() + CLU_WAIT_MS;
	while (clu_metric(c, FULL_TICKS) < full0 + 2) {
		if (kvt_now_ms() > until) {
			return "no two full ticks after shard-1 came back";
		}
		kvt_sleep_ms(100);
	}
	kvt_sleep_ms(1000);
	return NULL;
}

/* stall stalls shard-1's engines for engine_ms (0: not at all), then
 * runs stall_cycle under the clients, and checks their tally. */
static void
stall(cluster *c, stall_run *r, int stop_ms, int engine_ms)
{
	if (engine_ms > 0) {
		stall_engines(c, engine_ms);
	}
	pthread_t tid[CLIENTS];
	void *args[CLIENTS][2];
	for (int k = 0; k < CLIENTS; k++) {
		args[k][0] = r;
		args[k][1] = (void *)(intptr_t)(k * 2);
		assert_int_equal(
		    pthread_create(&tid[k], NULL, stall_client, args[k]), 0);
	}
	kvt_sleep_ms(500);
	long during = 0;
	const char *failed = stall_cycle(c, r, stop_ms, &during);
	atomic_store(&r->stop, true);
	for (int k = 0; k < CLIENTS; k++) {
		pthread_join(tid[k], NULL);
	}
	if (failed != NULL) {
		fail_msg("%s", failed);
	}
	print_message("%ld answers: %ld whole, %ld partial (%ld while "
		      "stopped), %ld errors, %ld wrong\n",
		      r->answers, r->whole, r->partial, during, r->errors,
		      r->bad);
	if (r->bad > 0) {
		fail_msg("%ld answers were wrong (a whole one must be the "
			 "truth, a partial one may only lack listeners); the "
			 "first: %s",
			 r->bad, r->first);
	}
	assert_int_equal(r->errors, 0);
	/* the stop was seen, and the answers were whole again after it */
	assert_true(during > 0);
	assert_true(r->whole > 0);
	pthread_mutex_destroy(&r->mu);
}

/* check_whole asks every prompt once more: whole, and the truth. */
static void
check_whole(cluster *c, stall_run *r)
{
	uint32_t t[NTOK];
	for (int p = 0; p < N; p++) {
		make_tokens(t, 10 + (uint32_t)p);
		json_t *ans = clu_query(c, t, NTOK, NULL);
		char why[512];
		assert_false(json_is_true(json_object_get(ans, "partial")));
		if (!clu_check_answer(ans, r->exp[p], r->n_exp[p], why,
				      sizeof(why))) {
			fail_msg("prompt %d: %s", p, why);
		}
		json_decref(ans);
	}
}

static void
test_stall_within_grace(void **state)
{
	cluster *c = *state;
	const char *extra[] = {"--query-deadline-ms", "500",
			       "--failover-grace-ms", "60000", NULL};
	static stall_run r;
	memset(&r, 0, sizeof(r));
	start(c, &r, extra);
	assert_true(clu_rank_on(c, 1, N, DP) >= 0);
	stall(c, &r, 3000, 0);
	check_whole(c, &r);
}

static void
test_stall_past_grace(void **state)
{
	cluster *c = *state;
	const char *extra[] = {"--query-deadline-ms", "500",
			       "--failover-grace-ms", "1000", NULL};
	static stall_run r;
	memset(&r, 0, sizeof(r));
	start(c, &r, extra);
	int on1 = clu_rank_on(c, 1, N, DP);
	assert_true(on1 >= 0);
	stall(c, &r, 6000, 8000);
	check_whole(c, &r);
	assert_true(clu_metric(c, "kvindex_coord_failovers_total") > 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_stall_within_grace,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_stall_past_grace,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
