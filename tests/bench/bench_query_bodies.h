/*
 * bench_query_bodies.h - the /query request bodies bench_query sends.
 *
 * The prompts are the first n requests of a Mooncake trace as the
 * simulator expands them (sim_load.h: blocks_per_id blocks of block_size
 * tokens per hash id), so they share prefixes with what the simulated
 * fleet cached. A prompt keeps its own length, or is cut or padded to a
 * fixed number of blocks; padding is fresh pseudo-random tokens, as a long
 * prompt whose prefix is cached would be. Each prompt is written once per
 * set, in the set's answer form and body form: as JSON, {"model_name": M,
 * "token_ids": [...]} with "top_k": k appended for a form with k > 0, or
 * packed (bench_query_packed.h), M and k in the request target.
 */
#ifndef KVI_TESTS_BENCH_QUERY_BODIES_H
#define KVI_TESTS_BENCH_QUERY_BODIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_query_load.h"
#include "error.h"

typedef struct bq_bodies_spec {
	const char *trace;
	uint32_t block_size, blocks_per_id;
	uint32_t blocks; /* blocks per prompt; 0: each prompt's own */
	size_t n;        /* prompts: the trace's first n */
	const char *model;
} bq_bodies_spec;

/* How a set writes its prompts. */
typedef struct bq_body_form {
	uint32_t top_k; /* listeners asked for; 0: all */
	bool packed;    /* packed, else JSON */
} bq_body_form;

/* bq_bodies_build fills out[f] (f < n_forms) with the bodies of the same
 * prompts written as forms[f] says. It sets body, len, blocks and n, and
 * for a packed set target and content_type; kind, form, body_form and
 * id_base are the caller's. Returns the errors of sim_load_open; err
 * (errlen bytes) says why. */
kvi_err bq_bodies_build(const bq_bodies_spec *spec, const bq_body_form *forms,
			bq_bodies *const *out, size_t n_forms, char *err,
			size_t errlen);

/* bq_bodies_fini frees what bq_bodies_build allocated in b. */
void bq_bodies_fini(bq_bodies *b);

#endif /* KVI_TESTS_BENCH_QUERY_BODIES_H */
