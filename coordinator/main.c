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
#include <getopt.h>
#include <limits.h>
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
	const char *data_dir;
	const char *admin_token_file;
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

enum {
	COORD_OPT_LEASE = 1000,
	COORD_OPT_IDENTITY,
	COORD_OPT_LEASE_DURATION,
	COORD_OPT_RENEW_DEADLINE,
	COORD_OPT_RETRY_PERIOD,
	COORD_OPT_ADVERTISE,
	COORD_OPT_RPC_SECRET,
	COORD_OPT_MAX_CONNS,
};

static void
coord_usage(FILE *f)
{
	fputs(
	    "usage: kvindex-coordinator --shards ID=URL[,ID=URL...] [options]\n"
	    "\n"
	    "  --shards ID=URL,...      shards (nng addresses); repeatable\n"
	    "  --http HOST:PORT         HTTP API (default 127.0.0.1:8080)\n"
	    "  --http-threads N         HTTP loop threads (default 2)\n"
	    "  --max-connections N      open HTTP connections; past them a\n"
	    "                           new one gets 503 (default: half the\n"
	    "                           open-file limit)\n"
	    "  --discovery-file PATH    static pod list, re-read on change\n"
	    "  --watch-dp-size N        ranks of a pod that gives no dp_size\n"
	    "                           (default 1)\n"
	    "\n"
	    "  Kubernetes (pods Ready, with an IP, not terminating):\n"
	    "  --watch-namespace NS     watch pods there; repeatable\n"
	    "  --watch-label SELECTOR   label selector (default: every pod)\n"
	    "  --watch-zmq-port N       event port of rank 0 (5557)\n"
	    "  --watch-replay-port N    replay port of rank 0 (none)\n"
	    "  --watch-recover-port N   /kv_recover port of rank 0 (none)\n"
	    "  --watch-model-label L    label naming the model\n"
	    "                           (kvindex.io/model)\n"
	    "  --watch-block-size N     tokens per block (16)\n"
	    "  --watch-not-ready-grace-ms N\n"
	    "                           NotReady time before a pod is\n"
	    "                           deregistered (30000)\n"
	    "  --kube-api URL           API server (default: in-cluster)\n"
	    "  --kube-token-file PATH   bearer token (default: the service\n"
	    "                           account's)\n"
	    "  --kube-ca-file PATH      CA bundle for the API server\n"
	    "  Pod annotations override: kvindex.io/dp-size, zmq-port,\n"
	    "  replay-port, recover-port, block-size, model.\n"
	    "\n"
	    "  --data-dir DIR           coordinator store (HTTP "
	    "registrations,\n"
	    "                           pins); without it they are not kept\n"
	    "  --query-deadline-ms N    fan-out deadline per query (100)\n"
	    "  --query-batch-max N      queries per message to a shard (64;\n"
	    "                           1: every query alone)\n"
	    "  --query-inflight N       messages in flight per shard before\n"
	    "                           queries wait to be coalesced (2)\n"
	    "  --max-body-bytes N       request body limit (8388608)\n"
	    "  --max-tokens N           token ids per query (1048576)\n"
	    "  --failover-grace-ms N    silence before a shard's listeners\n"
	    "                           move (60000; -1: never)\n"
	    "  --tick-ms N              status poll period (500)\n"
	    "  --rpc-timeout-ms N       assign/unassign deadline (3000)\n"
	    "  --admin-token-file PATH  bearer token for /admin paths\n"
	    "  --rpc-secret-file PATH   the shards' RPC secret, sent with\n"
	    "                           every request\n"
	    "\n"
	    "  Replicas (leader election with a Kubernetes Lease; the API\n"
	    "  server, token and CA of the pod watcher):\n"
	    "  --leader-election-lease NAMESPACE/NAME\n"
	    "                           lead only while holding it; without\n"
	    "                           it this coordinator leads alone\n"
	    "  --identity NAME          this replica (default: host name)\n"
	    "  --advertise-url URL      where followers redirect writes\n"
	    "                           (default: http://$POD_IP:PORT, else\n"
	    "                           the --http address or host name)\n"
	    "  --leader-election-lease-duration-ms N   (15000)\n"
	    "  --leader-election-renew-deadline-ms N   (10000)\n"
	    "  --leader-election-retry-period-ms N     (2000)\n"
	    "  --log-level LEVEL        debug, info, warn, error (info)\n"
	    "  --log-file PATH          log there instead of standard error\n",
	    f);
}

