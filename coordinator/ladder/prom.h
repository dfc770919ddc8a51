/*
 * prom.h - reading counters out of an engine's Prometheus text.
 *
 * vLLM exports its prefix cache's counters once per engine process, and
 * with data parallelism one process serves every rank of a pod: each
 * sample carries the rank in its "engine" label, e.g.
 *
 *   vllm:prefix_cache_queries_total{engine="1",model_name="m"} 4096.0
 *
 * kvc_prom_by_engine reads the samples of one counter, per engine. It reads
 * the text exposition format (comments, label values with \", \\ and \n
 * escapes, an optional timestamp) and skips lines it cannot read rather
 * than failing the scrape. Pure: no I/O, any thread.
 */
#ifndef KVI_COORDINATOR_LADDER_PROM_H
#define KVI_COORDINATOR_LADDER_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The counters read, as vLLM v1's PrometheusStatLogger names them (in
 * tokens: prompt tokens queried, and those found cached). */
#define KVC_PROM_QUERIES "vllm:prefix_cache_queries_total"
#define KVC_PROM_HITS    "vllm:prefix_cache_hits_total"

/* kvc_prom_by_engine adds the value of every sample of the counter name
 * whose "engine" label is a decimal below max to out[engine], and sets
 * seen[engine]; samples of one engine with other labels (models) add up.
 * Returns the number of samples taken. */
size_t kvc_prom_by_engine(const char *text, size_t len, const char *name,
			  uint64_t *out, bool *seen, size_t max);

#endif /* KVI_COORDINATOR_LADDER_PROM_H */
