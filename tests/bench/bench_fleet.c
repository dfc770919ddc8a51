/*
 * bench_fleet - onboarding a fleet: N pods of DP=2 registered through
 * POST /register (or, with --source file, appearing at once in the
 * discovery file; with --source kube, created in a Kubernetes API server
 * the coordinator watches) against a real coordinator and two real shards,
 * whose engines are not there (nothing listens on their ports), as an operator
 * bringing up a large fleet would see it.
 *
 * It prints, for every tenth of the pods, the registration rate and the
 * latency of one registration (p50, p99) in that tenth - whether one
 * registration costs more as the fleet grows - then the time until every
 * listener is assigned, each shard's resident memory and descriptors per
 * listener (after minus before, over the listeners it owns), the CPU the
 * three processes spend per second once idle (ZeroMQ reconnecting to the
 * absent engines), and GET /workers' time and size, whole and one page.
 * It also measures what a query costs at two fleet sizes in the one run:
 * the first tenth of the pods is registered before the others, and
 * 100-block /query requests of the fleet's model (each on a new
 * connection) are timed then and again once the whole fleet is in -
 * whether the fan-out and merge grow with the listeners registered rather
 * than with those that match. One prompt matches no listener (no engine
 * is there); the other matches 8: beside the fleet, from the start, run 4
 * simulated engines of DP 2 (kvindex-sim), each rank of which holds it. Last,
 * the coordinator is restarted on its store: the time until it serves, and
 * until it has every pod and every listener owned again, with the assign
 * calls the shards saw meanwhile (0: it adopted what they hold). With --plot
 * FILE it also writes the rate per tenth as a gnuplot script (run it with
 * gnuplot to get FILE.png).
 *
 *   bench_fleet [--pods N] [--clients C] [--sync] [--idle-wait S]
 *               [--reconnect-max-ms MS] [--plot FILE]
 *               [--source register|file|kube]
 *
 * --source file writes the first tenth of the pods to the coordinator's
 * discovery file, then the whole fleet at once, and times the second
 * write (a rename) to every listener assigned; there is no rate per tenth
 * then, nor a plot. --source kube does the same through a test Kubernetes
 * API server (tests/kubeapi): the first tenth is created before the rest,
 * which is then created one PUT after another as fast as the server takes
 * them, and the time is from the first of those PUTs; the coordinator
 * lists the pods at its restart.
 *
 * --clients C registers from C threads at once (default 4); --sync runs
 * the shards with fsync'd commits (default --no-sync); idle CPU is
 * measured S seconds after the last registration (default 10: the
 * reconnect back-off takes that long to reach its ceiling);
 * --reconnect-max-ms is passed to the shards.
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "bench_fleet_kube.h"
#include "bench_query_proc.h"
#include "kvitest.h"

#define TENTHS 10
/* Simulated engines beside the fleet: 4 pods of DP 2 whose 8 ranks all
 * hold one 100-block prompt (tokens from MATCH_BASE on), for queries that
 * match 8 listeners; the fleet's queries (tokens from NONE_BASE) match
 * none. */
#define SIM_PODS   4
#define SIM_RANKS  (2 * SIM_PODS)
#define MATCH_BASE 500000
#define NONE_BASE  1000
#define PROMPT     1600 /* tokens: 100 blocks of 16 */

typedef struct fleet {
	int pods, clients;
	bool sync;
	int idle_wait;
	const char *reconnect_max;
	const char *plot;
	const char *file; /* --source file: the discovery file */
	kvt_sim sim;      /* the simulated engines */
	int extra_pods;   /* pods beside the fleet's: the simulator's */
	char base[64];
	_Atomic int next;
	double *took;    /* seconds each registration took, by pod */
	double *done_at; /* when it was answered, from t0 */
	_Atomic int failed;
	double t0;
	int first; /* pods registered before the clients start */
} fleet;

static double
now_s(void)
{
	return (double)kvt_now_ms() / 1000.0;
}

static bool register_one(fleet *f, int p);

