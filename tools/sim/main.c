/*
 * kvindex-sim - simulated vLLM engine ranks for tests and benchmarks.
 *
 * main parses the flags, builds the ranks, binds every socket (PUB,
 * ROUTER, /kv_recover, control), writes the layout file, then runs the
 * engine thread (sim_engine.h) and the HTTP event loop (sim_http.h) until
 * SIGTERM, SIGINT or POST /quit, and frees everything on the way out.
 */
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zmq.h>

#include "alloc.h"
#include "log.h"
#include "sim_config.h"
#include "sim_engine.h"
#include "sim_http.h"
#include "sim_load.h"
#include "sim_os.h"
#include "sim_rank.h"

typedef struct sim {
	sim_config cfg;
	sim_rank_config rank_cfg;
	void *zmq_ctx;
	sim_rank **ranks;
	size_t n;
	struct event_base *base;
	sim_engine *engine;
	sim_http *http;
	int zmq_base;
	int replay_base;
	int recover_base;
	int metrics_base;
	int control_port;
	int log_fd;
} sim;

static kvi_err
bind_pub(void *arg, size_t i, int port)
{
	sim *s = arg;
	return sim_rank_bind_pub(s->ranks[i], s->zmq_ctx, port);
}

static void
unbind_pub(void *arg, size_t i)
{
	sim_rank_unbind_pub(((sim *)arg)->ranks[i]);
}

static kvi_err
bind_replay(void *arg, size_t i, int port)
{
	sim *s = arg;
	return sim_rank_bind_replay(s->ranks[i], s->zmq_ctx, port);
}

static void
unbind_replay(void *arg, size_t i)
{
	sim_rank_unbind_replay(((sim *)arg)->ranks[i]);
}

/* A thousand ranks need a few thousand descriptors. */
static void
raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static kvi_err
open_load(const sim_config *c, sim_load **out)
{
	*out = NULL;
	if (c->trace == NULL && c->generate == 0) {
		return KVI_OK;
	}
	sim_load_config lc = {.trace_path = c->trace,
			      .generate = c->generate,
			      .copies = c->copies,
			      .blocks_per_id = c->blocks_per_id,
			      .block_size = c->block_size,
			      .requests = c->requests,
			      .salts = c->salts,
			      .loras = c->loras,
			      .mm_every = c->mm_every,
			      .loop = c->loop,
			      .seed = c->seed};
	char err[512];
	kvi_err rv = sim_load_open(&lc, out, err, sizeof(err));
	if (rv != KVI_OK) {
		char q[600];
		KVI_ERROR("load_failed", "error=%s",
			  kvi_log_quote(q, sizeof(q), err));
	}
	return rv;
}

static sim_flavour
pod_flavour(const sim_config *c, uint32_t pod)
{
	return c->n_flavours > 0 ? c->flavours[pod % c->n_flavours]
				 : SIM_FLAVOUR_DEFAULT;
}

static const sim_groups_config *
pod_groups(const sim_config *c, uint32_t pod)
{
	return c->n_groups > 0 ? &c->groups[pod % c->n_groups] : NULL;
}

static void
build_ranks(sim *s)
{
	const sim_config *c = &s->cfg;
	s->rank_cfg = (sim_rank_config){
	    .block_size = c->block_size,
	    .gpu_blocks = c->cache_blocks,
	    .cpu_blocks = c->cpu_blocks,
	    .offload = c->offload,
	    .offload_bs0 = c->offload_bs0,
	    .salt = c->hash_salt,
	    .replay_buffer = c->replay_buffer,
	    .recover_log = c->recover_log,
	    .ip = c->ip,
	    .topic = c->topic,
	    .replay_topic = c->replay_topic,
	    .with_rank = c->with_rank,
	    .sub_delay_ms = c->sub_delay_ms,
	};
	s->n = (size_t)c->pods * c->dp;
	s->ranks = kvi_calloc(s->n, sizeof(*s->ranks));
	for (uint32_t p = 0; p < c->pods; p++) {
		for (uint32_t r = 0; r < c->dp; r++) {
			sim_rank *k =
			    sim_rank_alloc(&s->rank_cfg, p, r,
					   pod_flavour(c, p), pod_groups(c, p));
			if (c->dp_group) {
				sim_rank_set_wire_rank(k, p * c->dp + r);
			}
			s->ranks[(size_t)p * c->dp + r] = k;
		}
	}
}

