/*
 * kvindex-coordinator - turns pods into listeners, hands them to shards
 * and answers routers.
 *
 * main parses the flags, opens the coordinator store (--data-dir; a
 * corrupt one is moved aside and the coordinator starts without its HTTP
 * registrations and pins, loudly), connects to the shards, starts the
 * assigner, the discovery file watcher and the HTTP API, and waits for
 * SIGINT or SIGTERM.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "assigner.h"
#include "cli.h"
#include "cstore.h"
#include "discovery_file.h"
#include "http_api.h"
#include "httpd.h"
#include "kube_watch.h"
#include "lease.h"
#include "lmdb_util.h"
#include "log.h"
#include "metrics.h"
#include "query.h"
#include "registry.h"
#include "replica.h"
#include "rpc.h"
#include "shardset.h"

#define COORD_MAX_SHARDS 256
#define COORD_MAX_NS     64

typedef struct coord_opts {
	const char *http;
	int http_threads;
	int max_conns; /* 0: half the open-file limit */
	char *shard_ids[COORD_MAX_SHARDS], *shard_urls[COORD_MAX_SHARDS];
	size_t n_shards;
	const char *discovery_file;
	uint32_t dp_size;
	uint32_t max_dp_size;
	const char *data_dir;
	const char *admin_token_file;
	const char *register_token_file;
	const char *rpc_secret_file;
	const char *log_file;
	kvi_log_level log_level;
	size_t max_body;
	kvc_query_config query;
	int query_batch, query_inflight; /* coalescing per shard (qbatch.h) */
	kvc_assigner_config assign;
	char *namespaces[COORD_MAX_NS];
	kvc_kube_config kube;
	const char *lease;    /* NAMESPACE/NAME; NULL: no leader election */
	const char *identity; /* NULL: the host name */
	const char *advertise;
	kvc_lease_config le;
} coord_opts;

/* coord_shards adds the shards of one --shards value: ID=URL,... */
static int
coord_shards(const char *prog, const kvi_flag *f, const char *arg, void *opts)
{
	coord_opts *o = opts;
	char *copy = kvi_strdup(arg), *save = NULL;
	int rc = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (eq == NULL || eq == tok || eq[1] == '\0') {
			fprintf(stderr, "%s: --%s: %s is not ID=URL\n", prog,
				f->name, tok);
			rc = -1;
			break;
		}
		if (o->n_shards == COORD_MAX_SHARDS) {
			fprintf(stderr, "%s: --%s: more than %d shards\n", prog,
				f->name, COORD_MAX_SHARDS);
			rc = -1;
			break;
		}
		*eq = '\0';
		o->shard_ids[o->n_shards] = kvi_strdup(tok);
		o->shard_urls[o->n_shards] = kvi_strdup(eq + 1);
		o->n_shards++;
	}
	kvi_free(copy);
	return rc;
}

/* coord_namespaces adds the namespaces of one --watch-namespace value. */
static int
coord_namespaces(const char *prog, const kvi_flag *f, const char *arg,
		 void *opts)
{
	(void)f;
	coord_opts *o = opts;
	char *copy = kvi_strdup(arg), *save = NULL;
	int rc = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->kube.n_namespaces == COORD_MAX_NS) {
			fprintf(stderr,
				"%s: more than %d namespaces to watch\n", prog,
				COORD_MAX_NS);
			rc = -1;
			break;
		}
		o->namespaces[o->kube.n_namespaces++] = kvi_strdup(tok);
	}
	kvi_free(copy);
	return rc;
}

/* coord_replay_port: a pod without the annotation has this replay port
 * (without the flag, none). */
static int
coord_replay_port(const char *prog, const kvi_flag *f, const char *arg,
		  void *opts)
{
	coord_opts *o = opts;
	long v;
	if (kvi_flag_number(prog, f, arg, &v) != 0) {
		return -1;
	}
	o->kube.defaults.replay_port = (uint32_t)v;
	o->kube.defaults.has_replay_port = true;
	return 0;
}

