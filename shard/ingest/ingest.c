/*
 * ingest.c - the ingest thread: its loop, requests from other threads,
 * group commits, and loading the durable state at start-up.
 */
#include "ingest.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"
#include "clock.h"
#include "handoff.h"
#include "ingest_int.h"
#include "log.h"

#define KVG_ENDPOINT_MAX 512
/* Unassigned listeners that make memory worth giving back, and how long
 * after the last of them: ZeroMQ's reaper closes their sockets first. */
#define KVG_GIVE_BACK_LISTENERS 64
#define KVG_GIVE_BACK_DELAY_MS  500

kvl_listener *
kvg_listener(kvg_ingest *g, uint32_t lid)
{
	return lid < g->cap_lis ? g->lis[lid] : NULL;
}

void
kvg_wake(kvg_ingest *g)
{
	uint64_t one = 1;
	ssize_t n = write(g->wake_fd, &one, sizeof(one));
	(void)n;
}

/* ---- listeners by key: a chained hash table ------------------------ */

static size_t
key_bucket(const kvg_ingest *g, const char *key)
{
	return (size_t)(XXH3_64bits(key, strlen(key)) &
			(uint64_t)(g->n_buckets - 1));
}

kvl_listener *
kvg_listener_find(kvg_ingest *g, const char *key)
{
	if (g->n_buckets == 0) {
		return NULL;
	}
	for (kvl_listener *l = g->by_key[key_bucket(g, key)]; l != NULL;
	     l = l->key_next) {
		if (strcmp(l->key, key) == 0) {
			return l;
		}
	}
	return NULL;
}

/* key_add files l under its key, growing the table to keep chains
 * short: an assignment must not cost more as the shard owns more. */
static void
key_add(kvg_ingest *g, kvl_listener *l)
{
	if (g->n_keyed + 1 > g->n_buckets) {
		size_t old = g->n_buckets;
		kvl_listener **was = g->by_key;
		g->n_buckets = old != 0 ? old * 2 : 256;
		g->by_key = kvi_calloc(g->n_buckets, sizeof(*g->by_key));
		for (size_t b = 0; b < old; b++) {
			while (was[b] != NULL) {
				kvl_listener *x = was[b];
				was[b] = x->key_next;
				size_t nb = key_bucket(g, x->key);
				x->key_next = g->by_key[nb];
				g->by_key[nb] = x;
			}
		}
		kvi_free(was);
	}
	size_t b = key_bucket(g, l->key);
	l->key_next = g->by_key[b];
	g->by_key[b] = l;
	g->n_keyed++;
}

static void
key_remove(kvg_ingest *g, kvl_listener *l)
{
	if (g->n_buckets == 0) {
		return;
	}
	for (kvl_listener **p = &g->by_key[key_bucket(g, l->key)]; *p != NULL;
	     p = &(*p)->key_next) {
		if (*p == l) {
			*p = l->key_next;
			g->n_keyed--;
			return;
		}
	}
}

/* ---- listeners ----------------------------------------------------- */

static char *
dup_opt(const char *s)
{
	return s != NULL && s[0] != '\0' ? kvi_strdup(s) : NULL;
}

/* lis_reserve makes room for lid in g's listener array. */
static void
lis_reserve(kvg_ingest *g, uint32_t lid)
{
	if (lid < g->cap_lis) {
		return;
	}
	uint32_t cap = g->cap_lis ? g->cap_lis : 64;
	while (cap <= lid) {
		cap *= 2;
	}
	g->lis = kvi_reallocarray(g->lis, cap, sizeof(*g->lis));
	memset(g->lis + g->cap_lis, 0, (cap - g->cap_lis) * sizeof(*g->lis));
	g->cap_lis = cap;
}

