#include "sim_rank.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "alloc.h"
#include "frame.h"
#include "log.h"
#include "sim_os.h"
#include "sim_ring.h"

#define ENTRY_SKIPPED   1u     /* replay entry that was not sent on PUB */
#define PUB_SNDHWM      100000 /* vLLM's setting */
#define REBIND_TIMEOUT  (5 * 1000000000ull)
#define REBIND_INTERVAL 10000000L /* ns */

struct sim_rank {
	const sim_rank_config *cfg;
	uint32_t pod;
	uint32_t dp_rank;   /* its index in its pod */
	uint32_t wire_rank; /* the data_parallel_rank it publishes */
	sim_flavour flavour;
	pthread_mutex_t mu;
	/* under mu (the engine thread, the only writer, reads without) */
	sim_kv *kv;
	int64_t last_seq;
	sim_ring log;
	uint32_t skip_left;
	uint32_t garble_left;
	uint64_t stall_until; /* monotonic ns; 0 = not stalled */
	sim_recover_kind forced;
	uint32_t forced_left;
	uint64_t published;
	uint64_t skipped;
	uint64_t restarts;
	uint64_t requests;
	/* engine thread only */
	sim_ring replay;
	void *pub;
	void *router;
	int pub_port;
	int replay_port;
	bool pending; /* a stall held back [pending_from, last_seq] */
	uint64_t pending_from;
	/* read by anyone */
	_Atomic uint64_t sent;
	_Atomic uint64_t replays;
	_Atomic uint64_t cache_queries; /* prefix cache, in tokens */
	_Atomic uint64_t cache_hits;
	_Atomic uint64_t started_ns; /* wall clock of the (re)start */
};

static uint64_t
wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

sim_rank *
sim_rank_alloc(const sim_rank_config *cfg, uint32_t pod, uint32_t dp_rank,
	       sim_flavour flavour, const sim_groups_config *groups)
{
	sim_rank *r = kvi_calloc(1, sizeof(*r));
	r->cfg = cfg;
	r->pod = pod;
	r->dp_rank = dp_rank;
	r->wire_rank = dp_rank;
	r->flavour = flavour;
	pthread_mutex_init(&r->mu, NULL);
	sim_cache_config cc = {.gpu_blocks = cfg->gpu_blocks,
			       .cpu_blocks = cfg->cpu_blocks,
			       .block_size = cfg->block_size,
			       .salt = cfg->salt,
			       .offload = cfg->offload};
	if (groups != NULL) {
		sim_groups_config gc = *groups;
		gc.salt = cfg->salt;
		r->kv = sim_kv_alloc(&cc, &gc);
	} else {
		r->kv = sim_kv_alloc(&cc, NULL);
	}
	r->last_seq = -1;
	sim_ring_init(&r->log, cfg->recover_log);
	sim_ring_init(&r->replay, cfg->replay_buffer);
	atomic_init(&r->started_ns, wall_ns());
	return r;
}

static void
close_socket(void **s)
{
	if (*s != NULL) {
		zmq_close(*s);
		*s = NULL;
	}
}

void
sim_rank_free(sim_rank *r)
{
	if (r == NULL) {
		return;
	}
	close_socket(&r->pub);
	close_socket(&r->router);
	sim_kv_free(r->kv);
	sim_ring_fini(&r->log);
	sim_ring_fini(&r->replay);
	pthread_mutex_destroy(&r->mu);
	kvi_free(r);
}

uint32_t
sim_rank_pod(const sim_rank *r)
{
	return r->pod;
}

void
sim_rank_set_wire_rank(sim_rank *r, uint32_t g)
{
	r->wire_rank = g;
}

uint32_t
sim_rank_dp_rank(const sim_rank *r)
{
	return r->dp_rank;
}

sim_flavour
sim_rank_flavour(const sim_rank *r)
{
	return r->flavour;
}

/* ---- sockets -------------------------------------------------------- */

