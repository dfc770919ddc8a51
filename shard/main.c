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
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cli.h"
#include "clock.h"
#include "handler.h"
#include "httpd.h"
#include "index.h"
#include "ingest.h"
#include "lmdb_util.h"
#include "log.h"
#include "metrics.h"
#include "pending.h"
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
	int io_threads;
	kvs_store_opts store;
	kvg_config ingest;
	kvd_config pending;
	int pending_ttl_ms;
} shard_opts;

/* What a flag not given leaves; 0 in the store's or the ingest thread's
 * config is its default, quoted in the table's def. */
static const shard_opts shard_defaults = {
    .id = "shard-0",
    .listen = "tcp://127.0.0.1:7001",
    .log_level = KVI_LOG_INFO,
    .workers = 4,
    .io_threads = KVN_LOOPS_DEFAULT,
    .ingest.probe_rate = 500,
    .pending_ttl_ms = KVD_TTL_DEFAULT_MS,
};

static const kvi_flag shard_flag[] = {
    {"id", "NAME", "shard name in status and logs",
     KVI_FLAG_STR(shard_opts, id)},
    {"listen", "URL",
     "address for the coordinator: tcp://host:port, or on its host ipc:///path",
     KVI_FLAG_STR(shard_opts, listen)},
    {"data-dir", "DIR", "LMDB directory (created if missing)",
     KVI_FLAG_STR(shard_opts, data_dir)},
    {"metrics", "HOST:PORT", "serve /metrics, /health and /ready",
     KVI_FLAG_STR(shard_opts, metrics)},
    {"workers", "N", "threads for requests that may block",
     KVI_FLAG_INT(shard_opts, workers, 1, KVN_WORKERS_MAX)},
    {"io-threads", "N", "threads reading requests and answering queries",
     KVI_FLAG_INT(shard_opts, io_threads, 1, KVN_LOOPS_MAX)},
    {"commit-ms", "N", "group commit interval",
     KVI_FLAG_INT(shard_opts, ingest.commit_ms, 1, 10000), .def = "20"},
    {"replay-timeout-ms", "N", "replay silence that fails it",
     KVI_FLAG_INT(shard_opts, ingest.replay_timeout_ms, 1, 600000),
     .def = "2000"},
    {"recover-concurrency", "N", "parallel /kv_recover fetches",
     KVI_FLAG_INT(shard_opts, ingest.recover_concurrency, 1, 256), .def = "4"},
    {"recover-timeout-ms", "N",
     "one /kv_recover fetch, whole: a big dump that keeps flowing",
     KVI_FLAG_INT(shard_opts, ingest.recover_timeout_ms, 1, 3600000),
     .def = "120000"},
    {"recover-connect-timeout-ms", "N", "connecting to a /kv_recover endpoint",
     KVI_FLAG_INT(shard_opts, ingest.recover_connect_ms, 1, 3600000),
     .def = "3000"},
    {"recover-first-byte-timeout-ms", "N",
     "from a /kv_recover request to the first byte of its answer",
     KVI_FLAG_INT(shard_opts, ingest.recover_first_byte_ms, 1, 3600000),
     .def = "5000"},
    {"recover-idle-timeout-ms", "N",
     "a /kv_recover answer that sends nothing for this long is cut off",
     KVI_FLAG_INT(shard_opts, ingest.recover_idle_ms, 1, 3600000),
     .def = "5000"},
    {"listener-max-entries", "N",
     "the most entries /kv_recover may give one listener; an answer "
     "storing more blocks is refused whole",
     KVI_FLAG_INT(shard_opts, ingest.listener_max_entries, 1, 1L << 40),
     .def = "4000000"},
    {"handoff-rate", "N",
     "entries per second a hand-off takes from the old owner; 0: no limit",
     KVI_FLAG_INT(shard_opts, ingest.handoff_rate, 0, 1L << 40), .def = "0"},
    {"backlog-max-mb", "N",
     "live batches queued over all listeners, recovering or behind",
     KVI_FLAG_INT(shard_opts, ingest.backlog_max_bytes, 1, 1 << 20),
     .shift = 20, .def = "256"},
    {"listener-backlog-max-mb", "N",
     "the same for one listener; past either, its queue is dropped and "
     "repaired from its watermark",
     KVI_FLAG_INT(shard_opts, ingest.listener_backlog_max_bytes, 1, 1 << 20),
     .shift = 20, .def = "64"},
    {"map-size-mb", "N", "initial LMDB map; grows",
     KVI_FLAG_INT(shard_opts, store.map_size, 1, 1 << 24), .shift = 20,
     .def = "1024"},
    {"max-map-size-mb", "N", "LMDB map limit; 0: none",
     KVI_FLAG_INT(shard_opts, store.max_map_size, 0, 1 << 24), .shift = 20,
     .def = "0"},
    {"no-sync", NULL, "no fsync per commit (survives kill -9, not power loss)",
     KVI_FLAG_BOOL(shard_opts, store.no_sync)},
    {"fail-on-corrupt", NULL,
     "exit on a corrupt store instead of moving it aside and starting "
     "empty",
     KVI_FLAG_BOOL(shard_opts, fail_on_corrupt)},
    {"reconnect-max-ms", "N",
     "ceiling of the back-off reconnecting to an engine that is gone",
     KVI_FLAG_INT(shard_opts, ingest.reconnect_max_ms, 100, 3600000),
     .def = "30000"},
    {"probe-rate", "N",
     "probes/s of engines that are not there, beyond each listener's "
     "first; 0: no cap",
     KVI_FLAG_INT(shard_opts, ingest.probe_rate, 0, 1000000), .def = "500"},
    {"pending-max", "N",
     "pending entries from routed requests, for the shard; past it the "
     "oldest go",
     KVI_FLAG_INT(shard_opts, pending.max_entries, 1, 1L << 31),
     .def = "1048576"},
    {"pending-per-listener", "N",
     "pending entries for one listener; past it its oldest go, and a "
     "routed request keeps its first N blocks",
     KVI_FLAG_INT(shard_opts, pending.max_per_listener, 1, 1L << 31),
     .def = "65536"},
    {"pending-ttl-ms", "N",
     "how long a routed block stays pending when the request does not "
     "say",
     KVI_FLAG_INT(shard_opts, pending_ttl_ms, 1, KVD_TTL_MAX_MS),
     .def = "10000"},
    {"rpc-secret-file", "PATH",
     "require this secret in every request, and send it to other shards",
     KVI_FLAG_STR(shard_opts, rpc_secret_file)},
    {"log-level", "LEVEL", "debug, info, warn, error",
     KVI_FLAG_FN(kvi_flag_log_level), .off = offsetof(shard_opts, log_level),
     .def = "info"},
    {"log-file", "PATH", "log there instead of standard error",
     KVI_FLAG_STR(shard_opts, log_file)},
};

