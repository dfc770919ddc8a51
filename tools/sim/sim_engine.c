#include "sim_engine.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "alloc.h"
#include "log.h"
#include "sim_keys.h"
#include "sim_latesub.h"
#include "sim_os.h"

#define SLICE_NS      5000000ull /* generation slice at rate 0 */
#define SLICE_RANK_NS 20000ull   /* at least this much per rank polled */
#define IDLE_WAIT_MS  100
#define STALL_WAIT_MS 5             /* poll period while a rank is stalled */
#define MAX_LAG_NS    1000000000ull /* beyond this, a late rate resets */

struct sim_engine {
	sim_engine_config cfg;
	void *zmq_ctx;
	sim_rank **ranks;
	size_t n;
	sim_load *load;
	kvi_encoder enc[SIM_FLAVOUR_COUNT]; /* one per flavour */
	sim_batch batch;
	pthread_t thread;
	bool started;
	int wake_fd;
	/* command queue, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	sim_command *head;
	sim_command *tail;
	bool stopping;
	bool closed;
	/* engine thread */
	zmq_pollitem_t *items;
	size_t *item_rank; /* i: rank i's ROUTER; n + i: its XPUB */
	sim_latesub *late; /* per rank with --sub-delay-ms, else NULL */
	uint32_t late_batches;
	uint64_t rng;
	uint64_t next_rr;
	uint64_t due_ns;
	bool generating;
	uint64_t active_since;
	uint64_t active_ns;
	/* shared */
	_Atomic bool paused;
	_Atomic bool load_done;
	_Atomic uint64_t requests_done;
	_Atomic uint64_t stored_blocks;
	_Atomic uint64_t removed_blocks;
	_Atomic uint64_t batches;
	/* timed mode (NULL otherwise): per rank, engine thread */
	sim_sched *sched;
	uint64_t jobs; /* queued or running, all ranks */
	sim_job_done_fn done_fn;
	void *done_arg;
	/* per rank, read by anyone */
	_Atomic uint32_t *waiting;
	_Atomic uint64_t *busy_until;
};

sim_engine *
sim_engine_alloc(const sim_engine_config *cfg, void *zmq_ctx, sim_rank **ranks,
		 size_t n, sim_load *load)
{
	sim_engine *e = kvi_calloc(1, sizeof(*e));
	e->cfg = *cfg;
	if (e->cfg.requests_per_batch == 0) {
		e->cfg.requests_per_batch = 1;
	}
	e->zmq_ctx = zmq_ctx;
	e->ranks = ranks;
	e->n = n;
	e->load = load;
	e->wake_fd = -1;
	for (int f = 0; f < SIM_FLAVOUR_COUNT; f++) {
		sim_flavour_encoder_init(&e->enc[f], (sim_flavour)f, cfg->form,
					 cfg->hash_form);
	}
	sim_batch_init(&e->batch, cfg->block_size);
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	e->items = kvi_calloc(2 * n + 1, sizeof(*e->items));
	e->item_rank = kvi_calloc(2 * n + 1, sizeof(*e->item_rank));
	if (cfg->sub_delay_ms > 0) {
		e->late = kvi_calloc(n, sizeof(*e->late));
	}
	e->rng = cfg->seed ^ 0x726f757465000000u;
	atomic_init(&e->paused, cfg->paused);
	atomic_init(&e->load_done, load == NULL);
	if (cfg->prefill_rate > 0) {
		sim_sched_config sc = {.rate = cfg->prefill_rate,
				       .chunk = cfg->prefill_chunk,
				       .block_size = cfg->block_size,
				       .max_queue = cfg->max_queue};
		e->sched = kvi_calloc(n, sizeof(*e->sched));
		e->waiting = kvi_calloc(n, sizeof(*e->waiting));
		e->busy_until = kvi_calloc(n, sizeof(*e->busy_until));
		for (size_t i = 0; i < n; i++) {
			const sim_groups_config *g = sim_rank_groups(ranks[i]);
			sc.align = g != NULL ? sim_groups_step_align(g) : 0;
			sim_sched_init(&e->sched[i], &sc);
			atomic_init(&e->waiting[i], 0);
			atomic_init(&e->busy_until[i], 0);
		}
	}
	return e;
}

