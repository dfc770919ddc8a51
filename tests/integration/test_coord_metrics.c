/*
 * test_coord_metrics.c - the monitoring of deploy/monitoring/ against the
 * binaries' real /metrics.
 *
 * A whole cluster: the engine simulator, two shards, and a coordinator
 * that watches its pods on the test API server (--watch-namespace) and
 * leads with a Lease there (--leader-election-lease), so that it exports
 * every family docs/metrics.md lists, the Kubernetes and replica ones
 * included. Once it leads, the pods' listeners are active and a prefill
 * has been matched by a query, the coordinator's /metrics and each
 * shard's are written to files (KVI_METRICS_OUT: coordinator.prom,
 * shard-0.prom, shard-1.prom, kept for a look after the test), and
 * `deploy/monitoring/check.py metrics` checks them: `promtool check
 * metrics` passes on each, each binary exports exactly the families
 * docs/metrics.md lists for it, and every series the alerting rules and
 * the dashboard name is exported, with the labels (and fixed label values)
 * their queries use; and `check.py catches` shows that the same check
 * refuses expressions with a mistake of each kind.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "kube_check.h"

#define NTOK 64

static kcluster kk;

/* scrape writes the Prometheus text at url to dir/name. */
static void
scrape(const char *url, const char *dir, const char *name)
{
	kvt_http_resp r;
	kvi_err rv = kvt_http_get(url, 5000, &r);
	if (rv != KVI_OK || r.status != 200) {
		long st = r.status;
		kvt_http_resp_fini(&r);
		fail_msg("GET %s: %s, status %ld", url, kvi_strerror(rv), st);
	}
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(r.body, 1, r.len, f), r.len);
	assert_int_equal(fclose(f), 0);
	kvt_http_resp_fini(&r);
}

/* check runs check.py's command cmd on the scrapes in dir. */
static void
check(const char *cmd, const char *dir)
{
	char line[4096];
	snprintf(line, sizeof(line),
		 "'%s' '%s' %s --coordinator '%s/coordinator.prom' "
		 "--shard '%s/shard-0.prom' --shard '%s/shard-1.prom'",
		 KVI_MON_PYTHON, KVI_MON_CHECK, cmd, dir, dir, dir);
	int rc = system(line);
	if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
		fail_msg("check.py %s failed (%d); the scrapes are in %s", cmd,
			 rc, dir);
	}
}

static bool
leads(void *arg)
{
	return clu_metric(arg, "kvindex_coordinator_leader") == 1 &&
	       clu_metric(arg, "kvindex_coord_kube_synced") == 1;
}

static void
test_metrics_checked(void **state)
{
	(void)state;
	kcluster *k = &kk;
	kc_start(k, 2, "tok-1");
	kvt_sim *sim = &k->c.sim;
	kc_put(k, "engine-0", sim, 0, "127.0.0.1", true, 0, "engine");
	kc_put(k, "engine-1", sim, 1, "127.0.0.1", true, 0, "engine");
	kc_token_file(k, "tok-1");
	const char *extra[] = {"--watch-namespace",
			       KC_NS,
			       "--watch-label",
			       "app=engine",
			       "--watch-dp-size",
			       "2",
			       "--kube-api",
			       k->api.url,
			       "--kube-token-file",
			       k->token_path,
			       "--leader-election-lease",
			       "default/kvindex-coordinator",
			       "--identity",
			       "coord-a",
			       "--leader-election-lease-duration-ms",
			       "3000",
			       "--leader-election-renew-deadline-ms",
			       "2000",
			       "--leader-election-retry-period-ms",
			       "500",
			       NULL};
	clu_coord(&k->c, false, extra);
	cluster *c = &k->c;
	if (!kvt_wait_until(leads, c, CLU_WAIT_MS)) {
		fail_msg("the coordinator neither leads nor synced its pods; "
			 "see %s",
			 c->log_path);
	}
	clu_wait_active(c, 4, CLU_WAIT_MS);
	/* a query that matches, so that the histograms have seen one */
	uint32_t t[NTOK];
	kc_tokens(t, NTOK, 1);
	kc_prefill(sim, 0, 1, t, NTOK);
	kc_wait_matched(k, t, NTOK, "engine-0", 1, NTOK);

	const char *dir = KVI_METRICS_OUT;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		fail_msg("mkdir %s: %s", dir, strerror(errno));
	}
	char url[160];
	snprintf(url, sizeof(url), "%s/metrics", c->base);
	scrape(url, dir, "coordinator.prom");
	for (int i = 0; i < c->n_shards; i++) {
		char name[32];
		snprintf(url, sizeof(url), "http://%s/metrics",
			 c->shards[i].metrics);
		snprintf(name, sizeof(name), "shard-%d.prom", i);
		scrape(url, dir, name);
	}

	check("metrics --promtool '" KVI_PROMTOOL "'", dir);
	/* and the check is not blind: given the same scrapes, it refuses
	 * expressions with a mistake of each kind */
	check("catches", dir);
}

static int
teardown(void **state)
{
	(void)state;
	kc_cleanup(&kk);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_metrics_checked, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
