/*
 * sim_rank.h - one simulated engine rank: cache, event stream, replay,
 * recover log and fault knobs.
 *
 * A rank behaves like one data-parallel rank of a vLLM engine (docs/wire.md):
 * its seq starts at 0 and grows by one per published batch; its PUB socket
 * sends [topic, seq8, payload]; its ROUTER answers replay requests from the
 * replay buffer, ending with the seq 0xFFFFFFFFFFFFFFFF marker; its recover
 * log answers /kv_recover. A batch is published only when a step produced
 * events, as vLLM does.
 *
 * Threading. The sockets and the replay buffer belong to the engine thread
 * (sim_engine.h), which is also the only thread that changes the cache, the
 * seq and the logs. The HTTP thread reads them (/truth, /status,
 * /kv_recover) and sets the fault knobs. The rank's mutex covers everything
 * but the sockets and the replay buffer, and is held from the start of a
 * step to the moment its batch has a seq and is logged, so a reader always
 * sees a cache and a seq that belong together.
 *
 * Faults: skip (the next n batches are not sent on PUB but are buffered and
 * logged: a gap at the subscriber), garble (the next n batches are sent
 * and buffered with an unreadable envelope: a lost batch), stall (nothing is
 * sent or replayed until a deadline; batches queue in the replay buffer and go
 * out in order afterwards), forced /kv_recover answers, restart (sockets closed
 * and bound again, seq back to 0, cache and logs emptied, no events).
 */
#ifndef KVI_SIM_RANK_H
#define KVI_SIM_RANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "sim_cache.h"
#include "sim_encode.h"
#include "sim_json.h"
#include "sim_kv.h"
#include "sim_recover.h"
#include "sim_sched.h"
#include "wire_encode.h"

/* Settings shared by every rank of the simulator. */
typedef struct sim_rank_config {
	uint32_t block_size;
	uint32_t gpu_blocks;
	uint32_t cpu_blocks;
	bool offload;     /* CPU stores are offloads (sim_cache.h) */
	bool offload_bs0; /* offload stores say block_size 0 */
	uint64_t salt;
	size_t replay_buffer; /* batches kept for replay */
	size_t recover_log;   /* batches kept for /kv_recover Events */
	const char *ip;       /* bind address */
	const char *topic;    /* topic frame, "" by default */
	bool replay_topic;    /* replay replies carry the topic frame */
	bool with_rank;       /* batches carry data_parallel_rank */
	/* the live socket is an XPUB whose subscriptions take effect this
	 * late (sim_latesub.h); 0: a PUB */
	uint32_t sub_delay_ms;
} sim_rank_config;

/* A rank's counters and sizes, as /status reports them. */
typedef struct sim_rank_stats {
	int64_t seq; /* last published seq, -1 if none */
	uint64_t published;
	uint64_t sent;
	uint64_t skipped;
	uint64_t replays;
	uint64_t restarts;
	uint64_t requests;
	uint32_t gpu_blocks; /* every group's together */
	uint32_t cpu_blocks;
	bool stalled;
	size_t n_groups; /* KV cache groups; 0: the default cache */
	uint32_t group_blocks[SIM_MAX_GROUPS];
} sim_rank_stats;

/* A rank's engine metrics (vLLM's PrometheusStatLogger counters), reset
 * by a restart. */
typedef struct sim_rank_metrics {
	uint64_t started_ns;           /* wall clock of the (re)start */
	uint64_t prefix_cache_queries; /* tokens */
	uint64_t prefix_cache_hits;    /* tokens */
} sim_rank_metrics;

typedef struct sim_rank sim_rank;

/* sim_rank_alloc returns a rank of the given flavour (sim_encode.h) with
 * an empty cache and no sockets; cfg must outlive it. groups (copied;
 * NULL: the default cache) are the KV cache groups of a hybrid model
 * (sim_kv.h). */
sim_rank *sim_rank_alloc(const sim_rank_config *cfg, uint32_t pod,
			 uint32_t dp_rank, sim_flavour flavour,
			 const sim_groups_config *groups);
/* sim_rank_free closes the sockets and frees the rank. */
void sim_rank_free(sim_rank *r);

uint32_t sim_rank_pod(const sim_rank *r);
/* sim_rank_groups returns the rank's KV cache groups, NULL for the
 * default cache. */
const sim_groups_config *sim_rank_groups(const sim_rank *r);
uint32_t sim_rank_dp_rank(const sim_rank *r);

/* sim_rank_set_wire_rank makes r publish as data-parallel rank g (its
 * global rank in a group over several pods) rather than its index in its
 * pod; call before it publishes. */