static kvi_err
open_bound(void *ctx, int type, const char *ip, int port, void **out)
{
	void *s = zmq_socket(ctx, type);
	if (s == NULL) {
		KVI_ERROR("socket_failed", "err=%s", zmq_strerror(zmq_errno()));
		return KVI_EIO;
	}
	int zero = 0;
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	if (type == ZMQ_PUB || type == ZMQ_XPUB) {
		int hwm = PUB_SNDHWM;
		zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	}
	if (type == ZMQ_XPUB) {
		int one = 1; /* subscriptions applied late (sim_latesub.h) */
		zmq_setsockopt(s, ZMQ_XPUB_MANUAL, &one, sizeof(one));
	}
	char ep[128];
	snprintf(ep, sizeof(ep), "tcp://%s:%d", ip, port);
	if (zmq_bind(s, ep) != 0) {
		int err = zmq_errno();
		zmq_close(s);
		if (err == EADDRINUSE) {
			return KVI_EEXIST;
		}
		KVI_ERROR("bind_failed", "endpoint=%s err=%s", ep,
			  zmq_strerror(err));
		return KVI_EIO;
	}
	*out = s;
	return KVI_OK;
}

kvi_err
sim_rank_bind_pub(sim_rank *r, void *zmq_ctx, int port)
{
	int type = r->cfg->sub_delay_ms > 0 ? ZMQ_XPUB : ZMQ_PUB;
	kvi_err rv = open_bound(zmq_ctx, type, r->cfg->ip, port, &r->pub);
	if (rv == KVI_OK) {
		r->pub_port = port;
	}
	return rv;
}

void *
sim_rank_pub(sim_rank *r)
{
	return r->pub;
}

kvi_err
sim_rank_bind_replay(sim_rank *r, void *zmq_ctx, int port)
{
	kvi_err rv =
	    open_bound(zmq_ctx, ZMQ_ROUTER, r->cfg->ip, port, &r->router);
	if (rv == KVI_OK) {
		r->replay_port = port;
	}
	return rv;
}

void
sim_rank_unbind_pub(sim_rank *r)
{
	close_socket(&r->pub);
	r->pub_port = 0;
}

void
sim_rank_unbind_replay(sim_rank *r)
{
	close_socket(&r->router);
	r->replay_port = 0;
}

/* rebind binds a socket again on the port it had, waiting for the closed
 * socket's listener to go away (libzmq closes it asynchronously). */
static kvi_err
rebind(sim_rank *r, void *ctx, bool pub)
{
	int port = pub ? r->pub_port : r->replay_port;
	uint64_t deadline = sim_now_ns() + REBIND_TIMEOUT;
	for (;;) {
		kvi_err rv = pub ? sim_rank_bind_pub(r, ctx, port)
				 : sim_rank_bind_replay(r, ctx, port);
		if (rv != KVI_EEXIST || sim_now_ns() > deadline) {
			return rv;
		}
		struct timespec ts = {0, REBIND_INTERVAL};
		nanosleep(&ts, NULL);
	}
}

static void
send_frames(void *s, const void *const *data, const size_t *len, int n)
{
	for (int i = 0; i < n; i++) {
		int flags = ZMQ_DONTWAIT | (i + 1 < n ? ZMQ_SNDMORE : 0);
		if (zmq_send(s, data[i], len[i], flags) < 0) {
			/* A PUB or ROUTER drops rather than block; anything
			 * else is worth a line in the log. */
			KVI_DEBUG("send_failed", "err=%s",
				  zmq_strerror(zmq_errno()));
			return;
		}
	}
}

static void
send_live(sim_rank *r, uint64_t seq, const void *payload, size_t len)
{
	if (r->pub == NULL) {
		return;
	}
	uint8_t seq8[8];
	kvi_seq_put(seq8, seq);
	const void *data[3] = {r->cfg->topic, seq8, payload};
	size_t lens[3] = {strlen(r->cfg->topic), 8, len};
	send_frames(r->pub, data, lens, 3);
	atomic_fetch_add_explicit(&r->sent, 1, memory_order_relaxed);
}

/* send_buffered sends a batch a stall held back, if the replay buffer still
 * has it and it was not to be skipped. */
static void
send_buffered(sim_rank *r, uint64_t seq)
{
	const sim_ring_entry *e = sim_ring_get(&r->replay, seq);
	if (e != NULL && !(e->flags & ENTRY_SKIPPED)) {
		send_live(r, seq, e->data, e->len);
	}
}

