#include "sim_http.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "sim_http_int.h"
#include "sim_json.h"
#include "sim_keys.h"
#include "sim_load.h"
#include "sim_os.h"
#include "sim_prom.h"

#define MAX_BODY      (64u << 20)
#define QUIT_DELAY_US 50000 /* lets the /quit reply go out */

/* ---- replies -------------------------------------------------------- */

static void
free_kvi(const void *data, size_t len, void *arg)
{
	(void)len;
	(void)arg;
	kvi_free((void *)data);
}

static void
free_libc(const void *data, size_t len, void *arg)
{
	(void)len;
	(void)arg;
	free((void *)data); /* allocated by jansson */
}

/* reply_owned sends text (len bytes) without copying it; cleanup frees it
 * once libevent has written it out. */
static void
reply_owned(struct evhttp_request *req, int code, char *text, size_t len,
	    evbuffer_ref_cleanup_cb cleanup)
{
	struct evbuffer *out = evbuffer_new();
	if (out == NULL) {
		kvi_oom(0);
	}
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "Content-Type", "application/json");
	if (evbuffer_add_reference(out, text, len, cleanup, NULL) != 0) {
		kvi_oom(len);
	}
	evhttp_send_reply(req, code,
			  code == 200   ? "OK"
			  : code == 202 ? "Accepted"
					: "Error",
			  out);
	evbuffer_free(out);
}

static void
reply_buf(struct evhttp_request *req, int code, sim_buf *b)
{
	size_t len;
	char *text = sim_buf_release(b, &len);
	reply_owned(req, code, text, len, free_kvi);
}

/* reply_json sends v and releases it. */
void
sim_http_reply_json(struct evhttp_request *req, int code, json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	if (text == NULL) {
		kvi_oom(0);
	}
	reply_owned(req, code, text, strlen(text), free_libc);
}

void
sim_http_reply_error(struct evhttp_request *req, int code, const char *msg)
{
	sim_http_reply_json(req, code, json_pack("{s:s}", "error", msg));
}

/* ---- request parsing ------------------------------------------------ */

static json_t *
body_json(struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	if (len == 0) {
		return json_object();
	}
	const char *data = (const char *)evbuffer_pullup(in, -1);
	return json_loadb(data, len, 0, NULL);
}

bool
sim_http_json_u64(const json_t *o, const char *key, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max) {
		return false;
	}
	*out = (uint64_t)json_integer_value(v);
	return true;
}

/* rank_of finds the rank named by "pod" and "rank" in body. */
bool
sim_http_rank_of(const sim_http *h, const json_t *body, size_t *idx)
{
	uint64_t pod, rank;
	if (!sim_http_json_u64(body, "pod", h->cfg.pods - 1, &pod) ||
	    !sim_http_json_u64(body, "rank", h->cfg.dp - 1, &rank)) {
		return false;
	}
	*idx = (size_t)(pod * h->cfg.dp + rank);
	return true;
}

static bool
query_u64(struct evkeyvalq *q, const char *key, uint64_t *out, bool *present)
{
	const char *v = evhttp_find_header(q, key);
	*present = v != NULL;
	return v == NULL || sim_parse_u64(v, out);
}

/* ---- control handlers ----------------------------------------------- */

