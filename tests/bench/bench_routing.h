/*
 * bench_routing.h - what bench_routing's parts share: the workloads
 * (bench_routing_load.c), one run of a policy against a fresh simulated
 * fleet and kvindex cluster (bench_routing_run.c), and the figures of a
 * run that bench_routing.c prints.
 */
#ifndef KVI_TESTS_BENCH_ROUTING_H
#define KVI_TESTS_BENCH_ROUTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BR_BS    16 /* tokens per block, the fleet's and the bound's */
#define BR_PODS  4
#define BR_DP    2
#define BR_RANKS (BR_PODS * BR_DP)

/* One request of a workload: when it arrives (ms from the run's start)
 * and its prompt. */
typedef struct br_req {
	double at_ms;
	uint32_t n_tokens;
	uint32_t *tokens;
} br_req;

typedef struct br_workload {
	const char *name; /* "conversation", "arxiv", "bursts" */
	br_req *reqs;
	size_t n;
	double rate; /* mean requests/s of the schedule */
} br_workload;

/* br_load_trace reads the first n requests of the Mooncake trace at path
 * into w, keeping only the conversations (a request's first id that
 * fewer than 50 requests of the trace share) whose hash falls in one
 * `sample`th (1: all): every turn of a conversation kept, so its later
 * turns still find their prefix. Every hash id is 512 tokens (32 blocks)
 * of pseudo-random tokens seeded by (id, position), a prompt is its
 * input_length tokens, at most max_tokens, and the timestamps are scaled
 * so that the n requests arrive at rate requests/s on average. False
 * when the file cannot be read or holds fewer such requests. */
bool br_load_trace(br_workload *w, const char *name, const char *path, size_t n,
		   uint32_t max_tokens, double rate, unsigned sample);

/* br_make_bursts makes n requests in bursts of 6 sharing a prefix of 48
 * to 96 blocks, fresh in 70% of the bursts and one of the last 16 bursts'
 * in the others, each request with a unique suffix of 1 to 4 blocks plus
 * a partial one; a burst every gap_ms (jittered by up to a quarter), the
 * six at once. Seeded: the same n gives the same requests. */
void br_make_bursts(br_workload *w, size_t n, double gap_ms, uint64_t seed);

/* br_workload_head is w cut to its first n requests (a view: no copy). */
br_workload br_workload_head(const br_workload *w, size_t n);

void br_workload_free(br_workload *w);

/* br_bound returns the hit ratio one cache of unlimited size would give
 * the requests in order: each request hits the longest prefix of its full
 * blocks seen before, at most n_tokens - 1 tokens in whole blocks (vLLM's
 * rule), then holds all its full blocks. */
double br_bound(const br_workload *w);

/* The policies, in the order of the ladder. */
typedef enum br_policy {
	BR_RANDOM,
	BR_ROUND_ROBIN,
	BR_BLIND,
	BR_EXACT,
	BR_PENDING_RACING,
	BR_PENDING,
	BR_ORACLE,
	BR_N_POLICIES,
} br_policy;

extern const char *const br_policy_names[BR_N_POLICIES];

typedef struct br_run_config {
	const char *sim_bin, *shard_bin, *coord_bin;
	br_policy policy;
	int clients;
	double penalty; /* tokens per request outstanding on a rank */
	uint32_t cache_blocks;
	double prefill_rate;
	uint64_t seed;
} br_run_config;

/* What the engines answered for one request, and what the router
 * predicted for the rank it chose (-1: no prediction). */
typedef struct br_outcome {
	bool ok;
	int rank;
	uint32_t prompt_tokens, hit_tokens, hit_blocks;
	double queue_ms, prefill_ms;
	int64_t predicted; /* blocks */
} br_outcome;

typedef struct br_result {
	bool unavailable; /* +pending without POST /routed: n/a */
	bool failed;      /* a process did not start, or requests failed */
	size_t sent, answered;
	double sim_requests; /* the simulator's count, past the warm-up */
	double seconds;      /* the workload's wall time */
	/* figures */
	double hit_ratio;
	double uncached; /* tokens */
	double ttft_p50, ttft_p90;
	double accuracy; /* share within one block; < 0: no prediction */
	double over, under;
	double imbalance;
	double max_hit_over_prompt; /* > 1 would be a bad reply */
} br_result;

/* br_run starts a fresh fleet and kvindex cluster under dir, runs w
 * through cfg's policy and fills *res. False when the cluster could not
 * be started (res->failed). */
bool br_run(const br_run_config *cfg, const br_workload *w, const char *dir,
	    br_result *res);

/* br_routed_known: -1 not probed yet, 0 the coordinator answers 404 for
 * POST /routed, 1 it takes it. Set by the first run that probes. */
extern int br_routed_known;

#endif /* KVI_TESTS_BENCH_ROUTING_H */
