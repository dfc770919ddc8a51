/*
 * sim_prom.h - the Prometheus text of one pod's engine, as vLLM v1's
 * PrometheusStatLogger exports it and prometheus_client writes it: the
 * prefix cache's queries and hits (counters, in tokens, with their
 * _created gauges) and the requests running and waiting, one sample per
 * data-parallel rank (label engine) with the model's name. Pure.
 */
#ifndef KVI_SIM_PROM_H
#define KVI_SIM_PROM_H

#include <stdint.h>

#include "sim_engine.h"
#include "sim_json.h"
#include "sim_rank.h"

/* What one rank's samples say. */
typedef struct sim_prom_rank {
	sim_rank_metrics m;
	sim_engine_load load;
} sim_prom_rank;

/* sim_prom_write appends the text of ranks[0..dp), engine 0..dp-1. */
void sim_prom_write(sim_buf *b, const char *model, const sim_prom_rank *ranks,
		    uint32_t dp);

#endif /* KVI_SIM_PROM_H */
