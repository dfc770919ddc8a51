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
 * three processes spend per second once idle (probing the absent
 * engines), S and 2S seconds after the last registration, and GET
 * /workers' time and size, whole and one page.
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
 *               [--reconnect-max-ms MS] [--probe-rate N] [--plot FILE]
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
 * measured S and 2S seconds after the last registration (default 10);
 * --reconnect-max-ms and --probe-rate are passed to the shards.
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
#include "bench_fleet.h"
#include "bench_fleet_kube.h"
#include "bench_query_proc.h"
#include "kvitest.h"

double
bf_now_s(void)
{
	return (double)kvt_now_ms() / 1000.0;
}

static bool register_one(fleet *f, int p);

static void *
client_main(void *arg)
{
	fleet *f = arg;
	for (int p; (p = atomic_fetch_add(&f->next, 1)) < f->pods;) {
		double t = bf_now_s();
		bool ok = register_one(f, p);
		f->took[p] = bf_now_s() - t;
		f->done_at[p] = bf_now_s() - f->t0;
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

double
bf_wait_assigned(const fleet *f, int n)
{
	double t0 = bf_now_s();
	for (double until = t0 + 60; bf_now_s() < until;) {
		if (bf_metric(f->base, "kvindex_coord_instances") ==
			n + f->extra_pods &&
		    bf_metric(f->base, "kvindex_coord_listeners_unassigned") ==
			0) {
			return bf_now_s() - t0;
		}
		kvt_sleep_ms(20);
	}
	return -1;
}

int
bf_cmp_double(const void *a, const void *b)
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

double
bf_metric(const char *base, const char *name)
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

/* shards_sum is shard_sum over both shards. */
static double
shards_sum(const fleet *f, const char *prefix)
{
	return shard_sum(f->metrics[0], prefix) +
	       shard_sum(f->metrics[1], prefix);
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
	double t = bf_now_s();
	kvt_http_resp r;
	kvi_err rv = kvt_http_get(url, 60000, &r);
	*secs = bf_now_s() - t;
	*bytes = rv == KVI_OK && r.body != NULL ? strlen(r.body) : 0;
	kvt_http_resp_fini(&r);
}

static void
write_plot(const fleet *f, const double *rate, const double *cpu,
	   const int *upto)
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
		"set y2label 'CPU per registration (us, 3 processes)'\n"
		"set yrange [0:*]\n"
		"set y2range [0:*]\n"
		"set ytics nomirror\n"
		"set y2tics\n"
		"set key bottom right\n"
		"plot '-' with linespoints title 'POST /register, %d "
		"clients', '-' axes x1y2 with linespoints title 'CPU per "
		"registration'\n",
		f->plot, f->clients);
	for (int t = 0; t < TENTHS; t++) {
		fprintf(fp, "%d %.1f\n", upto[t], rate[t]);
	}
	fprintf(fp, "e\n");
	for (int t = 0; t < TENTHS; t++) {
		fprintf(fp, "%d %.1f\n", upto[t], cpu[t] * 1e6);
	}
	fprintf(fp, "e\n");
	fclose(fp);
}

/* register_fleet registers the pods after the first tenth from
 * f->clients threads, and prints the rate, the latency and the CPU of one
 * registration per tenth (into rate, cpu and upto, for the plot) and the
 * time until all are assigned. */