static void
handle_status(sim_http *h, struct evhttp_request *req)
{
	sim_engine_stats es;
	sim_engine_stats_get(h->engine, &es);
	json_t *ranks = json_array();
	uint64_t now = sim_now_ns();
	for (size_t i = 0; i < h->n; i++) {
		sim_rank_stats s;
		sim_rank_stats_get(h->ranks[i], &s);
		json_t *rank;
		json_array_append_new(
		    ranks,
		    rank = json_pack(
			"{s:i,s:i,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:i,"
			"s:b}",
			"pod", (int)sim_rank_pod(h->ranks[i]), "rank",
			(int)sim_rank_dp_rank(h->ranks[i]), "flavour",
			sim_flavour_name(sim_rank_flavour(h->ranks[i])), "seq",
			(json_int_t)s.seq, "published", (json_int_t)s.published,
			"sent", (json_int_t)s.sent, "skipped",
			(json_int_t)s.skipped, "replays", (json_int_t)s.replays,
			"restarts", (json_int_t)s.restarts, "requests",
			(json_int_t)s.requests, "gpu_blocks", (int)s.gpu_blocks,
			"cpu_blocks", (int)s.cpu_blocks, "stalled", s.stalled));
		if (s.n_groups > 0) {
			json_t *g = json_array();
			for (size_t k = 0; k < s.n_groups; k++) {
				json_array_append_new(
				    g, json_integer(s.group_blocks[k]));
			}
			json_object_set_new(rank, "group_blocks", g);
		}
		if (sim_engine_timed(h->engine)) {
			sim_engine_load l;
			sim_engine_load_get(h->engine, i, &l);
			double busy =
			    l.running && l.busy_until_ns > now
				? (double)(l.busy_until_ns - now) / 1e6
				: 0.0;
			json_object_set_new(rank, "queued",
					    json_integer(l.waiting));
			json_object_set_new(rank, "prefilling",
					    json_boolean(l.running));
			json_object_set_new(rank, "busy_until_ms",
					    json_real(busy));
		}
	}
	sim_http_reply_json(
	    req, 200,
	    json_pack("{s:b,s:b,s:I,s:I,s:I,s:I,s:o}", "paused", es.paused,
		      "load_done", es.load_done, "requests_done",
		      (json_int_t)es.requests_done, "stored_blocks",
		      (json_int_t)es.stored_blocks, "removed_blocks",
		      (json_int_t)es.removed_blocks, "batches",
		      (json_int_t)es.batches, "ranks", ranks));
}

static void
handle_truth(sim_http *h, struct evhttp_request *req)
{
	struct evkeyvalq q;
	const char *query =
	    evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	uint64_t pod = 0, rank = 0;
	bool has_pod, has_rank;
	evhttp_parse_query_str(query ? query : "", &q);
	bool ok = query_u64(&q, "pod", &pod, &has_pod) &&
		  query_u64(&q, "rank", &rank, &has_rank) && has_pod &&
		  has_rank && pod < h->cfg.pods && rank < h->cfg.dp;
	evhttp_clear_headers(&q);
	if (!ok) {
		sim_http_reply_error(req, 400, "pod and rank must name a rank");
		return;
	}
	sim_buf b;
	sim_buf_init(&b);
	sim_rank_truth(h->ranks[pod * h->cfg.dp + rank], &b);
	reply_buf(req, 200, &b);
}

static void
handle_engine_op(sim_http *h, struct evhttp_request *req, json_t *body,
		 sim_command_type type)
{
	sim_command cmd = {.type = type};
	if (!sim_http_rank_of(h, body, &cmd.rank)) {
		sim_http_reply_error(req, 400, "pod and rank must name a rank");
		return;
	}
	if (sim_engine_call(h->engine, &cmd) != KVI_OK) {
		sim_http_reply_error(req, 500, kvi_strerror(cmd.result));
		return;
	}
	sim_http_reply_json(
	    req, 200, json_pack("{s:o}", "seq", sim_http_seq_json(cmd.seq)));
}

