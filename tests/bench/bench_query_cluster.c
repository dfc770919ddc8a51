/*
 * bench_query_cluster.c - starting, filling and stopping the kvindex
 * cluster of bench_query (bench_query_cluster.h).
 */
#include "bench_query_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define READY_TIMEOUT_MS 60000
#define STOP_TIMEOUT_MS  30000
#define SETTLE_MS        60000

static double
shard_entries(int port)
{
	char url[96];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/admin/shards", port);
	kvt_http_resp r;
	double sum = -1;
	if (kvt_http_get(url, 5000, &r) == KVI_OK && r.status == 200) {
		sum = 0;
		size_t i;
		json_t *s;
		json_array_foreach(r.json, i, s)
		{
			sum += (double)json_integer_value(
			    json_object_get(s, "blocks"));
		}
	}
	kvt_http_resp_fini(&r);
	return sum;
}

static bool
coord_ready(void *arg)
{
	char url[96];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/ready", *(int *)arg);
	kvt_http_resp r;
	bool ok = kvt_http_get(url, 2000, &r) == KVI_OK && r.status == 200;
	kvt_http_resp_fini(&r);
	return ok;
}

static kvi_err
start_sim(const bq_cluster_config *cfg, bq_cluster *c)
{
	char pods[16], cache[24], bs[8], bpi[8];
	snprintf(pods, sizeof(pods), "%d", cfg->pods);
	snprintf(cache, sizeof(cache), "%.0f",
		 cfg->entries / (2.0 * cfg->pods) * 1.25 + 64);
	snprintf(bs, sizeof(bs), "%d", cfg->block_size);
	snprintf(bpi, sizeof(bpi), "%d", cfg->blocks_per_id);
	const char *flags[] = {"--pods",
			       pods,
			       "--dp",
			       "2",
			       "--block-size",
			       bs,
			       "--trace",
			       cfg->trace,
			       "--blocks-per-id",
			       bpi,
			       "--copies",
			       "1",
			       "--loop",
			       "--rate",
			       "0",
			       "--cache-blocks",
			       cache,
			       "--replay-buffer",
			       "100000",
			       "--paused",
			       NULL};
	kvi_err rc = kvt_sim_start(KVI_SIM_BIN, flags, 60000, &c->sim);
	c->sim_up = rc == KVI_OK;
	return rc;
}

/* start_shards starts both shards and writes the coordinator's --shards
 * value into arg. */
static kvi_err
start_shards(const bq_cluster_config *cfg, const char *dir, int base,
	     bq_cluster *c, char *arg, size_t cap)
{
	arg[0] = '\0';
	kvi_err rc = KVI_OK;
	for (int i = 0; i < 2 && rc == KVI_OK; i++) {
		char id[16], listen[600], logname[32];
		snprintf(id, sizeof(id), "shard-%d", i);
		if (cfg->ipc) {
			snprintf(listen, sizeof(listen), "ipc://%s/%s.ipc", dir,
				 id);
		} else {
			snprintf(listen, sizeof(listen), "tcp://127.0.0.1:%d",
				 base + i);
		}
		snprintf(logname, sizeof(logname), "%s.log", id);
		char *data = kvt_path(dir, id), *log = kvt_path(dir, logname);
		const char *argv[] = {KVI_SHARD_BIN, "--id",      id,
				      "--listen",    listen,      "--data-dir",
				      data,          "--no-sync", "--log-level",
				      "warn",        NULL};
		rc = kvt_proc_start(argv, log, &c->shard[i]);
		size_t used = strlen(arg);
		snprintf(arg + used, cap - used, "%s%s=%s", i ? "," : "", id,
			 listen);
		kvi_free(data);
		kvi_free(log);
	}
	return rc;
}

static kvi_err
start_coord(const bq_cluster_config *cfg, const char *dir, const char *shards,
	    bq_cluster *c)
{
	char http[32], threads[8];
	snprintf(http, sizeof(http), "127.0.0.1:%d", c->port);
	snprintf(threads, sizeof(threads), "%d", cfg->http_threads);
	char *data = kvt_path(dir, "coord"), *log = kvt_path(dir, "coord.log");
	const char *argv[48] = {KVI_COORD_BIN,
				"--shards",
				shards,
				"--http",
				http,
				"--http-threads",
				threads,
				"--discovery-file",
				c->sim.layout_path,
				"--data-dir",
				data,
				"--log-level",
				"warn"};
	size_t n = 13;
	for (size_t i = 0; cfg->coord_args != NULL &&
			   cfg->coord_args[i] != NULL && n + 1 < 48;
	     i++) {
		argv[n++] = cfg->coord_args[i];
	}
	argv[n] = NULL;
	kvi_err rc = kvt_proc_start(argv, log, &c->coord);
	kvi_free(data);
	kvi_free(log);
	return rc;
}

static bool
all_alive(bq_cluster *c)
{
	return kvt_proc_alive(c->coord) && kvt_proc_alive(c->shard[0]) &&
	       kvt_proc_alive(c->shard[1]);
}

/* listener_seq returns the last_seq kvindex reports for rank r of the
 * pod called name in workers (GET /workers), or NULL. */
static json_t *
listener_seq(json_t *workers, const char *name, json_int_t r)
{
	char rank[24];
	snprintf(rank, sizeof(rank), "%lld", (long long)r);
	size_t i;
	json_t *w;
	json_array_foreach(workers, i, w)
	{
		const char *n = json_string_value(json_object_get(w, "name"));
		if (n != NULL && name != NULL && strcmp(n, name) == 0) {
			json_t *ls = json_object_get(w, "listeners");
			return json_object_get(json_object_get(ls, rank),
					       "last_seq");
		}
	}
	return NULL;
}

