/*
 * bench_routing - the KV ladder: what a router gains from kvindex,
 * measured as the engines' own prefix-cache hit ratio.
 *
 * For every policy, workload and number of router clients it starts a
 * fresh simulated fleet (kvindex-sim in timed mode: 4 pods x DP 2, each
 * rank an LRU prefix cache of --cache-blocks blocks of 16 tokens that
 * computes --prefill-rate tokens/s, one FIFO queue per rank) and a fresh
 * kvindex cluster (coordinator + 2 shards, the simulator's layout file as
 * the coordinator's discovery file), then replays the workload: router
 * client threads (libcurl) pick a rank for each request and send it with
 * the simulator's POST /prefill, which answers when the prefill ends with
 * the engine's hit. The policies, from blind to all-knowing:
 *
 *   random        a random rank;
 *   round-robin   the next rank in turn;
 *   blind         kvindex's exact matches, but only rank 0 of each pod
 *                 (a router that sees one listener per pod);
 *   exact         POST /query {"pending": false}: the rank with the most
 *                 matched tokens;
 *   +pending      POST /query with pending entries: matched + pending
 *                 tokens, then POST /routed for the chosen rank before
 *                 the request goes ("n/a" when the coordinator answers
 *                 404 for /routed); the router takes its decisions one
 *                 at a time, each made known before the next, as the
 *                 oracle's are;
 *   +pending, racing  the same, each client deciding on its own, as
 *                 independent routers (or router replicas) would: two
 *                 requests of a new prefix that arrive together both
 *                 see nothing pending;
 *   oracle        the router's own exact copy of every rank's cache
 *                 (sim_cache.h, the simulator's model, same capacity), to
 *                 which it applies each request as it routes it;
 *   bound         offline: one cache of unlimited size serving every
 *                 request in order (vLLM's cap: at most prompt - 1
 *                 tokens, in whole blocks).
 *
 * Every policy scores a rank as predicted hit tokens minus --penalty
 * tokens per request the router has outstanding on it (random and
 * round-robin predict nothing: with a penalty they pick among the least
 * loaded ranks), so that no policy wins by piling requests on one rank.
 * The default, 512 tokens (32 blocks), is the best of 0, 512, 2048 and
 * 8192 tried on the arXiv trace and the bursts with 8 clients: with 0
 * the oracle piles the trace's requests on a few ranks (imbalance 7, p90
 * time to first token 4x random's); from 2048 on, one outstanding
 * request outweighs a whole shared burst prefix (48-96 blocks) and every
 * policy spreads the bursts like random does; 512 keeps the trace's p90
 * at random's while the oracle stays within a few points of the bound.
 *
 * Workloads: the first requests of the Mooncake conversation and arXiv
 * traces (a hash id is 512 tokens), prompts capped at --max-prompt
 * tokens (16384: half a rank's cache; the longest prompts, up to 126k
 * tokens, would hold a rank for seconds and fit no cache), the
 * conversation trace thinned to every turn of 1 conversation in
 * --sample (16: its follow-up turns come minutes apart, hundreds of
 * requests later in the whole trace, so its first 200 requests reuse
 * little: an unlimited cache hits 9% of them, 28% of the thinned
 * trace's), their timestamps compressed so that they arrive at --rate
 * requests/s on average (bursts and lulls kept); and bursts of 6 prompts
 * sharing a 48-96 block prefix (fresh in 70% of the bursts, else one of
 * the last 16) with unique 1-4 block suffixes, a burst every --burst-gap
 * ms. One client sends one request at a time (the schedule cannot be
 * kept: it runs a quarter of the requests); more clients keep it.
 *
 * Queries name the model as "model_name" (what /query reads today).
 *
 * Per workload it prints a table: hit ratio (the replies' hit tokens over
 * their prompt tokens) and its ratio to the oracle's, uncached tokens
 * computed, time to first token p50/p90 (queue_ms + prefill_ms of the
 * replies, simulated ms), prediction accuracy (share of requests whose
 * predicted hit on the chosen rank is within one block of the engine's
 * hit_blocks) with the mean over- and under-report in blocks, and load
 * imbalance (the busiest rank's uncached tokens over the mean). It checks
 * that the simulator answered and counted every request, that the bound
 * is above every policy, that the oracle predicts at least half the hits
 * within a block and, on the bursts, is at or above random, and exits 1
 * otherwise. With --plot FILE.png it writes FILE.gp and, if gnuplot is on
 * the PATH, FILE.png: hit ratio per policy per workload.
 *
 *   bench_routing [--quick] [--workloads conversation,arxiv,bursts]
 *                 [--clients 1,8,32] [--policies
 * random,rr,blind,exact,pending-racing, pending,oracle] [--penalty TOKENS]
 * [--requests N]
 *                 [--burst-requests N] [--rate R] [--burst-gap MS]
 *                 [--max-prompt TOKENS] [--cache-blocks N]
 *                 [--prefill-rate T] [--seed N] [--sample K]
 *                 [--plot FILE.png]
 *
 * A default run takes about 6 minutes on 2 cores; --quick (the ctest
 * smoke) runs the bursts and a few arXiv requests with 8 clients.
 */