/* ---- steps ---------------------------------------------------------- */

void
sim_rank_begin(sim_rank *r, sim_batch *batch)
{
	pthread_mutex_lock(&r->mu);
	sim_batch_reset(batch);
}

void
sim_rank_run(sim_rank *r, sim_batch *batch, const uint32_t *tokens,
	     uint32_t n_blocks, uint64_t n_tokens, const kvi_prompt_keys *keys,
	     sim_request_result *res)
{
	sim_kv_run(r->kv, batch, tokens, n_blocks, n_tokens, keys, res);
	r->requests++;
	/* The default counts its uncapped hit, as it always has. */
	sim_rank_count_query(r, n_tokens,
			     sim_kv_groups(r->kv) != NULL
				 ? res->hit_tokens
				 : (uint64_t)res->gpu_hit * r->cfg->block_size);
}

const sim_groups_config *
sim_rank_groups(const sim_rank *r)
{
	return sim_kv_groups(r->kv);
}

void
sim_rank_hit(sim_rank *r, const uint32_t *tokens, uint64_t n_tokens,
	     const kvi_prompt_keys *keys, sim_kv_hit *out)
{
	sim_batch scratch;
	sim_batch_init(&scratch, r->cfg->block_size);
	pthread_mutex_lock(&r->mu);
	sim_kv_query(r->kv, &scratch, tokens, n_tokens, keys, out);
	pthread_mutex_unlock(&r->mu);
	sim_batch_fini(&scratch);
}

static double
wall_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *
encode(const sim_rank *r, const sim_batch *batch, kvi_encoder *enc, size_t *len)
{
	sim_encode_opts o = {.ts = wall_seconds(),
			     .with_rank = r->cfg->with_rank,
			     .dp_rank = (int)r->wire_rank,
			     .offload_bs0 = r->cfg->offload_bs0,
			     .groups = sim_kv_groups(r->kv)};
	const void *data = sim_encode_batch(batch, &o, enc, len);
	void *copy = kvi_malloc(*len);
	memcpy(copy, data, *len);
	return copy;
}

sim_job *
sim_rank_start(sim_rank *r, sim_sched *s)
{
	pthread_mutex_lock(&r->mu);
	sim_job *j = sim_kv_start(r->kv, s);
	if (j != NULL) {
		r->requests++;
	}
	pthread_mutex_unlock(&r->mu);
	if (j != NULL) {
		sim_rank_count_query(r, j->n_tokens, j->hit_tokens);
	}
	return j;
}

sim_job *
sim_rank_step(sim_rank *r, sim_sched *s, sim_batch *batch)
{
	return sim_kv_step(r->kv, s, batch);
}

void
sim_rank_count_query(sim_rank *r, uint64_t tokens, uint64_t hits)
{
	atomic_fetch_add_explicit(&r->cache_queries, tokens,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&r->cache_hits, hits, memory_order_relaxed);
}

void
sim_rank_metrics_get(sim_rank *r, sim_rank_metrics *out)
{
	out->started_ns = atomic_load(&r->started_ns);
	out->prefix_cache_queries = atomic_load(&r->cache_queries);
	out->prefix_cache_hits = atomic_load(&r->cache_hits);
}

int64_t
sim_rank_commit(sim_rank *r, sim_batch *batch, kvi_encoder *enc)
{
	if (batch->n_events == 0) {
		pthread_mutex_unlock(&r->mu);
		return -1;
	}
	size_t len;
	void *payload = encode(r, batch, enc, &len);
	bool skip = r->skip_left > 0;
	if (skip) {
		r->skip_left--;
		r->skipped++;
	}
	if (r->garble_left > 0) {
		/* The events happened; only their bytes are lost. */
		r->garble_left--;
		((uint8_t *)payload)[0] = 0xc1;
	}
	size_t rec_len;
	void *rec = sim_recover_record(batch, &rec_len);
	uint64_t seq = sim_ring_put(&r->log, rec, rec_len, 0);
	r->last_seq = (int64_t)seq;
	r->published++;
	uint64_t now = sim_now_ns();
	if (r->stall_until > now && !r->pending) {
		r->pending = true;
		r->pending_from = seq;
	}
	pthread_mutex_unlock(&r->mu);

	/* The replay buffer is the engine thread's: no lock needed. A live
	 * send goes out before the buffer may drop the payload (a buffer of
	 * 0 keeps nothing). */
	if (!r->pending && !skip) {
		send_live(r, seq, payload, len);
	}
	sim_ring_put(&r->replay, payload, len, skip ? ENTRY_SKIPPED : 0);
	if (r->pending) {
		sim_rank_flush(r, now);
	}
	return (int64_t)seq;
}