/* caught_up says whether kvindex applied every batch of the simulator's
 * rank (an entry of GET /status's ranks); a rank that published nothing
 * has seq -1 and its listener no last_seq. */
static bool
caught_up(const bq_cluster *c, json_t *workers, const json_t *rank)
{
	json_t *pods = json_object_get(c->sim.layout, "pods");
	json_t *pod = json_array_get(
	    pods, (size_t)json_integer_value(json_object_get(rank, "pod")));
	json_t *seq = listener_seq(
	    workers, json_string_value(json_object_get(pod, "name")),
	    json_integer_value(json_object_get(rank, "rank")));
	json_int_t want = json_integer_value(json_object_get(rank, "seq"));
	if (want < 0) {
		return !json_is_integer(seq);
	}
	return json_is_integer(seq) && json_integer_value(seq) == want;
}

/* behind returns how many of the fleet's ranks kvindex has not caught up
 * with, or -1 when either side cannot be read. */
static int
behind(bq_cluster *c)
{
	char url[96];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/workers", c->port);
	kvt_http_resp st = {0}, wk = {0};
	int n = -1;
	if (kvt_sim_call(&c->sim, "GET", "/status", NULL, &st) == KVI_OK &&
	    kvt_http_get(url, 5000, &wk) == KVI_OK && st.status == 200 &&
	    wk.status == 200) {
		json_t *ranks = json_object_get(st.json, "ranks"), *rank;
		size_t i;
		n = 0;
		json_array_foreach(ranks, i, rank)
		{
			n += !caught_up(c, wk.json, rank);
		}
	}
	kvt_http_resp_fini(&st);
	kvt_http_resp_fini(&wk);
	return n;
}

/* settle waits up to SETTLE_MS until kvindex has applied every batch the
 * paused fleet published; short of that it says so and goes on (the
 * answers are checked against the fleet's truth later anyway). */
static double
settle(bq_cluster *c)
{
	int64_t deadline = kvt_now_ms() + SETTLE_MS;
	int n;
	while ((n = behind(c)) != 0 && kvt_now_ms() < deadline &&
	       all_alive(c)) {
		kvt_sleep_ms(200);
	}
	if (n != 0) {
		fprintf(stderr, "fill: %d listeners are behind their rank\n",
			n);
	}
	return shard_entries(c->port);
}

/* fill runs the load until the shards hold want entries, pauses it and
 * waits for the shards to apply what the fleet published. */
static kvi_err
fill(bq_cluster *c, double want, int timeout_s)
{
	int64_t t0 = kvt_now_ms(), deadline = t0 + (int64_t)timeout_s * 1000;
	kvt_sim_post(&c->sim, "/resume");
	double e;
	while ((e = shard_entries(c->port)) < want) {
		if (!all_alive(c) || kvt_now_ms() > deadline) {
			kvt_sim_post(&c->sim, "/pause");
			fprintf(stderr, "fill: %.0f of %.0f entries\n", e,
				want);
			return all_alive(c) ? KVI_ETIMEDOUT : KVI_EIO;
		}
		kvt_sleep_ms(200);
	}
	kvt_sim_post(&c->sim, "/pause");
	c->entries = settle(c);
	c->fill_seconds = (double)(kvt_now_ms() - t0) / 1e3;
	return KVI_OK;
}

kvi_err
bq_cluster_start(const bq_cluster_config *cfg, const char *dir, bq_cluster *c)
{
	memset(c, 0, sizeof(*c));
	int base;
	char shards[1400];
	/* the ports are picked once the simulator's engines have bound
	 * theirs, which come from the same range */
	kvi_err rc = start_sim(cfg, c);
	if (rc == KVI_OK) {
		rc = kvt_ports_pick(3, &base);
		c->port = base + 2;
	}
	if (rc == KVI_OK) {
		rc = start_shards(cfg, dir, base, c, shards, sizeof(shards));
	}
	if (rc == KVI_OK) {
		rc = start_coord(cfg, dir, shards, c);
	}
	if (rc == KVI_OK &&
	    !kvt_wait_until(coord_ready, &c->port, READY_TIMEOUT_MS)) {
		fprintf(stderr, "coordinator not ready: see %s\n", dir);
		rc = KVI_ETIMEDOUT;
	}
	if (rc == KVI_OK) {
		rc = fill(c, cfg->entries, cfg->fill_timeout_s);
	}
	if (rc != KVI_OK) {
		bq_cluster_stop(c);
	}
	return rc;
}

void
bq_cluster_stop(bq_cluster *c)
{
	if (c->coord != NULL) {
		kvt_proc_stop(c->coord, STOP_TIMEOUT_MS, NULL);
		kvt_proc_free(c->coord);
		c->coord = NULL;
	}
	for (int i = 0; i < 2; i++) {
		if (c->shard[i] != NULL) {
			kvt_proc_stop(c->shard[i], STOP_TIMEOUT_MS, NULL);
			kvt_proc_free(c->shard[i]);
			c->shard[i] = NULL;
		}
	}
	if (c->sim_up) {
		kvt_sim_stop(&c->sim, NULL);
		c->sim_up = false;
	}
}

void
bq_cluster_pids(const bq_cluster *c, pid_t out[3])
{
	out[0] = kvt_proc_pid(c->coord);
	out[1] = kvt_proc_pid(c->shard[0]);
	out[2] = kvt_proc_pid(c->shard[1]);
}
