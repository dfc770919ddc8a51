/*
 * bench_query_packed.h - the compact form of a /query request, which
 * bench_query sends beside the JSON body of the same prompt:
 *
 *   POST /query?model_name=<percent-escaped model>[&top_k=K]
 *   Content-Type: application/octet-stream
 *   body: the prompt's token ids, each a little-endian u32, packed (4 bytes
 *         a token, no header)
 *
 * The answer is the same JSON as to {"model_name": M, "token_ids": [...],
 * "top_k": K}, byte for byte, which bench_query checks before it measures.
 * Pure: no I/O but the report of a mismatch on stderr.
 */
#ifndef KVI_TESTS_BENCH_QUERY_PACKED_H
#define KVI_TESTS_BENCH_QUERY_PACKED_H

#include <stddef.h>
#include <stdint.h>

#define BQ_PACKED_TYPE "application/octet-stream"

/* bq_packed_target returns the request target for model and top_k (0: no
 * top_k) in a new string (kvi_free): model is percent-escaped, every byte
 * but A-Z a-z 0-9 - . _ ~ written %XX. */
char *bq_packed_target(const char *model, uint32_t top_k);

/* bq_packed_body returns tokens[0..n) as a packed body of 4 * n bytes in
 * a new buffer (kvi_free; n = 0 gives an empty one). */
char *bq_packed_body(const uint32_t *tokens, size_t n);

/* bq_packed_compare compares the answers to the packed bodies of a set,
 * packed[i] (packed_len[i] bytes), with those to the JSON bodies of the
 * same prompts, json[i], for i < n. It prints the first few that differ
 * to stderr, named by set and i, with the first byte where they part, and
 * returns how many differ. */
size_t bq_packed_compare(const char *set, char *const *json,
			 const size_t *json_len, char *const *packed,
			 const size_t *packed_len, size_t n);

#endif /* KVI_TESTS_BENCH_QUERY_PACKED_H */
