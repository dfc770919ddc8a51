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
#include "sim_json.h"
#include "sim_keys.h"
#include "sim_load.h"
#include "sim_os.h"

#define MAX_BODY      (64u << 20)
#define QUIT_DELAY_US 50000 /* lets the /quit reply go out */

typedef struct recover_server {
	sim_http *h;
	size_t rank;
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
} recover_server;

/* A /prefill waiting for its request's prefill (timed mode). */
typedef struct pending {
	sim_http *h;
	struct evhttp_request *req; /* NULL once the client went away */
	struct pending *prev, *next;
} pending;

typedef struct metrics_server {
	sim_http *h;
	uint32_t pod;
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
} metrics_server;

struct sim_http {
	struct event_base *base;
	sim_http_config cfg;
	sim_engine *engine;
	sim_rank **ranks;
	size_t n;
	struct evhttp *control;
	recover_server *recover;
	const char *recover_ip;
	metrics_server *metrics; /* per pod */
	const char *metrics_ip;
	/* timed mode */
	pending *waiting; /* replies not sent yet (HTTP thread) */
	int done_fd;      /* the engine signals finished requests */
	struct event *done_ev;
	pthread_mutex_t done_mu;
	sim_job *done_head; /* under done_mu */
	sim_job *done_tail;
};

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
static void
reply_json(struct evhttp_request *req, int code, json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	if (text == NULL) {
		kvi_oom(0);
	}
	reply_owned(req, code, text, strlen(text), free_libc);
}