static void
handle_fault(sim_http *h, struct evhttp_request *req, json_t *body,
	     const char *kind)
{
	size_t idx;
	uint64_t v = 1;
	if (!sim_http_rank_of(h, body, &idx)) {
		sim_http_reply_error(req, 400, "pod and rank must name a rank");
		return;
	}
	sim_rank *r = h->ranks[idx];
	if (strcmp(kind, "skip") == 0 || strcmp(kind, "garble") == 0 ||
	    strcmp(kind, "recover") == 0) {
		if (json_object_get(body, "count") != NULL &&
		    !sim_http_json_u64(body, "count", UINT32_MAX, &v)) {
			sim_http_reply_error(req, 400, "count must be a u32");
			return;
		}
	}
	if (strcmp(kind, "skip") == 0) {
		sim_rank_fault_skip(r, (uint32_t)v);
	} else if (strcmp(kind, "garble") == 0) {
		sim_rank_fault_garble(r, (uint32_t)v);
	} else if (strcmp(kind, "stall") == 0) {
		if (!sim_http_json_u64(body, "ms", 24 * 3600 * 1000u, &v)) {
			sim_http_reply_error(req, 400,
					     "ms must be a duration in ms");
			return;
		}
		sim_rank_fault_stall(r, v);
	} else {
		sim_recover_kind mode;
		const char *m =
		    json_string_value(json_object_get(body, "mode"));
		if (m == NULL || !sim_recover_kind_parse(m, &mode)) {
			sim_http_reply_error(
			    req, 400,
			    "mode must be error, too_new, invalid_range, "
			    "tree_dump or hang");
			return;
		}
		sim_rank_fault_recover(r, mode, (uint32_t)v);
	}
	sim_http_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

static void
handle_post(sim_http *h, struct evhttp_request *req, const char *path)
{
	json_t *body = body_json(req);
	if (!json_is_object(body)) {
		json_decref(body);
		sim_http_reply_error(req, 400,
				     "the body must be a JSON object");
		return;
	}
	if (strcmp(path, "/pause") == 0 || strcmp(path, "/resume") == 0) {
		bool paused = strcmp(path, "/pause") == 0;
		sim_engine_set_paused(h->engine, paused);
		sim_http_reply_json(req, 200,
				    json_pack("{s:b}", "paused", paused));
	} else if (strcmp(path, "/prefill") == 0) {
		sim_http_prefill(h, req, body);
	} else if (strcmp(path, "/hit") == 0) {
		sim_http_hit(h, req, body);
	} else if (strcmp(path, "/clear") == 0) {
		handle_engine_op(h, req, body, SIM_CMD_CLEAR);
	} else if (strcmp(path, "/fault/restart") == 0) {
		handle_engine_op(h, req, body, SIM_CMD_RESTART);
	} else if (strncmp(path, "/fault/", 7) == 0 &&
		   (strcmp(path + 7, "skip") == 0 ||
		    strcmp(path + 7, "garble") == 0 ||
		    strcmp(path + 7, "stall") == 0 ||
		    strcmp(path + 7, "recover") == 0)) {
		handle_fault(h, req, body, path + 7);
	} else if (strcmp(path, "/quit") == 0) {
		sim_http_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
		struct timeval tv = {0, QUIT_DELAY_US};
		KVI_INFO("quit", "source=http");
		event_base_loopexit(h->base, &tv);
	} else {
		sim_http_reply_error(req, 404, "no such endpoint");
	}
	json_decref(body);
}

static void
control_cb(struct evhttp_request *req, void *arg)
{
	sim_http *h = arg;
	const char *path =
	    evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	if (path == NULL) {
		sim_http_reply_error(req, 400, "bad URI");
	} else if (method == EVHTTP_REQ_GET && strcmp(path, "/status") == 0) {
		handle_status(h, req);
	} else if (method == EVHTTP_REQ_GET && strcmp(path, "/truth") == 0) {
		handle_truth(h, req);
	} else if (method == EVHTTP_REQ_POST) {
		handle_post(h, req, path);
	} else {
		sim_http_reply_error(req, 404, "no such endpoint");
	}
}

/* ---- /kv_recover ---------------------------------------------------- */

static void
recover_error(struct evhttp_request *req, const char *msg)
{
	sim_buf b;
	sim_buf_init(&b);
	sim_recover_write_error(&b, msg);
	reply_buf(req, 400, &b);
}

static void
recover_cb(struct evhttp_request *req, void *arg)
{
	recover_server *rs = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = evhttp_uri_get_path(uri);
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET || path == NULL ||
	    strcmp(path, "/kv_recover") != 0) {
		sim_http_reply_error(req, 404, "no such endpoint");
		return;
	}
	struct evkeyvalq q;
	const char *query = evhttp_uri_get_query(uri);
	evhttp_parse_query_str(query ? query : "", &q);
	sim_recover_query rq = {0};
	bool has_start, has_end;
	bool ok = query_u64(&q, "start", &rq.start, &has_start) &&
		  query_u64(&q, "end", &rq.end, &has_end);
	evhttp_clear_headers(&q);
	if (!ok || has_start != has_end) {
		recover_error(req,
			      "start and end must be u64s, given together");
		return;
	}
	rq.has_range = has_start;
	sim_buf b;
	sim_buf_init(&b);
	sim_recover_kind kind =
	    sim_rank_recover(rs->h->ranks[rs->rank], &rq, &b);
	if (kind == SIM_RECOVER_HANG) {
		/* Never answered: the request lives until the client gives
		 * up or the simulator exits (evhttp frees it then). */
		sim_buf_fini(&b);
		return;
	}
	reply_buf(req, kind == SIM_RECOVER_ERROR ? 500 : 200, &b);
}

