/*
 * bench_query_check.h - whether two /query answers agree: kvindex's and
 * the Redis-backed index's to the same request.
 *
 * Both answers' "workers" are read as listener ("<instance_id>#<dp_rank>")
 * to matched_blocks. For a full answer (top_k 0) both must name the same
 * listeners with the same matched_blocks. For a top_k answer the Redis
 * one must name min(top_k, kvindex's count) listeners, the same multiset
 * of matched_blocks as kvindex's best that many, and every listener both
 * name must have the same matched_blocks; a listener only the Redis one
 * names must tie with the last of kvindex's answer cut at top_k (ties are
 * broken alike, but need not be). An answer of kvindex that ignores top_k
 * (every listener) still compares.
 * Pure: bytes in, a verdict out.
 */
#ifndef KVI_TESTS_BENCH_QUERY_CHECK_H
#define KVI_TESTS_BENCH_QUERY_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* bq_check_answer compares kvindex's answer kvi[0..kvi_len) with the
 * Redis index's red[0..red_len) to a request with top_k (0: none). It
 * returns whether they agree, adds the number of listener matches compared
 * to *pairs, and on disagreement says why in why (cap bytes). */
bool bq_check_answer(const char *kvi, size_t kvi_len, const char *red,
		     size_t red_len, uint32_t top_k, size_t *pairs, char *why,
		     size_t cap);

#endif /* KVI_TESTS_BENCH_QUERY_CHECK_H */
