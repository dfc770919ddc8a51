/*
 * bench_query_json.h - the /query JSON of bench_query's Redis-backed index:
 * the request parser and the answer writer. Both work on bytes only.
 *
 * The parser reads the request shape of API.md that the benchmark sends,
 * {"model_name": "m", "token_ids": [...], "top_k": 8?}: other members are
 * skipped whatever their value; token ids must be u32 integers. It walks
 * the text once and allocates only the token array, as kvindex's own fast
 * path does, so that neither index pays for a JSON tree the other does
 * not build.
 *
 * The writer produces the compatible answer of API.md (scores, instances,
 * frequencies, model_name, block_size, query_blocks, workers best first,
 * best, partial) from one match per listener, written as text.
 */
#ifndef KVI_TESTS_BENCH_QUERY_JSON_H
#define KVI_TESTS_BENCH_QUERY_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct bq_query {
	uint32_t *tokens; /* kvi_malloc; the caller frees it */
	size_t n_tokens;
	uint32_t top_k;    /* 0: every listener with a match */
	const char *model; /* into the body, not NUL-terminated */
	size_t model_len;
} bq_query;

/* bq_query_parse parses body[0..len) into *out (written only on success).
 * Returns KVI_EPROTO for text that is not such an object (or lacks
 * token_ids or model_name), KVI_ERANGE for a token id or top_k outside
 * its range. */
kvi_err bq_query_parse(const char *body, size_t len, bq_query *out);

/* One listener's match: blocks of the prompt's prefix it holds on any
 * tier (longest), and on the GPU and CPU tiers. */
typedef struct bq_match {
	uint64_t instance_id;
	uint16_t rank;
	const char *pod; /* borrowed */
	uint32_t longest, gpu, cpu;
} bq_match;

/* bq_match_best_first orders matches as "workers" lists them: most
 * matched blocks first, then most on the GPU, then by instance id and
 * rank (qsort comparator on bq_match). */
int bq_match_best_first(const void *a, const void *b);

/* bq_answer_text writes the answer for matches m[0..n) (n > 0 only for
 * listeners that matched; reordered in place) of a query of query_blocks
 * blocks, keeping the best top_k when top_k > 0. Returns a new string
 * (kvi_free) and its length in *len. */
char *bq_answer_text(bq_match *m, size_t n, uint32_t top_k, const char *model,
		     size_t model_len, uint32_t block_size,
		     uint32_t query_blocks, size_t *len);

/* bq_u64_text writes v in decimal into buf (not NUL-terminated) and
 * returns its length. */
size_t bq_u64_text(char buf[24], uint64_t v);

#endif /* KVI_TESTS_BENCH_QUERY_JSON_H */