/* coord_recover_port: the same for the /kv_recover port. */
static int
coord_recover_port(const char *prog, const kvi_flag *f, const char *arg,
		   void *opts)
{
	coord_opts *o = opts;
	long v;
	if (kvi_flag_number(prog, f, arg, &v) != 0) {
		return -1;
	}
	o->kube.defaults.recover_port = (uint32_t)v;
	o->kube.defaults.has_recover_port = true;
	return 0;
}

/* coord_failover_grace: 0, like -1, is never (to the assigner 0 is its
 * default). */
static int
coord_failover_grace(const char *prog, const kvi_flag *f, const char *arg,
		     void *opts)
{
	coord_opts *o = opts;
	long v;
	if (kvi_flag_number(prog, f, arg, &v) != 0) {
		return -1;
	}
	o->assign.failover_grace_ms = v == 0 ? -1 : (int)v;
	return 0;
}

/* What a flag not given leaves; 0 in a module's config is its default,
 * quoted in the table's def. */
static const coord_opts coord_defaults = {
    .http = "127.0.0.1:8080",
    .http_threads = 2,
    .dp_size = 1,
    .max_dp_size = KVC_MAX_DP_SIZE_DEFAULT,
    .log_level = KVI_LOG_INFO,
    .max_body = KVI_HTTPD_DEFAULT_MAX_BODY,
    .kube = {.defaults = {.zmq_port = 5557,
			  .block_size = 16,
			  .model_label = KVC_KUBE_ANN_MODEL},
	     .not_ready_grace_ms = 30000},
};

