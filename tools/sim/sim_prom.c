/*
 * sim_prom.c - a pod's /metrics text as vLLM's engine writes it
 * (sim_prom.h).
 */
#include "sim_prom.h"

#include <stdio.h>

/* put_label_value writes v with Prometheus' escapes. */
static void
put_label_value(sim_buf *b, const char *v)
{
	char one[2] = {0, 0};
	for (; *v != '\0'; v++) {
		if (*v == '\\') {
			sim_buf_puts(b, "\\\\");
		} else if (*v == '"') {
			sim_buf_puts(b, "\\\"");
		} else if (*v == '\n') {
			sim_buf_puts(b, "\\n");
		} else {
			one[0] = *v;
			sim_buf_puts(b, one);
		}
	}
}

typedef enum metric_kind {
	M_RUNNING,
	M_WAITING,
	M_QUERIES,
	M_HITS,
	M_QUERIES_CREATED,
	M_HITS_CREATED,
} metric_kind;

/* The families as vLLM's PrometheusStatLogger declares them and
 * prometheus_client writes them: a counter's samples and its HELP and
 * TYPE lines end in _total, its creation time is a _created gauge. */
static const struct {
	const char *name;
	const char *type;
	const char *help;
} families[] = {
    [M_RUNNING] = {"vllm:num_requests_running", "gauge",
		   "Number of requests in model execution batches."},
    [M_WAITING] = {"vllm:num_requests_waiting", "gauge",
		   "Number of requests waiting to be processed."},
    [M_QUERIES] = {"vllm:prefix_cache_queries_total", "counter",
		   "Prefix cache queries, in terms of number of queried "
		   "tokens."},
    [M_HITS] = {"vllm:prefix_cache_hits_total", "counter",
		"Prefix cache hits, in terms of number of cached tokens."},
    [M_QUERIES_CREATED] = {"vllm:prefix_cache_queries_created", "gauge",
			   "Prefix cache queries, in terms of number of "
			   "queried tokens."},
    [M_HITS_CREATED] = {"vllm:prefix_cache_hits_created", "gauge",
			"Prefix cache hits, in terms of number of cached "
			"tokens."},
};

static void
write_family(const sim_prom_rank *ranks, uint32_t dp, const char *model,
	     metric_kind k, sim_buf *b)
{
	char num[64];
	sim_buf_puts(b, "# HELP ");
	sim_buf_puts(b, families[k].name);
	sim_buf_puts(b, " ");
	sim_buf_puts(b, families[k].help);
	sim_buf_puts(b, "\n# TYPE ");
	sim_buf_puts(b, families[k].name);
	sim_buf_puts(b, " ");
	sim_buf_puts(b, families[k].type);
	sim_buf_puts(b, "\n");
	for (uint32_t r = 0; r < dp; r++) {
		const sim_rank_metrics m = ranks[r].m;
		const sim_engine_load l = ranks[r].load;
		switch (k) {
		case M_RUNNING:
			snprintf(num, sizeof(num), "%d.0", l.running ? 1 : 0);
			break;
		case M_WAITING:
			snprintf(num, sizeof(num), "%u.0", l.waiting);
			break;
		case M_QUERIES:
			snprintf(num, sizeof(num), "%llu.0",
				 (unsigned long long)m.prefix_cache_queries);
			break;
		case M_HITS:
			snprintf(num, sizeof(num), "%llu.0",
				 (unsigned long long)m.prefix_cache_hits);
			break;
		case M_QUERIES_CREATED:
		case M_HITS_CREATED:
			snprintf(num, sizeof(num), "%.9e",
				 (double)m.started_ns / 1e9);
			break;
		}
		/* prometheus_client sorts the labels by name */
		sim_buf_puts(b, families[k].name);
		sim_buf_puts(b, "{engine=\"");
		sim_buf_u64(b, r);
		sim_buf_puts(b, "\",model_name=\"");
		put_label_value(b, model);
		sim_buf_puts(b, "\"} ");
		sim_buf_puts(b, num);
		sim_buf_puts(b, "\n");
	}
}

void
sim_prom_write(sim_buf *b, const char *model, const sim_prom_rank *ranks,
	       uint32_t dp)
{
	static const metric_kind order[] = {M_RUNNING, M_WAITING,
					    M_QUERIES, M_QUERIES_CREATED,
					    M_HITS,    M_HITS_CREATED};
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		write_family(ranks, dp, model, order[i], b);
	}
}