/* coord_shards adds the shards of one --shards value. */
static int
coord_shards(coord_opts *o, const char *arg)
{
	char *copy = kvi_strdup(arg), *save = NULL;
	int rc = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (eq == NULL || eq == tok || eq[1] == '\0') {
			fprintf(stderr,
				"kvindex-coordinator: --shards: %s is not "
				"ID=URL\n",
				tok);
			rc = -1;
			break;
		}
		if (o->n_shards == COORD_MAX_SHARDS) {
			fprintf(stderr, "kvindex-coordinator: --shards: more "
					"than 256 shards\n");
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
coord_namespaces(coord_opts *o, const char *arg)
{
	char *copy = kvi_strdup(arg), *save = NULL;
	int rc = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->kube.n_namespaces == COORD_MAX_NS) {
			fprintf(stderr,
				"kvindex-coordinator: more than %d "
				"namespaces to watch\n",
				COORD_MAX_NS);
			rc = -1;
			break;
		}
		o->namespaces[o->kube.n_namespaces++] = kvi_strdup(tok);
	}
	kvi_free(copy);
	return rc;
}

/* coord_kube_opt takes one of the Kubernetes watcher's flags. */
static int
coord_kube_opt(coord_opts *o, int c, const char *arg)
{
	kvc_kube_config *k = &o->kube;
	long v = 0;
	int rc = 0;
	switch (c) {
	case 'n':
		return coord_namespaces(o, arg);
	case 'l':
		k->label_selector = arg;
		break;
	case 'z':
		rc = kvi_cli_long("kvindex-coordinator", "--watch-zmq-port",
				  arg, 1, 65535, &v);
		k->defaults.zmq_port = (uint32_t)v;
		break;
	case 'R':
		rc = kvi_cli_long("kvindex-coordinator", "--watch-replay-port",
				  arg, 1, 65535, &v);
		k->defaults.replay_port = (uint32_t)v;
		k->defaults.has_replay_port = true;
		break;
	case 'V':
		rc = kvi_cli_long("kvindex-coordinator", "--watch-recover-port",
				  arg, 1, 65535, &v);
		k->defaults.recover_port = (uint32_t)v;
		k->defaults.has_recover_port = true;
		break;
	case 'm':
		k->defaults.model_label = arg;
		break;
	case 'B':
		rc = kvi_cli_long("kvindex-coordinator", "--watch-block-size",
				  arg, 1, 1L << 20, &v);
		k->defaults.block_size = (uint32_t)v;
		break;
	case 'G':
		rc = kvi_cli_long("kvindex-coordinator",
				  "--watch-not-ready-grace-ms", arg, 1,
				  86400000L, &v);
		k->not_ready_grace_ms = v;
		break;
	case 'A':
		k->api = arg;
		break;
	case 'K':
		k->token_file = arg;
		break;
	case 'C':
		k->ca_file = arg;
		break;
	}
	return rc;
}