static void
register_fleet(fleet *f, double *rate, double *cpu, int *upto)
{
	static const char tick_sum[] =
	    "kvindex_coord_tick_seconds_sum{kind=\"full\"}";
	static const char tick_n[] =
	    "kvindex_coord_tick_seconds_count{kind=\"full\"}";
	double sum0 = bf_metric(f->base, tick_sum),
	       n0 = bf_metric(f->base, tick_n);
	atomic_store(&f->next, f->first);
	pthread_t th[64];
	bfc cs;
	bfc_start(&cs, f->pids, BFC_PROCS);
	f->t0 = bf_now_s();
	for (int i = 0; i < f->clients; i++) {
		pthread_create(&th[i], NULL, client_main, f);
	}
	for (int i = 0; i < f->clients; i++) {
		pthread_join(th[i], NULL);
	}
	double answered = bf_now_s() - f->t0;
	bfc_stop(&cs);
	int rest = f->pods - f->first;
	/* every listener assigned, or how many are not after a minute */
	double assigned = -1, un = -1;
	for (double until = bf_now_s() + 60; bf_now_s() < until;) {
		un = bf_metric(f->base, "kvindex_coord_listeners_unassigned");
		if (un == 0) {
			assigned = bf_now_s() - f->t0;
			break;
		}
		kvt_sleep_ms(100);
	}

	printf("bench_fleet: %d pods x DP 2 = %d listeners, %d clients, "
	       "shards %s\n",
	       f->pods, 2 * f->pods, f->clients,
	       f->sync ? "fsync" : "--no-sync");
	printf("%-14s %12s %10s %10s %12s %12s\n", "pods", "registers/s",
	       "p50 ms", "p99 ms", "CPU us/reg", "coord us");
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
		qsort(lat, n, sizeof(double), bf_cmp_double);
		rate[t] = (double)n / (last - first);
		upto[t] = hi;
		/* the CPU of all three processes while this tenth's
		 * registrations were answered, per registration: the tenths
		 * overlap by the few in flight at their edges */
		double a = f->t0 + first, b = f->t0 + last;
		cpu[t] = (bfc_at(&cs, -1, b) - bfc_at(&cs, -1, a)) / (double)n;
		double coord =
		    (bfc_at(&cs, 2, b) - bfc_at(&cs, 2, a)) / (double)n;
		printf("%6d-%-7d %12.0f %10.1f %10.1f %12.0f %12.0f\n", lo, hi,
		       rate[t], lat[n / 2] * 1e3, lat[n * 99 / 100] * 1e3,
		       cpu[t] * 1e6, coord * 1e6);
		kvi_free(lat);
	}
	printf("all answered in %.1f s (%.0f/s overall), %d not 201/202; ",
	       answered, rest / answered, atomic_load(&f->failed));
	if (assigned >= 0) {
		printf("all assigned after %.1f s\n", assigned);
	} else {
		printf("%.0f listeners still unassigned after a minute\n", un);
	}
	/* halves are steadier than single tenths on a noisy machine */
	double lo_half = 0, hi_half = 0;
	for (int t = 0; t < TENTHS; t++) {
		*(t < TENTHS / 2 ? &lo_half : &hi_half) += cpu[t];
	}
	printf("CPU per registration: %.0f us on average, last tenth / first "
	       "%.2f, last half / first %.2f\n",
	       (lo_half + hi_half) / TENTHS * 1e6,
	       cpu[0] > 0 ? cpu[TENTHS - 1] / cpu[0] : 0,
	       lo_half > 0 ? hi_half / lo_half : 0);
	bfc_free(&cs);
	/* the coordinator's full ticks meanwhile: each walks every listener
	 * registered by then */
	double ticks = bf_metric(f->base, tick_n) - n0;
	if (ticks > 0) {
		printf("coordinator: %.0f full ticks meanwhile, %.1f ms each "
		       "on average\n",
		       ticks,
		       (bf_metric(f->base, tick_sum) - sum0) / ticks * 1e3);
	}
}

/* idle_cpu waits wait_s, then prints the CPU the three processes spend
 * over 5 s, after_s after the last registration. */