#include <curl/curl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_query_proc.h"
#include "bench_routing.h"
#include "kvitest.h"

#define MAX_CLIENT_SETS 8
#define N_WORKLOADS     3

static const char *const short_names[BR_N_POLICIES] = {
    "random", "rr", "blind", "exact", "pending-racing", "pending", "oracle",
};

typedef struct opts {
	bool quick;
	bool workload[N_WORKLOADS]; /* conversation, arxiv, bursts */
	bool policy[BR_N_POLICIES];
	int clients[MAX_CLIENT_SETS], n_clients;
	double penalty;
	size_t requests, burst_requests;
	double rate, burst_gap;
	uint32_t max_prompt, cache_blocks;
	double prefill_rate;
	uint64_t seed;
	unsigned sample; /* conversation trace: 1 conversation in N */
	const char *plot;
} opts;

static const char *const workload_names[N_WORKLOADS] = {"conversation", "arxiv",
							"bursts"};

/* One table's cells: [clients set][policy], and the bound per set. */
typedef struct table {
	br_workload w;
	br_result res[MAX_CLIENT_SETS][BR_N_POLICIES];
	bool ran[MAX_CLIENT_SETS][BR_N_POLICIES];
	double bound[MAX_CLIENT_SETS];
	size_t n[MAX_CLIENT_SETS];
	bool loaded;
} table;

static int failures;

static void
check(bool ok, const char *what, const char *workload, int clients)
{
	if (!ok) {
		printf("CHECK FAILED: %s (%s, %d clients)\n", what, workload,
		       clients);
		failures++;
	}
}

static bool
parse_list(const char *arg, const char *const *names, int n, bool *on)
{
	memset(on, 0, (size_t)n * sizeof(bool));
	char *copy = strdup(arg), *save = NULL;
	bool ok = true;
	for (char *t = strtok_r(copy, ",", &save); t != NULL;
	     t = strtok_r(NULL, ",", &save)) {
		int i = 0;
		while (i < n && strcmp(t, names[i]) != 0) {
			i++;
		}
		ok = ok && i < n;
		if (i < n) {
			on[i] = true;
		}
	}
	free(copy);
	return ok;
}

static bool
parse_clients(const char *arg, opts *o)
{
	o->n_clients = 0;
	char *copy = strdup(arg), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save);
	     t != NULL && o->n_clients < MAX_CLIENT_SETS;
	     t = strtok_r(NULL, ",", &save)) {
		o->clients[o->n_clients++] = atoi(t);
	}
	free(copy);
	for (int i = 0; i < o->n_clients; i++) {
		if (o->clients[i] < 1 || o->clients[i] > 256) {
			return false;
		}
	}
	return o->n_clients > 0;
}

static void
usage(void)
{
	fprintf(stderr,
		"usage: bench_routing [--quick] [--workloads "
		"conversation,arxiv,bursts] [--clients 1,8,32] [--policies "
		"random,rr,blind,exact,pending,oracle] [--penalty TOKENS] "
		"[--requests N] [--burst-requests N] [--rate R] "
		"[--burst-gap MS] [--max-prompt TOKENS] [--cache-blocks N] "
		"[--prefill-rate T] [--seed N] [--sample K] "
		"[--plot FILE.png]\n");
}