static const kvi_flags shard_flags = {
    .prog = "kvindex-shard",
    .synopsis = "--data-dir DIR [options]",
    .summary = "Follows the KV-cache events of the engine ranks "
	       "(listeners) the coordinator assigns it, keeps their blocks in "
	       "an index in memory and durable in LMDB, and answers the "
	       "coordinator's queries about them.",
    .flag = shard_flag,
    .n = sizeof(shard_flag) / sizeof(shard_flag[0]),
    .defaults = &shard_defaults,
    .size = sizeof(shard_opts),
};

/* shard_parse fills o from the command line as kvi_flags_parse does (0,
 * 1 after --help, -1), and requires --data-dir. */
static int
shard_parse(int argc, char **argv, shard_opts *o)
{
	int rc = kvi_flags_parse(&shard_flags, o, argc, argv);
	if (rc != 0) {
		return rc;
	}
	if (o->data_dir == NULL) {
		fprintf(stderr, "kvindex-shard: --data-dir is required\n");
		return -1;
	}
	o->store.dir = o->data_dir;
	o->ingest.shard_id = o->id;
	return 0;
}

/* shard_open_state opens the store and loads it into a fresh index,
 * moving a corrupt store aside once (*quarantined) unless told to fail. */
static kvi_err
shard_open_state(shard_opts *o, kvs_store **store, kvx_index **idx,
		 kvg_ingest **ingest, kvi_metrics *metrics, bool *quarantined)
{
	char err[512], qdir[600], qmsg[1100];
	kvi_log_quote(qdir, sizeof(qdir), o->data_dir);
	if (kvi_mdb_file_empty(o->data_dir)) {
		kvi_log(KVI_LOG_WARN, "store_empty",
			"dir=%s reason=\"data.mdb is 0 bytes: cut to nothing, "
			"or never written\" note=\"starting with an empty "
			"store; listeners must be assigned again and are "
			"rebuilt from the engines\"",
			qdir);
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		err[0] = '\0';
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
			"dir=%s error=\"%s\" msg=%s", qdir, kvi_strerror(rv),
			kvi_log_quote(qmsg, sizeof(qmsg), err));
		if (rv == KVI_ECORRUPT && o->fail_on_corrupt) {
			kvi_log(KVI_LOG_ERROR, "store_corrupt_exit",
				"note=\"--fail-on-corrupt: the store is left "
				"where it is, and the shard exits\"");
		}
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
			qdir, kvi_log_quote(qmsg, sizeof(qmsg), moved));
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
 * a listener whose engine is up takes four descriptors (none while its
 * engine takes no connection), and the next assignments would fail. */
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