static void *
client_main(void *arg)
{
	fleet *f = arg;
	for (int p; (p = atomic_fetch_add(&f->next, 1)) < f->pods;) {
		double t = now_s();
		bool ok = register_one(f, p);
		f->took[p] = now_s() - t;
		f->done_at[p] = now_s() - f->t0;
		if (!ok) {
			atomic_fetch_add(&f->failed, 1);
		}
	}
	return NULL;
}

/* register_one posts pod p's registration; true when it was taken. */
static bool
register_one(fleet *f, int p)
{
	char url[96], body[512];
	snprintf(url, sizeof(url), "%s/register", f->base);
	/* nothing listens on these ports: engines not there yet */
	snprintf(body, sizeof(body),
		 "{\"name\": \"fleet/pod-%d\", \"ip\": \"127.0.0.%d\","
		 " \"zmq_port\": %d, \"dp_size\": 2,"
		 " \"model_name\": \"m\", \"block_size\": 16}",
		 p, 2 + p % 200, 20000 + (p / 200) * 2);
	kvt_http_resp r;
	kvi_err rv = kvt_http_post(url, body, 30000, &r);
	bool ok = rv == KVI_OK && (r.status == 201 || r.status == 202);
	kvt_http_resp_fini(&r);
	return ok;
}

static int cmp_double(const void *a, const void *b);
static double metric(const char *base, const char *name);

/* write_pods writes pods [0, n) - the pods register_one registers - to
 * the discovery file, by rename, so the watcher never reads half. */
static bool
write_pods(const fleet *f, int n)
{
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s.tmp", f->file);
	FILE *fp = fopen(tmp, "w");
	if (fp == NULL) {
		return false;
	}
	fprintf(fp, "{\"pods\":[");
	for (int p = 0; p < n; p++) {
		fprintf(fp,
			"%s{\"name\":\"fleet/pod-%d\",\"ip\":\"127.0.0.%d\","
			"\"zmq_port\":%d,\"dp_size\":2,\"model\":\"m\","
			"\"block_size\":16}",
			p ? "," : "", p, 2 + p % 200, 20000 + (p / 200) * 2);
	}
	fprintf(fp, "]}\n");
	return fclose(fp) == 0 && rename(tmp, f->file) == 0;
}

/* wait_assigned waits (a minute at most) until the coordinator has n of
 * the fleet's pods (and the simulator's) and every listener assigned; the
 * seconds it took, or -1. */
static double
wait_assigned(const fleet *f, int n)
{
	double t0 = now_s();
	for (double until = t0 + 60; now_s() < until;) {
		if (metric(f->base, "kvindex_coord_instances") ==
			n + f->extra_pods &&
		    metric(f->base, "kvindex_coord_listeners_unassigned") ==
			0) {
			return now_s() - t0;
		}
		kvt_sleep_ms(20);
	}
	return -1;
}

/* prompt_json writes PROMPT tokens from base on, as a JSON array. */
static json_t *
prompt_json(int base)
{
	json_t *a = json_array();
	for (int t = 0; t < PROMPT; t++) {
		json_array_append_new(a, json_integer(base + t));
	}
	return a;
}

/* query_body returns a /query body for the prompt from base on. */
static char *
query_body(int base)
{
	json_t *q = json_pack("{s:s,s:o}", "model_name", "m", "token_ids",
			      prompt_json(base));
	char *text = json_dumps(q, JSON_COMPACT);
	json_decref(q);
	return text;
}

/* matches returns how many listeners the /query answer in body names. */
static size_t
matches(const char *body)
{
	json_t *a = json_loads(body, 0, NULL);
	size_t n = json_array_size(json_object_get(a, "workers"));
	json_decref(a);
	return n;
}

/* query_cost times QUERIES 100-block queries of model m for the prompt
 * from base on, one after the other, into p50 and p99 (ms); false when
 * one failed or an answer did not name `want` listeners. */