static bool
load(table *t, int which, const opts *o)
{
	static const char *const files[2] = {
	    KVI_DATA_DIR "/traces/conversation_trace.jsonl",
	    KVI_DATA_DIR "/traces/mooncake_arxiv_trace_1000.jsonl"};
	if (which < 2) {
		return br_load_trace(&t->w, workload_names[which], files[which],
				     o->requests, o->max_prompt, o->rate,
				     which == 0 ? o->sample : 1);
	}
	br_make_bursts(&t->w, o->burst_requests, o->burst_gap, o->seed);
	return true;
}

/* run_table runs every policy and clients set on workload t->w. */
static void
run_table(table *t, const opts *o, const char *dir)
{
	size_t full = t->w.n;
	for (int s = 0; s < o->n_clients; s++) {
		/* one client sends one request at a time: a quarter of them
		 * keeps its run as long as the others' */
		size_t n = o->clients[s] == 1 ? (full + 3) / 4 : full;
		br_workload w = br_workload_head(&t->w, n);
		t->n[s] = n;
		t->bound[s] = br_bound(&w);
		for (int p = 0; p < BR_N_POLICIES; p++) {
			if (!o->policy[p]) {
				continue;
			}
			br_run_config cfg = {
			    .sim_bin = KVI_SIM_BIN,
			    .shard_bin = KVI_SHARD_BIN,
			    .coord_bin = KVI_COORD_BIN,
			    .policy = (br_policy)p,
			    .clients = o->clients[s],
			    .penalty = o->penalty,
			    .cache_blocks = o->cache_blocks,
			    .prefill_rate = o->prefill_rate,
			    .seed = o->seed + (uint64_t)p,
			};
			br_result *r = &t->res[s][p];
			br_run(&cfg, &w, dir, r);
			t->ran[s][p] = true;
			fprintf(stderr,
				"  %s, %s, %d clients: %s %.1f%% in %.1f s\n",
				t->w.name, br_policy_names[p], o->clients[s],
				r->unavailable ? "n/a"
				: r->failed    ? "FAILED"
					       : "hit",
				r->hit_ratio * 100, r->seconds);
		}
	}
}

static void
print_table(const table *t, const opts *o)
{
	printf("\n== %s: %zu requests", t->w.name, t->w.n);
	if (strcmp(t->w.name, "bursts") == 0) {
		printf(", bursts of 6 every %.0f ms (%.0f req/s)", o->burst_gap,
		       t->w.rate);
	} else {
		printf(", prompts capped at %u tokens, trace timestamps "
		       "compressed to %.0f req/s",
		       o->max_prompt, t->w.rate);
	}
	printf("; penalty %.0f tokens per outstanding request ==\n",
	       o->penalty);
	printf("%-17s %7s %5s %7s %7s %9s %8s %8s %8s %6s %6s %6s\n", "policy",
	       "clients", "reqs", "hit%", "/oracle", "uncached", "ttft50",
	       "ttft90", "pred ok", "over", "under", "imbal");
	for (int s = 0; s < o->n_clients; s++) {
		const br_result *orc = &t->res[s][BR_ORACLE];
		bool has_oracle =
		    t->ran[s][BR_ORACLE] && !orc->failed && orc->hit_ratio > 0;
		for (int p = 0; p < BR_N_POLICIES; p++) {
			const br_result *r = &t->res[s][p];
			if (!t->ran[s][p]) {
				continue;
			}
			printf("%-17s %7d %5zu ", br_policy_names[p],
			       o->clients[s], t->n[s]);
			if (r->unavailable || r->failed) {
				printf("%7s   (%s)\n", "n/a",
				       r->unavailable
					   ? "the coordinator has no /routed"
					   : "run failed");
				continue;
			}
			printf("%6.1f%% ", r->hit_ratio * 100);
			if (has_oracle) {
				printf("%7.2f ", r->hit_ratio / orc->hit_ratio);
			} else {
				printf("%7s ", "-");
			}
			printf("%8.2fM %8.0f %8.0f ", r->uncached / 1e6,
			       r->ttft_p50, r->ttft_p90);
			if (r->accuracy >= 0) {
				printf("%7.1f%% %6.1f %6.1f ",
				       r->accuracy * 100, r->over, r->under);
			} else {
				printf("%8s %6s %6s ", "-", "-", "-");
			}
			printf("%6.2f\n", r->imbalance);
		}
		printf("%-17s %7d %5zu %6.1f%% ", "bound (infinite)",
		       o->clients[s], t->n[s], t->bound[s] * 100);
		if (has_oracle) {
			printf("%7.2f\n", t->bound[s] / orc->hit_ratio);
		} else {
			printf("%7s\n", "-");
		}
	}
}