/* shard_rpc_metrics: the request service's counters (service.h), by
 * request kind, and the requests it refused before any handler. */
static void
shard_rpc_metrics(void *arg, kvi_metrics_out *out)
{
	kvn_stats st;
	kvn_service_stats(arg, &st);
	static const struct {
		const char *name, *help;
		size_t off;
		double scale;
	} by_kind[] = {
	    {"kvindex_shard_rpc_requests_total",
	     "Coordinator requests handled, by kind.",
	     offsetof(kvn_stats, requests), 1},
	    {"kvindex_shard_rpc_errors_total",
	     "Coordinator requests answered with an error, by kind.",
	     offsetof(kvn_stats, errors), 1},
	    {"kvindex_shard_rpc_handler_seconds_total",
	     "Time spent answering coordinator requests, by kind.",
	     offsetof(kvn_stats, handler_us), 1e-6},
	};
	for (size_t f = 0; f < sizeof(by_kind) / sizeof(by_kind[0]); f++) {
		const uint64_t *v =
		    (const uint64_t *)((const char *)&st + by_kind[f].off);
		kvi_metrics_out_family(out, by_kind[f].name, by_kind[f].help,
				       KVI_METRIC_COUNTER);
		for (int k = 0; k < KVN_KIND_COUNT; k++) {
			kvi_label l = {"kind", kvn_kind_name((kvn_kind)k)};
			kvi_metrics_out_sample(out, by_kind[f].name, &l, 1,
					       (double)v[k] * by_kind[f].scale);
		}
	}
	const struct {
		const char *reason;
		uint64_t n;
	} refused[] = {
	    {"malformed", st.malformed},
	    {"version_mismatch", st.version_mismatches},
	    {"no_body", st.no_body},
	    {"bad_response", st.bad_responses},
	    {"send_failure", st.send_failures},
	};
	const char *name = "kvindex_shard_rpc_refused_total";
	kvi_metrics_out_family(out, name,
			       "Requests refused or lost outside any handler: "
			       "undecodable, of another protocol version, "
			       "without a body, answers that could not be "
			       "packed, replies that could not be sent.",
			       KVI_METRIC_COUNTER);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		kvi_label l = {"reason", refused[i].reason};
		kvi_metrics_out_sample_i64(out, name, &l, 1,
					   (int64_t)refused[i].n);
	}
}

/* A shard's parts, as main wires them together and takes them apart. */
typedef struct shard {
	shard_opts o;
	sigset_t sigs; /* the signals that stop it, blocked in every thread */
	kvi_metrics *metrics;
	kvs_store *store;
	kvx_index *idx;
	kvg_ingest *ingest;
	kvh_shard *handler;
	kvn_service *svc;
	kvi_httpd *httpd;
	kvd_pending *pending; /* routed requests' predictions, memory only */
} shard;

/* shard_setup reads the command line into s->o and readies the process:
 * the log, the RPC secret, the open-file limit and the signals. Returns
 * -1 when the shard is to run, else the exit status (0 after --help, 2
 * for a bad command line or secret). */
