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
#include "ladder.h"
#include "lease.h"
#include "log.h"
#include "metrics.h"
#include "options.h"
#include "query.h"
#include "registry.h"
#include "replica.h"
#include "routed.h"
#include "rpc.h"
#include "shardset.h"

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
coord_read_tokens(const kvc_opts *o, char **admin, char **reg)
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

/* The running coordinator: what main wires and takes down again. */
typedef struct coord {
	kvc_opts o;
	long nofile;
	char *token, *reg_token;
	kvi_metrics *metrics;
	kvc_registry *reg;
	kvc_shardset *shards;
	kvc_cstore *store;
	kvc_assigner *asg;
	kvc_query *query;
	kvc_dfile_watch *watch;
	kvc_kube_watch *kube;
	kvc_kube_bufs kube_bufs;
	kvc_replica_flags rf;
	kvc_lease *lease;
	char identity[KVC_LEASE_IDENTITY_MAX], advertise[KVC_LEASE_URL_MAX];
	kvi_httpd *httpd;
	kvc_api api; /* the routes keep pointers into it */
	kvc_ladder *ladder;
	kvc_routed *routed;
} coord;

/* coord_process readies the process: the log, signals for sigwait, the
 * allocator's thresholds and the open-file limit. False when the log
 * cannot be opened. */
static bool
coord_process(coord *c, sigset_t *sigs)
{
	int log_fd = kvi_log_open_fd(c->o.log_file);
	if (log_fd < 0) {
		return false;
	}
	kvi_log_setup("coordinator", c->o.log_level, log_fd);
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
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
	c->nofile = kvi_nofile_raise();
	return true;
}

/* coord_secrets reads the tokens and the RPC secret, and resolves the
 * Kubernetes API server the pod watcher and the lease share. */
static bool
coord_secrets(coord *c)
{
	kvc_opts *o = &c->o;
	char err[512] = "";
	if (!coord_read_tokens(o, &c->token, &c->reg_token)) {
		return false;
	}
	if (o->rpc_secret_file != NULL &&
	    kvp_secret_load(o->rpc_secret_file, err, sizeof(err)) != KVI_OK) {
		fprintf(stderr, "kvindex-coordinator: --rpc-secret-file %s\n",
			err);
		return false;
	}
	if ((o->kube.n_namespaces > 0 &&
	     kvc_kube_config_resolve(&o->kube, &c->kube_bufs, err,
				     sizeof(err)) != KVI_OK) ||
	    (o->kube.n_namespaces == 0 && o->lease != NULL &&
	     kvc_kube_api_resolve(&o->kube, &c->kube_bufs, err, sizeof(err)) !=
		 KVI_OK)) {
		fprintf(stderr, "kvindex-coordinator: kubernetes: %s\n", err);
		return false;
	}
	return true;
}

/* coord_state makes the registry and the shard set, and opens the store,
 * which adds the shards and drains it kept. */
static bool
coord_state(coord *c)
{
	kvc_opts *o = &c->o;
	char err[512] = "";
	c->reg = kvc_reg_alloc();
	kvc_reg_set_max_dp_size(c->reg, o->max_dp_size);
	c->shards = kvc_shardset_alloc();
	kvc_shardset_set_batching(c->shards, o->query_inflight,
				  (size_t)o->query_batch);
	for (size_t i = 0; i < o->n_shards; i++) {
		if (kvc_shardset_add(c->shards, o->shard_ids[i],
				     o->shard_urls[i], err,
				     sizeof(err)) != KVI_OK) {
			fprintf(stderr, "kvindex-coordinator: --shards: %s\n",
				err);
			return false;
		}
	}
	if (o->data_dir == NULL) {
		KVI_WARN("no_store",
			 "msg=\"no --data-dir: pins, shards added and drains "
			 "will not survive a restart, nor HTTP registrations "
			 "no shard holds\"");
		return true;
	}
	if (kvc_cstore_open_or_move(o->data_dir, &c->store) != KVI_OK) {
		return false;
	}
	kvc_cstore_shard_list(c->store, coord_load_shard, c->shards, err,
			      sizeof(err));
	kvc_cstore_drain_list(c->store, coord_load_drain, c->shards, err,
			      sizeof(err));
	return true;
}