static void
idle_cpu(const fleet *f, int wait_s, int after_s)
{
	static const char made[] = "kvindex_shard_probes_total";
	kvt_sleep_ms(wait_s * 1000);
	double c0[3], c1[3], cpu0 = 0, cpu1 = 0;
	double p0 = shards_sum(f, made);
	for (int i = 0; i < 3; i++) {
		c0[i] = proc_cpu_s(f->pids[i]);
		cpu0 += c0[i];
	}
	kvt_sleep_ms(5000);
	for (int i = 0; i < 3; i++) {
		c1[i] = proc_cpu_s(f->pids[i]);
		cpu1 += c1[i];
	}
	double p1 = shards_sum(f, made);
	printf("idle: %.1f%% of a core over 5 s (shards %.1f%% + %.1f%%, "
	       "coordinator %.1f%%), %d s after the last registration, engines "
	       "absent, reconnect ceiling %s ms, %.0f probes/s\n",
	       (cpu1 - cpu0) / 5.0 * 100, (c1[0] - c0[0]) / 5.0 * 100,
	       (c1[1] - c0[1]) / 5.0 * 100, (c1[2] - c0[2]) / 5.0 * 100,
	       after_s, f->reconnect_max ? f->reconnect_max : "30000",
	       (p1 - p0) / 5.0);
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
	    {"probe-rate", required_argument, NULL, 'R'},
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
		case 'R':
			f.probe_rate = optarg;
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
				"MS] [--probe-rate N] [--plot FILE] [--source "
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
	/* each server on a loopback address of its own, where its port
	 * stays free until it binds it (kvt_env.h) */
	char host[KVT_HOST_MAX];
	int port;
	kvt_proc *shard[2], *coord;
	char shards[256] = "", (*metrics)[32] = f.metrics;
	for (int i = 0; i < 2; i++) {
		char id[16], listen[64], logn[32];
		snprintf(id, sizeof(id), "shard-%d", i);
		kvt_addr_pick(host, sizeof(host), &port);
		snprintf(listen, sizeof(listen), "tcp://%s:%d", host, port);
		kvt_addr_pick(host, sizeof(host), &port);
		snprintf(metrics[i], sizeof(metrics[i]), "%s:%d", host, port);
		snprintf(logn, sizeof(logn), "%s.log", id);
		char *data = kvt_path(dir, id), *log = kvt_path(dir, logn);
		const char *av[20] = {KVI_SHARD_BIN, "--id",      id,
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
		if (f.probe_rate != NULL) {
			av[ac++] = "--probe-rate";
			av[ac++] = f.probe_rate;
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
	kvt_addr_pick(host, sizeof(host), &port);
	snprintf(http, sizeof(http), "%s:%d", host, port);
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
	     i < 600 && bf_metric(f.base, "kvindex_coord_instances") < 0; i++) {
		kvt_sleep_ms(50);
	}
	kvt_sleep_ms(1500); /* shards polled, up */
	if (!bf_sim_join(&f)) {
		fprintf(stderr,
			"bench_fleet: the simulated engines' prompt "
			"was not found (simulator log: %s)\n",
			f.sim.log_path);
		return 1;
	}
	pid_t *pids = f.pids;
	pids[0] = kvt_proc_pid(shard[0]);
	pids[1] = kvt_proc_pid(shard[1]);
	pids[2] = kvt_proc_pid(coord);
	for (double until = bf_now_s() + 3;
	     bf_now_s() < until &&
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
	bf_wait_assigned(&f, f.first);
	/* [none, 8 matching] x [first tenth, whole fleet] */
	double q50[2][2], q99[2][2];
	bool qok =
	    bf_query_cost(&f, NONE_BASE, 0, &q50[0][0], &q99[0][0]) &&
	    bf_query_cost(&f, MATCH_BASE, SIM_RANKS, &q50[1][0], &q99[1][0]);
	double rate[TENTHS], cpu[TENTHS];
	int upto[TENTHS];
	if (by == BY_FILE) {
		printf("bench_fleet: %d pods x DP 2 = %d listeners, by the "
		       "discovery file, shards %s\n",
		       f.pods, 2 * f.pods, f.sync ? "fsync" : "--no-sync");
		double t = bf_now_s();
		double took =
		    write_pods(&f, f.pods) ? bf_wait_assigned(&f, f.pods) : -1;
		if (took >= 0) {
			printf("the other %d pods written at once: all %d "
			       "listeners assigned after %.1f s (%.0f pods/s), "
			       "%.2f s from the write\n",
			       f.pods - f.first, 2 * f.pods, took,
			       (f.pods - f.first) / took, bf_now_s() - t);
		} else {
			printf("the fleet not all assigned a minute after the "
			       "file was written\n");
			atomic_fetch_add(&f.failed, 1);
		}
	} else if (by == BY_KUBE) {
		printf("bench_fleet: %d pods x DP 2 = %d listeners, through "
		       "the Kubernetes API, shards %s\n",
		       f.pods, 2 * f.pods, f.sync ? "fsync" : "--no-sync");
		double t = bf_now_s();
		bool put = bfk_put(&kube, f.first, f.pods);
		double puts = bf_now_s() - t;
		double took = put ? bf_wait_assigned(&f, f.pods) : -1;
		if (took >= 0) {
			double all = bf_now_s() - t;
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
		static const char made[] = "kvindex_shard_probes_total",
				  waited[] =
				      "kvindex_shard_probes_waited_total";
		double p0 = shards_sum(&f, made), w0 = shards_sum(&f, waited);
		register_fleet(&f, rate, cpu, upto);
		double p = shards_sum(&f, made) - p0,
		       w = shards_sum(&f, waited) - w0;
		printf("shards: %.0f probes of the absent engines meanwhile "
		       "(%.1f a listener), %.0f of them waited for the probe "
		       "budget\n",
		       p, p / (2.0 * (f.pods - f.first)), w);
	}
	/* the shards publish their figures every 100 ms: let them catch up
	 * with the last assignments before reading them */
	for (double until = bf_now_s() + 3;
	     bf_now_s() < until &&
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
	qok =
	    bf_query_cost(&f, NONE_BASE, 0, &q50[0][1], &q99[0][1]) &&
	    bf_query_cost(&f, MATCH_BASE, SIM_RANKS, &q50[1][1], &q99[1][1]) &&
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
	/* once, and again as long after: the probes of the engines that are
	 * not there wind down to their ceiling */
	idle_cpu(&f, f.idle_wait, f.idle_wait);
	idle_cpu(&f, f.idle_wait > 5 ? f.idle_wait - 5 : 0, 2 * f.idle_wait);
	double secs;
	size_t bytes;
	timed_get(f.base, "/workers", &secs, &bytes);
	printf("GET /workers: %.3f s, %zu bytes\n", secs, bytes);
	timed_get(f.base, "/workers?limit=100", &secs, &bytes);
	printf("GET /workers?limit=100: %.3f s, %zu bytes\n", secs, bytes);
	if (f.plot != NULL && by == BY_REGISTER) {
		write_plot(&f, rate, cpu, upto);
	}
	/* the coordinator restarted on its store: it takes the fleet from
	 * its records and what the shards hold, without assigning again */
	const char *assigns =
	    "kvindex_shard_rpc_requests_total{kind=\"assign\"}";
	double a0 = shards_sum(&f, assigns);
	kvt_proc_stop(coord, 10000, NULL);
	kvt_proc_free(coord);
	double r0 = bf_now_s(), serving = -1, adopted = -1;
	if (kvt_proc_start(cav, clog, &coord) != KVI_OK) {
		return 1;
	}
	for (double until = r0 + 60; bf_now_s() < until && adopted < 0;) {
		double inst = bf_metric(f.base, "kvindex_coord_instances");
		if (inst >= 0 && serving < 0) {
			serving = bf_now_s() - r0;
		}
		if (inst == f.pods + SIM_PODS &&
		    bf_metric(f.base, "kvindex_coord_listeners_unassigned") ==
			0) {
			adopted = bf_now_s() - r0;
		}
		kvt_sleep_ms(20);
	}
	double a1 = shards_sum(&f, assigns);
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