static const kvi_flag coord_flag[] = {
    {"shards", "ID=URL,...", "shards (nng addresses); repeatable",
     KVI_FLAG_FN(coord_shards)},
    {"http", "HOST:PORT", "HTTP API", KVI_FLAG_STR(coord_opts, http)},
    {"http-threads", "N", "HTTP loop threads",
     KVI_FLAG_INT(coord_opts, http_threads, 1, KVI_HTTPD_MAX_THREADS)},
    {"max-connections", "N",
     "open HTTP connections; past them a new one gets 503",
     KVI_FLAG_INT(coord_opts, max_conns, 1, 1L << 24),
     .def = "half the open-file limit"},
    {"discovery-file", "PATH", "static pod list, re-read on change",
     KVI_FLAG_STR(coord_opts, discovery_file)},
    {"watch-dp-size", "N", "ranks of a pod that gives no dp_size",
     KVI_FLAG_INT(coord_opts, dp_size, 1, 65536)},
    {"max-dp-size", "N",
     "ranks a pod may have, from any source; more is refused",
     KVI_FLAG_INT(coord_opts, max_dp_size, 1, 65536)},

    KVI_FLAG_SECTION("Kubernetes (pods Ready, with an IP, not terminating):"),
    {"watch-namespace", "NS", "watch pods there; repeatable",
     KVI_FLAG_FN(coord_namespaces)},
    {"watch-label", "SELECTOR", "label selector",
     KVI_FLAG_STR(coord_opts, kube.label_selector), .def = "every pod"},
    {"watch-zmq-port", "N", "event port of rank 0",
     KVI_FLAG_INT(coord_opts, kube.defaults.zmq_port, 1, 65535)},
    {"watch-replay-port", "N", "replay port of rank 0",
     KVI_FLAG_FN(coord_replay_port), .min = 1, .max = 65535, .def = "none"},
    {"watch-recover-port", "N", "/kv_recover port of rank 0",
     KVI_FLAG_FN(coord_recover_port), .min = 1, .max = 65535, .def = "none"},
    {"watch-model-label", "L", "label naming the model",
     KVI_FLAG_STR(coord_opts, kube.defaults.model_label)},
    {"watch-block-size", "N", "tokens per block",
     KVI_FLAG_INT(coord_opts, kube.defaults.block_size, 1, 1L << 20)},
    {"watch-not-ready-grace-ms", "N",
     "NotReady time before a pod is deregistered",
     KVI_FLAG_INT(coord_opts, kube.not_ready_grace_ms, 1, 86400000L)},
    {"kube-api", "URL", "API server", KVI_FLAG_STR(coord_opts, kube.api),
     .def = "in-cluster"},
    {"kube-token-file", "PATH", "bearer token",
     KVI_FLAG_STR(coord_opts, kube.token_file), .def = "the service account's"},
    {"kube-ca-file", "PATH", "CA bundle for the API server",
     KVI_FLAG_STR(coord_opts, kube.ca_file)},
    KVI_FLAG_NOTE("Pod annotations override: kvindex.io/dp-size, zmq-port, "
		  "replay-port, recover-port, block-size, model."),

    KVI_FLAG_SECTION(NULL),
    {"data-dir", "DIR",
     "coordinator store (HTTP registrations, pins); without it they are "
     "not kept",
     KVI_FLAG_STR(coord_opts, data_dir)},
    {"query-deadline-ms", "N", "fan-out deadline per query",
     KVI_FLAG_INT(coord_opts, query.deadline_ms, 1, 60000), .def = "100"},
    {"query-batch-max", "N",
     "queries per message to a shard; 1: every query alone",
     KVI_FLAG_INT(coord_opts, query_batch, 1, 4096), .def = "64"},
    {"query-inflight", "N",
     "messages in flight per shard before queries wait to be coalesced",
     KVI_FLAG_INT(coord_opts, query_inflight, 1, 1024), .def = "2"},
    {"query-via-nng", NULL,
     "send queries through each shard's nng client, not the HTTP loops' "
     "own connections to the shards (for comparison)",
     KVI_FLAG_BOOL(coord_opts, query.via_nng)},
    {"max-body-bytes", "N", "request body limit",
     KVI_FLAG_INT(coord_opts, max_body, 1024, 1L << 30)},
    {"max-tokens", "N", "token ids per query",
     KVI_FLAG_INT(coord_opts, query.max_tokens, 1, 1L << 26), .def = "1048576"},
    {"failover-grace-ms", "N",
     "silence before a shard's listeners move; 0 or -1: never",
     KVI_FLAG_FN(coord_failover_grace), .min = -1, .max = 86400000L,
     .def = "60000"},
    {"tick-ms", "N", "status poll period",
     KVI_FLAG_INT(coord_opts, assign.tick_ms, 10, 60000), .def = "500"},
    {"rpc-timeout-ms", "N", "assign/unassign deadline",
     KVI_FLAG_INT(coord_opts, assign.rpc_timeout_ms, 10, 600000),
     .def = "3000"},
    {"admin-token-file", "PATH",
     "bearer token for /admin paths (and /register, /unregister)",
     KVI_FLAG_STR(coord_opts, admin_token_file)},
    {"register-token-file", "PATH",
     "bearer token for /register and /unregister, besides the admin token",
     KVI_FLAG_STR(coord_opts, register_token_file)},
    {"rpc-secret-file", "PATH",
     "the shards' RPC secret, sent with every request",
     KVI_FLAG_STR(coord_opts, rpc_secret_file)},

    KVI_FLAG_SECTION("Replicas (leader election with a Kubernetes Lease; the "
		     "API server, token and CA of the pod watcher):"),
    {"leader-election-lease", "NAMESPACE/NAME",
     "lead only while holding it; without it this coordinator leads alone",
     KVI_FLAG_STR(coord_opts, lease)},
    {"identity", "NAME", "this replica", KVI_FLAG_STR(coord_opts, identity),
     .def = "host name"},
    {"advertise-url", "URL", "where followers redirect writes",
     KVI_FLAG_STR(coord_opts, advertise),
     .def = "http://$POD_IP:PORT, else the --http address or host name"},
    {"leader-election-lease-duration-ms", "N",
     "how long a Lease not renewed keeps its holder",
     KVI_FLAG_INT(coord_opts, le.lease_duration_ms, 1, 3600000),
     .def = "15000"},
    {"leader-election-renew-deadline-ms", "N",
     "a leader that has not renewed for this long stops leading",
     KVI_FLAG_INT(coord_opts, le.renew_deadline_ms, 1, 3600000),
     .def = "10000"},
    {"leader-election-retry-period-ms", "N",
     "how often a replica tries to take or renew the Lease",
     KVI_FLAG_INT(coord_opts, le.retry_period_ms, 1, 3600000), .def = "2000"},

    KVI_FLAG_SECTION(NULL),
    {"log-level", "LEVEL", "debug, info, warn, error",
     KVI_FLAG_FN(kvi_flag_log_level), .off = offsetof(coord_opts, log_level),
     .def = "info"},
    {"log-file", "PATH", "log there instead of standard error",
     KVI_FLAG_STR(coord_opts, log_file)},
};

