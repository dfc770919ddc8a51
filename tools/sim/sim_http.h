/*
 * sim_http.h - the simulator's HTTP servers: the control API and each
 * rank's /kv_recover endpoint.
 *
 * Every server runs on one libevent base, owned by the main thread. The
 * control API (tools/sim/README.md) reads state from the ranks and the
 * engine, sets fault knobs directly on a rank, and hands everything that
 * touches a socket or publishes (prefill, clear, restart) to the engine
 * thread with sim_engine_call, which it waits for. /kv_recover answers are
 * built under the rank's mutex (sim_rank_recover) and sent in one buffer.
 *
 * Request bodies are JSON; a bad request gets 400 {"error": "..."}.
 *
 * In timed mode a /prefill is queued on its rank (SIM_CMD_ENQUEUE) and its
 * reply deferred: the engine hands the finished request back through a
 * list and an eventfd watched by the event loop, which replies then,
 * unless the client has gone (the connection's close callback forgets the
 * request). Each pod may serve GET /metrics on a port of its own.
 */
#ifndef KVI_SIM_HTTP_H
#define KVI_SIM_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "sim_engine.h"
#include "sim_rank.h"

struct event_base;

typedef struct sim_http_config {
	uint32_t dp; /* ranks per pod: rank index = pod * dp + r */
	uint32_t pods;
	uint32_t block_size;
	uint32_t blocks_per_id; /* for /prefill hash_ids */
	const char *model;      /* the metrics' model_name */
} sim_http_config;

typedef struct sim_http sim_http;

/* sim_http_alloc returns the servers over ranks[0..n) and engine (both
 * borrowed); nothing is bound yet. */
sim_http *sim_http_alloc(struct event_base *base, const sim_http_config *cfg,
			 sim_engine *engine, sim_rank **ranks, size_t n);
void sim_http_free(sim_http *h);

/* sim_http_bind_control binds the control API on host:port (0 =
 * ephemeral) and writes the bound port into *bound. Returns KVI_EIO. */
kvi_err sim_http_bind_control(sim_http *h, const char *host, int port,
			      int *bound);

/* sim_http_bind_recover binds rank i's /kv_recover on base + i (base 0: a
 * free range) and writes the base into *chosen. Errors as sim_bind_range. */
kvi_err sim_http_bind_recover(sim_http *h, const char *ip, int base,
			      int *chosen);

/* sim_http_bind_metrics binds pod p's GET /metrics (vLLM's Prometheus
 * counters of its ranks) on base + p (base 0: a free range) and writes the
 * base into *chosen. Errors as sim_bind_range. */
kvi_err sim_http_bind_metrics(sim_http *h, const char *ip, int base,
			      int *chosen);

#endif /* KVI_SIM_HTTP_H */
