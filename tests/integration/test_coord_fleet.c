/*
 * test_coord_fleet.c - a fleet of a few thousand pods against a real
 * coordinator and two real shards: FILE_PODS pods through the discovery
 * file and HTTP_PODS through POST /register, all of DP 2, whose engines
 * are not there (addresses in 127.9/16 and 127.10/16 where nothing
 * listens), beside the simulator's two pods, whose engines are.
 *
 * It checks that every listener is assigned and owned by a shard, that
 * /workers lists every pod, that prefills on the simulator's ranks match
 * while the fleet is there, and that removing the whole fleet (the file
 * rewritten, every HTTP pod unregistered) gives the shards back their
 * descriptors and most of their memory (the memory is not checked under
 * ASan, whose allocator keeps freed memory in quarantine). The shards
 * probe the absent engines within a budget (--probe-rate PROBE_RATE):
 * beyond each listener's first probe, no more than that a second. The
 * figures go to standard output; bench_fleet measures rates.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "register_check.h"

#define FILE_PODS     1500
#define HTTP_PODS     500
#define SIM_PODS      2
#define DP            2
#define FLEET_WAIT_MS 120000
#define PROBE_RATE    200 /* a shard's probes/s beyond each first */
#define STR_(x)       #x
#define STR(x)        STR_(x)

/* fleet_ip writes the address of fake pod k in the /16 net. */
static void
fleet_ip(char *buf, size_t len, int net, int k)
{
	snprintf(buf, len, "127.%d.%d.%d", net, k / 250, k % 250 + 1);
}

/* write_file writes the discovery file: the simulator's pods, then
 * file_pods fake ones; by rename, so the watcher never reads half. */
static void
write_file(cluster *c, const char *path, int file_pods)
{
	size_t cap = 256 + (size_t)(file_pods + SIM_PODS) * 192, n = 0;
	char *buf = malloc(cap);
	n += (size_t)snprintf(buf + n, cap - n, "{\"pods\":[");
	for (int p = 0; p < SIM_PODS; p++) {
		int i = p * DP;
		n += (size_t)snprintf(
		    buf + n, cap - n,
		    "%s{\"name\":\"sim/pod-%d\",\"ip\":\"127.0.0.1\","
		    "\"zmq_port\":%d,\"recover_port\":%d,\"replay_port\":%d,"
		    "\"dp_size\":%d,\"model\":\"sim-model\",\"block_size\":16}",
		    p ? "," : "", p, c->sim.zmq_port[i], c->sim.recover_port[i],
		    c->sim.replay_port[i], DP);
	}
	for (int k = 0; k < file_pods; k++) {
		char ip[32];
		fleet_ip(ip, sizeof(ip), 9, k);
		n += (size_t)snprintf(
		    buf + n, cap - n,
		    ",{\"name\":\"fleet/file-%d\",\"ip\":\"%s\",\"zmq_port\":"
		    "5557,\"dp_size\":%d,\"model\":\"sim-model\","
		    "\"block_size\":16}",
		    k, ip, DP);
	}
	n += (size_t)snprintf(buf + n, cap - n, "]}\n");
	assert_true(n < cap);
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, path), 0);
	free(buf);
}

/* listeners returns how many listeners shard s owns, in any state, from
 * one read of its /metrics. */
static long
listeners(shardproc *s)
{
	char url[128];
	snprintf(url, sizeof(url), "http://%s/metrics", s->metrics);
	double n = kvt_http_metric_sum(url, "kvindex_shard_listeners{state=");
	return n > 0 ? (long)n : 0;
}

/* wait_listeners waits until the two shards own want listeners between
 * them and returns how long that took, in ms. */
static int64_t
wait_listeners(cluster *c, long want)
{
	int64_t t0 = kvt_now_ms(), deadline = t0 + FLEET_WAIT_MS;
	long have = -1;
	while (kvt_now_ms() < deadline) {
		have = listeners(&c->shards[0]) + listeners(&c->shards[1]);
		if (have == want) {
			return kvt_now_ms() - t0;
		}
		kvt_sleep_ms(100);
	}
	fail_msg("the shards own %ld listeners, not %ld", have, want);
	return -1;
}

typedef struct shard_use {
	double files, unreachable;
	long rss_kib; /* the heap's (RssAnon), not the store's pages */
} shard_use;