int64_t
sim_rank_clear(sim_rank *r, sim_batch *batch, kvi_encoder *enc)
{
	KVI_INFO("clear", "pod=%u rank=%u", r->pod, r->dp_rank);
	sim_rank_begin(r, batch);
	sim_kv_clear(r->kv, batch);
	return sim_rank_commit(r, batch, enc);
}

bool
sim_rank_flush(sim_rank *r, uint64_t now_ns)
{
	pthread_mutex_lock(&r->mu);
	bool stalled = r->stall_until > now_ns;
	if (!stalled) {
		r->stall_until = 0;
	}
	pthread_mutex_unlock(&r->mu);
	if (stalled || !r->pending) {
		return stalled;
	}
	for (uint64_t s = r->pending_from; (int64_t)s <= r->last_seq; s++) {
		send_buffered(r, s);
	}
	r->pending = false;
	return false;
}

kvi_err
sim_rank_restart(sim_rank *r, void *zmq_ctx)
{
	pthread_mutex_lock(&r->mu);
	sim_kv_clear(r->kv, NULL);
	r->last_seq = -1;
	sim_ring_clear(&r->log);
	sim_ring_clear(&r->replay);
	r->skip_left = 0;
	r->garble_left = 0;
	r->stall_until = 0;
	r->forced_left = 0;
	r->restarts++;
	r->pending = false;
	/* A new engine process starts its counters from zero. */
	atomic_store(&r->cache_queries, 0);
	atomic_store(&r->cache_hits, 0);
	atomic_store(&r->started_ns, wall_ns());
	pthread_mutex_unlock(&r->mu);
	KVI_INFO("restart", "pod=%u rank=%u", r->pod, r->dp_rank);

	kvi_err rv = KVI_OK;
	if (r->pub != NULL) {
		close_socket(&r->pub);
		rv = rebind(r, zmq_ctx, true);
	}
	if (rv == KVI_OK && r->router != NULL) {
		close_socket(&r->router);
		rv = rebind(r, zmq_ctx, false);
	}
	if (rv != KVI_OK) {
		KVI_ERROR("rebind_failed", "pod=%u rank=%u error=%s", r->pod,
			  r->dp_rank, kvi_strerror(rv));
	}
	return rv;
}

/* ---- replay --------------------------------------------------------- */

void *
sim_rank_router(sim_rank *r, uint64_t now_ns)
{
	if (r->router == NULL) {
		return NULL;
	}
	pthread_mutex_lock(&r->mu);
	bool stalled = r->stall_until > now_ns;
	pthread_mutex_unlock(&r->mu);
	return stalled ? NULL : r->router;
}

static void
replay_from(sim_rank *r, const zmq_msg_t *identity, uint64_t start)
{
	uint64_t oldest;
	const void *id = zmq_msg_data((zmq_msg_t *)identity);
	size_t id_len = zmq_msg_size((zmq_msg_t *)identity);
	const char *topic = r->cfg->topic;
	uint8_t seq8[8];
	if (sim_ring_oldest(&r->replay, &oldest)) {
		uint64_t s = start > oldest ? start : oldest;
		for (; (int64_t)s <= r->last_seq; s++) {
			const sim_ring_entry *e = sim_ring_get(&r->replay, s);
			kvi_seq_put(seq8, s);
			const void *with[5] = {id, "", topic, seq8, e->data};
			size_t with_len[5] = {id_len, 0, strlen(topic), 8,
					      e->len};
			const void *without[4] = {id, "", seq8, e->data};
			size_t without_len[4] = {id_len, 0, 8, e->len};
			if (r->cfg->replay_topic) {
				send_frames(r->router, with, with_len, 5);
			} else {
				send_frames(r->router, without, without_len, 4);
			}
		}
	}
	kvi_seq_put(seq8, KVI_SEQ_END);
	const void *end[4] = {id, "", seq8, ""};
	size_t end_len[4] = {id_len, 0, 8, 0};
	send_frames(r->router, end, end_len, 4);
	atomic_fetch_add_explicit(&r->replays, 1, memory_order_relaxed);
}

