/*
 * kvindex-shard - owns listeners, indexes their events, keeps the index
 * durable in LMDB and answers queries for them.
 *
 * main parses the flags, opens the store (moving a corrupt one aside
 * unless told not to), loads it into the index, then starts the ingest
 * thread, the request service (nng) and the metrics endpoint, and waits
 * for SIGINT or SIGTERM.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cli.h"
#include "handler.h"
#include "httpd.h"
#include "index.h"
#include "ingest.h"
#include "lmdb_util.h"
#include "log.h"
#include "metrics.h"
#include "rpc.h"
#include "service.h"
#include "store.h"

typedef struct shard_opts {
	const char *id;
	const char *listen;
	const char *data_dir;
	const char *metrics;
	const char *rpc_secret_file;
	const char *log_file;
	kvi_log_level log_level;
	bool fail_on_corrupt;
	int workers;
	kvs_store_opts store;
	kvg_config ingest;
} shard_opts;

static void
shard_usage(FILE *f)
{
	fputs(
	    "usage: kvindex-shard --data-dir DIR [options]\n"
	    "\n"
	    "  --id NAME               shard name in status and logs "
	    "(default shard-0)\n"
	    "  --listen URL            nng address for the coordinator\n"
	    "                          (default tcp://127.0.0.1:7001; on\n"
	    "                          the coordinator's host also\n"
	    "                          ipc:///path)\n"
	    "  --data-dir DIR          LMDB directory (created if missing)\n"
	    "  --metrics HOST:PORT     serve /metrics, /health and /ready\n"
	    "  --workers N             concurrent requests (default 4)\n"
	    "  --commit-ms N           group commit interval (default 20)\n"
	    "  --replay-timeout-ms N   replay silence that fails it (2000)\n"
	    "  --recover-concurrency N parallel /kv_recover fetches (4)\n"
	    "  --recover-timeout-ms N  one /kv_recover fetch (120000)\n"
	    "  --handoff-rate N        entries per second a hand-off takes\n"
	    "                          from the old owner (0: no limit)\n"
	    "  --backlog-max-mb N      live batches queued, over all "
	    "listeners\n"
	    "                          (recovering or behind; 256)\n"
	    "  --listener-backlog-max-mb N  the same for one listener (64);\n"
	    "                          past either, its queue is dropped and\n"
	    "                          repaired from its watermark\n"
	    "  --map-size-mb N         initial LMDB map (1024; grows)\n"
	    "  --max-map-size-mb N     LMDB map limit (0: none)\n"
	    "  --no-sync               no fsync per commit (survives kill -9,\n"
	    "                          not power loss)\n"
	    "  --fail-on-corrupt       exit on a corrupt store instead of\n"
	    "                          moving it aside and starting empty\n"
	    "  --reconnect-max-ms N    ceiling of the back-off reconnecting "
	    "to\n"
	    "                          an engine that is gone (30000)\n"
	    "  --rpc-secret-file PATH  require this secret in every request,\n"
	    "                          and send it to other shards\n"
	    "  --log-level LEVEL       debug, info, warn, error (info)\n"
	    "  --log-file PATH         log there instead of standard error\n",
	    f);
}

static int
shard_parse(int argc, char **argv, shard_opts *o)
{
	static const struct option longopts[] = {
	    {"id", required_argument, NULL, 'i'},
	    {"listen", required_argument, NULL, 'l'},
	    {"data-dir", required_argument, NULL, 'd'},
	    {"metrics", required_argument, NULL, 'm'},
	    {"workers", required_argument, NULL, 'w'},
	    {"commit-ms", required_argument, NULL, 'c'},
	    {"replay-timeout-ms", required_argument, NULL, 'r'},
	    {"recover-concurrency", required_argument, NULL, 'R'},
	    {"recover-timeout-ms", required_argument, NULL, 'T'},
	    {"backlog-max-mb", required_argument, NULL, 'b'},
	    {"handoff-rate", required_argument, NULL, 'H'},
	    {"map-size-mb", required_argument, NULL, 'M'},
	    {"max-map-size-mb", required_argument, NULL, 'X'},
	    {"no-sync", no_argument, NULL, 'n'},
	    {"fail-on-corrupt", no_argument, NULL, 'F'},
	    {"log-level", required_argument, NULL, 'L'},
	    {"log-file", required_argument, NULL, 'f'},
	    {"rpc-secret-file", required_argument, NULL, 'S'},
	    {"listener-backlog-max-mb", required_argument, NULL, 'B'},
	    {"reconnect-max-ms", required_argument, NULL, 'C'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	*o = (shard_opts){.id = "shard-0",
			  .listen = "tcp://127.0.0.1:7001",
			  .log_level = KVI_LOG_INFO,
			  .workers = 4};
	int c;
	long v;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		int rc = 0;
		switch (c) {
		case 'i':
			o->id = optarg;
			break;
		case 'l':
			o->listen = optarg;
			break;
		case 'd':
			o->data_dir = optarg;
			break;
		case 'm':
			o->metrics = optarg;
			break;
		case 'f':
			o->log_file = optarg;
			break;
		case 'n':
			o->store.no_sync = true;
			break;
		case 'F':
			o->fail_on_corrupt = true;
			break;
		case 'w':
			rc = kvi_cli_long("kvindex-shard", "--workers", optarg,
					  1, 256, &v);
			o->workers = (int)v;
			break;
		case 'c':
			rc = kvi_cli_long("kvindex-shard", "--commit-ms",
					  optarg, 1, 10000, &v);
			o->ingest.commit_ms = (int)v;
			break;
		case 'r':
			rc =
			    kvi_cli_long("kvindex-shard", "--replay-timeout-ms",
					 optarg, 1, 600000, &v);
			o->ingest.replay_timeout_ms = (int)v;
			break;
		case 'R':
			rc = kvi_cli_long("kvindex-shard",
					  "--recover-concurrency", optarg, 1,
					  256, &v);
			o->ingest.recover_concurrency = (int)v;
			break;
		case 'T':
			rc = kvi_cli_long("kvindex-shard",
					  "--recover-timeout-ms", optarg, 1,
					  3600000, &v);
			o->ingest.recover_timeout_ms = v;
			break;
		case 'H':
			rc = kvi_cli_long("kvindex-shard", "--handoff-rate",
					  optarg, 0, 1L << 40, &v);
			o->ingest.handoff_rate = (uint64_t)v;
			break;
		case 'b':
			rc = kvi_cli_long("kvindex-shard", "--backlog-max-mb",
					  optarg, 1, 1 << 20, &v);
			o->ingest.backlog_max_bytes = (size_t)v << 20;
			break;
		case 'M':
			rc = kvi_cli_long("kvindex-shard", "--map-size-mb",
					  optarg, 1, 1 << 24, &v);
			o->store.map_size = (size_t)v << 20;
			break;
		case 'X':
			rc = kvi_cli_long("kvindex-shard", "--max-map-size-mb",
					  optarg, 0, 1 << 24, &v);
			o->store.max_map_size = (size_t)v << 20;
			break;
		case 'L':
			if (kvi_log_parse_level(optarg, &o->log_level) !=
			    KVI_OK) {
				fprintf(stderr,
					"kvindex-shard: bad log level %s\n",
					optarg);
				rc = -1;
			}
			break;
		case 'S':
			o->rpc_secret_file = optarg;
			break;
		case 'C':
			rc = kvi_cli_long("kvindex-shard", "--reconnect-max-ms",
					  optarg, 100, 3600000, &v);
			o->ingest.reconnect_max_ms = (int)v;
			break;
		case 'B':
			rc = kvi_cli_long("kvindex-shard",
					  "--listener-backlog-max-mb", optarg,
					  1, 1 << 20, &v);
			o->ingest.listener_backlog_max_bytes = (size_t)v << 20;
			break;
		case 'h':
			shard_usage(stdout);
			exit(0);
		default:
			rc = -1;
			break;
		}
		if (rc != 0) {
			return -1;
		}
	}
	if (optind != argc || o->data_dir == NULL) {
		fprintf(stderr, "kvindex-shard: --data-dir is required\n");
		return -1;
	}
	o->store.dir = o->data_dir;
	o->ingest.shard_id = o->id;
	return 0;
}

static double
shard_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* shard_open_state opens the store and loads it into a fresh index,
 * moving a corrupt store aside once (*quarantined) unless told to fail. */