/* coord_owners opens the assigner and, with --lease, the election, and
 * makes the query path. */
static bool
coord_owners(coord *c)
{
	kvc_opts *o = &c->o;
	char err[512] = "";
	/* the sources coord_sources opens, known before the first tick */
	o->assign.expect_sources =
	    (o->discovery_file != NULL ? 1u << KVC_SOURCE_FILE : 0) |
	    (o->kube.n_namespaces > 0 ? 1u << KVC_SOURCE_KUBERNETES : 0);
	o->assign.route_settle_ms =
	    o->query.deadline_ms +
	    (o->assign.tick_ms > 0 ? o->assign.tick_ms : 500);
	if (kvc_assigner_open(c->reg, c->shards, c->store, c->metrics,
			      &o->assign, &c->asg, err,
			      sizeof(err)) != KVI_OK) {
		KVI_ERROR("start_failed", "err=%s", err);
		return false;
	}
	o->ladder.gap = o->ladder_gap_pct / 100.0;
	if (kvc_ladder_open(&o->ladder, c->reg, c->metrics, &c->ladder, err,
			    sizeof(err)) != KVI_OK) {
		KVI_ERROR("start_failed", "err=%s", err);
		return false;
	}
	c->rf = (kvc_replica_flags){.lease = o->lease,
				    .identity = o->identity,
				    .advertise = o->advertise,
				    .http = o->http,
				    .le = o->le};
	if (o->lease != NULL &&
	    kvc_replica_open(&c->rf, &o->kube, c->metrics, &c->lease,
			     c->identity, sizeof(c->identity), c->advertise,
			     sizeof(c->advertise)) != KVI_OK) {
		return false;
	}
	kvc_assigner_set_lease(c->asg, c->lease);
	if (o->lease == NULL) {
		kvc_replica_identity(o->identity, c->identity,
				     sizeof(c->identity));
	}
	o->query.batch_inflight = o->query_inflight;
	o->query.batch_max = (size_t)o->query_batch;
	c->query = kvc_query_alloc(c->reg, c->shards, c->metrics, &o->query);
	/* a routed request is worth a little more patience than a query:
	 * a router that loses it routes on without the prediction */
	c->routed =
	    kvc_routed_alloc(c->reg, c->shards, c->query, c->metrics, 1000);
	return true;
}

/* coord_sources opens the discovery sources the flags name. */
static bool
coord_sources(coord *c)
{
	kvc_opts *o = &c->o;
	char err[512] = "";
	if (o->discovery_file != NULL) {
		if (kvc_dfile_watch_open(o->discovery_file, o->dp_size, 500,
					 coord_on_file, c->asg,
					 &c->watch) != KVI_OK) {
			KVI_ERROR("start_failed",
				  "err=\"cannot watch the discovery file\"");
			return false;
		}
	}
	if (o->kube.n_namespaces > 0) {
		if (kvc_kube_watch_open(&o->kube, c->metrics, coord_on_kube,
					c->asg, &c->kube, err,
					sizeof(err)) != KVI_OK) {
			KVI_ERROR("start_failed", "kubernetes=\"%s\"", err);
			return false;
		}
		KVI_INFO("kube_watching", "api=%s namespaces=%zu label=%s",
			 o->kube.api, o->kube.n_namespaces,
			 o->kube.label_selector ? o->kube.label_selector : "-");
	}
	return true;
}

/* coord_http starts the HTTP API; with a lease and no --advertise-url,
 * the port it bound then names where followers send writes. */