static const kvi_flags coord_flags = {
    .prog = "kvindex-coordinator",
    .synopsis = "--shards ID=URL[,ID=URL...] [options]",
    .flag = coord_flag,
    .n = sizeof(coord_flag) / sizeof(coord_flag[0]),
    .defaults = &coord_defaults,
    .size = sizeof(coord_opts),
};

/* coord_parse fills o from the command line as kvi_flags_parse does (0,
 * 1 after --help, -1), and requires a shard. */
static int
coord_parse(int argc, char **argv, coord_opts *o)
{
	int rc = kvi_flags_parse(&coord_flags, o, argc, argv);
	if (rc != 0) {
		return rc;
	}
	if (o->n_shards == 0) {
		fprintf(stderr, "kvindex-coordinator: --shards is required\n");
		return -1;
	}
	if (o->dp_size > o->max_dp_size) {
		fprintf(stderr,
			"kvindex-coordinator: --watch-dp-size %u is over "
			"--max-dp-size %u\n",
			o->dp_size, o->max_dp_size);
		return -1;
	}
	o->kube.namespaces = (const char *const *)o->namespaces;
	o->kube.defaults.dp_size = o->dp_size;
	return 0;
}

/* coord_opts_fini frees the shards and namespaces the flags made, also
 * after a parse that failed half-way. */
static void
coord_opts_fini(coord_opts *o)
{
	for (size_t i = 0; i < o->n_shards; i++) {
		kvi_free(o->shard_ids[i]);
		kvi_free(o->shard_urls[i]);
	}
	for (size_t i = 0; i < o->kube.n_namespaces; i++) {
		kvi_free(o->namespaces[i]);
	}
}

/* coord_http_metrics: what the HTTP server refused or ended. */
static void
coord_http_metrics(void *arg, kvi_metrics_out *out)
{
	kvi_httpd_stats st;
	kvi_httpd_stats_get(arg, &st);
	static const struct {
		const char *name, *help;
		size_t off;
	} f[] = {
	    {"kvindex_http_accept_pauses_total",
	     "Times accept() failed (out of descriptors) and accepting paused.",
	     offsetof(kvi_httpd_stats, accept_pauses)},
	    {"kvindex_http_connections_refused_total",
	     "Connections past --max-connections, answered 503.",
	     offsetof(kvi_httpd_stats, refused)},
	    {"kvindex_http_requests_timed_out_total",
	     "Connections closed because a request did not arrive whole in "
	     "time.",
	     offsetof(kvi_httpd_stats, timed_out)},
	    {"kvindex_http_reserve_answers_total",
	     "Connections answered from the reserve descriptor while out of "
	     "descriptors (/health 200, the rest 503).",
	     offsetof(kvi_httpd_stats, reserve_answers)},
	};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		kvi_metrics_out_family(out, f[i].name, f[i].help,
				       KVI_METRIC_COUNTER);
		kvi_metrics_out_sample_i64(
		    out, f[i].name, NULL, 0,
		    (int64_t) *
			(const uint64_t *)((const char *)&st + f[i].off));
	}
}

/* coord_read_token reads the token of --flag at path (kvi_secret_read). */
static char *
coord_read_token(const char *flag, const char *path)
{
	char buf[KVC_TOKEN_MAX + 1], err[600];
	if (kvi_secret_read(path, buf, sizeof(buf), err, sizeof(err)) !=
	    KVI_OK) {
		fprintf(stderr, "kvindex-coordinator: --%s %s\n", flag, err);
		return NULL;
	}
	return kvi_strdup(buf);
}

/* coord_read_tokens reads the admin and registration tokens that are
 * given, and warns of the paths that no token protects. False when a
 * token file cannot be read. */
