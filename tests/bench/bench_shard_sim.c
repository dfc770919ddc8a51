/*
 * bench_shard_sim - a real kvindex-shard fed by the engine simulator over
 * ZeroMQ: durable ingest through the whole path (SUB sockets, sequencing,
 * index, group commits with fsync), with as many listeners as asked.
 *
 * Starts kvindex-sim (--pods P, DP=2, the conversation trace stretched to
 * four blocks a hash id, as fast as it can publish) and kvindex-shard,
 * assigns every rank, lets the load run for --seconds, then pauses it and
 * waits until the shard has applied everything published. Prints the
 * shard's applied block events/s while the load ran (from its /metrics)
 * and for the whole run to catch-up.
 *
 *   bench_shard_sim [--pods P] [--seconds S] [--no-sync]
 *
 * Both processes share this machine's cores: the simulator's generation
 * competes with the shard.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvitest.h"
#include "rpc.h"

static double
metric(const char *metrics, const char *name)
{
	char url[128];
	snprintf(url, sizeof(url), "http://%s/metrics", metrics);
	return kvt_http_metric(url, name);
}

static double
applied(const char *metrics)
{
	return metric(metrics, "kvindex_shard_blocks_stored_total") +
	       metric(metrics, "kvindex_shard_blocks_removed_total");
}

static void
assign(kvp_client *c, const kvt_sim *sim, int idx)
{
	char key[64], ep[64], rep[64], pod[32];
	snprintf(key, sizeof(key), "sim/pod-%d#%d", idx / sim->dp,
		 idx % sim->dp);
	snprintf(pod, sizeof(pod), "sim/pod-%d", idx / sim->dp);
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", sim->zmq_port[idx]);
	snprintf(rep, sizeof(rep), "tcp://127.0.0.1:%d", sim->replay_port[idx]);
	Kvindex__Listener l = KVINDEX__LISTENER__INIT;
	l.key = key;
	l.instance_id = (uint64_t)(idx / sim->dp);
	l.pod = pod;
	l.dp_rank = (uint32_t)(idx % sim->dp);
	l.model = "sim-model";
	l.block_size = 16;
	l.endpoint = ep;
	l.replay_endpoint = rep;
	Kvindex__AssignRequest a = KVINDEX__ASSIGN_REQUEST__INIT;
	a.listener = &l;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_ASSIGN;
	req.assign = &a;
	Kvindex__Response *resp = NULL;
	char err[256];
	if (kvp_call(c, &req, 10000, &resp, err, sizeof(err)) != KVI_OK) {
		fprintf(stderr, "assign %s: %s\n", key, err);
		exit(1);
	}
	kvindex__response__free_unpacked(resp, NULL);
}

/* sim_published returns the block events the simulator has generated. */
static double
sim_published(kvt_sim *sim)
{
	kvt_http_resp r;
	double v = -1;
	if (kvt_sim_call(sim, "GET", "/status", NULL, &r) == KVI_OK &&
	    r.json != NULL) {
		v = (double)json_integer_value(
			json_object_get(r.json, "stored_blocks")) +
		    (double)json_integer_value(
			json_object_get(r.json, "removed_blocks"));
	}
	kvt_http_resp_fini(&r);
	return v;
}