void
sim_rank_serve_replay(sim_rank *r)
{
	for (;;) {
		zmq_msg_t parts[3];
		int n = 0;
		bool more = true;
		while (more) {
			zmq_msg_t m;
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, r->router, ZMQ_DONTWAIT) < 0) {
				zmq_msg_close(&m);
				break;
			}
			more = zmq_msg_more(&m);
			if (n < 3) {
				parts[n] = m;
			} else {
				zmq_msg_close(&m);
			}
			n++;
		}
		if (n == 0) {
			return;
		}
		/* [identity, b"", start_seq8]; anything else is ignored. */
		if (n == 3 && zmq_msg_size(&parts[1]) == 0 &&
		    zmq_msg_size(&parts[2]) == 8) {
			replay_from(r, &parts[0],
				    kvi_seq_get(zmq_msg_data(&parts[2])));
		}
		for (int i = 0; i < n && i < 3; i++) {
			zmq_msg_close(&parts[i]);
		}
	}
}

/* ---- HTTP thread ---------------------------------------------------- */

void
sim_rank_stats_get(sim_rank *r, sim_rank_stats *out)
{
	uint64_t now = sim_now_ns();
	pthread_mutex_lock(&r->mu);
	out->seq = r->last_seq;
	out->published = r->published;
	out->skipped = r->skipped;
	out->restarts = r->restarts;
	out->requests = r->requests;
	sim_kv_counts counts;
	sim_kv_counts_get(r->kv, &counts);
	out->gpu_blocks = counts.gpu;
	out->cpu_blocks = counts.cpu;
	out->n_groups = counts.n_groups;
	memcpy(out->group_blocks, counts.group, sizeof(out->group_blocks));
	out->stalled = r->stall_until > now;
	pthread_mutex_unlock(&r->mu);
	out->sent = atomic_load_explicit(&r->sent, memory_order_relaxed);
	out->replays = atomic_load_explicit(&r->replays, memory_order_relaxed);
}

static void
put_hash_string(sim_buf *out, uint64_t v)
{
	sim_buf_puts(out, "\"");
	sim_buf_u64(out, v);
	sim_buf_puts(out, "\"");
}

/* put_groups writes the indices of the bits set in groups. */
static void
put_groups(sim_buf *out, uint32_t groups)
{
	bool first = true;
	for (uint32_t g = 0; g < 32; g++) {
		if (groups & (1u << g)) {
			sim_buf_puts(out, first ? "" : ",");
			sim_buf_u64(out, g);
			first = false;
		}
	}
}

void
sim_rank_truth(sim_rank *r, sim_buf *out)
{
	pthread_mutex_lock(&r->mu);
	size_t n;
	sim_block_info *blocks = sim_kv_snapshot(r->kv, &n);
	int64_t seq = r->last_seq;
	pthread_mutex_unlock(&r->mu);

	sim_buf_puts(out, "{\"pod\":");
	sim_buf_u64(out, r->pod);
	sim_buf_puts(out, ",\"rank\":");
	sim_buf_u64(out, r->dp_rank);
	sim_buf_puts(out, ",\"seq\":");
	sim_buf_i64(out, seq);
	sim_buf_puts(out, ",\"block_size\":");
	sim_buf_u64(out, r->cfg->block_size);
	sim_buf_puts(out, ",\"blocks\":[");
	for (size_t i = 0; i < n; i++) {
		const sim_block_info *b = &blocks[i];
		sim_buf_puts(out, i > 0 ? ",{\"hash\":" : "{\"hash\":");
		put_hash_string(out, b->hash);
		sim_buf_puts(out, ",\"parent\":");
		if (b->has_parent) {
			put_hash_string(out, b->parent);
		} else {
			sim_buf_puts(out, "null");
		}
		sim_buf_puts(out, ",\"local_hash\":");
		put_hash_string(out, b->local_hash);
		sim_buf_puts(out, ",\"seq_hash\":");
		put_hash_string(out, b->seq_hash);
		sim_buf_puts(out, ",\"tiers\":[");
		if (b->tiers & SIM_TIER_GPU) {
			sim_buf_puts(out, "\"gpu\"");
		}
		if (b->tiers & SIM_TIER_CPU) {
			sim_buf_puts(out, (b->tiers & SIM_TIER_GPU)
					      ? ",\"cpu\""
					      : "\"cpu\"");
		}
		sim_buf_puts(out, "],\"groups\":[");
		put_groups(out, b->groups);
		sim_buf_puts(out, "]}");
	}
	sim_buf_puts(out, "]}");
	kvi_free(blocks);
}