kvi_err
kvg_listener_create(kvg_ingest *g, uint32_t lid, const Kvindex__Listener *spec,
		    const uint8_t *packed, size_t len, kvl_listener **out)
{
	kvi_err rv = kvx_listener_add(
	    g->idx, lid, spec->key, spec->pod, spec->instance_id,
	    (uint16_t)spec->dp_rank, spec->model, spec->block_size);
	if (rv != KVI_OK) {
		return rv;
	}
	kvl_listener *l = kvi_calloc(1, sizeof(*l));
	l->lid = lid;
	l->key = kvi_strdup(spec->key);
	l->pod = kvi_strdup(spec->pod != NULL ? spec->pod : "");
	l->model = kvi_strdup(spec->model);
	l->endpoint = kvi_strdup(spec->endpoint);
	l->replay_ep = dup_opt(spec->replay_endpoint);
	l->recover_ep = dup_opt(spec->recover_endpoint);
	l->topic = dup_opt(spec->topic);
	l->lora_name = dup_opt(spec->lora_name);
	l->instance_id = spec->instance_id;
	l->dp_rank = (uint16_t)spec->dp_rank;
	l->block_size = spec->block_size;
	l->n_groups = 1;
	l->spec = kvi_malloc(len);
	memcpy(l->spec, packed, len);
	l->spec_len = len;
	kvo_rec_init(&l->rec);
	kvg_commit_watch(g, l);
	lis_reserve(g, lid);
	g->lis[lid] = l;
	key_add(g, l);
	if (lid >= g->next_lid) {
		g->next_lid = lid + 1;
	}
	*out = l;
	return KVI_OK;
}

uint32_t
kvg_group_lid_new(void *arg)
{
	kvg_ingest *g = arg;
	uint32_t lid = g->next_lid++;
	lis_reserve(g, lid);
	return lid;
}

static void
listener_free(kvg_ingest *g, kvl_listener *l, bool unindex)
{
	kvq_recovery_reset(&g->recovery, l);
	kvg_handoff_forget(l);
	kvg_io_close(g, l);
	if (unindex) {
		kvx_listener_remove(g->idx, l->lid);
	}
	if (g->cfg.pending != NULL) {
		kvd_drop_listener(g->cfg.pending, l->lid, KVD_DROP_GONE);
	}
	g->lis[l->lid] = NULL;
	key_remove(g, l);
	kvo_rec_fini(&l->rec);
	kvi_free(l->key);
	kvi_free(l->pod);
	kvi_free(l->model);
	kvi_free(l->endpoint);
	kvi_free(l->replay_ep);
	kvi_free(l->recover_ep);
	kvi_free(l->topic);
	kvi_free(l->lora_name);
	kvi_free(l->spec);
	kvi_free(l);
}

static bool
has_prefix(const char *s, const char *p)
{
	return s != NULL && strncmp(s, p, strlen(p)) == 0;
}

static kvi_err
spec_check(const Kvindex__Listener *s, char *err, size_t errlen)
{
	const char *what = NULL;
	if (s->key == NULL || s->key[0] == '\0') {
		what = "listener key is empty";
	} else if (s->dp_rank > UINT16_MAX) {
		snprintf(err, errlen, "dp_rank %u does not fit in u16",
			 s->dp_rank);
		return KVI_ERANGE;
	} else if (s->block_size == 0 || s->block_size > (1u << 20)) {
		what = "block_size must be 1..1048576";
	} else if (s->model == NULL || s->model[0] == '\0') {
		what = "model is empty";
	} else if (!has_prefix(s->endpoint, "tcp://") &&
		   !has_prefix(s->endpoint, "ipc://")) {
		what = "endpoint must be tcp:// or ipc://";
	} else if (s->replay_endpoint != NULL && s->replay_endpoint[0] &&
		   !has_prefix(s->replay_endpoint, "tcp://") &&
		   !has_prefix(s->replay_endpoint, "ipc://")) {
		what = "replay endpoint must be tcp:// or ipc://";
	} else if (s->recover_endpoint != NULL && s->recover_endpoint[0] &&
		   !has_prefix(s->recover_endpoint, "http://") &&
		   !has_prefix(s->recover_endpoint, "https://")) {
		what = "recover endpoint must be http:// or https://";
	} else if (strlen(s->endpoint) > KVG_ENDPOINT_MAX) {
		what = "endpoint too long";
	}
	if (what != NULL) {
		snprintf(err, errlen, "%s", what);
		return KVI_EINVAL;
	}
	return KVI_OK;
}

