#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cli.h"
#include "httpd.h"
#include "pod.h"

/* coord_shards adds the shards of one --shards value: ID=URL,... */
static int
coord_shards(const char *prog, const kvi_flag *f, const char *arg, void *opts)
{
	kvc_opts *o = opts;
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
		if (o->n_shards == KVC_OPTS_MAX_SHARDS) {
			fprintf(stderr, "%s: --%s: more than %d shards\n", prog,
				f->name, KVC_OPTS_MAX_SHARDS);
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
	kvc_opts *o = opts;
	char *copy = kvi_strdup(arg), *save = NULL;
	int rc = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->kube.n_namespaces == KVC_OPTS_MAX_NS) {
			fprintf(stderr,
				"%s: more than %d namespaces to watch\n", prog,
				KVC_OPTS_MAX_NS);
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
	kvc_opts *o = opts;
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
	kvc_opts *o = opts;
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
	kvc_opts *o = opts;
	long v;
	if (kvi_flag_number(prog, f, arg, &v) != 0) {
		return -1;
	}
	o->assign.failover_grace_ms = v == 0 ? -1 : (int)v;
	return 0;
}

/* What a flag not given leaves; 0 in a module's config is its default,
 * quoted in the table's def. */
static const kvc_opts coord_defaults = {
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
    .ladder_gap_pct = 25,
    .assign = {.unmatched_window_ms = 60000},
};

static const kvi_flag coord_flag[] = {
    {"shards", "ID=URL,...", "shards (nng addresses); repeatable",
     KVI_FLAG_FN(coord_shards)},
    {"http", "HOST:PORT", "HTTP API", KVI_FLAG_STR(kvc_opts, http)},
    {"http-threads", "N", "HTTP loop threads",
     KVI_FLAG_INT(kvc_opts, http_threads, 1, KVI_HTTPD_MAX_THREADS)},
    {"max-connections", "N",
     "open HTTP connections; past them a new one gets 503",
     KVI_FLAG_INT(kvc_opts, max_conns, 1, 1L << 24),
     .def = "half the open-file limit"},
    {"discovery-file", "PATH", "static pod list, re-read on change",
     KVI_FLAG_STR(kvc_opts, discovery_file)},
    {"watch-dp-size", "N", "ranks of a pod that gives no dp_size",
     KVI_FLAG_INT(kvc_opts, dp_size, 1, 65536)},
    {"max-dp-size", "N",
     "ranks a pod may have, from any source; more is refused",
     KVI_FLAG_INT(kvc_opts, max_dp_size, 1, 65536)},

    KVI_FLAG_SECTION("The routing ladder (pods that name a metrics_port):"),
    {"ladder-interval-ms", "N", "between scrapes of the engines' metrics",
     KVI_FLAG_INT(kvc_opts, ladder.interval_ms, 100, 3600000), .def = "5000"},
    {"ladder-timeout-ms", "N", "one scrape, whole",
     KVI_FLAG_INT(kvc_opts, ladder.timeout_ms, 10, 600000), .def = "2000"},
    {"ladder-gap-pct", "N",
     "engine and predicted hit ratios this many points apart are a gap",
     KVI_FLAG_INT(kvc_opts, ladder_gap_pct, 1, 100), .def = "25"},
    {"ladder-min-tokens", "N",
     "prompt tokens on both sides of a listener before its ratios count",
     KVI_FLAG_INT(kvc_opts, ladder.min_tokens, 1, 1L << 40), .def = "20000"},

    KVI_FLAG_SECTION("Kubernetes (pods Ready, with an IP, not terminating):"),
    {"watch-namespace", "NS", "watch pods there; repeatable",
     KVI_FLAG_FN(coord_namespaces)},
    {"watch-label", "SELECTOR", "label selector",
     KVI_FLAG_STR(kvc_opts, kube.label_selector), .def = "every pod"},
    {"watch-zmq-port", "N", "event port of rank 0",
     KVI_FLAG_INT(kvc_opts, kube.defaults.zmq_port, 1, 65535)},
    {"watch-replay-port", "N", "replay port of rank 0",
     KVI_FLAG_FN(coord_replay_port), .min = 1, .max = 65535, .def = "none"},
    {"watch-recover-port", "N", "/kv_recover port of rank 0",
     KVI_FLAG_FN(coord_recover_port), .min = 1, .max = 65535, .def = "none"},
    {"watch-model-label", "L", "label naming the model",
     KVI_FLAG_STR(kvc_opts, kube.defaults.model_label)},
    {"watch-block-size", "N", "tokens per block",
     KVI_FLAG_INT(kvc_opts, kube.defaults.block_size, 1, 1L << 20)},
    {"watch-not-ready-grace-ms", "N",
     "NotReady time before a pod is deregistered",
     KVI_FLAG_INT(kvc_opts, kube.not_ready_grace_ms, 1, 86400000L)},
    {"kube-api", "URL", "API server", KVI_FLAG_STR(kvc_opts, kube.api),
     .def = "in-cluster"},
    {"kube-token-file", "PATH", "bearer token",
     KVI_FLAG_STR(kvc_opts, kube.token_file), .def = "the service account's"},
    {"kube-ca-file", "PATH", "CA bundle for the API server",
     KVI_FLAG_STR(kvc_opts, kube.ca_file)},
    KVI_FLAG_NOTE("Pod annotations override: kvindex.io/dp-size, "
		  "dp-start-rank, zmq-port, replay-port, recover-port, "
		  "metrics-port, block-size, model; kvindex.io/"
		  "engine-container names the engine's container."),

    KVI_FLAG_GROUP("Store, queries, assignment and access"),
    {"data-dir", "DIR",
     "coordinator store (HTTP registrations, pins); without it they are "
     "not kept",
     KVI_FLAG_STR(kvc_opts, data_dir)},
    {"query-deadline-ms", "N", "fan-out deadline per query",
     KVI_FLAG_INT(kvc_opts, query.deadline_ms, 1, 60000), .def = "100"},
    {"query-batch-max", "N",
     "queries per message to a shard; 1: every query alone",
     KVI_FLAG_INT(kvc_opts, query_batch, 1, 4096), .def = "64"},
    {"query-inflight", "N",
     "messages in flight per shard before queries wait to be coalesced",
     KVI_FLAG_INT(kvc_opts, query_inflight, 1, 1024), .def = "2"},
    {"query-via-nng", NULL,
     "send queries through each shard's nng client, not the HTTP loops' "
     "own connections to the shards (for comparison)",
     KVI_FLAG_BOOL(kvc_opts, query.via_nng)},
    {"max-body-bytes", "N", "request body limit",
     KVI_FLAG_INT(kvc_opts, max_body, 1024, 1L << 30)},
    {"max-tokens", "N", "token ids per query",
     KVI_FLAG_INT(kvc_opts, query.max_tokens, 1, 1L << 26), .def = "1048576"},
    {"failover-grace-ms", "N",
     "silence before a shard's listeners move; 0 or -1: never",
     KVI_FLAG_FN(coord_failover_grace), .min = -1, .max = 86400000L,
     .def = "60000"},
    {"unmatched-window-ms", "N",
     "a model whose listeners hold blocks while its queries matched "
     "nothing this long is reported (hash seed, block size or tokenizer "
     "differ); 0: never",
     KVI_FLAG_INT(kvc_opts, assign.unmatched_window_ms, 0, 86400000L),
     .def = "60000"},
    {"tick-ms", "N", "status poll period",
     KVI_FLAG_INT(kvc_opts, assign.tick_ms, 10, 60000), .def = "500"},
    {"rpc-timeout-ms", "N", "assign/unassign deadline",
     KVI_FLAG_INT(kvc_opts, assign.rpc_timeout_ms, 10, 600000), .def = "3000"},
    {"admin-token-file", "PATH",
     "bearer token for /admin paths (and /register, /unregister)",
     KVI_FLAG_STR(kvc_opts, admin_token_file)},
    {"register-token-file", "PATH",
     "bearer token for /register and /unregister, besides the admin token",
     KVI_FLAG_STR(kvc_opts, register_token_file)},
    {"rpc-secret-file", "PATH",
     "the shards' RPC secret, sent with every request",
     KVI_FLAG_STR(kvc_opts, rpc_secret_file)},

    KVI_FLAG_SECTION("Replicas (leader election with a Kubernetes Lease; the "
		     "API server, token and CA of the pod watcher):"),
    {"leader-election-lease", "NAMESPACE/NAME",
     "lead only while holding it; without it this coordinator leads alone",
     KVI_FLAG_STR(kvc_opts, lease)},
    {"identity", "NAME", "this replica", KVI_FLAG_STR(kvc_opts, identity),
     .def = "host name"},
    {"advertise-url", "URL", "where followers redirect writes",
     KVI_FLAG_STR(kvc_opts, advertise),
     .def = "http://$POD_IP:PORT, else the --http address or host name"},
    {"leader-election-lease-duration-ms", "N",
     "how long a Lease not renewed keeps its holder",
     KVI_FLAG_INT(kvc_opts, le.lease_duration_ms, 1, 3600000), .def = "15000"},
    {"leader-election-renew-deadline-ms", "N",
     "a leader that has not renewed for this long stops leading",
     KVI_FLAG_INT(kvc_opts, le.renew_deadline_ms, 1, 3600000), .def = "10000"},
    {"leader-election-retry-period-ms", "N",
     "how often a replica tries to take or renew the Lease",
     KVI_FLAG_INT(kvc_opts, le.retry_period_ms, 1, 3600000), .def = "2000"},

    KVI_FLAG_GROUP("Logs"),
    {"log-level", "LEVEL", "debug, info, warn, error",
     KVI_FLAG_FN(kvi_flag_log_level), .off = offsetof(kvc_opts, log_level),
     .def = "info"},
    {"log-file", "PATH", "log there instead of standard error",
     KVI_FLAG_STR(kvc_opts, log_file)},
};

const kvi_flags kvc_opts_flags = {
    .prog = "kvindex-coordinator",
    .synopsis = "--shards ID=URL[,ID=URL...] [options]",
    .summary = "Discovers engine pods, spreads their data-parallel ranks "
	       "(listeners) over the kvindex shards, and answers routers' "
	       "prefix-cache queries over HTTP by asking the shards that own "
	       "a model's listeners and merging their answers.",
    .flag = coord_flag,
    .n = sizeof(coord_flag) / sizeof(coord_flag[0]),
    .defaults = &coord_defaults,
    .size = sizeof(kvc_opts),
};

/* coord_parse fills o from the command line as kvi_flags_parse does (0,
 * 1 after --help, -1), and requires a shard. */
int
kvc_opts_parse(int argc, char **argv, kvc_opts *o)
{
	int rc = kvi_flags_parse(&kvc_opts_flags, o, argc, argv);
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

void
kvc_opts_fini(kvc_opts *o)
{
	for (size_t i = 0; i < o->n_shards; i++) {
		kvi_free(o->shard_ids[i]);
		kvi_free(o->shard_urls[i]);
	}
	for (size_t i = 0; i < o->kube.n_namespaces; i++) {
		kvi_free(o->namespaces[i]);
	}
}