/* verify checks what must hold of every table. */
static void
verify(const table *t, const opts *o)
{
	for (int s = 0; s < o->n_clients; s++) {
		int c = o->clients[s];
		for (int p = 0; p < BR_N_POLICIES; p++) {
			const br_result *r = &t->res[s][p];
			if (!t->ran[s][p] || r->unavailable) {
				continue;
			}
			char what[160];
			snprintf(what, sizeof(what),
				 "%s: every request answered (%zu of %zu) "
				 "and counted by the simulator (%.0f)",
				 br_policy_names[p], r->answered, r->sent,
				 r->sim_requests);
			check(!r->failed && r->answered == r->sent &&
				  r->sim_requests == (double)r->sent,
			      what, t->w.name, c);
			snprintf(what, sizeof(what),
				 "%s: hit tokens <= prompt tokens",
				 br_policy_names[p]);
			check(r->max_hit_over_prompt <= 1.0, what, t->w.name,
			      c);
			snprintf(what, sizeof(what),
				 "the bound (%.4f) >= %s (%.4f)", t->bound[s],
				 br_policy_names[p], r->hit_ratio);
			check(t->bound[s] + 1e-9 >= r->hit_ratio, what,
			      t->w.name, c);
		}
		const br_result *orc = &t->res[s][BR_ORACLE],
				*rnd = &t->res[s][BR_RANDOM];
		/* on the bursts only: the oracle is greedy, and on a trace
		 * with one client (nothing outstanding, so no load term) it
		 * can pile every request sharing a system prompt on one
		 * rank and lose to random */
		if (t->ran[s][BR_ORACLE] && t->ran[s][BR_RANDOM] &&
		    strcmp(t->w.name, "bursts") == 0) {
			check(orc->hit_ratio >= rnd->hit_ratio,
			      "oracle >= random", t->w.name, c);
		}
		if (t->ran[s][BR_ORACLE]) {
			check(orc->accuracy >= 0.5,
			      "the oracle's model predicts at least half the "
			      "hits within a block",
			      t->w.name, c);
		}
	}
}

/* write_plot writes plot's gnuplot script (plot with ".gp" for its
 * ".png") and runs gnuplot when it is installed: per clients set, bars
 * of each policy's hit ratio per workload. */