static kvi_err
shard_open_state(shard_opts *o, kvs_store **store, kvx_index **idx,
		 kvg_ingest **ingest, kvi_metrics *metrics, bool *quarantined)
{
	char err[512];
	for (int attempt = 0; attempt < 2; attempt++) {
		kvi_err rv = kvs_store_open(&o->store, store, err, sizeof(err));
		if (rv == KVI_OK) {
			*idx = kvx_index_alloc();
			o->ingest.idx = *idx;
			o->ingest.store = *store;
			o->ingest.metrics = metrics;
			rv = kvg_ingest_open(&o->ingest, ingest, err,
					     sizeof(err));
			if (rv == KVI_OK) {
				return KVI_OK;
			}
			kvx_index_free(*idx);
			kvs_store_close(*store);
		}
		kvi_log(KVI_LOG_ERROR, "store_open_failed",
			"dir=%s error=%s msg=\"%s\"", o->data_dir,
			kvi_strerror(rv), err);
		if (rv != KVI_ECORRUPT || o->fail_on_corrupt || attempt > 0) {
			return rv;
		}
		char moved[4200];
		if (kvi_store_quarantine(o->data_dir, moved, sizeof(moved)) !=
		    KVI_OK) {
			return rv;
		}
		*quarantined = true;
		kvi_log(KVI_LOG_ERROR, "store_quarantined",
			"dir=%s moved_to=%s note=\"starting empty; listeners "
			"must be assigned again and are rebuilt from the "
			"engines\"",
			o->data_dir, moved);
	}
	return KVI_ECORRUPT;
}