void
sim_engine_set_done(sim_engine *e, sim_job_done_fn fn, void *arg)
{
	e->done_fn = fn;
	e->done_arg = arg;
}

bool
sim_engine_timed(const sim_engine *e)
{
	return e->sched != NULL;
}

void
sim_engine_load_get(sim_engine *e, size_t i, sim_engine_load *out)
{
	memset(out, 0, sizeof(*out));
	if (e->sched == NULL) {
		return;
	}
	out->waiting = atomic_load(&e->waiting[i]);
	out->busy_until_ns = atomic_load(&e->busy_until[i]);
	out->running = out->busy_until_ns != 0;
}

static uint64_t
next_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static kvi_encoder *
encoder_of(sim_engine *e, const sim_rank *r)
{
	return &e->enc[sim_rank_flavour(r)];
}

static void
count_blocks(sim_engine *e, const sim_batch *b)
{
	uint64_t stored = 0, removed = 0;
	for (uint32_t i = 0; i < b->n_events; i++) {
		if (b->events[i].type == SIM_EV_STORED) {
			stored += b->events[i].n;
		} else if (b->events[i].type == SIM_EV_REMOVED) {
			removed += b->events[i].n;
		}
	}
	atomic_fetch_add(&e->stored_blocks, stored);
	atomic_fetch_add(&e->removed_blocks, removed);
	if (b->n_events > 0) {
		atomic_fetch_add(&e->batches, 1);
	}
}

static void
log_load_done(sim_engine *e, uint64_t now)
{
	if (e->generating) {
		e->active_ns += now - e->active_since;
		e->generating = false;
	}
	double secs = (double)e->active_ns / 1e9;
	uint64_t stored = atomic_load(&e->stored_blocks);
	uint64_t removed = atomic_load(&e->removed_blocks);
	KVI_INFO("load_done",
		 "requests=%llu batches=%llu stored_blocks=%llu "
		 "removed_blocks=%llu seconds=%.3f block_events_per_s=%.0f",
		 (unsigned long long)atomic_load(&e->requests_done),
		 (unsigned long long)atomic_load(&e->batches),
		 (unsigned long long)stored, (unsigned long long)removed, secs,
		 secs > 0 ? (double)(stored + removed) / secs : 0.0);
}

/* rank_keys returns the keys r's events can name: an SGLang rank serves
 * the prompt with its salt only (copied into *sg). */
static const kvi_prompt_keys *
rank_keys(const sim_rank *r, const kvi_prompt_keys *keys, kvi_prompt_keys *sg)
{
	if (keys == NULL || !sim_flavour_sglang(sim_rank_flavour(r))) {
		return keys;
	}
	*sg = (kvi_prompt_keys){.cache_salt = keys->cache_salt,
				.salt_len = keys->salt_len};
	return sg;
}

static void
note_load(sim_engine *e, size_t i)
{
	atomic_store(&e->waiting[i], e->sched[i].queued);
	atomic_store(&e->busy_until[i], sim_sched_busy_until(&e->sched[i]));
}

/* finish hands a finished or dropped request to whoever waits for it. */
static void
finish(sim_engine *e, sim_job *j)
{
	j->next = NULL;
	if (j->ctx != NULL && e->done_fn != NULL) {
		e->done_fn(e->done_arg, j);
	} else {
		sim_job_free(j);
	}
}

/* enqueue queues j on rank i; false (j left to the caller) when full. */
static bool
enqueue(sim_engine *e, size_t i, sim_job *j, uint32_t *ahead)
{
	if (!sim_sched_push(&e->sched[i], j, sim_now_ns(), ahead)) {
		return false;
	}
	e->jobs++;
	note_load(e, i);
	return true;
}

/* step_timed queues up to requests_per_batch load requests on rank idx.
 * Returns 1, 0 once the load is exhausted, -1 when the queue is full. */