/* ---- /metrics ------------------------------------------------------- */

static void
metrics_cb(struct evhttp_request *req, void *arg)
{
	metrics_server *ms = arg;
	const char *path =
	    evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET || path == NULL ||
	    strcmp(path, "/metrics") != 0) {
		sim_http_reply_error(req, 404, "no such endpoint");
		return;
	}
	sim_http *h = ms->h;
	sim_prom_rank *ranks = kvi_calloc(h->cfg.dp, sizeof(*ranks));
	for (uint32_t r = 0; r < h->cfg.dp; r++) {
		size_t i = (size_t)ms->pod * h->cfg.dp + r;
		sim_rank_metrics_get(h->ranks[i], &ranks[r].m);
		sim_engine_load_get(h->engine, i, &ranks[r].load);
	}
	sim_buf b;
	sim_buf_init(&b);
	sim_prom_write(&b, h->cfg.model, ranks, h->cfg.dp);
	kvi_free(ranks);
	size_t len;
	char *text = sim_buf_release(&b, &len);
	struct evbuffer *out = evbuffer_new();
	if (out == NULL) {
		kvi_oom(0);
	}
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "Content-Type",
			  "text/plain; version=0.0.4; charset=utf-8");
	if (evbuffer_add_reference(out, text, len, free_kvi, NULL) != 0) {
		kvi_oom(len);
	}
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

/* ---- servers -------------------------------------------------------- */

sim_http *
sim_http_alloc(struct event_base *base, const sim_http_config *cfg,
	       sim_engine *engine, sim_rank **ranks, size_t n)
{
	sim_http *h = kvi_calloc(1, sizeof(*h));
	h->base = base;
	h->cfg = *cfg;
	h->engine = engine;
	h->ranks = ranks;
	h->n = n;
	h->recover = kvi_calloc(n, sizeof(*h->recover));
	h->metrics = kvi_calloc(cfg->pods, sizeof(*h->metrics));
	pthread_mutex_init(&h->done_mu, NULL);
	h->done_fd = -1;
	if (sim_engine_timed(engine)) {
		h->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (h->done_fd < 0) {
			kvi_oom(0);
		}
		h->done_ev = event_new(base, h->done_fd, EV_READ | EV_PERSIST,
				       sim_http_done_cb, h);
		event_add(h->done_ev, NULL);
		sim_engine_set_done(engine, sim_http_job_done, h);
	}
	return h;
}