static int
coord_parse(int argc, char **argv, coord_opts *o)
{
	static const struct option longopts[] = {
	    {"shards", required_argument, NULL, 's'},
	    {"http", required_argument, NULL, 'H'},
	    {"http-threads", required_argument, NULL, 't'},
	    {"discovery-file", required_argument, NULL, 'D'},
	    {"watch-dp-size", required_argument, NULL, 'p'},
	    {"watch-namespace", required_argument, NULL, 'n'},
	    {"watch-label", required_argument, NULL, 'l'},
	    {"watch-zmq-port", required_argument, NULL, 'z'},
	    {"watch-replay-port", required_argument, NULL, 'R'},
	    {"watch-recover-port", required_argument, NULL, 'V'},
	    {"watch-model-label", required_argument, NULL, 'm'},
	    {"watch-block-size", required_argument, NULL, 'B'},
	    {"watch-not-ready-grace-ms", required_argument, NULL, 'G'},
	    {"kube-api", required_argument, NULL, 'A'},
	    {"kube-token-file", required_argument, NULL, 'K'},
	    {"kube-ca-file", required_argument, NULL, 'C'},
	    {"data-dir", required_argument, NULL, 'd'},
	    {"query-deadline-ms", required_argument, NULL, 'q'},
	    {"query-batch-max", required_argument, NULL, 'Q'},
	    {"query-inflight", required_argument, NULL, 'I'},
	    {"max-body-bytes", required_argument, NULL, 'b'},
	    {"max-tokens", required_argument, NULL, 'k'},
	    {"failover-grace-ms", required_argument, NULL, 'g'},
	    {"tick-ms", required_argument, NULL, 'T'},
	    {"rpc-timeout-ms", required_argument, NULL, 'r'},
	    {"admin-token-file", required_argument, NULL, 'a'},
	    {"log-level", required_argument, NULL, 'L'},
	    {"log-file", required_argument, NULL, 'f'},
	    {"leader-election-lease", required_argument, NULL, COORD_OPT_LEASE},
	    {"identity", required_argument, NULL, COORD_OPT_IDENTITY},
	    {"advertise-url", required_argument, NULL, COORD_OPT_ADVERTISE},
	    {"leader-election-lease-duration-ms", required_argument, NULL,
	     COORD_OPT_LEASE_DURATION},
	    {"leader-election-renew-deadline-ms", required_argument, NULL,
	     COORD_OPT_RENEW_DEADLINE},
	    {"leader-election-retry-period-ms", required_argument, NULL,
	     COORD_OPT_RETRY_PERIOD},
	    {"rpc-secret-file", required_argument, NULL, COORD_OPT_RPC_SECRET},
	    {"max-connections", required_argument, NULL, COORD_OPT_MAX_CONNS},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	memset(o, 0, sizeof(*o));
	o->http = "127.0.0.1:8080";
	o->http_threads = 2;
	o->dp_size = 1;
	o->log_level = KVI_LOG_INFO;
	o->max_body = KVI_HTTPD_DEFAULT_MAX_BODY;
	o->kube.defaults.zmq_port = 5557;
	o->kube.defaults.block_size = 16;
	o->kube.defaults.model_label = KVC_KUBE_ANN_MODEL;
	o->kube.not_ready_grace_ms = 30000;
	int c;
	long v = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		int rc = 0;
		switch (c) {
		case 's':
			rc = coord_shards(o, optarg);
			break;
		case 'H':
			o->http = optarg;
			break;
		case 't':
			rc = kvi_cli_long("kvindex-coordinator",
					  "--http-threads", optarg, 1,
					  KVI_HTTPD_MAX_THREADS, &v);
			o->http_threads = (int)v;
			break;
		case 'D':
			o->discovery_file = optarg;
			break;
		case 'p':
			rc = kvi_cli_long("kvindex-coordinator",
					  "--watch-dp-size", optarg, 1, 65536,
					  &v);
			o->dp_size = (uint32_t)v;
			break;
		case 'd':
			o->data_dir = optarg;
			break;
		case 'n':
		case 'l':
		case 'z':
		case 'R':
		case 'V':
		case 'm':
		case 'B':
		case 'G':
		case 'A':
		case 'K':
		case 'C':
			rc = coord_kube_opt(o, c, optarg);
			break;
		case COORD_OPT_LEASE:
			o->lease = optarg;
			break;
		case COORD_OPT_IDENTITY:
			o->identity = optarg;
			break;
		case COORD_OPT_ADVERTISE:
			o->advertise = optarg;
			break;
		case COORD_OPT_LEASE_DURATION:
			rc = kvi_cli_long("kvindex-coordinator",
					  "--leader-election-lease-duration-ms",
					  optarg, 1, 3600000, &v);
			o->le.lease_duration_ms = (int)v;
			break;
		case COORD_OPT_RENEW_DEADLINE:
			rc = kvi_cli_long("kvindex-coordinator",
					  "--leader-election-renew-deadline-ms",
					  optarg, 1, 3600000, &v);
			o->le.renew_deadline_ms = (int)v;
			break;
		case COORD_OPT_RETRY_PERIOD:
			rc = kvi_cli_long("kvindex-coordinator",
					  "--leader-election-retry-period-ms",
					  optarg, 1, 3600000, &v);
			o->le.retry_period_ms = (int)v;
			break;
		case 'q':
			rc = kvi_cli_long("kvindex-coordinator",
					  "--query-deadline-ms", optarg, 1,
					  60000, &v);
			o->query.deadline_ms = (int)v;
			break;
		case 'Q':
			rc = kvi_cli_long("kvindex-coordinator",
					  "--query-batch-max", optarg, 1, 4096,
					  &v);
			o->query_batch = (int)v;
			break;
		case 'I':
			rc = kvi_cli_long("kvindex-coordinator",
					  "--query-inflight", optarg, 1, 1024,
					  &v);
			o->query_inflight = (int)v;
			break;
		case 'b':
			rc = kvi_cli_long("kvindex-coordinator",
					  "--max-body-bytes", optarg, 1024,
					  1L << 30, &v);
			o->max_body = (size_t)v;
			break;
		case 'k':
			rc = kvi_cli_long("kvindex-coordinator", "--max-tokens",
					  optarg, 1, 1L << 26, &v);
			o->query.max_tokens = (size_t)v;
			break;
		case 'g':
			rc = kvi_cli_long("kvindex-coordinator",
					  "--failover-grace-ms", optarg, -1,
					  86400000L, &v);
			o->assign.failover_grace_ms = v == 0 ? -1 : (int)v;
			break;
		case 'T':
			rc = kvi_cli_long("kvindex-coordinator", "--tick-ms",
					  optarg, 10, 60000, &v);
			o->assign.tick_ms = (int)v;
			break;
		case 'r':
			rc = kvi_cli_long("kvindex-coordinator",
					  "--rpc-timeout-ms", optarg, 10,
					  600000, &v);
			o->assign.rpc_timeout_ms = (int)v;
			break;
		case 'a':
			o->admin_token_file = optarg;
			break;
		case COORD_OPT_RPC_SECRET:
			o->rpc_secret_file = optarg;
			break;
		case COORD_OPT_MAX_CONNS:
			rc = kvi_cli_long("kvindex-coordinator",
					  "--max-connections", optarg, 1,
					  1L << 24, &v);
			o->max_conns = (int)v;
			break;
		case 'L':
			if (kvi_log_parse_level(optarg, &o->log_level) !=
			    KVI_OK) {
				fprintf(stderr,
					"kvindex-coordinator: --log-level: "
					"%s is not debug, info, warn or "
					"error\n",
					optarg);
				rc = -1;
			}
			break;
		case 'f':
			o->log_file = optarg;
			break;
		case 'h':
			coord_usage(stdout);
			exit(0);
		default:
			rc = -1;
		}
		if (rc != 0) {
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kvindex-coordinator: unexpected argument %s\n",
			argv[optind]);
		return -1;
	}
	if (o->n_shards == 0) {
		fprintf(stderr, "kvindex-coordinator: --shards is required\n");
		return -1;
	}
	o->kube.namespaces = (const char *const *)o->namespaces;
	o->kube.defaults.dp_size = o->dp_size;
	return 0;
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

/* coord_read_token reads the admin token (kvi_secret_read). */
static char *
coord_read_token(const char *path)
{
	char buf[KVC_TOKEN_MAX + 1], err[600];
	if (kvi_secret_read(path, buf, sizeof(buf), err, sizeof(err)) !=
	    KVI_OK) {
		fprintf(stderr, "kvindex-coordinator: --admin-token-file %s\n",
			err);
		return NULL;
	}
	return kvi_strdup(buf);
}

/* coord_open_store opens the store, moving a corrupt one aside. */
static kvi_err
coord_open_store(const char *dir, kvc_cstore **out)
{
	char err[512];
	kvi_err rv = kvc_cstore_open(dir, out, err, sizeof(err));
	if (rv != KVI_ECORRUPT) {
		if (rv != KVI_OK) {
			KVI_ERROR("store_failed", "dir=%s err=%s", dir, err);
		}
		return rv;
	}
	char moved[1024];
	if (kvi_store_quarantine(dir, moved, sizeof(moved)) != KVI_OK) {
		KVI_ERROR("store_corrupt",
			  "dir=%s err=%s: cannot move it aside", dir, err);
		return rv;
	}
	KVI_ERROR("store_quarantined",
		  "dir=%s moved_to=%s err=%s: starting without HTTP "
		  "registrations and pins; routers must register again",
		  dir, moved, err);
	rv = kvc_cstore_open(dir, out, err, sizeof(err));
	if (rv != KVI_OK) {
		KVI_ERROR("store_failed", "dir=%s err=%s", dir, err);
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
	if (coord_parse(argc, argv, &o) != 0) {
		coord_usage(stderr);
		return 2;
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
	/* a descriptor per client connection */
	long nofile = kvi_nofile_raise();

	int status = 1;
	char err[512] = "";
	char *token = NULL;
	kvi_metrics *metrics = kvi_metrics_alloc();
	kvc_registry *reg = kvc_reg_alloc();
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

	if (o.admin_token_file != NULL &&
	    (token = coord_read_token(o.admin_token_file)) == NULL) {
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
	if ((rv = kvc_assigner_start(reg, shards, store, metrics, &o.assign,
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
	    kvc_replica_start(&rf, &o.kube, metrics, &lease, identity,
			      sizeof(identity), advertise,
			      sizeof(advertise)) != KVI_OK) {
		goto out;
	}
	kvc_assigner_set_lease(asg, lease);
	if (o.lease == NULL) {
		kvc_replica_identity(o.identity, identity, sizeof(identity));
	}
	query = kvc_query_alloc(reg, shards, metrics, &o.query);
	if (o.discovery_file != NULL) {
		kvc_assigner_expect(asg, KVC_SOURCE_FILE);
		if (kvc_dfile_watch_start(o.discovery_file, o.dp_size, 500,
					  coord_on_file, asg,
					  &watch) != KVI_OK) {
			KVI_ERROR("start_failed",
				  "err=\"cannot watch the discovery file\"");
			goto out;
		}
	}
	if (o.kube.n_namespaces > 0) {
		kvc_assigner_expect(asg, KVC_SOURCE_KUBERNETES);
		if (kvc_kube_watch_start(&o.kube, metrics, coord_on_kube, asg,
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
	for (size_t i = 0; i < o.n_shards; i++) {
		kvi_free(o.shard_ids[i]);
		kvi_free(o.shard_urls[i]);
	}
	for (size_t i = 0; i < o.kube.n_namespaces; i++) {
		kvi_free(o.namespaces[i]);
	}
	return status;
}