static int
step_timed(sim_engine *e, size_t idx)
{
	sim_rank *r = e->ranks[idx];
	uint32_t bs = e->cfg.block_size;
	kvi_prompt_keys sg;
	int rv = 1;
	uint32_t k = 0;
	for (; k < e->cfg.requests_per_batch; k++) {
		if (e->sched[idx].queued >= e->cfg.max_queue) {
			rv = k > 0 ? 1 : -1;
			break;
		}
		const uint32_t *tokens;
		uint32_t n_blocks;
		const kvi_prompt_keys *keys;
		if (!sim_load_next_keyed(e->load, &tokens, &n_blocks, &keys)) {
			rv = 0;
			break;
		}
		size_t len = (size_t)n_blocks * bs * sizeof(uint32_t);
		uint32_t *copy = kvi_malloc(len + sizeof(uint32_t));
		memcpy(copy, tokens, len);
		const kvi_prompt_keys *rk = rank_keys(r, keys, &sg);
		sim_job *j =
		    sim_job_alloc(copy, n_blocks, (uint64_t)n_blocks * bs,
				  sim_keys_empty(rk) ? NULL : rk);
		uint32_t ahead;
		enqueue(e, idx, j, &ahead);
	}
	atomic_fetch_add(&e->requests_done, k);
	if (rv == 0) {
		atomic_store(&e->load_done, true);
		log_load_done(e, sim_now_ns());
	}
	return rv;
}

/* step runs up to requests_per_batch requests on one rank and publishes
 * their batch (timed: queues them). Returns 1, 0 once the load is
 * exhausted, -1 when the rank's queue is full. */
static int
step(sim_engine *e)
{
	size_t idx = e->cfg.route == SIM_ROUTE_ROUND_ROBIN
			 ? (size_t)(e->next_rr++ % e->n)
			 : (size_t)(next_random(&e->rng) % e->n);
	if (e->sched != NULL) {
		return step_timed(e, idx);
	}
	sim_rank *r = e->ranks[idx];
	bool more = true;
	uint32_t k = 0;
	kvi_prompt_keys sg;
	sim_rank_begin(r, &e->batch);
	for (; k < e->cfg.requests_per_batch; k++) {
		const uint32_t *tokens;
		uint32_t n_blocks;
		const kvi_prompt_keys *keys;
		if (!sim_load_next_keyed(e->load, &tokens, &n_blocks, &keys)) {
			more = false;
			break;
		}
		sim_request_result res;
		sim_rank_run(r, &e->batch, tokens, n_blocks,
			     (uint64_t)n_blocks * e->cfg.block_size,
			     rank_keys(r, keys, &sg), &res);
	}
	count_blocks(e, &e->batch);
	sim_rank_commit(r, &e->batch, encoder_of(e, r));
	atomic_fetch_add(&e->requests_done, k);
	if (!more) {
		atomic_store(&e->load_done, true);
		log_load_done(e, sim_now_ns());
	}
	return more ? 1 : 0;
}

/* generate runs the steps that are due at now and returns how long the
 * engine may wait for sockets before the next one, in ms. */
static int
generate(sim_engine *e, uint64_t now)
{
	if (atomic_load(&e->load_done)) {
		return IDLE_WAIT_MS;
	}
	if (atomic_load(&e->paused)) {
		if (e->generating) {
			e->active_ns += now - e->active_since;
			e->generating = false;
		}
		return IDLE_WAIT_MS;
	}
	if (!e->generating) {
		e->generating = true;
		e->active_since = now;
		e->due_ns = now;
	}
	if (e->cfg.rate <= 0) {
		/* Polling a thousand ROUTERs costs about a millisecond:
		 * slices grow with the fleet so that polling stays cheap. */
		uint64_t slice = e->n * SLICE_RANK_NS;
		uint64_t end = now + (slice > SLICE_NS ? slice : SLICE_NS);
		do {
			for (int i = 0; i < 16; i++) {
				int rv = step(e);
				if (rv <= 0) {
					return rv == 0 ? IDLE_WAIT_MS : 1;
				}
			}
		} while (sim_now_ns() < end);
		return 0;
	}
	uint64_t interval =
	    (uint64_t)(1e9 * e->cfg.requests_per_batch / e->cfg.rate);
	if (interval == 0) {
		interval = 1;
	}
	if (e->due_ns + MAX_LAG_NS < now) {
		e->due_ns = now;
	}
	while (e->due_ns <= now) {
		int rv = step(e);
		if (rv <= 0) {
			return rv == 0 ? IDLE_WAIT_MS : 1;
		}
		e->due_ns += interval;
		if (sim_now_ns() > now + SLICE_NS) {
			return 0;
		}
	}
	/* Like the slices at rate 0, the wait between polls grows with the
	 * fleet; the rate holds on average. */
	uint64_t min_wait = e->n * SLICE_RANK_NS / 1000000;
	uint64_t wait = (e->due_ns - now + 999999) / 1000000;
	if (wait < min_wait) {
		wait = min_wait;
	}
	return wait < 1 ? 1 : wait > IDLE_WAIT_MS ? IDLE_WAIT_MS : (int)wait;
}