static void
write_dump(sim_rank *r, const sim_recover_origin *o, sim_buf *out)
{
	size_t n;
	sim_block_info *blocks = sim_kv_dump(r->kv, &n);
	sim_recover_write_dump(out, o, blocks, n, r->last_seq >= 0,
			       (uint64_t)r->last_seq);
	kvi_free(blocks);
}

sim_recover_kind
sim_rank_recover(sim_rank *r, const sim_recover_query *q, sim_buf *out)
{
	sim_recover_origin o = {.worker_id = r->pod, .dp_rank = r->wire_rank};
	pthread_mutex_lock(&r->mu);
	bool has_newest = r->last_seq >= 0;
	uint64_t newest = (uint64_t)r->last_seq;
	sim_recover_kind kind;
	if (r->forced_left > 0) {
		r->forced_left--;
		kind = r->forced;
	} else {
		kind = sim_recover_decide(q, &r->log, has_newest, newest);
	}
	switch (kind) {
	case SIM_RECOVER_EVENTS:
		sim_recover_write_events(out, &o, &r->log, q->start,
					 q->end < newest ? q->end : newest);
		break;
	case SIM_RECOVER_TREE_DUMP:
		write_dump(r, &o, out);
		break;
	case SIM_RECOVER_TOO_NEW:
		sim_recover_write_too_new(out, q, has_newest, newest);
		break;
	case SIM_RECOVER_INVALID_RANGE:
		sim_recover_write_invalid_range(out, q);
		break;
	case SIM_RECOVER_ERROR:
		sim_recover_write_error(out, "simulated recovery failure");
		break;
	case SIM_RECOVER_HANG:
		break;
	}
	pthread_mutex_unlock(&r->mu);
	return kind;
}

void
sim_rank_fault_skip(sim_rank *r, uint32_t count)
{
	pthread_mutex_lock(&r->mu);
	r->skip_left = count;
	pthread_mutex_unlock(&r->mu);
	KVI_INFO("fault_skip", "pod=%u rank=%u count=%u", r->pod, r->dp_rank,
		 count);
}

void
sim_rank_fault_garble(sim_rank *r, uint32_t count)
{
	pthread_mutex_lock(&r->mu);
	r->garble_left = count;
	pthread_mutex_unlock(&r->mu);
	KVI_INFO("fault_garble", "pod=%u rank=%u count=%u", r->pod, r->dp_rank,
		 count);
}

void
sim_rank_fault_stall(sim_rank *r, uint64_t ms)
{
	pthread_mutex_lock(&r->mu);
	r->stall_until = sim_now_ns() + ms * 1000000u;
	pthread_mutex_unlock(&r->mu);
	KVI_INFO("fault_stall", "pod=%u rank=%u ms=%llu", r->pod, r->dp_rank,
		 (unsigned long long)ms);
}

void
sim_rank_fault_recover(sim_rank *r, sim_recover_kind kind, uint32_t count)
{
	pthread_mutex_lock(&r->mu);
	r->forced = kind;
	r->forced_left = count;
	pthread_mutex_unlock(&r->mu);
	KVI_INFO("fault_recover", "pod=%u rank=%u kind=%s count=%u", r->pod,
		 r->dp_rank, sim_recover_kind_name(kind), count);
}
