/*
 * bench_routed.c - what routing decisions cost: CPU per request of the
 * coordinator and the shards for POST /routed, beside a /query of the
 * same prompt, and what pending entries add to a /query.
 *
 * The cluster is bench_query's (bench_query_cluster.h: the simulator
 * serving the conversation trace into two shards and a coordinator, filled
 * to --entries). One client on a kept-alive connection sends, for the same
 * --bodies prompts of --blocks blocks (the trace's own token runs, so that
 * they match what the fleet holds), in rounds that alternate:
 *
 *   query        /query {"pending": false}: today's query, exact only
 *   query+p0     /query with pending entries asked for, none in the shards
 *   routed       /routed of the prompt to a listener (round robin), to
 *                live 2 s
 *   query+p      /query with pending entries, after the routed ones
 *
 * (rounds are 2.5 s apart, so that each round's query+p0 finds none)
 *
 * and prints, per kind, the coordinator's and the shards' CPU time per
 * request (from /proc/PID/stat, all threads) and the mean time to the
 * answer, each beside the "query" row of the same round as a ratio; then
 * the shards' CPU for sweeping the routed entries once they expire (the
 * waits between rounds, less a wait measured before the first with
 * nothing pending), per routed request, and the totals as ratios.
 *
 *   bench_routed [--pods 20] [--entries 200000] [--bodies 500]
 *                [--blocks 1000] [--rounds 3]
 */
#include <curl/curl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_query_cluster.h"
#include "bench_query_proc.h"
#include "clock.h"
#include "kvitest.h"

enum { K_QUERY, K_QUERY_P0, K_ROUTED, K_QUERY_P, K_COUNT };
static const char *const kind_names[K_COUNT] = {"query", "query+p0", "routed",
						"query+p"};

typedef struct buf {
	char *p;
	size_t len, cap;
} buf;

static size_t
on_data(char *d, size_t s, size_t n, void *arg)
{
	buf *b = arg;
	size_t len = s * n;
	if (b->len + len + 1 > b->cap) {
		b->cap = (b->len + len + 1) * 2;
		b->p = kvi_realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, d, len);
	b->len += len;
	b->p[b->len] = '\0';
	return len;
}

static long
post(CURL *h, const char *url, const char *body, buf *ans)
{
	ans->len = 0;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, ans);
	if (curl_easy_perform(h) != CURLE_OK) {
		return 0;
	}
	long st = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
	return st;
}

/* body writes the request of kind for prompt i into a new string. */
static char *
body(int kind, const uint32_t *tok, size_t n, int pod, int rank)
{
	size_t cap = n * 8 + 256, len = 0;
	char *s = kvi_malloc(cap);
	len += (size_t)snprintf(
	    s, cap, "{\"model_name\":\"sim-model\",\"token_ids\":[");
	for (size_t i = 0; i < n; i++) {
		len += (size_t)snprintf(s + len, cap - len, "%s%u",
					i ? "," : "", tok[i]);
	}
	if (kind == K_QUERY) {
		len += (size_t)snprintf(s + len, cap - len,
					"],\"pending\":false}");
	} else if (kind == K_ROUTED) {
		len += (size_t)snprintf(s + len, cap - len,
					"],\"pod\":\"sim/pod-%d\",\"dp_rank\":"
					"%d,\"ttl_ms\":2000}",
					pod, rank);
	} else {
		len += (size_t)snprintf(s + len, cap - len, "]}");
	}
	return s;
}

typedef struct tally {
	double coord_ns, shard_ns, wall_us;
	size_t n, failed;
} tally;