static void
exec_command(sim_engine *e, sim_command *cmd)
{
	sim_rank *r = e->ranks[cmd->rank];
	cmd->result = KVI_OK;
	cmd->seq = -1;
	switch (cmd->type) {
	case SIM_CMD_PREFILL:
		sim_rank_begin(r, &e->batch);
		sim_rank_run(r, &e->batch, cmd->tokens, cmd->n_blocks,
			     cmd->n_tokens > 0
				 ? cmd->n_tokens
				 : (uint64_t)cmd->n_blocks * e->cfg.block_size,
			     cmd->keys, &cmd->req);
		cmd->local_hashes =
		    kvi_malloc((cmd->req.n_blocks + 1) * sizeof(uint64_t));
		memcpy(cmd->local_hashes, e->batch.local + cmd->req.first_block,
		       cmd->req.n_blocks * sizeof(uint64_t));
		count_blocks(e, &e->batch);
		cmd->seq = sim_rank_commit(r, &e->batch, encoder_of(e, r));
		break;
	case SIM_CMD_CLEAR:
		cmd->seq = sim_rank_clear(r, &e->batch, encoder_of(e, r));
		atomic_fetch_add(&e->batches, 1);
		break;
	case SIM_CMD_RESTART:
		if (e->sched != NULL) {
			/* The engine process dies with its requests. */
			sim_job *j = sim_sched_drain(&e->sched[cmd->rank]);
			while (j != NULL) {
				sim_job *next = j->next;
				j->result = KVI_ECLOSED;
				e->jobs--;
				finish(e, j);
				j = next;
			}
			note_load(e, cmd->rank);
		}
		cmd->result = sim_rank_restart(r, e->zmq_ctx);
		if (e->late != NULL) {
			e->late[cmd->rank] = (sim_latesub){0}; /* a new XPUB */
		}
		break;
	case SIM_CMD_ENQUEUE:
		if (e->sched == NULL) {
			cmd->result = KVI_EINVAL;
		} else if (!enqueue(e, cmd->rank, cmd->job, &cmd->ahead)) {
			cmd->result = KVI_EFULL;
		}
		break;
	}
}

/* advance_rank starts rank i's requests and runs its steps due at now. */
static void
advance_rank(sim_engine *e, size_t i, uint64_t now)
{
	sim_sched *s = &e->sched[i];
	sim_rank *r = e->ranks[i];
	for (;;) {
		if (s->cur == NULL && sim_rank_start(r, s) == NULL) {
			break;
		}
		if (sim_sched_due(s) > now) {
			break;
		}
		sim_job *cur = s->cur;
		sim_rank_begin(r, &e->batch);
		sim_job *done = sim_rank_step(r, s, &e->batch);
		count_blocks(e, &e->batch);
		int64_t seq = sim_rank_commit(r, &e->batch, encoder_of(e, r));
		if (seq >= 0) {
			cur->seq = seq;
			cur->batches++;
		}
		if (done != NULL) {
			e->jobs--;
			finish(e, done);
		}
	}
	note_load(e, i);
}

/* advance runs what is due on every rank and returns how long the engine
 * may wait for the next step, in ms. */
static int
advance(sim_engine *e, uint64_t now)
{
	if (e->sched == NULL || e->jobs == 0) {
		return IDLE_WAIT_MS;
	}
	uint64_t next = UINT64_MAX;
	for (size_t i = 0; i < e->n; i++) {
		sim_sched *s = &e->sched[i];
		if (s->cur == NULL && s->head == NULL) {
			continue;
		}
		advance_rank(e, i, now);
		uint64_t due = sim_sched_due(s);
		if (due < next) {
			next = due;
		}
	}
	if (next == UINT64_MAX) {
		return IDLE_WAIT_MS;
	}
	uint64_t t = sim_now_ns();
	if (next <= t) {
		return 0;
	}
	uint64_t ms = (next - t + 999999) / 1000000;
	return ms > IDLE_WAIT_MS ? IDLE_WAIT_MS : (int)ms;
}