static bool
coord_http(coord *c)
{
	kvc_opts *o = &c->o;
	char err[512] = "";
	c->api = (kvc_api){
	    .reg = c->reg,
	    .shards = c->shards,
	    .assigner = c->asg,
	    .query = c->query,
	    .routed = c->routed,
	    .metrics = c->metrics,
	    .default_dp_size = o->dp_size,
	    .admin_token = c->token,
	    .register_token = c->reg_token,
	    .lease = c->lease,
	    .identity = c->identity,
	};
	/* past the limit a client gets a fast 503, not a hang: half the
	 * descriptors for clients, the rest for shards, files and the API
	 * server */
	int conns =
	    o->max_conns > 0 ? o->max_conns
	    : c->nofile > 0
		? (int)(c->nofile / 2 < INT_MAX ? c->nofile / 2 : INT_MAX)
		: 0;
	kvi_httpd_config hc = {
	    .max_body = o->max_body,
	    .drain_ms = 2000,
	    .max_conns =
		conns > 0 ? (conns + o->http_threads - 1) / o->http_threads : 0,
	    .local_free = kvc_query_loop_free,
	    .local_arg = c->query,
	};
	c->httpd = kvi_httpd_alloc(&hc);
	if (kvc_api_routes(c->httpd, &c->api) != KVI_OK ||
	    kvi_httpd_start(c->httpd, o->http, o->http_threads, err,
			    sizeof(err)) != KVI_OK) {
		KVI_ERROR("start_failed", "http=%s err=%s", o->http, err);
		return false;
	}
	kvi_metrics_collector_add(c->metrics, coord_http_metrics, c->httpd);
	kvi_metrics_process_add(c->metrics);
	if (c->lease != NULL && c->advertise[0] == '\0') {
		int port = (int)kvi_httpd_port(c->httpd);
		kvc_replica_url(&c->rf, port, c->identity, c->advertise,
				sizeof(c->advertise));
		kvc_lease_set_url(c->lease, c->advertise);
	}
	return true;
}

/* coord_close takes down what coord_wire made, in reverse order. */
static void
coord_close(coord *c)
{
	kvi_httpd_stop(c->httpd);
	kvc_dfile_watch_free(c->watch);
	kvc_kube_watch_free(c->kube);
	/* the lease is released before the assigner goes, so that a
	 * follower takes over at once */
	kvc_lease_stop(c->lease);
	kvc_ladder_free(c->ladder);
	kvc_assigner_free(c->asg);
	kvc_lease_free(c->lease);
	kvi_httpd_free(c->httpd);
	kvc_query_free(c->query);
	kvc_routed_free(c->routed);
	kvc_shardset_free(c->shards);
	kvc_reg_free(c->reg);
	kvc_cstore_close(c->store);
	kvi_metrics_free(c->metrics);
	kvi_free(c->token);
	kvi_free(c->reg_token);
	kvc_opts_fini(&c->o);
}

/* coord_wire opens every part, in order: secrets, state, owners, sources,
 * the HTTP API. False at the first that fails (it said why). */
static bool
coord_wire(coord *c)
{
	c->metrics = kvi_metrics_alloc();
	return coord_secrets(c) && coord_state(c) && coord_owners(c) &&
	       coord_sources(c) && coord_http(c);
}

int
main(int argc, char **argv)
{
	coord c = {0};
	int rc = kvc_opts_parse(argc, argv, &c.o);
	if (rc != 0) {
		if (rc < 0) {
			kvi_flags_usage(stderr, &kvc_opts_flags);
		}
		kvc_opts_fini(&c.o);
		return rc < 0 ? 2 : 0;
	}
	sigset_t sigs;
	if (!coord_process(&c, &sigs)) {
		kvc_opts_fini(&c.o);
		return 2;
	}
	int status = 1;
	if (coord_wire(&c)) {
		KVI_INFO("serving",
			 "http=%s port=%u shards=%zu discovery_file=%s "
			 "dp_size=%u",
			 c.o.http, kvi_httpd_port(c.httpd),
			 kvc_shardset_count(c.shards),
			 c.o.discovery_file ? c.o.discovery_file : "-",
			 c.o.dp_size);
		int sig = 0;
		sigwait(&sigs, &sig);
		KVI_INFO("stopping", "signal=%d", sig);
		status = 0;
	}
	coord_close(&c);
	return status;
}