static bool
coord_read_tokens(const coord_opts *o, char **admin, char **reg)
{
	if ((o->admin_token_file != NULL &&
	     (*admin = coord_read_token("admin-token-file",
					o->admin_token_file)) == NULL) ||
	    (o->register_token_file != NULL &&
	     (*reg = coord_read_token("register-token-file",
				      o->register_token_file)) == NULL)) {
		return false;
	}
	if (*admin == NULL) {
		KVI_WARN("admin_open",
			 "msg=\"no --admin-token-file: /admin/* is open to "
			 "every client that reaches the HTTP port (adding and "
			 "draining shards, moving listeners)\"");
	}
	if (*admin == NULL && *reg == NULL) {
		KVI_WARN(
		    "register_open",
		    "msg=\"no --register-token-file or --admin-token-file: "
		    "/register and /unregister are open to every client "
		    "that reaches the HTTP port, and a registration makes "
		    "the shards dial the address it names\"");
	}
	return true;
}

/* coord_open_store opens the store, moving a corrupt one aside. */
static kvi_err
coord_open_store(const char *dir, kvc_cstore **out)
{
	char err[512] = "", qdir[600], qerr[1100], qmoved[1100];
	kvi_log_quote(qdir, sizeof(qdir), dir);
	if (kvi_mdb_file_empty(dir)) {
		KVI_WARN("store_empty",
			 "dir=%s reason=\"data.mdb is 0 bytes: cut to nothing, "
			 "or never written\" note=\"starting without HTTP "
			 "registrations and pins; routers must register "
			 "again\"",
			 qdir);
	}
	kvi_err rv = kvc_cstore_open(dir, out, err, sizeof(err));
	if (rv != KVI_ECORRUPT) {
		if (rv != KVI_OK) {
			KVI_ERROR("store_failed", "dir=%s err=%s", qdir,
				  kvi_log_quote(qerr, sizeof(qerr), err));
		}
		return rv;
	}
	kvi_log_quote(qerr, sizeof(qerr), err);
	char moved[1024];
	if (kvi_store_quarantine(dir, moved, sizeof(moved)) != KVI_OK) {
		KVI_ERROR("store_corrupt",
			  "dir=%s err=%s note=\"cannot move it aside\"", qdir,
			  qerr);
		return rv;
	}
	KVI_ERROR("store_quarantined",
		  "dir=%s moved_to=%s err=%s note=\"starting without HTTP "
		  "registrations and pins; routers must register again\"",
		  qdir, kvi_log_quote(qmoved, sizeof(qmoved), moved), qerr);
	err[0] = '\0';
	rv = kvc_cstore_open(dir, out, err, sizeof(err));
	if (rv != KVI_OK) {
		KVI_ERROR("store_failed", "dir=%s err=%s", qdir,
			  kvi_log_quote(qerr, sizeof(qerr), err));
	}
	return rv;
}

static kvi_err
coord_load_shard(void *arg, const char *id, const char *url)
{
	char err[256];
	if (kvc_shardset_add(arg, id, url, err, sizeof(err)) == KVI_OK) {
		KVI_INFO("shard_added", "shard=%s url=%s from=store", id, url);
	}
	return KVI_OK;
}

/* coord_load_drain marks a shard the store says is being drained. */
static kvi_err
coord_load_drain(void *arg, const char *id)
{
	kvc_shard *sh = kvc_shardset_find(arg, id);
	if (sh != NULL) {
		atomic_store(&sh->draining, true);
		kvc_shard_unref(sh);
		KVI_INFO("shard_draining", "shard=%s from=store", id);
	}
	return KVI_OK;
}

static void
coord_on_file(void *arg, const kvc_pod *pods, size_t n)
{
	kvc_assigner_sync(arg, KVC_SOURCE_FILE, pods, n);
}

static void
coord_on_kube(void *arg, const kvc_pod *pods, size_t n)
{
	kvc_assigner_sync(arg, KVC_SOURCE_KUBERNETES, pods, n);
}