void
sim_http_free(sim_http *h)
{
	if (h == NULL) {
		return;
	}
	for (size_t i = 0; i < h->n; i++) {
		if (h->recover[i].http != NULL) {
			evhttp_free(h->recover[i].http);
		}
	}
	/* Replies never sent: their requests go with the servers. */
	while (h->waiting != NULL) {
		sim_http_pending_release(h, h->waiting);
	}
	for (sim_job *j = h->done_head; j != NULL;) {
		sim_job *next = j->next;
		sim_job_free(j); /* its pending was on the waiting list */
		j = next;
	}
	for (uint32_t p = 0; p < h->cfg.pods; p++) {
		if (h->metrics[p].http != NULL) {
			evhttp_free(h->metrics[p].http);
		}
	}
	if (h->control != NULL) {
		evhttp_free(h->control);
	}
	if (h->done_ev != NULL) {
		event_free(h->done_ev);
	}
	if (h->done_fd >= 0) {
		close(h->done_fd);
	}
	pthread_mutex_destroy(&h->done_mu);
	kvi_free(h->metrics);
	kvi_free(h->recover);
	kvi_free(h);
}

static struct evhttp *
new_server(sim_http *h, void (*cb)(struct evhttp_request *, void *), void *arg)
{
	struct evhttp *http = evhttp_new(h->base);
	if (http == NULL) {
		kvi_oom(0);
	}
	evhttp_set_max_body_size(http, MAX_BODY);
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
	evhttp_set_gencb(http, cb, arg);
	return http;
}

kvi_err
sim_http_bind_control(sim_http *h, const char *host, int port, int *bound)
{
	h->control = new_server(h, control_cb, h);
	struct evhttp_bound_socket *s =
	    evhttp_bind_socket_with_handle(h->control, host, (uint16_t)port);
	if (s == NULL) {
		return KVI_EIO;
	}
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&ss,
			&len) != 0) {
		return KVI_EIO;
	}
	*bound = ss.ss_family == AF_INET6
		     ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
		     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return KVI_OK;
}

static kvi_err
bind_recover(void *arg, size_t i, int port)
{
	sim_http *h = arg;
	recover_server *rs = &h->recover[i];
	if (rs->http == NULL) {
		rs->h = h;
		rs->rank = i;
		rs->http = new_server(h, recover_cb, rs);
	}
	errno = 0;
	rs->bound = evhttp_bind_socket_with_handle(rs->http, h->recover_ip,
						   (uint16_t)port);
	if (rs->bound == NULL) {
		return errno == EADDRINUSE ? KVI_EEXIST : KVI_EIO;
	}
	return KVI_OK;
}

static void
unbind_recover(void *arg, size_t i)
{
	sim_http *h = arg;
	evhttp_del_accept_socket(h->recover[i].http, h->recover[i].bound);
	h->recover[i].bound = NULL;
}

kvi_err
sim_http_bind_recover(sim_http *h, const char *ip, int base, int *chosen)
{
	h->recover_ip = ip;
	return sim_bind_range(h->n, base, bind_recover, unbind_recover, h,
			      chosen);
}

static kvi_err
bind_metrics(void *arg, size_t i, int port)
{
	sim_http *h = arg;
	metrics_server *ms = &h->metrics[i];
	if (ms->http == NULL) {
		ms->h = h;
		ms->pod = (uint32_t)i;
		ms->http = new_server(h, metrics_cb, ms);
	}
	errno = 0;
	ms->bound = evhttp_bind_socket_with_handle(ms->http, h->metrics_ip,
						   (uint16_t)port);
	if (ms->bound == NULL) {
		return errno == EADDRINUSE ? KVI_EEXIST : KVI_EIO;
	}
	return KVI_OK;
}

static void
unbind_metrics(void *arg, size_t i)
{
	sim_http *h = arg;
	evhttp_del_accept_socket(h->metrics[i].http, h->metrics[i].bound);
	h->metrics[i].bound = NULL;
}

kvi_err
sim_http_bind_metrics(sim_http *h, const char *ip, int base, int *chosen)
{
	h->metrics_ip = ip;
	return sim_bind_range(h->cfg.pods, base, bind_metrics, unbind_metrics,
			      h, chosen);
}