static shard_use
use_of(shardproc *s)
{
	shard_use u = {shc_metric(s, "kvindex_shard_open_files"),
		       shc_metric(s, "kvindex_shard_listeners_unreachable"),
		       kvt_pid_anon_kib(kvt_proc_pid(s->proc))};
	assert_true(u.files > 0 && u.rss_kib > 0);
	return u;
}

static void
register_http(cluster *c)
{
	for (int k = 0; k < HTTP_PODS; k++) {
		char ip[32], body[256];
		fleet_ip(ip, sizeof(ip), 10, k);
		snprintf(body, sizeof(body),
			 "{\"name\":\"fleet/http-%d\",\"ip\":\"%s\","
			 "\"zmq_port\":5557,\"dp_size\":%d,"
			 "\"model_name\":\"sim-model\",\"block_size\":16}",
			 k, ip, DP);
		json_decref(post_expect(c, "/register", body, 201));
	}
}

static void
unregister_http(cluster *c)
{
	for (int k = 0; k < HTTP_PODS; k++) {
		char body[96];
		snprintf(body, sizeof(body), "{\"name\":\"fleet/http-%d\"}", k);
		json_decref(post_expect(c, "/unregister", body, 200));
	}
}

static void
test_fleet(void **state)
{
	cluster *c = *state;
	const char *sim_flags[] = {"--pods", "2", "--dp", "2", NULL};
	clu_sim(c, sim_flags);
	const char *budget[] = {"--probe-rate", STR(PROBE_RATE), NULL};
	for (int s = 0; s < 2; s++) {
		shc_start(&c->shards[s], budget);
	}
	c->n_shards = 2;
	char *dir;
	assert_int_equal(kvt_tmpdir_make("kvi-fleet", &dir), KVI_OK);
	char *path = kvt_path(dir, "pods.json");
	write_file(c, path, 0);
	const char *extra[] = {"--discovery-file", path, NULL};
	clu_coord(c, false, extra);
	wait_listeners(c, SIM_PODS * DP);
	clu_wait_active(c, SIM_PODS * DP, FLEET_WAIT_MS);
	shard_use before[2] = {use_of(&c->shards[0]), use_of(&c->shards[1])};

	/* the fleet arrives: a file of FILE_PODS, then HTTP_PODS */
	long all = (long)(SIM_PODS + FILE_PODS + HTTP_PODS) * DP;
	static const char made[] = "kvindex_shard_probes_total",
			  waited[] = "kvindex_shard_probes_waited_total";
	double probes0[2] = {shc_metric(&c->shards[0], made),
			     shc_metric(&c->shards[1], made)},
	       waited0[2] = {shc_metric(&c->shards[0], waited),
			     shc_metric(&c->shards[1], waited)};
	int64_t t0 = kvt_now_ms();
	write_file(c, path, FILE_PODS);
	int64_t file_ms = wait_listeners(c, (SIM_PODS + FILE_PODS) * DP);
	static const char quiet[] = "kvindex_coord_ticks_total{kind=\"quiet\"}";
	static const char full[] = "kvindex_coord_ticks_total{kind=\"full\"}";
	double f_reg = clu_metric(c, full);
	int64_t t1 = kvt_now_ms();
	register_http(c);
	int64_t http_ms = kvt_now_ms() - t1;
	/* while registrations stream in, a full tick (a walk of every
	 * listener) runs at most every 5 s, not twice a second */
	double f_during = clu_metric(c, full) - f_reg;
	printf("fleet: %.0f full ticks during the registrations\n", f_during);
	assert_true(f_during <= 1 + (double)(http_ms / 5000));
	wait_listeners(c, all);
	printf("fleet: %d file pods assigned in %" PRId64 " ms, %d /register "
	       "in %" PRId64 " ms, %ld listeners in %" PRId64 " ms\n",
	       FILE_PODS, file_ms, HTTP_PODS, http_ms, all, kvt_now_ms() - t0);
	assert_int_equal(n_workers(c), SIM_PODS + FILE_PODS + HTTP_PODS);
	/* both shards took a share, and /workers agrees with them */
	for (int s = 0; s < 2; s++) {
		assert_true(listeners(&c->shards[s]) > all / 4);
	}
	wait_owners(c, true);
	/* at rest, the coordinator's ticks skip their walk of every
	 * listener: nothing changed */
	double q0 = clu_metric(c, quiet), f0 = clu_metric(c, full);
	int64_t qdl = kvt_now_ms() + FLEET_WAIT_MS;
	while (clu_metric(c, quiet) < q0 + 3) {
		assert_true(kvt_now_ms() < qdl);
		kvt_sleep_ms(200);
	}
	assert_true(q0 >= 0 && f0 > 0);
	long held[2] = {listeners(&c->shards[0]), listeners(&c->shards[1])};
	shard_use during[2] = {use_of(&c->shards[0]), use_of(&c->shards[1])};
	/* the absent engines were probed within the budget: a first probe
	 * each, then PROBE_RATE a second (and what 100 ms of quiet saved);
	 * without it, the back-offs of thousands of new listeners ask for
	 * several times that */
	double secs = (double)(kvt_now_ms() - t0) / 1000.0;
	for (int s = 0; s < 2; s++) {
		double n = shc_metric(&c->shards[s], made) - probes0[s];
		double w = shc_metric(&c->shards[s], waited) - waited0[s];
		double cap = (double)held[s] + PROBE_RATE * (secs + 0.2) + 1;
		printf("fleet: shard %d made %.0f probes in %.1f s (cap %.0f), "
		       "%.0f waited\n",
		       s, n, secs, cap, w);
		assert_true(n > (double)(held[s] - SIM_PODS * DP));
		assert_true(n <= cap);
		assert_true(w > 0);
	}

	/* the engines that are there are indexed as usual */
	uint32_t t[NTOK];
	char id[32];
	for (int p = 0; p < SIM_PODS; p++) {
		make_tokens(t, 100 + (uint32_t)p);
		clu_prefill(c, p, 1, t, NTOK);
		pod_id(p, id, sizeof(id));
		json_decref(wait_match(c, t, id, 1));
	}

	/* the fleet leaves: the shards give back what it took */
	write_file(c, path, 0);
	unregister_http(c);
	wait_listeners(c, SIM_PODS * DP);
	assert_int_equal(n_workers(c), SIM_PODS);
	kvt_sleep_ms(1000); /* sockets closed, memory trimmed */
	for (int s = 0; s < 2; s++) {
		shard_use after = use_of(&c->shards[s]);
		long n = listeners(&c->shards[s]);
		printf("fleet: shard %d %ld listeners, files %.0f -> %.0f -> "
		       "%.0f, %.0f unreachable, heap %ld -> %ld -> %ld KiB "
		       "(%ld listeners left)\n",
		       s, held[s], before[s].files, during[s].files,
		       after.files, during[s].unreachable, before[s].rss_kib,
		       during[s].rss_kib, after.rss_kib, n);
		/* the fleet's engines take no connection: their listeners
		 * hold no sockets (but for a probe in flight now and then),
		 * and say so ... */
		assert_true(during[s].unreachable >=
			    (double)(held[s] - SIM_PODS * DP));
		assert_true(during[s].files - before[s].files <
			    0.05 * (double)held[s]);
		/* ... and the descriptors are back, but for a few */
		assert_true(after.files <= before[s].files + 8);
		assert_true(after.unreachable == 0);
		long grew = during[s].rss_kib - before[s].rss_kib;
		assert_true(grew > 0);
		/* not under ASan, whose allocator adds to every block and
		 * keeps what is freed in quarantine: a listener takes less
		 * than 16 KiB, and most of it is given back - all but 4 MiB
		 * that stay: LMDB's write buffers (3 MiB, allocated when the
		 * store opens) are resident once a large transaction used
		 * them, and each request slot keeps a chunk of its arena */
#ifndef __SANITIZE_ADDRESS__
		assert_true(grew < 16 * held[s]);
		assert_true(after.rss_kib - before[s].rss_kib <
			    grew / 2 + 4096);
#endif
	}
	/* and what is left still works */
	make_tokens(t, 300);
	clu_prefill(c, 0, 0, t, NTOK);
	pod_id(0, id, sizeof(id));
	json_decref(wait_match(c, t, id, 0));
	kvt_tmpdir_remove(dir);
	free(path);
	free(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fleet, clu_test_setup,
					    clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
