/*
 * bench_query_bodies.c - building bench_query's request bodies
 * (bench_query_bodies.h).
 */
#include "bench_query_bodies.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "sim_load.h"

/* token_list writes a prompt of blocks blocks (0: nb) from tokens[0..nb
 * blocks), padded with fresh tokens, as a new string "[t,t,...]". */
static char *
token_list(const bq_bodies_spec *spec, const uint32_t *tokens, uint32_t nb,
	   uint32_t *rnd, size_t *len, uint32_t *out_blocks)
{
	uint32_t bs = spec->block_size;
	uint32_t n = (spec->blocks ? spec->blocks : nb) * bs;
	size_t cap = (size_t)n * 8 + 8;
	char *s = kvi_malloc(cap);
	size_t k = 0;
	s[k++] = '[';
	for (uint32_t i = 0; i < n; i++) {
		uint32_t t =
		    i < nb * bs
			? tokens[i]
			: (*rnd = *rnd * 1103515245u + 12345u) % SIM_VOCAB;
		k += (size_t)snprintf(s + k, cap - k, "%s%u", i ? "," : "", t);
	}
	s[k++] = ']';
	s[k] = '\0';
	*len = k;
	*out_blocks = n / bs;
	return s;
}

static void
add(bq_bodies *b, const char *model, const char *tokens, size_t tlen,
    uint32_t blocks, uint32_t top_k)
{
	char tail[32] = "}";
	if (top_k > 0) {
		snprintf(tail, sizeof(tail), ",\"top_k\":%u}", top_k);
	}
	size_t len = strlen("{\"model_name\":\"\",\"token_ids\":") +
		     strlen(model) + tlen + strlen(tail);
	char *body = kvi_malloc(len + 1);
	snprintf(body, len + 1, "{\"model_name\":\"%s\",\"token_ids\":%s%s",
		 model, tokens, tail);
	b->body[b->n] = body;
	b->len[b->n] = len;
	b->blocks[b->n] = blocks;
	b->n++;
}

kvi_err
bq_bodies_build(const bq_bodies_spec *spec, const uint32_t *top_k,
		bq_bodies *const *out, size_t n_forms, char *err, size_t errlen)
{
	sim_load_config lc = {.trace_path = spec->trace,
			      .block_size = spec->block_size,
			      .blocks_per_id = spec->blocks_per_id,
			      .copies = 1,
			      .requests = spec->n};
	sim_load *load;
	kvi_err rc = sim_load_open(&lc, &load, err, errlen);
	if (rc != KVI_OK) {
		return rc;
	}
	for (size_t f = 0; f < n_forms; f++) {
		out[f]->body = kvi_calloc(spec->n + 1, sizeof(char *));
		out[f]->len = kvi_calloc(spec->n + 1, sizeof(size_t));
		out[f]->blocks = kvi_calloc(spec->n + 1, sizeof(uint32_t));
		out[f]->n = 0;
	}
	const uint32_t *tokens;
	uint32_t nb, rnd = 7, blocks;
	size_t tlen;
	while (out[0]->n < spec->n && sim_load_next(load, &tokens, &nb)) {
		char *list = token_list(spec, tokens, nb, &rnd, &tlen, &blocks);
		for (size_t f = 0; f < n_forms; f++) {
			add(out[f], spec->model, list, tlen, blocks, top_k[f]);
		}
		kvi_free(list);
	}
	sim_load_free(load);
	return KVI_OK;
}

void
bq_bodies_fini(bq_bodies *b)
{
	for (size_t i = 0; i < b->n; i++) {
		kvi_free(b->body[i]);
	}
	kvi_free(b->body);
	kvi_free(b->len);
	kvi_free(b->blocks);
	b->body = NULL;
	b->len = NULL;
	b->blocks = NULL;
	b->n = 0;
}