static kvi_err
bind_all(sim *s)
{
	const sim_config *c = &s->cfg;
	kvi_err rv = sim_bind_range(s->n, c->zmq_port.base, bind_pub,
				    unbind_pub, s, &s->zmq_base);
	if (rv != KVI_OK) {
		KVI_ERROR("bind_failed", "what=zmq error=%s", kvi_strerror(rv));
		return rv;
	}
	if (!c->replay_port.off) {
		rv = sim_bind_range(s->n, c->replay_port.base, bind_replay,
				    unbind_replay, s, &s->replay_base);
		if (rv != KVI_OK) {
			KVI_ERROR("bind_failed", "what=replay error=%s",
				  kvi_strerror(rv));
			return rv;
		}
	}
	rv = sim_http_bind_control(s->http, c->control_host, c->control_port,
				   &s->control_port);
	if (rv != KVI_OK) {
		KVI_ERROR("bind_failed", "what=control error=%s",
			  kvi_strerror(rv));
		return rv;
	}
	if (!c->recover_port.off) {
		rv = sim_http_bind_recover(s->http, c->ip, c->recover_port.base,
					   &s->recover_base);
		if (rv != KVI_OK) {
			KVI_ERROR("bind_failed", "what=recover error=%s",
				  kvi_strerror(rv));
			return rv;
		}
	}
	if (!c->metrics_port.off) {
		rv = sim_http_bind_metrics(s->http, c->ip, c->metrics_port.base,
					   &s->metrics_base);
		if (rv != KVI_OK) {
			KVI_ERROR("bind_failed", "what=metrics error=%s",
				  kvi_strerror(rv));
		}
	}
	return rv;
}

static kvi_err
write_layout(const sim *s)
{
	const sim_config *c = &s->cfg;
	const char *host =
	    strcmp(c->control_host, "0.0.0.0") == 0 ? c->ip : c->control_host;
	char url[300];
	snprintf(url, sizeof(url), "http://%s:%d", host, s->control_port);
	json_t *pods = json_array();
	for (uint32_t p = 0; p < c->pods; p++) {
		char name[32];
		/* in one group over the pods, every pod names the group's base
		 * ports and its first global rank: rank g is on base + g */
		int off = c->dp_group ? 0 : (int)(p * c->dp);
		snprintf(name, sizeof(name), "sim/pod-%u", p);
		json_t *pod = json_pack(
		    "{s:s,s:s,s:i,s:i,s:s,s:i}", "name", name, "ip", c->ip,
		    "zmq_port", s->zmq_base + off, "dp_size", (int)c->dp,
		    "model", c->model, "block_size", (int)c->block_size);
		if (c->dp_group) {
			json_object_set_new(
			    pod, "dp_start_rank",
			    json_integer((json_int_t)p * c->dp));
		}
		if (!c->replay_port.off) {
			json_object_set_new(pod, "replay_port",
					    json_integer(s->replay_base + off));
		}
		if (!c->recover_port.off) {
			json_object_set_new(
			    pod, "recover_port",
			    json_integer(s->recover_base + off));
		}
		if (!c->metrics_port.off) {
			json_object_set_new(
			    pod, "metrics_port",
			    json_integer(s->metrics_base + (int)p));
		}
		if (c->n_flavours > 0) {
			/* discovery ignores keys it does not know */
			json_object_set_new(
			    pod, "flavour",
			    json_string(sim_flavour_name(pod_flavour(c, p))));
		}
		json_array_append_new(pods, pod);
	}
	json_t *root = json_pack("{s:s,s:o}", "control", url, "pods", pods);
	char *text = json_dumps(root, JSON_INDENT(2));
	json_decref(root);
	kvi_err rv = sim_write_file_atomic(c->layout_file, text, strlen(text));
	free(text); /* allocated by jansson */
	return rv;
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	KVI_INFO("quit", "source=signal signal=%d", (int)sig);
	event_base_loopexit(arg, NULL);
}