int
main(int argc, char **argv)
{
	int pods = 4, seconds = 10;
	bool no_sync = false;
	static const struct option longopts[] = {
	    {"pods", required_argument, NULL, 'p'},
	    {"seconds", required_argument, NULL, 's'},
	    {"no-sync", no_argument, NULL, 'n'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			pods = atoi(optarg);
			break;
		case 's':
			seconds = atoi(optarg);
			break;
		case 'n':
			no_sync = true;
			break;
		default:
			fprintf(stderr, "see the comment at the top of "
					"bench_shard_sim.c\n");
			return 2;
		}
	}
	char pods_s[16];
	snprintf(pods_s, sizeof(pods_s), "%d", pods);
	const char *sim_flags[] = {"--pods",
				   pods_s,
				   "--dp",
				   "2",
				   "--block-size",
				   "16",
				   "--trace",
				   KVI_DATA_DIR
				   "/traces/conversation_trace.jsonl",
				   "--blocks-per-id",
				   "4",
				   "--copies",
				   "64",
				   "--loop",
				   "--rate",
				   "0",
				   "--cache-blocks",
				   "65536",
				   "--replay-buffer",
				   "200000",
				   "--paused",
				   NULL};
	kvt_sim sim;
	if (kvt_sim_start(KVI_SIM_BIN, sim_flags, 30000, &sim) != KVI_OK) {
		fprintf(stderr, "simulator did not start\n");
		return 1;
	}
	char *dir;
	kvt_tmpdir_make("kvi-bench", &dir);
	char *data = kvt_path(dir, "data"), *log = kvt_path(dir, "shard.log");
	char host[KVT_HOST_MAX], listen[64], metrics[64];
	int port;
	kvt_addr_pick(host, sizeof(host), &port);
	snprintf(listen, sizeof(listen), "tcp://%s:%d", host, port);
	kvt_addr_pick(host, sizeof(host), &port);
	snprintf(metrics, sizeof(metrics), "%s:%d", host, port);
	const char *argv_shard[] = {KVI_SHARD_BIN, "--listen",
				    listen,        "--data-dir",
				    data,          "--metrics",
				    metrics,       "--log-level",
				    "warn",        no_sync ? "--no-sync" : NULL,
				    NULL};
	kvt_proc *shard;
	kvt_proc_start(argv_shard, log, &shard);
	kvp_client *c;
	kvp_client_open(listen, &c);
	while (metric(metrics, "kvindex_shard_entries") < 0) {
		kvt_sleep_ms(50);
	}
	for (int i = 0; i < sim.n; i++) {
		assign(c, &sim, i);
	}
	kvt_sleep_ms(500);
	printf("shard_sim: listeners=%d durable=%s\n", sim.n,
	       no_sync ? "no-fsync" : "fsync");
	double a0 = applied(metrics);
	double p0 = sim_published(&sim);
	int64_t t0 = kvt_now_ms();
	kvt_sim_post(&sim, "/resume");
	kvt_sleep_ms(seconds * 1000);
	double a1 = applied(metrics);
	int64_t t1 = kvt_now_ms();
	kvt_sim_post(&sim, "/pause");
	double published = sim_published(&sim) - p0;
	/* catch up: the shard has applied everything published */
	double last = -1, a2;
	int still = 0;
	while ((a2 = applied(metrics)) < a0 + published * 0.999 || still < 3) {
		still = a2 == last ? still + 1 : 0;
		last = a2;
		if (still > 50) {
			break; /* stalled: report what it got */
		}
		kvt_sleep_ms(100);
	}
	int64_t t2 = kvt_now_ms();
	printf("shard_sim: seconds=%.1f generated=%.0f "
	       "generated_per_s=%.0f applied_during_load=%.0f "
	       "applied_per_s_during_load=%.0f\n",
	       (t1 - t0) / 1000.0, published, published * 1000.0 / (t1 - t0),
	       a1 - a0, (a1 - a0) * 1000.0 / (t1 - t0));
	printf("shard_sim: applied_total=%.0f catch_up_seconds=%.1f "
	       "applied_per_s_to_catch_up=%.0f entries=%.0f "
	       "gaps=%.0f replays_ok=%.0f\n",
	       a2 - a0, (t2 - t0) / 1000.0, (a2 - a0) * 1000.0 / (t2 - t0),
	       metric(metrics, "kvindex_shard_entries"),
	       metric(metrics, "kvindex_shard_gaps_total"),
	       metric(metrics, "kvindex_shard_replays_total{result=\"ok\"}"));
	kvp_client_close(c);
	kvt_proc_stop(shard, 30000, NULL);
	kvt_proc_free(shard);
	kvt_sim_stop(&sim, NULL);
	kvt_tmpdir_remove(dir);
	free(dir);
	free(data);
	free(log);
	return 0;
}