int
main(int argc, char **argv)
{
	coord_opts o;
	int rc = coord_parse(argc, argv, &o);
	if (rc != 0) {
		if (rc < 0) {
			kvi_flags_usage(stderr, &coord_flags);
		}
		coord_opts_fini(&o);
		return rc < 0 ? 2 : 0;
	}
	int log_fd = kvi_log_open_fd(o.log_file);
	if (log_fd < 0) {
		return 2;
	}
	kvi_log_setup("coordinator", o.log_level, log_fd);
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* glibc raises its trim threshold to twice the largest block it
	 * freed from mmap (up to 64 MiB), and the heaps of threads other
	 * than main are then never shrunk: after 60,000 listeners came and
	 * went, 87 MB stayed with the allocator, malloc_trim or not.
	 * Thresholds set here do not move: a block up to 1 MiB comes from
	 * the heaps, as once the dynamic threshold has grown, and a heap's
	 * free top past 2 MiB is given back. */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_TRIM_THRESHOLD, 2 << 20);
	/* a descriptor per client connection */
	long nofile = kvi_nofile_raise();

	int status = 1;
	char err[512] = "";
	char *token = NULL, *reg_token = NULL;
	kvi_metrics *metrics = kvi_metrics_alloc();
	kvc_registry *reg = kvc_reg_alloc();
	kvc_reg_set_max_dp_size(reg, o.max_dp_size);
	kvc_shardset *shards = kvc_shardset_alloc();
	kvc_shardset_set_batching(shards, o.query_inflight,
				  (size_t)o.query_batch);
	kvc_cstore *store = NULL;
	kvc_assigner *asg = NULL;
	kvc_query *query = NULL;
	kvc_dfile_watch *watch = NULL;
	kvc_kube_watch *kube = NULL;
	kvc_kube_bufs kube_bufs;
	kvc_lease *lease = NULL;
	char identity[KVC_LEASE_IDENTITY_MAX] = "",
	     advertise[KVC_LEASE_URL_MAX];
	kvi_httpd *httpd = NULL;
	kvi_err rv = KVI_OK;

	if (!coord_read_tokens(&o, &token, &reg_token)) {
		goto out;
	}
	if (o.rpc_secret_file != NULL &&
	    kvp_secret_load(o.rpc_secret_file, err, sizeof(err)) != KVI_OK) {
		fprintf(stderr, "kvindex-coordinator: --rpc-secret-file %s\n",
			err);
		rv = KVI_EINVAL;
		goto out;
	}
	/* the pod watcher and the lease share one API server and token */
	if ((o.kube.n_namespaces > 0 &&
	     kvc_kube_config_resolve(&o.kube, &kube_bufs, err, sizeof(err)) !=
		 KVI_OK) ||
	    (o.kube.n_namespaces == 0 && o.lease != NULL &&
	     kvc_kube_api_resolve(&o.kube, &kube_bufs, err, sizeof(err)) !=
		 KVI_OK)) {
		fprintf(stderr, "kvindex-coordinator: kubernetes: %s\n", err);
		goto out;
	}
	for (size_t i = 0; i < o.n_shards; i++) {
		if (kvc_shardset_add(shards, o.shard_ids[i], o.shard_urls[i],
				     err, sizeof(err)) != KVI_OK) {
			fprintf(stderr, "kvindex-coordinator: --shards: %s\n",
				err);
			goto out;
		}
	}
	if (o.data_dir != NULL) {
		if (coord_open_store(o.data_dir, &store) != KVI_OK) {
			goto out;
		}
		kvc_cstore_shard_list(store, coord_load_shard, shards, err,
				      sizeof(err));
		kvc_cstore_drain_list(store, coord_load_drain, shards, err,
				      sizeof(err));
	} else {
		KVI_WARN("no_store", "msg=\"no --data-dir: HTTP registrations "
				     "will not survive a restart\"");
	}
	if ((rv = kvc_assigner_open(reg, shards, store, metrics, &o.assign,
				    &asg, err, sizeof(err))) != KVI_OK) {
		KVI_ERROR("start_failed", "err=%s", err);
		goto out;
	}
	kvc_replica_flags rf = {.lease = o.lease,
				.identity = o.identity,
				.advertise = o.advertise,
				.http = o.http,
				.le = o.le};
	if (o.lease != NULL &&
	    kvc_replica_open(&rf, &o.kube, metrics, &lease, identity,
			     sizeof(identity), advertise,
			     sizeof(advertise)) != KVI_OK) {
		goto out;
	}
	kvc_assigner_set_lease(asg, lease);
	if (o.lease == NULL) {
		kvc_replica_identity(o.identity, identity, sizeof(identity));
	}
	o.query.batch_inflight = o.query_inflight;
	o.query.batch_max = (size_t)o.query_batch;
	query = kvc_query_alloc(reg, shards, metrics, &o.query);
	if (o.discovery_file != NULL) {
		kvc_assigner_expect(asg, KVC_SOURCE_FILE);
		if (kvc_dfile_watch_open(o.discovery_file, o.dp_size, 500,
					 coord_on_file, asg,
					 &watch) != KVI_OK) {
			KVI_ERROR("start_failed",
				  "err=\"cannot watch the discovery file\"");
			goto out;
		}
	}
	if (o.kube.n_namespaces > 0) {
		kvc_assigner_expect(asg, KVC_SOURCE_KUBERNETES);
		if (kvc_kube_watch_open(&o.kube, metrics, coord_on_kube, asg,
					&kube, err, sizeof(err)) != KVI_OK) {
			KVI_ERROR("start_failed", "kubernetes=\"%s\"", err);
			goto out;
		}
		KVI_INFO("kube_watching", "api=%s namespaces=%zu label=%s",
			 o.kube.api, o.kube.n_namespaces,
			 o.kube.label_selector ? o.kube.label_selector : "-");
	}
	kvc_api api = {
	    .reg = reg,
	    .shards = shards,
	    .assigner = asg,
	    .query = query,
	    .metrics = metrics,
	    .default_dp_size = o.dp_size,
	    .admin_token = token,
	    .register_token = reg_token,
	    .lease = lease,
	    .identity = identity,
	};
	/* past the limit a client gets a fast 503, not a hang: half the
	 * descriptors for clients, the rest for shards, files and the API
	 * server */
	int conns = o.max_conns > 0 ? o.max_conns
		    : nofile > 0
			? (int)(nofile / 2 < INT_MAX ? nofile / 2 : INT_MAX)
			: 0;
	kvi_httpd_config hc = {
	    .max_body = o.max_body,
	    .drain_ms = 2000,
	    .max_conns =
		conns > 0 ? (conns + o.http_threads - 1) / o.http_threads : 0,
	    .local_free = kvc_query_loop_free,
	    .local_arg = query,
	};
	httpd = kvi_httpd_alloc(&hc);
	if (kvc_api_routes(httpd, &api) != KVI_OK ||
	    (rv = kvi_httpd_start(httpd, o.http, o.http_threads, err,
				  sizeof(err))) != KVI_OK) {
		KVI_ERROR("start_failed", "http=%s err=%s", o.http, err);
		goto out;
	}
	kvi_metrics_collector_add(metrics, coord_http_metrics, httpd);
	if (lease != NULL && advertise[0] == '\0') {
		int port = (int)kvi_httpd_port(httpd);
		kvc_replica_url(&rf, port, identity, advertise,
				sizeof(advertise));
		kvc_lease_set_url(lease, advertise);
	}
	KVI_INFO("serving",
		 "http=%s port=%u shards=%zu discovery_file=%s "
		 "dp_size=%u",
		 o.http, kvi_httpd_port(httpd), kvc_shardset_count(shards),
		 o.discovery_file ? o.discovery_file : "-", o.dp_size);
	int sig = 0;
	sigwait(&sigs, &sig);
	KVI_INFO("stopping", "signal=%d", sig);
	status = 0;
out:
	kvi_httpd_stop(httpd);
	kvc_dfile_watch_free(watch);
	kvc_kube_watch_free(kube);
	/* the lease is released before the assigner goes, so that a
	 * follower takes over at once */
	kvc_lease_stop(lease);
	kvc_assigner_free(asg);
	kvc_lease_free(lease);
	kvi_httpd_free(httpd);
	kvc_query_free(query);
	kvc_shardset_free(shards);
	kvc_reg_free(reg);
	kvc_cstore_close(store);
	kvi_metrics_free(metrics);
	kvi_free(token);
	kvi_free(reg_token);
	coord_opts_fini(&o);
	return status;
}
