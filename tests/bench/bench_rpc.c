/*
 * bench_rpc - the coordinator -> shard round trip alone: a real
 * kvindex-shard and a kvp_client (nng req/rep, protobuf-c), sending the
 * smallest query there is (one sequence hash of a model the shard does
 * not know), one at a time for latency, then --inflight at a time for
 * calls per second. It is the floor under every /query, which makes one
 * such call to each shard. Each line gives the CPU time per call of this
 * process (the client) and of the shard, from /proc.
 *
 *   bench_rpc [--calls N] [--inflight K]
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "bench_query_proc.h"
#include "bench_stream.h"
#include "kvitest.h"
#include "rpc.h"

typedef struct window {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int inflight;
	uint64_t done, failed;
} window;

static void
on_done(void *arg, kvi_err rv, Kvindex__Response *resp, const char *err)
{
	(void)err;
	window *w = arg;
	if (resp != NULL) {
		kvindex__response__free_unpacked(resp, NULL);
	}
	pthread_mutex_lock(&w->mu);
	w->inflight--;
	w->done++;
	w->failed += rv != KVI_OK;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int
main(int argc, char **argv)
{
	int calls = 20000, inflight = 16;
	static const struct option longopts[] = {
	    {"calls", required_argument, NULL, 'c'},
	    {"inflight", required_argument, NULL, 'i'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			calls = atoi(optarg);
			break;
		case 'i':
			inflight = atoi(optarg);
			break;
		default:
			fprintf(stderr, "see the comment at the top of "
					"bench_rpc.c\n");
			return 2;
		}
	}
	char *dir;
	kvt_tmpdir_make("kvi-bench", &dir);
	char *data = kvt_path(dir, "data"), *log = kvt_path(dir, "shard.log");
	char host[KVT_HOST_MAX], listen[64];
	int port;
	kvt_addr_pick(host, sizeof(host), &port);
	snprintf(listen, sizeof(listen), "tcp://%s:%d", host, port);
	const char *argv_shard[] = {KVI_SHARD_BIN, "--listen", listen,
				    "--data-dir",  data,       "--log-level",
				    "warn",        NULL};
	kvt_proc *shard;
	kvt_proc_start(argv_shard, log, &shard);
	kvp_client *c;
	kvp_client_open(listen, &c);

	uint64_t hash = 1;
	Kvindex__QueryRequest q = KVINDEX__QUERY_REQUEST__INIT;
	q.model = "no-such-model";
	q.seq_hashes = &hash;
	q.n_seq_hashes = 1;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_QUERY;
	req.query = &q;
	/* wait for the shard */
	for (;;) {
		Kvindex__Response *resp = NULL;
		if (kvp_call(c, &req, 500, &resp, NULL, 0) == KVI_OK) {
			kvindex__response__free_unpacked(resp, NULL);
			break;
		}
		if (resp != NULL) {
			kvindex__response__free_unpacked(resp, NULL);
		}
		kvt_sleep_ms(50);
	}

	pid_t spid = kvt_proc_pid(shard), me = getpid();
	uint64_t *lat = kvi_calloc((size_t)calls, sizeof(*lat));
	uint64_t c0 = bq_cpu_ns(me), s0 = bq_cpu_ns(spid);
	uint64_t t0 = bs_now_ns();
	for (int i = 0; i < calls; i++) {
		Kvindex__Response *resp = NULL;
		uint64_t a = bs_now_ns();
		kvp_call(c, &req, 5000, &resp, NULL, 0);
		lat[i] = bs_now_ns() - a;
		if (resp != NULL) {
			kvindex__response__free_unpacked(resp, NULL);
		}
	}
	double secs = (double)(bs_now_ns() - t0) / 1e9;
	qsort(lat, (size_t)calls, sizeof(*lat), bs_cmp_u64);
	printf("rpc: inflight=1 calls=%d calls_per_s=%.0f p50_us=%.0f "
	       "p99_us=%.0f client_cpu_us=%.1f shard_cpu_us=%.1f\n",
	       calls, calls / secs, lat[calls / 2] / 1e3,
	       lat[(size_t)calls * 99 / 100] / 1e3,
	       (double)(bq_cpu_ns(me) - c0) / 1e3 / calls,
	       (double)(bq_cpu_ns(spid) - s0) / 1e3 / calls);

	window w = {.inflight = 0};
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	c0 = bq_cpu_ns(me);
	s0 = bq_cpu_ns(spid);
	t0 = bs_now_ns();
	for (int i = 0; i < calls; i++) {
		pthread_mutex_lock(&w.mu);
		while (w.inflight >= inflight) {
			pthread_cond_wait(&w.cv, &w.mu);
		}
		w.inflight++;
		pthread_mutex_unlock(&w.mu);
		if (kvp_call_async(c, &req, 5000, on_done, &w) != KVI_OK) {
			on_done(&w, KVI_ECLOSED, NULL, "");
		}
	}
	pthread_mutex_lock(&w.mu);
	while (w.inflight > 0) {
		pthread_cond_wait(&w.cv, &w.mu);
	}
	pthread_mutex_unlock(&w.mu);
	secs = (double)(bs_now_ns() - t0) / 1e9;
	printf("rpc: inflight=%d calls=%d failed=%llu calls_per_s=%.0f "
	       "client_cpu_us=%.1f shard_cpu_us=%.1f\n",
	       inflight, calls, (unsigned long long)w.failed, calls / secs,
	       (double)(bq_cpu_ns(me) - c0) / 1e3 / calls,
	       (double)(bq_cpu_ns(spid) - s0) / 1e3 / calls);

	kvp_client_close(c);
	kvt_proc_stop(shard, 30000, NULL);
	kvt_proc_free(shard);
	kvt_tmpdir_remove(dir);
	free(dir);
	free(data);
	free(log);
	kvi_free(lat);
	return 0;
}