static int
setup_logging(sim *s)
{
	s->log_fd = kvi_log_open_fd(s->cfg.log_file);
	if (s->log_fd < 0) {
		return -1;
	}
	kvi_log_setup("sim", s->cfg.log_level, s->log_fd);
	return 0;
}

static void
teardown(sim *s)
{
	sim_engine_free(s->engine); /* stops the thread first */
	sim_http_free(s->http);
	for (size_t i = 0; i < s->n; i++) {
		sim_rank_free(s->ranks[i]);
	}
	kvi_free(s->ranks);
	if (s->zmq_ctx != NULL) {
		zmq_ctx_term(s->zmq_ctx);
	}
	if (s->base != NULL) {
		event_base_free(s->base);
	}
	libevent_global_shutdown();
	if (s->log_fd > 2) {
		close(s->log_fd);
	}
	sim_config_fini(&s->cfg);
}

static int
run(sim *s)
{
	sim_load *load;
	if (open_load(&s->cfg, &load) != KVI_OK) {
		return 1;
	}
	build_ranks(s);
	s->zmq_ctx = zmq_ctx_new();
	zmq_ctx_set(s->zmq_ctx, ZMQ_MAX_SOCKETS, (int)(2 * s->n + 64));
	s->base = event_base_new();
	sim_engine_config ec = {.rate = s->cfg.rate,
				.requests_per_batch = s->cfg.requests_per_batch,
				.route = s->cfg.route,
				.seed = s->cfg.seed,
				.paused = s->cfg.paused,
				.block_size = s->cfg.block_size,
				.form = s->cfg.form,
				.hash_form = s->cfg.hash_form,
				.prefill_rate = s->cfg.prefill_rate,
				.prefill_chunk = s->cfg.prefill_chunk,
				.max_queue = s->cfg.max_queue,
				.sub_delay_ms = s->cfg.sub_delay_ms};
	s->engine = sim_engine_alloc(&ec, s->zmq_ctx, s->ranks, s->n, load);
	sim_http_config hc = {.dp = s->cfg.dp,
			      .pods = s->cfg.pods,
			      .block_size = s->cfg.block_size,
			      .blocks_per_id = s->cfg.blocks_per_id,
			      .model = s->cfg.model};
	s->http = sim_http_alloc(s->base, &hc, s->engine, s->ranks, s->n);
	if (s->base == NULL || bind_all(s) != KVI_OK) {
		return 1;
	}
	if (s->cfg.layout_file != NULL && write_layout(s) != KVI_OK) {
		KVI_ERROR("layout_failed", "path=%s", s->cfg.layout_file);
		return 1;
	}
	struct event *sigterm =
	    evsignal_new(s->base, SIGTERM, on_signal, s->base);
	struct event *sigint =
	    evsignal_new(s->base, SIGINT, on_signal, s->base);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	int rc = 1;
	if (sim_engine_start(s->engine) == KVI_OK) {
		KVI_INFO("started",
			 "ranks=%zu zmq_base=%d replay_base=%d recover_base=%d "
			 "control_port=%d",
			 s->n, s->zmq_base, s->replay_base, s->recover_base,
			 s->control_port);
		event_base_dispatch(s->base);
		rc = 0;
	}
	sim_engine_stop(s->engine);
	event_free(sigterm);
	event_free(sigint);
	return rc;
}

int
main(int argc, char **argv)
{
	sim s;
	memset(&s, 0, sizeof(s));
	bool help;
	char err[256];
	if (sim_config_parse(argc, argv, &s.cfg, &help, err, sizeof(err)) !=
	    KVI_OK) {
		fprintf(stderr, "kvindex-sim: %s (see --help)\n", err);
		sim_config_fini(&s.cfg);
		return 2;
	}
	if (help) {
		sim_config_usage(stdout);
		sim_config_fini(&s.cfg);
		return 0;
	}
	if (setup_logging(&s) != 0) {
		sim_config_fini(&s.cfg);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();
	int rc = run(&s);
	KVI_INFO("exit", "code=%d", rc);
	teardown(&s);
	return rc;
}