static void
write_plot(const table *tables, const opts *o)
{
	size_t len = strlen(o->plot);
	char *gp = kvi_malloc(len + 4);
	memcpy(gp, o->plot, len + 1);
	if (len > 4 && strcmp(gp + len - 4, ".png") == 0) {
		gp[len - 4] = '\0';
	}
	strcat(gp, ".gp");
	FILE *fp = fopen(gp, "w");
	if (fp == NULL) {
		perror(gp);
		kvi_free(gp);
		return;
	}
	fprintf(fp,
		"set terminal pngcairo size %d,460 noenhanced\n"
		"set output '%s'\n"
		"set style data histograms\n"
		"set style histogram clustered gap 1\n"
		"set style fill solid 0.85 border -1\n"
		"set yrange [0:100]\n"
		"set ylabel 'engine prefix-cache hit ratio (%%)'\n"
		"set grid ytics\n"
		"set key top left font ',8'\n"
		"set multiplot layout 1,%d title 'bench_routing: hit ratio "
		"per policy (4 pods x DP 2, %u blocks a rank, penalty %.0f)'\n",
		420 * o->n_clients, o->plot, o->n_clients, o->cache_blocks,
		o->penalty);
	for (int s = 0; s < o->n_clients; s++) {
		/* gnuplot refuses a column without a value: a policy that
		 * did not run (or is n/a) gets none */
		bool col[BR_N_POLICIES] = {false};
		int n_cols = 0;
		for (int p = 0; p < BR_N_POLICIES; p++) {
			for (int w = 0; w < N_WORKLOADS; w++) {
				const br_result *r = &tables[w].res[s][p];
				col[p] =
				    col[p] ||
				    (tables[w].loaded && tables[w].ran[s][p] &&
				     !r->unavailable && !r->failed);
			}
			n_cols += col[p];
		}
		fprintf(fp, "$d%d << EOD\nworkload", s);
		for (int p = 0; p < BR_N_POLICIES; p++) {
			if (col[p]) {
				fprintf(fp, " %s", short_names[p]);
			}
		}
		fprintf(fp, " bound\n");
		for (int w = 0; w < N_WORKLOADS; w++) {
			const table *t = &tables[w];
			if (!t->loaded) {
				continue;
			}
			fprintf(fp, "%s", t->w.name);
			for (int p = 0; p < BR_N_POLICIES; p++) {
				const br_result *r = &t->res[s][p];
				if (!col[p]) {
					continue;
				}
				if (t->ran[s][p] && !r->unavailable &&
				    !r->failed) {
					fprintf(fp, " %.2f",
						r->hit_ratio * 100);
				} else {
					fprintf(fp, " NaN");
				}
			}
			fprintf(fp, " %.2f\n", t->bound[s] * 100);
		}
		fprintf(fp, "EOD\n");
		fprintf(fp, "set title '%d router client%s'\n", o->clients[s],
			o->clients[s] > 1 ? "s" : "");
		fprintf(fp, "plot $d%d using 2:xtic(1) title columnhead", s);
		for (int c = 3; c <= n_cols + 2; c++) {
			fprintf(fp, ", '' using %d title columnhead", c);
		}
		fprintf(fp, "\n");
	}
	fprintf(fp, "unset multiplot\n");
	fclose(fp);
	char *gnuplot = bq_which("gnuplot");
	if (gnuplot == NULL) {
		printf("\nplot: %s written; gnuplot is not installed "
		       "(apt-get install gnuplot-nox, then: gnuplot %s)\n",
		       gp, gp);
	} else {
		char cmd[1200];
		snprintf(cmd, sizeof(cmd), "'%s' '%s'", gnuplot, gp);
		int rc = system(cmd);
		printf("\nplot: %s (script %s)%s\n", o->plot, gp,
		       rc == 0 ? "" : ": gnuplot FAILED");
	}
	kvi_free(gnuplot);
	kvi_free(gp);
}