/* late_subscriptions applies the subscriptions held past their delay
 * (sim_latesub.h), each after a batch of its rank's own: one request of
 * two blocks of tokens no other request has. Returns how long the engine
 * may wait for the next one, in ms. */
static int
late_subscriptions(sim_engine *e, uint64_t now)
{
	int wait = IDLE_WAIT_MS;
	for (size_t i = 0; e->late != NULL && i < e->n; i++) {
		int ms = sim_latesub_wait_ms(&e->late[i], now, IDLE_WAIT_MS);
		if (ms > 0) {
			wait = ms < wait ? ms : wait;
			continue;
		}
		sim_rank *r = e->ranks[i];
		uint32_t n = 2 * e->cfg.block_size;
		uint32_t *tokens = kvi_malloc(n * sizeof(*tokens));
		for (uint32_t j = 0; j < n; j++) {
			tokens[j] = 0x70000000u + e->late_batches * n + j;
		}
		e->late_batches++;
		sim_request_result res;
		sim_rank_begin(r, &e->batch);
		sim_rank_run(r, &e->batch, tokens, 2, n, NULL, &res);
		count_blocks(e, &e->batch);
		int64_t seq = sim_rank_commit(r, &e->batch, encoder_of(e, r));
		kvi_free(tokens);
		KVI_INFO("published_before_subscription",
			 "pod=%u rank=%u seq=%lld", sim_rank_pod(r),
			 sim_rank_dp_rank(r), (long long)seq);
		sim_latesub_apply(&e->late[i]);
	}
	return wait;
}

/* run_commands runs the queued commands; returns false when stopping. */
static bool
run_commands(sim_engine *e)
{
	pthread_mutex_lock(&e->mu);
	sim_command *cmd = e->head;
	e->head = e->tail = NULL;
	bool stopping = e->stopping;
	pthread_mutex_unlock(&e->mu);
	while (cmd != NULL) {
		sim_command *next = cmd->next;
		exec_command(e, cmd);
		pthread_mutex_lock(&e->mu);
		cmd->done = true; /* the caller may free it from here on */
		pthread_cond_broadcast(&e->cv);
		pthread_mutex_unlock(&e->mu);
		cmd = next;
	}
	return !stopping;
}

/* flush_ranks sends what ended stalls held back; returns true while some
 * rank is still stalled. */
static bool
flush_ranks(sim_engine *e, uint64_t now)
{
	bool stalled = false;
	for (size_t i = 0; i < e->n; i++) {
		stalled |= sim_rank_flush(e->ranks[i], now);
	}
	return stalled;
}

static void
poll_sockets(sim_engine *e, uint64_t now, int timeout_ms)
{
	size_t m = 0;
	e->items[m++] = (zmq_pollitem_t){
	    .socket = NULL, .fd = e->wake_fd, .events = ZMQ_POLLIN};
	for (size_t i = 0; i < e->n; i++) {
		void *s = sim_rank_router(e->ranks[i], now);
		if (s != NULL) {
			e->items[m] =
			    (zmq_pollitem_t){.socket = s, .events = ZMQ_POLLIN};
			e->item_rank[m++] = i;
		}
		s = e->late != NULL && !e->late[i].held
			? sim_rank_pub(e->ranks[i])
			: NULL;
		if (s != NULL) {
			e->items[m] =
			    (zmq_pollitem_t){.socket = s, .events = ZMQ_POLLIN};
			e->item_rank[m++] = e->n + i;
		}
	}
	int rc = zmq_poll(e->items, (int)m, timeout_ms);
	if (rc <= 0) {
		return;
	}
	if (e->items[0].revents & ZMQ_POLLIN) {
		uint64_t v;
		ssize_t got = read(e->wake_fd, &v, sizeof(v));
		(void)got;
	}
	for (size_t j = 1; j < m; j++) {
		size_t i = e->item_rank[j];
		if (!(e->items[j].revents & ZMQ_POLLIN)) {
			continue;
		}
		if (i < e->n) {
			sim_rank_serve_replay(e->ranks[i]);
		} else {
			sim_latesub_read(&e->late[i - e->n], e->items[j].socket,
					 sim_now_ns(),
					 e->cfg.sub_delay_ms * 1000000ull);
		}
	}
}