static void
shard_on_metrics(void *arg, kvi_http_req *req)
{
	size_t len;
	char *text = kvi_metrics_render(arg, &len);
	kvi_http_reply(req, 200, KVI_METRICS_CONTENT_TYPE, text, len);
	kvi_free(text);
}

static void
shard_on_health(void *arg, kvi_http_req *req)
{
	(void)arg;
	kvi_http_reply(req, 200, "application/json", "{\"ok\":true}", 11);
}

/* Past this share of the open-file limit the shard says so in /ready:
 * each listener takes about three descriptors, and the next assignments
 * would fail. */
#define SHARD_FILES_HIGH 0.95

/* shard_on_ready: 503 with the reason while the store cannot commit (the
 * index is served, and no longer follows the engines) or the shard is
 * about out of descriptors. */
static void
shard_on_ready(void *arg, kvi_http_req *req)
{
	char why[300], reason[400] = "";
	long limit, open = kvi_open_files(&limit);
	if (kvg_ingest_store_failing(arg, why, sizeof(why))) {
		snprintf(reason, sizeof(reason), "the store cannot commit: %s",
			 why);
	} else if ((limit > 0 && open >= (long)(SHARD_FILES_HIGH * limit)) ||
		   kvg_ingest_files_out(arg, 60000)) {
		snprintf(reason, sizeof(reason),
			 "%ld of %ld open files used, and new listeners fail "
			 "or would: raise the limit (ulimit -n) or add shards",
			 open, limit);
	}
	if (reason[0] == '\0') {
		shard_on_health(NULL, req);
		return;
	}
	kvi_http_reply_json(
	    req, 503, json_pack("{s:b,s:s}", "ready", 0, "reason", reason));
}

