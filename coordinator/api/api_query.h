/*
 * api_query.h - a POST /query or /query_by_hash body into the query
 * path's request (qreq.h), in one pass.
 *
 * A /query body is mostly one long array of token ids (16,000 of them for
 * a 1,000-block prompt). The body is read once, front to back, by the
 * reader of api_jread.h, each field as it comes: token_ids by the 64-byte
 * reader of api_tokens.h, which the element-by-element reader takes over
 * from the last comma it read when the array holds anything else; the
 * other arrays (block_hashes, instances, mm_features) element by element
 * into what the request holds; the other fields as values. Nothing is
 * read twice, and no tree is built. Once the body is read whole, and only
 * then, the fields are checked in the API's order (model_name first,
 * whatever the body's order) with the messages of api_json.h, so that a
 * body means one thing and is refused for one reason.
 *
 * What a body may hold and the errors it is refused with are those of
 * docs/api.md#queries; tests/unit/test_api_json.c lists them, and
 * fuzz_api_json_equiv checks that these parsers agree with a reading by jansson
 * on every body.
 */
#ifndef KVI_COORDINATOR_API_QUERY_H
#define KVI_COORDINATOR_API_QUERY_H

#include <stddef.h>

#include "error.h"
#include "qerr.h"
#include "qreq.h"

/* kvc_api_query_parse parses a POST /query body into *out. Errors: 400
 * (KVI_EPROTO not JSON, KVI_EINVAL wrong type or missing/empty model_name,
 * an mm_features entry without a non-empty identifier, or out of order,
 * overlapping its predecessor or past the prompt; KVI_ERANGE a token id
 * not a u32, an instance not a u64, dp_rank not a u16, top_k not in
 * 1..KVC_QREQ_TOP_K_MAX, an mm_features offset or length not a u64 or a
 * length of 0); 413 KVI_ETOOBIG more than max_tokens token ids, or more
 * mm_features than token ids. */
kvi_err kvc_api_query_parse(const char *body, size_t len, size_t max_tokens,
			    kvc_qreq *out, kvc_qerr *err);

/* kvc_api_hash_query_parse parses a POST /query_by_hash body into *out;
 * errors as kvc_api_query_parse, with at most max_hashes block hashes. */
kvi_err kvc_api_hash_query_parse(const char *body, size_t len,
				 size_t max_hashes, kvc_qreq *out,
				 kvc_qerr *err);

/* kvc_api_routed_parse parses a POST /routed body: a /query body, or a
 * /query_by_hash body when it has block_hashes and no token_ids (at most
 * max of either), and where the request went - "pod" or "instance_id"
 * (exactly one), "dp_rank" (0 when absent), "ttl_ms" (optional, 1 ms to
 * 10 minutes). Errors as kvc_api_query_parse, and 400 for the rank named
 * wrong. */
kvi_err kvc_api_routed_parse(const char *body, size_t len, size_t max,
			     kvc_qreq *out, kvc_qerr *err);

#endif /* KVI_COORDINATOR_API_QUERY_H */
