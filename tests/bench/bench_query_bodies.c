/*
 * bench_query_bodies.c - building bench_query's request bodies
 * (bench_query_bodies.h).
 */
#include "bench_query_bodies.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "bench_query_packed.h"
#include "sim_load.h"

/* prompt writes a prompt of blocks blocks (0: nb) from tokens[0..nb
 * blocks), padded with fresh tokens, into a new array of *n tokens. */
static uint32_t *
prompt(const bq_bodies_spec *spec, const uint32_t *tokens, uint32_t nb,
       uint32_t *rnd, size_t *n, uint32_t *out_blocks)
{
	uint32_t bs = spec->block_size;
	uint32_t len = (spec->blocks ? spec->blocks : nb) * bs;
	uint32_t *p = kvi_calloc((size_t)len + 1, sizeof(uint32_t));
	for (uint32_t i = 0; i < len; i++) {
		p[i] = i < nb * bs
			   ? tokens[i]
			   : (*rnd = *rnd * 1103515245u + 12345u) % SIM_VOCAB;
	}
	*n = len;
	*out_blocks = len / bs;
	return p;
}

/* token_list writes p[0..n) as a new string "[t,t,...]" of *len bytes. */
static char *
token_list(const uint32_t *p, size_t n, size_t *len)
{
	size_t cap = n * 8 + 8;
	char *s = kvi_malloc(cap);
	size_t k = 0;
	s[k++] = '[';
	for (size_t i = 0; i < n; i++) {
		k += (size_t)snprintf(s + k, cap - k, "%s%u", i ? "," : "",
				      p[i]);
	}
	s[k++] = ']';
	s[k] = '\0';
	*len = k;
	return s;
}

static void
add(bq_bodies *b, char *body, size_t len, uint32_t blocks)
{
	b->body[b->n] = body;
	b->len[b->n] = len;
	b->blocks[b->n] = blocks;
	b->n++;
}

static char *
json_body(const char *model, const char *tokens, size_t tlen, uint32_t top_k,
	  size_t *out_len)
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
	*out_len = len;
	return body;
}

/* add_prompt adds prompt p[0..n) to every set of out. */
static void
add_prompt(const bq_bodies_spec *spec, const bq_body_form *forms,
	   bq_bodies *const *out, size_t n_forms, const uint32_t *p, size_t n,
	   uint32_t blocks)
{
	size_t tlen = 0, len;
	char *list = NULL;
	for (size_t f = 0; f < n_forms; f++) {
		if (forms[f].packed) {
			add(out[f], bq_packed_body(p, n), 4 * n, blocks);
			continue;
		}
		if (list == NULL) {
			list = token_list(p, n, &tlen);
		}
		char *body =
		    json_body(spec->model, list, tlen, forms[f].top_k, &len);
		add(out[f], body, len, blocks);
	}
	kvi_free(list);
}

kvi_err
bq_bodies_build(const bq_bodies_spec *spec, const bq_body_form *forms,
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
		if (forms[f].packed) {
			out[f]->target =
			    bq_packed_target(spec->model, forms[f].top_k);
			out[f]->content_type = BQ_PACKED_TYPE;
		}
	}
	const uint32_t *tokens;
	uint32_t nb, rnd = 7, blocks;
	size_t n;
	while (out[0]->n < spec->n && sim_load_next(load, &tokens, &nb)) {
		uint32_t *p = prompt(spec, tokens, nb, &rnd, &n, &blocks);
		add_prompt(spec, forms, out, n_forms, p, n, blocks);
		kvi_free(p);
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
	kvi_free(b->target);
	b->target = NULL;
	b->body = NULL;
	b->len = NULL;
	b->blocks = NULL;
	b->n = 0;
}