int
main(int argc, char **argv)
{
	int pods = 20, bodies = 500, blocks = 1000, rounds = 3;
	double entries = 200000;
	static const struct option lo[] = {
	    {"pods", required_argument, NULL, 'p'},
	    {"entries", required_argument, NULL, 'e'},
	    {"bodies", required_argument, NULL, 'b'},
	    {"blocks", required_argument, NULL, 'k'},
	    {"rounds", required_argument, NULL, 'r'},
	    {NULL, 0, NULL, 0},
	};
	for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
		switch (c) {
		case 'p':
			pods = atoi(optarg);
			break;
		case 'e':
			entries = atof(optarg);
			break;
		case 'b':
			bodies = atoi(optarg);
			break;
		case 'k':
			blocks = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: bench_routed [--pods N] [--entries N] "
				"[--bodies N] [--blocks N] [--rounds N]\n");
			return 2;
		}
	}
	char *dir = NULL;
	if (kvt_tmpdir_make("kvi-bench-routed", &dir) != KVI_OK) {
		fprintf(stderr, "no temporary directory\n");
		return 1;
	}
	bq_cluster_config cfg = {
	    .pods = pods,
	    .entries = entries,
	    .http_threads = 2,
	    .trace = KVI_DATA_DIR "/traces/conversation_trace.jsonl",
	    .block_size = 16,
	    .blocks_per_id = 1,
	    .fill_timeout_s = 300,
	};
	bq_cluster cl = {0};
	if (bq_cluster_start(&cfg, dir, &cl) != KVI_OK) {
		fprintf(stderr, "the cluster did not start or fill; see %s\n",
			dir);
		return 1;
	}
	pid_t pids[3];
	bq_cluster_pids(&cl, pids);
	/* prompts: pseudo-random tokens, a fixed seed */
	size_t n_tok = (size_t)blocks * 16;
	uint32_t *tok = kvi_calloc(n_tok, sizeof(*tok));
	char **bq[K_COUNT];
	for (int k = 0; k < K_COUNT; k++) {
		bq[k] = kvi_calloc((size_t)bodies, sizeof(char *));
	}
	for (int i = 0; i < bodies; i++) {
		for (size_t t = 0; t < n_tok; t++) {
			tok[t] = (uint32_t)((i * 2654435761u + t * 40503u) %
					    150000u);
		}
		int pod = i % pods, rank = (i / pods) % 2;
		for (int k = 0; k < K_COUNT; k++) {
			bq[k][i] = body(k, tok, n_tok, pod, rank);
		}
	}
	char url[K_COUNT][96];
	for (int k = 0; k < K_COUNT; k++) {
		snprintf(url[k], sizeof(url[k]), "http://127.0.0.1:%d/%s",
			 cl.port, k == K_ROUTED ? "routed" : "query");
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURL *h = curl_easy_init();
	buf ans = {0};
	tally t[K_COUNT] = {{0}};
	size_t failed = 0;
	/* the shards' CPU over a wait like the rounds' own, with nothing
	 * pending: what a wait costs without a sweep */
	const int wait_ms = 2500;
	uint64_t i0 = bq_cpu_ns(pids[1]) + bq_cpu_ns(pids[2]);
	kvt_sleep_ms(wait_ms);
	double idle_ns = (double)(bq_cpu_ns(pids[1]) + bq_cpu_ns(pids[2]) - i0);
	double wait_ns = 0;
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < K_COUNT; k++) {
			uint64_t c0 = bq_cpu_ns(pids[0]);
			uint64_t s0 = bq_cpu_ns(pids[1]) + bq_cpu_ns(pids[2]);
			uint64_t w0 = kvi_now_us();
			for (int i = 0; i < bodies; i++) {
				long st = post(h, url[k], bq[k][i], &ans);
				t[k].failed +=
				    st != (k == K_ROUTED ? 202 : 200);
			}
			t[k].wall_us += (double)(kvi_now_us() - w0);
			t[k].coord_ns += (double)(bq_cpu_ns(pids[0]) - c0);
			t[k].shard_ns += (double)(bq_cpu_ns(pids[1]) +
						  bq_cpu_ns(pids[2]) - s0);
			t[k].n += (size_t)bodies;
		}
		/* the routed entries (2 s to live) expire and are swept
		 * before the next round's query+p0: that sweep is part of
		 * what /routed costs */
		uint64_t s0 = bq_cpu_ns(pids[1]) + bq_cpu_ns(pids[2]);
		kvt_sleep_ms(wait_ms);
		wait_ns +=
		    (double)(bq_cpu_ns(pids[1]) + bq_cpu_ns(pids[2]) - s0);
	}
	printf("bench_routed: %d pods x DP 2, %.0f entries, %d prompts of %d "
	       "blocks, %d rounds, one client\n\n",
	       pods, cl.entries, bodies, blocks, rounds);
	printf("%-9s %10s %10s %10s %8s %8s %8s %7s\n", "request", "coord us",
	       "shards us", "wall us", "coord x", "shards x", "wall x",
	       "failed");
	for (int k = 0; k < K_COUNT; k++) {
		double n = (double)t[k].n, bn = (double)t[K_QUERY].n;
		double cu = t[k].coord_ns / n / 1e3,
		       su = t[k].shard_ns / n / 1e3;
		double wu = t[k].wall_us / n;
		double cb = t[K_QUERY].coord_ns / bn / 1e3;
		double sb = t[K_QUERY].shard_ns / bn / 1e3;
		double wb = t[K_QUERY].wall_us / bn;
		printf("%-9s %10.1f %10.1f %10.1f %8.2f %8.2f %8.2f %7zu\n",
		       kind_names[k], cu, su, wu, cb > 0 ? cu / cb : 0,
		       sb > 0 ? su / sb : 0, wu / wb, t[k].failed);
		failed += t[k].failed;
	}
	/* the sweep's share of each routed request: the waits' CPU beyond
	 * an idle wait's */
	double routed_n = (double)t[K_ROUTED].n;
	double sweep_us =
	    (wait_ns - idle_ns * rounds) / (routed_n > 0 ? routed_n : 1) / 1e3;
	double q_us = (t[K_QUERY].coord_ns + t[K_QUERY].shard_ns) /
		      (double)t[K_QUERY].n / 1e3;
	double r_us = (t[K_ROUTED].coord_ns + t[K_ROUTED].shard_ns) /
		      (routed_n > 0 ? routed_n : 1) / 1e3;
	double p_us = (t[K_QUERY_P].coord_ns + t[K_QUERY_P].shard_ns) /
		      (double)t[K_QUERY_P].n / 1e3;
	printf("\nthe shards' sweep of the routed entries once expired: %.1f "
	       "us per routed request\n",
	       sweep_us);
	printf("CPU in all, against query: routed %.2fx (%.2fx with its "
	       "sweep), query+p %.2fx\n",
	       q_us > 0 ? r_us / q_us : 0,
	       q_us > 0 ? (r_us + sweep_us) / q_us : 0,
	       q_us > 0 ? p_us / q_us : 0);
	printf("\n(CPU time is read in clock ticks: a run of fewer than a few "
	       "hundred requests per kind measures little)\n");
	curl_easy_cleanup(h);
	kvi_free(ans.p);
	for (int k = 0; k < K_COUNT; k++) {
		for (int i = 0; i < bodies; i++) {
			kvi_free(bq[k][i]);
		}
		kvi_free(bq[k]);
	}
	kvi_free(tok);
	bq_cluster_stop(&cl);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
	return failed > 0 ? 1 : 0;
}