void sim_rank_set_wire_rank(sim_rank *r, uint32_t g);
sim_flavour sim_rank_flavour(const sim_rank *r);

/* sim_rank_bind_pub binds the PUB socket on port; sim_rank_bind_replay the
 * ROUTER. Return KVI_OK, KVI_EEXIST (port taken) or KVI_EIO. The unbind
 * functions close the socket again (used while searching a port range). */
kvi_err sim_rank_bind_pub(sim_rank *r, void *zmq_ctx, int port);
kvi_err sim_rank_bind_replay(sim_rank *r, void *zmq_ctx, int port);
void sim_rank_unbind_pub(sim_rank *r);
void sim_rank_unbind_replay(sim_rank *r);
/* sim_rank_pub returns the live socket (engine thread), NULL when off. */
void *sim_rank_pub(sim_rank *r);

/* Engine thread: a step. sim_rank_begin takes the mutex and resets batch;
 * sim_rank_run runs one request of n_tokens prompt tokens (keys may be
 * NULL) and counts its prefix cache query; sim_rank_commit
 * publishes the batch if it has events, encoded with enc (initialised for
 * the rank's flavour), releases the mutex and returns the seq (-1 if
 * nothing was published). */
void sim_rank_begin(sim_rank *r, sim_batch *batch);
void sim_rank_run(sim_rank *r, sim_batch *batch, const uint32_t *tokens,
		  uint32_t n_blocks, uint64_t n_tokens,
		  const kvi_prompt_keys *keys, sim_request_result *res);
int64_t sim_rank_commit(sim_rank *r, sim_batch *batch, kvi_encoder *enc);

/* Timed requests (sim_sched.h), engine thread. sim_rank_start starts the
 * next request of s, if any, on the rank's cache and counts its query and
 * hit; sim_rank_step runs the current step of s between sim_rank_begin
 * and sim_rank_commit, and returns the request it ended (or NULL). */
sim_job *sim_rank_start(sim_rank *r, sim_sched *s);
sim_job *sim_rank_step(sim_rank *r, sim_sched *s, sim_batch *batch);

/* sim_rank_count_query counts one prefix cache query of tokens prompt
 * tokens of which hits were found cached (any thread). */
void sim_rank_count_query(sim_rank *r, uint64_t tokens, uint64_t hits);
void sim_rank_metrics_get(sim_rank *r, sim_rank_metrics *out);

/* sim_rank_clear publishes AllBlocksCleared after emptying the cache
 * (engine thread); returns the seq. */
int64_t sim_rank_clear(sim_rank *r, sim_batch *batch, kvi_encoder *enc);

/* sim_rank_restart restarts the rank like an engine process (engine
 * thread). Returns KVI_EIO if a socket could not be bound again. */
kvi_err sim_rank_restart(sim_rank *r, void *zmq_ctx);

/* sim_rank_router returns the ROUTER socket to poll, or NULL when replay is
 * off or the rank is stalled at now_ns (engine thread). */
void *sim_rank_router(sim_rank *r, uint64_t now_ns);

/* sim_rank_serve_replay answers every pending replay request (engine
 * thread). */
void sim_rank_serve_replay(sim_rank *r);

/* sim_rank_flush sends the batches a stall held back, once it is over at
 * now_ns; returns true while the rank is still stalled (engine thread). */
bool sim_rank_flush(sim_rank *r, uint64_t now_ns);

/* HTTP thread. */
void sim_rank_stats_get(sim_rank *r, sim_rank_stats *out);
/* sim_rank_hit writes the hit the engine would take for a prompt, and
 * each group's, without running it (/hit). */
void sim_rank_hit(sim_rank *r, const uint32_t *tokens, uint64_t n_tokens,
		  const kvi_prompt_keys *keys, sim_kv_hit *out);
/* sim_rank_truth writes the /truth JSON object. */
void sim_rank_truth(sim_rank *r, sim_buf *out);
/* sim_rank_recover writes the /kv_recover answer to q and returns its kind;
 * SIM_RECOVER_HANG means: do not answer. */
sim_recover_kind sim_rank_recover(sim_rank *r, const sim_recover_query *q,
				  sim_buf *out);

void sim_rank_fault_skip(sim_rank *r, uint32_t count);
/* sim_rank_fault_garble: the next count batches go out (live and replay)
 * with an unreadable envelope (first byte 0xc1); the cache, the truth and
 * the recover log keep their events. */
void sim_rank_fault_garble(sim_rank *r, uint32_t count);
void sim_rank_fault_stall(sim_rank *r, uint64_t ms);
void sim_rank_fault_recover(sim_rank *r, sim_recover_kind kind, uint32_t count);

#endif /* KVI_SIM_RANK_H */