static void *
engine_main(void *arg)
{
	sim_engine *e = arg;
	while (run_commands(e)) {
		uint64_t now = sim_now_ns();
		bool stalled = flush_ranks(e, now);
		int timeout = generate(e, now);
		int due = advance(e, sim_now_ns());
		if (due < timeout) {
			timeout = due;
		}
		due = late_subscriptions(e, sim_now_ns());
		if (due < timeout) {
			timeout = due;
		}
		if (stalled && timeout > STALL_WAIT_MS) {
			timeout = STALL_WAIT_MS;
		}
		poll_sockets(e, sim_now_ns(), timeout);
	}
	return NULL;
}

kvi_err
sim_engine_start(sim_engine *e)
{
	e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->wake_fd < 0) {
		return KVI_EIO;
	}
	/* Signals are for the main thread's event loop. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&e->thread, NULL, engine_main, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		return KVI_EIO;
	}
	e->started = true;
	return KVI_OK;
}

static void
wake(sim_engine *e)
{
	uint64_t one = 1;
	ssize_t w = write(e->wake_fd, &one, sizeof(one));
	(void)w;
}

void
sim_engine_stop(sim_engine *e)
{
	pthread_mutex_lock(&e->mu);
	e->stopping = true;
	pthread_mutex_unlock(&e->mu);
	if (e->started) {
		wake(e);
		pthread_join(e->thread, NULL);
		e->started = false;
	}
	pthread_mutex_lock(&e->mu);
	for (sim_command *c = e->head; c != NULL;) {
		sim_command *next = c->next;
		c->result = KVI_ECLOSED;
		c->done = true;
		c = next;
	}
	e->head = e->tail = NULL;
	e->closed = true;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

void
sim_engine_free(sim_engine *e)
{
	if (e == NULL) {
		return;
	}
	sim_engine_stop(e);
	if (e->wake_fd >= 0) {
		close(e->wake_fd);
	}
	for (int f = 0; f < SIM_FLAVOUR_COUNT; f++) {
		kvi_encoder_fini(&e->enc[f]);
	}
	sim_batch_fini(&e->batch);
	sim_load_free(e->load);
	if (e->sched != NULL) {
		for (size_t i = 0; i < e->n; i++) {
			sim_sched_fini(&e->sched[i]);
		}
		kvi_free(e->sched);
		kvi_free((void *)e->waiting);
		kvi_free((void *)e->busy_until);
	}
	kvi_free(e->items);
	kvi_free(e->item_rank);
	kvi_free(e->late);
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->mu);
	kvi_free(e);
}

kvi_err
sim_engine_call(sim_engine *e, sim_command *cmd)
{
	pthread_mutex_lock(&e->mu);
	if (e->stopping || e->closed) {
		pthread_mutex_unlock(&e->mu);
		cmd->result = KVI_ECLOSED;
		return KVI_ECLOSED;
	}
	cmd->done = false;
	cmd->next = NULL;
	if (e->tail != NULL) {
		e->tail->next = cmd;
	} else {
		e->head = cmd;
	}
	e->tail = cmd;
	pthread_mutex_unlock(&e->mu);
	wake(e);
	pthread_mutex_lock(&e->mu);
	while (!cmd->done) {
		pthread_cond_wait(&e->cv, &e->mu);
	}
	pthread_mutex_unlock(&e->mu);
	return cmd->result;
}

void
sim_engine_set_paused(sim_engine *e, bool paused)
{
	atomic_store(&e->paused, paused);
	wake(e);
}

void
sim_engine_stats_get(sim_engine *e, sim_engine_stats *out)
{
	out->paused = atomic_load(&e->paused);
	out->load_done = atomic_load(&e->load_done);
	out->requests_done = atomic_load(&e->requests_done);
	out->stored_blocks = atomic_load(&e->stored_blocks);
	out->removed_blocks = atomic_load(&e->removed_blocks);
	out->batches = atomic_load(&e->batches);
}
