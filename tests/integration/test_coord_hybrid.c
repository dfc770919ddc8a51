/*
 * test_coord_hybrid.c - hybrid models: /query's match is the hit the
 * engine itself would take.
 *
 * The simulator's five pods of DP 2 each serve a hybrid model
 * (--kv-groups), publishing vLLM's events of every KV cache group:
 *   pod 0: full attention (64 blocks) + a 64-token sliding window (40);
 *   pod 1: full attention + Mamba in "align" mode (4 states);
 *   pod 2: full attention at block 16 (64) + full attention at block 32
 *          (24 blocks of 32 tokens);
 *   pod 3: MLA + Mamba in "all" mode (40 states);
 *   pod 4: full attention + a 48-token sliding window of MLA (40).
 * (Chunked local attention is left out: its events do not carry the
 * chunk size, so kvindex judges it as full attention, which may report
 * less than the engine reuses - never more.)
 * Every prompt fits in every group (the simulator cuts a prompt to what
 * its smallest group holds), and the prompts' blocks do not. Prompt
 * lengths sit at and around the window and the block boundaries: a
 * prompt that ends on a boundary gets no hit from its last block (the
 * engine recomputes its last token), which the coordinator tells the
 * shards. Each rank runs rounds of requests, in an order of its own, that
 * share prefixes and evict in their small group, one group at a time.
 * After each round, for every prompt and every rank,
 * /query's matched_blocks must equal what the simulator's POST /hit says
 * the engine would reuse (its own rule, written from vLLM's source apart
 * from kvindex's), and a worker of several groups lists them in
 * "groups". Then the shard restarts, and after a kill -9 as well: the
 * groups come back from its store, with the same answers.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_check.h"

#define BS      16
#define PODS    5
#define RANKS   2
#define PROMPTS 10
#define MAXTOK  (40 * BS + 1)
#define WAIT_MS 15000
#define GROUPS                                                                 \
	"full:16:64,swa=64:16:40/full:16:64,mamba=align:16:4/"                 \
	"full:16:64,full:32:24/mla:16:64,mamba=all:16:40/"                     \
	"full:16:64,swa-mla=48:16:40"

static uint32_t tok[PROMPTS][MAXTOK];
static size_t len[PROMPTS];

/* prompts: two families of shared prefixes, of several lengths, each a
 * block and a token long so that the engine's cap (a token less than
 * the prompt) falls on the last full block */
static void
prompts_make(void)
{
	/* in tokens: blocks and a token, exact blocks (4 blocks is the
	 * window), a block less a token */
	static const size_t tokens[PROMPTS] = {
	    6 * BS + 1, 12 * BS + 1, 33 * BS + 1, 5 * BS + 1, 20 * BS + 1,
	    9 * BS + 1, 4 * BS,      5 * BS,      4 * BS + 1, 13 * BS - 1};
	static const int family[PROMPTS] = {0, 0, 0, 1, 1, 1, 0, 1, 1, 0};
	uint32_t base[2][MAXTOK];
	clu_tokens_seeded(base[0], MAXTOK, 71);
	clu_tokens_seeded(base[1], MAXTOK, 72);
	for (int p = 0; p < PROMPTS; p++) {
		len[p] = tokens[p];
		memcpy(tok[p], base[family[p]], len[p] * sizeof(uint32_t));
	}
	/* prompt 5 leaves family 1 after 4 blocks */
	tok[5][4 * BS] ^= 0x5555;
}

/* Cases compared, those with a hit, and those whose hit a group other
 * than the first cut short (where indexing group 0 alone over-reports). */
static int n_cases, n_hits, n_cut;

/* engine_hit asks the simulator what (pod, rank 0) would reuse of
 * prompt p now, in blocks. */
/* sim_hit is the simulator's POST /hit for (pod, rank) and prompt p. */
static json_t *
sim_hit(cluster *c, int pod, int rank, int p)
{
	char *toks = clu_tokens_text(tok[p], len[p]);
	size_t cap = strlen(toks) + 64;
	char *body = malloc(cap);
	snprintf(body, cap, "{\"pod\":%d,\"rank\":%d,\"token_ids\":%s}", pod,
		 rank, toks);
	json_t *r = clu_sim_post(c, "/hit", body);
	free(body);
	free(toks);
	return r;
}

static long
engine_hit(cluster *c, int pod, int rank, int p)
{
	json_t *r = sim_hit(c, pod, rank, p);
	long hit = (long)json_integer_value(json_object_get(r, "hit_blocks"));
	json_t *g0 = json_array_get(json_object_get(r, "groups"), 0);
	long first =
	    (long)json_integer_value(json_object_get(g0, "hit_tokens"));
	n_cases++;
	n_hits += hit > 0;
	n_cut += first / BS > hit;
	json_decref(r);
	return hit;
}