static int
shard_setup(shard *s, int argc, char **argv)
{
	int rc = shard_parse(argc, argv, &s->o);
	if (rc != 0) {
		if (rc < 0) {
			kvi_flags_usage(stderr, &shard_flags);
		}
		return rc < 0 ? 2 : 0;
	}
	int log_fd = kvi_log_open_fd(s->o.log_file);
	if (log_fd < 0) {
		return 2;
	}
	kvi_log_setup(s->o.id, s->o.log_level, log_fd);
	char why[600];
	if (s->o.rpc_secret_file != NULL &&
	    kvp_secret_load(s->o.rpc_secret_file, why, sizeof(why)) != KVI_OK) {
		fprintf(stderr, "kvindex-shard: --rpc-secret-file %s\n", why);
		return 2;
	}
	/* Every listener holds a few descriptors (sockets, their mailboxes,
	 * its TCP connection): take all the descriptors the system allows. */
	kvi_nofile_raise();
	sigemptyset(&s->sigs);
	sigaddset(&s->sigs, SIGINT);
	sigaddset(&s->sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &s->sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	return -1;
}

/* shard_serve_metrics serves /metrics, /health and /ready on
 * --metrics. */
static kvi_err
shard_serve_metrics(shard *s)
{
	char err[512] = "";
	/* an operator's scrapes and probes: a few connections */
	kvi_httpd_config hc = {.max_conns = 256};
	s->httpd = kvi_httpd_alloc(&hc);
	kvi_httpd_route(s->httpd, "GET", "/metrics", shard_on_metrics,
			s->metrics);
	kvi_httpd_route(s->httpd, "GET", "/health", shard_on_health, NULL);
	/* this server starts once the index is loaded and the query
	 * service listens: answering means ready, unless the store
	 * cannot commit */
	kvi_httpd_route(s->httpd, "GET", "/ready", shard_on_ready, s->ingest);
	kvi_err rv =
	    kvi_httpd_start(s->httpd, s->o.metrics, 1, err, sizeof(err));
	if (rv != KVI_OK) {
		char q[600];
		kvi_log(KVI_LOG_ERROR, "metrics_failed", "addr=%s msg=%s",
			s->o.metrics, kvi_log_quote(q, sizeof(q), err));
	}
	return rv;
}

/* shard_wire opens the store and loads it into the index, then starts the
 * ingest thread, the request service and the metrics endpoint; false when
 * a part failed (logged), leaving what was made for shard_close. */
static bool
shard_wire(shard *s)
{
	double t0 = kvi_now_s();
	s->metrics = kvi_metrics_alloc();
	s->pending = kvd_pending_alloc(&s->o.pending);
	s->o.ingest.pending = s->pending;
	char err[512] = "";
	bool quarantined = false;
	kvi_err rv = shard_open_state(&s->o, &s->store, &s->idx, &s->ingest,
				      s->metrics, &quarantined);
	kvi_gauge *g_quarantined;
	kvi_metrics_gauge_add(s->metrics, "kvindex_store_quarantined",
			      "1 when a corrupt store was moved aside at start "
			      "and the shard began empty.",
			      KVI_GAUGE_INT, &g_quarantined);
	kvi_gauge_set(g_quarantined, quarantined);
	kvi_metrics_collector_add(s->metrics, shard_files_metrics, NULL);
	kvi_metrics_process_add(s->metrics);
	if (rv != KVI_OK) {
		return false;
	}
	kvx_stats xs;
	kvx_index_stats(s->idx, &xs);
	s->handler = kvh_shard_alloc(s->idx, s->ingest, s->pending,
				     (uint32_t)s->o.pending_ttl_ms, s->metrics);
	if ((rv = kvg_ingest_start(s->ingest, err, sizeof(err))) != KVI_OK ||
	    (rv = kvn_service_open(
		 &(kvn_service_opts){.url = s->o.listen,
				     .workers = s->o.workers,
				     .loops = s->o.io_threads,
				     .inline_kinds = kvh_shard_inline_kinds()},
		 kvh_shard_handler(), s->handler, &s->svc, err, sizeof(err))) !=
		KVI_OK) {
		char q[600];
		kvi_log(KVI_LOG_ERROR, "start_failed", "error=\"%s\" msg=%s",
			kvi_strerror(rv), kvi_log_quote(q, sizeof(q), err));
		return false;
	}
	kvi_metrics_collector_add(s->metrics, shard_rpc_metrics, s->svc);
	kvi_log(KVI_LOG_INFO, "serving",
		"listen=%s data_dir=%s listeners=%" PRIu64 " entries=%" PRIu64
		" load_seconds=%.3f",
		s->o.listen, s->o.data_dir, xs.listeners, xs.entries,
		kvi_now_s() - t0);
	if (s->o.metrics != NULL && shard_serve_metrics(s) != KVI_OK) {
		return false;
	}
	/* The ports bound, given port 0 or not: what a supervisor or a test
	 * that let the kernel choose reads. */
	kvi_log(KVI_LOG_INFO, "listening", "rpc=%s rpc_port=%d metrics_port=%u",
		s->o.listen, kvn_service_port(s->svc),
		s->httpd != NULL ? kvi_httpd_port(s->httpd) : 0);
	return true;
}

/* shard_run serves until SIGINT or SIGTERM. */
static void
shard_run(shard *s)
{
	int sig = 0;
	sigwait(&s->sigs, &sig);
	kvi_log(KVI_LOG_INFO, "stopping", "signal=%d", sig);
}

/* shard_close stops and frees what shard_wire made, in reverse. */
static void
shard_close(shard *s)
{
	kvi_httpd_stop(s->httpd);
	kvn_service_free(s->svc);
	kvg_ingest_free(s->ingest);
	kvh_shard_free(s->handler);
	kvi_httpd_free(s->httpd);
	kvd_pending_free(s->pending);
	kvx_index_free(s->idx);
	kvs_store_close(s->store);
	kvi_metrics_free(s->metrics);
}

int
main(int argc, char **argv)
{
	shard s = {0};
	int rc = shard_setup(&s, argc, argv);
	if (rc >= 0) {
		return rc;
	}
	int status = 1;
	if (shard_wire(&s)) {
		shard_run(&s);
		status = 0;
	}
	shard_close(&s);
	return status;
}