kvi_err
kvg_do_assign(kvg_ingest *g, kvg_cmd *c)
{
	kvi_err rv = spec_check(c->spec, c->err, c->errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	size_t len = kvindex__listener__get_packed_size(c->spec);
	uint8_t *packed = kvi_malloc(len);
	kvindex__listener__pack(c->spec, packed);
	kvl_listener *l = kvg_listener_find(g, c->spec->key);
	if (l != NULL) {
		bool same =
		    l->spec_len == len && memcmp(l->spec, packed, len) == 0;
		kvi_free(packed);
		if (!same) {
			snprintf(c->err, c->errlen,
				 "listener %s is already owned with another "
				 "spec",
				 c->spec->key);
			return KVI_EEXIST;
		}
		c->existed = true;
		if (c->handoff_from != NULL && c->handoff_from[0] != '\0' &&
		    kvg_handoff_running(g) && l->ho.from == NULL &&
		    !l->ho.taken && !l->mark.has_wm &&
		    (l->recovery.state == KVL_R_STREAMING ||
		     l->recovery.state == KVL_R_BACKOFF ||
		     l->recovery.state == KVL_R_AWAIT_HANDOFF) &&
		    kvx_listener_entries(g->idx, l->lid) == 0) {
			/* Owned with no state yet, say after a restart in
			 * the middle of a hand-off: take it now. */
			l->ho.from = kvi_strdup(c->handoff_from);
			kvq_recovery_move_in(&g->recovery, l,
					     KVQ_HANDOFF_SUB_MS); /* SUB up */
		}
		return KVI_OK;
	}
	uint32_t lid = g->next_lid;
	rv = kvg_listener_create(g, lid, c->spec, packed, len, &l);
	if (rv != KVI_OK) {
		snprintf(c->err, c->errlen,
			 "model %s already has another block size here",
			 c->spec->model);
		kvi_free(packed);
		return rv;
	}
	if (!g->feeding && (rv = kvg_io_open(g, l)) != KVI_OK) {
		snprintf(c->err, c->errlen, "%s", l->last_error);
		listener_free(g, l, true);
		kvi_free(packed);
		return rv;
	}
	/* Durable with its empty snapshot in the next group commit. */
	kvg_commit_assign(g, l);
	kvi_free(packed);
	kvl_log(l, "listener_assigned", "endpoint=%s", l->endpoint);
	c->lid = lid;
	if (c->handoff_from != NULL && c->handoff_from[0] != '\0' &&
	    kvg_handoff_running(g)) {
		/* A planned move: the state comes from the old owner. */
		l->ho.from = kvi_strdup(c->handoff_from);
		kvq_recovery_move_in(&g->recovery, l,
				     KVQ_HANDOFF_CONNECT_WAIT_MS);
	}
	return KVI_OK;
}

kvi_err
kvg_do_unassign(kvg_ingest *g, kvg_cmd *c)
{
	kvl_listener *l = kvg_listener_find(g, c->key);
	if (l == NULL) {
		snprintf(c->err, c->errlen, "listener %s is not owned here",
			 c->key);
		return KVI_ENOENT;
	}
	kvg_commit_unassign(g, l->lid);
	kvi_log(KVI_LOG_INFO, "listener_unassigned", "listener=%s", l->key);
	listener_free(g, l, true);
	if (++g->unassigned_since >= KVG_GIVE_BACK_LISTENERS) {
		g->give_back_at_ms = kvi_now_ms() + KVG_GIVE_BACK_DELAY_MS;
	}
	return KVI_OK;
}

/* ---- requests ------------------------------------------------------ */

static kvi_err
request(kvg_ingest *g, kvg_cmd *c)
{
	pthread_cond_init(&c->cv, NULL);
	pthread_mutex_lock(&g->cmd_mu);
	if (atomic_load(&g->stopping) || !g->started) {
		pthread_mutex_unlock(&g->cmd_mu);
		pthread_cond_destroy(&c->cv);
		snprintf(c->err, c->errlen, "the shard is not running");
		return KVI_ECLOSED;
	}
	if (g->cmd_tail != NULL) {
		g->cmd_tail->next = c;
	} else {
		g->cmd_head = c;
	}
	g->cmd_tail = c;
	kvg_wake(g);
	while (!c->done) {
		pthread_cond_wait(&c->cv, &g->cmd_mu);
	}
	pthread_mutex_unlock(&g->cmd_mu);
	pthread_cond_destroy(&c->cv);
	return c->rv;
}

static void
run_commands(kvg_ingest *g)
{
	pthread_mutex_lock(&g->cmd_mu);
	kvg_cmd *c = g->cmd_head;
	g->cmd_head = g->cmd_tail = NULL;
	pthread_mutex_unlock(&g->cmd_mu);
	while (c != NULL) {
		kvg_cmd *next = c->next;
		switch (c->kind) {
		case KVG_CMD_ASSIGN:
			c->rv = kvg_do_assign(g, c);
			break;
		case KVG_CMD_UNASSIGN:
			c->rv = kvg_do_unassign(g, c);
			break;
		case KVG_CMD_STATUS:
			c->rv = kvg_do_status(g, c);
			break;
		case KVG_CMD_DUMP:
			c->rv = kvg_do_dump(g, c);
			break;
		case KVG_CMD_HANDOFF:
			c->rv = kvg_do_handoff(g, c);
			break;
		}
		pthread_mutex_lock(&g->cmd_mu);
		c->done = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&g->cmd_mu);
		c = next;
	}
}

