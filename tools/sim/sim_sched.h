/*
 * sim_sched.h - the time a rank takes to prefill: a FIFO of requests and
 * chunked prefill at a fixed rate (--prefill-rate, tools/sim/README.md).
 *
 * A rank prefills one request at a time, in arrival order. A request
 * starts when it is the head of the queue and the rank is free (at the end
 * of the previous request, or at its arrival on an idle rank). It then
 * takes its hit as vLLM's KVCacheManager.get_computed_blocks does: the
 * longest prefix cached on GPU in whole blocks, capped at num_tokens - 1
 * tokens, so a prompt cached in full recomputes its last block. The
 * uncached tokens are computed at the rate, in steps of at most `chunk`
 * tokens (0: one step), as vLLM v1's chunked prefill. At the end of each
 * step the full blocks that step computed are cached (evicting for them
 * then; the request's own blocks are pinned) and the step's events form
 * one batch, as vLLM's scheduler caches the blocks of a step in
 * allocate_slots and publishes the events the step produced at its end.
 *
 * On a rank with KV cache groups (sim_groups.h) the same happens per
 * group (sim_sched_start_groups, sim_sched_step_groups): the hit is the
 * hybrid one, and with a Mamba group in mamba_cache_mode "align" steps
 * are cut as vLLM's Scheduler._mamba_block_aligned_split cuts them: a step
 * that ends before the prompt's last block boundary ends on a block
 * boundary, and one that would pass it ends there.
 *
 * Times are simulated from the schedule, not measured: step k ends at
 * start + (tokens computed through step k) / rate, whenever the caller
 * gets to run it. The caller (the engine thread) calls sim_sched_start
 * when sim_sched_due says nothing runs, and sim_sched_step once the
 * current step's end has passed.
 *
 * Pure: no I/O, no locking, no clock of its own.
 */
#ifndef KVI_SIM_SCHED_H
#define KVI_SIM_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "hash.h"
#include "sim_cache.h"
#include "sim_groups.h"

/* One request. The inputs are owned by the job (sim_job_alloc); the
 * outcome is written by the scheduler. */
typedef struct sim_job {
	uint32_t *tokens;  /* n_blocks full blocks */
	uint32_t n_blocks; /* full blocks of the prompt */
	uint64_t n_tokens; /* prompt tokens, a partial last block included */
	kvi_prompt_keys keys;
	bool has_keys;
	void *ctx; /* the caller's; NULL: nobody waits for the outcome */
	/* outcome */
	kvi_err result;
	uint64_t arrival_ns;
	uint64_t start_ns;
	uint64_t end_ns; /* set at the start: the schedule is known */
	uint32_t hit_blocks;
	uint64_t hit_tokens;
	uint32_t stored; /* blocks new on GPU */
	uint32_t cpu_loaded;
	uint32_t removed;       /* blocks removed, all tiers */
	uint32_t batches;       /* published batches (the caller counts) */
	int64_t seq;            /* the last one's seq, -1: none */
	uint64_t *local_hashes; /* of every cached-size full block */
	uint32_t n_local;
	/* private */
	char *text;
	kvi_mm_item *mm;
	uint64_t done_tokens;
	uint64_t prev_tokens; /* where the previous step started */
	uint32_t done_blocks;
	struct sim_job *next;
} sim_job;

/* sim_job_alloc returns a job over tokens (n_blocks * bs tokens, taken
 * over; a kvi_malloc'ed array) of a prompt of n_tokens tokens, with a copy
 * of keys (NULL: none). */
sim_job *sim_job_alloc(uint32_t *tokens, uint32_t n_blocks, uint64_t n_tokens,
		       const kvi_prompt_keys *keys);
void sim_job_free(sim_job *j);

typedef struct sim_sched_config {
	double rate;         /* tokens per second, > 0 */
	uint64_t chunk;      /* tokens per step; 0: the whole prompt */
	uint32_t block_size; /* the cache's */
	uint32_t max_queue;  /* waiting requests at most */
	uint32_t align;      /* steps' block boundary ("align"); 0: none */
} sim_sched_config;

typedef struct sim_sched {
	sim_sched_config cfg;
	sim_job *head; /* waiting, oldest first */
	sim_job *tail;
	uint32_t queued;
	sim_job *cur;         /* prefilling, NULL: idle */
	uint64_t step_end_ns; /* the current step's end */
	uint64_t clock_ns;    /* when the last request ended */
	sim_batch scratch;
} sim_sched;

void sim_sched_init(sim_sched *s, const sim_sched_config *cfg);
/* sim_sched_fini frees every job left. */
void sim_sched_fini(sim_sched *s);

/* sim_sched_push appends j, arrived at now_ns, and writes into *ahead how
 * many requests are before it (the running one included). Returns false,
 * leaving j to the caller, when max_queue requests already wait. */
bool sim_sched_push(sim_sched *s, sim_job *j, uint64_t now_ns, uint32_t *ahead);

/* sim_sched_start starts the head of the queue if nothing runs, taking
 * its hit from c, and returns it (NULL: nothing started). */
sim_job *sim_sched_start(sim_sched *s, sim_cache *c);

/* sim_sched_start_groups and sim_sched_step_groups are sim_sched_start
 * and sim_sched_step on KV cache groups. */
sim_job *sim_sched_start_groups(sim_sched *s, sim_groups *g);
sim_job *sim_sched_step_groups(sim_sched *s, sim_groups *g, sim_batch *batch);

/* sim_sched_due returns when the current step ends, UINT64_MAX when no
 * request runs. */
uint64_t sim_sched_due(const sim_sched *s);

/* sim_sched_step runs the current step into batch (its evictions and
 * stores on c). Returns the request if the step ended it (the caller owns
 * it from then on), NULL otherwise. */
sim_job *sim_sched_step(sim_sched *s, sim_cache *c, sim_batch *batch);

/* sim_sched_drain removes every request, the running one first, and
 * returns them as a list linked by next (a restart). */
sim_job *sim_sched_drain(sim_sched *s);

/* sim_sched_busy_until returns when the running request ends, 0 when
 * idle. */
uint64_t sim_sched_busy_until(const sim_sched *s);

#endif /* KVI_SIM_SCHED_H */