static void
reply_error(struct evhttp_request *req, int code, const char *msg)
{
	reply_json(req, code, json_pack("{s:s}", "error", msg));
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

static bool
json_u64(const json_t *o, const char *key, uint64_t max, uint64_t *out)
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
static bool
rank_of(const sim_http *h, const json_t *body, size_t *idx)
{
	uint64_t pod, rank;
	if (!json_u64(body, "pod", h->cfg.pods - 1, &pod) ||
	    !json_u64(body, "rank", h->cfg.dp - 1, &rank)) {
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
	reply_json(req, 200,
		   json_pack("{s:b,s:b,s:I,s:I,s:I,s:I,s:o}", "paused",
			     es.paused, "load_done", es.load_done,
			     "requests_done", (json_int_t)es.requests_done,
			     "stored_blocks", (json_int_t)es.stored_blocks,
			     "removed_blocks", (json_int_t)es.removed_blocks,
			     "batches", (json_int_t)es.batches, "ranks",
			     ranks));
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
		reply_error(req, 400, "pod and rank must name a rank");
		return;
	}
	sim_buf b;
	sim_buf_init(&b);
	sim_rank_truth(h->ranks[pod * h->cfg.dp + rank], &b);
	reply_buf(req, 200, &b);
}

/* prefill_tokens reads token_ids or hash_ids into a new token array of
 * *n_tokens tokens (a trailing partial block included). */
static const char *
prefill_tokens(const sim_http *h, const json_t *body, uint32_t **tokens,
	       uint32_t *n_blocks, uint64_t *n_tokens)
{
	json_t *tok = json_object_get(body, "token_ids");
	json_t *ids = json_object_get(body, "hash_ids");
	if (json_is_array(tok) == json_is_array(ids)) {
		return "give exactly one of token_ids and hash_ids";
	}
	json_t *arr = tok ? tok : ids;
	size_t n = json_array_size(arr);
	uint64_t *vals = kvi_malloc((n + 1) * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_array_get(arr, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    (tok && json_integer_value(v) > UINT32_MAX)) {
			kvi_free(vals);
			return tok ? "token_ids must be u32 integers"
				   : "hash_ids must be non-negative integers";
		}
		vals[i] = (uint64_t)json_integer_value(v);
	}
	if (ids != NULL) {
		*tokens = sim_load_expand(vals, n, h->cfg.blocks_per_id,
					  h->cfg.block_size, n_blocks);
		*n_tokens = (uint64_t)*n_blocks * h->cfg.block_size;
	} else {
		*n_tokens = n;
		*n_blocks = (uint32_t)(n / h->cfg.block_size);
		*tokens = kvi_malloc((n + 1) * sizeof(uint32_t));
		for (size_t i = 0; i < n; i++) {
			(*tokens)[i] = (uint32_t)vals[i];
		}
	}
	kvi_free(vals);
	return NULL;
}

/* key_string reads an optional string field into *s and *len (NULL, 0
 * when absent, null or empty); returns false for anything else. */
static bool
key_string(const json_t *body, const char *key, const char **s, size_t *len)
{
	json_t *v = json_object_get(body, key);
	*s = NULL;
	*len = 0;
	if (v == NULL || json_is_null(v)) {
		return true;
	}
	if (!json_is_string(v) ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		return false;
	}
	if (json_string_length(v) > 0) {
		*s = json_string_value(v);
		*len = json_string_length(v);
	}
	return true;
}

/* mm_item reads one entry of mm_features; returns false unless it is
 * {"identifier": non-empty string, "offset": u64, "length": positive}. */
static bool
mm_item(const json_t *o, kvi_mm_item *it)
{
	const char *id;
	if (!json_is_object(o) ||
	    !key_string(o, "identifier", &id, &it->id_len) || id == NULL ||
	    !json_u64(o, "offset", UINT32_MAX, &it->offset) ||
	    !json_u64(o, "length", UINT32_MAX, &it->length) ||
	    it->length == 0) {
		return false;
	}
	it->id = id;
	return true;
}

/* prefill_keys reads lora_name, cache_salt and mm_features into *k, the
 * items into a new array *items (kvi_free; strings borrowed from body).
 * Returns an error message or NULL. */
static const char *
prefill_keys(const json_t *body, uint64_t n_tokens, sim_flavour flavour,
	     kvi_prompt_keys *k, kvi_mm_item **items)
{
	memset(k, 0, sizeof(*k));
	*items = NULL;
	if (!key_string(body, "lora_name", &k->lora_name, &k->lora_len) ||
	    !key_string(body, "cache_salt", &k->cache_salt, &k->salt_len)) {
		return "lora_name and cache_salt must be strings";
	}
	json_t *mm = json_object_get(body, "mm_features");
	if (mm != NULL && !json_is_null(mm) && !json_is_array(mm)) {
		return "mm_features must be an array";
	}
	size_t n = json_array_size(mm);
	*items = kvi_calloc(n + 1, sizeof(**items));
	uint64_t end = 0;
	for (size_t i = 0; i < n; i++) {
		kvi_mm_item *it = &(*items)[i];
		if (!mm_item(json_array_get(mm, i), it)) {
			return "mm_features entries must be {identifier, "
			       "offset, length > 0}";
		}
		if (it->offset < end || it->offset + it->length > n_tokens) {
			return "mm_features must be sorted, not overlapping "
			       "and inside the prompt";
		}
		end = it->offset + it->length;
	}
	k->mm = *items;
	k->n_mm = n;
	if (sim_flavour_sglang(flavour) && (k->lora_len > 0 || n > 0)) {
		return "an sglang rank's events cannot name a LoRA or "
		       "multimodal items";
	}
	return NULL;
}

static json_t *
seq_json(int64_t seq)
{
	return seq >= 0 ? json_integer(seq) : json_null();
}

/* ---- timed /prefill ------------------------------------------------- */

static void
pending_closed(struct evhttp_connection *conn, void *arg)
{
	(void)conn;
	pending *p = arg;
	p->req = NULL; /* libevent frees it */
}

static void
pending_unlink(sim_http *h, pending *p)
{
	if (p->prev != NULL) {
		p->prev->next = p->next;
	} else {
		h->waiting = p->next;
	}
	if (p->next != NULL) {
		p->next->prev = p->prev;
	}
}

/* pending_release detaches p from its connection (if any) and frees it. */
static void
pending_release(sim_http *h, pending *p)
{
	if (p->req != NULL) {
		struct evhttp_connection *c =
		    evhttp_request_get_connection(p->req);
		if (c != NULL) {
			evhttp_connection_set_closecb(c, NULL, NULL);
		}
	}
	pending_unlink(h, p);
	kvi_free(p);
}

static json_t *
local_hashes_json(const uint64_t *v, uint32_t n)
{
	json_t *locals = json_array();
	char num[24];
	for (uint32_t i = 0; i < n; i++) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)v[i]);
		json_array_append_new(locals, json_string(num));
	}
	return locals;
}

static json_t *seq_json(int64_t seq);

static void
reply_job(struct evhttp_request *req, const sim_job *j)
{
	if (j->result != KVI_OK) {
		reply_error(req, 503, "the rank restarted: request dropped");
		return;
	}
	json_t *o = json_pack(
	    "{s:o,s:i,s:i,s:i,s:i,s:o,s:I,s:I,s:f,s:f,s:i}", "seq",
	    seq_json(j->seq), "stored_blocks", (int)j->stored, "hit_blocks",
	    (int)j->hit_blocks, "cpu_loaded_blocks", (int)j->cpu_loaded,
	    "removed_blocks", (int)j->removed, "local_hashes",
	    local_hashes_json(j->local_hashes, j->n_local), "prompt_tokens",
	    (json_int_t)j->n_tokens, "hit_tokens", (json_int_t)j->hit_tokens,
	    "queue_ms", (double)(j->start_ns - j->arrival_ns) / 1e6,
	    "prefill_ms", (double)(j->end_ns - j->start_ns) / 1e6, "batches",
	    (int)j->batches);
	reply_json(req, 200, o);
}