kvi_err
kvg_assign(kvg_ingest *g, const Kvindex__Listener *spec,
	   const char *handoff_from, bool *existed, char *err, size_t errlen)
{
	kvg_cmd c = {.kind = KVG_CMD_ASSIGN,
		     .spec = spec,
		     .handoff_from = handoff_from,
		     .err = err,
		     .errlen = errlen};
	kvi_err rv = request(g, &c);
	*existed = c.existed;
	return rv;
}

kvi_err
kvg_unassign(kvg_ingest *g, const char *key, char *err, size_t errlen)
{
	kvg_cmd c = {
	    .kind = KVG_CMD_UNASSIGN, .key = key, .err = err, .errlen = errlen};
	return request(g, &c);
}

kvi_err
kvg_status(kvg_ingest *g, const Kvindex__StatusRequest *req, kvp_arena *a,
	   Kvindex__StatusResponse *out, char *err, size_t errlen)
{
	kvg_cmd c = {.kind = KVG_CMD_STATUS,
		     .key = req->key,
		     .has_since = req->has_since_digest,
		     .since = req->since_digest,
		     .arena = a,
		     .status = out,
		     .err = err,
		     .errlen = errlen};
	return request(g, &c);
}

kvi_err
kvg_dump(kvg_ingest *g, const char *key, kvp_arena *a,
	 Kvindex__DumpResponse *out, char *err, size_t errlen)
{
	kvg_cmd c = {.kind = KVG_CMD_DUMP,
		     .key = key,
		     .arena = a,
		     .dump = out,
		     .err = err,
		     .errlen = errlen};
	return request(g, &c);
}

kvi_err
kvg_handoff_chunk(kvg_ingest *g, const Kvindex__HandoffRequest *req,
		  kvp_arena *a, Kvindex__HandoffResponse *out, char *err,
		  size_t errlen)
{
	kvg_cmd c = {.kind = KVG_CMD_HANDOFF,
		     .ho_req = req,
		     .ho_resp = out,
		     .arena = a,
		     .err = err,
		     .errlen = errlen};
	return request(g, &c);
}

/* ---- memory and descriptors --------------------------------------- */