#define QUERIES 500
static bool
query_cost(const fleet *f, int base, size_t want, double *p50, double *p99)
{
	char url[96];
	snprintf(url, sizeof(url), "%s/query", f->base);
	char *body = query_body(base);
	double lat[QUERIES];
	bool ok = true;
	for (int q = 0; q < QUERIES && ok; q++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		kvt_http_resp r;
		ok = kvt_http_post(url, body, 10000, &r) == KVI_OK &&
		     r.status == 200 && (q > 0 || matches(r.body) == want);
		clock_gettime(CLOCK_MONOTONIC, &b);
		lat[q] = (double)(b.tv_sec - a.tv_sec) * 1e3 +
			 (double)(b.tv_nsec - a.tv_nsec) / 1e6;
		kvt_http_resp_fini(&r);
	}
	free(body);
	qsort(lat, QUERIES, sizeof(double), cmp_double);
	*p50 = lat[QUERIES / 2];
	*p99 = lat[QUERIES * 99 / 100];
	return ok;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* proc_cpu_s returns the CPU seconds pid has used. */
static double
proc_cpu_s(pid_t pid)
{
	return (double)bq_cpu_ns(pid) / 1e9;
}

/* metric reads one unlabelled sample of the coordinator's /metrics (-1:
 * absent). */
static double
metric(const char *base, const char *name)
{
	char url[128];
	snprintf(url, sizeof(url), "%s/metrics", base);
	return kvt_http_metric(url, name);
}

/* shard_sum reads a shard's /metrics once and sums the samples that
 * start with prefix (0 when it cannot be read). */
static double
shard_sum(const char *metrics_addr, const char *prefix)
{
	char url[128];
	snprintf(url, sizeof(url), "http://%s/metrics", metrics_addr);
	double v = kvt_http_metric_sum(url, prefix);
	return v > 0 ? v : 0;
}

/* shard_listeners reads a shard's listeners, in every state. */
static double
shard_listeners(const char *metrics_addr)
{
	return shard_sum(metrics_addr, "kvindex_shard_listeners{state=");
}

static void
timed_get(const char *base, const char *path, double *secs, size_t *bytes)
{
	char url[256];
	snprintf(url, sizeof(url), "%s%s", base, path);
	double t = now_s();
	kvt_http_resp r;
	kvi_err rv = kvt_http_get(url, 60000, &r);
	*secs = now_s() - t;
	*bytes = rv == KVI_OK && r.body != NULL ? strlen(r.body) : 0;
	kvt_http_resp_fini(&r);
}

static void
write_plot(const fleet *f, const double *rate, const int *upto)
{
	FILE *fp = fopen(f->plot, "w");
	if (fp == NULL) {
		perror(f->plot);
		return;
	}
	fprintf(fp,
		"set terminal png size 800,480\n"
		"set output '%s.png'\n"
		"set title 'Registration rate against pods registered'\n"
		"set xlabel 'pods registered (DP=2)'\n"
		"set ylabel 'registrations/s'\n"
		"set yrange [0:*]\n"
		"set key bottom right\n"
		"plot '-' with linespoints title 'POST /register, %d "
		"clients'\n",
		f->plot, f->clients);
	for (int t = 0; t < TENTHS; t++) {
		fprintf(fp, "%d %.1f\n", upto[t], rate[t]);
	}
	fprintf(fp, "e\n");
	fclose(fp);
}

/* sim_join starts the simulated engines, registers their pods and
 * prefills every rank with the prompt from MATCH_BASE on, and waits until
 * a query of it names all 8 listeners; false when that fails. */
static bool
sim_join(fleet *f)
{
	const char *extra[] = {"--pods", "4", "--dp", "2", "--paused", NULL};
	if (kvt_sim_start(KVI_SIM_BIN, extra, 30000, &f->sim) != KVI_OK) {
		return false;
	}
	char url[96];
	snprintf(url, sizeof(url), "%s/register", f->base);
	bool ok = true;
	for (int p = 0; p < SIM_PODS && ok; p++) {
		char body[512];
		int r0 = p * 2;
		snprintf(body, sizeof(body),
			 "{\"name\": \"sim/pod-%d\", \"ip\": \"127.0.0.1\", "
			 "\"zmq_port\": %d, \"replay_port\": %d, "
			 "\"recover_port\": %d, \"dp_size\": 2, "
			 "\"model_name\": \"m\", \"block_size\": 16}",
			 p, f->sim.zmq_port[r0], f->sim.replay_port[r0],
			 f->sim.recover_port[r0]);
		kvt_http_resp r;
		ok = kvt_http_post(url, body, 30000, &r) == KVI_OK &&
		     (r.status == 201 || r.status == 202);
		kvt_http_resp_fini(&r);
	}
	f->extra_pods = SIM_PODS;
	ok = ok && wait_assigned(f, 0) >= 0;
	for (int i = 0; i < SIM_RANKS && ok; i++) {
		json_t *b =
		    json_pack("{s:i,s:i,s:o}", "pod", i / 2, "rank", i % 2,
			      "token_ids", prompt_json(MATCH_BASE));
		kvt_http_resp r;
		ok = kvt_sim_call(&f->sim, "POST", "/prefill", b, &r) ==
			 KVI_OK &&
		     r.status == 200;
		kvt_http_resp_fini(&r);
		json_decref(b);
	}
	snprintf(url, sizeof(url), "%s/query", f->base);
	char *body = query_body(MATCH_BASE);
	size_t got = 0;
	for (double until = now_s() + 30; ok && now_s() < until;) {
		kvt_http_resp r;
		if (kvt_http_post(url, body, 10000, &r) == KVI_OK &&
		    r.status == 200) {
			got = matches(r.body);
		}
		kvt_http_resp_fini(&r);
		if (got == SIM_RANKS) {
			break;
		}
		kvt_sleep_ms(50);
	}
	free(body);
	return ok && got == SIM_RANKS;
}

/* register_fleet registers the pods after the first tenth from
 * f->clients threads, and prints the rate and latency per tenth (into
 * rate and upto, for the plot) and the time until all are assigned. */
static void
register_fleet(fleet *f, double *rate, int *upto)
{
	static const char tick_sum[] =
	    "kvindex_coord_tick_seconds_sum{kind=\"full\"}";
	static const char tick_n[] =
	    "kvindex_coord_tick_seconds_count{kind=\"full\"}";
	double sum0 = metric(f->base, tick_sum), n0 = metric(f->base, tick_n);
	atomic_store(&f->next, f->first);
	pthread_t th[64];
	f->t0 = now_s();
	for (int i = 0; i < f->clients; i++) {
		pthread_create(&th[i], NULL, client_main, f);
	}
	for (int i = 0; i < f->clients; i++) {
		pthread_join(th[i], NULL);
	}
	double answered = now_s() - f->t0;
	int rest = f->pods - f->first;
	/* every listener assigned, or how many are not after a minute */
	double assigned = -1, un = -1;
	for (double until = now_s() + 60; now_s() < until;) {
		un = metric(f->base, "kvindex_coord_listeners_unassigned");
		if (un == 0) {
			assigned = now_s() - f->t0;
			break;
		}
		kvt_sleep_ms(100);
	}

	printf("bench_fleet: %d pods x DP 2 = %d listeners, %d clients, "
	       "shards %s\n",
	       f->pods, 2 * f->pods, f->clients,
	       f->sync ? "fsync" : "--no-sync");
	printf("%-14s %12s %10s %10s\n", "pods", "registers/s", "p50 ms",
	       "p99 ms");
	/* pods are taken in order, so a tenth of the indexes is a tenth of
	 * the fleet as it grew; the first tenth went alone, one at a time,
	 * before the clock started, so the tenths are of the rest */
	for (int t = 0; t < TENTHS; t++) {
		int lo = f->first + rest * t / TENTHS;
		int hi = f->first + rest * (t + 1) / TENTHS;
		size_t n = (size_t)(hi - lo);
		double *lat = kvi_calloc(n, sizeof(double));
		double first = 1e18, last = 0;
		for (int p = lo; p < hi; p++) {
			lat[p - lo] = f->took[p];
			double start = f->done_at[p] - f->took[p];
			first = start < first ? start : first;
			last = f->done_at[p] > last ? f->done_at[p] : last;
		}
		qsort(lat, n, sizeof(double), cmp_double);
		rate[t] = (double)n / (last - first);
		upto[t] = hi;
		printf("%6d-%-7d %12.0f %10.1f %10.1f\n", lo, hi, rate[t],
		       lat[n / 2] * 1e3, lat[n * 99 / 100] * 1e3);
		kvi_free(lat);
	}
	printf("all answered in %.1f s (%.0f/s overall), %d not 201/202; ",
	       answered, rest / answered, atomic_load(&f->failed));
	if (assigned >= 0) {
		printf("all assigned after %.1f s\n", assigned);
	} else {
		printf("%.0f listeners still unassigned after a minute\n", un);
	}
	/* the coordinator's full ticks meanwhile: each walks every listener
	 * registered by then */
	double ticks = metric(f->base, tick_n) - n0;
	if (ticks > 0) {
		printf("coordinator: %.0f full ticks meanwhile, %.1f ms each "
		       "on average\n",
		       ticks, (metric(f->base, tick_sum) - sum0) / ticks * 1e3);
	}
}

int
main(int argc, char **argv)
{
	fleet f = {.pods = 2000, .clients = 4, .idle_wait = 10};
	enum { BY_REGISTER, BY_FILE, BY_KUBE } by = BY_REGISTER;
	static const struct option opts[] = {
	    {"pods", required_argument, NULL, 'p'},
	    {"clients", required_argument, NULL, 'c'},
	    {"sync", no_argument, NULL, 's'},
	    {"plot", required_argument, NULL, 'P'},
	    {"idle-wait", required_argument, NULL, 'i'},
	    {"reconnect-max-ms", required_argument, NULL, 'r'},
	    {"source", required_argument, NULL, 'S'},
	    {NULL, 0, NULL, 0},
	};
	for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (o) {
		case 'p':
			f.pods = atoi(optarg);
			break;
		case 'c':
			f.clients = atoi(optarg);
			break;
		case 's':
			f.sync = true;
			break;
		case 'P':
			f.plot = optarg;
			break;
		case 'i':
			f.idle_wait = atoi(optarg);
			break;
		case 'r':
			f.reconnect_max = optarg;
			break;
		case 'S':
			by = strcmp(optarg, "file") == 0   ? BY_FILE
			     : strcmp(optarg, "kube") == 0 ? BY_KUBE
							   : BY_REGISTER;
			if (by != BY_REGISTER ||
			    strcmp(optarg, "register") == 0) {
				break;
			}
			/* fall through */
		default:
			fprintf(stderr,
				"usage: bench_fleet [--pods N] [--clients C] "
				"[--sync] [--idle-wait S] [--reconnect-max-ms "
				"MS] [--plot FILE] [--source "
				"register|file|kube]\n");
			return 2;
		}
	}
	if (f.pods < TENTHS || f.clients < 1 || f.clients > 64) {
		fprintf(stderr, "bench_fleet: --pods >= 10, --clients 1..64\n");
		return 2;
	}
	char *dir;
	if (kvt_tmpdir_make("kvi-fleet", &dir) != KVI_OK) {
		return 1;
	}
	int base;
	kvt_ports_pick(5, &base);
	kvt_proc *shard[2], *coord;
	char shards[256] = "", metrics[2][32];
	for (int i = 0; i < 2; i++) {
		char id[16], listen[64], logn[32];
		snprintf(id, sizeof(id), "shard-%d", i);
		snprintf(listen, sizeof(listen), "tcp://127.0.0.1:%d",
			 base + i);
		snprintf(metrics[i], sizeof(metrics[i]), "127.0.0.1:%d",
			 base + 2 + i);
		snprintf(logn, sizeof(logn), "%s.log", id);
		char *data = kvt_path(dir, id), *log = kvt_path(dir, logn);
		const char *av[16] = {KVI_SHARD_BIN, "--id",      id,
				      "--listen",    listen,      "--data-dir",
				      data,          "--metrics", metrics[i],
				      "--log-level", "warn"};
		int ac = 11;
		if (!f.sync) {
			av[ac++] = "--no-sync";
		}
		if (f.reconnect_max != NULL) {
			av[ac++] = "--reconnect-max-ms";
			av[ac++] = f.reconnect_max;
		}
		av[ac] = NULL;
		if (kvt_proc_start(av, log, &shard[i]) != KVI_OK) {
			return 1;
		}
		size_t used = strlen(shards);
		snprintf(shards + used, sizeof(shards) - used, "%s%s=%s",
			 i ? "," : "", id, listen);
		kvi_free(data);
		kvi_free(log);
	}
	char http[32];
	snprintf(http, sizeof(http), "127.0.0.1:%d", base + 4);
	snprintf(f.base, sizeof(f.base), "http://%s", http);
	char *cdata = kvt_path(dir, "coord"),
	     *clog = kvt_path(dir, "coord.log");
	char *pods_file = kvt_path(dir, "pods.json");
	const char *cav[9 + BFK_COORD_ARGS + 1] = {
	    KVI_COORD_BIN, "--shards", shards,        "--http", http,
	    "--data-dir",  cdata,      "--log-level", "warn"};
	int cac = 9;
	kvt_kube kube = {0};
	if (by == BY_FILE) {
		f.file = pods_file;
		cav[cac++] = "--discovery-file";
		cav[cac++] = pods_file;
		if (!write_pods(&f, 0)) {
			return 1;
		}
	}
	if (by == BY_KUBE) {
		if (!bfk_start(&kube)) {
			return 1;
		}
		bfk_coord_args(&kube, cav, &cac);
	}
	if (kvt_proc_start(cav, clog, &coord) != KVI_OK) {
		return 1;
	}
	for (int i = 0;
	     i < 600 && metric(f.base, "kvindex_coord_instances") < 0; i++) {
		kvt_sleep_ms(50);
	}
	kvt_sleep_ms(1500); /* shards polled, up */
	if (!sim_join(&f)) {
		fprintf(stderr,
			"bench_fleet: the simulated engines' prompt "
			"was not found (simulator log: %s)\n",
			f.sim.log_path);
		return 1;
	}
	pid_t pids[3] = {kvt_proc_pid(shard[0]), kvt_proc_pid(shard[1]),
			 kvt_proc_pid(coord)};
	for (double until = now_s() + 3;
	     now_s() < until &&
	     shard_listeners(metrics[0]) + shard_listeners(metrics[1]) <
		 SIM_RANKS;) {
		kvt_sleep_ms(50); /* published every 100 ms */
	}
	long rss0[2], fds0[2];
	double lis0[2];
	for (int i = 0; i < 2; i++) {
		lis0[i] = shard_listeners(metrics[i]);
		rss0[i] = kvt_pid_rss_kib(pids[i]);
		fds0[i] = kvt_pid_fds(pids[i]);
	}

	f.took = kvi_calloc((size_t)f.pods, sizeof(double));
	f.done_at = kvi_calloc((size_t)f.pods, sizeof(double));
	/* the first tenth alone, and a query's cost at that size */
	f.first = f.pods / TENTHS;
	for (int p = 0; p < f.first && by == BY_REGISTER; p++) {
		if (!register_one(&f, p)) {
			atomic_fetch_add(&f.failed, 1);
		}
	}
	if ((by == BY_FILE && !write_pods(&f, f.first)) ||
	    (by == BY_KUBE && !bfk_put(&kube, 0, f.first))) {
		return 1;
	}
	wait_assigned(&f, f.first);
	/* [none, 8 matching] x [first tenth, whole fleet] */
	double q50[2][2], q99[2][2];
	bool qok =
	    query_cost(&f, NONE_BASE, 0, &q50[0][0], &q99[0][0]) &&
	    query_cost(&f, MATCH_BASE, SIM_RANKS, &q50[1][0], &q99[1][0]);
	double rate[TENTHS];
	int upto[TENTHS];
	if (by == BY_FILE) {
		printf("bench_fleet: %d pods x DP 2 = %d listeners, by the "
		       "discovery file, shards %s\n",
		       f.pods, 2 * f.pods, f.sync ? "fsync" : "--no-sync");
		double t = now_s();
		double took =
		    write_pods(&f, f.pods) ? wait_assigned(&f, f.pods) : -1;
		if (took >= 0) {
			printf("the other %d pods written at once: all %d "
			       "listeners assigned after %.1f s (%.0f pods/s), "
			       "%.2f s from the write\n",
			       f.pods - f.first, 2 * f.pods, took,
			       (f.pods - f.first) / took, now_s() - t);
		} else {
			printf("the fleet not all assigned a minute after the "
			       "file was written\n");
			atomic_fetch_add(&f.failed, 1);
		}
	} else if (by == BY_KUBE) {
		printf("bench_fleet: %d pods x DP 2 = %d listeners, through "
		       "the Kubernetes API, shards %s\n",
		       f.pods, 2 * f.pods, f.sync ? "fsync" : "--no-sync");
		double t = now_s();
		bool put = bfk_put(&kube, f.first, f.pods);
		double puts = now_s() - t;
		double took = put ? wait_assigned(&f, f.pods) : -1;
		if (took >= 0) {
			double all = now_s() - t;
			printf("the other %d pods created in %.2f s (%.0f "
			       "PUTs/s): all %d listeners assigned %.2f s "
			       "after the first (%.0f pods/s), %.2f s after "
			       "the last\n",
			       f.pods - f.first, puts,
			       (f.pods - f.first) / puts, 2 * f.pods, all,
			       (f.pods - f.first) / all, took);
		} else {
			printf("the fleet not all assigned a minute after its "
			       "pods were created\n");
			atomic_fetch_add(&f.failed, 1);
		}
	} else {
		register_fleet(&f, rate, upto);
	}
	/* the shards publish their figures every 100 ms: let them catch up
	 * with the last assignments before reading them */
	for (double until = now_s() + 3;
	     now_s() < until &&
	     shard_listeners(metrics[0]) + shard_listeners(metrics[1]) <
		 2.0 * f.pods + SIM_RANKS;) {
		kvt_sleep_ms(50);
	}
	for (int i = 0; i < 2; i++) {
		/* the fleet's: the simulator's are in the baseline */
		double lis = shard_listeners(metrics[i]) - lis0[i];
		long rss = kvt_pid_rss_kib(pids[i]), fds = kvt_pid_fds(pids[i]);
		printf("shard-%d: %.0f listeners, RSS %ld -> %ld MiB (%.1f KiB "
		       "a listener), descriptors %ld -> %ld (%.2f a "
		       "listener)\n",
		       i, lis, rss0[i] / 1024, rss / 1024,
		       lis > 0 ? (double)(rss - rss0[i]) / lis : 0, fds0[i],
		       fds, lis > 0 ? (double)(fds - fds0[i]) / lis : 0);
	}
	qok = query_cost(&f, NONE_BASE, 0, &q50[0][1], &q99[0][1]) &&
	      query_cost(&f, MATCH_BASE, SIM_RANKS, &q50[1][1], &q99[1][1]) &&
	      qok;
	for (int k = 0; k < 2; k++) {
		printf("query (100 blocks, matching %s, one at a time): %d "
		       "listeners registered p50 %.2f ms p99 %.2f ms; %d "
		       "listeners p50 %.2f ms p99 %.2f ms (%.2fx)%s\n",
		       k ? "the simulator's 8 listeners" : "none",
		       2 * f.first + SIM_RANKS, q50[k][0], q99[k][0],
		       2 * f.pods + SIM_RANKS, q50[k][1], q99[k][1],
		       q50[k][1] / q50[k][0],
		       qok ? "" : "; some queries FAILED");
	}
	kvt_sleep_ms(f.idle_wait * 1000);
	double c0[3], c1[3], cpu0 = 0, cpu1 = 0;
	for (int i = 0; i < 3; i++) {
		c0[i] = proc_cpu_s(pids[i]);
		cpu0 += c0[i];
	}
	kvt_sleep_ms(5000);
	for (int i = 0; i < 3; i++) {
		c1[i] = proc_cpu_s(pids[i]);
		cpu1 += c1[i];
	}
	printf("idle: %.1f%% of a core over 5 s (shards %.1f%% + %.1f%%, "
	       "coordinator %.1f%%), %d s after the last registration, engines "
	       "absent, reconnect ceiling %s ms\n",
	       (cpu1 - cpu0) / 5.0 * 100, (c1[0] - c0[0]) / 5.0 * 100,
	       (c1[1] - c0[1]) / 5.0 * 100, (c1[2] - c0[2]) / 5.0 * 100,
	       f.idle_wait, f.reconnect_max ? f.reconnect_max : "30000");
	double secs;
	size_t bytes;
	timed_get(f.base, "/workers", &secs, &bytes);
	printf("GET /workers: %.3f s, %zu bytes\n", secs, bytes);
	timed_get(f.base, "/workers?limit=100", &secs, &bytes);
	printf("GET /workers?limit=100: %.3f s, %zu bytes\n", secs, bytes);
	if (f.plot != NULL && by == BY_REGISTER) {
		write_plot(&f, rate, upto);
	}
	/* the coordinator restarted on its store: it takes the fleet from
	 * its records and what the shards hold, without assigning again */
	const char *assigns =
	    "kvindex_shard_rpc_requests_total{kind=\"assign\"}";
	double a0 =
	    shard_sum(metrics[0], assigns) + shard_sum(metrics[1], assigns);
	kvt_proc_stop(coord, 10000, NULL);
	kvt_proc_free(coord);
	double r0 = now_s(), serving = -1, adopted = -1;
	if (kvt_proc_start(cav, clog, &coord) != KVI_OK) {
		return 1;
	}
	for (double until = r0 + 60; now_s() < until && adopted < 0;) {
		double inst = metric(f.base, "kvindex_coord_instances");
		if (inst >= 0 && serving < 0) {
			serving = now_s() - r0;
		}
		if (inst == f.pods + SIM_PODS &&
		    metric(f.base, "kvindex_coord_listeners_unassigned") == 0) {
			adopted = now_s() - r0;
		}
		kvt_sleep_ms(20);
	}
	double a1 =
	    shard_sum(metrics[0], assigns) + shard_sum(metrics[1], assigns);
	if (adopted >= 0) {
		printf("coordinator restart: serving after %.2f s, all %d pods "
		       "and %d listeners owned after %.2f s, %.0f assign calls "
		       "to the shards meanwhile\n",
		       serving, f.pods, 2 * f.pods, adopted, a1 - a0);
	} else {
		printf("coordinator restart: the fleet not back after 60 s\n");
	}
	kvt_proc_stop(coord, 10000, NULL);
	kvt_proc_stop(shard[0], 10000, NULL);
	kvt_proc_stop(shard[1], 10000, NULL);
	kvt_proc_free(coord);
	kvt_proc_free(shard[0]);
	kvt_proc_free(shard[1]);
	kvt_sim_stop(&f.sim, NULL);
	if (by == BY_KUBE) {
		kvt_kube_stop(&kube, NULL);
	}
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
	kvi_free(cdata);
	kvi_free(clog);
	kvi_free(pods_file);
	kvi_free(f.took);
	kvi_free(f.done_at);
	return atomic_load(&f.failed) > 0 || !qok ? 1 : 0;
}