/* shard_files_metrics: descriptors in use and the limit. */
static void
shard_files_metrics(void *arg, kvi_metrics_out *out)
{
	(void)arg;
	long limit, open = kvi_open_files(&limit);
	kvi_metrics_out_family(out, "kvindex_shard_open_files",
			       "Descriptors the shard has open.",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample_i64(out, "kvindex_shard_open_files", NULL, 0,
				   open);
	kvi_metrics_out_family(out, "kvindex_shard_open_files_limit",
			       "The shard's open-file limit (soft).",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample_i64(out, "kvindex_shard_open_files_limit", NULL,
				   0, limit);
}

int
main(int argc, char **argv)
{
	shard_opts o;
	if (shard_parse(argc, argv, &o) != 0) {
		shard_usage(stderr);
		return 2;
	}
	int log_fd = kvi_log_open_fd(o.log_file);
	if (log_fd < 0) {
		return 2;
	}
	kvi_log_setup(o.id, o.log_level, log_fd);
	char why[600];
	if (o.rpc_secret_file != NULL &&
	    kvp_secret_load(o.rpc_secret_file, why, sizeof(why)) != KVI_OK) {
		fprintf(stderr, "kvindex-shard: --rpc-secret-file %s\n", why);
		return 2;
	}
	/* Every listener holds a few descriptors (sockets, their mailboxes,
	 * its TCP connection): take all the descriptors the system allows. */
	kvi_nofile_raise();
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	double t0 = shard_now();
	kvi_metrics *metrics = kvi_metrics_alloc();
	kvs_store *store = NULL;
	kvx_index *idx = NULL;
	kvg_ingest *ingest = NULL;
	kvs_service *svc = NULL;
	kvi_httpd *httpd = NULL;
	kvh_shard *handler = NULL;
	int status = 1;
	char err[512] = "";
	bool quarantined = false;
	kvi_err rv =
	    shard_open_state(&o, &store, &idx, &ingest, metrics, &quarantined);
	kvi_gauge *g_quarantined;
	kvi_metrics_gauge_add(metrics, "kvindex_store_quarantined",
			      "1 when a corrupt store was moved aside at start "
			      "and the shard began empty.",
			      KVI_GAUGE_INT, &g_quarantined);
	kvi_gauge_set(g_quarantined, quarantined);
	kvi_metrics_collector_add(metrics, shard_files_metrics, NULL);
	if (rv != KVI_OK) {
		goto out;
	}
	kvx_stats xs;
	kvx_index_stats(idx, &xs);
	handler = kvh_shard_alloc(idx, ingest, metrics);
	if ((rv = kvg_ingest_start(ingest, err, sizeof(err))) != KVI_OK ||
	    (rv = kvs_service_start_inline(o.listen, o.workers,
					   kvh_shard_inline_kinds(),
					   kvh_shard_handler(), handler, &svc,
					   err, sizeof(err))) != KVI_OK) {
		kvi_log(KVI_LOG_ERROR, "start_failed", "error=%s msg=\"%s\"",
			kvi_strerror(rv), err);
		goto out;
	}
	kvi_log(KVI_LOG_INFO, "serving",
		"listen=%s data_dir=%s listeners=%" PRIu64 " entries=%" PRIu64
		" load_seconds=%.3f",
		o.listen, o.data_dir, xs.listeners, xs.entries,
		shard_now() - t0);
	if (o.metrics != NULL) {
		/* an operator's scrapes and probes: a few connections */
		kvi_httpd_config hc = {.max_conns = 256};
		httpd = kvi_httpd_alloc(&hc);
		kvi_httpd_route(httpd, "GET", "/metrics", shard_on_metrics,
				metrics);
		kvi_httpd_route(httpd, "GET", "/health", shard_on_health, NULL);
		/* this server starts once the index is loaded and the query
		 * service listens: answering means ready, unless the store
		 * cannot commit */
		kvi_httpd_route(httpd, "GET", "/ready", shard_on_ready, ingest);
		if ((rv = kvi_httpd_start(httpd, o.metrics, 1, err,
					  sizeof(err))) != KVI_OK) {
			kvi_log(KVI_LOG_ERROR, "metrics_failed",
				"addr=%s msg=\"%s\"", o.metrics, err);
			goto out;
		}
	}
	int sig = 0;
	sigwait(&sigs, &sig);
	kvi_log(KVI_LOG_INFO, "stopping", "signal=%d", sig);
	status = 0;
out:
	kvi_httpd_stop(httpd);
	kvs_service_free(svc);
	kvg_ingest_free(ingest);
	kvh_shard_free(handler);
	kvi_httpd_free(httpd);
	kvx_index_free(idx);
	kvs_store_close(store);
	kvi_metrics_free(metrics);
	return status;
}