/* indexed returns /query's matched_blocks for (pod, 0) of prompt p (0
 * when the pod is not listed), and the worker's "groups" count. */
static long
indexed(cluster *c, int pod, int rank, int p, size_t *n_groups)
{
	json_t *ans = clu_query(c, tok[p], len[p], NULL);
	const json_t *w = clu_worker(ans, pod, rank);
	long b =
	    w != NULL
		? (long)json_integer_value(json_object_get(w, "matched_blocks"))
		: 0;
	*n_groups =
	    w != NULL ? json_array_size(json_object_get(w, "groups")) : 0;
	json_decref(ans);
	return b;
}

/* dump prints what both sides say of (pod, prompt p), group by group. */
static void
dump(cluster *c, int pod, int rank, int p)
{
	json_t *r = sim_hit(c, pod, rank, p);
	char *a = json_dumps(r, JSON_COMPACT);
	json_t *ans = clu_query(c, tok[p], len[p], NULL);
	char *b = json_dumps(clu_worker(ans, pod, rank), JSON_COMPACT);
	print_message("engine: %s\nkvindex: %s\n", a, b ? b : "(none)");
	free(a);
	free(b);
	json_decref(ans);
	json_decref(r);
}

/* compare checks every prompt on every rank, waiting for kvindex to
 * catch up with the simulator's last batch; returns the cases. */
static int
compare(cluster *c, const char *when)
{
	int cases = 0;
	for (int k = 0; k < PODS * RANKS; k++) {
		int pod = k / RANKS, rank = k % RANKS;
		for (int p = 0; p < PROMPTS; p++) {
			long want = engine_hit(c, pod, rank, p), got = -1;
			size_t ng = 0;
			int64_t until = kvt_now_ms() + WAIT_MS;
			while ((got = indexed(c, pod, rank, p, &ng)) != want &&
			       kvt_now_ms() < until) {
				kvt_sleep_ms(50);
			}
			if (got != want) {
				dump(c, pod, rank, p);
				fail_msg("%s: pod %d rank %d prompt %d: /query "
					 "says %ld blocks, the engine reuses "
					 "%ld",
					 when, pod, rank, p, got, want);
			}
			if (got > 0 && ng != 2) {
				fail_msg("%s: pod %d rank %d prompt %d: %zu "
					 "groups listed, not 2",
					 when, pod, rank, p, ng);
			}
			cases++;
		}
	}
	return cases;
}

/* round runs requests on every rank: the prompts of order[] in turn,
 * rank 1 from the end. */
static void
round_run(cluster *c, const int *order, int n)
{
	for (int pod = 0; pod < PODS; pod++) {
		for (int i = 0; i < n; i++) {
			clu_prefill(c, pod, 0, tok[order[i]], len[order[i]]);
			int j = order[n - 1 - i];
			clu_prefill(c, pod, 1, tok[j], len[j]);
		}
	}
}

static void
test_hybrid_hits(void **state)
{
	cluster *c = *state;
	prompts_make();
	const char *sim[] = {"--pods",      "5",    "--dp", "2",
			     "--kv-groups", GROUPS, NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, true, NULL);
	clu_wait_active(c, PODS * RANKS, CLU_WAIT_MS);

	static const int r1[] = {0, 6, 1, 2};
	static const int r2[] = {3, 8, 4, 0, 7};
	static const int r3[] = {5, 2, 9, 4, 1};
	int cases = 0;
	round_run(c, r1, 4);
	cases += compare(c, "round 1");
	round_run(c, r2, 5);
	cases += compare(c, "round 2");
	round_run(c, r3, 5);
	cases += compare(c, "round 3");
	assert_int_equal(cases, 3 * PODS * RANKS * PROMPTS);
	print_message("%d cases: %d with a hit, %d cut short by a group "
		      "other than the first\n",
		      n_cases, n_hits, n_cut);
	assert_true(n_hits >= n_cases / 2);
	assert_true(n_cut >= 3);

	/* a clean restart, then a crash: the groups are durable */
	shardproc *s = clu_shard_of(c, 0, 0);
	assert_non_null(s);
	assert_int_equal(shc_stop(s), 0);
	shc_restart(s);
	clu_wait_active(c, PODS * RANKS, CLU_WAIT_MS);
	compare(c, "after a restart");
	shc_kill9(s);
	shc_restart(s);
	clu_wait_active(c, PODS * RANKS, CLU_WAIT_MS);
	compare(c, "after kill -9");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_hybrid_hits, clu_test_setup,
					    clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