void
kvg_give_back(kvg_ingest *g)
{
	kvq_backlog_give_back(&g->recovery);
	if (g->give_back_at_ms != 0 && kvi_now_ms() >= g->give_back_at_ms) {
		kvi_log(KVI_LOG_INFO, "memory_given_back",
			"unassigned_listeners=%u", g->unassigned_since);
		g->unassigned_since = 0;
		g->give_back_at_ms = 0;
		malloc_trim(0);
	}
}

/* ---- the thread ---------------------------------------------------- */

void
kvg_on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	kvg_ingest *g = arg;
	uint64_t n;
	ssize_t r = read(fd, &n, sizeof(n));
	(void)r;
	run_commands(g);
	kvr_result *res;
	while ((res = kvr_fetcher_pop(g->fetcher)) != NULL) {
		kvq_on_fetched(&g->recovery, res);
	}
	kvg_handoff_results(g);
	if (atomic_load(&g->stopping)) {
		event_base_loopbreak(g->base);
	}
}

static void
notify(void *arg)
{
	kvg_wake(arg);
}

static void *
ingest_main(void *arg)
{
	kvg_ingest *g = arg;
	for (uint32_t i = 0; i < g->next_lid; i++) {
		kvl_listener *l = g->lis[i];
		if (l != NULL && kvg_io_open(g, l) != KVI_OK) {
			kvi_log(KVI_LOG_ERROR, "subscribe_failed",
				"listener=%s error=\"%s\"", l->key,
				l->last_error);
		}
	}
	event_base_dispatch(g->base);
	/* Stopping: answer waiting requests, commit what was applied -
	 * unless the store is failing, in which case what it could not take
	 * stays with the engines, to be replayed from the committed
	 * watermarks at the next start. */
	run_commands(g);
	kvg_commit_last(g);
	return NULL;
}

kvi_err
kvg_ingest_start(kvg_ingest *g, char *err, size_t errlen)
{
	kvi_err rv = kvg_fetcher_open(g, notify, g);
	if (rv == KVI_OK) {
		rv = kvg_commit_start(g, notify, g);
	}
	if (rv == KVI_OK) {
		rv = kvg_handoff_start(g);
	}
	if (rv != KVI_OK) {
		snprintf(err, errlen, "cannot start threads: %s",
			 kvi_strerror(rv));
		return rv;
	}
	kvg_commit_arm(g);
	g->started = true;
	if (pthread_create(&g->thread, NULL, ingest_main, g) != 0) {
		g->started = false;
		snprintf(err, errlen, "cannot start the ingest thread");
		return KVI_EIO;
	}
	return KVI_OK;
}

void
kvg_ingest_stop(kvg_ingest *g)
{
	if (g == NULL || !g->started) {
		return;
	}
	pthread_mutex_lock(&g->cmd_mu);
	atomic_store(&g->stopping, true);
	pthread_mutex_unlock(&g->cmd_mu);
	kvg_wake(g);
	pthread_join(g->thread, NULL);
	g->started = false;
	kvg_handoff_stop(g);
	kvg_commit_stop(g);
	kvr_fetcher_stop(g->fetcher);
}

void
kvg_ingest_free(kvg_ingest *g)
{
	if (g == NULL) {
		return;
	}
	kvg_ingest_stop(g);
	kvg_image_save(g);
	for (uint32_t i = 0; i < g->next_lid; i++) {
		if (g->lis[i] != NULL) {
			/* the index is freed whole by its owner */
			listener_free(g, g->lis[i], false);
		}
	}
	kvi_free(g->lis);
	kvi_free(g->by_key);
	kvg_commit_fini(g);
	kvr_fetcher_free(g->fetcher);
	if (g->ev_wake != NULL) {
		event_free(g->ev_wake);
	}
	kvg_io_fini(g);
	if (g->base != NULL) {
		event_base_free(g->base);
	}
	if (g->wake_fd >= 0) {
		close(g->wake_fd);
	}
	kvq_recovery_fini(&g->recovery);
	pthread_mutex_destroy(&g->cmd_mu);
	kvg_metrics_fini(g);
	kvi_free(g);
}