/* job_done runs on the engine thread: the reply is the HTTP thread's. */
static void
job_done(void *arg, sim_job *j)
{
	sim_http *h = arg;
	pthread_mutex_lock(&h->done_mu);
	if (h->done_tail != NULL) {
		h->done_tail->next = j;
	} else {
		h->done_head = j;
	}
	h->done_tail = j;
	pthread_mutex_unlock(&h->done_mu);
	uint64_t one = 1;
	ssize_t w = write(h->done_fd, &one, sizeof(one));
	(void)w;
}

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	sim_http *h = arg;
	uint64_t v;
	ssize_t got = read(fd, &v, sizeof(v));
	(void)got;
	pthread_mutex_lock(&h->done_mu);
	sim_job *j = h->done_head;
	h->done_head = h->done_tail = NULL;
	pthread_mutex_unlock(&h->done_mu);
	while (j != NULL) {
		sim_job *next = j->next;
		pending *p = j->ctx;
		struct evhttp_request *req = p->req;
		pending_release(h, p);
		if (req != NULL) {
			reply_job(req, j);
		}
		sim_job_free(j);
		j = next;
	}
}

/* prefill_timed queues the request (tokens taken over) on its rank and
 * replies when its prefill ends, or at once without "wait". */
static void
prefill_timed(sim_http *h, struct evhttp_request *req, const json_t *body,
	      size_t rank, uint32_t *tokens, uint32_t n_blocks,
	      uint64_t n_tokens, const kvi_prompt_keys *keys)
{
	json_t *w = json_object_get(body, "wait");
	if (w != NULL && !json_is_boolean(w)) {
		kvi_free(tokens);
		reply_error(req, 400, "wait must be a boolean");
		return;
	}
	bool wait = w == NULL || json_is_true(w);
	sim_job *j = sim_job_alloc(tokens, n_blocks, n_tokens,
				   sim_keys_empty(keys) ? NULL : keys);
	pending *p = NULL;
	if (wait) {
		p = kvi_calloc(1, sizeof(*p));
		p->h = h;
		p->req = req;
		j->ctx = p;
	}
	sim_command cmd = {.type = SIM_CMD_ENQUEUE, .rank = rank, .job = j};
	kvi_err rv = sim_engine_call(h->engine, &cmd);
	if (rv != KVI_OK) {
		sim_job_free(j);
		kvi_free(p);
		reply_error(req, 503,
			    rv == KVI_EFULL ? "the rank's queue is full"
					    : kvi_strerror(rv));
		return;
	}
	if (!wait) {
		reply_json(req, 202,
			   json_pack("{s:i}", "queued", (int)cmd.ahead));
		return;
	}
	/* The reply goes out from done_cb, on this thread, later. */
	p->next = h->waiting;
	if (h->waiting != NULL) {
		h->waiting->prev = p;
	}
	h->waiting = p;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req),
				      pending_closed, p);
}

static void
handle_prefill(sim_http *h, struct evhttp_request *req, json_t *body)
{
	sim_command cmd = {.type = SIM_CMD_PREFILL};
	uint32_t *tokens;
	uint64_t n_tokens;
	kvi_prompt_keys keys;
	kvi_mm_item *items;
	if (!rank_of(h, body, &cmd.rank)) {
		reply_error(req, 400, "pod and rank must name a rank");
		return;
	}
	const char *err =
	    prefill_tokens(h, body, &tokens, &cmd.n_blocks, &n_tokens);
	if (err != NULL) {
		reply_error(req, 400, err);
		return;
	}
	err = prefill_keys(body, n_tokens, sim_rank_flavour(h->ranks[cmd.rank]),
			   &keys, &items);
	if (err != NULL) {
		kvi_free(items);
		kvi_free(tokens);
		reply_error(req, 400, err);
		return;
	}
	if (sim_engine_timed(h->engine)) {
		prefill_timed(h, req, body, cmd.rank, tokens, cmd.n_blocks,
			      n_tokens, &keys);
		kvi_free(items);
		return;
	}
	cmd.tokens = tokens;
	cmd.keys = &keys;
	cmd.n_tokens = n_tokens;
	kvi_err rv = sim_engine_call(h->engine, &cmd);
	kvi_free(items);
	if (rv != KVI_OK) {
		kvi_free(tokens);
		reply_error(req, 503, kvi_strerror(cmd.result));
		return;
	}
	json_t *locals = local_hashes_json(cmd.local_hashes, cmd.req.n_blocks);
	kvi_free(cmd.local_hashes);
	kvi_free(tokens);
	reply_json(req, 200,
		   json_pack("{s:o,s:i,s:i,s:i,s:i,s:o}", "seq",
			     seq_json(cmd.seq), "stored_blocks",
			     (int)cmd.req.stored, "hit_blocks",
			     (int)cmd.req.gpu_hit, "cpu_loaded_blocks",
			     (int)cmd.req.cpu_loaded, "removed_blocks",
			     (int)cmd.req.removed, "local_hashes", locals));
}