int
main(int argc, char **argv)
{
	opts o = {
	    .workload = {true, true, true},
	    .clients = {1, 8, 32},
	    .n_clients = 3,
	    .penalty = 512,
	    .requests = 200,
	    .burst_requests = 600,
	    .rate = 24,
	    .burst_gap = 40,
	    .max_prompt = 16384,
	    .cache_blocks = 2048,
	    .prefill_rate = 40000,
	    .seed = 1,
	    .sample = 16,
	};
	for (int p = 0; p < BR_N_POLICIES; p++) {
		o.policy[p] = true; /* every policy unless --policies */
	}
	bool set_requests = false;
	static const struct option lopts[] = {
	    {"quick", no_argument, NULL, 'q'},
	    {"workloads", required_argument, NULL, 'w'},
	    {"clients", required_argument, NULL, 'c'},
	    {"policies", required_argument, NULL, 'p'},
	    {"penalty", required_argument, NULL, 'P'},
	    {"requests", required_argument, NULL, 'n'},
	    {"burst-requests", required_argument, NULL, 'b'},
	    {"rate", required_argument, NULL, 'r'},
	    {"burst-gap", required_argument, NULL, 'g'},
	    {"max-prompt", required_argument, NULL, 'm'},
	    {"cache-blocks", required_argument, NULL, 'C'},
	    {"prefill-rate", required_argument, NULL, 'R'},
	    {"seed", required_argument, NULL, 's'},
	    {"sample", required_argument, NULL, 'S'},
	    {"plot", required_argument, NULL, 'o'},
	    {NULL, 0, NULL, 0},
	};
	for (int c; (c = getopt_long(argc, argv, "", lopts, NULL)) != -1;) {
		bool ok = true;
		switch (c) {
		case 'q':
			o.quick = true;
			break;
		case 'w':
			ok = parse_list(optarg, workload_names, N_WORKLOADS,
					o.workload);
			break;
		case 'c':
			ok = parse_clients(optarg, &o);
			break;
		case 'p':
			ok = parse_list(optarg, short_names, BR_N_POLICIES,
					o.policy);
			break;
		case 'P':
			o.penalty = atof(optarg);
			break;
		case 'n':
			o.requests = (size_t)atol(optarg);
			set_requests = true;
			break;
		case 'b':
			o.burst_requests = (size_t)atol(optarg);
			break;
		case 'r':
			o.rate = atof(optarg);
			break;
		case 'g':
			o.burst_gap = atof(optarg);
			break;
		case 'm':
			o.max_prompt = (uint32_t)atol(optarg);
			break;
		case 'C':
			o.cache_blocks = (uint32_t)atol(optarg);
			break;
		case 'R':
			o.prefill_rate = atof(optarg);
			break;
		case 's':
			o.seed = (uint64_t)atoll(optarg);
			break;
		case 'S':
			o.sample = (unsigned)atoi(optarg);
			break;
		case 'o':
			o.plot = optarg;
			break;
		default:
			ok = false;
		}
		if (!ok) {
			usage();
			return 2;
		}
	}
	if (o.quick) {
		/* the smoke test: a few seconds of each kind of load */
		o.workload[0] = false;
		o.n_clients = 1;
		o.clients[0] = 8;
		o.requests = set_requests ? o.requests : 24;
		o.burst_requests = 90;
	}
	if (o.requests < 2 || o.burst_requests < 6 || o.rate <= 0 ||
	    o.burst_gap <= 0 || o.max_prompt < BR_BS || o.cache_blocks < 64 ||
	    o.prefill_rate <= 0 || o.penalty < 0) {
		usage();
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	char *dir;
	if (kvt_tmpdir_make("kvi-routing", &dir) != KVI_OK) {
		return 1;
	}
	int64_t t0 = kvt_now_ms();
	table *tables = kvi_calloc(N_WORKLOADS, sizeof(table));
	for (int w = 0; w < N_WORKLOADS; w++) {
		if (!o.workload[w]) {
			continue;
		}
		if (!load(&tables[w], w, &o)) {
			fprintf(stderr,
				"bench_routing: cannot read the %s "
				"trace\n",
				workload_names[w]);
			return 1;
		}
		tables[w].loaded = true;
		run_table(&tables[w], &o, dir);
	}
	printf("bench_routing: %d pods x DP %d, %u blocks of %d tokens a "
	       "rank, %.0f tokens/s a rank; kvindex = coordinator + 2 shards; "
	       "/routed %s\n",
	       BR_PODS, BR_DP, o.cache_blocks, BR_BS, o.prefill_rate,
	       br_routed_known == 1   ? "available"
	       : br_routed_known == 0 ? "absent (404): +pending is n/a"
				      : "not probed");
	for (int w = 0; w < N_WORKLOADS; w++) {
		if (tables[w].loaded) {
			print_table(&tables[w], &o);
			verify(&tables[w], &o);
		}
	}
	printf("\nran in %.0f s; %d check%s failed\n",
	       (double)(kvt_now_ms() - t0) / 1e3, failures,
	       failures == 1 ? "" : "s");
	if (o.plot != NULL) {
		write_plot(tables, &o);
	}
	for (int w = 0; w < N_WORKLOADS; w++) {
		br_workload_free(&tables[w].w);
	}
	kvi_free(tables);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
	curl_global_cleanup();
	return failures > 0 ? 1 : 0;
}
