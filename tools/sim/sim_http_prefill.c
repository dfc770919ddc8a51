/*
 * sim_http_prefill.c - POST /prefill: one request on a rank, run at once,
 * or queued behind the rank's others in timed mode and answered when its
 * prefill ends; POST /hit: the hit a request would take now, run nowhere
 * (sim_http_int.h).
 */
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

#include "sim_http_int.h"

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
	    !sim_http_json_u64(o, "offset", UINT32_MAX, &it->offset) ||
	    !sim_http_json_u64(o, "length", UINT32_MAX, &it->length) ||
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

json_t *
sim_http_seq_json(int64_t seq)
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
void
sim_http_pending_release(sim_http *h, pending *p)
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

static void
reply_job(struct evhttp_request *req, const sim_job *j)
{
	if (j->result != KVI_OK) {
		sim_http_reply_error(req, 503,
				     "the rank restarted: request dropped");
		return;
	}
	json_t *o = json_pack(
	    "{s:o,s:i,s:i,s:i,s:i,s:o,s:I,s:I,s:f,s:f,s:i}", "seq",
	    sim_http_seq_json(j->seq), "stored_blocks", (int)j->stored,
	    "hit_blocks", (int)j->hit_blocks, "cpu_loaded_blocks",
	    (int)j->cpu_loaded, "removed_blocks", (int)j->removed,
	    "local_hashes", local_hashes_json(j->local_hashes, j->n_local),
	    "prompt_tokens", (json_int_t)j->n_tokens, "hit_tokens",
	    (json_int_t)j->hit_tokens, "queue_ms",
	    (double)(j->start_ns - j->arrival_ns) / 1e6, "prefill_ms",
	    (double)(j->end_ns - j->start_ns) / 1e6, "batches",
	    (int)j->batches);
	sim_http_reply_json(req, 200, o);
}

/* sim_http_job_done runs on the engine thread: the reply is the HTTP thread's.
 */
void
sim_http_job_done(void *arg, sim_job *j)
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

void
sim_http_done_cb(evutil_socket_t fd, short what, void *arg)
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
		sim_http_pending_release(h, p);
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
		sim_http_reply_error(req, 400, "wait must be a boolean");
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
		sim_http_reply_error(req, 503,
				     rv == KVI_EFULL
					 ? "the rank's queue is full"
					 : kvi_strerror(rv));
		return;
	}
	if (!wait) {
		sim_http_reply_json(
		    req, 202, json_pack("{s:i}", "queued", (int)cmd.ahead));
		return;
	}
	/* The reply goes out from sim_http_done_cb, on this thread, later. */
	p->next = h->waiting;
	if (h->waiting != NULL) {
		h->waiting->prev = p;
	}
	h->waiting = p;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req),
				      pending_closed, p);
}

/* A /prefill or /hit body, read. */
typedef struct prompt {
	size_t rank;
	uint32_t *tokens; /* kvi_free; NULL once taken over */
	uint32_t n_blocks;
	uint64_t n_tokens;
	kvi_prompt_keys keys;
	kvi_mm_item *items;
} prompt;

static void
prompt_fini(prompt *p)
{
	kvi_free(p->tokens);
	kvi_free(p->items);
	p->tokens = NULL;
	p->items = NULL;
}

/* read_prompt reads the rank, the prompt and its keys of body; on a bad
 * body it replies 400 and returns false. */
static bool
read_prompt(sim_http *h, struct evhttp_request *req, const json_t *body,
	    prompt *p)
{
	memset(p, 0, sizeof(*p));
	if (!sim_http_rank_of(h, body, &p->rank)) {
		sim_http_reply_error(req, 400, "pod and rank must name a rank");
		return false;
	}
	const char *err =
	    prefill_tokens(h, body, &p->tokens, &p->n_blocks, &p->n_tokens);
	if (err != NULL) {
		sim_http_reply_error(req, 400, err);
		return false;
	}
	const sim_rank *r = h->ranks[p->rank];
	err = prefill_keys(body, p->n_tokens, sim_rank_flavour(r), &p->keys,
			   &p->items);
	const sim_groups_config *g = sim_rank_groups(r);
	if (err == NULL && g != NULL && !sim_keys_empty(&p->keys) &&
	    !sim_groups_keys_ok(g)) {
		err = "requests with keys need every KV cache group's block "
		      "size to be the hash block size";
	}
	if (err != NULL) {
		prompt_fini(p);
		sim_http_reply_error(req, 400, err);
		return false;
	}
	return true;
}

void
sim_http_prefill(sim_http *h, struct evhttp_request *req, json_t *body)
{
	prompt p;
	if (!read_prompt(h, req, body, &p)) {
		return;
	}
	if (sim_engine_timed(h->engine)) {
		prefill_timed(h, req, body, p.rank, p.tokens, p.n_blocks,
			      p.n_tokens, &p.keys);
		p.tokens = NULL; /* taken over */
		prompt_fini(&p);
		return;
	}
	sim_command cmd = {.type = SIM_CMD_PREFILL,
			   .rank = p.rank,
			   .tokens = p.tokens,
			   .n_blocks = p.n_blocks,
			   .keys = &p.keys,
			   .n_tokens = p.n_tokens};
	kvi_err rv = sim_engine_call(h->engine, &cmd);
	prompt_fini(&p);
	if (rv != KVI_OK) {
		sim_http_reply_error(req, 503, kvi_strerror(cmd.result));
		return;
	}
	json_t *locals = local_hashes_json(cmd.local_hashes, cmd.req.n_blocks);
	kvi_free(cmd.local_hashes);
	sim_http_reply_json(
	    req, 200,
	    json_pack("{s:o,s:i,s:i,s:i,s:i,s:o,s:I}", "seq",
		      sim_http_seq_json(cmd.seq), "stored_blocks",
		      (int)cmd.req.stored, "hit_blocks", (int)cmd.req.gpu_hit,
		      "cpu_loaded_blocks", (int)cmd.req.cpu_loaded,
		      "removed_blocks", (int)cmd.req.removed, "local_hashes",
		      locals, "hit_tokens", (json_int_t)cmd.req.hit_tokens));
}

void
sim_http_hit(sim_http *h, struct evhttp_request *req, json_t *body)
{
	prompt p;
	if (!read_prompt(h, req, body, &p)) {
		return;
	}
	sim_kv_hit hit;
	sim_rank_hit(h->ranks[p.rank], p.tokens, p.n_tokens, &p.keys, &hit);
	prompt_fini(&p);
	json_t *groups = json_array();
	for (size_t i = 0; i < hit.n_groups; i++) {
		const sim_group_spec *s = &hit.groups[i].spec;
		json_array_append_new(
		    groups,
		    json_pack("{s:s,s:i,s:I}", "kind",
			      sim_group_kind_name(s->kind), "block_size",
			      (int)s->block_size, "hit_tokens",
			      (json_int_t)hit.groups[i].hit_tokens));
	}
	sim_http_reply_json(
	    req, 200,
	    json_pack("{s:I,s:I,s:o}", "hit_tokens", (json_int_t)hit.hit_tokens,
		      "hit_blocks",
		      (json_int_t)(hit.hit_tokens / h->cfg.block_size),
		      "groups", groups));
}