static void
handle_engine_op(sim_http *h, struct evhttp_request *req, json_t *body,
		 sim_command_type type)
{
	sim_command cmd = {.type = type};
	if (!rank_of(h, body, &cmd.rank)) {
		reply_error(req, 400, "pod and rank must name a rank");
		return;
	}
	if (sim_engine_call(h->engine, &cmd) != KVI_OK) {
		reply_error(req, 500, kvi_strerror(cmd.result));
		return;
	}
	reply_json(req, 200, json_pack("{s:o}", "seq", seq_json(cmd.seq)));
}

static void
handle_fault(sim_http *h, struct evhttp_request *req, json_t *body,
	     const char *kind)
{
	size_t idx;
	uint64_t v = 1;
	if (!rank_of(h, body, &idx)) {
		reply_error(req, 400, "pod and rank must name a rank");
		return;
	}
	sim_rank *r = h->ranks[idx];
	if (strcmp(kind, "skip") == 0 || strcmp(kind, "garble") == 0 ||
	    strcmp(kind, "recover") == 0) {
		if (json_object_get(body, "count") != NULL &&
		    !json_u64(body, "count", UINT32_MAX, &v)) {
			reply_error(req, 400, "count must be a u32");
			return;
		}
	}
	if (strcmp(kind, "skip") == 0) {
		sim_rank_fault_skip(r, (uint32_t)v);
	} else if (strcmp(kind, "garble") == 0) {
		sim_rank_fault_garble(r, (uint32_t)v);
	} else if (strcmp(kind, "stall") == 0) {
		if (!json_u64(body, "ms", 24 * 3600 * 1000u, &v)) {
			reply_error(req, 400, "ms must be a duration in ms");
			return;
		}
		sim_rank_fault_stall(r, v);
	} else {
		sim_recover_kind mode;
		const char *m =
		    json_string_value(json_object_get(body, "mode"));
		if (m == NULL || !sim_recover_kind_parse(m, &mode)) {
			reply_error(
			    req, 400,
			    "mode must be error, too_new, invalid_range, "
			    "tree_dump or hang");
			return;
		}
		sim_rank_fault_recover(r, mode, (uint32_t)v);
	}
	reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

static void
handle_post(sim_http *h, struct evhttp_request *req, const char *path)
{
	json_t *body = body_json(req);
	if (!json_is_object(body)) {
		json_decref(body);
		reply_error(req, 400, "the body must be a JSON object");
		return;
	}
	if (strcmp(path, "/pause") == 0 || strcmp(path, "/resume") == 0) {
		bool paused = strcmp(path, "/pause") == 0;
		sim_engine_set_paused(h->engine, paused);
		reply_json(req, 200, json_pack("{s:b}", "paused", paused));
	} else if (strcmp(path, "/prefill") == 0) {
		handle_prefill(h, req, body);
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
		reply_json(req, 200, json_pack("{s:b}", "ok", 1));
		struct timeval tv = {0, QUIT_DELAY_US};
		KVI_INFO("quit", "source=http");
		event_base_loopexit(h->base, &tv);
	} else {
		reply_error(req, 404, "no such endpoint");
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
		reply_error(req, 400, "bad URI");
	} else if (method == EVHTTP_REQ_GET && strcmp(path, "/status") == 0) {
		handle_status(h, req);
	} else if (method == EVHTTP_REQ_GET && strcmp(path, "/truth") == 0) {
		handle_truth(h, req);
	} else if (method == EVHTTP_REQ_POST) {
		handle_post(h, req, path);
	} else {
		reply_error(req, 404, "no such endpoint");
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
		reply_error(req, 404, "no such endpoint");
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

/* put_label_value writes v with Prometheus' escapes. */
static void
put_label_value(sim_buf *b, const char *v)
{
	char one[2] = {0, 0};
	for (; *v != '\0'; v++) {
		if (*v == '\\') {
			sim_buf_puts(b, "\\\\");
		} else if (*v == '"') {
			sim_buf_puts(b, "\\\"");
		} else if (*v == '\n') {
			sim_buf_puts(b, "\\n");
		} else {
			one[0] = *v;
			sim_buf_puts(b, one);
		}
	}
}

typedef enum metric_kind {
	M_RUNNING,
	M_WAITING,
	M_QUERIES,
	M_HITS,
	M_QUERIES_CREATED,
	M_HITS_CREATED,
} metric_kind;

/* The families as vLLM's PrometheusStatLogger declares them and
 * prometheus_client writes them: a counter's samples and its HELP and
 * TYPE lines end in _total, its creation time is a _created gauge. */
static const struct {
	const char *name;
	const char *type;
	const char *help;
} families[] = {
    [M_RUNNING] = {"vllm:num_requests_running", "gauge",
		   "Number of requests in model execution batches."},
    [M_WAITING] = {"vllm:num_requests_waiting", "gauge",
		   "Number of requests waiting to be processed."},
    [M_QUERIES] = {"vllm:prefix_cache_queries_total", "counter",
		   "Prefix cache queries, in terms of number of queried "
		   "tokens."},
    [M_HITS] = {"vllm:prefix_cache_hits_total", "counter",
		"Prefix cache hits, in terms of number of cached tokens."},
    [M_QUERIES_CREATED] = {"vllm:prefix_cache_queries_created", "gauge",
			   "Prefix cache queries, in terms of number of "
			   "queried tokens."},
    [M_HITS_CREATED] = {"vllm:prefix_cache_hits_created", "gauge",
			"Prefix cache hits, in terms of number of cached "
			"tokens."},
};

static void
write_family(sim_http *h, uint32_t pod, metric_kind k, sim_buf *b)
{
	char num[64];
	sim_buf_puts(b, "# HELP ");
	sim_buf_puts(b, families[k].name);
	sim_buf_puts(b, " ");
	sim_buf_puts(b, families[k].help);
	sim_buf_puts(b, "\n# TYPE ");
	sim_buf_puts(b, families[k].name);
	sim_buf_puts(b, " ");
	sim_buf_puts(b, families[k].type);
	sim_buf_puts(b, "\n");
	for (uint32_t r = 0; r < h->cfg.dp; r++) {
		size_t i = (size_t)pod * h->cfg.dp + r;
		sim_rank_metrics m;
		sim_rank_metrics_get(h->ranks[i], &m);
		sim_engine_load l;
		sim_engine_load_get(h->engine, i, &l);
		switch (k) {
		case M_RUNNING:
			snprintf(num, sizeof(num), "%d.0", l.running ? 1 : 0);
			break;
		case M_WAITING:
			snprintf(num, sizeof(num), "%u.0", l.waiting);
			break;
		case M_QUERIES:
			snprintf(num, sizeof(num), "%llu.0",
				 (unsigned long long)m.prefix_cache_queries);
			break;
		case M_HITS:
			snprintf(num, sizeof(num), "%llu.0",
				 (unsigned long long)m.prefix_cache_hits);
			break;
		case M_QUERIES_CREATED:
		case M_HITS_CREATED:
			snprintf(num, sizeof(num), "%.9e",
				 (double)m.started_ns / 1e9);
			break;
		}
		/* prometheus_client sorts the labels by name */
		sim_buf_puts(b, families[k].name);
		sim_buf_puts(b, "{engine=\"");
		sim_buf_u64(b, r);
		sim_buf_puts(b, "\",model_name=\"");
		put_label_value(b, h->cfg.model);
		sim_buf_puts(b, "\"} ");
		sim_buf_puts(b, num);
		sim_buf_puts(b, "\n");
	}
}

static void
metrics_cb(struct evhttp_request *req, void *arg)
{
	metrics_server *ms = arg;
	const char *path =
	    evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET || path == NULL ||
	    strcmp(path, "/metrics") != 0) {
		reply_error(req, 404, "no such endpoint");
		return;
	}
	static const metric_kind order[] = {M_RUNNING, M_WAITING,
					    M_QUERIES, M_QUERIES_CREATED,
					    M_HITS,    M_HITS_CREATED};
	sim_buf b;
	sim_buf_init(&b);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		write_family(ms->h, ms->pod, order[i], &b);
	}
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
				       done_cb, h);
		event_add(h->done_ev, NULL);
		sim_engine_set_done(engine, job_done, h);
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
		pending_release(h, h->waiting);
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
