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
} sim_engine_config;

typedef enum sim_command_type {
	SIM_CMD_PREFILL = 1,
	SIM_CMD_CLEAR,
	SIM_CMD_RESTART,
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

typedef struct sim_engine sim_engine;

/* sim_engine_alloc returns an engine over ranks[0..n) (borrowed) and load
 * (may be NULL, taken over). */
sim_engine *sim_engine_alloc(const sim_engine_config *cfg, void *zmq_ctx,
			     sim_rank **ranks, size_t n, sim_load *load);
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
