/*
 * sim_engine.h - the engine thread: load generation, publishing, replay.
 *
 * One thread owns every ZeroMQ socket of every rank, as one vLLM process
 * owns its publisher: it generates the load (requests from sim_load, routed
 * to ranks, paced to a rate), publishes each step's batch, and answers
 * replay requests between steps (replay runs on the publishing thread, so
 * the live stream pauses meanwhile, as in vLLM).
 *
 * Loop: run the control commands queued by the HTTP thread; flush ranks
 * whose stall ended; run the steps that are due; zmq_poll the ROUTER sockets
 * and a wake-up eventfd until the next step is due. With a rate, steps run
 * with a granularity of 1 ms; at rate 0 they run in slices of 5 ms. Both
 * grow to 20 us per rank when that is longer, which bounds the cost of
 * polling a thousand ROUTERs (and delays replays by as much).
 *
 * Other threads talk to the engine only through sim_engine_call (a queue
 * plus the eventfd; the caller blocks until the command ran) and the
 * atomic pause flag and counters.
 *
 * Timed mode (prefill_rate > 0): every rank has a sim_sched. A /prefill
 * (SIM_CMD_ENQUEUE) or a load request joins its rank's queue; each loop
 * starts the requests whose turn came and runs the steps whose end has
 * passed, each step one batch, and waits for sockets until the next step
 * is due. A finished request waited for (job->ctx set) goes to the done
 * callback, which runs on the engine thread and takes it over; others are
 * freed. The load waits while its rank's queue is full.
 */
#ifndef KVI_SIM_ENGINE_H
#define KVI_SIM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "sim_load.h"
#include "sim_rank.h"

typedef enum sim_route {
	SIM_ROUTE_RANDOM = 0,
	SIM_ROUTE_ROUND_ROBIN,
} sim_route;

typedef struct sim_engine_config {
	double rate;                 /* requests/s over the fleet; 0 = max */
	uint32_t requests_per_batch; /* requests folded into one step */
	sim_route route;
	uint64_t seed;
	bool paused;
	uint32_t block_size;
	kvi_event_form form; /* the default flavour's encoding */
	kvi_hash_form hash_form;
	double prefill_rate;    /* tokens/s per rank; 0: requests run at once */
	uint64_t prefill_chunk; /* tokens per step; 0: the whole prompt */
	uint32_t max_queue;     /* waiting requests per rank */
	/* subscriptions take effect this late, each after a batch of its
	 * rank's own (sim_latesub.h); 0: at once */
	uint32_t sub_delay_ms;
} sim_engine_config;

typedef enum sim_command_type {
	SIM_CMD_PREFILL = 1,
	SIM_CMD_CLEAR,
	SIM_CMD_RESTART,
	SIM_CMD_ENQUEUE, /* timed mode: queue a request */
} sim_command_type;

/* A control operation for the engine thread. Inputs are set by the caller;
 * outputs are written by the engine before sim_engine_call returns. */
typedef struct sim_command {
	sim_command_type type;
	size_t rank; /* index: pod * dp + dp_rank */
	/* PREFILL input: n_blocks full blocks of tokens and the request's
	 * keys, NULL for none (borrowed) */
	const uint32_t *tokens;
	uint32_t n_blocks;
	const kvi_prompt_keys *keys;
	uint64_t n_tokens; /* PREFILL: prompt tokens (a partial block too) */
	/* ENQUEUE input: the request, taken over unless the result is
	 * KVI_EFULL (max_queue requests wait) or KVI_ECLOSED */
	struct sim_job *job;
	uint32_t ahead; /* ENQUEUE: requests before it on the rank */
	/* outputs */
	kvi_err result;
	int64_t seq; /* the published batch, -1 if none */
	sim_request_result req;
	uint64_t *local_hashes; /* PREFILL: req.n_blocks, kvi_free */
	/* private to sim_engine */
	struct sim_command *next;
	bool done;
} sim_command;

typedef struct sim_engine_stats {
	bool paused;
	bool load_done;
	uint64_t requests_done;
	uint64_t stored_blocks; /* blocks in BlockStored events, all ranks */
	uint64_t removed_blocks;
	uint64_t batches;
} sim_engine_stats;

/* A rank's queue, as /status reports it. */
typedef struct sim_engine_load {
	uint32_t waiting;       /* queued requests, the running one excluded */
	bool running;           /* a request is prefilling */
	uint64_t busy_until_ns; /* monotonic end of the running one */
} sim_engine_load;

typedef struct sim_engine sim_engine;

/* Called on the engine thread with a finished request someone waits for
 * (job->ctx set; job->result KVI_OK, or KVI_ECLOSED when a restart
 * dropped it); takes it over. */
typedef void (*sim_job_done_fn)(void *arg, sim_job *job);

/* sim_engine_alloc returns an engine over ranks[0..n) (borrowed) and load
 * (may be NULL, taken over). */
sim_engine *sim_engine_alloc(const sim_engine_config *cfg, void *zmq_ctx,
			     sim_rank **ranks, size_t n, sim_load *load);
/* sim_engine_set_done sets the done callback, before the start. */
void sim_engine_set_done(sim_engine *e, sim_job_done_fn fn, void *arg);
bool sim_engine_timed(const sim_engine *e);
/* sim_engine_load_get reads rank i's queue (any thread). */
void sim_engine_load_get(sim_engine *e, size_t i, sim_engine_load *out);

/* sim_engine_start starts the thread. Returns KVI_EIO if it cannot. */
kvi_err sim_engine_start(sim_engine *e);
/* sim_engine_stop stops and joins the thread; queued commands fail with
 * KVI_ECLOSED. Safe on an engine that was never started. */
void sim_engine_stop(sim_engine *e);
void sim_engine_free(sim_engine *e);

/* sim_engine_call runs cmd on the engine thread and waits for it. Returns
 * cmd->result: KVI_OK, KVI_ECLOSED after stop, or the command's error. */
kvi_err sim_engine_call(sim_engine *e, sim_command *cmd);

void sim_engine_set_paused(sim_engine *e, bool paused);
void sim_engine_stats_get(sim_engine *e, sim_engine_stats *out);

#endif /* KVI_SIM_ENGINE_H */
